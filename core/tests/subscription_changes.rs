//! A subscription follows the cluster (against a real broker, `LAGLESS_BOOTSTRAP`): partitions
//! added to a subscribed topic and a subscribed topic created after `subscribe()` are assigned
//! and read to the last record, as the Java client and librdkafka do.
//!
//! Every record produced is counted by (partition, offset): lost = 0.
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use lagless::{Consumer, TopicPartition};
use support::*;

/// How often the consumers refresh metadata in these tests (metadata.max.age.ms).
const METADATA_MAX_AGE_MS: u64 = 2000;
/// Records per partition.
const PER_PARTITION: usize = 50;

/// A member of `group` that refreshes metadata every `metadata_max_age_ms`.
fn member(bs: &str, group: &str, metadata_max_age_ms: u64) -> Consumer {
    let max_age = metadata_max_age_ms.to_string();
    group_member(bs, group, &[("metadata.max.age.ms", max_age.as_str())])
}

/// What the consumers read, counted by (partition, offset).
#[derive(Default)]
struct Tally {
    seen: BTreeMap<i32, BTreeSet<i64>>,
    duplicates: usize,
}

impl Tally {
    fn poll(&mut self, c: &Consumer, topic: &str) {
        for r in c.poll(Duration::from_millis(50)).expect("poll") {
            assert_eq!(&*r.topic, topic, "a record of a topic not subscribed");
            if !self.seen.entry(r.partition).or_default().insert(r.offset) {
                self.duplicates += 1;
            }
        }
    }

    fn lost(&self, written: &BTreeMap<i32, BTreeSet<i64>>) -> BTreeMap<i32, usize> {
        written
            .iter()
            .map(|(p, offsets)| {
                let seen = self.seen.get(p);
                let lost = offsets
                    .iter()
                    .filter(|o| !seen.is_some_and(|s| s.contains(o)))
                    .count();
                (*p, lost)
            })
            .filter(|(_, lost)| *lost > 0)
            .collect()
    }
}

fn partitions_of(c: &Consumer) -> BTreeSet<i32> {
    c.assignment().into_iter().map(|tp| tp.partition).collect()
}

fn generation(c: &Consumer) -> i32 {
    c.group_metadata().map_or(-1, |m| m.generation_id)
}

/// Polls every member until `done` holds or `timeout` passes; returns how long it took.
fn poll_until(
    members: &[&Consumer],
    tally: &mut Tally,
    topic: &str,
    timeout: Duration,
    mut done: impl FnMut(&Tally) -> bool,
) -> Option<Duration> {
    let start = Instant::now();
    while start.elapsed() < timeout {
        for c in members {
            tally.poll(c, topic);
        }
        if done(tally) {
            return Some(start.elapsed());
        }
    }
    None
}

/// No partition is owned by two members at once.
fn assert_owned_once(members: &[&Consumer]) {
    let mut owner: BTreeMap<TopicPartition, usize> = BTreeMap::new();
    for (i, c) in members.iter().enumerate() {
        for tp in c.assignment() {
            if let Some(other) = owner.insert(tp.clone(), i) {
                panic!("{tp} is owned by members {other} and {i} at once");
            }
        }
    }
}

