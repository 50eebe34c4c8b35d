//! Fetching: per-partition cursors, one fetch in flight per leader broker (all leaders at once),
//! and one memory budget (`fetch.buffer.max.bytes`) over everything the fetch path holds.
//!
//! A partition is a task (KIP-572): a partition whose leader is unknown or whose fetches fail is
//! backed off on its own while the others keep flowing, and only after `task.timeout.ms` without
//! progress is it reported through `poll()`.
//!
//! - [`state`]: a partition's fetch state (position, main and recovery streams, buffers).
//! - [`apply`]: the pure step from one partition's decoded fetch answer to its next state.
//! - [`budget`]: the pure decision whether a fetch may be sent and how much it may ask for.
//! - [`plan`]: the pure decision of what one turn of the fetch task sends: which Fetch to which
//!   broker, which lookups and validations, which stuck or unknown partitions to report.
//! - [`lookup`]: position lookups (committed offset, `auto.offset.reset`, KIP-333 takeovers) and
//!   KIP-320's position validations.
//! - [`validate`]: the pure part of KIP-320's position validation after a leader change.
//! - [`txn`]: the pure decision which batches `isolation.level=read_committed` delivers.
//! - [`wake`]: the pure decision when the fetch task plans its next turn with nothing to wake it
//!   (the partitions' backoffs and KIP-572 deadlines, the metadata's age).
//! - [`task`]: the fetch task, the only part that does I/O. It decodes and decompresses each
//!   answer before it takes the lock `poll()` needs, which then covers only the hand-over of the
//!   records ready for delivery.
//!
//! This module holds what the user's thread and the fetch task share.
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::backoff::Backoff;
use crate::cluster::Cluster;
use crate::config::ConsumerConfig;
use crate::error::Error;
use crate::protocol::records::FetchBuffers;
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

mod apply;
mod budget;
mod deliver;
mod lookup;
mod plan;
pub(crate) mod record;
mod session;
mod state;
mod task;
mod txn;
mod validate;
mod wake;

pub(crate) use deliver::{drain_records, take_one_ready, take_ready, BufferLimits, Streams};
pub use record::ConsumerRecord;
pub(crate) use state::{PartitionState, PositionLookup, Stream, StreamKind};
pub(crate) use task::run;

/// What the user's thread and the fetch task share.
pub(crate) struct FetchState {
    partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Errors waiting to come out of `poll()`.
    errors: VecDeque<Error>,
    /// What the records buffered for `poll()` count ([`state::record_size`]): what the streams'
    /// limits (`2 x max.partition.fetch.bytes`) weigh. The budget counts buffers instead.
    buffered_bytes: usize,
    /// Bytes reserved for the answers of the fetches in flight (see [`budget`]).
    reserved: usize,
    /// What the answers held once decoded lately, per byte (see [`budget::Expansion`]).
    expansion: budget::Expansion,
    /// Counts the answers that brought a stream records, for the order of partitions in a fetch
    /// ([`state::Stream::answered_at`]).
    answers_with_records: u64,
    wakeup: bool,
    closed: bool,
    /// Topics already reported unknown, so the error comes once, not on every loop.
    reported_unknown: HashSet<String>,
    /// Where the next `poll()` starts, for fairness across partitions.
    rotation: usize,
    /// Records and key + value bytes handed to the application from partitions no longer
    /// assigned: with each assigned partition's own counts, the consumer's totals.
    delivered_before: (u64, u64),
    /// The turns the fetch task has planned ([`plan::plan_fetches`]): what an idle consumer's
    /// wake-ups cost, counted for the tests that bound them.
    #[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(dead_code))]
    plan_passes: u64,
}

impl FetchState {
    pub(crate) fn new() -> FetchState {
        FetchState {
            partitions: BTreeMap::new(),
            errors: VecDeque::new(),
            buffered_bytes: 0,
            reserved: 0,
            expansion: budget::Expansion::new(),
            answers_with_records: 0,
            wakeup: false,
            closed: false,
            reported_unknown: HashSet::new(),
            rotation: 0,
            delivered_before: (0, 0),
            plan_passes: 0,
        }
    }

