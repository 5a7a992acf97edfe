//! Opening a store's files: lock, load, recover. Produces the state the store runs on
//! (`shard::RecoveredState`); the store facade starts the background tasks.
//!
//! Recovery scans the commit log from the checkpoint's dispatch position (after a crash, from
//! the record boundary the checkpoint names a bounded distance below it, see `checkpoint`,
//! else from the start of the segment holding it, so recently written data is re-verified),
//! checks every record (magic, lengths, body CRC, its PHYSICALOFFSET, and that its queue
//! offset continues its queue), and ends the log at the first record that fails.
//! Consume queues and the index are cut back to the scan start and rebuilt from the scan,
//! so recovery reads the log written since the checkpoint, not what is retained.
//! Consume queues are trusted up to what their files hold: opening one reads the end of
//! its last file and checks its files against the queue table (`queue_table`), which says
//! what each queue's files held at the last checkpoint. A queue found short (a file cut
//! short, deleted or zeroed), or whose records past the checkpoint skip offsets it lacks,
//! is repaired alone from the commit log (`queue_repair`), so a short queue file never
//! hides records behind placeholders and never costs a rebuild of every queue.
//! After a crash the bytes past the end are zeroed (as far as one flush can have reached), so
//! a torn write can never reappear behind newer records.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Instant;

use comet_proto::message::{peek_total_size_and_magic, RecordView, BLANK_MAGIC};
use comet_rt::io::{DirectFile, OpenMode};
use comet_rt::sync::WakerList;

use crate::checkpoint::CheckpointFile;
use crate::commit_log::{
    align_down, align_up, to_index, CommitLog, CommitLogShape, BLANK_BYTES, PADDING_BYTES_MAX,
};
use crate::config::StoreConfig;
use crate::consume_queue::{ConsumeQueue, Promise};
use crate::error::{setup_error, StoreError, TruncateFault};
use crate::histogram::RecoveryFigures;
use crate::index::KeyIndex;
use crate::limits::{
    CQ_RECOVERY_FLUSH_ENTRIES, FLUSHES_IN_FLIGHT_MAX, FLUSH_BYTES_MAX, PAGE_BYTES,
    RECOVERY_READ_BYTES,
};
use crate::offset::{file_name, parse_file_name};
use crate::queue_repair::{flush_queue, repair_queue, Progress};
use crate::queue_table::{self, QueueRecord};
use crate::queues::{dispatch_record, QueueState, Queues};
use crate::shard::RecoveredState;

/// Paths of one store.
pub(crate) struct Layout {
    pub(crate) commit_log: PathBuf,
    pub(crate) index: PathBuf,
    pub(crate) checkpoint: PathBuf,
    pub(crate) abort: PathBuf,
    pub(crate) lock: PathBuf,
}

impl Layout {
    pub(crate) fn new(config: &StoreConfig) -> Layout {
        let log = config.log_id.to_string();
        Layout {
            commit_log: config.root.join("commitlog").join(&log),
            index: config.root.join("index").join(&log),
            checkpoint: config.root.join("checkpoint").join(&log),
            abort: config.root.join("abort"),
            lock: config.root.join("lock"),
        }
    }
}

/// What recovery found, for the log line and tests.
struct Recovered {
    log: CommitLog,
    queues: Queues,
    index: KeyIndex,
    checkpoint: CheckpointFile,
    end: u64,
    crashed: bool,
    /// Log bytes the scan read and checked.
    scanned_bytes: u64,
    /// Record boundaries of the log known at open (see `checkpoint::VerifyBoundaries`).
    boundaries: Vec<u64>,
}

/// Creates the store's directories.
pub(crate) fn create_dirs(config: &StoreConfig) -> Result<(), StoreError> {
    let layout = Layout::new(config);
    for dir in [
        &layout.commit_log,
        &layout.index,
        layout.checkpoint.parent().expect("dir"),
    ] {
        std::fs::create_dir_all(dir).map_err(|error| setup_error(dir, error))?;
    }
    Ok(())
}

/// Takes the store's lock, recovers its log and derived state, and marks the store running
/// (`abort`, removed by a clean shutdown). Returns the state and the held lock file.
///
/// Uses blocking file-system calls (directory listings, the lock): the store serves nothing
/// yet.
pub(crate) async fn recover_locked(
    config: &StoreConfig,
    started: Instant,
) -> Result<(RecoveredState, std::fs::File), StoreError> {
    let layout = Layout::new(config);
    let lock_file = take_lock(&layout.lock)?;
    let recovered = recover(config, &layout).await?;
    std::fs::write(&layout.abort, std::process::id().to_string())
        .map_err(|error| setup_error(&layout.abort, error))?;
    log::info!(
        "store {} log {} recovered in {} ms (crashed: {}, end position {}, {} queues)",
        config.root.display(),
        config.log_id,
        started.elapsed().as_millis(),
        recovered.crashed,
        recovered.end,
        recovered.queues.values().map(HashMap::len).sum::<usize>(),
    );
    let state = RecoveredState {
        log: recovered.log,
        queues: recovered.queues,
        index: recovered.index,
        checkpoint: recovered.checkpoint,
        boundaries: recovered.boundaries,
        recovery: RecoveryFigures {
            duration_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
            scanned_bytes: recovered.scanned_bytes,
            crashed: recovered.crashed,
        },
    };
    Ok((state, lock_file))
}

