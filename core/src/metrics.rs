//! What the consumer is doing, as one snapshot: [`ConsumerMetrics`], taken by
//! [`crate::Consumer::metrics`] under the locks the consumer already has (the fetch state's, the
//! group member's), once per call. Plain data and pure functions: the lag, and the JSON
//! rendering whose field names README.md's "Metrics" section maps to librdkafka's
//! statistics and the Java client's metrics.
//!
//! A value not known yet is `None` (absent from the JSON as `null`), never a sentinel.
//!
//! [`prometheus`] renders the snapshot in the Prometheus text format.
use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{json, Value};

use crate::types::TopicPartition;
use window::millis;

/// The consumer's snapshot.
#[derive(Debug, Clone, PartialEq)]
pub struct ConsumerMetrics {
    /// `client.id` (empty when not set).
    pub client_id: String,
    /// `isolation.level=read_committed`: lag runs to the last stable offset.
    pub read_committed: bool,
    /// Records handed to the application (`poll()`, `recovery_poll()`, the async stream) since
    /// the consumer was created.
    pub records_consumed_total: u64,
    /// Key + value bytes of those records.
    pub bytes_consumed_total: u64,
    /// What the records buffered for the application weigh: key, value and headers and 64 bytes
    /// per record (what the per-partition limit `2 x max.partition.fetch.bytes` weighs).
    pub buffered_bytes: u64,
    /// Memory the fetch path holds (fetch answers, inflated batches, decoded batches, buffers
    /// kept for reuse): what `fetch.buffer.max.bytes` bounds.
    pub fetch_buffer_held_bytes: u64,
    /// `fetch.buffer.max.bytes`.
    pub fetch_buffer_max_bytes: u64,
    /// The group member, once `subscribe()` made the consumer one.
    pub group: Option<GroupMetrics>,
    /// The assigned partitions, in topic and partition order.
    pub partitions: Vec<PartitionMetrics>,
    /// `poll()`'s rhythm and the records it returned, over the last 30 to 60 s (the Java
    /// consumer's `time-between-poll-*`, `poll-idle-ratio-avg`, `last-poll-seconds-ago`,
    /// `records-consumed-rate`, `bytes-consumed-rate`).
    pub poll: PollStats,
    /// Fetch answers' latency over the last 30 to 60 s, every broker's (the Java consumer's
    /// `fetch-latency-avg`/`-max`); `None` when no answer came in that time.
    pub fetch_latency: Option<LatencyMetrics>,
    /// OffsetCommit answers' latency likewise (`commit-latency-avg`/`-max`).
    pub commit_latency: Option<LatencyMetrics>,
    /// The brokers the consumer talks or tried to talk to, bootstrap servers first, then by
    /// node id.
    pub brokers: Vec<BrokerMetrics>,
}

/// The producer's snapshot: [`crate::Producer::metrics`].
#[derive(Debug, Clone, PartialEq)]
pub struct ProducerMetrics {
    /// `client.id` (empty when not set).
    pub client_id: String,
    /// `transactional.id`, for a transactional producer.
    pub transactional_id: Option<String>,
    /// Records the brokers acknowledged since the producer was created.
    pub records_sent_total: u64,
    /// Records whose delivery failed (their callback or `Delivery` got the error).
    pub records_failed_total: u64,
    /// Batches the brokers acknowledged.
    pub batches_sent_total: u64,
    /// Batches put back for another attempt after a retriable error.
    pub batch_retries_total: u64,
    /// Records acknowledged per second, over the last 30 to 60 s (`record-send-rate`).
    pub record_send_rate: f64,
    /// Records failed per second, likewise (`record-error-rate`).
    pub record_error_rate: f64,
    /// Records sent and not completed yet (what `flush()` waits for).
    pub records_outstanding: u64,
    /// What those records weigh against `buffer.memory`.
    pub buffered_bytes: u64,
    /// `buffer.memory`.
    pub buffer_memory: u64,
    /// Produce answers' latency over the last 30 to 60 s, every broker's (`request-latency`
    /// of the Produce requests); `None` when none came in that time.
    pub produce_latency: Option<LatencyMetrics>,
    /// The brokers the producer talks or tried to talk to.
    pub brokers: Vec<BrokerMetrics>,
}

