//! When the background heartbeat (KIP-62) does what, decided from the membership's state, the
//! last `poll()`, the last heartbeats and the time. The loop in `group::coordinator` sleeps a
//! tick, asks [`heartbeat_step`], and carries the answer out; nothing here sends or waits.
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How often a member heartbeats while it expects a follow-up rebalance.
pub(crate) const FOLLOW_UP_HEARTBEAT: Duration = Duration::from_millis(40);
/// How long it does so at most (the follow-up normally starts within a second).
pub(crate) const FOLLOW_UP_WINDOW: Duration = Duration::from_secs(10);

/// An instant that the application's thread writes and the heartbeat reads without a lock
/// (the last `poll()`, the start of a follow-up window), kept as nanoseconds since `origin`
/// plus one, 0 meaning none. Instants before `origin` read as `origin`.
#[derive(Debug)]
pub(crate) struct SharedInstant {
    origin: Instant,
    at: AtomicU64,
}

impl SharedInstant {
    /// Holding `at` (none: `None`), counting from `origin`.
    pub fn new(origin: Instant, at: Option<Instant>) -> SharedInstant {
        let cell = SharedInstant {
            origin,
            at: AtomicU64::new(0),
        };
        cell.set(at);
        cell
    }

    pub fn set(&self, at: Option<Instant>) {
        let encoded = at.map_or(0, |t| {
            let since = t.saturating_duration_since(self.origin).as_nanos();
            u64::try_from(since).unwrap_or(u64::MAX - 1) + 1
        });
        self.at.store(encoded, Ordering::Release);
    }

    pub fn get(&self) -> Option<Instant> {
        match self.at.load(Ordering::Acquire) {
            0 => None,
            n => Some(self.origin + Duration::from_nanos(n - 1)),
        }
    }
}

/// How the last Heartbeat went, as far as scheduling the next one goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeartbeatAnswer {
    /// Answered: the next one is due an interval after this one was sent.
    Ok,
    /// Failed (no answer, a retriable or unexpected error): the next one is due this long after
    /// the answer.
    Retry(Duration),
    /// Answered with an error the member cannot go on from (fenced, not authorized): none is.
    Fatal,
}

/// When the next heartbeat of a member in a generation is due (`None`: never again), from when
/// the last one was sent and how and when it was answered (both `None` when the member has not
/// heartbeated in this generation yet). As the Java client, an answered heartbeat's interval
/// runs from when it was sent; a failed one is retried after its backoff from the answer.
pub(crate) fn next_heartbeat(
    interval: Duration,
    last_sent: Option<Instant>,
    last_answer: Option<(Instant, HeartbeatAnswer)>,
    now: Instant,
) -> Option<Instant> {
    match (last_sent, last_answer) {
        (_, Some((_, HeartbeatAnswer::Fatal))) => None,
        (Some(sent), Some((_, HeartbeatAnswer::Ok))) => Some(sent + interval),
        (_, Some((at, HeartbeatAnswer::Retry(wait)))) => Some(at + wait),
        _ => Some(now),
    }
}

/// After the coordinator moves a KIP-848 member's epoch, its heartbeat interval is the time
/// since the move divided by this (never under [`FOLLOW_UP_HEARTBEAT`]) ...
const SETTLING_DIVISOR: u32 = 8;
/// ... for this many heartbeat intervals: the old owner of a partition the member was given hears
/// of the move at its own next heartbeat, up to one interval later, and releases it then.
const SETTLING_INTERVALS: u32 = 2;

/// The heartbeat interval in force: `heartbeat.interval.ms`, shortened while the member expects
/// to hear of a change soon:
/// - [`FOLLOW_UP_HEARTBEAT`] while a follow-up rebalance is expected (since `follow_up_since`,
///   for at most [`FOLLOW_UP_WINDOW`]), so that the member notices it in tens of milliseconds
///   and the partitions in transit are without an owner that much less;
/// - under KIP-848, for two intervals after the coordinator last moved the member's epoch
///   (`epoch_moved_at`), an eighth of the time since the move, never under
///   [`FOLLOW_UP_HEARTBEAT`]. A member whose epoch moved may have been given partitions that
///   another member still has to release; the coordinator says so only in the answer to a
///   later heartbeat. The old owner releases them once its own next heartbeat tells it to (up to
///   an interval after the move, at a moment nobody can predict); beats 40 ms apart up to 320 ms
///   after the move, then each an eighth later than the last, hear of a release at most an
///   eighth of its delay late (40 ms at least): 16 heartbeats in the two intervals after a move
///   where the interval is 500 ms (33 where it is the broker's default 5 s) instead of two.
///   Java's client and librdkafka wait for the regular heartbeat (up to an interval).
pub(crate) fn heartbeat_interval(
    configured: Duration,
    follow_up_since: Option<Instant>,
    epoch_moved_at: Option<Instant>,
    now: Instant,
) -> Duration {
    let mut interval = configured;
    if let Some(since) = follow_up_since {
        if now.saturating_duration_since(since) < FOLLOW_UP_WINDOW {
            interval = interval.min(FOLLOW_UP_HEARTBEAT);
        }
    }
    if let Some(moved) = epoch_moved_at {
        let since = now.saturating_duration_since(moved);
        if since < configured * SETTLING_INTERVALS {
            interval = interval.min((since / SETTLING_DIVISOR).max(FOLLOW_UP_HEARTBEAT));
        }
    }
    interval
}

