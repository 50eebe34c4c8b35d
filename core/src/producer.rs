//! The producer: a blocking API in front of a background sender.
//!
//! [`Producer::send`] picks a partition, appends the record to that partition's open batch in the
//! accumulator and returns a [`Delivery`] at once. A sender task on the producer's own I/O
//! runtime drains ready batches (full, lingered long enough, or flushed), groups them by leader
//! broker into one Produce request per broker, and completes each record's delivery from the
//! broker's answer. At most one batch per partition is in flight, so records of a partition are
//! written in the order they were sent, retries included.
//!
//! Retries are bounded by time, not counts: a batch is retried with backoff until
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
use crate::protocol::msg::{
    produce_request::{PartitionProduceData, TopicProduceData},
    ProduceRequest, StrBytes, TopicName,
};
pub use crate::protocol::records::Header;
use crate::protocol::records::{BatchBuilder, Compression};

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
    pub topic: String,
    /// `None`: the partitioner chooses (by key, or sticky for records without a key).
    pub partition: Option<i32>,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
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

    pub fn with_key(mut self, key: impl Into<Bytes>) -> ProducerRecord {
        self.key = Some(key.into());
        self
    }

    pub fn with_partition(mut self, partition: i32) -> ProducerRecord {
        self.partition = Some(partition);
        self
    }

    pub fn with_timestamp(mut self, timestamp_ms: i64) -> ProducerRecord {
        self.timestamp = Some(timestamp_ms);
        self
    }

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
    pub topic: String,
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
            r = self.slot.ready.wait(r).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// The outcome if it is known, without blocking. It stays available: a later `wait` returns
    /// it again.
    pub fn try_get(&mut self) -> Option<Result<RecordMetadata>> {
        lock(&self.slot.result).clone()
    }
}

// ---------------------------------------------------------------------------------------------
// Partitioning
// ---------------------------------------------------------------------------------------------