/// Takes the exclusive lock on `lock` (byte 0, like RocketMQ) or fails with `Locked`.
pub(crate) fn take_lock(path: &Path) -> Result<std::fs::File, StoreError> {
    use std::os::fd::AsRawFd;
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .open(path)
        .map_err(|error| setup_error(path, error))?;
    // SAFETY: flock on a valid descriptor owned by `file`.
    let status = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if status != 0 {
        return Err(StoreError::Locked {
            path: path.to_path_buf(),
        });
    }
    Ok(file)
}

fn list_numbered(dir: &Path) -> Result<Vec<u64>, StoreError> {
    let mut starts = Vec::new();
    for item in std::fs::read_dir(dir).map_err(|error| setup_error(dir, error))? {
        let item = item.map_err(|error| setup_error(dir, error))?;
        if let Some(start) = item.file_name().to_str().and_then(parse_file_name) {
            starts.push(start);
        }
    }
    starts.sort_unstable();
    Ok(starts)
}

async fn recover(config: &StoreConfig, layout: &Layout) -> Result<Recovered, StoreError> {
    if let Some(from) = config.reset_log_to {
        reset_log(config, layout, from).await?;
    }
    let crashed = layout.abort.exists();
    let checkpoint = CheckpointFile::open(&layout.checkpoint, config.faults.clone()).await?;
    let mut segments = open_segments(config, layout).await?;
    let mut queues = load_queues(config, &read_queue_table(config))?;
    let span = crate::index::index_span(
        &layout.index,
        config.segment_bytes,
        config.new_index_span_bytes(),
        true,
    )?;
    let mut index = KeyIndex::new(layout.index.clone(), config.log_id, span);
    index.load(&config.faults).await?;
    let first = segments.keys().next().copied().unwrap_or(0);
    let last = segments.keys().next_back().copied().unwrap_or(0);
    let mut scan_start = checkpoint.last().dispatch_durable_position.max(first);
    if scan_start > last + config.segment_bytes {
        scan_start = (scan_start - scan_start % config.segment_bytes).min(last);
    } else if crashed {
        // After a crash, re-verify from below the page holding the checkpoint: every flush
        // rewrites the partial page holding the durable position, so a torn write can damage
        // records just below the checkpoint. From the record boundary the checkpoint names
        // (see `checkpoint`), else from the start of the segment it points into (not "the
        // last segment": that can be the empty spare, past the checkpoint).
        // Never from below that segment's start (a boundary too): reaching further back would
        // only cut every queue back further and rebuild it.
        let checkpoint_segment = scan_start - scan_start % config.segment_bytes;
        let segment_start = checkpoint_segment.max(first).min(last);
        scan_start = match checkpoint.last().verify_from {
            Some(verify_from) => verify_from.max(segment_start),
            None => segment_start,
        };
    }
    let mut watch = BoundaryWatch::new(config.truncate_log_to);
    if let Some(to) = config.truncate_log_to {
        if to < first {
            let fault = TruncateFault::BelowOldest { oldest: first };
            return Err(StoreError::TruncateRefused {
                position: to,
                fault,
            });
        }
        // The segment holding `to` is scanned whole: its records below `to` are dispatched
        // again (its sealed key index goes), and the scan sees whether `to` is a boundary.
        scan_start = scan_start.min(to - to % config.segment_bytes).max(first);
    }
    truncate_derived(&mut queues, &mut index, config, scan_start).await?;
    // A slave shows after a restart only what was visible at its last checkpoint: the rest
    // is checked and kept, not dispatched (see `StoreConfig::hold_unconfirmed_at_open`).
    // Not with a truncation at open: what the master answered is what it holds.
    let holds = config.hold_unconfirmed_at_open
        && config.truncate_log_to.is_none()
        && config.reset_log_to.is_none();
    let hold_from = holds.then(|| checkpoint.last().dispatch_durable_position.max(scan_start));
    let (mut end, held_next) = scan(
        config,
        &segments,
        (scan_start, hold_from),
        &mut queues,
        &mut index,
        &mut watch,
    )
    .await?;
    // Held records are not dispatched: a short queue is rebuilt only up to where they start.
    let repair_end = hold_from.map_or(end, |hold_from| hold_from.min(end));
    repair_promised(config, &segments, &mut queues, repair_end, &held_next).await?;
    if crashed {
        zero_past_end(config, &segments, end).await?;
    }
    if let Some(to) = config.truncate_log_to {
        end = truncate_log(config, layout, &segments, &watch, end, to).await?;
    }
    drop_segments_past(&mut segments, config, end).await?;
    ensure_segment(config, layout, &mut segments, end).await?;
    truncate_derived(&mut queues, &mut index, config, end).await?;
    // Held records took their queues' next offsets: later appends continue after them.
    for ((topic, queue_id), next) in held_next {
        let queue = crate::queues::queue_state(&mut queues, config, &topic, queue_id);
        queue.next_offset = queue.next_offset.max(next);
    }
    let tail_page = read_tail_page(config, &segments, end).await?;
    let shape = CommitLogShape {
        dir: layout.commit_log.clone(),
        log_id: config.log_id,
        segment_bytes: config.segment_bytes,
        chunk_bytes: config.chunk_bytes,
        read_cache_bytes: config.read_cache_bytes,
        read_window_cache_bytes: config.read_window_cache_bytes,
    };
    let mut log = CommitLog::new(shape, segments, end, &tail_page);
    if let Some(hold_from) = hold_from {
        log.dispatched = hold_from.min(end);
    }
    // Where the scan started and the checkpoint's own verify-from position are boundaries
    // below the end, so a crash soon after this open need not rescan a whole segment.
    let boundaries = [Some(scan_start), checkpoint.last().verify_from, Some(end)]
        .into_iter()
        .flatten()
        .filter(|boundary| *boundary <= end)
        .collect();
    Ok(Recovered {
        log,
        queues,
        index,
        checkpoint,
        end,
        crashed,
        scanned_bytes: end.saturating_sub(scan_start),
        boundaries,
    })
}

