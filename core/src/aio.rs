//! The async front: a consumer and a producer for tokio applications.
//!
//! [`Consumer`] runs on the application's own tokio runtime: created inside it, its fetch,
//! heartbeat and commit tasks are spawned on [`tokio::runtime::Handle::current`] (no second
//! runtime, no blocking call inside async code). It is the same engine as the blocking
//! [`crate::Consumer`]; only the front differs:
//!
//! - [`Consumer::recv`], [`Consumer::recv_batch`] and [`Consumer::stream`] hand out records.
//!   They are cancellation safe: a record is consumed (its position moves past it) only in the
//!   poll that returns it, so dropping a pending `recv()` (a `tokio::select!` branch that lost,
//!   a timeout) loses nothing.
//! - The group steps (joining, the rebalance listener, auto-commit) run inside `recv()` and
//!   friends, on the application's task, in order; the listener's callbacks may await (commit
//!   in `on_partitions_revoked`, warm up in `on_partitions_learning`). A step interrupted by a
//!   cancelled `recv()` is resumed by the next one, not restarted or lost.
//! - KIP-62 holds as in the blocking API: not calling `recv()` for `max.poll.interval.ms`
//!   leaves the group, and the next `recv()` reports the partitions lost and rejoins.
//!
//! - `statistics.interval.ms`'s callback runs inside `recv()` too, on the application's task
//!   ([`Consumer::set_statistics_callback`]).
//! - Errors of single partitions come out of `recv()` one per call, and the consumer keeps
//!   serving the others (KIP-572), as from the blocking `poll()`. Recovery streams (KIP-333) and
//!   learner assignments work as in the blocking API; `on_partitions_learning` may await its
//!   warm-up without blocking the application's other tasks.
//!
//! [`Producer`] runs on the application's runtime too: `send()` awaits only the metadata of a
//! topic not seen before and room in `buffer.memory`, and returns a future of the delivery
//! report. Its transactional calls (`init_transactions`, `begin_transaction`,
//! `send_offsets_to_transaction` with the async consumer's [`Consumer::group_metadata`],
//! `commit_transaction`, `abort_transaction`) await on the same runtime, with the blocking
//! producer's states and errors.
//!
//! The blocking [`crate::Consumer`] and [`crate::Producer`] also work inside a runtime (they
//! block the calling worker thread for each call); these are the API for async code.
use std::collections::HashMap;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use crate::backoff::Deadline;
use crate::config::{Config, ConsumerConfig, ProducerConfig};
use crate::consumer::{Callback, ConsumerRecord, Dispatch, GroupMetadata};
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::fetch::{take_one_ready, take_ready, BufferLimits, Streams};
use crate::metrics::otel::{ConsumedRun, Operation};
use crate::offsets::{self, CommitResults};
use crate::producer::{ProducerRecord, RecordMetadata};
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

pub use crate::consumer::BoxFuture;

/// Called when the consumer's assignment changes, inside the application's `recv()` (or
/// `recv_batch()`, the stream, `close()`, `unsubscribe()`), in order, on its task. Each method
/// returns a future, so a callback may await; a boxed `async move` block is the usual body:
///
/// ```no_run
/// use lagless::aio::{BoxFuture, Consumer, RebalanceListener};
/// use lagless::TopicPartition;
///
/// struct CommitOnRevoke;
/// impl RebalanceListener for CommitOnRevoke {
///     fn on_partitions_revoked<'a>(&'a mut self, consumer: &'a Consumer, _: &'a [TopicPartition])
///         -> BoxFuture<'a, lagless::Result<()>> {
///         Box::pin(async move { consumer.commit(None).await })
///     }
/// }
/// ```
///
/// An error returned by a callback does not stop the assignment change; it comes out of that
/// `recv()` afterwards as [`Error::Callback`], as in the blocking [`crate::RebalanceListener`].
/// Do not call `recv()` from a callback (it fails with `Error::IllegalState`).
pub trait RebalanceListener: Send {
    /// Partitions this member gives up. Commit their offsets here if you commit by hand.
    fn on_partitions_revoked<'a>(
        &'a mut self,
        _consumer: &'a Consumer,
        _partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Partitions newly given to this member (called once per rebalance, possibly empty).
    fn on_partitions_assigned<'a>(
        &'a mut self,
        _consumer: &'a Consumer,
        _partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Learner assignments: warm up for partitions this member will own once ready; `Ok` says
    /// it is. See [`crate::RebalanceListener::on_partitions_learning`]. Awaiting here does not
    /// block the application's other tasks; it must still end within `max.poll.interval.ms`.
    fn on_partitions_learning<'a>(
        &'a mut self,
        _consumer: &'a Consumer,
        _partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
    /// Partitions that may already belong to another member: committing them is no longer
    /// possible.
    fn on_partitions_lost<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Result<()>> {
        self.on_partitions_revoked(consumer, partitions)
    }
}

