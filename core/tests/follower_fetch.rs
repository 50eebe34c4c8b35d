//! KIP-392 on a three-node cluster with racks and the rack-aware replica selector: a consumer in
//! a follower's rack is told by the leader to fetch from that follower, follows it, and reads
//! every record once, in order.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::log::{set_log_callback, LogLevel};
use lagless::{ProducerRecord, TopicPartition};
use own_broker::OwnBroker;

const N: usize = 3000;

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_consumer_in_a_followers_rack_reads_every_record_from_that_follower() {
    let cluster = OwnBroker::start_with_racks(3, &["rack-1", "rack-2", "rack-3"]);
    let b = cluster.bootstrap.clone();
    let topic = "follower-fetch";
    lagless::admin::create_topic(&b, topic, 1, 3).unwrap();
    let leader = cluster.leader_of(topic, 0);
    let follower = if leader == 1 { 2 } else { 1 };
    let p = configs::producer(&[("bootstrap.servers", b.as_str()), ("acks", "all")]);
    let deliveries: Vec<_> = (0..N)
        .map(|i| {
            p.send(ProducerRecord::new(topic, format!("v{i}")).with_partition(0))
                .unwrap()
        })
        .collect();
    for d in deliveries {
        d.wait().expect("acks=all delivery");
    }

    let logs: Arc<Mutex<Vec<String>>> = Arc::default();
    let sink = logs.clone();
    set_log_callback(
        LogLevel::Debug,
        Arc::new(move |_, _, msg: &str| {
            if msg.contains("fetching from replica") {
                sink.lock().unwrap().push(msg.to_string());
            }
        }),
    )
    .unwrap();
    let rack = format!("rack-{follower}");
    let consumer = configs::consumer(&[
        ("bootstrap.servers", b.as_str()),
        ("auto.offset.reset", "earliest"),
        ("client.rack", rack.as_str()),
    ]);
    consumer.assign(&[TopicPartition::new(topic, 0)]).unwrap();
    let start = Instant::now();
    let mut next = 0usize;
    while next < N {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "only {next} of {N} records came (leader {leader}, client in the rack of {follower}); replica switches: {:?}",
            logs.lock().unwrap()
        );
        for r in consumer.poll(Duration::from_millis(100)).expect("poll") {
            assert_eq!(r.value.as_deref(), Some(format!("v{next}").as_bytes()));
            next += 1;
        }
    }
    let switches = logs.lock().unwrap().clone();
    eprintln!("leader {leader}, follower {follower}: {switches:?}");
    assert!(
        switches.iter().any(|m| m.contains(&format!(
            "from replica {follower}, which leader {leader} prefers"
        ))),
        "the consumer never fetched from the follower in its rack: {switches:?}"
    );
}
