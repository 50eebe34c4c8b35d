//! The idempotent producer's decisions, as the Java producer makes them (its `TransactionManager`
//! and `Sender`, Kafka 2.5+ with KIP-360): which sequence a batch gets, whether a partition's
//! next batch may go now, what an answer to a sequenced batch means, and when a partition's
//! sequences restart under a new epoch. Pure: the accumulator keeps the state, the sender
//! carries the decisions out.
//!
//! The broker keeps, per producer id and partition, the epoch and the sequences of the last five
//! batches it appended. A retried batch (same producer id, epoch and sequence) it has appended
//! already is answered as a success, not appended again: that is what makes a retry safe. A
//! sequence that does not follow the last appended one is refused as
//! OUT_OF_ORDER_SEQUENCE_NUMBER, so a batch never lands before an earlier one. When a sequence
//! range is lost for good (a batch failed or expired after it was sent), the partition's later
//! batches restart at sequence 0 under the next epoch, which the broker accepts from the same
//! producer id (the Java producer bumps the epoch of an idempotent producer itself, without a
//! request; InitProducerId gives a new producer id once the epoch is at its maximum).
use std::collections::BTreeMap;

use crate::error::{codes, kafka_error_action, Action};

/// KIP-360 codes, not in `error::codes`: the producer side of the table.
pub(super) mod produce_codes {
    pub const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
    pub const OUT_OF_ORDER_SEQUENCE_NUMBER: i16 = 45;
    pub const DUPLICATE_SEQUENCE_NUMBER: i16 = 46;
    pub const TRANSACTIONAL_ID_AUTHORIZATION_FAILED: i16 = 53;
    pub const UNKNOWN_PRODUCER_ID: i16 = 59;
    pub const PRODUCER_FENCED: i16 = 90;
}
use produce_codes::*;

/// A producer id and its epoch, as InitProducerId gives them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct ProducerIdEpoch {
    pub(super) id: i64,
    pub(super) epoch: i16,
}

/// The producer id, epoch and base sequence a batch was sent with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct BatchSequence {
    pub(super) pid: ProducerIdEpoch,
    pub(super) base: i32,
    /// Its records: the batch covers sequences `base .. base + count` (wrapping).
    pub(super) count: i32,
    /// The sequence was rewritten by an epoch bump after the batch was first sent (Java's
    /// `sequenceHasBeenReset`): an error answer to it says nothing new about the partition.
    pub(super) reset: bool,
}

impl BatchSequence {
    /// The sequence of the batch's last record.
    pub(super) fn last(&self) -> i32 {
        increment(self.base, self.count - 1)
    }
}

/// `sequence + by`, wrapping past `i32::MAX` to 0 as the broker counts
/// (`DefaultRecordBatch.incrementSequence`).
pub(super) fn increment(sequence: i32, by: i32) -> i32 {
    if sequence > i32::MAX - by {
        by - (i32::MAX - sequence) - 1
    } else {
        sequence + by
    }
}

/// The sequence bookkeeping of one partition (Java's `TxnPartitionEntry`).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct PartitionSequences {
    /// The producer id and epoch the sequences below belong to; `None` before the first batch.
    pub(super) pid: Option<ProducerIdEpoch>,
    /// The base sequence the next new batch gets.
    pub(super) next: i32,
    /// The last sequence the broker acknowledged under `pid`.
    pub(super) last_acked: Option<i32>,
    /// Base sequence -> (record count, number in `assigned`) of every batch sent and not yet
    /// completed: on the wire or waiting for its retry.
    pub(super) unfinished: BTreeMap<i32, (i32, u64)>,
    /// Batches given a sequence so far (under any epoch): numbers them.
    pub(super) assigned: u64,
    /// A batch expired after it was sent: whether the broker has it is unknown. The sequence
    /// after it (Java's `partitionsWithUnresolvedSequences`). No new batch goes until resolved.
    pub(super) unresolved: Option<i32>,
    /// An epoch bump restarts this partition's sequences (Java's `partitionsToRewriteSequences`),
    /// once nothing of it is on the wire.
    pub(super) rewrite: bool,
}

