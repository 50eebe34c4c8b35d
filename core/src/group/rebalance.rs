//! What a member gives up, keeps and takes around a rebalance, as pure functions of what it
//! knows. The caller's thread (`consumer/group.rs`) runs them in `poll()`.
//!
//! The rule behind all of them: a member never keeps, fetches or commits a partition once the
//! group may have handed it to another member. Under an eager assignor the leader hands out
//! every partition as if nobody owned any, so a member that may end up under one gives up
//! everything before it joins; the choice is made before joining, from the assignors the member
//! offers (the group's choice is only known once the join is over, which is too late).
use std::collections::BTreeSet;

use crate::group::assignor::RebalanceProtocol;
use crate::group::member::Generation;
use crate::types::TopicPartition;

/// The protocol this member rebalances with, from the protocols of the assignors it offers
/// (Java's ConsumerCoordinator constructor: the highest protocol every configured assignor
/// supports). Cooperative only when every offered assignor is cooperative: the group may choose
/// any of them, and if it chooses an eager one (`range` because another member offers nothing
/// else) the leader gives this member's partitions away in the very join this member is in.
pub fn rebalance_protocol(offered: &[RebalanceProtocol]) -> RebalanceProtocol {
    if !offered.is_empty() && offered.iter().all(|p| *p == RebalanceProtocol::Cooperative) {
        RebalanceProtocol::Cooperative
    } else {
        RebalanceProtocol::Eager
    }
}

/// What the member revokes before it sends JoinGroup (Java's onJoinPrepare): everything under
/// the eager protocol; under the cooperative one only partitions of topics it no longer
/// subscribes to (the rest stay with it through the join and the group moves them, if at all,
/// in a later generation).
pub fn to_revoke_before_join(
    protocol: RebalanceProtocol,
    owned: &BTreeSet<TopicPartition>,
    subscribed: &BTreeSet<String>,
) -> BTreeSet<TopicPartition> {
    match protocol {
        RebalanceProtocol::Eager => owned.clone(),
        RebalanceProtocol::Cooperative => owned
            .iter()
            .filter(|tp| !subscribed.contains(&tp.topic))
            .cloned()
            .collect(),
    }
}

/// Whether a finished join still applies: the member is still in the generation, with the
/// member id, that the join ended in. When the background side reset the membership after the
/// join finished but before `poll()` collected it (`max.poll.interval.ms` expired, a heartbeat
/// found the generation stale, the member was fenced), the assignment belongs to a generation
/// the member has left: its partitions may already be another member's. Java's
/// joinGroupIfNeeded then calls resetStateAndRejoin instead of onJoinComplete.
pub fn accept_join_outcome(current: &Generation, joined: &Generation) -> bool {
    current.generation_id >= 0
        && current.generation_id == joined.generation_id
        && current.member_id == joined.member_id
}

/// What an accepted join changes for a member that owned `owned` when it joined.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct JoinChanges {
    /// Given up through `on_partitions_revoked` (committing them is still safe).
    pub revoke: BTreeSet<TopicPartition>,
    /// Given up through `on_partitions_lost`: another member may own them already.
    pub lose: BTreeSet<TopicPartition>,
    /// New to this member (`on_partitions_assigned`).
    pub add: BTreeSet<TopicPartition>,
    /// Rejoin at once so the group can hand the revoked partitions on (KIP-429).
    pub rejoin: bool,
}

