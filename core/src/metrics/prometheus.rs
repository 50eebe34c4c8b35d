//! [`ConsumerMetrics::to_prometheus`]: the snapshot in the Prometheus text exposition format,
//! version 0.0.4 (`Content-Type: text/plain; version=0.0.4; charset=utf-8`), for an HTTP
//! handler to serve as it is. A pure function of the snapshot.
//!
//! Every name starts with `lagless_consumer_`, counters end in `_total`, times are in seconds and
//! sizes in bytes; each family has its `# HELP` and `# TYPE`. Labels: `client_id` on every
//! sample, `group_id` when the consumer is a group member, `topic` and `partition` on the
//! partitions'. A value the snapshot does not know (`None`, `null` in the JSON) has no sample,
//! and a family with no sample is left out whole: never a sentinel. README.md's "Metrics"
//! section maps each name to the JSON field.
//!
//! The encoding is the Prometheus project's own Rust client, `prometheus-client`, rather than
//! one of our own: its `prometheus_text` encoder writes the 0.0.4 format (names, the `_total`
//! suffix, `# HELP` escaping, label value escaping of `\`, `"` and newlines, Go's number
//! spelling), which is where a hand-written encoder would go wrong. Its model is a registry of
//! live metrics updated in place, which does not fit a snapshot taken on demand; its
//! [`Collector`] does: a collector writes families when the registry is encoded. So each
//! rendering registers one collector holding a copy of the snapshot in a registry of its own and
//! encodes that; nothing is kept between renderings, and the registry's atomics go unused.
use std::fmt;

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::TypedMetric;
use prometheus_client::registry::Registry;

use super::{BrokerMetrics, ConsumerMetrics, Failing, LatencyMetrics, PartitionMetrics};

/// The `Content-Type` to serve [`ConsumerMetrics::to_prometheus`]'s text with.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The prefix of every name.
const PREFIX: &str = "lagless_consumer";

/// The member states [`super::GroupMetrics::state`] takes, each a sample of
/// `lagless_consumer_group_state` (1 for the member's, 0 for the others), so that a query can
/// look for any of them whether the member is in it or not.
const MEMBER_STATES: [&str; 4] = [
    "unjoined",
    "preparing_rebalance",
    "completing_rebalance",
    "stable",
];

/// The states of a partition the member learns ([`super::LearnerPartition::state`]), each a
/// sample of `lagless_consumer_group_learning`.
const LEARNER_STATES: [&str; 2] = ["warming", "ready"];

