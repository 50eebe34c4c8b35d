//! The consumer's snapshot ([`ConsumerMetrics`]) as the metrics a push carries: KIP-714's names
//! for consumers (the Java client's metric names under `org.apache.kafka.`, group and name
//! dotted, `-metrics` dropped), only those a field of the snapshot backs, each with that
//! field's value. Counters are OTLP sums, monotonic, cumulative or delta as the subscription
//! says (`DeltaTemporality`); the others are gauges. Values are doubles, as the Java client
//! sends them. Pure: the time and the previous push's values ([`Ledger`]) come in.
//!
//! | name | type | snapshot field |
//! |---|---|---|
//! | `org.apache.kafka.consumer.fetch.manager.records.consumed.total` | sum | `records_consumed_total` |
//! | `org.apache.kafka.consumer.fetch.manager.bytes.consumed.total` | sum | `bytes_consumed_total` |
//! | `org.apache.kafka.consumer.fetch.manager.records.lag` (`topic`, `partition`) | gauge | `partitions[].lag` (known ones) |
//! | `org.apache.kafka.consumer.fetch.manager.records.lead` (`topic`, `partition`) | gauge | `partitions[].lead()` (known ones) |
//! | `org.apache.kafka.consumer.coordinator.assigned.partitions` | gauge | `group.assigned_partitions` |
//! | `org.apache.kafka.consumer.coordinator.rebalance.total` | sum | `group.rebalance_count` |
//! | `org.apache.kafka.consumer.last.poll.seconds.ago` | gauge | `poll.since_last_poll` (whole seconds; once polled) |
//! | `org.apache.kafka.consumer.fetch.manager.records.consumed.rate` | gauge | `poll.records_consumed_rate` |
//! | `org.apache.kafka.consumer.fetch.manager.bytes.consumed.rate` | gauge | `poll.bytes_consumed_rate` |
//! | `org.apache.kafka.consumer.fetch.manager.records.lag.max` | gauge | `records_lag_max()` |
//! | `org.apache.kafka.consumer.fetch.manager.fetch.latency.avg`, `.max` | gauge | `fetch_latency` (ms) |
//! | `org.apache.kafka.consumer.coordinator.commit.latency.avg`, `.max` | gauge | `commit_latency` (ms) |
//! | `org.apache.kafka.consumer.coordinator.rebalance.latency.avg`, `.max` | gauge | `group.rebalance_latency_*` (ms) |
//! | `org.apache.kafka.consumer.coordinator.last.rebalance.seconds.ago` | gauge | `group.since_last_rebalance` (whole seconds) |
//! | `org.apache.kafka.consumer.poll.idle.ratio.avg` | gauge | `poll.poll_idle_ratio_avg` |
//! | `org.apache.kafka.consumer.time.between.poll.avg`, `.max` | gauge | `poll.time_between_poll_*` (ms) |
//!
//! The windowed ones are sent only while their window holds a value (the Java client sends NaN).
//!
//! The resource's attributes are the Java client's for a consumer: `group_id`,
//! `group_instance_id`, `client_rack` and `group_member_id`, each when known; `client_id` is
//! left to the broker, which has it from the request header.
use std::collections::HashMap;

use super::otlp::{
    AggregationTemporality, Data, Gauge, KeyValue, Metric, MetricsData, NumberDataPoint, Resource,
    ResourceMetrics, ScopeMetrics, Sum, Value,
};
use super::state::Selector;
use crate::metrics::ConsumerMetrics;

/// The prefix of every name.
#[cfg(test)]
pub const PREFIX: &str = "org.apache.kafka.consumer.";

/// Records handed to the application (Java's `records-consumed-total`).
pub const RECORDS_CONSUMED_TOTAL: &str =
    "org.apache.kafka.consumer.fetch.manager.records.consumed.total";
/// Their key and value bytes (Java's `bytes-consumed-total`).
pub const BYTES_CONSUMED_TOTAL: &str =
    "org.apache.kafka.consumer.fetch.manager.bytes.consumed.total";
