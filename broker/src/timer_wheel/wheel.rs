//! The per-shard timing wheel: one task per shard serves the timer queues the shard owns.
//!
//! Each tick runs three steps in order, in one task (so they never interleave):
//!
//! 1. **Enqueue**: new records of the owned timer queues (from each queue's
//!    `enqueuedOffset`) become slot-file entries keyed by their *effective* due time,
//!    `max(TIMER_OUT_MS, floor + 1)` where `floor` is the queue's highest delivered or
//!    in-flight time: an entry that arrives after its time has passed is due at once, in a
//!    second not yet delivered. The entries are fsynced, then the cursor file is written with
//!    the new `enqueuedOffset`, then entries whose second is already in memory join it.
//! 2. **Load**: every slot due within [`PREFETCH_MS`] is read into memory (entries at or
//!    before `deliveredMs` skipped, duplicates dropped) with its delivered records built.
//! 3. **Deliver**: every entry due at or before `now` is taken; the cursor file is written
//!    with `inFlightUntilMs = now`; all records are appended on their owners at once; when
//!    that is durable, `deliveredMs = now` (persisted with the next write, at most
//!    [`PERSIST_IDLE_MS`] later, and at a clean stop), and slot files of fully delivered
//!    seconds are deleted.
//!
//! Why nothing is lost: an entry is delivered only after its slot-file entry and the
//! enqueue cursor past it are durable, and an entry's file is deleted only after its
//! delivery is durable; after a crash, records past `enqueuedOffset` are enqueued again and
//! entries due after `deliveredMs` are delivered.
//!
//! Why nothing is delivered twice: after a clean stop, `deliveredMs` covers everything
//! delivered and `inFlightUntilMs` is not above it. After a crash, only entries due in
//! (`deliveredMs`, `inFlightUntilMs`] can have been delivered: that is the one delivery in
//! flight at the crash plus, at most, the deliveries of the last [`PERSIST_IDLE_MS`]. Each of
//! those is checked against its real queue (the index lookup of its `UNIQ_KEY`, matching
//! the timer record's offset in `SCHEDULE_ORIGIN_OFFSET`) before it is delivered again. An
//! entry is never written twice to slot files: after a crash (the cursor file was not
//! written by a clean stop), the slot files are read at start-up for entries past the
//! enqueue cursor (written, then the crash came before the cursor moved), and those records
//! are skipped when enqueued again (a second copy could land in another second, the floor
//! having moved). Under ASYNC_FLUSH a delivered record may be lost in a
//! crash after the cursor moved past it, as any acknowledged message can be.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::message::RecordView;
use comet_proto::properties::names;
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::{run_blocking, spawn, timeout, yield_if_needed, TaskClass, TaskHandle};
use comet_store::StoreError;

use super::cursor::{self, QueueCursor};
use super::deliver::{delivered_record, read_and_build};
use super::limits::{
    ENQUEUE_RECORDS_MAX, PREFETCH_MS, PREFETCH_RECORDS_MAX, READ_BYTES_MAX, READ_RECORDS_MAX,
    TICK_MS,
};
use super::slot::{self, second_of, SlotEntry};
use super::{TIMER_QUEUES, TIMER_TOPIC};
use crate::delay_level::delivery::{delivered_copy_exists, DeliveredCopy};
use crate::queue_cursor::{self, Step};
use crate::reappend::{append_concurrently, ReappendError};
use crate::shard::ShardBroker;

/// Longest time an advanced `deliveredMs` stays unpersisted while the wheel is idle, ms.
pub const PERSIST_IDLE_MS: i64 = 1000;

/// One entry in memory.
struct Pending {
    queue_id: i32,
    queue_offset: i64,
    due_ms: i64,
    /// The delivered record, once built.
    record: Option<BytesMut>,
    /// Physical offset of the timer record (known once built).
    origin: i64,
    /// May have been delivered before a crash: check before delivering.
    suspect: bool,
}

/// One second's entries in memory, with their earliest due time kept up to date so the
/// idle wheel never scans a big slot (a storm's slot holds hundreds of thousands of entries
/// for the whole prefetch window, and the wheel asks for the earliest due time every tick).
/// The latest due time is kept too: when a whole slot is due (a storm due in one
/// millisecond), it is handed over as it is, without copying its entries.
#[derive(Default)]
struct Slot {
    entries: Vec<Pending>,
    /// Earliest `due_ms` of `entries` (meaningless when empty).
    min_due_ms: i64,
    /// Latest `due_ms` of `entries` (meaningless when empty).
    max_due_ms: i64,
}

