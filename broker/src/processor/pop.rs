//! POP_MESSAGE (200050), docs/protocol.md#pop-requests (Java's `PopMessageProcessor`).
//!
//! [`process`] runs where the request arrived. It checks the request as Java does, then pops
//! queue by queue: each queue's pop runs on the shard owning it ([`pop_one_queue`], one
//! POP_MESSAGE per queue with that queue's id and no poll time), and the answers are joined
//! into one: the messages, `restNum` summed, the offset-info strings joined. Which queues:
//! the one asked for, or every queue of the topic for queue id -1, starting at a random one;
//! and the group's pop retry topic, first in 20% of pops and otherwise after the topic when
//! the pop is not full yet (Java's `popFromRetryProbability`).
//!
//! An orderly pop (`order=true`) reads no retry topic, takes nothing from a queue whose
//! last messages are unacked and invisible, and answers Java's revive queue id 999 with the
//! delivery counts (`orderCountInfo`); see `crate::pop::order`.
//!
//! A filter (`expType`, `exp`) applies to the topic's queues and to the retry topic's, as
//! in Java: a TAG expression by tag code, a SQL92 one (docs/protocol.md#sql92-property-filters)
//! by its selector, compiled once per shard, group, topic and text. Messages it drops are
//! skipped: the pop position moves past them, and a round that only skipped is followed by
//! another at once.
//!
//! When nothing is found and the request allows polling, the pop waits and tries again
//! until `pollTime` has passed since it arrived: woken at once by a message arriving in a
//! queue this shard owns, and looking again every [`RECHECK_REMOTE_MS`] when some queue
//! lives on another shard (whose arrivals this shard does not see). Nothing found in the
//! end is answered POLLING_TIMEOUT, as Java does.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

use comet_proto::bytes::{Bytes, BytesMut};
use comet_proto::filter::{is_tag_type, TagSubscription, EXPRESSION_TYPE_SQL92};
use comet_proto::headers::{PopMessageRequestHeader, PopMessageResponseHeader};
use comet_proto::sql92::Selector;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use comet_rt::sync::race;
use comet_rt::task_class::{sleep, yield_if_needed};
use comet_store::QueueOffset;

use super::error;
use crate::pop::extra_info::{join_info, pop_retry_topic, push_info, push_order_count_info};
use crate::pop::take::{pop_queue, OrderPop, PopFilter, PopQueue};
use crate::pop::{revive_queue, POP_MESSAGES_MAX, RETRY_FIRST_PERCENT};
use crate::routing::on_owner;
use crate::shard::{RequestContext, ShardBroker};
use crate::topic::perm;

/// How late a pop may arrive (its client's `bornTime + pollTime` passed this long ago)
/// before it is refused (Java's `isTimeoutTooMuch`), ms.
pub const ARRIVAL_LATE_MAX_MS: i64 = 500;
/// Longest a pop polls, whatever it asks for (as long as a pull may hold, so a stopping
/// broker waits no longer for either).
pub const POLL_MAX: Duration = super::pull::SUSPEND_MAX;
/// How often a polling pop looks again at queues of other shards, ms.
pub const RECHECK_REMOTE_MS: u64 = 200;
/// The remark of one queue's empty answer when its pop position moved past messages the
/// filter drops (Java's store status name): the pop asks again at once.
const SKIPPED_REMARK: &str = "NO_MATCHED_MESSAGE";
/// How often a polling pop looks again when all its queues are here (their arrivals wake
/// it sooner), ms: covers a pop that waits for this shard's recovery.
pub const RECHECK_LOCAL_MS: u64 = 1000;

/// One queue a pop (or a peek, or a notification) reads.
pub(crate) struct Target {
    /// The queue's topic: the asked one or the group's pop retry topic.
    pub(crate) topic: String,
    /// Queue id.
    pub(crate) queue_id: i32,
    /// Whether `topic` is the pop retry topic.
    pub(crate) retry: bool,
}

/// What the queues read so far gave.
#[derive(Default)]
struct Joined {
    records: BytesMut,
    count: usize,
    rest: i64,
    start_offset_info: String,
    msg_offset_info: String,
    order_count_info: String,
    failure: Option<RemotingCommand>,
    /// Some queue's pop position moved past messages its filter drops.
    skipped: bool,
}

fn is_order(header: &PopMessageRequestHeader) -> bool {
    header.order == Some(true)
}

