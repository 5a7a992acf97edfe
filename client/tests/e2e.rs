//! End-to-end tests against a real Comet broker: each test starts its own
//! `comet-broker --standalone` (embedded name server) on free loopback ports with a temporary
//! store (`live`), and the broker is killed when the test ends. The broker binary is the
//! workspace's build (`cargo test --workspace` builds it; `cargo build -p comet-broker` before
//! `cargo test -p comet-client`), or `COMET_BROKER_BIN`.
//!
//! Every test uses fresh topic and group names (auto-created through `TBW102`).

mod live;

use std::collections::{BTreeMap, BTreeSet};
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use comet_client::{
    CompressionType, ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, LitePullConfig,
    LitePullConsumer, Message, MessageListener, MessageModel, Producer, ProducerConfig,
    PushConsumer, PushConsumerConfig,
};
use comet_test_support::{profile_dir, wait_until, ChildGuard};
use live::{consumer_config, distinct_bodies, recording_consumer, unique, Live, Seen};

fn producer(live: &Live, queues: i32) -> Producer {
    let mut config = ProducerConfig::new(&unique("e2e_pg"), live.client());
    config.default_topic_queue_nums = queues;
    let producer = Producer::new(config).unwrap();
    producer.start().unwrap();
    producer
}

// Proves every send mode stores its messages: sync, async, one-way, batch and ordered
// sends are all consumed back, each exactly as sent.
#[test]
fn all_send_modes_round_trip() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eModes");
    let producer = producer(&live, 4);
    for i in 0..10 {
        producer
            .send(Message::new(topic.as_str(), format!("sync-{i}")))
            .unwrap();
    }
    let futures: Vec<_> = (0..10)
        .map(|i| producer.send_async_future(Message::new(topic.as_str(), format!("async-{i}"))))
        .collect();
    for future in futures {
        future.unwrap().wait().unwrap();
    }
    for i in 0..10 {
        producer
            .send_oneway(Message::new(topic.as_str(), format!("oneway-{i}")))
            .unwrap();
    }
    let batch = (0..10)
        .map(|i| Message::new(topic.as_str(), format!("batch-{i}")))
        .collect();
    producer.send_batch(batch).unwrap();
    for i in 0..10 {
        let message = Message::new(topic.as_str(), format!("ordered-{i}"));
        producer.send_orderly(message, "key").unwrap();
    }
    let big = "z".repeat(10_000);
    producer
        .send(Message::new(topic.as_str(), big.clone()))
        .unwrap();
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("e2e_cg")), &topic);
    wait_until("51 messages", Duration::from_secs(60), || {
        distinct_bodies(&seen).len() >= 51
    });
    consumer.shutdown();
    producer.shutdown();
    let bodies = distinct_bodies(&seen);
    for kind in ["sync", "async", "oneway", "batch", "ordered"] {
        for i in 0..10 {
            assert!(
                bodies.contains(&format!("{kind}-{i}")),
                "{kind}-{i} missing"
            );
        }
    }
    assert!(
        bodies.contains(&big),
        "the compressed body came back inflated"
    );
}

// Proves bodies compressed with each algorithm Java's producer has (zlib, LZ4, Zstandard)
// are stored by the broker and consumed back as sent.
#[test]
fn each_compression_type_round_trips() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eCompress");
    let mut sent = BTreeSet::new();
    for (kind, level) in [
        (CompressionType::Zlib, 5),
        (CompressionType::Lz4, 0),
        (CompressionType::Zstd, 5),
    ] {
        let mut config = ProducerConfig::new(&unique("e2e_pg"), live.client());
        config.compress_type = kind;
        config.compress_level = level;
        let producer = Producer::new(config).unwrap();
        producer.start().unwrap();
        let body = format!("{kind:?} ").repeat(2_000);
        producer
            .send(Message::new(topic.as_str(), body.clone()))
            .unwrap();
        sent.insert(body);
        producer.shutdown();
    }
    let (consumer, seen) = recording_consumer(consumer_config(&live, &unique("e2e_cg")), &topic);
    wait_until("3 compressed messages", Duration::from_secs(60), || {
        distinct_bodies(&seen).len() >= 3
    });
    consumer.shutdown();
    assert_eq!(distinct_bodies(&seen), sent);
}

