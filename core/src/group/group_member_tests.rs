//! Every transition of the [`GroupMember`], from literal inputs: what each event does to the
//! state and which effects come out, in the order the consumer carries them out.
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use super::*;
use crate::backoff::Backoff;
use crate::cluster::{PartitionInfo, TopicInfo};
use crate::error::codes;
use crate::group::member::{Generation, MemberState};
use RebalanceProtocol::{Cooperative, Eager};

const BACKOFF: Duration = Duration::from_millis(100);

fn tps(list: &[(&str, i32)]) -> BTreeSet<TopicPartition> {
    list.iter()
        .map(|(t, p)| TopicPartition::new(*t, *p))
        .collect()
}

fn names(list: &[&str]) -> Topics {
    Topics::Names(list.iter().map(|t| t.to_string()).collect())
}

/// Metadata fetched at `at` with these topics and partition counts.
fn metadata(topics: &[(&str, i32)], at: Instant) -> Metadata {
    let mut m = Metadata::default();
    for (name, partitions) in topics {
        m.topics.insert(
            name.to_string(),
            TopicInfo {
                name: name.to_string(),
                topic_id: uuid::Uuid::nil(),
                error_code: codes::NONE,
                is_internal: false,
                partitions: (0..*partitions)
                    .map(|p| PartitionInfo {
                        partition: p,
                        leader: 1,
                        leader_epoch: 0,
                        error_code: codes::NONE,
                    })
                    .collect(),
            },
        );
    }
    m.fetched_at = Some(at);
    m
}

fn member(protocol: RebalanceProtocol, explicit_readiness: bool, now: Instant) -> GroupMember {
    GroupMember::new(
        MemberSettings {
            group_id: "g".into(),
            protocol,
            retry_backoff: BACKOFF,
            exclude_internal_topics: true,
            explicit_readiness,
        },
        None,
        Retry::new(Backoff::new(BACKOFF, BACKOFF)),
        now,
    )
}

fn outcome(
    generation_id: i32,
    protocol: RebalanceProtocol,
    assigned: &[(&str, i32)],
    learning: &[(&str, i32)],
) -> JoinOutcome {
    JoinOutcome {
        generation: Generation {
            generation_id,
            member_id: "m-1".into(),
            protocol: Some("p".into()),
        },
        assigned: tps(assigned),
        learning: tps(learning),
        protocol,
        assigned_from: None,
        follow_up: false,
    }
}

/// One step of `poll()` (or of the background task), with its single effect.
fn step(m: &mut GroupMember, meta: &Metadata, background: bool, now: Instant) -> Effect {
    let mut effects = m.handle(Event::Step { meta, background }, now);
    assert_eq!(effects.len(), 1, "a step has one effect: {effects:?}");
    effects.pop().unwrap()
}

/// What the group protocol reports while a join runs: generation `generation_id`, synced.
fn joined(m: &mut GroupMember, generation_id: i32) {
    m.membership.join_sent();
    m.membership
        .on_join_success(generation_id, "m-1", Some("p".into()));
    m.membership.on_sync_success();
}

/// The protocol reports the join of `answer`'s generation, and the join task answers with it.
fn answer_join(m: &mut GroupMember, answer: JoinOutcome, now: Instant) {
    joined(m, answer.generation.generation_id);
    m.handle(Event::JoinFinished(Ok(answer)), now);
}

/// A member subscribed to `a` that joined generation 1 and owns `owned`.
fn owning(protocol: RebalanceProtocol, owned: &[(&str, i32)], now: Instant) -> GroupMember {
    let meta = metadata(&[("a", 4)], now);
    let mut m = member(protocol, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    assert!(matches!(
        step(&mut m, &meta, false, now),
        Effect::StartJoin(_)
    ));
    answer_join(&mut m, outcome(1, protocol, owned, &[]), now);
    let Effect::ApplyJoin(plan) = step(&mut m, &meta, false, now) else {
        panic!("expected the join applied")
    };
    m.handle(
        Event::Assigned {
            added: &plan.add,
            assigned_from: None,
        },
        now,
    );
    assert_eq!(m.owned(), &tps(owned));
    m
}

#[test]
fn a_subscribed_member_joins_once_and_waits_for_the_answer() {
    let now = Instant::now();
    let meta = metadata(&[("a", 2), ("b", 1)], now);
    let mut m = member(Cooperative, false, now);
    assert!(m
        .handle(Event::Subscribed(names(&["a", "b"])), now)
        .is_empty());
    assert_eq!(m.subscribed().len(), 2);
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a join")
    };
    assert_eq!(input.topics, vec!["a".to_string(), "b".to_string()]);
    assert!(input.owned.is_empty());
    assert_eq!(input.reason, "the subscription changed");
    assert_eq!(m.membership.state(), MemberState::PreparingRebalance);
    // The join is under way: nothing more until it answers.
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Wait));
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Wait));
}

