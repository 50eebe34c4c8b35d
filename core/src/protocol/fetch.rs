//! The Fetch request, built from the partitions to read and the consumer's fetch limits. Pure;
//! `fetch::task` chooses the partitions and offsets, sends it and decodes the answer.
use crate::config::IsolationLevel;
use crate::protocol::msg::fetch_request::{FetchPartition, FetchTopic};
use crate::protocol::msg::{BrokerId, FetchRequest, StrBytes};
use crate::protocol::{group_by_topic, topic_name};
use crate::types::TopicPartition;

/// What bounds one Fetch (`fetch.max.wait.ms`, `fetch.min.bytes`, `fetch.max.bytes`,
/// `max.partition.fetch.bytes`), the rack it is sent from (`client.rack`, KIP-392: the leader
/// may then name a follower in that rack to read from) and what it may read
/// (`isolation.level`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct FetchLimits<'a> {
    pub max_wait_ms: i32,
    pub min_bytes: i32,
    pub max_bytes: i32,
    pub partition_max_bytes: i32,
    pub rack_id: &'a str,
    pub isolation_level: IsolationLevel,
}

/// One partition to read: from `offset`, as the leader of `leader_epoch` (-1 when unknown; the
/// broker then skips the fencing check). `last_fetched_epoch` (KIP-320, v12+): the leader epoch
/// of the batch before `offset` (-1 when unknown: no check); a leader whose log of that epoch
/// ends below `offset` answers with the diverging epoch instead of records.
pub(crate) struct FetchFrom<'a> {
    pub partition: &'a TopicPartition,
    pub offset: i64,
    pub leader_epoch: i32,
    pub last_fetched_epoch: i32,
}

/// A full (sessionless) Fetch as a consumer (replica -1). At `read_committed` the broker returns
/// records below the last stable offset only, with the answer's aborted transactions.
pub(crate) fn fetch<'a>(
    limits: FetchLimits<'_>,
    partitions: impl IntoIterator<Item = FetchFrom<'a>>,
) -> FetchRequest {
    let topics = group_by_topic(partitions.into_iter().map(|from| {
        let partition = FetchPartition::default()
            .with_partition(from.partition.partition)
            .with_fetch_offset(from.offset)
            .with_current_leader_epoch(from.leader_epoch)
            .with_last_fetched_epoch(from.last_fetched_epoch)
            .with_log_start_offset(-1)
            .with_partition_max_bytes(limits.partition_max_bytes);
        (from.partition.topic.as_str(), partition)
    }))
    .into_iter()
    .map(|(topic, partitions)| {
        FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(partitions)
    })
    .collect();
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(limits.max_wait_ms)
        .with_min_bytes(limits.min_bytes)
        .with_max_bytes(limits.max_bytes)
        .with_isolation_level(isolation_level(limits.isolation_level))
        // Session 0, epoch -1: a full fetch that opens no fetch session (KIP-227); the fetch
        // task's `FetchSession` turns it into its session's request.
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics)
        .with_rack_id(StrBytes::from_string(limits.rack_id.to_string()))
}

/// The wire value of `level` in Fetch and ListOffsets: 0 read_uncommitted, 1 read_committed.
pub(crate) fn isolation_level(level: IsolationLevel) -> i8 {
    match level {
        IsolationLevel::ReadUncommitted => 0,
        IsolationLevel::ReadCommitted => 1,
    }
}

/// Fits `req` to the Fetch `version` the connection speaks: KIP-320's `last_fetched_epoch` came
/// with v12, and a request carrying one cannot be encoded at an older version. A broker that
/// speaks only those (before Kafka 2.7) gets no epoch, and with it no truncation check.
pub(crate) fn fit_to_version(req: &mut FetchRequest, version: i16) {
    if version < 12 {
        for p in req.topics.iter_mut().flat_map(|t| t.partitions.iter_mut()) {
            p.last_fetched_epoch = -1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn partitions_are_grouped_by_topic_with_offsets_epochs_and_limits() {
        let a0 = TopicPartition::new("a", 0);
        let b2 = TopicPartition::new("b", 2);
        let a1 = TopicPartition::new("a", 1);
        let limits = FetchLimits {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 52_428_800,
            partition_max_bytes: 1_048_576,
            rack_id: "rack-b",
            isolation_level: IsolationLevel::ReadUncommitted,
        };
        let from = |partition, offset, leader_epoch, last_fetched_epoch| FetchFrom {
            partition,
            offset,
            leader_epoch,
            last_fetched_epoch,
        };
        let req = fetch(
            limits,
            [
                from(&a0, 10, 3, 2),
                from(&b2, 0, -1, -1),
                from(&a1, 7, 3, 3),
            ],
        );
        assert_eq!(req.replica_id.0, -1);
        assert_eq!(
            (req.max_wait_ms, req.min_bytes, req.max_bytes),
            (500, 1, 52_428_800)
        );
        assert_eq!((req.session_id, req.session_epoch), (0, -1));
        assert_eq!(req.isolation_level, 0);
        assert_eq!(req.rack_id.as_str(), "rack-b");
        let committed = FetchLimits {
            isolation_level: IsolationLevel::ReadCommitted,
            ..limits
        };
        assert_eq!(fetch(committed, [from(&a0, 10, 3, 2)]).isolation_level, 1);
        let sent: Vec<(&str, i32, i64, i32, i32, i64, i32)> = req
            .topics
            .iter()
            .flat_map(|t| {
                t.partitions.iter().map(move |p| {
                    (
                        t.topic.0.as_str(),
                        p.partition,
                        p.fetch_offset,
                        p.current_leader_epoch,
                        p.last_fetched_epoch,
                        p.log_start_offset,
                        p.partition_max_bytes,
                    )
                })
            })
            .collect();
        assert_eq!(
            sent,
            vec![
                ("a", 0, 10, 3, 2, -1, 1_048_576),
                ("a", 1, 7, 3, 3, -1, 1_048_576),
                ("b", 2, 0, -1, -1, -1, 1_048_576),
            ]
        );
    }

    /// A request with epochs encodes at v12; fitted, also at v11 (where it otherwise fails).
    #[test]
    fn the_last_fetched_epoch_is_left_out_below_v12() {
        use kafka_protocol::protocol::Encodable;
        let tp = TopicPartition::new("a", 0);
        let limits = FetchLimits {
            max_wait_ms: 500,
            min_bytes: 1,
            max_bytes: 1024,
            partition_max_bytes: 1024,
            rack_id: "",
            isolation_level: IsolationLevel::ReadCommitted,
        };
        let from = FetchFrom {
            partition: &tp,
            offset: 10,
            leader_epoch: 3,
            last_fetched_epoch: 2,
        };
        let encodes =
            |req: &FetchRequest, version| req.encode(&mut bytes::BytesMut::new(), version).is_ok();
        let mut req = fetch(limits, [from]);
        assert!(encodes(&req, 12));
        assert!(!encodes(&req, 11), "v11 cannot carry last_fetched_epoch");
        fit_to_version(&mut req, 12);
        assert_eq!(req.topics[0].partitions[0].last_fetched_epoch, 2);
        fit_to_version(&mut req, 11);
        assert_eq!(req.topics[0].partitions[0].last_fetched_epoch, -1);
        assert!(encodes(&req, 11));
    }
}
