//! Recovery streams (KIP-333, `enable.parallel.rebalance`): the pure bookkeeping of one
//! partition's main stream and its backlog ranges, and the commit-metadata token that carries them
//! from one owner of the partition to the next. No I/O happens here.
//!
//! # What it owns, and why
//!
//! When a member takes a partition over and its committed offset C lags the log end E by at least
//! `parallel.rebalance.min.lag`, the main stream starts at E and a recovery stream drains the
//! backlog `[C, E)` at the same time. [`RecoveryState`] records, per partition:
//!
//! - `main_next`: the next offset the main stream delivers (its consumer position);
//! - `ranges`: the backlog ranges not yet drained, each `[start, end)` with its own `next`.
//!
//! Kafka keeps one committed offset per partition, so the offset this member commits is the
//! [low-water mark](RecoveryState::low_water_mark): the smallest next offset over the unfinished
//! ranges and the main stream. Every record below it has been delivered, so any client that takes
//! the partition over (Java, librdkafka, lagless with the mode off) stays at-least-once. The
//! finer state travels in the commit's metadata string as a [token](RecoveryState::token); a
//! lagless member with the mode on resumes from it exactly, and a token it does not trust (foreign,
//! corrupt, stale) is ignored with a warning: the takeover then starts from the committed offset,
//! which is never above an undelivered record.
//!
//! # Invariants (checked by [`RecoveryState::validate`], kept by every method)
//!
//! 1. Offsets are non-negative: `0 <= start <= next <= end` for every range.
//! 2. `ranges` is sorted and non-overlapping: each range starts at or after the previous one's end.
//!    Ranges may touch.
//! 3. Every range lies below the main stream: `end <= main_next`. The main stream starts where the
//!    backlog ends and only moves forward, so no offset is owed by two streams at once. A token with
//!    `m` below a range's end is rejected: it would have the main stream deliver the range again and
//!    its low-water mark would not say what was delivered.
//! 4. The set of undelivered offsets is `[next, end)` of each range plus `[main_next, ∞)`, and the
//!    low-water mark is its minimum: the first range's `next`, else `main_next`.
//! 5. After [`RecoveryState::on_assignment`], the low-water mark equals the committed offset the
//!    takeover started from: resuming never moves the group's offset, up or down.
//!
//! Methods keep the state *normal*: a finished range (`next == end`) is dropped at once, and a
//! range that touches the previous one and has not started (`next == start`) is merged into it,
//! which loses nothing. Ranges that have both made progress stay apart; merging them would
//! re-deliver records. Only when the token would not fit `offset.metadata.max.bytes` (4096) does
//! [`RecoveryState::token`] merge ranges at a cost, cheapest first: covering a gap re-delivers
//! records (allowed under at-least-once), and no offset undelivered in the state is ever left out.
//!
//! # Commits
//!
//! A commit of the consumed positions stores the state as it is. An explicit commit of offset X
//! stores [`RecoveryState::committed_at`]: the state with everything from X on owed again, so the
//! token never claims a record the application did not commit, nor one this member did not
//! deliver.
//!
//! # Streams
//!
//! The recovery stream drains the ranges in order, the first one first: it fetches from the first
//! range's `next` and delivers only records below that range's `end` (records at or above it belong
//! to a later range or to the main stream). [`RecoveryState::next_fetches`] says where each stream
//! starts. Order within each stream is kept; order across them is not (the seed's 1,2,3,6,4,7,5,8).
//!
//! # A recovery thread (`parallel.rebalance.recovery.poll`)
//!
//! With recovery records handed to a second thread by `recovery_poll()`, the ranges above move as
//! records are *handed out*, which is not when they are *processed*. Every commit is
//! [`commit_point`] of the partition's delivered state and the batches still held
//! ([`UnprocessedRecovery`]): a batch counts once the same thread makes its next
//! `recovery_poll()`, the same convention `poll()` and auto-commit follow on one thread, and a
//! batch whose partition left this member no longer counts at all.
//!
//! # Token
//!
//! `lagless1;m=<main next>;r=<start>-<end>@<next>,...` with the ranges in order and an empty list
//! when there are none (`lagless1;m=120;r=`). Numbers are decimal without sign or leading zeros.
//! The parser is strict: anything else is [`Error::Corrupt`] with what is wrong.
use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::error::{Error, Result};
use crate::types::OffsetAndMetadata;

/// The largest commit metadata a broker accepts by default (`offset.metadata.max.bytes`).
pub const MAX_TOKEN_BYTES: usize = 4096;

/// The token's prefix, before its version number.
const TOKEN_PREFIX: &str = "lagless";
/// The token version this code writes and reads.
const TOKEN_VERSION: &str = "1";

/// One backlog range [start, end) being drained by a recovery stream; `next` is the next offset to
/// deliver (start <= next <= end).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecoveryRange {
    /// The first offset of the backlog range.
    pub start: i64,
    /// The end of the range, exclusive: records from here on belong to a later range or to the
    /// main stream.
    pub end: i64,
    /// The next offset the recovery stream delivers from this range.
    pub next: i64,
}

impl RecoveryRange {
    fn finished(&self) -> bool {
        self.next >= self.end
    }
}

/// The per-partition recovery state: the main stream's next offset and the unfinished ranges
/// (sorted, non-overlapping, all below `main_next`; see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RecoveryState {
    /// The next offset the main stream delivers: the partition's consumer position.
    pub main_next: i64,
    /// The backlog ranges not yet drained, in offset order.
    pub ranges: Vec<RecoveryRange>,
}

/// Where each stream's fetch cursor starts (after an assignment or a seek). The fetch path then
/// keeps its own prefetch cursors, as it does for positions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextFetches {
    /// The main stream fetches from here, with no upper bound.
    pub main: i64,
    /// The recovery stream fetches from `.0` and delivers records below `.1` only; `None` when no
    /// range is left.
    pub recovery: Option<(i64, i64)>,
}

impl RecoveryState {
    /// A state with only a main stream at `offset`.
    pub fn at(offset: i64) -> RecoveryState {
        RecoveryState {
            main_next: offset,
            ranges: Vec::new(),
        }
    }

    /// The state for a takeover of a partition with committed offset `committed` (and the commit's
    /// metadata, if any) whose log ends at `log_end`, given `min_lag`
    /// (`parallel.rebalance.min.lag`).
    ///
    /// - A token that parses and whose low-water mark equals `committed` is resumed. If the log
    ///   has grown at least `min_lag` records past the token's main stream, the range
    ///   `[m, log_end)` is added and the main stream starts at `log_end` (the seed's second crash);
    ///   otherwise the main stream carries on from `m`.
    /// - Without a usable token: if `log_end - committed >= min_lag`, the main stream starts at
    ///   `log_end` with one range `[committed, log_end)`; else the main stream starts at
    ///   `committed` with no ranges.
    ///
    /// A range is only made for a positive lag. A foreign, corrupt, oversized or stale token gives
    /// a `tracing` warning and is ignored; an empty one is no token. Either way the result's
    /// low-water mark is `committed`. A negative `committed` (nothing committed: the caller applies
    /// `auto.offset.reset`) gives a state at `committed` with no ranges.
    pub fn on_assignment(
        committed: i64,
        metadata: Option<&str>,
        log_end: i64,
        min_lag: i64,
    ) -> RecoveryState {
        if committed < 0 {
            return RecoveryState::at(committed);
        }
        let resumed = match metadata {
            None | Some("") => None,
            Some(m) => match RecoveryState::parse_token(m) {
                Ok(st) if st.low_water_mark() == committed => Some(st),
                Ok(st) => {
                    tracing::warn!(
                        committed,
                        token_low_water_mark = st.low_water_mark(),
                        "ignoring a recovery token that does not match the committed offset \
                         (a later commit did not carry it); resuming at the committed offset"
                    );
                    None
                }
                Err(e) => {
                    tracing::warn!(
                        committed,
                        error = %e,
                        "ignoring commit metadata that is not a usable recovery token; resuming at the committed offset"
                    );
                    None
                }
            },
        };
        let mut st = resumed.unwrap_or_else(|| RecoveryState::at(committed));
        let lag = log_end.saturating_sub(st.main_next);
        if lag > 0 && lag >= min_lag {
            tracing::debug!(
                from = st.main_next,
                to = log_end,
                "backlog gets a recovery stream; the main stream starts at the log end"
            );
            st.ranges.push(RecoveryRange {
                start: st.main_next,
                end: log_end,
                next: st.main_next,
            });
            st.main_next = log_end;
            st.normalize();
        }
        debug_assert!(st.validate().is_ok(), "{st:?}");
        st
    }

    /// The offset the group may commit: the smallest next offset over the unfinished ranges and
    /// the main stream. Every record below it has been delivered.
    pub fn low_water_mark(&self) -> i64 {
        // Ranges are sorted, non-overlapping and below main_next, and each unfinished range's
        // next is below its end: the first range's next is the smallest.
        self.ranges.first().map_or(self.main_next, |r| r.next)
    }

