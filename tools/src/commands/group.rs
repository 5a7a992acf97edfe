//! Consumer and producer group commands: consumerProgress, consumerConnection,
//! consumerStatus, producerConnection, updateSubGroup, deleteSubGroup, cloneGroupOffset,
//! resetOffsetByTime, setConsumeMode.

use comet_client::protocol::{decode_body, offset_field, request};
use comet_proto::body::JsonBody;
use comet_proto::body::{
    ConsumeStats, MessageRequestMode, ProducerConnection, SetMessageRequestModeRequestBody,
    SubscriptionGroupConfig,
};
use comet_proto::headers::{
    DeleteSubscriptionGroupRequestHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetProducerConnectionListRequestHeader,
    ResetOffsetRequestHeader, SearchOffsetRequestHeader,
};
use comet_proto::names;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use serde_json::{json, Value};

use super::{now_ms, parse_bool};
use crate::context::Context;
use crate::error::{AdminError, Result};
use crate::output::{Report, Table};

/// `consumerProgress`.
#[derive(clap::Args, Clone, Debug)]
pub struct ConsumerProgressArgs {
    /// The consumer group.
    #[arg(short = 'g', long = "groupName", alias = "group")]
    group: String,
    /// Only this topic (default: every topic the group consumes).
    #[arg(short = 't', long = "topicName", alias = "topic")]
    topic: Option<String>,
}

/// `consumerConnection`.
#[derive(clap::Args, Clone, Debug)]
pub struct ConsumerConnectionArgs {
    /// The consumer group.
    #[arg(short = 'g', long = "consumerGroup", alias = "group")]
    group: String,
    /// Ask the brokers of this topic (default: the group's retry topic, as mqadmin does).
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// Ask this broker only.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
}

/// `consumerStatus`.
#[derive(clap::Args, Clone, Debug)]
pub struct ConsumerStatusArgs {
    /// The consumer group.
    #[arg(short = 'g', long = "consumerGroup", alias = "group")]
    group: String,
    /// Only this client id.
    #[arg(short = 'i', long = "clientId", alias = "client-id")]
    client_id: Option<String>,
}

/// `producerConnection`.
#[derive(clap::Args, Clone, Debug)]
pub struct ProducerConnectionArgs {
    /// The producer group.
    #[arg(short = 'g', long = "producerGroup", alias = "group")]
    group: String,
    /// A topic it sends to (its brokers are asked).
    #[arg(short = 't', long = "topic")]
    topic: String,
}

/// `updateSubGroup`: creates or replaces a consumer group's configuration, with Java's
/// defaults for every setting not given.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["broker", "cluster"])))]
pub struct UpdateSubGroupArgs {
    /// On this broker.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// On every master of this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The group.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Consumption allowed.
    #[arg(short = 's', long = "consumeEnable", value_parser = parse_bool)]
    consume_enable: Option<bool>,
    /// A new group starts from the min offset.
    #[arg(short = 'm', long = "consumeFromMinEnable", value_parser = parse_bool)]
    consume_from_min_enable: Option<bool>,
    /// Broadcasting allowed.
    #[arg(short = 'd', long = "consumeBroadcastEnable", value_parser = parse_bool)]
    consume_broadcast_enable: Option<bool>,
    /// Orderly consumption.
    #[arg(short = 'o', long = "consumeMessageOrderly", value_parser = parse_bool)]
    consume_message_orderly: Option<bool>,
    /// Queues of the group's retry topic.
    #[arg(short = 'q', long = "retryQueueNums")]
    retry_queue_nums: Option<i32>,
    /// Redeliveries before the dead-letter queue.
    #[arg(short = 'r', long = "retryMaxTimes")]
    retry_max_times: Option<i32>,
    /// 5.x retry policy, as JSON (`{"type":"EXPONENTIAL",...}`).
    #[arg(short = 'p', long = "groupRetryPolicy")]
    group_retry_policy: Option<String>,
    /// Broker id to consume from.
    #[arg(short = 'i', long = "brokerId")]
    broker_id: Option<i64>,
    /// Broker id slow consumers are sent to.
    #[arg(short = 'w', long = "whichBrokerWhenConsumeSlowly")]
    which_broker_when_consume_slowly: Option<i64>,
    /// Tell members when the group's membership changes.
    #[arg(short = 'a', long = "notifyConsumerIdsChanged", value_parser = parse_bool)]
    notify_consumer_ids_changed: Option<bool>,
}

