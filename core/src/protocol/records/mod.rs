//! Kafka record batches (magic v2): decoding the records field of a fetch response, and encoding a
//! batch for a produce request.
//!
//! lagless has its own codec rather than the `kafka-protocol` crate's because a consumer needs
//! things that one does not give: the complete batches in front of a truncated last batch (the
//! broker cuts the last batch at the fetch size limit, KIP-74, and that is not an error), no
//! allocation sized from an unchecked wire number, CRC checks that can be switched off
//! (`check.crcs`), and headers as a plain `Vec` rather than a map.
//!
//! Keys and values are spans of the fetched buffer (or of the one decompressed buffer of a
//! compressed batch), made into `Bytes` slices of it only when a record is handed out, so decoding
//! a record allocates nothing but its headers and touches no reference count.
use std::ops::Range;
use std::sync::Arc;

use bytes::Bytes;

use crate::buffers::{Held, Pool};
use crate::error::{Error, Result};

/// baseOffset and batchLength: the part of a batch that batchLength does not count.
const LOG_OVERHEAD: usize = 12;
/// What batchLength counts at least: the fixed header from partitionLeaderEpoch to recordCount.
const MIN_BATCH_LENGTH: usize = 49;

// Positions of the fixed header fields, from the start of the batch.
const MAGIC_AT: usize = 16;
const CRC_AT: usize = 17;
const ATTRIBUTES_AT: usize = 21;
const LAST_OFFSET_DELTA_AT: usize = 23;
const BASE_TIMESTAMP_AT: usize = 27;
const MAX_TIMESTAMP_AT: usize = 35;
const PRODUCER_ID_AT: usize = 43;
const PRODUCER_EPOCH_AT: usize = 51;
const BASE_SEQUENCE_AT: usize = 53;
const RECORD_COUNT_AT: usize = 57;
const RECORDS_AT: usize = LOG_OVERHEAD + MIN_BATCH_LENGTH;

const MAGIC_V2: i8 = 2;

/// The smallest encoded record: length, attributes, timestamp delta, offset delta, key length,
/// value length and header count, one byte each. Bounds a record count by the bytes that hold it.
const MIN_RECORD_SIZE: usize = 7;
/// The smallest encoded header: key length and value length, one byte each.
const MIN_HEADER_SIZE: usize = 2;

const COMPRESSION_MASK: i16 = 0x07;
const TIMESTAMP_TYPE_MASK: i16 = 0x08;
const TRANSACTIONAL_MASK: i16 = 0x10;
const CONTROL_MASK: i16 = 0x20;

mod compression;
mod decode;
mod encode;

pub use compression::Compression;

/// `input` compressed with `compression` as a record batch's records section is (KIP-714's
/// PushTelemetry payloads are compressed the same way, the Java client's codecs and framing).
pub(crate) fn compress_payload(compression: Compression, input: &[u8]) -> std::io::Result<Vec<u8>> {
    compression::compress(compression, input)
}
use compression::*;
#[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(unused_imports))]
pub use decode::decode_batches;
#[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(unused_imports))]
pub use decode::decode_batches_in;
pub use decode::decode_batches_in_where;
#[cfg(test)]
pub(crate) use decode::PROCESS_BATCH_POOLS;
pub use encode::{set_producer_state, set_transactional_state};

/// The idempotence fields of a v2 record batch's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProducerState {
    /// The offset of the batch's first record.
    pub base_offset: i64,
    /// The producer id; -1 for none.
    pub producer_id: i64,
    /// Its epoch; -1 for none.
    pub producer_epoch: i16,
    /// The sequence of the batch's first record; -1 for none.
    pub base_sequence: i32,
    /// The records in the batch.
    pub records: i32,
}

/// The producer id, epoch and base sequence of each complete batch in `records` (a records
/// field of a Fetch answer, or batches back to back), without decoding their records: what the
/// tests read to see what an idempotent producer wrote. A truncated or non-v2 batch ends the list.
// Read by the unit tests and the broker tests (public with `unstable-fuzzing`).
#[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(dead_code))]
pub fn producer_states(mut records: &[u8]) -> Vec<ProducerState> {
    let mut out = Vec::new();
    while records.len() >= RECORDS_AT {
        let length = decode::be_i32(records, 8);
        let Some(end) = usize::try_from(length)
            .ok()
            .and_then(|l| l.checked_add(LOG_OVERHEAD))
            .filter(|&e| e >= RECORDS_AT && e <= records.len())
        else {
            break;
        };
        if records[MAGIC_AT] as i8 != MAGIC_V2 {
            break;
        }
        out.push(ProducerState {
            base_offset: decode::be_i64(records, 0),
            producer_id: decode::be_i64(records, PRODUCER_ID_AT),
            producer_epoch: decode::be_i16(records, PRODUCER_EPOCH_AT),
            base_sequence: decode::be_i32(records, BASE_SEQUENCE_AT),
            records: decode::be_i32(records, RECORD_COUNT_AT),
        });
        records = &records[end..];
    }
    out
}
// The byte readers, for the snappy reader (and the tests).
#[cfg_attr(not(feature = "snappy"), allow(unused_imports))]
use decode::*;
pub use encode::BatchBuilder;

/// A record header. Kafka allows a null value but not a null key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    /// The header's key (UTF-8; keys may repeat within a record).
    pub key: String,
    /// The header's value; `None` for a null value.
    pub value: Option<Bytes>,
}

/// One record of a batch, with its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The record's offset: the batch's base offset plus the record's offset delta.
    pub offset: i64,
    /// Milliseconds since the epoch: the batch's base timestamp plus the record's delta, or the
    /// batch's max timestamp for a `LogAppendTime` batch.
    pub timestamp: i64,
    /// The record's key; `None` for a null key.
    pub key: Option<Bytes>,
    /// The record's value; `None` for a null value.
    pub value: Option<Bytes>,
    /// The record's headers, in wire order.
    pub headers: Vec<Header>,
}

/// Where a key or value lies in its batch's [`Batch::data`]. A fetch answer is one frame of at
/// most `i32::MAX` bytes, and an inflated batch is capped below that, so `u32` holds any span.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    /// Where the bytes start in the batch's data.
    pub start: u32,
    /// How many there are.
    pub len: u32,
}

impl Span {
    /// How many bytes the span holds.
    pub fn len(self) -> usize {
        self.len as usize
    }

    /// Whether the span holds no byte (an empty key or value, not a null one).
    // Used by the tests and the fuzz targets (public with `unstable-fuzzing`).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn is_empty(self) -> bool {
        self.len == 0
    }

    /// The bytes of this span of `data`: a slice sharing `data`'s buffer.
    pub fn bytes(self, data: &Bytes) -> Bytes {
        let start = self.start as usize;
        data.slice(start..start + self.len as usize)
    }
}

