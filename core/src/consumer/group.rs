//! The consumer as a group member: subscribe, the rebalance listener, and the group steps
//! `poll()` carries out on the caller's thread (report lost partitions, revoke, start a join,
//! apply a finished one, learner warm-up). Which step comes next is decided in
//! [`crate::group::step`]; the join and the heartbeat run in `group::coordinator`; commits,
//! auto-commit included, are in `consumer/commits.rs`.
//!
//! Listener callbacks run only here, on the thread that called `poll()`, `close()` or
//! `unsubscribe()`, never on a library thread; no lock is held while they run, so a callback
//! may call back into the consumer (commit inside `on_partitions_revoked`).
//!
//! The steps are async functions: the blocking API waits for them on the caller's thread
//! (`engine.rs`), the async front ([`crate::aio`]) awaits them inside `recv()`. Which listener
//! they call is a [`Dispatch`]: the blocking [`RebalanceListener`] or an async one.
use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use regex::Regex;

use crate::backoff::{Deadline, Retry};
use crate::cluster::Metadata;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::fetch::{PositionLookup, Shared};
use crate::group::assignor::assignor_by_name;
use crate::group::coordinator::GroupDriver;
use crate::group::member::Membership;
use crate::group::metadata_snapshot::AssignmentBasis;
use crate::group::rebalance::changes_after_join;
use crate::group::step::{
    join_applies_in_background, matching_topics, next_step, taken_in_background, GroupStep,
    JoinInput, JoinOutcome, JoinProgress, LocalGroup,
};
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

/// Called when the consumer's assignment changes. Every method runs on the thread that called
/// `poll()`, `close()` or `unsubscribe()`. An error returned by a callback does not stop the
/// assignment change; it comes out of that `poll()` afterwards as [`Error::Callback`].
pub trait RebalanceListener: Send {
    /// Partitions this member gives up. Commit their offsets here if you commit by hand.
    fn on_partitions_revoked(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Partitions newly given to this member (called once per rebalance, possibly empty).
    fn on_partitions_assigned(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Learner assignments (`partition.assignment.strategy=learner-sticky`): partitions this
    /// member will own once it is ready, while their current owners keep consuming them. Warm
    /// up here (load state, caches, connections); returning `Ok` says this member is ready, and
    /// it rejoins so the group moves them to it. An error leaves it not ready (the owners keep
    /// the partitions) and comes out of `poll()`; a later `poll()` calls it again for them after
    /// a backoff (`retry.backoff.ms` growing to `retry.backoff.max.ms`). It runs inside `poll()`:
    /// keep it within `max.poll.interval.ms`. Without learner assignments it is never called.
    fn on_partitions_learning(
        &mut self,
        _consumer: &Consumer,
        _partitions: &[TopicPartition],
    ) -> Result<()> {
        Ok(())
    }
    /// Partitions that may already belong to another member (the generation was lost, e.g.
    /// after `max.poll.interval.ms`): committing them is no longer possible.
    fn on_partitions_lost(
        &mut self,
        consumer: &Consumer,
        partitions: &[TopicPartition],
    ) -> Result<()> {
        self.on_partitions_revoked(consumer, partitions)
    }
}

/// A rebalance listener callback, named for [`Dispatch`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Callback {
    Revoked,
    Assigned,
    Learning,
    Lost,
}

/// A boxed future that may move between threads: what the async listener's callbacks return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Runs the listener's callbacks for the group steps: the blocking listener, or the async
/// front's. Returns the callback's error, if any.
pub(crate) trait Dispatch: Send {
    fn call<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>>;
}

/// The blocking API's listener, kept in the group state: its callbacks run inline.
pub(crate) struct BlockingListener;

impl Dispatch for BlockingListener {
    fn call<'a>(
        &'a mut self,
        consumer: &'a Consumer,
        callback: Callback,
        partitions: &'a [TopicPartition],
    ) -> BoxFuture<'a, Option<Error>> {
        let r = consumer.with_listener(|l, c| match callback {
            Callback::Revoked => l.on_partitions_revoked(c, partitions),
            Callback::Assigned => l.on_partitions_assigned(c, partitions),
            Callback::Learning => l.on_partitions_learning(c, partitions),
            Callback::Lost => l.on_partitions_lost(c, partitions),
        });
        Box::pin(std::future::ready(r))
    }
}

pub(crate) enum Topics {
    Names(BTreeSet<String>),
    Pattern(Regex),
}

/// The group member's state on the caller's side.
pub(crate) struct GroupLocal {
    pub driver: Arc<GroupDriver>,
    pub topics: Topics,
    /// The topics of the current subscription (for a pattern, those that matched).
    pub subscribed: BTreeSet<String>,
    pub listener: Option<Box<dyn RebalanceListener>>,
    pub join: JoinSlot,
    pub join_retry_at: Instant,
    pub owned: BTreeSet<TopicPartition>,
    pub next_auto_commit: Instant,
    pub last_committed: HashMap<TopicPartition, OffsetAndMetadata>,
    /// Learner assignments: the partitions this member learns, and those of them it is ready
    /// to own (its `on_partitions_learning` returned `Ok`).
    pub learning: BTreeSet<TopicPartition>,
    pub ready: BTreeSet<TopicPartition>,
    /// Learned partitions whose callback failed, called again at `learning_retry_at`.
    pub unready: BTreeSet<TopicPartition>,
    pub learning_retry: Retry,
    pub learning_retry_at: Instant,
    /// What the current assignment was computed from, to rejoin when the subscribed topics
    /// change under it (partitions added, a topic created or deleted).
    pub assignment_basis: AssignmentBasis,
    /// Group steps under way on the application's side (`poll()`, `recv()`, `close()`): while
    /// any is, the background task leaves the group alone (a step may be between its decision
    /// and its end, e.g. an assignment applied but not yet in `owned`).
    pub caller_steps: usize,
    /// Something for the background task may be left when the application's steps end: it was
    /// woken meanwhile and left the group alone, or the steps did more than find nothing to do.
    /// Only then does their end wake it, so a `poll()` that finds nothing to do wakes no other
    /// thread (a `poll()` per record would otherwise pay a wake-up per record).
    pub background_due: bool,
    /// The background task applied a join that changed nothing: the next `poll()` still runs
    /// `on_partitions_assigned` (with no partitions) for it.
    pub assigned_owed: bool,
    /// Wakes the background task (the heartbeat heard of a rebalance, a join finished).
    pub background: Arc<tokio::sync::Notify>,
}

