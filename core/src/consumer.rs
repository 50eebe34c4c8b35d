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

use crate::backoff::Deadline;
use crate::cluster::Cluster;
use crate::config::{Config, ConsumerConfig, GroupProtocolKind};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fetch::{
    self, drain_records, take_ready, BufferLimits, PartitionState, PositionLookup, Shared, Streams,
};
use crate::group::classic::Classic;
use crate::group::consumer_group::ConsumerGroup;
use crate::group::coordinator::GroupDriver;
use crate::group::group_protocol::GroupProtocol;
use crate::metrics::otel::{ConsumerInstruments, Operation};
use crate::metrics::window::PollTimes;
use crate::offsets::{self, EARLIEST_TIMESTAMP, LATEST_TIMESTAMP};
use crate::sync::Unpoisoned;
use crate::telemetry::{self, Reporter};
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

mod commits;
mod driver_task;
pub mod error_callback;
mod group;
mod group_local;
mod idle_steps;
mod learners;
#[cfg(test)]
mod protocol_seam_tests;
mod rebalance_listener;
mod snapshot;
pub mod statistics;

pub use commits::{CommitCallback, CommitResults};
use group::GroupLocal;
pub use rebalance_listener::{BoxFuture, RebalanceListener};
// Defined below the consumer, where the fetch path and the producer reach them; their public
// paths (and doc pages) stay `lagless::consumer::{ConsumerRecord, GroupMetadata}`.
pub use crate::fetch::ConsumerRecord;
#[doc(inline)]
pub use crate::types::GroupMetadata;
#[cfg(feature = "aio")]
pub(crate) use rebalance_listener::{Callback, Dispatch};

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
    /// The group member's state, once `subscribe()` was called. Shared with the member's driver
    /// task, which takes the group steps needing no callback while the application is busy
    /// (`consumer/driver_task.rs`).
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
    /// The protocol the member speaks once `subscribe()` makes it one (`group.protocol`).
    pub(crate) group_protocol: Arc<dyn GroupProtocol>,
    /// The fetch task, which `close()` waits for: its last act ends the consumer's fetch
    /// sessions on the brokers.
    fetch_task: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// `statistics.interval.ms`'s callback and when it last ran.
    statistics: statistics::Statistics<crate::metrics::ConsumerMetrics>,
    /// The error callback for whole-cluster conditions.
    error_callback: error_callback::ErrorCallbackSlot,
    /// When polls started and ended, and what they returned (the poll metrics); shared with
    /// the client telemetry task's snapshots.
    pub(crate) poll_times: Arc<Mutex<PollTimes>>,
    /// KIP-714's client telemetry task (`enable.metrics.push`).
    telemetry: Option<Reporter>,
    /// The OpenTelemetry instruments (the `opentelemetry` feature; nothing without it), shared
    /// with the group member's driver for the commits.
    pub(crate) instruments: Arc<ConsumerInstruments>,
}

/// One `poll()` (or async `recv_batch()`) being timed for the poll metrics: started when made,
/// ended when dropped, so that every way out of a poll (records, nothing, an error, an async
/// caller giving up) ends it.
pub(crate) struct PollTiming<'a> {
    times: &'a Mutex<PollTimes>,
    /// Records the poll returns, and their key + value bytes.
    records: usize,
    bytes: u64,
}