/// A group step in progress, kept across `recv()` calls so a cancelled one is resumed.
type StepFuture = BoxFuture<'static, Result<()>>;

struct Inner {
    /// The engine, on the application's runtime.
    consumer: crate::Consumer,
    listener: Mutex<Option<Box<dyn RebalanceListener>>>,
    steps: Mutex<Option<StepFuture>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unpoisoned()
}

thread_local! {
    /// Set while this thread runs the group steps (and so the listener's callbacks).
    static IN_STEPS: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// A Kafka consumer for tokio applications. Create it inside the runtime it is to run on.
///
/// ```no_run
/// use std::time::Duration;
/// use lagless::aio::Consumer;
/// use lagless::Config;
///
/// #[tokio::main]
/// async fn main() -> lagless::Result<()> {
///     let consumer = Consumer::from_config(&Config::from_pairs([
///         ("bootstrap.servers", "localhost:9092"),
///         ("group.id", "billing"),
///         ("enable.auto.commit", "false"),
///     ])?)?;
///     consumer.subscribe(&["orders"], None)?;
///     // A recv_batch() dropped by the timeout loses no record: records are consumed only
///     // when handed out.
///     while let Ok(batch) =
///         tokio::time::timeout(Duration::from_secs(30), consumer.recv_batch(500)).await
///     {
///         for record in batch? {
///             println!("{}-{}@{}", record.topic, record.partition, record.offset);
///         }
///         consumer.commit(None).await?;
///     }
///     consumer.close().await
/// }
/// ```
pub struct Consumer {
    inner: Arc<Inner>,
    /// The application's handle (false: the one a listener callback is given), whose drop
    /// closes the consumer.
    owner: bool,
}

impl Consumer {
    /// A consumer from string settings (Java key names), on the current tokio runtime.
    pub fn from_config(config: &Config) -> Result<Consumer> {
        Consumer::new(ConsumerConfig::from_config(config)?)
    }

    /// A consumer on the current tokio runtime; outside one, `Error::IllegalState`.
    pub fn new(config: ConsumerConfig) -> Result<Consumer> {
        // recv() is the only way records come out here: with a recovery thread's records kept
        // from it, they would never come out at all.
        if config.recovery_poll {
            return Err(Error::config(
                "parallel.rebalance.recovery.poll",
                "the async consumer delivers recovery records through recv(); \
                 `parallel.rebalance.recovery.poll` is for the blocking consumer's recovery_poll()",
            ));
        }
        let engine = Engine::current("lagless::aio::Consumer")?;
        Ok(Consumer {
            inner: Arc::new(Inner {
                consumer: crate::Consumer::on_engine(config, engine)?,
                listener: Mutex::new(None),
                steps: Mutex::new(None),
            }),
            owner: true,
        })
    }

    fn engine(&self) -> &crate::Consumer {
        &self.inner.consumer
    }

    fn borrowed(&self) -> Consumer {
        Consumer {
            inner: self.inner.clone(),
            owner: false,
        }
    }

    /// The consumer's typed settings.
    pub fn config(&self) -> &ConsumerConfig {
        self.engine().config()
    }

    /// Joins the group `group.id` for `topics`; the listener's callbacks run inside `recv()`.
    pub fn subscribe(
        &self,
        topics: &[&str],
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        self.engine().subscribe(topics, None)?;
        self.set_listener(listener);
        Ok(())
    }

    /// Subscribes to every topic whose whole name matches `pattern`.
    pub fn subscribe_pattern(
        &self,
        pattern: &str,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        self.engine().subscribe_pattern(pattern, None)?;
        self.set_listener(listener);
        Ok(())
    }

    /// Subscribes to the topics whose whole name matches `regex`, matched by the group
    /// coordinator ([`Consumer::subscribe_regex`](crate::Consumer::subscribe_regex)).
    pub fn subscribe_regex(
        &self,
        regex: &str,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        self.engine().subscribe_regex(regex, None)?;
        self.set_listener(listener);
        Ok(())
    }

    fn set_listener(&self, listener: Option<Box<dyn RebalanceListener>>) {
        if listener.is_some() {
            *lock(&self.inner.listener) = listener;
        }
    }

    /// The topics the consumer is subscribed to (for a pattern, those that matched so far).
    pub fn subscription(&self) -> Vec<String> {
        self.engine().subscription()
    }

    /// Leaves the group: commits (with auto-commit), revokes everything through the listener,
    /// sends LeaveGroup.
    pub async fn unsubscribe(&self) -> Result<()> {
        let c = self.engine();
        c.check_open()?;
        *lock(&self.inner.steps) = None;
        let mut d = AsyncListener(self.borrowed());
        let deadline = c.api_deadline(None);
        let e = c
            .leave_group(
                "the consumer unsubscribed from all topics",
                deadline,
                Some(&mut d),
            )
            .await;
        c.drop_group();
        e.map_or(Ok(()), Err)
    }

    /// The member's place in its group (generation, member id, assignor).
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        self.engine().group_metadata()
    }

    /// Asks for a rebalance; the next `recv()` starts it.
    pub fn enforce_rebalance(&self, reason: &str) -> Result<()> {
        self.engine().enforce_rebalance(reason)
    }

    /// Learner assignments with `learner.readiness=explicit`: this member has warmed up for
    /// `partitions` (from any task or thread); the group moves them here at the next `recv()`,
    /// which this wakes. Returns how many it took. See [`crate::Consumer::learner_ready`].
    pub fn learner_ready(&self, partitions: &[TopicPartition]) -> Result<usize> {
        self.engine().learner_ready(partitions)
    }

    /// Scale-down without a stop: keep calling `recv()` until the assignment is empty, then
    /// `close()`. See [`crate::Consumer::prepare_to_leave`].
    pub fn prepare_to_leave(&self) -> Result<bool> {
        self.engine().prepare_to_leave()
    }

    /// Manual assignment, as [`crate::Consumer::assign`].
    pub fn assign(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.engine().assign(partitions)
    }

    /// The partitions currently assigned.
    pub fn assignment(&self) -> Vec<TopicPartition> {
        self.engine().assignment()
    }

    /// Sets the next offset `recv()` returns for `tp`.
    pub fn seek(&self, tp: &TopicPartition, offset: i64) -> Result<()> {
        self.engine().seek(tp, offset)
    }

    /// Moves each of `partitions` to its log start offset, looked up before the next fetch.
    pub fn seek_to_beginning(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.engine().seek_to_beginning(partitions)
    }

    /// Moves each of `partitions` to its log end, looked up before the next fetch.
    pub fn seek_to_end(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.engine().seek_to_end(partitions)
    }

    /// Stops handing out records of `partitions` (they stay assigned).
    pub fn pause(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.engine().pause(partitions)
    }

    /// Hands out records of `partitions` again.
    pub fn resume(&self, partitions: &[TopicPartition]) -> Result<()> {
        self.engine().resume(partitions)
    }

    /// The paused partitions.
    pub fn paused(&self) -> Vec<TopicPartition> {
        self.engine().paused()
    }

    /// What the consumer is doing now ([`crate::Consumer::metrics`]). Does not wait: the same
    /// short lock holds as [`Consumer::assignment`].
    pub fn metrics(&self) -> crate::metrics::ConsumerMetrics {
        self.engine().metrics()
    }

    /// The OpenTelemetry meter provider of the consumer's instruments
    /// ([`crate::Consumer::set_meter_provider`]).
    #[cfg(feature = "opentelemetry")]
    pub fn set_meter_provider(
        &self,
        provider: &dyn opentelemetry::metrics::MeterProvider,
    ) -> Result<()> {
        self.engine().set_meter_provider(provider)
    }

    /// The statistics callback ([`crate::Consumer::set_statistics_callback`]): every
    /// `statistics.interval.ms` it gets the snapshot from inside `recv()` (and `recv_batch()`,
    /// the stream), on the application's task, before records are taken; a `recv()` waiting
    /// for records wakes for it. It is a plain function run on an async task: it must not block.
    /// An error it returns comes out of that `recv()`.
    pub fn set_statistics_callback(
        &self,
        callback: Option<crate::consumer::statistics::StatisticsCallback>,
    ) {
        self.engine().set_statistics_callback(callback)
    }

    /// The error callback ([`crate::Consumer::set_error_callback`]): each whole-cluster
    /// condition from inside `recv()` (and `recv_batch()`, the stream), on the application's
    /// task, before records are taken; a `recv()` waiting for records runs it within about
    /// 100 ms (its wait wakes that often). It must not block. An error it returns comes out of
    /// that `recv()`.
    pub fn set_error_callback(&self, callback: Option<crate::ErrorCallback>) {
        self.engine().set_error_callback(callback)
    }

    /// KIP-333: whether `tp` has a recovery stream still draining a backlog.
    pub fn recovery_active(&self, tp: &TopicPartition) -> Result<bool> {
        self.engine().recovery_active(tp)
    }

    /// The offset of the next record `recv()` returns for `tp`, waiting (within
    /// `default.api.timeout.ms`) for its lookup (committed offset or reset policy) if it has
    /// none yet.
    pub async fn position(&self, tp: &TopicPartition) -> Result<i64> {
        let c = self.engine();
        let deadline = c.api_deadline(None);
        loop {
            let ready = c.shared.data_ready.notified();
            let mut ready = std::pin::pin!(ready);
            ready.as_mut().enable();
            // A zero timeout only looks: it never waits on the blocking condition variable.
            match c.position(tp, Some(Duration::ZERO)) {
                Err(Error::Timeout(_)) => {}
                r => return r,
            }
            deadline.check(&format!("position of {tp}"))?;
            let _ = tokio::time::timeout(deadline.remaining(), ready).await;
        }
    }

    /// Makes a pending (or the next) `recv()` return `Error::Wakeup`.
    pub fn wakeup(&self) {
        self.engine().wakeup()
    }

    /// The offsets `commit(None)` sends: the position after the last record handed out.
    pub fn consumed_offsets(&self) -> Vec<(TopicPartition, OffsetAndMetadata)> {
        self.engine().consumed_offsets()
    }

    /// One record, waiting until there is one. Cancellation safe (see the module docs).
    pub async fn recv(&self) -> Result<ConsumerRecord> {
        let mut records = self.recv_batch(1).await?;
        Ok(records
            .pop()
            .expect("recv_batch returns at least one record"))
    }

    /// Up to `max` records (and at most `max.poll.records`), waiting until there is at least
    /// one. Errors of single partitions come out here, one per call, as from `poll()`.
    /// Cancellation safe (see the module docs).
    pub async fn recv_batch(&self, max: usize) -> Result<Vec<ConsumerRecord>> {
        if IN_STEPS.with(|s| s.get()) {
            return Err(Error::IllegalState(
                "recv() was called from inside a rebalance listener callback".into(),
            ));
        }
        let c = self.engine();
        let mut timing = crate::consumer::PollTiming::start(&c.poll_times);
        let started = std::time::Instant::now();
        c.instruments.poll_started(Operation::Poll, started);
        let result = self.recv_records(max).await;
        c.observe_poll(Operation::Poll, started, &result);
        let records = result?;
        timing.returns(&records);
        Ok(records)
    }

    async fn recv_records(&self, max: usize) -> Result<Vec<ConsumerRecord>> {
        let c = self.engine();
        let max = max.clamp(1, c.config().max_poll_records.max(1));
        let limits = BufferLimits::of(c.config());
        let take = || -> Result<Option<Vec<ConsumerRecord>>> {
            let Some(taken) = take_ready(&mut c.shared.lock(), max, limits, Streams::Both)? else {
                return Ok(None);
            };
            if taken.refill {
                // The buffer has room again: let the fetch task top it up.
                c.shared.changed.notify_one();
            }
            Ok(Some(taken.records))
        };
        // Group steps that found nothing to do a moment ago stand for records already waiting
        // (`IDLE_STEPS_STAND_FOR`); before any wait the steps run.
        let mut steps_stand = c.idle_steps.stand_now();
        loop {
            c.check_open()?;
            c.run_commit_callbacks();
            c.emit_raised()?;
            let statistics_due = c.emit_statistics()?;
            if !steps_stand {
                self.group_steps().await?;
            }
            // Records buffered already: no waiter to register (the common case of a busy
            // stream).
            if let Some(records) = take()? {
                return Ok(records);
            }
            if std::mem::take(&mut steps_stand) {
                continue;
            }
            // Enabled before looking again, so records that arrive after the look wake this
            // task.
            let ready = c.shared.data_ready.notified();
            let mut ready = std::pin::pin!(ready);
            ready.as_mut().enable();
            if let Some(records) = take()? {
                return Ok(records);
            }
            // Wake at least every 100 ms to run the group steps again (a join may have
            // finished, a heartbeat may have found the generation gone).
            // A statistics emission due sooner wakes it for that.
            let wake = statistics_due.map_or(Duration::from_millis(100), |at| {
                at.saturating_duration_since(Instant::now())
                    .min(Duration::from_millis(100))
            });
            let _ = tokio::time::timeout(wake, ready).await;
        }
    }

    /// Up to `max` records within `timeout`: an empty batch when none came. Cancellation safe.
    pub async fn recv_batch_timeout(
        &self,
        max: usize,
        timeout: Duration,
    ) -> Result<Vec<ConsumerRecord>> {
        match tokio::time::timeout(timeout, self.recv_batch(max)).await {
            Ok(r) => r,
            Err(_) => Ok(Vec::new()),
        }
    }

    /// The records as a stream: one item per record or partition error; it ends when the
    /// consumer is closed. Dropping the stream loses no record.
    pub fn stream(&self) -> RecordStream<'_> {
        RecordStream {
            consumer: self,
            next: None,
            scratch: Vec::with_capacity(1),
            consumed: ConsumedRun::new(),
            taken: (0, 0),
        }
    }

    /// Drives the group step in progress (or a new one) to its end. The step lives in the
    /// consumer, not in this future: a `recv()` dropped mid-step leaves it for the next.
    async fn group_steps(&self) -> Result<()> {
        poll_fn(|cx| self.poll_group_steps(cx)).await
    }

    fn poll_group_steps(&self, cx: &mut Context<'_>) -> Poll<Result<()>> {
        if lock(&self.inner.consumer.group).is_none() {
            return Poll::Ready(Ok(()));
        }
        let mut slot = lock(&self.inner.steps);
        let step = slot.get_or_insert_with(|| {
            let front = self.borrowed();
            Box::pin(async move {
                let mut listener = AsyncListener(front);
                let engine = listener.0.inner.clone();
                engine.consumer.group_steps(&mut listener).await
            })
        });
        IN_STEPS.with(|s| s.set(true));
        let r = step.as_mut().poll(cx);
        IN_STEPS.with(|s| s.set(false));
        if r.is_ready() {
            *slot = None;
        }
        r
    }

    /// What `recv()` would hand out without waiting, for the stream: the group steps run once
    /// and a buffered record taken, with no future of its own (a busy stream pays no
    /// allocation per record for it). `None` when that would need to wait: the stream then
    /// awaits a `recv()`, which resumes a group step left pending here.
    fn recv_now(
        &self,
        cx: &mut Context<'_>,
        scratch: &mut Vec<ConsumerRecord>,
    ) -> Option<Result<ConsumerRecord>> {
        if IN_STEPS.with(|s| s.get()) {
            return None; // recv() reports it
        }
        let c = self.engine();
        if let Err(e) = c.check_open() {
            return Some(Err(e));
        }
        c.run_commit_callbacks();
        if let Err(e) = c.emit_raised().and_then(|()| c.emit_statistics().map(drop)) {
            return Some(Err(e));
        }
        // Group steps that found nothing to do a moment ago stand for a record already waiting
        // (`IDLE_STEPS_STAND_FOR`); when none is, recv() takes the steps before it waits.
        if !c.idle_steps.stand_now() {
            match self.poll_group_steps(cx) {
                Poll::Pending => return None,
                Poll::Ready(Err(e)) => return Some(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
        }
        match take_one_ready(&c.shared, BufferLimits::of(c.config()), scratch) {
            Err(e) => Some(Err(e)),
            Ok(_) => scratch.pop().map(Ok),
        }
    }

    /// Commits `offsets` (or the consumed positions) and waits for the answer; a failed
    /// partition fails the call with its error.
    pub async fn commit(
        &self,
        offsets: Option<&[(TopicPartition, OffsetAndMetadata)]>,
    ) -> Result<()> {
        for (_, _, r) in self.commit_detailed(offsets).await? {
            r?;
        }
        Ok(())
    }

    /// Commits and returns each partition's result.
    pub async fn commit_detailed(
        &self,
        offsets: Option<&[(TopicPartition, OffsetAndMetadata)]>,
    ) -> Result<CommitResults> {
        let c = self.engine();
        c.check_open()?;
        let offsets = c.offsets_to_commit(offsets)?;
        c.commit_now(offsets, c.api_deadline(None)).await
    }

    /// The group's committed offsets for `partitions`.
    pub async fn committed(
        &self,
        partitions: &[TopicPartition],
    ) -> Result<Vec<(TopicPartition, Option<OffsetAndMetadata>)>> {
        let c = self.engine();
        c.check_open()?;
        let group = c
            .config()
            .group_id
            .clone()
            .ok_or_else(|| Error::IllegalState("committed() needs group.id".into()))?;
        let mut map =
            offsets::fetch_committed(&c.shared.cluster, &group, partitions, c.api_deadline(None))
                .await?;
        Ok(partitions
            .iter()
            .map(|tp| (tp.clone(), map.remove(tp).flatten()))
            .collect())
    }

    /// Leaves the group (committing first with auto-commit, revoking through the listener on
    /// this task) and stops, within `default.api.timeout.ms`. Later calls give `Error::Closed`.
    pub async fn close(&self) -> Result<()> {
        let c = self.engine();
        if c.check_open().is_err() {
            return Ok(());
        }
        *lock(&self.inner.steps) = None;
        let mut d = AsyncListener(self.borrowed());
        let e = c
            .leave_group(
                "the consumer is being closed",
                c.api_deadline(None),
                Some(&mut d),
            )
            .await;
        c.run_commit_callbacks();
        c.mark_closed();
        if let Some(task) = c.take_fetch_task() {
            // Its last act ends the consumer's fetch sessions on the brokers (bounded there).
            let _ = tokio::time::timeout(c.api_deadline(None).remaining(), task).await;
        }
        e.map_or(Ok(()), Err)
    }
}

impl Drop for Consumer {
    /// A consumer dropped without `close()` still commits (with auto-commit) and leaves its
    /// group, in a task on its runtime (never blocking the dropping task); listener callbacks
    /// do not run from a destructor.
    fn drop(&mut self) {
        if !self.owner {
            return;
        }
        // A step kept for the next recv() holds the consumer: there is no next recv().
        *lock(&self.inner.steps) = None;
        if self.inner.consumer.check_open().is_err() {
            return;
        }
        let inner = self.inner.clone();
        let leave = async move {
            let c = &inner.consumer;
            let deadline = Deadline::after(Duration::from_secs(5));
            c.leave_group("the consumer is being closed", deadline, None)
                .await;
            c.mark_closed();
        };
        match self.inner.consumer.runtime() {
            Ok(handle) => {
                handle.spawn(leave);
            }
            Err(_) => self.inner.consumer.mark_closed(),
        }
    }
}

/// Runs the async listener's callbacks for the group steps.
struct AsyncListener(Consumer);

/// Puts the listener back after a callback, also when its future is dropped or panics.
struct ListenerBack<'a> {
    front: &'a Consumer,
    listener: Option<Box<dyn RebalanceListener>>,
}

