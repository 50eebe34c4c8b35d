//! Round trip through a real broker, once per compression codec: the lagless producer writes
//! records with keys, headers (one with a null value) and explicit timestamps to 6 partitions; a
//! lagless consumer (manual assignment, `auto.offset.reset=earliest`) must read every record
//! exactly once, in offset order within each partition, byte-identical to what was sent.
//!
//! Nothing is kept in memory: each expected record is regenerated from (partition, sequence),
//! and on a fresh topic a record's sequence within its partition is its offset.
//!
//! Sizes: 1,000,000 records (40-160 byte values) per codec by default; `LAGLESS_ROUND_TRIP_RECORDS`
//! overrides it. Each test prints its produce and consume times. Measured on the 2-core CI machine
//! in release mode against a local broker: all five codecs (5M records) in 35-54 s with
//! `--test-threads=2` (other builds running); gzip is the slowest (29-48 s to produce), the others
//! take 7-14 s each. That is well within budget, so every codec runs the full million.
mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lagless::{ConsumerRecord, Header, ProducerRecord, TopicPartition};
use support::*;

const PARTITIONS: i32 = 6;

fn records_per_codec() -> usize {
    std::env::var("LAGLESS_ROUND_TRIP_RECORDS")
        .ok()
        .map(|v| {
            v.parse()
                .expect("LAGLESS_ROUND_TRIP_RECORDS must be a number")
        })
        .unwrap_or(1_000_000)
}

/// splitmix64: a cheap, well-mixed hash of (partition, sequence).
fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The record number `seq` of partition `p`, as the producer sends it and the consumer expects it.
struct Expected {
    key: Vec<u8>,
    value: Vec<u8>,
    headers: Vec<Header>,
    timestamp: i64,
}

fn expected(base_ts: i64, p: i32, seq: u64) -> Expected {
    let mut h = mix(((p as u64) << 40) ^ seq);
    let key = format!("key-{p}-{seq}").into_bytes();
    // 40..160 bytes from a 16-letter alphabet: compressible, but not trivially.
    let len = 40 + (h % 120) as usize;
    let mut value = Vec::with_capacity(len);
    while value.len() < len {
        h = mix(h);
        for i in 0..16 {
            if value.len() == len {
                break;
            }
            value.push(b'a' + ((h >> (i * 4)) & 0x0f) as u8);
        }
    }
    let mut headers = vec![Header {
        key: "trace".to_string(),
        value: Some(Bytes::copy_from_slice(&h.to_be_bytes())),
    }];
    if seq.is_multiple_of(2) {
        headers.push(Header {
            key: "nothing".to_string(),
            value: None,
        });
    }
    Expected {
        key,
        value,
        headers,
        timestamp: base_ts + seq as i64 * 3 + p as i64,
    }
}

fn check(base_ts: i64, topic: &str, r: &ConsumerRecord, seq: u64) {
    let e = expected(base_ts, r.partition, seq);
    let at = || format!("{topic}-{} offset {}", r.partition, r.offset);
    assert_eq!(&*r.topic, topic, "{}", at());
    assert_eq!(r.key.as_deref(), Some(&e.key[..]), "key of {}", at());
    assert_eq!(r.value.as_deref(), Some(&e.value[..]), "value of {}", at());
    assert_eq!(r.headers, e.headers, "headers of {}", at());
    assert_eq!(r.timestamp, e.timestamp, "timestamp of {}", at());
    assert!(!r.from_recovery, "{}", at());
}

