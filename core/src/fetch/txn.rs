//! `isolation.level=read_committed`: which record batches of a Fetch answer are delivered. Pure.
//!
//! The broker never returns records at or past the last stable offset to a read_committed fetch,
//! but the records below it include those of aborted transactions. The answer names them only
//! as (producer id, first offset) pairs, one per aborted transaction that overlaps what it
//! returns; the consumer filters them out batch by batch, as the Java client's
//! `CompletedFetch.nextFetchedRecord` does:
//!
//! - an aborted transaction of producer P becomes current once the batches reach its first
//!   offset (a batch whose last offset is at or past it);
//! - from then on every transactional batch of P is aborted, until P's ABORT marker (a control
//!   batch of P) is passed;
//! - control batches (COMMIT and ABORT markers) are never delivered: the position moves past
//!   them.
//!
//! A producer the list does not name is never filtered: its records are delivered whatever
//! markers follow (the broker, which wrote the markers, is the authority on what was aborted).
//! The state lives for one answer: a fetch that starts inside an aborted transaction gets that
//! transaction in its own list (the broker lists every aborted transaction whose records end at
//! or after the fetch offset), so a run of aborted records longer than one fetch stays filtered.
use std::collections::HashSet;

use crate::config::IsolationLevel;
use crate::protocol::msg::fetch_response::AbortedTransaction;

/// A control record's type, from its key (version i16, type i16): 0 ABORT, 1 COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ControlType {
    Abort,
    Commit,
    /// A type this client does not know (or a key too short to hold one): skipped like the
    /// others, never taken for an ABORT.
    Unknown,
}

impl ControlType {
    /// The type a control record's key says.
    pub(crate) fn of_key(key: Option<&[u8]>) -> ControlType {
        match key {
            Some(k) if k.len() >= 4 => match i16::from_be_bytes([k[2], k[3]]) {
                0 => ControlType::Abort,
                1 => ControlType::Commit,
                _ => ControlType::Unknown,
            },
            _ => ControlType::Unknown,
        }
    }
}

/// What the filter needs of a record batch's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct BatchHeader {
    pub base_offset: i64,
    pub last_offset: i64,
    /// -1: no producer id (neither idempotent nor transactional).
    pub producer_id: i64,
    pub is_transactional: bool,
    /// For a control batch, the type of its (first) control record.
    pub control: Option<ControlType>,
}

/// One entry of a Fetch answer's `aborted_transactions`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AbortedTxn {
    pub producer_id: i64,
    pub first_offset: i64,
}

/// What becomes of one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// Its records go to the application.
    Deliver,
    /// A batch of an aborted transaction: skipped, the position moves past it.
    Aborted,
    /// A transaction marker: skipped, the position moves past it.
    Control,
}

/// The filter of one partition's Fetch answer: [`TxnFilter::verdict`] of each batch in offset
/// order.
#[derive(Debug, Default, Clone)]
pub(crate) struct TxnFilter {
    /// read_committed: aborted transactions are filtered. Otherwise only control batches are
    /// skipped.
    read_committed: bool,
    /// The aborted transactions not yet reached, by first offset, the last one first.
    pending: Vec<AbortedTxn>,
    /// Producers whose aborted transaction has begun and whose ABORT marker has not been passed.
    aborted: HashSet<i64>,
}

impl TxnFilter {
    /// read_uncommitted: every data record is delivered, control batches are not.
    pub(crate) fn read_uncommitted() -> TxnFilter {
        TxnFilter::default()
    }

    /// read_committed, with the answer's aborted transactions (in any order).
    pub(crate) fn read_committed(aborted: impl IntoIterator<Item = AbortedTxn>) -> TxnFilter {
        let mut pending: Vec<AbortedTxn> = aborted.into_iter().collect();
        pending.sort_by_key(|t| std::cmp::Reverse(t.first_offset));
        TxnFilter {
            read_committed: true,
            pending,
            aborted: HashSet::new(),
        }
    }

