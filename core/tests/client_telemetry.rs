//! KIP-714 client telemetry against a real broker: a broker of the test's own with a
//! `ClientTelemetry` plugin (support/telemetry/ClientTelemetryRecorder.java, compiled here with
//! `javac` against the broker's jars and put on its classpath), which writes each push it
//! receives to a directory: the OTLP bytes, and what the broker's own OTLP classes decode of
//! them. A client-metrics subscription (`metrics` = the consumer and producer prefixes,
//! `interval.ms` = 1000)
//! made with the admin client asks every client for its metrics. The test decodes the bytes
//! with prost too, and checks both against the consumer's own `metrics()` snapshot.
#[path = "support/java_client.rs"]
mod java_client;
#[path = "support/own_broker.rs"]
mod own_broker;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use java_client::JavaClient;
use lagless::admin::{AdminClient, AlterConfigOp, ConfigResource};
use lagless::metrics::ConsumerMetrics;
use lagless::telemetry::otlp::{self, any_value, Data};
use lagless::{Config, Consumer, ProducerRecord};
use own_broker::OwnBroker;
use prost::Message;
use support::*;

const PARTITIONS: i32 = 3;
const PER_PARTITION: usize = 10;
const LATER_PER_PARTITION: usize = 4;
const INTERVAL: Duration = Duration::from_millis(1000);

