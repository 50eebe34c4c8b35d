//! The group member: everything this consumer knows of its membership, in one place, changed
//! only by [`GroupMember::handle`]. Nothing here sends, waits, spawns or calls the listener: an
//! event goes in (a step of `poll()` or of the background task, a join's answer, a callback
//! done, an application call), and the effects that come out say what the consumer carries out
//! (report partitions lost, revoke, apply a join, start one, warm up learned partitions, fail).
//!
//! Two halves that used to live apart (the protocol's state under the driver, the consumer's
//! side of the group under the consumer's lock) are one value now, owned by the member's driver
//! task (`consumer/driver_task.rs`), which runs every change sent to it:
//! - [`Membership`] (`membership`): generation, member id, rejoin requests, a lost generation,
//!   fatal errors. The group protocol reports its answers there (the Java client's error table,
//!   tested in `member.rs`), the heartbeat its verdicts.
//! - the rest: the subscription, what the member owns, learns and is ready to own, what the
//!   assignment was computed from, the join under way and its retry time, the assignment
//!   callback owed to the application.
//!
//! Which step comes next is [`next_step`]'s decision (`step.rs`), and what a finished join
//! changes is [`changes_after_join`]'s (`rebalance.rs`): this file composes them with the state
//! they read and write, so every transition can be tested from literal inputs (below).
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use regex::Regex;

use crate::backoff::Retry;
use crate::cluster::Metadata;
use crate::error::{Error, Result};
use crate::group::assignor::RebalanceProtocol;
use crate::group::member::{Generation, MemberState, Membership, Next, ProtocolAnswer, Reply};
use crate::group::metadata_snapshot::{AssignmentBasis, MetadataSnapshot};
use crate::group::rebalance::changes_after_join;
use crate::group::step::{
    join_applies_in_background, matching_topics, next_step, taken_in_background, GroupStep,
    JoinInput, JoinOutcome, JoinProgress, LocalGroup,
};
use crate::types::TopicPartition;

/// What the application subscribed to.
pub(crate) enum Topics {
    Names(BTreeSet<String>),
    /// A client-side pattern: the member matches it against metadata and sends topic names.
    Pattern(Regex),
    /// A server-side regex (KIP-848's `SubscribedTopicRegex`, RE2/J): sent as it is; the
    /// coordinator resolves it and assigns what matches.
    Regex(String),
}

impl Topics {
    /// The server-side regex, if the subscription is one.
    fn regex(&self) -> Option<&str> {
        match self {
            Topics::Regex(r) => Some(r),
            Topics::Names(_) | Topics::Pattern(_) => None,
        }
    }
}

/// Where the join the member started is (the task itself is the consumer's).
#[derive(Debug)]
enum JoinState {
    Idle,
    Running,
    Finished(Result<JoinOutcome>),
}

/// What the member is told of its consumer, once.
#[derive(Debug, Clone)]
pub(crate) struct MemberSettings {
    pub group_id: String,
    /// How this member rebalances, decided from the assignors it offers.
    pub protocol: RebalanceProtocol,
    /// `retry.backoff.ms`: a failed join is tried again after it.
    pub retry_backoff: Duration,
    /// `exclude.internal.topics`, for pattern subscriptions.
    pub exclude_internal_topics: bool,
    /// `learner.readiness=explicit`: a learned partition is ready when the application says so
    /// (`learner_ready()`), not when its callback returns.
    pub explicit_readiness: bool,
}

