//! Running work on the shard that owns it: a request on a queue's owner or on one shard
//! ([`on_owner`], [`on_shard`], and [`call_owner`]/[`call_shard`] for requests the broker
//! builds itself), a one-way request to a client connection on its shard
//! ([`send_to_client`]), a key lookup on a queue's owner ([`messages_by_key`]), and writing
//! the topic table before a change is acknowledged ([`persist_topics_now`]).
//!
//! A request sent to a shard is served by the mesh handler the runtime installs, which runs
//! the processors there; nothing here names them, so the features (delay levels, timer wheel,
//! transactions) can ask the owner of a queue without importing the layer above them.

use std::net::SocketAddr;

use comet_net::ConnectionId;
use comet_proto::bytes::Bytes;
use comet_proto::headers::QueryMessageRequestHeader;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_rt::task_class::TaskClass;
use comet_rt::ShardId;

use crate::shard::{RequestContext, ShardBroker, ShardCall};

/// Results any key query returns at most.
pub const QUERY_MAX: i32 = 64;

/// Writes `config/topics.json` now (off the shard thread) and waits for it: topic changes a
/// client was told about must survive a crash.
pub async fn persist_topics_now(broker: &ShardBroker) -> std::io::Result<()> {
    let metadata = broker.metadata().clone();
    comet_rt::task_class::run_blocking(move || metadata.persist_topics()).await
}

/// The id of shard `index` (below the shard count).
pub fn shard_id(index: usize) -> ShardId {
    ShardId(u16::try_from(index).expect("shard count is bounded"))
}

/// Runs `request` on the owner of `(topic, queue_id)`.
pub async fn on_owner(
    broker: &ShardBroker,
    context: RequestContext,
    topic: &str,
    queue_id: i32,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    on_shard(broker, context, broker.owner_of(topic, queue_id), request).await
}

/// Codes whose requests run in [`TaskClass::Pull`]: reads of messages, which a consumer
/// draining a backlog repeats as fast as they are answered. In their own queue, with fewer
/// shares than requests, they leave sends arriving meanwhile the larger part of the core
/// (docs/architecture.md#connections-and-the-mesh-hop).
pub const PULL_CLASS_CODES: [RequestCode; 4] = [
    RequestCode::PULL_MESSAGE,
    RequestCode::LITE_PULL_MESSAGE,
    RequestCode::POP_MESSAGE,
    RequestCode::PEEK_MESSAGE,
];

/// The task class requests of `code` run in, on whichever shard serves them.
pub fn request_class(code: i32) -> TaskClass {
    if PULL_CLASS_CODES.iter().any(|pull| pull.value() == code) {
        TaskClass::Pull
    } else {
        TaskClass::Request
    }
}

/// Runs `request` on shard `target` (in place when it is this shard).
pub async fn on_shard(
    broker: &ShardBroker,
    context: RequestContext,
    target: ShardId,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    // A request for this shard goes through the mesh too: the mesh runs the handler the
    // runtime installed (the processors, a layer above this one) in place, boxed, so the
    // processors that route per-queue figures back here have a future of finite type.
    if target == broker.shard() {
        broker.traffic().add_in_place();
    } else {
        broker.traffic().add_forwarded();
    }
    let opaque = request.opaque;
    let serialize_type = request.serialize_type;
    let class = request_class(request.code);
    match broker
        .mesh()
        .call_in(
            class,
            target,
            ShardCall::Request {
                context,
                command: request,
            },
        )
        .await
    {
        Ok(reply) => reply,
        Err(e) => {
            log::warn!("hand-off to {target} failed: {e}");
            let mut busy = RemotingCommand::request(RequestCode::Unknown(0), opaque);
            busy.serialize_type = serialize_type;
            Some(RemotingCommand::error_to(
                &busy,
                ResponseCode::SYSTEM_BUSY,
                "[OVERLOAD] shard hand-off failed",
            ))
        }
    }
}

/// Why an internal request to a shard gave no usable answer.
#[derive(Debug, thiserror::Error)]
pub enum InternalCallError {
    /// The shard did not answer (it is stopping).
    #[error("{asked}: no answer")]
    NoAnswer {
        /// What was asked of whom.
        asked: String,
    },
    /// The shard answered with an error; its remark says why.
    #[error("{remark}")]
    Refused {
        /// The answer's code.
        code: ResponseCode,
        /// The answer's remark.
        remark: String,
    },
    /// The answer's body could not be read.
    #[error("{asked}: unreadable answer: {source}")]
    Unreadable {
        /// What was asked of whom.
        asked: String,
        /// The body's decoding error.
        #[source]
        source: comet_proto::json::JsonError,
    },
}

