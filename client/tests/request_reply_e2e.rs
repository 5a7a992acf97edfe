//! Request-reply end to end against a real Comet broker (`live`): `Producer::request` sends a
//! request and waits; a push consumer answers with `Message::reply_to` through its own
//! producer; the broker pushes the reply to the requester, whose request returns it. A request
//! nobody answers fails with `NoReply` within its timeout.

mod live;

use std::time::{Duration, Instant};

use comet_client::{
    ClientError, ConsumeConcurrentlyStatus, Message, MessageListener, Producer, ProducerConfig,
    PushConsumer, PushConsumerConfig,
};
use comet_proto::properties::names;
use live::{consumer_config, unique, Live};

fn started_producer(live: &Live) -> Producer {
    let producer = Producer::new(ProducerConfig::new(&unique("rr_pg"), live.client())).unwrap();
    producer.start().unwrap();
    producer
}

/// A consumer of `topic` that answers every request with "reply:" and the request's body.
fn responder(live: &Live, topic: &str, replier: Producer) -> PushConsumer {
    let listener = MessageListener::concurrently(move |messages, _| {
        for message in messages {
            let body = format!("reply:{}", String::from_utf8_lossy(&message.body));
            let Ok(reply) = Message::reply_to(message, body) else {
                return ConsumeConcurrentlyStatus::ReconsumeLater;
            };
            if replier.send(reply).is_err() {
                return ConsumeConcurrentlyStatus::ReconsumeLater;
            }
        }
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let config = PushConsumerConfig::new(consumer_config(live, &unique("rr_cg")));
    let consumer = PushConsumer::new(config, listener).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    consumer.start().unwrap();
    consumer
}

// Proves each request returns the reply to itself (matched by correlation id, carried back
// from the reply topic), including a compressed one, and a request without a responder
// fails with NoReply after its timeout.
#[test]
fn requests_get_their_replies() {
    let live = Live::start("client-request-reply", &[]);
    let topic = unique("RequestTopic");
    let requester = started_producer(&live);
    let consumer = responder(&live, &topic, started_producer(&live));
    let large = "x".repeat(10_000);
    for (index, asked) in ["first", "second", large.as_str()].into_iter().enumerate() {
        // The first request also waits for the responder's first rebalance.
        let timeout = Duration::from_secs(if index == 0 { 60 } else { 10 });
        let reply = requester
            .request(Message::new(topic.as_str(), asked.to_owned()), timeout)
            .unwrap();
        assert_eq!(reply.body, format!("reply:{asked}").into_bytes());
        assert_eq!(reply.topic, "DefaultCluster_REPLY_TOPIC");
        assert_eq!(reply.property(names::MSG_TYPE), Some("reply"));
    }
    consumer.shutdown();

    let silent_topic = unique("SilentTopic");
    let started = Instant::now();
    let message = Message::new(silent_topic.as_str(), "anyone?");
    let outcome = requester.request(message, Duration::from_millis(1500));
    assert!(
        matches!(outcome, Err(ClientError::NoReply { .. })),
        "{outcome:?}"
    );
    assert!(started.elapsed() < Duration::from_secs(12));
    requester.shutdown();
}
