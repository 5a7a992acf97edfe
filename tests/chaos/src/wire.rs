//! Single remoting requests on fresh connections: a broker's role, topic creation, a probe
//! send, the controller's metadata and replica info, and pulling a queue from offset 0.
//! Every call is fallible and bounded in time, because the process asked may be frozen,
//! partitioned, restarting into another role or dead.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use comet_proto::body::{JsonBody, SyncStateSet};
use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode_to_bytes;
use comet_proto::headers::{
    CreateTopicRequestHeader, GetMetaDataResponseHeader, GetReplicaInfoRequestHeader,
    PullMessageRequestHeader, SendMessageRequestHeaderV2,
};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};

/// How long a connection attempt may take.
const CONNECT_TIMEOUT: Duration = Duration::from_millis(500);
/// How long an answer may take.
const READ_TIMEOUT: Duration = Duration::from_secs(3);

/// One request on a fresh connection; `None` when there is no answer in time.
pub fn call(addr: SocketAddr, mut request: RemotingCommand) -> Option<RemotingCommand> {
    let mut stream = TcpStream::connect_timeout(&addr, CONNECT_TIMEOUT).ok()?;
    stream.set_read_timeout(Some(READ_TIMEOUT)).ok()?;
    request.opaque = 1;
    stream.write_all(&encode_to_bytes(&request)).ok()?;
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    let mut chunk = [0u8; 65536];
    loop {
        if let Ok(Some(Decoded::Command(answer))) = decoder.decode(&mut buffer) {
            if answer.is_response() && answer.opaque == 1 {
                return Some(answer);
            }
            continue;
        }
        match stream.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(read) => buffer.extend_from_slice(&chunk[..read]),
        }
    }
}

/// The role a broker runs in now (`brokerRole` of GET_BROKER_CONFIG), if it answers.
pub fn role_of(broker: SocketAddr) -> Option<String> {
    let answer = call(
        broker,
        RemotingCommand::request(RequestCode::GET_BROKER_CONFIG, 0),
    )?;
    let text = String::from_utf8(answer.body.to_vec()).ok()?;
    comet_proto::java_properties::parse(&text)
        .into_iter()
        .find(|(key, _)| key == "brokerRole")
        .map(|(_, role)| role)
}

/// Whether a broker answers that it serves as master.
pub fn is_master(broker: SocketAddr) -> bool {
    role_of(broker).is_some_and(|role| role.ends_with("MASTER"))
}

/// UPDATE_AND_CREATE_TOPIC of a read-write topic with `queues` queues; whether it worked.
pub fn create_topic(broker: SocketAddr, topic: &str, queues: i32) -> bool {
    let header = CreateTopicRequestHeader {
        topic: topic.into(),
        default_topic: "TBW102".into(),
        read_queue_nums: queues,
        write_queue_nums: queues,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
        attributes: None,
        force: None,
    };
    let request =
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 0).with_header(&header);
    call(broker, request).is_some_and(|answer| answer.response_code() == ResponseCode::SUCCESS)
}

/// Sends `body` to queue 0 of `topic` directly; whether it was answered SEND_OK (for a
/// SYNC_MASTER: stored and replicated to its slave).
pub fn probe_send(broker: SocketAddr, topic: &str, body: &str) -> bool {
    let mut properties = Properties::new();
    properties.insert(names::WAIT, "true");
    let header = SendMessageRequestHeaderV2 {
        producer_group: "chaos_probe_pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: 0,
        born_timestamp: 0,
        flag: 0,
        properties: Some(properties.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: None,
    };
    let request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 0)
        .with_header(&header)
        .with_body(body.as_bytes().to_vec());
    call(broker, request).is_some_and(|answer| answer.response_code() == ResponseCode::SUCCESS)
}

/// Whether the controller at `addr` says it leads its group.
pub fn is_controller_leader(addr: SocketAddr) -> bool {
    call(
        addr,
        RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO, 0),
    )
    .and_then(|answer| answer.decode_header::<GetMetaDataResponseHeader>().ok())
    .is_some_and(|meta| meta.is_leader)
}

/// The broker set's sync-state set as the controller at `addr` answers it (only the
/// leader answers it).
pub fn sync_state_set(addr: SocketAddr, broker_name: &str) -> Option<SyncStateSet> {
    let request = RemotingCommand::request(RequestCode::CONTROLLER_GET_REPLICA_INFO, 0)
        .with_header(&GetReplicaInfoRequestHeader {
            broker_name: broker_name.into(),
        });
    let answer = call(addr, request)?;
    if answer.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    SyncStateSet::decode(&answer.body).ok()
}

/// Every message of `queue` of `topic` from offset 0, as the broker serves them now; `None`
/// when the broker does not answer or answers an error (the caller tries again).
pub fn pull_queue(broker: SocketAddr, topic: &str, queue: i32) -> Option<Vec<MessageExt>> {
    let mut messages: Vec<MessageExt> = Vec::new();
    let mut offset = 0;
    loop {
        let header = PullMessageRequestHeader {
            consumer_group: "chaos_check_cg".into(),
            topic: topic.into(),
            queue_id: queue,
            queue_offset: offset,
            max_msg_nums: 32,
            // Subscription in the request (bit 2), no long polling.
            sys_flag: 4,
            commit_offset: 0,
            suspend_timeout_millis: 0,
            subscription: Some("*".into()),
            sub_version: 0,
            expression_type: Some("TAG".into()),
            max_msg_bytes: None,
            request_source: None,
            proxy_froward_client_id: None,
            broker_name: None,
            logical: None,
        };
        let request = RemotingCommand::request(RequestCode::PULL_MESSAGE, 0).with_header(&header);
        let answer = call(broker, request)?;
        match answer.response_code() {
            ResponseCode::SUCCESS => {
                let batch = decode_records(answer.body.clone());
                let Some(last) = batch.last() else {
                    return Some(messages);
                };
                offset = last.queue_offset + 1;
                messages.extend(batch);
            }
            ResponseCode::PULL_NOT_FOUND => return Some(messages),
            _ => return None,
        }
    }
}
