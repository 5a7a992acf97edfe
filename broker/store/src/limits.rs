//! Structural bounds of the store, each with what it bounds and what it costs.

/// Direct-I/O page: positions and lengths of every write are multiples of it. Devices with a
/// larger logical block are refused at open.
pub const PAGE_BYTES: u64 = 4096;

/// Default commit-log segment size (RocketMQ's `mappedFileSizeCommitLog`).
pub const SEGMENT_BYTES_DEFAULT: u64 = 1 << 30;

/// Smallest segment accepted (tests roll at small sizes); must hold the largest record.
pub const SEGMENT_BYTES_MIN: u64 = 64 * 1024;

/// Largest segment: positions are 56-bit, and a segment is addressed with u64 offsets.
pub const SEGMENT_BYTES_MAX: u64 = 1 << 40;

/// Largest single record accepted by the appender (RocketMQ's 4 MiB body limit plus headers
/// and properties).
pub const RECORD_BYTES_MAX: usize = 4 * 1024 * 1024 + 64 * 1024;

/// Default size of one in-memory append chunk. Each chunk is one allocation; tailing reads are
/// served from chunks.
pub const CHUNK_BYTES_DEFAULT: usize = 4 * 1024 * 1024;

/// Default bytes of recently written chunks kept in memory for tailing readers.
pub const READ_CACHE_BYTES_DEFAULT: usize = 64 * 1024 * 1024;

/// Most bytes one flush writes before it syncs; bounds the extra buffer a flush allocates and
/// the range a crash can tear (recovery zeroes this much past the last valid record).
pub const FLUSH_BYTES_MAX: usize = 8 * 1024 * 1024;

/// Most commit-log flushes in flight at once (see `flush`): recovery zeroes this many flushes'
/// reach past the last valid record after a crash, since each may have torn.
pub const FLUSHES_IN_FLIGHT_MAX: usize = 2;

/// A flush is padded to a page (so the next may start while it is in flight) only when the
/// padding is at most 1/this of the bytes it carries: padding grows the log by at most 12.5%
/// (under 2% for flushes of 256 KiB), and small flushes, where it would double the log, go
/// one at a time.
pub const PADDING_SHARE_MAX: u64 = 8;

/// Default most bytes waiting for the disk under ASYNC_FLUSH before appends wait.
pub const ASYNC_DIRTY_BYTES_MAX_DEFAULT: u64 = 64 * 1024 * 1024;

/// Bytes of one consume-queue entry (docs/protocol.md#consume-queue-format).
pub const CQ_ENTRY_BYTES: u64 = 20;

/// Entries per consume-queue file by default: a multiple of 1024 so a file is whole pages
/// (20 × 1024 = 5 pages), the nearest such value to RocketMQ's 300,000.
pub const CQ_ENTRIES_PER_FILE_DEFAULT: u64 = 288 * 1024;

/// Entries of a consume-queue block: the unit cold reads fetch and the block cache holds.
/// 1024 entries are 20 KiB, exactly 5 pages, so every block is page-aligned in its file
/// (files hold a multiple of 1024 entries) and one read serves a pull of up to 1024 records.
pub const CQ_BLOCK_ENTRIES: u64 = 1024;

/// Entries a queue keeps in memory behind its newest one (besides those not yet written and
/// the page the next flush rewrites): a tailing consumer pulling up to this far behind (32
/// per pull by default in RocketMQ clients) is served without reading the queue's files.
/// 128 entries cost 3 KiB per queue, less than the page kept anyway.
pub const CQ_TAIL_ENTRIES: u64 = 128;

/// Entry slots a queue's hot tail keeps allocated when it shrinks after a burst: room for
/// the usual tail (at most 205 entries once written) plus what arrives between two lazy
/// flushes of a quiet queue, so a steady queue does not reallocate at every flush; a tail
/// holds at most twice this once written (512 slots of 24 bytes, 12 KiB).
pub const CQ_TAIL_ROOM_ENTRIES: u64 = 256;

