//! Record framing of a log, as far as replication needs it: where whole records end.
//!
//! A log holds RocketMQ's stored-message records (TOTALSIZE i32, then MAGICCODE, both
//! big-endian; see `comet_proto::message`), never straddling a segment. A segment ends with an
//! 8-byte blank marker (`maxBlank` i32, then [`BLANK_MAGIC`]) whose `maxBlank` covers the rest
//! of the segment; a blank marker that ends before the segment does is padding, zero past its
//! header, and is part of the log like a record.
//!
//! A Data frame carries whole records only, so the slave appends and dispatches exactly what
//! the master did. The one abbreviation: a segment's end marker travels as its 8 bytes, and
//! the rest of the segment (never read by anyone) is implied. A payload's span in the log is
//! therefore computed by [`scan`], not taken from its length.

use thiserror::Error;

/// MAGICCODE of a V1 record (Java `MESSAGE_MAGIC_CODE`).
pub const MAGIC_V1: u32 = 0xDAA3_20A7;
/// MAGICCODE of a V2 record (Java `MESSAGE_MAGIC_CODE_V2`).
pub const MAGIC_V2: u32 = 0xDAA3_20AB;
/// Magic of a blank marker (Java `BLANK_MAGIC_CODE`).
pub const BLANK_MAGIC: u32 = 0xCBD4_3194;
/// Bytes of a blank marker's header; also the room every segment keeps for its end marker.
pub const BLANK_MARKER_BYTES: u64 = 8;
/// Smallest possible record (IPv4 hosts, V1, empty body, topic and properties).
pub const RECORD_BYTES_MIN: u64 = 91;

/// Whole records found at the start of some bytes (see [`scan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scan {
    /// Bytes of the input that are whole records (a segment end marker counts as 8).
    pub whole_bytes: usize,
    /// Log position just past those records (a segment end marker reaches the segment's end).
    pub end_position: u64,
    /// Bytes the record after them needs when the input stops inside it: its TOTALSIZE, or
    /// 8 when even its header is cut. `None` when the input stops on a record boundary or
    /// the scan reached the segment's end.
    pub next_record_bytes: Option<u64>,
}

/// Bytes that cannot be the records of a log at their position.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum FramingError {
    /// A magic that is neither a record's nor a blank marker's.
    #[error("unknown magic {magic:#010x} at log position {position}")]
    Magic {
        /// Log position of the record.
        position: u64,
        /// The magic found.
        magic: u32,
    },
    /// A TOTALSIZE that no record or marker can have here (too small, negative, or running
    /// into the room kept for the segment's end marker).
    #[error("size {size} impossible at log position {position} (segment ends at {segment_end})")]
    Size {
        /// Log position of the record.
        position: u64,
        /// The TOTALSIZE (or `maxBlank`) found.
        size: i32,
        /// End of the segment holding the position.
        segment_end: u64,
    },
    /// Padding whose bytes past its header are not zero.
    #[error("padding at log position {position} holds data")]
    PaddingNotZero {
        /// Log position of the padding.
        position: u64,
    },
    /// The segment size is zero or the start is beyond the largest position.
    #[error("no segment of {segment_bytes} bytes holds log position {position}")]
    NoSegment {
        /// The position scanned from.
        position: u64,
        /// The segment size given.
        segment_bytes: u64,
    },
}

/// Finds the whole records at the start of `bytes`, which are the log's bytes from
/// `start_position` in segments of `segment_bytes`. Stops at the first incomplete record, or
/// after the segment's end marker (what follows belongs to the next segment). Never reads
/// past `bytes`; damage is an error, a short input is not.
pub fn scan(bytes: &[u8], start_position: u64, segment_bytes: u64) -> Result<Scan, FramingError> {
    let segment_end = (start_position - start_position % segment_bytes.max(1))
        .checked_add(segment_bytes)
        .filter(|_| segment_bytes > 0 && start_position <= crate::limits::POSITION_MAX)
        .ok_or(FramingError::NoSegment {
            position: start_position,
            segment_bytes,
        })?;
    let mut at = 0usize;
    let mut position = start_position;
    let done = |at: usize, position: u64, next: Option<u64>| Scan {
        whole_bytes: at,
        end_position: position,
        next_record_bytes: next,
    };
    loop {
        let rest = &bytes[at..];
        if rest.is_empty() {
            return Ok(done(at, position, None));
        }
        let (Some(size_word), Some(magic_word)) = (rest.get(0..4), rest.get(4..8)) else {
            return Ok(done(at, position, Some(BLANK_MARKER_BYTES)));
        };
        let size = i32::from_be_bytes(size_word.try_into().expect("4 bytes"));
        let magic = u32::from_be_bytes(magic_word.try_into().expect("4 bytes"));
        let size_error = FramingError::Size {
            position,
            size,
            segment_end,
        };
        let Ok(length) = u64::try_from(size) else {
            return Err(size_error);
        };
        match magic {
            BLANK_MAGIC if position + length == segment_end => {
                if length < BLANK_MARKER_BYTES {
                    return Err(size_error);
                }
                return Ok(done(at + 8, segment_end, None));
            }
            BLANK_MAGIC => {
                if length < BLANK_MARKER_BYTES
                    || position + length + BLANK_MARKER_BYTES > segment_end
                {
                    return Err(size_error);
                }
                let Some(padding) = rest.get(..usize_of(length)) else {
                    return Ok(done(at, position, Some(length)));
                };
                if padding[8..].iter().any(|&byte| byte != 0) {
                    return Err(FramingError::PaddingNotZero { position });
                }
            }
            MAGIC_V1 | MAGIC_V2 => {
                if length < RECORD_BYTES_MIN || position + length + BLANK_MARKER_BYTES > segment_end
                {
                    return Err(size_error);
                }
                if rest.len() < usize_of(length) {
                    return Ok(done(at, position, Some(length)));
                }
            }
            other => {
                return Err(FramingError::Magic {
                    position,
                    magic: other,
                })
            }
        }
        at += usize_of(length);
        position += length;
    }
}