impl<'a> PollTiming<'a> {
    pub(crate) fn start(times: &'a Mutex<PollTimes>) -> PollTiming<'a> {
        times.lock().unpoisoned().started(Instant::now());
        PollTiming {
            times,
            records: 0,
            bytes: 0,
        }
    }

    /// The poll returns `records`.
    pub(crate) fn returns(&mut self, records: &[ConsumerRecord]) {
        self.records = records.len();
        self.bytes = crate::fetch::record::key_value_bytes(records);
    }
}

impl Drop for PollTiming<'_> {
    fn drop(&mut self) {
        self.times
            .lock()
            .unpoisoned()
            .ended(Instant::now(), self.records, self.bytes);
    }
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
        let group_protocol: Arc<dyn GroupProtocol> = match config.group_protocol {
            GroupProtocolKind::Classic => Arc::new(Classic),
            GroupProtocolKind::Consumer => Arc::new(ConsumerGroup::new()),
        };
        let buffers = crate::buffers::FetchBuffers::new();
        let cluster = Cluster::with_answers(config.common.clone(), buffers.answers.clone());
        let shared = Shared::new(cluster, config, buffers);
        let fetch_task = engine.handle().spawn(fetch::run(shared.clone()));
        let group = Arc::new(Mutex::new(None));
        let poll_times = Arc::new(Mutex::new(PollTimes::default()));
        let telemetry = shared.config.enable_metrics_push.then(|| {
            let (parts, group, polls) = (shared.clone(), group.clone(), poll_times.clone());
            let rack = shared.config.common.client_rack.clone();
            Reporter::spawn(
                engine.handle(),
                shared.cluster.clone(),
                Arc::new(move || {
                    let m = snapshot::snapshot(&parts, &group, &polls);
                    telemetry::Collected {
                        points: telemetry::collect::points(&m),
                        resource: telemetry::collect::resource(&m, rack.as_deref()),
                    }
                }),
            )
        });
        let (commits_tx, commits_done) = mpsc::channel();
        let instruments = Arc::new(ConsumerInstruments::new(shared.config.group_id.as_deref()));
        Ok(Consumer {
            shared,
            engine: Some(engine),
            closed: AtomicBool::new(false),
            group,
            simple_committer: Mutex::new(None),
            commits_tx,
            commits_done: Mutex::new(commits_done),
            recovery_wakeup: AtomicBool::new(false),
            idle_steps: Default::default(),
            group_protocol,
            fetch_task: Mutex::new(Some(fetch_task)),
            statistics: statistics::Statistics::new(Instant::now()),
            error_callback: Default::default(),
            poll_times,
            telemetry,
            instruments,
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
        self.shared.lock().assign(partitions, lookup, backoff);
        self.shared
            .cluster
            .add_interest(partitions.iter().map(|tp| &tp.topic));
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The partitions currently assigned.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.shared.lock().assignment()
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
        let mut timing = PollTiming::start(&self.poll_times);
        let started = Instant::now();
        self.instruments.poll_started(Operation::Poll, started);
        let result = self.poll_records(timeout, max);
        self.observe_poll(Operation::Poll, started, &result);
        let records = result?;
        timing.returns(&records);
        Ok(records)
    }

    /// A poll of `op` that started at `started` returned `result`: for the OpenTelemetry
    /// instruments.
    pub(crate) fn observe_poll(
        &self,
        op: Operation,
        started: Instant,
        result: &Result<Vec<ConsumerRecord>>,
    ) {
        let now = Instant::now();
        match result {
            Ok(records) => self.instruments.poll_ended(
                op,
                started,
                now,
                records.iter().map(|r| (&r.topic, r.partition)),
                None,
            ),
            Err(e) => self
                .instruments
                .poll_ended(op, started, now, std::iter::empty(), Some(e)),
        }
    }

    /// The OpenTelemetry meter provider the consumer's instruments come from (the
    /// `opentelemetry` feature; see [`crate::metrics::otel`]). Without this call they come from
    /// the global provider at the first poll or commit; once made they stay, so a call after that
    /// is refused with `IllegalState`.
    #[cfg(feature = "opentelemetry")]
    pub fn set_meter_provider(
        &self,
        provider: &dyn opentelemetry::metrics::MeterProvider,
    ) -> Result<()> {
        self.instruments.set_provider(provider)
    }

    fn poll_records(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>> {
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
            // Before records are taken: an error of a callback leaves them for the next call.
            self.emit_raised()?;
            let statistics_due = self.emit_statistics()?;
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
            // A statistics emission due before the deadline wakes the wait for it.
            let wait = match statistics_due {
                Some(at) if at < deadline.instant() => {
                    let now = Instant::now();
                    Deadline::after_from(now, at.saturating_duration_since(now))
                }
                _ => deadline,
            };
            if self.shared.wait_for_data(st, &wait).is_none() && deadline.expired() {
                return Ok(Vec::new());
            }
        }
    }

    /// Makes a blocked (or the next) `poll()` return `Error::Wakeup`, and with
    /// `parallel.rebalance.recovery.poll` a blocked (or the next) `recovery_poll()` too. Safe from
    /// any thread.
    pub fn wakeup(&self) {
        let mut st = self.shared.lock();
        st.wake();
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
        let started = Instant::now();
        let result = self.recovery_records(timeout, max);
        self.observe_poll(Operation::RecoveryPoll, started, &result);
        result
    }

    fn recovery_records(&self, timeout: Duration, max: usize) -> Result<Vec<ConsumerRecord>> {
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
        st.recovery_batch_processed(caller);
        loop {
            if self.recovery_wakeup.swap(false, Ordering::AcqRel) {
                return Err(Error::Wakeup);
            }
            if st.is_closed() || self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            // Each partition's ranges before this call takes from them: they owe the whole batch.
            let before = st.recovery_ranges_buffered();
            if !before.is_empty() {
                let taken = drain_records(&mut st, max, limits, Streams::Recovery);
                if !taken.records.is_empty() {
                    st.recovery_batch_handed_out(caller, &before, &taken.records);
                    drop(st);
                    if taken.refill {
                        self.shared.changed.notify_one();
                    }
                    // In the consumed rates, once per batch; not in the poll's rhythm (the
                    // time between polls, the idle ratio, the last poll), which is the
                    // poll() thread's, and which this call, on a thread of its own, would blur.
                    let bytes = crate::fetch::record::key_value_bytes(&taken.records);
                    self.poll_times.lock().unpoisoned().consumed(
                        Instant::now(),
                        taken.records.len(),
                        bytes,
                    );
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
        st.commit_point(tp, asked)
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
            self.shared.lock().change_partition(tp, f).ok_or_else(|| {
                Error::IllegalState(format!("{tp} is not assigned to this consumer"))
            })?;
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
            let p = st.partition(tp).ok_or_else(|| {
                Error::IllegalState(format!("{tp} is not assigned to this consumer"))
            })?;
            if let Some(pos) = p.position {
                return Ok(pos);
            }
            if p.lookup.is_none() {
                // auto.offset.reset=none found nothing: the error waits in the queue.
                if let Some(e) = st.take_no_offset_error(tp) {
                    return Err(e);
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
        st.partition(tp)
            .map(|p| p.recovery_active())
            .ok_or_else(|| Error::IllegalState(format!("{tp} is not assigned to this consumer")))
    }

    /// KIP-333: whether any assigned partition has a recovery stream still draining a backlog
    /// (the draft's "child consumer"). False once the consumer is closed.
    pub fn child_consumer_is_alive(&self) -> bool {
        if self.check_open().is_err() {
            return false;
        }
        self.shared.lock().any_recovery_active()
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
            if !st.set_paused(tp, paused) {
                return Err(Error::IllegalState(format!(
                    "{tp} is not assigned to this consumer"
                )));
            }
        }
        drop(st);
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The assigned partitions that are paused.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.shared.lock().paused()
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
        // KIP-714: the terminating push takes its values before the group is left (as the Java
        // client's close starts with it), waited for within the close's deadline.
        let own_engine = self.engine.as_ref().filter(|e| !e.is_shared());
        if let (Some(engine), Some(collected)) = (
            own_engine,
            self.telemetry.as_ref().and_then(Reporter::initiate_close),
        ) {
            let wait = telemetry::close_wait(deadline, self.shared.config.common.request_timeout);
            let _ = engine.block_on(async move { tokio::time::timeout(wait, collected).await });
        }
        let callback_error =
            self.leave_group_now("the consumer is being closed", deadline, callbacks);
        if callbacks {
            self.run_commit_callbacks();
        }
        self.mark_closed();
        if let (Some(engine), Some(task)) = (own_engine, self.take_fetch_task()) {
            // Bounded by the task itself too: it waits fetch.max.wait.ms + 1 s at most for the
            // brokers to end its fetch sessions. The timer is made inside the engine's context
            // (an async block), as a tokio timer made outside a runtime panics.
            let wait = deadline.remaining();
            let _ = engine.block_on(async move { tokio::time::timeout(wait, task).await });
        }
        if let (Some(engine), Some(task)) = (
            own_engine,
            self.telemetry.as_ref().and_then(Reporter::take_task),
        ) {
            let wait = telemetry::close_wait(deadline, self.shared.config.common.request_timeout);
            let _ = engine.block_on(async move { tokio::time::timeout(wait, task).await });
        }
        callback_error.map_or(Ok(()), Err)
    }

    /// The fetch task, for the one close that waits for it to end.
    pub(crate) fn take_fetch_task(&self) -> Option<tokio::task::JoinHandle<()>> {
        self.fetch_task.lock().unpoisoned().take()
    }

    /// Stops fetching and the group's tasks; later calls give `Error::Closed`.
    pub(crate) fn mark_closed(&self) {
        if let Some(d) = self.simple_committer.lock().unpoisoned().take() {
            d.close();
        }
        if let Some(local) = self.group.lock().unpoisoned().as_ref() {
            local.driver.close();
        }
        if let Some(t) = &self.telemetry {
            // The async front's close, and a drop: the last push goes on in the background.
            t.initiate_close();
        }
        self.closed.store(true, Ordering::Release);
        self.shared.lock().close();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::recovery::RecoveryRange;

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
        let p = st.partition_mut(tp).expect("assigned");
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
        assert!(shared
            .lock()
            .partition(&tp)
            .expect("assigned")
            .unprocessed
            .batches()
            .next()
            .is_none());
        taken_over(&mut shared.lock(), &tp, 300, &[]);
        assert_eq!(shared.commit_offsets([&tp]), [(tp.clone(), om(540, ""))]);
        let st = shared.lock();
        assert_eq!(
            st.partition(&tp)
                .expect("assigned")
                .commit_point(Some(&om(500, "app"))),
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
}