    /// A record at `offset` was delivered from the recovery stream: the range holding it moves
    /// past it, and is dropped once finished. An offset no range still owes is ignored.
    // For the tests and the fuzz targets: the fetch path tracks its ranges itself (fetch/state).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn recovery_delivered(&mut self, offset: i64) {
        range_delivered(&mut self.ranges, offset);
    }

    /// The recovery stream passed every offset below `next` in the range it drains without
    /// anything more to deliver (control batches, compacted-away records, a range's tail): the
    /// first range moves to `next` (at most its end) and is dropped if finished.
    // For the tests and the fuzz targets: the fetch path tracks its ranges itself (fetch/state).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn recovery_skipped_to(&mut self, next: i64) {
        ranges_skipped_to(&mut self.ranges, next);
    }

    /// Whether a recovery stream still has a range to drain.
    pub fn is_active(&self) -> bool {
        !self.ranges.is_empty()
    }

    /// The state a commit of `offset` by the application stores for this partition: what the
    /// next owner must still deliver once this member is gone.
    ///
    /// A commit of offset X says "the records below X are processed" and nothing about the
    /// records from X on. Kafka's plain rule (resume at X) would skip the backlog ranges below X
    /// that were never delivered, so the commit claims only what both sides know is done:
    ///
    /// > **owed(result) = owed(self) ∪ [X, ∞)**
    ///
    /// where owed(s) is `[next, end)` of each range of s plus `[main_next, ∞)` (what the state
    /// still owes; see the module documentation). A record is claimed as done only if this member
    /// delivered it *and* it lies below X; every offset at or above X comes again, whether or not
    /// it was delivered, and every offset not delivered comes again, whether or not it lies below
    /// X. The committed offset is the result's low-water mark, `min(self.low_water_mark(), X)`.
    /// Case by case:
    ///
    /// - **X at or past the main stream's next offset** (everything delivered, or beyond it):
    ///   the state as it is; a commit never claims records that were not delivered.
    /// - **X between the low-water mark and the main stream** (on the main stream, or inside or
    ///   between ranges): the main stream resumes at X; ranges wholly below X are kept as they
    ///   are; a range holding X ends at X (its records from X on are owed by the main stream from
    ///   X again); ranges from X on are dropped (the main stream from X covers them). Drained
    ///   parts of those ranges and main-stream records from X on are delivered again: that is the
    ///   uncommitted window.
    /// - **X at or below the low-water mark**: a state at X with no ranges, i.e. a plain commit of
    ///   X (everything from X on comes again).
    ///
    /// The commit of the consumed positions (auto-commit, `commit()` without offsets, the commit
    /// before a revocation) is the first case with X = `main_next`: the state itself.
    /// Offsets below zero are taken as zero.
    pub fn committed_at(&self, offset: i64) -> RecoveryState {
        if offset >= self.main_next {
            return self.clone();
        }
        let x = offset.max(0);
        let mut st = RecoveryState {
            main_next: x,
            ranges: self
                .ranges
                .iter()
                .take_while(|r| r.start < x)
                .map(|r| {
                    let end = r.end.min(x);
                    RecoveryRange {
                        start: r.start,
                        end,
                        next: r.next.min(end),
                    }
                })
                .collect(),
        };
        st.normalize();
        debug_assert!(st.validate().is_ok(), "{st:?}");
        st
    }

    /// What a commit of this state stores: the low-water mark, with the token as metadata.
    pub fn commit_offset(&self) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset: self.low_water_mark(),
            metadata: self.token(),
        }
    }

    /// Whether a record at `offset` is still owed by one of the streams.
    // For the tests and the fuzz targets: the fetch path tracks its ranges itself (fetch/state).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn is_undelivered(&self, offset: i64) -> bool {
        if offset >= self.main_next {
            return true;
        }
        let i = self.ranges.partition_point(|r| r.end <= offset);
        self.ranges
            .get(i)
            .is_some_and(|r| r.next <= offset && offset < r.end)
    }

    /// Where each stream fetches from: the main stream from `main_next`; the recovery stream from
    /// the first unfinished range's `next`, delivering records below its `end` only.
    pub fn next_fetches(&self) -> NextFetches {
        NextFetches {
            main: self.main_next,
            recovery: self.ranges.first().map(|r| (r.next, r.end)),
        }
    }

    /// `seek()`: cancels the partition's ranges; the main stream goes to `offset`.
    // For the tests and the fuzz targets: the fetch path tracks its ranges itself (fetch/state).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn seek(&mut self, offset: i64) {
        self.ranges.clear();
        self.main_next = offset;
    }

    /// Checks the invariants listed in the module documentation.
    pub fn validate(&self) -> Result<()> {
        if self.main_next < 0 {
            return Err(corrupt(format!(
                "main stream offset {} is negative",
                self.main_next
            )));
        }
        let mut prev_end: Option<i64> = None;
        for r in &self.ranges {
            if r.start < 0 {
                return Err(corrupt(format!("range start {} is negative", r.start)));
            }
            if r.start > r.end {
                return Err(corrupt(format!(
                    "range {}-{} starts after its end",
                    r.start, r.end
                )));
            }
            if r.next < r.start || r.next > r.end {
                return Err(corrupt(format!(
                    "range {}-{} has its next offset {} outside it",
                    r.start, r.end, r.next
                )));
            }
            if let Some(p) = prev_end {
                if r.start < p {
                    return Err(corrupt(format!(
                        "range {}-{} starts before the previous range's end {p} (ranges must be sorted and must not overlap)",
                        r.start, r.end
                    )));
                }
            }
            if r.end > self.main_next {
                return Err(corrupt(format!(
                    "range {}-{} ends above the main stream's offset {}",
                    r.start, r.end, self.main_next
                )));
            }
            prev_end = Some(r.end);
        }
        Ok(())
    }

    /// Drops finished ranges and merges an unstarted range into the range it touches.
    fn normalize(&mut self) {
        let mut out: Vec<RecoveryRange> = Vec::with_capacity(self.ranges.len());
        for r in self.ranges.drain(..) {
            if r.finished() {
                continue;
            }
            match out.last_mut() {
                Some(last) if last.end == r.start && r.next == r.start => last.end = r.end,
                _ => out.push(r),
            }
        }
        self.ranges = out;
    }

    /// The commit-metadata token, at most [`MAX_TOKEN_BYTES`]:
    /// `lagless1;m=<main next>;r=<start>-<end>@<next>,...`.
    ///
    /// If the ranges do not fit, adjacent ranges are merged, cheapest first: merging
    /// `[a, b)@x` with `[c, d)@y` gives `[a, d)@x`, which re-delivers the `y - b` records from the
    /// first range's end to the second's next but leaves out nothing undelivered. The first
    /// range's `next` and the main stream are kept, so the token's low-water mark is this state's.
    pub fn token(&self) -> String {
        let mut ranges = self.ranges.clone();
        ranges.retain(|r| !r.finished());
        let header = TOKEN_PREFIX.len() + TOKEN_VERSION.len() + ";m=".len() + ";r=".len();
        let mut len = header + digits(self.main_next);
        for (i, r) in ranges.iter().enumerate() {
            len += usize::from(i > 0) + range_len(r);
        }
        let mut merge_after = vec![false; ranges.len()];
        if len > MAX_TOKEN_BYTES {
            // Merging across the gap after range g removes g's end, g+1's start and next, a '-',
            // an '@' and a ','; it costs re-delivering [end_g, next_{g+1}). Neither depends on
            // which other gaps are merged, so the gaps can be taken in one sorted pass.
            let mut gaps: Vec<(i64, usize, usize)> = (0..ranges.len().saturating_sub(1))
                .map(|g| {
                    let (l, r) = (&ranges[g], &ranges[g + 1]);
                    let cost = r.next.saturating_sub(l.end);
                    let saving = digits(l.end) + digits(r.start) + digits(r.next) + 3;
                    (cost, usize::MAX - saving, g)
                })
                .collect();
            gaps.sort_unstable();
            for (_, inv_saving, g) in gaps {
                if len <= MAX_TOKEN_BYTES {
                    break;
                }
                merge_after[g] = true;
                len -= usize::MAX - inv_saving;
            }
        }
        let mut merged: Vec<RecoveryRange> = Vec::with_capacity(ranges.len());
        let mut join = false;
        for (i, r) in ranges.iter().enumerate() {
            match merged.last_mut() {
                Some(last) if join => last.end = r.end,
                _ => merged.push(*r),
            }
            join = merge_after[i];
        }
        let mut s = String::with_capacity(len);
        let _ = write!(s, "{TOKEN_PREFIX}{TOKEN_VERSION};m={};r=", self.main_next);
        for (i, r) in merged.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            let _ = write!(s, "{}-{}@{}", r.start, r.end, r.next);
        }
        debug_assert!(s.len() <= MAX_TOKEN_BYTES, "{} bytes", s.len());
        s
    }

    /// Parses a token written by [`RecoveryState::token`]. Strict: a bad prefix or version, a
    /// missing or extra field, a number that is negative, has a sign, leading zeros or does not
    /// fit an i64, a range with `start > end` or `next` outside `[start, end]`, unsorted or
    /// overlapping ranges, a range ending above `m`, or more than [`MAX_TOKEN_BYTES`] are all
    /// [`Error::Corrupt`]. Finished ranges in the token are dropped and an unstarted range touching
    /// the previous one is merged into it.
    pub fn parse_token(s: &str) -> Result<RecoveryState> {
        if s.len() > MAX_TOKEN_BYTES {
            return Err(corrupt(format!(
                "{} bytes, more than the {MAX_TOKEN_BYTES} a token may have",
                s.len()
            )));
        }
        let Some(rest) = s.strip_prefix(TOKEN_PREFIX) else {
            return Err(corrupt(format!(
                "`{}` is not a lagless token (it must start with `{TOKEN_PREFIX}{TOKEN_VERSION};`)",
                excerpt(s)
            )));
        };
        let (version, rest) = rest.split_once(';').unwrap_or((rest, ""));
        if version != TOKEN_VERSION {
            return Err(corrupt(format!(
                "unsupported token version `{}` (this client reads version {TOKEN_VERSION})",
                excerpt(version)
            )));
        }
        let Some(rest) = rest.strip_prefix("m=") else {
            return Err(corrupt(format!(
                "expected `m=` after `{TOKEN_PREFIX}{TOKEN_VERSION};`, found `{}`",
                excerpt(rest)
            )));
        };
        let Some((main, list)) = rest.split_once(";r=") else {
            return Err(corrupt(format!(
                "expected `m=<offset>;r=<ranges>`, found `m={}`",
                excerpt(rest)
            )));
        };
        let main_next = number(main, "main stream offset `m`")?;
        let mut ranges = Vec::new();
        if !list.is_empty() {
            for item in list.split(',') {
                let Some((span, next)) = item.split_once('@') else {
                    return Err(corrupt(format!(
                        "range `{}` is not `<start>-<end>@<next>`",
                        excerpt(item)
                    )));
                };
                let Some((start, end)) = span.split_once('-') else {
                    return Err(corrupt(format!(
                        "range `{}` is not `<start>-<end>@<next>`",
                        excerpt(item)
                    )));
                };
                ranges.push(RecoveryRange {
                    start: number(start, "range start")?,
                    end: number(end, "range end")?,
                    next: number(next, "range next offset")?,
                });
            }
        }
        let mut st = RecoveryState { main_next, ranges };
        st.validate()?;
        st.normalize();
        Ok(st)
    }
}

