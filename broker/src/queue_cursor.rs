//! Reading one of the broker's own queues (the delay levels' `SCHEDULE_TOPIC_XXXX`, the timer
//! wheel's queues) from a persisted cursor: one place that decides what a read that finds no
//! records means for the cursor.
//!
//! A cursor below the queue's first entry (retention removed it) moves up to that entry; one
//! on entries the read cannot return moves past them; one beyond the queue's end (the queue
//! was reset under it) moves back to the end, with a warning, and the read stops; an empty
//! queue or a cursor at the end stops the read.

use comet_store::{GetResult, GetStatus, MessageFilter, QueueOffset, StoreError};

use crate::shard::ShardBroker;

/// What one read at a cursor found.
pub enum Step {
    /// Records from the cursor, which is left where it was: the caller advances it past what
    /// it takes (up to `next_offset`).
    Found(GetResult),
    /// Nothing returnable at the cursor; the cursor moved, read again.
    Moved,
    /// Nothing more to read now; the cursor is where the next read starts.
    End,
}

/// Reads up to `records_max` records (`bytes_max` bytes) of `topic` queue `queue_id` at
/// `cursor`, moving the cursor as the module docs say when there is nothing to take there.
pub async fn read_step(
    broker: &ShardBroker,
    topic: &str,
    queue_id: i32,
    cursor: &mut i64,
    records_max: usize,
    bytes_max: usize,
) -> Result<Step, StoreError> {
    let offset = QueueOffset(u64::try_from(*cursor).unwrap_or(0));
    let result = broker
        .store()
        .get_messages(
            topic,
            queue_id,
            offset,
            records_max,
            bytes_max,
            MessageFilter::All,
        )
        .await?;
    match result.status {
        GetStatus::Found => Ok(Step::Found(result)),
        GetStatus::OffsetTooSmall => {
            *cursor = result.min_offset.as_i64();
            Ok(Step::Moved)
        }
        GetStatus::NoMatchedMessage => {
            *cursor = result.next_offset.as_i64();
            Ok(Step::Moved)
        }
        GetStatus::OffsetOverflowBadly => {
            log::warn!("{topic} cursor of queue {queue_id} past the queue end; moving to it");
            *cursor = result.max_offset.as_i64();
            Ok(Step::End)
        }
        GetStatus::NoMessageInQueue | GetStatus::OffsetOverflowOne => Ok(Step::End),
    }
}
