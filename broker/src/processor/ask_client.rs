//! Admin requests the broker answers by asking one of its clients (docs/protocol.md#admin-requests,
//! docs/protocol.md#broker-to-client-requests):
//! GET_CONSUMER_RUNNING_INFO (307), CONSUME_MESSAGE_DIRECTLY (309) and
//! INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223, which asks with
//! GET_CONSUMER_STATUS_FROM_CLIENT, 221).
//!
//! A client's connection lives on the shard that accepted it, which need not be the shard the
//! admin's request arrived on. The forwarded request crosses the mesh as
//! [`ShardCall::AskClient`] and the client's shard waits for the answer:
//!
//! ```text
//!  admin --307--> shard A (admin's connection)
//!                   | find clientId in the group's registry -> ConnectionId on shard B
//!                   +--ShardCall::AskClient{connection, label, command, limit}--> shard B
//!                                                      connection.invoke(command, limit)
//!                                                        --307, new opaque--> client
//!                   <--------- the client's answer, or the error answer ---------+
//!  admin <--the answer, admin's opaque, response flag-- shard A
//! ```
//!
//! Invariants:
//! * Every wait is bounded: the client's shard waits at most `limit` (Java's 10 s for 307 and
//!   309, 5 s per client for 223), the admin's shard at most `limit` plus [`MESH_GRACE`].
//! * The reply of an [`ShardCall::AskClient`] is always a response: the client's own answer
//!   unchanged, or the error Java's `AdminBrokerProcessor.callConsumer` gives for the failure
//!   (CONSUME_MSG_TIMEOUT on a timeout, SYSTEM_ERROR otherwise), built where the failure was
//!   seen, so no error needs to travel back as anything but a command.
//! * What goes back to the admin carries the admin's opaque and serialization and the
//!   response flag, whatever the client sent.

use std::collections::BTreeMap;
use std::time::Duration;

use comet_net::{ConnectionError, ConnectionId};
use comet_proto::body::{GetConsumerStatusBody, JsonBody, QueueOffsets};
use comet_proto::bytes::Bytes;
use comet_proto::command::FLAG_RESPONSE;
use comet_proto::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ViewMessageRequestHeader,
};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};
use thiserror::Error;

use crate::clients::{ChannelRef, ClientLabel};
use crate::shard::{ShardBroker, ShardCall};

use super::error;

/// How long the broker waits for a client's answer to 307 and 309 (Java's
/// `Broker2Client.callClient`).
pub const CLIENT_ANSWER_TIMEOUT: Duration = Duration::from_secs(10);
/// How long the broker waits for each client's answer to GET_CONSUMER_STATUS_FROM_CLIENT
/// (Java's `Broker2Client.getConsumeStatus`).
pub const CONSUMER_STATUS_TIMEOUT: Duration = Duration::from_secs(5);
/// Extra wait on the admin's shard above the client's limit, for the mesh hops.
pub const MESH_GRACE: Duration = Duration::from_secs(1);

/// Java `MQVersion.Version.V3_0_7_SNAPSHOT`: the oldest client that answers 221.
pub const V3_0_7_SNAPSHOT: i32 = 28;
/// Java `MQVersion.Version.V3_1_8_SNAPSHOT`: the oldest client that answers 307 and 309.
pub const V3_1_8_SNAPSHOT: i32 = 62;

