//! SEND_REPLY_MESSAGE (324) and SEND_REPLY_MESSAGE_V2 (325): the reply half of request-reply
//! (Java's `DefaultMQProducer.request`;
//! docs/protocol.md#send-message and the `<cluster>_REPLY_TOPIC` system
//! topic).
//!
//! A requester sends a request message carrying `CORRELATION_ID` and `REPLY_TO_CLIENT` (its
//! client id). A responder consumes it and sends the reply to `<cluster>_REPLY_TOPIC` with one
//! of these codes; the reply is routed like a send, to the owner of the reply topic's queue,
//! which:
//! 1. pushes it to the requester: PUSH_REPLY_MESSAGE_TO_CLIENT (326), two-way, to the
//!    connection of the producer registered under that client id, on whichever shard it lives;
//! 2. stores it in the reply topic, as Apache RocketMQ does by default
//!    (`storeReplyMessageEnable`), so it can be queried and traced like any message.
//!
//! The answer's code is the push's outcome, as Java's `ReplyMessageProcessor` gives it:
//! SUCCESS once the requester took the reply, SYSTEM_ERROR saying why it did not (no
//! `REPLY_TO_CLIENT`, requester not connected, requester refused or did not answer). Its
//! header names the stored message (`msgId` "0" and offset 0 if storing failed).

use comet_proto::headers::{
    decode_send_request, ReplyMessageRequestHeader, SendMessageRequestHeader,
    SendMessageResponseHeader,
};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};

use crate::shard::{RequestContext, ShardBroker};

use super::ask_client::{ask, CLIENT_ANSWER_TIMEOUT};
use super::{error, send};
use crate::clients::ClientLabel;

/// Serves one reply on the owner of its queue: push to the requester, then store.
pub async fn process(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> RemotingCommand {
    let header = match decode_send_request(&request) {
        Ok(header) => header,
        Err(e) => return error(&request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let pushed = push_to_requester(broker, context, &header, &request).await;
    let stored = send::process(broker, context, request.clone()).await;
    let stored_ok = matches!(
        stored.response_code(),
        ResponseCode::SUCCESS
            | ResponseCode::SLAVE_NOT_AVAILABLE
            | ResponseCode::FLUSH_SLAVE_TIMEOUT
    );
    let mut answer = if stored_ok {
        stored
    } else {
        comet_net::warn_request!(
            &request,
            "reply to {} not stored: {}",
            header.topic,
            stored.remark.as_deref().unwrap_or("")
        );
        unstored_answer(broker, &request, &header)
    };
    match pushed {
        Ok(()) => {
            answer.code = ResponseCode::SUCCESS.value();
            answer.remark = None;
        }
        Err(failure) => {
            comet_net::warn_request!(&request, "{failure}");
            answer.code = ResponseCode::SYSTEM_ERROR.value();
            answer.remark = Some(failure.to_string());
        }
    }
    answer
}

/// Why a reply did not reach its requester; the texts are Java's `ReplyMessageProcessor`
/// remarks, which requesters see.
#[derive(Debug, thiserror::Error)]
enum PushFailure {
    /// The reply does not name its requester.
    #[error("reply message properties[{}] is null", names::REPLY_TO_CLIENT)]
    NoRequester,
    /// The requester is not connected.
    #[error("push reply message fail, channel of <{requester}> not found.")]
    NotConnected {
        /// The requester's client id.
        requester: String,
    },
    /// The requester refused the reply or did not answer.
    #[error("push reply message to {requester} fail: {remark}")]
    Refused {
        /// The requester's client id.
        requester: String,
        /// Its answer's remark.
        remark: String,
    },
}

/// PUSH_REPLY_MESSAGE_TO_CLIENT to the requester named in `REPLY_TO_CLIENT`; why not, if not.
async fn push_to_requester(
    broker: &ShardBroker,
    context: RequestContext,
    header: &SendMessageRequestHeader,
    request: &RemotingCommand,
) -> Result<(), PushFailure> {
    let mut properties = Properties::decode(header.properties.as_deref().unwrap_or(""));
    let Some(requester) = properties.get(names::REPLY_TO_CLIENT).map(str::to_owned) else {
        return Err(PushFailure::NoRequester);
    };
    let found = broker.clients().find_producer(&requester);
    let Some((group, channel)) = found else {
        return Err(PushFailure::NotConnected { requester });
    };
    let now_ms = comet_rt::clock::wall_clock_ms();
    properties.insert(names::PUSH_REPLY_TIME, now_ms.to_string());
    let push = ReplyMessageRequestHeader {
        producer_group: header.producer_group.clone(),
        topic: header.topic.clone(),
        default_topic: header.default_topic.clone(),
        default_topic_queue_nums: header.default_topic_queue_nums,
        queue_id: header.queue_id,
        sys_flag: header.sys_flag,
        born_timestamp: header.born_timestamp,
        flag: header.flag,
        properties: Some(properties.encode()),
        reconsume_times: header.reconsume_times,
        unit_mode: header.unit_mode,
        born_host: context.peer.to_string(),
        store_host: broker.store_host().to_string(),
        store_timestamp: now_ms,
    };
    let command = RemotingCommand::request(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT, 0)
        .with_header(&push)
        .with_body(request.body.clone());
    let connection = comet_net::ConnectionId {
        shard: channel.shard,
        serial: channel.connection_id,
    };
    let label = ClientLabel {
        group,
        client_id: requester.clone(),
    };
    let answer = ask(broker, connection, &label, command, CLIENT_ANSWER_TIMEOUT).await;
    if answer.response_code() == ResponseCode::SUCCESS {
        Ok(())
    } else {
        Err(PushFailure::Refused {
            requester,
            remark: answer.remark.unwrap_or_else(|| "refused".to_owned()),
        })
    }
}

/// The send answer Java gives a pushed reply it could not store: id "0", offset 0.
fn unstored_answer(
    broker: &ShardBroker,
    request: &RemotingCommand,
    header: &SendMessageRequestHeader,
) -> RemotingCommand {
    let response_header = SendMessageResponseHeader {
        msg_id: "0".to_owned(),
        queue_id: header.queue_id,
        queue_offset: 0,
        transaction_id: None,
        batch_uniq_id: None,
        recall_handle: None,
    };
    let answer =
        RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_header(&response_header);
    send::with_region_and_trace(broker, answer)
}
