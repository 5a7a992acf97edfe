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

/// The scanner's state.
struct Scanner {
    topic: String,
    queue_id: i32,
    cursor: i64,
    /// Pending checkpoints by their offset in the revive queue.
    pending: BTreeMap<i64, Pending>,
    by_key: HashMap<CkKey, Vec<i64>>,
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
        let mut scanner = Scanner {
            topic,
            queue_id,
            cursor,
            pending: BTreeMap::new(),
            by_key: HashMap::new(),
        };
        while !stop.is_triggered() {
            scanner.read(&broker).await;
            super::state::set_recovered();
            scanner.revive_due(&broker).await;
            scanner.commit(&broker);
            scanner.wait(&broker, &stop).await;
        }
    })
}

impl Scanner {
    /// Reads the revive queue from the cursor to its end.
    async fn read(&mut self, broker: &ShardBroker) {
        let recovering = !super::state::recovered();
        loop {
            let step = read_step(
                broker,
                &self.topic,
                self.queue_id,
                &mut self.cursor,
                READ_RECORDS_MAX,
                READ_BYTES_MAX,
            )
            .await;
            let result = match step {
                Ok(Step::Found(result)) => result,
                Ok(Step::Moved) => continue,
                Ok(Step::End) => return,
                Err(e) => {
                    log::warn!("pop revive: reading {}: {e}", self.topic);
                    return;
                }
            };
            for record in &result.records {
                let Ok(view) = RecordView::parse(record) else {
                    log::warn!("pop revive: unreadable record in {}", self.topic);
                    continue;
                };
                match parse(&view) {
                    Ok(ReviveRecord::Ck(ck)) => {
                        if recovering {
                            restore_position(broker, &ck);
                        }
                        self.add(view.queue_offset(), ck);
                    }
                    Ok(ReviveRecord::Ack(ack)) => self.ack(&ack),
                    // Always, not only in recovery: the scanner may pass the record before
                    // the ack that wrote it moved the offset, and a persist in between would
                    // store the cursor past it without the move.
                    Ok(ReviveRecord::OrderAck(ack)) => restore_order_ack(broker, &ack),
                    Err(e) => log::warn!("pop revive: {e}"),
                }
            }
            self.cursor = result.next_offset.as_i64();
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
        let oldest = self.pending.keys().next().copied();
        let committed = oldest.map_or(self.cursor, |offset| offset.min(self.cursor));
        broker.offsets().borrow_mut().commit(
            super::REVIVE_GROUP,
            &self.topic,
            self.queue_id,
            committed,
        );
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
        let cursor = QueueOffset(u64::try_from(self.cursor).unwrap_or(0));
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
    let mut revived = Vec::new();
    for (index, acked) in pending.acked.iter().enumerate() {
        if *acked {
            continue;
        }
        let offset = ck.offset_of(index);
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
        revived.push(offset);
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
    let done = AckRecord {
        ack_offset: revived.first().copied().unwrap_or(ck.start_offset),
        start_offset: ck.start_offset,
        consumer_group: ck.cid.clone(),
        topic: ck.topic.clone(),
        queue_id: ck.queue_id,
        pop_time: ck.pop_time,
        broker_name: ck.broker_name.clone(),
        ack_offset_list: revived,
    };
    Ok((records, done))
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
        let mut scanner = Scanner {
            topic: "R".into(),
            queue_id: 0,
            cursor: 0,
            pending: BTreeMap::new(),
            by_key: HashMap::new(),
        };
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
}
