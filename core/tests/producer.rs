//! Producer against a real broker. Set `LAGLESS_BOOTSTRAP=host:port` (a Kafka 2.1+ broker with
//! `auto.create.topics.enable=false` is fine: the tests create their own topics).
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lagless::config::{Config, ProducerConfig};
use lagless::error::codes;
use lagless::producer::{partition_for_key, Producer, ProducerRecord};
use lagless::Error;

mod support;
use support::{bootstrap, new_topic};

fn config(bootstrap: &str) -> ProducerConfig {
    let c = Config::from_pairs([
        ("bootstrap.servers", bootstrap),
        ("client.id", "lagless-producer-test"),
    ]);
    ProducerConfig::from_config(&c.unwrap()).unwrap()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn keyed_records_land_on_the_java_partition_with_increasing_offsets() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "producer-keyed", 6);
    let mut cfg = config(&bs);
    cfg.acks = 1;
    cfg.enable_idempotence = false;
    let producer = Producer::new(cfg).unwrap();
    assert_eq!(
        producer.partitions_for(&topic).unwrap(),
        vec![0, 1, 2, 3, 4, 5]
    );
    let value = Bytes::from(vec![b'v'; 100]);
    const N: usize = 100_000;
    let started = Instant::now();
    let mut deliveries = Vec::with_capacity(N);
    for i in 0..N {
        let key = format!("key-{i}");
        let rec = ProducerRecord::new(&topic, value.clone()).with_key(key.clone());
        deliveries.push((key, producer.send(rec).unwrap()));
    }
    producer.flush(Duration::from_secs(60)).unwrap();
    let elapsed = started.elapsed();
    eprintln!(
        "produced {N} records in {elapsed:?}: {:.0} records/s",
        N as f64 / elapsed.as_secs_f64()
    );
    let mut last: HashMap<i32, i64> = HashMap::new();
    let mut counts: HashMap<i32, usize> = HashMap::new();
    for (key, d) in deliveries {
        let m = d
            .wait()
            .unwrap_or_else(|e| panic!("record {key} failed: {e}"));
        assert_eq!(m.topic, topic);
        assert_eq!(m.partition, partition_for_key(key.as_bytes(), 6), "{key}");
        let prev = last.insert(m.partition, m.offset);
        assert!(
            prev < Some(m.offset),
            "offsets of partition {} went from {prev:?} to {}",
            m.partition,
            m.offset
        );
        *counts.entry(m.partition).or_default() += 1;
    }
    assert_eq!(counts.values().sum::<usize>(), N);
    assert_eq!(counts.len(), 6, "keys spread over all partitions");
    for (p, n) in &counts {
        // A fresh topic: offsets start at 0 and are dense.
        assert_eq!(last[p], *n as i64 - 1, "partition {p}");
    }
    producer.close(Duration::from_secs(10)).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn unknown_topic_fails_promptly() {
    let bs = bootstrap();
    let producer = Producer::new(config(&bs)).unwrap();
    let t = Instant::now();
    let e = producer
        .send(ProducerRecord::new("lagless-no-such-topic", "v"))
        .err()
        .expect("send to a missing topic must fail");
    assert!(
        matches!(e, Error::UnknownTopic(ref t) if t == "lagless-no-such-topic"),
        "{e}"
    );
    assert!(
        t.elapsed() < Duration::from_secs(10),
        "took {:?}",
        t.elapsed()
    );
    assert!(matches!(
        producer.partitions_for("lagless-no-such-topic"),
        Err(Error::UnknownTopic(_))
    ));
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn flush_sends_without_waiting_for_linger() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "producer-flush", 2);
    let mut cfg = config(&bs);
    cfg.linger = Duration::from_millis(1000);
    let producer = Producer::new(cfg).unwrap();
    producer.partitions_for(&topic).unwrap();
    let t = Instant::now();
    let mut d = producer
        .send(ProducerRecord::new(&topic, "v").with_partition(1))
        .unwrap();
    producer.flush(Duration::from_secs(30)).unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(900),
        "flush waited for linger: {:?}",
        t.elapsed()
    );
    let m = d
        .try_get()
        .expect("delivered by the time flush returns")
        .unwrap();
    assert_eq!((m.partition, m.offset), (1, 0));
    // Without flush, linger holds the record back for about a second.
    let t = Instant::now();
    let d = producer
        .send(ProducerRecord::new(&topic, "w").with_partition(1))
        .unwrap();
    assert_eq!(d.wait().unwrap().offset, 1);
    assert!(
        t.elapsed() >= Duration::from_millis(900),
        "{:?}",
        t.elapsed()
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn callbacks_acks_zero_and_argument_errors() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "producer-misc", 3);
    let mut cfg = config(&bs);
    cfg.acks = 0;
    cfg.enable_idempotence = false;
    let producer = Producer::new(cfg).unwrap();
    let e = producer
        .send(ProducerRecord::new(&topic, "v").with_partition(3))
        .err()
        .unwrap();
    assert!(
        matches!(&e, Error::InvalidArgument(m) if m.contains(&topic) && m.contains('3')),
        "{e}"
    );
    let mut cfg = config(&bs);
    cfg.max_request_size = 1000;
    let small = Producer::new(cfg).unwrap();
    let e = small
        .send(ProducerRecord::new(&topic, vec![0u8; 2000]))
        .err()
        .unwrap();
    assert!(matches!(e, Error::InvalidArgument(_)), "{e}");

    let (tx, rx) = mpsc::channel();
    let done = Arc::new(AtomicUsize::new(0));
    for i in 0..1000 {
        let (tx, done) = (tx.clone(), done.clone());
        producer
            .send_with_callback(ProducerRecord::new(&topic, format!("v{i}")), move |r| {
                done.fetch_add(1, Ordering::SeqCst);
                let _ = tx.send(r);
            })
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    assert_eq!(
        done.load(Ordering::SeqCst),
        1000,
        "flush waits for callbacks"
    );
    for _ in 0..1000 {
        let m = rx.recv().unwrap().unwrap();
        assert_eq!(m.offset, -1, "acks=0 has no offsets");
    }
    // Unkeyed records are sticky: consecutive small records share a partition.
    let d: Vec<_> = (0..10)
        .map(|_| small.send(ProducerRecord::new(&topic, "x")).unwrap())
        .collect();
    let parts: Vec<i32> = d.into_iter().map(|d| d.wait().unwrap().partition).collect();
    assert!(
        parts.windows(2).filter(|w| w[0] != w[1]).count() < 9,
        "{parts:?}"
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn creating_an_existing_topic_is_topic_already_exists() {
    let bs = bootstrap();
    let topic = new_topic(&bs, "producer-exists", 1);
    let e = lagless::admin::create_topic(&bs, &topic, 1, 1).unwrap_err();
    assert_eq!(e.kafka_code(), Some(codes::TOPIC_ALREADY_EXISTS), "{e}");
}
