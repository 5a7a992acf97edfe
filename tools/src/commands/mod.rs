//! The commands, under mqadmin's names (`clusterList`) with comet-admin's earlier kebab-case
//! names (`cluster-list`) as aliases, and mqadmin's flags: one-letter flags as mqadmin
//! defines them, long flags under mqadmin's names (`--brokerAddr`), and true/false values
//! where mqadmin takes them (`-o true`).

pub mod cluster;
pub mod group;
pub mod message;
pub mod namesrv;
pub mod topic;

use clap::Subcommand;

use crate::context::Context;
use crate::error::Result;
use crate::output::Report;

/// A command.
#[derive(Subcommand, Clone, Debug)]
pub enum Command {
    /// Clusters, their brokers and addresses.
    #[command(name = "clusterList", visible_alias = "cluster-list")]
    ClusterList(cluster::ClusterListArgs),
    /// A broker's runtime figures (or every broker's of a cluster).
    #[command(name = "brokerStatus", visible_alias = "broker-status")]
    BrokerStatus(cluster::BrokerOrCluster),
    /// Replication of each log of a broker: on a master, every slave's written and durable
    /// ends, its lag in bytes and milliseconds and its last Ack; on a slave, the link.
    #[command(name = "haStatus", visible_alias = "ha-status")]
    HaStatus(cluster::HaStatusArgs),
    /// Every configuration key of a broker (or of each broker of a cluster).
    #[command(name = "getBrokerConfig", visible_alias = "get-broker-config")]
    GetBrokerConfig(cluster::BrokerOrCluster),
    /// Sets one configuration key on a broker, or on the masters (`-a true`: and slaves) of
    /// a cluster.
    #[command(name = "updateBrokerConfig", visible_alias = "update-broker-config")]
    UpdateBrokerConfig(cluster::UpdateBrokerConfigArgs),
    /// Every group's progress and lag on every topic it consumes, on one broker.
    #[command(name = "brokerConsumeStats", visible_alias = "broker-consume-stats")]
    BrokerConsumeStats(cluster::BrokerConsumeStatsArgs),
    /// Every topic the name servers know.
    #[command(name = "topicList", visible_alias = "topic-list")]
    TopicList(topic::TopicListArgs),
    /// A topic's route: queue data and broker addresses.
    #[command(name = "topicRoute", visible_alias = "topic-route")]
    TopicRoute(topic::TopicRouteArgs),
    /// Min and max offsets of every queue of a topic.
    #[command(name = "topicStatus", visible_alias = "topic-status")]
    TopicStatus(topic::TopicArgs),
    /// Creates or updates a topic on one broker or every master of a cluster.
    #[command(name = "updateTopic", visible_alias = "update-topic")]
    UpdateTopic(topic::UpdateTopicArgs),
    /// Deletes a topic from a cluster's brokers and the name servers.
    #[command(name = "deleteTopic", visible_alias = "delete-topic")]
    DeleteTopic(topic::DeleteTopicArgs),
    /// Messages in and out per topic and consuming group: rates over the last minute, counts
    /// over the last day, and each group's backlog.
    #[command(name = "statsAll", visible_alias = "stats-all")]
    StatsAll(topic::StatsAllArgs),
    /// Per-queue progress and lag of a consumer group.
    #[command(name = "consumerProgress", visible_alias = "consumer-progress")]
    ConsumerProgress(group::ConsumerProgressArgs),
    /// Online members of a consumer group and what they subscribe.
    #[command(name = "consumerConnection", visible_alias = "consumer-connection")]
    ConsumerConnection(group::ConsumerConnectionArgs),
    /// What each online member of a consumer group reports about itself: settings,
    /// subscriptions, per-queue progress and rates (the broker asks the client).
    #[command(name = "consumerStatus", visible_alias = "consumer-status")]
    ConsumerStatus(group::ConsumerStatusArgs),
    /// Online members of a producer group.
    #[command(name = "producerConnection", visible_alias = "producer-connection")]
    ProducerConnection(group::ProducerConnectionArgs),
    /// Creates or replaces a consumer group's configuration.
    #[command(name = "updateSubGroup", visible_alias = "update-sub-group")]
    UpdateSubGroup(group::UpdateSubGroupArgs),
    /// Deletes a consumer group's configuration (and offsets with `-r true`).
    #[command(name = "deleteSubGroup", visible_alias = "delete-sub-group")]
    DeleteSubGroup(group::DeleteSubGroupArgs),
    /// Copies one group's committed offsets on a topic to another group.
    #[command(name = "cloneGroupOffset", visible_alias = "clone-group-offset")]
    CloneGroupOffset(group::CloneGroupOffsetArgs),
    /// Moves a group's offsets on a topic to a time (ms since the epoch, `now`; -1 = the
    /// end).
    #[command(name = "resetOffsetByTime", visible_alias = "reset-offset-by-time")]
    ResetOffsetByTime(group::ResetOffsetByTimeArgs),
    /// How server-rebalanced 5.x consumers of a group read a topic, on one broker or every
    /// master of a cluster.
    #[command(name = "setConsumeMode", visible_alias = "set-consume-mode")]
    SetConsumeMode(group::SetConsumeModeArgs),
    /// Messages whose key (KEYS or UNIQ_KEY) matches.
    #[command(name = "queryMsgByKey", visible_alias = "query-msg-by-key")]
    QueryMsgByKey(message::QueryMsgByKeyArgs),
    /// Messages by offset message id (or, with `-t`, by unique key).
    #[command(name = "queryMsgById", visible_alias = "query-msg-by-id")]
    QueryMsgById(message::QueryMsgByIdArgs),
    /// A message by its unique key (the id its send returned).
    #[command(
        name = "queryMsgByUniqueKey",
        visible_alias = "query-msg-by-unique-key"
    )]
    QueryMsgByUniqueKey(message::QueryMsgByUniqueKeyArgs),
    /// The message at one queue offset.
    #[command(name = "queryMsgByOffset", visible_alias = "query-msg-by-offset")]
    QueryMsgByOffset(message::QueryMsgByOffsetArgs),
    /// Consume-queue entries of one queue: where each message is stored and its tag hash.
    #[command(name = "queryCq", visible_alias = "query-cq")]
    QueryCq(message::QueryCqArgs),
    /// Sends one message.
    #[command(name = "sendMessage", visible_alias = "send-message")]
    SendMessage(message::SendMessageArgs),
    /// Reads messages by offset (no offset is committed) and prints them.
    #[command(name = "consumeMessage", visible_alias = "consume-message")]
    ConsumeMessage(message::ConsumeMessageArgs),
    /// Stops the name servers routing writes to a broker's queues.
    #[command(name = "wipeWritePerm", visible_alias = "wipe-write-perm")]
    WipeWritePerm(namesrv::WritePermArgs),
    /// Lets the name servers route writes to a broker's queues again.
    #[command(name = "addWritePerm", visible_alias = "add-write-perm")]
    AddWritePerm(namesrv::WritePermArgs),
    /// Stores a key's value in a namespace of every name server's KV config.
    #[command(name = "updateKvConfig", visible_alias = "update-kv-config")]
    UpdateKvConfig(namesrv::UpdateKvConfigArgs),
    /// Every name server's configuration.
    #[command(name = "getNamesrvConfig", visible_alias = "get-namesrv-config")]
    GetNamesrvConfig,
}

