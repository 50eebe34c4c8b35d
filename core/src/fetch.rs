//! Fetching: per-partition cursors, one fetch in flight per leader broker (all leaders at once),
//! and a prefetch buffer bounded in bytes.
//!
//! A partition is a task (KIP-572): a partition whose leader is unknown or whose fetches fail is
//! backed off on its own while the others keep flowing, and only after `task.timeout.ms` without
//! progress is it reported through `poll()`.
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::backoff::{Backoff, Deadline, Retry};
use crate::cluster::Cluster;
use crate::config::{AutoOffsetReset, ConsumerConfig};
use crate::error::{codes, kafka_error_action, Action, Error, ErrorPartition, Result};
use crate::offsets;
use crate::protocol::msg::fetch_request::{FetchPartition, FetchTopic};
use crate::protocol::msg::{BrokerId, FetchRequest, StrBytes, TopicName};
use crate::protocol::records::{decode_batches, Record};
use crate::TopicPartition;

/// How a partition without a position gets one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PositionLookup {
    /// The group's committed offset, else `auto.offset.reset`.
    Committed,
    /// `auto.offset.reset` alone (no group, or the offset was out of range).
    ResetPolicy,
    Earliest,
    Latest,
}

pub(crate) struct PartitionState {
    pub topic: Arc<str>,
    /// The offset of the next record `poll()` returns (the consumer position).
    pub position: Option<i64>,
    /// The next offset to fetch: `position` plus what is buffered.
    pub fetch_offset: Option<i64>,
    pub lookup: Option<PositionLookup>,
    /// Set while a position lookup for this partition is running.
    pub lookup_in_flight: bool,
    pub paused: bool,
    pub buffer: VecDeque<Record>,
    pub buffered_bytes: usize,
    pub in_flight: bool,
    /// Bumped by seek/reset: a fetch or lookup answer for an older cursor is dropped.
    pub cursor: u64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    pub retry: Retry,
    pub next_attempt: Instant,
    /// First failure since the last progress (KIP-572's task deadline starts here).
    pub failing_since: Option<Instant>,
    pub last_error: Option<String>,
    pub stuck_reported_at: Option<Instant>,
    /// The whole first batch did not fit `max.partition.fetch.bytes`: put this partition first in
    /// the next request, where the broker returns at least one whole batch (KIP-74).
    pub oversized: bool,
}

impl PartitionState {
    pub fn new(topic: &str, lookup: PositionLookup, backoff: Backoff) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            position: None,
            fetch_offset: None,
            lookup: Some(lookup),
            lookup_in_flight: false,
            paused: false,
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            in_flight: false,
            cursor: 0,
            high_watermark: -1,
            log_start_offset: -1,
            retry: Retry::new(backoff),
            next_attempt: Instant::now(),
            failing_since: None,
            last_error: None,
            stuck_reported_at: None,
            oversized: false,
        }
    }

    /// Moves the cursor: drops what is buffered and any answer in flight.
    pub fn seek(&mut self, offset: i64) -> usize {
        let freed = self.clear_buffer();
        self.position = Some(offset);
        self.fetch_offset = Some(offset);
        self.lookup = None;
        self.cursor += 1;
        self.failing_since = None;
        freed
    }

    pub fn reset(&mut self, lookup: PositionLookup) -> usize {
        let freed = self.clear_buffer();
        self.position = None;
        self.fetch_offset = None;
        self.lookup = Some(lookup);
        self.cursor += 1;
        freed
    }

    fn clear_buffer(&mut self) -> usize {
        self.buffer.clear();
        std::mem::take(&mut self.buffered_bytes)
    }

    fn failed(&mut self, why: String, backoff_wait: bool) {
        let now = Instant::now();
        self.failing_since.get_or_insert(now);
        self.last_error = Some(why);
        if backoff_wait {
            self.next_attempt = now + self.retry.failed();
        }
    }

    fn progressed(&mut self) {
        self.failing_since = None;
        self.stuck_reported_at = None;
        self.last_error = None;
        self.retry.succeeded();
    }
}

