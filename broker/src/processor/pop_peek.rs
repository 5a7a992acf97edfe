//! PEEK_MESSAGE (200052), NOTIFICATION (200054) and POLLING_INFO (200055),
//! docs/protocol.md#pop-requests: looking at a group's pop state without popping (Java's
//! `PeekMessageProcessor`, `NotificationProcessor` and `PollingInfoProcessor`).
//!
//! A peek reads the messages at the group's pop position (its consumer offset, the queue's
//! first message when it has none) and takes nothing: no checkpoint, no position move,
//! nothing becomes invisible. Like a pop it reads the asked queue (every queue for queue id
//! -1) and the group's pop retry topic, each queue on the shard owning it
//! ([`peek_one_queue`]), and joins the answers. A notification asks the same owners how
//! much lies past the pop position (a peek of no message) and answers `hasMsg` true as soon
//! as anything does; otherwise it polls, woken as a polling pop is, until the client's
//! `bornTime + pollTime`. POLLING_INFO sums, over every shard, the pops of the topic, group
//! and queue id polling there now (Java counts its pop polling map only, so polling
//! notifications are not in it).

use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::headers::{
    NotificationRequestHeader, NotificationResponseHeader, PeekMessageRequestHeader,
    PollingInfoRequestHeader, PollingInfoResponseHeader, PopMessageResponseHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_store::{GetStatus, MessageFilter, QueueOffset};

use super::error;
use super::pop::{
    check_topic_and_group, record_count, targets, wait_for_arrivals, watched, Asked, Target,
    POLL_MAX,
};
use crate::pop::take::POP_BYTES_MAX;
use crate::routing::{on_owner, on_shard, shard_id};
use crate::shard::{RequestContext, ShardBroker};
use crate::topic::perm;

/// Serves PEEK_MESSAGE where it arrived: the queues' peeks joined.
pub async fn peek(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match PeekMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let asked = Asked {
        topic: &header.topic,
        group: &header.consumer_group,
        queue_id: header.queue_id,
    };
    if let Some(refused) = check(broker, request, &asked, ResponseCode::INVALID_PARAMETER) {
        return refused;
    }
    let wanted = usize::try_from(header.max_msg_nums).unwrap_or(0);
    let mut body = BytesMut::new();
    let mut count = 0usize;
    let mut rest = 0i64;
    let targets = targets(
        broker,
        &header.topic,
        &header.consumer_group,
        header.queue_id,
    );
    for target in &targets {
        // Java reads the retry topic after the topic only while the peek is not full.
        if target.retry && count >= wanted {
            continue;
        }
        let remaining = i32::try_from(wanted - count.min(wanted)).unwrap_or(i32::MAX);
        let Some(answer) = peek_owner(broker, context, &header, target, remaining, None).await
        else {
            continue;
        };
        let code = answer.response_code();
        if code != ResponseCode::SUCCESS && code != ResponseCode::PULL_NOT_FOUND {
            return RemotingCommand {
                opaque: request.opaque,
                ..answer
            };
        }
        if let Ok(one) = PopMessageResponseHeader::from_ext_fields(&answer.ext_fields) {
            rest += one.rest_num;
        }
        if code == ResponseCode::SUCCESS {
            count += record_count(&answer.body);
            body.extend_from_slice(&answer.body);
        }
    }
    let response_header = PopMessageResponseHeader {
        rest_num: rest,
        ..PopMessageResponseHeader::default()
    };
    if count == 0 {
        return RemotingCommand::response_to(request, ResponseCode::PULL_NOT_FOUND)
            .with_header(&response_header)
            .with_remark("NO_MESSAGE_IN_QUEUE");
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&response_header)
        .with_remark("FOUND")
        .with_body(body.freeze())
}

/// An orderly notification's probe: a queue blocked for the group counts as holding nothing
/// (Java's `hasMsgFromQueue` with `order`).
struct OrderProbe {
    attempt_id: Option<String>,
}

/// Ext fields of a peek sent to a queue's owner for an orderly notification (between
/// shards only; Java's PEEK_MESSAGE has no such field).
const PROBE_ORDER_FIELD: &str = "order";
const PROBE_ATTEMPT_FIELD: &str = "attemptId";

/// Asks the owner of `target` to peek up to `max` messages (none: only how many are left).
async fn peek_owner(
    broker: &ShardBroker,
    context: RequestContext,
    asked: &PeekMessageRequestHeader,
    target: &Target,
    max: i32,
    order: Option<&OrderProbe>,
) -> Option<RemotingCommand> {
    let one = PeekMessageRequestHeader {
        consumer_group: asked.consumer_group.clone(),
        topic: target.topic.clone(),
        queue_id: target.queue_id,
        max_msg_nums: max,
    };
    let mut request = RemotingCommand::request(RequestCode::PEEK_MESSAGE, 0).with_header(&one);
    if let Some(order) = order {
        request.ext_fields.insert(PROBE_ORDER_FIELD, "true");
        request
            .ext_fields
            .insert_opt(PROBE_ATTEMPT_FIELD, order.attempt_id.as_deref());
    }
    on_owner(broker, context, &target.topic, target.queue_id, request).await
}

/// Serves the peek of one queue on its owner (what [`peek`] and [`notification`] send each
/// queue): its stored messages from the group's pop position, as stored, and `restNum`,
/// how many lie past that position.
pub async fn peek_one_queue(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match PeekMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if header.queue_id < 0 {
        return error(request, ResponseCode::INVALID_PARAMETER, "no queue to peek");
    }
    let (topic, queue_id) = (header.topic.as_str(), header.queue_id);
    let store = broker.queue_store(topic, queue_id);
    let max_offset = store.max_offset(topic, queue_id).as_i64();
    // Java's `getPopOffset`: the consumer offset, else the queue's first message.
    let position = broker
        .offsets()
        .borrow()
        .query(&header.consumer_group, topic, queue_id)
        .unwrap_or_else(|| store.min_offset(topic, queue_id).as_i64());
    let blocked = request.ext_fields.optional_bool(PROBE_ORDER_FIELD) == Some(true) && {
        let key = (topic.to_owned(), header.consumer_group.clone(), queue_id);
        let attempt = request.ext_fields.get(PROBE_ATTEMPT_FIELD);
        let now_ms = comet_rt::clock::wall_clock_ms();
        crate::pop::state::with_order_book(|book| book.is_blocked(&key, attempt, now_ms))
    };
    let response_header = PopMessageResponseHeader {
        rest_num: if blocked {
            0
        } else {
            (max_offset - position).max(0)
        },
        ..PopMessageResponseHeader::default()
    };
    let not_found = || {
        RemotingCommand::response_to(request, ResponseCode::PULL_NOT_FOUND)
            .with_header(&response_header)
            .with_remark("NO_MESSAGE_IN_QUEUE")
    };
    let Some(max) = usize::try_from(header.max_msg_nums)
        .ok()
        .filter(|max| *max > 0)
    else {
        return not_found();
    };
    let read = |from: i64| {
        store.get_messages(
            topic,
            queue_id,
            QueueOffset(u64::try_from(from).unwrap_or(0)),
            max,
            POP_BYTES_MAX,
            MessageFilter::All,
        )
    };
    let mut result = match read(position).await {
        Ok(result) => result,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if matches!(
        result.status,
        GetStatus::OffsetTooSmall | GetStatus::OffsetOverflowBadly
    ) {
        // The position is outside the queue: Java reads again from the nearest end.
        result = match read(result.next_offset.as_i64()).await {
            Ok(result) => result,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
    }
    if result.status != GetStatus::Found || result.records.is_empty() {
        return not_found();
    }
    let mut body = BytesMut::with_capacity(result.records.iter().map(|r| r.len()).sum());
    for record in &result.records {
        body.extend_from_slice(record);
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&response_header)
        .with_remark("FOUND")
        .with_body(body.freeze())
}

/// Serves NOTIFICATION where it arrived: `hasMsg` once the group could pop something, or
/// false when the poll time passed first.
pub async fn notification(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let mut header = match NotificationRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let arrived_ms = comet_rt::clock::wall_clock_ms();
    if header.born_time == 0 {
        header.born_time = arrived_ms;
    }
    let asked = Asked {
        topic: &header.topic,
        group: &header.consumer_group,
        queue_id: header.queue_id,
    };
    if let Some(refused) = check(broker, request, &asked, ResponseCode::SYSTEM_ERROR) {
        return refused;
    }
    // Java's poll ends at the client's `bornTime + pollTime`; none when that has passed.
    let poll_ms = header
        .born_time
        .saturating_add(header.poll_time)
        .saturating_sub(arrived_ms);
    let poll_ms = if header.poll_time > 0 {
        u64::try_from(poll_ms).unwrap_or(0)
    } else {
        0
    };
    let deadline = comet_rt::clock::monotonic_now() + Duration::from_millis(poll_ms).min(POLL_MAX);
    let probe = PeekMessageRequestHeader {
        consumer_group: header.consumer_group.clone(),
        topic: header.topic.clone(),
        queue_id: header.queue_id,
        max_msg_nums: 0,
    };
    loop {
        let mut targets = targets(
            broker,
            &header.topic,
            &header.consumer_group,
            header.queue_id,
        );
        let order = (header.order == Some(true)).then(|| OrderProbe {
            attempt_id: header.attempt_id.clone(),
        });
        if order.is_some() {
            // An orderly pop reads no retry topic.
            targets.retain(|target| !target.retry);
        }
        let watched = watched(broker, &targets);
        let has_msg = has_message(broker, context, &probe, &targets, order.as_ref()).await;
        let now = comet_rt::clock::monotonic_now();
        if has_msg || now >= deadline {
            let response_header = NotificationResponseHeader {
                has_msg,
                polling_full: None,
            };
            return RemotingCommand::response_to(request, ResponseCode::SUCCESS)
                .with_header(&response_header);
        }
        wait_for_arrivals(broker, &watched, targets.len(), deadline - now).await;
    }
}

/// Whether any target holds a message past the group's pop position (Java's
/// `hasMsgFromQueue`), asked of each target's owner in order.
async fn has_message(
    broker: &ShardBroker,
    context: RequestContext,
    probe: &PeekMessageRequestHeader,
    targets: &[Target],
    order: Option<&OrderProbe>,
) -> bool {
    for target in targets {
        let Some(answer) = peek_owner(broker, context, probe, target, 0, order).await else {
            continue;
        };
        let rest = PopMessageResponseHeader::from_ext_fields(&answer.ext_fields)
            .map_or(0, |one| one.rest_num);
        if rest > 0 {
            return true;
        }
    }
    false
}

/// Serves POLLING_INFO where it arrived: the polling pops of every shard, summed.
pub async fn polling_info(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match PollingInfoRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let asked = Asked {
        topic: &header.topic,
        group: &header.consumer_group,
        queue_id: header.queue_id,
    };
    if let Some(refused) = check(broker, request, &asked, ResponseCode::SYSTEM_ERROR) {
        return refused;
    }
    let mut polling_num = 0i32;
    for index in 0..broker.shard_count() {
        let Some(answer) = on_shard(broker, context, shard_id(index), request.clone()).await else {
            continue;
        };
        if answer.response_code() != ResponseCode::SUCCESS {
            return RemotingCommand {
                opaque: request.opaque,
                ..answer
            };
        }
        if let Ok(one) = PollingInfoResponseHeader::from_ext_fields(&answer.ext_fields) {
            polling_num = polling_num.saturating_add(one.polling_num);
        }
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&PollingInfoResponseHeader { polling_num })
}

/// Serves POLLING_INFO on one shard (what [`polling_info`] asks each): the pops of the
/// topic, group and queue id (as the pops asked it) polling on this shard.
pub fn polling_info_local(request: &RemotingCommand) -> RemotingCommand {
    let header = match PollingInfoRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let count =
        crate::pop::state::polling_count(&header.topic, &header.consumer_group, header.queue_id);
    let polling_num = i32::try_from(count).unwrap_or(i32::MAX);
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&PollingInfoResponseHeader { polling_num })
}

/// Java's checks of the three processors, in their order; an illegal queue id is answered
/// `illegal_queue` (INVALID_PARAMETER for a peek, SYSTEM_ERROR for the others, as Java).
fn check(
    broker: &ShardBroker,
    request: &RemotingCommand,
    asked: &Asked<'_>,
    illegal_queue: ResponseCode,
) -> Option<RemotingCommand> {
    let config = broker.config();
    if !perm::is_readable(config.broker_permission) {
        let remark = format!(
            "the broker[{}] peeking message is forbidden",
            config.broker_ip
        );
        return Some(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    check_topic_and_group(broker, request, asked, illegal_queue)
}
