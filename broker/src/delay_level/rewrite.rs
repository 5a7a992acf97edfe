//! The send-time rewrite of a delayed message to the schedule topic
//! (docs/protocol.md#delay-levels).
//!
//! It edits the send request itself (topic, queue id and properties fields, under the key
//! names of the request's header form), so the request is routed to the owner of the
//! schedule queue and stored there by the ordinary send path.

use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::{uses_send_header_v2, SendMessageRequestHeader};
use comet_proto::names::SCHEDULE_TOPIC;
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode};

/// Where a rewritten send now goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rewritten {
    /// The system topic it is stored in.
    pub topic: String,
    /// Its queue there.
    pub queue_id: i32,
}

/// Header keys of (topic, queueId, properties) in the request's form.
pub fn send_keys(code: RequestCode) -> (&'static str, &'static str, &'static str) {
    if uses_send_header_v2(code) {
        ("b", "e", "i")
    } else {
        ("topic", "queueId", "properties")
    }
}

/// Points the send at `topic`/`queue_id` with `properties`.
pub fn retarget(request: &mut RemotingCommand, rewritten: &Rewritten, properties: &Properties) {
    let (topic_key, queue_key, properties_key) = send_keys(request.request_code());
    request
        .ext_fields
        .insert(topic_key, rewritten.topic.clone());
    request
        .ext_fields
        .insert(queue_key, rewritten.queue_id.to_string());
    request
        .ext_fields
        .insert(properties_key, properties.encode());
}

/// The delay level a message asks for: `DELAY` > 0, and only for non-transactional or
/// committed messages.
pub fn requested_level(sys_flag: i32, properties: &Properties) -> Option<i32> {
    let transaction = message_sys_flag::transaction_type(sys_flag);
    if transaction != message_sys_flag::TRANSACTION_NOT_TYPE
        && transaction != message_sys_flag::TRANSACTION_COMMIT_TYPE
    {
        return None;
    }
    let level: i32 = properties.get(names::DELAY)?.trim().parse().ok()?;
    (level > 0).then_some(level)
}

/// Moves `properties` to the schedule queue of `level` (clamped to the configured levels):
/// the real topic and queue are kept in `REAL_TOPIC`/`REAL_QID`, timer properties dropped.
pub fn to_schedule(
    properties: &mut Properties,
    topic: &str,
    queue_id: i32,
    level: i32,
    level_count: usize,
) -> Rewritten {
    assert!(level > 0);
    assert!(level_count > 0);
    let level = level.min(i32::try_from(level_count).unwrap_or(i32::MAX));
    properties.insert(names::DELAY, level.to_string());
    properties.insert(names::REAL_TOPIC, topic);
    properties.insert(names::REAL_QID, queue_id.to_string());
    properties.remove(names::TIMER_DELIVER_MS);
    properties.remove(names::TIMER_DELAY_SEC);
    properties.remove(names::TIMER_DELAY_MS);
    Rewritten {
        topic: SCHEDULE_TOPIC.to_owned(),
        queue_id: level - 1,
    }
}

/// Rewrites a single-message send carrying `DELAY` to the schedule topic; `None` when the
/// send is not delayed (batches never are: the Java client refuses delayed batches).
pub fn rewrite_delayed_send(
    request: &mut RemotingCommand,
    header: &SendMessageRequestHeader,
    queue_id: i32,
    level_count: usize,
) -> Option<Rewritten> {
    if request.request_code() == RequestCode::SEND_BATCH_MESSAGE {
        return None;
    }
    let mut properties = Properties::decode(header.properties.as_deref().unwrap_or(""));
    let level = requested_level(header.sys_flag, &properties)?;
    let rewritten = to_schedule(&mut properties, &header.topic, queue_id, level, level_count);
    retarget(request, &rewritten, &properties);
    Some(rewritten)
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::headers::decode_send_request;
    use comet_proto::headers::SendMessageRequestHeaderV2;

    fn request(properties: &str, sys_flag: i32) -> RemotingCommand {
        let header = SendMessageRequestHeaderV2 {
            producer_group: "pg".into(),
            topic: "T".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 2,
            sys_flag,
            born_timestamp: 1,
            flag: 0,
            properties: Some(properties.into()),
            reconsume_times: None,
            unit_mode: None,
            max_reconsume_times: None,
            batch: None,
            broker_name: None,
        };
        RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 1).with_header(&header)
    }

    // Proves a DELAY send is moved to queue level-1 of the schedule topic with the real topic
    // and queue kept, the level clamped, and non-delayed or prepared sends left alone.
    #[test]
    fn delayed_sends_move_to_the_schedule_topic() {
        let mut props = Properties::new();
        props.insert(names::DELAY, "30");
        props.insert(names::TIMER_DELAY_SEC, "5");
        let mut send = request(&props.encode(), 0);
        let header = decode_send_request(&send).unwrap();
        let rewritten = rewrite_delayed_send(&mut send, &header, 2, 18).unwrap();
        assert_eq!(rewritten.queue_id, 17);
        let header = decode_send_request(&send).unwrap();
        assert_eq!(header.topic, SCHEDULE_TOPIC);
        assert_eq!(header.queue_id, 17);
        let stored = Properties::decode(header.properties.as_deref().unwrap());
        assert_eq!(stored.get(names::REAL_TOPIC), Some("T"));
        assert_eq!(stored.get(names::REAL_QID), Some("2"));
        assert_eq!(stored.get(names::DELAY), Some("18"));
        assert_eq!(stored.get(names::TIMER_DELAY_SEC), None);

        let mut plain = request("", 0);
        let header = decode_send_request(&plain).unwrap();
        assert!(rewrite_delayed_send(&mut plain, &header, 2, 18).is_none());
        let mut prepared = request(&props.encode(), 0x4);
        let header = decode_send_request(&prepared).unwrap();
        assert!(rewrite_delayed_send(&mut prepared, &header, 2, 18).is_none());
        let mut zero = Properties::new();
        zero.insert(names::DELAY, "0");
        let mut zero = request(&zero.encode(), 0);
        let header = decode_send_request(&zero).unwrap();
        assert!(rewrite_delayed_send(&mut zero, &header, 2, 18).is_none());
    }
}
