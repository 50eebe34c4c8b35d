//! Time, not retry counts (KIP-572, KIP-580): the one backoff of lagless, and deadlines.
//!
//! `backoff(n) = min(max, min(max, initial * 2^n) * U(0.8, 1.2))`: the jitter comes before the cap, so a wait
//! never exceeds `retry.backoff.max.ms`, as in the Java client's `ExponentialBackoff`; when
//! `max <= initial` the backoff is `max` less up to 20% jitter.
use std::time::{Duration, Instant};

use rand::Rng;

use crate::error::{Error, Result};

/// Exponential backoff with jitter. Cheap to copy; the attempt counter lives in [`Retry`].
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    initial: Duration,
    max: Duration,
}

impl Backoff {
    /// A backoff from `initial` (`retry.backoff.ms`, `reconnect.backoff.ms`) doubling up to
    /// `max` (`retry.backoff.max.ms`, `reconnect.backoff.max.ms`); constant `max` less jitter
    /// when `max <= initial`.
    pub fn new(initial: Duration, max: Duration) -> Backoff {
        Backoff { initial, max }
    }

    /// The wait before attempt `failures + 1`, after `failures` failures in a row (0-based).
    pub fn delay(&self, failures: u32) -> Duration {
        let base = if self.max <= self.initial {
            self.max
        } else {
            // 2^n saturates long before u32 overflow matters: cap the exponent.
            let factor = 1u32 << failures.min(20);
            // The exponent stops growing at the cap (Java's `expMax`), so waits at the cap
            // still spread over [0.8, 1.0] x max.
            self.initial.saturating_mul(factor).min(self.max)
        };
        base.mul_f64(rand::thread_rng().gen_range(0.8..=1.2))
            .min(self.max)
    }
}

/// Counts consecutive failures of one operation; reset on success.
#[derive(Debug, Clone)]
pub struct Retry {
    backoff: Backoff,
    failures: u32,
}

impl Retry {
    /// A counter with no failures yet.
    pub fn new(backoff: Backoff) -> Retry {
        Retry {
            backoff,
            failures: 0,
        }
    }

    /// Records a failure and returns how long to wait before the next try.
    pub fn failed(&mut self) -> Duration {
        let d = self.backoff.delay(self.failures);
        self.failures = self.failures.saturating_add(1);
        d
    }

    /// Records a success: the next failure waits the initial backoff again.
    pub fn succeeded(&mut self) {
        self.failures = 0;
    }

    /// The number of failures in a row so far.
    // Only the tests ask: callers go by the delay `failed()` returns.
    #[cfg(test)]
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

/// Runs `attempt` until it succeeds, fails with an error that is not retriable, or the next
/// wait would pass `deadline` (then the last error is returned). Waits follow `backoff`
/// (KIP-580) between tries. The one retry-until-deadline loop for one-shot operations.
pub async fn retry_until<T, F, Fut>(
    backoff: Backoff,
    deadline: Deadline,
    what: &str,
    attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    retry_until_if(backoff, deadline, what, Error::is_retriable, attempt).await
}

/// [`retry_until`] for an operation that retries more errors than [`Error::is_retriable`] says,
/// such as a coordinator lookup that also retries the errors which mean "ask again elsewhere".
pub async fn retry_until_if<T, F, Fut>(
    backoff: Backoff,
    deadline: Deadline,
    what: &str,
    retriable: impl Fn(&Error) -> bool,
    mut attempt: F,
) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<T>>,
{
    let mut retry = Retry::new(backoff);
    loop {
        match attempt().await {
            Ok(v) => return Ok(v),
            Err(e) => {
                let wait = retry.failed();
                if !retriable(&e) || deadline.remaining() <= wait {
                    return Err(e);
                }
                tracing::debug!(error = %e, "{what} failed; retrying");
                tokio::time::sleep(wait).await;
            }
        }
    }
}

/// A point in time by which a blocking call must return.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    at: Instant,
    timeout: Duration,
}

impl Deadline {
    /// The deadline `timeout` from now. `Duration::MAX` (or any timeout too long for the
    /// platform's clock) is taken as 100 years: no deadline in practice.
    pub fn after(timeout: Duration) -> Deadline {
        Deadline::after_from(Instant::now(), timeout)
    }

    /// The deadline `timeout` after `now` (an instant the caller read already).
    pub fn after_from(now: Instant, timeout: Duration) -> Deadline {
        Deadline {
            // A "forever" timeout (Duration::MAX) must not overflow Instant.
            at: now
                .checked_add(timeout)
                .unwrap_or(now + Duration::from_secs(100 * 365 * 86400)),
            timeout,
        }
    }

    /// The point in time the deadline passes.
    pub fn instant(&self) -> Instant {
        self.at
    }

    /// The time left; zero once the deadline has passed.
    pub fn remaining(&self) -> Duration {
        self.at.saturating_duration_since(Instant::now())
    }

