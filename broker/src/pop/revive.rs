//! The revive scanner: one task per shard reading the shard's revive queue (Java's
//! `PopReviveService`).
//!
//! It reads CK and ack records in queue order and keeps the checkpoints not yet done in
//! memory, marking the messages each ack names. A checkpoint whose messages are all acked
//! is dropped; one whose invisible time has passed gets its unacked messages re-stored
//! ([`super::retry`]), durably, and then a batch ack of exactly those messages is appended
//! to the revive queue, so a replay of the queue after a restart finds the checkpoint done
//! and does not revive it twice.
//!
//! The scanner's cursor is committed like a consumer offset (group [`super::REVIVE_GROUP`]
//! on the revive queue) at the oldest checkpoint still pending, and persisted with the
//! other offsets. After a restart the scanner reads again from there, which rebuilds every
//! pending checkpoint with its acks. That first read also moves each group's pop position
//! up to the end of every checkpoint it finds: those pops may be newer than the persisted
//! positions. Pops on this shard wait until that replay is done ([`super::state`]).
//!
//! **A window, not every checkpoint.** The scanner holds at most its share of
//! `popCkMaxBufferSize` checkpoints (Java bounds its in-memory checkpoints with that key,
//! and reads its revive queue a window at a time). When the window is full, the cursor stops
//! at the next checkpoint; the records after it are still read once, ahead, for the acks
//! they carry (acks of checkpoints in the window: an acked message must not be revived
//! because its ack lies past the window) and, in the first read, for the pop positions.
//! A checkpoint past the window stays in the revive queue, and the cursor persisted stays
//! at or before it: it enters the window once checkpoints in it are acked or revived, and
//! the acks after it are read again then, so it is revived (later than its invisible time
//! only while the window is full) unless acked. Memory does not grow with the pops left
//! unacked; what a full window costs is reading the revive queue past the cursor again,
//! once per half window of checkpoints taken. A read the store fails revives nothing until
//! a later read gets past the failure: acks beyond it are unread.

use std::cell::Cell;
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::message::RecordView;
use comet_rt::shutdown::StopSignal;
use comet_rt::sync::race;
use comet_rt::task_class::{sleep, spawn, TaskClass, TaskHandle};
use comet_store::{GetStatus, MessageFilter, QueueOffset, StoreError};

use super::records::{parse, AckRecord, CheckPoint, CkKey, OrderAck, ReviveRecord};
use super::retry::{destination, ensure_topic, max_reconsume_times, revived_record};
use crate::queue_cursor::{read_step, Step};
use crate::shard::ShardBroker;

/// Longest the scanner sleeps between looks at its due checkpoints, ms.
pub const REVIVE_INTERVAL_MS: u64 = 1000;
/// Records read from the revive queue per store read.
const READ_RECORDS_MAX: usize = 256;
/// Bytes read from the revive queue per store read.
const READ_BYTES_MAX: usize = 1024 * 1024;
/// Checkpoints revived with one append of their copies (one durability wait per owner).
const REVIVE_BATCH_MAX: usize = 64;

/// A checkpoint not yet done.
struct Pending {
    ck: CheckPoint,
    acked: Vec<bool>,
}

impl Pending {
    /// The queue offsets of its messages no ack named.
    fn unacked(&self) -> Vec<i64> {
        let indexes = self.acked.iter().enumerate();
        let unacked = indexes.filter(|(_, acked)| !**acked);
        unacked.map(|(index, _)| self.ck.offset_of(index)).collect()
    }
}

/// The scanner's state.
struct Scanner {
    topic: String,
    queue_id: i32,
    /// The next record to take checkpoints from: every checkpoint before it is pending or
    /// done.
    cursor: i64,
    /// The next record never read (at or past `cursor`): the records between the two were
    /// read once, while the window was full, for their acks and pop positions.
    ahead: i64,
    /// Pending checkpoints by their offset in the revive queue.
    pending: BTreeMap<i64, Pending>,
    by_key: HashMap<CkKey, Vec<i64>>,
}

thread_local! {
    /// This shard's scanner's pending checkpoints, for the metrics.
    static CHECKPOINTS: Cell<u64> = const { Cell::new(0) };
}

/// Checkpoints this shard's revive scanner holds in memory.
pub fn checkpoints_in_memory() -> u64 {
    CHECKPOINTS.with(Cell::get)
}

