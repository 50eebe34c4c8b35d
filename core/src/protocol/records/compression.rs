//! The codecs of a batch's records section: gzip, snappy (raw and the xerial framing the Java
//! producer writes), lz4 frames and zstd, with decompression bounded against bombs.
#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
use std::io::Read;
#[cfg(any(feature = "gzip", feature = "lz4"))]
use std::io::Write;

use super::*;

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

/// How much a compressed records section of `compressed_len` bytes may inflate to.
pub(super) fn inflate_limit(compressed_len: usize) -> usize {
    INFLATE_FLOOR.max(
        compressed_len
            .saturating_mul(INFLATE_RATIO)
            .saturating_add(INFLATE_SLACK),
    )
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
        // A codec whose feature is off: the batch decoder refuses it before asking.
        #[allow(unreachable_patterns)]
        codec => Err(format!("the {} codec is not built in", codec.name())),
    }
}

#[cfg(any(feature = "gzip", feature = "lz4", feature = "zstd"))]
pub(super) fn read_bounded<R: Read>(
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
pub(super) fn snappy_decompress(
    input: &[u8],
    limit: usize,
) -> std::result::Result<Vec<u8>, String> {
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
