//! The pure step of the fetch path: one partition's fetch answer applied to its state. No I/O and
//! no lock of its own: [`select`] runs on the fetch task before the lock `poll()` needs is taken
//! (it sees only the decoded answer and what the fetch asked for), [`apply`] under that lock, so
//! the lock covers only the hand-over of records that are ready.
use std::time::{Duration, Instant};

use super::state::{record_size, BufferedBatch, PartitionState, PositionLookup, StreamKind};
use super::txn::{BatchHeader, ControlType, TxnFilter, Verdict};
use crate::error::{codes, kafka_error_action, Action, Error, ErrorPartition, Result};
use crate::protocol::records::{Batch, DecodedRecords};
use crate::types::TopicPartition;

/// What one stream's fetch asked of one partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Asked {
    /// The stream's fetch offset when the fetch was sent.
    pub offset: i64,
    /// The partition's cursor then: a seek or reset since makes the answer stale.
    pub cursor: u64,
    /// Records at or above it belong to a later recovery range or to the main stream: the end of
    /// the recovery stream's current range, `i64::MAX` for the main stream.
    pub limit: i64,
    /// KIP-320: the leader epoch of the last batch the stream fetched (-1 when unknown: no
    /// check), sent as `last_fetched_epoch`.
    pub last_fetched_epoch: i32,
}

/// The records one fetch brings a stream, chosen from the decoded batches.
#[derive(Debug, Default)]
pub(crate) struct Selected {
    /// Records for the stream's buffer, batch by batch (none empty).
    pub batches: Vec<BufferedBatch>,
    /// The bytes they count against the buffer limits ([`record_size`]).
    pub bytes: usize,
    /// The stream's next fetch offset: past the last record taken, past control batches and
    /// compacted-away batch tails; the range end for a recovery stream that reached it.
    pub next: i64,
    /// KIP-74: the first batch alone does not fit `max.partition.fetch.bytes`.
    pub oversized: bool,
    /// The leader epoch of the last batch read below `next` (the epoch asked with when none).
    pub next_epoch: i32,
}

/// One partition of a fetch answer, its records decoded.
#[derive(Debug)]
pub(crate) struct PartitionAnswer {
    pub error_code: i16,
    pub high_watermark: i64,
    pub log_start_offset: i64,
    /// -1 when the broker named none.
    pub last_stable_offset: i64,
    /// KIP-392: the replica the leader names for this client's rack, or -1.
    pub preferred_read_replica: i32,
    /// The records chosen for the stream (none when the answer is an error), or why the records
    /// field could not be decoded.
    pub records: Result<Selected>,
    /// KIP-320 (Fetch v12+): the leader's log does not hold what was fetched at the epoch asked
    /// with; this is where its log of the last common epoch ends.
    pub diverging_epoch: Option<EpochEndOffset>,
}

/// KIP-320: where a leader's log of a leader epoch ends (the first offset of the next epoch, or
/// its log end for the current one), as a Fetch answer's `diverging_epoch` or an
/// OffsetForLeaderEpoch answer names it. Either field is -1 when the leader does not know the
/// epoch (Kafka's UNDEFINED_EPOCH and UNDEFINED_EPOCH_OFFSET).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct EpochEndOffset {
    pub epoch: i32,
    pub end_offset: i64,
}

/// What a partition does once its leader says where the log of the last epoch it shares with
/// the consumer ends ([`on_divergence`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Divergence {
    /// Every record delivered is still in the leader's log: what was fetched past it is dropped
    /// and fetched again from the position, in `epoch`.
    Refetch { offset: i64, epoch: i32 },
    /// Records delivered at or past `offset` are gone from the log (it was truncated, e.g. by an
    /// unclean leader election) and `auto.offset.reset` allows a reset: the position goes back to
    /// the point of divergence, so that every record now in the log after it is read once.
    Reset { offset: i64, epoch: i32 },
    /// As [`Divergence::Reset`], with `auto.offset.reset=none`: the partition stops and
    /// [`Error::LogTruncation`] says where, until the application seeks.
    Report {
        position: i64,
        divergent_offset: i64,
        epoch: i32,
    },
    /// The leader does not know the epoch (its log starts after it): as an offset out of range,
    /// `auto.offset.reset` decides.
    ResetPolicy,
}

/// KIP-320's decision, as the Java client's `SubscriptionState.maybeCompleteValidation`: the
/// position (`position` of leader epoch `position_epoch`, the next record `poll()` returns) is
/// truncated when the leader's log of the last common epoch ends below it. `reset_allowed`:
/// `auto.offset.reset` is not `none`.
pub(crate) fn on_divergence(
    position: i64,
    position_epoch: i32,
    end: EpochEndOffset,
    reset_allowed: bool,
) -> Divergence {
    if end.epoch < 0 || end.end_offset < 0 {
        return Divergence::ResetPolicy;
    }
    if end.end_offset < position {
        return if reset_allowed {
            Divergence::Reset {
                offset: end.end_offset,
                epoch: end.epoch,
            }
        } else {
            Divergence::Report {
                position,
                divergent_offset: end.end_offset,
                epoch: end.epoch,
            }
        };
    }
    // Only what was fetched past the position diverged. Fetching again in the last common
    // epoch (not a later one the leader never had) lets the leader answer with records.
    Divergence::Refetch {
        offset: position,
        epoch: if position_epoch < 0 {
            -1
        } else {
            position_epoch.min(end.epoch)
        },
    }
}

