//! The callbacks a client hands its metrics and whole-cluster conditions to, consumer and
//! producer alike: `statistics.interval.ms`'s (when it is due, [`statistics_due`], pure; and the
//! holder that runs it) and the error callback's holder. Each client runs them on the caller's
//! thread, inside its poll (the consumer's `poll()`, the producer's poll and flush), as
//! librdkafka serves `stats_cb` and `error_cb`.
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::error::{Error, Result};
use crate::sync::Unpoisoned;

/// Whether a statistics emission is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StatisticsDue {
    /// `statistics.interval.ms` is 0: never.
    Off,
    /// Now.
    Now,
    /// Not before this instant.
    At(Instant),
}

/// Whether statistics are due at `now`, the last emission (or the consumer's start) having been
/// at `last` and the interval being `interval` (zero: off). Emitting sets `last` to `now`, not to
/// the due time: a poll gap of several intervals gives one emission, not a burst, and two
/// emissions are never closer than the interval. A `now` before `last` (a clock that went back)
/// waits one interval from `now` rather than up to the time the clock lost.
pub fn statistics_due(now: Instant, last: Instant, interval: Duration) -> StatisticsDue {
    if interval.is_zero() {
        return StatisticsDue::Off;
    }
    if now < last {
        return StatisticsDue::At(now + interval);
    }
    match last.checked_add(interval) {
        Some(due) if now >= due => StatisticsDue::Now,
        Some(due) => StatisticsDue::At(due),
        // An interval past the clock's range never comes.
        None => StatisticsDue::Off,
    }
}

/// The callback and when it last ran, for a snapshot of type `M` (the consumer's or the
/// producer's).
pub(crate) struct Statistics<M> {
    // Crate-visible for a test that holds the lock while a poll asks (consumer/statistics.rs).
    pub(crate) state: Mutex<State<M>>,
}

/// A statistics callback of a snapshot of type `M`.
pub(crate) type Callback<M> = Box<dyn FnMut(&M) -> Result<()> + Send>;

pub(crate) struct State<M> {
    callback: Option<Callback<M>>,
    last: Instant,
    /// Bumped by every `set`, so an emission whose callback was replaced meanwhile does not put
    /// the old one back.
    version: u64,
}

impl<M> Statistics<M> {
    pub(crate) fn new(start: Instant) -> Statistics<M> {
        Statistics {
            state: Mutex::new(State {
                callback: None,
                last: start,
                version: 0,
            }),
        }
    }

    pub(crate) fn set(&self, callback: Option<Callback<M>>) {
        let mut st = self.state.lock().unpoisoned();
        st.callback = callback;
        st.version += 1;
    }

    /// Calls the callback with `snapshot()` if an emission is due now; the instant the next one
    /// is due (for a waiting call to wake at), `None` when there is none to wait for. With a
    /// zero `interval` it takes no lock and reads no clock.
    pub(crate) fn emit(
        &self,
        interval: Duration,
        snapshot: impl FnOnce() -> M,
    ) -> Result<Option<Instant>> {
        if interval.is_zero() {
            return Ok(None);
        }
        let now = Instant::now();
        let (mut callback, version) = {
            let mut st = self.state.lock().unpoisoned();
            if st.callback.is_none() {
                return Ok(None);
            }
            match statistics_due(now, st.last, interval) {
                StatisticsDue::Off => return Ok(None),
                StatisticsDue::At(at) => return Ok(Some(at)),
                StatisticsDue::Now => {}
            }
            st.last = now;
            // Taken out so the callback runs with no lock held (it may set another callback).
            (st.callback.take(), st.version)
        };
        let metrics = snapshot();
        // The interval runs from the call, not from the decision: taking the snapshot takes
        // longer some times than others, and two calls must never come closer than the
        // interval.
        let called = Instant::now();
        self.state.lock().unpoisoned().last = called;
        let result = match callback.as_mut() {
            Some(cb) => cb(&metrics),
            None => Ok(()),
        };
        let mut st = self.state.lock().unpoisoned();
        if st.version == version {
            st.callback = callback;
        }
        let next = called.checked_add(interval);
        drop(st);
        result.map(|()| next)
    }
}

/// The error callback: given each whole-cluster condition as it begins, on the thread in
/// `poll()`, before that call takes records. An error it returns comes out of that `poll()`.
pub type ErrorCallback = Box<dyn FnMut(&Error) -> Result<()> + Send>;

/// The callback, and a count that `set` bumps so that a callback replaced while it ran is not
/// put back.
#[derive(Default)]
pub(crate) struct ErrorCallbackSlot {
    state: Mutex<(Option<ErrorCallback>, u64)>,
}

impl ErrorCallbackSlot {
    pub(crate) fn set(&self, callback: Option<ErrorCallback>) {
        let mut st = self.state.lock().unpoisoned();
        st.0 = callback;
        st.1 += 1;
    }

    /// Hands `raised` to the callback (drops it when there is none); stops at the first error
    /// the callback returns, which is the result.
    pub(crate) fn emit(&self, raised: Vec<Error>) -> Result<()> {
        if raised.is_empty() {
            return Ok(());
        }
        let (mut callback, version) = {
            let mut st = self.state.lock().unpoisoned();
            // Taken out so the callback runs with no lock held (it may set another callback).
            (st.0.take(), st.1)
        };
        let mut result = Ok(());
        if let Some(cb) = callback.as_mut() {
            for e in &raised {
                result = cb(e);
                if result.is_err() {
                    break;
                }
            }
        }
        let mut st = self.state.lock().unpoisoned();
        if st.1 == version {
            st.0 = callback;
        }
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_emission_is_due_once_an_interval_has_passed_and_never_sooner() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let at = |n| StatisticsDue::At(t0 + ms(n));
        // (now - t0, interval, expected); last = t0.
        let table = [
            (0, 0, StatisticsDue::Off),
            (10_000, 0, StatisticsDue::Off),
            (0, 200, at(200)),
            (199, 200, at(200)),
            (200, 200, StatisticsDue::Now),
            (201, 200, StatisticsDue::Now),
            // A poll gap of ten intervals: one emission due (the caller then sets last = now).
            (2_000, 200, StatisticsDue::Now),
        ];
        for (now, interval, want) in table {
            assert_eq!(
                statistics_due(t0 + ms(now), t0, ms(interval)),
                want,
                "now = t0 + {now} ms, interval {interval} ms"
            );
        }
    }

    #[test]
    fn a_long_gap_gives_one_emission_then_a_full_interval() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let interval = ms(200);
        // Polls every 50 ms, with a 1 s gap from 300 to 1300 ms.
        let polls: Vec<u64> = (0..=6)
            .map(|i| i * 50)
            .chain((0..=8).map(|i| 1_300 + i * 50))
            .collect();
        let mut last = t0;
        let mut emitted = Vec::new();
        for p in polls {
            let now = t0 + ms(p);
            if statistics_due(now, last, interval) == StatisticsDue::Now {
                last = now;
                emitted.push(p);
            }
        }
        // At 200, once after the gap (1300, not five times), and one interval after that.
        assert_eq!(emitted, [200, 1_300, 1_500, 1_700]);
    }

    #[test]
    fn a_clock_that_went_back_waits_one_interval_from_now() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let last = t0 + ms(5_000);
        assert_eq!(
            statistics_due(t0, last, ms(200)),
            StatisticsDue::At(t0 + ms(200))
        );
        assert_eq!(statistics_due(t0, last, ms(0)), StatisticsDue::Off);
    }
}