/// `deleteSubGroup`.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["broker", "cluster"])))]
pub struct DeleteSubGroupArgs {
    /// From this broker.
    #[arg(short = 'b', long = "brokerAddr")]
    broker: Option<String>,
    /// From every master of this cluster, with the group's retry and dead-letter topics.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// The group.
    #[arg(short = 'g', long = "groupName")]
    group: String,
    /// Delete its committed offsets too.
    #[arg(short = 'r', long = "removeOffset", value_parser = parse_bool,
          num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    remove_offset: bool,
}

/// `cloneGroupOffset`.
#[derive(clap::Args, Clone, Debug)]
pub struct CloneGroupOffsetArgs {
    /// The group whose offsets are copied.
    #[arg(short = 's', long = "srcGroup", alias = "src")]
    src: String,
    /// The group that gets them.
    #[arg(short = 'd', long = "destGroup", alias = "dest")]
    dest: String,
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The source group has no online member (`true`; `-o` alone means true).
    #[arg(short = 'o', long = "offline", value_parser = parse_bool,
          num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    offline: bool,
}

/// `resetOffsetByTime`.
#[derive(clap::Args, Clone, Debug)]
pub struct ResetOffsetByTimeArgs {
    /// The consumer group.
    #[arg(short = 'g', long = "group")]
    group: String,
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// `now`, or ms since the epoch (-1: the end of each queue).
    #[arg(short = 's', long = "timestamp", allow_negative_numbers = true,
          value_parser = parse_timestamp)]
    timestamp: i64,
    /// Also move offsets forward (`false`: only back).
    #[arg(short = 'f', long = "force", value_parser = parse_bool, default_value = "true")]
    force: bool,
    /// Only one queue, on this broker (with `-q`).
    #[arg(short = 'b', long = "broker", requires = "queue_id")]
    broker: Option<String>,
    /// Only this queue of the broker `-b`.
    #[arg(short = 'q', long = "queue", requires = "broker")]
    queue_id: Option<i32>,
    /// With `-b` and `-q`: this queue offset rather than the one `-s` finds.
    #[arg(short = 'o', long = "offset", requires = "queue_id")]
    offset: Option<i64>,
}

/// `setConsumeMode`: how server-rebalanced 5.x consumers of a group read a topic.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["broker", "cluster"])))]
pub struct SetConsumeModeArgs {
    /// Broker address `ip:port`.
    #[arg(short = 'b', long = "brokerAddr", alias = "broker")]
    broker: Option<String>,
    /// Every master of this cluster.
    #[arg(short = 'c', long = "clusterName", alias = "cluster")]
    cluster: Option<String>,
    /// The topic.
    #[arg(short = 't', long = "topicName", alias = "topic")]
    topic: String,
    /// The consumer group.
    #[arg(short = 'g', long = "groupName", alias = "group")]
    group: String,
    /// PULL or POP.
    #[arg(short = 'm', long = "mode", value_parser = parse_mode)]
    mode: MessageRequestMode,
    /// POP: how many following consumers' queues each consumer also pops (<= 0: every
    /// queue).
    #[arg(
        short = 'q',
        long = "popShareQueueNum",
        alias = "pop-share-queue-num",
        default_value_t = 0,
        allow_negative_numbers = true
    )]
    pop_share_queue_num: i32,
}

fn parse_mode(text: &str) -> std::result::Result<MessageRequestMode, String> {
    MessageRequestMode::from_name(text).ok_or_else(|| format!("{text:?} is not PULL or POP"))
}