/// The records of `decoded` a stream that asked `asked` takes, in order: none below the fetch
/// offset (the batch holding it may start before it), none at or above the limit, none of a
/// control batch or of a batch `filter` finds aborted (`isolation.level=read_committed`). The
/// stream moves past the batches it skips, so that an answer holding only markers or aborted
/// records still moves the position.
pub(crate) fn select(decoded: DecodedRecords, asked: &Asked, mut filter: TxnFilter) -> Selected {
    let mut next = asked.offset;
    let mut next_epoch = asked.last_fetched_epoch;
    let mut batches = Vec::with_capacity(decoded.batches.len());
    let mut bytes = 0usize;
    for batch in decoded.batches {
        if batch.last_offset >= next && batch.base_offset < asked.limit {
            // The batch moves the stream on (at least partly): the stream is now in its epoch.
            if batch.partition_leader_epoch >= 0 {
                next_epoch = batch.partition_leader_epoch;
            }
        }
        // Every batch goes through the filter, also one below the fetch offset: its markers
        // end transactions.
        if filter.verdict(&header(&batch)) != Verdict::Deliver {
            // Up to the limit: past it the offsets belong to a later range or the main stream.
            next = next.max((batch.last_offset + 1).min(asked.limit));
            if next >= asked.limit {
                break;
            }
            continue;
        }
        let mut records = batch.spans;
        let mut reached_limit = false;
        // In place: a batch taken whole (the common case) moves no record.
        records.retain(|r| {
            if reached_limit || r.offset < next {
                return false; // the batch holding the fetch offset starts before it
            }
            if r.offset >= asked.limit {
                reached_limit = true;
                return false;
            }
            next = r.offset + 1;
            bytes += record_size(r);
            true
        });
        if !records.is_empty() {
            batches.push(BufferedBatch {
                data: batch.data,
                records,
                leader_epoch: batch.partition_leader_epoch,
            });
        }
        if reached_limit {
            next = asked.limit;
            break;
        }
        // Compaction can leave a batch whose last records are gone.
        next = next.max(batch.last_offset + 1);
    }
    Selected {
        batches,
        bytes,
        next,
        // A truncated tail behind whole batches is normal (KIP-74); only a first batch that does
        // not fit stops the stream.
        oversized: decoded.truncated && next == asked.offset,
        next_epoch,
    }
}

/// [`select`] at `read_uncommitted`: every data record, no marker.
#[cfg(test)]
pub(crate) fn select_all(decoded: DecodedRecords, asked: &Asked) -> Selected {
    select(decoded, asked, TxnFilter::read_uncommitted())
}

/// What the transaction filter reads of a batch: its header, and for a control batch the type
/// its first record's key names.
/// Which batches of an answer are worth decoding the records of, for
/// [`decode_batches_in_where`](crate::protocol::records::decode_batches_in_where): all but those
/// `filter` finds aborted. It takes a copy of the filter [`select`] is given, at the same state,
/// and sees the same batches in the same order, so the two agree on every batch: `select` skips
/// the batches left undecoded.
pub(crate) fn worth_decoding(filter: &TxnFilter) -> impl FnMut(&Batch) -> bool {
    let mut ahead = filter.clone();
    move |b| ahead.verdict(&header(b)) != Verdict::Aborted
}

fn header(batch: &Batch) -> BatchHeader {
    let control = batch.is_control.then(|| {
        let key = batch.spans.first().and_then(|r| r.key).and_then(|k| {
            let start = k.start as usize;
            batch.data.get(start..start + k.len as usize)
        });
        ControlType::of_key(key)
    });
    BatchHeader {
        base_offset: batch.base_offset,
        last_offset: batch.last_offset,
        producer_id: batch.producer_id,
        is_transactional: batch.is_transactional,
        control,
    }
}

/// What applying an answer means beyond the partition's own state.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Applied {
    /// Bytes added to the partition's buffers.
    pub added: usize,
    /// Bytes dropped from them (the main stream was reset).
    pub freed: usize,
    /// The cluster metadata should be refreshed (a changed leader or epoch, a follower that
    /// cannot serve the offset).
    pub refresh: bool,
    /// To report through `poll()`.
    pub error: Option<Error>,
}

/// Applies one partition's answer to the fetch of its `kind` stream that `broker` was asked
/// (`asked`). An answer for a cursor that moved meanwhile (seek, reset, a recovery stream that
/// ended) only frees the stream for its next fetch. `replica_valid_for` is how long a preferred
/// read replica the leader names is kept (`metadata.max.age.ms`). `reset_allowed`:
/// `auto.offset.reset` is not `none` (what a log truncation does, KIP-320).
#[allow(clippy::too_many_arguments)]
pub(crate) fn apply(
    p: &mut PartitionState,
    tp: &TopicPartition,
    kind: StreamKind,
    broker: i32,
    asked: &Asked,
    answer: PartitionAnswer,
    now: Instant,
    replica_valid_for: Duration,
    reset_allowed: bool,
) -> Applied {
    let mut out = Applied::default();
    let moved = p.cursor != asked.cursor || p.fetch_limit(kind) != asked.limit;
    let Some(stream) = p.stream_mut(kind) else {
        return out; // the recovery stream ended or was cancelled meanwhile
    };
    stream.in_flight = false;
    if moved || stream.fetch_offset != Some(asked.offset) {
        return out; // seeked, reset or reassigned meanwhile
    }
    let code = answer.error_code;
    // KIP-392: the leader names a replica in the client's rack (fetch v11+) and answers without
    // records; the next fetches go there, until metadata.max.age.ms or an error.
    let replica = answer.preferred_read_replica;
    if code == codes::NONE && replica >= 0 && replica != broker {
        tracing::debug!(
            "{}-{}: fetching from replica {replica}, which leader {broker} prefers",
            tp.topic,
            tp.partition
        );
        stream.progressed();
        p.preferred_replica = Some((replica, now + replica_valid_for));
        return out;
    }
    if code != codes::NONE && p.preferred_replica.is_some_and(|(b, _)| b == broker) {
        // An error from the follower (out of range while it catches up, not a replica any more):
        // back to the leader, which decides again.
        p.preferred_replica = None;
        if code == codes::OFFSET_OUT_OF_RANGE {
            if let Some(stream) = p.stream_mut(kind) {
                stream.failed(
                    format!("offset {} out of range on follower {broker}", asked.offset),
                    false,
                );
            }
            out.refresh = true;
            return out;
        }
    }
    if code == codes::NONE {
        if let Some(end) = answer.diverging_epoch {
            p.high_watermark = answer.high_watermark;
            p.log_start_offset = answer.log_start_offset;
            p.last_stable_offset = answer.last_stable_offset;
            if let Some(stream) = p.stream_mut(kind) {
                stream.progressed();
            }
            diverged(p, tp, end, reset_allowed, &mut out);
            if kind == StreamKind::Recovery {
                // Whatever the main stream does, the recovery stream's own buffer came from a
                // log that diverged: it is fetched again (below the divergence point, if any).
                if let Some(rc) = p.recovery.as_mut() {
                    out.freed += rc.rewind();
                }
            }
            return out;
        }
    }
    if code == codes::NONE {
        p.high_watermark = answer.high_watermark;
        p.log_start_offset = answer.log_start_offset;
        p.last_stable_offset = answer.last_stable_offset;
        let stream = p.stream_mut(kind).expect("checked above");
        let selected = match answer.records {
            Ok(s) => s,
            Err(e) => {
                stream.failed(e.to_string(), true);
                out.error = Some(Error::Corrupt(format!(
                    "{}-{} at offset {}: {e}",
                    tp.topic, tp.partition, asked.offset
                )));
                return out;
            }
        };
        stream.oversized = selected.oversized;
        if stream.oversized {
            stream.failed(
                format!(
                    "a record batch at offset {} is larger than max.partition.fetch.bytes",
                    asked.offset
                ),
                false,
            );
        } else {
            stream.progressed();
        }
        stream.buffered_bytes += selected.bytes;
        for batch in selected.batches {
            stream.buffer.push(batch);
        }
        let nothing_buffered = stream.buffer.is_empty();
        match kind {
            StreamKind::Main => {
                p.main.fetch_offset = Some(selected.next);
                p.main.fetch_epoch = selected.next_epoch;
                if nothing_buffered {
                    // Only transaction markers (or compacted-away records) up to `next`: the
                    // position moves past them, as the Java client's does, so that commits and
                    // lag reach the end of the log.
                    p.position_caught_up();
                }
            }
            StreamKind::Recovery => {
                if let Some(rc) = p.recovery.as_mut() {
                    rc.fetched_to(selected.next, selected.next_epoch);
                }
                p.after_drain();
            }
        }
        out.added = selected.bytes;
        return out;
    }
    let e = Error::kafka_partition(code, "fetch", &tp.topic, tp.partition);
    if code == codes::OFFSET_OUT_OF_RANGE {
        match kind {
            StreamKind::Main => {
                tracing::info!(topic = %tp.topic, partition = tp.partition, offset = asked.offset, "fetch offset out of range; applying auto.offset.reset");
                out.freed = p.reset(PositionLookup::ResetPolicy);
            }
            StreamKind::Recovery => recovery_out_of_range(p, tp, asked.offset, e),
        }
        return out;
    }
    let stream = p.stream_mut(kind).expect("checked above");
    stream.failed(e.to_string(), true);
    match kafka_error_action(code) {
        Action::RefreshMetadata => out.refresh = true,
        Action::Retry => {}
        _ => out.error = Some(e),
    }
    out
}

