//! The console's consumer-group pages: the groups of every broker, one group's connections
//! and lag per queue, and the offset reset (as `mqadmin resetOffsetByTime`).

use std::collections::BTreeMap;
use std::rc::Rc;

use comet_proto::body::{
    ConsumeStats, ConsumerConnection, ResetOffsetBody, SubscriptionGroupWrapper,
};
use comet_proto::headers::{
    GetConsumeStatsRequestHeader, GetConsumerConnectionListRequestHeader, ResetOffsetRequestHeader,
};
use comet_proto::{names, RemotingCommand, RequestCode, ResponseCode};
use serde_json::{json, Value};

use super::api::{ask_each, decode, readers, topic_readers};
use super::Console;
use comet_net::http::{field, Request, Response};

/// The path of the offset reset (POST, form fields `group`, `topic`, `timestamp`).
pub const RESET_PATH: &str = "/api/group/reset";

const SUCCESS: &[ResponseCode] = &[ResponseCode::SUCCESS];

/// True for the groups brokers keep for themselves (the page hides them unless asked).
fn is_built_in(group: &str) -> bool {
    names::is_system_group(group) || names::BUILT_IN_GROUPS.contains(&group)
}

/// `GET /api/groups`: every group any broker knows (GET_ALL_SUBSCRIPTIONGROUP_CONFIG).
pub async fn list(console: &Rc<Console>) -> Response {
    let targets = readers(console);
    let answers = ask_each(
        console,
        &targets,
        |_| RemotingCommand::request(RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG, 0),
        SUCCESS,
    )
    .await;
    let mut groups: BTreeMap<String, (Vec<String>, bool, i32)> = BTreeMap::new();
    let mut errors = Vec::new();
    for (broker, answer) in targets.iter().zip(answers) {
        let wrapper = answer.and_then(|answer| {
            decode::<SubscriptionGroupWrapper>(broker, "SubscriptionGroupWrapper", &answer)
        });
        match wrapper {
            Ok(wrapper) => {
                for (name, config) in wrapper.subscription_group_table {
                    let entry = groups.entry(name).or_insert((
                        Vec::new(),
                        config.consume_enable,
                        config.retry_max_times,
                    ));
                    entry.0.push(broker.broker_name.clone());
                }
            }
            Err(error) => errors.push(broker.error(&error)),
        }
    }
    let rows: Vec<Value> = groups
        .into_iter()
        .map(|(group, (brokers, consume_enable, retry_max_times))| {
            json!({
                "group": group,
                "system": is_built_in(&group),
                "brokers": brokers,
                "consumeEnable": consume_enable,
                "retryMaxTimes": retry_max_times,
            })
        })
        .collect();
    Response::json(200, &json!({ "groups": rows, "errors": errors }))
}

