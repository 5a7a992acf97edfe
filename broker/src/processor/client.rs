//! Client management (docs/protocol.md#client-registration,
//! docs/protocol.md#queue-locks): HEART_BEAT, UNREGISTER_CLIENT,
//! GET_CONSUMER_LIST_BY_GROUP, LOCK_BATCH_MQ, UNLOCK_BATCH_MQ, CHECK_CLIENT_CONFIG, and the
//! NOTIFY_CONSUMER_IDS_CHANGED the broker sends when a group's membership changes.

use std::time::Duration;

use comet_net::request_log::RequestFields;
use comet_net::ConnectionId;
use comet_proto::body::{
    CheckClientRequestBody, ConsumeType, GetConsumerListByGroupResponseBody, HeartbeatData,
    JsonBody, LockBatchRequestBody, LockBatchResponseBody, MessageQueue, UnlockBatchRequestBody,
};
use comet_proto::headers::{
    GetConsumerListByGroupRequestHeader, NotifyConsumerIdsChangedRequestHeader,
    UnregisterClientRequestHeader,
};
use comet_proto::names;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use crate::clients::ChannelRef;
use crate::lock::QueueKey;
use crate::routing::send_to_client;
use crate::shard::{RequestContext, ShardBroker};

use super::error;

fn channel_of(context: RequestContext, request: &RemotingCommand) -> ChannelRef {
    ChannelRef {
        shard: context.connection.shard,
        connection_id: context.connection.serial,
        client_addr: context.peer,
        language: request.language,
        version: request.version,
    }
}

/// Longest a heartbeat waits for the registration of the retry topic it created.
pub const REGISTER_WAIT: Duration = Duration::from_secs(3);
/// How often that wait looks.
const REGISTER_POLL: Duration = Duration::from_millis(5);

/// HEART_BEAT (34): registers producers and consumers, auto-creates groups and retry topics,
/// and tells a group's members when its membership changed.
pub async fn heartbeat(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let data = match HeartbeatData::decode(&request.body) {
        Ok(data) => data,
        Err(e) => {
            return error(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("malformed heartbeat body: {e}"),
            )
        }
    };
    let now_ms = comet_rt::clock::wall_clock_ms();
    let channel = channel_of(context, request);
    let mut changed_groups = Vec::new();
    let mut topics_created = None;
    for consumer in &data.consumer_data_set {
        if names::check_group(&consumer.group_name).is_err() {
            continue;
        }
        let group = broker.groups().get_or_create(
            &consumer.group_name,
            broker.config().auto_create_subscription_group,
        );
        let Some(group) = group else { continue };
        if consumer.consume_type != ConsumeType::CONSUME_POP {
            let retry = names::retry_topic(&consumer.group_name);
            let exists = broker.topics().get(&retry).is_some();
            if !exists {
                broker
                    .topics()
                    .ensure_system_topic(&retry, group.retry_queue_nums.max(1));
                topics_created = Some(broker.mark_topics_changed());
            }
        }
        let change =
            broker
                .clients()
                .register_consumer(&data.client_id, consumer, channel.clone(), now_ms);
        if change.members_changed && group.notify_consumer_ids_changed_enable {
            changed_groups.push(consumer.group_name.clone());
        }
    }
    for producer in &data.producer_data_set {
        broker.clients().register_producer(
            &producer.group_name,
            &data.client_id,
            channel.clone(),
            now_ms,
        );
    }
    if let Some(generation) = topics_created {
        if let Err(e) = crate::routing::persist_topics_now(broker).await {
            log::error!("cannot persist retry topics: {e}");
        }
        wait_registered(broker, generation).await;
    }
    for group in changed_groups {
        notify_consumer_ids_changed(broker, &group).await;
    }
    let mut response = RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    response
        .ext_fields
        .insert("IS_SUPPORT_HEART_BEAT_V2", "false");
    response.ext_fields.insert("IS_SUB_CHANGE", "true");
    response
}

/// Waits (bounded by [`REGISTER_WAIT`]) until the name servers were sent topic generation
/// `generation`. Apache RocketMQ registers a retry topic created by a heartbeat before it
/// answers, and clients rely on it: ali-ons asks the name server for `%RETRY%<group>` right
/// after its first heartbeat and, told it does not exist, asks again only 30 s later, so
/// retries of a new group would wait that long.
pub(crate) async fn wait_registered(broker: &ShardBroker, generation: u64) {
    let mut waited = Duration::ZERO;
    while broker.metadata().registered_generation() < generation && waited < REGISTER_WAIT {
        comet_rt::task_class::sleep(REGISTER_POLL).await;
        waited += REGISTER_POLL;
    }
}