impl PartitionSequences {
    /// Gives the next new batch of `count` records its sequence under `current` (the
    /// producer's id and epoch): the partition moves to `current` first if it was on another
    /// one and nothing of it is unfinished (Java's `maybeUpdateProducerIdAndEpoch`).
    pub(super) fn assign(&mut self, current: ProducerIdEpoch, count: i32) -> BatchSequence {
        if self.pid != Some(current) && self.unfinished.is_empty() {
            self.restart(current);
        }
        let base = self.next;
        self.next = increment(base, count);
        self.unfinished.insert(base, (count, self.assigned));
        self.assigned += 1;
        BatchSequence {
            pid: self.pid.unwrap_or(current),
            base,
            count,
            reset: false,
        }
    }

    fn restart(&mut self, pid: ProducerIdEpoch) {
        self.pid = Some(pid);
        self.next = 0;
        self.last_acked = None;
        self.unresolved = None;
    }

    /// Whether `base` is the sequence the broker expects next (the one after the last
    /// acknowledged, 0 when none was).
    pub(super) fn is_next(&self, base: i32) -> bool {
        match self.last_acked {
            Some(last) => increment(last, 1) == base,
            None => base == 0,
        }
    }

    /// Whether `window` batches were given a sequence since the oldest unfinished one (that one
    /// included): the broker keeps the last five batches of a producer and partition to
    /// recognise a retry, so a new batch must not push an unfinished one out of them. (An answer
    /// lost while later ones arrive, and more batches sent meanwhile, would otherwise leave the
    /// lost one unrecognisable: refused as out of order on every retry.)
    pub(super) fn window_full(&self, window: usize) -> bool {
        self.unfinished
            .values()
            .map(|&(_, n)| n)
            .min()
            .is_some_and(|oldest| self.assigned - oldest >= window as u64)
    }

    /// The broker acknowledged `batch`.
    pub(super) fn acknowledged(&mut self, batch: &BatchSequence) {
        self.unfinished.remove(&batch.base);
        if Some(batch.pid) == self.pid {
            let last = batch.last();
            // Answers may come out of order after a leader change; keep the highest.
            self.last_acked = Some(match self.last_acked {
                Some(l) if sequence_after(l, last) => l,
                _ => last,
            });
        }
    }

    /// `batch` failed after it was sent, for good (an error, or its delivery timeout in
    /// an answer): its sequences are lost, the partition restarts under the next epoch.
    pub(super) fn failed(&mut self, batch: &BatchSequence) {
        self.unfinished.remove(&batch.base);
        self.rewrite = true;
    }

    /// `batch` expired waiting for a retry, after it was sent at least once: the broker may or
    /// may not have it (Java's `markSequenceUnresolved`).
    pub(super) fn expired(&mut self, batch: &BatchSequence) {
        self.unfinished.remove(&batch.base);
        let after = increment(batch.last(), 1);
        self.unresolved = Some(match self.unresolved {
            Some(u) if sequence_after(u, after) => u,
            _ => after,
        });
    }

    /// Java's `maybeResolveSequences`, once nothing of the partition is unfinished: the
    /// unresolved state clears if later batches were acknowledged right after the expired ones
    /// (so the broker had them), else the partition restarts under the next epoch.
    pub(super) fn resolve(&mut self) {
        if self.unresolved.is_none() || !self.unfinished.is_empty() {
            return;
        }
        if !self.is_next(self.next) {
            self.rewrite = true;
        }
        self.unresolved = None;
    }

    /// The bumped epoch `pid` restarts the partition: the batches waiting for a retry (their
    /// record counts in sequence order) get sequences from 0 under it. Only called with nothing
    /// of the partition on the wire. Returns their new base sequences.
    pub(super) fn restart_under(&mut self, pid: ProducerIdEpoch, waiting: &[i32]) -> Vec<i32> {
        self.restart(pid);
        self.unfinished.clear();
        self.rewrite = false;
        waiting
            .iter()
            .map(|&count| {
                let base = self.next;
                self.next = increment(base, count);
                self.unfinished.insert(base, (count, self.assigned));
                self.assigned += 1;
                base
            })
            .collect()
    }
}

