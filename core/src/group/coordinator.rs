//! The group driver: the I/O around [`Membership`]. It finds the coordinator, runs the joins
//! that `poll()` starts (each attempt spoken by the member's [`GroupProtocol`], the retries
//! here), owns the background heartbeat (KIP-62), enforces `max.poll.interval.ms`, commits
//! offsets and leaves the group.
//!
//! The driver never starts a rejoin on its own: it only records that one is needed; `poll()`
//! on the caller's thread starts it.
//!
//! The member's state ([`GroupMember`]) and which broker is its coordinator are not here: the
//! member's driver task owns both ([`Owned`], `consumer/driver_task.rs`), and everyone else
//! (the poll thread's steps, the join, the heartbeat, the commits) changes them by sending that
//! task a call ([`MemberCall`], [`GroupDriver::with_member`]) and reads what the task publishes
//! after each: the [`MemberView`], and the coordinator with its connection.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::backoff::{Deadline, Retry};
use crate::cluster::{Cluster, Lane};
use crate::config::{ConsumerConfig, GroupProtocolKind};
use crate::error::{codes, Error, Result};
use crate::group::assignor::{assignor_by_name, Assignor, RebalanceProtocol};
use crate::group::group_member::{GroupMember, MemberSettings, MemberView};
use crate::group::group_protocol::{GroupProtocol, JoinAttempt, ProtocolContext, ProtocolFuture};
use crate::group::heartbeat::{
    heartbeat_step, interval_in_force, HeartbeatAnswer, HeartbeatClock, HeartbeatStep, Hurry,
    Liveness, SharedInstant,
};
use crate::group::member::{poll_timeout_consequence, Generation, Next, ProtocolAnswer, Reply};
use crate::group::metadata_snapshot::MetadataSnapshot;
use crate::group::rebalance::rebalance_protocol;
use crate::group::step::{JoinInput, JoinOutcome};
use crate::metrics::otel::ConsumerInstruments;
use crate::net::Connection;
use crate::offsets::{AsyncCommitDone, AsyncCommits};
use crate::protocol::group::Member;

use tokio::sync::mpsc;
use tracing::Instrument;

pub(crate) struct GroupDriver {
    pub group_id: String,
    pub cluster: Arc<Cluster>,
    pub config: ConsumerConfig,
    /// Calls to the member's owner, the driver task, which runs them in turn on the
    /// [`GroupMember`] it holds ([`GroupDriver::with_member`]).
    mailbox: mpsc::UnboundedSender<MemberCall>,
    /// What the member's last change left, for readers that need no answer from its owner
    /// ([`MemberView`]); the owner refreshes it after every call ([`MemberOwner::run`]).
    view: tokio::sync::watch::Sender<MemberView>,
    /// Counts the calls to the member: group steps that found nothing to do stand only while
    /// it is unchanged (`consumer::group::IdleSteps`).
    membership_accesses: Arc<AtomicU64>,
    /// The group coordinator and the connection to it, as the driver task last published it
    /// ([`Owned::coordinator`]): read here without asking the task.
    coordinator: tokio::sync::watch::Receiver<Option<Coordinator>>,
    /// The last `poll()` (max.poll.interval.ms), written by the application's thread.
    last_poll: SharedInstant,
    /// When the coordinator last answered a heartbeat (any answer, an error included), for the
    /// metrics; none before the first.
    last_heartbeat_answer: SharedInstant,
    pub assignors: Vec<Box<dyn Assignor>>,
    /// The protocol that carries the membership to the coordinator (`group.protocol`).
    group_protocol: Arc<dyn GroupProtocol>,
    /// How this member rebalances, decided once from `assignors` before any join.
    protocol: RebalanceProtocol,
    closed: AtomicBool,
    /// The member is leaving gracefully (`Consumer::prepare_to_leave`): its joins say so, and
    /// a learner-sticky leader hands its partitions to the members that stay.
    leaving: AtomicBool,
    /// Woken when the membership changes in a way `poll()` must see.
    pub on_change: Arc<dyn Fn() + Send + Sync>,
    /// Set when the last assignment said a follow-up rebalance is coming (learner-sticky).
    follow_up_since: SharedInstant,
    /// A committer for manually assigned partitions: it commits outside any generation.
    pub(crate) simple: bool,
    /// Asynchronous commits: one in flight, the others merged (see [`AsyncCommits`]).
    pub(crate) async_commits: Mutex<AsyncCommits<AsyncCommitDone>>,
    /// Woken when the asynchronous commits go idle (a synchronous commit waits for it).
    pub(crate) async_idle: tokio::sync::Notify,
    /// KIP-320: the leader epoch each committed offset is sent with, from the consumer's fetch
    /// state; set once the consumer has the driver (unset: -1, no epoch).
    pub(crate) leader_epochs: std::sync::OnceLock<LeaderEpochs>,
    /// The consumer's OpenTelemetry instruments, for the commits' durations; set once the
    /// consumer has the driver (unset: nothing recorded).
    pub(crate) instruments: std::sync::OnceLock<Arc<ConsumerInstruments>>,
}

