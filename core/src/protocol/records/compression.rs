//! The codecs of a batch's records section: gzip, snappy (raw and the xerial framing the Java
//! producer writes), lz4 frames and zstd, with decompression bounded against bombs.
#[cfg(feature = "gzip")]
use std::io::Read;
#[cfg(any(feature = "gzip", feature = "lz4"))]
use std::io::Write;

use super::*;
use crate::buffers::Pool;
#[cfg(test)]
pub(super) use crate::buffers::INFLATED;

/// Decompression may always produce this much: real batches of very compressible data (zeros,
/// repeated JSON) reach ratios far above the proportional bound below.
pub(super) const INFLATE_FLOOR: usize = 256 << 20;
/// Above the floor, output may be this many times the compressed input (plus slack); anything more
/// is taken for a decompression bomb.
pub(super) const INFLATE_RATIO: usize = 64;
pub(super) const INFLATE_SLACK: usize = 1 << 20;

/// The xerial snappy-java stream header: magic, then version and minimum compatible version.
#[cfg(feature = "snappy")]
pub(super) const XERIAL_MAGIC: &[u8; 8] = b"\x82SNAPPY\x00";
#[cfg(feature = "snappy")]
pub(super) const XERIAL_HEADER_LEN: usize = 16;
#[cfg(feature = "snappy")]
pub(super) const XERIAL_VERSION: i32 = 1;
#[cfg(feature = "snappy")]
/// snappy-java's default block size, which the Java producer uses.
pub(super) const XERIAL_BLOCK_SIZE: usize = 32 * 1024;

/// The compression codec of a batch (the low three bits of its attributes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// `none`: records as they are.
    None,
    /// `gzip`.
    Gzip,
    /// `snappy`: written in the xerial snappy-java framing, as the Java client does; raw
    /// snappy is read too.
    Snappy,
    /// `lz4`, in the LZ4 frame format.
    Lz4,
    /// `zstd`.
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

    /// Whether this build of lagless reads and writes the codec: `none` always, the others when
    /// the lagless crate's cargo feature of the same name (`gzip`, `snappy`, `lz4`, `zstd`, all
    /// on by default) is on.
    ///
    /// ```
    /// use lagless::Compression;
    ///
    /// assert!(Compression::None.is_enabled());
    /// // The default features build every codec in.
    /// assert_eq!(Compression::Zstd.is_enabled(), cfg!(feature = "zstd"));
    /// ```
    pub fn is_enabled(self) -> bool {
        match self {
            Compression::None => true,
            Compression::Gzip => cfg!(feature = "gzip"),
            Compression::Snappy => cfg!(feature = "snappy"),
            Compression::Lz4 => cfg!(feature = "lz4"),
            Compression::Zstd => cfg!(feature = "zstd"),
        }
    }

    /// The codec a `compression.type` value names. An unknown name, or a codec this build
    /// leaves out, is a config error naming the key (and the cargo feature that builds it in),
    /// so a producer is refused when it is created rather than at its first batch.
    pub(crate) fn from_config_value(value: &str) -> Result<Self> {
        let codec = Compression::parse(value).ok_or_else(|| {
            Error::config(
                "compression.type",
                format!("`{value}` is not one of none, gzip, snappy, lz4, zstd"),
            )
        })?;
        if !codec.is_enabled() {
            return Err(Error::config(
                "compression.type",
                format!(
                    "`{value}` is not built into this lagless: turn on the lagless crate's `{}` \
                     feature (on by default), or choose another codec",
                    codec.name()
                ),
            ));
        }
        Ok(codec)
    }

    /// The error for a batch compressed with a codec this build leaves out. Reading it needs the
    /// codec, so the batch cannot be skipped: its records would be lost to the application.
    pub(super) fn disabled_error(self, base_offset: i64) -> Error {
        Error::Corrupt(format!(
            "record batch at offset {base_offset} is compressed with {name}, which this build of \
             lagless leaves out: turn on the lagless crate's `{name}` feature (on by default)",
            name = self.name()
        ))
    }

    pub(super) fn attribute_bits(self) -> i16 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }
}

