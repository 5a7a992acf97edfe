//! Application-facing message types: what a producer sends ([`Message`]), where it goes
//! ([`MessageQueue`]) and what the broker said ([`SendResult`]). Received messages are
//! [`comet_proto::message::MessageExt`], decoded from stored records.

use bytes::Bytes;
use comet_proto::message::MessageExt;
use comet_proto::properties::{names, Properties, KEY_SEPARATOR};

use crate::error::{ClientError, Result};

pub use comet_proto::names::REPLY_TOPIC_SUFFIX;

/// `MSG_TYPE` of a reply message.
pub const REPLY_MESSAGE_TYPE: &str = "reply";

/// One queue of a topic on one broker: the unit of ordering, allocation and offsets.
pub use comet_proto::body::MessageQueue;

/// A message to send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// Target topic.
    pub topic: String,
    /// Application flag, stored verbatim.
    pub flag: i32,
    /// Payload (at most 4 MiB).
    pub body: Bytes,
    /// System and user properties.
    pub properties: Properties,
}

impl Message {
    /// A message with a body and no properties.
    pub fn new(topic: impl Into<String>, body: impl Into<Bytes>) -> Message {
        Message {
            topic: topic.into(),
            flag: 0,
            body: body.into(),
            properties: Properties::new(),
        }
    }

    /// The reply to `request`, a message a requester sent with
    /// [`crate::Producer::request`], to send with any producer (Java's
    /// `MessageUtil.createReplyMessage`). It goes to the reply topic of the cluster that stored
    /// the request and carries the request's correlation id, requester and time to live.
    pub fn reply_to(request: &MessageExt, body: impl Into<Bytes>) -> Result<Message> {
        let Some(cluster) = request.property(names::CLUSTER) else {
            return Err(ClientError::Invalid(
                "cannot reply: the message has no CLUSTER property (not stored by a broker)".into(),
            ));
        };
        let mut reply = Message::new(comet_proto::names::reply_topic(cluster), body);
        reply.properties.insert(names::MSG_TYPE, REPLY_MESSAGE_TYPE);
        for name in [names::CORRELATION_ID, names::REPLY_TO_CLIENT, names::TTL] {
            if let Some(value) = request.property(name) {
                reply.properties.insert(name, value);
            }
        }
        Ok(reply)
    }

    /// True for a reply built by [`Message::reply_to`] (sent with SEND_REPLY_MESSAGE_V2).
    pub fn is_reply(&self) -> bool {
        self.properties.get(names::MSG_TYPE) == Some(REPLY_MESSAGE_TYPE)
    }

    /// Sets the tag (used by consumers' filters).
    pub fn with_tags(mut self, tags: impl Into<String>) -> Message {
        self.properties.insert(names::TAGS, tags.into());
        self
    }

    /// Sets the business keys (indexed by the broker for QUERY_MESSAGE).
    pub fn with_keys<I, S>(mut self, keys: I) -> Message
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let joined: Vec<String> = keys.into_iter().map(|k| k.as_ref().to_owned()).collect();
        self.properties
            .insert(names::KEYS, joined.join(&KEY_SEPARATOR.to_string()));
        self
    }

    /// Sets the delay level (1..=18 with the broker's default levels).
    pub fn with_delay_level(mut self, level: i32) -> Message {
        self.properties.insert(names::DELAY, level.to_string());
        self
    }

    /// Adds an application property; reserved names are refused, as the Java client does.
    pub fn with_property(mut self, name: &str, value: impl Into<String>) -> Result<Message> {
        self.put_user_property(name, value)?;
        Ok(self)
    }

    /// Adds an application property; reserved names are refused.
    pub fn put_user_property(&mut self, name: &str, value: impl Into<String>) -> Result<()> {
        let value = value.into();
        if name.trim().is_empty() || value.trim().is_empty() {
            return Err(ClientError::Invalid(
                "property name and value must not be blank".into(),
            ));
        }
        if names::is_reserved(name) {
            return Err(ClientError::Invalid(format!(
                "property name {name} is reserved by the protocol"
            )));
        }
        self.properties.insert(name, value);
        Ok(())
    }

    /// The tag, if any.
    pub fn tags(&self) -> Option<&str> {
        self.properties.get(names::TAGS)
    }

    /// The keys, if any.
    pub fn keys(&self) -> Option<&str> {
        self.properties.get(names::KEYS)
    }

    /// The delay level, 0 when not delayed.
    pub fn delay_level(&self) -> i32 {
        self.properties
            .get(names::DELAY)
            .and_then(|level| level.parse().ok())
            .unwrap_or(0)
    }

    /// Whether the broker waits for the store (flush/replication) before answering.
    pub fn wait_store_msg_ok(&self) -> bool {
        self.properties.get(names::WAIT) != Some("false")
    }

    /// Sets whether the broker waits for the store before answering (default true).
    pub fn set_wait_store_msg_ok(&mut self, wait: bool) {
        self.properties.insert(names::WAIT, wait.to_string());
    }

    /// The client-generated id, once the producer assigned one.
    pub fn uniq_key(&self) -> Option<&str> {
        self.properties.get(names::UNIQ_KEY)
    }
}

