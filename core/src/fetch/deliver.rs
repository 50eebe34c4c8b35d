//! Delivery: what `poll()`, `recovery_poll()` and the async front's `recv()` take from the
//! buffers under the fetch lock, round-robin over the partitions' streams, and the accounting of
//! the bytes they free ([`FetchState::release`]).
use crate::config::ConsumerConfig;
use crate::error::{Error, Result};
use crate::recovery::RecoveryRange;
use crate::types::TopicPartition;

use super::{ConsumerRecord, FetchState, PartitionState, Shared, StreamKind};

impl FetchState {
    /// What a poll returns before any record: a `wakeup()` since the last one, then an error the
    /// fetch task met (each comes out of one poll).
    pub(crate) fn take_wakeup_or_error(&mut self) -> Result<()> {
        if self.wakeup {
            self.wakeup = false;
            return Err(Error::Wakeup);
        }
        self.errors.pop_front().map_or(Ok(()), Err)
    }

    /// `recovery_poll()`: the batch `caller` got last is processed
    /// ([`crate::recovery::UnprocessedRecovery`]).
    pub(crate) fn recovery_batch_processed(&mut self, caller: u64) {
        for p in self.partitions.values_mut() {
            p.unprocessed.processed(caller);
        }
    }

    /// The recovery ranges of each partition whose recovery stream has records buffered: what a
    /// batch taken from them now owes ([`FetchState::recovery_batch_handed_out`]).
    pub(crate) fn recovery_ranges_buffered(&self) -> Vec<(TopicPartition, Vec<RecoveryRange>)> {
        self.partitions
            .iter()
            .filter_map(|(tp, p)| {
                let rc = p.recovery.as_ref()?;
                (!rc.stream.buffer.is_empty()).then(|| (tp.clone(), rc.ranges.clone()))
            })
            .collect()
    }

    /// `records` went to `caller`: each partition of `before` they came from holds them against
    /// its ranges of `before` until `caller` is back ([`FetchState::recovery_batch_processed`]).
    pub(crate) fn recovery_batch_handed_out(
        &mut self,
        caller: u64,
        before: &[(TopicPartition, Vec<RecoveryRange>)],
        records: &[ConsumerRecord],
    ) {
        for (tp, ranges) in before {
            let handed_out = records
                .iter()
                .any(|r| r.partition == tp.partition && *r.topic == *tp.topic);
            if let Some(p) = self.partitions.get_mut(tp).filter(|_| handed_out) {
                p.unprocessed.handing_out(caller, ranges);
            }
        }
    }
}

/// Which streams a call takes records from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Streams {
    /// `poll()`, `recv()`: both, interleaved.
    Both,
    /// `poll()` with `parallel.rebalance.recovery.poll`: the recovery records are
    /// `recovery_poll()`'s.
    Main,
    /// `recovery_poll()`.
    Recovery,
}

impl Streams {
    /// The streams `poll()` (and the async front's `recv()`) take from.
    pub(crate) fn for_poll(config: &ConsumerConfig) -> Streams {
        if config.recovery_poll {
            Streams::Main
        } else {
            Streams::Both
        }
    }

    fn has(self, kind: StreamKind) -> bool {
        match self {
            Streams::Both => true,
            Streams::Main => kind == StreamKind::Main,
            Streams::Recovery => kind == StreamKind::Recovery,
        }
    }
}

/// What a `poll()` or `recv()` took from the fetch buffers.
pub(crate) struct Taken {
    pub records: Vec<ConsumerRecord>,
    /// A stream dropped below its limit: the fetch task, which stops fetching for it at the
    /// limit, should hear of it. Taking records from a buffer that was below its limit already
    /// wakes nobody, so a `recv()` per record does not wake the fetch task per record. (The
    /// consumer's budget, `fetch.buffer.max.bytes`, wakes the fetch task itself when the buffers
    /// of the records taken come back.)
    pub refill: bool,
}

/// The buffer limit the fetch task stops at for a stream: `2 x max.partition.fetch.bytes`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BufferLimits {
    pub stream: usize,
}

impl BufferLimits {
    pub(crate) fn of(config: &ConsumerConfig) -> BufferLimits {
        BufferLimits {
            stream: 2 * config.max_partition_fetch_bytes.max(0) as usize,
        }
    }
}

/// Whether taking a buffer from `before` bytes down to `after` crossed below `limit`.
fn dropped_below(before: usize, after: usize, limit: usize) -> bool {
    before >= limit && after < limit
}