/// Approximate memory a record holds in the prefetch buffer.
pub(crate) fn record_size(r: &Record) -> usize {
    64 + r.key.as_ref().map_or(0, |k| k.len())
        + r.value.as_ref().map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

/// What the user's thread and the fetch task share.
pub(crate) struct FetchState {
    pub partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Errors waiting to come out of `poll()`.
    pub errors: VecDeque<Error>,
    pub buffered_bytes: usize,
    pub wakeup: bool,
    pub closed: bool,
    /// Topics already reported unknown, so the error comes once, not on every loop.
    pub reported_unknown: HashSet<String>,
    /// Where the next `poll()` starts, for fairness across partitions.
    pub rotation: usize,
}

pub(crate) struct Shared {
    pub state: Mutex<FetchState>,
    /// Signalled when records or errors arrive, or on wakeup: `poll()` waits on it.
    pub data_ready: Condvar,
    /// Signalled when the user changes what to fetch: the fetch task waits on it.
    pub changed: Notify,
    pub cluster: Arc<Cluster>,
    pub config: ConsumerConfig,
}

impl Shared {
    pub fn new(cluster: Arc<Cluster>, config: ConsumerConfig) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(FetchState {
                partitions: BTreeMap::new(),
                errors: VecDeque::new(),
                buffered_bytes: 0,
                wakeup: false,
                closed: false,
                reported_unknown: HashSet::new(),
                rotation: 0,
            }),
            data_ready: Condvar::new(),
            changed: Notify::new(),
            cluster,
            config,
        })
    }

    /// Starts fetching `partitions` (kept ones keep their positions); new ones find their
    /// position with `lookup`.
    pub fn add_partitions<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
        lookup: PositionLookup,
    ) {
        let backoff = self.backoff();
        let mut st = self.lock();
        for tp in partitions {
            if !st.partitions.contains_key(tp) {
                st.partitions
                    .insert(tp.clone(), PartitionState::new(&tp.topic, lookup, backoff));
            }
        }
        drop(st);
        self.changed.notify_one();
    }

    /// Stops fetching `partitions` and drops what is buffered for them.
    pub fn remove_partitions<'a>(&self, partitions: impl IntoIterator<Item = &'a TopicPartition>) {
        let mut st = self.lock();
        for tp in partitions {
            if let Some(p) = st.partitions.remove(tp) {
                st.buffered_bytes -= p.buffered_bytes;
            }
        }
    }

    /// The consumed positions of `partitions` (those that have one).
    pub fn positions<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Vec<(TopicPartition, i64)> {
        let st = self.lock();
        partitions
            .into_iter()
            .filter_map(|tp| {
                st.partitions
                    .get(tp)
                    .and_then(|p| p.position)
                    .map(|pos| (tp.clone(), pos))
            })
            .collect()
    }

    pub fn lock(&self) -> MutexGuard<'_, FetchState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn backoff(&self) -> Backoff {
        self.cluster.backoff()
    }

    fn push_error(&self, st: &mut FetchState, e: Error) {
        tracing::warn!(error = %e, "reporting through poll()");
        st.errors.push_back(e);
        self.data_ready.notify_all();
    }
}

/// (partition, fetch offset, cursor, leader epoch, oversized first batch)
type FetchCandidate = (TopicPartition, i64, u64, i32, bool);

struct FetchPlan {
    broker: i32,
    /// (partition, fetch offset, cursor)
    partitions: Vec<(TopicPartition, i64, u64)>,
    request: FetchRequest,
}

enum TaskDone {
    Fetch {
        plan_broker: i32,
        partitions: Vec<(TopicPartition, i64, u64)>,
        result: Result<crate::protocol::msg::FetchResponse>,
    },
    Lookup(
        Vec<(TopicPartition, u64)>,
        Result<Vec<(TopicPartition, LookupOutcome)>>,
    ),
    Metadata(Result<()>),
}

pub(crate) enum LookupOutcome {
    Position(i64),
    NoOffset,
    Failed(Error),
}

