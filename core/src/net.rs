//! One pipelined connection per broker.
//!
//! A writer task owns the socket's write half and a reader task its read half; callers only hand
//! a complete frame to the writer and await a oneshot for the response, matched by correlation
//! id. A caller's future that is dropped mid-request therefore never leaves half a frame on the
//! socket: the writer finishes the frame, and the reader discards the orphaned response.
//!
//! The socket is plain TCP or TLS ([`tls`]), per `security.protocol` ([`Security`]); with SASL the connection
//! authenticates right after ApiVersions and, when the broker bounds the session (KIP-368),
//! authenticates again on the same socket before the session expires. Nothing above this module
//! knows which protocol a connection speaks.
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::backoff::Deadline;
use crate::buffers::{AnswerBuffer, AnswerPool};
use crate::error::{codes, Error, Result};
use crate::protocol::msg::{
    ApiKey, ApiVersionsRequest, SaslAuthenticateRequest, SaslHandshakeRequest, StrBytes,
};
use crate::protocol::wire::{self, client_versions, Api, Versions, ALL_VERSIONS, MAX_FRAME_BYTES};
use crate::sasl::{self, SaslCredentials};
use crate::security::{tls, Security};
use crate::sync::Unpoisoned;

mod stats;
pub use stats::{broker_metrics, BrokerSnapshot, ConnectionStats, LaneStats};

type Pending = Arc<Mutex<HashMap<i32, oneshot::Sender<Result<Bytes>>>>>;

/// What the writer task sends. Authentication frames go first; while a re-authentication runs,
/// no other request may reach the broker between its SaslHandshake and its last
/// SaslAuthenticate, so the writer holds them back (they stay queued, nothing is dropped).
enum Control {
    /// Hold ordinary frames until `End`.
    Begin,
    Frame(Bytes),
    End,
}

/// A live connection to one broker, with the API versions it supports.
pub struct Connection {
    addr: String,
    client_id: String,
    request_timeout: Duration,
    outgoing: mpsc::UnboundedSender<Bytes>,
    control: mpsc::UnboundedSender<Control>,
    pending: Pending,
    next_correlation_id: Arc<AtomicI32>,
    alive: Arc<AtomicBool>,
    /// Response frames read so far: a request that times out closes the connection only when
    /// nothing at all came back while it waited.
    received: Arc<AtomicU64>,
    /// api key -> (min, max) as the broker advertises them.
    broker_versions: HashMap<i16, (i16, i16)>,
    /// The cluster-wide feature levels the broker says are finalized (ApiVersions v3+), by
    /// feature name: `transaction.version` says which transaction protocol (KIP-890) to speak.
    finalized_features: HashMap<String, i16>,
    tasks: Vec<JoinHandle<()>>,
    /// Response frames the setup (ApiVersions, SASL) read: more than these and the connection
    /// has answered a request of its users.
    setup_frames: u64,
    /// The counts of the cluster's slot this connection serves (the per-broker metrics).
    stats: Arc<ConnectionStats>,
}