// The leader epoch of `offset` of a partition, for a commit (-1: unknown).
pub(crate) use crate::types::LeaderEpochs;

/// The group coordinator's broker id and the connection to it.
type Coordinator = (i32, Arc<Connection>);

/// A call to what the driver task owns, run by the task with it in hand.
pub(crate) type MemberCall = Box<dyn FnOnce(&mut Owned) + Send>;

/// What the driver task owns: the member, and which broker is its group coordinator.
pub(crate) struct Owned {
    pub member: GroupMember,
    /// Published to [`GroupDriver::coordinator`]'s readers; changed only here.
    coordinator: tokio::sync::watch::Sender<Option<Coordinator>>,
}

impl Owned {
    /// A caller found the coordinator (FindCoordinator): it is the one from now on.
    fn coordinator_found(&mut self, found: Coordinator) {
        self.coordinator.send_replace(Some(found));
    }

    /// A caller found coordinator `id` gone: forget it, unless another was found since.
    fn coordinator_lost(&mut self, id: i32) {
        self.coordinator
            .send_if_modified(|c| forget_coordinator(c, id));
    }
}

/// Forgets the coordinator `known` if it is broker `lost`, and says whether it did: a caller
/// that found `lost` gone must not undo a newer coordinator another caller found meanwhile.
fn forget_coordinator<C>(known: &mut Option<(i32, C)>, lost: i32) -> bool {
    known.take_if(|(id, _)| *id == lost).is_some()
}

/// What the driver task owns and the calls to it: made with the driver ([`GroupDriver::new`])
/// and moved into the driver task, the one place the member and the coordinator are kept.
pub(crate) struct MemberOwner {
    pub owned: Owned,
    pub calls: mpsc::UnboundedReceiver<MemberCall>,
}

impl MemberOwner {
    /// Runs a call sent to the task ([`GroupDriver::with_member`], [`GroupDriver::coordinator`]),
    /// counted and published as [`MemberOwner::run`] is.
    pub fn serve(&mut self, driver: &GroupDriver, call: MemberCall) {
        driver.membership_accesses.fetch_add(1, Ordering::AcqRel);
        call(&mut self.owned);
        let member = &self.owned.member;
        driver
            .view
            .send_if_modified(|view| member.refresh_view(view));
    }

    /// Runs `change` on the member (a call sent to the task, or the task's own step), then
    /// counts it and publishes what it changed, so the view never lags a change once its
    /// caller has the answer.
    pub fn run<R>(
        &mut self,
        driver: &GroupDriver,
        change: impl FnOnce(&mut GroupMember) -> R,
    ) -> R {
        driver.membership_accesses.fetch_add(1, Ordering::AcqRel);
        let r = change(&mut self.owned.member);
        let member = &self.owned.member;
        driver
            .view
            .send_if_modified(|view| member.refresh_view(view));
        r
    }
}

