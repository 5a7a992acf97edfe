//! The admin API used by `comet-admin` and tests (mqadmin's jobs,
//! docs/protocol.md#admin-requests, docs/protocol.md#name-server-requests).
//!
//! Every call is a blocking request with the client's API timeout. Cluster-wide operations
//! (create or delete a topic, consumer progress, offset reset) go to every master of the
//! cluster or of the topic's route and merge the answers.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use comet_proto::body::{
    BrokerStatsData, ClusterInfo, ConsumeStats, ConsumeStatsList, ConsumerConnection,
    ConsumerRunningInfo, GroupList, JsonBody, KVTable, QueryConsumeQueueResponseBody,
    ResetOffsetBody, SetMessageRequestModeRequestBody, SubscriptionGroupConfig, TopicList,
    TopicRouteData, TopicStatsTable,
};
use comet_proto::headers::{
    CloneGroupOffsetRequestHeader, CreateTopicRequestHeader, DeleteTopicFromNamesrvRequestHeader,
    DeleteTopicRequestHeader, GetConsumeStatsInBrokerHeader, GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetTopicStatsInfoRequestHeader, QueryConsumeQueueRequestHeader, QueryMessageRequestHeader,
    QueryTopicConsumeByWhoRequestHeader, ResetOffsetRequestHeader,
    ViewBrokerStatsDataRequestHeader, ViewMessageRequestHeader,
};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::names;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};

use crate::config::ClientConfig;
use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::message::MessageQueue;
use crate::protocol::{self, request};
use crate::route;

/// GET_BROKER_HA_STATUS: a broker's replication figures. Java's `HARuntimeInfo` fields,
/// and from a Comet broker each log's own figures (`logs`; empty from a Java broker).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaStatus {
    /// Whether the broker is a master.
    pub master: bool,
    /// Bytes the master's commit log(s) hold.
    pub master_commit_log_max_offset: u64,
    /// Slaves in sync (on every log, for a Comet broker).
    pub in_sync_slave_nums: u64,
    /// One entry per slave connection (per log, for a Comet broker).
    pub ha_connection_info: Vec<HaConnection>,
    /// Each log's figures (Comet).
    pub logs: Vec<HaLog>,
}

/// One slave connection of a master (Java's `HAConnectionRuntimeInfo`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaConnection {
    /// The slave's address.
    pub addr: String,
    /// Its acknowledged offset.
    pub slave_ack_offset: u64,
    /// Bytes the master holds beyond it.
    pub diff: u64,
    /// Whether it counts as in sync.
    pub in_sync: bool,
}

/// One log of a Comet broker (the `logs` of [`HaStatus`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaLog {
    /// The log (the shard's index).
    pub log_id: u8,
    /// `master` or `slave`.
    pub role: String,
    /// Written end here, in bytes of the log.
    pub written_offset: u64,
    /// Durable end here.
    pub durable_offset: u64,
    /// End up to which consumers see records (a SYNC_MASTER's confirm position).
    pub confirm_offset: u64,
    /// Master: the slaves following this log.
    pub slaves: Vec<HaSlave>,
    /// Slave: whether the link to the master is up.
    pub connected: bool,
    /// Slave: the master's HA address last used.
    pub master_addr: Option<String>,
    /// Slave: why replication of this log stopped for good, if it did.
    pub stopped: Option<String>,
}

/// One slave following one log of a master.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct HaSlave {
    /// The slave's connection address.
    pub addr: String,
    /// Its `brokerId`.
    pub broker_id: u64,
    /// Its acknowledged written end of the log.
    pub slave_written_offset: u64,
    /// Its acknowledged durable end of the log.
    pub slave_durable_offset: u64,
    /// Bytes the master holds beyond its durable end.
    pub lag_bytes: u64,
    /// How long the master has held bytes it lacks, in milliseconds.
    pub lag_millis: u64,
    /// When its last Ack arrived (wall clock, ms since the epoch).
    pub last_ack_timestamp: i64,
    /// Whether it counts as in sync (less than `haMaxGapNotInSync` behind).
    pub in_sync: bool,
}