/// The fetch task: runs until the consumer closes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tasks: JoinSet<TaskDone> = JoinSet::new();
    let mut busy_brokers: HashSet<i32> = HashSet::new();
    let mut metadata_in_flight = false;
    let mut lookup_in_flight = false;
    let mut metadata_wanted = true;
    let mut next_metadata = Instant::now();
    let mut metadata_retry = Retry::new(shared.backoff());
    loop {
        let meta = shared.cluster.metadata();
        let mut plans: Vec<FetchPlan> = Vec::new();
        let mut lookups: Vec<(TopicPartition, PositionLookup, u64)> = Vec::new();
        {
            let mut st = shared.lock();
            if st.closed {
                break;
            }
            let now = Instant::now();
            let buffer_full = st.buffered_bytes >= shared.config.fetch_buffer_max_bytes;
            let mut per_broker: BTreeMap<i32, Vec<FetchCandidate>> = BTreeMap::new();
            let mut unknown_topics: Vec<String> = Vec::new();
            let mut stuck: Vec<Error> = Vec::new();
            for (tp, p) in st.partitions.iter_mut() {
                // KIP-572: report a partition that made no progress for task.timeout.ms.
                if let Some(since) = p.failing_since {
                    let due = p.stuck_reported_at.map_or(since, |t| t)
                        + shared.config.common.task_timeout;
                    if now >= due {
                        p.stuck_reported_at = Some(now);
                        stuck.push(Error::PartitionStuck {
                            partition: ErrorPartition {
                                topic: tp.topic.clone(),
                                partition: tp.partition,
                            },
                            cause: p.last_error.clone().unwrap_or_else(|| "no progress".into()),
                        });
                    }
                }
                if let Some(l) = p.lookup {
                    if !p.lookup_in_flight && now >= p.next_attempt {
                        lookups.push((tp.clone(), l, p.cursor));
                    }
                    continue;
                }
                let Some(offset) = p.fetch_offset else {
                    continue;
                };
                if p.paused || p.in_flight || now < p.next_attempt {
                    continue;
                }
                if buffer_full
                    || p.buffered_bytes >= 2 * shared.config.max_partition_fetch_bytes as usize
                {
                    continue;
                }
                match meta.topics.get(&tp.topic) {
                    None => {
                        metadata_wanted = true;
                        continue;
                    }
                    Some(t) if t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION => {
                        unknown_topics.push(tp.topic.clone());
                        p.failed(format!("topic `{}` does not exist", tp.topic), true);
                        metadata_wanted = true;
                        continue;
                    }
                    Some(_) => {}
                }
                match meta.partition(&tp.topic, tp.partition) {
                    Some(info) if info.leader >= 0 => {
                        per_broker.entry(info.leader).or_default().push((
                            tp.clone(),
                            offset,
                            p.cursor,
                            info.leader_epoch,
                            p.oversized,
                        ));
                    }
                    Some(_) => {
                        p.failed(format!("{}-{} has no leader", tp.topic, tp.partition), true);
                        metadata_wanted = true;
                    }
                    None => {
                        p.failed(
                            format!(
                                "{}-{} is not in the cluster metadata",
                                tp.topic, tp.partition
                            ),
                            true,
                        );
                        metadata_wanted = true;
                    }
                }
            }
            for e in stuck {
                shared.push_error(&mut st, e);
            }
            for t in unknown_topics {
                if st.reported_unknown.insert(t.clone()) {
                    shared.push_error(&mut st, Error::UnknownTopic(t));
                }
            }
            for (broker, mut parts) in per_broker {
                if busy_brokers.contains(&broker) {
                    continue;
                }
                // Partitions whose first batch was too large go first (KIP-74).
                parts.sort_by_key(|p| !p.4);
                for (tp, _, _, _, _) in &parts {
                    if let Some(p) = st.partitions.get_mut(tp) {
                        p.in_flight = true;
                    }
                }
                plans.push(build_fetch(&shared.config, broker, parts));
            }
            if !lookup_in_flight && !lookups.is_empty() {
                for (tp, _, _) in &lookups {
                    if let Some(p) = st.partitions.get_mut(tp) {
                        p.lookup_in_flight = true;
                    }
                }
            }
        }

        for plan in plans {
            busy_brokers.insert(plan.broker);
            let shared2 = shared.clone();
            tasks.spawn(async move {
                let timeout = shared2.config.common.request_timeout + shared2.config.fetch_max_wait;
                let deadline = Deadline::after(timeout);
                let result = async {
                    let conn = shared2.cluster.broker(plan.broker, deadline).await?;
                    conn.call_with_timeout(&plan.request, timeout).await
                }
                .await;
                TaskDone::Fetch {
                    plan_broker: plan.broker,
                    partitions: plan.partitions,
                    result,
                }
            });
        }
        if !lookup_in_flight && !lookups.is_empty() {
            lookup_in_flight = true;
            let shared2 = shared.clone();
            tasks.spawn(async move {
                let keys: Vec<(TopicPartition, u64)> =
                    lookups.iter().map(|(tp, _, c)| (tp.clone(), *c)).collect();
                let result = offsets::lookup_positions(&shared2, &lookups).await;
                TaskDone::Lookup(keys, result)
            });
        }
        let age_due = meta
            .fetched_at
            .is_none_or(|t| t.elapsed() >= shared.config.common.metadata_max_age);
        if (metadata_wanted || age_due) && !metadata_in_flight && Instant::now() >= next_metadata {
            metadata_in_flight = true;
            metadata_wanted = false;
            let shared2 = shared.clone();
            tasks.spawn(async move {
                let deadline = Deadline::after(shared2.config.common.request_timeout);
                TaskDone::Metadata(shared2.cluster.refresh(&[], deadline).await.map(|_| ()))
            });
        }

        let done = tokio::select! {
            Some(done) = tasks.join_next(), if !tasks.is_empty() => done.ok(),
            _ = shared.changed.notified() => None,
            _ = tokio::time::sleep(Duration::from_millis(50)) => None,
        };
        match done {
            Some(TaskDone::Fetch {
                plan_broker,
                partitions,
                result,
            }) => {
                busy_brokers.remove(&plan_broker);
                if handle_fetch(&shared, plan_broker, partitions, result) {
                    metadata_wanted = true;
                }
            }
            Some(TaskDone::Lookup(keys, result)) => {
                lookup_in_flight = false;
                if handle_lookup(&shared, keys, result) {
                    metadata_wanted = true;
                }
            }
            Some(TaskDone::Metadata(r)) => {
                metadata_in_flight = false;
                next_metadata = match r {
                    Ok(()) => {
                        metadata_retry.succeeded();
                        // Rate-limit on-demand refreshes, as retry.backoff.ms does in the Java client.
                        Instant::now() + shared.config.common.retry_backoff
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "metadata refresh failed");
                        Instant::now() + metadata_retry.failed()
                    }
                };
            }
            None => {}
        }
    }
    tasks.abort_all();
}

