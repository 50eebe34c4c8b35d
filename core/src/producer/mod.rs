//! The producer: a blocking API in front of a background sender.
//!
//! [`Producer::send`] picks a partition, appends the record to that partition's open batch in the
//! accumulator and returns a [`Delivery`] at once. A sender task on the producer's own I/O
//! runtime drains ready batches (full, lingered long enough, or flushed), groups them by leader
//! broker into one Produce request per broker, and completes each record's delivery from the
//! broker's answer.
//!
//! Idempotent (`enable.idempotence`, the default, as in the Java producer since Kafka 3.0): the
//! producer gets a producer id (InitProducerId) before its first batch, and each batch carries
//! it with the sequence number of its first record in its partition. The broker appends a
//! batch only if its sequence follows the last one appended, and answers a retried batch it has
//! already appended as a success: retries write no duplicates, and up to five batches per
//! partition are in flight without reordering. The decisions are in [`idempotence`]. Otherwise
//! at most one batch per partition is in flight, so records of a partition are written in the
//! order they were sent, retries included (but a retry after a lost answer may write twice).
//!
//! Retries are bounded by time, not counts (KIP-91): a batch is retried with backoff until
//! `delivery.timeout.ms` after it was created, then its records fail with [`Error::Timeout`].
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rand::Rng;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::backoff::{Deadline, Retry};
use crate::cluster::{Cluster, PartitionInfo};
use crate::config::ProducerConfig;
use crate::error::{codes, kafka_error_action, Action, Error, Result};
pub use crate::protocol::records::Header;
use crate::protocol::records::{
    set_producer_state, set_transactional_state, BatchBuilder, Compression,
};
use crate::sync::Unpoisoned;
use crate::telemetry::{self, Reporter};

mod accumulator;
mod idempotence;
mod partitioner;
mod sender;
mod transaction;
mod transactional;

use accumulator::*;
use idempotence::*;
use partitioner::*;
pub use partitioner::{murmur2, partition_for_key};
use sender::*;
use transactional::*;

/// The bytes a v2 batch spends before its first record.
const BATCH_OVERHEAD: usize = 61;
/// How long `Drop` waits for buffered records before giving up on them.
const DROP_FLUSH_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the I/O runtime gets to wind down when the producer stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(1);

// ---------------------------------------------------------------------------------------------
// Public types
// ---------------------------------------------------------------------------------------------

/// A record to send.
#[derive(Debug, Clone, Default)]
pub struct ProducerRecord {
    /// The topic to write to; must not be empty.
    pub topic: String,
    /// `None`: the partitioner chooses (by key, or sticky for records without a key).
    pub partition: Option<i32>,
    /// The record's key; `None` for a null key. Keyed records go to the partition the Java
    /// client's murmur2 partitioner gives (unless `partitioner.ignore.keys`).
    pub key: Option<Bytes>,
    /// The record's value; `None` for a null value (a tombstone on a compacted topic).
    pub value: Option<Bytes>,
    /// The record's headers, written in this order.
    pub headers: Vec<Header>,
    /// Milliseconds since the epoch; `None` means now.
    pub timestamp: Option<i64>,
}

impl ProducerRecord {
    /// A record with a value and nothing else.
    pub fn new(topic: impl Into<String>, value: impl Into<Bytes>) -> ProducerRecord {
        ProducerRecord {
            topic: topic.into(),
            value: Some(value.into()),
            ..Default::default()
        }
    }

    /// The record with `key`.
    pub fn with_key(mut self, key: impl Into<Bytes>) -> ProducerRecord {
        self.key = Some(key.into());
        self
    }

    /// The record for partition `partition`, instead of the one the partitioner chooses. A
    /// partition the topic does not have fails `send` with [`Error::InvalidArgument`].
    pub fn with_partition(mut self, partition: i32) -> ProducerRecord {
        self.partition = Some(partition);
        self
    }

    /// The record with timestamp `timestamp_ms` (milliseconds since the epoch) instead of the
    /// time of `send`.
    pub fn with_timestamp(mut self, timestamp_ms: i64) -> ProducerRecord {
        self.timestamp = Some(timestamp_ms);
        self
    }

    /// The record with one more header (`None`: a header with a null value). Header keys may
    /// repeat.
    pub fn with_header(mut self, key: impl Into<String>, value: Option<Bytes>) -> ProducerRecord {
        self.headers.push(Header {
            key: key.into(),
            value,
        });
        self
    }
}

