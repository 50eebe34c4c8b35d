//! Partition assignors: what the group leader runs to split partitions among members.
//!
//! Each assignor is a pure function of the topics' partition counts and the members'
//! subscriptions (no I/O, no clock, no randomness), so the leader's result depends only on what
//! the coordinator handed it, and tests can drive them from literal member lists.
//!
//! Every assignor returns an entry for every member (possibly empty), gives a partition only to a
//! member subscribed to its topic, never gives a partition twice, and ignores topics missing from
//! `partitions_per_topic` (the leader has no metadata for them yet).
//!
//! Member order, as in Java's `MemberInfo.compareTo`: static members (with a
//! `group.instance.id`) first, ordered by instance id, then dynamic members by member id. Ordering
//! static members by instance id keeps their range/round-robin layout when they restart, since a
//! restart gives them a new member id but not a new instance id; and matching Java keeps a mixed
//! group's assignment the same whichever client is the leader.
use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::protocol::consumer_protocol::{
    cooperative_follow_up, decode_learner_assignment_data, decode_learner_subscription_data,
    encode_cooperative_assignment_data, encode_cooperative_user_data,
    encode_learner_assignment_data, encode_learner_subscription_data, subscription_generation,
    Assignment, LearnerAssignmentData, LearnerSubscriptionData, Subscription, TopicPartitions,
    UNKNOWN_GENERATION,
};

/// How a group moves partitions in a rebalance.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RebalanceProtocol {
    /// Every member gives up everything before the rebalance, then gets its new assignment.
    Eager,
    /// KIP-429: members keep what they own; a partition that changes owner is first revoked (in
    /// one rebalance) and then assigned (in the next).
    Cooperative,
}

/// One member as the leader sees it in the JoinGroup response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemberSubscription {
    /// The member id the coordinator assigned.
    pub member_id: String,
    /// The member's `group.instance.id`, for a static member (KIP-345).
    pub group_instance_id: Option<String>,
    /// The member's decoded subscription: topics, owned partitions, user data, rack.
    pub subscription: Subscription,
}

/// What a learner-sticky member asks of the leader besides its ready partitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LearnerIntent {
    /// Leaving gracefully: hand my partitions over (learned first), give me nothing new.
    pub leaving: bool,
    /// At most this many partitions learning at once for me (0: no limit).
    pub max_learning: u32,
}

/// A partition assignment strategy.
pub trait Assignor: Send + Sync {
    /// The protocol name sent in JoinGroup ("range", "roundrobin", "cooperative-sticky").
    fn name(&self) -> &'static str;
    /// Eager unless the assignor supports KIP-429's cooperative protocol.
    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Eager
    }
    /// The `user_data` this member puts in its subscription, given the generation it is in
    /// ([`UNKNOWN_GENERATION`] if none), the partitions it has learned and is ready to own and
    /// what else it asks of a learner-sticky leader (learner assignments; ignored otherwise).
    fn subscription_user_data(
        &self,
        _generation: i32,
        _ready: &[TopicPartitions],
        _intent: LearnerIntent,
    ) -> Option<Bytes> {
        None
    }
    /// What a member reads from the `user_data` of the assignment its leader sent it (the member
    /// side of the assignor, Java's `ConsumerPartitionAssignor#onAssignment`), in learner-sticky's
    /// terms: the partitions to learn and whether a follow-up rebalance is coming (other
    /// assignors fill in the follow-up at most). Nothing unless the assignor writes user data;
    /// malformed data is an [`Error::Corrupt`] naming it.
    fn read_assignment(&self, _user_data: Option<&Bytes>) -> Result<LearnerAssignmentData> {
        Ok(LearnerAssignmentData::default())
    }
    /// Whether a member that prepares to leave hands its partitions over to learners first
    /// (learner assignments): only an assignor that assigns learning partitions can.
    fn hands_over_through_learners(&self) -> bool {
        false
    }
    /// Assigns the partitions of `partitions_per_topic` (topic → partition count) to `members`.
    /// Fails with [`Error::Corrupt`] if two members share a member id.
    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> Result<BTreeMap<String, Assignment>>;
}

/// The assignors lagless implements, the one registry the config check and the coordinator both
/// read: the protocol name spoken in JoinGroup, the Java class name users copy from Java configs
/// (none for learner-sticky, which is lagless only), and the constructor.
pub(crate) struct AssignorEntry {
    pub(crate) name: &'static str,
    pub(crate) java_class: Option<&'static str>,
    make: fn() -> Box<dyn Assignor>,
}

pub(crate) const ASSIGNORS: &[AssignorEntry] = &[
    AssignorEntry {
        name: "range",
        java_class: Some("org.apache.kafka.clients.consumer.RangeAssignor"),
        make: || Box::new(RangeAssignor),
    },
    AssignorEntry {
        name: "roundrobin",
        java_class: Some("org.apache.kafka.clients.consumer.RoundRobinAssignor"),
        make: || Box::new(RoundRobinAssignor),
    },
    AssignorEntry {
        name: "cooperative-sticky",
        java_class: Some("org.apache.kafka.clients.consumer.CooperativeStickyAssignor"),
        make: || Box::new(CooperativeStickyAssignor),
    },
    AssignorEntry {
        name: LEARNER_STICKY,
        java_class: None,
        make: || Box::new(LearnerStickyAssignor),
    },
];

/// The registry entry a configured name means: a protocol name in any case, or the exact Java
/// class name (so Java configurations can be reused as they are).
pub(crate) fn assignor_entry(name: &str) -> Option<&'static AssignorEntry> {
    let name = name.trim();
    ASSIGNORS
        .iter()
        .find(|a| a.name.eq_ignore_ascii_case(name) || a.java_class == Some(name))
}

/// The assignor for a configured name: "range", "roundrobin", "cooperative-sticky",
/// "learner-sticky", or the Java class name of one of them.
pub fn assignor_by_name(name: &str) -> Option<Box<dyn Assignor>> {
    assignor_entry(name).map(|a| (a.make)())
}

/// Java's `MemberInfo` order: static members by instance id first, then dynamic ones by member
/// id. The member id breaks ties so the order is total even with a duplicated instance id.
fn member_order(a: &MemberSubscription, b: &MemberSubscription) -> Ordering {
    match (&a.group_instance_id, &b.group_instance_id) {
        (Some(x), Some(y)) => x.cmp(y).then_with(|| a.member_id.cmp(&b.member_id)),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => a.member_id.cmp(&b.member_id),
    }
}

/// The members in [`member_order`], after checking member ids are unique.
fn sorted_members(members: &[MemberSubscription]) -> Result<Vec<&MemberSubscription>> {
    let mut seen = BTreeSet::new();
    for m in members {
        if !seen.insert(m.member_id.as_str()) {
            return Err(Error::Corrupt(format!(
                "member id `{}` appears twice in the group",
                m.member_id
            )));
        }
    }
    let mut sorted: Vec<&MemberSubscription> = members.iter().collect();
    sorted.sort_by(|a, b| member_order(a, b));
    Ok(sorted)
}

/// A member's topics as a set (a subscription may list a topic twice).
fn topic_set(m: &MemberSubscription) -> BTreeSet<&str> {
    m.subscription.topics.iter().map(String::as_str).collect()
}

/// Partition count of a topic, or `None` if the topic is unknown or has no partitions.
fn partition_count(partitions_per_topic: &BTreeMap<String, i32>, topic: &str) -> Option<i32> {
    partitions_per_topic.get(topic).copied().filter(|n| *n > 0)
}

/// Builds the result: every member present, partitions grouped by topic, both sorted.
fn build_result<'a>(
    members: &[MemberSubscription],
    assigned: impl IntoIterator<Item = (&'a str, &'a str, i32)>,
) -> BTreeMap<String, Assignment> {
    let mut per_member: BTreeMap<&str, BTreeMap<&str, BTreeSet<i32>>> = members
        .iter()
        .map(|m| (m.member_id.as_str(), BTreeMap::new()))
        .collect();
    for (member, topic, partition) in assigned {
        per_member
            .entry(member)
            .or_default()
            .entry(topic)
            .or_default()
            .insert(partition);
    }
    per_member
        .into_iter()
        .map(|(member, topics)| {
            let partitions = topics
                .into_iter()
                .map(|(t, ps)| TopicPartitions::new(t, ps.into_iter().collect()))
                .collect();
            (
                member.to_string(),
                Assignment {
                    partitions,
                    user_data: None,
                },
            )
        })
        .collect()
}

/// Java's `RangeAssignor`: for each topic, its subscribers in member order each get a contiguous
/// range of partitions; the first `count % subscribers` of them get one extra. Eager.
///
/// Not done: the rack-aware variant (KIP-881), which Java only uses when racks are configured on
/// both clients and brokers.
#[derive(Debug, Clone, Copy, Default)]
pub struct RangeAssignor;