/// Names of the version ordinals below [`V3_1_8_SNAPSHOT`], the only ones an error remark
/// here names (Java's `MQVersion.getVersionDesc`).
#[rustfmt::skip]
const OLD_VERSION_NAMES: [&str; V3_1_8_SNAPSHOT as usize] = [
    "V3_0_0_SNAPSHOT", "V3_0_0_ALPHA1", "V3_0_0_BETA1", "V3_0_0_BETA2", "V3_0_0_BETA3",
    "V3_0_0_BETA4", "V3_0_0_BETA5", "V3_0_0_BETA6_SNAPSHOT", "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT", "V3_0_0_BETA7", "V3_0_0_BETA8_SNAPSHOT", "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT", "V3_0_0_BETA9", "V3_0_0_FINAL", "V3_0_1_SNAPSHOT", "V3_0_1",
    "V3_0_2_SNAPSHOT", "V3_0_2", "V3_0_3_SNAPSHOT", "V3_0_3", "V3_0_4_SNAPSHOT", "V3_0_4",
    "V3_0_5_SNAPSHOT", "V3_0_5", "V3_0_6_SNAPSHOT", "V3_0_6", "V3_0_7_SNAPSHOT", "V3_0_7",
    "V3_0_8_SNAPSHOT", "V3_0_8", "V3_0_9_SNAPSHOT", "V3_0_9", "V3_0_10_SNAPSHOT", "V3_0_10",
    "V3_0_11_SNAPSHOT", "V3_0_11", "V3_0_12_SNAPSHOT", "V3_0_12", "V3_0_13_SNAPSHOT",
    "V3_0_13", "V3_0_14_SNAPSHOT", "V3_0_14", "V3_0_15_SNAPSHOT", "V3_0_15",
    "V3_1_0_SNAPSHOT", "V3_1_0", "V3_1_1_SNAPSHOT", "V3_1_1", "V3_1_2_SNAPSHOT", "V3_1_2",
    "V3_1_3_SNAPSHOT", "V3_1_3", "V3_1_4_SNAPSHOT", "V3_1_4", "V3_1_5_SNAPSHOT", "V3_1_5",
    "V3_1_6_SNAPSHOT", "V3_1_6", "V3_1_7_SNAPSHOT", "V3_1_7",
];

/// The Java name of an old version ordinal; the number itself when it is not in the table.
fn old_version_name(version: i32) -> String {
    usize::try_from(version)
        .ok()
        .and_then(|index| OLD_VERSION_NAMES.get(index))
        .map_or_else(|| version.to_string(), |name| (*name).to_owned())
}

/// Why a client gave no answer.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum AskError {
    /// The connection is no longer open on its shard.
    #[error("connection {0} is closed")]
    Gone(ConnectionId),
    /// Sending or waiting on the connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The hand-off to the connection's shard failed or its reply did not come in time.
    #[error("the shard of {connection} did not reply: {reason}")]
    Mesh {
        /// The connection asked.
        connection: ConnectionId,
        /// What went wrong.
        reason: String,
    },
}

/// The answer Java's `callConsumer` gives when the client did not answer.
fn failure_answer(
    command: &RemotingCommand,
    label: &ClientLabel,
    error: &AskError,
) -> RemotingCommand {
    let ClientLabel { group, client_id } = label;
    let timed_out = matches!(error, AskError::Connection(ConnectionError::Timeout { .. }));
    if timed_out {
        let remark = format!("consumer <{group}> <{client_id}> Timeout: {error}");
        RemotingCommand::error_to(command, ResponseCode::CONSUME_MSG_TIMEOUT, remark)
    } else {
        let remark = format!("invoke consumer <{group}> <{client_id}> Exception: {error}");
        RemotingCommand::error_to(command, ResponseCode::SYSTEM_ERROR, remark)
    }
}

/// Sends `command` to a client connection of this shard and waits up to `limit` for its
/// answer; runs on the connection's shard (directly, or for [`ShardCall::AskClient`]).
pub async fn ask_local(
    broker: &ShardBroker,
    connection: ConnectionId,
    label: &ClientLabel,
    command: RemotingCommand,
    limit: Duration,
) -> RemotingCommand {
    assert_eq!(connection.shard, broker.shard(), "asked on the wrong shard");
    assert!(!command.is_response(), "a client is asked with a request");
    assert!(
        !command.is_oneway(),
        "a one-way request gets no answer to wait for"
    );
    let handle = broker
        .server()
        .and_then(|server| server.connection(connection));
    let outcome = match handle {
        Some(handle) => handle
            .invoke(command.clone(), limit)
            .await
            .map_err(AskError::from),
        None => Err(AskError::Gone(connection)),
    };
    match outcome {
        Ok(answer) => answer,
        Err(error) => {
            log::debug!(
                "client {} of {} did not answer: {error}",
                label.client_id,
                label.group
            );
            failure_answer(&command, label, &error)
        }
    }
}