/// The join `poll()` started: its task, and its answer once it has one. The answer comes
/// through a channel, so taking it in never blocks on the runtime (an async front can take the
/// same steps).
pub(crate) enum JoinSlot {
    Idle,
    Running {
        task: tokio::task::JoinHandle<()>,
        answer: tokio::sync::oneshot::Receiver<Result<JoinOutcome>>,
    },
    Finished(Result<JoinOutcome>),
}

impl JoinSlot {
    /// Takes in the answer of a finished join task. A task that ended without one (aborted)
    /// leaves nothing to take in.
    fn collect(&mut self) {
        if let JoinSlot::Running { answer, .. } = self {
            match answer.try_recv() {
                Ok(r) => *self = JoinSlot::Finished(r),
                Err(tokio::sync::oneshot::error::TryRecvError::Empty) => {}
                Err(tokio::sync::oneshot::error::TryRecvError::Closed) => *self = JoinSlot::Idle,
            }
        }
    }

    fn progress(&self) -> JoinProgress<'_> {
        match self {
            JoinSlot::Idle => JoinProgress::Idle,
            JoinSlot::Running { .. } => JoinProgress::Running,
            JoinSlot::Finished(r) => JoinProgress::Finished(r),
        }
    }

    /// The finished join's answer, taken in by the step that applies (or drops) it.
    fn take_finished(&mut self) -> Option<Result<JoinOutcome>> {
        match std::mem::replace(self, JoinSlot::Idle) {
            JoinSlot::Finished(r) => Some(r),
            other => {
                *self = other;
                None
            }
        }
    }

    fn abort(self) {
        if let JoinSlot::Running { task, .. } = self {
            task.abort();
        }
    }
}

impl GroupLocal {
    /// The topics and assignment follow metadata: a pattern subscription takes the topics that
    /// match now, and an assignment that no longer covers what the subscribed topics have asks
    /// for a rebalance (the Java client's metadata snapshot comparison).
    fn follow_metadata(&mut self, m: &mut Membership, meta: &Metadata, exclude_internal: bool) {
        if let Topics::Pattern(re) = &self.topics {
            if let Some(matched) = matching_topics(re, meta, exclude_internal) {
                if matched != self.subscribed {
                    self.subscribed = matched;
                    m.request_rejoin("the topics matching the subscribed pattern changed");
                }
            }
        }
        if let Some(reason) = self.assignment_basis.check(meta) {
            m.request_rejoin(reason);
        }
    }

    /// The next group step: takes in a finished join and follows metadata, then asks
    /// [`next_step`]. Never blocks.
    fn next_step(
        &mut self,
        m: &mut Membership,
        meta: &Metadata,
        exclude_internal: bool,
        now: Instant,
    ) -> GroupStep {
        self.join.collect();
        if !m.partitions_lost() {
            self.follow_metadata(m, meta, exclude_internal);
        }
        let view = LocalGroup {
            protocol: self.driver.rebalance_protocol(),
            owned: &self.owned,
            subscribed: &self.subscribed,
            pattern: matches!(self.topics, Topics::Pattern(_)),
            ready: &self.ready,
            join: self.join.progress(),
            join_retry_at: self.join_retry_at,
        };
        next_step(m, &view, now)
    }
}

/// A step whose work runs outside the group lock, on the caller's thread: it calls the
/// listener (and may commit).
enum CallerStep {
    Lost(BTreeSet<TopicPartition>),
    Revoke(BTreeSet<TopicPartition>),
    ApplyJoin(Box<JoinOutcome>),
    /// A step done under the lock; look again.
    Again,
    /// Nothing more to do in this `poll()`.
    Done,
}

/// At most this many steps per `poll()` (lost, a finished join, revocations, a new join): each
/// step brings the member closer to waiting, this only bounds a `poll()` in any case.
const MAX_STEPS_PER_POLL: usize = 8;

/// How long group steps that found nothing to do stand for a `poll()` or `recv()` that finds
/// records waiting, while the member's state is untouched since. A caller taking one record at a
/// time (the C ABI's `lagless_consumer_poll`, Python's `poll()`, the async stream) would
/// otherwise pay for the steps (locks, clock reads, a blocking wait on the runtime) on every
/// record: measured, 3M records of 100 B through `lagless_consumer_poll` took 3.0-3.4 s of CPU
/// subscribed against 1.4-1.7 s assigned (7.2-8.5 s while each call's steps also woke the
/// background task, `GroupLocal::background_due`). The steps still run at least this often while
/// records flow, before every wait, and after anything touched the member's state (a
/// heartbeat's answer, a finished join, a commit), so a rebalance or a lost generation is
/// acted on as before; the Java client takes them once per `poll()` of up to 500 records.
pub(crate) const IDLE_STEPS_STAND_FOR: Duration = Duration::from_millis(1);

