//! Store configuration. Format-defining values (segment size, consume-queue file size) must
//! not change for an existing store; tunables (flush interval, cache sizes) may.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

use comet_rt::io::FaultInjector;

use crate::error::StoreError;
use crate::limits;
use crate::offset::LogId;
use crate::recovery_progress::RecoveryProgress;

/// When an append is acknowledged (RocketMQ `flushDiskType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushPolicy {
    /// Acknowledge after the fdatasync covering the record (group commit). The default.
    Sync,
    /// Acknowledge after the in-memory append; flush every `flush_interval_ms`, or sooner when
    /// `flush_least_bytes` are pending.
    Async,
}

/// Everything a store needs to open.
#[derive(Clone)]
pub struct StoreConfig {
    /// Store root (`storePathRootDir`).
    pub root: PathBuf,
    /// The id of this store's commit log (top bits of its physical offsets).
    pub log_id: LogId,
    /// Commit-log segment size; a multiple of the page.
    pub segment_bytes: u64,
    /// When appends are acknowledged.
    pub flush_policy: FlushPolicy,
    /// ASYNC_FLUSH: longest time dirty data waits for its flush.
    pub flush_interval_ms: u64,
    /// ASYNC_FLUSH: pending bytes that start a flush before the interval ends.
    pub flush_least_bytes: usize,
    /// ASYNC_FLUSH: most bytes appended but not yet durable before appends wait (bounds
    /// memory when producers outpace the disk).
    pub async_dirty_bytes_max: u64,
    /// Size of one in-memory append chunk.
    pub chunk_bytes: usize,
    /// Bytes of recent chunks kept for tailing readers.
    pub read_cache_bytes: usize,
    /// Bytes of windows read from the commit log's disk kept across pulls, so the queues
    /// that interleave in the log read each cold range once (see `read_windows`); 0 keeps
    /// none, otherwise at least one read-ahead and at most
    /// [`READ_WINDOW_CACHE_BYTES_MAX`](limits::READ_WINDOW_CACHE_BYTES_MAX).
    pub read_window_cache_bytes: usize,
    /// Bytes of the commit log kept written with zeros ahead of the write position, so a
    /// durable write never also converts preallocated blocks (see `warm`); 0 turns the
    /// warmer off (RocketMQ's `warmMapedFileEnable`).
    pub warm_ahead_bytes: u64,
    /// Log bytes below a checkpoint's dispatch position that recovery after a crash
    /// re-verifies when a record boundary that far back is known (see
    /// `checkpoint::VerifyBoundaries`); what a crash costs at restart besides the log written
    /// since the checkpoint.
    pub crash_verify_behind_bytes: u64,
    /// Bytes of log per key-index file (see `index`): the keys of the newest one or two spans
    /// are held in memory (about 48 bytes each), older spans are sealed to disk. A new index
    /// takes it when it divides `segment_bytes`, else the segment size; an existing index
    /// keeps the span it was created with.
    pub index_span_bytes: u64,
    /// Most commit-log flushes in flight at once: 2 lets a flush start while another is
    /// writing, when appends keep arriving (see `flush`); 1 writes one flush at a time and
    /// never pads the log.
    pub flushes_in_flight_max: usize,
    /// Entries per consume-queue file; a multiple of 1024 (whole pages).
    pub cq_entries_per_file: u64,
    /// Bytes of consume-queue blocks read from disk kept in memory (cold ranges: backlogs,
    /// lookups by time); 0 caches none. Hot tails are not counted: a small constant per
    /// queue (see `consume_queue`).
    pub cq_cache_bytes: usize,
    /// How often consume queues, the key index and the checkpoint are flushed.
    pub cq_flush_interval_ms: u64,
    /// Most consume-queue files kept open at once (at least 1): a flush opens the files it
    /// writes through a pool this large (see `cq_files`), so descriptors do not grow with
    /// the number of queues.
    pub cq_open_files_max: usize,
    /// Segments older than this expire (`fileReservedTime`).
    pub file_reserved_hours: u64,
    /// Hours of the day, in the machine's local time as Java's `deleteWhen` is, when expired
    /// segments are deleted (`04;16` is `[4, 16]`).
    pub delete_when_hours: Vec<u32>,
    /// Disk use fraction past which expired segments are deleted at any hour
    /// (`diskMaxUsedSpaceRatio`, Java's default 75%).
    pub disk_max_used_ratio: f64,
    /// Disk use fraction past which the oldest segment goes at once, expired or not
    /// (`diskSpaceCleanForciblyRatio`).
    pub disk_high_ratio: f64,
    /// Disk use fraction past which appends are refused (`diskSpaceWarningLevelRatio`).
    pub disk_hard_ratio: f64,
    /// How often retention and disk use are checked.
    pub retention_check_interval_ms: u64,
    /// Delay of each delay level, ms (`messageDelayLevel`); the schedule topic's consume-queue
    /// tag field holds store time plus this delay.
    pub delay_levels_ms: Vec<i64>,
    /// Test-only fault injection for every file the store opens.
    pub faults: Option<Rc<FaultInjector>>,
    /// Which queues this store owns; `None`: every queue. Recovery dispatches records of
    /// queues owned elsewhere (handed over after a shard-count change, see
    /// [`remap`](crate::remap)) into the key index only, and never loads their directories.
    pub owns_queue: Option<OwnsQueue>,
    /// Segment directories (`.../commitlog/<log id>`) of other commit logs, by log id:
    /// consume queues handed over from another store point into them, and reads of those
    /// entries open their sealed segments read-only. Entries of a log that is neither this
    /// store's nor listed here, or whose directory holds no segment, count as deleted.
    pub other_logs: BTreeMap<LogId, PathBuf>,
    /// Logs of `other_logs` that no shard writes any more and that this store looks after:
    /// retention of their segments, query by key of their index (see `orphan`).
    pub adopted_logs: BTreeSet<LogId>,
    /// SYNC_MASTER: records become visible to consumers (consume-queue and key-index
    /// entries) only up to the position the slaves confirmed (`Store::confirm`) as well as
    /// durably written here, so a failover can never take back a record someone read.
    /// Off by default: visible once durable. Recovery makes the recovered log visible,
    /// unless `hold_unconfirmed_at_open`.
    pub visible_after_confirm: bool,
    /// A slave's store (with `visible_after_confirm`): recovery shows readers only what was
    /// visible at the last checkpoint; the rest of the recovered log waits for its master's
    /// confirm, or is taken back live (`Store::truncate_unconfirmed`) when the master no
    /// longer holds it, so a restart never shows bytes a master could take back.
    pub hold_unconfirmed_at_open: bool,
    /// Ends the log at this position at open (a slave whose log diverged from its master's):
    /// it must be a record boundary at or below the recovered end; records from it on, and
    /// their consume-queue and key-index entries, are dropped. `None` keeps the log.
    pub truncate_log_to: Option<u64>,
    /// Drops the whole log at open, with its key index and the consume queues this store
    /// owns, and starts it empty at this segment start (a slave copying its master afresh
    /// from the master's oldest retained segment). `None` keeps the log.
    pub reset_log_to: Option<u64>,
    /// Where the open reports how far it has got (see [`RecoveryProgress`]); shared with
    /// whoever wants to watch it from another thread.
    pub recovery_progress: Arc<RecoveryProgress>,
}