impl Connection {
    /// Connects, then negotiates versions with ApiVersions. Answers are read into buffers of
    /// `answers` (the cluster's pool); requests, bytes and latencies are counted in `stats`.
    pub async fn connect(
        addr: &str,
        security: &Security,
        client_id: &str,
        setup_timeout: Duration,
        request_timeout: Duration,
        answers: Arc<AnswerPool>,
        stats: Arc<ConnectionStats>,
    ) -> Result<Connection> {
        let setup_deadline = Instant::now() + setup_timeout;
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
        let pending: Pending = Arc::new(Mutex::new(HashMap::new()));
        let alive = Arc::new(AtomicBool::new(true));
        let received = Arc::new(AtomicU64::new(0));
        let (tx, rx) = mpsc::unbounded_channel();
        let (control_tx, control_rx) = mpsc::unbounded_channel();
        let io = Io {
            pending: pending.clone(),
            alive: alive.clone(),
            addr: addr.to_string(),
            plaintext: security.tls().is_none(),
            client_certificate: security.tls().is_some_and(|t| t.has_client_certificate()),
            sasl: security.sasl().is_some(),
            received: received.clone(),
            answers,
            stats: stats.clone(),
        };
        let tasks = match security.tls() {
            None => {
                let (read, write) = stream.into_split();
                vec![
                    tokio::spawn(write_loop(write, rx, control_rx, io.clone())),
                    tokio::spawn(read_loop(read, io)),
                ]
            }
            Some(tls) => {
                let remaining = setup_deadline.saturating_duration_since(Instant::now());
                let stream =
                    match tokio::time::timeout(remaining, tls.handshake(addr, stream)).await {
                        Ok(s) => s?,
                        Err(_) => {
                            return Err(Error::Transport(format!(
                                "TLS handshake with broker {addr}: no answer within \
                             socket.connection.setup.timeout.ms ({} ms)",
                                setup_timeout.as_millis()
                            )))
                        }
                    };
                let (read, write) = tokio::io::split(stream);
                vec![
                    tokio::spawn(write_loop(write, rx, control_rx, io.clone())),
                    tokio::spawn(read_loop(read, io)),
                ]
            }
        };
        let mut conn = Connection {
            addr: addr.to_string(),
            client_id: client_id.to_string(),
            request_timeout,
            outgoing: tx,
            control: control_tx,
            pending,
            next_correlation_id: Arc::new(AtomicI32::new(1)),
            alive,
            received,
            broker_versions: HashMap::new(),
            finalized_features: HashMap::new(),
            tasks,
            setup_frames: 0,
            stats,
        };
        conn.negotiate_versions().await?;
        if let Some(creds) = security.sasl() {
            let wire = Wire {
                addr: conn.addr.clone(),
                client_id: conn.client_id.clone(),
                timeout: request_timeout,
                pending: conn.pending.clone(),
                next_correlation_id: conn.next_correlation_id.clone(),
                sink: Sink::Ordinary(conn.outgoing.clone()),
            };
            let version = conn.version::<SaslAuthenticateRequest>()?;
            let lifetime = authenticate(&wire, creds, version).await?;
            if let Some(lifetime) = lifetime {
                let wire = Wire {
                    sink: Sink::Control(conn.control.clone()),
                    ..wire
                };
                let alive = conn.alive.clone();
                conn.tasks.push(tokio::spawn(reauthenticate_loop(
                    wire,
                    creds.clone(),
                    version,
                    lifetime,
                    alive,
                )));
            }
        }
        conn.setup_frames = conn.received.load(Ordering::Acquire);
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
        self.finalized_features = resp
            .finalized_features
            .iter()
            .map(|f| (f.name.to_string(), f.max_version_level))
            .collect();
        Ok(())
    }

    /// The finalized level of cluster feature `name` (such as `transaction.version`), as this
    /// broker reported it when the connection was set up; `None` when it is not finalized.
    pub fn finalized_feature(&self, name: &str) -> Option<i16> {
        self.finalized_features.get(name).copied()
    }