impl Drop for ListenerBack<'_> {
    fn drop(&mut self) {
        let mut slot = lock(&self.front.inner.listener);
        if slot.is_none() {
            *slot = self.listener.take();
        }
    }
}

impl Dispatch for AsyncListener {
    fn call<'a>(
        &'a mut self,
        _engine: &'a crate::Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>> {
        let front = &self.0;
        Box::pin(async move {
            let taken = lock(&front.inner.listener).take();
            let mut back = ListenerBack {
                front,
                listener: Some(taken?),
            };
            let l = back.listener.as_mut().expect("just set");
            let r = match callback {
                Callback::Revoked => l.on_partitions_revoked(front, partitions).await,
                Callback::Assigned => l.on_partitions_assigned(front, partitions).await,
                Callback::Learning => l.on_partitions_learning(front, partitions).await,
                Callback::Lost => l.on_partitions_lost(front, partitions).await,
            };
            drop(back);
            match r {
                Ok(()) => None,
                Err(Error::Callback(m)) => Some(Error::Callback(m)),
                Err(e) => Some(Error::Callback(e.to_string())),
            }
        })
    }
}

/// The records of a [`Consumer`] as a [`futures_core::Stream`].
pub struct RecordStream<'a> {
    consumer: &'a Consumer,
    next: Option<BoxFuture<'a, Result<ConsumerRecord>>>,
    /// The one-record buffer `recv_now` takes into, kept so that a busy stream allocates
    /// nothing per record; empty between calls.
    scratch: Vec<ConsumerRecord>,
    /// The OpenTelemetry count of the records `recv_now` took (those of `recv()` count as
    /// its polls do), measured per run of a partition.
    consumed: ConsumedRun,
    /// Records (and their key + value bytes) `recv_now` took and the consumed rates have not
    /// counted yet: they are counted in runs (see `count_taken`), not with a lock per record.
    taken: (usize, u64),
}