#[test]
fn a_finished_join_is_applied_in_order_and_the_member_owns_what_it_was_given() {
    let now = Instant::now();
    let meta = metadata(&[("a", 2)], now);
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    step(&mut m, &meta, false, now);
    answer_join(
        &mut m,
        outcome(1, Cooperative, &[("a", 0), ("a", 1)], &[]),
        now,
    );
    let Effect::ApplyJoin(plan) = step(&mut m, &meta, false, now) else {
        panic!("expected the join applied")
    };
    assert_eq!(plan.add, tps(&[("a", 0), ("a", 1)]));
    assert!(plan.revoke.is_empty() && plan.lose.is_empty());
    // Owned only once fetched (the consumer says so), not when planned.
    assert!(m.owned().is_empty());
    m.handle(
        Event::Assigned {
            added: &plan.add,
            assigned_from: None,
        },
        now,
    );
    assert_eq!(m.owned(), &plan.add);
    assert!(!m.membership.rejoin_needed());
    assert_eq!(
        m.membership.commit_generation(false).unwrap().generation_id,
        1
    );
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Wait));
}

#[test]
fn a_cooperative_member_revokes_what_it_lost_after_the_join_and_rejoins() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = owning(Cooperative, &[("a", 0), ("a", 1)], now);
    m.handle(Event::RejoinRequested("a new member".into()), now);
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("a cooperative member joins keeping its partitions")
    };
    assert_eq!(input.owned, tps(&[("a", 0), ("a", 1)]));
    assert_eq!(input.reason, "a new member");
    answer_join(&mut m, outcome(2, Cooperative, &[("a", 1)], &[]), now);
    let Effect::ApplyJoin(plan) = step(&mut m, &meta, false, now) else {
        panic!("expected the join applied")
    };
    assert_eq!(plan.revoke, tps(&[("a", 0)]));
    assert!(plan.lose.is_empty() && plan.add.is_empty());
    // KIP-429: the rejoin that lets the group hand a-0 on is asked for with the plan.
    assert!(m.membership.rejoin_needed());
    assert_eq!(
        m.membership.rejoin_reason(),
        "need to revoke partitions and re-join"
    );
    m.handle(Event::Released(&plan.revoke), now);
    assert_eq!(m.owned(), &tps(&[("a", 1)]));
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected the follow-up join")
    };
    assert_eq!(input.owned, tps(&[("a", 1)]));
}

#[test]
fn an_eager_member_revokes_everything_before_it_joins() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = owning(Eager, &[("a", 0), ("a", 1)], now);
    m.handle(Event::RejoinRequested("the group rebalances".into()), now);
    let Effect::Revoke(parts) = step(&mut m, &meta, false, now) else {
        panic!("an eager member revokes first")
    };
    assert_eq!(parts, tps(&[("a", 0), ("a", 1)]));
    // Still owned until the listener was told.
    assert_eq!(m.owned().len(), 2);
    m.handle(Event::Released(&parts), now);
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("then joins")
    };
    assert!(input.owned.is_empty());
}

#[test]
fn partitions_kept_through_an_eager_assignment_are_lost_not_revoked() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    // A cooperative member (it keeps its partitions through the join) in a group that chose
    // an eager assignor: what it kept and did not get back may be another member's already.
    let mut m = owning(Cooperative, &[("a", 0), ("a", 1)], now);
    m.handle(Event::RejoinRequested("a new member".into()), now);
    step(&mut m, &meta, false, now);
    answer_join(&mut m, outcome(2, Eager, &[("a", 1), ("a", 2)], &[]), now);
    let Effect::ApplyJoin(plan) = step(&mut m, &meta, false, now) else {
        panic!("expected the join applied")
    };
    assert_eq!(plan.lose, tps(&[("a", 0)]));
    assert!(plan.revoke.is_empty());
    assert_eq!(plan.add, tps(&[("a", 2)]));
}

