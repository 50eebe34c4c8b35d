//! Python timeouts (seconds as float, None for no limit) and the slices a waiting call is cut
//! into so that Ctrl-C is seen: the decisions, apart from the calls that wait.
use std::time::{Duration, Instant};

/// How long a waiting call stays detached from the interpreter before it checks for signals.
pub const SLICE: Duration = Duration::from_millis(100);

/// Seconds as a duration; None, a negative number, NaN, infinity or more seconds than a
/// `Duration` holds mean "no limit" (the caller decides what that is).
pub fn duration(timeout: Option<f64>) -> Option<Duration> {
    let t = timeout?;
    if t < 0.0 {
        return None;
    }
    Duration::try_from_secs_f64(t).ok()
}

/// When a wait of `timeout` seconds that starts at `now` ends; None: never.
pub fn deadline(timeout: Option<f64>, now: Instant) -> Option<Instant> {
    now.checked_add(duration(timeout)?)
}

/// How long the next detached wait may last: `longest`, or what is left before the deadline.
pub fn next_slice(deadline: Option<Instant>, now: Instant, longest: Duration) -> Duration {
    deadline.map_or(longest, |d| d.saturating_duration_since(now).min(longest))
}

/// Whether the deadline has come at `now`.
pub fn passed(deadline: Option<Instant>, now: Instant) -> bool {
    deadline.is_some_and(|d| now >= d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_timeout_is_seconds_and_anything_else_is_no_limit() {
        let table = [
            (None, None),
            (Some(0.0), Some(Duration::ZERO)),
            (Some(1.5), Some(Duration::from_millis(1500))),
            (Some(-1.0), None),
            (Some(-0.0), Some(Duration::ZERO)),
            (Some(f64::NAN), None),
            (Some(f64::INFINITY), None),
            (Some(1e300), None),
        ];
        for (i, (timeout, want)) in table.into_iter().enumerate() {
            assert_eq!(duration(timeout), want, "row {i}: {timeout:?}");
        }
    }

    #[test]
    fn a_wait_is_cut_into_slices_up_to_its_deadline() {
        let now = Instant::now();
        let ms = Duration::from_millis;
        assert_eq!(deadline(Some(0.25), now), Some(now + ms(250)));
        assert_eq!(deadline(None, now), None);
        assert_eq!(deadline(Some(1e300), now), None);
        let table = [
            (None, ms(0), SLICE, false),
            (Some(ms(250)), ms(0), SLICE, false),
            (Some(ms(250)), ms(200), ms(50), false),
            (Some(ms(250)), ms(250), ms(0), true),
            (Some(ms(250)), ms(400), ms(0), true),
            (Some(ms(0)), ms(0), ms(0), true),
        ];
        assert_eq!(next_slice(None, now, ms(10)), ms(10));
        assert_eq!(next_slice(Some(now + ms(25)), now + ms(20), ms(10)), ms(5));
        for (i, (ends, at, slice, over)) in table.into_iter().enumerate() {
            let d = ends.map(|e| now + e);
            assert_eq!(next_slice(d, now + at, SLICE), slice, "row {i}");
            assert_eq!(passed(d, now + at), over, "row {i}");
        }
    }
}