/// Whether group steps that found nothing to do at `idle` (the instant, and the member's
/// state's access count then) still stand at `now`, with the state's access count at
/// `accesses`: less than [`IDLE_STEPS_STAND_FOR`] ago and no access since.
pub(crate) fn idle_steps_stand(idle: Option<(Instant, u64)>, now: Instant, accesses: u64) -> bool {
    idle.is_some_and(|(at, seen)| {
        seen == accesses
            && now
                .checked_duration_since(at)
                .is_some_and(|d| d < IDLE_STEPS_STAND_FOR)
    })
}

/// The last group steps that found nothing to do, for callers that take records one at a time
/// ([`IDLE_STEPS_STAND_FOR`]).
#[derive(Default)]
pub(crate) struct IdleSteps {
    /// Counts every access to the member's state (`GroupDriver::membership`): any of them may
    /// have changed it.
    pub membership_accesses: Arc<AtomicU64>,
    idle: Mutex<Option<(Instant, u64)>>,
    /// Whether `idle` holds steps: read first, so a consumer without a group (or whose steps are
    /// under way) pays one atomic load per call, no lock and no clock read.
    recorded: AtomicBool,
}

impl IdleSteps {
    /// Whether the group steps may be left out at `now` ([`idle_steps_stand`]).
    pub fn stand(&self, now: Instant) -> bool {
        self.recorded.load(Ordering::Acquire) && self.stand_at(now)
    }

    /// [`IdleSteps::stand`] now, reading the clock only when steps are recorded.
    pub fn stand_now(&self) -> bool {
        self.recorded.load(Ordering::Acquire) && self.stand_at(Instant::now())
    }

    fn stand_at(&self, now: Instant) -> bool {
        let idle = *self.idle.lock().unpoisoned();
        idle_steps_stand(idle, now, self.membership_accesses.load(Ordering::Acquire))
    }

    /// Steps begin: until they end having found nothing to do, none stand.
    fn clear(&self) {
        self.recorded.store(false, Ordering::Release);
        *self.idle.lock().unpoisoned() = None;
    }

    /// The steps that just ended, at `now`, found nothing to do.
    fn found_nothing(&self, now: Instant) {
        let accesses = self.membership_accesses.load(Ordering::Acquire);
        *self.idle.lock().unpoisoned() = Some((now, accesses));
        self.recorded.store(true, Ordering::Release);
    }
}

impl Consumer {
    /// Joins the consumer group `group.id` and reads the partitions the group assigns, of
    /// `topics`. Replaces any earlier subscription.
    pub fn subscribe(
        &self,
        topics: &[&str],
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        let mut names = BTreeSet::new();
        for t in topics {
            if t.is_empty() {
                return Err(Error::InvalidArgument("topic name is empty".into()));
            }
            names.insert(t.to_string());
        }
        if names.is_empty() {
            return Err(Error::InvalidArgument(
                "subscribe needs at least one topic; use unsubscribe() to stop".into(),
            ));
        }
        self.set_subscription(Topics::Names(names), listener)
    }

    /// Subscribes to every topic whose whole name matches `pattern` (a regular expression);
    /// topics created later that match are picked up when metadata is refreshed.
    pub fn subscribe_pattern(
        &self,
        pattern: &str,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        let re = Regex::new(&format!("^(?:{pattern})$"))
            .map_err(|e| Error::InvalidArgument(format!("bad topic pattern `{pattern}`: {e}")))?;
        self.set_subscription(Topics::Pattern(re), listener)
    }

    fn set_subscription(
        &self,
        topics: Topics,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        self.check_open()?;
        let mut g = self.group.lock().unpoisoned();
        if g.is_none() {
            if !self.shared.lock().partitions.is_empty() {
                return Err(Error::IllegalState(
                    "the consumer has a manual assignment; call assign(&[]) before subscribe()"
                        .into(),
                ));
            }
            let shared = self.shared.clone();
            let background = Arc::new(tokio::sync::Notify::new());
            let wake = background.clone();
            let driver = GroupDriver::new(
                self.shared.cluster.clone(),
                self.shared.config.clone(),
                self.group_protocol.clone(),
                Arc::new(move || {
                    shared.data_ready.notify_all();
                    wake.notify_one();
                }),
                self.idle_steps.membership_accesses.clone(),
            )?;
            self.give_leader_epochs(&driver);
            let runtime = self.runtime()?;
            runtime.spawn(driver.clone().heartbeat_loop());
            runtime.spawn(run_background_steps(
                Arc::downgrade(&self.group),
                self.shared.clone(),
                runtime.clone(),
                background.clone(),
            ));
            *g = Some(GroupLocal {
                driver,
                topics: Topics::Names(BTreeSet::new()),
                subscribed: BTreeSet::new(),
                listener: None,
                join: JoinSlot::Idle,
                join_retry_at: Instant::now(),
                owned: BTreeSet::new(),
                next_auto_commit: Instant::now() + self.shared.config.auto_commit_interval,
                last_committed: HashMap::new(),
                learning: BTreeSet::new(),
                ready: BTreeSet::new(),
                unready: BTreeSet::new(),
                learning_retry: Retry::new(self.shared.backoff()),
                learning_retry_at: Instant::now(),
                assignment_basis: AssignmentBasis::None,
                caller_steps: 0,
                background_due: false,
                assigned_owed: false,
                background,
            });
        }
        let local = g.as_mut().expect("created above");
        match &topics {
            Topics::Names(n) => {
                self.shared.cluster.set_interest(n.clone(), false);
                local.subscribed = n.clone();
            }
            Topics::Pattern(_) => {
                self.shared.cluster.set_interest(BTreeSet::new(), true);
                local.subscribed = BTreeSet::new();
            }
        }
        local.topics = topics;
        if listener.is_some() {
            local.listener = listener;
        }
        local
            .driver
            .membership()
            .request_rejoin("the subscription changed");
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The topics the consumer is subscribed to (for a pattern, those that matched so far).
    pub fn subscription(&self) -> Vec<String> {
        let g = self.group.lock().unpoisoned();
        g.as_ref()
            .map(|l| l.subscribed.iter().cloned().collect())
            .unwrap_or_default()
    }

    /// Leaves the group: commits (with auto-commit), revokes everything through the listener,
    /// sends LeaveGroup.
    pub fn unsubscribe(&self) -> Result<()> {
        self.check_open()?;
        let callback_error = self.leave_group_now(
            "the consumer unsubscribed from all topics",
            self.api_deadline(None),
            true,
        );
        self.drop_group();
        callback_error.map_or(Ok(()), Err)
    }

    /// After leaving: forgets the group and its topics.
    pub(crate) fn drop_group(&self) {
        let mut g = self.group.lock().unpoisoned();
        if let Some(local) = g.take() {
            local.driver.close();
            local.join.abort();
            local.background.notify_one();
        }
        self.shared.cluster.set_interest(BTreeSet::new(), false);
    }

    /// The member's group metadata: (group id, generation id, member id, group instance id).
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        let g = self.group.lock().unpoisoned();
        let local = g.as_ref()?;
        let m = local.driver.membership();
        let generation = m.generation();
        Some(GroupMetadata {
            group_id: local.driver.group_id.clone(),
            generation_id: generation.generation_id,
            member_id: generation.member_id.clone(),
            group_instance_id: m.group_instance_id().map(str::to_string),
            protocol: generation.protocol.clone(),
        })
    }

