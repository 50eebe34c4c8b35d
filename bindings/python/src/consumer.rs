//! `Consumer`: the core consumer behind a Python class.
//!
//! Threads and the GIL: every core call that can wait (or take a lock an I/O thread may hold
//! while logging) runs detached from the interpreter. Waiting calls (`poll`, `consume`) wait in
//! slices of 100 ms and check for signals in between, so Ctrl-C interrupts them promptly.
//! Rebalance listener callbacks run inside the core's `poll`/`close`/`unsubscribe` on the
//! calling thread; the Rust listener (`listener.rs`) attaches to the interpreter again to call
//! Python, stashes a Python exception, and the method that ran the core call re-raises it once
//! the core returns.
//!
//! No records are kept here: `poll()`, `consume(n)` and iteration each take from the core exactly
//! the records they return (`poll_at_most`), so the core's positions, `commit()` without
//! offsets, auto-commit and the KIP-333 commit token count only records Python has received,
//! and every call is a poll of the member for `max.poll.interval.ms`.
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use lagless::offsets::OffsetAndMetadata;
use lagless::sync::Unpoisoned;
use lagless::{
    CommitResults, Consumer as CoreConsumer, ConsumerRecord, Error, RebalanceEventListener,
    RebalanceListener,
};
use pyo3::exceptions::{PyStopIteration, PyTypeError};
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyWeakrefReference};
use pyo3::PyTraverseError;

use crate::batch::MessageBatch;
use crate::errors::{to_py, IntoPyResult};
use crate::listener::{callable, stash_error, Callbacks, PyListener, Stash};
use crate::transaction::ConsumerGroupMetadata;
use crate::types::{
    commit_outcome, commit_result_list, extract_partitions, extract_tps, in_given_order,
    partition_list, tp_list, Message, MessageBuilder, TopicPartition, OFFSET_BEGINNING, OFFSET_END,
};
use crate::wait::{duration, next_slice, passed, SLICE};

/// `Consumer::beginning_offsets` or `Consumer::end_offsets` of the core.
type LookupFn = fn(
    &CoreConsumer,
    &[lagless::TopicPartition],
    Option<Duration>,
) -> lagless::Result<Vec<(lagless::TopicPartition, i64)>>;

/// A Kafka consumer. See the package docs and `lagless/_lagless.pyi`.
#[pyclass(module = "lagless._lagless", name = "Consumer", frozen, weakref)]
pub struct Consumer {
    /// Always Some but while dropping.
    inner: Option<CoreConsumer>,
    callbacks: Arc<Mutex<Callbacks>>,
    /// `stats_cb` of the config, shared with the core's statistics callback (and seen by the
    /// garbage collector here).
    stats_cb: Arc<Mutex<Option<Py<PyAny>>>>,
    /// `error_cb` of the config, likewise.
    error_cb: Arc<Mutex<Option<Py<PyAny>>>>,
    stash: Stash,
}

impl Consumer {
    fn core(&self) -> &CoreConsumer {
        self.inner
            .as_ref()
            .expect("the core consumer lives until drop")
    }

