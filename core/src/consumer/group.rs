//! The consumer as a group member: subscribe, the rebalance listener, and the group steps
//! `poll()` carries out on the caller's thread (report lost partitions, revoke, start a join,
//! apply a finished one, learner warm-up). What the member does next, and every change of its
//! state, is decided by [`GroupMember::handle`] (`group/group_member.rs`); this file only
//! carries the effects out. The join and the heartbeat run in the member's driver task
//! (`consumer/driver_task.rs`, with their I/O in `group::coordinator`); commits,
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

use crate::backoff::Deadline;
use crate::config::GroupProtocolKind;
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::fetch::PositionLookup;
use crate::group::coordinator::GroupDriver;
use crate::group::group_member::{Effect, Event, JoinPlan, Topics};
use crate::sync::Unpoisoned;
use crate::types::TopicPartition;

use tokio::sync::mpsc;

use super::driver_task;
use super::group_local::Command;
pub(crate) use super::group_local::{Asked, GroupLocal, MAX_STEPS_PER_POLL};
pub(crate) use super::idle_steps::IdleSteps;
use super::rebalance_listener::{
    BlockingListener, Callback, Dispatch, GroupMetadata, RebalanceListener,
};

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

    /// Subscribes to the topics whose whole name matches `regex`, matched by the group
    /// coordinator, not by this consumer (the Java client's `subscribe(SubscriptionPattern)`,
    /// KIP-848). Needs `group.protocol=consumer`: the classic protocol has no server-side regex,
    /// and the call is refused under it, as the Java client refuses it ([`subscribe_pattern`]
    /// matches on the client under either protocol).
    ///
    /// The syntax is the broker's, RE2/J, and the regex matches whole topic names (`orders-.*`,
    /// not `^orders`). The consumer sends it as it is; the coordinator resolves it against the
    /// cluster's topics asynchronously, so the first assignment may come some heartbeats after
    /// the join, and a topic created later that matches is assigned when the coordinator
    /// refreshes its resolution (Kafka 4.1: at the first heartbeat of the group at least 10 s
    /// after the previous refresh). A regex the coordinator cannot compile makes `poll()` fail
    /// with `INVALID_REGULAR_EXPRESSION`, naming it; an empty one is refused here.
    ///
    /// [`subscribe_pattern`]: Consumer::subscribe_pattern
    pub fn subscribe_regex(
        &self,
        regex: &str,
        listener: Option<Box<dyn RebalanceListener>>,
    ) -> Result<()> {
        check_subscription_regex(regex, self.shared.config.group_protocol)?;
        self.set_subscription(Topics::Regex(regex.to_string()), listener)
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
            let (commands, inbox) = mpsc::unbounded_channel();
            let wake = commands.downgrade();
            let (driver, member) = GroupDriver::new(
                self.shared.cluster.clone(),
                self.shared.config.clone(),
                self.group_protocol.clone(),
                Arc::new(move || {
                    shared.data_ready.notify_all();
                    if let Some(task) = wake.upgrade() {
                        let _ = task.send(Command::Wake);
                    }
                }),
                self.idle_steps.membership_accesses.clone(),
            )?;
            self.give_leader_epochs(&driver);
            self.give_instruments(&driver);
            driver_task::spawn(
                self.runtime()?,
                driver.clone(),
                member,
                Arc::downgrade(&self.group),
                self.shared.clone(),
                inbox,
                commands.clone(),
            );
            *g = Some(GroupLocal {
                driver,
                listener: None,
                next_auto_commit: Instant::now() + self.shared.config.auto_commit_interval,
                last_committed: HashMap::new(),
                caller_steps: 0,
                background_due: false,
                commands,
                asked: Asked::Pattern,
            });
        }
        let local = g.as_mut().expect("created above");
        local.asked = match &topics {
            Topics::Names(n) => Asked::Names(n.clone()),
            Topics::Pattern(_) => Asked::Pattern,
            Topics::Regex(_) => Asked::Regex,
        };
        match &topics {
            Topics::Names(n) => self.shared.cluster.set_interest(n.clone(), false),
            // A server-side regex: the coordinator assigns by topic id, which the consumer names
            // with the metadata of every topic (as the Java client does for it).
            Topics::Pattern(_) | Topics::Regex(_) => {
                self.shared.cluster.set_interest(BTreeSet::new(), true)
            }
        }
        // Not waited for: the async front subscribes from non-async code. Every later call to
        // the member comes after this one.
        local.driver.tell_member(move |m| {
            m.handle(Event::Subscribed(topics), Instant::now());
        });
        if listener.is_some() {
            local.listener = listener;
        }
        self.shared.changed.notify_one();
        Ok(())
    }

    /// The topics the consumer is subscribed to (for a pattern, those that matched so far; for
    /// a server-side regex, whose matches only the coordinator knows, the topics of the
    /// partitions assigned to this consumer).
    pub fn subscription(&self) -> Vec<String> {
        let g = self.group.lock().unpoisoned();
        let Some(local) = g.as_ref() else {
            return Vec::new();
        };
        match &local.asked {
            // What was asked, as it was asked (the member may not have taken the call yet).
            Asked::Names(names) => names.iter().cloned().collect(),
            Asked::Pattern => local
                .driver
                .read_view(|m| m.subscribed.iter().cloned().collect()),
            Asked::Regex => local.driver.read_view(|m| {
                let topics: BTreeSet<&String> = m.owned.iter().map(|tp| &tp.topic).collect();
                topics.into_iter().cloned().collect()
            }),
        }
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
            // The task drops the join in flight with itself.
            let _ = local.commands.send(Command::Stop);
        }
        self.shared.cluster.set_interest(BTreeSet::new(), false);
    }

    /// The member's group metadata: (group id, generation id, member id, group instance id).
    pub fn group_metadata(&self) -> Option<GroupMetadata> {
        let g = self.group.lock().unpoisoned();
        let local = g.as_ref()?;
        let generation = local.driver.read_view(|m| m.generation.clone());
        Some(GroupMetadata {
            group_id: local.driver.group_id.clone(),
            generation_id: generation.generation_id,
            member_id: generation.member_id,
            group_instance_id: local.driver.config.group_instance_id.clone(),
            protocol: generation.protocol,
            leader_epochs: crate::types::LeaderEpochLookup(
                local.driver.leader_epochs.get().cloned(),
            ),
        })
    }

    /// Asks for a rebalance; the next `poll()` starts it. With `group.protocol=consumer`
    /// (KIP-848) the broker alone decides when assignments change, so the call is refused rather
    /// than left without effect.
    pub fn enforce_rebalance(&self, reason: &str) -> Result<()> {
        self.check_open()?;
        if self.shared.config.group_protocol == GroupProtocolKind::Consumer {
            return Err(Error::IllegalState(
                "enforce_rebalance() has no effect with group.protocol=consumer: the broker \
                 decides when assignments change (KIP-848)"
                    .into(),
            ));
        }
        let g = self.group.lock().unpoisoned();
        let local = g.as_ref().ok_or_else(|| {
            Error::IllegalState("enforce_rebalance() needs a subscription".into())
        })?;
        let reason = format!("enforced: {reason}");
        local.driver.tell_member(move |m| {
            m.handle(Event::RejoinRequested(reason), Instant::now());
        });
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
        self.forget(partitions).await;
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
        self.forget(partitions).await;
    }

    /// After revoking or losing `partitions`: stop fetching them and forget they were owned.
    async fn forget(&self, partitions: BTreeSet<TopicPartition>) {
        self.shared.remove_partitions(partitions.iter());
        let driver = {
            let mut g = self.group.lock().unpoisoned();
            let Some(l) = g.as_mut() else { return };
            for tp in &partitions {
                l.last_committed.remove(tp);
            }
            l.driver.clone()
        };
        driver
            .with_member(move |m| m.handle(Event::Released(&partitions), Instant::now()))
            .await;
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
        if let Some(e) = driver.read_view(|m| m.fatal.clone()) {
            return Err(e);
        }
        let _steps = CallerSteps::begin(&self.group);
        // One call to the member when there is nothing to do (the common case: steps run up to
        // once a millisecond while records flow, IDLE_STEPS_STAND_FOR): the error it went on
        // from (a failed heartbeat, which comes out of one poll()), the assignment callback the
        // background left owed, and, with none owed, the first step and the learning due.
        let meta = self.shared.cluster.metadata();
        let first = driver
            .with_member(move |m| {
                let now = Instant::now();
                let error = m.membership.take_error();
                let owed = m.handle(Event::TakeOwedAssignment, now);
                if !owed.is_empty() {
                    return (error, owed, None, None);
                }
                let step = Event::Step {
                    meta: &meta,
                    background: false,
                };
                let step = m.handle(step, now).pop().unwrap_or(Effect::Wait);
                let due = matches!(step, Effect::Wait).then(|| m.handle(Event::LearningDue, now));
                (error, owed, Some(step), due)
            })
            .await;
        let (mut errors, owed, mut step, mut due) = first.unwrap_or((None, Vec::new(), None, None));
        let deadline = Deadline::after(self.shared.config.common.default_api_timeout);
        let mut found_nothing = owed.is_empty();
        for effect in owed {
            self.carry_out(d, effect, deadline, &mut errors).await;
        }
        for _ in 0..MAX_STEPS_PER_POLL {
            let effect = match step.take() {
                Some(effect) => self.start_or_fail(&driver, effect).await?,
                None => self.take_group_step(&driver).await?,
            };
            found_nothing &= matches!(effect, Effect::Wait);
            match effect {
                Effect::Wait => break,
                effect => {
                    self.carry_out(d, effect, deadline, &mut errors).await;
                    // The steps went on: what is due is asked after them.
                    due = None;
                }
            }
        }
        let due = match due {
            Some(due) => due,
            None => driver
                .with_member(|m| m.handle(Event::LearningDue, Instant::now()))
                .await
                .unwrap_or_default(),
        };
        found_nothing &= due.is_empty();
        for effect in due {
            self.carry_out(d, effect, deadline, &mut errors).await;
        }
        self.maybe_auto_commit(&driver);
        if found_nothing && errors.is_none() {
            self.idle_steps.found_nothing(Instant::now());
        }
        errors.map_or(Ok(()), Err)
    }

    /// Asks the member for the next group step of the application's thread and does the part
    /// of it that needs no callback (start a join in the driver task, fail); what calls the
    /// listener is returned.
    async fn take_group_step(&self, driver: &Arc<GroupDriver>) -> Result<Effect> {
        let meta = self.shared.cluster.metadata();
        let effect = driver
            .with_member(move |m| {
                let step = Event::Step {
                    meta: &meta,
                    background: false,
                };
                m.handle(step, Instant::now()).pop().unwrap_or(Effect::Wait)
            })
            .await
            .unwrap_or(Effect::Wait);
        self.start_or_fail(driver, effect).await
    }

    /// The part of a step of the application's thread that needs no callback: start the join
    /// in the driver task (then [`Effect::Again`]), or fail; any other effect is returned to be
    /// carried out.
    async fn start_or_fail(&self, driver: &Arc<GroupDriver>, effect: Effect) -> Result<Effect> {
        if matches!(effect, Effect::Wait) {
            return Ok(effect);
        }
        let start = {
            let mut g = self.group.lock().unpoisoned();
            let Some(local) = g.as_mut() else {
                return Ok(Effect::Wait);
            };
            // The application's steps did something: when they end, the background may have
            // something to take on.
            local.background_due = true;
            match effect {
                Effect::StartJoin(input) => local.commands.send(Command::StartJoin(input)).is_ok(),
                Effect::Fatal(e) => return Err(e),
                effect => return Ok(effect),
            }
        };
        if !start {
            // The task ended (the member closed): no join will answer.
            driver
                .with_member(|m| m.handle(Event::JoinDropped, Instant::now()))
                .await;
        }
        Ok(Effect::Again)
    }

    /// Carries out one of the member's effects that calls the listener, on the caller's thread.
    fn carry_out<'a>(
        &'a self,
        d: &'a mut dyn Dispatch,
        effect: Effect,
        deadline: Deadline,
        errors: &'a mut Option<Error>,
    ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send + 'a>> {
        // Boxed: applying a join carries out the warm-up it leads to.
        Box::pin(async move {
            match effect {
                Effect::Wait | Effect::Again => {}
                Effect::ReportLost(parts) => self.lose(d, parts, errors).await,
                Effect::Revoke(parts) => self.revoke(d, parts, deadline, errors).await,
                Effect::ApplyJoin(plan) => self.apply_join(d, *plan, deadline, errors).await,
                Effect::WarmUp(parts) => self.warm_up(d, parts, errors).await,
                Effect::CallAssignedOwed => {
                    if let Some(e) = d.call(self, Callback::Assigned, &[]).await {
                        errors.get_or_insert(e);
                    }
                }
                // Taken by `take_step_locked` before it returns.
                Effect::StartJoin(_) | Effect::Fatal(_) => {}
            }
        })
    }

    /// Applies a finished join as the member planned it ([`JoinPlan`]).
    async fn apply_join(
        &self,
        d: &mut dyn Dispatch,
        plan: JoinPlan,
        deadline: Deadline,
        errors: &mut Option<Error>,
    ) {
        let Some(driver) = self.driver() else { return };
        if !plan.lose.is_empty() {
            // Kept through a join whose (eager) assignor may have handed them to another member
            // already: no commit may go out for them.
            tracing::warn!(partitions = ?plan.lose, "partitions kept through an eager rebalance are lost");
            self.lose(d, plan.lose, errors).await;
        }
        if !plan.revoke.is_empty() {
            // KIP-429: give these up now; the member asked to rejoin so the group can hand them on.
            self.revoke(d, plan.revoke, deadline, errors).await;
        }
        self.shared
            .add_partitions(plan.add.iter(), PositionLookup::Committed);
        let (added, assigned_from) = (plan.add.clone(), plan.assigned_from);
        driver
            .with_member(move |m| {
                let assigned = Event::Assigned {
                    added: &added,
                    assigned_from,
                };
                m.handle(assigned, Instant::now())
            })
            .await;
        let list: Vec<TopicPartition> = plan.add.into_iter().collect();
        if let Some(e) = d.call(self, Callback::Assigned, &list).await {
            errors.get_or_insert(e);
        }
        let learning = driver
            .with_member(move |m| m.handle(Event::LearningAssigned(plan.learning), Instant::now()))
            .await
            .unwrap_or_default();
        for effect in learning {
            if let Effect::WarmUp(new) = effect {
                tracing::info!(partitions = ?new, "learning partitions before their owners hand them over");
                // Part of warming up: the metadata (and so the leaders) of what this member
                // will fetch.
                self.shared
                    .cluster
                    .add_interest(new.iter().map(|tp| &tp.topic));
                self.warm_up(d, new, errors).await;
            }
        }
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
        let (owned, lost) = driver.read_view(|m| (m.owned.clone(), m.holds_no_generation));
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
            let (tx, dropped) = tokio::sync::oneshot::channel();
            let asked = {
                let g = self.group.lock().unpoisoned();
                g.as_ref()
                    .is_some_and(|l| l.commands.send(Command::DropJoin(tx)).is_ok())
            };
            if asked && dropped.await.unwrap_or(false) {
                driver.coordinator_unknown("leaving the group while a join is in flight");
            }
            let _ = driver.leave_group(reason, deadline).await;
        }
        driver.close();
        errors
    }
}