    /// Asks for a rebalance; the next `poll()` starts it.
    pub fn enforce_rebalance(&self, reason: &str) -> Result<()> {
        self.check_open()?;
        let g = self.group.lock().unpoisoned();
        let local = g.as_ref().ok_or_else(|| {
            Error::IllegalState("enforce_rebalance() needs a subscription".into())
        })?;
        local
            .driver
            .membership()
            .request_rejoin(format!("enforced: {reason}"));
        Ok(())
    }

    pub(super) fn driver(&self) -> Option<Arc<GroupDriver>> {
        self.group
            .lock()
            .unpoisoned()
            .as_ref()
            .map(|l| l.driver.clone())
    }

    /// Runs `f` with the listener taken out of the lock, so the callback may call back into the
    /// consumer. Returns the callback's error, if any.
    pub(super) fn with_listener(
        &self,
        f: impl FnOnce(&mut dyn RebalanceListener, &Consumer) -> Result<()>,
    ) -> Option<Error> {
        let listener = {
            let mut g = self.group.lock().unpoisoned();
            g.as_mut().and_then(|l| l.listener.take())
        };
        let mut listener = listener?;
        let r =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(listener.as_mut(), self)));
        {
            let mut g = self.group.lock().unpoisoned();
            if let Some(l) = g.as_mut() {
                if l.listener.is_none() {
                    l.listener = Some(listener);
                }
            }
        }
        match r {
            Ok(Ok(())) => None,
            Ok(Err(Error::Callback(m))) => Some(Error::Callback(m)),
            Ok(Err(e)) => Some(Error::Callback(e.to_string())),
            Err(_) => Some(Error::Callback("the rebalance listener panicked".into())),
        }
    }

    /// Revokes `partitions`: auto-commit, the listener, then stop fetching them.
    async fn revoke(
        &self,
        d: &mut dyn Dispatch,
        partitions: BTreeSet<TopicPartition>,
        deadline: Deadline,
        errors: &mut Option<Error>,
    ) {
        self.commit_before_revoke(&partitions, deadline).await;
        let list: Vec<TopicPartition> = partitions.iter().cloned().collect();
        if let Some(e) = d.call(self, Callback::Revoked, &list).await {
            errors.get_or_insert(e);
        }
        self.forget(&partitions);
    }

    async fn lose(
        &self,
        d: &mut dyn Dispatch,
        partitions: BTreeSet<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let list: Vec<TopicPartition> = partitions.iter().cloned().collect();
        if !list.is_empty() {
            if let Some(e) = d.call(self, Callback::Lost, &list).await {
                errors.get_or_insert(e);
            }
        }
        self.forget(&partitions);
    }

    /// After revoking or losing `partitions`: stop fetching them and forget they were owned.
    fn forget(&self, partitions: &BTreeSet<TopicPartition>) {
        self.shared.remove_partitions(partitions.iter());
        let mut g = self.group.lock().unpoisoned();
        if let Some(l) = g.as_mut() {
            for tp in partitions {
                l.owned.remove(tp);
                l.last_committed.remove(tp);
            }
        }
    }

    /// The group steps of `poll()`, on the caller's thread. Returns an error that `poll()`
    /// reports (a callback's error after the assignment change completed, or a fatal one).
    pub(crate) fn group_poll(&self) -> Result<()> {
        if self.driver().is_none() {
            return Ok(());
        }
        self.block_on(self.group_steps(&mut BlockingListener))?
    }

    /// The group steps of a `poll()` or `recv()`, calling the listener through `d`. The caller
    /// runs the finished async commits' callbacks first (`run_commit_callbacks`).
    pub(crate) async fn group_steps(&self, d: &mut dyn Dispatch) -> Result<()> {
        let Some(driver) = self.driver() else {
            return Ok(());
        };
        self.idle_steps.clear();
        driver.touch_poll();
        // (Finished async commits' callbacks: each caller runs them just before the steps.)
        if let Some(e) = driver.membership().fatal().cloned() {
            return Err(e);
        }
        let (_steps, assigned_owed) = CallerSteps::begin_taking_owed(&self.group);
        let mut found_nothing = !assigned_owed;
        // An error the member went on from (a failed heartbeat) comes out of one poll().
        let mut errors: Option<Error> = driver.membership().take_error();
        let deadline = Deadline::after(self.shared.config.common.default_api_timeout);
        if assigned_owed {
            if let Some(e) = d.call(self, Callback::Assigned, &[]).await {
                errors.get_or_insert(e);
            }
        }
        for _ in 0..MAX_STEPS_PER_POLL {
            let step = self.take_group_step(&driver)?;
            found_nothing &= matches!(step, CallerStep::Done);
            match step {
                CallerStep::Done => break,
                CallerStep::Again => {}
                CallerStep::Lost(parts) => self.lose(d, parts, &mut errors).await,
                CallerStep::Revoke(parts) => self.revoke(d, parts, deadline, &mut errors).await,
                CallerStep::ApplyJoin(outcome) => {
                    self.apply_join(d, *outcome, deadline, &mut errors).await
                }
            }
        }
        found_nothing &= !self.retry_learning(d, &mut errors).await;
        self.maybe_auto_commit(&driver);
        if found_nothing && errors.is_none() {
            self.idle_steps.found_nothing(Instant::now());
        }
        errors.map_or(Ok(()), Err)
    }

    /// Decides the next group step ([`crate::group::step::next_step`]) and does the part of it
    /// that needs no callback, under the group lock; what calls the listener is returned.
    fn take_group_step(&self, driver: &Arc<GroupDriver>) -> Result<CallerStep> {
        let mut g = self.group.lock().unpoisoned();
        let Some(local) = g.as_mut() else {
            return Ok(CallerStep::Done);
        };
        take_step_locked(local, driver, &self.shared, self.runtime()?, false)
    }

    async fn apply_join(
        &self,
        d: &mut dyn Dispatch,
        outcome: JoinOutcome,
        deadline: Deadline,
        errors: &mut Option<Error>,
    ) {
        let Some(driver) = self.driver() else { return };
        let owned = {
            let g = self.group.lock().unpoisoned();
            g.as_ref().map(|l| l.owned.clone()).unwrap_or_default()
        };
        let changes = changes_after_join(
            driver.rebalance_protocol(),
            outcome.protocol,
            &owned,
            &outcome.assigned,
        );
        if !changes.lose.is_empty() {
            // Kept through a join whose (eager) assignor may have handed them to another member
            // already: no commit may go out for them.
            tracing::warn!(partitions = ?changes.lose, "partitions kept through an eager rebalance are lost");
            self.lose(d, changes.lose, errors).await;
        }
        if !changes.revoke.is_empty() {
            // KIP-429: give these up now, then rejoin so the group can hand them on.
            self.revoke(d, changes.revoke, deadline, errors).await;
        }
        if changes.rejoin {
            driver
                .membership()
                .request_rejoin("need to revoke partitions and re-join");
        }
        let added = changes.add;
        self.shared
            .add_partitions(added.iter(), PositionLookup::Committed);
        {
            let mut g = self.group.lock().unpoisoned();
            if let Some(l) = g.as_mut() {
                l.owned.extend(added.iter().cloned());
                l.assignment_basis = AssignmentBasis::after_join(
                    outcome.assigned_from,
                    l.subscribed.clone(),
                    Instant::now(),
                );
            }
        }
        let list: Vec<TopicPartition> = added.into_iter().collect();
        if let Some(e) = d.call(self, Callback::Assigned, &list).await {
            errors.get_or_insert(e);
        }
        self.apply_learning(d, outcome.learning, errors).await;
    }

    /// Learner assignments: keeps the partitions this member learns, warms up for the new ones
    /// through the listener, and once ready rejoins so the group moves them here.
    async fn apply_learning(
        &self,
        d: &mut dyn Dispatch,
        learning: BTreeSet<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let new: Vec<TopicPartition> = {
            let mut g = self.group.lock().unpoisoned();
            let Some(l) = g.as_mut() else { return };
            l.ready.retain(|tp| learning.contains(tp));
            l.unready.retain(|tp| learning.contains(tp));
            let new = learning.difference(&l.learning).cloned().collect();
            l.learning = learning;
            new
        };
        if new.is_empty() {
            return;
        }
        tracing::info!(partitions = ?new, "learning partitions before their owners hand them over");
        // Part of warming up: the metadata (and so the leaders) of what this member will fetch.
        self.shared
            .cluster
            .add_interest(new.iter().map(|tp| &tp.topic));
        self.warm_up(d, new, errors).await;
    }

    /// Runs `on_partitions_learning` for `partitions`. Ready: rejoin so the group moves them
    /// here. Not ready (the callback failed): its error comes out of this `poll()`, and a later
    /// `poll()` calls it again after a backoff (KIP-580), so a transient failure does not leave
    /// the partitions with their old owners for good.
    async fn warm_up(
        &self,
        d: &mut dyn Dispatch,
        partitions: Vec<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let result = d.call(self, Callback::Learning, &partitions).await;
        let mut g = self.group.lock().unpoisoned();
        let Some(l) = g.as_mut() else { return };
        // A rebalance inside the callback may have changed what this member learns.
        let still: Vec<TopicPartition> = partitions
            .into_iter()
            .filter(|tp| l.learning.contains(tp))
            .collect();
        match result {
            None if self.shared.config.learner_explicit_readiness => {
                // learner.readiness=explicit: the callback started the warm-up; learner_ready()
                // (perhaps already called, from the callback itself) says when it is done.
                l.learning_retry.succeeded();
                for tp in &still {
                    l.unready.remove(tp);
                }
            }
            None => {
                l.learning_retry.succeeded();
                for tp in &still {
                    l.unready.remove(tp);
                }
                l.ready.extend(still);
                drop(g);
                if let Some(d) = self.driver() {
                    d.membership()
                        .request_rejoin("learned partitions are ready to be handed over");
                }
            }
            Some(e) => {
                l.unready.extend(still);
                l.learning_retry_at = Instant::now() + l.learning_retry.failed();
                errors.get_or_insert(e);
            }
        }
    }

    /// Learner assignments with `learner.readiness=explicit`: says that this member has warmed up
    /// for `partitions` and is ready to own them. May be called from any thread, during or
    /// after `on_partitions_learning`; the member then rejoins (at the next `poll()`, which this
    /// wakes) so the group moves them here. Partitions this member does not learn (any more: a
    /// rebalance may have given them elsewhere meanwhile) are left out; the call returns how
    /// many of `partitions` it took as ready.
    ///
    /// With `learner.readiness=callback` (the default) a partition is ready when its callback
    /// returns `Ok`, and this call only says so earlier.
    pub fn learner_ready(&self, partitions: &[TopicPartition]) -> Result<usize> {
        self.check_open()?;
        let (driver, taken) = {
            let mut g = self.group.lock().unpoisoned();
            let l = g.as_mut().ok_or_else(|| {
                Error::IllegalState("learner_ready() needs a subscription".into())
            })?;
            let mut taken = 0;
            for tp in partitions {
                if l.learning.contains(tp) {
                    l.unready.remove(tp);
                    if l.ready.insert(tp.clone()) {
                        taken += 1;
                    }
                } else {
                    tracing::debug!(partition = %tp, "learner_ready() for a partition this member does not learn; ignored");
                }
            }
            if taken == 0 {
                return Ok(0);
            }
            (l.driver.clone(), taken)
        };
        tracing::info!(group = %driver.group_id, partitions = taken, "learned partitions reported ready");
        driver
            .membership()
            .request_rejoin("learned partitions are ready to be handed over");
        // poll() may be waiting for records: let it take the join step now.
        self.shared.data_ready.notify_all();
        Ok(taken)
    }

    /// Scale-down without a stop (learner assignments): this member is about to leave. It stays
    /// in the group and keeps consuming; it rejoins at once saying it leaves, and a
    /// learner-sticky leader makes its partitions learned partitions of the members that stay.
    /// Each moves (cooperatively: revoked here, committed first as on any revocation) once its
    /// learner is ready. Keep polling until [`Consumer::assignment`] is empty (or a hand-over
    /// deadline of your own passes), then `close()`.
    ///
    /// Returns whether the group assigns with learner-sticky now: if not (a mixed group agreed
    /// on cooperative-sticky, or no generation yet), nobody learns ahead and the partitions stay
    /// until `close()`, which hands them over as any leave does.
    ///
    /// A static member (`group.instance.id`) that prepared to leave sends LeaveGroup on
    /// `close()`, as the Java client's close with `LEAVE_GROUP`: it leaves for good, so the
    /// group does not wait out its session.
    pub fn prepare_to_leave(&self) -> Result<bool> {
        self.check_open()?;
        let driver = self
            .driver()
            .ok_or_else(|| Error::IllegalState("prepare_to_leave() needs a subscription".into()))?;
        let learner_sticky = {
            let mut m = driver.membership();
            // The protocol the group agreed on, not this member's first choice: in a mixed group
            // it may be one that cannot hand over through learners.
            let learner_sticky = m
                .generation()
                .protocol
                .as_deref()
                .and_then(assignor_by_name)
                .is_some_and(|a| a.hands_over_through_learners());
            if !driver.is_leaving() {
                driver.set_leaving();
                m.request_rejoin("the member is leaving: its partitions are handed over first");
            }
            learner_sticky
        };
        tracing::info!(group = %driver.group_id, learner_sticky, "preparing to leave the group");
        self.shared.data_ready.notify_all();
        Ok(learner_sticky)
    }

    /// Calls `on_partitions_learning` again for partitions it was not ready for, once their
    /// backoff has passed; returns whether it did.
    async fn retry_learning(&self, d: &mut dyn Dispatch, errors: &mut Option<Error>) -> bool {
        let due: Vec<TopicPartition> = {
            let g = self.group.lock().unpoisoned();
            match g.as_ref() {
                Some(l) if !l.unready.is_empty() && Instant::now() >= l.learning_retry_at => {
                    l.unready.iter().cloned().collect()
                }
                _ => return false,
            }
        };
        self.warm_up(d, due, errors).await;
        true
    }

    /// Close/unsubscribe: commit, revoke through the listener (if `callbacks`), leave.
    pub(crate) fn leave_group_now(
        &self,
        reason: &str,
        deadline: Deadline,
        callbacks: bool,
    ) -> Option<Error> {
        self.driver()?;
        let mut blocking = BlockingListener;
        let listener = callbacks.then_some(&mut blocking as &mut dyn Dispatch);
        self.block_on(self.leave_group(reason, deadline, listener))
            .unwrap_or(None)
    }

    /// Close/unsubscribe: commit, revoke through `listener` (none: no callbacks), leave.
    pub(crate) async fn leave_group(
        &self,
        reason: &str,
        deadline: Deadline,
        listener: Option<&mut dyn Dispatch>,
    ) -> Option<Error> {
        let driver = self.driver()?;
        let _steps = CallerSteps::begin(&self.group);
        let mut errors = None;
        let (owned, lost) = {
            let g = self.group.lock().unpoisoned();
            let owned = g.as_ref().map(|l| l.owned.clone()).unwrap_or_default();
            (owned, driver.membership().holds_no_generation())
        };
        match listener {
            Some(d) if lost => self.lose(d, owned, &mut errors).await,
            Some(d) => self.revoke(d, owned, deadline, &mut errors).await,
            None if !lost => {
                self.commit_before_revoke(&owned, deadline).await;
                self.shared.remove_partitions(owned.iter());
            }
            None => {}
        }
        // As the Java client's close: the asynchronous commits in flight complete (within the
        // deadline) and their callbacks run here.
        let _ = driver.async_commits_done(deadline).await;
        self.run_commit_callbacks();
        if self.shared.config.leave_group_on_close
            || reason.contains("unsubscribed")
            || driver.is_leaving()
        {
            // A JoinGroup (or SyncGroup) in flight is answered only once the group's other
            // members have rejoined. Drop the join with its connection (Lane::Join, so the
            // LeaveGroup, on the coordinator's own connection, does not wait behind it): the
            // rebalance goes on without this member.
            let join = {
                let mut g = self.group.lock().unpoisoned();
                g.as_mut()
                    .map(|l| std::mem::replace(&mut l.join, JoinSlot::Idle))
            };
            if let Some(join @ JoinSlot::Running { .. }) = join {
                join.abort();
                driver.coordinator_unknown("leaving the group while a join is in flight");
            }
            let _ = driver.leave_group(reason, deadline).await;
        }
        driver.close();
        errors
    }
}

