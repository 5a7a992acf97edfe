//! `comet-admin`: the everyday jobs of RocketMQ's `mqadmin`, against any RocketMQ-protocol
//! cluster (Comet or Apache RocketMQ), built on comet-client's admin API.
//!
//! Output is plain text meant for people and for `grep`: one line per row, columns separated
//! by spaces, the figures RocketMQ's tool prints under the same names.

use std::process::ExitCode;

use clap::{Parser, Subcommand};
use comet_client::remoting::TlsOptions;
use comet_client::{Admin, ClientConfig, QueueSelector, TopicSpec};
use comet_proto::body::{MessageRequestMode, SetMessageRequestModeRequestBody};
use comet_proto::message::MessageExt;
use comet_proto::names;

/// Administers a RocketMQ-protocol cluster through its name servers.
#[derive(Parser, Debug)]
#[command(name = "comet-admin", version)]
struct Args {
    /// Name server addresses, `;`-separated.
    #[arg(
        short = 'n',
        long = "namesrv",
        global = true,
        default_value = "127.0.0.1:9876"
    )]
    namesrv: String,
    /// TLS to name servers and brokers whose tls.server.mode is permissive or enforcing;
    /// without --tls-ca any server certificate is accepted (Java's tls.test.mode.enable).
    #[arg(long, global = true)]
    tls: bool,
    /// With --tls: trust only servers whose certificate this PEM CA file signed.
    #[arg(long, global = true, requires = "tls")]
    tls_ca: Option<std::path::PathBuf>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Clusters, their brokers and addresses.
    ClusterList,
    /// Every topic the name servers know.
    TopicList,
    /// A topic's route: queue data and broker addresses.
    TopicRoute {
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Min and max offsets of every queue of a topic.
    TopicStatus {
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Creates or updates a topic on every master of a cluster.
    UpdateTopic {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'c', long, default_value = "DefaultCluster")]
        cluster: String,
        /// Read and write queues per broker.
        #[arg(short = 'q', long, default_value_t = 8)]
        queues: i32,
        /// Permission bits: 6 read-write, 4 read-only, 2 write-only.
        #[arg(short = 'p', long, default_value_t = 6)]
        perm: i32,
        /// Ordered topic.
        #[arg(short = 'o', long)]
        order: bool,
    },
    /// Deletes a topic from a cluster's brokers and the name servers.
    DeleteTopic {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'c', long, default_value = "DefaultCluster")]
        cluster: String,
    },
    /// A broker's runtime figures.
    BrokerStatus {
        /// Broker address `ip:port`.
        #[arg(short = 'b', long)]
        broker: String,
    },
    /// Replication of each log of a broker: on a master, every slave's written and durable
    /// ends, its lag in bytes and milliseconds and its last Ack; on a slave, the link.
    HaStatus {
        /// Broker address `ip:port`.
        #[arg(short = 'b', long)]
        broker: String,
    },
    /// Per-queue progress and lag of a consumer group on a topic.
    ConsumerProgress {
        #[arg(short = 'g', long)]
        group: String,
        #[arg(short = 't', long)]
        topic: String,
    },
    /// Online members of a consumer group.
    ConsumerConnection {
        #[arg(short = 'g', long)]
        group: String,
        #[arg(short = 't', long)]
        topic: String,
    },
    /// What each online member of a consumer group reports about itself: settings,
    /// subscriptions, per-queue progress and rates (the broker asks the client).
    ConsumerStatus {
        #[arg(short = 'g', long)]
        group: String,
        /// Only this client id.
        #[arg(short = 'i', long = "client-id")]
        client_id: Option<String>,
    },
    /// Consume-queue entries of one queue: where each message is stored and its tag hash.
    QueryCq {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'q', long = "queue-id")]
        queue_id: i32,
        /// Broker name (default: the route's first broker).
        #[arg(short = 'b', long = "broker-name")]
        broker_name: Option<String>,
        /// First queue offset.
        #[arg(short = 'i', long, default_value_t = 0)]
        index: i64,
        /// Entries to list.
        #[arg(short = 'c', long, default_value_t = 10)]
        count: i32,
        /// Show this group's subscription too.
        #[arg(short = 'g', long)]
        group: Option<String>,
    },
    /// Every group's progress and lag on every topic it consumes, on one broker.
    BrokerConsumeStats {
        /// Broker address `ip:port`.
        #[arg(short = 'b', long)]
        broker: String,
        /// Only ordered topics.
        #[arg(short = 'o', long = "order")]
        order_only: bool,
    },
    /// Copies one group's committed offsets on a topic to another group.
    CloneGroupOffset {
        #[arg(short = 's', long = "src")]
        src: String,
        #[arg(short = 'd', long = "dest")]
        dest: String,
        #[arg(short = 't', long)]
        topic: String,
        /// The source group has no online member.
        #[arg(short = 'o', long)]
        offline: bool,
    },
    /// Messages whose key (KEYS or UNIQ_KEY) matches, stored in the last `hours`.
    QueryMsgByKey {
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'k', long)]
        key: String,
        #[arg(long, default_value_t = 72)]
        hours: i64,
    },
    /// One message by its broker offset message id.
    QueryMsgById {
        #[arg(short = 'i', long)]
        id: String,
    },
    /// Messages in and out per topic and consuming group: rates over the last minute, counts
    /// over the last day, and each group's backlog.
    StatsAll {
        /// Only this topic.
        #[arg(short = 't', long)]
        topic: Option<String>,
        /// Only topics with messages in or out over the last day.
        #[arg(short = 'a', long = "active")]
        active: bool,
    },
    /// How server-rebalanced 5.x consumers of a group read a topic (mqadmin's
    /// `setConsumeMode`), on one broker or every master of a cluster.
    #[command(group(clap::ArgGroup::new("target").required(true).args(["broker", "cluster"])))]
    SetConsumeMode {
        /// Broker address `ip:port`.
        #[arg(short = 'b', long)]
        broker: Option<String>,
        /// Every master of this cluster.
        #[arg(short = 'c', long)]
        cluster: Option<String>,
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 'g', long)]
        group: String,
        /// PULL or POP.
        #[arg(short = 'm', long, value_parser = parse_mode)]
        mode: MessageRequestMode,
        /// POP: how many following consumers' queues each consumer also pops (<= 0: every
        /// queue).
        #[arg(
            short = 'q',
            long = "pop-share-queue-num",
            default_value_t = 0,
            allow_negative_numbers = true
        )]
        pop_share_queue_num: i32,
    },
    /// Moves a group's offsets on a topic to a time (ms since the epoch; -1 = the end).
    ResetOffsetByTime {
        #[arg(short = 'g', long)]
        group: String,
        #[arg(short = 't', long)]
        topic: String,
        #[arg(short = 's', long, allow_negative_numbers = true)]
        timestamp: i64,
    },
}

