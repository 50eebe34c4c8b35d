//! Kafka record batches (magic v2): decoding the records field of a fetch response, and encoding a
//! batch for a produce request.
//!
//! lagless has its own codec rather than the `kafka-protocol` crate's because a consumer needs
//! things that one does not give: the complete batches in front of a truncated last batch (the
//! broker cuts the last batch at the fetch size limit, KIP-74, and that is not an error), no
//! allocation sized from an unchecked wire number, CRC checks that can be switched off
//! (`check.crcs`), and headers as a plain `Vec` rather than a map.
//!
//! Keys and values are `Bytes` slices of the fetched buffer (or of the one decompressed buffer of
//! a compressed batch), so decoding a record allocates nothing but its headers.
#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
use std::io::Read;
#[cfg(any(feature = "gzip", feature = "lz4"))]
use std::io::Write;
use std::ops::Range;

use bytes::Bytes;

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

/// Decompression may always produce this much: real batches of very compressible data (zeros,
/// repeated JSON) reach ratios far above the proportional bound below.
const INFLATE_FLOOR: usize = 256 << 20;
/// Above the floor, output may be this many times the compressed input (plus slack); anything more
/// is taken for a decompression bomb.
const INFLATE_RATIO: usize = 64;
const INFLATE_SLACK: usize = 1 << 20;

/// The xerial snappy-java stream header: magic, then version and minimum compatible version.
#[cfg(feature = "snappy")]
const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
#[cfg(feature = "snappy")]
const XERIAL_HEADER_LEN: usize = 16;
#[cfg(feature = "snappy")]
const XERIAL_VERSION: i32 = 1;
/// snappy-java's default block size, which the Java producer uses.
#[cfg(feature = "snappy")]
const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// The compression codec of a batch (the low three bits of its attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// The codec named by a batch's attributes.
    pub fn from_attributes(attributes: i16) -> Result<Self> {
        match attributes & COMPRESSION_MASK {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            c => Err(Error::Corrupt(format!(
                "unknown compression codec {c} in record batch attributes"
            ))),
        }
    }

    /// Kafka's name for the codec, as in `compression.type`.
    pub fn name(&self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }

    /// The codec for a `compression.type` value.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "none" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }

    /// Whether this build of lagless has the codec: each one but `none` is a cargo feature
    /// (`gzip`, `snappy`, `lz4`, `zstd`, all on by default).
    pub fn is_available(self) -> bool {
        match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            Compression::Lz4 => cfg!(feature = "lz4"),
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }

    /// Why a codec cannot be used in this build, naming the feature that would bring it.
    pub fn unavailable_reason(self) -> String {
        format!(
            "lagless was built without the `{0}` feature, so it cannot read or write {0} batches",
            self.name()
        )
    }

    fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// A record header. Kafka allows a null value but not a null key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Bytes>,
}

/// One record of a batch, with its absolute offset and timestamp.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Bytes>,
    pub value: Option<Bytes>,
    pub headers: Vec<Header>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimestampType {
    CreateTime,
    LogAppendTime,
}

/// A decoded record batch.
#[derive(Debug, Clone)]
pub struct Batch {
    pub base_offset: i64,
    /// base_offset + lastOffsetDelta. Compaction can remove records, so this, not the last
    /// record's offset, is where the next fetch starts.
    pub last_offset: i64,
    pub partition_leader_epoch: i32,
    pub timestamp_type: TimestampType,
    /// A transaction marker batch; its records are control records, not user data.
    pub is_control: bool,
    pub is_transactional: bool,
    pub producer_id: i64,
    pub compression: Compression,
    pub records: Vec<Record>,
}

/// What decoding a fetch's records field gives: the complete batches; a truncated tail (KIP-74:
/// the broker may cut the last batch at the size limit) is not an error, it is reported in
/// `truncated`.
#[derive(Debug, Clone)]
pub struct DecodedRecords {
    pub batches: Vec<Batch>,
    pub truncated: bool,
}

