//! The producer handle.
//!
//! The core reports deliveries on its I/O threads. C callers get them on their own thread
//! instead: `lagless_producer_send` queues each report, and `lagless_producer_poll` (or `_flush`)
//! runs the queued delivery callbacks on the thread that calls it, the same rule as the
//! consumer's callbacks.
use std::collections::VecDeque;
use std::ffi::{c_char, c_void};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use lagless::config::ProducerConfig;
use lagless::sync::Unpoisoned;
use lagless::{Error, Producer, ProducerRecord, RecordMetadata, Result};

use crate::boundary::{api_timeout, bytes, c_str, write_opt, write_out, Opaque};
use crate::cast::{free_box, set_box, to_ref, try_slice};
use crate::config::lagless_config;
use crate::error::{cstring_lossy, lagless_error, CError};

/// A Kafka producer. Created by `lagless_producer_new`, freed by `lagless_producer_destroy`.
///
/// Thread-safety: send, send_sync, flush and poll may be called from several threads at once.
/// Delivery callbacks run on whichever thread calls `lagless_producer_poll` or `_flush`.
pub struct lagless_producer {
    _private: [u8; 0],
}

castable! { lagless_producer: Box<CProducer> }

/// What a `lagless_producer` points at.
pub(crate) struct CProducer {
    inner: Producer,
    closed: AtomicBool,
    reports: Arc<Reports>,
    delivery_timeout: Duration,
}

/// A delivery report: `err` is NULL when the record was written at (`partition`, `offset`);
/// otherwise it says why not (borrowed for the duration of the call) and `offset` is -1. Runs
/// inside `lagless_producer_poll` or `_flush`, on the thread that called it. It must not unwind
/// through lagless, and must not destroy the producer.
pub type lagless_delivery_cb = Option<
    unsafe extern "C" fn(
        opaque: *mut c_void,
        err: *const lagless_error,
        partition: i32,
        offset: i64,
    ),
>;

#[derive(Default)]
struct Reports {
    queue: Mutex<VecDeque<(lagless_delivery_cb, Opaque, Result<RecordMetadata>)>>,
    ready: Condvar,
}

impl CProducer {
    pub(crate) fn open(&self) -> Result<&Producer> {
        if self.closed.load(Ordering::Acquire) {
            Err(Error::Closed)
        } else {
            Ok(&self.inner)
        }
    }

    /// The default of a producer call's timeout (`timeout_ms` negative).
    pub(crate) fn delivery_timeout(&self) -> Duration {
        self.delivery_timeout
    }

    /// Runs the delivery callbacks already queued, without waiting.
    pub(crate) fn serve_ready(&self) {
        self.serve(Duration::ZERO);
    }

    /// Runs the error and statistics callbacks that are due (C's own callbacks never fail);
    /// when the next statistics call is due.
    fn serve_callbacks(&self) -> Option<Instant> {
        self.inner.serve_callbacks().unwrap_or(None)
    }

    /// Runs the error and statistics callbacks that are due, then queued delivery callbacks,
    /// waiting up to `timeout` for the first (and waking meanwhile for a statistics call due,
    /// and every 100 ms for a cluster condition raised). Returns how many delivery reports ran.
    fn serve(&self, timeout: Duration) -> usize {
        let deadline = Instant::now().checked_add(timeout);
        let batch: Vec<_> = loop {
            let next_statistics = self.serve_callbacks();
            let mut q = self.reports.queue.lock().unpoisoned();
            if !q.is_empty() {
                break q.drain(..).collect();
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return 0;
            }
            let mut wake = now + CALLBACK_WAKE;
            if let Some(d) = deadline {
                wake = wake.min(d);
            }
            if let Some(at) = next_statistics {
                wake = wake.min(at);
            }
            let wait = wake.saturating_duration_since(now);
            drop(self.reports.ready.wait_timeout(q, wait).unpoisoned());
        };
        let n = batch.len();
        for (cb, opaque, res) in batch {
            let Some(cb) = cb else { continue };
            match res {
                // SAFETY: the caller's callback with its opaque pointer.
                Ok(md) => unsafe { cb(opaque.0, std::ptr::null(), md.partition, md.offset) },
                Err(e) => {
                    let err = CError::new(&e);
                    // SAFETY: as above; `err` outlives the call.
                    unsafe { cb(opaque.0, to_ref(&err), -1, -1) }
                }
            }
        }
        n
    }
}

