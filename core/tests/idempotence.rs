//! The idempotent producer (`enable.idempotence`, on by default) against a broker of the test's
//! own: its batches carry a producer id and contiguous per-partition sequences, and answers lost
//! or connections cut while batches are in flight write no record twice and none out of order.
//! The same scenario with `enable.idempotence=false` writes duplicates: the scenario forces them,
//! idempotence is what removes them.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;
#[path = "support/proxy.rs"]
mod proxy;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lagless::protocol::msg::fetch_request::{FetchPartition, FetchTopic};
use lagless::protocol::msg::{BrokerId, FetchRequest, StrBytes, TopicName};
use lagless::protocol::records::{producer_states, ProducerState};
use lagless::protocol::wire::{decode_response, encode_request};
use lagless::{ProducerRecord, TopicPartition};
use own_broker::OwnBroker;
use proxy::{Mode, Proxy};

/// Clusters are started one at a time: JVMs on a shared two-core machine.
static ONE_CLUSTER: Mutex<()> = Mutex::new(());

fn one_cluster() -> std::sync::MutexGuard<'static, ()> {
    ONE_CLUSTER.lock().unwrap_or_else(|e| e.into_inner())
}

/// The header fields of every batch of `topic`-`partition` from offset 0, read with raw Fetch
/// requests from the broker at `addr` (its leader), so the test sees what the broker stored.
fn stored_batches(addr: &str, topic: &str, partition: i32) -> Vec<ProducerState> {
    let mut sock = TcpStream::connect(addr).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let mut out: Vec<ProducerState> = Vec::new();
    let mut offset = 0i64;
    for correlation in 1.. {
        let req = FetchRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_max_wait_ms(0)
            .with_min_bytes(0)
            .with_max_bytes(8 << 20)
            .with_session_epoch(-1)
            .with_topics(vec![FetchTopic::default()
                .with_topic(TopicName(StrBytes::from_string(topic.to_string())))
                .with_partitions(vec![FetchPartition::default()
                    .with_partition(partition)
                    .with_fetch_offset(offset)
                    .with_current_leader_epoch(-1)
                    .with_last_fetched_epoch(-1)
                    .with_log_start_offset(-1)
                    .with_partition_max_bytes(8 << 20)])]);
        let frame = encode_request(&req, 12, correlation, "idempotence-test").unwrap();
        sock.write_all(&frame).unwrap();
        let mut len = [0u8; 4];
        sock.read_exact(&mut len).unwrap();
        let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
        sock.read_exact(&mut body).unwrap();
        let resp = decode_response::<FetchRequest>(Bytes::from(body), 12).unwrap();
        let p = &resp.responses[0].partitions[0];
        assert_eq!(p.error_code, 0, "fetch {topic}-{partition}");
        let batches = producer_states(p.records.as_deref().unwrap_or_default());
        let Some(last) = batches.last() else {
            break;
        };
        offset = last.base_offset + i64::from(last.records);
        out.extend(batches);
        if offset >= p.high_watermark {
            break;
        }
    }
    out
}

/// Reads `partitions` partitions of `topic` from the start until `total` records came back (or
/// two minutes passed): each partition's values in offset order.
fn read_back(bootstrap: &str, topic: &str, partitions: i32, total: usize) -> Vec<Vec<String>> {
    let consumer = configs::consumer(&[
        ("bootstrap.servers", bootstrap),
        ("auto.offset.reset", "earliest"),
        ("max.poll.records", "2000"),
    ]);
    let parts: Vec<TopicPartition> = (0..partitions)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&parts).unwrap();
    let mut seen: Vec<Vec<String>> = vec![Vec::new(); partitions as usize];
    let mut n = 0;
    let deadline = Instant::now() + Duration::from_secs(120);
    while n < total && Instant::now() < deadline {
        for r in consumer.poll(Duration::from_millis(200)).unwrap() {
            seen[r.partition as usize].push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
            n += 1;
        }
    }
    // Anything past `total` would be a duplicate: give it a moment to show up.
    let settle = Instant::now() + Duration::from_secs(2);
    while Instant::now() < settle {
        for r in consumer.poll(Duration::from_millis(200)).unwrap() {
            seen[r.partition as usize].push(String::from_utf8(r.value.unwrap().to_vec()).unwrap());
        }
    }
    seen
}