impl Assignor for RangeAssignor {
    fn name(&self) -> &'static str {
        "range"
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> Result<BTreeMap<String, Assignment>> {
        let sorted = sorted_members(members)?;
        let mut subscribers: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for m in &sorted {
            for t in topic_set(m) {
                subscribers.entry(t).or_default().push(m.member_id.as_str());
            }
        }
        let mut assigned = Vec::new();
        for (topic, subs) in &subscribers {
            let Some(count) = partition_count(partitions_per_topic, topic) else {
                continue;
            };
            let n = subs.len() as i32;
            let per_member = count / n;
            let with_extra = count % n;
            for (i, member) in subs.iter().enumerate() {
                let i = i as i32;
                let start = per_member * i + i.min(with_extra);
                let len = per_member + i32::from(i < with_extra);
                for p in start..start + len {
                    assigned.push((*member, *topic, p));
                }
            }
        }
        Ok(build_result(members, assigned))
    }
}

/// Java's `RoundRobinAssignor`: all partitions of all subscribed topics, sorted by topic then
/// partition, dealt in turn to the members in member order; a member not subscribed to a
/// partition's topic is skipped (the turn passes to the next member). Eager.
#[derive(Debug, Clone, Copy, Default)]
pub struct RoundRobinAssignor;

impl Assignor for RoundRobinAssignor {
    fn name(&self) -> &'static str {
        "roundrobin"
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> Result<BTreeMap<String, Assignment>> {
        let sorted = sorted_members(members)?;
        let topics_of: Vec<BTreeSet<&str>> = sorted.iter().map(|m| topic_set(m)).collect();
        let all_topics: BTreeSet<&str> = topics_of.iter().flatten().copied().collect();
        let mut assigned = Vec::new();
        // Java's CircularIterator: the cursor stays where the last partition went.
        let mut cursor = 0usize;
        for topic in all_topics {
            let Some(count) = partition_count(partitions_per_topic, topic) else {
                continue;
            };
            for p in 0..count {
                // Someone subscribes to `topic` (it came from a subscription), so this ends.
                while !topics_of[cursor].contains(topic) {
                    cursor = (cursor + 1) % sorted.len();
                }
                assigned.push((sorted[cursor].member_id.as_str(), topic, p));
                cursor = (cursor + 1) % sorted.len();
            }
        }
        Ok(build_result(members, assigned))
    }
}

/// Java's `CooperativeStickyAssignor` (KIP-429): balanced, sticky, and cooperative.
///
/// 1. **Ownership.** Each member's `owned_partitions` are claims, tagged with its generation
///    (`generation_id`, or the generation in its user data for older subscription versions, or
///    [`UNKNOWN_GENERATION`]). Per partition the claim of the highest generation wins; if two
///    members claim it in that same generation, neither owns it (the note's "stale ownership"
///    rules). Java's equal-subscription path goes further and ignores *every* claim of a member
///    whose generation is below the group's highest; we keep a stale member's claims that nobody
///    newer contradicts, which is stickier and never less safe (the partition is withheld below
///    if it moves).
/// 2. **Sticky.** An owner keeps its partitions if it still subscribes to the topic.
/// 3. **Fill.** Unowned partitions go, one by one, to the least-loaded subscriber (partitions
///    with the fewest possible members first, so the constrained ones are placed while there is
///    room).
/// 4. **Balance.** While some topic has a subscriber with at least two partitions fewer than a
///    member holding a partition of that topic, one such partition moves (from the most loaded
///    holder to the least loaded subscriber, preferring partitions the holder did not own before).
///    With equal subscriptions this ends with max − min ≤ 1 and moves only as many owned
///    partitions as balance needs. With differing subscriptions it is a local optimum: Java's
///    general path also searches for multi-hop exchanges, which this does not (a simplification:
///    the result is valid and usually, not always, as even as Java's).
/// 5. **KIP-429 adjustment.** A partition whose owner changes, or that two members claimed in the
///    same generation, is left out of everyone's assignment in this generation. Its old owner sees
///    it missing, revokes it and rejoins; the next rebalance hands it to its new owner.
///
/// Not done: rack awareness (KIP-881).
#[derive(Debug, Clone, Copy, Default)]
pub struct CooperativeStickyAssignor;

impl Assignor for CooperativeStickyAssignor {
    fn name(&self) -> &'static str {
        "cooperative-sticky"
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    /// Java still sends the generation in user data so that leaders reading subscription v0/v1
    /// (without `generation_id`) can apply the stale-ownership rules.
    fn subscription_user_data(
        &self,
        generation: i32,
        _ready: &[TopicPartitions],
        _intent: LearnerIntent,
    ) -> Option<Bytes> {
        Some(encode_cooperative_user_data(generation))
    }

    /// The leader marks an assignment that left partitions out to move (KIP-429's second
    /// rebalance); anything else, another client's bytes included, says nothing.
    fn read_assignment(&self, user_data: Option<&Bytes>) -> Result<LearnerAssignmentData> {
        Ok(LearnerAssignmentData {
            learning: Vec::new(),
            follow_up: cooperative_follow_up(user_data),
        })
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> Result<BTreeMap<String, Assignment>> {
        let plan = StickyPlan::compute(
            partitions_per_topic,
            members,
            &BTreeMap::new(),
            &BTreeSet::new(),
        )?;
        let assigned = plan
            .target
            .iter()
            .enumerate()
            .filter(|(g, _)| !plan.withheld(*g))
            .filter_map(|(g, owner)| {
                let (t, p) = plan.partition(g);
                owner.map(|m| (plan.members[m].member_id.as_str(), plan.topics[t], p))
            });
        let mut result = build_result(members, assigned);
        // Partitions left out to move (their owners revoke them and rejoin): every member is told
        // a follow-up rebalance is coming, so that it heartbeats often until it starts rather
        // than noticing it up to heartbeat.interval.ms later, with the partitions unowned.
        let withheld = (0..plan.target.len()).any(|g| plan.withheld(g) && plan.target[g].is_some());
        for a in result.values_mut() {
            a.user_data = encode_cooperative_assignment_data(withheld);
        }
        Ok(result)
    }
}

/// Learner assignments (seed 002): cooperative-sticky, except that a partition moves to a new
/// owner only once that owner has warmed up for it, so scaling stops nobody while the new member
/// gets ready.
///
/// 1. The balanced, sticky target is computed as by [`CooperativeStickyAssignor`].
/// 2. A partition whose target is another member than its current owner stays with its owner,
///    and the target member gets it as a *learner* (in its assignment's user data): it prepares
///    (the application's `on_partitions_learning` callback) while the owner keeps consuming.
/// 3. A learner that is ready says so in its next subscription's user data and rejoins. The
///    partition then moves as cooperative-sticky moves it: left out of this generation (its owner
///    revokes it and rejoins) and given to the ready learner in the next.
///
/// Scale-down (a member leaving gracefully says so in its user data) runs the same way: the
/// leaving member is no target, so each of its partitions gets a learner among the members that
/// stay while the leaving member keeps consuming it; once the learner is ready it moves, and a
/// leaving member that owns nothing may go. A member may limit how many partitions it learns at
/// once (its warm-up budget): the others stay with their owners, unlearned, until earlier ones
/// have moved.
///
/// Only lagless offers this protocol; a group with other clients agrees on another assignor in
/// the member's list. Malformed user data from a member counts as "nothing ready", with a
/// warning, so one member's bad bytes cannot stop the group's assignment.
#[derive(Debug, Clone, Copy, Default)]
pub struct LearnerStickyAssignor;

/// The protocol name of [`LearnerStickyAssignor`].
pub(crate) const LEARNER_STICKY: &str = "learner-sticky";

impl Assignor for LearnerStickyAssignor {
    fn name(&self) -> &'static str {
        LEARNER_STICKY
    }

    fn protocol(&self) -> RebalanceProtocol {
        RebalanceProtocol::Cooperative
    }

    fn subscription_user_data(
        &self,
        generation: i32,
        ready: &[TopicPartitions],
        intent: LearnerIntent,
    ) -> Option<Bytes> {
        Some(encode_learner_subscription_data(&LearnerSubscriptionData {
            generation,
            ready: ready.to_vec(),
            leaving: intent.leaving,
            max_learning: intent.max_learning,
        }))
    }

    fn read_assignment(&self, user_data: Option<&Bytes>) -> Result<LearnerAssignmentData> {
        decode_learner_assignment_data(user_data)
    }

    fn hands_over_through_learners(&self) -> bool {
        true
    }

