//! Message commands: queryMsgByKey, queryMsgById, queryMsgByUniqueKey, queryMsgByOffset,
//! queryCq, sendMessage, consumeMessage.

use comet_client::protocol::{
    self, get_max_offset, get_min_offset, pull_message, request, search_offset, PullRequest,
};
use comet_client::{Message, MessageQueue, Producer, ProducerConfig, QueueSelector};
use comet_proto::flags::pull as pull_flag;
use comet_proto::headers::QueryMessageRequestHeader;
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::{RequestCode, ResponseCode};
use serde_json::{json, Map, Value};

use super::now_ms;
use crate::context::Context;
use crate::error::{AdminError, Result};
use crate::output::{Report, Table};

/// The group tool pulls read as (Java's `MixAll.TOOLS_CONSUMER_GROUP`).
const TOOLS_CONSUMER_GROUP: &str = "TOOLS_CONSUMER";
/// The group sendMessage produces as (Java's default producer group).
const TOOLS_PRODUCER_GROUP: &str = "DEFAULT_PRODUCER";
/// Most messages one pull asks for.
const PULL_BATCH_MAX: i32 = 32;
/// Most bytes one pull asks for.
const PULL_BYTES_MAX: i32 = 4 << 20;
/// Most messages queryMsgByUniqueKey lists (mqadmin's limit).
const UNIQUE_KEY_MATCHES_MAX: i32 = 32;

/// `queryMsgByKey`.
#[derive(clap::Args, Clone, Debug)]
pub struct QueryMsgByKeyArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The key (KEYS or UNIQ_KEY).
    #[arg(short = 'k', long = "msgKey", alias = "key")]
    key: String,
    /// Stored at or after this time, ms since the epoch (default: `--hours` ago, else 0).
    #[arg(short = 'b', long = "beginTimestamp")]
    begin_ms: Option<i64>,
    /// Stored before this time, ms since the epoch (default: no limit).
    #[arg(short = 'e', long = "endTimestamp")]
    end_ms: Option<i64>,
    /// Stored in the last this many hours (Comet's shorthand for `-b`).
    #[arg(long = "hours", conflicts_with = "begin_ms")]
    hours: Option<i64>,
    /// Most messages per broker.
    #[arg(short = 'm', long = "maxNum", default_value_t = 64)]
    max_num: i32,
}

/// `queryMsgById`.
#[derive(clap::Args, Clone, Debug)]
pub struct QueryMsgByIdArgs {
    /// Offset message ids, `,`-separated; with `-t` a unique key (client id) works too.
    #[arg(short = 'i', long = "msgId", alias = "id")]
    ids: String,
    /// The topic, to look up ids that are unique keys.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
}

/// `queryMsgByUniqueKey`.
#[derive(clap::Args, Clone, Debug)]
pub struct QueryMsgByUniqueKeyArgs {
    /// The unique key (the id a producer's send returns).
    #[arg(short = 'i', long = "msgId")]
    id: String,
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Every stored copy (at most 32), not only the first.
    #[arg(short = 'a', long = "showAll")]
    show_all: bool,
}

/// `queryMsgByOffset`.
#[derive(clap::Args, Clone, Debug)]
pub struct QueryMsgByOffsetArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The broker name holding the queue.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
    /// The queue id.
    #[arg(short = 'i', long = "queueId")]
    queue_id: i32,
    /// The queue offset.
    #[arg(short = 'o', long = "offset")]
    offset: i64,
}

/// `queryCq`: consume-queue entries of one queue.
#[derive(clap::Args, Clone, Debug)]
pub struct QueryCqArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The queue id.
    #[arg(short = 'q', long = "queue", alias = "queue-id")]
    queue_id: i32,
    /// The broker, by address `ip:port` or by name (default: the route's first broker).
    #[arg(short = 'b', long = "broker", alias = "broker-name")]
    broker: Option<String>,
    /// First queue offset.
    #[arg(short = 'i', long = "index", default_value_t = 0)]
    index: i64,
    /// Entries to list.
    #[arg(short = 'c', long = "count", default_value_t = 10)]
    count: i32,
    /// Show this group's subscription too.
    #[arg(short = 'g', long = "consumer", alias = "group")]
    group: Option<String>,
}

