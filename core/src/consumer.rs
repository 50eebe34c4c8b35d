//! The consumer's public, blocking API over the library's I/O runtime.
//!
//! I/O runs on a tokio runtime in library-owned threads; the caller's thread only waits in
//! `poll()` for records the fetch task has buffered. The consumer as a group member (subscribe,
//! the listener, the group steps of `poll()`) is in `consumer/group.rs`; commits in
//! `consumer/commits.rs`.
//!
//! The blocking API works whether or not the caller is inside a tokio runtime: it never starts
//! or blocks on a runtime from inside another (see `engine.rs`), so `poll()`, `commit_sync()` and
//! dropping the consumer are safe in `#[tokio::main]` code, where they block the calling worker
//! thread for the call. Async code should prefer [`crate::aio::Consumer`].
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::backoff::Deadline;
use crate::cluster::Cluster;
use crate::config::{Config, ConsumerConfig};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fetch::{self, PartitionState, PositionLookup, Shared, StreamKind};
use crate::group::coordinator::GroupDriver;
use crate::offsets::{self, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::protocol::records::Header;
use crate::recovery::RecoveryRange;
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

mod commits;
mod group;

pub use commits::{CommitCallback, CommitResults};
use group::GroupLocal;
pub use group::{BoxFuture, GroupMetadata, RebalanceListener};
#[cfg(feature = "aio")]
pub(crate) use group::{Callback, Dispatch};

/// A record as `poll()` returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerRecord {
    /// The topic the record was read from.
    pub topic: Arc<str>,
    /// The partition the record was read from.
    pub partition: i32,
    /// The record's offset in its partition; the position to commit after it is `offset + 1`.
    pub offset: i64,
    /// Milliseconds since the epoch (create time or log-append time, as the topic says).
    pub timestamp: i64,
    /// The record's key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The record's value; `None` for a null value (a tombstone on a compacted topic).
    pub value: Option<Bytes>,
    /// The record's headers, in the order they were written.
    pub headers: Vec<Header>,
    /// Whether the record came from a recovery stream (`enable.parallel.rebalance`).
    pub from_recovery: bool,
}

/// The low and high watermarks of a partition: the log start offset and the offset after the
/// last committed record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Watermarks {
    /// The log start offset: the first offset still in the partition.
    pub low: i64,
    /// The high watermark: the offset after the last record replicated to every in-sync
    /// replica; consumers read below it. With `isolation.level=read_committed`, the last stable
    /// offset: the first offset of a transaction still open (the high watermark when none is),
    /// below which a read_committed consumer reads.
    pub high: i64,
}

/// (offset, timestamp) of the first record at or after a timestamp.
pub type OffsetAndTimestamp = (i64, i64);

/// A Kafka consumer.
///
/// Blocking: [`poll`](Consumer::poll) waits on the calling thread for records the consumer's
/// own I/O threads have fetched. For async code see [`crate::aio::Consumer`].
///
/// ```no_run
/// use std::time::Duration;
/// use lagless::{Config, Consumer, Error};
///
/// # fn main() -> lagless::Result<()> {
/// let consumer = Consumer::from_config(&Config::from_pairs([
///     ("bootstrap.servers", "localhost:9092"),
///     ("group.id", "billing"),
///     ("enable.auto.commit", "false"),
///     ("auto.offset.reset", "earliest"),
/// ])?)?;
/// consumer.subscribe(&["orders"], None)?;
/// loop {
///     let records = match consumer.poll(Duration::from_secs(1)) {
///         Ok(records) => records,
///         // One partition's trouble comes out once, naming it; the others go on.
///         Err(Error::PartitionStuck { partition, cause }) => {
///             eprintln!("{}-{} makes no progress: {cause}", partition.topic, partition.partition);
///             continue;
///         }
///         Err(e) if !e.is_fatal() => {
///             eprintln!("{e}");
///             continue;
///         }
///         // Authentication, TLS, a closed consumer: this consumer is done.
///         Err(e) => return Err(e),
///     };
///     for record in &records {
///         println!("{}-{}@{}: {:?}", record.topic, record.partition, record.offset, record.value);
///     }
///     // Commits the positions after what poll() returned (None: the consumed positions;
///     // None: within default.api.timeout.ms).
///     consumer.commit_sync(None, None)?;
/// }
/// # }
/// ```
pub struct Consumer {
    pub(crate) shared: Arc<Shared>,
    engine: Option<Engine>,
    closed: AtomicBool,
    /// The group member's state, once `subscribe()` was called. Shared with the task that
    /// takes the group steps needing no callback while the application is busy
    /// (`consumer/group.rs`, `run_background_steps`).
    pub(crate) group: Arc<Mutex<Option<GroupLocal>>>,
    /// Commits of a manually assigned consumer with a `group.id`.
    pub(crate) simple_committer: Mutex<Option<Arc<GroupDriver>>>,
    /// Finished asynchronous commits whose callbacks wait for the caller's thread.
    pub(crate) commits_tx: mpsc::Sender<(Option<CommitCallback>, Result<CommitResults>)>,
    pub(crate) commits_done: Mutex<mpsc::Receiver<(Option<CommitCallback>, Result<CommitResults>)>>,
    /// `wakeup()` for a blocked (or the next) `recovery_poll()`: the fetch state's flag is the
    /// poll thread's, and a wakeup must reach both threads.
    recovery_wakeup: AtomicBool,
    /// The last group steps that found nothing to do, which a `poll()` finding records waiting
    /// may stand on instead of taking the steps again (`consumer::group::IDLE_STEPS_STAND_FOR`).
    pub(crate) idle_steps: group::IdleSteps,
}

impl Consumer {
    /// A consumer from string settings (Java key names).
    pub fn from_config(config: &Config) -> Result<Consumer> {
        Consumer::new(ConsumerConfig::from_config(config)?)
    }