impl Slot {
    fn push(&mut self, pending: Pending) {
        if self.entries.is_empty() {
            self.min_due_ms = pending.due_ms;
            self.max_due_ms = pending.due_ms;
        }
        self.min_due_ms = self.min_due_ms.min(pending.due_ms);
        self.max_due_ms = self.max_due_ms.max(pending.due_ms);
        self.entries.push(pending);
    }

    fn min_due_ms(&self) -> Option<i64> {
        (!self.entries.is_empty()).then_some(self.min_due_ms)
    }

    /// Removes and returns the entries due at or before `now_ms`.
    fn take_due(&mut self, now_ms: i64) -> Vec<Pending> {
        if self.min_due_ms().is_none_or(|min| min > now_ms) {
            return Vec::new();
        }
        if self.max_due_ms <= now_ms {
            return std::mem::take(&mut self.entries);
        }
        let (ready, later): (Vec<Pending>, Vec<Pending>) = std::mem::take(&mut self.entries)
            .into_iter()
            .partition(|p| p.due_ms <= now_ms);
        self.entries = Vec::new();
        for pending in later {
            self.push(pending);
        }
        ready
    }
}

/// One shard's wheel.
struct Wheel {
    broker: Rc<ShardBroker>,
    store_root: PathBuf,
    cursor_path: PathBuf,
    /// Owned timer queues.
    queues: Vec<i32>,
    /// Current cursors of the owned queues.
    cursors: BTreeMap<i32, QueueCursor>,
    /// What the cursor file holds.
    persisted: BTreeMap<i32, QueueCursor>,
    persisted_at_ms: i64,
    /// Per queue, the due range that may have been delivered before a crash.
    suspect_range: BTreeMap<i32, (i64, i64)>,
    /// After a crash: records past the enqueue cursor that already have a slot entry (not
    /// written again when re-enqueued).
    already_written: HashSet<(i32, i64)>,
    /// Seconds in memory: every slot at or before `loaded_until` is here.
    slots: BTreeMap<i64, Slot>,
    loaded_until: i64,
    /// Seconds with slot files not yet in memory, and their queues.
    on_disk: BTreeMap<i64, BTreeSet<i32>>,
    /// Seconds with slot files, loaded or not (to delete once delivered).
    files: BTreeMap<i64, BTreeSet<i32>>,
    /// Delivered records built and held in memory.
    built: usize,
    /// Cancellation slot → delete keys of the deletions known for it (see [`Wheel::cancel`]).
    cancelled: BTreeMap<i64, HashSet<String>>,
}

