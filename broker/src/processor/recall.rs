//! RECALL_MESSAGE (370), docs/protocol.md#recall-message: cancels a pending timed message by
//! the recall handle its send answered, as Java's `RecallMessageProcessor`.
//!
//! The checks and their answers are Java's, in its order. A valid recall stores a timer
//! deletion (`TIMER_DEL_UNIQKEY` = `<topic>+<message id>`, due at the handle's timestamp, so
//! in the message's own cancellation slot) through the timed send path, which copies it to
//! every wheel (`crate::timer_wheel::deletion_copies`); the answer carries the message id.
//! As in Java, success means the deletion is stored, not that a message was found: a handle
//! naming an unknown or already delivered message is answered SUCCESS and cancels nothing.

use comet_proto::headers::{
    RecallMessageRequestHeader, RecallMessageResponseHeader, SendMessageRequestHeader,
    EXT_MSG_REGION,
};
use comet_proto::properties::{names, Properties};
use comet_proto::recall::RecallHandle;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use super::error;
use crate::config::BrokerRole;
use crate::routing::on_owner;
use crate::shard::{RequestContext, ShardBroker};
use crate::timer_wheel::{delete_key, rewrite_timer_send};

/// The tag Java gives a recall's deletion.
pub const RECALL_TAG: &str = "_RECALL_TAG_";

/// Serves one RECALL_MESSAGE where it arrived; the deletion is stored on its wheel's shard.
pub async fn process(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let response = match recall(broker, context, request).await {
        Ok(msg_id) => RemotingCommand::response_to(request, ResponseCode::SUCCESS)
            .with_header(&RecallMessageResponseHeader { msg_id }),
        Err(refused) => refused,
    };
    let mut response = response;
    response
        .ext_fields
        .insert(EXT_MSG_REGION, &broker.config().region_id);
    response
}

async fn recall(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> Result<String, RemotingCommand> {
    let header = RecallMessageRequestHeader::from_ext_fields(&request.ext_fields)
        .map_err(|e| error(request, ResponseCode::SYSTEM_ERROR, e.to_string()))?;
    let config = broker.config();
    if !config.recall_message_enable {
        return Err(error(
            request,
            ResponseCode::NO_PERMISSION,
            "recall failed, operation is forbidden",
        ));
    }
    let unavailable = "recall failed, broker service not available";
    if config.broker_role == BrokerRole::Slave {
        return Err(error(
            request,
            ResponseCode::SLAVE_NOT_AVAILABLE,
            unavailable,
        ));
    }
    if super::lease_lapsed(broker) {
        return Err(error(
            request,
            ResponseCode::SERVICE_NOT_AVAILABLE,
            unavailable,
        ));
    }
    if broker.topics().get(&header.topic).is_none() {
        let remark = format!("recall failed, the topic[{}] not exist", header.topic);
        return Err(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
    }
    let handle = RecallHandle::decode(&header.recall_handle)
        .map_err(|e| error(request, ResponseCode::ILLEGAL_OPERATION, e.to_string()))?;
    if handle.topic != header.topic {
        return Err(error(
            request,
            ResponseCode::ILLEGAL_OPERATION,
            "recall failed, topic not match",
        ));
    }
    if handle.broker_name != config.broker_name {
        return Err(error(request, ResponseCode::ILLEGAL_OPERATION, unavailable));
    }
    let now_ms = comet_rt::clock::wall_clock_ms();
    let max_delay_ms =
        i64::try_from(config.timer_max_delay_sec.saturating_mul(1000)).unwrap_or(i64::MAX);
    // Java's `NumberUtils.toLong(text, -1)`: anything unparsable is -1, in the past.
    let timestamp_ms = handle.timestamp.parse::<i64>().unwrap_or(-1);
    let time_left_ms = timestamp_ms.saturating_sub(now_ms);
    if time_left_ms <= 0 || time_left_ms >= max_delay_ms {
        return Err(error(
            request,
            ResponseCode::ILLEGAL_OPERATION,
            "recall failed, timestamp invalid",
        ));
    }
    drop(config);
    let mut deletion = deletion_request(&header, &handle, now_ms);
    let failed = || {
        error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "recall failed, execute error",
        )
    };
    let send_header =
        SendMessageRequestHeader::from_ext_fields(&deletion.ext_fields).map_err(|_| failed())?;
    let rewritten = match rewrite_timer_send(broker, &mut deletion, &send_header, 0) {
        Ok(Some(rewritten)) => rewritten,
        Ok(None) | Err(_) => return Err(failed()),
    };
    let stored = on_owner(
        broker,
        context,
        &rewritten.topic,
        rewritten.queue_id,
        deletion,
    )
    .await;
    // Java counts a stored deletion whose flush or replication timed out as recalled.
    match stored.map(|response| response.response_code()) {
        Some(
            ResponseCode::SUCCESS
            | ResponseCode::FLUSH_DISK_TIMEOUT
            | ResponseCode::FLUSH_SLAVE_TIMEOUT
            | ResponseCode::SLAVE_NOT_AVAILABLE,
        ) => Ok(handle.message_id),
        _ => Err(failed()),
    }
}

/// The deletion a recall stores, as Java's `RecallMessageProcessor.buildMessage`: body "0",
/// queue 0 of the topic, the recall tag, the message's id as its own `UNIQ_KEY`.
fn deletion_request(
    header: &RecallMessageRequestHeader,
    handle: &RecallHandle,
    now_ms: i64,
) -> RemotingCommand {
    let mut properties = Properties::new();
    properties.insert(names::TAGS, RECALL_TAG);
    properties.insert(
        names::TIMER_DEL_UNIQKEY,
        delete_key(&handle.topic, &handle.message_id),
    );
    properties.insert(names::UNIQ_KEY, handle.message_id.clone());
    properties.insert(names::TIMER_DELIVER_MS, handle.timestamp.clone());
    properties.insert(names::BORN_TIMESTAMP, now_ms.to_string());
    properties.insert(names::TRACE_CONTEXT, "");
    if let Some(group) = &header.producer_group {
        properties.insert(names::PGROUP, group.clone());
    }
    let send_header = SendMessageRequestHeader {
        producer_group: header.producer_group.clone().unwrap_or_default(),
        topic: handle.topic.clone(),
        default_topic: String::new(),
        default_topic_queue_nums: 0,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: now_ms,
        flag: 0,
        properties: Some(properties.encode()),
        reconsume_times: None,
        unit_mode: None,
        batch: None,
        max_reconsume_times: None,
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::SEND_MESSAGE, 0)
        .with_header(&send_header)
        .with_body(b"0".to_vec())
}