/// A sample's labels, in the order they are written.
type Labels = Vec<(&'static str, String)>;

impl ConsumerMetrics {
    /// The snapshot in the Prometheus text exposition format 0.0.4 (see
    /// [`crate::metrics::prometheus`]; README.md's "Metrics" section names each metric).
    pub fn to_prometheus(&self) -> String {
        render(PREFIX, Box::new(Snapshot(self.clone())))
    }
}

/// The text of `collector`'s samples, every name under `prefix`: a consumer's or a producer's
/// snapshot.
pub(crate) fn render(prefix: &str, collector: Box<dyn Collector>) -> String {
    let mut registry = Registry::with_prefix(prefix);
    registry.register_collector(collector);
    let mut text = String::new();
    // Writing to a String does not fail, and no value here is one the encoder refuses (those
    // are usize and isize beyond i64: the snapshots' are converted before).
    prometheus_text::encode(&mut text, &registry)
        .expect("the Prometheus text of a snapshot is always written");
    text
}

/// The collector: one snapshot, written as it is on each encoding.
#[derive(Debug)]
struct Snapshot(ConsumerMetrics);

impl Collector for Snapshot {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let m = &self.0;
        let mut consumer: Labels = vec![("client_id", m.client_id.clone())];
        if let Some(g) = &m.group {
            consumer.push(("group_id", g.group_id.clone()));
        }

        // The totals.
        family(
            &mut e,
            "records_consumed",
            "Records handed to the application since the consumer was created.",
            once(&consumer, ConstCounter::new(m.records_consumed_total)),
        )?;
        family(
            &mut e,
            "bytes_consumed",
            "Key and value bytes of the records handed to the application since the consumer was created.",
            once(&consumer, ConstCounter::new(m.bytes_consumed_total)),
        )?;
        family(
            &mut e,
            "buffered_bytes",
            "What the records buffered for the application weigh (key, value, headers and 64 bytes a record).",
            once(&consumer, ConstGauge::new(m.buffered_bytes)),
        )?;
        family(
            &mut e,
            "fetch_buffer_held_bytes",
            "Memory the fetch path holds (what fetch.buffer.max.bytes bounds).",
            once(&consumer, ConstGauge::new(m.fetch_buffer_held_bytes)),
        )?;
        family(
            &mut e,
            "fetch_buffer_max_bytes",
            "fetch.buffer.max.bytes.",
            once(&consumer, ConstGauge::new(m.fetch_buffer_max_bytes)),
        )?;
        family(
            &mut e,
            "assigned_partitions",
            "Partitions assigned to the consumer.",
            once(&consumer, ConstGauge::new(count(m.partitions.len()))),
        )?;

        // poll()'s rhythm and the answers' latencies, windowed as the Java client's.
        let seconds = |d: Option<std::time::Duration>| d.map(|d| ConstGauge::new(d.as_secs_f64()));
        let known = |v: Option<ConstGauge<f64>>| v.map(|v| once(&consumer, v)).unwrap_or_default();
        family(
            &mut e,
            "last_poll_seconds_ago",
            "Time since the last poll started.",
            known(seconds(m.poll.since_last_poll)),
        )?;
        family(
            &mut e,
            "time_between_poll_avg_seconds",
            "The average time between the starts of successive polls, over the last 30 to 60 s.",
            known(seconds(m.poll.time_between_poll_avg)),
        )?;
        family(
            &mut e,
            "time_between_poll_max_seconds",
            "The longest time between the starts of successive polls, over the last 30 to 60 s.",
            known(seconds(m.poll.time_between_poll_max)),
        )?;
        family(
            &mut e,
            "poll_idle_ratio_avg",
            "The average share of time the application spent inside poll, over the last 30 to 60 s.",
            known(m.poll.poll_idle_ratio_avg.map(ConstGauge::new)),
        )?;
        family(
            &mut e,
            "records_consumed_rate",
            "Records returned by polls per second, over the last 30 to 60 s.",
            once(&consumer, ConstGauge::new(m.poll.records_consumed_rate)),
        )?;
        family(
            &mut e,
            "bytes_consumed_rate",
            "Key and value bytes of the records returned by polls per second, over the last 30 to 60 s.",
            once(&consumer, ConstGauge::new(m.poll.bytes_consumed_rate)),
        )?;
        let latency = |l: &Option<LatencyMetrics>,
                       f: fn(&LatencyMetrics) -> std::time::Duration| {
            known(l.as_ref().map(|l| ConstGauge::new(f(l).as_secs_f64())))
        };
        family(
            &mut e,
            "fetch_latency_avg_seconds",
            "The average Fetch answer latency, over the last 30 to 60 s.",
            latency(&m.fetch_latency, |l| l.avg),
        )?;
        family(
            &mut e,
            "fetch_latency_max_seconds",
            "The longest Fetch answer latency, over the last 30 to 60 s.",
            latency(&m.fetch_latency, |l| l.max),
        )?;
        family(
            &mut e,
            "commit_latency_avg_seconds",
            "The average OffsetCommit answer latency, over the last 30 to 60 s.",
            latency(&m.commit_latency, |l| l.avg),
        )?;
        family(
            &mut e,
            "commit_latency_max_seconds",
            "The longest OffsetCommit answer latency, over the last 30 to 60 s.",
            latency(&m.commit_latency, |l| l.max),
        )?;
        family(
            &mut e,
            "records_lag_max",
            "The largest lag of the partitions whose lag is known, now.",
            m.records_lag_max()
                .map(|v| once(&consumer, ConstGauge::new(v)))
                .unwrap_or_default(),
        )?;
        family(
            &mut e,
            "records_lead_min",
            "The smallest position minus log start offset of the partitions where both are known, now.",
            m.records_lead_min()
                .map(|v| once(&consumer, ConstGauge::new(v)))
                .unwrap_or_default(),
        )?;
        brokers(&mut e, &m.brokers, &consumer)?;

        // The group member.
        if let Some(g) = &m.group {
            let mut states: Vec<&str> = MEMBER_STATES.to_vec();
            if !states.contains(&g.state) {
                states.push(g.state);
            }
            let states = states
                .into_iter()
                .map(|s| {
                    let mut labels = consumer.clone();
                    labels.push(("state", s.to_string()));
                    (labels, ConstGauge::new(i64::from(s == g.state)))
                })
                .collect();
            family(
                &mut e,
                "group_state",
                "Where the group member is in the join protocol: 1 for its state, 0 for the others.",
                states,
            )?;
            if let Some(generation) = g.generation_id {
                family(
                    &mut e,
                    "group_generation",
                    "The group generation the member is in.",
                    once(&consumer, ConstGauge::new(i64::from(generation))),
                )?;
            }
            family(
                &mut e,
                "group_assigned_partitions",
                "Partitions the group member owns.",
                once(&consumer, ConstGauge::new(count(g.assigned_partitions))),
            )?;
            family(
                &mut e,
                "group_rebalances",
                "Rebalances the member completed (joins whose assignment it applied).",
                once(&consumer, ConstCounter::new(g.rebalance_count)),
            )?;
            if let Some(r) = &g.last_rebalance {
                family(
                    &mut e,
                    "group_last_rebalance_duration_seconds",
                    "How long the last completed rebalance took, from the start of its join to its assignment applied.",
                    once(&consumer, ConstGauge::new(r.duration.as_secs_f64())),
                )?;
            }
            family(
                &mut e,
                "group_last_rebalance_seconds_ago",
                "Time since the member's last rebalance completed.",
                known(seconds(g.since_last_rebalance)),
            )?;
            family(
                &mut e,
                "group_last_heartbeat_answer_seconds_ago",
                "Time since the group coordinator last answered a heartbeat.",
                known(seconds(g.since_last_heartbeat_answer)),
            )?;
            family(
                &mut e,
                "group_rebalance_latency_avg_seconds",
                "The average duration of the rebalances completed in the last 30 to 60 s.",
                known(seconds(g.rebalance_latency_avg)),
            )?;
            family(
                &mut e,
                "group_rebalance_latency_max_seconds",
                "The longest duration of the rebalances completed in the last 30 to 60 s.",
                known(seconds(g.rebalance_latency_max)),
            )?;
            family(
                &mut e,
                "group_time_since_last_poll_seconds",
                "Time since max.poll.interval.ms's timer was last restarted (by poll, or by subscribe before the first).",
                once(&consumer, ConstGauge::new(g.since_last_poll.as_secs_f64())),
            )?;
            let consumer_labels = &consumer;
            let learning = g
                .learning
                .iter()
                .flat_map(|l| {
                    LEARNER_STATES.iter().map(move |s| {
                        let mut labels = consumer_labels.clone();
                        labels.push(("topic", l.topic.clone()));
                        labels.push(("partition", l.partition.to_string()));
                        labels.push(("state", s.to_string()));
                        (labels, ConstGauge::new(i64::from(*s == l.state)))
                    })
                })
                .collect();
            family(
                &mut e,
                "group_learning",
                "Partitions the member learns before the group moves them here (learner assignments): 1 for the partition's state (warming, ready), 0 for the other.",
                learning,
            )?;
            family(
                &mut e,
                "group_learned_promoted",
                "Learned partitions a join then gave the member to own.",
                once(&consumer, ConstCounter::new(g.learned_promoted)),
            )?;
            family(
                &mut e,
                "group_max_poll_interval_seconds",
                "max.poll.interval.ms, in seconds.",
                once(
                    &consumer,
                    ConstGauge::new(g.max_poll_interval.as_secs_f64()),
                ),
            )?;
        }

        // The partitions.
        let offset = |v: Option<i64>| v.map(ConstGauge::new);
        let partitions = |f: &dyn Fn(&PartitionMetrics) -> Option<ConstGauge<i64>>| {
            per_partition(m, &consumer, f)
        };
        family(
            &mut e,
            "position",
            "The offset of the next record poll returns.",
            partitions(&|p| offset(p.position)),
        )?;
        family(
            &mut e,
            "committed_offset",
            "The group's committed offset as the consumer last knew it.",
            partitions(&|p| offset(p.committed_offset)),
        )?;
        family(
            &mut e,
            "high_watermark",
            "The high watermark the last fetch answer named.",
            partitions(&|p| offset(p.high_watermark)),
        )?;
        family(
            &mut e,
            "last_stable_offset",
            "The last stable offset the last fetch answer named.",
            partitions(&|p| offset(p.last_stable_offset)),
        )?;
        family(
            &mut e,
            "log_start_offset",
            "The log start offset the last fetch answer named.",
            partitions(&|p| offset(p.log_start_offset)),
        )?;
        family(
            &mut e,
            "records_lag",
            "The end offset (the high watermark, or the last stable offset under read_committed) minus the position.",
            partitions(&|p| offset(p.lag)),
        )?;
        family(
            &mut e,
            "partition_records_consumed",
            "Records handed to the application from the partition since it was assigned.",
            per_partition(m, &consumer, |p| {
                Some(ConstCounter::new(p.records_consumed))
            }),
        )?;
        family(
            &mut e,
            "partition_bytes_consumed",
            "Key and value bytes of the records handed to the application from the partition since it was assigned.",
            per_partition(m, &consumer, |p| Some(ConstCounter::new(p.bytes_consumed))),
        )?;
        family(
            &mut e,
            "partition_fetch_errors",
            "Fetches and position lookups of the partition that failed since it was assigned.",
            per_partition(m, &consumer, |p| Some(ConstCounter::new(p.fetch_errors))),
        )?;
        family(
            &mut e,
            "partition_paused",
            "1 while the partition is paused by pause().",
            partitions(&|p| Some(ConstGauge::new(i64::from(p.paused)))),
        )?;
        family(
            &mut e,
            "partition_failing_seconds",
            "Time since the partition's stream last made progress, while its last attempt failed (KIP-572).",
            per_partition(m, &consumer, |p| failing_seconds(&p.failing)),
        )?;
        family(
            &mut e,
            "partition_recovery_backlog",
            "Offsets left in the backlog of the partition's recovery stream (KIP-333), while one drains.",
            partitions(&|p| p.recovery.as_ref().map(|r| ConstGauge::new(r.backlog))),
        )?;
        family(
            &mut e,
            "partition_recovery_drain_rate",
            "Offsets of the recovery stream's backlog drained per second, over the last 30 to 60 s (KIP-333), while one drains.",
            per_partition(m, &consumer, |p| {
                p.recovery.as_ref().map(|r| ConstGauge::new(r.drain_rate))
            }),
        )?;
        family(
            &mut e,
            "partition_recovery_failing_seconds",
            "Time since the partition's recovery stream last made progress, while its last attempt failed (KIP-572).",
            per_partition(m, &consumer, |p| {
                p.recovery.as_ref().and_then(|r| failing_seconds(&r.failing))
            }),
        )
    }
}

