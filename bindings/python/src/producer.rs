//! `Producer`: the core producer behind a Python class.
//!
//! Delivery callbacks never run on the producer's I/O threads: the core's completion only
//! queues the outcome, and `poll()` / `flush()` call the callbacks on the caller's thread. The
//! config's `stats_cb` and `error_cb` run there too, from the core's `serve_callbacks`.
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lagless::config::ProducerConfig;
use lagless::sync::Unpoisoned;
use lagless::{Error, Producer as CoreProducer, ProducerRecord, RecordMetadata};
use pyo3::exceptions::PyTypeError;
use pyo3::gc::PyVisit;
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyString};
use pyo3::PyTraverseError;

use crate::consumer::call_python_callback;
use crate::errors::{exception, to_py, IntoPyResult};
use crate::listener::Stash;
use crate::transaction::{transaction_offsets, txn_timeout, ConsumerGroupMetadata};
use crate::types::extract_tps;
use crate::wait::{deadline, duration, next_slice, passed, SLICE};

type Outcome = (Py<PyAny>, lagless::Result<RecordMetadata>);

/// A Kafka producer. See `lagless/_lagless.pyi`.
#[pyclass(module = "lagless._lagless", name = "Producer", frozen)]
pub struct Producer {
    inner: Option<CoreProducer>,
    delivered: Arc<Mutex<Vec<Outcome>>>,
    /// A file descriptor (a socket or pipe the application reads, -1 for none) that gets a byte
    /// whenever a delivery outcome is queued while none was: how `lagless.aio` wakes its event
    /// loop to run the delivery callbacks without a thread waiting for them.
    notify_fd: Arc<AtomicI64>,
    /// The transactional calls' timeout when none is given, as in C.
    delivery_timeout: Duration,
    /// `stats_cb` of the config, shared with the core's statistics callback.
    stats_cb: Arc<Mutex<Option<Py<PyAny>>>>,
    /// `error_cb` of the config, likewise.
    error_cb: Arc<Mutex<Option<Py<PyAny>>>>,
    /// What `stats_cb` or `error_cb` raised, for the `poll()` or `flush()` that ran it to raise.
    stash: Stash,
}

/// Writes one byte to `fd` (non-blocking on the application's side; a full buffer means a
/// wake-up is pending already, so errors are ignored). Touches no Python object.
#[cfg(unix)]
fn notify(fd: i64) {
    use std::io::Write;
    use std::os::fd::FromRawFd;
    if fd < 0 {
        return;
    }
    // SAFETY: the descriptor stays owned by the application (ManuallyDrop: never closed here);
    // `_set_delivery_fd(None)` is called before the application closes it.
    let f = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd as i32) });
    let _ = (&*f).write(&[1u8]);
}

#[cfg(not(unix))]
fn notify(_fd: i64) {}

fn payload(name: &str, v: Option<&Bound<'_, PyAny>>) -> PyResult<Option<Bytes>> {
    let Some(v) = v else { return Ok(None) };
    if v.is_none() {
        return Ok(None);
    }
    if let Ok(b) = v.cast::<PyBytes>() {
        return Ok(Some(Bytes::copy_from_slice(b.as_bytes())));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Some(Bytes::copy_from_slice(s.to_cow()?.as_bytes())));
    }
    if let Ok(b) = v.cast::<PyByteArray>() {
        return Ok(Some(Bytes::from(b.to_vec())));
    }
    Err(PyTypeError::new_err(format!(
        "{name} must be bytes, bytearray, str or None, got {}",
        v.get_type().name()?
    )))
}