/// What happens to the member.
pub(crate) enum Event<'a> {
    /// The application subscribed (again): to these topics or a pattern.
    Subscribed(Topics),
    /// A rebalance is asked for (an application call, a learned partition ready, leaving).
    RejoinRequested(String),
    /// Time for the next group step, with the cluster's metadata: of `poll()` on the
    /// application's thread, or of the background task while the application is away
    /// (`background`: only the steps that call no listener).
    Step {
        meta: &'a Metadata,
        background: bool,
    },
    /// The join answered (the driver task hands its answer in as soon as it comes).
    JoinFinished(Result<JoinOutcome>),
    /// The join was dropped without an answer (leaving, closing).
    JoinDropped,
    /// The listener was told these partitions were revoked or lost, and they are fetched no
    /// more: the member owns them no longer.
    Released(&'a BTreeSet<TopicPartition>),
    /// A join's new partitions are fetched now ([`Effect::ApplyJoin`]'s `add`): the member owns
    /// them, with the metadata the assignment was computed from.
    Assigned {
        added: &'a BTreeSet<TopicPartition>,
        assigned_from: Option<MetadataSnapshot>,
    },
    /// The partitions the applied join has this member learn (learner-sticky).
    LearningAssigned(BTreeSet<TopicPartition>),
    /// `on_partitions_learning` for `partitions` returned: `Ok` (`ok`) or an error.
    WarmedUp {
        partitions: Vec<TopicPartition>,
        ok: bool,
    },
    /// `learner_ready(partitions)`: the application says it has warmed up for them.
    LearnerReady(&'a [TopicPartition]),
    /// The application's steps are done with the group steps proper: learned partitions whose
    /// callback failed are due again after their backoff.
    LearningDue,
    /// The application's steps begin: an assignment callback the background task left owed
    /// runs now.
    TakeOwedAssignment,
}

/// A finished join the application's thread applies, in this order: report `lose` lost,
/// revoke `revoke` (each followed by [`Event::Released`]), fetch `add` and say so
/// ([`Event::Assigned`] with `assigned_from`), call `on_partitions_assigned(add)`, then
/// [`Event::LearningAssigned`] with `learning`.
#[derive(Debug)]
pub(crate) struct JoinPlan {
    pub lose: BTreeSet<TopicPartition>,
    pub revoke: BTreeSet<TopicPartition>,
    pub add: BTreeSet<TopicPartition>,
    pub learning: BTreeSet<TopicPartition>,
    pub assigned_from: Option<MetadataSnapshot>,
}

/// What the consumer carries out.
#[derive(Debug)]
pub(crate) enum Effect {
    /// Nothing (more) to do in this step.
    Wait,
    /// A step done inside the member: look again.
    Again,
    /// Call `on_partitions_lost` for these (never committed), stop fetching them, then
    /// [`Event::Released`].
    ReportLost(BTreeSet<TopicPartition>),
    /// Auto-commit, call `on_partitions_revoked` for these, stop fetching them, then
    /// [`Event::Released`].
    Revoke(BTreeSet<TopicPartition>),
    /// Apply a finished join ([`JoinPlan`]).
    ApplyJoin(Box<JoinPlan>),
    /// Start a join sending this (the driver task runs it); its answer comes back as
    /// [`Event::JoinFinished`].
    StartJoin(JoinInput),
    /// The member cannot go on: `poll()` reports this (and every later one).
    Fatal(Error),
    /// Call `on_partitions_learning` for these; its result comes back as [`Event::WarmedUp`].
    WarmUp(Vec<TopicPartition>),
    /// Call `on_partitions_assigned` with no partitions: a join applied in the background is
    /// told to the application (as the Java client's poll() does after every join).
    CallAssignedOwed,
}

/// What the consumer's commit paths and its application calls read of the member without
/// asking the member's owner: published after every call to the member
/// ([`GroupMember::refresh_view`]), so it is what the last change left.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct MemberView {
    /// The generation the member is in (or joining with).
    pub generation: Generation,
    /// The generation a commit goes out with now, or why none can
    /// ([`Membership::commit_generation`]).
    pub commit_generation: Result<Generation>,
    /// The member holds its partitions in the generation it was assigned them in
    /// ([`Membership::owned_generation`]): auto-commit sends only then.
    pub owns_in_generation: bool,
    /// The member holds no generation ([`Membership::holds_no_generation`]): what it owns is
    /// lost, not revoked.
    pub holds_no_generation: bool,
    pub owned: BTreeSet<TopicPartition>,
    /// The topics of the subscription (for a pattern, those that matched so far; none for a
    /// server-side regex).
    pub subscribed: BTreeSet<String>,
    /// The server-side regex of the subscription (KIP-848), if it is one.
    pub regex: Option<String>,
    /// The member heartbeats ([`Membership::heartbeats_enabled`]).
    pub heartbeats_enabled: bool,
    /// The error the member cannot go on from, which every `poll()` reports.
    pub fatal: Option<Error>,
    /// Learner assignments: the partitions the member learns, and those of them it is ready
    /// to own.
    pub learning: BTreeSet<TopicPartition>,
    pub ready: BTreeSet<TopicPartition>,
    /// For the metrics: the protocol state, whether a rejoin is asked for and why, and the
    /// rebalances completed.
    pub state: MemberState,
    pub rejoin_needed: bool,
    pub rejoin_reason: String,
    pub rebalances: RebalanceTally,
}

