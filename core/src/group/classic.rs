//! The classic group protocol behind [`GroupProtocol`]: JoinGroup, the leader's assignment
//! (this member computes it when the coordinator makes it the leader), SyncGroup, Heartbeat
//! and LeaveGroup. Every answer goes to the member as a value ([`ProtocolAnswer`], handed to
//! `driver.report`), whose pure transitions ([`Membership`](crate::group::member::Membership))
//! follow the Java client's error table; this module only builds the requests and carries
//! their answers.
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use crate::backoff::Deadline;
use crate::error::{codes, Error, Result};
use crate::group::assignor::{Assignor, LearnerIntent, MemberSubscription};
use crate::group::group_member::HeartbeatInput;
use crate::group::group_protocol::{GroupProtocol, JoinAttempt, ProtocolContext, ProtocolFuture};
use crate::group::member::{Generation, Next, ProtocolAnswer, Reply};
use crate::group::metadata_snapshot::MetadataSnapshot;
use crate::group::step::{JoinInput, JoinOutcome};
use crate::net::Connection;
use crate::protocol;
use crate::protocol::consumer_protocol::{
    decode_assignment, decode_subscription, encode_assignment, encode_subscription, Assignment,
    LearnerAssignmentData, Subscription, TopicPartitions, HIGHEST_VERSION,
};
use crate::protocol::group::Join;
use crate::protocol::group_by_topic;
use crate::protocol::msg::describe_configs_request::DescribeConfigsResource;
use crate::protocol::msg::{
    DescribeConfigsRequest, HeartbeatRequest, JoinGroupRequest, LeaveGroupRequest, StrBytes,
    SyncGroupRequest,
};
use crate::types::TopicPartition;

/// JoinGroup may wait for the whole rebalance: Java allows the rebalance timeout plus this.
const JOIN_GROUP_TIMEOUT_LAPSE: Duration = Duration::from_secs(5);

/// The classic group protocol (`group.protocol=classic`).
pub(crate) struct Classic;

impl GroupProtocol for Classic {
    fn name(&self) -> &'static str {
        "classic"
    }

    fn join_once<'a>(
        &'a self,
        driver: &'a dyn ProtocolContext,
        input: &'a JoinInput,
    ) -> ProtocolFuture<'a, JoinAttempt> {
        Box::pin(async move {
            match join_once(driver, input).await {
                Ok(Some(outcome)) => JoinAttempt::Joined(Box::new(outcome)),
                Ok(None) => JoinAttempt::Again,
                Err(failed) => failed,
            }
        })
    }

    fn heartbeat<'a>(
        &'a self,
        driver: &'a dyn ProtocolContext,
        input: &'a HeartbeatInput,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<i16>> {
        Box::pin(async move {
            let generation = &input.generation;
            let conn = driver.coordinator(deadline).await?;
            let req = protocol::group::heartbeat(
                driver.member(&generation.member_id),
                generation.generation_id,
                conn.version::<HeartbeatRequest>()?,
            );
            let resp = conn.call_with_timeout(&req, deadline.remaining()).await?;
            Ok(resp.error_code)
        })
    }

    fn leave<'a>(
        &'a self,
        driver: &'a dyn ProtocolContext,
        member_id: &'a str,
        reason: &'a str,
        deadline: Deadline,
    ) -> ProtocolFuture<'a, Result<i16>> {
        Box::pin(async move {
            let conn = driver.coordinator(deadline).await?;
            let req = protocol::group::leave_group(
                driver.member(member_id),
                reason,
                conn.version::<LeaveGroupRequest>()?,
            );
            let resp = conn
                .call_with_timeout(&req, deadline.remaining().max(Duration::from_millis(1)))
                .await?;
            Ok(resp.error_code)
        })
    }
}