/// Ownership test of a store: `(topic, queue id) -> owned`.
pub type OwnsQueue = Rc<dyn Fn(&str, i32) -> bool>;

/// RocketMQ's default `messageDelayLevel`: 1s 5s 10s 30s 1m 2m ... 2h.
pub fn default_delay_levels_ms() -> Vec<i64> {
    let seconds: [i64; 18] = [
        1, 5, 10, 30, 60, 120, 180, 240, 300, 360, 420, 480, 540, 600, 1200, 1800, 3600, 7200,
    ];
    seconds.iter().map(|s| s * 1000).collect()
}

impl StoreConfig {
    /// Defaults for a store at `root` with log id `log_id`.
    pub fn new(root: impl Into<PathBuf>, log_id: LogId) -> StoreConfig {
        StoreConfig {
            root: root.into(),
            log_id,
            segment_bytes: limits::SEGMENT_BYTES_DEFAULT,
            flush_policy: FlushPolicy::Sync,
            flush_interval_ms: 200,
            flush_least_bytes: 16 * 1024,
            async_dirty_bytes_max: limits::ASYNC_DIRTY_BYTES_MAX_DEFAULT,
            chunk_bytes: limits::CHUNK_BYTES_DEFAULT,
            read_cache_bytes: limits::READ_CACHE_BYTES_DEFAULT,
            read_window_cache_bytes: limits::READ_WINDOW_CACHE_BYTES_DEFAULT,
            warm_ahead_bytes: limits::WARM_AHEAD_BYTES_DEFAULT,
            crash_verify_behind_bytes: limits::VERIFY_BEHIND_BYTES,
            index_span_bytes: limits::INDEX_SPAN_BYTES_DEFAULT,
            flushes_in_flight_max: limits::FLUSHES_IN_FLIGHT_MAX,
            cq_entries_per_file: limits::CQ_ENTRIES_PER_FILE_DEFAULT,
            cq_cache_bytes: limits::CQ_CACHE_BYTES_DEFAULT,
            cq_flush_interval_ms: 1000,
            cq_open_files_max: limits::CQ_OPEN_FILES_DEFAULT,
            file_reserved_hours: 72,
            delete_when_hours: vec![4],
            disk_max_used_ratio: 0.75,
            disk_high_ratio: 0.85,
            disk_hard_ratio: 0.90,
            retention_check_interval_ms: 10_000,
            delay_levels_ms: default_delay_levels_ms(),
            faults: None,
            owns_queue: None,
            other_logs: BTreeMap::new(),
            adopted_logs: BTreeSet::new(),
            visible_after_confirm: false,
            hold_unconfirmed_at_open: false,
            truncate_log_to: None,
            reset_log_to: None,
            recovery_progress: Arc::new(RecoveryProgress::default()),
        }
    }