/// The brokers' families, labelled with the broker's address and, when known, its node id.
fn brokers(e: &mut DescriptorEncoder, list: &[BrokerMetrics], consumer: &Labels) -> fmt::Result {
    let labels = |b: &BrokerMetrics| {
        let mut labels = consumer.clone();
        labels.push(("broker", b.address.clone()));
        if let Some(id) = b.node_id {
            labels.push(("node_id", id.to_string()));
        }
        labels
    };
    let each = |f: &dyn Fn(&BrokerMetrics) -> u64| -> Vec<(Labels, ConstCounter<u64>)> {
        list.iter()
            .map(|b| (labels(b), ConstCounter::new(f(b))))
            .collect()
    };
    let gauge = |f: &dyn Fn(&BrokerMetrics) -> Option<f64>| -> Vec<(Labels, ConstGauge<f64>)> {
        list.iter()
            .filter_map(|b| Some((labels(b), ConstGauge::new(f(b)?))))
            .collect()
    };
    let states = list
        .iter()
        .flat_map(|b| {
            let mut states: Vec<&str> = BROKER_STATES.to_vec();
            if !states.contains(&b.state) {
                states.push(b.state);
            }
            states.into_iter().map(move |s| {
                let mut l = labels(b);
                l.push(("state", s.to_string()));
                (l, ConstGauge::new(i64::from(s == b.state)))
            })
        })
        .collect();
    family(
        e,
        "broker_state",
        "The broker's connection state: 1 for its state, 0 for the others.",
        states,
    )?;
    family(
        e,
        "broker_connections",
        "Connections to the broker alive now.",
        gauge(&|b| Some(b.connections as f64)),
    )?;
    family(
        e,
        "broker_connects",
        "Connections to the broker set up.",
        each(&|b| b.connects_total),
    )?;
    family(
        e,
        "broker_connect_failures",
        "Connection setups to the broker that failed.",
        each(&|b| b.connect_failures_total),
    )?;
    family(
        e,
        "broker_disconnects",
        "Connections to the broker closed or lost.",
        each(&|b| b.disconnects_total),
    )?;
    family(
        e,
        "broker_requests_in_flight",
        "Requests written to the broker and not answered yet.",
        gauge(&|b| Some(b.requests_in_flight as f64)),
    )?;
    family(
        e,
        "broker_requests",
        "Requests written to the broker.",
        each(&|b| b.requests_total),
    )?;
    family(
        e,
        "broker_sent_bytes",
        "Bytes written to the broker.",
        each(&|b| b.bytes_sent_total),
    )?;
    family(
        e,
        "broker_received_bytes",
        "Bytes read from the broker.",
        each(&|b| b.bytes_received_total),
    )?;
    let rtt = |f: fn(&LatencyMetrics) -> Option<std::time::Duration>| {
        gauge(&move |b| Some(f(b.request_latency.as_ref()?)?.as_secs_f64()))
    };
    family(
        e,
        "broker_request_latency_avg_seconds",
        "The broker's average answer latency, over the last 30 to 60 s.",
        rtt(|l| Some(l.avg)),
    )?;
    family(
        e,
        "broker_request_latency_max_seconds",
        "The broker's longest answer latency, over the last 30 to 60 s.",
        rtt(|l| Some(l.max)),
    )?;
    family(
        e,
        "broker_request_latency_p50_seconds",
        "Half of the broker's answers came within this, over the last 30 to 60 s.",
        rtt(|l| l.p50),
    )?;
    family(
        e,
        "broker_request_latency_p99_seconds",
        "99% of the broker's answers came within this, over the last 30 to 60 s.",
        rtt(|l| l.p99),
    )
}