#[test]
fn a_lost_generation_is_reported_before_anything_else_then_the_member_rejoins_as_new() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = owning(Cooperative, &[("a", 0), ("a", 1)], now);
    m.membership
        .reset_generation(false, "the member id was unknown to the coordinator");
    assert!(m.membership.commit_generation(false).is_err());
    let Effect::ReportLost(lost) = step(&mut m, &meta, false, now) else {
        panic!("expected the loss reported")
    };
    assert_eq!(lost, tps(&[("a", 0), ("a", 1)]));
    // Owned no more from the moment the loss is reported: nothing of them is committed.
    assert!(m.owned().is_empty());
    assert!(!m.membership.partitions_lost());
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a join")
    };
    assert!(input.owned.is_empty());
}

#[test]
fn a_loss_with_nothing_owned_is_not_reported() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = owning(Cooperative, &[], now);
    m.membership.reset_generation(false, "fenced");
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Again));
    assert!(matches!(
        step(&mut m, &meta, false, now),
        Effect::StartJoin(_)
    ));
}

#[test]
fn the_assignment_of_a_generation_left_meanwhile_is_discarded_and_the_member_rejoins() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    step(&mut m, &meta, false, now);
    joined(&mut m, 3);
    // max.poll.interval.ms passed after the join finished, before poll() applied it.
    m.membership.poll_timeout_expired();
    m.handle(
        Event::JoinFinished(Ok(outcome(3, Cooperative, &[("a", 0)], &[]))),
        now,
    );
    // It owned nothing: nothing to report lost; the join is dropped, not applied.
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Again));
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Again));
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a new join")
    };
    assert!(input.owned.is_empty());
    assert!(m.owned().is_empty());
}

#[test]
fn a_fatal_join_error_ends_the_member() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    step(&mut m, &meta, false, now);
    let e = Error::kafka(codes::GROUP_AUTHORIZATION_FAILED, "JoinGroup");
    m.handle(Event::JoinFinished(Err(e)), now);
    let Effect::Fatal(e) = step(&mut m, &meta, false, now) else {
        panic!("expected the member to fail")
    };
    assert_eq!(e.kafka_code(), Some(codes::GROUP_AUTHORIZATION_FAILED));
    assert!(m.membership.fatal().is_some());
}

#[test]
fn a_failed_join_is_tried_again_after_the_backoff() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    step(&mut m, &meta, false, now);
    // The protocol heard an error answer (the member is out of the join) and gave up.
    m.membership
        .on_join_error(codes::COORDINATOR_NOT_AVAILABLE, "");
    m.handle(
        Event::JoinFinished(Err(Error::Transport("connection reset".into()))),
        now,
    );
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Again));
    assert!(matches!(step(&mut m, &meta, false, now), Effect::Wait));
    let later = now + BACKOFF / 2;
    assert!(matches!(step(&mut m, &meta, false, later), Effect::Wait));
    assert!(matches!(
        step(&mut m, &meta, false, now + BACKOFF),
        Effect::StartJoin(_)
    ));
}

#[test]
fn a_join_task_that_ended_without_an_answer_is_started_again() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    step(&mut m, &meta, false, now);
    m.handle(Event::JoinDropped, now);
    // The member is still due to join (PreparingRebalance without a generation).
    m.membership.request_rejoin("the join was dropped");
    assert!(matches!(
        step(&mut m, &meta, false, now),
        Effect::StartJoin(_)
    ));
    // An answer of a task the member no longer waits for is not taken in.
    m.handle(Event::JoinDropped, now);
    m.handle(
        Event::JoinFinished(Ok(outcome(1, Cooperative, &[("a", 0)], &[]))),
        now,
    );
    m.membership.request_rejoin("again");
    assert!(matches!(
        step(&mut m, &meta, false, now),
        Effect::StartJoin(_)
    ));
}