/// The windowed statistics the consumer pushes while its window holds a value (the commit
/// latency only after a commit): each is checked against the Java consumer's kind below.
const WINDOWED: [&str; 13] = [
    "org.apache.kafka.consumer.fetch.manager.records.consumed.rate",
    "org.apache.kafka.consumer.fetch.manager.bytes.consumed.rate",
    "org.apache.kafka.consumer.fetch.manager.records.lag.max",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg",
    "org.apache.kafka.consumer.fetch.manager.fetch.latency.max",
    "org.apache.kafka.consumer.coordinator.commit.latency.avg",
    "org.apache.kafka.consumer.coordinator.commit.latency.max",
    "org.apache.kafka.consumer.coordinator.rebalance.latency.avg",
    "org.apache.kafka.consumer.coordinator.rebalance.latency.max",
    "org.apache.kafka.consumer.coordinator.last.rebalance.seconds.ago",
    "org.apache.kafka.consumer.poll.idle.ratio.avg",
    "org.apache.kafka.consumer.time.between.poll.avg",
    "org.apache.kafka.consumer.time.between.poll.max",
];
const RECORDS: &str = "org.apache.kafka.consumer.fetch.manager.records.consumed.total";
const BYTES: &str = "org.apache.kafka.consumer.fetch.manager.bytes.consumed.total";
const LAG: &str = "org.apache.kafka.consumer.fetch.manager.records.lag";
const LEAD: &str = "org.apache.kafka.consumer.fetch.manager.records.lead";
const ASSIGNED: &str = "org.apache.kafka.consumer.coordinator.assigned.partitions";
const REBALANCES: &str = "org.apache.kafka.consumer.coordinator.rebalance.total";
const LAST_POLL: &str = "org.apache.kafka.consumer.last.poll.seconds.ago";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Per name pushed: its kind and temporality, and the attribute keys of each of its points (a
/// name may have points with and without attributes, the Java client's per-topic totals beside
/// its overall ones).
type Shape = BTreeMap<String, ((String, String), BTreeSet<String>)>;

/// The names `pushes` carried, with their [`Shape`], and the resource attribute keys.
fn shape(pushes: Vec<Push>) -> (Shape, BTreeSet<String>) {
    let mut names: Shape = BTreeMap::new();
    let mut resource = BTreeSet::new();
    for p in pushes {
        resource.extend(p.resource.keys().cloned());
        for (name, points) in p.points {
            for point in points {
                // Keys only, sorted: OTLP attributes are a set.
                let mut attrs: Vec<&str> = point
                    .attrs
                    .split(',')
                    .filter_map(|kv| kv.split('=').next())
                    .filter(|k| !k.is_empty())
                    .collect();
                attrs.sort();
                let entry = names.entry(name.clone()).or_insert_with(|| {
                    (
                        (point.kind.clone(), point.temporality.clone()),
                        BTreeSet::new(),
                    )
                });
                assert_eq!(entry.0, (point.kind.clone(), point.temporality.clone()));
                entry.1.insert(attrs.join(","));
            }
        }
    }
    (names, resource)
}

/// Every name of `ours` is one the Java client pushed too, with the same kind and temporality
/// and attribute keys it used; the same for the resource attribute keys.
fn assert_java_shaped(
    ours: &(Shape, BTreeSet<String>),
    java: &(Shape, BTreeSet<String>),
    client: &str,
) {
    let ((ours, our_resource), (java_names, java_resource)) = (ours, java);
    for (name, (kind, attrs)) in ours {
        let java = java_names.get(name);
        assert_eq!(
            java.map(|j| &j.0),
            Some(kind),
            "{name}: the Java {client} pushes {java:?}"
        );
        assert!(
            attrs.is_subset(&java.unwrap().1),
            "{name}: attributes {attrs:?}, the Java {client}'s {java:?}"
        );
    }
    for key in our_resource {
        assert!(
            java_resource.contains(key),
            "{key} not in {java_resource:?}"
        );
    }
}

/// The broker with the plugin, one for the test binary (stopped by the harness's watchdog when
/// the binary ends, as `OwnBroker` in a static is), and the directory the plugin writes to.
fn broker() -> &'static (OwnBroker, PathBuf) {
    static BROKER: OnceLock<(OwnBroker, PathBuf)> = OnceLock::new();
    BROKER.get_or_init(|| {
        let work = std::env::temp_dir().join(format!("lagless-telemetry-{}", std::process::id()));
        let classes = work.join("classes");
        let pushes = work.join("pushes");
        std::fs::create_dir_all(&classes).unwrap();
        std::fs::create_dir_all(&pushes).unwrap();
        let lib = Command::new("python3")
            .args([
                "-c",
                &format!(
                    "import sys; sys.path.insert(0, {:?}); import kafka_broker; \
                     print(kafka_broker.fetch_kafka(quiet=True))",
                    repo().join("tests").to_str().unwrap()
                ),
            ])
            .output()
            .expect("python3 fetches the broker's jars");
        assert!(
            lib.status.success(),
            "{}",
            String::from_utf8_lossy(&lib.stderr)
        );
        let lib = String::from_utf8(lib.stdout).unwrap().trim().to_string();
        let javac = Command::new("javac")
            .args(["-nowarn", "-cp", &format!("{lib}/*"), "-d"])
            .arg(&classes)
            .arg(repo().join("core/tests/support/telemetry/ClientTelemetryRecorder.java"))
            .output()
            .expect("javac compiles the plugin");
        assert!(
            javac.status.success(),
            "javac ClientTelemetryRecorder.java: {}{}",
            String::from_utf8_lossy(&javac.stdout),
            String::from_utf8_lossy(&javac.stderr)
        );
        let dir_prop = format!("lagless.telemetry.dir={}", pushes.display());
        let broker = OwnBroker::start_with(
            1,
            &[
                "--classpath",
                classes.to_str().unwrap(),
                "--broker-property",
                "metric.reporters=ClientTelemetryRecorder",
                "--broker-property",
                &dir_prop,
            ],
        );
        subscribe_all(&broker.bootstrap);
        (broker, pushes)
    })
}

