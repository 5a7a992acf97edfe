//! Per-queue figures the admin processors ask of each queue's owner shard (offsets, the
//! queue's name), shared by `admin` and `inspect`.

use comet_proto::body::MessageQueue;
use comet_proto::headers::{GetMaxOffsetRequestHeader, GetMinOffsetRequestHeader};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use crate::routing::call_owner;
use crate::shard::ShardBroker;

/// An internal request with `header`, for another shard's processor.
pub(crate) fn internal_request<H: CommandHeader>(code: RequestCode, header: &H) -> RemotingCommand {
    RemotingCommand::request(code, 0).with_header(header)
}

/// The `offset` field of the owner's answer to `request`; `None` when it refused.
pub(crate) async fn owner_offset(
    broker: &ShardBroker,
    topic: &str,
    queue_id: i32,
    request: RemotingCommand,
) -> Option<i64> {
    let response = call_owner(broker, topic, queue_id, request).await?;
    if response.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    response.ext_fields.optional_i64("offset").ok().flatten()
}

/// The queue's minimum and maximum offsets, asked of its owner (0 when it did not answer).
pub(crate) async fn queue_min_max(broker: &ShardBroker, topic: &str, queue_id: i32) -> (i64, i64) {
    let min = GetMinOffsetRequestHeader {
        topic: topic.to_owned(),
        queue_id,
        broker_name: None,
        logical: None,
    };
    let max = GetMaxOffsetRequestHeader {
        topic: topic.to_owned(),
        queue_id,
        committed: None,
        broker_name: None,
        logical: None,
    };
    let min = owner_offset(
        broker,
        topic,
        queue_id,
        internal_request(RequestCode::GET_MIN_OFFSET, &min),
    )
    .await;
    let max = owner_offset(
        broker,
        topic,
        queue_id,
        internal_request(RequestCode::GET_MAX_OFFSET, &max),
    )
    .await;
    (min.unwrap_or(0), max.unwrap_or(0))
}

/// The queue as an admin names it: topic, this broker's name, queue id.
pub(crate) fn message_queue(broker: &ShardBroker, topic: &str, queue_id: i32) -> MessageQueue {
    MessageQueue {
        topic: topic.to_owned(),
        broker_name: broker.config().broker_name.clone(),
        queue_id,
    }
}