    /// A consumer from typed settings: starts its I/O runtime (two threads named `lagless-io`)
    /// and its fetch task.
    pub fn new(config: ConsumerConfig) -> Result<Consumer> {
        Consumer::on_engine(config, Engine::owned("lagless-io")?)
    }

    /// A consumer whose I/O tasks run on `engine`: its own runtime, or the application's (the
    /// async front).
    pub(crate) fn on_engine(config: ConsumerConfig, engine: Engine) -> Result<Consumer> {
        let buffers = crate::buffers::FetchBuffers::new();
        let cluster = Cluster::with_answers(config.common.clone(), buffers.answers.clone());
        let shared = Shared::new(cluster, config, buffers);
        engine.handle().spawn(fetch::run(shared.clone()));
        let (commits_tx, commits_done) = mpsc::channel();
        Ok(Consumer {
            shared,
            engine: Some(engine),
            closed: AtomicBool::new(false),
            group: Arc::new(Mutex::new(None)),
            simple_committer: Mutex::new(None),
            commits_tx,
            commits_done: Mutex::new(commits_done),
            recovery_wakeup: AtomicBool::new(false),
            idle_steps: Default::default(),
        })
    }

    /// The consumer's typed settings.
    pub fn config(&self) -> &ConsumerConfig {
        &self.shared.config
    }