    /// Re-raises a callback's exception stashed during the last core call.
    fn raise_stashed(&self) -> PyResult<()> {
        match self.stash.lock().unpoisoned().take() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// A core error as a Python exception; for `Error::Callback`, the callback's own exception.
    fn error(&self, py: Python<'_>, e: Error) -> PyErr {
        if matches!(e, Error::Callback(_)) {
            if let Some(orig) = self.stash.lock().unpoisoned().take() {
                return orig;
            }
        }
        to_py(py, &e)
    }

    /// A core call's result as Python sees it: a core error as its exception (see `error`),
    /// then the exception a callback raised during the call, if any.
    fn check<T>(&self, py: Python<'_>, r: lagless::Result<T>) -> PyResult<T> {
        let v = r.map_err(|e| self.error(py, e))?;
        self.raise_stashed()?;
        Ok(v)
    }

    /// Runs `f` on the core consumer detached from the interpreter; its result as `check` says.
    fn call<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&CoreConsumer) -> lagless::Result<T> + Send,
    ) -> PyResult<T> {
        let core = self.core();
        let r = py.detach(|| f(core));
        self.check(py, r)
    }

    /// Runs `f`, which cannot fail, on the core consumer detached from the interpreter.
    fn read<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&CoreConsumer) -> T + Send) -> T {
        let core = self.core();
        py.detach(|| f(core))
    }

    /// A core operation on a list of partitions (seek_to_*, pause, resume), GIL released.
    fn on_partitions(
        &self,
        py: Python<'_>,
        partitions: &Bound<'_, PyAny>,
        op: fn(&CoreConsumer, &[lagless::TopicPartition]) -> lagless::Result<()>,
    ) -> PyResult<()> {
        let tps = extract_partitions(partitions)?;
        self.call(py, |core| op(core, &tps))
    }

    /// An offset lookup of the core (`beginning_offsets`, `end_offsets`) for the partitions
    /// given, answered as TopicPartitions in the order given.
    fn list_offsets<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
        timeout: Option<f64>,
        lookup: LookupFn,
    ) -> PyResult<Bound<'py, PyList>> {
        let tps = extract_partitions(partitions)?;
        let found = self.call(py, |core| lookup(core, &tps, duration(timeout)))?;
        in_given_order(py, &tps, found)
    }

    /// One poll of the core for up to `max` records (and at most `max.poll.records`), waiting up
    /// to `timeout` (None: without limit) in slices with a check for signals in between. Empty
    /// when the timeout passed. The core counts the records returned as consumed, so they are
    /// always handed to the caller: a callback's exception raised during the poll that returned
    /// them waits for the next call.
    fn poll_records(
        &self,
        py: Python<'_>,
        timeout: Option<Duration>,
        max: usize,
    ) -> PyResult<Vec<ConsumerRecord>> {
        self.raise_stashed()?;
        let core = self.core();
        take_in_slices(
            py,
            timeout,
            |slice| {
                py.detach(|| core.poll_at_most(slice, max))
                    .map_err(|e| self.error(py, e))
            },
            || self.raise_stashed(),
        )
    }

    /// The next record as a `Message`, polled as `poll_records` does; None when the timeout
    /// passed.
    fn poll_message<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<Duration>,
    ) -> PyResult<Option<Bound<'py, Message>>> {
        self.poll_records(py, timeout, 1)?
            .pop()
            .map(|r| MessageBuilder::default().build(py, r))
            .transpose()
    }

    /// Takes the listener and the callables (each checked callable) for the subscription that
    /// `subscribe` makes with a core listener forwarding to them.
    fn set_subscription(
        slf: &Bound<'_, Self>,
        listener: Option<Py<PyAny>>,
        on_assign: Option<Py<PyAny>>,
        on_revoke: Option<Py<PyAny>>,
        on_lost: Option<Py<PyAny>>,
        subscribe: impl FnOnce(&CoreConsumer, Box<dyn RebalanceListener>) -> lagless::Result<()> + Send,
    ) -> PyResult<()> {
        let py = slf.py();
        let this = slf.get();
        let callbacks = Callbacks {
            listener,
            on_assign: callable("on_assign", on_assign, py)?,
            on_revoke: callable("on_revoke", on_revoke, py)?,
            on_lost: callable("on_lost", on_lost, py)?,
        };
        let l = PyListener {
            callbacks: this.callbacks.clone(),
            consumer: PyWeakrefReference::new(slf.as_any())?.unbind(),
            stash: this.stash.clone(),
        };
        let listener = RebalanceEventListener(
            move |_: &CoreConsumer, event, parts: &[lagless::TopicPartition]| {
                l.forward(event, parts)
            },
        );
        this.call(py, |core| subscribe(core, Box::new(listener)))?;
        // Only a subscription that took effect replaces the callbacks: a refused one leaves the
        // subscription in force with its own.
        *this.callbacks.lock().unpoisoned() = callbacks;
        Ok(())
    }
}

