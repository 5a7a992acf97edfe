//! The scenarios of the Java suite (issue 8 point 1), driven through comet-client: sync,
//! async, one-way, batch and ordered sends, a delay level, push consumers (clustering with two
//! members, broadcasting, concurrently and orderly, tag filters) and the lite pull consumer
//! in subscribe and assign modes. Message counts are modest (hundreds) so the suite runs in
//! a minute or two; every wait is bounded.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use comet_client::{
    LitePullConsumer, MessageExt, MessageModel, MessageQueue, Producer, PushConsumer, SendResult,
    SendStatus,
};

use crate::check::{self, ensure, wait_for, Failure, Outcome, Sent};
use crate::collector::Collector;
use crate::ctx::{Ctx, QUEUES};

const TAGS_AB: &[&str] = &["TagA", "TagB"];
const TAGS_ABC: &[&str] = &["TagA", "TagB", "TagC"];
/// Bodies above 4 KiB are compressed by the producer: every 25th message is this large.
const LARGE_BODY_BYTES: usize = 8 * 1024;
/// Longest wait for messages to arrive.
const ARRIVAL_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for two members to split the queues.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);
/// Longest wait for every async send callback.
const CALLBACK_TIMEOUT: Duration = Duration::from_secs(30);
/// Lets a wrongly delivered (filtered) message show up before the final check.
const LATE_ARRIVAL_GRACE: Duration = Duration::from_millis(500);

/// A scenario body.
pub type Scenario = fn(&Ctx) -> Outcome;

/// Every scenario, in run order.
pub fn all() -> Vec<(&'static str, Scenario)> {
    vec![
        ("producer_sync", producer_sync),
        ("producer_async", producer_async),
        ("producer_oneway", producer_oneway),
        ("producer_batch", producer_batch),
        ("producer_ordered_selector", producer_ordered),
        ("delay_level_1", delay_level),
        ("push_clustering_concurrently", |c| {
            push_clustering(c, false)
        }),
        ("push_clustering_orderly", |c| push_clustering(c, true)),
        ("push_broadcasting_concurrently", |c| {
            push_broadcasting(c, false)
        }),
        ("push_broadcasting_orderly", |c| push_broadcasting(c, true)),
        ("lite_pull_subscribe", lite_pull_subscribe),
        ("lite_pull_assign", lite_pull_assign),
    ]
}

fn plain(ctx: &Ctx, topic: &str, count: u32, tags: &[&str]) -> Vec<Sent> {
    (0..count)
        .map(|i| {
            let body = if i % 25 == 0 {
                LARGE_BODY_BYTES
            } else {
                100 + (i as usize % 300)
            };
            check::make(ctx.run_id(), topic, i, tags, body, 0, i)
        })
        .collect()
}

/// `orders` order ids with `per_order` messages each, interleaved as sent.
fn ordered(ctx: &Ctx, topic: &str, orders: u32, per_order: u32) -> Vec<Sent> {
    (0..orders * per_order)
        .map(|i| check::make(ctx.run_id(), topic, i, TAGS_AB, 120, i % orders, i / orders))
        .collect()
}

/// Puts each order id on one queue, as applications do with a business key.
fn by_order_id(order_id: u32) -> impl Fn(&[MessageQueue], &comet_client::Message) -> usize {
    move |queues, _| order_id as usize % queues.len()
}

fn check_send_ok(result: &SendResult, sent: &Sent) -> Result<(), Failure> {
    ensure(result.status == SendStatus::SendOk, || {
        format!("send of {} returned {result:?}", sent.cid)
    })?;
    ensure(
        !result.msg_id.is_empty() && !result.offset_msg_id.is_empty() && result.queue_offset >= 0,
        || format!("send result lacks ids/offset: {result:?}"),
    )?;
    ensure(result.queue.topic == sent.topic, || {
        format!("result names topic {}", result.queue.topic)
    })
}

