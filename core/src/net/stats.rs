//! What the connections of one broker lane did, for the per-broker metrics: connection attempts
//! and their outcomes, requests, bytes, and answer latencies. Kept per slot of the cluster (a
//! broker's lane), across reconnects. Counters are atomics; the latencies take one uncontended
//! lock per answer (per request, never per record).
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, Weak};
use std::time::{Duration, Instant};

use crate::protocol::msg::ApiKey;

use crate::metrics::window::{millis, Window, Windowed};
use crate::metrics::{BrokerMetrics, LatencyMetrics};
use crate::sync::Unpoisoned;

use super::Connection;

/// One lane's connection to one broker, counted.
#[derive(Debug, Default)]
pub struct ConnectionStats {
    /// Connections set up (TCP, TLS, ApiVersions, SASL all done).
    connects: AtomicU64,
    /// Setups that failed.
    connect_failures: AtomicU64,
    /// A setup is under way.
    connecting: AtomicBool,
    /// Requests written.
    requests: AtomicU64,
    bytes_sent: AtomicU64,
    bytes_received: AtomicU64,
    /// The connection set up last, while something holds it.
    current: Mutex<Weak<Connection>>,
    latencies: Mutex<Latencies>,
}

/// Answer latencies in milliseconds: every request's, and the Fetch and OffsetCommit ones the
/// Java consumer's `fetch-latency-*` and `commit-latency-*` measure.
#[derive(Debug)]
struct Latencies {
    all: Windowed,
    fetch: Windowed,
    commit: Windowed,
    produce: Windowed,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            all: Windowed::with_percentiles(),
            fetch: Windowed::default(),
            commit: Windowed::default(),
            produce: Windowed::default(),
        }
    }
}

/// [`ConnectionStats`] read at one moment.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LaneStats {
    pub connects: u64,
    pub connect_failures: u64,
    pub connecting: bool,
    /// The connection set up last is alive.
    pub up: bool,
    pub requests_in_flight: usize,
    pub requests: u64,
    pub bytes_sent: u64,
    pub bytes_received: u64,
    pub latency: Window,
    pub fetch_latency: Window,
    pub commit_latency: Window,
    pub produce_latency: Window,
}

impl ConnectionStats {
    pub(crate) fn setup_started(&self) {
        self.connecting.store(true, Ordering::Release);
    }

