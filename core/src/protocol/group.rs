//! The classic group protocol's requests (JoinGroup, SyncGroup, Heartbeat, LeaveGroup), built
//! from lagless' own values for the version the coordinator speaks. Pure: the coordinator
//! (`group::coordinator`) decides when to send them and what the answers mean; this decides
//! only what goes on the wire, field by field and version by version.
use bytes::Bytes;

use crate::error::{Error, Result};
use crate::protocol::msg::join_group_request::JoinGroupRequestProtocol;
use crate::protocol::msg::leave_group_request::MemberIdentity;
use crate::protocol::msg::sync_group_request::SyncGroupRequestAssignment;
use crate::protocol::msg::{
    FindCoordinatorRequest, FindCoordinatorResponse, GroupId, HeartbeatRequest, JoinGroupRequest,
    LeaveGroupRequest, StrBytes, SyncGroupRequest,
};

/// The protocol type of every consumer group (as opposed to Connect's or a stream's).
const CONSUMER: &str = "consumer";

/// The longest reason a broker keeps (JoinGroup v8+, LeaveGroup v5+); longer ones are cut.
const MAX_REASON: usize = 255;

/// Who speaks to the coordinator: the group, the member's id in it (empty before its first
/// join) and, for a static member, its `group.instance.id`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Member<'a> {
    pub group_id: &'a str,
    pub member_id: &'a str,
    pub instance_id: Option<&'a str>,
}

impl Member<'_> {
    fn group(&self) -> GroupId {
        GroupId(text(self.group_id))
    }
    fn member(&self) -> StrBytes {
        text(self.member_id)
    }
    fn instance(&self) -> Option<StrBytes> {
        self.instance_id.map(text)
    }
}

/// What a JoinGroup carries besides the member.
#[derive(Debug)]
pub(crate) struct Join<'a> {
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    /// The assignors offered, in order of preference, each with its subscription metadata.
    pub protocols: Vec<(&'static str, Bytes)>,
    pub reason: &'a str,
}

pub(crate) fn join_group(member: Member<'_>, join: Join<'_>, version: i16) -> JoinGroupRequest {
    let protocols = join
        .protocols
        .into_iter()
        .map(|(name, metadata)| {
            JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(name))
                .with_metadata(metadata)
        })
        .collect();
    let mut req = JoinGroupRequest::default()
        .with_group_id(member.group())
        .with_session_timeout_ms(join.session_timeout_ms)
        .with_rebalance_timeout_ms(join.rebalance_timeout_ms)
        .with_member_id(member.member())
        .with_protocol_type(StrBytes::from_static_str(CONSUMER))
        .with_protocols(protocols);
    if version >= 5 {
        req = req.with_group_instance_id(member.instance());
    }
    if version >= 8 {
        req = req.with_reason(Some(text(truncate(join.reason, MAX_REASON))));
    }
    req
}

/// SyncGroup of `generation_id`: the leader sends `assignments` (member id, encoded
/// assignment); the followers send none.
pub(crate) fn sync_group(
    member: Member<'_>,
    generation_id: i32,
    protocol_name: Option<&str>,
    assignments: Vec<(String, Bytes)>,
    version: i16,
) -> SyncGroupRequest {
    let assignments = assignments
        .into_iter()
        .map(|(member_id, assignment)| {
            SyncGroupRequestAssignment::default()
                .with_member_id(StrBytes::from_string(member_id))
                .with_assignment(assignment)
        })
        .collect();
    let mut req = SyncGroupRequest::default()
        .with_group_id(member.group())
        .with_generation_id(generation_id)
        .with_member_id(member.member())
        .with_assignments(assignments);
    if version >= 3 {
        req = req.with_group_instance_id(member.instance());
    }
    if version >= 5 {
        req = req
            .with_protocol_type(Some(StrBytes::from_static_str(CONSUMER)))
            .with_protocol_name(protocol_name.map(text));
    }
    req
}

pub(crate) fn heartbeat(member: Member<'_>, generation_id: i32, version: i16) -> HeartbeatRequest {
    let mut req = HeartbeatRequest::default()
        .with_group_id(member.group())
        .with_generation_id(generation_id)
        .with_member_id(member.member());
    if version >= 3 {
        req = req.with_group_instance_id(member.instance());
    }
    req
}