/// Default bytes of consume-queue blocks cached per store (`StoreConfig::cq_cache_bytes`):
/// 1,600 blocks of 20 KiB, enough for that many consumers reading backlogs (each needs its
/// current block) or lookups by time, while a store of any size stays within it; the page
/// cache is not used (direct I/O), so this is all the memory cold consume-queue reads take.
pub const CQ_CACHE_BYTES_DEFAULT: usize = 32 * 1024 * 1024;

/// Default most consume-queue files a store keeps open (`StoreConfig::cq_open_files_max`).
/// Queues hold no open file: a flush opens the files it writes through a pool this large,
/// closing the least recently used first. Descriptors then stay bounded whatever the number
/// of queues (one per queue would take 10,000 per store for 10,000 queues, ten times a
/// default `ulimit -n` of 1,024), while a store with at most this many queues written
/// between two lazy flushes never reopens a file; past it each queue's flush pays one open
/// and one close beside the fdatasync it pays anyway (perf/README.md#many-queues-issue-25).
pub const CQ_OPEN_FILES_DEFAULT: usize = 256;

/// Entries recovery (its scan past the checkpoint, or a queue repair) dispatches before it
/// writes them to the queue files, so recovering any amount of log holds at most this many
/// in memory besides the hot tails (1.5 MiB).
pub const CQ_RECOVERY_FLUSH_ENTRIES: u64 = 64 * 1024;

/// Bytes of one key-index entry (see `index`): 32 divides the page.
pub const INDEX_ENTRY_BYTES: u64 = 32;

/// Key-index entries linked per step while dispatch is quiet (~1 ms of linking).
pub const INDEX_LINK_BATCH: usize = 4096;

/// Key-index entries linked per step while dispatch is busy: linking then takes a few per
/// cent of the shard, so a burst of appends (a timer storm) is stored and visible first.
pub const INDEX_LINK_BUSY_BATCH: usize = 1024;

/// Pause after a busy step (see [`INDEX_LINK_BUSY_BATCH`]).
pub const INDEX_LINK_BUSY_PAUSE_MS: u64 = 5;

/// Most entries left unlinked before linking runs at full speed even while busy: lookups
/// scan the unlinked entries (32 MiB here, a few ms), so the backlog stays bounded under
/// sustained load.
pub const INDEX_UNLINKED_MAX: u64 = 1 << 20;

/// Bytes of one read window: cold reads of the log go to disk in windows of this size on a
/// fixed grid (read-ahead; see `read_windows`).
pub const READ_AHEAD_BYTES: usize = 256 * 1024;

/// Most windows one pull reads from disk at once: the windows under the records it returns
/// are read together (2 MiB in flight) rather than one after the other, so a drain keeps the
/// disk's queue full instead of waiting out one read per window.
pub const READ_AHEAD_WINDOWS_IN_FLIGHT_MAX: usize = 8;

/// Bytes of the log past a cold pull's last record read with it (see `read`): a drain's next
/// pulls find them kept.
pub const READ_PAST_PULL_BYTES: u64 = 4 * READ_AHEAD_BYTES as u64;

/// Default bytes of read windows a store keeps across pulls
/// (`StoreConfig::read_window_cache_bytes`): 64 windows, room for the windows the queues of
/// a topic draining a backlog together read ahead, each a few pulls apart
/// (docs/architecture.md#read-windows).
pub const READ_WINDOW_CACHE_BYTES_DEFAULT: usize = 64 * READ_AHEAD_BYTES;

/// Most bytes of read windows a store may keep: the page cache Comet does not use is the
/// operator's to size, but one shard's windows beyond 1 GiB are a mistyped value.
pub const READ_WINDOW_CACHE_BYTES_MAX: usize = 1 << 30;

/// Bytes read per step while recovery scans the commit log.
pub const RECOVERY_READ_BYTES: usize = 4 * 1024 * 1024;

/// Most records a single `get_messages` returns.
pub const PULL_RECORDS_MAX: usize = 1024;

