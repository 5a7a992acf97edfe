//! A transaction's producer side: the half message as its producer knows it, the one-way
//! decision, and a producer connection that reads the broker's check-backs.

use std::io::Read;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use comet_proto::body::{HeartbeatData, JsonBody, ProducerData};
use comet_proto::bytes::BytesMut;
use comet_proto::frame::FrameDecoder;
use comet_proto::headers::{
    CheckTransactionStateRequestHeader, EndTransactionRequestHeader, SendMessageResponseHeader,
};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, Decoded, RemotingCommand, RequestCode, ResponseCode};

use crate::common::Client;

/// sysFlag of a transaction's half message.
pub const PREPARED: i32 = 0x4;
/// END_TRANSACTION's commit decision.
pub const COMMIT: i32 = 8;

/// Sends `body` to queue 0 of `topic` as a half message of producer group `group` (what a
/// transactional producer sends first) and returns it as the producer knows it.
pub fn send_half(client: &mut Client, topic: &str, group: &str, body: &str) -> Half {
    let mut properties = Properties::new();
    properties.insert(names::TRAN_MSG, "true");
    properties.insert(names::PGROUP, group);
    let response = client.call_ok(crate::sched_common::send_with(
        topic,
        0,
        body.as_bytes(),
        &properties,
        PREPARED,
        group,
    ));
    Half::from_send(&response)
}

/// A half message as its producer knows it after the send (or from a check-back).
pub struct Half {
    /// The message's UNIQ_KEY, which is also its transaction id.
    pub unique_key: String,
    /// Its offset in the half topic's queue.
    pub queue_offset: i64,
    /// Its physical offset.
    pub commit_log_offset: i64,
}

impl Half {
    /// The half a successful send of it answered with.
    pub fn from_send(response: &RemotingCommand) -> Half {
        let header = SendMessageResponseHeader::from_ext_fields(&response.ext_fields).unwrap();
        Half {
            unique_key: header.transaction_id.unwrap(),
            queue_offset: header.queue_offset,
            commit_log_offset: decode_offset_msg_id(&header.msg_id)
                .unwrap()
                .commit_log_offset,
        }
    }

    /// The half a CHECK_TRANSACTION_STATE asks about.
    pub fn from_check(check: &RemotingCommand) -> Half {
        let header =
            CheckTransactionStateRequestHeader::from_ext_fields(&check.ext_fields).unwrap();
        Half {
            unique_key: header.msg_id.clone().unwrap(),
            queue_offset: header.tran_state_table_offset,
            commit_log_offset: header.commit_log_offset,
        }
    }
}

/// END_TRANSACTION of `half` by `group` with `decision` (`from_check` when it answers a
/// check-back).
pub fn end_transaction_request(
    topic: &str,
    group: &str,
    half: &Half,
    decision: i32,
    from_check: bool,
) -> RemotingCommand {
    let header = EndTransactionRequestHeader {
        topic: Some(topic.into()),
        producer_group: group.into(),
        tran_state_table_offset: half.queue_offset,
        commit_log_offset: half.commit_log_offset,
        commit_or_rollback: decision,
        from_transaction_check: Some(from_check),
        msg_id: half.unique_key.clone(),
        transaction_id: Some(half.unique_key.clone()),
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::END_TRANSACTION, 0).with_header(&header)
}

/// END_TRANSACTION of `half` by `group` (one-way, as Java producers send it) with
/// `decision`.
pub fn end_transaction(
    client: &mut Client,
    topic: &str,
    group: &str,
    half: &Half,
    decision: i32,
    from_check: bool,
) {
    let mut request = end_transaction_request(topic, group, half, decision, from_check);
    request.set_oneway();
    client.send(request);
}

/// A producer connection of one group: registered by heartbeat, reads the broker's
/// check-backs.
pub struct Producer {
    /// The connection, for sends and decisions.
    pub client: Client,
    reader: TcpStream,
    buffer: BytesMut,
}

impl Producer {
    /// Registers `client` as producer `client_id` of `group`.
    pub fn connect(mut client: Client, client_id: &str, group: &str) -> Producer {
        let data = HeartbeatData {
            client_id: client_id.into(),
            producer_data_set: vec![ProducerData {
                group_name: group.into(),
            }],
            ..HeartbeatData::default()
        };
        let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode());
        assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
        let reader = client.stream.try_clone().unwrap();
        Producer {
            client,
            reader,
            buffer: BytesMut::new(),
        }
    }

    /// The next CHECK_TRANSACTION_STATE within `limit`.
    pub fn next_check(&mut self, limit: Duration) -> Option<RemotingCommand> {
        let deadline = Instant::now() + limit;
        let decoder = FrameDecoder::default();
        loop {
            while let Some(Decoded::Command(command)) = decoder.decode(&mut self.buffer).unwrap() {
                if command.request_code() == RequestCode::CHECK_TRANSACTION_STATE {
                    return Some(command);
                }
            }
            let left = deadline.checked_duration_since(Instant::now())?;
            self.reader
                .set_read_timeout(Some(left.max(Duration::from_millis(1))))
                .unwrap();
            let mut chunk = [0u8; 65536];
            match self.reader.read(&mut chunk) {
                Ok(0) | Err(_) => return None,
                Ok(read) => self.buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }
}