/// After the group settled, it stays settled: the metadata refreshes that follow (three of
/// them) must not make a member rejoin again and again.
fn assert_no_further_rebalance(members: &[&Consumer], tally: &mut Tally, topic: &str) {
    let generations: Vec<i32> = members.iter().map(|c| generation(c)).collect();
    let window = Duration::from_millis(3 * METADATA_MAX_AGE_MS);
    let start = Instant::now();
    while start.elapsed() < window {
        for c in members {
            tally.poll(c, topic);
        }
    }
    let after: Vec<i32> = members.iter().map(|c| generation(c)).collect();
    assert_eq!(
        generations, after,
        "the group rebalanced again although the topic did not change"
    );
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn partitions_added_to_a_subscribed_topic_are_assigned_and_read() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "grow", 2);
    let c = member(&bs, &unique_name("grow"), METADATA_MAX_AGE_MS);
    c.subscribe(&[topic.as_str()], None).unwrap();
    let mut tally = Tally::default();
    poll_until(&[&c], &mut tally, &topic, Duration::from_secs(30), |_| {
        partitions_of(&c) == BTreeSet::from([0, 1])
    })
    .expect("the member was never assigned partitions 0 and 1");

    lagless::admin::create_partitions(&bs, &topic, 4).unwrap();
    let grown = Instant::now();
    let written = produce(&bs, &topic, 4, PER_PARTITION);
    let took = poll_until(&[&c], &mut tally, &topic, Duration::from_secs(40), |t| {
        t.lost(&written).is_empty()
    });
    let lost = tally.lost(&written);
    assert!(
        took.is_some(),
        "records never read {:.1} s after the topic grew to 4 partitions: lost per partition {lost:?}, \
         assignment {:?}",
        grown.elapsed().as_secs_f64(),
        partitions_of(&c)
    );
    assert_eq!(partitions_of(&c), BTreeSet::from([0, 1, 2, 3]));
    eprintln!(
        "all {} records read {:.1} s after the growth ({} duplicates)",
        written.values().map(|o| o.len()).sum::<usize>(),
        grown.elapsed().as_secs_f64(),
        tally.duplicates
    );
    assert_no_further_rebalance(&[&c], &mut tally, &topic);
    c.close(Some(Duration::from_secs(10))).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_subscribed_topic_created_after_subscribe_is_assigned_and_read() {
    init_logs();
    let bs = bootstrap();
    let topic = unique_name("later");
    // metadata.max.age.ms is far above the test's deadline: while a subscribed topic is missing,
    // the consumer must look again much sooner than that.
    let c = member(&bs, &unique_name("later"), 120_000);
    c.subscribe(&[topic.as_str()], None).unwrap();
    let mut tally = Tally::default();
    poll_until(&[&c], &mut tally, &topic, Duration::from_secs(30), |_| {
        generation(&c) > 0
    })
    .expect("the member never joined its group");
    // A while after the join, as a topic created by another application would be.
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        tally.poll(&c, &topic);
    }
    assert!(c.assignment().is_empty());

    lagless::admin::create_topic(&bs, &topic, 3, 1).unwrap();
    let created = Instant::now();
    let written = produce(&bs, &topic, 3, PER_PARTITION);
    let took = poll_until(&[&c], &mut tally, &topic, Duration::from_secs(40), |t| {
        t.lost(&written).is_empty()
    });
    let lost = tally.lost(&written);
    assert!(
        took.is_some(),
        "records never read {:.1} s after the subscribed topic was created: lost per partition {lost:?}, \
         assignment {:?}",
        created.elapsed().as_secs_f64(),
        partitions_of(&c)
    );
    assert_eq!(partitions_of(&c), BTreeSet::from([0, 1, 2]));
    eprintln!(
        "all {} records read {:.1} s after the topic was created ({} duplicates)",
        written.values().map(|o| o.len()).sum::<usize>(),
        created.elapsed().as_secs_f64(),
        tally.duplicates
    );
    c.close(Some(Duration::from_secs(10))).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn two_members_share_the_partitions_added_to_their_topic() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "grow2", 2);
    let group = unique_name("grow2");
    let a = member(&bs, &group, METADATA_MAX_AGE_MS);
    let b = member(&bs, &group, METADATA_MAX_AGE_MS);
    a.subscribe(&[topic.as_str()], None).unwrap();
    b.subscribe(&[topic.as_str()], None).unwrap();
    let mut tally = Tally::default();
    poll_until(
        &[&a, &b],
        &mut tally,
        &topic,
        Duration::from_secs(40),
        |_| {
            assert_owned_once(&[&a, &b]);
            partitions_of(&a).len() == 1 && partitions_of(&b).len() == 1
        },
    )
    .expect("the two members never shared the 2 partitions");

    lagless::admin::create_partitions(&bs, &topic, 4).unwrap();
    let grown = Instant::now();
    let written = produce(&bs, &topic, 4, PER_PARTITION);
    let took = poll_until(
        &[&a, &b],
        &mut tally,
        &topic,
        Duration::from_secs(40),
        |t| {
            assert_owned_once(&[&a, &b]);
            t.lost(&written).is_empty()
        },
    );
    let lost = tally.lost(&written);
    assert!(
        took.is_some(),
        "records never read {:.1} s after the topic grew to 4 partitions: lost per partition {lost:?}, \
         assignments {:?} and {:?}",
        grown.elapsed().as_secs_f64(),
        partitions_of(&a),
        partitions_of(&b)
    );
    let all: BTreeSet<i32> = partitions_of(&a)
        .union(&partitions_of(&b))
        .cloned()
        .collect();
    assert_eq!(all, BTreeSet::from([0, 1, 2, 3]));
    assert_owned_once(&[&a, &b]);
    eprintln!(
        "all {} records read {:.1} s after the growth ({} duplicates); assignments {:?} and {:?}",
        written.values().map(|o| o.len()).sum::<usize>(),
        grown.elapsed().as_secs_f64(),
        tally.duplicates,
        partitions_of(&a),
        partitions_of(&b)
    );
    assert_no_further_rebalance(&[&a, &b], &mut tally, &topic);
    a.close(Some(Duration::from_secs(10))).unwrap();
    b.close(Some(Duration::from_secs(10))).unwrap();
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn a_follower_that_sees_the_growth_first_makes_the_group_rebalance() {
    init_logs();
    let bs = bootstrap();
    let topic = new_topic(&bs, "grow-follower", 2);
    let group = unique_name("grow-follower");
    // The leader (the first member) refreshes metadata far more rarely than the test lasts:
    // only the follower can notice the new partitions in time.
    let leader = member(&bs, &group, 120_000);
    leader.subscribe(&[topic.as_str()], None).unwrap();
    let mut tally = Tally::default();
    poll_until(
        &[&leader],
        &mut tally,
        &topic,
        Duration::from_secs(30),
        |_| partitions_of(&leader).len() == 2,
    )
    .expect("the first member was never assigned both partitions");
    let follower = member(&bs, &group, METADATA_MAX_AGE_MS);
    follower.subscribe(&[topic.as_str()], None).unwrap();
    let members = [&leader, &follower];
    poll_until(
        &members,
        &mut tally,
        &topic,
        Duration::from_secs(40),
        |_| {
            assert_owned_once(&members);
            partitions_of(&leader).len() == 1 && partitions_of(&follower).len() == 1
        },
    )
    .expect("the two members never shared the 2 partitions");

    lagless::admin::create_partitions(&bs, &topic, 4).unwrap();
    let grown = Instant::now();
    let written = produce(&bs, &topic, 4, PER_PARTITION);
    let took = poll_until(&members, &mut tally, &topic, Duration::from_secs(40), |t| {
        assert_owned_once(&members);
        t.lost(&written).is_empty()
    });
    let lost = tally.lost(&written);
    assert!(
        took.is_some(),
        "records never read {:.1} s after the topic grew to 4 partitions: lost per partition {lost:?}, \
         assignments {:?} and {:?}",
        grown.elapsed().as_secs_f64(),
        partitions_of(&leader),
        partitions_of(&follower)
    );
    let all: BTreeSet<i32> = partitions_of(&leader)
        .union(&partitions_of(&follower))
        .cloned()
        .collect();
    assert_eq!(all, BTreeSet::from([0, 1, 2, 3]));
    eprintln!(
        "all {} records read {:.1} s after the growth ({} duplicates); assignments {:?} and {:?}",
        written.values().map(|o| o.len()).sum::<usize>(),
        grown.elapsed().as_secs_f64(),
        tally.duplicates,
        partitions_of(&leader),
        partitions_of(&follower)
    );
    assert_no_further_rebalance(&members, &mut tally, &topic);
    leader.close(Some(Duration::from_secs(10))).unwrap();
    follower.close(Some(Duration::from_secs(10))).unwrap();
}