async fn open_segments(
    config: &StoreConfig,
    layout: &Layout,
) -> Result<BTreeMap<u64, Rc<DirectFile>>, StoreError> {
    let mut segments = BTreeMap::new();
    let starts = list_numbered(&layout.commit_log)?;
    let what = format!(
        "store {} log {}: opening commit log segments",
        config.root.display(),
        config.log_id
    );
    let mut progress = Progress::counting(what, "segment", 0, starts.len() as u64);
    for (opened, start) in starts.into_iter().enumerate() {
        progress.at(opened as u64);
        let path = layout.commit_log.join(file_name(start));
        if start % config.segment_bytes != 0 {
            return Err(StoreError::corrupt(
                path,
                "segment start is not a segment boundary",
            ));
        }
        let file =
            DirectFile::open_data_sync(&path, OpenMode::ReadWrite, config.faults.clone()).await?;
        if file.alignment() > crate::limits::PAGE_BYTES {
            return Err(StoreError::Config(format!(
                "{}: device alignment {} above the page",
                path.display(),
                file.alignment()
            )));
        }
        segments.insert(start, Rc::new(file));
    }
    Ok(segments)
}

/// The queue table of this store's log (see `queue_table`); none when the log is cut back or
/// dropped at open, which leaves queues legitimately shorter than it.
fn read_queue_table(config: &StoreConfig) -> HashMap<(String, i32), QueueRecord> {
    if config.truncate_log_to.is_some() || config.reset_log_to.is_some() {
        return HashMap::new();
    }
    queue_table::read(&queue_table::table_path(&config.root, config.log_id))
}

/// Opens the consume queues this store owns: those with a directory, and those the queue
/// table lists (a deleted directory is a queue to repair). Blocking reads: start-up.
fn load_queues(
    config: &StoreConfig,
    table: &HashMap<(String, i32), QueueRecord>,
) -> Result<Queues, StoreError> {
    let mut names: Vec<(String, i32)> = table.keys().cloned().collect();
    let root = config.root.join("consumequeue");
    if let Ok(topics) = std::fs::read_dir(&root) {
        for topic in topics.flatten() {
            let Some(topic_name) = topic.file_name().to_str().map(str::to_string) else {
                continue;
            };
            let Ok(queue_dirs) = std::fs::read_dir(topic.path()) else {
                continue;
            };
            for queue_dir in queue_dirs.flatten() {
                let name = queue_dir.file_name();
                if let Some(queue_id) = name.to_str().and_then(|n| n.parse().ok()) {
                    names.push((topic_name.clone(), queue_id));
                }
            }
        }
    }
    names.sort_unstable();
    names.dedup();
    let what = format!(
        "store {} log {}: opening consume queues",
        config.root.display(),
        config.log_id
    );
    let mut progress = Progress::counting(what, "queue", 0, names.len() as u64);
    let mut queues = Queues::new();
    for (opened, (topic, queue_id)) in names.into_iter().enumerate() {
        progress.at(opened as u64);
        let dir = crate::queues::queue_dir(config, &topic, queue_id);
        if !config.owns(&topic, queue_id) {
            log::warn!(
                "ignoring consume queue {} owned by another store",
                dir.display()
            );
            continue;
        }
        let promise = table.get(&(topic.clone(), queue_id)).map(|record| Promise {
            min: record.min,
            max: record.max,
            min_physical: record.min_physical,
        });
        let queue = ConsumeQueue::load(dir, config.cq_entries_per_file, promise)?;
        let state = QueueState {
            next_offset: queue.max_offset(),
            consume_queue: queue,
            arrivals: WakerList::default(),
        };
        queues.entry(topic).or_default().insert(queue_id, state);
    }
    Ok(queues)
}

/// Cuts consume queues and index back to entries of records below `position`.
async fn truncate_derived(
    queues: &mut Queues,
    index: &mut KeyIndex,
    config: &StoreConfig,
    at: u64,
) -> Result<(), StoreError> {
    for topic_queues in queues.values_mut() {
        for queue in topic_queues.values_mut() {
            queue.consume_queue.truncate_from(config.log_id, at)?;
            queue.next_offset = queue.consume_queue.max_offset();
        }
    }
    // Sealed indexes of segments the scan re-dispatches are rebuilt in memory.
    for path in index.truncate_from(at) {
        comet_rt::io::remove_file(&path).await?;
    }
    Ok(())
}