/// Decodes the record batches of a fetch response's records field.
///
/// A fetch whose only batch is truncated gives no batches and `truncated = true`: the batch is
/// larger than the fetch size, which the caller has to deal with.
pub fn decode_batches(data: Bytes, check_crcs: bool) -> Result<DecodedRecords> {
    let mut batches = Vec::new();
    let mut pos = 0;
    loop {
        let remaining = data.len() - pos;
        if remaining == 0 {
            return Ok(DecodedRecords {
                batches,
                truncated: false,
            });
        }
        if remaining < LOG_OVERHEAD {
            return Ok(DecodedRecords {
                batches,
                truncated: true,
            });
        }
        let base_offset = be_i64(&data, pos);
        let batch_length = be_i32(&data, pos + 8);
        if batch_length < MIN_BATCH_LENGTH as i32 {
            return Err(Error::Corrupt(format!(
                "record batch at offset {base_offset} has length {batch_length}, \
                 less than the {MIN_BATCH_LENGTH}-byte batch header"
            )));
        }
        let size = LOG_OVERHEAD + batch_length as usize;
        if remaining < size {
            return Ok(DecodedRecords {
                batches,
                truncated: true,
            });
        }
        batches.push(decode_batch(&data, pos..pos + size, check_crcs)?);
        pos += size;
    }
}

/// Decodes the complete batch at `range` of `data`.
fn decode_batch(data: &Bytes, range: Range<usize>, check_crcs: bool) -> Result<Batch> {
    let start = range.start;
    let b = &data[range];
    let base_offset = be_i64(b, 0);
    let magic = b[MAGIC_AT] as i8;
    if magic != MAGIC_V2 {
        return Err(Error::Corrupt(format!(
            "record batch at offset {base_offset} has magic {magic}; only magic {MAGIC_V2} is supported"
        )));
    }
    if check_crcs {
        let expected = be_u32(b, CRC_AT);
        let actual = crc32c::crc32c(&b[ATTRIBUTES_AT..]);
        if expected != actual {
            return Err(Error::Corrupt(format!(
                "record batch at offset {base_offset} failed its CRC check: \
                 expected {expected:#010x}, computed {actual:#010x}"
            )));
        }
    }
    let attributes = be_i16(b, ATTRIBUTES_AT);
    let compression = Compression::from_attributes(attributes)?;
    let timestamp_type = if attributes & TIMESTAMP_TYPE_MASK != 0 {
        TimestampType::LogAppendTime
    } else {
        TimestampType::CreateTime
    };
    let last_offset_delta = be_i32(b, LAST_OFFSET_DELTA_AT);
    let last_offset = base_offset
        .checked_add(i64::from(last_offset_delta))
        .ok_or_else(|| {
            Error::Corrupt(format!(
                "record batch at offset {base_offset} has last offset delta {last_offset_delta} \
                 past the largest offset"
            ))
        })?;
    let max_timestamp = be_i64(b, MAX_TIMESTAMP_AT);
    let ctx = RecordContext {
        base_offset,
        base_timestamp: be_i64(b, BASE_TIMESTAMP_AT),
        // With LogAppendTime the broker stamps the batch, not each record: every record gets the
        // batch's max timestamp, as in the Java client.
        log_append_time: (timestamp_type == TimestampType::LogAppendTime).then_some(max_timestamp),
    };
    let record_count = be_i32(b, RECORD_COUNT_AT);
    if record_count < 0 {
        return Err(Error::Corrupt(format!(
            "record batch at offset {base_offset} has negative record count {record_count}"
        )));
    }
    let record_count = record_count as usize;
    let records = if compression == Compression::None {
        let region = start + RECORDS_AT..start + b.len();
        if record_count > region.len() / MIN_RECORD_SIZE {
            return Err(Error::Corrupt(format!(
                "record batch at offset {base_offset} declares {record_count} records \
                 but holds only {} bytes of records",
                region.len()
            )));
        }
        decode_records(data, region, record_count, &ctx)?
    } else {
        let input = &b[RECORDS_AT..];
        let inflated = decompress(compression, input, inflate_limit(input.len())).map_err(|e| {
            Error::Corrupt(format!(
                "record batch at offset {base_offset}: {} decompression failed: {e}",
                compression.name()
            ))
        })?;
        let inflated = Bytes::from(inflated);
        let len = inflated.len();
        decode_records(&inflated, 0..len, record_count, &ctx)?
    };
    Ok(Batch {
        base_offset,
        last_offset,
        partition_leader_epoch: be_i32(b, 12),
        timestamp_type,
        is_control: attributes & CONTROL_MASK != 0,
        is_transactional: attributes & TRANSACTIONAL_MASK != 0,
        producer_id: be_i64(b, PRODUCER_ID_AT),
        compression,
        records,
    })
}