impl RecordStream<'_> {
    /// The records taken one at a time count toward `records-consumed-rate` and
    /// `bytes-consumed-rate` in runs: when the stream is about to wait, every
    /// [`TAKEN_RUN`] records, and when it is dropped.
    fn count_taken(&mut self) {
        let (records, bytes) = std::mem::take(&mut self.taken);
        if records > 0 {
            let c = self.consumer.engine();
            c.poll_times
                .lock()
                .unpoisoned()
                .consumed(Instant::now(), records, bytes);
        }
        self.consumed.flush(&self.consumer.engine().instruments);
    }
}

/// The most records a stream takes before they count toward the consumed rates.
const TAKEN_RUN: usize = 1024;

impl Drop for RecordStream<'_> {
    fn drop(&mut self) {
        self.count_taken();
    }
}

impl futures_core::Stream for RecordStream<'_> {
    type Item = Result<ConsumerRecord>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let consumer = self.consumer;
        if self.next.is_none() {
            if let Some(r) = consumer.recv_now(cx, &mut self.scratch) {
                if let Ok(record) = &r {
                    let instruments = &consumer.engine().instruments;
                    self.consumed
                        .push(instruments, &record.topic, record.partition);
                    self.taken.0 += 1;
                    self.taken.1 +=
                        crate::fetch::record::key_value_bytes(std::slice::from_ref(record));
                    if self.taken.0 >= TAKEN_RUN {
                        self.count_taken();
                    }
                }
                return Poll::Ready(match r {
                    Err(Error::Closed) => None,
                    r => Some(r),
                });
            }
            // About to wait: what was taken counts now, not at the next record.
            self.count_taken();
        }
        let next = self.next.get_or_insert_with(|| Box::pin(consumer.recv()));
        match next.as_mut().poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                self.next = None;
                match r {
                    Err(Error::Closed) => Poll::Ready(None),
                    r => Poll::Ready(Some(r)),
                }
            }
        }
    }
}