/// KIP-320: the leader's log no longer holds what a stream fetched (a Fetch's diverging epoch, or
/// a validation's answer); `end` is where its log of the last common epoch ends. Carries out
/// [`on_divergence`] for the partition alone. A recovery stream's fetches lie below the main
/// stream's position, so a divergence under them is one under the position too: both go by
/// the position.
pub(super) fn diverged(
    p: &mut PartitionState,
    tp: &TopicPartition,
    end: EpochEndOffset,
    reset_allowed: bool,
    out: &mut Applied,
) {
    let position = p.position.or(p.main.fetch_offset).unwrap_or(end.end_offset);
    let (topic, partition) = (&tp.topic, tp.partition);
    match on_divergence(position, p.position_epoch, end, reset_allowed) {
        Divergence::Refetch { offset, epoch } => {
            tracing::info!(%topic, partition, offset, epoch, end_epoch = end.epoch, end_offset = end.end_offset, "the leader's log diverged past the position; fetching again from it");
            out.freed = p.restart_at(offset, epoch);
        }
        Divergence::Reset { offset, epoch } => {
            tracing::warn!(%topic, partition, position, offset, epoch, "log truncation detected: records from the divergence point to the position are gone from the log; resetting to the divergence point");
            out.freed = p.restart_at(offset, epoch);
        }
        Divergence::Report {
            position,
            divergent_offset,
            epoch,
        } => {
            // The partition stops until the application seeks; its other partitions flow. Its
            // recovery ranges below the divergence point still flow: those records are intact.
            out.freed = p.main.clear_buffer() + p.truncate_recovery_at(divergent_offset);
            p.main.fetch_offset = None;
            p.main.fetch_epoch = -1;
            p.cursor += 1;
            out.error = Some(Error::LogTruncation {
                partition: ErrorPartition {
                    topic: topic.clone(),
                    partition,
                },
                position,
                divergent_offset,
                divergent_epoch: epoch,
            });
        }
        Divergence::ResetPolicy => {
            tracing::warn!(%topic, partition, position, end_epoch = end.epoch, "the leader does not know the epoch of the position; applying auto.offset.reset");
            out.freed = p.reset(PositionLookup::ResetPolicy);
        }
    }
}

/// A fetch failed as a whole (the connection, or an error for the whole request): the stream
/// backs off, and a preferred read replica is left for the leader (KIP-392).
pub(crate) fn fetch_failed(p: &mut PartitionState, kind: StreamKind, why: &str) {
    p.preferred_replica = None;
    if let Some(s) = p.stream_mut(kind) {
        s.in_flight = false;
        s.failed(why.to_string(), true);
    }
}