fn parse_mode(text: &str) -> Result<MessageRequestMode, String> {
    MessageRequestMode::from_name(text).ok_or_else(|| format!("{text:?} is not PULL or POP"))
}

fn print_message(message: &MessageExt) {
    println!(
        "msgId={} offsetMsgId={} topic={} queueId={} queueOffset={} tags={} keys={} \
         bornTimestamp={} storeTimestamp={} bodyBytes={}",
        message.uniq_key().unwrap_or("-"),
        message.msg_id,
        message.topic,
        message.queue_id,
        message.queue_offset,
        message.tags().unwrap_or("-"),
        message.keys().collect::<Vec<_>>().join(" "),
        message.born_timestamp,
        message.store_timestamp,
        message.body.len()
    );
}

fn run(admin: &Admin, command: Command) -> comet_client::Result<()> {
    match command {
        Command::ClusterList => {
            let info = admin.cluster_info()?;
            println!("#Cluster #BrokerName #BrokerId #Addr");
            for (cluster, brokers) in &info.cluster_addr_table {
                for broker_name in brokers {
                    let Some(data) = info.broker_addr_table.get(broker_name) else {
                        continue;
                    };
                    for (id, addr) in &data.broker_addrs {
                        println!("{cluster} {broker_name} {id} {addr}");
                    }
                }
            }
        }
        Command::TopicList => {
            for topic in admin.list_topics()?.topic_list {
                println!("{topic}");
            }
        }
        Command::TopicRoute { topic } => {
            let route = admin.topic_route(&topic)?;
            println!("#BrokerName #ReadQueues #WriteQueues #Perm");
            for queue in &route.queue_datas {
                println!(
                    "{} {} {} {}",
                    queue.broker_name, queue.read_queue_nums, queue.write_queue_nums, queue.perm
                );
            }
            println!("#BrokerName #BrokerId #Addr");
            for broker in &route.broker_datas {
                for (id, addr) in &broker.broker_addrs {
                    println!("{} {id} {addr}", broker.broker_name);
                }
            }
        }
        Command::TopicStatus { topic } => {
            let stats = admin.topic_stats(&topic)?;
            println!("#BrokerName #QueueId #MinOffset #MaxOffset");
            for (queue, offset) in &stats.offset_table {
                println!(
                    "{} {} {} {}",
                    queue.broker_name, queue.queue_id, offset.min_offset, offset.max_offset
                );
            }
        }
        Command::UpdateTopic {
            topic,
            cluster,
            queues,
            perm,
            order,
        } => {
            let spec = TopicSpec {
                perm,
                order,
                ..TopicSpec::new(&topic, queues)
            };
            admin.create_topic(&cluster, &spec)?;
            println!("topic {topic} created or updated on cluster {cluster} with {queues} queues");
        }
        Command::DeleteTopic { topic, cluster } => {
            admin.delete_topic(&cluster, &topic)?;
            println!("topic {topic} deleted from cluster {cluster}");
        }
        Command::BrokerStatus { broker } => {
            for (key, value) in admin.broker_runtime_info(&broker)? {
                println!("{key:<32}: {value}");
            }
        }
        Command::HaStatus { broker } => print_ha_status(&admin.ha_status(&broker)?),
        Command::ConsumerProgress { group, topic } => {
            let stats = admin.consume_stats(&group, &topic)?;
            println!("#Topic #BrokerName #QueueId #BrokerOffset #ConsumerOffset #Diff");
            let mut total = 0;
            for (queue, offset) in &stats.offset_table {
                let diff = offset.broker_offset - offset.consumer_offset;
                total += diff;
                println!(
                    "{} {} {} {} {} {diff}",
                    queue.topic,
                    queue.broker_name,
                    queue.queue_id,
                    offset.broker_offset,
                    offset.consumer_offset
                );
            }
            println!("Diff Total: {total}");
        }
        Command::ConsumerConnection { group, topic } => {
            let connections = admin.consumer_connections(&group, &topic)?;
            println!("#ClientId #ClientAddr #Language #Version");
            for connection in &connections.connection_set {
                println!(
                    "{} {} {:?} {}",
                    connection.client_id,
                    connection.client_addr,
                    connection.language,
                    connection.version
                );
            }
        }
        Command::QueryMsgByKey { topic, key, hours } => {
            let end = now_ms();
            let messages =
                admin.query_messages_by_key(&topic, &key, 64, end - hours * 3_600_000, end)?;
            for message in &messages {
                print_message(message);
            }
            println!("{} message(s)", messages.len());
        }
        Command::QueryMsgById { id } => print_message(&admin.view_message(&id)?),
        Command::StatsAll { topic, active } => stats_all(admin, topic, active)?,
        Command::ConsumerStatus { group, client_id } => consumer_status(admin, &group, client_id)?,
        Command::QueryCq {
            topic,
            queue_id,
            broker_name,
            index,
            count,
            group,
        } => {
            let queue = QueueSelector {
                topic: &topic,
                broker_name: broker_name.as_deref(),
                queue_id,
            };
            let body = admin.query_consume_queue(queue, index, count, group.as_deref())?;
            println!(
                "minQueueIndex {} maxQueueIndex {}",
                body.min_queue_index, body.max_queue_index
            );
            if let Some(subscription) = &body.subscription_data {
                println!(
                    "subscription {} {}",
                    subscription.topic, subscription.sub_string
                );
            }
            println!("#QueueOffset #PhysicalOffset #Size #TagsCode");
            for (offset, entry) in (index..).zip(body.queue_data.iter().flatten()) {
                println!(
                    "{offset} {} {} {}",
                    entry.physic_offset, entry.physic_size, entry.tags_code
                );
            }
        }
        Command::BrokerConsumeStats { broker, order_only } => {
            let list = admin.broker_consume_stats(&broker, order_only)?;
            println!(
                "#Topic #Group #BrokerName #QueueId #BrokerOffset #ConsumerOffset #Diff #LastTime"
            );
            for groups in &list.consume_stats_list {
                for (group, stats) in groups {
                    for (queue, offset) in stats.iter().flat_map(|s| &s.offset_table) {
                        println!(
                            "{} {group} {} {} {} {} {} {}",
                            queue.topic,
                            queue.broker_name,
                            queue.queue_id,
                            offset.broker_offset,
                            offset.consumer_offset,
                            offset.broker_offset - offset.consumer_offset,
                            offset.last_timestamp
                        );
                    }
                }
            }
            println!("Diff Total: {}", list.total_diff);
        }
        Command::CloneGroupOffset {
            src,
            dest,
            topic,
            offline,
        } => {
            admin.clone_group_offset(&src, &dest, &topic, offline)?;
            println!("offsets of {src} on {topic} cloned to {dest}");
        }
        Command::SetConsumeMode {
            broker,
            cluster,
            topic,
            group,
            mode,
            pop_share_queue_num,
        } => {
            let masters = match (broker, cluster) {
                (Some(broker), _) => vec![broker],
                (None, cluster) => admin.cluster_masters(cluster.as_deref())?,
            };
            let body = SetMessageRequestModeRequestBody {
                topic: topic.clone(),
                consumer_group: group.clone(),
                mode,
                pop_share_queue_num,
            };
            for addr in &masters {
                admin.set_message_request_mode(addr, &body)?;
                println!("set consume mode to {addr} success.");
            }
            println!(
                "topic[{topic}] group[{group}] consume mode[{}] popShareQueueNum[{}]",
                mode.name(),
                pop_share_queue_num
            );
        }
        Command::ResetOffsetByTime {
            group,
            topic,
            timestamp,
        } => {
            let offsets = admin.reset_offset_by_timestamp(&group, &topic, timestamp, true)?;
            println!("#BrokerName #QueueId #Offset");
            for (queue, offset) in offsets {
                println!("{} {} {offset}", queue.broker_name, queue.queue_id);
            }
        }
    }
    Ok(())
}