fn build_fetch(
    config: &ConsumerConfig,
    broker: i32,
    parts: Vec<(TopicPartition, i64, u64, i32, bool)>,
) -> FetchPlan {
    let mut topics: Vec<FetchTopic> = Vec::new();
    for (tp, offset, _, epoch, _) in &parts {
        let fp = FetchPartition::default()
            .with_partition(tp.partition)
            .with_fetch_offset(*offset)
            .with_current_leader_epoch(*epoch)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(config.max_partition_fetch_bytes);
        match topics.last_mut() {
            Some(t) if t.topic.0.as_str() == tp.topic => t.partitions.push(fp),
            _ => topics.push(
                FetchTopic::default()
                    .with_topic(TopicName(StrBytes::from_string(tp.topic.clone())))
                    .with_partitions(vec![fp]),
            ),
        }
    }
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(config.fetch_max_wait.as_millis() as i32)
        .with_min_bytes(config.fetch_min_bytes)
        .with_max_bytes(config.fetch_max_bytes)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
        .with_rack_id(StrBytes::from_string(
            config.common.client_rack.clone().unwrap_or_default(),
        ));
    FetchPlan {
        broker,
        partitions: parts
            .into_iter()
            .map(|(tp, o, c, _, _)| (tp, o, c))
            .collect(),
        request,
    }
}

