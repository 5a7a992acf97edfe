//! CONSUMER_SEND_MSG_BACK (36) and the retry/dead-letter rules
//! (docs/protocol.md#consumer-send-back, docs/protocol.md#retry-and-dead-letter-queues).
//!
//! A consumer that failed a message sends back its physical offset; the request runs on the
//! shard whose commit log that offset names. The record is re-stored as a new message for
//! `%RETRY%<group>` with `reconsumeTimes + 1` and the next delay level, which the delay
//! rewrite (`crate::delay_level::rewrite`) moves to the schedule topic first; past the group's
//! limit it goes to `%DLQ%<group>` instead, which nobody subscribes to.
//!
//! The same limit is applied to the Java client's fallback path (a plain send to the retry
//! topic): [`dead_letter_on_send`].
//!
//! JavaScript clients (npm `ali-ons`) hold `commitLogOffset` in a double, exact only below
//! 2^53; a physical offset of log 1 or above (log id in bits 56..62) reaches them rounded and
//! comes back as the shortest decimal of that double, up to one unit in the last place (ulp:
//! 16 for log 1, 1024 for log 127) away from the record. When the offset as sent names no
//! record, the positions within one ulp of it are tried, nearest first, and a record counts
//! only if its own PHYSICALOFFSET field says it lives there (see [`lookup`]).

use comet_proto::bytes::BytesMut;
use comet_proto::headers::{ConsumerSendMsgBackRequestHeader, SendMessageRequestHeader};
use comet_proto::message::{encode_record, RecordError, RecordSpec, RecordView};
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};
use comet_store::PhysicalOffset;

use crate::delay_level::rewrite::{retarget, to_schedule, Rewritten};
use crate::reappend::ReappendError;
use crate::shard::ShardBroker;
use crate::stats::StatsName;

/// Largest value a double (a JavaScript number) holds exactly: 2^53.
const F64_EXACT_MAX: i64 = 1 << 53;

/// `maxReconsumeTimes` when neither the request nor the group sets one.
pub const MAX_RECONSUME_TIMES_DEFAULT: i32 = 16;
/// Queues of a dead-letter topic.
pub const DLQ_QUEUE_NUMS: i32 = 1;

fn error(
    request: &RemotingCommand,
    code: ResponseCode,
    remark: impl Into<String>,
) -> RemotingCommand {
    RemotingCommand::error_to(request, code, remark)
}

/// Where a failed message goes next.
enum Target {
    /// Retry queue through the schedule topic at this level.
    Retry { queue_id: i32, level: i32 },
    /// Dead-letter queue.
    DeadLetter,
}

/// Serves CONSUMER_SEND_MSG_BACK on the shard whose log holds the message.
pub async fn process(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    if let Some(refused) = super::slave_refusal(broker, request) {
        return refused;
    }
    let header = match ConsumerSendMsgBackRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let group = broker.groups().get_or_create(
        &header.group,
        broker.config().auto_create_subscription_group,
    );
    let Some(group) = group else {
        let remark = format!("subscription group not exist, {}", header.group);
        return error(request, ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST, remark);
    };
    if group.retry_queue_nums <= 0 {
        return RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    }
    let Some(record) = lookup(broker, header.offset).await else {
        let remark = format!("look message by offset failed, {}", header.offset);
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    let Ok(view) = RecordView::parse(&record) else {
        return error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "stored message unreadable",
        );
    };
    let max_reconsume_times =
        max_reconsume_times(request, header.max_reconsume_times, group.retry_max_times);
    let target = if view.reconsume_times() >= max_reconsume_times || header.delay_level < 0 {
        Target::DeadLetter
    } else {
        let level = if header.delay_level > 0 {
            header.delay_level
        } else {
            3 + view.reconsume_times()
        };
        let queue_id = next_queue(broker, group.retry_queue_nums);
        Target::Retry { queue_id, level }
    };
    let dead_letter = matches!(target, Target::DeadLetter);
    match store_again(broker, &header.group, &view, target, group.retry_queue_nums).await {
        Ok(()) => {
            if dead_letter {
                // Java labels it with the request's `originTopic`.
                let origin = header.origin_topic.as_deref().unwrap_or(view.topic());
                let shard = broker.shard().index();
                broker.metrics().record_dlq(shard, &header.group, origin);
            }
            // Counted under the topic the message was first sent to, as RocketMQ does.
            let topic = view.property(names::RETRY_TOPIC).unwrap_or(view.topic());
            let sent_back = StatsName::SendBackPutNums;
            let shard = broker.shard().index();
            broker
                .stats()
                .add(shard, sent_back, topic, &header.group, 1);
            RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        }
        Err(failure) => error(request, ResponseCode::SYSTEM_ERROR, failure.to_string()),
    }
}