/// A topic to create or update.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopicSpec {
    /// Topic name.
    pub name: String,
    /// Readable queues per broker.
    pub read_queue_nums: i32,
    /// Writable queues per broker.
    pub write_queue_nums: i32,
    /// Permission bits (6 = read and write).
    pub perm: i32,
    /// Ordered topic.
    pub order: bool,
    /// 5.x attribute changes (`+message.type=FIFO,-reserve.time`), sent as they are;
    /// `None` leaves a topic's attributes as they were.
    pub attributes: Option<String>,
}

impl TopicSpec {
    /// A read-write topic with `queues` queues per broker.
    pub fn new(name: &str, queues: i32) -> TopicSpec {
        TopicSpec {
            name: name.to_owned(),
            read_queue_nums: queues,
            write_queue_nums: queues,
            perm: route::PERM_READ | route::PERM_WRITE,
            order: false,
            attributes: None,
        }
    }
}

/// One topic's traffic over its brokers, as [`Admin::topic_traffic`] sums it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct TopicTraffic {
    /// Messages stored per second over the last minute.
    pub in_tps: f64,
    /// Messages stored over the last day.
    pub in_messages_24h: i64,
    /// Every group that consumes the topic.
    pub groups: Vec<GroupTraffic>,
}

/// One consuming group's share of [`TopicTraffic`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupTraffic {
    /// The group.
    pub group: String,
    /// Messages stored but not yet consumed by it.
    pub backlog: i64,
    /// Messages delivered to it per second over the last minute.
    pub out_tps: f64,
    /// Messages delivered to it over the last day.
    pub out_messages_24h: i64,
}

/// One queue of a topic, by broker name (`None`: the route's first broker) and queue id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueueSelector<'a> {
    /// The topic.
    pub topic: &'a str,
    /// The broker holding the queue.
    pub broker_name: Option<&'a str>,
    /// The queue id.
    pub queue_id: i32,
}

/// The day's sum, or the hour's or the minute's when a broker has not sampled the longer
/// window yet (Apache RocketMQ samples its day window hourly), as `mqadmin statsAll` reads it.
fn last_day_sum(data: &BrokerStatsData) -> i64 {
    [data.stats_day, data.stats_hour, data.stats_minute]
        .iter()
        .map(|window| window.sum)
        .find(|sum| *sum != 0)
        .unwrap_or(0)
}

/// Admin client. Thread-safe.
pub struct Admin {
    instance: Arc<ClientInstance>,
}

impl Admin {
    /// An admin client on the given name servers (no background threads but the
    /// transport's).
    pub fn new(config: ClientConfig) -> Result<Admin> {
        if config.namesrv_addrs.is_empty() {
            return Err(ClientError::NameServer(
                "no name server address configured".into(),
            ));
        }
        Ok(Admin {
            instance: ClientInstance::new(config),
        })
    }

    /// Closes connections.
    pub fn shutdown(&self) {
        self.instance.shutdown();
    }

    fn namesrv_body<T: JsonBody>(&self, code: RequestCode, what: &'static str) -> Result<T> {
        let request = RemotingCommand::request(code, 0);
        let (addr, response) = self.instance.invoke_namesrv(request)?;
        let response = protocol::expect(&addr, response, &[ResponseCode::SUCCESS])?;
        protocol::decode_body(what, &response.body)
    }

    /// GET_BROKER_CLUSTER_INFO.
    pub fn cluster_info(&self) -> Result<ClusterInfo> {
        self.namesrv_body(RequestCode::GET_BROKER_CLUSTER_INFO, "ClusterInfo")
    }

    /// GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
    pub fn list_topics(&self) -> Result<TopicList> {
        self.namesrv_body(RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER, "TopicList")
    }