/// The checkpoints one shard's scanner holds at most: its share of `popCkMaxBufferSize`.
fn window_max(broker: &ShardBroker) -> usize {
    let shards = broker.queue_logs().max(1);
    (broker.config().pop_ck_max_buffer_size / shards).max(1)
}

/// Starts this shard's revive scanner (masters only: it appends records).
pub fn spawn_revive(broker: &Rc<ShardBroker>, stop: &StopSignal) -> TaskHandle<()> {
    let broker = broker.clone();
    let stop = stop.clone();
    spawn(TaskClass::Housekeeping, async move {
        let topic = super::revive_topic(&broker);
        let queue_id = super::revive_queue(&broker);
        register_topic(&broker, &topic).await;
        let cursor = broker
            .offsets()
            .borrow()
            .query(super::REVIVE_GROUP, &topic, queue_id)
            .unwrap_or(0);
        let mut log = BrokerLog {
            broker: &broker,
            topic: topic.clone(),
            queue_id,
        };
        let mut scanner = Scanner::new(topic, queue_id, cursor);
        while !stop.is_triggered() {
            let window = window_max(&broker);
            let recovering = !super::state::recovered();
            let complete = scanner.read(&mut log, window, recovering).await;
            // A failed read may have left acks of pending checkpoints unread: none is
            // revived before a read gets past them.
            if complete {
                super::state::set_recovered();
                scanner.revive_due(&broker).await;
            }
            scanner.commit(&broker);
            CHECKPOINTS.with(|count| count.set(scanner.pending.len() as u64));
            scanner.wait(&broker, &stop).await;
        }
    })
}

/// Records of the revive queue read at once, each with its offset there.
struct Batch {
    records: Vec<(i64, ReviveRecord)>,
    /// Where the next read starts.
    next_offset: i64,
}

/// How a read of the revive queue stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Ended {
    /// At the queue's end: the cursor is on it.
    End,
    /// The window is full: the cursor is on the first checkpoint it has no room for.
    Full,
    /// The store failed: the cursor is on the first record not read.
    Failed,
}

/// The revive queue as the scanner reads it, and what pop positions its records move: the
/// shard's store and offsets ([`BrokerLog`]), or a list in the unit tests, which drive the
/// scanner through the same code.
trait ReviveLog {
    /// The records at `cursor` on, or how the read ended; a read that finds nothing to take
    /// at `cursor` moves it as [`read_step`] says.
    async fn read(&mut self, cursor: &mut i64) -> Result<Batch, Ended>;
    /// Moves the group's pop position up to where the checkpoint's pop left it.
    fn restore_position(&mut self, ck: &CheckPoint);
    /// Moves the group's consume offset up to where an orderly ack left it.
    fn restore_order_ack(&mut self, ack: &OrderAck);
}

/// This shard's revive queue in its store.
struct BrokerLog<'a> {
    broker: &'a ShardBroker,
    topic: String,
    queue_id: i32,
}

impl ReviveLog for BrokerLog<'_> {
    async fn read(&mut self, cursor: &mut i64) -> Result<Batch, Ended> {
        loop {
            let step = read_step(
                self.broker,
                &self.topic,
                self.queue_id,
                cursor,
                READ_RECORDS_MAX,
                READ_BYTES_MAX,
            )
            .await;
            let result = match step {
                Ok(Step::Found(result)) => result,
                Ok(Step::Moved) => continue,
                Ok(Step::End) => return Err(Ended::End),
                Err(e) => {
                    log::warn!("pop revive: reading {}: {e}", self.topic);
                    return Err(Ended::Failed);
                }
            };
            let mut records = Vec::with_capacity(result.records.len());
            for record in &result.records {
                let Ok(view) = RecordView::parse(record) else {
                    log::warn!("pop revive: unreadable record in {}", self.topic);
                    continue;
                };
                match parse(&view) {
                    Ok(parsed) => records.push((view.queue_offset(), parsed)),
                    Err(e) => log::warn!("pop revive: {e}"),
                }
            }
            return Ok(Batch {
                records,
                next_offset: result.next_offset.as_i64(),
            });
        }
    }

    fn restore_position(&mut self, ck: &CheckPoint) {
        restore_position(self.broker, ck);
    }

    fn restore_order_ack(&mut self, ack: &OrderAck) {
        restore_order_ack(self.broker, ack);
    }
}

/// What a read of the revive queue takes from its records.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Pass {
    /// Checkpoints (while the window has room), acks and pop positions.
    Window,
    /// Acks and pop positions only: the window is full.
    Ahead,
}