    /// The broker's address, as connected to.
    pub fn addr(&self) -> &str {
        &self.addr
    }

    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::Acquire)
    }

    /// Requests written and not yet answered (nor given up on).
    pub fn in_flight(&self) -> usize {
        self.pending.lock().unpoisoned().len()
    }

    /// Whether the broker answered a request beyond the connection setup: a connection lost
    /// before that (cut inside its first answers, say) is a failed attempt as far as the
    /// reconnect backoff goes.
    pub fn answered_after_setup(&self) -> bool {
        self.received.load(Ordering::Acquire) > self.setup_frames
    }

    /// The highest version of `R` that both this broker and lagless speak. A broker that has none
    /// in common is too old (or too new) for lagless: say so, with both ranges.
    pub fn version<R: Api>(&self) -> Result<i16> {
        self.version_within::<R>(ALL_VERSIONS)
    }

    /// The highest version of `R` that both sides speak within `wanted` (inclusive): for a
    /// request whose meaning changes with its version (a transactional Produce v12 adds its
    /// partitions to the transaction, KIP-890), the caller says which versions it means.
    pub fn version_within<R: Api>(&self, wanted: Versions) -> Result<i16> {
        let client = client_versions::<R>();
        // Named only for an error: this runs for every request (every Produce among them).
        let name = || {
            ApiKey::try_from(R::KEY)
                .map(|k| format!("{k:?}"))
                .unwrap_or_else(|_| R::KEY.to_string())
        };
        let Some(&broker) = self.broker_versions.get(&R::KEY) else {
            return Err(Error::kafka(
                codes::UNSUPPORTED_VERSION,
                format!(
                    "broker {} does not support the {} API, which lagless needs",
                    self.addr,
                    name()
                ),
            ));
        };
        wire::common_version(client, broker, wanted).ok_or_else(|| {
            let (lo, hi) = (client.0.max(wanted.0), client.1.min(wanted.1));
            Error::kafka(
                codes::UNSUPPORTED_VERSION,
                format!(
                    "broker {} supports {} versions {}..={}, lagless needs {lo}..={hi}{}",
                    self.addr,
                    name(),
                    broker.0,
                    broker.1,
                    if wanted == ALL_VERSIONS {
                        ": the broker is too old for lagless (Kafka 2.1 or newer is required)"
                    } else {
                        " for the protocol the client chose (a transactional producer at \
                         transaction version 2 needs Produce 12, EndTxn 5, TxnOffsetCommit 5; at \
                         version 1 it keeps below them)"
                    }
                ),
            )
        })
    }

    /// Sends `req` at the negotiated version and waits up to `request.timeout.ms` for the answer.
    pub async fn call<R: Api>(&self, req: &R) -> Result<R::Response> {
        self.call_with_timeout(req, self.request_timeout).await
    }

    /// Sends `req` and waits for the answer up to `request.timeout.ms`, but never past
    /// `deadline`: the caller's deadline bounds the wait, as the Java client's call timers do. A
    /// wait cut short by the deadline leaves the request sent (its late answer is dropped) and
    /// the connection open.
    pub async fn call_before<R: Api>(&self, req: &R, deadline: Deadline) -> Result<R::Response> {
        self.call_within_before(req, ALL_VERSIONS, deadline).await
    }

    /// `call_before` at a version within `wanted` (see [`Connection::version_within`]).
    pub async fn call_within_before<R: Api>(
        &self,
        req: &R,
        wanted: Versions,
        deadline: Deadline,
    ) -> Result<R::Response> {
        let v = self.version_within::<R>(wanted)?;
        let timeout = self
            .request_timeout
            .min(deadline.remaining())
            .max(Duration::from_millis(1));
        self.call_at_version(req, v, timeout).await
    }

    pub async fn call_with_timeout<R: Api>(
        &self,
        req: &R,
        timeout: Duration,
    ) -> Result<R::Response> {
        let v = self.version::<R>()?;
        self.call_at_version(req, v, timeout).await
    }

    /// Sends a request the broker will not answer (a Produce with acks=0).
    pub fn send_no_response<R: Api>(&self, req: &R, wanted: Versions) -> Result<()> {
        let v = self.version_within::<R>(wanted)?;
        let id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let frame = wire::encode_request(req, v, id, &self.client_id)?;
        self.outgoing.send(frame).map_err(|_| self.closed_error())
    }

    async fn call_at_version<R: Api>(
        &self,
        req: &R,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let sent = self.write::<R>(req, version)?;
        self.answer::<R>(sent, version, timeout).await
    }

    /// Sends `req` at the negotiated version within `wanted` now, before returning, and gives the wait for its
    /// answer (up to `request.timeout.ms`). Requests sent this way leave the connection in the
    /// order of the calls, which the idempotent producer relies on for the batches of one
    /// partition.
    pub fn send_now<R: Api>(
        self: &Arc<Self>,
        req: &R,
        wanted: Versions,
    ) -> Result<impl std::future::Future<Output = Result<R::Response>> + Send + 'static> {
        let version = self.version_within::<R>(wanted)?;
        let sent = self.write::<R>(req, version)?;
        let conn = self.clone();
        Ok(async move {
            let timeout = conn.request_timeout;
            conn.answer::<R>(sent, version, timeout).await
        })
    }

    /// Puts `req`'s frame in the connection's outgoing queue.
    fn write<R: Api>(&self, req: &R, version: i16) -> Result<Sent> {
        if !self.is_alive() {
            return Err(self.closed_error());
        }
        let id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let frame = wire::encode_request(req, version, id, &self.client_id)?;
        let (tx, rx) = oneshot::channel();
        let received_before = self.received.load(Ordering::Acquire);
        // Register before writing: the response may arrive before `send` returns.
        self.pending.lock().unpoisoned().insert(id, tx);
        if self.outgoing.send(frame).is_err() {
            self.pending.lock().unpoisoned().remove(&id);
            return Err(self.closed_error());
        }
        self.stats.request_written();
        Ok(Sent {
            id,
            rx,
            received_before,
            at: Instant::now(),
        })
    }

    /// Waits up to `timeout` for the answer to a request `write` sent.
    async fn answer<R: Api>(
        &self,
        sent: Sent,
        version: i16,
        timeout: Duration,
    ) -> Result<R::Response> {
        let Sent {
            id,
            rx,
            received_before,
            at,
        } = sent;
        let body = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(r)) => {
                let body = r?;
                let now = Instant::now();
                self.stats
                    .answered(R::KEY, now.saturating_duration_since(at), now);
                body
            }
            Ok(Err(_)) => return Err(self.closed_error()),
            Err(_) => {
                self.pending.lock().unpoisoned().remove(&id);
                // Its late answer, if any, is discarded by correlation id. The connection is
                // closed (and the next caller reconnects) only when it looks broken: the broker
                // sent nothing at all for a whole request.timeout.ms. A caller's shorter timeout
                // (what is left of its deadline) says nothing about the connection, and closing
                // it would fail every other request on it (heartbeats, commits).
                if timeout >= self.request_timeout
                    && self.received.load(Ordering::Acquire) == received_before
                {
                    self.shutdown();
                }
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
        fail_all(
            &self.pending,
            Error::Transport(format!("broker {}: connection closed", self.addr)),
        );
    }
}

