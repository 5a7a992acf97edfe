//! The async push consumer (`AsyncPushConsumer`) against a real Comet broker (`live`: a
//! standalone `comet-broker` on free loopback ports, killed when the test ends). Build the
//! broker first (`cargo build -p comet-broker`) or set `COMET_BROKER_BIN`.

mod live;

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::{
    Admin, AsyncMessageListener, AsyncProducer, AsyncPushConsumer, AsyncPushConsumerConfig,
    ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, Message, MessageQueue, ProducerConfig,
};
use comet_proto::body::{CMResult, ConsumeMessageDirectlyResult, JsonBody};
use comet_proto::headers::ConsumeMessageDirectlyResultRequestHeader;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use live::{consumer_config, runtime, unique, within, Live};

/// Longest any awaited step of these tests may take before the test fails.
const STEP_LIMIT: Duration = Duration::from_secs(60);
/// How often [`until`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `check` every [`POLL_INTERVAL`] until it holds; fails after `limit` naming `what`.
async fn until(what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
    within(what, limit, async {
        while !check() {
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    })
    .await;
}

/// Checks every [`POLL_INTERVAL`] for `span` that `check` still holds, failing at the first
/// poll where it does not: for what must not happen (a cache growing, a lock taken), which
/// no condition can be waited for.
async fn holds_for(what: &str, span: Duration, mut check: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + span;
    while tokio::time::Instant::now() < deadline {
        assert!(check(), "{what} no longer holds");
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// A broker with a fresh topic of `queues` queues, routable.
fn setup(name: &str, queues: i32) -> (Live, String) {
    let live = Live::start(name, &[]);
    let topic = live.create_topic("apush_topic", queues);
    (live, topic)
}

/// Sends `count` messages with bodies `0..count` to `topic` and returns the bodies.
async fn send(live: &Live, topic: &str, count: usize) -> BTreeSet<String> {
    let producer =
        AsyncProducer::new(ProducerConfig::new(&unique("apush_pg"), live.client())).unwrap();
    let bodies: Vec<String> = (0..count).map(|i| i.to_string()).collect();
    let sends = bodies
        .iter()
        .map(|body| producer.send(Message::new(topic, body.clone().into_bytes())));
    let results = within("the sends", STEP_LIMIT, futures::future::join_all(sends)).await;
    for result in results {
        result.expect("a send");
    }
    producer.shutdown();
    bodies.into_iter().collect()
}

fn config(live: &Live, group: &str) -> AsyncPushConsumerConfig {
    AsyncPushConsumerConfig::new(consumer_config(live, group))
}

type Bodies = Arc<Mutex<BTreeSet<String>>>;

fn body_of(message: &comet_client::MessageExt) -> String {
    String::from_utf8_lossy(&message.body).into_owned()
}

// Proves the async listener sees every message of a four-queue topic; that the broker's
// relayed requests reach it (an offset reset to the start makes every message come again;
// the running info lists its queues and offsets; a message consumed directly gets the
// listener's verdict); and that the offsets it committed hold: a
// second consumer of the group, started after the first shut down, gets no message again.
#[test]
fn an_async_listener_consumes_every_message_and_commits() {
    let (live, topic) = setup("client-apush-all", 4);
    let group = unique("apush_all");
    runtime().block_on(async {
        let sent = send(&live, &topic, 200).await;
        let seen: Bodies = Arc::default();
        let deliveries = Arc::new(AtomicUsize::new(0));
        let (sink, counter) = (seen.clone(), deliveries.clone());
        let listener = AsyncMessageListener::concurrently(move |messages, queue| {
            let (sink, counter) = (sink.clone(), counter.clone());
            async move {
                tokio::task::yield_now().await;
                sink.lock().unwrap().extend(messages.iter().map(body_of));
                if !queue.topic.starts_with("%RETRY%") {
                    counter.fetch_add(messages.len(), Ordering::SeqCst);
                }
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let consumer = AsyncPushConsumer::new(config(&live, &group), listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        within("the start", STEP_LIMIT, consumer.start())
            .await
            .unwrap();
        until("every message consumed", STEP_LIMIT, || {
            *seen.lock().unwrap() == sent
        })
        .await;
        let topic_queues = consumer
            .assigned_queues()
            .iter()
            .filter(|queue| queue.topic == topic)
            .count();
        assert_eq!(topic_queues, 4);
        until("offsets at the queues' ends", STEP_LIMIT, || {
            consumer
                .queue_stats()
                .iter()
                .filter(|stats| stats.queue.topic == topic)
                .all(|stats| stats.commit_offset == Some(stats.next_offset))
        })
        .await;
        // RESET_CONSUMER_CLIENT_OFFSET, relayed by the broker: every message comes again.
        let admin = Admin::new(live.client()).expect("an admin client");
        let reset = admin
            .reset_offset_by_timestamp(&group, &topic, 0, true)
            .unwrap();
        assert!(reset.values().all(|offset| *offset == 0), "{reset:?}");
        until("every message consumed again", STEP_LIMIT, || {
            deliveries.load(Ordering::SeqCst) >= 400
        })
        .await;
        // GET_CONSUMER_RUNNING_INFO, relayed by the broker, is answered by the consumer.
        let client_id = consumer.client_id().to_owned();
        let info = comet_test_support::wait_for("the running info", STEP_LIMIT, || {
            let info = admin.consumer_running_info(&group, &client_id).ok()?;
            let committed: i64 = info
                .mq_table
                .iter()
                .filter(|(queue, _)| queue.topic == topic)
                .map(|(_, pq)| pq.commit_offset)
                .sum();
            (committed == 200).then_some(info)
        });
        admin.shutdown();
        assert_eq!(
            info.properties[comet_proto::body::PROP_CONSUME_TYPE],
            "CONSUME_PASSIVELY"
        );
        let queues: Vec<_> = info
            .mq_table
            .iter()
            .filter(|(queue, _)| queue.topic == topic)
            .collect();
        assert_eq!(queues.len(), 4);
        let committed: i64 = queues.iter().map(|(_, pq)| pq.commit_offset).sum();
        assert_eq!(committed, 200);
        // CONSUME_MESSAGE_DIRECTLY, relayed by the broker: the async listener's verdict.
        let producer =
            AsyncProducer::new(ProducerConfig::new(&unique("apush_pg"), live.client())).unwrap();
        let direct = producer
            .send(Message::new(topic.as_str(), "direct"))
            .await
            .unwrap();
        producer.shutdown();
        let header = ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: group.clone(),
            client_id: Some(client_id.clone()),
            msg_id: Some(direct.offset_msg_id.clone()),
            broker_name: None,
            topic: None,
            topic_sys_flag: None,
            group_sys_flag: None,
        };
        let request =
            RemotingCommand::request(RequestCode::CONSUME_MESSAGE_DIRECTLY, 0).with_header(&header);
        let remoting = comet_client::RemotingClient::new(Default::default());
        let broker_addr = live.broker.broker_addr.to_string();
        let response = tokio::task::block_in_place(|| {
            remoting.invoke(&broker_addr, request, Duration::from_secs(15))
        })
        .unwrap();
        remoting.shutdown();
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            response.remark
        );
        let result = ConsumeMessageDirectlyResult::decode(&response.body).unwrap();
        assert_eq!(result.consume_result, Some(CMResult::CR_SUCCESS));
        assert!(!result.order);
        assert!(seen.lock().unwrap().contains("direct"));
        // The direct message was stored too: the consumer takes it as usual.
        until(
            "the direct message consumed and committed",
            STEP_LIMIT,
            || {
                let stats = consumer.queue_stats();
                let topic_stats: Vec<_> = stats.iter().filter(|s| s.queue.topic == topic).collect();
                let ends: i64 = topic_stats.iter().map(|stats| stats.next_offset).sum();
                ends == 201
                    && topic_stats
                        .iter()
                        .all(|stats| stats.commit_offset == Some(stats.next_offset))
            },
        )
        .await;
        within("the shutdown", STEP_LIMIT, consumer.shutdown()).await;

        let again = Arc::new(AtomicUsize::new(0));
        let counter = again.clone();
        let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
            counter.fetch_add(messages.len(), Ordering::SeqCst);
            async { ConsumeConcurrentlyStatus::ConsumeSuccess }
        });
        let second = AsyncPushConsumer::new(config(&live, &group), listener).unwrap();
        second.subscribe(&topic, "*").unwrap();
        within("the second start", STEP_LIMIT, second.start())
            .await
            .unwrap();
        // The committed offsets are where the second consumer starts: at the queues' ends.
        until("the second consumer's queues", STEP_LIMIT, || {
            second
                .queue_stats()
                .iter()
                .filter(|stats| stats.queue.topic == topic)
                .count()
                == 4
        })
        .await;
        for stats in second.queue_stats() {
            if stats.queue.topic == topic {
                assert_eq!(stats.cached_messages, 0, "{stats:?}");
            }
        }
        let total_next: i64 = second
            .queue_stats()
            .iter()
            .filter(|stats| stats.queue.topic == topic)
            .map(|stats| stats.next_offset)
            .sum();
        assert_eq!(
            total_next, 201,
            "the second consumer starts past every message"
        );
        assert_eq!(again.load(Ordering::SeqCst), 0);
        within("the second shutdown", STEP_LIMIT, second.shutdown()).await;
    });
}

// Proves flow control per queue: with a listener that does not finish, a queue caches no
// more than pullThresholdForQueue plus one pull batch (the check precedes each pull, as in
// Java), reaches the threshold (pulling went on until then), and once the listener is
// released every message is consumed.
#[test]
fn a_blocked_listener_holds_the_queue_at_its_threshold() {
    let (live, topic) = setup("client-apush-flow", 1);
    let group = unique("apush_flow");
    const THRESHOLD: usize = 100;
    const PULL_BATCH: i32 = 10;
    runtime().block_on(async {
        let sent = send(&live, &topic, 400).await;
        let released = Arc::new(tokio::sync::Semaphore::new(0));
        let seen: Bodies = Arc::default();
        let (gate, sink) = (released.clone(), seen.clone());
        let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
            let (gate, sink) = (gate.clone(), sink.clone());
            async move {
                // Waits until released; the permit goes back for the next call.
                drop(gate.acquire().await.expect("open"));
                sink.lock().unwrap().extend(messages.iter().map(body_of));
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let mut config = config(&live, &group);
        config.consumer.pull_threshold_messages_per_queue = THRESHOLD;
        config.consumer.pull_batch_size = PULL_BATCH;
        config.consume_thread_min = 1;
        config.consume_thread_max = 1;
        let consumer = AsyncPushConsumer::new(config, listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        within("the start", STEP_LIMIT, consumer.start())
            .await
            .unwrap();
        let cached = || {
            consumer
                .queue_stats()
                .into_iter()
                .find(|stats| stats.queue.topic == topic)
        };
        until("the queue filled to its threshold", STEP_LIMIT, || {
            cached().is_some_and(|stats| stats.cached_messages >= THRESHOLD)
        })
        .await;
        // Pulling stops there: over several flow-control delays the cache does not grow.
        let bound = THRESHOLD + PULL_BATCH as usize;
        holds_for("the cache bound", Duration::from_millis(500), || {
            cached().is_some_and(|stats| stats.cached_messages <= bound)
        })
        .await;
        let stats = cached().unwrap();
        assert!(stats.cached_messages <= bound, "{stats:?}");
        assert!(stats.cached_messages_peak <= bound, "{stats:?}");
        assert!(
            stats.next_offset < 400,
            "pulling went past the threshold: {stats:?}"
        );
        assert!(seen.lock().unwrap().is_empty());
        released.add_permits(1);
        until("every message consumed", STEP_LIMIT, || {
            *seen.lock().unwrap() == sent
        })
        .await;
        let stats = cached().unwrap();
        assert!(stats.cached_messages_peak <= bound, "{stats:?}");
        within("the shutdown", STEP_LIMIT, consumer.shutdown()).await;
    });
}

// Proves consumeConcurrentlyMaxSpan: the first message never finishes (holding the commit
// offset at 0) and neither do those from offset 25 on, so the cache spans from 0 to the
// newest pulled; pulling stops once that span passes the limit, with the cache far below the
// count threshold (messages 1 to 24 were consumed and left it).
#[test]
fn a_stuck_message_stops_pulling_at_the_max_span() {
    let (live, topic) = setup("client-apush-span", 1);
    let group = unique("apush_span");
    const SPAN: i64 = 50;
    runtime().block_on(async {
        send(&live, &topic, 300).await;
        let listener = AsyncMessageListener::concurrently(move |messages, _queue| async move {
            if messages
                .iter()
                .any(|m| m.queue_offset == 0 || m.queue_offset >= 25)
            {
                std::future::pending::<()>().await;
            }
            ConsumeConcurrentlyStatus::ConsumeSuccess
        });
        let mut config = config(&live, &group);
        config.consume_concurrently_max_span = SPAN;
        config.consumer.pull_batch_size = 10;
        // Room for every hanging listener call.
        config.consume_thread_min = 200;
        config.consume_thread_max = 200;
        let consumer = AsyncPushConsumer::new(config, listener).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        within("the start", STEP_LIMIT, consumer.start())
            .await
            .unwrap();
        let stats = || {
            consumer
                .queue_stats()
                .into_iter()
                .find(|stats| stats.queue.topic == topic)
                .unwrap()
        };
        until("the span reached", STEP_LIMIT, || stats().max_span >= SPAN).await;
        holds_for("the span bound", Duration::from_millis(500), || {
            stats().max_span <= SPAN + 10
        })
        .await;
        let now = stats();
        assert!(now.max_span <= SPAN + 10, "{now:?}");
        assert!(now.next_offset <= SPAN + 1 + 10, "{now:?}");
        assert_eq!(now.commit_offset.unwrap_or(0), 0, "{now:?}");
        assert!(now.cached_messages < 100, "{now:?}");
        within("the shutdown", STEP_LIMIT, consumer.shutdown()).await;
    });
}

// Proves dropping a consumer mid-consume loses nothing acknowledged: the first consumer's
// listener finishes some messages and hangs on others when its last handle is dropped; a
// second consumer of the group then consumes every message the first did not finish, so
// each sent message was consumed successfully at least once.
#[test]
fn dropping_a_consumer_mid_consume_loses_nothing() {
    let (live, topic) = setup("client-apush-drop", 4);
    let group = unique("apush_drop");
    runtime().block_on(async {
        let sent = send(&live, &topic, 200).await;
        let done: Bodies = Arc::default();
        let hanging = Arc::new(AtomicUsize::new(0));
        let (sink, stuck) = (done.clone(), hanging.clone());
        let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
            let (sink, stuck) = (sink.clone(), stuck.clone());
            async move {
                // Every third message never finishes.
                if messages.iter().any(|m| m.queue_offset % 3 == 2) {
                    stuck.fetch_add(1, Ordering::SeqCst);
                    std::future::pending::<()>().await;
                }
                sink.lock().unwrap().extend(messages.iter().map(body_of));
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let first = AsyncPushConsumer::new(config(&live, &group), listener).unwrap();
        first.subscribe(&topic, "*").unwrap();
        within("the start", STEP_LIMIT, first.start())
            .await
            .unwrap();
        until("some done and some hanging", STEP_LIMIT, || {
            done.lock().unwrap().len() >= 40 && hanging.load(Ordering::SeqCst) >= 5
        })
        .await;
        let transport = first.transport().clone();
        drop(first);
        // The drop shuts the consumer down on this runtime, closing its connections last.
        until("the first consumer's shutdown", STEP_LIMIT, || {
            transport.is_shut_down()
        })
        .await;
        let finished_by_first = done.lock().unwrap().len();
        assert!(finished_by_first < sent.len());

        let sink = done.clone();
        let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().extend(messages.iter().map(body_of));
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let second = AsyncPushConsumer::new(config(&live, &group), listener).unwrap();
        second.subscribe(&topic, "*").unwrap();
        within("the second start", STEP_LIMIT, second.start())
            .await
            .unwrap();
        until("every message consumed once at least", STEP_LIMIT, || {
            *done.lock().unwrap() == sent
        })
        .await;
        within("the shutdown", STEP_LIMIT, second.shutdown()).await;
    });
}

/// Orderly consumers of one group for the lock test.
fn orderly(live: &Live, group: &str, topic: &str, seen: Bodies, hang: bool) -> AsyncPushConsumer {
    let entered = Arc::new(AtomicBool::new(false));
    let listener = AsyncMessageListener::orderly(move |messages, _queue: MessageQueue| {
        let (seen, entered) = (seen.clone(), entered.clone());
        async move {
            if hang && !entered.swap(true, Ordering::SeqCst) {
                std::future::pending::<()>().await;
            }
            seen.lock().unwrap().extend(messages.iter().map(body_of));
            ConsumeOrderlyStatus::Success
        }
    });
    let consumer = AsyncPushConsumer::new(config(live, group), listener).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    consumer
}

// Proves an orderly consumer dropped while its listener hangs on a batch leaves no queue
// locked: a second consumer of the group takes and locks both queues at once (far sooner
// than the broker's 60 s lock expiry) and consumes every message the first did not finish.
#[test]
fn dropping_an_orderly_consumer_unlocks_its_queues() {
    let (live, topic) = setup("client-apush-orderly", 2);
    let group = unique("apush_orderly");
    runtime().block_on(async {
        let sent = send(&live, &topic, 100).await;
        let seen: Bodies = Arc::default();
        let first = orderly(&live, &group, &topic, seen.clone(), true);
        within("the start", STEP_LIMIT, first.start())
            .await
            .unwrap();
        until("the first consumer holds both locks", STEP_LIMIT, || {
            let stats = first.queue_stats();
            stats
                .iter()
                .filter(|s| s.queue.topic == topic && s.locked)
                .count()
                == 2
        })
        .await;
        until("some consumed", STEP_LIMIT, || {
            !seen.lock().unwrap().is_empty()
        })
        .await;
        drop(first);

        let second = orderly(&live, &group, &topic, seen.clone(), false);
        within("the second start", STEP_LIMIT, second.start())
            .await
            .unwrap();
        // Well under the broker's lock expiry: the first consumer's unlock freed them.
        until(
            "the second consumer holds both locks",
            Duration::from_secs(15),
            || {
                let stats = second.queue_stats();
                stats
                    .iter()
                    .filter(|s| s.queue.topic == topic && s.locked)
                    .count()
                    == 2
            },
        )
        .await;
        until("every message consumed", STEP_LIMIT, || {
            *seen.lock().unwrap() == sent
        })
        .await;
        within("the shutdown", STEP_LIMIT, second.shutdown()).await;
    });
}

// Proves the async lite pull consumer: polls (many of them cut short by a timeout, as a
// dropped future) get every message of a subscribed two-queue topic, `next` resolves to
// messages, manual commit records what was polled, and seek goes back to the start.
#[test]
fn the_lite_pull_consumer_polls_every_message_and_seeks() {
    let (live, topic) = setup("client-apush-lite", 2);
    runtime().block_on(async {
        let sent = send(&live, &topic, 60).await;
        let mut config =
            comet_client::LitePullConfig::new(consumer_config(&live, &unique("alite")));
        config.auto_commit = false;
        let consumer = comet_client::AsyncLitePullConsumer::new(config).unwrap();
        consumer.subscribe(&topic, "*").unwrap();
        within("the start", STEP_LIMIT, consumer.start())
            .await
            .unwrap();
        let mut seen = BTreeSet::new();
        let first = within("next", STEP_LIMIT, consumer.next())
            .await
            .expect("messages");
        seen.extend(first.iter().map(body_of));
        within("every message polled", STEP_LIMIT, async {
            while seen != sent {
                // Cut short at once or soon: a poll that resolved gave its messages (they
                // count), one dropped before it resolved took nothing.
                for cut in [Duration::ZERO, Duration::from_micros(50)] {
                    if let Ok(messages) = tokio::time::timeout(cut, consumer.poll(STEP_LIMIT)).await
                    {
                        seen.extend(messages.iter().map(body_of));
                    }
                }
                let messages = consumer.poll(Duration::from_millis(200)).await;
                seen.extend(messages.iter().map(body_of));
            }
        })
        .await;
        let queues = consumer.assignment();
        let queues: Vec<MessageQueue> = queues.into_iter().filter(|q| q.topic == topic).collect();
        assert_eq!(queues.len(), 2);
        assert!(queues.iter().all(|q| consumer.committed(q).is_none()));
        within("the commit", STEP_LIMIT, consumer.commit()).await;
        let committed: i64 = queues.iter().map(|q| consumer.committed(q).unwrap()).sum();
        assert_eq!(committed, 60);
        within("the seek", STEP_LIMIT, consumer.seek(&queues[0], 0))
            .await
            .unwrap();
        let again = within("polled after the seek", STEP_LIMIT, async {
            loop {
                let messages = consumer.poll(Duration::from_millis(200)).await;
                if let Some(message) = messages.first() {
                    return message.clone();
                }
            }
        })
        .await;
        assert_eq!(again.queue_id, queues[0].queue_id);
        assert_eq!(again.queue_offset, 0);
        within("the shutdown", STEP_LIMIT, consumer.shutdown()).await;
        assert!(consumer.next().await.is_none());
    });
}

// Proves an orderly queue changes hands only once its listener is done: while the first
// consumer's listener hangs on a batch of each queue, a second consumer joins; the
// rebalance takes a queue from the first at once (its other queue keeps going), but the
// second cannot lock that queue while the first's listener still works on it, and locks it
// as soon as that listener finishes. Every message is consumed in the end.
#[test]
fn an_orderly_queue_moves_only_after_its_listener_finishes() {
    let (live, topic) = setup("client-apush-handover", 2);
    let group = unique("apush_handover");
    runtime().block_on(async {
        let sent = send(&live, &topic, 40).await;
        let seen: Bodies = Arc::default();
        let gate = Arc::new(tokio::sync::Semaphore::new(0));
        let hanging = Arc::new(AtomicUsize::new(0));
        let (sink, open, waiting) = (seen.clone(), gate.clone(), hanging.clone());
        let listener = AsyncMessageListener::orderly(move |messages, _queue| {
            let (sink, open, waiting) = (sink.clone(), open.clone(), waiting.clone());
            async move {
                waiting.fetch_add(1, Ordering::SeqCst);
                drop(open.acquire().await.expect("open"));
                sink.lock().unwrap().extend(messages.iter().map(body_of));
                ConsumeOrderlyStatus::Success
            }
        });
        let first = AsyncPushConsumer::new(config(&live, &group), listener).unwrap();
        first.subscribe(&topic, "*").unwrap();
        within("the start", STEP_LIMIT, first.start())
            .await
            .unwrap();
        until("both queues' listeners waiting", STEP_LIMIT, || {
            hanging.load(Ordering::SeqCst) == 2
        })
        .await;

        let second = orderly(&live, &group, &topic, seen.clone(), false);
        within("the second start", STEP_LIMIT, second.start())
            .await
            .unwrap();
        let held = |consumer: &AsyncPushConsumer| {
            consumer
                .queue_stats()
                .iter()
                .filter(|s| s.queue.topic == topic && s.locked)
                .count()
        };
        until("the first consumer gives a queue up", STEP_LIMIT, || {
            first
                .assigned_queues()
                .iter()
                .filter(|q| q.topic == topic)
                .count()
                == 1
        })
        .await;
        // Several of the second consumer's lock attempts (1 s apart) fail meanwhile.
        holds_for("the first consumer's lock", Duration::from_secs(3), || {
            held(&second) == 0
        })
        .await;
        assert_eq!(held(&second), 0, "locked while the first still consumes it");
        gate.add_permits(1);
        until(
            "the second consumer locks its queue",
            Duration::from_secs(15),
            || held(&second) == 1,
        )
        .await;
        until("every message consumed", STEP_LIMIT, || {
            *seen.lock().unwrap() == sent
        })
        .await;
        within("the first shutdown", STEP_LIMIT, first.shutdown()).await;
        within("the second shutdown", STEP_LIMIT, second.shutdown()).await;
    });
}

// Proves broadcasting: two consumers of one group each get every message of a two-queue
// topic (no broker locks or consumer lists involved), and a consumer started again under
// the same client id resumes from its local offsets file: nothing is delivered again.
#[test]
fn broadcasting_consumers_each_get_every_message_and_resume_from_their_file() {
    let (live, topic) = setup("client-apush-bcast", 2);
    let group = unique("apush_bcast");
    let offsets_dir = comet_test_support::TempDir::new("client-apush-bcast-offsets");
    runtime().block_on(async {
        let sent = send(&live, &topic, 30).await;
        let broadcasting = |instance: &str, seen: Bodies| {
            let mut config = config(&live, &group);
            config.consumer.message_model = comet_client::MessageModel::Broadcasting;
            config.consumer.local_offset_dir = offsets_dir.path().to_path_buf();
            config.consumer.client.instance_name = instance.to_owned();
            let listener = AsyncMessageListener::concurrently(move |messages, _queue| {
                let seen = seen.clone();
                async move {
                    seen.lock().unwrap().extend(messages.iter().map(body_of));
                    ConsumeConcurrentlyStatus::ConsumeSuccess
                }
            });
            let consumer = AsyncPushConsumer::new(config, listener).unwrap();
            consumer.subscribe(&topic, "*").unwrap();
            consumer
        };
        let (seen_a, seen_b): (Bodies, Bodies) = (Arc::default(), Arc::default());
        let a = broadcasting("bcast_a", seen_a.clone());
        let b = broadcasting("bcast_b", seen_b.clone());
        within("the start of a", STEP_LIMIT, a.start())
            .await
            .unwrap();
        within("the start of b", STEP_LIMIT, b.start())
            .await
            .unwrap();
        until("each consumer got every message", STEP_LIMIT, || {
            *seen_a.lock().unwrap() == sent && *seen_b.lock().unwrap() == sent
        })
        .await;
        until("a's offsets at the queues' ends", STEP_LIMIT, || {
            a.queue_stats()
                .iter()
                .all(|stats| stats.commit_offset == Some(stats.next_offset))
        })
        .await;
        within("a's shutdown", STEP_LIMIT, a.shutdown()).await;
        within("b's shutdown", STEP_LIMIT, b.shutdown()).await;

        let again: Bodies = Arc::default();
        let a = broadcasting("bcast_a", again.clone());
        within("the restart of a", STEP_LIMIT, a.start())
            .await
            .unwrap();
        let stats = a.queue_stats();
        assert_eq!(stats.len(), 2, "{stats:?}");
        let resumed_at: i64 = stats.iter().map(|stats| stats.next_offset).sum();
        assert_eq!(resumed_at, 30, "{stats:?}");
        holds_for("no redelivery", Duration::from_millis(300), || {
            again.lock().unwrap().is_empty()
        })
        .await;
        assert!(again.lock().unwrap().is_empty());
        within("the last shutdown", STEP_LIMIT, a.shutdown()).await;
    });
}
