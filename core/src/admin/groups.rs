//! The admin client's group calls: list and describe groups (both protocols), their committed
//! offsets (list, alter, delete), their lag, and the plan of an offset reset.
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use crate::admin::client::{in_order, item_error, text, AdminClient, ItemResults};
use crate::admin::plan;
use crate::admin::types::{
    GroupDescription, GroupListing, GroupType, MemberDescription, OffsetSpec, PartitionLag,
    ResetTarget,
};
use crate::backoff::{retry_until_if, Deadline};
use crate::cluster::{Cluster, Lane};
use crate::error::{codes, kafka_error_action, Action, Error, Result};
use crate::protocol::msg::{
    offset_delete_request::{OffsetDeleteRequestPartition, OffsetDeleteRequestTopic},
    ConsumerGroupDescribeRequest, DescribeGroupsRequest, GroupId, ListGroupsRequest,
    OffsetCommitRequest, OffsetDeleteRequest, OffsetFetchRequest,
};
use crate::protocol::{group_by_topic, topic_name, wire::Api};
use crate::types::{OffsetAndMetadata, TopicPartition};

/// One partition of a reset plan: where the group's offset is and where the reset puts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResetPlan {
    /// The partition.
    pub partition: TopicPartition,
    /// The group's committed offset now (`None`: nothing committed).
    pub current: Option<i64>,
    /// The offset the reset commits.
    pub target: i64,
}

impl AdminClient {
    /// Every group of the cluster (ListGroups, asked of every broker: each lists the groups it
    /// coordinates), sorted by id.
    pub fn list_groups(&self, timeout: Duration) -> Result<Vec<GroupListing>> {
        self.block(timeout, move |cluster, deadline| async move {
            let meta = cluster.refresh(&[], deadline).await?;
            let mut groups = Vec::new();
            for id in meta.brokers.keys() {
                let resp = retry_until_if(
                    cluster.backoff(),
                    deadline,
                    "ListGroups",
                    |e| {
                        e.is_retriable()
                            || e.kafka_code() == Some(codes::COORDINATOR_LOAD_IN_PROGRESS)
                    },
                    || async {
                        let conn = cluster.broker(*id, deadline).await?;
                        let resp = conn
                            .call_before(&ListGroupsRequest::default(), deadline)
                            .await?;
                        item_error(
                            resp.error_code,
                            None,
                            format!("listing the groups of broker {id}"),
                        )?;
                        Ok(resp)
                    },
                )
                .await?;
                groups.extend(resp.groups.into_iter().map(|g| GroupListing {
                    group_id: g.group_id.0.to_string(),
                    protocol_type: g.protocol_type.to_string(),
                    state: g.group_state.to_string(),
                    group_type: g.group_type.to_string(),
                }));
            }
            groups.sort_by(|a, b| a.group_id.cmp(&b.group_id));
            groups.dedup_by(|a, b| a.group_id == b.group_id);
            Ok(groups)
        })
    }

    /// Describes each group: consumer-protocol groups (KIP-848) with ConsumerGroupDescribe where
    /// the coordinator has it, classic groups (and groups that do not exist, described as
    /// `Dead`) with DescribeGroups.
    pub fn describe_groups(
        &self,
        groups: &[&str],
        timeout: Duration,
    ) -> Result<ItemResults<String, GroupDescription>> {
        let groups: Vec<String> = groups.iter().map(|g| g.to_string()).collect();
        self.block(timeout, move |cluster, deadline| async move {
            let mut answers = BTreeMap::new();
            for g in &groups {
                answers.insert(g.clone(), describe_group(&cluster, g, deadline).await);
            }
            Ok(in_order(groups.iter().cloned(), answers, "DescribeGroups"))
        })
    }

