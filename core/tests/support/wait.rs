//! Waiting on a condition with a deadline: tests never sleep a fixed time and then assert, since
//! under load any fixed time is sometimes too short.
#![allow(dead_code)]

use std::time::{Duration, Instant};

use lagless::{Consumer, ConsumerRecord, Error};

/// Checks `cond` every 20 ms until it holds and returns how long that took; panics naming `what`
/// if `timeout` passes first.
pub fn wait_until(what: &str, timeout: Duration, mut cond: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    loop {
        if cond() {
            return start.elapsed();
        }
        assert!(
            start.elapsed() < timeout,
            "{what} did not happen within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Polls `c` until it has an assignment and returns the records those polls gave (count them:
/// they are delivered); panics if `within` passes first.
#[must_use = "records polled while waiting were delivered: count them, or say why they do not matter"]
pub fn wait_assigned(c: &Consumer, within: Duration) -> Vec<ConsumerRecord> {
    let mut records = Vec::new();
    wait_until("an assignment", within, || {
        records.extend(c.poll(Duration::ZERO).expect("poll"));
        !c.assignment().is_empty()
    });
    records
}

/// Polls `c` until `poll()` fails and returns the error; panics if `within` passes first.
/// Records polled on the way are dropped.
pub fn poll_until_error(c: &Consumer, within: Duration) -> Error {
    let deadline = Instant::now() + within;
    loop {
        assert!(
            Instant::now() < deadline,
            "no error came out of poll() within {within:?}"
        );
        if let Err(e) = c.poll(Duration::from_millis(50)) {
            return e;
        }
    }
}