/// Whether a server-side regex subscription can be made: a regex that is not empty, under
/// `group.protocol=consumer`. The regex itself is the coordinator's to compile (RE2/J, which
/// this consumer does not speak exactly).
pub(crate) fn check_subscription_regex(regex: &str, protocol: GroupProtocolKind) -> Result<()> {
    if regex.is_empty() {
        return Err(Error::InvalidArgument(
            "the subscription regex is empty; use unsubscribe() to stop".into(),
        ));
    }
    if protocol != GroupProtocolKind::Consumer {
        return Err(Error::IllegalState(format!(
            "subscribe_regex(`{regex}`) needs group.protocol=consumer: the group coordinator \
             resolves the regex (KIP-848), which the classic protocol does not do; \
             subscribe_pattern() matches a pattern on the client under either protocol"
        )));
    }
    Ok(())
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
}

impl Drop for CallerSteps<'_> {
    fn drop(&mut self) {
        if let Some(l) = self.0.lock().unpoisoned().as_mut() {
            l.caller_steps = l.caller_steps.saturating_sub(1);
            if l.caller_steps == 0 && std::mem::take(&mut l.background_due) {
                // What the caller left (a join it started, a rebalance heard meanwhile) may be
                // the background's to take on now.
                let _ = l.commands.send(Command::Wake);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `(regex, group.protocol) -> refused with`: an empty regex is refused up front under either
    /// protocol; the classic protocol refuses any (the Java client's classic consumer throws
    /// for a `SubscriptionPattern`); the regex itself is the coordinator's to judge.
    #[test]
    fn a_regex_subscription_needs_a_regex_and_the_consumer_protocol() {
        use GroupProtocolKind::{Classic, Consumer};
        let table: &[(&str, GroupProtocolKind, Option<&str>)] = &[
            ("orders-.*", Consumer, None),
            // Invalid for RE2/J too, but the coordinator says so (poll() reports it).
            ("[", Consumer, None),
            ("", Consumer, Some("INVALID_ARGUMENT")),
            ("", Classic, Some("INVALID_ARGUMENT")),
            ("orders-.*", Classic, Some("ILLEGAL_STATE")),
        ];
        for (regex, protocol, refused) in table {
            let got = check_subscription_regex(regex, *protocol).err();
            assert_eq!(
                got.as_ref().map(|e| e.kind().name()),
                *refused,
                "{regex:?} under {protocol:?}: {got:?}"
            );
            if let Some(e) = got.filter(|_| !regex.is_empty()) {
                let text = e.to_string();
                assert!(text.contains("group.protocol=consumer"), "{text}");
                assert!(text.contains(&format!("`{regex}`")), "{text}");
            }
        }
    }
}
