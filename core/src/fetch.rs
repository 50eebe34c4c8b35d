//! Fetching: per-partition cursors, one fetch in flight per leader broker (all leaders at once),
//! and a prefetch buffer bounded in bytes.
//!
//! A partition is a task (KIP-572): a partition whose leader is unknown or whose fetches fail is
//! backed off on its own while the others keep flowing, and only after `task.timeout.ms` without
//! progress is it reported through `poll()`.
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;
use tokio::task::JoinSet;

use crate::backoff::{Backoff, Deadline, Retry};
use crate::cluster::{Cluster, Lane};
use crate::config::{AutoOffsetReset, ConsumerConfig};
use crate::error::{codes, kafka_error_action, Action, Error, ErrorPartition, Result};
use crate::offsets::{self, OffsetAndMetadata};
use crate::protocol::msg::fetch_request::{FetchPartition, FetchTopic};
use crate::protocol::msg::{BrokerId, FetchRequest, StrBytes, TopicName};
use crate::protocol::records::{decode_batches, Record};
use crate::recovery::RecoveryState;
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
    /// The offset of the next record `poll()` returns from the main stream (the consumer
    /// position).
    pub position: Option<i64>,
    pub lookup: Option<PositionLookup>,
    /// Set while a position lookup for this partition is running.
    pub lookup_in_flight: bool,
    pub paused: bool,
    /// Bumped by seek/reset: a fetch or lookup answer for an older cursor is dropped.
    pub cursor: u64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The main stream: fetches from `position` on, with no upper bound. Position lookups count
    /// their failures here too.
    pub main: Stream,
    /// KIP-333: the recovery stream draining the backlog ranges, while any are unfinished.
    pub recovery: Option<Recovery>,
    /// KIP-392: the replica the leader told this client to fetch from (`client.rack`), until
    /// when; dropped on an error from it or once `metadata.max.age.ms` has passed.
    pub preferred_replica: Option<(i32, Instant)>,
}

/// KIP-392: the broker a partition's fetch goes to: the preferred read replica while it is
/// known, still valid and in the cluster metadata, else the leader.
pub(crate) fn fetch_target(
    leader: i32,
    preferred: Option<(i32, Instant)>,
    now: Instant,
    is_known_broker: impl Fn(i32) -> bool,
) -> i32 {
    match preferred {
        Some((replica, until)) if now < until && is_known_broker(replica) => replica,
        _ => leader,
    }
}

/// Which of a partition's two fetch cursors a fetch or a record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum StreamKind {
    Main,
    Recovery,
}

impl StreamKind {
    /// The connection its fetches go on: a main stream's fetch waiting at the log end must not
    /// hold up the recovery stream's.
    fn lane(self) -> Lane {
        match self {
            StreamKind::Main => Lane::Default,
            StreamKind::Recovery => Lane::Recovery,
        }
    }
}

/// One fetch cursor of a partition and what it has buffered. Each stream is its own KIP-572 task:
/// it backs off and is reported stuck on its own, so a failing recovery stream never holds up
/// the main stream (and the other way round).
pub(crate) struct Stream {
    /// The next offset to fetch: the stream's delivery position plus what is buffered.
    pub fetch_offset: Option<i64>,
    /// Fetched records with the bytes each counts against the buffer limits (computed once,
    /// when buffered, and given back when the record is taken).
    pub buffer: VecDeque<(Record, usize)>,
    pub buffered_bytes: usize,
    pub in_flight: bool,
    pub retry: Retry,
    pub next_attempt: Instant,
    /// KIP-572's clock: when the stream last made progress (an answer that moved it on, a cursor
    /// the application set) or last had nothing to ask the cluster for (see [`Activity`]).
    pub last_progress: Instant,
    /// The last attempt failed and no answer has moved the stream on since.
    pub failing: bool,
    pub last_error: Option<String>,
    pub stuck_reported_at: Option<Instant>,
    /// The whole first batch did not fit `max.partition.fetch.bytes`: put this partition first in
    /// the next request, where the broker returns at least one whole batch (KIP-74).
    pub oversized: bool,
}

impl Stream {
    fn new(backoff: Backoff) -> Stream {
        Stream {
            fetch_offset: None,
            buffer: VecDeque::new(),
            buffered_bytes: 0,
            in_flight: false,
            retry: Retry::new(backoff),
            next_attempt: Instant::now(),
            last_progress: Instant::now(),
            failing: false,
            last_error: None,
            stuck_reported_at: None,
            oversized: false,
        }
    }

    fn clear_buffer(&mut self) -> usize {
        self.buffer.clear();
        std::mem::take(&mut self.buffered_bytes)
    }

    fn failed(&mut self, why: String, backoff_wait: bool) {
        let now = Instant::now();
        self.failing = true;
        self.last_error = Some(why);
        if backoff_wait {
            self.next_attempt = now + self.retry.failed();
        }
    }