/// Why a step of the wheel failed (the next step retries; opening fails the wheel).
#[derive(Debug, thiserror::Error)]
enum WheelError {
    /// Slot or cursor files could not be listed, read or written.
    #[error("cannot {what}: {source}")]
    Files {
        /// What was being done.
        what: &'static str,
        /// The operating system's error.
        #[source]
        source: std::io::Error,
    },
    /// A timer queue could not be read.
    #[error("cannot read a timer queue: {0}")]
    Read(#[from] StoreError),
    /// Due messages were not all stored in their real queues.
    #[error("timer delivery failed: {0}")]
    Deliver(#[source] ReappendError),
}

impl WheelError {
    fn files(what: &'static str) -> impl FnOnce(std::io::Error) -> WheelError {
        move |source| WheelError::Files { what, source }
    }
}

/// Starts this shard's wheel when it owns a timer queue; it ends after `stop`.
pub fn spawn_wheel(broker: &Rc<ShardBroker>, stop: &StopSignal) -> Option<TaskHandle<()>> {
    let queues: Vec<i32> = (0..TIMER_QUEUES)
        .filter(|queue_id| broker.owns(TIMER_TOPIC, *queue_id))
        .collect();
    if queues.is_empty() {
        return None;
    }
    let broker = broker.clone();
    let stop = stop.clone();
    Some(spawn(TaskClass::Produce, async move {
        let mut wheel = match Wheel::open(broker, queues).await {
            Ok(wheel) => wheel,
            Err(e) => {
                log::error!("timer wheel cannot start: {e}");
                return;
            }
        };
        wheel.run(&stop).await;
    }))
}

impl Wheel {
    async fn open(broker: Rc<ShardBroker>, queues: Vec<i32>) -> Result<Wheel, WheelError> {
        let store_root = broker.config().store_root.clone();
        let root = store_root.clone();
        let owned = queues.clone();
        let (loaded, listed) = run_blocking(move || {
            let loaded = cursor::load_all(&root);
            let listed: Result<Vec<(i32, Vec<i64>)>, WheelError> = owned
                .iter()
                .map(|q| {
                    slot::list_seconds(&root, *q)
                        .map(|s| (*q, s))
                        .map_err(WheelError::files("list slot files"))
                })
                .collect();
            (loaded, listed)
        })
        .await;
        let clean_stop = loaded.clean_stop;
        let cursors: BTreeMap<i32, QueueCursor> = queues
            .iter()
            .map(|q| (*q, loaded.queues.get(q).copied().unwrap_or_default()))
            .collect();
        // A queue without a cursor is read from its start, and another wheel may have
        // delivered its records: a slave promoted by hand (its old master's wheel; a slave
        // keeps none, see `forget_on_slave`), or a crash before the first cursor write.
        // Every entry due by now is checked against its real queue before delivery.
        let opened_ms = comet_rt::clock::wall_clock_ms();
        let suspect_range = cursors
            .iter()
            .filter_map(|(q, c)| {
                if !loaded.queues.contains_key(q) {
                    return Some((*q, (i64::MIN, opened_ms)));
                }
                (c.in_flight_until_ms > c.delivered_ms)
                    .then_some((*q, (c.delivered_ms, c.in_flight_until_ms)))
            })
            .collect();
        let mut wheel = Wheel {
            cursor_path: cursor::path(&store_root, broker.shard().0),
            store_root,
            suspect_range,
            already_written: HashSet::new(),
            persisted: cursors.clone(),
            persisted_at_ms: comet_rt::clock::wall_clock_ms(),
            cursors,
            broker,
            queues,
            slots: BTreeMap::new(),
            loaded_until: i64::MIN,
            on_disk: BTreeMap::new(),
            files: BTreeMap::new(),
            built: 0,
            cancelled: BTreeMap::new(),
        };
        wheel.adopt_files(listed?).await;
        if !clean_stop {
            wheel.find_written_past_cursors().await?;
        }
        wheel.loaded_until = wheel.delivered_second() - 1;
        Ok(wheel)
    }

    /// After a crash: the slot entries of records past each queue's enqueue cursor (written,
    /// then the crash came before the cursor moved), so re-enqueueing does not write them
    /// again (a second copy could land in another second, the floor having moved).
    async fn find_written_past_cursors(&mut self) -> Result<(), WheelError> {
        let files: Vec<(i32, i64)> = self
            .files
            .iter()
            .flat_map(|(second, queues)| queues.iter().map(move |q| (*q, *second)))
            .collect();
        let root = self.store_root.clone();
        let cursors = self.cursors.clone();
        let found = run_blocking(move || -> Result<HashSet<(i32, i64)>, WheelError> {
            let mut found = HashSet::new();
            for (queue_id, second) in files {
                let enqueued = cursors[&queue_id].enqueued_offset;
                let entries = slot::read(&slot::slot_path(&root, queue_id, second))
                    .map_err(WheelError::files("read slot files"))?;
                found.extend(
                    entries
                        .iter()
                        .filter(|entry| entry.queue_offset >= enqueued)
                        .map(|entry| (queue_id, entry.queue_offset)),
                );
            }
            Ok(found)
        })
        .await?;
        if !found.is_empty() {
            log::info!(
                "{}: {} timer entries were written before a crash; not written again",
                self.broker.shard(),
                found.len()
            );
        }
        self.already_written = found;
        Ok(())
    }

    /// Registers existing slot files; deletes those wholly delivered.
    async fn adopt_files(&mut self, listed: Vec<(i32, Vec<i64>)>) {
        let mut delivered_files = Vec::new();
        for (queue_id, seconds) in listed {
            let delivered_ms = self.cursors[&queue_id].delivered_ms;
            for second in seconds {
                if second.saturating_add(1).saturating_mul(1000) - 1 <= delivered_ms {
                    delivered_files.push((queue_id, second));
                } else {
                    self.on_disk.entry(second).or_default().insert(queue_id);
                    self.files.entry(second).or_default().insert(queue_id);
                }
            }
        }
        self.remove_files(delivered_files).await;
    }

    /// The earliest second some owned queue has not fully delivered.
    fn delivered_second(&self) -> i64 {
        self.cursors
            .values()
            .map(|c| second_of(c.delivered_ms))
            .min()
            .unwrap_or(0)
    }

    fn floor_ms(&self, queue_id: i32) -> i64 {
        let cursor = self.cursors[&queue_id];
        cursor.delivered_ms.max(cursor.in_flight_until_ms)
    }

    async fn run(&mut self, stop: &StopSignal) {
        // Catch up with what arrived while the broker was down before loading any slot, so
        // re-enqueued entries are all known before the first delivery.
        loop {
            match self.enqueue_step().await {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) => {
                    log::warn!("{} timer enqueue failed: {e}", self.broker.shard());
                    break;
                }
            }
        }
        while !stop.is_triggered() {
            let more = match self.tick().await {
                Ok(more) => more,
                Err(e) => {
                    log::warn!("{} timer wheel step failed: {e}", self.broker.shard());
                    false
                }
            };
            if more {
                yield_if_needed().await;
                continue;
            }
            let now_ms = comet_rt::clock::wall_clock_ms();
            let wait_ms = match self.next_due_ms() {
                Some(due_ms) if due_ms > now_ms => (due_ms - now_ms).min(TICK_MS as i64),
                _ => TICK_MS as i64,
            };
            let wait = Duration::from_millis(u64::try_from(wait_ms).unwrap_or(1).max(1));
            let _ = timeout(wait, stop.wait()).await;
        }
        let now_ms = comet_rt::clock::wall_clock_ms();
        self.advance_idle(now_ms);
        if let Err(e) = self.persist_with(true).await {
            log::error!(
                "{} timer cursors not persisted at stop: {e}",
                self.broker.shard()
            );
        }
    }

    /// One round of enqueue, load, deliver; true when more enqueue work is waiting.
    async fn tick(&mut self) -> Result<bool, WheelError> {
        let enqueued = self.enqueue_step().await?;
        let now_ms = comet_rt::clock::wall_clock_ms();
        self.load_until(second_of(now_ms.saturating_add(PREFETCH_MS)))
            .await?;
        self.deliver_due(now_ms).await?;
        if now_ms - self.persisted_at_ms >= PERSIST_IDLE_MS && self.cursors != self.persisted {
            self.persist().await?;
        }
        Ok(enqueued >= ENQUEUE_RECORDS_MAX)
    }

    fn next_due_ms(&self) -> Option<i64> {
        self.slots.values().find_map(Slot::min_due_ms)
    }

    async fn persist(&mut self) -> Result<(), WheelError> {
        self.persist_with(false).await
    }

    /// Writes the cursor file; `clean_stop` only from a clean stop.
    async fn persist_with(&mut self, clean_stop: bool) -> Result<(), WheelError> {
        let path = self.cursor_path.clone();
        let cursors = self.cursors.clone();
        run_blocking(move || cursor::store(&path, &cursors, clean_stop))
            .await
            .map_err(WheelError::files("persist timer cursors"))?;
        self.persisted = self.cursors.clone();
        self.persisted_at_ms = comet_rt::clock::wall_clock_ms();
        Ok(())
    }
}

/// A delivered record built ahead, with its timer record's physical offset.
type BuiltRecord = (BytesMut, i64);

/// What one enqueue step read from one queue.
struct QueueRead {
    next_offset: i64,
    /// Each entry with its delivered record when built, and whether it is a deletion (never
    /// built: it is known already, see [`Wheel::cancel`]).
    entries: Vec<(SlotEntry, Option<BuiltRecord>, bool)>,
}

impl Wheel {
    /// Moves new timer records into slot files; returns how many.
    async fn enqueue_step(&mut self) -> Result<usize, WheelError> {
        let mut batch: BTreeMap<(i32, i64), Vec<SlotEntry>> = BTreeMap::new();
        let mut to_memory = Vec::new();
        let mut moved = BTreeMap::new();
        let mut count = 0;
        for queue_id in self.queues.clone() {
            if count >= ENQUEUE_RECORDS_MAX {
                break;
            }
            let read = self
                .read_queue(queue_id, ENQUEUE_RECORDS_MAX - count)
                .await?;
            if read.next_offset != self.cursors[&queue_id].enqueued_offset {
                moved.insert(queue_id, read.next_offset);
            }
            count += read.entries.len();
            for (entry, built, deletion) in read.entries {
                let second = second_of(entry.due_ms);
                batch.entry((queue_id, second)).or_default().push(entry);
                if !deletion {
                    to_memory.push((queue_id, entry, built));
                }
            }
        }
        if moved.is_empty() {
            return Ok(0);
        }
        if !batch.is_empty() {
            let root = self.store_root.clone();
            let keys: Vec<(i32, i64)> = batch.keys().copied().collect();
            run_blocking(move || slot::append(&root, &batch))
                .await
                .map_err(WheelError::files("write slot files"))?;
            for (queue_id, second) in keys {
                self.files.entry(second).or_default().insert(queue_id);
                if second > self.loaded_until {
                    self.on_disk.entry(second).or_default().insert(queue_id);
                }
            }
        }
        for (queue_id, offset) in moved {
            self.cursors
                .get_mut(&queue_id)
                .expect("owned")
                .enqueued_offset = offset;
        }
        self.persist().await?;
        for (queue_id, entry, built) in to_memory {
            if second_of(entry.due_ms) <= self.loaded_until {
                self.admit(queue_id, entry, built);
            } else if built.is_some() {
                self.built -= 1;
            }
        }
        Ok(count)
    }

