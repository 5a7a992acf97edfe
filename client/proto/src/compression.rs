//! Message body compression (docs/protocol.md#compression).
//!
//! The Java producer compresses single-message bodies of 4 KiB or more and marks them with
//! sysflag bit 0 plus a type in bits 8-10. Brokers store the compressed bytes untouched; only
//! consumers decompress. Comet reads all three types Java writes: zlib (types 0 and 3: an
//! RFC 1950 stream, what `java.util.zip.Deflater` writes), LZ4 (type 1: the LZ4 frame
//! format, what Java's `LZ4FrameOutputStream` writes) and Zstandard (type 2: a zstd frame,
//! what Java's `ZstdOutputStream` writes).
//!
//! Decompression is bounded: output beyond the caller's limit is an error, found after at most
//! `limit + 1` bytes were produced, so a small "zip bomb" cannot allocate without bound.

use std::io::{Read, Write};

use flate2::read::ZlibDecoder;
use flate2::write::ZlibEncoder;
use flate2::Compression;
use thiserror::Error;

use crate::flags::message::{COMPRESSED, COMPRESSION_TYPE_MASK, COMPRESSION_TYPE_SHIFT};

/// Body size from which the Java producer compresses (`compressMsgBodyOverHowmuch`).
pub const COMPRESS_THRESHOLD_BYTES_DEFAULT: usize = 4 * 1024;

/// The Java producer's default zlib level (`rocketmq.message.compressLevel`).
pub const ZLIB_LEVEL_DEFAULT: u32 = 5;

/// Compression algorithm named by sysflag bits 8-10.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CompressionType {
    /// zlib stream; type 0 (old producers) or 3.
    Zlib,
    /// LZ4 frame format, type 1.
    Lz4,
    /// Zstandard frame, type 2.
    Zstd,
}

impl CompressionType {
    /// Decodes the type bits of a sysflag whose compressed bit is set. Type 0 means zlib
    /// (producers older than the type field); types 4-7 are unknown.
    pub fn from_sysflag(sysflag: i32) -> Result<CompressionType, CompressionError> {
        let bits = (sysflag & COMPRESSION_TYPE_MASK) >> COMPRESSION_TYPE_SHIFT;
        match bits {
            0 | 3 => Ok(CompressionType::Zlib),
            1 => Ok(CompressionType::Lz4),
            2 => Ok(CompressionType::Zstd),
            other => Err(CompressionError::TypeUnknown { bits: other }),
        }
    }

    /// The type field value the Java producer writes.
    pub const fn type_bits(self) -> i32 {
        match self {
            CompressionType::Zlib => 3,
            CompressionType::Lz4 => 1,
            CompressionType::Zstd => 2,
        }
    }

    /// The sysflag bits marking a body compressed with this type (compressed bit + type).
    pub const fn sysflag_bits(self) -> i32 {
        COMPRESSED | (self.type_bits() << COMPRESSION_TYPE_SHIFT)
    }
}

/// `sysflag` after its body was decompressed: bit 0 cleared, as the Java client does. The type
/// bits are kept, as Java keeps them.
pub const fn clear_compressed(sysflag: i32) -> i32 {
    sysflag & !COMPRESSED
}

/// Why a body could not be (de)compressed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum CompressionError {
    /// Sysflag type bits that name no algorithm.
    #[error("unknown compression type {bits}")]
    TypeUnknown {
        /// The value of bits 8-10.
        bits: i32,
    },
    /// The decompressed body would exceed the limit.
    #[error("decompressed body exceeds the limit of {limit_bytes} bytes")]
    TooLarge {
        /// The limit that was hit.
        limit_bytes: usize,
    },
    /// A level the algorithm does not have.
    #[error("{kind:?} has no compression level {level}")]
    LevelInvalid {
        /// The algorithm.
        kind: CompressionType,
        /// The level asked for.
        level: u32,
    },
    /// The compressed stream is corrupt or truncated.
    #[error("corrupt {kind:?} stream: {reason}")]
    Corrupt {
        /// The algorithm.
        kind: CompressionType,
        /// The decoder's message.
        reason: String,
    },
}