struct RecordContext {
    base_offset: i64,
    base_timestamp: i64,
    log_append_time: Option<i64>,
}

/// Decodes exactly `count` records that fill `region` of `src`.
fn decode_records(
    src: &Bytes,
    region: Range<usize>,
    count: usize,
    ctx: &RecordContext,
) -> Result<Vec<Record>> {
    // A compressed batch's count is not checked against its compressed size, so cap it by the
    // bytes there are; a count that is too large still fails below.
    let mut records = Vec::with_capacity(count.min(region.len() / MIN_RECORD_SIZE));
    let buf = &src[..region.end];
    let mut pos = region.start;
    for index in 0..count {
        let record_err = |reason: &str| {
            Error::Corrupt(format!(
                "record batch at offset {}: record {index} of {count}: {reason}",
                ctx.base_offset
            ))
        };
        if pos == buf.len() {
            return Err(record_err("the batch ends before it"));
        }
        let len = read_varint(buf, &mut pos).map_err(record_err)?;
        if len < 0 || len as usize > buf.len() - pos {
            return Err(record_err(&format!(
                "record length {len} with {} bytes left",
                buf.len() - pos
            )));
        }
        let end = pos + len as usize;
        let record = decode_record(src, &buf[..end], pos, ctx).map_err(record_err)?;
        records.push(record);
        pos = end;
    }
    if pos != buf.len() {
        return Err(Error::Corrupt(format!(
            "record batch at offset {}: {} bytes left after its {count} records",
            ctx.base_offset,
            buf.len() - pos
        )));
    }
    Ok(records)
}

/// Decodes one record: `buf` ends where the record ends; `src` is the buffer `buf` is the start
/// of, to slice keys and values from.
#[inline]
fn decode_record(
    src: &Bytes,
    buf: &[u8],
    mut pos: usize,
    ctx: &RecordContext,
) -> std::result::Result<Record, &'static str> {
    // The record attributes byte is unused in magic v2.
    if pos == buf.len() {
        return Err("record is empty");
    }
    pos += 1;
    let timestamp_delta = read_varlong(buf, &mut pos)?;
    let offset_delta = read_varint(buf, &mut pos)?;
    let key = read_nullable_bytes(src, buf, &mut pos)?;
    let value = read_nullable_bytes(src, buf, &mut pos)?;
    let header_count = read_varint(buf, &mut pos)?;
    if header_count < 0 {
        return Err("negative header count");
    }
    let header_count = header_count as usize;
    let headers = if header_count == 0 {
        Vec::new()
    } else {
        if header_count > (buf.len() - pos) / MIN_HEADER_SIZE {
            return Err("header count larger than the record");
        }
        let mut headers = Vec::with_capacity(header_count);
        for _ in 0..header_count {
            let key_len = read_varint(buf, &mut pos)?;
            if key_len < 0 {
                return Err("negative header key length");
            }
            let key_len = key_len as usize;
            if key_len > buf.len() - pos {
                return Err("header key runs past the record");
            }
            let key = std::str::from_utf8(&buf[pos..pos + key_len])
                .map_err(|_| "header key is not UTF-8")?
                .to_owned();
            pos += key_len;
            let value = read_nullable_bytes(src, buf, &mut pos)?;
            headers.push(Header { key, value });
        }
        headers
    };
    if pos != buf.len() {
        return Err("record length does not match its fields");
    }
    // Wrapping keeps garbage from an unchecked (check.crcs=false) batch from panicking; such
    // values are wrong either way.
    let timestamp = match ctx.log_append_time {
        Some(t) => t,
        None => ctx.base_timestamp.wrapping_add(timestamp_delta),
    };
    Ok(Record {
        offset: ctx.base_offset.wrapping_add(i64::from(offset_delta)),
        timestamp,
        key,
        value,
        headers,
    })
}