/// What a `poll()` or `recv()` hands out now: a wakeup, a partition's error, or up to `max`
/// records (their positions advance here, and only here); `None` when there is nothing yet.
pub(crate) fn take_ready(
    st: &mut FetchState,
    max: usize,
    limits: BufferLimits,
    streams: Streams,
) -> Result<Option<Taken>> {
    st.take_wakeup_or_error()?;
    let taken = drain_records(st, max, limits, streams);
    Ok((!taken.records.is_empty()).then_some(taken))
}

/// [`take_ready`] for one record at a time (the async stream): the record goes into `out`, a
/// buffer the caller keeps, so a busy stream allocates nothing per record. `Ok(false)` when there
/// is nothing yet; otherwise `out` holds one record and the fetch task has been told of room
/// when the buffer dropped below a limit.
pub(crate) fn take_one_ready(
    shared: &Shared,
    limits: BufferLimits,
    out: &mut Vec<ConsumerRecord>,
) -> Result<bool> {
    let mut st = shared.lock();
    st.take_wakeup_or_error()?;
    let refill = drain_records_into(&mut st, 1, limits, Streams::Both, out);
    drop(st);
    if refill {
        shared.changed.notify_one();
    }
    Ok(!out.is_empty())
}

/// Takes up to `max` buffered records, round-robin over the streams of every partition (one
/// partition's backlog does not starve the others, and a partition's recovery stream and main
/// stream take turns), and advances each stream's position past what it returns.
pub(crate) fn drain_records(
    st: &mut FetchState,
    max: usize,
    limits: BufferLimits,
    streams: Streams,
) -> Taken {
    let mut records = Vec::new();
    if st.partitions.is_empty() || st.buffered_bytes == 0 {
        return Taken {
            records,
            refill: false,
        };
    }
    // Room for what one poll usually takes; more grows the vector as it comes. Never sized by a
    // setting: max.poll.records may be 2^31-1.
    records.reserve(max.min(RECORDS_RESERVED));
    let refill = drain_records_into(st, max, limits, streams, &mut records);
    Taken { records, refill }
}

/// What a poll reserves room for at first (`max.poll.records`' default).
const RECORDS_RESERVED: usize = 500;