/// Where a record was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordMetadata {
    /// The topic the record was written to.
    pub topic: String,
    /// The partition the record was written to.
    pub partition: i32,
    /// The record's offset; -1 with `acks=0`, where the broker does not say.
    pub offset: i64,
    /// The record's timestamp (the broker's append time for `LogAppendTime` topics).
    pub timestamp: i64,
}

/// The outcome of one sent record, available once the broker has answered (or the record
/// failed).
pub struct Delivery {
    slot: Arc<DeliverySlot>,
}

#[derive(Default)]
struct DeliverySlot {
    result: Mutex<Option<Result<RecordMetadata>>>,
    ready: Condvar,
}

impl Delivery {
    /// Blocks until the record is acknowledged or has failed. Never blocks forever: every record
    /// completes by `delivery.timeout.ms`, and a closed producer fails what it still holds with
    /// [`Error::Closed`].
    pub fn wait(self) -> Result<RecordMetadata> {
        let mut r = lock(&self.slot.result);
        loop {
            if let Some(r) = r.take() {
                return r;
            }
            r = self.slot.ready.wait(r).unpoisoned();
        }
    }

    /// The outcome if it is known, without blocking. It stays available: a later `wait` returns
    /// it again.
    pub fn try_get(&mut self) -> Option<Result<RecordMetadata>> {
        lock(&self.slot.result).clone()
    }
}

// ---------------------------------------------------------------------------------------------
// The producer
// ---------------------------------------------------------------------------------------------

struct Shared {
    cluster: Arc<Cluster>,
    config: ProducerConfig,
    acc: Mutex<Accumulator>,
    counters: Arc<Counters>,
    /// Wakes the sender.
    wake: Notify,
    flushing: AtomicUsize,
    closed: AtomicBool,
    refresh_wanted: AtomicBool,
    refreshing: AtomicBool,
    /// InitProducerId is under way (idempotent producer).
    initializing: AtomicBool,
    /// The transactional producer's state; `None` without `transactional.id`.
    txn: Option<Mutex<Txn>>,
}

