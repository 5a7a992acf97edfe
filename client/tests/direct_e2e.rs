//! The client's answers to the admin requests a broker relays to it, end to end against a
//! real Comet broker (`live`): CONSUME_MESSAGE_DIRECTLY runs the push consumer's listener on
//! the stored message and answers ConsumeMessageDirectlyResult as the Java client does, and
//! GET_CONSUMER_STATUS_FROM_CLIENT answers the group's offsets. The admin side is a bare
//! transport sending the admin requests to the broker.

mod live;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::remoting::{RemotingClient, TransportConfig};
use comet_client::{
    ConsumeConcurrentlyStatus, Message, MessageListener, Producer, ProducerConfig, PushConsumer,
    PushConsumerConfig,
};
use comet_proto::body::{
    CMResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo, GetConsumerStatusBody, JsonBody,
    PROP_CONSUMER_START_TIMESTAMP, PROP_CONSUME_TYPE,
};
use comet_proto::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::wait_until;
use live::{consumer_config, unique, Live};

/// What the listener saw: (topic, body, broker name of the queue it was given).
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

/// A listener whose verdict depends on the body: "later" asks to retry, "boom" panics.
fn judging_listener(seen: Seen) -> MessageListener {
    MessageListener::concurrently(move |messages, queue| {
        let message = &messages[0];
        let body = String::from_utf8_lossy(&message.body).into_owned();
        let entry = (
            message.topic.clone(),
            body.clone(),
            queue.broker_name.clone(),
        );
        seen.lock().unwrap().push(entry);
        match body.as_str() {
            "later" => ConsumeConcurrentlyStatus::ReconsumeLater,
            "boom" => panic!("boom from the listener"),
            _ => ConsumeConcurrentlyStatus::ConsumeSuccess,
        }
    })
}

fn consume_directly(
    admin: &RemotingClient,
    live: &Live,
    group: &str,
    client_id: &str,
    msg_id: &str,
) -> RemotingCommand {
    let header = ConsumeMessageDirectlyResultRequestHeader {
        consumer_group: group.into(),
        client_id: Some(client_id.into()),
        msg_id: Some(msg_id.into()),
        broker_name: None,
        topic: None,
        topic_sys_flag: None,
        group_sys_flag: None,
    };
    let request =
        RemotingCommand::request(RequestCode::CONSUME_MESSAGE_DIRECTLY, 0).with_header(&header);
    let addr = live.broker.broker_addr.to_string();
    admin
        .invoke(&addr, request, Duration::from_secs(15))
        .unwrap()
}