    /// Where the consumer's I/O tasks run.
    pub(crate) fn runtime(&self) -> Result<&tokio::runtime::Handle> {
        self.engine
            .as_ref()
            .map(Engine::handle)
            .ok_or(Error::Closed)
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(())
        }
    }

    pub(crate) fn block_on<F: std::future::Future>(&self, f: F) -> Result<F::Output> {
        match &self.engine {
            Some(engine) => Ok(engine.block_on(f)),
            None => Err(Error::Closed),
        }
    }

    pub(crate) fn api_deadline(&self, timeout: Option<Duration>) -> Deadline {
        Deadline::after(timeout.unwrap_or(self.shared.config.common.default_api_timeout))
    }

    /// Replaces the set of partitions this consumer reads (manual assignment, no group
    /// rebalancing). Partitions kept from the previous assignment keep their positions.
    pub fn assign(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.check_open()?;
        if self.group.lock().unpoisoned().is_some() {
            return Err(Error::IllegalState(
                "the consumer is subscribed to a group; call unsubscribe() before assign()".into(),
            ));
        }
        for tp in partitions {
            validate_tp(tp)?;
        }
        let lookup = if self.shared.config.group_id.is_some() {
            PositionLookup::Committed
        } else {
            PositionLookup::ResetPolicy
        };
        let backoff = self.shared.backoff();
        {
            let mut st = self.shared.lock();
            let mut kept = BTreeMap::new();
            let mut old = std::mem::take(&mut st.partitions);
            for tp in partitions {
                let p = old
                    .remove(tp)
                    .unwrap_or_else(|| PartitionState::new(&tp.topic, lookup, backoff));
                kept.insert(tp.clone(), p);
            }
            let freed: usize = old.values().map(|p| p.buffered_bytes()).sum();
            st.buffered_bytes -= freed;
            st.partitions = kept;
            st.reported_unknown.clear();
        }
        self.shared
            .cluster
            .add_interest(partitions.iter().map(|tp| &tp.topic));
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The partitions currently assigned.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.shared.lock().partitions.keys().cloned().collect()
    }

    /// Returns up to `max.poll.records` records, waiting up to `timeout` for the first. Errors of
    /// single partitions (a stuck partition, no offset under `auto.offset.reset=none`, an unknown
    /// topic) come out here, one per call; the consumer keeps serving the other partitions.
    pub fn poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        self.poll_at_most(timeout, self.shared.config.max_poll_records)
    }

    /// Like [`Consumer::poll`], returning at most `max` records (and at most
    /// `max.poll.records`). Positions advance only past the records returned, so callers that
    /// take fewer at a time (the C ABI's single-message poll) never have records counted as
    /// consumed that they did not see. `max == 0` is treated as 1.
    pub fn poll_at_most(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>> {
        self.check_open()?;
        let now = Instant::now();
        let deadline = Deadline::after_from(now, timeout);
        let max = max.clamp(1, self.shared.config.max_poll_records.max(1));
        // Group steps that found nothing to do a moment ago stand for records already waiting;
        // before any wait the steps run.
        let mut steps_stand = self.idle_steps.stand(now);
        loop {
            // Group steps first (rejoin, listener callbacks, auto-commit of the previous poll's
            // records) and finished async commits' callbacks, on this thread and outside the
            // fetch lock.
            self.run_commit_callbacks();
            if !steps_stand {
                self.group_poll()?;
            }
            let mut st = self.shared.lock();
            let streams = Streams::for_poll(&self.shared.config);
            if let Some(taken) =
                take_ready(&mut st, max, BufferLimits::of(&self.shared.config), streams)?
            {
                drop(st);
                if taken.refill {
                    // The buffer has room again: let the fetch task top it up.
                    self.shared.changed.notify_one();
                }
                return Ok(taken.records);
            }
            if std::mem::take(&mut steps_stand) {
                continue;
            }
            if self.shared.wait_for_data(st, &deadline).is_none() {
                return Ok(Vec::new());
            }
        }
    }

    /// Makes a blocked (or the next) `poll()` return `Error::Wakeup`, and with
    /// `parallel.rebalance.recovery.poll` a blocked (or the next) `recovery_poll()` too. Safe from
    /// any thread.
    pub fn wakeup(&self) {
        let mut st = self.shared.lock();
        st.wakeup = true;
        if self.shared.config.recovery_poll {
            self.recovery_wakeup.store(true, Ordering::Release);
        }
        drop(st);
        self.shared.data_ready.notify_all();
    }

    /// `parallel.rebalance.recovery.poll`: up to `max.poll.records` records of the recovery
    /// streams (KIP-333 backlogs), waiting up to `timeout` for the first; for a thread of its own
    /// while another calls `poll()`, which then returns main-stream records only.
    ///
    /// The records a call returns count as processed once the same thread makes its next
    /// `recovery_poll()` (as `poll()`'s do for auto-commit; several threads may call it, each
    /// one's batch held until its own next call): until then every commit (auto-commit,
    /// `commit_sync()`, the commit before a revocation or on close, made on the `poll()` thread)
    /// holds at the first of them, and a partition revoked or lost meanwhile gives them to its
    /// next owner again: from then on they no longer count for this member (the Java client's
    /// rule for a revoked partition), even once the partition comes back to it. A recovery thread that stops should make one last call (a zero
    /// timeout will do) once it has processed its last batch, or that batch is delivered again
    /// after the next rebalance.
    ///
    /// It runs no group steps and no callbacks: those stay on the `poll()` thread, which must keep
    /// polling (`max.poll.interval.ms`). Errors of single partitions, the recovery streams'
    /// included, come out of `poll()`. Returns `Error::Wakeup` after [`Consumer::wakeup`],
    /// `Error::Closed` once the consumer is closed, and `Error::IllegalState` without
    /// `parallel.rebalance.recovery.poll=true`.
    pub fn recovery_poll(&self, timeout: Duration) -> Result<Vec<ConsumerRecord>> {
        self.recovery_poll_at_most(timeout, self.shared.config.max_poll_records)
    }

    /// Like [`Consumer::recovery_poll`], returning at most `max` records (and at most
    /// `max.poll.records`; `max == 0` is taken as 1), for callers that take fewer at a time.
    pub fn recovery_poll_at_most(
        &self,
        timeout: Duration,
        max: usize,
    ) -> Result<Vec<ConsumerRecord>> {
        self.check_open()?;
        if !self.shared.config.recovery_poll {
            return Err(Error::IllegalState(
                "recovery_poll() needs parallel.rebalance.recovery.poll=true (and \
                 enable.parallel.rebalance=true); without it poll() returns the recovery records"
                    .into(),
            ));
        }
        let deadline = Deadline::after(timeout);
        let max = max.clamp(1, self.shared.config.max_poll_records.max(1));
        let limits = BufferLimits::of(&self.shared.config);
        let mut st = self.shared.lock();
        // This thread is back for more: what its previous call returned is processed. The batches
        // live in their partitions' states, under the fetch lock with the ranges they owe, so a
        // commit sees both at one instant, and a batch whose partition left is gone already.
        let caller = recovery_caller();
        for p in st.partitions.values_mut() {
            p.unprocessed.processed(caller);
        }
        loop {
            if self.recovery_wakeup.swap(false, Ordering::AcqRel) {
                return Err(Error::Wakeup);
            }
            if st.closed || self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            // Each partition's ranges before this call takes from them: they owe the whole batch.
            let before: Vec<(TopicPartition, Vec<RecoveryRange>)> = st
                .partitions
                .iter()
                .filter_map(|(tp, p)| {
                    let rc = p.recovery.as_ref()?;
                    (!rc.stream.buffer.is_empty()).then(|| (tp.clone(), rc.ranges.clone()))
                })
                .collect();
            if !before.is_empty() {
                let taken = drain_records(&mut st, max, limits, Streams::Recovery);
                if !taken.records.is_empty() {
                    for (tp, ranges) in &before {
                        let handed_out = taken
                            .records
                            .iter()
                            .any(|r| r.partition == tp.partition && *r.topic == *tp.topic);
                        if let Some(p) = st.partitions.get_mut(tp).filter(|_| handed_out) {
                            p.unprocessed.handing_out(caller, ranges);
                        }
                    }
                    drop(st);
                    if taken.refill {
                        self.shared.changed.notify_one();
                    }
                    return Ok(taken.records);
                }
            }
            match self.shared.wait_for_data(st, &deadline) {
                Some(again) => st = again,
                None => return Ok(Vec::new()),
            }
        }
    }

    /// What a commit of `partitions`' progress says (those that have a position): the
    /// consumed positions, with recovery tokens (KIP-333), not counting the recovery records a
    /// recovery thread has not processed yet ([`Consumer::recovery_poll`]): each partition's
    /// [`PartitionState::commit_point`].
    pub(crate) fn progress_to_commit<'a>(
        &self,
        partitions: impl IntoIterator<Item = &'a TopicPartition>,
    ) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        self.shared.commit_offsets(partitions)
    }

    /// What an explicit commit of `asked` for `tp` says (KIP-333): the partition's
    /// [`PartitionState::commit_point`] of it; `asked` as it is for a partition not assigned or
    /// without a position.
    pub(crate) fn asked_to_commit(
        &self,
        st: &fetch::FetchState,
        tp: &TopicPartition,
        asked: OffsetAndMetadata,
    ) -> OffsetAndMetadata {
        st.partitions
            .get(tp)
            .and_then(|p| p.commit_point(Some(&asked)))
            .unwrap_or(asked)
    }

    /// Sets the next offset `poll()` returns for `tp`.
    pub fn seek(&self, tp: &TopicPartition, offset: i64) -> Result<()> {
        self.check_open()?;
        if offset < 0 {
            return Err(Error::InvalidArgument(format!(
                "seek offset must be >= 0, got {offset}"
            )));
        }
        self.with_partition(tp, |p| p.seek(offset))
    }

    /// Moves each of `partitions` to its log start offset, looked up before the next fetch.
    /// Cancels a partition's recovery stream. `Error::IllegalState` for a partition not assigned.
    pub fn seek_to_beginning(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.reset_to(partitions, PositionLookup::Earliest)
    }

    /// Moves each of `partitions` to its log end (the high watermark; the last stable offset
    /// with `isolation.level=read_committed`), looked up before the next
    /// fetch. Cancels a partition's recovery stream. `Error::IllegalState` for a partition not
    /// assigned.
    pub fn seek_to_end(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.reset_to(partitions, PositionLookup::Latest)
    }

    fn reset_to(&self, partitions: &[TopicPartition], lookup: PositionLookup) -> Result<()> {
        self.check_open()?;
        for tp in partitions {
            self.with_partition(tp, |p| p.cancel_recovery() + p.reset(lookup))?;
        }
        Ok(())
    }

    fn with_partition(
        &self,
        tp: &TopicPartition,
        f: impl FnOnce(&mut PartitionState) -> usize,
    ) -> Result<()> {
        {
            let mut st = self.shared.lock();
            let p = st.partitions.get_mut(tp).ok_or_else(|| {
                Error::IllegalState(format!("{tp} is not assigned to this consumer"))
            })?;
            let freed = f(p);
            st.buffered_bytes -= freed;
        }
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The offset of the next record `poll()` returns for `tp`, looking it up (committed offset
    /// or reset policy) if the partition has none yet.
    pub fn position(&self, tp: &TopicPartition, timeout: Option<Duration>) -> Result<i64> {
        self.check_open()?;
        let deadline = self.api_deadline(timeout);
        let mut st = self.shared.lock();
        loop {
            let p = st.partitions.get(tp).ok_or_else(|| {
                Error::IllegalState(format!("{tp} is not assigned to this consumer"))
            })?;
            if let Some(pos) = p.position {
                return Ok(pos);
            }
            if p.lookup.is_none() {
                // auto.offset.reset=none found nothing: the error waits in the queue.
                if let Some(i) = st.errors.iter().position(|e| matches!(e, Error::NoOffset(x) if x.topic == tp.topic && x.partition == tp.partition)) {
                    return Err(st.errors.remove(i).expect("index from position()"));
                }
                return Err(Error::NoOffset(crate::error::ErrorPartition {
                    topic: tp.topic.clone(),
                    partition: tp.partition,
                }));
            }
            deadline.check(&format!("position of {tp}"))?;
            // The fetch task signals data_ready when a lookup gives positions.
            st = self
                .shared
                .data_ready
                .wait_timeout(st, deadline.remaining())
                .unpoisoned()
                .0;
        }
    }

    /// KIP-333: whether `tp` has a recovery stream still draining a backlog
    /// (`enable.parallel.rebalance`). `Error::IllegalState` if `tp` is not assigned.
    pub fn recovery_active(&self, tp: &TopicPartition) -> Result<bool> {
        self.check_open()?;
        let st = self.shared.lock();
        st.partitions
            .get(tp)
            .map(|p| p.recovery_active())
            .ok_or_else(|| Error::IllegalState(format!("{tp} is not assigned to this consumer")))
    }

    /// KIP-333: whether any assigned partition has a recovery stream still draining a backlog
    /// (the draft's "child consumer"). False once the consumer is closed.
    pub fn child_consumer_is_alive(&self) -> bool {
        if self.check_open().is_err() {
            return false;
        }
        self.shared
            .lock()
            .partitions
            .values()
            .any(|p| p.recovery_active())
    }

    /// Stops fetching from `partitions` and returning their records until [`Consumer::resume`];
    /// their positions and assignment stay. `Error::IllegalState` for a partition not assigned.
    pub fn pause(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.set_paused(partitions, true)
    }

    /// Fetches from paused `partitions` again. `Error::IllegalState` for a partition not
    /// assigned.
    pub fn resume(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.set_paused(partitions, false)
    }

    fn set_paused(&self, partitions: &[TopicPartition], paused: bool) -> Result<()> {
        self.check_open()?;
        let mut st = self.shared.lock();
        for tp in partitions {
            st.partitions
                .get_mut(tp)
                .ok_or_else(|| {
                    Error::IllegalState(format!("{tp} is not assigned to this consumer"))
                })?
                .paused = paused;
        }
        drop(st);
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The assigned partitions that are paused.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.shared
            .lock()
            .partitions
            .iter()
            .filter(|(_, p)| p.paused)
            .map(|(tp, _)| tp.clone())
            .collect()
    }

    /// For each partition, the earliest offset whose timestamp is at or after the given one, with
    /// that record's timestamp; `None` when no such record exists. One answer per partition, in
    /// partition order; a partition given twice with different timestamps is
    /// `Error::InvalidArgument`.
    pub fn offsets_for_times(
        &self,
        query: &[(TopicPartition, i64)],
        timeout: Option<Duration>,
    ) -> Result<Vec<(TopicPartition, Option<OffsetAndTimestamp>)>> {
        self.check_open()?;
        // A partition named twice in one ListOffsets request makes the broker refuse all of it
        // (INVALID_REQUEST): ask once per partition.
        let mut asked: BTreeMap<&TopicPartition, i64> = BTreeMap::new();
        for (tp, ts) in query {
            validate_tp(tp)?;
            if *ts < 0 {
                return Err(Error::InvalidArgument(format!(
                    "timestamp for {tp} must be >= 0, got {ts}"
                )));
            }
            match asked.insert(tp, *ts) {
                Some(earlier) if earlier != *ts => {
                    return Err(Error::InvalidArgument(format!(
                        "{tp} is given twice, with timestamps {earlier} and {ts}"
                    )))
                }
                _ => {}
            }
        }
        let query: Vec<(TopicPartition, i64)> =
            asked.into_iter().map(|(tp, ts)| (tp.clone(), ts)).collect();
        let deadline = self.api_deadline(timeout);
        let cluster = self.shared.cluster.clone();
        let isolation = self.shared.config.isolation_level;
        let res = self.block_on(async move {
            offsets::list_offsets(&cluster, &query, isolation, deadline).await
        })??;
        res.into_iter()
            .map(|(tp, r)| r.map(|(o, t)| (tp, (o >= 0).then_some((o, t)))))
            .collect()
    }

    /// The log start offset of each partition, once per partition, in partition order.
    pub fn beginning_offsets(
        &self,
        partitions: &[TopicPartition],
        timeout: Option<Duration>,
    ) -> Result<Vec<(TopicPartition, i64)>> {
        self.list_at(partitions, EARLIEST_TIMESTAMP, timeout)
    }

    /// The end offset of each partition, once per partition, in partition order: the high
    /// watermark, or with `isolation.level=read_committed` the last stable offset (as the Java
    /// client's), where such a consumer's position ends.
    pub fn end_offsets(
        &self,
        partitions: &[TopicPartition],
        timeout: Option<Duration>,
    ) -> Result<Vec<(TopicPartition, i64)>> {
        self.list_at(partitions, LATEST_TIMESTAMP, timeout)
    }

    fn list_at(
        &self,
        partitions: &[TopicPartition],
        ts: i64,
        timeout: Option<Duration>,
    ) -> Result<Vec<(TopicPartition, i64)>> {
        self.check_open()?;
        for tp in partitions {
            validate_tp(tp)?;
        }
        // Once per partition, as in offsets_for_times.
        let q: Vec<(TopicPartition, i64)> = partitions
            .iter()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .map(|tp| (tp.clone(), ts))
            .collect();
        let deadline = self.api_deadline(timeout);
        let cluster = self.shared.cluster.clone();
        let isolation = self.shared.config.isolation_level;
        let res = self.block_on(async move {
            offsets::list_offsets(&cluster, &q, isolation, deadline).await
        })??;
        res.into_iter()
            .map(|(tp, r)| r.map(|(o, _)| (tp, o)))
            .collect()
    }

    /// The partition's log start offset and high watermark (the last stable offset with
    /// `isolation.level=read_committed`), asked of its leader.
    pub fn watermarks(&self, tp: &TopicPartition, timeout: Option<Duration>) -> Result<Watermarks> {
        let deadline = self.api_deadline(timeout);
        let low = self.list_at(
            std::slice::from_ref(tp),
            EARLIEST_TIMESTAMP,
            Some(deadline.remaining()),
        )?;
        let high = self.list_at(
            std::slice::from_ref(tp),
            LATEST_TIMESTAMP,
            Some(deadline.remaining()),
        )?;
        Ok(Watermarks {
            low: low[0].1,
            high: high[0].1,
        })
    }

    /// The group's committed offsets for `partitions`.
    pub fn committed(
        &self,
        partitions: &[TopicPartition],
        timeout: Option<Duration>,
    ) -> Result<Vec<(TopicPartition, Option<OffsetAndMetadata>)>> {
        self.check_open()?;
        let group = self
            .shared
            .config
            .group_id
            .clone()
            .ok_or_else(|| Error::IllegalState("committed() needs group.id".into()))?;
        let deadline = self.api_deadline(timeout);
        let cluster = self.shared.cluster.clone();
        let parts = partitions.to_vec();
        let mut map = self.block_on(async move {
            offsets::fetch_committed(&cluster, &group, &parts, deadline).await
        })??;
        Ok(partitions
            .iter()
            .map(|tp| (tp.clone(), map.remove(tp).flatten()))
            .collect())
    }

    /// The partitions of `topic` (an unknown topic is `Error::UnknownTopic`).
    pub fn partitions_for(&self, topic: &str, timeout: Option<Duration>) -> Result<Vec<i32>> {
        self.check_open()?;
        let deadline = self.api_deadline(timeout);
        let cluster = self.shared.cluster.clone();
        let topic = topic.to_string();
        let parts = self.block_on(async move { cluster.partitions(&topic, deadline).await })??;
        Ok(parts.iter().map(|p| p.partition).collect())
    }

    /// Leaves the group (committing first with auto-commit, revoking through the listener on
    /// this thread), stops fetching and releases the runtime, within `timeout` (default
    /// `default.api.timeout.ms`). Later calls give `Error::Closed`.
    pub fn close(&self, timeout: Option<Duration>) -> Result<()> {
        self.close_with(self.api_deadline(timeout), true)
    }

    fn close_with(&self, deadline: Deadline, callbacks: bool) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        let callback_error =
            self.leave_group_now("the consumer is being closed", deadline, callbacks);
        if callbacks {
            self.run_commit_callbacks();
        }
        self.mark_closed();
        callback_error.map_or(Ok(()), Err)
    }

    /// Stops fetching and the group's tasks; later calls give `Error::Closed`.
    pub(crate) fn mark_closed(&self) {
        if let Some(d) = self.simple_committer.lock().unpoisoned().take() {
            d.close();
        }
        if let Some(local) = self.group.lock().unpoisoned().as_ref() {
            local.driver.close();
        }
        self.closed.store(true, Ordering::Release);
        self.shared.lock().closed = true;
        self.shared.changed.notify_one();
        self.shared.data_ready.notify_all();
    }
}