#[test]
fn the_background_takes_only_the_steps_that_call_no_listener() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    // A new member joins at its first poll(), never in the background.
    let mut new = member(Cooperative, false, now);
    new.handle(Event::Subscribed(names(&["a"])), now);
    assert!(matches!(step(&mut new, &meta, true, now), Effect::Wait));
    // A member in a generation rejoins in the background (cooperative: nothing to revoke).
    let mut m = owning(Cooperative, &[("a", 0)], now);
    m.handle(Event::RejoinRequested("a new member".into()), now);
    assert!(matches!(
        step(&mut m, &meta, true, now),
        Effect::StartJoin(_)
    ));
    joined(&mut m, 2);
    // A join that changes nothing it owns is applied there too, the assignment callback owed.
    m.handle(
        Event::JoinFinished(Ok(outcome(2, Cooperative, &[("a", 0)], &[]))),
        now,
    );
    assert!(matches!(step(&mut m, &meta, true, now), Effect::Again));
    assert!(matches!(step(&mut m, &meta, true, now), Effect::Wait));
    let owed = m.handle(Event::TakeOwedAssignment, now);
    assert!(matches!(owed.as_slice(), [Effect::CallAssignedOwed]));
    assert!(
        m.handle(Event::TakeOwedAssignment, now).is_empty(),
        "owed once"
    );
    // One that adds a partition waits for poll(), which applies it.
    m.handle(Event::RejoinRequested("another member".into()), now);
    step(&mut m, &meta, true, now);
    answer_join(
        &mut m,
        outcome(3, Cooperative, &[("a", 0), ("a", 1)], &[]),
        now,
    );
    assert!(matches!(step(&mut m, &meta, true, now), Effect::Wait));
    let Effect::ApplyJoin(plan) = step(&mut m, &meta, false, now) else {
        panic!("poll() applies it")
    };
    assert_eq!(plan.add, tps(&[("a", 1)]));
    // An eager member's revocation before the join is poll()'s too.
    let mut eager = owning(Eager, &[("a", 0)], now);
    eager.handle(Event::RejoinRequested("x".into()), now);
    assert!(matches!(step(&mut eager, &meta, true, now), Effect::Wait));
    assert!(matches!(
        step(&mut eager, &meta, false, now),
        Effect::Revoke(_)
    ));
}

#[test]
fn a_pattern_subscription_joins_with_the_topics_that_match_and_follows_new_ones() {
    let now = Instant::now();
    let mut m = member(Cooperative, false, now);
    m.handle(
        Event::Subscribed(Topics::Pattern(Regex::new("^(?:t-.*)$").unwrap())),
        now,
    );
    // Nothing matches yet: wait for metadata rather than join with no topics.
    let none = metadata(&[("other", 1)], now);
    assert!(matches!(step(&mut m, &none, false, now), Effect::Wait));
    let one = metadata(&[("other", 1), ("t-1", 2)], now);
    let Effect::StartJoin(input) = step(&mut m, &one, false, now) else {
        panic!("expected a join")
    };
    assert_eq!(input.topics, vec!["t-1".to_string()]);
    answer_join(
        &mut m,
        outcome(1, Cooperative, &[("t-1", 0), ("t-1", 1)], &[]),
        now,
    );
    let Effect::ApplyJoin(plan) = step(&mut m, &one, false, now) else {
        panic!("expected the join applied")
    };
    m.handle(
        Event::Assigned {
            added: &plan.add,
            assigned_from: None,
        },
        now,
    );
    assert!(matches!(step(&mut m, &one, false, now), Effect::Wait));
    // A topic created later that matches: the member rejoins with it.
    let two = metadata(&[("other", 1), ("t-1", 2), ("t-2", 1)], now);
    let Effect::StartJoin(input) = step(&mut m, &two, false, now) else {
        panic!("expected a rejoin")
    };
    assert_eq!(input.topics, vec!["t-1".to_string(), "t-2".to_string()]);
    assert_eq!(
        input.reason,
        "the topics matching the subscribed pattern changed"
    );
}

#[test]
fn partitions_added_to_a_subscribed_topic_make_the_member_rejoin() {
    let now = Instant::now();
    let at_join = metadata(&[("a", 2)], now);
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(names(&["a"])), now);
    step(&mut m, &at_join, false, now);
    joined(&mut m, 1);
    let mut answer = outcome(1, Cooperative, &[("a", 0), ("a", 1)], &[]);
    answer.assigned_from = Some(MetadataSnapshot::observed(&at_join, ["a"]));
    m.handle(Event::JoinFinished(Ok(answer)), now);
    let Effect::ApplyJoin(plan) = step(&mut m, &at_join, false, now) else {
        panic!("expected the join applied")
    };
    m.handle(
        Event::Assigned {
            added: &plan.add,
            assigned_from: plan.assigned_from,
        },
        now,
    );
    let later = now + Duration::from_millis(1);
    assert!(matches!(
        step(&mut m, &metadata(&[("a", 2)], later), false, later),
        Effect::Wait
    ));
    // Each metadata answer is looked at once: the next one is fetched later.
    let later = later + Duration::from_millis(1);
    let grown = metadata(&[("a", 4)], later);
    let Effect::StartJoin(input) = step(&mut m, &grown, false, later) else {
        panic!("expected a rejoin for the new partitions")
    };
    assert_eq!(
        input.reason,
        "the partition count of subscribed topic `a` changed from 2 to 4"
    );
    assert_eq!(input.owned, tps(&[("a", 0), ("a", 1)]));
}