impl Command {
    /// How often the command asks to be run again (`clusterList -i`, `haStatus -i`).
    pub fn repeat_interval(&self) -> Option<std::time::Duration> {
        match self {
            Command::ClusterList(args) => args.interval_s,
            Command::HaStatus(args) => args.interval_s,
            _ => None,
        }
        .map(std::time::Duration::from_secs)
    }

    /// A request timeout the command asks for (`brokerConsumeStats -t`), in ms.
    pub fn api_timeout_ms(&self) -> Option<u64> {
        match self {
            Command::BrokerConsumeStats(args) => args.timeout_ms,
            _ => None,
        }
    }
}

/// Runs `command` against the cluster.
pub fn run(context: &Context, command: Command) -> Result<Report> {
    match command {
        Command::ClusterList(args) => cluster::cluster_list(context, args),
        Command::BrokerStatus(args) => cluster::broker_status(context, args),
        Command::HaStatus(args) => cluster::ha_status(context, args),
        Command::GetBrokerConfig(args) => cluster::get_broker_config(context, args),
        Command::UpdateBrokerConfig(args) => cluster::update_broker_config(context, args),
        Command::BrokerConsumeStats(args) => cluster::broker_consume_stats(context, args),
        Command::TopicList(args) => topic::topic_list(context, args),
        Command::TopicRoute(args) => topic::topic_route(context, args),
        Command::TopicStatus(args) => topic::topic_status(context, args),
        Command::UpdateTopic(args) => topic::update_topic(context, args),
        Command::DeleteTopic(args) => topic::delete_topic(context, args),
        Command::StatsAll(args) => topic::stats_all(context, args),
        Command::ConsumerProgress(args) => group::consumer_progress(context, args),
        Command::ConsumerConnection(args) => group::consumer_connection(context, args),
        Command::ConsumerStatus(args) => group::consumer_status(context, args),
        Command::ProducerConnection(args) => group::producer_connection(context, args),
        Command::UpdateSubGroup(args) => group::update_sub_group(context, args),
        Command::DeleteSubGroup(args) => group::delete_sub_group(context, args),
        Command::CloneGroupOffset(args) => group::clone_group_offset(context, args),
        Command::ResetOffsetByTime(args) => group::reset_offset_by_time(context, args),
        Command::SetConsumeMode(args) => group::set_consume_mode(context, args),
        Command::QueryMsgByKey(args) => message::query_msg_by_key(context, args),
        Command::QueryMsgById(args) => message::query_msg_by_id(context, args),
        Command::QueryMsgByUniqueKey(args) => message::query_msg_by_unique_key(context, args),
        Command::QueryMsgByOffset(args) => message::query_msg_by_offset(context, args),
        Command::QueryCq(args) => message::query_cq(context, args),
        Command::SendMessage(args) => message::send_message(context, args),
        Command::ConsumeMessage(args) => message::consume_message(context, args),
        Command::WipeWritePerm(args) => namesrv::write_perm(context, args, false),
        Command::AddWritePerm(args) => namesrv::write_perm(context, args, true),
        Command::UpdateKvConfig(args) => namesrv::update_kv_config(context, args),
        Command::GetNamesrvConfig => namesrv::get_namesrv_config(context),
    }
}

/// mqadmin's boolean option values: `true` or `false`, any case.
pub fn parse_bool(text: &str) -> std::result::Result<bool, String> {
    match text.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{text:?} is neither true nor false")),
    }
}

/// The wall clock in ms since the epoch.
pub fn now_ms() -> i64 {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    i64::try_from(since_epoch.as_millis()).unwrap_or(i64::MAX)
}
