//! Offsets: position lookups (committed offset, else `auto.offset.reset`), ListOffsets for
//! earliest/latest/timestamps, and reading the group's committed offsets.
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

use crate::backoff::{Deadline, Retry};
use crate::cluster::{Cluster, Lane};
use crate::error::{codes, kafka_error_action, Action, Error, Result};
use crate::fetch::{reset_policy, LookupOutcome, PositionLookup, Shared};
use crate::protocol::msg::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use crate::protocol::msg::offset_fetch_request::OffsetFetchRequestTopic;
use crate::protocol::msg::{
    BrokerId, GroupId, ListOffsetsRequest, OffsetFetchRequest, StrBytes, TopicName,
};
use crate::recovery::RecoveryState;
use crate::TopicPartition;

/// ListOffsets' special timestamps.
pub const EARLIEST_TIMESTAMP: i64 = -2;
pub const LATEST_TIMESTAMP: i64 = -1;

/// The result of a commit, per partition: the offset and metadata sent for it (with
/// `enable.parallel.rebalance`, an offset asked past the low-water mark of a partition whose
/// recovery stream still runs is held at that mark, with the recovery token of what was delivered
/// below the offset asked: see [`crate::recovery::RecoveryState::committed_at`]), and whether the
/// group took it.
pub type CommitResults = Vec<(TopicPartition, OffsetAndMetadata, Result<()>)>;

/// A committed offset and its metadata string.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OffsetAndMetadata {
    pub offset: i64,
    pub metadata: String,
}

/// Gives each partition a position: the committed offset where the group has one, else the
/// reset policy.
pub(crate) async fn lookup_positions(
    shared: &Arc<Shared>,
    wanted: &[(TopicPartition, PositionLookup, u64)],
) -> Result<Vec<(TopicPartition, LookupOutcome)>> {
    let config = &shared.config;
    let deadline = Deadline::after(config.common.default_api_timeout);
    let mut out = Vec::new();
    let mut by_policy: Vec<(TopicPartition, PositionLookup)> = Vec::new();
    let committed_wanted: Vec<TopicPartition> = wanted
        .iter()
        .filter(|(_, l, _)| *l == PositionLookup::Committed)
        .map(|(tp, _, _)| tp.clone())
        .collect();
    let committed = match (&config.group_id, committed_wanted.is_empty()) {
        (Some(group), false) => {
            fetch_committed(&shared.cluster, group, &committed_wanted, deadline).await?
        }
        _ => HashMap::new(),
    };
    // KIP-333: committed partitions whose backlog may get a recovery stream need the log end.
    let mut takeovers: Vec<(TopicPartition, OffsetAndMetadata)> = Vec::new();
    for (tp, lookup, _) in wanted {
        match lookup {
            PositionLookup::Committed => match committed.get(tp) {
                Some(Some(c)) if c.offset >= 0 && config.enable_parallel_rebalance => {
                    takeovers.push((tp.clone(), c.clone()))
                }
                Some(Some(c)) if c.offset >= 0 => {
                    out.push((tp.clone(), LookupOutcome::Position(c.offset)))
                }
                _ => by_policy.push((tp.clone(), PositionLookup::ResetPolicy)),
            },
            other => by_policy.push((tp.clone(), *other)),
        }
    }
    if !takeovers.is_empty() {
        let ends: Vec<(TopicPartition, i64)> = takeovers
            .iter()
            .map(|(tp, _)| (tp.clone(), LATEST_TIMESTAMP))
            .collect();
        let mut ends: HashMap<TopicPartition, Result<(i64, i64)>> =
            list_offsets_with(&shared.cluster, &ends, deadline, false)
                .await?
                .into_iter()
                .collect();
        for (tp, c) in takeovers {
            let outcome = match ends.remove(&tp) {
                Some(Ok((log_end, _))) => {
                    let state = RecoveryState::on_assignment(
                        c.offset,
                        Some(&c.metadata),
                        log_end,
                        config.parallel_rebalance_min_lag,
                    );
                    if state.is_active() {
                        LookupOutcome::Recover(state)
                    } else {
                        LookupOutcome::Position(state.main_next)
                    }
                }
                Some(Err(e)) => LookupOutcome::Failed(e),
                None => LookupOutcome::Failed(Error::Transport(format!(
                    "no log end offset for {tp} in the ListOffsets answer"
                ))),
            };
            out.push((tp, outcome));
        }
    }
    let mut requests: Vec<(TopicPartition, i64)> = Vec::new();
    for (tp, lookup) in by_policy {
        let lookup = if lookup == PositionLookup::ResetPolicy {
            match reset_policy(config) {
                Some(l) => l,
                None => {
                    out.push((tp, LookupOutcome::NoOffset));
                    continue;
                }
            }
        } else {
            lookup
        };
        let ts = if lookup == PositionLookup::Earliest {
            EARLIEST_TIMESTAMP
        } else {
            LATEST_TIMESTAMP
        };
        requests.push((tp, ts));
    }
    if !requests.is_empty() {
        // One attempt: a partition whose leader is unknown or answers a retriable error fails
        // alone and is retried by the fetch loop after its own backoff, rather than holding up
        // the positions of every other partition in this request until the deadline (KIP-572).
        for (tp, r) in list_offsets_with(&shared.cluster, &requests, deadline, false).await? {
            out.push((
                tp,
                match r {
                    Ok((offset, _)) => LookupOutcome::Position(offset),
                    Err(e) => LookupOutcome::Failed(e),
                },
            ));
        }
    }
    Ok(out)
}

