//! Admin requests (docs/protocol.md#admin-requests): topics, subscription groups, statistics,
//! connections and broker configuration. Per-queue figures come from each queue's owner shard.

use std::collections::{BTreeMap, BTreeSet};

use comet_proto::body::{
    Connection, ConsumeStats, ConsumerConnection, GroupList, JsonBody, KVTable, ProducerConnection,
    SubscriptionGroupConfig, TopicConfig, TopicFilterType, TopicList, TopicOffset, TopicStatsTable,
};
use comet_proto::headers::{
    CreateTopicRequestHeader, DeleteSubscriptionGroupRequestHeader, DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader, GetSubscriptionGroupConfigRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryTopicConsumeByWhoRequestHeader,
};
use comet_proto::names;
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};

use super::inspect;
use super::queue_figures::{message_queue, queue_min_max};
use crate::routing::InternalCallError;
use crate::shard::ShardBroker;
use crate::stats::StatsName;
use crate::traffic::format_tps;

use super::error;

fn ok(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// A slave takes topics and groups from its master only: a write is refused as Java's
/// `AdminBrokerProcessor` refuses it on a slave, with its remark.
fn refused_on_slave(broker: &ShardBroker, request: &RemotingCommand) -> Option<RemotingCommand> {
    if broker.config().broker_role.is_master() {
        return None;
    }
    Some(error(
        request,
        ResponseCode::SYSTEM_ERROR,
        "Can't modify topic or subscription group from slave broker, please execute it from \
         master broker.",
    ))
}

/// UPDATE_AND_CREATE_TOPIC (17).
pub fn create_topic(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = refused_on_slave(broker, request) {
        return refused;
    }
    let header = match CreateTopicRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if let Err(reason) = names::check_topic(&header.topic) {
        return error(request, ResponseCode::INVALID_PARAMETER, reason.to_string());
    }
    if names::is_send_forbidden(&header.topic) {
        return error(
            request,
            ResponseCode::INVALID_PARAMETER,
            format!("the topic[{}] is conflict with system topic", header.topic),
        );
    }
    if header.read_queue_nums <= 0
        || header.write_queue_nums <= 0
        || header.read_queue_nums > 1024
        || header.write_queue_nums > 1024
    {
        return error(
            request,
            ResponseCode::INVALID_PARAMETER,
            "queue counts must be within 1..=1024",
        );
    }
    let topic_filter_type = match TopicFilterType::from_name(&header.topic_filter_type) {
        Some(filter) => filter,
        None => {
            return error(
                request,
                ResponseCode::INVALID_PARAMETER,
                format!("unknown topicFilterType {}", header.topic_filter_type),
            )
        }
    };
    let config = TopicConfig {
        read_queue_nums: header.read_queue_nums,
        write_queue_nums: header.write_queue_nums,
        perm: header.perm,
        topic_filter_type,
        topic_sys_flag: header.topic_sys_flag.unwrap_or(0),
        order: header.order,
        ..TopicConfig::new(header.topic.clone())
    };
    broker.topics().upsert(config);
    broker.mark_topics_changed();
    ok(request)
}

/// DELETE_TOPIC_IN_BROKER (215).
pub fn delete_topic(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = refused_on_slave(broker, request) {
        return refused;
    }
    let header = match DeleteTopicRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if broker.topics().delete(&header.topic) {
        broker.mark_topics_changed();
    }
    broker.stats().remove_topic(&header.topic);
    ok(request)
}

/// GET_ALL_TOPIC_CONFIG (21).
pub fn all_topic_config(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let wrapper = broker.topics().to_wrapper(crate::topic::perm::READ_WRITE);
    ok(request).with_body(wrapper.encode())
}

/// GET_SYSTEM_TOPIC_LIST_FROM_BROKER (305).
pub fn system_topics(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let topics = broker.topics();
    let topic_list = topics
        .iter()
        .map(|config| config.topic_name.clone())
        .filter(|name| {
            names::is_send_forbidden(name)
                || name.starts_with(names::SYSTEM_TOPIC_PREFIX)
                || name == names::AUTO_CREATE_TOPIC_KEY
        })
        .collect();
    let body = TopicList {
        topic_list,
        broker_addr: Some(broker.config().broker_addr()),
    };
    ok(request).with_body(body.encode())
}

/// UPDATE_AND_CREATE_SUBSCRIPTIONGROUP (200).
pub fn create_group(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = refused_on_slave(broker, request) {
        return refused;
    }
    let config = match SubscriptionGroupConfig::decode(&request.body) {
        Ok(config) => config,
        Err(e) => {
            return error(
                request,
                ResponseCode::SYSTEM_ERROR,
                format!("malformed group config: {e}"),
            )
        }
    };
    if let Err(reason) = names::check_group(&config.group_name) {
        return error(request, ResponseCode::INVALID_PARAMETER, reason.to_string());
    }
    broker.groups().upsert(config);
    ok(request)
}

/// GET_ALL_SUBSCRIPTIONGROUP_CONFIG (201).
pub fn all_groups(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let wrapper = broker.groups().to_wrapper();
    ok(request).with_body(wrapper.encode())
}

/// GET_SUBSCRIPTIONGROUP_CONFIG (352): one group's configuration, as Java's
/// `AdminBrokerProcessor.getSubscriptionGroup` answers it (5.x's proxy asks it of the broker
/// before it pops for a group).
pub fn group_config(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetSubscriptionGroupConfigRequestHeader::from_ext_fields(&request.ext_fields)
    {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let config = broker.groups().get(&header.group).cloned();
    match config {
        Some(config) => ok(request).with_body(config.encode()),
        None => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "No group in this broker",
        ),
    }
}

/// DELETE_SUBSCRIPTIONGROUP (207). Offsets of the group are forgotten on every shard at the
/// next persist when `cleanOffset` is set.
pub fn delete_group(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = refused_on_slave(broker, request) {
        return refused;
    }
    let header = match DeleteSubscriptionGroupRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    broker.groups().delete(&header.group_name);
    broker.stats().remove_group(&header.group_name);
    if header.clean_offset == Some(true) {
        broker
            .offsets()
            .borrow_mut()
            .remove_group(&header.group_name);
    }
    ok(request)
}

/// GET_TOPIC_STATS_INFO (202).
pub async fn topic_stats(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetTopicStatsInfoRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let config = broker.topics().get(&header.topic).cloned();
    let Some(config) = config else {
        return error(
            request,
            ResponseCode::TOPIC_NOT_EXIST,
            format!("topic[{}] not exist", header.topic),
        );
    };
    let mut offset_table = BTreeMap::new();
    for queue_id in 0..config.read_queue_nums.max(config.write_queue_nums) {
        let (min_offset, max_offset) = queue_min_max(broker, &header.topic, queue_id).await;
        let mut last_update_timestamp = 0;
        if max_offset > 0 {
            match inspect::queue_time_span(broker, "", &header.topic, queue_id).await {
                Ok(span) => last_update_timestamp = span.max_time_stamp,
                Err(failure) => {
                    return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string())
                }
            }
        }
        let offset = TopicOffset {
            min_offset,
            max_offset,
            last_update_timestamp,
        };
        offset_table.insert(message_queue(broker, &header.topic, queue_id), offset);
    }
    let now_ms = comet_rt::clock::wall_clock_ms();
    let topic_put_tps =
        broker
            .stats()
            .minute_tps(StatsName::TopicPutNums, &header.topic, "", now_ms);
    ok(request).with_body(
        TopicStatsTable {
            offset_table,
            topic_put_tps,
        }
        .encode(),
    )
}

