//! Queue and offset inspection (docs/protocol.md#admin-requests,
//! docs/protocol.md#master-slave-metadata-sync): QUERY_CONSUME_QUEUE (321),
//! QUERY_CONSUME_TIME_SPAN (303), GET_BROKER_CONSUME_STATS (317), CLONE_GROUP_OFFSET (314),
//! GET_ALL_CONSUMER_OFFSET (43) and GET_ALL_DELAY_OFFSET (45), with the semantics of Java's
//! `AdminBrokerProcessor`.
//!
//! Consume queues and consumer offsets are per shard, so every per-queue figure comes from
//! the queue's owner, and every broker-wide table is gathered from every shard:
//!
//! ```text
//!  request ──▶ arrival shard (coordinator) ──┬─▶ owner of (topic, 0): per-queue part
//!                                            ├─▶ owner of (topic, 1): per-queue part
//!                                            └─▶ ... one call per queue or per shard
//! ```
//!
//! The per-queue and per-shard parts travel as the same request codes, told apart by what
//! the coordinator adds: QUERY_CONSUME_TIME_SPAN with a `queueId` is one queue's span on its
//! owner; GET_ALL_CONSUMER_OFFSET and CLONE_GROUP_OFFSET run by [`super::handle_local`] are
//! the shard's own part, while [`super::handle`] (what a client reaches) coordinates.
//! Delay cursors are read from the per-shard cursor files, which each delivery round
//! rewrites before the next starts, so they are the cursors in force.

use std::collections::{BTreeMap, BTreeSet};

