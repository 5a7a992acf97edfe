//! Queue-offset requests (docs/protocol.md#consumer-offsets), on the queue's owner shard: consumer
//! offsets and the queue's min, max, by-time and earliest-time lookups.

use comet_proto::headers::{
    BoundaryType, GetEarliestMsgStoretimeRequestHeader, GetEarliestMsgStoretimeResponseHeader,
    GetMaxOffsetRequestHeader, GetMaxOffsetResponseHeader, GetMinOffsetRequestHeader,
    GetMinOffsetResponseHeader, QueryConsumerOffsetRequestHeader,
    QueryConsumerOffsetResponseHeader, ResetOffsetRequestHeader, SearchOffsetRequestHeader,
    SearchOffsetResponseHeader, UpdateConsumerOffsetRequestHeader,
};
use comet_proto::{CommandHeader, HeaderError, RemotingCommand, ResponseCode};
use comet_store::TimeBoundary;

use crate::shard::ShardBroker;

fn bad_header(request: &RemotingCommand, error: HeaderError) -> RemotingCommand {
    RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, error.to_string())
}

fn success<H: CommandHeader>(request: &RemotingCommand, header: &H) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_header(header)
}

/// QUERY_CONSUMER_OFFSET (14): the committed offset; for a group that never committed, 0
/// while the queue still starts at offset 0 (a young queue is read from its start,
/// docs/protocol.md#max-offset-and-young-queues), otherwise QUERY_NOT_FOUND so the client applies
/// its consume-from-where.
pub fn query_consumer_offset(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match QueryConsumerOffsetRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    let stored =
        broker
            .offsets()
            .borrow()
            .query(&header.consumer_group, &header.topic, header.queue_id);
    let offset = match stored {
        Some(offset) => Some(offset),
        None if header.set_zero_if_not_found == Some(false) => None,
        None => {
            let min = broker
                .queue_store(&header.topic, header.queue_id)
                .min_offset(&header.topic, header.queue_id)
                .0;
            let max = broker
                .queue_store(&header.topic, header.queue_id)
                .max_offset(&header.topic, header.queue_id)
                .0;
            (min == 0 && max > 0).then_some(0)
        }
    };
    match offset {
        Some(offset) => success(request, &QueryConsumerOffsetResponseHeader { offset }),
        None => RemotingCommand::error_to(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first",
        ),
    }
}

/// UPDATE_CONSUMER_OFFSET (15), often one-way.
pub fn update_consumer_offset(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match UpdateConsumerOffsetRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    if header.queue_id < 0 || header.commit_offset < 0 {
        return RemotingCommand::error_to(
            request,
            ResponseCode::INVALID_PARAMETER,
            "negative queue id or offset",
        );
    }
    broker.offsets().borrow_mut().commit(
        &header.consumer_group,
        &header.topic,
        header.queue_id,
        header.commit_offset,
    );
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// GET_MAX_OFFSET (30): one past the last entry.
pub fn max_offset(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    match GetMaxOffsetRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => {
            let offset = broker
                .queue_store(&header.topic, header.queue_id)
                .max_offset(&header.topic, header.queue_id)
                .as_i64();
            success(request, &GetMaxOffsetResponseHeader { offset })
        }
        Err(e) => bad_header(request, e),
    }
}

/// GET_MIN_OFFSET (31).
pub fn min_offset(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    match GetMinOffsetRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => {
            let offset = broker
                .queue_store(&header.topic, header.queue_id)
                .min_offset(&header.topic, header.queue_id)
                .as_i64();
            success(request, &GetMinOffsetResponseHeader { offset })
        }
        Err(e) => bad_header(request, e),
    }
}

/// SEARCH_OFFSET_BY_TIMESTAMP (29).
pub async fn search_offset(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match SearchOffsetRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    let boundary = match header.boundary_type.unwrap_or(BoundaryType::Lower) {
        BoundaryType::Lower => TimeBoundary::Lower,
        BoundaryType::Upper => TimeBoundary::Upper,
    };
    let found = broker
        .queue_store(&header.topic, header.queue_id)
        .offset_by_timestamp(&header.topic, header.queue_id, header.timestamp, boundary)
        .await;
    match found {
        Ok(offset) => success(
            request,
            &SearchOffsetResponseHeader {
                offset: offset.as_i64(),
            },
        ),
        Err(e) => RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// GET_EARLIEST_MSG_STORETIME (32).
pub async fn earliest_store_time(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match GetEarliestMsgStoretimeRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    match broker
        .queue_store(&header.topic, header.queue_id)
        .earliest_store_time(&header.topic, header.queue_id)
        .await
    {
        Ok(time) => success(
            request,
            &GetEarliestMsgStoretimeResponseHeader {
                timestamp: time.unwrap_or(-1),
            },
        ),
        Err(e) => RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// INVOKE_BROKER_TO_RESET_OFFSET (222) for one queue, on its owner: the target is the
/// explicit `offset`, the queue's max for timestamp -1, or the first message stored at or
/// after `timestamp`; it becomes the group's committed offset and the next pull of the queue
/// moves the consumer there. Answers the offset in the `offset` ext field.
pub async fn reset_offset_of_queue(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match ResetOffsetRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return bad_header(request, e),
    };
    let Some(queue_id) = header.queue_id.filter(|queue| *queue >= 0) else {
        return RemotingCommand::error_to(
            request,
            ResponseCode::INVALID_PARAMETER,
            "queueId is required here",
        );
    };
    let max = broker
        .queue_store(&header.topic, queue_id)
        .max_offset(&header.topic, queue_id)
        .as_i64();
    let min = broker
        .queue_store(&header.topic, queue_id)
        .min_offset(&header.topic, queue_id)
        .as_i64();
    let target = match header.offset {
        Some(offset) if offset < min || offset > max => {
            let remark = format!("offset {offset} is outside [{min}, {max}]");
            return RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, remark);
        }
        Some(offset) => offset,
        None if header.timestamp < 0 => max,
        None => match broker
            .queue_store(&header.topic, queue_id)
            .offset_by_timestamp(
                &header.topic,
                queue_id,
                header.timestamp,
                TimeBoundary::Lower,
            )
            .await
        {
            Ok(offset) => offset.as_i64(),
            Err(e) => {
                return RemotingCommand::error_to(
                    request,
                    ResponseCode::SYSTEM_ERROR,
                    e.to_string(),
                )
            }
        },
    };
    broker
        .offsets()
        .borrow_mut()
        .reset(&header.group, &header.topic, queue_id, target);
    let mut response = RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    response.ext_fields.insert("offset", target.to_string());
    response
}
