//! Repairing one consume queue from the commit log at open: when a queue's files hold fewer
//! entries than the queue table promised, or a record past the checkpoint skips offsets its
//! queue lacks (a file cut short, deleted or zeroed), recovery rebuilds that queue alone:
//! it reads the log from just past the queue's last good entry (from the oldest segment
//! when none is left) and dispatches only that queue's records. Other queues and the key
//! index are untouched, so one damaged file costs a scan of the log range its entries
//! cover, never a rebuild of every queue. Entries are written to the queue's files every
//! [`CQ_RECOVERY_FLUSH_ENTRIES`], so a repair holds a bounded number in memory.
//!
//! Also the progress log of long recovery steps ([`Progress`]).

use std::cell::{Cell, RefCell, RefMut};
use std::collections::BTreeMap;
use std::rc::Rc;

use comet_proto::message::{peek_total_size_and_magic, RecordView, BLANK_MAGIC};
use comet_rt::io::{DirectFile, FaultInjector};

use crate::commit_log::{to_index, BLANK_BYTES};
use crate::config::StoreConfig;
use crate::consume_queue::ConsumeQueue;
use crate::cq_files::{self, FlushFiles};
use crate::error::StoreError;
use crate::limits::{CQ_RECOVERY_FLUSH_ENTRIES, RECOVERY_READ_BYTES};
use crate::offset::PhysicalOffset;
use crate::queues::{queue_state, repair_entry, Queues};

/// Logs the progress of a recovery step once it has run for a second, then every second:
/// which store, how far through its range (log positions, or queues opened), how long it
/// has taken and about how long is left at the rate so far (`comet_log::progress`, on the
/// runtime's clock).
pub(crate) struct Progress {
    inner: comet_log::progress::Progress,
}

impl Progress {
    /// A step called `what` (naming the store) going through log positions `[from, to)`.
    pub(crate) fn new(what: String, from: u64, to: u64) -> Progress {
        Progress::counting(what, "log position", from, to)
    }

    /// A step going through `[from, to)` of `unit`s.
    pub(crate) fn counting(what: String, unit: &'static str, from: u64, to: u64) -> Progress {
        let now = comet_rt::clock::monotonic_now();
        Progress {
            inner: comet_log::progress::Progress::new(what, unit, from, to, now),
        }
    }

    /// The step reached `position`.
    pub(crate) fn at(&mut self, position: u64) {
        self.inner
            .report(position, comet_rt::clock::monotonic_now());
    }
}

/// Rebuilds the entries of (topic, queue_id) from its max on out of this log's records
/// below `upto` (see the module docs). Records missing from the log (deleted) leave
/// placeholders when a later one is found; nothing is added past the last one found.
pub(crate) async fn repair_queue(
    config: &StoreConfig,
    segments: &BTreeMap<u64, Rc<DirectFile>>,
    queues: &mut Queues,
    (topic, queue_id): (&str, i32),
    upto: u64,
) -> Result<(), StoreError> {
    let first = segments.keys().next().copied().unwrap_or(0);
    let queue = &mut queue_state(queues, config, topic, queue_id).consume_queue;
    queue.mark_repaired();
    let max = queue.max_offset();
    let from = repair_start(config, queue)?.max(first).min(upto);
    let what = format!(
        "store {} log {}: repairing consume queue {topic}/{queue_id} from offset {max}",
        config.root.display(),
        config.log_id
    );
    log::warn!("{what}: reading log positions {from}..{upto}");
    let mut progress = Progress::new(what, from, upto);
    let mut position = from;
    while position < upto {
        let segment_start = position - position % config.segment_bytes;
        let Some(file) = segments.get(&segment_start) else {
            break;
        };
        let segment_end = (segment_start + config.segment_bytes).min(upto);
        let length = to_index((segment_end - position).min(RECOVERY_READ_BYTES as u64));
        let window = file.read_at(position - segment_start, length).await?;
        let name = (topic, queue_id);
        let walked = walk_window(config, &window, position, segment_start, queue, name)?;
        position = match walked {
            Walk::Reached(reached) if reached > position => reached,
            // A record longer than the window: read it whole.
            Walk::Reached(_) => read_one(config, file, segment_start, position, queue, name)
                .await?
                .unwrap_or(upto),
            Walk::SegmentEnds => segment_start + config.segment_bytes,
            Walk::Stops => break,
        };
        progress.at(position);
        if queue.unflushed_entries() >= CQ_RECOVERY_FLUSH_ENTRIES {
            flush_queue(queue, &config.faults).await?;
        }
        comet_rt::local::yield_if_needed().await;
    }
    let found = queue.max_offset() - max;
    log::warn!(
        "store {} log {}: consume queue {topic}/{queue_id} repaired: {found} entries rebuilt, \
         max offset {}",
        config.root.display(),
        config.log_id,
        queue.max_offset()
    );
    Ok(())
}