impl GroupDriver {
    /// A group member's driver; `membership_accesses` counts every access to its state
    /// ([`GroupDriver::membership`]).
    pub fn new(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        group_protocol: Arc<dyn GroupProtocol>,
        on_change: Arc<dyn Fn() + Send + Sync>,
        membership_accesses: Arc<AtomicU64>,
    ) -> Result<(Arc<GroupDriver>, MemberOwner)> {
        GroupDriver::build(
            cluster,
            config,
            group_protocol,
            on_change,
            false,
            membership_accesses,
        )
    }

    /// A committer for a consumer with manually assigned partitions (no membership).
    pub fn simple_committer(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        group_protocol: Arc<dyn GroupProtocol>,
    ) -> Result<(Arc<GroupDriver>, MemberOwner)> {
        // Its member never joins: a simple consumer commits outside any generation. The owner
        // serves the coordinator's calls (`driver_task::serve`).
        GroupDriver::build(
            cluster,
            config,
            group_protocol,
            Arc::new(|| {}),
            true,
            Default::default(),
        )
    }

    fn build(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        group_protocol: Arc<dyn GroupProtocol>,
        on_change: Arc<dyn Fn() + Send + Sync>,
        simple: bool,
        membership_accesses: Arc<AtomicU64>,
    ) -> Result<(Arc<GroupDriver>, MemberOwner)> {
        let group_id = config
            .group_id
            .clone()
            .ok_or_else(|| Error::IllegalState("subscribing needs group.id".into()))?;
        let assignors = config
            .partition_assignment_strategy
            .iter()
            .map(|n| {
                assignor_by_name(n).ok_or_else(|| {
                    Error::config(
                        "partition.assignment.strategy",
                        format!("unknown assignor `{n}`"),
                    )
                })
            })
            .collect::<Result<Vec<_>>>()?;
        let protocol = match config.group_protocol {
            // KIP-848: the coordinator's assignments are incremental per member.
            GroupProtocolKind::Consumer => RebalanceProtocol::Cooperative,
            GroupProtocolKind::Classic => {
                rebalance_protocol(&assignors.iter().map(|a| a.protocol()).collect::<Vec<_>>())
            }
        };
        let member = GroupMember::new(
            MemberSettings {
                group_id: group_id.clone(),
                protocol,
                retry_backoff: config.common.retry_backoff,
                exclude_internal_topics: config.exclude_internal_topics,
                explicit_readiness: config.learner_explicit_readiness,
            },
            config.group_instance_id.clone(),
            Retry::new(cluster.backoff()),
            Instant::now(),
        );
        let created = Instant::now();
        let (view, _) = tokio::sync::watch::channel(member.view());
        let (mailbox, calls) = mpsc::unbounded_channel();
        let (coordinator, coordinator_view) = tokio::sync::watch::channel(None);
        let driver = Arc::new(GroupDriver {
            group_id,
            protocol,
            view,
            mailbox,
            membership_accesses,
            cluster,
            config,
            coordinator: coordinator_view,
            last_poll: SharedInstant::new(created, Some(created)),
            last_heartbeat_answer: SharedInstant::new(created, None),
            assignors,
            group_protocol,
            closed: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            on_change,
            follow_up_since: SharedInstant::new(created, None),
            simple,
            async_commits: Mutex::new(AsyncCommits::default()),
            async_idle: tokio::sync::Notify::new(),
            leader_epochs: std::sync::OnceLock::new(),
            instruments: std::sync::OnceLock::new(),
        });
        let owned = Owned {
            member,
            coordinator,
        };
        Ok((driver, MemberOwner { owned, calls }))
    }

