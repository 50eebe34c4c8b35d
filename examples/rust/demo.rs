//! The README demo: create a topic, produce keyed records, consume them in a consumer group with
//! a rebalance listener, commit, and print what happened. Run it with `examples/demo`, which
//! starts a local Kafka broker first (or set LAGLESS_BOOTSTRAP yourself).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Producer, ProducerRecord, RebalanceListener, TopicPartition};

struct PrintingListener;

impl RebalanceListener for PrintingListener {
    fn on_partitions_assigned(
        &mut self,
        _: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        println!("assigned: {}", names(partitions));
        Ok(())
    }
    fn on_partitions_revoked(
        &mut self,
        consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> lagless::Result<()> {
        // Commit what was processed before the partitions move on.
        consumer.commit_sync(None, None)?;
        println!("revoked: {}", names(partitions));
        Ok(())
    }
}

fn names(partitions: &[TopicPartition]) -> String {
    partitions
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn main() -> lagless::Result<()> {
    let bootstrap = std::env::var("LAGLESS_BOOTSTRAP").unwrap_or_else(|_| "127.0.0.1:9092".into());
    let topic = format!("demo-orders-{}", std::process::id());
    lagless::admin::create_topic(&bootstrap, &topic, 6, 1)?;
    println!("created topic {topic} with 6 partitions on {bootstrap}");

    let producer = Producer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("compression.type", "lz4"),
    ])?)?;
    for i in 0..10_000 {
        let record = ProducerRecord::new(&topic, format!("order {i}"))
            .with_key(format!("customer-{}", i % 97));
        producer.send(record)?;
    }
    producer.flush(Duration::from_secs(30))?;
    println!("produced 10000 records");

    let consumer = Consumer::from_config(&Config::from_pairs([
        ("bootstrap.servers", bootstrap.as_str()),
        ("group.id", "demo"),
        ("auto.offset.reset", "earliest"),
    ])?)?;
    consumer.subscribe(&[&topic], Some(Box::new(PrintingListener)))?;
    let mut per_partition: BTreeMap<i32, usize> = BTreeMap::new();
    let started = Instant::now();
    while per_partition.values().sum::<usize>() < 10_000
        && started.elapsed() < Duration::from_secs(60)
    {
        for record in consumer.poll(Duration::from_millis(500))? {
            *per_partition.entry(record.partition).or_default() += 1;
        }
    }
    consumer.commit_sync(None, None)?;
    println!(
        "consumed {} records in {:?}",
        per_partition.values().sum::<usize>(),
        started.elapsed()
    );
    for (p, n) in &per_partition {
        println!("  partition {p}: {n} records");
    }
    consumer.close(None)?;
    Ok(())
}
