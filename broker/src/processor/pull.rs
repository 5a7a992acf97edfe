//! PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361),
//! docs/protocol.md#pull-message, on the queue's owner shard.
//!
//! Long polling: when nothing is there yet and the request allows suspension, the pull
//! waits on the store's arrival notifier for the queue (woken by the dispatch of the next
//! durable record) or until `suspendTimeoutMillis`, then runs once more and answers, so a
//! tailing consumer sees a message within the flush that made it durable.
//!
//! Filters: a TAG subscription filters on the consume queue's tag codes and reads only the
//! records it keeps; a SQL92 one (docs/protocol.md#sql92-property-filters) reads the
//! candidate records and keeps those whose properties its compiled selector matches
//! (`crate::selected_read`).

use std::rc::Rc;
use std::time::Duration;

use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::filter::TagSubscription;
use comet_proto::flags::pull as pull_sys_flag;
use comet_proto::headers::{PullMessageRequestHeader, PullMessageResponseHeader};
use comet_proto::sql92::Selector;
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};
use comet_rt::task_class::timeout;
use comet_store::{GetResult, GetStatus, MessageFilter, QueueOffset, StoreError};

use crate::selected_read::{read_selected, Wanted};
use crate::shard::ShardBroker;
use crate::stats::Delivery;
use crate::topic::perm;

/// Longest hold a client may ask for; the Java client asks 15 s and times out at 30 s.
pub const SUSPEND_MAX: Duration = Duration::from_secs(30);
/// Default byte budget of one pull (Java push consumer: 256 KiB).
pub const PULL_BYTES_DEFAULT: usize = 256 * 1024;
/// Largest byte budget a client may ask for.
pub const PULL_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Largest message count a client may ask for.
pub const PULL_MESSAGES_MAX: usize = 1024;

/// What a pull filters by.
enum PullFilter {
    /// Tag codes on the consume queue.
    Tag(TagSubscription),
    /// A compiled SQL92 selector over each record's properties.
    Sql(Rc<Selector>),
}

use super::error;

