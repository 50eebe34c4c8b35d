//! OffsetForLeaderEpoch (KIP-320): where a leader's log of a leader epoch ends, asked by a
//! consumer to validate its positions after a leader change. Pure; `fetch::lookup` sends it and
//! reads the answers.
use crate::protocol::msg::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use crate::protocol::msg::{BrokerId, OffsetForLeaderEpochRequest};
use crate::protocol::{group_by_topic, topic_name};
use crate::types::TopicPartition;

/// The lowest version a consumer sends, as the Java client's `forConsumer`: before v3 the request
/// has no replica id (it was for followers only) and the broker asks for CLUSTER permission,
/// which consumers do not usually have; from v3 TOPIC Describe is enough. A broker with nothing
/// from v3 on (before Kafka 2.3) gets no validation, as the Java client skips it.
pub(crate) const CONSUMER_MIN_VERSION: i16 = 3;

/// Whether a connection speaking OffsetForLeaderEpoch `version` (the highest both sides speak;
/// `None`: the broker has no version lagless speaks) can validate a consumer's positions.
pub(crate) fn usable(version: Option<i16>) -> bool {
    version.is_some_and(|v| v >= CONSUMER_MIN_VERSION)
}

/// One position to validate: the leader's end offset of `leader_epoch` (the epoch of the last
/// record fetched before the position), asked of the leader of `current_leader_epoch` (-1:
/// unknown, no fencing check).
pub(crate) struct EpochOf<'a> {
    pub partition: &'a TopicPartition,
    pub current_leader_epoch: i32,
    pub leader_epoch: i32,
}

/// OffsetForLeaderEpoch as a consumer (replica -1), topics grouped in order of first appearance.
pub(crate) fn offset_for_leader_epoch<'a>(
    partitions: impl IntoIterator<Item = EpochOf<'a>>,
) -> OffsetForLeaderEpochRequest {
    let topics = group_by_topic(partitions.into_iter().map(|p| {
        let partition = OffsetForLeaderPartition::default()
            .with_partition(p.partition.partition)
            .with_current_leader_epoch(p.current_leader_epoch)
            .with_leader_epoch(p.leader_epoch);
        (p.partition.topic.as_str(), partition)
    }))
    .into_iter()
    .map(|(topic, partitions)| {
        OffsetForLeaderTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(partitions)
    })
    .collect();
    OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_topics(topics)
}

#[cfg(test)]
mod tests {
    use super::*;
    use kafka_protocol::protocol::Encodable;

    #[test]
    fn partitions_are_grouped_by_topic_with_both_epochs_as_a_consumer() {
        let (a0, b1, a2) = (
            TopicPartition::new("a", 0),
            TopicPartition::new("b", 1),
            TopicPartition::new("a", 2),
        );
        let of = |partition, current_leader_epoch, leader_epoch| EpochOf {
            partition,
            current_leader_epoch,
            leader_epoch,
        };
        let req = offset_for_leader_epoch([of(&a0, 7, 5), of(&b1, -1, 0), of(&a2, 7, 6)]);
        assert_eq!(req.replica_id.0, -1);
        let sent: Vec<(&str, i32, i32, i32)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.topic.0.as_str(),
                        p.partition,
                        p.current_leader_epoch,
                        p.leader_epoch,
                    )
                })
            })
            .collect();
        assert_eq!(sent, vec![("a", 0, 7, 5), ("a", 2, 7, 6), ("b", 1, -1, 0)]);
        // It encodes at every version a consumer uses.
        for v in CONSUMER_MIN_VERSION..=4 {
            assert!(req.encode(&mut bytes::BytesMut::new(), v).is_ok(), "v{v}");
        }
    }

    #[test]
    fn only_v3_and_later_validate_a_consumers_positions() {
        let cases = [
            (None, false),
            (Some(2), false),
            (Some(3), true),
            (Some(4), true),
        ];
        for (version, want) in cases {
            assert_eq!(usable(version), want, "{version:?}");
        }
    }
}