    fn assign(
        &self,
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> Result<BTreeMap<String, Assignment>> {
        let mut ready: BTreeMap<(String, i32), String> = BTreeMap::new();
        let mut leaving: BTreeSet<String> = BTreeSet::new();
        let mut budget: BTreeMap<&str, usize> = BTreeMap::new();
        for m in sorted_members(members)? {
            match decode_learner_subscription_data(m.subscription.user_data.as_ref()) {
                Ok(data) => {
                    if data.leaving {
                        leaving.insert(m.member_id.clone());
                    }
                    if data.max_learning > 0 {
                        budget.insert(m.member_id.as_str(), data.max_learning as usize);
                    }
                    for tp in data.ready {
                        for p in tp.partitions {
                            ready
                                .entry((tp.topic.clone(), p))
                                .or_insert_with(|| m.member_id.clone());
                        }
                    }
                }
                Err(e) => tracing::warn!(
                    member = %m.member_id,
                    error = %e,
                    "malformed learner data in a member's subscription; taking it as nothing ready"
                ),
            }
        }
        let plan = StickyPlan::compute(partitions_per_topic, members, &ready, &leaving)?;
        let mut owned: Vec<(&str, &str, i32)> = Vec::new();
        let mut learning: BTreeMap<&str, BTreeMap<&str, Vec<i32>>> = BTreeMap::new();
        // Partitions each member warms up for in this generation (not yet ready), against its
        // budget.
        let mut warming: BTreeMap<&str, usize> = BTreeMap::new();
        for (g, target) in plan.target.iter().enumerate() {
            let (t, p) = plan.partition(g);
            let topic = plan.topics[t];
            if plan.conflicted[g] {
                continue;
            }
            match (plan.prev_owner[g], *target) {
                (Some(from), Some(to)) if from != to => {
                    let to_id = plan.members[to].member_id.as_str();
                    let is_ready = ready
                        .get(&(topic.to_string(), p))
                        .is_some_and(|m| m == to_id);
                    // An owner that no longer subscribes to the topic cannot keep it meanwhile
                    // (a leaving owner still subscribes: it keeps consuming until the hand-over).
                    let owner_keeps = topic_set(plan.members[from]).contains(topic);
                    if !is_ready && owner_keeps {
                        let started = warming.entry(to_id).or_default();
                        if budget.get(to_id).is_some_and(|max| *started >= *max) {
                            // Over the new owner's warm-up budget: the owner keeps it, nobody
                            // learns it yet; a later generation starts it once earlier ones
                            // have moved.
                            owned.push((plan.members[from].member_id.as_str(), topic, p));
                            continue;
                        }
                        *started += 1;
                        // The owner keeps it while the new member warms up.
                        owned.push((plan.members[from].member_id.as_str(), topic, p));
                    }
                    // Ready or not, the new member stays its learner until it owns it, so it
                    // keeps saying it is ready through the generation that moves it. (A
                    // partition that moves at once, its owner gone from the topic, is not
                    // learned: it is the new member's in the next generation anyway.)
                    if !is_ready && !owner_keeps {
                        continue;
                    }
                    learning
                        .entry(to_id)
                        .or_default()
                        .entry(topic)
                        .or_default()
                        .push(p);
                }
                (_, Some(to)) => owned.push((plan.members[to].member_id.as_str(), topic, p)),
                (_, None) => {}
            }
        }
        // A partition with a target but no owner in this generation is in transit: it moves in
        // the next one, which members should start soon. One kept by its owner while a learner
        // warms up is not: the learner's rejoin, once ready, starts the move.
        let follow_up = plan.target.iter().filter(|t| t.is_some()).count() > owned.len();
        let mut result = build_result(members, owned);
        for (member, a) in result.iter_mut() {
            let learning: Vec<TopicPartitions> = learning
                .remove(member.as_str())
                .unwrap_or_default()
                .into_iter()
                .map(|(t, ps)| TopicPartitions::new(t, ps))
                .collect();
            // Nothing to say is said with no user data (read as no learners, no follow-up): a
            // Kafka 4.x coordinator converts a classic group to the consumer protocol only while
            // its assignments carry none (KAFKA-18134), so a settled learner-sticky group can be
            // upgraded in place, as a cooperative-sticky one.
            a.user_data = (follow_up || !learning.is_empty()).then(|| {
                encode_learner_assignment_data(&LearnerAssignmentData {
                    learning,
                    follow_up,
                })
            });
        }
        Ok(result)
    }
}

/// The cooperative-sticky computation, on dense indices: members by index in `members` (sorted by
/// [`member_order`]), topics by index in `topics`, partitions by a global index `g`.
struct StickyPlan<'a> {
    members: Vec<&'a MemberSubscription>,
    /// Topics someone subscribes to that have partitions, sorted.
    topics: Vec<&'a str>,
    /// Global index of each topic's partition 0; one extra entry holds the total.
    topic_start: Vec<usize>,
    /// The owner after resolving claims (step 1).
    prev_owner: Vec<Option<usize>>,
    /// Claimed by two members in the same (highest) generation.
    conflicted: Vec<bool>,
    /// The balanced, sticky assignment before the KIP-429 adjustment.
    target: Vec<Option<usize>>,
}

impl<'a> StickyPlan<'a> {
    fn partition(&self, g: usize) -> (usize, i32) {
        // topic_start is sorted; the topic is the last start at or before g.
        let t = self.topic_start.partition_point(|s| *s <= g) - 1;
        (t, (g - self.topic_start[t]) as i32)
    }

    fn withheld(&self, g: usize) -> bool {
        self.conflicted[g]
            || matches!((self.prev_owner[g], self.target[g]), (Some(a), Some(b)) if a != b)
    }

    /// `ready` maps a partition to a member that has learned it and is ready to own it
    /// (learner-sticky): an unowned partition goes to that member first. Members in `leaving`
    /// are no target for any topic another member subscribes to: they keep nothing and get
    /// nothing there, so their partitions are spread over the members that stay.
    fn compute(
        partitions_per_topic: &'a BTreeMap<String, i32>,
        members: &'a [MemberSubscription],
        ready: &BTreeMap<(String, i32), String>,
        leaving: &BTreeSet<String>,
    ) -> Result<StickyPlan<'a>> {
        let members = sorted_members(members)?;
        let mut subscribed: Vec<BTreeSet<&str>> = members.iter().map(|m| topic_set(m)).collect();
        let all: BTreeSet<&str> = subscribed.iter().flatten().copied().collect();
        // A topic that only leaving members subscribe to stays theirs: handing it to nobody
        // would leave it unread.
        let staying: BTreeSet<&str> = members
            .iter()
            .zip(&subscribed)
            .filter(|(m, _)| !leaving.contains(&m.member_id))
            .flat_map(|(_, topics)| topics.iter().copied())
            .collect();
        for (m, topics) in members.iter().zip(subscribed.iter_mut()) {
            if leaving.contains(&m.member_id) {
                topics.retain(|t| !staying.contains(t));
            }
        }
        let mut topics = Vec::new();
        let mut topic_start = vec![0usize];
        let mut topic_index: BTreeMap<&str, usize> = BTreeMap::new();
        for name in partitions_per_topic.keys() {
            if let Some(count) = partition_count(partitions_per_topic, name) {
                if all.contains(name.as_str()) {
                    topic_index.insert(name.as_str(), topics.len());
                    topics.push(name.as_str());
                    let end = topic_start[topic_start.len() - 1] + count as usize;
                    topic_start.push(end);
                }
            }
        }
        let total = topic_start[topics.len()];
        // subscribers[t]: member indices, ascending; member_topics[m][t]: subscribed?
        let mut subscribers: Vec<Vec<usize>> = vec![Vec::new(); topics.len()];
        let mut member_topics = vec![vec![false; topics.len()]; members.len()];
        for (m, subs) in subscribed.iter().enumerate() {
            for t in subs.iter().filter_map(|name| topic_index.get(name)) {
                subscribers[*t].push(m);
                member_topics[m][*t] = true;
            }
        }
        let topic_of = |g: usize| topic_start.partition_point(|s| *s <= g) - 1;

        // Step 1: resolve claims. best[g] = (generation, owner); owner None = same-generation tie.
        let mut best: Vec<Option<(i32, Option<usize>)>> = vec![None; total];
        for (m, member) in members.iter().enumerate() {
            let generation =
                subscription_generation(&member.subscription).unwrap_or(UNKNOWN_GENERATION);
            for tp in &member.subscription.owned_partitions {
                let Some(&t) = topic_index.get(tp.topic.as_str()) else {
                    continue;
                };
                let count = topic_start[t + 1] - topic_start[t];
                for &p in &tp.partitions {
                    if p < 0 || p as usize >= count {
                        continue;
                    }
                    let g = topic_start[t] + p as usize;
                    best[g] = match best[g] {
                        None => Some((generation, Some(m))),
                        Some((gen, owner)) => match generation.cmp(&gen) {
                            Ordering::Greater => Some((generation, Some(m))),
                            Ordering::Less => Some((gen, owner)),
                            // The same member listing a partition twice is not a conflict.
                            Ordering::Equal if owner == Some(m) => Some((gen, owner)),
                            Ordering::Equal => Some((gen, None)),
                        },
                    };
                }
            }
        }
        let prev_owner: Vec<Option<usize>> = best
            .iter()
            .map(|b| b.and_then(|(_, owner)| owner))
            .collect();
        let conflicted: Vec<bool> = best.iter().map(|b| matches!(b, Some((_, None)))).collect();

        // Step 2: owners keep what they still subscribe to.
        let mut target: Vec<Option<usize>> = vec![None; total];
        let mut load = vec![0usize; members.len()];
        // held[m][t]: partitions of topic t member m holds, to pick what to move in step 4.
        let mut held: Vec<Vec<BTreeSet<usize>>> =
            vec![vec![BTreeSet::new(); topics.len()]; members.len()];
        for g in 0..total {
            if let Some(m) = prev_owner[g] {
                let t = topic_of(g);
                if member_topics[m][t] {
                    target[g] = Some(m);
                    load[m] += 1;
                    held[m][t].insert(g);
                }
            }
        }

