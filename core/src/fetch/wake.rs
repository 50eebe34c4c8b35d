//! When the fetch task plans its next turn with nothing to wake it: the earliest timer of the
//! partitions' states and of the metadata refresh. Everything else that gives a turn something to
//! do wakes it itself (a fetch, lookup, validation or metadata answer; `poll()` making room in a
//! stream's buffer or the budget; a change of the partitions, their positions or their pausing),
//! so an idle consumer's fetch task sleeps from one fetch answer to the next, however many
//! partitions it has, rather than walking them all on a fixed clock.
//!
//! Pure: the fetch task calls [`next_due`] and [`metadata_due`] after each turn and sleeps until
//! the earlier of the two (or until woken).
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use super::plan::Settings;
use super::state::{Activity, PartitionState, Stream};
use crate::types::TopicPartition;

/// The earliest instant after `now` at which a turn planned at `now` would act on a timer of
/// `partitions`: a stream's fetch backoff ends, a position lookup's or a KIP-320 validation's
/// backoff ends, or a stream's KIP-572 deadline falls (`task.timeout.ms` without progress).
/// `None` when no timer is pending. Timers at or before `now` are left out: the turn just
/// planned at `now` acted on them, or what they wait for now is an answer or a change, which
/// wakes the task itself.
///
/// It may name an instant at which the turn finds nothing to do (a deadline of a stream the
/// budget holds back, which KIP-572 does not count): one turn too many costs one walk over the
/// partitions, one too few would leave a backoff or a stuck partition unnoticed.
pub(super) fn next_due(
    partitions: &BTreeMap<TopicPartition, PartitionState>,
    settings: &Settings,
    now: Instant,
) -> Option<Instant> {
    let max_bytes = settings.max_partition_fetch_bytes;
    let stuck_after = settings.stuck_after();
    let mut due: Option<Instant> = None;
    let mut at = |t: Option<Instant>| {
        if let Some(t) = t.filter(|&t| t > now) {
            due = Some(due.map_or(t, |d| d.min(t)));
        }
    };
    for p in partitions.values() {
        // A lookup or a validation waits out the main stream's backoff (paused or not).
        let lookup_waits = p.lookup.is_some() && !p.lookup_in_flight;
        let validation_waits = p.validation.is_some_and(|v| !v.in_flight);
        if lookup_waits || validation_waits {
            at(Some(p.main.next_attempt));
        }
        let idle = |s: &Stream| p.paused || s.buffer_full(max_bytes);
        let main = p.main.activity(
            p.lookup_in_flight || p.validation.is_some_and(|v| v.in_flight),
            idle(&p.main),
            p.lookup.is_some(),
        );
        let mut streams = vec![(&p.main, main)];
        if let Some(r) = &p.recovery {
            streams.push((&r.stream, r.stream.activity(false, idle(&r.stream), false)));
        }
        for (s, activity) in streams {
            // A fetch held back by its backoff alone.
            let fetch_waits = !p.paused
                && p.validation.is_none()
                && s.fetch_offset.is_some()
                && !s.in_flight
                && !s.buffer_full(max_bytes);
            if fetch_waits {
                at(Some(s.next_attempt));
            }
            at(stuck_due(s, activity, stuck_after));
        }
    }
    due
}

/// KIP-572: when `s`, in `activity`, is reported stuck if it makes no progress meanwhile
/// ([`super::state::task_stuck`]); `None` while it is idle.
fn stuck_due(s: &Stream, activity: Activity, stuck_after: Duration) -> Option<Instant> {
    if activity == Activity::Idle {
        return None;
    }
    let since = s
        .stuck_reported_at
        .map_or(s.last_progress, |r| r.max(s.last_progress));
    since.checked_add(stuck_after)
}

