//! KIP-320 against a real unclean leader election: on a three-node cluster, a partition on nodes
//! 1 and 2 with `unclean.leader.election.enable=true` takes records acknowledged by its leader
//! alone (acks=1) while its follower is stopped; two consumers read them. The leader is then
//! killed and the lagging follower, started again, becomes leader without those records: the
//! log is truncated below both consumers' positions. The consumer with `auto.offset.reset=none`
//! gets a `LogTruncation` error naming the position and the divergent offset; the one with
//! `earliest` resets to the divergent offset by itself and reads every record the new leader
//! holds after it once: nothing re-read from before it, nothing skipped. A consumer that
//! committed its position before the truncation passes the position's leader epoch on with the
//! commit: its successor in the group detects the truncation from the committed offset alone.
#[path = "support/own_broker.rs"]
mod own_broker;

use std::time::{Duration, Instant};

use lagless::{Config, Consumer, Error, Producer, ProducerRecord, TopicPartition};
use own_broker::OwnBroker;

const TOPIC: &str = "truncated";
/// Records on both replicas, then records only the leader took, then records of the new leader.
const BOTH: usize = 10;
const LEADER_ONLY: usize = 20;
const AFTER: usize = 5;

fn produce(bootstrap: &str, acks: &str, prefix: &str, n: usize) {
    let p = Producer::from_config(
        &Config::from_pairs([("bootstrap.servers", bootstrap), ("acks", acks)]).unwrap(),
    )
    .unwrap();
    let deliveries: Vec<_> = (0..n)
        .map(|i| {
            p.send(ProducerRecord::new(TOPIC, format!("{prefix}:{i}")).with_partition(0))
                .unwrap()
        })
        .collect();
    for d in deliveries {
        d.wait().expect("delivery");
    }
}

fn consumer(bootstrap: &str, reset: &str) -> Consumer {
    consumer_in(bootstrap, reset, "")
}

/// A consumer of group `group` (none when empty) with manual assignment.
fn consumer_in(bootstrap: &str, reset: &str, group: &str) -> Consumer {
    let mut pairs = vec![
        ("bootstrap.servers", bootstrap),
        ("auto.offset.reset", reset),
        ("enable.auto.commit", "false"),
        ("fetch.max.wait.ms", "200"),
        // The outage below must not be reported as a stuck partition.
        ("task.timeout.ms", "600000"),
    ];
    if !group.is_empty() {
        pairs.push(("group.id", group));
    }
    let c = Consumer::from_config(&Config::from_pairs(pairs).unwrap()).unwrap();
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    c
}

/// Polls `c` until it returned `n` more records (offset and value) or an error came.
fn read(c: &Consumer, n: usize, within: Duration) -> (Vec<(i64, String)>, Option<Error>) {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            start.elapsed() < within,
            "only {} of {n} records within {within:?}: {got:?}",
            got.len()
        );
        match c.poll(Duration::from_millis(200)) {
            Ok(records) => got.extend(records.into_iter().map(|r| {
                let value = String::from_utf8(r.value.unwrap().to_vec()).unwrap();
                (r.offset, value)
            })),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

fn expected(prefix: &str, first_offset: i64, n: usize) -> Vec<(i64, String)> {
    (0..n)
        .map(|i| (first_offset + i as i64, format!("{prefix}:{i}")))
        .collect()
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with LAGLESS_BOOTSTRAP set and -- --include-ignored"]
fn an_uncleanly_elected_leader_truncates_below_the_position_and_the_consumer_detects_it() {
    let started = Instant::now();
    let cluster = OwnBroker::start(3);
    let b = cluster.bootstrap.clone();
    cluster.create_topic_on(
        TOPIC,
        &[1, 2],
        &[
            ("unclean.leader.election.enable", "true"),
            ("min.insync.replicas", "1"),
        ],
    );
    assert_eq!(cluster.leader_of(TOPIC, 0), 1);
    produce(&b, "all", "a", BOTH);

    let strict = consumer(&b, "none");
    strict.seek(&TopicPartition::new(TOPIC, 0), 0).unwrap();
    let resetting = consumer(&b, "earliest");
    // Commits its position before the truncation; a successor in its group starts from it.
    let committer = consumer_in(&b, "earliest", "truncation-group");
    for c in [&strict, &resetting, &committer] {
        let (got, e) = read(c, BOTH, Duration::from_secs(30));
        assert!(e.is_none(), "{e:?}");
        assert_eq!(got, expected("a", 0, BOTH));
    }

    // The follower stops (a controlled shutdown takes it out of the ISR); the leader alone takes
    // the next records, and both consumers read them.
    cluster.stop_node(2);
    produce(&b, "1", "b", LEADER_ONLY);
    for c in [&strict, &resetting, &committer] {
        let (got, e) = read(c, LEADER_ONLY, Duration::from_secs(30));
        assert!(e.is_none(), "{e:?}");
        assert_eq!(got, expected("b", BOTH as i64, LEADER_ONLY));
    }
    let position = (BOTH + LEADER_ONLY) as i64;
    // The commit carries the position's leader epoch (KIP-320).
    committer.commit_sync(None, None).unwrap();
    committer.close(None).unwrap();

    // The leader dies before the follower comes back: the follower, never in the ISR again, is
    // elected uncleanly and its log ends where the records of both replicas end.
    cluster.kill_node(1);
    cluster.start_node(2);
    let waiting = Instant::now();
    loop {
        let leader = cluster.leader_seen_by(3, TOPIC, 0);
        if leader == 2 {
            break;
        }
        assert!(
            waiting.elapsed() < Duration::from_secs(60),
            "node 2 was not elected leader uncleanly within 60 s (leader now {leader})"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
    eprintln!(
        "node 2 leads after an unclean election, {:?} after the kill",
        waiting.elapsed()
    );
    let survivors = format!("{},{}", cluster.address(2), cluster.address(3));
    produce(&survivors, "1", "c", AFTER);

    // earliest: back to the divergent offset, then exactly the new leader's records after it.
    let (got, e) = read(&resetting, AFTER, Duration::from_secs(60));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, expected("c", BOTH as i64, AFTER));
    assert_eq!(
        resetting
            .position(&TopicPartition::new(TOPIC, 0), None)
            .unwrap(),
        (BOTH + AFTER) as i64
    );

    // A successor starting from the commit checks the committed offset's epoch on its first
    // fetch: it resets to the divergent offset too, rather than to the log start (what an
    // offset out of range with earliest does).
    let successor = consumer_in(&survivors, "earliest", "truncation-group");
    let (got, e) = read(&successor, AFTER, Duration::from_secs(60));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, expected("c", BOTH as i64, AFTER));

    // none: the truncation is reported with the offsets, and no record comes before it.
    let (got, e) = read(&strict, 1, Duration::from_secs(60));
    assert!(got.is_empty(), "records after the truncation: {got:?}");
    match e {
        Some(Error::LogTruncation {
            ref partition,
            position: at,
            divergent_offset,
            ..
        }) => {
            assert_eq!((partition.topic.as_str(), partition.partition), (TOPIC, 0));
            assert_eq!((at, divergent_offset), (position, BOTH as i64));
        }
        other => panic!("expected LogTruncation, got {other:?}"),
    }
    // The application seeks to the divergent offset and reads on from there.
    strict
        .seek(&TopicPartition::new(TOPIC, 0), BOTH as i64)
        .unwrap();
    let (got, e) = read(&strict, AFTER, Duration::from_secs(30));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, expected("c", BOTH as i64, AFTER));
    eprintln!("whole scenario: {:?}", started.elapsed());
}
