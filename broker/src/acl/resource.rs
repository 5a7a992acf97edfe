//! What a request needs, per request code (Java's `PlainAccessResource.parse`).
//!
//! ```text
//! SEND_MESSAGE                         topic (`topic`)        PUB, or SUB for a %RETRY% topic
//! SEND_MESSAGE_V2, SEND_BATCH_MESSAGE  topic (`b`)            PUB, or SUB for a %RETRY% topic
//! RECALL_MESSAGE                       topic                  PUB
//! CONSUMER_SEND_MSG_BACK               group (`group`)        SUB
//! PULL_MESSAGE                         topic, consumerGroup   SUB, SUB
//! QUERY_MESSAGE                        topic                  SUB
//! HEART_BEAT                           every consumer group and its subscribed topics: SUB
//! UNREGISTER_CLIENT                    consumerGroup          SUB
//! GET_CONSUMER_LIST_BY_GROUP           consumerGroup          SUB
//! UPDATE_CONSUMER_OFFSET               consumerGroup, topic   SUB, SUB
//! anything else                        nothing beyond a valid signature (and admin, for the
//!                                      admin codes of `Permission.ADMIN_CODE`)
//! ```
//!
//! A group is named by its retry topic `%RETRY%<group>`, as in Java, so one map holds both;
//! a missing field adds nothing (Java skips null resources).

use comet_proto::body::{HeartbeatData, JsonBody};
use comet_proto::json::JsonError;
use comet_proto::names::{retry_topic, RETRY_TOPIC_PREFIX};
use comet_proto::{RemotingCommand, RequestCode};

use super::permission::{PUB, SUB};

/// One needed resource: a topic, or a group as its retry topic.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Needed {
    /// Topic name, or `%RETRY%<group>`.
    pub resource: String,
    /// PUB or SUB.
    pub permission: u8,
}

/// The codes that need an admin account (Java's `Permission.ADMIN_CODE`).
pub fn needs_admin(code: i32) -> bool {
    use RequestCode::*;
    [
        UPDATE_AND_CREATE_TOPIC,
        UPDATE_BROKER_CONFIG,
        DELETE_TOPIC_IN_BROKER,
        UPDATE_AND_CREATE_SUBSCRIPTIONGROUP,
        DELETE_SUBSCRIPTIONGROUP,
        UPDATE_AND_CREATE_STATIC_TOPIC,
        UPDATE_AND_CREATE_ACL_CONFIG,
        DELETE_ACL_CONFIG,
        GET_BROKER_CLUSTER_ACL_INFO,
    ]
    .iter()
    .any(|admin| admin.value() == code)
}

/// True for `%RETRY%...`: the resource stands for a group.
pub fn is_group(resource: &str) -> bool {
    resource.starts_with(RETRY_TOPIC_PREFIX)
}

/// `topic:<name>` or `group:<name>`, as Java's `PlainAccessResource.printStr`.
pub fn describe(resource: &str) -> String {
    match resource.strip_prefix(RETRY_TOPIC_PREFIX) {
        Some(group) => format!("group:{group}"),
        None => format!("topic:{resource}"),
    }
}

