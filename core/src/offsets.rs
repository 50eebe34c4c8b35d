//! Offsets: ListOffsets for earliest/latest/timestamps, reading the group's committed offsets,
//! and the bookkeeping of asynchronous commits. The fetch path's position lookups build on these
//! (`fetch::lookup`); nothing here depends on the fetch path.
use std::collections::{BTreeMap, HashMap};

use crate::backoff::{retry_until, Deadline, Retry};
use crate::cluster::{Cluster, Lane};
use crate::config::IsolationLevel;
use crate::error::{codes, kafka_error_action, Action, Error, Result};
use crate::protocol;
use crate::protocol::offsets::ListOffsetsFor;
use crate::types::TopicPartition;
// Also at its older path: `lagless::offsets::OffsetAndMetadata`.
pub use crate::types::OffsetAndMetadata;

/// ListOffsets' special timestamp for the log start offset (Java's
/// `ListOffsetsRequest.EARLIEST_TIMESTAMP`).
pub const EARLIEST_TIMESTAMP: i64 = -2;
/// ListOffsets' special timestamp for the log end, the high watermark (Java's
/// `ListOffsetsRequest.LATEST_TIMESTAMP`).
pub const LATEST_TIMESTAMP: i64 = -1;

/// The result of a commit, per partition: the offset and metadata sent for it (with
/// `enable.parallel.rebalance`, an offset asked past the low-water mark of a partition whose
/// recovery stream still runs is held at that mark, with the recovery token of what was delivered
/// below the offset asked as its metadata), and whether the group took it.
pub type CommitResults = Vec<(TopicPartition, OffsetAndMetadata, Result<()>)>;

/// What an asynchronous commit calls with its result.
pub(crate) type AsyncCommitDone = Box<dyn FnOnce(Result<CommitResults>) + Send>;

/// The asynchronous commits of one committer. At most one OffsetCommit is in flight; commits
/// asked for meanwhile wait, merged into one: per partition the newest offset wins (as a newer
/// `commitAsync` supersedes older ones in the Java client), sent once the one in flight is
/// answered. Nothing is retried, so no older offset can ever land after a newer one. Each
/// caller still gets a result, for the partitions it asked to commit.
pub(crate) struct AsyncCommits<C> {
    in_flight: bool,
    waiting: Option<MergedCommit<C>>,
}

/// Offsets to send in one OffsetCommit, and whom to tell the result.
pub(crate) struct MergedCommit<C> {
    pub offsets: BTreeMap<TopicPartition, OffsetAndMetadata>,
    /// Each caller with the partitions it asked for.
    pub callers: Vec<(Vec<TopicPartition>, C)>,
}

impl<C> Default for AsyncCommits<C> {
    fn default() -> Self {
        AsyncCommits {
            in_flight: false,
            waiting: None,
        }
    }
}

impl<C> AsyncCommits<C> {
    /// A new commit. Returns the commit to send now (nothing is in flight), else merges it
    /// into the waiting one and returns `None`.
    pub fn push(
        &mut self,
        offsets: Vec<(TopicPartition, OffsetAndMetadata)>,
        caller: C,
    ) -> Option<MergedCommit<C>> {
        let w = self.waiting.get_or_insert_with(|| MergedCommit {
            offsets: BTreeMap::new(),
            callers: Vec::new(),
        });
        w.callers
            .push((offsets.iter().map(|(tp, _)| tp.clone()).collect(), caller));
        w.offsets.extend(offsets);
        if self.in_flight {
            return None;
        }
        self.in_flight = true;
        self.waiting.take()
    }

    /// The commit in flight was answered. Returns the next to send (everything that waited,
    /// merged), or `None`: the committer is idle.
    pub fn answered(&mut self) -> Option<MergedCommit<C>> {
        let next = self.waiting.take();
        self.in_flight = next.is_some();
        next
    }

    /// Nothing in flight, nothing waiting.
    pub fn is_idle(&self) -> bool {
        !self.in_flight && self.waiting.is_none()
    }
}

impl<C> MergedCommit<C> {
    /// The result of the merged commit, split per caller: each gets the results of the
    /// partitions it asked for (with the offset that was sent, which may be a newer caller's);
    /// a failure of the whole request goes to every caller.
    pub fn split(self, result: &Result<CommitResults>) -> Vec<(C, Result<CommitResults>)> {
        self.callers
            .into_iter()
            .map(|(asked, caller)| {
                let r = match result {
                    Err(e) => Err(e.clone()),
                    Ok(all) => Ok(all
                        .iter()
                        .filter(|(tp, _, _)| asked.contains(tp))
                        .cloned()
                        .collect()),
                };
                (caller, r)
            })
            .collect()
    }
}

