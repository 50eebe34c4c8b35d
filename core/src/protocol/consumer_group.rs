//! KIP-848's ConsumerGroupHeartbeat, built from lagless' own values and read back into them.
//! Pure: `group::consumer_group` decides when to send it and what its answers mean for the
//! member; this decides what goes on the wire, and turns the topic ids of an assignment into
//! names with the metadata the consumer has.
use std::collections::{BTreeMap, BTreeSet};

use uuid::Uuid;

use crate::protocol::group::Member;
use crate::protocol::msg::consumer_group_heartbeat_request::TopicPartitions;
use crate::protocol::msg::{
    ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, GroupId, StrBytes, TopicName,
};
use crate::types::TopicPartition;

/// The epoch a member joins with.
pub(crate) const JOIN_EPOCH: i32 = 0;
/// The epoch a member leaves with.
pub(crate) const LEAVE_EPOCH: i32 = -1;
/// The epoch a static member leaves with when it will be back (its assignment is kept until its
/// session expires).
pub(crate) const STATIC_LEAVE_EPOCH: i32 = -2;

/// What one ConsumerGroupHeartbeat says of the member. The request always carries the member's
/// whole state (subscription, rebalance timeout, assignor, owned partitions), which the
/// protocol allows: a field left out means "unchanged", and a lost answer would leave the two
/// sides disagreeing on what "unchanged" is.
#[derive(Debug)]
pub(crate) struct MemberHeartbeat<'a> {
    pub member: Member<'a>,
    pub epoch: i32,
    pub rebalance_timeout_ms: i32,
    pub subscribed: &'a [String],
    /// `SubscribedTopicRegex` (v1): `None` leaves the coordinator's regex for the member as it
    /// is, `Some("")` removes it, any other value is the member's server-side regex (RE2/J).
    pub subscribed_regex: Option<&'a str>,
    pub server_assignor: Option<&'a str>,
    /// `client.rack`: rack-aware broker-side assignors place partitions by it.
    pub rack_id: Option<&'a str>,
    pub owned: &'a BTreeSet<TopicPartition>,
}

/// The topic ids the consumer knows, by topic name (from metadata; a nil id is unknown).
pub(crate) type TopicIds = BTreeMap<String, Uuid>;

/// The request. Owned partitions of a topic whose id is not known (yet) are left out: the
/// coordinator names topics by id only.
pub(crate) fn consumer_group_heartbeat(
    hb: &MemberHeartbeat<'_>,
    ids: &TopicIds,
) -> ConsumerGroupHeartbeatRequest {
    let text = |s: &str| StrBytes::from_string(s.to_string());
    let leaving = hb.epoch < 0;
    let mut owned: BTreeMap<Uuid, Vec<i32>> = BTreeMap::new();
    for tp in hb.owned {
        if let Some(id) = ids.get(&tp.topic).copied().filter(|id| !id.is_nil()) {
            owned.entry(id).or_default().push(tp.partition);
        }
    }
    let mut req = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(text(hb.member.group_id)))
        .with_member_id(text(hb.member.member_id))
        .with_member_epoch(hb.epoch)
        .with_instance_id(hb.member.instance_id.map(text));
    if !leaving {
        req = req
            .with_rebalance_timeout_ms(hb.rebalance_timeout_ms)
            .with_subscribed_topic_names(Some(
                hb.subscribed.iter().map(|t| TopicName(text(t))).collect(),
            ))
            .with_subscribed_topic_regex(hb.subscribed_regex.map(text))
            .with_server_assignor(hb.server_assignor.map(text))
            .with_rack_id(hb.rack_id.map(text))
            .with_topic_partitions(Some(
                owned
                    .into_iter()
                    .map(|(topic_id, partitions)| {
                        TopicPartitions::default()
                            .with_topic_id(topic_id)
                            .with_partitions(partitions)
                    })
                    .collect(),
            ));
    } else {
        req = req.with_rebalance_timeout_ms(-1);
    }
    req
}

/// A ConsumerGroupHeartbeat answer, in lagless' terms.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct MemberHeartbeatAnswer {
    pub error_code: i16,
    pub error_message: Option<String>,
    pub member_id: Option<String>,
    pub epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// The member's assignment, by topic id; `None`: unchanged since the last answer.
    pub assignment: Option<BTreeMap<Uuid, BTreeSet<i32>>>,
}

pub(crate) fn read_answer(resp: ConsumerGroupHeartbeatResponse) -> MemberHeartbeatAnswer {
    MemberHeartbeatAnswer {
        error_code: resp.error_code,
        error_message: resp.error_message.map(|m| m.to_string()),
        member_id: resp.member_id.map(|m| m.to_string()),
        epoch: resp.member_epoch,
        heartbeat_interval_ms: resp.heartbeat_interval_ms,
        assignment: resp.assignment.map(|a| {
            let mut by_id: BTreeMap<Uuid, BTreeSet<i32>> = BTreeMap::new();
            for t in a.topic_partitions {
                by_id.entry(t.topic_id).or_default().extend(t.partitions);
            }
            by_id
        }),
    }
}