impl ProducerMetrics {
    /// The snapshot as JSON (README.md's "Metrics" section names each field).
    pub fn to_json(&self) -> Value {
        json!({
            "type": "producer",
            "client_id": self.client_id,
            "transactional_id": self.transactional_id,
            "records_sent_total": self.records_sent_total,
            "records_failed_total": self.records_failed_total,
            "batches_sent_total": self.batches_sent_total,
            "batch_retries_total": self.batch_retries_total,
            "record_send_rate": self.record_send_rate,
            "record_error_rate": self.record_error_rate,
            "records_outstanding": self.records_outstanding,
            "buffered_bytes": self.buffered_bytes,
            "buffer_memory": self.buffer_memory,
            "produce_latency": self.produce_latency.as_ref().map(LatencyMetrics::to_json),
            "brokers": self.brokers.iter().map(BrokerMetrics::to_json).collect::<Vec<_>>(),
        })
    }

    /// [`ProducerMetrics::to_json`] as a string.
    pub fn to_json_string(&self) -> String {
        self.to_json().to_string()
    }
}

/// One broker: its connections (one per lane: fetches, the group coordinator's requests,
/// joins, recovery fetches), over their whole life unless said otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct BrokerMetrics {
    /// The broker's node id; `None` for a bootstrap server, known by its address only.
    pub node_id: Option<i32>,
    /// `host:port`.
    pub address: String,
    /// `up` (a connection is alive), `connecting` (none is, a setup is under way), `down` (none
    /// is, and the last setup failed or the last connection was lost), `init` (never tried).
    pub state: &'static str,
    /// Connections alive now.
    pub connections: usize,
    /// Connections set up (TCP, TLS, versions and SASL done).
    pub connects_total: u64,
    /// Connection setups that failed.
    pub connect_failures_total: u64,
    /// Connections closed or lost: every connection set up but the ones alive now.
    pub disconnects_total: u64,
    /// Requests written and not answered yet.
    pub requests_in_flight: usize,
    /// Requests written (the connection setup's own, ApiVersions and SASL, not counted).
    pub requests_total: u64,
    /// Bytes written to the broker.
    pub bytes_sent_total: u64,
    /// Bytes read from the broker.
    pub bytes_received_total: u64,
    /// Answer latency over the last 30 to 60 s, from a request being queued to its answer
    /// read (a Fetch waiting at the log end included, as in librdkafka's `rtt`); `None` when no
    /// answer came in that time.
    pub request_latency: Option<LatencyMetrics>,
}

/// Latencies over a window: how many, their average, the largest, and two percentiles (kept to
/// within 19%: a histogram of four buckets per doubling; `None` where not kept).
#[derive(Debug, Clone, PartialEq)]
pub struct LatencyMetrics {
    /// Answers counted.
    pub count: u64,
    /// Their average.
    pub avg: Duration,
    /// The longest.
    pub max: Duration,
    /// Half were at most this long.
    pub p50: Option<Duration>,
    /// 99% were at most this long.
    pub p99: Option<Duration>,
}

impl LatencyMetrics {
    /// The latencies of `w` (milliseconds), `None` when it holds none.
    pub fn of(w: &window::Window) -> Option<LatencyMetrics> {
        Some(LatencyMetrics {
            count: w.count,
            avg: window::from_millis(w.avg()?),
            max: window::from_millis(w.max()?),
            p50: w.percentile(0.5).map(window::from_millis),
            p99: w.percentile(0.99).map(window::from_millis),
        })
    }

    fn to_json(&self) -> Value {
        json!({
            "count": self.count,
            "avg_ms": millis(self.avg),
            "max_ms": millis(self.max),
            "p50_ms": self.p50.map(millis),
            "p99_ms": self.p99.map(millis),
        })
    }
}

impl BrokerMetrics {
    fn to_json(&self) -> Value {
        json!({
            "node_id": self.node_id,
            "address": self.address,
            "state": self.state,
            "connections": self.connections,
            "connects": self.connects_total,
            "connect_failures": self.connect_failures_total,
            "disconnects": self.disconnects_total,
            "requests_in_flight": self.requests_in_flight,
            "requests": self.requests_total,
            "bytes_sent": self.bytes_sent_total,
            "bytes_received": self.bytes_received_total,
            "rtt": self.request_latency.as_ref().map(LatencyMetrics::to_json),
        })
    }
}

