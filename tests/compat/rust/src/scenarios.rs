//! The scenarios: producer sync, async, one-way, batch and selector sends (each checked by a
//! push consumer) and a clustering push consumer whose two members split the queues and
//! filter by tag. Every wait is bounded.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::pin::Pin;
use std::time::{Duration, Instant};

use rocketmq_client_rust::{ClientError, DefaultMQProducer, DefaultMQPushConsumer};
use rocketmq_model::common::message::message_queue::MessageQueue;
use rocketmq_model::common::message::message_single::Message;
use rocketmq_model::result::{SendResult, SendStatus};

use crate::check::{self, Sent};
use crate::client::{Collector, Env};

/// A scenario's outcome: a detail line, or why it failed.
pub type Outcome = Result<String, String>;
/// A scenario body.
pub type Scenario = for<'a> fn(&'a Env, &'a str) -> Pin<Box<dyn Future<Output = Outcome> + 'a>>;

const TAGS_AB: &[&str] = &["TagA", "TagB"];
const TAGS_ABC: &[&str] = &["TagA", "TagB", "TagC"];
/// Longest wait for messages to arrive.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for every async send callback.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(30);
/// Async sends in flight at once.
const ASYNC_WINDOW: usize = 16;

/// Every scenario, in run order.
pub const ALL: &[(&str, Scenario)] = &[
    ("rust_producer_sync", |e, n| Box::pin(producer_sync(e, n))),
    ("rust_producer_async", |e, n| Box::pin(producer_async(e, n))),
    ("rust_producer_oneway", |e, n| {
        Box::pin(producer_oneway(e, n))
    }),
    ("rust_producer_batch", |e, n| Box::pin(producer_batch(e, n))),
    ("rust_producer_selector", |e, n| {
        Box::pin(producer_selector(e, n))
    }),
    ("rust_push_clustering", |e, n| {
        Box::pin(push_clustering(e, n))
    }),
];

fn messages(env: &Env, topic: &str, count: u32, tags: &[&str]) -> Vec<Sent> {
    (0..count)
        .map(|i| check::make(&env.run_id, topic, i, tags, i % 4))
        .collect()
}

fn check_result(
    result: Result<Option<SendResult>, ClientError>,
    sent: &Sent,
) -> Result<SendResult, String> {
    let result = result
        .map_err(|e| format!("send of {} failed: {e}", sent.cid))?
        .ok_or_else(|| format!("sync send of {} returned no result", sent.cid))?;
    check_send_ok(&result, sent)?;
    Ok(result)
}

fn check_send_ok(result: &SendResult, sent: &Sent) -> Result<(), String> {
    let queue_topic = result
        .message_queue
        .as_ref()
        .map(|q| q.topic_str().to_owned());
    if result.send_status != SendStatus::SendOk
        || result.msg_id.as_ref().is_none_or(|id| id.is_empty())
        || result.offset_msg_id.as_ref().is_none_or(|id| id.is_empty())
        || queue_topic.as_deref() != Some(sent.topic.as_str())
    {
        return Err(format!("bad send result for {}: {result:?}", sent.cid));
    }
    Ok(())
}