/// Starts one push consumer reading the whole topic and waits until it got every message.
fn consume_all(ctx: &Ctx, topic: &str, sent: &[Sent]) -> Outcome {
    let got = Collector::new();
    ctx.push_consumer(
        &ctx.name("cg"),
        MessageModel::Clustering,
        topic,
        "*",
        got.concurrently(),
    )?;
    wait_for(
        &format!("{} messages", sent.len()),
        ARRIVAL_TIMEOUT,
        || got.distinct_count() >= sent.len(),
        || format!("got {}", got.distinct_count()),
    )?;
    check::verify(sent, &got.arrivals(), false)
}

fn producer_sync(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let producer = ctx.producer()?;
    let sent = plain(ctx, &topic, 200, TAGS_AB);
    let mut last_offset: HashMap<i32, i64> = HashMap::new();
    for s in &sent {
        let result = producer.send(s.to_message()?)?;
        check_send_ok(&result, s)?;
        let prev = last_offset.insert(result.queue.queue_id, result.queue_offset);
        ensure(prev.is_none_or(|p| result.queue_offset == p + 1), || {
            format!(
                "queue offsets not consecutive: {prev:?} then {}",
                result.queue_offset
            )
        })?;
    }
    consume_all(ctx, &topic, &sent)
}

fn producer_async(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let producer = ctx.producer()?;
    let sent = plain(ctx, &topic, 200, TAGS_AB);
    let (results, outcomes) = mpsc::channel();
    for (index, s) in sent.iter().enumerate() {
        let results = results.clone();
        producer.send_async(s.to_message()?, move |outcome| {
            // The receiver outlives every callback unless the scenario already failed.
            let _ = results.send((index, outcome));
        })?;
    }
    let deadline = Instant::now() + CALLBACK_TIMEOUT;
    for _ in 0..sent.len() {
        let left = deadline.saturating_duration_since(Instant::now());
        let (index, outcome) = outcomes
            .recv_timeout(left)
            .map_err(|_| Failure::Check("async callbacks did not all arrive in 30 s".into()))?;
        let result = outcome.map_err(|e| Failure::Check(format!("async send failed: {e}")))?;
        check_send_ok(&result, &sent[index])?;
    }
    consume_all(ctx, &topic, &sent)
}

fn producer_oneway(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let producer = ctx.producer()?;
    let sent = plain(ctx, &topic, 100, TAGS_AB);
    for s in &sent {
        producer.send_oneway(s.to_message()?)?;
    }
    consume_all(ctx, &topic, &sent)
}

fn producer_batch(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let producer = ctx.producer()?;
    let sent: Vec<Sent> = (0..200)
        .map(|i| check::make(ctx.run_id(), &topic, i, TAGS_AB, 200 + i as usize, 0, i))
        .collect();
    for chunk in sent.chunks(50) {
        let messages = chunk
            .iter()
            .map(Sent::to_message)
            .collect::<Result<Vec<_>, _>>()?;
        let results = producer.send_batch(messages)?;
        ensure(results.len() == 1, || {
            format!("50 small messages went out as {} requests", results.len())
        })?;
        check_send_ok(&results[0], &chunk[0])?;
        let ids = results[0].msg_id.split(',').count();
        let offset_ids = results[0].offset_msg_id.split(',').count();
        ensure(ids == 50 && offset_ids == 50, || {
            format!("batch result should carry 50 ids, got {ids} and {offset_ids} offset ids")
        })?;
    }
    consume_all(ctx, &topic, &sent)
}

fn send_ordered(producer: &Producer, sent: &[Sent]) -> Result<(), Failure> {
    let mut queue_of_order: HashMap<u32, i32> = HashMap::new();
    for s in sent {
        let result = producer.send_with_selector(s.to_message()?, by_order_id(s.order_id))?;
        check_send_ok(&result, s)?;
        let queue = *queue_of_order
            .entry(s.order_id)
            .or_insert(result.queue.queue_id);
        ensure(queue == result.queue.queue_id, || {
            format!("order {} moved between queues", s.order_id)
        })?;
    }
    Ok(())
}

