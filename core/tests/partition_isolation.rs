//! Per-partition isolation (KIP-572), against an in-process fake broker: one partition whose
//! fetches always fail must not hold up the others, and after `task.timeout.ms` without progress
//! it, and only it, is reported through `poll()` as `Error::PartitionStuck`, while the healthy
//! partition keeps delivering.
//!
//! No real broker is needed (`LAGLESS_BOOTSTRAP` is not read).
#[path = "support/fake_broker.rs"]
mod fake_broker;
mod support;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker, BASE_TIMESTAMP};
use lagless::error::codes;
use lagless::{Consumer, Error, TopicPartition};
use support::poll_until_error;

const TOPIC: &str = "isolation";
/// Partition 0's log grows by RATE records a second up to TOTAL: records keep arriving for
/// TOTAL / RATE seconds, before and after partition 1 is reported stuck.
const TOTAL: i64 = 6000;
const RATE: u64 = 1000;
const TASK_TIMEOUT: Duration = Duration::from_millis(2000);

fn consumer(bootstrap: &str) -> Consumer {
    support::consumer(
        bootstrap,
        &[
            ("auto.offset.reset", "earliest"),
            ("task.timeout.ms", "2000"),
            ("fetch.max.wait.ms", "100"),
            ("max.poll.records", "300"),
        ],
    )
}

#[derive(Default, Debug)]
struct Outcome {
    /// When each PartitionStuck report came, since assign().
    stuck_at: Vec<Duration>,
    /// Other per-partition errors poll() returned (e.g. a non-retriable fetch error).
    partition_errors: Vec<Error>,
    /// Records of partition 0 returned before / after the first PartitionStuck report.
    before_stuck: i64,
    after_stuck: i64,
    /// Partition 0's next offset: all records came, in order, once.
    next: i64,
}

/// Consumes partition 0 (records) and 1 (failing) until partition 0 is complete and partition 1
/// has been reported stuck twice, or 20 s pass.
fn consume(broker: &FakeBroker, failing_code: Option<i16>) -> Outcome {
    let c = consumer(&broker.addr);
    let tp0 = TopicPartition::new(TOPIC, 0);
    let tp1 = TopicPartition::new(TOPIC, 1);
    c.assign(&[tp0, tp1]).unwrap();
    let started = Instant::now();
    let mut out = Outcome::default();
    while started.elapsed() < Duration::from_secs(20) {
        if out.next == TOTAL && out.stuck_at.len() >= 2 {
            break;
        }
        match c.poll(Duration::from_millis(100)) {
            Ok(records) => {
                for r in records {
                    assert_eq!(r.partition, 0, "a record of the failing partition: {r:?}");
                    assert_eq!(r.offset, out.next, "partition 0 out of order");
                    assert_eq!(
                        r.value.as_deref(),
                        Some(format!("v{}", r.offset).as_bytes())
                    );
                    assert_eq!(r.key.as_deref(), Some(format!("k{}", r.offset).as_bytes()));
                    assert_eq!(r.timestamp, BASE_TIMESTAMP + r.offset);
                    out.next += 1;
                    if out.stuck_at.is_empty() {
                        out.before_stuck += 1;
                    } else {
                        out.after_stuck += 1;
                    }
                }
            }
            Err(Error::PartitionStuck { partition, cause }) => {
                assert_eq!(
                    (partition.topic.as_str(), partition.partition),
                    (TOPIC, 1),
                    "stuck: {cause}"
                );
                if let Some(code) = failing_code {
                    let name = lagless::error::kafka_error_name(code);
                    assert!(
                        cause.contains(name),
                        "the cause names the fetch error {name}: {cause}"
                    );
                }
                out.stuck_at.push(started.elapsed());
            }
            Err(e) => {
                let p = e
                    .partition()
                    .unwrap_or_else(|| panic!("an error of no partition: {e}"));
                assert_eq!((p.topic.as_str(), p.partition), (TOPIC, 1), "{e}");
                out.partition_errors.push(e);
            }
        }
    }
    eprintln!(
        "stuck reports at {:?}; partition 0: {} records before, {} after the first; {} other errors; fetches of p0 {}, p1 {}",
        out.stuck_at,
        out.before_stuck,
        out.after_stuck,
        out.partition_errors.len(),
        broker.fetches_of(0),
        broker.fetches_of(1)
    );
    out
}

fn check_isolation(out: &Outcome, broker: &FakeBroker) {
    assert_eq!(
        out.next, TOTAL,
        "partition 0 did not deliver all its records: {out:?}"
    );
    assert!(
        out.before_stuck > 0,
        "partition 0 delivered nothing before the stuck report: {out:?}"
    );
    assert!(
        out.after_stuck > 0,
        "partition 0 delivered nothing after partition 1 was reported stuck: {out:?}"
    );
    let first = *out
        .stuck_at
        .first()
        .expect("partition 1 was never reported stuck");
    assert!(
        first >= TASK_TIMEOUT - Duration::from_millis(100)
            && first <= TASK_TIMEOUT + Duration::from_millis(1500),
        "the first stuck report came {first:?} after assign(), task.timeout.ms is {TASK_TIMEOUT:?}"
    );
    // Reported again after another task.timeout.ms, not on every poll.
    if out.stuck_at.len() >= 2 {
        let gap = out.stuck_at[1] - out.stuck_at[0];
        assert!(
            gap >= TASK_TIMEOUT - Duration::from_millis(100),
            "reports {gap:?} apart"
        );
    }
    // The failing partition is retried with backoff, not in a tight loop (retry.backoff.max.ms
    // is 1 s: a few dozen fetches in 6 s at most), yet retried.
    let f1 = broker.fetches_of(1);
    assert!((2..=60).contains(&f1), "partition 1 was fetched {f1} times");
}

