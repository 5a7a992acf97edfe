//! Send headers (docs/protocol.md#send-message): SEND_MESSAGE (10) and SEND_REPLY_MESSAGE (324)
//! carry the long-name form, SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320) and
//! SEND_REPLY_MESSAGE_V2 (325) the single-letter form. Both forms are the same fields; the broker
//! decodes either into [`SendMessageRequestHeader`] with [`decode_send_request`].
//!
//! ```text
//! V2 key  a              b      c             d                     e        f
//! V1 key  producerGroup  topic  defaultTopic  defaultTopicQueueNums queueId  sysFlag
//! V2 key  g              h      i             j               k
//! V1 key  bornTimestamp  flag   properties    reconsumeTimes  unitMode
//! V2 key  l                  m      n
//! V1 key  maxReconsumeTimes  batch  bname
//! ```

use super::command_header;
use crate::code::RequestCode;
use crate::command::{CommandHeader, RemotingCommand};
use crate::error::HeaderError;

/// Ext key the broker adds to every send response: its region (`DefaultRegion`).
pub const EXT_MSG_REGION: &str = "MSG_REGION";
/// Ext key the broker adds to every send response: whether tracing is on (`"true"`).
pub const EXT_TRACE_ON: &str = "TRACE_ON";

command_header! {
    /// A send request in its long-name (V1) form.
    pub struct SendMessageRequestHeader {
        /// Producer group.
        producer_group: String => "producerGroup",
        /// Target topic.
        topic: String => "topic",
        /// Template topic for auto-creation (normally `TBW102`).
        default_topic: String => "defaultTopic",
        /// Queue count when auto-creating.
        default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// Target queue; negative lets the broker pick.
        queue_id: i32 => "queueId",
        /// MessageSysFlag bits.
        sys_flag: i32 => "sysFlag",
        /// Client wall clock, ms.
        born_timestamp: i64 => "bornTimestamp",
        /// Application flag, stored verbatim.
        flag: i32 => "flag",
        /// Properties string.
        properties: Option<String> => "properties",
        /// Reconsume count (retry topics).
        reconsume_times: Option<i32> => "reconsumeTimes",
        /// Unit mode.
        unit_mode: Option<bool> => "unitMode",
        /// Batch send.
        batch: Option<bool> => "batch",
        /// Client's reconsume limit (retry topics).
        max_reconsume_times: Option<i32> => "maxReconsumeTimes",
        /// 5.x: logical broker name the client targeted.
        broker_name: Option<String> => "bname",
    }
}

command_header! {
    /// A send request in its single-letter (V2) form; same fields as
    /// [`SendMessageRequestHeader`], convert with `From`.
    pub struct SendMessageRequestHeaderV2 {
        /// `a`: producer group.
        producer_group: String => "a",
        /// `b`: topic.
        topic: String => "b",
        /// `c`: default topic.
        default_topic: String => "c",
        /// `d`: default topic queue count.
        default_topic_queue_nums: i32 => "d",
        /// `e`: queue id.
        queue_id: i32 => "e",
        /// `f`: sys flag.
        sys_flag: i32 => "f",
        /// `g`: born timestamp, ms.
        born_timestamp: i64 => "g",
        /// `h`: application flag.
        flag: i32 => "h",
        /// `i`: properties string.
        properties: Option<String> => "i",
        /// `j`: reconsume count.
        reconsume_times: Option<i32> => "j",
        /// `k`: unit mode.
        unit_mode: Option<bool> => "k",
        /// `l`: max reconsume count.
        max_reconsume_times: Option<i32> => "l",
        /// `m`: batch.
        batch: Option<bool> => "m",
        /// `n`: broker name.
        broker_name: Option<String> => "n",
    }
}

/// Moves every field across; the two forms differ only in their keys.
macro_rules! convert_send_header {
    ($from:ident => $to:ident) => {
        impl From<$from> for $to {
            fn from(header: $from) -> $to {
                $to {
                    producer_group: header.producer_group,
                    topic: header.topic,
                    default_topic: header.default_topic,
                    default_topic_queue_nums: header.default_topic_queue_nums,
                    queue_id: header.queue_id,
                    sys_flag: header.sys_flag,
                    born_timestamp: header.born_timestamp,
                    flag: header.flag,
                    properties: header.properties,
                    reconsume_times: header.reconsume_times,
                    unit_mode: header.unit_mode,
                    max_reconsume_times: header.max_reconsume_times,
                    batch: header.batch,
                    broker_name: header.broker_name,
                }
            }
        }
    };
}