    /// Records buffered for `poll()` weighing `bytes` ([`state::record_size`]) arrived.
    fn hold(&mut self, bytes: usize) {
        self.buffered_bytes += bytes;
    }

    /// Records buffered for `poll()` weighing `bytes` left: handed out or dropped.
    fn release(&mut self, bytes: usize) {
        self.buffered_bytes -= bytes;
    }

    /// A partition's state leaves: what it delivered stays in the consumer's totals.
    fn departed(&mut self, p: &PartitionState) {
        self.delivered_before.0 += p.records_delivered;
        self.delivered_before.1 += p.bytes_delivered;
    }

    /// Records and key + value bytes handed to the application since the consumer was created.
    pub(crate) fn delivered_total(&self) -> (u64, u64) {
        self.partitions
            .values()
            .fold(self.delivered_before, |(r, b), p| {
                (r + p.records_delivered, b + p.bytes_delivered)
            })
    }

    /// How many turns the fetch task has planned since the consumer was created.
    #[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(dead_code))]
    pub(crate) fn plan_passes(&self) -> u64 {
        self.plan_passes
    }

    /// The partitions fetched and their states, in order.
    pub(crate) fn partitions(&self) -> impl Iterator<Item = (&TopicPartition, &PartitionState)> {
        self.partitions.iter()
    }

    /// What the records buffered for `poll()` weigh ([`state::record_size`]).
    pub(crate) fn buffered_bytes(&self) -> usize {
        self.buffered_bytes
    }

    /// Notes the group's committed offsets this consumer's commits had taken.
    pub(crate) fn note_committed<'a>(
        &mut self,
        committed: impl IntoIterator<Item = (&'a TopicPartition, i64)>,
    ) {
        for (tp, offset) in committed {
            if let Some(p) = self.partitions.get_mut(tp) {
                p.committed_offset = Some(offset);
            }
        }
    }

    /// Replaces the partitions fetched by `partitions` (manual assignment): kept ones keep their
    /// state, new ones find their position with `lookup`, and what was buffered for the others
    /// is dropped. Unknown topics may be reported again.
    pub(crate) fn assign(
        &mut self,
        partitions: &[TopicPartition],
        lookup: PositionLookup,
        backoff: Backoff,
    ) {
        let mut kept = BTreeMap::new();
        let mut old = std::mem::take(&mut self.partitions);
        for tp in partitions {
            let p = old
                .remove(tp)
                .unwrap_or_else(|| PartitionState::new(&tp.topic, lookup, backoff));
            kept.insert(tp.clone(), p);
        }
        let freed: usize = old.values().map(|p| p.buffered_bytes()).sum();
        self.release(freed);
        for p in old.values() {
            self.departed(p);
        }
        self.partitions = kept;
        self.reported_unknown.clear();
    }

    /// The partitions fetched, in order.
    pub(crate) fn assignment(&self) -> Vec<TopicPartition> {
        self.partitions.keys().cloned().collect()
    }

    pub(crate) fn has_partitions(&self) -> bool {
        !self.partitions.is_empty()
    }

    pub(crate) fn partition(&self, tp: &TopicPartition) -> Option<&PartitionState> {
        self.partitions.get(tp)
    }

    /// Runs `change` on `tp`'s state, which returns the buffered bytes it dropped; `None` for a
    /// partition not fetched.
    pub(crate) fn change_partition(
        &mut self,
        tp: &TopicPartition,
        change: impl FnOnce(&mut PartitionState) -> usize,
    ) -> Option<()> {
        let freed = change(self.partitions.get_mut(tp)?);
        self.release(freed);
        Some(())
    }

    #[cfg(test)]
    pub(crate) fn partition_mut(&mut self, tp: &TopicPartition) -> Option<&mut PartitionState> {
        self.partitions.get_mut(tp)
    }

    /// Pauses or resumes `tp`; false for a partition not fetched.
    pub(crate) fn set_paused(&mut self, tp: &TopicPartition, paused: bool) -> bool {
        self.partitions
            .get_mut(tp)
            .map(|p| p.paused = paused)
            .is_some()
    }

