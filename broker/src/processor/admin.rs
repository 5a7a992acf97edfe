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
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_store::Store;

use super::inspect;
use super::queue_figures::{internal_request, message_queue, queue_min_max};
use crate::pop::extra_info::{pop_retry_topic, pop_retry_topic_v2};
use crate::routing::{call_shard, internal_context, persist_topics_now, InternalCallError};
use crate::shard::{ShardBroker, ShardCall};
use crate::stats::StatsName;
use crate::topic_attributes;
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
    let modification = header.attributes.as_deref().unwrap_or("");
    if topic_attributes::message_type_set(modification).as_deref() == Some("MIXED") {
        let remark = "MIXED message type is not supported.";
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    let current = broker
        .topics()
        .get(&header.topic)
        .map(|existing| existing.attributes.clone());
    // Java's answer to a modification it refuses (a RuntimeException in updateTopicConfig).
    let attributes = match topic_attributes::alter(current.as_ref(), modification) {
        Ok(attributes) => attributes,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let config = TopicConfig {
        attributes,
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

/// DELETE_TOPIC_IN_BROKER (215), as a client asks it, with the checks and effects of Java's
/// `AdminBrokerProcessor.deleteTopic`: a blank or system topic is refused; the topic goes
/// with the pop retry topics of the groups that hold offsets on it (Java's
/// `clearRetryTopicWhenDeleteTopic`, on by default); each goes from the topic table (written
/// before the answer) and from every shard, which forgets its offsets and empties its
/// consume queues ([`delete_topic_local`]).
pub async fn delete_topic(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = refused_on_slave(broker, request) {
        return refused;
    }
    let header = match DeleteTopicRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let topic = header.topic.as_str();
    if topic.trim().is_empty() {
        let remark = "The specified topic is blank.";
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    if names::is_system_topic(topic) {
        let remark = format!("The topic[{topic}] is conflict with system topic.");
        return error(request, ResponseCode::INVALID_PARAMETER, remark);
    }
    let offsets = match inspect::gather_offsets(broker).await {
        Ok(offsets) => offsets,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let mut doomed = vec![topic.to_owned()];
    for group in groups_of_topic(&offsets, topic) {
        for retry in [
            pop_retry_topic_v2(topic, &group),
            pop_retry_topic(topic, &group),
        ] {
            if broker.topics().get(&retry).is_some() {
                doomed.push(retry);
            }
        }
    }
    for topic in &doomed {
        if broker.topics().delete(topic) {
            broker.mark_topics_changed();
        }
        broker.stats().remove_topic(topic);
        let header = DeleteTopicRequestHeader {
            topic: topic.clone(),
        };
        let part = internal_request(RequestCode::DELETE_TOPIC_IN_BROKER, &header);
        if let Err(failure) = on_every_shard(broker, &part).await {
            return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string());
        }
    }
    if let Err(e) = persist_topics_now(broker).await {
        let remark = format!("cannot persist topics: {e}");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    ok(request)
}

/// DELETE_TOPIC_IN_BROKER (215) as run by `handle_local` on every shard: this shard's
/// offsets of the topic go, and its stores (its own log's, and a slave's hosted logs')
/// drop every entry of the topic's queues.
pub async fn delete_topic_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match DeleteTopicRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    broker.offsets().borrow_mut().remove_topic(&header.topic);
    for store in shard_stores(broker) {
        if let Err(e) = store.drop_topic_entries(&header.topic).await {
            let remark = format!("cannot drop the queues of {}: {e}", header.topic);
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
    }
    ok(request)
}

/// The stores of this shard: its own log's, then the logs it hosts (a slave).
fn shard_stores(broker: &ShardBroker) -> Vec<Store> {
    let mut stores = vec![broker.store().clone()];
    stores.extend(
        broker
            .hosted_logs()
            .iter()
            .map(|hosted| hosted.store.clone()),
    );
    stores
}

/// Runs the shard part of `request` on every shard (see `handle_local`), stopping at the
/// first that fails.
async fn on_every_shard(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> Result<(), InternalCallError> {
    for index in 0..broker.shard_count() {
        let answer = call_shard(broker, index, request.clone()).await;
        let asked = || format!("{:?} on shard {index}", request.request_code());
        InternalCallError::successful(answer, asked)?;
    }
    Ok(())
}

/// The groups with committed offsets on `topic` in `offsets`.
fn groups_of_topic(offsets: &crate::offset::OffsetFile, topic: &str) -> BTreeSet<String> {
    offsets
        .offset_table
        .keys()
        .filter_map(|key| comet_proto::body::ConsumerOffsetSerializeWrapper::split_key(key))
        .filter(|(key_topic, _)| *key_topic == topic)
        .map(|(_, group)| group.to_owned())
        .collect()
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

/// DELETE_SUBSCRIPTIONGROUP (207), as a client asks it: the group's config and statistics
/// go (broker-wide tables), and with `cleanOffset` its committed offsets go on every shard
/// before the answer ([`delete_group_offsets_local`]), as Java's `deleteSubscriptionGroup`
/// removes them from its one offset table.
pub async fn delete_group(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
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
        if let Err(failure) = on_every_shard(broker, request).await {
            return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string());
        }
    }
    ok(request)
}

/// DELETE_SUBSCRIPTIONGROUP (207) as run by `handle_local` on every shard: this shard's
/// committed offsets of the group go.
pub fn delete_group_offsets_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match DeleteSubscriptionGroupRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    broker
        .offsets()
        .borrow_mut()
        .remove_group(&header.group_name);
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

/// QUERY_TOPIC_CONSUME_BY_WHO (300): the groups subscribed to the topic now, and the groups
/// holding committed offsets on it on any shard (Java's `queryTopicConsumeByWho` over its one
/// offset table).
pub async fn consumed_by_who(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match QueryTopicConsumeByWhoRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let offsets = match inspect::gather_offsets(broker).await {
        Ok(offsets) => offsets,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let mut group_list: BTreeSet<String> = broker
        .clients()
        .groups_subscribed_to(&header.topic)
        .into_iter()
        .collect();
    group_list.extend(groups_of_topic(&offsets, &header.topic));
    ok(request).with_body(GroupList { group_list }.encode())
}

/// The figures of GET_BROKER_RUNTIME_INFO that each shard reads from its own stores; the
/// broker's value of each is the sum over the shards ([`runtime_info`]).
const SHARD_FIGURES: [&str; 14] = [
    "commitLogMaxOffset",
    "commitLogMinOffset",
    "dispatchBehindBytes",
    "fdatasyncCount",
    "commitLogPipelinedFlushes",
    "commitLogPaddingBytes",
    "commitLogDiskReads",
    "commitLogReadWindowHits",
    "commitLogReadWindowMisses",
    // Comet's own: what the stores hold in memory, by part (see comet-store's StoreMemory),
    // so an operator can tell the bounded caches from anything that grows.
    "storeMemoryLogChunksBytes",
    "storeMemoryReadWindowsBytes",
    "storeMemoryConsumeQueueCacheBytes",
    "storeMemoryConsumeQueueTailsBytes",
    "storeMemoryKeyIndexBytes",
];

/// QUERY_TOPICS_BY_CONSUMER (343, 5.x): the topics `group` holds committed offsets on, on
/// any shard (Java's `queryTopicsByConsumer` over its one offset table), as a TopicList with
/// this broker's address.
pub async fn topics_by_consumer(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let group = match request.ext_fields.required_str("group") {
        Ok(group) => group,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let offsets = match inspect::gather_offsets(broker).await {
        Ok(offsets) => offsets,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let body = TopicList {
        topic_list: inspect::topics_of_group(&offsets, group)
            .into_iter()
            .collect(),
        broker_addr: Some(broker.config().broker_addr()),
    };
    ok(request).with_body(body.encode())
}

/// GET_BROKER_RUNTIME_INFO (28) as run by `handle_local` on every shard: the
/// [`SHARD_FIGURES`] of this shard's stores (its own log's and a slave's hosted logs').
///
/// Java's broker has one commit log; Comet has one per shard, each with positions from 0
/// (a physical offset carries its log's id in the top bits, so offsets of two logs are not
/// comparable). The broker's `commitLogMaxOffset` and `commitLogMinOffset` are therefore the
/// sums of the logs' positions, not physical offsets: their difference is the bytes the
/// broker keeps, and the max grows by every byte written to any log, as Java's does. With
/// one shard they equal that log's offsets.
pub async fn runtime_info_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let mut sums = [0u64; SHARD_FIGURES.len()];
    let mut earliest: Option<i64> = None;
    for store in shard_stores(broker) {
        let stats = store.stats();
        let memory = store.memory();
        let figures = [
            store.durable_position(),
            store.min_position(),
            store.dispatch_behind_bytes(),
            stats.fdatasyncs,
            stats.pipelined_flushes,
            stats.padding_bytes,
            stats.disk_reads,
            stats.read_window_hits,
            stats.read_window_misses,
            memory.log_chunks_bytes,
            memory.read_windows_bytes,
            memory.cq_cache_bytes,
            memory.cq_tails_bytes,
            memory.key_index_bytes,
        ];
        for (sum, figure) in sums.iter_mut().zip(figures) {
            *sum = sum.saturating_add(figure);
        }
        if let Some(stored) = first_store_time(&store).await {
            earliest = Some(earliest.map_or(stored, |known| known.min(stored)));
        }
    }
    let mut table: BTreeMap<String, String> = SHARD_FIGURES
        .iter()
        .zip(sums)
        .map(|(key, sum)| ((*key).to_owned(), sum.to_string()))
        .collect();
    table.insert(EARLIEST.to_owned(), earliest.unwrap_or(-1).to_string());
    ok(request).with_body(KVTable { table }.encode())
}

/// The key of the store time of the oldest message the broker keeps (Java's
/// `getEarliestMessageTime`, -1 without one): `clusterList` prints how many hours it spans.
const EARLIEST: &str = "earliestMessageTimeStamp";

/// The store time of the first record `store`'s log keeps, if it can be read.
async fn first_store_time(store: &Store) -> Option<i64> {
    if store.durable_position() <= store.min_position() {
        return None;
    }
    let record = store
        .read_record(store.min_physical_offset())
        .await
        .ok()??;
    let view = comet_proto::message::RecordView::parse(&record).ok()?;
    Some(view.store_timestamp())
}

/// Runs `request` on shard `index` without counting it as a request the broker routed:
/// the traffic figures an operator reads must not count the calls that gather them.
async fn ask_shard_uncounted(
    broker: &ShardBroker,
    index: usize,
    request: RemotingCommand,
) -> Result<RemotingCommand, InternalCallError> {
    let asked = || format!("runtime figures of shard {index}");
    let call = ShardCall::Request {
        context: internal_context(broker),
        command: request,
    };
    let answer = broker
        .mesh()
        .call(crate::routing::shard_id(index), call)
        .await
        .unwrap_or_else(|e| {
            log::warn!("runtime figures of shard {index}: {e}");
            None
        });
    InternalCallError::successful(answer, asked)
}

/// What the shards report for GET_BROKER_RUNTIME_INFO, for the whole broker.
struct BrokerFigures {
    /// The [`SHARD_FIGURES`], summed over the shards.
    sums: [u64; SHARD_FIGURES.len()],
    /// The earliest store time any shard keeps, -1 without one.
    earliest_ms: i64,
}

/// Every shard's figures, joined ([`BrokerFigures`]).
async fn broker_figures(broker: &ShardBroker) -> Result<BrokerFigures, InternalCallError> {
    let mut sums = [0u64; SHARD_FIGURES.len()];
    let mut earliest_ms: Option<i64> = None;
    for index in 0..broker.shard_count() {
        let request = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO, 0);
        let response = ask_shard_uncounted(broker, index, request).await?;
        let part =
            KVTable::decode(&response.body).map_err(|source| InternalCallError::Unreadable {
                asked: format!("runtime figures of shard {index}"),
                source,
            })?;
        for (sum, key) in sums.iter_mut().zip(SHARD_FIGURES) {
            let figure = part
                .table
                .get(key)
                .and_then(|value| value.parse::<u64>().ok());
            *sum = sum.saturating_add(figure.unwrap_or(0));
        }
        let stored = part
            .table
            .get(EARLIEST)
            .and_then(|value| value.parse::<i64>().ok());
        if let Some(stored) = stored.filter(|stored| *stored >= 0) {
            earliest_ms = Some(earliest_ms.map_or(stored, |known| known.min(stored)));
        }
    }
    Ok(BrokerFigures {
        sums,
        earliest_ms: earliest_ms.unwrap_or(-1),
    })
}

/// GET_BROKER_RUNTIME_INFO (28): a KVTable of string figures, under the keys RocketMQ's
/// `brokerStatus` prints and `clusterList` reads, for the whole broker: traffic figures count
/// every shard, store figures are summed over every shard's logs ([`runtime_info_local`]).
pub async fn runtime_info(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let shard_figures = match broker_figures(broker).await {
        Ok(figures) => figures,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let traffic = broker.all_traffic().report();
    let requests = traffic.now.in_place + traffic.now.forwarded;
    let forwarded_percent = if requests == 0 {
        0.0
    } else {
        traffic.now.forwarded as f64 * 100.0 / requests as f64
    };
    // Java prints the fraction of the disk in use, -1 when it cannot tell.
    let disk_ratio = comet_rt::io::disk_used_ratio(&broker.config().store_root)
        .map_or_else(|_| "-1".to_owned(), |ratio| ratio.to_string());
    let version = comet_proto::code::version::CURRENT;
    let mut figures: Vec<(&str, String)> = vec![
        ("brokerVersionDesc", version_desc(version)),
        ("brokerVersion", version.to_string()),
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
        ("commitLogDiskRatio", disk_ratio),
        (EARLIEST, shard_figures.earliest_ms.to_string()),
        // Java's `isSpecialServiceRunning`: a master taking writes.
        (
            "brokerActive",
            (broker.config().broker_role.is_master() && !super::lease_lapsed(broker)).to_string(),
        ),
        ("shardCount", broker.shard_count().to_string()),
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
    figures.extend(
        SHARD_FIGURES
            .iter()
            .zip(shard_figures.sums)
            .map(|(key, sum)| (*key, sum.to_string())),
    );
    let table = figures
        .into_iter()
        .map(|(key, value)| (key.to_owned(), value))
        .collect();
    ok(request).with_body(KVTable { table }.encode())
}

/// Java's `MQVersion.getVersionDesc`: the name of the `MQVersion.Version` constant whose
/// ordinal is `version`. From V3_9_1_SNAPSHOT (194) to V5_9_9 (611) the constants are regular,
/// a SNAPSHOT then the release of each version; past them Java answers HIGHER_VERSION. The
/// irregular 3.x names below are never Comet's, so they are printed as the number.
fn version_desc(version: i32) -> String {
    const FIRST_REGULAR: i32 = 194;
    const FIRST_REGULAR_RELEASE: i32 = 391;
    const LAST_REGULAR: i32 = 611;
    match version {
        FIRST_REGULAR..=LAST_REGULAR => {
            let steps = version - FIRST_REGULAR;
            let release = FIRST_REGULAR_RELEASE + steps / 2;
            let (major, minor, patch) = (release / 100, release / 10 % 10, release % 10);
            let suffix = if steps % 2 == 0 { "_SNAPSHOT" } else { "" };
            format!("V{major}_{minor}_{patch}{suffix}")
        }
        v if v > LAST_REGULAR => "HIGHER_VERSION".to_owned(),
        v => v.to_string(),
    }
}

/// DELETE_EXPIRED_COMMITLOG (329), CLEAN_EXPIRED_CONSUMEQUEUE (306) and CLEAN_UNUSED_TOPIC
/// (316), the store maintenance `mqadmin deleteExpiredCommitLog`, `cleanExpiredCQ` and
/// `cleanUnusedTopic` ask for: run on every shard (each has its own log and queues), then
/// answered SUCCESS, as Java answers them.
pub async fn store_maintenance(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    match on_every_shard(broker, request).await {
        Ok(()) => ok(request),
        Err(failure) => error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    }
}

/// DELETE_EXPIRED_COMMITLOG (329) as run by `handle_local` on every shard: as Java's
/// `executeDeleteFilesManually`, the next retention passes of this shard's stores delete
/// expired segments whatever the hour (see the store's `delete_expired_manually`).
pub fn delete_expired_commit_log_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    for store in shard_stores(broker) {
        store.delete_expired_manually();
    }
    ok(request)
}

/// CLEAN_EXPIRED_CONSUMEQUEUE (306) as run by `handle_local` on every shard: consume-queue
/// entries and files pointing into deleted segments go now (Java's
/// `cleanExpiredConsumerQueue`; Comet's retention also does it every pass).
pub async fn clean_expired_queues_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    for store in shard_stores(broker) {
        if let Err(e) = store.drop_gone_queue_entries().await {
            return error(request, ResponseCode::SYSTEM_ERROR, e.to_string());
        }
    }
    ok(request)
}

/// CLEAN_UNUSED_TOPIC (316) as run by `handle_local` on every shard: the consume queues of
/// topics the topic table no longer holds are emptied, as Java's `cleanUnusedTopic` destroys
/// them. System topics stay (Java keeps its schedule topic; Comet's other internal queues,
/// the timer wheel's, pop's and transactions', all have system names and may have no
/// config).
pub async fn clean_unused_topic_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    for store in shard_stores(broker) {
        let stored: BTreeSet<String> = store
            .queue_list()
            .into_iter()
            .map(|(topic, _)| topic)
            .collect();
        let unused: Vec<String> = {
            let topics = broker.topics();
            stored
                .into_iter()
                .filter(|topic| topics.get(topic).is_none() && !names::is_system_topic(topic))
                .collect()
        };
        for topic in unused {
            if let Err(e) = store.drop_topic_entries(&topic).await {
                let remark = format!("cannot drop the queues of {topic}: {e}");
                return error(request, ResponseCode::SYSTEM_ERROR, remark);
            }
        }
    }
    ok(request)
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

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the version names are Java's `MQVersion.Version` constants at their ordinals.
    #[test]
    fn version_names_are_javas() {
        assert_eq!(version_desc(comet_proto::code::version::CURRENT), "V5_3_3");
        assert_eq!(version_desc(478), "V5_3_3_SNAPSHOT");
        assert_eq!(version_desc(194), "V3_9_1_SNAPSHOT");
        assert_eq!(version_desc(213), "V4_0_0");
        assert_eq!(version_desc(401), "V4_9_4");
        assert_eq!(version_desc(413), "V5_0_0");
        assert_eq!(version_desc(611), "V5_9_9");
        assert_eq!(version_desc(612), "HIGHER_VERSION");
        assert_eq!(version_desc(5000), "HIGHER_VERSION");
    }
}
