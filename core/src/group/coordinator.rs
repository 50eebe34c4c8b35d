//! The group driver: the I/O around [`Membership`]. It finds the coordinator, runs the join
//! protocol (JoinGroup, the leader's assignment, SyncGroup) as a task that `poll()` starts, owns
//! the background heartbeat (KIP-62), enforces `max.poll.interval.ms`, commits offsets and
//! leaves the group.
//!
//! The driver never starts a rejoin on its own: it only records that one is needed; `poll()`
//! on the caller's thread starts it.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backoff::{Deadline, Retry};
use crate::cluster::{Cluster, Lane};
use crate::config::ConsumerConfig;
use crate::error::{codes, Error, Result};
use crate::group::assignor::{
    assignor_by_name, Assignor, LearnerIntent, MemberSubscription, RebalanceProtocol,
};
use crate::group::heartbeat::{
    heartbeat_step, HeartbeatAnswer, HeartbeatClock, HeartbeatStep, Liveness, FOLLOW_UP_HEARTBEAT,
    FOLLOW_UP_WINDOW,
};
use crate::group::member::{poll_timeout_consequence, Membership, Next};
use crate::group::metadata_snapshot::MetadataSnapshot;
use crate::group::rebalance::rebalance_protocol;
use crate::group::step::{JoinInput, JoinOutcome};
use crate::net::Connection;
use crate::offsets::{AsyncCommitDone, AsyncCommits};
use crate::protocol;
use crate::protocol::consumer_protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, Assignment,
    LearnerAssignmentData, Subscription, TopicPartitions, HIGHEST_VERSION,
};
use crate::protocol::group::{Join, Member};
use crate::protocol::group_by_topic;
use crate::protocol::msg::describe_configs_request::DescribeConfigsResource;
use crate::protocol::msg::{
    DescribeConfigsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, StrBytes,
    SyncGroupRequest,
};
use crate::sync::Unpoisoned;
use crate::types::TopicPartition;

/// JoinGroup may wait for the whole rebalance: Java allows the rebalance timeout plus this.
const JOIN_GROUP_TIMEOUT_LAPSE: Duration = Duration::from_secs(5);

pub(crate) struct GroupDriver {
    pub group_id: String,
    pub cluster: Arc<Cluster>,
    pub config: ConsumerConfig,
    membership: Mutex<Membership>,
    /// Counts the accesses to `membership`: group steps that found nothing to do stand only
    /// while it is unchanged (`consumer::group::IdleSteps`).
    membership_accesses: Arc<AtomicU64>,
    coordinator: Mutex<Option<(i32, Arc<Connection>)>>,
    last_poll: Mutex<Instant>,
    pub assignors: Vec<Box<dyn Assignor>>,
    /// How this member rebalances, decided once from `assignors` before any join.
    protocol: RebalanceProtocol,
    closed: AtomicBool,
    /// The member is leaving gracefully (`Consumer::prepare_to_leave`): its joins say so, and
    /// a learner-sticky leader hands its partitions to the members that stay.
    leaving: AtomicBool,
    /// Woken when the membership changes in a way `poll()` must see.
    pub on_change: Arc<dyn Fn() + Send + Sync>,
    /// Set when the last assignment said a follow-up rebalance is coming (learner-sticky).
    follow_up_since: Mutex<Option<Instant>>,
    /// A committer for manually assigned partitions: it commits outside any generation.
    pub(crate) simple: bool,
    /// Asynchronous commits: one in flight, the others merged (see [`AsyncCommits`]).
    pub(crate) async_commits: Mutex<AsyncCommits<AsyncCommitDone>>,
    /// Woken when the asynchronous commits go idle (a synchronous commit waits for it).
    pub(crate) async_idle: tokio::sync::Notify,
    /// KIP-320: the leader epoch each committed offset is sent with, from the consumer's fetch
    /// state; set once the consumer has the driver (unset: -1, no epoch).
    pub(crate) leader_epochs: std::sync::OnceLock<LeaderEpochs>,
}