/// Repairs every queue that ends short of what the queue table promised once the scan is
/// done (the records it lacks lie below the scan start: no later record showed the gap).
/// Records held back (`held_next`: past the hold point, checked but not dispatched) count
/// as present: they are in the log, and only wait for the master's confirmation.
async fn repair_promised(
    config: &StoreConfig,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    queues: &mut Queues,
    end: u64,
    held_next: &HashMap<(String, i32), u64>,
) -> Result<(), StoreError> {
    let mut short = Vec::new();
    for (topic, topic_queues) in queues.iter() {
        for (queue_id, queue) in topic_queues {
            let queue = &queue.consume_queue;
            if queue.max_offset() < queue.promised() {
                short.push((topic.clone(), *queue_id));
            }
        }
    }
    for (topic, queue_id) in short {
        repair_queue(config, segments, queues, (&topic, queue_id), end).await?;
        let queue = &queues[&topic][&queue_id];
        let (max, promised) = (
            queue.consume_queue.max_offset(),
            queue.consume_queue.promised(),
        );
        let held = held_next
            .get(&(topic.clone(), queue_id))
            .copied()
            .unwrap_or(0);
        if max.max(held) < promised {
            log::error!(
                "store {} log {}: consume queue {topic}/{queue_id} ends at {max}, the queue \
                 table said {promised}: the records between are not in the log",
                config.root.display(),
                config.log_id
            );
        }
        queues
            .get_mut(&topic)
            .and_then(|queues| queues.get_mut(&queue_id))
            .expect("just repaired")
            .next_offset = max;
    }
    Ok(())
}

/// Scans and dispatches records from `start`; returns where valid data ends, and the next
/// offset of each queue that records from `hold_from` on (checked, not dispatched)
/// continue. A record skipping offsets its queue lacks has that queue repaired first
/// (`queue_repair`).
async fn scan(
    config: &StoreConfig,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    (start, hold_from): (u64, Option<u64>),
    queues: &mut Queues,
    index: &mut KeyIndex,
    watch: &mut BoundaryWatch,
) -> Result<(u64, HashMap<(String, i32), u64>), StoreError> {
    let mut position = start;
    let last = segments.keys().next_back().copied().unwrap_or(0);
    let target = (last + config.segment_bytes).saturating_sub(start);
    config.recovery_progress.scan_target(target);
    let what = format!(
        "store {} log {}: recovery scan",
        config.root.display(),
        config.log_id
    );
    let mut scanner = Scanner {
        config,
        segments,
        queues,
        index,
        watch,
        repaired_at: None,
        progress: Progress::new(what, start, last + config.segment_bytes),
        start,
        unflushed: 0,
        hold_from: hold_from.unwrap_or(u64::MAX),
        held_next: HashMap::new(),
    };
    let end = loop {
        let segment_start = position - position % config.segment_bytes;
        let Some(file) = segments.get(&segment_start) else {
            break position;
        };
        let segment_end = segment_start + config.segment_bytes;
        match scanner.segment(file, segment_start, position).await? {
            SegmentScan::Ends(end) => break end,
            SegmentScan::Continues => position = segment_end,
        }
        comet_rt::local::yield_if_needed().await;
    };
    Ok((end, scanner.held_next))
}

enum SegmentScan {
    /// Valid data ends here.
    Ends(u64),
    Continues,
}

/// What a scan reads and dispatches into.
struct Scanner<'a> {
    config: &'a StoreConfig,
    segments: &'a BTreeMap<u64, Rc<DirectFile>>,
    queues: &'a mut Queues,
    index: &'a mut KeyIndex,
    watch: &'a mut BoundaryWatch,
    /// The record position whose queue was last repaired: a gap still there afterwards
    /// (its records are gone from the log) becomes placeholders.
    repaired_at: Option<u64>,
    progress: Progress,
    /// Where the scan started (for `StoreConfig::recovery_progress`).
    start: u64,
    /// Records dispatched since the queues were last written (see `flush_queues`).
    unflushed: u64,
    /// Records from here on are checked but not dispatched (`u64::MAX`: none held).
    hold_from: u64,
    /// The next offset of each queue that held records continue.
    held_next: HashMap<(String, i32), u64>,
}

/// Watches the scan for the piece (record, padding, end marker) that spans a truncation
/// position: every position the scan passes is a piece's start or inside one.
pub(crate) struct BoundaryWatch {
    at: Option<u64>,
    /// The piece `[start, end)` that holds `at` strictly inside it.
    spanned: Option<(u64, u64)>,
}

impl BoundaryWatch {
    fn new(at: Option<u64>) -> BoundaryWatch {
        BoundaryWatch { at, spanned: None }
    }

    /// The scan passed a piece of `length` bytes at `start`.
    fn piece(&mut self, start: u64, length: u64) {
        if let Some(at) = self.at {
            if start < at && at < start + length {
                self.spanned = Some((start, start + length));
            }
        }
    }
}