/// `sendMessage`.
#[derive(clap::Args, Clone, Debug)]
pub struct SendMessageArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The body, as UTF-8 text.
    #[arg(short = 'p', long = "body")]
    body: String,
    /// Keys, space-separated.
    #[arg(short = 'k', long = "key")]
    keys: Option<String>,
    /// The tag.
    #[arg(short = 'c', long = "tags")]
    tags: Option<String>,
    /// To this broker (by name; with `-i`).
    #[arg(short = 'b', long = "broker", requires = "queue_id")]
    broker_name: Option<String>,
    /// To this queue of the broker `-b`.
    #[arg(short = 'i', long = "qid", requires = "broker_name")]
    queue_id: Option<i32>,
    /// Write a trace record of the send to `RMQ_SYS_TRACE_TOPIC` (mqadmin's `-m true`).
    #[arg(
        short = 'm',
        long = "msgTraceEnable",
        default_value_t = false,
        action = clap::ArgAction::Set
    )]
    msg_trace_enable: bool,
}

/// `consumeMessage`: pulls messages without committing any offset and prints them.
#[derive(clap::Args, Clone, Debug)]
pub struct ConsumeMessageArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Only queues of this broker.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: Option<String>,
    /// Only this queue (needs `-b`).
    #[arg(short = 'i', long = "queueId", requires = "broker_name")]
    queue_id: Option<i32>,
    /// From this queue offset (needs `-i`).
    #[arg(short = 'o', long = "offset", requires = "queue_id")]
    offset: Option<i64>,
    /// The group to pull as.
    #[arg(short = 'g', long = "consumerGroup", default_value = TOOLS_CONSUMER_GROUP)]
    group: String,
    /// From the first message stored at or after this time (ms since the epoch).
    #[arg(short = 's', long = "beginTimestamp")]
    begin_ms: Option<i64>,
    /// Up to the first message stored at or after this time (ms since the epoch).
    #[arg(short = 'e', long = "endTimestamp")]
    end_ms: Option<i64>,
    /// Most messages in all.
    #[arg(
        short = 'c',
        long = "MessageNumber",
        alias = "messageNumber",
        default_value_t = 128
    )]
    count: i64,
}

/// One line per message, `name=value` fields (the body last, quoted).
fn message_line(message: &MessageExt) -> String {
    format!(
        "msgId={} offsetMsgId={} topic={} queueId={} queueOffset={} tags={} keys={} \
         bornTimestamp={} storeTimestamp={} bodyBytes={} body={:?}",
        message.uniq_key().unwrap_or("-"),
        message.msg_id,
        message.topic,
        message.queue_id,
        message.queue_offset,
        message.tags().unwrap_or("-"),
        message.keys().collect::<Vec<_>>().join(" "),
        message.born_timestamp,
        message.store_timestamp,
        message.body.len(),
        String::from_utf8_lossy(&message.body)
    )
}

fn message_json(message: &MessageExt) -> Value {
    let properties: Map<String, Value> = message
        .properties
        .iter()
        .map(|(key, value)| (key.to_owned(), Value::String(value.to_owned())))
        .collect();
    json!({
        "msgId": message.uniq_key(),
        "offsetMsgId": message.msg_id,
        "topic": message.topic,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.commit_log_offset,
        "tags": message.tags(),
        "keys": message.keys().collect::<Vec<_>>(),
        "bornTimestamp": message.born_timestamp,
        "bornHost": message.born_host.to_string(),
        "storeTimestamp": message.store_timestamp,
        "storeHost": message.store_host.to_string(),
        "reconsumeTimes": message.reconsume_times,
        "sysFlag": message.sysflag,
        "properties": properties,
        "body": String::from_utf8_lossy(&message.body),
        "bodyBytes": message.body.len(),
    })
}

