//! Namespaces end to end (Java's `ClientConfig.namespace`): clients with a namespace name
//! topics and groups as the application knows them, the broker holds them as
//! `<namespace>%<name>`, and clients outside the namespace do not see them.

mod live;

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::{
    Admin, AsyncMessageListener, AsyncProducer, AsyncPushConsumer, AsyncPushConsumerConfig,
    ClientConfig, ConsumeConcurrentlyStatus, LitePullConfig, LitePullConsumer, Message,
    MessageListener, Producer, ProducerConfig, PushConsumer, PushConsumerConfig,
};
use comet_test_support::wait_until;
use live::{consumer_config, unique, Live};

/// What a listener saw: (message topic, queue topic, body).
type Seen = Arc<Mutex<Vec<(String, String, String)>>>;

fn in_namespace(mut client: ClientConfig, namespace: &str) -> ClientConfig {
    client.namespace = Some(namespace.to_owned());
    client
}

/// Checks the topics `queues` show: `topic`, and `group`'s retry topic (once the broker
/// created it), both without the namespace.
fn check_shown(queues: &[comet_client::MessageQueue], topic: &str, group: &str) {
    let topics: BTreeSet<String> = queues.iter().map(|queue| queue.topic.clone()).collect();
    assert!(topics.contains(topic), "{topics:?}");
    let retry = format!("%RETRY%{group}");
    assert!(
        topics.iter().all(|shown| shown == topic || *shown == retry),
        "{topics:?}"
    );
}

fn bodies(seen: &Seen) -> BTreeSet<String> {
    seen.lock()
        .unwrap()
        .iter()
        .map(|(_, _, body)| body.clone())
        .collect()
}