impl Scanner<'_> {
    /// Writes the entries the scan dispatched to the queue files, so the memory a scan
    /// holds does not grow with the log it reads.
    async fn flush_queues(&mut self) -> Result<(), StoreError> {
        self.unflushed = 0;
        for topic_queues in self.queues.values_mut() {
            for queue in topic_queues.values_mut() {
                if queue.consume_queue.unflushed_entries() > 0 {
                    flush_queue(&mut queue.consume_queue, &self.config.faults).await?;
                }
            }
        }
        Ok(())
    }

    /// Scans one segment from `from`.
    async fn segment(
        &mut self,
        file: &DirectFile,
        segment_start: u64,
        from: u64,
    ) -> Result<SegmentScan, StoreError> {
        let config = self.config;
        let segment_end = segment_start + config.segment_bytes;
        let ends_at = |position| Ok(SegmentScan::Ends(position));
        let mut position = from;
        let mut window_start = position;
        let mut window: Vec<u8> = Vec::new();
        loop {
            let offset = to_index(position - window_start);
            let available = &window[offset.min(window.len())..];
            let held = (position >= self.hold_from).then_some(&self.held_next);
            match check_record(config, available, position, segment_end, self.queues, held) {
                Check::NeedMore(length) => {
                    let read_length = length.max(RECOVERY_READ_BYTES);
                    let read_length = read_length.min(to_index(segment_end - position));
                    if length > read_length {
                        return ends_at(position);
                    }
                    window = file.read_at(position - segment_start, read_length).await?;
                    window_start = position;
                    self.progress.at(position);
                    let progress = &config.recovery_progress;
                    progress.scanned(position.saturating_sub(self.start));
                    if window.len() < length {
                        return ends_at(position);
                    }
                }
                Check::Blank => {
                    self.watch.piece(position, segment_end - position);
                    return Ok(SegmentScan::Continues);
                }
                Check::Padding(size) => {
                    self.watch.piece(position, size);
                    position += size;
                }
                Check::Zeros => return ends_at(position),
                Check::Invalid(reason) => {
                    log::warn!("commit log ends at {position}: {reason}");
                    return ends_at(position);
                }
                Check::Failed(error) => return Err(error),
                Check::Gap {
                    what,
                    topic,
                    queue_id,
                    ..
                } if self.repaired_at != Some(position) => {
                    log::warn!("consume queue short: {what} at log position {position}");
                    let name = (topic.as_str(), queue_id);
                    let repair_end = position.min(self.hold_from);
                    repair_queue(config, self.segments, self.queues, name, repair_end).await?;
                    self.repaired_at = Some(position);
                }
                Check::Valid(size) | Check::Gap { size, .. } if position >= self.hold_from => {
                    let view = RecordView::parse(&available[..size]).expect("checked");
                    if let Some(offset) = held_queue_offset(&view, config) {
                        let key = (view.topic().to_string(), view.queue_id());
                        self.held_next.insert(key, offset + 1);
                    }
                    self.watch.piece(position, size as u64);
                    position += size as u64;
                    comet_rt::local::yield_if_needed().await;
                }
                Check::Valid(size) | Check::Gap { size, .. } => {
                    let view = RecordView::parse(&available[..size]).expect("checked");
                    dispatch_record(&view, position, self.queues, self.index, config);
                    self.watch.piece(position, size as u64);
                    position += size as u64;
                    self.unflushed += 1;
                    if self.unflushed >= CQ_RECOVERY_FLUSH_ENTRIES {
                        self.flush_queues().await?;
                    }
                    comet_rt::local::yield_if_needed().await;
                }
            }
        }
    }
}

enum Check {
    NeedMore(usize),
    Blank,
    /// Padding that puts the next record on a page (see `CommitLog::pad_to_page`).
    Padding(u64),
    /// Zeros where a record would start: the end of the written data of a preallocated
    /// segment (the normal end of a scan, not damage).
    Zeros,
    Invalid(String),
    Valid(usize),
    /// Valid, but it skips offsets its queue lacks.
    Gap {
        size: usize,
        what: String,
        topic: String,
        queue_id: i32,
    },
    /// Reading the queue's file failed.
    Failed(StoreError),
}

/// A blank marker of `size` bytes at `position` ends the segment, or is padding: it ends on
/// a page before the segment's end, is at most `PADDING_BYTES_MAX` long and zero past its
/// header. Anything else is damage.
fn check_blank(bytes: &[u8], size: i32, position: u64, segment_end: u64) -> Check {
    let Ok(blank) = u64::try_from(size) else {
        return Check::Invalid(format!("blank marker of {size} bytes"));
    };
    let end = position + blank;
    if end == segment_end {
        return Check::Blank;
    }
    if !(BLANK_BYTES..=PADDING_BYTES_MAX).contains(&blank)
        || end % PAGE_BYTES != 0
        || end > segment_end
    {
        return Check::Invalid(format!(
            "blank marker of {size} bytes is neither the segment's end nor padding"
        ));
    }
    let Some(padding) = bytes.get(..to_index(blank)) else {
        return Check::NeedMore(to_index(blank));
    };
    if padding[to_index(BLANK_BYTES)..]
        .iter()
        .any(|&byte| byte != 0)
    {
        return Check::Invalid("padding holds data".to_string());
    }
    Check::Padding(blank)
}