    /// The filter of one partition's Fetch answer at `level`, with the answer's
    /// `aborted_transactions` (null when there are none). At read_uncommitted the list is not
    /// looked at (the broker sends none then).
    pub(crate) fn of_answer(
        level: IsolationLevel,
        aborted: Option<&[AbortedTransaction]>,
    ) -> TxnFilter {
        match level {
            IsolationLevel::ReadUncommitted => TxnFilter::read_uncommitted(),
            IsolationLevel::ReadCommitted => {
                TxnFilter::read_committed(aborted.unwrap_or_default().iter().map(|t| AbortedTxn {
                    producer_id: t.producer_id.0,
                    first_offset: t.first_offset,
                }))
            }
        }
    }

    /// The verdict on the next batch of the answer (batches in offset order, each one once,
    /// also those that start below the fetch offset: they carry markers the state needs).
    pub(crate) fn verdict(&mut self, b: &BatchHeader) -> Verdict {
        if self.read_committed && b.producer_id >= 0 {
            // Transactions that began at or before this batch's end are current.
            while let Some(t) = self.pending.last().copied() {
                if t.first_offset > b.last_offset {
                    break;
                }
                self.pending.pop();
                self.aborted.insert(t.producer_id);
            }
            if b.control == Some(ControlType::Abort) {
                self.aborted.remove(&b.producer_id);
            } else if b.control.is_none()
                && b.is_transactional
                && self.aborted.contains(&b.producer_id)
            {
                return Verdict::Aborted;
            }
        }
        if b.control.is_some() {
            Verdict::Control
        } else {
            Verdict::Deliver
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ABORT: Option<ControlType> = Some(ControlType::Abort);
    const COMMIT: Option<ControlType> = Some(ControlType::Commit);

    /// A data batch of `pid` holding `base..=last` (transactional when `pid` >= 0).
    fn data(base: i64, last: i64, pid: i64) -> BatchHeader {
        BatchHeader {
            base_offset: base,
            last_offset: last,
            producer_id: pid,
            is_transactional: pid >= 0,
            control: None,
        }
    }

    /// A one-record control batch of `pid` at `offset`.
    fn marker(offset: i64, pid: i64, control: Option<ControlType>) -> BatchHeader {
        BatchHeader {
            base_offset: offset,
            last_offset: offset,
            producer_id: pid,
            is_transactional: true,
            control,
        }
    }

    fn aborted(list: &[(i64, i64)]) -> Vec<AbortedTxn> {
        list.iter()
            .map(|&(producer_id, first_offset)| AbortedTxn {
                producer_id,
                first_offset,
            })
            .collect()
    }

    /// The offsets delivered from `batches` (every data batch full, as written) under
    /// read_committed with the answer's `list` of (producer id, first offset).
    fn delivered(batches: &[BatchHeader], list: &[(i64, i64)]) -> Vec<i64> {
        delivered_with(&mut TxnFilter::read_committed(aborted(list)), batches)
    }

    fn delivered_with(f: &mut TxnFilter, batches: &[BatchHeader]) -> Vec<i64> {
        batches
            .iter()
            .filter(|b| f.verdict(b) == Verdict::Deliver)
            .flat_map(|b| b.base_offset..=b.last_offset)
            .collect()
    }

    /// The answer's list is used at read_committed only; a null list is an empty one.
    #[test]
    fn the_filter_of_an_answer() {
        use crate::protocol::msg::ProducerId;
        let list = [AbortedTransaction::default()
            .with_producer_id(ProducerId(7))
            .with_first_offset(3)];
        let batches = [data(3, 4, 7), marker(5, 7, ABORT), data(6, 6, 7)];
        let (committed, uncommitted) = (
            IsolationLevel::ReadCommitted,
            IsolationLevel::ReadUncommitted,
        );
        let cases = [
            (committed, Some(&list[..]), vec![6]),
            (committed, None, vec![3, 4, 6]),
            (uncommitted, Some(&list[..]), vec![3, 4, 6]),
            (uncommitted, None, vec![3, 4, 6]),
        ];
        for (level, aborted, want) in cases {
            let mut f = TxnFilter::of_answer(level, aborted);
            assert_eq!(
                delivered_with(&mut f, &batches),
                want,
                "{level:?} {aborted:?}"
            );
        }
    }

    #[test]
    fn control_keys_name_abort_and_commit() {
        let cases: [(Option<&[u8]>, ControlType); 6] = [
            (Some(&[0, 0, 0, 0]), ControlType::Abort),
            (Some(&[0, 0, 0, 1]), ControlType::Commit),
            (Some(&[0, 0, 0, 2]), ControlType::Unknown),
            (Some(&[0, 1, 0, 0, 9]), ControlType::Abort),
            (Some(&[0, 0, 0]), ControlType::Unknown),
            (None, ControlType::Unknown),
        ];
        for (key, want) in cases {
            assert_eq!(ControlType::of_key(key), want, "{key:?}");
        }
    }

    /// Committed, aborted and non-transactional batches of three producers, interleaved.
    #[test]
    fn aborted_transactions_are_filtered_per_producer() {
        // Producer 7: 0-1 committed (marker 2), 3-4 aborted (marker 9). Producer 8: 5-6
        // committed (marker 10) while 7's transaction is open. Producer -1 (plain) at 7-8.
        // Producer 9: 11 aborted (marker 12), 13 committed (marker 14).
        let batches = [
            data(0, 1, 7),
            marker(2, 7, COMMIT),
            data(3, 4, 7),
            data(5, 6, 8),
            data(7, 8, -1),
            marker(9, 7, ABORT),
            marker(10, 8, COMMIT),
            data(11, 11, 9),
            marker(12, 9, ABORT),
            data(13, 13, 9),
            marker(14, 9, COMMIT),
        ];
        let list = [(9, 11), (7, 3)]; // in any order
        assert_eq!(delivered(&batches, &list), vec![0, 1, 5, 6, 7, 8, 13]);
        // read_uncommitted: every data record, no marker.
        assert_eq!(
            delivered_with(&mut TxnFilter::read_uncommitted(), &batches),
            vec![0, 1, 3, 4, 5, 6, 7, 8, 11, 13]
        );
        // read_committed with no aborted transaction: the same.
        assert_eq!(
            delivered(&batches, &[]),
            vec![0, 1, 3, 4, 5, 6, 7, 8, 11, 13]
        );
    }

    /// A non-transactional batch of a producer with an open aborted transaction (an idempotent
    /// producer id reused, as the Java client checks `isTransactional`) is delivered.
    #[test]
    fn only_transactional_batches_are_aborted() {
        let mut plain = data(4, 4, 7);
        plain.is_transactional = false;
        let batches = [data(3, 3, 7), plain, marker(5, 7, ABORT)];
        assert_eq!(delivered(&batches, &[(7, 3)]), vec![4]);
    }

    /// librdkafka #3369: the ABORT marker comes later than the list suggests (the aborted
    /// transaction spans many batches and other producers' transactions), or a producer is not
    /// in the list at all: the list's producer stays aborted until its own ABORT marker, and a
    /// producer the list does not name is delivered, markers or not.
    #[test]
    fn an_abort_marker_late_or_a_producer_missing_from_the_list() {
        let batches = [
            data(0, 9, 1),   // 1's aborted transaction begins
            data(10, 19, 2), // 2: not in the list
            data(20, 29, 1),
            marker(30, 2, COMMIT),
            data(31, 40, 1),
            data(41, 41, 3), // 3: not in the list, and aborted by the marker at 43
            marker(42, 1, ABORT),
            marker(43, 3, ABORT),
            data(44, 45, 1), // 1's next transaction: not aborted
        ];
        let want: Vec<i64> = (10..=19).chain([41, 44, 45]).collect();
        assert_eq!(delivered(&batches, &[(1, 0)]), want);
        // Two aborted transactions of one producer in one answer: each lasts to its own marker.
        let batches = [
            data(0, 1, 5),
            marker(2, 5, ABORT),
            data(3, 3, 5),
            marker(4, 5, COMMIT),
            data(5, 6, 5),
            marker(7, 5, ABORT),
            data(8, 8, 5),
        ];
        assert_eq!(delivered(&batches, &[(5, 5), (5, 0)]), vec![3, 8]);
    }

    /// librdkafka #2993: an aborted transaction longer than one fetch. Each answer lists the
    /// transaction (its first offset before the fetch offset), so every part of it is filtered,
    /// and its marker in the last answer ends it.
    #[test]
    fn an_aborted_run_longer_than_one_fetch() {
        let first = [data(100, 149, 4), data(150, 199, 4)];
        let second = [data(200, 249, 4)];
        let third = [data(250, 259, 4), marker(260, 4, ABORT), data(261, 262, -1)];
        for answer in [&first[..], &second[..]] {
            assert_eq!(delivered(answer, &[(4, 100)]), Vec::<i64>::new());
        }
        assert_eq!(delivered(&third, &[(4, 100)]), vec![261, 262]);
    }

    /// A fetch that starts exactly at a control record: the answer lists the transaction the
    /// marker ends (its first offset lies before it), and the producer's next transaction,
    /// committed, is delivered.
    #[test]
    fn a_fetch_starting_at_a_marker() {
        let batches = [marker(50, 6, ABORT), data(51, 52, 6), marker(53, 6, COMMIT)];
        assert_eq!(delivered(&batches, &[(6, 40)]), vec![51, 52]);
        let batches = [marker(50, 6, COMMIT), data(51, 52, 6)];
        assert_eq!(delivered(&batches, &[]), vec![51, 52]);
    }

    /// An aborted transaction that begins after a committed one of the same producer in the
    /// same answer: the committed one's records are delivered (the entry becomes current only at
    /// its first offset).
    #[test]
    fn an_aborted_transaction_begins_at_its_first_offset() {
        let batches = [
            data(0, 4, 3),
            marker(5, 3, COMMIT),
            data(6, 8, 3),
            marker(9, 3, ABORT),
        ];
        assert_eq!(delivered(&batches, &[(3, 6)]), vec![0, 1, 2, 3, 4]);
    }

    /// Answers holding only markers, or only aborted records, deliver nothing (the position
    /// moves past them: see `fetch::apply`'s tests).
    #[test]
    fn answers_with_nothing_to_deliver() {
        let only_markers = [marker(0, 1, COMMIT), marker(1, 2, ABORT)];
        let only_aborted = [data(10, 19, 1), data(20, 20, 1), marker(21, 1, ABORT)];
        assert_eq!(delivered(&only_markers, &[(2, 0)]), Vec::<i64>::new());
        assert_eq!(delivered(&only_aborted, &[(1, 10)]), Vec::<i64>::new());
        let verdicts: Vec<Verdict> = {
            let mut f = TxnFilter::read_committed(aborted(&[(1, 10)]));
            only_aborted.iter().map(|b| f.verdict(b)).collect()
        };
        assert_eq!(
            verdicts,
            vec![Verdict::Aborted, Verdict::Aborted, Verdict::Control]
        );
    }
}

/// The filter inside the fetch path: record batches encoded as a broker sends them (compressed
/// ones too), decoded, chosen by [`crate::fetch::apply::select`] and applied to a partition.
#[cfg(test)]
mod in_the_fetch_path {
    use super::*;
    use crate::fetch::apply::tests::{
        apply_main, apply_recovery, main_asked, ok_with_end, partition_at, recovering,
        recovery_asked,
    };
    use crate::fetch::apply::{select, worth_decoding, Asked, Selected};
    use crate::fetch::StreamKind;
    use crate::protocol::records::{
        decode_batches, decode_batches_in_where, BatchBuilder, Compression, DecodedRecords,
        PROCESS_BATCH_POOLS,
    };
    use bytes::Bytes;

    /// One batch of a partition's log.
    enum W {
        /// `n` records of transactional producer `pid`, compressed or not.
        Txn(i64, usize, bool),
        /// `n` records of a plain producer.
        Plain(usize),
        Abort(i64),
        Commit(i64),
    }

    /// A codec this build has, for the compressed batches (none without any).
    fn codec() -> Compression {
        [Compression::Gzip, Compression::Lz4, Compression::Zstd]
            .into_iter()
            .find(|c| c.is_enabled())
            .unwrap_or(Compression::None)
    }

    /// The batches of `log` from offset `base` on, encoded back to back as in a Fetch answer's
    /// records field (CRCs left stale: decoded without checking them).
    fn encode(base: i64, log: &[W]) -> Bytes {
        let mut out = Vec::new();
        let mut offset = base;
        for w in log {
            let (pid, n, compression, control) = match *w {
                W::Txn(pid, n, compressed) => {
                    let c = if compressed {
                        codec()
                    } else {
                        Compression::None
                    };
                    (pid, n, c, None)
                }
                W::Plain(n) => (-1, n, Compression::None, None),
                W::Abort(pid) => (pid, 1, Compression::None, Some(0i16)),
                W::Commit(pid) => (pid, 1, Compression::None, Some(1i16)),
            };
            let mut b = BatchBuilder::new(compression);
            for i in 0..n {
                let o = offset + i as i64;
                match control {
                    Some(t) => {
                        let key = [0, 0, t.to_be_bytes()[0], t.to_be_bytes()[1]];
                        b.push(0, Some(&key), Some(&[0, 0, 0, 0, 0, 0]), &[]);
                    }
                    None => b.push(0, None, Some(format!("value-{o}").as_bytes()), &[]),
                }
            }
            let mut batch = b.finish().unwrap().to_vec();
            batch[0..8].copy_from_slice(&offset.to_be_bytes());
            if pid >= 0 {
                let mut attributes = i16::from_be_bytes([batch[21], batch[22]]) | 0x10;
                if control.is_some() {
                    attributes |= 0x20;
                }
                batch[21..23].copy_from_slice(&attributes.to_be_bytes());
                batch[43..51].copy_from_slice(&pid.to_be_bytes());
            }
            out.extend_from_slice(&batch);
            offset += n as i64;
        }
        Bytes::from(out)
    }

    fn filter(list: &[(i64, i64)]) -> TxnFilter {
        TxnFilter::read_committed(list.iter().map(|&(producer_id, first_offset)| AbortedTxn {
            producer_id,
            first_offset,
        }))
    }

    /// `data` decoded as the fetch task decodes it: the records of the batches `filter` finds
    /// aborted are left undecoded.
    fn lean(data: &Bytes, filter: &TxnFilter) -> DecodedRecords {
        decode_batches_in_where(
            data.clone(),
            false,
            &PROCESS_BATCH_POOLS,
            worth_decoding(filter),
        )
        .unwrap()
    }

    /// What `select` chooses of `data`, decoded the lean way, checked against decoding every
    /// batch.
    fn chosen(data: &Bytes, asked: &Asked, filter: TxnFilter) -> Selected {
        let whole = select(
            decode_batches(data.clone(), false).unwrap(),
            asked,
            filter.clone(),
        );
        let s = select(lean(data, &filter), asked, filter);
        assert_eq!(read(&s), read(&whole), "the same records either way");
        s
    }

    /// A read_committed consumer does not decode the records of aborted batches (compressed
    /// or not); committed ones, markers and plain batches are decoded.
    #[test]
    fn the_records_of_aborted_batches_are_not_decoded() {
        let log = [
            W::Txn(1, 3, false), // 0-2, committed at 3
            W::Commit(1),
            W::Txn(2, 5, true),  // 4-8, aborted at 11
            W::Txn(2, 2, false), // 9-10, aborted at 11
            W::Abort(2),
            W::Txn(2, 2, false), // 12-13: producer 2's next transaction, committed at 14
            W::Commit(2),
        ];
        let data = encode(0, &log);
        let f = filter(&[(2, 4)]);
        let d = lean(&data, &f);
        let decoded: Vec<usize> = d.batches.iter().map(|b| b.spans.len()).collect();
        assert_eq!(decoded, vec![3, 1, 0, 0, 1, 2, 1]);
        let s = select(d, &main_asked(0), f);
        assert_eq!(read(&s), (vec![0, 1, 2, 12, 13], 15));
        // read_uncommitted decodes every batch.
        let d = lean(&data, &TxnFilter::read_uncommitted());
        assert!(d.batches.iter().all(|b| !b.spans.is_empty()));
    }

    /// The offsets chosen, each checked against its value, and the next fetch offset.
    fn read(s: &Selected) -> (Vec<i64>, i64) {
        let mut offsets = Vec::new();
        for b in &s.batches {
            for r in b.records.iter() {
                let value = r
                    .value
                    .map(|v| &b.data[v.start as usize..][..v.len as usize]);
                assert_eq!(value, Some(format!("value-{}", r.offset).as_bytes()));
                offsets.push(r.offset);
            }
        }
        (offsets, s.next)
    }

    /// librdkafka #3020: aborted records inside compressed batches are filtered like the others,
    /// also when the fetch offset lies inside one; a committed compressed batch is delivered.
    #[test]
    fn aborted_records_in_compressed_batches() {
        assert_ne!(codec(), Compression::None, "the default build has codecs");
        let log = [
            W::Txn(1, 3, false), // 0-2, committed at 3
            W::Commit(1),
            W::Txn(2, 5, true), // 4-8, aborted at 13
            W::Txn(1, 4, true), // 9-12, committed at 14
            W::Abort(2),
            W::Commit(1),
            W::Plain(2), // 15-16
        ];
        let data = encode(0, &log);
        let list = [(2, 4)];
        let s = chosen(&data, &main_asked(0), filter(&list));
        assert_eq!(read(&s), (vec![0, 1, 2, 9, 10, 11, 12, 15, 16], 17));
        // From inside the aborted compressed batch (the broker sends it whole).
        let from_6 = encode(4, &log[2..]);
        let s = chosen(&from_6, &main_asked(6), filter(&list));
        assert_eq!(read(&s), (vec![9, 10, 11, 12, 15, 16], 17));
        // read_uncommitted: every data record, no marker.
        let s = chosen(&data, &main_asked(0), TxnFilter::read_uncommitted());
        let all: Vec<i64> = (0..=2).chain(4..=12).chain(15..=16).collect();
        assert_eq!(read(&s), (all, 17));
    }

    /// A fetch starting exactly at a control record moves past it and delivers what follows.
    #[test]
    fn a_fetch_starting_at_a_marker() {
        let data = encode(50, &[W::Abort(6), W::Txn(6, 2, true), W::Commit(6)]);
        let s = chosen(&data, &main_asked(50), filter(&[(6, 40)]));
        assert_eq!(read(&s), (vec![51, 52], 54));
    }

    /// librdkafka #3369: a producer the answer does not list is delivered, ABORT marker or not.
    #[test]
    fn a_producer_missing_from_the_list_is_delivered() {
        let data = encode(0, &[W::Txn(9, 3, true), W::Abort(9), W::Txn(8, 1, false)]);
        let s = chosen(&data, &main_asked(0), filter(&[(8, 4)]));
        assert_eq!(read(&s), (vec![0, 1, 2], 5));
    }

    /// kafkajs #1256, kafka4s #684: an answer holding only markers, or only aborted records,
    /// delivers nothing and still moves the position to its end, where a consumer at the last
    /// stable offset has no lag.
    #[test]
    fn answers_with_nothing_to_deliver_move_the_position_to_the_end() {
        let only_markers = encode(10, &[W::Commit(1), W::Abort(2)]);
        let only_aborted = encode(10, &[W::Txn(2, 3, true), W::Txn(2, 2, false), W::Abort(2)]);
        for (data, list, end) in [
            (only_markers, vec![(2, 5)], 12),
            (only_aborted, vec![(2, 10)], 16),
        ] {
            let s = chosen(&data, &main_asked(10), filter(&list));
            assert_eq!(read(&s), (vec![], end));
            let mut p = partition_at(10);
            apply_main(&mut p, main_asked(10), ok_with_end(s, end));
            assert_eq!(p.main.fetch_offset, Some(end));
            assert_eq!(p.position, Some(end), "lag: {end} - position");
            assert!(p.pop(StreamKind::Main).is_none());
        }
    }

    /// librdkafka #2993: an aborted transaction longer than one fetch. Every answer lists it
    /// (the broker lists the aborted transactions that end at or after the fetch offset), so
    /// each part is filtered, and the fetches chain to its marker and past it.
    #[test]
    fn an_aborted_run_longer_than_one_fetch() {
        let answers = [
            (
                100,
                encode(100, &[W::Txn(4, 50, true), W::Txn(4, 50, false)]),
            ),
            (200, encode(200, &[W::Txn(4, 50, true)])),
            (
                250,
                encode(250, &[W::Txn(4, 10, false), W::Abort(4), W::Plain(2)]),
            ),
        ];
        let mut p = partition_at(100);
        let mut delivered = Vec::new();
        for (offset, data) in answers {
            assert_eq!(p.main.fetch_offset, Some(offset));
            let s = chosen(&data, &main_asked(offset), filter(&[(4, 100)]));
            p.main.in_flight = true;
            apply_main(&mut p, main_asked(offset), ok_with_end(s, 263));
            while let Some((r, _)) = p.pop(StreamKind::Main) {
                delivered.push(r.offset);
            }
            p.after_drain();
        }
        assert_eq!(delivered, vec![261, 262]);
        assert_eq!(p.position, Some(263));
    }

    /// A recovery stream (`enable.parallel.rebalance`) uses the same filter: no aborted record
    /// of its range is delivered, and a range that ends inside an aborted batch ends there.
    #[test]
    fn a_recovery_range_never_delivers_an_aborted_record() {
        // recovering(): ranges 70..120 and 130..140, main stream at 140.
        let mut p = recovering();
        let asked = recovery_asked(&p, 70);
        assert_eq!(asked.limit, 120);
        // 70-99 aborted (producer 1, one compressed batch), its marker at 100, then producer
        // 2's committed records 101-124 across the range end.
        let data = encode(70, &[W::Txn(1, 30, true), W::Abort(1), W::Txn(2, 24, true)]);
        let s = chosen(&data, &asked, filter(&[(1, 70)]));
        assert_eq!(read(&s), ((101..120).collect(), 120));
        apply_recovery(&mut p, asked, ok_with_end(s, 140));
        let mut delivered = Vec::new();
        while let Some((r, _)) = p.pop(StreamKind::Recovery) {
            delivered.push(r.offset);
        }
        assert_eq!(delivered, (101..120).collect::<Vec<i64>>());
        // A range ending inside an aborted batch: the stream stops at its end.
        let asked = Asked {
            offset: 130,
            cursor: 0,
            limit: 135,
            last_fetched_epoch: -1,
        };
        let data = encode(130, &[W::Txn(3, 10, true), W::Abort(3)]);
        let s = chosen(&data, &asked, filter(&[(3, 130)]));
        assert_eq!(read(&s), (vec![], 135));
        // A marker at the range end is left to the range after it.
        let data = encode(130, &[W::Txn(5, 5, false), W::Commit(5)]);
        let s = chosen(&data, &asked, filter(&[]));
        assert_eq!(read(&s), ((130..135).collect(), 135));
    }
}