/// The next group step under the group lock, as [`Consumer::take_group_step`] takes it for the
/// application's thread (`background: false`) or [`run_background_steps`] while the
/// application is away (`background: true`: only what [`taken_in_background`] allows; a
/// finished join only when [`join_applies_in_background`]).
fn take_step_locked(
    local: &mut GroupLocal,
    driver: &Arc<GroupDriver>,
    shared: &Arc<Shared>,
    runtime: &tokio::runtime::Handle,
    background: bool,
) -> Result<CallerStep> {
    let meta = shared.cluster.metadata();
    let now = Instant::now();
    let mut m = driver.membership();
    let step = local.next_step(&mut m, &meta, shared.config.exclude_internal_topics, now);
    if !background && step != GroupStep::Wait {
        local.background_due = true;
    }
    if background {
        if !taken_in_background(&step, &m) {
            return Ok(CallerStep::Done);
        }
        if step == GroupStep::ApplyJoin {
            drop(m);
            return Ok(apply_join_in_background(local, driver));
        }
    }
    Ok(match step {
        GroupStep::Wait => CallerStep::Done,
        GroupStep::ReportLost => {
            m.take_partitions_lost();
            let lost = std::mem::take(&mut local.owned);
            if lost.is_empty() {
                CallerStep::Again
            } else {
                CallerStep::Lost(lost)
            }
        }
        GroupStep::ApplyJoin => match local.join.take_finished() {
            Some(Ok(outcome)) => CallerStep::ApplyJoin(Box::new(outcome)),
            _ => CallerStep::Again,
        },
        GroupStep::DiscardJoin => {
            if let Some(Ok(outcome)) = local.join.take_finished() {
                // The membership was reset after the join finished (max.poll.interval.ms,
                // a stale generation): its assignment belongs to a generation this member
                // left. Drop it and rejoin (Java's resetStateAndRejoin).
                tracing::info!(
                    group = %driver.group_id,
                    joined = outcome.generation.generation_id,
                    now = m.generation().generation_id,
                    reason = %m.rejoin_reason(),
                    "discarding the assignment of a generation this member has left; rejoining"
                );
            }
            if !m.rejoin_needed() {
                m.request_rejoin("the generation was reset before its assignment was applied");
            }
            CallerStep::Again
        }
        GroupStep::JoinFatal => match local.join.take_finished() {
            Some(Err(e)) => {
                m.set_fatal(e.clone());
                return Err(e);
            }
            _ => CallerStep::Again,
        },
        GroupStep::RetryJoin => {
            if let Some(Err(e)) = local.join.take_finished() {
                tracing::warn!(error = %e, "joining the group failed; retrying");
            }
            local.join_retry_at = now + shared.config.common.retry_backoff;
            CallerStep::Again
        }
        GroupStep::Revoke(parts) => CallerStep::Revoke(parts),
        GroupStep::Join(input) => {
            m.start_join();
            drop(m);
            local.assignment_basis = AssignmentBasis::None;
            local.join = spawn_join(shared, runtime, driver, input, local.background.clone());
            CallerStep::Again
        }
    })
}