/// The connection states [`BrokerMetrics::state`] takes, each a sample of
/// `lagless_consumer_broker_state`.
const BROKER_STATES: [&str; 4] = ["init", "connecting", "up", "down"];

/// One family: `# HELP`, `# TYPE` and a line for each sample; nothing without a sample.
fn family<M: EncodeMetric + TypedMetric>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    samples: Vec<(Labels, M)>,
) -> fmt::Result {
    if samples.is_empty() {
        return Ok(());
    }
    let mut metric = e.encode_descriptor(name, help, None, M::TYPE)?;
    for (labels, value) in &samples {
        value.encode(metric.encode_family(labels)?)?;
    }
    Ok(())
}

/// The one sample of a family of the consumer's or the group member's.
fn once<M>(labels: &Labels, value: M) -> Vec<(Labels, M)> {
    vec![(labels.clone(), value)]
}

/// A sample for each partition `f` knows a value of, labelled with its topic and partition.
fn per_partition<M>(
    m: &ConsumerMetrics,
    consumer: &Labels,
    f: impl Fn(&PartitionMetrics) -> Option<M>,
) -> Vec<(Labels, M)> {
    m.partitions
        .iter()
        .filter_map(|p| {
            let value = f(p)?;
            let mut labels = consumer.clone();
            labels.push(("topic", p.topic.clone()));
            labels.push(("partition", p.partition.to_string()));
            Some((labels, value))
        })
        .collect()
}

fn failing_seconds(f: &Option<Failing>) -> Option<ConstGauge<f64>> {
    f.as_ref().map(|f| ConstGauge::new(f.since.as_secs_f64()))
}

/// A count as a gauge value (the encoder takes no usize beyond i64).
fn count(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

#[cfg(test)]
#[path = "prometheus_tests.rs"]
mod tests;

#[path = "prometheus_producer.rs"]
mod producer;