/// How often a waiting `lagless_producer_poll` or `_flush` looks for a cluster condition raised
/// for the error callback, as the consumer's poll does.
const CALLBACK_WAKE: Duration = Duration::from_millis(100);

/// A producer from `config` (copied). A bad setting gives `LAGLESS_ERR_CONFIG` naming the key.
/// On success `*out_producer` receives the new handle.
#[no_mangle]
pub extern "C" fn lagless_producer_new(
    config: *const lagless_config,
    out_producer: *mut *mut lagless_producer,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let config = try_ref!(config);
        try_out!(out_producer);
        let typed = ProducerConfig::from_config(config)?;
        let delivery_timeout = typed.delivery_timeout;
        let inner = Producer::new(typed)?;
        set_box(out_producer, CProducer {
            inner,
            delivery_timeout,
            closed: AtomicBool::new(false),
            reports: Arc::new(Reports::default()),
        });
        Ok(())
    }
}

fn record(
    topic: *const c_char,
    partition: i32,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
) -> Result<ProducerRecord> {
    let topic = try_str!(topic);
    let key = bytes(key, key_len, "key")?;
    let value = bytes(value, value_len, "value")?;
    if partition < -1 {
        return Err(Error::InvalidArgument(format!(
            "partition must be >= 0, or -1 for the partitioner; got {partition}"
        )));
    }
    Ok(ProducerRecord {
        topic: topic.to_string(),
        partition: (partition >= 0).then_some(partition),
        key: key.map(Bytes::copy_from_slice),
        value: value.map(Bytes::copy_from_slice),
        headers: Vec::new(),
        timestamp: None,
    })
}

/// Sends one record and waits until the broker acknowledged it (or it failed, at the latest after
/// `delivery.timeout.ms`). `partition` -1 lets the partitioner choose (by key hash, or sticky
/// without a key). `key`/`value` may be NULL (with length 0) for a null key/value; the bytes are
/// copied. On success `*out_partition` and `*out_offset` (either may be NULL) receive where the
/// record was written. An unknown topic gives `LAGLESS_ERR_UNKNOWN_TOPIC`.
#[no_mangle]
pub extern "C" fn lagless_producer_send_sync(
    producer: *mut lagless_producer,
    topic: *const c_char,
    partition: i32,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    out_partition: *mut i32,
    out_offset: *mut i64,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let p = h.open()?;
        let rec = record(topic, partition, key, key_len, value, value_len)?;
        let md = p.send(rec)?.wait()?;
        write_opt(out_partition, md.partition);
        write_opt(out_offset, md.offset);
        Ok(())
    }
}

/// A record header for `lagless_producer_send_with_headers`: `key` is a NUL-terminated UTF-8
/// string; `value` (NULL with `value_len` 0 for a null value) holds `value_len` bytes. Both are
/// copied during the call.
#[repr(C)]
pub struct lagless_header {
    pub key: *const c_char,
    pub value: *const u8,
    pub value_len: usize,
}

// The caller's own array, read during the call.
castable! { lagless_header: Ref<lagless_header> }

/// Like `lagless_producer_send`, with `header_count` headers (`headers` may be NULL when the
/// count is 0; a key may repeat, order is kept) and the record's timestamp, `timestamp_ms`
/// milliseconds since the epoch (-1: the time of the call; for topics with
/// `message.timestamp.type=LogAppendTime` the broker sets its own).
#[no_mangle]
pub extern "C" fn lagless_producer_send_with_headers(
    producer: *mut lagless_producer,
    topic: *const c_char,
    partition: i32,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    headers: *const lagless_header,
    header_count: usize,
    timestamp_ms: i64,
    callback: lagless_delivery_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let p = h.open()?;
        let mut rec = record(topic, partition, key, key_len, value, value_len)?;
        for (i, hd) in try_slice(headers, header_count, "headers")?.iter().enumerate() {
            let k = c_str(hd.key, &format!("headers[{i}].key"))?;
            let v = bytes(hd.value, hd.value_len, &format!("headers[{i}].value"))?;
            rec = rec.with_header(k, v.map(Bytes::copy_from_slice));
        }
        match timestamp_ms {
            -1 => {}
            t if t >= 0 => rec = rec.with_timestamp(t),
            t => {
                return Err(Error::InvalidArgument(format!(
                    "timestamp_ms must be >= 0, or -1 for the time of the call; got {t}"
                )))
            }
        }
        // The delivery report waits in the queue for lagless_producer_poll/_flush.
        let reports = h.reports.clone();
        let opaque = Opaque(opaque);
        p.send_with_callback(rec, move |res| {
            reports.queue.lock().unpoisoned().push_back((callback, opaque, res));
            reports.ready.notify_all();
        })
    }
}