/// [`drain_records`] into `out` (empty on entry); returns whether a stream dropped below its
/// limit.
fn drain_records_into(
    st: &mut FetchState,
    max: usize,
    limits: BufferLimits,
    streams: Streams,
    out: &mut Vec<ConsumerRecord>,
) -> bool {
    debug_assert!(out.is_empty());
    let mut refill = false;
    if st.partitions.is_empty() || st.buffered_bytes == 0 {
        return false;
    }
    // Round-robin over the streams with something to hand out, starting one further each call.
    // Two passes over the partition map and no collection: this runs once per record for a
    // `recv()` or `poll_at_most(_, 1)` loop.
    let has = |p: &PartitionState, kind: StreamKind| match kind {
        _ if !streams.has(kind) => false,
        StreamKind::Main => !p.main.buffer.is_empty(),
        StreamKind::Recovery => p
            .recovery
            .as_ref()
            .is_some_and(|r| !r.stream.buffer.is_empty()),
    };
    const KINDS: [StreamKind; 2] = [StreamKind::Main, StreamKind::Recovery];
    let k = st
        .partitions
        .values()
        .filter(|p| p.delivers())
        .map(|p| KINDS.iter().filter(|&&kind| has(p, kind)).count())
        .sum::<usize>();
    if k == 0 {
        return false;
    }
    let start = st.rotation % k;
    st.rotation = st.rotation.wrapping_add(1);
    let mut freed = 0usize;
    // The streams numbered start.. first, then those before start. Taking from a stream changes
    // only its own "has records", and the second pass stops before the first pass' streams, so
    // the numbering of the streams still to visit never shifts.
    for first_pass in [true, false] {
        let mut unit = 0usize;
        'partitions: for (tp, p) in st.partitions.iter_mut() {
            // Paused, or (KIP-320) its position waits for validation against a new leader.
            if !p.delivers() {
                continue;
            }
            for kind in KINDS {
                if out.len() >= max || (!first_pass && unit >= start) {
                    break 'partitions;
                }
                if !has(p, kind) {
                    continue;
                }
                let this = unit;
                unit += 1;
                if first_pass && this < start {
                    continue;
                }
                let stream_bytes = |p: &PartitionState| match kind {
                    StreamKind::Main => p.main.buffered_bytes,
                    StreamKind::Recovery => {
                        p.recovery.as_ref().map_or(0, |r| r.stream.buffered_bytes)
                    }
                };
                let before = stream_bytes(p);
                // Each stream may fill the rest of the poll, so a single stream can fill it.
                while out.len() < max {
                    let Some((r, size)) = p.pop(kind) else { break };
                    freed += size;
                    out.push(ConsumerRecord {
                        topic: p.topic.clone(),
                        partition: tp.partition,
                        offset: r.offset,
                        timestamp: r.timestamp,
                        key: r.key,
                        value: r.value,
                        headers: r.headers,
                        from_recovery: kind == StreamKind::Recovery,
                    });
                }
                refill |= dropped_below(before, stream_bytes(p), limits.stream);
                p.after_drain();
            }
        }
    }
    st.release(freed);
    refill
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::backoff::Backoff;
    use crate::fetch::state::{record_size, BufferedBatch};
    use crate::fetch::PositionLookup;
    use crate::protocol::records::RecordSpans;

    /// A record of the buffers [`buffered`] makes: no key, no value.
    fn spans(offset: i64) -> RecordSpans {
        RecordSpans {
            offset,
            timestamp: 0,
            key: None,
            value: None,
            headers: Vec::new(),
        }
    }

    /// The bytes each record of [`buffered`] counts against the buffer limits.
    fn size() -> usize {
        record_size(&spans(0))
    }

    /// Partitions 0..n of topic `t`, each with `records` buffered records of [`size`] bytes from
    /// offset 0 (one batch); the partitions in `paused` paused.
    fn buffered(n: i32, records: i64, paused: &[i32]) -> FetchState {
        let mut st = FetchState::new();
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        for partition in 0..n {
            let mut p = PartitionState::new("t", PositionLookup::Committed, backoff);
            p.paused = paused.contains(&partition);
            p.main.buffer.push(BufferedBatch {
                data: bytes::Bytes::new(),
                records: (0..records).map(spans).collect(),
                leader_epoch: -1,
            });
            p.main.buffered_bytes += records as usize * size();
            st.hold(records as usize * size());
            p.main.fetch_offset = Some(records);
            st.partitions.insert(TopicPartition::new("t", partition), p);
        }
        st
    }

    const NO_LIMITS: BufferLimits = BufferLimits { stream: usize::MAX };

    fn one(st: &mut FetchState, limits: BufferLimits) -> ((i32, i64), bool) {
        let taken = take_ready(st, 1, limits, Streams::Both)
            .unwrap()
            .expect("a record");
        assert_eq!(taken.records.len(), 1);
        let r = &taken.records[0];
        ((r.partition, r.offset), taken.refill)
    }

    /// One record at a time, the partitions take turns (each in offset order), a paused one
    /// never hands anything out, and each position follows what was handed out.
    #[test]
    fn records_taken_one_at_a_time_go_round_the_partitions_in_order() {
        let mut st = buffered(3, 2, &[1]);
        let got: Vec<(i32, i64)> = (0..4).map(|_| one(&mut st, NO_LIMITS).0).collect();
        assert_eq!(got, [(0, 0), (2, 0), (0, 1), (2, 1)]);
        assert!(take_ready(&mut st, 1, NO_LIMITS, Streams::Both)
            .unwrap()
            .is_none());
        assert_eq!(
            st.buffered_bytes,
            2 * size(),
            "the paused partition's records stay"
        );
        let position = |st: &FetchState, p| st.partitions[&TopicPartition::new("t", p)].position;
        assert_eq!(position(&st, 0), Some(2));
        assert_eq!(position(&st, 1), None);
        assert_eq!(position(&st, 2), Some(2));
    }

    /// A batch takes from every partition, starting one further each time.
    #[test]
    fn a_batch_fills_from_each_partition_starting_one_further_each_time() {
        let mut st = buffered(3, 4, &[]);
        let batch = |st: &mut FetchState, max| -> Vec<(i32, i64)> {
            let t = take_ready(st, max, NO_LIMITS, Streams::Both)
                .unwrap()
                .unwrap();
            t.records.iter().map(|r| (r.partition, r.offset)).collect()
        };
        assert_eq!(batch(&mut st, 5), [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]);
        // Partition 0 has nothing left: the turn goes round partitions 1 and 2.
        assert_eq!(batch(&mut st, 2), [(2, 0), (2, 1)]);
        assert_eq!(batch(&mut st, 10), [(1, 1), (1, 2), (1, 3), (2, 2), (2, 3)]);
    }

    /// The fetch task is woken only when a stream drops below the limit it stops fetching at,
    /// not on every record taken.
    #[test]
    fn the_fetch_task_hears_only_of_a_buffer_dropping_below_its_limit() {
        let mut st = buffered(2, 3, &[]);
        // Each stream holds 3 records.
        let per_stream = BufferLimits { stream: 3 * size() };
        let refills: Vec<bool> = (0..6).map(|_| one(&mut st, per_stream).1).collect();
        assert_eq!(refills, [true, true, false, false, false, false]);
        assert!(dropped_below(10, 9, 10) && !dropped_below(9, 0, 10) && !dropped_below(20, 10, 10));
    }

    /// A poll that may take 2^31-1 records reserves room for what it takes, not for that many
    /// (nor one record per byte buffered, as it once did: a 64 MiB buffer reserved 64M records).
    #[test]
    fn a_huge_max_poll_records_reserves_room_only_for_what_comes() {
        let mut st = buffered(2, 1000, &[]);
        let taken = take_ready(&mut st, i32::MAX as usize, NO_LIMITS, Streams::Both)
            .unwrap()
            .unwrap();
        assert_eq!(taken.records.len(), 2000);
        assert!(
            taken.records.capacity() <= 2 * 2000,
            "room for {} records",
            taken.records.capacity()
        );
    }

    /// A wakeup comes out before a queued error, the error before any record, each once; the
    /// `NoOffset` error `position()` takes leaves the others queued.
    #[test]
    fn a_wakeup_then_each_error_come_out_before_records_once_each() {
        let no_offset = |partition| {
            Error::NoOffset(crate::error::ErrorPartition {
                topic: "t".into(),
                partition,
            })
        };
        let mut st = buffered(1, 1, &[]);
        st.errors.push_back(no_offset(0));
        st.errors.push_back(no_offset(1));
        st.errors.push_back(Error::UnknownTopic("u".into()));
        st.wake();
        assert_eq!(
            st.take_no_offset_error(&TopicPartition::new("t", 1)),
            Some(no_offset(1))
        );
        assert_eq!(st.take_no_offset_error(&TopicPartition::new("t", 1)), None);
        let outcome = |st: &mut FetchState| match take_ready(st, 10, NO_LIMITS, Streams::Both) {
            Err(e) => Err(e),
            Ok(t) => Ok(t.map(|t| t.records.len())),
        };
        assert_eq!(outcome(&mut st), Err(Error::Wakeup));
        assert_eq!(outcome(&mut st), Err(no_offset(0)));
        assert_eq!(outcome(&mut st), Err(Error::UnknownTopic("u".into())));
        assert_eq!(outcome(&mut st), Ok(Some(1)));
        assert_eq!(outcome(&mut st), Ok(None));
    }

    /// An assignment keeps the state (position, buffered records) of the partitions it keeps and
    /// stops counting the bytes buffered for those it drops; a partition's change counts the
    /// bytes it drops.
    #[test]
    fn assign_and_seek_count_the_bytes_they_drop() {
        let mut st = buffered(3, 2, &[]);
        let t = |p| TopicPartition::new("t", p);
        assert_eq!(one(&mut st, NO_LIMITS).0, (0, 0));
        assert_eq!(st.buffered_bytes, 5 * size());
        let backoff = Backoff::new(Duration::from_millis(100), Duration::from_secs(1));
        st.assign(&[t(0), t(3)], PositionLookup::Committed, backoff);
        assert_eq!(st.assignment(), [t(0), t(3)]);
        assert_eq!(st.buffered_bytes, size(), "partition 0's second record");
        assert_eq!(st.partition(&t(0)).and_then(|p| p.position), Some(1));
        assert_eq!(st.partition(&t(3)).and_then(|p| p.position), None);
        assert_eq!(st.change_partition(&t(0), |p| p.seek(7)), Some(()));
        assert_eq!(st.buffered_bytes, 0);
        assert_eq!(st.change_partition(&t(1), |p| p.seek(7)), None);
        assert!(take_ready(&mut st, 10, NO_LIMITS, Streams::Both)
            .unwrap()
            .is_none());
    }
}
