//! KIP-320's position validation: after a leader change, a position is checked with
//! OffsetForLeaderEpoch before the partition fetches again (the Java client's AWAIT_VALIDATION).
//!
//! Against the in-process fake broker (no real broker needed): its Fetch answers never name a
//! diverging epoch, so a truncation the consumer finds is one validation found. Against a real
//! three-node cluster with an unclean leader election (the scenario of log_truncation.rs): a
//! paused partition, which sends no Fetch, is found truncated all the same; and a position from
//! `seek_to_end` (ListOffsets), with no record read yet, carries its leader epoch and is found
//! truncated too, instead of silently skipping what the new leader wrote below it.
#[path = "support/fake_broker.rs"]
mod fake_broker;
#[path = "support/own_broker.rs"]
mod own_broker;
mod support;
#[path = "support/unclean_election.rs"]
mod unclean_election;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker};
use lagless::error::codes;
use lagless::{Consumer, Error, TopicPartition};
use support::configs;
use unclean_election::{assert_log_truncation, elect_node_2_uncleanly, expected, read};

const FAKE_TOPIC: &str = "validated";
const FAKE_RECORDS: i64 = 100;

fn fake_consumer(broker: &FakeBroker, reset: &str) -> Consumer {
    let c = support::consumer(
        &broker.addr,
        &[
            ("auto.offset.reset", reset),
            ("fetch.max.wait.ms", "100"),
            // The new leader epoch is learned from a periodic refresh: the fetches succeed.
            ("metadata.max.age.ms", "300"),
            ("retry.backoff.ms", "50"),
            ("retry.backoff.max.ms", "200"),
        ],
    );
    c.assign(&[TopicPartition::new(FAKE_TOPIC, 0)]).unwrap();
    c
}

/// Polls `c` until it returned `n` records (their offsets) or an error; `None` for the error
/// when `within` passed first.
fn offsets_until(c: &Consumer, n: usize, within: Duration) -> (Vec<i64>, Option<Error>) {
    let start = Instant::now();
    let mut got = Vec::new();
    while got.len() < n && start.elapsed() < within {
        match c.poll(Duration::from_millis(50)) {
            Ok(records) => got.extend(records.iter().map(|r| r.offset)),
            Err(e) => return (got, Some(e)),
        }
    }
    (got, None)
}

/// The fake broker's log is 0..100, all of epoch 0. Two consumers read all of it; then the
/// metadata names leader epoch 1, and OffsetForLeaderEpoch says epoch 0 ends at 60 (its first
/// two answers are FENCED_LEADER_EPOCH: retried with fresh metadata). Fetch answers go on
/// as before, so only validation can find the truncation: with `none` the consumer reports it
/// (position 100, divergent offset 60) and returns no record; with `earliest` it resets to 60
/// and reads 60..100 again, each once.
#[test]
fn validation_after_a_leader_change_finds_a_truncation_fetch_answers_do_not_show() {
    let broker = FakeBroker::start(
        FAKE_TOPIC,
        vec![Behavior::Records {
            total: FAKE_RECORDS,
            per_sec: 0,
        }],
    );
    let strict = fake_consumer(&broker, "none");
    strict.seek(&TopicPartition::new(FAKE_TOPIC, 0), 0).unwrap();
    let resetting = fake_consumer(&broker, "earliest");
    let all: Vec<i64> = (0..FAKE_RECORDS).collect();
    for c in [&strict, &resetting] {
        let (got, e) = offsets_until(c, all.len(), Duration::from_secs(20));
        assert!(e.is_none(), "{e:?}");
        assert_eq!(got, all);
    }
    assert!(broker.epoch_requests().is_empty(), "no leader change yet");

    broker.fail_epoch_requests(codes::FENCED_LEADER_EPOCH, 2);
    broker.set_epoch_end(0, 60);
    broker.set_leader_epoch(1);

    let (got, e) = offsets_until(&strict, 1, Duration::from_secs(20));
    assert!(got.is_empty(), "records after the truncation: {got:?}");
    let epoch = assert_log_truncation(e, FAKE_TOPIC, 100, 60);
    assert_eq!(epoch, 0);
    let again: Vec<i64> = (60..FAKE_RECORDS).collect();
    let (got, e) = offsets_until(&resetting, again.len(), Duration::from_secs(20));
    assert!(e.is_none(), "{e:?}");
    assert_eq!(got, again);
    // Nothing more: each record after the divergence point came once.
    let (more, e) = offsets_until(&resetting, 1, Duration::from_millis(500));
    assert!(more.is_empty() && e.is_none(), "{more:?} {e:?}");
    assert_eq!(
        resetting
            .position(&TopicPartition::new(FAKE_TOPIC, 0), None)
            .unwrap(),
        FAKE_RECORDS
    );

    // Each consumer asked about epoch 0 under leader epoch 1; two answers were fenced and
    // asked again.
    let asked = broker.epoch_requests();
    eprintln!("OffsetForLeaderEpoch partitions asked: {asked:?}");
    assert!(asked
        .iter()
        .all(|&(p, current, epoch)| (p, current, epoch) == (0, 1, 0)));
    assert!(asked.len() >= 4, "{asked:?}");
}

