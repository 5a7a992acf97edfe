//! The console's routes: the static page, and the JSON API built from the route table and
//! the brokers' answers. Reads are GET (or HEAD); the offset reset is the one POST.
//!
//! Every answer that gathers from several brokers has an `errors` list of
//! `{brokerName, addr, error}`: what the others answered is shown, and the silent one named.

use std::collections::BTreeMap;
use std::rc::Rc;

use comet_proto::body::{ClusterInfo, JsonBody, KVTable, TopicStatsTable};
use comet_proto::headers::GetTopicStatsInfoRequestHeader;
use comet_proto::{names, RemotingCommand, RequestCode, ResponseCode};
use comet_rt::clock::wall_clock_ms;
use comet_rt::task_class::{spawn, TaskClass};
use serde_json::{json, Value};

use super::assets;
use super::broker_call::BrokerCallError;
use super::groups;
use super::messages;
use super::Console;
use super::CONSOLE_HEADER;
use crate::route_table::BrokerKey;
use comet_net::http::{Method, Request, Response};

/// Answers `request`.
pub async fn answer(console: &Rc<Console>, request: &Request) -> Response {
    let path = request.path.as_str();
    if path == groups::RESET_PATH {
        if request.method != Method::Post {
            return Response::error(405, "the offset reset is a POST");
        }
        if !request.has_header(CONSOLE_HEADER) {
            return Response::error(
                403,
                format!("the offset reset needs the {CONSOLE_HEADER} header"),
            );
        }
        return groups::reset(console, request).await;
    }
    if !matches!(request.method, Method::Get | Method::Head) {
        return Response::error(405, format!("{path} answers GET and HEAD only"));
    }
    if let Some(asset) = assets::find(path) {
        return Response::ok(asset.content_type, asset.body.as_bytes());
    }
    match path {
        "/api/cluster" => cluster(console).await,
        "/api/throughput" => throughput(console).await,
        "/api/topics" => topics(console),
        "/api/topic" => match request.query("topic") {
            Some(topic) => topic_detail(console, topic).await,
            None => Response::error(400, "give ?topic="),
        },
        "/api/groups" => groups::list(console).await,
        "/api/group" => match request.query("group") {
            Some(group) => groups::detail(console, group).await,
            None => Response::error(400, "give ?group="),
        },
        "/api/message/id" => messages::by_id(console, request).await,
        "/api/message/key" => messages::by_key(console, request).await,
        "/api/message/offset" => messages::by_offset(console, request).await,
        _ => Response::error(404, format!("no page or API at {path}")),
    }
}

/// One broker process as the route table knows it.
#[derive(Clone, Debug)]
pub struct BrokerAt {
    /// Cluster name.
    pub cluster: String,
    /// Logical broker name.
    pub broker_name: String,
    /// Broker id (0: master).
    pub broker_id: i64,
    /// `ip:port`.
    pub addr: String,
}

impl BrokerAt {
    /// `master` or `slave`, by broker id as RocketMQ assigns them.
    pub fn role(&self) -> &'static str {
        if self.broker_id == 0 {
            "master"
        } else {
            "slave"
        }
    }

    /// An `errors` entry for this broker.
    pub fn error(&self, error: &BrokerCallError) -> Value {
        json!({ "brokerName": self.broker_name, "addr": self.addr, "error": error.to_string() })
    }
}

/// Every registered broker process, by cluster, broker name and id.
pub fn brokers(console: &Console) -> Vec<BrokerAt> {
    let info = console.state().routes.borrow().cluster_info();
    let mut all = Vec::new();
    for data in info.broker_addr_table.values() {
        for (id, addr) in &data.broker_addrs {
            all.push(BrokerAt {
                cluster: data.cluster.clone(),
                broker_name: data.broker_name.clone(),
                broker_id: *id,
                addr: addr.clone(),
            });
        }
    }
    all.sort_by(|a, b| {
        (&a.cluster, &a.broker_name, a.broker_id).cmp(&(&b.cluster, &b.broker_name, b.broker_id))
    });
    all
}

/// The broker each logical broker name reads from: its master, else its lowest id.
pub fn readers(console: &Console) -> Vec<BrokerAt> {
    let mut chosen: BTreeMap<String, BrokerAt> = BTreeMap::new();
    for broker in brokers(console) {
        chosen.entry(broker.broker_name.clone()).or_insert(broker);
    }
    chosen.into_values().collect()
}