/// Where the records past the queue's last entry can start: just past that entry's record
/// when it is one of this log's; else the oldest segment (0 here, raised by the caller).
fn repair_start(config: &StoreConfig, queue: &ConsumeQueue) -> Result<u64, StoreError> {
    let Some(last) = queue.max_offset().checked_sub(1) else {
        return Ok(0);
    };
    let entry = queue.entry_blocking(last)?;
    Ok(entry
        .filter(|entry| !entry.is_placeholder() && entry.physical.log_id() == config.log_id)
        .map_or(0, |entry| entry.physical.position() + u64::from(entry.size)))
}

/// How walking a window of the log ended.
enum Walk {
    /// Every whole record before this position was walked.
    Reached(u64),
    /// The segment's end marker or its unwritten end: continue with the next segment.
    SegmentEnds,
    /// Something that is no record: the repair stops (logged).
    Stops,
}

/// Walks the records of `window` (the log from `position`), adding those of the queue.
fn walk_window(
    config: &StoreConfig,
    window: &[u8],
    position: u64,
    segment_start: u64,
    queue: &mut ConsumeQueue,
    name: (&str, i32),
) -> Result<Walk, StoreError> {
    let segment_end = segment_start + config.segment_bytes;
    let mut at = position;
    loop {
        let rest = &window[to_index(at - position)..];
        let Some((size, magic)) = peek_total_size_and_magic(rest) else {
            return Ok(Walk::Reached(at));
        };
        if size == 0 && magic == 0 {
            return Ok(Walk::SegmentEnds);
        }
        let Ok(size) = u64::try_from(size) else {
            log::warn!("repair stops at log position {at}: size {size}");
            return Ok(Walk::Stops);
        };
        if magic == BLANK_MAGIC {
            if at + size >= segment_end || size < BLANK_BYTES {
                return Ok(Walk::SegmentEnds);
            }
            at += size;
            continue;
        }
        if (rest.len() as u64) < size {
            return Ok(Walk::Reached(at));
        }
        if !add_record(config, &rest[..to_index(size)], at, queue, name) {
            return Ok(Walk::Stops);
        }
        at += size;
    }
}

/// Reads the record at `position` whole (longer than a window) and adds it; returns the
/// position past it, or `None` when it is no record.
async fn read_one(
    config: &StoreConfig,
    file: &DirectFile,
    segment_start: u64,
    position: u64,
    queue: &mut ConsumeQueue,
    name: (&str, i32),
) -> Result<Option<u64>, StoreError> {
    let head = file.read_at(position - segment_start, 8).await?;
    let Some((size, _)) = peek_total_size_and_magic(&head) else {
        return Ok(None);
    };
    let Ok(size) = usize::try_from(size) else {
        return Ok(None);
    };
    let bytes = file.read_at(position - segment_start, size).await?;
    if bytes.len() < size || !add_record(config, &bytes, position, queue, name) {
        return Ok(None);
    }
    Ok(Some(position + size as u64))
}

/// Adds the record `bytes` at log `position` to the queue when it is one of its records
/// past its max; false (logged) when the bytes are no record of this position.
fn add_record(
    config: &StoreConfig,
    bytes: &[u8],
    position: u64,
    queue: &mut ConsumeQueue,
    name: (&str, i32),
) -> bool {
    let physical = PhysicalOffset::new(config.log_id, position);
    let view = match RecordView::parse(bytes) {
        Ok(view) if view.physical_offset() == physical.as_i64() => view,
        Ok(view) => {
            let stale = view.physical_offset();
            log::warn!("repair stops at log position {position}: PHYSICALOFFSET {stale}");
            return false;
        }
        Err(error) => {
            log::warn!("repair stops at log position {position}: {error}");
            return false;
        }
    };
    if view.topic() != name.0 || view.queue_id() != name.1 {
        return true;
    }
    if let Some((offset, entry)) = repair_entry(&view, physical, config) {
        if offset >= queue.max_offset() {
            queue.push(offset, entry);
        }
    }
    true
}

/// Writes the queue's unwritten entries to its files (creating them) and syncs them; the
/// files are open for this flush only (recovery runs before the store's pool exists).
pub(crate) async fn flush_queue(
    queue: &mut ConsumeQueue,
    faults: &Option<Rc<FaultInjector>>,
) -> Result<(), StoreError> {
    let queue = RefCell::new(queue);
    let files = FlushFiles {
        pool: None,
        faults,
        opened: Cell::new(0),
    };
    let access = || RefMut::map(queue.borrow_mut(), |queue| &mut **queue);
    cq_files::flush_queue(access, &files, None).await
}
