//! The per-shard delivery loop of delayed messages (see the module docs of `delay_level` for
//! the cursor and exactly-once rules).
//!
//! One task per shard serves every level whose schedule queue the shard owns. A round reads
//! each level from its cursor, rebuilds every due record for its real queue, drops those a
//! crash may have left delivered already (checked [`CHECKS_IN_FLIGHT_MAX`] at a time), appends
//! them all on their owners (`crate::reappend` chunks, many in flight at once so one group
//! commit covers several; durable when it resolves), then persists the cursors. When nothing
//! is due the task sleeps until the earliest due time, at most
//! [`POLL_INTERVAL_MS`](super::POLL_INTERVAL_MS).

use std::collections::{BTreeMap, HashSet, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::message::RecordView;
use comet_proto::names::SCHEDULE_TOPIC;
use comet_proto::properties::{names, Properties};
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::{run_blocking, spawn, timeout, TaskClass, TaskHandle};
use comet_store::StoreError;

use super::limits::{CHECKS_IN_FLIGHT_MAX, READ_BYTES_MAX, READ_RECORDS_MAX};
use super::{cursor, POLL_INTERVAL_MS, ROUND_ENTRIES_MAX, SCHEDULE_ORIGIN};
use crate::queue_cursor::{self, Step};
use crate::reappend::append_concurrently;
use crate::reappend::ReappendError;
use crate::routing::messages_by_key;
use crate::shard::ShardBroker;

/// Why a delivery round stopped early (the next round retries).
#[derive(Debug, thiserror::Error)]
enum RoundError {
    /// A schedule queue could not be read.
    #[error("reading the schedule queue: {0}")]
    Read(#[from] StoreError),
    /// Due messages were not all stored in their real queues.
    #[error(transparent)]
    Deliver(#[from] ReappendError),
}

/// One shard's delivery state.
struct Scheduler {
    broker: Rc<ShardBroker>,
    /// Delay of each level, ms (index = schedule queue id).
    levels_ms: Vec<i64>,
    /// Schedule queues this shard owns.
    owned: Vec<i32>,
    /// Next offset to deliver, per owned queue (what is persisted).
    cursors: BTreeMap<i32, i64>,
    /// Entries below this offset may have been delivered before a crash: check first.
    verify_until: BTreeMap<i32, i64>,
    /// Entries due at or before this may have been delivered by the master this broker
    /// followed as a slave (see `cursor::note_role`): check first.
    verify_due_until_ms: i64,
    path: PathBuf,
}

/// What one level contributes to a round.
struct LevelRound {
    records: Vec<BytesMut>,
    /// Records of `records` (by index) that a crash may have left delivered already.
    suspects: Vec<(usize, SuspectCopy)>,
    next_offset: i64,
    next_due_ms: Option<i64>,
}

/// The owned form of a [`DeliveredCopy`], so a check can run as a task of its own.
struct SuspectCopy {
    topic: String,
    queue_id: i32,
    unique_key: String,
    origin: i64,
    since_ms: i64,
}

impl SuspectCopy {
    /// What to look for to know whether the schedule record `view` was delivered; `None`
    /// when it lacks what the check needs (it is then delivered without one, as before).
    fn of(view: &RecordView<'_>) -> Option<SuspectCopy> {
        let properties = Properties::decode(view.properties());
        Some(SuspectCopy {
            topic: properties.get(names::REAL_TOPIC)?.to_owned(),
            queue_id: properties.get(names::REAL_QID)?.trim().parse().ok()?,
            unique_key: properties.get(names::UNIQ_KEY)?.to_owned(),
            origin: view.physical_offset(),
            since_ms: view.store_timestamp(),
        })
    }

    fn borrowed(&self) -> DeliveredCopy<'_> {
        DeliveredCopy {
            topic: &self.topic,
            queue_id: self.queue_id,
            unique_key: &self.unique_key,
            origin: self.origin,
            since_ms: self.since_ms,
        }
    }
}

/// Starts the delivery task when this shard owns a schedule queue; it ends after `stop`.
pub fn spawn_delivery(broker: &Rc<ShardBroker>, stop: &StopSignal) -> Option<TaskHandle<()>> {
    let levels_ms = broker.store().config().delay_levels_ms.clone();
    let owned: Vec<i32> = (0..levels_ms.len())
        .filter_map(|level| i32::try_from(level).ok())
        .filter(|queue_id| broker.owns(SCHEDULE_TOPIC, *queue_id))
        .collect();
    if owned.is_empty() {
        return None;
    }
    let broker = broker.clone();
    let stop = stop.clone();
    Some(spawn(TaskClass::Produce, async move {
        let config_dir = broker.config_dir().to_path_buf();
        let (loaded, promoted_at_ms) = run_blocking(move || {
            (
                cursor::load_all(&config_dir),
                cursor::promoted_at_ms(&config_dir),
            )
        })
        .await;
        let path = cursor::path(broker.config_dir(), broker.shard().0);
        let cursors: BTreeMap<i32, i64> = owned
            .iter()
            .map(|queue_id| (*queue_id, loaded.get(queue_id).copied().unwrap_or(0)))
            .collect();
        let verify_until = cursors
            .iter()
            .map(|(queue_id, offset)| (*queue_id, offset + ROUND_ENTRIES_MAX as i64))
            .collect();
        let mut scheduler = Scheduler {
            broker,
            levels_ms,
            owned,
            cursors,
            verify_until,
            verify_due_until_ms: promoted_at_ms.unwrap_or(i64::MIN),
            path,
        };
        scheduler.run(&stop).await;
    }))
}

impl Scheduler {
    async fn run(&mut self, stop: &StopSignal) {
        while !stop.is_triggered() {
            let next_due_ms = match self.round().await {
                Ok(next_due_ms) => next_due_ms,
                Err(e) => {
                    log::warn!("{} delayed delivery round failed: {e}", self.broker.shard());
                    None
                }
            };
            let now_ms = comet_rt::clock::wall_clock_ms();
            let wait_ms = match next_due_ms {
                Some(due_ms) if due_ms <= now_ms => continue,
                Some(due_ms) => (due_ms - now_ms).min(POLL_INTERVAL_MS as i64),
                None => POLL_INTERVAL_MS as i64,
            };
            let wait = Duration::from_millis(u64::try_from(wait_ms).unwrap_or(1).max(1));
            let _ = timeout(wait, stop.wait()).await;
        }
    }

    /// Delivers what is due on every owned level; returns the earliest due time left
    /// (`Some(past)` when a level stopped at its round limit with more due).
    async fn round(&mut self) -> Result<Option<i64>, RoundError> {
        let now_ms = comet_rt::clock::wall_clock_ms();
        let mut records = Vec::new();
        let mut advanced = BTreeMap::new();
        let mut next_due_ms: Option<i64> = None;
        for queue_id in self.owned.clone() {
            let mut level = self.collect_level(queue_id, now_ms).await?;
            drop_delivered(&self.broker, queue_id, &mut level).await;
            records.extend(level.records);
            if let Some(due_ms) = level.next_due_ms {
                next_due_ms = Some(next_due_ms.map_or(due_ms, |current| current.min(due_ms)));
            }
            if level.next_offset != self.cursors[&queue_id] {
                advanced.insert(queue_id, level.next_offset);
            }
        }
        if advanced.is_empty() {
            return Ok(next_due_ms);
        }
        // The timer wheel's appender: many chunks in flight on every owner at once, so one
        // group commit (one fdatasync) covers several of them.
        if let Err(e) = append_concurrently(&self.broker, records).await {
            // Some owners may have stored their part: check those entries on the retry.
            for (queue_id, next_offset) in &advanced {
                let until = self.verify_until.entry(*queue_id).or_insert(0);
                *until = (*until).max(*next_offset);
            }
            return Err(RoundError::Deliver(e));
        }
        self.cursors.extend(advanced);
        self.persist().await;
        Ok(next_due_ms)
    }

    /// Persists the cursors; retries until it works, because the next round must not start
    /// while delivered entries are not covered by a persisted cursor.
    async fn persist(&self) {
        loop {
            let path = self.path.clone();
            let cursors = self.cursors.clone();
            match run_blocking(move || cursor::store(&path, &cursors)).await {
                Ok(()) => return,
                Err(e) => {
                    log::error!("cannot persist delay cursors: {e}");
                    comet_rt::task_class::sleep(Duration::from_secs(1)).await;
                }
            }
        }
    }

    /// Reads one level from its cursor: due records rebuilt for their real queues, up to the
    /// round limit.
    async fn collect_level(&self, queue_id: i32, now_ms: i64) -> Result<LevelRound, StoreError> {
        let start = self.cursors[&queue_id];
        let delay_ms = self.levels_ms[usize::try_from(queue_id).expect("queue id >= 0")];
        let mut round = LevelRound {
            records: Vec::new(),
            suspects: Vec::new(),
            next_offset: start,
            next_due_ms: None,
        };
        while round.next_offset - start < ROUND_ENTRIES_MAX as i64 {
            let step = queue_cursor::read_step(
                &self.broker,
                SCHEDULE_TOPIC,
                queue_id,
                &mut round.next_offset,
                READ_RECORDS_MAX,
                READ_BYTES_MAX,
            )
            .await?;
            let result = match step {
                Step::Found(result) => result,
                Step::Moved => continue,
                Step::End => return Ok(round),
            };
            let reached_undue =
                self.take_due(queue_id, &result.records, delay_ms, now_ms, &mut round);
            if reached_undue {
                return Ok(round);
            }
            round.next_offset = round.next_offset.max(result.next_offset.as_i64());
        }
        round.next_due_ms = Some(now_ms);
        Ok(round)
    }

    /// Moves the due records of `records` into `round`, noting those a crash may have
    /// delivered already; true when it met one not yet due.
    fn take_due(
        &self,
        queue_id: i32,
        records: &[comet_proto::bytes::Bytes],
        delay_ms: i64,
        now_ms: i64,
        round: &mut LevelRound,
    ) -> bool {
        let start = self.cursors[&queue_id];
        for bytes in records {
            let Ok(view) = RecordView::parse(bytes) else {
                log::error!("unreadable record in {SCHEDULE_TOPIC} queue {queue_id}; skipped");
                round.next_offset += 1;
                continue;
            };
            if view.queue_offset() - start >= ROUND_ENTRIES_MAX as i64 {
                round.next_due_ms = Some(now_ms);
                return true;
            }
            let due_ms = view.store_timestamp().saturating_add(delay_ms);
            if due_ms > now_ms {
                round.next_due_ms = Some(due_ms);
                return true;
            }
            round.next_offset = view.queue_offset() + 1;
            let Some(record) = delivered_record(&self.broker, &view) else {
                log::error!(
                    "scheduled record {} has no REAL_TOPIC/REAL_QID; dropped",
                    view.physical_offset()
                );
                continue;
            };
            if view.queue_offset() < self.verify_until[&queue_id]
                || due_ms <= self.verify_due_until_ms
            {
                if let Some(copy) = SuspectCopy::of(&view) {
                    round.suspects.push((round.records.len(), copy));
                }
            }
            round.records.push(record);
        }
        false
    }
}

/// Removes from `level` the suspects whose delivery its real queue already holds.
async fn drop_delivered(broker: &Rc<ShardBroker>, queue_id: i32, level: &mut LevelRound) {
    if level.suspects.is_empty() {
        return;
    }
    let (indexes, copies): (Vec<usize>, Vec<SuspectCopy>) =
        std::mem::take(&mut level.suspects).into_iter().unzip();
    let checked = copies.len();
    let found = copies_delivered(broker, copies).await;
    assert_eq!(found.len(), checked);
    let delivered: HashSet<usize> = indexes
        .into_iter()
        .zip(found)
        .filter_map(|(index, found)| found.then_some(index))
        .collect();
    assert!(delivered.len() <= level.records.len());
    let records = std::mem::take(&mut level.records);
    level.records = records
        .into_iter()
        .enumerate()
        .filter_map(|(index, record)| (!delivered.contains(&index)).then_some(record))
        .collect();
    log::info!(
        "{}: {checked} scheduled entries of queue {queue_id} possibly delivered before a \
         crash checked, {} were",
        broker.shard(),
        delivered.len()
    );
}

/// Whether each copy is held by its real queue's owner (in order), with up to
/// [`CHECKS_IN_FLIGHT_MAX`] lookups running at once.
async fn copies_delivered(broker: &Rc<ShardBroker>, copies: Vec<SuspectCopy>) -> Vec<bool> {
    let mut found = vec![false; copies.len()];
    let mut in_flight: VecDeque<(usize, TaskHandle<bool>)> = VecDeque::new();
    for (index, copy) in copies.into_iter().enumerate() {
        if in_flight.len() >= CHECKS_IN_FLIGHT_MAX {
            let (done, check) = in_flight.pop_front().expect("a check in flight");
            found[done] = check.await;
        }
        let broker = broker.clone();
        let check = spawn(TaskClass::Produce, async move {
            delivered_copy_exists(&broker, &copy.borrowed()).await
        });
        in_flight.push_back((index, check));
    }
    for (done, check) in in_flight {
        found[done] = check.await;
    }
    found
}

/// The delivered form of a schedule record: real topic and queue, `DELAY` and timer
/// properties removed, [`SCHEDULE_ORIGIN`] added. `None` when the real queue is missing.
pub fn delivered_record(broker: &ShardBroker, view: &RecordView<'_>) -> Option<BytesMut> {
    let mut properties = Properties::decode(view.properties());
    let topic = properties.get(names::REAL_TOPIC)?.to_owned();
    let queue_id: i32 = properties.get(names::REAL_QID)?.trim().parse().ok()?;
    properties.remove(names::DELAY);
    properties.remove(names::TIMER_DELIVER_MS);
    properties.remove(names::TIMER_DELAY_SEC);
    properties.remove(names::TIMER_DELAY_MS);
    properties.insert(SCHEDULE_ORIGIN, view.physical_offset().to_string());
    crate::reappend::restored_record(broker, view, &topic, queue_id, &properties.encode())
}

/// A delivery to look for: its queue, `UNIQ_KEY`, the physical offset of the record it was
/// delivered from (its [`SCHEDULE_ORIGIN`]) and a time it was stored at or after.
pub(crate) struct DeliveredCopy<'a> {
    /// Real topic.
    pub topic: &'a str,
    /// Real queue.
    pub queue_id: i32,
    /// `UNIQ_KEY`.
    pub unique_key: &'a str,
    /// Physical offset of the source record.
    pub origin: i64,
    /// Lower bound of the delivery's store time, ms.
    pub since_ms: i64,
}

/// True when the queue's owner holds a record with the copy's key and origin (searched in
/// the owner's index by `UNIQ_KEY`).
pub(crate) async fn delivered_copy_exists(broker: &ShardBroker, copy: &DeliveredCopy<'_>) -> bool {
    let found = messages_by_key(
        broker,
        copy.topic,
        copy.queue_id,
        copy.unique_key,
        copy.since_ms,
    )
    .await;
    let Some(found) = found else {
        return false;
    };
    let origin = copy.origin.to_string();
    let mut rest: &[u8] = &found;
    while let Ok(found) = RecordView::parse(rest) {
        if found.property(SCHEDULE_ORIGIN) == Some(origin.as_str()) {
            return true;
        }
        rest = &rest[found.total_size()..];
    }
    false
}