/// Queues one record and returns without waiting for the broker (it blocks only to fetch a new
/// topic's metadata or while `buffer.memory` is full). Arguments as for
/// `lagless_producer_send_sync`. `callback` (may be NULL) is called exactly once with the
/// outcome, inside a later `lagless_producer_poll` or `_flush` on the caller's thread; if this
/// function returns an error, it is never called. `opaque` must stay valid until then.
#[no_mangle]
pub extern "C" fn lagless_producer_send(
    producer: *mut lagless_producer,
    topic: *const c_char,
    partition: i32,
    key: *const u8,
    key_len: usize,
    value: *const u8,
    value_len: usize,
    callback: lagless_delivery_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    lagless_producer_send_with_headers(
        producer,
        topic,
        partition,
        key,
        key_len,
        value,
        value_len,
        std::ptr::null(),
        0,
        -1,
        callback,
        opaque,
    )
}

/// Runs the delivery callbacks of records whose outcome is known, on this thread, waiting up to
/// `timeout_ms` (0: do not wait; negative: wait indefinitely) for at least one. `*out_served`
/// (may be NULL) receives how many reports were served. Before them, and while it waits, it
/// runs the error callback (`lagless_producer_set_error_callback`) for each cluster condition
/// raised and the statistics callback (`lagless_producer_set_statistics_callback`) when
/// `statistics.interval.ms` has passed; `lagless_producer_flush` does too. Allowed after `lagless_producer_close`
/// (it then serves the reports of records that failed with `LAGLESS_ERR_CLOSED`).
#[no_mangle]
pub extern "C" fn lagless_producer_poll(
    producer: *mut lagless_producer,
    timeout_ms: i32,
    out_served: *mut usize,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let timeout = if timeout_ms < 0 {
            Duration::from_secs(u32::MAX as u64)
        } else {
            Duration::from_millis(timeout_ms as u64)
        };
        let n = h.serve(timeout);
        write_opt(out_served, n);
        Ok(())
    }
}

/// What the producer is doing now, as one JSON object (README.md's "Metrics" section names
/// every field): records and batches delivered, failed and retried, their rates, what waits in
/// `buffer.memory`, the Produce latency and every broker's connections. A value not known yet is
/// `null`. A new string the caller frees with `lagless_string_destroy`. `LAGLESS_ERR_CLOSED`
/// after `lagless_producer_close`. Does not wait.
#[no_mangle]
pub extern "C" fn lagless_producer_metrics_json(
    producer: *mut lagless_producer,
    out_json: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        try_out!(out_json);
        let json = h.open()?.metrics().to_json_string();
        write_out(out_json, cstring_lossy(&json).into_raw());
        Ok(())
    }
}

/// The same snapshot in the Prometheus text exposition format 0.0.4 (`lagless_producer_*`
/// metrics labelled `client_id`, and `transactional_id` on a transactional producer; README.md's
/// "Metrics" section names each). A value not known yet has no sample. A new string the caller
/// frees with `lagless_string_destroy`. `LAGLESS_ERR_CLOSED` after `lagless_producer_close`.
/// Does not wait.
#[no_mangle]
pub extern "C" fn lagless_producer_metrics_prometheus(
    producer: *mut lagless_producer,
    out_text: *mut *mut c_char,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        try_out!(out_text);
        let text = h.open()?.metrics().to_prometheus();
        write_out(out_text, cstring_lossy(&text).into_raw());
        Ok(())
    }
}

/// Sets the producer's statistics callback (the consumer's type: `json` is the object
/// `lagless_producer_metrics_json` returns, borrowed for the call): every
/// `statistics.interval.ms` (0, the default, is never) `lagless_producer_poll` or `_flush` calls
/// it on the thread that called them, as librdkafka's `rd_kafka_poll` serves a producer's
/// `stats_cb`; a poll waiting for delivery reports wakes for it. The first call comes one
/// interval after the producer was created; a producer not polled for several intervals gets
/// one call when polled again. NULL `statistics_cb` removes it. `opaque` is passed untouched and
/// must stay valid until the callback is replaced or the producer destroyed. The callback must
/// not call `lagless_producer_poll`/`_flush` of the same producer nor destroy it, and must not
/// unwind through lagless.
#[no_mangle]
pub extern "C" fn lagless_producer_set_statistics_callback(
    producer: *mut lagless_producer,
    statistics_cb: crate::statistics::lagless_statistics_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let p = h.open()?;
        let opaque = Opaque(opaque);
        p.set_statistics_callback(statistics_cb.map(|cb| {
            Box::new(move |m: &lagless::metrics::ProducerMetrics| {
                let json = cstring_lossy(&m.to_json_string());
                let len = json.as_bytes().len();
                // SAFETY: the caller's function with the caller's pointer; the string lives
                // through the call, as the callback's contract says.
                unsafe { cb(opaque.ptr(), json.as_ptr(), len) };
                Ok(())
            }) as lagless::producer::ProducerStatisticsCallback
        }));
        Ok(())
    }
}

