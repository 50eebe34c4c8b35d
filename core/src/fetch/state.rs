//! A partition's fetch state: its position, its main stream and (KIP-333) its recovery stream,
//! each stream a fetch cursor with its buffer of records ready for `poll()` and its own KIP-572
//! task clock. Nothing here does I/O; [`super::apply`] moves this state on from fetch answers and
//! [`super::task`] sends the fetches.
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::backoff::{Backoff, Retry};
use crate::buffers::Held;
use crate::cluster::Lane;
use crate::metrics::window::Windowed;
use crate::protocol::records::{Record, RecordSpans};
use crate::recovery::{self, RecoveryRange, RecoveryState, UnprocessedRecovery};
use crate::types::OffsetAndMetadata;

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
    /// KIP-320: the leader epoch of the position, the epoch of the batch holding the last record
    /// delivered (the committed offset's epoch before any); -1 when unknown (after a seek or a
    /// reset), which asks the broker for no check.
    pub position_epoch: i32,
    /// Where the records delivered changed leader epoch lately: (offset of the first record
    /// delivered in the epoch, epoch), oldest first, at most [`EPOCH_STARTS_KEPT`]. A commit of
    /// an offset the position has passed finds its epoch here ([`PartitionState::epoch_at`]).
    pub epoch_starts: VecDeque<(i64, i32)>,
    /// KIP-320: the leader epoch the position is known to be right under (the Java client's
    /// `FetchPosition.currentLeader`): the epoch of the leader it was validated against, or that
    /// answered the ListOffsets it came from, or the metadata's when it had no epoch to check;
    /// -1 when none. Metadata naming a newer leader epoch has the position validated before the
    /// next fetch ([`super::validate`]).
    pub leader_epoch: i32,
    /// KIP-320: the position waits for validation against a new leader; meanwhile neither stream
    /// fetches nor hands out records.
    pub validation: Option<Validation>,
    pub lookup: Option<PositionLookup>,
    /// Set while a position lookup for this partition is running.
    pub lookup_in_flight: bool,
    pub paused: bool,
    /// Bumped by seek/reset: a fetch or lookup answer for an older cursor is dropped.
    pub cursor: u64,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// The last stable offset the last fetch answer named (-1 before any, or when the broker
    /// named none): where a read_committed consumer's reading ends.
    pub last_stable_offset: i64,
    /// The group's committed offset for this partition as this consumer last knew it: fetched
    /// by the position lookup, or taken by a commit of this consumer. `None` when the group has
    /// none (or the consumer has no group).
    pub committed_offset: Option<i64>,
    /// Records and key + value bytes handed to the application from this partition (both
    /// streams) since it was assigned: counted where [`PartitionState::pop`] takes them, under
    /// the fetch lock it already holds.
    pub records_delivered: u64,
    pub bytes_delivered: u64,
    /// The main stream: fetches from `position` on, with no upper bound. Position lookups count
    /// their failures here too.
    pub main: Stream,
    /// KIP-333: the recovery stream draining the backlog ranges, while any are unfinished.
    pub recovery: Option<Recovery>,
    /// KIP-333: the group's committed offset the takeover of this partition started from, below
    /// which nothing held may take a commit (see [`recovery::commit_point`]).
    pub committed_at_takeover: Option<i64>,
    /// `parallel.rebalance.recovery.poll`: the recovery batches handed out and not processed
    /// yet. Part of this state so that they end with it, however the partition leaves.
    pub unprocessed: UnprocessedRecovery,
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

/// A position's validation against a new leader (KIP-320).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Validation {
    /// The leader epoch the metadata names, sent as the request's `current_leader_epoch`.
    pub leader_epoch: i32,
    /// An OffsetForLeaderEpoch request for it is waiting for its answer.
    pub in_flight: bool,
}

/// How many leader epoch changes of its delivered records a partition remembers for commits.
pub(crate) const EPOCH_STARTS_KEPT: usize = 8;

/// Which of a partition's two fetch cursors a fetch or a record belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum StreamKind {
    Main,
    Recovery,
}

