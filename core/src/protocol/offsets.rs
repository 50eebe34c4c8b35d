//! ListOffsets (offsets by timestamp, the log start and end) and OffsetFetch (a group's
//! committed offsets), built from lagless' own values. Pure; `crate::offsets` sends them and
//! reads the answers.
use crate::config::IsolationLevel;
use crate::protocol::msg::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use crate::protocol::msg::offset_fetch_request::OffsetFetchRequestTopic;
use crate::protocol::msg::{BrokerId, GroupId, ListOffsetsRequest, OffsetFetchRequest, StrBytes};
use crate::protocol::{group_by_topic, topic_name};
use crate::types::TopicPartition;

/// One partition to look an offset up for: the first offset at or after `timestamp` (or -1 for
/// the log end, -2 for the log start), as the leader of `leader_epoch` (-1: unknown).
pub(crate) struct ListOffsetsFor<'a> {
    pub partition: &'a TopicPartition,
    pub timestamp: i64,
    pub leader_epoch: i32,
}

/// ListOffsets as a consumer (replica -1) at `isolation_level`, topics grouped in order of first
/// appearance; `timeout_ms` bounds the broker's own wait. At `read_committed` the log end (-1)
/// is the last stable offset.
pub(crate) fn list_offsets<'a>(
    partitions: impl IntoIterator<Item = ListOffsetsFor<'a>>,
    isolation_level: IsolationLevel,
    timeout_ms: i32,
) -> ListOffsetsRequest {
    let topics = group_by_topic(partitions.into_iter().map(|p| {
        let partition = ListOffsetsPartition::default()
            .with_partition_index(p.partition.partition)
            .with_timestamp(p.timestamp)
            .with_current_leader_epoch(p.leader_epoch);
        (p.partition.topic.as_str(), partition)
    }))
    .into_iter()
    .map(|(topic, partitions)| {
        ListOffsetsTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(partitions)
    })
    .collect();
    ListOffsetsRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_isolation_level(super::fetch::isolation_level(isolation_level))
        .with_topics(topics)
        .with_timeout_ms(timeout_ms)
}

/// OffsetFetch of `partitions` of `group_id`, asking for stable offsets only (KIP-447: the
/// broker answers UNSTABLE_OFFSET_COMMIT while a transaction's commit is pending, and the
/// lookup is tried again, rather than giving an offset about to change).
pub(crate) fn offset_fetch(group_id: &str, partitions: &[TopicPartition]) -> OffsetFetchRequest {
    let topics = group_by_topic(
        partitions
            .iter()
            .map(|tp| (tp.topic.as_str(), tp.partition)),
    )
    .into_iter()
    .map(|(topic, indexes)| {
        OffsetFetchRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partition_indexes(indexes)
    })
    .collect();
    OffsetFetchRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group_id.to_string())))
        .with_topics(Some(topics))
        .with_require_stable(true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_offsets_groups_partitions_with_their_timestamps_and_epochs() {
        let (a0, b1, a2) = (
            TopicPartition::new("a", 0),
            TopicPartition::new("b", 1),
            TopicPartition::new("a", 2),
        );
        let at = |partition, timestamp, leader_epoch| ListOffsetsFor {
            partition,
            timestamp,
            leader_epoch,
        };
        let req = list_offsets(
            [
                at(&a0, -2, 4),
                at(&b1, -1, -1),
                at(&a2, 1_700_000_000_000, 4),
            ],
            IsolationLevel::ReadUncommitted,
            30_000,
        );
        assert_eq!(req.replica_id.0, -1);
        assert_eq!(req.isolation_level, 0);
        let committed = list_offsets([at(&a0, -1, 4)], IsolationLevel::ReadCommitted, 30_000);
        assert_eq!(committed.isolation_level, 1);
        assert_eq!(req.timeout_ms, 30_000);
        let sent: Vec<(&str, i32, i64, i32)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.0.as_str(),
                        p.partition_index,
                        p.timestamp,
                        p.current_leader_epoch,
                    )
                })
            })
            .collect();
        assert_eq!(
            sent,
            vec![
                ("a", 0, -2, 4),
                ("a", 2, 1_700_000_000_000, 4),
                ("b", 1, -1, -1)
            ]
        );
    }

    #[test]
    fn offset_fetch_asks_for_stable_offsets_of_the_partitions_by_topic() {
        let req = offset_fetch(
            "g",
            &[
                TopicPartition::new("t", 1),
                TopicPartition::new("u", 0),
                TopicPartition::new("t", 0),
            ],
        );
        assert_eq!(req.group_id.0.as_str(), "g");
        assert!(req.require_stable);
        let topics: Vec<(&str, Vec<i32>)> = req
            .topics
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| (t.name.0.as_str(), t.partition_indexes.clone()))
            .collect();
        assert_eq!(topics, vec![("t", vec![1, 0]), ("u", vec![0])]);
    }
}
