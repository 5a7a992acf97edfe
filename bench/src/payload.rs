//! Message bodies with an end-to-end stamp.
//!
//! ```text
//! offset  size  field
//!      0     4  magic "CMB1"
//!      4     8  run id (u64, little endian): tells this run's messages from older ones
//!     12     8  intended send time, ns since the Unix epoch (u64, little endian)
//!     20     -  filler (a repeated ASCII pattern, so --compress has something to do)
//! ```
//!
//! Bodies shorter than [`STAMP_BYTES`] carry no stamp (consumers then fall back to the
//! broker's `bornTimestamp`). Producer and consumer share the machine's wall clock, which is
//! all a stamp needs on one host.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::{BufMut, Bytes, BytesMut};

/// The stamp's magic.
pub const MAGIC: [u8; 4] = *b"CMB1";
/// Bytes the stamp takes at the front of a body.
pub const STAMP_BYTES: usize = 20;
const FILLER: &[u8] = b"comet-bench payload 0123456789 ";

/// What a stamped body carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// Identifies the run that sent the message.
    pub run_id: u64,
    /// When the message was meant to be sent, ns since the Unix epoch.
    pub intended_unix_ns: u64,
}

/// A body of exactly `size` bytes, stamped when it is long enough.
pub fn body(size: usize, stamp: Stamp) -> Bytes {
    let mut buffer = BytesMut::with_capacity(size);
    if size >= STAMP_BYTES {
        buffer.put_slice(&MAGIC);
        buffer.put_u64_le(stamp.run_id);
        buffer.put_u64_le(stamp.intended_unix_ns);
    }
    while buffer.len() < size {
        let take = FILLER.len().min(size - buffer.len());
        buffer.put_slice(&FILLER[..take]);
    }
    assert_eq!(buffer.len(), size);
    buffer.freeze()
}

/// The stamp of `body`, if it has one.
pub fn read_stamp(body: &[u8]) -> Option<Stamp> {
    if body.len() < STAMP_BYTES || body[..4] != MAGIC {
        return None;
    }
    let word = |at: usize| {
        let mut bytes = [0u8; 8];
        bytes.copy_from_slice(&body[at..at + 8]);
        u64::from_le_bytes(bytes)
    };
    Some(Stamp {
        run_id: word(4),
        intended_unix_ns: word(12),
    })
}

/// Nanoseconds since the Unix epoch now (0 if the clock is before 1970).
pub fn unix_ns_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX)
        })
}

/// Maps monotonic instants of this run to wall-clock nanoseconds, from one reading of both
/// clocks, so stamps follow the monotonic schedule exactly.
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    origin: Instant,
    origin_unix_ns: u64,
}

impl WallClock {
    /// Reads both clocks now.
    pub fn new() -> WallClock {
        WallClock {
            origin: Instant::now(),
            origin_unix_ns: unix_ns_now(),
        }
    }

    /// Wall-clock ns of `at` (instants before the origin map to the origin).
    pub fn unix_ns(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.origin);
        self.origin_unix_ns
            .saturating_add(u64::try_from(since.as_nanos()).unwrap_or(u64::MAX))
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new()
    }
}

/// A run id unlikely to repeat: wall-clock nanoseconds mixed with the process id.
pub fn new_run_id() -> u64 {
    let mixed = unix_ns_now() ^ (u64::from(std::process::id()) << 40);
    // SplitMix64 finaliser: spreads close timestamps far apart.
    let mut z = mixed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Microseconds from `sent_unix_ns` to `received_unix_ns`, 0 when the clock went back.
pub fn latency_us(sent_unix_ns: u64, received_unix_ns: u64) -> u64 {
    Duration::from_nanos(received_unix_ns.saturating_sub(sent_unix_ns))
        .as_micros()
        .try_into()
        .unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a stamped body round-trips its stamp at every size from the stamp's length up,
    // has exactly the asked size, and that short or foreign bodies carry no stamp.
    #[test]
    fn stamp_round_trips_and_sizes_are_exact() {
        let stamp = Stamp {
            run_id: 0xDEAD_BEEF_0123_4567,
            intended_unix_ns: 1_700_000_000_123_456_789,
        };
        for size in [STAMP_BYTES, 21, 128, 1024, 4096] {
            let body = body(size, stamp);
            assert_eq!(body.len(), size);
            assert_eq!(read_stamp(&body), Some(stamp));
        }
        for size in [0, 1, STAMP_BYTES - 1] {
            let body = body(size, stamp);
            assert_eq!(body.len(), size);
            assert_eq!(read_stamp(&body), None);
        }
        assert_eq!(read_stamp(b"hello world, this is not a stamped body"), None);
    }

    // Proves the wall clock follows monotonic offsets and latencies never go negative.
    #[test]
    fn wall_clock_and_latency_arithmetic() {
        let clock = WallClock::new();
        let later = clock.origin + Duration::from_millis(5);
        assert_eq!(
            clock.unix_ns(later) - clock.unix_ns(clock.origin),
            5_000_000
        );
        assert_eq!(latency_us(1_000_000, 3_500_000), 2500);
        assert_eq!(latency_us(3_500_000, 1_000_000), 0);
        assert_ne!(new_run_id(), 0);
    }
}