impl Scanner {
    fn new(topic: String, queue_id: i32, cursor: i64) -> Scanner {
        Scanner {
            topic,
            queue_id,
            cursor,
            ahead: cursor,
            pending: BTreeMap::new(),
            by_key: HashMap::new(),
        }
    }

    /// Reads the revive queue: from the cursor while the window (`window` checkpoints) has
    /// room, then on to the queue's end for the acks only. `recovering`: the first read
    /// after a start, which moves the pop positions. False when the store failed before the
    /// queue's end: acks of pending checkpoints may be unread.
    ///
    /// A checkpoint entering the window from records already read ahead had its acks read
    /// while it was out, so the acks from the cursor on are read again after it entered.
    /// While records wait behind the cursor, checkpoints enter only when half the window is
    /// free, so that read again is paid once per half window, not once per checkpoint.
    async fn read(&mut self, log: &mut impl ReviveLog, window: usize, recovering: bool) -> bool {
        assert!(window > 0);
        assert!(self.cursor <= self.ahead);
        // More when the window was made smaller at run time: none enters until it has room.
        let held = self.pending.len().max(window);
        let behind = self.cursor < self.ahead;
        let room = window.saturating_sub(self.pending.len());
        let admits = if behind {
            room >= (window / 2).max(1)
        } else {
            room > 0
        };
        let mut cursor = self.cursor;
        let ended = if admits {
            self.read_from(log, &mut cursor, Pass::Window, window, recovering)
                .await
        } else {
            Ended::Full
        };
        let readmitted = cursor > self.cursor;
        self.cursor = cursor;
        match ended {
            // Everything up to the queue's end is read (and nothing past it exists, even
            // if an earlier read went further before the queue was reset).
            Ended::End => {
                self.ahead = cursor;
                return true;
            }
            Ended::Failed => {
                self.ahead = self.ahead.max(cursor);
                return false;
            }
            Ended::Full => {}
        }
        // The acks after the checkpoints just admitted, when some were read before they
        // entered, are read again.
        let mut ahead = if readmitted {
            cursor
        } else {
            self.ahead.max(cursor)
        };
        let ended = self
            .read_from(log, &mut ahead, Pass::Ahead, window, recovering)
            .await;
        self.ahead = match ended {
            Ended::End => ahead.max(self.cursor),
            Ended::Failed | Ended::Full => self.ahead.max(ahead),
        };
        assert!(self.cursor <= self.ahead);
        assert!(self.pending.len() <= held);
        ended == Ended::End
    }

    /// Reads records from `cursor` to the queue's end, or in a [`Pass::Window`] up to the
    /// first checkpoint the window has no room for.
    async fn read_from(
        &mut self,
        log: &mut impl ReviveLog,
        cursor: &mut i64,
        pass: Pass,
        window: usize,
        recovering: bool,
    ) -> Ended {
        loop {
            let batch = match log.read(cursor).await {
                Ok(batch) => batch,
                Err(ended) => return ended,
            };
            for (offset, record) in batch.records {
                // Pop positions and orderly acks are taken once, by whichever pass reads
                // the record first; acks again by the window pass (their checkpoint may
                // have entered the window since).
                let first_read = offset >= self.ahead;
                match record {
                    ReviveRecord::Ck(ck) => {
                        let takes = pass == Pass::Window && !ck.queue_offset_diff.is_empty();
                        if takes && self.pending.len() >= window {
                            *cursor = offset;
                            return Ended::Full;
                        }
                        if recovering && first_read {
                            log.restore_position(&ck);
                        }
                        if pass == Pass::Window {
                            self.add(offset, ck);
                        }
                    }
                    ReviveRecord::Ack(ack) => self.ack(&ack),
                    // Always, not only in recovery: the scanner may pass the record before
                    // the ack that wrote it moved the offset, and a persist in between would
                    // store the cursor past it without the move.
                    ReviveRecord::OrderAck(ack) => {
                        if first_read {
                            log.restore_order_ack(&ack);
                        }
                    }
                }
            }
            *cursor = batch.next_offset;
        }
    }

    fn add(&mut self, offset: i64, ck: CheckPoint) {
        if ck.queue_offset_diff.is_empty() {
            return;
        }
        self.by_key.entry(ck.key()).or_default().push(offset);
        let acked = vec![false; ck.queue_offset_diff.len()];
        self.pending.insert(offset, Pending { ck, acked });
    }

