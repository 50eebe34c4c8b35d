//! The per-broker metrics (`brokers[]` of the consumer's snapshot) in the states a real broker
//! does not show on cue: a connection whose setup never ends (`connecting`), a request the broker
//! never answers (`requests_in_flight`), answers that come a known time late (`rtt`); and a
//! partition whose fetches fail (`fetch_errors`), a coordinator that stops answering heartbeats
//! (`last_heartbeat_answer_seconds_ago`). Against a
//! silent listener, the fake broker (support/fake_broker.rs) and the test proxy in front of it;
//! no real broker needed.
#[path = "support/fake_broker.rs"]
mod fake_broker;
#[path = "support/proxy.rs"]
mod proxy;
mod support;

use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use fake_broker::{Behavior, FakeBroker};
use kafka_protocol::messages::ApiKey;
use lagless::metrics::BrokerMetrics;
use lagless::{Consumer, TopicPartition};
use support::wait_until;

const TOPIC: &str = "broker-metrics";

fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> Consumer {
    let base = [
        ("bootstrap.servers", bootstrap),
        ("client.id", "broker-metrics"),
        ("auto.offset.reset", "earliest"),
        ("enable.metrics.push", "false"),
    ];
    support::configs::consumer(&[&base[..], extra].concat())
}

fn broker_at(c: &Consumer, address: &str) -> Option<BrokerMetrics> {
    c.metrics()
        .brokers
        .into_iter()
        .find(|b| b.address == address)
}

fn node(c: &Consumer, id: i32) -> Option<BrokerMetrics> {
    c.metrics()
        .brokers
        .into_iter()
        .find(|b| b.node_id == Some(id))
}

#[test]
fn a_setup_that_never_ends_is_connecting_and_a_refused_one_down() {
    // Accepts connections and never answers: the setup's ApiVersions request waits.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let held = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            let mut held = Vec::new();
            listener.set_nonblocking(true).unwrap();
            while !stop.load(Ordering::Acquire) {
                if let Ok((s, _)) = listener.accept() {
                    held.push(s);
                }
                std::thread::sleep(Duration::from_millis(5));
            }
            // Dropped here: every held connection closes, the listener too.
        })
    };
    let c = consumer(&address, &[("socket.connection.setup.timeout.ms", "60000")]);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    wait_until(
        "the bootstrap server connecting",
        Duration::from_secs(10),
        || {
            let _ = c.poll(Duration::from_millis(20));
            broker_at(&c, &address).is_some_and(|b| b.state == "connecting")
        },
    );
    let b = broker_at(&c, &address).unwrap();
    assert_eq!(
        (b.node_id, b.connects_total, b.connections),
        (None, 0, 0),
        "{b:?}"
    );
    // The server goes away: the setup fails, and the entry is down.
    stop.store(true, Ordering::Release);
    held.join().unwrap();
    wait_until("the bootstrap server down", Duration::from_secs(10), || {
        let _ = c.poll(Duration::from_millis(20));
        broker_at(&c, &address).is_some_and(|b| b.state == "down")
    });
    let b = broker_at(&c, &address).unwrap();
    assert!(b.connect_failures_total >= 1, "{b:?}");
    assert_eq!(b.connects_total, 0, "{b:?}");
    c.close(Some(Duration::from_secs(2))).unwrap();
}

#[test]
fn a_fetch_the_broker_never_answers_stays_in_flight() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 20,
            per_sec: 0,
        }],
    );
    let c = consumer(&broker.addr, &[("fetch.max.wait.ms", "50")]);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    let mut got = 0;
    wait_until("the 20 records", Duration::from_secs(10), || {
        got += c.poll(Duration::from_millis(50)).unwrap().len();
        got == 20
    });
    // Polls for `d` and returns the broker's entry before and after.
    let across = |d: Duration| {
        let first = node(&c, 1).expect("the broker's entry");
        let end = std::time::Instant::now() + d;
        while std::time::Instant::now() < end {
            let _ = c.poll(Duration::from_millis(20));
        }
        (first, node(&c, 1).unwrap())
    };
    // At the log end the fetches are long polls the broker answers after fetch.max.wait.ms:
    // one is in flight most of the time, and they keep coming.
    let (a, b) = across(Duration::from_millis(600));
    assert!(b.requests_total > a.requests_total, "{a:?} -> {b:?}");
    broker.stall(ApiKey::Fetch);
    // The long poll read before the stall is still answered (within fetch.max.wait.ms); the
    // one after it is not.
    across(Duration::from_millis(500));
    // Stalled: the one in flight stays, no answer comes, so no other Fetch follows it (12
    // fetch.max.wait.ms).
    let (a, b) = across(Duration::from_millis(600));
    assert_eq!(b.requests_in_flight, 1, "{b:?}");
    assert_eq!(b.requests_total, a.requests_total, "{a:?} -> {b:?}");
    assert_eq!(
        b.request_latency.as_ref().map(|l| l.count),
        a.request_latency.as_ref().map(|l| l.count),
        "no answer: {a:?} -> {b:?}"
    );
    assert_eq!(
        b.state, "up",
        "a request waiting is no lost connection: {b:?}"
    );
    c.close(Some(Duration::from_secs(2))).unwrap();
}

