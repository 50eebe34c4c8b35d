//! The group driver: the I/O around [`Membership`]. It finds the coordinator, runs the join
//! protocol (JoinGroup, the leader's assignment, SyncGroup) as a task that `poll()` starts, owns
//! the background heartbeat (KIP-62), enforces `max.poll.interval.ms`, commits offsets and
//! leaves the group.
//!
//! The driver never starts a rejoin on its own: it only records that one is needed; `poll()`
//! on the caller's thread starts it.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::backoff::{Deadline, Retry};
use crate::cluster::{Cluster, Lane};
use crate::config::ConsumerConfig;
use crate::error::{codes, Error, Result};
use crate::group::assignor::{
    assignor_by_name, Assignor, LearnerIntent, MemberSubscription, RebalanceProtocol,
};
use crate::group::member::{poll_timeout_consequence, Generation, MemberState, Membership, Next};
use crate::group::metadata_snapshot::MetadataSnapshot;
use crate::group::rebalance::rebalance_protocol;
use crate::net::Connection;
use crate::offsets::{AsyncCommits, CommitResults, MergedCommit, OffsetAndMetadata};
use crate::protocol::consumer_protocol::{
    decode_assignment, decode_learner_assignment_data, decode_subscription, encode_assignment,
    encode_subscription, Assignment, LearnerAssignmentData, Subscription, TopicPartitions,
    HIGHEST_VERSION,
};
use crate::protocol::msg::describe_configs_request::DescribeConfigsResource;
use crate::protocol::msg::join_group_request::JoinGroupRequestProtocol;
use crate::protocol::msg::leave_group_request::MemberIdentity;
use crate::protocol::msg::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::msg::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::msg::{
    DescribeConfigsRequest, GroupId, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest,
    OffsetCommitRequest, StrBytes, SyncGroupRequest, TopicName,
};
use crate::TopicPartition;

/// JoinGroup may wait for the whole rebalance: Java allows the rebalance timeout plus this.
const JOIN_GROUP_TIMEOUT_LAPSE: Duration = Duration::from_secs(5);

/// What a member sends when it joins.
#[derive(Debug, Clone)]
pub(crate) struct JoinInput {
    pub topics: Vec<String>,
    pub owned: BTreeSet<TopicPartition>,
    /// Learned partitions this member is ready to own (learner-sticky).
    pub ready: BTreeSet<TopicPartition>,
    pub reason: String,
}

/// What a completed join gives the caller's thread.
#[derive(Debug, Clone)]
pub(crate) struct JoinOutcome {
    /// The generation the join ended in: `poll()` applies the outcome only while the member is
    /// still in it.
    pub generation: Generation,
    pub assigned: BTreeSet<TopicPartition>,
    /// Partitions this member learns while their owners keep them (learner-sticky).
    pub learning: BTreeSet<TopicPartition>,
    /// The protocol of the assignor the group chose.
    pub protocol: RebalanceProtocol,
    /// What the assignment was computed from: set here when this member is the leader; for a
    /// follower, what the cluster shows right after the join stands in for it.
    pub assigned_from: Option<MetadataSnapshot>,
}

pub(crate) struct GroupDriver {
    pub group_id: String,
    pub cluster: Arc<Cluster>,
    pub config: ConsumerConfig,
    membership: Mutex<Membership>,
    coordinator: Mutex<Option<(i32, Arc<Connection>)>>,
    last_poll: Mutex<Instant>,
    pub assignors: Vec<Box<dyn Assignor>>,
    /// How this member rebalances, decided once from `assignors` before any join.
    protocol: RebalanceProtocol,
    closed: AtomicBool,
    /// Woken when the membership changes in a way `poll()` must see.
    pub on_change: Arc<dyn Fn() + Send + Sync>,
    /// Set when the last assignment said a follow-up rebalance is coming (learner-sticky).
    follow_up_since: Mutex<Option<Instant>>,
    /// A committer for manually assigned partitions: it commits outside any generation.
    simple: bool,
    /// Asynchronous commits: one in flight, the others merged (see [`AsyncCommits`]).
    async_commits: Mutex<AsyncCommits<AsyncCommitDone>>,
    /// Woken when the asynchronous commits go idle (a synchronous commit waits for it).
    async_idle: tokio::sync::Notify,
}