/// A Kafka producer. `Send + Sync`: share it between threads behind an `Arc`.
///
/// It owns a small I/O runtime (two threads named `lagless-producer`) that runs the sender and
/// the broker connections.
///
/// ```no_run
/// use std::time::Duration;
/// use lagless::{Config, Producer, ProducerRecord};
///
/// let producer = Producer::from_config(&Config::from_pairs([
///     ("bootstrap.servers", "localhost:9092"),
///     ("compression.type", "lz4"),
///     ("linger.ms", "5"),
/// ])?)?;
/// // send() queues the record and returns at once; records with one key go to one partition,
/// // the one the Java producer picks.
/// let delivery = producer.send(
///     ProducerRecord::new("orders", "order 1")
///         .with_key("customer-7")
///         .with_header("trace-id", Some("4bf92f35".into())),
/// )?;
/// producer.flush(Duration::from_secs(30))?;
/// let written = delivery.wait()?;
/// println!("{}-{}@{}", written.topic, written.partition, written.offset);
/// producer.close(Duration::from_secs(5))?;
/// # Ok::<(), lagless::Error>(())
/// ```
pub struct Producer {
    shared: Arc<Shared>,
    handle: tokio::runtime::Handle,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
    /// KIP-714's client telemetry task (`enable.metrics.push`).
    telemetry: Option<Reporter>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unpoisoned()
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Producer {
    /// A producer from string settings (Java key names).
    pub fn from_config(config: &crate::config::Config) -> Result<Producer> {
        Producer::new(ProducerConfig::from_config(config)?)
    }

    /// A producer from typed settings. Checks the configuration and starts the I/O runtime.
    /// Connections are made lazily, on the first `send` or `partitions_for`.
    pub fn new(config: ProducerConfig) -> Result<Producer> {
        let runtime = crate::io_runtime("lagless-producer")?;
        let handle = runtime.handle().clone();
        Producer::on_runtime(config, handle, Some(runtime))
    }

    /// A producer whose sender runs on `handle`: its own `runtime`, or the application's (the
    /// async front, `runtime` None).
    pub(crate) fn on_runtime(
        config: ProducerConfig,
        handle: tokio::runtime::Handle,
        runtime: Option<tokio::runtime::Runtime>,
    ) -> Result<Producer> {
        if config.common.bootstrap_servers.is_empty() {
            return Err(Error::config(
                "bootstrap.servers",
                "at least one broker address is needed",
            ));
        }
        if !matches!(config.acks, -1..=1) {
            return Err(Error::config(
                "acks",
                format!("{} is not one of all (-1), 0, 1", config.acks),
            ));
        }
        let compression = Compression::from_config_value(&config.compression_type)?;
        if config.max_in_flight_requests_per_connection == 0 {
            return Err(Error::config(
                "max.in.flight.requests.per.connection",
                "must be at least 1",
            ));
        }
        if config.enable_idempotence {
            // A typed config set by hand skips ProducerConfig::from_config's check.
            crate::config::idempotence(
                Some(true),
                config.acks,
                config.max_in_flight_requests_per_connection,
            )?;
        }
        // batch.size=0 disables batching, as in Java: every record is a full batch of its own.
        let batch_size = config.batch_size.min(config.max_request_size.max(1));
        let mut acc = Accumulator::new(batch_size, config.linger, compression);
        if config.enable_idempotence {
            acc = acc.idempotent(config.max_in_flight_requests_per_connection);
        }
        if let Some(id) = &config.transactional_id {
            if !config.enable_idempotence {
                return Err(Error::config(
                    "enable.idempotence",
                    "`transactional.id` is set, which needs the idempotent producer: \
                     `enable.idempotence` must not be false",
                ));
            }
            if let Some(idem) = &mut acc.idem {
                // No partition is in a transaction before init_transactions and begin.
                idem.txn_added = Some(Default::default());
            }
            if id.is_empty() {
                return Err(Error::config("transactional.id", "must not be empty"));
            }
        }
        let txn = config
            .transactional_id
            .clone()
            .map(|id| Mutex::new(Txn::new(id)));
        let shared = Arc::new(Shared {
            cluster: Cluster::new(config.common.clone()),
            acc: Mutex::new(acc),
            counters: Arc::new(Counters::default()),
            config,
            wake: Notify::new(),
            flushing: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            refresh_wanted: AtomicBool::new(false),
            refreshing: AtomicBool::new(false),
            initializing: AtomicBool::new(false),
            txn,
        });
        handle.spawn(sender_loop(shared.clone()));
        let telemetry = shared.config.enable_metrics_push.then(|| {
            let of = shared.clone();
            Reporter::spawn(
                &handle,
                shared.cluster.clone(),
                Arc::new(move || {
                    let m = snapshot(&of);
                    telemetry::Collected {
                        points: telemetry::producer::points(&m),
                        resource: telemetry::producer::resource(&m),
                    }
                }),
            )
        });
        Ok(Producer {
            shared,
            handle,
            runtime: Mutex::new(runtime),
            telemetry,
        })
    }

    /// Sends a record; the returned [`Delivery`] tells where it was written.
    ///
    /// Blocks only to fetch metadata of a topic not seen before (up to `delivery.timeout.ms`;
    /// a topic the cluster does not have fails promptly with [`Error::UnknownTopic`]) and while
    /// `buffer.memory` is full (up to `default.api.timeout.ms`, then [`Error::Timeout`]).
    pub fn send(&self, record: ProducerRecord) -> Result<Delivery> {
        let slot = Arc::new(DeliverySlot::default());
        self.enqueue(record, Completion::Slot(slot.clone()))?;
        Ok(Delivery { slot })
    }

    /// Like [`Producer::send`], calling `cb` with the outcome instead.
    ///
    /// The callback runs on one of the producer's I/O threads: keep it short, and do not call
    /// blocking producer methods (`flush`, `close`) from it. If `send_with_callback` returns an
    /// error, the callback is not called.
    pub fn send_with_callback(
        &self,
        record: ProducerRecord,
        cb: impl FnOnce(Result<RecordMetadata>) + Send + 'static,
    ) -> Result<()> {
        self.enqueue(record, Completion::Callback(Box::new(cb)))
    }

    /// What the producer is doing: records and batches delivered, failed and retried, their
    /// rates, what waits in `buffer.memory`, the Produce latency and every broker's connections.
    /// Cheap: one look under the lock each batch's completion takes anyway.
    pub fn metrics(&self) -> crate::metrics::ProducerMetrics {
        snapshot(&self.shared)
    }

    fn enqueue(&self, record: ProducerRecord, completion: Completion) -> Result<()> {
        if self.check_record(&record)? {
            let deadline = Deadline::after(self.shared.config.delivery_timeout);
            let (cluster, topic) = (self.shared.cluster.clone(), record.topic.clone());
            self.run(async move { topic_partitions(&cluster, &topic, deadline).await })?;
        }
        let room = Deadline::after(self.shared.config.common.default_api_timeout);
        // Given a deadline, append waits for room (or fails): it never hands the record back.
        self.append(record, completion, Some(room)).map(|_| ())
    }

    /// Checks what can be checked of `record` before its topic's metadata is known; returns
    /// whether that metadata must be fetched first.
    fn check_record(&self, record: &ProducerRecord) -> Result<bool> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        check_send(&self.shared)?;
        if record.topic.is_empty() {
            return Err(Error::InvalidArgument(
                "the record's topic is empty".to_string(),
            ));
        }
        let m = self.shared.cluster.metadata();
        Ok(!matches!(m.topics.get(&record.topic),
            Some(t) if t.error_code == codes::NONE && !t.partitions.is_empty()))
    }