#[test]
fn a_partition_whose_fetches_fail_with_not_leader_does_not_hold_up_the_other() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![
            Behavior::Records {
                total: TOTAL,
                per_sec: RATE,
            },
            Behavior::FetchError(codes::NOT_LEADER_OR_FOLLOWER),
        ],
    );
    let out = consume(&broker, Some(codes::NOT_LEADER_OR_FOLLOWER));
    check_isolation(&out, &broker);
    // A retriable error is only reported as the partition being stuck.
    assert!(
        out.partition_errors.is_empty(),
        "{:?}",
        out.partition_errors
    );
}

#[test]
fn a_partition_whose_fetches_fail_with_unknown_server_error_does_not_hold_up_the_other() {
    const UNKNOWN_SERVER_ERROR: i16 = -1;
    let broker = FakeBroker::start(
        TOPIC,
        vec![
            Behavior::Records {
                total: TOTAL,
                per_sec: RATE,
            },
            Behavior::FetchError(UNKNOWN_SERVER_ERROR),
        ],
    );
    let out = consume(&broker, Some(UNKNOWN_SERVER_ERROR));
    check_isolation(&out, &broker);
    // A non-retriable error is also reported as it happens, for partition 1 only.
    assert!(!out.partition_errors.is_empty());
    for e in &out.partition_errors {
        assert_eq!(e.kafka_code(), Some(UNKNOWN_SERVER_ERROR), "{e}");
    }
}

#[test]
fn a_partition_without_a_leader_does_not_hold_up_the_other() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![
            Behavior::Records {
                total: TOTAL,
                per_sec: RATE,
            },
            Behavior::NoLeader,
        ],
    );
    let out = consume(&broker, None);
    assert_eq!(
        out.next, TOTAL,
        "partition 0 did not deliver all its records: {out:?}"
    );
    assert!(out.before_stuck > 0 && out.after_stuck > 0, "{out:?}");
    let first = *out
        .stuck_at
        .first()
        .expect("partition 1 was never reported stuck");
    assert!(
        first <= TASK_TIMEOUT + Duration::from_millis(1500),
        "first stuck report after {first:?}"
    );
}

/// Not isolation, but the same fake broker: fetch answers that end in half a batch (KIP-74) give
/// every record once, in order; the cut batch is fetched again whole.
#[test]
fn fetches_ending_in_a_truncated_batch_deliver_every_record_once() {
    const N: i64 = 2000;
    let broker = FakeBroker::start(TOPIC, vec![Behavior::TruncatedTail { total: N }]);
    let c = consumer(&broker.addr);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    let started = Instant::now();
    let mut next = 0;
    while next < N {
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "stopped at offset {next}"
        );
        for r in c.poll(Duration::from_millis(100)).expect("poll") {
            assert_eq!(r.offset, next);
            assert_eq!(r.value.as_deref(), Some(format!("v{next}").as_bytes()));
            next += 1;
        }
    }
    assert!(c.poll(Duration::from_millis(300)).unwrap().is_empty());
    // One fetch per complete batch: the truncated tail was not taken for a stuck partition.
    let fetches = broker.fetches_of(0);
    assert!(
        fetches >= (N / 200) as usize && fetches <= (N / 200) as usize + 10,
        "{fetches} fetches"
    );
}

#[test]
fn a_broker_too_old_for_lagless_is_a_clear_error_from_poll() {
    // Fetch v4 is the oldest lagless speaks (Kafka 4.x dropped v0-v3): a broker offering only
    // v0-v3 must be reported at once, not retried until task.timeout.ms.
    let broker = FakeBroker::start_with_fetch_versions(
        TOPIC,
        vec![Behavior::Records {
            total: 10,
            per_sec: 0,
        }],
        Some(3),
    );
    let c = consumer(&broker.addr);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    let start = Instant::now();
    let err = poll_until_error(&c, Duration::from_secs(10));
    assert_eq!(err.kafka_code(), Some(codes::UNSUPPORTED_VERSION), "{err}");
    assert!(err.to_string().contains("too old"), "{err}");
    assert!(
        start.elapsed() < TASK_TIMEOUT,
        "reported after {:?}",
        start.elapsed()
    );
}

#[test]
fn a_broker_before_kafka_2_4_is_asked_again_at_api_versions_v0_and_read() {
    // Before KIP-511 a broker answers ApiVersions v3 with UNSUPPORTED_VERSION in the v0 layout;
    // lagless asks again at v0 and carries on with the versions it learns.
    const N: i64 = 500;
    let broker = FakeBroker::start_before_2_4(
        TOPIC,
        vec![Behavior::Records {
            total: N,
            per_sec: 0,
        }],
        None,
    );
    let c = consumer(&broker.addr);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    let start = Instant::now();
    let mut next = 0;
    while next < N {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "stopped at offset {next}"
        );
        for r in c.poll(Duration::from_millis(100)).expect("poll") {
            assert_eq!(r.offset, next);
            next += 1;
        }
    }
}

#[test]
fn a_broker_before_kafka_2_4_and_too_old_for_lagless_is_reported_too_old() {
    let broker = FakeBroker::start_before_2_4(
        TOPIC,
        vec![Behavior::Records {
            total: 10,
            per_sec: 0,
        }],
        Some(3),
    );
    let c = consumer(&broker.addr);
    c.assign(&[TopicPartition::new(TOPIC, 0)]).unwrap();
    let err = poll_until_error(&c, Duration::from_secs(10));
    assert_eq!(err.kafka_code(), Some(codes::UNSUPPORTED_VERSION), "{err}");
    assert!(err.to_string().contains("too old"), "{err}");
}