/// A request written to a connection, waiting for its answer.
struct Sent {
    id: i32,
    rx: oneshot::Receiver<Result<Bytes>>,
    received_before: u64,
    /// When it was queued: its answer's latency runs from here.
    at: Instant,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn fail_all(pending: &Pending, why: Error) {
    let drained: Vec<_> = pending.lock().unpoisoned().drain().collect();
    for (_, tx) in drained {
        let _ = tx.send(Err(why.clone()));
    }
}

/// Where a [`Wire`] puts its frames.
enum Sink {
    /// With ordinary requests (nothing else is in flight: the first authentication).
    Ordinary(mpsc::UnboundedSender<Bytes>),
    /// Ahead of ordinary requests, which the writer holds back meanwhile (re-authentication).
    Control(mpsc::UnboundedSender<Control>),
}

/// Requests outside [`Connection::call`]: authentication, which runs before the connection is
/// handed out and, for re-authentication, in a task of its own beside ordinary requests.
struct Wire {
    addr: String,
    client_id: String,
    timeout: Duration,
    pending: Pending,
    next_correlation_id: Arc<AtomicI32>,
    sink: Sink,
}

impl Wire {
    async fn call<R: Api>(&self, req: &R, version: i16) -> Result<R::Response> {
        let id = self.next_correlation_id.fetch_add(1, Ordering::Relaxed);
        let frame = wire::encode_request(req, version, id, &self.client_id)?;
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unpoisoned().insert(id, tx);
        let sent = match &self.sink {
            Sink::Ordinary(s) => s.send(frame).is_ok(),
            Sink::Control(s) => s.send(Control::Frame(frame)).is_ok(),
        };
        let closed = || Error::Transport(format!("connection to broker {} is closed", self.addr));
        if !sent {
            self.pending.lock().unpoisoned().remove(&id);
            return Err(closed());
        }
        let body = match tokio::time::timeout(self.timeout, rx).await {
            Ok(Ok(r)) => r?,
            Ok(Err(_)) => return Err(closed()),
            Err(_) => {
                self.pending.lock().unpoisoned().remove(&id);
                return Err(Error::Timeout(format!(
                    "broker {} did not answer api {} within {} ms",
                    self.addr,
                    R::KEY,
                    self.timeout.as_millis()
                )));
            }
        };
        wire::decode_response::<R>(body, version)
    }
}

/// SASL (KIP-152): SaslHandshake v1 names the mechanism, then SaslAuthenticate rounds carry the
/// exchange. Returns the session lifetime the broker set (KIP-368), if it set one.
async fn authenticate(
    wire: &Wire,
    creds: &SaslCredentials,
    authenticate_version: i16,
) -> Result<Option<Duration>> {
    let mechanism = creds.mechanism;
    let handshake =
        SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(mechanism.name()));
    let resp = wire.call(&handshake, 1).await?;
    match resp.error_code {
        codes::NONE => {}
        UNSUPPORTED_SASL_MECHANISM => {
            let enabled: Vec<String> = resp.mechanisms.iter().map(|m| m.to_string()).collect();
            return Err(sasl::mechanism_not_enabled(mechanism, &wire.addr, &enabled));
        }
        // A listener without SASL has authenticated the connection already (PLAINTEXT or SSL).
        ILLEGAL_SASL_STATE => {
            return Err(Error::Authentication(format!(
                "broker {} does not expect SASL on this listener: it is probably PLAINTEXT or \
                 SSL, so `security.protocol` probably mismatches",
                wire.addr
            )))
        }
        code => return Err(sasl::broker_refused(mechanism, &wire.addr, code, None)),
    }
    let mut exchange = sasl::start_exchange(creds).await?;
    let mut broker: Option<Bytes> = None;
    let mut lifetime = None;
    while let Some(bytes) = exchange.next(broker.as_deref())? {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(bytes));
        let resp = wire.call(&req, authenticate_version).await?;
        if resp.error_code != codes::NONE {
            return Err(sasl::broker_refused(
                mechanism,
                &wire.addr,
                resp.error_code,
                resp.error_message.as_deref(),
            ));
        }
        lifetime = (resp.session_lifetime_ms > 0)
            .then(|| Duration::from_millis(resp.session_lifetime_ms as u64));
        broker = Some(resp.auth_bytes);
    }
    Ok(lifetime)
}

