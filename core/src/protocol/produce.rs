//! The Produce request: encoded record batches by topic and partition. Pure; the producer's
//! sender (`producer::sender`) chooses the batches, sends the request and reads the answer.
use bytes::Bytes;

use crate::protocol::msg::produce_request::{PartitionProduceData, TopicProduceData};
use crate::protocol::msg::{InitProducerIdRequest, ProduceRequest, ProducerId, StrBytes};
use crate::protocol::{group_by_topic, topic_name};

/// Produce of `batches` (topic, partition, one encoded record batch) with `acks` (0, 1 or -1
/// for all in-sync replicas); `timeout_ms` bounds the broker's wait for those replicas;
/// `transactional_id` is a transactional producer's.
pub(crate) fn produce<'a>(
    transactional_id: Option<&str>,
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
        .with_transactional_id(
            transactional_id
                .map(|t| crate::protocol::msg::TransactionalId(StrBytes::from_string(t.into()))),
        )
        .with_acks(acks)
        .with_timeout_ms(timeout_ms)
        .with_topic_data(topics)
}

/// InitProducerId of an idempotent producer: no transactional id, so any broker answers with a
/// new producer id and epoch 0 (the broker ignores a current id and epoch without a
/// transactional id). The transaction timeout is the Java producer's for this case.
pub(crate) fn init_producer_id() -> InitProducerIdRequest {
    InitProducerIdRequest::default()
        .with_transactional_id(None)
        .with_transaction_timeout_ms(i32::MAX)
        .with_producer_id(ProducerId(-1))
        .with_producer_epoch(-1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_producer_id_asks_for_a_new_id_without_a_transactional_id() {
        let req = init_producer_id();
        assert!(req.transactional_id.is_none());
        assert_eq!((req.producer_id.0, req.producer_epoch), (-1, -1));
        assert_eq!(req.transaction_timeout_ms, i32::MAX);
    }

    #[test]
    fn batches_are_grouped_by_topic_with_acks_and_timeout() {
        let (one, two, three) = (
            Bytes::from_static(b"batch-1"),
            Bytes::from_static(b"batch-2"),
            Bytes::from_static(b"batch-3"),
        );
        let req = produce(
            None,
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