#[test]
fn learned_partitions_warm_up_then_the_member_rejoins_ready_to_own_them() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = owning(Cooperative, &[("a", 0)], now);
    let effects = m.handle(Event::LearningAssigned(tps(&[("a", 1), ("a", 2)])), now);
    let [Effect::WarmUp(new)] = effects.as_slice() else {
        panic!("expected a warm-up: {effects:?}")
    };
    assert_eq!(
        new,
        &vec![TopicPartition::new("a", 1), TopicPartition::new("a", 2)]
    );
    // The same learning again: nothing new to warm up.
    assert!(m
        .handle(Event::LearningAssigned(tps(&[("a", 1), ("a", 2)])), now)
        .is_empty());
    m.handle(
        Event::WarmedUp {
            partitions: new.clone(),
            ok: true,
        },
        now,
    );
    assert_eq!(
        m.membership.rejoin_reason(),
        "learned partitions are ready to be handed over"
    );
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a rejoin")
    };
    assert_eq!(input.ready, tps(&[("a", 1), ("a", 2)]));
    assert_eq!((m.view().learning.len(), m.view().ready.len()), (2, 2));
    assert_eq!(m.rebalances.learned_owned, 0);
    // A partition the member learns no more is not ready any more either.
    joined(&mut m, 2);
    m.handle(Event::LearningAssigned(tps(&[("a", 2)])), now);
    m.membership.request_rejoin("x");
    m.handle(Event::JoinDropped, now);
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a join")
    };
    assert_eq!(input.ready, tps(&[("a", 2)]));
    // The join gives it a learned partition (a 2) and one it did not learn (a 3): one promoted.
    m.handle(
        Event::Assigned {
            added: &tps(&[("a", 2), ("a", 3)]),
            assigned_from: None,
        },
        now,
    );
    m.handle(Event::LearningAssigned(BTreeSet::new()), now);
    assert_eq!(m.rebalances.learned_owned, 1);
    assert!(m.view().learning.is_empty());
}

#[test]
fn a_failed_warm_up_is_called_again_after_its_backoff_for_what_is_still_learned() {
    let now = Instant::now();
    let mut m = owning(Cooperative, &[("a", 0)], now);
    m.handle(Event::LearningAssigned(tps(&[("a", 1), ("a", 2)])), now);
    m.handle(
        Event::WarmedUp {
            partitions: vec![TopicPartition::new("a", 1), TopicPartition::new("a", 2)],
            ok: false,
        },
        now,
    );
    assert!(!m.membership.rejoin_needed(), "not ready: no rejoin");
    assert!(
        m.handle(Event::LearningDue, now).is_empty(),
        "backoff first"
    );
    // The group moved a-2 elsewhere meanwhile.
    m.handle(Event::LearningAssigned(tps(&[("a", 1)])), now);
    // The backoff is 100 ms with a jitter of at most 20% (capped at the maximum, 100 ms).
    let due = m.handle(Event::LearningDue, now + BACKOFF);
    let [Effect::WarmUp(again)] = due.as_slice() else {
        panic!("expected the warm-up again: {due:?}")
    };
    assert_eq!(again, &vec![TopicPartition::new("a", 1)]);
    m.handle(
        Event::WarmedUp {
            partitions: again.clone(),
            ok: true,
        },
        now + BACKOFF,
    );
    assert!(m.handle(Event::LearningDue, now + 10 * BACKOFF).is_empty());
    assert!(m.membership.rejoin_needed());
}