/// Java's `Utils.murmur2`, bit for bit: the hash the Java client partitions keys with.
pub fn murmur2(data: &[u8]) -> i32 {
    const SEED: u32 = 0x9747_b28c;
    const M: u32 = 0x5bd1_e995;
    const R: u32 = 24;
    let len = data.len();
    let mut h: u32 = SEED ^ (len as u32);
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if tail.len() >= 3 {
        h ^= (tail[2] as u32) << 16;
    }
    if tail.len() >= 2 {
        h ^= (tail[1] as u32) << 8;
    }
    if !tail.is_empty() {
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h as i32
}

/// The partition the Java client's built-in partitioner gives a key:
/// `(murmur2(key) & 0x7fffffff) % num_partitions`.
pub fn partition_for_key(key: &[u8], num_partitions: i32) -> i32 {
    (murmur2(key) & 0x7fff_ffff) % num_partitions.max(1)
}

// ---------------------------------------------------------------------------------------------
// Completion bookkeeping
// ---------------------------------------------------------------------------------------------

/// Buffered bytes (for `buffer.memory`) and records not yet completed (for `flush`).
#[derive(Default)]
struct Counters {
    state: Mutex<CounterState>,
    changed: Condvar,
}

#[derive(Default)]
struct CounterState {
    bytes: usize,
    outstanding: u64,
}

impl Counters {
    /// Takes `size` bytes of `limit`, waiting for room until `deadline`. One record always fits
    /// into an empty buffer, whatever its size.
    fn reserve(&self, size: usize, limit: usize, deadline: Deadline) -> Result<()> {
        let mut s = lock(&self.state);
        while s.bytes > 0 && s.bytes + size > limit {
            let left = deadline.remaining();
            if left.is_zero() {
                return Err(Error::Timeout(format!(
                    "send: buffer.memory ({limit} bytes) stayed full for {} ms (default.api.timeout.ms)",
                    deadline.timeout().as_millis()
                )));
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        s.bytes += size;
        s.outstanding += 1;
        Ok(())
    }

    fn release(&self, bytes: usize, records: u64) {
        let mut s = lock(&self.state);
        s.bytes = s.bytes.saturating_sub(bytes);
        s.outstanding = s.outstanding.saturating_sub(records);
        drop(s);
        self.changed.notify_all();
    }

    fn wait_idle(&self, deadline: Deadline) -> Result<()> {
        let mut s = lock(&self.state);
        while s.outstanding > 0 {
            let left = deadline.remaining();
            if left.is_zero() {
                return Err(Error::Timeout(format!(
                    "flush did not complete within {} ms: {} records still unacknowledged",
                    deadline.timeout().as_millis(),
                    s.outstanding
                )));
            }
            s = self
                .changed
                .wait_timeout(s, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
        Ok(())
    }
}

/// A batch's outcome: (base offset, log append time or -1), or the error of all its records.
type BatchOutcome = std::result::Result<(i64, i64), Error>;

type Callback = Box<dyn FnOnce(Result<RecordMetadata>) + Send + 'static>;

enum Completion {
    Slot(Arc<DeliverySlot>),
    Callback(Callback),
}

impl Completion {
    fn complete(self, r: Result<RecordMetadata>) {
        match self {
            Completion::Slot(s) => {
                *lock(&s.result) = Some(r);
                s.ready.notify_all();
            }
            Completion::Callback(cb) => {
                // A panicking callback must not take the I/O task (and other records) with it.
                if std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| cb(r))).is_err() {
                    tracing::error!("a producer delivery callback panicked");
                }
            }
        }
    }
}

/// The records of one batch waiting for their outcome. Dropped without completing (the
/// producer stopped), they fail with [`Error::Closed`], so no [`Delivery`] waits forever.
struct Pending {
    counters: Arc<Counters>,
    topic: Arc<str>,
    partition: i32,
    entries: Vec<(Completion, i64)>,
    bytes: usize,
}

impl Pending {
    fn new(counters: Arc<Counters>, topic: Arc<str>, partition: i32) -> Pending {
        Pending {
            counters,
            topic,
            partition,
            entries: Vec::new(),
            bytes: 0,
        }
    }

    /// Completes every record: `Ok` with offsets `base_offset + index`, or the same error.
    fn complete(&mut self, outcome: BatchOutcome) {
        let entries = std::mem::take(&mut self.entries);
        let n = entries.len() as u64;
        let topic = self.topic.to_string();
        for (i, (c, ts)) in entries.into_iter().enumerate() {
            let r = match &outcome {
                Ok((base, append_time)) => Ok(RecordMetadata {
                    topic: topic.clone(),
                    partition: self.partition,
                    offset: if *base < 0 { -1 } else { base + i as i64 },
                    timestamp: if *append_time >= 0 { *append_time } else { ts },
                }),
                Err(e) => Err(e.clone()),
            };
            c.complete(r);
        }
        self.counters.release(std::mem::take(&mut self.bytes), n);
    }

    fn fail(&mut self, e: Error) {
        self.complete(Err(e));
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if !self.entries.is_empty() {
            self.fail(Error::Closed);
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The accumulator
// ---------------------------------------------------------------------------------------------

/// A batch still taking records.
struct OpenBatch {
    id: u64,
    builder: BatchBuilder,
    pending: Pending,
    created: Instant,
    /// No more records go in; send it as soon as the partition allows.
    full: bool,
}

/// A batch encoded for the wire (after a first attempt, kept for retries).
struct Sealed {
    data: Bytes,
    pending: Pending,
    created: Instant,
    retry: Retry,
}

enum Drained {
    Open(OpenBatch),
    Sealed(Sealed),
}

#[derive(Default)]
struct PartitionQueue {
    /// A batch that failed and waits for `retry_at`; it goes before everything in `open`.
    retry: Option<Sealed>,
    retry_at: Option<Instant>,
    open: VecDeque<OpenBatch>,
    in_flight: bool,
}

#[derive(Clone, Copy)]
struct Sticky {
    partition: i32,
    /// The batch the sticky partition's records went into; `None` until the first one.
    batch: Option<u64>,
}

#[derive(Default)]
struct TopicQueues {
    parts: Vec<PartitionQueue>,
    sticky: Option<Sticky>,
}

/// Where a record goes: a partition already chosen, or the sticky partition of its topic.
#[derive(Clone, Copy)]
enum Target {
    Partition(i32),
    Sticky,
}

struct RecordParts<'a> {
    timestamp: i64,
    key: Option<&'a [u8]>,
    value: Option<&'a [u8]>,
    headers: &'a [Header],
    size: usize,
}

#[derive(Default)]
struct DrainResult {
    /// (leader, request slot, batch)
    batches: Vec<(i32, usize, Drained)>,
    /// Batches whose delivery timeout passed before they could be sent.
    expired: Vec<Drained>,
    next_wake: Option<Instant>,
    need_metadata: bool,
}

fn earliest(a: &mut Option<Instant>, t: Instant) {
    match a {
        Some(x) if *x <= t => {}
        _ => *a = Some(t),
    }
}

/// Per-partition queues of batches, shared by `send` (appends) and the sender (drains).
struct Accumulator {
    topics: HashMap<Arc<str>, TopicQueues>,
    batch_size: usize,
    linger: Duration,
    compression: Compression,
    next_id: u64,
}

impl Accumulator {
    fn new(batch_size: usize, linger: Duration, compression: Compression) -> Accumulator {
        Accumulator {
            topics: HashMap::new(),
            batch_size: batch_size.max(1),
            linger,
            compression,
            next_id: 1,
        }
    }

    /// Appends a record; returns its partition and whether the sender should look (a batch
    /// became ready or a new batch started its linger clock).
    #[allow(clippy::too_many_arguments)]
    fn append(
        &mut self,
        topic: &str,
        num_partitions: i32,
        target: Target,
        partitions: &[PartitionInfo],
        rec: RecordParts<'_>,
        completion: Completion,
        counters: &Arc<Counters>,
        now: Instant,
    ) -> (i32, bool) {
        if !self.topics.contains_key(topic) {
            self.topics.insert(Arc::from(topic), TopicQueues::default());
        }
        let topic_arc = self
            .topics
            .get_key_value(topic)
            .map(|(k, _)| k.clone())
            .expect("inserted above");
        let tq = self.topics.get_mut(topic).expect("inserted above");
        let n = num_partitions.max(1) as usize;
        if tq.parts.len() < n {
            tq.parts.resize_with(n, PartitionQueue::default);
        }
        let batch_size = self.batch_size;
        let mut wake = false;
        let p = match target {
            Target::Partition(p) => p,
            Target::Sticky => {
                let (p, switched_from_full) =
                    choose_sticky(tq, num_partitions, partitions, rec.size, batch_size);
                wake |= switched_from_full;
                p
            }
        };
        let q = &mut tq.parts[p as usize];
        let reuse = match q.open.back_mut() {
            Some(b) if !b.full => {
                if b.builder.is_empty() || b.builder.estimated_size() + rec.size <= batch_size {
                    true
                } else {
                    b.full = true;
                    false
                }
            }
            _ => false,
        };
        if !reuse {
            let id = self.next_id;
            self.next_id += 1;
            q.open.push_back(OpenBatch {
                id,
                builder: BatchBuilder::new(self.compression),
                pending: Pending::new(counters.clone(), topic_arc.clone(), p),
                created: now,
                full: false,
            });
            wake = true;
        }
        let b = q.open.back_mut().expect("pushed above");
        b.builder
            .push(rec.timestamp, rec.key, rec.value, rec.headers);
        b.pending.entries.push((completion, rec.timestamp));
        b.pending.bytes += rec.size;
        if b.builder.estimated_size() >= batch_size {
            b.full = true;
            wake = true;
        }
        if matches!(target, Target::Sticky) {
            tq.sticky = Some(Sticky {
                partition: p,
                batch: Some(b.id),
            });
        }
        (p, wake)
    }

    /// Takes the batches that are ready and whose partition has nothing in flight. `leader_of`
    /// says where a partition's leader is; `admit(leader, bytes)` assigns the batch to a request
    /// (by slot number) or refuses it (no request may be started to that broker now).
    fn drain(
        &mut self,
        now: Instant,
        force: bool,
        delivery_timeout: Duration,
        leader_of: impl Fn(&str, i32) -> Option<i32>,
        mut admit: impl FnMut(i32, usize) -> Option<usize>,
    ) -> DrainResult {
        let mut out = DrainResult::default();
        for (topic, tq) in self.topics.iter_mut() {
            for (p, q) in tq.parts.iter_mut().enumerate() {
                let p = p as i32;
                if q.in_flight {
                    continue;
                }
                // Batches that waited too long (no leader, broker down) fail here.
                loop {
                    if let Some(r) = &q.retry {
                        if now >= r.created + delivery_timeout {
                            out.expired
                                .push(Drained::Sealed(q.retry.take().expect("some")));
                            q.retry_at = None;
                            continue;
                        }
                        break;
                    }
                    match q.open.front() {
                        Some(b) if now >= b.created + delivery_timeout => {
                            out.expired
                                .push(Drained::Open(q.open.pop_front().expect("some")));
                        }
                        _ => break,
                    }
                }
                let (ready, size, at, created) = if let Some(r) = &q.retry {
                    let at = q.retry_at.unwrap_or(now);
                    (at <= now, r.data.len(), at, r.created)
                } else if let Some(b) = q.open.front() {
                    let at = b.created + self.linger;
                    let ready = force || b.full || q.open.len() > 1 || at <= now;
                    (ready, b.builder.estimated_size(), at, b.created)
                } else {
                    continue;
                };
                earliest(&mut out.next_wake, created + delivery_timeout);
                if !ready {
                    earliest(&mut out.next_wake, at);
                    continue;
                }
                let Some(leader) = leader_of(topic, p) else {
                    out.need_metadata = true;
                    continue;
                };
                let Some(slot) = admit(leader, size) else {
                    continue;
                };
                let d = match q.retry.take() {
                    Some(r) => {
                        q.retry_at = None;
                        Drained::Sealed(r)
                    }
                    None => Drained::Open(q.open.pop_front().expect("checked above")),
                };
                q.in_flight = true;
                out.batches.push((leader, slot, d));
            }
        }
        out
    }

    /// Puts a batch back for a retry at `at`, before everything else of its partition.
    fn requeue(&mut self, batch: Sealed, at: Instant) {
        let (topic, p) = (batch.pending.topic.clone(), batch.pending.partition);
        if let Some(q) = self
            .topics
            .get_mut(&*topic)
            .and_then(|t| t.parts.get_mut(p as usize))
        {
            q.retry = Some(batch);
            q.retry_at = Some(at);
        }
        // A partition that vanished from the accumulator cannot happen; if it did, dropping the
        // batch fails its records with Error::Closed.
    }

    fn done(&mut self, topic: &str, partition: i32) {
        if let Some(q) = self
            .topics
            .get_mut(topic)
            .and_then(|t| t.parts.get_mut(partition as usize))
        {
            q.in_flight = false;
        }
    }
}

/// The sticky partition for an unkeyed record of `size` bytes, switching to another partition
/// (preferring ones with a leader) when the current one's batch is full or was sent. The flag
/// says a batch was closed by the switch.
fn choose_sticky(
    tq: &mut TopicQueues,
    n: i32,
    partitions: &[PartitionInfo],
    size: usize,
    batch_size: usize,
) -> (i32, bool) {
    let mut closed = false;
    if let Some(s) = tq.sticky {
        if s.partition < n {
            let q = &mut tq.parts[s.partition as usize];
            match s.batch {
                None => return (s.partition, false),
                Some(id) => {
                    if let Some(b) = q.open.back_mut() {
                        if b.id == id && !b.full {
                            if b.builder.estimated_size() + size <= batch_size {
                                return (s.partition, false);
                            }
                            b.full = true;
                            closed = true;
                        }
                    }
                }
            }
        }
    }
    let prev = tq.sticky.map(|s| s.partition);
    let mut rng = rand::thread_rng();
    let available: Vec<i32> = partitions
        .iter()
        .filter(|i| i.leader >= 0 && i.partition < n && Some(i.partition) != prev)
        .map(|i| i.partition)
        .collect();
    let p = if !available.is_empty() {
        available[rng.gen_range(0..available.len())]
    } else if n > 1 {
        let mut p = rng.gen_range(0..n - 1);
        if Some(p) >= prev {
            p += 1;
        }
        p
    } else {
        0
    };
    tq.sticky = Some(Sticky {
        partition: p,
        batch: None,
    });
    (p, closed)
}

/// An upper bound of the bytes a record takes in a batch.
fn record_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
    // length, attributes, timestamp delta, offset delta, key and value lengths, header count.
    let mut size = 5 + 1 + 10 + 5 + 5 + 5 + 5;
    size += key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len());
    for h in headers {
        size += 10 + h.key.len() + h.value.as_ref().map_or(0, |v| v.len());
    }
    size
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
}

/// A Kafka producer. `Send + Sync`: share it between threads behind an `Arc`.
///
/// It owns a small I/O runtime (two threads named `lagless-producer`) that runs the sender and
/// the broker connections.
pub struct Producer {
    shared: Arc<Shared>,
    handle: tokio::runtime::Handle,
    runtime: Mutex<Option<tokio::runtime::Runtime>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Producer {
    /// Checks the configuration and starts the I/O runtime. Connections are made lazily, on the
    /// first `send` or `partitions_for`.
    /// A producer from string settings (Java key names).
    pub fn from_config(config: &crate::config::Config) -> Result<Producer> {
        Producer::new(ProducerConfig::from_config(config)?)
    }

    pub fn new(config: ProducerConfig) -> Result<Producer> {
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
        let compression = Compression::parse(&config.compression_type).ok_or_else(|| {
            Error::config(
                "compression.type",
                format!(
                    "`{}` is not one of none, gzip, snappy, lz4, zstd",
                    config.compression_type
                ),
            )
        })?;
        if !compression.is_available() {
            return Err(Error::config(
                "compression.type",
                compression.unavailable_reason(),
            ));
        }
        if config.batch_size == 0 {
            return Err(Error::config("batch.size", "must be at least 1"));
        }
        if config.max_in_flight_requests_per_connection == 0 {
            return Err(Error::config(
                "max.in.flight.requests.per.connection",
                "must be at least 1",
            ));
        }
        let runtime = crate::io_runtime("lagless-producer")?;
        let batch_size = config.batch_size.min(config.max_request_size.max(1));
        let shared = Arc::new(Shared {
            cluster: Cluster::new(config.common.clone()),
            acc: Mutex::new(Accumulator::new(batch_size, config.linger, compression)),
            counters: Arc::new(Counters::default()),
            config,
            wake: Notify::new(),
            flushing: AtomicUsize::new(0),
            closed: AtomicBool::new(false),
            refresh_wanted: AtomicBool::new(false),
            refreshing: AtomicBool::new(false),
        });
        runtime.spawn(sender_loop(shared.clone()));
        Ok(Producer {
            shared,
            handle: runtime.handle().clone(),
            runtime: Mutex::new(Some(runtime)),
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

    fn enqueue(&self, record: ProducerRecord, completion: Completion) -> Result<()> {
        let shared = &self.shared;
        if shared.closed.load(Ordering::Acquire) {
            return Err(Error::Closed);
        }
        if record.topic.is_empty() {
            return Err(Error::InvalidArgument(
                "the record's topic is empty".to_string(),
            ));
        }
        let meta = {
            let m = shared.cluster.metadata();
            match m.topics.get(&record.topic) {
                Some(t) if t.error_code == codes::NONE && !t.partitions.is_empty() => m,
                _ => {
                    let deadline = Deadline::after(shared.config.delivery_timeout);
                    let (cluster, topic) = (shared.cluster.clone(), record.topic.clone());
                    self.run(async move { topic_partitions(&cluster, &topic, deadline).await })?;
                    shared.cluster.metadata()
                }
            }
        };
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
        shared.counters.reserve(
            size,
            shared.config.buffer_memory,
            Deadline::after(shared.config.common.default_api_timeout),
        )?;
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
        Ok(())
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

    /// Flushes (up to `timeout`), then stops the producer. Records still unacknowledged fail
    /// with [`Error::Closed`]; later calls to `send` fail with it too.
    pub fn close(&self, timeout: Duration) -> Result<()> {
        let r = if self.shared.closed.load(Ordering::Acquire) {
            Ok(())
        } else {
            self.flush(timeout)
        };
        self.stop();
        r
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
        if lock(&self.runtime).is_none() {
            return;
        }
        if !self.shared.closed.load(Ordering::Acquire)
            && tokio::runtime::Handle::try_current().is_err()
        {
            let timeout = DROP_FLUSH_TIMEOUT.min(self.shared.config.delivery_timeout);
            if let Err(e) = self.flush(timeout) {
                tracing::warn!(error = %e, "producer dropped with records still unacknowledged");
            }
        }
        self.stop();
    }
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

// ---------------------------------------------------------------------------------------------
// The sender
// ---------------------------------------------------------------------------------------------

/// One Produce request being assembled.
struct RequestPlan {
    leader: i32,
    permit: OwnedSemaphorePermit,
    bytes: usize,
    batches: Vec<Sealed>,
}

async fn sender_loop(shared: Arc<Shared>) {
    let mut permits: HashMap<i32, Arc<Semaphore>> = HashMap::new();
    let max_in_flight = shared.config.max_in_flight_requests_per_connection;
    let max_request = shared.config.max_request_size;
    loop {
        let closing = shared.closed.load(Ordering::Acquire);
        let force = closing || shared.flushing.load(Ordering::Acquire) > 0;
        let meta = shared.cluster.metadata();
        let now = Instant::now();
        let mut plans: Vec<RequestPlan> = Vec::new();
        // leader -> index in `plans` of its request still taking batches
        let mut open_plan: HashMap<i32, usize> = HashMap::new();
        let drained = {
            let mut acc = lock(&shared.acc);
            acc.drain(
                now,
                force,
                shared.config.delivery_timeout,
                |t, p| {
                    meta.partition(t, p)
                        .map(|i| i.leader)
                        .filter(|l| *l >= 0 && meta.brokers.contains_key(l))
                },
                |leader, size| {
                    if let Some(&i) = open_plan.get(&leader) {
                        if plans[i].bytes + size <= max_request {
                            plans[i].bytes += size;
                            return Some(i);
                        }
                    }
                    let sem = permits
                        .entry(leader)
                        .or_insert_with(|| Arc::new(Semaphore::new(max_in_flight)));
                    let permit = sem.clone().try_acquire_owned().ok()?;
                    plans.push(RequestPlan {
                        leader,
                        permit,
                        bytes: size,
                        batches: Vec::new(),
                    });
                    open_plan.insert(leader, plans.len() - 1);
                    Some(plans.len() - 1)
                },
            )
        };
        for d in drained.expired {
            let mut pending = match d {
                Drained::Open(b) => b.pending,
                Drained::Sealed(s) => s.pending,
            };
            let e = Error::Timeout(format!(
                "{} records for {}-{} were not delivered within delivery.timeout.ms ({} ms)",
                pending.entries.len(),
                pending.topic,
                pending.partition,
                shared.config.delivery_timeout.as_millis()
            ));
            pending.fail(e);
        }
        for (_, slot, d) in drained.batches {
            let sealed = match d {
                Drained::Sealed(s) => Some(s),
                Drained::Open(b) => {
                    let OpenBatch {
                        builder,
                        mut pending,
                        created,
                        ..
                    } = b;
                    match builder.finish() {
                        Ok(data) => Some(Sealed {
                            data,
                            pending,
                            created,
                            retry: Retry::new(shared.cluster.backoff()),
                        }),
                        Err(e) => {
                            let (t, p) = (pending.topic.clone(), pending.partition);
                            pending.fail(e);
                            lock(&shared.acc).done(&t, p);
                            None
                        }
                    }
                }
            };
            if let Some(s) = sealed {
                plans[slot].batches.push(s);
            }
        }
        for plan in plans {
            if plan.batches.is_empty() {
                continue;
            }
            tokio::spawn(produce(shared.clone(), plan));
        }
        if drained.need_metadata {
            shared.refresh_wanted.store(true, Ordering::Release);
        }
        let age = meta
            .fetched_at
            .map(|t| now.saturating_duration_since(t))
            .unwrap_or(Duration::ZERO);
        if age >= shared.config.common.metadata_max_age && meta.fetched_at.is_some() {
            shared.refresh_wanted.store(true, Ordering::Release);
        }
        maybe_refresh(&shared);
        let mut wake_at = now + Duration::from_secs(1);
        if let Some(t) = drained.next_wake {
            wake_at = wake_at.min(t.max(now + Duration::from_millis(1)));
        }
        if drained.need_metadata {
            // Poll for the new leader no more often than retry.backoff.ms.
            wake_at = wake_at.min(now + shared.config.common.retry_backoff);
        }
        tokio::select! {
            _ = shared.wake.notified() => {}
            _ = tokio::time::sleep_until(wake_at.into()) => {}
        }
    }
}

/// Starts a metadata refresh in the background when one was asked for and none is running.
fn maybe_refresh(shared: &Arc<Shared>) {
    if !shared.refresh_wanted.load(Ordering::Acquire) {
        return;
    }
    if shared.refreshing.swap(true, Ordering::AcqRel) {
        return;
    }
    shared.refresh_wanted.store(false, Ordering::Release);
    let shared = shared.clone();
    tokio::spawn(async move {
        let deadline = Deadline::after(shared.config.common.request_timeout);
        if let Err(e) = shared.cluster.refresh(&[], deadline).await {
            tracing::debug!(error = %e, "producer metadata refresh failed");
        }
        // Do not hammer the cluster when leaders are missing for a while.
        tokio::time::sleep(shared.config.common.retry_backoff).await;
        shared.refreshing.store(false, Ordering::Release);
        shared.wake.notify_one();
    });
}

enum Outcome {
    Done { base_offset: i64, append_time: i64 },
    Retry { error: Error, refresh: bool },
    Fail(Error),
}

/// Sends one Produce request and settles each of its batches.
async fn produce(shared: Arc<Shared>, plan: RequestPlan) {
    let RequestPlan {
        leader,
        permit,
        batches,
        ..
    } = plan;
    let acks = shared.config.acks;
    let mut topics: Vec<(Arc<str>, Vec<PartitionProduceData>)> = Vec::new();
    for b in &batches {
        let data = PartitionProduceData::default()
            .with_index(b.pending.partition)
            .with_records(Some(b.data.clone()));
        match topics.iter_mut().find(|(t, _)| *t == b.pending.topic) {
            Some((_, v)) => v.push(data),
            None => topics.push((b.pending.topic.clone(), vec![data])),
        }
    }
    let req = ProduceRequest::default()
        .with_acks(acks)
        .with_timeout_ms(
            shared
                .config
                .common
                .request_timeout
                .as_millis()
                .min(i32::MAX as u128) as i32,
        )
        .with_topic_data(
            topics
                .into_iter()
                .map(|(t, parts)| {
                    TopicProduceData::default()
                        .with_name(TopicName(StrBytes::from_string(t.to_string())))
                        .with_partition_data(parts)
                })
                .collect(),
        );
    let result = async {
        let conn = shared
            .cluster
            .broker(
                leader,
                Deadline::after(shared.config.common.request_timeout),
            )
            .await?;
        if acks == 0 {
            conn.send_no_response(&req)?;
            return Ok(None);
        }
        conn.call(&req).await.map(Some)
    }
    .await;
    let outcomes: Vec<Outcome> = match result {
        // Connection trouble is retried (after a metadata refresh: the leader may have moved);
        // a broker too old for lagless or an undecodable answer is not.
        Err(e) => batches
            .iter()
            .map(|b| {
                if e.is_retriable() {
                    Outcome::Retry {
                        error: e.clone(),
                        refresh: true,
                    }
                } else {
                    Outcome::Fail(match &e {
                        Error::Kafka { code, context, .. } => Error::kafka_partition(
                            *code,
                            context.clone(),
                            &b.pending.topic,
                            b.pending.partition,
                        ),
                        other => other.clone(),
                    })
                }
            })
            .collect(),
        Ok(None) => batches
            .iter()
            .map(|_| Outcome::Done {
                base_offset: -1,
                append_time: -1,
            })
            .collect(),
        Ok(Some(resp)) => batches
            .iter()
            .map(|b| {
                let (topic, p) = (&*b.pending.topic, b.pending.partition);
                let pr = resp
                    .responses
                    .iter()
                    .filter(|t| t.name.0.as_str() == topic)
                    .flat_map(|t| t.partition_responses.iter())
                    .find(|r| r.index == p);
                let Some(pr) = pr else {
                    return Outcome::Retry {
                        error: Error::Corrupt(format!(
                            "the Produce response of broker {leader} has no answer for {topic}-{p}"
                        )),
                        refresh: false,
                    };
                };
                if pr.error_code == codes::NONE {
                    return Outcome::Done {
                        base_offset: pr.base_offset,
                        append_time: pr.log_append_time_ms,
                    };
                }
                let mut context = format!("producing to broker {leader}");
                if let Some(m) = &pr.error_message {
                    context.push_str(": ");
                    context.push_str(m.as_str());
                }
                let error = Error::kafka_partition(pr.error_code, context, topic, p);
                match kafka_error_action(pr.error_code) {
                    Action::Retry => Outcome::Retry {
                        error,
                        refresh: false,
                    },
                    Action::RefreshMetadata => Outcome::Retry {
                        error,
                        refresh: true,
                    },
                    _ => Outcome::Fail(error),
                }
            })
            .collect(),
    };
    // Settle under the lock (in-flight flags, retries), complete outside it: callbacks may send.
    let mut finished: Vec<(Pending, BatchOutcome)> = Vec::new();
    let mut refresh = false;
    {
        let now = Instant::now();
        let mut acc = lock(&shared.acc);
        for (mut b, outcome) in batches.into_iter().zip(outcomes) {
            let (topic, p) = (b.pending.topic.clone(), b.pending.partition);
            acc.done(&topic, p);
            let result = match outcome {
                Outcome::Done {
                    base_offset,
                    append_time,
                } => Ok((base_offset, append_time)),
                Outcome::Fail(e) => Err(e),
                Outcome::Retry { error, refresh: r } => {
                    refresh |= r;
                    if now < b.created + shared.config.delivery_timeout
                        && !shared.closed.load(Ordering::Acquire)
                    {
                        tracing::debug!(error = %error, "produce to {topic}-{p} failed; retrying");
                        let wait = b.retry.failed();
                        let at = (now + wait).min(b.created + shared.config.delivery_timeout);
                        acc.requeue(b, at);
                        continue;
                    }
                    Err(Error::Timeout(format!(
                        "{} records for {topic}-{p} were not delivered within delivery.timeout.ms ({} ms); last error: {error}",
                        b.pending.entries.len(),
                        shared.config.delivery_timeout.as_millis()
                    )))
                }
            };
            let pending = std::mem::replace(
                &mut b.pending,
                Pending::new(shared.counters.clone(), topic, p),
            );
            finished.push((pending, result));
        }
    }
    drop(permit);
    if refresh {
        shared.refresh_wanted.store(true, Ordering::Release);
    }
    shared.wake.notify_one();
    for (mut pending, result) in finished {
        pending.complete(result);
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
    fn murmur2_matches_java() {
        let cases: &[(&str, i32)] = &[
            ("21", -973932308),
            ("foobar", -790332482),
            ("a-little-bit-long-string", -985981536),
            ("a-little-bit-longer-string", -1486304829),
            (
                "lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8",
                -58897971,
            ),
            ("abc", 479470107),
        ];
        for (s, want) in cases {
            assert_eq!(murmur2(s.as_bytes()), *want, "murmur2({s:?})");
            let n = 7;
            assert_eq!(
                partition_for_key(s.as_bytes(), n),
                (want & 0x7fff_ffff) % n,
                "partition_for_key({s:?})"
            );
        }
        // Every tail length (len % 4 = 0..3) stays in range.
        for n in [1, 2, 3, 6, 100] {
            for k in ["", "a", "ab", "abc", "abcd"] {
                let p = partition_for_key(k.as_bytes(), n);
                assert!((0..n).contains(&p));
            }
        }
    }

    fn parts(n: i32) -> Vec<PartitionInfo> {
        (0..n)
            .map(|p| PartitionInfo {
                partition: p,
                leader: 1,
                leader_epoch: 0,
                error_code: 0,
            })
            .collect()
    }

    struct Harness {
        acc: Accumulator,
        counters: Arc<Counters>,
        infos: Vec<PartitionInfo>,
    }

    impl Harness {
        fn new(batch_size: usize, linger_ms: u64, n: i32) -> Harness {
            Harness {
                acc: Accumulator::new(
                    batch_size,
                    Duration::from_millis(linger_ms),
                    Compression::None,
                ),
                counters: Arc::new(Counters::default()),
                infos: parts(n),
            }
        }

        fn append(&mut self, target: Target, value: &[u8], now: Instant) -> (i32, Delivery) {
            let slot = Arc::new(DeliverySlot::default());
            let size = record_size(None, Some(value), &[]);
            self.counters
                .reserve(size, usize::MAX, Deadline::after(Duration::ZERO))
                .unwrap();
            let (p, _) = self.acc.append(
                "t",
                self.infos.len() as i32,
                target,
                &self.infos,
                RecordParts {
                    timestamp: 1,
                    key: None,
                    value: Some(value),
                    headers: &[],
                    size,
                },
                Completion::Slot(slot.clone()),
                &self.counters,
                now,
            );
            (p, Delivery { slot })
        }

        fn drain(&mut self, now: Instant, force: bool) -> DrainResult {
            self.acc.drain(
                now,
                force,
                Duration::from_secs(120),
                |_, _| Some(1),
                |_, _| Some(0),
            )
        }
    }

    fn records_of(d: &Drained) -> usize {
        match d {
            Drained::Open(b) => b.builder.len(),
            Drained::Sealed(s) => s.pending.entries.len(),
        }
    }

    #[test]
    fn batch_is_ready_when_full() {
        let mut h = Harness::new(1000, 3_600_000, 1);
        let t0 = Instant::now();
        let v = [7u8; 100];
        let mut appended = 0;
        let r = loop {
            h.append(Target::Partition(0), &v, t0);
            appended += 1;
            let r = h.drain(t0, false);
            if !r.batches.is_empty() {
                break r;
            }
            assert!(appended < 20, "never ready");
        };
        assert_eq!(r.batches.len(), 1);
        let Drained::Open(b) = &r.batches[0].2 else {
            panic!()
        };
        let (n, est) = (b.builder.len(), b.builder.estimated_size());
        assert!(est <= 1000 && est + 140 > 1000, "{n} records, {est} B");
        assert!(n == appended || n + 1 == appended);
        // A record larger than batch.size gets a batch of its own, ready at once.
        h.acc.done("t", 0);
        h.append(Target::Partition(0), &[1u8; 5000], t0);
        let r = h.drain(t0, false);
        assert_eq!(r.batches.len(), 1);
        assert_eq!(records_of(&r.batches[0].2), 1);
    }

    #[test]
    fn batch_is_ready_after_linger_or_on_flush() {
        let mut h = Harness::new(16384, 50, 2);
        let t0 = Instant::now();
        h.append(Target::Partition(0), b"x", t0);
        let r = h.drain(t0, false);
        assert!(r.batches.is_empty());
        assert_eq!(r.next_wake, Some(t0 + Duration::from_millis(50)));
        let r = h.drain(t0 + Duration::from_millis(49), false);
        assert!(r.batches.is_empty());
        let r = h.drain(t0 + Duration::from_millis(50), false);
        assert_eq!(r.batches.len(), 1);

        h.append(Target::Partition(1), b"y", t0);
        let r = h.drain(t0, true);
        assert_eq!(r.batches.len(), 1, "flush makes every batch ready");
    }

    #[test]
    fn one_batch_in_flight_per_partition() {
        let mut h = Harness::new(16384, 0, 1);
        let t0 = Instant::now();
        h.append(Target::Partition(0), b"a", t0);
        assert_eq!(h.drain(t0, false).batches.len(), 1);
        h.append(Target::Partition(0), b"b", t0);
        assert!(
            h.drain(t0, true).batches.is_empty(),
            "partition 0 is in flight"
        );
        h.acc.done("t", 0);
        assert_eq!(h.drain(t0, false).batches.len(), 1);
    }

    #[test]
    fn retried_batch_goes_first_after_its_backoff() {
        let mut h = Harness::new(16384, 0, 1);
        let t0 = Instant::now();
        h.append(Target::Partition(0), b"a", t0);
        let Drained::Open(b) = h.drain(t0, false).batches.pop().unwrap().2 else {
            panic!("expected an open batch")
        };
        h.append(Target::Partition(0), b"b", t0);
        let sealed = Sealed {
            data: b.builder.finish().unwrap(),
            pending: b.pending,
            created: b.created,
            retry: Retry::new(crate::backoff::Backoff::new(
                Duration::from_millis(100),
                Duration::from_secs(1),
            )),
        };
        h.acc.done("t", 0);
        h.acc.requeue(sealed, t0 + Duration::from_millis(100));
        let r = h.drain(t0, true);
        assert!(r.batches.is_empty(), "the retry waits for its backoff");
        assert_eq!(r.next_wake.unwrap(), t0 + Duration::from_millis(100));
        let r = h.drain(t0 + Duration::from_millis(100), false);
        assert!(matches!(r.batches[0].2, Drained::Sealed(_)));
    }

    #[test]
    fn unsendable_batches_expire_after_delivery_timeout() {
        let mut h = Harness::new(16384, 0, 1);
        let t0 = Instant::now();
        let (_, mut d) = h.append(Target::Partition(0), b"a", t0);
        let r = h
            .acc
            .drain(t0, false, Duration::from_secs(1), |_, _| None, |_, _| None);
        assert!(r.need_metadata);
        assert!(r.expired.is_empty());
        let mut r = h.acc.drain(
            t0 + Duration::from_secs(1),
            false,
            Duration::from_secs(1),
            |_, _| None,
            |_, _| None,
        );
        assert_eq!(r.expired.len(), 1);
        let Drained::Open(mut b) = r.expired.pop().unwrap() else {
            panic!()
        };
        b.pending.fail(Error::Timeout("x".into()));
        assert!(matches!(d.try_get(), Some(Err(Error::Timeout(_)))));
        assert_eq!(lock(&h.counters.state).outstanding, 0);
        assert_eq!(lock(&h.counters.state).bytes, 0);
    }

    #[test]
    fn sticky_partition_switches_when_batch_full_or_sent() {
        let mut h = Harness::new(500, 3_600_000, 6);
        let t0 = Instant::now();
        let v = [0u8; 100];
        let (first, _) = h.append(Target::Sticky, &v, t0);
        let mut same = 1;
        let second = loop {
            let (p, _) = h.append(Target::Sticky, &v, t0);
            if p != first {
                break p;
            }
            same += 1;
            assert!(same < 10, "never switched");
        };
        // 500 B holds three or four records of about 140 B.
        assert!((3..=4).contains(&same), "{same} records before switching");
        assert!(
            h.acc.topics["t"].parts[first as usize].open[0].full,
            "the abandoned batch is closed, to be sent"
        );
        // Sending the sticky partition's batch also moves unkeyed records elsewhere.
        let r = h.drain(t0, true);
        assert_eq!(r.batches.len(), 2);
        let (third, _) = h.append(Target::Sticky, &v, t0);
        assert_ne!(third, second);
        let (fourth, _) = h.append(Target::Sticky, &v, t0);
        assert_eq!(fourth, third, "stays while the batch has room");
    }

    #[test]
    fn sticky_prefers_partitions_with_a_leader() {
        let mut h = Harness::new(100, 3_600_000, 6);
        for i in &mut h.infos {
            i.leader = if i.partition == 4 || i.partition == 2 {
                1
            } else {
                -1
            };
        }
        let t0 = Instant::now();
        for _ in 0..50 {
            let (p, _) = h.append(Target::Sticky, &[0u8; 100], t0);
            assert!(p == 4 || p == 2, "picked leaderless partition {p}");
        }
    }

    #[test]
    fn dropped_records_fail_with_closed_and_release_memory() {
        let mut h = Harness::new(16384, 0, 1);
        let (_, d) = h.append(Target::Partition(0), b"a", Instant::now());
        assert_eq!(lock(&h.counters.state).outstanding, 1);
        h.acc.topics.clear();
        assert!(matches!(d.wait(), Err(Error::Closed)));
        assert_eq!(lock(&h.counters.state).outstanding, 0);
        assert_eq!(lock(&h.counters.state).bytes, 0);
    }

    #[test]
    fn completed_records_get_consecutive_offsets() {
        let mut h = Harness::new(16384, 0, 1);
        let t0 = Instant::now();
        let (_, mut d0) = h.append(Target::Partition(0), b"a", t0);
        let (_, d1) = h.append(Target::Partition(0), b"b", t0);
        assert!(d0.try_get().is_none());
        let Drained::Open(mut b) = h.drain(t0, false).batches.pop().unwrap().2 else {
            panic!()
        };
        b.pending.complete(Ok((41, -1)));
        let m0 = d0.try_get().unwrap().unwrap();
        assert_eq!((m0.topic.as_str(), m0.partition, m0.offset), ("t", 0, 41));
        assert_eq!(d0.wait().unwrap().offset, 41, "still there after try_get");
        assert_eq!(d1.wait().unwrap().offset, 42);
    }

    #[test]
    fn buffer_memory_blocks_then_times_out() {
        let c = Counters::default();
        c.reserve(80, 100, Deadline::after(Duration::ZERO)).unwrap();
        let t = Instant::now();
        let e = c
            .reserve(30, 100, Deadline::after(Duration::from_millis(50)))
            .unwrap_err();
        assert!(t.elapsed() >= Duration::from_millis(50));
        assert!(matches!(e, Error::Timeout(_)), "{e}");
        c.release(80, 1);
        c.reserve(30, 100, Deadline::after(Duration::ZERO)).unwrap();
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
