//! Message lookup (docs/protocol.md#message-lookup): QUERY_MESSAGE by key over every shard's index,
//! and VIEW_MESSAGE_BY_ID on the shard whose commit log the offset names.

use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::headers::{
    QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};
use comet_store::PhysicalOffset;

use crate::routing::QUERY_MAX;
use crate::shard::ShardBroker;

/// Results a unique-key query returns at most (Java's `defaultQueryMaxNum`).
pub const UNIQUE_KEY_QUERY_MAX: i32 = 32;

/// QUERY_MESSAGE on this shard's index only; the dispatcher merges the shards' answers.
pub async fn query_local(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match QueryMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => {
            return RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, e.to_string())
        }
    };
    let max = if header.unique_key_query == Some(true) {
        UNIQUE_KEY_QUERY_MAX
    } else {
        header.max_num.clamp(1, QUERY_MAX)
    };
    let max = usize::try_from(max).unwrap_or(1);
    let found = broker
        .store()
        .query_by_key(
            &header.topic,
            &header.key,
            max,
            header.begin_timestamp,
            header.end_timestamp,
        )
        .await;
    match found {
        Ok(records) if !records.is_empty() => found_response(request, &records),
        Ok(_) => RemotingCommand::error_to(
            request,
            ResponseCode::QUERY_NOT_FOUND,
            "can not find message, maybe time range not correct",
        ),
        Err(e) => RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// The SUCCESS answer carrying `records` back to back.
pub fn found_response(request: &RemotingCommand, records: &[Bytes]) -> RemotingCommand {
    let mut body = BytesMut::with_capacity(records.iter().map(Bytes::len).sum());
    for record in records {
        body.extend_from_slice(record);
    }
    let header = QueryMessageResponseHeader {
        index_last_update_timestamp: 0,
        index_last_update_phyoffset: 0,
    };
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&header)
        .with_body(body.freeze())
}

/// The shard whose commit log holds `offset` (log ids are shard indexes), if the offset is
/// well formed and names a live shard.
pub fn shard_of_offset(offset: i64, shard_count: usize) -> Option<usize> {
    let physical = PhysicalOffset::from_i64(offset)?;
    let index = usize::from(physical.log_id().get());
    (index < shard_count).then_some(index)
}

/// VIEW_MESSAGE_BY_ID on the shard owning the offset's log.
pub async fn view_local(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match ViewMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => {
            return RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, e.to_string())
        }
    };
    let Some(physical) = PhysicalOffset::from_i64(header.offset) else {
        return RemotingCommand::error_to(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("no message at offset {}", header.offset),
        );
    };
    match broker.store().read_record(physical).await {
        Ok(Some(record)) => {
            RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(record)
        }
        Ok(None) => RemotingCommand::error_to(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("no message at offset {}", header.offset),
        ),
        Err(e) => RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}