/// The heartbeat interval a member keeps to before any follow-up: under KIP-848 the one the
/// coordinator gave in its last answer (`group.consumer.heartbeat.interval.ms`; the client's own
/// `heartbeat.interval.ms` is refused with that protocol), as the Java client keeps to it, else
/// `heartbeat.interval.ms`.
pub(crate) fn interval_in_force(coordinator: Option<Duration>, configured: Duration) -> Duration {
    coordinator.unwrap_or(configured)
}

/// The member's liveness settings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Liveness {
    pub heartbeat_interval: Duration,
    pub session_timeout: Duration,
    pub max_poll_interval: Duration,
}

/// What the heartbeat loop knows between ticks.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeartbeatClock {
    /// The last successful heartbeat (or when the member entered its generation).
    pub last_ok: Instant,
    pub last_sent: Option<Instant>,
    pub last_answer: Option<(Instant, HeartbeatAnswer)>,
}

impl HeartbeatClock {
    pub fn new(now: Instant) -> HeartbeatClock {
        HeartbeatClock {
            last_ok: now,
            last_sent: None,
            last_answer: None,
        }
    }
}

/// What the heartbeat loop does on one tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeartbeatStep {
    /// The member is in no generation: nothing to send; the clock starts afresh.
    NotInGeneration,
    /// `poll()` was not called for `max.poll.interval.ms`: the member leaves its generation.
    PollTimeoutExpired,
    /// `session_lost`: no heartbeat succeeded for `session.timeout.ms`; as the Java client, the
    /// coordinator is found again (the session may be gone on the broker) rather than leaving,
    /// and the clock's `last_ok` restarts. `send`: a heartbeat is due now.
    Tick { session_lost: bool, send: bool },
}

/// What shortens the heartbeat interval for a while ([`heartbeat_interval`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Hurry {
    /// A follow-up rebalance is expected since then.
    pub follow_up_since: Option<Instant>,
    /// KIP-848: the coordinator last moved the member's epoch then.
    pub epoch_moved_at: Option<Instant>,
}

impl Hurry {
    /// The interval in force at `now` for a member configured with `configured`.
    pub fn interval(&self, configured: Duration, now: Instant) -> Duration {
        heartbeat_interval(configured, self.follow_up_since, self.epoch_moved_at, now)
    }
}