/// An assignment by topic id in names: the partitions whose topic id is known, and the ids that
/// are not known yet.
pub(crate) fn name_assignment(
    by_id: &BTreeMap<Uuid, BTreeSet<i32>>,
    ids: &TopicIds,
) -> (BTreeSet<TopicPartition>, BTreeSet<Uuid>) {
    let names: BTreeMap<Uuid, &str> = ids
        .iter()
        .filter(|(_, id)| !id.is_nil())
        .map(|(name, id)| (*id, name.as_str()))
        .collect();
    let mut named = BTreeSet::new();
    let mut unknown = BTreeSet::new();
    for (id, partitions) in by_id {
        match names.get(id) {
            Some(name) => named.extend(partitions.iter().map(|p| TopicPartition::new(*name, *p))),
            None => {
                unknown.insert(*id);
            }
        }
    }
    (named, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::msg::consumer_group_heartbeat_response::{
        Assignment, TopicPartitions as AnswerTopic,
    };

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    fn meta(topics: &[(&str, u128)]) -> TopicIds {
        topics
            .iter()
            .map(|(name, n)| (name.to_string(), id(*n)))
            .collect()
    }

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    const MEMBER: Member<'static> = Member {
        group_id: "g",
        member_id: "m-1",
        instance_id: None,
    };

    #[test]
    fn a_heartbeat_carries_the_whole_state_with_owned_partitions_by_topic_id() {
        let owned = tps(&[("a", 1), ("a", 0), ("b", 2), ("unknown", 0)]);
        let subscribed = vec!["a".to_string(), "b".to_string()];
        let req = consumer_group_heartbeat(
            &MemberHeartbeat {
                member: MEMBER,
                epoch: 7,
                rebalance_timeout_ms: 300_000,
                subscribed: &subscribed,
                subscribed_regex: None,
                server_assignor: Some("range"),
                rack_id: Some("rack-b"),
                owned: &owned,
            },
            &meta(&[("a", 1), ("b", 2), ("unknown", 0)]),
        );
        assert_eq!(req.group_id.0.as_str(), "g");
        assert_eq!(req.member_id.as_str(), "m-1");
        assert_eq!(req.member_epoch, 7);
        assert_eq!(req.rebalance_timeout_ms, 300_000);
        assert_eq!(req.server_assignor.as_deref(), Some("range"));
        assert_eq!(req.rack_id.as_deref(), Some("rack-b"));
        let names: Vec<&str> = req
            .subscribed_topic_names
            .as_ref()
            .unwrap()
            .iter()
            .map(|t| t.0.as_str())
            .collect();
        assert_eq!(names, ["a", "b"]);
        let owned: Vec<(Uuid, Vec<i32>)> = req
            .topic_partitions
            .unwrap()
            .into_iter()
            .map(|t| (t.topic_id, t.partitions))
            .collect();
        // A topic whose id is nil (a broker before KIP-516, or not in metadata) is left out.
        assert_eq!(owned, vec![(id(1), vec![0, 1]), (id(2), vec![2])]);
    }

    #[test]
    fn a_leave_says_only_who_leaves() {
        let owned = tps(&[("a", 0)]);
        let req = consumer_group_heartbeat(
            &MemberHeartbeat {
                member: MEMBER,
                epoch: LEAVE_EPOCH,
                rebalance_timeout_ms: 300_000,
                subscribed: &["a".to_string()],
                subscribed_regex: Some("a.*"),
                server_assignor: None,
                rack_id: None,
                owned: &owned,
            },
            &meta(&[("a", 1)]),
        );
        assert_eq!(req.member_epoch, -1);
        assert!(req.subscribed_topic_names.is_none());
        assert!(req.subscribed_topic_regex.is_none());
        assert!(req.topic_partitions.is_none());
        assert_eq!(req.rebalance_timeout_ms, -1);
    }

    #[test]
    fn an_assignment_is_named_with_metadata_and_unknown_ids_are_kept_apart() {
        let resp = ConsumerGroupHeartbeatResponse::default()
            .with_member_id(Some(StrBytes::from_static_str("m-1")))
            .with_member_epoch(3)
            .with_heartbeat_interval_ms(5000)
            .with_assignment(Some(Assignment::default().with_topic_partitions(vec![
                AnswerTopic::default()
                    .with_topic_id(id(1))
                    .with_partitions(vec![2, 0]),
                AnswerTopic::default()
                    .with_topic_id(id(9))
                    .with_partitions(vec![0]),
            ])));
        let answer = read_answer(resp);
        assert_eq!(answer.epoch, 3);
        assert_eq!(answer.member_id.as_deref(), Some("m-1"));
        let (named, unknown) =
            name_assignment(answer.assignment.as_ref().unwrap(), &meta(&[("a", 1)]));
        assert_eq!(named, tps(&[("a", 0), ("a", 2)]));
        assert_eq!(unknown, BTreeSet::from([id(9)]));
        // No assignment in the answer: unchanged, not empty.
        let answer = read_answer(ConsumerGroupHeartbeatResponse::default());
        assert_eq!(answer.assignment, None);
    }
}