/// No batch inflates past this: record spans ([`Span`]) are 32-bit. The ratio bound passes it
/// only for a compressed section over 64 MiB (a frame is at most 256 MiB).
pub(super) const INFLATE_MAX: usize = u32::MAX as usize;

/// How much a compressed records section of `compressed_len` bytes may inflate to.
pub(super) fn inflate_limit(compressed_len: usize) -> usize {
    INFLATE_FLOOR
        .max(
            compressed_len
                .saturating_mul(INFLATE_RATIO)
                .saturating_add(INFLATE_SLACK),
        )
        .min(INFLATE_MAX)
}

/// Decompresses a batch's records section, refusing to produce more than `limit` bytes.
// Built without any codec, only `none` is left, and it has no limit to keep.
#[cfg_attr(
    not(any(
        feature = "gzip",
        feature = "snappy",
        feature = "lz4",
        feature = "zstd"
    )),
    allow(unused_variables)
)]
pub(super) fn decompress(
    compression: Compression,
    input: &[u8],
    limit: usize,
    pool: &Pool<u8>,
) -> std::result::Result<Vec<u8>, String> {
    match compression {
        Compression::None => Ok(input.to_vec()),
        #[cfg(feature = "gzip")]
        Compression::Gzip => gzip_decompress(input, limit, pool),
        #[cfg(feature = "snappy")]
        Compression::Snappy => snappy_decompress(input, limit, pool),
        #[cfg(feature = "lz4")]
        Compression::Lz4 => lz4_decompress(input, limit, pool),
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd_decompress(input, limit, pool),
        // A codec whose feature is off: the batch decoder refuses it before asking.
        #[allow(unreachable_patterns)]
        codec => Err(format!("the {} codec is not built in", codec.name())),
    }
}