    fn progressed(&mut self) {
        self.last_progress = Instant::now();
        self.failing = false;
        self.stuck_reported_at = None;
        self.last_error = None;
        self.retry.succeeded();
    }

    /// What the stream is doing now, for KIP-572's clock. `lookup_in_flight`: a position lookup
    /// for it is under way; `idle_by_choice`: the application keeps it from fetching (paused,
    /// buffers full).
    fn activity(
        &self,
        lookup_in_flight: bool,
        idle_by_choice: bool,
        lookup_wanted: bool,
    ) -> Activity {
        if self.in_flight || lookup_in_flight {
            Activity::InFlight
        } else if self.failing {
            Activity::Failing
        } else if idle_by_choice || (self.fetch_offset.is_none() && !lookup_wanted) {
            Activity::Idle
        } else {
            Activity::Ready
        }
    }

    /// KIP-572: reports the stream once it has made no progress for `task_timeout` while it had
    /// something to ask the cluster for (and again every `task_timeout` after); idle time does not
    /// count. Returns the cause to report.
    fn stuck(
        &mut self,
        activity: Activity,
        now: Instant,
        task_timeout: Duration,
    ) -> Option<String> {
        if activity == Activity::Idle {
            self.last_progress = now;
        }
        if !task_stuck(
            self.last_progress,
            activity,
            self.stuck_reported_at,
            now,
            task_timeout,
        ) {
            return None;
        }
        self.stuck_reported_at = Some(now);
        let quiet = now
            .saturating_duration_since(self.last_progress)
            .as_millis();
        Some(match (&self.last_error, activity) {
            (Some(e), _) => e.clone(),
            (None, Activity::InFlight) => {
                format!("no answer from the broker for {quiet} ms (a request is in flight)")
            }
            (None, _) => format!("no progress for {quiet} ms"),
        })
    }

    /// Whether the stream buffered enough: it fetches again once the application took some.
    fn buffer_full(&self, max_partition_fetch_bytes: i32) -> bool {
        self.buffered_bytes >= 2 * max_partition_fetch_bytes.max(0) as usize
    }

    /// Whether the fetch loop may send a fetch for this stream now.
    fn wants_fetch(&self, now: Instant, max_partition_fetch_bytes: i32) -> Option<i64> {
        let offset = self.fetch_offset?;
        let full = self.buffer_full(max_partition_fetch_bytes);
        (!self.in_flight && now >= self.next_attempt && !full).then_some(offset)
    }
}

/// What a stream is doing, as far as KIP-572 is concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Activity {
    /// Nothing to ask the cluster for: paused, buffers full, or no position and no lookup wanted.
    Idle,
    /// A fetch or position lookup is waiting for an answer.
    InFlight,
    /// The last attempt failed; the next waits out its backoff.
    Failing,
    /// It wants to fetch and waits for its turn (a leader, a free connection).
    Ready,
}

/// KIP-572's decision: whether a stream whose last progress was at `last_progress` and that is
/// now in `activity` is stuck at `now`. The clock runs from the last progress whatever the stream
/// is waiting for: a request hung on a broker that stopped answering counts as no progress from
/// the start, not only once it times out (`request.timeout.ms` later). An idle stream is never
/// stuck. After a report (`reported_at`), the next comes `task_timeout` later.
pub(crate) fn task_stuck(
    last_progress: Instant,
    activity: Activity,
    reported_at: Option<Instant>,
    now: Instant,
    task_timeout: Duration,
) -> bool {
    if activity == Activity::Idle {
        return false;
    }
    let since = reported_at.map_or(last_progress, |r| r.max(last_progress));
    since
        .checked_add(task_timeout)
        .is_some_and(|due| now >= due)
}

/// KIP-333: a partition's backlog ranges and the stream that drains them, first range first.
///
/// `state.ranges` moves as records are *delivered* (it is what gets committed); the stream's
/// `fetch_offset` runs ahead of it as records are *fetched*, within the range ending at
/// `fetch_end`. `state.main_next` is not used: the partition's `position` is the main stream's.
pub(crate) struct Recovery {
    pub state: RecoveryState,
    pub stream: Stream,
    /// The end of the range the stream fetches from now: records at or above it belong to a
    /// later range or to the main stream and are dropped from a recovery fetch.
    pub fetch_end: i64,
}

impl Recovery {
    /// The recovery stream for `state`'s ranges, or `None` when there are none.
    fn start(state: RecoveryState, backoff: Backoff) -> Option<Recovery> {
        let (next, end) = state.next_fetches().recovery?;
        let mut stream = Stream::new(backoff);
        stream.fetch_offset = Some(next);
        Some(Recovery {
            state,
            stream,
            fetch_end: end,
        })
    }