/// Per partition: (records read, duplicates, records missing, records out of order), for values
/// `<partition>:<i>` with i from 0 to `per_partition - 1`.
fn count(seen: &[Vec<String>], per_partition: usize) -> Vec<(usize, usize, usize, usize)> {
    seen.iter()
        .enumerate()
        .map(|(p, values)| {
            let mut times: BTreeMap<usize, usize> = BTreeMap::new();
            let mut out_of_order = 0;
            let mut last: Option<usize> = None;
            for v in values {
                let (part, i) = v.split_once(':').expect("partition:i");
                assert_eq!(part, p.to_string(), "record {v} in partition {p}");
                let i: usize = i.parse().unwrap();
                *times.entry(i).or_default() += 1;
                if last.is_some_and(|l| i <= l) && times[&i] == 1 {
                    out_of_order += 1;
                }
                last = Some(last.map_or(i, |l| l.max(i)));
            }
            let duplicates = times.values().map(|t| t - 1).sum();
            let missing = (0..per_partition)
                .filter(|i| !times.contains_key(i))
                .count();
            (values.len(), duplicates, missing, out_of_order)
        })
        .collect()
}

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn idempotent_batches_carry_a_producer_id_and_contiguous_sequences() {
    let _one = one_cluster();
    let cluster = OwnBroker::start(1);
    let b = cluster.bootstrap.clone();
    const PARTITIONS: i32 = 3;
    const PER_PARTITION: usize = 3000;
    for (topic, idempotence) in [("idempotent", "true"), ("plain", "false")] {
        lagless::admin::create_topic(&b, topic, PARTITIONS, 1).unwrap();
        // Small batches: many of them, several in flight per partition.
        let producer = configs::producer(&[
            ("bootstrap.servers", b.as_str()),
            ("enable.idempotence", idempotence),
            ("batch.size", "2000"),
            ("linger.ms", "2"),
        ]);
        let mut deliveries = Vec::new();
        for i in 0..PER_PARTITION {
            for p in 0..PARTITIONS {
                let record = ProducerRecord::new(topic, format!("{p}:{i}")).with_partition(p);
                deliveries.push(producer.send(record).unwrap());
            }
        }
        for d in deliveries {
            d.wait().unwrap();
        }
        producer.close(Duration::from_secs(10)).unwrap();
        let mut ids = Vec::new();
        for p in 0..PARTITIONS {
            let batches = stored_batches(&b, topic, p);
            let records: i32 = batches.iter().map(|s| s.records).sum();
            assert_eq!(records as usize, PER_PARTITION, "{topic}-{p}");
            eprintln!(
                "{topic}-{p}: {} batches, producer ids {:?}, epochs {:?}",
                batches.len(),
                batches
                    .iter()
                    .map(|s| s.producer_id)
                    .collect::<std::collections::BTreeSet<_>>(),
                batches
                    .iter()
                    .map(|s| s.producer_epoch)
                    .collect::<std::collections::BTreeSet<_>>()
            );
            if idempotence == "false" {
                assert!(
                    batches
                        .iter()
                        .all(|s| (s.producer_id, s.producer_epoch, s.base_sequence) == (-1, -1, -1)),
                    "{topic}-{p}: {batches:?}"
                );
                continue;
            }
            assert!(batches.len() > 10, "{topic}-{p}: {} batches", batches.len());
            let mut next = 0;
            for s in &batches {
                assert!(s.producer_id >= 0, "{topic}-{p}: {s:?}");
                assert_eq!(s.producer_epoch, 0, "{topic}-{p}: {s:?}");
                assert_eq!(s.base_sequence, next, "{topic}-{p}: {s:?}");
                next += s.records;
                ids.push(s.producer_id);
            }
        }
        if idempotence == "true" {
            ids.dedup();
            assert_eq!(ids.len(), 1, "one producer id for every partition: {ids:?}");
        }
    }
}