/// `consumer-status`: for each member (or the one named), a `#ClientId` line, then its
/// properties, subscriptions, queues and per-topic rates, one per line.
fn consumer_status(admin: &Admin, group: &str, only: Option<String>) -> comet_client::Result<()> {
    let members: Vec<String> = match only {
        Some(client_id) => vec![client_id],
        None => admin
            .consumer_connections(group, &names::retry_topic(group))?
            .connection_set
            .into_iter()
            .map(|connection| connection.client_id)
            .collect(),
    };
    for client_id in members {
        let info = admin.consumer_running_info(group, &client_id)?;
        println!("#ClientId {client_id}");
        for (key, value) in &info.properties {
            let value = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_owned);
            println!("property {key} {value}");
        }
        for subscription in &info.subscription_set {
            println!(
                "subscription {} {}",
                subscription.topic, subscription.sub_string
            );
        }
        println!(
            "#Topic #BrokerName #QueueId #CommitOffset #CachedMsgs #LastPullMs #LastConsumeMs"
        );
        for (queue, process) in &info.mq_table {
            println!(
                "{} {} {} {} {} {} {}",
                queue.topic,
                queue.broker_name,
                queue.queue_id,
                process.commit_offset,
                process.cached_msg_count,
                process.last_pull_timestamp,
                process.last_consume_timestamp
            );
        }
        for (topic, status) in &info.status_table {
            println!(
                "rates {topic} pullTPS={:.2} consumeOkTPS={:.2} consumeFailedTPS={:.2} \
                 pullRT={:.2} consumeRT={:.2}",
                status.pull_tps,
                status.consume_ok_tps,
                status.consume_failed_tps,
                status.pull_rt,
                status.consume_rt
            );
        }
    }
    Ok(())
}