/// Most results of one query by key.
pub const QUERY_RESULTS_MAX: usize = 64 * 1024;

/// Most consume-queue entries one [`Store::consume_queue_entries`](crate::Store) call returns
/// (admin inspection, QUERY_CONSUME_QUEUE): bounds the copy made under the queue borrow and
/// the answer built from it (20 bytes here, about 150 bytes of JSON per entry on the wire).
pub const CQ_INSPECT_ENTRIES_MAX: usize = 4096;

/// Bytes of one checkpoint copy; two copies alternate.
pub const CHECKPOINT_SLOT_BYTES: u64 = PAGE_BYTES;

/// Log bytes below the page of a checkpoint's dispatch position that recovery after a crash
/// re-verifies when it can (see `checkpoint::VerifyBoundaries`): beyond what any torn flush
/// can reach (the page holding the durable position), a margin that costs about 0.15 s of
/// reading and checking at the scan's rate.
pub const VERIFY_BEHIND_BYTES: u64 = 32 * 1024 * 1024;

/// Default log bytes per key-index file (`StoreConfig::index_span_bytes`): with 184-byte
/// records (16-byte bodies) about 365,000 keys, 17 MiB of memory, per span held.
pub const INDEX_SPAN_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;

/// Most record boundaries kept to choose a checkpoint's verify-from position among (one per
/// checkpoint written).
pub const VERIFY_BOUNDARIES_MAX: usize = 256;

const _: () = assert!(SEGMENT_BYTES_DEFAULT % PAGE_BYTES == 0);
const _: () = assert!(SEGMENT_BYTES_MIN % PAGE_BYTES == 0);
const _: () = assert!((CQ_ENTRIES_PER_FILE_DEFAULT * CQ_ENTRY_BYTES) % PAGE_BYTES == 0);
const _: () = assert!(PAGE_BYTES % INDEX_ENTRY_BYTES == 0);
const _: () = assert!((CQ_BLOCK_ENTRIES * CQ_ENTRY_BYTES) % PAGE_BYTES == 0);
const _: () = assert!(CQ_ENTRIES_PER_FILE_DEFAULT % CQ_BLOCK_ENTRIES == 0);
const _: () = assert!(FLUSH_BYTES_MAX as u64 % PAGE_BYTES == 0);
const _: () = assert!((RECORD_BYTES_MAX as u64) < SEGMENT_BYTES_DEFAULT);

/// Most consume-queue entries one pull examines (RocketMQ's `maxFilterMessageCount`).
pub const PULL_SCAN_ENTRIES_MAX: usize = 16_000;

/// Default bytes the warmer keeps written ahead of the commit log's write position (see
/// `warm`): 64 ms of appends at 1 GB/s, zeroed once per store start beyond that.
pub const WARM_AHEAD_BYTES_DEFAULT: u64 = 64 * 1024 * 1024;

/// Bytes of zeros the warmer writes at once: small enough that a flush waiting behind it
/// (same device queue) loses little, large enough to keep ahead of a full-speed appender.
pub const WARM_WRITE_BYTES: u64 = 256 * 1024;

/// The warmer writes only while flushes are at most this large. Each durable write into
/// unconverted blocks pays one journal commit (~100-125 µs on the measured disk whatever its
/// size), while zeroing costs device time in proportion to bytes (~80 µs per 128 KiB): small
/// flushes gain far more than their zeros cost, large ones (saturating producers, ASYNC_FLUSH)
/// lose more to the zeros competing with them than the commit they save (perf/README.md).
pub const WARM_FLUSH_BYTES_MAX: u64 = 128 * 1024;

/// After large flushes the warmer waits for this long without any flush (the store gone
/// quiet) before it writes again, so a burst's end does not leave the log cold.
pub const WARM_QUIET_MS: u64 = 10;

/// Retention passes after a manual delete request (DELETE_EXPIRED_COMMITLOG) that delete
/// expired segments whatever the hour: Java's `CleanCommitLogService` runs this many.
pub const MANUAL_DELETE_PASSES: u32 = 20;
