//! The shard state: everything the store's parts and background tasks share, one instance
//! per store (single shard, so `Rc` + `RefCell`; no borrow is held across an await). The
//! parts above it (`flush`, `warm`, `append`, `read`, `maintenance`, ...) each use the fields
//! they need; `store` owns it.

use std::cell::{Cell, RefCell};

use comet_rt::local::LocalTask;
use comet_rt::sync::{PositionWaiters, WakerList};

use crate::checkpoint::{CheckpointFile, VerifyBoundaries};
use crate::commit_log::CommitLog;
use crate::config::StoreConfig;
use crate::cq_cache::CqCache;
use crate::cq_files::CqFiles;
use crate::flights::Flights;
use crate::histogram::{RecoveryFigures, StoreHistograms};
use crate::index::KeyIndex;
use crate::queues::Queues;

/// Counters for benchmarks and metrics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StoreStats {
    /// Records appended.
    pub appended_records: u64,
    /// Bytes of records appended.
    pub appended_bytes: u64,
    /// Flushes completed (each ends with every file it wrote durable).
    pub flushes: u64,
    /// Syncs of commit-log segments: fdatasync calls and O_DSYNC writes (each makes the
    /// segment durable up to its end).
    pub fdatasyncs: u64,
    /// Bytes written to commit-log segments (tail pages count each time).
    pub written_bytes: u64,
    /// Reads of commit-log data from disk (cache misses of the read path).
    pub disk_reads: u64,
    /// Records (or record heads) of the own log the read path found in a read window kept
    /// from an earlier pull (see `read_windows`): disk reads saved.
    pub read_window_hits: u64,
    /// Records (or record heads) of the own log neither in memory nor in a kept read window:
    /// each read its window from disk (and counts in `disk_reads`).
    pub read_window_misses: u64,
    /// Reads of consume-queue blocks from their files (cold ranges the hot tails and the
    /// block cache did not hold).
    pub cq_disk_reads: u64,
    /// Bytes of zeros the warmer wrote ahead of the write position (see `warm`).
    pub zeroed_bytes: u64,
    /// Bytes of padding that put a flush's end on a page, so the next could start while it
    /// was in flight (see `flush`).
    pub padding_bytes: u64,
    /// Flushes that started while another was in flight.
    pub pipelined_flushes: u64,
    /// Lazy flushes of the consume queues (each writes every queue dirty at its start).
    pub cq_flushes: u64,
    /// Microseconds the lazy flushes of the consume queues took, in total (wall time:
    /// opening, writing and syncing their files).
    pub cq_flush_us: u64,
    /// Consume-queue files those flushes opened or created (the others were still open in
    /// the pool, see `cq_files`).
    pub cq_file_opens: u64,
}

/// Everything the store's parts and tasks share (see the module docs).
pub(crate) struct Shared {
    pub(crate) config: StoreConfig,
    pub(crate) log: RefCell<CommitLog>,
    pub(crate) queues: RefCell<Queues>,
    /// Blocks of consume-queue files read for cold ranges (see `cq_cache`).
    pub(crate) cq_cache: RefCell<CqCache>,
    /// Consume-queue files open for flushes (see `cq_files`).
    pub(crate) cq_files: RefCell<CqFiles>,
    /// The queue table last written (see `queue_table`): an unchanged one is not rewritten.
    pub(crate) queue_table_bytes: RefCell<Vec<u8>>,
    pub(crate) index: RefCell<KeyIndex>,
    pub(crate) checkpoint: RefCell<Option<CheckpointFile>>,
    /// Record boundaries a checkpoint's verify-from position is chosen among.
    pub(crate) verify_boundaries: RefCell<VerifyBoundaries>,
    pub(crate) failure: RefCell<Option<String>>,
    pub(crate) spare_failure: RefCell<Option<String>>,
    pub(crate) disk_full: Cell<Option<(u32, u32)>>,
    /// Retention passes left that delete expired segments whatever the hour (see
    /// `Store::delete_expired_manually`).
    pub(crate) manual_delete_passes: Cell<u32>,
    pub(crate) closed: Cell<bool>,
    /// Dropped without shutdown (see `Store`).
    pub(crate) abandoned: Cell<bool>,
    /// Live user handles.
    pub(crate) handles: Cell<usize>,
    pub(crate) durable_waiters: PositionWaiters,
    pub(crate) flush_wanted: WakerList,
    /// Woken whenever a read of a window ends (see `read_windows`): pulls that found the
    /// window they need already being read wait for that read instead of reading it again.
    pub(crate) window_read: WakerList,
    /// Woken by every append: a master's replication senders stream written bytes.
    pub(crate) appended: WakerList,
    /// The index linker, waiting for unlinked entries.
    pub(crate) index_pushed: WakerList,
    /// The disk dispatcher: visible records wait that the cache no longer holds.
    pub(crate) dispatch_lagging: WakerList,
    pub(crate) spare_ready: WakerList,
    /// Flushes planned and in flight (the warmer waits while any is, see `warm`).
    pub(crate) flights: RefCell<Flights>,
    /// The last flush to complete found appends waiting for the next one (see `flush`).
    pub(crate) next_flush_waited: Cell<bool>,
    /// Bytes the last flush wrote (the warmer only runs behind small flushes).
    pub(crate) last_flush_bytes: Cell<u64>,
    /// The zero write in flight, `[low, high)` log positions.
    pub(crate) zero_in_flight: Cell<Option<(u64, u64)>>,
    /// Everything below this (and below the write position) is written on disk.
    pub(crate) warmed_to: Cell<u64>,
    /// The warmer, waiting for a flush to end, the spare, or room ahead.
    pub(crate) warm_wanted: WakerList,
    /// A flush waiting for the zero write it meets.
    pub(crate) zero_done: WakerList,
    /// Background tasks sleeping until their next pass, woken when the store closes.
    pub(crate) closing: WakerList,
    pub(crate) maintenance_busy: Cell<bool>,
    pub(crate) maintenance_free: WakerList,
    pub(crate) last_store_timestamp_ms: Cell<i64>,
    /// Log position confirmed by the slaves (`Store::confirm`); limits visibility under
    /// `StoreConfig::visible_after_confirm`. Only moves forward.
    pub(crate) confirmed: Cell<u64>,
    /// Set by the first `Store::append_replicated`: the log is a copy of a master's, so
    /// only the master may pad it (a page of padding here would put every later byte of
    /// the master's at another position).
    pub(crate) replica: Cell<bool>,
    pub(crate) stats: Cell<StoreStats>,
    /// Group-commit sizes and sync latencies (see `histogram`).
    pub(crate) histograms: RefCell<StoreHistograms>,
    /// Records appended that a flush plan has counted in its size (see `flush`).
    pub(crate) planned_records: Cell<u64>,
    /// What the open's recovery did.
    pub(crate) recovery: RecoveryFigures,
    pub(crate) tasks: RefCell<Vec<LocalTask<()>>>,
    pub(crate) lock_file: RefCell<Option<std::fs::File>>,
}