/// Whether sequence `a` comes after `b`. Sequences run from 0 to `i32::MAX` and wrap to 0, so
/// "after" means within the next half of that space.
pub(super) fn sequence_after(a: i32, b: i32) -> bool {
    let d = (i64::from(a) - i64::from(b)).rem_euclid(1 << 31);
    d != 0 && d < (1 << 30)
}

/// The producer's id and epoch after a bump: the same id with the next epoch, or `None` when
/// the epoch is at its maximum and a new id is needed (Java's `bumpIdempotentProducerEpoch`).
pub(super) fn bumped(pid: ProducerIdEpoch) -> Option<ProducerIdEpoch> {
    (pid.epoch < i16::MAX).then(|| ProducerIdEpoch {
        id: pid.id,
        epoch: pid.epoch + 1,
    })
}

/// What heads a partition's queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Head {
    /// A batch sent before, waiting for its retry (it has its sequence).
    Retry,
    /// A batch never sent.
    New,
}

/// What the sender knows of a partition when it looks for a batch to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PartitionView {
    pub(super) idempotent: bool,
    /// The producer has an id (idempotent only).
    pub(super) have_pid: bool,
    /// The producer hit a fatal error (idempotent only).
    pub(super) fatal: bool,
    pub(super) head: Head,
    /// Batches of the partition on the wire.
    pub(super) on_wire: usize,
    /// The most batches of one partition on the wire at once.
    pub(super) max_on_wire: usize,
    /// The partition's sequences belong to an older producer id or epoch.
    pub(super) stale: bool,
    /// `max_on_wire` batches were sent since the oldest unfinished one
    /// ([`PartitionSequences::window_full`]).
    pub(super) window_full: bool,
    /// No batch of the partition was acknowledged under its producer id and epoch yet.
    pub(super) unacknowledged: bool,
    /// An expired batch left the partition's sequences unresolved.
    pub(super) unresolved: bool,
    /// An epoch bump waits to restart the partition's sequences.
    pub(super) rewrite: bool,
}

/// Why a partition's next batch does not go now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Hold {
    /// The producer has no id yet (InitProducerId is under way).
    NoProducerId,
    /// The producer failed for good; its batches fail instead.
    Fatal,
    /// As many batches as allowed are on the wire.
    InFlight,
    /// A retry goes alone, once every earlier answer is in: batches behind a failed one could
    /// otherwise overtake it.
    RetryAlone,
    /// The partition's sequences restart (an epoch bump, an unresolved expiry) once the batches
    /// on the wire are answered.
    Restart,
}

/// Whether the head of a partition's queue may go now (Java's
/// `RecordAccumulator.shouldStopDrainBatchesForPartition`, with retries sent one at a time).
pub(super) fn may_send(v: PartitionView) -> Result<(), Hold> {
    if !v.idempotent {
        // One batch per partition on the wire keeps a plain producer's records in order.
        return if v.on_wire == 0 {
            Ok(())
        } else {
            Err(Hold::InFlight)
        };
    }
    if v.fatal {
        return Err(Hold::Fatal);
    }
    if !v.have_pid {
        return Err(Hold::NoProducerId);
    }
    if v.rewrite {
        // The caller restarts the sequences once nothing is on the wire, then asks again.
        return Err(Hold::Restart);
    }
    match v.head {
        Head::Retry if v.on_wire == 0 => Ok(()),
        Head::Retry => Err(Hold::RetryAlone),
        Head::New if v.unresolved || (v.stale && v.on_wire > 0) => Err(Hold::Restart),
        Head::New if v.on_wire >= v.max_on_wire || v.window_full => Err(Hold::InFlight),
        // A broker without state for the producer on the partition (its first batch, or state
        // lost) appends whatever sequence comes first: a later batch landing before an earlier
        // one that failed (NOT_LEADER_OR_FOLLOWER on a new topic) would be out of order, and
        // the earlier one refused as OUT_OF_ORDER_SEQUENCE_NUMBER on every retry. So the first
        // batch goes alone; once acknowledged, the broker checks every sequence.
        Head::New if v.unacknowledged && v.on_wire > 0 => Err(Hold::InFlight),
        Head::New => Ok(()),
    }
}

