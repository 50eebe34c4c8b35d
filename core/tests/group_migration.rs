//! Online migration of a consumer group between the classic protocol and KIP-848's consumer
//! protocol, as the Java client allows: Kafka 4.x converts a classic group to the new protocol
//! when the first consumer-protocol member joins it, and back when the last one leaves. A lagless
//! classic member (with each assignor list a group may run) reads a topic, a lagless
//! consumer-protocol member joins, then one of the two leaves: the upgrade completed (the classic
//! member leaves) or rolled back (the new one leaves). Records are produced in every phase; each
//! offset is read, no partition is ever held by both members at once (sampled after every
//! poll), no poll() fails, and the member that stays ends up owning every partition.
//!
//! A `learner-sticky` group upgrades too, once it is settled: its assignments carry user data
//! only while a learner warms up or a follow-up rebalance is due, and the broker converts a
//! classic group only while they carry none (KAFKA-18134: otherwise the new member's
//! ConsumerGroupHeartbeat gets GROUP_ID_NOT_FOUND, "Cannot upgrade classic group ... because an
//! unsupported custom assignor is in use", which ends that member with the broker's reason:
//! `member_heartbeat_errors_follow_the_java_table` in group/member.rs). That refusal is provoked
//! on cue with a learner whose warm-up never ends until the test says so (explicit readiness):
//! the new member is ended with the broker's reason, the classic members go on, and once the
//! warm-up is over a consumer-protocol member converts the group. A classic member that owns
//! nothing when the group converts (KAFKA-17733) goes through it like the others.
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use lagless::Consumer;
use support::*;

const PARTITIONS: i32 = 4;
const PER_PHASE: usize = 25;

fn member(b: &str, group: &str, protocol: &str, strategy: Option<&str>) -> Consumer {
    let mut extra: Vec<(&str, &str)> = vec![
        ("group.id", group),
        ("group.protocol", protocol),
        ("auto.offset.reset", "earliest"),
        ("max.poll.interval.ms", "30000"),
    ];
    if protocol == "classic" {
        extra.push(("session.timeout.ms", "6000"));
        extra.push(("heartbeat.interval.ms", "500"));
        if let Some(s) = strategy {
            extra.push(("partition.assignment.strategy", s));
        }
    }
    consumer(b, &extra)
}

fn partitions(c: &Consumer) -> BTreeSet<i32> {
    c.assignment().iter().map(|tp| tp.partition).collect()
}

/// The two members, what they read and what went wrong.
struct Run {
    members: Vec<(&'static str, Consumer)>,
    read: BTreeMap<(i32, i64), usize>,
    errors: Vec<String>,
    overlaps: Vec<String>,
}

impl Run {
    /// One poll of each member still in, then the ownership check.
    fn poll_all(&mut self) {
        for (who, c) in &self.members {
            match c.poll(Duration::from_millis(50)) {
                Ok(records) => {
                    for r in records {
                        *self.read.entry((r.partition, r.offset)).or_default() += 1;
                    }
                }
                Err(e) => self.errors.push(format!("{who}: {e}")),
            }
        }
        let owned: Vec<(&str, BTreeSet<i32>)> = self
            .members
            .iter()
            .map(|(who, c)| (*who, partitions(c)))
            .collect();
        for (i, (who_a, a)) in owned.iter().enumerate() {
            for (who_b, b) in &owned[i + 1..] {
                if !a.is_disjoint(b) {
                    self.overlaps
                        .push(format!("{who_a} owns {a:?} and {who_b} {b:?}"));
                }
            }
        }
    }

    /// Polls until `done` holds of the members' assignments, for at most 30 s.
    fn until(&mut self, what: &str, done: impl Fn(&[BTreeSet<i32>]) -> bool) -> Duration {
        let t0 = Instant::now();
        loop {
            self.poll_all();
            let owned: Vec<BTreeSet<i32>> =
                self.members.iter().map(|(_, c)| partitions(c)).collect();
            if done(&owned) {
                return t0.elapsed();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "{what} within 30 s: owned {owned:?}, errors {:?}",
                self.errors
            );
        }
    }

