//! The C rebalance callbacks of a consumer: which one serves which event, and the core listener
//! that calls them (on the thread that polls, closes or unsubscribes, inside that call).
use std::sync::{Arc, Mutex};

use lagless::sync::Unpoisoned;
use lagless::{
    Consumer, Error, RebalanceEvent, RebalanceEventListener, RebalanceListener, Result,
    TopicPartition,
};

use crate::boundary::Opaque;
use crate::cast::{to_ref, try_from};
use crate::consumer::{
    lagless_consumer, lagless_rebalance_cb, lagless_rebalance_listener, CConsumer,
};
use crate::tplist::TpList;

/// The C callbacks of a consumer: the listener of the current subscription and the learning
/// callback, which is set on its own so `lagless_rebalance_listener` keeps its layout.
#[derive(Clone, Copy)]
pub(crate) struct CCallbacks {
    opaque: Opaque,
    on_assigned: lagless_rebalance_cb,
    on_revoked: lagless_rebalance_cb,
    on_lost: lagless_rebalance_cb,
    pub(crate) on_learning: lagless_rebalance_cb,
    pub(crate) learning_opaque: Opaque,
}

impl Default for CCallbacks {
    fn default() -> Self {
        CCallbacks {
            opaque: Opaque(std::ptr::null_mut()),
            on_assigned: None,
            on_revoked: None,
            on_lost: None,
            on_learning: None,
            learning_opaque: Opaque(std::ptr::null_mut()),
        }
    }
}

/// The callback that serves `event` (None: no callback set for it), with the name its errors
/// give it and its opaque pointer: the one place that says which callback serves which event.
fn route(cbs: &CCallbacks, event: RebalanceEvent) -> (&'static str, lagless_rebalance_cb, Opaque) {
    match event {
        RebalanceEvent::Assigned => ("on_assigned", cbs.on_assigned, cbs.opaque),
        RebalanceEvent::Revoked => ("on_revoked", cbs.on_revoked, cbs.opaque),
        // As the Java client: lost partitions go to "revoked" unless told apart.
        RebalanceEvent::Lost if cbs.on_lost.is_some() => ("on_lost", cbs.on_lost, cbs.opaque),
        RebalanceEvent::Lost => ("on_revoked", cbs.on_revoked, cbs.opaque),
        RebalanceEvent::Learning => ("learning", cbs.on_learning, cbs.learning_opaque),
    }
}

/// What the core's listener forwards every rebalance event to; it reads the consumer's callbacks
/// at each call, so a learning callback set after `lagless_consumer_subscribe` is seen.
struct CListener {
    callbacks: Arc<Mutex<CCallbacks>>,
    handle: *mut lagless_consumer,
}

// SAFETY: the core calls the listener only on the thread that called poll/close/unsubscribe,
// which is the C caller's own thread; the handle pointer is the consumer the listener lives in.
unsafe impl Send for CListener {}

impl CListener {
    /// Calls the C callback `route` chose for `event`, lending it the partitions.
    fn forward(&self, event: RebalanceEvent, parts: &[TopicPartition]) -> Result<()> {
        // No lock is held while a callback runs, so it may set the learning callback or
        // subscribe again.
        let cbs = *self.callbacks.lock().unpoisoned();
        let (which, cb, opaque) = route(&cbs, event);
        let Some(cb) = cb else { return Ok(()) };
        let list = TpList::from_partitions(parts.iter().cloned());
        // SAFETY: a C function pointer the caller gave us, called with the caller's opaque
        // pointer, the live consumer and a list that outlives the call.
        let rc = unsafe { cb(opaque.0, self.handle, to_ref(&list)) };
        if rc == 0 {
            Ok(())
        } else {
            Err(Error::Callback(format!(
                "the {which} callback returned {rc}"
            )))
        }
    }
}

impl CConsumer {
    /// Subscribes through `subscribe` with a core listener that reads this handle's callbacks,
    /// then takes the C listener's callbacks (NULL keeps the earlier ones). The core always holds
    /// such a listener, so the learning callback works with or without a C listener.
    pub(crate) fn subscribe_with(
        &self,
        handle: *mut lagless_consumer,
        listener: *const lagless_rebalance_listener,
        subscribe: impl FnOnce(Option<Box<dyn RebalanceListener>>) -> Result<()>,
    ) -> Result<()> {
        let c_callbacks = CListener {
            callbacks: self.callbacks.clone(),
            handle,
        };
        subscribe(Some(Box::new(RebalanceEventListener(
            move |_: &Consumer, event, parts: &[TopicPartition]| c_callbacks.forward(event, parts),
        ))))?;
        if let Some(l) = try_from(listener) {
            let mut cbs = self.callbacks.lock().unpoisoned();
            cbs.opaque = Opaque(l.opaque);
            cbs.on_assigned = l.on_assigned;
            cbs.on_revoked = l.on_revoked;
            cbs.on_lost = l.on_lost;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tplist::lagless_tplist;
    use std::ffi::{c_int, c_void};

    unsafe extern "C" fn a(
        _: *mut c_void,
        _: *mut lagless_consumer,
        _: *const lagless_tplist,
    ) -> c_int {
        1
    }
    unsafe extern "C" fn b(
        _: *mut c_void,
        _: *mut lagless_consumer,
        _: *const lagless_tplist,
    ) -> c_int {
        2
    }

    fn opaque(n: usize) -> Opaque {
        Opaque(n as *mut c_void)
    }

    /// Which callback (by what it returns) and which opaque pointer serve each event.
    fn routed(cbs: &CCallbacks, event: RebalanceEvent) -> (&'static str, Option<i32>, usize) {
        let (which, cb, o) = route(cbs, event);
        // SAFETY: the test callbacks read none of their arguments.
        let rc = cb
            .map(|cb| unsafe { cb(std::ptr::null_mut(), std::ptr::null_mut(), std::ptr::null()) });
        (which, rc, o.0 as usize)
    }

    #[test]
    fn each_event_goes_to_its_callback_and_lost_falls_back_to_revoked() {
        let listener_only = CCallbacks {
            opaque: opaque(10),
            on_assigned: Some(a),
            on_revoked: Some(b),
            learning_opaque: opaque(20),
            ..CCallbacks::default()
        };
        let all = CCallbacks {
            on_lost: Some(a),
            on_learning: Some(b),
            ..listener_only
        };
        use RebalanceEvent::*;
        let table = [
            (&listener_only, Assigned, ("on_assigned", Some(1), 10)),
            (&listener_only, Revoked, ("on_revoked", Some(2), 10)),
            (&listener_only, Lost, ("on_revoked", Some(2), 10)),
            (&listener_only, Learning, ("learning", None, 20)),
            (&all, Lost, ("on_lost", Some(1), 10)),
            (&all, Learning, ("learning", Some(2), 20)),
            (&CCallbacks::default(), Assigned, ("on_assigned", None, 0)),
        ];
        for (i, (cbs, event, want)) in table.into_iter().enumerate() {
            assert_eq!(routed(cbs, event), want, "row {i}");
        }
    }
}