/// An answer to one sequenced batch of a Produce request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Answer {
    /// The partition's error code (NONE included).
    Code(i16),
    /// No answer: the connection broke or the request timed out. `retriable` as the error says.
    Lost { retriable: bool },
}

/// What the sender knows when an answer to a sequenced batch arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AnswerView {
    pub(super) answer: Answer,
    /// The batch's sequence.
    pub(super) batch: BatchSequence,
    /// The partition's state (before this answer).
    pub(super) is_next: bool,
    pub(super) unresolved: Option<i32>,
    /// The answer's log start offset (-1: the broker did not know it).
    pub(super) log_start_offset: i64,
    /// The batch's delivery.timeout.ms has passed.
    pub(super) timed_out: bool,
}

/// What to do with a sequenced batch after its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Verdict {
    /// The broker has the batch. `duplicate`: it had it already and no longer knows its offset
    /// (DUPLICATE_SEQUENCE_NUMBER, which the Java producer counts as a success too).
    Done { duplicate: bool },
    /// Send it again with the same sequence (after backoff). `bump`: the partition's sequences
    /// restart under the next epoch first (KIP-360). `refresh`: the leader may have moved.
    Retry { bump: bool, refresh: bool },
    /// The batch fails; its sequences are lost, so the partition restarts under the next epoch.
    Fail,
    /// The producer can not go on (not authorized, fenced, a broker without idempotence): the
    /// batch and every later one fail with this error.
    Fatal,
}