    /// GET_ROUTEINFO_BY_TOPIC.
    pub fn topic_route(&self, topic: &str) -> Result<TopicRouteData> {
        match self.instance.update_route(topic)? {
            Some(route) => Ok(route.data.clone()),
            None => Err(ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: "unknown to the name servers".into(),
            }),
        }
    }

    /// Master addresses of every broker of `cluster` (all clusters when `None`).
    pub fn cluster_masters(&self, cluster: Option<&str>) -> Result<Vec<String>> {
        let info = self.cluster_info()?;
        let names: Vec<String> = match cluster {
            Some(cluster) => info
                .cluster_addr_table
                .get(cluster)
                .ok_or_else(|| ClientError::Invalid(format!("unknown cluster {cluster}")))?
                .iter()
                .cloned()
                .collect(),
            None => info.broker_addr_table.keys().cloned().collect(),
        };
        Ok(names
            .iter()
            .filter_map(|name| {
                info.broker_addr_table
                    .get(name)?
                    .master_addr()
                    .map(str::to_owned)
            })
            .collect())
    }

    /// UPDATE_AND_CREATE_TOPIC on one broker.
    pub fn create_topic_on_broker(&self, broker_addr: &str, spec: &TopicSpec) -> Result<()> {
        crate::validate::check_topic(&spec.name)?;
        let header = CreateTopicRequestHeader {
            topic: spec.name.clone(),
            default_topic: names::AUTO_CREATE_TOPIC_KEY.into(),
            read_queue_nums: spec.read_queue_nums,
            write_queue_nums: spec.write_queue_nums,
            perm: spec.perm,
            topic_filter_type: "SINGLE_TAG".into(),
            topic_sys_flag: Some(0),
            order: spec.order,
            attributes: spec.attributes.clone(),
            force: None,
        };
        let command = request(RequestCode::UPDATE_AND_CREATE_TOPIC, &header);
        self.instance
            .invoke_broker(broker_addr, command, &[ResponseCode::SUCCESS])
            .map(|_| ())
    }

    /// Creates or updates a topic on every master of `cluster`.
    pub fn create_topic(&self, cluster: &str, spec: &TopicSpec) -> Result<()> {
        let masters = self.cluster_masters(Some(cluster))?;
        if masters.is_empty() {
            return Err(ClientError::Invalid(format!(
                "cluster {cluster} has no master"
            )));
        }
        for addr in masters {
            self.create_topic_on_broker(&addr, spec)?;
        }
        Ok(())
    }

    /// Deletes a topic from every master of `cluster` and from every name server.
    pub fn delete_topic(&self, cluster: &str, topic: &str) -> Result<()> {
        for addr in self.cluster_masters(Some(cluster))? {
            let header = DeleteTopicRequestHeader {
                topic: topic.to_owned(),
            };
            let command = request(RequestCode::DELETE_TOPIC_IN_BROKER, &header);
            self.instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
        }
        for addr in self.instance.name_servers().addrs() {
            let header = DeleteTopicFromNamesrvRequestHeader {
                topic: topic.to_owned(),
                cluster_name: Some(cluster.to_owned()),
            };
            let command = request(RequestCode::DELETE_TOPIC_IN_NAMESRV, &header);
            self.instance
                .invoke_broker(addr, command, &[ResponseCode::SUCCESS])?;
        }
        self.instance.routes().remove(topic);
        Ok(())
    }

    /// SET_MESSAGE_REQUEST_MODE on one broker: how server-rebalanced consumers of `group`
    /// read `topic` (PULL or POP, and in POP how many following consumers' queues each one
    /// shares; <= 0: every queue), as mqadmin's `setConsumeMode`.
    pub fn set_message_request_mode(
        &self,
        broker_addr: &str,
        mode: &SetMessageRequestModeRequestBody,
    ) -> Result<()> {
        let command = RemotingCommand::request(RequestCode::SET_MESSAGE_REQUEST_MODE, 0)
            .with_body(mode.encode());
        self.instance
            .invoke_broker(broker_addr, command, &[ResponseCode::SUCCESS])
            .map(|_| ())
    }

    /// GET_BROKER_RUNTIME_INFO of one broker.
    pub fn broker_runtime_info(&self, broker_addr: &str) -> Result<BTreeMap<String, String>> {
        let command = RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO, 0);
        let response =
            self.instance
                .invoke_broker(broker_addr, command, &[ResponseCode::SUCCESS])?;
        let table: KVTable = protocol::decode_body("KVTable", &response.body)?;
        Ok(table.table)
    }

    /// GET_BROKER_HA_STATUS of the broker at `broker_addr`.
    pub fn ha_status(&self, broker_addr: &str) -> Result<HaStatus> {
        let command = RemotingCommand::request(RequestCode::GET_BROKER_HA_STATUS, 0);
        let response =
            self.instance
                .invoke_broker(broker_addr, command, &[ResponseCode::SUCCESS])?;
        protocol::decode_json("HARuntimeInfo", &response.body)
    }

    /// Masters of the brokers serving `topic`.
    fn topic_masters(&self, topic: &str) -> Result<Vec<(String, String)>> {
        let route = self.topic_route(topic)?;
        Ok(route
            .broker_datas
            .iter()
            .filter_map(|b| Some((b.broker_name.clone(), b.master_addr()?.to_owned())))
            .collect())
    }

    /// GET_TOPIC_STATS_INFO merged over the topic's brokers: min/max offset per queue.
    pub fn topic_stats(&self, topic: &str) -> Result<TopicStatsTable> {
        let mut merged = TopicStatsTable::default();
        for (broker_name, addr) in self.topic_masters(topic)? {
            let header = GetTopicStatsInfoRequestHeader {
                topic: topic.to_owned(),
                broker_name: Some(broker_name),
            };
            let command = request(RequestCode::GET_TOPIC_STATS_INFO, &header);
            let response = self
                .instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
            let stats: TopicStatsTable = protocol::decode_body("TopicStatsTable", &response.body)?;
            merged.offset_table.extend(stats.offset_table);
            merged.topic_put_tps += stats.topic_put_tps;
        }
        Ok(merged)
    }

    /// Commits `group`'s offset on every queue of `topic` at that queue's end (its max offset
    /// from GET_TOPIC_STATS_INFO, then UPDATE_CONSUMER_OFFSET on the queue's master), so the
    /// group's first consumer starts there whatever its consume-from-where: a group without
    /// an offset is otherwise read from offset 0 while a queue is young
    /// (docs/protocol.md#max-offset-and-young-queues). The group is created first on each
    /// master (UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with the defaults; an existing group's
    /// configuration is replaced by them): Apache RocketMQ refuses offsets of a group it does
    /// not know. Returns the offsets committed.
    pub fn commit_group_offsets_at_end(
        &self,
        group: &str,
        topic: &str,
    ) -> Result<BTreeMap<MessageQueue, i64>> {
        let masters: BTreeMap<String, String> = self.topic_masters(topic)?.into_iter().collect();
        let group_config = SubscriptionGroupConfig::new(group.to_owned()).encode();
        for addr in masters.values() {
            let command =
                RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, 0)
                    .with_body(group_config.clone());
            self.instance
                .invoke_broker(addr, command, &[ResponseCode::SUCCESS])?;
        }
        let mut committed = BTreeMap::new();
        for (queue, offsets) in self.topic_stats(topic)?.offset_table {
            let addr = masters.get(&queue.broker_name).ok_or_else(|| {
                ClientError::Invalid(format!("no master for {} of {topic}", queue.broker_name))
            })?;
            let command = protocol::update_consumer_offset(group, &queue, offsets.max_offset);
            self.instance
                .invoke_broker(addr, command, &[ResponseCode::SUCCESS])?;
            committed.insert(queue, offsets.max_offset);
        }
        Ok(committed)
    }

    /// Consumer progress and lag per queue: GET_CONSUME_STATS merged over the brokers of
    /// `topic`.
    pub fn consume_stats(&self, group: &str, topic: &str) -> Result<ConsumeStats> {
        let mut merged = ConsumeStats::default();
        for (broker_name, addr) in self.topic_masters(topic)? {
            let header = GetConsumeStatsRequestHeader {
                consumer_group: group.to_owned(),
                topic: Some(topic.to_owned()),
                topic_list: None,
                broker_name: Some(broker_name),
            };
            let command = request(RequestCode::GET_CONSUME_STATS, &header);
            let response = self
                .instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
            let stats: ConsumeStats = protocol::decode_body("ConsumeStats", &response.body)?;
            merged.offset_table.extend(stats.offset_table);
            merged.consume_tps += stats.consume_tps;
        }
        Ok(merged)
    }

    /// QUERY_TOPIC_CONSUME_BY_WHO merged over the topic's brokers: the groups that consume it.
    pub fn topic_consumer_groups(&self, topic: &str) -> Result<BTreeSet<String>> {
        let mut groups = BTreeSet::new();
        for (_, addr) in self.topic_masters(topic)? {
            let header = QueryTopicConsumeByWhoRequestHeader {
                topic: topic.to_owned(),
            };
            let command = request(RequestCode::QUERY_TOPIC_CONSUME_BY_WHO, &header);
            let response = self
                .instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
            let list: GroupList = protocol::decode_body("GroupList", &response.body)?;
            groups.extend(list.group_list);
        }
        Ok(groups)
    }

    /// VIEW_BROKER_STATS_DATA of one broker: statistic `name` (e.g. `TOPIC_PUT_NUMS`) of item
    /// `key` (a topic, `topic@group`, or the cluster name) over its last minute, hour and day.
    /// `None` when the broker has never counted that item (it answers SYSTEM_ERROR then).
    pub fn broker_stats(
        &self,
        broker_addr: &str,
        name: &str,
        key: &str,
    ) -> Result<Option<BrokerStatsData>> {
        let header = ViewBrokerStatsDataRequestHeader {
            stats_name: name.to_owned(),
            stats_key: key.to_owned(),
        };
        let command = request(RequestCode::VIEW_BROKER_STATS_DATA, &header);
        let expected = [ResponseCode::SUCCESS, ResponseCode::SYSTEM_ERROR];
        let response = self
            .instance
            .invoke_broker(broker_addr, command, &expected)?;
        if response.response_code() != ResponseCode::SUCCESS {
            return Ok(None);
        }
        protocol::decode_body("BrokerStatsData", &response.body).map(Some)
    }

    /// A topic's traffic summed over its brokers (what `mqadmin statsAll` prints per row):
    /// messages in, and out per consuming group with the group's backlog.
    pub fn topic_traffic(&self, topic: &str) -> Result<TopicTraffic> {
        let masters = self.topic_masters(topic)?;
        let mut traffic = TopicTraffic::default();
        for (_, addr) in &masters {
            if let Some(data) = self.broker_stats(addr, "TOPIC_PUT_NUMS", topic)? {
                traffic.in_tps += data.stats_minute.tps;
                traffic.in_messages_24h += last_day_sum(&data);
            }
        }
        for group in self.topic_consumer_groups(topic)? {
            let key = format!("{topic}@{group}");
            let mut row = GroupTraffic {
                backlog: self.consumer_lag(&group, topic)?,
                group,
                ..GroupTraffic::default()
            };
            for (_, addr) in &masters {
                if let Some(data) = self.broker_stats(addr, "GROUP_GET_NUMS", &key)? {
                    row.out_tps += data.stats_minute.tps;
                    row.out_messages_24h += last_day_sum(&data);
                }
            }
            traffic.groups.push(row);
        }
        Ok(traffic)
    }

    /// Total lag of a group on a topic: sum of (broker offset - consumer offset).
    pub fn consumer_lag(&self, group: &str, topic: &str) -> Result<i64> {
        let stats = self.consume_stats(group, topic)?;
        Ok(stats
            .offset_table
            .values()
            .map(|w| (w.broker_offset - w.consumer_offset).max(0))
            .sum())
    }

    /// GET_CONSUMER_CONNECTION_LIST from the first broker of `topic` that knows the group.
    pub fn consumer_connections(&self, group: &str, topic: &str) -> Result<ConsumerConnection> {
        let mut last_error = None;
        for (_, addr) in self.topic_masters(topic)? {
            let header = GetConsumerConnectionListRequestHeader {
                consumer_group: group.to_owned(),
            };
            let command = request(RequestCode::GET_CONSUMER_CONNECTION_LIST, &header);
            match self
                .instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])
            {
                Ok(response) => return protocol::decode_body("ConsumerConnection", &response.body),
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| ClientError::BrokerNotFound(topic.to_owned())))
    }

    /// GET_CONSUMER_RUNNING_INFO of one member of `group` (the broker relays it to the
    /// client): its subscriptions, settings, per-queue progress and rates. Asked of the
    /// brokers serving the group's retry topic, as `mqadmin consumerStatus` does.
    pub fn consumer_running_info(
        &self,
        group: &str,
        client_id: &str,
    ) -> Result<ConsumerRunningInfo> {
        let mut last_error = None;
        for (_, addr) in self.topic_masters(&names::retry_topic(group))? {
            let header = GetConsumerRunningInfoRequestHeader {
                consumer_group: group.to_owned(),
                client_id: client_id.to_owned(),
                jstack_enable: Some(false),
            };
            let command = request(RequestCode::GET_CONSUMER_RUNNING_INFO, &header);
            match self
                .instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])
            {
                Ok(response) => {
                    return protocol::decode_body("ConsumerRunningInfo", &response.body)
                }
                Err(error) => last_error = Some(error),
            }
        }
        Err(last_error.unwrap_or_else(|| ClientError::BrokerNotFound(group.to_owned())))
    }

    /// QUERY_CONSUME_QUEUE: up to `count` consume-queue entries of `topic`'s queue
    /// `queue_id` on broker `broker_name` (the route's first broker when `None`), from queue
    /// offset `index`, with `group`'s subscription when given (`mqadmin queryCq`).
    pub fn query_consume_queue(
        &self,
        queue: QueueSelector<'_>,
        index: i64,
        count: i32,
        group: Option<&str>,
    ) -> Result<QueryConsumeQueueResponseBody> {
        let masters = self.topic_masters(queue.topic)?;
        let chosen = masters
            .iter()
            .find(|(name, _)| queue.broker_name.is_none_or(|wanted| wanted == name));
        let Some((_, addr)) = chosen else {
            return Err(ClientError::BrokerNotFound(
                queue.broker_name.unwrap_or(queue.topic).to_owned(),
            ));
        };
        let header = QueryConsumeQueueRequestHeader {
            topic: queue.topic.to_owned(),
            queue_id: queue.queue_id,
            index,
            count,
            consumer_group: group.map(str::to_owned),
        };
        let command = request(RequestCode::QUERY_CONSUME_QUEUE, &header);
        let response = self
            .instance
            .invoke_broker(addr, command, &[ResponseCode::SUCCESS])?;
        protocol::decode_body("QueryConsumeQueueResponseBody", &response.body)
    }

    /// GET_BROKER_CONSUME_STATS of one broker: every group's consume stats on every topic it
    /// subscribes (`mqadmin brokerConsumeStats`); `order_only` keeps ordered topics.
    pub fn broker_consume_stats(
        &self,
        broker_addr: &str,
        order_only: bool,
    ) -> Result<ConsumeStatsList> {
        let header = GetConsumeStatsInBrokerHeader {
            is_order: order_only,
        };
        let command = request(RequestCode::GET_BROKER_CONSUME_STATS, &header);
        let response =
            self.instance
                .invoke_broker(broker_addr, command, &[ResponseCode::SUCCESS])?;
        protocol::decode_body("ConsumeStatsList", &response.body)
    }

    /// CLONE_GROUP_OFFSET on every broker of `topic`: `dest` gets `src`'s committed offsets
    /// there (`mqadmin cloneGroupOffset`; `offline` when `src` has no online member).
    pub fn clone_group_offset(
        &self,
        src: &str,
        dest: &str,
        topic: &str,
        offline: bool,
    ) -> Result<()> {
        for (_, addr) in self.topic_masters(topic)? {
            let header = CloneGroupOffsetRequestHeader {
                src_group: src.to_owned(),
                dest_group: dest.to_owned(),
                topic: Some(topic.to_owned()),
                offline: Some(offline),
            };
            let command = request(RequestCode::CLONE_GROUP_OFFSET, &header);
            self.instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
        }
        Ok(())
    }

    /// QUERY_MESSAGE on every broker of `topic`, keeping messages whose keys include `key`.
    pub fn query_messages_by_key(
        &self,
        topic: &str,
        key: &str,
        max_num: i32,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<MessageExt>> {
        let mut found = Vec::new();
        for (broker_name, addr) in self.topic_masters(topic)? {
            let header = QueryMessageRequestHeader {
                topic: topic.to_owned(),
                key: key.to_owned(),
                max_num,
                begin_timestamp: begin_ms,
                end_timestamp: end_ms,
                unique_key_query: Some(false),
                broker_name: Some(broker_name),
            };
            let command = request(RequestCode::QUERY_MESSAGE, &header);
            let response = self.instance.invoke_broker(
                &addr,
                command,
                &[ResponseCode::SUCCESS, ResponseCode::QUERY_NOT_FOUND],
            )?;
            if response.response_code() == ResponseCode::SUCCESS {
                let messages = decode_records(response.body);
                found.extend(messages.into_iter().filter(|m| m.keys().any(|k| k == key)));
            }
        }
        Ok(found)
    }

    /// VIEW_MESSAGE_BY_ID with a broker offset message id (the send result's
    /// `offset_msg_id`).
    pub fn view_message(&self, offset_msg_id: &str) -> Result<MessageExt> {
        let id = decode_offset_msg_id(offset_msg_id)
            .map_err(|error| ClientError::Invalid(format!("bad offset message id: {error}")))?;
        let header = ViewMessageRequestHeader {
            offset: id.commit_log_offset,
            topic: None,
            broker_name: None,
        };
        let command = request(RequestCode::VIEW_MESSAGE_BY_ID, &header);
        let addr = id.store_host.to_string();
        let response = self
            .instance
            .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
        decode_records(response.body)
            .into_iter()
            .next()
            .ok_or_else(|| ClientError::Invalid(format!("{addr} returned no message")))
    }

    /// Resets `group`'s offsets on `topic` to the first message stored at or after
    /// `timestamp_ms` (-1: the end), on every broker of the topic.
    pub fn reset_offset_by_timestamp(
        &self,
        group: &str,
        topic: &str,
        timestamp_ms: i64,
        force: bool,
    ) -> Result<BTreeMap<MessageQueue, i64>> {
        let mut offsets = BTreeMap::new();
        for (_, addr) in self.topic_masters(topic)? {
            let header = ResetOffsetRequestHeader {
                topic: topic.to_owned(),
                group: group.to_owned(),
                queue_id: None,
                offset: None,
                timestamp: timestamp_ms,
                is_force: force,
            };
            let command = request(RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, &header);
            let response = self
                .instance
                .invoke_broker(&addr, command, &[ResponseCode::SUCCESS])?;
            if !response.body.is_empty() {
                let body: ResetOffsetBody =
                    protocol::decode_body("ResetOffsetBody", &response.body)?;
                offsets.extend(body.offset_table);
            }
        }
        Ok(offsets)
    }
}
