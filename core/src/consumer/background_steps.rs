//! The group steps taken while the application is away from `poll()`: those that need no
//! callback (see [`taken_in_background`](crate::group::step::taken_in_background)). A finished
//! join that changes nothing the member owns or learns is applied here too
//! ([`join_applies_in_background`](crate::group::step::join_applies_in_background)), by the
//! member itself.
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::fetch::Shared;
use crate::group::group_member::Effect;

use super::group::{take_step_locked, GroupLocal, MAX_STEPS_PER_POLL};
use crate::sync::Unpoisoned;

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
                Ok(Effect::Again) => continue,
                Ok(_) => break,
                // A fatal join error: never taken here (`taken_in_background`); poll() reports it.
                Err(_) => break,
            }
        }
    }
}