/// Java's `Sender.completeBatch` with `TransactionManager.canRetry`, for an idempotent producer.
pub(super) fn on_answer(v: AnswerView) -> Verdict {
    let code = match v.answer {
        Answer::Code(c) => c,
        Answer::Lost { retriable } if retriable && !v.timed_out => {
            return Verdict::Retry {
                bump: false,
                refresh: true,
            }
        }
        Answer::Lost { .. } => return Verdict::Fail,
    };
    match code {
        codes::NONE => return Verdict::Done { duplicate: false },
        DUPLICATE_SEQUENCE_NUMBER => return Verdict::Done { duplicate: true },
        CLUSTER_AUTHORIZATION_FAILED
        | TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        | PRODUCER_FENCED
        | codes::UNSUPPORTED_VERSION => return Verdict::Fatal,
        _ => {}
    }
    if v.timed_out {
        return Verdict::Fail;
    }
    let retry = |bump| Verdict::Retry {
        bump,
        refresh: false,
    };
    match code {
        UNKNOWN_PRODUCER_ID => {
            // The broker lost the producer's state (the log's head was deleted, say). Without a
            // log start offset the partition may be moving: ask again. A batch already restarted
            // by a bump is answered for its old sequence: it says nothing new.
            retry(v.log_start_offset != -1 && !v.batch.reset)
        }
        OUT_OF_ORDER_SEQUENCE_NUMBER => {
            if v.unresolved.is_none() && (v.batch.reset || !v.is_next) {
                // Not the batch the broker expects next: an earlier one failed and this one
                // waits for it.
                retry(false)
            } else {
                // A gap right before this batch: the sequences behind it are lost.
                retry(v.unresolved.is_none() || v.unresolved == Some(v.batch.base))
            }
        }
        _ => match kafka_error_action(code) {
            Action::Retry => retry(false),
            Action::RefreshMetadata => Verdict::Retry {
                bump: false,
                refresh: true,
            },
            _ => Verdict::Fail,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const P0: ProducerIdEpoch = ProducerIdEpoch { id: 7, epoch: 0 };
    const P1: ProducerIdEpoch = ProducerIdEpoch { id: 7, epoch: 1 };

    fn batch(base: i32, count: i32, reset: bool) -> BatchSequence {
        BatchSequence {
            pid: P0,
            base,
            count,
            reset,
        }
    }

    #[test]
    fn sequences_wrap_as_the_broker_counts() {
        assert_eq!(increment(0, 5), 5);
        assert_eq!(increment(i32::MAX - 2, 2), i32::MAX);
        assert_eq!(increment(i32::MAX - 2, 3), 0);
        assert_eq!(increment(i32::MAX, 10), 9);
        assert!(sequence_after(1, 0) && !sequence_after(0, 1) && !sequence_after(3, 3));
        assert!(sequence_after(2, i32::MAX), "2 follows MAX after the wrap");
    }

    #[test]
    fn batches_of_a_partition_get_contiguous_sequences_and_move_to_a_new_epoch_when_idle() {
        let mut p = PartitionSequences::default();
        let a = p.assign(P0, 10);
        let b = p.assign(P0, 5);
        assert_eq!(
            (a.base, a.last(), b.base, b.last(), p.next),
            (0, 9, 10, 14, 15)
        );
        p.acknowledged(&a);
        // A new epoch while b is unfinished: the next batch stays on the old one, after b.
        let c = p.assign(P1, 1);
        assert_eq!((c.pid, c.base), (P0, 15));
        p.acknowledged(&b);
        p.acknowledged(&c);
        assert_eq!(p.last_acked, Some(15));
        // Nothing unfinished: the partition moves to the new epoch at sequence 0.
        let d = p.assign(P1, 3);
        assert_eq!((d.pid, d.base, p.last_acked), (P1, 0, None));
    }

    /// The broker recognises a retry among the last five batches it appended: no more than five
    /// go out from the oldest one still unanswered, whatever was answered after it.
    #[test]
    fn the_window_counts_from_the_oldest_unfinished_batch() {
        let mut p = PartitionSequences::default();
        let batches: Vec<BatchSequence> = (0..5).map(|_| p.assign(P0, 1)).collect();
        assert!(p.window_full(5));
        // Its answer lost, the first stays unfinished while the next four are acknowledged.
        for b in &batches[1..] {
            p.acknowledged(b);
        }
        assert!(p.window_full(5), "one unfinished, but four sent after it");
        p.acknowledged(&batches[0]);
        assert!(!p.window_full(5));
        let b = p.assign(P0, 1);
        assert!(!p.window_full(5));
        p.acknowledged(&b);
        assert!(!p.window_full(1), "nothing unfinished");
    }

    #[test]
    fn an_answer_out_of_order_never_lowers_the_last_acknowledged_sequence() {
        let mut p = PartitionSequences::default();
        let a = p.assign(P0, 2);
        let b = p.assign(P0, 2);
        p.acknowledged(&b);
        p.acknowledged(&a);
        assert_eq!(p.last_acked, Some(3));
        assert!(p.unfinished.is_empty());
    }

    #[test]
    fn an_expired_batch_resolves_if_later_ones_were_acknowledged_else_restarts() {
        // a expired, b acknowledged right after it: the broker had a.
        let mut p = PartitionSequences::default();
        let (a, b) = (p.assign(P0, 4), p.assign(P0, 4));
        p.expired(&a);
        assert_eq!(p.unresolved, Some(4));
        p.resolve();
        assert_eq!(p.unresolved, Some(4), "b is still unfinished");
        p.acknowledged(&b);
        p.resolve();
        assert_eq!((p.unresolved, p.rewrite), (None, false));
        // a and b both expired: the next sequence (8) does not follow the last acknowledged.
        let mut p = PartitionSequences::default();
        let (a, b) = (p.assign(P0, 4), p.assign(P0, 4));
        p.expired(&b);
        p.expired(&a);
        assert_eq!(
            p.unresolved,
            Some(8),
            "the highest sequence after an expired batch"
        );
        p.resolve();
        assert_eq!((p.unresolved, p.rewrite), (None, true));
    }

    #[test]
    fn a_restart_gives_waiting_batches_sequences_from_zero_under_the_new_epoch() {
        let mut p = PartitionSequences::default();
        let a = p.assign(P0, 10);
        p.assign(P0, 3);
        p.acknowledged(&a);
        p.rewrite = true;
        assert_eq!(p.restart_under(P1, &[3, 2]), vec![0, 3]);
        assert_eq!(
            (p.pid, p.next, p.last_acked, p.rewrite),
            (Some(P1), 5, None, false)
        );
        assert_eq!(p.unfinished.len(), 2);
    }

    #[test]
    fn the_epoch_bumps_until_its_maximum_then_a_new_id_is_needed() {
        assert_eq!(bumped(P0), Some(P1));
        assert_eq!(
            bumped(ProducerIdEpoch {
                id: 7,
                epoch: i16::MAX
            }),
            None
        );
    }

    #[test]
    fn may_send_table() {
        let base = PartitionView {
            idempotent: true,
            have_pid: true,
            fatal: false,
            head: Head::New,
            on_wire: 0,
            max_on_wire: 5,
            stale: false,
            window_full: false,
            unacknowledged: false,
            unresolved: false,
            rewrite: false,
        };
        let v = |f: fn(&mut PartitionView)| {
            let mut v = base;
            f(&mut v);
            may_send(v)
        };
        let table: &[(&str, Result<(), Hold>)] = &[
            ("new, nothing on the wire", Ok(())),
            ("new, 4 on the wire", Ok(())),
            ("new, 5 on the wire", Err(Hold::InFlight)),
            ("plain producer, 1 on the wire", Err(Hold::InFlight)),
            ("plain producer, nothing on the wire", Ok(())),
            ("no producer id", Err(Hold::NoProducerId)),
            ("fatal", Err(Hold::Fatal)),
            ("retry, nothing on the wire", Ok(())),
            ("retry, 1 on the wire", Err(Hold::RetryAlone)),
            ("new, unresolved", Err(Hold::Restart)),
            ("new, stale with 1 on the wire", Err(Hold::Restart)),
            ("new, stale, nothing on the wire", Ok(())),
            ("rewrite pending", Err(Hold::Restart)),
            (
                "new, 1 on the wire but the window full",
                Err(Hold::InFlight),
            ),
            ("retry, window full", Ok(())),
            (
                "new, nothing acknowledged yet, 1 on the wire",
                Err(Hold::InFlight),
            ),
            ("new, nothing acknowledged yet, nothing on the wire", Ok(())),
        ];
        let got = [
            v(|_| {}),
            v(|v| v.on_wire = 4),
            v(|v| v.on_wire = 5),
            v(|v| {
                v.idempotent = false;
                v.on_wire = 1;
            }),
            v(|v| v.idempotent = false),
            v(|v| v.have_pid = false),
            v(|v| v.fatal = true),
            v(|v| v.head = Head::Retry),
            v(|v| {
                v.head = Head::Retry;
                v.on_wire = 1;
            }),
            v(|v| v.unresolved = true),
            v(|v| {
                v.stale = true;
                v.on_wire = 1;
            }),
            v(|v| v.stale = true),
            v(|v| v.rewrite = true),
            v(|v| {
                v.on_wire = 1;
                v.window_full = true;
            }),
            v(|v| {
                v.head = Head::Retry;
                v.window_full = true;
            }),
            v(|v| {
                v.unacknowledged = true;
                v.on_wire = 1;
            }),
            v(|v| v.unacknowledged = true),
        ];
        assert_eq!(got.len(), table.len());
        for ((case, want), got) in table.iter().zip(got) {
            assert_eq!(got, *want, "{case}");
        }
    }

    #[test]
    fn on_answer_table() {
        const OOO: i16 = OUT_OF_ORDER_SEQUENCE_NUMBER;
        const UPI: i16 = UNKNOWN_PRODUCER_ID;
        let retry = |bump| Verdict::Retry {
            bump,
            refresh: false,
        };
        let refresh = Verdict::Retry {
            bump: false,
            refresh: true,
        };
        // (case, answer, batch base, reset, is_next, unresolved, log start, timed out, verdict)
        #[allow(clippy::type_complexity)]
        let table: &[(
            &str,
            Answer,
            i32,
            bool,
            bool,
            Option<i32>,
            i64,
            bool,
            Verdict,
        )] = &[
            (
                "ok",
                Answer::Code(0),
                0,
                false,
                true,
                None,
                0,
                false,
                Verdict::Done { duplicate: false },
            ),
            (
                "ok after the timeout",
                Answer::Code(0),
                0,
                false,
                true,
                None,
                0,
                true,
                Verdict::Done { duplicate: false },
            ),
            (
                "duplicate",
                Answer::Code(DUPLICATE_SEQUENCE_NUMBER),
                0,
                false,
                true,
                None,
                0,
                false,
                Verdict::Done { duplicate: true },
            ),
            (
                "connection lost",
                Answer::Lost { retriable: true },
                5,
                false,
                true,
                None,
                -1,
                false,
                refresh,
            ),
            (
                "connection lost, timed out",
                Answer::Lost { retriable: true },
                5,
                false,
                true,
                None,
                -1,
                true,
                Verdict::Fail,
            ),
            (
                "undecodable answer",
                Answer::Lost { retriable: false },
                5,
                false,
                true,
                None,
                -1,
                false,
                Verdict::Fail,
            ),
            (
                "not leader",
                Answer::Code(codes::NOT_LEADER_OR_FOLLOWER),
                5,
                false,
                true,
                None,
                0,
                false,
                refresh,
            ),
            (
                "broker timed out",
                Answer::Code(codes::REQUEST_TIMED_OUT),
                5,
                false,
                true,
                None,
                0,
                false,
                retry(false),
            ),
            (
                "not leader, timed out",
                Answer::Code(codes::NOT_LEADER_OR_FOLLOWER),
                5,
                false,
                true,
                None,
                0,
                true,
                Verdict::Fail,
            ),
            (
                "record too large",
                Answer::Code(10),
                5,
                false,
                true,
                None,
                0,
                false,
                Verdict::Fail,
            ),
            (
                "not authorized for idempotence",
                Answer::Code(CLUSTER_AUTHORIZATION_FAILED),
                0,
                false,
                true,
                None,
                0,
                false,
                Verdict::Fatal,
            ),
            (
                "fenced",
                Answer::Code(PRODUCER_FENCED),
                0,
                false,
                true,
                None,
                0,
                false,
                Verdict::Fatal,
            ),
            (
                "unknown producer, no log start",
                Answer::Code(UPI),
                5,
                false,
                true,
                None,
                -1,
                false,
                retry(false),
            ),
            (
                "unknown producer",
                Answer::Code(UPI),
                5,
                false,
                true,
                None,
                100,
                false,
                retry(true),
            ),
            (
                "unknown producer, already restarted",
                Answer::Code(UPI),
                0,
                true,
                true,
                None,
                100,
                false,
                retry(false),
            ),
            (
                "unknown producer, timed out",
                Answer::Code(UPI),
                5,
                false,
                true,
                None,
                100,
                true,
                Verdict::Fail,
            ),
            (
                "out of order, the next batch: a gap before it",
                Answer::Code(OOO),
                5,
                false,
                true,
                None,
                0,
                false,
                retry(true),
            ),
            (
                "out of order, behind a failed batch",
                Answer::Code(OOO),
                9,
                false,
                false,
                None,
                0,
                false,
                retry(false),
            ),
            (
                "out of order, already restarted",
                Answer::Code(OOO),
                0,
                true,
                true,
                None,
                0,
                false,
                retry(false),
            ),
            (
                "out of order, right after an expired batch",
                Answer::Code(OOO),
                9,
                false,
                false,
                Some(9),
                0,
                false,
                retry(true),
            ),
            (
                "out of order, further behind an expired batch",
                Answer::Code(OOO),
                12,
                false,
                false,
                Some(9),
                0,
                false,
                retry(false),
            ),
            (
                "out of order, timed out",
                Answer::Code(OOO),
                5,
                false,
                true,
                None,
                0,
                true,
                Verdict::Fail,
            ),
        ];
        for &(case, answer, base, reset, is_next, unresolved, log_start, timed_out, want) in table {
            let got = on_answer(AnswerView {
                answer,
                batch: batch(base, 4, reset),
                is_next,
                unresolved,
                log_start_offset: log_start,
                timed_out,
            });
            assert_eq!(got, want, "{case}");
        }
    }
}