fn round_trip(codec: &str) {
    let bs = bootstrap();
    let n = records_per_codec();
    // Record i goes to partition i % 6 as that partition's record i / 6.
    let count_of = |p: i32| {
        (n / PARTITIONS as usize + usize::from((p as usize) < n % PARTITIONS as usize)) as u64
    };
    let topic = new_topic(&bs, &format!("round-trip-{codec}"), PARTITIONS);
    // An hour ago, so the broker's timestamp bounds and retention leave the records alone.
    let base_ts = now_ms() - 3_600_000;

    // Produce: partition-major interleaving, so every partition's batches grow together.
    let producer = producer(
        &bs,
        &[
            ("compression.type", codec),
            ("linger.ms", "5"),
            ("batch.size", "65536"),
        ],
    );
    let failures = Arc::new(AtomicUsize::new(0));
    let first_failure = Arc::new(Mutex::new(None::<String>));
    let started = Instant::now();
    for i in 0..n {
        let (p, seq) = (
            (i % PARTITIONS as usize) as i32,
            (i / PARTITIONS as usize) as u64,
        );
        let e = expected(base_ts, p, seq);
        let mut rec = ProducerRecord::new(&topic, e.value)
            .with_partition(p)
            .with_key(e.key)
            .with_timestamp(e.timestamp);
        rec.headers = e.headers;
        let (failures, first) = (failures.clone(), first_failure.clone());
        producer
            .send_with_callback(rec, move |r| {
                if let Err(e) = r {
                    failures.fetch_add(1, Ordering::Relaxed);
                    first.lock().unwrap().get_or_insert(e.to_string());
                }
            })
            .expect("send");
    }
    producer.flush(Duration::from_secs(300)).expect("flush");
    let produce_time = started.elapsed();
    assert_eq!(
        failures.load(Ordering::Relaxed),
        0,
        "records failed; the first: {:?}",
        first_failure.lock().unwrap()
    );
    producer.close(Duration::from_secs(10)).unwrap();

    // Consume.
    let consumer = consumer(
        &bs,
        &[
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "2000"),
        ],
    );
    let tps: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(&topic, p))
        .collect();
    for (tp, end) in consumer.end_offsets(&tps, None).unwrap() {
        assert_eq!(
            end,
            count_of(tp.partition) as i64,
            "end offset of {tp}: the producer wrote each record once"
        );
    }
    consumer.assign(&tps).unwrap();
    let mut next = vec![0u64; PARTITIONS as usize];
    let mut total = 0usize;
    let started = Instant::now();
    let deadline = started + Duration::from_secs(600);
    while total < n {
        assert!(
            Instant::now() < deadline,
            "only {total} of {n} records after {:?}; per partition: {next:?}",
            started.elapsed()
        );
        for r in consumer.poll(Duration::from_secs(1)).expect("poll") {
            let p = r.partition;
            assert!((0..PARTITIONS).contains(&p), "record of partition {p}");
            let want = next[p as usize];
            assert_eq!(
                r.offset, want as i64,
                "partition {p}: expected offset {want} next (a gap, a duplicate or reordering)"
            );
            check(base_ts, &topic, &r, want);
            next[p as usize] += 1;
            total += 1;
        }
    }
    let consume_time = started.elapsed();
    // Nothing more may come: every record was delivered once.
    let extra = consumer.poll(Duration::from_millis(500)).unwrap();
    assert!(
        extra.is_empty(),
        "{} records beyond the end, first {:?}",
        extra.len(),
        extra.first().map(|r| (r.partition, r.offset))
    );
    for tp in &tps {
        assert_eq!(
            consumer.position(tp, None).unwrap(),
            count_of(tp.partition) as i64,
            "{tp}"
        );
    }
    let want: Vec<u64> = (0..PARTITIONS).map(count_of).collect();
    assert_eq!(next, want, "records per partition");
    consumer.close(None).unwrap();
    eprintln!(
        "round trip {codec}: {n} records; produce {produce_time:.2?} ({:.0}/s), consume {consume_time:.2?} ({:.0}/s)",
        n as f64 / produce_time.as_secs_f64(),
        n as f64 / consume_time.as_secs_f64()
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn round_trip_none() {
    round_trip("none");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn round_trip_gzip() {
    round_trip("gzip");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn round_trip_snappy() {
    round_trip("snappy");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn round_trip_lz4() {
    round_trip("lz4");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn round_trip_zstd() {
    round_trip("zstd");
}