/// A partition's lag (Java's per-partition `records-lag`).
pub const RECORDS_LAG: &str = "org.apache.kafka.consumer.fetch.manager.records.lag";
/// A partition's lead: its position less its log start offset (Java's per-partition
/// `records-lead`).
pub const RECORDS_LEAD: &str = "org.apache.kafka.consumer.fetch.manager.records.lead";
/// The partitions the group member owns (Java's `assigned-partitions`).
pub const ASSIGNED_PARTITIONS: &str = "org.apache.kafka.consumer.coordinator.assigned.partitions";
/// Rebalances the member completed (Java's `rebalance-total`).
pub const REBALANCE_TOTAL: &str = "org.apache.kafka.consumer.coordinator.rebalance.total";
/// Whole seconds since the last poll started (Java's `last-poll-seconds-ago`, the consumer's:
/// not `group.since_last_poll`, the KIP-62 timer, which `subscribe()` restarts too).
pub const LAST_POLL_SECONDS_AGO: &str = "org.apache.kafka.consumer.last.poll.seconds.ago";
/// `poll.records_consumed_rate`.
pub const RECORDS_CONSUMED_RATE: &str =
    "org.apache.kafka.consumer.fetch.manager.records.consumed.rate";
/// `poll.bytes_consumed_rate` (Java's `bytes-consumed-rate`).
pub const BYTES_CONSUMED_RATE: &str = "org.apache.kafka.consumer.fetch.manager.bytes.consumed.rate";
/// `records_lag_max()`.
pub const RECORDS_LAG_MAX: &str = "org.apache.kafka.consumer.fetch.manager.records.lag.max";
/// `fetch_latency` (milliseconds, as Java's).
pub const FETCH_LATENCY_AVG: &str = "org.apache.kafka.consumer.fetch.manager.fetch.latency.avg";
/// See [`FETCH_LATENCY_AVG`].
pub const FETCH_LATENCY_MAX: &str = "org.apache.kafka.consumer.fetch.manager.fetch.latency.max";
/// `commit_latency` (milliseconds).
pub const COMMIT_LATENCY_AVG: &str = "org.apache.kafka.consumer.coordinator.commit.latency.avg";
/// See [`COMMIT_LATENCY_AVG`].
pub const COMMIT_LATENCY_MAX: &str = "org.apache.kafka.consumer.coordinator.commit.latency.max";
/// `group.rebalance_latency_avg` (milliseconds).
pub const REBALANCE_LATENCY_AVG: &str =
    "org.apache.kafka.consumer.coordinator.rebalance.latency.avg";
/// `group.rebalance_latency_max` (milliseconds).
pub const REBALANCE_LATENCY_MAX: &str =
    "org.apache.kafka.consumer.coordinator.rebalance.latency.max";
/// `group.since_last_rebalance` (seconds).
pub const LAST_REBALANCE_SECONDS_AGO: &str =
    "org.apache.kafka.consumer.coordinator.last.rebalance.seconds.ago";
/// `poll.poll_idle_ratio_avg`.
pub const POLL_IDLE_RATIO_AVG: &str = "org.apache.kafka.consumer.poll.idle.ratio.avg";
/// `poll.time_between_poll_avg` (milliseconds).
pub const TIME_BETWEEN_POLL_AVG: &str = "org.apache.kafka.consumer.time.between.poll.avg";
/// `poll.time_between_poll_max` (milliseconds).
pub const TIME_BETWEEN_POLL_MAX: &str = "org.apache.kafka.consumer.time.between.poll.max";

/// One point of one metric, before it is encoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    /// The metric's name.
    pub name: &'static str,
    /// A counter (an OTLP sum) or not (a gauge).
    pub counter: bool,
    /// The point's attributes (`topic`, `partition`).
    pub attributes: Vec<(&'static str, String)>,
    /// The snapshot's value.
    pub value: f64,
}