fn headers(h: Option<&Bound<'_, PyAny>>) -> PyResult<Vec<lagless::Header>> {
    let Some(h) = h else { return Ok(Vec::new()) };
    if h.is_none() {
        return Ok(Vec::new());
    }
    let items: Vec<Bound<'_, PyAny>> = if let Ok(d) = h.cast::<PyDict>() {
        d.items().try_iter()?.collect::<PyResult<_>>()?
    } else {
        h.try_iter()?.collect::<PyResult<_>>()?
    };
    items
        .into_iter()
        .map(|item| {
            let (k, v): (String, Bound<'_, PyAny>) = item.extract().map_err(|_| {
                PyTypeError::new_err("headers must be (str, bytes | str | None) pairs or a dict")
            })?;
            Ok(lagless::Header {
                key: k,
                value: payload("a header value", Some(&v))?,
            })
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn record(
    topic: String,
    value: Option<&Bound<'_, PyAny>>,
    key: Option<&Bound<'_, PyAny>>,
    partition: Option<i32>,
    hdrs: Option<&Bound<'_, PyAny>>,
    timestamp: Option<i64>,
) -> PyResult<ProducerRecord> {
    Ok(ProducerRecord {
        topic,
        partition,
        key: payload("key", key)?,
        value: payload("value", value)?,
        headers: headers(hdrs)?,
        timestamp,
    })
}

impl Producer {
    fn core(&self) -> &CoreProducer {
        self.inner
            .as_ref()
            .expect("the core producer lives until drop")
    }

    /// Calls the queued delivery callbacks; the first exception is raised after all ran.
    fn run_callbacks(&self, py: Python<'_>) -> PyResult<usize> {
        let done = std::mem::take(&mut *self.delivered.lock().unpoisoned());
        let n = done.len();
        let mut first_err = None;
        for (cb, res) in done {
            let (err, meta) = match res {
                Ok(m) => (py.None(), Some((m.topic, m.partition, m.offset))),
                Err(e) => (exception(py, &to_py(py, &e)), None),
            };
            if let Err(e) = cb.bind(py).call1((err, meta)) {
                first_err.get_or_insert(e);
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(n),
        }
    }

    /// Runs `error_cb` and `stats_cb` if due (the core decides); when the next `stats_cb` call
    /// is due. What a callback raised is raised here.
    fn serve_callbacks(&self, py: Python<'_>) -> PyResult<Option<Instant>> {
        self.core().serve_callbacks().map_err(|e| {
            match (&e, self.stash.lock().unpoisoned().take()) {
                (Error::Callback(_), Some(raised)) => raised,
                _ => to_py(py, &e),
            }
        })
    }

    /// A commit's or abort's outcome, after the delivery callbacks of the transaction's records
    /// ran (they are due once it ended, as after `flush()`). The transaction's error is raised
    /// before a callback's: it says what the application must do next (abort, close).
    fn transaction_ended(&self, py: Python<'_>, r: lagless::Result<()>) -> PyResult<()> {
        let callbacks = self.run_callbacks(py);
        r.py(py)?;
        callbacks.map(drop)
    }
}

#[pymethods]
impl Producer {
    #[new]
    fn py_new(py: Python<'_>, config: &Bound<'_, PyAny>) -> PyResult<Self> {
        let (config, cbs) = crate::config::consumer_from_mapping(py, config)?;
        let typed = ProducerConfig::from_config(&config).py(py)?;
        let delivery_timeout = typed.delivery_timeout;
        let core = py.detach(|| CoreProducer::new(typed)).py(py)?;
        let stash: Stash = Arc::new(Mutex::new(None));
        let (with_stats, with_errors) = (cbs.stats_cb.is_some(), cbs.error_cb.is_some());
        let stats_cb = Arc::new(Mutex::new(cbs.stats_cb));
        let error_cb = Arc::new(Mutex::new(cbs.error_cb));
        if with_stats {
            let (slot, stash) = (stats_cb.clone(), stash.clone());
            core.set_statistics_callback(Some(Box::new(
                move |m: &lagless::metrics::ProducerMetrics| {
                    let json = m.to_json_string();
                    call_python_callback(&slot, &stash, "stats_cb", |_| (json,))
                },
            )));
        }
        if with_errors {
            let (slot, stash) = (error_cb.clone(), stash.clone());
            core.set_error_callback(Some(Box::new(move |e: &Error| {
                call_python_callback(&slot, &stash, "error_cb", |py| {
                    (exception(py, &to_py(py, e)),)
                })
            })));
        }
        Ok(Producer {
            inner: Some(core),
            delivered: Arc::new(Mutex::new(Vec::new())),
            notify_fd: Arc::new(AtomicI64::new(-1)),
            delivery_timeout,
            stats_cb,
            error_cb,
            stash,
        })
    }

    /// Queues a record. `on_delivery(error_or_None, (topic, partition, offset) or None)` runs
    /// inside a later `poll()` or `flush()` on the calling thread.
    #[pyo3(signature = (topic, value=None, key=None, partition=None, headers=None, timestamp=None, on_delivery=None))]
    #[allow(clippy::too_many_arguments)]
    fn produce(
        &self,
        py: Python<'_>,
        topic: String,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        headers: Option<&Bound<'_, PyAny>>,
        timestamp: Option<i64>,
        on_delivery: Option<Py<PyAny>>,
    ) -> PyResult<()> {
        let rec = record(topic, value, key, partition, headers, timestamp)?;
        let core = self.core();
        let r = match on_delivery {
            None => py.detach(|| core.send(rec).map(drop)),
            Some(cb) => {
                let q = self.delivered.clone();
                let fd = self.notify_fd.clone();
                py.detach(move || {
                    core.send_with_callback(rec, move |res| {
                        let mut q = q.lock().unpoisoned();
                        let was_empty = q.is_empty();
                        q.push((cb, res));
                        drop(q);
                        if was_empty {
                            notify(fd.load(Ordering::Acquire));
                        }
                    })
                })
            }
        };
        r.py(py)
    }

    /// Sends one record and waits for the broker's answer; returns (partition, offset).
    #[pyo3(signature = (topic, value=None, key=None, partition=None, headers=None, timestamp=None))]
    #[allow(clippy::too_many_arguments)]
    fn send(
        &self,
        py: Python<'_>,
        topic: String,
        value: Option<&Bound<'_, PyAny>>,
        key: Option<&Bound<'_, PyAny>>,
        partition: Option<i32>,
        headers: Option<&Bound<'_, PyAny>>,
        timestamp: Option<i64>,
    ) -> PyResult<(i32, i64)> {
        let rec = record(topic, value, key, partition, headers, timestamp)?;
        let core = self.core();
        let (tx, rx) = mpsc::sync_channel(1);
        py.detach(|| {
            core.send_with_callback(rec, move |res| {
                let _ = tx.send(res);
            })
        })
        .py(py)?;
        // Every record completes by delivery.timeout.ms; wait in slices to let Ctrl-C through.
        let mut rx = rx;
        loop {
            let (r, back) = py.detach(move || (rx.recv_timeout(SLICE), rx));
            rx = back;
            match r {
                Ok(res) => {
                    let m = res.py(py)?;
                    return Ok((m.partition, m.offset));
                }
                Err(mpsc::RecvTimeoutError::Timeout) => py.check_signals()?,
                Err(mpsc::RecvTimeoutError::Disconnected) => return Err(to_py(py, &Error::Closed)),
            }
        }
    }

    /// Runs the delivery callbacks that are due (waiting up to `timeout` seconds for one);
    /// returns how many ran. Before them, and while it waits, `error_cb` and `stats_cb` of the
    /// config when due.
    #[pyo3(signature = (timeout=0.0))]
    fn poll(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<usize> {
        let deadline = deadline(timeout, Instant::now());
        loop {
            self.serve_callbacks(py)?;
            let n = self.run_callbacks(py)?;
            if n > 0 || passed(deadline, Instant::now()) {
                return Ok(n);
            }
            let wait = next_slice(deadline, Instant::now(), Duration::from_millis(10));
            py.detach(|| std::thread::sleep(wait));
            py.check_signals()?;
        }
    }

    /// Sends everything buffered and waits until every record is acknowledged or failed, up to
    /// `timeout` seconds (None: without limit); raises LaglessTimeout if records remain.
    #[pyo3(signature = (timeout=None))]
    fn flush(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let deadline = deadline(timeout, Instant::now());
        let core = self.core();
        loop {
            let next_statistics = self.serve_callbacks(py)?;
            let now = Instant::now();
            let mut slice = next_slice(deadline, now, SLICE);
            if let Some(at) = next_statistics {
                slice = slice.min(at.saturating_duration_since(now));
            }
            let r = py.detach(|| core.flush(slice));
            self.run_callbacks(py)?;
            match r {
                Ok(()) => return Ok(()),
                Err(Error::Timeout(_)) if !passed(deadline, Instant::now()) => {
                    py.check_signals()?
                }
                Err(e) => return Err(to_py(py, &e)),
            }
        }
    }

    /// What the producer is doing now, as plain dicts (README.md's "Metrics" names every
    /// field).
    fn metrics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let json = self.core().metrics().to_json_string();
        py.import("json")?.call_method1("loads", (json,))
    }

    /// The same snapshot in the Prometheus text exposition format 0.0.4 (`lagless_producer_*`
    /// metrics; README.md's "Metrics" names each). `lagless.prometheus` has a
    /// `prometheus_client` collector built on it.
    fn metrics_prometheus(&self) -> String {
        self.core().metrics().to_prometheus()
    }

    /// Makes every delivery outcome queued while none was write a byte to `fd` (None: stop).
    /// The caller keeps `fd` open until it set None again.
    #[pyo3(signature = (fd))]
    fn _set_delivery_fd(&self, fd: Option<i64>) {
        self.notify_fd.store(fd.unwrap_or(-1), Ordering::Release);
    }

    /// The partition ids of `topic`.
    fn partitions_for(&self, py: Python<'_>, topic: String) -> PyResult<Vec<i32>> {
        let core = self.core();
        py.detach(|| core.partitions_for(&topic)).py(py)
    }

    /// Gets the producer id of `transactional.id` from its transaction coordinator, which fences
    /// every older producer with the same id and aborts the transaction it left open. Once,
    /// before the first transaction; after a LaglessTimeout it may be called again. `timeout` in
    /// seconds; None: `delivery.timeout.ms` (so for every transactional call).
    #[pyo3(signature = (timeout=None))]
    fn init_transactions(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = txn_timeout(timeout, self.delivery_timeout);
        let core = self.core();
        py.detach(|| core.init_transactions(t)).py(py)
    }

    /// Starts a transaction: the records produced until `commit_transaction()` or
    /// `abort_transaction()` belong to it. Local: no request is sent.
    fn begin_transaction(&self, py: Python<'_>) -> PyResult<()> {
        let core = self.core();
        py.detach(|| core.begin_transaction()).py(py)
    }

    /// Adds `offsets` (TopicPartitions whose offset is the next one to read) to the open
    /// transaction: the group of `group_metadata` (`Consumer.consumer_group_metadata()`) commits
    /// them if and only if the transaction commits.
    #[pyo3(signature = (offsets, group_metadata, timeout=None))]
    fn send_offsets_to_transaction(
        &self,
        py: Python<'_>,
        offsets: &Bound<'_, PyAny>,
        group_metadata: &Bound<'_, ConsumerGroupMetadata>,
        timeout: Option<f64>,
    ) -> PyResult<()> {
        let offsets = transaction_offsets(extract_tps(offsets)?).py(py)?;
        let group = group_metadata.get().inner.clone();
        let t = txn_timeout(timeout, self.delivery_timeout);
        let core = self.core();
        py.detach(|| core.send_offsets_to_transaction(&offsets, &group, t))
            .py(py)
    }

    /// Flushes the open transaction's records and commits it, with the offsets sent to it.
    /// TransactionAbortableError: abort, then begin the next one; a `fatal` error (a newer
    /// producer with the same `transactional.id` fenced this one: KafkaError PRODUCER_FENCED):
    /// close the producer. After a LaglessTimeout it may be called again to finish.
    #[pyo3(signature = (timeout=None))]
    fn commit_transaction(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = txn_timeout(timeout, self.delivery_timeout);
        let core = self.core();
        let r = py.detach(|| core.commit_transaction(t));
        self.transaction_ended(py, r)
    }

    /// Aborts the open transaction: records not sent yet fail (TransactionAbortableError in their
    /// delivery callbacks), the transaction's records and offsets are discarded.
    #[pyo3(signature = (timeout=None))]
    fn abort_transaction(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = txn_timeout(timeout, self.delivery_timeout);
        let core = self.core();
        let r = py.detach(|| core.abort_transaction(t));
        self.transaction_ended(py, r)
    }

    /// Flushes (up to `timeout` seconds, default 30) and stops the producer.
    #[pyo3(signature = (timeout=None))]
    fn close(&self, py: Python<'_>, timeout: Option<f64>) -> PyResult<()> {
        let t = duration(timeout).unwrap_or(Duration::from_secs(30));
        let core = self.core();
        let r = py.detach(|| core.close(t));
        self.run_callbacks(py)?;
        r.py(py)
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
        // Never block in the collector: skipping one round of traversal is harmless.
        if let Ok(cb) = self.stats_cb.try_lock() {
            visit.call(&*cb)?;
        }
        if let Ok(cb) = self.error_cb.try_lock() {
            visit.call(&*cb)?;
        }
        Ok(())
    }

    fn __clear__(&self) {
        if let Ok(mut cb) = self.stats_cb.try_lock() {
            *cb = None;
        }
        if let Ok(mut cb) = self.error_cb.try_lock() {
            *cb = None;
        }
    }
}

impl Drop for Producer {
    /// The core's drop flushes for a few seconds; the I/O threads may want the GIL meanwhile.
    fn drop(&mut self) {
        let mut core = self.inner.take();
        Python::try_attach(|py| {
            let c = core.take();
            py.detach(move || drop(c))
        });
        drop(core);
    }
}
