//! The Produce request: encoded record batches by topic and partition. Pure; the producer's
//! sender (`producer::sender`) chooses the batches, sends the request and reads the answer.
use bytes::Bytes;

use crate::protocol::msg::produce_request::{PartitionProduceData, TopicProduceData};
use crate::protocol::msg::ProduceRequest;
use crate::protocol::{group_by_topic, topic_name};

/// Produce of `batches` (topic, partition, one encoded record batch) with `acks` (0, 1 or -1
/// for all in-sync replicas); `timeout_ms` bounds the broker's wait for those replicas.
pub(crate) fn produce<'a>(
    acks: i16,
    timeout_ms: i32,
    batches: impl IntoIterator<Item = (&'a str, i32, &'a Bytes)>,
) -> ProduceRequest {
    let topics = group_by_topic(batches.into_iter().map(|(topic, partition, records)| {
        let data = PartitionProduceData::default()
            .with_index(partition)
            .with_records(Some(records.clone()));
        (topic, data)
    }))
    .into_iter()
    .map(|(topic, partitions)| {
        TopicProduceData::default()
            .with_name(topic_name(topic))
            .with_partition_data(partitions)
    })
    .collect();
    ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(topics)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batches_are_grouped_by_topic_with_acks_and_timeout() {
        let (one, two, three) = (
            Bytes::from_static(b"batch-1"),
            Bytes::from_static(b"batch-2"),
            Bytes::from_static(b"batch-3"),
        );
        let req = produce(
            -1,
            30_000,
            [("t", 2, &one), ("u", 0, &two), ("t", 0, &three)],
        );
        assert_eq!((req.acks, req.timeout_ms), (-1, 30_000));
        let sent: Vec<(&str, i32, &[u8])> = req
            .topic_data
            .iter()
            .flat_map(|t| {
                t.partition_data.iter().map(move |p| {
                    (
                        t.name.0.as_str(),
                        p.index,
                        p.records.as_deref().unwrap_or_default(),
                    )
                })
            })
            .collect();
        assert_eq!(
            sent,
            vec![
                ("t", 2, &b"batch-1"[..]),
                ("t", 0, &b"batch-3"[..]),
                ("u", 0, &b"batch-2"[..])
            ]
        );
    }
}