// Proves ordered messages stay in order per sharding key through a consumer restart: a
// second orderly consumer of the group continues where the first stopped.
#[test]
fn ordered_per_key_through_a_consumer_restart() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eOrder");
    let group = unique("e2e_order");
    let producer = producer(&live, 4);
    let send = |range: std::ops::Range<usize>| {
        for i in range {
            let key = format!("k{}", i % 4);
            let message = Message::new(topic.as_str(), format!("{key}:{i}"));
            producer.send_orderly(message, &key).unwrap();
        }
    };
    send(0..40);
    let per_key: Arc<Mutex<BTreeMap<String, Vec<usize>>>> = Arc::default();
    let start = || {
        let sink = per_key.clone();
        let listener = MessageListener::orderly(move |messages, _| {
            let mut sink = sink.lock().unwrap();
            for message in messages {
                let body = String::from_utf8_lossy(&message.body).into_owned();
                let (key, index) = body.split_once(':').unwrap();
                sink.entry(key.to_owned())
                    .or_default()
                    .push(index.parse().unwrap());
            }
            ConsumeOrderlyStatus::Success
        });
        let config = PushConsumerConfig::new(consumer_config(&live, &group));
        let consumer = PushConsumer::new(config, listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        consumer.start().unwrap();
        consumer
    };
    let count = |map: &Arc<Mutex<BTreeMap<String, Vec<usize>>>>| {
        map.lock().unwrap().values().map(Vec::len).sum::<usize>()
    };
    let first = start();
    wait_until("the first 40", Duration::from_secs(60), || {
        count(&per_key) >= 40
    });
    first.shutdown();
    send(40..80);
    let second = start();
    wait_until("all 80", Duration::from_secs(60), || count(&per_key) >= 80);
    second.shutdown();
    producer.shutdown();
    for (key, indexes) in per_key.lock().unwrap().iter() {
        assert!(
            indexes.windows(2).all(|w| w[0] < w[1]),
            "{key} out of order: {indexes:?}"
        );
        assert_eq!(indexes.len(), 20, "{key}: {indexes:?}");
    }
}

// Proves three members of one group split 8 queues 3/3/2 and the two survivors take over a
// stopped member's queues.
#[test]
fn three_members_split_evenly_and_take_over() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eSplit");
    let group = unique("e2e_split");
    let producer = producer(&live, 8);
    producer
        .send(Message::new(topic.as_str(), "create"))
        .unwrap();
    let members: Vec<(PushConsumer, Seen)> = (0..3)
        .map(|_| recording_consumer(consumer_config(&live, &group), &topic))
        .collect();
    let owned = |members: &[(PushConsumer, Seen)]| -> Vec<usize> {
        let mut sizes: Vec<usize> = members
            .iter()
            .map(|(c, _)| {
                c.assigned_queues()
                    .iter()
                    .filter(|q| q.topic == topic)
                    .count()
            })
            .collect();
        sizes.sort_unstable();
        sizes
    };
    wait_until("a 2/3/3 split", Duration::from_secs(60), || {
        owned(&members) == [2, 3, 3]
    });
    let mut members = members;
    let (stopped, _) = members.remove(0);
    stopped.shutdown();
    wait_until("a 4/4 take-over", Duration::from_secs(30), || {
        owned(&members) == [4, 4]
    });
    for i in 0..40 {
        producer
            .send(Message::new(topic.as_str(), format!("after-{i}")))
            .unwrap();
    }
    wait_until(
        "every message after the take-over",
        Duration::from_secs(60),
        || {
            let union: BTreeSet<String> = members
                .iter()
                .flat_map(|(_, s)| distinct_bodies(s))
                .collect();
            (0..40).all(|i| union.contains(&format!("after-{i}")))
        },
    );
    for (consumer, _) in members {
        consumer.shutdown();
    }
    producer.shutdown();
}