#[pymethods]
impl Consumer {
    #[new]
    fn py_new(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (config, cbs) = crate::config::consumer_from_mapping(py, config)?;
        let core = py.detach(|| CoreConsumer::from_config(&config)).py(py)?;
        let stash: Stash = Arc::new(Mutex::new(None));
        let (with_stats, with_errors) = (cbs.stats_cb.is_some(), cbs.error_cb.is_some());
        let stats_cb = Arc::new(Mutex::new(cbs.stats_cb));
        let error_cb = Arc::new(Mutex::new(cbs.error_cb));
        if with_stats {
            core.set_statistics_callback(Some(statistics_callback(
                stats_cb.clone(),
                stash.clone(),
            )));
        }
        if with_errors {
            core.set_error_callback(Some(error_callback(error_cb.clone(), stash.clone())));
        }
        Ok(Consumer {
            inner: Some(core),
            callbacks: Arc::new(Mutex::new(Callbacks::default())),
            stats_cb,
            error_cb,
            stash,
        })
    }

    /// Joins the group `group.id` and reads what the group assigns of `topics`.
    #[pyo3(signature = (topics, listener=None, *, on_assign=None, on_revoke=None, on_lost=None))]
    fn subscribe(
        slf: &Bound<'_, Self>,
        topics: &Bound<'_, PyAny>,
        listener: Option<Py<PyAny>>,
        on_assign: Option<Py<PyAny>>,
        on_revoke: Option<Py<PyAny>>,
        on_lost: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let names: Vec<String> = if let Ok(s) = topics.cast::<PyString>() {
            vec![s.to_string()]
        } else {
            topics
                .try_iter()?
                .map(|t| t?.extract::<String>())
                .collect::<PyResult<_>>()?
        };
        Self::set_subscription(
            slf,
            listener,
            on_assign,
            on_revoke,
            on_lost,
            move |core, lst| {
                let refs: Vec<&str> = names.iter().map(String::as_str).collect();
                core.subscribe(&refs, Some(lst))
            },
        )
    }

    /// Subscribes to every topic whose whole name matches the regular expression `pattern`.
    #[pyo3(signature = (pattern, listener=None, *, on_assign=None, on_revoke=None, on_lost=None))]
    fn subscribe_pattern(
        slf: &Bound<'_, Self>,
        pattern: String,
        listener: Option<Py<PyAny>>,
        on_assign: Option<Py<PyAny>>,
        on_revoke: Option<Py<PyAny>>,
        on_lost: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        Self::set_subscription(
            slf,
            listener,
            on_assign,
            on_revoke,
            on_lost,
            move |core, lst| core.subscribe_pattern(&pattern, Some(lst)),
        )
    }

    /// Subscribes to the topics whose whole name matches `regex`, matched by the group
    /// coordinator (KIP-848's server-side regex, RE2/J; the Java client's
    /// `subscribe(SubscriptionPattern)`). Needs `group.protocol=consumer`.
    #[pyo3(signature = (regex, listener=None, *, on_assign=None, on_revoke=None, on_lost=None))]
    fn subscribe_regex(
        slf: &Bound<'_, Self>,
        regex: String,
        listener: Option<Py<PyAny>>,
        on_assign: Option<Py<PyAny>>,
        on_revoke: Option<Py<PyAny>>,
        on_lost: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        Self::set_subscription(
            slf,
            listener,
            on_assign,
            on_revoke,
            on_lost,
            move |core, lst| core.subscribe_regex(&regex, Some(lst)),
        )
    }

    /// The topics subscribed to (for a pattern, those that matched so far).
    fn subscription(&self, py: Python<'_>) -> Vec<String> {
        self.read(py, CoreConsumer::subscription)
    }

    /// Leaves the group (committing first with auto-commit, revoking through the listener).
    fn unsubscribe(&self, py: Python<'_>) -> PyResult<()> {
        self.call(py, CoreConsumer::unsubscribe)
    }

    /// Reads exactly `partitions` (no group rebalancing). An offset >= 0 in a partition is where
    /// reading starts; OFFSET_BEGINNING / OFFSET_END start at either end; else the committed
    /// offset (with a group.id) or auto.offset.reset decides.
    fn assign(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        let tps = extract_tps(partitions)?;
        self.call(py, |core| {
            let list: Vec<lagless::TopicPartition> = tps.iter().map(|t| t.0.clone()).collect();
            core.assign(&list)?;
            for (tp, offset, _) in &tps {
                match *offset {
                    o if o >= 0 => core.seek(tp, o)?,
                    OFFSET_BEGINNING => core.seek_to_beginning(std::slice::from_ref(tp))?,
                    OFFSET_END => core.seek_to_end(std::slice::from_ref(tp))?,
                    _ => {}
                }
            }
            Ok(())
        })
    }