/// The messages as lines then a count line; under `messages` in the JSON.
fn messages_report(messages: &[MessageExt]) -> Report {
    let mut report = Report::new();
    for message in messages {
        report.line(message_line(message));
    }
    report.json(
        "messages",
        messages.iter().map(message_json).collect::<Vec<_>>(),
    );
    report.line(format!("{} message(s)", messages.len()));
    report
}

/// `queryMsgByKey`.
pub fn query_msg_by_key(context: &Context, args: QueryMsgByKeyArgs) -> Result<Report> {
    let begin_ms = match (args.begin_ms, args.hours) {
        (Some(begin), _) => begin,
        (None, Some(hours)) => now_ms() - hours.saturating_mul(3_600_000),
        (None, None) => 0,
    };
    let end_ms = args.end_ms.unwrap_or(i64::MAX);
    let messages = context.admin.query_messages_by_key(
        &args.topic,
        &args.key,
        args.max_num,
        begin_ms,
        end_ms,
    )?;
    Ok(messages_report(&messages))
}

/// QUERY_MESSAGE by unique key on every broker of `topic`.
fn by_unique_key(context: &Context, topic: &str, key: &str) -> Result<Vec<MessageExt>> {
    let route = context.admin.topic_route(topic)?;
    let mut found = Vec::new();
    for broker in &route.broker_datas {
        let Some(addr) = broker.master_addr() else {
            continue;
        };
        let header = QueryMessageRequestHeader {
            topic: topic.to_owned(),
            key: key.to_owned(),
            max_num: UNIQUE_KEY_MATCHES_MAX,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
            unique_key_query: Some(true),
            broker_name: Some(broker.broker_name.clone()),
        };
        let command = request(RequestCode::QUERY_MESSAGE, &header);
        let accepted = [ResponseCode::SUCCESS, ResponseCode::QUERY_NOT_FOUND];
        let response = context.invoke(addr, command, &accepted)?;
        if response.response_code() == ResponseCode::SUCCESS {
            let messages = decode_records(response.body);
            found.extend(messages.into_iter().filter(|m| m.uniq_key() == Some(key)));
        }
    }
    Ok(found)
}

/// `queryMsgById`.
pub fn query_msg_by_id(context: &Context, args: QueryMsgByIdArgs) -> Result<Report> {
    let mut messages = Vec::new();
    for id in args
        .ids
        .split(',')
        .map(str::trim)
        .filter(|id| !id.is_empty())
    {
        if decode_offset_msg_id(id).is_ok() {
            messages.push(context.admin.view_message(id)?);
            continue;
        }
        let Some(topic) = &args.topic else {
            return Err(AdminError::Invalid(format!(
                "{id} is not an offset message id; give its topic (-t) to look it up as a \
                 unique key"
            )));
        };
        let found = by_unique_key(context, topic, id)?;
        match found.into_iter().next() {
            Some(message) => messages.push(message),
            None => return Err(AdminError::Invalid(format!("no message {id} in {topic}"))),
        }
    }
    Ok(messages_report(&messages))
}

/// `queryMsgByUniqueKey`.
pub fn query_msg_by_unique_key(context: &Context, args: QueryMsgByUniqueKeyArgs) -> Result<Report> {
    let mut found = by_unique_key(context, &args.topic, &args.id)?;
    if found.is_empty() {
        return Err(AdminError::Invalid(format!(
            "no message with unique key {} in {}",
            args.id, args.topic
        )));
    }
    if !args.show_all {
        found.truncate(1);
    }
    Ok(messages_report(&found))
}

/// The outcome of one pull.
enum Pulled {
    Found {
        messages: Vec<MessageExt>,
        next_offset: i64,
    },
    /// Nothing at or after the offset asked (the queue's end, or an offset out of range).
    Nothing,
}