/// A client-metrics subscription asking every client for the consumer's metrics every second;
/// returns once the broker describes it.
fn subscribe_all(bootstrap: &str) {
    let admin =
        AdminClient::new(&Config::from_pairs([("bootstrap.servers", bootstrap)]).unwrap()).unwrap();
    let resource = ConfigResource::ClientMetrics("lagless-consumers".into());
    let results = admin
        .incremental_alter_configs(
            &[(
                resource.clone(),
                vec![
                    AlterConfigOp::Set(
                        "metrics".into(),
                        "org.apache.kafka.consumer.,org.apache.kafka.producer.".into(),
                    ),
                    AlterConfigOp::Set("interval.ms".into(), INTERVAL.as_millis().to_string()),
                ],
            )],
            Duration::from_secs(10),
        )
        .unwrap();
    for (r, result) in results {
        result.unwrap_or_else(|e| panic!("altering {r:?}: {e}"));
    }
    wait_until(
        "the broker describes the subscription",
        Duration::from_secs(10),
        || {
            let described = admin
                .describe_configs(std::slice::from_ref(&resource), Duration::from_secs(5))
                .unwrap();
            described.into_iter().any(|(_, entries)| {
                entries.is_ok_and(|e| {
                    e.iter()
                        .any(|c| c.name == "interval.ms" && c.value.as_deref() == Some("1000"))
                })
            })
        },
    );
    // The subscription reaches the broker's client metrics manager from the same metadata
    // update; a moment more for it.
    std::thread::sleep(Duration::from_millis(500));
}

/// One data point as the broker's OTLP classes decoded it.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    kind: String,
    temporality: String,
    attrs: String,
    value: f64,
}

/// One push the plugin recorded.
#[derive(Debug, Clone)]
struct Push {
    file: PathBuf,
    client_id: String,
    terminating: bool,
    resource: BTreeMap<String, String>,
    points: BTreeMap<String, Vec<Point>>,
}

impl Push {
    fn value(&self, name: &str) -> Option<f64> {
        self.points.get(name).map(|p| {
            assert_eq!(p.len(), 1, "{name}: {p:?}");
            p[0].value
        })
    }

    fn lag(&self, partition: i32) -> Option<f64> {
        self.per_partition(LAG, partition)
    }

    fn per_partition(&self, name: &str, partition: i32) -> Option<f64> {
        let points = self.points.get(name)?;
        points
            .iter()
            .find(|p| {
                p.attrs
                    .split(',')
                    .any(|kv| kv == format!("partition={partition}"))
            })
            .map(|p| p.value)
    }
}

/// A counter's value after `pushes`: the sum of their deltas (the broker's subscriptions ask
/// for delta temporality by default), or the last value of a cumulative sum.
fn counter(pushes: &[Push], name: &str) -> f64 {
    let mut total = 0.0;
    for p in pushes {
        let Some(points) = p.points.get(name) else {
            continue;
        };
        assert_eq!(points.len(), 1, "{name}: {points:?}");
        match points[0].temporality.as_str() {
            "AGGREGATION_TEMPORALITY_DELTA" => total += points[0].value,
            "AGGREGATION_TEMPORALITY_CUMULATIVE" => total = points[0].value,
            t => panic!("{name}: temporality {t}"),
        }
    }
    total
}

/// Every push the plugin recorded from `client_id`, in the order received.
fn pushes(dir: &Path, client_id: &str) -> Vec<Push> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "txt"))
        .collect();
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let mut push = Push {
            file: file.clone(),
            client_id: String::new(),
            terminating: false,
            resource: BTreeMap::new(),
            points: BTreeMap::new(),
        };
        for line in text.lines() {
            let f: Vec<&str> = line.split('\t').collect();
            match f[0] {
                "push" => {
                    push.client_id = f[1].to_string();
                    push.terminating = f[3] == "true";
                }
                "resource" => {
                    push.resource.insert(f[1].into(), f[2].into());
                }
                "point" => push.points.entry(f[1].into()).or_default().push(Point {
                    kind: f[2].into(),
                    temporality: f[3].into(),
                    attrs: f[5].into(),
                    value: f[6].parse().unwrap(),
                }),
                other => panic!("{}: unexpected line {other:?}: {line}", file.display()),
            }
        }
        if push.client_id == client_id {
            out.push(push);
        }
    }
    out
}