    /// Polls until every offset of `written` was read, for at most 30 s.
    fn read_all(&mut self, written: &BTreeMap<i32, BTreeSet<i64>>) {
        let t0 = Instant::now();
        let want: usize = written.values().map(BTreeSet::len).sum();
        while written
            .iter()
            .flat_map(|(p, os)| os.iter().map(move |o| (*p, *o)))
            .filter(|k| self.read.contains_key(k))
            .count()
            < want
        {
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "every record within 30 s: {} of {want}, errors {:?}",
                self.read.len(),
                self.errors
            );
            self.poll_all();
        }
    }
}

impl Run {
    /// Closes the last member and checks the whole run: `want` offsets written, each read, no
    /// poll() failed, no partition held by two members at once.
    fn finish(mut self, written: &BTreeMap<i32, BTreeSet<i64>>, want: usize) {
        let (_, last) = self.members.pop().unwrap();
        last.close(None).unwrap();
        let duplicates = self.read.values().filter(|n| **n > 1).count();
        eprintln!(
            "{} offsets read, {duplicates} read twice, errors {:?}",
            self.read.len(),
            self.errors
        );
        assert!(self.errors.is_empty(), "poll() failed: {:?}", self.errors);
        assert!(self.overlaps.is_empty(), "{:?}", self.overlaps);
        assert_eq!(written.values().map(BTreeSet::len).sum::<usize>(), want);
        assert_eq!(self.read.len(), want, "every offset read, none other");
    }
}