    /// The stream fetched everything below `next` in its current range: carry on there, or move
    /// on to the next range once this one is fetched to its end (nothing left: `None`).
    fn fetched_to(&mut self, next: i64) {
        if next < self.fetch_end {
            self.stream.fetch_offset = Some(next);
            return;
        }
        let fetch_end = self.fetch_end;
        match self.state.ranges.iter().find(|r| r.start >= fetch_end) {
            Some(r) => {
                self.stream.fetch_offset = Some(r.next);
                self.fetch_end = r.end;
            }
            None => self.stream.fetch_offset = None,
        }
    }

    /// With nothing buffered, every offset below the fetch cursor was delivered or does not exist
    /// (control batches, compaction, a range's tail): the ranges move up to it.
    fn settle(&mut self) {
        if !self.stream.buffer.is_empty() {
            return;
        }
        let frontier = self.stream.fetch_offset.unwrap_or(i64::MAX);
        while let Some(first) = self.state.ranges.first().copied() {
            if first.next >= frontier {
                break;
            }
            self.state.recovery_skipped_to(frontier.min(first.end));
            if self.state.ranges.first() == Some(&first) {
                break;
            }
        }
    }

    /// The largest end over the unfinished ranges.
    fn max_end(&self) -> i64 {
        self.state.ranges.last().map_or(i64::MIN, |r| r.end)
    }

    fn done(&self) -> bool {
        !self.state.is_active() && self.stream.buffer.is_empty()
    }
}

impl PartitionState {
    pub fn new(topic: &str, lookup: PositionLookup, backoff: Backoff) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            position: None,
            lookup: Some(lookup),
            lookup_in_flight: false,
            paused: false,
            cursor: 0,
            high_watermark: -1,
            log_start_offset: -1,
            main: Stream::new(backoff),
            recovery: None,
            preferred_replica: None,
        }
    }

    /// Bytes buffered by both streams.
    pub fn buffered_bytes(&self) -> usize {
        self.main.buffered_bytes
            + self
                .recovery
                .as_ref()
                .map_or(0, |r| r.stream.buffered_bytes)
    }

    /// Moves the cursor: drops what is buffered, any answer in flight and (KIP-333) the recovery
    /// ranges: the application chose where to read from.
    pub fn seek(&mut self, offset: i64) -> usize {
        let freed = self.cancel_recovery() + self.main.clear_buffer();
        self.position = Some(offset);
        self.main.fetch_offset = Some(offset);
        self.lookup = None;
        self.cursor += 1;
        self.main.failing = false;
        self.main.last_progress = Instant::now();
        freed
    }

    /// `seek_to_beginning`/`_end` and OFFSET_OUT_OF_RANGE: look the position up again.
    pub fn reset(&mut self, lookup: PositionLookup) -> usize {
        let freed = self.main.clear_buffer();
        self.position = None;
        self.main.fetch_offset = None;
        self.lookup = Some(lookup);
        self.cursor += 1;
        freed
    }

    /// Drops the recovery stream and its ranges; returns the bytes it had buffered.
    pub fn cancel_recovery(&mut self) -> usize {
        match self.recovery.take() {
            Some(mut r) => {
                if r.state.is_active() {
                    tracing::info!(
                        topic = %self.topic,
                        ranges = ?r.state.ranges,
                        "recovery ranges cancelled (seek or reset of the partition)"
                    );
                }
                r.stream.clear_buffer()
            }
            None => 0,
        }
    }

    fn failed(&mut self, why: String, backoff_wait: bool) {
        self.main.failed(why, backoff_wait)
    }

    fn progressed(&mut self) {
        self.main.progressed()
    }

    /// Whether a recovery stream still has records to deliver.
    pub fn recovery_active(&self) -> bool {
        self.recovery.is_some()
    }

    /// Takes the next buffered record of `kind` and accounts for it: the main stream's position,
    /// or the recovery range holding it. Returns the record and the bytes it held.
    pub fn pop(&mut self, kind: StreamKind) -> Option<(Record, usize)> {
        let (r, size) = match kind {
            StreamKind::Main => {
                let (r, size) = self.main.buffer.pop_front()?;
                self.main.buffered_bytes -= size;
                self.position = Some(r.offset + 1);
                (r, size)
            }
            StreamKind::Recovery => {
                let rc = self.recovery.as_mut()?;
                let (r, size) = rc.stream.buffer.pop_front()?;
                rc.stream.buffered_bytes -= size;
                rc.state.recovery_delivered(r.offset);
                (r, size)
            }
        };
        Some((r, size))
    }

    /// After a poll took records: a stream with nothing buffered moves past what its fetches
    /// skipped (transaction markers, compacted-away offsets), as the Java client's position does,
    /// so commits and lag reach the end of the log; a recovery stream with nothing left ends.
    pub fn after_drain(&mut self) {
        if self.main.buffer.is_empty() {
            self.position = self.main.fetch_offset.max(self.position);
        }
        if let Some(rc) = self.recovery.as_mut() {
            rc.settle();
            if rc.done() {
                tracing::info!(topic = %self.topic, "recovery stream finished its backlog");
                self.recovery = None;
            }
        }
    }

    /// What a commit of this partition's progress says (`None` before it has a position): the
    /// position, or with unfinished recovery ranges (KIP-333) the low-water mark over them and
    /// the main stream, with the token that lets the next lagless owner resume each stream.
    pub fn commit_offset(&self) -> Option<OffsetAndMetadata> {
        let position = self.position?;
        Some(match self.recovery_to_commit() {
            Some(st) => st.commit_offset(),
            None => OffsetAndMetadata {
                offset: position,
                metadata: String::new(),
            },
        })
    }

    /// What an explicit commit of `asked` for this partition says. With unfinished recovery
    /// ranges (KIP-333) the commit claims only records this member delivered below the offset
    /// asked ([`RecoveryState::committed_at`]): if that leaves ranges, it is their low-water mark
    /// with the token of that state (the metadata asked for cannot travel with it); otherwise,
    /// and without recovery ranges, `asked` as it is.
    pub fn commit_offset_asked(&self, asked: OffsetAndMetadata) -> OffsetAndMetadata {
        match self
            .recovery_to_commit()
            .map(|st| st.committed_at(asked.offset))
        {
            Some(st) if st.is_active() => st.commit_offset(),
            _ => asked,
        }
    }

    /// KIP-333: the state a commit starts from while recovery ranges are unfinished: the ranges
    /// as delivered, and the main stream at the position.
    fn recovery_to_commit(&self) -> Option<RecoveryState> {
        let position = self.position?;
        let rc = self.recovery.as_ref().filter(|rc| rc.state.is_active())?;
        Some(RecoveryState {
            main_next: position,
            ranges: rc.state.ranges.clone(),
        })
    }

    /// Each stream that may fetch now, with its offset.
    fn fetchable(&self, now: Instant, max_partition_fetch_bytes: i32) -> Vec<(StreamKind, i64)> {
        let mut out = Vec::new();
        if let Some(o) = self.main.wants_fetch(now, max_partition_fetch_bytes) {
            out.push((StreamKind::Main, o));
        }
        if let Some(o) = self
            .recovery
            .as_ref()
            .and_then(|r| r.stream.wants_fetch(now, max_partition_fetch_bytes))
        {
            out.push((StreamKind::Recovery, o));
        }
        out
    }

    fn stream_mut(&mut self, kind: StreamKind) -> Option<&mut Stream> {
        match kind {
            StreamKind::Main => Some(&mut self.main),
            StreamKind::Recovery => self.recovery.as_mut().map(|r| &mut r.stream),
        }
    }
}