#[test]
fn answers_a_known_time_late_show_in_the_round_trip_time() {
    const DELAY: Duration = Duration::from_millis(250);
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 5,
            per_sec: 0,
        }],
    );
    // The bootstrap server is the broker behind a proxy that holds every answer 250 ms; the
    // broker's own address (from the metadata) is reached directly.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let proxy = proxy::Proxy::start(&[(port, broker.addr.clone())]);
    proxy.set(0, proxy::Mode::Delay(DELAY));
    let c = consumer(&proxy.bootstrap(), &[]);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    let mut got = 0;
    wait_until("the 5 records", Duration::from_secs(10), || {
        got += c.poll(Duration::from_millis(50)).unwrap().len();
        got == 5
    });
    let boot = broker_at(&c, &proxy.bootstrap()).expect("the bootstrap entry");
    let rtt = boot
        .request_latency
        .expect("answers through the proxy were timed");
    assert!(rtt.count >= 1, "{rtt:?}");
    // Every answer through the proxy came at least 250 ms after its request. The percentiles
    // are their bucket's upper bound (at most the max), so none may be below the delay.
    assert!(rtt.max >= DELAY, "{rtt:?}");
    assert!(rtt.avg >= DELAY, "{rtt:?}");
    assert!(rtt.p50.is_some_and(|p| p >= DELAY), "{rtt:?}");
    assert!(rtt.p99.is_some_and(|p| p >= DELAY), "{rtt:?}");
    // The broker's own entry served the fetches, straight.
    let direct = node(&c, 1).expect("the broker's entry");
    assert!(
        direct
            .request_latency
            .as_ref()
            .is_some_and(|r| r.count >= 1),
        "{direct:?}"
    );
    c.close(Some(Duration::from_secs(2))).unwrap();
}

#[test]
fn a_partition_whose_fetches_fail_counts_them_and_its_neighbour_none() {
    const UNKNOWN_SERVER_ERROR: i16 = -1;
    let broker = FakeBroker::start(
        TOPIC,
        vec![
            Behavior::Records {
                total: 10,
                per_sec: 0,
            },
            Behavior::FetchError(UNKNOWN_SERVER_ERROR),
        ],
    );
    let c = consumer(
        &broker.addr,
        &[
            ("fetch.max.wait.ms", "50"),
            ("retry.backoff.ms", "20"),
            ("retry.backoff.max.ms", "100"),
        ],
    );
    c.assign(&[TopicPartition::new(TOPIC, 0), TopicPartition::new(TOPIC, 1)])
        .unwrap();
    let partition = |c: &Consumer, n: i32| {
        c.metrics()
            .partitions
            .into_iter()
            .find(|p| p.partition == n)
            .expect("an assigned partition")
    };
    let mut read = 0;
    wait_until(
        "10 records of partition 0 and 3 failed fetches of partition 1",
        Duration::from_secs(20),
        || {
            // Partition 1's failures come out of poll() too (KIP-572); the records go on.
            if let Ok(records) = c.poll(Duration::from_millis(50)) {
                read += records.len();
            }
            read == 10 && partition(&c, 1).fetch_errors >= 3
        },
    );
    let (p0, p1) = (partition(&c, 0), partition(&c, 1));
    assert_eq!(p0.fetch_errors, 0, "{p0:?}");
    assert!(p0.failing.is_none(), "{p0:?}");
    let failing = p1.failing.expect("partition 1 is failing");
    assert!(
        failing
            .last_error
            .as_deref()
            .is_some_and(|e| e.contains("UNKNOWN_SERVER_ERROR")),
        "{failing:?}"
    );
    c.close(Some(Duration::from_secs(2))).unwrap();
}

#[test]
fn the_time_since_a_heartbeat_answer_grows_while_the_coordinator_is_silent() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 5,
            per_sec: 0,
        }],
    );
    let c = consumer(
        &broker.addr,
        &[
            ("group.id", "broker-metrics"),
            ("fetch.max.wait.ms", "50"),
            ("heartbeat.interval.ms", "100"),
            ("session.timeout.ms", "6000"),
        ],
    );
    let since = |c: &Consumer| {
        c.metrics()
            .group
            .expect("a group member")
            .since_last_heartbeat_answer
    };
    c.subscribe(&[TOPIC], None).unwrap();
    wait_until(
        "a joined member heartbeating",
        Duration::from_secs(30),
        || {
            c.poll(Duration::from_millis(50)).unwrap();
            c.assignment().len() == 1 && broker.heartbeats() >= 2
        },
    );
    // Answered every 100 ms.
    wait_until(
        "a heartbeat answered within 500 ms",
        Duration::from_secs(10),
        || {
            c.poll(Duration::from_millis(50)).unwrap();
            since(&c).is_some_and(|d| d < Duration::from_millis(500))
        },
    );
    // The coordinator stops answering: the time grows past ten heartbeat intervals.
    broker.stall(ApiKey::Heartbeat);
    wait_until("no answer for 1.5 s", Duration::from_secs(5), || {
        c.poll(Duration::from_millis(50)).unwrap();
        since(&c).is_some_and(|d| d >= Duration::from_millis(1_500))
    });
    c.close(Some(Duration::from_secs(2))).unwrap();
}
