//! Offset newtypes (docs/style.md#offset-newtypes): a commit-log physical offset is never confused
//! with a consume-queue logical offset.
//!
//! A physical offset names its commit log in the top bits:
//!
//! ```text
//!  63 62        56 55                                              0
//! +--+-----------+-------------------------------------------------+
//! | 0|  log id   |            byte position inside that log        |
//! +--+-----------+-------------------------------------------------+
//! ```
//!
//! Bit 63 stays zero so the value is a positive Java `long` (it travels as i64 in
//! PHYSICALOFFSET, `commitLogOffset` and the offset message id). Log ids are 0..=127; log 0
//! has physical offsets equal to positions, as in RocketMQ. Segment file names carry the
//! position only (the directory names the log).

use std::fmt;

/// Bits of a physical offset that hold the position inside the log.
pub const POSITION_BITS: u32 = 56;
/// Largest position inside a log.
pub const POSITION_MASK: u64 = (1 << POSITION_BITS) - 1;

/// The id of one commit log (not a core number; survives changes of the shard count).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LogId(u8);

impl LogId {
    /// Largest log id (bit 63 of physical offsets must stay clear).
    pub const MAX: u8 = 127;

    /// A log id, or `None` above [`LogId::MAX`].
    pub const fn new(id: u8) -> Option<LogId> {
        if id <= Self::MAX {
            Some(LogId(id))
        } else {
            None
        }
    }

    /// The numeric id.
    pub const fn get(self) -> u8 {
        self.0
    }
}

impl fmt::Display for LogId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A commit-log physical offset: log id and byte position (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PhysicalOffset(u64);

impl PhysicalOffset {
    /// The offset of `position` in log `log_id`.
    pub fn new(log_id: LogId, position: u64) -> PhysicalOffset {
        assert!(
            position <= POSITION_MASK,
            "position {position} exceeds 56 bits"
        );
        PhysicalOffset((u64::from(log_id.0) << POSITION_BITS) | position)
    }

    /// Decodes a wire value (i64), or `None` if negative.
    pub fn from_i64(value: i64) -> Option<PhysicalOffset> {
        u64::try_from(value).ok().map(PhysicalOffset)
    }

    /// The log holding the record.
    pub fn log_id(self) -> LogId {
        let id = u8::try_from(self.0 >> POSITION_BITS).expect("bit 63 is clear");
        LogId(id)
    }

    /// Byte position inside the log.
    pub fn position(self) -> u64 {
        self.0 & POSITION_MASK
    }

    /// The wire value.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).expect("bit 63 is clear")
    }
}

impl fmt::Display for PhysicalOffset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.log_id(), self.position())
    }
}

/// A logical offset in one consume queue (entry number).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct QueueOffset(pub u64);

impl QueueOffset {
    /// The wire value.
    pub fn as_i64(self) -> i64 {
        i64::try_from(self.0).expect("queue offsets stay below 2^63")
    }
}

/// The 20-digit file name of a segment starting at byte `start`.
pub fn file_name(start: u64) -> String {
    format!("{start:020}")
}

/// Parses a 20-digit file name back to its start, or `None` if it is not one.
pub fn parse_file_name(name: &str) -> Option<u64> {
    if name.len() != 20 || !name.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    name.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves log id and position survive the round trip through the wire value and that the
    // value stays a positive i64 even for the largest log id.
    #[test]
    fn physical_offset_round_trip() {
        let log = LogId::new(127).expect("valid");
        let offset = PhysicalOffset::new(log, (1 << 56) - 1);
        assert!(offset.as_i64() > 0);
        let back = PhysicalOffset::from_i64(offset.as_i64()).expect("positive");
        assert_eq!(back.log_id(), log);
        assert_eq!(back.position(), (1 << 56) - 1);
        assert!(LogId::new(128).is_none());
        assert!(PhysicalOffset::from_i64(-1).is_none());
        let zero = PhysicalOffset::new(LogId::new(0).expect("valid"), 1234);
        assert_eq!(zero.as_i64(), 1234);
    }

    // Proves file names are 20 zero-padded digits and that anything else is rejected.
    #[test]
    fn file_names() {
        assert_eq!(file_name(1073741824), "00000000001073741824");
        assert_eq!(parse_file_name("00000000001073741824"), Some(1073741824));
        assert_eq!(parse_file_name("0000000000107374182"), None);
        assert_eq!(parse_file_name("0000000000107374182x"), None);
    }
}
