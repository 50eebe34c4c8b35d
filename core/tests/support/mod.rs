//! Helpers shared by the integration tests that run against a real broker.
//!
//! The broker address comes from `LAGLESS_BOOTSTRAP` (tests/run starts a broker and sets it).
//! Tests that need a broker carry `#[ignore = "needs a Kafka broker: ..."]`, so that a plain
//! `cargo test` runs the rest without one; tests/run runs them with `--include-ignored`.
//! Every test creates its own topics, named uniquely, so reruns against one broker never collide.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lagless::{Consumer, Producer, ProducerRecord};

pub mod configs;
mod wait;
#[allow(unused_imports)]
pub use configs::{config, group_member_settings};
#[allow(unused_imports)]
pub use wait::{poll_until_error, wait_assigned, wait_until};

pub fn bootstrap() -> String {
    std::env::var("LAGLESS_BOOTSTRAP").expect(
        "LAGLESS_BOOTSTRAP is not set: this test needs a Kafka broker (run it through tests/run, \
         or as `python3 tests/kafka_broker.py run --security -- cargo test ... -- \
         --include-ignored`)",
    )
}

/// A name no other test (or earlier run) uses.
pub fn unique_name(prefix: &str) -> String {
    static N: AtomicUsize = AtomicUsize::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    format!(
        "{prefix}-{nanos}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Creates a fresh topic with `partitions` partitions and returns its name.
pub fn new_topic(bootstrap: &str, prefix: &str, partitions: i32) -> String {
    let name = unique_name(prefix);
    lagless::admin::create_topic(bootstrap, &name, partitions, 1)
        .unwrap_or_else(|e| panic!("creating topic {name}: {e}"));
    name
}

/// A consumer on `bootstrap` with the given extra settings.
pub fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> Consumer {
    let base = [
        ("bootstrap.servers", bootstrap),
        ("client.id", "lagless-test"),
    ];
    configs::consumer(&[&base[..], extra].concat())
}

/// A member of `group` (`configs::group_member_settings`); `extra` adds settings or overrides
/// these.
pub fn group_member(bootstrap: &str, group: &str, extra: &[(&str, &str)]) -> Consumer {
    consumer(
        bootstrap,
        &[&group_member_settings(group)[..], extra].concat(),
    )
}

/// Produces `per_partition` records (values `v<partition>-<i>`) to each of partitions
/// `0..partitions` of `topic`, waits for every delivery and returns the offsets written per
/// partition, so a test can count every one of them on the consuming side. A fresh producer, so
/// it sees partitions added a moment ago.
pub fn produce(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
    per_partition: usize,
) -> BTreeMap<i32, BTreeSet<i64>> {
    let p = producer(bootstrap, &[("linger.ms", "5")]);
    let mut deliveries = Vec::new();
    for i in 0..per_partition {
        for part in 0..partitions {
            let record = ProducerRecord::new(topic, format!("v{part}-{i}")).with_partition(part);
            deliveries.push(p.send(record).expect("send"));
        }
    }
    p.flush(Duration::from_secs(60)).expect("flush");
    let mut written: BTreeMap<i32, BTreeSet<i64>> = BTreeMap::new();
    for d in deliveries {
        let md = d.wait().expect("delivery");
        written.entry(md.partition).or_default().insert(md.offset);
    }
    p.close(Duration::from_secs(5)).expect("close the producer");
    written
}

/// Sends the core's log events to the test output when `RUST_LOG` is set.
pub fn init_logs() {
    if std::env::var("RUST_LOG").is_ok() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Producer {
    let base = [
        ("bootstrap.servers", bootstrap),
        ("client.id", "lagless-test"),
    ];
    configs::producer(&[&base[..], extra].concat())
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub const SECOND: Duration = Duration::from_secs(1);