const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const ILLEGAL_SASL_STATE: i16 = 34;

/// When to authenticate again in a session of `lifetime`: between 85% and 95% of it (as the
/// Java client does), spread so that a client's connections do not all go at once.
pub(crate) fn reauthentication_delay(lifetime: Duration, jitter: f64) -> Duration {
    lifetime.mul_f64(0.85 + 0.10 * jitter.clamp(0.0, 1.0))
}

/// KIP-368: authenticates again on the live connection before each session expires. In-flight
/// requests are answered meanwhile; new ones wait in the writer's queue. A failure closes the
/// connection, so the next request reconnects (and reports the authentication error).
async fn reauthenticate_loop(
    wire: Wire,
    creds: SaslCredentials,
    version: i16,
    mut lifetime: Duration,
    alive: Arc<AtomicBool>,
) {
    loop {
        tokio::time::sleep(reauthentication_delay(lifetime, rand::random())).await;
        let Sink::Control(control) = &wire.sink else {
            return;
        };
        if control.send(Control::Begin).is_err() {
            return;
        }
        let result = authenticate(&wire, &creds, version).await;
        let _ = control.send(Control::End);
        match result {
            Ok(Some(next)) => {
                tracing::debug!(broker = %wire.addr, mechanism = %creds.mechanism, "re-authenticated");
                lifetime = next;
            }
            Ok(None) => return,
            Err(e) => {
                tracing::warn!(broker = %wire.addr, error = %e, "re-authentication failed; closing the connection");
                alive.store(false, Ordering::Release);
                fail_all(&wire.pending, e);
                return;
            }
        }
    }
}