/// The leader epoch of `offset` of a partition, for a commit (-1: unknown).
pub(crate) type LeaderEpochs = Arc<dyn Fn(&TopicPartition, i64) -> i32 + Send + Sync>;

impl GroupDriver {
    /// A group member's driver; `membership_accesses` counts every access to its state
    /// ([`GroupDriver::membership`]).
    pub fn new(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        on_change: Arc<dyn Fn() + Send + Sync>,
        membership_accesses: Arc<AtomicU64>,
    ) -> Result<Arc<GroupDriver>> {
        GroupDriver::build(cluster, config, on_change, false, membership_accesses)
    }

    /// A committer for a consumer with manually assigned partitions (no membership).
    pub fn simple_committer(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
    ) -> Result<Arc<GroupDriver>> {
        GroupDriver::build(cluster, config, Arc::new(|| {}), true, Default::default())
    }

    fn build(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        on_change: Arc<dyn Fn() + Send + Sync>,
        simple: bool,
        membership_accesses: Arc<AtomicU64>,
    ) -> Result<Arc<GroupDriver>> {
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
        let protocol =
            rebalance_protocol(&assignors.iter().map(|a| a.protocol()).collect::<Vec<_>>());
        Ok(Arc::new(GroupDriver {
            group_id,
            protocol,
            membership: Mutex::new(Membership::new(config.group_instance_id.clone())),
            membership_accesses,
            cluster,
            config,
            coordinator: Mutex::new(None),
            last_poll: Mutex::new(Instant::now()),
            assignors,
            closed: AtomicBool::new(false),
            leaving: AtomicBool::new(false),
            on_change,
            follow_up_since: Mutex::new(None),
            simple,
            async_commits: Mutex::new(AsyncCommits::default()),
            async_idle: tokio::sync::Notify::new(),
            leader_epochs: std::sync::OnceLock::new(),
        }))
    }

