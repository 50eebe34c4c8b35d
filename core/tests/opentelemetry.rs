//! The `opentelemetry` feature against a real broker: the messaging semantic conventions'
//! instruments, read back through the OpenTelemetry SDK's in-memory exporter, count exactly the
//! records, polls and commits the test made.
mod support;

use std::collections::BTreeMap;
use std::future::poll_fn;
use std::time::{Duration, Instant};

use lagless::aio;
use lagless::{Consumer, Error};
use opentelemetry::{KeyValue, Value};
use opentelemetry_sdk::metrics::data::{AggregatedMetrics, MetricData, ResourceMetrics};
use opentelemetry_sdk::metrics::{InMemoryMetricExporter, PeriodicReader, SdkMeterProvider};
use support::*;

const PER_PARTITION: usize = 10;

fn provider() -> (SdkMeterProvider, InMemoryMetricExporter) {
    let exporter = InMemoryMetricExporter::default();
    // A long interval: the test flushes when it reads, so every export is one it asked for.
    let reader = PeriodicReader::builder(exporter.clone())
        .with_interval(Duration::from_secs(3600))
        .build();
    (
        SdkMeterProvider::builder().with_reader(reader).build(),
        exporter,
    )
}

/// One data point: its attributes (as strings) and what it holds.
#[derive(Debug, Clone)]
struct Point {
    attributes: BTreeMap<String, String>,
    /// A sum's value, or a histogram's count.
    count: u64,
    /// A histogram's sum and max.
    sum: f64,
    max: f64,
}

impl Point {
    fn has(&self, key: &str, value: &str) -> bool {
        self.attributes.get(key).map(String::as_str) == Some(value)
    }
}

fn attributes<'a>(a: impl Iterator<Item = &'a KeyValue>) -> BTreeMap<String, String> {
    a.map(|kv| {
        let v = match &kv.value {
            Value::String(s) => s.to_string(),
            other => other.to_string(),
        };
        (kv.key.to_string(), v)
    })
    .collect()
}

/// Every data point of `name` in the last export (cumulative: the totals so far), and the
/// instrument's unit.
fn points(exporter: &InMemoryMetricExporter, name: &str) -> (String, Vec<Point>) {
    let exported: Vec<ResourceMetrics> = exporter.get_finished_metrics().expect("exported");
    let last = exported.last().expect("an export");
    for scope in last.scope_metrics() {
        for m in scope.metrics() {
            if m.name() != name {
                continue;
            }
            assert_eq!(
                scope.scope().name(),
                "lagless",
                "{name}'s instrumentation scope"
            );
            let points = match m.data() {
                AggregatedMetrics::U64(MetricData::Sum(s)) => s
                    .data_points()
                    .map(|p| Point {
                        attributes: attributes(p.attributes()),
                        count: p.value(),
                        sum: 0.0,
                        max: 0.0,
                    })
                    .collect(),
                AggregatedMetrics::F64(MetricData::Histogram(h)) => h
                    .data_points()
                    .map(|p| Point {
                        attributes: attributes(p.attributes()),
                        count: p.count(),
                        sum: p.sum(),
                        max: p.max().unwrap_or(f64::NAN),
                    })
                    .collect(),
                other => panic!("{name} is {other:?}"),
            };
            return (m.unit().to_string(), points);
        }
    }
    panic!("{name} was not exported")
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn polls_commits_and_records_are_measured_by_the_semantic_conventions() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "otel", 3);
    produce(&bs, &topic, 3, PER_PARTITION);
    let group = unique_name("otel-g");
    let (provider, exporter) = provider();
    let c: Consumer = group_member(
        &bs,
        &group,
        &[
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
            ("max.poll.records", "4"),
            ("enable.metrics.push", "false"),
        ],
    );
    c.set_meter_provider(&provider)
        .expect("the provider, before the first poll");
    c.subscribe(&[topic.as_str()], None).unwrap();

    // Poll until every record is in, counting the polls and those that follow a poll that
    // returned records (each of which ends a `messaging.process.duration`); after each batch the
    // application "works" 30 ms.
    let mut per_partition: BTreeMap<i32, u64> = BTreeMap::new();
    let (mut polls, mut processed) = (0u64, 0u64);
    let mut after_records = false;
    let deadline = Instant::now() + Duration::from_secs(60);
    while per_partition.values().sum::<u64>() < 3 * PER_PARTITION as u64 {
        assert!(
            Instant::now() < deadline,
            "all records within 60 s: {per_partition:?}"
        );
        let records = c.poll(Duration::from_millis(500)).expect("poll");
        polls += 1;
        processed += u64::from(after_records);
        after_records = !records.is_empty();
        for r in &records {
            *per_partition.entry(r.partition).or_default() += 1;
        }
        if after_records {
            std::thread::sleep(Duration::from_millis(30));
        }
    }
    c.commit_sync(None, None).expect("commit");
    // A poll that fails: woken up.
    c.wakeup();
    assert!(matches!(c.poll(Duration::from_secs(5)), Err(Error::Wakeup)));
    polls += 1;
    processed += u64::from(after_records);

    // Once made, the instruments stay.
    assert!(matches!(
        c.set_meter_provider(&provider),
        Err(Error::IllegalState(_))
    ));
    provider.force_flush().expect("flush");

    let (unit, consumed) = points(&exporter, "messaging.client.consumed.messages");
    assert_eq!(unit, "{message}");
    let mut counted: BTreeMap<i32, u64> = BTreeMap::new();
    for p in &consumed {
        assert!(p.has("messaging.system", "kafka"), "{p:?}");
        assert!(p.has("messaging.operation.name", "poll"), "{p:?}");
        assert!(p.has("messaging.destination.name", &topic), "{p:?}");
        assert!(p.has("messaging.consumer.group.name", &group), "{p:?}");
        let partition: i32 = p.attributes["messaging.destination.partition.id"]
            .parse()
            .expect("a partition number");
        *counted.entry(partition).or_default() += p.count;
    }
    assert_eq!(counted, per_partition, "consumed messages per partition");
    assert_eq!(
        counted.values().sum::<u64>(),
        3 * PER_PARTITION as u64,
        "every record"
    );

    let (unit, operations) = points(&exporter, "messaging.client.operation.duration");
    assert_eq!(unit, "s");
    let count = |name: &str, kind: &str, error: Option<&str>| -> u64 {
        operations
            .iter()
            .filter(|p| {
                p.has("messaging.operation.name", name)
                    && p.has("messaging.operation.type", kind)
                    && p.attributes.get("error.type").map(String::as_str) == error
                    && p.has("messaging.system", "kafka")
                    && p.has("messaging.consumer.group.name", &group)
            })
            .map(|p| p.count)
            .sum()
    };
    assert_eq!(
        count("poll", "receive", None),
        polls - 1,
        "successful polls"
    );
    assert_eq!(
        count("poll", "receive", Some("WAKEUP")),
        1,
        "the woken poll"
    );
    assert_eq!(count("commit", "settle", None), 1, "the one commit");
    assert_eq!(
        operations.iter().map(|p| p.count).sum::<u64>(),
        polls + 1,
        "no other operation: {operations:?}"
    );

    let (_, process) = points(&exporter, "messaging.process.duration");
    assert_eq!(process.len(), 1, "{process:?}");
    let p = &process[0];
    assert!(p.has("messaging.operation.name", "process"), "{p:?}");
    assert!(processed > 0);
    assert_eq!(p.count, processed, "one processing per poll after records");
    // Each processing included the 30 ms the test slept (a lower bound: no timing flake).
    assert!(p.sum >= 0.030 * processed as f64, "{p:?}");
    assert!(p.max >= 0.030, "{p:?}");
    c.close(Some(Duration::from_secs(10))).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