fn pull(
    context: &Context,
    addr: &str,
    group: &str,
    queue: &MessageQueue,
    offset: i64,
    max: i32,
) -> Result<Pulled> {
    let pull = PullRequest {
        group: group.to_owned(),
        queue: queue.clone(),
        offset,
        max_messages: max,
        max_bytes: PULL_BYTES_MAX,
        sys_flag: pull_flag::SUBSCRIPTION,
        commit_offset: 0,
        suspend: std::time::Duration::ZERO,
        subscription: Some("*".to_owned()),
        sub_version: 0,
        expression_type: comet_proto::filter::EXPRESSION_TYPE_TAG,
        lite: false,
    };
    let accepted = [
        ResponseCode::SUCCESS,
        ResponseCode::PULL_NOT_FOUND,
        ResponseCode::PULL_OFFSET_MOVED,
        ResponseCode::PULL_RETRY_IMMEDIATELY,
    ];
    let response = context.invoke(addr, pull_message(&pull), &accepted)?;
    if response.response_code() != ResponseCode::SUCCESS {
        return Ok(Pulled::Nothing);
    }
    let header = protocol::pull_response_header(&response.ext_fields)?;
    Ok(Pulled::Found {
        messages: decode_records(response.body),
        next_offset: header.next_begin_offset,
    })
}

fn offset_answer(
    context: &Context,
    addr: &str,
    command: comet_proto::RemotingCommand,
) -> Result<i64> {
    let response = context.invoke(addr, command, &[ResponseCode::SUCCESS])?;
    Ok(protocol::offset_field(&response.ext_fields)?)
}

/// `queryMsgByOffset`: the message at one queue offset.
pub fn query_msg_by_offset(context: &Context, args: QueryMsgByOffsetArgs) -> Result<Report> {
    let addr = context.master_of(&args.broker_name)?;
    let queue = MessageQueue {
        topic: args.topic.clone(),
        broker_name: args.broker_name.clone(),
        queue_id: args.queue_id,
    };
    let pulled = pull(context, &addr, TOOLS_CONSUMER_GROUP, &queue, args.offset, 1)?;
    let message = match pulled {
        Pulled::Found { messages, .. } => {
            messages.into_iter().find(|m| m.queue_offset == args.offset)
        }
        Pulled::Nothing => None,
    };
    let Some(message) = message else {
        return Err(AdminError::Invalid(format!(
            "no message at offset {} of {}:{}:{}",
            args.offset, args.topic, args.broker_name, args.queue_id
        )));
    };
    Ok(messages_report(&[message]))
}

/// `queryCq`.
pub fn query_cq(context: &Context, args: QueryCqArgs) -> Result<Report> {
    // `-b` is an address in mqadmin and was a broker name here: take either.
    let broker_name = match &args.broker {
        Some(broker) if broker.contains(':') => {
            let route = context.admin.topic_route(&args.topic)?;
            let name = route
                .broker_datas
                .iter()
                .find(|data| data.broker_addrs.values().any(|addr| addr == broker))
                .map(|data| data.broker_name.clone());
            Some(name.ok_or_else(|| {
                AdminError::Invalid(format!("{broker} serves no queue of {}", args.topic))
            })?)
        }
        other => other.clone(),
    };
    let queue = QueueSelector {
        topic: &args.topic,
        broker_name: broker_name.as_deref(),
        queue_id: args.queue_id,
    };
    let body =
        context
            .admin
            .query_consume_queue(queue, args.index, args.count, args.group.as_deref())?;
    let mut report = Report::new();
    report.line(format!(
        "minQueueIndex {} maxQueueIndex {}",
        body.min_queue_index, body.max_queue_index
    ));
    report.json("minQueueIndex", body.min_queue_index);
    report.json("maxQueueIndex", body.max_queue_index);
    if let Some(subscription) = &body.subscription_data {
        report.field(
            "subscription",
            json!({"topic": subscription.topic, "subString": subscription.sub_string}),
            format!(
                "subscription {} {}",
                subscription.topic, subscription.sub_string
            ),
        );
    }
    let mut table = Table::new(&["#QueueOffset", "#PhysicalOffset", "#Size", "#TagsCode"]);
    for (offset, entry) in (args.index..).zip(body.queue_data.iter().flatten()) {
        table.row(vec![
            json!(offset),
            json!(entry.physic_offset),
            json!(entry.physic_size),
            json!(entry.tags_code),
        ]);
    }
    report.table("entries", table);
    Ok(report)
}