/// JoinGroup, the leader's assignment, SyncGroup: `Ok(None)` asks to join again at once;
/// `Err` is [`JoinAttempt::Backoff`] or [`JoinAttempt::Fatal`].
async fn join_once(
    d: &dyn ProtocolContext,
    input: &JoinInput,
) -> std::result::Result<Option<JoinOutcome>, JoinAttempt> {
    let rebalance_timeout = d.config().max_poll_interval;
    let deadline = Deadline::after(d.config().common.default_api_timeout);
    let conn = d
        .join_connection(deadline)
        .await
        .map_err(JoinAttempt::failed)?;
    let sent = d.join_sending().await;
    let (member_id, generation_id) = (sent.member_id, sent.generation_id);
    let v = conn
        .version::<JoinGroupRequest>()
        .map_err(JoinAttempt::Fatal)?;
    if d.config().group_instance_id.is_some() && v < 5 {
        return Err(JoinAttempt::Fatal(Error::kafka(
            codes::UNSUPPORTED_VERSION,
            "the broker does not support static membership (group.instance.id needs JoinGroup v5)",
        )));
    }
    let protocols = d
        .assignors()
        .iter()
        .map(|a| {
            let sub = Subscription {
                topics: input.topics.clone(),
                user_data: a.subscription_user_data(
                    generation_id,
                    &to_topic_partitions(&input.ready),
                    LearnerIntent {
                        leaving: d.is_leaving(),
                        max_learning: d.config().learner_max_warmup_partitions,
                    },
                ),
                owned_partitions: to_topic_partitions(&input.owned),
                generation_id,
                rack_id: d.config().common.client_rack.clone(),
            };
            Ok((a.name(), encode_subscription(&sub, HIGHEST_VERSION)?))
        })
        .collect::<Result<Vec<_>>>()
        .map_err(JoinAttempt::Fatal)?;
    let req = protocol::group::join_group(
        d.member(&member_id),
        Join {
            session_timeout_ms: d.config().session_timeout.as_millis() as i32,
            rebalance_timeout_ms: rebalance_timeout.as_millis() as i32,
            protocols,
            reason: &input.reason,
        },
        v,
    );
    tracing::info!(group = %d.group_id(), member = %member_id, reason = %input.reason, "joining the group");
    let timeout = d
        .config()
        .common
        .request_timeout
        .max(rebalance_timeout + JOIN_GROUP_TIMEOUT_LAPSE);
    let resp = conn.call_with_timeout(&req, timeout).await.map_err(|e| {
        d.coordinator_unknown("JoinGroup failed");
        JoinAttempt::failed(e)
    })?;
    if resp.error_code != codes::NONE {
        if resp.error_code == codes::INVALID_SESSION_TIMEOUT {
            // Ask for the allowed range before the membership turns fatal: poll() reports
            // the fatal error as soon as it is set, and it should name the range.
            let range = session_timeout_range(d, &conn).await;
            let e = Error::kafka(
                resp.error_code,
                format!(
                    "session.timeout.ms={} is outside the range the broker allows: {range}",
                    d.config().session_timeout.as_millis()
                ),
            );
            let reply = d
                .report(ProtocolAnswer::JoinGroupFatal {
                    code: resp.error_code,
                    member_id: resp.member_id.to_string(),
                    error: e,
                })
                .await;
            return follow(d, reply, resp.error_code, "JoinGroup");
        }
        let reply = d
            .report(ProtocolAnswer::JoinGroupFailed {
                code: resp.error_code,
                member_id: resp.member_id.to_string(),
            })
            .await;
        return follow(d, reply, resp.error_code, "JoinGroup");
    }
    let protocol = resp.protocol_name.as_ref().map(|p| p.to_string());
    let my_id = resp.member_id.to_string();
    d.report(ProtocolAnswer::Joined(Generation {
        generation_id: resp.generation_id,
        member_id: my_id.clone(),
        protocol: protocol.clone(),
    }))
    .await;
    let protocol_name = protocol.clone().unwrap_or_default();
    let assignor = d.assignor(&protocol_name).ok_or_else(|| {
        JoinAttempt::Fatal(Error::Corrupt(format!(
            "the coordinator chose assignor `{protocol_name}`, which this member did not offer"
        )))
    })?;
    let (assignments, assigned_from) = if resp.leader == resp.member_id && !resp.skip_assignment {
        let members: Vec<MemberSubscription> = resp
            .members
            .iter()
            .map(|m| {
                let subscription = decode_subscription(m.metadata.clone()).unwrap_or_else(|e| {
                    // A member whose metadata we cannot read gets nothing; the others go on.
                    tracing::error!(
                        group = %d.group_id(),
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
        let (plan, built_on) = leader_assign(d, assignor, &members, deadline)
            .await
            .map_err(JoinAttempt::failed)?;
        let assignments = plan
            .into_iter()
            .map(|(member, a)| Ok((member, encode_assignment(&a, HIGHEST_VERSION)?)))
            .collect::<Result<Vec<_>>>()
            .map_err(JoinAttempt::Fatal)?;
        (assignments, Some(built_on))
    } else {
        (Vec::new(), None)
    };
    let sv = conn
        .version::<SyncGroupRequest>()
        .map_err(JoinAttempt::Fatal)?;
    let sync = protocol::group::sync_group(
        d.member(&my_id),
        resp.generation_id,
        protocol.as_deref(),
        assignments,
        sv,
    );
    let sresp = conn.call(&sync).await.map_err(|e| {
        d.coordinator_unknown("SyncGroup failed");
        JoinAttempt::failed(e)
    })?;
    if sresp.error_code != codes::NONE {
        let reply = d
            .report(ProtocolAnswer::SyncGroupFailed {
                code: sresp.error_code,
            })
            .await;
        return follow(d, reply, sresp.error_code, "SyncGroup");
    }
    let assignment = decode_assignment(sresp.assignment.clone()).map_err(|e| {
        JoinAttempt::Fatal(Error::Corrupt(format!(
            "the assignment from the group leader: {e}"
        )))
    })?;
    let generation = match d
        .report(ProtocolAnswer::Synced {
            generation_id: resp.generation_id,
        })
        .await
    {
        Reply::Generation(g) => g,
        // The heartbeat reset the generation while SyncGroup was in flight.
        Reply::Outlived | Reply::Next(_) => return Ok(None),
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
        group = %d.group_id(),
        generation = generation.generation_id,
        member = %generation.member_id,
        protocol = %protocol_name,
        partitions = assigned.len(),
        "joined the group"
    );
    let notes = assignor
        .read_assignment(assignment.user_data.as_ref())
        .unwrap_or_else(|e| {
            tracing::warn!(group = %d.group_id(), error = %e, "malformed user data in the assignment; learning nothing from it");
            LearnerAssignmentData::default()
        });
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
        // The driver heartbeats often until the follow-up rebalance starts, so the partitions
        // in transit are without an owner that much less.
        follow_up: notes.follow_up,
    }))
}

/// The broker's `group.min.session.timeout.ms`..`group.max.session.timeout.ms`, asked with
/// DescribeConfigs, for the INVALID_SESSION_TIMEOUT error message.
async fn session_timeout_range(d: &dyn ProtocolContext, conn: &Connection) -> String {
    const MIN: &str = "group.min.session.timeout.ms";
    const MAX: &str = "group.max.session.timeout.ms";
    let coordinator = d.coordinator_id();
    let fallback = format!("{MIN}..{MAX} (6000..1800000 unless the broker changed them)");
    let Some(id) = coordinator else {
        return fallback;
    };
    let req =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(4) // BROKER
            .with_resource_name(StrBytes::from_string(id.to_string()))
            .with_configuration_keys(Some(vec![
                StrBytes::from_static_str(MIN),
                StrBytes::from_static_str(MAX),
            ]))]);
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

/// What a join does after the member's reply to an error answer.
fn follow(
    d: &dyn ProtocolContext,
    reply: Reply,
    code: i16,
    what: &str,
) -> std::result::Result<Option<JoinOutcome>, JoinAttempt> {
    let next = match reply {
        Reply::Next(next) => next,
        Reply::Generation(_) | Reply::Outlived => Next::JoinAgain,
    };
    match next {
        Next::JoinAgain | Next::Continue => Ok(None),
        Next::RetryAfterBackoff => Err(JoinAttempt::Backoff(Error::kafka(code, what))),
        Next::RediscoverCoordinator => {
            d.coordinator_unknown(&format!(
                "{what} answered {}",
                crate::error::kafka_error_name(code)
            ));
            Err(JoinAttempt::Backoff(Error::kafka(code, what)))
        }
        Next::Fatal(e) => Err(JoinAttempt::Fatal(e)),
    }
}

/// The leader's assignment, and what it was computed from: a subscribed topic that does
/// not exist (yet) gets no partitions now, and the snapshot makes the group rebalance once
/// metadata shows it (see
/// [`AssignmentBasis`](crate::group::metadata_snapshot::AssignmentBasis)).
async fn leader_assign(
    d: &dyn ProtocolContext,
    assignor: &dyn Assignor,
    members: &[MemberSubscription],
    deadline: Deadline,
) -> Result<(BTreeMap<String, Assignment>, MetadataSnapshot)> {
    let topics: BTreeSet<String> = members
        .iter()
        .flat_map(|m| m.subscription.topics.iter().cloned())
        .collect();
    d.cluster().add_interest(topics.iter());
    let meta = d
        .cluster()
        .refresh(&topics.iter().cloned().collect::<Vec<_>>(), deadline)
        .await?;
    let assigned_from = MetadataSnapshot::assigned_from(&meta, &topics);
    let counts = assigned_from.partition_counts();
    for t in topics.iter().filter(|t| !counts.contains_key(*t)) {
        tracing::warn!(group = %d.group_id(), topic = %t, "a subscribed topic does not exist (yet); its partitions are assigned once metadata shows it");
    }
    Ok((assignor.assign(&counts, members)?, assigned_from))
}

fn to_topic_partitions(set: &BTreeSet<TopicPartition>) -> Vec<TopicPartitions> {
    group_by_topic(set.iter().map(|tp| (tp.topic.as_str(), tp.partition)))
        .into_iter()
        .map(|(t, ps)| TopicPartitions::new(t, ps))
        .collect()
}
