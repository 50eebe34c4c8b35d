//! The requests of a transactional producer (the classic protocol, transaction version 1):
//! FindCoordinator of a transactional id, InitProducerId with it, AddPartitionsToTxn,
//! AddOffsetsToTxn, TxnOffsetCommit and EndTxn. Pure builders and answer readers; the producer
//! (`producer::transactional`) sends them.
use crate::error::{codes, Error, Result};
use crate::protocol::msg::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use crate::protocol::msg::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use crate::protocol::msg::{
    AddOffsetsToTxnRequest, AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, EndTxnRequest,
    FindCoordinatorRequest, GroupId, InitProducerIdRequest, ProducerId, StrBytes, TransactionalId,
    TxnOffsetCommitRequest, TxnOffsetCommitResponse,
};
use crate::protocol::{group_by_topic, topic_name};

/// FindCoordinator's key type of a transactional id (0 is a group).
pub(crate) const TRANSACTION_KEY: i8 = 1;

fn txn_id(id: &str) -> TransactionalId {
    TransactionalId(StrBytes::from_string(id.to_string()))
}

/// FindCoordinator of the transaction coordinator of `transactional_id`.
pub(crate) fn find_coordinator(transactional_id: &str, version: i16) -> FindCoordinatorRequest {
    let key = StrBytes::from_string(transactional_id.to_string());
    let req = FindCoordinatorRequest::default().with_key_type(TRANSACTION_KEY);
    if version >= 4 {
        req.with_coordinator_keys(vec![key])
    } else {
        req.with_key(key)
    }
}

/// InitProducerId of a transactional producer. `current`: the producer id and epoch it has
/// (KIP-360: the coordinator bumps that epoch instead of handing out a new id), or none on the
/// first call. Either way the coordinator aborts (or completes) the transactional id's open
/// transaction and fences every older epoch.
pub(crate) fn init_producer_id(
    transactional_id: &str,
    timeout_ms: i32,
    current: Option<(i64, i16)>,
) -> InitProducerIdRequest {
    let (id, epoch) = current.unwrap_or((-1, -1));
    InitProducerIdRequest::default()
        .with_transactional_id(Some(txn_id(transactional_id)))
        .with_transaction_timeout_ms(timeout_ms)
        .with_producer_id(ProducerId(id))
        .with_producer_epoch(epoch)
}

/// AddPartitionsToTxn (v3 and below: one transaction) of `partitions`.
pub(crate) fn add_partitions<'a>(
    transactional_id: &str,
    pid: (i64, i16),
    partitions: impl IntoIterator<Item = (&'a str, i32)>,
) -> AddPartitionsToTxnRequest {
    let topics = group_by_topic(partitions)
        .into_iter()
        .map(|(t, ps)| {
            AddPartitionsToTxnTopic::default()
                .with_name(topic_name(t))
                .with_partitions(ps)
        })
        .collect();
    AddPartitionsToTxnRequest::default()
        .with_v3_and_below_transactional_id(txn_id(transactional_id))
        .with_v3_and_below_producer_id(ProducerId(pid.0))
        .with_v3_and_below_producer_epoch(pid.1)
        .with_v3_and_below_topics(topics)
}

/// The partitions an AddPartitionsToTxn answer refused, with their codes; empty when every
/// partition was added.
pub(crate) fn add_partitions_errors(resp: &AddPartitionsToTxnResponse) -> Vec<(String, i32, i16)> {
    resp.results_by_topic_v3_and_below
        .iter()
        .flat_map(|t| {
            t.results_by_partition
                .iter()
                .filter(|p| p.partition_error_code != codes::NONE)
                .map(move |p| {
                    (
                        t.name.0.to_string(),
                        p.partition_index,
                        p.partition_error_code,
                    )
                })
        })
        .collect()
}

/// AddOffsetsToTxn: the group's offsets partition joins the transaction.
pub(crate) fn add_offsets(
    transactional_id: &str,
    pid: (i64, i16),
    group_id: &str,
) -> AddOffsetsToTxnRequest {
    AddOffsetsToTxnRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_producer_id(ProducerId(pid.0))
        .with_producer_epoch(pid.1)
        .with_group_id(GroupId(StrBytes::from_string(group_id.to_string())))
}

/// The consumer's group membership a TxnOffsetCommit carries (KIP-447), so that the group
/// coordinator refuses the commit of a member that lost its generation.
pub(crate) struct Membership<'a> {
    pub group_id: &'a str,
    pub generation_id: i32,
    pub member_id: &'a str,
    pub group_instance_id: Option<&'a str>,
}