// Proves broadcasting delivers every message to every member of the group.
#[test]
fn broadcasting_reaches_every_member() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eBroadcast");
    let group = unique("e2e_broadcast");
    let producer = producer(&live, 4);
    producer
        .send(Message::new(topic.as_str(), "create"))
        .unwrap();
    let offsets = comet_test_support::TempDir::new("client-e2e-offsets");
    let directory = offsets.path().to_path_buf();
    let members: Vec<(PushConsumer, Seen)> = (0..2)
        .map(|index| {
            let mut config = consumer_config(&live, &group);
            config.message_model = MessageModel::Broadcasting;
            config.local_offset_dir = directory.clone();
            config.client.instance_name = format!("member{index}");
            recording_consumer(config, &topic)
        })
        .collect();
    for i in 0..20 {
        producer
            .send(Message::new(topic.as_str(), format!("b-{i}")))
            .unwrap();
    }
    for (_, seen) in &members {
        wait_until(
            "20 messages at each member",
            Duration::from_secs(60),
            || {
                let bodies = distinct_bodies(seen);
                (0..20).all(|i| bodies.contains(&format!("b-{i}")))
            },
        );
    }
    for (consumer, _) in members {
        consumer.shutdown();
    }
    producer.shutdown();
}

// Proves at-least-once across a consumer crash: a consumer process killed with SIGKILL in
// the middle of the stream loses nothing; the next member of the group consumes the rest
// (duplicates allowed, only around the crash).
#[test]
fn nothing_lost_across_a_consumer_crash() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eCrash");
    let group = unique("e2e_crash");
    let producer = producer(&live, 4);
    for i in 0..200 {
        producer
            .send(Message::new(topic.as_str(), format!("c-{i}")))
            .unwrap();
    }
    let mut command = Command::new(profile_dir().join("examples").join("push_consumer"));
    command
        .args([
            "--namesrv",
            &live.namesrv(),
            "--topic",
            &topic,
            "--group",
            &group,
            "--seconds",
            "60",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = ChildGuard::spawn(
        "the push_consumer example (built by cargo test)",
        &mut command,
    );
    let mut before_crash = BTreeSet::new();
    let mut lines = BufReader::new(child.child().stdout.take().unwrap()).lines();
    for line in lines.by_ref().map_while(Result::ok) {
        if let Some(body) = line.split("body=").nth(1) {
            before_crash.insert(body.to_owned());
        }
        if before_crash.len() >= 60 {
            break;
        }
    }
    child.kill();
    // What the process consumed (and may have committed) after the 60th line is still in
    // the pipe; it counts as consumed before the crash.
    for line in lines.map_while(Result::ok) {
        if let Some(body) = line.split("body=").nth(1) {
            before_crash.insert(body.to_owned());
        }
    }
    let (consumer, seen) = recording_consumer(consumer_config(&live, &group), &topic);
    wait_until("the rest after the crash", Duration::from_secs(90), || {
        let mut all = distinct_bodies(&seen);
        all.extend(before_crash.iter().cloned());
        (0..200).all(|i| all.contains(&format!("c-{i}")))
    });
    consumer.shutdown();
    producer.shutdown();
}

// Proves a failed message comes back: the listener's ReconsumeLater sends it back to the
// broker, and it is redelivered through %RETRY%<group> (about 10 s later, delay level 3)
// with its original topic and id, and a reconsume count of 1.
#[test]
fn failed_message_is_redelivered_through_the_retry_topic() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eRetry");
    let group = unique("e2e_retry");
    let producer = producer(&live, 4);
    let sent = producer
        .send(Message::new(topic.as_str(), "fail-once"))
        .unwrap();
    let deliveries: Arc<Mutex<Vec<(String, String, i32)>>> = Arc::default();
    let sink = deliveries.clone();
    let listener = MessageListener::concurrently(move |messages, _| {
        let mut sink = sink.lock().unwrap();
        let first = sink.is_empty();
        for message in messages {
            let id = message.client_msg_id().to_owned();
            sink.push((message.topic.clone(), id, message.reconsume_times));
        }
        if first {
            ConsumeConcurrentlyStatus::ReconsumeLater
        } else {
            ConsumeConcurrentlyStatus::ConsumeSuccess
        }
    });
    let config = PushConsumerConfig::new(consumer_config(&live, &group));
    let consumer = PushConsumer::new(config, listener).unwrap();
    consumer.subscribe(&topic, "*").unwrap();
    consumer.start().unwrap();
    wait_until("the redelivery", Duration::from_secs(60), || {
        deliveries.lock().unwrap().len() >= 2
    });
    consumer.shutdown();
    producer.shutdown();
    let deliveries = deliveries.lock().unwrap();
    assert_eq!(deliveries[0], (topic.clone(), sent.msg_id.clone(), 0));
    assert_eq!(deliveries[1], (topic, sent.msg_id.clone(), 1));
}