/// Applies a fetch answer. Returns whether metadata should be refreshed.
fn handle_fetch(
    shared: &Shared,
    broker: i32,
    sent: Vec<(TopicPartition, i64, u64)>,
    result: Result<crate::protocol::msg::FetchResponse>,
) -> bool {
    let mut refresh = false;
    let mut st = shared.lock();
    let resp = match result {
        Ok(r) if r.error_code == codes::NONE => r,
        Ok(r) => {
            let e = Error::kafka(r.error_code, format!("fetch from broker {broker}"));
            for (tp, _, _) in &sent {
                if let Some(p) = st.partitions.get_mut(tp) {
                    p.in_flight = false;
                    p.failed(e.to_string(), true);
                }
            }
            return true;
        }
        Err(e) => {
            tracing::debug!(broker, error = %e, "fetch failed");
            // A broker that cannot serve lagless at all (no Fetch version in common) is reported
            // at once; transient failures only after task.timeout.ms (KIP-572).
            if !e.is_retriable() && !matches!(st.errors.back(), Some(last) if *last == e) {
                shared.push_error(&mut st, e.clone());
            }
            for (tp, _, _) in &sent {
                if let Some(p) = st.partitions.get_mut(tp) {
                    p.in_flight = false;
                    p.failed(e.to_string(), true);
                }
            }
            shared.cluster.disconnect(broker);
            return true;
        }
    };
    let sent_map: HashMap<(&str, i32), (i64, u64)> = sent
        .iter()
        .map(|(tp, o, c)| ((tp.topic.as_str(), tp.partition), (*o, *c)))
        .collect();
    let mut answered: HashSet<(String, i32)> = HashSet::new();
    let mut new_data = false;
    let mut errors = Vec::new();
    for topic in resp.responses {
        let name = topic.topic.0.to_string();
        for pd in topic.partitions {
            let key = TopicPartition {
                topic: name.clone(),
                partition: pd.partition_index,
            };
            answered.insert((name.clone(), pd.partition_index));
            let Some(&(offset, cursor)) = sent_map.get(&(name.as_str(), pd.partition_index)) else {
                continue;
            };
            let Some(p) = st.partitions.get_mut(&key) else {
                continue;
            };
            p.in_flight = false;
            if p.cursor != cursor || p.fetch_offset != Some(offset) {
                continue; // seeked, reset or reassigned meanwhile
            }
            let code = pd.error_code;
            if code == codes::NONE {
                p.high_watermark = pd.high_watermark;
                p.log_start_offset = pd.log_start_offset;
                let data = pd.records.unwrap_or_default();
                match decode_batches(data.clone(), shared.config.check_crcs) {
                    Ok(decoded) => {
                        let mut next = offset;
                        let mut added = 0usize;
                        for batch in decoded.batches {
                            if batch.is_control {
                                next = next.max(batch.last_offset + 1);
                                continue;
                            }
                            for r in batch.records {
                                if r.offset < next {
                                    continue; // the batch holding `offset` starts before it
                                }
                                next = r.offset + 1;
                                added += record_size(&r);
                                p.buffer.push_back(r);
                            }
                            // Compaction can leave a batch whose last records are gone.
                            next = next.max(batch.last_offset + 1);
                        }
                        p.oversized = decoded.truncated && next == offset && !data.is_empty();
                        if p.oversized {
                            p.failed(
                                format!("a record batch at offset {offset} is larger than max.partition.fetch.bytes"),
                                false,
                            );
                        } else {
                            p.progressed();
                        }
                        p.fetch_offset = Some(next);
                        if p.buffer.is_empty() {
                            // Only transaction markers (or compacted-away records) up to `next`:
                            // the position moves past them, as the Java client's does, so that
                            // commits and lag reach the end of the log.
                            p.position = Some(next);
                        }
                        p.buffered_bytes += added;
                        st.buffered_bytes += added;
                        if added > 0 {
                            new_data = true;
                        }
                    }
                    Err(e) => {
                        p.failed(e.to_string(), true);
                        errors.push(Error::Corrupt(format!(
                            "{}-{} at offset {offset}: {e}",
                            key.topic, key.partition
                        )));
                    }
                }
                continue;
            }
            let e = Error::kafka_partition(code, "fetch", &key.topic, key.partition);
            if code == codes::OFFSET_OUT_OF_RANGE {
                tracing::info!(topic = %key.topic, partition = key.partition, offset, "fetch offset out of range; applying auto.offset.reset");
                let freed = p.reset(PositionLookup::ResetPolicy);
                st.buffered_bytes -= freed;
                continue;
            }
            match kafka_error_action(code) {
                Action::RefreshMetadata | Action::Retry => {
                    refresh |= kafka_error_action(code) == Action::RefreshMetadata;
                    p.failed(e.to_string(), true);
                }
                _ => {
                    p.failed(e.to_string(), true);
                    errors.push(e);
                }
            }
        }
    }
    // A partition the broker left out of its answer is simply fetched again.
    for (tp, _, _) in &sent {
        if !answered.contains(&(tp.topic.clone(), tp.partition)) {
            if let Some(p) = st.partitions.get_mut(tp) {
                p.in_flight = false;
            }
        }
    }
    for e in errors {
        shared.push_error(&mut st, e);
    }
    if new_data {
        shared.data_ready.notify_all();
    }
    refresh
}