/// `sendMessage`: one message, to the topic or to one queue.
pub fn send_message(context: &Context, args: SendMessageArgs) -> Result<Report> {
    let mut message = Message::new(args.topic.as_str(), args.body.into_bytes());
    if let Some(tags) = args.tags {
        message = message.with_tags(tags);
    }
    if let Some(keys) = &args.keys {
        message = message.with_keys(keys.split_whitespace());
    }
    let mut config = ProducerConfig::new(TOOLS_PRODUCER_GROUP, context.config().clone());
    config.enable_msg_trace = args.msg_trace_enable;
    let producer = Producer::new(config)?;
    producer.start()?;
    let sent = match (&args.broker_name, args.queue_id) {
        (Some(broker_name), Some(queue_id)) => {
            let queue = MessageQueue {
                topic: args.topic.clone(),
                broker_name: broker_name.clone(),
                queue_id,
            };
            producer.send_to_queue(message, &queue)
        }
        _ => producer.send(message),
    };
    producer.shutdown();
    let result = sent?;
    let mut table = Table::new(&[
        "#BrokerName",
        "#QueueId",
        "#SendResult",
        "#MsgId",
        "#OffsetMsgId",
    ]);
    table.row(vec![
        json!(result.queue.broker_name),
        json!(result.queue.queue_id),
        json!(result.status.name()),
        json!(result.msg_id),
        json!(result.offset_msg_id),
    ]);
    let mut report = Report::new();
    report.table("sent", table);
    report.json("queueOffset", result.queue_offset);
    Ok(report)
}

/// `consumeMessage`: up to `-c` messages from the chosen queues, oldest first per queue,
/// read by offset without committing any.
pub fn consume_message(context: &Context, args: ConsumeMessageArgs) -> Result<Report> {
    let now = now_ms();
    if args.count <= 0 {
        return Err(AdminError::Invalid("-c must be a positive count".into()));
    }
    if args.begin_ms.is_some_and(|begin| begin > now) || args.end_ms.is_some_and(|e| e > now) {
        return Err(AdminError::Invalid(
            "-s and -e must not be in the future".into(),
        ));
    }
    if let (Some(begin), Some(end)) = (args.begin_ms, args.end_ms) {
        if begin > end {
            return Err(AdminError::Invalid("-s must not be after -e".into()));
        }
    }
    let queues: Vec<(MessageQueue, String)> = context
        .read_queues(&args.topic)?
        .into_iter()
        .filter(|(queue, _)| {
            args.broker_name
                .as_ref()
                .is_none_or(|b| *b == queue.broker_name)
        })
        .filter(|(queue, _)| args.queue_id.is_none_or(|id| id == queue.queue_id))
        .collect();
    if queues.is_empty() {
        return Err(AdminError::Invalid(format!(
            "{} has no readable queue matching -b/-i",
            args.topic
        )));
    }
    let mut left = args.count;
    let mut messages = Vec::new();
    for (queue, addr) in &queues {
        if left == 0 {
            break;
        }
        let mut offset = match (args.offset, args.begin_ms) {
            (Some(offset), _) => offset,
            (None, Some(begin)) => offset_answer(context, addr, search_offset(queue, begin))?,
            (None, None) => offset_answer(context, addr, get_min_offset(queue))?,
        };
        let end = match args.end_ms {
            Some(end) => offset_answer(context, addr, search_offset(queue, end))?,
            None => offset_answer(context, addr, get_max_offset(queue))?,
        };
        while offset < end && left > 0 {
            let want = (end - offset).min(left).min(i64::from(PULL_BATCH_MAX));
            let want = i32::try_from(want).unwrap_or(PULL_BATCH_MAX);
            match pull(context, addr, &args.group, queue, offset, want)? {
                Pulled::Found {
                    messages: batch,
                    next_offset,
                } => {
                    for message in batch {
                        if message.queue_offset >= end || left == 0 {
                            break;
                        }
                        left -= 1;
                        messages.push(message);
                    }
                    if next_offset <= offset {
                        break;
                    }
                    offset = next_offset;
                }
                Pulled::Nothing => break,
            }
        }
    }
    Ok(messages_report(&messages))
}