/// Sets the producer's error callback (the consumer's type), for conditions of the whole
/// cluster that no single send fails with, each heard once as it begins: every known broker
/// failed its last connection attempt (`LAGLESS_ERR_TRANSPORT`, "all brokers are down"), a
/// broker refused the credentials (`LAGLESS_ERR_AUTHENTICATION`) or the TLS handshake failed
/// (`LAGLESS_ERR_SSL`). The producer goes on retrying; each record still fails on its own in its
/// delivery report. `lagless_producer_poll` and `_flush` call it on the thread that called them,
/// a waiting poll within about 100 ms of the condition. Conditions raised while no callback is
/// set are logged only. NULL `error_cb` removes it; `opaque` as for the statistics callback.
#[no_mangle]
pub extern "C" fn lagless_producer_set_error_callback(
    producer: *mut lagless_producer,
    error_cb: crate::error_callback::lagless_error_cb,
    opaque: *mut c_void,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let p = h.open()?;
        let opaque = Opaque(opaque);
        p.set_error_callback(error_cb.map(|cb| {
            Box::new(move |e: &lagless::Error| {
                let error = crate::error::boxed(e);
                // SAFETY: the caller's function with the caller's pointer; the error lives
                // through the call, as the callback's contract says, and is freed after it.
                unsafe { cb(opaque.ptr(), error) };
                crate::error::lagless_error_destroy(error);
                Ok(())
            }) as lagless::ErrorCallback
        }));
        Ok(())
    }
}

/// Sends everything buffered and waits (up to `timeout_ms`; negative: `delivery.timeout.ms`)
/// until every record sent so far is acknowledged or failed, then runs the queued delivery
/// callbacks on this thread.
#[no_mangle]
pub extern "C" fn lagless_producer_flush(
    producer: *mut lagless_producer,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        let p = h.open()?;
        let timeout = api_timeout(timeout_ms)
            .unwrap_or(h.delivery_timeout);
        let deadline = Instant::now().checked_add(timeout);
        // In slices, serving the error and statistics callbacks between them, as
        // librdkafka's flush serves its producer's callbacks.
        let r = loop {
            let next_statistics = h.serve_callbacks();
            let now = Instant::now();
            let mut until = now + CALLBACK_WAKE;
            if let Some(d) = deadline {
                until = until.min(d);
            }
            if let Some(at) = next_statistics {
                until = until.min(at);
            }
            match p.flush(until.saturating_duration_since(now)) {
                Err(Error::Timeout(_)) if deadline.is_none_or(|d| Instant::now() < d) => {}
                r => break r,
            }
        };
        h.serve(Duration::ZERO);
        r
    }
}

/// Flushes (up to `timeout_ms`; negative: `delivery.timeout.ms`), then stops the producer. Records
/// still unacknowledged fail with `LAGLESS_ERR_CLOSED` (their reports wait for
/// `lagless_producer_poll`). Every later call except `_poll` and `_destroy` gives
/// `LAGLESS_ERR_CLOSED`; closing again succeeds.
#[no_mangle]
pub extern "C" fn lagless_producer_close(
    producer: *mut lagless_producer,
    timeout_ms: i32,
) -> *mut lagless_error {
    ffi_panic_boundary! { fallible:
        let h = try_ref!(producer);
        if h.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let timeout = api_timeout(timeout_ms)
            .unwrap_or(h.delivery_timeout);
        h.inner.close(timeout)
    }
}

/// Frees the producer. Without a prior close it flushes for at most a few seconds. Delivery
/// reports not yet served are dropped without calling their callbacks. NULL is ignored.
#[no_mangle]
pub extern "C" fn lagless_producer_destroy(producer: *mut lagless_producer) {
    ffi_panic_boundary! { free_box(producer) }
}