/// A heartbeat whose body cannot be read, so the groups and topics it needs are unknown.
#[derive(Debug, thiserror::Error)]
#[error("cannot read the heartbeat body: {0}")]
pub struct UnreadableHeartbeat(#[source] pub JsonError);

/// The resources `request` needs; an error (Java's parse failure) when the heartbeat body
/// cannot be read.
pub fn needed(request: &RemotingCommand) -> Result<Vec<Needed>, UnreadableHeartbeat> {
    use RequestCode::*;
    let mut needed = Vec::new();
    let field = |key: &str| request.ext_fields.get(key).map(str::to_owned);
    let group = |key: &str| field(key).map(|group| retry_topic(&group));
    let code = request.request_code();
    let send_topic = match code {
        SEND_MESSAGE => field("topic"),
        SEND_MESSAGE_V2 | SEND_BATCH_MESSAGE => field("b"),
        _ => None,
    };
    if let Some(topic) = send_topic {
        let permission = if is_group(&topic) { SUB } else { PUB };
        push(&mut needed, Some(topic), permission);
    }
    match code {
        RECALL_MESSAGE => push(&mut needed, field("topic"), PUB),
        CONSUMER_SEND_MSG_BACK => push(&mut needed, group("group"), SUB),
        PULL_MESSAGE => {
            push(&mut needed, field("topic"), SUB);
            push(&mut needed, group("consumerGroup"), SUB);
        }
        QUERY_MESSAGE => push(&mut needed, field("topic"), SUB),
        HEART_BEAT => heartbeat(&mut needed, request)?,
        UNREGISTER_CLIENT | GET_CONSUMER_LIST_BY_GROUP => {
            push(&mut needed, group("consumerGroup"), SUB);
        }
        UPDATE_CONSUMER_OFFSET => {
            push(&mut needed, group("consumerGroup"), SUB);
            push(&mut needed, field("topic"), SUB);
        }
        _ => {}
    }
    Ok(needed)
}

fn push(needed: &mut Vec<Needed>, resource: Option<String>, permission: u8) {
    if let Some(resource) = resource {
        needed.push(Needed {
            resource,
            permission,
        });
    }
}

/// Every consumer group of the heartbeat (its retry topic) and every topic it subscribes.
fn heartbeat(
    needed: &mut Vec<Needed>,
    request: &RemotingCommand,
) -> Result<(), UnreadableHeartbeat> {
    let data = HeartbeatData::decode(&request.body).map_err(UnreadableHeartbeat)?;
    for consumer in &data.consumer_data_set {
        push(needed, Some(retry_topic(&consumer.group_name)), SUB);
        for subscription in &consumer.subscription_data_set {
            push(needed, Some(subscription.topic.clone()), SUB);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(code: RequestCode, fields: &[(&str, &str)]) -> RemotingCommand {
        let mut request = RemotingCommand::request(code, 1);
        for (key, value) in fields {
            request.ext_fields.insert(key, value);
        }
        request
    }

    fn pairs(needed: Vec<Needed>) -> Vec<(String, u8)> {
        needed
            .into_iter()
            .map(|needed| (needed.resource, needed.permission))
            .collect()
    }

    // Proves the per-code resources are Java's: sends need PUB (SUB on a retry topic), pulls
    // SUB on topic and group, offsets SUB on group and topic, unknown codes nothing, and
    // the admin codes are exactly Java's list.
    #[test]
    fn resources_per_code() {
        use RequestCode::*;
        let send = request(SEND_MESSAGE_V2, &[("b", "T"), ("a", "P")]);
        assert_eq!(pairs(needed(&send).unwrap()), vec![("T".into(), PUB)]);
        let retry = request(SEND_MESSAGE, &[("topic", "%RETRY%G")]);
        assert_eq!(
            pairs(needed(&retry).unwrap()),
            vec![("%RETRY%G".into(), SUB)]
        );
        let pull = request(PULL_MESSAGE, &[("topic", "T"), ("consumerGroup", "G")]);
        let expected = vec![("T".to_owned(), SUB), ("%RETRY%G".to_owned(), SUB)];
        assert_eq!(pairs(needed(&pull).unwrap()), expected);
        let offset = request(
            UPDATE_CONSUMER_OFFSET,
            &[("topic", "T"), ("consumerGroup", "G")],
        );
        assert_eq!(needed(&offset).unwrap().len(), 2);
        let back = request(CONSUMER_SEND_MSG_BACK, &[("group", "G")]);
        assert_eq!(
            pairs(needed(&back).unwrap()),
            vec![("%RETRY%G".into(), SUB)]
        );
        assert!(needed(&request(LITE_PULL_MESSAGE, &[("topic", "T")]))
            .unwrap()
            .is_empty());
        assert!(needed(&request(SEND_MESSAGE, &[])).unwrap().is_empty());
        assert!(needs_admin(UPDATE_AND_CREATE_TOPIC.value()));
        assert!(needs_admin(DELETE_SUBSCRIPTIONGROUP.value()));
        assert!(!needs_admin(GET_ALL_TOPIC_CONFIG.value()));
        assert_eq!(describe("%RETRY%G"), "group:G");
        assert_eq!(describe("T"), "topic:T");
    }

    // Proves a heartbeat needs SUB on each consumer group and each subscribed topic, and a
    // heartbeat body that is not JSON is an error.
    #[test]
    fn heartbeat_resources() {
        let body = r#"{"clientID":"c","consumerDataSet":[{"groupName":"G","consumeType":
            "CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":
            "CONSUME_FROM_LAST_OFFSET","subscriptionDataSet":[{"topic":"T","subString":"*",
            "tagsSet":[],"codeSet":[],"subVersion":1}],"unitMode":false}],
            "producerDataSet":[{"groupName":"P"}]}"#;
        let mut heartbeat = request(RequestCode::HEART_BEAT, &[]);
        heartbeat.body = comet_proto::bytes::Bytes::from(body.to_owned());
        let expected = vec![("%RETRY%G".to_owned(), SUB), ("T".to_owned(), SUB)];
        assert_eq!(pairs(needed(&heartbeat).unwrap()), expected);
        heartbeat.body = comet_proto::bytes::Bytes::from_static(b"not json");
        assert!(needed(&heartbeat)
            .unwrap_err()
            .to_string()
            .contains("heartbeat"));
    }
}
