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
//! - [`lookup`]: position lookups (committed offset, `auto.offset.reset`, KIP-333 takeovers) and
//!   KIP-320's position validations.
//! - [`validate`]: the pure part of KIP-320's position validation after a leader change.
//! - [`txn`]: the pure decision which batches `isolation.level=read_committed` delivers.
//! - [`task`]: the fetch task, the only part that does I/O. It decodes and decompresses each
//!   answer before it takes the lock `poll()` needs, which then covers only the hand-over of the
//!   records ready for delivery.
//!
//! This module holds what the user's thread and the fetch task share.
use std::collections::{BTreeMap, HashSet, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use crate::backoff::Backoff;
use crate::buffers::FetchBuffers;
use crate::cluster::Cluster;
use crate::config::ConsumerConfig;
use crate::error::Error;
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

mod apply;
mod budget;
mod lookup;
mod state;
mod task;
mod txn;
mod validate;

#[cfg(test)]
pub(crate) use budget::Expansion;
pub(crate) use lookup::PositionLookup;
#[cfg(test)]
pub(crate) use state::{record_size, BufferedBatch};
pub(crate) use state::{PartitionState, StreamKind};
pub(crate) use task::run;

/// What the user's thread and the fetch task share.
pub(crate) struct FetchState {
    pub partitions: BTreeMap<TopicPartition, PartitionState>,
    /// Errors waiting to come out of `poll()`.
    pub errors: VecDeque<Error>,
    /// What the records buffered for `poll()` count ([`state::record_size`]): what the streams'
    /// limits (`2 x max.partition.fetch.bytes`) weigh. The budget counts buffers instead.
    pub buffered_bytes: usize,
    /// Bytes reserved for the answers of the fetches in flight (see [`budget`]).
    pub reserved: usize,
    /// What the answers held once decoded lately, per byte (see [`budget::Expansion`]).
    pub expansion: budget::Expansion,
    /// Counts the answers that brought a stream records, for the order of partitions in a fetch
    /// ([`state::Stream::answered_at`]).
    pub answers_with_records: u64,
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
            state: Mutex::new(FetchState {
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
            }),
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