// Proves a push consumer answers CONSUME_MESSAGE_DIRECTLY by running its listener on the
// message the broker read (its topic, body and the broker's name reach the listener) and
// reporting the verdict: CR_SUCCESS, CR_LATER for ReconsumeLater, CR_THROW_EXCEPTION with
// the panic's text for a panicking listener, order false and autoCommit true as the Java
// concurrent service; the listener runs even though the consumer's subscription does not
// match the message, as in Java. It also answers GET_CONSUMER_STATUS_FROM_CLIENT, so the
// broker's INVOKE_BROKER_TO_GET_CONSUMER_STATUS lists it, and GET_CONSUMER_RUNNING_INFO in
// the shape Java's admin tools read.
#[test]
fn push_consumer_consumes_a_message_directly() {
    let live = Live::start("client-direct", &[]);
    let topic = unique("DirectTopic");
    let group = unique("direct_cg");
    let producer = Producer::new(ProducerConfig::new(&unique("direct_pg"), live.client())).unwrap();
    producer.start().unwrap();
    let mut msg_ids = Vec::new();
    for body in ["fine", "later", "boom"] {
        let sent = producer.send(Message::new(topic.as_str(), body)).unwrap();
        msg_ids.push(sent.offset_msg_id);
    }
    let seen: Seen = Arc::default();
    let config = PushConsumerConfig::new(consumer_config(&live, &group));
    let consumer = PushConsumer::new(config, judging_listener(seen.clone())).unwrap();
    // A tag none of the messages has: the consumer knows the topic's broker (and so
    // heartbeats to it) but never pulls these messages itself.
    consumer.subscribe(&topic, "NoSuchTag").unwrap();
    consumer.start().unwrap();
    let admin = RemotingClient::new(TransportConfig::default());
    let client_id = consumer.client_id().to_owned();
    // The consumer is online once its heartbeat reached the broker.
    let mut first = None;
    wait_until(
        "the consumer's registration",
        Duration::from_secs(30),
        || {
            let response = consume_directly(&admin, &live, &group, &client_id, &msg_ids[0]);
            let online = !response
                .remark
                .as_deref()
                .unwrap_or("")
                .contains("not online");
            first = Some(response);
            online
        },
    );
    let mut results = vec![first.unwrap()];
    for msg_id in &msg_ids[1..] {
        results.push(consume_directly(&admin, &live, &group, &client_id, msg_id));
    }
    let results: Vec<ConsumeMessageDirectlyResult> = results
        .iter()
        .map(|response| {
            assert_eq!(
                response.response_code(),
                ResponseCode::SUCCESS,
                "{:?}",
                response.remark
            );
            ConsumeMessageDirectlyResult::decode(&response.body).unwrap()
        })
        .collect();
    let verdicts: Vec<Option<CMResult>> = results.iter().map(|r| r.consume_result).collect();
    assert_eq!(
        verdicts,
        vec![
            Some(CMResult::CR_SUCCESS),
            Some(CMResult::CR_LATER),
            Some(CMResult::CR_THROW_EXCEPTION)
        ]
    );
    assert!(results
        .iter()
        .all(|r| !r.order && r.auto_commit && r.spent_time_mills >= 0));
    assert_eq!(results[0].remark, None);
    assert!(results[2]
        .remark
        .as_deref()
        .unwrap()
        .contains("boom from the listener"));
    let seen = seen.lock().unwrap().clone();
    let bodies: Vec<&str> = seen.iter().map(|(_, body, _)| body.as_str()).collect();
    assert_eq!(bodies, vec!["fine", "later", "boom"]);
    assert!(seen
        .iter()
        .all(|(seen_topic, _, broker)| *seen_topic == topic && !broker.is_empty()));

    let header = GetConsumerStatusRequestHeader {
        topic: topic.clone(),
        group: group.clone(),
        client_addr: None,
    };
    let request = RemotingCommand::request(RequestCode::INVOKE_BROKER_TO_GET_CONSUMER_STATUS, 0)
        .with_header(&header);
    let addr = live.broker.broker_addr.to_string();
    let response = admin
        .invoke(&addr, request, Duration::from_secs(15))
        .unwrap();
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    let status = GetConsumerStatusBody::decode(&response.body).unwrap();
    assert!(status.consumer_table.contains_key(&client_id), "{status:?}");
    assert_running_info(&admin, &live, &group, &client_id, &topic);
    consumer.shutdown();
    producer.shutdown();
    admin.shutdown();
}

/// GET_CONSUMER_RUNNING_INFO through the broker: the Java shape admin tools read (consume
/// type, start time, subscriptions, and the queue table once the consumer holds queues).
fn assert_running_info(
    admin: &RemotingClient,
    live: &Live,
    group: &str,
    client_id: &str,
    topic: &str,
) {
    let header = GetConsumerRunningInfoRequestHeader {
        consumer_group: group.into(),
        client_id: client_id.into(),
        jstack_enable: Some(false),
    };
    let addr = live.broker.broker_addr.to_string();
    let mut info = ConsumerRunningInfo::default();
    wait_until(
        "running info listing the consumer's queues",
        Duration::from_secs(20),
        || {
            let request = RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO, 0)
                .with_header(&header);
            let response = admin
                .invoke(&addr, request, Duration::from_secs(15))
                .unwrap();
            assert_eq!(
                response.response_code(),
                ResponseCode::SUCCESS,
                "{:?}",
                response.remark
            );
            info = ConsumerRunningInfo::decode(&response.body).unwrap();
            info.mq_table.keys().any(|queue| queue.topic == topic)
        },
    );
    assert_eq!(info.properties[PROP_CONSUME_TYPE], "CONSUME_PASSIVELY");
    let started = info.properties[PROP_CONSUMER_START_TIMESTAMP]
        .as_str()
        .unwrap();
    assert!(started.parse::<i64>().unwrap() > 0);
    assert!(info
        .subscription_set
        .iter()
        .any(|subscription| subscription.topic == topic && subscription.sub_string == "NoSuchTag"));
}