fn producer_ordered(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let producer = ctx.producer()?;
    let sent = ordered(ctx, &topic, 4, 50);
    send_ordered(&producer, &sent)?;
    let got = Collector::new();
    ctx.push_consumer(
        &ctx.name("cg"),
        MessageModel::Clustering,
        &topic,
        "*",
        got.orderly(),
    )?;
    wait_for(
        &format!("{} messages", sent.len()),
        ARRIVAL_TIMEOUT,
        || got.distinct_count() >= sent.len(),
        || format!("got {}", got.distinct_count()),
    )?;
    let arrivals = got.arrivals();
    check::in_order_per_order_id(&arrivals)?;
    Ok(check::verify(&sent, &arrivals, false)? + ", in order")
}

/// Level 1 is 1 s: the earliest arrival shows the level was honoured. One late message is
/// tolerated up to 40 s (a client that misses a round trip on a loaded machine recovers on
/// its 30 s timers).
fn delay_level(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let got = Collector::new();
    ctx.push_consumer(
        &ctx.name("cg"),
        MessageModel::Clustering,
        &topic,
        "*",
        got.concurrently(),
    )?;
    let producer = ctx.producer()?;
    // A plain probe first: delays are measured only once the consumer is pulling.
    let mut sent = plain(ctx, &topic, 21, TAGS_AB);
    let probe = sent.pop().expect("21 messages were made");
    check_send_ok(&producer.send(probe.to_message()?)?, &probe)?;
    wait_for(
        "the probe message",
        ARRIVAL_TIMEOUT,
        || got.distinct_count() >= 1,
        String::new,
    )?;
    let mut sent_at = HashMap::new();
    for s in &sent {
        sent_at.insert(s.cid.clone(), Instant::now());
        let result = producer.send(s.to_message()?.with_delay_level(1))?;
        check_send_ok(&result, s)?;
    }
    wait_for(
        &format!("{} delayed messages", sent.len()),
        ARRIVAL_TIMEOUT,
        || got.distinct_count() > sent.len(),
        || format!("got {}", got.distinct_count()),
    )?;
    let mut delays_ms = Vec::new();
    for s in &sent {
        let arrived = got
            .first_arrival(&s.cid)
            .ok_or_else(|| Failure::Check(format!("{} counted but has no arrival time", s.cid)))?;
        delays_ms.push(
            arrived
                .saturating_duration_since(sent_at[&s.cid])
                .as_millis(),
        );
    }
    let min = delays_ms.iter().copied().min().unwrap_or(0);
    let max = delays_ms.iter().copied().max().unwrap_or(0);
    ensure(min >= 900, || {
        format!("a level-1 message arrived after only {min} ms")
    })?;
    ensure(min <= 4_000, || {
        format!("the first level-1 message took {min} ms")
    })?;
    ensure(max <= 40_000, || format!("a level-1 message took {max} ms"))?;
    sent.push(probe);
    Ok(check::verify(&sent, &got.arrivals(), false)? + &format!(", delay {min}..{max} ms"))
}

fn queue_ids(consumer: &PushConsumer, topic: &str) -> BTreeSet<i32> {
    consumer
        .assigned_queues()
        .into_iter()
        .filter(|q| q.topic == topic)
        .map(|q| q.queue_id)
        .collect()
}

/// Waits until the two members hold two queues each, covering all four; describes the split.
fn wait_for_split(members: &[PushConsumer], topic: &str) -> Result<String, Failure> {
    let describe = || {
        format!(
            "queues {:?}/{:?}",
            queue_ids(&members[0], topic),
            queue_ids(&members[1], topic)
        )
    };
    wait_for(
        "two members to hold two queues each",
        SETTLE_TIMEOUT,
        || {
            let (qa, qb) = (queue_ids(&members[0], topic), queue_ids(&members[1], topic));
            qa.len() == 2 && qb.len() == 2 && qa.union(&qb).count() == QUEUES
        },
        describe,
    )?;
    Ok(describe())
}

/// Sends every message synchronously, through the order-id selector when `orderly`.
fn send_all(producer: &Producer, sent: &[Sent], orderly: bool) -> Result<(), Failure> {
    if orderly {
        return send_ordered(producer, sent);
    }
    for s in sent {
        check_send_ok(&producer.send(s.to_message()?)?, s)?;
    }
    Ok(())
}