    fn ack(&mut self, ack: &AckRecord) {
        let key = ack.key();
        let Some(offsets) = self.by_key.get(&key).cloned() else {
            return;
        };
        for offset in offsets {
            let Some(pending) = self.pending.get_mut(&offset) else {
                continue;
            };
            for acked in ack.offsets() {
                if let Some(index) = pending.ck.index_of(acked) {
                    pending.acked[index] = true;
                }
            }
            if pending.acked.iter().all(|done| *done) {
                self.remove(offset);
            }
        }
    }

    fn remove(&mut self, offset: i64) {
        let Some(pending) = self.pending.remove(&offset) else {
            return;
        };
        let key = pending.ck.key();
        if let Some(offsets) = self.by_key.get_mut(&key) {
            offsets.retain(|known| *known != offset);
            if offsets.is_empty() {
                self.by_key.remove(&key);
            }
        }
    }

    /// Revives every checkpoint whose invisible time has passed.
    async fn revive_due(&mut self, broker: &ShardBroker) {
        let now_ms = comet_rt::clock::wall_clock_ms();
        let due: Vec<i64> = self
            .pending
            .iter()
            .filter(|(_, pending)| pending.ck.revive_time_ms() <= now_ms)
            .map(|(offset, _)| *offset)
            .collect();
        for batch in due.chunks(REVIVE_BATCH_MAX) {
            if !self.revive_batch(broker, batch).await {
                return;
            }
        }
    }

    /// Revives the checkpoints at `offsets` with one append of their copies and one of
    /// their done records; false when that failed (they stay pending for the next round).
    async fn revive_batch(&mut self, broker: &ShardBroker, offsets: &[i64]) -> bool {
        let mut copies = Vec::new();
        let mut dones = Vec::new();
        let mut revived = Vec::new();
        for offset in offsets {
            let Some(pending) = self.pending.get(offset) else {
                continue;
            };
            match prepare(broker, pending).await {
                Ok((records, done)) => {
                    copies.extend(records);
                    dones.push(done);
                    revived.push(*offset);
                }
                // Kept pending: the next round tries again.
                Err(e) => log::warn!("pop revive of {:?} failed: {e}", pending.ck.key()),
            }
        }
        if !copies.is_empty() {
            if let Err(e) = crate::reappend::append_on_owners(broker, copies).await {
                log::warn!("pop revive: storing the copies failed: {e}");
                return false;
            }
        }
        if !dones.is_empty() {
            if let Err(e) = super::ack::store_acks(broker, &dones).await {
                // The copies are stored: a replay after a restart before the next flush may
                // bring these messages back once more (at least once), never lose them.
                log::warn!("pop revive: recording revived checkpoints done: {e}");
            }
        }
        for offset in revived {
            self.remove(offset);
        }
        true
    }

    /// Commits the cursor at the oldest pending checkpoint (or the end read).
    fn commit(&self, broker: &ShardBroker) {
        broker.offsets().borrow_mut().commit(
            super::REVIVE_GROUP,
            &self.topic,
            self.queue_id,
            self.committed(),
        );
    }

    /// Where a restart reads again from: no checkpoint before it is pending or unread.
    fn committed(&self) -> i64 {
        let oldest = self.pending.keys().next().copied();
        oldest.map_or(self.cursor, |offset| offset.min(self.cursor))
    }

    /// Sleeps until the next checkpoint is due (at most [`REVIVE_INTERVAL_MS`]), a record
    /// arrives in the revive queue, or the broker stops.
    async fn wait(&self, broker: &ShardBroker, stop: &StopSignal) {
        let now_ms = comet_rt::clock::wall_clock_ms();
        let next_due_ms = self
            .pending
            .values()
            .map(|pending| pending.ck.revive_time_ms())
            .min()
            .map_or(REVIVE_INTERVAL_MS, |due| {
                u64::try_from(due.saturating_sub(now_ms)).unwrap_or(0)
            });
        let nap = Duration::from_millis(next_due_ms.clamp(1, REVIVE_INTERVAL_MS));
        // Past every record read (a full window leaves the cursor behind them).
        let cursor = QueueOffset(u64::try_from(self.ahead.max(self.cursor)).unwrap_or(0));
        let arrival = broker
            .store()
            .wait_for_message(&self.topic, self.queue_id, cursor);
        race(stop.wait(), race(arrival, sleep(nap))).await;
    }
}

