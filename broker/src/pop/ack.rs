//! Acks and invisible-time changes of one queue, on the shard owning it (Java's
//! `AckMessageProcessor.appendAck` and `ChangeInvisibleTimeProcessor`); orderly acks in
//! [`ack_orderly`].
//!
//! Both only append records to this shard's revive queue and answer once they are
//! durable; the revive scanner pairs them with their checkpoints. An ack whose checkpoint
//! is already revived or acked pairs with nothing and changes nothing, and is answered
//! SUCCESS as Java does. An invisible-time change writes a new one-message checkpoint
//! (starting at the message, popped now) and then an ack of the old one, in one append, so
//! the message is never without a checkpoint.

use comet_proto::ResponseCode;

use super::order::Commit;
use super::records::{ack_record, ck_record, order_ack_record, AckRecord, CheckPoint, OrderAck};
use crate::shard::ShardBroker;

/// Why an ack or change was not stored.
#[derive(Debug, thiserror::Error)]
pub enum AckError {
    /// The record could not be encoded.
    #[error("encoding: {0}")]
    Encode(#[from] comet_proto::message::RecordError),
    /// The store did not make it durable.
    #[error("storing: {0}")]
    Store(String),
}

/// Stores `ack`; resolves once it is durable.
pub async fn store_ack(broker: &ShardBroker, ack: &AckRecord) -> Result<(), AckError> {
    let record = ack_record(broker, ack)?;
    append(broker, vec![record]).await
}

/// Stores `acks` in one append; resolves once all are durable.
pub async fn store_acks(broker: &ShardBroker, acks: &[AckRecord]) -> Result<(), AckError> {
    let mut records = Vec::with_capacity(acks.len());
    for ack in acks {
        records.push(ack_record(broker, ack)?);
    }
    append(broker, records).await
}

/// Stores the new checkpoint `ck` of one message, then the ack `old` of the checkpoint it
/// had; resolves once both are durable.
pub async fn store_change(
    broker: &ShardBroker,
    ck: &CheckPoint,
    old: &AckRecord,
) -> Result<(), AckError> {
    let records = vec![ck_record(broker, ck)?, ack_record(broker, old)?];
    append(broker, records).await
}

/// One orderly ack (Java's `AckMessageProcessor.ackOrderly`): the book decides where the
/// group's consume offset goes, the offset moves at once (so a pop reading after this sees
/// it), and a record of the ack is made durable before the answer, so neither the move nor
/// an ack ahead of the consume offset is lost in a crash. `Stale` and `Illegal` change
/// nothing and store nothing.
pub async fn ack_orderly(
    broker: &ShardBroker,
    ack: &OrderAck,
    pop_time_ms: i64,
) -> Result<Commit, AckError> {
    let key = (ack.topic.clone(), ack.consumer_group.clone(), ack.queue_id);
    let now_ms = comet_rt::clock::wall_clock_ms();
    let (commit, next_offset) = {
        let mut offsets = broker.offsets().borrow_mut();
        let position = offsets
            .query(&ack.consumer_group, &ack.topic, ack.queue_id)
            .unwrap_or(0);
        let commit = super::state::with_order_book(|book| {
            book.ack(&key, ack.ack_offset, pop_time_ms, position, now_ms)
        });
        let next_offset = match commit {
            Commit::Next(next) if next > position => {
                offsets.commit(&ack.consumer_group, &ack.topic, ack.queue_id, next);
                next
            }
            _ => position,
        };
        (commit, next_offset)
    };
    if matches!(commit, Commit::Next(_) | Commit::Ahead) {
        let record = OrderAck {
            next_offset,
            ..ack.clone()
        };
        append(broker, vec![order_ack_record(broker, &record)?]).await?;
    }
    Ok(commit)
}

async fn append(
    broker: &ShardBroker,
    records: Vec<comet_proto::bytes::BytesMut>,
) -> Result<(), AckError> {
    let response = crate::reappend::append_local(broker, records).await;
    if response.response_code() == ResponseCode::SUCCESS {
        Ok(())
    } else {
        Err(AckError::Store(response.remark.unwrap_or_default()))
    }
}