/// `now` or a number of ms since the epoch.
fn parse_timestamp(text: &str) -> std::result::Result<i64, String> {
    if text.eq_ignore_ascii_case("now") {
        return Ok(now_ms());
    }
    text.parse()
        .map_err(|_| format!("{text:?} is neither `now` nor ms since the epoch"))
}

/// `consumerProgress`: per-queue progress and lag of a group on a topic, or on every topic
/// it consumes (asked of the brokers of its retry topic, as mqadmin does).
pub fn consumer_progress(context: &Context, args: ConsumerProgressArgs) -> Result<Report> {
    let stats = match &args.topic {
        Some(topic) => context.admin.consume_stats(&args.group, topic)?,
        None => {
            let mut merged = ConsumeStats::default();
            let route = context
                .admin
                .topic_route(&names::retry_topic(&args.group))?;
            for broker in &route.broker_datas {
                let Some(addr) = broker.master_addr() else {
                    continue;
                };
                let header = GetConsumeStatsRequestHeader {
                    consumer_group: args.group.clone(),
                    topic: None,
                    topic_list: None,
                    broker_name: Some(broker.broker_name.clone()),
                };
                let command = request(RequestCode::GET_CONSUME_STATS, &header);
                let response = context.invoke(addr, command, &[ResponseCode::SUCCESS])?;
                let stats: ConsumeStats = decode_body("ConsumeStats", &response.body)?;
                merged.offset_table.extend(stats.offset_table);
                merged.consume_tps += stats.consume_tps;
            }
            merged
        }
    };
    let mut table = Table::new(&[
        "#Topic",
        "#BrokerName",
        "#QueueId",
        "#BrokerOffset",
        "#ConsumerOffset",
        "#Diff",
    ]);
    let mut total = 0;
    for (queue, offset) in &stats.offset_table {
        let diff = offset.broker_offset - offset.consumer_offset;
        total += diff;
        table.row(vec![
            json!(queue.topic),
            json!(queue.broker_name),
            json!(queue.queue_id),
            json!(offset.broker_offset),
            json!(offset.consumer_offset),
            json!(diff),
        ]);
    }
    let mut report = Report::new();
    report.table("queues", table);
    report.field("diffTotal", total, format!("Diff Total: {total}"));
    Ok(report)
}

fn connections_table(connections: &[comet_proto::body::Connection]) -> Table {
    let mut table = Table::new(&["#ClientId", "#ClientAddr", "#Language", "#Version"]);
    for connection in connections {
        table.row(vec![
            json!(connection.client_id),
            json!(connection.client_addr),
            json!(format!("{:?}", connection.language)),
            json!(connection.version),
        ]);
    }
    table
}

/// `consumerConnection`: a group's online members and what they subscribe.
pub fn consumer_connection(context: &Context, args: ConsumerConnectionArgs) -> Result<Report> {
    let connections = match &args.broker {
        Some(addr) => {
            let header = GetConsumerConnectionListRequestHeader {
                consumer_group: args.group.clone(),
            };
            let command = request(RequestCode::GET_CONSUMER_CONNECTION_LIST, &header);
            let response = context.invoke(addr, command, &[ResponseCode::SUCCESS])?;
            decode_body("ConsumerConnection", &response.body)?
        }
        None => {
            let topic = args
                .topic
                .clone()
                .unwrap_or_else(|| names::retry_topic(&args.group));
            context.admin.consumer_connections(&args.group, &topic)?
        }
    };
    let mut report = Report::new();
    report.table(
        "connections",
        connections_table(&connections.connection_set),
    );
    let mut subscriptions = Table::new(&["#Topic", "#SubExpression"]);
    for (topic, subscription) in &connections.subscription_table {
        subscriptions.row(vec![json!(topic), json!(subscription.sub_string)]);
    }
    report.table("subscriptions", subscriptions);
    let settings = [
        (
            "consumeType",
            serde_json::to_value(connections.consume_type)?,
        ),
        (
            "messageModel",
            serde_json::to_value(connections.message_model)?,
        ),
        (
            "consumeFromWhere",
            serde_json::to_value(connections.consume_from_where)?,
        ),
    ];
    for (key, value) in settings {
        let shown = value
            .as_str()
            .map_or_else(|| value.to_string(), str::to_owned);
        report.field(key, value, format!("{key} {shown}"));
    }
    Ok(report)
}