/// What the reader and writer tasks share.
#[derive(Clone)]
struct Io {
    pending: Pending,
    alive: Arc<AtomicBool>,
    addr: String,
    /// No TLS underneath: a TLS record coming back means the listener wants TLS.
    plaintext: bool,
    /// TLS with a client certificate (see [`tls::describe`]).
    client_certificate: bool,
    /// The connection authenticates with SASL.
    sasl: bool,
    /// Frames read: a timed-out request closes the connection only if nothing came back.
    received: Arc<AtomicU64>,
    /// The pool the answers are read into: the cluster's (a consumer's counts them against its
    /// `fetch.buffer.max.bytes`).
    answers: Arc<AnswerPool>,
    /// Bytes each way, for the per-broker metrics.
    stats: Arc<ConnectionStats>,
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut rx: mpsc::UnboundedReceiver<Bytes>,
    mut control: mpsc::UnboundedReceiver<Control>,
    io: Io,
) {
    let mut held = false;
    loop {
        let frame = tokio::select! {
            biased;
            c = control.recv() => match c {
                Some(Control::Begin) => { held = true; continue; }
                Some(Control::End) => { held = false; continue; }
                Some(Control::Frame(f)) => f,
                // The re-authentication task ended: ordinary frames only from now on.
                None => match rx.recv().await { Some(f) => f, None => return },
            },
            f = rx.recv(), if !held => match f { Some(f) => f, None => return },
        };
        let mut result = w.write_all(&frame).await;
        io.stats.sent(frame.len());
        // A TLS stream buffers; flushing once the queue is empty sends many frames per record.
        if result.is_ok() && (held || rx.is_empty()) {
            result = w.flush().await;
        }
        if let Err(e) = result {
            io.alive.store(false, Ordering::Release);
            fail_all(
                &io.pending,
                Error::Transport(format!("broker {}: write failed: {e}", io.addr)),
            );
            return;
        }
    }
}