impl MemberView {
    /// What a heartbeat sends of the member ([`HeartbeatInput`]).
    pub fn heartbeat_input(&self) -> HeartbeatInput {
        HeartbeatInput {
            generation: self.generation.clone(),
            subscribed: self.subscribed.iter().cloned().collect(),
            regex: self.regex.clone(),
            owned: self.owned.clone(),
        }
    }
}

/// What a heartbeat carries of the member, read off it in one look by the heartbeat's caller
/// ([`MemberView::heartbeat_input`]),
/// so that a protocol reads nothing off the member while it sends (the classic protocol sends
/// the generation only; KIP-848's request carries the subscription and owned partitions too).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeartbeatInput {
    pub generation: Generation,
    /// The topics of the subscription (for a pattern, those that matched so far).
    pub subscribed: Vec<String>,
    /// The server-side regex of the subscription (KIP-848), which the coordinator resolves.
    pub regex: Option<String>,
    pub owned: BTreeSet<TopicPartition>,
}

/// How many of `partitions` `learner_ready()` takes as newly ready: those the member learns and
/// was not ready for yet, each once.
pub(crate) fn ready_taken(
    learning: &BTreeSet<TopicPartition>,
    ready: &BTreeSet<TopicPartition>,
    partitions: &[TopicPartition],
) -> usize {
    let new: BTreeSet<&TopicPartition> = partitions
        .iter()
        .filter(|tp| learning.contains(*tp) && !ready.contains(*tp))
        .collect();
    new.len()
}

/// The group member (see the module's words).
pub(crate) struct GroupMember {
    /// The protocol's half: the group protocol and the heartbeat report their answers to it.
    pub membership: Membership,
    settings: MemberSettings,
    topics: Topics,
    /// The topics of the subscription (for a pattern, those that matched).
    subscribed: BTreeSet<String>,
    owned: BTreeSet<TopicPartition>,
    /// Learner assignments: the partitions this member learns, those of them it is ready to
    /// own, and those whose callback failed (called again at `learning_retry_at`).
    learning: BTreeSet<TopicPartition>,
    ready: BTreeSet<TopicPartition>,
    unready: BTreeSet<TopicPartition>,
    learning_retry: Retry,
    learning_retry_at: Instant,
    /// What the current assignment was computed from, to rejoin when the subscribed topics
    /// change under it (partitions added, a topic created or deleted).
    assignment_basis: AssignmentBasis,
    join: JoinState,
    /// A failed join is not tried again before this.
    join_retry_at: Instant,
    /// The background task applied a join that changed nothing: the application's next steps
    /// still run `on_partitions_assigned` (with no partitions) for it.
    assigned_owed: bool,
    /// The rebalances the member completed (joins whose assignment it applied), and when and why
    /// the one under way started (its first join; one tried again keeps it).
    pub rebalances: RebalanceTally,
}

/// What the member's metrics say of its rebalances.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct RebalanceTally {
    pub completed: u64,
    /// Why the last completed one started, and how long it took.
    pub last: Option<(String, Duration)>,
    /// When the last one completed (the Java consumer's `last-rebalance-seconds-ago`).
    pub last_completed_at: Option<Instant>,
    /// The completed ones' durations in milliseconds, windowed (`rebalance-latency-avg`/`-max`).
    pub latency: crate::metrics::window::Windowed,
    /// Learner assignments: partitions this member learned that a join then gave it to own.
    pub learned_owned: u64,
    started: Option<(Instant, String)>,
}