/// ListOffsets for each (partition, timestamp), sent to each partition's leader. The answer per
/// partition is (offset, timestamp); offset -1 when no record has a timestamp at or after it.
pub async fn list_offsets(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    deadline: Deadline,
) -> Result<Vec<(TopicPartition, Result<(i64, i64)>)>> {
    list_offsets_with(cluster, wanted, deadline, true).await
}

/// [`list_offsets`]; with `retry` false, partitions that fail with a retriable error (no leader,
/// a retriable error code, an unreachable leader) get that error at once instead of being retried
/// until the deadline.
async fn list_offsets_with(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    deadline: Deadline,
    retry: bool,
) -> Result<Vec<(TopicPartition, Result<(i64, i64)>)>> {
    let mut results: BTreeMap<TopicPartition, Result<(i64, i64)>> = BTreeMap::new();
    let mut todo: Vec<(TopicPartition, i64)> = wanted.to_vec();
    let mut backoff = Retry::new(cluster.backoff());
    let mut refreshed = false;
    while !todo.is_empty() {
        let mut meta = cluster.metadata();
        if todo
            .iter()
            .any(|(tp, _)| meta.partition(&tp.topic, tp.partition).is_none())
            && !refreshed
        {
            let topics: Vec<String> = todo.iter().map(|(tp, _)| tp.topic.clone()).collect();
            cluster.add_interest(topics.iter());
            meta = cluster.refresh(&topics, deadline).await?;
            refreshed = true;
        }
        let mut by_leader: BTreeMap<i32, Vec<(TopicPartition, i64, i32)>> = BTreeMap::new();
        // (partition, timestamp, why it failed this time)
        let mut retry_later: Vec<(TopicPartition, i64, Error)> = Vec::new();
        for (tp, ts) in todo.drain(..) {
            match meta.topics.get(&tp.topic) {
                None => {
                    results.insert(tp.clone(), Err(Error::UnknownTopic(tp.topic.clone())));
                }
                Some(t) if t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION => {
                    results.insert(tp.clone(), Err(Error::UnknownTopic(tp.topic.clone())));
                }
                Some(_) => match meta.partition(&tp.topic, tp.partition) {
                    None => {
                        results.insert(
                            tp.clone(),
                            Err(Error::InvalidArgument(format!(
                                "topic `{}` has no partition {}",
                                tp.topic, tp.partition
                            ))),
                        );
                    }
                    Some(p) if p.leader < 0 => {
                        let e = Error::kafka_partition(
                            codes::LEADER_NOT_AVAILABLE,
                            "list offsets: the partition has no leader",
                            &tp.topic,
                            tp.partition,
                        );
                        retry_later.push((tp, ts, e))
                    }
                    Some(p) => {
                        by_leader
                            .entry(p.leader)
                            .or_default()
                            .push((tp, ts, p.leader_epoch))
                    }
                },
            }
        }
        for (leader, parts) in by_leader {
            let mut topics: Vec<ListOffsetsTopic> = Vec::new();
            for (tp, ts, epoch) in &parts {
                let lp = ListOffsetsPartition::default()
                    .with_partition_index(tp.partition)
                    .with_timestamp(*ts)
                    .with_current_leader_epoch(*epoch);
                match topics.last_mut() {
                    Some(t) if t.name.0.as_str() == tp.topic => t.partitions.push(lp),
                    _ => topics.push(
                        ListOffsetsTopic::default()
                            .with_name(TopicName(StrBytes::from_string(tp.topic.clone())))
                            .with_partitions(vec![lp]),
                    ),
                }
            }
            let req = ListOffsetsRequest::default()
                .with_replica_id(BrokerId(-1))
                .with_isolation_level(0)
                .with_topics(topics)
                .with_timeout_ms(cluster.config.request_timeout.as_millis() as i32);
            let resp = async {
                let conn = cluster.broker(leader, deadline).await?;
                conn.call(&req).await
            }
            .await;
            match resp {
                Ok(resp) => {
                    let asked: HashMap<(String, i32), i64> = parts
                        .iter()
                        .map(|(tp, ts, _)| ((tp.topic.clone(), tp.partition), *ts))
                        .collect();
                    for t in resp.topics {
                        for p in t.partitions {
                            let tp = TopicPartition {
                                topic: t.name.0.to_string(),
                                partition: p.partition_index,
                            };
                            let Some(&ts) = asked.get(&(tp.topic.clone(), tp.partition)) else {
                                continue;
                            };
                            if p.error_code == codes::NONE {
                                results.insert(tp, Ok((p.offset, p.timestamp)));
                            } else {
                                let e = Error::kafka_partition(
                                    p.error_code,
                                    "list offsets",
                                    &tp.topic,
                                    tp.partition,
                                );
                                if matches!(
                                    kafka_error_action(p.error_code),
                                    Action::Retry | Action::RefreshMetadata
                                ) {
                                    retry_later.push((tp, ts, e));
                                } else {
                                    results.insert(tp, Err(e));
                                }
                            }
                        }
                    }
                }
                Err(e) if e.is_retriable() => {
                    retry_later.extend(parts.into_iter().map(|(tp, ts, _)| (tp, ts, e.clone())));
                }
                Err(e) => return Err(e),
            }
        }
        if !retry_later.is_empty() {
            if !retry {
                for (tp, _, e) in retry_later {
                    results.insert(tp, Err(e));
                }
                break;
            }
            let wait = backoff.failed();
            if deadline.remaining() <= wait {
                for (tp, _, _) in retry_later {
                    results.insert(tp, Err(deadline.error("list offsets")));
                }
                break;
            }
            tokio::time::sleep(wait).await;
            let _ = cluster.refresh(&[], deadline).await;
            todo = retry_later
                .into_iter()
                .map(|(tp, ts, _)| (tp, ts))
                .collect();
        }
    }
    Ok(results.into_iter().collect())
}