    /// Reads up to `budget` new records of one timer queue as slot entries (with the
    /// delivered record built when its second is already in memory).
    async fn read_queue(&mut self, queue_id: i32, budget: usize) -> Result<QueueRead, WheelError> {
        let mut read = QueueRead {
            next_offset: self.cursors[&queue_id].enqueued_offset,
            entries: Vec::new(),
        };
        let floor_ms = self.floor_ms(queue_id);
        while read.entries.len() < budget {
            let count = READ_RECORDS_MAX.min(budget - read.entries.len());
            let step = queue_cursor::read_step(
                &self.broker,
                TIMER_TOPIC,
                queue_id,
                &mut read.next_offset,
                count,
                READ_BYTES_MAX,
            )
            .await?;
            let result = match step {
                Step::Found(result) => result,
                Step::Moved => continue,
                Step::End => return Ok(read),
            };
            for bytes in &result.records {
                let Ok(view) = RecordView::parse(bytes) else {
                    log::error!("unreadable record in {TIMER_TOPIC} queue {queue_id}; skipped");
                    continue;
                };
                if self
                    .already_written
                    .remove(&(queue_id, view.queue_offset()))
                {
                    continue;
                }
                let due_ms = timer_out_ms(&view).max(floor_ms.saturating_add(1));
                let entry = SlotEntry {
                    due_ms,
                    queue_offset: view.queue_offset(),
                };
                if let Some(key) = view.property(names::TIMER_DEL_UNIQKEY) {
                    self.cancel(queue_id, due_ms, key.to_owned());
                    read.entries.push((entry, None, true));
                    continue;
                }
                let built = if second_of(due_ms) <= self.loaded_until
                    && self.built < PREFETCH_RECORDS_MAX
                {
                    delivered_record(&self.broker, &view, due_ms).map(|record| {
                        self.built += 1;
                        (record, view.physical_offset())
                    })
                } else {
                    None
                };
                read.entries.push((entry, built, false));
            }
            read.next_offset = read.next_offset.max(result.next_offset.as_i64());
            yield_if_needed().await;
        }
        Ok(read)
    }