/// A record length as an index: at most `i32::MAX`, which fits every supported `usize`.
fn usize_of(length: u64) -> usize {
    usize::try_from(length).expect("record lengths come from an i32")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    const SEGMENT_BYTES: u64 = 4096;

    /// A fake record of `length` bytes (size, magic, filler): enough for framing.
    pub(crate) fn record(length: usize, fill: u8) -> Vec<u8> {
        let mut bytes = vec![fill; length];
        bytes[..4].copy_from_slice(&i32::try_from(length).expect("small").to_be_bytes());
        bytes[4..8].copy_from_slice(&MAGIC_V2.to_be_bytes());
        bytes
    }

    pub(crate) fn blank(length: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; usize_of(length)];
        bytes[..4].copy_from_slice(&i32::try_from(length).expect("small").to_be_bytes());
        bytes[4..8].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
        bytes
    }

    // Proves the constants repeated here are the codec's.
    #[test]
    fn constants_match_the_codec() {
        use comet_proto::message as codec;
        assert_eq!(MAGIC_V1.to_be_bytes(), codec::MAGIC_V1.to_be_bytes());
        assert_eq!(MAGIC_V2.to_be_bytes(), codec::MAGIC_V2.to_be_bytes());
        assert_eq!(BLANK_MAGIC.to_be_bytes(), codec::BLANK_MAGIC.to_be_bytes());
        assert_eq!(BLANK_MARKER_BYTES, codec::BLANK_MARKER_BYTES as u64);
        assert_eq!(RECORD_BYTES_MIN, codec::RECORD_BYTES_MIN as u64);
    }

    // Proves a scan counts whole records, stops inside a cut one and says what it needs.
    #[test]
    fn whole_records_and_a_cut_one() {
        let mut bytes = record(100, 1);
        bytes.extend(record(200, 2));
        let scan_all = scan(&bytes, 0, SEGMENT_BYTES).expect("valid");
        assert_eq!(scan_all.whole_bytes, 300);
        assert_eq!(scan_all.end_position, 300);
        assert_eq!(scan_all.next_record_bytes, None);
        let cut = scan(&bytes[..250], 0, SEGMENT_BYTES).expect("valid");
        assert_eq!((cut.whole_bytes, cut.next_record_bytes), (100, Some(200)));
        let header_cut = scan(&bytes[..104], 0, SEGMENT_BYTES).expect("valid");
        assert_eq!(
            (header_cut.whole_bytes, header_cut.next_record_bytes),
            (100, Some(8))
        );
    }

    // Proves the segment end marker travels as 8 bytes, spans the rest of the segment and
    // ends the scan, and that padding travels whole and must be zero.
    #[test]
    fn end_marker_and_padding() {
        let start = SEGMENT_BYTES - 500;
        let mut bytes = record(100, 1);
        bytes.extend(blank(400));
        bytes.extend(record(100, 3)); // next segment: not part of this scan
        let found = scan(&bytes, start, SEGMENT_BYTES).expect("valid");
        assert_eq!(found.whole_bytes, 108);
        assert_eq!(found.end_position, SEGMENT_BYTES);
        assert_eq!(found.next_record_bytes, None);

        let mut padded = blank(96);
        padded.extend(record(100, 1));
        let found = scan(&padded, 4000, 2 * SEGMENT_BYTES).expect("valid");
        assert_eq!((found.whole_bytes, found.end_position), (196, 4196));
        padded[50] = 1;
        assert_eq!(
            scan(&padded, 4000, 2 * SEGMENT_BYTES),
            Err(FramingError::PaddingNotZero { position: 4000 })
        );
    }

    // Proves damage is refused: unknown magic, tiny or negative sizes, a record eating the
    // end marker's room, zeros past the written end.
    #[test]
    fn damage_is_an_error() {
        let mut bad_magic = record(100, 1);
        bad_magic[4] = 0;
        assert!(matches!(
            scan(&bad_magic, 0, SEGMENT_BYTES),
            Err(FramingError::Magic { .. })
        ));
        assert!(matches!(
            scan(&record(90, 1), 0, SEGMENT_BYTES),
            Err(FramingError::Size { .. })
        ));
        let mut negative = record(100, 1);
        negative[0] = 0xFF;
        assert!(matches!(
            scan(&negative, 0, SEGMENT_BYTES),
            Err(FramingError::Size { .. })
        ));
        let full = record(usize_of(SEGMENT_BYTES - 4), 1);
        assert!(matches!(
            scan(&full, 0, SEGMENT_BYTES),
            Err(FramingError::Size { .. })
        ));
        assert!(matches!(
            scan(&[0u8; 16], 0, SEGMENT_BYTES),
            Err(FramingError::Magic { .. })
        ));
        assert!(matches!(
            scan(&[], 0, 0),
            Err(FramingError::NoSegment { .. })
        ));
        assert!(matches!(
            scan(&[], u64::MAX, 1 << 63),
            Err(FramingError::NoSegment { .. })
        ));
    }

    proptest! {
        // Proves scanning arbitrary bytes never panics and never claims more than it got.
        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..600),
            start in 0u64..20_000,
        ) {
            if let Ok(found) = scan(&bytes, start, SEGMENT_BYTES) {
                prop_assert!(found.whole_bytes <= bytes.len());
                prop_assert!(found.end_position >= start);
            }
        }
    }
}