        // Step 3: unowned partitions to a member ready for them (learner-sticky), then to the
        // least-loaded subscriber, most constrained first.
        for ((topic, p), member_id) in ready {
            let (Some(&t), Some(m)) = (
                topic_index.get(topic.as_str()),
                members.iter().position(|m| &m.member_id == member_id),
            ) else {
                continue;
            };
            let count = topic_start[t + 1] - topic_start[t];
            if *p < 0 || *p as usize >= count || !member_topics[m][t] {
                continue;
            }
            let g = topic_start[t] + *p as usize;
            if target[g].is_none() && !conflicted[g] {
                target[g] = Some(m);
                load[m] += 1;
                held[m][t].insert(g);
            }
        }
        let mut free: Vec<usize> = (0..total).filter(|g| target[*g].is_none()).collect();
        free.sort_by_key(|g| (subscribers[topic_of(*g)].len(), *g));
        for g in free {
            let t = topic_of(g);
            let Some(&m) = subscribers[t].iter().min_by_key(|m| (load[**m], **m)) else {
                continue;
            };
            target[g] = Some(m);
            load[m] += 1;
            held[m][t].insert(g);
        }

        // Step 4: move partitions from overloaded holders to subscribers two or more below.
        // Each move lowers the sum of squared loads, so this ends.
        loop {
            let mut moved = false;
            for t in 0..topics.len() {
                while let Some(&to) = subscribers[t].iter().min_by_key(|m| (load[**m], **m)) {
                    let Some(&from) = subscribers[t]
                        .iter()
                        .filter(|m| !held[**m][t].is_empty())
                        .max_by_key(|m| (load[**m], std::cmp::Reverse(**m)))
                    else {
                        break;
                    };
                    if load[from] < load[to] + 2 {
                        break;
                    }
                    // Prefer a partition returning to its previous owner, then one `from` did
                    // not own before (moving it revokes nothing extra), then the highest.
                    let set = &held[from][t];
                    let g = set
                        .iter()
                        .find(|g| prev_owner[**g] == Some(to))
                        .or_else(|| set.iter().find(|g| prev_owner[**g] != Some(from)))
                        .or_else(|| set.iter().next_back())
                        .copied()
                        .expect("holder has a partition of the topic");
                    held[from][t].remove(&g);
                    held[to][t].insert(g);
                    load[from] -= 1;
                    load[to] += 1;
                    target[g] = Some(to);
                    moved = true;
                }
            }
            if !moved {
                break;
            }
        }

        Ok(StickyPlan {
            members,
            topics,
            topic_start,
            prev_owner,
            conflicted,
            target,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    fn ppt(topics: &[(&str, i32)]) -> BTreeMap<String, i32> {
        topics.iter().map(|(t, n)| (t.to_string(), *n)).collect()
    }

    fn member(id: &str, topics: &[&str]) -> MemberSubscription {
        MemberSubscription {
            member_id: id.to_string(),
            group_instance_id: None,
            subscription: Subscription {
                topics: topics.iter().map(|t| t.to_string()).collect(),
                generation_id: UNKNOWN_GENERATION,
                ..Default::default()
            },
        }
    }

    fn owning(
        id: &str,
        topics: &[&str],
        owned: &[(&str, i32)],
        generation: i32,
    ) -> MemberSubscription {
        let mut m = member(id, topics);
        m.subscription.owned_partitions =
            to_topic_partitions(owned.iter().map(|(t, p)| (t.to_string(), *p)));
        m.subscription.generation_id = generation;
        m
    }

    fn to_topic_partitions(parts: impl IntoIterator<Item = (String, i32)>) -> Vec<TopicPartitions> {
        let parts: Vec<(String, i32)> = parts.into_iter().collect();
        crate::protocol::group_by_topic(parts.iter().map(|(t, p)| (t.as_str(), *p)))
            .into_iter()
            .map(|(t, ps)| TopicPartitions::new(t, ps))
            .collect()
    }

    fn flat(a: &Assignment) -> Vec<(String, i32)> {
        a.partitions
            .iter()
            .flat_map(|tp| tp.partitions.iter().map(move |p| (tp.topic.clone(), *p)))
            .collect()
    }

    /// "t0-1"-style layout per member, for exact-layout assertions.
    fn layout(r: &BTreeMap<String, Assignment>) -> BTreeMap<String, Vec<String>> {
        r.iter()
            .map(|(m, a)| {
                (
                    m.clone(),
                    flat(a).iter().map(|(t, p)| format!("{t}-{p}")).collect(),
                )
            })
            .collect()
    }

    fn expect(pairs: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        pairs
            .iter()
            .map(|(m, ps)| (m.to_string(), ps.iter().map(|p| p.to_string()).collect()))
            .collect()
    }

    /// The contract every assignor keeps.
    fn check_valid(
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
        r: &BTreeMap<String, Assignment>,
    ) {
        let ids: BTreeSet<&str> = members.iter().map(|m| m.member_id.as_str()).collect();
        let keys: BTreeSet<&str> = r.keys().map(String::as_str).collect();
        assert_eq!(ids, keys, "one entry per member");
        let mut seen = BTreeSet::new();
        for m in members {
            for (t, p) in flat(&r[&m.member_id]) {
                let count = partitions_per_topic.get(&t).copied().unwrap_or(0);
                assert!(p >= 0 && p < count, "{t}-{p} does not exist");
                assert!(
                    m.subscription.topics.contains(&t),
                    "{t}-{p} to non-subscriber {}",
                    m.member_id
                );
                assert!(seen.insert((t.clone(), p)), "{t}-{p} assigned twice");
            }
        }
    }

    /// Every partition of a subscribed, known topic.
    fn all_subscribed(
        partitions_per_topic: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeSet<(String, i32)> {
        let topics: BTreeSet<&String> = members
            .iter()
            .flat_map(|m| &m.subscription.topics)
            .collect();
        topics
            .into_iter()
            .filter_map(|t| partitions_per_topic.get(t).map(|n| (t, *n)))
            .flat_map(|(t, n)| (0..n).map(move |p| (t.clone(), p)))
            .collect()
    }

    fn assigned_set(r: &BTreeMap<String, Assignment>) -> BTreeSet<(String, i32)> {
        r.values().flat_map(flat).collect()
    }

    #[test]
    fn names_protocols_and_lookup() {
        for (name, java, protocol) in [
            (
                "range",
                "org.apache.kafka.clients.consumer.RangeAssignor",
                RebalanceProtocol::Eager,
            ),
            (
                "roundrobin",
                "org.apache.kafka.clients.consumer.RoundRobinAssignor",
                RebalanceProtocol::Eager,
            ),
            (
                "cooperative-sticky",
                "org.apache.kafka.clients.consumer.CooperativeStickyAssignor",
                RebalanceProtocol::Cooperative,
            ),
        ] {
            for n in [name, java] {
                let a = assignor_by_name(n).unwrap();
                assert_eq!(a.name(), name);
                assert_eq!(a.protocol(), protocol);
            }
        }
        assert!(assignor_by_name("sticky").is_none());
        assert!(assignor_by_name("nope").is_none());
        assert_eq!(
            RangeAssignor.subscription_user_data(3, &[], LearnerIntent::default()),
            None
        );
        assert_eq!(
            CooperativeStickyAssignor.subscription_user_data(3, &[], LearnerIntent::default()),
            Some(encode_cooperative_user_data(3))
        );
    }

    /// The member side of each assignor, from literal user data: what it learns from its
    /// assignment, and what it ignores.
    #[test]
    fn each_assignor_reads_its_own_assignment_user_data() {
        let learning = vec![TopicPartitions {
            topic: "t0".into(),
            partitions: vec![1, 4],
        }];
        let learner_data = encode_learner_assignment_data(&LearnerAssignmentData {
            learning: learning.clone(),
            follow_up: true,
        });
        let marker = encode_cooperative_assignment_data(true).unwrap();
        let garbled = Bytes::from_static(&[0, 0, 0, 1, 0xff, 0xff]);
        let nothing = LearnerAssignmentData::default();
        let follow_up = LearnerAssignmentData {
            learning: Vec::new(),
            follow_up: true,
        };
        let learns = LearnerAssignmentData {
            learning,
            follow_up: true,
        };
        // (assignor, user data, what the member reads; None: a Corrupt error)
        let cases: [(&str, Option<&Bytes>, Option<&LearnerAssignmentData>); 14] = [
            ("range", None, Some(&nothing)),
            ("range", Some(&marker), Some(&nothing)),
            ("range", Some(&learner_data), Some(&nothing)),
            ("roundrobin", Some(&garbled), Some(&nothing)),
            ("cooperative-sticky", None, Some(&nothing)),
            ("cooperative-sticky", Some(&marker), Some(&follow_up)),
            // Another client's (or a learner-sticky leader's) bytes are not the marker.
            ("cooperative-sticky", Some(&learner_data), Some(&nothing)),
            ("cooperative-sticky", Some(&garbled), Some(&nothing)),
            ("learner-sticky", None, Some(&nothing)),
            ("learner-sticky", Some(&learner_data), Some(&learns)),
            ("learner-sticky", Some(&garbled), None),
            ("learner-sticky", Some(&marker), None),
            (
                "learner-sticky",
                Some(&encode_learner_assignment_data(
                    &LearnerAssignmentData::default(),
                )),
                Some(&nothing),
            ),
            (
                "learner-sticky",
                Some(&encode_learner_assignment_data(&LearnerAssignmentData {
                    learning: Vec::new(),
                    follow_up: true,
                })),
                Some(&follow_up),
            ),
        ];
        for (name, user_data, want) in cases {
            let got = assignor_by_name(name).unwrap().read_assignment(user_data);
            match (want, got) {
                (Some(w), Ok(g)) => assert_eq!(&g, w, "{name} {user_data:?}"),
                (None, Err(Error::Corrupt(_))) => {}
                (w, g) => panic!("{name} {user_data:?}: want {w:?}, got {g:?}"),
            }
        }
    }

    #[test]
    fn only_learner_sticky_hands_over_through_learners() {
        let handing_over: Vec<&str> = ASSIGNORS
            .iter()
            .filter(|e| (e.make)().hands_over_through_learners())
            .map(|e| e.name)
            .collect();
        assert_eq!(handing_over, ["learner-sticky"]);
    }

    #[test]
    fn duplicate_member_ids_are_corrupt() {
        let members = [member("a", &["t0"]), member("a", &["t0"])];
        for a in [
            assignor_by_name("range").unwrap(),
            assignor_by_name("roundrobin").unwrap(),
            assignor_by_name("cooperative-sticky").unwrap(),
        ] {
            assert!(matches!(
                a.assign(&ppt(&[("t0", 2)]), &members),
                Err(Error::Corrupt(_))
            ));
        }
    }

    #[test]
    fn range_two_members_two_topics() {
        let p = ppt(&[("t0", 3), ("t1", 3)]);
        let members = [member("B", &["t0", "t1"]), member("A", &["t1", "t0"])];
        let r = RangeAssignor.assign(&p, &members).unwrap();
        check_valid(&p, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[
                ("A", &["t0-0", "t0-1", "t1-0", "t1-1"]),
                ("B", &["t0-2", "t1-2"])
            ])
        );
    }

    #[test]
    fn range_uneven_split_mixed_subscriptions_and_unknown_topics() {
        let p = ppt(&[("t0", 7), ("t1", 2)]);
        let members = [
            member("c", &["t0"]),
            member("a", &["t0", "t1", "missing"]),
            member("b", &["t0", "t1"]),
            member("d", &[]),
        ];
        let r = RangeAssignor.assign(&p, &members).unwrap();
        check_valid(&p, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[
                ("a", &["t0-0", "t0-1", "t0-2", "t1-0"]),
                ("b", &["t0-3", "t0-4", "t1-1"]),
                ("c", &["t0-5", "t0-6"]),
                ("d", &[]),
            ])
        );
        // More members than partitions: the last ones get nothing.
        let p = ppt(&[("t0", 1)]);
        let members = [member("a", &["t0"]), member("b", &["t0"])];
        let r = RangeAssignor.assign(&p, &members).unwrap();
        assert_eq!(layout(&r), expect(&[("a", &["t0-0"]), ("b", &[])]));
    }

    #[test]
    fn static_members_sort_by_instance_id_first() {
        let p = ppt(&[("t0", 3)]);
        let mut z = member("z-member", &["t0"]);
        z.group_instance_id = Some("instance-1".into());
        let mut y = member("y-member", &["t0"]);
        y.group_instance_id = Some("instance-2".into());
        let a = member("a-dynamic", &["t0"]);
        let members = [a, y, z];
        let r = RangeAssignor.assign(&p, &members).unwrap();
        assert_eq!(
            layout(&r),
            expect(&[
                ("z-member", &["t0-0"]),
                ("y-member", &["t0-1"]),
                ("a-dynamic", &["t0-2"])
            ])
        );
        let r = RoundRobinAssignor.assign(&p, &members).unwrap();
        assert_eq!(
            layout(&r),
            expect(&[
                ("z-member", &["t0-0"]),
                ("y-member", &["t0-1"]),
                ("a-dynamic", &["t0-2"])
            ])
        );
    }

    #[test]
    fn roundrobin_two_members_two_topics() {
        let p = ppt(&[("t0", 3), ("t1", 3)]);
        let members = [member("A", &["t0", "t1"]), member("B", &["t0", "t1"])];
        let r = RoundRobinAssignor.assign(&p, &members).unwrap();
        check_valid(&p, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[
                ("A", &["t0-0", "t0-2", "t1-1"]),
                ("B", &["t0-1", "t1-0", "t1-2"])
            ])
        );
    }

