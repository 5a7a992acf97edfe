//! Topic commands: topicList, topicRoute, topicStatus, updateTopic, deleteTopic, statsAll.

use comet_client::TopicSpec;
use comet_proto::names;
use serde_json::{json, Value};

use super::parse_bool;
use crate::context::Context;
use crate::error::{AdminError, Result};
use crate::output::{Report, Table};

/// The cluster a topic change goes to when neither `-b` nor `-c` is given.
const DEFAULT_CLUSTER: &str = "DefaultCluster";

/// `topicList`.
#[derive(clap::Args, Clone, Debug)]
pub struct TopicListArgs {
    /// Each topic with its cluster and the groups consuming it (retry and dead-letter topics
    /// left out).
    #[arg(short = 'c', long = "clusterModel")]
    cluster_model: bool,
}

/// A topic, by `-t`.
#[derive(clap::Args, Clone, Debug)]
pub struct TopicArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
}

/// `topicRoute`.
#[derive(clap::Args, Clone, Debug)]
pub struct TopicRouteArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// List format (the text output is always a list; kept for mqadmin's scripts).
    #[arg(short = 'l', long = "list")]
    list: bool,
}

/// `updateTopic`: creates or updates a topic on one broker or every master of a cluster.
#[derive(clap::Args, Clone, Debug)]
pub struct UpdateTopicArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// Only this broker (`ip:port`).
    #[arg(short = 'b', long = "brokerAddr", conflicts_with = "cluster")]
    broker: Option<String>,
    /// Every master of this cluster (default DefaultCluster).
    #[arg(short = 'c', long = "clusterName", alias = "cluster")]
    cluster: Option<String>,
    /// Read and write queues per broker (Comet's shorthand for `-r N -w N`).
    #[arg(short = 'q', long = "queues", default_value_t = 8)]
    queues: i32,
    /// Readable queues per broker (default: `-q`).
    #[arg(short = 'r', long = "readQueueNums")]
    read_queues: Option<i32>,
    /// Writable queues per broker (default: `-q`).
    #[arg(short = 'w', long = "writeQueueNums")]
    write_queues: Option<i32>,
    /// Permission bits: 6 read-write, 4 read-only, 2 write-only.
    #[arg(short = 'p', long = "perm", default_value_t = 6)]
    perm: i32,
    /// Ordered topic (`true`; `-o` alone means true).
    #[arg(short = 'o', long = "order", value_parser = parse_bool,
          num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    order: bool,
    /// 5.x attribute changes, as mqadmin's: `+message.type=FIFO` adds or changes,
    /// `-message.type` deletes (only additions when the topic is new).
    #[arg(short = 'a', long = "attributes", allow_hyphen_values = true)]
    attributes: Option<String>,
}

/// `deleteTopic`.
#[derive(clap::Args, Clone, Debug)]
pub struct DeleteTopicArgs {
    /// The topic.
    #[arg(short = 't', long = "topic")]
    topic: String,
    /// The cluster to delete it from.
    #[arg(short = 'c', long = "clusterName", alias = "cluster", default_value = DEFAULT_CLUSTER)]
    cluster: String,
}

/// `statsAll`.
#[derive(clap::Args, Clone, Debug)]
pub struct StatsAllArgs {
    /// Only this topic.
    #[arg(short = 't', long = "topic")]
    topic: Option<String>,
    /// Only topics with messages in or out over the last day.
    #[arg(short = 'a', long = "activeTopic", alias = "active")]
    active: bool,
}

/// `topicList`.
pub fn topic_list(context: &Context, args: TopicListArgs) -> Result<Report> {
    let topics = context.admin.list_topics()?.topic_list;
    let mut report = Report::new();
    if !args.cluster_model {
        for topic in &topics {
            report.line(topic);
        }
        report.json(
            "topics",
            topics.iter().map(String::as_str).collect::<Vec<_>>(),
        );
        return Ok(report);
    }
    let info = context.admin.cluster_info()?;
    let cluster_of = |broker_name: &str| {
        info.cluster_addr_table
            .iter()
            .find(|(_, brokers)| brokers.contains(broker_name))
            .map(|(cluster, _)| cluster.clone())
    };
    let mut table = Table::new(&["#Cluster", "#Topic", "#ConsumerGroup"]);
    for topic in &topics {
        if names::is_retry_topic(topic) || names::is_dlq_topic(topic) {
            continue;
        }
        // A topic whose route or groups cannot be read is listed bare, as mqadmin does.
        let cluster = context
            .admin
            .topic_route(topic)
            .ok()
            .and_then(|route| route.broker_datas.first().map(|b| b.broker_name.clone()))
            .and_then(|name| cluster_of(&name));
        let groups = context
            .admin
            .topic_consumer_groups(topic)
            .unwrap_or_default();
        if groups.is_empty() {
            table.row(vec![json!(cluster), json!(topic), Value::Null]);
        }
        for group in groups {
            table.row(vec![json!(cluster), json!(topic), json!(group)]);
        }
    }
    report.table("topics", table);
    Ok(report)
}

