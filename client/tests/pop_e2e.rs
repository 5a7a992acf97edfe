//! The pop consumer (`AsyncPopConsumer`, and `PopConsumer` its blocking face) against a real
//! Comet broker (`live`: a standalone `comet-broker` on free loopback ports, killed when the
//! test ends). Build the broker first (`cargo build -p comet-broker`) or set
//! `COMET_BROKER_BIN`.
//!
//! Absence ("not delivered again") can only be shown by looking for a bounded time: those
//! checks keep receiving for a window in which the same message, unacked, would have come
//! back (the redelivery test shows how soon it does).

mod live;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::{Duration, Instant};

use comet_client::admin::TopicSpec;
use comet_client::{
    Admin, AsyncPopConsumer, Message, PopConsumer, PopConsumerConfig, PopInitMode, PopMessage,
    Producer, ProducerConfig,
};
use comet_proto::headers::{PollingInfoRequestHeader, PollingInfoResponseHeader};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode};
use comet_test_support::{
    broker_binary, free_port, wait_for_port, wait_until, ChildGuard, TempDir,
    TEST_COMMIT_LOG_FILE_BYTES,
};
use live::{runtime, unique, Live};

/// Longest any awaited step of these tests may take before the test fails.
const STEP_LIMIT: Duration = Duration::from_secs(60);
/// Invisible time of the messages these tests leave unacked.
const SHORT_INVISIBLE: Duration = Duration::from_secs(2);
/// How long after its invisible time an unacked message must be back (the broker's revive
/// scan runs every second; this leaves room for a loaded machine).
const REVIVE_SLACK: Duration = Duration::from_secs(20);
/// Invisible time long enough that nothing comes back within a test.
const LONG_INVISIBLE: Duration = Duration::from_secs(300);

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    live::within(what, STEP_LIMIT, future).await
}