    /// Runs `call` on the member in its owner, the driver task, and gives its answer; None
    /// once the task has ended (the member closed), or for a simple committer, which has no
    /// member. Calls run one at a time in the order sent, each followed by a refresh of the
    /// [`MemberView`]. Never await this while holding a lock the driver task takes (the
    /// consumer's group lock): the task would wait for the caller that waits for it.
    pub async fn with_member<R: Send + 'static>(
        &self,
        call: impl FnOnce(&mut GroupMember) -> R + Send + 'static,
    ) -> Option<R> {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let sent = self.mailbox.send(Box::new(move |o: &mut Owned| {
            let _ = answer.send(call(&mut o.member));
        }));
        if sent.is_err() {
            return None;
        }
        answered.await.ok()
    }

    /// Sends `call` to the member without waiting for it (calls that answer nothing, from
    /// code that may not wait: the application's non-async calls on the async front). Later
    /// calls run after it; the view shows it once it ran.
    pub fn tell_member(&self, call: impl FnOnce(&mut GroupMember) + Send + 'static) {
        let _ = self
            .mailbox
            .send(Box::new(move |o: &mut Owned| call(&mut o.member)));
    }

    /// `read` of the member's [`MemberView`], as the member's owner last published it.
    /// `read` must not wait for the member: the view stays read-locked while it runs.
    pub fn read_view<R>(&self, read: impl FnOnce(&MemberView) -> R) -> R {
        read(&self.view.borrow())
    }

    /// When `max.poll.interval.ms`'s timer was last restarted (the last `poll()`, or the
    /// member's creation by `subscribe()`).
    /// When the coordinator last answered a heartbeat (`None` before the first answer).
    pub(crate) fn last_heartbeat_answer(&self) -> Option<Instant> {
        self.last_heartbeat_answer.get()
    }

    pub(crate) fn last_poll(&self) -> Option<Instant> {
        self.last_poll.get()
    }

    /// Hands what the group protocol heard to the member ([`Membership::on_answer`]): the one
    /// way a protocol's answers change the member's state. A member gone (closed) answers
    /// that the generation was outlived.
    pub(crate) async fn report(&self, answer: ProtocolAnswer) -> Reply {
        let Some((reply, wakes)) = self.with_member(move |m| m.on_answer(answer)).await else {
            return Reply::Outlived;
        };
        if wakes {
            (self.on_change)();
        }
        reply
    }

    /// The member id and generation a join request goes out with, as the member says
    /// ([`ProtocolAnswer::JoinSending`]).
    pub(crate) async fn join_sending(&self) -> Generation {
        match self.report(ProtocolAnswer::JoinSending).await {
            Reply::Generation(g) => g,
            Reply::Next(_) | Reply::Outlived => Generation::none(),
        }
    }

    /// Called by every `poll()`: restarts the max.poll.interval.ms timer.
    pub fn touch_poll(&self) {
        self.last_poll.set(Some(Instant::now()));
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether the member closed (left, or the consumer unsubscribed or closed).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// From now on the member's joins say it is leaving (scale-down with learner-sticky).
    pub fn set_leaving(&self) {
        self.leaving.store(true, Ordering::Release);
    }

    pub fn is_leaving(&self) -> bool {
        self.leaving.load(Ordering::Acquire)
    }

    /// This member as the group requests name it (`protocol::group`).
    pub(crate) fn member<'a>(&'a self, member_id: &'a str) -> Member<'a> {
        Member {
            group_id: &self.group_id,
            member_id,
            instance_id: self.config.group_instance_id.as_deref(),
        }
    }

    /// The connection to the group coordinator: the one the driver task keeps while it is
    /// alive, else found now (FindCoordinator) and handed to the task, which keeps it for
    /// every later caller.
    pub(crate) async fn coordinator(&self, deadline: Deadline) -> Result<Arc<Connection>> {
        Ok(self.coordinator_and_id(deadline).await?.1)
    }

    async fn coordinator_and_id(&self, deadline: Deadline) -> Result<Coordinator> {
        let known = self.coordinator.borrow().clone();
        if let Some((id, conn)) = known.filter(|(_, conn)| conn.is_alive()) {
            return Ok((id, conn));
        }
        let (id, conn) = self
            .cluster
            .find_coordinator(&self.group_id, deadline)
            .await?;
        tracing::debug!(group = %self.group_id, coordinator = id, "found the group coordinator");
        let found = (id, conn.clone());
        let _ = self
            .mailbox
            .send(Box::new(move |o: &mut Owned| o.coordinator_found(found)));
        Ok((id, conn))
    }

    /// The connection JoinGroup and SyncGroup go on ([`Lane::Join`]), to the same coordinator:
    /// the broker holds those until the rebalance gets that far, and the member's heartbeats,
    /// commits and LeaveGroup must not wait behind them.
    pub(crate) async fn join_connection(&self, deadline: Deadline) -> Result<Arc<Connection>> {
        let (id, coordinator) = self.coordinator_and_id(deadline).await?;
        self.cluster
            .connect_at(id, Lane::Join, coordinator.addr().to_string(), deadline)
            .await
    }

    /// The coordinator answered that it is not (or failed): its connections close now, and the
    /// driver task forgets it, so the next caller looks for it again.
    pub(crate) fn coordinator_unknown(&self, why: &str) {
        let Some(id) = self.coordinator_id() else {
            return;
        };
        tracing::info!(group = %self.group_id, coordinator = id, reason = why, "marking the coordinator unknown");
        self.cluster.disconnect(id, Lane::Coordinator);
        self.cluster.disconnect(id, Lane::Join);
        let _ = self
            .mailbox
            .send(Box::new(move |o: &mut Owned| o.coordinator_lost(id)));
    }

    /// The coordinator's broker id, while one is known.
    pub(crate) fn coordinator_id(&self) -> Option<i32> {
        self.coordinator.borrow().as_ref().map(|(id, _)| *id)
    }

    /// The last assignment said whether a follow-up rebalance is coming (learner-sticky): while
    /// one is, the heartbeat goes often, so this member notices the rebalance in tens of
    /// milliseconds rather than up to heartbeat.interval.ms.
    pub(crate) fn expect_follow_up(&self, follow_up: bool) {
        self.follow_up_since.set(follow_up.then(Instant::now));
    }

    pub(crate) fn assignor(&self, name: &str) -> Option<&dyn Assignor> {
        self.assignors
            .iter()
            .find(|a| a.name() == name)
            .map(|a| a.as_ref())
    }

    /// How this member rebalances: decided before joining from the assignors it offers
    /// (cooperative only when all of them are), never from the group's last choice, which says
    /// nothing about what the group will choose in the join to come.
    pub fn rebalance_protocol(&self) -> RebalanceProtocol {
        self.protocol
    }

    // ---- the background heartbeat (KIP-62) ----

    /// Runs until the consumer closes: heartbeats while the member is in a generation, and
    /// leaves the group when `poll()` has not been called for `max.poll.interval.ms`. What each
    /// tick does is [`heartbeat_step`]'s decision; this loop only carries it out.
    pub async fn heartbeat_loop(self: Arc<Self>) {
        let mut retry = Retry::new(self.cluster.backoff());
        let mut clock = HeartbeatClock::new(Instant::now());
        let mut liveness = Liveness {
            heartbeat_interval: self.config.heartbeat_interval,
            session_timeout: self.config.session_timeout,
            max_poll_interval: self.config.max_poll_interval,
        };
        let tick = Duration::from_millis(50).min(self.config.heartbeat_interval);
        while !self.closed.load(Ordering::Acquire) {
            // KIP-848: the coordinator says how often.
            liveness.heartbeat_interval = interval_in_force(
                self.group_protocol.heartbeat_interval(),
                self.config.heartbeat_interval,
            );
            let hurry = Hurry {
                follow_up_since: self.follow_up_since.get(),
                epoch_moved_at: self.group_protocol.epoch_moved_at(),
            };
            // Ticks of at most a quarter of the interval in force (10 ms while a follow-up
            // rebalance is expected or the epoch just moved), so a heartbeat is late by a
            // fraction of its interval at most.
            let interval = hurry.interval(liveness.heartbeat_interval, Instant::now());
            tokio::time::sleep(tick.min(interval / 4)).await;
            // What the heartbeat sends is read here, with the rest, off the member's view (not
            // its lock), so the protocol reads nothing off the member while it sends.
            let (enabled, input) = self.read_view(|v| (v.heartbeats_enabled, v.heartbeat_input()));
            let generation = &input.generation;
            // Always set (from the driver's creation on).
            let last_poll = self.last_poll.get().unwrap_or_else(Instant::now);
            let now = Instant::now();
            match heartbeat_step(enabled, last_poll, &clock, hurry, &liveness, now) {
                HeartbeatStep::NotInGeneration => {
                    clock = HeartbeatClock::new(now);
                    continue;
                }
                HeartbeatStep::PollTimeoutExpired => {
                    let send_leave = self
                        .with_member(|m| m.membership.poll_timeout_expired())
                        .await
                        .unwrap_or(false);
                    tracing::warn!(
                        group = %self.group_id,
                        member = %generation.member_id,
                        "consumer poll timeout has expired: poll() was not called for {} ms (max.poll.interval.ms); {}",
                        now.saturating_duration_since(last_poll).as_millis(),
                        poll_timeout_consequence(send_leave)
                    );
                    if send_leave {
                        self.leave(
                            &generation.member_id,
                            "consumer poll timeout has expired",
                            Deadline::after(self.config.common.request_timeout),
                        )
                        .await;
                    }
                    (self.on_change)();
                    continue;
                }
                HeartbeatStep::Tick { session_lost, send } => {
                    if session_lost {
                        self.cluster.raise(Error::Timeout(format!(
                            "group {}: the group coordinator answered no heartbeat for \
                             session.timeout.ms ({} ms); looking for it again",
                            self.group_id,
                            liveness.session_timeout.as_millis()
                        )));
                        self.coordinator_unknown(
                            "session timed out without a successful heartbeat",
                        );
                        clock.last_ok = now;
                    }
                    if !send {
                        continue;
                    }
                }
            }
            clock.last_sent = Some(now);
            let deadline = Deadline::after(
                self.config
                    .common
                    .request_timeout
                    .min(self.config.session_timeout),
            );
            let answer = self
                .group_protocol
                .heartbeat(self.as_ref(), &input, deadline)
                .await;
            let outcome = match answer {
                Ok(code) => {
                    self.last_heartbeat_answer.set(Some(Instant::now()));
                    let protocol = self.group_protocol.clone();
                    let sent = generation.clone();
                    let next = self
                        .with_member(move |m| {
                            protocol.heartbeat_answered(&mut m.membership, &sent, code)
                        })
                        .await
                        .unwrap_or(Next::Continue);
                    let outcome = match next {
                        Next::Continue | Next::JoinAgain => {
                            retry.succeeded();
                            clock.last_ok = Instant::now();
                            HeartbeatAnswer::Ok
                        }
                        Next::RetryAfterBackoff => HeartbeatAnswer::Retry(retry.failed()),
                        Next::RediscoverCoordinator => {
                            self.coordinator_unknown("Heartbeat answered NOT_COORDINATOR");
                            HeartbeatAnswer::Retry(retry.failed())
                        }
                        Next::Fatal(e) if e.is_fatal() => {
                            // `on_heartbeat` made it the member's fatal error: the next poll()
                            // reports it, and nothing more is sent.
                            tracing::error!(group = %self.group_id, error = %e, "heartbeat answered an error the member cannot go on from; no more heartbeats");
                            HeartbeatAnswer::Fatal
                        }
                        Next::Fatal(e) => {
                            // No rule for this error: tell the user once, and try again after
                            // a backoff, as the Java client does.
                            tracing::warn!(group = %self.group_id, error = %e, "heartbeat failed");
                            self.tell_member(move |m| m.membership.report_once(e));
                            HeartbeatAnswer::Retry(retry.failed())
                        }
                    };
                    if code != codes::NONE {
                        (self.on_change)();
                    }
                    outcome
                }
                Err(e) => {
                    tracing::debug!(group = %self.group_id, error = %e, "heartbeat failed");
                    self.coordinator_unknown("heartbeat failed");
                    HeartbeatAnswer::Retry(retry.failed())
                }
            };
            clock.last_answer = Some((Instant::now(), outcome));
        }
    }

    // ---- joining ----

    /// JoinGroup until it succeeds, the leader's assignment, SyncGroup. Runs as a task; `poll()`
    /// collects the outcome. Retriable failures retry with backoff here; a fatal one ends it.
    /// A follower also looks at the cluster right after joining, to stand in for the metadata
    /// the leader assigned from (see [`MetadataSnapshot::after_join`]).
    ///
    /// Runs in a `lagless.rebalance` span (the group, the protocol, why; once joined, the
    /// generation and how many partitions were assigned, or the error).
    pub async fn join(self: Arc<Self>, input: JoinInput) -> Result<JoinOutcome> {
        let span = tracing::info_span!(
            "lagless.rebalance",
            group = %self.group_id,
            group_protocol = self.group_protocol.name(),
            reason = %input.reason,
            generation = tracing::field::Empty,
            assigned_partitions = tracing::field::Empty,
            error = tracing::field::Empty,
        );
        let joined = self
            .clone()
            .join_and_look(input)
            .instrument(span.clone())
            .await;
        match &joined {
            Ok(outcome) => {
                span.record("generation", outcome.generation.generation_id);
                span.record("assigned_partitions", outcome.assigned.len());
            }
            Err(e) => {
                span.record("error", tracing::field::display(e));
            }
        }
        joined
    }

    async fn join_and_look(self: Arc<Self>, input: JoinInput) -> Result<JoinOutcome> {
        let topics = input.topics.clone();
        let mut outcome = self.clone().join_until_done(input).await?;
        if outcome.assigned_from.is_none() {
            let wait = self.config.common.retry_backoff_max;
            outcome.assigned_from =
                MetadataSnapshot::after_join(&self.cluster, &topics, wait).await;
        }
        Ok(outcome)
    }

    async fn join_until_done(self: Arc<Self>, input: JoinInput) -> Result<JoinOutcome> {
        // Not `backoff::retry_until`: a join has no deadline of its own (it runs until it ends,
        // turns fatal or the member closes, as the Java client's), and some answers ask to join
        // again at once (a new member id, MEMBER_ID_REQUIRED) rather than after a backoff.
        let mut retry = Retry::new(self.cluster.backoff());
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            match self.group_protocol.join_once(self.as_ref(), &input).await {
                JoinAttempt::Joined(outcome) => {
                    // A follow-up rebalance is coming (partitions were left out to move):
                    // heartbeat often until it starts, so this member notices it in tens of
                    // milliseconds rather than up to heartbeat.interval.ms.
                    self.expect_follow_up(outcome.follow_up);
                    return Ok(*outcome);
                }
                JoinAttempt::Again => continue,
                JoinAttempt::Backoff(e) => {
                    let wait = retry.failed();
                    tracing::debug!(group = %self.group_id, group_protocol = self.group_protocol.name(), error = %e, "join failed; retrying in {:?}", wait);
                    tokio::time::sleep(wait).await;
                }
                JoinAttempt::Fatal(e) => return Err(e),
            }
        }
    }

    // ---- leaving and committing ----

    /// LeaveGroup, sent once, without retry (as the Java client).
    pub async fn leave(&self, member_id: &str, reason: &str, deadline: Deadline) {
        if member_id.is_empty() {
            return;
        }
        let result = self
            .group_protocol
            .leave(self, member_id, reason, deadline)
            .await;
        match result {
            Ok(codes::NONE) => {
                tracing::info!(group = %self.group_id, member = member_id, reason, "left the group")
            }
            Ok(code) => {
                tracing::warn!(group = %self.group_id, error = crate::error::kafka_error_name(code), "LeaveGroup failed")
            }
            Err(e) => tracing::warn!(group = %self.group_id, error = %e, "LeaveGroup failed"),
        }
    }

    /// Leaves the group now (close, unsubscribe): dynamic members send LeaveGroup; static ones
    /// stay until the session expires, so a restart causes no rebalance, unless they prepared
    /// to leave (scale-down).
    pub async fn leave_group(&self, reason: &str, deadline: Deadline) {
        let is_leaving = self.is_leaving();
        let (leaving, staying) = self
            .with_member(move |m| {
                let m = &mut m.membership;
                let in_group = (m.generation().generation_id >= 0)
                    .then(|| m.generation().clone())
                    .filter(|g| !g.member_id.is_empty());
                (m.leave(is_leaving), in_group)
            })
            .await
            .unwrap_or((None, None));
        match (leaving, staying) {
            (Some(member_id), _) => self.leave(&member_id, reason, deadline).await,
            // A static member that stays: the protocol may say so (KIP-848's epoch -2 keeps its
            // assignment for its restart); the classic protocol sends nothing.
            (None, Some(generation)) => {
                if let Err(e) = self
                    .group_protocol
                    .leave_for_restart(self, &generation, deadline)
                    .await
                {
                    tracing::debug!(group = %self.group_id, error = %e, "telling the coordinator a static member will be back failed");
                }
            }
            (None, None) => {}
        }
    }
}