    /// The async front's send: awaits the topic's metadata and room in `buffer.memory`
    /// instead of blocking for them.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn send_async(
        &self,
        mut record: ProducerRecord,
        cb: impl FnOnce(Result<RecordMetadata>) + Send + 'static,
    ) -> Result<()> {
        if self.check_record(&record)? {
            let deadline = Deadline::after(self.shared.config.delivery_timeout);
            topic_partitions(&self.shared.cluster, &record.topic, deadline).await?;
        }
        let room = Deadline::after(self.shared.config.common.default_api_timeout);
        let mut completion = Completion::Callback(Box::new(cb));
        loop {
            let freed = self.shared.counters.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            match self.append(record, completion, None)? {
                None => return Ok(()),
                Some((r, c)) => (record, completion) = (r, c),
            }
            if room.remaining().is_zero() {
                return Err(self
                    .shared
                    .counters
                    .full_error(self.shared.config.buffer_memory, room));
            }
            let _ = tokio::time::timeout(room.remaining(), freed).await;
        }
    }

    /// Appends `record` to its partition's open batch. Waits for room in `buffer.memory` until
    /// `room` if given; without a deadline, a full buffer hands the record back.
    #[allow(clippy::type_complexity)]
    fn append(
        &self,
        record: ProducerRecord,
        completion: Completion,
        room: Option<Deadline>,
    ) -> Result<Option<(ProducerRecord, Completion)>> {
        let shared = &self.shared;
        let meta = shared.cluster.metadata();
        let partitions: &[PartitionInfo] = meta
            .topics
            .get(&record.topic)
            .map(|t| t.partitions.as_slice())
            .unwrap_or_default();
        let n = partitions.len() as i32;
        if n == 0 {
            return Err(Error::UnknownTopic(record.topic));
        }
        let target = match (record.partition, &record.key) {
            (Some(p), _) if p < 0 || p >= n => {
                return Err(Error::InvalidArgument(format!(
                    "partition {p} of topic `{}` is out of range: the topic has {n} partitions",
                    record.topic
                )))
            }
            (Some(p), _) => Target::Partition(p),
            (None, Some(k)) if !shared.config.partitioner_ignore_keys => {
                Target::Partition(partition_for_key(k, n))
            }
            (None, _) => Target::Sticky,
        };
        let size = record_size(
            record.key.as_deref(),
            record.value.as_deref(),
            &record.headers,
        );
        if size + BATCH_OVERHEAD > shared.config.max_request_size {
            return Err(Error::InvalidArgument(format!(
                "a record of about {} bytes for topic `{}` is larger than max.request.size ({} bytes)",
                size + BATCH_OVERHEAD,
                record.topic,
                shared.config.max_request_size
            )));
        }
        if size > shared.config.buffer_memory {
            return Err(Error::InvalidArgument(format!(
                "a record of about {size} bytes for topic `{}` is larger than buffer.memory ({} bytes)",
                record.topic, shared.config.buffer_memory
            )));
        }
        // Full batches may be waiting for the sender: make sure it looks before we wait.
        shared.wake.notify_one();
        match room {
            Some(deadline) => {
                shared
                    .counters
                    .reserve(size, shared.config.buffer_memory, deadline)?
            }
            None => {
                if !shared
                    .counters
                    .try_reserve(size, shared.config.buffer_memory)
                {
                    return Ok(Some((record, completion)));
                }
            }
        }
        let rec = RecordParts {
            timestamp: record.timestamp.unwrap_or_else(now_ms),
            key: record.key.as_deref(),
            value: record.value.as_deref(),
            headers: &record.headers,
            size,
        };
        let mut acc = lock(&shared.acc);
        if shared.closed.load(Ordering::Acquire) {
            drop(acc);
            shared.counters.release(size, 1);
            return Err(Error::Closed);
        }
        // After a fatal error (Java's FATAL_ERROR state) every send fails with it.
        if let Some(e) = acc.idem.as_ref().and_then(|i| i.fatal.clone()) {
            drop(acc);
            shared.counters.release(size, 1);
            return Err(e);
        }
        let (_, wake) = acc.append(
            &record.topic,
            n,
            target,
            partitions,
            rec,
            completion,
            &shared.counters,
            Instant::now(),
        );
        drop(acc);
        if wake {
            shared.wake.notify_one();
        }
        Ok(None)
    }

    /// Sends everything buffered now, without waiting for `linger.ms`, and waits until every
    /// record sent so far is acknowledged or has failed. Records sent by other threads while
    /// this waits are waited for too.
    pub fn flush(&self, timeout: Duration) -> Result<()> {
        let shared = &self.shared;
        shared.flushing.fetch_add(1, Ordering::AcqRel);
        shared.wake.notify_one();
        let r = shared.counters.wait_idle(Deadline::after(timeout));
        shared.flushing.fetch_sub(1, Ordering::AcqRel);
        r
    }

    /// The async front's flush: as [`Producer::flush`], awaiting instead of blocking.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn flush_async(&self, timeout: Duration) -> Result<()> {
        flush_shared(&self.shared, timeout).await
    }

    /// The async front's close: as [`Producer::close`], awaiting the flush.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn close_async(&self, timeout: Duration) -> Result<()> {
        let deadline = Deadline::after(timeout);
        let r = if self.shared.closed.load(Ordering::Acquire) {
            Ok(())
        } else {
            self.flush_async(timeout).await
        };
        if let Some(task) = self.end_telemetry() {
            let wait = telemetry::close_wait(deadline, self.shared.config.common.request_timeout);
            let _ = tokio::time::timeout(wait, task).await;
        }
        self.stop();
        r
    }

    /// Flushes (up to `timeout`), then stops the producer. Records still unacknowledged fail
    /// with [`Error::Closed`]; later calls to `send` fail with it too.
    pub fn close(&self, timeout: Duration) -> Result<()> {
        let deadline = Deadline::after(timeout);
        let r = if self.shared.closed.load(Ordering::Acquire) {
            Ok(())
        } else {
            self.flush(timeout)
        };
        // KIP-714: the terminating push, with the final values (every delivery counted), waited
        // for within the close's deadline on the producer's own runtime (called from async code,
        // the runtime stops under it: use the async front's close there).
        if let Some(task) = self.end_telemetry() {
            let owned = lock(&self.runtime).is_some();
            if owned && tokio::runtime::Handle::try_current().is_err() {
                let wait =
                    telemetry::close_wait(deadline, self.shared.config.common.request_timeout);
                let _ = self
                    .handle
                    .block_on(async move { tokio::time::timeout(wait, task).await });
            }
        }
        self.stop();
        r
    }

    /// Tells the telemetry task the producer closes (it sends its terminating push, when a
    /// subscription asks for metrics, and ends) and returns the task, the first time.
    fn end_telemetry(&self) -> Option<tokio::task::JoinHandle<()>> {
        let reporter = self.telemetry.as_ref()?;
        reporter.initiate_close();
        reporter.take_task()
    }

    fn stop(&self) {
        let shared = &self.shared;
        shared.closed.store(true, Ordering::Release);
        shared.wake.notify_one();
        let rt = lock(&self.runtime).take();
        if let Some(rt) = rt {
            if tokio::runtime::Handle::try_current().is_ok() {
                // Called from async code (a callback, another runtime): blocking here would
                // panic; let the runtime wind down by itself.
                rt.shutdown_background();
            } else {
                rt.shutdown_timeout(SHUTDOWN_GRACE);
            }
        }
        // Whatever the sender did not send fails now; callbacks run outside the lock.
        let leftovers = std::mem::take(&mut lock(&shared.acc).topics);
        drop(leftovers);
    }

    /// The partition ids of `topic`, fetching its metadata if needed (up to
    /// `default.api.timeout.ms`).
    pub fn partitions_for(&self, topic: &str) -> Result<Vec<i32>> {
        if topic.is_empty() {
            return Err(Error::InvalidArgument("the topic is empty".to_string()));
        }
        let deadline = Deadline::after(self.shared.config.common.default_api_timeout);
        let (cluster, t) = (self.shared.cluster.clone(), topic.to_string());
        let parts = self.run(async move { topic_partitions(&cluster, &t, deadline).await })?;
        Ok(parts.iter().map(|p| p.partition).collect())
    }

    /// The async front's `partitions_for`.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(crate) async fn partitions_for_async(&self, topic: &str) -> Result<Vec<i32>> {
        if topic.is_empty() {
            return Err(Error::InvalidArgument("the topic is empty".to_string()));
        }
        let deadline = Deadline::after(self.shared.config.common.default_api_timeout);
        let parts = topic_partitions(&self.shared.cluster, topic, deadline).await?;
        Ok(parts.iter().map(|p| p.partition).collect())
    }

    /// Runs `fut` on the I/O runtime and waits for it from this (non-async) thread.
    fn run<T: Send + 'static>(
        &self,
        fut: impl Future<Output = Result<T>> + Send + 'static,
    ) -> Result<T> {
        if self.shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        self.handle.spawn(async move {
            let _ = tx.send(fut.await);
        });
        // The runtime stopped before the task ran: the sender half is dropped.
        rx.recv().unwrap_or(Err(Error::Closed))
    }
}

