//! Waiting on a condition with a deadline: tests never sleep a fixed time and then assert, since
//! under load any fixed time is sometimes too short.
use std::time::{Duration, Instant};

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