    /// Adds an entry to its in-memory slot, unless it is already delivered.
    fn admit(&mut self, queue_id: i32, entry: SlotEntry, built: Option<(BytesMut, i64)>) {
        let cursor = self.cursors[&queue_id];
        if entry.due_ms <= cursor.delivered_ms {
            if built.is_some() {
                self.built -= 1;
            }
            return;
        }
        let suspect = self
            .suspect_range
            .get(&queue_id)
            .is_some_and(|(from, to)| entry.due_ms > *from && entry.due_ms <= *to);
        let (record, origin) = match built {
            Some((record, origin)) => (Some(record), origin),
            None => (None, -1),
        };
        self.slots
            .entry(second_of(entry.due_ms))
            .or_default()
            .push(Pending {
                queue_id,
                queue_offset: entry.queue_offset,
                due_ms: entry.due_ms,
                record,
                origin,
                suspect,
            });
    }
}

/// The due time a timer record carries; a record without a usable `TIMER_OUT_MS` is due at
/// once (logged).
fn timer_out_ms(view: &RecordView<'_>) -> i64 {
    match view
        .property(names::TIMER_OUT_MS)
        .and_then(|value| value.trim().parse::<i64>().ok())
    {
        Some(due_ms) => due_ms,
        None => {
            log::error!(
                "timer record {} has no usable {}; delivered at once",
                view.physical_offset(),
                names::TIMER_OUT_MS
            );
            i64::MIN
        }
    }
}

/// The delivered form of a timer record, or `None` with the deletion noted in `deletions`
/// as `(queue offset, due ms, delete key)` when the record is a deletion.
fn build_or_note_deletion(
    broker: &ShardBroker,
    view: &RecordView<'_>,
    due_ms: i64,
    deletions: &mut Vec<(i64, i64, String)>,
) -> Option<BytesMut> {
    if let Some(key) = view.property(names::TIMER_DEL_UNIQKEY) {
        deletions.push((view.queue_offset(), due_ms, key.to_owned()));
        return None;
    }
    delivered_record(broker, view, due_ms)
}

impl Wheel {
    /// Notes a deletion of `queue_id` due at `due_ms`: entries in its cancellation slot whose
    /// delete key is `key` are dropped instead of delivered (Java's wheel collects a slot's
    /// deletions before delivering its other entries). A deletion is known from when it is
    /// enqueued, and again from its slot file whenever its second is loaded, so after a
    /// restart too; one whose time is delivered already cancels nothing.
    fn cancel(&mut self, queue_id: i32, due_ms: i64, key: String) {
        if due_ms <= self.cursors[&queue_id].delivered_ms {
            return;
        }
        self.cancelled
            .entry(super::cancel_slot(due_ms))
            .or_default()
            .insert(key);
    }