/// Two members of one group split the four queues two and two; messages sent afterwards all
/// arrive, each member gets some, and tag filtering ("TagA || TagB") keeps TagC out. The
/// orderly variant also needs the broker's queue locks and keeps per-order sequence.
fn push_clustering(ctx: &Ctx, orderly: bool) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let group = ctx.name("cg");
    let (a, b) = (Collector::new(), Collector::new());
    let filter = if orderly { "*" } else { "TagA || TagB" };
    let mut members = Vec::new();
    for collector in [&a, &b] {
        let listener = if orderly {
            collector.orderly()
        } else {
            collector.concurrently()
        };
        members.push(ctx.push_consumer(
            &group,
            MessageModel::Clustering,
            &topic,
            filter,
            listener,
        )?);
    }
    let settle = Instant::now();
    let split = wait_for_split(&members, &topic)?;
    let send = Instant::now();
    let sent = if orderly {
        ordered(ctx, &topic, 8, 25)
    } else {
        plain(ctx, &topic, 300, TAGS_ABC)
    };
    send_all(&ctx.producer()?, &sent, orderly)?;
    let expected: Vec<Sent> = sent.into_iter().filter(|s| s.tags != "TagC").collect();
    let arrive = Instant::now();
    let union = || a.distinct().union(&b.distinct()).count();
    wait_for(
        &format!("{} messages across both members", expected.len()),
        ARRIVAL_TIMEOUT,
        || union() >= expected.len(),
        || format!("got {}", union()),
    )?;
    let phases = format!(
        "settle {:.1} s, send {:.1} s, arrive {:.1} s",
        (send - settle).as_secs_f64(),
        (arrive - send).as_secs_f64(),
        arrive.elapsed().as_secs_f64()
    );
    std::thread::sleep(LATE_ARRIVAL_GRACE);
    let mut all = a.arrivals();
    all.extend(b.arrivals());
    let verdict = check::verify(&expected, &all, true)?;
    ensure(a.distinct_count() > 0 && b.distinct_count() > 0, || {
        format!(
            "one member got nothing: {}/{}",
            a.distinct_count(),
            b.distinct_count()
        )
    })?;
    if orderly {
        check::in_order_per_order_id(&a.arrivals())?;
        check::in_order_per_order_id(&b.arrivals())?;
    }
    Ok(format!(
        "{verdict}, {split}, split {}/{}{}, {phases}",
        a.distinct_count(),
        b.distinct_count(),
        if orderly { ", in order" } else { "" }
    ))
}

/// Both members of a broadcasting group get every TagA message and nothing else; the orderly
/// variant also keeps each order's sequence (with gaps where TagB messages were filtered).
fn push_broadcasting(ctx: &Ctx, orderly: bool) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let group = ctx.name("cg");
    let collectors = [Collector::new(), Collector::new()];
    for collector in &collectors {
        let listener = if orderly {
            collector.orderly()
        } else {
            collector.concurrently()
        };
        ctx.push_consumer(&group, MessageModel::Broadcasting, &topic, "TagA", listener)?;
    }
    let send = Instant::now();
    let sent = if orderly {
        ordered(ctx, &topic, 4, 40)
    } else {
        plain(ctx, &topic, 160, TAGS_AB)
    };
    send_all(&ctx.producer()?, &sent, orderly)?;
    let expected: Vec<Sent> = sent.into_iter().filter(|s| s.tags == "TagA").collect();
    let arrive = Instant::now();
    wait_for(
        &format!("{} messages at each member", expected.len()),
        ARRIVAL_TIMEOUT,
        || {
            collectors
                .iter()
                .all(|c| c.distinct_count() >= expected.len())
        },
        || {
            let counts: Vec<usize> = collectors.iter().map(|c| c.distinct_count()).collect();
            format!("members got {counts:?}")
        },
    )?;
    let phases = format!(
        "send {:.1} s, arrive {:.1} s",
        (arrive - send).as_secs_f64(),
        arrive.elapsed().as_secs_f64()
    );
    std::thread::sleep(LATE_ARRIVAL_GRACE);
    let mut verdict = String::new();
    for collector in &collectors {
        let arrivals = collector.arrivals();
        verdict = check::verify(&expected, &arrivals, false)?;
        if orderly {
            check::increasing_per_order_id(&arrivals)?;
        }
    }
    Ok(format!(
        "2 members, each: {verdict}{}, {phases}",
        if orderly { ", in order" } else { "" }
    ))
}