/// Every point the snapshot backs, in a fixed order.
pub fn points(m: &ConsumerMetrics) -> Vec<Point> {
    let point = |name, counter, value: f64| Point {
        name,
        counter,
        attributes: Vec::new(),
        value,
    };
    let mut out = vec![
        point(
            RECORDS_CONSUMED_TOTAL,
            true,
            m.records_consumed_total as f64,
        ),
        point(BYTES_CONSUMED_TOTAL, true, m.bytes_consumed_total as f64),
    ];
    let per_partition = |name, p: &crate::metrics::PartitionMetrics, value: i64| Point {
        name,
        counter: false,
        attributes: vec![
            ("topic", p.topic.clone()),
            ("partition", p.partition.to_string()),
        ],
        value: value as f64,
    };
    for p in &m.partitions {
        if let Some(lag) = p.lag {
            out.push(per_partition(RECORDS_LAG, p, lag));
        }
    }
    for p in &m.partitions {
        if let Some(lead) = p.lead() {
            out.push(per_partition(RECORDS_LEAD, p, lead));
        }
    }
    // The windowed statistics, each only while the window holds a value (Java sends NaN).
    let ms = crate::metrics::window::millis;
    let mut known = |name, value: Option<f64>| {
        if let Some(v) = value {
            out.push(point(name, false, v));
        }
    };
    known(RECORDS_CONSUMED_RATE, Some(m.poll.records_consumed_rate));
    known(BYTES_CONSUMED_RATE, Some(m.poll.bytes_consumed_rate));
    known(RECORDS_LAG_MAX, m.records_lag_max().map(|v| v as f64));
    known(
        FETCH_LATENCY_AVG,
        m.fetch_latency.as_ref().map(|l| ms(l.avg)),
    );
    known(
        FETCH_LATENCY_MAX,
        m.fetch_latency.as_ref().map(|l| ms(l.max)),
    );
    known(POLL_IDLE_RATIO_AVG, m.poll.poll_idle_ratio_avg);
    known(TIME_BETWEEN_POLL_AVG, m.poll.time_between_poll_avg.map(ms));
    known(TIME_BETWEEN_POLL_MAX, m.poll.time_between_poll_max.map(ms));
    known(
        LAST_POLL_SECONDS_AGO,
        m.poll.since_last_poll.map(|d| d.as_secs() as f64),
    );
    if let Some(g) = &m.group {
        known(
            COMMIT_LATENCY_AVG,
            m.commit_latency.as_ref().map(|l| ms(l.avg)),
        );
        known(
            COMMIT_LATENCY_MAX,
            m.commit_latency.as_ref().map(|l| ms(l.max)),
        );
        known(REBALANCE_LATENCY_AVG, g.rebalance_latency_avg.map(ms));
        known(REBALANCE_LATENCY_MAX, g.rebalance_latency_max.map(ms));
        known(
            LAST_REBALANCE_SECONDS_AGO,
            g.since_last_rebalance.map(|d| d.as_secs() as f64),
        );
    }
    if let Some(g) = &m.group {
        out.push(point(
            ASSIGNED_PARTITIONS,
            false,
            g.assigned_partitions as f64,
        ));
        out.push(point(REBALANCE_TOTAL, true, g.rebalance_count as f64));
    }
    out
}

/// The resource attributes of the snapshot's client.
pub fn resource(m: &ConsumerMetrics, client_rack: Option<&str>) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(g) = &m.group {
        out.push(("group_id", g.group_id.clone()));
        if let Some(id) = &g.group_instance_id {
            out.push(("group_instance_id", id.clone()));
        }
    }
    if let Some(rack) = client_rack {
        out.push(("client_rack", rack.to_string()));
    }
    if let Some(id) = m.group.as_ref().and_then(|g| g.member_id.as_ref()) {
        out.push(("group_member_id", id.clone()));
    }
    out
}

type Key = (&'static str, Vec<(&'static str, String)>);

/// What the previous push sent of each counter and when: the base of a delta, and the start
/// time of a cumulative sum (when the counter was first seen).
#[derive(Debug, Clone, Default)]
pub struct Ledger {
    /// The temporality the entries were kept for; a change starts the ledger over (as the Java
    /// client resets its collector when the subscription's `DeltaTemporality` changes).
    delta: Option<bool>,
    /// Per counter: (first seen, last sent value, last sent time).
    counters: HashMap<Key, (u64, f64, u64)>,
}