/// When the fetch task refreshes the metadata next, if nothing asks for it sooner: at
/// `next_allowed` (the retry backoff after the last refresh) when a refresh is `wanted`, else
/// once the metadata fetched at `fetched_at` is `max_age` old (at once when there is none).
/// `None` while a refresh is `in_flight`: its answer wakes the task. May be at or before `now`
/// only when the caller did not send the refresh due.
pub(super) fn metadata_due(
    wanted: bool,
    in_flight: bool,
    fetched_at: Option<Instant>,
    max_age: Duration,
    next_allowed: Instant,
) -> Option<Instant> {
    if in_flight {
        return None;
    }
    if wanted {
        return Some(next_allowed);
    }
    let aged = match fetched_at {
        Some(t) => t.checked_add(max_age)?,
        None => return Some(next_allowed),
    };
    Some(aged.max(next_allowed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::fetch::plan::tests::{MIB, SETTINGS};
    use crate::fetch::state::{PositionLookup, Recovery, Validation};
    use crate::recovery::{RecoveryRange, RecoveryState};

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn backoff() -> Backoff {
        Backoff::new(ms(100), Duration::from_secs(1))
    }

    /// A partition fetching from offset 10, its clocks all at `t0`: last progress, next attempt.
    fn fetching(t0: Instant) -> PartitionState {
        let mut p = PartitionState::new("orders", PositionLookup::Committed, backoff());
        p.seek(10);
        p.main.last_progress = t0;
        p.main.next_attempt = t0;
        p
    }

    fn due_of(parts: Vec<PartitionState>, now: Instant) -> Option<Instant> {
        let parts: BTreeMap<TopicPartition, PartitionState> = parts
            .into_iter()
            .enumerate()
            .map(|(i, p)| (TopicPartition::new("orders", i as i32), p))
            .collect();
        next_due(&parts, &SETTINGS, now)
    }

    /// One partition per row: how it is set up from [`fetching`] at t0, and when the next turn
    /// is due at t0 + 1 s (as an offset from t0; `None`: no timer).
    #[test]
    fn the_next_turn_is_due_at_the_partitions_earliest_timer() {
        let t0 = Instant::now();
        let now = t0 + ms(1_000);
        type Setup = fn(&mut PartitionState, Instant);
        let deadline = Some(ms(60_000));
        let rows: Vec<(&str, Setup, Option<Duration>)> = vec![
            // In flight: only KIP-572's deadline, a minute after the last progress.
            (
                "a fetch in flight",
                |p, _| p.main.in_flight = true,
                deadline,
            ),
            (
                "in flight, progress 30 s later",
                |p, t0| {
                    p.main.in_flight = true;
                    p.main.last_progress = t0 + ms(30_000);
                },
                Some(ms(90_000)),
            ),
            (
                "reported stuck at 70 s: the next report a minute later",
                |p, t0| {
                    p.main.in_flight = true;
                    p.main.stuck_reported_at = Some(t0 + ms(70_000));
                },
                Some(ms(130_000)),
            ),
            (
                "a failed fetch backs off until 1.2 s",
                |p, t0| {
                    p.main.failing = true;
                    p.main.next_attempt = t0 + ms(1_200);
                },
                Some(ms(1_200)),
            ),
            (
                "a backoff already over is the turn's own business",
                |p, t0| {
                    p.main.failing = true;
                    p.main.next_attempt = t0 + ms(500);
                },
                deadline,
            ),
            (
                "paused: nothing, not even its backoff",
                |p, t0| {
                    p.paused = true;
                    p.main.next_attempt = t0 + ms(1_200);
                },
                None,
            ),
            (
                "paused while failing: still KIP-572's deadline, as the turn counts it",
                |p, t0| {
                    p.paused = true;
                    p.main.failing = true;
                    p.main.next_attempt = t0 + ms(1_200);
                },
                deadline,
            ),
            (
                "its own buffer full: it waits for poll(), which wakes the task",
                |p, _| p.main.buffered_bytes = 2 * MIB,
                None,
            ),
            (
                "a position lookup backing off until 1.3 s, paused or not",
                |p, t0| {
                    p.reset(PositionLookup::Latest);
                    p.paused = true;
                    p.main.next_attempt = t0 + ms(1_300);
                },
                Some(ms(1_300)),
            ),
            (
                "a lookup in flight: its answer wakes the task",
                |p, t0| {
                    p.reset(PositionLookup::Latest);
                    p.lookup_in_flight = true;
                    p.main.next_attempt = t0 + ms(1_300);
                },
                deadline,
            ),
            (
                "a validation backing off until 1.4 s, no fetch meanwhile",
                |p, t0| {
                    p.validation = Some(Validation {
                        leader_epoch: 6,
                        in_flight: false,
                    });
                    p.main.failing = true;
                    p.main.next_attempt = t0 + ms(1_400);
                },
                Some(ms(1_400)),
            ),
            (
                "no position and none wanted (auto.offset.reset=none): idle",
                |p, _| {
                    p.reset(PositionLookup::Latest);
                    p.lookup = None;
                },
                None,
            ),
            (
                "a recovery stream backing off until 1.5 s beside a main stream in flight",
                |p, t0| {
                    p.main.in_flight = true;
                    p.main.last_progress = t0 + ms(5_000);
                    let state = RecoveryState {
                        main_next: 10,
                        ranges: vec![RecoveryRange {
                            start: 0,
                            end: 5,
                            next: 0,
                        }],
                    };
                    let mut r = Recovery::start(state, backoff(), -1).unwrap();
                    r.stream.failing = true;
                    r.stream.next_attempt = t0 + ms(1_500);
                    r.stream.last_progress = t0 + ms(2_000);
                    p.recovery = Some(r);
                },
                Some(ms(1_500)),
            ),
        ];
        for (what, setup, want) in &rows {
            let mut p = fetching(t0);
            setup(&mut p, t0);
            assert_eq!(due_of(vec![p], now), want.map(|d| t0 + d), "{what}");
        }
        // Together: the earliest of them.
        let all = rows
            .iter()
            .map(|(_, setup, _)| {
                let mut p = fetching(t0);
                setup(&mut p, t0);
                p
            })
            .collect();
        assert_eq!(due_of(all, now), Some(t0 + ms(1_200)));
        assert_eq!(due_of(Vec::new(), now), None);
    }

    /// A task.timeout.ms below twice fetch.max.wait.ms counts as twice that
    /// ([`Settings::stuck_after`]): a healthy fetch waiting at the log end is not due sooner.
    #[test]
    fn a_short_task_timeout_is_due_no_sooner_than_a_fetch_may_wait() {
        let t0 = Instant::now();
        let mut p = fetching(t0);
        p.main.in_flight = true;
        let parts = BTreeMap::from([(TopicPartition::new("orders", 0), p)]);
        let settings = Settings {
            task_timeout: ms(100),
            ..SETTINGS
        };
        assert_eq!(next_due(&parts, &settings, t0), Some(t0 + ms(1_000)));
    }

    #[test]
    fn the_metadata_is_due_when_wanted_after_its_backoff_else_once_it_is_old() {
        let t0 = Instant::now();
        let age = Duration::from_secs(300);
        // (wanted, in flight, fetched at, next allowed, due); times as offsets from t0.
        type Row = (bool, bool, Option<u64>, u64, Option<u64>);
        let rows: [Row; 6] = [
            (true, false, Some(0), 100, Some(100)),
            (false, false, Some(0), 100, Some(300_000)),
            (false, false, Some(10_000), 100, Some(310_000)),
            // Never fetched: as soon as allowed.
            (false, false, None, 100, Some(100)),
            // Old already, but the backoff after the last refresh runs on.
            (false, false, Some(0), 400_000, Some(400_000)),
            (true, true, Some(0), 100, None),
        ];
        for (wanted, in_flight, fetched_at, next, want) in rows {
            assert_eq!(
                metadata_due(
                    wanted,
                    in_flight,
                    fetched_at.map(|f| t0 + ms(f)),
                    age,
                    t0 + ms(next)
                ),
                want.map(|w| t0 + ms(w)),
                "wanted {wanted}, in flight {in_flight}, fetched at {fetched_at:?}, next {next}"
            );
        }
    }
}
