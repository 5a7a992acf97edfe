//! SEND_MESSAGE (10), SEND_MESSAGE_V2 (310) and SEND_BATCH_MESSAGE (320),
//! docs/protocol.md#send-message.
//!
//! Two steps. On the shard whose connection carried the request, [`route`] validates the
//! topic, auto-creates it, and resolves a negative queue id (preferring a queue this shard
//! owns, so most broker-picked sends never cross cores); the request then goes to the owner
//! of that queue. On the owner, [`process`] builds the stored records, appends them to the
//! owner's commit log, and answers once the append is durable under the flush policy; a
//! SYNC_MASTER then waits for a slave to hold it (`crate::replication::sync_master`).

use std::time::Duration;

use comet_proto::batch::iter_batch;
use comet_proto::bytes::BytesMut;
use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::{
    decode_send_request, uses_send_header_v2, SendMessageRequestHeader, SendMessageResponseHeader,
    EXT_MSG_REGION, EXT_TRACE_ON,
};
use comet_proto::message::{encode_record, RecordSpec};
use comet_proto::message_id::encode_offset_msg_id;
use comet_proto::properties::{self, names};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_replication::sync_wait::SyncOutcome;
use comet_rt::task_class::timeout;
use comet_store::StoreError;

use crate::config::BrokerRole;
use crate::replication::sync_master::wait_for_slave;
use crate::shard::{RequestContext, ShardBroker};
use crate::topic::{perm, AutoCreateError};

/// Largest number of messages in one batch send.
pub const BATCH_MESSAGES_MAX: usize = 10_000;

use super::{error, slave_refusal};

/// Where a validated send goes.
pub struct Route {
    /// Topic.
    pub topic: String,
    /// Queue (resolved when the client let the broker pick).
    pub queue_id: i32,
    /// The topic was created by this send and must be persisted before the send is
    /// acknowledged (an acknowledged message must not lose its topic in a crash).
    pub topic_created: bool,
}

