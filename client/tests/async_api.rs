//! The rest of the async API against a real Comet broker (`live`: a standalone
//! `comet-broker` on free loopback ports, killed when the test ends): the async producer's
//! queue-choosing and one-way sends, request-reply with an async responder (a dropped
//! request included), the async transactional producer with its check-backs, the lite pull
//! consumer as a `Stream`, and SQL92 subscriptions. Build the broker first
//! (`cargo build -p comet-broker`) or set `COMET_BROKER_BIN`.

mod live;

use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_client::{
    AsyncCheckListener, AsyncLitePullConsumer, AsyncMessageListener, AsyncProducer,
    AsyncPushConsumer, AsyncPushConsumerConfig, AsyncTransactionProducer, ClientError,
    ConsumeConcurrentlyStatus, LitePullConfig, LocalTransactionState, Message, MessageExt,
    MessageListener, MessageQueue, ProducerConfig, PushConsumer, PushConsumerConfig, SendStatus,
    TransactionProducerConfig,
};
use futures::StreamExt;
use live::{consumer_config, runtime, unique, Live};

/// Longest any awaited step of these tests may take before the test fails.
const STEP_LIMIT: Duration = Duration::from_secs(60);
/// How often [`until`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Broker settings that make check-backs quick: undecided halves are checked every 300 ms
/// once they are 1 s old.
const QUICK_CHECKS: [&str; 4] = [
    "-o",
    "transactionCheckInterval=300",
    "-o",
    "transactionTimeOut=1000",
];

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    live::within(what, STEP_LIMIT, future).await
}

/// Polls `check` every [`POLL_INTERVAL`] until it holds; fails after [`STEP_LIMIT`].
async fn until(what: &str, mut check: impl FnMut() -> bool) {
    within(what, async {
        while !check() {
            tokio::time::sleep(POLL_INTERVAL).await;
        }
    })
    .await;
}

fn producer(live: &Live) -> AsyncProducer {
    AsyncProducer::new(ProducerConfig::new(&unique("aapi_pg"), live.client()))
        .expect("an async producer")
}

fn body_of(message: &MessageExt) -> String {
    String::from_utf8_lossy(&message.body).into_owned()
}

/// A started lite pull consumer of `topic` (a group of its own, from the first offset).
async fn lite_consumer(live: &Live, topic: &str) -> AsyncLitePullConsumer {
    let config = LitePullConfig::new(consumer_config(live, &unique("aapi_lite")));
    let consumer = AsyncLitePullConsumer::new(config).unwrap();
    consumer.subscribe(topic, "*").unwrap();
    within("the lite consumer's start", consumer.start())
        .await
        .unwrap();
    consumer
}

/// Takes batches from `stream` (through the `Stream` trait) until `done` holds for the
/// messages seen so far, which it returns.
async fn stream_until(
    stream: &mut AsyncLitePullConsumer,
    mut done: impl FnMut(&[MessageExt]) -> bool,
) -> Vec<MessageExt> {
    let mut seen = Vec::new();
    within("the stream's messages", async {
        while !done(&seen) {
            let batch = StreamExt::next(stream).await.expect("the stream goes on");
            assert!(!batch.is_empty(), "a stream item holds messages");
            seen.extend(batch);
        }
    })
    .await;
    seen
}

