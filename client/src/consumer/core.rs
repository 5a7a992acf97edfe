//! What the consumers share (the async ones, under which the blocking ones run): a
//! subscription, the client-side re-filter of pulled messages, the heartbeat entry and the
//! GET_CONSUMER_RUNNING_INFO answer (docs/protocol.md#push-consumer-conversation).

use std::collections::BTreeMap;

use comet_proto::body::{
    ConsumerRunningInfo, ProcessQueueInfo, PROP_CLIENT_VERSION, PROP_CONSUMER_START_TIMESTAMP,
    PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use comet_proto::filter::TagSubscription;
use comet_proto::message::MessageExt;
use comet_proto::properties::names;

use super::process_queue::ProcessQueue;
use super::{retry_topic, ConsumeFromWhere, ConsumerConfig, MessageModel};
use crate::message::MessageQueue;
use crate::protocol::{
    ConsumeType, ConsumerData, PullResponseHeader, SubscriptionData, WireConsumeFromWhere,
    WireMessageModel,
};

/// One subscribed topic.
#[derive(Clone, Debug)]
pub(crate) struct Subscription {
    pub tags: TagSubscription,
    pub sub_version: i64,
}

/// Client-side tag re-filter of pulled messages
/// (docs/protocol.md#tags-and-subscription-expressions): drops what lies before the requested
/// offset or does not match the tags, restores the original topic of retry-topic messages, and
/// sets MIN/MAX_OFFSET from the pull answer.
pub(crate) fn filter_pulled(
    group: &str,
    messages: Vec<MessageExt>,
    subscription: &Subscription,
    header: &PullResponseHeader,
    requested: i64,
) -> Vec<MessageExt> {
    let retry = retry_topic(group);
    messages
        .into_iter()
        .filter(|message| message.queue_offset >= requested)
        .filter(|message| subscription.tags.matches_tags(message.tags()))
        .map(|mut message| {
            message
                .properties
                .insert(names::MIN_OFFSET, header.min_offset.to_string());
            message
                .properties
                .insert(names::MAX_OFFSET, header.max_offset.to_string());
            if message.topic == retry {
                if let Some(original) = message.property(names::RETRY_TOPIC) {
                    message.topic = original.to_owned();
                }
            }
            message
        })
        .collect()
}

/// One queue's line of GET_CONSUMER_RUNNING_INFO.
pub(crate) fn process_queue_info(
    pq: &ProcessQueue,
    commit_offset: Option<i64>,
) -> ProcessQueueInfo {
    let (messages, bytes) = pq.held();
    ProcessQueueInfo {
        commit_offset: commit_offset.unwrap_or(-1),
        cached_msg_count: i32::try_from(messages).unwrap_or(i32::MAX),
        cached_msg_size_in_mib: i32::try_from(bytes / (1024 * 1024)).unwrap_or(i32::MAX),
        dropped: pq.is_dropped(),
        locked: pq.is_locked(),
        ..ProcessQueueInfo::default()
    }
}

/// The GET_CONSUMER_RUNNING_INFO answer of a consumer: what Java's admin tools read (the
/// consume type, orderly, the start time as a long), its settings under their Java field
/// names, its subscriptions and its queues.
pub(crate) fn running_info(
    config: &ConsumerConfig,
    data: ConsumerData,
    orderly: bool,
    started_ms: i64,
    mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
) -> ConsumerRunningInfo {
    let text = |value: &str| serde_json::Value::String(value.to_owned());
    let mut properties = BTreeMap::new();
    properties.insert(PROP_CONSUME_TYPE.to_owned(), text(data.consume_type.name()));
    properties.insert(PROP_CONSUME_ORDERLY.to_owned(), text(&orderly.to_string()));
    properties.insert(
        PROP_CONSUMER_START_TIMESTAMP.to_owned(),
        text(&started_ms.to_string()),
    );
    let namesrv = config.client.namesrv_addrs.join(";");
    properties.insert(PROP_NAMESERVER_ADDR.to_owned(), text(&namesrv));
    properties.insert(PROP_CLIENT_VERSION.to_owned(), text("V5_3_3"));
    properties.insert("consumerGroup".to_owned(), text(&config.group));
    properties.insert("messageModel".to_owned(), text(config.message_model.name()));
    properties.insert(
        "consumeFromWhere".to_owned(),
        text(config.consume_from_where.name()),
    );
    ConsumerRunningInfo {
        properties,
        subscription_set: data.subscription_data_set,
        mq_table,
        ..ConsumerRunningInfo::default()
    }
}

/// The heartbeat entry of a consumer with these settings and subscriptions.
pub(crate) fn consumer_data(
    config: &ConsumerConfig,
    subscriptions: &BTreeMap<String, Subscription>,
    consume_type: ConsumeType,
) -> ConsumerData {
    let subscription_data_set = subscriptions
        .iter()
        .map(|(topic, subscription)| SubscriptionData {
            class_filter_mode: false,
            topic: topic.clone(),
            sub_string: subscription.tags.expression().to_owned(),
            tags_set: subscription.tags.tags().iter().cloned().collect(),
            code_set: subscription.tags.codes().iter().copied().collect(),
            sub_version: subscription.sub_version,
            expression_type: "TAG".into(),
        })
        .collect();
    ConsumerData {
        group_name: config.group.clone(),
        consume_type,
        message_model: match config.message_model {
            MessageModel::Clustering => WireMessageModel::CLUSTERING,
            MessageModel::Broadcasting => WireMessageModel::BROADCASTING,
        },
        consume_from_where: match config.consume_from_where {
            ConsumeFromWhere::LastOffset => WireConsumeFromWhere::CONSUME_FROM_LAST_OFFSET,
            ConsumeFromWhere::FirstOffset => WireConsumeFromWhere::CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere::Timestamp => WireConsumeFromWhere::CONSUME_FROM_TIMESTAMP,
        },
        subscription_data_set,
        unit_mode: false,
    }
}