/// Applies position lookups. Returns whether metadata should be refreshed (a partition's lookup
/// failed with a retriable error, such as an unknown or changed leader).
fn handle_lookup(
    shared: &Shared,
    keys: Vec<(TopicPartition, u64)>,
    result: Result<Vec<(TopicPartition, LookupOutcome)>>,
) -> bool {
    let mut st = shared.lock();
    let cursors: HashMap<TopicPartition, u64> = keys.iter().cloned().collect();
    for (tp, _) in &keys {
        if let Some(p) = st.partitions.get_mut(tp) {
            p.lookup_in_flight = false;
        }
    }
    let outcomes = match result {
        Ok(o) => o,
        Err(e) => {
            for (tp, cursor) in &keys {
                if let Some(p) = st.partitions.get_mut(tp) {
                    if p.cursor == *cursor {
                        p.failed(format!("looking up the position: {e}"), true);
                    }
                }
            }
            return e.is_retriable();
        }
    };
    let mut refresh = false;
    let mut errors = Vec::new();
    let mut unknown: Vec<String> = Vec::new();
    for (tp, outcome) in outcomes {
        let Some(p) = st.partitions.get_mut(&tp) else {
            continue;
        };
        if cursors.get(&tp) != Some(&p.cursor) || p.lookup.is_none() {
            continue;
        }
        match outcome {
            LookupOutcome::Position(o) => {
                p.position = Some(o);
                p.fetch_offset = Some(o);
                p.lookup = None;
                p.progressed();
            }
            LookupOutcome::NoOffset => {
                // auto.offset.reset=none: the application must seek. Report once.
                p.lookup = None;
                errors.push(Error::NoOffset(ErrorPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                }));
            }
            LookupOutcome::Failed(e) => {
                p.failed(format!("looking up the position: {e}"), true);
                refresh |= e.is_retriable();
                // A partition of a missing topic never gets a position, so the fetch loop's
                // unknown-topic report (which needs one) never runs: report it from here, once.
                if let Error::UnknownTopic(t) = &e {
                    unknown.push(t.clone());
                }
            }
        }
    }
    for t in unknown {
        if st.reported_unknown.insert(t.clone()) {
            errors.push(Error::UnknownTopic(t));
        }
    }
    for e in errors {
        shared.push_error(&mut st, e);
    }
    refresh
}

/// The policy lookup `auto.offset.reset` asks for, or `None` for `none`.
pub(crate) fn reset_policy(config: &ConsumerConfig) -> Option<PositionLookup> {
    match config.auto_offset_reset {
        AutoOffsetReset::Earliest => Some(PositionLookup::Earliest),
        AutoOffsetReset::Latest => Some(PositionLookup::Latest),
        AutoOffsetReset::None => None,
    }
}