impl RebalanceTally {
    /// A join starts; a rebalance already under way (a join tried again) keeps its start.
    fn join_started(&mut self, now: Instant, reason: &str) {
        self.started
            .get_or_insert_with(|| (now, reason.to_string()));
    }

    /// A join's assignment is applied: the rebalance is complete.
    fn completed(&mut self, now: Instant) {
        self.completed += 1;
        self.last_completed_at = Some(now);
        if let Some((at, reason)) = self.started.take() {
            let took = now.saturating_duration_since(at);
            self.latency
                .record(crate::metrics::window::millis(took), now);
            self.last = Some((reason, took));
        }
    }
}

impl GroupMember {
    /// A member subscribed to nothing yet, with a rebalance pending; `group_instance_id` makes
    /// it static (KIP-345); `learning_retry` paces the warm-ups that failed.
    pub fn new(
        settings: MemberSettings,
        group_instance_id: Option<String>,
        learning_retry: Retry,
        now: Instant,
    ) -> GroupMember {
        GroupMember {
            membership: Membership::new(group_instance_id),
            settings,
            topics: Topics::Names(BTreeSet::new()),
            subscribed: BTreeSet::new(),
            owned: BTreeSet::new(),
            learning: BTreeSet::new(),
            ready: BTreeSet::new(),
            unready: BTreeSet::new(),
            learning_retry,
            learning_retry_at: now,
            assignment_basis: AssignmentBasis::None,
            join: JoinState::Idle,
            join_retry_at: now,
            assigned_owed: false,
            rebalances: RebalanceTally::default(),
        }
    }

    /// The partitions the member owns (the consumer reads them in its [`MemberView`]; the
    /// metrics snapshot here, beside the generation, under the same lock).
    #[cfg(test)]
    pub fn owned(&self) -> &BTreeSet<TopicPartition> {
        &self.owned
    }

    /// The topics of the subscription (the consumer reads them in its [`MemberView`]).
    #[cfg(test)]
    pub fn subscribed(&self) -> &BTreeSet<String> {
        &self.subscribed
    }

    /// The member as [`MemberView`] shows it.
    pub fn view(&self) -> MemberView {
        let m = &self.membership;
        MemberView {
            generation: m.generation().clone(),
            commit_generation: m.commit_generation(false),
            owns_in_generation: m.owned_generation().is_some(),
            holds_no_generation: m.holds_no_generation(),
            owned: self.owned.clone(),
            subscribed: self.subscribed.clone(),
            regex: self.topics.regex().map(str::to_string),
            heartbeats_enabled: m.heartbeats_enabled(),
            fatal: m.fatal().cloned(),
            learning: self.learning.clone(),
            ready: self.ready.clone(),
            state: m.state(),
            rejoin_needed: m.rejoin_needed(),
            rejoin_reason: m.rejoin_reason().to_string(),
            rebalances: self.rebalances.clone(),
        }
    }

    /// Brings `view` up to date with the member, copying only what changed: whether anything
    /// did (readers are told only then).
    pub fn refresh_view(&self, view: &mut MemberView) -> bool {
        let m = &self.membership;
        let changed = [
            copy_changed(
                &mut view.owns_in_generation,
                &m.owned_generation().is_some(),
            ),
            copy_changed(&mut view.holds_no_generation, &m.holds_no_generation()),
            copy_changed(&mut view.heartbeats_enabled, &m.heartbeats_enabled()),
            copy_changed(&mut view.rejoin_needed, &m.rejoin_needed()),
            copy_changed(&mut view.state, &m.state()),
            copy_changed(&mut view.rejoin_reason, m.rejoin_reason()),
            copy_changed(&mut view.rebalances, &self.rebalances),
            copy_changed(&mut view.learning, &self.learning),
            copy_changed(&mut view.ready, &self.ready),
            copy_changed(&mut view.fatal, &m.fatal().cloned()),
            copy_changed(&mut view.generation, m.generation()),
            copy_changed(&mut view.commit_generation, &m.commit_generation(false)),
            copy_changed(&mut view.owned, &self.owned),
            copy_changed(&mut view.subscribed, &self.subscribed),
        ];
        let regex_changed = view.regex.as_deref() != self.topics.regex();
        if regex_changed {
            view.regex = self.topics.regex().map(str::to_string);
        }
        regex_changed || changed.contains(&true)
    }