impl Drop for Consumer {
    /// A consumer dropped without `close()` still commits (with auto-commit) and leaves its
    /// group, bounded in time; listener callbacks do not run from a destructor.
    ///
    /// Inside a tokio runtime this blocks the dropping thread for that bounded time, and the
    /// consumer's own runtime is then shut down in the background (waiting for it there would
    /// panic). A consumer on the application's runtime (the async front) never blocks here: its
    /// front leaves the group asynchronously first.
    fn drop(&mut self) {
        match &self.engine {
            Some(e) if e.is_shared() => self.mark_closed(),
            _ => {
                let _ = self.close_with(Deadline::after(Duration::from_secs(5)), false);
            }
        }
        if let Some(engine) = self.engine.take() {
            engine.shutdown(Duration::from_secs(1));
        }
    }
}

fn validate_tp(tp: &TopicPartition) -> Result<()> {
    if tp.topic.is_empty() {
        return Err(Error::InvalidArgument("topic name is empty".into()));
    }
    if tp.partition < 0 {
        return Err(Error::InvalidArgument(format!(
            "partition of `{}` must be >= 0, got {}",
            tp.topic, tp.partition
        )));
    }
    Ok(())
}

/// The calling thread, for [`crate::recovery::UnprocessedRecovery`]: a `recovery_poll()` says that the batch the
/// same thread got last is processed, nothing about another thread's.
fn recovery_caller() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    thread_local! {
        static CALLER: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    CALLER.with(|c| *c)
}

