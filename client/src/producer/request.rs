//! Request-reply (Java's `DefaultMQProducer.request`).
//!
//! A request is an ordinary message that also carries `CORRELATION_ID` (unique per request),
//! `REPLY_TO_CLIENT` (this client's id) and `TTL` (how long the requester waits, ms). A
//! responder consumes it and sends [`crate::Message::reply_to`] it: that reply goes to
//! `<cluster>_REPLY_TOPIC` with SEND_REPLY_MESSAGE_V2, and the broker pushes it to this client
//! (PUSH_REPLY_MESSAGE_TO_CLIENT), where `Replies` hands it to the waiting request.
//!
//! Invariants: a waiter is registered before its request is sent and removed once it has its
//! reply or gave up, so the table holds only requests in flight (at most
//! [`REQUESTS_IN_FLIGHT_MAX`]); a reply nobody waits for (late, or meant for a request that
//! failed) is acknowledged and dropped, as the Java client does.

use std::collections::HashMap;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Mutex;

use comet_proto::compression::{decompress, CompressionType};
use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::ReplyMessageRequestHeader;
use comet_proto::message::MessageExt;
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, ResponseCode};

use crate::error::{ClientError, Result};

/// Requests one client instance waits on at once.
pub const REQUESTS_IN_FLIGHT_MAX: usize = 65_536;

/// Largest body a pushed reply may inflate to.
const REPLY_INFLATED_BYTES_MAX: usize = 64 * 1024 * 1024;

/// What hands a reply to the request waiting for it: the producer completes a channel its
/// request's future awaits.
pub(crate) type Deliver = Box<dyn FnOnce(MessageExt) + Send>;

/// Requests waiting for their replies, by correlation id.
#[derive(Default)]
pub(crate) struct Replies {
    waiting: Mutex<HashMap<String, Deliver>>,
}

impl Replies {
    /// Registers a waiter for `correlation_id`, which `deliver` completes.
    pub fn register_with(&self, correlation_id: &str, deliver: Deliver) -> Result<()> {
        let mut waiting = self.lock();
        if waiting.len() >= REQUESTS_IN_FLIGHT_MAX {
            return Err(ClientError::Invalid(format!(
                "{REQUESTS_IN_FLIGHT_MAX} requests already wait for replies"
            )));
        }
        waiting.insert(correlation_id.to_owned(), deliver);
        Ok(())
    }

    /// Removes the waiter of `correlation_id` (it got its reply or gave up).
    pub fn forget(&self, correlation_id: &str) {
        self.lock().remove(correlation_id);
    }

    /// Requests waiting now.
    pub fn waiting(&self) -> usize {
        self.lock().len()
    }

    /// Hands `reply` to the request it answers; false when no request waits for it.
    pub fn deliver(&self, reply: MessageExt) -> bool {
        let Some(correlation_id) = reply.property(names::CORRELATION_ID) else {
            return false;
        };
        let Some(deliver) = self.lock().remove(correlation_id) else {
            return false;
        };
        deliver(reply);
        true
    }