    /// The span a new key index takes (see [`StoreConfig::index_span_bytes`]).
    pub(crate) fn new_index_span_bytes(&self) -> u64 {
        if self.segment_bytes % self.index_span_bytes == 0 {
            self.index_span_bytes
        } else {
            self.segment_bytes
        }
    }

    /// Checks every value and relation; called by `Store::open`.
    pub fn validate(&self) -> Result<(), StoreError> {
        let page = limits::PAGE_BYTES;
        let bad = |what: String| Err(StoreError::Config(what));
        if self.segment_bytes % page != 0
            || !(limits::SEGMENT_BYTES_MIN..=limits::SEGMENT_BYTES_MAX)
                .contains(&self.segment_bytes)
        {
            return bad(format!("segment_bytes {} invalid", self.segment_bytes));
        }
        if self.cq_entries_per_file == 0 || self.cq_entries_per_file % 1024 != 0 {
            return bad(format!(
                "cq_entries_per_file {} must be a positive multiple of 1024",
                self.cq_entries_per_file
            ));
        }
        if self.cq_open_files_max == 0 {
            return bad("cq_open_files_max must be at least 1".to_string());
        }
        if self.index_span_bytes == 0 || self.index_span_bytes % page != 0 {
            return bad(format!(
                "index_span_bytes {} must be a positive multiple of the page",
                self.index_span_bytes
            ));
        }
        if self.warm_ahead_bytes % page != 0 {
            return bad(format!(
                "warm_ahead_bytes {} is not a multiple of the page",
                self.warm_ahead_bytes
            ));
        }
        if !(1..=limits::FLUSHES_IN_FLIGHT_MAX).contains(&self.flushes_in_flight_max) {
            return bad(format!(
                "flushes_in_flight_max {} must be 1 or {}",
                self.flushes_in_flight_max,
                limits::FLUSHES_IN_FLIGHT_MAX
            ));
        }
        let windows = self.read_window_cache_bytes;
        if windows != 0
            && !(limits::READ_AHEAD_BYTES..=limits::READ_WINDOW_CACHE_BYTES_MAX).contains(&windows)
        {
            return bad(format!(
                "read_window_cache_bytes {windows} must be 0 or {}..={}",
                limits::READ_AHEAD_BYTES,
                limits::READ_WINDOW_CACHE_BYTES_MAX
            ));
        }
        if self.chunk_bytes < 64 * 1024 {
            return bad(format!("chunk_bytes {} below 64 KiB", self.chunk_bytes));
        }
        let ratios = [
            self.disk_max_used_ratio,
            self.disk_high_ratio,
            self.disk_hard_ratio,
        ];
        if !ratios.iter().all(|ratio| (0.0..=1.0).contains(ratio)) {
            return bad("disk ratios must lie in [0, 1]".to_string());
        }
        if let Some(from) = self.reset_log_to {
            if from % self.segment_bytes != 0 || from > crate::offset::POSITION_MASK {
                return bad(format!("reset_log_to {from} is not a segment start"));
            }
            if self.truncate_log_to.is_some() {
                return bad("reset_log_to and truncate_log_to both set".to_string());
            }
        }
        if self.hold_unconfirmed_at_open && !self.visible_after_confirm {
            return bad("hold_unconfirmed_at_open needs visible_after_confirm".to_string());
        }
        if self.delete_when_hours.iter().any(|hour| *hour > 23) || self.flush_interval_ms == 0 {
            return bad("a delete_when_hours hour above 23 or flush_interval_ms zero".to_string());
        }
        Ok(())
    }

