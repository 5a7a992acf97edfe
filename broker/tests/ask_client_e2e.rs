//! Admin requests the broker forwards to a client end to end: GET_CONSUMER_RUNNING_INFO (307),
//! CONSUME_MESSAGE_DIRECTLY (309) and INVOKE_BROKER_TO_GET_CONSUMER_STATUS (223), answered by fake
//! consumer connections registered by heartbeat, with the admin's and the client's connections on
//! the same and on different shards, and the error answers for a client that is not online, too
//! old, silent, or gone mid-request; and request-reply, whose replies the broker pushes to the
//! requesting producer's connection (PUSH_REPLY_MESSAGE_TO_CLIENT).
//!
//! Which shard accepted a connection is learned from a send that lets the broker pick the
//! queue: the broker picks a queue its accepting shard owns, and the offset message id of
//! the answer names that shard's commit log.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use comet_proto::body::{
    CMResult, ConsumeMessageDirectlyResult, ConsumeType, ConsumerData, GetConsumerStatusBody,
    HeartbeatData, JsonBody, MessageQueue, ProducerData, SubscriptionData,
};
use comet_proto::bytes::BytesMut;
use comet_proto::command::FLAG_RESPONSE;
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::headers::{
    ConsumeMessageDirectlyResultRequestHeader, GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader, ReplyMessageRequestHeader, SendMessageResponseHeader,
};
use comet_proto::message::decode_records;
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::properties::{names, Properties};
use comet_proto::{CommandHeader, Decoded, RemotingCommand, RequestCode, ResponseCode};
use comet_store::PhysicalOffset;
use common::{send_request, Broker, Client, TempDir};

const TOPIC: &str = "AskTopic";
const GROUP: &str = "ask_cg";
const PRODUCER_GROUP: &str = "ask_pg";
const REPLY_TOPIC: &str = "DefaultCluster_REPLY_TOPIC";
/// What the fake consumers report as their running info.
const RUNNING_INFO: &str = r#"{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY"}}"#;

/// How a fake consumer treats the broker's requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    /// Answers 307, 309 and 221.
    Answer,
    /// Never answers.
    Silent,
    /// Closes its connection on the first two-way request.
    Hang,
}

/// A consumer connection registered by heartbeat; a thread answers the broker's requests and
/// reports each one on `seen`.
struct FakeConsumer {
    client_id: String,
    shard: u8,
    stream: TcpStream,
    seen: Receiver<RemotingCommand>,
    reader: Option<JoinHandle<()>>,
}

impl FakeConsumer {
    fn start(broker: &Broker, client_id: &str, version: i32, behaviour: Behaviour) -> Self {
        let mut client = broker.client();
        heartbeat(&mut client, client_id, version);
        let shard = shard_of(&mut client);
        let stream = client.stream.try_clone().unwrap();
        let reader_stream = client.stream.try_clone().unwrap();
        let (report, seen) = mpsc::channel();
        let id = client_id.to_owned();
        let reader = std::thread::spawn(move || serve(reader_stream, behaviour, &id, &report));
        FakeConsumer {
            client_id: client_id.to_owned(),
            shard,
            stream,
            seen,
            reader: Some(reader),
        }
    }

    /// The next two-way request the broker sent, within `limit`.
    fn next_request(&self, limit: Duration) -> RemotingCommand {
        self.seen
            .recv_timeout(limit)
            .expect("a request from the broker")
    }
}

impl Drop for FakeConsumer {
    fn drop(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Both);
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
    }
}

fn heartbeat(client: &mut Client, client_id: &str, version: i32) {
    let data = HeartbeatData {
        client_id: client_id.into(),
        // Every Java client instance also registers its producers (request-reply finds the
        // requester among them).
        producer_data_set: vec![ProducerData {
            group_name: PRODUCER_GROUP.into(),
        }],
        consumer_data_set: vec![ConsumerData {
            group_name: GROUP.into(),
            consume_type: ConsumeType::CONSUME_PASSIVELY,
            subscription_data_set: vec![SubscriptionData {
                topic: TOPIC.into(),
                sub_string: "*".into(),
                ..SubscriptionData::default()
            }],
            ..ConsumerData::default()
        }],
        ..HeartbeatData::default()
    };
    let mut request = RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode());
    request.version = version;
    assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
}