/// The readers of the logical brokers that serve `topic`; `None` for a topic without route.
pub fn topic_readers(console: &Console, topic: &str) -> Option<Vec<BrokerAt>> {
    let route = console.state().routes.borrow().route(topic)?;
    let names: Vec<&str> = route
        .queue_datas
        .iter()
        .map(|queue| queue.broker_name.as_str())
        .collect();
    Some(
        readers(console)
            .into_iter()
            .filter(|broker| names.contains(&broker.broker_name.as_str()))
            .collect(),
    )
}

/// Sends each broker its request at once and waits for every answer (each bounded by the
/// call timeout), in the order of `targets`.
pub async fn ask_each(
    console: &Rc<Console>,
    targets: &[BrokerAt],
    request: impl Fn(&BrokerAt) -> RemotingCommand,
    accepted: &'static [ResponseCode],
) -> Vec<Result<RemotingCommand, BrokerCallError>> {
    let handles: Vec<_> = targets
        .iter()
        .map(|target| {
            let console = console.clone();
            let addr = target.addr.clone();
            let command = request(target);
            spawn(TaskClass::Admin, async move {
                console.calls().call(&addr, command, accepted).await
            })
        })
        .collect();
    let mut answers = Vec::with_capacity(handles.len());
    for handle in handles {
        answers.push(handle.await);
    }
    answers
}

/// Decodes a JSON body, or a call error naming what did not parse.
pub fn decode<T: JsonBody>(
    broker: &BrokerAt,
    what: &'static str,
    answer: &RemotingCommand,
) -> Result<T, BrokerCallError> {
    T::decode(&answer.body).map_err(|error| BrokerCallError::BadBody {
        addr: broker.addr.clone(),
        what,
        reason: error.to_string(),
    })
}

const SUCCESS: &[ResponseCode] = &[ResponseCode::SUCCESS];

/// Runtime figures of every broker process (GET_BROKER_RUNTIME_INFO).
async fn runtime_infos(
    console: &Rc<Console>,
    all: &[BrokerAt],
) -> Vec<Result<BTreeMap<String, String>, BrokerCallError>> {
    let answers = ask_each(
        console,
        all,
        |_| RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO, 0),
        SUCCESS,
    )
    .await;
    all.iter()
        .zip(answers)
        .map(|(broker, answer)| {
            let table: KVTable = decode(broker, "KVTable", &answer?)?;
            Ok(table.table)
        })
        .collect()
}

/// `GET /api/cluster`: clusters, their brokers with roles, addresses, liveness and runtime
/// figures.
async fn cluster(console: &Rc<Console>) -> Response {
    let all = brokers(console);
    let infos = runtime_infos(console, &all).await;
    let now_ms = wall_clock_ms();
    let mut clusters: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (broker, info) in all.iter().zip(infos) {
        let key = BrokerKey {
            cluster: broker.cluster.clone(),
            addr: broker.addr.clone(),
        };
        let heartbeat_age_ms = console
            .state()
            .routes
            .borrow()
            .live(&key)
            .map(|live| now_ms - live.last_update_ms);
        let mut row = json!({
            "brokerName": broker.broker_name,
            "brokerId": broker.broker_id,
            "role": broker.role(),
            "addr": broker.addr,
            "heartbeatAgeMs": heartbeat_age_ms,
        });
        match info {
            Ok(table) => row["runtime"] = json!(table),
            Err(error) => row["error"] = json!(error.to_string()),
        }
        clusters
            .entry(broker.cluster.clone())
            .or_default()
            .push(row);
    }
    let clusters: Vec<Value> = clusters
        .into_iter()
        .map(|(name, brokers)| json!({ "name": name, "brokers": brokers }))
        .collect();
    Response::json(200, &json!({ "clusters": clusters }))
}

