//! What `poll()` does next for the group, decided from what the member knows: its membership,
//! the consumer's side of the group (what it owns and subscribes to, the join under way),
//! metadata and the time. Nothing here sends, waits or calls the listener: the consumer
//! (`consumer/group.rs`) carries each step out on the caller's thread.
//!
//! The steps follow one path, the one librdkafka's cgrp join states and franz-go's group loop
//! walk too: report the partitions of a lost generation, wait for a join under way, take in a
//! finished join (or drop it when the member left its generation meanwhile), revoke what must
//! go before joining, join.
use std::collections::BTreeSet;
use std::time::Instant;

use regex::Regex;

use crate::cluster::Metadata;
use crate::error::{Error, Result};
use crate::group::assignor::RebalanceProtocol;
use crate::group::member::{Generation, MemberState, Membership};
use crate::group::metadata_snapshot::MetadataSnapshot;
use crate::group::rebalance::{accept_join_outcome, to_revoke_before_join, JoinChanges};
use crate::types::TopicPartition;

/// What a member sends when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JoinInput {
    pub topics: Vec<String>,
    /// A server-side regex subscription (KIP-848): the coordinator resolves it; `topics` is
    /// empty then.
    pub regex: Option<String>,
    pub owned: BTreeSet<TopicPartition>,
    /// Learned partitions this member is ready to own (learner-sticky).
    pub ready: BTreeSet<TopicPartition>,
    pub reason: String,
}

/// What a completed join gives the caller's thread.
#[derive(Debug, Clone)]
pub(crate) struct JoinOutcome {
    /// The generation the join ended in: `poll()` applies the outcome only while the member is
    /// still in it.
    pub generation: Generation,
    pub assigned: BTreeSet<TopicPartition>,
    /// Partitions this member learns while their owners keep them (learner-sticky).
    pub learning: BTreeSet<TopicPartition>,
    /// The protocol of the assignor the group chose.
    pub protocol: RebalanceProtocol,
    /// What the assignment was computed from: set here when this member is the leader; for a
    /// follower, what the cluster shows right after the join stands in for it.
    pub assigned_from: Option<MetadataSnapshot>,
    /// The assignment said a follow-up rebalance is coming (learner-sticky).
    pub follow_up: bool,
}

/// Where the join that `poll()` started is.
#[derive(Debug)]
pub(crate) enum JoinProgress<'a> {
    /// No join under way.
    Idle,
    /// JoinGroup/SyncGroup still under way.
    Running,
    /// Finished; `poll()` has not taken the result in yet.
    Finished(&'a Result<JoinOutcome>),
}

/// The consumer's side of the group, as the next step is decided from it.
#[derive(Debug)]
pub(crate) struct LocalGroup<'a> {
    /// How this member rebalances (decided from the assignors it offers).
    pub protocol: RebalanceProtocol,
    pub owned: &'a BTreeSet<TopicPartition>,
    /// The subscribed topics (for a pattern, those that matched so far).
    pub subscribed: &'a BTreeSet<String>,
    /// Whether the subscription is a pattern.
    pub pattern: bool,
    /// The server-side regex of the subscription (KIP-848), if it is one.
    pub regex: Option<&'a str>,
    /// Learned partitions this member is ready to own (learner-sticky).
    pub ready: &'a BTreeSet<TopicPartition>,
    pub join: JoinProgress<'a>,
    /// A failed join is not tried again before this.
    pub join_retry_at: Instant,
}

/// What `poll()` does next for the group.
#[derive(Debug, PartialEq)]
pub(crate) enum GroupStep {
    /// The generation was reset under the member (`max.poll.interval.ms`, a stale generation,
    /// an unknown member id): report what it owned lost, before anything else.
    ReportLost,
    /// Nothing to do now: a join is under way, or no rebalance is due (yet).
    Wait,
    /// The join finished in the generation the member is still in: apply its assignment.
    ApplyJoin,
    /// The join finished, but the member left that generation since: its assignment may give
    /// partitions that are another member's already. Drop it and rejoin (Java's
    /// resetStateAndRejoin).
    DiscardJoin,
    /// The join failed with an error the member cannot go on from: `poll()` reports it.
    JoinFatal,
    /// The join failed for now: try again after `retry.backoff.ms`.
    RetryJoin,
    /// Before joining, give these up (Java's onJoinPrepare).
    Revoke(BTreeSet<TopicPartition>),
    /// Send JoinGroup with this.
    Join(JoinInput),
}