/// Validates the send on the receiving shard and returns the queue it goes to, rewriting a
/// negative queue id in `request` to the chosen one. `Err` is the response to send back.
pub fn route(
    broker: &ShardBroker,
    request: &mut RemotingCommand,
) -> Result<Route, RemotingCommand> {
    if let Some(refused) = slave_refusal(broker, request) {
        return Err(refused);
    }
    let header = decode_send_request(request)
        .map_err(|e| error(request, ResponseCode::SYSTEM_ERROR, e.to_string()))?;
    // Controller mode: below `minInSyncReplicas` members a send that would wait for slaves
    // is refused before it is stored, with Java's answer.
    if broker.config().broker_role == BrokerRole::SyncMaster
        && waits_for_slave(&header)
        && broker.replication().too_few_in_sync()
    {
        return Err(error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "in-sync replicas not enough",
        ));
    }
    let topic = header.topic.clone();
    check_topic(broker, request, &topic)?;
    let auto_create = broker.config().auto_create_topic;
    let config = broker.topics().create_on_send(
        &topic,
        &header.default_topic,
        header.default_topic_queue_nums,
        0,
        auto_create,
    );
    let (config, topic_created) = match config {
        Ok(created) => created,
        Err(AutoCreateError::TopicNotExist) => {
            // Said as Java's send check says it: a producer sending to a missing topic is
            // an operator's question (autoCreateTopicEnable is off).
            comet_net::warn_request!(&*request, "send refused: topic {topic} does not exist");
            let remark = format!("topic[{topic}] not exist, apply first please!");
            return Err(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
        }
    };
    if topic_created {
        broker.mark_topics_changed();
    }
    if !perm::is_writable(config.perm) {
        comet_net::warn_request!(&*request, "send refused: topic {topic} is not writable");
        let remark = format!("the topic[{topic}] sending message is forbidden");
        return Err(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    let queue_count = config.read_queue_nums.max(config.write_queue_nums);
    let queue_id = if header.queue_id < 0 {
        let chosen = choose_queue(broker, &topic, config.write_queue_nums.max(1));
        let key = if uses_send_header_v2(request.request_code()) {
            "e"
        } else {
            "queueId"
        };
        request.ext_fields.insert(key, chosen.to_string());
        chosen
    } else {
        header.queue_id
    };
    if queue_id >= queue_count {
        let remark =
            format!("request queueId[{queue_id}] is illegal, topic has {queue_count} queues");
        comet_net::warn_request!(&*request, "send refused: {remark}");
        return Err(error(request, ResponseCode::INVALID_PARAMETER, remark));
    }
    if let Some((dead_letter, created)) =
        super::send_back::dead_letter_on_send(broker, request, &header)
    {
        return Ok(Route {
            topic: dead_letter.topic,
            queue_id: dead_letter.queue_id,
            topic_created: topic_created || created,
        });
    }
    if let Some(half) = crate::transaction::half_send(broker, request, &header, queue_id) {
        return Ok(Route {
            topic: half.topic,
            queue_id: half.queue_id,
            topic_created,
        });
    }
    let level_count = broker.store().config().delay_levels_ms.len();
    if let Some(rewritten) =
        crate::delay_level::rewrite::rewrite_delayed_send(request, &header, queue_id, level_count)
    {
        return Ok(Route {
            topic: rewritten.topic,
            queue_id: rewritten.queue_id,
            topic_created,
        });
    }
    match crate::timer_wheel::rewrite_timer_send(broker, request, &header, queue_id) {
        Ok(Some(rewritten)) => {
            return Ok(Route {
                topic: rewritten.topic,
                queue_id: rewritten.queue_id,
                topic_created,
            })
        }
        Ok(None) => {}
        Err(refused) => return Err(refused),
    }
    Ok(Route {
        topic,
        queue_id,
        topic_created,
    })
}

fn check_topic(
    broker: &ShardBroker,
    request: &RemotingCommand,
    topic: &str,
) -> Result<(), RemotingCommand> {
    if let Err(reason) = comet_proto::names::check_topic(topic) {
        return Err(error(
            request,
            ResponseCode::INVALID_PARAMETER,
            reason.to_string(),
        ));
    }
    if comet_proto::names::is_send_forbidden(topic) {
        let remark = format!("Sending message to topic[{topic}] is forbidden.");
        return Err(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    if !perm::is_writable(broker.config().broker_permission) {
        let remark = format!(
            "the broker[{}] sending message is forbidden",
            broker.config().broker_addr()
        );
        return Err(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    if request.request_code() == RequestCode::SEND_BATCH_MESSAGE
        && comet_proto::names::is_retry_topic(topic)
    {
        return Err(error(
            request,
            ResponseCode::MESSAGE_ILLEGAL,
            "batch request does not support retry group",
        ));
    }
    Ok(())
}

/// Picks a writable queue for a send without one, preferring queues this shard owns.
fn choose_queue(broker: &ShardBroker, topic: &str, write_queue_nums: i32) -> i32 {
    let cursor = broker.queue_cursor().get();
    broker.queue_cursor().set(cursor.wrapping_add(1));
    let local: Vec<i32> = (0..write_queue_nums)
        .filter(|queue| broker.owns(topic, *queue))
        .collect();
    if local.is_empty() {
        (cursor % write_queue_nums as u32) as i32
    } else {
        local[cursor as usize % local.len()]
    }
}

/// Appends the message (or batch) on the owner shard and builds the response.
pub async fn process(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> RemotingCommand {
    let header = match decode_send_request(&request) {
        Ok(header) => header,
        Err(e) => return error(&request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    assert!(
        broker.owns(&header.topic, header.queue_id),
        "send routed to a shard that does not own the queue"
    );
    let sysflag = with_topic_flags(broker, &header);
    let built = if request.request_code() == RequestCode::SEND_BATCH_MESSAGE {
        build_batch(broker, context, &header, sysflag, &request)
    } else {
        build_single(broker, context, &header, sysflag, &request)
    };
    let (records, unique_keys) = match built {
        Ok(built) => built,
        Err(response) => return response,
    };
    if let Err(response) = spread_deletion(broker, &request, &header, &records).await {
        return response;
    }
    append_and_respond(broker, &request, &header, records, unique_keys).await
}

/// A timer deletion is stored by every wheel, not only this shard's (see
/// `crate::timer_wheel::deletion_copies`); the copies are durable before the deletion
/// itself is stored and acknowledged. A failure answers SYSTEM_ERROR: some wheels may hold
/// their copy, which is harmless (a deletion whose entry is elsewhere cancels nothing), and
/// the producer may send the deletion again.
async fn spread_deletion(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &SendMessageRequestHeader,
    records: &[BytesMut],
) -> Result<(), RemotingCommand> {
    let properties = header.properties.as_deref().unwrap_or("");
    if request.request_code() == RequestCode::SEND_BATCH_MESSAGE
        || !crate::timer_wheel::is_deletion(&header.topic, properties)
    {
        return Ok(());
    }
    let copies = records
        .first()
        .and_then(|record| crate::timer_wheel::deletion_copies(broker, record))
        .ok_or_else(|| {
            error(
                request,
                ResponseCode::SYSTEM_ERROR,
                "the timer deletion cannot be copied",
            )
        })?;
    if copies.is_empty() {
        return Ok(());
    }
    crate::reappend::append_on_owners(broker, copies)
        .await
        .map_err(|e| {
            let remark = format!("the timer deletion did not reach every timer wheel: {e}");
            error(request, ResponseCode::SYSTEM_ERROR, remark)
        })
}

fn with_topic_flags(broker: &ShardBroker, header: &SendMessageRequestHeader) -> i32 {
    let multi_tag = broker.topics().get(&header.topic).is_some_and(|config| {
        config.topic_filter_type == comet_proto::body::TopicFilterType::MULTI_TAG
    });
    if multi_tag {
        header.sys_flag | message_sys_flag::MULTI_TAGS
    } else {
        header.sys_flag
    }
}

/// Adds the broker's properties: `UNIQ_KEY` when missing, `CLUSTER`. Returns the encoded
/// string and the message's unique key.
fn complete_properties(broker: &ShardBroker, raw: &str) -> (String, String) {
    let mut properties = properties::Properties::decode(raw);
    let unique_key = match properties.get(names::UNIQ_KEY) {
        Some(key) => key.to_owned(),
        None => {
            let key = broker.unique_key(comet_rt::clock::wall_clock_ms());
            properties.insert(names::UNIQ_KEY, key.clone());
            key
        }
    };
    properties.insert(names::CLUSTER, broker.config().cluster_name.clone());
    (properties.encode(), unique_key)
}

fn check_body(
    broker: &ShardBroker,
    request: &RemotingCommand,
    length: usize,
) -> Result<(), RemotingCommand> {
    if length == 0 {
        return Err(error(
            request,
            ResponseCode::MESSAGE_ILLEGAL,
            "the message body is empty",
        ));
    }
    if length > broker.config().message_bytes_max {
        let remark = format!(
            "the message body size {length} exceeds the maximum {}",
            broker.config().message_bytes_max
        );
        return Err(error(request, ResponseCode::MESSAGE_ILLEGAL, remark));
    }
    Ok(())
}

type Built = Result<(Vec<BytesMut>, Vec<String>), RemotingCommand>;

fn build_single(
    broker: &ShardBroker,
    context: RequestContext,
    header: &SendMessageRequestHeader,
    sysflag: i32,
    request: &RemotingCommand,
) -> Built {
    check_body(broker, request, request.body.len())?;
    let (properties, unique_key) =
        complete_properties(broker, header.properties.as_deref().unwrap_or(""));
    let spec = RecordSpec {
        topic: &header.topic,
        queue_id: header.queue_id,
        flag: header.flag,
        sysflag,
        born_timestamp: header.born_timestamp,
        born_host: context.peer,
        store_host: broker.store_host(),
        reconsume_times: header.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
        body: &request.body,
        properties: &properties,
    };
    let mut record = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut record)
        .map_err(|e| error(request, ResponseCode::MESSAGE_ILLEGAL, e.to_string()))?;
    Ok((vec![record], vec![unique_key]))
}

fn build_batch(
    broker: &ShardBroker,
    context: RequestContext,
    header: &SendMessageRequestHeader,
    sysflag: i32,
    request: &RemotingCommand,
) -> Built {
    check_body(broker, request, request.body.len())?;
    let mut records = Vec::new();
    let mut unique_keys = Vec::new();
    for entry in iter_batch(&request.body) {
        let entry =
            entry.map_err(|e| error(request, ResponseCode::MESSAGE_ILLEGAL, e.to_string()))?;
        if records.len() == BATCH_MESSAGES_MAX {
            let remark = format!("a batch holds at most {BATCH_MESSAGES_MAX} messages");
            return Err(error(request, ResponseCode::MESSAGE_ILLEGAL, remark));
        }
        // Each message keeps its own properties; the batch header's are not merged
        // (docs/protocol.md#batch-messages-keep-their-own-properties).
        let (properties, unique_key) = complete_properties(broker, entry.properties);
        let spec = RecordSpec {
            topic: &header.topic,
            queue_id: header.queue_id,
            flag: entry.flag,
            sysflag,
            born_timestamp: header.born_timestamp,
            born_host: context.peer,
            store_host: broker.store_host(),
            reconsume_times: header.reconsume_times.unwrap_or(0),
            prepared_transaction_offset: 0,
            body: entry.body,
            properties: &properties,
        };
        let mut record = BytesMut::new();
        encode_record(&spec, 0, 0, 0, &mut record)
            .map_err(|e| error(request, ResponseCode::MESSAGE_ILLEGAL, e.to_string()))?;
        records.push(record);
        unique_keys.push(unique_key);
    }
    if records.is_empty() {
        return Err(error(
            request,
            ResponseCode::MESSAGE_ILLEGAL,
            "the batch holds no message",
        ));
    }
    Ok((records, unique_keys))
}

async fn append_and_respond(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &SendMessageRequestHeader,
    records: Vec<BytesMut>,
    unique_keys: Vec<String>,
) -> RemotingCommand {
    let limit = Duration::from_millis(broker.config().sync_flush_timeout_ms);
    let deadline = comet_rt::clock::monotonic_now() + limit;
    let appended = match timeout(limit, broker.store().append(&records)).await {
        Ok(Ok(appended)) => appended,
        Ok(Err(store_error)) => return store_error_response(broker, request, &store_error),
        Err(_) => {
            return error(
                request,
                ResponseCode::FLUSH_DISK_TIMEOUT,
                "flush did not complete in time",
            );
        }
    };
    assert_eq!(appended.len(), records.len());
    let bytes = records.iter().map(|record| record.len() as u64).sum();
    broker.stats().record_put(
        broker.shard().index(),
        &header.topic,
        &broker.config().cluster_name,
        records.len() as u64,
        bytes,
    );
    let properties = header.properties.as_deref().unwrap_or("");
    let (shard, messages) = (broker.shard().index(), records.len() as u64);
    let metrics = broker.metrics();
    metrics.record_put(shard, &header.topic, properties, messages, bytes);
    let msg_ids: Vec<String> = appended
        .iter()
        .map(|record| encode_offset_msg_id(broker.store_host(), record.physical_offset.as_i64()))
        .collect();
    let response_header = SendMessageResponseHeader {
        msg_id: msg_ids.join(","),
        queue_id: header.queue_id,
        queue_offset: appended[0].queue_offset.as_i64(),
        transaction_id: (unique_keys.len() == 1).then(|| unique_keys[0].clone()),
        batch_uniq_id: None,
        recall_handle: (unique_keys.len() == 1)
            .then(|| {
                crate::timer_wheel::recall_handle(
                    broker,
                    request.request_code(),
                    properties,
                    &unique_keys[0],
                )
            })
            .flatten(),
    };
    let code = match broker.config().broker_role {
        BrokerRole::AsyncMaster => ResponseCode::SUCCESS,
        BrokerRole::SyncMaster if !waits_for_slave(header) => ResponseCode::SUCCESS,
        BrokerRole::SyncMaster => {
            let last = appended
                .last()
                .expect("one record per message, at least one");
            let end = last.physical_offset.position() + u64::from(last.size_bytes);
            sync_code(wait_for_slave(broker, end, deadline).await)
        }
        // Refused before anything was appended (see `slave_refusal`).
        BrokerRole::Slave => ResponseCode::SERVICE_NOT_AVAILABLE,
    };
    // The lease may have lapsed while the message was made durable: it stays stored, but
    // only a master the controller still stands behind may acknowledge it.
    let code = if code == ResponseCode::SUCCESS && super::lease_lapsed(broker) {
        ResponseCode::SERVICE_NOT_AVAILABLE
    } else {
        code
    };
    let response = RemotingCommand::response_to(request, code).with_header(&response_header);
    with_region_and_trace(broker, response)
}

/// Whether a SYNC_MASTER answers this send only once a slave holds it, as Java's
/// `CommitLog.submitReplicaRequest` decides: not when the producer set `WAIT=false`, and
/// not for half (prepared) transaction messages, which Java stores without waiting
/// (`TransactionalMessageBridge.parseHalfMessageInner`). A batch follows its header's
/// properties, as Java's `MessageExtBatch` does.
fn waits_for_slave(header: &SendMessageRequestHeader) -> bool {
    if header.topic == comet_proto::names::TRANS_HALF_TOPIC {
        return false;
    }
    let raw = header.properties.as_deref().unwrap_or("");
    properties::Properties::decode(raw).get(names::WAIT) != Some("false")
}

/// The send status Java's `SendMessageProcessor` gives each replication outcome (the
/// message is stored in every case, so the answer carries its header).
fn sync_code(outcome: SyncOutcome) -> ResponseCode {
    match outcome {
        SyncOutcome::SendOk => ResponseCode::SUCCESS,
        SyncOutcome::FlushSlaveTimeout => ResponseCode::FLUSH_SLAVE_TIMEOUT,
        SyncOutcome::SlaveNotAvailable => ResponseCode::SLAVE_NOT_AVAILABLE,
    }
}

/// Maps a store failure to the response RocketMQ gives for it.
pub fn store_error_response(
    broker: &ShardBroker,
    request: &RemotingCommand,
    store_error: &StoreError,
) -> RemotingCommand {
    let code = match store_error {
        StoreError::RecordTooLarge { .. } | StoreError::RecordInvalid { .. } => {
            ResponseCode::MESSAGE_ILLEGAL
        }
        StoreError::SegmentUnavailable { .. } => ResponseCode::SYSTEM_BUSY,
        _ => ResponseCode::SERVICE_NOT_AVAILABLE,
    };
    comet_net::warn_request!(request, "send refused by the store: {store_error}");
    let response = error(request, code, store_error.to_string());
    with_region_and_trace(broker, response)
}

/// Adds the broker's region and trace switch, which every send answer carries
/// (docs/protocol.md#send-responses-always-carry-their-fields), from
/// its configuration rather than fixed strings.
pub fn with_region_and_trace(
    broker: &ShardBroker,
    mut response: RemotingCommand,
) -> RemotingCommand {
    response
        .ext_fields
        .insert(EXT_MSG_REGION, &broker.config().region_id);
    response
        .ext_fields
        .insert_opt(EXT_TRACE_ON, Some(broker.config().trace_on));
    response
}