/// The reader thread of a fake consumer; ends when the connection closes (or after a
/// minute without anything to read, a bound on a test that went wrong).
fn serve(
    mut stream: TcpStream,
    behaviour: Behaviour,
    client_id: &str,
    report: &Sender<RemotingCommand>,
) {
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let decoder = FrameDecoder::default();
    let mut buffer = BytesMut::new();
    let mut chunk = vec![0u8; 65536];
    loop {
        while let Ok(Some(Decoded::Command(request))) = decoder.decode(&mut buffer) {
            if request.is_response() || request.is_oneway() {
                continue;
            }
            let _ = report.send(request.clone());
            match behaviour {
                Behaviour::Silent => {}
                Behaviour::Hang => {
                    let _ = stream.shutdown(Shutdown::Both);
                    return;
                }
                Behaviour::Answer => {
                    let mut frame = BytesMut::new();
                    encode(&answer(&request, client_id), &mut frame);
                    if stream.write_all(&frame).is_err() {
                        return;
                    }
                }
            }
        }
        match stream.read(&mut chunk) {
            Ok(read) if read > 0 => buffer.extend_from_slice(&chunk[..read]),
            _ => return,
        }
    }
}

/// What a Java client would answer, with recognisable content.
fn answer(request: &RemotingCommand, client_id: &str) -> RemotingCommand {
    let response = RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    match request.request_code() {
        RequestCode::GET_CONSUMER_RUNNING_INFO => response.with_body(RUNNING_INFO),
        RequestCode::CONSUME_MESSAGE_DIRECTLY => {
            let result = ConsumeMessageDirectlyResult {
                consume_result: Some(CMResult::CR_SUCCESS),
                spent_time_mills: 3,
                ..ConsumeMessageDirectlyResult::default()
            };
            response.with_body(result.encode())
        }
        RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT => {
            // Each client reports a different offset: its id's length.
            let queue = MessageQueue::new(TOPIC, "broker-a", 0);
            let offset = i64::try_from(client_id.len()).unwrap();
            let body = GetConsumerStatusBody {
                message_queue_table: [(queue, offset)].into(),
                ..GetConsumerStatusBody::default()
            };
            response.with_body(body.encode())
        }
        RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT => response,
        _ => RemotingCommand::not_supported_to(request),
    }
}

/// Sends one message and returns its offset message id.
fn send(client: &mut Client, queue_id: i32, body: &[u8]) -> String {
    let response = client.call_ok(send_request(TOPIC, queue_id, body, Some("TagA"), None));
    SendMessageResponseHeader::from_ext_fields(&response.ext_fields)
        .unwrap()
        .msg_id
}

/// The shard that accepted `client`'s connection (see the module docs).
fn shard_of(client: &mut Client) -> u8 {
    let msg_id = send(client, -1, b"probe");
    let offset = decode_offset_msg_id(&msg_id).unwrap().commit_log_offset;
    PhysicalOffset::from_i64(offset).unwrap().log_id().get()
}

/// An admin connection on `shard` (same = true) or on another shard (same = false).
fn admin_on(broker: &Broker, shard: u8, same: bool) -> Client {
    for _ in 0..64 {
        let mut client = broker.client();
        if (shard_of(&mut client) == shard) == same {
            return client;
        }
    }
    panic!("no connection landed where wanted in 64 tries");
}

fn broker_with_topic(directory: &TempDir) -> Broker {
    let broker = Broker::start(&directory.0, 2, &[]);
    common::create_topic(&mut broker.client(), TOPIC, 8);
    broker
}

fn running_info_request(client_id: &str) -> RemotingCommand {
    let header = GetConsumerRunningInfoRequestHeader {
        consumer_group: GROUP.into(),
        client_id: client_id.into(),
        jstack_enable: Some(false),
    };
    RemotingCommand::request(RequestCode::GET_CONSUMER_RUNNING_INFO, 0).with_header(&header)
}

// Proves GET_CONSUMER_RUNNING_INFO reaches the named client with the admin's header fields
// and a new opaque, and its answer comes back to the admin unchanged under the admin's
// opaque, both when the client's connection is on the admin's shard and on the other shard.
#[test]
fn running_info_is_relayed_from_either_shard() {
    let directory = TempDir::new("e2e-ask-running");
    let broker = broker_with_topic(&directory);
    let consumer = FakeConsumer::start(&broker, "127.0.0.1@ask-1", 479, Behaviour::Answer);
    for same in [true, false] {
        let mut admin = admin_on(&broker, consumer.shard, same);
        let response = admin.call_ok(running_info_request(&consumer.client_id));
        assert!(response.is_response());
        assert_eq!(
            response.body.as_ref(),
            RUNNING_INFO.as_bytes(),
            "same shard: {same}"
        );
        let forwarded = consumer.next_request(Duration::from_secs(5));
        assert_eq!(
            forwarded.request_code(),
            RequestCode::GET_CONSUMER_RUNNING_INFO
        );
        assert_eq!(forwarded.ext_fields.get("consumerGroup"), Some(GROUP));
        assert_eq!(
            forwarded.ext_fields.get("clientId"),
            Some(consumer.client_id.as_str())
        );
        assert_eq!(forwarded.ext_fields.get("jstackEnable"), Some("false"));
        assert_eq!(forwarded.flag & FLAG_RESPONSE, 0);
    }
}