/// The payload's bytes decoded with prost (lagless' own OTLP messages): the same names, kinds
/// and values as the broker's classes decoded.
fn check_against_prost(push: &Push) {
    let bytes = std::fs::read(push.file.with_extension("bin")).unwrap();
    let data = otlp::MetricsData::decode(bytes.as_slice()).expect("the payload is OTLP");
    let mut seen: BTreeMap<String, Vec<Point>> = BTreeMap::new();
    for rm in &data.resource_metrics {
        for sm in &rm.scope_metrics {
            for m in &sm.metrics {
                let (kind, temporality, points) = match m.data.as_ref().unwrap() {
                    Data::Gauge(g) => ("gauge", "-".to_string(), &g.data_points),
                    Data::Sum(s) => (
                        "sum",
                        match s.aggregation_temporality {
                            1 => "AGGREGATION_TEMPORALITY_DELTA".to_string(),
                            2 => "AGGREGATION_TEMPORALITY_CUMULATIVE".to_string(),
                            t => t.to_string(),
                        },
                        &s.data_points,
                    ),
                };
                for p in points {
                    let attrs: Vec<String> = p
                        .attributes
                        .iter()
                        .map(|kv| {
                            let Some(any_value::Value::StringValue(v)) =
                                kv.value.as_ref().and_then(|v| v.value.clone())
                            else {
                                panic!("{kv:?}")
                            };
                            format!("{}={v}", kv.key)
                        })
                        .collect();
                    let value = match p.value {
                        Some(otlp::Value::AsDouble(v)) => v,
                        Some(otlp::Value::AsInt(v)) => v as f64,
                        None => panic!("{} has no value", m.name),
                    };
                    seen.entry(m.name.clone()).or_default().push(Point {
                        kind: kind.into(),
                        temporality: temporality.clone(),
                        attrs: attrs.join(","),
                        value,
                    });
                }
            }
        }
    }
    assert_eq!(seen, push.points, "{}", push.file.display());
}

fn poll_exactly(c: &Consumer, n: usize, within: Duration) {
    let end = Instant::now() + within;
    let mut got = 0;
    while got < n {
        assert!(Instant::now() < end, "consumed {got} of {n} records");
        got += c
            .poll_at_most(Duration::from_millis(200), n - got)
            .unwrap()
            .len();
    }
}