/// The OTLP payload of `points` selected by `selector`, at `now_nanos` (Unix time), with
/// counters as deltas or cumulative sums; records what was sent in `ledger`. `None` when no
/// point is selected.
pub fn encode(
    points: Vec<Point>,
    resource_attributes: &[(&'static str, String)],
    selector: &Selector,
    delta: bool,
    now_nanos: u64,
    ledger: &mut Ledger,
) -> Option<MetricsData> {
    if ledger.delta != Some(delta) {
        ledger.delta = Some(delta);
        ledger.counters.clear();
    }
    let mut metrics: Vec<Metric> = Vec::new();
    for p in points.into_iter().filter(|p| selector.matches(p.name)) {
        let attributes = p
            .attributes
            .iter()
            .map(|(k, v)| KeyValue::string(k, v))
            .collect();
        let (start, value) = if p.counter {
            let key = (p.name, p.attributes.clone());
            let entry = ledger
                .counters
                .entry(key)
                .or_insert((now_nanos, 0.0, now_nanos));
            let (first, last_value, last_time) = *entry;
            *entry = (first, p.value, now_nanos);
            if delta {
                (last_time, p.value - last_value)
            } else {
                (first, p.value)
            }
        } else {
            (0, p.value)
        };
        let point = NumberDataPoint {
            attributes,
            start_time_unix_nano: start,
            time_unix_nano: now_nanos,
            flags: 0,
            value: Some(Value::AsDouble(value)),
        };
        // Points of one name (a gauge per partition) go in one metric.
        if let Some(m) = metrics.iter_mut().find(|m| m.name == p.name) {
            match &mut m.data {
                Some(Data::Gauge(g)) => g.data_points.push(point),
                Some(Data::Sum(s)) => s.data_points.push(point),
                None => {}
            }
            continue;
        }
        let data = if p.counter {
            Data::Sum(Sum {
                data_points: vec![point],
                aggregation_temporality: if delta {
                    AggregationTemporality::Delta
                } else {
                    AggregationTemporality::Cumulative
                } as i32,
                is_monotonic: true,
            })
        } else {
            Data::Gauge(Gauge {
                data_points: vec![point],
            })
        };
        metrics.push(Metric {
            name: p.name.to_string(),
            description: String::new(),
            unit: String::new(),
            data: Some(data),
        });
    }
    if metrics.is_empty() {
        return None;
    }
    Some(MetricsData {
        resource_metrics: vec![ResourceMetrics {
            resource: Some(Resource {
                attributes: resource_attributes
                    .iter()
                    .map(|(k, v)| KeyValue::string(k, v))
                    .collect(),
                dropped_attributes_count: 0,
            }),
            scope_metrics: vec![ScopeMetrics {
                scope: None,
                metrics,
                schema_url: String::new(),
            }],
            schema_url: String::new(),
        }],
    })
}

#[cfg(test)]
mod tests {
    use prost::Message;

    use super::*;
    use crate::metrics::fixtures::{partition, sample_metrics};
    use crate::metrics::PartitionMetrics;

    /// The metrics' shared sample, with or without its group.
    fn snapshot(group: bool) -> ConsumerMetrics {
        let mut m = sample_metrics();
        if !group {
            m.group = None;
        }
        m
    }

    fn value(m: &Metric, i: usize) -> (f64, u64, Vec<(String, String)>) {
        let points = match m.data.as_ref().unwrap() {
            Data::Gauge(g) => &g.data_points,
            Data::Sum(s) => &s.data_points,
        };
        let p = &points[i];
        let Some(Value::AsDouble(v)) = p.value else {
            panic!()
        };
        let attrs = p
            .attributes
            .iter()
            .map(|kv| {
                let Some(super::super::otlp::any_value::Value::StringValue(s)) =
                    kv.value.as_ref().unwrap().value.clone()
                else {
                    panic!()
                };
                (kv.key.clone(), s)
            })
            .collect();
        (v, p.start_time_unix_nano, attrs)
    }

    #[test]
    fn names_and_values_come_from_the_snapshot() {
        let names: Vec<_> = points(&snapshot(true))
            .iter()
            .map(|p| (p.name, p.counter, p.value))
            .collect();
        assert_eq!(
            names,
            vec![
                (RECORDS_CONSUMED_TOTAL, true, 12.0),
                (BYTES_CONSUMED_TOTAL, true, 340.0),
                // Partition 1 knows neither its lag nor its lead: no point.
                (RECORDS_LAG, false, 50.0),
                (RECORDS_LEAD, false, 40.0),
                (RECORDS_CONSUMED_RATE, false, 4.5),
                (BYTES_CONSUMED_RATE, false, 127.5),
                (RECORDS_LAG_MAX, false, 50.0),
                (FETCH_LATENCY_AVG, false, 501.5),
                (FETCH_LATENCY_MAX, false, 502.0),
                (POLL_IDLE_RATIO_AVG, false, 0.25),
                (TIME_BETWEEN_POLL_AVG, false, 250.0),
                (TIME_BETWEEN_POLL_MAX, false, 900.0),
                // The consumer's last poll (1.5 s ago), as Java's; not the group's KIP-62 timer
                // (2.5 s).
                (LAST_POLL_SECONDS_AGO, false, 1.0),
                // No commit latency known: not sent.
                (REBALANCE_LATENCY_AVG, false, 3250.0),
                (REBALANCE_LATENCY_MAX, false, 3250.0),
                (LAST_REBALANCE_SECONDS_AGO, false, 12.0),
                (ASSIGNED_PARTITIONS, false, 2.0),
                (REBALANCE_TOTAL, true, 2.0),
            ]
        );
        // Without a group: no coordinator metric; the last poll still.
        assert_eq!(points(&snapshot(false)).len(), 13);
        assert!(points(&snapshot(false))
            .iter()
            .any(|p| p.name == LAST_POLL_SECONDS_AGO));
        // Never polled: no time since the last poll.
        let mut unpolled = snapshot(true);
        unpolled.poll.since_last_poll = None;
        assert!(!points(&unpolled)
            .iter()
            .any(|p| p.name == LAST_POLL_SECONDS_AGO));
        assert!(points(&snapshot(true))
            .iter()
            .all(|p| p.name.starts_with(PREFIX)));
    }

    #[test]
    fn the_resource_names_the_group_the_member_and_the_rack() {
        assert_eq!(
            resource(&snapshot(true), Some("r1")),
            vec![
                ("group_id", "billing".to_string()),
                ("client_rack", "r1".to_string()),
                ("group_member_id", "m-1".to_string()),
            ]
        );
        assert!(resource(&snapshot(false), None).is_empty());
    }

    #[test]
    fn cumulative_sums_keep_their_start_and_gauges_have_none() {
        let mut ledger = Ledger::default();
        let mut m = snapshot(true);
        // Partition 1 with a lead too: two points of one metric.
        m.partitions[1] = PartitionMetrics {
            position: Some(7),
            log_start_offset: Some(2),
            ..partition(1)
        };
        let sel = Selector::All;
        let d1 = encode(
            points(&m),
            &resource(&m, None),
            &sel,
            false,
            1_000,
            &mut ledger,
        )
        .unwrap();
        let mut m2 = m.clone();
        m2.records_consumed_total = 42;
        let d2 = encode(points(&m2), &[], &sel, false, 2_000, &mut ledger).unwrap();
        let metrics = &d2.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics[0].name, RECORDS_CONSUMED_TOTAL);
        assert_eq!(value(&metrics[0], 0), (42.0, 1_000, vec![]));
        let Some(Data::Sum(s)) = &metrics[0].data else {
            panic!()
        };
        assert!(s.is_monotonic);
        assert_eq!(
            s.aggregation_temporality,
            AggregationTemporality::Cumulative as i32
        );
        assert_eq!(metrics[2].name, RECORDS_LAG);
        assert_eq!(
            value(&metrics[2], 0),
            (
                50.0,
                0,
                vec![
                    ("topic".into(), "orders".into()),
                    ("partition".into(), "0".into())
                ]
            )
        );
        // One metric of two points for the lead of each partition.
        assert_eq!(metrics[3].name, RECORDS_LEAD);
        assert_eq!(value(&metrics[3], 0).0, 40.0);
        assert_eq!(value(&metrics[3], 1).0, 5.0);
        assert_eq!(
            value(&metrics[3], 1).2,
            vec![
                ("topic".to_string(), "orders".to_string()),
                ("partition".to_string(), "1".to_string())
            ]
        );
        // The payload decodes as it was built.
        let bytes = d1.encode_to_vec();
        assert_eq!(MetricsData::decode(bytes.as_slice()).unwrap(), d1);
        let attrs = &d1.resource_metrics[0].resource.as_ref().unwrap().attributes;
        assert_eq!(attrs[0], KeyValue::string("group_id", "billing"));
    }

    #[test]
    fn delta_sums_send_the_change_since_the_last_push() {
        let mut ledger = Ledger::default();
        let m = snapshot(false);
        let sel = Selector::of(&[RECORDS_CONSUMED_TOTAL.into()]);
        let d1 = encode(points(&m), &[], &sel, true, 1_000, &mut ledger).unwrap();
        let metrics = &d1.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(metrics.len(), 1);
        assert_eq!(value(&metrics[0], 0), (12.0, 1_000, vec![]));
        let mut m2 = m.clone();
        m2.records_consumed_total = 42;
        let d2 = encode(points(&m2), &[], &sel, true, 2_000, &mut ledger).unwrap();
        let metrics = &d2.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(value(&metrics[0], 0), (30.0, 1_000, vec![]));
        let Some(Data::Sum(s)) = &metrics[0].data else {
            panic!()
        };
        assert_eq!(
            s.aggregation_temporality,
            AggregationTemporality::Delta as i32
        );
        // Back to cumulative: the ledger starts over.
        let d3 = encode(points(&m2), &[], &sel, false, 3_000, &mut ledger).unwrap();
        let metrics = &d3.resource_metrics[0].scope_metrics[0].metrics;
        assert_eq!(value(&metrics[0], 0), (42.0, 3_000, vec![]));
    }

    #[test]
    fn nothing_selected_is_no_payload() {
        let m = snapshot(true);
        let mut ledger = Ledger::default();
        let sel = Selector::of(&["org.apache.kafka.producer.".into()]);
        assert_eq!(encode(points(&m), &[], &sel, false, 1, &mut ledger), None);
    }
}