/// A decoded record whose key and value are still [`Span`]s of its batch's data: they become
/// `Bytes` when the record is handed out ([`RecordSpans::into_record`]), on the thread that takes
/// it. Each `Bytes` slice increments the buffer's shared count and each drop decrements it; with
/// the slices made on the fetch tasks and dropped on the application's thread, every record's
/// increment and decrement moved the count's cache line between the cores (measured: 13% and 4%
/// of the consumer's CPU at 100 B). A span is also smaller to move through the buffers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordSpans {
    /// As [`Record::offset`].
    pub offset: i64,
    /// As [`Record::timestamp`].
    pub timestamp: i64,
    /// The key's span; `None` for a null key.
    pub key: Option<Span>,
    /// The value's span; `None` for a null value.
    pub value: Option<Span>,
    /// Headers are rare and small: decoded into `Bytes` at once.
    pub headers: Vec<Header>,
}

/// The pools a batch of records is decoded with: its inflated bytes and its [`RecordSpans`].
pub type BatchPools = crate::buffers::BatchPools<RecordSpans>;

/// A consumer's pools (see [`crate::buffers::FetchBuffers`]), with span vectors of
/// [`RecordSpans`].
pub type FetchBuffers = crate::buffers::FetchBuffers<RecordSpans>;

impl RecordSpans {
    /// The record, its key and value slices of `data` (the data of the batch it was decoded from).
    // Used by the tests and the fuzz targets (public with `unstable-fuzzing`).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn into_record(mut self, data: &Bytes) -> Record {
        self.take_record(data)
    }

    /// As [`Self::into_record`], in place: the headers move out (a buffered record is taken once).
    pub fn take_record(&mut self, data: &Bytes) -> Record {
        Record {
            offset: self.offset,
            timestamp: self.timestamp,
            key: self.key.map(|s| s.bytes(data)),
            value: self.value.map(|s| s.bytes(data)),
            headers: std::mem::take(&mut self.headers),
        }
    }
}

/// What a batch's timestamps mean (the topic's `message.timestamp.type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    /// The producer's timestamps.
    CreateTime,
    /// The broker's append time.
    LogAppendTime,
}

/// A decoded record batch.
#[derive(Debug, Clone)]
// Some header fields are read only by the tests and the fuzz targets; decoded all the same, so
// the batch says what the broker sent.
#[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
pub struct Batch {
    /// The offset of the batch's first record (before compaction removed any).
    pub base_offset: i64,
    /// base_offset + lastOffsetDelta. Compaction can remove records, so this, not the last
    /// record's offset, is where the next fetch starts.
    pub last_offset: i64,
    /// The leader epoch of the broker that wrote the batch.
    pub partition_leader_epoch: i32,
    /// Whether the timestamps are create or log-append times.
    pub timestamp_type: TimestampType,
    /// A transaction marker batch; its records are control records, not user data.
    pub is_control: bool,
    /// Written in a transaction.
    pub is_transactional: bool,
    /// The id of the producer that wrote the batch; -1 for none (not idempotent).
    pub producer_id: i64,
    /// The codec the batch was compressed with.
    pub compression: Compression,
    /// The buffer the records' spans are in: the fetch answer's frame, or the batch inflated.
    pub data: Bytes,
    /// The batch's records, in offset order (a vector of the pool that decoded it, counted
    /// while the batch or its records' spans are alive).
    pub spans: Held<RecordSpans>,
    /// The capacity of the buffer a compressed batch was inflated into (0 for an uncompressed
    /// batch): what a consumer's budget counts for it, with the span vector's.
    pub inflated_bytes: usize,
}

impl Batch {
    /// The batch's records with their keys and values as `Bytes`.
    // Used by the tests and the fuzz targets (public with `unstable-fuzzing`).
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn records(&self) -> Vec<Record> {
        self.spans
            .iter()
            .map(|r| r.clone().into_record(&self.data))
            .collect()
    }
}

/// What decoding a fetch's records field gives: the complete batches; a truncated tail (KIP-74:
/// the broker may cut the last batch at the size limit) is not an error, it is reported in
/// `truncated`.
#[derive(Debug, Clone)]
pub struct DecodedRecords {
    /// The complete batches, in offset order.
    pub batches: Vec<Batch>,
    /// Whether a truncated batch followed the complete ones.
    pub truncated: bool,
}

#[cfg(test)]
mod tests {
    use super::encode::*;
    use super::*;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    /// The codecs this build has (cargo features): the round trips run with whichever are on.
    fn built_in() -> impl Iterator<Item = Compression> {
        CODECS.into_iter().filter(|c| c.is_enabled())
    }

    fn header(key: &str, value: Option<&[u8]>) -> Header {
        Header {
            key: key.into(),
            value: value.map(Bytes::copy_from_slice),
        }
    }

    /// Timestamp, key, value, headers.
    type SampleRecord = (i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<Header>);

    /// Records with a bit of everything: null and empty keys and values, headers with null
    /// values, timestamps out of order.
    fn sample_records() -> Vec<SampleRecord> {
        vec![
            (
                1_700_000_000_500,
                Some(b"key-0".to_vec()),
                Some(b"value-0".to_vec()),
                vec![],
            ),
            (1_700_000_000_000, None, Some(b"no key".to_vec()), vec![]),
            (
                1_700_000_000_900,
                Some(b"tombstone".to_vec()),
                None,
                vec![header("trace", Some(b"abc")), header("empty", None)],
            ),
            (
                1_700_000_000_100,
                Some(vec![]),
                Some(vec![]),
                vec![header("", Some(b""))],
            ),
            (
                1_700_000_000_200,
                Some(vec![0xff; 300]),
                Some(vec![7; 20_000]),
                vec![header("ünïcode", Some(&[1, 2, 3]))],
            ),
        ]
    }

    fn build(compression: Compression) -> Bytes {
        let mut builder = BatchBuilder::new(compression);
        for (ts, key, value, headers) in sample_records() {
            builder.push(ts, key.as_deref(), value.as_deref(), &headers);
        }
        builder.finish().unwrap()
    }

    /// A few small records, for tests that decode a batch many times over.
    fn build_small(compression: Compression) -> Bytes {
        let mut builder = BatchBuilder::new(compression);
        builder.push(5, Some(b"a"), Some(b"first"), &[header("h", Some(b"1"))]);
        builder.push(3, None, Some(b"second"), &[]);
        builder.push(
            9,
            Some(b"c"),
            None,
            &[header("x", None), header("y", Some(b""))],
        );
        builder.finish().unwrap()
    }

