//! Calls keep their deadline when a broker stops answering one kind of request on connections
//! that stay open (a fake broker that reads those requests and never answers them), with
//! `request.timeout.ms` far beyond the deadline: a request sent with less of the deadline left
//! than `request.timeout.ms` waits only for what is left. Found in the network partitions test:
//! a commit_sync given 3 s whose coordinator connection closed under it looked the coordinator up
//! again on an open connection to a broker cut off from the client, and waited there for the
//! whole `request.timeout.ms` (5.6 s in all).
//!
//! No real broker is needed (`LAGLESS_BOOTSTRAP` is not read).
#[path = "support/fake_broker.rs"]
mod fake_broker;
mod support;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker};
use kafka_protocol::messages::ApiKey;
use lagless::{Consumer, OffsetAndMetadata, TopicPartition};
use support::consumer;

const TOPIC: &str = "coordinator-stalls";
const NOT_COORDINATOR: i16 = 16;
/// Each call's deadline.
const DEADLINE: Duration = Duration::from_secs(1);
/// How much later than its deadline a call may return: scheduling on a loaded two-core machine.
const MARGIN: Duration = Duration::from_secs(1);

fn om(offset: i64) -> OffsetAndMetadata {
    OffsetAndMetadata {
        offset,
        metadata: String::new(),
    }
}

fn tp() -> TopicPartition {
    TopicPartition::new(TOPIC, 0)
}

/// A broker, and a consumer of a group, manually assigned, that has found the coordinator and
/// committed through it while the broker answered everything.
fn setup() -> (FakeBroker, Consumer) {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 100,
            per_sec: 0,
        }],
    );
    let c = consumer(
        &broker.addr,
        &[
            ("group.id", "coordinator-stalls"),
            ("request.timeout.ms", "20000"),
            ("default.api.timeout.ms", "60000"),
            ("retry.backoff.ms", "100"),
            ("retry.backoff.max.ms", "200"),
        ],
    );
    c.assign(&[tp()]).unwrap();
    c.commit_sync(Some(&[(tp(), om(1))]), Some(Duration::from_secs(10)))
        .expect("a commit while the broker answers");
    (broker, c)
}

/// `call` fails, and within [`DEADLINE`] + [`MARGIN`].
fn fails_in_time<T: std::fmt::Debug>(what: &str, call: impl FnOnce() -> lagless::Result<T>) {
    let start = Instant::now();
    let r = call();
    let took = start.elapsed();
    eprintln!("{what}: {} ms: {r:?}", took.as_millis());
    let e = r.expect_err(&format!("{what} succeeded against a stalled broker"));
    assert!(
        took <= DEADLINE + MARGIN,
        "{what} took {took:?}, deadline {DEADLINE:?}: {e}"
    );
    assert!(e.is_retriable(), "{what}: {e:?}");
}

#[test]
fn a_commit_that_must_find_its_coordinator_again_keeps_its_deadline() {
    let (broker, c) = setup();
    // The commit is refused (the coordinator moved), and the lookup of the new one goes
    // unanswered on the connection open since the first lookup.
    broker.fail_commits(NOT_COORDINATOR, 1);
    broker.stall(ApiKey::FindCoordinator);
    fails_in_time("commit_sync", || {
        c.commit_sync(Some(&[(tp(), om(2))]), Some(DEADLINE))
    });
}

#[test]
fn committed_keeps_its_deadline_when_offset_fetch_goes_unanswered() {
    let (broker, c) = setup();
    broker.stall(ApiKey::OffsetFetch);
    fails_in_time("committed", || c.committed(&[tp()], Some(DEADLINE)));
}

#[test]
fn end_offsets_keeps_its_deadline_when_list_offsets_goes_unanswered() {
    let (broker, c) = setup();
    broker.stall(ApiKey::ListOffsets);
    fails_in_time("end_offsets", || c.end_offsets(&[tp()], Some(DEADLINE)));
}