impl StreamKind {
    /// The connection its fetches go on: a main stream's fetch waiting at the log end must not
    /// hold up the recovery stream's.
    pub(super) fn lane(self) -> Lane {
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
    /// KIP-320: the leader epoch of the last batch fetched below `fetch_offset` (-1 when
    /// unknown), sent as the Fetch's `last_fetched_epoch` so that the leader can tell whether its
    /// log still holds what was fetched.
    pub fetch_epoch: i32,
    /// Fetched records; each counts [`record_size`] bytes against the buffer limits.
    pub buffer: RecordBuffer,
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
    /// Attempts that failed since the stream was made (the partition assigned): a count that
    /// only grows, beside the KIP-572 state above that progress clears.
    pub errors: u64,
    pub stuck_reported_at: Option<Instant>,
    /// The last turn of the fetch task found the stream idle and left it so (it sent nothing
    /// for it): the idle time lasts until the change that wakes the task for its next turn (a
    /// resume, a drained buffer, a seek), however long after the last turn that comes. The
    /// planner clears it when it sends the stream's fetch, lookup or validation.
    pub was_idle: bool,
    /// The whole first batch did not fit `max.partition.fetch.bytes`: put this partition first in
    /// the next request, where the broker returns at least one whole batch (KIP-74).
    pub oversized: bool,
    /// When an answer last brought the stream records, in answers that brought any stream
    /// records (0: never). A fetch names its partitions least recently served first, as the
    /// Java client does: the broker fills its answer in request order, so with a `max_bytes`
    /// the budget lowered, the partitions named last would otherwise never get records.
    pub answered_at: u64,
}

impl Stream {
    pub(super) fn new(backoff: Backoff) -> Stream {
        Stream {
            fetch_offset: None,
            fetch_epoch: -1,
            buffer: RecordBuffer::default(),
            buffered_bytes: 0,
            in_flight: false,
            retry: Retry::new(backoff),
            next_attempt: Instant::now(),
            last_progress: Instant::now(),
            failing: false,
            last_error: None,
            errors: 0,
            stuck_reported_at: None,
            was_idle: false,
            oversized: false,
            answered_at: 0,
        }
    }

    pub(super) fn clear_buffer(&mut self) -> usize {
        self.buffer.clear();
        std::mem::take(&mut self.buffered_bytes)
    }

    pub(super) fn failed(&mut self, why: String, backoff_wait: bool) {
        let now = Instant::now();
        self.failing = true;
        self.last_error = Some(why);
        self.errors += 1;
        if backoff_wait {
            self.next_attempt = now + self.retry.failed();
        }
    }

    pub(super) fn progressed(&mut self) {
        self.last_progress = Instant::now();
        self.failing = false;
        self.stuck_reported_at = None;
        self.last_error = None;
        self.retry.succeeded();
    }

