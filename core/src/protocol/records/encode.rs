//! Encoding one record batch for a produce request.
use super::*;

/// Builds one record batch for a produce request.
///
/// Records' offsets are not chosen here: offset deltas are 0..n and base_offset is 0 (the broker
/// assigns offsets). The first timestamp is the smallest one pushed, the max timestamp the
/// largest, and timestamp deltas are relative to the first.
pub struct BatchBuilder {
    pub(super) compression: Compression,
    /// Each record's key, value and headers, encoded back to back: they do not depend on the
    /// timestamps, which are only known in full at `finish`.
    pub(super) tails: Vec<u8>,
    /// Each record's timestamp and the end of its part of `tails`.
    pub(super) records: Vec<(i64, usize)>,
    pub(super) min_timestamp: i64,
    pub(super) max_timestamp: i64,
    pub(super) estimated_size: usize,
    /// A key, value or header longer than Kafka's i32 lengths; reported by `finish`.
    pub(super) oversized: bool,
}

impl BatchBuilder {
    /// An empty batch whose records section `finish` compresses with `compression`.
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

    /// Appends a record with `timestamp` (milliseconds since the epoch). A key, value or header
    /// too long for Kafka's lengths makes `finish` fail.
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

    /// The number of records pushed.
    // Read by the unit tests only.
    #[cfg_attr(not(feature = "unstable-fuzzing"), allow(dead_code))]
    pub fn len(&self) -> usize {
        self.records.len()
    }

    /// Whether no record was pushed yet.
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The encoded batch: producer id, producer epoch, base sequence and partition leader epoch
    /// are -1 (no idempotence; [`set_producer_state`] writes the first three of an idempotent
    /// batch), the attributes give only the compression.
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

    pub(super) fn encode_records(&self, out: &mut Vec<u8>) -> Result<()> {
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

    pub(super) fn put_length(&mut self, len: usize) {
        match i32::try_from(len) {
            Ok(len) => put_varint(&mut self.tails, len),
            Err(_) => self.oversized = true,
        }
    }

    pub(super) fn put_nullable_bytes(&mut self, bytes: Option<&[u8]>) {
        match bytes {
            None => put_varint(&mut self.tails, -1),
            Some(bytes) => {
                self.put_length(bytes.len());
                self.tails.extend_from_slice(bytes);
            }
        }
    }
}

/// `batch` (one encoded v2 batch, as [`BatchBuilder::finish`] gives it) with producer id
/// `producer_id`, epoch `producer_epoch` and base sequence `base_sequence` in its header, and its
/// CRC computed again (it covers them). An idempotent batch gets them when it is first sent, and
/// new ones when an epoch bump restarts its partition's sequences, as the Java producer rewrites
/// a batch's header (`ProducerBatch.resetProducerState`).
pub fn set_producer_state(
    batch: &[u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Result<Bytes> {
    stamp(batch, producer_id, producer_epoch, base_sequence, false)
}

/// As [`set_producer_state`], and marks the batch transactional (attribute bit 4): a batch a
/// transactional producer writes inside a transaction, which read_committed consumers hold back
/// until the transaction's COMMIT or ABORT marker.
pub fn set_transactional_state(
    batch: &[u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
) -> Result<Bytes> {
    stamp(batch, producer_id, producer_epoch, base_sequence, true)
}

fn stamp(
    batch: &[u8],
    producer_id: i64,
    producer_epoch: i16,
    base_sequence: i32,
    transactional: bool,
) -> Result<Bytes> {
    if batch.len() < RECORDS_AT || batch[MAGIC_AT] as i8 != MAGIC_V2 {
        return Err(Error::InvalidArgument(format!(
            "a v2 record batch of at least {RECORDS_AT} bytes was expected, got {} bytes",
            batch.len()
        )));
    }
    let mut out = batch.to_vec();
    out[PRODUCER_ID_AT..PRODUCER_EPOCH_AT].copy_from_slice(&producer_id.to_be_bytes());
    out[PRODUCER_EPOCH_AT..BASE_SEQUENCE_AT].copy_from_slice(&producer_epoch.to_be_bytes());
    out[BASE_SEQUENCE_AT..RECORD_COUNT_AT].copy_from_slice(&base_sequence.to_be_bytes());
    if transactional {
        let attributes = i16::from_be_bytes([out[ATTRIBUTES_AT], out[ATTRIBUTES_AT + 1]]);
        let attributes = attributes | TRANSACTIONAL_MASK;
        out[ATTRIBUTES_AT..ATTRIBUTES_AT + 2].copy_from_slice(&attributes.to_be_bytes());
    }
    let crc = crc32c::crc32c(&out[ATTRIBUTES_AT..]);
    out[CRC_AT..ATTRIBUTES_AT].copy_from_slice(&crc.to_be_bytes());
    Ok(Bytes::from(out))
}

pub(super) fn zigzag32(v: i32) -> u64 {
    u64::from(((v << 1) ^ (v >> 31)) as u32)
}

pub(super) fn zigzag64(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub(super) fn put_unsigned_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

pub(super) fn put_varint(out: &mut Vec<u8>, v: i32) {
    put_unsigned_varint(out, zigzag32(v));
}

pub(super) fn put_varlong(out: &mut Vec<u8>, v: i64) {
    put_unsigned_varint(out, zigzag64(v));
}

pub(super) fn unsigned_varint_len(v: u64) -> usize {
    // Seven bits a byte, at least one byte.
    (64 - (v | 1).leading_zeros() as usize).div_ceil(7)
}

pub(super) fn varint_len(v: i32) -> usize {
    unsigned_varint_len(zigzag32(v))
}

pub(super) fn varlong_len(v: i64) -> usize {
    unsigned_varint_len(zigzag64(v))
}