fn send_all_sync(ctx: &Ctx, topic: &str, count: u32) -> Result<Vec<Sent>, Failure> {
    let producer = ctx.producer()?;
    let sent = plain(ctx, topic, count, TAGS_AB);
    for s in &sent {
        check_send_ok(&producer.send(s.to_message()?)?, s)?;
    }
    Ok(sent)
}

fn poll_until(consumer: &LitePullConsumer, want: usize) -> Result<Vec<MessageExt>, Failure> {
    let mut got = Vec::new();
    let mut distinct = HashSet::new();
    let deadline = Instant::now() + ARRIVAL_TIMEOUT;
    while distinct.len() < want {
        ensure(Instant::now() < deadline, || {
            format!("poll got {} of {want} messages in time", distinct.len())
        })?;
        for message in consumer.poll(Duration::from_secs(1)) {
            distinct.insert(check::cid(&message).to_owned());
            got.push(message);
        }
    }
    Ok(got)
}

/// Subscribe mode: the consumer rebalances, pulls from the first offset, commits; the
/// broker's consume stats must then show no lag on any queue.
fn lite_pull_subscribe(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let sent = send_all_sync(ctx, &topic, 200)?;
    let group = ctx.name("cg");
    let consumer = ctx.lite_pull_consumer(&group)?;
    consumer.subscribe(&topic, "*")?;
    consumer.start()?;
    let got = poll_until(&consumer, sent.len())?;
    check::in_order_per_queue(&got)?;
    let verdict = check::verify(&sent, &got, false)?;
    consumer.commit()?;
    let admin = &ctx.shared.admin;
    let state = std::sync::Mutex::new(String::new());
    wait_for(
        "committed offsets to reach the end of every queue",
        Duration::from_secs(15),
        || match admin.consume_stats(&group, &topic) {
            Ok(stats) => {
                let queues = stats.offset_table.len();
                let lag: i64 = stats
                    .offset_table
                    .values()
                    .map(|w| w.broker_offset - w.consumer_offset)
                    .sum();
                *state.lock().unwrap_or_else(|p| p.into_inner()) =
                    format!("consume stats: {queues} queues, lag {lag}");
                queues == QUEUES && lag == 0
            }
            Err(e) => {
                *state.lock().unwrap_or_else(|p| p.into_inner()) =
                    format!("consume stats failed: {e}");
                false
            }
        },
        || state.lock().unwrap_or_else(|p| p.into_inner()).clone(),
    )?;
    Ok(verdict + ", in order per queue, offsets committed")
}

/// Assign mode: explicit queues, seek to 0, no rebalance. The first deliveries of each queue
/// come in order; assign starts pulling at once from the group's start offset, so the seek
/// may deliver a queue's first messages again (allowed).
fn lite_pull_assign(ctx: &Ctx) -> Outcome {
    let topic = ctx.create_topic(&ctx.name("t"))?;
    let sent = send_all_sync(ctx, &topic, 200)?;
    let consumer = ctx.lite_pull_consumer(&ctx.name("cg"))?;
    consumer.start()?;
    let queues = consumer.fetch_message_queues(&topic)?;
    ensure(queues.len() == QUEUES, || {
        format!("fetch_message_queues returned {queues:?}")
    })?;
    consumer.assign(queues.clone());
    for queue in &queues {
        consumer.seek(queue, 0)?;
    }
    let got = poll_until(&consumer, sent.len())?;
    check::in_order_per_queue(&check::first_arrivals(&got))?;
    Ok(check::verify(&sent, &got, true)? + ", in order per queue")
}