/// Starts the join task on the I/O runtime; its answer wakes `poll()` and the background task.
fn spawn_join(
    shared: &Arc<Shared>,
    runtime: &tokio::runtime::Handle,
    driver: &Arc<GroupDriver>,
    input: JoinInput,
    background: Arc<tokio::sync::Notify>,
) -> JoinSlot {
    let (tx, answer) = tokio::sync::oneshot::channel();
    let shared = shared.clone();
    let d = driver.clone();
    let task = runtime.spawn(async move {
        let _ = tx.send(d.join(input).await);
        shared.data_ready.notify_all();
        background.notify_one();
    });
    JoinSlot::Running { task, answer }
}

/// Applies a finished join that changes nothing the member owns or learns, without the
/// application; any other is left for `poll()`.
fn apply_join_in_background(local: &mut GroupLocal, driver: &Arc<GroupDriver>) -> CallerStep {
    let JoinSlot::Finished(Ok(outcome)) = &local.join else {
        return CallerStep::Done;
    };
    let changes = changes_after_join(
        driver.rebalance_protocol(),
        outcome.protocol,
        &local.owned,
        &outcome.assigned,
    );
    if !join_applies_in_background(&changes, &local.learning, &outcome.learning) {
        return CallerStep::Done;
    }
    let Some(Ok(outcome)) = local.join.take_finished() else {
        return CallerStep::Done;
    };
    tracing::debug!(
        group = %driver.group_id,
        generation = outcome.generation.generation_id,
        "applied a join that changes nothing this member owns while the application is busy"
    );
    local.assignment_basis = AssignmentBasis::after_join(
        outcome.assigned_from,
        local.subscribed.clone(),
        Instant::now(),
    );
    local.assigned_owed = true;
    CallerStep::Again
}

