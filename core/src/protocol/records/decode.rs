//! Decoding the records field of a fetch answer: batch framing, the fixed batch header, CRC
//! checks, and the records inside (after decompression).
use std::sync::LazyLock;

use super::*;

/// Decodes the record batches of a fetch response's records field.
///
/// A fetch whose only batch is truncated gives no batches and `truncated = true`: the batch is
/// larger than the fetch size, which the caller has to deal with. Its buffers come from the
/// process' pools; a consumer decodes into its own ([`decode_batches_in`]).
// Used by the tests and the fuzz targets (public with `unstable-fuzzing`).
#[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(dead_code))]
pub fn decode_batches(data: Bytes, check_crcs: bool) -> Result<DecodedRecords> {
    decode_batches_in(data, check_crcs, &PROCESS_BATCH_POOLS)
}

/// The process' pools, for batches decoded outside a consumer (the tests, the fuzz targets).
#[cfg_attr(not(any(test, feature = "unstable-fuzzing")), allow(dead_code))]
pub(crate) static PROCESS_BATCH_POOLS: LazyLock<BatchPools> = LazyLock::new(|| BatchPools {
    inflated: crate::buffers::INFLATED.clone(),
    spans: Arc::new(Pool::new()),
});

/// [`decode_batches`] into buffers of `pools` (a consumer's, counted against its
/// `fetch.buffer.max.bytes`).
pub fn decode_batches_in(
    data: Bytes,
    check_crcs: bool,
    pools: &BatchPools,
) -> Result<DecodedRecords> {
    decode_batches_in_where(data, check_crcs, pools, |_| true)
}

/// [`decode_batches_in`], decoding the records of a data batch only when `wanted` says so of it:
/// `wanted` sees every batch once, in order, a data batch before its records are decoded (with
/// none), a control batch whole (its record says its type); a data batch it refuses comes back
/// with its header and no records. A read_committed consumer so skips the records of aborted
/// transactions without reading them, as the Java client skips their batches.
pub fn decode_batches_in_where(
    data: Bytes,
    check_crcs: bool,
    pools: &BatchPools,
    mut wanted: impl FnMut(&Batch) -> bool,
) -> Result<DecodedRecords> {
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
        batches.push(decode_batch_where(
            &data,
            pos..pos + size,
            check_crcs,
            pools,
            &mut wanted,
        )?);
        pos += size;
    }
}

/// Decodes the complete batch at `range` of `data`, its records only if `wanted` (see
/// [`decode_batches_in_where`]).
fn decode_batch_where(
    data: &Bytes,
    range: Range<usize>,
    check_crcs: bool,
    pools: &BatchPools,
    wanted: &mut impl FnMut(&Batch) -> bool,
) -> Result<Batch> {
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
    let is_control = attributes & CONTROL_MASK != 0;
    let head = Batch {
        base_offset,
        last_offset,
        partition_leader_epoch: be_i32(b, 12),
        timestamp_type,
        is_control,
        is_transactional: attributes & TRANSACTIONAL_MASK != 0,
        producer_id: be_i64(b, PRODUCER_ID_AT),
        compression,
        data: Bytes::new(),
        spans: Held::from(Vec::new()),
        inflated_bytes: 0,
    };
    if !is_control && !wanted(&head) {
        return Ok(head);
    }
    let (data, spans, inflated_bytes) = if compression == Compression::None {
        let region = start + RECORDS_AT..start + b.len();
        if record_count > region.len() / MIN_RECORD_SIZE {
            return Err(Error::Corrupt(format!(
                "record batch at offset {base_offset} declares {record_count} records \
                 but holds only {} bytes of records",
                region.len()
            )));
        }
        (
            data.clone(),
            decode_records(data, region, record_count, &ctx, &pools.spans)?,
            0,
        )
    } else {
        if !compression.is_enabled() {
            return Err(compression.disabled_error(base_offset));
        }
        let input = &b[RECORDS_AT..];
        let limit = inflate_limit(input.len());
        let inflated = decompress(compression, input, limit, &pools.inflated).map_err(|e| {
            Error::Corrupt(format!(
                "record batch at offset {base_offset}: {} decompression failed: {e}",
                compression.name()
            ))
        })?;
        let capacity = inflated.capacity();
        // A large buffer goes back to its pool once the batch's last record is dropped.
        let inflated = Pool::bytes(&pools.inflated, inflated);
        let len = inflated.len();
        let spans = decode_records(&inflated, 0..len, record_count, &ctx, &pools.spans)?;
        (inflated, spans, capacity)
    };
    let batch = Batch {
        data,
        spans,
        inflated_bytes,
        ..head
    };
    if is_control {
        // Decoded whatever it says: `wanted` learns of the marker from its record.
        wanted(&batch);
    }
    Ok(batch)
}

