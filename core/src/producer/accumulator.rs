//! The accumulator: per-partition queues of batches that `send` appends to and the sender
//! drains, and the completion bookkeeping (buffer memory, outstanding records, callbacks).
use super::*;

use std::collections::HashSet;

use crate::sync::Unpoisoned;

// ---------------------------------------------------------------------------------------------
// Completion bookkeeping
// ---------------------------------------------------------------------------------------------

/// Buffered bytes (for `buffer.memory`) and records not yet completed (for `flush`).
#[derive(Default)]
pub(super) struct Counters {
    pub(super) state: Mutex<CounterState>,
    pub(super) changed: Condvar,
    /// Notified with `changed`, for the async front's sends waiting for room.
    pub(super) freed: tokio::sync::Notify,
    /// Batches put back for another attempt (the metrics' `record-retry`, by batch).
    pub(super) batch_retries: std::sync::atomic::AtomicU64,
}

#[derive(Default)]
pub(super) struct CounterState {
    pub(super) bytes: usize,
    pub(super) outstanding: u64,
    /// What the completed batches delivered, for the metrics: counted under the lock each
    /// batch's completion takes anyway.
    pub(super) delivered: Delivered,
}

/// Records and batches completed, and their rates over the last 30 to 60 s.
#[derive(Default)]
pub(super) struct Delivered {
    pub(super) records_sent: u64,
    pub(super) records_failed: u64,
    pub(super) batches_sent: u64,
    pub(super) sent: crate::metrics::window::Windowed,
    pub(super) failed: crate::metrics::window::Windowed,
}

impl Counters {
    /// Takes `size` bytes of `limit`, waiting for room until `deadline`. One record always fits
    /// into an empty buffer, whatever its size.
    pub(super) fn reserve(&self, size: usize, limit: usize, deadline: Deadline) -> Result<()> {
        let mut s = lock(&self.state);
        while s.bytes > 0 && s.bytes + size > limit {
            let left = deadline.remaining();
            if left.is_zero() {
                return Err(self.full_error(limit, deadline));
            }
            s = self.changed.wait_timeout(s, left).unpoisoned().0;
        }
        s.bytes += size;
        s.outstanding += 1;
        Ok(())
    }

    /// Takes `size` bytes of `limit` if there is room now (as `reserve`, without waiting).
    pub(super) fn try_reserve(&self, size: usize, limit: usize) -> bool {
        let mut s = lock(&self.state);
        if s.bytes > 0 && s.bytes + size > limit {
            return false;
        }
        s.bytes += size;
        s.outstanding += 1;
        true
    }

    /// The error of a send that found no room in `buffer.memory` until `deadline`.
    pub(super) fn full_error(&self, limit: usize, deadline: Deadline) -> Error {
        Error::Timeout(format!(
            "send: buffer.memory ({limit} bytes) stayed full for {} ms (default.api.timeout.ms)",
            deadline.timeout().as_millis()
        ))
    }

    /// Waits (async) until no record is outstanding, or `deadline`.
    #[cfg_attr(not(feature = "aio"), allow(dead_code))] // used by the async front (`aio`)
    pub(super) async fn idle(&self, deadline: Deadline) -> Result<()> {
        loop {
            let freed = self.freed.notified();
            let mut freed = std::pin::pin!(freed);
            freed.as_mut().enable();
            let outstanding = lock(&self.state).outstanding;
            if outstanding == 0 {
                return Ok(());
            }
            if deadline.remaining().is_zero() {
                return Err(Error::Timeout(format!(
                    "flush did not complete within {} ms: {outstanding} records still unacknowledged",
                    deadline.timeout().as_millis(),
                )));
            }
            let _ = tokio::time::timeout(deadline.remaining(), freed).await;
        }
    }

    /// Releases a completed batch's `bytes` and `records`, counting them delivered (`ok`) or
    /// failed.
    pub(super) fn release_completed(&self, bytes: usize, records: u64, ok: bool) {
        let now = std::time::Instant::now();
        let mut s = lock(&self.state);
        let d = &mut s.delivered;
        if ok {
            d.records_sent += records;
            d.batches_sent += 1;
            d.sent.record(records as f64, now);
        } else {
            d.records_failed += records;
            d.failed.record(records as f64, now);
        }
        drop(s);
        self.release(bytes, records);
    }

