//! Bounds of the timing wheel. Each says what it bounds and what it costs.

/// How far ahead of its second a slot is loaded into memory with its delivered records
/// built, ms. Costs memory (every record due within this window is held built, up to
/// [`PREFETCH_RECORDS_MAX`]) and buys punctuality: a storm of records due in one second is
/// read and rebuilt before it is due, so at its due time only the appends remain. Loading
/// 500,000 records took about 8 s of a shard on the loaded 2-core development machine (5 s
/// was measured too short), hence 30 s.
pub const PREFETCH_MS: i64 = 30_000;

/// Records built ahead of time per shard; a slot loaded past this bound keeps the rest as
/// bare entries that are read at delivery time (late rather than out of memory).
pub const PREFETCH_RECORDS_MAX: usize = 4_000_000;

/// Timer-topic records read into slot files per enqueue step (bounds one step's memory and
/// how long delivery waits behind enqueueing).
pub const ENQUEUE_RECORDS_MAX: usize = 65_536;

/// Records read per store call when enqueueing or loading a slot.
pub const READ_RECORDS_MAX: usize = 1024;

/// Bytes read per store call when enqueueing or loading a slot.
pub const READ_BYTES_MAX: usize = 8 * 1024 * 1024;

/// The wheel looks for new timer records and due entries this often when idle, ms: the
/// lateness of a record whose due time is under this after its send.
pub const TICK_MS: u64 = 10;

/// Bytes of one slot-file entry.
pub const SLOT_ENTRY_BYTES: usize = 24;

/// Largest slot file read back (a torn or foreign file past it is refused, not allocated):
/// 64 M entries.
pub const SLOT_FILE_BYTES_MAX: u64 = 64 * 1024 * 1024 * SLOT_ENTRY_BYTES as u64;

const _: () = assert!(PREFETCH_MS >= 1000);
const _: () = assert!(READ_RECORDS_MAX <= ENQUEUE_RECORDS_MAX);