    /// Whether this store owns `(topic, queue_id)`.
    pub fn owns(&self, topic: &str, queue_id: i32) -> bool {
        self.owns_queue
            .as_ref()
            .is_none_or(|owns| owns(topic, queue_id))
    }

    /// Largest record the appender accepts (must fit a segment with its end marker).
    pub fn record_bytes_max(&self) -> usize {
        let segment_limit = usize::try_from(self.segment_bytes / 2).unwrap_or(usize::MAX);
        limits::RECORD_BYTES_MAX.min(segment_limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the defaults pass and every refused value is a Config error naming the field.
    #[test]
    fn validation_names_the_bad_field() {
        let base = StoreConfig::new("unused", LogId::new(1).expect("id"));
        assert!(base.validate().is_ok());
        let mut no_windows = base.clone();
        no_windows.read_window_cache_bytes = 0;
        assert!(no_windows.validate().is_ok(), "0 keeps no read window");
        type Case = (&'static str, Box<dyn Fn(&mut StoreConfig)>);
        let cases: Vec<Case> = vec![
            (
                "segment_bytes",
                Box::new(|c| c.segment_bytes = (1 << 20) + 1),
            ),
            ("segment_bytes", Box::new(|c| c.segment_bytes = 4096)),
            (
                "cq_entries_per_file",
                Box::new(|c| c.cq_entries_per_file = 1000),
            ),
            ("cq_open_files_max", Box::new(|c| c.cq_open_files_max = 0)),
            ("warm_ahead_bytes", Box::new(|c| c.warm_ahead_bytes = 1000)),
            ("index_span_bytes", Box::new(|c| c.index_span_bytes = 0)),
            ("index_span_bytes", Box::new(|c| c.index_span_bytes = 5000)),
            (
                "flushes_in_flight_max",
                Box::new(|c| c.flushes_in_flight_max = 0),
            ),
            (
                "flushes_in_flight_max",
                Box::new(|c| c.flushes_in_flight_max = 3),
            ),
            ("chunk_bytes", Box::new(|c| c.chunk_bytes = 4096)),
            (
                "read_window_cache_bytes",
                Box::new(|c| c.read_window_cache_bytes = 4096),
            ),
            (
                "read_window_cache_bytes",
                Box::new(|c| c.read_window_cache_bytes = (1 << 30) + 1),
            ),
            ("disk ratios", Box::new(|c| c.disk_high_ratio = 1.5)),
            ("flush_interval_ms", Box::new(|c| c.flush_interval_ms = 0)),
            (
                "delete_when_hours",
                Box::new(|c| c.delete_when_hours = vec![4, 24]),
            ),
            ("disk ratios", Box::new(|c| c.disk_max_used_ratio = -0.1)),
            ("reset_log_to", Box::new(|c| c.reset_log_to = Some(4096))),
            (
                "reset_log_to",
                Box::new(|c| {
                    c.reset_log_to = Some(0);
                    c.truncate_log_to = Some(0);
                }),
            ),
        ];
        for (field, spoil) in cases {
            let mut config = base.clone();
            spoil(&mut config);
            match config.validate() {
                Err(StoreError::Config(message)) => {
                    assert!(message.contains(field), "{field}: {message}");
                }
                other => panic!("{field}: expected a config error, got {other:?}"),
            }
        }
    }
}