impl Drop for Producer {
    /// Flushes for at most a few seconds, then stops; never blocks for long and never panics.
    fn drop(&mut self) {
        if self.shared.closed.load(Ordering::Acquire) {
            return;
        }
        // A producer on the application's runtime (the async front) is flushed by its front;
        // outside that runtime nothing may drive its sender any more.
        let owned = lock(&self.runtime).is_some();
        if owned && tokio::runtime::Handle::try_current().is_err() {
            let timeout = DROP_FLUSH_TIMEOUT.min(self.shared.config.delivery_timeout);
            if let Err(e) = self.flush(timeout) {
                tracing::warn!(error = %e, "producer dropped with records still unacknowledged");
            }
        }
        self.stop();
    }
}

/// The producer's metrics snapshot ([`Producer::metrics`], the telemetry task's pushes).
fn snapshot(shared: &Shared) -> crate::metrics::ProducerMetrics {
    let now = std::time::Instant::now();
    let s = lock(&shared.counters.state);
    let d = &s.delivered;
    let (sent, failed, batches) = (d.records_sent, d.records_failed, d.batches_sent);
    let (send_rate, error_rate) = (d.sent.rate(now), d.failed.rate(now));
    let (outstanding, bytes) = (s.outstanding, s.bytes);
    drop(s);
    let brokers = shared.cluster.broker_metrics(now);
    crate::metrics::ProducerMetrics {
        client_id: shared.config.common.client_id.clone(),
        transactional_id: shared.config.transactional_id.clone(),
        records_sent_total: sent,
        records_failed_total: failed,
        batches_sent_total: batches,
        batch_retries_total: shared.counters.batch_retries.load(Ordering::Relaxed),
        record_send_rate: send_rate,
        record_error_rate: error_rate,
        records_outstanding: outstanding,
        buffered_bytes: bytes as u64,
        buffer_memory: shared.config.buffer_memory as u64,
        produce_latency: crate::metrics::LatencyMetrics::of(&brokers.produce_latency),
        brokers: brokers.brokers,
    }
}