/// The queue offset a held record takes: `None` for one that gets no queue entry here.
fn held_queue_offset(view: &RecordView<'_>, config: &StoreConfig) -> Option<u64> {
    let transaction = view.sysflag() & (0x3 << 2);
    if transaction == 0x1 << 2 || transaction == 0x3 << 2 {
        return None;
    }
    if !config.owns(view.topic(), view.queue_id()) {
        return None;
    }
    u64::try_from(view.queue_offset()).ok()
}

/// Verifies the record at the start of `bytes` (at log `position`); `held` are the next
/// offsets of queues that records held back from dispatch continue (see `Scanner`).
fn check_record(
    config: &StoreConfig,
    bytes: &[u8],
    position: u64,
    segment_end: u64,
    queues: &mut Queues,
    held: Option<&HashMap<(String, i32), u64>>,
) -> Check {
    let Some((size, magic)) = peek_total_size_and_magic(bytes) else {
        return Check::NeedMore(8);
    };
    if size == 0 && magic == 0 {
        return Check::Zeros;
    }
    if magic == BLANK_MAGIC {
        return check_blank(bytes, size, position, segment_end);
    }
    let Ok(size) = usize::try_from(size) else {
        return Check::Invalid(format!("negative size {size}"));
    };
    if size < comet_proto::message::RECORD_BYTES_MIN || position + size as u64 > segment_end {
        return Check::Invalid(format!("size {size} impossible here"));
    }
    if bytes.len() < size {
        return Check::NeedMore(size);
    }
    let view = match RecordView::parse(&bytes[..size]) {
        Ok(view) => view,
        Err(error) => return Check::Invalid(error.to_string()),
    };
    if !view.body_crc_matches() {
        return Check::Invalid("body CRC mismatch".to_string());
    }
    let physical = crate::offset::PhysicalOffset::new(config.log_id, position).as_i64();
    if view.physical_offset() != physical {
        return Check::Invalid(format!(
            "PHYSICALOFFSET {} is stale",
            view.physical_offset()
        ));
    }
    if !config.owns(view.topic(), view.queue_id()) {
        // Its queue lives with another store now; only the key index takes it.
        return Check::Valid(size);
    }
    let physical = crate::offset::PhysicalOffset::new(config.log_id, position);
    let held_next = held.and_then(|held| {
        held.get(&(view.topic().to_string(), view.queue_id()))
            .copied()
    });
    if let (Some(next), Some(offset)) = (held_next, held_queue_offset(&view, config)) {
        // A queue continued by held records: the next must follow them.
        return match offset.cmp(&next) {
            std::cmp::Ordering::Equal => Check::Valid(size),
            std::cmp::Ordering::Less => {
                Check::Invalid(format!("queue offset {} is stale", view.queue_offset()))
            }
            std::cmp::Ordering::Greater => Check::Invalid(format!(
                "queue offset {offset} skips the held records' next {next}"
            )),
        };
    }
    match queue_continuation(&view, physical, queues) {
        Err(error) => Check::Failed(error),
        Ok(Continuation::Stale) => {
            Check::Invalid(format!("queue offset {} is stale", view.queue_offset()))
        }
        Ok(Continuation::Gap(max)) => Check::Gap {
            size,
            what: format!(
                "{}/{} offset {} follows max {max}",
                view.topic(),
                view.queue_id(),
                view.queue_offset()
            ),
            topic: view.topic().to_string(),
            queue_id: view.queue_id(),
        },
        Ok(Continuation::Next) => Check::Valid(size),
    }
}

enum Continuation {
    /// The record continues its queue, is already in it, or gets no queue entry.
    Next,
    /// Its offset is below the queue's max: left from before a truncation.
    Stale,
    /// Its offset lies past the max of a queue holding entries (the max).
    Gap(u64),
}

fn queue_continuation(
    view: &RecordView<'_>,
    physical: crate::offset::PhysicalOffset,
    queues: &Queues,
) -> Result<Continuation, StoreError> {
    let transaction = view.sysflag() & (0x3 << 2);
    if transaction == 0x1 << 2 || transaction == 0x3 << 2 {
        return Ok(Continuation::Next);
    }
    let queue = queues
        .get(view.topic())
        .and_then(|queues| queues.get(&view.queue_id()))
        .map(|queue| &queue.consume_queue);
    let max = queue.map_or(0, ConsumeQueue::max_offset);
    // A queue without entries may start anywhere (its older records were deleted), unless
    // the queue table promised it entries.
    let promised = queue.map_or(0, ConsumeQueue::promised);
    let Ok(offset) = u64::try_from(view.queue_offset()) else {
        return Ok(Continuation::Stale);
    };
    if offset == max || (offset > max && max == 0 && promised == 0) {
        return Ok(Continuation::Next);
    }
    if offset > max {
        return Ok(Continuation::Gap(max));
    }
    // Already held: its queue keeps entries of another log after it (handed over).
    let held = match queue {
        Some(queue) => queue.entry_blocking(offset)?,
        None => None,
    };
    if held.is_some_and(|entry| entry.physical == physical) {
        return Ok(Continuation::Next);
    }
    Ok(Continuation::Stale)
}

