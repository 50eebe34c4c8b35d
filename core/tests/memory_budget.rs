//! `fetch.buffer.max.bytes` as one budget over the fetch path, against a real broker: records of
//! paused partitions give way when they hold the budget and come again after `resume()`, every
//! offset once; a record larger than the whole budget still comes; a huge `max.poll.records`
//! is only a limit. (Peak RSS against the bound: bindings/python/tests/test_memory.py.)
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use lagless::log::{set_log_callback, LogLevel};
use lagless::{ProducerRecord, TopicPartition};
use support::*;

const KB: usize = 1000;

/// `n` records of `size` bytes to partition `p` of `topic`; each value starts with its index.
fn produce_sized(bs: &str, topic: &str, p: i32, n: usize, size: usize) {
    let producer = producer(bs, &[("linger.ms", "5")]);
    let deliveries: Vec<_> = (0..n)
        .map(|i| {
            let mut value = format!("{p}-{i}-").into_bytes();
            value.resize(size, b'x');
            producer
                .send(ProducerRecord::new(topic, value).with_partition(p))
                .unwrap()
        })
        .collect();
    producer.flush(Duration::from_secs(60)).unwrap();
    for d in deliveries {
        d.wait().expect("delivered");
    }
    producer.close(Duration::from_secs(5)).unwrap();
}

/// Four partitions of 1,500 records of 1 KB under a 256 KiB budget (64 KiB per partition and
/// fetch): two are paused once each has delivered some, while their fetched records are still
/// buffered; the other two must read to their end, then the paused two after `resume()`. Every
/// partition's records come in order, each offset once.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn paused_partitions_give_their_room_back_and_read_on_after_resume() {
    const PER_PARTITION: i64 = 1500;
    // How often the fetch path dropped paused partitions' records for room (its debug line):
    // unpaused partitions reading to their end does not show it by itself, since a consumer with
    // nothing else to do still sends a fetch of the smallest size past a full budget.
    let drops = Arc::new(AtomicUsize::new(0));
    let seen = drops.clone();
    set_log_callback(
        LogLevel::Debug,
        Arc::new(move |_, _, msg: &str| {
            if msg.contains("records of paused partitions dropped") {
                seen.fetch_add(1, Ordering::Relaxed);
            }
        }),
    )
    .expect("the log callback (RUST_LOG must be unset: it installs another subscriber)");
    let bs = bootstrap();
    let topic = new_topic(&bs, "budget-pause", 4);
    for p in 0..4 {
        produce_sized(&bs, &topic, p, PER_PARTITION as usize, KB);
    }
    let c = consumer(
        &bs,
        &[
            ("auto.offset.reset", "earliest"),
            ("fetch.buffer.max.bytes", "262144"),
            ("max.partition.fetch.bytes", "65536"),
            ("max.poll.records", "50"),
        ],
    );
    let tps: Vec<TopicPartition> = (0..4).map(|p| TopicPartition::new(&topic, p)).collect();
    c.assign(&tps).unwrap();
    let mut next = [0i64; 4];
    let take = |rs: Vec<lagless::ConsumerRecord>, next: &mut [i64; 4]| {
        for r in rs {
            let p = r.partition as usize;
            assert_eq!(r.offset, next[p], "partition {p}");
            let want = format!("{p}-{}-", r.offset);
            assert!(r.value.as_deref().unwrap().starts_with(want.as_bytes()));
            next[p] += 1;
        }
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while next[0] == 0 || next[1] == 0 {
        assert!(Instant::now() < deadline, "partitions 0 and 1 at {next:?}");
        take(c.poll(Duration::from_millis(200)).unwrap(), &mut next);
    }
    c.pause(&tps[..2]).unwrap();
    let paused_at = [next[0], next[1]];
    while next[2] < PER_PARTITION || next[3] < PER_PARTITION {
        assert!(
            Instant::now() < deadline,
            "the unpaused partitions stalled at {next:?}"
        );
        let rs = c.poll(Duration::from_millis(200)).unwrap();
        assert!(
            rs.iter().all(|r| r.partition >= 2),
            "a paused partition's record"
        );
        take(rs, &mut next);
    }
    assert_eq!([next[0], next[1]], paused_at);
    let dropped = drops.load(Ordering::Relaxed);
    assert!(
        dropped >= 1,
        "the paused partitions' records never gave their room up"
    );
    c.resume(&tps[..2]).unwrap();
    while next.iter().any(|&n| n < PER_PARTITION) {
        assert!(Instant::now() < deadline, "after resume() at {next:?}");
        take(c.poll(Duration::from_millis(200)).unwrap(), &mut next);
    }
    // Nothing more: no offset came twice.
    assert!(c.poll(Duration::from_millis(500)).unwrap().is_empty());
    assert_eq!(next, [PER_PARTITION; 4]);
    eprintln!(
        "paused at {paused_at:?}, their records dropped for room {dropped} times; every partition \
         read to {PER_PARTITION}, each offset once"
    );
    c.close(None).unwrap();
}

/// A record of 1,000,000 bytes (near the broker's default message.max.bytes) between small ones,
/// read with a 256 KiB budget, fetches of 128 KiB and `max.poll.records` 2^31-1: the budget lets
/// one fetch go for it, the broker returns its batch whole (KIP-74), and every record comes in
/// order.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_record_larger_than_the_budget_still_comes() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "budget-large", 1);
    produce_sized(&bs, &topic, 0, 5, 100);
    produce_sized(&bs, &topic, 0, 1, 1_000_000);
    produce_sized(&bs, &topic, 0, 5, 100);
    let c = consumer(
        &bs,
        &[
            ("auto.offset.reset", "earliest"),
            ("fetch.buffer.max.bytes", "262144"),
            ("fetch.max.bytes", "131072"),
            ("max.partition.fetch.bytes", "65536"),
            ("max.poll.records", "2147483647"),
        ],
    );
    c.assign(&[TopicPartition::new(&topic, 0)]).unwrap();
    let mut got = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    while got.len() < 11 {
        assert!(Instant::now() < deadline, "{} of 11 records", got.len());
        got.extend(c.poll(Duration::from_millis(200)).unwrap());
    }
    let offsets: Vec<i64> = got.iter().map(|r| r.offset).collect();
    assert_eq!(offsets, (0..11).collect::<Vec<_>>());
    let sizes: Vec<usize> = got
        .iter()
        .map(|r| r.value.as_ref().unwrap().len())
        .collect();
    assert_eq!(sizes[5], 1_000_000);
    assert!(sizes.iter().enumerate().all(|(i, &s)| i == 5 || s == 100));
    assert!(got[5].value.as_deref().unwrap().starts_with(b"0-0-"));
    assert!(c.poll(Duration::from_millis(500)).unwrap().is_empty());
    c.close(None).unwrap();
}