/// One assigned partition.
#[derive(Debug, Clone, PartialEq)]
pub struct PartitionMetrics {
    /// The partition's topic.
    pub topic: String,
    /// The partition's index.
    pub partition: i32,
    /// The offset of the next record `poll()` returns (`None` before the position lookup).
    pub position: Option<i64>,
    /// The group's committed offset as this consumer last knew it: what the position lookup
    /// fetched, or what a commit of this consumer had taken (`None`: none known).
    pub committed_offset: Option<i64>,
    /// The high watermark the last fetch answer named (`None` before the first).
    pub high_watermark: Option<i64>,
    /// The last stable offset the last fetch answer named (`None` before the first).
    pub last_stable_offset: Option<i64>,
    /// The log start offset the last fetch answer named (`None` before the first).
    pub log_start_offset: Option<i64>,
    /// [`lag`]: the end offset (the high watermark, or the last stable offset under
    /// read_committed) minus the position.
    pub lag: Option<i64>,
    /// Records handed to the application from this partition since it was assigned.
    pub records_consumed: u64,
    /// Key + value bytes of those records.
    pub bytes_consumed: u64,
    /// Paused by `pause()`.
    pub paused: bool,
    /// Fetches (and position lookups) of the partition that failed since it was assigned, the
    /// recovery stream's included: every failed attempt, an error answer or a lost request.
    pub fetch_errors: u64,
    /// KIP-572: the main stream's last attempt failed and nothing moved it on since; how long
    /// since its last progress, and the last error.
    pub failing: Option<Failing>,
    /// KIP-333 (`enable.parallel.rebalance`): the recovery stream draining a backlog, while one
    /// does.
    pub recovery: Option<RecoveryMetrics>,
}

/// A KIP-572 task (a stream) that is failing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failing {
    /// Time since the stream last made progress.
    pub since: Duration,
    /// The stream's last error, where one was kept.
    pub last_error: Option<String>,
}

/// A partition's recovery stream.
#[derive(Debug, Clone, PartialEq)]
pub struct RecoveryMetrics {
    /// Offsets left in the backlog ranges (records, control batches and compacted-away offsets
    /// alike: an upper bound of the records left).
    pub backlog: i64,
    /// Offsets of the backlog drained per second (records delivered, and offsets passed without
    /// a record: control batches, compaction), over the last 30 to 60 s as
    /// `records_consumed_rate`; 0 before any drained. `backlog / drain_rate` is how long the
    /// rest takes at that pace.
    pub drain_rate: f64,
    /// KIP-572: the recovery stream is failing (a task of its own).
    pub failing: Option<Failing>,
}

/// The group member.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetrics {
    /// `group.id`.
    pub group_id: String,
    /// Where the member is in the join protocol: `unjoined`, `preparing_rebalance`,
    /// `completing_rebalance`, `stable`.
    pub state: &'static str,
    /// `None` while the member is in no generation.
    pub generation_id: Option<i32>,
    /// `None` before the coordinator gave one.
    pub member_id: Option<String>,
    /// `group.instance.id` (KIP-345).
    pub group_instance_id: Option<String>,
    /// `group.protocol`: `classic` or `consumer`.
    pub protocol: &'static str,
    /// The assignor the group chose (classic protocol), once joined.
    pub assignor: Option<String>,
    /// The partitions the member owns.
    pub assigned_partitions: usize,
    /// Rebalances this member completed: joins whose assignment it applied.
    pub rebalance_count: u64,
    /// Why the last completed rebalance was started, and how long it took from the start of its
    /// join to its assignment being applied (`None` before the first).
    pub last_rebalance: Option<LastRebalance>,
    /// Why the rebalance under way or asked for was asked for (`None` when none is).
    pub rejoin_reason: Option<String>,
    /// Since the last completed rebalance (`None` before the first).
    pub since_last_rebalance: Option<Duration>,
    /// Since the group coordinator last answered a heartbeat, whatever the answer (`None`
    /// before the first answer): a member whose coordinator went quiet shows it growing
    /// towards `session.timeout.ms`.
    pub since_last_heartbeat_answer: Option<Duration>,
    /// The completed rebalances' average and longest duration over the last 30 to 60 s (`None`
    /// when none completed in that time).
    pub rebalance_latency_avg: Option<Duration>,
    /// See [`GroupMetrics::rebalance_latency_avg`].
    pub rebalance_latency_max: Option<Duration>,
    /// KIP-62: time since `max.poll.interval.ms`'s timer was last restarted (by `poll()`, or by
    /// `subscribe()` before the first).
    pub since_last_poll: Duration,
    /// `max.poll.interval.ms`.
    pub max_poll_interval: Duration,
    /// Learner assignments (`learner-sticky`): the partitions this member learns (warms up for
    /// before the group moves them here), in topic and partition order; empty otherwise.
    pub learning: Vec<LearnerPartition>,
    /// Learned partitions a join then gave this member to own (promoted), since it was created.
    /// A promoted partition leaves [`GroupMetrics::learning`] and counts in
    /// [`GroupMetrics::assigned_partitions`].
    pub learned_promoted: u64,
}