/// A varint length (-1 for null) and that many bytes, as a slice of `src`.
#[inline]
fn read_nullable_bytes(
    src: &Bytes,
    buf: &[u8],
    pos: &mut usize,
) -> std::result::Result<Option<Bytes>, &'static str> {
    let len = read_varint(buf, pos)?;
    if len < 0 {
        return if len == -1 {
            Ok(None)
        } else {
            Err("negative length")
        };
    }
    let len = len as usize;
    if len > buf.len() - *pos {
        return Err("length runs past the record");
    }
    let start = *pos;
    *pos += len;
    Ok(Some(src.slice(start..start + len)))
}

#[inline]
fn read_varint(buf: &[u8], pos: &mut usize) -> std::result::Result<i32, &'static str> {
    let mut raw: u32 = 0;
    for i in 0..5 {
        let Some(&byte) = buf.get(*pos) else {
            return Err("varint runs past the end");
        };
        *pos += 1;
        raw |= u32::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i32 ^ -((raw & 1) as i32));
        }
    }
    Err("varint longer than 5 bytes")
}

#[inline]
fn read_varlong(buf: &[u8], pos: &mut usize) -> std::result::Result<i64, &'static str> {
    let mut raw: u64 = 0;
    for i in 0..10 {
        let Some(&byte) = buf.get(*pos) else {
            return Err("varlong runs past the end");
        };
        *pos += 1;
        raw |= u64::from(byte & 0x7f) << (7 * i);
        if byte & 0x80 == 0 {
            return Ok((raw >> 1) as i64 ^ -((raw & 1) as i64));
        }
    }
    Err("varlong longer than 10 bytes")
}

fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn be_u32(b: &[u8], at: usize) -> u32 {
    be_i32(b, at) as u32
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(bytes)
}

/// How much a compressed records section of `compressed_len` bytes may inflate to.
fn inflate_limit(compressed_len: usize) -> usize {
    INFLATE_FLOOR.max(
        compressed_len
            .saturating_mul(INFLATE_RATIO)
            .saturating_add(INFLATE_SLACK),
    )
}

/// Decompresses a batch's records section, refusing to produce more than `limit` bytes.
fn decompress(
    compression: Compression,
    input: &[u8],
    limit: usize,
) -> std::result::Result<Vec<u8>, String> {
    match compression {
        Compression::None => Ok(input.to_vec()),
        #[cfg(feature = "gzip")]
        Compression::Gzip => read_bounded(flate2::read::MultiGzDecoder::new(input), input, limit),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy_decompress(input, limit),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => read_bounded(lz4_flex::frame::FrameDecoder::new(input), input, limit),
        #[cfg(feature = "zstd")]
        Compression::Zstd => {
            let decoder =
                zstd::stream::read::Decoder::with_buffer(input).map_err(|e| e.to_string())?;
            read_bounded(decoder, input, limit)
        }
        #[allow(unreachable_patterns)] // reached only when a codec's feature is off
        other => {
            let _ = (input, limit); // unused when every codec is off
            Err(other.unavailable_reason())
        }
    }
}

#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
fn read_bounded<R: Read>(
    reader: R,
    input: &[u8],
    limit: usize,
) -> std::result::Result<Vec<u8>, String> {
    // A guess from the input's real size, not from anything the input claims.
    let mut out = Vec::with_capacity(input.len().saturating_mul(4).min(limit));
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| e.to_string())?;
    if out.len() > limit {
        return Err(format!(
            "output exceeds {limit} bytes ({} compressed); refusing to inflate further",
            input.len()
        ));
    }
    Ok(out)
}