/// Sends `command` to the client connection `connection` on whichever shard it lives and
/// returns its answer (or the error answer), within `limit` plus [`MESH_GRACE`].
pub async fn ask(
    broker: &ShardBroker,
    connection: ConnectionId,
    label: &ClientLabel,
    command: RemotingCommand,
    limit: Duration,
) -> RemotingCommand {
    if connection.shard == broker.shard() {
        return ask_local(broker, connection, label, command, limit).await;
    }
    let fallback = command.clone();
    let call = ShardCall::AskClient {
        connection,
        label: label.clone(),
        command,
        limit,
    };
    let reply = comet_rt::task_class::timeout(
        limit + MESH_GRACE,
        broker.mesh().call(connection.shard, call),
    )
    .await;
    let reason = match reply {
        Ok(Ok(Some(answer))) => return answer,
        Ok(Ok(None)) => "no reply".to_owned(),
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("nothing within {:?}", limit + MESH_GRACE),
    };
    let error = AskError::Mesh { connection, reason };
    log::warn!("asking {} of {}: {error}", label.client_id, label.group);
    failure_answer(&fallback, label, &error)
}

/// The client's answer as the response to the admin's `request`.
fn answer_admin(request: &RemotingCommand, mut answer: RemotingCommand) -> RemotingCommand {
    answer.opaque = request.opaque;
    answer.flag |= FLAG_RESPONSE;
    answer.serialize_type = request.serialize_type;
    answer
}

/// The registered channel of `client_id` in `group`.
fn find_channel(broker: &ShardBroker, group: &str, client_id: &str) -> Option<ChannelRef> {
    let clients = broker.clients();
    let channels = clients.consumer_group(group)?.channels();
    channels
        .into_iter()
        .find(|(id, _)| id == client_id)
        .map(|(_, channel)| channel)
}

fn connection_of(channel: &ChannelRef) -> ConnectionId {
    ConnectionId {
        shard: channel.shard,
        serial: channel.connection_id,
    }
}