/// What an asynchronous commit calls with its result.
pub(crate) type AsyncCommitDone = Box<dyn FnOnce(Result<CommitResults>) + Send>;

/// The shortest wait for one OffsetCommit attempt, however little of the caller's deadline is
/// left: an attempt given a millisecond only times out while the broker still applies it.
const MIN_COMMIT_ATTEMPT: Duration = Duration::from_millis(100);

/// How the last Heartbeat went, as far as scheduling the next one goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeartbeatAnswer {
    /// Answered: the next one is due an interval after this one was sent.
    Ok,
    /// Failed (no answer, a retriable or unexpected error): the next one is due this long after
    /// the answer.
    Retry(Duration),
    /// Answered with an error the member cannot go on from (fenced, not authorized): none is.
    Fatal,
}

/// When the next heartbeat of a member in a generation is due (`None`: never again), from when
/// the last one was sent and how and when it was answered (both `None` when the member has not
/// heartbeated in this generation yet). As the Java client, an answered heartbeat's interval
/// runs from when it was sent; a failed one is retried after its backoff from the answer.
pub(crate) fn next_heartbeat(
    interval: Duration,
    last_sent: Option<Instant>,
    last_answer: Option<(Instant, HeartbeatAnswer)>,
    now: Instant,
) -> Option<Instant> {
    match (last_sent, last_answer) {
        (_, Some((_, HeartbeatAnswer::Fatal))) => None,
        (Some(sent), Some((_, HeartbeatAnswer::Ok))) => Some(sent + interval),
        (_, Some((at, HeartbeatAnswer::Retry(wait)))) => Some(at + wait),
        _ => Some(now),
    }
}

/// How often a member heartbeats while it expects a follow-up rebalance.
const FOLLOW_UP_HEARTBEAT: Duration = Duration::from_millis(100);
/// How long it does so at most (the follow-up normally starts within a second).
const FOLLOW_UP_WINDOW: Duration = Duration::from_secs(10);

impl GroupDriver {
    pub fn new(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        on_change: Arc<dyn Fn() + Send + Sync>,
    ) -> Result<Arc<GroupDriver>> {
        GroupDriver::build(cluster, config, on_change, false)
    }

    /// A committer for a consumer with manually assigned partitions (no membership).
    pub fn simple_committer(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
    ) -> Result<Arc<GroupDriver>> {
        GroupDriver::build(cluster, config, Arc::new(|| {}), true)
    }

