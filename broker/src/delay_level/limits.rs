//! Bounds of the delayed-message scheduler. Each says what it bounds and what it costs.

/// Entries of one level delivered per round, and so the most that can have been delivered
/// past a level's persisted cursor when a crash comes (each is checked after the crash).
/// Larger rounds mean fewer cursor writes and larger group commits, and more checks after a
/// crash.
pub const ROUND_ENTRIES_MAX: usize = 2048;

/// How often a level with nothing due is looked at again, ms (RocketMQ polls every 100 ms):
/// the lateness of a delivery in the worst case.
pub const POLL_INTERVAL_MS: u64 = 100;

/// Records read from a schedule queue per store read.
pub const READ_RECORDS_MAX: usize = 256;

/// Bytes read from a schedule queue per store read.
pub const READ_BYTES_MAX: usize = 4 * 1024 * 1024;

/// "Was this entry delivered before the crash?" lookups (a `UNIQ_KEY` index search and the
/// read of its hits, on the real queue's owner) in flight at once per shard. Each is mostly
/// a wait for a disk read after a restart, so running many at once is what makes checking a
/// round's worth of entries take a fraction of a second instead of seconds; bounded so the
/// check cannot flood the mesh.
pub const CHECKS_IN_FLIGHT_MAX: usize = 64;

const _: () = assert!(ROUND_ENTRIES_MAX >= READ_RECORDS_MAX);
const _: () = assert!(CHECKS_IN_FLIGHT_MAX > 0);
const _: () = assert!(POLL_INTERVAL_MS > 0);