impl InternalCallError {
    /// The answer `response`, or why it is not one: `asked` says what was asked of whom.
    pub fn successful(
        response: Option<RemotingCommand>,
        asked: impl FnOnce() -> String,
    ) -> Result<RemotingCommand, InternalCallError> {
        let response = response.ok_or_else(|| InternalCallError::NoAnswer { asked: asked() })?;
        match response.response_code() {
            ResponseCode::SUCCESS => Ok(response),
            code => Err(InternalCallError::Refused {
                code,
                remark: response.remark.unwrap_or_default(),
            }),
        }
    }
}

/// Runs an internal request (built by the broker itself) on the owner of the queue.
pub async fn call_owner(
    broker: &ShardBroker,
    topic: &str,
    queue_id: i32,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    let context = internal_context(broker);
    on_owner(broker, context, topic, queue_id, request).await
}

/// Runs an internal request on shard `index` (its own part of a broker-wide table).
pub async fn call_shard(
    broker: &ShardBroker,
    index: usize,
    request: RemotingCommand,
) -> Option<RemotingCommand> {
    let context = internal_context(broker);
    on_shard(broker, context, shard_id(index), request).await
}

/// The context of a request the broker builds itself: this shard's store host as the peer,
/// a connection id no client has.
pub fn internal_context(broker: &ShardBroker) -> RequestContext {
    RequestContext {
        peer: broker.store_host(),
        connection: ConnectionId {
            shard: broker.shard(),
            serial: u64::MAX,
        },
    }
}

/// The records with `key` in the index of `(topic, queue_id)`'s owner, stored at or after
/// `since_ms` (at most [`QUERY_MAX`], encoded one after another); `None` when the owner found
/// none or did not answer.
pub async fn messages_by_key(
    broker: &ShardBroker,
    topic: &str,
    queue_id: i32,
    key: &str,
    since_ms: i64,
) -> Option<Bytes> {
    let header = QueryMessageRequestHeader {
        topic: topic.to_owned(),
        key: key.to_owned(),
        max_num: QUERY_MAX,
        begin_timestamp: since_ms,
        end_timestamp: i64::MAX,
        unique_key_query: None,
        broker_name: None,
    };
    let request = RemotingCommand::request(RequestCode::QUERY_MESSAGE, 0).with_header(&header);
    let response = call_owner(broker, topic, queue_id, request).await?;
    (response.response_code() == ResponseCode::SUCCESS).then_some(response.body)
}

/// Sends a one-way request to a client connection, crossing the mesh when the connection
/// lives on another shard. A closed connection is not an error: the client is gone.
pub async fn send_to_client(
    broker: &ShardBroker,
    connection: ConnectionId,
    command: RemotingCommand,
) {
    if connection.shard == broker.shard() {
        deliver_locally(broker, connection, command);
        return;
    }
    let call = ShardCall::ToClient {
        connection,
        command,
    };
    if broker.mesh().call(connection.shard, call).await.is_err() {
        log::debug!("could not reach {connection} across the mesh");
    }
}

/// Writes a one-way request to a connection of this shard.
pub fn deliver_locally(broker: &ShardBroker, connection: ConnectionId, command: RemotingCommand) {
    let handle = broker
        .server()
        .and_then(|server| server.connection(connection));
    match handle {
        Some(handle) => {
            if let Err(e) = handle.send_oneway(command) {
                log::debug!("notification to {connection} not sent: {e}");
            }
        }
        None => log::debug!("connection {connection} is gone"),
    }
}

/// A context for tests and internal callers: `peer` as the born host.
pub fn context_for(peer: SocketAddr, connection: ConnectionId) -> RequestContext {
    RequestContext { peer, connection }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves reads of messages run in the Pull class and sends and everything else in
    // Request, whatever shard serves them.
    #[test]
    fn reads_of_messages_run_in_the_pull_class() {
        for code in PULL_CLASS_CODES {
            assert_eq!(request_class(code.value()), TaskClass::Pull, "{code}");
        }
        for code in [
            RequestCode::SEND_MESSAGE,
            RequestCode::SEND_MESSAGE_V2,
            RequestCode::SEND_BATCH_MESSAGE,
            RequestCode::HEART_BEAT,
        ] {
            assert_eq!(request_class(code.value()), TaskClass::Request, "{code}");
        }
    }
}