/// The protocols' view of the driver ([`ProtocolContext`]): each method is the driver's own.
impl ProtocolContext for GroupDriver {
    fn group_id(&self) -> &str {
        &self.group_id
    }

    fn config(&self) -> &ConsumerConfig {
        &self.config
    }

    fn cluster(&self) -> &Arc<Cluster> {
        &self.cluster
    }

    fn is_leaving(&self) -> bool {
        GroupDriver::is_leaving(self)
    }

    fn member<'a>(&'a self, member_id: &'a str) -> Member<'a> {
        GroupDriver::member(self, member_id)
    }

    fn coordinator(&self, deadline: Deadline) -> ProtocolFuture<'_, Result<Arc<Connection>>> {
        Box::pin(GroupDriver::coordinator(self, deadline))
    }

    fn join_connection(&self, deadline: Deadline) -> ProtocolFuture<'_, Result<Arc<Connection>>> {
        Box::pin(GroupDriver::join_connection(self, deadline))
    }

    fn coordinator_unknown(&self, why: &str) {
        GroupDriver::coordinator_unknown(self, why)
    }

    fn coordinator_id(&self) -> Option<i32> {
        GroupDriver::coordinator_id(self)
    }

    fn assignors(&self) -> &[Box<dyn Assignor>] {
        &self.assignors
    }

    fn assignor(&self, name: &str) -> Option<&dyn Assignor> {
        GroupDriver::assignor(self, name)
    }

    fn report(&self, answer: ProtocolAnswer) -> ProtocolFuture<'_, Reply> {
        Box::pin(GroupDriver::report(self, answer))
    }

    fn join_sending(&self) -> ProtocolFuture<'_, Generation> {
        Box::pin(GroupDriver::join_sending(self))
    }
}

#[cfg(test)]
mod tests {
    use super::forget_coordinator;

    #[test]
    fn a_lost_coordinator_is_forgotten_only_while_it_is_the_known_one() {
        // (known, lost) -> (forgotten, known after)
        let table: &[(Option<i32>, i32, bool, Option<i32>)] = &[
            (Some(1), 1, true, None),
            // Another was found since the caller saw broker 1 fail: kept.
            (Some(2), 1, false, Some(2)),
            (None, 1, false, None),
        ];
        for &(known, lost, forgotten, after) in table {
            let mut c = known.map(|id| (id, "connection"));
            assert_eq!(
                forget_coordinator(&mut c, lost),
                forgotten,
                "{known:?} lost {lost}"
            );
            assert_eq!(c.map(|(id, _)| id), after, "{known:?} lost {lost}");
        }
    }
}