/// A Kafka producer for tokio applications, on the application's runtime (created inside it):
/// its sender task is spawned there. [`Producer::send`] awaits only what the blocking `send`
/// would block for (the metadata of a topic not seen before, room in `buffer.memory`) and
/// returns the record's [`Delivery`], a future of its delivery report: `producer.send(r).await?`
/// queues, `.await` on the delivery waits for the broker. Cloning is cheap; the last clone
/// dropped without `close()` flushes (bounded by five seconds) in a task of its own.
#[derive(Clone)]
pub struct Producer {
    inner: Arc<crate::Producer>,
}

/// The delivery report of one record: where it was written, or why it was not.
pub struct Delivery(tokio::sync::oneshot::Receiver<Result<RecordMetadata>>);

impl Future for Delivery {
    type Output = Result<RecordMetadata>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0)
            .poll(cx)
            .map(|r| r.unwrap_or(Err(Error::Closed)))
    }
}

impl Producer {
    /// A producer from string settings (Java key names), on the current tokio runtime.
    pub fn from_config(config: &Config) -> Result<Producer> {
        Producer::new(ProducerConfig::from_config(config)?)
    }

    /// A producer on the current tokio runtime; outside one, `Error::IllegalState`.
    pub fn new(config: ProducerConfig) -> Result<Producer> {
        let engine = Engine::current("lagless::aio::Producer")?;
        Ok(Producer {
            inner: Arc::new(crate::Producer::on_runtime(
                config,
                engine.handle().clone(),
                None,
            )?),
        })
    }