/// Decompresses a records section of gzip members into a buffer of `pool` sized from the last
/// member's trailer (see [`gzip_output_guess`]), so that it is neither grown by doubling while
/// read nor far larger than the output: a buffer grown by doubling is kept by the pool at up to
/// twice what its batch needed (1 KB records: peak RSS 46-52 MiB, 33-34 sized from the trailer).
#[cfg(feature = "gzip")]
pub(super) fn gzip_decompress(
    input: &[u8],
    limit: usize,
    pool: &Pool<u8>,
) -> std::result::Result<Vec<u8>, String> {
    let mut out = pool.take(gzip_output_guess(input).min(limit));
    // One byte past the limit tells a bomb from an output of exactly `limit` bytes. When the
    // output fills the buffer exactly, `read_to_end` probes for the end with a small read before
    // it grows the buffer.
    flate2::bufread::MultiGzDecoder::new(input)
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

/// The size a gzip section inflates to, as its last member's trailer states it (ISIZE: the
/// member's output size modulo 2^32, in the last four bytes, RFC 1952 2.3.1). Kafka producers
/// write one member per batch, so that is the section's size. A claim from the wire, used only
/// to size a buffer: the caller bounds it by the inflate limit, and an output larger than the
/// claim (several members, or a false trailer) grows the buffer as it is read. Four times the
/// input when there is no trailer to read.
#[cfg(feature = "gzip")]
fn gzip_output_guess(input: &[u8]) -> usize {
    match input.last_chunk::<4>() {
        Some(&isize) if input.len() >= GZIP_MIN_MEMBER => u32::from_le_bytes(isize) as usize,
        _ => input.len().saturating_mul(4),
    }
}

/// A gzip member's header (10 bytes) and trailer (8 bytes): anything shorter has no trailer.
#[cfg(feature = "gzip")]
const GZIP_MIN_MEMBER: usize = 18;

/// Decompresses a records section of zstd frames straight into the output's spare capacity.
///
/// A zstd decompression context is a large allocation with a costly set-up (`ZSTD_createDCtx`
/// took 8% of the CPU of reading 1 KB records when every batch made one), so each thread keeps
/// one and resets it per batch; and the output grows without being zero-filled first.
#[cfg(feature = "zstd")]
pub(super) fn zstd_decompress(
    input: &[u8],
    limit: usize,
    pool: &Pool<u8>,
) -> std::result::Result<Vec<u8>, String> {
    use std::cell::RefCell;
    use zstd::zstd_safe::{get_error_name, DCtx, InBuffer, OutBuffer, ResetDirective};

    thread_local! {
        static CONTEXT: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
    }
    if input.is_empty() {
        return Ok(Vec::new());
    }
    let zstd_error = |code| format!("zstd: {}", get_error_name(code));
    CONTEXT.with(|context| {
        let mut context = context.borrow_mut();
        let context = context.get_or_insert_with(DCtx::create);
        // A batch that failed half-way leaves the context mid-frame.
        context
            .reset(ResetDirective::SessionOnly)
            .map_err(zstd_error)?;
        let mut out = pool.take(input.len().saturating_mul(4).min(limit));
        let mut src = InBuffer::around(input);
        loop {
            if out.len() == out.capacity() {
                // Room up to one byte past the limit: filling that byte tells a bomb from an
                // output of exactly `limit` bytes.
                let more = out.capacity().max(64 << 10).min(limit + 1 - out.len());
                if more == 0 {
                    break;
                }
                out.reserve_exact(more);
            }
            let before = (src.pos(), out.len());
            let len = out.len();
            let frame_left = context
                .decompress_stream(&mut OutBuffer::around_pos(&mut out, len), &mut src)
                .map_err(zstd_error)?;
            if src.pos() == input.len() {
                if frame_left == 0 {
                    break;
                }
                if (src.pos(), out.len()) == before {
                    return Err(format!("zstd frame truncated at byte {}", input.len()));
                }
            }
        }
        if out.len() > limit {
            return Err(format!(
                "output exceeds {limit} bytes ({} compressed); refusing to inflate further",
                input.len()
            ));
        }
        Ok(out)
    })
}

/// The LZ4 frame format's magic number (lz4_Frame_format.md), little-endian on the wire.
#[cfg(feature = "lz4")]
const LZ4_FRAME_MAGIC: u32 = 0x184D_2204;
/// Skippable frames have a magic number in 0x184D2A50..=0x184D2A5F and carry no data.
#[cfg(feature = "lz4")]
const LZ4_SKIPPABLE_MAGIC: u32 = 0x184D_2A50;
/// How far back a match may reach, into earlier blocks when blocks are linked.
#[cfg(feature = "lz4")]
const LZ4_WINDOW: usize = 64 << 10;

/// Decompresses a records section of LZ4 frames (Kafka producers write one per batch) block by
/// block, straight into one output buffer.
///
/// lz4_flex's `FrameDecoder` is an `io::Read`: it decodes each block into a buffer of its own and
/// then copies it into the caller's, which `read_to_end` has zero-filled first. On batches of
/// 1 KB records the zero-filling, the copy and the page faults of the over-sized output took as
/// much CPU as the decoding itself. The frame around the blocks is a few header bytes, so lagless
/// reads it and hands each block to lz4_flex's block decoder. Checksums inside the frame are
/// skipped, as the Java client's reader skips them: the batch's CRC32C already covers every
/// compressed byte (`check.crcs`).
#[cfg(feature = "lz4")]
pub(super) fn lz4_decompress(
    input: &[u8],
    limit: usize,
    pool: &Pool<u8>,
) -> std::result::Result<Vec<u8>, String> {
    // A kept buffer, written over (see `crate::buffers`): with room for the section at the ratio
    // batches of small records reach, and more as blocks need it.
    let mut out = pool.take_overwritable(input.len().saturating_mul(4).min(limit));
    let (mut pos, mut filled) = (0, 0);
    // A reader of LZ4 frames reads concatenated frames as one stream; so does this.
    while pos < input.len() {
        pos = lz4_frame(input, pos, &mut out, &mut filled, limit)?;
    }
    out.truncate(filled);
    Ok(out)
}

/// Decodes the frame that starts at `pos` into `out` from `filled` on (the bytes of `out` past
/// `filled` are there to be written over); returns where the next frame begins.
#[cfg(feature = "lz4")]
fn lz4_frame(
    input: &[u8],
    mut pos: usize,
    out: &mut Vec<u8>,
    filled: &mut usize,
    limit: usize,
) -> std::result::Result<usize, String> {
    let bytes = |at: usize, n: usize| {
        input
            .get(at..at.saturating_add(n))
            .ok_or_else(|| format!("lz4 frame truncated at byte {at} of {}", input.len()))
    };
    let le_u32 = |at: usize| bytes(at, 4).map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]));
    let too_large = || format!("output exceeds {limit} bytes; refusing to inflate further");

    let magic = le_u32(pos)?;
    if magic & 0xFFFF_FFF0 == LZ4_SKIPPABLE_MAGIC {
        let size = le_u32(pos + 4)? as usize;
        bytes(pos + 8, size)?;
        return Ok(pos + 8 + size);
    }
    if magic != LZ4_FRAME_MAGIC {
        return Err(format!("not an lz4 frame (magic number {magic:#010x})"));
    }
    let descriptor = bytes(pos + 4, 2)?;
    let (flg, bd) = (descriptor[0], descriptor[1]);
    pos += 6;
    if flg >> 6 != 1 {
        return Err(format!("lz4 frame version {} is not 1", flg >> 6));
    }
    if flg & 0x01 != 0 {
        return Err("lz4 frames with a dictionary id are not supported".into());
    }
    let independent_blocks = flg & 0x20 != 0;
    let block_checksums = flg & 0x10 != 0;
    let content_checksum = flg & 0x04 != 0;
    let block_max = match (bd >> 4) & 0x7 {
        4 => 64 << 10,
        5 => 256 << 10,
        6 => 1 << 20,
        7 => 4 << 20,
        code => return Err(format!("lz4 frame block size code {code} is not 4-7")),
    };
    // The content size, when the writer gave it, is a claim from the wire: the output grows from
    // what the blocks really hold instead. Then the header checksum.
    if flg & 0x08 != 0 {
        pos += 8;
    }
    bytes(pos, 1)?;
    pos += 1;

    let frame_start = *filled;
    loop {
        let word = le_u32(pos)?;
        pos += 4;
        if word == 0 {
            break;
        }
        // The high bit marks a block stored as it is.
        let stored = word & 0x8000_0000 != 0;
        let size = (word & 0x7FFF_FFFF) as usize;
        if size > block_max {
            return Err(format!(
                "lz4 block of {size} bytes in a frame of {block_max}-byte blocks"
            ));
        }
        let block = bytes(pos, size)?;
        pos += size;
        if block_checksums {
            bytes(pos, 4)?;
            pos += 4;
        }
        let at = *filled;
        // A stored block is its own output; a compressed one decodes to at most block_max bytes.
        let room = if stored {
            if size > limit - at {
                return Err(too_large());
            }
            size
        } else {
            block_max.min(limit - at)
        };
        if out.len() < at + room {
            out.resize(at + room, 0);
        }
        let (earlier, rest) = out.split_at_mut(at);
        if stored {
            rest[..size].copy_from_slice(block);
            *filled += size;
            continue;
        }
        let rest = &mut rest[..room];
        let decoded = if independent_blocks {
            lz4_flex::block::decompress_into(block, rest)
        } else {
            // Linked blocks: matches may reach back into this frame's earlier blocks.
            let window = &earlier[frame_start.max(at.saturating_sub(LZ4_WINDOW))..];
            lz4_flex::block::decompress_into_with_dict(block, rest, window)
        };
        match decoded {
            Ok(n) => *filled += n,
            Err(lz4_flex::block::DecompressError::OutputTooSmall { .. }) if room < block_max => {
                return Err(too_large())
            }
            Err(e) => return Err(format!("lz4 block at byte {}: {e}", pos - size)),
        }
    }
    if content_checksum {
        bytes(pos, 4)?;
        pos += 4;
    }
    Ok(pos)
}

