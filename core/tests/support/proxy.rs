//! A TCP proxy the test controls, in front of a broker's proxied listener (tests/kafka_broker.py
//! `--proxied-listeners`): the broker advertises the proxy's port, so a client bootstrapped there
//! reaches that broker through the proxy only, and the test decides, at run time and per route,
//! whether traffic passes, stalls, comes late or is cut.
//!
//! Each route listens on one port and forwards every accepted connection to one target. A
//! connection is two pumps in one task, client -> broker ("requests") and broker -> client
//! ("answers"); a pump reads chunks into a queue and writes each out when the route's mode lets
//! it. The mode is looked at again whenever it changes, so switching a route affects the
//! connections already open, not only new ones. When either pump ends, the task ends and both
//! sockets close.
#![allow(dead_code)]

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::time::Instant;

/// What a route does with its traffic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Forward both ways at once.
    Pass,
    /// Accept connections and read what comes, but forward nothing either way: a hung broker or
    /// a partition that drops packets. Open connections freeze too; what was read is held and
    /// goes on when the route passes again (as TCP retransmits once a partition heals).
    Blackhole,
    /// Forward requests at once and each chunk of answer this long after it was read: a broker
    /// that answers late. Chunks keep their spacing (the delay does not add up along a stream).
    Delay(Duration),
    /// Forward requests, and answers up to this many bytes per connection (counted from its
    /// start); then close the connection: a connection that breaks mid-answer.
    CutAfter(usize),
    /// Close every connection at once, new and open ones: a broker that refuses connections.
    Refuse,
    /// Forward requests, read answers and throw them away, connections staying open: a request
    /// that reaches the broker (and takes effect) whose answer never comes back.
    LoseAnswers,
}

struct Route {
    listen_port: u16,
    target: String,
    mode: watch::Sender<Mode>,
    accepted: AtomicUsize,
    open: AtomicUsize,
    /// Bytes forwarded: requests (client to broker), answers (broker to client).
    forwarded: [AtomicUsize; 2],
}

/// The proxy: its routes run on a runtime of its own (one thread), stopped on drop.
pub struct Proxy {
    routes: Vec<Arc<Route>>,
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// Listens on 127.0.0.1:`listen_port` for each `(listen_port, target)`, forwarding to
    /// `target` ("host:port"); every route starts in [`Mode::Pass`].
    pub fn start(routes: &[(u16, String)]) -> Proxy {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .thread_name("test-proxy")
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let routes: Vec<Arc<Route>> = routes
            .iter()
            .map(|(port, target)| {
                Arc::new(Route {
                    listen_port: *port,
                    target: target.clone(),
                    mode: watch::channel(Mode::Pass).0,
                    accepted: AtomicUsize::new(0),
                    open: AtomicUsize::new(0),
                    forwarded: [AtomicUsize::new(0), AtomicUsize::new(0)],
                })
            })
            .collect();
        for route in &routes {
            // Bound before start() returns: a client may connect right after.
            let listener = runtime
                .block_on(TcpListener::bind(("127.0.0.1", route.listen_port)))
                .unwrap_or_else(|e| panic!("proxy: binding port {}: {e}", route.listen_port));
            runtime.spawn(accept_loop(listener, route.clone()));
        }
        Proxy {
            routes,
            runtime: Some(runtime),
        }
    }

    /// Switches route `route` (0-based, in the order given to [`Proxy::start`]).
    pub fn set(&self, route: usize, mode: Mode) {
        self.routes[route].mode.send_replace(mode);
    }

    /// Switches every route.
    pub fn set_all(&self, mode: Mode) {
        for r in &self.routes {
            r.mode.send_replace(mode);
        }
    }

    /// Connections accepted on `route` so far (also those refused or cut at once).
    pub fn accepted(&self, route: usize) -> usize {
        self.routes[route].accepted.load(Ordering::SeqCst)
    }

    /// Connections on `route` open now.
    pub fn open(&self, route: usize) -> usize {
        self.routes[route].open.load(Ordering::SeqCst)
    }

    /// Bytes forwarded on `route` so far, all connections: (requests, answers).
    pub fn forwarded(&self, route: usize) -> (usize, usize) {
        let f = &self.routes[route].forwarded;
        (f[0].load(Ordering::SeqCst), f[1].load(Ordering::SeqCst))
    }

    /// The addresses the routes listen on, comma-separated: a bootstrap.servers.
    pub fn bootstrap(&self) -> String {
        self.routes
            .iter()
            .map(|r| format!("127.0.0.1:{}", r.listen_port))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(rt) = self.runtime.take() {
            rt.shutdown_background();
        }
    }
}

async fn accept_loop(listener: TcpListener, route: Arc<Route>) {
    loop {
        let Ok((client, _)) = listener.accept().await else {
            continue;
        };
        route.accepted.fetch_add(1, Ordering::SeqCst);
        let route = route.clone();
        tokio::spawn(async move {
            route.open.fetch_add(1, Ordering::SeqCst);
            serve(client, &route).await;
            route.open.fetch_sub(1, Ordering::SeqCst);
        });
    }
}