    /// Queues `record` and returns its delivery report's future. Records of one partition are
    /// written in the order their `send` calls completed.
    pub async fn send(&self, record: ProducerRecord) -> Result<Delivery> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.inner
            .send_async(record, move |r| {
                let _ = tx.send(r);
            })
            .await?;
        Ok(Delivery(rx))
    }

    /// Sends everything buffered now and waits until every record sent so far is acknowledged
    /// or has failed.
    pub async fn flush(&self, timeout: Duration) -> Result<()> {
        self.inner.flush_async(timeout).await
    }

    /// Flushes (up to `timeout`) and stops the producer; later sends fail with `Error::Closed`.
    pub async fn close(&self, timeout: Duration) -> Result<()> {
        self.inner.close_async(timeout).await
    }

    /// The partition ids of `topic`, fetching its metadata if needed.
    pub async fn partitions_for(&self, topic: &str) -> Result<Vec<i32>> {
        self.inner.partitions_for_async(topic).await
    }

    /// Gets the producer id of `transactional.id` from its transaction coordinator, fencing
    /// every older producer with that id, as [`crate::Producer::init_transactions`]. Once,
    /// before the first transaction. The transactional calls await on this runtime and never
    /// block a worker thread; one dropped before its end (a lost `select!`, a timeout) is cut
    /// short as by its `timeout`, and the same call made again finishes it.
    pub async fn init_transactions(&self, timeout: Duration) -> Result<()> {
        self.inner.init_transactions_async(timeout).await
    }

    /// Starts a transaction: records sent from now until `commit_transaction` or
    /// `abort_transaction` belong to it. Local: no request is sent, so it never waits (async
    /// only so that every transactional call is awaited alike).
    pub async fn begin_transaction(&self) -> Result<()> {
        self.inner.begin_transaction()
    }

    /// Sends the consumer's offsets to the open transaction, committed for its group if and
    /// only if the transaction commits, as [`crate::Producer::send_offsets_to_transaction`].
    /// `group` is the async consumer's [`Consumer::group_metadata`]: a member whose generation
    /// is gone has its offsets refused (KIP-447), and the transaction must be aborted.
    pub async fn send_offsets_to_transaction(
        &self,
        offsets: &HashMap<TopicPartition, OffsetAndMetadata>,
        group: &GroupMetadata,
        timeout: Duration,
    ) -> Result<()> {
        self.inner
            .send_offsets_to_transaction_async(offsets, group, timeout)
            .await
    }

    /// Flushes the open transaction's records and commits it (EndTxn), as
    /// [`crate::Producer::commit_transaction`]: a failed record of it makes this fail with
    /// [`Error::TransactionAbortable`] (abort then); a fatal error (fenced by a newer producer
    /// with the same `transactional.id`) leaves only `close()`.
    pub async fn commit_transaction(&self, timeout: Duration) -> Result<()> {
        self.inner.commit_transaction_async(timeout).await
    }

    /// Aborts the open transaction, as [`crate::Producer::abort_transaction`]: records not sent
    /// yet fail with [`Error::TransactionAbortable`], and neither its records nor its offsets
    /// are ever read_committed.
    pub async fn abort_transaction(&self, timeout: Duration) -> Result<()> {
        self.inner.abort_transaction_async(timeout).await
    }
}

impl Drop for Producer {
    /// The last handle dropped without `close()` flushes and stops in a task on the
    /// application's runtime (never blocking the dropping task), bounded in time, so records
    /// sent just before are still delivered.
    fn drop(&mut self) {
        if Arc::strong_count(&self.inner) != 1 {
            return;
        }
        let p = self.inner.clone();
        if let Ok(handle) = tokio::runtime::Handle::try_current() {
            handle.spawn(async move {
                if let Err(e) = p.close_async(Duration::from_secs(5)).await {
                    tracing::warn!(error = %e, "async producer dropped with records still unacknowledged");
                }
            });
        }
    }
}