use comet_proto::body::{
    ConsumeQueueData, ConsumeStats, ConsumeStatsList, ConsumerOffsetSerializeWrapper, DataVersion,
    DelayOffsetSerializeWrapper, JsonBody, OffsetWrapper, QueryConsumeQueueResponseBody,
    QueryConsumeTimeSpanBody, QueueTimeSpan, SubscriptionData, TopicConfig,
};
use comet_proto::headers::{
    CloneGroupOffsetRequestHeader, GetConsumeStatsInBrokerHeader, QueryConsumeQueueRequestHeader,
    QueryConsumeTimeSpanRequestHeader, QueryConsumerOffsetRequestHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_store::limits::CQ_INSPECT_ENTRIES_MAX;
use comet_store::{QueueOffset, StoreError};

use super::error;
use super::queue_figures::{internal_request, message_queue, owner_offset, queue_min_max};
use crate::delay_level::cursor;
use crate::offset::OffsetFile;
use crate::routing::{call_owner, call_shard, on_shard, shard_id, InternalCallError};
use crate::shard::{RequestContext, ShardBroker};
use crate::stats::StatsName;

fn ok(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

fn store_error(request: &RemotingCommand, e: StoreError) -> RemotingCommand {
    error(request, ResponseCode::SYSTEM_ERROR, e.to_string())
}

/// QUERY_CONSUME_QUEUE (321), on the queue's owner: the entries at queue offsets
/// `[index, index + count)`, the queue's min and max, and the live subscription of
/// `consumerGroup` to the topic when one is named. `count` is bounded by
/// [`CQ_INSPECT_ENTRIES_MAX`]; an index outside the queue answers no entries, with a remark.
pub fn query_consume_queue(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match QueryConsumeQueueRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if let Err(reason) = check_cq_query(&header) {
        return error(request, ResponseCode::INVALID_PARAMETER, reason.to_string());
    }
    let (topic, queue_id) = (header.topic.as_str(), header.queue_id);
    let store = broker.queue_store(topic, queue_id);
    if !store.has_queue(topic, queue_id) {
        let remark = format!("{queue_id}@{topic} is not exist!");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let min = store.min_offset(topic, queue_id).as_i64();
    let max = store.max_offset(topic, queue_id).as_i64();
    let mut body = QueryConsumeQueueResponseBody {
        max_queue_index: max,
        min_queue_index: min,
        ..QueryConsumeQueueResponseBody::default()
    };
    if let Some(group) = &header.consumer_group {
        body.subscription_data = subscription_of(broker, group, topic);
        if body.subscription_data.is_none() {
            body.filter_data = Some(format!("{group}@{topic} is not online!"));
        }
    }
    let mut response = ok(request);
    if header.index < min || header.index >= max {
        response.remark = Some(format!(
            "Index {} of {queue_id}@{topic} is not exist!",
            header.index
        ));
    }
    let from = QueueOffset(u64::try_from(header.index).expect("checked non-negative"));
    let count = usize::try_from(header.count).expect("checked non-negative");
    let entries = store.consume_queue_entries(topic, queue_id, from, count);
    body.queue_data = Some(entries.iter().map(|(_, entry)| cq_data(entry)).collect());
    response.with_body(body.encode())
}

/// A QUERY_CONSUME_QUEUE header outside the bounds it must respect.
#[derive(Debug, thiserror::Error)]
enum CqQueryError {
    /// A negative queue id.
    #[error("queueId {0} is negative")]
    NegativeQueueId(i32),
    /// A negative start index.
    #[error("index {0} is negative")]
    NegativeIndex(i64),
    /// Too many (or a negative number of) entries asked for.
    #[error("count {0} is outside 0..={CQ_INSPECT_ENTRIES_MAX}")]
    Count(i32),
}

/// The bounds a QUERY_CONSUME_QUEUE header must respect.
fn check_cq_query(header: &QueryConsumeQueueRequestHeader) -> Result<(), CqQueryError> {
    if header.queue_id < 0 {
        return Err(CqQueryError::NegativeQueueId(header.queue_id));
    }
    if header.index < 0 {
        return Err(CqQueryError::NegativeIndex(header.index));
    }
    let count_ok = usize::try_from(header.count).is_ok_and(|n| n <= CQ_INSPECT_ENTRIES_MAX);
    if !count_ok {
        return Err(CqQueryError::Count(header.count));
    }
    Ok(())
}

fn cq_data(entry: &comet_store::consume_queue::CqEntry) -> ConsumeQueueData {
    ConsumeQueueData {
        physic_offset: entry.physical.as_i64(),
        physic_size: i32::try_from(entry.size).unwrap_or(i32::MAX),
        tags_code: entry.tag_code,
        ..ConsumeQueueData::default()
    }
}

fn subscription_of(broker: &ShardBroker, group: &str, topic: &str) -> Option<SubscriptionData> {
    let clients = broker.clients();
    clients
        .consumer_group(group)
        .and_then(|consumers| consumers.subscriptions.get(topic).cloned())
}

/// True when `group` has live subscriptions and none to `topic`: Java then leaves the topic
/// out of the group's statistics and clones.
fn unsubscribed(broker: &ShardBroker, group: &str, topic: &str) -> bool {
    let clients = broker.clients();
    clients.consumer_group(group).is_some_and(|consumers| {
        !consumers.subscriptions.is_empty() && !consumers.subscriptions.contains_key(topic)
    })
}

/// QUERY_CONSUME_TIME_SPAN (303). With a `queueId` (added by the coordinator) it is that
/// queue's span on its owner; without, the span of every writable queue of `topic`.
pub async fn consume_time_span(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match QueryConsumeTimeSpanRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if let Ok(Some(queue_id)) = request.ext_fields.optional_i32("queueId") {
        if queue_id < 0 {
            let remark = format!("queueId {queue_id} is negative");
            return error(request, ResponseCode::INVALID_PARAMETER, remark);
        }
        return match local_time_span(broker, &header, queue_id).await {
            Ok(span) => ok(request).with_body(span.encode()),
            Err(e) => store_error(request, e),
        };
    }
    let Some(config) = topic_config(broker, &header.topic) else {
        return topic_not_exist(request, &header.topic);
    };
    let mut consume_time_span_set = Vec::new();
    for queue_id in 0..config.write_queue_nums {
        match queue_time_span(broker, &header.group, &header.topic, queue_id).await {
            Ok(span) => consume_time_span_set.push(span),
            Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
        }
    }
    ok(request).with_body(
        QueryConsumeTimeSpanBody {
            consume_time_span_set,
        }
        .encode(),
    )
}

/// One queue's span, asked of its owner.
pub(crate) async fn queue_time_span(
    broker: &ShardBroker,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Result<QueueTimeSpan, InternalCallError> {
    let header = QueryConsumeTimeSpanRequestHeader {
        topic: topic.to_owned(),
        group: group.to_owned(),
    };
    let mut request = internal_request(RequestCode::QUERY_CONSUME_TIME_SPAN, &header);
    request.ext_fields.insert("queueId", queue_id.to_string());
    let asked = || format!("time span of {queue_id}@{topic}");
    let answer = call_owner(broker, topic, queue_id, request).await;
    let response = InternalCallError::successful(answer, asked)?;
    QueueTimeSpan::decode(&response.body).map_err(|source| InternalCallError::Unreadable {
        asked: asked(),
        source,
    })
}

/// The span of one queue this shard owns. Times the store cannot give are -1, as Java's
/// `getMessageStoreTimeStamp` answers. The consume time is the store time of the message at
/// the committed offset - 1 (the last consumed), or the earliest time without one; the delay
/// is now minus the store time of the next message to consume, while one is left. The next
/// message is at the committed offset, or at the queue's min when the group has none (or
/// its offset fell below the min): Java reads offset -1 there and reports a delay of
/// `now + 1`.
async fn local_time_span(
    broker: &ShardBroker,
    header: &QueryConsumeTimeSpanRequestHeader,
    queue_id: i32,
) -> Result<QueueTimeSpan, StoreError> {
    let topic = header.topic.as_str();
    let store = broker.queue_store(topic, queue_id);
    let min = store.min_offset(topic, queue_id);
    let max = store.max_offset(topic, queue_id);
    let min_time_stamp = store.earliest_store_time(topic, queue_id).await?;
    let min_time_stamp = min_time_stamp.unwrap_or(-1);
    let max_time_stamp = match max.0.checked_sub(1) {
        Some(last) => {
            store
                .store_time_at(topic, queue_id, QueueOffset(last))
                .await?
        }
        None => None,
    };
    let committed = broker
        .offsets()
        .borrow()
        .query(&header.group, topic, queue_id);
    let consume_time_stamp = match committed {
        Some(offset) if offset > 0 => {
            let last = QueueOffset(u64::try_from(offset - 1).expect("positive"));
            store
                .store_time_at(topic, queue_id, last)
                .await?
                .unwrap_or(-1)
        }
        _ => min_time_stamp,
    };
    let next = committed
        .and_then(|offset| u64::try_from(offset).ok())
        .map_or(min, |offset| QueueOffset(offset.max(min.0)));
    let mut delay_time = 0;
    if next < max {
        if let Some(next_time) = store.store_time_at(topic, queue_id, next).await? {
            delay_time = comet_rt::clock::wall_clock_ms() - next_time;
        }
    }
    Ok(QueueTimeSpan {
        consume_time_stamp,
        delay_time,
        max_time_stamp: max_time_stamp.unwrap_or(-1),
        message_queue: message_queue(broker, topic, queue_id),
        min_time_stamp,
    })
}

fn topic_config(broker: &ShardBroker, topic: &str) -> Option<TopicConfig> {
    broker.topics().get(topic).cloned()
}

fn topic_not_exist(request: &RemotingCommand, topic: &str) -> RemotingCommand {
    let remark = format!("topic[{topic}] not exist");
    error(request, ResponseCode::TOPIC_NOT_EXIST, remark)
}

/// One queue's figures for a group, from its owner: the queue's max, the committed offset
/// (0 without one) and the store time of the last consumed message (0 when nothing was
/// consumed or it cannot be read). `pullOffset` is the committed offset: Comet keeps no
/// separate pull offset.
pub(crate) async fn offset_wrapper(
    broker: &ShardBroker,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> OffsetWrapper {
    let (_, broker_offset) = queue_min_max(broker, topic, queue_id).await;
    let query = QueryConsumerOffsetRequestHeader {
        consumer_group: group.to_owned(),
        topic: topic.to_owned(),
        queue_id,
        set_zero_if_not_found: Some(false),
        broker_name: None,
    };
    let request = internal_request(RequestCode::QUERY_CONSUMER_OFFSET, &query);
    let consumer_offset = owner_offset(broker, topic, queue_id, request)
        .await
        .unwrap_or(0)
        .max(0);
    let mut last_timestamp = 0;
    if consumer_offset > 0 {
        match queue_time_span(broker, group, topic, queue_id).await {
            Ok(span) => last_timestamp = span.consume_time_stamp.max(0),
            Err(e) => log::warn!("no consume time of {queue_id}@{topic} for {group}: {e}"),
        }
    }
    OffsetWrapper {
        broker_offset,
        consumer_offset,
        pull_offset: consumer_offset,
        last_timestamp,
    }
}

/// GET_BROKER_CONSUME_STATS (317): for every subscription group, one ConsumeStats per topic
/// it has offsets for (topics without a config, unordered topics when `isOrder`, and topics
/// the group no longer subscribes to while it has subscriptions are left out), over the
/// topic's writable queues, with the sum of the lags.
pub async fn broker_consume_stats(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match GetConsumeStatsInBrokerHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let offsets = match gather_offsets(broker).await {
        Ok(offsets) => offsets,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let group_names = broker.groups().names();
    let mut list = ConsumeStatsList {
        broker_addr: Some(broker.config().broker_addr()),
        ..ConsumeStatsList::default()
    };
    for group in group_names {
        let mut per_topic = Vec::new();
        for topic in topics_of_group(&offsets, &group) {
            let Some(config) = topic_config(broker, &topic) else {
                continue;
            };
            if (header.is_order && !config.order) || unsubscribed(broker, &group, &topic) {
                continue;
            }
            let mut stats = ConsumeStats {
                consume_tps: broker.stats().minute_tps(
                    StatsName::GroupGetNums,
                    &topic,
                    &group,
                    comet_rt::clock::wall_clock_ms(),
                ),
                ..ConsumeStats::default()
            };
            for queue_id in 0..config.write_queue_nums {
                let wrapper = offset_wrapper(broker, &group, &topic, queue_id).await;
                list.total_diff += wrapper.broker_offset - wrapper.consumer_offset;
                list.total_inflight_diff += wrapper.pull_offset - wrapper.consumer_offset;
                let queue = message_queue(broker, &topic, queue_id);
                stats.offset_table.insert(queue, wrapper);
            }
            per_topic.push(stats);
        }
        list.consume_stats_list
            .push(BTreeMap::from([(group, per_topic)]));
    }
    ok(request).with_body(list.encode())
}

/// The topics `group` has committed offsets for, sorted.
pub(crate) fn topics_of_group(offsets: &OffsetFile, group: &str) -> BTreeSet<String> {
    offsets
        .offset_table
        .keys()
        .filter_map(|key| ConsumerOffsetSerializeWrapper::split_key(key))
        .filter(|(_, owner)| *owner == group)
        .map(|(topic, _)| topic.to_owned())
        .collect()
}

/// Every shard's consumer offsets, merged (each queue's offsets live on one shard only).
pub(crate) async fn gather_offsets(broker: &ShardBroker) -> Result<OffsetFile, InternalCallError> {
    let mut merged = OffsetFile::default();
    for index in 0..broker.shard_count() {
        let request = RemotingCommand::request(RequestCode::GET_ALL_CONSUMER_OFFSET, 0);
        let asked = || format!("offsets of shard {index}");
        let answer = call_shard(broker, index, request).await;
        let response = InternalCallError::successful(answer, asked)?;
        let part = ConsumerOffsetSerializeWrapper::decode(&response.body).map_err(|source| {
            InternalCallError::Unreadable {
                asked: asked(),
                source,
            }
        })?;
        for (key, queues) in part.offset_table {
            merged.offset_table.entry(key).or_default().extend(queues);
        }
    }
    Ok(merged)
}

/// GET_ALL_CONSUMER_OFFSET (43) as run by [`super::handle_local`]: this shard's offsets.
pub fn local_consumer_offsets(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let body = ConsumerOffsetSerializeWrapper {
        data_version: None,
        offset_table: broker.offsets().borrow().snapshot().offset_table,
    };
    ok(request).with_body(body.encode())
}

/// GET_ALL_CONSUMER_OFFSET (43) from a client: the broker-wide `consumerOffset.json` content
/// (every shard's offsets) with a data version stamped now, which a 5.x slave requires.
pub async fn all_consumer_offsets(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    match gather_offsets(broker).await {
        Ok(offsets) => {
            let body = ConsumerOffsetSerializeWrapper {
                data_version: Some(version_now()),
                offset_table: offsets.offset_table,
            };
            ok(request).with_body(body.encode())
        }
        Err(failure) => error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    }
}

/// A data version for a table Comet does not version: stamped with the time it was read.
fn version_now() -> DataVersion {
    DataVersion {
        timestamp: comet_rt::clock::wall_clock_ms(),
        ..DataVersion::default()
    }
}

/// GET_ALL_DELAY_OFFSET (45): the broker-wide `delayOffset.json` content in Java's shape,
/// keyed by delay level (Comet's cursor files key by schedule queue id, level - 1).
pub async fn all_delay_offsets(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let config_dir = broker.config_dir().to_path_buf();
    let cursors = comet_rt::task_class::run_blocking(move || cursor::load_all(&config_dir)).await;
    let offset_table = cursors
        .into_iter()
        .filter_map(|(queue_id, offset)| Some((queue_id.checked_add(1)?, offset)))
        .collect();
    let body = DelayOffsetSerializeWrapper {
        data_version: Some(version_now()),
        offset_table,
    };
    ok(request).with_body(body.encode())
}

/// CLONE_GROUP_OFFSET (314) from a client: copies `srcGroup`'s committed offsets of `topic`
/// (or of every topic it has offsets for) to `destGroup` on every shard. Topics without a
/// config are skipped, and unless `offline`, so are topics the source no longer subscribes
/// to while it has subscriptions. The copies persist with the shards' other offsets.
pub async fn clone_group_offset(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match clone_header(request) {
        Ok(header) => header,
        Err(response) => return response,
    };
    let offsets = match gather_offsets(broker).await {
        Ok(offsets) => offsets,
        Err(failure) => return error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let held = topics_of_group(&offsets, &header.src_group);
    let topics: Vec<String> = match header.topic.as_deref().map(str::trim) {
        Some(topic) if !topic.is_empty() => vec![topic.to_owned()],
        _ => held.iter().cloned().collect(),
    };
    for topic in topics {
        let skip = topic_config(broker, &topic).is_none()
            || (header.offline != Some(true) && unsubscribed(broker, &header.src_group, &topic))
            // Java replaces the target's entry only when the source has one.
            || !held.contains(&topic);
        if skip {
            continue;
        }
        let mut per_topic = request.clone();
        per_topic.ext_fields.insert("topic", topic.clone());
        for index in 0..broker.shard_count() {
            let copy = per_topic.clone();
            let response = on_shard(broker, context, shard_id(index), copy).await;
            match response {
                Some(response) if response.response_code() == ResponseCode::SUCCESS => {}
                Some(response) => {
                    return RemotingCommand {
                        opaque: request.opaque,
                        ..response
                    }
                }
                None => return error(request, ResponseCode::SYSTEM_ERROR, "shard gave no answer"),
            }
        }
    }
    ok(request)
}

fn clone_header(
    request: &RemotingCommand,
) -> Result<CloneGroupOffsetRequestHeader, RemotingCommand> {
    let header = CloneGroupOffsetRequestHeader::from_ext_fields(&request.ext_fields)
        .map_err(|e| error(request, ResponseCode::SYSTEM_ERROR, e.to_string()))?;
    if header.src_group.trim().is_empty() || header.dest_group.trim().is_empty() {
        let remark = "srcGroup and destGroup must not be blank";
        return Err(error(request, ResponseCode::INVALID_PARAMETER, remark));
    }
    if header.src_group == header.dest_group {
        let remark = format!("srcGroup and destGroup are both {}", header.src_group);
        return Err(error(request, ResponseCode::INVALID_PARAMETER, remark));
    }
    Ok(header)
}

/// CLONE_GROUP_OFFSET (314) as run by [`super::handle_local`]: this shard's part for the one
/// topic the coordinator names.
pub fn clone_group_offset_local(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match clone_header(request) {
        Ok(header) => header,
        Err(response) => return response,
    };
    let Some(topic) = header.topic.filter(|topic| !topic.trim().is_empty()) else {
        return error(
            request,
            ResponseCode::INVALID_PARAMETER,
            "topic is required here",
        );
    };
    broker
        .offsets()
        .borrow_mut()
        .clone_topic(&header.src_group, &header.dest_group, &topic);
    ok(request)
}