/// `GET /api/throughput`: every broker's message counters now (the page turns successive
/// samples into rates).
async fn throughput(console: &Rc<Console>) -> Response {
    let all = brokers(console);
    let infos = runtime_infos(console, &all).await;
    let figure = |table: &BTreeMap<String, String>, key: &str| {
        table
            .get(key)
            .and_then(|value| value.trim().parse::<i64>().ok())
    };
    let rows: Vec<Value> = all
        .iter()
        .zip(infos)
        .map(|(broker, info)| match info {
            Ok(table) => json!({
                "brokerName": broker.broker_name,
                "brokerId": broker.broker_id,
                "addr": broker.addr,
                "putTotal": figure(&table, "msgPutTotalTodayNow"),
                "getTotal": figure(&table, "msgGetTotalTodayNow"),
            }),
            Err(error) => json!({
                "brokerName": broker.broker_name,
                "brokerId": broker.broker_id,
                "addr": broker.addr,
                "error": error.to_string(),
            }),
        })
        .collect();
    Response::json(200, &json!({ "timeMs": wall_clock_ms(), "brokers": rows }))
}

/// What a topic is for, as the topics page sorts them: `normal` (an application's),
/// `retry` and `dlq` (a group's), or `system` (the broker's own: RocketMQ's system topics,
/// and the topics named after a cluster or broker that brokers register, as Java's do).
fn topic_kind(topic: &str, info: &ClusterInfo) -> &'static str {
    let own = info
        .cluster_addr_table
        .keys()
        .any(|cluster| topic == cluster || topic == names::reply_topic(cluster))
        || info.broker_addr_table.contains_key(topic);
    if names::is_retry_topic(topic) {
        "retry"
    } else if names::is_dlq_topic(topic) {
        "dlq"
    } else if own || names::is_system_topic(topic) {
        "system"
    } else {
        "normal"
    }
}

/// `GET /api/topics`: every topic the name server routes, with its kind and its brokers'
/// queue counts.
fn topics(console: &Rc<Console>) -> Response {
    let routes = console.state().routes.borrow();
    let info = routes.cluster_info();
    let rows: Vec<Value> = routes
        .all_topics()
        .topic_list
        .iter()
        .map(|topic| {
            let brokers: Vec<Value> = routes
                .route(topic)
                .map(|route| {
                    route
                        .queue_datas
                        .iter()
                        .map(|queue| {
                            json!({
                                "brokerName": queue.broker_name,
                                "readQueues": queue.read_queue_nums,
                                "writeQueues": queue.write_queue_nums,
                                "perm": queue.perm,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default();
            json!({
                "topic": topic,
                "kind": topic_kind(topic, &info),
                "brokers": brokers,
            })
        })
        .collect();
    Response::json(200, &json!({ "topics": rows }))
}

/// `GET /api/topic?topic=`: the topic's queues with their min and max offsets on each broker
/// (GET_TOPIC_STATS_INFO).
async fn topic_detail(console: &Rc<Console>, topic: &str) -> Response {
    let Some(targets) = topic_readers(console, topic) else {
        return Response::error(404, format!("no route for topic {topic}"));
    };
    let answers = ask_each(
        console,
        &targets,
        |broker| {
            let header = GetTopicStatsInfoRequestHeader {
                topic: topic.to_owned(),
                broker_name: Some(broker.broker_name.clone()),
            };
            RemotingCommand::request(RequestCode::GET_TOPIC_STATS_INFO, 0).with_header(&header)
        },
        SUCCESS,
    )
    .await;
    let mut queues = Vec::new();
    let mut errors = Vec::new();
    for (broker, answer) in targets.iter().zip(answers) {
        let stats =
            answer.and_then(|answer| decode::<TopicStatsTable>(broker, "TopicStatsTable", &answer));
        match stats {
            Ok(stats) => {
                for (queue, offsets) in stats.offset_table {
                    queues.push(json!({
                        "brokerName": queue.broker_name,
                        "queueId": queue.queue_id,
                        "minOffset": offsets.min_offset,
                        "maxOffset": offsets.max_offset,
                        "messages": offsets.max_offset - offsets.min_offset,
                        "lastUpdateTimestamp": offsets.last_update_timestamp,
                    }));
                }
            }
            Err(error) => errors.push(broker.error(&error)),
        }
    }
    let total: i64 = queues
        .iter()
        .filter_map(|queue| queue["messages"].as_i64())
        .sum();
    Response::json(
        200,
        &json!({ "topic": topic, "queues": queues, "messages": total, "errors": errors }),
    )
}