/// LeaveGroup for one member: v3+ names it in a member list (with its instance id, and from v5
/// the reason), older versions by member id alone.
pub(crate) fn leave_group(member: Member<'_>, reason: &str, version: i16) -> LeaveGroupRequest {
    if version >= 3 {
        let mut who = MemberIdentity::default()
            .with_member_id(member.member())
            .with_group_instance_id(member.instance());
        if version >= 5 {
            who = who.with_reason(Some(text(truncate(reason, MAX_REASON))));
        }
        LeaveGroupRequest::default()
            .with_group_id(member.group())
            .with_members(vec![who])
    } else {
        LeaveGroupRequest::default()
            .with_group_id(member.group())
            .with_member_id(member.member())
    }
}

/// FindCoordinator of `group_id`: v4+ asks in a list of keys (KIP-699), older versions for one
/// key.
pub(crate) fn find_coordinator(group_id: &str, version: i16) -> FindCoordinatorRequest {
    if version >= 4 {
        FindCoordinatorRequest::default().with_coordinator_keys(vec![text(group_id)])
    } else {
        FindCoordinatorRequest::default().with_key(text(group_id))
    }
}

/// Where a FindCoordinator answer says the coordinator is: its error code, node id and
/// `host:port`, from the list (v4+) or the top-level fields (older versions).
pub(crate) fn coordinator_of(
    resp: &FindCoordinatorResponse,
    version: i16,
) -> Result<(i16, i32, String)> {
    if version >= 4 {
        let c = resp
            .coordinators
            .first()
            .ok_or_else(|| Error::Corrupt("FindCoordinator response has no coordinator".into()))?;
        Ok((
            c.error_code,
            c.node_id.0,
            format!("{}:{}", c.host.as_str(), c.port),
        ))
    } else {
        Ok((
            resp.error_code,
            resp.node_id.0,
            format!("{}:{}", resp.host.as_str(), resp.port),
        ))
    }
}

