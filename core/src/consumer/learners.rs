//! Learner assignments on the member's side (`partition.assignment.strategy=learner-sticky`):
//! the partitions this member learns, their warm-up through the listener, the rejoin once it is
//! ready, and leaving by handing its partitions to learners (scale-down).
use std::time::Instant;

use crate::consumer::rebalance_listener::{Callback, Dispatch};
use crate::consumer::Consumer;
use crate::error::{Error, Result};
use crate::group::assignor::assignor_by_name;
use crate::group::group_member::{ready_taken, Event};
use crate::types::TopicPartition;

impl Consumer {
    /// Runs `on_partitions_learning` for `partitions` and tells the member how it went
    /// ([`Event::WarmedUp`]): ready, it rejoins so the group moves them here; not ready (the
    /// callback failed), the error comes out of this `poll()` and a later `poll()` calls it
    /// again after a backoff (KIP-580), so a transient failure does not leave the partitions
    /// with their old owners for good.
    pub(super) async fn warm_up(
        &self,
        d: &mut dyn Dispatch,
        partitions: Vec<TopicPartition>,
        errors: &mut Option<Error>,
    ) {
        let result = d.call(self, Callback::Learning, &partitions).await;
        if let Some(driver) = self.driver() {
            let ok = result.is_none();
            driver
                .with_member(move |m| m.handle(Event::WarmedUp { partitions, ok }, Instant::now()))
                .await;
        }
        if let Some(e) = result {
            errors.get_or_insert(e);
        }
    }

    /// Learner assignments with `learner.readiness=explicit`: says that this member has warmed up
    /// for `partitions` and is ready to own them. May be called from any thread, during or
    /// after `on_partitions_learning`; the member then rejoins (at the next `poll()`, which this
    /// wakes) so the group moves them here. Partitions this member does not learn (any more: a
    /// rebalance may have given them elsewhere meanwhile) are left out; the call returns how
    /// many of `partitions` it took as ready.
    ///
    /// With `learner.readiness=callback` (the default) a partition is ready when its callback
    /// returns `Ok`, and this call only says so earlier.
    pub fn learner_ready(&self, partitions: &[TopicPartition]) -> Result<usize> {
        self.check_open()?;
        let driver = self
            .driver()
            .ok_or_else(|| Error::IllegalState("learner_ready() needs a subscription".into()))?;
        // Counted off the member's view, then told without waiting (the async front calls this
        // from non-async code); the member takes the same partitions, unless a rebalance it
        // heard in between changed what it learns.
        let taken = driver.read_view(|v| ready_taken(&v.learning, &v.ready, partitions));
        if taken == 0 {
            return Ok(0);
        }
        let partitions = partitions.to_vec();
        driver.tell_member(move |m| {
            m.handle(Event::LearnerReady(&partitions), Instant::now());
        });
        tracing::info!(group = %driver.group_id, partitions = taken, "learned partitions reported ready");
        // poll() may be waiting for records: let it take the join step now.
        self.shared.data_ready.notify_all();
        Ok(taken)
    }

    /// Scale-down without a stop (learner assignments): this member is about to leave. It stays
    /// in the group and keeps consuming; it rejoins at once saying it leaves, and a
    /// learner-sticky leader makes its partitions learned partitions of the members that stay.
    /// Each moves (cooperatively: revoked here, committed first as on any revocation) once its
    /// learner is ready. Keep polling until [`Consumer::assignment`] is empty (or a hand-over
    /// deadline of your own passes), then `close()`.
    ///
    /// Returns whether the group assigns with learner-sticky now: if not (a mixed group agreed
    /// on cooperative-sticky, or no generation yet), nobody learns ahead and the partitions stay
    /// until `close()`, which hands them over as any leave does.
    ///
    /// A static member (`group.instance.id`) that prepared to leave sends LeaveGroup on
    /// `close()`, as the Java client's close with `LEAVE_GROUP`: it leaves for good, so the
    /// group does not wait out its session.
    pub fn prepare_to_leave(&self) -> Result<bool> {
        self.check_open()?;
        let driver = self
            .driver()
            .ok_or_else(|| Error::IllegalState("prepare_to_leave() needs a subscription".into()))?;
        // The protocol the group agreed on, not this member's first choice: in a mixed group it
        // may be one that cannot hand over through learners.
        let learner_sticky = driver.read_view(|v| {
            v.generation
                .protocol
                .as_deref()
                .and_then(assignor_by_name)
                .is_some_and(|a| a.hands_over_through_learners())
        });
        if !driver.is_leaving() {
            driver.set_leaving();
            driver.tell_member(|m| {
                m.membership
                    .request_rejoin("the member is leaving: its partitions are handed over first");
            });
        }
        tracing::info!(group = %driver.group_id, learner_sticky, "preparing to leave the group");
        self.shared.data_ready.notify_all();
        Ok(learner_sticky)
    }
}