// Proves the admin calls against a real broker: cluster info and topic list include the new
// topic, a message is found by key and by offset id, consume stats show the group's lag
// dropping to zero after consumption, and a reset by timestamp moves the offsets back.
#[test]
fn admin_round_trip() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eAdmin");
    let group = unique("e2e_admin");
    let producer = producer(&live, 4);
    let key = unique("order");
    let message = Message::new(topic.as_str(), "find me").with_keys([key.as_str()]);
    let sent = producer.send(message).unwrap();
    for i in 0..9 {
        producer
            .send(Message::new(topic.as_str(), format!("a-{i}")))
            .unwrap();
    }
    let admin = comet_client::Admin::new(live.client()).unwrap();
    assert!(!admin.cluster_masters(None).unwrap().is_empty());
    wait_until("the topic in the list", Duration::from_secs(30), || {
        admin.list_topics().unwrap().topic_list.contains(&topic)
    });
    let viewed = admin.view_message(&sent.offset_msg_id).unwrap();
    assert_eq!(&viewed.body[..], b"find me");
    let now = now_ms();
    wait_until("the key in the index", Duration::from_secs(30), || {
        let found = admin
            .query_messages_by_key(&topic, &key, 32, 0, now + 60_000)
            .unwrap();
        found.iter().any(|m| m.client_msg_id() == sent.msg_id)
    });
    let (consumer, seen) = recording_consumer(consumer_config(&live, &group), &topic);
    wait_until("10 messages", Duration::from_secs(60), || {
        distinct_bodies(&seen).len() >= 10
    });
    consumer.shutdown();
    wait_until("zero lag", Duration::from_secs(30), || {
        admin.consumer_lag(&group, &topic).unwrap() == 0
    });
    let stats = admin.consume_stats(&group, &topic).unwrap();
    let total: i64 = stats.offset_table.values().map(|w| w.broker_offset).sum();
    assert_eq!(total, 10);
    let reset = admin
        .reset_offset_by_timestamp(&group, &topic, 0, true)
        .unwrap();
    assert!(reset.values().all(|offset| *offset == 0), "{reset:?}");
    wait_until("the lag back at 10", Duration::from_secs(30), || {
        admin.consumer_lag(&group, &topic).unwrap() == 10
    });
    admin.shutdown();
    producer.shutdown();
}