/// How long the background task sleeps when nothing wakes it: a failed join is tried again
/// after its backoff, and the task ends within this of the consumer going away.
const BACKGROUND_IDLE: Duration = Duration::from_secs(1);

/// The group steps that need no callback, taken while the application is away from `poll()`
/// (see [`taken_in_background`]). Woken by the heartbeat (a rebalance began) and by finished
/// joins; ends when the consumer or its subscription goes away.
async fn run_background_steps(
    group: Weak<Mutex<Option<GroupLocal>>>,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    wake: Arc<tokio::sync::Notify>,
) {
    loop {
        let _ = tokio::time::timeout(BACKGROUND_IDLE, wake.notified()).await;
        let Some(group) = group.upgrade() else { return };
        for _ in 0..MAX_STEPS_PER_POLL {
            let mut g = group.lock().unpoisoned();
            let Some(local) = g.as_mut() else { return };
            if !Arc::ptr_eq(&local.background, &wake) {
                return; // unsubscribed and subscribed again: a newer task serves that group
            }
            if local.driver.is_closed() {
                break;
            }
            if local.caller_steps > 0 {
                // The application's steps are under way: their end wakes this task again.
                local.background_due = true;
                break;
            }
            let driver = local.driver.clone();
            match take_step_locked(local, &driver, &shared, &runtime, true) {
                Ok(CallerStep::Again) => continue,
                Ok(_) => break,
                // A fatal join error: never taken here (`taken_in_background`); poll() reports it.
                Err(_) => break,
            }
        }
    }
}