// Proves send_to_queue lands on the queue given (and refuses a queue of another topic),
// send_orderly keeps each sharding key on one queue, send_with_selector uses the selector's
// index modulo the queue count, and a one-way send is delivered; and that the lite pull
// consumer, read as a Stream, yields every one of these messages from the queue they were
// sent to, then ends once the consumer shuts down.
#[test]
fn queue_choosing_and_one_way_sends_reach_their_queues() {
    let live = Live::start("client-aapi-sends", &[]);
    let topic = live.create_topic("aapi_sends", 4);
    runtime().block_on(async {
        let producer = producer(&live);
        let queues = within("the queues", producer.fetch_publish_queues(&topic))
            .await
            .unwrap();
        assert_eq!(queues.len(), 4);
        let mut expected: BTreeMap<String, i32> = BTreeMap::new();
        for queue in &queues {
            let body = format!("queue-{}", queue.queue_id);
            let sent = within(
                "a send to a queue",
                producer.send_to_queue(Message::new(topic.as_str(), body.clone()), queue),
            )
            .await
            .unwrap();
            assert_eq!(sent.queue, *queue);
            expected.insert(body, queue.queue_id);
        }
        let elsewhere = MessageQueue::new(unique("Elsewhere"), &queues[0].broker_name, 0);
        let refused = producer
            .send_to_queue(Message::new(topic.as_str(), "x"), &elsewhere)
            .await;
        assert!(
            matches!(refused, Err(ClientError::Invalid(_))),
            "{refused:?}"
        );

        let mut queue_of_key: BTreeMap<String, MessageQueue> = BTreeMap::new();
        for index in 0..12 {
            let key = format!("order-{}", index % 3);
            let body = format!("ordered-{index}");
            let sent = within(
                "an ordered send",
                producer.send_orderly(Message::new(topic.as_str(), body.clone()), &key),
            )
            .await
            .unwrap();
            let queue = queue_of_key.entry(key).or_insert(sent.queue.clone());
            assert_eq!(*queue, sent.queue, "one key, one queue");
            expected.insert(body, sent.queue.queue_id);
        }

        // Index 7 of 4 queues is the last one.
        let selected = within(
            "a selected send",
            producer.send_with_selector(Message::new(topic.as_str(), "selected"), |shown, _| {
                assert_eq!(shown.len(), 4);
                7
            }),
        )
        .await
        .unwrap();
        assert_eq!(selected.queue, queues[3]);
        expected.insert("selected".into(), queues[3].queue_id);

        within(
            "a one-way send",
            producer.send_oneway(Message::new(topic.as_str(), "one-way")),
        )
        .await
        .unwrap();

        // Every message sent, the one-way one included.
        let sent_count = expected.len() + 1;
        let consumer = lite_consumer(&live, &topic).await;
        let mut stream = consumer.clone();
        let seen = stream_until(&mut stream, |seen| {
            seen.iter().filter(|m| m.topic == topic).count() >= sent_count
        })
        .await;
        let mut bodies = BTreeSet::new();
        for message in seen.iter().filter(|m| m.topic == topic) {
            let body = body_of(message);
            if let Some(queue_id) = expected.get(&body) {
                assert_eq!(message.queue_id, *queue_id, "{body}");
            }
            assert!(bodies.insert(body.clone()), "{body} twice");
        }
        let mut wanted: BTreeSet<String> = expected.keys().cloned().collect();
        wanted.insert("one-way".into());
        assert_eq!(bodies, wanted);

        within("the shutdown", consumer.shutdown()).await;
        let end = within("the stream's end", StreamExt::next(&mut stream)).await;
        assert!(end.is_none(), "the stream ends with the consumer");
        producer.shutdown();
    });
}