/// Serves one pull.
pub async fn process(broker: &ShardBroker, request: RemotingCommand) -> RemotingCommand {
    let header = match PullMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(&request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let filter = match check(broker, &request, &header) {
        Ok(filter) => filter,
        Err(response) => return response,
    };
    let reset = broker.offsets().borrow_mut().take_reset(
        &header.consumer_group,
        &header.topic,
        header.queue_id,
    );
    if let Some(offset) = reset {
        return reset_response(broker, &request, &header, offset);
    }
    if header.sys_flag & pull_sys_flag::COMMIT_OFFSET != 0 && header.commit_offset >= 0 {
        broker.offsets().borrow_mut().commit(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            header.commit_offset,
        );
    }
    let mut result = match read(broker, &header, &filter).await {
        Ok(result) => result,
        Err(failure) => return error(&request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    };
    let suspend = header.sys_flag & pull_sys_flag::SUSPEND != 0;
    if suspend && would_be_not_found(&header, &result) {
        let hold = hold_time(broker, &header);
        let offset = QueueOffset(u64::try_from(header.queue_offset).unwrap_or(0));
        let _ = timeout(
            hold,
            broker
                .queue_store(&header.topic, header.queue_id)
                .wait_for_message(&header.topic, header.queue_id, offset),
        )
        .await;
        result = match read(broker, &header, &filter).await {
            Ok(result) => result,
            Err(failure) => {
                return error(&request, ResponseCode::SYSTEM_ERROR, failure.to_string())
            }
        };
    }
    if result.status == GetStatus::Found {
        let messages = result.records.len() as u64;
        let bytes = result
            .records
            .iter()
            .map(|record| record.len() as u64)
            .sum();
        broker.traffic().add_got(messages);
        let delivery = Delivery {
            topic: &header.topic,
            group: &header.consumer_group,
            cluster: &broker.config().cluster_name,
        };
        broker
            .stats()
            .record_get(broker.shard().index(), delivery, messages, bytes);
    }
    let suggested = suggest_which_broker_id(broker, &header, &result);
    if broker.metrics().enabled() {
        // Java's `commitPullOffset`: where this pull left off, for the in-flight figures.
        let (_, next_begin_offset) = outcome(&header, &result);
        broker.offsets().borrow_mut().record_pull(
            &header.consumer_group,
            &header.topic,
            header.queue_id,
            next_begin_offset,
        );
    }
    respond(&request, &header, result, suggested)
}

/// `suggestWhichBrokerId` as Java's `PullMessageProcessor` sets it: without
/// `slaveReadEnable` always the master (0); with it, the group's
/// `whichBrokerWhenConsumeSlowly` (1 by default) to a consumer far behind, else the
/// group's `brokerId` (0 by default), so a master sends a lagging consumer to its slave and
/// a slave sends a caught-up consumer back to its master.
fn suggest_which_broker_id(
    broker: &ShardBroker,
    header: &PullMessageRequestHeader,
    result: &GetResult,
) -> i64 {
    let config = broker.config();
    if !config.slave_read_enable {
        return 0;
    }
    let (broker_id, when_slow) = broker
        .groups()
        .get(&header.consumer_group)
        .map_or((0, 1), |group| {
            (group.broker_id, group.which_broker_when_consume_slowly)
        });
    let looked_at = matches!(
        result.status,
        GetStatus::Found | GetStatus::NoMatchedMessage
    );
    let last = result.next_offset.0.checked_sub(1).filter(|_| looked_at);
    let store = broker.queue_store(&header.topic, header.queue_id);
    let behind = last
        .and_then(|last| {
            store
                .consume_queue_entries(&header.topic, header.queue_id, QueueOffset(last), 1)
                .into_iter()
                .next()
        })
        // Entries in a log of another shard count (an earlier core count) are not judged.
        .filter(|(_, entry)| entry.physical.log_id() == store.config().log_id)
        .map_or(0, |(_, entry)| {
            store
                .written_position()
                .saturating_sub(entry.physical.position())
        });
    let memory = crate::memory::total_memory_bytes();
    let ratio = config.access_message_in_memory_max_ratio_percent;
    if memory > 0 && crate::memory::is_far_behind(behind, memory, ratio) {
        when_slow
    } else {
        broker_id
    }
}

/// A pending server-side reset: PULL_OFFSET_MOVED to the reset offset
/// (docs/protocol.md#pull-message).
fn reset_response(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
    offset: i64,
) -> RemotingCommand {
    let response_header = PullMessageResponseHeader {
        suggest_which_broker_id: 0,
        next_begin_offset: offset,
        min_offset: broker
            .queue_store(&header.topic, header.queue_id)
            .min_offset(&header.topic, header.queue_id)
            .as_i64(),
        max_offset: broker
            .queue_store(&header.topic, header.queue_id)
            .max_offset(&header.topic, header.queue_id)
            .as_i64(),
        offset_delta: None,
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
        forbidden_type: None,
    };
    RemotingCommand::response_to(request, ResponseCode::PULL_OFFSET_MOVED)
        .with_header(&response_header)
        .with_remark("OFFSET_RESET")
}

fn hold_time(broker: &ShardBroker, header: &PullMessageRequestHeader) -> Duration {
    if broker.config().long_polling_enable {
        Duration::from_millis(u64::try_from(header.suspend_timeout_millis).unwrap_or(0))
            .min(SUSPEND_MAX)
    } else {
        Duration::from_millis(broker.config().short_polling_ms)
    }
}

/// Permission, topic, group and subscription checks, in RocketMQ's order.
fn check(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
) -> Result<PullFilter, RemotingCommand> {
    if !perm::is_readable(broker.config().broker_permission) {
        return Err(error(
            request,
            ResponseCode::NO_PERMISSION,
            "the broker pulling message is forbidden",
        ));
    }
    let group = broker.groups().get_or_create(
        &header.consumer_group,
        broker.config().auto_create_subscription_group,
    );
    let Some(group) = group else {
        let remark = format!(
            "subscription group [{}] does not exist",
            header.consumer_group
        );
        return Err(error(
            request,
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            remark,
        ));
    };
    if !group.consume_enable {
        return Err(error(
            request,
            ResponseCode::NO_PERMISSION,
            "subscription group no permission",
        ));
    }
    let topic = broker.topics().get(&header.topic).cloned();
    let Some(topic) = topic else {
        let remark = format!("topic[{}] not exist, apply first please!", header.topic);
        return Err(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
    };
    if !perm::is_readable(topic.perm) {
        return Err(error(
            request,
            ResponseCode::NO_PERMISSION,
            "the topic pulling message is forbidden",
        ));
    }
    if header.queue_id < 0 || header.queue_id >= topic.read_queue_nums {
        let remark = format!(
            "queueId[{}] is illegal, topic read queue nums {}",
            header.queue_id, topic.read_queue_nums
        );
        return Err(error(request, ResponseCode::INVALID_PARAMETER, remark));
    }
    subscription_of(broker, request, header)
}

fn subscription_of(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
) -> Result<PullFilter, RemotingCommand> {
    if header.sys_flag & pull_sys_flag::SUBSCRIPTION != 0 {
        let expression = header.subscription.as_deref().unwrap_or("");
        let kind = header.expression_type.as_deref();
        if comet_proto::filter::is_tag_type(kind) {
            return Ok(PullFilter::Tag(TagSubscription::parse(Some(expression))));
        }
        let Ok(selector) = compile(header, kind, expression) else {
            // Java's broker would pass every message here (its filter data stays empty);
            // refusing as its own parse failure does is the safer reading.
            return Err(error(
                request,
                ResponseCode::SUBSCRIPTION_PARSE_FAILED,
                "parse the consumer's subscription failed",
            ));
        };
        return sql_allowed(broker, request, selector);
    }
    let clients = broker.clients();
    let Some(group) = clients.consumer_group(&header.consumer_group) else {
        let remark = format!(
            "the consumer's group info not exist, group: {}",
            header.consumer_group
        );
        return Err(error(request, ResponseCode::SUBSCRIPTION_NOT_EXIST, remark));
    };
    let Some(subscription) = group.subscriptions.get(&header.topic) else {
        let remark = format!(
            "the consumer's subscription not exist, topic: {}",
            header.topic
        );
        return Err(error(request, ResponseCode::SUBSCRIPTION_NOT_EXIST, remark));
    };
    if subscription.sub_version < header.sub_version {
        return Err(error(
            request,
            ResponseCode::SUBSCRIPTION_NOT_LATEST,
            "the consumer's subscription not latest",
        ));
    }
    let kind = Some(subscription.expression_type.as_str());
    if comet_proto::filter::is_tag_type(kind) {
        return Ok(PullFilter::Tag(TagSubscription::parse(Some(
            subscription.sub_string.as_str(),
        ))));
    }
    let Ok(selector) = compile(header, kind, &subscription.sub_string) else {
        return Err(error(
            request,
            ResponseCode::FILTER_DATA_NOT_EXIST,
            "The broker's consumer filter data is not exist!Your expression may be wrong!",
        ));
    };
    drop(clients);
    sql_allowed(broker, request, selector)
}

/// The shard's compiled selector of a non-TAG subscription; only SQL92 is known, any other
/// type does not compile (Java has no filter for it either).
fn compile(
    header: &PullMessageRequestHeader,
    kind: Option<&str>,
    expression: &str,
) -> Result<Rc<Selector>, ()> {
    if kind != Some(comet_proto::filter::EXPRESSION_TYPE_SQL92) {
        return Err(());
    }
    crate::subscription::shard_selector(&header.consumer_group, &header.topic, expression)
        .map_err(|_| ())
}

/// A selector is used only with `enablePropertyFilter`; else Java's refusal.
fn sql_allowed(
    broker: &ShardBroker,
    request: &RemotingCommand,
    selector: Rc<Selector>,
) -> Result<PullFilter, RemotingCommand> {
    if !broker.config().enable_property_filter {
        let remark = format!(
            "The broker does not support consumer to filter message by {}",
            comet_proto::filter::EXPRESSION_TYPE_SQL92
        );
        return Err(error(request, ResponseCode::SYSTEM_ERROR, remark));
    }
    Ok(PullFilter::Sql(selector))
}

async fn read(
    broker: &ShardBroker,
    header: &PullMessageRequestHeader,
    filter: &PullFilter,
) -> Result<GetResult, StoreError> {
    let max_count = usize::try_from(header.max_msg_nums)
        .unwrap_or(1)
        .clamp(1, PULL_MESSAGES_MAX);
    let max_bytes = header
        .max_msg_bytes
        .and_then(|bytes| usize::try_from(bytes).ok())
        .unwrap_or(PULL_BYTES_DEFAULT)
        .clamp(1, PULL_BYTES_MAX);
    let offset = QueueOffset(u64::try_from(header.queue_offset).unwrap_or(0));
    let subscription = match filter {
        PullFilter::Tag(subscription) => subscription,
        PullFilter::Sql(selector) => {
            let wanted = Wanted {
                topic: &header.topic,
                queue_id: header.queue_id,
                offset,
                max_count,
                max_bytes,
            };
            let store = broker.queue_store(&header.topic, header.queue_id);
            return read_selected(store, selector, wanted).await;
        }
    };
    let codes: Vec<i64> = subscription
        .codes()
        .iter()
        .map(|code| i64::from(*code))
        .collect();
    let filter = if subscription.is_all() {
        MessageFilter::All
    } else {
        MessageFilter::TagCodes(&codes)
    };
    broker
        .queue_store(&header.topic, header.queue_id)
        .get_messages(
            &header.topic,
            header.queue_id,
            offset,
            max_count,
            max_bytes,
            filter,
        )
        .await
}

fn would_be_not_found(header: &PullMessageRequestHeader, result: &GetResult) -> bool {
    match result.status {
        GetStatus::OffsetOverflowOne => true,
        GetStatus::NoMessageInQueue => header.queue_offset == 0,
        _ => false,
    }
}

fn status_name(status: GetStatus) -> &'static str {
    match status {
        GetStatus::Found => "FOUND",
        GetStatus::NoMatchedMessage => "NO_MATCHED_MESSAGE",
        GetStatus::NoMessageInQueue => "NO_MESSAGE_IN_QUEUE",
        GetStatus::OffsetTooSmall => "OFFSET_TOO_SMALL",
        GetStatus::OffsetOverflowOne => "OFFSET_OVERFLOW_ONE",
        GetStatus::OffsetOverflowBadly => "OFFSET_OVERFLOW_BADLY",
    }
}

/// The response code and next begin offset of a pull's outcome
/// (docs/protocol.md#pull-message).
fn outcome(header: &PullMessageRequestHeader, result: &GetResult) -> (ResponseCode, i64) {
    match result.status {
        GetStatus::Found => (ResponseCode::SUCCESS, result.next_offset.as_i64()),
        GetStatus::NoMatchedMessage => (
            ResponseCode::PULL_RETRY_IMMEDIATELY,
            result.next_offset.as_i64(),
        ),
        GetStatus::NoMessageInQueue if header.queue_offset == 0 => {
            (ResponseCode::PULL_NOT_FOUND, 0)
        }
        GetStatus::NoMessageInQueue => (ResponseCode::PULL_OFFSET_MOVED, 0),
        GetStatus::OffsetTooSmall => (ResponseCode::PULL_OFFSET_MOVED, result.min_offset.as_i64()),
        GetStatus::OffsetOverflowOne => (ResponseCode::PULL_NOT_FOUND, header.queue_offset),
        GetStatus::OffsetOverflowBadly => {
            (ResponseCode::PULL_OFFSET_MOVED, result.max_offset.as_i64())
        }
    }
}

/// Maps the store's outcome to RocketMQ's response code and next offset
/// (docs/protocol.md#pull-message).
fn respond(
    request: &RemotingCommand,
    header: &PullMessageRequestHeader,
    result: GetResult,
    suggested: i64,
) -> RemotingCommand {
    let (code, next_begin_offset) = outcome(header, &result);
    let response_header = PullMessageResponseHeader {
        suggest_which_broker_id: suggested,
        next_begin_offset,
        min_offset: result.min_offset.as_i64(),
        max_offset: result.max_offset.as_i64(),
        offset_delta: None,
        topic_sys_flag: Some(0),
        group_sys_flag: Some(0),
        forbidden_type: None,
    };
    let body = if code == ResponseCode::SUCCESS {
        concatenate(&result.records)
    } else {
        Bytes::new()
    };
    RemotingCommand::response_to(request, code)
        .with_header(&response_header)
        .with_remark(status_name(result.status))
        .with_body(body)
}

fn concatenate(records: &[Bytes]) -> Bytes {
    if records.len() == 1 {
        return records[0].clone();
    }
    let total = records.iter().map(Bytes::len).sum();
    let mut body = BytesMut::with_capacity(total);
    for record in records {
        body.extend_from_slice(record);
    }
    body.freeze()
}