/// One proxied connection, until either side closes or the mode cuts it.
async fn serve(client: TcpStream, route: &Route) {
    if *route.mode.borrow() == Mode::Refuse {
        return;
    }
    let Ok(broker) = TcpStream::connect(&route.target).await else {
        return;
    };
    let _ = client.set_nodelay(true);
    let _ = broker.set_nodelay(true);
    let (client_read, client_write) = client.into_split();
    let (broker_read, broker_write) = broker.into_split();
    // Whichever pump ends first ends the connection: the other is dropped with its halves.
    tokio::select! {
        _ = pump(client_read, broker_write, route.mode.subscribe(), Direction::Requests, &route.forwarded[0]) => {}
        _ = pump(broker_read, client_write, route.mode.subscribe(), Direction::Answers, &route.forwarded[1]) => {}
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Direction {
    Requests,
    Answers,
}

/// What a pump may do with the oldest chunk it holds.
enum Release {
    /// Write it now (at most this many bytes of it, then close: `CutAfter`).
    Now(Option<usize>),
    /// Write it at this instant (`Delay`).
    At(Instant),
    /// Hold it until the mode changes (`Blackhole`).
    Hold,
    /// Close the connection (`Refuse`, or `CutAfter` with its bytes all sent).
    Close,
    /// Throw it away (`LoseAnswers`).
    Discard,
}

/// The decision, from the mode, the direction, when the chunk was read and the bytes of answer
/// written so far on this connection.
fn release(mode: Mode, dir: Direction, read_at: Instant, written: usize) -> Release {
    match (mode, dir) {
        (Mode::Refuse, _) => Release::Close,
        (Mode::Blackhole, _) => Release::Hold,
        (Mode::LoseAnswers, Direction::Answers) => Release::Discard,
        (Mode::Pass, _) | (_, Direction::Requests) => Release::Now(None),
        (Mode::Delay(d), Direction::Answers) => Release::At(read_at + d),
        (Mode::CutAfter(n), Direction::Answers) if written >= n => Release::Close,
        (Mode::CutAfter(n), Direction::Answers) => Release::Now(Some(n - written)),
    }
}

/// Reads from `from` and writes to `to` as the mode allows; returns when the connection is to
/// close.
async fn pump(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
    dir: Direction,
    forwarded: &AtomicUsize,
) {
    let mut queue: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    let mut written = 0usize;
    let mut eof = false;
    loop {
        let now_mode = *mode.borrow_and_update();
        // A route switched to Refuse or past its cut closes open connections too.
        let front = queue
            .front()
            .map(|(at, _)| *at)
            .unwrap_or_else(Instant::now);
        let decision = release(now_mode, dir, front, written);
        if matches!(decision, Release::Close) {
            return;
        }
        // A client that closed is gone: what it sent and was held goes nowhere. A broker that
        // closed has its last answers delivered first (unless held).
        if eof && (queue.is_empty() || dir == Direction::Requests) {
            return;
        }
        let ready_at = match (&decision, queue.is_empty()) {
            (_, true) | (Release::Hold, _) => None,
            (Release::Now(_) | Release::Discard, false) => Some(Instant::now()),
            (Release::At(t), false) => Some(*t),
            (Release::Close, _) => unreachable!(),
        };
        let mut buf = vec![0u8; 64 * 1024];
        tokio::select! {
            changed = mode.changed() => {
                if changed.is_err() {
                    return; // the proxy is gone
                }
            }
            _ = tokio::time::sleep_until(ready_at.unwrap_or_else(Instant::now)), if ready_at.is_some() => {
                let (_, chunk) = queue.pop_front().expect("a chunk is waiting");
                if matches!(decision, Release::Discard) {
                    continue;
                }
                let limit = match decision { Release::Now(Some(n)) => n, _ => usize::MAX };
                let n = chunk.len().min(limit);
                if to.write_all(&chunk[..n]).await.is_err() {
                    return;
                }
                written += n;
                forwarded.fetch_add(n, Ordering::SeqCst);
                if n < chunk.len() {
                    return; // CutAfter reached mid-chunk
                }
            }
            // Read on while a few chunks wait (a blackholed route "accepts and reads"), but not
            // without bound.
            r = from.read(&mut buf), if !eof && queue.len() < 64 => match r {
                Ok(0) | Err(_) => eof = true,
                Ok(n) => {
                    buf.truncate(n);
                    queue.push_back((Instant::now(), buf));
                }
            },
        }
    }
}

/// The decision table, from literal inputs (run by each suite that includes this module).
pub fn check_release_table() {
    let t = Instant::now();
    let ms = Duration::from_millis;
    let cases: Vec<(Mode, Direction, usize, &str)> = vec![
        (Mode::Pass, Direction::Answers, 0, "now"),
        (Mode::Pass, Direction::Requests, 0, "now"),
        (Mode::Blackhole, Direction::Requests, 0, "hold"),
        (Mode::Blackhole, Direction::Answers, 0, "hold"),
        (Mode::Delay(ms(300)), Direction::Requests, 0, "now"),
        (Mode::Delay(ms(300)), Direction::Answers, 0, "at+300"),
        (Mode::CutAfter(10), Direction::Requests, 50, "now"),
        (Mode::CutAfter(10), Direction::Answers, 3, "now<=7"),
        (Mode::CutAfter(10), Direction::Answers, 10, "close"),
        (Mode::Refuse, Direction::Requests, 0, "close"),
        (Mode::Refuse, Direction::Answers, 0, "close"),
        (Mode::LoseAnswers, Direction::Requests, 0, "now"),
        (Mode::LoseAnswers, Direction::Answers, 0, "discard"),
    ];
    for (mode, dir, written, want) in cases {
        let got = match release(mode, dir, t, written) {
            Release::Now(None) => "now".to_string(),
            Release::Now(Some(n)) => format!("now<={n}"),
            Release::At(at) => format!("at+{}", (at - t).as_millis()),
            Release::Hold => "hold".to_string(),
            Release::Close => "close".to_string(),
            Release::Discard => "discard".to_string(),
        };
        assert_eq!(got, want, "{mode:?}, written {written}");
    }
}