/// A record at `offset` was delivered from the recovery stream: the range of `ranges` (sorted,
/// unfinished) holding it moves past it (offsets skipped in between do not exist: compaction,
/// control records). A range that reaches its end is dropped. An offset no range still owes is
/// ignored.
pub(crate) fn range_delivered(ranges: &mut Vec<RecoveryRange>, offset: i64) {
    // The first range whose end is above `offset` is the only one that can hold it.
    let i = ranges.partition_point(|r| r.end <= offset);
    if let Some(r) = ranges.get_mut(i) {
        if r.next <= offset {
            r.next = offset + 1; // offset < end <= i64::MAX
            if r.finished() {
                ranges.remove(i);
            }
        }
    }
}

/// The recovery stream passed every offset below `next` in the range it drains (the first of
/// `ranges`) without anything more to deliver: control batches, compacted-away records, a range's
/// tail. Call it only once every record below `next` in that range has been delivered. The range
/// moves to `next` (at most its end) and is dropped if finished.
pub(crate) fn ranges_skipped_to(ranges: &mut Vec<RecoveryRange>, next: i64) {
    if let Some(r) = ranges.first_mut() {
        if next > r.next {
            r.next = next.min(r.end);
            if r.finished() {
                ranges.remove(0);
            }
        }
    }
}

/// `parallel.rebalance.recovery.poll`: the recovery records of one partition that
/// `recovery_poll()` handed out and the application may still be processing, per calling thread.
///
/// On one thread, a record `poll()` returned counts as processed when the next `poll()` is made:
/// that is when auto-commit runs, on the same thread. With recovery records processed on another
/// thread, a commit made on the poll thread (auto-commit, `commit_sync()` of the consumed
/// positions, the commit before a revocation or on close) may run while that thread is still
/// inside a batch, so "handed out" is not "processed". This keeps, for each caller whose last
/// `recovery_poll()` handed records of the partition out, the partition's ranges as they were
/// just *before* that call took them; every commit goes through [`commit_point`], which owes
/// everything any of those ranges owed. The caller's next `recovery_poll()` says its batch is
/// processed ([`UnprocessedRecovery::processed`]).
///
/// Batches are kept per caller (thread) because "the next call" is a thread's own: with two
/// threads calling `recovery_poll()`, one thread's call says nothing about the batch the other
/// is still processing.
///
/// It is part of the partition's fetch state and ends with it: whichever way the partition
/// leaves this member (revoked in an eager or a cooperative rebalance, lost to
/// `max.poll.interval.ms` or a fenced generation, unsubscribed, dropped from `assign()`, the
/// consumer closed), every thread's batch of it goes with its state. A batch out when its
/// partition leaves is no longer this member's to count (the Java client's rule for a revoked
/// partition: its in-flight work no longer counts); the commit before the revocation, if any,
/// stopped at it, so the next owner delivers it again. Duplicates, never a gap. A partition that
/// comes back comes back as a new state holding nothing, so the thread still inside the old batch
/// says nothing of the new assignment, and its next call finds nothing of its own to release.
/// A seek keeps the state, and with it the batches: the partition is still this member's.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UnprocessedRecovery {
    before: BTreeMap<u64, Vec<RecoveryRange>>,
}

impl UnprocessedRecovery {
    /// `recovery_poll()` called by `caller` is about to hand out records of the partition, whose
    /// ranges (as delivered so far) are `ranges`. Only the first call per batch counts: the
    /// ranges before the batch owe every record of it.
    pub fn handing_out(&mut self, caller: u64, ranges: &[RecoveryRange]) {
        self.before.entry(caller).or_insert_with(|| ranges.to_vec());
    }

    /// `caller` is done with every record of the partition it was handed so far (its next
    /// `recovery_poll()`).
    pub fn processed(&mut self, caller: u64) {
        self.before.remove(&caller);
    }

    /// The ranges before each batch out, one slice per caller.
    pub fn batches(&self) -> impl Iterator<Item = &[RecoveryRange]> {
        self.before.values().map(Vec::as_slice)
    }
}

/// What a commit of one partition says: the one decision behind every commit path (auto-commit,
/// `commit_sync()` and `commit_async()` with or without offsets, the commit before a revocation
/// or on close), from
///
/// - `delivered`: the partition's state as handed out (the main stream at the consumer position,
///   the ranges as the streams moved them);
/// - `held`: for each batch `recovery_poll()` handed out of it that is not processed yet, the
///   ranges before the batch ([`UnprocessedRecovery`]);
/// - `asked`: the offset an explicit commit asks for; `None` for the consumed positions;
/// - `floor`: the group's committed offset this assignment of the partition started from, when
///   it was a takeover (`None`: no floor).
///
/// The state committed owes what `delivered` owes and what any held batch owed from `floor` on
/// ([`owed_by_either`]); with `asked`, that state committed at its offset
/// ([`RecoveryState::committed_at`]). While that state has ranges, the commit is its low-water
/// mark with its token; without, it is the plain commit any client makes: the position (empty
/// metadata) or `asked` as it is (its metadata kept).
///
/// Never backwards: a held batch owes nothing below `floor`, whatever it was taken from. Every
/// record below the group's committed offset was processed by the group's word when this
/// assignment began, so nothing this member holds may take the group back below it: the result
/// is below `floor` only when the application put it there itself (`asked` below it, or a seek
/// below it in `delivered`), as the Java client commits what it is told to.
pub fn commit_point<'a>(
    delivered: &RecoveryState,
    held: impl IntoIterator<Item = &'a [RecoveryRange]>,
    asked: Option<&OffsetAndMetadata>,
    floor: Option<i64>,
) -> OffsetAndMetadata {
    let floor = floor.unwrap_or(0);
    let st = held.into_iter().fold(delivered.clone(), |st, before| {
        let from_floor: Vec<RecoveryRange> = before
            .iter()
            .filter(|r| r.end > floor)
            .map(|r| RecoveryRange {
                start: r.start.max(floor),
                end: r.end,
                next: r.next.max(floor),
            })
            .collect();
        owed_by_either(&st, &from_floor)
    });
    match asked {
        None if st.is_active() => st.commit_offset(),
        None => OffsetAndMetadata {
            offset: st.main_next,
            metadata: String::new(),
        },
        Some(asked) => {
            let st = st.committed_at(asked.offset);
            if st.is_active() {
                st.commit_offset()
            } else {
                asked.clone()
            }
        }
    }
}