async fn the_async_streams_records_are_counted_too_and_in_the_consumed_rates() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "otel-aio", 2);
    produce(&bs, &topic, 2, PER_PARTITION);
    let (provider, exporter) = provider();
    let mut config = lagless::Config::new();
    for (k, v) in [
        ("bootstrap.servers", bs.as_str()),
        ("group.id", &unique_name("otel-aio-g")),
        ("auto.offset.reset", "earliest"),
        ("enable.auto.commit", "false"),
        ("enable.metrics.push", "false"),
    ] {
        config.set(k, v).unwrap();
    }
    let c = aio::Consumer::from_config(&config).expect("async consumer");
    c.set_meter_provider(&provider).unwrap();
    c.subscribe(&[topic.as_str()], None).unwrap();
    let (mut got, mut bytes) = (0, 0usize);
    {
        let mut stream = c.stream();
        while got < 2 * PER_PARTITION {
            let next =
                poll_fn(|cx| futures_core::Stream::poll_next(std::pin::Pin::new(&mut stream), cx));
            let r = tokio::time::timeout(Duration::from_secs(60), next)
                .await
                .expect("a record within 60 s")
                .expect("the stream goes on");
            let r = r.expect("a record");
            got += 1;
            bytes += r.key.map_or(0, |k| k.len()) + r.value.map_or(0, |v| v.len());
        }
        // The stream dropped here measures the run it counted last.
    }
    provider.force_flush().expect("flush");
    let (_, consumed) = points(&exporter, "messaging.client.consumed.messages");
    assert_eq!(
        consumed.iter().map(|p| p.count).sum::<u64>(),
        2 * PER_PARTITION as u64,
        "{consumed:?}"
    );
    assert_eq!(consumed.len(), 2, "one series per partition: {consumed:?}");
    // The stream's records count toward the consumed rates too, those taken one at a time
    // included: within the first 30 s window the rate is the count over 30 s plus the time since
    // the first record (Java's Rate), so 20 records read within seconds give 20/30 per second
    // at most and well over half of that.
    let poll = c.metrics().poll;
    let per_window = poll.records_consumed_rate * 30.0;
    assert!(
        per_window > 15.0 && per_window <= 20.0 + 1e-9,
        "records-consumed-rate {} x 30 s = {per_window}, for 20 records",
        poll.records_consumed_rate
    );
    let bytes_per_record = poll.bytes_consumed_rate / poll.records_consumed_rate;
    assert!(
        (bytes_per_record - bytes as f64 / 20.0).abs() < 1e-9,
        "bytes-consumed-rate / records-consumed-rate = {bytes_per_record}, the records' {}",
        bytes as f64 / 20.0
    );
    c.close().await.unwrap();
}