async fn read_loop<R: AsyncRead + Unpin>(mut r: R, io: Io) {
    let mut answered = 0u64;
    // The answers are read into buffers of the cluster's pool (see `crate::buffers`).
    let buffers = io.answers.clone();
    let why = loop {
        let mut len = [0u8; 4];
        if let Err(e) = r.read_exact(&mut len).await {
            // A SASL listener answers ApiVersions before authentication, then closes the
            // connection at the first other request: what a client without SASL meets there.
            let asked = !io.pending.lock().unpoisoned().is_empty();
            if !io.sasl && answered == 1 && asked && e.kind() == std::io::ErrorKind::UnexpectedEof {
                break Error::Authentication(format!(
                    "broker {} closed the connection at the first request after ApiVersions: the \
                     listener probably requires SASL (SASL_PLAINTEXT or SASL_SSL), so \
                     `security.protocol` probably mismatches",
                    io.addr
                ));
            }
            break lost(&io, "connection lost", &e);
        }
        // A TLS alert record (content type 21, version 3.x): the listener speaks TLS and has
        // just refused what it read as a ClientHello.
        if io.plaintext && len[0] == 0x15 && len[1] == 0x03 {
            break Error::Tls(format!(
                "broker {} answered in TLS: the listener is probably SSL or SASL_SSL, so \
                 `security.protocol` probably mismatches",
                io.addr
            ));
        }
        let len = i32::from_be_bytes(len);
        if len < 4 || len as usize > MAX_FRAME_BYTES {
            break Error::Transport(format!(
                "broker {}: invalid response frame length {len} (does `security.protocol` match \
                 the listener?)",
                io.addr
            ));
        }
        let len = len as usize;
        let mut buf = match buffers.take(len) {
            Ok(buf) => buf,
            Err(e) => {
                break Error::Transport(format!(
                    "broker {}: no memory for an answer of {len} bytes: {e}",
                    io.addr
                ))
            }
        };
        let short = match &mut buf {
            // Into the vector's spare capacity: zero-filling a fetch answer (up to
            // fetch.max.bytes) before reading over it cost 3% of the CPU of reading 1 KB
            // records. (A new mapping is zeros already, and a kept one is written over.)
            AnswerBuffer::Heap(v) => {
                let mut body = (&mut r).take(len as u64);
                loop {
                    match body.read_buf(v).await {
                        Ok(_) if v.len() == len => break None,
                        Ok(0) => break Some(std::io::ErrorKind::UnexpectedEof.into()),
                        Ok(_) => {}
                        Err(e) => break Some(e),
                    }
                }
            }
            AnswerBuffer::Mapped(m) => r.read_exact(&mut m[..len]).await.err(),
        };
        if let Some(e) = short {
            break lost(&io, "connection lost mid-response", &e);
        }
        let frame = AnswerPool::bytes(&buffers, buf, len);
        io.stats.received(4 + len);
        answered += 1;
        io.received.fetch_add(1, Ordering::AcqRel);
        let id = match wire::response_correlation_id(&frame) {
            Ok(id) => id,
            Err(e) => break e,
        };
        let waiter = io.pending.lock().unpoisoned().remove(&id);
        // No waiter: the caller gave up (timeout or dropped future); the response is discarded.
        if let Some(tx) = waiter {
            let _ = tx.send(Ok(frame));
        }
    };
    io.alive.store(false, Ordering::Release);
    tracing::debug!(broker = %io.addr, error = %why, "connection lost");
    fail_all(&io.pending, why);
}

