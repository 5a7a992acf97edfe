//! What a revive stores for a message its consumer did not ack in time (Java's
//! `PopReviveService.reviveRetry`): a copy in the group's pop retry topic
//! (`%RETRY%<group>_<topic>`, queue 0) with the reconsume count one higher and
//! `1ST_POP_TIME` kept from its first pop; or, once the count has reached the group's
//! `retryMaxTimes`, a copy in `%DLQ%<group>` (queue 0), as a consumer's send-back does
//! (`docs/protocol.md#retry-and-dead-letter-queues`), with the original topic in
//! `RETRY_TOPIC`.

use comet_proto::bytes::BytesMut;
use comet_proto::message::{encode_record, RecordError, RecordSpec, RecordView};
use comet_proto::names::{dlq_topic, RETRY_TOPIC_PREFIX};
use comet_proto::properties::{names, Properties};

use super::extra_info::{normal_topic, pop_retry_topic};
use super::records::CheckPoint;
use crate::shard::ShardBroker;

/// `retryMaxTimes` of a group the broker has no config for.
pub const MAX_RECONSUME_TIMES_DEFAULT: i32 = 16;
/// Queues of a dead-letter topic.
pub const DLQ_QUEUE_NUMS: i32 = 1;

/// Where an unacked message goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Destination {
    /// The group's pop retry topic, queue 0.
    Retry(String),
    /// The group's dead-letter topic, queue 0.
    DeadLetter(String),
}

impl Destination {
    /// The topic.
    pub fn topic(&self) -> &str {
        match self {
            Destination::Retry(topic) | Destination::DeadLetter(topic) => topic,
        }
    }

    /// Queues the topic is created with.
    pub fn queue_nums(&self) -> i32 {
        match self {
            Destination::Retry(_) => super::RETRY_QUEUE_NUMS,
            Destination::DeadLetter(_) => DLQ_QUEUE_NUMS,
        }
    }
}

/// The group's `retryMaxTimes`.
pub fn max_reconsume_times(broker: &ShardBroker, group: &str) -> i32 {
    broker
        .groups()
        .get(group)
        .map_or(MAX_RECONSUME_TIMES_DEFAULT, |config| config.retry_max_times)
}

/// Where a message of `ck` that was consumed `reconsume_times` times before goes.
pub fn destination(ck: &CheckPoint, reconsume_times: i32, max_reconsume_times: i32) -> Destination {
    if reconsume_times >= max_reconsume_times {
        return Destination::DeadLetter(dlq_topic(&ck.cid));
    }
    if ck.topic.starts_with(RETRY_TOPIC_PREFIX) {
        Destination::Retry(ck.topic.clone())
    } else {
        Destination::Retry(pop_retry_topic(&ck.topic, &ck.cid))
    }
}

/// The record to store for `view`, a message of `ck`, at `destination`.
pub fn revived_record(
    broker: &ShardBroker,
    ck: &CheckPoint,
    view: &RecordView<'_>,
    destination: &Destination,
) -> Result<BytesMut, RecordError> {
    let mut properties = Properties::decode(view.properties());
    properties.remove(names::POP_CK);
    match destination {
        Destination::Retry(_) => {
            if view.reconsume_times() == 0 || properties.get(names::FIRST_POP_TIME).is_none() {
                properties.insert(names::FIRST_POP_TIME, ck.pop_time.to_string());
            }
        }
        Destination::DeadLetter(_) => {
            if properties.get(names::RETRY_TOPIC).is_none() {
                properties.insert(names::RETRY_TOPIC, normal_topic(&ck.topic, &ck.cid));
            }
            if properties.get(names::ORIGIN_MESSAGE_ID).is_none() {
                properties.insert(names::ORIGIN_MESSAGE_ID, view.offset_msg_id());
            }
        }
    }
    let properties = properties.encode();
    let spec = RecordSpec {
        topic: destination.topic(),
        queue_id: 0,
        flag: view.flag(),
        sysflag: view.sysflag(),
        born_timestamp: view.born_timestamp(),
        born_host: broker.store_host(),
        store_host: broker.store_host(),
        reconsume_times: view.reconsume_times().saturating_add(1),
        prepared_transaction_offset: 0,
        body: view.body(),
        properties: &properties,
    };
    let mut record = BytesMut::with_capacity(view.total_size() + 64);
    encode_record(&spec, 0, 0, 0, &mut record)?;
    Ok(record)
}

/// Creates `destination`'s topic when missing and persists the topic table before anything
/// is stored in it.
pub async fn ensure_topic(
    broker: &ShardBroker,
    destination: &Destination,
) -> Result<(), std::io::Error> {
    if broker.topics().get(destination.topic()).is_some() {
        return Ok(());
    }
    broker
        .topics()
        .ensure_system_topic(destination.topic(), destination.queue_nums());
    broker.mark_topics_changed();
    crate::routing::persist_topics_now(broker).await
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the retry rule: a normal topic's message goes to the group's v1 pop retry
    // topic, a retry topic's stays in it, and one consumed retryMaxTimes times goes to the
    // dead letters.
    #[test]
    fn destination_follows_the_reconsume_count() {
        let ck = CheckPoint {
            topic: "T".into(),
            cid: "g".into(),
            ..CheckPoint::default()
        };
        assert_eq!(
            destination(&ck, 0, 2),
            Destination::Retry("%RETRY%g_T".into())
        );
        let retry_ck = CheckPoint {
            topic: "%RETRY%g_T".into(),
            ..ck.clone()
        };
        assert_eq!(
            destination(&retry_ck, 1, 2),
            Destination::Retry("%RETRY%g_T".into())
        );
        assert_eq!(
            destination(&retry_ck, 2, 2),
            Destination::DeadLetter("%DLQ%g".into())
        );
    }
}