/// `consumerStatus`: for each member (or the one named), a `#ClientId` line, then its
/// properties, subscriptions, queues and per-topic rates, one per line.
pub fn consumer_status(context: &Context, args: ConsumerStatusArgs) -> Result<Report> {
    let group = &args.group;
    let members: Vec<String> = match args.client_id {
        Some(client_id) => vec![client_id],
        None => context
            .admin
            .consumer_connections(group, &names::retry_topic(group))?
            .connection_set
            .into_iter()
            .map(|connection| connection.client_id)
            .collect(),
    };
    let mut report = Report::new();
    for client_id in members {
        let info = context.admin.consumer_running_info(group, &client_id)?;
        let mut part = Report::new();
        part.field(
            "clientId",
            client_id.clone(),
            format!("#ClientId {client_id}"),
        );
        for (key, value) in &info.properties {
            let shown = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            part.line(format!("property {key} {shown}"));
        }
        part.json("properties", serde_json::to_value(&info.properties)?);
        let mut subscriptions = Vec::new();
        for subscription in &info.subscription_set {
            part.line(format!(
                "subscription {} {}",
                subscription.topic, subscription.sub_string
            ));
            subscriptions.push(json!({
                "topic": subscription.topic,
                "subString": subscription.sub_string,
            }));
        }
        part.json("subscriptions", subscriptions);
        let mut queues = Table::new(&[
            "#Topic",
            "#BrokerName",
            "#QueueId",
            "#CommitOffset",
            "#CachedMsgs",
            "#LastPullMs",
            "#LastConsumeMs",
        ]);
        for (queue, process) in &info.mq_table {
            queues.row(vec![
                json!(queue.topic),
                json!(queue.broker_name),
                json!(queue.queue_id),
                json!(process.commit_offset),
                json!(process.cached_msg_count),
                json!(process.last_pull_timestamp),
                json!(process.last_consume_timestamp),
            ]);
        }
        part.table("queues", queues);
        let mut rates = Vec::new();
        for (topic, status) in &info.status_table {
            part.line(format!(
                "rates {topic} pullTPS={:.2} consumeOkTPS={:.2} consumeFailedTPS={:.2} \
                 pullRT={:.2} consumeRT={:.2}",
                status.pull_tps,
                status.consume_ok_tps,
                status.consume_failed_tps,
                status.pull_rt,
                status.consume_rt
            ));
            rates.push(json!({
                "topic": topic,
                "pullTPS": status.pull_tps,
                "consumeOkTPS": status.consume_ok_tps,
                "consumeFailedTPS": status.consume_failed_tps,
                "pullRT": status.pull_rt,
                "consumeRT": status.consume_rt,
            }));
        }
        part.json("rates", rates);
        report.push("clients", part);
    }
    Ok(report)
}

/// `producerConnection`: the online members of a producer group, merged over the brokers
/// of a topic it sends to.
pub fn producer_connection(context: &Context, args: ProducerConnectionArgs) -> Result<Report> {
    let route = context.admin.topic_route(&args.topic)?;
    let mut members = Vec::new();
    for broker in &route.broker_datas {
        let Some(addr) = broker.master_addr() else {
            continue;
        };
        let header = GetProducerConnectionListRequestHeader {
            producer_group: args.group.clone(),
        };
        let command = request(RequestCode::GET_PRODUCER_CONNECTION_LIST, &header);
        let response = context.invoke(addr, command, &[ResponseCode::SUCCESS])?;
        let connections: ProducerConnection = decode_body("ProducerConnection", &response.body)?;
        for connection in connections.connection_set {
            if !members.contains(&connection) {
                members.push(connection);
            }
        }
    }
    if members.is_empty() {
        return Err(AdminError::Invalid(format!(
            "producer group {} has no online member on the brokers of {}",
            args.group, args.topic
        )));
    }
    let mut report = Report::new();
    report.table("connections", connections_table(&members));
    Ok(report)
}

