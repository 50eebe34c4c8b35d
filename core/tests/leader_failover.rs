//! Leader changes: on a three-node cluster, the leader of some partitions stops while a consumer
//! reads them with manual assignment. The consumer follows the new leaders by itself and reads
//! every record exactly once, in order: nothing lost, nothing repeated.
#[path = "support/own_broker.rs"]
mod own_broker;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Producer, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;

const PARTITIONS: i32 = 6;

fn produce(bootstrap: &str, topic: &str, per_partition: usize, from: usize) {
    let p = Producer::from_config(
        &Config::from_pairs([("bootstrap.servers", bootstrap), ("acks", "all")]).unwrap(),
    )
    .unwrap();
    let mut deliveries = Vec::new();
    for i in from..from + per_partition {
        for part in 0..PARTITIONS {
            deliveries.push(
                p.send(ProducerRecord::new(topic, format!("{part}:{i}")).with_partition(part))
                    .unwrap(),
            );
        }
    }
    for d in deliveries {
        d.wait().expect("acks=all delivery");
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn the_consumer_follows_new_leaders_without_losing_or_repeating_records() {
    let cluster = OwnBroker::start(3);
    let b = cluster.bootstrap.clone();
    let topic = "failover";
    lagless::admin::create_topic(&b, topic, PARTITIONS, 3).unwrap();
    produce(&b, topic, 2000, 0);

    let consumer = Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", b.as_str()),
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "100"),
            ("metadata.max.age.ms", "5000"),
        ])
        .unwrap(),
    )
    .unwrap();
    let parts: Vec<TopicPartition> = (0..PARTITIONS)
        .map(|p| TopicPartition::new(topic, p))
        .collect();
    consumer.assign(&parts).unwrap();
    // The sequence number each partition must deliver next.
    let mut next: BTreeMap<i32, usize> = BTreeMap::new();
    let mut check = |consumer: &Consumer, until: Duration, want: usize| {
        let end = Instant::now() + until;
        while Instant::now() < end && next.values().sum::<usize>() < want {
            match consumer.poll(Duration::from_millis(100)) {
                Ok(records) => {
                    for r in records {
                        let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                        let expected = next.entry(r.partition).or_default();
                        assert_eq!(
                            value,
                            format!("{}:{}", r.partition, expected),
                            "lost or repeated at offset {}",
                            r.offset
                        );
                        *expected += 1;
                    }
                }
                // While a leader is gone the consumer may report, never fail.
                Err(e) => assert!(!e.is_fatal(), "{e}"),
            }
        }
    };
    check(&consumer, Duration::from_secs(30), 3000);
    // Node 1 leads about a third of the partitions; stop it for good.
    cluster.restart(1, None);
    check(&consumer, Duration::from_secs(90), 12000);
    let bootstrap_alive: String = b.split(',').skip(1).collect::<Vec<_>>().join(",");
    produce(&bootstrap_alive, topic, 500, 2000);
    check(&consumer, Duration::from_secs(90), 15000);
    for p in 0..PARTITIONS {
        assert_eq!(next.get(&p), Some(&2500), "partition {p}");
    }
}