/// Sends everything buffered now and awaits every record sent so far (the async flush).
async fn flush_shared(shared: &Shared, timeout: Duration) -> Result<()> {
    shared.flushing.fetch_add(1, Ordering::AcqRel);
    shared.wake.notify_one();
    let r = shared.counters.idle(Deadline::after(timeout)).await;
    shared.flushing.fetch_sub(1, Ordering::AcqRel);
    r
}

/// The partitions of `topic`, from fresh metadata, waiting out transient errors (a topic just
/// created has no leaders yet) until `deadline`. A topic the cluster does not have is
/// [`Error::UnknownTopic`] at once.
async fn topic_partitions(
    cluster: &Cluster,
    topic: &str,
    deadline: Deadline,
) -> Result<Vec<PartitionInfo>> {
    cluster.add_interest([&topic.to_string()]);
    // Not `backoff::retry_until`: a failed refresh has used up the deadline already and is
    // returned as it is, while a retriable topic error that outlasts the deadline becomes a
    // Timeout naming the topic; retry_until returns the last error unchanged either way.
    let mut retry = Retry::new(cluster.backoff());
    loop {
        let m = cluster.refresh(&[topic.to_string()], deadline).await?;
        let last = match m.topics.get(topic) {
            None => return Err(Error::UnknownTopic(topic.to_string())),
            Some(t) if t.error_code == codes::UNKNOWN_TOPIC_OR_PARTITION => {
                return Err(Error::UnknownTopic(topic.to_string()))
            }
            Some(t) if t.error_code == codes::NONE && !t.partitions.is_empty() => {
                return Ok(t.partitions.clone())
            }
            Some(t) if t.error_code == codes::NONE => Error::kafka(
                codes::LEADER_NOT_AVAILABLE,
                "the topic has no partitions yet",
            ),
            Some(t) => {
                let e = Error::kafka(t.error_code, format!("metadata for topic `{topic}`"));
                if !matches!(
                    kafka_error_action(t.error_code),
                    Action::Retry | Action::RefreshMetadata
                ) {
                    return Err(e);
                }
                e
            }
        };
        let wait = retry.failed();
        if deadline.remaining() <= wait {
            return Err(Error::Timeout(format!(
                "metadata for topic `{topic}` was not available within {} ms: {last}",
                deadline.timeout().as_millis()
            )));
        }
        tokio::time::sleep(wait).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The defaults of the config table, with `client.id` lagless-test.
    pub(crate) fn test_config(bootstrap: &str) -> ProducerConfig {
        let c = crate::config::Config::from_pairs([
            ("bootstrap.servers", bootstrap),
            ("client.id", "lagless-test"),
        ]);
        ProducerConfig::from_config(&c.unwrap()).unwrap()
    }

    #[test]
    fn a_producer_config_naming_a_codec_left_out_is_refused() {
        // A ProducerConfig built by hand skips ProducerConfig::from_config's check.
        for codec in ["gzip", "snappy", "lz4", "zstd"] {
            let mut c = test_config("127.0.0.1:1");
            c.compression_type = codec.into();
            let built_in = Compression::parse(codec).unwrap().is_enabled();
            match Producer::new(c) {
                Ok(p) => {
                    assert!(built_in, "{codec} is left out but accepted");
                    p.close(Duration::from_millis(10)).unwrap();
                }
                Err(Error::Config { key, message }) => {
                    assert!(!built_in, "{codec} is built in but refused: {message}");
                    assert_eq!(key, "compression.type");
                    assert!(message.contains(&format!("`{codec}` feature")), "{message}");
                }
                Err(e) => panic!("{codec}: not a config error: {e:?}"),
            }
        }
    }

    #[test]
    fn config_and_argument_errors() {
        let mut c = test_config("127.0.0.1:1");
        c.acks = 2;
        assert!(matches!(Producer::new(c), Err(Error::Config { key, .. }) if key == "acks"));
        let mut c = test_config("127.0.0.1:1");
        c.compression_type = "brotli".into();
        assert!(
            matches!(Producer::new(c), Err(Error::Config { key, .. }) if key == "compression.type")
        );
        let p = Producer::new(test_config("127.0.0.1:1")).unwrap();
        let e = p.send(ProducerRecord::new("", "v")).err().unwrap();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        p.flush(Duration::from_millis(10)).unwrap();
        p.close(Duration::from_millis(10)).unwrap();
        assert!(matches!(
            p.send(ProducerRecord::new("t", "v")),
            Err(Error::Closed)
        ));
    }

    #[test]
    fn unreachable_cluster_fails_send_without_hanging_drop() {
        let mut c = test_config("127.0.0.1:1");
        c.delivery_timeout = Duration::from_millis(300);
        let p = Producer::new(c).unwrap();
        let t = Instant::now();
        let e = p.send(ProducerRecord::new("t", "v")).err().unwrap();
        assert!(e.is_retriable(), "{e}");
        assert!(t.elapsed() < Duration::from_secs(5));
        let t = Instant::now();
        drop(p);
        assert!(t.elapsed() < Duration::from_secs(3));
    }
}
