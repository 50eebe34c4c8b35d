//! Group steps that found nothing to do, standing for callers that take records one at a time.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::sync::Unpoisoned;

/// How long group steps that found nothing to do stand for a `poll()` or `recv()` that finds
/// records waiting, while the member's state is untouched since. A caller taking one record at a
/// time (the C ABI's `lagless_consumer_poll`, Python's `poll()`, the async stream) would
/// otherwise pay for the steps (locks, clock reads, a blocking wait on the runtime) on every
/// record: measured, 3M records of 100 B through `lagless_consumer_poll` took 3.0-3.4 s of CPU
/// subscribed against 1.4-1.7 s assigned (7.2-8.5 s while each call's steps also woke the
/// background task, `GroupLocal::background_due`). The steps still run at least this often while
/// records flow, before every wait, and after anything touched the member's state (a
/// heartbeat's answer, a finished join, a commit), so a rebalance or a lost generation is
/// acted on as before; the Java client takes them once per `poll()` of up to 500 records.
pub(crate) const IDLE_STEPS_STAND_FOR: Duration = Duration::from_millis(1);

/// Whether group steps that found nothing to do at `idle` (the instant, and the member's
/// state's access count then) still stand at `now`, with the state's access count at
/// `accesses`: less than [`IDLE_STEPS_STAND_FOR`] ago and no access since.
pub(crate) fn idle_steps_stand(idle: Option<(Instant, u64)>, now: Instant, accesses: u64) -> bool {
    idle.is_some_and(|(at, seen)| {
        seen == accesses
            && now
                .checked_duration_since(at)
                .is_some_and(|d| d < IDLE_STEPS_STAND_FOR)
    })
}

/// The last group steps that found nothing to do, for callers that take records one at a time
/// ([`IDLE_STEPS_STAND_FOR`]).
#[derive(Default)]
pub(crate) struct IdleSteps {
    /// Counts every access to the member's state (`GroupDriver::membership`): any of them may
    /// have changed it.
    pub membership_accesses: Arc<AtomicU64>,
    idle: Mutex<Option<(Instant, u64)>>,
    /// Whether `idle` holds steps: read first, so a consumer without a group (or whose steps are
    /// under way) pays one atomic load per call, no lock and no clock read.
    recorded: AtomicBool,
}

impl IdleSteps {
    /// Whether the group steps may be left out at `now` ([`idle_steps_stand`]).
    pub fn stand(&self, now: Instant) -> bool {
        self.recorded.load(Ordering::Acquire) && self.stand_at(now)
    }

    /// [`IdleSteps::stand`] now, reading the clock only when steps are recorded.
    pub fn stand_now(&self) -> bool {
        self.recorded.load(Ordering::Acquire) && self.stand_at(Instant::now())
    }

    fn stand_at(&self, now: Instant) -> bool {
        let idle = *self.idle.lock().unpoisoned();
        idle_steps_stand(idle, now, self.membership_accesses.load(Ordering::Acquire))
    }

    /// Steps begin: until they end having found nothing to do, none stand.
    pub(super) fn clear(&self) {
        self.recorded.store(false, Ordering::Release);
        *self.idle.lock().unpoisoned() = None;
    }

    /// The steps that just ended, at `now`, found nothing to do.
    pub(super) fn found_nothing(&self, now: Instant) {
        let accesses = self.membership_accesses.load(Ordering::Acquire);
        *self.idle.lock().unpoisoned() = Some((now, accesses));
        self.recorded.store(true, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idle_steps_stand_only_briefly_and_while_the_member_s_state_is_untouched() {
        let at = Instant::now();
        let soon = at + IDLE_STEPS_STAND_FOR / 2;
        // No steps found nothing to do yet (or steps are under way): none stand.
        assert!(!idle_steps_stand(None, at, 0));
        assert!(idle_steps_stand(Some((at, 7)), at, 7));
        assert!(idle_steps_stand(Some((at, 7)), soon, 7));
        // Anything that touched the member's state since (a heartbeat's answer, a join).
        assert!(!idle_steps_stand(Some((at, 7)), soon, 8));
        // Too long ago: the steps run again even with nothing touched (timers: auto-commit,
        // a join's retry, metadata changes).
        assert!(!idle_steps_stand(
            Some((at, 7)),
            at + IDLE_STEPS_STAND_FOR,
            7
        ));
        // A clock read before the steps ended: the steps run (the conservative answer).
        assert!(!idle_steps_stand(Some((soon, 7)), at, 7));
    }

    #[test]
    fn steps_that_found_nothing_stand_until_cleared() {
        let idle = IdleSteps::default();
        let at = Instant::now();
        assert!(!idle.stand(at), "no steps recorded");
        idle.found_nothing(at);
        assert!(idle.stand(at));
        idle.membership_accesses.fetch_add(1, Ordering::AcqRel);
        assert!(!idle.stand(at), "the member's state was touched");
        idle.found_nothing(at);
        assert!(idle.stand(at + IDLE_STEPS_STAND_FOR / 2));
        assert!(!idle.stand(at + IDLE_STEPS_STAND_FOR), "too long ago");
        idle.clear();
        assert!(!idle.stand(at), "steps under way");
    }
}