/// Which streams a call takes records from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streams {
    /// `poll()`, `recv()`: both, interleaved.
    Both,
    /// `poll()` with `parallel.rebalance.recovery.poll`: the recovery records are
    /// `recovery_poll()`'s.
    Main,
    /// `recovery_poll()`.
    Recovery,
}

impl Streams {
    /// The streams `poll()` (and the async front's `recv()`) take from.
    pub(crate) fn for_poll(config: &ConsumerConfig) -> Streams {
        if config.recovery_poll {
            Streams::Main
        } else {
            Streams::Both
        }
    }

    fn has(self, kind: StreamKind) -> bool {
        match self {
            Streams::Both => true,
            Streams::Main => kind == StreamKind::Main,
            Streams::Recovery => kind == StreamKind::Recovery,
        }
    }
}

/// What a `poll()` or `recv()` took from the fetch buffers.
pub(crate) struct Taken {
    pub records: Vec<ConsumerRecord>,
    /// A stream dropped below its limit: the fetch task, which stops fetching for it at the
    /// limit, should hear of it. Taking records from a buffer that was below its limit already
    /// wakes nobody, so a `recv()` per record does not wake the fetch task per record. (The
    /// consumer's budget, `fetch.buffer.max.bytes`, wakes the fetch task itself when the buffers
    /// of the records taken come back.)
    pub refill: bool,
}