    /// What the stream is doing now, for KIP-572's clock. `lookup_in_flight`: a position lookup
    /// for it is under way; `idle_by_choice`: the application keeps it from fetching (paused,
    /// buffers full).
    pub(super) fn activity(
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
    pub(super) fn stuck(
        &mut self,
        activity: Activity,
        now: Instant,
        task_timeout: Duration,
    ) -> Option<String> {
        // The fetch task plans a turn when something changes, not on a clock: a stream left
        // idle by the last turn stayed idle until now.
        if activity == Activity::Idle || std::mem::take(&mut self.was_idle) {
            self.last_progress = now;
        }
        self.was_idle = activity == Activity::Idle;
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
    pub(super) fn buffer_full(&self, max_partition_fetch_bytes: i32) -> bool {
        self.buffered_bytes >= 2 * max_partition_fetch_bytes.max(0) as usize
    }

    /// Whether the fetch loop may send a fetch for this stream now.
    pub(super) fn wants_fetch(&self, now: Instant, max_partition_fetch_bytes: i32) -> Option<i64> {
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

/// Offsets left in `ranges`.
fn backlog_of(ranges: &[RecoveryRange]) -> i64 {
    ranges.iter().map(|r| (r.end - r.next).max(0)).sum()
}

/// KIP-333: a partition's backlog ranges and the stream that drains them, first range first.
///
/// `ranges` move as records are *delivered* (they are what gets committed); the stream's
/// `fetch_offset` runs ahead of them as records are *fetched*, within the range ending at
/// `fetch_end`. The main stream's position is the partition's `position` alone: a commit builds
/// its [`RecoveryState`] from both.
pub(crate) struct Recovery {
    /// The unfinished backlog ranges, sorted, each below the main stream's position.
    pub ranges: Vec<RecoveryRange>,
    pub stream: Stream,
    /// The end of the range the stream fetches from now: records at or above it belong to a
    /// later range or to the main stream and are dropped from a recovery fetch.
    pub fetch_end: i64,
    /// Offsets of the backlog drained (delivered or passed), windowed: the drain rate.
    drained: Windowed,
    /// The backlog when [`Recovery::note_drained`] last looked.
    backlog_seen: i64,
}

impl Recovery {
    /// The recovery stream for `state`'s ranges, or `None` when there are none. `epoch`: the
    /// leader epoch of the record before its first fetch offset where known (the committed
    /// offset's, KIP-320), else -1.
    pub(super) fn start(state: RecoveryState, backoff: Backoff, epoch: i32) -> Option<Recovery> {
        let (next, end) = state.next_fetches().recovery?;
        let mut stream = Stream::new(backoff);
        stream.fetch_offset = Some(next);
        stream.fetch_epoch = epoch;
        let backlog = backlog_of(&state.ranges);
        Some(Recovery {
            ranges: state.ranges,
            stream,
            fetch_end: end,
            drained: Windowed::default(),
            backlog_seen: backlog,
        })
    }

    /// Offsets left in the backlog ranges (records, control batches and compacted-away offsets
    /// alike: an upper bound of the records left).
    pub fn backlog(&self) -> i64 {
        backlog_of(&self.ranges)
    }

    /// Records what the backlog shrank by since the last look, at `now`: once per batch taken
    /// (and per settle), never per record. A backlog that grew is taken as it is.
    pub(super) fn note_drained(&mut self, now: impl FnOnce() -> Instant) {
        let backlog = self.backlog();
        if backlog < self.backlog_seen {
            self.drained
                .record((self.backlog_seen - backlog) as f64, now());
        }
        self.backlog_seen = backlog;
    }

    /// Offsets of the backlog drained per second, over the last 30 to 60 s (the Java client's
    /// `Rate`, as `records-consumed-rate`): 0 before anything drained.
    pub fn drain_rate(&self, now: Instant) -> f64 {
        self.drained.rate(now)
    }

    /// The stream fetched everything below `next` in its current range, the last batch of leader
    /// epoch `epoch` (KIP-320): carry on there, or move on to the next range once this one is
    /// fetched to its end (nothing left: `None`). The record before the next range's start was
    /// not fetched, so its epoch is unknown there (-1): an older epoch sent with a later offset
    /// would have the leader answer with a divergence that is not one.
    pub(super) fn fetched_to(&mut self, next: i64, epoch: i32) {
        if next < self.fetch_end {
            self.stream.fetch_offset = Some(next);
            self.stream.fetch_epoch = epoch;
            return;
        }
        let fetch_end = self.fetch_end;
        self.stream.fetch_epoch = -1;
        match self.ranges.iter().find(|r| r.start >= fetch_end) {
            Some(r) => {
                self.stream.fetch_offset = Some(r.next);
                self.fetch_end = r.end;
            }
            None => self.stream.fetch_offset = None,
        }
    }

    /// With nothing buffered, every offset below the fetch cursor was delivered or does not exist
    /// (control batches, compaction, a range's tail): the ranges move up to it.
    pub(super) fn settle(&mut self) {
        if !self.stream.buffer.is_empty() {
            return;
        }
        let frontier = self.stream.fetch_offset.unwrap_or(i64::MAX);
        while let Some(first) = self.ranges.first().copied() {
            if first.next >= frontier {
                break;
            }
            recovery::ranges_skipped_to(&mut self.ranges, frontier.min(first.end));
            if self.ranges.first() == Some(&first) {
                break;
            }
        }
    }

    /// Drops what the stream buffered, to fetch it again: from the first unfinished range's
    /// next offset (the ranges move only as records are delivered), in no known epoch (KIP-320:
    /// the stream's epoch is that of the last batch it fetched, above that offset, and the epoch
    /// of the record before the offset is not kept). Returns the bytes dropped.
    pub(super) fn rewind(&mut self) -> usize {
        let freed = self.stream.clear_buffer();
        match self.ranges.first() {
            Some(r) => {
                self.stream.fetch_offset = Some(r.next);
                self.fetch_end = r.end;
            }
            None => self.stream.fetch_offset = None,
        }
        self.stream.fetch_epoch = -1;
        freed
    }

    /// The largest end over the unfinished ranges.
    pub(super) fn max_end(&self) -> i64 {
        self.ranges.last().map_or(i64::MIN, |r| r.end)
    }

    pub(super) fn done(&self) -> bool {
        self.ranges.is_empty() && self.stream.buffer.is_empty()
    }
}

impl PartitionState {
    pub fn new(topic: &str, lookup: PositionLookup, backoff: Backoff) -> PartitionState {
        PartitionState {
            topic: Arc::from(topic),
            position: None,
            position_epoch: -1,
            epoch_starts: VecDeque::new(),
            leader_epoch: -1,
            validation: None,
            lookup: Some(lookup),
            lookup_in_flight: false,
            paused: false,
            cursor: 0,
            high_watermark: -1,
            log_start_offset: -1,
            last_stable_offset: -1,
            committed_offset: None,
            records_delivered: 0,
            bytes_delivered: 0,
            main: Stream::new(backoff),
            recovery: None,
            committed_at_takeover: None,
            unprocessed: UnprocessedRecovery::default(),
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

    /// Whether a stream has records for `poll()`.
    pub fn has_records(&self) -> bool {
        !self.main.buffer.is_empty()
            || self
                .recovery
                .as_ref()
                .is_some_and(|r| !r.stream.buffer.is_empty())
    }

    /// Drops the records both streams buffered, to be fetched again (from the position, and
    /// from the first unfinished recovery range): a paused partition's records give way when
    /// they hold the budget others need. An answer in flight for the old fetch offsets is
    /// dropped when it comes. Returns the bytes dropped.
    pub(super) fn drop_buffered(&mut self) -> usize {
        let mut freed = 0;
        if !self.main.buffer.is_empty() {
            freed += self.main.clear_buffer();
            self.main.fetch_offset = self.position;
            self.main.fetch_epoch = self.position_epoch;
        }
        if let Some(rc) = self.recovery.as_mut() {
            if !rc.stream.buffer.is_empty() {
                freed += rc.rewind();
            }
        }
        freed
    }

    /// Moves the cursor: drops what is buffered, any answer in flight and (KIP-333) the recovery
    /// ranges: the application chose where to read from.
    pub fn seek(&mut self, offset: i64) -> usize {
        let freed = self.cancel_recovery() + self.main.clear_buffer();
        self.position = Some(offset);
        self.main.fetch_offset = Some(offset);
        // The application chose the offset, not a record: its epoch is unknown (as the Java
        // client's seek leaves it), and no check is asked until a batch is fetched.
        self.position_epoch = -1;
        self.epoch_starts.clear();
        self.main.fetch_epoch = -1;
        self.validation = None;
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
        self.position_epoch = -1;
        self.epoch_starts.clear();
        self.main.fetch_offset = None;
        self.main.fetch_epoch = -1;
        self.leader_epoch = -1;
        self.validation = None;
        self.lookup = Some(lookup);
        self.cursor += 1;
        freed
    }

    /// A looked-up position: the main stream starts at `offset`, the record before it of leader
    /// epoch `epoch` where known (a committed offset's, or a ListOffsets answer's, KIP-320), the
    /// position known right under leader epoch `leader_epoch` (-1: to be validated once the
    /// metadata names one, if `epoch` is known).
    pub(super) fn start_at(&mut self, offset: i64, epoch: i32, leader_epoch: i32) {
        self.position = Some(offset);
        self.main.fetch_offset = Some(offset);
        self.position_epoch = epoch;
        self.main.fetch_epoch = epoch;
        self.leader_epoch = leader_epoch;
        self.lookup = None;
        self.progressed();
    }

    /// Whether `poll()` may hand out this partition's records now: not while paused, nor while
    /// its position waits for validation against a new leader (what is buffered was fetched
    /// from the old one, and may be gone from the log).
    pub fn delivers(&self) -> bool {
        !self.paused && self.validation.is_none()
    }

    /// With nothing buffered, the position is the fetch offset, and its epoch the last fetched.
    pub(super) fn position_caught_up(&mut self) {
        if self.main.fetch_offset > self.position {
            self.position = self.main.fetch_offset;
            self.position_epoch = self.main.fetch_epoch;
        }
    }

    /// KIP-320: the main stream starts again from `offset` of leader epoch `epoch` (the
    /// position after a log truncation, or the point where the leader's log diverged): what
    /// was buffered is dropped, and with it any answer in flight; recovery ranges end at
    /// `offset` ([`PartitionState::truncate_recovery_at`]). Returns the bytes freed.
    pub(super) fn restart_at(&mut self, offset: i64, epoch: i32) -> usize {
        let mut freed = self.main.clear_buffer();
        freed += self.truncate_recovery_at(offset);
        self.position = Some(offset);
        self.position_epoch = epoch;
        self.epoch_starts.clear();
        self.main.fetch_offset = Some(offset);
        self.main.fetch_epoch = epoch;
        self.validation = None;
        self.lookup = None;
        self.cursor += 1;
        freed
    }

    /// KIP-320: the log from `offset` on is not what was read (a truncation): the recovery
    /// ranges end there, as a commit of `offset` would end them ([`RecoveryState::committed_at`]):
    /// their records below it are still in the log and still owed, those from it on are gone
    /// (the main stream reads what the log holds there now). A recovery stream that fetched past
    /// `offset` starts its ranges again ([`Recovery::rewind`]); none left, it ends. Returns the bytes
    /// freed.
    pub(super) fn truncate_recovery_at(&mut self, offset: i64) -> usize {
        let Some(rc) = self.recovery.as_mut() else {
            return 0;
        };
        let max_end = rc.max_end();
        if offset >= max_end {
            return 0; // every range, and all the stream fetched, lies below the truncation
        }
        let kept = RecoveryState {
            main_next: max_end,
            ranges: std::mem::take(&mut rc.ranges),
        }
        .committed_at(offset)
        .ranges;
        if kept.is_empty() {
            return self.cancel_recovery();
        }
        tracing::info!(topic = %self.topic, offset, ranges = ?kept, "recovery ranges end at the truncation");
        rc.ranges = kept;
        // What the truncation took from the backlog was not drained: not in the drain rate.
        rc.backlog_seen = rc.backlog();
        rc.rewind()
    }

    /// KIP-320: the leader epoch to commit with `offset` (the next record to read): the
    /// position's epoch at the position; below it, the epoch of the record before `offset` where
    /// the records delivered lately say it; else -1 (unknown: the broker keeps none).
    pub fn epoch_at(&self, offset: i64) -> i32 {
        if self.position == Some(offset) {
            return self.position_epoch;
        }
        if self.position.is_none_or(|p| offset > p) {
            return -1;
        }
        let last = offset - 1;
        match self
            .epoch_starts
            .iter()
            .rev()
            .find(|&&(start, _)| start <= last)
        {
            // Only an epoch whose start was seen: an older one may have begun earlier.
            Some(&(_, epoch)) if self.epoch_starts.front().is_some_and(|&(s, _)| s <= last) => {
                epoch
            }
            _ => -1,
        }
    }

    /// Drops the recovery stream and its ranges; returns the bytes it had buffered.
    pub fn cancel_recovery(&mut self) -> usize {
        match self.recovery.take() {
            Some(mut r) => {
                if !r.ranges.is_empty() {
                    tracing::info!(
                        topic = %self.topic,
                        ranges = ?r.ranges,
                        "recovery ranges cancelled (seek or reset of the partition)"
                    );
                }
                r.stream.clear_buffer()
            }
            None => 0,
        }
    }

    pub(super) fn failed(&mut self, why: String, backoff_wait: bool) {
        self.main.failed(why, backoff_wait)
    }

    pub(super) fn progressed(&mut self) {
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
                let (r, size, epoch) = self.main.buffer.pop()?;
                self.main.buffered_bytes -= size;
                self.position = Some(r.offset + 1);
                self.position_epoch = epoch;
                if self.epoch_starts.back().is_none_or(|&(_, e)| e != epoch) {
                    if self.epoch_starts.len() == EPOCH_STARTS_KEPT {
                        self.epoch_starts.pop_front();
                    }
                    self.epoch_starts.push_back((r.offset, epoch));
                }
                (r, size)
            }
            StreamKind::Recovery => {
                let rc = self.recovery.as_mut()?;
                let (r, size, _) = rc.stream.buffer.pop()?;
                rc.stream.buffered_bytes -= size;
                recovery::range_delivered(&mut rc.ranges, r.offset);
                (r, size)
            }
        };
        self.records_delivered += 1;
        self.bytes_delivered += (r.key.as_ref().map_or(0, |k| k.len())
            + r.value.as_ref().map_or(0, |v| v.len())) as u64;
        Some((r, size))
    }

    /// After a poll took records: a stream with nothing buffered moves past what its fetches
    /// skipped (transaction markers, compacted-away offsets), as the Java client's position does,
    /// so commits and lag reach the end of the log; a recovery stream with nothing left ends.
    pub fn after_drain(&mut self) {
        if self.main.buffer.is_empty() {
            self.position_caught_up();
        }
        if let Some(rc) = self.recovery.as_mut() {
            rc.settle();
            rc.note_drained(Instant::now);
            if rc.done() {
                tracing::info!(topic = %self.topic, "recovery stream finished its backlog");
                self.recovery = None;
            }
        }
    }

    /// What a commit of this partition's progress says (`None` before it has a position):
    /// [`PartitionState::commit_point`] of the consumed positions.
    pub fn commit_offset(&self) -> Option<OffsetAndMetadata> {
        self.commit_point(None)
    }

    /// What a commit of this partition says, of its progress (`asked: None`) or of an offset the
    /// application asked for: [`recovery::commit_point`] of the state as handed out, the
    /// recovery batches still held and the takeover's committed offset. `None` before the
    /// partition has a position.
    pub fn commit_point(&self, asked: Option<&OffsetAndMetadata>) -> Option<OffsetAndMetadata> {
        let delivered = RecoveryState {
            main_next: self.position?,
            ranges: self
                .recovery
                .as_ref()
                .map(|rc| rc.ranges.clone())
                .unwrap_or_default(),
        };
        Some(recovery::commit_point(
            &delivered,
            self.unprocessed.batches(),
            asked,
            self.committed_at_takeover,
        ))
    }

    /// Each stream that may fetch now, with its offset: none while the position waits for
    /// validation (KIP-320).
    pub(super) fn fetchable(
        &self,
        now: Instant,
        max_partition_fetch_bytes: i32,
    ) -> Vec<(StreamKind, i64)> {
        let mut out = Vec::new();
        if self.validation.is_some() {
            return out;
        }
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

    /// KIP-320: the `last_fetched_epoch` a fetch of the `kind` stream sends: the leader epoch of
    /// the last batch that stream fetched below its fetch offset, -1 when unknown (no check).
    /// A recovery stream checks its own: its ranges lie below the main stream's position, but
    /// the main stream's epoch may be unknown (a takeover's main stream starts from a token,
    /// with no record read yet), and a recovery fetch that goes first would otherwise read what
    /// a new leader wrote at offsets that were truncated.
    pub(super) fn last_fetched_epoch(&self, kind: StreamKind) -> i32 {
        match kind {
            StreamKind::Main => self.main.fetch_epoch,
            StreamKind::Recovery => self.recovery.as_ref().map_or(-1, |r| r.stream.fetch_epoch),
        }
    }

    /// Records at or above it do not belong to a fetch of the `kind` stream: the end of the
    /// recovery stream's current range; no limit for the main stream.
    pub(super) fn fetch_limit(&self, kind: StreamKind) -> i64 {
        match (kind, &self.recovery) {
            (StreamKind::Recovery, Some(rc)) => rc.fetch_end,
            _ => i64::MAX,
        }
    }

    pub(super) fn stream_mut(&mut self, kind: StreamKind) -> Option<&mut Stream> {
        match kind {
            StreamKind::Main => Some(&mut self.main),
            StreamKind::Recovery => self.recovery.as_mut().map(|r| &mut r.stream),
        }
    }
}

/// The records of one fetched batch a stream took, in offset order; their keys and values stay
/// spans of `data` until taken (see [`RecordSpans`]).
/// Its span vector goes back to its pool when the batch is dropped (see `crate::buffers`).
#[derive(Debug)]
pub(crate) struct BufferedBatch {
    pub data: Bytes,
    pub records: Held<RecordSpans>,
    /// The batch's partition leader epoch (-1 for none): a record taken from it puts the
    /// position in this epoch (KIP-320).
    pub leader_epoch: i32,
}

/// A stream's buffer of fetched records: whole batches, each handed out record by record. A
/// taken record's key and value are sliced from its batch's data on the thread that takes it.
#[derive(Debug, Default)]
pub(crate) struct RecordBuffer {
    batches: VecDeque<BufferedBatch>,
    /// How many records of the front batch were taken.
    taken: usize,
}

impl RecordBuffer {
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }

    /// Appends the records of a batch (none is an empty batch: not kept).
    pub fn push(&mut self, batch: BufferedBatch) {
        if !batch.records.is_empty() {
            self.batches.push_back(batch);
        }
    }

    pub fn clear(&mut self) {
        self.batches.clear();
        self.taken = 0;
    }

    /// The next record, the bytes it counted ([`record_size`]) and the leader epoch of its
    /// batch (KIP-320), read here with the batch already in hand.
    pub fn pop(&mut self) -> Option<(Record, usize, i32)> {
        let front = self.batches.front_mut()?;
        let epoch = front.leader_epoch;
        let spans = &mut front.records[self.taken];
        let size = record_size(spans);
        let record = spans.take_record(&front.data);
        self.taken += 1;
        if self.taken == front.records.len() {
            self.batches.pop_front();
            self.taken = 0;
        }
        Some((record, size, epoch))
    }
}

/// Approximate memory a record holds in the prefetch buffer.
pub(crate) fn record_size(r: &RecordSpans) -> usize {
    64 + r.key.map_or(0, |k| k.len())
        + r.value.map_or(0, |v| v.len())
        + r.headers
            .iter()
            .map(|h| h.key.len() + h.value.as_ref().map_or(0, |v| v.len()))
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::records::Span;

    #[test]
    fn the_drain_rate_counts_backlog_offsets_delivered_or_passed_per_batch() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let state = RecoveryState {
            main_next: 1_000,
            ranges: vec![
                RecoveryRange {
                    start: 0,
                    end: 100,
                    next: 0,
                },
                RecoveryRange {
                    start: 200,
                    end: 300,
                    next: 250,
                },
            ],
        };
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        let mut r = Recovery::start(state, backoff, -1).unwrap();
        assert_eq!(r.backlog(), 150);
        r.note_drained(|| at(0));
        assert_eq!(r.drain_rate(at(0)), 0.0, "nothing drained yet");
        // A batch of 10 records delivered (offsets 0 to 9), then 30 offsets passed (compacted).
        for offset in 0..10 {
            recovery::range_delivered(&mut r.ranges, offset);
        }
        r.note_drained(|| at(1_000));
        recovery::ranges_skipped_to(&mut r.ranges, 40);
        r.note_drained(|| at(2_000));
        assert_eq!(r.backlog(), 110);
        // 40 offsets over the 1 s since the first sample started and one whole window (30 s).
        assert_eq!(r.drain_rate(at(2_000)), 40.0 / 31.0);
        // No change: nothing recorded (no time asked for either).
        r.note_drained(|| unreachable!("nothing drained"));
        // The first range finished: 60 more, in the second sample.
        recovery::ranges_skipped_to(&mut r.ranges, 100);
        r.note_drained(|| at(31_000));
        assert_eq!(r.backlog(), 50);
        assert_eq!(r.drain_rate(at(31_000)), 100.0 / 30.0);
        // Two windows after the first sample started it is gone: 60 over the 30 s since the
        // second started.
        assert_eq!(r.drain_rate(at(61_000)), 60.0 / 30.0);
    }

    const TASK: Duration = Duration::from_secs(5);

    fn secs(s: u64) -> Duration {
        Duration::from_secs(s)
    }

    fn spans(offset: i64, value: Option<(u32, u32)>) -> RecordSpans {
        RecordSpans {
            offset,
            timestamp: 0,
            key: None,
            value: value.map(|(start, len)| Span { start, len }),
            headers: Vec::new(),
        }
    }

    /// Bytes whose buffer reports being freed.
    struct Watched(Vec<u8>, Arc<std::sync::atomic::AtomicBool>);

    impl AsRef<[u8]> for Watched {
        fn as_ref(&self) -> &[u8] {
            &self.0
        }
    }

    impl Drop for Watched {
        fn drop(&mut self) {
            self.1.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }

    /// Records come out in order across batches, their values sliced from their own batch's data
    /// and counted as when buffered; an empty batch is not kept, and a batch taken to its end is
    /// let go of at once.
    #[test]
    fn a_record_buffer_hands_out_batches_in_order_and_lets_each_go_when_taken() {
        let freed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let first = Bytes::from_owner(Watched(b"abcdef".to_vec(), freed.clone()));
        let second = Bytes::from(b"uvwxyz".to_vec());
        let batches = [
            (first, vec![spans(7, Some((0, 2))), spans(8, Some((2, 4)))]),
            (Bytes::new(), Vec::new()),
            (
                second.clone(),
                vec![spans(9, None), spans(10, Some((5, 1)))],
            ),
        ];
        let sizes: Vec<usize> = batches
            .iter()
            .flat_map(|(_, records)| records.iter().map(record_size))
            .collect();
        let mut buffer = RecordBuffer::default();
        for (data, records) in batches {
            buffer.push(BufferedBatch {
                data,
                records: records.into(),
                leader_epoch: -1,
            });
        }
        let mut taken = Vec::new();
        let mut popped = 0;
        while let Some((r, size, _)) = buffer.pop() {
            taken.push((r.offset, r.value, size));
            popped += 1;
            if popped == 2 {
                let expected = [
                    (7, Some(Bytes::from_static(b"ab")), sizes[0]),
                    (8, Some(Bytes::from_static(b"cdef")), sizes[1]),
                ];
                assert_eq!(taken, expected);
                assert!(!freed.load(std::sync::atomic::Ordering::SeqCst));
                // The first batch is all taken: once its records are dropped, nothing holds
                // its data.
                taken.clear();
                assert!(
                    freed.load(std::sync::atomic::Ordering::SeqCst),
                    "the buffer still holds a batch it handed out"
                );
            }
        }
        assert!(buffer.is_empty());
        let expected = [
            (9, None, sizes[2]),
            (10, Some(second.slice(5..6)), sizes[3]),
        ];
        assert_eq!(taken, expected);
        assert_eq!(sizes[0], 64 + 2);
    }

    /// A batch's vector of spans goes back to its consumer's pool once its last record is
    /// taken, for the next batch decoded to fill (see `crate::buffers`); the ledger counts it
    /// as lent until then, as kept after.
    #[test]
    fn a_batch_taken_to_its_end_gives_its_spans_back() {
        let buffers = crate::buffers::FetchBuffers::new();
        let pool = &buffers.batches.spans;
        let len = 61_111;
        let mut records = pool.take(len);
        records.extend((0..len as i64).map(|o| spans(o, Some((0, 1)))));
        let at = records.as_ptr();
        let bytes = records.capacity() * std::mem::size_of::<RecordSpans>();
        let mut buffer = RecordBuffer::default();
        buffer.push(BufferedBatch {
            data: Bytes::from_static(b"v"),
            records: crate::buffers::Pool::hold(pool, records),
            leader_epoch: -1,
        });
        assert_eq!((buffers.ledger.lent(), buffers.ledger.kept()), (bytes, 0));
        for _ in 1..len {
            buffer.pop().unwrap();
        }
        assert!(!pool.keeps(at), "given back while records are left");
        let (last, _, _) = buffer.pop().unwrap();
        assert_eq!(last.offset, len as i64 - 1);
        assert!(buffer.is_empty());
        assert!(pool.keeps(at));
        assert_eq!((buffers.ledger.lent(), buffers.ledger.kept()), (0, bytes));
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

    /// The fetch task looks at the clock only on turns, which an idle consumer has seldom: a
    /// stream paused at one turn and resumed an hour later counts from the resume, not from
    /// its last progress before the pause.
    #[test]
    fn idle_time_between_two_turns_does_not_count() {
        let t0 = Instant::now();
        let mut s = Stream::new(Backoff::new(secs(1), secs(1)));
        s.last_progress = t0;
        assert_eq!(s.stuck(Activity::Idle, t0 + secs(1), TASK), None);
        let resumed = t0 + secs(3600);
        assert_eq!(s.stuck(Activity::Ready, resumed, TASK), None);
        assert_eq!(s.last_progress, resumed);
        // From then on the clock runs: stuck task.timeout.ms after the resume.
        assert_eq!(s.stuck(Activity::Ready, resumed + secs(4), TASK), None);
        assert_eq!(
            s.stuck(Activity::Ready, resumed + TASK, TASK).as_deref(),
            Some("no progress for 5000 ms")
        );
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

        // Paused for a minute, then fetching again: the pause is not counted. A fetch sent at
        // the turn that found it idle counts from that turn...
        let mut s = stream();
        let t0 = s.last_progress;
        let idle = s.activity(false, true, false);
        assert_eq!(idle, Activity::Idle);
        assert_eq!(s.stuck(idle, t0 + secs(60), TASK), None);
        s.in_flight = true;
        s.was_idle = false; // as the planner leaves a stream it sends
        let a = s.activity(false, false, false);
        assert_eq!(s.stuck(a, t0 + secs(64), TASK), None);
        assert!(s.stuck(a, t0 + secs(65), TASK).is_some());
        // ... one resumed later, from the turn the resume woke.
        let mut s = stream();
        assert_eq!(s.stuck(idle, t0 + secs(60), TASK), None);
        s.in_flight = true;
        assert_eq!(s.stuck(a, t0 + secs(64), TASK), None);
        assert_eq!(s.stuck(a, t0 + secs(68), TASK), None);
        assert!(s.stuck(a, t0 + secs(69), TASK).is_some());
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