#[test]
fn with_explicit_readiness_learned_partitions_are_ready_only_when_the_application_says() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4)], now);
    let mut m = {
        let mut m = member(Cooperative, true, now);
        m.handle(Event::Subscribed(names(&["a"])), now);
        step(&mut m, &meta, false, now);
        answer_join(&mut m, outcome(1, Cooperative, &[], &[]), now);
        step(&mut m, &meta, false, now);
        m
    };
    m.handle(Event::LearningAssigned(tps(&[("a", 1), ("a", 2)])), now);
    m.handle(
        Event::WarmedUp {
            partitions: vec![TopicPartition::new("a", 1), TopicPartition::new("a", 2)],
            ok: true,
        },
        now,
    );
    assert!(
        !m.membership.rejoin_needed(),
        "the callback only started it"
    );
    let asked = [TopicPartition::new("a", 1), TopicPartition::new("b", 0)];
    let view = m.view();
    assert_eq!(ready_taken(&view.learning, &view.ready, &asked), 1);
    assert!(m.handle(Event::LearnerReady(&asked), now).is_empty());
    assert!(m.membership.rejoin_needed());
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a rejoin")
    };
    assert_eq!(input.ready, tps(&[("a", 1)]));
    // Ready already, or not learned: nothing taken, no rejoin asked.
    joined(&mut m, 2);
    m.handle(Event::JoinDropped, now);
    let asked = [TopicPartition::new("a", 1)];
    let view = m.view();
    assert_eq!(ready_taken(&view.learning, &view.ready, &asked), 0);
    m.handle(Event::LearnerReady(&asked), now);
    assert!(!m.membership.rejoin_needed());
}

#[test]
fn a_subscription_change_asks_for_a_rejoin_with_the_new_topics() {
    let now = Instant::now();
    let meta = metadata(&[("a", 4), ("b", 1)], now);
    let mut m = owning(Cooperative, &[("a", 0), ("a", 1)], now);
    m.handle(Event::Subscribed(names(&["b"])), now);
    assert_eq!(m.subscribed().iter().collect::<Vec<_>>(), vec!["b"]);
    // Partitions of a topic no longer subscribed are revoked first, even cooperatively.
    let Effect::Revoke(parts) = step(&mut m, &meta, false, now) else {
        panic!("expected the old topic's partitions revoked")
    };
    assert_eq!(parts, tps(&[("a", 0), ("a", 1)]));
    m.handle(Event::Released(&parts), now);
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a join")
    };
    assert_eq!(input.topics, vec!["b".to_string()]);
    assert_eq!(input.reason, "the subscription changed");
}

/// The metrics' rebalance count: one per join whose assignment is applied, the reason its
/// first join was sent with, and the time from that join to the assignment.
#[test]
fn a_rebalance_counts_once_its_join_is_applied_with_its_reason_and_duration() {
    let t0 = Instant::now();
    let meta = metadata(&[("a", 2)], t0);
    let mut m = member(Eager, false, t0);
    m.handle(Event::Subscribed(names(&["a"])), t0);
    assert!(matches!(
        step(&mut m, &meta, false, t0),
        Effect::StartJoin(_)
    ));
    assert_eq!(m.rebalances.completed, 0);
    // A join tried again keeps the rebalance's start and reason.
    let t1 = t0 + Duration::from_millis(700);
    m.membership
        .on_join_error(codes::COORDINATOR_NOT_AVAILABLE, "");
    m.handle(
        Event::JoinFinished(Err(Error::Transport("coordinator went away".into()))),
        t1,
    );
    assert!(matches!(step(&mut m, &meta, false, t1), Effect::Again));
    let t2 = t1 + BACKOFF;
    assert!(matches!(
        step(&mut m, &meta, false, t2),
        Effect::StartJoin(_)
    ));
    assert_eq!(m.rebalances.completed, 0, "a failed join completes nothing");
    let t3 = t0 + Duration::from_millis(2_500);
    answer_join(&mut m, outcome(1, Eager, &[("a", 0), ("a", 1)], &[]), t3);
    assert_eq!(m.rebalances.completed, 0, "answered, not applied yet");
    assert!(matches!(
        step(&mut m, &meta, false, t3),
        Effect::ApplyJoin(_)
    ));
    assert_eq!(m.rebalances.completed, 1);
    assert_eq!(
        m.rebalances.last,
        Some((
            "the subscription changed".to_string(),
            Duration::from_millis(2_500)
        ))
    );
    // The next rebalance has its own reason and start.
    m.handle(Event::RejoinRequested("asked by the test".into()), t3);
    let t4 = t3 + Duration::from_millis(10);
    let mut effect = step(&mut m, &meta, false, t4);
    while let Effect::Revoke(parts) = &effect {
        let parts = parts.clone();
        m.handle(Event::Released(&parts), t4);
        effect = step(&mut m, &meta, false, t4);
    }
    assert!(matches!(effect, Effect::StartJoin(_)), "{effect:?}");
    let t5 = t4 + Duration::from_millis(40);
    answer_join(&mut m, outcome(2, Eager, &[("a", 0)], &[]), t5);
    assert!(matches!(
        step(&mut m, &meta, false, t5),
        Effect::ApplyJoin(_)
    ));
    assert_eq!(m.rebalances.completed, 2);
    assert_eq!(
        m.rebalances.last,
        Some(("asked by the test".to_string(), Duration::from_millis(40)))
    );
    // The Java consumer's last-rebalance-seconds-ago and windowed rebalance-latency-avg/-max.
    assert_eq!(m.rebalances.last_completed_at, Some(t5));
    let latency = m.rebalances.latency.live(t5);
    assert_eq!(
        (latency.count, latency.avg(), latency.max()),
        (2, Some(1_270.0), Some(2_500.0))
    );
}

