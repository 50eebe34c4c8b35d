//! OffsetCommit: the request built from the offsets to commit, and its answer read back as one
//! error code per partition. Pure; `consumer::commits` sends it, retries and decides what each
//! error means for the member.
use crate::protocol::group::Member;
use crate::protocol::msg::offset_commit_request::{
    OffsetCommitRequestPartition, OffsetCommitRequestTopic,
};
use crate::protocol::msg::{OffsetCommitRequest, OffsetCommitResponse, StrBytes};
use crate::protocol::{group_by_topic, topic_name};
use crate::types::OffsetAndMetadata;
use crate::types::TopicPartition;

/// OffsetCommit of `offsets` through `generation_id` (-1 for a consumer outside any group, as a
/// simple consumer commits), topics grouped in order of first appearance. `leader_epoch` gives
/// the leader epoch of each offset (KIP-320, v6+; -1 for unknown), which the next owner's
/// OffsetFetch returns to check the offset against the log.
pub(crate) fn offset_commit(
    member: Member<'_>,
    generation_id: i32,
    offsets: &[(TopicPartition, OffsetAndMetadata)],
    leader_epoch: impl Fn(&TopicPartition, i64) -> i32,
    version: i16,
) -> OffsetCommitRequest {
    let topics = group_by_topic(offsets.iter().map(|(tp, om)| {
        let partition = OffsetCommitRequestPartition::default()
            .with_partition_index(tp.partition)
            .with_committed_offset(om.offset)
            .with_committed_leader_epoch(if version >= 6 {
                leader_epoch(tp, om.offset)
            } else {
                -1
            })
            .with_committed_metadata(Some(StrBytes::from_string(om.metadata.clone())));
        (tp.topic.as_str(), partition)
    }))
    .into_iter()
    .map(|(topic, partitions)| {
        OffsetCommitRequestTopic::default()
            .with_name(topic_name(topic))
            .with_partitions(partitions)
    })
    .collect();
    let mut req = OffsetCommitRequest::default()
        .with_group_id(crate::protocol::msg::GroupId(StrBytes::from_string(
            member.group_id.to_string(),
        )))
        .with_generation_id_or_member_epoch(generation_id)
        .with_member_id(StrBytes::from_string(member.member_id.to_string()))
        .with_topics(topics);
    if version >= 7 {
        req =
            req.with_group_instance_id(member.instance_id.map(|s| StrBytes::from_string(s.into())));
    }
    if version <= 4 {
        // v2-v4 ask how long to keep the offsets; -1 is the broker's own retention.
        req = req.with_retention_time_ms(-1);
    }
    req
}

/// The answer, one `(partition, error code)` per partition it names, in its order.
pub(crate) fn offset_commit_errors(resp: OffsetCommitResponse) -> Vec<(TopicPartition, i16)> {
    resp.topics
        .into_iter()
        .flat_map(|t| {
            let topic = t.name.0.to_string();
            t.partitions.into_iter().map(move |p| {
                (
                    TopicPartition::new(topic.clone(), p.partition_index),
                    p.error_code,
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::msg::offset_commit_response::{
        OffsetCommitResponsePartition, OffsetCommitResponseTopic,
    };

    const MEMBER: Member<'static> = Member {
        group_id: "g",
        member_id: "m-1",
        instance_id: Some("host-7"),
    };

    fn om(offset: i64, metadata: &str) -> OffsetAndMetadata {
        OffsetAndMetadata {
            offset,
            metadata: metadata.to_string(),
        }
    }

    #[test]
    fn offsets_are_grouped_by_topic_with_their_metadata() {
        let offsets = vec![
            (TopicPartition::new("b", 1), om(10, "")),
            (TopicPartition::new("a", 0), om(5, "lagless:r1")),
            (TopicPartition::new("b", 0), om(7, "x")),
        ];
        // Epochs known for topic b's partitions (by offset), not for a's.
        let epochs = |tp: &TopicPartition, offset: i64| match (tp.topic.as_str(), offset) {
            ("b", 10) => 4,
            ("b", 7) => 3,
            _ => -1,
        };
        let req = offset_commit(MEMBER, 3, &offsets, epochs, 8);
        assert_eq!(req.group_id.0.as_str(), "g");
        assert_eq!(req.generation_id_or_member_epoch, 3);
        assert_eq!(req.member_id.as_str(), "m-1");
        let sent: Vec<(&str, i32, i64, i32, Option<&str>)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.name.0.as_str(),
                        p.partition_index,
                        p.committed_offset,
                        p.committed_leader_epoch,
                        p.committed_metadata.as_deref(),
                    )
                })
            })
            .collect();
        assert_eq!(
            sent,
            vec![
                ("b", 1, 10, 4, Some("")),
                ("b", 0, 7, 3, Some("x")),
                ("a", 0, 5, -1, Some("lagless:r1")),
            ]
        );
    }

    #[test]
    fn instance_id_from_v7_and_retention_up_to_v4() {
        let offsets = vec![(TopicPartition::new("t", 0), om(1, ""))];
        let epoch = |_: &TopicPartition, _| 5;
        let v4 = offset_commit(MEMBER, 3, &offsets, epoch, 4);
        assert_eq!(v4.retention_time_ms, -1);
        assert_eq!(v4.group_instance_id, None);
        // The leader epoch came with v6: before it, none is sent (encoding one would fail).
        assert_eq!(v4.topics[0].partitions[0].committed_leader_epoch, -1);
        let mut framed = bytes::BytesMut::new();
        kafka_protocol::protocol::Encodable::encode(&v4, &mut framed, 4).expect("v4 encodes");
        let v7 = offset_commit(MEMBER, 3, &offsets, epoch, 7);
        assert_eq!(v7.topics[0].partitions[0].committed_leader_epoch, 5);
        assert_eq!(v7.group_instance_id.as_deref(), Some("host-7"));
        let simple = Member {
            member_id: "",
            instance_id: None,
            ..MEMBER
        };
        let outside = offset_commit(simple, -1, &offsets, epoch, 9);
        assert_eq!(outside.generation_id_or_member_epoch, -1);
        assert_eq!(outside.member_id.as_str(), "");
        assert_eq!(outside.group_instance_id, None);
    }

    #[test]
    fn the_answer_gives_one_code_per_partition_named() {
        let part = |i, code| {
            OffsetCommitResponsePartition::default()
                .with_partition_index(i)
                .with_error_code(code)
        };
        let resp = OffsetCommitResponse::default().with_topics(vec![
            OffsetCommitResponseTopic::default()
                .with_name(topic_name("b"))
                .with_partitions(vec![part(1, 0), part(0, 27)]),
            OffsetCommitResponseTopic::default()
                .with_name(topic_name("a"))
                .with_partitions(vec![part(0, 22)]),
        ]);
        assert_eq!(
            offset_commit_errors(resp),
            vec![
                (TopicPartition::new("b", 1), 0),
                (TopicPartition::new("b", 0), 27),
                (TopicPartition::new("a", 0), 22),
            ]
        );
        assert!(offset_commit_errors(OffsetCommitResponse::default()).is_empty());
    }
}
