//! [`Consumer::metrics`]: the snapshot read from the state the consumer already keeps, under the
//! locks it already has (the fetch state's once, the group member's once), no counter of its
//! own on the record path. The data types and the rendering are in [`crate::metrics`].
use std::sync::Mutex;
use std::time::Instant;

use crate::config::{GroupProtocolKind, IsolationLevel};
use crate::consumer::{Consumer, GroupLocal};
use crate::fetch::Shared;
use crate::fetch::{PartitionState, Stream};
use crate::group::member::MemberState;
use crate::metrics::window::{from_millis, PollTimes};
use crate::metrics::{
    known, lag, ConsumerMetrics, Failing, GroupMetrics, LastRebalance, LatencyMetrics,
    LearnerPartition, PartitionMetrics, RecoveryMetrics,
};
use crate::sync::Unpoisoned;
use crate::types::TopicPartition;

impl Consumer {
    /// What the consumer is doing now: each assigned partition's position, committed offset,
    /// watermarks, lag and deliveries, the group member's state and rebalances, and the totals.
    /// Cheap: one look under the fetch lock and one at the group member's published view.
    pub fn metrics(&self) -> ConsumerMetrics {
        snapshot(&self.shared, &self.group, &self.poll_times)
    }
}

/// [`Consumer::metrics`] from the parts of the consumer it reads: also what the client telemetry
/// task takes (it holds these parts, not the consumer).
pub(crate) fn snapshot(
    shared: &Shared,
    group: &Mutex<Option<GroupLocal>>,
    poll_times: &Mutex<PollTimes>,
) -> ConsumerMetrics {
    let config = &shared.config;
    let read_committed = config.isolation_level == IsolationLevel::ReadCommitted;
    let now = Instant::now();
    let group = group_metrics(shared, group, now);
    let st = shared.lock();
    let (records, bytes) = st.delivered_total();
    let partitions = st
        .partitions()
        .map(|(tp, p)| partition_metrics(tp, p, read_committed, now))
        .collect();
    let buffered_bytes = st.buffered_bytes() as u64;
    drop(st);
    let poll = poll_times.lock().unpoisoned().stats(now);
    let brokers = shared.cluster.broker_metrics(now);
    ConsumerMetrics {
        client_id: config.common.client_id.clone(),
        read_committed,
        records_consumed_total: records,
        bytes_consumed_total: bytes,
        buffered_bytes,
        fetch_buffer_held_bytes: shared.buffers.ledger.held() as u64,
        fetch_buffer_max_bytes: config.fetch_buffer_max_bytes as u64,
        group,
        partitions,
        poll,
        fetch_latency: LatencyMetrics::of(&brokers.fetch_latency),
        commit_latency: LatencyMetrics::of(&brokers.commit_latency),
        brokers: brokers.brokers,
    }
}

fn group_metrics(
    shared: &Shared,
    group: &Mutex<Option<GroupLocal>>,
    now: Instant,
) -> Option<GroupMetrics> {
    let driver = group.lock().unpoisoned().as_ref()?.driver.clone();
    let config = &shared.config;
    let since_last_poll = driver
        .last_poll()
        .map_or_else(Default::default, |t| now.saturating_duration_since(t));
    let since_last_heartbeat_answer = driver
        .last_heartbeat_answer()
        .map(|t| now.saturating_duration_since(t));
    // Everything from one view, which the member's owner publishes whole after each change,
    // so the count of partitions and the generation they were assigned in belong together.
    Some(driver.read_view(|m| {
        let generation = &m.generation;
        let latency = m.rebalances.latency.live(now);
        let rebalancing = m.rejoin_needed || m.state != MemberState::Stable;
        GroupMetrics {
            group_id: driver.group_id.clone(),
            state: member_state_name(m.state),
            generation_id: (generation.generation_id >= 0).then_some(generation.generation_id),
            member_id: (!generation.member_id.is_empty()).then(|| generation.member_id.clone()),
            group_instance_id: config.group_instance_id.clone(),
            protocol: match config.group_protocol {
                GroupProtocolKind::Classic => "classic",
                GroupProtocolKind::Consumer => "consumer",
            },
            assignor: generation.protocol.clone(),
            assigned_partitions: m.owned.len(),
            rebalance_count: m.rebalances.completed,
            last_rebalance: m
                .rebalances
                .last
                .as_ref()
                .map(|(reason, duration)| LastRebalance {
                    reason: reason.clone(),
                    duration: *duration,
                }),
            rejoin_reason: (rebalancing && !m.rejoin_reason.is_empty())
                .then(|| m.rejoin_reason.clone()),
            since_last_rebalance: m
                .rebalances
                .last_completed_at
                .map(|t| now.saturating_duration_since(t)),
            since_last_heartbeat_answer,
            rebalance_latency_avg: latency.avg().map(from_millis),
            rebalance_latency_max: latency.max().map(from_millis),
            since_last_poll,
            max_poll_interval: config.max_poll_interval,
            learning: LearnerPartition::of(&m.learning, &m.ready),
            learned_promoted: m.rebalances.learned_owned,
        }
    }))
}

#[cfg(feature = "unstable-fuzzing")]
impl Consumer {
    /// How many turns the fetch task has planned since the consumer was created: each one a walk
    /// over every assigned partition. For the integration tests that bound an idle consumer's
    /// wake-ups; no stability promise.
    #[doc(hidden)]
    pub fn fetch_plan_passes(&self) -> u64 {
        self.shared.lock().plan_passes()
    }
}

/// The member's state as the metrics name it.
pub(crate) fn member_state_name(state: MemberState) -> &'static str {
    match state {
        MemberState::Unjoined => "unjoined",
        MemberState::PreparingRebalance => "preparing_rebalance",
        MemberState::CompletingRebalance => "completing_rebalance",
        MemberState::Stable => "stable",
    }
}

/// A stream that is failing (KIP-572): since its last progress, with its last error.
fn failing(s: &Stream, now: Instant) -> Option<Failing> {
    s.failing.then(|| Failing {
        since: now.saturating_duration_since(s.last_progress),
        last_error: s.last_error.clone(),
    })
}

fn partition_metrics(
    tp: &TopicPartition,
    p: &PartitionState,
    read_committed: bool,
    now: Instant,
) -> PartitionMetrics {
    let high_watermark = known(p.high_watermark);
    let last_stable_offset = known(p.last_stable_offset);
    PartitionMetrics {
        topic: tp.topic.clone(),
        partition: tp.partition,
        position: p.position,
        committed_offset: p.committed_offset,
        high_watermark,
        last_stable_offset,
        log_start_offset: known(p.log_start_offset),
        lag: lag(
            p.position,
            high_watermark,
            last_stable_offset,
            read_committed,
        ),
        records_consumed: p.records_delivered,
        bytes_consumed: p.bytes_delivered,
        paused: p.paused,
        fetch_errors: p.main.errors + p.recovery.as_ref().map_or(0, |r| r.stream.errors),
        failing: failing(&p.main, now),
        recovery: p.recovery.as_ref().map(|r| RecoveryMetrics {
            backlog: r.backlog(),
            drain_rate: r.drain_rate(now),
            failing: failing(&r.stream, now),
        }),
    }
}