/// OFFSET_OUT_OF_RANGE on a recovery stream: retention deleted the start of the backlog before
/// the stream reached it. Those records are gone for every client; the stream skips to the log
/// start (known from the main stream's fetches) with a warning, instead of failing the partition
/// or resetting the main stream. Until the log start is known to be past the offset, it retries.
fn recovery_out_of_range(p: &mut PartitionState, tp: &TopicPartition, offset: i64, e: Error) {
    let log_start = p.log_start_offset;
    let Some(rc) = p.recovery.as_mut() else {
        return;
    };
    if log_start > offset {
        tracing::warn!(
            topic = %tp.topic,
            partition = tp.partition,
            from = offset,
            to = log_start,
            "records of the recovery backlog were deleted by retention before they were read; skipping to the log start"
        );
        rc.fetched_to(log_start, -1);
        p.after_drain();
    } else {
        rc.stream.failed(e.to_string(), true);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::backoff::Backoff;
    use crate::fetch::state::Recovery;
    use crate::protocol::records::{Batch, Compression, RecordSpans, Span, TimestampType};
    use crate::recovery::{RecoveryRange, RecoveryState};
    use bytes::Bytes;

    const BROKER: i32 = 1;
    const MAX_AGE: Duration = Duration::from_secs(300);

    pub(crate) fn tp() -> TopicPartition {
        TopicPartition {
            topic: "orders".into(),
            partition: 3,
        }
    }

    fn backoff() -> Backoff {
        Backoff::new(Duration::from_millis(100), Duration::from_secs(1))
    }

    /// A record whose value is the 10 bytes of [`batch`]'s data.
    fn record(offset: i64) -> RecordSpans {
        RecordSpans {
            offset,
            timestamp: 0,
            key: None,
            value: Some(Span { start: 0, len: 10 }),
            headers: Vec::new(),
        }
    }

    /// A batch holding `offsets` (compaction may have removed others) up to `last`.
    fn batch(offsets: &[i64], last: i64) -> Batch {
        Batch {
            base_offset: offsets.first().copied().unwrap_or(last),
            last_offset: last,
            partition_leader_epoch: 0,
            timestamp_type: TimestampType::CreateTime,
            is_control: false,
            is_transactional: false,
            producer_id: -1,
            compression: Compression::None,
            data: Bytes::from(vec![b'v'; 10]),
            spans: offsets.iter().map(|&o| record(o)).collect(),
            inflated_bytes: 0,
        }
    }

    /// A transaction marker at `offset`.
    fn control(offset: i64) -> Batch {
        Batch {
            is_control: true,
            is_transactional: true,
            ..batch(&[offset], offset)
        }
    }

    pub(crate) fn decoded(batches: Vec<Batch>, truncated: bool) -> DecodedRecords {
        DecodedRecords { batches, truncated }
    }

    /// The cursor of a partition made by [`partition_at`].
    const CURSOR: u64 = 1;

    pub(crate) fn main_asked(offset: i64) -> Asked {
        Asked {
            offset,
            cursor: CURSOR,
            limit: i64::MAX,
            last_fetched_epoch: -1,
        }
    }

    /// What the recovery stream of `p` asks at `offset`: up to the end of the range it drains.
    pub(crate) fn recovery_asked(p: &PartitionState, offset: i64) -> Asked {
        Asked {
            offset,
            cursor: p.cursor,
            limit: p.fetch_limit(StreamKind::Recovery),
            last_fetched_epoch: -1,
        }
    }

    fn offsets(s: &Selected) -> Vec<i64> {
        s.batches
            .iter()
            .flat_map(|b| b.records.iter().map(|r| r.offset))
            .collect()
    }

    /// A partition whose main stream fetches from `offset`, with that fetch in flight.
    pub(crate) fn partition_at(offset: i64) -> PartitionState {
        let mut p = PartitionState::new("orders", PositionLookup::Committed, backoff());
        p.seek(offset);
        assert_eq!(p.cursor, CURSOR);
        p.main.in_flight = true;
        p
    }

    fn answer(code: i16, records: Selected) -> PartitionAnswer {
        PartitionAnswer {
            error_code: code,
            high_watermark: 100,
            log_start_offset: 0,
            last_stable_offset: 100,
            preferred_read_replica: -1,
            records: Ok(records),
            diverging_epoch: None,
        }
    }

    pub(crate) fn ok(records: Selected) -> PartitionAnswer {
        answer(codes::NONE, records)
    }

    /// An answer with `records` from a partition whose log ends at `end`.
    pub(crate) fn ok_with_end(records: Selected, end: i64) -> PartitionAnswer {
        PartitionAnswer {
            high_watermark: end,
            ..ok(records)
        }
    }

    /// `a` answers the fetch `asked` of `tp()`'s `kind` stream from the leader, now.
    fn answered(
        p: &mut PartitionState,
        kind: StreamKind,
        asked: &Asked,
        a: PartitionAnswer,
        reset_allowed: bool,
    ) -> Applied {
        apply(
            p,
            &tp(),
            kind,
            BROKER,
            asked,
            a,
            Instant::now(),
            MAX_AGE,
            reset_allowed,
        )
    }

    pub(crate) fn apply_main(p: &mut PartitionState, asked: Asked, a: PartitionAnswer) -> Applied {
        answered(p, StreamKind::Main, &asked, a, true)
    }

    #[test]
    fn select_starts_at_the_fetch_offset_inside_the_first_batch() {
        let s = select_all(
            decoded(vec![batch(&[10, 11, 12], 12), batch(&[13, 14], 14)], false),
            &main_asked(11),
        );
        assert_eq!(offsets(&s), vec![11, 12, 13, 14]);
        assert_eq!(s.next, 15);
        let sizes = s
            .batches
            .iter()
            .flat_map(|b| b.records.iter().map(record_size));
        assert_eq!(s.bytes, sizes.sum::<usize>());
        // Batches with no record left are not kept.
        assert!(s.batches.iter().all(|b| !b.records.is_empty()));
        assert!(s.bytes > 0 && !s.oversized);
    }

    #[test]
    fn select_passes_control_batches_and_compacted_tails() {
        // 10 and 12 kept of 10..=14 by compaction, a commit marker at 15, 16 kept of 16..=19.
        let s = select_all(
            decoded(
                vec![batch(&[10, 12], 14), control(15), batch(&[16], 19)],
                false,
            ),
            &main_asked(10),
        );
        assert_eq!(offsets(&s), vec![10, 12, 16]);
        assert_eq!(s.next, 20);
        // Only a marker: nothing to deliver, the stream moves past it.
        let s = select_all(decoded(vec![control(7)], false), &main_asked(7));
        assert!(s.batches.is_empty());
        assert_eq!(s.next, 8);
    }

    #[test]
    fn select_stops_a_recovery_fetch_at_its_range_end() {
        let asked = Asked {
            offset: 70,
            cursor: 0,
            limit: 73,
            last_fetched_epoch: -1,
        };
        let s = select_all(
            decoded(vec![batch(&[70, 71, 72, 73, 74], 74)], false),
            &asked,
        );
        assert_eq!(offsets(&s), vec![70, 71, 72]);
        assert_eq!(s.next, 73);
    }

    #[test]
    fn select_calls_only_a_first_batch_that_does_not_fit_oversized() {
        let s = select_all(decoded(Vec::new(), true), &main_asked(5));
        assert!(s.oversized);
        assert_eq!(s.next, 5);
        // A truncated tail behind whole batches is the normal end of a full fetch (KIP-74).
        let s = select_all(decoded(vec![batch(&[5, 6], 6)], true), &main_asked(5));
        assert!(!s.oversized);
        assert_eq!(s.next, 7);
    }

    #[test]
    fn records_are_buffered_and_the_position_waits_for_their_delivery() {
        let mut p = partition_at(10);
        let s = select_all(decoded(vec![batch(&[10, 11], 11)], false), &main_asked(10));
        let bytes = s.bytes;
        let a = apply_main(&mut p, main_asked(10), ok(s));
        assert_eq!(
            a,
            Applied {
                added: bytes,
                ..Applied::default()
            }
        );
        assert!(!p.main.in_flight);
        assert_eq!(p.main.fetch_offset, Some(12));
        assert_eq!(p.main.buffered_bytes, bytes);
        assert_eq!(p.position, Some(10));
        assert_eq!(p.high_watermark, 100);
        assert_eq!(p.pop(StreamKind::Main).map(|(r, _)| r.offset), Some(10));
        assert_eq!(p.position, Some(11));
    }

    #[test]
    fn an_answer_of_only_markers_moves_the_position_past_them() {
        let mut p = partition_at(10);
        let s = select_all(
            decoded(vec![control(10), control(11)], false),
            &main_asked(10),
        );
        let a = apply_main(&mut p, main_asked(10), ok(s));
        assert_eq!(a, Applied::default());
        assert_eq!(p.main.fetch_offset, Some(12));
        assert_eq!(p.position, Some(12));
    }

    #[test]
    fn an_answer_for_a_moved_cursor_only_frees_the_stream() {
        let mut p = partition_at(10);
        p.seek(50); // the application seeked while the fetch was out
        p.main.in_flight = true;
        let s = select_all(decoded(vec![batch(&[10], 10)], false), &main_asked(10));
        let a = apply_main(&mut p, main_asked(10), ok(s));
        assert_eq!(a, Applied::default());
        assert!(!p.main.in_flight);
        assert!(p.main.buffer.is_empty());
        assert_eq!(p.main.fetch_offset, Some(50));
        assert_eq!(p.position, Some(50));
    }

    #[test]
    fn out_of_range_resets_the_main_stream_and_frees_its_buffer() {
        let mut p = partition_at(10);
        let s = select_all(decoded(vec![batch(&[10], 10)], false), &main_asked(10));
        let held = apply_main(&mut p, main_asked(10), ok(s)).added;
        p.main.in_flight = true;
        let a = apply_main(
            &mut p,
            main_asked(11),
            answer(codes::OFFSET_OUT_OF_RANGE, Selected::default()),
        );
        assert_eq!(
            a,
            Applied {
                freed: held,
                ..Applied::default()
            }
        );
        assert_eq!(p.position, None);
        assert_eq!(p.main.fetch_offset, None);
        assert_eq!(p.lookup, Some(PositionLookup::ResetPolicy));
        assert_eq!(p.main.buffered_bytes, 0);
    }

    #[test]
    fn leader_changes_refresh_metadata_and_other_errors_are_reported() {
        for code in [
            codes::NOT_LEADER_OR_FOLLOWER,
            codes::FENCED_LEADER_EPOCH,
            codes::UNKNOWN_LEADER_EPOCH,
        ] {
            let mut p = partition_at(10);
            let before = p.main.next_attempt;
            let a = apply_main(&mut p, main_asked(10), answer(code, Selected::default()));
            assert!(a.refresh && a.error.is_none(), "{code}: {a:?}");
            assert!(p.main.failing && p.main.next_attempt > before, "{code}");
            assert_eq!(p.main.fetch_offset, Some(10), "{code}");
        }
        let mut p = partition_at(10);
        let a = apply_main(&mut p, main_asked(10), answer(29, Selected::default()));
        assert!(!a.refresh);
        let e = a.error.expect("TOPIC_AUTHORIZATION_FAILED is reported");
        assert!(e.to_string().contains("orders"), "{e}");
        assert!(p.main.failing);
    }

    #[test]
    fn records_that_do_not_decode_are_reported_with_the_partition_and_offset() {
        let mut p = partition_at(10);
        let mut a = ok(Selected::default());
        a.records = Err(Error::Corrupt("bad CRC".into()));
        let before = p.main.next_attempt;
        let applied = apply_main(&mut p, main_asked(10), a);
        let e = applied.error.expect("reported").to_string();
        assert!(
            e.contains("orders-3 at offset 10") && e.contains("bad CRC"),
            "{e}"
        );
        assert!(p.main.failing && p.main.next_attempt > before);
        assert_eq!(p.main.fetch_offset, Some(10));
    }

    #[test]
    fn an_oversized_first_batch_fails_the_stream_without_a_backoff() {
        let mut p = partition_at(10);
        let before = p.main.next_attempt;
        let s = select_all(decoded(Vec::new(), true), &main_asked(10));
        let a = apply_main(&mut p, main_asked(10), ok(s));
        assert_eq!(a, Applied::default());
        assert!(p.main.oversized && p.main.failing);
        assert_eq!(p.main.next_attempt, before);
        let cause = p.main.last_error.clone().unwrap();
        assert!(cause.contains("max.partition.fetch.bytes"), "{cause}");
    }

    #[test]
    fn the_leader_names_a_follower_and_an_error_there_goes_back_to_the_leader() {
        let mut p = partition_at(10);
        let now = Instant::now();
        let mut a = ok(Selected::default());
        a.preferred_read_replica = 2;
        let applied = apply(
            &mut p,
            &tp(),
            StreamKind::Main,
            1,
            &main_asked(10),
            a,
            now,
            MAX_AGE,
            true,
        );
        assert_eq!(applied, Applied::default());
        assert_eq!(p.preferred_replica, Some((2, now + MAX_AGE)));
        assert_eq!(p.main.fetch_offset, Some(10));
        assert!(!p.main.failing);
        // The follower has not caught up: back to the leader, no reset of the position.
        p.main.in_flight = true;
        let applied = apply(
            &mut p,
            &tp(),
            StreamKind::Main,
            2,
            &main_asked(10),
            answer(codes::OFFSET_OUT_OF_RANGE, Selected::default()),
            now,
            MAX_AGE,
            true,
        );
        assert!(applied.refresh && applied.freed == 0 && applied.error.is_none());
        assert_eq!(p.preferred_replica, None);
        assert_eq!(p.position, Some(10));
        assert_eq!(p.lookup, None);
        assert!(p.main.failing);
        // A whole failed fetch from the follower also goes back to the leader.
        p.preferred_replica = Some((2, now + MAX_AGE));
        p.main.in_flight = true;
        fetch_failed(&mut p, StreamKind::Main, "connection refused");
        assert_eq!(p.preferred_replica, None);
        assert!(!p.main.in_flight);
        assert_eq!(p.main.last_error.as_deref(), Some("connection refused"));
    }

    /// A partition taken over at 70 with the log end at 120 and a second range 130..140 (a
    /// resumed token): main stream at 140, recovery stream fetching 70..120 in flight.
    pub(crate) fn recovering() -> PartitionState {
        let state = RecoveryState {
            main_next: 140,
            ranges: vec![
                RecoveryRange {
                    start: 70,
                    end: 120,
                    next: 70,
                },
                RecoveryRange {
                    start: 130,
                    end: 140,
                    next: 130,
                },
            ],
        };
        let mut p = partition_at(140);
        p.recovery = Recovery::start(state, backoff(), -1);
        p.recovery.as_mut().unwrap().stream.in_flight = true;
        p
    }

    pub(crate) fn apply_recovery(
        p: &mut PartitionState,
        asked: Asked,
        a: PartitionAnswer,
    ) -> Applied {
        answered(p, StreamKind::Recovery, &asked, a, true)
    }

    #[test]
    fn a_recovery_stream_moves_to_the_next_range_at_its_range_end_and_ends_after_the_last() {
        let mut p = recovering();
        let asked = recovery_asked(&p, 70);
        assert_eq!(asked.limit, 120);
        // The answer runs past the range into records the main stream owns.
        let offsets: Vec<i64> = (70..125).collect();
        let s = select_all(decoded(vec![batch(&offsets, 124)], false), &asked);
        assert_eq!(self::offsets(&s), (70..120).collect::<Vec<i64>>());
        let a = apply_recovery(&mut p, asked, ok(s));
        assert!(a.added > 0);
        let rc = p.recovery.as_ref().unwrap();
        assert_eq!(rc.stream.fetch_offset, Some(130));
        assert_eq!(rc.fetch_end, 140);
        // Delivering the first range finishes it; the commit holds at the second range.
        while p.pop(StreamKind::Recovery).is_some() {}
        p.after_drain();
        assert_eq!(p.recovery.as_ref().unwrap().ranges.len(), 1);
        assert_eq!(p.commit_offset().unwrap().offset, 130);
        // The second range holds only a marker and compacted-away records: fetched past its end,
        // nothing buffered, the recovery stream ends and the commit is the main position.
        p.recovery.as_mut().unwrap().stream.in_flight = true;
        let asked = Asked {
            offset: 130,
            cursor: p.cursor,
            limit: 140,
            last_fetched_epoch: -1,
        };
        let s = select_all(decoded(vec![batch(&[], 138), control(139)], false), &asked);
        apply_recovery(&mut p, asked, ok(s));
        assert!(p.recovery.is_none());
        assert_eq!(p.commit_offset().unwrap().offset, 140);
    }

    #[test]
    fn a_recovery_stream_out_of_range_skips_to_the_log_start_once_it_is_known() {
        let mut p = recovering();
        let asked = Asked {
            offset: 70,
            cursor: p.cursor,
            limit: 120,
            last_fetched_epoch: -1,
        };
        // The log start is not known past 70 yet: retry, the range stays.
        let a = apply_recovery(
            &mut p,
            asked,
            answer(codes::OFFSET_OUT_OF_RANGE, Selected::default()),
        );
        assert_eq!(a, Applied::default());
        let rc = p.recovery.as_ref().unwrap();
        assert!(rc.stream.failing);
        assert_eq!(rc.stream.fetch_offset, Some(70));
        assert_eq!(p.position, Some(140), "the main stream is not reset");
        // Retention deleted up to 100: the stream skips there, and the ranges follow.
        p.log_start_offset = 100;
        p.recovery.as_mut().unwrap().stream.in_flight = true;
        apply_recovery(
            &mut p,
            asked,
            answer(codes::OFFSET_OUT_OF_RANGE, Selected::default()),
        );
        let rc = p.recovery.as_ref().unwrap();
        assert_eq!(rc.stream.fetch_offset, Some(100));
        assert_eq!(rc.ranges[0].next, 100);
        assert_eq!(p.commit_offset().unwrap().offset, 100);
    }

    #[test]
    fn a_recovery_answer_after_its_range_changed_is_dropped() {
        let mut p = recovering();
        let asked = Asked {
            offset: 70,
            cursor: p.cursor,
            limit: 130, // not the range end the stream drains now
            last_fetched_epoch: -1,
        };
        let s = select_all(decoded(vec![batch(&[70], 70)], false), &asked);
        let a = apply_recovery(&mut p, asked, ok(s));
        assert_eq!(a, Applied::default());
        let rc = p.recovery.as_ref().unwrap();
        assert!(rc.stream.buffer.is_empty() && !rc.stream.in_flight);
        assert_eq!(rc.stream.fetch_offset, Some(70));
    }

    /// A batch of leader epoch `epoch`.
    pub(crate) fn batch_in(epoch: i32, offsets: &[i64], last: i64) -> Batch {
        Batch {
            partition_leader_epoch: epoch,
            ..batch(offsets, last)
        }
    }

    fn end(epoch: i32, end_offset: i64) -> EpochEndOffset {
        EpochEndOffset { epoch, end_offset }
    }

    /// KIP-320's decision from literal inputs: (position, its epoch, the leader's end of the last
    /// common epoch, auto.offset.reset allows a reset) -> what the partition does.
    #[test]
    fn a_position_past_the_end_of_its_epoch_is_truncated() {
        use Divergence::*;
        let cases = [
            // The log of epoch 3 ends at 130, past the position: nothing delivered was lost;
            // only what was fetched beyond is fetched again, in the common epoch.
            (
                120,
                3,
                end(3, 130),
                false,
                Refetch {
                    offset: 120,
                    epoch: 3,
                },
            ),
            (
                120,
                3,
                end(3, 120),
                true,
                Refetch {
                    offset: 120,
                    epoch: 3,
                },
            ),
            // The position's epoch is later than the leader's last common one: ask in that one.
            (
                120,
                5,
                end(3, 130),
                true,
                Refetch {
                    offset: 120,
                    epoch: 3,
                },
            ),
            // No epoch known for the position: fetch again with no check.
            (
                120,
                -1,
                end(3, 130),
                true,
                Refetch {
                    offset: 120,
                    epoch: -1,
                },
            ),
            // Truncated: earliest or latest reset to the point of divergence.
            (
                120,
                3,
                end(3, 100),
                true,
                Reset {
                    offset: 100,
                    epoch: 3,
                },
            ),
            (
                120,
                4,
                end(2, 0),
                true,
                Reset {
                    offset: 0,
                    epoch: 2,
                },
            ),
            // Truncated with auto.offset.reset=none: reported with the offsets.
            (
                120,
                3,
                end(3, 100),
                false,
                Report {
                    position: 120,
                    divergent_offset: 100,
                    epoch: 3,
                },
            ),
            // The leader does not know the epoch (UNDEFINED epoch or end offset).
            (120, 3, end(-1, -1), true, ResetPolicy),
            (120, 3, end(-1, -1), false, ResetPolicy),
            (120, 3, end(3, -1), false, ResetPolicy),
        ];
        for (position, epoch, e, reset_allowed, expected) in cases {
            assert_eq!(
                on_divergence(position, epoch, e, reset_allowed),
                expected,
                "{position} in {epoch}, {e:?}, reset allowed: {reset_allowed}"
            );
        }
    }

    #[test]
    fn select_names_the_epoch_of_the_last_batch_it_read() {
        let asked = Asked {
            last_fetched_epoch: 2,
            ..main_asked(10)
        };
        let s = select_all(
            decoded(
                vec![batch_in(2, &[10, 11], 11), batch_in(3, &[12], 12)],
                false,
            ),
            &asked,
        );
        assert_eq!((s.next, s.next_epoch), (13, 3));
        // A marker of a later epoch moves the stream into it too.
        let s = select_all(decoded(vec![control(10)], false), &asked);
        assert_eq!((s.next, s.next_epoch), (11, 0));
        // Nothing read: the epoch asked with stays.
        let s = select_all(decoded(Vec::new(), false), &asked);
        assert_eq!((s.next, s.next_epoch), (10, 2));
    }

    #[test]
    fn the_position_takes_the_epoch_of_each_record_delivered() {
        let mut p = partition_at(10);
        assert_eq!(
            (p.position_epoch, p.last_fetched_epoch(StreamKind::Main)),
            (-1, -1)
        );
        let s = select_all(
            decoded(vec![batch_in(4, &[10], 10), batch_in(5, &[11], 11)], false),
            &main_asked(10),
        );
        apply_main(&mut p, main_asked(10), ok(s));
        // The next fetch says the epoch of the last batch fetched; the position is still in the
        // epoch it had.
        assert_eq!(p.last_fetched_epoch(StreamKind::Main), 5);
        assert_eq!(p.position_epoch, -1);
        p.pop(StreamKind::Main);
        assert_eq!((p.position, p.position_epoch), (Some(11), 4));
        p.pop(StreamKind::Main);
        assert_eq!((p.position, p.position_epoch), (Some(12), 5));
        // A seek forgets the epoch: no check until a batch is fetched.
        p.seek(50);
        assert_eq!(
            (p.position_epoch, p.last_fetched_epoch(StreamKind::Main)),
            (-1, -1)
        );
    }

    /// A commit sends the epoch of the record before the offset committed, where the partition
    /// knows it (KIP-320): from the records it delivered since its last seek.
    #[test]
    fn a_commit_offset_gets_the_epoch_of_the_record_before_it() {
        let mut p = partition_at(10);
        let s = select_all(
            decoded(
                vec![batch_in(4, &[10, 11], 11), batch_in(6, &[12, 13], 13)],
                false,
            ),
            &main_asked(10),
        );
        apply_main(&mut p, main_asked(10), ok(s));
        assert_eq!(
            p.epoch_at(10),
            -1,
            "nothing delivered yet: the seek's unknown epoch"
        );
        for _ in 0..3 {
            p.pop(StreamKind::Main);
        }
        // Delivered 10 and 11 (epoch 4) and 12 (epoch 6); the position is 13.
        let cases = [(9, -1), (10, -1), (11, 4), (12, 4), (13, 6), (14, -1)];
        for (offset, epoch) in cases {
            assert_eq!(p.epoch_at(offset), epoch, "offset {offset}");
        }
        // A seek forgets them.
        p.seek(12);
        assert_eq!((p.epoch_at(12), p.epoch_at(13)), (-1, -1));
    }

    /// A partition that delivered up to 120 in epoch 3, with 120..=124 (epoch 3) buffered, its
    /// fetch of 125 in flight.
    pub(crate) fn read_to_120() -> PartitionState {
        let mut p = partition_at(100);
        let first: Vec<i64> = (100..125).collect();
        let s = select_all(
            decoded(vec![batch_in(3, &first, 124)], false),
            &main_asked(100),
        );
        apply_main(&mut p, main_asked(100), ok(s));
        for _ in 100..120 {
            p.pop(StreamKind::Main);
        }
        assert_eq!((p.position, p.position_epoch), (Some(120), 3));
        p.main.in_flight = true;
        p
    }

    fn diverging(e: EpochEndOffset) -> PartitionAnswer {
        PartitionAnswer {
            diverging_epoch: Some(e),
            ..ok(Selected::default())
        }
    }

    fn apply_diverging(p: &mut PartitionState, e: EpochEndOffset, reset_allowed: bool) -> Applied {
        let asked = Asked {
            last_fetched_epoch: 3,
            cursor: p.cursor,
            ..main_asked(125)
        };
        assert_eq!(
            asked.last_fetched_epoch,
            p.last_fetched_epoch(StreamKind::Main)
        );
        answered(p, StreamKind::Main, &asked, diverging(e), reset_allowed)
    }

    #[test]
    fn a_truncated_log_resets_to_the_divergence_point_when_the_policy_allows() {
        let mut p = read_to_120();
        let held = p.main.buffered_bytes;
        let cursor = p.cursor;
        let a = apply_diverging(&mut p, end(3, 100), true);
        assert_eq!(
            a,
            Applied {
                freed: held,
                ..Applied::default()
            }
        );
        assert_eq!((p.position, p.position_epoch), (Some(100), 3));
        assert_eq!(
            (p.main.fetch_offset, p.last_fetched_epoch(StreamKind::Main)),
            (Some(100), 3)
        );
        assert!(p.main.buffer.is_empty() && p.cursor > cursor && p.lookup.is_none());
        assert!(!p.main.failing && !p.main.in_flight);
    }

    #[test]
    fn a_truncated_log_with_no_reset_policy_stops_the_partition_and_names_the_offsets() {
        let mut p = read_to_120();
        let held = p.main.buffered_bytes;
        let a = apply_diverging(&mut p, end(3, 100), false);
        assert_eq!(a.freed, held);
        match a.error {
            Some(Error::LogTruncation {
                ref partition,
                position,
                divergent_offset,
                divergent_epoch,
            }) => {
                assert_eq!(
                    (partition.topic.as_str(), partition.partition),
                    ("orders", 3)
                );
                assert_eq!((position, divergent_offset, divergent_epoch), (120, 100, 3));
            }
            ref other => panic!("{other:?}"),
        }
        let shown = a.error.unwrap().to_string();
        assert!(
            shown.contains("orders-3") && shown.contains("120") && shown.contains("100"),
            "{shown}"
        );
        // Nothing more is fetched until the application seeks, and the wait is not a stuck task.
        assert_eq!(p.main.fetch_offset, None);
        assert_eq!(p.position, Some(120));
        assert!(p.fetchable(Instant::now(), 1 << 20).is_empty());
        assert_eq!(
            p.main.activity(false, false, p.lookup.is_some()),
            super::super::state::Activity::Idle
        );
        p.seek(100);
        assert_eq!(
            p.fetchable(Instant::now(), 1 << 20),
            vec![(StreamKind::Main, 100)]
        );
    }

    #[test]
    fn a_divergence_past_the_position_only_fetches_again_from_it() {
        let mut p = read_to_120();
        let held = p.main.buffered_bytes;
        // Epoch 3 ends at 122 on the new leader: 120 and 121 are still there, 122..=124 not.
        let a = apply_diverging(&mut p, end(3, 122), false);
        assert_eq!(
            a,
            Applied {
                freed: held,
                ..Applied::default()
            }
        );
        assert_eq!((p.position, p.position_epoch), (Some(120), 3));
        assert_eq!(
            (p.main.fetch_offset, p.last_fetched_epoch(StreamKind::Main)),
            (Some(120), 3)
        );
    }

    #[test]
    fn a_leader_that_does_not_know_the_epoch_applies_the_reset_policy() {
        let mut p = read_to_120();
        let a = apply_diverging(&mut p, end(-1, -1), false);
        assert!(a.error.is_none() && a.freed > 0);
        assert_eq!(p.position, None);
        assert_eq!(p.lookup, Some(PositionLookup::ResetPolicy));
    }

    /// `recovering()` with the committed offset's epoch 2 at 70, the recovery stream having
    /// fetched 70..=94 (epoch 2) and delivered 70..=79, its fetch of 95 in flight.
    fn recovery_read_to_80() -> PartitionState {
        let mut p = recovering();
        p.recovery.as_mut().unwrap().stream.fetch_epoch = 2;
        assert_eq!(p.last_fetched_epoch(StreamKind::Recovery), 2);
        let asked = Asked {
            offset: 70,
            cursor: p.cursor,
            limit: 120,
            last_fetched_epoch: 2,
        };
        let offsets: Vec<i64> = (70..95).collect();
        let s = select_all(decoded(vec![batch_in(2, &offsets, 94)], false), &asked);
        apply_recovery(&mut p, asked, ok(s));
        for _ in 70..80 {
            p.pop(StreamKind::Recovery);
        }
        p.recovery.as_mut().unwrap().stream.in_flight = true;
        p
    }

    #[test]
    fn a_recovery_stream_sends_the_epoch_it_fetched_in_and_none_across_a_gap() {
        let mut p = recovery_read_to_80();
        assert_eq!(
            (
                p.recovery.as_ref().unwrap().stream.fetch_offset,
                p.last_fetched_epoch(StreamKind::Recovery)
            ),
            (Some(95), 2)
        );
        // The rest of the range, in epoch 3: the stream moves to the next range, at 130, and
        // the record before 130 was not fetched: no epoch.
        let asked = Asked {
            offset: 95,
            cursor: p.cursor,
            limit: 120,
            last_fetched_epoch: 2,
        };
        let offsets: Vec<i64> = (95..120).collect();
        let s = select_all(decoded(vec![batch_in(3, &offsets, 119)], false), &asked);
        assert_eq!(s.next_epoch, 3);
        apply_recovery(&mut p, asked, ok(s));
        assert_eq!(
            (
                p.recovery.as_ref().unwrap().stream.fetch_offset,
                p.last_fetched_epoch(StreamKind::Recovery)
            ),
            (Some(130), -1)
        );
    }

    /// A paused partition's records dropped to make room: the recovery stream fetches again from
    /// the first unfinished range in no known epoch. The epoch it had was that of the last batch
    /// fetched, above the offset it goes back to, which is not the record before that offset.
    #[test]
    fn a_recovery_stream_rewound_for_room_sends_no_epoch() {
        let mut p = recovering();
        let asked = Asked {
            offset: 70,
            cursor: p.cursor,
            limit: 120,
            last_fetched_epoch: -1,
        };
        let s = select_all(
            decoded(
                vec![
                    batch_in(2, &(70..80).collect::<Vec<_>>(), 79),
                    batch_in(3, &(80..95).collect::<Vec<_>>(), 94),
                ],
                false,
            ),
            &asked,
        );
        apply_recovery(&mut p, asked, ok(s));
        for _ in 70..75 {
            p.pop(StreamKind::Recovery);
        }
        assert_eq!(p.last_fetched_epoch(StreamKind::Recovery), 3);
        let held = p.buffered_bytes();
        assert_eq!(p.drop_buffered(), held);
        let rc = p.recovery.as_ref().unwrap();
        assert!(rc.stream.buffer.is_empty());
        assert_eq!((rc.stream.fetch_offset, rc.fetch_end), (Some(75), 120));
        assert_eq!(p.last_fetched_epoch(StreamKind::Recovery), -1);
    }

    fn recovery_diverging(
        p: &mut PartitionState,
        e: EpochEndOffset,
        reset_allowed: bool,
    ) -> Applied {
        let asked = Asked {
            offset: 95,
            cursor: p.cursor,
            limit: 120,
            last_fetched_epoch: 2,
        };
        answered(p, StreamKind::Recovery, &asked, diverging(e), reset_allowed)
    }

    /// A new leader's log of epoch 2 ends at 90, under the recovery stream's fetch offset 95
    /// and so under the main stream's position 140: the partition resets to 90; the recovery
    /// range keeps 80..90 (still in the log, not delivered) and fetches it again.
    #[test]
    fn a_recovery_stream_that_diverged_resets_the_partition_and_keeps_the_backlog_below() {
        let mut p = recovery_read_to_80();
        let held = p.buffered_bytes();
        let a = recovery_diverging(&mut p, end(2, 90), true);
        assert_eq!((a.freed, a.error), (held, None));
        assert_eq!((p.position, p.main.fetch_offset), (Some(90), Some(90)));
        let rc = p.recovery.as_ref().unwrap();
        assert_eq!(
            rc.ranges,
            vec![RecoveryRange {
                start: 70,
                end: 90,
                next: 80
            }]
        );
        assert_eq!(
            (rc.stream.fetch_offset, rc.fetch_end, rc.stream.fetch_epoch),
            (Some(80), 90, -1)
        );
        assert!(rc.stream.buffer.is_empty());
        assert_eq!(p.commit_offset().unwrap().offset, 80);
        // Under none: reported with the main stream's position; the backlog below still flows.
        let mut p = recovery_read_to_80();
        let a = recovery_diverging(&mut p, end(2, 90), false);
        match a.error {
            Some(Error::LogTruncation {
                position,
                divergent_offset,
                ..
            }) => assert_eq!((position, divergent_offset), (140, 90)),
            ref other => panic!("{other:?}"),
        }
        assert_eq!(p.main.fetch_offset, None);
        let rc = p.recovery.as_ref().unwrap();
        assert_eq!((rc.stream.fetch_offset, rc.fetch_end), (Some(80), 90));
    }
}