/// UNREGISTER_CLIENT (35).
pub async fn unregister(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match UnregisterClientRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if let Some(group) = &header.producer_group {
        broker
            .clients()
            .unregister_producer(group, &header.client_id);
    }
    if let Some(group) = &header.consumer_group {
        let removed = broker
            .clients()
            .unregister_consumer(group, &header.client_id);
        if removed {
            notify_consumer_ids_changed(broker, group).await;
        }
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// A client connection closed: its registrations go, and the groups it left are told.
pub async fn connection_closed(broker: &ShardBroker, connection: ConnectionId) {
    let changed = broker
        .clients()
        .connection_closed(connection.shard, connection.serial);
    for group in changed {
        notify_consumer_ids_changed(broker, &group).await;
    }
}

/// GET_CONSUMER_LIST_BY_GROUP (38).
pub fn consumer_list(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetConsumerListByGroupRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let ids = broker
        .clients()
        .consumer_group(&header.consumer_group)
        .map(|group| group.client_ids());
    match ids {
        Some(consumer_id_list) if !consumer_id_list.is_empty() => {
            let body = GetConsumerListByGroupResponseBody { consumer_id_list };
            RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(body.encode())
        }
        _ => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("no consumer for this group, {}", header.consumer_group),
        ),
    }
}

/// Sends NOTIFY_CONSUMER_IDS_CHANGED (one-way) to every member of `group`, on whichever
/// shard its connection lives.
pub async fn notify_consumer_ids_changed(broker: &ShardBroker, group: &str) {
    let channels = match broker.clients().consumer_group(group) {
        Some(consumers) => consumers.channels(),
        None => return,
    };
    let header = NotifyConsumerIdsChangedRequestHeader {
        consumer_group: group.to_owned(),
    };
    for (_, channel) in channels {
        let mut command = RemotingCommand::request(RequestCode::NOTIFY_CONSUMER_IDS_CHANGED, 0)
            .with_header(&header);
        command.set_oneway();
        let connection = ConnectionId {
            shard: channel.shard,
            serial: channel.connection_id,
        };
        send_to_client(broker, connection, command).await;
    }
}

fn queue_keys(queues: &[MessageQueue]) -> Vec<QueueKey> {
    queues
        .iter()
        .map(|queue| QueueKey {
            topic: queue.topic.clone(),
            broker_name: queue.broker_name.clone(),
            queue_id: queue.queue_id,
        })
        .collect()
}

/// LOCK_BATCH_MQ (41).
pub fn lock_batch(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let body = match LockBatchRequestBody::decode(&request.body) {
        Ok(body) => body,
        Err(e) => {
            return error(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("malformed lock body: {e}"),
            )
        }
    };
    let queues: Vec<MessageQueue> = body.mq_set.iter().cloned().collect();
    let now_ms = comet_rt::clock::wall_clock_ms();
    let granted = broker.locks().lock_batch(
        &body.consumer_group,
        &body.client_id,
        &queue_keys(&queues),
        now_ms,
    );
    let lock_ok_mq_set = queues
        .into_iter()
        .filter(|queue| {
            granted.iter().any(|key| {
                key.topic == queue.topic
                    && key.queue_id == queue.queue_id
                    && key.broker_name == queue.broker_name
            })
        })
        .collect();
    let response_body = LockBatchResponseBody { lock_ok_mq_set };
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(response_body.encode())
}

/// UNLOCK_BATCH_MQ (42).
pub fn unlock_batch(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let body = match UnlockBatchRequestBody::decode(&request.body) {
        Ok(body) => body,
        Err(e) => {
            return error(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("malformed unlock body: {e}"),
            )
        }
    };
    let queues: Vec<MessageQueue> = body.mq_set.iter().cloned().collect();
    broker
        .locks()
        .unlock_batch(&body.consumer_group, &body.client_id, &queue_keys(&queues));
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// CHECK_CLIENT_CONFIG (46), as Java's `ClientManageProcessor.checkClientConfig`: TAG is
/// always fine; another type needs `enablePropertyFilter`, then must compile
/// (docs/protocol.md#sql92-property-filters).
pub fn check_client_config(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let body = match CheckClientRequestBody::decode(&request.body) {
        Ok(body) => body,
        Err(e) => {
            return error(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("malformed body: {e}"),
            )
        }
    };
    let subscription = &body.subscription_data;
    let expression_type = subscription.expression_type.as_str();
    if comet_proto::filter::is_tag_type(Some(expression_type)) {
        return RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    }
    if !broker.config().enable_property_filter {
        let remark =
            format!("The broker does not support consumer to filter message by {expression_type}");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    if expression_type != comet_proto::filter::EXPRESSION_TYPE_SQL92 {
        let remark = format!("no filter for expression type {expression_type}");
        return error(request, ResponseCode::SUBSCRIPTION_PARSE_FAILED, remark);
    }
    match comet_proto::sql92::Selector::compile(&subscription.sub_string) {
        Ok(_) => RemotingCommand::response_to(request, ResponseCode::SUCCESS),
        Err(e) => {
            comet_net::warn_request!(
                RequestFields::of(request).with_group(&body.group),
                "client {}@{} subscribes with a selector that does not compile: {e}",
                body.client_id,
                body.group
            );
            error(
                request,
                ResponseCode::SUBSCRIPTION_PARSE_FAILED,
                e.to_string(),
            )
        }
    }
}
