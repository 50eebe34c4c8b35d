//! A single-node broker restarts while a producer writes and a group member consumes: both
//! carry on by themselves and every acknowledged record is consumed (at-least-once).
//!
//! The test starts its own broker with the project's harness (tests/kafka_broker.py), since it
//! must restart it, and stops it again, also when the test fails.
#[path = "support/own_broker.rs"]
mod own_broker;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Producer, ProducerRecord};
use own_broker::OwnBroker;

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn consumer_and_producer_carry_on_through_a_broker_restart() {
    let broker = OwnBroker::start(1);
    let b = broker.bootstrap.clone();
    let topic = "restart";
    lagless::admin::create_topic(&b, topic, 3, 1).unwrap();

    // The producer writes continuously; every acknowledged (partition, offset) is recorded.
    let acked: Arc<Mutex<BTreeSet<(i32, i64)>>> = Arc::default();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let producer_thread = {
        let (acked, stop, b) = (acked.clone(), stop.clone(), b.clone());
        std::thread::spawn(move || {
            let p = Producer::from_config(
                &Config::from_pairs([
                    ("bootstrap.servers", b.as_str()),
                    ("linger.ms", "2"),
                    ("delivery.timeout.ms", "120000"),
                ])
                .unwrap(),
            )
            .unwrap();
            let mut i = 0u64;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let acked = acked.clone();
                p.send_with_callback(
                    ProducerRecord::new(topic, format!("r{i}")).with_key(format!("k{i}")),
                    move |r| {
                        if let Ok(m) = r {
                            acked.lock().unwrap().insert((m.partition, m.offset));
                        }
                    },
                )
                .unwrap();
                i += 1;
                std::thread::sleep(Duration::from_millis(2));
            }
            p.flush(Duration::from_secs(120)).unwrap();
        })
    };

    let consumer = Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", b.as_str()),
            ("group.id", "restart-group"),
            ("auto.offset.reset", "earliest"),
            ("session.timeout.ms", "10000"),
        ])
        .unwrap(),
    )
    .unwrap();
    consumer.subscribe(&[topic], None).unwrap();
    let seen: Arc<Mutex<BTreeSet<(i32, i64)>>> = Arc::default();
    let consume_for = |d: Duration| {
        let end = Instant::now() + d;
        while Instant::now() < end {
            // Errors while the broker is down are reported, never fatal.
            match consumer.poll(Duration::from_millis(100)) {
                Ok(records) => seen
                    .lock()
                    .unwrap()
                    .extend(records.iter().map(|r| (r.partition, r.offset))),
                Err(e) => assert!(!e.is_fatal(), "fatal error: {e}"),
            }
        }
    };
    consume_for(Duration::from_secs(5));
    assert!(
        !seen.lock().unwrap().is_empty(),
        "consumed nothing before the restart"
    );
    // Restart from a second thread while this one keeps polling.
    let restarter = {
        let dir = broker.dir.clone();
        let bootstrap = broker.bootstrap.clone();
        std::thread::spawn(move || {
            let b = OwnBroker {
                dir,
                bootstrap,
                proxied: Vec::new(),
            };
            b.restart(1, Some(Duration::from_secs(3)));
            std::mem::forget(b); // the test's own guard stops it
        })
    };
    consume_for(Duration::from_secs(5));
    restarter.join().unwrap();
    consume_for(Duration::from_secs(5));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    producer_thread.join().unwrap();
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() > 1000,
        "only {} records acknowledged",
        acked.len()
    );
    let deadline = Instant::now() + Duration::from_secs(90);
    while !acked.is_subset(&seen.lock().unwrap()) && Instant::now() < deadline {
        consume_for(Duration::from_secs(1));
    }
    let seen = seen.lock().unwrap();
    let missing: Vec<_> = acked.difference(&seen).take(10).collect();
    assert!(
        missing.is_empty(),
        "acknowledged but never consumed: {missing:?} (of {})",
        acked.len()
    );
    consumer.close(None).unwrap();
}
