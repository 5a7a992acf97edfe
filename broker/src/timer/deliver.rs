//! Turning wheel entries into delivered records and appending them: batched reads of timer
//! records, the delivered form, and many group-committed appends in flight at once.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::rc::Rc;

use comet_proto::bytes::BytesMut;
use comet_proto::message::RecordView;
use comet_proto::properties::{names, Properties};
use comet_rt::task_class::{spawn, yield_if_needed, TaskClass, TaskHandle};
use comet_rt::ShardId;
use comet_store::{GetStatus, MessageFilter, QueueOffset};

use super::limits::{
    APPENDS_IN_FLIGHT_MAX, LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX, READ_BYTES_MAX, READ_RECORDS_MAX,
};
use super::TIMER_TOPIC;
use crate::reappend::{self, ReappendError};
use crate::schedule::SCHEDULE_ORIGIN;
use crate::shard::ShardBroker;

/// A delivered record ready to append, with what identifies its timer record.
pub struct Built {
    /// The record for its real queue.
    pub record: BytesMut,
    /// Physical offset of the timer record (its [`SCHEDULE_ORIGIN`]).
    pub origin: i64,
}

/// The delivered form of a timer record due at `due_ms` (see the module docs of `timer`);
/// `None` when it names no real queue.
pub fn delivered_record(
    broker: &ShardBroker,
    view: &RecordView<'_>,
    due_ms: i64,
) -> Option<BytesMut> {
    let mut properties = Properties::decode(view.properties());
    let topic = properties.remove(names::REAL_TOPIC)?;
    let queue_id: i32 = properties.remove(names::REAL_QID)?.trim().parse().ok()?;
    properties.insert(names::TIMER_ENQUEUE_MS, view.store_timestamp().to_string());
    properties.insert(names::TIMER_DEQUEUE_MS, due_ms.to_string());
    properties.insert(SCHEDULE_ORIGIN, view.physical_offset().to_string());
    reappend::restored_record(broker, view, &topic, queue_id, &properties.encode())
}

/// Reads the timer records at `wanted` offsets of `queue_id` (any order) and builds each
/// one's delivered form with `build`; offsets whose record is gone or unusable are missing
/// from the result (and logged). Consecutive offsets share store reads.
pub async fn read_and_build<F>(
    broker: &ShardBroker,
    queue_id: i32,
    wanted: &mut [(i64, i64)],
    mut build: F,
) -> HashMap<i64, Built>
where
    F: FnMut(&RecordView<'_>, i64) -> Option<BytesMut>,
{
    wanted.sort_unstable();
    let mut built = HashMap::with_capacity(wanted.len());
    let mut index = 0;
    while index < wanted.len() {
        let start = wanted[index].0;
        let mut run = 1;
        while index + run < wanted.len()
            && run < READ_RECORDS_MAX
            && wanted[index + run].0 == start + run as i64
        {
            run += 1;
        }
        let offset = QueueOffset(u64::try_from(start).unwrap_or(0));
        let read = broker
            .store
            .get_messages(
                TIMER_TOPIC,
                queue_id,
                offset,
                run,
                READ_BYTES_MAX,
                MessageFilter::All,
            )
            .await;
        match read {
            Ok(result) if result.status == GetStatus::Found => {
                for bytes in &result.records {
                    let Ok(view) = RecordView::parse(bytes) else {
                        continue;
                    };
                    let Ok(at) = wanted[index..index + run]
                        .binary_search_by_key(&view.queue_offset(), |(offset, _)| *offset)
                    else {
                        continue;
                    };
                    let due_ms = wanted[index + at].1;
                    if let Some(record) = build(&view, due_ms) {
                        let origin = view.physical_offset();
                        built.insert(view.queue_offset(), Built { record, origin });
                    }
                }
            }
            Ok(result) => log::warn!(
                "timer queue {queue_id} offset {start}: {:?}, {run} entries skipped",
                result.status
            ),
            Err(e) => log::error!("timer queue {queue_id} offset {start}: read failed: {e}"),
        }
        index += run;
        yield_if_needed().await;
    }
    built
}

/// Appends `records` (any real queues) on their owners and resolves when all are durable.
/// Chunks for this shard's own queues are appended directly (no mesh), up to
/// [`LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX`] at once; chunks for other shards cross the mesh, up to
/// [`APPENDS_IN_FLIGHT_MAX`] at once, round robin over owners so every owner's group commit
/// covers many chunks from the start. On error some chunks may be stored (the caller treats
/// the whole set as possibly delivered).
pub async fn append_concurrently(
    broker: &Rc<ShardBroker>,
    records: Vec<BytesMut>,
) -> Result<(), ReappendError> {
    let mut by_owner: BTreeMap<ShardId, Vec<BytesMut>> = BTreeMap::new();
    for (index, record) in records.into_iter().enumerate() {
        let owner = reappend::owner_of_record(broker, &record)
            .map_err(|source| ReappendError::Malformed { index, source })?;
        by_owner.entry(owner).or_default().push(record);
    }
    let mut queues: Vec<(ShardId, VecDeque<Vec<BytesMut>>)> = by_owner
        .into_iter()
        .map(|(owner, records)| (owner, reappend::chunks(records).into()))
        .collect();
    let mut local = InFlight::new(LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX);
    let mut remote = InFlight::new(APPENDS_IN_FLIGHT_MAX);
    while queues.iter().any(|(_, chunks)| !chunks.is_empty()) {
        for (owner, chunks) in &mut queues {
            let Some(chunk) = chunks.pop_front() else {
                continue;
            };
            let lane = if *owner == broker.shard {
                &mut local
            } else {
                &mut remote
            };
            let broker = broker.clone();
            let owner = *owner;
            lane.start(async move { reappend::append_chunk(&broker, owner, chunk).await })
                .await;
        }
    }
    local.finish().await;
    remote.finish().await;
    local.first_error.or(remote.first_error).map_or(Ok(()), Err)
}

/// Chunk appends running as their own tasks, at most `max` at once, oldest awaited first.
struct InFlight {
    max: usize,
    tasks: VecDeque<TaskHandle<Result<(), ReappendError>>>,
    first_error: Option<ReappendError>,
}

impl InFlight {
    fn new(max: usize) -> InFlight {
        assert!(max > 0);
        InFlight {
            max,
            tasks: VecDeque::new(),
            first_error: None,
        }
    }

    /// Starts `append` once fewer than `max` are in flight. Its task runs (and its records
    /// get their place and store time in the log) as soon as the caller yields.
    async fn start<F>(&mut self, append: F)
    where
        F: std::future::Future<Output = Result<(), ReappendError>> + 'static,
    {
        if self.tasks.len() >= self.max {
            let done = self.tasks.pop_front().expect("in flight");
            self.record(done.await);
        }
        self.tasks.push_back(spawn(TaskClass::Produce, append));
    }

    async fn finish(&mut self) {
        while let Some(done) = self.tasks.pop_front() {
            self.record(done.await);
        }
    }

    fn record(&mut self, result: Result<(), ReappendError>) {
        if let Err(e) = result {
            self.first_error.get_or_insert(e);
        }
    }
}