pub(super) struct RecordContext {
    pub(super) base_offset: i64,
    pub(super) base_timestamp: i64,
    pub(super) log_append_time: Option<i64>,
}

/// Decodes exactly `count` records that fill `region` of `src`, into a vector of `pool`.
pub(super) fn decode_records(
    src: &Bytes,
    region: Range<usize>,
    count: usize,
    ctx: &RecordContext,
    pool: &Arc<Pool<RecordSpans>>,
) -> Result<Held<RecordSpans>> {
    // A compressed batch's count is not checked against its compressed size, so cap it by the
    // bytes there are; a count that is too large still fails below.
    // A kept vector (see `crate::buffers`), given back when its buffered batch is dropped.
    let mut records = pool.take(count.min(region.len() / MIN_RECORD_SIZE));
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
    Ok(Pool::hold(pool, records))
}

/// Decodes one record: `buf` ends where the record ends; `src` is the buffer `buf` is the start
/// of, to slice header values from (keys and values stay spans of it).
#[inline]
pub(super) fn decode_record(
    src: &Bytes,
    buf: &[u8],
    mut pos: usize,
    ctx: &RecordContext,
) -> std::result::Result<RecordSpans, &'static str> {
    // The record attributes byte is unused in magic v2.
    if pos == buf.len() {
        return Err("record is empty");
    }
    pos += 1;
    let timestamp_delta = read_varlong(buf, &mut pos)?;
    let offset_delta = read_varint(buf, &mut pos)?;
    let key = read_nullable_span(buf, &mut pos)?;
    let value = read_nullable_span(buf, &mut pos)?;
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
    Ok(RecordSpans {
        offset: ctx.base_offset.wrapping_add(i64::from(offset_delta)),
        timestamp,
        key,
        value,
        headers,
    })
}

/// A varint length (-1 for null) and that many bytes, as a slice of `src`.
#[inline]
pub(super) fn read_nullable_bytes(
    src: &Bytes,
    buf: &[u8],
    pos: &mut usize,
) -> std::result::Result<Option<Bytes>, &'static str> {
    Ok(read_nullable_span(buf, pos)?.map(|s| s.bytes(src)))
}

/// A varint length (-1 for null) and that many bytes, as a span of `buf`.
#[inline]
pub(super) fn read_nullable_span(
    buf: &[u8],
    pos: &mut usize,
) -> std::result::Result<Option<Span>, &'static str> {
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
    // `buf` is at most one frame or one inflated batch, both below 4 GiB (see `Span`).
    Ok(Some(Span {
        start: start as u32,
        len: len as u32,
    }))
}

#[inline]
pub(super) fn read_varint(buf: &[u8], pos: &mut usize) -> std::result::Result<i32, &'static str> {
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
pub(super) fn read_varlong(buf: &[u8], pos: &mut usize) -> std::result::Result<i64, &'static str> {
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

pub(super) fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

pub(super) fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

pub(super) fn be_u32(b: &[u8], at: usize) -> u32 {
    be_i32(b, at) as u32
}

pub(super) fn be_i64(b: &[u8], at: usize) -> i64 {
    let mut bytes = [0; 8];
    bytes.copy_from_slice(&b[at..at + 8]);
    i64::from_be_bytes(bytes)
}