/// GET_CONSUME_STATS (208): per readable queue, the queue's max offset, the group's
/// committed offset and the store time of the last message it consumed. The topics are
/// `topicList` as given, else `topic`, else every topic the group has offsets for; from the
/// last two, topics the group does not subscribe to are dropped while it has subscriptions.
pub async fn consume_stats(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetConsumeStatsRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let topics = match consume_stats_topics(broker, &header).await {
        Ok(topics) => topics,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let mut offset_table = BTreeMap::new();
    let now_ms = comet_rt::clock::wall_clock_ms();
    let mut consume_tps = 0.0;
    for topic in topics {
        consume_tps += broker.stats().minute_tps(
            StatsName::GroupGetNums,
            &topic,
            &header.consumer_group,
            now_ms,
        );
        let read_queue_nums = broker
            .topics()
            .get(&topic)
            .map_or(0, |config| config.read_queue_nums);
        for queue_id in 0..read_queue_nums {
            let wrapper =
                inspect::offset_wrapper(broker, &header.consumer_group, &topic, queue_id).await;
            offset_table.insert(message_queue(broker, &topic, queue_id), wrapper);
        }
    }
    ok(request).with_body(
        ConsumeStats {
            consume_tps,
            offset_table,
        }
        .encode(),
    )
}

async fn consume_stats_topics(
    broker: &ShardBroker,
    header: &GetConsumeStatsRequestHeader,
) -> Result<Vec<String>, InternalCallError> {
    if let Some(list) = header.topic_list.as_deref().filter(|list| !list.is_empty()) {
        return Ok(list.split(';').map(str::to_owned).collect());
    }
    let topics: Vec<String> = match header.topic.as_deref().map(str::trim) {
        Some(topic) if !topic.is_empty() => vec![topic.to_owned()],
        _ => {
            let offsets = inspect::gather_offsets(broker).await?;
            inspect::topics_of_group(&offsets, &header.consumer_group)
                .into_iter()
                .collect()
        }
    };
    let clients = broker.clients();
    let subscriptions = clients
        .consumer_group(&header.consumer_group)
        .map(|consumers| &consumers.subscriptions)
        .filter(|subscriptions| !subscriptions.is_empty());
    Ok(topics
        .into_iter()
        .filter(|topic| subscriptions.is_none_or(|subscribed| subscribed.contains_key(topic)))
        .collect())
}

/// GET_CONSUMER_CONNECTION_LIST (203).
pub fn consumer_connections(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetConsumerConnectionListRequestHeader::from_ext_fields(&request.ext_fields)
    {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let clients = broker.clients();
    let Some(group) = clients.consumer_group(&header.consumer_group) else {
        return error(
            request,
            ResponseCode::CONSUMER_NOT_ONLINE,
            format!("the consumer group[{}] not online", header.consumer_group),
        );
    };
    let connection_set = group
        .channels()
        .into_iter()
        .map(|(client_id, channel)| Connection {
            client_addr: channel.client_addr.to_string(),
            client_id,
            language: channel.language,
            version: channel.version,
        })
        .collect();
    let body = ConsumerConnection {
        connection_set,
        consume_from_where: Some(group.consume_from_where),
        consume_type: Some(group.consume_type),
        message_model: Some(group.message_model),
        subscription_table: group.subscriptions.clone(),
    };
    ok(request).with_body(body.encode())
}

/// GET_PRODUCER_CONNECTION_LIST (204).
pub fn producer_connections(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetProducerConnectionListRequestHeader::from_ext_fields(&request.ext_fields)
    {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let connection_set = broker
        .clients()
        .producer_channels(&header.producer_group)
        .into_iter()
        .map(|(client_id, channel)| Connection {
            client_addr: channel.client_addr.to_string(),
            client_id,
            language: channel.language,
            version: channel.version,
        })
        .collect();
    ok(request).with_body(ProducerConnection { connection_set }.encode())
}

/// QUERY_TOPIC_CONSUME_BY_WHO (300): groups subscribed now or holding offsets on this shard.
pub fn consumed_by_who(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match QueryTopicConsumeByWhoRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let mut group_list: BTreeSet<String> = broker
        .clients()
        .groups_subscribed_to(&header.topic)
        .into_iter()
        .collect();
    group_list.extend(broker.offsets().borrow().groups_of_topic(&header.topic));
    ok(request).with_body(GroupList { group_list }.encode())
}

/// GET_BROKER_RUNTIME_INFO (28): a KVTable of string figures, under the keys RocketMQ's
/// `brokerStatus` prints and `clusterList` reads. Traffic figures are broker-wide (every
/// shard); commit-log offsets are this shard's log (every shard has one).
pub fn runtime_info(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let stats = broker.store().stats();
    let traffic = broker.all_traffic().report();
    let requests = traffic.now.in_place + traffic.now.forwarded;
    let forwarded_percent = if requests == 0 {
        0.0
    } else {
        traffic.now.forwarded as f64 * 100.0 / requests as f64
    };
    let figures: [(&str, String); 22] = [
        ("brokerVersionDesc", "V5_3_3".to_owned()),
        (
            "brokerVersion",
            comet_proto::code::version::CURRENT.to_string(),
        ),
        ("bootTimestamp", broker.boot_timestamp_ms().to_string()),
        ("msgPutTotalTodayNow", traffic.now.put.to_string()),
        ("msgGetTotalTodayNow", traffic.now.got.to_string()),
        (
            "msgPutTotalTodayMorning",
            traffic.today_morning.put.to_string(),
        ),
        (
            "msgGetTotalTodayMorning",
            traffic.today_morning.got.to_string(),
        ),
        (
            "msgPutTotalYesterdayMorning",
            traffic.yesterday_morning.put.to_string(),
        ),
        (
            "msgGetTotalYesterdayMorning",
            traffic.yesterday_morning.got.to_string(),
        ),
        ("putTps", format_tps(&traffic.put_tps)),
        ("getTransferredTps", format_tps(&traffic.got_tps)),
        // Java 4.9's spelling: its mqadmin clusterList, the Go admin and the dashboard read
        // this key (4.9.x mqadmin throws on its absence), 5.x's the one above.
        ("getTransferedTps", format_tps(&traffic.got_tps)),
        (
            "commitLogMaxOffset",
            broker.store().durable_end_offset().as_i64().to_string(),
        ),
        (
            "commitLogMinOffset",
            broker.store().min_physical_offset().as_i64().to_string(),
        ),
        ("dispatchBehindBytes", "0".to_owned()),
        ("shardCount", broker.shard_count().to_string()),
        ("fdatasyncCount", stats.fdatasyncs.to_string()),
        (
            "commitLogPipelinedFlushes",
            stats.pipelined_flushes.to_string(),
        ),
        ("commitLogPaddingBytes", stats.padding_bytes.to_string()),
        ("requestsHandledInPlace", traffic.now.in_place.to_string()),
        (
            "requestsForwardedToOwnerShard",
            traffic.now.forwarded.to_string(),
        ),
        (
            "requestsForwardedPercent",
            format!("{forwarded_percent:.2}"),
        ),
    ];
    let table = figures
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    ok(request).with_body(KVTable { table }.encode())
}

/// GET_TOPIC_CONFIG (351, 5.x): one topic's config (Java's TopicConfigAndQueueMapping; the
/// static-topic mapping part is absent, Comet has no static topics).
pub fn topic_config(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let topic = match request.ext_fields.required_str("topic") {
        Ok(topic) => topic,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    match broker.topics().get(topic) {
        Some(config) => ok(request).with_body(config.encode()),
        None => error(
            request,
            ResponseCode::TOPIC_NOT_EXIST,
            format!("No topic in this broker. topic: {topic}"),
        ),
    }
}