    /// The partitions paused, in order.
    pub(crate) fn paused(&self) -> Vec<TopicPartition> {
        self.partitions
            .iter()
            .filter(|(_, p)| p.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// KIP-333: whether a partition has a recovery stream still draining a backlog.
    pub(crate) fn any_recovery_active(&self) -> bool {
        self.partitions.values().any(|p| p.recovery_active())
    }

    /// What an explicit commit of `asked` for `tp` says: [`PartitionState::commit_point`];
    /// `asked` as it is for a partition not fetched or without a position.
    pub(crate) fn commit_point(
        &self,
        tp: &TopicPartition,
        asked: OffsetAndMetadata,
    ) -> OffsetAndMetadata {
        self.partitions
            .get(tp)
            .and_then(|p| p.commit_point(Some(&asked)))
            .unwrap_or(asked)
    }

    /// Makes the next poll return `Error::Wakeup` ([`FetchState::take_wakeup_or_error`]).
    pub(crate) fn wake(&mut self) {
        self.wakeup = true;
    }

    /// Stops the fetch task at its next turn.
    pub(crate) fn close(&mut self) {
        self.closed = true;
    }

    pub(crate) fn is_closed(&self) -> bool {
        self.closed
    }

    /// Takes the queued `Error::NoOffset` of `tp` (`auto.offset.reset=none`), if any.
    pub(crate) fn take_no_offset_error(&mut self, tp: &TopicPartition) -> Option<Error> {
        let i = self.errors.iter().position(
            |e| matches!(e, Error::NoOffset(x) if x.topic == tp.topic && x.partition == tp.partition),
        )?;
        self.errors.remove(i)
    }
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
    /// The consumer's pools and their ledger; `cluster` reads its answers into `buffers.answers`.
    pub buffers: FetchBuffers,
}

impl Shared {
    /// What the fetch task and the user's thread share. `cluster` must read its answers into
    /// `buffers.answers` ([`Cluster::with_answers`]) for the budget to count them.
    pub fn new(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        buffers: FetchBuffers,
    ) -> Arc<Shared> {
        Arc::new(Shared {
            state: Mutex::new(FetchState::new()),
            data_ready: crate::engine::Ready::new(),
            changed: Notify::new(),
            cluster,
            config,
            buffers,
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
                st.release(p.buffered_bytes());
                st.departed(&p);
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

    /// KIP-320: the leader epoch to commit with `offset` for `tp` ([`PartitionState::epoch_at`];
    /// -1 for a partition not fetched).
    pub fn epoch_at(&self, tp: &TopicPartition, offset: i64) -> i32 {
        self.lock()
            .partitions
            .get(tp)
            .map_or(-1, |p| p.epoch_at(offset))
    }

    pub fn lock(&self) -> MutexGuard<'_, FetchState> {
        self.state.lock().unpoisoned()
    }

    /// The wait of a blocking `poll()` or `recovery_poll()` that found nothing: until records
    /// arrive (`data_ready`) or at most 100 ms, the caller then looks again (and `poll()` runs its
    /// group steps: a join may have finished meanwhile). `None` once `deadline` has passed.
    pub fn wait_for_data<'a>(
        &self,
        st: MutexGuard<'a, FetchState>,
        deadline: &crate::backoff::Deadline,
    ) -> Option<MutexGuard<'a, FetchState>> {
        let remaining = deadline.remaining();
        if remaining.is_zero() {
            return None;
        }
        let (st, _) = self
            .data_ready
            .wait_timeout(st, remaining.min(std::time::Duration::from_millis(100)))
            .unpoisoned();
        Some(st)
    }

    pub fn backoff(&self) -> Backoff {
        self.cluster.backoff()
    }

    pub(super) fn push_error(&self, st: &mut FetchState, e: Error) {
        tracing::warn!(error = %e, "reporting through poll()");
        st.errors.push_back(e);
        self.data_ready.notify_all();
    }
}