// Proves a producer keeps sending through a broker restart and loses nothing it was told
// was sent: sends run while the test's broker is stopped (SIGTERM) and started again on the
// same store and ports; every acknowledged message is consumed afterwards, and sends succeed
// again once the broker is back.
#[test]
fn producer_survives_a_broker_restart() {
    let mut live = Live::start("client-e2e-restart", &[]);
    let topic = unique("E2eRestart");
    let producer = producer(&live, 4);
    producer
        .send(Message::new(topic.as_str(), "create"))
        .unwrap();
    let mut acknowledged = BTreeSet::new();
    let mut failures = 0;
    let mut index = 0;
    let broker = &mut live.broker;
    thread::scope(|scope| {
        // The restart's place in the send stream (1 s in, down for 0.5 s) is the test's
        // input, not a wait.
        let restarter = scope.spawn(move || {
            thread::sleep(Duration::from_secs(1));
            broker.stop();
            thread::sleep(Duration::from_millis(500));
            broker.restart();
        });
        while !restarter.is_finished() || acknowledged.len() < 50 {
            let body = format!("r-{index}");
            index += 1;
            match producer.send(Message::new(topic.as_str(), body.clone())) {
                Ok(_) => {
                    acknowledged.insert(body);
                }
                Err(_) => failures += 1,
            }
            thread::sleep(Duration::from_millis(20));
            assert!(index < 20_000, "no progress after the restart");
        }
    });
    live.wait_registered();
    let after = producer
        .send(Message::new(topic.as_str(), "after"))
        .unwrap();
    assert_eq!(after.status, comet_client::SendStatus::SendOk);
    eprintln!(
        "sent {index}, acknowledged {}, failed {failures}",
        acknowledged.len()
    );
    let (consumer, seen) =
        recording_consumer(consumer_config(&live, &unique("e2e_restart")), &topic);
    wait_until(
        "every acknowledged message",
        Duration::from_secs(50),
        || {
            let bodies = distinct_bodies(&seen);
            acknowledged.iter().all(|body| bodies.contains(body))
        },
    );
    consumer.shutdown();
    producer.shutdown();
}

fn now_ms() -> i64 {
    let elapsed = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    i64::try_from(elapsed.as_millis()).unwrap()
}

// Proves a lite pull consumer seeking every queue to a timestamp (SEARCH_OFFSET_BY_TIMESTAMP
// on a real broker) polls exactly the messages stored after that time. (A push consumer's
// CONSUME_FROM_TIMESTAMP cannot be shown this way: for a new group on a young topic the
// broker answers offset 0, as RocketMQ's does, so it starts from the beginning.)
#[test]
fn lite_pull_seeks_to_a_timestamp() {
    let live = Live::start("client-e2e", &[]);
    let topic = unique("E2eTime");
    let producer = producer(&live, 2);
    let send = |kind: &str| {
        for i in 0..6 {
            let message = Message::new(topic.as_str(), format!("{kind}-{i}"));
            producer.send(message).unwrap();
        }
    };
    send("before");
    // Store times well apart on either side of the boundary are the input, not a wait.
    thread::sleep(Duration::from_millis(300));
    let boundary_ms = now_ms();
    thread::sleep(Duration::from_millis(300));
    send("after");
    let expected: BTreeSet<String> = (0..6).map(|i| format!("after-{i}")).collect();

    let config = LitePullConfig::new(consumer_config(&live, &unique("e2e_seek")));
    let lite = LitePullConsumer::new(config).unwrap();
    // The auto-created topic reaches the name server shortly after its first send.
    let mut queues = Vec::new();
    wait_until("the topic's route", Duration::from_secs(30), || {
        queues = lite.fetch_message_queues(&topic).unwrap_or_default();
        !queues.is_empty()
    });
    lite.assign(queues.clone());
    lite.start().unwrap();
    wait_until("the assignment", Duration::from_secs(20), || {
        lite.assignment().len() == queues.len()
    });
    for queue in &queues {
        lite.seek_to_timestamp(queue, boundary_ms).unwrap();
    }
    let mut polled = BTreeSet::new();
    wait_until(
        "the polled messages after the boundary",
        Duration::from_secs(40),
        || {
            for message in lite.poll(Duration::from_millis(100)) {
                polled.insert(String::from_utf8_lossy(&message.body).into_owned());
            }
            polled.len() >= expected.len()
        },
    );
    lite.shutdown();
    producer.shutdown();
    assert_eq!(polled, expected);
}
