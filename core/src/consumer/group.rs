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
use std::sync::{Arc, Mutex};
use std::time::Instant;

use regex::Regex;

use crate::backoff::{Deadline, Retry};
use crate::cluster::Metadata;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::fetch::{PositionLookup, Shared};
use crate::group::coordinator::GroupDriver;
use crate::group::member::Membership;
use crate::group::metadata_snapshot::AssignmentBasis;
use crate::group::rebalance::changes_after_join;
use crate::group::step::{
    matching_topics, next_step, taken_in_background, GroupStep, JoinInput, JoinOutcome,
    JoinProgress, LocalGroup,
};
use crate::sync::Unpoisoned;
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

use super::background_steps::{apply_join_in_background, run_background_steps};
pub(crate) use super::idle_steps::IdleSteps;
use super::rebalance_listener::{
    BlockingListener, Callback, Dispatch, GroupMetadata, RebalanceListener,
};

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
    pub(super) fn take_finished(&mut self) -> Option<Result<JoinOutcome>> {
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
pub(super) enum CallerStep {
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
pub(super) const MAX_STEPS_PER_POLL: usize = 8;

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
            if self.shared.lock().has_partitions() {
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
pub(super) fn take_step_locked(
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
pub(super) fn spawn_join(
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