/// The revive queue id a pop's answer and receipts carry: this shard's revive queue, or
/// Java's mark of an orderly pop.
fn answer_revive_qid(broker: &ShardBroker, header: &PopMessageRequestHeader) -> i32 {
    if is_order(header) {
        crate::pop::ORDER_REVIVE_QUEUE
    } else {
        revive_queue(broker)
    }
}

/// Serves POP_MESSAGE where it arrived.
pub async fn process(
    broker: &ShardBroker,
    context: RequestContext,
    request: &RemotingCommand,
) -> RemotingCommand {
    if let Some(refused) = super::slave_refusal(broker, request) {
        return refused;
    }
    let mut header = match PopMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let arrived_ms = comet_rt::clock::wall_clock_ms();
    if header.born_time == 0 {
        header.born_time = arrived_ms;
    }
    if let Some(refused) = check(broker, request, &header, arrived_ms) {
        return refused;
    }
    let poll_ms = u64::try_from(header.poll_time).unwrap_or(0);
    let deadline = comet_rt::clock::monotonic_now() + Duration::from_millis(poll_ms).min(POLL_MAX);
    let mut polling = None;
    loop {
        let mut targets = targets(
            broker,
            &header.topic,
            &header.consumer_group,
            header.queue_id,
        );
        if is_order(&header) {
            // An orderly pop's messages come back from the queue itself, never through the
            // retry topic (Java reads no retry topic for it).
            targets.retain(|target| !target.retry);
        }
        let watched = watched(broker, &targets);
        let pop_time_ms = comet_rt::clock::wall_clock_ms();
        let joined = pop_round(broker, context, &header, &targets).await;
        let now = comet_rt::clock::monotonic_now();
        if joined.count > 0 || now >= deadline {
            return answer(broker, request, &header, joined, pop_time_ms);
        }
        if joined.skipped {
            // Positions moved past messages the filter drops, and more may follow: look
            // again now rather than wait for arrivals that are already there. Each round
            // moves forward, so this ends with the queues; a long run of skipped records
            // must not keep the shard from its other tasks.
            yield_if_needed().await;
            continue;
        }
        // Counted for POLLING_INFO from its first wait until it answers.
        polling.get_or_insert_with(|| {
            crate::pop::state::hold_polling(&header.topic, &header.consumer_group, header.queue_id)
        });
        wait_for_arrivals(broker, &watched, targets.len(), deadline - now).await;
    }
}

/// One wait of a polling request: until a message arrives past `watched` (the targets this
/// shard owns, with their ends), or `limit`, or the next look at the targets of other shards
/// (whose arrivals this shard does not see) when `watched` is not all of the `targets`.
pub(crate) async fn wait_for_arrivals(
    broker: &ShardBroker,
    watched: &[(String, i32, QueueOffset)],
    targets: usize,
    limit: Duration,
) {
    let recheck = if watched.len() < targets {
        RECHECK_REMOTE_MS
    } else {
        RECHECK_LOCAL_MS
    };
    let nap = limit.min(Duration::from_millis(recheck));
    let arrivals = AnyOf(
        watched
            .iter()
            .map(|(topic, queue_id, offset)| {
                broker
                    .queue_store(topic, *queue_id)
                    .wait_for_message(topic, *queue_id, *offset)
            })
            .collect(),
    );
    race(arrivals, sleep(nap)).await;
}

/// The topic, group and queue a pop-family request names.
pub(crate) struct Asked<'a> {
    /// The topic.
    pub(crate) topic: &'a str,
    /// The consumer group.
    pub(crate) group: &'a str,
    /// The queue id, or -1 for every queue.
    pub(crate) queue_id: i32,
}