    /// What the group protocol heard, applied ([`Membership::on_answer`]): the member's reply,
    /// and whether `poll()` must look at the member again. A KIP-848 assignment
    /// ([`ProtocolAnswer::MemberAssignment`]) is compared here with what the member owns when
    /// the answer is applied: a rejoin only when it differs or names a topic the metadata does
    /// not know yet (the rejoin looks it up; franz-go 1.21.6 missed such partitions until
    /// restart).
    pub fn on_answer(&mut self, answer: ProtocolAnswer) -> (Reply, bool) {
        let answer = match answer {
            ProtocolAnswer::MemberAssignment {
                assigned,
                unknown_topics,
            } => {
                if !unknown_topics && assigned == self.owned {
                    return (Reply::Next(Next::Continue), false);
                }
                ProtocolAnswer::AssignmentChanged
            }
            answer => answer,
        };
        let wakes = answer.wakes_poll();
        (self.membership.on_answer(answer), wakes)
    }

    /// The one way the member changes: `event` at `now`, and what the consumer carries out.
    pub fn handle(&mut self, event: Event<'_>, now: Instant) -> Vec<Effect> {
        match event {
            Event::Subscribed(topics) => {
                self.subscribed = match &topics {
                    Topics::Names(n) => n.clone(),
                    Topics::Pattern(_) | Topics::Regex(_) => BTreeSet::new(),
                };
                self.membership
                    .set_subscribed_regex(topics.regex().map(str::to_string));
                self.topics = topics;
                self.membership.request_rejoin("the subscription changed");
                vec![]
            }
            Event::RejoinRequested(reason) => {
                self.membership.request_rejoin(reason);
                vec![]
            }
            Event::Step { meta, background } => vec![self.step(meta, background, now)],
            Event::JoinFinished(answer) => {
                if matches!(self.join, JoinState::Running) {
                    self.join = JoinState::Finished(answer);
                }
                vec![]
            }
            Event::JoinDropped => {
                self.join = JoinState::Idle;
                vec![]
            }
            Event::Released(partitions) => {
                self.owned.retain(|tp| !partitions.contains(tp));
                vec![]
            }
            Event::Assigned {
                added,
                assigned_from,
            } => {
                // The learning of the join before is still the member's here: the join's own
                // comes after its assignment (`LearningAssigned`).
                self.rebalances.learned_owned += added
                    .iter()
                    .filter(|tp| self.learning.contains(*tp))
                    .count() as u64;
                self.owned.extend(added.iter().cloned());
                self.assignment_basis =
                    AssignmentBasis::after_join(assigned_from, self.subscribed.clone(), now);
                vec![]
            }
            Event::LearningAssigned(learning) => {
                self.ready.retain(|tp| learning.contains(tp));
                self.unready.retain(|tp| learning.contains(tp));
                let new: Vec<TopicPartition> =
                    learning.difference(&self.learning).cloned().collect();
                self.learning = learning;
                if new.is_empty() {
                    vec![]
                } else {
                    vec![Effect::WarmUp(new)]
                }
            }
            Event::WarmedUp { partitions, ok } => {
                self.warmed_up(partitions, ok, now);
                vec![]
            }
            Event::LearnerReady(partitions) => {
                let taken = ready_taken(&self.learning, &self.ready, partitions);
                for tp in partitions {
                    if self.learning.contains(tp) {
                        self.unready.remove(tp);
                        self.ready.insert(tp.clone());
                    } else {
                        tracing::debug!(partition = %tp, "learner_ready() for a partition this member does not learn; ignored");
                    }
                }
                if taken > 0 {
                    self.membership
                        .request_rejoin("learned partitions are ready to be handed over");
                }
                vec![]
            }
            Event::LearningDue => {
                if !self.unready.is_empty() && now >= self.learning_retry_at {
                    vec![Effect::WarmUp(self.unready.iter().cloned().collect())]
                } else {
                    vec![]
                }
            }
            Event::TakeOwedAssignment => {
                if std::mem::take(&mut self.assigned_owed) {
                    vec![Effect::CallAssignedOwed]
                } else {
                    vec![]
                }
            }
        }
    }

