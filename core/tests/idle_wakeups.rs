//! An idle consumer of many partitions costs little CPU: its fetch task plans a turn (a walk over
//! every assigned partition) only when something happens (a fetch answer, a poll that made room,
//! a change of the partitions, a backoff or deadline that falls due), not on a fixed clock.
#[path = "support/configs.rs"]
mod configs;
#[path = "support/own_broker.rs"]
mod own_broker;

use std::time::{Duration, Instant};

use lagless::Consumer;
use own_broker::OwnBroker;

const PARTITIONS: i32 = 1_000;

/// Polls `for_` with nothing to read, as an application waiting for records does.
fn poll_idle(c: &Consumer, for_: Duration) {
    let until = Instant::now() + for_;
    while Instant::now() < until {
        assert!(c.poll(Duration::from_millis(500)).unwrap().is_empty());
    }
}

#[test]
#[ignore = "needs a Kafka broker: run by tests/run, or by hand with -- --include-ignored"]
fn an_idle_consumer_of_many_partitions_plans_a_turn_only_per_fetch_answer() {
    let broker = OwnBroker::start(1);
    let b = broker.bootstrap.as_str();
    let topic = "idle-wakeups";
    lagless::admin::create_topic(b, topic, PARTITIONS, 1).unwrap();
    let (c, tps) = configs::assigned_all(b, topic, PARTITIONS);
    // Every position looked up (offset 0 of an empty log), so that the window below sees only
    // the idle fetches.
    for tp in &tps {
        assert_eq!(c.position(tp, Some(Duration::from_secs(30))).unwrap(), 0);
    }
    poll_idle(&c, Duration::from_secs(1));

    let before = c.fetch_plan_passes();
    let window = Instant::now();
    poll_idle(&c, Duration::from_secs(3));
    let passes = c.fetch_plan_passes() - before;
    let secs = window.elapsed().as_secs_f64();
    println!(
        "{PARTITIONS} partitions, idle {secs:.1} s: {passes} fetch plan passes ({:.1}/s)",
        passes as f64 / secs
    );
    // One broker, one Fetch in flight, answered every fetch.max.wait.ms (500 ms) when nothing
    // comes: about 2 turns a second. A fixed 50 ms clock would make it 20 or more.
    assert!(
        passes >= 2,
        "the fetch task planned {passes} turns in {secs:.1} s: are fetches still sent?"
    );
    assert!(
        (passes as f64) <= 5.0 * secs,
        "the fetch task planned {passes} turns in {secs:.1} s idle (a fetch answer every 500 ms \
         needs about 2 a second)"
    );
    // Still fetching: all positions at the log end, no error.
    for tp in &tps[..10] {
        assert_eq!(c.position(tp, None).unwrap(), 0);
    }
    c.close(None).unwrap();
}