#[test]
#[ignore = "needs a Kafka broker: starts its own through tests/kafka_broker.py (-- --include-ignored)"]
fn pushed_metrics_are_the_consumers_own_snapshot() {
    init_logs();
    let started = Instant::now();
    let (broker, dir) = broker();
    let bs = &broker.bootstrap;
    let topic = new_topic(bs, "telemetry", PARTITIONS);
    produce(bs, &topic, PARTITIONS, PER_PARTITION);
    let group = unique_name("telemetry-g");
    let client_id = unique_name("telemetry-on");
    let c = consumer(
        bs,
        &[
            ("client.id", &client_id),
            ("group.id", &group),
            ("enable.auto.commit", "false"),
            ("auto.offset.reset", "earliest"),
        ],
    );
    c.subscribe(&[topic.as_str()], None).unwrap();
    let n = PARTITIONS as usize * PER_PARTITION;
    poll_exactly(&c, n, Duration::from_secs(20));
    // Records the consumer fetches but the application does not take: a lag of that many per
    // partition.
    produce(bs, &topic, PARTITIONS, LATER_PER_PARTITION);
    wait_until(
        "the consumer sees the later records",
        Duration::from_secs(10),
        || {
            let m = c.metrics();
            m.partitions.len() == PARTITIONS as usize
                && m.partitions
                    .iter()
                    .all(|p| p.lag == Some(LATER_PER_PARTITION as i64))
        },
    );
    let snapshot: ConsumerMetrics = c.metrics();
    let bytes_total = snapshot.bytes_consumed_total as f64;
    assert_eq!(snapshot.records_consumed_total, n as u64);
    // A push taken after the snapshot's state: every value settled.
    let mut seen = Vec::new();
    wait_until(
        "a push with the settled values",
        Duration::from_secs(10),
        || {
            seen = pushes(dir, &client_id);
            seen.last().is_some_and(|p| {
                counter(&seen, RECORDS) == n as f64
                    && (0..PARTITIONS).all(|i| p.lag(i) == Some(LATER_PER_PARTITION as f64))
            })
        },
    );
    let push = seen.last().unwrap().clone();
    assert!(!push.terminating);
    let g = snapshot.group.as_ref().expect("a group member");
    let names: BTreeSet<&str> = push.points.keys().map(String::as_str).collect();
    let expected = [RECORDS, BYTES, LAG, LEAD, ASSIGNED, REBALANCES, LAST_POLL];
    for name in expected {
        assert!(names.contains(name), "{name} not in {names:?}");
    }
    // The rest are the windowed statistics; a member that polled and rebalanced has these.
    for name in &names {
        assert!(expected.contains(name) || WINDOWED.contains(name), "{name}");
    }
    for name in &WINDOWED[..5] {
        assert!(names.contains(name), "{name} not in {names:?}");
    }
    assert_eq!(
        counter(&seen, RECORDS),
        snapshot.records_consumed_total as f64
    );
    assert_eq!(counter(&seen, BYTES), bytes_total);
    assert_eq!(push.value(ASSIGNED), Some(PARTITIONS as f64));
    assert_eq!(push.value(ASSIGNED), Some(g.assigned_partitions as f64));
    assert_eq!(counter(&seen, REBALANCES), g.rebalance_count as f64);
    for p in &snapshot.partitions {
        assert_eq!(push.lag(p.partition), p.lag.map(|l| l as f64), "{p:?}");
        // The lead: the position less the log start offset, 10 records in.
        assert_eq!(
            push.per_partition(LEAD, p.partition),
            Some((p.position.unwrap() - p.log_start_offset.unwrap()) as f64),
            "{p:?}"
        );
        assert_eq!(
            push.per_partition(LEAD, p.partition),
            Some(PER_PARTITION as f64)
        );
        let point = push.points[LAG]
            .iter()
            .find(|x| x.attrs == format!("topic={topic},partition={}", p.partition))
            .unwrap_or_else(|| {
                panic!(
                    "a lag point with topic and partition: {:?}",
                    push.points[LAG]
                )
            });
        assert_eq!(point.kind, "gauge");
    }
    // The broker's subscriptions ask for delta temporality by default.
    let sum = &push.points[RECORDS][0];
    assert_eq!(
        (sum.kind.as_str(), sum.temporality.as_str()),
        ("sum", "AGGREGATION_TEMPORALITY_DELTA")
    );
    assert!(push.value(LAST_POLL).unwrap() <= 10.0);
    assert_eq!(push.resource.get("group_id"), Some(&group));
    assert_eq!(push.resource.get("group_member_id"), g.member_id.as_ref());
    check_against_prost(&push);

    // The next push, nothing consumed in between: each counter's delta is zero, and the gauges
    // stay.
    let mut next = None;
    wait_until(
        "the next push",
        2 * INTERVAL + Duration::from_secs(1),
        || {
            next = pushes(dir, &client_id).into_iter().nth(seen.len());
            next.is_some()
        },
    );
    let next = next.unwrap();
    assert_eq!(next.value(RECORDS), Some(0.0));
    assert_eq!(next.value(BYTES), Some(0.0));
    assert_eq!(next.value(ASSIGNED), Some(PARTITIONS as f64));
    assert_eq!(next.lag(0), Some(LATER_PER_PARTITION as f64));

    // The last push, marked terminating, on close: the final values.
    let before = pushes(dir, &client_id).len();
    c.close(Some(Duration::from_secs(5))).unwrap();
    let mut last = None;
    wait_until("the terminating push", Duration::from_secs(5), || {
        last = pushes(dir, &client_id).into_iter().find(|p| p.terminating);
        last.is_some()
    });
    let last = last.unwrap();
    check_against_prost(&last);
    let after = pushes(dir, &client_id);
    assert!(
        after.last().unwrap().terminating,
        "the terminating push is the last"
    );
    assert_eq!(counter(&after, RECORDS), n as f64);
    assert_eq!(counter(&after, BYTES), bytes_total);
    assert!(after.len() > before);
    assert!(after.len() >= 2, "{} pushes", after.len());
    eprintln!(
        "{} pushes from the consumer ({n} records, their deltas summing to {}; {PARTITIONS} \
         partitions, lag {LATER_PER_PARTITION} each), the last terminating; {:.1} s with the \
         broker's start",
        after.len(),
        counter(&after, RECORDS),
        started.elapsed().as_secs_f64()
    );
}

