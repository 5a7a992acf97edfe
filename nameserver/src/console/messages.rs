//! The console's message lookups: by offset message id, by key, and by queue offset, each
//! answered with the messages' bodies and properties.
//!
//! The console only connects to brokers the route table names: an offset message id carries
//! a broker address, and one that is not a registered broker's is refused rather than
//! dialled.

use std::rc::Rc;

use comet_proto::body::QueryConsumeQueueResponseBody;
use comet_proto::headers::{
    QueryConsumeQueueRequestHeader, QueryMessageRequestHeader, ViewMessageRequestHeader,
};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::{decode_records, MessageExt, RemotingCommand, RequestCode, ResponseCode};
use serde_json::{json, Value};

use super::api::{ask_each, brokers, decode, readers, topic_readers, BrokerAt};
use super::Console;
use comet_net::http::{Request, Response};

/// Most messages a key lookup returns per broker.
pub const KEY_MATCHES_MAX: i32 = 32;

/// Most body bytes an answer carries per message; the rest is cut (and said so).
pub const BODY_SHOWN_BYTES_MAX: usize = 64 * 1024;

/// A message as the page shows it.
fn message_json(broker_name: &str, message: &MessageExt) -> Value {
    let shown = &message.body[..message.body.len().min(BODY_SHOWN_BYTES_MAX)];
    let (body, encoding) = match std::str::from_utf8(shown) {
        Ok(text) => (text.to_owned(), "utf-8"),
        Err(_) => (
            shown.iter().map(|byte| format!("{byte:02x}")).collect(),
            "hex",
        ),
    };
    let properties: serde_json::Map<String, Value> = message
        .properties
        .iter()
        .map(|(name, value)| (name.to_owned(), json!(value)))
        .collect();
    json!({
        "topic": message.topic,
        "brokerName": broker_name,
        "queueId": message.queue_id,
        "queueOffset": message.queue_offset,
        "commitLogOffset": message.commit_log_offset,
        "msgId": message.msg_id,
        "uniqKey": message.uniq_key(),
        "keys": message.keys().collect::<Vec<_>>(),
        "tags": message.tags(),
        "bornTimestamp": message.born_timestamp,
        "bornHost": message.born_host.to_string(),
        "storeTimestamp": message.store_timestamp,
        "storeHost": message.store_host.to_string(),
        "reconsumeTimes": message.reconsume_times,
        "storeSize": message.store_size,
        "bodyBytes": message.body.len(),
        "bodyTruncated": message.body.len() > shown.len(),
        "bodyEncoding": encoding,
        "body": body,
        "properties": properties,
    })
}

/// VIEW_MESSAGE_BY_ID at `commit_log_offset` of `broker`.
async fn view(
    console: &Rc<Console>,
    broker: &BrokerAt,
    commit_log_offset: i64,
) -> Result<Option<MessageExt>, Response> {
    let header = ViewMessageRequestHeader {
        offset: commit_log_offset,
        topic: None,
        broker_name: None,
    };
    let command = RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID, 0).with_header(&header);
    let answer = ask_each(
        console,
        std::slice::from_ref(broker),
        |_| command.clone(),
        &[ResponseCode::SUCCESS, ResponseCode::SYSTEM_ERROR],
    )
    .await
    .pop()
    .expect("one answer per target");
    match answer {
        // A broker that holds nothing at the offset says so as SYSTEM_ERROR.
        Ok(answer) if answer.response_code() != ResponseCode::SUCCESS => Ok(None),
        Ok(answer) => Ok(decode_records(answer.body).into_iter().next()),
        Err(error) => Err(Response::json(
            502,
            &json!({ "errors": [broker.error(&error)] }),
        )),
    }
}

/// `GET /api/message/id?id=`: the message of an offset message id (broker address and
/// commit-log offset, what `SendResult.offsetMsgId` and stored messages' `msgId` carry).
pub async fn by_id(console: &Rc<Console>, request: &Request) -> Response {
    let Some(id) = request.query("id").map(str::trim) else {
        return Response::error(400, "give ?id=");
    };
    let decoded = match decode_offset_msg_id(id) {
        Ok(decoded) => decoded,
        Err(error) => {
            return Response::error(400, format!("{id:?} is not an offset message id: {error}"))
        }
    };
    let host = decoded.store_host.to_string();
    let Some(broker) = brokers(console)
        .into_iter()
        .find(|broker| broker.addr == host)
    else {
        return Response::error(
            404,
            format!(
                "id {id} names broker {host}, which is not registered here (a client-side \
                 UNIQ_KEY id is found by key: use the key lookup with the topic)"
            ),
        );
    };
    match view(console, &broker, decoded.commit_log_offset).await {
        Ok(Some(message)) => Response::json(
            200,
            &json!({ "messages": [message_json(&broker.broker_name, &message)], "errors": [] }),
        ),
        Ok(None) => Response::error(
            404,
            format!(
                "broker {host} holds no message at commit-log offset {}",
                decoded.commit_log_offset
            ),
        ),
        Err(response) => response,
    }
}