    /// Drops the due entries a known deletion names.
    fn drop_cancelled(&mut self, due: &mut Vec<Pending>) {
        if self.cancelled.is_empty() {
            return;
        }
        let before = due.len();
        let cancelled = &self.cancelled;
        due.retain(|pending| {
            let Some(keys) = cancelled.get(&super::cancel_slot(pending.due_ms)) else {
                return true;
            };
            let Some(view) = pending
                .record
                .as_deref()
                .and_then(|record| RecordView::parse(record).ok())
            else {
                return true;
            };
            let Some(unique_key) = view.property(names::UNIQ_KEY) else {
                return true;
            };
            !keys.contains(&super::delete_key(view.topic(), unique_key))
        });
        let dropped = before - due.len();
        if dropped > 0 {
            self.built = self.built.saturating_sub(dropped);
            log::info!(
                "{}: {dropped} timed messages cancelled",
                self.broker.shard()
            );
        }
    }

    /// Forgets deletions whose whole cancellation slot is delivered.
    fn forget_past_cancellations(&mut self) {
        let delivered_ms = self
            .cursors
            .values()
            .map(|cursor| cursor.delivered_ms)
            .min()
            .unwrap_or(i64::MIN);
        while let Some((&slot, _)) = self.cancelled.first_key_value() {
            let slot_end_ms = slot.saturating_add(1).saturating_mul(super::CANCEL_SLOT_MS);
            if slot_end_ms > delivered_ms {
                break;
            }
            self.cancelled.remove(&slot);
        }
    }
}

impl Wheel {
    /// Brings every slot up to `target_second` into memory with its records built.
    async fn load_until(&mut self, target_second: i64) -> Result<(), WheelError> {
        if target_second <= self.loaded_until {
            return Ok(());
        }
        let due: Vec<(i64, BTreeSet<i32>)> = self
            .on_disk
            .range(..=target_second)
            .map(|(second, queues)| (*second, queues.clone()))
            .collect();
        for (second, queues) in due {
            for queue_id in queues {
                self.load_slot(queue_id, second).await?;
            }
            self.on_disk.remove(&second);
        }
        self.loaded_until = target_second;
        Ok(())
    }