    /// The topics and assignment follow metadata: a pattern subscription takes the topics that
    /// match now, and an assignment that no longer covers what the subscribed topics have asks
    /// for a rebalance (the Java client's metadata snapshot comparison).
    fn follow_metadata(&mut self, meta: &Metadata) {
        if let Topics::Pattern(re) = &self.topics {
            if let Some(matched) = matching_topics(re, meta, self.settings.exclude_internal_topics)
            {
                if matched != self.subscribed {
                    self.subscribed = matched;
                    self.membership
                        .request_rejoin("the topics matching the subscribed pattern changed");
                }
            }
        }
        if let Some(reason) = self.assignment_basis.check(meta) {
            self.membership.request_rejoin(reason);
        }
    }

    /// One group step: [`next_step`]'s decision, with the part of it that needs no callback
    /// done here.
    fn step(&mut self, meta: &Metadata, background: bool, now: Instant) -> Effect {
        if !self.membership.partitions_lost() {
            self.follow_metadata(meta);
        }
        let step = {
            let view = LocalGroup {
                protocol: self.settings.protocol,
                owned: &self.owned,
                subscribed: &self.subscribed,
                pattern: matches!(self.topics, Topics::Pattern(_)),
                regex: self.topics.regex(),
                ready: &self.ready,
                join: match &self.join {
                    JoinState::Idle => JoinProgress::Idle,
                    JoinState::Running => JoinProgress::Running,
                    JoinState::Finished(r) => JoinProgress::Finished(r),
                },
                join_retry_at: self.join_retry_at,
            };
            next_step(&self.membership, &view, now)
        };
        if background {
            if !taken_in_background(&step, &self.membership) {
                return Effect::Wait;
            }
            if step == GroupStep::ApplyJoin {
                return self.apply_join_in_background(now);
            }
        }
        match step {
            GroupStep::Wait => Effect::Wait,
            GroupStep::ReportLost => {
                self.membership.take_partitions_lost();
                let lost = std::mem::take(&mut self.owned);
                if lost.is_empty() {
                    Effect::Again
                } else {
                    Effect::ReportLost(lost)
                }
            }
            GroupStep::ApplyJoin => match self.take_finished() {
                Some(Ok(outcome)) => {
                    self.rebalances.completed(now);
                    Effect::ApplyJoin(Box::new(self.plan_join(outcome)))
                }
                _ => Effect::Again,
            },
            GroupStep::DiscardJoin => {
                if let Some(Ok(outcome)) = self.take_finished() {
                    // The membership was reset after the join finished (max.poll.interval.ms,
                    // a stale generation): its assignment belongs to a generation this member
                    // left. Drop it and rejoin (Java's resetStateAndRejoin).
                    tracing::info!(
                        group = %self.settings.group_id,
                        joined = outcome.generation.generation_id,
                        now = self.membership.generation().generation_id,
                        reason = %self.membership.rejoin_reason(),
                        "discarding the assignment of a generation this member has left; rejoining"
                    );
                }
                if !self.membership.rejoin_needed() {
                    self.membership.request_rejoin(
                        "the generation was reset before its assignment was applied",
                    );
                }
                Effect::Again
            }
            GroupStep::JoinFatal => match self.take_finished() {
                Some(Err(e)) => {
                    self.membership.set_fatal(e.clone());
                    Effect::Fatal(e)
                }
                _ => Effect::Again,
            },
            GroupStep::RetryJoin => {
                if let Some(Err(e)) = self.take_finished() {
                    tracing::warn!(error = %e, "joining the group failed; retrying");
                }
                self.join_retry_at = now + self.settings.retry_backoff;
                Effect::Again
            }
            GroupStep::Revoke(parts) => Effect::Revoke(parts),
            GroupStep::Join(input) => {
                self.rebalances
                    .join_started(now, self.membership.rejoin_reason());
                self.membership.start_join();
                self.assignment_basis = AssignmentBasis::None;
                self.join = JoinState::Running;
                Effect::StartJoin(input)
            }
        }
    }