fn migrate(strategy: Option<&str>, classic_leaves: bool) {
    init_logs();
    let b = bootstrap();
    let topic = new_topic(&b, "migration", PARTITIONS);
    let group = unique_name("migration");
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let mut written = produce(&b, &topic, PARTITIONS, PER_PHASE);
    let add = |written: &mut BTreeMap<i32, BTreeSet<i64>>| {
        for (p, o) in produce(&b, &topic, PARTITIONS, PER_PHASE) {
            written.entry(p).or_default().extend(o);
        }
    };
    let classic = member(&b, &group, "classic", strategy);
    classic.subscribe(&[&topic], None).unwrap();
    let mut run = Run {
        members: vec![("classic", classic)],
        read: BTreeMap::new(),
        errors: Vec::new(),
        overlaps: Vec::new(),
    };
    run.until("the classic member owns every partition", |o| o[0] == all);
    run.read_all(&written);

    // The upgrade starts: a consumer-protocol member joins the classic group.
    let new = member(&b, &group, "consumer", None);
    new.subscribe(&[&topic], None).unwrap();
    run.members.push(("consumer", new));
    let split = run.until("the partitions shared between the two", |o| {
        !o[0].is_empty() && !o[1].is_empty() && o[0].union(&o[1]).count() == all.len()
    });
    add(&mut written);
    run.read_all(&written);

    // One leaves: the classic member (the upgrade is done) or the new one (rolled back).
    let leaving = usize::from(!classic_leaves);
    let (who, gone) = run.members.remove(leaving);
    gone.close(None).unwrap();
    let took_over = run.until("the member that stays owns every partition", |o| {
        o[0] == all
    });
    add(&mut written);
    run.read_all(&written);
    let (_, stays) = run.members.pop().unwrap();
    stays.close(None).unwrap();

    let duplicates = run.read.values().filter(|n| **n > 1).count();
    eprintln!(
        "{strategy:?}, {who} left: shared after {split:?}, the other owned all {took_over:?} \
         later; {} offsets read, {duplicates} read twice",
        run.read.len()
    );
    assert!(run.errors.is_empty(), "poll() failed: {:?}", run.errors);
    assert!(
        run.overlaps.is_empty(),
        "a partition held by both members at once: {:?}",
        run.overlaps
    );
    let want: usize = written.values().map(BTreeSet::len).sum();
    assert_eq!(want, 3 * PARTITIONS as usize * PER_PHASE);
    assert_eq!(run.read.len(), want, "every offset read, none other");
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_classic_group_with_the_default_assignors_upgrades_to_the_consumer_protocol() {
    migrate(None, true);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_cooperative_sticky_group_upgrades_and_rolls_back() {
    migrate(Some("cooperative-sticky"), false);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_range_group_upgrades_and_rolls_back() {
    migrate(Some("range"), false);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_settled_learner_sticky_group_upgrades() {
    migrate(Some("learner-sticky"), true);
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_learner_sticky_group_rolls_back() {
    migrate(Some("learner-sticky"), false);
}

/// While a learner warms up, a `learner-sticky` group's assignments carry assignor data, which
/// the broker will not take over (KAFKA-18134): a consumer-protocol member that joins then is
/// refused (GROUP_ID_NOT_FOUND), and lagless ends it with the broker's reason rather than leave
/// it retrying in the group with nothing, while the classic members go on undisturbed. Once the
/// warm-up is over and the group settled, a consumer-protocol member converts the group.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_learner_sticky_group_warming_up_refuses_the_conversion_until_it_settles() {
    use std::sync::{Arc, Mutex};
    init_logs();
    let b = bootstrap();
    let topic = new_topic(&b, "migration-refused", PARTITIONS);
    let group = unique_name("migration-refused");
    produce(&b, &topic, PARTITIONS, PER_PHASE);
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let a = member(&b, &group, "classic", Some("learner-sticky"));
    a.subscribe(&[&topic], None).unwrap();
    let mut run = Run {
        members: vec![("a", a)],
        read: BTreeMap::new(),
        errors: Vec::new(),
        overlaps: Vec::new(),
    };
    run.until("a owns every partition", |o| o[0] == all);
    // b learns partitions and stays a learner: with explicit readiness nothing moves to it until
    // it calls learner_ready(), so the warm-up is in flight for as long as the test wants.
    let learning: Arc<Mutex<Vec<lagless::TopicPartition>>> = Arc::default();
    let learner = consumer(
        &b,
        &[
            ("group.id", group.as_str()),
            ("group.protocol", "classic"),
            ("auto.offset.reset", "earliest"),
            ("session.timeout.ms", "6000"),
            ("heartbeat.interval.ms", "500"),
            ("partition.assignment.strategy", "learner-sticky"),
            ("learner.readiness", "explicit"),
        ],
    );
    let seen = learning.clone();
    let listener = lagless::RebalanceEventListener(
        move |_: &Consumer, event: lagless::RebalanceEvent, tps: &[lagless::TopicPartition]| {
            if event == lagless::RebalanceEvent::Learning {
                seen.lock().unwrap().extend_from_slice(tps);
            }
            Ok(())
        },
    );
    learner
        .subscribe(&[&topic], Some(Box::new(listener)))
        .unwrap();
    run.members.push(("learner", learner));
    let deadline = Instant::now() + Duration::from_secs(30);
    while learning.lock().unwrap().is_empty() {
        assert!(Instant::now() < deadline, "the learner never learned");
        run.poll_all();
    }
    // The conversion is refused: the new member's poll() fails, fatally, with the reason.
    let refused = member(&b, &group, "consumer", None);
    refused.subscribe(&[&topic], None).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let e = loop {
        assert!(
            Instant::now() < deadline,
            "the consumer-protocol member was not refused"
        );
        run.poll_all();
        match refused.poll(Duration::from_millis(50)) {
            Ok(r) => assert!(r.is_empty(), "the refused member read records"),
            Err(e) => break e,
        }
    };
    eprintln!("refused: {e}");
    assert_eq!(
        e.kafka_code(),
        Some(lagless::error::codes::GROUP_ID_NOT_FOUND)
    );
    assert!(e.is_fatal(), "{e}");
    assert!(
        e.to_string().contains("the broker says: "),
        "the broker's reason: {e}"
    );
    assert!(refused.assignment().is_empty());
    let again = refused.poll(Duration::from_millis(50)).unwrap_err();
    assert_eq!(again.to_string(), e.to_string(), "every poll() reports it");
    drop(refused);
    // The warm-up ends; once the learner owns what it learned the group settles, and a
    // consumer-protocol member converts it (a follow-up rebalance may still be due at first:
    // a member refused then is replaced by a new one).
    let learned = learning.lock().unwrap().clone();
    assert!(run.members[1].1.learner_ready(&learned).unwrap() > 0);
    run.until("the learner owns what it learned", |o| {
        o[1].len() == learned.len() && o[0].union(&o[1]).count() == all.len()
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut joined, mut refusals) = (member(&b, &group, "consumer", None), 0);
    joined.subscribe(&[&topic], None).unwrap();
    while joined.assignment().is_empty() {
        assert!(
            Instant::now() < deadline,
            "the settled group never converted"
        );
        run.poll_all();
        if joined.poll(Duration::from_millis(50)).is_err() {
            refusals += 1;
            joined = member(&b, &group, "consumer", None);
            joined.subscribe(&[&topic], None).unwrap();
        }
    }
    eprintln!(
        "converted once settled ({refusals} refusal(s) while a follow-up was due); the new \
         member owns {:?}",
        partitions(&joined)
    );
    joined.close(None).unwrap();
    for (_, c) in run.members.drain(..) {
        c.close(None).unwrap();
    }
    assert!(
        run.errors.is_empty(),
        "the classic members' poll() failed: {:?}",
        run.errors
    );
    assert!(
        run.overlaps.is_empty(),
        "a partition held by both classic members at once: {:?}",
        run.overlaps
    );
}

/// KAFKA-17733: a classic group in which a member owns nothing (three cooperative-sticky members,
/// two partitions) is converted when a consumer-protocol member joins; the member with the empty
/// assignment must stay a member like the others (the broker once failed the conversion on it).
/// The classic members then leave one at a time, the empty one first, records produced in every
/// phase: every offset is read, no partition is held by two members at once, no poll() fails,
/// and the consumer-protocol member ends up owning both partitions.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_classic_member_owning_nothing_goes_through_the_conversion() {
    init_logs();
    let b = bootstrap();
    const TWO: i32 = 2;
    let topic = new_topic(&b, "migration-empty", TWO);
    let group = unique_name("migration-empty");
    let mut written = produce(&b, &topic, TWO, PER_PHASE);
    let add = |written: &mut BTreeMap<i32, BTreeSet<i64>>| {
        for (p, o) in produce(&b, &topic, TWO, PER_PHASE) {
            written.entry(p).or_default().extend(o);
        }
    };
    let mut run = Run {
        members: Vec::new(),
        read: BTreeMap::new(),
        errors: Vec::new(),
        overlaps: Vec::new(),
    };
    for who in ["classic-1", "classic-2", "classic-3"] {
        let c = member(&b, &group, "classic", Some("cooperative-sticky"));
        c.subscribe(&[&topic], None).unwrap();
        run.members.push((who, c));
    }
    run.until(
        "two classic members own a partition each, one owns nothing",
        |o| o.iter().filter(|s| s.len() == 1).count() == 2 && o.iter().any(BTreeSet::is_empty),
    );
    run.read_all(&written);
    let empty = run
        .members
        .iter()
        .find(|(_, c)| c.assignment().is_empty())
        .map(|(who, _)| *who)
        .expect("a member owning nothing");
    // The conversion: a consumer-protocol member joins.
    let new = member(&b, &group, "consumer", None);
    new.subscribe(&[&topic], None).unwrap();
    run.members.push(("consumer", new));
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(3) {
        run.poll_all();
    }
    add(&mut written);
    run.read_all(&written);
    // The classic members leave one at a time, the one that owned nothing first.
    let mut order = vec![empty];
    order.extend(
        ["classic-1", "classic-2", "classic-3"]
            .into_iter()
            .filter(|who| *who != empty),
    );
    for leaving in order {
        let i = run.members.iter().position(|(who, _)| *who == leaving);
        let (_, gone) = run.members.remove(i.expect("a classic member"));
        gone.close(None).unwrap();
        add(&mut written);
        run.read_all(&written);
    }
    run.until("the consumer-protocol member owns both partitions", |o| {
        o.len() == 1 && o[0].len() == TWO as usize
    });
    add(&mut written);
    run.read_all(&written);
    run.finish(&written, 6 * TWO as usize * PER_PHASE);
}

/// The assignor the group chose, as `member` last heard it.
fn chosen_assignor(member: &Consumer) -> Option<String> {
    member.metrics().group.and_then(|g| g.assignor)
}

/// The way around KAFKA-18134 that the refusal's message advises: a `learner-sticky` group is
/// rolled, one member at a time, through `cooperative-sticky,learner-sticky` (the group keeps
/// learner-sticky until every member lists both, then takes cooperative-sticky) to
/// `cooperative-sticky` alone, and then converts for a consumer-protocol member. Every offset is
/// read across the rolls and the conversion, no partition is held twice, no poll() fails.
#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_learner_sticky_group_rolled_to_cooperative_sticky_converts() {
    init_logs();
    let b = bootstrap();
    let topic = new_topic(&b, "migration-roll", PARTITIONS);
    let group = unique_name("migration-roll");
    let all: BTreeSet<i32> = (0..PARTITIONS).collect();
    let mut written = produce(&b, &topic, PARTITIONS, PER_PHASE);
    let add = |written: &mut BTreeMap<i32, BTreeSet<i64>>| {
        for (p, o) in produce(&b, &topic, PARTITIONS, PER_PHASE) {
            written.entry(p).or_default().extend(o);
        }
    };
    let mut run = Run {
        members: Vec::new(),
        read: BTreeMap::new(),
        errors: Vec::new(),
        overlaps: Vec::new(),
    };
    for who in ["a", "b"] {
        let c = member(&b, &group, "classic", Some("learner-sticky"));
        c.subscribe(&[&topic], None).unwrap();
        run.members.push((who, c));
    }
    let shared = |o: &[BTreeSet<i32>]| {
        o.iter().all(|s| !s.is_empty())
            && o.iter().map(BTreeSet::len).sum::<usize>() == all.len()
            && o.iter().fold(BTreeSet::new(), |u, s| &u | s) == all
    };
    run.until(
        "the two learner-sticky members share the partitions",
        shared,
    );
    run.read_all(&written);
    assert_eq!(
        chosen_assignor(&run.members[0].1).as_deref(),
        Some("learner-sticky")
    );
    let mut chosen = Vec::new();
    for step in ["cooperative-sticky,learner-sticky", "cooperative-sticky"] {
        for who in ["a", "b"] {
            let i = run.members.iter().position(|(w, _)| *w == who).unwrap();
            let (_, gone) = run.members.remove(i);
            gone.close(None).unwrap();
            let c = member(&b, &group, "classic", Some(step));
            c.subscribe(&[&topic], None).unwrap();
            run.members.push((who, c));
            run.until("the partitions shared again after the roll", shared);
            add(&mut written);
            run.read_all(&written);
            let heard: Vec<Option<String>> = run
                .members
                .iter()
                .map(|(_, c)| chosen_assignor(c))
                .collect();
            chosen.push((step, who, heard));
        }
    }
    eprintln!("assignors chosen after each restart: {chosen:?}");
    // Once both list both, and from then on, the group runs cooperative-sticky.
    for (step, who, heard) in &chosen[1..] {
        assert!(
            heard
                .iter()
                .all(|a| a.as_deref() == Some("cooperative-sticky")),
            "after {who} restarted with {step}: {heard:?}"
        );
    }
    // Now a consumer-protocol member converts the group.
    let new = member(&b, &group, "consumer", None);
    new.subscribe(&[&topic], None).unwrap();
    run.members.push(("consumer", new));
    run.until("the consumer-protocol member owns a partition", |o| {
        !o[2].is_empty()
    });
    add(&mut written);
    run.read_all(&written);
    for who in ["a", "b"] {
        let i = run.members.iter().position(|(w, _)| *w == who).unwrap();
        let (_, gone) = run.members.remove(i);
        gone.close(None).unwrap();
    }
    run.until("the consumer-protocol member owns every partition", |o| {
        o[0] == all
    });
    add(&mut written);
    run.read_all(&written);
    run.finish(&written, 7 * PARTITIONS as usize * PER_PHASE);
}
