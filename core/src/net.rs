//! One pipelined connection per broker.
//!
//! A writer task owns the socket's write half and a reader task its read half; callers only hand
//! a complete frame to the writer and await a oneshot for the response, matched by correlation
//! id. A caller's future that is dropped mid-request therefore never leaves half a frame on the
//! socket: the writer finishes the frame, and the reader discards the orphaned response.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ApiVersionsRequest};
use kafka_protocol::protocol::{Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::{codes, Error, Result};
use crate::protocol::wire::{self, client_versions, MAX_FRAME_BYTES};

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<Result<Bytes>>>>>;

/// A live connection to one broker, with the API versions it supports.
pub struct Connection {
    addr: String,
    client_id: String,
    request_timeout: Duration,
    outgoing: mpsc::UnboundedSender<Bytes>,
    pending: Pending,
    next_correlation_id: AtomicI32,
    alive: Arc<AtomicBool>,
    /// api key -> (min, max) as the broker advertises them.
    broker_versions: HashMap<i16, (i16, i16)>,
    tasks: [JoinHandle<()>; 2],
}

impl Connection {
    /// Connects, then negotiates versions with ApiVersions.
    pub async fn connect(
        addr: &str,
        client_id: &str,
        setup_timeout: Duration,
        request_timeout: Duration,
    ) -> Result<Connection> {
        let stream = match tokio::time::timeout(setup_timeout, TcpStream::connect(addr)).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => return Err(Error::Transport(format!("cannot connect to broker {addr}: {e}"))),
            Err(_) => {
                return Err(Error::Transport(format!(
                    "cannot connect to broker {addr}: no answer within socket.connection.setup.timeout.ms ({} ms)",
                    setup_timeout.as_millis()
                )))
            }
        };
        let _ = stream.set_nodelay(true);
        let (read, write) = stream.into_split();
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let (tx, rx) = mpsc::unbounded_channel();
        let writer = tokio::spawn(write_loop(
            write,
            rx,
            pending.clone(),
            alive.clone(),
            addr.to_string(),
        ));
        let reader = tokio::spawn(read_loop(
            read,
            pending.clone(),
            alive.clone(),
            addr.to_string(),
        ));
        let mut conn = Connection {
            addr: addr.to_string(),
            client_id: client_id.to_string(),
            request_timeout,
            outgoing: tx,
            pending,
            next_correlation_id: AtomicI32::new(1),
            alive,
            broker_versions: HashMap::new(),
            tasks: [writer, reader],
        };
        conn.negotiate_versions().await?;
        Ok(conn)
    }

    async fn negotiate_versions(&mut self) -> Result<()> {
        let req = ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("lagless"))
            .with_client_software_version(StrBytes::from_static_str(env!("CARGO_PKG_VERSION")));
        let resp = match self.call_at_version(&req, 3, self.request_timeout).await {
            // A broker before Kafka 2.4 does not know v3 (KIP-511): it answers UNSUPPORTED_VERSION
            // in the v0 layout, which does not decode as v3. Every broker speaks v0: ask again.
            Ok(r) if r.error_code == codes::UNSUPPORTED_VERSION => None,
            Err(Error::Corrupt(_)) => None,
            other => Some(other?),
        };
        let resp = match resp {
            Some(r) => r,
            None => {
                self.call_at_version(&ApiVersionsRequest::default(), 0, self.request_timeout)
                    .await?
            }
        };
        if resp.error_code != codes::NONE {
            return Err(Error::kafka(
                resp.error_code,
                format!(
                    "ApiVersions from broker {}{}",
                    self.addr,
                    if resp.error_code == codes::UNSUPPORTED_VERSION {
                        ": the broker is too old for lagless (Kafka 2.1 or newer is required)"
                    } else {
                        ""
                    }
                ),
            ));
        }
        self.broker_versions = resp
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(())
    }

    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// The highest version of `R` that both this broker and lagless speak. A broker that has none
    /// in common is too old (or too new) for lagless: say so, with both ranges.
    pub fn version<R: Request>(&self) -> Result<i16> {
        let (cmin, cmax) = client_versions::<R>();
        let name = ApiKey::try_from(R::KEY)
            .map(|k| format!("{k:?}"))
            .unwrap_or_else(|_| R::KEY.to_string());
        let Some(&(bmin, bmax)) = self.broker_versions.get(&R::KEY) else {
            return Err(Error::kafka(
                codes::UNSUPPORTED_VERSION,
                format!(
                    "broker {} does not support the {name} API, which lagless needs",
                    self.addr
                ),
            ));
        };
        let v = bmax.min(cmax);
        if v < bmin.max(cmin) {
            return Err(Error::kafka(
                codes::UNSUPPORTED_VERSION,
                format!(
                    "broker {} supports {name} versions {bmin}..={bmax}, lagless needs {cmin}..={cmax}: \
                     the broker is too old for lagless (Kafka 2.1 or newer is required)",
                    self.addr
                ),
            ));
        }
        Ok(v)
    }

    /// Sends `req` at the negotiated version and waits up to `request.timeout.ms` for the answer.
    pub async fn call<R: Request>(&self, req: &R) -> Result<R::Response> {
        self.call_with_timeout(req, self.request_timeout).await
    }

    pub async fn call_with_timeout<R: Request>(
        &self,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response> {
        let v = self.version::<R>()?;
        self.call_at_version(req, v, timeout).await
    }

    /// Like [`Connection::call`], also returning the version used, for requests whose response
    /// fields depend on it.
    pub async fn call_versioned<R: Request>(
        &self,
        req: &R,
        timeout: Duration,
    ) -> Result<(R::Response, i16)> {
        let v = self.version::<R>()?;
        Ok((self.call_at_version(req, v, timeout).await?, v))
    }

    /// Sends a request the broker will not answer (a Produce with acks=0).
    pub fn send_no_response<R: Request>(&self, req: &R) -> Result<()> {
        let v = self.version::<R>()?;
        let id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let frame = wire::encode_request(req, v, id, &self.client_id)?;
        self.outgoing.send(frame).map_err(|_| self.closed_error())
    }

    async fn call_at_version<R: Request>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        if !self.is_alive() {
            return Err(self.closed_error());
        }
        let id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let frame = wire::encode_request(req, version, id, &self.client_id)?;
        let (tx, rx) = oneshot::channel();
        // Register before writing: the response may arrive before `send` returns.
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, tx);
        if self.outgoing.send(frame).is_err() {
            self.pending
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&id);
            return Err(self.closed_error());
        }
        let body = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => return Err(self.closed_error()),
            Err(_) => {
                self.pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                // As the Java client does: a request that timed out leaves the connection in an
                // unknown state, so it is closed and the next caller reconnects.
                self.shutdown();
                return Err(Error::Timeout(format!(
                    "broker {} did not answer api {} within {} ms",
                    self.addr,
                    R::KEY,
                    timeout.as_millis()
                )));
            }
        };
        wire::decode_response::<R>(body, version)
    }

    fn closed_error(&self) -> Error {
        Error::Transport(format!("connection to broker {} is closed", self.addr))
    }

    /// Closes the connection; pending calls fail with a transport error.
    pub fn shutdown(&self) {
        self.alive.store(false, Ordering::Release);
        for t in &self.tasks {
            t.abort();
        }
        fail_all(&self.pending, &self.addr, "connection closed");
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn fail_all(pending: &Pending, addr: &str, why: &str) {
    let drained: Vec<_> = pending
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .drain()
        .collect();
    for (_, tx) in drained {
        let _ = tx.send(Err(Error::Transport(format!("broker {addr}: {why}"))));
    }
}

async fn write_loop(
    mut w: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    pending: Pending,
    alive: Arc<AtomicBool>,
    addr: String,
) {
    while let Some(frame) = rx.recv().await {
        if let Err(e) = w.write_all(&frame).await {
            alive.store(false, Ordering::Release);
            fail_all(&pending, &addr, &format!("write failed: {e}"));
            return;
        }
    }
}

async fn read_loop(mut r: OwnedReadHalf, pending: Pending, alive: Arc<AtomicBool>, addr: String) {
    let why = loop {
        let mut len = [0u8; 4];
        if let Err(e) = r.read_exact(&mut len).await {
            break format!("connection lost: {e}");
        }
        let len = i32::from_be_bytes(len);
        if len < 4 || len as usize > MAX_FRAME_BYTES {
            break format!(
                "invalid response frame length {len} (is this a Kafka PLAINTEXT listener?)"
            );
        }
        let mut buf = BytesMut::zeroed(len as usize);
        if let Err(e) = r.read_exact(&mut buf).await {
            break format!("connection lost mid-response: {e}");
        }
        let frame = buf.freeze();
        let id = match wire::response_correlation_id(&frame) {
            Ok(id) => id,
            Err(e) => break e.to_string(),
        };
        let waiter = pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id);
        // No waiter: the caller gave up (timeout or dropped future); the response is discarded.
        if let Some(tx) = waiter {
            let _ = tx.send(Ok(frame));
        }
    };
    alive.store(false, Ordering::Release);
    fail_all(&pending, &addr, &why);
}
