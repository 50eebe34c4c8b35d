//! Record batch v2 encoding (stand-in: uncompressed batches only).
//!
//! Layout of a v2 batch: baseOffset i64, batchLength i32, partitionLeaderEpoch i32, magic i8 (2),
//! crc u32 (CRC-32C over attributes..end), attributes i16, lastOffsetDelta i32, baseTimestamp
//! i64, maxTimestamp i64, producerId i64, producerEpoch i16, baseSequence i32, recordCount i32,
//! then the records, each with zigzag varint lengths.
use bytes::{BufMut, Bytes, BytesMut};

use crate::error::{Error, Result};

/// The bytes of a v2 batch header, before the first record.
const BATCH_HEADER_BYTES: usize = 61;
/// Offset of the attributes field: where the CRC starts.
const CRC_START: usize = 21;

/// Compression codec of a batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    /// Parses a `compression.type` value.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "none" | "" => Some(Compression::None),
            "gzip" => Some(Compression::Gzip),
            "snappy" => Some(Compression::Snappy),
            "lz4" => Some(Compression::Lz4),
            "zstd" => Some(Compression::Zstd),
            _ => None,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
            Compression::Snappy => "snappy",
            Compression::Lz4 => "lz4",
            Compression::Zstd => "zstd",
        }
    }
}

/// A record header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub key: String,
    pub value: Option<Bytes>,
}

/// Builds one v2 record batch.
#[derive(Debug)]
pub struct BatchBuilder {
    compression: Compression,
    records: BytesMut,
    count: usize,
    base_timestamp: i64,
    max_timestamp: i64,
}

fn put_varint(buf: &mut BytesMut, v: i32) {
    put_varlong(buf, v as i64);
}

fn put_varlong(buf: &mut BytesMut, v: i64) {
    let mut z = ((v << 1) ^ (v >> 63)) as u64;
    while z >= 0x80 {
        buf.put_u8((z as u8) | 0x80);
        z >>= 7;
    }
    buf.put_u8(z as u8);
}

fn put_bytes(buf: &mut BytesMut, b: Option<&[u8]>) {
    match b {
        None => put_varint(buf, -1),
        Some(b) => {
            put_varint(buf, b.len() as i32);
            buf.put_slice(b);
        }
    }
}

impl BatchBuilder {
    pub fn new(compression: Compression) -> BatchBuilder {
        BatchBuilder {
            compression,
            records: BytesMut::new(),
            count: 0,
            base_timestamp: 0,
            max_timestamp: i64::MIN,
        }
    }

    /// Appends a record. The first record's timestamp is the batch's base timestamp.
    pub fn push(
        &mut self,
        timestamp: i64,
        key: Option<&[u8]>,
        value: Option<&[u8]>,
        headers: &[Header],
    ) {
        if self.count == 0 {
            self.base_timestamp = timestamp;
        }
        self.max_timestamp = self.max_timestamp.max(timestamp);
        let mut body =
            BytesMut::with_capacity(16 + key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len()));
        body.put_i8(0);
        put_varlong(&mut body, timestamp.wrapping_sub(self.base_timestamp));
        put_varint(&mut body, self.count as i32);
        put_bytes(&mut body, key);
        put_bytes(&mut body, value);
        put_varint(&mut body, headers.len() as i32);
        for h in headers {
            put_bytes(&mut body, Some(h.key.as_bytes()));
            put_bytes(&mut body, h.value.as_deref());
        }
        put_varint(&mut self.records, body.len() as i32);
        self.records.put_slice(&body);
        self.count += 1;
    }

    /// The size of the batch if it were finished now (uncompressed).
    pub fn estimated_size(&self) -> usize {
        BATCH_HEADER_BYTES + self.records.len()
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The complete batch: base offset 0, no producer id.
    pub fn finish(self) -> Result<Bytes> {
        if self.compression != Compression::None {
            return Err(Error::InvalidArgument(format!(
                "compression.type={} is not supported by this build",
                self.compression.name()
            )));
        }
        let mut buf = BytesMut::with_capacity(BATCH_HEADER_BYTES + self.records.len());
        let total = BATCH_HEADER_BYTES + self.records.len();
        buf.put_i64(0); // base offset
        buf.put_i32((total - 12) as i32); // batch length
        buf.put_i32(-1); // partition leader epoch
        buf.put_i8(2); // magic
        buf.put_u32(0); // crc, filled below
        buf.put_i16(0); // attributes: no compression, create time
        buf.put_i32(self.count.saturating_sub(1) as i32); // last offset delta
        let max_ts = if self.count == 0 {
            self.base_timestamp
        } else {
            self.max_timestamp
        };
        buf.put_i64(self.base_timestamp);
        buf.put_i64(max_ts);
        buf.put_i64(-1); // producer id
        buf.put_i16(-1); // producer epoch
        buf.put_i32(-1); // base sequence
        buf.put_i32(self.count as i32);
        buf.put_slice(&self.records);
        let crc = crc32c::crc32c(&buf[CRC_START..]);
        buf[17..21].copy_from_slice(&crc.to_be_bytes());
        Ok(buf.freeze())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn encodes_a_v2_batch_with_a_valid_crc() {
        let mut b = BatchBuilder::new(Compression::None);
        b.push(1000, Some(b"k"), Some(b"value"), &[]);
        b.push(
            1005,
            None,
            Some(b"v2"),
            &[Header {
                key: "h".into(),
                value: Some(Bytes::from_static(b"x")),
            }],
        );
        assert_eq!(b.len(), 2);
        let est = b.estimated_size();
        let batch = b.finish().unwrap();
        assert_eq!(batch.len(), est);
        assert_eq!(&batch[0..8], &0i64.to_be_bytes());
        let len = i32::from_be_bytes(batch[8..12].try_into().unwrap());
        assert_eq!(len as usize, batch.len() - 12);
        assert_eq!(batch[16], 2);
        let crc = u32::from_be_bytes(batch[17..21].try_into().unwrap());
        assert_eq!(crc, crc32c::crc32c(&batch[21..]));
        assert_eq!(i32::from_be_bytes(batch[23..27].try_into().unwrap()), 1);
        assert_eq!(i64::from_be_bytes(batch[27..35].try_into().unwrap()), 1000);
        assert_eq!(i64::from_be_bytes(batch[35..43].try_into().unwrap()), 1005);
        assert_eq!(i32::from_be_bytes(batch[57..61].try_into().unwrap()), 2);
        // First record: length 12 (attrs, tsDelta 0, offDelta 0, key 1+1, value 1+5, headers 0).
        assert_eq!(
            &batch[61..],
            {
                let mut e = vec![24u8, 0, 0, 0, 2, b'k', 10];
                e.extend_from_slice(b"value");
                e.push(0);
                // Second record: attrs, tsDelta 5 (zigzag 10), offDelta 1 (2), key null (1),
                // value len 2 (4) "v2", 1 header (2): key len 1 (2) "h", value len 1 (2) "x".
                let rec = [0u8, 10, 2, 1, 4, b'v', b'2', 2, 2, b'h', 2, b'x'];
                e.push((rec.len() as u8) * 2);
                e.extend_from_slice(&rec);
                e
            }
            .as_slice()
        );
    }

    #[test]
    fn compressed_batches_are_refused() {
        let mut b = BatchBuilder::new(Compression::Zstd);
        b.push(0, None, Some(b"x"), &[]);
        assert!(b.finish().is_err());
        assert_eq!(Compression::parse("LZ4"), Some(Compression::Lz4));
        assert_eq!(Compression::parse("brotli"), None);
    }
}
