//! Message trace end to end: a producer with `enable_msg_trace` writes a `Pub` record of
//! each send to `RMQ_SYS_TRACE_TOPIC`, found by the message id the way Java's trace reader
//! (`mqadmin queryMsgTraceById`) finds it: QUERY_MESSAGE on the trace topic by that id.

mod live;

use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use comet_client::trace::{
    decode, PubTrace, SubAfterTrace, SubBeforeTrace, TraceMessageType, TraceRecord,
    TRACE_TOPIC_DEFAULT,
};
use comet_client::{
    Admin, AsyncMessageListener, AsyncPushConsumer, AsyncPushConsumerConfig,
    ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, Message, MessageListener, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig, SendResult,
};
use comet_test_support::wait_until;
use live::{consumer_config, unique, Live};

/// The consume records (before, after) of the trace topic that name `msg_id`.
fn consume_records(admin: &Admin, msg_id: &str) -> (Vec<SubBeforeTrace>, Vec<SubAfterTrace>) {
    let Ok(found) = admin.query_messages_by_key(TRACE_TOPIC_DEFAULT, msg_id, 32, 0, i64::MAX)
    else {
        return (Vec::new(), Vec::new());
    };
    let (mut before, mut after) = (Vec::new(), Vec::new());
    for message in &found {
        for record in decode(std::str::from_utf8(&message.body).unwrap()).unwrap() {
            match record {
                TraceRecord::SubBefore(record) if record.msg_id == msg_id => before.push(record),
                TraceRecord::SubAfter(record) if record.msg_id == msg_id => after.push(record),
                _ => {}
            }
        }
    }
    before.sort_by_key(|record| record.retry_times);
    (before, after)
}

/// Sends one message with key `key` to `topic` (untraced) and returns its id.
fn send_one(live: &Live, topic: &str, key: &str) -> String {
    let producer = Producer::new(ProducerConfig::new(&unique("ctrace_pg"), live.client())).unwrap();
    producer.start().unwrap();
    let result = producer
        .send(Message::new(topic, "traced consume").with_keys([key]))
        .unwrap();
    producer.shutdown();
    result.msg_id
}

/// The before/after pairs of `msg_id` written by `group`'s consumer, matched by request id,
/// sorted by retry count.
fn group_pairs(
    admin: &Admin,
    msg_id: &str,
    group: &str,
) -> Vec<(SubBeforeTrace, Option<SubAfterTrace>)> {
    let (before, after) = consume_records(admin, msg_id);
    before
        .into_iter()
        .filter(|before| before.group == group)
        .map(|before| {
            let after = after
                .iter()
                .find(|after| after.request_id == before.request_id)
                .cloned();
            (before, after)
        })
        .collect()
}

/// Waits for `pairs` complete before/after pairs of `msg_id` by `group` and checks each
/// pair's keys, region and timing; returns them sorted by retry count.
fn wait_pairs(
    admin: &Admin,
    msg_id: &str,
    group: &str,
    key: &str,
    pairs: usize,
) -> Vec<(SubBeforeTrace, SubAfterTrace)> {
    wait_until("the consume traces", Duration::from_secs(60), || {
        let found = group_pairs(admin, msg_id, group);
        found.len() >= pairs && found.iter().all(|(_, after)| after.is_some())
    });
    let found = group_pairs(admin, msg_id, group);
    assert_eq!(found.len(), pairs, "{found:?}");
    found
        .into_iter()
        .map(|(before, after)| {
            let after = after.expect("a SubAfter");
            assert!(!before.region_id.is_empty());
            assert_eq!(before.keys.as_deref(), Some(key));
            assert_eq!(after.keys.as_deref(), Some(key));
            assert!(after.timestamp_ms >= before.timestamp_ms);
            assert!(after.cost_ms >= 0);
            (before, after)
        })
        .collect()
}