// Proves a producer and consumers with namespace "ns1" exchange messages under the names
// the application gave (send results, delivered messages and their queues show "T"), while
// the broker holds topic "ns1%T" and group "ns1%G" and no "T" (checked with the admin API,
// which names them as the broker does, like Java's DefaultMQAdminExt); a consumer of the
// same topic and group without the namespace receives none of them; an async producer and
// consumer and a lite pull consumer in the namespace behave the same.
#[test]
fn namespaced_clients_exchange_messages_under_wrapped_names() {
    let live = Live::start("client-namespace", &[]);
    let topic = unique("NsT");
    let group = unique("ns_cg");
    let wrapped_topic = format!("ns1%{topic}");
    let wrapped_group = format!("ns1%{group}");

    let mut config = ProducerConfig::new(&unique("ns_pg"), in_namespace(live.client(), "ns1"));
    config.enable_msg_trace = false;
    let producer = Producer::new(config).unwrap();
    producer.start().unwrap();
    let mut sent = BTreeSet::new();
    for index in 0..5 {
        let body = format!("ns body {index}");
        let result = producer
            .send(Message::new(topic.as_str(), body.clone()))
            .unwrap();
        assert_eq!(
            result.queue.topic, topic,
            "the send result shows the topic unwrapped"
        );
        sent.insert(body);
    }
    let queues = producer.fetch_publish_queues(&topic).unwrap();
    assert!(!queues.is_empty() && queues.iter().all(|queue| queue.topic == topic));
    producer.shutdown();

    let record = |seen: &Seen| {
        let sink = seen.clone();
        MessageListener::concurrently(move |messages, queue| {
            let mut sink = sink.lock().unwrap();
            for message in messages {
                let body = String::from_utf8_lossy(&message.body).into_owned();
                sink.push((message.topic.clone(), queue.topic.clone(), body));
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        })
    };
    let seen: Seen = Arc::default();
    let mut namespaced = consumer_config(&live, &group);
    namespaced.client = in_namespace(live.client(), "ns1");
    let consumer = PushConsumer::new(PushConsumerConfig::new(namespaced), record(&seen)).unwrap();
    consumer.subscribe(&topic, "*").unwrap();
    consumer.start().unwrap();

    let outside: Seen = Arc::default();
    let outsider = PushConsumer::new(
        PushConsumerConfig::new(consumer_config(&live, &group)),
        record(&outside),
    )
    .unwrap();
    outsider.subscribe(&topic, "*").unwrap();
    outsider.start().unwrap();

    wait_until(
        "the namespaced consumer's messages",
        Duration::from_secs(60),
        || bodies(&seen) == sent,
    );
    for (message_topic, queue_topic, _) in seen.lock().unwrap().iter() {
        assert_eq!((message_topic, queue_topic), (&topic, &topic));
    }
    check_shown(&consumer.assigned_queues(), &topic, &group);

    let admin = Admin::new(live.client()).unwrap();
    assert!(admin
        .topic_route(&wrapped_topic)
        .is_ok_and(|route| !route.queue_datas.is_empty()));
    assert!(
        admin.topic_route(&topic).is_err(),
        "no topic without the namespace"
    );
    wait_until(
        "the wrapped group's connection",
        Duration::from_secs(30),
        || {
            admin
                .consumer_connections(&wrapped_group, &wrapped_topic)
                .is_ok_and(|connections| !connections.connection_set.is_empty())
        },
    );
    let stats = admin.consume_stats(&wrapped_group, &wrapped_topic).unwrap();
    assert!(!stats.offset_table.is_empty());

    // The async clients, in the namespace, with another group.
    let async_group = unique("ns_acg");
    let async_seen: Seen = Arc::default();
    let sink = async_seen.clone();
    let listener = AsyncMessageListener::concurrently(move |messages, queue| {
        let sink = sink.clone();
        async move {
            let mut sink = sink.lock().unwrap();
            for message in messages {
                let body = String::from_utf8_lossy(&message.body).into_owned();
                sink.push((message.topic.clone(), queue.topic.clone(), body));
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let producer = AsyncProducer::new(ProducerConfig::new(
            &unique("ns_apg"),
            in_namespace(live.client(), "ns1"),
        ))
        .unwrap();
        let result = producer
            .send(Message::new(topic.as_str(), "async body"))
            .await
            .unwrap();
        assert_eq!(result.queue.topic, topic);
        producer.shutdown();
        let mut config = consumer_config(&live, &async_group);
        config.client = in_namespace(live.client(), "ns1");
        let consumer =
            AsyncPushConsumer::new(AsyncPushConsumerConfig::new(config), listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        consumer.start().await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(60);
        while bodies(&async_seen).len() < sent.len() + 1 {
            assert!(
                std::time::Instant::now() < deadline,
                "the async consumer's messages"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        check_shown(&consumer.assigned_queues(), &topic, &async_group);
        // Registered under the wrapped group (the admin call blocks this thread only).
        let connections = admin.consumer_connections(&format!("ns1%{async_group}"), &wrapped_topic);
        assert!(connections.is_ok_and(|connections| !connections.connection_set.is_empty()));
        consumer.shutdown().await;
    });
    for (message_topic, queue_topic, _) in async_seen.lock().unwrap().iter() {
        assert_eq!((message_topic, queue_topic), (&topic, &topic));
    }

    // A lite pull consumer in the namespace: polled messages, its assignment and a seek use
    // the names without it.
    let mut lite_config = consumer_config(&live, &unique("ns_lcg"));
    lite_config.client = in_namespace(live.client(), "ns1");
    let lite = LitePullConsumer::new(LitePullConfig::new(lite_config)).unwrap();
    lite.subscribe(&topic, "*").unwrap();
    lite.start().unwrap();
    let mut polled = BTreeSet::new();
    wait_until(
        "the lite consumer's messages",
        Duration::from_secs(60),
        || {
            for message in lite.poll(Duration::from_millis(200)) {
                assert_eq!(message.topic, topic);
                polled.insert(String::from_utf8_lossy(&message.body).into_owned());
            }
            polled.len() > sent.len()
        },
    );
    let assignment = lite.assignment();
    assert!(!assignment.is_empty() && assignment.iter().all(|queue| queue.topic == topic));
    lite.seek_to_begin(&assignment[0]).unwrap();
    lite.shutdown();

    // The consumer outside the namespace had all this time and saw nothing.
    assert!(
        outside.lock().unwrap().is_empty(),
        "{:?}",
        outside.lock().unwrap()
    );
    consumer.shutdown();
    outsider.shutdown();
    admin.shutdown();
}