/// Produces `per_partition` numbered records to each of `partitions` partitions through
/// `proxy`, while the proxy loses answers and cuts connections now and then; returns the
/// records' outcomes (errors as strings) and how many disruptions there were.
fn produce_through_disruptions(
    proxy: &Proxy,
    topic: &str,
    partitions: i32,
    per_partition: usize,
    idempotence: &str,
) -> (usize, Vec<String>) {
    let bootstrap = proxy.bootstrap();
    let producer = configs::producer(&[
        ("bootstrap.servers", bootstrap.as_str()),
        ("enable.idempotence", idempotence),
        ("acks", "all"),
        ("batch.size", "4000"),
        ("linger.ms", "1"),
        ("request.timeout.ms", "1500"),
        ("delivery.timeout.ms", "90000"),
        ("retry.backoff.ms", "50"),
        ("retry.backoff.max.ms", "200"),
        ("reconnect.backoff.ms", "20"),
        ("reconnect.backoff.max.ms", "200"),
    ]);
    // Metadata and the producer id first, through a proxy that passes.
    producer.partitions_for(topic).unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let disruptions = std::thread::scope(|s| {
        let done2 = done.clone();
        let chaos = s.spawn(move || {
            let mut n = 0;
            while !done2.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(700));
                // Requests reach the broker and take effect; their answers never come back.
                proxy.set_all(if n % 2 == 0 {
                    Mode::LoseAnswers
                } else {
                    Mode::CutAfter(300)
                });
                std::thread::sleep(Duration::from_millis(400));
                proxy.set_all(Mode::Pass);
                n += 1;
            }
            n
        });
        let mut deliveries = Vec::new();
        for i in 0..per_partition {
            for p in 0..partitions {
                let record = ProducerRecord::new(topic, format!("{p}:{i}")).with_partition(p);
                deliveries.push(producer.send(record).unwrap());
            }
            if i % 20 == 0 {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        let errors: Vec<String> = deliveries
            .into_iter()
            .filter_map(|d| d.wait().err().map(|e| e.to_string()))
            .collect();
        done.store(true, Ordering::SeqCst);
        (chaos.join().unwrap(), errors)
    });
    producer.close(Duration::from_secs(10)).unwrap();
    disruptions
}

fn proxy_for(cluster: &OwnBroker) -> Proxy {
    let routes: Vec<(u16, String)> = cluster.proxied[0]
        .iter()
        .map(|(advertised, bound)| (*advertised, format!("127.0.0.1:{bound}")))
        .collect();
    Proxy::start(&routes)
}

const CHAOS_PARTITIONS: i32 = 3;
const CHAOS_PER_PARTITION: usize = 6000;

#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn lost_answers_and_cut_connections_write_each_record_once_in_order() {
    let _one = one_cluster();
    let cluster = OwnBroker::start_proxied(1, 1);
    let proxy = proxy_for(&cluster);
    let topic = "chaos-idempotent";
    lagless::admin::create_topic(&cluster.bootstrap, topic, CHAOS_PARTITIONS, 1).unwrap();
    let started = Instant::now();
    let (disruptions, errors) =
        produce_through_disruptions(&proxy, topic, CHAOS_PARTITIONS, CHAOS_PER_PARTITION, "true");
    let produced_in = started.elapsed();
    assert!(
        errors.is_empty(),
        "{} failed: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let total = CHAOS_PARTITIONS as usize * CHAOS_PER_PARTITION;
    let seen = read_back(&cluster.bootstrap, topic, CHAOS_PARTITIONS, total);
    let counts = count(&seen, CHAOS_PER_PARTITION);
    eprintln!(
        "idempotent: {total} records sent in {produced_in:?} through {disruptions} disruptions; \
         per partition (read, duplicates, missing, out of order): {counts:?}"
    );
    assert!(disruptions >= 3, "only {disruptions} disruptions");
    for (p, c) in counts.iter().enumerate() {
        assert_eq!(*c, (CHAOS_PER_PARTITION, 0, 0, 0), "partition {p}");
    }
}