// Proves CONSUME_MESSAGE_DIRECTLY reads the message its offset id names (stored on the
// other shard's log than the admin's connection when possible), sends it as the body with
// brokerName added, and relays the client's ConsumeMessageDirectlyResult; an id that names
// no message is a SYSTEM_ERROR without bothering the client.
#[test]
fn consume_message_directly_sends_the_stored_message() {
    let directory = TempDir::new("e2e-ask-direct");
    let broker = broker_with_topic(&directory);
    let consumer = FakeConsumer::start(&broker, "127.0.0.1@ask-2", 479, Behaviour::Answer);
    let mut admin = admin_on(&broker, consumer.shard, false);
    let mut msg_ids = Vec::new();
    for queue_id in 0..2 {
        msg_ids.push(send(
            &mut admin,
            queue_id,
            format!("direct-{queue_id}").as_bytes(),
        ));
    }
    for (queue_id, msg_id) in msg_ids.iter().enumerate() {
        let header = ConsumeMessageDirectlyResultRequestHeader {
            consumer_group: GROUP.into(),
            client_id: Some(consumer.client_id.clone()),
            msg_id: Some(msg_id.clone()),
            broker_name: None,
            topic: Some(TOPIC.into()),
            topic_sys_flag: None,
            group_sys_flag: None,
        };
        let request =
            RemotingCommand::request(RequestCode::CONSUME_MESSAGE_DIRECTLY, 0).with_header(&header);
        let response = admin.call_ok(request);
        let result = ConsumeMessageDirectlyResult::decode(&response.body).unwrap();
        assert_eq!(result.consume_result, Some(CMResult::CR_SUCCESS));
        let forwarded = consumer.next_request(Duration::from_secs(5));
        assert_eq!(
            forwarded.request_code(),
            RequestCode::CONSUME_MESSAGE_DIRECTLY
        );
        assert!(forwarded
            .ext_fields
            .get("brokerName")
            .is_some_and(|name| !name.is_empty()));
        assert_eq!(forwarded.ext_fields.get("topicSysFlag"), Some("0"));
        let messages = decode_records(forwarded.body.clone());
        assert_eq!(messages.len(), 1);
        assert_eq!(
            messages[0].body.as_ref(),
            format!("direct-{queue_id}").as_bytes()
        );
        assert_eq!(messages[0].topic, TOPIC);
    }
    // Offset far past the end of the log: no message there.
    let missing =
        comet_proto::message_id::encode_offset_msg_id(broker.broker_addr, i64::from(u32::MAX));
    let header = ConsumeMessageDirectlyResultRequestHeader {
        consumer_group: GROUP.into(),
        client_id: Some(consumer.client_id.clone()),
        msg_id: Some(missing),
        broker_name: None,
        topic: None,
        topic_sys_flag: None,
        group_sys_flag: None,
    };
    let request =
        RemotingCommand::request(RequestCode::CONSUME_MESSAGE_DIRECTLY, 0).with_header(&header);
    let response = admin.call(request);
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(response.remark.unwrap().contains("no message with msgId"));
    assert!(consumer
        .seen
        .recv_timeout(Duration::from_millis(300))
        .is_err());
}

fn consumer_status(admin: &mut Client, group: &str, client_addr: Option<&str>) -> RemotingCommand {
    let header = GetConsumerStatusRequestHeader {
        topic: TOPIC.into(),
        group: group.into(),
        client_addr: client_addr.map(str::to_owned),
    };
    admin.call(
        RemotingCommand::request(RequestCode::INVOKE_BROKER_TO_GET_CONSUMER_STATUS, 0)
            .with_header(&header),
    )
}