#[test]
#[ignore = "needs a Kafka broker: starts its own through tests/kafka_broker.py (-- --include-ignored)"]
fn enable_metrics_push_false_pushes_nothing() {
    init_logs();
    let (broker, dir) = broker();
    let bs = &broker.bootstrap;
    let topic = new_topic(bs, "telemetry-off", 1);
    produce(bs, &topic, 1, 5);
    let off_id = unique_name("telemetry-off");
    let on_id = unique_name("telemetry-control");
    let member = |client_id: &str, push: &str| {
        let c = consumer(
            bs,
            &[
                ("client.id", client_id),
                ("group.id", &unique_name("telemetry-off-g")),
                ("auto.offset.reset", "earliest"),
                ("enable.metrics.push", push),
            ],
        );
        c.subscribe(&[topic.as_str()], None).unwrap();
        c
    };
    let off = member(&off_id, "false");
    // A consumer with the pushes on beside it, the same time: the plugin hears that one.
    let on = member(&on_id, "true");
    poll_exactly(&off, 5, Duration::from_secs(20));
    poll_exactly(&on, 5, Duration::from_secs(20));
    let window = Instant::now();
    while window.elapsed() < 3 * INTERVAL {
        off.poll(Duration::from_millis(100)).unwrap();
        on.poll(Duration::from_millis(100)).unwrap();
    }
    off.close(Some(Duration::from_secs(5))).unwrap();
    on.close(Some(Duration::from_secs(5))).unwrap();
    let heard = pushes(dir, &on_id).len();
    assert!(heard >= 2, "the control consumer pushed {heard} times");
    assert_eq!(pushes(dir, &off_id).len(), 0);
    eprintln!("enable.metrics.push=false: 0 pushes; the consumer beside it: {heard}");
}

/// The Java consumer (tests/interop/java/InteropClient.java, kafka-clients of the broker's
/// release) pushing to the same plugin: every name lagless pushes is one the Java client pushes
/// too, of the same kind (gauge or sum) and with the same point attributes; and lagless' resource
/// attribute keys are among the Java client's.
#[test]
#[ignore = "needs a Kafka broker: starts its own through tests/kafka_broker.py (-- --include-ignored)"]
fn the_names_are_the_java_consumers() {
    init_logs();
    let (broker, dir) = broker();
    let bs = &broker.bootstrap;
    let topic = new_topic(bs, "telemetry-java", 2);
    produce(bs, &topic, 2, 5);
    let java_id = unique_name("telemetry-java");
    let lagless_id = unique_name("telemetry-lagless");
    let group = unique_name("telemetry-java-g");
    let client_id = format!("client.id={java_id}");
    let mut java = JavaClient::start(
        "telemetry-java",
        &[
            "consume",
            "--bootstrap",
            bs,
            "--topic",
            &topic,
            "--group",
            &group,
            "--count",
            "10",
            "--config",
            &client_id,
        ],
        &[],
        Box::new(|_| {}),
    );
    let c = consumer(
        bs,
        &[
            ("client.id", &lagless_id),
            ("group.id", &unique_name("telemetry-java-l")),
            ("auto.offset.reset", "earliest"),
        ],
    );
    c.subscribe(&[topic.as_str()], None).unwrap();
    poll_exactly(&c, 10, Duration::from_secs(20));
    // Both pushed at least once with a group member's metrics.
    let has_group = |p: &Push| p.points.contains_key(ASSIGNED);
    wait_until("pushes of both clients", Duration::from_secs(20), || {
        c.poll(Duration::from_millis(50)).unwrap();
        pushes(dir, &java_id).iter().any(has_group)
            && pushes(dir, &lagless_id).iter().any(has_group)
    });
    c.close(Some(Duration::from_secs(5))).unwrap();
    java.stop(Duration::from_secs(5));
    let java_shape = shape(pushes(dir, &java_id));
    let our_shape = shape(pushes(dir, &lagless_id));
    // The 7 always there, and of the windowed ones at least the 7 any polling member has
    // (the rate, the largest lag, the fetch latencies, the poll statistics).
    assert!(our_shape.0.len() >= 14, "{:?}", our_shape.0);
    assert_java_shaped(&our_shape, &java_shape, "consumer");
    let ((java_names, java_resource), (ours, our_resource)) = (java_shape, our_shape);
    eprintln!(
        "the Java consumer pushed {} names (resource {java_resource:?}); lagless {} of them \
         (resource {our_resource:?})",
        java_names.len(),
        ours.len()
    );
}

