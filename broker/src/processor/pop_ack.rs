//! ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151) and CHANGE_MESSAGE_INVISIBLETIME
//! (200053), docs/protocol.md#pop-requests (Java's `AckMessageProcessor` and
//! `ChangeInvisibleTimeProcessor`).
//!
//! An ack and a change run on the shard owning the message's queue (the request's topic is
//! the queue's own: the pop retry topic for a retried message), which holds the checkpoint
//! the receipt (`extraInfo`) names; the records they write are in `crate::pop::ack`. A batch
//! ack may name queues of several shards: [`batch_ack`] sends each entry to its queue's
//! owner. An ack of a message already acked or revived is answered SUCCESS, as Java does.
//! A receipt with revive queue id 999 comes from an orderly pop: its ack and change go to
//! `crate::pop::order`'s book instead of the revive records.

use comet_proto::headers::{
    AckMessageRequestHeader, BatchAck, BatchAckMessageRequestBody,
    ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};

use super::error;
use crate::pop::ack::{ack_orderly, store_ack, store_acks, store_change};
use crate::pop::extra_info::{real_topic, ExtraInfo};
use crate::pop::order::Commit;
use crate::pop::records::{AckRecord, CheckPoint, OrderAck};
use crate::pop::{revive_queue, ORDER_REVIVE_QUEUE};
use crate::routing::on_owner;
use crate::shard::{RequestContext, ShardBroker};