/// Bytes past the end of the log a crash can have left written: each flush in flight
/// reaches at most FLUSH_BYTES_MAX past the previous one's start; one more for margin.
const TORN_REACH_BYTES: u64 = (FLUSHES_IN_FLIGHT_MAX as u64 + 1) * FLUSH_BYTES_MAX as u64;

/// Zeroes what the last, possibly torn, flush may have written past `end`.
async fn zero_past_end(
    config: &StoreConfig,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    end: u64,
) -> Result<(), StoreError> {
    zero_range(config, segments, end, end + TORN_REACH_BYTES).await
}

/// Zeroes log bytes `[from, to)` inside the segment holding `from` (the bytes of its page
/// below `from` are kept), in writes of at most FLUSH_BYTES_MAX, then syncs.
pub(crate) async fn zero_range(
    config: &StoreConfig,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    from: u64,
    to: u64,
) -> Result<(), StoreError> {
    let segment_start = from - from % config.segment_bytes;
    let Some(file) = segments.get(&segment_start) else {
        return Ok(());
    };
    let page_start = align_down(from);
    let limit = align_up((segment_start + config.segment_bytes).min(to));
    if limit <= page_start {
        return Ok(());
    }
    let kept = file
        .read_at(page_start - segment_start, to_index(from - page_start))
        .await?;
    let mut at = page_start;
    while at < limit {
        let length = (limit - at).min(FLUSH_BYTES_MAX as u64);
        let mut buffer = file.alloc_buffer(to_index(length));
        if at == page_start {
            buffer.as_mut_slice()[..kept.len()].copy_from_slice(&kept);
        }
        file.write_at(buffer, at - segment_start).await?;
        at += length;
    }
    file.fdatasync().await?;
    Ok(())
}

/// Ends the recovered log (`end`) at `to` (`StoreConfig::truncate_log_to`): checks that
/// `to` is a boundary the scan passed, and zeroes the bytes of its segment from `to` to
/// the old end, so no later scan finds the dropped records again (the caller drops the
/// later segments and the derived entries). `abort` is written first: a crash before the
/// new checkpoint re-verifies the segment and stops at the zeros. Returns the new end.
async fn truncate_log(
    config: &StoreConfig,
    layout: &Layout,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    watch: &BoundaryWatch,
    end: u64,
    to: u64,
) -> Result<u64, StoreError> {
    let refuse = |fault| StoreError::TruncateRefused {
        position: to,
        fault,
    };
    if to > end {
        return Err(refuse(TruncateFault::BeyondEnd { end }));
    }
    if let Some((record_start, record_end)) = watch.spanned {
        let fault = TruncateFault::NotBoundary {
            record_start,
            record_end,
        };
        return Err(refuse(fault));
    }
    if to == end {
        return Ok(end);
    }
    std::fs::write(&layout.abort, std::process::id().to_string())
        .map_err(|error| setup_error(&layout.abort, error))?;
    comet_rt::io::sync_directory(&config.root).await?;
    // The old data (and what a crash may have torn past it) ends within this reach.
    zero_range(config, segments, to, end + TORN_REACH_BYTES).await?;
    log::warn!(
        "store {} log {}: truncated from {end} to {to}",
        config.root.display(),
        config.log_id
    );
    Ok(to)
}

/// Drops the log, its key index and the consume queues this store owns, and leaves one
/// empty segment at `from` (`StoreConfig::reset_log_to`). `abort` is written first, so
/// recovery treats the store as crashed: it re-verifies from the segment at `from`, also
/// after a crash part-way, and the old checkpoint cannot point past the new end.
async fn reset_log(config: &StoreConfig, layout: &Layout, from: u64) -> Result<(), StoreError> {
    assert_eq!(from % config.segment_bytes, 0, "validated: a segment start");
    std::fs::write(&layout.abort, std::process::id().to_string())
        .map_err(|error| setup_error(&layout.abort, error))?;
    comet_rt::io::sync_directory(&config.root).await?;
    for start in list_numbered(&layout.commit_log)? {
        let path = layout.commit_log.join(file_name(start));
        std::fs::remove_file(&path).map_err(|error| setup_error(&path, error))?;
    }
    comet_rt::io::sync_directory(&layout.commit_log).await?;
    std::fs::remove_dir_all(&layout.index).map_err(|error| setup_error(&layout.index, error))?;
    std::fs::create_dir_all(&layout.index).map_err(|error| setup_error(&layout.index, error))?;
    let table = queue_table::table_path(&config.root, config.log_id);
    if table.exists() {
        // Its queues go below: a crash before the next checkpoint must not find them owed.
        std::fs::remove_file(&table).map_err(|error| setup_error(&table, error))?;
        comet_rt::io::sync_directory(table.parent().expect("checkpoint dir")).await?;
    }
    let queues_root = config.root.join("consumequeue");
    for (topic, queue_id) in owned_queue_dirs(config)? {
        let dir = crate::queues::queue_dir(config, &topic, queue_id);
        std::fs::remove_dir_all(&dir).map_err(|error| setup_error(&dir, error))?;
    }
    if queues_root.exists() {
        comet_rt::io::sync_directory(&queues_root).await?;
    }
    ensure_segment(config, layout, &mut BTreeMap::new(), from).await?;
    log::warn!(
        "store {} log {}: dropped, starts empty at {from}",
        config.root.display(),
        config.log_id
    );
    Ok(())
}