    #[test]
    fn roundrobin_skips_unsubscribed_members_like_the_java_javadoc() {
        // The example in RoundRobinAssignor's javadoc.
        let p = ppt(&[("t0", 1), ("t1", 2), ("t2", 3), ("t3", 5)]);
        let members = [
            member("C0", &["t0"]),
            member("C1", &["t0", "t1"]),
            member("C2", &["t0", "t1", "t2"]),
        ];
        let r = RoundRobinAssignor.assign(&p, &members).unwrap();
        check_valid(&p, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[
                ("C0", &["t0-0"]),
                ("C1", &["t1-0"]),
                ("C2", &["t1-1", "t2-0", "t2-1", "t2-2"])
            ])
        );
    }

    /// Runs cooperative-sticky and checks the contract every assignor keeps.
    fn sticky(
        p: &BTreeMap<String, i32>,
        members: &[MemberSubscription],
    ) -> BTreeMap<String, Assignment> {
        let r = CooperativeStickyAssignor.assign(p, members).unwrap();
        check_valid(p, members, &r);
        r
    }

    fn loads(r: &BTreeMap<String, Assignment>) -> Vec<usize> {
        r.values().map(|a| flat(a).len()).collect()
    }

    fn spread(r: &BTreeMap<String, Assignment>) -> usize {
        let l = loads(r);
        l.iter().max().unwrap() - l.iter().min().unwrap()
    }

    /// The members as they join the next generation: each owns what it was assigned.
    fn next_round(
        members: &[MemberSubscription],
        r: &BTreeMap<String, Assignment>,
        generation: i32,
    ) -> Vec<MemberSubscription> {
        members
            .iter()
            .map(|m| {
                let mut m = m.clone();
                m.subscription.owned_partitions = r[&m.member_id].partitions.clone();
                m.subscription.generation_id = generation;
                m
            })
            .collect()
    }

    #[test]
    fn sticky_balances_from_scratch() {
        for n_members in 1..=6 {
            for n_partitions in 1..=20 {
                // One topic, and the same partitions split over two topics.
                let splits = [
                    ppt(&[("t0", n_partitions)]),
                    ppt(&[
                        ("t0", n_partitions / 2 + 1),
                        ("t1", n_partitions - n_partitions / 2 - 1),
                    ]),
                ];
                for p in splits {
                    let members: Vec<_> = (0..n_members)
                        .map(|i| member(&format!("m{i}"), &["t0", "t1"]))
                        .collect();
                    let r = sticky(&p, &members);
                    assert_eq!(assigned_set(&r), all_subscribed(&p, &members));
                    assert!(
                        spread(&r) <= 1,
                        "{n_members} members, {p:?}: {:?}",
                        loads(&r)
                    );
                }
            }
        }
    }

    #[test]
    fn sticky_scale_up_moves_only_what_balance_needs() {
        let p = ppt(&[("t0", 6)]);
        let r0 = sticky(&p, &[member("A", &["t0"]), member("B", &["t0"])]);
        assert_eq!(loads(&r0), vec![3, 3]);
        let mut members = next_round(&[member("A", &["t0"]), member("B", &["t0"])], &r0, 1);
        members.push(member("C", &["t0"]));

        // Round 1: A and B each give up one partition; C gets nothing yet (KIP-429).
        let r1 = sticky(&p, &members);
        for m in ["A", "B"] {
            let before: BTreeSet<_> = flat(&r0[m]).into_iter().collect();
            let after: BTreeSet<_> = flat(&r1[m]).into_iter().collect();
            assert!(after.is_subset(&before), "{m} only loses");
            assert_eq!(after.len(), 2, "{m} keeps all but one");
        }
        assert!(flat(&r1["C"]).is_empty());

        // Round 2: the two revoked partitions go to C; nobody else changes.
        let members = next_round(&members, &r1, 2);
        let r2 = sticky(&p, &members);
        assert_eq!(flat(&r2["A"]), flat(&r1["A"]));
        assert_eq!(flat(&r2["B"]), flat(&r1["B"]));
        assert_eq!(flat(&r2["C"]).len(), 2);
        assert_eq!(assigned_set(&r2), all_subscribed(&p, &members));
    }

    #[test]
    fn sticky_scale_down_keeps_survivors_and_hands_out_the_leavers_partitions() {
        let p = ppt(&[("t0", 4), ("t1", 5)]);
        let three = [
            member("A", &["t0", "t1"]),
            member("B", &["t0", "t1"]),
            member("C", &["t0", "t1"]),
        ];
        let r0 = sticky(&p, &three);
        let members = next_round(&three[..2], &r0, 1);
        // The leaver owned nothing anyone still claims, so its partitions move in one round.
        let r1 = sticky(&p, &members);
        for m in ["A", "B"] {
            let before: BTreeSet<_> = flat(&r0[m]).into_iter().collect();
            let after: BTreeSet<_> = flat(&r1[m]).into_iter().collect();
            assert!(before.is_subset(&after), "{m} keeps what it had");
        }
        assert_eq!(assigned_set(&r1), all_subscribed(&p, &members));
        assert!(spread(&r1) <= 1);
    }

    #[test]
    fn same_generation_double_claims_are_dropped_from_both() {
        let p = ppt(&[("t0", 4)]);
        let members = [
            owning("A", &["t0"], &[("t0", 0), ("t0", 1)], 5),
            owning("B", &["t0"], &[("t0", 1), ("t0", 2)], 5),
        ];
        let r = sticky(&p, &members);
        let everything = assigned_set(&r);
        assert!(
            !everything.contains(&("t0".to_string(), 1)),
            "t0-1 is withheld"
        );
        assert!(flat(&r["A"]).contains(&("t0".to_string(), 0)));
        assert!(flat(&r["B"]).contains(&("t0".to_string(), 2)));
        // Both revoke t0-1; the next round assigns it.
        let members = next_round(&members, &r, 6);
        let r = sticky(&p, &members);
        assert_eq!(assigned_set(&r), all_subscribed(&p, &members));
    }

    #[test]
    fn higher_generation_claim_wins() {
        let p = ppt(&[("t0", 2)]);
        let members = [
            owning("A", &["t0"], &[("t0", 0)], 5),
            owning("B", &["t0"], &[("t0", 0), ("t0", 1)], 4),
        ];
        let r = sticky(&p, &members);
        assert_eq!(layout(&r), expect(&[("A", &["t0-0"]), ("B", &["t0-1"])]));

        // Older subscription versions carry the generation in the cooperative user data.
        let mut members = members.clone();
        for (m, generation) in members.iter_mut().zip([4, 5]) {
            m.subscription.generation_id = UNKNOWN_GENERATION;
            m.subscription.user_data = Some(encode_cooperative_user_data(generation));
        }
        // B now wins both; balance moves one to A, which waits a round (KIP-429).
        let r = sticky(&p, &members);
        assert_eq!(layout(&r), expect(&[("A", &[]), ("B", &["t0-0"])]));
    }

    #[test]
    fn owned_partitions_of_gone_topics_or_partitions_are_ignored() {
        let p = ppt(&[("t0", 2)]);
        let members = [
            owning("A", &["t0"], &[("t0", 0), ("t0", 7), ("gone", 0)], 1),
            member("B", &["t0"]),
        ];
        let r = sticky(&p, &members);
        assert_eq!(layout(&r), expect(&[("A", &["t0-0"]), ("B", &["t0-1"])]));
    }

    #[test]
    fn unsubscribed_owned_partitions_move_after_revocation() {
        let p = ppt(&[("t0", 2), ("t1", 2)]);
        // A dropped t1 but still lists it; B takes t1 only after A revokes it.
        let members = [
            owning(
                "A",
                &["t0"],
                &[("t0", 0), ("t0", 1), ("t1", 0), ("t1", 1)],
                3,
            ),
            owning("B", &["t0", "t1"], &[], 3),
        ];
        let r = sticky(&p, &members);
        assert_eq!(layout(&r), expect(&[("A", &["t0-0", "t0-1"]), ("B", &[])]));
        let members = next_round(&members, &r, 4);
        let r = sticky(&p, &members);
        assert_eq!(
            layout(&r),
            expect(&[("A", &["t0-0", "t0-1"]), ("B", &["t1-0", "t1-1"])])
        );
    }

    #[test]
    fn differing_subscriptions() {
        let p = ppt(&[("t0", 4), ("t1", 4)]);
        let members = [
            member("A", &["t0"]),
            member("B", &["t0", "t1"]),
            member("C", &["t1"]),
        ];
        let r = sticky(&p, &members);
        assert_eq!(assigned_set(&r), all_subscribed(&p, &members));
        assert!(spread(&r) <= 1, "{:?}", loads(&r));

        // B can only take t1, so A keeps all of t0.
        let p = ppt(&[("t0", 4), ("t1", 2)]);
        let members = [member("A", &["t0", "t1"]), member("B", &["t1"])];
        let r = sticky(&p, &members);
        assert_eq!(
            layout(&r),
            expect(&[
                ("A", &["t0-0", "t0-1", "t0-2", "t0-3"]),
                ("B", &["t1-0", "t1-1"])
            ])
        );
    }

    /// Random groups that change over many generations: members join, leave and change
    /// subscriptions, and each round every member owns what it was last assigned.
    #[test]
    fn kip429_no_partition_goes_to_a_new_owner_while_revoked_from_the_old() {
        let topic_names = ["a", "b", "c", "d"];
        for seed in 0..300u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let p: BTreeMap<String, i32> = topic_names
                .iter()
                .take(rng.gen_range(1..=4))
                .map(|t| (t.to_string(), rng.gen_range(1..=12)))
                .collect();
            let topics: Vec<&str> = p.keys().map(String::as_str).collect();
            let equal = rng.gen_bool(0.5);
            let random_topics = |rng: &mut StdRng| -> Vec<&str> {
                if equal {
                    return topics.clone();
                }
                let mut ts: Vec<&str> = topics
                    .iter()
                    .copied()
                    .filter(|_| rng.gen_bool(0.6))
                    .collect();
                if ts.is_empty() {
                    ts.push(topics[rng.gen_range(0..topics.len())]);
                }
                ts
            };
            let mut next_id = 0;
            let mut members: Vec<MemberSubscription> = Vec::new();
            for generation in 1..=12 {
                // Change the membership in the first rounds, then let it settle.
                if generation <= 6 {
                    if members.is_empty() || rng.gen_bool(0.5) {
                        for _ in 0..rng.gen_range(1..=3) {
                            let ts = random_topics(&mut rng);
                            members.push(member(&format!("m{next_id:02}"), &ts));
                            next_id += 1;
                        }
                    }
                    if members.len() > 1 && rng.gen_bool(0.4) {
                        members.remove(rng.gen_range(0..members.len()));
                    }
                }
                let r = sticky(&p, &members);
                // The rule: a partition some member owns goes to nobody else this generation.
                for m in &members {
                    for (t, part) in flat(&r[&m.member_id]) {
                        for other in members.iter().filter(|o| o.member_id != m.member_id) {
                            let claims = other
                                .subscription
                                .owned_partitions
                                .iter()
                                .any(|tp| tp.topic == t && tp.partitions.contains(&part));
                            assert!(
                                !claims,
                                "seed {seed} gen {generation}: {t}-{part} to {} while {} owns it",
                                m.member_id, other.member_id
                            );
                        }
                    }
                }
                members = next_round(&members, &r, generation);
            }
            // Settled: everything is assigned, and with equal subscriptions, balanced.
            let r = sticky(&p, &members);
            assert_eq!(
                assigned_set(&r),
                all_subscribed(&p, &members),
                "seed {seed}"
            );
            if equal {
                assert!(spread(&r) <= 1, "seed {seed}: {:?}", loads(&r));
            }
            // And a further round changes nothing.
            let again = sticky(&p, &next_round(&members, &r, 100));
            assert_eq!(again, r, "seed {seed}: stable once settled");
        }
    }

    #[test]
    fn sticky_large_group_scale_up() {
        // 10 topics x 300 partitions over 60 members, then 20 more join: guards against the
        // balancing loop going quadratic in a way that matters.
        let p: BTreeMap<String, i32> = (0..10).map(|i| (format!("t{i}"), 300)).collect();
        let topics: Vec<&str> = p.keys().map(String::as_str).collect();
        let mut members: Vec<_> = (0..60)
            .map(|i| member(&format!("m{i:03}"), &topics))
            .collect();
        let r = sticky(&p, &members);
        assert!(spread(&r) <= 1);
        members = next_round(&members, &r, 1);
        members.extend((60..80).map(|i| member(&format!("m{i:03}"), &topics)));
        let r1 = sticky(&p, &members);
        // 3000 partitions, 37.5 each: only the 20 x 37 the newcomers need at least move.
        let kept: usize = (0..60).map(|i| flat(&r1[&format!("m{i:03}")]).len()).sum();
        assert_eq!(kept, 3000 - 20 * 37);
        let members = next_round(&members, &r1, 2);
        let r2 = sticky(&p, &members);
        assert_eq!(assigned_set(&r2).len(), 3000);
        assert!(spread(&r2) <= 1);
    }

    #[test]
    fn eager_assignors_hand_out_everything_to_subscribers() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..200 {
            let p: BTreeMap<String, i32> = ["a", "b", "c"]
                .iter()
                .map(|t| (t.to_string(), rng.gen_range(0..9)))
                .collect();
            let members: Vec<_> = (0..rng.gen_range(1..6))
                .map(|i| {
                    let ts: Vec<&str> = ["a", "b", "c", "x"]
                        .iter()
                        .copied()
                        .filter(|_| rng.gen_bool(0.5))
                        .collect();
                    member(&format!("m{i}"), &ts)
                })
                .collect();
            for a in [&RangeAssignor as &dyn Assignor, &RoundRobinAssignor] {
                let r = a.assign(&p, &members).unwrap();
                check_valid(&p, &members, &r);
                assert_eq!(assigned_set(&r), all_subscribed(&p, &members));
            }
        }
    }

    fn learning_of(a: &Assignment) -> Vec<String> {
        crate::protocol::consumer_protocol::decode_learner_assignment_data(a.user_data.as_ref())
            .unwrap()
            .learning
            .iter()
            .flat_map(|tp| {
                tp.partitions
                    .iter()
                    .map(move |p| format!("{}-{p}", tp.topic))
            })
            .collect()
    }

    fn follow_ups(r: &BTreeMap<String, Assignment>) -> Vec<bool> {
        r.values().map(follow_up_of).collect()
    }

    fn follow_up_of(a: &Assignment) -> bool {
        crate::protocol::consumer_protocol::decode_learner_assignment_data(a.user_data.as_ref())
            .unwrap()
            .follow_up
    }

    /// The assignment says a follow-up rebalance is coming exactly when a partition is in
    /// transit (owned by nobody this generation): not while a learner warms up (its owner keeps
    /// it), but once the learner is ready and its owner gives the partition up.
    #[test]
    fn the_follow_up_flag_is_set_while_partitions_are_in_transit() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 4)]);
        let all = [("t", 0), ("t", 1), ("t", 2), ("t", 3)];
        let owners = || {
            vec![
                learner("a", &all[..2], &[], 3),
                learner("b", &all[2..], &[], 3),
            ]
        };
        let flags = |r: &BTreeMap<String, Assignment>| -> Vec<bool> {
            r.values().map(follow_up_of).collect()
        };

        let r = a.assign(&topics, &owners()).unwrap();
        assert_eq!(flags(&r), [false, false], "a stable group");
        // KAFKA-18134: a coordinator converts a classic group to the consumer protocol only
        // while its assignments carry no user data; a settled group's carry none.
        assert!(r.values().all(|a| a.user_data.is_none()), "stable: {r:?}");

        let mut members = owners();
        members.push(learner("c", &[], &[], UNKNOWN_GENERATION));
        let r = a.assign(&topics, &members).unwrap();
        let learned = learning_of(&r["c"]);
        assert_eq!(learned.len(), 1);
        assert!(
            r["c"].user_data.is_some(),
            "the learner hears what it learns"
        );
        assert_eq!(
            flags(&r),
            [false; 3],
            "c warms up, the owner keeps {learned:?}"
        );

        let p: i32 = learned[0].trim_start_matches("t-").parse().unwrap();
        let mut members = owners();
        members.push(learner("c", &[], &[("t", p)], UNKNOWN_GENERATION));
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        let owned_now = r.values().map(|x| flat(x).len()).sum::<usize>();
        assert_eq!(owned_now, 3, "t-{p} leaves its owner: {r:?}");
        assert_eq!(flags(&r), [true; 3], "t-{p} is in transit");
    }

    /// cooperative-sticky tells every member that a second round is coming exactly when it left
    /// partitions out to move (KIP-429), with bytes that only lagless reads: a stable group's
    /// assignments carry no user data, as Java's do.
    #[test]
    fn cooperative_sticky_marks_the_assignment_when_partitions_are_in_transit() {
        use crate::protocol::consumer_protocol::cooperative_follow_up;
        let topics = ppt(&[("t", 4)]);
        let all = [("t", 0), ("t", 1), ("t", 2), ("t", 3)];
        let owner = |id: &str, owned: &[(&str, i32)]| owning(id, &["t"], owned, 3);
        let r = sticky(&topics, &[owner("a", &all[..2]), owner("b", &all[2..])]);
        assert!(r.values().all(|a| a.user_data.is_none()), "stable: {r:?}");

        let newcomer = member("c", &["t"]);
        let members = [owner("a", &all[..2]), owner("b", &all[2..]), newcomer];
        let r = sticky(&topics, &members);
        assert_eq!(assigned_set(&r).len(), 3, "one partition moves to c: {r:?}");
        assert!(
            r.values()
                .all(|a| cooperative_follow_up(a.user_data.as_ref())),
            "every member hears of the follow-up: {r:?}"
        );

        // The second round: the partition has no owner, so nothing is left out.
        let kept = |id: &str| flat(&r[id]);
        let (a_kept, b_kept) = (kept("a"), kept("b"));
        fn as_refs(v: &[(String, i32)]) -> Vec<(&str, i32)> {
            v.iter().map(|(t, p)| (t.as_str(), *p)).collect()
        }
        let (a_owned, b_owned) = (as_refs(&a_kept), as_refs(&b_kept));
        let members = [owner("a", &a_owned), owner("b", &b_owned), owner("c", &[])];
        let r = sticky(&topics, &members);
        assert_eq!(assigned_set(&r).len(), 4, "{r:?}");
        assert!(r.values().all(|a| a.user_data.is_none()), "{r:?}");
    }

    /// A learner-sticky member owning `owned` in `generation`, ready for `ready`.
    fn learner(
        id: &str,
        owned: &[(&str, i32)],
        ready: &[(&str, i32)],
        generation: i32,
    ) -> MemberSubscription {
        learner_with(id, owned, ready, generation, LearnerIntent::default())
    }

    /// [`learner`], leaving or with a warm-up budget.
    fn learner_with(
        id: &str,
        owned: &[(&str, i32)],
        ready: &[(&str, i32)],
        generation: i32,
        intent: LearnerIntent,
    ) -> MemberSubscription {
        let mut m = owning(id, &["t"], owned, generation);
        let ready = to_topic_partitions(ready.iter().map(|(t, p)| (t.to_string(), *p)));
        m.subscription.user_data =
            LearnerStickyAssignor.subscription_user_data(generation, &ready, intent);
        m
    }

    fn tps(names: &[String]) -> Vec<(&'static str, i32)> {
        names
            .iter()
            .map(|s| ("t", s.trim_start_matches("t-").parse().unwrap()))
            .collect()
    }

    const LEAVING: LearnerIntent = LearnerIntent {
        leaving: true,
        max_learning: 0,
    };

    /// Scale-down, seed 002: of three members, `c` leaves gracefully. It keeps consuming its
    /// partitions while `a` and `b` learn them (one each, for balance), gets nothing new, and
    /// only once a learner is ready does that partition leave `c`; in the end `c` owns nothing
    /// and may go. No generation gives a partition to two members, none leaves one unowned
    /// except in transit.
    #[test]
    fn a_leaving_member_keeps_its_partitions_until_the_survivors_have_learned_them() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 6)]);
        let owned_a = [("t", 0), ("t", 1)];
        let owned_b = [("t", 2), ("t", 3)];
        let owned_c = [("t", 4), ("t", 5)];

        let members = vec![
            learner("a", &owned_a, &[], 1),
            learner("b", &owned_b, &[], 1),
            learner_with("c", &owned_c, &[], 1, LEAVING),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[
                ("a", &["t-0", "t-1"]),
                ("b", &["t-2", "t-3"]),
                ("c", &["t-4", "t-5"])
            ]),
            "nobody stops while the survivors warm up"
        );
        let (la, lb) = (learning_of(&r["a"]), learning_of(&r["b"]));
        assert_eq!((la.len(), lb.len()), (1, 1), "{la:?} {lb:?}");
        let mut learned = [la.clone(), lb.clone()].concat();
        learned.sort();
        assert_eq!(learned, ["t-4", "t-5"]);
        assert!(learning_of(&r["c"]).is_empty());
        assert_eq!(follow_ups(&r), [false; 3], "nothing is in transit yet");

        // a is ready, b is not: only a's partition leaves c.
        let members = vec![
            learner("a", &owned_a, &tps(&la), 2),
            learner("b", &owned_b, &[], 2),
            learner_with("c", &owned_c, &[], 2, LEAVING),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(layout_of(&r["c"]), lb, "c keeps what b still learns");
        assert_eq!(layout_of(&r["a"]), ["t-0", "t-1"]);
        assert_eq!(follow_ups(&r), [true; 3], "a's partition is in transit");

        // Both ready, c has given a's up: b's leaves c too, a gets its own.
        let members = vec![
            learner("a", &owned_a, &tps(&la), 3),
            learner("b", &owned_b, &tps(&lb), 3),
            learner_with("c", &tps(&lb), &[], 3, LEAVING),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(
            layout_of(&r["a"]),
            [vec!["t-0".to_string(), "t-1".into()], la.clone()].concat()
        );
        assert!(
            layout_of(&r["c"]).is_empty(),
            "c has handed everything over: {r:?}"
        );

        // And then c owns nothing: the group is balanced over the survivors.
        let members = vec![
            learner("a", &[owned_a.to_vec(), tps(&la)].concat(), &[], 4),
            learner("b", &owned_b, &tps(&lb), 4),
            learner_with("c", &[], &[], 4, LEAVING),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(layout_of(&r["a"]).len(), 3);
        assert_eq!(layout_of(&r["b"]).len(), 3);
        assert!(layout_of(&r["c"]).is_empty() && learning_of(&r["c"]).is_empty());
    }

    /// A leaving member that is the only subscriber of a topic keeps it (nobody else could read
    /// it); one whose every member leaves keeps its owners. A leaving newcomer gets nothing.
    #[test]
    fn a_topic_only_leaving_members_read_stays_with_them() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 2), ("u", 2)]);
        let mut c = owning("c", &["t", "u"], &[("t", 1), ("u", 0), ("u", 1)], 1);
        c.subscription.user_data = a.subscription_user_data(1, &[], LEAVING);
        let mut d = member("d", &["t"]);
        d.subscription.user_data = a.subscription_user_data(UNKNOWN_GENERATION, &[], LEAVING);
        let members = vec![learner("a", &[("t", 0)], &[], 1), c, d];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[("a", &["t-0"]), ("c", &["t-1", "u-0", "u-1"]), ("d", &[])])
        );
        assert_eq!(learning_of(&r["a"]), ["t-1"]);
        assert!(learning_of(&r["d"]).is_empty());
    }

    /// The warm-up budget: a member that learns at most one partition at once learns one, and
    /// the next only once the first is ready (the first then moves, the next starts). Owners
    /// keep everything meanwhile.
    #[test]
    fn a_warm_up_budget_limits_what_a_member_learns_at_once() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 6)]);
        let all: Vec<(&str, i32)> = (0..6).map(|p| ("t", p)).collect();
        let one = LearnerIntent {
            leaving: false,
            max_learning: 1,
        };
        let members = vec![
            learner("a", &all, &[], 1),
            learner_with("b", &[], &[], UNKNOWN_GENERATION, one),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(layout_of(&r["a"]).len(), 6);
        let first = learning_of(&r["b"]);
        assert_eq!(first.len(), 1, "{first:?}");

        // The first is ready: it moves, and b starts the second.
        let members = vec![
            learner("a", &all, &[], 2),
            learner_with("b", &[], &tps(&first), 2, one),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(layout_of(&r["a"]).len(), 5, "the ready one is in transit");
        let now = learning_of(&r["b"]);
        assert_eq!(now.len(), 2, "the ready one and one more: {now:?}");
        assert!(now.contains(&first[0]));

        // Without a budget, b learns all three balance moves to it at once.
        let members = vec![
            learner("a", &all, &[], 1),
            learner("b", &[], &[], UNKNOWN_GENERATION),
        ];
        let r = a.assign(&topics, &members).unwrap();
        assert_eq!(learning_of(&r["b"]).len(), 3);
    }

    /// Five members join one owner of ten partitions at once, each with a budget of one: each
    /// learns exactly one partition, the owner keeps all ten, and no partition has two learners.
    #[test]
    fn a_budget_holds_when_five_members_join_at_once() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 10)]);
        let all: Vec<(&str, i32)> = (0..10).map(|p| ("t", p)).collect();
        let one = LearnerIntent {
            leaving: false,
            max_learning: 1,
        };
        let mut members = vec![learner("a", &all, &[], 1)];
        for id in ["b", "c", "d", "e", "f"] {
            members.push(learner_with(id, &[], &[], UNKNOWN_GENERATION, one));
        }
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(layout_of(&r["a"]).len(), 10);
        let mut learned: Vec<String> = Vec::new();
        for id in ["b", "c", "d", "e", "f"] {
            let l = learning_of(&r[id]);
            assert_eq!(l.len(), 1, "{id}: {l:?}");
            learned.extend(l);
        }
        learned.sort();
        learned.dedup();
        assert_eq!(learned.len(), 5, "one learner per partition");
    }

    /// A scale-up from two members to three with learner assignments: while the new member warms
    /// up, the owners keep every partition and it only learns; once it says it is ready, the
    /// partitions it learned leave their owners (cooperative), and in the next generation they
    /// are its own. At no generation is a partition given to two members.
    #[test]
    fn learner_sticky_moves_a_partition_only_once_its_learner_is_ready() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 6)]);
        let owned_a = [("t", 0), ("t", 1), ("t", 2)];
        let owned_b = [("t", 3), ("t", 4), ("t", 5)];

        // Generation 2: c joins. Owners keep everything; c learns one partition of each.
        let members = vec![
            learner("a", &owned_a, &[], 1),
            learner("b", &owned_b, &[], 1),
            learner("c", &[], &[], UNKNOWN_GENERATION),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(
            layout(&r),
            expect(&[
                ("a", &["t-0", "t-1", "t-2"]),
                ("b", &["t-3", "t-4", "t-5"]),
                ("c", &[])
            ])
        );
        let learned = learning_of(&r["c"]);
        assert_eq!(learned.len(), 2, "{learned:?}");
        assert!(learning_of(&r["a"]).is_empty() && learning_of(&r["b"]).is_empty());
        let learned_tp: Vec<(&str, i32)> = learned
            .iter()
            .map(|s| ("t", s.trim_start_matches("t-").parse().unwrap()))
            .collect();

        // The same group again before c is ready (another member's rejoin): nothing moves.
        let r2 = a.assign(&topics, &members).unwrap();
        assert_eq!(layout(&r2), layout(&r));

        // Generation 3: c is ready. The learned partitions leave their owners, nobody gets
        // them yet (their owners revoke them first), and c still learns them.
        let members = vec![
            learner("a", &owned_a, &[], 2),
            learner("b", &owned_b, &[], 2),
            learner("c", &[], &learned_tp, 2),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        let mut everyone: Vec<String> = r.values().flat_map(layout_of).collect();
        everyone.sort();
        assert_eq!(
            everyone.len(),
            4,
            "two partitions withheld: {:?}",
            layout(&r)
        );
        for l in &learned {
            assert!(
                !everyone.contains(l),
                "{l} given out while its owner still has it"
            );
        }
        assert_eq!(learning_of(&r["c"]), learned);

        // Generation 4: the owners gave them up; c, still ready, gets exactly them.
        let keep_a: Vec<(&str, i32)> = owned_a
            .iter()
            .copied()
            .filter(|tp| !learned_tp.contains(tp))
            .collect();
        let keep_b: Vec<(&str, i32)> = owned_b
            .iter()
            .copied()
            .filter(|tp| !learned_tp.contains(tp))
            .collect();
        let members = vec![
            learner("a", &keep_a, &[], 3),
            learner("b", &keep_b, &[], 3),
            learner("c", &[], &learned_tp, 3),
        ];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        assert_eq!(layout_of(&r["c"]), learned);
        assert!(learning_of(&r["c"]).is_empty());
        assert_eq!(layout_of(&r["a"]).len(), 2);
        assert_eq!(layout_of(&r["b"]).len(), 2);
    }

    /// A newcomer learns, in one generation, what balance moves to it: the second member of a
    /// group whose only member owns four partitions learns two, a third member joining two
    /// owners of two each learns one, whatever order the member ids sort in. (A group that forms
    /// one member at a time therefore has its second member learn two partitions before a third
    /// joins.)
    #[test]
    fn a_newcomer_learns_what_balance_moves_to_it() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 4)]);
        let ids = ["a", "b", "c"];
        for (x, y, z) in [
            (0, 1, 2),
            (0, 2, 1),
            (1, 0, 2),
            (1, 2, 0),
            (2, 0, 1),
            (2, 1, 0),
        ] {
            let (owner, other, newcomer) = (ids[x], ids[y], ids[z]);
            let all = [("t", 0), ("t", 1), ("t", 2), ("t", 3)];
            let members = vec![
                learner(owner, &all, &[], 1),
                learner(newcomer, &[], &[], UNKNOWN_GENERATION),
            ];
            let r = a.assign(&topics, &members).unwrap();
            check_valid(&topics, &members, &r);
            assert_eq!(layout_of(&r[owner]).len(), 4, "the owner keeps everything");
            assert_eq!(learning_of(&r[newcomer]).len(), 2, "{r:?}");

            let members = vec![
                learner(owner, &all[..2], &[], 3),
                learner(other, &all[2..], &[], 3),
                learner(newcomer, &[], &[], UNKNOWN_GENERATION),
            ];
            let r = a.assign(&topics, &members).unwrap();
            check_valid(&topics, &members, &r);
            assert_eq!(layout_of(&r[owner]).len(), 2);
            assert_eq!(layout_of(&r[other]).len(), 2);
            assert_eq!(learning_of(&r[newcomer]).len(), 1, "{r:?}");
            assert!(learning_of(&r[owner]).is_empty() && learning_of(&r[other]).is_empty());
        }
    }

    fn layout_of(a: &Assignment) -> Vec<String> {
        flat(a).iter().map(|(t, p)| format!("{t}-{p}")).collect()
    }

    /// An owner that stops subscribing to the topic cannot keep a partition for a learner: it
    /// moves as cooperative-sticky moves it. Bad learner user data from a member is read as
    /// nothing ready; the group still gets a valid assignment.
    #[test]
    fn learner_sticky_edge_cases() {
        let a = LearnerStickyAssignor;
        let topics = ppt(&[("t", 2), ("u", 1)]);
        let mut gone = owning("a", &["u"], &[("t", 0), ("t", 1)], 1);
        gone.subscription.user_data = a.subscription_user_data(1, &[], LearnerIntent::default());
        let mut garbled = member("b", &["t", "u"]);
        garbled.subscription.user_data = Some(Bytes::from_static(&[0, 0, 0, 1, 0xff, 0xff]));
        let members = vec![gone, garbled];
        let r = a.assign(&topics, &members).unwrap();
        check_valid(&topics, &members, &r);
        // t-0 and t-1 were owned by a, which no longer subscribes to t: withheld now, not kept.
        assert_eq!(layout(&r), expect(&[("a", &["u-0"]), ("b", &[])]));
        assert!(learning_of(&r["b"]).is_empty());
    }
}
