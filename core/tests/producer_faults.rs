//! The idempotent producer's InitProducerId against the in-process fake broker (no real broker
//! needed): a refusal that is not retriable is fatal for the producer (Java's FATAL_ERROR state),
//! a retriable one is retried with backoff until `delivery.timeout.ms`.
#[path = "support/fake_broker.rs"]
mod fake_broker;
mod support;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker};
use lagless::{Error, ProducerRecord};
use support::configs;

const TOPIC: &str = "produced";
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const COORDINATOR_LOAD_IN_PROGRESS: i16 = 14;

fn producer(broker: &FakeBroker) -> lagless::Producer {
    configs::producer(&[
        ("bootstrap.servers", broker.addr.as_str()),
        ("request.timeout.ms", "1000"),
        ("delivery.timeout.ms", "3000"),
        ("retry.backoff.ms", "50"),
        ("retry.backoff.max.ms", "200"),
    ])
}

#[test]
fn a_refused_producer_id_fails_the_send_and_every_later_one_with_a_fatal_error() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 0,
            per_sec: 0,
        }],
    );
    broker.set_init_producer_id_error(CLUSTER_AUTHORIZATION_FAILED);
    let p = producer(&broker);
    let started = Instant::now();
    // The producer asks for its id as it starts (as the Java producer's sender does): the
    // refusal may come before the first send or while its record waits.
    let e = match p.send(ProducerRecord::new(TOPIC, "v")) {
        Ok(d) => d.wait().unwrap_err(),
        Err(e) => e,
    };
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "failed at once, not at the delivery timeout: {:?}",
        started.elapsed()
    );
    assert_eq!(e.kafka_code(), Some(CLUSTER_AUTHORIZATION_FAILED), "{e}");
    assert!(e.is_fatal(), "{e}");
    let text = e.to_string();
    assert!(
        text.contains("InitProducerId") && text.contains("enable.idempotence"),
        "{text}"
    );
    // Not retried: the refusal stands.
    assert_eq!(broker.init_producer_id_requests(), 1);
    // Every later send fails at once with the same error.
    let again = p.send(ProducerRecord::new(TOPIC, "w")).err().unwrap();
    assert_eq!(again, e);
    assert!(matches!(again, Error::Kafka { .. }));
}

#[test]
fn a_retriable_refusal_is_asked_again_until_the_delivery_timeout() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 0,
            per_sec: 0,
        }],
    );
    broker.set_init_producer_id_error(COORDINATOR_LOAD_IN_PROGRESS);
    let p = producer(&broker);
    let e = p
        .send(ProducerRecord::new(TOPIC, "v"))
        .unwrap()
        .wait()
        .unwrap_err();
    assert!(matches!(e, Error::Timeout(_)), "{e}");
    assert!(
        e.to_string().contains("COORDINATOR_LOAD_IN_PROGRESS"),
        "the error says why there was no producer id: {e}"
    );
    let asked = broker.init_producer_id_requests();
    assert!(
        asked >= 3,
        "asked {asked} times in 3 s with backoff up to 200 ms"
    );
    // The broker relents: the next record gets a producer id (its Produce the fake broker does
    // not serve, so only the id is checked here).
    broker.set_init_producer_id_error(0);
    let before = broker.init_producer_id_requests();
    let _ = p.send(ProducerRecord::new(TOPIC, "w"));
    let deadline = Instant::now() + Duration::from_secs(5);
    while broker.init_producer_id_requests() == before && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(broker.init_producer_id_requests() > before);
}