/// `updateSubGroup`.
pub fn update_sub_group(context: &Context, args: UpdateSubGroupArgs) -> Result<Report> {
    let mut config = SubscriptionGroupConfig::new(args.group.clone());
    set(&mut config.consume_enable, args.consume_enable);
    set(
        &mut config.consume_from_min_enable,
        args.consume_from_min_enable,
    );
    set(
        &mut config.consume_broadcast_enable,
        args.consume_broadcast_enable,
    );
    set(
        &mut config.consume_message_orderly,
        args.consume_message_orderly,
    );
    set(&mut config.retry_queue_nums, args.retry_queue_nums);
    set(&mut config.retry_max_times, args.retry_max_times);
    set(&mut config.broker_id, args.broker_id);
    set(
        &mut config.which_broker_when_consume_slowly,
        args.which_broker_when_consume_slowly,
    );
    set(
        &mut config.notify_consumer_ids_changed_enable,
        args.notify_consumer_ids_changed,
    );
    if let Some(policy) = &args.group_retry_policy {
        let policy: Value = serde_json::from_str(policy).map_err(|error| {
            AdminError::Invalid(format!("-p is not a JSON retry policy: {error}"))
        })?;
        config.group_retry_policy = Some(policy);
    }
    let addrs = context.targets(args.broker.as_deref(), args.cluster.as_deref(), false)?;
    let body = config.encode();
    let mut report = Report::new();
    for addr in &addrs {
        let command = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0)
            .with_body(body.clone());
        context.invoke(addr, command, &[ResponseCode::SUCCESS])?;
        report.line(format!("create subscription group to {addr} success."));
    }
    let config_json = serde_json::to_value(&config)?;
    report.line(config_json.to_string());
    report.json("brokers", addrs);
    report.json("config", config_json);
    Ok(report)
}

fn set<T>(field: &mut T, value: Option<T>) {
    if let Some(value) = value {
        *field = value;
    }
}

/// `deleteSubGroup`: the group's configuration (and with `-r true` its offsets) from one
/// broker, or from every master of a cluster together with the group's retry and
/// dead-letter topics, as mqadmin does.
pub fn delete_sub_group(context: &Context, args: DeleteSubGroupArgs) -> Result<Report> {
    let addrs = context.targets(args.broker.as_deref(), args.cluster.as_deref(), false)?;
    let mut report = Report::new();
    for addr in &addrs {
        let header = DeleteSubscriptionGroupRequestHeader {
            group_name: args.group.clone(),
            clean_offset: Some(args.remove_offset),
        };
        let command = request(RequestCode::DELETE_SUBSCRIPTIONGROUP, &header);
        context.invoke(addr, command, &[ResponseCode::SUCCESS])?;
        report.line(format!(
            "delete subscription group [{}] from broker [{addr}] success.",
            args.group
        ));
    }
    let mut topics_deleted = Vec::new();
    if let Some(cluster) = &args.cluster {
        for topic in [
            names::retry_topic(&args.group),
            names::dlq_topic(&args.group),
        ] {
            // A group that never consumed has neither topic: nothing to delete is no error.
            match context.admin.delete_topic(cluster, &topic) {
                Ok(()) => topics_deleted.push(topic),
                Err(error) => log::warn!("deleting {topic} from cluster {cluster}: {error}"),
            }
        }
    }
    report.json("brokers", addrs);
    report.json("group", args.group);
    report.json("topicsDeleted", topics_deleted);
    Ok(report)
}