/// `GET /api/message/key?topic=&key=`: the messages of `topic` with `key` among their keys,
/// or whose client id (UNIQ_KEY) is `key` (QUERY_MESSAGE on each broker of the topic).
pub async fn by_key(console: &Rc<Console>, request: &Request) -> Response {
    let (Some(topic), Some(key)) = (request.query("topic"), request.query("key")) else {
        return Response::error(400, "give ?topic= and ?key=");
    };
    let Some(targets) = topic_readers(console, topic) else {
        return Response::error(404, format!("no route for topic {topic}"));
    };
    let mut found = Vec::new();
    let mut errors = Vec::new();
    for unique in [false, true] {
        let answers = ask_each(
            console,
            &targets,
            |broker| {
                let header = QueryMessageRequestHeader {
                    topic: topic.to_owned(),
                    key: key.to_owned(),
                    max_num: KEY_MATCHES_MAX,
                    begin_timestamp: 0,
                    end_timestamp: i64::MAX,
                    unique_key_query: Some(unique),
                    broker_name: Some(broker.broker_name.clone()),
                };
                RemotingCommand::request(RequestCode::QUERY_MESSAGE, 0).with_header(&header)
            },
            &[ResponseCode::SUCCESS, ResponseCode::QUERY_NOT_FOUND],
        )
        .await;
        for (broker, answer) in targets.iter().zip(answers) {
            match answer {
                Ok(answer) if answer.response_code() == ResponseCode::SUCCESS => {
                    // The index matches hashes: keep only true matches.
                    for message in decode_records(answer.body) {
                        let matches = if unique {
                            message.uniq_key() == Some(key)
                        } else {
                            message.keys().any(|candidate| candidate == key)
                        };
                        let seen = found.iter().any(|(_, known): &(String, MessageExt)| {
                            known.msg_id == message.msg_id
                        });
                        if matches && !seen {
                            found.push((broker.broker_name.clone(), message));
                        }
                    }
                }
                Ok(_) => {}
                Err(error) if !unique => errors.push(broker.error(&error)),
                Err(_) => {}
            }
        }
    }
    found.sort_by_key(|(_, message)| message.store_timestamp);
    let messages: Vec<Value> = found
        .iter()
        .map(|(broker_name, message)| message_json(broker_name, message))
        .collect();
    Response::json(200, &json!({ "messages": messages, "errors": errors }))
}

/// `GET /api/message/offset?topic=&broker=&queue=&offset=`: the message at one queue offset,
/// found as `mqadmin queryCq` finds its commit-log offset, then viewed.
pub async fn by_offset(console: &Rc<Console>, request: &Request) -> Response {
    let (Some(topic), Some(broker_name)) = (request.query("topic"), request.query("broker")) else {
        return Response::error(400, "give ?topic=, ?broker=, ?queue= and ?offset=");
    };
    let queue_id = request
        .query("queue")
        .and_then(|text| text.trim().parse::<i32>().ok());
    let offset = request
        .query("offset")
        .and_then(|text| text.trim().parse::<i64>().ok());
    let (Some(queue_id), Some(offset)) = (queue_id, offset) else {
        return Response::error(400, "queue and offset must be numbers");
    };
    if queue_id < 0 || offset < 0 {
        return Response::error(400, "queue and offset are not negative");
    }
    if topic_readers(console, topic).is_none() {
        return Response::error(404, format!("no route for topic {topic}"));
    }
    let Some(broker) = readers(console)
        .into_iter()
        .find(|broker| broker.broker_name == broker_name)
    else {
        return Response::error(404, format!("no broker named {broker_name} is registered"));
    };
    let header = QueryConsumeQueueRequestHeader {
        topic: topic.to_owned(),
        queue_id,
        index: offset,
        count: 1,
        consumer_group: None,
    };
    let command =
        RemotingCommand::request(RequestCode::QUERY_CONSUME_QUEUE, 0).with_header(&header);
    let answer = ask_each(
        console,
        std::slice::from_ref(&broker),
        |_| command.clone(),
        &[ResponseCode::SUCCESS],
    )
    .await
    .pop()
    .expect("one answer per target");
    let body = answer.and_then(|answer| {
        decode::<QueryConsumeQueueResponseBody>(&broker, "QueryConsumeQueueResponseBody", &answer)
    });
    let body = match body {
        Ok(body) => body,
        Err(error) => return Response::json(502, &json!({ "errors": [broker.error(&error)] })),
    };
    let entry = body
        .queue_data
        .as_deref()
        .and_then(|entries| entries.first());
    let Some(entry) = entry else {
        return Response::error(
            404,
            format!(
                "no message at offset {offset} of {topic} queue {queue_id} on {broker_name} \
                 (it holds offsets {} to {})",
                body.min_queue_index,
                body.max_queue_index - 1
            ),
        );
    };
    match view(console, &broker, entry.physic_offset).await {
        Ok(Some(message)) => Response::json(
            200,
            &json!({ "messages": [message_json(&broker.broker_name, &message)], "errors": [] }),
        ),
        Ok(None) => Response::error(
            404,
            format!("the message at offset {offset} is no longer in the commit log"),
        ),
        Err(response) => response,
    }
}