/// Why a message sent back could not be stored again.
#[derive(Debug, thiserror::Error)]
enum SendBackError {
    /// The retry or dead-letter topic was created but could not be persisted.
    #[error("cannot persist {topic}: {source}")]
    PersistTopic {
        /// The topic.
        topic: String,
        /// The write's error.
        #[source]
        source: std::io::Error,
    },
    /// The rewritten record cannot be encoded.
    #[error(transparent)]
    Encode(#[from] RecordError),
    /// The rewritten record was not stored.
    #[error(transparent)]
    Reappend(#[from] ReappendError),
}

/// The record at `offset`, or, past 2^53, the one a double-rounded `offset` stands for.
async fn lookup(broker: &ShardBroker, offset: i64) -> Option<comet_proto::bytes::Bytes> {
    let physical = PhysicalOffset::from_i64(offset)?;
    if let Some(record) = broker.store().read_record(physical).await.ok().flatten() {
        return Some(record);
    }
    for candidate in rounding_candidates(offset) {
        let Some(physical) = PhysicalOffset::from_i64(candidate) else {
            continue;
        };
        let Some(record) = broker.store().read_record(physical).await.ok().flatten() else {
            continue;
        };
        // Away from a record boundary the bytes may still parse by chance; a record's own
        // PHYSICALOFFSET field is where it was stored.
        if RecordView::parse(&record).is_ok_and(|view| view.physical_offset() == candidate) {
            return Some(record);
        }
    }
    None
}

/// The other values within one ulp of `offset` as a double, nearest first; none below 2^53,
/// where doubles are exact.
fn rounding_candidates(offset: i64) -> impl Iterator<Item = i64> {
    let ulp = if offset < F64_EXACT_MAX {
        0
    } else {
        // A double has 52 fraction bits: its spacing at 2^e is 2^(e - 52).
        let exponent = 63 - offset.leading_zeros() as i64;
        1i64 << (exponent - 52)
    };
    (1..=ulp).flat_map(move |distance| [offset - distance, offset.saturating_add(distance)])
}

/// The limit Apache applies: the request's `maxReconsumeTimes` when the client is V3_4_9 or
/// newer and sent one, else the group's `retryMaxTimes`. An orderly consumer relies on this:
/// after its local retries it sends the message back with its own limit (and a delay level
/// of 3 + reconsume times), which must route it to the DLQ.
pub fn max_reconsume_times(
    request: &RemotingCommand,
    requested: Option<i32>,
    group_retry_max_times: i32,
) -> i32 {
    match requested {
        Some(times) if request.version >= comet_proto::code::version::V3_4_9 => times,
        _ => group_retry_max_times,
    }
}

fn next_queue(broker: &ShardBroker, queue_nums: i32) -> i32 {
    let cursor = broker.queue_cursor().get();
    broker.queue_cursor().set(cursor.wrapping_add(1));
    (cursor % queue_nums.max(1) as u32) as i32
}

/// Ensures the retry or dead-letter topic exists (persisted before the record is stored).
async fn ensure_topic(
    broker: &ShardBroker,
    topic: &str,
    queue_nums: i32,
) -> Result<(), SendBackError> {
    let exists = broker.topics().get(topic).is_some();
    if exists {
        return Ok(());
    }
    broker.topics().ensure_system_topic(topic, queue_nums);
    broker.mark_topics_changed();
    crate::routing::persist_topics_now(broker)
        .await
        .map_err(|source| SendBackError::PersistTopic {
            topic: topic.to_owned(),
            source,
        })
}

async fn store_again(
    broker: &ShardBroker,
    group: &str,
    view: &RecordView<'_>,
    target: Target,
    retry_queue_nums: i32,
) -> Result<(), SendBackError> {
    let mut properties = Properties::decode(view.properties());
    if properties.get(names::RETRY_TOPIC).is_none() {
        properties.insert(names::RETRY_TOPIC, view.topic());
    }
    if properties.get(names::ORIGIN_MESSAGE_ID).is_none() {
        properties.insert(names::ORIGIN_MESSAGE_ID, view.offset_msg_id());
    }
    properties.remove(crate::delay_level::SCHEDULE_ORIGIN);
    let level_count = broker.store().config().delay_levels_ms.len();
    let destination = match target {
        Target::DeadLetter => {
            let topic = comet_proto::names::dlq_topic(group);
            ensure_topic(broker, &topic, DLQ_QUEUE_NUMS).await?;
            properties.remove(names::DELAY);
            Rewritten { topic, queue_id: 0 }
        }
        Target::Retry { queue_id, level } => {
            let topic = comet_proto::names::retry_topic(group);
            ensure_topic(broker, &topic, retry_queue_nums).await?;
            to_schedule(&mut properties, &topic, queue_id, level, level_count)
        }
    };
    let properties = properties.encode();
    let spec = RecordSpec {
        topic: &destination.topic,
        queue_id: destination.queue_id,
        flag: view.flag(),
        sysflag: view.sysflag(),
        born_timestamp: view.born_timestamp(),
        born_host: view.born_host(),
        store_host: broker.store_host(),
        reconsume_times: view.reconsume_times().saturating_add(1),
        prepared_transaction_offset: 0,
        body: view.body(),
        properties: &properties,
    };
    let mut record = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut record)?;
    Ok(crate::reappend::append_on_owners(broker, vec![record]).await?)
}

/// The client's fallback send to `%RETRY%<group>`: past the limit (`reconsumeTimes >
/// maxReconsumeTimes`, the limit chosen as in [`max_reconsume_times`]), or at once while the
/// group holds unexpired queue locks (an orderly group, as Apache 5.x does), the send goes to
/// `%DLQ%<group>` queue 0 without delay. Returns the new destination and whether the DLQ
/// topic was created.
pub fn dead_letter_on_send(
    broker: &ShardBroker,
    request: &mut RemotingCommand,
    header: &SendMessageRequestHeader,
) -> Option<(Rewritten, bool)> {
    let group = header
        .topic
        .strip_prefix(comet_proto::names::RETRY_TOPIC_PREFIX)?;
    let reconsume_times = header.reconsume_times.unwrap_or(0);
    let group_max = broker
        .groups()
        .get(group)
        .map_or(MAX_RECONSUME_TIMES_DEFAULT, |config| config.retry_max_times);
    let max = max_reconsume_times(request, header.max_reconsume_times, group_max);
    let now_ms = comet_rt::clock::wall_clock_ms();
    let orderly = broker.locks().group_holds_locks(group, now_ms);
    if reconsume_times <= max && !orderly {
        return None;
    }
    // Java labels this one with the send's producer group and the retry topic it named.
    let producer_group = header.producer_group.as_str();
    let shard = broker.shard().index();
    broker
        .metrics()
        .record_dlq(shard, producer_group, &header.topic);
    let topic = comet_proto::names::dlq_topic(group);
    let created = broker.topics().get(&topic).is_none();
    if created {
        broker.topics().ensure_system_topic(&topic, DLQ_QUEUE_NUMS);
        broker.mark_topics_changed();
    }
    let mut properties = Properties::decode(header.properties.as_deref().unwrap_or(""));
    properties.remove(names::DELAY);
    let rewritten = Rewritten { topic, queue_id: 0 };
    retarget(request, &rewritten, &properties);
    Some((rewritten, created))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the search covers what a double does to an offset: below 2^53 nothing is tried;
    // past it, the true offset is among the candidates of the value JavaScript sends back
    // (the shortest decimal of the rounded double), for log 1 and for the largest log id.
    #[test]
    fn candidates_cover_the_double_rounding() {
        assert_eq!(rounding_candidates(F64_EXACT_MAX - 1).count(), 0);
        for log_id in [1i64, 2, 127] {
            for position in [293_105i64, 7, (1 << 40) + 12_345] {
                let offset = (log_id << 56) | position;
                let sent: i64 = format!("{}", offset as f64).parse().expect("an integer");
                let candidates: Vec<i64> = rounding_candidates(sent).collect();
                assert!(
                    sent == offset || candidates.contains(&offset),
                    "{offset} not reached from {sent}"
                );
                assert!(candidates.len() <= 2048);
            }
        }
        let first: Vec<i64> = rounding_candidates(1 << 56).take(4).collect();
        assert_eq!(
            first,
            [(1 << 56) - 1, (1 << 56) + 1, (1 << 56) - 2, (1 << 56) + 2]
        );
    }
}