/// How often [`until`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` every [`POLL_INTERVAL`] until it holds; fails after [`STEP_LIMIT`] naming
/// `what`.
async fn until<F, Fut>(what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    within(what, async {
        while !check().await {
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    })
    .await;
}

/// A broker with a fresh topic of `queues` queues, routable.
fn setup(name: &str, queues: i32) -> (Live, String) {
    let live = Live::start(name, &[]);
    let topic = live.create_topic("pop_topic", queues);
    (live, topic)
}

fn config(live: &Live, group: &str, poll_time: Duration) -> PopConsumerConfig {
    let mut config = PopConsumerConfig::new(group, live.client());
    config.init_mode = PopInitMode::First;
    config.poll_time = poll_time;
    config
}

fn consumer(live: &Live, group: &str, topic: &str) -> AsyncPopConsumer {
    let consumer = AsyncPopConsumer::new(config(live, group, Duration::from_secs(1))).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    consumer
}

/// Sends `bodies` to `topic` and returns them.
fn send(live: &Live, topic: &str, bodies: &[String]) -> Vec<String> {
    let producer = Producer::new(ProducerConfig::new(&unique("pop_pg"), live.client())).unwrap();
    producer.start().unwrap();
    for body in bodies {
        producer
            .send(Message::new(topic, body.clone().into_bytes()))
            .unwrap();
    }
    producer.shutdown();
    bodies.to_vec()
}

fn bodies(prefix: &str, count: usize) -> Vec<String> {
    (0..count).map(|i| format!("{prefix}-{i}")).collect()
}

fn body(message: &PopMessage) -> String {
    String::from_utf8_lossy(&message.message.body).into_owned()
}

/// Receives until `wanted` messages came in total, or fails after [`STEP_LIMIT`].
async fn receive_count(
    consumer: &AsyncPopConsumer,
    wanted: usize,
    invisible: Duration,
) -> Vec<PopMessage> {
    let mut received = Vec::new();
    within("receiving the messages", async {
        while received.len() < wanted {
            let left = (wanted - received.len()).min(32);
            received.extend(consumer.receive(left, invisible).await.unwrap());
        }
    })
    .await;
    received
}

/// Everything received during `window` (long invisible time, nothing acked).
async fn received_during(consumer: &AsyncPopConsumer, window: Duration) -> Vec<PopMessage> {
    let end = Instant::now() + window;
    let mut received = Vec::new();
    while Instant::now() < end {
        received.extend(consumer.receive(32, LONG_INVISIBLE).await.unwrap());
    }
    received
}

// Proves an acked message is not handed out again, neither to the consumer that acked it
// nor to another one of the group, after its invisible time has passed; and that the
// messages come under the subscribed topic with their receipts and reconsume count 0.
#[test]
fn acked_messages_are_not_redelivered() {
    let (live, topic) = setup("pop_ack", 4);
    let group = unique("pop_g");
    let sent = send(&live, &topic, &bodies("ack", 6));
    runtime().block_on(async {
        let consumer = consumer(&live, &group, &topic);
        let received = receive_count(&consumer, sent.len(), SHORT_INVISIBLE).await;
        let seen: BTreeSet<String> = received.iter().map(body).collect();
        assert_eq!(seen, sent.iter().cloned().collect::<BTreeSet<_>>());
        for message in &received {
            assert_eq!(message.message.topic, topic);
            assert_eq!(message.reconsume_times(), 0);
            assert!(!message.is_retry());
            assert_eq!(
                message.message.property("POP_CK"),
                Some(message.receipt_handle())
            );
        }
        assert_eq!(consumer.in_flight(), sent.len());
        for message in &received {
            within("an ack", consumer.ack(message)).await.unwrap();
        }
        assert_eq!(consumer.in_flight(), 0);
        let other = self::consumer(&live, &group, &topic);
        let window = SHORT_INVISIBLE + Duration::from_secs(6);
        let (again, again_other) = tokio::join!(
            received_during(&consumer, window),
            received_during(&other, window)
        );
        let again: Vec<String> = again.iter().chain(&again_other).map(body).collect();
        assert!(again.is_empty(), "acked messages came back: {again:?}");
        consumer.shutdown();
        other.shutdown();
    });
}

// Proves a message not acked comes back once its invisible time has passed (not before),
// under the subscribed topic, through the group's pop retry topic, with its reconsume count
// one higher; and that acking the redelivered copy (its receipt names the retry queue) ends
// it.
#[test]
fn unacked_messages_come_back_with_reconsume_times_plus_one() {
    let (live, topic) = setup("pop_redeliver", 2);
    let group = unique("pop_g");
    let sent = send(&live, &topic, &bodies("redo", 1));
    runtime().block_on(async {
        let consumer = consumer(&live, &group, &topic);
        let first = receive_count(&consumer, 1, SHORT_INVISIBLE).await.remove(0);
        let popped_at = Instant::now();
        assert_eq!(body(&first), sent[0]);
        let again = within("the redelivery", async {
            loop {
                let received = consumer.receive(1, SHORT_INVISIBLE).await.unwrap();
                if let Some(message) = received.into_iter().next() {
                    break message;
                }
            }
        })
        .await;
        let after = popped_at.elapsed();
        assert!(
            after + Duration::from_millis(200) >= SHORT_INVISIBLE,
            "back after {after:?}, before its invisible time"
        );
        assert!(
            after <= SHORT_INVISIBLE + REVIVE_SLACK,
            "back after {after:?}"
        );
        assert_eq!(body(&again), sent[0]);
        assert_eq!(again.message.client_msg_id(), first.message.client_msg_id());
        assert_eq!(again.reconsume_times(), first.reconsume_times() + 1);
        assert!(again.is_retry(), "receipt {}", again.receipt_handle());
        assert_eq!(again.queue_topic(), format!("%RETRY%{group}_{topic}"));
        assert_eq!(again.message.topic, topic);
        within("the ack", consumer.ack(&again)).await.unwrap();
        // Unacked, the copy would be back within its invisible time and a revive scan.
        let window = SHORT_INVISIBLE + Duration::from_secs(6);
        let later = received_during(&consumer, window).await;
        assert!(
            later.is_empty(),
            "acked retry came back: {:?}",
            later.iter().map(body).collect::<Vec<_>>()
        );
        consumer.shutdown();
    });
}

// Proves change_invisible_time postpones a message's return past its first invisible time,
// that an ack with the changed receipt ends the message, and that a changed message not
// acked does come back once the new time has passed.
#[test]
fn change_invisible_time_postpones_the_return() {
    let (live, topic) = setup("pop_change", 1);
    let group = unique("pop_g");
    let sent = send(&live, &topic, &bodies("change", 2));
    runtime().block_on(async {
        let consumer = consumer(&live, &group, &topic);
        let mut received = receive_count(&consumer, 2, SHORT_INVISIBLE).await;
        let changed_to = Duration::from_secs(10);
        let changed_at = Instant::now();
        for message in &mut received {
            let before = message.receipt_handle().to_owned();
            within(
                "a change",
                consumer.change_invisible_time(message, changed_to),
            )
            .await
            .unwrap();
            assert_ne!(message.receipt_handle(), before);
            assert_eq!(message.receipt().invisible_time_ms, 10_000);
        }
        // Unchanged, both would be back within SHORT_INVISIBLE and a revive scan.
        let early = received_during(&consumer, SHORT_INVISIBLE + Duration::from_secs(4)).await;
        assert!(
            early.is_empty(),
            "changed messages came back early: {:?}",
            early.iter().map(body).collect::<Vec<_>>()
        );
        let (acked, kept) = (&received[0], &received[1]);
        within("the ack", consumer.ack(acked)).await.unwrap();
        let back = within("the changed message's return", async {
            loop {
                let received = consumer.receive(2, LONG_INVISIBLE).await.unwrap();
                if !received.is_empty() {
                    break received;
                }
            }
        })
        .await;
        assert!(changed_at.elapsed() + Duration::from_millis(200) >= changed_to);
        let mut back: Vec<String> = back.iter().map(body).collect();
        back.extend(
            received_during(&consumer, Duration::from_secs(4))
                .await
                .iter()
                .map(body),
        );
        assert_eq!(back, vec![body(kept)], "sent {sent:?}");
        consumer.shutdown();
    });
}

// Proves several consumers of one group share one queue: each gets the next messages while
// the others still hold theirs (no queue is owned by one consumer), and together, acking,
// they get every message exactly once.
#[test]
fn consumers_of_a_group_share_one_queue() {
    let (live, topic) = setup("pop_share", 1);
    let group = unique("pop_g");
    let sent = send(&live, &topic, &bodies("share", 30));
    runtime().block_on(async {
        let consumers: Vec<AsyncPopConsumer> =
            (0..3).map(|_| consumer(&live, &group, &topic)).collect();
        let mut held = Vec::new();
        for consumer in &consumers {
            let got = receive_count(consumer, 2, LONG_INVISIBLE).await;
            assert_eq!(got.len(), 2);
            held.push(got);
        }
        let mut seen: BTreeMap<String, usize> = BTreeMap::new();
        for (consumer, got) in consumers.iter().zip(&held) {
            for message in got {
                *seen.entry(body(message)).or_default() += 1;
                within("an ack", consumer.ack(message)).await.unwrap();
            }
        }
        assert_eq!(seen.len(), 6, "the first pops overlapped: {seen:?}");
        let drained = within("draining the queue together", async {
            let mut tasks = tokio::task::JoinSet::new();
            for consumer in consumers.clone() {
                tasks.spawn(async move {
                    let mut bodies = Vec::new();
                    let mut idle_rounds = 0;
                    while idle_rounds < 3 {
                        let received = consumer.receive(4, LONG_INVISIBLE).await.unwrap();
                        idle_rounds = if received.is_empty() {
                            idle_rounds + 1
                        } else {
                            0
                        };
                        for message in received {
                            consumer.ack(&message).await.unwrap();
                            bodies.push(body(&message));
                        }
                    }
                    bodies
                });
            }
            let mut all = Vec::new();
            while let Some(bodies) = tasks.join_next().await {
                all.extend(bodies.unwrap());
            }
            all
        })
        .await;
        for body in drained {
            *seen.entry(body).or_default() += 1;
        }
        let twice: Vec<_> = seen.iter().filter(|(_, count)| **count > 1).collect();
        assert!(twice.is_empty(), "delivered twice: {twice:?}");
        assert_eq!(
            seen.keys().cloned().collect::<BTreeSet<_>>(),
            sent.iter().cloned().collect::<BTreeSet<_>>()
        );
        for consumer in &consumers {
            consumer.shutdown();
        }
    });
}

// Proves a receive long-polls: it waits at the broker (counted by POLLING_INFO) and resolves
// with a message soon after it is sent, long before its poll time is over.
#[test]
fn a_long_poll_wakes_when_a_message_arrives() {
    let (live, topic) = setup("pop_poll", 4);
    let group = unique("pop_g");
    let poll_time = Duration::from_secs(25);
    runtime().block_on(async {
        let consumer = AsyncPopConsumer::new(config(&live, &group, poll_time)).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        // A first pop sets the group's position in each queue (from the first message).
        let waiting = {
            let consumer = consumer.clone();
            tokio::spawn(async move { consumer.receive(8, LONG_INVISIBLE).await })
        };
        let addr = live.broker.broker_addr.to_string();
        let header = PollingInfoRequestHeader {
            consumer_group: group.clone(),
            topic: topic.clone(),
            queue_id: -1,
        };
        until("the pop's polling at the broker", || {
            let request =
                RemotingCommand::request(RequestCode::POLLING_INFO, 0).with_header(&header);
            let (transport, addr) = (consumer.transport().clone(), addr.clone());
            async move {
                let answer = transport
                    .invoke(&addr, request, Duration::from_secs(5))
                    .await
                    .unwrap();
                PollingInfoResponseHeader::from_ext_fields(&answer.ext_fields)
                    .unwrap()
                    .polling_num
                    > 0
            }
        })
        .await;
        let live_ref = &live;
        let topic_ref = topic.clone();
        let sent = tokio::task::block_in_place(|| send(live_ref, &topic_ref, &bodies("wake", 1)));
        let sent_at = Instant::now();
        let received = within("the woken pop", waiting).await.unwrap().unwrap();
        let woke_after = sent_at.elapsed();
        assert_eq!(received.iter().map(body).collect::<Vec<_>>(), sent);
        assert!(
            woke_after < Duration::from_secs(5),
            "the pop answered {woke_after:?} after the send (poll time {poll_time:?})"
        );
        consumer.shutdown();
    });
}

/// A second broker, `pop-broker-b`, registered with `live`'s name server.
fn second_broker(live: &Live, store: &TempDir) -> ChildGuard {
    let port = free_port();
    let mut command = std::process::Command::new(broker_binary());
    command
        .args(["--no-pin", "--cores", "1", "--bind-address", "127.0.0.1"])
        .args(["--listen-port", &port.to_string()])
        .args(["--namesrv", &live.namesrv()])
        .args(["--store", &store.path().display().to_string()])
        .args([
            "-o",
            &format!("mappedFileSizeCommitLog={TEST_COMMIT_LOG_FILE_BYTES}"),
        ])
        .args(["-o", &format!("haListenPort={}", free_port())])
        .args(["-o", "brokerName=pop-broker-b"])
        .stdout(std::process::Stdio::null());
    let guard = ChildGuard::spawn("the second broker", &mut command);
    wait_for_port(([127, 0, 0, 1], port).into(), STEP_LIMIT);
    guard
}

// Proves a consumer of a topic on two brokers pops both (each message once, acked through
// its own broker), and that a receive finding both empty waits on both at once: a message
// sent to either wakes it long before its poll time is over.
#[test]
fn a_topic_on_two_brokers_is_popped_and_waited_on_across_both() {
    let live = Live::start("pop_two_a", &[]);
    let store_b = TempDir::new("pop_two_b");
    let _broker_b = second_broker(&live, &store_b);
    let admin = Admin::new(live.client()).expect("an admin client");
    wait_until("both brokers registered", STEP_LIMIT, || {
        admin
            .cluster_masters(Some("DefaultCluster"))
            .is_ok_and(|masters| masters.len() == 2)
    });
    let topic = unique("pop_two");
    admin
        .create_topic("DefaultCluster", &TopicSpec::new(&topic, 2))
        .expect("the topic is created on both brokers");
    wait_until("the topic's route on both brokers", STEP_LIMIT, || {
        admin
            .topic_route(&topic)
            .is_ok_and(|route| route.queue_datas.len() == 2)
    });
    admin.shutdown();
    let group = unique("pop_g");
    let sent = send(&live, &topic, &bodies("two", 40));
    runtime().block_on(async {
        let consumer = consumer(&live, &group, &topic);
        let received = receive_count(&consumer, sent.len(), LONG_INVISIBLE).await;
        let brokers: BTreeSet<&str> = received.iter().map(PopMessage::broker_name).collect();
        assert_eq!(brokers.len(), 2, "popped from {brokers:?}");
        let mut seen: Vec<String> = received.iter().map(body).collect();
        seen.sort();
        let mut expected = sent.clone();
        expected.sort();
        assert_eq!(seen, expected);
        for message in &received {
            within("an ack", consumer.ack(message)).await.unwrap();
        }
        let waiting_consumer =
            AsyncPopConsumer::new(config(&live, &group, Duration::from_secs(25))).unwrap();
        waiting_consumer.subscribe(&topic, "*").unwrap();
        let waiting = {
            let consumer = waiting_consumer.clone();
            tokio::spawn(async move { consumer.receive(4, LONG_INVISIBLE).await })
        };
        // Both brokers found empty, the receive waits with one NOTIFICATION on each.
        until("a wait on each broker", || {
            assert!(!waiting.is_finished(), "the receive did not wait");
            let waits = waiting_consumer.transport().in_flight_total();
            async move { waits >= 2 }
        })
        .await;
        let live_ref = &live;
        let topic_ref = topic.clone();
        let late = tokio::task::block_in_place(|| send(live_ref, &topic_ref, &bodies("late", 1)));
        let sent_at = Instant::now();
        let woken = within("the woken receive", waiting).await.unwrap().unwrap();
        let woke_after = sent_at.elapsed();
        assert_eq!(woken.iter().map(body).collect::<Vec<_>>(), late);
        assert!(
            woke_after < Duration::from_secs(5),
            "woke {woke_after:?} after the send"
        );
        consumer.shutdown();
        waiting_consumer.shutdown();
    });
}

// Proves the blocking face: subscribe, receive, ack and change the invisible time from a
// plain thread, with the in-flight count following.
#[test]
fn the_blocking_consumer_receives_and_acks() {
    let (live, topic) = setup("pop_blocking", 2);
    let group = unique("pop_g");
    let sent = send(&live, &topic, &bodies("blocking", 5));
    let consumer = PopConsumer::new(config(&live, &group, Duration::from_secs(1))).unwrap();
    consumer.subscribe(&topic, "*").unwrap();
    let deadline = Instant::now() + STEP_LIMIT;
    let mut received = Vec::new();
    while received.len() < sent.len() {
        assert!(Instant::now() < deadline, "got {} messages", received.len());
        received.extend(consumer.receive(32, LONG_INVISIBLE).unwrap());
    }
    assert_eq!(consumer.in_flight(), sent.len());
    let (first, rest) = received.split_first_mut().unwrap();
    consumer
        .change_invisible_time(first, Duration::from_secs(60))
        .unwrap();
    consumer.ack(first).unwrap();
    for message in rest.iter() {
        consumer.ack(message).unwrap();
    }
    assert_eq!(consumer.in_flight(), 0);
    let mut seen: Vec<String> = received.iter().map(body).collect();
    seen.sort();
    let mut expected = sent.clone();
    expected.sort();
    assert_eq!(seen, expected);
    consumer.shutdown();
    assert!(consumer.receive(1, LONG_INVISIBLE).is_err());
}

// Proves bad arguments are refused with errors before any traffic.
#[test]
fn bad_arguments_are_refused() {
    let client = comet_client::ClientConfig::with_namesrv("127.0.0.1:1");
    let consumer = AsyncPopConsumer::new(PopConsumerConfig::new("g", client.clone())).unwrap();
    runtime().block_on(async {
        assert!(
            consumer.receive(1, LONG_INVISIBLE).await.is_err(),
            "no subscription"
        );
        consumer.subscribe("T", "*").unwrap();
        assert!(consumer.receive(0, LONG_INVISIBLE).await.is_err());
        assert!(consumer.receive(33, LONG_INVISIBLE).await.is_err());
        assert!(consumer.receive(1, Duration::ZERO).await.is_err());
    });
    assert!(consumer.subscribe("T", "||").is_err());
    assert!(consumer.subscribe_sql("T", "a > ").is_err());
    assert!(consumer.subscribe_sql("T", "a > 'text'").is_err());
    assert!(consumer.subscribe_sql("bad topic!", "a > 1").is_err());
    assert!(consumer.subscribe("bad topic!", "*").is_err());
    let mut config = PopConsumerConfig::new("g", client);
    config.in_flight_messages_max = 0;
    assert!(AsyncPopConsumer::new(config).is_err());
}

// Proves a SQL92 subscription: the broker hands out only the messages whose properties
// match (its pops filter whatever `enablePropertyFilter` says, as Java's do), and the others
// never reach the consumer, also past their would-be invisible time.
#[test]
fn a_sql92_subscription_receives_only_matching_messages() {
    let (live, topic) = setup("pop_sql", 2);
    let group = unique("pop_sql_g");
    let producer = Producer::new(ProducerConfig::new(&unique("pop_pg"), live.client())).unwrap();
    producer.start().unwrap();
    let mut wanted = BTreeSet::new();
    for i in 0..20 {
        let color = if i % 4 == 0 { "red" } else { "blue" };
        let body = format!("sql-{i}");
        let message = Message::new(topic.as_str(), body.clone().into_bytes())
            .with_property("color", color)
            .unwrap()
            .with_property("size", i.to_string())
            .unwrap();
        producer.send(message).unwrap();
        if color == "red" && i > 0 {
            wanted.insert(body);
        }
    }
    producer.shutdown();
    runtime().block_on(async {
        let consumer =
            AsyncPopConsumer::new(config(&live, &group, Duration::from_secs(1))).unwrap();
        consumer
            .subscribe_sql(&topic, "color = 'red' AND size > 0")
            .unwrap();
        let received = receive_count(&consumer, wanted.len(), SHORT_INVISIBLE).await;
        let seen: BTreeSet<String> = received.iter().map(body).collect();
        assert_eq!(seen, wanted);
        for message in &received {
            within("an ack", consumer.ack(message)).await.unwrap();
        }
        let window = SHORT_INVISIBLE + Duration::from_secs(4);
        let again: Vec<String> = received_during(&consumer, window)
            .await
            .iter()
            .map(body)
            .collect();
        assert!(
            again.is_empty(),
            "unwanted or acked messages came: {again:?}"
        );
        consumer.shutdown();
    });
}

// Proves an orderly consumer gets a queue's messages in order, batch after batch: while a
// received message is unacked and invisible the queue gives the group nothing, unacked
// messages come back in order with their reconsume count, and after the acks the next
// messages follow.
#[test]
fn an_orderly_consumer_gets_a_queue_in_order_batch_after_batch() {
    let (live, topic) = setup("pop-orderly", 1);
    let sent = send(&live, &topic, &bodies("fifo", 6));
    let group = unique("pop_orderly_g");
    let orderly = |poll: Duration| {
        let mut config = config(&live, &group, poll);
        config.orderly = true;
        let consumer = AsyncPopConsumer::new(config).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        consumer
    };
    runtime().block_on(async {
        let first = orderly(Duration::from_secs(1));
        let other = orderly(Duration::from_millis(300));
        let batch = within("the first batch", first.receive(2, Duration::from_secs(2))).await;
        let batch = batch.unwrap();
        assert_eq!(batch.iter().map(body).collect::<Vec<_>>(), sent[..2]);
        assert!(batch.iter().all(|message| message.reconsume_times() == 0));
        let blocked = other.receive(2, LONG_INVISIBLE).await.unwrap();
        assert!(
            blocked.is_empty(),
            "the queue is blocked while the batch is in flight"
        );
        // Not acked: the same two come back, in order, once their invisible time passed.
        let mut again = Vec::new();
        within("the batch again", async {
            while again.is_empty() {
                again = other.receive(2, LONG_INVISIBLE).await.unwrap();
            }
        })
        .await;
        assert_eq!(again.iter().map(body).collect::<Vec<_>>(), sent[..2]);
        assert!(again.iter().all(|message| message.reconsume_times() == 1));
        for message in &again {
            other.ack(message).await.unwrap();
        }
        let next = receive_count(&other, 4, LONG_INVISIBLE).await;
        assert_eq!(next.iter().map(body).collect::<Vec<_>>(), sent[2..]);
        first.shutdown();
        other.shutdown();
    });
}