/// zlib-compresses `body` at `level` (0-9), as `java.util.zip.Deflater` would.
pub fn zlib_compress(body: &[u8], level: u32) -> Vec<u8> {
    assert!(level <= 9, "zlib level {level} out of range");
    let mut encoder = ZlibEncoder::new(
        Vec::with_capacity(body.len() / 2 + 64),
        Compression::new(level),
    );
    // Writing into a Vec cannot fail; an error here is a bug in the encoder.
    encoder.write_all(body).expect("zlib into memory");
    encoder.finish().expect("zlib into memory")
}

/// Inflates a zlib stream, refusing output longer than `limit_bytes`.
pub fn zlib_decompress(compressed: &[u8], limit_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    read_bounded(
        ZlibDecoder::new(compressed),
        CompressionType::Zlib,
        compressed.len(),
        limit_bytes,
    )
}

/// LZ4-compresses `body` in the LZ4 frame format (what Java's `LZ4FrameOutputStream`
/// writes and reads).
pub fn lz4_compress(body: &[u8]) -> Vec<u8> {
    let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::with_capacity(body.len() / 2 + 64));
    // Writing into a Vec cannot fail; an error here is a bug in the encoder.
    encoder.write_all(body).expect("lz4 into memory");
    encoder.finish().expect("lz4 into memory")
}

/// Decompresses an LZ4 frame, refusing output longer than `limit_bytes`.
pub fn lz4_decompress(compressed: &[u8], limit_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    read_bounded(
        lz4_flex::frame::FrameDecoder::new(compressed),
        CompressionType::Lz4,
        compressed.len(),
        limit_bytes,
    )
}

/// Zstandard-compresses `body` at `level` (1-22; Java's producer default is 5).
pub fn zstd_compress(body: &[u8], level: i32) -> Vec<u8> {
    assert!((1..=22).contains(&level), "zstd level {level} out of range");
    // Compressing from memory into memory fails only on an allocation failure.
    zstd::bulk::compress(body, level).expect("zstd into memory")
}

/// Decompresses a Zstandard frame, refusing output longer than `limit_bytes`.
pub fn zstd_decompress(compressed: &[u8], limit_bytes: usize) -> Result<Vec<u8>, CompressionError> {
    let decoder = zstd::stream::read::Decoder::with_buffer(compressed).map_err(|error| {
        CompressionError::Corrupt {
            kind: CompressionType::Zstd,
            reason: error.to_string(),
        }
    })?;
    read_bounded(
        decoder,
        CompressionType::Zstd,
        compressed.len(),
        limit_bytes,
    )
}

/// Reads `decoder` to its end, refusing output longer than `limit_bytes`: at most
/// `limit_bytes + 1` bytes are ever produced.
fn read_bounded(
    decoder: impl Read,
    kind: CompressionType,
    compressed_len: usize,
    limit_bytes: usize,
) -> Result<Vec<u8>, CompressionError> {
    // Reserve from the input size only: the output size is what the peer claims, not a fact.
    let mut output = Vec::with_capacity(compressed_len.saturating_mul(2).min(limit_bytes));
    let read_limit = u64::try_from(limit_bytes)
        .unwrap_or(u64::MAX)
        .saturating_add(1);
    let produced = decoder
        .take(read_limit)
        .read_to_end(&mut output)
        .map_err(|error| CompressionError::Corrupt {
            kind,
            reason: error.to_string(),
        })?;
    if produced > limit_bytes {
        return Err(CompressionError::TooLarge { limit_bytes });
    }
    assert_eq!(produced, output.len());
    Ok(output)
}

/// Compresses `body` with `kind` at `level` (see [`check_level`]; LZ4 has no level).
pub fn compress(kind: CompressionType, body: &[u8], level: u32) -> Vec<u8> {
    match kind {
        CompressionType::Zlib => zlib_compress(body, level),
        CompressionType::Lz4 => lz4_compress(body),
        CompressionType::Zstd => zstd_compress(body, i32::try_from(level).unwrap_or(i32::MAX)),
    }
}