    /// The finished join's answer, taken in by the step that applies (or drops) it.
    fn take_finished(&mut self) -> Option<Result<JoinOutcome>> {
        match std::mem::replace(&mut self.join, JoinState::Idle) {
            JoinState::Finished(r) => Some(r),
            other => {
                self.join = other;
                None
            }
        }
    }

    /// What applying `outcome` changes ([`changes_after_join`]); a cooperative revocation asks
    /// for the rejoin that lets the group hand the revoked partitions on (KIP-429).
    fn plan_join(&mut self, outcome: JoinOutcome) -> JoinPlan {
        let changes = changes_after_join(
            self.settings.protocol,
            outcome.protocol,
            &self.owned,
            &outcome.assigned,
        );
        if changes.rejoin {
            self.membership
                .request_rejoin("need to revoke partitions and re-join");
        }
        JoinPlan {
            lose: changes.lose,
            revoke: changes.revoke,
            add: changes.add,
            learning: outcome.learning,
            assigned_from: outcome.assigned_from,
        }
    }

    /// Applies a finished join that changes nothing the member owns or learns, without the
    /// application ([`join_applies_in_background`]); any other is left for `poll()`.
    fn apply_join_in_background(&mut self, now: Instant) -> Effect {
        let JoinState::Finished(Ok(outcome)) = &self.join else {
            return Effect::Wait;
        };
        let changes = changes_after_join(
            self.settings.protocol,
            outcome.protocol,
            &self.owned,
            &outcome.assigned,
        );
        if !join_applies_in_background(&changes, &self.learning, &outcome.learning) {
            return Effect::Wait;
        }
        let Some(Ok(outcome)) = self.take_finished() else {
            return Effect::Wait;
        };
        tracing::debug!(
            group = %self.settings.group_id,
            generation = outcome.generation.generation_id,
            "applied a join that changes nothing this member owns while the application is busy"
        );
        self.assignment_basis =
            AssignmentBasis::after_join(outcome.assigned_from, self.subscribed.clone(), now);
        self.assigned_owed = true;
        self.rebalances.completed(now);
        Effect::Again
    }

    /// `on_partitions_learning` returned for `partitions`. Ready: rejoin so the group moves
    /// them here. Started (`learner.readiness=explicit`): `learner_ready()` says when. Not ready
    /// (the callback failed): called again after a backoff (KIP-580), so a transient failure
    /// does not leave the partitions with their old owners for good.
    fn warmed_up(&mut self, partitions: Vec<TopicPartition>, ok: bool, now: Instant) {
        // A rebalance inside the callback may have changed what this member learns.
        let still: Vec<TopicPartition> = partitions
            .into_iter()
            .filter(|tp| self.learning.contains(tp))
            .collect();
        if !ok {
            self.unready.extend(still);
            self.learning_retry_at = now + self.learning_retry.failed();
            return;
        }
        self.learning_retry.succeeded();
        for tp in &still {
            self.unready.remove(tp);
        }
        if !self.settings.explicit_readiness {
            self.ready.extend(still);
            self.membership
                .request_rejoin("learned partitions are ready to be handed over");
        }
    }
}

/// Sets `field` to `now` when they differ (copying only then): whether it changed.
fn copy_changed<T, U>(field: &mut T, now: &U) -> bool
where
    T: std::borrow::Borrow<U>,
    U: PartialEq + ToOwned<Owned = T> + ?Sized,
{
    if field.borrow() == now {
        return false;
    }
    *field = now.to_owned();
    true
}

#[cfg(test)]
#[path = "group_member_tests.rs"]
mod tests;