/// What recovery hands over: the log and the derived state rebuilt from it.
pub(crate) struct RecoveredState {
    pub(crate) log: CommitLog,
    pub(crate) queues: Queues,
    pub(crate) index: KeyIndex,
    pub(crate) checkpoint: CheckpointFile,
    /// Record boundaries of the log known at open (where dispatch starts is added).
    pub(crate) boundaries: Vec<u64>,
    /// Log bytes the recovery scan read, and whether the last run crashed.
    pub(crate) recovery: RecoveryFigures,
}

impl Shared {
    /// The state of a store just recovered, holding its lock file; nothing in flight.
    pub(crate) fn new(
        config: StoreConfig,
        recovered: RecoveredState,
        lock: std::fs::File,
    ) -> Shared {
        let flights = Flights::new(recovered.log.durable, config.flushes_in_flight_max);
        // What recovery made visible counts as confirmed (all of it, unless it held the
        // unconfirmed tail back, see `StoreConfig::hold_unconfirmed_at_open`).
        let confirmed = recovered.log.dispatched;
        let mut boundaries = recovered.boundaries.clone();
        boundaries.push(recovered.log.dispatched);
        let verify_boundaries = VerifyBoundaries::new(boundaries, config.crash_verify_behind_bytes);
        let cq_cache = CqCache::new(config.cq_cache_bytes);
        let cq_files = CqFiles::new(config.cq_open_files_max);
        Shared {
            config,
            log: RefCell::new(recovered.log),
            queues: RefCell::new(recovered.queues),
            cq_cache: RefCell::new(cq_cache),
            cq_files: RefCell::new(cq_files),
            queue_table_bytes: RefCell::new(Vec::new()),
            index: RefCell::new(recovered.index),
            checkpoint: RefCell::new(Some(recovered.checkpoint)),
            verify_boundaries: RefCell::new(verify_boundaries),
            failure: RefCell::new(None),
            spare_failure: RefCell::new(None),
            disk_full: Cell::new(None),
            manual_delete_passes: Cell::new(0),
            replica: Cell::new(false),
            closed: Cell::new(false),
            abandoned: Cell::new(false),
            handles: Cell::new(1),
            durable_waiters: PositionWaiters::default(),
            flush_wanted: WakerList::default(),
            window_read: WakerList::default(),
            appended: WakerList::default(),
            index_pushed: WakerList::default(),
            dispatch_lagging: WakerList::default(),
            spare_ready: WakerList::default(),
            flights: RefCell::new(flights),
            next_flush_waited: Cell::new(false),
            last_flush_bytes: Cell::new(0),
            zero_in_flight: Cell::new(None),
            warmed_to: Cell::new(0),
            warm_wanted: WakerList::default(),
            zero_done: WakerList::default(),
            closing: WakerList::default(),
            maintenance_busy: Cell::new(false),
            maintenance_free: WakerList::default(),
            last_store_timestamp_ms: Cell::new(0),
            confirmed: Cell::new(confirmed),
            stats: Cell::new(StoreStats::default()),
            histograms: RefCell::new(StoreHistograms::default()),
            planned_records: Cell::new(0),
            recovery: recovered.recovery,
            tasks: RefCell::new(Vec::new()),
            lock_file: RefCell::new(Some(lock)),
        }
    }

    /// The last user handle went away without shutdown: stop like a crash would.
    pub(crate) fn abandon(&self) {
        self.closed.set(true);
        self.abandoned.set(true);
        self.lock_file.borrow_mut().take();
        self.durable_waiters.wake_all();
        self.flush_wanted.wake_all();
        self.appended.wake_all();
        self.index_pushed.wake_all();
        self.dispatch_lagging.wake_all();
        self.spare_ready.wake_all();
        self.warm_wanted.wake_all();
        self.zero_done.wake_all();
        self.closing.wake_all();
        self.arrivals_wake_all();
        self.tasks.borrow_mut().clear();
        // Dropped files close at the next I/O cycle; nothing more is written to them.
        self.cq_files.borrow_mut().drain();
    }

    /// Wakes every reader waiting for new data (shutdown).
    pub(crate) fn arrivals_wake_all(&self) {
        for queues in self.queues.borrow().values() {
            for queue in queues.values() {
                queue.arrivals.wake_all();
            }
        }
    }
}