/// Snappy as Kafka producers write it: xerial-framed by the Java client, raw by some others.
/// snappy-java reads anything without the xerial magic as raw snappy, and so does this.
#[cfg(feature = "snappy")]
pub(super) fn snappy_decompress(
    input: &[u8],
    limit: usize,
    pool: &Pool<u8>,
) -> std::result::Result<Vec<u8>, String> {
    let mut decoder = snap::raw::Decoder::new();
    let too_large = || format!("output exceeds {limit} bytes; refusing to inflate further");
    if input.len() < XERIAL_HEADER_LEN || !input.starts_with(XERIAL_MAGIC) {
        let len = snap::raw::decompress_len(input).map_err(|e| e.to_string())?;
        if len > limit {
            return Err(too_large());
        }
        let mut out = pool.take_overwritable(len);
        if out.len() < len {
            out.resize(len, 0);
        }
        let n = decoder
            .decompress(input, &mut out)
            .map_err(|e| e.to_string())?;
        out.truncate(n);
        return Ok(out);
    }
    // Two walks over the blocks: the first checks the framing and adds up the blocks' decoded
    // lengths (each block starts with it), so the output is taken once at its size (a kept
    // buffer, zero-filled only past what it held before), not grown (and copied) block by block;
    // the second decodes.
    let mut total = 0usize;
    for block in xerial_blocks(input) {
        let len = snap::raw::decompress_len(block?).map_err(|e| e.to_string())?;
        if len > limit - total {
            return Err(too_large());
        }
        total += len;
    }
    let mut out = pool.take_overwritable(total);
    if out.len() < total {
        out.resize(total, 0);
    }
    let mut filled = 0;
    for block in xerial_blocks(input) {
        filled += decoder
            .decompress(block?, &mut out[filled..])
            .map_err(|e| e.to_string())?;
    }
    out.truncate(filled);
    Ok(out)
}

