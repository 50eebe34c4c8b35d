//! Loads a benchmark dataset: `bench_produce <bootstrap> <topic> <records> <value bytes> <compression> [partitions]`.
//! Creates the topic, then sends unkeyed records with fixed batching (batch.size 64 KiB, linger 20 ms,
//! acks=1) so every dataset of one record size has the same records per batch. Values are text-like
//! (words from a fixed, seeded vocabulary) so lz4 and zstd have something realistic to compress.
//! Exits non-zero unless every record was acknowledged.
//!
//! `bench/eos` also times it as a producer: `BENCH_CONFIG` (one `key=value` a line) overrides the
//! settings above (`acks=all`, `enable.idempotence=true|false`), and
//! `BENCH_TRANSACTIONS=<records a transaction>:<abort every n-th>` writes the records in
//! transactions (`transactional.id` bench-produce-<topic>), round-robin over the partitions, the
//! n-th, 2n-th, ... transaction aborted. It prints `RESULT <records> <bytes> <seconds>` (the
//! records the application sent, aborted ones included) before its summary line.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use lagless::producer::{Producer, ProducerRecord};
use lagless::Config;

fn corpus(len: usize) -> Bytes {
    const WORDS: &[&str] = &[
        "order",
        "user",
        "id",
        "amount",
        "status",
        "shipped",
        "pending",
        "eu-west",
        "us-east",
        "item",
        "price",
        "currency",
        "EUR",
        "USD",
        "true",
        "false",
        "null",
        "timestamp",
        "session",
        "click",
        "view",
        "cart",
        "checkout",
        "payment",
        "refund",
        "a",
        "the",
        "of",
        "and",
        "to",
    ];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out = Vec::with_capacity(len + 32);
    while out.len() < len {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        if x.is_multiple_of(4) {
            // Numbers compress less well than words: about a quarter of the tokens.
            out.extend_from_slice(format!("{}", x % 1_000_000).as_bytes());
        } else {
            out.extend_from_slice(WORDS[(x >> 8) as usize % WORDS.len()].as_bytes());
        }
        out.push(if x.is_multiple_of(7) { b',' } else { b' ' });
    }
    out.truncate(len);
    Bytes::from(out)
}

fn main() -> lagless::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.len() < 6 {
        eprintln!("usage: bench_produce <bootstrap> <topic> <records> <value bytes> <compression> [partitions]");
        std::process::exit(2);
    }
    let (bootstrap, topic) = (&args[1], &args[2]);
    let n: u64 = args[3].parse().expect("records");
    let size: usize = args[4].parse().expect("value bytes");
    let compression = &args[5];
    let partitions: i32 = args.get(6).map_or(6, |s| s.parse().expect("partitions"));
    match lagless::admin::create_topic(bootstrap, topic, partitions, 1) {
        // bench/eos creates the topic of a timed producer run beforehand.
        Err(e) if e.kafka_code() == Some(lagless::error::codes::TOPIC_ALREADY_EXISTS) => {}
        created => created?,
    }
    let mut config = Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("client.id", "bench-produce"),
        ("acks", "1"),
        ("linger.ms", "20"),
        ("batch.size", "65536"),
        ("compression.type", compression.as_str()),
        ("buffer.memory", "67108864"),
        ("max.request.size", "1048576"),
    ])?;
    for line in std::env::var("BENCH_CONFIG").unwrap_or_default().lines() {
        if let Some((k, v)) = line.split_once('=') {
            config.set(k, v)?;
        }
    }
    // (records a transaction, every how many-th one is aborted)
    let transactions: Option<(u64, u64)> = std::env::var("BENCH_TRANSACTIONS").ok().map(|t| {
        let (per, every) = t
            .split_once(':')
            .expect("BENCH_TRANSACTIONS=<records>:<abort every>");
        (
            per.parse().expect("records a transaction"),
            every.parse().expect("abort every"),
        )
    });
    if transactions.is_some() {
        config.set("transactional.id", &format!("bench-produce-{topic}"))?;
        config.set("acks", "all")?;
    }
    let producer = Producer::from_config(&config)?;
    producer.partitions_for(topic)?;
    let pool = corpus(1 << 20);
    let failed = Arc::new(AtomicU64::new(0));
    let txn_timeout = Duration::from_secs(60);
    if transactions.is_some() {
        producer.init_transactions(txn_timeout)?;
    }
    let (mut aborted, mut in_txn, mut txn_no) = (0u64, 0u64, 0u64);
    let t = Instant::now();
    let mut off = 0usize;
    for i in 0..n {
        if transactions.is_some() {
            if in_txn == 0 {
                producer.begin_transaction()?;
            }
            in_txn += 1;
        }
        off = (off + 7919) % (pool.len() - size);
        let failed = failed.clone();
        let mut record = ProducerRecord::new(topic.as_str(), pool.slice(off..off + size));
        if transactions.is_some() {
            // Round-robin, so that every partition holds committed and aborted transactions.
            record = record.with_partition((i % partitions as u64) as i32);
        }
        producer.send_with_callback(record, move |r| {
            if r.is_err() {
                failed.fetch_add(1, Ordering::Relaxed);
            }
        })?;
        if let Some((per, every)) = transactions {
            if in_txn == per || i + 1 == n {
                txn_no += 1;
                if every > 0 && txn_no % every == 0 {
                    // Written, then aborted: the log holds the records and the ABORT marker.
                    producer.flush(txn_timeout)?;
                    producer.abort_transaction(txn_timeout)?;
                    aborted += in_txn;
                } else {
                    producer.commit_transaction(txn_timeout)?;
                }
                in_txn = 0;
            }
        }
    }
    producer.flush(Duration::from_secs(600))?;
    let secs = t.elapsed().as_secs_f64();
    producer.close(Duration::from_secs(10))?;
    let failed = failed.load(Ordering::Relaxed);
    println!("RESULT {n} {} {secs:.6}", n * size as u64);
    if transactions.is_some() {
        println!("ABORTED {aborted} COMMITTED {}", n - aborted);
    }
    println!(
        "{topic}: {n} records of {size} B, {compression}, {partitions} partitions in {secs:.1} s ({:.0} records/s), {failed} failed",
        n as f64 / secs
    );
    if failed > 0 {
        std::process::exit(1);
    }
    Ok(())
}