/// (topic, queue id) of every consume-queue directory this store owns.
fn owned_queue_dirs(config: &StoreConfig) -> Result<Vec<(String, i32)>, StoreError> {
    let root = config.root.join("consumequeue");
    let mut owned = Vec::new();
    let Ok(topics) = std::fs::read_dir(&root) else {
        return Ok(owned);
    };
    for topic in topics {
        let topic = topic.map_err(|error| setup_error(&root, error))?;
        let Some(topic_name) = topic.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let queue_dirs =
            std::fs::read_dir(topic.path()).map_err(|error| setup_error(&topic.path(), error))?;
        for queue_dir in queue_dirs {
            let queue_dir = queue_dir.map_err(|error| setup_error(&topic.path(), error))?;
            let Some(queue_id) = queue_dir.file_name().to_str().and_then(|n| n.parse().ok()) else {
                continue;
            };
            if config.owns(&topic_name, queue_id) {
                owned.push((topic_name.clone(), queue_id));
            }
        }
    }
    Ok(owned)
}

/// Removes segments entirely past the one holding `end` (they hold nothing valid).
async fn drop_segments_past(
    segments: &mut BTreeMap<u64, Rc<DirectFile>>,
    config: &StoreConfig,
    end: u64,
) -> Result<(), StoreError> {
    let keep_below = end - end % config.segment_bytes + config.segment_bytes;
    let dropped = segments.split_off(&keep_below);
    for file in dropped.values() {
        // Usually the spare segment made ready before it was needed: nothing to warn about.
        log::info!(
            "removing segment {} past the end of the log (a spare made ready in advance, or \
             one a crash left)",
            file.path().display()
        );
        comet_rt::io::remove_file(file.path()).await?;
    }
    Ok(())
}

/// Creates the segment that will hold `end` when it does not exist (a new store, or a crash
/// right after a roll).
async fn ensure_segment(
    config: &StoreConfig,
    layout: &Layout,
    segments: &mut BTreeMap<u64, Rc<DirectFile>>,
    end: u64,
) -> Result<(), StoreError> {
    let start = end - end % config.segment_bytes;
    if segments.contains_key(&start) {
        return Ok(());
    }
    let path = layout.commit_log.join(file_name(start));
    let file =
        DirectFile::open_data_sync(&path, OpenMode::CreateReadWrite, config.faults.clone()).await?;
    file.preallocate(config.segment_bytes).await?;
    file.fdatasync().await?;
    comet_rt::io::sync_directory(&layout.commit_log).await?;
    segments.insert(start, Rc::new(file));
    Ok(())
}

async fn read_tail_page(
    config: &StoreConfig,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    end: u64,
) -> Result<Vec<u8>, StoreError> {
    let segment_start = end - end % config.segment_bytes;
    let file = segments.get(&segment_start).expect("ensured");
    let page_start = align_down(end);
    let bytes = file
        .read_at(page_start - segment_start, to_index(end - page_start))
        .await?;
    if bytes.len() as u64 != end - page_start {
        return Err(StoreError::corrupt(
            file.path(),
            "tail page shorter than the log end",
        ));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blank(size: u64) -> Vec<u8> {
        let mut bytes = vec![0u8; to_index(size)];
        let size = i32::try_from(size).expect("test blanks are small");
        bytes[..4].copy_from_slice(&size.to_be_bytes());
        bytes[4..8].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
        bytes
    }

    // Proves recovery skips padding only when it has padding's shape (ends on a page before
    // the segment's end, at most a page plus the marker, zero past its header), takes a
    // marker reaching the segment's end as the end marker, and refuses anything else.
    #[test]
    fn blank_markers_are_end_padding_or_damage() {
        let segment_end = 64 * 1024;
        let check = |bytes: &[u8], position: u64| {
            let size = i32::from_be_bytes(bytes[..4].try_into().expect("4 bytes"));
            check_blank(bytes, size, position, segment_end)
        };
        assert!(matches!(check(&blank(96), 4000), Check::Padding(96)));
        assert!(matches!(check(&blank(4099), 4093), Check::Padding(4099)));
        assert!(matches!(
            check(&blank(100), segment_end - 100),
            Check::Blank
        ));
        assert!(
            matches!(check(&blank(8)[..8], 4000), Check::Invalid(_)),
            "mid-page end"
        );
        assert!(matches!(check(&blank(96)[..50], 4000), Check::NeedMore(96)));
        let mut holds_data = blank(96);
        holds_data[60] = 1;
        assert!(matches!(check(&holds_data, 4000), Check::Invalid(_)));
        assert!(
            matches!(check(&blank(8192), 0), Check::Invalid(_)),
            "longer than any padding"
        );
        let mut negative = blank(8);
        negative[..4].copy_from_slice(&(-8i32).to_be_bytes());
        assert!(matches!(check(&negative, 8184), Check::Invalid(_)));
    }
}
