//! The unclean leader election that log_truncation.rs and epoch_validation.rs test against: a
//! three-node cluster, one partition on nodes 1 (leader) and 2 with
//! `unclean.leader.election.enable=true` and `min.insync.replicas=1`. A test writes records both
//! replicas take (acks=all), stops node 2, writes records node 1 alone takes (acks=1), then
//! [`elect_node_2_uncleanly`]: node 1 is killed and node 2, started again, leads without them,
//! so the log is truncated below every position past the records both took.
//!
//! Included with `#[path = "support/unclean_election.rs"]` beside `configs` and `own_broker`.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use lagless::{Consumer, Error, ProducerRecord};

use super::configs;
use super::own_broker::OwnBroker;

/// A three-node cluster with `topic` (one partition) on nodes 1 and 2, led by node 1.
pub fn start(topic: &str) -> OwnBroker {
    let cluster = OwnBroker::start(3);
    cluster.create_topic_on(
        topic,
        &[1, 2],
        &[
            ("unclean.leader.election.enable", "true"),
            ("min.insync.replicas", "1"),
        ],
    );
    assert_eq!(cluster.leader_of(topic, 0), 1);
    cluster
}

/// Writes `n` records `<prefix>:<i>` to partition 0 of `topic` with `acks`, waiting for each.
pub fn produce(bootstrap: &str, topic: &str, acks: &str, prefix: &str, n: usize) {
    let p = configs::producer(&[("bootstrap.servers", bootstrap), ("acks", acks)]);
    let deliveries: Vec<_> = (0..n)
        .map(|i| {
            p.send(ProducerRecord::new(topic, format!("{prefix}:{i}")).with_partition(0))
                .unwrap()
        })
        .collect();
    for d in deliveries {
        d.wait().expect("delivery");
    }
}

/// The (offset, value) pairs [`produce`] wrote with `prefix`, from `first_offset`.
pub fn expected(prefix: &str, first_offset: i64, n: usize) -> Vec<(i64, String)> {
    (0..n)
        .map(|i| (first_offset + i as i64, format!("{prefix}:{i}")))
        .collect()
}

/// The settings of a consumer of this scenario without a group (`reset` its
/// `auto.offset.reset`); a test adds its own after them.
pub fn consumer_settings<'a>(bootstrap: &'a str, reset: &'a str) -> Vec<(&'a str, &'a str)> {
    vec![
        ("bootstrap.servers", bootstrap),
        ("auto.offset.reset", reset),
        ("enable.auto.commit", "false"),
        ("fetch.max.wait.ms", "200"),
        // The outage must not be reported as a stuck partition.
        ("task.timeout.ms", "600000"),
    ]
}

/// Polls `c` until it returned `n` more records (offset and value) or an error came; fails the
/// test when `within` passes first.
pub fn read(c: &Consumer, n: usize, within: Duration) -> (Vec<(i64, String)>, Option<Error>) {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            start.elapsed() < within,
            "only {} of {n} records within {within:?}: {got:?}",
            got.len()
        );
        match c.poll(Duration::from_millis(200)) {
            Ok(records) => got.extend(records.into_iter().map(|r| {
                let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                (r.offset, value)
            })),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// Kills node 1 (the leader) and starts node 2 again, which node 1 left out of the ISR: waits
/// until node 3 sees node 2 lead `topic`-0, elected uncleanly with a log ending where the
/// records both replicas took end. Returns the bootstrap of the surviving nodes.
pub fn elect_node_2_uncleanly(cluster: &OwnBroker, topic: &str) -> String {
    cluster.kill_node(1);
    cluster.start_node(2);
    let waiting = Instant::now();
    loop {
        let leader = cluster.leader_seen_by(3, topic, 0);
        if leader == 2 {
            break;
        }
        assert!(
            waiting.elapsed() < Duration::from_secs(60),
            "node 2 was not elected leader uncleanly within 60 s (leader now {leader})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "node 2 leads after an unclean election, {:?} after the kill",
        waiting.elapsed()
    );
    format!("{},{}", cluster.address(2), cluster.address(3))
}

/// Fails the test unless `e` is a `LogTruncation` of `topic`-0 at `position` with
/// `divergent_offset`; returns its divergent epoch.
pub fn assert_log_truncation(
    e: Option<Error>,
    topic: &str,
    position: i64,
    divergent_offset: i64,
) -> i32 {
    match e {
        Some(Error::LogTruncation {
            ref partition,
            position: at,
            divergent_offset: divergent,
            divergent_epoch,
        }) => {
            assert_eq!((partition.topic.as_str(), partition.partition), (topic, 0));
            assert_eq!((at, divergent), (position, divergent_offset));
            divergent_epoch
        }
        other => panic!("expected LogTruncation at {position}, got {other:?}"),
    }
}