/// Snappy as Kafka producers write it: xerial-framed by the Java client, raw by some others.
/// snappy-java reads anything without the xerial magic as raw snappy, and so does this.
#[cfg(feature = "snappy")]
fn snappy_decompress(input: &[u8], limit: usize) -> std::result::Result<Vec<u8>, String> {
    let mut decoder = snap::raw::Decoder::new();
    let too_large = || format!("output exceeds {limit} bytes; refusing to inflate further");
    if input.len() < XERIAL_HEADER_LEN || !input.starts_with(XERIAL_MAGIC) {
        let len = snap::raw::decompress_len(input).map_err(|e| e.to_string())?;
        if len > limit {
            return Err(too_large());
        }
        return decoder.decompress_vec(input).map_err(|e| e.to_string());
    }
    let mut out = Vec::new();
    let mut pos = XERIAL_HEADER_LEN;
    while pos < input.len() {
        if input.len() - pos < 4 {
            return Err("truncated xerial block length".into());
        }
        let block_len = be_i32(input, pos);
        pos += 4;
        if block_len < 0 || block_len as usize > input.len() - pos {
            return Err(format!(
                "xerial block length {block_len} with {} bytes left",
                input.len() - pos
            ));
        }
        let block = &input[pos..pos + block_len as usize];
        pos += block.len();
        let len = snap::raw::decompress_len(block).map_err(|e| e.to_string())?;
        if len > limit - out.len() {
            return Err(too_large());
        }
        let filled = out.len();
        out.resize(filled + len, 0);
        let written = decoder
            .decompress(block, &mut out[filled..])
            .map_err(|e| e.to_string())?;
        out.truncate(filled + written);
    }
    Ok(out)
}

fn compress(compression: Compression, input: &[u8]) -> std::io::Result<Vec<u8>> {
    match compression {
        Compression::None => Ok(input.to_vec()),
        #[cfg(feature = "gzip")]
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            encoder.write_all(input)?;
            encoder.finish()
        }
        #[cfg(feature = "snappy")]
        Compression::Snappy => {
            let mut encoder = snap::raw::Encoder::new();
            let mut out = Vec::with_capacity(XERIAL_HEADER_LEN + input.len() / 2);
            out.extend_from_slice(XERIAL_MAGIC);
            out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
            out.extend_from_slice(&XERIAL_VERSION.to_be_bytes());
            for chunk in input.chunks(XERIAL_BLOCK_SIZE) {
                let block = encoder.compress_vec(chunk)?;
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            Ok(out)
        }
        #[cfg(feature = "lz4")]
        Compression::Lz4 => {
            // The Java client decompresses each LZ4 block on its own, so blocks must not refer
            // to earlier ones.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_mode(lz4_flex::frame::BlockMode::Independent);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(input)?;
            encoder.finish().map_err(std::io::Error::other)
        }
        // Level 0 is zstd's default (3), which is also Kafka's.
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::bulk::compress(input, 0),
        #[allow(unreachable_patterns)] // reached only when a codec's feature is off
        other => Err(std::io::Error::other(other.unavailable_reason())),
    }
}

/// Builds one record batch for a produce request.
///
/// Records' offsets are not chosen here: offset deltas are 0..n and base_offset is 0 (the broker
/// assigns offsets). The first timestamp is the smallest one pushed, the max timestamp the
/// largest, and timestamp deltas are relative to the first.
pub struct BatchBuilder {
    compression: Compression,
    /// Each record's key, value and headers, encoded back to back: they do not depend on the
    /// timestamps, which are only known in full at `finish`.
    tails: Vec<u8>,
    /// Each record's timestamp and the end of its part of `tails`.
    records: Vec<(i64, usize)>,
    min_timestamp: i64,
    max_timestamp: i64,
    estimated_size: usize,
    /// A key, value or header longer than Kafka's i32 lengths; reported by `finish`.
    oversized: bool,
}