/// Whether `level` is one [`compress`] takes for `kind`: 0-9 for zlib, 1-22 for Zstandard,
/// anything for LZ4.
pub fn check_level(kind: CompressionType, level: u32) -> Result<(), CompressionError> {
    let valid = match kind {
        CompressionType::Zlib => level <= 9,
        CompressionType::Lz4 => true,
        CompressionType::Zstd => (1..=22).contains(&level),
    };
    if valid {
        Ok(())
    } else {
        Err(CompressionError::LevelInvalid { kind, level })
    }
}

/// Decompresses a body according to `sysflag` (which must have the compressed bit).
pub fn decompress(
    sysflag: i32,
    body: &[u8],
    limit_bytes: usize,
) -> Result<Vec<u8>, CompressionError> {
    assert!(sysflag & COMPRESSED != 0, "body is not marked compressed");
    match CompressionType::from_sysflag(sysflag)? {
        CompressionType::Zlib => zlib_decompress(body, limit_bytes),
        CompressionType::Lz4 => lz4_decompress(body, limit_bytes),
        CompressionType::Zstd => zstd_decompress(body, limit_bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a zlib round trip restores the body and the stream has the RFC 1950 header.
    #[test]
    fn zlib_round_trip() {
        let body: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
        let compressed = zlib_compress(&body, ZLIB_LEVEL_DEFAULT);
        assert_eq!(compressed[0], 0x78, "zlib header CMF");
        assert!(compressed.len() < body.len());
        assert_eq!(zlib_decompress(&compressed, body.len()).unwrap(), body);
    }

    // Proves LZ4 frames and zstd frames round-trip through `decompress` by their sysflag
    // type bits, start with their formats' magic numbers, and stop at the limit.
    #[test]
    fn lz4_and_zstd_round_trip_and_are_bounded() {
        let body: Vec<u8> = (0..50_000u32).map(|i| (i % 97) as u8).collect();
        let lz4 = lz4_compress(&body);
        assert_eq!(lz4[..4], [0x04, 0x22, 0x4d, 0x18], "LZ4 frame magic");
        let zstd = zstd_compress(&body, 5);
        assert_eq!(zstd[..4], [0x28, 0xb5, 0x2f, 0xfd], "zstd frame magic");
        for (kind, compressed) in [(CompressionType::Lz4, &lz4), (CompressionType::Zstd, &zstd)] {
            assert!(compressed.len() < body.len() / 4, "{kind:?}");
            let sysflag = kind.sysflag_bits();
            assert_eq!(decompress(sysflag, compressed, body.len()).unwrap(), body);
            assert_eq!(
                decompress(sysflag, compressed, 1000),
                Err(CompressionError::TooLarge { limit_bytes: 1000 }),
                "{kind:?}"
            );
            assert!(matches!(
                decompress(sysflag, b"garbage, not a frame", 1000),
                Err(CompressionError::Corrupt { kind: found, .. }) if found == kind
            ));
        }
    }

    // Proves a highly compressible bomb is cut at the limit instead of fully inflated.
    #[test]
    fn zlib_bomb_is_refused() {
        let bomb = zlib_compress(&vec![0u8; 8 * 1024 * 1024], 9);
        assert!(bomb.len() < 64 * 1024);
        assert_eq!(
            zlib_decompress(&bomb, 1024 * 1024),
            Err(CompressionError::TooLarge {
                limit_bytes: 1024 * 1024
            })
        );
    }

    // Proves corrupt input is an error and the type bits decode as documented.
    #[test]
    fn corrupt_and_types() {
        assert!(matches!(
            zlib_decompress(b"not zlib at all", 100),
            Err(CompressionError::Corrupt { .. })
        ));
        assert_eq!(
            CompressionType::from_sysflag(0x1),
            Ok(CompressionType::Zlib)
        );
        assert_eq!(
            CompressionType::from_sysflag(0x301),
            Ok(CompressionType::Zlib)
        );
        assert_eq!(
            CompressionType::from_sysflag(0x101),
            Ok(CompressionType::Lz4)
        );
        assert_eq!(
            CompressionType::from_sysflag(0x201),
            Ok(CompressionType::Zstd)
        );
        assert_eq!(
            CompressionType::from_sysflag(0x401),
            Err(CompressionError::TypeUnknown { bits: 4 })
        );
        assert_eq!(CompressionType::Zlib.sysflag_bits(), 0x301);
        assert_eq!(clear_compressed(0x301), 0x300);
    }
}