#[test]
fn a_heartbeat_sends_the_generation_subscription_and_owned_partitions_read_in_one_look() {
    let now = Instant::now();
    let m = owning(Cooperative, &[("a", 2), ("a", 0)], now);
    assert!(m.view().heartbeats_enabled);
    assert_eq!(
        m.view().heartbeat_input(),
        HeartbeatInput {
            generation: Generation {
                generation_id: 1,
                member_id: "m-1".into(),
                protocol: Some("p".into()),
            },
            subscribed: vec!["a".to_string()],
            regex: None,
            owned: tps(&[("a", 0), ("a", 2)]),
        }
    );
    // A member that never joined sends no generation and owns nothing.
    let fresh = member(Cooperative, false, now);
    assert!(!fresh.view().heartbeats_enabled);
    let input = fresh.view().heartbeat_input();
    assert_eq!(input.generation, Generation::none());
    assert!(input.subscribed.is_empty() && input.owned.is_empty());
}

/// KIP-848: the coordinator's assignment (named) is compared with what the member owns when
/// the answer is applied; only a difference, or a topic the metadata does not know yet, asks
/// for a rejoin and wakes `poll()`.
#[test]
fn a_coordinator_assignment_asks_for_a_rejoin_only_when_it_differs_from_what_is_owned() {
    let now = Instant::now();
    /// The coordinator's assignment, whether it names an unknown topic, and whether the member
    /// rejoins.
    type Case = (&'static [(&'static str, i32)], bool, bool);
    let table: &[Case] = &[
        (&[("a", 0), ("a", 1)], false, false),
        (&[("a", 0), ("a", 1)], true, true),
        (&[("a", 0)], false, true),
        (&[("a", 0), ("a", 1), ("a", 2)], false, true),
        (&[], false, true),
    ];
    for (assigned, unknown_topics, rejoin) in table {
        let mut m = owning(Cooperative, &[("a", 0), ("a", 1)], now);
        assert!(!m.membership.rejoin_needed());
        let (reply, wakes) = m.on_answer(ProtocolAnswer::MemberAssignment {
            assigned: tps(assigned),
            unknown_topics: *unknown_topics,
        });
        let case = format!("{assigned:?} unknown={unknown_topics}");
        assert_eq!(m.membership.rejoin_needed(), *rejoin, "{case}");
        assert_eq!(wakes, *rejoin, "{case}");
        let expected = if *rejoin {
            Next::JoinAgain
        } else {
            Next::Continue
        };
        assert_eq!(reply, Reply::Next(expected), "{case}");
    }
}

/// Other answers go to the protocol's half unchanged, waking `poll()` as they say.
#[test]
fn other_protocol_answers_are_applied_by_the_membership() {
    let now = Instant::now();
    let mut m = owning(Cooperative, &[("a", 0)], now);
    let (reply, wakes) = m.on_answer(ProtocolAnswer::MemberEpoch {
        sent_epoch: 1,
        epoch: 2,
    });
    assert!(!wakes);
    let Reply::Generation(g) = reply else {
        panic!("expected the generation, got {reply:?}")
    };
    assert_eq!(g.generation_id, 2);
    let (reply, wakes) = m.on_answer(ProtocolAnswer::AssignmentChanged);
    assert!(wakes);
    assert_eq!(reply, Reply::Next(Next::JoinAgain));
}