/// The error of a broken connection; a TLS failure (an alert from the broker: say, it wanted a
/// client certificate) says which and is not retried.
fn lost(io: &Io, what: &str, e: &std::io::Error) -> Error {
    match tls::rustls_error(e) {
        Some(t) => Error::Tls(format!(
            "connection to broker {} failed: {}",
            io.addr,
            tls::describe(t, io.client_certificate)
        )),
        None => Error::Transport(format!("broker {}: {what}: {e}", io.addr)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A frame: length, correlation id, body.
    fn frame(correlation_id: i32, claimed_body: usize, body: &[u8]) -> Vec<u8> {
        let mut f = ((4 + claimed_body) as i32).to_be_bytes().to_vec();
        f.extend(correlation_id.to_be_bytes());
        f.extend(body);
        f
    }

    /// The reading side of a plaintext connection whose requests wait in `pending`.
    fn plaintext_io(pending: &Pending) -> Io {
        Io {
            pending: pending.clone(),
            alive: Arc::new(AtomicBool::new(true)),
            addr: "127.0.0.1:9092".into(),
            plaintext: true,
            client_certificate: false,
            sasl: false,
            received: Default::default(),
            answers: Arc::new(AnswerPool::new()),
            stats: Default::default(),
        }
    }

    #[tokio::test]
    async fn a_response_read_in_pieces_comes_whole_and_a_cut_one_fails_its_request() {
        let pending: Pending = Default::default();
        let (whole_tx, whole) = oneshot::channel();
        let (cut_tx, cut) = oneshot::channel();
        let (large_tx, large) = oneshot::channel();
        pending.lock().unpoisoned().insert(7, whole_tx);
        pending.lock().unpoisoned().insert(8, cut_tx);
        pending.lock().unpoisoned().insert(9, large_tx);
        let io = plaintext_io(&pending);
        // A 16-byte pipe: the reader gets each frame in many reads.
        let (mut broker, client) = tokio::io::duplex(16);
        let reader = tokio::spawn(read_loop(client, io));
        let body: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        broker
            .write_all(&frame(7, body.len(), &body))
            .await
            .unwrap();
        // One of the size of a fetch answer, read in many pieces.
        let large_body: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        broker
            .write_all(&frame(9, large_body.len(), &large_body))
            .await
            .unwrap();
        // The last claims 100 bytes of body and the connection ends after 10.
        broker.write_all(&frame(8, 100, &[1; 10])).await.unwrap();
        drop(broker);

        let got = whole.await.unwrap().unwrap();
        assert_eq!(&got[..4], &7i32.to_be_bytes());
        assert_eq!(&got[4..], &body[..]);
        let got = large.await.unwrap().unwrap();
        assert_eq!(&got[..4], &9i32.to_be_bytes());
        assert!(got[4..] == large_body[..]);
        let err = cut.await.unwrap().unwrap_err().to_string();
        assert!(err.contains("connection lost mid-response"), "{err}");
        reader.await.unwrap();
    }

    /// A connection reads an answer into the buffer of an earlier one once nothing holds that
    /// one any more (see `crate::buffers`), and never while a record of it is still held.
    #[tokio::test]
    async fn a_connection_reads_into_the_buffer_of_an_answer_let_go_of() {
        let pending: Pending = Default::default();
        let mut answers = Vec::new();
        for id in 1..=3 {
            let (tx, rx) = oneshot::channel();
            pending.lock().unpoisoned().insert(id, tx);
            answers.push(rx);
        }
        let io = plaintext_io(&pending);
        let (mut broker, client) = tokio::io::duplex(64 << 10);
        let reader = tokio::spawn(read_loop(client, io));
        let mut answers = answers.into_iter();
        let mut answer = async |id: i32, len: usize| {
            let body = vec![id as u8; len];
            broker.write_all(&frame(id, len, &body)).await.unwrap();
            let got = answers.next().unwrap().await.unwrap().unwrap();
            assert!(got[4..].iter().all(|&b| b == id as u8));
            got
        };
        let first = answer(1, 200_000).await;
        let at = first.as_ptr();
        let record = first.slice(100..110);
        drop(first);
        // A slice of the first answer is held: the second gets a buffer of its own.
        let second = answer(2, 200_000).await;
        assert_ne!(second.as_ptr(), at);
        drop(record);
        // Freed instead of kept, the first buffer would most likely be handed to this allocation
        // of its size, and the third answer would get another address.
        let elsewhere = vec![0u8; 200_004];
        let third = answer(3, 190_000).await;
        assert_eq!(
            third.as_ptr(),
            at,
            "the third answer is read into the first's buffer"
        );
        assert_eq!(third.len(), 190_004);
        drop((second, third, answer, elsewhere));
        drop(broker);
        reader.await.unwrap();
    }

    #[test]
    fn re_authentication_comes_between_85_and_95_percent_of_the_session() {
        let session = Duration::from_millis(3000);
        assert_eq!(
            reauthentication_delay(session, 0.0),
            Duration::from_millis(2550)
        );
        assert_eq!(
            reauthentication_delay(session, 1.0),
            Duration::from_millis(2850)
        );
        assert_eq!(
            reauthentication_delay(session, 7.0),
            Duration::from_millis(2850)
        );
        let d = reauthentication_delay(session, 0.5);
        assert!(d > Duration::from_millis(2550) && d < Duration::from_millis(2850));
    }
}