/// ListOffsets for each (partition, timestamp), sent to each partition's leader. The answer per
/// partition is (offset, timestamp); offset -1 when no record has a timestamp at or after it.
/// At `read_committed` the log end ([`LATEST_TIMESTAMP`]) is the last stable offset.
pub(crate) async fn list_offsets(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    isolation_level: IsolationLevel,
    deadline: Deadline,
) -> Result<Vec<(TopicPartition, Result<(i64, i64)>)>> {
    Ok(
        list_offsets_with(cluster, wanted, isolation_level, deadline, true)
            .await?
            .into_iter()
            .map(|(tp, r)| (tp, r.map(|l| (l.offset, l.timestamp))))
            .collect(),
    )
}

/// One partition's ListOffsets answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ListedOffset {
    pub offset: i64,
    pub timestamp: i64,
    /// KIP-320 (ListOffsets v4+): the leader epoch of the offset (of the record at it; for the
    /// log end, the leader's current epoch), -1 when the answer has none.
    pub leader_epoch: i32,
    /// The leader epoch the request was sent to (-1: unknown): an answer proves the offset was
    /// right under that leader.
    pub current_leader_epoch: i32,
}

/// [`list_offsets`], with each answer's leader epochs; with `retry` false, partitions that fail
/// with a retriable error (no leader, a retriable error code, an unreachable leader) get that
/// error at once instead of being retried until the deadline.
pub(crate) async fn list_offsets_with(
    cluster: &Cluster,
    wanted: &[(TopicPartition, i64)],
    isolation_level: IsolationLevel,
    deadline: Deadline,
    retry: bool,
) -> Result<Vec<(TopicPartition, Result<ListedOffset>)>> {
    let mut results: BTreeMap<TopicPartition, Result<ListedOffset>> = BTreeMap::new();
    let mut todo: Vec<(TopicPartition, i64)> = wanted.to_vec();
    // Not `backoff::retry_until`: one ListOffsets round answers many partitions, and only the
    // ones that failed retriably go round again (each against its current leader), while the
    // others keep their answers; at the deadline each unfinished partition gets its own Timeout.
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
            let req = protocol::offsets::list_offsets(
                parts.iter().map(|(tp, ts, epoch)| ListOffsetsFor {
                    partition: tp,
                    timestamp: *ts,
                    leader_epoch: *epoch,
                }),
                isolation_level,
                cluster.config.request_timeout.as_millis() as i32,
            );
            let resp = async {
                let conn = cluster.broker(leader, deadline).await?;
                conn.call_before(&req, deadline).await
            }
            .await;
            match resp {
                Ok(resp) => {
                    let asked: HashMap<(String, i32), (i64, i32)> = parts
                        .iter()
                        .map(|(tp, ts, epoch)| ((tp.topic.clone(), tp.partition), (*ts, *epoch)))
                        .collect();
                    for t in resp.topics {
                        for p in t.partitions {
                            let tp = TopicPartition {
                                topic: t.name.0.to_string(),
                                partition: p.partition_index,
                            };
                            let Some(&(ts, current_leader_epoch)) =
                                asked.get(&(tp.topic.clone(), tp.partition))
                            else {
                                continue;
                            };
                            if p.error_code == codes::NONE {
                                let listed = ListedOffset {
                                    offset: p.offset,
                                    timestamp: p.timestamp,
                                    leader_epoch: p.leader_epoch,
                                    current_leader_epoch,
                                };
                                results.insert(tp, Ok(listed));
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
pub(crate) async fn fetch_committed(
    cluster: &Cluster,
    group_id: &str,
    partitions: &[TopicPartition],
    deadline: Deadline,
) -> Result<HashMap<TopicPartition, Option<OffsetAndMetadata>>> {
    Ok(
        fetch_committed_with_epochs(cluster, group_id, partitions, deadline)
            .await?
            .into_iter()
            .map(|(tp, c)| (tp, c.map(|(om, _)| om)))
            .collect(),
    )
}

/// [`fetch_committed`], each offset with the leader epoch committed with it (KIP-320; -1 when
/// none was): the epoch of the position a consumer starts from.
pub(crate) async fn fetch_committed_with_epochs(
    cluster: &Cluster,
    group_id: &str,
    partitions: &[TopicPartition],
    deadline: Deadline,
) -> Result<HashMap<TopicPartition, Option<(OffsetAndMetadata, i32)>>> {
    let req = protocol::offsets::offset_fetch(group_id, partitions);
    retry_until(cluster.backoff(), deadline, "OffsetFetch", || async {
        let (coordinator, conn) = cluster.find_coordinator(group_id, deadline).await?;
        // A request that timed out leaves the connection to the heartbeats and commits on it (it
        // closes itself when broken); any other failure sends the next attempt to a coordinator
        // looked up again.
        let resp = conn.call_before(&req, deadline).await.inspect_err(|e| {
            if !matches!(e, Error::Timeout(_)) {
                cluster.disconnect(coordinator, Lane::Coordinator)
            }
        })?;
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
                let v = (p.committed_offset >= 0).then(|| {
                    let om = OffsetAndMetadata {
                        offset: p.committed_offset,
                        metadata: p.metadata.map(|m| m.to_string()).unwrap_or_default(),
                    };
                    (om, p.committed_leader_epoch)
                });
                out.insert(tp, v);
            }
        }
        Ok(out)
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tp(p: i32) -> TopicPartition {
        TopicPartition::new("t", p)
    }

    fn om(offset: i64) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            metadata: String::new(),
        }
    }

    #[test]
    fn the_first_commit_is_sent_at_once_and_later_ones_wait_merged() {
        let mut q = AsyncCommits::default();
        let first = q.push(vec![(tp(0), om(10)), (tp(1), om(5))], "a").unwrap();
        assert_eq!(first.offsets.len(), 2);
        assert!(q.push(vec![(tp(0), om(20))], "b").is_none());
        assert!(q.push(vec![(tp(0), om(30)), (tp(1), om(7))], "c").is_none());
        assert!(!q.is_idle());
        let next = q.answered().expect("the waiting commits go next");
        assert_eq!(
            next.offsets.into_iter().collect::<Vec<_>>(),
            vec![(tp(0), om(30)), (tp(1), om(7))],
            "the newest offset of each partition wins"
        );
        assert_eq!(
            next.callers.iter().map(|(_, c)| *c).collect::<Vec<_>>(),
            vec!["b", "c"]
        );
        assert!(!q.is_idle(), "the merged commit is in flight");
        assert!(q.answered().is_none());
        assert!(q.is_idle());
        // Idle again: the next commit goes at once.
        assert!(q.push(vec![(tp(0), om(40))], "d").is_some());
    }

    #[test]
    fn an_older_offset_never_follows_a_newer_one() {
        // Whatever the interleaving of pushes and answers, the offsets sent for a partition
        // are in the order they were asked for, each at most once.
        let mut q = AsyncCommits::default();
        let mut sent = Vec::new();
        for offset in 0..100i64 {
            if let Some(c) = q.push(vec![(tp(0), om(offset))], offset) {
                sent.push(c.offsets[&tp(0)].offset);
            }
            if offset % 7 == 3 {
                if let Some(c) = q.answered() {
                    sent.push(c.offsets[&tp(0)].offset);
                }
            }
        }
        while let Some(c) = q.answered() {
            sent.push(c.offsets[&tp(0)].offset);
        }
        assert!(sent.windows(2).all(|w| w[0] < w[1]), "{sent:?}");
        assert_eq!(sent.last(), Some(&99));
    }

    #[test]
    fn every_caller_gets_the_results_of_its_partitions() {
        let mut q = AsyncCommits::default();
        let _ = q.push(vec![(tp(9), om(1))], "in flight");
        assert!(q.push(vec![(tp(0), om(10))], "a").is_none());
        assert!(q.push(vec![(tp(1), om(5))], "b").is_none());
        assert!(q.push(Vec::new(), "nothing").is_none());
        let merged = q.answered().unwrap();
        let result: Result<CommitResults> = Ok(vec![
            (tp(0), om(10), Ok(())),
            (
                tp(1),
                om(5),
                Err(Error::kafka(codes::OFFSET_METADATA_TOO_LARGE, "x")),
            ),
        ]);
        let split = merged.split(&result);
        assert_eq!(split.len(), 3);
        let a = split[0].1.as_ref().unwrap();
        assert_eq!((split[0].0, a.len(), a[0].0.partition), ("a", 1, 0));
        let b = split[1].1.as_ref().unwrap();
        assert_eq!((split[1].0, b.len()), ("b", 1));
        assert!(b[0].2.is_err());
        assert_eq!(split[2].1.as_ref().unwrap().len(), 0);
        let failed = MergedCommit {
            offsets: BTreeMap::new(),
            callers: vec![(vec![tp(0)], 1), (vec![tp(1)], 2)],
        }
        .split(&Err(Error::Timeout("x".into())));
        assert!(failed.iter().all(|(_, r)| r.is_err()));
    }
}