/// The group's committed offsets for `partitions` (None where nothing is committed).
pub async fn fetch_committed(
    cluster: &Cluster,
    group_id: &str,
    partitions: &[TopicPartition],
    deadline: Deadline,
) -> Result<HashMap<TopicPartition, Option<OffsetAndMetadata>>> {
    let mut by_topic: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for tp in partitions {
        by_topic
            .entry(tp.topic.as_str())
            .or_default()
            .push(tp.partition);
    }
    let topics: Vec<OffsetFetchRequestTopic> = by_topic
        .into_iter()
        .map(|(t, ps)| {
            OffsetFetchRequestTopic::default()
                .with_name(TopicName(StrBytes::from_string(t.to_string())))
                .with_partition_indexes(ps)
        })
        .collect();
    let req = OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group_id.to_string())))
        .with_topics(Some(topics))
        .with_require_stable(true);
    let mut retry = Retry::new(cluster.backoff());
    loop {
        let attempt = async {
            let (coordinator, conn) = cluster.find_coordinator(group_id, deadline).await?;
            let resp = conn
                .call(&req)
                .await
                .inspect_err(|_| cluster.disconnect(coordinator, Lane::Coordinator))?;
            if resp.error_code != codes::NONE {
                return Err(Error::kafka(
                    resp.error_code,
                    format!("fetching committed offsets of group `{group_id}`"),
                ));
            }
            let mut out = HashMap::new();
            for t in resp.topics {
                for p in t.partitions {
                    let tp = TopicPartition {
                        topic: t.name.0.to_string(),
                        partition: p.partition_index,
                    };
                    if p.error_code != codes::NONE {
                        return Err(Error::kafka_partition(
                            p.error_code,
                            "fetching committed offsets",
                            &tp.topic,
                            tp.partition,
                        ));
                    }
                    let v = (p.committed_offset >= 0).then(|| OffsetAndMetadata {
                        offset: p.committed_offset,
                        metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                    });
                    out.insert(tp, v);
                }
            }
            Ok(out)
        };
        match attempt.await {
            Ok(r) => return Ok(r),
            Err(e) => {
                let wait = retry.failed();
                if !e.is_retriable() || deadline.remaining() <= wait {
                    return Err(e);
                }
                tracing::debug!(error = %e, "OffsetFetch failed; retrying");
                tokio::time::sleep(wait).await;
            }
        }
    }
}
