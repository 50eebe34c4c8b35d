//! Helpers shared by the integration tests that run against a real broker.
//!
//! The broker address comes from `LAGLESS_BOOTSTRAP` (tests/run starts a broker and sets it).
//! Every test creates its own topics, named uniquely, so reruns against one broker never collide.
#![allow(dead_code)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use lagless::{Config, Consumer, Producer};

mod wait;
#[allow(unused_imports)]
pub use wait::wait_until;

pub fn bootstrap() -> String {
    std::env::var("LAGLESS_BOOTSTRAP").expect(
        "LAGLESS_BOOTSTRAP is not set: these tests need a Kafka broker \
         (run them through tests/run, or start one with `python3 tests/kafka_broker.py start` \
         and set LAGLESS_BOOTSTRAP=host:port)",
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

pub fn config(pairs: &[(&str, &str)]) -> Config {
    let mut c = Config::new();
    for (k, v) in pairs {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    c
}

/// A consumer on `bootstrap` with the given extra settings.
pub fn consumer(bootstrap: &str, extra: &[(&str, &str)]) -> Consumer {
    let mut c = config(&[
        ("bootstrap.servers", bootstrap),
        ("client.id", "lagless-test"),
    ]);
    for (k, v) in extra {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    Consumer::from_config(&c).expect("consumer")
}

pub fn producer(bootstrap: &str, extra: &[(&str, &str)]) -> Producer {
    let mut c = config(&[
        ("bootstrap.servers", bootstrap),
        ("client.id", "lagless-test"),
    ]);
    for (k, v) in extra {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    Producer::from_config(&c).expect("producer")
}

pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

pub const SECOND: Duration = Duration::from_secs(1);