/// `topicRoute`: queue data and broker addresses.
pub fn topic_route(context: &Context, args: TopicRouteArgs) -> Result<Report> {
    // `-l` asks mqadmin for the list its text output always is here.
    let TopicRouteArgs { topic, list: _ } = args;
    let route = context.admin.topic_route(&topic)?;
    let mut queues = Table::new(&["#BrokerName", "#ReadQueues", "#WriteQueues", "#Perm"]);
    for queue in &route.queue_datas {
        queues.row(vec![
            json!(queue.broker_name),
            json!(queue.read_queue_nums),
            json!(queue.write_queue_nums),
            json!(queue.perm),
        ]);
    }
    let mut brokers = Table::new(&["#BrokerName", "#BrokerId", "#Addr"]);
    for broker in &route.broker_datas {
        for (id, addr) in &broker.broker_addrs {
            brokers.row(vec![json!(broker.broker_name), json!(id), json!(addr)]);
        }
    }
    let mut report = Report::new();
    report.table("queueDatas", queues);
    report.table("brokerDatas", brokers);
    Ok(report)
}

/// `topicStatus`: min and max offsets of every queue of a topic.
pub fn topic_status(context: &Context, args: TopicArgs) -> Result<Report> {
    let stats = context.admin.topic_stats(&args.topic)?;
    let mut table = Table::new(&["#BrokerName", "#QueueId", "#MinOffset", "#MaxOffset"]);
    for (queue, offset) in &stats.offset_table {
        table.row(vec![
            json!(queue.broker_name),
            json!(queue.queue_id),
            json!(offset.min_offset),
            json!(offset.max_offset),
        ]);
    }
    let mut report = Report::new();
    report.table("queues", table);
    Ok(report)
}

/// `updateTopic`.
pub fn update_topic(context: &Context, args: UpdateTopicArgs) -> Result<Report> {
    let spec = TopicSpec {
        read_queue_nums: args.read_queues.unwrap_or(args.queues),
        write_queue_nums: args.write_queues.unwrap_or(args.queues),
        perm: args.perm,
        order: args.order,
        attributes: args.attributes.clone(),
        ..TopicSpec::new(&args.topic, args.queues)
    };
    if spec.read_queue_nums <= 0 || spec.write_queue_nums <= 0 {
        return Err(AdminError::Invalid("queue counts must be positive".into()));
    }
    let mut report = Report::new();
    let target = match &args.broker {
        Some(addr) => {
            context.admin.create_topic_on_broker(addr, &spec)?;
            format!("broker {addr}")
        }
        None => {
            let cluster = args.cluster.as_deref().unwrap_or(DEFAULT_CLUSTER);
            context.admin.create_topic(cluster, &spec)?;
            format!("cluster {cluster}")
        }
    };
    report.line(format!(
        "topic {} created or updated on {target} with {} read and {} write queues",
        args.topic, spec.read_queue_nums, spec.write_queue_nums
    ));
    report.json("topic", args.topic);
    report.json("target", target);
    report.json("readQueueNums", spec.read_queue_nums);
    report.json("writeQueueNums", spec.write_queue_nums);
    report.json("perm", spec.perm);
    report.json("order", spec.order);
    Ok(report)
}

/// `deleteTopic`.
pub fn delete_topic(context: &Context, args: DeleteTopicArgs) -> Result<Report> {
    context.admin.delete_topic(&args.cluster, &args.topic)?;
    let mut report = Report::new();
    report.line(format!(
        "topic {} deleted from cluster {}",
        args.topic, args.cluster
    ));
    report.json("topic", args.topic);
    report.json("cluster", args.cluster);
    Ok(report)
}

/// `statsAll`: one row per topic and consuming group (`-` and NO_CONSUMER for a topic nobody
/// consumes). Retry and dead-letter topics are left out, and so, without `-t`, are topics
/// whose figures cannot be read (no route yet, a broker down), as `mqadmin statsAll` does.
pub fn stats_all(context: &Context, args: StatsAllArgs) -> Result<Report> {
    let topics = match args.topic {
        Some(topic) => vec![topic],
        None => context
            .admin
            .list_topics()?
            .topic_list
            .into_iter()
            .filter(|topic| !names::is_retry_topic(topic) && !names::is_dlq_topic(topic))
            .collect(),
    };
    let single = topics.len() == 1;
    let mut table = Table::new(&[
        "#Topic",
        "#ConsumerGroup",
        "#Accumulation",
        "#InTPS",
        "#OutTPS",
        "#InMsg24Hour",
        "#OutMsg24Hour",
    ]);
    for topic in topics {
        let traffic = match context.admin.topic_traffic(&topic) {
            Ok(traffic) => traffic,
            Err(error) if single => return Err(error.into()),
            Err(_) => continue,
        };
        let (in_tps, in_24h) = (as_rate(traffic.in_tps), traffic.in_messages_24h);
        if traffic.groups.is_empty() && (!args.active || in_24h > 0) {
            table.row(vec![
                json!(topic),
                Value::Null,
                json!(0),
                in_tps.clone(),
                Value::Null,
                json!(in_24h),
                json!("NO_CONSUMER"),
            ]);
        }
        for group in &traffic.groups {
            if args.active && in_24h == 0 && group.out_messages_24h == 0 {
                continue;
            }
            table.row(vec![
                json!(topic),
                json!(group.group),
                json!(group.backlog),
                in_tps.clone(),
                as_rate(group.out_tps),
                json!(in_24h),
                json!(group.out_messages_24h),
            ]);
        }
    }
    let mut report = Report::new();
    report.table("stats", table);
    Ok(report)
}

/// A rate as a JSON float even when whole, so the text shows it with two decimals.
fn as_rate(rate: f64) -> Value {
    serde_json::Number::from_f64(rate).map_or(Value::Null, Value::Number)
}