const SENT: &str = "org.apache.kafka.producer.record.send.total";
const BUFFER_TOTAL: &str = "org.apache.kafka.producer.buffer.total.bytes";

#[test]
#[ignore = "needs a Kafka broker: starts its own through tests/kafka_broker.py (-- --include-ignored)"]
fn the_producer_pushes_its_snapshot_under_the_java_producers_names() {
    init_logs();
    let (broker, dir) = broker();
    let bs = &broker.bootstrap;
    let topic = new_topic(bs, "telemetry-producer", 2);
    let java_id = unique_name("telemetry-java-p");
    let lagless_id = unique_name("telemetry-lagless-p");
    let client_id = format!("client.id={java_id}");
    // The Java producer stays open 4 s after its records, so that it pushes while open.
    let mut java = JavaClient::start(
        "telemetry-java-producer",
        &[
            "produce",
            "--bootstrap",
            bs,
            "--topic",
            &topic,
            "--count",
            "20",
            "--stay-ms",
            "4000",
            "--config",
            &client_id,
        ],
        &[],
        Box::new(|_| {}),
    );
    let p = producer(bs, &[("client.id", &lagless_id)]);
    let deliveries: Vec<_> = (0..40)
        .map(|i| {
            p.send(ProducerRecord::new(&topic, format!("r{i}")).with_partition(i % 2))
                .unwrap()
        })
        .collect();
    p.flush(Duration::from_secs(30)).unwrap();
    for d in deliveries {
        d.wait().expect("delivered");
    }
    let m = p.metrics();
    assert_eq!(m.records_sent_total, 40);
    // The pushes (deltas by default) add up to the 40 records, as the snapshot says.
    wait_until(
        "pushes counting 40 records",
        Duration::from_secs(20),
        || counter(&pushes(dir, &lagless_id), SENT) == 40.0,
    );
    let open = pushes(dir, &lagless_id);
    assert!(open.iter().all(|p| !p.terminating), "{open:?}");
    let last = open.last().expect("a push");
    assert_eq!(last.value(BUFFER_TOTAL), Some(m.buffer_memory as f64));
    for push in &open {
        check_against_prost(push);
    }
    // Closing sends the terminating push, with nothing more sent since.
    p.close(Duration::from_secs(10)).unwrap();
    let all = pushes(dir, &lagless_id);
    let last = all.last().expect("a push");
    assert!(
        last.terminating,
        "the last push is the terminating one: {last:?}"
    );
    assert_eq!(counter(&all, SENT), 40.0);

    wait_until(
        "the Java producer's pushes",
        Duration::from_secs(30),
        || {
            pushes(dir, &java_id)
                .iter()
                .any(|p| p.points.contains_key(SENT))
        },
    );
    java.stop(Duration::from_secs(10));
    let java_shape = shape(pushes(dir, &java_id));
    let our_shape = shape(all);
    // 6 always (totals, rates, buffer) and the Produce latency's 2 after deliveries.
    assert_eq!(our_shape.0.len(), 8, "{:?}", our_shape.0.keys());
    assert_java_shaped(&our_shape, &java_shape, "producer");
    eprintln!(
        "the Java producer pushed {} names; lagless {} of them",
        java_shape.0.len(),
        our_shape.0.len()
    );
}