// Proves INVOKE_BROKER_TO_GET_CONSUMER_STATUS asks every client of the group with
// GET_CONSUMER_STATUS_FROM_CLIENT (topic and group, no clientAddr) and answers consumerTable
// = client id -> that client's offsets; with clientAddr only that client is asked; a silent
// client is left out after its bounded wait; a group with nobody online is a SYSTEM_ERROR.
// At least one client is on the other shard than the admin.
#[test]
fn consumer_status_aggregates_every_client() {
    let directory = TempDir::new("e2e-ask-status");
    let broker = broker_with_topic(&directory);
    let first = FakeConsumer::start(&broker, "127.0.0.1@ask-3", 479, Behaviour::Answer);
    let second = FakeConsumer::start(&broker, "127.0.0.1@ask-status-4", 479, Behaviour::Answer);
    // The admin's connection is on the other shard than the first client's.
    let mut admin = admin_on(&broker, first.shard, false);
    let response = consumer_status(&mut admin, GROUP, None);
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    let body = GetConsumerStatusBody::decode(&response.body).unwrap();
    assert_eq!(body.consumer_table.len(), 2);
    for consumer in [&first, &second] {
        let offsets = &body.consumer_table[&consumer.client_id].0;
        let queue = MessageQueue::new(TOPIC, "broker-a", 0);
        assert_eq!(
            offsets[&queue],
            i64::try_from(consumer.client_id.len()).unwrap()
        );
        let asked = consumer.next_request(Duration::from_secs(5));
        assert_eq!(
            asked.request_code(),
            RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT
        );
        assert_eq!(asked.ext_fields.get("topic"), Some(TOPIC));
        assert_eq!(asked.ext_fields.get("group"), Some(GROUP));
        assert_eq!(asked.ext_fields.get("clientAddr"), None);
    }
    let response = consumer_status(&mut admin, GROUP, Some(&second.client_id));
    let body = GetConsumerStatusBody::decode(&response.body).unwrap();
    let ids: Vec<&String> = body.consumer_table.keys().collect();
    assert_eq!(ids, vec![&second.client_id]);
    assert!(first.seen.recv_timeout(Duration::from_millis(300)).is_err());
    let silent = FakeConsumer::start(&broker, "127.0.0.1@ask-5", 479, Behaviour::Silent);
    let started = Instant::now();
    let response = consumer_status(&mut admin, GROUP, None);
    assert!(
        started.elapsed() < Duration::from_secs(12),
        "{:?}",
        started.elapsed()
    );
    let body = GetConsumerStatusBody::decode(&response.body).unwrap();
    assert_eq!(
        body.consumer_table.len(),
        2,
        "the silent client is left out"
    );
    assert!(!body.consumer_table.contains_key(&silent.client_id));
    let response = consumer_status(&mut admin, "nobody_cg", None);
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        response.remark.as_deref(),
        Some("No Any Consumer online in the consumer group: [nobody_cg]")
    );
}

// Proves the error answers: a client id not in the group is "not online", a client below
// V3_1_8_SNAPSHOT is "too low", a client that never answers gives CONSUME_MSG_TIMEOUT after
// the bounded wait (about 10 s, not a hang), and a client whose connection closes while it
// is asked gives a SYSTEM_ERROR at once; the silent and closing clients are on the other
// shard than the admin.
#[test]
fn errors_for_absent_old_silent_and_closing_clients() {
    let directory = TempDir::new("e2e-ask-errors");
    let broker = broker_with_topic(&directory);
    let mut admin = broker.client();
    let response = admin.call(running_info_request("127.0.0.1@nobody"));
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        response.remark.as_deref(),
        Some("The Consumer <ask_cg> <127.0.0.1@nobody> not online")
    );
    let old = FakeConsumer::start(&broker, "127.0.0.1@ask-old", 50, Behaviour::Answer);
    let response = admin.call(running_info_request(&old.client_id));
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert_eq!(
        response.remark.as_deref(),
        Some(
            "The Consumer <127.0.0.1@ask-old> Version <V3_1_2_SNAPSHOT> too low to finish, \
             please upgrade it to V3_1_8_SNAPSHOT"
        )
    );
    let silent = FakeConsumer::start(&broker, "127.0.0.1@ask-silent", 479, Behaviour::Silent);
    let mut admin = admin_on(&broker, silent.shard, false);
    let started = Instant::now();
    let response = admin.call(running_info_request(&silent.client_id));
    let waited = started.elapsed();
    assert_eq!(
        response.response_code(),
        ResponseCode::CONSUME_MSG_TIMEOUT,
        "{:?}",
        response.remark
    );
    assert!(response
        .remark
        .unwrap()
        .starts_with("consumer <ask_cg> <127.0.0.1@ask-silent> Timeout"));
    assert!(
        waited >= Duration::from_secs(9) && waited < Duration::from_secs(13),
        "{waited:?}"
    );
    let closing = FakeConsumer::start(&broker, "127.0.0.1@ask-closing", 479, Behaviour::Hang);
    let mut admin = admin_on(&broker, closing.shard, false);
    let started = Instant::now();
    let response = admin.call(running_info_request(&closing.client_id));
    assert_eq!(
        response.response_code(),
        ResponseCode::SYSTEM_ERROR,
        "{:?}",
        response.remark
    );
    let remark = response.remark.unwrap();
    assert!(
        remark.starts_with("invoke consumer <ask_cg> <127.0.0.1@ask-closing> Exception"),
        "{remark}"
    );
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A responder's SEND_REPLY_MESSAGE_V2 to the reply topic, answering `requester`'s request
/// `correlation` (no requester: no REPLY_TO_CLIENT, as a reply to a plain message).
fn reply_request(requester: Option<&str>, correlation: &str, body: &[u8]) -> RemotingCommand {
    let mut properties = Properties::new();
    properties.insert(names::MSG_TYPE, "reply");
    properties.insert(names::CORRELATION_ID, correlation);
    if let Some(requester) = requester {
        properties.insert(names::REPLY_TO_CLIENT, requester);
    }
    let mut request = common::send_request_with(REPLY_TOPIC, 0, body, &properties);
    request.code = RequestCode::SEND_REPLY_MESSAGE_V2.value();
    request
}