    pub(crate) fn setup_ended(&self, connected: Option<&std::sync::Arc<Connection>>) {
        match connected {
            Some(c) => {
                self.connects.fetch_add(1, Ordering::Relaxed);
                *self.current.lock().unpoisoned() = std::sync::Arc::downgrade(c);
            }
            None => {
                self.connect_failures.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.connecting.store(false, Ordering::Release);
    }

    pub(crate) fn sent(&self, bytes: usize) {
        self.bytes_sent.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    pub(crate) fn request_written(&self) {
        self.requests.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn received(&self, bytes: usize) {
        self.bytes_received
            .fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// An answer to a request of `api_key` came `latency` after the request was queued.
    pub(crate) fn answered(&self, api_key: i16, latency: Duration, now: Instant) {
        let ms = millis(latency);
        let mut l = self.latencies.lock().unpoisoned();
        l.all.record(ms, now);
        if api_key == ApiKey::Fetch as i16 {
            l.fetch.record(ms, now);
        } else if api_key == ApiKey::OffsetCommit as i16 {
            l.commit.record(ms, now);
        } else if api_key == ApiKey::Produce as i16 {
            l.produce.record(ms, now);
        }
    }

    /// The counts and the live latency windows at `now`.
    pub fn read(&self, now: Instant) -> LaneStats {
        let current = self.current.lock().unpoisoned().upgrade();
        let (up, requests_in_flight) = match current {
            Some(c) if c.is_alive() => (true, c.in_flight()),
            _ => (false, 0),
        };
        let l = self.latencies.lock().unpoisoned();
        LaneStats {
            connects: self.connects.load(Ordering::Relaxed),
            connect_failures: self.connect_failures.load(Ordering::Relaxed),
            connecting: self.connecting.load(Ordering::Acquire),
            up,
            requests_in_flight,
            requests: self.requests.load(Ordering::Relaxed),
            bytes_sent: self.bytes_sent.load(Ordering::Relaxed),
            bytes_received: self.bytes_received.load(Ordering::Relaxed),
            latency: l.all.live(now),
            fetch_latency: l.fetch.live(now),
            commit_latency: l.commit.live(now),
            produce_latency: l.produce.live(now),
        }
    }
}

/// Every broker's metrics, and the Fetch, OffsetCommit and Produce latencies of all of them.
#[derive(Debug, Default)]
pub struct BrokerSnapshot {
    pub brokers: Vec<BrokerMetrics>,
    pub fetch_latency: Window,
    pub commit_latency: Window,
    pub produce_latency: Window,
}

/// One broker's metrics from its lanes' counts.
pub fn broker_metrics(node_id: Option<i32>, address: String, lanes: &[LaneStats]) -> BrokerMetrics {
    let sum = |f: fn(&LaneStats) -> u64| lanes.iter().map(f).sum::<u64>();
    let connections = lanes.iter().filter(|l| l.up).count();
    let connects_total = sum(|l| l.connects);
    let mut latency = Window::default();
    for l in lanes {
        latency.merge(&l.latency);
    }
    BrokerMetrics {
        node_id,
        address,
        state: broker_state(lanes),
        connections,
        connects_total,
        connect_failures_total: sum(|l| l.connect_failures),
        disconnects_total: connects_total.saturating_sub(connections as u64),
        requests_in_flight: lanes.iter().map(|l| l.requests_in_flight).sum(),
        requests_total: sum(|l| l.requests),
        bytes_sent_total: sum(|l| l.bytes_sent),
        bytes_received_total: sum(|l| l.bytes_received),
        request_latency: LatencyMetrics::of(&latency),
    }
}

/// A broker's state from its lanes': up if any connection is alive, else connecting if a setup
/// runs, else down if anything was ever tried, else init.
fn broker_state(lanes: &[LaneStats]) -> &'static str {
    if lanes.iter().any(|l| l.up) {
        "up"
    } else if lanes.iter().any(|l| l.connecting) {
        "connecting"
    } else if lanes.iter().any(|l| l.connects + l.connect_failures > 0) {
        "down"
    } else {
        "init"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lane(f: impl FnOnce(&mut LaneStats)) -> LaneStats {
        let mut l = LaneStats::default();
        f(&mut l);
        l
    }

    #[test]
    fn a_broker_is_up_while_any_lane_is_and_counts_add_across_lanes() {
        let fetch = lane(|l| {
            l.up = true;
            l.connects = 3;
            l.requests = 10;
            l.requests_in_flight = 1;
            l.bytes_sent = 100;
            l.bytes_received = 1000;
        });
        let coordinator = lane(|l| {
            l.connects = 1;
            l.connect_failures = 2;
            l.requests = 5;
        });
        let m = broker_metrics(Some(1), "b:9092".into(), &[fetch, coordinator]);
        assert_eq!(m.state, "up");
        assert_eq!(m.connections, 1);
        assert_eq!((m.connects_total, m.connect_failures_total), (4, 2));
        // 4 set up, 1 alive: 3 closed or lost.
        assert_eq!(m.disconnects_total, 3);
        assert_eq!((m.requests_total, m.requests_in_flight), (15, 1));
        assert_eq!((m.bytes_sent_total, m.bytes_received_total), (100, 1000));
        assert_eq!(m.request_latency, None);
    }

    #[test]
    fn the_state_without_a_live_connection_says_what_was_tried() {
        let state = |lanes: &[LaneStats]| broker_state(lanes);
        assert_eq!(state(&[]), "init");
        assert_eq!(state(&[LaneStats::default()]), "init");
        assert_eq!(state(&[lane(|l| l.connect_failures = 1)]), "down");
        assert_eq!(state(&[lane(|l| l.connects = 1)]), "down");
        assert_eq!(
            state(&[
                lane(|l| l.connect_failures = 1),
                lane(|l| l.connecting = true)
            ]),
            "connecting"
        );
        assert_eq!(
            state(&[lane(|l| l.connecting = true), lane(|l| l.up = true)]),
            "up"
        );
    }

    #[test]
    fn latencies_are_counted_by_api_and_merged_for_the_broker() {
        let stats = ConnectionStats::default();
        let now = Instant::now();
        stats.answered(ApiKey::Fetch as i16, Duration::from_millis(500), now);
        stats.answered(ApiKey::OffsetCommit as i16, Duration::from_millis(4), now);
        stats.answered(ApiKey::Heartbeat as i16, Duration::from_millis(2), now);
        let read = stats.read(now);
        assert_eq!((read.latency.count, read.fetch_latency.count), (3, 1));
        assert_eq!(read.commit_latency.max(), Some(4.0));
        // No connection was set up: not up, nothing in flight.
        assert!(!read.up);
        let m = broker_metrics(None, "b:9092".into(), &[read]);
        let rtt = m.request_latency.expect("three answers");
        assert_eq!(rtt.count, 3);
        assert_eq!(rtt.max, Duration::from_millis(500));
        // The middle of 2, 4 and 500 ms: 4 ms is in the bucket up to 2^12 µs.
        assert_eq!(rtt.p50, Some(Duration::from_micros(4096)));
    }
}