/// `stats-all`: one row per topic and consuming group (`-` and NO_CONSUMER for a topic nobody
/// consumes). Retry and dead-letter topics are left out, and so, without `-t`, are topics
/// whose figures cannot be read (no route yet, a broker down), as `mqadmin statsAll` does.
fn stats_all(admin: &Admin, only: Option<String>, active: bool) -> comet_client::Result<()> {
    let topics = match only {
        Some(topic) => vec![topic],
        None => admin
            .list_topics()?
            .topic_list
            .into_iter()
            .filter(|topic| !names::is_retry_topic(topic) && !names::is_dlq_topic(topic))
            .collect(),
    };
    let single = topics.len() == 1;
    println!("#Topic #ConsumerGroup #Accumulation #InTPS #OutTPS #InMsg24Hour #OutMsg24Hour");
    for topic in topics {
        let traffic = match admin.topic_traffic(&topic) {
            Ok(traffic) => traffic,
            Err(error) if single => return Err(error),
            Err(_) => continue,
        };
        let (in_tps, in_24h) = (traffic.in_tps, traffic.in_messages_24h);
        if traffic.groups.is_empty() && (!active || in_24h > 0) {
            println!("{topic} - 0 {in_tps:.2} - {in_24h} NO_CONSUMER");
        }
        for group in &traffic.groups {
            if active && in_24h == 0 && group.out_messages_24h == 0 {
                continue;
            }
            println!(
                "{topic} {} {} {in_tps:.2} {:.2} {in_24h} {}",
                group.group, group.backlog, group.out_tps, group.out_messages_24h
            );
        }
    }
    Ok(())
}

fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}

/// One line per (log, slave) on a master, one per log on a slave; a Java broker's
/// connections when it names no logs.
fn print_ha_status(status: &comet_client::admin::HaStatus) {
    if status.logs.is_empty() {
        println!("#SlaveAddr #SlaveAckOffset #Diff #InSync");
        for connection in &status.ha_connection_info {
            println!(
                "{} {} {} {}",
                connection.addr, connection.slave_ack_offset, connection.diff, connection.in_sync
            );
        }
        return;
    }
    if status.master {
        println!(
            "#Log #Written #Durable #Confirm #Slave #BrokerId #SlaveWritten #SlaveDurable \
             #LagBytes #LagMs #LastAckMs #InSync"
        );
    } else {
        println!("#Log #Written #Durable #MasterAddr #Connected #Stopped");
    }
    for log in &status.logs {
        let here = format!(
            "{} {} {}",
            log.log_id, log.written_offset, log.durable_offset
        );
        if !status.master {
            let master = log.master_addr.as_deref().unwrap_or("-");
            let stopped = log.stopped.as_deref().unwrap_or("-");
            println!("{here} {master} {} {stopped}", log.connected);
            continue;
        }
        if log.slaves.is_empty() {
            println!("{here} {} - - - - - - - -", log.confirm_offset);
        }
        for slave in &log.slaves {
            println!(
                "{here} {} {} {} {} {} {} {} {} {}",
                log.confirm_offset,
                slave.addr,
                slave.broker_id,
                slave.slave_written_offset,
                slave.slave_durable_offset,
                slave.lag_bytes,
                slave.lag_millis,
                slave.last_ack_timestamp,
                slave.in_sync
            );
        }
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    let mut config = ClientConfig {
        namesrv_addrs: args
            .namesrv
            .split(';')
            .map(str::trim)
            .filter(|a| !a.is_empty())
            .map(str::to_owned)
            .collect(),
        ..ClientConfig::default()
    };
    if args.tls {
        let tls = match &args.tls_ca {
            Some(ca) => TlsOptions::trusting_ca(ca),
            None => TlsOptions::trusting_any(),
        };
        match tls {
            Ok(tls) => config.transport.tls = Some(tls),
            Err(error) => {
                eprintln!("comet-admin: {error}");
                return ExitCode::from(2);
            }
        }
    }
    let admin = match Admin::new(config) {
        Ok(admin) => admin,
        Err(error) => {
            eprintln!("comet-admin: {error}");
            return ExitCode::from(2);
        }
    };
    let outcome = run(&admin, args.command);
    admin.shutdown();
    match outcome {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("comet-admin: {error}");
            ExitCode::FAILURE
        }
    }
}