/// What a completed join means for the member, from its own protocol, the protocol of the
/// assignor the group chose, what it owned and what it was assigned.
///
/// Under a cooperative assignor the leader never gives away a partition its owner still claims
/// (it leaves it out, and the owner revokes it now, then rejoins). Under an eager assignor it
/// does: a partition this member still owned (it joined cooperatively, or did not revoke
/// everything) and did not get back may be another member's in this same generation, so it is
/// lost, never revoked: no commit may go out for it.
pub fn changes_after_join(
    member: RebalanceProtocol,
    chosen: RebalanceProtocol,
    owned: &BTreeSet<TopicPartition>,
    assigned: &BTreeSet<TopicPartition>,
) -> JoinChanges {
    let gone: BTreeSet<TopicPartition> = owned.difference(assigned).cloned().collect();
    let add = assigned.difference(owned).cloned().collect();
    match (member, chosen) {
        (RebalanceProtocol::Cooperative, RebalanceProtocol::Cooperative) => JoinChanges {
            rejoin: !gone.is_empty(),
            revoke: gone,
            lose: BTreeSet::new(),
            add,
        },
        // An eager member revoked everything before joining: `gone` is empty unless something
        // kept a partition through the join, and then the leader may have given it away.
        (_, RebalanceProtocol::Eager) | (RebalanceProtocol::Eager, _) => JoinChanges {
            revoke: BTreeSet::new(),
            lose: gone,
            add,
            rejoin: false,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use RebalanceProtocol::{Cooperative, Eager};

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    fn topics(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|t| t.to_string()).collect()
    }

    fn generation(id: i32, member: &str) -> Generation {
        Generation {
            generation_id: id,
            member_id: member.into(),
            protocol: Some("range".into()),
        }
    }

    #[test]
    fn cooperative_only_when_every_offered_assignor_is() {
        // cooperative-sticky alone; learner-sticky + cooperative-sticky.
        assert_eq!(rebalance_protocol(&[Cooperative]), Cooperative);
        assert_eq!(rebalance_protocol(&[Cooperative, Cooperative]), Cooperative);
        // cooperative-sticky,range (either order) and range: the group may pick range.
        assert_eq!(rebalance_protocol(&[Cooperative, Eager]), Eager);
        assert_eq!(rebalance_protocol(&[Eager, Cooperative]), Eager);
        assert_eq!(rebalance_protocol(&[Eager]), Eager);
        assert_eq!(rebalance_protocol(&[]), Eager);
    }

    #[test]
    fn eager_revokes_everything_before_joining() {
        let owned = tps(&[("a", 0), ("a", 1), ("b", 0)]);
        assert_eq!(
            to_revoke_before_join(Eager, &owned, &topics(&["a", "b"])),
            owned
        );
        assert!(to_revoke_before_join(Eager, &BTreeSet::new(), &topics(&["a"])).is_empty());
    }

    #[test]
    fn cooperative_revokes_only_unsubscribed_topics_before_joining() {
        let owned = tps(&[("a", 0), ("a", 1), ("b", 0)]);
        assert!(to_revoke_before_join(Cooperative, &owned, &topics(&["a", "b"])).is_empty());
        assert_eq!(
            to_revoke_before_join(Cooperative, &owned, &topics(&["a", "c"])),
            tps(&[("b", 0)])
        );
        assert_eq!(
            to_revoke_before_join(Cooperative, &owned, &topics(&[])),
            owned
        );
    }

    #[test]
    fn a_join_is_applied_only_in_the_generation_and_member_id_it_ended_in() {
        let joined = generation(7, "m-1");
        assert!(accept_join_outcome(&generation(7, "m-1"), &joined));
        // max.poll.interval.ms expired after the join finished: generation and id dropped.
        assert!(!accept_join_outcome(&Generation::none(), &joined));
        // A heartbeat found the generation stale (ILLEGAL_GENERATION keeps the member id).
        assert!(!accept_join_outcome(&generation(-1, "m-1"), &joined));
        // Rejoined since (a newer generation, or a new member id after UNKNOWN_MEMBER_ID).
        assert!(!accept_join_outcome(&generation(8, "m-1"), &joined));
        assert!(!accept_join_outcome(&generation(7, "m-2"), &joined));
        // A generation the member was never in is never applied, not even "equal" ones.
        assert!(!accept_join_outcome(
            &Generation::none(),
            &Generation::none()
        ));
    }

    #[test]
    fn cooperative_member_under_a_cooperative_assignor_revokes_what_moves_and_rejoins() {
        let owned = tps(&[("a", 0), ("a", 1), ("a", 2)]);
        let assigned = tps(&[("a", 0), ("a", 3)]);
        let c = changes_after_join(Cooperative, Cooperative, &owned, &assigned);
        assert_eq!(c.revoke, tps(&[("a", 1), ("a", 2)]));
        assert!(c.lose.is_empty());
        assert_eq!(c.add, tps(&[("a", 3)]));
        assert!(c.rejoin);
        let c = changes_after_join(Cooperative, Cooperative, &owned, &owned);
        assert_eq!(c, JoinChanges::default(), "nothing moved, no second round");
    }

    #[test]
    fn eager_member_after_revoking_everything_only_adds() {
        let assigned = tps(&[("a", 0), ("a", 1)]);
        for chosen in [Eager, Cooperative] {
            let c = changes_after_join(Eager, chosen, &BTreeSet::new(), &assigned);
            assert_eq!(
                c,
                JoinChanges {
                    add: assigned.clone(),
                    ..Default::default()
                }
            );
        }
    }

    #[test]
    fn partitions_kept_through_an_eager_assignor_are_lost_never_revoked() {
        // The case of a cooperative member whose group picked an eager assignor anyway: the
        // leader handed a:1 and a:2 to someone else in this generation; committing them now
        // could move the group's offsets backwards under their new owner.
        let owned = tps(&[("a", 0), ("a", 1), ("a", 2)]);
        let assigned = tps(&[("a", 0), ("a", 5)]);
        let c = changes_after_join(Cooperative, Eager, &owned, &assigned);
        assert!(c.revoke.is_empty());
        assert_eq!(c.lose, tps(&[("a", 1), ("a", 2)]));
        assert_eq!(c.add, tps(&[("a", 5)]));
        assert!(!c.rejoin);
        let c = changes_after_join(Eager, Eager, &owned, &assigned);
        assert_eq!(c.lose, tps(&[("a", 1), ("a", 2)]));
        assert!(c.revoke.is_empty());
    }
}