/// A partition the group member learns (learner assignments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LearnerPartition {
    /// The partition's topic.
    pub topic: String,
    /// The partition's index.
    pub partition: i32,
    /// `warming`: its `on_partitions_learning` has not returned yet, failed and waits to be
    /// called again, or (`learner.readiness=explicit`) `learner_ready()` has not named it yet;
    /// `ready`: warmed up, waiting for the group to hand it over (the member's joins say so).
    pub state: &'static str,
}

impl LearnerPartition {
    /// The partitions of `learning`, each `ready` when in `ready`, else `warming`.
    pub(crate) fn of(
        learning: &BTreeSet<TopicPartition>,
        ready: &BTreeSet<TopicPartition>,
    ) -> Vec<LearnerPartition> {
        learning
            .iter()
            .map(|tp| LearnerPartition {
                topic: tp.topic.clone(),
                partition: tp.partition,
                state: if ready.contains(tp) {
                    "ready"
                } else {
                    "warming"
                },
            })
            .collect()
    }
}

/// The last rebalance a member completed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LastRebalance {
    /// Why it was started (the rejoin reason its first join was sent with).
    pub reason: String,
    /// From the start of its first join to its assignment being applied.
    pub duration: Duration,
}

/// A partition's lag: from `position` to the end offset: the last stable offset under
/// read_committed, else the high watermark. `None` while either is unknown. Not clamped: a
/// position sought past the end gives a negative lag until the end moves past it.
pub fn lag(
    position: Option<i64>,
    high_watermark: Option<i64>,
    last_stable_offset: Option<i64>,
    read_committed: bool,
) -> Option<i64> {
    let end = if read_committed {
        last_stable_offset
    } else {
        high_watermark
    }?;
    Some(end - position?)
}

