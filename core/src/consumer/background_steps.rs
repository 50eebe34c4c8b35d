//! The group steps taken while the application is away from `poll()`: those that need no
//! callback (see [`taken_in_background`](crate::group::step::taken_in_background)).
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::fetch::Shared;
use crate::group::coordinator::GroupDriver;
use crate::group::metadata_snapshot::AssignmentBasis;
use crate::group::rebalance::changes_after_join;
use crate::group::step::join_applies_in_background;

use super::group::{take_step_locked, CallerStep, GroupLocal, JoinSlot, MAX_STEPS_PER_POLL};
use crate::sync::Unpoisoned;

/// Applies a finished join that changes nothing the member owns or learns, without the
/// application; any other is left for `poll()`.
pub(super) fn apply_join_in_background(
    local: &mut GroupLocal,
    driver: &Arc<GroupDriver>,
) -> CallerStep {
    let JoinSlot::Finished(Ok(outcome)) = &local.join else {
        return CallerStep::Done;
    };
    let changes = changes_after_join(
        driver.rebalance_protocol(),
        outcome.protocol,
        &local.owned,
        &outcome.assigned,
    );
    if !join_applies_in_background(&changes, &local.learning, &outcome.learning) {
        return CallerStep::Done;
    }
    let Some(Ok(outcome)) = local.join.take_finished() else {
        return CallerStep::Done;
    };
    tracing::debug!(
        group = %driver.group_id,
        generation = outcome.generation.generation_id,
        "applied a join that changes nothing this member owns while the application is busy"
    );
    local.assignment_basis = AssignmentBasis::after_join(
        outcome.assigned_from,
        local.subscribed.clone(),
        Instant::now(),
    );
    local.assigned_owed = true;
    CallerStep::Again
}

/// How long the background task sleeps when nothing wakes it: a failed join is tried again
/// after its backoff, and the task ends within this of the consumer going away.
const BACKGROUND_IDLE: Duration = Duration::from_secs(1);

/// The group steps that need no callback, taken while the application is away from `poll()`
/// (see [`taken_in_background`](crate::group::step::taken_in_background)). Woken by the heartbeat (a rebalance began) and by finished
/// joins; ends when the consumer or its subscription goes away.
pub(super) async fn run_background_steps(
    group: Weak<Mutex<Option<GroupLocal>>>,
    shared: Arc<Shared>,
    runtime: tokio::runtime::Handle,
    wake: Arc<tokio::sync::Notify>,
) {
    loop {
        let _ = tokio::time::timeout(BACKGROUND_IDLE, wake.notified()).await;
        let Some(group) = group.upgrade() else { return };
        for _ in 0..MAX_STEPS_PER_POLL {
            let mut g = group.lock().unpoisoned();
            let Some(local) = g.as_mut() else { return };
            if !Arc::ptr_eq(&local.background, &wake) {
                return; // unsubscribed and subscribed again: a newer task serves that group
            }
            if local.driver.is_closed() {
                break;
            }
            if local.caller_steps > 0 {
                // The application's steps are under way: their end wakes this task again.
                local.background_due = true;
                break;
            }
            let driver = local.driver.clone();
            match take_step_locked(local, &driver, &shared, &runtime, true) {
                Ok(CallerStep::Again) => continue,
                Ok(_) => break,
                // A fatal join error: never taken here (`taken_in_background`); poll() reports it.
                Err(_) => break,
            }
        }
    }
}