    fn build(
        cluster: Arc<Cluster>,
        config: ConsumerConfig,
        on_change: Arc<dyn Fn() + Send + Sync>,
        simple: bool,
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
            cluster,
            config,
            coordinator: Mutex::new(None),
            last_poll: Mutex::new(Instant::now()),
            assignors,
            closed: AtomicBool::new(false),
            on_change,
            follow_up_since: Mutex::new(None),
            simple,
            async_commits: Mutex::new(AsyncCommits::default()),
            async_idle: tokio::sync::Notify::new(),
        }))
    }

    pub fn membership(&self) -> MutexGuard<'_, Membership> {
        self.membership.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Called by every `poll()`: restarts the max.poll.interval.ms timer.
    pub fn touch_poll(&self) {
        *self.last_poll.lock().unwrap_or_else(|p| p.into_inner()) = Instant::now();
    }

    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    fn group_id_bytes(&self) -> GroupId {
        GroupId(StrBytes::from_string(self.group_id.clone()))
    }

    fn instance_id(&self) -> Option<StrBytes> {
        self.config
            .group_instance_id
            .clone()
            .map(StrBytes::from_string)
    }

    async fn coordinator(&self, deadline: Deadline) -> Result<Arc<Connection>> {
        {
            let c = self.coordinator.lock().unwrap_or_else(|p| p.into_inner());
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
        *self.coordinator.lock().unwrap_or_else(|p| p.into_inner()) = Some((id, conn.clone()));
        Ok(conn)
    }

    fn coordinator_unknown(&self, why: &str) {
        if let Some((id, _)) = self
            .coordinator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
        {
            tracing::info!(group = %self.group_id, coordinator = id, reason = why, "marking the coordinator unknown");
            self.cluster.disconnect(id, Lane::Coordinator);
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
    /// leaves the group when `poll()` has not been called for `max.poll.interval.ms`. When the
    /// next heartbeat is due is [`next_heartbeat`]'s decision.
    pub async fn heartbeat_loop(self: Arc<Self>) {
        let mut retry = Retry::new(self.cluster.backoff());
        let mut last_ok = Instant::now();
        let mut last_sent: Option<Instant> = None;
        let mut last_answer: Option<(Instant, HeartbeatAnswer)> = None;
        let tick = Duration::from_millis(50).min(self.config.heartbeat_interval);
        while !self.closed.load(Ordering::Acquire) {
            tokio::time::sleep(tick).await;
            let (enabled, generation) = {
                let m = self.membership();
                (m.heartbeats_enabled(), m.generation.clone())
            };
            if !enabled {
                last_ok = Instant::now();
                last_sent = None;
                last_answer = None;
                continue;
            }
            let since_poll = self
                .last_poll
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .elapsed();
            if since_poll > self.config.max_poll_interval {
                let send_leave = self.membership().poll_timeout_expired();
                tracing::warn!(
                    group = %self.group_id,
                    member = %generation.member_id,
                    "consumer poll timeout has expired: poll() was not called for {} ms (max.poll.interval.ms); {}",
                    since_poll.as_millis(),
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
            if last_ok.elapsed() > self.config.session_timeout {
                // As the Java client: the session may be gone on the broker; find the
                // coordinator again rather than leaving.
                self.coordinator_unknown("session timed out without a successful heartbeat");
                last_ok = Instant::now();
            }
            let follow_up = self
                .follow_up_since
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_some_and(|since| since.elapsed() < FOLLOW_UP_WINDOW);
            let now = Instant::now();
            let interval = if follow_up {
                FOLLOW_UP_HEARTBEAT.min(self.config.heartbeat_interval)
            } else {
                self.config.heartbeat_interval
            };
            match next_heartbeat(interval, last_sent, last_answer, now) {
                Some(due) if due <= now => {}
                _ => continue,
            }
            last_sent = Some(now);
            let deadline = Deadline::after(
                self.config
                    .common
                    .request_timeout
                    .min(self.config.session_timeout),
            );
            let answer = async {
                let conn = self.coordinator(deadline).await?;
                let v = conn.version::<HeartbeatRequest>()?;
                let mut req = HeartbeatRequest::default()
                    .with_group_id(self.group_id_bytes())
                    .with_generation_id(generation.generation_id)
                    .with_member_id(StrBytes::from_string(generation.member_id.clone()));
                if v >= 3 {
                    req = req.with_group_instance_id(self.instance_id());
                }
                conn.call_with_timeout(&req, deadline.remaining()).await
            }
            .await;
            let outcome = match answer {
                Ok(resp) => {
                    let next = self.membership().on_heartbeat(&generation, resp.error_code);
                    let outcome = match next {
                        Next::Continue | Next::JoinAgain => {
                            retry.succeeded();
                            last_ok = Instant::now();
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
                            self.membership().error = Some(e);
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
            last_answer = Some((Instant::now(), outcome));
        }
    }

    // ---- joining ----

    /// JoinGroup until it succeeds, the leader's assignment, SyncGroup. Runs as a task; `poll()`
    /// collects the outcome. Retriable failures retry with backoff here; a fatal one ends it.
    pub async fn join(self: Arc<Self>, input: JoinInput) -> Result<JoinOutcome> {
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
            .coordinator(deadline)
            .await
            .map_err(JoinErr::classify)?;
        let (member_id, generation_id) = {
            let mut m = self.membership();
            m.state = MemberState::PreparingRebalance;
            (m.generation.member_id.clone(), m.generation.generation_id)
        };
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
                            leaving: false,
                            max_learning: self.config.learner_max_warmup_partitions,
                        },
                    ),
                    owned_partitions: to_topic_partitions(&input.owned),
                    generation_id,
                    rack_id: self.config.common.client_rack.clone(),
                };
                Ok(JoinGroupRequestProtocol::default()
                    .with_name(StrBytes::from_static_str(a.name()))
                    .with_metadata(encode_subscription(&sub, HIGHEST_VERSION)?))
            })
            .collect::<Result<Vec<_>>>()
            .map_err(JoinErr::Fatal)?;
        let mut req = JoinGroupRequest::default()
            .with_group_id(self.group_id_bytes())
            .with_session_timeout_ms(self.config.session_timeout.as_millis() as i32)
            .with_rebalance_timeout_ms(rebalance_timeout.as_millis() as i32)
            .with_member_id(StrBytes::from_string(member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str("consumer"))
            .with_protocols(protocols);
        if v >= 5 {
            req = req.with_group_instance_id(self.instance_id());
        }
        if v >= 8 {
            req = req.with_reason(Some(StrBytes::from_string(truncate(&input.reason, 255))));
        }
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
                m.fatal = Some(e.clone());
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
                .map(|(member, a)| {
                    Ok(SyncGroupRequestAssignment::default()
                        .with_member_id(StrBytes::from_string(member))
                        .with_assignment(encode_assignment(&a, HIGHEST_VERSION)?))
                })
                .collect::<Result<Vec<_>>>()
                .map_err(JoinErr::Fatal)?;
            (assignments, Some(built_on))
        } else {
            (Vec::new(), None)
        };
        let sv = conn.version::<SyncGroupRequest>().map_err(JoinErr::Fatal)?;
        let mut sync = SyncGroupRequest::default()
            .with_group_id(self.group_id_bytes())
            .with_generation_id(resp.generation_id)
            .with_member_id(StrBytes::from_string(my_id.clone()))
            .with_assignments(assignments);
        if sv >= 3 {
            sync = sync.with_group_instance_id(self.instance_id());
        }
        if sv >= 5 {
            sync = sync
                .with_protocol_type(Some(StrBytes::from_static_str("consumer")))
                .with_protocol_name(protocol.clone().map(StrBytes::from_string));
        }
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
        let generation = {
            let mut m = self.membership();
            if m.generation.generation_id != resp.generation_id {
                // The heartbeat reset the generation while SyncGroup was in flight.
                drop(m);
                return Ok(None);
            }
            m.on_sync_success();
            m.generation.clone()
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
        let learner = if assignor.name() == "learner-sticky" {
            decode_learner_assignment_data(assignment.user_data.as_ref()).unwrap_or_else(|e| {
                tracing::warn!(group = %self.group_id, error = %e, "malformed learner data in the assignment; learning nothing");
                LearnerAssignmentData::default()
            })
        } else {
            LearnerAssignmentData::default()
        };
        // A follow-up rebalance is coming (partitions were left out to move): heartbeat often
        // until it starts, so this member notices it in tens of milliseconds rather than up to
        // heartbeat.interval.ms, and the partitions in transit are without an owner that much
        // less.
        *self
            .follow_up_since
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = learner.follow_up.then(Instant::now);
        let learning: BTreeSet<TopicPartition> = learner
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
        let coordinator = self
            .coordinator
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|c| c.0);
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
            let v = conn.version::<LeaveGroupRequest>()?;
            let req = if v >= 3 {
                let mut who = MemberIdentity::default()
                    .with_member_id(StrBytes::from_string(member_id.to_string()))
                    .with_group_instance_id(self.instance_id());
                if v >= 5 {
                    who = who.with_reason(Some(StrBytes::from_string(truncate(reason, 255))));
                }
                LeaveGroupRequest::default()
                    .with_group_id(self.group_id_bytes())
                    .with_members(vec![who])
            } else {
                LeaveGroupRequest::default()
                    .with_group_id(self.group_id_bytes())
                    .with_member_id(StrBytes::from_string(member_id.to_string()))
            };
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
    /// stay until the session expires, so a restart causes no rebalance.
    pub async fn leave_group(&self, reason: &str, deadline: Deadline) {
        let member_id = {
            let mut m = self.membership();
            let id = m.generation.member_id.clone();
            let is_static = m.is_static();
            m.generation = Generation::none();
            m.state = MemberState::Unjoined;
            m.partitions_lost = false;
            if is_static {
                return;
            }
            id
        };
        self.leave(&member_id, reason, deadline).await;
    }

    /// Sends `offsets` as an asynchronous commit and calls `done` with the result (on a
    /// library thread: the caller hands it on). One attempt, never retried; while one is in
    /// flight later ones are merged and sent after it, so the group's offsets only move in the
    /// order they were asked for.
    pub fn commit_async(
        self: &Arc<Self>,
        runtime: &tokio::runtime::Handle,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
        done: AsyncCommitDone,
    ) {
        let first = self
            .async_commits
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(offsets, done);
        if let Some(first) = first {
            runtime.spawn(self.clone().send_async_commits(first));
        }
    }

    async fn send_async_commits(self: Arc<Self>, mut batch: MergedCommit<AsyncCommitDone>) {
        loop {
            let offsets: Vec<(TopicPartition, OffsetAndMetadata)> =
                std::mem::take(&mut batch.offsets).into_iter().collect();
            let deadline = Deadline::after(self.config.common.request_timeout);
            let result = self.commit_with(&offsets, deadline, false).await;
            if let Err(e) = &result {
                tracing::warn!(group = %self.group_id, error = %e, "asynchronous commit failed");
            }
            for (done, r) in batch.split(&result) {
                done(r);
            }
            let next = self
                .async_commits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .answered();
            match next {
                Some(b) => batch = b,
                None => {
                    self.async_idle.notify_waiters();
                    return;
                }
            }
        }
    }

    /// Waits until no asynchronous commit is in flight or waiting, so a synchronous commit
    /// sent next lands after them.
    pub async fn async_commits_done(&self, deadline: Deadline) -> Result<()> {
        loop {
            let idle = self.async_idle.notified();
            tokio::pin!(idle);
            idle.as_mut().enable();
            if self
                .async_commits
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .is_idle()
            {
                return Ok(());
            }
            if tokio::time::timeout(deadline.remaining(), idle)
                .await
                .is_err()
            {
                return Err(deadline.error("waiting for the asynchronous commits in flight"));
            }
        }
    }

    /// OffsetCommit through the member's generation (or as a simple consumer when it has none),
    /// after the asynchronous commits in flight. Returns the result per partition, with what
    /// was sent for it; the whole call fails only when nothing was committed.
    pub async fn commit(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        deadline: Deadline,
    ) -> Result<CommitResults> {
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        self.async_commits_done(deadline).await?;
        self.commit_with(offsets, deadline, true).await
    }

    /// OffsetCommit, retried until `deadline` when `retries`, else sent once.
    async fn commit_with(
        &self,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        deadline: Deadline,
        retries: bool,
    ) -> Result<CommitResults> {
        if offsets.is_empty() {
            return Ok(Vec::new());
        }
        let generation = self.membership().commit_generation(self.simple)?;
        let mut pending: Vec<(TopicPartition, OffsetAndMetadata)> = offsets.to_vec();
        let mut results: CommitResults = Vec::new();
        let mut retry = Retry::new(self.cluster.backoff());
        loop {
            let attempt = async {
                let conn = self.coordinator(deadline).await?;
                let v = conn.version::<OffsetCommitRequest>()?;
                let mut by_topic: BTreeMap<&str, Vec<OffsetCommitRequestPartition>> =
                    BTreeMap::new();
                for (tp, om) in &pending {
                    by_topic.entry(tp.topic.as_str()).or_default().push(
                        OffsetCommitRequestPartition::default()
                            .with_partition_index(tp.partition)
                            .with_committed_offset(om.offset)
                            .with_committed_leader_epoch(-1)
                            .with_committed_metadata(Some(StrBytes::from_string(
                                om.metadata.clone(),
                            ))),
                    );
                }
                let topics = by_topic
                    .into_iter()
                    .map(|(t, ps)| {
                        OffsetCommitRequestTopic::default()
                            .with_name(TopicName(StrBytes::from_string(t.to_string())))
                            .with_partitions(ps)
                    })
                    .collect();
                let mut req = OffsetCommitRequest::default()
                    .with_group_id(self.group_id_bytes())
                    .with_generation_id_or_member_epoch(generation.generation_id)
                    .with_member_id(StrBytes::from_string(generation.member_id.clone()))
                    .with_topics(topics);
                if v >= 7 {
                    req = req.with_group_instance_id(self.instance_id());
                }
                if v <= 4 {
                    req = req.with_retention_time_ms(-1);
                }
                let attempt_timeout = deadline
                    .remaining()
                    .max(MIN_COMMIT_ATTEMPT)
                    .min(self.config.common.request_timeout);
                conn.call_with_timeout(&req, attempt_timeout).await
            }
            .await;
            let resp = match attempt {
                Ok(r) => r,
                Err(e) => {
                    // A request that timed out on a working connection leaves it to the
                    // heartbeats and other commits (the connection closes itself when broken).
                    if !matches!(e, Error::Timeout(_)) {
                        self.coordinator_unknown("OffsetCommit failed");
                    }
                    let wait = retry.failed();
                    if !retries || !e.is_retriable() || deadline.remaining() <= wait {
                        return Err(e);
                    }
                    tokio::time::sleep(wait).await;
                    continue;
                }
            };
            let mut again = Vec::new();
            let mut rediscover = false;
            for t in resp.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                    let Some(pos) = pending.iter().position(|(x, _)| *x == tp) else {
                        continue;
                    };
                    let entry = pending[pos].clone();
                    if p.error_code == codes::NONE {
                        results.push((tp, entry.1, Ok(())));
                        continue;
                    }
                    let (next, err) = self.membership().on_commit_error(&generation, p.error_code);
                    match next {
                        Next::RetryAfterBackoff if retries => again.push(entry),
                        Next::RediscoverCoordinator => {
                            rediscover = true;
                            if retries {
                                again.push(entry)
                            } else {
                                results.push((tp, entry.1, Err(with_partition(err, &entry.0))))
                            }
                        }
                        _ => results.push((tp, entry.1, Err(with_partition(err, &entry.0)))),
                    }
                }
            }
            if rediscover {
                self.coordinator_unknown("OffsetCommit answered NOT_COORDINATOR");
            }
            if again.is_empty() {
                (self.on_change)();
                return Ok(results);
            }
            let wait = retry.failed();
            if deadline.remaining() <= wait {
                for (tp, om) in again {
                    results.push((tp, om, Err(deadline.error("OffsetCommit"))));
                }
                return Ok(results);
            }
            tokio::time::sleep(wait).await;
            pending = again;
        }
    }
}

fn with_partition(e: Error, tp: &TopicPartition) -> Error {
    match e {
        Error::Kafka { code, context, .. } => {
            Error::kafka_partition(code, context, &tp.topic, tp.partition)
        }
        Error::CommitFailed(m) => Error::CommitFailed(format!("{tp}: {m}")),
        other => other,
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

fn truncate(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_string()
}

fn to_topic_partitions(set: &BTreeSet<TopicPartition>) -> Vec<TopicPartitions> {
    let mut out: Vec<TopicPartitions> = Vec::new();
    for tp in set {
        match out.last_mut() {
            Some(t) if t.topic == tp.topic => t.partitions.push(tp.partition),
            _ => out.push(TopicPartitions::new(tp.topic.clone(), vec![tp.partition])),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_first_heartbeat_of_a_generation_is_due_at_once() {
        let now = Instant::now();
        assert_eq!(next_heartbeat(3000 * MS, None, None, now), Some(now));
    }

    #[test]
    fn an_answered_heartbeat_is_followed_an_interval_after_it_was_sent() {
        let t0 = Instant::now();
        let answered = Some((t0 + 40 * MS, HeartbeatAnswer::Ok));
        assert_eq!(
            next_heartbeat(3000 * MS, Some(t0), answered, t0 + 50 * MS),
            Some(t0 + 3000 * MS)
        );
    }

    #[test]
    fn a_failed_heartbeat_is_retried_after_its_backoff_from_the_answer() {
        let t0 = Instant::now();
        let failed = Some((t0 + 40 * MS, HeartbeatAnswer::Retry(200 * MS)));
        assert_eq!(
            next_heartbeat(3000 * MS, Some(t0), failed, t0 + 50 * MS),
            Some(t0 + 240 * MS)
        );
    }

    #[test]
    fn after_a_fatal_answer_no_heartbeat_is_ever_due() {
        let t0 = Instant::now();
        let fatal = Some((t0 + 40 * MS, HeartbeatAnswer::Fatal));
        for later in [0, 50, 3000, 600_000] {
            assert_eq!(
                next_heartbeat(3000 * MS, Some(t0), fatal, t0 + later * MS),
                None,
                "{later} ms later"
            );
        }
    }
}