/// The buffer limit the fetch task stops at for a stream: `2 x max.partition.fetch.bytes`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BufferLimits {
    pub stream: usize,
}

impl BufferLimits {
    pub(crate) fn of(config: &ConsumerConfig) -> BufferLimits {
        BufferLimits {
            stream: 2 * config.max_partition_fetch_bytes.max(0) as usize,
        }
    }
}

/// Whether taking a buffer from `before` bytes down to `after` crossed below `limit`.
fn dropped_below(before: usize, after: usize, limit: usize) -> bool {
    before >= limit && after < limit
}

/// What a `poll()` or `recv()` hands out now: a wakeup, a partition's error, or up to `max`
/// records (their positions advance here, and only here); `None` when there is nothing yet.
pub(crate) fn take_ready(
    st: &mut fetch::FetchState,
    max: usize,
    limits: BufferLimits,
    streams: Streams,
) -> Result<Option<Taken>> {
    take_wakeup_or_error(st)?;
    let taken = drain_records(st, max, limits, streams);
    Ok((!taken.records.is_empty()).then_some(taken))
}

/// What a poll returns before any record: a `wakeup()` since the last one, then an error the
/// fetch task met (each comes out of one poll).
fn take_wakeup_or_error(st: &mut fetch::FetchState) -> Result<()> {
    if st.wakeup {
        st.wakeup = false;
        return Err(Error::Wakeup);
    }
    st.errors.pop_front().map_or(Ok(()), Err)
}

/// [`take_ready`] for one record at a time (the async stream): the record goes into `out`, a
/// buffer the caller keeps, so a busy stream allocates nothing per record. `Ok(false)` when there
/// is nothing yet; otherwise `out` holds one record and the fetch task has been told of room
/// when the buffer dropped below a limit.
pub(crate) fn take_one_ready(
    shared: &fetch::Shared,
    limits: BufferLimits,
    out: &mut Vec<ConsumerRecord>,
) -> Result<bool> {
    let mut st = shared.lock();
    take_wakeup_or_error(&mut st)?;
    let refill = drain_records_into(&mut st, 1, limits, Streams::Both, out);
    drop(st);
    if refill {
        shared.changed.notify_one();
    }
    Ok(!out.is_empty())
}

/// Takes up to `max` buffered records, round-robin over the streams of every partition (one
/// partition's backlog does not starve the others, and a partition's recovery stream and main
/// stream take turns), and advances each stream's position past what it returns.
fn drain_records(
    st: &mut fetch::FetchState,
    max: usize,
    limits: BufferLimits,
    streams: Streams,
) -> Taken {
    let mut records = Vec::new();
    if st.partitions.is_empty() || st.buffered_bytes == 0 {
        return Taken {
            records,
            refill: false,
        };
    }
    // Room for what one poll usually takes; more grows the vector as it comes. Never sized by a
    // setting: max.poll.records may be 2^31-1.
    records.reserve(max.min(RECORDS_RESERVED));
    let refill = drain_records_into(st, max, limits, streams, &mut records);
    Taken { records, refill }
}

/// What a poll reserves room for at first (`max.poll.records`' default).
const RECORDS_RESERVED: usize = 500;