impl BatchBuilder {
    pub fn new(compression: Compression) -> Self {
        BatchBuilder {
            compression,
            tails: Vec::new(),
            records: Vec::new(),
            min_timestamp: i64::MAX,
            max_timestamp: i64::MIN,
            estimated_size: RECORDS_AT,
            oversized: false,
        }
    }

    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        let start = self.tails.len();
        self.put_nullable_bytes(key);
        self.put_nullable_bytes(value);
        self.put_length(headers.len());
        for header in headers {
            self.put_length(header.key.len());
            self.tails.extend_from_slice(header.key.as_bytes());
            self.put_nullable_bytes(header.value.as_deref());
        }
        let tail_len = self.tails.len() - start;
        // The timestamp delta is estimated against the first record; the real base is only
        // known at `finish`.
        let delta = self
            .records
            .first()
            .map_or(0, |&(first, _)| timestamp.wrapping_sub(first));
        let body_len = 1 + varlong_len(delta) + varint_len(self.records.len() as i32) + tail_len;
        self.estimated_size += varint_len(body_len as i32) + body_len;
        self.records.push((timestamp, self.tails.len()));
        self.min_timestamp = self.min_timestamp.min(timestamp);
        self.max_timestamp = self.max_timestamp.max(timestamp);
    }

    /// The uncompressed size of the batch so far, to compare with `batch.size`.
    pub fn estimated_size(&self) -> usize {
        self.estimated_size
    }

    pub fn len(&self) -> usize {
        self.records.len()
    }

    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The encoded batch: producer id, producer epoch, base sequence and partition leader epoch
    /// are -1 (no idempotence), the attributes give only the compression.
    pub fn finish(self) -> Result<Bytes> {
        if self.records.is_empty() {
            return Err(Error::InvalidArgument(
                "a record batch needs at least one record".into(),
            ));
        }
        if self.oversized {
            return Err(Error::InvalidArgument(
                "a key, value or header is longer than Kafka allows (2 GiB)".into(),
            ));
        }
        let count = i32::try_from(self.records.len()).map_err(|_| {
            Error::InvalidArgument(format!("{} records do not fit a batch", self.records.len()))
        })?;
        let mut out = Vec::with_capacity(if self.compression == Compression::None {
            self.estimated_size
        } else {
            RECORDS_AT
        });
        out.resize(RECORDS_AT, 0);
        if self.compression == Compression::None {
            self.encode_records(&mut out)?;
        } else {
            let mut plain = Vec::with_capacity(self.estimated_size - RECORDS_AT);
            self.encode_records(&mut plain)?;
            let compressed = compress(self.compression, &plain).map_err(|e| {
                Error::InvalidArgument(format!(
                    "{} compression of a record batch failed: {e}",
                    self.compression.name()
                ))
            })?;
            out.extend_from_slice(&compressed);
        }
        let batch_length = i32::try_from(out.len() - LOG_OVERHEAD).map_err(|_| {
            Error::InvalidArgument(format!(
                "a record batch of {} bytes is too large",
                out.len()
            ))
        })?;
        let mut header = Vec::with_capacity(RECORDS_AT);
        header.extend_from_slice(&0i64.to_be_bytes());
        header.extend_from_slice(&batch_length.to_be_bytes());
        header.extend_from_slice(&(-1i32).to_be_bytes());
        header.push(MAGIC_V2 as u8);
        header.extend_from_slice(&0u32.to_be_bytes());
        header.extend_from_slice(&self.compression.attribute_bits().to_be_bytes());
        header.extend_from_slice(&(count - 1).to_be_bytes());
        header.extend_from_slice(&self.min_timestamp.to_be_bytes());
        header.extend_from_slice(&self.max_timestamp.to_be_bytes());
        header.extend_from_slice(&(-1i64).to_be_bytes());
        header.extend_from_slice(&(-1i16).to_be_bytes());
        header.extend_from_slice(&(-1i32).to_be_bytes());
        header.extend_from_slice(&count.to_be_bytes());
        out[..RECORDS_AT].copy_from_slice(&header);
        let crc = crc32c::crc32c(&out[ATTRIBUTES_AT..]);
        out[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
        Ok(Bytes::from(out))
    }

    fn encode_records(&self, out: &mut Vec<u8>) -> Result<()> {
        let mut tail_start = 0;
        for (index, &(timestamp, tail_end)) in self.records.iter().enumerate() {
            let delta = timestamp.checked_sub(self.min_timestamp).ok_or_else(|| {
                Error::InvalidArgument(format!(
                    "timestamps {} and {timestamp} are too far apart for one batch",
                    self.min_timestamp
                ))
            })?;
            let tail = &self.tails[tail_start..tail_end];
            let body_len = 1 + varlong_len(delta) + varint_len(index as i32) + tail.len();
            let body_len = i32::try_from(body_len).map_err(|_| {
                Error::InvalidArgument(format!("a record of {body_len} bytes is too large"))
            })?;
            put_varint(out, body_len);
            out.push(0);
            put_varlong(out, delta);
            put_varint(out, index as i32);
            out.extend_from_slice(tail);
            tail_start = tail_end;
        }
        Ok(())
    }

    fn put_length(&mut self, len: usize) {
        match i32::try_from(len) {
            Ok(len) => put_varint(&mut self.tails, len),
            Err(_) => self.oversized = true,
        }
    }

    fn put_nullable_bytes(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            None => put_varint(&mut self.tails, -1),
            Some(bytes) => {
                self.put_length(bytes.len());
                self.tails.extend_from_slice(bytes);
            }
        }
    }
}

fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

fn put_unsigned_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_unsigned_varint(out, zigzag32(v));
}

fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_unsigned_varint(out, zigzag64(v));
}

fn unsigned_varint_len(v: u64) -> usize {
    // Seven bits a byte, at least one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

fn varint_len(v: i32) -> usize {
    unsigned_varint_len(zigzag32(v))
}

fn varlong_len(v: i64) -> usize {
    unsigned_varint_len(zigzag64(v))
}

#[cfg(test)]
mod tests {
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

    #[test]
    fn round_trip_every_codec() {
        for compression in CODECS {
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
            assert_eq!(b.timestamp_type, TimestampType::CreateTime);
            assert!(!b.is_control && !b.is_transactional);
            assert_eq!(b.records.len(), expected.len());
            for (i, (record, (ts, key, value, headers))) in
                b.records.iter().zip(expected).enumerate()
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
        for compression in CODECS {
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
            let records = &decoded.batches[0].records;
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
        let records = &decoded.batches[0].records;
        assert_eq!(records[0].timestamp, 1003);
        assert_eq!(records[1].offset, 1);
        assert_eq!(records[1].headers, vec![header("h", None)]);
    }

    #[test]
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
                    assert_eq!(b.records.len(), 3);
                }
            }
        }
    }

    #[test]
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
        assert_eq!(decoded.batches[0].records.len(), sample_records().len());
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
        assert_eq!(b.records[0].offset, 42);
        assert_eq!(
            b.records[0].timestamp, 2000,
            "LogAppendTime uses maxTimestamp"
        );
        assert_eq!(b.records[0].key.as_deref(), Some(&[0, 0, 0, 1][..]));
    }

    #[test]
    fn empty_batches_are_kept() {
        // Compaction can leave a batch with no records; its last offset still moves the position.
        let mut batch = raw_batch(7, 0, 0, &[]);
        batch[LAST_OFFSET_DELTA_AT..LAST_OFFSET_DELTA_AT + 4].copy_from_slice(&3i32.to_be_bytes());
        fix_crc(&mut batch);
        let decoded = decode(batch, true).unwrap();
        assert!(decoded.batches[0].records.is_empty());
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
        for r in &decoded.batches[0].records {
            for b in [&r.key, &r.value].into_iter().flatten() {
                if !b.is_empty() {
                    assert!(range.contains(&(b.as_ptr() as usize)));
                }
            }
        }
    }

    #[test]
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
        let records = &decoded.batches[0].records;
        assert_eq!(records.len(), 3);
        assert_eq!(records[2].value.as_deref(), Some(&b"hello"[..]));
        assert_eq!(records[2].timestamp, 1002);
    }

    #[test]
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
    fn decompression_is_bounded() {
        let plain = vec![0u8; 2 << 20];
        for compression in CODECS {
            if compression == Compression::None {
                continue;
            }
            let compressed = compress(compression, &plain).unwrap();
            assert_eq!(
                decompress(compression, &compressed, 2 << 20).unwrap(),
                plain
            );
            let err = decompress(compression, &compressed, 1 << 20).unwrap_err();
            assert!(err.contains("exceeds"), "{compression:?}: {err}");
        }
        assert_eq!(inflate_limit(10), INFLATE_FLOOR);
        assert_eq!(inflate_limit(8 << 20), (8 << 20) * 64 + (1 << 20));
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
        let fetch: Vec<u8> = CODECS
            .iter()
            .enumerate()
            .flat_map(|(i, &c)| at_offset(&build_small(c), i as i64 * 10))
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
            let _ = decode_batches(data.clone(), true);
            let _ = decode_batches(data, false);
        }
    }
}
