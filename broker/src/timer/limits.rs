//! Bounds of the timing wheel. Each says what it bounds and what it costs.

/// Queues of the timer topic. A timed send is stored in a queue owned by its real queue's
/// owner, so every shard's wheel gets the share of the real queues it owns; with at least as
/// many queues as shards every shard owns one. Apache uses one queue; nobody consumes this
/// topic, so the count is internal.
pub const TIMER_QUEUES: i32 = 32;

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

/// Appends of delivered records to other shards in flight at once per shard (each at most
/// `crate::reappend::APPEND_CHUNK_BYTES`): enough to keep every owner's group commit full,
/// bounded so one storm cannot queue unbounded work on the mesh.
pub const APPENDS_IN_FLIGHT_MAX: usize = 64;

/// Appends of delivered records to the shard's own queues in flight at once (each at most
/// `crate::reappend::APPEND_CHUNK_BYTES`): two store flushes' worth (a flush writes at most
/// 8 MiB), enough to keep the flusher busy while the next chunks are placed. More only holds
/// memory ahead of the flusher: in 1M-message storms on 2 shards, 16, 64 and 256 used the
/// same CPU per message and their wall-clock differences were within run-to-run noise.
pub const LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX: usize = 16;

/// The wheel looks for new timer records and due entries this often when idle, ms: the
/// lateness of a record whose due time is under this after its send.
pub const TICK_MS: u64 = 10;

/// Bytes of one slot-file entry.
pub const SLOT_ENTRY_BYTES: usize = 24;

/// Largest slot file read back (a torn or foreign file past it is refused, not allocated):
/// 64 M entries.
pub const SLOT_FILE_BYTES_MAX: u64 = 64 * 1024 * 1024 * SLOT_ENTRY_BYTES as u64;

const _: () = assert!(TIMER_QUEUES > 0);
const _: () = assert!(PREFETCH_MS >= 1000);
const _: () = assert!(READ_RECORDS_MAX <= ENQUEUE_RECORDS_MAX);
const _: () = assert!(APPENDS_IN_FLIGHT_MAX > 0 && LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX > 0);