async fn wait_for(
    what: &str,
    mut done: impl FnMut() -> bool,
    state: impl Fn() -> String,
) -> Result<(), String> {
    let deadline = Instant::now() + ARRIVAL_TIMEOUT;
    while !done() {
        if Instant::now() > deadline {
            return Err(format!(
                "timed out after {} s waiting for {what} ({})",
                ARRIVAL_TIMEOUT.as_secs(),
                state()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Ok(())
}

/// Checks with one push consumer that every sent message arrives intact.
async fn consume_all(env: &Env, scenario: &str, topic: &str, sent: &[Sent]) -> Outcome {
    let got = Collector::new();
    let mut consumer = env
        .push_consumer(&env.name("cg", scenario), topic, "*", &got)
        .await?;
    let waited = wait_for(
        &format!("{} messages", sent.len()),
        || got.distinct_count() >= sent.len(),
        || format!("got {}", got.distinct_count()),
    )
    .await;
    consumer.shutdown().await;
    waited?;
    check::verify(sent, &got.arrivals(), false)
}

async fn with_producer<F, Fut>(env: &Env, scenario: &str, body: F) -> Outcome
where
    F: FnOnce(DefaultMQProducer, String) -> Fut,
    Fut: Future<Output = (DefaultMQProducer, Result<Vec<Sent>, String>)>,
{
    let topic = env.create_topic(&env.name("t", scenario)).await?;
    let producer = env.producer(scenario).await?;
    let (mut producer, sent) = body(producer, topic.clone()).await;
    producer.shutdown().await;
    consume_all(env, scenario, &topic, &sent?).await
}

async fn producer_sync(env: &Env, scenario: &str) -> Outcome {
    with_producer(env, scenario, |producer, topic| async move {
        let sent = messages(env, &topic, 200, TAGS_AB);
        let outcome = async {
            let mut last: HashMap<i32, u64> = HashMap::new();
            for s in &sent {
                let result = check_result(producer.send(s.to_message()?).await, s)?;
                let queue = result.message_queue.as_ref().map_or(-1, |q| q.queue_id());
                if let Some(prev) = last.insert(queue, result.queue_offset) {
                    if result.queue_offset != prev + 1 {
                        return Err(format!(
                            "queue {queue} offsets not consecutive: {prev} then {}",
                            result.queue_offset
                        ));
                    }
                }
            }
            Ok(sent.clone())
        }
        .await;
        (producer, outcome)
    })
    .await
}

async fn producer_async(env: &Env, scenario: &str) -> Outcome {
    with_producer(env, scenario, |producer, topic| async move {
        let sent = messages(env, &topic, 200, TAGS_AB);
        let outcome = async {
            let (results, mut outcomes) = tokio::sync::mpsc::unbounded_channel();
            let deadline = tokio::time::Instant::now() + CALLBACK_TIMEOUT;
            let mut pending = 0;
            for (index, s) in sent.iter().enumerate() {
                // A window of sends in flight: this client refuses a burst beyond its transport
                // admission queue ("transport.admission.queue_saturated").
                if pending == ASYNC_WINDOW {
                    await_callback(&mut outcomes, deadline, &sent).await?;
                    pending -= 1;
                }
                let results = results.clone();
                let callback = move |ok: Option<&SendResult>, err: Option<&ClientError>| {
                    // The receiver outlives every callback unless the scenario already failed.
                    let _ = results.send((index, ok.cloned(), err.map(|e| e.to_string())));
                };
                producer
                    .send_with_callback(s.to_message()?, callback)
                    .await
                    .map_err(|e| format!("async send refused: {e}"))?;
                pending += 1;
            }
            for _ in 0..pending {
                await_callback(&mut outcomes, deadline, &sent).await?;
            }
            Ok(sent.clone())
        }
        .await;
        (producer, outcome)
    })
    .await
}

type CallbackOutcome = (usize, Option<SendResult>, Option<String>);

/// Waits for one async send callback and checks its result.
async fn await_callback(
    outcomes: &mut tokio::sync::mpsc::UnboundedReceiver<CallbackOutcome>,
    deadline: tokio::time::Instant,
    sent: &[Sent],
) -> Result<(), String> {
    let (index, ok, err) = tokio::time::timeout_at(deadline, outcomes.recv())
        .await
        .map_err(|_| "async callbacks did not all arrive in 30 s".to_owned())?
        .ok_or("the callback channel closed")?;
    match (ok, err) {
        (Some(result), _) => check_send_ok(&result, &sent[index]),
        (None, err) => Err(format!("async send of {} failed: {err:?}", sent[index].cid)),
    }
}

async fn producer_oneway(env: &Env, scenario: &str) -> Outcome {
    with_producer(env, scenario, |producer, topic| async move {
        let sent = messages(env, &topic, 100, TAGS_AB);
        let outcome = async {
            for s in &sent {
                producer
                    .send_oneway(s.to_message()?)
                    .await
                    .map_err(|e| format!("one-way send failed: {e}"))?;
            }
            Ok(sent.clone())
        }
        .await;
        (producer, outcome)
    })
    .await
}

async fn producer_batch(env: &Env, scenario: &str) -> Outcome {
    with_producer(env, scenario, |producer, topic| async move {
        let sent = messages(env, &topic, 200, TAGS_AB);
        let outcome = async {
            for chunk in sent.chunks(50) {
                let batch = chunk
                    .iter()
                    .map(Sent::to_message)
                    .collect::<Result<Vec<Message>, _>>()?;
                let result = producer
                    .send_batch(batch)
                    .await
                    .map_err(|e| format!("batch send failed: {e}"))?;
                check_send_ok(&result, &chunk[0])?;
                let offset_ids = result
                    .offset_msg_id
                    .as_deref()
                    .unwrap_or("")
                    .split(',')
                    .count();
                if offset_ids != chunk.len() {
                    return Err(format!(
                        "batch result should carry {} offset ids, got {offset_ids}: {result:?}",
                        chunk.len()
                    ));
                }
            }
            Ok(sent.clone())
        }
        .await;
        (producer, outcome)
    })
    .await
}

/// Puts each order id on one queue, as applications do with a business key.
fn by_order_id(
    queues: &[MessageQueue],
    _message: &Message,
    order_id: &u32,
) -> Option<MessageQueue> {
    queues
        .get(*order_id as usize % queues.len().max(1))
        .cloned()
}

async fn producer_selector(env: &Env, scenario: &str) -> Outcome {
    with_producer(env, scenario, |producer, topic| async move {
        let sent = messages(env, &topic, 200, TAGS_AB);
        let outcome = async {
            let mut queue_of_order: HashMap<u32, i32> = HashMap::new();
            for s in &sent {
                let result = check_result(
                    producer
                        .send_with_selector(s.to_message()?, by_order_id, s.order_id)
                        .await,
                    s,
                )?;
                let queue = result.message_queue.as_ref().map_or(-1, |q| q.queue_id());
                if *queue_of_order.entry(s.order_id).or_insert(queue) != queue {
                    return Err(format!("order {} moved between queues", s.order_id));
                }
            }
            Ok(sent.clone())
        }
        .await;
        (producer, outcome)
    })
    .await
}

/// Two members of one group split the queues; every TagA/TagB message sent after both
/// started arrives at one of them, each gets some, TagC is filtered out.
async fn push_clustering(env: &Env, scenario: &str) -> Outcome {
    let topic = env.create_topic(&env.name("t", scenario)).await?;
    let group = env.name("cg", scenario);
    let (a, b) = (Collector::new(), Collector::new());
    let mut members: Vec<DefaultMQPushConsumer> = Vec::new();
    let mut outcome = async {
        for collector in [&a, &b] {
            // No spaces around "||": this client hashes each tag before trimming it, so with
            // "TagA || TagB" it registers codes no tag has and every broker (Apache RocketMQ's
            // too) filters everything out.
            members.push(
                env.push_consumer(&group, &topic, "TagA||TagB", collector)
                    .await?,
            );
        }
        // The crate exposes no assignment: give the broker's "consumer ids changed" notice and
        // the rebalance a moment; the check allows duplicates from a later rebalance.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut producer = env.producer(scenario).await?;
        let sent = messages(env, &topic, 300, TAGS_ABC);
        let mut sending = Ok(());
        for s in &sent {
            let message = match s.to_message() {
                Ok(message) => message,
                Err(e) => {
                    sending = Err(e);
                    break;
                }
            };
            if let Err(e) = check_result(producer.send(message).await, s) {
                sending = Err(e);
                break;
            }
        }
        producer.shutdown().await;
        sending?;
        Ok(sent
            .into_iter()
            .filter(|s| s.tags != "TagC")
            .collect::<Vec<_>>())
    }
    .await;
    if let Ok(expected) = &outcome {
        let union = || {
            let mut seen = HashSet::new();
            for m in a.arrivals().iter().chain(b.arrivals().iter()) {
                seen.insert(check::cid(m));
            }
            seen.len()
        };
        if let Err(e) = wait_for(
            &format!("{} messages across both members", expected.len()),
            || union() >= expected.len(),
            || format!("got {}", union()),
        )
        .await
        {
            outcome = Err(e);
        }
        // Lets a wrongly delivered TagC message show up before the check.
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    for member in &mut members {
        member.shutdown().await;
    }
    let expected = outcome?;
    let mut all = a.arrivals();
    all.extend(b.arrivals());
    let detail = check::verify(&expected, &all, true)?;
    if a.distinct_count() == 0 || b.distinct_count() == 0 {
        return Err(format!(
            "queues not split: member a got {}, member b got {}",
            a.distinct_count(),
            b.distinct_count()
        ));
    }
    Ok(format!(
        "{detail}, split {}/{}",
        a.distinct_count(),
        b.distinct_count()
    ))
}
