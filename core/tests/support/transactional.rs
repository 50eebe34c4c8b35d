//! What the transaction tests share (the blocking ones in transactions.rs, the async ones in
//! aio_transactions.rs): topics of three partitions, the transactional producer's settings,
//! and reading a topic back at an isolation level until the positions reach the end offsets.
//!
//! Included with `#[path = "support/transactional.rs"]` by tests that also include
//! `support/configs.rs` as `configs`.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use lagless::{Consumer, Producer, TopicPartition};

use super::configs;

pub const PARTITIONS: i32 = 3;
pub const T: Duration = Duration::from_secs(30);

/// Clusters are started one at a time: JVMs on a shared two-core machine.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

pub fn one_cluster() -> std::sync::MutexGuard<'static, ()> {
    ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// Per partition, the keys delivered in offset order.
pub type Keys = BTreeMap<i32, Vec<String>>;

pub fn tps(topic: &str) -> Vec<TopicPartition> {
    (0..PARTITIONS)
        .map(|p| TopicPartition::new(topic, p))
        .collect()
}

/// The settings of the tests' transactional producers.
pub fn transactional_settings<'a>(bootstrap: &'a str, id: &'a str) -> [(&'a str, &'a str); 4] {
    [
        ("bootstrap.servers", bootstrap),
        ("transactional.id", id),
        ("linger.ms", "5"),
        ("transaction.timeout.ms", "30000"),
    ]
}

pub fn transactional(bootstrap: &str, id: &str) -> Producer {
    configs::producer(&transactional_settings(bootstrap, id))
}

/// Reads `topic` from the start with `isolation` until the positions reach the end offsets
/// (the LSO under read_committed); per partition, the keys in the order delivered.
pub fn read_all(bootstrap: &str, topic: &str, isolation: &str) -> Keys {
    let c = configs::consumer(&[
        ("bootstrap.servers", bootstrap),
        ("isolation.level", isolation),
        ("auto.offset.reset", "earliest"),
        ("fetch.max.wait.ms", "100"),
    ]);
    c.assign(&tps(topic)).unwrap();
    let ends: Vec<i64> = c
        .end_offsets(&tps(topic), Some(T))
        .unwrap()
        .into_iter()
        .map(|(_, o)| o)
        .collect();
    let mut got = Keys::new();
    let deadline = Instant::now() + T;
    loop {
        for r in c.poll(Duration::from_millis(100)).unwrap() {
            let key = String::from_utf8(r.key.unwrap().to_vec()).unwrap();
            got.entry(r.partition).or_default().push(key);
        }
        let positions: Vec<i64> = tps(topic)
            .iter()
            .map(|tp| c.position(tp, Some(T)).unwrap())
            .collect();
        if positions == ends {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{isolation}: positions {positions:?}, not {ends:?}"
        );
    }
    c.close(None).unwrap();
    got
}

pub fn count(k: &Keys) -> usize {
    k.values().map(Vec::len).sum()
}

pub fn committed_offsets(c: &Consumer, topic: &str) -> Vec<i64> {
    c.committed(&tps(topic), Some(T))
        .unwrap()
        .into_iter()
        .map(|(_, o)| o.map_or(-1, |o| o.offset))
        .collect()
}