/// Outcome of a stored send
/// (docs/protocol.md#response-codes: every code here means the message is stored).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendStatus {
    /// Stored and, per the broker's policy, durable.
    SendOk,
    /// Stored, but the synchronous flush timed out.
    FlushDiskTimeout,
    /// Stored, but the slave did not acknowledge in time.
    FlushSlaveTimeout,
    /// Stored on a SYNC_MASTER with no slave available.
    SlaveNotAvailable,
}

impl SendStatus {
    /// The Java enum name.
    pub fn name(self) -> &'static str {
        match self {
            SendStatus::SendOk => "SEND_OK",
            SendStatus::FlushDiskTimeout => "FLUSH_DISK_TIMEOUT",
            SendStatus::FlushSlaveTimeout => "FLUSH_SLAVE_TIMEOUT",
            SendStatus::SlaveNotAvailable => "SLAVE_NOT_AVAILABLE",
        }
    }
}

/// What the broker answered to a send.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SendResult {
    /// Stored status.
    pub status: SendStatus,
    /// The client id (`UNIQ_KEY`); for batches the comma-joined ids.
    pub msg_id: String,
    /// The broker's offset message id (`msgId` of the response).
    pub offset_msg_id: String,
    /// The queue the message went to.
    pub queue: MessageQueue,
    /// Its offset in that queue (the first one for a batch).
    pub queue_offset: i64,
    /// The transaction id the broker echoed, if any.
    pub transaction_id: Option<String>,
    /// The broker's region.
    pub region_id: Option<String>,
    /// The broker traces sends (`TRACE_ON`, anything but `false`): a traced producer writes
    /// a trace record only then.
    pub trace_on: bool,
}

/// `queues` as the application names their topic: without `client`'s namespace.
pub(crate) fn unwrap_queues(
    client: &crate::config::ClientConfig,
    queues: &[MessageQueue],
) -> Vec<MessageQueue> {
    queues
        .iter()
        .map(|queue| unwrap_queue(client, queue))
        .collect()
}

/// `queue` as the application names its topic: without `client`'s namespace.
pub(crate) fn unwrap_queue(
    client: &crate::config::ClientConfig,
    queue: &MessageQueue,
) -> MessageQueue {
    MessageQueue::new(
        client.unwrap_name(&queue.topic),
        &queue.broker_name,
        queue.queue_id,
    )
}

/// `messages` as the application sees them: their topic without `client`'s namespace (as
/// Java's `resetRetryAndNamespace` shows them; the consumer keeps the broker-side ones for
/// send-back).
pub(crate) fn unwrap_messages(
    client: &crate::config::ClientConfig,
    mut messages: Vec<MessageExt>,
) -> Vec<MessageExt> {
    if client.namespace.is_some() {
        for message in &mut messages {
            message.topic = client.unwrap_name(&message.topic);
        }
    }
    messages
}