// Proves request-reply with an async responder (an async push consumer answering through
// an async producer): each request gets the reply to itself, concurrent ones too; a request
// nobody answers fails with NoReply after its timeout; and a request future dropped while it
// waits leaves no waiter behind, its late reply is dropped, and the producer's connection
// serves the next request.
#[test]
fn requests_get_replies_from_an_async_responder() {
    let live = Live::start("client-aapi-request", &[]);
    let topic = live.create_topic("aapi_request", 2);
    let silent_topic = live.create_topic("aapi_silent", 1);
    runtime().block_on(async {
        let replier = producer(&live);
        let replies_sent = Arc::new(AtomicUsize::new(0));
        let (sending, counter) = (replier.clone(), replies_sent.clone());
        let listener = AsyncMessageListener::concurrently(move |messages, _| {
            let (replier, counter) = (sending.clone(), counter.clone());
            async move {
                for message in messages {
                    let asked = body_of(&message);
                    if asked.starts_with("slow") {
                        tokio::time::sleep(Duration::from_secs(2)).await;
                    }
                    let Ok(reply) = Message::reply_to(&message, format!("reply:{asked}")) else {
                        return ConsumeConcurrentlyStatus::ReconsumeLater;
                    };
                    if replier.send(reply).await.is_err() {
                        return ConsumeConcurrentlyStatus::ReconsumeLater;
                    }
                    counter.fetch_add(1, Ordering::SeqCst);
                }
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let config = AsyncPushConsumerConfig::new(consumer_config(&live, &unique("aapi_rr")));
        let responder = AsyncPushConsumer::new(config, listener).unwrap();
        responder.subscribe(&topic, "*").unwrap();
        within("the responder's start", responder.start())
            .await
            .unwrap();

        let requester = producer(&live);
        // The first request also waits for the responder's first rebalance.
        let reply = within(
            "the first request",
            requester.request(Message::new(topic.as_str(), "first"), STEP_LIMIT),
        )
        .await
        .unwrap();
        assert_eq!(body_of(&reply), "reply:first");
        assert_eq!(reply.topic, "DefaultCluster_REPLY_TOPIC");
        let asked: Vec<String> = (0..10).map(|i| format!("concurrent-{i}")).collect();
        let requests = asked
            .iter()
            .map(|body| requester.request(Message::new(topic.as_str(), body.clone()), STEP_LIMIT));
        let replies = within("concurrent requests", futures::future::join_all(requests)).await;
        for (body, reply) in asked.iter().zip(replies) {
            assert_eq!(body_of(&reply.unwrap()), format!("reply:{body}"));
        }
        assert_eq!(requester.requests_waiting(), 0);

        let unanswered = requester
            .request(
                Message::new(silent_topic.as_str(), "anyone?"),
                Duration::from_millis(1500),
            )
            .await;
        assert!(
            matches!(unanswered, Err(ClientError::NoReply { .. })),
            "{unanswered:?}"
        );
        assert_eq!(requester.requests_waiting(), 0);

        // Dropped while waiting: the responder answers 2 s late.
        let before = replies_sent.load(Ordering::SeqCst);
        {
            let slow = requester.request(Message::new(topic.as_str(), "slow"), STEP_LIMIT);
            tokio::pin!(slow);
            let cut = tokio::time::timeout(Duration::from_millis(500), &mut slow).await;
            assert!(cut.is_err(), "the slow request was answered: {cut:?}");
            assert_eq!(requester.requests_waiting(), 1);
        }
        assert_eq!(
            requester.requests_waiting(),
            0,
            "the dropped request's waiter"
        );
        until("the late reply", || {
            replies_sent.load(Ordering::SeqCst) > before
        })
        .await;
        let after = within(
            "a request after the dropped one",
            requester.request(Message::new(topic.as_str(), "after"), STEP_LIMIT),
        )
        .await
        .unwrap();
        assert_eq!(body_of(&after), "reply:after");
        assert_eq!(requester.requests_waiting(), 0);

        within("the responder's shutdown", responder.shutdown()).await;
        requester.shutdown();
        replier.shutdown();
    });
}

/// Bodies a checker was asked about.
type Checked = Arc<Mutex<Vec<String>>>;

/// A started async transactional producer of a group of its own whose checker records
/// what it is asked about and answers `answer`, blocking or async.
async fn transaction_producer(
    live: &Live,
    topic: &str,
    answer: LocalTransactionState,
    blocking: bool,
) -> (AsyncTransactionProducer, Checked) {
    let mut config =
        TransactionProducerConfig::new(ProducerConfig::new(&unique("atx_pg"), live.client()));
    config.topics = vec![topic.to_owned()];
    let checked: Checked = Arc::default();
    let sink = checked.clone();
    let checker = if blocking {
        AsyncCheckListener::blocking(move |half| {
            sink.lock().unwrap().push(body_of(half));
            answer
        })
    } else {
        AsyncCheckListener::from_async(move |half| {
            let sink = sink.clone();
            async move {
                tokio::task::yield_now().await;
                sink.lock().unwrap().push(body_of(&half));
                answer
            }
        })
    };
    let producer = AsyncTransactionProducer::new(config, checker).unwrap();
    within("the transactional producer's start", producer.start())
        .await
        .unwrap();
    (producer, checked)
}

// Proves the async transactional producer: a committed transaction is delivered and its
// local transaction saw the id the send returned; a rolled-back one never is; an UNKNOW one
// is checked back by the broker, and the async checker's commit delivers it; and with a
// blocking checker, a check-back answered with a rollback drops the half for good.
#[test]
fn async_transactions_commit_roll_back_and_answer_check_backs() {
    let live = Live::start("client-aapi-tx", &QUICK_CHECKS);
    let topic = live.create_topic("aapi_tx", 1);
    runtime().block_on(async {
        let (producer, checked) =
            transaction_producer(&live, &topic, LocalTransactionState::CommitMessage, false).await;
        let runs = Arc::new(AtomicUsize::new(0));
        let mut states = BTreeMap::new();
        for (body, state) in [
            ("committed", LocalTransactionState::CommitMessage),
            ("rolled-back", LocalTransactionState::RollbackMessage),
            ("unknown", LocalTransactionState::Unknown),
        ] {
            let counter = runs.clone();
            let result = within(
                "a transaction",
                producer.send_in_transaction(
                    Message::new(topic.as_str(), body),
                    move |message, sent| async move {
                        assert_eq!(message.uniq_key(), Some(sent.msg_id.as_str()));
                        counter.fetch_add(1, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        state
                    },
                ),
            )
            .await
            .unwrap();
            assert_eq!(result.send_result.status, SendStatus::SendOk);
            assert_eq!(result.local_transaction_state, state);
            states.insert(body, result.send_result.msg_id);
        }
        assert_eq!(runs.load(Ordering::SeqCst), 3);
        until("the check-back of the unknown half", || {
            checked.lock().unwrap().iter().any(|body| body == "unknown")
        })
        .await;

        let consumer = lite_consumer(&live, &topic).await;
        let mut stream = consumer.clone();
        let seen = stream_until(&mut stream, |seen| {
            let bodies: Vec<String> = seen.iter().map(body_of).collect();
            bodies.iter().any(|b| b == "committed") && bodies.iter().any(|b| b == "unknown")
        })
        .await;
        for message in &seen {
            let body = body_of(message);
            assert_ne!(body, "rolled-back");
            assert_eq!(
                Some(message.client_msg_id()),
                states.get(body.as_str()).map(String::as_str)
            );
        }

        // A blocking checker that rolls the half back.
        let (rolling, rolled) =
            transaction_producer(&live, &topic, LocalTransactionState::RollbackMessage, true).await;
        within(
            "an undecided transaction",
            rolling.send_in_transaction(
                Message::new(topic.as_str(), "checked-rollback"),
                |_, _| async { LocalTransactionState::Unknown },
            ),
        )
        .await
        .unwrap();
        until("the blocking checker's answer", || {
            !rolled.lock().unwrap().is_empty() && rolling.checks_running() == 0
        })
        .await;
        // On the connection the answer went on, so the broker has the rollback first.
        within(
            "the marker",
            rolling
                .producer()
                .send(Message::new(topic.as_str(), "marker")),
        )
        .await
        .unwrap();
        let later = stream_until(&mut stream, |seen| {
            seen.iter().any(|message| body_of(message) == "marker")
        })
        .await;
        assert!(later
            .iter()
            .chain(&seen)
            .all(|message| body_of(message) != "checked-rollback"
                && body_of(message) != "rolled-back"));

        within("the consumer's shutdown", consumer.shutdown()).await;
        producer.shutdown();
        rolling.shutdown();
    });
}

/// Messages `0..40` with `color` red for even indexes and blue for odd ones, `size` the
/// index, and the tag `TagA`: a SQL92 expression read as tags would match none of them.
fn colored_messages(topic: &str) -> Vec<Message> {
    (0..40)
        .map(|index| {
            let color = if index % 2 == 0 { "red" } else { "blue" };
            Message::new(topic, format!("m{index}"))
                .with_tags("TagA")
                .with_property("color", color)
                .and_then(|message| message.with_property("size", index.to_string()))
                .unwrap()
        })
        .collect()
}

// Proves a SQL92 subscription (async push, lite pull and blocking push consumers, on a
// broker with enablePropertyFilter) receives exactly the messages its expression selects,
// none filtered away client-side by tag, and that an expression that does not compile is
// refused at subscribe.
#[test]
fn sql92_subscriptions_receive_only_matching_messages() {
    let live = Live::start("client-aapi-sql", &["-o", "enablePropertyFilter=true"]);
    // One queue: what comes after the marker was sent after it.
    let topic = live.create_topic("aapi_sql", 1);
    const EXPRESSION: &str = "color = 'red' AND size >= 10";
    let mut expected: BTreeSet<String> = (10..40)
        .filter(|index| index % 2 == 0)
        .map(|index| format!("m{index}"))
        .collect();
    expected.insert("marker".into());
    let marker = || {
        Message::new(topic.as_str(), "marker")
            .with_property("color", "red")
            .and_then(|message| message.with_property("size", "1000"))
            .unwrap()
    };

    let blocking_seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
    let sink = blocking_seen.clone();
    let listener = MessageListener::concurrently(move |messages, _| {
        sink.lock().unwrap().extend(messages.iter().map(body_of));
        ConsumeConcurrentlyStatus::ConsumeSuccess
    });
    let blocking = PushConsumer::new(
        PushConsumerConfig::new(consumer_config(&live, &unique("aapi_sql_blocking"))),
        listener,
    )
    .unwrap();
    assert!(matches!(
        blocking.subscribe_sql(&topic, "color = "),
        Err(ClientError::Invalid(_))
    ));
    blocking.subscribe_sql(&topic, EXPRESSION).unwrap();
    blocking.start().unwrap();

    runtime().block_on(async {
        let producer = producer(&live);
        for message in colored_messages(&topic) {
            within("a send", producer.send(message)).await.unwrap();
        }

        let push_seen: Arc<Mutex<BTreeSet<String>>> = Arc::default();
        let sink = push_seen.clone();
        let listener = AsyncMessageListener::concurrently(move |messages, _| {
            let sink = sink.clone();
            async move {
                sink.lock().unwrap().extend(messages.iter().map(body_of));
                ConsumeConcurrentlyStatus::ConsumeSuccess
            }
        });
        let config = AsyncPushConsumerConfig::new(consumer_config(&live, &unique("aapi_sql")));
        let push = AsyncPushConsumer::new(config, listener).unwrap();
        assert!(matches!(
            push.subscribe_sql(&topic, "size > 'abc'"),
            Err(ClientError::Invalid(_))
        ));
        push.subscribe_sql(&topic, EXPRESSION).unwrap();
        within("the push consumer's start", push.start())
            .await
            .unwrap();

        let config = LitePullConfig::new(consumer_config(&live, &unique("aapi_sql_lite")));
        let lite = AsyncLitePullConsumer::new(config).unwrap();
        lite.subscribe_sql(&topic, EXPRESSION).unwrap();
        within("the lite consumer's start", lite.start())
            .await
            .unwrap();

        // Sent last: once a consumer has it, it has had every matching message before it.
        within("the marker", producer.send(marker())).await.unwrap();
        let mut stream = lite.clone();
        let lite_seen: BTreeSet<String> = stream_until(&mut stream, |seen| {
            seen.iter().any(|message| body_of(message) == "marker")
        })
        .await
        .iter()
        .filter(|m| m.topic == topic)
        .map(body_of)
        .collect();
        assert_eq!(lite_seen, expected, "lite pull consumer");
        until("the push consumer's marker", || {
            push_seen.lock().unwrap().contains("marker")
        })
        .await;
        assert_eq!(*push_seen.lock().unwrap(), expected, "async push consumer");
        until("the blocking consumer's marker", || {
            blocking_seen.lock().unwrap().contains("marker")
        })
        .await;
        assert_eq!(
            *blocking_seen.lock().unwrap(),
            expected,
            "blocking push consumer"
        );

        within("the push consumer's shutdown", push.shutdown()).await;
        within("the lite consumer's shutdown", lite.shutdown()).await;
        producer.shutdown();
    });
    blocking.shutdown();
}