    /// The partitions currently assigned.
    fn assignment<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        partition_list(py, &self.read(py, CoreConsumer::assignment))
    }

    /// The next message, waiting up to `timeout` seconds (None or negative: without limit);
    /// None when none came in time.
    #[pyo3(signature = (timeout=None))]
    fn poll<'py>(
        &self,
        py: Python<'py>,
        timeout: Option<f64>,
    ) -> PyResult<Option<Bound<'py, Message>>> {
        self.poll_message(py, duration(timeout))
    }

    /// Up to `num_messages` messages (and at most `max.poll.records`): waits up to `timeout`
    /// seconds (negative: without limit) for the first, then takes what is already buffered
    /// without waiting further.
    #[pyo3(signature = (num_messages=1, timeout=-1.0))]
    fn consume<'py>(
        &self,
        py: Python<'py>,
        num_messages: usize,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        if num_messages == 0 {
            return Ok(PyList::empty(py));
        }
        let records = self.poll_records(py, duration(timeout), num_messages)?;
        MessageBuilder::list(py, records)
    }

    /// Up to `num_messages` records (and at most `max.poll.records`) as one `MessageBatch` of
    /// columns: the same poll as `consume()` (waits up to `timeout` seconds, None or negative:
    /// without limit, for the first record, then takes what is buffered), the same positions,
    /// commits and per-partition errors. Empty when the timeout passed.
    #[pyo3(signature = (num_messages=500, timeout=None))]
    fn consume_batch(
        &self,
        py: Python<'_>,
        num_messages: usize,
        timeout: Option<f64>,
    ) -> PyResult<MessageBatch> {
        let records = if num_messages == 0 {
            Vec::new()
        } else {
            self.poll_records(py, duration(timeout), num_messages)?
        };
        MessageBatch::build(py, &records)
    }

    /// `parallel.rebalance.recovery.poll`: up to `num_messages` records of the recovery streams
    /// (and at most `max.poll.records`), for a thread of their own while another thread polls
    /// (whose `poll()`/`consume()` then return main-stream records only). Waits up to `timeout`
    /// seconds (None or negative: without limit) for the first. The messages count as processed,
    /// for every commit, once the same thread calls `recovery_poll()` again. Runs no callbacks; raises
    /// WakeupError after `wakeup()`, ClosedError once closed, IllegalStateError without the
    /// setting.
    #[pyo3(signature = (num_messages=500, timeout=None))]
    fn recovery_poll<'py>(
        &self,
        py: Python<'py>,
        num_messages: usize,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let core = self.core();
        let max = num_messages.max(1);
        // A call that returns nothing hands nothing out.
        let records = take_in_slices(
            py,
            duration(timeout),
            // Not `self.error()`: a callback's stashed exception is the polling thread's to raise.
            |slice| {
                py.detach(|| core.recovery_poll_at_most(slice, max))
                    .map_err(|e| to_py(py, &e))
            },
            || Ok(()),
        )?;
        MessageBuilder::list(py, records)
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// Waits for the next message; the iteration ends when the consumer is closed.
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, Message>> {
        loop {
            match self.poll_message(py, None) {
                Ok(Some(m)) => return Ok(m),
                Ok(None) => {}
                Err(e)
                    if e.value(py)
                        .getattr("name")
                        .is_ok_and(|n| n.eq("CLOSED").unwrap_or(false)) =>
                {
                    return Err(PyStopIteration::new_err(()));
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Commits `offsets` (TopicPartitions whose offset is the next one to read, with their
    /// `metadata`), or a message's offset + 1, or else the positions of everything handed out so
    /// far. A partition's running KIP-333 recovery stream keeps its token instead (see README).
    /// Synchronous commits return the partitions with what was committed (offset, metadata) and
    /// raise if any failed; asynchronous ones return None and call
    /// `callback(error_or_None, partitions)` on the polling thread inside a later call.
    #[pyo3(signature = (offsets=None, asynchronous=false, callback=None, *, message=None))]
    fn commit<'py>(
        &self,
        py: Python<'py>,
        offsets: Option<&Bound<'py, PyAny>>,
        asynchronous: bool,
        callback: Option<Py<PyAny>>,
        message: Option<&Bound<'py, Message>>,
    ) -> PyResult<Option<Bound<'py, PyList>>> {
        let callback = callable("callback", callback, py)?;
        let list: Vec<(lagless::TopicPartition, OffsetAndMetadata)> = match (offsets, message) {
            (Some(_), Some(_)) => {
                return Err(PyTypeError::new_err("give offsets or message, not both"))
            }
            (Some(o), None) => extract_tps(o)?
                .into_iter()
                .map(|(tp, offset, metadata)| {
                    (
                        tp,
                        OffsetAndMetadata {
                            offset,
                            metadata: metadata.unwrap_or_default(),
                        },
                    )
                })
                .collect(),
            (None, Some(m)) => {
                let m = m.get();
                vec![(
                    lagless::TopicPartition::new(m.topic_str(py), m.partition()),
                    OffsetAndMetadata {
                        offset: m.offset() + 1,
                        metadata: String::new(),
                    },
                )]
            }
            (None, None) => self.read(py, CoreConsumer::consumed_offsets),
        };
        if asynchronous {
            let cb: Option<lagless::CommitCallback> = callback.map(|cb| {
                let stash = self.stash.clone();
                Box::new(move |res: lagless::Result<CommitResults>| {
                    Python::attach(|py| {
                        let r = (|| -> PyResult<()> {
                            let (err, tps) = commit_outcome(py, res)?;
                            cb.bind(py).call1((err, tps))?;
                            Ok(())
                        })();
                        if let Err(e) = r {
                            stash_error(&stash, e);
                        }
                    })
                }) as lagless::CommitCallback
            });
            self.call(py, |core| core.commit_async(Some(list), cb))?;
            return Ok(None);
        }
        let results = self.call(py, |core| core.commit_sync_detailed(Some(&list), None))?;
        let (out, first_err) = commit_result_list(py, results);
        if let Some(e) = first_err {
            return Err(e);
        }
        Ok(Some(tp_list(py, out)?))
    }

    /// What `commit()` without offsets would commit now: the positions of everything handed
    /// out (with a running KIP-333 recovery stream, its low-water mark and token as metadata).
    fn _consumed_offsets<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let list = self.read(py, CoreConsumer::consumed_offsets);
        tp_list(
            py,
            list.into_iter()
                .map(|(tp, om)| TopicPartition::committed(&tp, om)),
        )
    }

    /// The group's committed offsets of `partitions` (offset OFFSET_INVALID where none).
    #[pyo3(signature = (partitions, timeout=None))]
    fn committed<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tps = extract_partitions(partitions)?;
        let res = self.call(py, |core| core.committed(&tps, duration(timeout)))?;
        tp_list(
            py,
            res.into_iter().map(|(tp, om)| match om {
                Some(om) => TopicPartition::committed(&tp, om),
                None => TopicPartition::unset(&tp),
            }),
        )
    }

    /// The offset of the next message `poll()` returns for each of `partitions`.
    #[pyo3(signature = (partitions, timeout=None))]
    fn position<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let tps = extract_tps(partitions)?;
        let mut out = Vec::with_capacity(tps.len());
        for (tp, _, _) in tps {
            let offset = self.call(py, |core| core.position(&tp, duration(timeout)))?;
            out.push(TopicPartition::from_core(&tp, offset));
        }
        tp_list(py, out)
    }

    /// KIP-333 (`enable.parallel.rebalance`): whether `partition` has a recovery stream still
    /// draining the backlog it was taken over with. IllegalStateError if it is not assigned.
    fn recovery_active(
        &self,
        py: Python<'_>,
        partition: &Bound<'_, TopicPartition>,
    ) -> PyResult<bool> {
        let tp = partition.borrow().core();
        self.call(py, |core| core.recovery_active(&tp))
    }

    /// What the consumer is doing now, as plain dicts and lists: the fields of the JSON snapshot
    /// README.md's "Metrics" names (`None` where a value is not known yet).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = self.read(py, |core| core.metrics().to_json_string());
        py.import("json")?.call_method1("loads", (json,))
    }

    /// The same snapshot in the Prometheus text exposition format 0.0.4 (`lagless_consumer_*`
    /// metrics; README.md's "Metrics" maps each to its field). `lagless.prometheus` has a
    /// `prometheus_client` collector built on it.
    fn metrics_prometheus(&self, py: Python<'_>) -> String {
        self.read(py, |core| core.metrics().to_prometheus())
    }

    /// KIP-333: whether any assigned partition has a recovery stream still draining a backlog.
    fn child_consumer_is_alive(&self, py: Python<'_>) -> bool {
        self.read(py, CoreConsumer::child_consumer_is_alive)
    }

    /// Moves the next read of `partition.topic`/`partition.partition` to `partition.offset`
    /// (or OFFSET_BEGINNING / OFFSET_END).
    fn seek(&self, py: Python<'_>, partition: &Bound<'_, TopicPartition>) -> PyResult<()> {
        let (tp, offset) = {
            let p = partition.borrow();
            (p.core(), p.offset)
        };
        self.call(py, |core| match offset {
            OFFSET_BEGINNING => core.seek_to_beginning(std::slice::from_ref(&tp)),
            OFFSET_END => core.seek_to_end(std::slice::from_ref(&tp)),
            o => core.seek(&tp, o),
        })
    }

    /// Moves the next read of each of `partitions` (assigned ones; their `.offset` is ignored)
    /// to the log start offset, looked up before the next fetch.
    fn seek_to_beginning(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        self.on_partitions(py, partitions, CoreConsumer::seek_to_beginning)
    }

    /// Moves the next read of each of `partitions` (assigned ones; their `.offset` is ignored)
    /// to the log end, looked up before the next fetch: only records produced after that come.
    fn seek_to_end(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        self.on_partitions(py, partitions, CoreConsumer::seek_to_end)
    }

    /// Stops returning messages of `partitions` until `resume()`.
    fn pause(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        self.on_partitions(py, partitions, CoreConsumer::pause)
    }

    fn resume(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<()> {
        self.on_partitions(py, partitions, CoreConsumer::resume)
    }

    /// Learner assignments with `learner.readiness=explicit`: this member has warmed up for
    /// `partitions` and is ready to own them. Any thread (or an asyncio task) may call it, also
    /// from `on_partitions_learning`; the member rejoins at its next `consume()`/`poll()` so
    /// the group moves them here. Returns how many of them it took as ready (partitions this
    /// member does not learn, any more, are left out).
    fn learner_ready(&self, py: Python<'_>, partitions: &Bound<'_, PyAny>) -> PyResult<usize> {
        let tps = extract_partitions(partitions)?;
        self.call(py, |core| core.learner_ready(&tps))
    }

    /// Scale-down without a stop (learner assignments): this member is about to leave. It
    /// stays and keeps consuming while a learner-sticky group has the members that stay learn
    /// its partitions; each moves once its learner is ready. Keep consuming until
    /// `assignment()` is empty (or a deadline of your own passes), then `close()`. Returns
    /// whether the group assigns with learner-sticky now (if not, `close()` hands over).
    fn prepare_to_leave(&self, py: Python<'_>) -> PyResult<bool> {
        self.call(py, CoreConsumer::prepare_to_leave)
    }

    /// The paused partitions.
    fn paused<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        partition_list(py, &self.read(py, CoreConsumer::paused))
    }

    /// (low, high) watermarks of a partition: log start offset and high watermark.
    #[pyo3(signature = (partition, timeout=None))]
    fn get_watermark_offsets(
        &self,
        py: Python<'_>,
        partition: &Bound<'_, TopicPartition>,
        timeout: Option<f64>,
    ) -> PyResult<(i64, i64)> {
        let tp = partition.borrow().core();
        let w = self.call(py, |core| core.watermarks(&tp, duration(timeout)))?;
        Ok((w.low, w.high))
    }

    /// For each of `partitions`, the earliest offset whose record timestamp is at or after the
    /// partition's `.offset`, read as milliseconds since the epoch (confluent-kafka's convention).
    /// OFFSET_END (-1) where no record is that recent: the broker has no such record, and seeking
    /// there reads from the end. The partitions need not be assigned.
    #[pyo3(signature = (partitions, timeout=None))]
    fn offsets_for_times<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        let query: Vec<(lagless::TopicPartition, i64)> = extract_tps(partitions)?
            .into_iter()
            .map(|(tp, ts, _)| (tp, ts))
            .collect();
        let found = self.call(py, |core| core.offsets_for_times(&query, duration(timeout)))?;
        let tps: Vec<lagless::TopicPartition> = query.into_iter().map(|(tp, _)| tp).collect();
        in_given_order(
            py,
            &tps,
            found
                .into_iter()
                .map(|(tp, hit)| (tp, hit.map_or(OFFSET_END, |(offset, _timestamp)| offset))),
        )
    }

    /// The log start offset of each of `partitions` (the first offset still in the log). The
    /// partitions need not be assigned.
    #[pyo3(signature = (partitions, timeout=None))]
    fn beginning_offsets<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.list_offsets(py, partitions, timeout, CoreConsumer::beginning_offsets)
    }

    /// The high watermark of each of `partitions` (the offset the next record will get). The
    /// partitions need not be assigned.
    #[pyo3(signature = (partitions, timeout=None))]
    fn end_offsets<'py>(
        &self,
        py: Python<'py>,
        partitions: &Bound<'py, PyAny>,
        timeout: Option<f64>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.list_offsets(py, partitions, timeout, CoreConsumer::end_offsets)
    }

    /// The partition ids of `topic`.
    #[pyo3(signature = (topic, timeout=None))]
    fn partitions_for(
        &self,
        py: Python<'_>,
        topic: String,
        timeout: Option<f64>,
    ) -> PyResult<Vec<i32>> {
        self.call(py, |core| core.partitions_for(&topic, duration(timeout)))
    }

    /// The member id in the group, or None before the first join or without a subscription.
    fn member_id(&self, py: Python<'_>) -> Option<String> {
        self.read(py, CoreConsumer::group_metadata)
            .map(|m| m.member_id)
            .filter(|m| !m.is_empty())
    }

    /// The member's place in its group now, for `Producer.send_offsets_to_transaction`: take it
    /// right after the `poll()`/`consume()` that returned the records whose offsets the
    /// transaction sends. IllegalStateError without a subscription.
    fn consumer_group_metadata(&self, py: Python<'_>) -> PyResult<ConsumerGroupMetadata> {
        let inner = self.read(py, CoreConsumer::group_metadata).ok_or_else(|| {
            to_py(
                py,
                &Error::IllegalState("group metadata needs a subscription to a group".into()),
            )
        })?;
        Ok(ConsumerGroupMetadata { inner })
    }

    /// Asks the group for a rebalance, which the next `poll()` starts; `reason` goes into the
    /// log and the JoinGroup request. IllegalStateError without a subscription.
    #[pyo3(signature = (reason=None))]
    fn enforce_rebalance(&self, py: Python<'_>, reason: Option<String>) -> PyResult<()> {
        let reason = reason.unwrap_or_else(|| "requested by the application".to_string());
        self.call(py, |core| core.enforce_rebalance(&reason))
    }

    /// Makes a blocked (or the next) `poll()` raise WakeupError. Safe from any thread.
    fn wakeup(&self, py: Python<'_>) {
        self.read(py, CoreConsumer::wakeup);
    }

    /// Commits (with auto-commit), revokes through the listener, leaves the group and stops,
    /// within `timeout` seconds (default `default.api.timeout.ms`). Later calls raise
    /// ClosedError; closing again does nothing.
    #[pyo3(signature = (timeout=None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        self.call(py, |core| core.close(duration(timeout)))
    }

    fn __enter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> PyResult<()> {
        // None: an exception raised in the `with` block propagates.
        self.close(py, None)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        // Never block in the collector: a callback being called holds the lock only briefly,
        // and skipping one round of traversal is harmless.
        if let Ok(cbs) = self.callbacks.try_lock() {
            visit.call(&cbs.listener)?;
            visit.call(&cbs.on_assign)?;
            visit.call(&cbs.on_revoke)?;
            visit.call(&cbs.on_lost)?;
        }
        if let Ok(cb) = self.stats_cb.try_lock() {
            visit.call(&*cb)?;
        }
        if let Ok(cb) = self.error_cb.try_lock() {
            visit.call(&*cb)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        if let Ok(mut cbs) = self.callbacks.try_lock() {
            *cbs = Callbacks::default();
        }
        if let Ok(mut cb) = self.stats_cb.try_lock() {
            *cb = None;
        }
        if let Ok(mut cb) = self.error_cb.try_lock() {
            *cb = None;
        }
    }
}

