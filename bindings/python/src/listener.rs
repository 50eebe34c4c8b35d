//! The Python side of rebalance callbacks: the listener object and callables of a
//! subscription, and the core listener that calls them (on the thread inside the core's
//! `poll`/`close`/`unsubscribe`, attached to the interpreter again) and stashes what they raise
//! for the consumer method that ran the core call to raise.
use std::sync::{Arc, Mutex};

use lagless::sync::Unpoisoned;
use lagless::{Error, RebalanceEvent};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::PyWeakrefReference;

use crate::types::partition_list;

/// The Python callables of the current subscription. Shared between the class (for the garbage
/// collector) and the Rust listener the core holds.
#[derive(Default)]
pub(crate) struct Callbacks {
    pub(crate) listener: Option<Py<PyAny>>,
    pub(crate) on_assign: Option<Py<PyAny>>,
    pub(crate) on_revoke: Option<Py<PyAny>>,
    pub(crate) on_lost: Option<Py<PyAny>>,
}

/// The first Python exception raised by a callback since the last core call returned.
pub(crate) type Stash = Arc<Mutex<Option<PyErr>>>;

pub(crate) fn stash_error(stash: &Stash, err: PyErr) {
    let mut s = stash.lock().unpoisoned();
    if s.is_none() {
        *s = Some(err);
    }
}

pub(crate) struct PyListener {
    pub(crate) callbacks: Arc<Mutex<Callbacks>>,
    /// The Python `Consumer`, weakly: a strong reference from inside the core would keep the
    /// consumer alive forever (a cycle the garbage collector cannot see).
    pub(crate) consumer: Py<PyWeakrefReference>,
    pub(crate) stash: Stash,
}

impl PyListener {
    /// Forwards one rebalance event to the listener object's method of the same name and to the
    /// callable given for it: the one place that says which Python code serves which event.
    pub(crate) fn forward(
        &self,
        event: RebalanceEvent,
        partitions: &[lagless::TopicPartition],
    ) -> lagless::Result<()> {
        Python::attach(|py| {
            let result = (|| -> PyResult<()> {
                let (method, callable) = {
                    let cbs = self.callbacks.lock().unpoisoned();
                    let callable = match event {
                        RebalanceEvent::Assigned => cbs.on_assign.as_ref(),
                        RebalanceEvent::Revoked => cbs.on_revoke.as_ref(),
                        // As the Java client: lost partitions go to "revoked" unless told apart.
                        RebalanceEvent::Lost => cbs.on_lost.as_ref().or(cbs.on_revoke.as_ref()),
                        RebalanceEvent::Learning => None,
                    };
                    (
                        cbs.listener.as_ref().map(|l| l.clone_ref(py)),
                        callable.map(|c| c.clone_ref(py)),
                    )
                };
                let consumer = self
                    .consumer
                    .bind(py)
                    .upgrade()
                    .unwrap_or_else(|| py.None().into_bound(py));
                let list = || partition_list(py, partitions);
                if let Some(l) = method {
                    let l = l.bind(py);
                    let name = event.method_name();
                    // The learning method is optional: a listener without it is ready at once.
                    if event != RebalanceEvent::Learning || l.hasattr(name)? {
                        l.call_method1(name, (consumer.clone(), list()?))?;
                    }
                }
                if let Some(c) = callable {
                    c.bind(py).call1((consumer, list()?))?;
                }
                Ok(())
            })();
            result.map_err(|e| {
                let msg = e.to_string();
                stash_error(&self.stash, e);
                Error::Callback(msg)
            })
        })
    }
}

/// `obj` if it is None or callable; a TypeError naming the argument `name` otherwise.
pub(crate) fn callable(
    name: &str,
    obj: Option<Py<PyAny>>,
    py: Python<'_>,
) -> PyResult<Option<Py<PyAny>>> {
    match obj {
        Some(o) if !o.bind(py).is_callable() => {
            Err(PyTypeError::new_err(format!("{name} must be callable")))
        }
        o => Ok(o),
    }
}
