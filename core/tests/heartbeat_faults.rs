//! What a member does with a Heartbeat answer it cannot go on from, against an in-process fake
//! coordinator whose Heartbeat answers can be set to an error: a fatal answer comes out of
//! `poll()` and no heartbeat follows it; an unexpected error comes out of `poll()` and the
//! heartbeat backs off instead of being sent again at every tick.
//!
//! No real broker is needed (`LAGLESS_BOOTSTRAP` is not read).
#[path = "support/fake_broker.rs"]
mod fake_broker;
mod support;

use std::time::{Duration, Instant};

use fake_broker::{Behavior, FakeBroker};
use lagless::{Consumer, Error};
use support::{consumer, poll_until_error, wait_until};

const TOPIC: &str = "heartbeat-faults";
const FENCED_INSTANCE_ID: i16 = 82;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const UNKNOWN_SERVER_ERROR: i16 = -1;

/// A member of the fake broker's one-member group, heartbeating every 100 ms, stable and
/// heartbeating successfully.
fn joined_member(broker: &FakeBroker) -> Consumer {
    let c = consumer(
        &broker.addr,
        &[
            ("group.id", "heartbeat-faults"),
            ("group.instance.id", "instance-1"),
            ("auto.offset.reset", "earliest"),
            ("fetch.max.wait.ms", "100"),
            ("heartbeat.interval.ms", "100"),
            ("session.timeout.ms", "6000"),
            ("max.poll.interval.ms", "60000"),
            ("retry.backoff.ms", "100"),
            ("retry.backoff.max.ms", "1000"),
        ],
    );
    c.subscribe(&[TOPIC], None).unwrap();
    wait_until(
        "the member joined the fake group and heartbeated",
        Duration::from_secs(30),
        || {
            c.poll(Duration::from_millis(50)).unwrap();
            c.assignment().len() == 1 && broker.heartbeats() >= 2
        },
    );
    c
}

/// How long a heartbeat error may take to come out of `poll()`.
const ERROR_WITHIN: Duration = Duration::from_secs(20);

/// Polls for `window`, returning the errors `poll()` gave.
fn errors_while_polling(c: &Consumer, window: Duration) -> Vec<Error> {
    let end = Instant::now() + window;
    let mut errors = Vec::new();
    while Instant::now() < end {
        if let Err(e) = c.poll(Duration::from_millis(50)) {
            errors.push(e);
            // A fatal error is returned at once; do not spin.
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    errors
}

fn fatal_answer_stops_heartbeats(code: i16) {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 100,
            per_sec: 0,
        }],
    );
    let c = joined_member(&broker);
    broker.set_heartbeat_error(code);
    let err = poll_until_error(&c, ERROR_WITHIN);
    assert_eq!(err.kafka_code(), Some(code), "{err}");
    assert!(err.is_fatal(), "{err}");
    let sent = broker.heartbeats();
    // 20 heartbeat intervals: a member still heartbeating would send about 20 more (before
    // the fix, one every 50 ms tick: about 40).
    let later = errors_while_polling(&c, Duration::from_secs(2));
    let more = broker.heartbeats() - sent;
    assert_eq!(
        broker.heartbeats_failed(),
        1,
        "heartbeats were answered {} and resent after the first such answer",
        err
    );
    assert_eq!(more, 0, "{more} heartbeats after the fatal answer");
    // The client is done: every later poll() says why, with the same error.
    assert!(
        later
            .iter()
            .all(|e| e.kafka_code() == Some(code) && e.is_fatal()),
        "{later:?}"
    );
}

#[test]
fn fenced_instance_id_in_a_heartbeat_is_reported_and_stops_heartbeats() {
    fatal_answer_stops_heartbeats(FENCED_INSTANCE_ID);
}

#[test]
fn group_authorization_failed_in_a_heartbeat_is_reported_and_stops_heartbeats() {
    fatal_answer_stops_heartbeats(GROUP_AUTHORIZATION_FAILED);
}