/// The state owing every offset `delivered` owes and every offset `[next, end)` of `held` owes:
///
/// > **owed(result) = owed(delivered) ∪ owed(held)**, with `main_next` = `delivered.main_next`.
///
/// Parts of `held` at or above the main stream are owed by it already and are left out (a seek
/// may have moved it below them). In the usual case `held` is an earlier state of the same ranges
/// (they only move forward), which owes everything `delivered` owes: the result is `held` as it
/// was. Otherwise (a seek or a new assignment in between) the union is built interval by interval
/// and a range's `start` is the smallest start of what it covers that stays above the previous
/// range; it owes exactly the union still.
pub fn owed_by_either(delivered: &RecoveryState, held: &[RecoveryRange]) -> RecoveryState {
    let main_next = delivered.main_next;
    let mut all: Vec<RecoveryRange> = delivered
        .ranges
        .iter()
        .chain(held)
        .filter(|r| r.next < r.end && r.next < main_next)
        .map(|r| RecoveryRange {
            start: r.start,
            end: r.end.min(main_next),
            next: r.next,
        })
        .collect();
    all.sort_by_key(|r| (r.next, r.start));
    let mut ranges: Vec<RecoveryRange> = Vec::with_capacity(all.len());
    for r in all {
        let n = ranges.len();
        if n > 0 && r.next <= ranges[n - 1].end {
            // Overlapping or touching what is owed already: one owed interval, starting where
            // the earliest of its parts did but not below the range before it.
            let floor = if n > 1 { ranges[n - 2].end } else { 0 };
            let last = &mut ranges[n - 1];
            last.end = last.end.max(r.end);
            last.start = last.start.min(r.start).max(floor);
        } else {
            let floor = ranges.last().map_or(0, |l| l.end);
            ranges.push(RecoveryRange {
                start: r.start.max(floor),
                end: r.end,
                next: r.next,
            });
        }
    }
    let mut st = RecoveryState { main_next, ranges };
    st.normalize();
    debug_assert!(st.validate().is_ok(), "{st:?}");
    st
}

fn corrupt(what: String) -> Error {
    Error::Corrupt(format!("recovery token: {what}"))
}

/// At most 40 characters of `s`, for error messages about untrusted input.
fn excerpt(s: &str) -> String {
    const MAX: usize = 40;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

/// A non-negative decimal i64 without sign or leading zeros.
fn number(s: &str, what: &str) -> Result<i64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(corrupt(format!(
            "{what} `{}` is not a non-negative decimal number",
            excerpt(s)
        )));
    }
    if s.len() > 1 && s.starts_with('0') {
        return Err(corrupt(format!(
            "{what} `{}` has leading zeros",
            excerpt(s)
        )));
    }
    s.parse::<i64>().map_err(|_| {
        corrupt(format!(
            "{what} `{}` does not fit a 64-bit offset",
            excerpt(s)
        ))
    })
}

/// Decimal digits of a non-negative number (a '-' counts for a negative one).
fn digits(n: i64) -> usize {
    let sign = usize::from(n < 0);
    let mut v = n.unsigned_abs();
    let mut d = 1;
    while v >= 10 {
        v /= 10;
        d += 1;
    }
    d + sign
}