    async fn load_slot(&mut self, queue_id: i32, second: i64) -> Result<(), WheelError> {
        let path = slot::slot_path(&self.store_root, queue_id, second);
        let entries = run_blocking(move || slot::read(&path))
            .await
            .map_err(WheelError::files("read slot files"))?;
        let mut unique: HashMap<i64, i64> = HashMap::with_capacity(entries.len());
        for entry in entries {
            unique.entry(entry.queue_offset).or_insert(entry.due_ms);
        }
        let mut wanted: Vec<(i64, i64)> = unique.into_iter().collect();
        let budget = PREFETCH_RECORDS_MAX.saturating_sub(self.built);
        let mut deletions = Vec::new();
        let mut built = if wanted.len() <= budget {
            let broker = self.broker.clone();
            read_and_build(&self.broker, queue_id, &mut wanted, |view, due_ms| {
                build_or_note_deletion(&broker, view, due_ms, &mut deletions)
            })
            .await
        } else {
            HashMap::new()
        };
        let mut deletion_offsets = HashSet::new();
        for (queue_offset, due_ms, key) in deletions {
            deletion_offsets.insert(queue_offset);
            self.cancel(queue_id, due_ms, key);
        }
        for (queue_offset, due_ms) in wanted {
            if deletion_offsets.contains(&queue_offset) {
                continue;
            }
            let entry = SlotEntry {
                due_ms,
                queue_offset,
            };
            let record = built.remove(&queue_offset).map(|b| {
                self.built += 1;
                (b.record, b.origin)
            });
            self.admit(queue_id, entry, record);
        }
        Ok(())
    }
}

impl Wheel {
    /// Delivers every entry due at or before `now_ms`.
    async fn deliver_due(&mut self, now_ms: i64) -> Result<(), WheelError> {
        let mut due = self.take_due(now_ms);
        if due.is_empty() {
            self.advance_idle(now_ms);
            self.remove_delivered_files(now_ms).await;
            return Ok(());
        }
        let earliest_due_ms = due.iter().map(|p| p.due_ms).min().unwrap_or(now_ms);
        let taken_late_ms = comet_rt::clock::wall_clock_ms() - earliest_due_ms;
        self.materialize(&mut due).await;
        self.drop_cancelled(&mut due);
        self.drop_already_delivered(&mut due).await;
        for cursor in self.cursors.values_mut() {
            cursor.in_flight_until_ms = cursor.in_flight_until_ms.max(now_ms);
        }
        self.persist().await?;
        let count = due.len();
        let records: Vec<BytesMut> = due.iter_mut().filter_map(|p| p.record.take()).collect();
        self.built = self.built.saturating_sub(count);
        let started = comet_rt::clock::monotonic_now();
        let prepare_ms = comet_rt::clock::wall_clock_ms() - earliest_due_ms - taken_late_ms;
        if let Err(e) = append_concurrently(&self.broker, records).await {
            // Some may be stored: put all back as suspects, to be checked and retried.
            for mut pending in due {
                pending.suspect = true;
                self.slots
                    .entry(second_of(pending.due_ms))
                    .or_default()
                    .push(pending);
            }
            return Err(WheelError::Deliver(e));
        }
        if count >= 10_000 {
            log::info!(
                "{} delivered {count} timed messages in {} ms (taken {taken_late_ms} ms after \
                 the earliest due time, {prepare_ms} ms to prepare)",
                self.broker.shard(),
                started.elapsed().as_millis()
            );
        }
        for cursor in self.cursors.values_mut() {
            cursor.delivered_ms = cursor.delivered_ms.max(now_ms);
        }
        self.forget_past_cancellations();
        self.remove_delivered_files(now_ms).await;
        Ok(())
    }

    /// Nothing in memory is due at or before `now_ms`: every queue has delivered up to it.
    fn advance_idle(&mut self, now_ms: i64) {
        let earliest = self.next_due_ms().unwrap_or(i64::MAX);
        let delivered = now_ms.min(earliest.saturating_sub(1));
        for cursor in self.cursors.values_mut() {
            cursor.delivered_ms = cursor.delivered_ms.max(delivered);
        }
        self.forget_past_cancellations();
    }

    fn take_due(&mut self, now_ms: i64) -> Vec<Pending> {
        let mut due = Vec::new();
        let now_second = second_of(now_ms);
        let seconds: Vec<i64> = self.slots.range(..=now_second).map(|(s, _)| *s).collect();
        for second in seconds {
            let slot = self.slots.get_mut(&second).expect("listed");
            let mut taken = if second < now_second {
                std::mem::take(&mut slot.entries)
            } else {
                slot.take_due(now_ms)
            };
            if due.is_empty() {
                due = taken;
            } else {
                due.append(&mut taken);
            }
            if slot.entries.is_empty() {
                self.slots.remove(&second);
            }
        }
        due
    }

    /// Builds the records of entries that have none yet (loaded past the prefetch bound).
    async fn materialize(&mut self, due: &mut Vec<Pending>) {
        let mut by_queue: BTreeMap<i32, Vec<(i64, i64)>> = BTreeMap::new();
        for pending in due.iter().filter(|p| p.record.is_none()) {
            by_queue
                .entry(pending.queue_id)
                .or_default()
                .push((pending.queue_offset, pending.due_ms));
        }
        for (queue_id, mut wanted) in by_queue {
            let broker = self.broker.clone();
            let mut deletions = Vec::new();
            let mut built = read_and_build(&self.broker, queue_id, &mut wanted, |view, due_ms| {
                build_or_note_deletion(&broker, view, due_ms, &mut deletions)
            })
            .await;
            for (_, due_ms, key) in deletions {
                self.cancel(queue_id, due_ms, key);
            }
            for pending in due
                .iter_mut()
                .filter(|p| p.queue_id == queue_id && p.record.is_none())
            {
                if let Some(b) = built.remove(&pending.queue_offset) {
                    pending.record = Some(b.record);
                    pending.origin = b.origin;
                    self.built += 1;
                }
            }
        }
        due.retain(|p| p.record.is_some());
    }