/// `GET /api/group?group=`: the group's online members and, per queue of every topic it has
/// offsets on, the broker's and the group's offsets and the lag between them.
pub async fn detail(console: &Rc<Console>, group: &str) -> Response {
    let targets = readers(console);
    let stats = ask_each(
        console,
        &targets,
        |broker| {
            let header = GetConsumeStatsRequestHeader {
                consumer_group: group.to_owned(),
                topic: None,
                topic_list: None,
                broker_name: Some(broker.broker_name.clone()),
            };
            RemotingCommand::request(RequestCode::GET_CONSUME_STATS, 0).with_header(&header)
        },
        SUCCESS,
    );
    // A broker the group has no member on answers CONSUMER_NOT_ONLINE: no connections there.
    let connections = ask_each(
        console,
        &targets,
        |_| {
            let header = GetConsumerConnectionListRequestHeader {
                consumer_group: group.to_owned(),
            };
            RemotingCommand::request(RequestCode::GET_CONSUMER_CONNECTION_LIST, 0)
                .with_header(&header)
        },
        &[ResponseCode::SUCCESS, ResponseCode::CONSUMER_NOT_ONLINE],
    );
    let (stats, connections) = (stats.await, connections.await);
    let mut queues = Vec::new();
    let mut errors = Vec::new();
    for (broker, answer) in targets.iter().zip(stats) {
        match answer.and_then(|answer| decode::<ConsumeStats>(broker, "ConsumeStats", &answer)) {
            Ok(stats) => {
                for (queue, offsets) in stats.offset_table {
                    queues.push(json!({
                        "topic": queue.topic,
                        "brokerName": queue.broker_name,
                        "queueId": queue.queue_id,
                        "brokerOffset": offsets.broker_offset,
                        "consumerOffset": offsets.consumer_offset,
                        "lag": (offsets.broker_offset - offsets.consumer_offset).max(0),
                        "lastTimestamp": offsets.last_timestamp,
                    }));
                }
            }
            Err(error) => errors.push(broker.error(&error)),
        }
    }
    let mut members: BTreeMap<String, Value> = BTreeMap::new();
    let mut settings = json!({});
    for (broker, answer) in targets.iter().zip(connections) {
        let answer = match answer {
            Ok(answer) if answer.response_code() == ResponseCode::SUCCESS => answer,
            Ok(_) => continue,
            Err(error) => {
                errors.push(broker.error(&error));
                continue;
            }
        };
        match decode::<ConsumerConnection>(broker, "ConsumerConnection", &answer) {
            Ok(connection) => {
                settings = json!({
                    "consumeType": connection.consume_type.map(|value| format!("{value:?}")),
                    "messageModel": connection.message_model.map(|value| format!("{value:?}")),
                    "consumeFromWhere":
                        connection.consume_from_where.map(|value| format!("{value:?}")),
                    "subscriptions": connection.subscription_table.values().map(|data| {
                        json!({ "topic": data.topic, "expression": data.sub_string })
                    }).collect::<Vec<_>>(),
                });
                for member in connection.connection_set {
                    let row = members.entry(member.client_id.clone()).or_insert_with(|| {
                        json!({
                            "clientId": member.client_id,
                            "clientAddr": member.client_addr,
                            "language": format!("{:?}", member.language),
                            "version": member.version,
                            "brokers": [],
                        })
                    });
                    if let Some(brokers) = row["brokers"].as_array_mut() {
                        brokers.push(json!(broker.broker_name));
                    }
                }
            }
            Err(error) => errors.push(broker.error(&error)),
        }
    }
    let total_lag: i64 = queues
        .iter()
        .filter_map(|queue| queue["lag"].as_i64())
        .sum();
    Response::json(
        200,
        &json!({
            "group": group,
            "queues": queues,
            "totalLag": total_lag,
            "connections": members.into_values().collect::<Vec<_>>(),
            "settings": settings,
            "errors": errors,
        }),
    )
}

/// `POST /api/group/reset`: moves `group`'s offsets on `topic`, on every broker serving it,
/// to the first message stored at or after `timestamp` (ms; -1: the end of each queue).
/// Members online are told to follow (INVOKE_BROKER_TO_RESET_OFFSET with force).
pub async fn reset(console: &Rc<Console>, request: &Request) -> Response {
    let fields = request.form_fields();
    let (Some(group), Some(topic), Some(timestamp)) = (
        field(&fields, "group"),
        field(&fields, "topic"),
        field(&fields, "timestamp"),
    ) else {
        return Response::error(
            400,
            "give the form fields group, topic and timestamp (ms since the epoch, -1: the end)",
        );
    };
    let Ok(timestamp_ms) = timestamp.trim().parse::<i64>() else {
        return Response::error(
            400,
            format!("timestamp {timestamp:?} is not a number of ms"),
        );
    };
    if timestamp_ms < -1 || group.is_empty() {
        return Response::error(
            400,
            "timestamp is -1 or ms since the epoch; group is needed",
        );
    }
    let Some(targets) = topic_readers(console, topic) else {
        return Response::error(404, format!("no route for topic {topic}"));
    };
    let answers = ask_each(
        console,
        &targets,
        |_| {
            let header = ResetOffsetRequestHeader {
                topic: topic.to_owned(),
                group: group.to_owned(),
                queue_id: None,
                offset: None,
                timestamp: timestamp_ms,
                is_force: true,
            };
            RemotingCommand::request(RequestCode::INVOKE_BROKER_TO_RESET_OFFSET, 0)
                .with_header(&header)
        },
        SUCCESS,
    )
    .await;
    let mut offsets = Vec::new();
    let mut errors = Vec::new();
    for (broker, answer) in targets.iter().zip(answers) {
        let body = answer.and_then(|answer| {
            if answer.body.is_empty() {
                Ok(ResetOffsetBody::default())
            } else {
                decode::<ResetOffsetBody>(broker, "ResetOffsetBody", &answer)
            }
        });
        match body {
            Ok(body) => {
                for (queue, offset) in body.offset_table {
                    offsets.push(json!({
                        "brokerName": queue.broker_name,
                        "queueId": queue.queue_id,
                        "offset": offset,
                    }));
                }
            }
            Err(error) => errors.push(broker.error(&error)),
        }
    }
    let status = if errors.is_empty() { 200 } else { 502 };
    Response::json(
        status,
        &json!({
            "group": group,
            "topic": topic,
            "timestamp": timestamp_ms,
            "offsets": offsets,
            "errors": errors,
        }),
    )
}