    /// Whether the deadline has passed.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.at
    }

    /// The timeout the deadline was made from, for error messages.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `Error::Timeout` for `what`, saying how long was allowed.
    pub fn error(&self, what: &str) -> Error {
        Error::Timeout(format!(
            "{what} did not complete within {} ms",
            self.timeout.as_millis()
        ))
    }

    /// Ok while time remains, else the timeout error for `what`.
    pub fn check(&self, what: &str) -> Result<()> {
        if self.expired() {
            Err(self.error(what))
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    #[test]
    fn grows_exponentially_within_jitter_and_caps_at_max() {
        let b = Backoff::new(ms(100), ms(1000));
        for _ in 0..200 {
            for (n, base) in [
                (0, 100.0),
                (1, 200.0),
                (2, 400.0),
                (3, 800.0),
                (4, 1000.0),
                (30, 1000.0),
            ] {
                let d = b.delay(n).as_secs_f64() * 1000.0;
                assert!(
                    d >= base * 0.8 - 1e-6 && d <= (base * 1.2).min(1000.0) + 1e-6,
                    "n={n}: {d}"
                );
            }
        }
    }

    #[test]
    fn max_not_above_initial_is_constant_max() {
        let b = Backoff::new(ms(500), ms(200));
        for n in 0..10 {
            let d = b.delay(n).as_secs_f64() * 1000.0;
            assert!((160.0..=200.0).contains(&d), "{d}");
        }
    }

    #[test]
    fn jitter_never_takes_a_wait_above_the_cap() {
        // KIP-580 as the Java client does it: jitter first, then the cap. Waits at the cap spread
        // over [0.8, 1.0] x retry.backoff.max.ms, never above it.
        let b = Backoff::new(ms(100), ms(1000));
        let waits: Vec<Duration> = (0..2000).map(|_| b.delay(10)).collect();
        let longest = waits.iter().max().unwrap();
        assert!(
            *longest <= ms(1000),
            "a wait of {longest:?} above the 1000 ms cap"
        );
        assert!(waits.iter().all(|w| *w >= ms(800)));
        assert!(waits.iter().filter(|w| **w < ms(990)).count() > 500);
        // Below the cap the jitter still goes both ways.
        let below: Vec<Duration> = (0..2000).map(|_| b.delay(1)).collect();
        assert!(below.iter().any(|w| *w > ms(220)) && below.iter().any(|w| *w < ms(180)));
    }

    #[test]
    fn jitter_actually_varies() {
        let b = Backoff::new(ms(100), ms(1000));
        let samples: std::collections::BTreeSet<u128> =
            (0..50).map(|_| b.delay(2).as_micros()).collect();
        assert!(samples.len() > 10);
    }

    #[test]
    fn retry_resets_on_success() {
        let mut r = Retry::new(Backoff::new(ms(100), ms(1000)));
        r.failed();
        r.failed();
        assert_eq!(r.failures(), 2);
        r.succeeded();
        assert_eq!(r.failures(), 0);
        assert!(r.failed() <= ms(120));
    }

    #[test]
    fn deadline_never_overflows_and_reports_its_timeout() {
        let d = Deadline::after(Duration::MAX);
        assert!(!d.expired());
        let d = Deadline::after(ms(0));
        assert!(d.expired());
        assert_eq!(
            d.error("commit").to_string(),
            "timed out: commit did not complete within 0 ms"
        );
    }
    #[tokio::test]
    async fn retry_until_retries_retriable_errors_and_stops_at_the_first_fatal_one() {
        let backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(10));
        let mut tries = 0;
        let r: Result<u32> = retry_until(
            backoff,
            Deadline::after(Duration::from_secs(5)),
            "test",
            || {
                tries += 1;
                let n = tries;
                async move {
                    if n < 3 {
                        Err(Error::Transport("down".into()))
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await;
        assert_eq!(r.unwrap(), 3);
        let mut tries = 0;
        let r: Result<()> = retry_until(
            backoff,
            Deadline::after(Duration::from_secs(5)),
            "test",
            || {
                tries += 1;
                async { Err(Error::InvalidArgument("bad".into())) }
            },
        )
        .await;
        assert!(matches!(r, Err(Error::InvalidArgument(_))));
        assert_eq!(tries, 1, "a fatal error is not retried");
        let mut tries = 0;
        let r: Result<()> = retry_until(
            backoff,
            Deadline::after(Duration::from_millis(35)),
            "test",
            || {
                tries += 1;
                async { Err(Error::Transport("down".into())) }
            },
        )
        .await;
        assert!(matches!(r, Err(Error::Transport(_))));
        assert!(
            (2..=5).contains(&tries),
            "stops at the deadline after {tries} tries"
        );
    }

    #[tokio::test]
    async fn retry_until_if_retries_what_its_predicate_calls_retriable() {
        let backoff = Backoff::new(Duration::from_millis(10), Duration::from_millis(10));
        // NOT_COORDINATOR-like: not retriable by itself, retried by a coordinator lookup.
        let mut tries = 0;
        let r: Result<u32> = retry_until_if(
            backoff,
            Deadline::after(Duration::from_secs(5)),
            "test",
            |e| matches!(e, Error::IllegalState(_)),
            || {
                tries += 1;
                let n = tries;
                async move {
                    if n < 3 {
                        Err(Error::IllegalState("elsewhere".into()))
                    } else {
                        Ok(n)
                    }
                }
            },
        )
        .await;
        assert_eq!(r.unwrap(), 3);
        // And only that: a transport error the predicate rejects is returned at once.
        let mut tries = 0;
        let r: Result<()> = retry_until_if(
            backoff,
            Deadline::after(Duration::from_secs(5)),
            "test",
            |e| matches!(e, Error::IllegalState(_)),
            || {
                tries += 1;
                async { Err(Error::Transport("down".into())) }
            },
        )
        .await;
        assert!(matches!(r, Err(Error::Transport(_))));
        assert_eq!(tries, 1);
    }
}
