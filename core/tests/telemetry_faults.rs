//! KIP-714 client telemetry against a fake broker that serves the telemetry APIs as the test
//! says (support/fake_broker.rs): what the consumer's telemetry task sends, request by request,
//! as the answers change (the decisions themselves are unit-tested in telemetry::state). No
//! real broker needed.
#[path = "support/fake_broker.rs"]
mod fake_broker;
mod support;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker, TelemetryRequest, CLIENT_INSTANCE_ID, PUSH_INTERVAL};
use lagless::telemetry::otlp::MetricsData;
use lagless::{Consumer, TopicPartition};
use prost::Message;

const TOPIC: &str = "telemetry";

fn broker(push_errors: Option<&[i16]>) -> FakeBroker {
    let b = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 20,
            per_sec: 0,
        }],
    );
    if let Some(errors) = push_errors {
        b.serve_telemetry(errors);
    }
    b
}

fn consumer(b: &FakeBroker, extra: &[(&str, &str)]) -> Consumer {
    let base = [
        ("bootstrap.servers", b.addr.as_str()),
        ("client.id", "telemetry-faults"),
        ("auto.offset.reset", "earliest"),
        // A telemetry request shares the connection of the fetches (lagless' default lane), and
        // a broker answers a connection's requests in order: behind a fetch long poll it waits
        // up to fetch.max.wait.ms. Short here, so that the pushes keep their 200 ms interval.
        ("fetch.max.wait.ms", "20"),
    ];
    let c = support::configs::consumer(&[&base[..], extra].concat());
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    c
}

/// Polls `c` for `d`.
fn run_for(c: &Consumer, d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        c.poll(Duration::from_millis(50)).unwrap();
    }
}

fn given() -> uuid::Uuid {
    uuid::Uuid::from_u128(CLIENT_INSTANCE_ID)
}

/// (kind, client instance id, subscription id, terminating) of each request.
fn shape(requests: &[TelemetryRequest]) -> Vec<(&'static str, uuid::Uuid, i32, bool)> {
    requests
        .iter()
        .map(|r| match r {
            TelemetryRequest::Subscribe(id) => ("subscribe", *id, 0, false),
            TelemetryRequest::Push {
                client_instance_id,
                subscription_id,
                terminating,
                ..
            } => ("push", *client_instance_id, *subscription_id, *terminating),
        })
        .collect()
}

#[test]
fn pushes_follow_the_subscription_every_interval_and_end_with_a_terminating_one() {
    let b = broker(Some(&[]));
    let c = consumer(&b, &[]);
    // The first push comes 0.5 to 1.5 intervals after the subscription, then one per interval.
    run_for(&c, 8 * PUSH_INTERVAL);
    c.close(Some(Duration::from_secs(5))).unwrap();
    let requests = b.telemetry_requests();
    let s = shape(&requests);
    assert_eq!(s[0], ("subscribe", uuid::Uuid::nil(), 0, false), "{s:?}");
    let pushes = &s[1..];
    assert!(
        pushes.len() >= 6,
        "{} pushes in 8 intervals: {s:?}",
        pushes.len()
    );
    assert!(
        pushes.len() <= 9,
        "{} pushes in 8 intervals: {s:?}",
        pushes.len()
    );
    for (i, p) in pushes.iter().enumerate() {
        let last = i == pushes.len() - 1;
        assert_eq!(*p, ("push", given(), 1, last), "{s:?}");
    }
    // Each payload is OTLP of the consumer's metrics, uncompressed (none accepted).
    for r in &requests[1..] {
        let TelemetryRequest::Push {
            compression_type,
            metrics,
            ..
        } = r
        else {
            unreachable!()
        };
        assert_eq!(*compression_type, 0);
        let data = MetricsData::decode(metrics.as_slice()).expect("OTLP");
        let names: Vec<&str> = data.resource_metrics[0].scope_metrics[0]
            .metrics
            .iter()
            .map(|m| m.name.as_str())
            .collect();
        assert!(
            names.contains(&"org.apache.kafka.consumer.fetch.manager.records.consumed.total"),
            "{names:?}"
        );
    }
    eprintln!(
        "{} pushes in {:?}, the last terminating",
        pushes.len(),
        8 * PUSH_INTERVAL
    );
}

#[test]
fn unknown_subscription_id_fetches_the_subscription_again_with_the_given_id() {
    let b = broker(Some(&[117]));
    let c = consumer(&b, &[]);
    run_for(&c, 5 * PUSH_INTERVAL);
    let s = shape(&b.telemetry_requests());
    assert_eq!(
        s[..4],
        [
            ("subscribe", uuid::Uuid::nil(), 0, false),
            ("push", given(), 1, false),
            ("subscribe", given(), 0, false),
            ("push", given(), 2, false),
        ],
        "{s:?}"
    );
}

#[test]
fn invalid_record_stops_the_pushes_for_good() {
    let b = broker(Some(&[87]));
    let c = consumer(&b, &[]);
    run_for(&c, 6 * PUSH_INTERVAL);
    c.close(Some(Duration::from_secs(5))).unwrap();
    let s = shape(&b.telemetry_requests());
    // No more push, not even the terminating one.
    assert_eq!(
        s,
        [
            ("subscribe", uuid::Uuid::nil(), 0, false),
            ("push", given(), 1, false),
        ]
    );
}

#[test]
fn a_broker_without_the_telemetry_apis_is_never_asked() {
    let b = broker(None);
    let c = consumer(&b, &[]);
    run_for(&c, Duration::from_secs(1));
    c.close(Some(Duration::from_secs(5))).unwrap();
    assert!(b.telemetry_requests().is_empty());
    assert_eq!(b.unserved(), Vec::<i16>::new());
}

#[test]
fn enable_metrics_push_false_sends_nothing() {
    let b = broker(Some(&[]));
    let c = consumer(&b, &[("enable.metrics.push", "false")]);
    run_for(&c, 5 * PUSH_INTERVAL);
    c.close(Some(Duration::from_secs(5))).unwrap();
    assert!(b.telemetry_requests().is_empty());
}