/// Why a checkpoint could not be revived yet.
#[derive(Debug, thiserror::Error)]
enum ReviveError {
    #[error("reading message {offset}: {source}")]
    Read {
        offset: i64,
        #[source]
        source: StoreError,
    },
    #[error("creating {topic}: {source}")]
    Topic {
        topic: String,
        #[source]
        source: std::io::Error,
    },
    #[error("encoding: {0}")]
    Encode(#[from] comet_proto::message::RecordError),
}

/// The copies of the unacked messages of `pending` and the batch ack recording it done.
async fn prepare(
    broker: &ShardBroker,
    pending: &Pending,
) -> Result<(Vec<BytesMut>, AckRecord), ReviveError> {
    let ck = &pending.ck;
    let max_times = max_reconsume_times(broker, &ck.cid);
    let store = broker.queue_store(&ck.topic, ck.queue_id);
    let mut records: Vec<BytesMut> = Vec::new();
    let revived = pending.unacked();
    for &offset in &revived {
        let result = store
            .get_messages(
                &ck.topic,
                ck.queue_id,
                QueueOffset(u64::try_from(offset).unwrap_or(0)),
                1,
                super::take::POP_BYTES_MAX,
                MessageFilter::All,
            )
            .await
            .map_err(|source| ReviveError::Read { offset, source })?;
        let found = (result.status == GetStatus::Found)
            .then(|| result.records.first())
            .flatten();
        let Some(record) = found else {
            // Removed by retention: nothing left to bring back.
            continue;
        };
        let Ok(view) = RecordView::parse(record) else {
            continue;
        };
        if view.queue_offset() != offset {
            continue;
        }
        let target = destination(ck, view.reconsume_times(), max_times);
        ensure_topic(broker, &target)
            .await
            .map_err(|source| ReviveError::Topic {
                topic: target.topic().to_owned(),
                source,
            })?;
        records.push(revived_record(broker, ck, &view, &target)?);
    }
    Ok((records, done_ack(ck, revived)))
}

/// The batch ack recording `ck` done, its unacked messages (`revived`) stored again.
fn done_ack(ck: &CheckPoint, revived: Vec<i64>) -> AckRecord {
    AckRecord {
        ack_offset: revived.first().copied().unwrap_or(ck.start_offset),
        start_offset: ck.start_offset,
        consumer_group: ck.cid.clone(),
        topic: ck.topic.clone(),
        queue_id: ck.queue_id,
        pop_time: ck.pop_time,
        broker_name: ck.broker_name.clone(),
        ack_offset_list: revived,
    }
}

/// Puts the revive topic in the topic table (one queue per log, as Java creates it with
/// `reviveQueueNum` queues), so it is a known system topic rather than one found in the
/// store at the next start.
async fn register_topic(broker: &ShardBroker, topic: &str) {
    if broker.topics().get(topic).is_some() {
        return;
    }
    let queues = i32::try_from(broker.queue_logs()).expect("the log count is bounded");
    broker.topics().ensure_system_topic(topic, queues);
    broker.mark_topics_changed();
    if let Err(e) = crate::routing::persist_topics_now(broker).await {
        log::warn!("pop revive: cannot persist the topic {topic}: {e}");
    }
}

/// Moves the group's pop position up to where the checkpoint's pop left it.
fn restore_position(broker: &ShardBroker, ck: &CheckPoint) {
    if !broker.owns(&ck.topic, ck.queue_id) {
        return;
    }
    let mut offsets = broker.offsets().borrow_mut();
    let known = offsets.query(&ck.cid, &ck.topic, ck.queue_id).unwrap_or(0);
    if ck.next_offset > known {
        offsets.commit(&ck.cid, &ck.topic, ck.queue_id, ck.next_offset);
    }
}

/// Moves the group's consume offset up to where an orderly ack left it, and remembers an
/// ack ahead of it (so a pop skips that message).
fn restore_order_ack(broker: &ShardBroker, ack: &OrderAck) {
    if !broker.owns(&ack.topic, ack.queue_id) {
        return;
    }
    let position = {
        let mut offsets = broker.offsets().borrow_mut();
        let known = offsets.query(&ack.consumer_group, &ack.topic, ack.queue_id);
        let known = known.unwrap_or(0);
        if ack.next_offset > known {
            offsets.commit(
                &ack.consumer_group,
                &ack.topic,
                ack.queue_id,
                ack.next_offset,
            );
        }
        known.max(ack.next_offset)
    };
    let key = (ack.topic.clone(), ack.consumer_group.clone(), ack.queue_id);
    super::state::with_order_book(|book| book.replay_ack(&key, ack.ack_offset, position));
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ck(start: i64, pop_time: i64, diffs: Vec<i32>) -> CheckPoint {
        CheckPoint {
            start_offset: start,
            pop_time,
            invisible_time: 100,
            topic: "T".into(),
            cid: "g".into(),
            queue_offset_diff: diffs,
            ..CheckPoint::default()
        }
    }

    fn ack_of(ck: &CheckPoint, offsets: Vec<i64>) -> AckRecord {
        AckRecord {
            ack_offset: offsets[0],
            start_offset: ck.start_offset,
            consumer_group: ck.cid.clone(),
            topic: ck.topic.clone(),
            queue_id: ck.queue_id,
            pop_time: ck.pop_time,
            broker_name: String::new(),
            ack_offset_list: if offsets.len() > 1 {
                offsets
            } else {
                Vec::new()
            },
        }
    }

    // Proves the pairing: a CK is dropped once every message is acked (one by one or in a
    // batch), an ack of another pop (other pop time) or of an unknown offset changes
    // nothing, an ack of a done CK is ignored, and the committed cursor stays at the oldest
    // pending CK.
    #[test]
    fn acks_pair_with_their_checkpoint() {
        let mut scanner = Scanner::new("R".into(), 0, 0);
        let first = ck(10, 1000, vec![0, 1, 3]);
        let second = ck(14, 2000, vec![0]);
        scanner.add(5, first.clone());
        scanner.add(6, second.clone());
        scanner.ack(&ack_of(&first, vec![11]));
        scanner.ack(&ack_of(&ck(10, 999, vec![0]), vec![10]));
        scanner.ack(&ack_of(&first, vec![12]));
        assert_eq!(scanner.pending[&5].acked, [false, true, false]);
        scanner.ack(&ack_of(&first, vec![10, 13]));
        assert!(!scanner.pending.contains_key(&5), "all acked: done");
        scanner.ack(&ack_of(&first, vec![10]));
        assert_eq!(scanner.pending.len(), 1);
        assert_eq!(scanner.pending.keys().next(), Some(&6));
        scanner.ack(&ack_of(&second, vec![14]));
        assert!(scanner.pending.is_empty() && scanner.by_key.is_empty());
    }

    /// A revive queue in memory: a record's offset is its index.
    #[derive(Default)]
    struct ListLog {
        records: Vec<ReviveRecord>,
        /// Records one read returns at most.
        batch_max: usize,
        /// The first read that would return the record at this offset fails.
        fail_at: Option<i64>,
        /// Start offsets of the checkpoints whose pop position was restored.
        positions: Vec<i64>,
        /// Offsets of the orderly acks restored.
        order_acks: Vec<i64>,
    }

    impl ListLog {
        fn end(&self) -> i64 {
            i64::try_from(self.records.len()).unwrap()
        }
    }

    impl ReviveLog for ListLog {
        async fn read(&mut self, cursor: &mut i64) -> Result<Batch, Ended> {
            if *cursor >= self.end() {
                *cursor = self.end();
                return Err(Ended::End);
            }
            let start = usize::try_from(*cursor).unwrap();
            let stop = (start + self.batch_max).min(self.records.len());
            let stop_offset = i64::try_from(stop).unwrap();
            if let Some(fail_at) = self.fail_at {
                if (*cursor..stop_offset).contains(&fail_at) {
                    self.fail_at = None;
                    return Err(Ended::Failed);
                }
            }
            let records = (start..stop)
                .map(|index| (i64::try_from(index).unwrap(), self.records[index].clone()))
                .collect();
            Ok(Batch {
                records,
                next_offset: i64::try_from(stop).unwrap(),
            })
        }

        fn restore_position(&mut self, ck: &CheckPoint) {
            self.positions.push(ck.start_offset);
        }

        fn restore_order_ack(&mut self, ack: &OrderAck) {
            self.order_acks.push(ack.ack_offset);
        }
    }

    /// Checkpoints of 3 messages each, acks of them before and after the checkpoints that
    /// follow (so past where a small window stops), two checkpoints fully acked, and two
    /// orderly acks; with, per checkpoint's start offset, the messages no ack names.
    fn interleaved_log(checkpoints: i64) -> (ListLog, BTreeMap<i64, Vec<i64>>) {
        let mut log = ListLog {
            batch_max: 3,
            ..ListLog::default()
        };
        let cks: Vec<CheckPoint> = (0..checkpoints)
            .map(|index| ck(100 * index, 1000 + index, vec![0, 1, 2]))
            .collect();
        let mut unacked: BTreeMap<i64, Vec<i64>> = cks
            .iter()
            .map(|ck| (ck.start_offset, (0..3).map(|i| ck.offset_of(i)).collect()))
            .collect();
        let mut acked = |log: &mut ListLog, ck: &CheckPoint, offsets: Vec<i64>| {
            unacked
                .get_mut(&ck.start_offset)
                .unwrap()
                .retain(|offset| !offsets.contains(offset));
            log.records.push(ReviveRecord::Ack(ack_of(ck, offsets)));
        };
        for (index, ck) in cks.iter().enumerate() {
            log.records.push(ReviveRecord::Ck(ck.clone()));
            if index >= 2 {
                let older = &cks[index - 2];
                acked(&mut log, older, vec![older.offset_of(0)]);
            }
            if index == 4 {
                let order = OrderAck {
                    ack_offset: 7,
                    ..OrderAck::default()
                };
                log.records.push(ReviveRecord::OrderAck(order));
            }
        }
        for ck in cks.iter().skip(1).step_by(2) {
            acked(&mut log, ck, vec![ck.offset_of(1)]);
        }
        for index in [3, 8].into_iter().filter(|index| *index < cks.len()) {
            let all = (0..3).map(|i| cks[index].offset_of(i)).collect();
            acked(&mut log, &cks[index], all);
        }
        let order = OrderAck {
            ack_offset: 9,
            ..OrderAck::default()
        };
        log.records.push(ReviveRecord::OrderAck(order));
        unacked.retain(|_, offsets| !offsets.is_empty());
        (log, unacked)
    }

    /// Runs the scanner's rounds as `spawn_revive` does, reviving at most `per_round` of the
    /// oldest pending checkpoints after each complete read (appending their done records),
    /// until everything is read and nothing is pending or `rounds` ran out; returns whether
    /// it got there. Every revive goes into `revived` by the checkpoint's start offset.
    async fn run_rounds(
        scanner: &mut Scanner,
        log: &mut ListLog,
        window: usize,
        per_round: usize,
        rounds: usize,
        revived: &mut Vec<(i64, Vec<i64>)>,
    ) -> bool {
        let mut recovering = true;
        for _ in 0..rounds {
            let held = scanner.pending.len();
            let complete = scanner.read(log, window, recovering).await;
            let bound = window.max(held);
            assert!(
                scanner.pending.len() <= bound,
                "the window holds at most its size"
            );
            assert!(scanner.cursor <= scanner.ahead && scanner.ahead <= log.end());
            if !complete {
                continue;
            }
            recovering = false;
            let due: Vec<i64> = scanner.pending.keys().take(per_round).copied().collect();
            for offset in due {
                let pending = &scanner.pending[&offset];
                let unacked = pending.unacked();
                revived.push((pending.ck.start_offset, unacked.clone()));
                let done = done_ack(&pending.ck, unacked);
                log.records.push(ReviveRecord::Ack(done));
                scanner.remove(offset);
            }
            if scanner.pending.is_empty() && scanner.cursor == log.end() {
                return true;
            }
        }
        false
    }

    fn by_checkpoint(revived: &[(i64, Vec<i64>)]) -> BTreeMap<i64, Vec<i64>> {
        let mut merged = BTreeMap::new();
        for (start, offsets) in revived {
            let previous = merged.insert(*start, offsets.clone());
            assert!(previous.is_none(), "checkpoint {start} revived twice");
        }
        merged
    }

    // Proves the window: with more checkpoints than the window holds, acks both before and
    // after where the window stops, and a read that fails once, every checkpoint is revived
    // exactly once with exactly the messages no ack names (an ack read ahead, before its
    // checkpoint entered the window, still counts), the window never overflows, and each
    // orderly ack and pop position is restored once.
    #[test]
    fn a_full_window_revives_every_unacked_message_and_no_acked_one() {
        comet_rt::local::run_local("revive-window", async {
            for (window, per_round) in [(4, 1), (4, 4), (2, 1), (1, 1), (5, 2), (100, 100)] {
                let (mut log, unacked) = interleaved_log(12);
                // Among the acks after every checkpoint: a failed read there must revive
                // nothing before they are read.
                log.fail_at = Some(23);
                let mut scanner = Scanner::new("R".into(), 0, 0);
                let mut revived = Vec::new();
                let done =
                    run_rounds(&mut scanner, &mut log, window, per_round, 200, &mut revived).await;
                assert!(done, "window {window}: everything revived or acked");
                assert_eq!(by_checkpoint(&revived), unacked, "window {window}");
                assert_eq!(log.fail_at, None, "window {window}: a read failed");
                assert_eq!(log.order_acks, [7, 9], "window {window}");
                let positions: Vec<i64> = (0..12).map(|index| 100 * index).collect();
                assert_eq!(log.positions, positions, "window {window}: each once");
            }
        });
    }

    // Proves a window made smaller at run time: what it holds beyond its new size is
    // revived or acked before anything enters, and nothing is lost or revived twice.
    #[test]
    fn a_smaller_window_admits_nothing_until_it_has_room() {
        comet_rt::local::run_local("revive-shrink", async {
            let (mut log, unacked) = interleaved_log(12);
            let mut scanner = Scanner::new("R".into(), 0, 0);
            assert!(scanner.read(&mut log, 8, true).await);
            let (held, cursor) = (scanner.pending.len(), scanner.cursor);
            assert!(held > 2 && cursor < log.end());
            assert!(scanner.read(&mut log, 2, false).await);
            assert_eq!((scanner.pending.len(), scanner.cursor), (held, cursor));
            let mut revived = Vec::new();
            let done = run_rounds(&mut scanner, &mut log, 2, 1, 200, &mut revived).await;
            assert!(done);
            assert_eq!(by_checkpoint(&revived), unacked);
        });
    }

    // Proves a restart in the middle: the scanner stops after a few rounds with a full
    // window and checkpoints read only ahead; a new one from the committed cursor revives
    // each remaining unacked message once (the done records of the first run count), and
    // revives nothing acked.
    #[test]
    fn a_restart_with_a_full_window_revives_each_message_once() {
        comet_rt::local::run_local("revive-restart", async {
            for (window, rounds) in [(4, 1), (4, 2), (3, 3), (2, 5)] {
                let (mut log, unacked) = interleaved_log(12);
                let mut scanner = Scanner::new("R".into(), 0, 0);
                let mut revived = Vec::new();
                let done =
                    run_rounds(&mut scanner, &mut log, window, 1, rounds, &mut revived).await;
                assert!(!done, "window {window}: stopped in the middle");
                assert!(
                    scanner.cursor < scanner.ahead,
                    "window {window}: window full"
                );
                let committed = scanner.committed();
                log.positions.clear();
                log.order_acks.clear();
                let mut restarted = Scanner::new("R".into(), 0, committed);
                let done = run_rounds(&mut restarted, &mut log, window, 1, 200, &mut revived).await;
                assert!(done, "window {window}: everything revived or acked");
                assert_eq!(by_checkpoint(&revived), unacked, "window {window}");
                let expected: Vec<i64> = (0..log.end())
                    .filter(|offset| *offset >= committed)
                    .filter_map(
                        |offset| match &log.records[usize::try_from(offset).unwrap()] {
                            ReviveRecord::Ck(ck) => Some(ck.start_offset),
                            _ => None,
                        },
                    )
                    .collect();
                assert_eq!(
                    log.positions, expected,
                    "window {window}: positions, once each"
                );
            }
        });
    }

    // Proves a reset queue (its end below what was read) is read again from its end: a record
    // appended there is read for the first time, so its orderly ack is restored.
    #[test]
    fn a_queue_reset_below_the_read_records_is_read_again() {
        comet_rt::local::run_local("revive-reset", async {
            let (mut log, _) = interleaved_log(4);
            let mut scanner = Scanner::new("R".into(), 0, 0);
            assert!(scanner.read(&mut log, 8, false).await);
            assert_eq!(scanner.ahead, log.end());
            log.records.truncate(2);
            log.order_acks.clear();
            assert!(scanner.read(&mut log, 8, false).await);
            assert_eq!((scanner.cursor, scanner.ahead), (2, 2));
            let order = OrderAck {
                ack_offset: 11,
                ..OrderAck::default()
            };
            log.records.push(ReviveRecord::OrderAck(order));
            assert!(scanner.read(&mut log, 8, false).await);
            assert_eq!(log.order_acks, [11]);
        });
    }
}