fn text(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

/// The longest prefix of `s` within `max` bytes that ends on a character boundary.
pub(crate) fn truncate(s: &str, max: usize) -> &str {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;

    const DYNAMIC: Member<'static> = Member {
        group_id: "g",
        member_id: "m-1",
        instance_id: None,
    };
    const STATIC: Member<'static> = Member {
        group_id: "g",
        member_id: "m-1",
        instance_id: Some("host-7"),
    };

    fn join(reason: &str) -> Join<'_> {
        Join {
            session_timeout_ms: 45_000,
            rebalance_timeout_ms: 300_000,
            protocols: vec![
                ("cooperative-sticky", Bytes::from_static(b"\x00\x03a")),
                ("range", Bytes::from_static(b"\x00\x03b")),
            ],
            reason,
        }
    }

    #[test]
    fn join_group_offers_every_assignor_in_order_and_adds_fields_by_version() {
        let old = join_group(STATIC, join("subscribe"), 4);
        assert_eq!(old.group_id.0.as_str(), "g");
        assert_eq!(old.member_id.as_str(), "m-1");
        assert_eq!(old.protocol_type.as_str(), "consumer");
        assert_eq!(
            (old.session_timeout_ms, old.rebalance_timeout_ms),
            (45_000, 300_000)
        );
        let offered: Vec<(&str, &[u8])> = old
            .protocols
            .iter()
            .map(|p| (p.name.as_str(), &p.metadata[..]))
            .collect();
        assert_eq!(
            offered,
            vec![
                ("cooperative-sticky", &b"\x00\x03a"[..]),
                ("range", &b"\x00\x03b"[..])
            ]
        );
        // v4 has neither the instance id (v5) nor the reason (v8).
        assert_eq!(old.group_instance_id, None);
        assert_eq!(old.reason, None);

        let v5 = join_group(STATIC, join("subscribe"), 5);
        assert_eq!(v5.group_instance_id.as_deref(), Some("host-7"));
        assert_eq!(v5.reason, None);

        let v9 = join_group(DYNAMIC, join("subscribe"), 9);
        assert_eq!(v9.group_instance_id, None);
        assert_eq!(v9.reason.as_deref(), Some("subscribe"));
    }

    #[test]
    fn reasons_are_cut_at_255_bytes_on_a_character_boundary() {
        let long = "é".repeat(200); // 400 bytes
        let req = join_group(DYNAMIC, join(&long), 9);
        let sent = req.reason.unwrap();
        assert_eq!(sent.len(), 254, "127 two-byte characters fit in 255 bytes");
        assert!(long.starts_with(sent.as_str()));
        let leave = leave_group(DYNAMIC, &long, 5);
        assert_eq!(leave.members[0].reason.as_ref().unwrap().len(), 254);
        assert_eq!(truncate("abc", 255), "abc");
        assert_eq!(truncate("", 0), "");
    }

    #[test]
    fn sync_group_carries_the_leaders_plan_and_the_protocol_from_v5() {
        let plan = vec![
            ("m-1".to_string(), Bytes::from_static(b"one")),
            ("m-2".to_string(), Bytes::from_static(b"two")),
        ];
        let v2 = sync_group(STATIC, 7, Some("range"), plan.clone(), 2);
        assert_eq!(v2.generation_id, 7);
        assert_eq!(v2.member_id.as_str(), "m-1");
        let sent: Vec<(&str, &[u8])> = v2
            .assignments
            .iter()
            .map(|a| (a.member_id.as_str(), &a.assignment[..]))
            .collect();
        assert_eq!(sent, vec![("m-1", &b"one"[..]), ("m-2", &b"two"[..])]);
        assert_eq!(v2.group_instance_id, None);
        assert_eq!(v2.protocol_type, None);

        let v5 = sync_group(STATIC, 7, Some("range"), Vec::new(), 5);
        assert!(v5.assignments.is_empty(), "a follower sends no plan");
        assert_eq!(v5.group_instance_id.as_deref(), Some("host-7"));
        assert_eq!(v5.protocol_type.as_deref(), Some("consumer"));
        assert_eq!(v5.protocol_name.as_deref(), Some("range"));
    }

    #[test]
    fn heartbeat_names_the_generation_and_from_v3_the_instance() {
        let v2 = heartbeat(STATIC, 12, 2);
        assert_eq!((v2.group_id.0.as_str(), v2.generation_id), ("g", 12));
        assert_eq!(v2.member_id.as_str(), "m-1");
        assert_eq!(v2.group_instance_id, None);
        assert_eq!(
            heartbeat(STATIC, 12, 3).group_instance_id.as_deref(),
            Some("host-7")
        );
    }

    #[test]
    fn find_coordinator_asks_and_is_answered_in_the_form_of_its_version() {
        use crate::protocol::msg::find_coordinator_response::Coordinator;
        use crate::protocol::msg::BrokerId;
        let v3 = find_coordinator("g", 3);
        assert_eq!(v3.key.as_str(), "g");
        assert!(v3.coordinator_keys.is_empty());
        let v4 = find_coordinator("g", 4);
        let keys: Vec<&str> = v4.coordinator_keys.iter().map(|k| k.as_str()).collect();
        assert_eq!(keys, vec!["g"]);

        let old = FindCoordinatorResponse::default()
            .with_node_id(BrokerId(2))
            .with_host(StrBytes::from_static_str("b2"))
            .with_port(9093);
        assert_eq!(
            coordinator_of(&old, 3).unwrap(),
            (0, 2, "b2:9093".to_string())
        );
        let new =
            FindCoordinatorResponse::default().with_coordinators(vec![Coordinator::default()
                .with_key(StrBytes::from_static_str("g"))
                .with_node_id(BrokerId(3))
                .with_host(StrBytes::from_static_str("b3"))
                .with_port(9094)
                .with_error_code(15)]);
        assert_eq!(
            coordinator_of(&new, 4).unwrap(),
            (15, 3, "b3:9094".to_string())
        );
        let e = coordinator_of(&FindCoordinatorResponse::default(), 4).unwrap_err();
        assert!(matches!(e, Error::Corrupt(_)), "{e}");
    }

    #[test]
    fn leave_group_names_the_member_in_the_form_of_its_version() {
        let v2 = leave_group(STATIC, "close", 2);
        assert_eq!(v2.member_id.as_str(), "m-1");
        assert!(v2.members.is_empty());

        let v3 = leave_group(STATIC, "close", 3);
        assert_eq!(v3.member_id.as_str(), "", "v3+ lists members instead");
        assert_eq!(v3.members.len(), 1);
        assert_eq!(v3.members[0].member_id.as_str(), "m-1");
        assert_eq!(v3.members[0].group_instance_id.as_deref(), Some("host-7"));
        assert_eq!(v3.members[0].reason, None);

        let v5 = leave_group(DYNAMIC, "the consumer is closing", 5);
        assert_eq!(
            v5.members[0].reason.as_deref(),
            Some("the consumer is closing")
        );
        assert_eq!(v5.members[0].group_instance_id, None);
    }
}