    pub(super) fn release(&self, bytes: usize, records: u64) {
        let mut s = lock(&self.state);
        s.bytes = s.bytes.saturating_sub(bytes);
        s.outstanding = s.outstanding.saturating_sub(records);
        drop(s);
        self.changed.notify_all();
        self.freed.notify_waiters();
    }

    pub(super) fn wait_idle(&self, deadline: Deadline) -> Result<()> {
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
            s = self.changed.wait_timeout(s, left).unpoisoned().0;
        }
        Ok(())
    }
}

/// A batch's outcome: (base offset, log append time or -1), or the error of all its records.
pub(super) type BatchOutcome = std::result::Result<(i64, i64), Error>;

pub(super) type Callback = Box<dyn FnOnce(Result<RecordMetadata>) + Send + 'static>;

pub(super) enum Completion {
    Slot(Arc<DeliverySlot>),
    Callback(Callback),
}

impl Completion {
    pub(super) fn complete(self, r: Result<RecordMetadata>) {
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
pub(super) struct Pending {
    pub(super) counters: Arc<Counters>,
    pub(super) topic: Arc<str>,
    pub(super) partition: i32,
    pub(super) entries: Vec<(Completion, i64)>,
    pub(super) bytes: usize,
}

impl Pending {
    pub(super) fn new(counters: Arc<Counters>, topic: Arc<str>, partition: i32) -> Pending {
        Pending {
            counters,
            topic,
            partition,
            entries: Vec::new(),
            bytes: 0,
        }
    }

    /// Completes every record: `Ok` with offsets `base_offset + index`, or the same error.
    pub(super) fn complete(&mut self, outcome: BatchOutcome) {
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
        // Nothing left in it (completed already): nothing to count again.
        if n > 0 {
            self.counters
                .release_completed(std::mem::take(&mut self.bytes), n, outcome.is_ok());
        } else {
            self.counters.release(std::mem::take(&mut self.bytes), n);
        }
    }

    pub(super) fn fail(&mut self, e: Error) {
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
pub(super) struct OpenBatch {
    pub(super) id: u64,
    pub(super) builder: BatchBuilder,
    pub(super) pending: Pending,
    pub(super) created: Instant,
    /// No more records go in; send it as soon as the partition allows.
    pub(super) full: bool,
}

/// A batch encoded for the wire (after a first attempt, kept for retries).
pub(super) struct Sealed {
    pub(super) data: Bytes,
    pub(super) pending: Pending,
    pub(super) created: Instant,
    pub(super) retry: Retry,
    /// The producer id, epoch and sequence it was sent with (an idempotent producer's).
    pub(super) seq: Option<BatchSequence>,
    /// Not sent again before this (its backoff).
    pub(super) retry_at: Option<Instant>,
}

pub(super) enum Drained {
    /// A batch sent for the first time, with the sequence it gets (idempotent producer).
    Open(OpenBatch, Option<BatchSequence>),
    Sealed(Sealed),
}

#[derive(Default)]
pub(super) struct PartitionQueue {
    /// Batches that failed and wait for their retry, in sequence order (a producer that is not
    /// idempotent has at most one); they go before everything in `open`.
    pub(super) retry: VecDeque<Sealed>,
    pub(super) open: VecDeque<OpenBatch>,
    /// Batches on the wire.
    pub(super) in_flight: usize,
    /// The idempotent producer's sequences of the partition.
    pub(super) seq: PartitionSequences,
}

/// The idempotent producer's state beyond its partitions (Java's `TransactionManager`).
#[derive(Default)]
pub(super) struct Idempotence {
    /// The producer id and epoch new batches get; `None` until InitProducerId answers.
    pub(super) pid: Option<ProducerIdEpoch>,
    /// Some partition's sequences must restart: the epoch goes up first (KIP-360).
    pub(super) bump: bool,
    /// The producer can not go on: every batch fails with this, and so does `send`.
    pub(super) fatal: Option<Error>,
    /// Why the last InitProducerId failed, for the error of batches that expire meanwhile.
    pub(super) init_error: Option<Error>,
    /// A transactional producer's partitions of the open transaction (AddPartitionsToTxn
    /// answered); a partition's batches wait until it is in. `None`: not transactional.
    pub(super) txn_added: Option<HashSet<(Arc<str>, i32)>>,
    /// AddPartitionsToTxn failed: the batches of partitions not added fail with this.
    pub(super) txn_add_error: Option<Error>,
}

#[derive(Default)]
pub(super) struct TopicQueues {
    pub(super) parts: Vec<PartitionQueue>,
    pub(super) sticky: Option<Sticky>,
}

pub(super) struct RecordParts<'a> {
    pub(super) timestamp: i64,
    pub(super) key: Option<&'a [u8]>,
    pub(super) value: Option<&'a [u8]>,
    pub(super) headers: &'a [Header],
    pub(super) size: usize,
}

#[derive(Default)]
pub(super) struct DrainResult {
    /// (leader, request slot, batch)
    pub(super) batches: Vec<(i32, usize, Drained)>,
    /// Batches whose delivery timeout passed before they could be sent.
    pub(super) expired: Vec<Drained>,
    /// Batches that fail with the idempotent producer's fatal error.
    pub(super) fatal: Vec<(Drained, Error)>,
    pub(super) next_wake: Option<Instant>,
    pub(super) need_metadata: bool,
    /// A partition has more to send at once: drain again without waiting.
    pub(super) again: bool,
    /// The idempotent producer needs a producer id (InitProducerId).
    pub(super) need_producer_id: bool,
    /// Partitions with batches that must join the open transaction (AddPartitionsToTxn) first.
    pub(super) need_add: Vec<(Arc<str>, i32)>,
}

pub(super) fn earliest(a: &mut Option<Instant>, t: Instant) {
    match a {
        Some(x) if *x <= t => {}
        _ => *a = Some(t),
    }
}

/// Per-partition queues of batches, shared by `send` (appends) and the sender (drains).
pub(super) struct Accumulator {
    pub(super) topics: HashMap<Arc<str>, TopicQueues>,
    pub(super) batch_size: usize,
    pub(super) linger: Duration,
    pub(super) compression: Compression,
    pub(super) next_id: u64,
    /// `Some` for an idempotent producer.
    pub(super) idem: Option<Idempotence>,
    /// The most batches of one partition on the wire at once (idempotent producer).
    pub(super) max_on_wire: usize,
}

impl Accumulator {
    pub(super) fn new(
        batch_size: usize,
        linger: Duration,
        compression: Compression,
    ) -> Accumulator {
        Accumulator {
            topics: HashMap::new(),
            batch_size: batch_size.max(1),
            linger,
            compression,
            next_id: 1,
            idem: None,
            max_on_wire: 1,
        }
    }

    /// The same, for an idempotent producer with at most `max_on_wire` batches of a partition
    /// on the wire at once.
    pub(super) fn idempotent(mut self, max_on_wire: usize) -> Accumulator {
        self.idem = Some(Idempotence::default());
        self.max_on_wire = max_on_wire.max(1);
        self
    }

    /// Appends a record; returns its partition and whether the sender should look (a batch
    /// became ready or a new batch started its linger clock).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn append(
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

    /// Takes the batches that are ready and whose partition allows one more on the wire
    /// ([`may_send`]). `leader_of` says where a partition's leader is; `admit(leader, bytes)`
    /// assigns the batch to a request (by slot number) or refuses it (no request may be started
    /// to that broker now).
    pub(super) fn drain(
        &mut self,
        now: Instant,
        force: bool,
        delivery_timeout: Duration,
        leader_of: impl Fn(&str, i32) -> Option<i32>,
        mut admit: impl FnMut(i32, usize) -> Option<usize>,
    ) -> DrainResult {
        let mut out = DrainResult::default();
        if let Some(idem) = &mut self.idem {
            if idem.bump {
                idem.bump = false;
                // At the epoch's maximum a new producer id is needed: InitProducerId.
                idem.pid = idem.pid.and_then(bumped);
            }
            out.need_producer_id = idem.pid.is_none() && idem.fatal.is_none();
        }
        let max_on_wire = self.max_on_wire;
        let mut bump = false;
        for (topic, tq) in self.topics.iter_mut() {
            for (p, q) in tq.parts.iter_mut().enumerate() {
                let p = p as i32;
                if let Some(e) = self.idem.as_ref().and_then(|i| i.fatal.clone()) {
                    for r in q.retry.drain(..) {
                        out.fatal.push((Drained::Sealed(r), e.clone()));
                    }
                    for b in q.open.drain(..) {
                        out.fatal.push((Drained::Open(b, None), e.clone()));
                    }
                    continue;
                }
                // Batches that waited too long (no leader, broker down) fail here; one sent
                // before leaves the broker's sequences of the partition unknown.
                loop {
                    if let Some(r) = q.retry.front() {
                        if now >= r.created + delivery_timeout {
                            let r = q.retry.pop_front().expect("some");
                            if let Some(seq) = &r.seq {
                                q.seq.expired(seq);
                            }
                            out.expired.push(Drained::Sealed(r));
                            continue;
                        }
                        break;
                    }
                    match q.open.front() {
                        Some(b) if now >= b.created + delivery_timeout => {
                            out.expired
                                .push(Drained::Open(q.open.pop_front().expect("some"), None));
                        }
                        _ => break,
                    }
                }
                let Some(idem) = &mut self.idem else {
                    if q.in_flight > 0 {
                        continue;
                    }
                    drain_one(
                        topic,
                        p,
                        q,
                        now,
                        force,
                        self.linger,
                        delivery_timeout,
                        None,
                        &leader_of,
                        &mut admit,
                        &mut out,
                    );
                    continue;
                };
                if let Some(added) = &idem.txn_added {
                    if !added.contains(&(topic.clone(), p)) {
                        if let Some(e) = &idem.txn_add_error {
                            for b in q.open.drain(..) {
                                out.fatal.push((Drained::Open(b, None), e.clone()));
                            }
                        } else if !q.open.is_empty() || !q.retry.is_empty() {
                            out.need_add.push((topic.clone(), p));
                        }
                        continue;
                    }
                }
                q.seq.resolve();
                if q.seq.rewrite {
                    match idem.pid {
                        // A partition restarts under an epoch it has not used yet, once none
                        // of its batches is on the wire.
                        Some(pid) if q.seq.pid != Some(pid) && q.in_flight == 0 => restart(q, pid),
                        Some(pid) if q.seq.pid != Some(pid) => {}
                        // A transactional producer's epoch is the coordinator's: the failed
                        // batch made the transaction abortable, and the abort bumps the epoch
                        // there (an epoch bumped here would get the abort's EndTxn answered
                        // with PRODUCER_FENCED).
                        Some(_) if idem.txn_added.is_some() => {}
                        Some(_) => bump = true,
                        None => {}
                    }
                }
                let head = match (q.retry.front(), q.open.front()) {
                    (Some(_), _) => Head::Retry,
                    (None, Some(_)) => Head::New,
                    (None, None) => continue,
                };
                let view = PartitionView {
                    idempotent: true,
                    have_pid: idem.pid.is_some(),
                    fatal: false,
                    head,
                    on_wire: q.in_flight,
                    max_on_wire,
                    stale: q.seq.pid.is_some() && q.seq.pid != idem.pid,
                    window_full: q.seq.window_full(max_on_wire),
                    unacknowledged: q.seq.last_acked.is_none(),
                    unresolved: q.seq.unresolved.is_some(),
                    rewrite: q.seq.rewrite,
                };
                if may_send(view).is_err() {
                    // Still expires in time.
                    if let Some(created) = q
                        .retry
                        .front()
                        .map(|r| r.created)
                        .or(q.open.front().map(|b| b.created))
                    {
                        earliest(&mut out.next_wake, created + delivery_timeout);
                    }
                    continue;
                }
                let sent = drain_one(
                    topic,
                    p,
                    q,
                    now,
                    force,
                    self.linger,
                    delivery_timeout,
                    idem.pid,
                    &leader_of,
                    &mut admit,
                    &mut out,
                );
                // One batch of a partition per request: more go in the next round.
                out.again |= sent && (!q.open.is_empty() || !q.retry.is_empty());
            }
        }
        if let Some(idem) = &mut self.idem {
            idem.bump |= bump;
        }
        out.again |= bump;
        out
    }

    /// Takes every batch not sent yet (an abort fails them, as Java's `abortUndrainedBatches`).
    pub(super) fn take_unsent(&mut self) -> Vec<OpenBatch> {
        self.topics
            .values_mut()
            .flat_map(|t| t.parts.iter_mut())
            .flat_map(|q| q.open.drain(..))
            .collect()
    }

    /// A new transaction starts with no partition in it; `pid`, when given, is the producer's
    /// new id or epoch, under which every partition's sequences restart from 0.
    pub(super) fn next_transaction(&mut self, pid: Option<ProducerIdEpoch>) {
        if let Some(idem) = &mut self.idem {
            idem.txn_added = Some(HashSet::new());
            idem.txn_add_error = None;
            if let Some(pid) = pid {
                idem.pid = Some(pid);
                idem.init_error = None;
                for q in self.topics.values_mut().flat_map(|t| t.parts.iter_mut()) {
                    q.seq = PartitionSequences::default();
                }
            }
        }
    }

    /// Puts a batch back for a retry at `at`, before everything else of its partition, in
    /// sequence order among the other retries.
    pub(super) fn requeue(&mut self, mut batch: Sealed, at: Instant) {
        let (topic, p) = (batch.pending.topic.clone(), batch.pending.partition);
        batch
            .pending
            .counters
            .batch_retries
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        batch.retry_at = Some(at);
        if let Some(q) = self.partition_mut(&topic, p) {
            let base = batch.seq.map(|s| s.base);
            let at = match base {
                Some(base) => q
                    .retry
                    .iter()
                    .position(|r| r.seq.is_some_and(|s| sequence_after(s.base, base)))
                    .unwrap_or(q.retry.len()),
                None => 0,
            };
            q.retry.insert(at, batch);
        }
        // A partition that vanished from the accumulator cannot happen; if it did, dropping the
        // batch fails its records with Error::Closed.
    }

    pub(super) fn partition_mut(&mut self, topic: &str, p: i32) -> Option<&mut PartitionQueue> {
        self.topics
            .get_mut(topic)
            .and_then(|t| t.parts.get_mut(p as usize))
    }

    /// A batch of the partition is off the wire (answered, or never sent).
    pub(super) fn done(&mut self, topic: &str, partition: i32) {
        if let Some(q) = self.partition_mut(topic, partition) {
            q.in_flight = q.in_flight.saturating_sub(1);
        }
    }
}

/// Restarts a partition's sequences under `pid` (an epoch it has not used): the batches
/// waiting for a retry get sequences from 0, written into their headers.
fn restart(q: &mut PartitionQueue, pid: ProducerIdEpoch) {
    let counts: Vec<i32> = q
        .retry
        .iter()
        .map(|r| r.pending.entries.len() as i32)
        .collect();
    let bases = q.seq.restart_under(pid, &counts);
    for (r, base) in q.retry.iter_mut().zip(bases) {
        let count = r.pending.entries.len() as i32;
        r.seq = Some(BatchSequence {
            pid,
            base,
            count,
            reset: true,
        });
        // Our own batches always have the v2 header; a failure here would be a bug, and the
        // broker would refuse the old header as out of order rather than take it twice.
        match set_producer_state(&r.data, pid.id, pid.epoch, base) {
            Ok(data) => r.data = data,
            Err(e) => tracing::error!(error = %e, "rewriting a batch's sequence failed"),
        }
    }
    // Named by a batch of the partition when one waits (the queue does not know its own name).
    if let Some(r) = q.retry.front() {
        tracing::debug!(
            topic = %r.pending.topic,
            partition = r.pending.partition,
            producer_id = pid.id,
            epoch = pid.epoch,
            "restarted the partition's sequences"
        );
    }
}

/// Takes the head of a partition's queue if it is ready and its leader takes a request now;
/// a new batch gets its sequence under `pid` (idempotent producer). Returns whether it did.
#[allow(clippy::too_many_arguments)]
fn drain_one(
    topic: &Arc<str>,
    p: i32,
    q: &mut PartitionQueue,
    now: Instant,
    force: bool,
    linger: Duration,
    delivery_timeout: Duration,
    pid: Option<ProducerIdEpoch>,
    leader_of: &impl Fn(&str, i32) -> Option<i32>,
    admit: &mut impl FnMut(i32, usize) -> Option<usize>,
    out: &mut DrainResult,
) -> bool {
    let (ready, size, at, created) = if let Some(r) = q.retry.front() {
        let at = r.retry_at.unwrap_or(now);
        (at <= now, r.data.len(), at, r.created)
    } else if let Some(b) = q.open.front() {
        let at = b.created + linger;
        let ready = force || b.full || q.open.len() > 1 || at <= now;
        (ready, b.builder.estimated_size(), at, b.created)
    } else {
        return false;
    };
    earliest(&mut out.next_wake, created + delivery_timeout);
    if !ready {
        earliest(&mut out.next_wake, at);
        return false;
    }
    let Some(leader) = leader_of(topic, p) else {
        out.need_metadata = true;
        return false;
    };
    let Some(slot) = admit(leader, size) else {
        return false;
    };
    let d = match q.retry.pop_front() {
        Some(r) => Drained::Sealed(r),
        None => {
            let b = q.open.pop_front().expect("checked above");
            let seq = pid.map(|pid| q.seq.assign(pid, b.pending.entries.len() as i32));
            Drained::Open(b, seq)
        }
    };
    q.in_flight += 1;
    out.batches.push((leader, slot, d));
    true
}

/// An upper bound of the bytes a record takes in a batch.
pub(super) fn record_size(key: Option<&[u8]>, value: Option<&[u8]>, headers: &[Header]) -> usize {
    // length, attributes, timestamp delta, offset delta, key and value lengths, header count.
    let mut size = 5 + 1 + 10 + 5 + 5 + 5 + 5;
    size += key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len());
    for h in headers {
        size += 10 + h.key.len() + h.value.as_ref().map_or(0, |v| v.len());
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

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
            Drained::Open(b, _) => b.builder.len(),
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
        let Drained::Open(b, _) = &r.batches[0].2 else {
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

    /// `batch.size=0` (Java: no batching): each record is a batch of its own, ready at once
    /// whatever `linger.ms` says.
    #[test]
    fn a_batch_size_of_zero_sends_each_record_alone_at_once() {
        let mut h = Harness::new(0, 3_600_000, 1);
        let t0 = Instant::now();
        h.append(Target::Partition(0), b"a", t0);
        let r = h.drain(t0, false);
        assert_eq!(r.batches.len(), 1, "ready without waiting for linger.ms");
        assert_eq!(records_of(&r.batches[0].2), 1);
        h.acc.done("t", 0);
        h.append(Target::Partition(0), b"b", t0);
        h.append(Target::Partition(0), b"c", t0);
        let r = h.drain(t0, false);
        assert_eq!(r.batches.len(), 1, "one batch in flight per partition");
        assert_eq!(
            records_of(&r.batches[0].2),
            1,
            "b alone; c waits for the next"
        );
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
        let Drained::Open(b, _) = h.drain(t0, false).batches.pop().unwrap().2 else {
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
            seq: None,
            retry_at: None,
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
        let Drained::Open(mut b, _) = r.expired.pop().unwrap() else {
            panic!()
        };
        b.pending.fail(Error::Timeout("x".into()));
        assert!(matches!(d.try_get(), Some(Err(Error::Timeout(_)))));
        assert_eq!(lock(&h.counters.state).outstanding, 0);
        assert_eq!(lock(&h.counters.state).bytes, 0);
    }

    #[test]
    fn completed_batches_count_records_sent_and_failed_once_each() {
        let mut h = Harness::new(16384, 0, 2);
        let t0 = Instant::now();
        for _ in 0..3 {
            h.append(Target::Partition(0), b"a", t0);
        }
        h.append(Target::Partition(1), b"b", t0);
        let r = h.drain(t0, true);
        assert_eq!(r.batches.len(), 2);
        for (i, (_, _, drained)) in r.batches.into_iter().enumerate() {
            let Drained::Open(mut b, _) = drained else {
                panic!("a first attempt drains open batches")
            };
            if i == 0 {
                b.pending.complete(Ok((0, -1)));
            } else {
                b.pending.fail(Error::Timeout("x".into()));
            }
            // Completing again (nothing is left in it) counts nothing more.
            b.pending.complete(Ok((0, -1)));
        }
        let s = lock(&h.counters.state);
        let d = &s.delivered;
        let mut counts = [d.records_sent, d.records_failed];
        counts.sort();
        // Which batch drained first is the accumulator's business: 3 and 1 either way round.
        assert_eq!(counts, [1, 3]);
        assert_eq!(d.batches_sent, 1);
        assert_eq!(d.records_sent + d.records_failed, 4);
        assert_eq!((s.outstanding, s.bytes), (0, 0));
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
        let Drained::Open(mut b, _) = h.drain(t0, false).batches.pop().unwrap().2 else {
            panic!()
        };
        b.pending.complete(Ok((41, -1)));
        let m0 = d0.try_get().unwrap().unwrap();
        assert_eq!((m0.topic.as_str(), m0.partition, m0.offset), ("t", 0, 41));
        assert_eq!(d0.wait().unwrap().offset, 41, "still there after try_get");
        assert_eq!(d1.wait().unwrap().offset, 42);
    }

    /// A harness for an idempotent producer: a batch per record (batch.size 0), five batches
    /// of a partition on the wire at most.
    fn idempotent_harness() -> Harness {
        let mut h = Harness::new(0, 0, 1);
        h.acc = Accumulator::new(0, Duration::ZERO, Compression::None).idempotent(5);
        h
    }

    const PID: ProducerIdEpoch = ProducerIdEpoch { id: 42, epoch: 0 };

    /// Drains until nothing more goes: the batches taken, each with its sequence.
    fn drain_all(h: &mut Harness, now: Instant) -> Vec<(Drained, BatchSequence)> {
        let mut out = Vec::new();
        for _ in 0..20 {
            let r = h.drain(now, false);
            let again = r.again;
            for (_, _, d) in r.batches {
                let seq = match &d {
                    Drained::Open(_, s) => s.expect("an idempotent batch has a sequence"),
                    Drained::Sealed(s) => s.seq.expect("an idempotent batch has a sequence"),
                };
                out.push((d, seq));
            }
            if !again {
                break;
            }
        }
        out
    }

    /// What the sender does with a drained batch before sending it: encode, stamp.
    fn seal(d: Drained) -> Sealed {
        match d {
            Drained::Sealed(s) => s,
            Drained::Open(b, seq) => {
                let s = seq.unwrap();
                let data =
                    set_producer_state(&b.builder.finish().unwrap(), s.pid.id, s.pid.epoch, s.base)
                        .unwrap();
                Sealed {
                    data,
                    pending: b.pending,
                    created: b.created,
                    retry: Retry::new(crate::backoff::Backoff::new(Duration::ZERO, Duration::ZERO)),
                    seq: Some(s),
                    retry_at: None,
                }
            }
        }
    }

    #[test]
    fn idempotent_batches_wait_for_a_producer_id_then_go_five_at_a_time_in_sequence() {
        let mut h = idempotent_harness();
        let t0 = Instant::now();
        for _ in 0..8 {
            h.append(Target::Partition(0), b"r", t0);
        }
        let r = h.drain(t0, true);
        assert!(r.batches.is_empty() && r.need_producer_id);
        h.acc.idem.as_mut().unwrap().pid = Some(PID);
        // The first batch goes alone: a broker without state for the producer would take a
        // later one first.
        let first = drain_all(&mut h, t0);
        assert_eq!(first.len(), 1);
        assert_eq!((first[0].1.pid, first[0].1.base), (PID, 0));
        h.acc.done("t", 0);
        h.acc
            .partition_mut("t", 0)
            .unwrap()
            .seq
            .acknowledged(&first[0].1);
        let sent = drain_all(&mut h, t0);
        let seqs: Vec<(ProducerIdEpoch, i32)> = sent.iter().map(|(_, s)| (s.pid, s.base)).collect();
        assert_eq!(seqs, (1..6).map(|b| (PID, b)).collect::<Vec<_>>());
        // Four answered, the oldest not: nothing more goes (the broker keeps five batches).
        for (_, s) in &sent[1..] {
            h.acc.done("t", 0);
            h.acc.partition_mut("t", 0).unwrap().seq.acknowledged(s);
        }
        assert!(drain_all(&mut h, t0).is_empty(), "the window is full");
        h.acc.done("t", 0);
        h.acc
            .partition_mut("t", 0)
            .unwrap()
            .seq
            .acknowledged(&sent[0].1);
        let next = drain_all(&mut h, t0);
        assert_eq!(
            next.iter().map(|(_, s)| s.base).collect::<Vec<_>>(),
            vec![6, 7]
        );
    }

    #[test]
    fn a_failed_batch_bumps_the_epoch_and_the_waiting_ones_restart_at_zero() {
        let mut h = idempotent_harness();
        let t0 = Instant::now();
        for _ in 0..4 {
            h.append(Target::Partition(0), b"r", t0);
        }
        h.acc.idem.as_mut().unwrap().pid = Some(PID);
        let acked = drain_all(&mut h, t0);
        h.acc.done("t", 0);
        h.acc
            .partition_mut("t", 0)
            .unwrap()
            .seq
            .acknowledged(&acked[0].1);
        let sent: Vec<Sealed> = drain_all(&mut h, t0)
            .into_iter()
            .map(|(d, _)| seal(d))
            .collect();
        assert_eq!(sent.len(), 3);
        let mut sent = sent.into_iter();
        // The first fails for good; the two behind it come back out of order, to be retried.
        let first = sent.next().unwrap();
        h.acc.done("t", 0);
        let q = h.acc.partition_mut("t", 0).unwrap();
        q.seq.failed(first.seq.as_ref().unwrap());
        for b in sent {
            h.acc.done("t", 0);
            h.acc.requeue(b, t0);
        }
        // First round: the partition asks for a bump; second: the epoch is 1 and the two
        // waiting batches restart at 0 and 1, their headers rewritten.
        let again = drain_all(&mut h, t0);
        assert_eq!(
            h.acc.idem.as_ref().unwrap().pid,
            Some(ProducerIdEpoch { id: 42, epoch: 1 })
        );
        let q = &h.acc.topics["t"].parts[0];
        let restarted: Vec<(i16, i32, bool)> = q
            .retry
            .iter()
            .chain(again.iter().filter_map(|(d, _)| match d {
                Drained::Sealed(s) => Some(s),
                _ => None,
            }))
            .map(|r| {
                let s = r.seq.unwrap();
                let stored = crate::protocol::records::producer_states(&r.data)[0];
                assert_eq!(
                    (
                        stored.producer_id,
                        stored.producer_epoch,
                        stored.base_sequence
                    ),
                    (42, s.pid.epoch, s.base)
                );
                (s.pid.epoch, s.base, s.reset)
            })
            .collect();
        let mut restarted = restarted;
        restarted.sort();
        assert_eq!(restarted, vec![(1, 0, true), (1, 1, true)]);
        // A retry goes alone.
        assert_eq!(again.len(), 1);
    }

    /// A transactional producer's epoch is the coordinator's: a batch of the transaction that
    /// failed leaves the producer id and epoch as they are (the abort bumps them at the
    /// coordinator, `next_transaction` restarts the sequences). A local bump would make the
    /// abort's EndTxn carry an epoch the coordinator never gave, which it answers with
    /// PRODUCER_FENCED.
    #[test]
    fn a_failed_batch_of_a_transaction_leaves_the_epoch_to_the_coordinator() {
        let mut h = idempotent_harness();
        let t0 = Instant::now();
        {
            let idem = h.acc.idem.as_mut().unwrap();
            idem.pid = Some(PID);
            idem.txn_added = Some([(Arc::<str>::from("t"), 0)].into_iter().collect());
        }
        h.append(Target::Partition(0), b"r", t0);
        let sent = drain_all(&mut h, t0);
        assert_eq!(sent.len(), 1);
        h.acc.done("t", 0);
        h.acc.partition_mut("t", 0).unwrap().seq.failed(&sent[0].1);
        for _ in 0..3 {
            h.drain(t0, true);
        }
        let idem = h.acc.idem.as_ref().unwrap();
        assert_eq!((idem.pid, idem.bump), (Some(PID), false));
        // The abort's new epoch from the coordinator restarts the partition at 0 under it.
        let next = ProducerIdEpoch { id: 42, epoch: 1 };
        h.acc.next_transaction(Some(next));
        h.acc.idem.as_mut().unwrap().txn_added =
            Some([(Arc::<str>::from("t"), 0)].into_iter().collect());
        h.append(Target::Partition(0), b"r", t0);
        let again = drain_all(&mut h, t0);
        assert_eq!(
            again
                .iter()
                .map(|(_, s)| (s.pid, s.base))
                .collect::<Vec<_>>(),
            vec![(next, 0)]
        );
    }

    #[test]
    fn a_fatal_error_fails_every_queued_batch_with_it() {
        let mut h = idempotent_harness();
        let t0 = Instant::now();
        let (_, d) = h.append(Target::Partition(0), b"r", t0);
        let e = Error::kafka(31, "InitProducerId");
        h.acc.idem.as_mut().unwrap().fatal = Some(e.clone());
        let r = h.drain(t0, true);
        assert!(r.batches.is_empty() && !r.need_producer_id);
        assert_eq!(r.fatal.len(), 1);
        for (d, e) in r.fatal {
            let Drained::Open(mut b, _) = d else { panic!() };
            b.pending.fail(e);
        }
        assert_eq!(d.wait().unwrap_err(), e);
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
}