/// A broker's offset field as a known value: -1 (and any negative) is "none named".
pub(crate) fn known(offset: i64) -> Option<i64> {
    (offset >= 0).then_some(offset)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn failing_json(f: &Option<Failing>) -> (Value, Value) {
    match f {
        Some(f) => (json!(ms(f.since)), json!(f.last_error)),
        None => (Value::Null, Value::Null),
    }
}

impl PartitionMetrics {
    /// The lead: the position minus the log start offset, how far the position is from falling
    /// off the log's start (the Java consumer's `records-lead`); `None` while either is unknown.
    pub fn lead(&self) -> Option<i64> {
        Some(self.position? - self.log_start_offset?)
    }

    fn to_json(&self) -> Value {
        let (failing_ms, last_error) = failing_json(&self.failing);
        let recovery = self.recovery.as_ref().map(|r| {
            let (failing_ms, last_error) = failing_json(&r.failing);
            json!({
                "backlog": r.backlog,
                "drain_rate": r.drain_rate,
                "failing_for_ms": failing_ms,
                "last_error": last_error,
            })
        });
        json!({
            "topic": self.topic,
            "partition": self.partition,
            "position": self.position,
            "committed_offset": self.committed_offset,
            "hi_offset": self.high_watermark,
            "ls_offset": self.last_stable_offset,
            "lo_offset": self.log_start_offset,
            "consumer_lag": self.lag,
            "records_consumed": self.records_consumed,
            "bytes_consumed": self.bytes_consumed,
            "paused": self.paused,
            "fetch_errors": self.fetch_errors,
            "failing_for_ms": failing_ms,
            "last_error": last_error,
            "recovery": recovery,
        })
    }
}

impl GroupMetrics {
    fn to_json(&self) -> Value {
        json!({
            "group_id": self.group_id,
            "state": self.state,
            "generation_id": self.generation_id,
            "member_id": self.member_id,
            "group_instance_id": self.group_instance_id,
            "protocol": self.protocol,
            "assignor": self.assignor,
            "assigned_partitions": self.assigned_partitions,
            "rebalance_cnt": self.rebalance_count,
            "rebalance_reason": self.last_rebalance.as_ref().map(|r| &r.reason),
            "rebalance_duration_ms": self.last_rebalance.as_ref().map(|r| ms(r.duration)),
            "rejoin_reason": self.rejoin_reason,
            "last_rebalance_seconds_ago": self.since_last_rebalance.map(|d| d.as_secs_f64()),
            "last_heartbeat_answer_seconds_ago": self.since_last_heartbeat_answer.map(|d| d.as_secs_f64()),
            "rebalance_latency_avg_ms": self.rebalance_latency_avg.map(millis),
            "rebalance_latency_max_ms": self.rebalance_latency_max.map(millis),
            "last_poll_ms_ago": ms(self.since_last_poll),
            "max_poll_interval_ms": ms(self.max_poll_interval),
            "learning": self
                .learning
                .iter()
                .map(|l| json!({"topic": l.topic, "partition": l.partition, "state": l.state}))
                .collect::<Vec<_>>(),
            "learned_promoted": self.learned_promoted,
        })
    }
}

impl ConsumerMetrics {
    /// The snapshot as JSON (README.md's "Metrics" section names each field).
    pub fn to_json(&self) -> Value {
        json!({
            "type": "consumer",
            "client_id": self.client_id,
            "isolation_level": if self.read_committed { "read_committed" } else { "read_uncommitted" },
            "records_consumed_total": self.records_consumed_total,
            "bytes_consumed_total": self.bytes_consumed_total,
            "buffered_bytes": self.buffered_bytes,
            "fetch_buffer_held_bytes": self.fetch_buffer_held_bytes,
            "fetch_buffer_max_bytes": self.fetch_buffer_max_bytes,
            "assigned_partitions": self.partitions.len(),
            "records_lag_max": self.records_lag_max(),
            "records_lead_min": self.records_lead_min(),
            "group": self.group.as_ref().map(GroupMetrics::to_json),
            "partitions": self.partitions.iter().map(PartitionMetrics::to_json).collect::<Vec<_>>(),
            "last_poll_seconds_ago": self.poll.since_last_poll.map(|d| d.as_secs_f64()),
            "time_between_poll_avg_ms": self.poll.time_between_poll_avg.map(millis),
            "time_between_poll_max_ms": self.poll.time_between_poll_max.map(millis),
            "poll_idle_ratio_avg": self.poll.poll_idle_ratio_avg,
            "records_consumed_rate": self.poll.records_consumed_rate,
            "bytes_consumed_rate": self.poll.bytes_consumed_rate,
            "fetch_latency": self.fetch_latency.as_ref().map(LatencyMetrics::to_json),
            "commit_latency": self.commit_latency.as_ref().map(LatencyMetrics::to_json),
            "brokers": self.brokers.iter().map(BrokerMetrics::to_json).collect::<Vec<_>>(),
        })
    }

    /// [`ConsumerMetrics::to_json`] as a string.
    pub fn to_json_string(&self) -> String {
        self.to_json().to_string()
    }

    /// The largest lag of the partitions whose lag is known, now (the Java consumer's
    /// `records-lag-max` is the largest seen in its window).
    pub fn records_lag_max(&self) -> Option<i64> {
        self.partitions.iter().filter_map(|p| p.lag).max()
    }

    /// The smallest lead (position minus log start offset: how far the position is from falling
    /// off the log's start) of the partitions where both are known, now (`records-lead-min`).
    pub fn records_lead_min(&self) -> Option<i64> {
        self.partitions
            .iter()
            .filter_map(PartitionMetrics::lead)
            .min()
    }
}

pub(crate) mod callbacks;
#[cfg(test)]
pub(crate) mod fixtures;
pub mod otel;
pub mod prometheus;
pub mod window;

pub use window::PollStats;

#[cfg(test)]
#[path = "metrics_tests.rs"]
mod tests;