    /// Drops suspects whose delivery is already in their real queue.
    async fn drop_already_delivered(&mut self, due: &mut Vec<Pending>) {
        if !due.iter().any(|p| p.suspect) {
            return;
        }
        let mut keep = Vec::with_capacity(due.len());
        let (mut checked, mut found) = (0usize, 0usize);
        for pending in due.drain(..) {
            if pending.suspect {
                checked += 1;
                if self.was_delivered(&pending).await {
                    found += 1;
                    self.built = self.built.saturating_sub(1);
                    continue;
                }
            }
            keep.push(pending);
        }
        if checked > 0 {
            log::info!(
                "{}: {checked} timers possibly delivered before a crash checked, {found} were",
                self.broker.shard()
            );
        }
        *due = keep;
    }

    async fn was_delivered(&self, pending: &Pending) -> bool {
        let Some(record) = pending.record.as_ref() else {
            return false;
        };
        let Ok(view) = RecordView::parse(record) else {
            return false;
        };
        let (Some(unique_key), Some(since_ms)) = (
            view.property(names::UNIQ_KEY),
            view.property(names::TIMER_ENQUEUE_MS)
                .and_then(|value| value.parse::<i64>().ok()),
        ) else {
            return false;
        };
        let copy = DeliveredCopy {
            topic: view.topic(),
            queue_id: view.queue_id(),
            unique_key,
            origin: pending.origin,
            since_ms,
        };
        delivered_copy_exists(&self.broker, &copy).await
    }

    async fn remove_delivered_files(&mut self, delivered_ms: i64) {
        let done: Vec<i64> = self
            .files
            .keys()
            .copied()
            .take_while(|second| second.saturating_add(1).saturating_mul(1000) - 1 <= delivered_ms)
            .filter(|second| !self.slots.contains_key(second) && !self.on_disk.contains_key(second))
            .collect();
        let mut removals = Vec::new();
        for second in done {
            for queue_id in self.files.remove(&second).unwrap_or_default() {
                removals.push((queue_id, second));
            }
        }
        self.remove_files(removals).await;
    }

    async fn remove_files(&self, removals: Vec<(i32, i64)>) {
        if removals.is_empty() {
            return;
        }
        let root = self.store_root.clone();
        let failed = run_blocking(move || {
            removals
                .iter()
                .filter(|(queue_id, second)| slot::remove(&root, *queue_id, *second).is_err())
                .count()
        })
        .await;
        if failed > 0 {
            log::warn!("{failed} delivered slot files could not be deleted");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending(due_ms: i64) -> Pending {
        Pending {
            queue_id: 0,
            queue_offset: due_ms,
            due_ms,
            record: None,
            origin: -1,
            suspect: false,
        }
    }

    fn dues(entries: &[Pending]) -> Vec<i64> {
        let mut dues: Vec<i64> = entries.iter().map(|p| p.due_ms).collect();
        dues.sort_unstable();
        dues
    }

    // Proves a slot hands over exactly the entries due at or before `now` (never one due
    // later), keeps its earliest due time right after a partial take and after refills, and
    // hands a wholly due slot over entirely.
    #[test]
    fn slot_takes_exactly_the_due_entries() {
        let mut slot = Slot::default();
        assert_eq!(slot.min_due_ms(), None);
        for due_ms in [5_300, 5_100, 5_900, 5_100, 5_500] {
            slot.push(pending(due_ms));
        }
        assert_eq!(slot.min_due_ms(), Some(5_100));
        assert!(slot.take_due(5_099).is_empty());
        assert_eq!(dues(&slot.take_due(5_300)), vec![5_100, 5_100, 5_300]);
        assert_eq!(slot.min_due_ms(), Some(5_500));
        slot.push(pending(5_400));
        assert_eq!(slot.min_due_ms(), Some(5_400));
        assert_eq!(dues(&slot.take_due(5_999)), vec![5_400, 5_500, 5_900]);
        assert_eq!(slot.min_due_ms(), None);
        assert!(slot.take_due(i64::MAX).is_empty());
        slot.push(pending(5_950));
        assert_eq!(slot.min_due_ms(), Some(5_950));
        assert!(slot.take_due(5_949).is_empty());
        assert_eq!(dues(&slot.take_due(5_950)), vec![5_950]);
    }
}
