//! A recovery stream (KIP-333) that cannot read its backlog is a KIP-572 task of its own, against
//! an in-process fake broker: it retries with backoff, is reported through `poll()` as
//! `Error::PartitionStuck` ("recovery stream: ...") after `task.timeout.ms` without progress,
//! never holds up the main stream, never lets the committed offset pass the backlog, and drains
//! the backlog once the broker serves it again.
//!
//! No real broker is needed (`LAGLESS_BOOTSTRAP` is not read).
#[path = "support/fake_broker.rs"]
mod fake_broker;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker};
use lagless::error::codes;
use lagless::{Config, Consumer, Error, TopicPartition};

const TOPIC: &str = "recovery-isolation";
const COMMITTED: i64 = 500;
/// Records in the log when the fake broker starts; the log then grows by RATE a second.
const INITIAL: i64 = 2000;
const RATE: u64 = 500;
/// How long fetches of the backlog fail.
const FAIL_FOR: Duration = Duration::from_secs(5);

#[test]
fn a_failing_recovery_stream_is_reported_alone_and_the_main_stream_goes_on() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Backlog {
            initial: INITIAL,
            per_sec: RATE,
            total: 1_000_000,
            fail_below: INITIAL,
            fail_for: FAIL_FOR,
            code: codes::NOT_LEADER_OR_FOLLOWER,
        }],
    );
    broker.set_committed(0, COMMITTED, "");
    let c = Consumer::from_config(
        &Config::from_pairs([
            ("bootstrap.servers", broker.addr.as_str()),
            ("group.id", "recovery-isolation"),
            ("enable.auto.commit", "false"),
            ("enable.parallel.rebalance", "true"),
            ("parallel.rebalance.min.lag", "10"),
            ("task.timeout.ms", "2000"),
            ("fetch.max.wait.ms", "100"),
        ])
        .unwrap(),
    )
    .unwrap();
    let tp = TopicPartition::new(TOPIC, 0);
    c.assign(std::slice::from_ref(&tp)).unwrap();

    let started = Instant::now();
    let mut main: Vec<i64> = Vec::new();
    let mut recovered: BTreeSet<i64> = BTreeSet::new();
    let mut stuck_reports: Vec<(Duration, String)> = Vec::new();
    let mut main_after_first_report = 0;
    let mut checked_commit_while_stuck = false;
    while started.elapsed() < Duration::from_secs(30) {
        match c.poll(Duration::from_millis(100)) {
            Ok(records) => {
                for r in records {
                    if r.from_recovery {
                        assert!(
                            started.elapsed() >= FAIL_FOR - Duration::from_millis(500),
                            "a recovery record while the backlog fails"
                        );
                        assert!(recovered.insert(r.offset), "{} twice", r.offset);
                    } else {
                        if let Some(&last) = main.last() {
                            assert_eq!(r.offset, last + 1, "main stream out of order");
                        } else {
                            assert!(r.offset >= INITIAL, "main stream starts at the log end");
                        }
                        main.push(r.offset);
                        if !stuck_reports.is_empty() {
                            main_after_first_report += 1;
                        }
                    }
                }
            }
            Err(Error::PartitionStuck { partition, cause }) => {
                assert_eq!((partition.topic.as_str(), partition.partition), (TOPIC, 0));
                stuck_reports.push((started.elapsed(), cause));
            }
            Err(e) => panic!("unexpected error from poll(): {e}"),
        }
        if !stuck_reports.is_empty() && !checked_commit_while_stuck && main.len() > 100 {
            // The commit holds at the backlog's start, with the token, however far the main
            // stream got; an explicit commit of the main position is held there too.
            c.commit_sync(None, None).unwrap();
            let (offset, metadata) = broker.committed(0).unwrap();
            assert_eq!(offset, COMMITTED);
            let main_next = main.last().unwrap() + 1;
            assert!(
                metadata.starts_with(&format!("lagless1;m={main_next};r={COMMITTED}-")),
                "{metadata}"
            );
            let ahead = lagless::OffsetAndMetadata {
                offset: main_next,
                metadata: String::new(),
            };
            c.commit_sync(Some(&[(tp.clone(), ahead)]), None).unwrap();
            assert_eq!(broker.committed(0).unwrap().0, COMMITTED);
            assert!(c.recovery_active(&tp).unwrap());
            assert_eq!(c.position(&tp, None).unwrap(), main_next);
            checked_commit_while_stuck = true;
        }
        let backlog_end = main.first().copied().unwrap_or(i64::MAX);
        if !main.is_empty()
            && recovered.len() as i64 == backlog_end - COMMITTED
            && !c.recovery_active(&tp).unwrap()
        {
            break;
        }
    }
    let backlog_end = *main.first().expect("the main stream delivered nothing");
    eprintln!(
        "stuck reports: {stuck_reports:?}; main records after the first: {main_after_first_report}; \
         backlog [{COMMITTED}, {backlog_end}) recovered: {}",
        recovered.len()
    );
    let (first_at, cause) = stuck_reports
        .first()
        .expect("the failing recovery stream was never reported");
    assert!(cause.starts_with("recovery stream:"), "{cause}");
    assert!(
        *first_at >= Duration::from_millis(1500),
        "reported before task.timeout.ms: {first_at:?}"
    );
    assert!(
        main_after_first_report > 0,
        "the main stream stopped when the recovery stream was reported"
    );
    assert!(checked_commit_while_stuck);
    assert_eq!(
        recovered,
        (COMMITTED..backlog_end).collect::<BTreeSet<_>>(),
        "the backlog drains once the broker serves it"
    );
    c.commit_sync(None, None).unwrap();
    let (offset, metadata) = broker.committed(0).unwrap();
    assert_eq!(offset, main.last().unwrap() + 1);
    assert_eq!(metadata, "");
    c.close(None).unwrap();
}