/// The same scenario without idempotence: the retries of requests whose answers were lost write
/// their records again. This is what the test above rules out.
#[test]
#[ignore = "starts a Kafka broker of its own: run by tests/run, or by hand with -- --include-ignored"]
fn without_idempotence_the_same_disruptions_write_duplicates() {
    let _one = one_cluster();
    let cluster = OwnBroker::start_proxied(1, 1);
    let proxy = proxy_for(&cluster);
    let topic = "chaos-plain";
    lagless::admin::create_topic(&cluster.bootstrap, topic, CHAOS_PARTITIONS, 1).unwrap();
    let (disruptions, errors) = produce_through_disruptions(
        &proxy,
        topic,
        CHAOS_PARTITIONS,
        CHAOS_PER_PARTITION,
        "false",
    );
    assert!(
        errors.is_empty(),
        "{} failed: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let total = CHAOS_PARTITIONS as usize * CHAOS_PER_PARTITION;
    let seen = read_back(&cluster.bootstrap, topic, CHAOS_PARTITIONS, total);
    let counts = count(&seen, CHAOS_PER_PARTITION);
    eprintln!(
        "plain: {total} records sent through {disruptions} disruptions; per partition (read, \
         duplicates, missing, out of order): {counts:?}"
    );
    let duplicates: usize = counts.iter().map(|c| c.1).sum();
    assert!(duplicates > 0, "no duplicates: {counts:?}");
    for c in &counts {
        assert_eq!(c.2, 0, "nothing is lost: {counts:?}");
    }
}

/// The leader of a partition is killed (SIGKILL) while numbered records are produced to it with
/// batches in flight, and comes back later: the records move to the new leader, retried where
/// their answers never came, and each is read back once, in order.
#[test]
#[ignore = "starts a Kafka cluster of its own: run by tests/run, or by hand with -- --include-ignored"]
fn a_killed_leader_leaves_each_record_once_in_order() {
    let _one = one_cluster();
    let cluster = OwnBroker::start(3);
    let b = cluster.bootstrap.clone();
    const PARTITIONS: i32 = 3;
    const PER_PARTITION: usize = 4000;
    let topic = "killed-leader";
    lagless::admin::create_topic(&b, topic, PARTITIONS, 3).unwrap();
    let victim = cluster.leader_of(topic, 0);
    let producer = configs::producer(&[
        ("bootstrap.servers", b.as_str()),
        ("batch.size", "4000"),
        ("linger.ms", "1"),
        ("request.timeout.ms", "5000"),
        ("delivery.timeout.ms", "100000"),
        ("metadata.max.age.ms", "5000"),
        ("retry.backoff.ms", "50"),
        ("retry.backoff.max.ms", "500"),
    ]);
    producer.partitions_for(topic).unwrap();
    let started = Instant::now();
    let errors = std::thread::scope(|s| {
        let sending = s.spawn(|| {
            let mut deliveries = Vec::new();
            for i in 0..PER_PARTITION {
                for p in 0..PARTITIONS {
                    let record = ProducerRecord::new(topic, format!("{p}:{i}")).with_partition(p);
                    deliveries.push(producer.send(record).unwrap());
                }
                // About eight seconds of sending: the kill lands in the middle.
                if i % 50 == 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
            }
            deliveries
                .into_iter()
                .filter_map(|d| d.wait().err().map(|e| e.to_string()))
                .collect::<Vec<_>>()
        });
        std::thread::sleep(Duration::from_secs(3));
        cluster.kill_node(victim);
        std::thread::sleep(Duration::from_secs(4));
        cluster.start_node(victim);
        sending.join().unwrap()
    });
    let produced_in = started.elapsed();
    producer.close(Duration::from_secs(10)).unwrap();
    assert!(
        errors.is_empty(),
        "{} failed: {:?}",
        errors.len(),
        &errors[..errors.len().min(5)]
    );
    let total = PARTITIONS as usize * PER_PARTITION;
    let seen = read_back(&b, topic, PARTITIONS, total);
    let counts = count(&seen, PER_PARTITION);
    eprintln!(
        "killed leader {victim}: {total} records sent in {produced_in:?}; per partition (read, \
         duplicates, missing, out of order): {counts:?}"
    );
    for (p, c) in counts.iter().enumerate() {
        assert_eq!(*c, (PER_PARTITION, 0, 0, 0), "partition {p}");
    }
}