/// Whether a failed join ends the member: a fatal broker answer, an assignment that cannot be
/// read, or a setting the group refuses. Anything else is tried again.
pub(crate) fn join_error_is_fatal(e: &Error) -> bool {
    e.is_fatal() || matches!(e, Error::Corrupt(_) | Error::Config { .. })
}

/// The next group step of `poll()`.
pub(crate) fn next_step(m: &Membership, g: &LocalGroup<'_>, now: Instant) -> GroupStep {
    if m.partitions_lost() {
        return GroupStep::ReportLost;
    }
    match g.join {
        JoinProgress::Running => return GroupStep::Wait,
        JoinProgress::Finished(Ok(outcome))
            if accept_join_outcome(m.generation(), &outcome.generation) =>
        {
            return GroupStep::ApplyJoin
        }
        JoinProgress::Finished(Ok(_)) => return GroupStep::DiscardJoin,
        JoinProgress::Finished(Err(e)) if join_error_is_fatal(e) => return GroupStep::JoinFatal,
        JoinProgress::Finished(Err(_)) => return GroupStep::RetryJoin,
        JoinProgress::Idle => {}
    }
    let due = m.rejoin_needed() || m.state() == MemberState::Unjoined;
    if !due || now < g.join_retry_at {
        return GroupStep::Wait;
    }
    if g.pattern && g.subscribed.is_empty() {
        // Nothing matches yet: wait for metadata rather than join with no topics.
        return GroupStep::Wait;
    }
    // The protocol is this member's own, decided from the assignors it offers, not the one
    // the group chose last time. Under a server-side regex the member does not know which
    // topics match: the coordinator's assignment revokes what no longer does.
    if g.regex.is_none() {
        let to_revoke = to_revoke_before_join(g.protocol, g.owned, g.subscribed);
        if !to_revoke.is_empty() {
            return GroupStep::Revoke(to_revoke);
        }
    }
    GroupStep::Join(JoinInput {
        topics: g.subscribed.iter().cloned().collect(),
        regex: g.regex.map(str::to_string),
        owned: g.owned.clone(),
        ready: g.ready.clone(),
        reason: m.rejoin_reason().to_string(),
    })
}

/// Whether the member takes `step` while the application is away from `poll()` (processing
/// what the last one returned), on a library task instead of waiting for the next `poll()`.
///
/// KIP-62 took the heartbeat off the application's thread; this takes off it the group steps
/// that call no listener callback, so that a member busy between polls does not hold up a
/// cooperative rebalance it takes no part in. The Java client rejoins only from `poll()`: one
/// member in long processing keeps every other member waiting, twice under cooperative-sticky
/// (once per round). Only a member in a generation rejoins this way: a new member joins at its
/// first `poll()`, and one that lost its generation reports the loss there first. What must
/// go through the listener (revoking before a join, a lost generation, a fatal error) still
/// waits for `poll()`, and so does a finished join unless [`join_applies_in_background`].
pub(crate) fn taken_in_background(step: &GroupStep, m: &Membership) -> bool {
    match step {
        GroupStep::Join(_) => !m.holds_no_generation(),
        GroupStep::ApplyJoin | GroupStep::DiscardJoin | GroupStep::RetryJoin => true,
        GroupStep::Wait | GroupStep::ReportLost | GroupStep::JoinFatal | GroupStep::Revoke(_) => {
            false
        }
    }
}

/// Whether a finished join may be applied without the application: it revokes, loses and adds
/// nothing, and the partitions the member learns stay the same, so no callback has to run
/// before records flow on (the assignment callback, with no partitions, is owed to the next
/// `poll()`, where the Java client runs it too).
pub(crate) fn join_applies_in_background(
    changes: &JoinChanges,
    learning_now: &BTreeSet<TopicPartition>,
    learning_after: &BTreeSet<TopicPartition>,
) -> bool {
    changes.revoke.is_empty()
        && changes.lose.is_empty()
        && changes.add.is_empty()
        && learning_now == learning_after
}