convert_send_header!(SendMessageRequestHeader => SendMessageRequestHeaderV2);
convert_send_header!(SendMessageRequestHeaderV2 => SendMessageRequestHeader);

/// True for the request codes whose header uses single-letter keys.
pub fn uses_send_header_v2(code: RequestCode) -> bool {
    matches!(
        code,
        RequestCode::SEND_MESSAGE_V2
            | RequestCode::SEND_BATCH_MESSAGE
            | RequestCode::SEND_REPLY_MESSAGE_V2
    )
}

/// Decodes the send header of `request` in whichever form its code uses.
pub fn decode_send_request(
    request: &RemotingCommand,
) -> Result<SendMessageRequestHeader, HeaderError> {
    if uses_send_header_v2(request.request_code()) {
        SendMessageRequestHeaderV2::from_ext_fields(&request.ext_fields).map(Into::into)
    } else {
        SendMessageRequestHeader::from_ext_fields(&request.ext_fields)
    }
}

command_header! {
    /// Send response (all send codes). A broker must also add [`EXT_MSG_REGION`] and
    /// [`EXT_TRACE_ON`]
    /// (docs/protocol.md#send-responses-always-carry-their-fields).
    pub struct SendMessageResponseHeader {
        /// Offset message id; comma-separated ids for a batch.
        msg_id: String => "msgId",
        /// Queue actually used.
        queue_id: i32 => "queueId",
        /// Consume-queue offset of the (first) message.
        queue_offset: i64 => "queueOffset",
        /// The message's `UNIQ_KEY`, echoed.
        transaction_id: Option<String> => "transactionId",
        /// 5.x inner-batch id.
        batch_uniq_id: Option<String> => "batchUniqId",
        /// 5.3+ recall handle.
        recall_handle: Option<String> => "recallHandle",
    }
}

command_header! {
    /// RECALL_MESSAGE (370) request: cancels a pending timed message by the handle its send
    /// answered (docs/protocol.md#recall-message).
    pub struct RecallMessageRequestHeader {
        /// Producer group (optional).
        producer_group: Option<String> => "producerGroup",
        /// The message's topic.
        topic: String => "topic",
        /// The handle (see `crate::recall`).
        recall_handle: String => "recallHandle",
    }
}

command_header! {
    /// RECALL_MESSAGE (370) response.
    pub struct RecallMessageResponseHeader {
        /// The recalled message's `UNIQ_KEY`.
        msg_id: String => "msgId",
    }
}

command_header! {
    /// PUSH_REPLY_MESSAGE_TO_CLIENT (326, broker to the requesting producer) request: the
    /// reply message's send fields plus where and when it was stored.
    pub struct ReplyMessageRequestHeader {
        /// Producer group.
        producer_group: String => "producerGroup",
        /// Reply topic.
        topic: String => "topic",
        /// Template topic.
        default_topic: String => "defaultTopic",
        /// Default queue count.
        default_topic_queue_nums: i32 => "defaultTopicQueueNums",
        /// Queue id.
        queue_id: i32 => "queueId",
        /// MessageSysFlag bits.
        sys_flag: i32 => "sysFlag",
        /// Born timestamp, ms.
        born_timestamp: i64 => "bornTimestamp",
        /// Application flag.
        flag: i32 => "flag",
        /// Properties string.
        properties: Option<String> => "properties",
        /// Reconsume count.
        reconsume_times: Option<i32> => "reconsumeTimes",
        /// Unit mode.
        unit_mode: Option<bool> => "unitMode",
        /// Born host, `ip:port`.
        born_host: String => "bornHost",
        /// Store host, `ip:port`.
        store_host: String => "storeHost",
        /// Store timestamp, ms.
        store_timestamp: i64 => "storeTimestamp",
    }
}