/// The checks every pop-family processor of Java makes after its own, in Java's order: the
/// topic exists and is readable, the queue id is one of its read queues (else
/// `illegal_queue`), and the group exists (created when auto-creation is on, as Java's
/// `findSubscriptionGroupConfig`) and may consume.
pub(crate) fn check_topic_and_group(
    broker: &ShardBroker,
    request: &RemotingCommand,
    asked: &Asked<'_>,
    illegal_queue: ResponseCode,
) -> Option<RemotingCommand> {
    let topic = broker.topics().get(asked.topic).cloned();
    let Some(topic) = topic else {
        let remark = format!("topic[{}] not exist, apply first please!", asked.topic);
        return Some(error(request, ResponseCode::TOPIC_NOT_EXIST, remark));
    };
    if !perm::is_readable(topic.perm) {
        let remark = format!("the topic[{}] peeking message is forbidden", asked.topic);
        return Some(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    if asked.queue_id >= topic.read_queue_nums {
        let remark = format!(
            "queueId[{}] is illegal, topic:[{}] topicConfig.readQueueNums:[{}]",
            asked.queue_id, asked.topic, topic.read_queue_nums
        );
        return Some(error(request, illegal_queue, remark));
    }
    let auto_create = broker.config().auto_create_subscription_group;
    let group = broker.groups().get_or_create(asked.group, auto_create);
    let Some(group) = group else {
        let remark = format!("subscription group [{}] does not exist", asked.group);
        return Some(error(
            request,
            ResponseCode::SUBSCRIPTION_GROUP_NOT_EXIST,
            remark,
        ));
    };
    if !group.consume_enable {
        let remark = format!("subscription group no permission, {}", asked.group);
        return Some(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    None
}

/// Java's checks, in Java's order; the refusal when one fails.
fn check(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &PopMessageRequestHeader,
    arrived_ms: i64,
) -> Option<RemotingCommand> {
    let config = broker.config();
    let ip = config.broker_ip;
    if arrived_ms - header.born_time - header.poll_time > ARRIVAL_LATE_MAX_MS {
        let remark = format!("the broker[{ip}] pop message is timeout too much");
        return Some(error(request, ResponseCode::POLLING_TIMEOUT, remark));
    }
    if !perm::is_readable(config.broker_permission) {
        let remark = format!("the broker[{ip}] pop message is forbidden");
        return Some(error(request, ResponseCode::NO_PERMISSION, remark));
    }
    if header.max_msg_nums > POP_MESSAGES_MAX {
        let remark = format!("the broker[{ip}] pop message's num is greater than 32");
        return Some(error(request, ResponseCode::INVALID_PARAMETER, remark));
    }
    let asked = Asked {
        topic: &header.topic,
        group: &header.consumer_group,
        queue_id: header.queue_id,
    };
    if let Some(refused) =
        check_topic_and_group(broker, request, &asked, ResponseCode::INVALID_PARAMETER)
    {
        return Some(refused);
    }
    if let Err(refused) = compiled_filter(request, header) {
        return Some(refused);
    }
    None
}

/// The pop's filter as the owner of a queue applies it: `None` for a TAG expression (or
/// none), else the expression compiled on this shard (once per group, topic and text).
/// Java refuses an expression that does not compile, and an expression type it has no
/// filter for, with SUBSCRIPTION_PARSE_FAILED. Unlike a pull, a pop filters by SQL92
/// whatever `enablePropertyFilter` says, as Java's `PopMessageProcessor` does (only
/// CHECK_CLIENT_CONFIG and pulls read that switch).
fn compiled_filter(
    request: &RemotingCommand,
    header: &PopMessageRequestHeader,
) -> Result<Option<Rc<Selector>>, RemotingCommand> {
    let exp = header.exp.as_deref().unwrap_or("");
    let kind = header.exp_type.as_deref();
    if exp.is_empty() || is_tag_type(kind) {
        return Ok(None);
    }
    let compiled = (kind == Some(EXPRESSION_TYPE_SQL92))
        .then(|| crate::subscription::shard_selector(&header.consumer_group, &header.topic, exp))
        .and_then(Result::ok);
    compiled.map(Some).ok_or_else(|| {
        error(
            request,
            ResponseCode::SUBSCRIPTION_PARSE_FAILED,
            "parse the consumer's subscription failed",
        )
    })
}

/// The queues of one round, in the order they are read: `queue_id` of `topic` (every queue
/// for -1) and the queues of the group's pop retry topic, first in
/// [`RETRY_FIRST_PERCENT`] of rounds.
pub(crate) fn targets(
    broker: &ShardBroker,
    topic: &str,
    group: &str,
    queue_id: i32,
) -> Vec<Target> {
    let random = crate::pop::state::random_below(100);
    let retry_topic = pop_retry_topic(topic, group);
    let topics = broker.topics();
    let spread = |topic: &str, queues: i32, retry: bool| -> Vec<Target> {
        let queues = queues.max(0);
        (0..queues)
            .map(|i| Target {
                topic: topic.to_owned(),
                queue_id: (i + i32::try_from(random).unwrap_or(0)) % queues,
                retry,
            })
            .collect()
    };
    let retry_queues = topics.get(&retry_topic).map_or(0, |c| c.read_queue_nums);
    let retry = spread(&retry_topic, retry_queues, true);
    let own = if queue_id < 0 {
        let queues = topics.get(topic).map_or(0, |c| c.read_queue_nums);
        spread(topic, queues, false)
    } else {
        vec![Target {
            topic: topic.to_owned(),
            queue_id,
            retry: false,
        }]
    };
    if random < RETRY_FIRST_PERCENT {
        retry.into_iter().chain(own).collect()
    } else {
        own.into_iter().chain(retry).collect()
    }
}

/// The targets this shard owns, each with its end now (a message past it wakes the poll).
pub(crate) fn watched(broker: &ShardBroker, targets: &[Target]) -> Vec<(String, i32, QueueOffset)> {
    targets
        .iter()
        .filter(|target| broker.owns(&target.topic, target.queue_id))
        .map(|target| {
            let store = broker.queue_store(&target.topic, target.queue_id);
            let end = store.max_offset(&target.topic, target.queue_id);
            (target.topic.clone(), target.queue_id, end)
        })
        .collect()
}

/// Pops the targets in order, each on its owner, until the pop is full.
async fn pop_round(
    broker: &ShardBroker,
    context: RequestContext,
    header: &PopMessageRequestHeader,
    targets: &[Target],
) -> Joined {
    let wanted = usize::try_from(header.max_msg_nums).unwrap_or(0).max(1);
    let mut joined = Joined::default();
    for target in targets {
        if joined.count >= wanted {
            break;
        }
        let remaining = i32::try_from(wanted - joined.count).unwrap_or(POP_MESSAGES_MAX);
        let one = PopMessageRequestHeader {
            topic: target.topic.clone(),
            queue_id: target.queue_id,
            max_msg_nums: remaining,
            poll_time: 0,
            // The retry topic's queues are filtered as the topic's (Java pops both with the
            // same filter): its messages keep their tags and properties.
            ..header.clone()
        };
        let request = RemotingCommand::request(RequestCode::POP_MESSAGE, 0).with_header(&one);
        let answer = on_owner(broker, context, &target.topic, target.queue_id, request).await;
        let Some(answer) = answer else {
            continue;
        };
        join(&mut joined, answer);
    }
    joined
}

fn join(joined: &mut Joined, answer: RemotingCommand) {
    let code = answer.response_code();
    if code != ResponseCode::SUCCESS && code != ResponseCode::POLLING_TIMEOUT {
        joined.failure = Some(answer);
        return;
    }
    let Ok(header) = PopMessageResponseHeader::from_ext_fields(&answer.ext_fields) else {
        return;
    };
    joined.rest += header.rest_num;
    if code != ResponseCode::SUCCESS {
        joined.skipped |= answer.remark.as_deref() == Some(SKIPPED_REMARK);
        return;
    }
    joined.count += record_count(&answer.body);
    joined.records.extend_from_slice(&answer.body);
    join_info(
        &mut joined.start_offset_info,
        header.start_offset_info.as_deref().unwrap_or(""),
    );
    join_info(
        &mut joined.msg_offset_info,
        header.msg_offset_info.as_deref().unwrap_or(""),
    );
    join_info(
        &mut joined.order_count_info,
        header.order_count_info.as_deref().unwrap_or(""),
    );
}

/// How many stored records `body` holds, read from their length fields.
pub(crate) fn record_count(body: &[u8]) -> usize {
    let mut count = 0;
    let mut rest = body;
    while let Some((total, _)) = comet_proto::message::peek_total_size_and_magic(rest) {
        let Some(next) = usize::try_from(total).ok().filter(|total| *total > 0) else {
            break;
        };
        count += 1;
        rest = rest.get(next..).unwrap_or_default();
    }
    count
}

fn answer(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &PopMessageRequestHeader,
    joined: Joined,
    pop_time_ms: i64,
) -> RemotingCommand {
    if joined.count == 0 {
        if let Some(failure) = joined.failure {
            return RemotingCommand {
                opaque: request.opaque,
                ..failure
            };
        }
    }
    let order_count_info = (is_order(header) && !joined.order_count_info.is_empty())
        .then_some(joined.order_count_info);
    let response_header = PopMessageResponseHeader {
        pop_time: pop_time_ms,
        invisible_time: header.invisible_time,
        revive_qid: answer_revive_qid(broker, header),
        rest_num: joined.rest,
        start_offset_info: Some(joined.start_offset_info),
        msg_offset_info: Some(joined.msg_offset_info),
        order_count_info,
    };
    if joined.count == 0 {
        return RemotingCommand::response_to(request, ResponseCode::POLLING_TIMEOUT)
            .with_header(&response_header)
            .with_remark("NO_MESSAGE_IN_QUEUE");
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&response_header)
        .with_remark("FOUND")
        .with_body(joined.records.freeze())
}

/// Serves the pop of one queue on its owner (what [`process`] sends each queue).
pub async fn pop_one_queue(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match PopMessageRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    if header.queue_id < 0 {
        return error(request, ResponseCode::INVALID_PARAMETER, "no queue to pop");
    }
    let selector = match compiled_filter(request, &header) {
        Ok(selector) => selector,
        Err(refused) => return refused,
    };
    let subscription = TagSubscription::parse(header.exp.as_deref());
    let codes: Vec<i64> = subscription
        .codes()
        .iter()
        .map(|code| i64::from(*code))
        .collect();
    let filter = match &selector {
        Some(selector) => PopFilter::Sql(selector.as_ref()),
        None if subscription.is_all() => PopFilter::All,
        None => PopFilter::TagCodes(&codes),
    };
    let one = PopQueue {
        group: &header.consumer_group,
        topic: &header.topic,
        queue_id: header.queue_id,
        max_messages: usize::try_from(header.max_msg_nums.clamp(1, POP_MESSAGES_MAX)).unwrap_or(1),
        invisible_time_ms: header.invisible_time,
        init_mode: header.init_mode,
        filter,
        order: is_order(&header).then_some(OrderPop {
            attempt_id: header.attempt_id.as_deref(),
        }),
    };
    let pop_time_ms = comet_rt::clock::wall_clock_ms();
    let popped = match pop_queue(broker, &one, pop_time_ms).await {
        Ok(popped) => popped,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let mut start_offset_info = String::new();
    let mut msg_offset_info = String::new();
    if !popped.records.is_empty() {
        let start = popped.start_offset.to_string();
        push_info(
            &mut start_offset_info,
            &header.topic,
            header.queue_id,
            &start,
        );
        let offsets: Vec<String> = popped.offsets.iter().map(i64::to_string).collect();
        let offsets = offsets.join(",");
        push_info(
            &mut msg_offset_info,
            &header.topic,
            header.queue_id,
            &offsets,
        );
    }
    let mut order_count_info = None;
    if let Some(deliveries) = &popped.deliveries {
        let mut info = String::new();
        push_order_count_info(&mut info, &header.topic, header.queue_id, deliveries);
        order_count_info = Some(info);
    }
    let response_header = PopMessageResponseHeader {
        pop_time: pop_time_ms,
        invisible_time: header.invisible_time,
        revive_qid: answer_revive_qid(broker, &header),
        rest_num: popped.rest,
        start_offset_info: Some(start_offset_info),
        msg_offset_info: Some(msg_offset_info),
        order_count_info,
    };
    if popped.records.is_empty() {
        let remark = if popped.skipped {
            SKIPPED_REMARK
        } else {
            "NO_MESSAGE_IN_QUEUE"
        };
        return RemotingCommand::response_to(request, ResponseCode::POLLING_TIMEOUT)
            .with_header(&response_header)
            .with_remark(remark);
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_header(&response_header)
        .with_remark("FOUND")
        .with_body(concatenate(&popped.records))
}

fn concatenate(records: &[Bytes]) -> Bytes {
    let mut body = BytesMut::with_capacity(records.iter().map(Bytes::len).sum());
    for record in records {
        body.extend_from_slice(record);
    }
    body.freeze()
}

/// Resolves when any of its futures does (never, when it has none).
pub(crate) struct AnyOf<F>(pub(crate) Vec<F>);

impl<F: Future<Output = ()> + Unpin> Future for AnyOf<F> {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        for future in &mut self.0 {
            if Pin::new(future).poll(cx).is_ready() {
                return Poll::Ready(());
            }
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the count of a joined answer reads record lengths and stops, without a panic,
    // at a truncated or nonsensical length.
    #[test]
    fn record_count_reads_lengths_and_stops_at_garbage() {
        let mut body = Vec::new();
        for length in [12i32, 9] {
            body.extend_from_slice(&length.to_be_bytes());
            body.extend_from_slice(&0i32.to_be_bytes());
            body.resize(body.len() + usize::try_from(length).unwrap() - 8, 0);
        }
        assert_eq!(record_count(&body), 2);
        assert_eq!(record_count(&[0, 0, 0]), 0);
        assert_eq!(record_count(&[0, 0, 0, 0, 1, 2, 3, 4]), 0);
        assert_eq!(record_count(&[255, 255, 255, 255, 1, 2, 3, 4]), 0);
    }
}