/// TxnOffsetCommit of `offsets` (topic, partition, offset, leader epoch or -1, metadata) for the
/// group.
pub(crate) fn txn_offset_commit<'a>(
    transactional_id: &str,
    pid: (i64, i16),
    member: &Membership<'_>,
    offsets: impl IntoIterator<Item = (&'a str, i32, i64, i32, &'a str)>,
) -> TxnOffsetCommitRequest {
    let topics = group_by_topic(offsets.into_iter().map(|(t, p, o, epoch, m)| {
        (
            t,
            TxnOffsetCommitRequestPartition::default()
                .with_partition_index(p)
                .with_committed_offset(o)
                .with_committed_leader_epoch(epoch)
                .with_committed_metadata(Some(StrBytes::from_string(m.to_string()))),
        )
    }))
    .into_iter()
    .map(|(t, ps)| {
        TxnOffsetCommitRequestTopic::default()
            .with_name(topic_name(t))
            .with_partitions(ps)
    })
    .collect();
    TxnOffsetCommitRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_group_id(GroupId(StrBytes::from_string(member.group_id.to_string())))
        .with_producer_id(ProducerId(pid.0))
        .with_producer_epoch(pid.1)
        .with_generation_id(member.generation_id)
        .with_member_id(StrBytes::from_string(member.member_id.to_string()))
        .with_group_instance_id(
            member
                .group_instance_id
                .map(|i| StrBytes::from_string(i.to_string())),
        )
        .with_topics(topics)
}

/// The first error code of a TxnOffsetCommit answer (they are per partition), or NONE.
pub(crate) fn txn_offset_commit_error(resp: &TxnOffsetCommitResponse) -> i16 {
    resp.topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .map(|p| p.error_code)
        .find(|c| *c != codes::NONE)
        .unwrap_or(codes::NONE)
}

/// EndTxn: commit (`commit`) or abort the transaction.
pub(crate) fn end_txn(transactional_id: &str, pid: (i64, i16), commit: bool) -> EndTxnRequest {
    EndTxnRequest::default()
        .with_transactional_id(txn_id(transactional_id))
        .with_producer_id(ProducerId(pid.0))
        .with_producer_epoch(pid.1)
        .with_committed(commit)
}

/// The coordinator a FindCoordinator answer names, or its error.
pub(crate) fn coordinator(
    resp: &crate::protocol::msg::FindCoordinatorResponse,
    version: i16,
    transactional_id: &str,
) -> Result<(i32, String)> {
    let (code, id, addr) = crate::protocol::group::coordinator_of(resp, version)?;
    if code != codes::NONE {
        return Err(Error::kafka(
            code,
            format!("finding the transaction coordinator of `{transactional_id}`"),
        ));
    }
    Ok((id, addr))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::msg::add_partitions_to_txn_response::{
        AddPartitionsToTxnPartitionResult, AddPartitionsToTxnTopicResult,
    };

    #[test]
    fn requests_carry_the_transactional_id_and_producer_state() {
        let f = find_coordinator("tx", 4);
        assert_eq!(f.key_type, TRANSACTION_KEY);
        assert_eq!(f.coordinator_keys[0].as_str(), "tx");
        assert_eq!(find_coordinator("tx", 3).key.as_str(), "tx");
        let i = init_producer_id("tx", 60_000, None);
        assert_eq!(i.transactional_id.as_ref().unwrap().0.as_str(), "tx");
        assert_eq!((i.producer_id.0, i.producer_epoch), (-1, -1));
        assert_eq!(i.transaction_timeout_ms, 60_000);
        let i = init_producer_id("tx", 1000, Some((7, 3)));
        assert_eq!((i.producer_id.0, i.producer_epoch), (7, 3));
        let a = add_partitions("tx", (7, 3), [("a", 1), ("b", 0), ("a", 0)]);
        let got: Vec<(&str, Vec<i32>)> = a
            .v3_and_below_topics
            .iter()
            .map(|t| (t.name.0.as_str(), t.partitions.clone()))
            .collect();
        assert_eq!(got, vec![("a", vec![1, 0]), ("b", vec![0])]);
        assert_eq!(
            (a.v3_and_below_producer_id.0, a.v3_and_below_producer_epoch),
            (7, 3)
        );
        let m = Membership {
            group_id: "g",
            generation_id: 5,
            member_id: "m-1",
            group_instance_id: Some("i"),
        };
        let c = txn_offset_commit("tx", (7, 3), &m, [("a", 0, 42, 6, "")]);
        assert_eq!((c.generation_id, c.member_id.as_str()), (5, "m-1"));
        assert_eq!(c.group_instance_id.as_ref().unwrap().as_str(), "i");
        let p = &c.topics[0].partitions[0];
        assert_eq!((p.committed_offset, p.committed_leader_epoch), (42, 6));
        let e = end_txn("tx", (7, 3), false);
        assert!(!e.committed);
        assert_eq!(add_offsets("tx", (7, 3), "g").group_id.0.as_str(), "g");
    }

    #[test]
    fn refused_partitions_are_read_from_the_answer() {
        let part = |p, c| {
            AddPartitionsToTxnPartitionResult::default()
                .with_partition_index(p)
                .with_partition_error_code(c)
        };
        let resp = AddPartitionsToTxnResponse::default().with_results_by_topic_v3_and_below(vec![
            AddPartitionsToTxnTopicResult::default()
                .with_name(topic_name("a"))
                .with_results_by_partition(vec![
                    part(0, codes::NONE),
                    part(1, codes::OPERATION_NOT_ATTEMPTED),
                ]),
        ]);
        assert_eq!(
            add_partitions_errors(&resp),
            vec![("a".to_string(), 1, codes::OPERATION_NOT_ATTEMPTED)]
        );
    }
}
