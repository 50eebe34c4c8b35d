//! The blocking API used from inside a tokio runtime of either flavour, against a real broker:
//! create a topic, produce, subscribe, poll (with a group, so the group steps run), commit_sync,
//! committed, and drop consumer and producer. Each of these panicked before ("Cannot start a
//! runtime from within a runtime", "Cannot drop a runtime in a context where blocking is not
//! allowed"), and a panic in Drop aborted the process.
mod support;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use lagless::{ProducerRecord, TopicPartition};
use support::{bootstrap, new_topic};

async fn blocking_api_inside(flavour: &str) {
    let topic = new_topic(&bootstrap(), &format!("blocking-in-{flavour}"), 2);
    let producer = support::producer(&bootstrap(), &[("linger.ms", "5")]);
    for i in 0..20 {
        producer
            .send(ProducerRecord::new(topic.as_str(), format!("v{i}")).with_partition(i % 2))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    drop(producer);
    let group = support::unique_name("blocking-in-runtime");
    let c = support::consumer(
        &bootstrap(),
        &[
            ("group.id", group.as_str()),
            ("auto.offset.reset", "earliest"),
            ("enable.auto.commit", "false"),
        ],
    );
    c.subscribe(&[&topic], None).unwrap();
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(60);
    while seen.len() < 20 {
        assert!(
            Instant::now() < deadline,
            "only {} of 20 records",
            seen.len()
        );
        for r in c.poll(Duration::from_millis(200)).unwrap() {
            assert!(seen.insert((r.partition, r.offset)), "{r:?} twice");
        }
    }
    c.commit_sync(None, None).unwrap();
    let parts = [
        TopicPartition::new(topic.clone(), 0),
        TopicPartition::new(topic.clone(), 1),
    ];
    let committed = c.committed(&parts, None).unwrap();
    assert!(
        committed
            .iter()
            .all(|(_, om)| om.as_ref().map(|o| o.offset) == Some(10)),
        "{committed:?}"
    );
    drop(c);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
async fn the_blocking_api_works_inside_a_multi_thread_runtime() {
    blocking_api_inside("multi").await;
}

#[tokio::test(flavor = "current_thread")]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
async fn the_blocking_api_works_inside_a_current_thread_runtime() {
    blocking_api_inside("current").await;
}