/// `cloneGroupOffset`.
pub fn clone_group_offset(context: &Context, args: CloneGroupOffsetArgs) -> Result<Report> {
    context
        .admin
        .clone_group_offset(&args.src, &args.dest, &args.topic, args.offline)?;
    let mut report = Report::new();
    report.line(format!(
        "offsets of {} on {} cloned to {}",
        args.src, args.topic, args.dest
    ));
    report.json("srcGroup", args.src);
    report.json("destGroup", args.dest);
    report.json("topic", args.topic);
    Ok(report)
}

/// `resetOffsetByTime`: moves a group's offsets on a topic to the first message stored at
/// or after a time.
pub fn reset_offset_by_time(context: &Context, args: ResetOffsetByTimeArgs) -> Result<Report> {
    if let (Some(broker), Some(queue_id)) = (&args.broker, args.queue_id) {
        return reset_one_queue(context, &args, broker, queue_id);
    }
    let offsets = context.admin.reset_offset_by_timestamp(
        &args.group,
        &args.topic,
        args.timestamp,
        args.force,
    )?;
    let mut table = Table::new(&["#BrokerName", "#QueueId", "#Offset"]);
    for (queue, offset) in offsets {
        table.row(vec![
            json!(queue.broker_name),
            json!(queue.queue_id),
            json!(offset),
        ]);
    }
    let mut report = Report::new();
    report.table("offsets", table);
    Ok(report)
}

/// `setConsumeMode`.
pub fn set_consume_mode(context: &Context, args: SetConsumeModeArgs) -> Result<Report> {
    let masters = match (&args.broker, &args.cluster) {
        (Some(broker), _) => vec![broker.clone()],
        (None, cluster) => context.admin.cluster_masters(cluster.as_deref())?,
    };
    let body = SetMessageRequestModeRequestBody {
        topic: args.topic.clone(),
        consumer_group: args.group.clone(),
        mode: args.mode,
        pop_share_queue_num: args.pop_share_queue_num,
    };
    let mut report = Report::new();
    for addr in &masters {
        context.admin.set_message_request_mode(addr, &body)?;
        report.line(format!("set consume mode to {addr} success."));
    }
    report.line(format!(
        "topic[{}] group[{}] consume mode[{}] popShareQueueNum[{}]",
        args.topic,
        args.group,
        args.mode.name(),
        args.pop_share_queue_num
    ));
    report.json("brokers", masters);
    report.json("topic", args.topic);
    report.json("group", args.group);
    report.json("mode", args.mode.name());
    report.json("popShareQueueNum", args.pop_share_queue_num);
    Ok(report)
}

/// `resetOffsetByTime -b -q [-o]`: one queue's offset, to `-o` or to the first message stored
/// at or after `-s`, as mqadmin's `resetOffsetByQueueId`.
fn reset_one_queue(
    context: &Context,
    args: &ResetOffsetByTimeArgs,
    broker: &str,
    queue_id: i32,
) -> Result<Report> {
    let offset = match args.offset {
        Some(offset) => offset,
        None => {
            let header = SearchOffsetRequestHeader {
                topic: args.topic.clone(),
                queue_id,
                timestamp: args.timestamp,
                boundary_type: None,
                broker_name: None,
                logical: None,
            };
            let command = request(RequestCode::SEARCH_OFFSET_BY_TIMESTAMP, &header);
            let response = context.invoke(broker, command, &[ResponseCode::SUCCESS])?;
            offset_field(&response.ext_fields)?
        }
    };
    let header = ResetOffsetRequestHeader {
        topic: args.topic.clone(),
        group: args.group.clone(),
        queue_id: Some(queue_id),
        offset: Some(offset),
        timestamp: args.timestamp,
        is_force: args.force,
    };
    let command = request(RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, &header);
    context.invoke(broker, command, &[ResponseCode::SUCCESS])?;
    let mut report = Report::new();
    report.line(format!(
        "reset consumer offset of group[{}] topic[{}] queueId[{queue_id}] on broker[{broker}] \
         to {offset}",
        args.group, args.topic
    ));
    report.json("broker", broker);
    report.json("queueId", queue_id);
    report.json("offset", offset);
    Ok(report)
}