/// Calls the Python callable in `slot` (if any) with `args` made under the GIL, on the thread
/// inside the core's `poll`. What it raises is stashed and that poll fails with it, as
/// confluent-kafka's `poll()` raises what its callbacks raised; no record is lost (the core
/// calls its callbacks before taking records). `name` is the config key, for the message.
pub(crate) fn call_python_callback<A>(
    slot: &Mutex<Option<Py<PyAny>>>,
    stash: &Stash,
    name: &str,
    args: impl FnOnce(Python<'_>) -> A,
) -> lagless::Result<()>
where
    A: for<'py> pyo3::call::PyCallArgs<'py>,
{
    Python::attach(|py| {
        let Some(cb) = slot.lock().unpoisoned().as_ref().map(|c| c.clone_ref(py)) else {
            return Ok(());
        };
        cb.call1(py, args(py)).map(drop).map_err(|e| {
            let msg = format!("{name} raised {e}");
            stash_error(stash, e);
            Error::Callback(msg)
        })
    })
}

/// The core's statistics callback for `stats_cb`: the snapshot's JSON as a str.
fn statistics_callback(
    stats_cb: Arc<Mutex<Option<Py<PyAny>>>>,
    stash: Stash,
) -> lagless::StatisticsCallback {
    Box::new(move |m: &lagless::ConsumerMetrics| {
        let json = m.to_json_string();
        call_python_callback(&stats_cb, &stash, "stats_cb", |_| (json,))
    })
}

/// The core's error callback for `error_cb`: each whole-cluster condition as the `LaglessError`
/// subclass of its kind (not raised: handed over, as confluent-kafka's `error_cb` gets a
/// `KafkaError`).
fn error_callback(error_cb: Arc<Mutex<Option<Py<PyAny>>>>, stash: Stash) -> lagless::ErrorCallback {
    Box::new(move |e: &Error| {
        call_python_callback(&error_cb, &stash, "error_cb", |py| {
            (crate::errors::exception(py, &crate::errors::to_py(py, e)),)
        })
    })
}

impl Drop for Consumer {
    /// A consumer collected without `close()` still leaves its group: the core's drop does
    /// that (bounded in time, no callbacks). It waits for the I/O threads, which may want the
    /// GIL to log, so it runs detached.
    fn drop(&mut self) {
        let Some(core) = self.inner.take() else {
            return;
        };
        let mut core = Some(core);
        Python::try_attach(|py| {
            let c = core.take();
            py.detach(move || drop(c))
        });
        // The interpreter is finalizing: log events are dropped by then, nothing to wait for.
        drop(core);
    }
}

/// Waits in slices for what `take` returns (it is given each slice's length), checking for
/// signals (Ctrl-C) between slices; `between` runs after each empty slice. Empty once `timeout`
/// (None: no limit) passed.
fn take_in_slices(
    py: Python<'_>,
    timeout: Option<Duration>,
    mut take: impl FnMut(Duration) -> PyResult<Vec<ConsumerRecord>>,
    mut between: impl FnMut() -> PyResult<()>,
) -> PyResult<Vec<ConsumerRecord>> {
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    loop {
        let records = take(next_slice(deadline, Instant::now(), SLICE))?;
        if !records.is_empty() {
            return Ok(records);
        }
        between()?;
        py.check_signals()?;
        if passed(deadline, Instant::now()) {
            return Ok(Vec::new());
        }
    }
}