/// The topics a pattern subscription covers in `meta`, or `None` before the first metadata
/// answer (no evidence yet that nothing matches).
pub(crate) fn matching_topics(
    pattern: &Regex,
    meta: &Metadata,
    exclude_internal: bool,
) -> Option<BTreeSet<String>> {
    meta.fetched_at?;
    Some(
        meta.topics
            .values()
            .filter(|t| !(t.is_internal && exclude_internal))
            .filter(|t| pattern.is_match(&t.name))
            .map(|t| t.name.clone())
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::TopicInfo;
    use crate::error::codes;
    use crate::group::member::Generation;
    use std::time::Duration;
    use RebalanceProtocol::{Cooperative, Eager};

    fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
        list.iter()
            .map(|(t, p)| TopicPartition::new(*t, *p))
            .collect()
    }

    fn topics(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|t| t.to_string()).collect()
    }

    /// A member stable in generation 5 as `m-1`.
    fn stable() -> Membership {
        let mut m = Membership::new(None);
        m.on_join_error(codes::MEMBER_ID_REQUIRED, "m-1");
        m.join_sent();
        m.on_join_success(5, "m-1", Some("range".into()));
        m.on_sync_success();
        m
    }

    fn outcome(generation_id: i32, member_id: &str, assigned: &[(&str, i32)]) -> JoinOutcome {
        JoinOutcome {
            generation: Generation {
                generation_id,
                member_id: member_id.into(),
                protocol: Some("range".into()),
            },
            assigned: tps(assigned),
            learning: BTreeSet::new(),
            protocol: Eager,
            assigned_from: None,
            follow_up: false,
        }
    }

    struct Local {
        protocol: RebalanceProtocol,
        owned: BTreeSet<TopicPartition>,
        subscribed: BTreeSet<String>,
        pattern: bool,
        regex: Option<String>,
        ready: BTreeSet<TopicPartition>,
        join_retry_at: Instant,
    }

    impl Local {
        fn new(protocol: RebalanceProtocol, owned: &[(&str, i32)], subscribed: &[&str]) -> Local {
            Local {
                protocol,
                owned: tps(owned),
                subscribed: topics(subscribed),
                pattern: false,
                regex: None,
                ready: BTreeSet::new(),
                join_retry_at: Instant::now(),
            }
        }

        fn view<'a>(&'a self, join: JoinProgress<'a>) -> LocalGroup<'a> {
            LocalGroup {
                protocol: self.protocol,
                owned: &self.owned,
                subscribed: &self.subscribed,
                pattern: self.pattern,
                regex: self.regex.as_deref(),
                ready: &self.ready,
                join,
                join_retry_at: self.join_retry_at,
            }
        }

        fn step(&self, m: &Membership, join: JoinProgress<'_>) -> GroupStep {
            next_step(m, &self.view(join), self.join_retry_at)
        }
    }

    /// A server-side regex (KIP-848): the member joins with the regex and no topic names, at
    /// once (no metadata to wait for: the coordinator matches), and revokes nothing before it
    /// joins, since it does not know which topics match (the coordinator's assignment says).
    #[test]
    fn a_regex_member_joins_with_its_regex_at_once_and_revokes_nothing_itself() {
        let m = Membership::new(None);
        let mut local = Local::new(Cooperative, &[("orders-1", 0), ("other", 1)], &[]);
        local.regex = Some("orders-.*".into());
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert_eq!(input.regex.as_deref(), Some("orders-.*"));
        assert!(input.topics.is_empty());
        assert_eq!(input.owned, tps(&[("orders-1", 0), ("other", 1)]));
        // The same member on topic names revokes what it no longer subscribes to first.
        local.regex = None;
        local.subscribed = topics(&["orders-1"]);
        assert_eq!(
            local.step(&m, JoinProgress::Idle),
            GroupStep::Revoke(tps(&[("other", 1)]))
        );
    }

    #[test]
    fn a_new_member_joins_with_its_topics_and_the_subscribe_reason() {
        let m = Membership::new(None);
        let local = Local::new(Cooperative, &[], &["a", "b"]);
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert_eq!(input.topics, vec!["a".to_string(), "b".to_string()]);
        assert!(input.owned.is_empty());
        assert_eq!(input.reason, "the consumer subscribed");
    }

    #[test]
    fn a_stable_member_with_no_rebalance_asked_waits() {
        let m = stable();
        let local = Local::new(Eager, &[("a", 0)], &["a"]);
        assert_eq!(local.step(&m, JoinProgress::Idle), GroupStep::Wait);
    }

    #[test]
    fn an_eager_member_revokes_everything_before_it_joins() {
        let mut m = stable();
        m.request_rejoin("the group is rebalancing");
        let mut local = Local::new(Eager, &[("a", 0), ("a", 1)], &["a"]);
        assert_eq!(
            local.step(&m, JoinProgress::Idle),
            GroupStep::Revoke(tps(&[("a", 0), ("a", 1)]))
        );
        // Once revoked, it joins owning nothing, with the reason of the rebalance.
        local.owned.clear();
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert!(input.owned.is_empty());
        assert_eq!(input.reason, "the group is rebalancing");
    }

    #[test]
    fn a_cooperative_member_keeps_its_partitions_through_the_join() {
        let mut m = stable();
        m.request_rejoin("the group is rebalancing");
        let local = Local::new(Cooperative, &[("a", 0), ("a", 1)], &["a"]);
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert_eq!(input.owned, tps(&[("a", 0), ("a", 1)]));
    }

    #[test]
    fn a_cooperative_member_revokes_only_topics_it_no_longer_subscribes_to() {
        let mut m = stable();
        m.request_rejoin("the subscription changed");
        let local = Local::new(Cooperative, &[("a", 0), ("b", 0)], &["b"]);
        assert_eq!(
            local.step(&m, JoinProgress::Idle),
            GroupStep::Revoke(tps(&[("a", 0)]))
        );
    }

    #[test]
    fn a_lost_generation_is_reported_before_anything_else() {
        let mut m = stable();
        m.poll_timeout_expired();
        let local = Local::new(Eager, &[("a", 0)], &["a"]);
        let done = Ok(outcome(5, "m-1", &[("a", 0)]));
        for join in [
            JoinProgress::Idle,
            JoinProgress::Running,
            JoinProgress::Finished(&done),
        ] {
            assert_eq!(local.step(&m, join), GroupStep::ReportLost);
        }
        // Reported: the member rejoins as a new member (the eager member's partitions went
        // with the loss).
        assert!(m.take_partitions_lost());
        let local = Local::new(Eager, &[], &["a"]);
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert_eq!(input.reason, "consumer poll timeout has expired");
    }

    #[test]
    fn a_join_under_way_is_waited_for_even_when_another_rebalance_is_asked() {
        let mut m = stable();
        m.start_join();
        m.request_rejoin("the topics matching the subscribed pattern changed");
        let local = Local::new(Cooperative, &[], &["a"]);
        assert_eq!(local.step(&m, JoinProgress::Running), GroupStep::Wait);
    }

    #[test]
    fn a_finished_join_of_the_current_generation_is_applied() {
        let mut m = Membership::new(None);
        m.start_join();
        m.on_join_success(7, "m-1", Some("range".into()));
        m.on_sync_success();
        let local = Local::new(Eager, &[], &["a"]);
        let done = Ok(outcome(7, "m-1", &[("a", 0)]));
        assert_eq!(
            local.step(&m, JoinProgress::Finished(&done)),
            GroupStep::ApplyJoin
        );
    }

    #[test]
    fn a_join_of_a_generation_the_member_left_is_discarded() {
        // The heartbeat found the generation stale after the join ended, and poll() has
        // reported the loss already: the assignment is for a generation the member left.
        let mut m = stable();
        let g = m.generation().clone();
        m.on_heartbeat(&g, codes::ILLEGAL_GENERATION);
        assert!(m.take_partitions_lost());
        let local = Local::new(Eager, &[], &["a"]);
        let done = Ok(outcome(5, "m-1", &[("a", 0)]));
        assert_eq!(
            local.step(&m, JoinProgress::Finished(&done)),
            GroupStep::DiscardJoin
        );
        // Another member id in the same generation number is not this member's join either.
        let m = stable();
        let other = Ok(outcome(5, "m-2", &[("a", 0)]));
        assert_eq!(
            local.step(&m, JoinProgress::Finished(&other)),
            GroupStep::DiscardJoin
        );
    }

    #[test]
    fn a_failed_join_is_fatal_only_for_errors_the_member_cannot_go_on_from() {
        let m = stable();
        let local = Local::new(Eager, &[], &["a"]);
        for e in [
            Error::kafka(codes::GROUP_AUTHORIZATION_FAILED, "JoinGroup"),
            Error::kafka(codes::FENCED_INSTANCE_ID, "JoinGroup"),
            Error::Corrupt("the assignment from the group leader".into()),
            Error::config("partition.assignment.strategy", "unknown assignor `x`"),
        ] {
            let failed = Err(e);
            assert_eq!(
                local.step(&m, JoinProgress::Finished(&failed)),
                GroupStep::JoinFatal,
                "{failed:?}"
            );
        }
        for e in [
            Error::kafka(codes::COORDINATOR_NOT_AVAILABLE, "JoinGroup"),
            Error::Timeout("JoinGroup".into()),
        ] {
            let failed = Err(e);
            assert_eq!(
                local.step(&m, JoinProgress::Finished(&failed)),
                GroupStep::RetryJoin,
                "{failed:?}"
            );
        }
    }

    #[test]
    fn a_failed_join_is_tried_again_only_after_its_backoff() {
        let m = Membership::new(None);
        let mut local = Local::new(Eager, &[], &["a"]);
        let t0 = Instant::now();
        local.join_retry_at = t0 + Duration::from_millis(100);
        let view = local.view(JoinProgress::Idle);
        assert_eq!(
            next_step(&m, &view, t0 + Duration::from_millis(99)),
            GroupStep::Wait
        );
        assert!(matches!(
            next_step(&m, &view, t0 + Duration::from_millis(100)),
            GroupStep::Join(_)
        ));
    }

    #[test]
    fn a_pattern_that_matches_nothing_yet_does_not_join() {
        let m = Membership::new(None);
        let mut local = Local::new(Cooperative, &[], &[]);
        local.pattern = true;
        assert_eq!(local.step(&m, JoinProgress::Idle), GroupStep::Wait);
        local.subscribed = topics(&["t-1"]);
        assert!(matches!(
            local.step(&m, JoinProgress::Idle),
            GroupStep::Join(_)
        ));
    }

    #[test]
    fn a_learner_joins_with_the_partitions_it_is_ready_for() {
        let mut m = stable();
        m.request_rejoin("learned partitions are ready to be handed over");
        let mut local = Local::new(Cooperative, &[("a", 0)], &["a"]);
        local.ready = tps(&[("a", 1)]);
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert_eq!(input.ready, tps(&[("a", 1)]));
        assert_eq!(input.owned, tps(&[("a", 0)]));
        assert_eq!(
            input.reason,
            "learned partitions are ready to be handed over"
        );
    }

    #[test]
    fn a_member_that_rejoins_after_a_failed_sync_is_due_without_a_request() {
        // REBALANCE_IN_PROGRESS at SyncGroup leaves the member unjoined with its generation.
        let mut m = stable();
        m.start_join();
        m.on_sync_error(codes::REBALANCE_IN_PROGRESS);
        let local = Local::new(Cooperative, &[("a", 0)], &["a"]);
        let GroupStep::Join(input) = local.step(&m, JoinProgress::Idle) else {
            panic!("expected a join")
        };
        assert_eq!(input.reason, "the group rebalanced during SyncGroup");
    }

    #[test]
    fn a_busy_member_in_a_generation_rejoins_without_the_application() {
        // The heartbeat heard of a rebalance; the cooperative member owns a partition it keeps.
        let mut m = stable();
        m.request_rejoin("the group is rebalancing");
        let local = Local::new(Cooperative, &[("a", 0)], &["a"]);
        let step = local.step(&m, JoinProgress::Idle);
        assert!(matches!(step, GroupStep::Join(_)));
        assert!(taken_in_background(&step, &m));
        // Eager: it must revoke first, which runs the listener: that waits for poll().
        let eager = Local::new(Eager, &[("a", 0)], &["a"]);
        let step = eager.step(&m, JoinProgress::Idle);
        assert!(matches!(step, GroupStep::Revoke(_)));
        assert!(!taken_in_background(&step, &m));
        // Under way or finished joins are the background's to wait for and take in.
        assert!(!taken_in_background(&GroupStep::Wait, &m));
        assert!(taken_in_background(&GroupStep::ApplyJoin, &m));
        assert!(taken_in_background(&GroupStep::RetryJoin, &m));
    }

    #[test]
    fn a_new_or_lost_member_joins_only_from_poll() {
        // Before its first join completes: the first poll() joins.
        let m = Membership::new(None);
        let local = Local::new(Cooperative, &[], &["a"]);
        let step = local.step(&m, JoinProgress::Idle);
        assert!(matches!(step, GroupStep::Join(_)));
        assert!(!taken_in_background(&step, &m));
        // After max.poll.interval.ms: the loss is poll()'s to report, and then poll() rejoins.
        let mut m = stable();
        m.poll_timeout_expired();
        let step = local.step(&m, JoinProgress::Idle);
        assert_eq!(step, GroupStep::ReportLost);
        assert!(!taken_in_background(&step, &m));
        assert!(m.take_partitions_lost());
        let step = local.step(&m, JoinProgress::Idle);
        assert!(matches!(step, GroupStep::Join(_)));
        assert!(!taken_in_background(&step, &m));
        // A fatal join error is poll()'s to report.
        assert!(!taken_in_background(&GroupStep::JoinFatal, &stable()));
    }

    #[test]
    fn only_a_join_that_changes_nothing_owned_or_learned_applies_without_the_application() {
        let learning = tps(&[("a", 3)]);
        let nothing = JoinChanges::default();
        assert!(join_applies_in_background(&nothing, &learning, &learning));
        let revoke = JoinChanges {
            revoke: tps(&[("a", 0)]),
            rejoin: true,
            ..JoinChanges::default()
        };
        assert!(!join_applies_in_background(&revoke, &learning, &learning));
        let lose = JoinChanges {
            lose: tps(&[("a", 0)]),
            ..JoinChanges::default()
        };
        assert!(!join_applies_in_background(&lose, &learning, &learning));
        // New partitions: on_partitions_assigned runs before any of their records.
        let add = JoinChanges {
            add: tps(&[("a", 1)]),
            ..JoinChanges::default()
        };
        assert!(!join_applies_in_background(&add, &learning, &learning));
        // New learned partitions: on_partitions_learning starts the warm-up.
        assert!(!join_applies_in_background(
            &nothing,
            &learning,
            &tps(&[("a", 3), ("a", 4)])
        ));
    }

    fn metadata(fetched: bool, topics: &[(&str, bool)]) -> Metadata {
        let mut meta = Metadata {
            fetched_at: fetched.then(Instant::now),
            ..Metadata::default()
        };
        for (name, is_internal) in topics {
            meta.topics.insert(
                name.to_string(),
                TopicInfo {
                    name: name.to_string(),
                    topic_id: uuid::Uuid::nil(),
                    error_code: codes::NONE,
                    is_internal: *is_internal,
                    partitions: Vec::new(),
                },
            );
        }
        meta
    }

    #[test]
    fn a_pattern_matches_whole_topic_names_once_metadata_has_come() {
        let re = Regex::new("^(?:orders-.*|__consumer_offsets)$").unwrap();
        assert_eq!(
            matching_topics(&re, &metadata(false, &[("orders-1", false)]), true),
            None
        );
        let meta = metadata(
            true,
            &[
                ("orders-1", false),
                ("orders-2", false),
                ("payments", false),
                ("__consumer_offsets", true),
            ],
        );
        assert_eq!(
            matching_topics(&re, &meta, true),
            Some(topics(&["orders-1", "orders-2"]))
        );
        assert_eq!(
            matching_topics(&re, &meta, false),
            Some(topics(&["__consumer_offsets", "orders-1", "orders-2"]))
        );
    }
}