fn range_len(r: &RecoveryRange) -> usize {
    digits(r.start) + digits(r.end) + digits(r.next) + 2
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use std::ops::Range;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tracing_subscriber::layer::{Context, Layer};
    use tracing_subscriber::prelude::*;

    fn range(start: i64, end: i64, next: i64) -> RecoveryRange {
        RecoveryRange { start, end, next }
    }

    /// The main stream delivered `offset`: in the client the partition's position moves (the
    /// fetch path owns it); here the state's `main_next` stands for it.
    fn main_delivered(st: &mut RecoveryState, offset: i64) {
        st.main_next = st.main_next.max(offset + 1);
    }

    /// Counts warnings logged while `f` runs (on this thread).
    fn warnings<T>(f: impl FnOnce() -> T) -> (T, usize) {
        struct Count(Arc<AtomicUsize>);
        impl<S: tracing::Subscriber> Layer<S> for Count {
            fn on_event(&self, e: &tracing::Event<'_>, _: Context<'_, S>) {
                if *e.metadata().level() == tracing::Level::WARN {
                    self.0.fetch_add(1, Ordering::SeqCst);
                }
            }
        }
        let n = Arc::new(AtomicUsize::new(0));
        let sub = tracing_subscriber::registry().with(Count(n.clone()));
        let out = tracing::subscriber::with_default(sub, f);
        let count = n.load(Ordering::SeqCst);
        (out, count)
    }

    /// The lowest offset still owed, by brute force over the ranges.
    fn lowest_undelivered(st: &RecoveryState) -> i64 {
        st.ranges
            .iter()
            .map(|r| r.next)
            .chain([st.main_next])
            .min()
            .unwrap()
    }

    #[test]
    fn seed_example_drains_the_backlog_beside_the_main_stream() {
        // Crash at 100, last checkpoint 70, log grown to 120.
        let mut st = RecoveryState::on_assignment(70, None, 120, 10);
        assert_eq!(st.main_next, 120);
        assert_eq!(st.ranges, vec![range(70, 120, 70)]);
        assert!(st.is_active());
        assert_eq!(st.low_water_mark(), 70);
        assert_eq!(
            st.next_fetches(),
            NextFetches {
                main: 120,
                recovery: Some((70, 120))
            }
        );
        // Interleave: two main records, then one recovery record, while new records arrive.
        let mut main = 120..;
        let mut rec = 70..120;
        let mut delivered_rec = Vec::new();
        loop {
            for _ in 0..2 {
                main_delivered(&mut st, main.next().unwrap());
                assert_eq!(st.low_water_mark(), lowest_undelivered(&st));
            }
            let Some(o) = rec.next() else { break };
            st.recovery_delivered(o);
            delivered_rec.push(o);
            let lwm = st.low_water_mark();
            assert_eq!(lwm, lowest_undelivered(&st));
            if o < 119 {
                // Never past the lowest undelivered offset of the unfinished range.
                assert_eq!(lwm, o + 1);
                assert!(st.is_active());
                assert!(st.is_undelivered(o + 1) && !st.is_undelivered(o));
            }
        }
        assert_eq!(delivered_rec, (70..120).collect::<Vec<_>>());
        // 70..119 all delivered: the range is gone and the main stream is the low-water mark.
        assert!(!st.is_active());
        assert!(st.ranges.is_empty());
        assert_eq!(st.low_water_mark(), st.main_next);
        assert_eq!(st.main_next, 120 + 2 * 51);
        assert_eq!(st.token(), format!("lagless1;m={};r=", st.main_next));
    }

    #[test]
    fn token_format() {
        let mut st = RecoveryState::on_assignment(70, None, 120, 10);
        for o in 70..75 {
            st.recovery_delivered(o);
        }
        main_delivered(&mut st, 120);
        assert_eq!(st.token(), "lagless1;m=121;r=70-120@75");
        assert_eq!(RecoveryState::parse_token(&st.token()).unwrap(), st);
        assert_eq!(RecoveryState::default().token(), "lagless1;m=0;r=");
    }

    #[test]
    fn seed_second_crash_after_the_first_range_finished() {
        // Checkpoint 140 (nothing left of the first backlog), log end 190.
        let st = RecoveryState::parse_token("lagless1;m=140;r=").unwrap();
        let next = RecoveryState::on_assignment(140, Some(&st.token()), 190, 10);
        assert_eq!(next.main_next, 190);
        assert_eq!(next.ranges, vec![range(140, 190, 140)]);
        assert_eq!(next.low_water_mark(), 140);
    }

    #[test]
    fn second_crash_with_a_range_unfinished_resumes_it_and_adds_one() {
        let mut st = RecoveryState::on_assignment(70, None, 120, 10);
        for o in 70..100 {
            st.recovery_delivered(o);
        }
        for o in 120..170 {
            main_delivered(&mut st, o);
        }
        let committed = st.low_water_mark();
        assert_eq!(committed, 100);
        let token = st.token();
        assert_eq!(token, "lagless1;m=170;r=70-120@100");
        // Crash; the next owner finds the log at 190.
        let (next, warned) =
            warnings(|| RecoveryState::on_assignment(committed, Some(&token), 190, 10));
        assert_eq!(warned, 0);
        assert_eq!(next.main_next, 190);
        assert_eq!(next.ranges, vec![range(70, 120, 100), range(170, 190, 170)]);
        assert_eq!(next.low_water_mark(), 100);
        assert_eq!(next.next_fetches().recovery, Some((100, 120)));
        // Not enough new lag: the main stream carries on from the token's m.
        let small = RecoveryState::on_assignment(committed, Some(&token), 175, 10);
        assert_eq!(small.main_next, 170);
        assert_eq!(small.ranges, vec![range(70, 120, 100)]);
        // The range drains, then the new one.
        let mut next = next;
        for o in 100..120 {
            next.recovery_delivered(o);
        }
        assert_eq!(next.ranges, vec![range(170, 190, 170)]);
        assert_eq!(next.low_water_mark(), 170);
    }

    #[test]
    fn a_new_range_touching_an_unfinished_one_merges_into_it() {
        // The main stream never moved past the first backlog's end before the crash.
        let token = "lagless1;m=120;r=70-120@100";
        let st = RecoveryState::on_assignment(100, Some(token), 190, 10);
        assert_eq!(st.ranges, vec![range(70, 190, 100)]);
        assert_eq!(st.main_next, 190);
        assert_eq!(st.low_water_mark(), 100);
    }

    #[test]
    fn foreign_and_empty_metadata_resume_at_the_committed_offset() {
        for (meta, expect_warning) in [
            ("", false),
            ("hello", true),
            ("{\"app\":\"spark\",\"batch\":17}", true),
            ("lagless2;m=70;r=", true),
            ("laglessX", true),
            ("LAGLESS1;m=70;r=", true),
        ] {
            let (st, warned) = warnings(|| RecoveryState::on_assignment(70, Some(meta), 75, 10));
            assert_eq!(st, RecoveryState::at(70), "{meta:?}");
            assert_eq!(warned > 0, expect_warning, "{meta:?}");
            let st = RecoveryState::on_assignment(70, Some(meta), 120, 10);
            assert_eq!(st.ranges, vec![range(70, 120, 70)], "{meta:?}");
            assert_eq!(st.main_next, 120);
        }
        assert_eq!(
            RecoveryState::on_assignment(70, None, 75, 10),
            RecoveryState::at(70)
        );
    }

    const CORRUPT: &[&str] = &[
        "lagless1",
        "lagless1;",
        "lagless1;m=",
        "lagless1;m=120",
        "lagless1;m=120;r=70-120@7",   // next below start
        "lagless1;m=120;r=70-1",       // truncated
        "lagless1;m=120;r=70-120@",    // truncated
        "lagless1;m=120;r=70-120@75,", // trailing comma
        "lagless1;m=120;r=70-120@75,,80-90@80",
        "lagless1;m=12x;r=",
        "lagless1;m=-5;r=",
        "lagless1;m=+5;r=",
        "lagless1;m= 5;r=",
        "lagless1;m=05;r=",
        "lagless1;m=9223372036854775808;r=", // i64::MAX + 1
        "lagless1;m=99999999999999999999999999;r=", // far beyond i64
        "lagless1;m=120;r=70-120@121",       // next > end
        "lagless1;m=120;r=90-80@85",         // start > end
        "lagless1;m=120;r=80-90@80,10-20@10", // out of order
        "lagless1;m=120;r=10-50@10,40-60@40", // overlapping
        "lagless1;m=100;r=70-120@75",        // main below a range's end
        "lagless1;m=120;r=70-120@75;x=1",    // extra field
        "lagless1;r=70-120@75;m=120",        // fields swapped
        "lagless1;m=120;r=70_120@75",
        "lagless1;m=120;r=70-120-130@75",
        "lagless1;m=120;r=70-120@75@76",
        "lagless1;m=１２０;r=", // non-ASCII digits
    ];

    #[test]
    fn corrupt_tokens_are_errors_with_a_message() {
        for t in CORRUPT {
            match RecoveryState::parse_token(t) {
                Err(Error::Corrupt(m)) => assert!(m.starts_with("recovery token: "), "{m}"),
                other => panic!("{t:?} gave {other:?}"),
            }
        }
        let big = format!("lagless1;m=1;r={}", "0".repeat(5000));
        let e = RecoveryState::parse_token(&big).unwrap_err();
        assert!(e.to_string().contains("4096"), "{e}");
        // i64::MAX itself is a valid offset.
        let max = format!("lagless1;m={};r=1-{}@2", i64::MAX, i64::MAX);
        let st = RecoveryState::parse_token(&max).unwrap();
        assert_eq!(st.token(), max);
    }

    #[test]
    fn corrupt_or_stale_tokens_warn_and_resume_at_the_committed_offset() {
        let stale = [
            "lagless1;m=500;r=",           // lwm above the committed offset
            "lagless1;m=120;r=70-120@60",  // invalid anyway
            "lagless1;m=120;r=10-120@50",  // lwm 50 below the committed offset
            "lagless1;m=120;r=70-120@110", // lwm 110 above the committed offset
        ];
        for t in CORRUPT.iter().chain(stale.iter()) {
            let (st, warned) = warnings(|| RecoveryState::on_assignment(70, Some(t), 75, 10));
            assert_eq!(warned, 1, "{t:?}");
            assert_eq!(st, RecoveryState::at(70), "{t:?}");
            let (st, _) = warnings(|| RecoveryState::on_assignment(70, Some(t), 5000, 10));
            assert_eq!(st.ranges, vec![range(70, 5000, 70)], "{t:?}");
            assert_eq!(st.low_water_mark(), 70, "{t:?}");
        }
    }

    #[test]
    fn min_lag_threshold() {
        assert_eq!(
            RecoveryState::on_assignment(70, None, 79, 10),
            RecoveryState::at(70)
        );
        assert_eq!(
            RecoveryState::on_assignment(70, None, 80, 10).ranges,
            vec![range(70, 80, 70)]
        );
        // min_lag 0: any backlog, but never an empty range.
        assert_eq!(
            RecoveryState::on_assignment(70, None, 70, 0),
            RecoveryState::at(70)
        );
        assert_eq!(
            RecoveryState::on_assignment(70, None, 71, 0).ranges,
            vec![range(70, 71, 70)]
        );
        // A log end behind the committed offset (truncation) or unknown gives no range.
        assert_eq!(
            RecoveryState::on_assignment(70, None, 50, 0),
            RecoveryState::at(70)
        );
        assert_eq!(
            RecoveryState::on_assignment(70, None, i64::MIN, 0),
            RecoveryState::at(70)
        );
        // Nothing committed: the caller's auto.offset.reset applies.
        assert_eq!(
            RecoveryState::on_assignment(-1, Some("lagless1;m=0;r="), 100, 1),
            RecoveryState::at(-1)
        );
    }

    #[test]
    fn seek_cancels_ranges() {
        let mut st = RecoveryState::on_assignment(70, None, 120, 10);
        st.seek(30);
        assert!(!st.is_active());
        assert_eq!(st.low_water_mark(), 30);
        assert_eq!(st.next_fetches().recovery, None);
    }

    #[test]
    fn deliveries_outside_the_ranges_are_ignored() {
        let mut st = RecoveryState::on_assignment(70, None, 120, 10);
        st.recovery_delivered(75);
        st.recovery_delivered(72); // already passed
        st.recovery_delivered(60); // below every range
        st.recovery_delivered(130); // the main stream's
        assert_eq!(st.ranges, vec![range(70, 120, 76)]);
    }

    #[test]
    fn a_range_ending_in_control_records_finishes_by_skipping() {
        let mut st = RecoveryState::on_assignment(70, None, 120, 10);
        for o in 70..118 {
            st.recovery_delivered(o);
        }
        // 118 and 119 are transaction markers: nothing to deliver, the fetch moves past them.
        assert_eq!(st.low_water_mark(), 118);
        st.recovery_skipped_to(117);
        assert_eq!(st.low_water_mark(), 118);
        st.recovery_skipped_to(125); // a batch crossing the range's end
        assert!(!st.is_active());
        assert_eq!(st.low_water_mark(), 120);
    }

    /// A random valid state; `scale` spreads offsets so numbers get long.
    fn random_state(rng: &mut StdRng, max_ranges: usize, scale: i64) -> RecoveryState {
        let n = rng.gen_range(0..=max_ranges);
        let mut at = rng.gen_range(0..1000) * scale;
        let mut ranges = Vec::with_capacity(n);
        for _ in 0..n {
            let start = at
                + if rng.gen_bool(0.3) {
                    0
                } else {
                    rng.gen_range(0..20) * scale
                };
            let len = rng.gen_range(1..30) * scale + rng.gen_range(0..scale.max(1));
            let end = start + len;
            let next = if rng.gen_bool(0.3) {
                start
            } else {
                rng.gen_range(start..end)
            };
            ranges.push(range(start, end, next));
            at = end;
        }
        let main_next = at + rng.gen_range(0..50) * scale;
        let st = RecoveryState { main_next, ranges };
        st.validate().unwrap();
        st
    }

    /// Every offset `before` still owes, `after` owes too: by intervals, so it works for any size.
    fn assert_covers(after: &RecoveryState, before: &RecoveryState) {
        assert!(after.main_next <= before.main_next);
        let mut j = 0;
        for r in before.ranges.iter().filter(|r| r.next < r.end) {
            let (mut lo, hi) = (r.next, r.end);
            while lo < hi {
                if lo >= after.main_next {
                    break;
                }
                while j < after.ranges.len() && after.ranges[j].end <= lo {
                    j += 1;
                }
                let a = after.ranges.get(j).unwrap_or_else(|| {
                    panic!("offset {lo} undelivered before, delivered after: {after:?}")
                });
                assert!(
                    a.next <= lo,
                    "offset {lo} undelivered before, delivered after (range {a:?})"
                );
                lo = a.end;
            }
        }
    }

    #[test]
    fn token_round_trip_never_drops_an_undelivered_offset() {
        let mut rng = StdRng::seed_from_u64(0x1a61e55);
        for case in 0..600 {
            let (max_ranges, scale) = match case % 4 {
                0 => (5, 1),
                1 => (60, 3),
                2 => (3000, 1),
                _ => (3000, 1_000_000_000_000),
            };
            let st = random_state(&mut rng, max_ranges, scale);
            let token = st.token();
            assert!(token.len() <= MAX_TOKEN_BYTES, "{} bytes", token.len());
            let back = RecoveryState::parse_token(&token)
                .unwrap_or_else(|e| panic!("case {case}: {e}: {token}"));
            assert_eq!(back.main_next, st.main_next);
            assert_eq!(back.low_water_mark(), st.low_water_mark());
            assert_covers(&back, &st);
            if scale == 1 {
                for o in 0..=st.main_next + 2 {
                    if st.is_undelivered(o) {
                        assert!(back.is_undelivered(o), "case {case}: offset {o}");
                    }
                }
            }
            // A parsed state is normal: its token gives it back.
            assert_eq!(RecoveryState::parse_token(&back.token()).unwrap(), back);
            // A takeover from it resumes exactly there.
            let resumed =
                RecoveryState::on_assignment(st.low_water_mark(), Some(&token), st.main_next, 1);
            assert_eq!(resumed, back);
        }
    }

    #[test]
    fn thousands_of_ranges_fit_and_merge_the_cheapest_gaps() {
        // 3000 ranges, half of them untouched and one record apart from their neighbour.
        let mut ranges = Vec::new();
        for i in 0..3000i64 {
            let start = 1_000_000_000 + i * 100;
            let next = if i % 2 == 0 { start + 50 } else { start };
            ranges.push(range(start, start + 99, next));
        }
        let st = RecoveryState {
            main_next: 2_000_000_000,
            ranges,
        };
        st.validate().unwrap();
        let token = st.token();
        assert!(token.len() <= MAX_TOKEN_BYTES);
        assert!(token.len() > MAX_TOKEN_BYTES - 40, "{}", token.len());
        let back = RecoveryState::parse_token(&token).unwrap();
        assert!(back.ranges.len() < st.ranges.len());
        assert_covers(&back, &st);
        assert_eq!(back.low_water_mark(), st.low_water_mark());
        // The 1500 cheap gaps (1 record, before an untouched range) go first, then those before a
        // half-drained range (1 + 50 records).
        let redelivered: i64 = back.ranges.iter().map(|r| r.end - r.next).sum::<i64>()
            - st.ranges.iter().map(|r| r.end - r.next).sum::<i64>();
        let merges = (st.ranges.len() - back.ranges.len()) as i64;
        assert!(merges > 1500);
        assert_eq!(redelivered, 1500 + (merges - 1500) * 51);
    }

    #[test]
    fn any_metadata_gives_the_committed_offset_as_low_water_mark() {
        let mut rng = StdRng::seed_from_u64(333);
        let alphabet: Vec<char> = "lagless1;m=r-@,0123456789 x".chars().collect();
        for _ in 0..5000 {
            let len = rng.gen_range(0..40);
            let mut s: String = if rng.gen_bool(0.5) {
                "lagless1;m=".into()
            } else {
                String::new()
            };
            s.extend((0..len).map(|_| alphabet[rng.gen_range(0..alphabet.len())]));
            let committed = rng.gen_range(0..200);
            let log_end = rng.gen_range(0..400);
            let min_lag = rng.gen_range(0..50);
            let (st, _) =
                warnings(|| RecoveryState::on_assignment(committed, Some(&s), log_end, min_lag));
            st.validate().unwrap();
            assert_eq!(st.low_water_mark(), committed, "{s:?}");
        }
    }

    /// `committed_at` from literal states: (state's token, X, stored token, stored offset).
    const COMMITTED_AT: &[(&str, i64, &str, i64)] = &[
        // The reported case: X on the main stream, at the range's end; the main stream had
        // delivered up to 20720. The range stays, the main stream resumes at X, not at 20720.
        (
            "lagless1;m=20720;r=1000-20660@1140",
            20660,
            "lagless1;m=20660;r=1000-20660@1140",
            1140,
        ),
        // X on the main stream, past the range's end.
        (
            "lagless1;m=20720;r=1000-20660@1140",
            20700,
            "lagless1;m=20700;r=1000-20660@1140",
            1140,
        ),
        // X at the delivered position (the consumed positions), or beyond everything delivered:
        // the state as it is, never more.
        (
            "lagless1;m=20720;r=1000-20660@1140",
            20720,
            "lagless1;m=20720;r=1000-20660@1140",
            1140,
        ),
        (
            "lagless1;m=20720;r=1000-20660@1140",
            99_999,
            "lagless1;m=20720;r=1000-20660@1140",
            1140,
        ),
        // X inside the range, above what it delivered: the range ends at X, the main stream
        // re-reads from X.
        (
            "lagless1;m=20720;r=1000-20660@1140",
            5000,
            "lagless1;m=5000;r=1000-5000@1140",
            1140,
        ),
        (
            "lagless1;m=20720;r=1000-20660@1140",
            1141,
            "lagless1;m=1141;r=1000-1141@1140",
            1140,
        ),
        // X at or below the low-water mark: a plain commit of X.
        (
            "lagless1;m=20720;r=1000-20660@1140",
            1140,
            "lagless1;m=1140;r=",
            1140,
        ),
        (
            "lagless1;m=20720;r=1000-20660@1140",
            1100,
            "lagless1;m=1100;r=",
            1100,
        ),
        (
            "lagless1;m=20720;r=1000-20660@1140",
            999,
            "lagless1;m=999;r=",
            999,
        ),
        (
            "lagless1;m=20720;r=1000-20660@1140",
            0,
            "lagless1;m=0;r=",
            0,
        ),
        (
            "lagless1;m=20720;r=1000-20660@1140",
            -5,
            "lagless1;m=0;r=",
            0,
        ),
        // Several ranges: X between ranges, inside a started one, inside an untouched one, at
        // the drained point of one, and on the main stream.
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            650,
            "lagless1;m=650;r=100-200@150,300-400@300,500-600@550",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            560,
            "lagless1;m=560;r=100-200@150,300-400@300,500-560@550",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            550,
            "lagless1;m=550;r=100-200@150,300-400@300",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            520,
            "lagless1;m=520;r=100-200@150,300-400@300",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            350,
            "lagless1;m=350;r=100-200@150,300-350@300",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            300,
            "lagless1;m=300;r=100-200@150",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            250,
            "lagless1;m=250;r=100-200@150",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            151,
            "lagless1;m=151;r=100-151@150",
            150,
        ),
        (
            "lagless1;m=700;r=100-200@150,300-400@300,500-600@550",
            150,
            "lagless1;m=150;r=",
            150,
        ),
        // An untouched range touching the one before it is part of it: cut inside it...
        (
            "lagless1;m=400;r=100-200@150,200-300@200",
            250,
            "lagless1;m=250;r=100-250@150",
            150,
        ),
        // ...ranges that both made progress stay apart...
        (
            "lagless1;m=400;r=100-200@150,200-300@220",
            250,
            "lagless1;m=250;r=100-200@150,200-250@220",
            150,
        ),
        // ...and no ranges at all: a plain commit below the position, the position above it.
        ("lagless1;m=120;r=", 100, "lagless1;m=100;r=", 100),
        ("lagless1;m=120;r=", 130, "lagless1;m=120;r=", 120),
    ];

    #[test]
    fn a_commit_claims_only_delivered_records_below_its_offset() {
        for &(before, x, after, offset) in COMMITTED_AT {
            let st = RecoveryState::parse_token(before).unwrap();
            let got = st.committed_at(x);
            got.validate().unwrap();
            assert_eq!(got.token(), after, "{before} committed at {x}");
            assert_eq!(got.low_water_mark(), offset, "{before} committed at {x}");
        }
    }

    /// The state a commit of the consumed positions stores, as the consumer builds it.
    fn stored(u: &UnprocessedRecovery, delivered: &RecoveryState) -> (i64, String) {
        let om = commit_point(delivered, u.batches(), None, Some(100));
        (om.offset, om.metadata)
    }

    /// A takeover at 100 with the log ending at 200; the main stream has delivered to 230.
    fn taken_over() -> RecoveryState {
        let mut st = RecoveryState::on_assignment(100, None, 200, 10);
        st.main_next = 230;
        st
    }

    /// `recovery_poll()` hands out `offsets` of partition 0.
    fn hand_out(u: &mut UnprocessedRecovery, st: &mut RecoveryState, offsets: Range<i64>) {
        hand_out_to(T1, u, st, offsets);
    }

    /// The recovery threads of the tests.
    const T1: u64 = 1;
    const T2: u64 = 2;

    fn hand_out_to(
        caller: u64,
        u: &mut UnprocessedRecovery,
        st: &mut RecoveryState,
        offsets: Range<i64>,
    ) {
        u.handing_out(caller, &st.ranges);
        for o in offsets {
            st.recovery_delivered(o);
        }
    }

    #[test]
    fn records_handed_out_count_once_the_next_recovery_poll_is_made() {
        let mut u = UnprocessedRecovery::default();
        let mut st = taken_over();
        assert_eq!(
            stored(&u, &st),
            (100, "lagless1;m=230;r=100-200@100".into())
        );
        hand_out(&mut u, &mut st, 100..150);
        assert!(u.batches().next().is_some());
        // A commit on the poll thread while the batch is out counts none of it.
        assert_eq!(
            stored(&u, &st),
            (100, "lagless1;m=230;r=100-200@100".into())
        );
        // The next recovery_poll(): the batch is processed.
        u.processed(T1);
        assert!(u.batches().next().is_none());
        assert_eq!(
            stored(&u, &st),
            (150, "lagless1;m=230;r=100-200@150".into())
        );
        // The last batch finishes the range: handed out, the ranges are gone, but a commit still
        // owes the batch.
        hand_out(&mut u, &mut st, 150..200);
        assert!(!st.is_active());
        assert_eq!(
            stored(&u, &st),
            (150, "lagless1;m=230;r=100-200@150".into())
        );
        u.processed(T1);
        assert_eq!(stored(&u, &st), (230, String::new()));
    }

    #[test]
    fn only_the_first_hand_out_of_a_batch_sets_what_is_owed() {
        let mut u = UnprocessedRecovery::default();
        let mut st = taken_over();
        hand_out(&mut u, &mut st, 100..120);
        hand_out(&mut u, &mut st, 120..140); // the same recovery_poll() call, a second round
        assert_eq!(stored(&u, &st).0, 100);
        // Nothing held: the state as delivered.
        assert_eq!(stored(&UnprocessedRecovery::default(), &st).0, 140);
    }

    #[test]
    fn one_thread_s_next_call_says_nothing_of_another_thread_s_batch() {
        let mut u = UnprocessedRecovery::default();
        let mut st = taken_over();
        hand_out_to(T1, &mut u, &mut st, 100..130);
        hand_out_to(T2, &mut u, &mut st, 130..160);
        assert_eq!(stored(&u, &st).0, 100);
        // T2 calls again: its batch is processed, T1's is not, and owes everything from 100.
        u.processed(T2);
        assert_eq!(stored(&u, &st).0, 100);
        // T1 calls again: both are.
        u.processed(T1);
        assert_eq!(
            stored(&u, &st),
            (160, "lagless1;m=230;r=100-200@160".into())
        );
        // The other way round: T1's batch processed first, T2's still held from 190.
        hand_out_to(T1, &mut u, &mut st, 160..190);
        hand_out_to(T2, &mut u, &mut st, 190..200);
        u.processed(T1);
        assert_eq!(
            stored(&u, &st),
            (190, "lagless1;m=230;r=100-200@190".into())
        );
        u.processed(T2);
        assert_eq!(stored(&u, &st), (230, String::new()));
    }

    #[test]
    fn an_explicit_commit_while_a_batch_is_out_claims_none_of_it() {
        let mut u = UnprocessedRecovery::default();
        let mut st = taken_over();
        hand_out(&mut u, &mut st, 100..150);
        u.processed(T1);
        hand_out(&mut u, &mut st, 150..170);
        // commit_sync(Some(220)) on the poll thread: held at what was processed.
        let asked = OffsetAndMetadata {
            offset: 220,
            metadata: "mine".into(),
        };
        let got = commit_point(&st, u.batches(), Some(&asked), Some(100));
        assert_eq!(
            (got.offset, got.metadata.as_str()),
            (150, "lagless1;m=220;r=100-200@150")
        );
    }

    /// One row of [`COMMIT_POINT`]: the partition's delivered state (as a token), the ranges
    /// before each batch held (one list per thread), the offset asked, the floor, and the commit.
    struct CommitPointRow {
        case: &'static str,
        delivered: &'static str,
        held: &'static [&'static [(i64, i64, i64)]],
        asked: Option<i64>,
        floor: Option<i64>,
        want: (i64, &'static str),
    }

    /// A takeover at 100 with the log ending at 200 (floor 100) and the main stream at 230,
    /// unless a row says otherwise. An asked offset carries the metadata `app`.
    const COMMIT_POINT: &[CommitPointRow] = &[
        CommitPointRow {
            case: "no batch held, recovery active: the delivered state",
            delivered: "lagless1;m=230;r=100-200@150",
            held: &[],
            asked: None,
            floor: Some(100),
            want: (150, "lagless1;m=230;r=100-200@150"),
        },
        CommitPointRow {
            case: "no batch held, recovery finished: the position, as any client",
            delivered: "lagless1;m=230;r=",
            held: &[],
            asked: None,
            floor: Some(100),
            want: (230, ""),
        },
        CommitPointRow {
            case: "a batch held by one thread: from its first offset",
            delivered: "lagless1;m=230;r=100-200@180",
            held: &[&[(100, 200, 150)]],
            asked: None,
            floor: Some(100),
            want: (150, "lagless1;m=230;r=100-200@150"),
        },
        CommitPointRow {
            case: "batches held by two threads: from the first batch's first offset",
            delivered: "lagless1;m=230;r=100-200@190",
            held: &[&[(100, 200, 170)], &[(100, 200, 150)]],
            asked: None,
            floor: Some(100),
            want: (150, "lagless1;m=230;r=100-200@150"),
        },
        CommitPointRow {
            case: "the held batch finished the range: recovery finished, the batch still owed",
            delivered: "lagless1;m=230;r=",
            held: &[&[(100, 200, 180)]],
            asked: None,
            floor: Some(100),
            want: (180, "lagless1;m=230;r=100-200@180"),
        },
        CommitPointRow {
            case: "a batch held from before a revocation, the partition back at 300: ignored",
            delivered: "lagless1;m=540;r=300-540@300",
            held: &[&[(40, 540, 70)]],
            asked: None,
            floor: Some(300),
            want: (300, "lagless1;m=540;r=300-540@300"),
        },
        CommitPointRow {
            case: "...and back with no backlog: the position",
            delivered: "lagless1;m=540;r=",
            held: &[&[(40, 540, 70)]],
            asked: None,
            floor: Some(540),
            want: (540, ""),
        },
        CommitPointRow {
            case: "...and an explicit commit there: the offset asked",
            delivered: "lagless1;m=560;r=",
            held: &[&[(40, 540, 70)]],
            asked: Some(550),
            floor: Some(540),
            want: (550, "app"),
        },
        CommitPointRow {
            case: "asked above the position, batch held: held at the batch",
            delivered: "lagless1;m=230;r=100-200@180",
            held: &[&[(100, 200, 150)]],
            asked: Some(250),
            floor: Some(100),
            want: (150, "lagless1;m=230;r=100-200@150"),
        },
        CommitPointRow {
            case: "asked on the main stream, batch held: the main stream resumes there",
            delivered: "lagless1;m=230;r=100-200@180",
            held: &[&[(100, 200, 150)]],
            asked: Some(220),
            floor: Some(100),
            want: (150, "lagless1;m=220;r=100-200@150"),
        },
        CommitPointRow {
            case: "asked inside the held batch: the batch owed up to there",
            delivered: "lagless1;m=230;r=100-200@180",
            held: &[&[(100, 200, 150)]],
            asked: Some(160),
            floor: Some(100),
            want: (150, "lagless1;m=160;r=100-160@150"),
        },
        CommitPointRow {
            case: "asked below the batch: the offset asked, a plain commit",
            delivered: "lagless1;m=230;r=100-200@180",
            held: &[&[(100, 200, 150)]],
            asked: Some(120),
            floor: Some(100),
            want: (120, "app"),
        },
        CommitPointRow {
            case: "asked below the floor: the application's word, as the Java client's",
            delivered: "lagless1;m=230;r=100-200@180",
            held: &[&[(100, 200, 150)]],
            asked: Some(60),
            floor: Some(100),
            want: (60, "app"),
        },
        CommitPointRow {
            case: "no recovery at all, asked: the offset asked",
            delivered: "lagless1;m=230;r=",
            held: &[],
            asked: Some(230),
            floor: None,
            want: (230, "app"),
        },
        CommitPointRow {
            case: "a held batch straddling the floor owes only from the floor on",
            delivered: "lagless1;m=540;r=",
            held: &[&[(200, 400, 250)]],
            asked: None,
            floor: Some(300),
            want: (300, "lagless1;m=540;r=300-400@300"),
        },
    ];

    #[test]
    fn the_commit_point_of_a_partition_from_its_state_and_the_batches_held() {
        for row in COMMIT_POINT {
            let delivered = RecoveryState::parse_token(row.delivered).unwrap();
            let held: Vec<Vec<RecoveryRange>> = row
                .held
                .iter()
                .map(|b| b.iter().map(|&(s, e, n)| range(s, e, n)).collect())
                .collect();
            let asked = row.asked.map(|offset| OffsetAndMetadata {
                offset,
                metadata: "app".into(),
            });
            let got = commit_point(
                &delivered,
                held.iter().map(Vec::as_slice),
                asked.as_ref(),
                row.floor,
            );
            assert_eq!(
                (got.offset, got.metadata.as_str()),
                row.want,
                "{}",
                row.case
            );
        }
    }

    /// Never backwards: whatever is held, the commit is below the floor only where the
    /// application put it (a delivered state or an offset asked below it); and it owes exactly
    /// what the delivered state owes, what the held batches owe from the floor on, and
    /// (asked) everything from the offset asked on.
    #[test]
    fn a_held_batch_never_takes_the_commit_below_the_floor() {
        let mut rng = StdRng::seed_from_u64(0xf1_003);
        for case in 0..3000 {
            let delivered =
                RecoveryState::parse_token(&random_state(&mut rng, 4, 1).token()).unwrap();
            let held: Vec<Vec<RecoveryRange>> = (0..rng.gen_range(0..3))
                .map(|_| random_state(&mut rng, 4, 1).ranges)
                .collect();
            let top = delivered.main_next + 10;
            let floor = rng.gen_range(0..=top);
            let asked = rng.gen_bool(0.5).then(|| OffsetAndMetadata {
                offset: rng.gen_range(0..=top),
                metadata: "app".into(),
            });
            let got = commit_point(
                &delivered,
                held.iter().map(Vec::as_slice),
                asked.as_ref(),
                Some(floor),
            );
            let bound = asked
                .as_ref()
                .map_or(delivered.low_water_mark(), |a| {
                    a.offset.min(delivered.low_water_mark())
                })
                .min(floor);
            assert!(
                got.offset >= bound,
                "case {case}: {delivered:?} {held:?} {asked:?} floor {floor}: {got:?}"
            );
            if got.metadata != "app" && !got.metadata.is_empty() {
                let st = RecoveryState::parse_token(&got.metadata).unwrap();
                assert_eq!(st.low_water_mark(), got.offset, "case {case}");
                for o in 0..top + 5 {
                    let held_owes = o >= floor
                        && o < delivered.main_next
                        && held.iter().flatten().any(|r| r.next <= o && o < r.end);
                    let asked_owes = asked.as_ref().is_some_and(|a| o >= a.offset);
                    assert_eq!(
                        st.is_undelivered(o),
                        delivered.is_undelivered(o) || held_owes || asked_owes,
                        "case {case}: offset {o}: {delivered:?} {held:?} {asked:?} floor {floor}: {got:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn a_revocation_while_a_batch_is_out_gives_the_batch_to_the_next_owner() {
        let mut u = UnprocessedRecovery::default();
        let mut st = taken_over();
        hand_out(&mut u, &mut st, 100..130);
        u.processed(T1);
        hand_out(&mut u, &mut st, 130..180);
        // The commit before the revocation, made on the poll thread while the batch is out.
        let (offset, token) = stored(&u, &st);
        assert_eq!(
            (offset, token.as_str()),
            (130, "lagless1;m=230;r=100-200@130")
        );
        // The next owner (the log has grown to 240) resumes at 130: the batch 130..180 comes
        // again, and so does everything not yet delivered.
        let (next, warned) =
            warnings(|| RecoveryState::on_assignment(offset, Some(&token), 240, 10));
        assert_eq!(warned, 0);
        assert_eq!(next.low_water_mark(), 130);
        assert!((130..200).chain(230..240).all(|o| next.is_undelivered(o)));
        // A client without the mode resumes at the committed offset: the batch comes again too.
        assert!(offset <= 130);
    }

    #[test]
    fn a_seek_or_a_new_assignment_under_a_batch_owes_both() {
        // A seek back to 120 while 100..150 is out: the ranges are cancelled, the main stream
        // re-reads from 120, and the batch's part below it stays owed.
        let held = [range(100, 200, 100)];
        let after_seek = RecoveryState::at(120);
        let got = owed_by_either(&after_seek, &held);
        assert_eq!(got.token(), "lagless1;m=120;r=100-120@100");
        // A seek forward to 500 keeps the whole batch owed.
        let got = owed_by_either(&RecoveryState::at(500), &held);
        assert_eq!(got.token(), "lagless1;m=500;r=100-200@100");
        // A new assignment's ranges and the old batch's: both owed, disjoint parts apart.
        let new = RecoveryState::parse_token("lagless1;m=900;r=300-800@350").unwrap();
        let got = owed_by_either(&new, &[range(100, 200, 150), range(320, 400, 330)]);
        assert_eq!(got.token(), "lagless1;m=900;r=100-200@150,300-800@330");
        // Nothing held: the state as it is.
        assert_eq!(owed_by_either(&new, &[]), new);
    }

    #[test]
    fn the_processed_state_owes_exactly_what_either_side_owes() {
        let mut rng = StdRng::seed_from_u64(0x2_7ead5);
        for case in 0..3000 {
            let delivered =
                RecoveryState::parse_token(&random_state(&mut rng, 5, 1).token()).unwrap();
            let held = random_state(&mut rng, 5, 1);
            let got = owed_by_either(&delivered, &held.ranges);
            got.validate()
                .unwrap_or_else(|e| panic!("case {case}: {delivered:?} {held:?}: {e}"));
            assert_eq!(got.main_next, delivered.main_next);
            let top = delivered.main_next.max(held.main_next) + 3;
            for o in 0..top {
                let held_owes =
                    o < delivered.main_next && held.ranges.iter().any(|r| r.next <= o && o < r.end);
                assert_eq!(
                    got.is_undelivered(o),
                    delivered.is_undelivered(o) || held_owes,
                    "case {case}: offset {o}: {delivered:?} and {held:?} gave {got:?}"
                );
            }
            // Its token round-trips, so the next owner resumes exactly there.
            assert_eq!(RecoveryState::parse_token(&got.token()).unwrap(), got);
        }
        // The usual case: an earlier state of the same ranges owes everything: it is the result.
        for case in 0..500 {
            let held = RecoveryState::parse_token(&random_state(&mut rng, 5, 1).token()).unwrap();
            let mut delivered = held.clone();
            for _ in 0..rng.gen_range(0..40) {
                if let Some(first) = delivered.ranges.first().copied() {
                    delivered.recovery_delivered(rng.gen_range(first.next..first.end));
                }
            }
            delivered.main_next += rng.gen_range(0..10);
            let mut want = held.clone();
            want.main_next = delivered.main_next;
            assert_eq!(
                owed_by_either(&delivered, &held.ranges),
                want,
                "case {case}"
            );
        }
    }

    /// The reported loss: the next owner, taking over from what the commit stored, delivers the
    /// main-stream records from X on again (60 of them), and the rest of the backlog.
    #[test]
    fn the_next_owner_resumes_from_the_offset_committed_not_the_position() {
        let st = RecoveryState::parse_token("lagless1;m=20720;r=1000-20660@1140").unwrap();
        let stored = st.committed_at(20660);
        let (next, warned) = warnings(|| {
            RecoveryState::on_assignment(stored.low_water_mark(), Some(&stored.token()), 20720, 10)
        });
        assert_eq!(warned, 0);
        assert_eq!(next.low_water_mark(), 1140);
        assert!((1140..20720).all(|o| next.is_undelivered(o)));
        // Fewer new records than min_lag: the main stream carries on from X.
        let next = RecoveryState::on_assignment(1140, Some(&stored.token()), 20665, 10);
        assert_eq!(next.main_next, 20660);
        assert_eq!(next.ranges, vec![range(1000, 20660, 1140)]);
    }

    #[test]
    fn a_commit_owes_what_the_state_owes_and_everything_from_its_offset_on() {
        let mut rng = StdRng::seed_from_u64(0xc0_3317);
        for case in 0..3000 {
            // Normal, as every state the consumer holds is (a parsed token is).
            let st = RecoveryState::parse_token(&random_state(&mut rng, 6, 1).token()).unwrap();
            let x = rng.gen_range(-3..=st.main_next + 20);
            let got = st.committed_at(x);
            got.validate()
                .unwrap_or_else(|e| panic!("case {case}: {st:?} at {x}: {e}"));
            for o in 0..=st.main_next + 25 {
                assert_eq!(
                    got.is_undelivered(o),
                    st.is_undelivered(o) || o >= x,
                    "case {case}: offset {o}, {st:?} committed at {x} gave {got:?}"
                );
            }
            assert_eq!(got.low_water_mark(), st.low_water_mark().min(x.max(0)));
            assert_eq!(got.low_water_mark(), lowest_undelivered(&got));
            // What is stored is what the next owner resumes, exactly.
            let token = got.token();
            assert_eq!(RecoveryState::parse_token(&token).unwrap(), got);
            let (resumed, warned) = warnings(|| {
                RecoveryState::on_assignment(got.low_water_mark(), Some(&token), got.main_next, 1)
            });
            assert_eq!(warned, 0, "case {case}");
            assert_eq!(resumed, got, "case {case}");
            // Committing the delivered position stores the state itself.
            assert_eq!(st.committed_at(st.main_next), st);
        }
    }
}
