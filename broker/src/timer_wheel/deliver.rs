//! Turning wheel entries into delivered records: batched reads of timer records and the
//! delivered form (appended by `crate::reappend::append_concurrently`).

use std::collections::HashMap;

use comet_proto::bytes::BytesMut;
use comet_proto::message::RecordView;
use comet_proto::properties::{names, Properties};
use comet_rt::task_class::yield_if_needed;
use comet_store::{GetStatus, MessageFilter, QueueOffset};

use super::limits::{READ_BYTES_MAX, READ_RECORDS_MAX};
use super::TIMER_TOPIC;
use crate::delay_level::SCHEDULE_ORIGIN;
use crate::reappend;
use crate::shard::ShardBroker;

/// A delivered record ready to append, with what identifies its timer record.
pub struct Built {
    /// The record for its real queue.
    pub record: BytesMut,
    /// Physical offset of the timer record (its [`SCHEDULE_ORIGIN`]).
    pub origin: i64,
}

/// The delivered form of a timer record due at `due_ms` (see the module docs of `timer_wheel`);
/// `None` when it names no real queue.
pub fn delivered_record(
    broker: &ShardBroker,
    view: &RecordView<'_>,
    due_ms: i64,
) -> Option<BytesMut> {
    let mut properties = Properties::decode(view.properties());
    // A deletion is never delivered (Java's `TimerMessageStore.doPut` refuses one too).
    if properties.get(names::TIMER_DEL_UNIQKEY).is_some() {
        return None;
    }
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
            .store()
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