    /// The answer to a PUSH_REPLY_MESSAGE_TO_CLIENT from `addr`: the reply goes to its
    /// request. Acknowledged even when none waits (it came late), as Java's
    /// `ClientRemotingProcessor.receiveReplyMessage` does; only an undecodable push is
    /// refused.
    pub fn receive_push(&self, addr: &str, request: &RemotingCommand) -> RemotingCommand {
        match decode_pushed_reply(request) {
            Ok(reply) => {
                if !self.deliver(reply) {
                    log::debug!("reply from {addr} matches no waiting request");
                }
                RemotingCommand::response_to(request, ResponseCode::SUCCESS)
            }
            Err(error) => {
                let remark = format!("bad reply push: {error}");
                RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, remark)
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Deliver>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The properties that make `message` a request (Java's `MessageUtil`-less request setup in
/// `DefaultMQProducerImpl.prepareSendRequest`): its correlation id, the client to push the
/// reply to, and how long the requester waits.
pub(crate) fn mark_request(
    message: &mut crate::Message,
    correlation_id: &str,
    client_id: &str,
    timeout: std::time::Duration,
) {
    let properties = &mut message.properties;
    properties.insert(names::CORRELATION_ID, correlation_id);
    properties.insert(names::REPLY_TO_CLIENT, client_id);
    properties.insert(names::TTL, timeout.as_millis().to_string());
}

/// The reply a PUSH_REPLY_MESSAGE_TO_CLIENT carries: its header's fields and its body,
/// inflated when the responder compressed it.
pub(crate) fn decode_pushed_reply(request: &RemotingCommand) -> Result<MessageExt> {
    let header: ReplyMessageRequestHeader = request.decode_header()?;
    let mut sysflag = header.sys_flag;
    let mut body = request.body.clone();
    let mut body_compression = None;
    if sysflag & message_sys_flag::COMPRESSED != 0 {
        match decompress(sysflag, &body, REPLY_INFLATED_BYTES_MAX) {
            Ok(inflated) => {
                body = inflated.into();
                sysflag &= !message_sys_flag::COMPRESSED;
            }
            Err(_) => body_compression = CompressionType::from_sysflag(sysflag).ok(),
        }
    }
    Ok(MessageExt {
        topic: header.topic,
        queue_id: header.queue_id,
        flag: header.flag,
        queue_offset: 0,
        commit_log_offset: 0,
        sysflag,
        born_timestamp: header.born_timestamp,
        born_host: host(&header.born_host),
        store_timestamp: header.store_timestamp,
        store_host: host(&header.store_host),
        reconsume_times: header.reconsume_times.unwrap_or(0),
        prepared_transaction_offset: 0,
        body_crc: 0,
        store_size: 0,
        body,
        body_compression,
        properties: Properties::decode(header.properties.as_deref().unwrap_or("")),
        msg_id: String::new(),
    })
}

/// An `ip:port` the broker wrote; the unspecified address if it does not parse.
fn host(text: &str) -> SocketAddr {
    text.parse()
        .unwrap_or(SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 0)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::RequestCode;

    fn push(properties: &str, body: &[u8]) -> RemotingCommand {
        let header = ReplyMessageRequestHeader {
            producer_group: "pg".into(),
            topic: "C_REPLY_TOPIC".into(),
            default_topic: "TBW102".into(),
            default_topic_queue_nums: 4,
            queue_id: 0,
            sys_flag: 0,
            born_timestamp: 1,
            flag: 0,
            properties: Some(properties.into()),
            reconsume_times: None,
            unit_mode: None,
            born_host: "127.0.0.1:5000".into(),
            store_host: "not an address".into(),
            store_timestamp: 2,
        };
        RemotingCommand::request(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT, 1)
            .with_header(&header)
            .with_body(body.to_vec())
    }

    // Proves a pushed reply reaches only the request with its correlation id, once, and a
    // reply for a forgotten or unknown request is dropped.
    #[test]
    fn replies_reach_their_request_once() {
        let replies = Replies::default();
        let slot = std::sync::Arc::new(crate::util::Oneshot::default());
        let completer = slot.clone();
        let deliver = Box::new(move |reply| completer.complete(reply));
        replies.register_with("c1", deliver).unwrap();
        let mut properties = Properties::new();
        properties.insert(names::CORRELATION_ID, "c1");
        let reply = decode_pushed_reply(&push(&properties.encode(), b"answer")).unwrap();
        assert_eq!(reply.born_host.to_string(), "127.0.0.1:5000");
        assert_eq!(
            reply.store_host.port(),
            0,
            "an unparsable host reads as unspecified"
        );
        assert!(replies.deliver(reply.clone()));
        assert!(!replies.deliver(reply.clone()), "delivered once");
        let got = slot.take_timeout(std::time::Duration::ZERO).unwrap();
        assert_eq!(&got.body[..], b"answer");
        replies.register_with("c2", Box::new(drop)).unwrap();
        replies.forget("c2");
        let mut late = reply;
        late.properties.insert(names::CORRELATION_ID, "c2");
        assert!(!replies.deliver(late));
    }

    // Proves a push without the reply header is an error, not a panic.
    #[test]
    fn a_push_without_header_is_an_error() {
        let bare = RemotingCommand::request(RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT, 1);
        assert!(decode_pushed_reply(&bare).is_err());
    }
}