/// A leader without OffsetForLeaderEpoch (v3+) cannot validate: as the Java client does, the
/// consumer takes its position as right under the new leader and fetches on, without asking
/// (and without finding the truncation the test sets up, which a Fetch does not show either).
#[test]
fn a_leader_that_cannot_validate_is_fetched_from_without_validation() {
    let broker = FakeBroker::start(
        FAKE_TOPIC,
        vec![Behavior::Records {
            total: 400,
            per_sec: 100,
        }],
    );
    broker.without_offset_for_leader_epoch();
    let c = fake_consumer(&broker, "earliest");
    let (got, e) = offsets_until(&c, 50, Duration::from_secs(20));
    assert!(e.is_none(), "{e:?}");
    let read = got.len() as i64;
    assert_eq!(got, (0..read).collect::<Vec<i64>>());
    broker.set_epoch_end(0, 10);
    broker.set_leader_epoch(1);
    // Two metadata refreshes after the change: the consumer has seen the new epoch.
    let seen = broker.metadata_requests() + 2;
    support::wait_until("two metadata refreshes", Duration::from_secs(20), || {
        broker.metadata_requests() >= seen
    });
    // It reads on from where it was: no reset, no error.
    let (more, e) = offsets_until(&c, 50, Duration::from_secs(20));
    assert!(e.is_none(), "{e:?}");
    assert!(more.len() >= 50, "{more:?}");
    assert_eq!(more, (read..read + more.len() as i64).collect::<Vec<i64>>());
    assert!(
        broker.epoch_requests().is_empty(),
        "{:?}",
        broker.epoch_requests()
    );
}

const TOPIC: &str = "unclean";
/// Records on both replicas, then records only the leader took, then records of the new leader
/// (more than the leader alone took: the new leader's log grows past the old positions).
const BOTH: usize = 10;
const LEADER_ONLY: usize = 20;
const AFTER: usize = 25;

fn produce(bootstrap: &str, acks: &str, prefix: &str, n: usize) {
    unclean_election::produce(bootstrap, TOPIC, acks, prefix, n);
}

fn consumer(bootstrap: &str, reset: &str) -> Consumer {
    let c = configs::consumer(
        &[
            &unclean_election::consumer_settings(bootstrap, reset)[..],
            // A paused partition sends no fetch whose failure would ask for fresh metadata: the
            // new leader is learned from the periodic refresh.
            &[("metadata.max.age.ms", "1000")],
        ]
        .concat(),
    );
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    c
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with -- --include-ignored"]
fn validation_after_an_unclean_election_finds_the_truncation_without_a_fetch() {
    let started = Instant::now();
    let tp = TopicPartition::new(TOPIC, 0);
    let cluster = unclean_election::start(TOPIC);
    let b = cluster.bootstrap.clone();
    produce(&b, "all", "a", BOTH);

    // Reads everything the leader has, then is paused: it fetches nothing after that.
    let paused = consumer(&b, "none");
    paused.seek(&tp, 0).unwrap();
    let (got, e) = read(&paused, BOTH, Duration::from_secs(30));
    assert_eq!((got, e), (expected("a", 0, BOTH), None));

    // The follower stops; the leader alone takes the next records.
    cluster.stop_node(2);
    produce(&b, "1", "b", LEADER_ONLY);
    let (got, e) = read(&paused, LEADER_ONLY, Duration::from_secs(30));
    assert_eq!((got, e), (expected("b", BOTH as i64, LEADER_ONLY), None));
    paused.pause(std::slice::from_ref(&tp)).unwrap();
    let position = (BOTH + LEADER_ONLY) as i64;

    // Starts at the log end (ListOffsets) and reads nothing before the truncation.
    let at_end = consumer(&b, "earliest");
    at_end.seek_to_end(std::slice::from_ref(&tp)).unwrap();
    assert_eq!(at_end.position(&tp, None).unwrap(), position);

    // The leader dies; the follower, started again, is elected uncleanly: its log ends at BOTH.
    let survivors = elect_node_2_uncleanly(&cluster, TOPIC);
    produce(&survivors, "1", "c", AFTER);

    // Paused, it sends no Fetch: only validation can find the truncation.
    let (paused_got, paused_error) = read(&paused, 1, Duration::from_secs(30));
    // From the log end, with the epoch ListOffsets gave: back to the divergence point.
    let (at_end_got, at_end_error) = read(&at_end, AFTER, Duration::from_secs(30));
    eprintln!("paused: {paused_got:?} then {paused_error:?}");
    eprintln!("from the log end: {at_end_got:?} then {at_end_error:?}");

    assert!(
        paused_got.is_empty(),
        "records while paused: {paused_got:?}"
    );
    assert_log_truncation(paused_error, TOPIC, position, BOTH as i64);
    assert!(at_end_error.is_none(), "{at_end_error:?}");
    assert_eq!(at_end_got, expected("c", BOTH as i64, AFTER));
    assert_eq!(at_end.position(&tp, None).unwrap(), (BOTH + AFTER) as i64);

    // The application seeks to the divergent offset and reads on: every record of the new
    // leader after it, once.
    paused.seek(&tp, BOTH as i64).unwrap();
    paused.resume(std::slice::from_ref(&tp)).unwrap();
    let (got, e) = read(&paused, AFTER, Duration::from_secs(30));
    assert_eq!((got, e), (expected("c", BOTH as i64, AFTER), None));
    eprintln!("whole scenario: {:?}", started.elapsed());
}