/// Approximate memory a record holds in the prefetch buffer.
fn record_size(r: &Record) -> usize {
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
    /// Signalled when records or errors arrive, or on wakeup: `poll()` and the async front's
    /// `recv()` wait on it.
    pub data_ready: crate::engine::Ready,
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
            data_ready: crate::engine::Ready::new(),
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
                st.buffered_bytes -= p.buffered_bytes();
            }
        }
    }

    /// What a commit of `partitions`' progress says (those that have a position): see
    /// [`PartitionState::commit_offset`].
    pub fn commit_offsets<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        let st = self.lock();
        partitions
            .into_iter()
            .filter_map(|tp| {
                st.partitions
                    .get(tp)
                    .and_then(|p| p.commit_offset())
                    .map(|o| (tp.clone(), o))
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

/// One Fetch request: to one broker, for one kind of stream. A Fetch names each partition once,
/// so a partition's main and recovery streams go in separate requests, which the pipelined
/// connection sends side by side.
struct FetchPlan {
    broker: i32,
    kind: StreamKind,
    /// (partition, fetch offset, cursor)
    partitions: Vec<(TopicPartition, i64, u64)>,
    request: FetchRequest,
}

enum TaskDone {
    Fetch {
        plan_broker: i32,
        kind: StreamKind,
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
    /// KIP-333: a takeover with a backlog (or a recovery token to resume): the main stream
    /// starts at `main_next`, a recovery stream drains the ranges.
    Recover(RecoveryState),
    NoOffset,
    Failed(Error),
}

/// The fetch task: runs until the consumer closes.
pub(crate) async fn run(shared: Arc<Shared>) {
    let mut tasks: JoinSet<TaskDone> = JoinSet::new();
    let mut busy_brokers: HashSet<(i32, StreamKind)> = HashSet::new();
    let mut metadata_in_flight = false;
    let mut lookup_in_flight = false;
    let mut metadata_wanted = true;
    let mut next_metadata = Instant::now();
    let mut metadata_retry = Retry::new(shared.backoff());
    // While a topic of interest is missing: look again after retry.backoff.ms, growing to
    // retry.backoff.max.ms, rather than only every metadata.max.age.ms.
    let mut missing_retry = Retry::new(shared.backoff());
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
            // A healthy partition at the log end is answered only after fetch.max.wait.ms: a
            // task.timeout.ms below that must not report it.
            let task_timeout = shared
                .config
                .common
                .task_timeout
                .max(2 * shared.config.fetch_max_wait);
            let mut per_broker: BTreeMap<(i32, StreamKind), Vec<FetchCandidate>> = BTreeMap::new();
            let mut unknown_topics: Vec<String> = Vec::new();
            let mut stuck: Vec<Error> = Vec::new();
            for (tp, p) in st.partitions.iter_mut() {
                // KIP-572: report a stream that made no progress for task.timeout.ms.
                let partition = ErrorPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                };
                let max_bytes = shared.config.max_partition_fetch_bytes;
                let idle = |s: &Stream| p.paused || buffer_full || s.buffer_full(max_bytes);
                let main_activity =
                    p.main
                        .activity(p.lookup_in_flight, idle(&p.main), p.lookup.is_some());
                let recovery_activity = p
                    .recovery
                    .as_ref()
                    .map(|r| r.stream.activity(false, idle(&r.stream), false));
                if let Some(cause) = p.main.stuck(main_activity, now, task_timeout) {
                    stuck.push(Error::PartitionStuck {
                        partition: partition.clone(),
                        cause,
                    });
                }
                if let Some(cause) = p
                    .recovery
                    .as_mut()
                    .zip(recovery_activity)
                    .and_then(|(r, a)| r.stream.stuck(a, now, task_timeout))
                {
                    stuck.push(Error::PartitionStuck {
                        partition,
                        cause: format!("recovery stream: {cause}"),
                    });
                }
                if let Some(l) = p.lookup {
                    if !p.lookup_in_flight && now >= p.main.next_attempt {
                        lookups.push((tp.clone(), l, p.cursor));
                    }
                }
                if p.paused || buffer_full {
                    continue;
                }
                let ready = p.fetchable(now, shared.config.max_partition_fetch_bytes);
                if ready.is_empty() {
                    continue;
                }
                let fail_all = |p: &mut PartitionState, why: String| {
                    for (kind, _) in &ready {
                        if let Some(s) = p.stream_mut(*kind) {
                            s.failed(why.clone(), true);
                        }
                    }
                };
                match meta.topics.get(&tp.topic) {
                    None => {
                        metadata_wanted = true;
                        continue;
                    }
                    Some(t) if t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION => {
                        unknown_topics.push(tp.topic.clone());
                        fail_all(p, format!("topic `{}` does not exist", tp.topic));
                        metadata_wanted = true;
                        continue;
                    }
                    Some(_) => {}
                }
                match meta.partition(&tp.topic, tp.partition) {
                    Some(info) if info.leader >= 0 => {
                        let target = fetch_target(info.leader, p.preferred_replica, now, |b| {
                            meta.brokers.contains_key(&b)
                        });
                        if target == info.leader {
                            p.preferred_replica = None;
                        }
                        for (kind, offset) in &ready {
                            let oversized = p.stream_mut(*kind).is_some_and(|s| s.oversized);
                            per_broker.entry((target, *kind)).or_default().push((
                                tp.clone(),
                                *offset,
                                p.cursor,
                                info.leader_epoch,
                                oversized,
                            ));
                        }
                    }
                    Some(_) => {
                        fail_all(p, format!("{}-{} has no leader", tp.topic, tp.partition));
                        metadata_wanted = true;
                    }
                    None => {
                        fail_all(
                            p,
                            format!(
                                "{}-{} is not in the cluster metadata",
                                tp.topic, tp.partition
                            ),
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
            for ((broker, kind), mut parts) in per_broker {
                if busy_brokers.contains(&(broker, kind)) {
                    continue;
                }
                // Partitions whose first batch was too large go first (KIP-74).
                parts.sort_by_key(|p| !p.4);
                for (tp, _, _, _, _) in &parts {
                    if let Some(s) = st.partitions.get_mut(tp).and_then(|p| p.stream_mut(kind)) {
                        s.in_flight = true;
                    }
                }
                plans.push(build_fetch(&shared.config, broker, kind, parts));
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
            busy_brokers.insert((plan.broker, plan.kind));
            let shared2 = shared.clone();
            tasks.spawn(async move {
                let timeout = shared2.config.common.request_timeout + shared2.config.fetch_max_wait;
                let deadline = Deadline::after(timeout);
                let result = async {
                    let conn = shared2
                        .cluster
                        .broker_on(plan.broker, plan.kind.lane(), deadline)
                        .await?;
                    conn.call_with_timeout(&plan.request, timeout).await
                }
                .await;
                TaskDone::Fetch {
                    plan_broker: plan.broker,
                    kind: plan.kind,
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
                kind,
                partitions,
                result,
            }) => {
                busy_brokers.remove(&(plan_broker, kind));
                if handle_fetch(&shared, plan_broker, kind, partitions, result) {
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
                    Ok(()) if shared.cluster.interest_missing() => {
                        metadata_retry.succeeded();
                        metadata_wanted = true;
                        Instant::now() + missing_retry.failed()
                    }
                    Ok(()) => {
                        metadata_retry.succeeded();
                        missing_retry.succeeded();
                        // Rate-limit on-demand refreshes, as retry.backoff.ms does in the Java client.
                        Instant::now() + shared.config.common.retry_backoff
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "metadata refresh failed");
                        // No retry fixes a failed authentication: the application hears of it
                        // now (once), not after task.timeout.ms.
                        if e.is_fatal() {
                            let mut st = shared.lock();
                            if !matches!(st.errors.back(), Some(last) if *last == e) {
                                shared.push_error(&mut st, e);
                            }
                        }
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
    kind: StreamKind,
    parts: Vec<FetchCandidate>,
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
        kind,
        partitions: parts
            .into_iter()
            .map(|(tp, o, c, _, _)| (tp, o, c))
            .collect(),
        request,
    }
}

/// Applies a fetch answer for streams of `kind`. Returns whether metadata should be refreshed.
fn handle_fetch(
    shared: &Shared,
    broker: i32,
    kind: StreamKind,
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
                    p.preferred_replica = None;
                    if let Some(s) = p.stream_mut(kind) {
                        s.in_flight = false;
                        s.failed(e.to_string(), true);
                    }
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
                    // A preferred replica that fails is left for the leader (KIP-392).
                    p.preferred_replica = None;
                    if let Some(s) = p.stream_mut(kind) {
                        s.in_flight = false;
                        s.failed(e.to_string(), true);
                    }
                }
            }
            shared.cluster.disconnect(broker, kind.lane());
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
            let moved = p.cursor != cursor;
            let Some(stream) = p.stream_mut(kind) else {
                continue; // the recovery stream ended or was cancelled meanwhile
            };
            stream.in_flight = false;
            if moved || stream.fetch_offset != Some(offset) {
                continue; // seeked, reset or reassigned meanwhile
            }
            let code = pd.error_code;
            // KIP-392: the leader names a replica in the client's rack (fetch v11+) and answers
            // without records; the next fetches go there, until metadata.max.age.ms or an error.
            let replica = pd.preferred_read_replica.0;
            if code == codes::NONE && replica >= 0 && replica != broker {
                tracing::debug!(
                    "{}-{}: fetching from replica {replica}, which leader {broker} prefers",
                    key.topic,
                    key.partition
                );
                p.preferred_replica = Some((
                    replica,
                    Instant::now() + shared.config.common.metadata_max_age,
                ));
                if let Some(stream) = p.stream_mut(kind) {
                    stream.progressed();
                }
                continue;
            }
            if code != codes::NONE && p.preferred_replica.is_some_and(|(b, _)| b == broker) {
                // An error from the follower (out of range while it catches up, not a replica
                // any more): back to the leader, which decides again.
                p.preferred_replica = None;
                if code == codes::OFFSET_OUT_OF_RANGE {
                    if let Some(stream) = p.stream_mut(kind) {
                        stream.failed(
                            format!("offset {offset} out of range on follower {broker}"),
                            false,
                        );
                    }
                    refresh = true;
                    continue;
                }
            }
            if code == codes::NONE {
                p.high_watermark = pd.high_watermark;
                p.log_start_offset = pd.log_start_offset;
                let data = pd.records.unwrap_or_default();
                // A recovery stream delivers its current range only; later offsets belong to a
                // later range or to the main stream.
                let limit = match (kind, &p.recovery) {
                    (StreamKind::Recovery, Some(rc)) => rc.fetch_end,
                    _ => i64::MAX,
                };
                let stream = p.stream_mut(kind).expect("checked above");
                match decode_batches(data.clone(), shared.config.check_crcs) {
                    Ok(decoded) => {
                        let mut next = offset;
                        let mut added = 0usize;
                        'batches: for batch in decoded.batches {
                            if batch.is_control {
                                next = next.max(batch.last_offset + 1);
                                continue;
                            }
                            for r in batch.records {
                                if r.offset < next {
                                    continue; // the batch holding `offset` starts before it
                                }
                                if r.offset >= limit {
                                    next = limit;
                                    break 'batches;
                                }
                                next = r.offset + 1;
                                let size = record_size(&r);
                                added += size;
                                stream.buffer.push_back((r, size));
                            }
                            // Compaction can leave a batch whose last records are gone.
                            next = next.max(batch.last_offset + 1);
                        }
                        stream.oversized = decoded.truncated && next == offset && !data.is_empty();
                        if stream.oversized {
                            stream.failed(
                                format!("a record batch at offset {offset} is larger than max.partition.fetch.bytes"),
                                false,
                            );
                        } else {
                            stream.progressed();
                        }
                        stream.buffered_bytes += added;
                        let nothing_buffered = stream.buffer.is_empty();
                        match kind {
                            StreamKind::Main => {
                                p.main.fetch_offset = Some(next);
                                if nothing_buffered {
                                    // Only transaction markers (or compacted-away records) up to
                                    // `next`: the position moves past them, as the Java client's
                                    // does, so that commits and lag reach the end of the log.
                                    p.position = Some(next);
                                }
                            }
                            StreamKind::Recovery => {
                                if let Some(rc) = p.recovery.as_mut() {
                                    rc.fetched_to(next);
                                }
                                p.after_drain();
                            }
                        }
                        st.buffered_bytes += added;
                        if added > 0 {
                            new_data = true;
                        }
                    }
                    Err(e) => {
                        stream.failed(e.to_string(), true);
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
                match kind {
                    StreamKind::Main => {
                        tracing::info!(topic = %key.topic, partition = key.partition, offset, "fetch offset out of range; applying auto.offset.reset");
                        let freed = p.reset(PositionLookup::ResetPolicy);
                        st.buffered_bytes -= freed;
                    }
                    StreamKind::Recovery => recovery_out_of_range(p, &key, offset, e),
                }
                continue;
            }
            let stream = p.stream_mut(kind).expect("checked above");
            match kafka_error_action(code) {
                Action::RefreshMetadata | Action::Retry => {
                    refresh |= kafka_error_action(code) == Action::RefreshMetadata;
                    stream.failed(e.to_string(), true);
                }
                _ => {
                    stream.failed(e.to_string(), true);
                    errors.push(e);
                }
            }
        }
    }
    // A partition the broker left out of its answer is simply fetched again.
    for (tp, _, _) in &sent {
        if !answered.contains(&(tp.topic.clone(), tp.partition)) {
            if let Some(s) = st.partitions.get_mut(tp).and_then(|p| p.stream_mut(kind)) {
                s.in_flight = false;
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

/// OFFSET_OUT_OF_RANGE on a recovery stream: retention deleted the start of the backlog before
/// the stream reached it. Those records are gone for every client; the stream skips to the log
/// start (known from the main stream's fetches) with a warning, instead of failing the partition
/// or resetting the main stream. Until the log start is known to be past the offset, it retries.
fn recovery_out_of_range(p: &mut PartitionState, tp: &TopicPartition, offset: i64, e: Error) {
    let log_start = p.log_start_offset;
    let Some(rc) = p.recovery.as_mut() else {
        return;
    };
    if log_start > offset {
        tracing::warn!(
            topic = %tp.topic,
            partition = tp.partition,
            from = offset,
            to = log_start,
            "records of the recovery backlog were deleted by retention before they were read; skipping to the log start"
        );
        rc.fetched_to(log_start);
        p.after_drain();
    } else {
        rc.stream.failed(e.to_string(), true);
    }
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
            if e.is_fatal() && !matches!(st.errors.back(), Some(last) if *last == e) {
                shared.push_error(&mut st, e.clone());
            }
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
    let mut freed = 0usize;
    for (tp, outcome) in outcomes {
        let Some(p) = st.partitions.get_mut(&tp) else {
            continue;
        };
        if cursors.get(&tp) != Some(&p.cursor) || p.lookup.is_none() {
            continue;
        }
        match outcome {
            LookupOutcome::Position(o) => {
                // A main stream reset below a backlog range re-reads it: the range is dropped.
                if p.recovery.as_ref().is_some_and(|r| o < r.max_end()) {
                    freed += p.cancel_recovery();
                }
                p.position = Some(o);
                p.main.fetch_offset = Some(o);
                p.lookup = None;
                p.progressed();
            }
            LookupOutcome::Recover(state) => {
                tracing::info!(
                    topic = %tp.topic,
                    partition = tp.partition,
                    main = state.main_next,
                    ranges = ?state.ranges,
                    "backlog drains in a recovery stream; the main stream starts after it"
                );
                freed += p.cancel_recovery();
                p.position = Some(state.main_next);
                p.main.fetch_offset = Some(state.main_next);
                p.lookup = None;
                p.progressed();
                p.recovery = Recovery::start(state, shared.backoff());
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
    st.buffered_bytes -= freed;
    // position() waits for lookups on data_ready.
    shared.data_ready.notify_all();
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

#[cfg(test)]
mod tests {
    use super::*;

    const TASK: Duration = Duration::from_secs(5);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    #[test]
    fn a_request_hung_on_a_silent_broker_counts_from_the_last_progress() {
        let t0 = Instant::now();
        // The fetch sent after the last answer never comes back: stuck task.timeout.ms after
        // that answer, not after the request times out.
        assert!(!task_stuck(
            t0,
            Activity::InFlight,
            None,
            t0 + secs(4),
            TASK
        ));
        assert!(task_stuck(t0, Activity::InFlight, None, t0 + TASK, TASK));
        assert!(task_stuck(t0, Activity::InFlight, None, t0 + secs(6), TASK));
    }

    #[test]
    fn failing_or_waiting_for_a_turn_counts_and_idle_never_does() {
        let t0 = Instant::now();
        for a in [Activity::Failing, Activity::Ready] {
            assert!(!task_stuck(t0, a, None, t0 + secs(4), TASK), "{a:?}");
            assert!(task_stuck(t0, a, None, t0 + secs(5), TASK), "{a:?}");
        }
        assert!(!task_stuck(t0, Activity::Idle, None, t0 + secs(3600), TASK));
    }

    #[test]
    fn a_report_comes_again_after_another_task_timeout() {
        let t0 = Instant::now();
        let reported = Some(t0 + secs(5));
        assert!(!task_stuck(
            t0,
            Activity::InFlight,
            reported,
            t0 + secs(9),
            TASK
        ));
        assert!(task_stuck(
            t0,
            Activity::InFlight,
            reported,
            t0 + secs(10),
            TASK
        ));
        // Progress after the report restarts the clock from that progress.
        assert!(!task_stuck(
            t0 + secs(8),
            Activity::InFlight,
            reported,
            t0 + secs(12),
            TASK
        ));
        assert!(task_stuck(
            t0 + secs(8),
            Activity::InFlight,
            reported,
            t0 + secs(13),
            TASK
        ));
    }

    #[test]
    fn a_task_timeout_of_forever_never_reports() {
        let t0 = Instant::now();
        assert!(!task_stuck(
            t0,
            Activity::Failing,
            None,
            t0 + secs(86400),
            Duration::MAX
        ));
    }

    #[test]
    fn fetches_follow_the_preferred_replica_until_it_expires_or_leaves_the_cluster() {
        let t0 = Instant::now();
        let known = |b: i32| (1..=3).contains(&b);
        // No preferred replica: the leader.
        assert_eq!(fetch_target(1, None, t0, known), 1);
        // The leader named replica 3 until t0 + 5 s (metadata.max.age.ms).
        let preferred = Some((3, t0 + secs(5)));
        assert_eq!(fetch_target(1, preferred, t0, known), 3);
        assert_eq!(fetch_target(1, preferred, t0 + secs(4), known), 3);
        // Expired: back to the leader, which decides again.
        assert_eq!(fetch_target(1, preferred, t0 + secs(5), known), 1);
        // A replica no longer in the cluster metadata: the leader.
        assert_eq!(fetch_target(1, Some((7, t0 + secs(5))), t0, known), 1);
    }

    fn stream() -> Stream {
        let mut s = Stream::new(Backoff::new(Duration::from_millis(100), secs(1)));
        s.fetch_offset = Some(0);
        s
    }

    #[test]
    fn a_stream_reports_an_unanswered_fetch_and_idle_time_does_not_count() {
        let mut s = stream();
        let t0 = s.last_progress;
        s.in_flight = true;
        let a = s.activity(false, false, false);
        assert_eq!(a, Activity::InFlight);
        assert_eq!(s.stuck(a, t0 + secs(4), TASK), None);
        let cause = s.stuck(a, t0 + secs(5), TASK).expect("stuck");
        assert!(cause.contains("no answer"), "{cause}");
        // Reported once per task.timeout.ms.
        assert_eq!(s.stuck(a, t0 + secs(6), TASK), None);

        // Paused for a minute, then fetching again: the pause is not counted.
        let mut s = stream();
        let t0 = s.last_progress;
        let idle = s.activity(false, true, false);
        assert_eq!(idle, Activity::Idle);
        assert_eq!(s.stuck(idle, t0 + secs(60), TASK), None);
        s.in_flight = true;
        let a = s.activity(false, false, false);
        assert_eq!(s.stuck(a, t0 + secs(64), TASK), None);
        assert!(s.stuck(a, t0 + secs(65), TASK).is_some());
    }

    #[test]
    fn a_stream_names_the_last_error_and_progress_clears_it() {
        let mut s = stream();
        let t0 = s.last_progress;
        s.failed("NOT_LEADER_OR_FOLLOWER".into(), true);
        let a = s.activity(false, false, false);
        assert_eq!(a, Activity::Failing);
        assert_eq!(
            s.stuck(a, t0 + secs(5), TASK).as_deref(),
            Some("NOT_LEADER_OR_FOLLOWER")
        );
        s.progressed();
        assert_eq!(s.activity(false, false, false), Activity::Ready);
        let t1 = s.last_progress;
        assert_eq!(s.stuck(Activity::Ready, t1 + secs(4), TASK), None);
        // A position lookup in flight counts for the main stream; no position and no lookup
        // wanted is idle.
        let mut s = stream();
        s.fetch_offset = None;
        assert_eq!(s.activity(true, false, true), Activity::InFlight);
        assert_eq!(s.activity(false, false, true), Activity::Ready);
        assert_eq!(s.activity(false, false, false), Activity::Idle);
    }
}