/// An error lagless has no rule for: the user is told once per answer, and heartbeats back off
/// (100 ms doubling to 1 s) instead of being resent at every 50 ms tick.
#[test]
fn an_unexpected_heartbeat_error_is_reported_and_backs_off() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 100,
            per_sec: 0,
        }],
    );
    let c = joined_member(&broker);
    broker.set_heartbeat_error(UNKNOWN_SERVER_ERROR);
    let err = poll_until_error(&c, ERROR_WITHIN);
    assert_eq!(err.kafka_code(), Some(UNKNOWN_SERVER_ERROR), "{err}");
    let failed = broker.heartbeats_failed();
    let later = errors_while_polling(&c, Duration::from_secs(3));
    let more = broker.heartbeats_failed() - failed;
    // Backoff 100, 200, 400, 800, 1000, 1000 ms (with up to 20 % jitter either way): at most 6
    // in 3 s; at every 50 ms tick it would be about 60.
    assert!(
        more <= 6,
        "{more} heartbeats in 3 s after an unexpected error"
    );
    assert!(more >= 1, "the heartbeat was never tried again");
    // Each failed answer is reported once: never more errors than failed answers.
    assert!(
        later.len() <= more,
        "{} errors out of poll() for {more} failed heartbeats",
        later.len()
    );
    assert!(
        later
            .iter()
            .all(|e| e.kafka_code() == Some(UNKNOWN_SERVER_ERROR) && !e.is_fatal()),
        "{later:?}"
    );
}

/// Auto-commit remembers what it committed only once the group took it: an auto-commit that
/// failed is sent again at the next interval, even for a partition that has nothing new.
#[test]
fn a_failed_auto_commit_is_sent_again() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 100,
            per_sec: 0,
        }],
    );
    // Every commit fails until the member has consumed everything and auto-committed once.
    broker.fail_commits(UNKNOWN_SERVER_ERROR, usize::MAX);
    let c = consumer(
        &broker.addr,
        &[
            ("group.id", "auto-commit-again"),
            ("auto.offset.reset", "earliest"),
            ("fetch.max.wait.ms", "100"),
            ("enable.auto.commit", "true"),
            ("auto.commit.interval.ms", "200"),
        ],
    );
    c.subscribe(&[TOPIC], None).unwrap();
    let mut consumed = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while consumed < 100 {
        assert!(Instant::now() < deadline, "consumed {consumed} of 100");
        consumed += c.poll(Duration::from_millis(50)).unwrap().len();
    }
    // Everything consumed: an auto-commit of offset 100 comes within an interval or two, and is
    // refused.
    wait_until(
        "an auto-commit of offset 100",
        Duration::from_secs(10),
        || {
            c.poll(Duration::from_millis(50)).unwrap();
            broker.refused_commits(0).contains(&100)
        },
    );
    assert_eq!(broker.committed(0), None);
    broker.fail_commits(0, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while broker.committed(0).map(|c| c.0) != Some(100) {
        assert!(
            Instant::now() < deadline,
            "the failed auto-commit was never sent again: committed {:?}",
            broker.committed(0)
        );
        c.poll(Duration::from_millis(50)).unwrap();
    }
}

/// A coordinator that stops answering heartbeats (the connection stays open) is heard of through
/// the error callback once `session.timeout.ms` passed without an answer, on the polling thread.
#[test]
fn a_coordinator_silent_for_a_session_reaches_the_error_callback() {
    let broker = FakeBroker::start(
        TOPIC,
        vec![Behavior::Records {
            total: 100,
            per_sec: 0,
        }],
    );
    let c = joined_member(&broker);
    let heard: std::sync::Arc<std::sync::Mutex<Vec<Error>>> = Default::default();
    let sink = heard.clone();
    c.set_error_callback(Some(Box::new(move |e: &Error| {
        sink.lock().unwrap().push(e.clone());
        Ok(())
    })));
    broker.stall(kafka_protocol::messages::ApiKey::Heartbeat);
    let stalled = Instant::now();
    // session.timeout.ms is 6 s: heard after it, and within a few seconds more.
    while heard.lock().unwrap().is_empty() && stalled.elapsed() < Duration::from_secs(20) {
        let _ = c.poll(Duration::from_millis(100));
    }
    let took = stalled.elapsed();
    let heard = heard.lock().unwrap().clone();
    let silent: Vec<&Error> = heard
        .iter()
        .filter(|e| e.to_string().contains("answered no heartbeat"))
        .collect();
    assert_eq!(silent.len(), 1, "{heard:?}");
    assert_eq!(silent[0].kind(), lagless::ErrorKind::Timeout, "{heard:?}");
    assert!(silent[0].to_string().contains("6000 ms"), "{heard:?}");
    assert!(
        took >= Duration::from_secs(6),
        "heard after {took:?}: {heard:?}"
    );
    eprintln!("heard after {took:?}: {heard:?}");
}