/// Java's `AdminBrokerProcessor.callConsumer`: forwards `code` with the admin request's
/// ext fields and `body` to the client, and answers the admin with what the client said.
async fn call_consumer(
    broker: &ShardBroker,
    request: &RemotingCommand,
    code: RequestCode,
    body: Bytes,
    label: ClientLabel,
) -> RemotingCommand {
    let ClientLabel { group, client_id } = &label;
    let Some(channel) = find_channel(broker, group, client_id) else {
        let remark = format!("The Consumer <{group}> <{client_id}> not online");
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    };
    if channel.version < V3_1_8_SNAPSHOT {
        let remark = format!(
            "The Consumer <{client_id}> Version <{}> too low to finish, please upgrade it to \
             V3_1_8_SNAPSHOT",
            old_version_name(channel.version)
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let mut forwarded = RemotingCommand::request(code, 0).with_body(body);
    forwarded.ext_fields = request.ext_fields.clone();
    let connection = connection_of(&channel);
    let answer = ask(broker, connection, &label, forwarded, CLIENT_ANSWER_TIMEOUT).await;
    answer_admin(request, answer)
}

/// GET_CONSUMER_RUNNING_INFO (307): the client's ConsumerRunningInfo, relayed.
pub async fn consumer_running_info(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header = match GetConsumerRunningInfoRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let label = ClientLabel {
        group: header.consumer_group,
        client_id: header.client_id,
    };
    let code = RequestCode::GET_CONSUMER_RUNNING_INFO;
    call_consumer(broker, request, code, request.body.clone(), label).await
}

/// CONSUME_MESSAGE_DIRECTLY (309): the stored message named by `msgId` (an offset message
/// id) goes to the client as the body, with `brokerName`, `topicSysFlag` and `groupSysFlag`
/// added to the header; the client's ConsumeMessageDirectlyResult is relayed. (Admin tools
/// given a unique key look its offset id up first, so the broker only sees offset ids.)
pub async fn consume_message_directly(
    broker: &ShardBroker,
    request: &RemotingCommand,
) -> RemotingCommand {
    let header =
        match ConsumeMessageDirectlyResultRequestHeader::from_ext_fields(&request.ext_fields) {
            Ok(header) => header,
            Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
        };
    let mut request = request.clone();
    add_flags(broker, &mut request, &header);
    let record = match read_message(broker, &request, header.msg_id.as_deref()).await {
        Ok(record) => record,
        Err(response) => return response,
    };
    let label = ClientLabel {
        group: header.consumer_group,
        client_id: header.client_id.unwrap_or_default(),
    };
    let code = RequestCode::CONSUME_MESSAGE_DIRECTLY;
    call_consumer(broker, &request, code, record, label).await
}

/// The header fields the broker adds for the client (Java does the same).
fn add_flags(
    broker: &ShardBroker,
    request: &mut RemotingCommand,
    header: &ConsumeMessageDirectlyResultRequestHeader,
) {
    let ext = &mut request.ext_fields;
    ext.insert("brokerName", &broker.config().broker_name);
    let topic = header.topic.as_deref().filter(|topic| !topic.is_empty());
    if let Some(topic) = topic {
        if let Some(config) = broker.topics().get(topic) {
            ext.insert("topicSysFlag", config.topic_sys_flag.to_string());
        }
    }
    if let Some(group) = broker.groups().get(&header.consumer_group) {
        ext.insert("groupSysFlag", group.group_sys_flag.to_string());
    }
}

/// The stored record `msg_id` names, read on the shard whose commit log holds it; an error
/// answer to `request` when the id is missing, malformed or names no message.
async fn read_message(
    broker: &ShardBroker,
    request: &RemotingCommand,
    msg_id: Option<&str>,
) -> Result<Bytes, RemotingCommand> {
    let Some(msg_id) = msg_id.filter(|id| !id.is_empty()) else {
        return Err(error(request, ResponseCode::SYSTEM_ERROR, "missing msgId"));
    };
    let decoded = decode_offset_msg_id(msg_id).map_err(|e| {
        let remark = format!("msgId {msg_id} is not an offset message id: {e}");
        error(request, ResponseCode::SYSTEM_ERROR, remark)
    })?;
    let header = ViewMessageRequestHeader {
        offset: decoded.commit_log_offset,
        topic: None,
        broker_name: None,
    };
    let view = RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID, 0).with_header(&header);
    // Boxed: this processor runs under `handle`, and the cycle needs one indirection.
    let context = crate::routing::internal_context(broker);
    let viewed = Box::pin(super::handle(broker, context, view)).await;
    match viewed {
        Some(found) if found.response_code() == ResponseCode::SUCCESS => Ok(found.body),
        other => {
            let reason = other.and_then(|answer| answer.remark).unwrap_or_default();
            let remark = format!("no message with msgId {msg_id}: {reason}");
            Err(error(request, ResponseCode::SYSTEM_ERROR, remark))
        }
    }
}

/// INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223): asks every online client of the group (or
/// only the one whose client id is `clientAddr`) for its offsets of `topic` and answers
/// GetConsumerStatusBody with `consumerTable` = client id -> its offsets. Clients that fail
/// or answer with an error are left out, as in Java.
pub async fn consumer_status(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match GetConsumerStatusRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let channels = broker
        .clients()
        .consumer_group(&header.group)
        .map(|group| group.channels())
        .unwrap_or_default();
    if channels.is_empty() {
        let remark = format!(
            "No Any Consumer online in the consumer group: [{}]",
            header.group
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let only = header
        .client_addr
        .clone()
        .filter(|id| !id.trim().is_empty());
    let mut consumer_table = BTreeMap::new();
    for (client_id, channel) in channels {
        if channel.version < V3_0_7_SNAPSHOT {
            let remark = format!(
                "the client does not support this feature. version={}",
                old_version_name(channel.version)
            );
            return error(request, ResponseCode::SYSTEM_ERROR, remark);
        }
        if only.as_ref().is_some_and(|only| *only != client_id) {
            continue;
        }
        if let Some(offsets) = client_offsets(broker, &header, &client_id, &channel).await {
            consumer_table.insert(client_id, QueueOffsets(offsets));
        }
        if only.is_some() {
            break;
        }
    }
    let body = GetConsumerStatusBody {
        consumer_table,
        message_queue_table: BTreeMap::new(),
    };
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(body.encode())
}

/// One client's GET_CONSUMER_STATUS_FROM_CLIENT answer: its offsets, or `None` when it
/// gave none.
async fn client_offsets(
    broker: &ShardBroker,
    header: &GetConsumerStatusRequestHeader,
    client_id: &str,
    channel: &ChannelRef,
) -> Option<BTreeMap<comet_proto::body::MessageQueue, i64>> {
    let asked = GetConsumerStatusRequestHeader {
        topic: header.topic.clone(),
        group: header.group.clone(),
        client_addr: None,
    };
    let command = RemotingCommand::request(RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT, 0)
        .with_header(&asked);
    let label = ClientLabel {
        group: header.group.clone(),
        client_id: client_id.to_owned(),
    };
    let connection = connection_of(channel);
    let answer = ask(broker, connection, &label, command, CONSUMER_STATUS_TIMEOUT).await;
    if answer.response_code() != ResponseCode::SUCCESS || answer.body.is_empty() {
        log::debug!("no consumer status from {client_id}: {:?}", answer.remark);
        return None;
    }
    match GetConsumerStatusBody::decode(&answer.body) {
        Ok(body) => Some(body.message_queue_table),
        Err(e) => {
            log::warn!("malformed consumer status from {client_id}: {e}");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the version table matches Java's ordinals at the two thresholds it guards and
    // falls back to the number outside the table.
    #[test]
    fn old_version_names() {
        assert_eq!(old_version_name(V3_0_7_SNAPSHOT), "V3_0_7_SNAPSHOT");
        assert_eq!(old_version_name(V3_1_8_SNAPSHOT - 1), "V3_1_7");
        assert_eq!(old_version_name(0), "V3_0_0_SNAPSHOT");
        assert_eq!(old_version_name(-1), "-1");
        assert_eq!(old_version_name(V3_1_8_SNAPSHOT), "62");
    }

    // Proves a timeout maps to CONSUME_MSG_TIMEOUT and any other failure to SYSTEM_ERROR,
    // both naming the group and client as Java's remarks do.
    #[test]
    fn failure_answers() {
        let command = RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO, 7);
        let label = ClientLabel {
            group: "g".into(),
            client_id: "c".into(),
        };
        let timeout = AskError::Connection(ConnectionError::Timeout {
            peer: "127.0.0.1:1".parse().unwrap(),
            after: Duration::from_secs(10),
        });
        let answer = failure_answer(&command, &label, &timeout);
        assert_eq!(answer.response_code(), ResponseCode::CONSUME_MSG_TIMEOUT);
        assert!(answer
            .remark
            .unwrap()
            .starts_with("consumer <g> <c> Timeout: "));
        let connection = ConnectionId {
            shard: comet_rt::ShardId(1),
            serial: 3,
        };
        let answer = failure_answer(&command, &label, &AskError::Gone(connection));
        assert_eq!(answer.response_code(), ResponseCode::SYSTEM_ERROR);
        assert!(answer
            .remark
            .unwrap()
            .starts_with("invoke consumer <g> <c> Exception: connection "));
    }
}
