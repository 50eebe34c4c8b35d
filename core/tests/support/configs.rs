//! Clients made from (key, value) settings: the one place for what every broker test used to
//! write for itself. A setting given again replaces the earlier one (`Config::set` does), so a
//! builder's defaults come first and a test's own settings after them:
//! `consumer(&[defaults, &[("client.id", "Z")]].concat())`.
//!
//! Included by `support/mod.rs` and, with `#[path = "support/configs.rs"]`, by the tests that
//! start clusters of their own.
#![allow(dead_code)]

use lagless::{Config, Consumer, Producer, TopicPartition};

/// A config from `pairs`; panics naming the key of a bad one.
pub fn config(pairs: &[(&str, &str)]) -> Config {
    let mut c = Config::new();
    for (k, v) in pairs {
        c.set(k, v).unwrap_or_else(|e| panic!("{k}={v}: {e}"));
    }
    c
}

pub fn consumer(pairs: &[(&str, &str)]) -> Consumer {
    Consumer::from_config(&config(pairs)).unwrap_or_else(|e| panic!("consumer: {e}"))
}

pub fn producer(pairs: &[(&str, &str)]) -> Producer {
    Producer::from_config(&config(pairs)).unwrap_or_else(|e| panic!("producer: {e}"))
}

/// A member of `group` reading from the earliest offset, with liveness timeouts short enough for
/// tests: session 6 s (the broker's `group.min.session.timeout.ms` in tests/kafka_broker.py is
/// 1 s), heartbeat 0.5 s, poll interval 30 s.
///
/// With `LAGLESS_TEST_GROUP_PROTOCOL=consumer` (tests/suites runs the recovery tests so) the
/// member speaks KIP-848's consumer protocol instead: the broker's `group.consumer.*` settings
/// (tests/kafka_broker.py: session 6 s, heartbeat 0.5 s) stand for the two liveness keys, which
/// that protocol refuses.
pub fn group_member_settings(group: &str) -> Vec<(&str, &str)> {
    if std::env::var("LAGLESS_TEST_GROUP_PROTOCOL").is_ok_and(|v| v == "consumer") {
        return vec![
            ("group.id", group),
            ("group.protocol", "consumer"),
            ("auto.offset.reset", "earliest"),
            ("max.poll.interval.ms", "30000"),
        ];
    }
    vec![
        ("group.id", group),
        ("auto.offset.reset", "earliest"),
        ("session.timeout.ms", "6000"),
        ("heartbeat.interval.ms", "500"),
        ("max.poll.interval.ms", "30000"),
    ]
}

/// A consumer without a group assigned every partition of `topic` (`partitions` of them), from
/// the earliest offset, that waits at most `fetch.max.wait.ms` = 500 ms for data: an idle reader
/// of many partitions. Returns the consumer and the partitions.
pub fn assigned_all(
    bootstrap: &str,
    topic: &str,
    partitions: i32,
) -> (Consumer, Vec<TopicPartition>) {
    let c = consumer(&[
        ("bootstrap.servers", bootstrap),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "500"),
    ]);
    let tps: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    c.assign(&tps).unwrap_or_else(|e| panic!("assign: {e}"));
    (c, tps)
}