/// [`drain_records`] into `out` (empty on entry); returns whether a stream dropped below its
/// limit.
fn drain_records_into(
    st: &mut fetch::FetchState,
    max: usize,
    limits: BufferLimits,
    streams: Streams,
    out: &mut Vec<ConsumerRecord>,
) -> bool {
    debug_assert!(out.is_empty());
    let mut refill = false;
    if st.partitions.is_empty() || st.buffered_bytes == 0 {
        return false;
    }
    // Round-robin over the streams with something to hand out, starting one further each call.
    // Two passes over the partition map and no collection: this runs once per record for a
    // `recv()` or `poll_at_most(_, 1)` loop.
    let has = |p: &PartitionState, kind: StreamKind| match kind {
        _ if !streams.has(kind) => false,
        StreamKind::Main => !p.main.buffer.is_empty(),
        StreamKind::Recovery => p
            .recovery
            .as_ref()
            .is_some_and(|r| !r.stream.buffer.is_empty()),
    };
    const KINDS: [StreamKind; 2] = [StreamKind::Main, StreamKind::Recovery];
    let k = st
        .partitions
        .values()
        .filter(|p| p.delivers())
        .map(|p| KINDS.iter().filter(|&&kind| has(p, kind)).count())
        .sum::<usize>();
    if k == 0 {
        return false;
    }
    let start = st.rotation % k;
    st.rotation = st.rotation.wrapping_add(1);
    let mut freed = 0usize;
    // The streams numbered start.. first, then those before start. Taking from a stream changes
    // only its own "has records", and the second pass stops before the first pass' streams, so
    // the numbering of the streams still to visit never shifts.
    for first_pass in [true, false] {
        let mut unit = 0usize;
        'partitions: for (tp, p) in st.partitions.iter_mut() {
            // Paused, or (KIP-320) its position waits for validation against a new leader.
            if !p.delivers() {
                continue;
            }
            for kind in KINDS {
                if out.len() >= max || (!first_pass && unit >= start) {
                    break 'partitions;
                }
                if !has(p, kind) {
                    continue;
                }
                let this = unit;
                unit += 1;
                if first_pass && this < start {
                    continue;
                }
                let stream_bytes = |p: &PartitionState| match kind {
                    StreamKind::Main => p.main.buffered_bytes,
                    StreamKind::Recovery => {
                        p.recovery.as_ref().map_or(0, |r| r.stream.buffered_bytes)
                    }
                };
                let before = stream_bytes(p);
                // Each stream may fill the rest of the poll, so a single stream can fill it.
                while out.len() < max {
                    let Some((r, size)) = p.pop(kind) else { break };
                    freed += size;
                    out.push(ConsumerRecord {
                        topic: p.topic.clone(),
                        partition: tp.partition,
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: r.key,
                        value: r.value,
                        headers: r.headers,
                        from_recovery: kind == StreamKind::Recovery,
                    });
                }
                refill |= dropped_below(before, stream_bytes(p), limits.stream);
                p.after_drain();
            }
        }
    }
    st.buffered_bytes -= freed;
    refill
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::config::Config;
    use crate::fetch::{record_size, BufferedBatch};
    use crate::protocol::records::RecordSpans;

    /// A record of the buffers [`buffered`] makes: no key, no value.
    fn spans(offset: i64) -> RecordSpans {
        RecordSpans {
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
        }
    }

    /// The bytes each record of [`buffered`] counts against the buffer limits.
    fn size() -> usize {
        record_size(&spans(0))
    }

    /// Partitions 0..n of topic `t`, each with `records` buffered records of [`size`] bytes from
    /// offset 0 (one batch); the partitions in `paused` paused.
    fn buffered(n: i32, records: i64, paused: &[i32]) -> fetch::FetchState {
        let mut st = fetch::FetchState {
            partitions: BTreeMap::new(),
            errors: Default::default(),
            buffered_bytes: 0,
            reserved: 0,
            expansion: fetch::Expansion::new(),
            answers_with_records: 0,
            wakeup: false,
            closed: false,
            reported_unknown: Default::default(),
            rotation: 0,
        };
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        for partition in 0..n {
            let mut p = PartitionState::new("t", PositionLookup::Committed, backoff);
            p.paused = paused.contains(&partition);
            p.main.buffer.push(BufferedBatch {
                data: bytes::Bytes::new(),
                records: (0..records).map(spans).collect(),
                leader_epoch: -1,
            });
            p.main.buffered_bytes += records as usize * size();
            st.buffered_bytes += records as usize * size();
            p.main.fetch_offset = Some(records);
            st.partitions.insert(TopicPartition::new("t", partition), p);
        }
        st
    }

    const NO_LIMITS: BufferLimits = BufferLimits { stream: usize::MAX };

    fn one(st: &mut fetch::FetchState, limits: BufferLimits) -> ((i32, i64), bool) {
        let taken = take_ready(st, 1, limits, Streams::Both)
            .unwrap()
            .expect("a record");
        assert_eq!(taken.records.len(), 1);
        let r = &taken.records[0];
        ((r.partition, r.offset), taken.refill)
    }

    fn recovery_config() -> ConsumerConfig {
        ConsumerConfig::from_config(
            &Config::from_pairs([
                ("bootstrap.servers", "127.0.0.1:1"),
                ("group.id", "g"),
                ("enable.parallel.rebalance", "true"),
                ("parallel.rebalance.recovery.poll", "true"),
            ])
            .unwrap(),
        )
        .unwrap()
    }

    fn om(offset: i64, metadata: &str) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            metadata: metadata.into(),
        }
    }

    /// Partition `tp` taken over at `committed` with the log ending at 540, so its state has a
    /// position (540) and the takeover's committed offset; `held` the ranges before a batch a
    /// recovery thread holds.
    fn taken_over(
        st: &mut fetch::FetchState,
        tp: &TopicPartition,
        committed: i64,
        held: &[RecoveryRange],
    ) {
        let p = st.partitions.get_mut(tp).expect("assigned");
        p.position = Some(540);
        p.lookup = None;
        p.committed_at_takeover = Some(committed);
        if !held.is_empty() {
            p.unprocessed.handing_out(7, held);
        }
    }

    /// The revoke-and-return sequence through the paths every rebalance takes (revoked in an
    /// eager or a cooperative rebalance, lost, unsubscribed: `consumer/group.rs` removes the
    /// partition's state): a batch held when the partition left says nothing once it is back.
    #[test]
    fn a_held_recovery_batch_ends_with_its_partition() {
        let config = recovery_config();
        let buffers = crate::buffers::FetchBuffers::new();
        let cluster = Cluster::with_answers(config.common.clone(), buffers.answers.clone());
        let shared = Shared::new(cluster, config, buffers);
        let tp = TopicPartition::new("t", 0);
        let held = [RecoveryRange {
            start: 40,
            end: 540,
            next: 70,
        }];
        shared.add_partitions([&tp], PositionLookup::Committed);
        taken_over(&mut shared.lock(), &tp, 40, &held);
        assert_eq!(
            shared.commit_offsets([&tp]),
            [(tp.clone(), om(70, "lagless1;m=540;r=40-540@70"))]
        );
        shared.remove_partitions([&tp]);
        // Back after another member committed 300 (no backlog stream here: the main stream at
        // 540 is all the state has).
        shared.add_partitions([&tp], PositionLookup::Committed);
        assert!(shared.lock().partitions[&tp]
            .unprocessed
            .batches()
            .next()
            .is_none());
        taken_over(&mut shared.lock(), &tp, 300, &[]);
        assert_eq!(shared.commit_offsets([&tp]), [(tp.clone(), om(540, ""))]);
        let st = shared.lock();
        assert_eq!(
            st.partitions[&tp].commit_point(Some(&om(500, "app"))),
            Some(om(500, "app"))
        );
    }

    /// The same through `assign()`: a partition assigned again after an assignment without it
    /// starts with nothing held, while one kept through both keeps its batch.
    #[test]
    fn assign_without_a_partition_ends_its_held_recovery_batch() {
        let c = Consumer::new(recovery_config()).unwrap();
        let (t0, t1) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
        let held = [RecoveryRange {
            start: 40,
            end: 540,
            next: 70,
        }];
        c.assign(&[t0.clone(), t1.clone()]).unwrap();
        {
            let mut st = c.shared.lock();
            taken_over(&mut st, &t0, 40, &held);
            taken_over(&mut st, &t1, 40, &held);
        }
        c.assign(std::slice::from_ref(&t1)).unwrap();
        c.assign(&[t0.clone(), t1.clone()]).unwrap();
        taken_over(&mut c.shared.lock(), &t0, 300, &[]);
        assert_eq!(
            c.consumed_offsets(),
            [
                (t0, om(540, "")),
                (t1, om(70, "lagless1;m=540;r=40-540@70"))
            ]
        );
        c.close(Some(Duration::from_secs(5))).unwrap();
    }

    /// One record at a time, the partitions take turns (each in offset order), a paused one
    /// never hands anything out, and each position follows what was handed out.
    #[test]
    fn records_taken_one_at_a_time_go_round_the_partitions_in_order() {
        let mut st = buffered(3, 2, &[1]);
        let got: Vec<(i32, i64)> = (0..4).map(|_| one(&mut st, NO_LIMITS).0).collect();
        assert_eq!(got, [(0, 0), (2, 0), (0, 1), (2, 1)]);
        assert!(take_ready(&mut st, 1, NO_LIMITS, Streams::Both)
            .unwrap()
            .is_none());
        assert_eq!(
            st.buffered_bytes,
            2 * size(),
            "the paused partition's records stay"
        );
        let position =
            |st: &fetch::FetchState, p| st.partitions[&TopicPartition::new("t", p)].position;
        assert_eq!(position(&st, 0), Some(2));
        assert_eq!(position(&st, 1), None);
        assert_eq!(position(&st, 2), Some(2));
    }

    /// A batch takes from every partition, starting one further each time.
    #[test]
    fn a_batch_fills_from_each_partition_starting_one_further_each_time() {
        let mut st = buffered(3, 4, &[]);
        let batch = |st: &mut fetch::FetchState, max| -> Vec<(i32, i64)> {
            let t = take_ready(st, max, NO_LIMITS, Streams::Both)
                .unwrap()
                .unwrap();
            t.records.iter().map(|r| (r.partition, r.offset)).collect()
        };
        assert_eq!(batch(&mut st, 5), [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]);
        // Partition 0 has nothing left: the turn goes round partitions 1 and 2.
        assert_eq!(batch(&mut st, 2), [(2, 0), (2, 1)]);
        assert_eq!(batch(&mut st, 10), [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3)]);
    }

    /// The fetch task is woken only when a stream drops below the limit it stops fetching at,
    /// not on every record taken.
    #[test]
    fn the_fetch_task_hears_only_of_a_buffer_dropping_below_its_limit() {
        let mut st = buffered(2, 3, &[]);
        // Each stream holds 3 records.
        let per_stream = BufferLimits { stream: 3 * size() };
        let refills: Vec<bool> = (0..6).map(|_| one(&mut st, per_stream).1).collect();
        assert_eq!(refills, [true, true, false, false, false, false]);
        assert!(dropped_below(10, 9, 10) && !dropped_below(9, 0, 10) && !dropped_below(20, 10, 10));
    }

    /// A poll that may take 2^31-1 records reserves room for what it takes, not for that many
    /// (nor one record per byte buffered, as it once did: a 64 MiB buffer reserved 64M records).
    #[test]
    fn a_huge_max_poll_records_reserves_room_only_for_what_comes() {
        let mut st = buffered(2, 1000, &[]);
        let taken = take_ready(&mut st, i32::MAX as usize, NO_LIMITS, Streams::Both)
            .unwrap()
            .unwrap();
        assert_eq!(taken.records.len(), 2000);
        assert!(
            taken.records.capacity() <= 2 * 2000,
            "room for {} records",
            taken.records.capacity()
        );
    }
}
