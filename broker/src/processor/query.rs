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
    let found = query_stores(broker, &header, max).await;
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

/// Up to `max` records of `header`'s key in this shard's own log and the logs it hosts.
async fn query_stores(
    broker: &ShardBroker,
    header: &QueryMessageRequestHeader,
    max: usize,
) -> Result<Vec<Bytes>, comet_store::StoreError> {
    let hosted = broker.hosted_logs().iter().map(|hosted| &hosted.store);
    let mut found = Vec::new();
    for store in std::iter::once(broker.store()).chain(hosted) {
        let wanted = max.saturating_sub(found.len());
        if wanted == 0 {
            break;
        }
        let records = store
            .query_by_key(
                &header.topic,
                &header.key,
                wanted,
                header.begin_timestamp,
                header.end_timestamp,
            )
            .await?;
        found.extend(records);
    }
    Ok(found)
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

/// The shard hosting the commit log that holds `offset` (log ids are shard indexes on a
/// master; a slave's shard `l % shards` hosts log `l`), if the offset is well formed and
/// names a log the queues belong to.
pub fn shard_of_offset(broker: &ShardBroker, offset: i64) -> Option<usize> {
    let physical = PhysicalOffset::from_i64(offset)?;
    let log = usize::from(physical.log_id().get());
    broker.host_of_log(log).map(|shard| shard.index())
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
    let store = broker
        .log_store(physical.log_id().get())
        .unwrap_or(broker.store());
    match store.read_record(physical).await {
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