/// Marks group steps under way on the application's side for as long as it lives (dropped at
/// the end of the steps, or with a cancelled `recv()`'s step future).
struct CallerSteps<'a>(&'a Mutex<Option<GroupLocal>>);

impl<'a> CallerSteps<'a> {
    fn begin(group: &'a Mutex<Option<GroupLocal>>) -> CallerSteps<'a> {
        if let Some(l) = group.lock().unpoisoned().as_mut() {
            l.caller_steps += 1;
        }
        CallerSteps(group)
    }

    /// `begin`, also taking the assignment callback a background step left owed to the
    /// application: one lock for both, as an async stream runs the steps for every record.
    fn begin_taking_owed(group: &'a Mutex<Option<GroupLocal>>) -> (CallerSteps<'a>, bool) {
        let owed = group.lock().unpoisoned().as_mut().is_some_and(|l| {
            l.caller_steps += 1;
            std::mem::take(&mut l.assigned_owed)
        });
        (CallerSteps(group), owed)
    }
}

impl Drop for CallerSteps<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.0.lock().unpoisoned().as_mut() {
            l.caller_steps = l.caller_steps.saturating_sub(1);
            if l.caller_steps == 0 && std::mem::take(&mut l.background_due) {
                // What the caller left (a join it started, a rebalance heard meanwhile) may be
                // the background's to take on now.
                l.background.notify_one();
            }
        }
    }
}

/// The member's place in its group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GroupMetadata {
    /// The consumer group (`group.id`).
    pub group_id: String,
    /// The generation the member is in; -1 before its first join completes or after it lost its
    /// generation.
    pub generation_id: i32,
    /// The member id the coordinator assigned; empty before the first join.
    pub member_id: String,
    /// The static member id (`group.instance.id`), if set.
    pub group_instance_id: Option<String>,
    /// The assignor the group chose in the member's generation ("range", "cooperative-sticky");
    /// `None` without a generation.
    pub protocol: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_steps_stand_only_briefly_and_while_the_member_s_state_is_untouched() {
        let at = Instant::now();
        let soon = at + IDLE_STEPS_STAND_FOR / 2;
        // No steps found nothing to do yet (or steps are under way): none stand.
        assert!(!idle_steps_stand(None, at, 0));
        assert!(idle_steps_stand(Some((at, 7)), at, 7));
        assert!(idle_steps_stand(Some((at, 7)), soon, 7));
        // Anything that touched the member's state since (a heartbeat's answer, a join).
        assert!(!idle_steps_stand(Some((at, 7)), soon, 8));
        // Too long ago: the steps run again even with nothing touched (timers: auto-commit,
        // a join's retry, metadata changes).
        assert!(!idle_steps_stand(
            Some((at, 7)),
            at + IDLE_STEPS_STAND_FOR,
            7
        ));
        // A clock read before the steps ended: the steps run (the conservative answer).
        assert!(!idle_steps_stand(Some((soon, 7)), at, 7));
    }

    #[test]
    fn steps_that_found_nothing_stand_until_cleared() {
        let idle = IdleSteps::default();
        let at = Instant::now();
        assert!(!idle.stand(at), "no steps recorded");
        idle.found_nothing(at);
        assert!(idle.stand(at));
        idle.membership_accesses.fetch_add(1, Ordering::AcqRel);
        assert!(!idle.stand(at), "the member's state was touched");
        idle.found_nothing(at);
        assert!(idle.stand(at + IDLE_STEPS_STAND_FOR / 2));
        assert!(!idle.stand(at + IDLE_STEPS_STAND_FOR), "too long ago");
        idle.clear();
        assert!(!idle.stand(at), "steps under way");
    }
}