// Proves the async push consumer traces each listener call as Java's consume hook does: a
// message failed once then consumed shows two before/after pairs, found by its id on the
// trace topic, with the group, the retry count (0 then 1), the outcome (failed, code 4;
// then success, code 0) and one request id per pair; and that an orderly listener's call is
// traced too.
#[test]
fn async_consumer_traces_failed_then_consumed() {
    let live = Live::start("client-ctrace-async", &[]);
    let topic = unique("CTraceT");
    let group = unique("ctrace_cg");
    let key = unique("ckey");
    let msg_id = send_one(&live, &topic, &key);
    let mut config = consumer_config(&live, &group);
    config.enable_msg_trace = true;
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let listener = AsyncMessageListener::concurrently(move |_messages, _queue| {
        let first = counter.fetch_add(1, Ordering::SeqCst) == 0;
        async move {
            if first {
                ConsumeConcurrentlyStatus::ReconsumeLater
            } else {
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        }
    });
    let orderly_group = unique("ctrace_og");
    let mut orderly_config = consumer_config(&live, &orderly_group);
    orderly_config.enable_msg_trace = true;
    let orderly_listener =
        AsyncMessageListener::orderly(|_messages, _queue| async { ConsumeOrderlyStatus::Success });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let admin = Admin::new(live.client()).unwrap();
    runtime.block_on(async {
        let consumer =
            AsyncPushConsumer::new(AsyncPushConsumerConfig::new(config), listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        consumer.start().await.unwrap();
        let orderly = AsyncPushConsumer::new(
            AsyncPushConsumerConfig::new(orderly_config),
            orderly_listener,
        )
        .unwrap();
        orderly.subscribe(&topic, "*").unwrap();
        orderly.start().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while calls.load(Ordering::SeqCst) < 2 {
            assert!(std::time::Instant::now() < deadline, "no redelivery");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        consumer.shutdown().await;
        orderly.shutdown().await;
    });
    let pairs = wait_pairs(&admin, &msg_id, &group, &key, 2);
    let (first_before, first_after) = &pairs[0];
    assert_eq!(first_before.retry_times, 0);
    assert!(!first_after.success);
    assert_eq!(first_after.context_code, 4);
    let (second_before, second_after) = &pairs[1];
    assert_eq!(second_before.retry_times, 1);
    assert!(second_after.success);
    assert_eq!(second_after.context_code, 0);
    assert_ne!(first_before.request_id, second_before.request_id);
    // The orderly group's one call (its pair carries its group).
    let orderly_pairs = wait_pairs(&admin, &msg_id, &orderly_group, &key, 1);
    assert!(orderly_pairs[0].1.success);
    assert_eq!(orderly_pairs[0].0.retry_times, 0);
    admin.shutdown();
}

// Proves the blocking push consumer traces its listener calls the same way: a panicking
// listener's call is recorded as an exception (code 2), the redelivery as a success.
#[test]
fn blocking_consumer_traces_exception_then_consumed() {
    let live = Live::start("client-ctrace-blocking", &[]);
    let topic = unique("CTraceB");
    let group = unique("ctrace_bg");
    let key = unique("bkey");
    let msg_id = send_one(&live, &topic, &key);
    let mut config = consumer_config(&live, &group);
    config.enable_msg_trace = true;
    let calls = Arc::new(AtomicUsize::new(0));
    let counter = calls.clone();
    let listener = MessageListener::concurrently(move |_messages, _queue| {
        assert!(
            counter.fetch_add(1, Ordering::SeqCst) > 0,
            "the first call fails"
        );
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let consumer = PushConsumer::new(PushConsumerConfig::new(config), listener).unwrap();
    consumer.subscribe(&topic, "*").unwrap();
    consumer.start().unwrap();
    wait_until("the redelivery", Duration::from_secs(60), || {
        calls.load(Ordering::SeqCst) >= 2
    });
    consumer.shutdown();
    let admin = Admin::new(live.client()).unwrap();
    let pairs = wait_pairs(&admin, &msg_id, &group, &key, 2);
    assert_eq!(pairs[0].0.retry_times, 0);
    assert!(!pairs[0].1.success);
    assert_eq!(pairs[0].1.context_code, 2);
    assert_eq!(pairs[1].0.retry_times, 1);
    assert!(pairs[1].1.success);
    assert_eq!(pairs[1].1.context_code, 0);
    admin.shutdown();
}

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
