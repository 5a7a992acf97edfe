//! Message trace end to end: a producer with `enable_msg_trace` writes a `Pub` record of
//! each send to `RMQ_SYS_TRACE_TOPIC`, found by the message id the way Java's trace reader
//! (`mqadmin queryMsgTraceById`) finds it: QUERY_MESSAGE on the trace topic by that id.

mod live;

use std::time::Duration;

use comet_client::trace::{decode, PubTrace, TraceMessageType, TraceRecord, TRACE_TOPIC_DEFAULT};
use comet_client::{Admin, Message, Producer, ProducerConfig, SendResult};
use comet_test_support::wait_until;
use live::{unique, Live};

/// The Pub records of the trace topic that name `msg_id`.
fn pub_records(admin: &Admin, msg_id: &str) -> Vec<PubTrace> {
    let Ok(found) = admin.query_messages_by_key(TRACE_TOPIC_DEFAULT, msg_id, 32, 0, i64::MAX)
    else {
        return Vec::new();
    };
    found
        .iter()
        .flat_map(|message| decode(std::str::from_utf8(&message.body).unwrap()).unwrap())
        .filter_map(|record| match record {
            TraceRecord::Pub(record) if record.msg_id == msg_id => Some(record),
            _ => None,
        })
        .collect()
}

// Proves every traced send, sync and async, is recorded once in Java's layout with what
// the send stored (topic, group, tags, keys, broker address, offset message id, success),
// and that sends of an untraced producer are not.
#[test]
fn traced_sends_are_found_by_message_id() {
    let live = Live::start("client-trace", &[]);
    let topic = unique("TraceT");
    let group = unique("trace_pg");
    let mut config = ProducerConfig::new(&group, live.client());
    config.enable_msg_trace = true;
    let producer = Producer::new(config).unwrap();
    producer.start().unwrap();
    let mut sent: Vec<(String, SendResult)> = Vec::new();
    for index in 0..10 {
        let key = format!("key-{index}");
        let message = Message::new(topic.as_str(), format!("body {index}"))
            .with_tags("TagA")
            .with_keys([key.as_str()]);
        let result = if index % 2 == 0 {
            producer.send(message).unwrap()
        } else {
            producer.send_async_future(message).unwrap().wait().unwrap()
        };
        sent.push((key, result));
    }
    let untraced = Producer::new(ProducerConfig::new(&unique("plain_pg"), live.client())).unwrap();
    untraced.start().unwrap();
    let plain = untraced
        .send(Message::new(topic.as_str(), "untraced"))
        .unwrap();
    untraced.shutdown();
    // Shutting down sends what the trace queue holds.
    producer.shutdown();

    let admin = Admin::new(live.client()).unwrap();
    let broker_addr = live.broker.broker_addr.to_string();
    for (key, result) in &sent {
        wait_until("the send's trace", Duration::from_secs(30), || {
            !pub_records(&admin, &result.msg_id).is_empty()
        });
        let records = pub_records(&admin, &result.msg_id);
        assert_eq!(records.len(), 1, "{records:?}");
        let record = &records[0];
        assert_eq!(record.topic, topic);
        assert_eq!(record.group, group);
        assert_eq!(record.tags.as_deref(), Some("TagA"));
        assert_eq!(record.keys.as_deref(), Some(key.as_str()));
        assert_eq!(record.store_host, broker_addr);
        assert_eq!(record.offset_msg_id, result.offset_msg_id);
        assert_eq!(record.msg_type, TraceMessageType::Normal);
        assert!(record.success);
        assert_eq!(Some(record.region_id.clone()), result.region_id);
    }
    assert!(pub_records(&admin, &plain.msg_id).is_empty());
    admin.shutdown();
}