/// One tick of the heartbeat loop.
pub(crate) fn heartbeat_step(
    heartbeats_enabled: bool,
    last_poll: Instant,
    clock: &HeartbeatClock,
    hurry: Hurry,
    liveness: &Liveness,
    now: Instant,
) -> HeartbeatStep {
    if !heartbeats_enabled {
        return HeartbeatStep::NotInGeneration;
    }
    if now.saturating_duration_since(last_poll) > liveness.max_poll_interval {
        return HeartbeatStep::PollTimeoutExpired;
    }
    let session_lost = now.saturating_duration_since(clock.last_ok) > liveness.session_timeout;
    let interval = hurry.interval(liveness.heartbeat_interval, now);
    let send = next_heartbeat(interval, clock.last_sent, clock.last_answer, now)
        .is_some_and(|due| due <= now);
    HeartbeatStep::Tick { session_lost, send }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_instant_reads_what_was_written() {
        let origin = Instant::now();
        let later = origin + Duration::from_millis(1_234);
        let cell = SharedInstant::new(origin, None);
        assert_eq!(cell.get(), None);
        cell.set(Some(later));
        assert_eq!(cell.get(), Some(later));
        cell.set(Some(origin));
        assert_eq!(cell.get(), Some(origin), "the origin itself is not none");
        cell.set(None);
        assert_eq!(cell.get(), None);
        let before = origin.checked_sub(Duration::from_secs(1));
        if let Some(before) = before {
            cell.set(Some(before));
            assert_eq!(
                cell.get(),
                Some(origin),
                "earlier instants read as the origin"
            );
        }
        assert_eq!(SharedInstant::new(origin, Some(later)).get(), Some(later));
    }

    const MS: Duration = Duration::from_millis(1);

    fn liveness() -> Liveness {
        Liveness {
            heartbeat_interval: 3000 * MS,
            session_timeout: 10_000 * MS,
            max_poll_interval: 300_000 * MS,
        }
    }

    #[test]
    fn the_first_heartbeat_of_a_generation_is_due_at_once() {
        let now = Instant::now();
        assert_eq!(next_heartbeat(3000 * MS, None, None, now), Some(now));
        assert_eq!(
            heartbeat_step(
                true,
                now,
                &HeartbeatClock::new(now),
                Hurry::default(),
                &liveness(),
                now
            ),
            HeartbeatStep::Tick {
                session_lost: false,
                send: true
            }
        );
    }

    #[test]
    fn an_answered_heartbeat_is_followed_an_interval_after_it_was_sent() {
        let t0 = Instant::now();
        let answered = Some((t0 + 40 * MS, HeartbeatAnswer::Ok));
        assert_eq!(
            next_heartbeat(3000 * MS, Some(t0), answered, t0 + 50 * MS),
            Some(t0 + 3000 * MS)
        );
        let clock = HeartbeatClock {
            last_ok: t0 + 40 * MS,
            last_sent: Some(t0),
            last_answer: answered,
        };
        let at = |ms: u32| {
            heartbeat_step(
                true,
                t0,
                &clock,
                Hurry::default(),
                &liveness(),
                t0 + ms * MS,
            )
        };
        assert!(matches!(at(2999), HeartbeatStep::Tick { send: false, .. }));
        assert!(matches!(at(3000), HeartbeatStep::Tick { send: true, .. }));
    }

    #[test]
    fn a_failed_heartbeat_is_retried_after_its_backoff_from_the_answer() {
        let t0 = Instant::now();
        let failed = Some((t0 + 40 * MS, HeartbeatAnswer::Retry(200 * MS)));
        assert_eq!(
            next_heartbeat(3000 * MS, Some(t0), failed, t0 + 50 * MS),
            Some(t0 + 240 * MS)
        );
    }

    #[test]
    fn after_a_fatal_answer_no_heartbeat_is_ever_due() {
        let t0 = Instant::now();
        let fatal = Some((t0 + 40 * MS, HeartbeatAnswer::Fatal));
        for later in [0u32, 50, 3000, 600_000] {
            assert_eq!(
                next_heartbeat(3000 * MS, Some(t0), fatal, t0 + later * MS),
                None,
                "{later} ms later"
            );
        }
    }

    #[test]
    fn a_member_in_no_generation_sends_nothing_whatever_the_clock_says() {
        let t0 = Instant::now();
        let long_ago = HeartbeatClock::new(t0);
        let later = t0 + 600_000 * MS;
        assert_eq!(
            heartbeat_step(false, t0, &long_ago, Hurry::default(), &liveness(), later),
            HeartbeatStep::NotInGeneration
        );
    }

    #[test]
    fn the_poll_interval_passing_ends_the_generation_before_any_heartbeat() {
        let t0 = Instant::now();
        let clock = HeartbeatClock::new(t0);
        let at = |ms: u32| {
            heartbeat_step(
                true,
                t0,
                &clock,
                Hurry::default(),
                &liveness(),
                t0 + ms * MS,
            )
        };
        assert!(matches!(at(300_000), HeartbeatStep::Tick { .. }));
        assert_eq!(at(300_001), HeartbeatStep::PollTimeoutExpired);
    }

    #[test]
    fn a_session_without_a_successful_heartbeat_rediscovers_the_coordinator() {
        let t0 = Instant::now();
        let clock = HeartbeatClock {
            last_ok: t0,
            last_sent: Some(t0 + 9000 * MS),
            last_answer: Some((t0 + 9100 * MS, HeartbeatAnswer::Retry(1000 * MS))),
        };
        let at = |ms: u32| {
            heartbeat_step(
                true,
                t0 + ms * MS,
                &clock,
                Hurry::default(),
                &liveness(),
                t0 + ms * MS,
            )
        };
        assert_eq!(
            at(10_000),
            HeartbeatStep::Tick {
                session_lost: false,
                send: false
            }
        );
        assert_eq!(
            at(10_101),
            HeartbeatStep::Tick {
                session_lost: true,
                send: true
            }
        );
    }

    #[test]
    fn the_coordinator_s_interval_is_kept_to_when_it_gave_one() {
        // The broker's default 5 s is kept to, not the client's default 3 s (which KIP-848
        // refuses to be set), and a shorter one as well.
        assert_eq!(interval_in_force(Some(5000 * MS), 3000 * MS), 5000 * MS);
        assert_eq!(interval_in_force(Some(500 * MS), 3000 * MS), 500 * MS);
        assert_eq!(interval_in_force(None, 3000 * MS), 3000 * MS);
    }

    #[test]
    fn a_follow_up_rebalance_shortens_the_interval_for_a_while() {
        let t0 = Instant::now();
        assert_eq!(heartbeat_interval(3000 * MS, None, None, t0), 3000 * MS);
        assert_eq!(
            heartbeat_interval(3000 * MS, Some(t0), None, t0 + 50 * MS),
            FOLLOW_UP_HEARTBEAT
        );
        assert_eq!(
            heartbeat_interval(30 * MS, Some(t0), None, t0),
            30 * MS,
            "never slower than configured"
        );
        assert_eq!(
            heartbeat_interval(3000 * MS, Some(t0), None, t0 + FOLLOW_UP_WINDOW),
            3000 * MS,
            "the window closes"
        );
        let clock = HeartbeatClock {
            last_ok: t0,
            last_sent: Some(t0),
            last_answer: Some((t0 + 5 * MS, HeartbeatAnswer::Ok)),
        };
        assert!(matches!(
            heartbeat_step(
                true,
                t0,
                &clock,
                Hurry {
                    follow_up_since: Some(t0),
                    epoch_moved_at: None
                },
                &liveness(),
                t0 + 100 * MS
            ),
            HeartbeatStep::Tick { send: true, .. }
        ));
        assert!(matches!(
            heartbeat_step(
                true,
                t0,
                &clock,
                Hurry::default(),
                &liveness(),
                t0 + 100 * MS
            ),
            HeartbeatStep::Tick { send: false, .. }
        ));
    }

    /// The milliseconds (after `t0`) at which a member heartbeats in its first `until` ms,
    /// ticking every millisecond from a heartbeat sent and answered at `t0`, each answered at
    /// once.
    fn beats_sent(t0: Instant, hurry: Hurry, live: &Liveness, until: u32) -> Vec<u32> {
        let mut clock = HeartbeatClock {
            last_ok: t0,
            last_sent: Some(t0),
            last_answer: Some((t0, HeartbeatAnswer::Ok)),
        };
        let mut beats = Vec::new();
        for ms in 1..=until {
            let now = t0 + ms * MS;
            if let HeartbeatStep::Tick { send: true, .. } =
                heartbeat_step(true, now, &clock, hurry, live, now)
            {
                beats.push(ms);
                clock.last_sent = Some(now);
                clock.last_answer = Some((now, HeartbeatAnswer::Ok));
                clock.last_ok = now;
            }
        }
        beats
    }

    #[test]
    fn after_the_coordinator_moves_the_epoch_the_heartbeats_come_sooner_then_space_out() {
        let t0 = Instant::now();
        let moved = |ms: u32| heartbeat_interval(500 * MS, None, Some(t0), t0 + ms * MS);
        assert_eq!(
            moved(0),
            FOLLOW_UP_HEARTBEAT,
            "never under the follow-up pace"
        );
        assert_eq!(moved(320), FOLLOW_UP_HEARTBEAT);
        assert_eq!(moved(400), 50 * MS, "an eighth of the time since the move");
        assert_eq!(moved(999), 124 * MS + 875 * Duration::from_micros(1));
        assert_eq!(
            moved(1000),
            500 * MS,
            "two intervals after the move, the interval"
        );
        assert_eq!(
            heartbeat_interval(30 * MS, None, Some(t0), t0),
            30 * MS,
            "never longer than the interval in force"
        );
        // The beats a member sends after a move, ticking every millisecond from an answered
        // heartbeat at the move: 16 beats in the first two intervals of 500 ms, then every 500 ms.
        let hurry = Hurry {
            follow_up_since: None,
            epoch_moved_at: Some(t0),
        };
        let mut live = liveness();
        live.heartbeat_interval = 500 * MS;
        assert_eq!(
            beats_sent(t0, hurry, &live, 2000),
            [
                40, 80, 120, 160, 200, 240, 280, 320, 366, 419, 479, 548, 627, 717, 820, 938, 1438,
                1938
            ]
        );
        // Without the move, the interval alone.
        let beats = beats_sent(t0, Hurry::default(), &live, 1500);
        assert_eq!(beats, [500, 1000, 1500]);
    }
}