    /// The member's state. Every access counts (`membership_accesses`), so a caller that read
    /// the count after its own steps sees by its change any access begun since (one under way
    /// as it read is missed for at most `consumer::group::IDLE_STEPS_STAND_FOR`).
    pub fn membership(&self) -> MutexGuard<'_, Membership> {
        self.membership_accesses.fetch_add(1, Ordering::AcqRel);
        self.membership.lock().unpoisoned()
    }

    /// Called by every `poll()`: restarts the max.poll.interval.ms timer.
    pub fn touch_poll(&self) {
        *self.last_poll.lock().unpoisoned() = Instant::now();
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

    pub(crate) async fn coordinator(&self, deadline: Deadline) -> Result<Arc<Connection>> {
        {
            let c = self.coordinator.lock().unpoisoned();
            if let Some((_, conn)) = c.as_ref() {
                if conn.is_alive() {
                    return Ok(conn.clone());
                }
            }
        }
        let (id, conn) = self
            .cluster
            .find_coordinator(&self.group_id, deadline)
            .await?;
        tracing::debug!(group = %self.group_id, coordinator = id, "found the group coordinator");
        *self.coordinator.lock().unpoisoned() = Some((id, conn.clone()));
        Ok(conn)
    }

    /// The connection JoinGroup and SyncGroup go on ([`Lane::Join`]), to the same coordinator:
    /// the broker holds those until the rebalance gets that far, and the member's heartbeats,
    /// commits and LeaveGroup must not wait behind them.
    async fn join_connection(&self, deadline: Deadline) -> Result<Arc<Connection>> {
        let coordinator = self.coordinator(deadline).await?;
        let id = self
            .coordinator
            .lock()
            .unpoisoned()
            .as_ref()
            .map(|(id, _)| *id)
            .ok_or_else(|| Error::Transport("the group coordinator was lost".into()))?;
        self.cluster
            .connect_at(id, Lane::Join, coordinator.addr().to_string(), deadline)
            .await
    }

    pub(crate) fn coordinator_unknown(&self, why: &str) {
        if let Some((id, _)) = self.coordinator.lock().unpoisoned().take() {
            tracing::info!(group = %self.group_id, coordinator = id, reason = why, "marking the coordinator unknown");
            self.cluster.disconnect(id, Lane::Coordinator);
            self.cluster.disconnect(id, Lane::Join);
        }
    }

    fn assignor(&self, name: &str) -> Option<&dyn Assignor> {
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
        let liveness = Liveness {
            heartbeat_interval: self.config.heartbeat_interval,
            session_timeout: self.config.session_timeout,
            max_poll_interval: self.config.max_poll_interval,
        };
        let tick = Duration::from_millis(50).min(self.config.heartbeat_interval);
        while !self.closed.load(Ordering::Acquire) {
            // While a follow-up rebalance is expected the heartbeats are 40 ms apart: ticks of
            // half that, so one is not late by a whole tick.
            let follow_up = self
                .follow_up_since
                .lock()
                .unpoisoned()
                .is_some_and(|since| since.elapsed() < FOLLOW_UP_WINDOW);
            tokio::time::sleep(if follow_up {
                tick.min(FOLLOW_UP_HEARTBEAT / 2)
            } else {
                tick
            })
            .await;
            let (enabled, generation) = {
                let m = self.membership();
                (m.heartbeats_enabled(), m.generation().clone())
            };
            let last_poll = *self.last_poll.lock().unpoisoned();
            let follow_up_since = *self.follow_up_since.lock().unpoisoned();
            let now = Instant::now();
            match heartbeat_step(enabled, last_poll, &clock, follow_up_since, &liveness, now) {
                HeartbeatStep::NotInGeneration => {
                    clock = HeartbeatClock::new(now);
                    continue;
                }
                HeartbeatStep::PollTimeoutExpired => {
                    let send_leave = self.membership().poll_timeout_expired();
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
            let answer = async {
                let conn = self.coordinator(deadline).await?;
                let req = protocol::group::heartbeat(
                    self.member(&generation.member_id),
                    generation.generation_id,
                    conn.version::<HeartbeatRequest>()?,
                );
                conn.call_with_timeout(&req, deadline.remaining()).await
            }
            .await;
            let outcome = match answer {
                Ok(resp) => {
                    let next = self.membership().on_heartbeat(&generation, resp.error_code);
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
                            self.membership().report_once(e);
                            HeartbeatAnswer::Retry(retry.failed())
                        }
                    };
                    if resp.error_code != codes::NONE {
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
    pub async fn join(self: Arc<Self>, input: JoinInput) -> Result<JoinOutcome> {
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
        let rebalance_timeout = self.config.max_poll_interval;
        loop {
            if self.closed.load(Ordering::Acquire) {
                return Err(Error::Closed);
            }
            let step = self.join_once(&input, rebalance_timeout).await;
            match step {
                Ok(Some(outcome)) => return Ok(outcome),
                Ok(None) => continue, // JoinAgain at once
                Err(JoinErr::Backoff(e)) => {
                    let wait = retry.failed();
                    tracing::debug!(group = %self.group_id, error = %e, "join failed; retrying in {:?}", wait);
                    tokio::time::sleep(wait).await;
                }
                Err(JoinErr::Fatal(e)) => return Err(e),
            }
        }
    }

    async fn join_once(
        &self,
        input: &JoinInput,
        rebalance_timeout: Duration,
    ) -> std::result::Result<Option<JoinOutcome>, JoinErr> {
        let deadline = Deadline::after(self.config.common.default_api_timeout);
        let conn = self
            .join_connection(deadline)
            .await
            .map_err(JoinErr::classify)?;
        let (member_id, generation_id) = self.membership().join_sent();
        let v = conn.version::<JoinGroupRequest>().map_err(JoinErr::Fatal)?;
        if self.config.group_instance_id.is_some() && v < 5 {
            return Err(JoinErr::Fatal(Error::kafka(
                codes::UNSUPPORTED_VERSION,
                "the broker does not support static membership (group.instance.id needs JoinGroup v5)",
            )));
        }
        let protocols = self
            .assignors
            .iter()
            .map(|a| {
                let sub = Subscription {
                    topics: input.topics.clone(),
                    user_data: a.subscription_user_data(
                        generation_id,
                        &to_topic_partitions(&input.ready),
                        LearnerIntent {
                            leaving: self.leaving.load(Ordering::Acquire),
                            max_learning: self.config.learner_max_warmup_partitions,
                        },
                    ),
                    owned_partitions: to_topic_partitions(&input.owned),
                    generation_id,
                    rack_id: self.config.common.client_rack.clone(),
                };
                Ok((a.name(), encode_subscription(&sub, HIGHEST_VERSION)?))
            })
            .collect::<Result<Vec<_>>>()
            .map_err(JoinErr::Fatal)?;
        let req = protocol::group::join_group(
            self.member(&member_id),
            Join {
                session_timeout_ms: self.config.session_timeout.as_millis() as i32,
                rebalance_timeout_ms: rebalance_timeout.as_millis() as i32,
                protocols,
                reason: &input.reason,
            },
            v,
        );
        tracing::info!(group = %self.group_id, member = %member_id, reason = %input.reason, "joining the group");
        let timeout = self
            .config
            .common
            .request_timeout
            .max(rebalance_timeout + JOIN_GROUP_TIMEOUT_LAPSE);
        let resp = conn.call_with_timeout(&req, timeout).await.map_err(|e| {
            self.coordinator_unknown("JoinGroup failed");
            JoinErr::classify(e)
        })?;
        if resp.error_code != codes::NONE {
            if resp.error_code == codes::INVALID_SESSION_TIMEOUT {
                // Ask for the allowed range before the membership turns fatal: poll() reports
                // the fatal error as soon as it is set, and it should name the range.
                let range = self.session_timeout_range(&conn).await;
                let e = Error::kafka(
                    resp.error_code,
                    format!(
                        "session.timeout.ms={} is outside the range the broker allows: {range}",
                        self.config.session_timeout.as_millis()
                    ),
                );
                let mut m = self.membership();
                m.on_join_error(resp.error_code, resp.member_id.as_str());
                m.set_fatal(e.clone());
                return Err(JoinErr::Fatal(e));
            }
            let next = self
                .membership()
                .on_join_error(resp.error_code, resp.member_id.as_str());
            return self.follow(next, resp.error_code, "JoinGroup");
        }
        let protocol = resp.protocol_name.as_ref().map(|p| p.to_string());
        let my_id = resp.member_id.to_string();
        self.membership()
            .on_join_success(resp.generation_id, &my_id, protocol.clone());
        (self.on_change)();
        let protocol_name = protocol.clone().unwrap_or_default();
        let assignor = self.assignor(&protocol_name).ok_or_else(|| {
            JoinErr::Fatal(Error::Corrupt(format!(
                "the coordinator chose assignor `{protocol_name}`, which this member did not offer"
            )))
        })?;
        let (assignments, assigned_from) = if resp.leader == resp.member_id && !resp.skip_assignment
        {
            let members: Vec<MemberSubscription> = resp
                .members
                .iter()
                .map(|m| {
                    let subscription = decode_subscription(m.metadata.clone()).unwrap_or_else(|e| {
                        // A member whose metadata we cannot read gets nothing; the others go on.
                        tracing::error!(
                            group = %self.group_id,
                            member = %m.member_id.as_str(),
                            error = %e,
                            "malformed subscription from a group member; assigning it no partitions"
                        );
                        Subscription {
                            generation_id: -1,
                            ..Default::default()
                        }
                    });
                    MemberSubscription {
                        member_id: m.member_id.to_string(),
                        group_instance_id: m.group_instance_id.as_ref().map(|s| s.to_string()),
                        subscription,
                    }
                })
                .collect();
            let (plan, built_on) = self
                .leader_assign(assignor, &members, deadline)
                .await
                .map_err(JoinErr::classify)?;
            let assignments = plan
                .into_iter()
                .map(|(member, a)| Ok((member, encode_assignment(&a, HIGHEST_VERSION)?)))
                .collect::<Result<Vec<_>>>()
                .map_err(JoinErr::Fatal)?;
            (assignments, Some(built_on))
        } else {
            (Vec::new(), None)
        };
        let sv = conn.version::<SyncGroupRequest>().map_err(JoinErr::Fatal)?;
        let sync = protocol::group::sync_group(
            self.member(&my_id),
            resp.generation_id,
            protocol.as_deref(),
            assignments,
            sv,
        );
        let sresp = conn.call(&sync).await.map_err(|e| {
            self.coordinator_unknown("SyncGroup failed");
            JoinErr::classify(e)
        })?;
        if sresp.error_code != codes::NONE {
            let next = self.membership().on_sync_error(sresp.error_code);
            return self.follow(next, sresp.error_code, "SyncGroup");
        }
        let assignment = decode_assignment(sresp.assignment.clone()).map_err(|e| {
            JoinErr::Fatal(Error::Corrupt(format!(
                "the assignment from the group leader: {e}"
            )))
        })?;
        let Some(generation) = self.membership().on_sync_success_for(resp.generation_id) else {
            // The heartbeat reset the generation while SyncGroup was in flight.
            return Ok(None);
        };
        let assigned: BTreeSet<TopicPartition> = assignment
            .partitions
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .map(move |p| TopicPartition::new(tp.topic.clone(), *p))
            })
            .collect();
        tracing::info!(
            group = %self.group_id,
            generation = generation.generation_id,
            member = %generation.member_id,
            protocol = %protocol_name,
            partitions = assigned.len(),
            "joined the group"
        );
        let notes = assignor
            .read_assignment(assignment.user_data.as_ref())
            .unwrap_or_else(|e| {
                tracing::warn!(group = %self.group_id, error = %e, "malformed user data in the assignment; learning nothing from it");
                LearnerAssignmentData::default()
            });
        // A follow-up rebalance is coming (partitions were left out to move): heartbeat often
        // until it starts, so this member notices it in tens of milliseconds rather than up to
        // heartbeat.interval.ms, and the partitions in transit are without an owner that much
        // less.
        let follow_up = notes.follow_up;
        *self.follow_up_since.lock().unpoisoned() = follow_up.then(Instant::now);
        let learning: BTreeSet<TopicPartition> = notes
            .learning
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .map(move |p| TopicPartition::new(tp.topic.clone(), *p))
            })
            .filter(|tp| !assigned.contains(tp))
            .collect();
        Ok(Some(JoinOutcome {
            generation,
            assigned,
            learning,
            protocol: assignor.protocol(),
            assigned_from,
        }))
    }

    /// The broker's `group.min.session.timeout.ms`..`group.max.session.timeout.ms`, asked with
    /// DescribeConfigs, for the INVALID_SESSION_TIMEOUT error message.
    async fn session_timeout_range(&self, conn: &Connection) -> String {
        const MIN: &str = "group.min.session.timeout.ms";
        const MAX: &str = "group.max.session.timeout.ms";
        let coordinator = self.coordinator.lock().unpoisoned().as_ref().map(|c| c.0);
        let fallback = format!("{MIN}..{MAX} (6000..1800000 unless the broker changed them)");
        let Some(id) = coordinator else {
            return fallback;
        };
        let req = DescribeConfigsRequest::default().with_resources(vec![
            DescribeConfigsResource::default()
                .with_resource_type(4) // BROKER
                .with_resource_name(StrBytes::from_string(id.to_string()))
                .with_configuration_keys(Some(vec![
                    StrBytes::from_static_str(MIN),
                    StrBytes::from_static_str(MAX),
                ])),
        ]);
        let Ok(resp) = conn.call(&req).await else {
            return fallback;
        };
        let value = |name: &str| {
            resp.results
                .iter()
                .flat_map(|r| r.configs.iter())
                .find(|c| c.name.as_str() == name)
                .and_then(|c| c.value.as_ref().map(|v| v.to_string()))
        };
        match (value(MIN), value(MAX)) {
            (Some(lo), Some(hi)) => format!("{lo}..{hi} ms ({MIN}..{MAX} of broker {id})"),
            _ => fallback,
        }
    }

    fn follow(
        &self,
        next: Next,
        code: i16,
        what: &str,
    ) -> std::result::Result<Option<JoinOutcome>, JoinErr> {
        match next {
            Next::JoinAgain | Next::Continue => Ok(None),
            Next::RetryAfterBackoff => Err(JoinErr::Backoff(Error::kafka(code, what))),
            Next::RediscoverCoordinator => {
                self.coordinator_unknown(&format!(
                    "{what} answered {}",
                    crate::error::kafka_error_name(code)
                ));
                Err(JoinErr::Backoff(Error::kafka(code, what)))
            }
            Next::Fatal(e) => Err(JoinErr::Fatal(e)),
        }
    }

    /// The leader's assignment, and what it was computed from: a subscribed topic that does
    /// not exist (yet) gets no partitions now, and the snapshot makes the group rebalance once
    /// metadata shows it (see
    /// [`AssignmentBasis`](crate::group::metadata_snapshot::AssignmentBasis)).
    async fn leader_assign(
        &self,
        assignor: &dyn Assignor,
        members: &[MemberSubscription],
        deadline: Deadline,
    ) -> Result<(BTreeMap<String, Assignment>, MetadataSnapshot)> {
        let topics: BTreeSet<String> = members
            .iter()
            .flat_map(|m| m.subscription.topics.iter().cloned())
            .collect();
        self.cluster.add_interest(topics.iter());
        let meta = self
            .cluster
            .refresh(&topics.iter().cloned().collect::<Vec<_>>(), deadline)
            .await?;
        let assigned_from = MetadataSnapshot::assigned_from(&meta, &topics);
        let counts = assigned_from.partition_counts();
        for t in topics.iter().filter(|t| !counts.contains_key(*t)) {
            tracing::warn!(group = %self.group_id, topic = %t, "a subscribed topic does not exist (yet); its partitions are assigned once metadata shows it");
        }
        Ok((assignor.assign(&counts, members)?, assigned_from))
    }

    // ---- leaving and committing ----

    /// LeaveGroup, sent once, without retry (as the Java client).
    pub async fn leave(&self, member_id: &str, reason: &str, deadline: Deadline) {
        if member_id.is_empty() {
            return;
        }
        let result = async {
            let conn = self.coordinator(deadline).await?;
            let req = protocol::group::leave_group(
                self.member(member_id),
                reason,
                conn.version::<LeaveGroupRequest>()?,
            );
            conn.call_with_timeout(&req, deadline.remaining().max(Duration::from_millis(1)))
                .await
        }
        .await;
        match result {
            Ok(r) if r.error_code == codes::NONE => {
                tracing::info!(group = %self.group_id, member = member_id, reason, "left the group")
            }
            Ok(r) => {
                tracing::warn!(group = %self.group_id, error = crate::error::kafka_error_name(r.error_code), "LeaveGroup failed")
            }
            Err(e) => tracing::warn!(group = %self.group_id, error = %e, "LeaveGroup failed"),
        }
    }

    /// Leaves the group now (close, unsubscribe): dynamic members send LeaveGroup; static ones
    /// stay until the session expires, so a restart causes no rebalance, unless they prepared
    /// to leave (scale-down).
    pub async fn leave_group(&self, reason: &str, deadline: Deadline) {
        let member_id = self.membership().leave(self.is_leaving());
        if let Some(member_id) = member_id {
            self.leave(&member_id, reason, deadline).await;
        }
    }
}

enum JoinErr {
    Backoff(Error),
    Fatal(Error),
}

impl JoinErr {
    fn classify(e: Error) -> JoinErr {
        if e.is_retriable() {
            JoinErr::Backoff(e)
        } else {
            JoinErr::Fatal(e)
        }
    }
}

fn to_topic_partitions(set: &BTreeSet<TopicPartition>) -> Vec<TopicPartitions> {
    group_by_topic(set.iter().map(|tp| (tp.topic.as_str(), tp.partition)))
        .into_iter()
        .map(|(t, ps)| TopicPartitions::new(t, ps))
        .collect()
}