    /// The group's committed offsets (OffsetFetch): of `partitions`, or of every partition it
    /// has committed for when `None`. A partition without a committed offset is `Ok(None)`.
    pub fn list_consumer_group_offsets(
        &self,
        group: &str,
        partitions: Option<&[TopicPartition]>,
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition, Option<OffsetAndMetadata>>> {
        let group = group.to_string();
        let partitions = partitions.map(|p| p.to_vec());
        self.block(timeout, move |cluster, deadline| async move {
            committed(&cluster, &group, partitions.as_deref(), deadline).await
        })
    }

    /// Commits `offsets` for the group from outside it (OffsetCommit with no member and no
    /// generation, as Kafka's Admin does): the coordinator accepts it only while the group has
    /// no member.
    pub fn alter_consumer_group_offsets(
        &self,
        group: &str,
        offsets: &[(TopicPartition, OffsetAndMetadata)],
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition>> {
        let group = group.to_string();
        let offsets = offsets.to_vec();
        self.block(timeout, move |cluster, deadline| async move {
            alter(&cluster, &group, &offsets, deadline).await
        })
    }

    /// Deletes the group's committed offsets of `partitions` (OffsetDelete); refused
    /// (`GROUP_SUBSCRIBED_TO_TOPIC`, 86) for a topic the group's members are subscribed to.
    pub fn delete_consumer_group_offsets(
        &self,
        group: &str,
        partitions: &[TopicPartition],
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition>> {
        let group = group.to_string();
        let partitions = partitions.to_vec();
        self.block(timeout, move |cluster, deadline| async move {
            let topics = group_by_topic(
                partitions
                    .iter()
                    .map(|tp| (tp.topic.as_str(), tp.partition)),
            )
            .into_iter()
            .map(|(t, ps)| {
                OffsetDeleteRequestTopic::default()
                    .with_name(topic_name(t))
                    .with_partitions(
                        ps.into_iter()
                            .map(|p| {
                                OffsetDeleteRequestPartition::default().with_partition_index(p)
                            })
                            .collect(),
                    )
            })
            .collect();
            let req = OffsetDeleteRequest::default()
                .with_group_id(GroupId(text(&group)))
                .with_topics(topics);
            let resp = call_coordinator(&cluster, &group, &req, deadline, |r| r.error_code).await?;
            item_error(
                resp.error_code,
                None,
                format!("deleting offsets of group `{group}`"),
            )?;
            let mut answers = BTreeMap::new();
            for t in resp.topics {
                for p in t.partitions {
                    let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
                    let r = item_error(p.error_code, None, format!("deleting the offset of {tp}"));
                    answers.insert(tp, r);
                }
            }
            Ok(in_order(
                partitions.iter().cloned(),
                answers,
                "OffsetDelete",
            ))
        })
    }

    /// The group's lag on every partition it has committed for or its members own: committed
    /// offset, log end offset and their difference, ordered by partition.
    pub fn group_lag(&self, group: &str, timeout: Duration) -> Result<Vec<PartitionLag>> {
        let group = group.to_string();
        self.block(timeout, move |cluster, deadline| async move {
            let description = describe_group(&cluster, &group, deadline).await?;
            let mut partitions: BTreeSet<TopicPartition> = description
                .members
                .iter()
                .flat_map(|m| m.assignment.iter().cloned())
                .collect();
            let mut offsets = BTreeMap::new();
            for (tp, r) in committed(&cluster, &group, None, deadline).await? {
                partitions.insert(tp.clone());
                if let Some(om) = r? {
                    offsets.insert(tp, om.offset);
                }
            }
            let partitions: Vec<TopicPartition> = partitions.into_iter().collect();
            let end = end_offsets(&cluster, &partitions, OffsetSpec::Latest, deadline).await?;
            Ok(plan::group_lag(&partitions, &offsets, &end))
        })
    }

    /// Where a reset of the group's offsets to `target` would put them: on every partition of
    /// `topics`, or on every partition the group has committed for when `topics` is empty.
    /// Refused while the group has members (as Kafka's tool refuses). Commits nothing: pass the
    /// plan to [`AdminClient::reset_consumer_group_offsets`] to carry it out.
    pub fn plan_offset_reset(
        &self,
        group: &str,
        topics: &[&str],
        target: ResetTarget,
        timeout: Duration,
    ) -> Result<Vec<ResetPlan>> {
        let group = group.to_string();
        let topics: Vec<String> = topics.iter().map(|t| t.to_string()).collect();
        self.block(timeout, move |cluster, deadline| async move {
            let description = describe_group(&cluster, &group, deadline).await?;
            plan::may_reset(&description.state, description.members.len())
                .map_err(|m| Error::IllegalState(format!("group `{group}`: {m}")))?;
            let mut current = BTreeMap::new();
            let mut partitions = BTreeSet::new();
            for (tp, r) in committed(&cluster, &group, None, deadline).await? {
                if topics.is_empty() {
                    partitions.insert(tp.clone());
                }
                if let Some(om) = r? {
                    current.insert(tp, om.offset);
                }
            }
            for t in &topics {
                for p in cluster.partitions(t, deadline).await? {
                    partitions.insert(TopicPartition::new(t.clone(), p.partition));
                }
            }
            let partitions: Vec<TopicPartition> = partitions.into_iter().collect();
            let earliest =
                end_offsets(&cluster, &partitions, OffsetSpec::Earliest, deadline).await?;
            let latest = end_offsets(&cluster, &partitions, OffsetSpec::Latest, deadline).await?;
            let by_ts = match target {
                ResetTarget::Timestamp(ts) => {
                    end_offsets(&cluster, &partitions, OffsetSpec::Timestamp(ts), deadline).await?
                }
                _ => BTreeMap::new(),
            };
            partitions
                .into_iter()
                .map(|tp| {
                    let (Some(&e), Some(&l)) = (earliest.get(&tp), latest.get(&tp)) else {
                        return Err(Error::Corrupt(format!(
                            "no log start or end offset of {tp}"
                        )));
                    };
                    Ok(ResetPlan {
                        target: plan::reset_offset(target, e, l, by_ts.get(&tp).copied()),
                        current: current.get(&tp).copied(),
                        partition: tp,
                    })
                })
                .collect()
        })
    }

    /// Commits a reset plan (see [`AdminClient::plan_offset_reset`]).
    pub fn reset_consumer_group_offsets(
        &self,
        group: &str,
        plan: &[ResetPlan],
        timeout: Duration,
    ) -> Result<ItemResults<TopicPartition>> {
        let offsets: Vec<(TopicPartition, OffsetAndMetadata)> = plan
            .iter()
            .map(|p| {
                (
                    p.partition.clone(),
                    OffsetAndMetadata {
                        offset: p.target,
                        metadata: String::new(),
                    },
                )
            })
            .collect();
        self.alter_consumer_group_offsets(group, &offsets, timeout)
    }
}

/// Whether an error sends the request to a coordinator looked up again.
fn coordinator_moved(e: &Error) -> bool {
    e.is_retriable()
        || e.kafka_code().map(kafka_error_action) == Some(Action::RediscoverCoordinator)
}

/// Sends `req` to the group's coordinator; an answer whose `code` (the request's top-level or
/// first item's error) says the coordinator moved or is loading is asked again.
async fn call_coordinator<R: Api>(
    cluster: &Arc<Cluster>,
    group: &str,
    req: &R,
    deadline: Deadline,
    code: impl Fn(&R::Response) -> i16,
) -> Result<R::Response> {
    let what = format!("request to the coordinator of group `{group}`");
    retry_until_if(
        cluster.backoff(),
        deadline,
        &what,
        coordinator_moved,
        || async {
            let (id, conn) = cluster.find_coordinator(group, deadline).await?;
            let resp = conn.call_before(req, deadline).await?;
            let c = code(&resp);
            if matches!(
                c,
                codes::NOT_COORDINATOR
                    | codes::COORDINATOR_NOT_AVAILABLE
                    | codes::COORDINATOR_LOAD_IN_PROGRESS
            ) {
                if c != codes::COORDINATOR_LOAD_IN_PROGRESS {
                    cluster.disconnect(id, Lane::Coordinator);
                }
                return Err(Error::kafka(c, what.clone()));
            }
            Ok(resp)
        },
    )
    .await
}

async fn describe_group(
    cluster: &Arc<Cluster>,
    group: &str,
    deadline: Deadline,
) -> Result<GroupDescription> {
    let (_, conn) = cluster.find_coordinator(group, deadline).await?;
    if conn.version::<ConsumerGroupDescribeRequest>().is_ok() {
        let req =
            ConsumerGroupDescribeRequest::default().with_group_ids(vec![GroupId(text(group))]);
        let resp = call_coordinator(cluster, group, &req, deadline, |r| {
            r.groups.first().map_or(codes::NONE, |g| g.error_code)
        })
        .await?;
        let g = resp
            .groups
            .into_iter()
            .next()
            .ok_or_else(|| Error::Corrupt("ConsumerGroupDescribe answered no group".into()))?;
        if !plan::describe_as_classic(g.error_code) {
            item_error(
                g.error_code,
                g.error_message.as_deref(),
                format!("describing group `{group}`"),
            )?;
            return Ok(GroupDescription {
                group_id: group.to_string(),
                group_type: GroupType::Consumer,
                state: g.group_state.to_string(),
                protocol_type: "consumer".to_string(),
                assignor: g.assignor_name.to_string(),
                members: g
                    .members
                    .into_iter()
                    .map(|m| MemberDescription {
                        member_id: m.member_id.to_string(),
                        group_instance_id: m.instance_id.map(|s| s.to_string()),
                        client_id: m.client_id.to_string(),
                        client_host: m.client_host.to_string(),
                        assignment: m
                            .assignment
                            .topic_partitions
                            .iter()
                            .flat_map(|t| {
                                t.partitions
                                    .iter()
                                    .map(|p| TopicPartition::new(t.topic_name.0.to_string(), *p))
                            })
                            .collect(),
                    })
                    .collect(),
            });
        }
    }
    let req = DescribeGroupsRequest::default().with_groups(vec![GroupId(text(group))]);
    let resp = call_coordinator(cluster, group, &req, deadline, |r| {
        r.groups.first().map_or(codes::NONE, |g| g.error_code)
    })
    .await?;
    let g = resp
        .groups
        .into_iter()
        .next()
        .ok_or_else(|| Error::Corrupt("DescribeGroups answered no group".into()))?;
    item_error(
        g.error_code,
        g.error_message.as_deref(),
        format!("describing group `{group}`"),
    )?;
    let consumer = g.protocol_type.as_str() == "consumer";
    Ok(GroupDescription {
        group_id: group.to_string(),
        group_type: GroupType::Classic,
        state: g.group_state.to_string(),
        protocol_type: g.protocol_type.to_string(),
        assignor: g.protocol_data.to_string(),
        members: g
            .members
            .into_iter()
            .map(|m| MemberDescription {
                member_id: m.member_id.to_string(),
                group_instance_id: m.group_instance_id.map(|s| s.to_string()),
                client_id: m.client_id.to_string(),
                client_host: m.client_host.to_string(),
                // Only the consumer protocol's assignment is readable; a member of another kind
                // (Connect, say) shows none.
                assignment: consumer
                    .then(|| {
                        crate::protocol::consumer_protocol::decode_assignment(m.member_assignment)
                            .ok()
                    })
                    .flatten()
                    .map(|a| {
                        a.partitions
                            .iter()
                            .flat_map(|t| {
                                t.partitions
                                    .iter()
                                    .map(|p| TopicPartition::new(t.topic.clone(), *p))
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            })
            .collect(),
    })
}

async fn committed(
    cluster: &Arc<Cluster>,
    group: &str,
    partitions: Option<&[TopicPartition]>,
    deadline: Deadline,
) -> Result<ItemResults<TopicPartition, Option<OffsetAndMetadata>>> {
    let req = match partitions {
        Some(p) => crate::protocol::offsets::offset_fetch(group, p),
        None => OffsetFetchRequest::default()
            .with_group_id(GroupId(text(group)))
            .with_topics(None)
            .with_require_stable(true),
    };
    let resp = call_coordinator(cluster, group, &req, deadline, |r| r.error_code).await?;
    item_error(
        resp.error_code,
        None,
        format!("fetching the offsets of group `{group}`"),
    )?;
    let mut answers = BTreeMap::new();
    for t in resp.topics {
        for p in t.partitions {
            let tp = TopicPartition::new(t.name.0.to_string(), p.partition_index);
            let r =
                item_error(p.error_code, None, format!("fetching the offset of {tp}")).map(|()| {
                    (p.committed_offset >= 0).then(|| OffsetAndMetadata {
                        offset: p.committed_offset,
                        metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                    })
                });
            answers.insert(tp, r);
        }
    }
    Ok(match partitions {
        Some(p) => in_order(p.iter().cloned(), answers, "OffsetFetch"),
        None => answers.into_iter().collect(),
    })
}

async fn alter(
    cluster: &Arc<Cluster>,
    group: &str,
    offsets: &[(TopicPartition, OffsetAndMetadata)],
    deadline: Deadline,
) -> Result<ItemResults<TopicPartition>> {
    let (_, conn) = cluster.find_coordinator(group, deadline).await?;
    let version = conn.version::<OffsetCommitRequest>()?;
    let member = crate::protocol::group::Member {
        group_id: group,
        member_id: "",
        instance_id: None,
    };
    let req = crate::protocol::commit::offset_commit(member, -1, offsets, |_, _| -1, version);
    let resp = call_coordinator(cluster, group, &req, deadline, |r| {
        r.topics
            .first()
            .and_then(|t| t.partitions.first())
            .map_or(codes::NONE, |p| p.error_code)
    })
    .await?;
    let answers: BTreeMap<TopicPartition, Result<()>> =
        crate::protocol::commit::offset_commit_errors(resp)
            .into_iter()
            .map(|(tp, code)| {
                let r = item_error(
                    code,
                    None,
                    format!("committing the offset of {tp} for group `{group}`"),
                );
                (tp, r)
            })
            .collect();
    Ok(in_order(
        offsets.iter().map(|(tp, _)| tp.clone()),
        answers,
        "OffsetCommit",
    ))
}

/// One ListOffsets answer per partition; a partition that failed fails the call.
async fn end_offsets(
    cluster: &Arc<Cluster>,
    partitions: &[TopicPartition],
    spec: OffsetSpec,
    deadline: Deadline,
) -> Result<BTreeMap<TopicPartition, i64>> {
    let ts = match spec {
        OffsetSpec::Earliest => crate::offsets::EARLIEST_TIMESTAMP,
        OffsetSpec::Latest => crate::offsets::LATEST_TIMESTAMP,
        OffsetSpec::Timestamp(t) => t,
    };
    let wanted: Vec<(TopicPartition, i64)> = partitions.iter().map(|tp| (tp.clone(), ts)).collect();
    let mut out = BTreeMap::new();
    for (tp, r) in crate::offsets::list_offsets(
        cluster,
        &wanted,
        crate::config::IsolationLevel::ReadUncommitted,
        deadline,
    )
    .await?
    {
        out.insert(tp, r?.0);
    }
    Ok(out)
}