    /// The batch with its base offset set, as the broker would store it.
    fn at_offset(batch: &[u8], base_offset: i64) -> Vec<u8> {
        let mut b = batch.to_vec();
        b[..8].copy_from_slice(&base_offset.to_be_bytes());
        b
    }

    /// A batch with the given header fields around an already-encoded records section.
    fn raw_batch(base_offset: i64, attributes: i16, count: i32, records: &[u8]) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend_from_slice(&base_offset.to_be_bytes());
        b.extend_from_slice(&((MIN_BATCH_LENGTH + records.len()) as i32).to_be_bytes());
        b.extend_from_slice(&0i32.to_be_bytes());
        b.push(2);
        b.extend_from_slice(&0u32.to_be_bytes());
        b.extend_from_slice(&attributes.to_be_bytes());
        b.extend_from_slice(&(count - 1).to_be_bytes());
        b.extend_from_slice(&1000i64.to_be_bytes());
        b.extend_from_slice(&2000i64.to_be_bytes());
        b.extend_from_slice(&(-1i64).to_be_bytes());
        b.extend_from_slice(&(-1i16).to_be_bytes());
        b.extend_from_slice(&(-1i32).to_be_bytes());
        b.extend_from_slice(&count.to_be_bytes());
        b.extend_from_slice(records);
        fix_crc(&mut b);
        b
    }

    fn fix_crc(batch: &mut [u8]) {
        let crc = crc32c::crc32c(&batch[ATTRIBUTES_AT..]);
        batch[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
    }

    /// One record from its varint fields after the attributes byte (timestamp delta, offset
    /// delta, key length, ...), with no key or value bytes, so tests can write any length.
    fn raw_record(fields: &[i64]) -> Vec<u8> {
        let mut body = vec![0u8];
        for &f in fields {
            put_varlong(&mut body, f);
        }
        let mut out = Vec::new();
        put_varint(&mut out, body.len() as i32);
        out.extend_from_slice(&body);
        out
    }

    fn decode(data: Vec<u8>, check_crcs: bool) -> Result<DecodedRecords> {
        decode_batches(Bytes::from(data), check_crcs)
    }

    fn corrupt_message(r: Result<DecodedRecords>) -> String {
        match r {
            Err(Error::Corrupt(m)) => m,
            Err(e) => panic!("expected Corrupt, got {e:?}"),
            Ok(d) => panic!("expected Corrupt, got {} batches", d.batches.len()),
        }
    }

    /// An idempotent batch carries its producer id, epoch and base sequence, under a CRC that
    /// still checks (a broker refuses a batch whose CRC does not match as CORRUPT_MESSAGE).
    #[test]
    fn producer_state_is_written_under_a_valid_crc() {
        for compression in built_in() {
            let plain = build(compression);
            let stamped = set_producer_state(&plain, 4711, 3, 2_147_483_000).unwrap();
            assert_eq!(stamped.len(), plain.len());
            // The CRC checks: the batch decodes with check.crcs.
            let decoded = decode(at_offset(&stamped, 7), true).unwrap();
            let b = &decoded.batches[0];
            assert_eq!(b.producer_id, 4711, "{compression:?}");
            assert_eq!(b.records().len(), sample_records().len());
            // Stamped again (an epoch bump), the last values win; two batches back to back
            // are read one after the other.
            let again = set_producer_state(&stamped, 4711, 4, 0).unwrap();
            let mut two = at_offset(&stamped, 7);
            two.extend_from_slice(&at_offset(&again, 20));
            decode(at_offset(&again, 7), true).unwrap();
            let n = sample_records().len() as i32;
            assert_eq!(
                producer_states(&two),
                vec![
                    ProducerState {
                        base_offset: 7,
                        producer_id: 4711,
                        producer_epoch: 3,
                        base_sequence: 2_147_483_000,
                        records: n,
                    },
                    ProducerState {
                        base_offset: 20,
                        producer_id: 4711,
                        producer_epoch: 4,
                        base_sequence: 0,
                        records: n,
                    }
                ],
                "{compression:?}"
            );
            // A truncated tail is left out.
            assert_eq!(producer_states(&two[..two.len() - 1]).len(), 1);
        }
        assert!(set_producer_state(&[0u8; 10], 1, 0, 0).is_err());
    }

    /// A transactional batch has attribute bit 4 set under a CRC that checks, keeps its
    /// compression, and stays transactional when its sequences are stamped again.
    #[test]
    fn transactional_batches_are_marked_under_a_valid_crc() {
        for compression in built_in() {
            let plain = build(compression);
            let plain_batch = &decode(at_offset(&plain, 0), false).unwrap().batches[0];
            assert!(!plain_batch.is_transactional);
            let marked = set_transactional_state(&plain, 4711, 3, 10).unwrap();
            let decoded = decode(at_offset(&marked, 7), true).unwrap();
            let b = &decoded.batches[0];
            assert!(b.is_transactional && !b.is_control, "{compression:?}");
            assert_eq!(b.producer_id, 4711);
            assert_eq!(b.records().len(), sample_records().len(), "{compression:?}");
            let again = set_producer_state(&marked, 4711, 4, 0).unwrap();
            let decoded = decode(at_offset(&again, 7), true).unwrap();
            assert!(decoded.batches[0].is_transactional, "{compression:?}");
        }
        assert!(set_transactional_state(&[0u8; 10], 1, 0, 0).is_err());
    }

    #[test]
    fn round_trip_every_codec() {
        for compression in built_in() {
            let batch = at_offset(&build(compression), 1000);
            let decoded = decode(batch, true).unwrap();
            assert!(!decoded.truncated, "{compression:?}");
            assert_eq!(decoded.batches.len(), 1);
            let b = &decoded.batches[0];
            let expected = sample_records();
            assert_eq!(b.compression, compression);
            assert_eq!(b.base_offset, 1000);
            assert_eq!(b.last_offset, 1000 + expected.len() as i64 - 1);
            assert_eq!(b.partition_leader_epoch, -1);
            assert_eq!(b.producer_id, -1);
            assert_eq!(
                producer_states(&at_offset(&build(compression), 1000)),
                vec![ProducerState {
                    base_offset: 1000,
                    producer_id: -1,
                    producer_epoch: -1,
                    base_sequence: -1,
                    records: expected.len() as i32,
                }]
            );
            assert_eq!(b.timestamp_type, TimestampType::CreateTime);
            assert!(!b.is_control && !b.is_transactional);
            assert_eq!(b.records().len(), expected.len());
            for (i, (record, (ts, key, value, headers))) in
                b.records().iter().zip(expected).enumerate()
            {
                assert_eq!(record.offset, 1000 + i as i64, "{compression:?}");
                assert_eq!(record.timestamp, ts, "{compression:?}");
                assert_eq!(record.key.as_deref(), key.as_deref(), "{compression:?}");
                assert_eq!(record.value.as_deref(), value.as_deref(), "{compression:?}");
                assert_eq!(record.headers, headers, "{compression:?}");
            }
        }
    }

    #[test]
    fn batch_header_timestamps_are_min_and_max() {
        let batch = build(Compression::None);
        assert_eq!(be_i64(&batch, BASE_TIMESTAMP_AT), 1_700_000_000_000);
        assert_eq!(be_i64(&batch, MAX_TIMESTAMP_AT), 1_700_000_000_900);
        assert_eq!(be_i64(&batch, 0), 0);
        assert_eq!(be_i32(&batch, 8) as usize, batch.len() - LOG_OVERHEAD);
    }

    #[test]
    fn large_batches_round_trip_across_compression_blocks() {
        // Big enough for several xerial (32 KiB) and lz4 (64 KiB) blocks.
        for compression in built_in() {
            let mut builder = BatchBuilder::new(compression);
            for i in 0..5000u32 {
                let value = format!("value {i} {}", "x".repeat((i % 97) as usize));
                builder.push(
                    i as i64,
                    Some(&i.to_be_bytes()),
                    Some(value.as_bytes()),
                    &[],
                );
            }
            assert_eq!(builder.len(), 5000);
            let decoded = decode(build_and_finish(builder), true).unwrap();
            let records = &decoded.batches[0].records();
            assert_eq!(records.len(), 5000, "{compression:?}");
            for (i, r) in records.iter().enumerate() {
                let value = format!("value {i} {}", "x".repeat(i % 97));
                assert_eq!(r.value.as_deref(), Some(value.as_bytes()));
                assert_eq!(r.timestamp, i as i64);
            }
        }
    }

    fn build_and_finish(builder: BatchBuilder) -> Vec<u8> {
        builder.finish().unwrap().to_vec()
    }

    #[test]
    fn estimated_size_is_exact_for_ordered_uncompressed_records() {
        let mut builder = BatchBuilder::new(Compression::None);
        assert!(builder.is_empty());
        assert_eq!(builder.estimated_size(), RECORDS_AT);
        for i in 0..100 {
            builder.push(10 + i, Some(b"k"), Some(&[0; 50]), &[header("h", None)]);
        }
        let estimate = builder.estimated_size();
        assert_eq!(builder.finish().unwrap().len(), estimate);
    }

    #[test]
    fn empty_builder_is_refused() {
        assert!(matches!(
            BatchBuilder::new(Compression::Lz4).finish(),
            Err(Error::InvalidArgument(_))
        ));
    }

    /// A batch written out field by field from Kafka's documented layout, to check the codec
    /// against Kafka rather than against itself.
    #[test]
    fn matches_a_hand_built_batch() {
        #[rustfmt::skip]
        let mut expected: Vec<u8> = vec![
            0, 0, 0, 0, 0, 0, 0, 0,                 // baseOffset 0
            0, 0, 0, 70,                            // batchLength: 49 + 9 + 12
            0xff, 0xff, 0xff, 0xff,                 // partitionLeaderEpoch -1
            2,                                      // magic
            0, 0, 0, 0,                             // crc, filled in below
            0, 0,                                   // attributes: no compression, CreateTime
            0, 0, 0, 1,                             // lastOffsetDelta 1
            0, 0, 0, 0, 0, 0, 0x03, 0xe8,           // baseTimestamp 1000
            0, 0, 0, 0, 0, 0, 0x03, 0xeb,           // maxTimestamp 1003
            0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, // producerId -1
            0xff, 0xff,                             // producerEpoch -1
            0xff, 0xff, 0xff, 0xff,                 // baseSequence -1
            0, 0, 0, 2,                             // recordCount 2
            // record 0 (zigzag varints throughout)
            0x10,                                   // length 8
            0x00,                                   // attributes
            0x06,                                   // timestampDelta 3
            0x00,                                   // offsetDelta 0
            0x02, b'k',                             // key "k"
            0x02, b'v',                             // value "v"
            0x00,                                   // no headers
            // record 1
            0x16,                                   // length 11
            0x00,                                   // attributes
            0x00,                                   // timestampDelta 0
            0x02,                                   // offsetDelta 1
            0x01,                                   // key null
            0x04, b'v', b'2',                       // value "v2"
            0x02,                                   // one header
            0x02, b'h',                             // header key "h"
            0x01,                                   // header value null
        ];
        assert_eq!(expected.len(), LOG_OVERHEAD + 70);
        // CRC-32C (Castagnoli) check value, so the crc32c crate is the right CRC.
        assert_eq!(crc32c::crc32c(b"123456789"), 0xe306_9283);
        fix_crc(&mut expected);

        let mut builder = BatchBuilder::new(Compression::None);
        builder.push(1003, Some(b"k"), Some(b"v"), &[]);
        builder.push(1000, None, Some(b"v2"), &[header("h", None)]);
        assert_eq!(builder.finish().unwrap().to_vec(), expected);

        let decoded = decode(expected, true).unwrap();
        let records = &decoded.batches[0].records();
        assert_eq!(records[0].timestamp, 1003);
        assert_eq!(records[1].offset, 1);
        assert_eq!(records[1].headers, vec![header("h", None)]);
    }

    #[test]
    #[cfg(feature = "lz4")]
    fn every_truncation_keeps_the_complete_batches() {
        let batches: Vec<Vec<u8>> = [Compression::None, Compression::Lz4, Compression::None]
            .iter()
            .enumerate()
            .map(|(i, &c)| at_offset(&build_small(c), i as i64 * 5))
            .collect();
        let fetch: Vec<u8> = batches.concat();
        let mut ends = Vec::new();
        let mut end = 0;
        for b in &batches {
            end += b.len();
            ends.push(end);
        }
        for cut in 0..=fetch.len() {
            for check in [true, false] {
                let decoded = decode(fetch[..cut].to_vec(), check)
                    .unwrap_or_else(|e| panic!("cut at {cut}: {e}"));
                let complete = ends.iter().filter(|&&e| e <= cut).count();
                assert_eq!(decoded.batches.len(), complete, "cut at {cut}");
                let at_boundary = cut == 0 || ends.contains(&cut);
                assert_eq!(decoded.truncated, !at_boundary, "cut at {cut}");
                for (i, b) in decoded.batches.iter().enumerate() {
                    assert_eq!(b.base_offset, i as i64 * 5);
                    assert_eq!(b.records().len(), 3);
                }
            }
        }
    }

    #[test]
    #[cfg(feature = "lz4")]
    fn absurd_record_counts_are_refused_without_allocating() {
        let records = raw_record(&[0, 0, -1, -1, 0]);
        let batch = raw_batch(0, 0, i32::MAX, &records);
        let m = corrupt_message(decode(batch, true));
        assert!(m.contains("2147483647 records"), "{m}");

        // Compressed, the count cannot be checked up front; it must still not drive allocation
        // and must match what is there.
        let compressed = compress(Compression::Lz4, &records).unwrap();
        let batch = raw_batch(0, 3, i32::MAX, &compressed);
        let m = corrupt_message(decode(batch, true));
        assert!(m.contains("of 2147483647"), "{m}");

        let batch = raw_batch(0, 3, 0, &compressed);
        let m = corrupt_message(decode(batch, true));
        assert!(m.contains("left after its 0 records"), "{m}");

        let batch = raw_batch(0, 0, -1, &records);
        let m = corrupt_message(decode(batch, true));
        assert!(m.contains("negative record count"), "{m}");
    }

    #[test]
    fn negative_and_oversized_lengths_are_corrupt() {
        // [timestampDelta, offsetDelta, keyLen, ..]
        for fields in [
            &[0, 0, -2, -1, 0][..],         // key length -2
            &[0, 0, -1, -7, 0][..],         // value length -7
            &[0, 0, -1, -1, -1][..],        // header count -1
            &[0, 0, -1, -1, 1, -1, -1][..], // header key length -1
            &[0, 0, 100, -1, 0][..],        // key longer than the record
            &[0, 0, -1, -1, 1000][..],      // more headers than bytes
        ] {
            let batch = raw_batch(0, 0, 1, &raw_record(fields));
            corrupt_message(decode(batch, true));
        }

        // Record length -1.
        let mut records = vec![0x01];
        records.extend_from_slice(&[0; 10]);
        corrupt_message(decode(raw_batch(0, 0, 1, &records), true));

        // Batch length negative, and smaller than the header.
        for length in [-1i32, 48, i32::MIN] {
            let mut batch = raw_batch(0, 0, 1, &raw_record(&[0, 0, -1, -1, 0]));
            batch[8..12].copy_from_slice(&length.to_be_bytes());
            let m = corrupt_message(decode(batch, false));
            assert!(m.contains(&format!("length {length}")), "{m}");
        }
    }

    #[test]
    fn record_length_must_match_its_fields() {
        let mut record = raw_record(&[0, 0, -1, -1, 0]);
        record[0] += 2; // two bytes longer than its fields
        record.extend_from_slice(&[0, 0]);
        corrupt_message(decode(raw_batch(0, 0, 1, &record), true));
    }

    #[test]
    fn overlong_varints_are_corrupt() {
        // Length 20: attributes, an 11-byte timestamp delta, then padding.
        let mut records = vec![0x28, 0x00];
        records.extend_from_slice(&[0xff; 11]);
        records.extend_from_slice(&[0; 8]);
        let m = corrupt_message(decode(raw_batch(0, 0, 1, &records), true));
        assert!(m.contains("varlong longer than 10 bytes"), "{m}");
        let mut pos = 0;
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01], &mut pos),
            Err("varint longer than 5 bytes")
        );
        let mut pos = 0;
        assert_eq!(
            read_varint(&[0xff, 0xff, 0xff, 0xff, 0x0f], &mut pos),
            Ok(i32::MIN)
        );
    }

    #[test]
    fn varints_round_trip() {
        for v in [0, 1, -1, 63, -64, 64, 300, i32::MAX, i32::MIN] {
            let mut out = Vec::new();
            put_varint(&mut out, v);
            assert_eq!(out.len(), varint_len(v));
            let mut pos = 0;
            assert_eq!(read_varint(&out, &mut pos), Ok(v));
            assert_eq!(pos, out.len());
        }
        for v in [0, 1, -1, 1 << 40, i64::MAX, i64::MIN] {
            let mut out = Vec::new();
            put_varlong(&mut out, v);
            assert_eq!(out.len(), varlong_len(v));
            let mut pos = 0;
            assert_eq!(read_varlong(&out, &mut pos), Ok(v));
        }
    }

    #[test]
    fn crc_is_checked_only_when_asked() {
        let mut batch = build(Compression::None).to_vec();
        let last = batch.len() - 1;
        batch[last] ^= 0x55;
        let m = corrupt_message(decode(batch.clone(), true));
        assert!(m.contains("CRC") && m.contains("offset 0"), "{m}");
        let expected = format!("{:#010x}", be_u32(&batch, CRC_AT));
        assert!(m.contains(&expected), "{m}");
        let decoded = decode(batch, false).unwrap();
        assert_eq!(decoded.batches[0].records().len(), sample_records().len());
    }

    #[test]
    fn other_magics_are_corrupt() {
        let mut batch = build(Compression::None).to_vec();
        batch[MAGIC_AT] = 1;
        let m = corrupt_message(decode(batch, false));
        assert!(m.contains("magic 1"), "{m}");
    }

    #[test]
    fn unknown_codec_is_corrupt() {
        let batch = raw_batch(0, 5, 1, &raw_record(&[0, 0, -1, -1, 0]));
        let m = corrupt_message(decode(batch, true));
        assert!(m.contains("codec 5"), "{m}");
    }

    #[test]
    fn control_transactional_and_log_append_time_batches() {
        // A commit marker: key is (version 0, type 1), value (version 0, coordinator epoch 0).
        let mut record = vec![0u8, 0, 0];
        put_varint(&mut record, 4);
        record.extend_from_slice(&[0, 0, 0, 1]);
        put_varint(&mut record, 6);
        record.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
        put_varint(&mut record, 0);
        let mut records = Vec::new();
        put_varint(&mut records, record.len() as i32);
        records.extend_from_slice(&record);
        let attributes = CONTROL_MASK | TRANSACTIONAL_MASK | TIMESTAMP_TYPE_MASK;
        let decoded = decode(raw_batch(42, attributes, 1, &records), true).unwrap();
        let b = &decoded.batches[0];
        assert!(b.is_control && b.is_transactional);
        assert_eq!(b.timestamp_type, TimestampType::LogAppendTime);
        assert_eq!(b.records()[0].offset, 42);
        assert_eq!(
            b.records()[0].timestamp,
            2000,
            "LogAppendTime uses maxTimestamp"
        );
        assert_eq!(b.records()[0].key.as_deref(), Some(&[0, 0, 0, 1][..]));
    }

    #[test]
    fn empty_batches_are_kept() {
        // Compaction can leave a batch with no records; its last offset still moves the position.
        let mut batch = raw_batch(7, 0, 0, &[]);
        batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&3i32.to_be_bytes());
        fix_crc(&mut batch);
        let decoded = decode(batch, true).unwrap();
        assert!(decoded.batches[0].records().is_empty());
        assert_eq!(decoded.batches[0].last_offset, 10);
    }

    #[test]
    fn short_fetches() {
        let d = decode(Vec::new(), true).unwrap();
        assert!(d.batches.is_empty() && !d.truncated);
        let d = decode(vec![0; 11], true).unwrap();
        assert!(d.batches.is_empty() && d.truncated);
        // A batch claiming to be huge is a truncated batch, not an allocation.
        let mut head = vec![0; 12];
        head[8..12].copy_from_slice(&i32::MAX.to_be_bytes());
        let d = decode(head, true).unwrap();
        assert!(d.batches.is_empty() && d.truncated);
    }

    #[test]
    fn uncompressed_keys_and_values_share_the_input() {
        let data = build(Compression::None);
        let range = data.as_ptr() as usize..data.as_ptr() as usize + data.len();
        let decoded = decode_batches(data.clone(), true).unwrap();
        for r in &decoded.batches[0].records() {
            for b in [&r.key, &r.value].into_iter().flatten() {
                if !b.is_empty() {
                    assert!(range.contains(&(b.as_ptr() as usize)));
                }
            }
        }
    }

    /// Inflated sections go into kept buffers written over from one batch to the next (see
    /// `crate::buffers`): a batch must come out with its own bytes only, whatever a larger one
    /// left in the buffer before it.
    #[test]
    fn an_inflated_section_holds_its_own_bytes_only_after_a_larger_one() {
        let mut rng = StdRng::seed_from_u64(7);
        // Compressible but not uniform: runs of random bytes.
        let mut section = |len: usize| -> Vec<u8> {
            let mut v = Vec::with_capacity(len);
            while v.len() < len {
                let b: u8 = rng.gen();
                v.extend(std::iter::repeat_n(b, rng.gen_range(1..40)));
            }
            v.truncate(len);
            v
        };
        let (larger, smaller) = (section(300_000), section(200_000));
        for c in [
            Compression::Gzip,
            Compression::Snappy,
            Compression::Lz4,
            Compression::Zstd,
        ] {
            if !c.is_enabled() {
                continue;
            }
            for _ in 0..3 {
                for plain in [&larger, &smaller] {
                    let packed = compression::compress(c, plain).unwrap();
                    let limit = compression::inflate_limit(packed.len());
                    let out = compression::decompress(c, &packed, limit, &INFLATED).unwrap();
                    assert!(out == *plain, "{}: {} bytes", c.name(), plain.len());
                    // Back to the pool, as a buffered batch's data goes when its records are taken.
                    drop(crate::buffers::Pool::bytes(&crate::buffers::INFLATED, out));
                }
            }
        }
    }

    /// A gzip section's buffer is sized from its trailer: without that it grew by doubling from
    /// four times the input and was kept at up to twice the output.
    #[test]
    #[cfg(feature = "gzip")]
    fn a_gzip_section_inflates_into_a_buffer_of_its_own_size() {
        let pool = crate::buffers::Pool::new();
        for len in [1_100_000, 300_000, 40_000] {
            let plain: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
            let packed = compression::compress(Compression::Gzip, &plain).unwrap();
            assert!(
                packed.len() * 4 < len,
                "compressible enough to need more than 4x"
            );
            let limit = compression::inflate_limit(packed.len());
            let out = compression::gzip_decompress(&packed, limit, &pool).unwrap();
            assert!(out == plain);
            assert!(
                out.capacity() - len <= len / 8,
                "{len} bytes in a buffer of {}",
                out.capacity()
            );
        }
    }

    /// The trailer is a claim: a section of two members states only the last one's size, and a
    /// false size is bounded by the inflate limit and refused by the decoder.
    #[test]
    #[cfg(feature = "gzip")]
    fn a_gzip_trailer_only_sizes_the_buffer() {
        let pool = crate::buffers::Pool::new();
        let first: Vec<u8> = (0..500_000).map(|i| (i % 11) as u8).collect();
        let mut two = compression::compress(Compression::Gzip, &first).unwrap();
        two.extend(compression::compress(Compression::Gzip, b"last member").unwrap());
        let limit = compression::inflate_limit(two.len());
        let out = compression::gzip_decompress(&two, limit, &pool).unwrap();
        assert_eq!(out.len(), first.len() + b"last member".len());
        assert!(out.starts_with(&first) && out.ends_with(b"last member"));

        let mut lying = compression::compress(Compression::Gzip, &first).unwrap();
        let at = lying.len() - 4;
        lying[at..].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = compression::gzip_decompress(&lying, 1 << 20, &pool).unwrap_err();
        assert!(!err.is_empty());
        let limit = compression::inflate_limit(lying.len());
        assert!(compression::gzip_decompress(&lying, limit, &pool).is_err());
        // A section too short for a trailer: an error, not a panic.
        assert!(compression::gzip_decompress(&[0x1f, 0x8b, 8], limit, &pool).is_err());
    }

    #[test]
    #[cfg(feature = "snappy")]
    fn raw_snappy_is_accepted() {
        let mut plain = Vec::new();
        for i in 0..3 {
            let mut body = vec![0u8];
            put_varlong(&mut body, i);
            put_varint(&mut body, i as i32);
            put_varint(&mut body, -1);
            put_varint(&mut body, 5);
            body.extend_from_slice(b"hello");
            put_varint(&mut body, 0);
            put_varint(&mut plain, body.len() as i32);
            plain.extend_from_slice(&body);
        }
        let raw = snap::raw::Encoder::new().compress_vec(&plain).unwrap();
        let decoded = decode(raw_batch(0, 2, 3, &raw), true).unwrap();
        let records = &decoded.batches[0].records();
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].value.as_deref(), Some(&b"hello"[..]));
        assert_eq!(records[2].timestamp, 1002);
    }

    #[test]
    #[cfg(feature = "snappy")]
    fn xerial_framing_is_what_snappy_java_writes() {
        let framed = compress(Compression::Snappy, &[9; 100_000]).unwrap();
        assert_eq!(&framed[..8], XERIAL_MAGIC);
        assert_eq!(be_i32(&framed, 8), 1);
        assert_eq!(be_i32(&framed, 12), 1);
        let first_block = be_i32(&framed, 16) as usize;
        assert_eq!(
            snap::raw::decompress_len(&framed[20..20 + first_block]).unwrap(),
            XERIAL_BLOCK_SIZE
        );
    }

    #[test]
    #[cfg(all(feature = "snappy", feature = "lz4"))]
    fn xerial_streams_of_many_blocks_decode_whole_and_cuts_are_errors() {
        // 100 KiB of text and noise: four xerial blocks, compressed and nearly stored ones.
        let plain = mixed_data(100 << 10);
        let framed = compress(Compression::Snappy, &plain).unwrap();
        assert_eq!(
            snappy_decompress(&framed, 1 << 20, &INFLATED).unwrap(),
            plain
        );
        // The limit counts every block's output, the last one's too.
        let err = snappy_decompress(&framed, plain.len() - 1, &INFLATED).unwrap_err();
        assert!(err.contains("exceeds"), "{err}");
        // The header alone is an empty stream; a cut inside a block's length or data is an
        // error, whichever block it falls in.
        assert_eq!(
            snappy_decompress(&framed[..XERIAL_HEADER_LEN], 1 << 20, &INFLATED).unwrap(),
            b""
        );
        let mut block_ends = vec![XERIAL_HEADER_LEN];
        while *block_ends.last().unwrap() < framed.len() {
            let at = *block_ends.last().unwrap();
            block_ends.push(at + 4 + be_i32(&framed, at) as usize);
        }
        for cut in XERIAL_HEADER_LEN + 1..framed.len() {
            let r = snappy_decompress(&framed[..cut], 1 << 20, &INFLATED);
            if block_ends.contains(&cut) {
                let whole = block_ends.iter().position(|&e| e == cut).unwrap();
                assert_eq!(
                    r.unwrap(),
                    plain[..whole * XERIAL_BLOCK_SIZE],
                    "cut at {cut}"
                );
            } else {
                assert!(r.is_err(), "cut at {cut} decoded");
            }
        }
        // A block length past the end, or negative, names itself.
        let mut bad = framed.clone();
        bad[XERIAL_HEADER_LEN] = 0x7f;
        assert!(snappy_decompress(&bad, 1 << 20, &INFLATED)
            .unwrap_err()
            .contains("xerial block length"));
        bad[XERIAL_HEADER_LEN] = 0xff;
        assert!(snappy_decompress(&bad, 1 << 20, &INFLATED)
            .unwrap_err()
            .contains("xerial block length"));
    }

    #[test]
    fn decompression_is_bounded() {
        let plain = vec![0u8; 2 << 20];
        for compression in built_in() {
            if compression == Compression::None {
                continue;
            }
            let compressed = compress(compression, &plain).unwrap();
            assert_eq!(
                decompress(compression, &compressed, 2 << 20, &INFLATED).unwrap(),
                plain
            );
            let err = decompress(compression, &compressed, 1 << 20, &INFLATED).unwrap_err();
            assert!(err.contains("exceeds"), "{compression:?}: {err}");
        }
        assert_eq!(inflate_limit(10), INFLATE_FLOOR);
        assert_eq!(inflate_limit(8 << 20), (8 << 20) * 64 + (1 << 20));
        // Spans are 32-bit: a batch never inflates past what they address.
        assert_eq!(inflate_limit(256 << 20), INFLATE_MAX);
    }

    #[test]
    #[cfg(feature = "lz4")]
    fn lz4_frames_have_64_kib_blocks_whatever_the_batch_size() {
        for len in [10usize, 100 << 10, 300 << 10] {
            let plain: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
            let frame = compress(Compression::Lz4, &plain).unwrap();
            // The frame magic, FLG, then BD: the largest block size in bits 4-6 (4: 64 KiB).
            assert_eq!(&frame[..4], &[0x04, 0x22, 0x4d, 0x18]);
            assert_eq!((frame[5] >> 4) & 0x7, 4, "{len} bytes");
            assert_eq!(
                decompress(Compression::Lz4, &frame, 1 << 20, &INFLATED).unwrap(),
                plain
            );
        }
    }

    /// Data with a mix of runs and noise, so an lz4 frame holds compressed and stored blocks.
    #[cfg(feature = "lz4")]
    fn mixed_data(len: usize) -> Vec<u8> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..len)
            .map(|i| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // 64 KiB of text-like bytes, then 64 KiB of noise, and so on.
                if (i >> 16) % 2 == 0 {
                    b"order shipped 1234 "[i % 19]
                } else {
                    x as u8
                }
            })
            .collect()
    }

    #[cfg(feature = "lz4")]
    fn lz4_frame_with(info: lz4_flex::frame::FrameInfo, plain: &[u8]) -> Vec<u8> {
        use std::io::Write;
        let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
        encoder.write_all(plain).unwrap();
        encoder.finish().unwrap()
    }

    /// The reference: lz4_flex's own frame reader.
    #[cfg(feature = "lz4")]
    fn lz4_reference(frame: &[u8]) -> std::io::Result<Vec<u8>> {
        use std::io::Read;
        let mut out = Vec::new();
        lz4_flex::frame::FrameDecoder::new(frame).read_to_end(&mut out)?;
        Ok(out)
    }

    #[test]
    #[cfg(feature = "lz4")]
    fn lz4_frames_of_every_kind_decode_as_the_reference_reads_them() {
        use lz4_flex::frame::{BlockMode, BlockSize, FrameInfo};
        for len in [0usize, 10, 70 << 10, 300 << 10] {
            let plain = mixed_data(len);
            for mode in [BlockMode::Independent, BlockMode::Linked] {
                for size in [BlockSize::Max64KB, BlockSize::Max256KB] {
                    for checksums in [false, true] {
                        let info = FrameInfo::new()
                            .block_mode(mode)
                            .block_size(size)
                            .block_checksums(checksums)
                            .content_checksum(checksums)
                            .content_size(checksums.then_some(len as u64));
                        let frame = lz4_frame_with(info, &plain);
                        let what =
                            format!("{len} bytes, {mode:?}, {size:?}, checksums {checksums}");
                        assert_eq!(lz4_reference(&frame).unwrap(), plain, "{what}");
                        assert_eq!(
                            lz4_decompress(&frame, 1 << 20, &INFLATED).unwrap(),
                            plain,
                            "{what}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    #[cfg(feature = "lz4")]
    fn lz4_concatenated_and_skippable_frames_read_as_one_stream() {
        let (a, b) = (mixed_data(100 << 10), b"second frame".to_vec());
        let mut input = compress(Compression::Lz4, &a).unwrap();
        // A skippable frame: magic 0x184D2A5n, a length, that many bytes of anything.
        input.extend_from_slice(&[0x53, 0x2a, 0x4d, 0x18, 3, 0, 0, 0, 9, 9, 9]);
        input.extend(compress(Compression::Lz4, &b).unwrap());
        assert_eq!(
            lz4_decompress(&input, 1 << 20, &INFLATED).unwrap(),
            [a, b].concat()
        );
    }

    #[test]
    #[cfg(feature = "lz4")]
    fn damaged_lz4_frames_are_errors_never_panics() {
        let plain = mixed_data(200 << 10);
        let frame = lz4_frame_with(
            lz4_flex::frame::FrameInfo::new().block_mode(lz4_flex::frame::BlockMode::Linked),
            &plain,
        );
        // Every cut short of the end mark is truncated (nothing at all is no frames, no bytes).
        assert_eq!(lz4_decompress(&[], 1 << 20, &INFLATED).unwrap(), b"");
        for cut in 1..frame.len() - 4 {
            let err = lz4_decompress(&frame[..cut], 1 << 20, &INFLATED).unwrap_err();
            assert!(err.contains("truncated"), "cut at {cut}: {err}");
        }
        // Damage anywhere: an error or some bytes, within the limit, never a panic.
        for at in (0..frame.len()).step_by(97) {
            for flip in [0x01u8, 0x80, 0xff] {
                let mut bad = frame.clone();
                bad[at] ^= flip;
                if let Ok(out) = lz4_decompress(&bad, 1 << 20, &INFLATED) {
                    assert!(out.len() <= 1 << 20);
                }
            }
        }
        let mut header = frame.clone();
        header[4] = 0x80 | (header[4] & 0x3f);
        assert!(lz4_decompress(&header, 1 << 20, &INFLATED)
            .unwrap_err()
            .contains("version 2"));
        let mut header = frame.clone();
        header[4] |= 0x01;
        assert!(lz4_decompress(&header, 1 << 20, &INFLATED)
            .unwrap_err()
            .contains("dictionary"));
        let mut magic = frame;
        magic[0] = 0;
        assert!(lz4_decompress(&magic, 1 << 20, &INFLATED)
            .unwrap_err()
            .contains("magic"));
    }

    #[test]
    #[cfg(feature = "zstd")]
    fn zstd_frames_decode_whole_concatenated_and_never_past_a_cut() {
        let (a, b) = (vec![7u8; 300 << 10], b"second frame".to_vec());
        let mut input = compress(Compression::Zstd, &a).unwrap();
        let first = input.len();
        input.extend(compress(Compression::Zstd, &b).unwrap());
        // Several growths of the output (300 KiB from a few hundred bytes), then a second frame.
        assert_eq!(
            zstd_decompress(&input, 1 << 20, &INFLATED).unwrap(),
            [&a[..], &b].concat()
        );
        assert_eq!(
            zstd_decompress(&input[..first], 1 << 20, &INFLATED).unwrap(),
            a
        );
        assert_eq!(
            zstd_decompress(&input, a.len() + b.len(), &INFLATED)
                .unwrap()
                .len(),
            300 * 1024 + 12
        );
        let err = zstd_decompress(&input, a.len() + b.len() - 1, &INFLATED).unwrap_err();
        assert!(err.contains("exceeds"), "{err}");
        for cut in (1..first).chain(first + 1..input.len()) {
            let err = zstd_decompress(&input[..cut], 1 << 20, &INFLATED).unwrap_err();
            assert!(err.contains("zstd"), "cut at {cut}: {err}");
        }
        // A failed batch leaves nothing behind for the thread's next one.
        assert_eq!(
            zstd_decompress(&input, 1 << 20, &INFLATED).unwrap().len(),
            a.len() + b.len()
        );
    }

    #[test]
    fn garbage_inside_compressed_batches_is_corrupt() {
        for compression in CODECS {
            if compression == Compression::None {
                continue;
            }
            let batch = raw_batch(0, compression.attribute_bits(), 1, &[1, 2, 3, 4, 5, 6, 7]);
            let m = corrupt_message(decode(batch, true));
            assert!(m.contains(compression.name()), "{m}");
        }
    }

    #[test]
    fn a_batch_in_a_codec_left_out_names_the_codec_and_its_feature() {
        for codec in CODECS.into_iter().filter(|&c| c != Compression::None) {
            // Bytes no codec reads: what matters is whether the decoder gets to try.
            let batch = raw_batch(7, codec.attribute_bits(), 1, &[1, 2, 3, 4, 5, 6, 7]);
            let m = corrupt_message(decode(batch, true));
            let feature = format!("lagless crate's `{}` feature", codec.name());
            if codec.is_enabled() {
                assert!(
                    m.contains("decompression failed") && !m.contains(&feature),
                    "{m}"
                );
            } else {
                assert!(
                    m.starts_with(&format!(
                        "record batch at offset 7 is compressed with {}",
                        codec.name()
                    )) && m.contains(&feature),
                    "{m}"
                );
            }
        }
    }

    #[test]
    fn compression_names() {
        for c in CODECS {
            assert_eq!(Compression::parse(c.name()), Some(c));
            assert_eq!(Compression::from_attributes(c.attribute_bits()).unwrap(), c);
            // Only the low three bits name the codec.
            assert_eq!(
                Compression::from_attributes(c.attribute_bits() | 0x38).unwrap(),
                c
            );
        }
        assert_eq!(Compression::parse("brotli"), None);
        assert!(Compression::from_attributes(7).is_err());
    }

    /// Random damage to a valid fetch must give an error or some batches, never a panic.
    #[test]
    fn mutated_fetches_never_panic() {
        let fetch: Vec<u8> = built_in()
            .enumerate()
            .flat_map(|(i, c)| at_offset(&build_small(c), i as i64 * 10))
            .collect();
        for seed in 0..4000u64 {
            let mut rng = StdRng::seed_from_u64(seed);
            let mut data = fetch.clone();
            for _ in 0..rng.gen_range(1..8) {
                if data.is_empty() {
                    break;
                }
                let at = rng.gen_range(0..data.len());
                match rng.gen_range(0..6) {
                    0 => data[at] = rng.gen(),
                    1 => data[at] ^= 1 << rng.gen_range(0..8),
                    2 => data.truncate(at),
                    3 => {
                        data.remove(at);
                    }
                    4 => data.insert(at, rng.gen()),
                    _ => {
                        let value: i32 =
                            [i32::MAX, i32::MIN, -1, 0, 1, 48, 49][rng.gen_range(0..7)];
                        let end = (at + 4).min(data.len());
                        let len = end - at;
                        data[at..end].copy_from_slice(&value.to_be_bytes()[..len]);
                    }
                }
            }
            // Keep the CRCs valid half the time so the damage reaches the record parser with
            // checking on as well.
            if seed % 2 == 0 {
                let mut pos = 0;
                while data.len() - pos >= RECORDS_AT {
                    let len = be_i32(&data, pos + 8);
                    if len < MIN_BATCH_LENGTH as i32 || data.len() - pos < 12 + len as usize {
                        break;
                    }
                    fix_crc(&mut data[pos..pos + 12 + len as usize]);
                    pos += 12 + len as usize;
                }
            }
            let data = Bytes::from(data);
            for check_crcs in [true, false] {
                if let Ok(decoded) = decode_batches(data.clone(), check_crcs) {
                    // Spans become slices when a record is handed out: never out of bounds.
                    for b in &decoded.batches {
                        let _ = b.records();
                    }
                }
            }
        }
    }
}