/// Messages stored in the reply topic's queue 0, as (queue offset, body).
fn stored_replies(client: &mut Client) -> Vec<(i64, Vec<u8>)> {
    let pull = common::pull_request("reply_reader", REPLY_TOPIC, 0, 0, 32, 0);
    let response = client.call(pull);
    if response.response_code() != ResponseCode::SUCCESS {
        return Vec::new();
    }
    decode_records(response.body.clone())
        .into_iter()
        .map(|message| (message.queue_offset, message.body.to_vec()))
        .collect()
}

// Proves request-reply: a reply sent with SEND_REPLY_MESSAGE_V2 on one shard is pushed to the
// requesting producer's connection on the other (PUSH_REPLY_MESSAGE_TO_CLIENT with the
// reply's topic, properties plus PUSH_REPLY_TIME, and body), answered SUCCESS with the stored
// message's id, and stored in the reply topic; a reply whose requester is not connected, or
// that names none, is answered SYSTEM_ERROR with the reason and still stored.
#[test]
fn replies_are_pushed_to_the_requester_and_stored() {
    let directory = TempDir::new("ask-reply");
    let broker = broker_with_topic(&directory);
    let requester = FakeConsumer::start(&broker, "requester-1", 513, Behaviour::Answer);
    let mut responder = admin_on(&broker, requester.shard, false);

    let answer = responder.call_ok(reply_request(Some("requester-1"), "c-1", b"the answer"));
    let header = SendMessageResponseHeader::from_ext_fields(&answer.ext_fields).unwrap();
    assert_eq!(header.msg_id.len(), 32, "the stored message's offset id");
    let pushed = requester.next_request(Duration::from_secs(5));
    assert_eq!(
        pushed.request_code(),
        RequestCode::PUSH_REPLY_MESSAGE_TO_CLIENT
    );
    let push = ReplyMessageRequestHeader::from_ext_fields(&pushed.ext_fields).unwrap();
    assert_eq!(push.topic, REPLY_TOPIC);
    let properties = Properties::decode(push.properties.as_deref().unwrap());
    assert_eq!(properties.get(names::CORRELATION_ID), Some("c-1"));
    assert!(properties.get(names::PUSH_REPLY_TIME).is_some());
    assert_eq!(&pushed.body[..], b"the answer");

    let absent = responder.call(reply_request(Some("nobody"), "c-2", b"lost"));
    assert_eq!(absent.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = absent.remark.unwrap_or_default();
    assert!(remark.contains("channel of <nobody> not found"), "{remark}");
    let unnamed = responder.call(reply_request(None, "c-3", b"nameless"));
    assert_eq!(unnamed.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(unnamed
        .remark
        .unwrap_or_default()
        .contains("REPLY_TO_CLIENT"));

    let stored = stored_replies(&mut responder);
    let bodies: Vec<&[u8]> = stored.iter().map(|(_, body)| body.as_slice()).collect();
    assert_eq!(bodies, [&b"the answer"[..], b"lost", b"nameless"]);
}