/// The view the commit paths read without asking the member's owner: what the member shows, copied
/// again only when something in it changed.
#[test]
fn the_view_follows_the_member_and_is_refreshed_only_when_it_changed() {
    let now = Instant::now();
    let fresh = member(Cooperative, false, now);
    let mut view = fresh.view();
    assert_eq!(view.generation, Generation::none());
    assert!(view.commit_generation.is_err());
    assert!(!view.owns_in_generation && view.holds_no_generation);
    assert!(view.owned.is_empty() && view.subscribed.is_empty());
    assert!(!fresh.refresh_view(&mut view));

    let mut m = owning(Cooperative, &[("a", 1), ("a", 0)], now);
    assert!(m.refresh_view(&mut view));
    assert_eq!(view, m.view());
    assert_eq!(view.generation.generation_id, 1);
    assert_eq!(view.commit_generation.as_ref().unwrap().generation_id, 1);
    assert!(view.owns_in_generation && !view.holds_no_generation);
    assert_eq!(view.owned, tps(&[("a", 0), ("a", 1)]));
    assert_eq!(view.subscribed, ["a".to_string()].into_iter().collect());
    assert!(!m.refresh_view(&mut view));

    // Fenced: the member holds no generation; nothing can be committed for what it owns.
    let sent = m.membership.generation().clone();
    m.membership.on_heartbeat(&sent, codes::UNKNOWN_MEMBER_ID);
    assert!(m.refresh_view(&mut view));
    assert_eq!(view, m.view());
    assert!(view.holds_no_generation && !view.owns_in_generation);
    assert!(view.commit_generation.is_err());
    assert!(!view.heartbeats_enabled);
    assert_eq!(view.fatal, None);
    assert_eq!(view.owned, tps(&[("a", 0), ("a", 1)]));

    // Releasing what it owned changes the view again.
    let owned = m.owned().clone();
    m.handle(Event::Released(&owned), now);
    assert!(m.refresh_view(&mut view));
    assert!(view.owned.is_empty());
    assert!(!m.refresh_view(&mut view));
}

/// A fatal answer reaches the view, which every `poll()` reads before its steps.
#[test]
fn a_fatal_error_of_the_member_shows_in_its_view() {
    let now = Instant::now();
    let mut m = owning(Cooperative, &[("a", 0)], now);
    let mut view = m.view();
    assert_eq!(view.fatal, None);
    let sent = m.membership.generation().clone();
    let next = m.membership.on_heartbeat(&sent, codes::FENCED_INSTANCE_ID);
    assert!(matches!(next, Next::Fatal(_)), "{next:?}");
    assert!(m.refresh_view(&mut view));
    assert_eq!(view.fatal.as_ref(), m.membership.fatal());
    assert!(view.fatal.is_some());
}

/// A server-side regex (KIP-848): the member joins at once with the regex and no topic names,
/// whatever metadata shows (the coordinator matches, not the member), and its heartbeats carry
/// the regex; a later subscription to topic names carries none.
#[test]
fn a_regex_subscription_joins_at_once_and_its_heartbeats_carry_the_regex() {
    let now = Instant::now();
    let mut m = member(Cooperative, false, now);
    m.handle(Event::Subscribed(Topics::Regex("t-.*".into())), now);
    // Nothing in metadata matches: the member joins all the same.
    let meta = metadata(&[("other", 1)], now);
    let Effect::StartJoin(input) = step(&mut m, &meta, false, now) else {
        panic!("expected a join")
    };
    assert_eq!(input.regex.as_deref(), Some("t-.*"));
    assert!(input.topics.is_empty());
    assert_eq!(m.view().regex.as_deref(), Some("t-.*"));
    assert!(m.view().subscribed.is_empty());
    assert_eq!(m.view().heartbeat_input().regex.as_deref(), Some("t-.*"));
    // Back to topic names: the view (and so the heartbeat) has no regex any more.
    let mut view = m.view();
    m.handle(Event::Subscribed(names(&["a"])), now);
    assert!(m.refresh_view(&mut view), "the view changed");
    assert_eq!(view.regex, None);
    assert_eq!(view.heartbeat_input().subscribed, vec!["a".to_string()]);
}