/// Serves ACK_MESSAGE on the queue's owner.
pub async fn ack(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = super::slave_refusal(broker, request) {
        return refused;
    }
    let header = match AckMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let range = OffsetRange::Inclusive;
    if let Err(refused) = check_queue(broker, request, &header.topic, header.queue_id) {
        return refused;
    }
    if let Err(refused) = check_offset(
        broker,
        request,
        &header.topic,
        header.queue_id,
        header.offset,
        range,
    ) {
        return refused;
    }
    let receipt = match ExtraInfo::parse(&header.extra_info) {
        Ok(receipt) => receipt,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if receipt.revive_qid == ORDER_REVIVE_QUEUE {
        let ack = OrderAck {
            topic: header.topic,
            consumer_group: header.consumer_group,
            queue_id: header.queue_id,
            ack_offset: header.offset,
            next_offset: 0,
        };
        return answer_orderly(broker, request, &ack, receipt.pop_time).await;
    }
    let record = AckRecord {
        ack_offset: header.offset,
        start_offset: receipt.ck_queue_offset,
        consumer_group: header.consumer_group,
        topic: header.topic,
        queue_id: header.queue_id,
        pop_time: receipt.pop_time,
        broker_name: receipt.broker_name,
        ack_offset_list: Vec::new(),
    };
    match store_ack(broker, &record).await {
        Ok(()) => RemotingCommand::response_to(request, ResponseCode::SUCCESS),
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// Serves BATCH_ACK_MESSAGE where it arrived: each entry goes to its queue's owner.
pub async fn batch_ack(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    let body = match batch_body(request) {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    for entry in body.acks {
        let Some(topic) = real_topic(&entry.topic, &entry.consumer_group, &entry.retry) else {
            let remark = format!("retry flag {:?} is not 0, 1 or 2", entry.retry);
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        };
        let one = BatchAckMessageRequestBody {
            broker_name: body.broker_name.clone(),
            acks: vec![entry.clone()],
        };
        let mut forwarded = request.clone();
        forwarded.body = comet_proto::json::to_bytes(&one);
        let Some(answer) = on_owner(broker, context, &topic, entry.queue_id, forwarded).await
        else {
            continue;
        };
        if answer.response_code() != ResponseCode::SUCCESS {
            return RemotingCommand {
                opaque: request.opaque,
                ..answer
            };
        }
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}

/// Acks one message of an orderly pop and answers as Java does: MESSAGE_ILLEGAL for an
/// offset its pop did not hand out, SUCCESS otherwise (also for an older pop's ack, which
/// changes nothing).
async fn answer_orderly(
    broker: &ShardBroker,
    request: &RemotingCommand,
    ack: &OrderAck,
    pop_time_ms: i64,
) -> RemotingCommand {
    match ack_orderly(broker, ack, pop_time_ms).await {
        Ok(Commit::Illegal) => {
            let remark = format!(
                "offset is illegal, key:{}@{}@{}, commit:{}, next:-1",
                ack.topic, ack.consumer_group, ack.queue_id, ack.ack_offset
            );
            error(request, ResponseCode::MESSAGE_ILLEGAL, remark)
        }
        Ok(_) => RemotingCommand::response_to(request, ResponseCode::SUCCESS),
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// Serves the entries of a BATCH_ACK_MESSAGE for queues this shard owns.
pub async fn batch_ack_local(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = super::slave_refusal(broker, request) {
        return refused;
    }
    let body = match batch_body(request) {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let (orderly, others): (Vec<&BatchAck>, Vec<&BatchAck>) = body
        .acks
        .iter()
        .partition(|entry| entry.revive_queue_id == ORDER_REVIVE_QUEUE);
    for entry in orderly {
        let Some(record) = batch_record(broker, entry) else {
            continue;
        };
        for offset in record.offsets() {
            let ack = OrderAck {
                topic: record.topic.clone(),
                consumer_group: record.consumer_group.clone(),
                queue_id: record.queue_id,
                ack_offset: offset,
                next_offset: 0,
            };
            let answer = answer_orderly(broker, request, &ack, entry.pop_time).await;
            if answer.response_code() != ResponseCode::SUCCESS {
                return answer;
            }
        }
    }
    let records: Vec<AckRecord> = others
        .into_iter()
        .filter_map(|entry| batch_record(broker, entry))
        .collect();
    if records.is_empty() {
        return RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    }
    match store_acks(broker, &records).await {
        Ok(()) => RemotingCommand::response_to(request, ResponseCode::SUCCESS),
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}

/// The body, or Java's answer to a missing or empty one (NO_MESSAGE).
fn batch_body(request: &RemotingCommand) -> Result<BatchAckMessageRequestBody, RemotingCommand> {
    let parsed = comet_proto::json::from_slice::<BatchAckMessageRequestBody>(&request.body);
    match parsed {
        Ok(body) if !body.acks.is_empty() => Ok(body),
        Ok(_) => Err(error(
            request,
            ResponseCode::NO_MESSAGE,
            "no ack in the body",
        )),
        Err(e) => Err(error(request, ResponseCode::NO_MESSAGE, e.to_string())),
    }
}

/// The ack record of one batch entry: its set bits within the queue's offsets, or `None`
/// when none is (Java skips those quietly).
fn batch_record(broker: &ShardBroker, entry: &BatchAck) -> Option<AckRecord> {
    let topic = real_topic(&entry.topic, &entry.consumer_group, &entry.retry)?;
    let store = broker.queue_store(&topic, entry.queue_id);
    if !store.has_queue(&topic, entry.queue_id) {
        return None;
    }
    let min = store.min_offset(&topic, entry.queue_id).as_i64();
    let max = store.max_offset(&topic, entry.queue_id).as_i64();
    let offsets: Vec<i64> = entry
        .set_bits()
        .filter_map(|bit| entry.start_offset.checked_add(i64::try_from(bit).ok()?))
        .filter(|offset| (min..=max).contains(offset))
        .collect();
    let first = *offsets.first()?;
    Some(AckRecord {
        ack_offset: first,
        start_offset: entry.start_offset,
        consumer_group: entry.consumer_group.clone(),
        topic,
        queue_id: entry.queue_id,
        pop_time: entry.pop_time,
        broker_name: broker.config().broker_name.clone(),
        ack_offset_list: offsets,
    })
}

/// Serves CHANGE_MESSAGE_INVISIBLETIME on the queue's owner.
pub async fn change_invisible_time(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    if let Some(refused) = super::slave_refusal(broker, request) {
        return refused;
    }
    let header = match ChangeInvisibleTimeRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if let Err(refused) = check_queue(broker, request, &header.topic, header.queue_id) {
        return refused;
    }
    let range = OffsetRange::BelowMax;
    if let Err(refused) = check_offset(
        broker,
        request,
        &header.topic,
        header.queue_id,
        header.offset,
        range,
    ) {
        return refused;
    }
    let receipt = match ExtraInfo::parse(&header.extra_info) {
        Ok(receipt) => receipt,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if receipt.revive_qid == ORDER_REVIVE_QUEUE {
        return change_orderly(broker, request, &header, &receipt);
    }
    let now_ms = comet_rt::clock::wall_clock_ms();
    let ck = CheckPoint {
        start_offset: header.offset,
        pop_time: now_ms,
        invisible_time: header.invisible_time,
        num: 1,
        queue_id: header.queue_id,
        topic: header.topic.clone(),
        cid: header.consumer_group.clone(),
        queue_offset_diff: vec![0],
        broker_name: receipt.broker_name.clone(),
        ..CheckPoint::default()
    };
    let old = AckRecord {
        ack_offset: header.offset,
        start_offset: receipt.ck_queue_offset,
        consumer_group: header.consumer_group,
        topic: header.topic,
        queue_id: header.queue_id,
        pop_time: receipt.pop_time,
        broker_name: receipt.broker_name,
        ack_offset_list: Vec::new(),
    };
    if let Err(e) = store_change(broker, &ck, &old).await {
        return error(request, ResponseCode::SYSTEM_ERROR, e.to_string());
    }
    let response_header = ChangeInvisibleTimeResponseHeader {
        pop_time: now_ms,
        invisible_time: header.invisible_time,
        revive_qid: revive_queue(broker),
    };
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_header(&response_header)
}

/// An invisible-time change of an orderly pop's message (Java's
/// `processChangeInvisibleTimeForOrder`): the book moves when that message becomes visible
/// again, counted from now. A message below the consume offset (acked) is answered
/// SUCCESS with nothing changed, as Java does.
fn change_orderly(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &ChangeInvisibleTimeRequestHeader,
    receipt: &ExtraInfo,
) -> RemotingCommand {
    let position = broker
        .offsets()
        .borrow()
        .query(&header.consumer_group, &header.topic, header.queue_id)
        .unwrap_or(0);
    if header.offset < position {
        return RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    }
    let visible_at_ms = comet_rt::clock::wall_clock_ms().saturating_add(header.invisible_time);
    let key = (
        header.topic.clone(),
        header.consumer_group.clone(),
        header.queue_id,
    );
    crate::pop::state::with_order_book(|book| {
        book.change_visibility(&key, header.offset, receipt.pop_time, visible_at_ms)
    });
    let response_header = ChangeInvisibleTimeResponseHeader {
        pop_time: receipt.pop_time,
        invisible_time: visible_at_ms - receipt.pop_time,
        revive_qid: ORDER_REVIVE_QUEUE,
    };
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_header(&response_header)
}

/// Which offsets a request may name: an ack up to the queue's end inclusive, a change only
/// an existing message (Java's bounds).
#[derive(Clone, Copy)]
enum OffsetRange {
    Inclusive,
    BelowMax,
}

/// The topic exists and the queue id is one of its queues (Java's answers otherwise).
fn check_queue(
    broker: &ShardBroker,
    request: &RemotingCommand,
    topic: &str,
    queue_id: i32,
) -> Result<(), RemotingCommand> {
    let queues = broker
        .topics()
        .get(topic)
        .map(|config| config.read_queue_nums);
    let Some(queues) = queues else {
        let remark = format!("topic[{topic}] not exist, apply first please!");
        return Err(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
    };
    if queue_id < 0 || queue_id >= queues {
        let remark = format!(
            "queueId[{queue_id}] is illegal, topic:[{topic}] topicConfig.readQueueNums:[{queues}]"
        );
        return Err(error(request, ResponseCode::MESSAGE_ILLEGAL, remark));
    }
    Ok(())
}

fn check_offset(
    broker: &ShardBroker,
    request: &RemotingCommand,
    topic: &str,
    queue_id: i32,
    offset: i64,
    range: OffsetRange,
) -> Result<(), RemotingCommand> {
    let store = broker.queue_store(topic, queue_id);
    let min = store.min_offset(topic, queue_id).as_i64();
    let max = store.max_offset(topic, queue_id).as_i64();
    let inside = match range {
        OffsetRange::Inclusive => (min..=max).contains(&offset),
        OffsetRange::BelowMax => (min..max).contains(&offset),
    };
    if inside {
        return Ok(());
    }
    let remark =
        format!("offset is illegal, key:{topic}@{queue_id}, commit:{offset}, store:{min}~{max}");
    Err(error(request, ResponseCode::NO_MESSAGE, remark))
}