/// The blocks of a xerial snappy-java stream (after its header), each a raw snappy block behind
/// its big-endian length; a length that runs past the input is an error.
#[cfg(feature = "snappy")]
fn xerial_blocks(input: &[u8]) -> impl Iterator<Item = std::result::Result<&[u8], String>> {
    let mut pos = XERIAL_HEADER_LEN;
    std::iter::from_fn(move || {
        if pos >= input.len() {
            return None;
        }
        if input.len() - pos < 4 {
            pos = input.len();
            return Some(Err("truncated xerial block length".into()));
        }
        let block_len = be_i32(input, pos);
        pos += 4;
        if block_len < 0 || block_len as usize > input.len() - pos {
            let left = input.len() - pos;
            pos = input.len();
            return Some(Err(format!(
                "xerial block length {block_len} with {left} bytes left"
            )));
        }
        let block = &input[pos..pos + block_len as usize];
        pos += block.len();
        Some(Ok(block))
    })
}

pub(super) fn compress(compression: Compression, input: &[u8]) -> std::io::Result<Vec<u8>> {
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
            // to earlier ones. Blocks of at most 64 KiB, as the Java client writes them: a reader
            // sizes its buffers by the frame's block size, and the automatic choice gives 256 KiB
            // or 4 MiB blocks to batches above 64 KiB, which every consumer (lagless' own
            // decoder too) then allocates and clears per batch, several times the data's size.
            let info = lz4_flex::frame::FrameInfo::new()
                .block_mode(lz4_flex::frame::BlockMode::Independent)
                .block_size(lz4_flex::frame::BlockSize::Max64KB);
            let mut encoder = lz4_flex::frame::FrameEncoder::with_frame_info(info, Vec::new());
            encoder.write_all(input)?;
            encoder.finish().map_err(std::io::Error::other)
        }
        // Level 0 is zstd's default (3), which is also Kafka's.
        #[cfg(feature = "zstd")]
        Compression::Zstd => zstd::bulk::compress(input, 0),
        // A producer refuses a codec whose feature is off when it is created
        // (`Compression::from_config_value`); this is for a batch builder made some other way.
        #[allow(unreachable_patterns)]
        codec => Err(std::io::Error::other(format!(
            "the {} codec is not built in: turn on the lagless crate's `{}` feature",
            codec.name(),
            codec.name()
        ))),
    }
}
