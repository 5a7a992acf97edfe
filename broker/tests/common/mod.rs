//! Test harness: a real `comet-broker --standalone` process on loopback with its own store
//! and ports (comet-test-support, shared with the other packages' end-to-end tests), and a
//! minimal blocking remoting client built on comet-proto frames.

#![allow(dead_code)]

pub mod pop;
pub mod replication;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::headers::{
    CreateTopicRequestHeader, PullMessageRequestHeader, QueryMessageRequestHeader,
    SendMessageRequestHeaderV2,
};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{Decoded, RemotingCommand, RequestCode, ResponseCode};

pub use comet_test_support::TempDir;

/// A running broker process of this package's binary (comet-test-support's harness);
/// killed on drop. Derefs to the harness for its addresses, `stop` and `kill`.
pub struct Broker(comet_test_support::Broker);

impl Broker {
    /// Starts a standalone broker with `cores` shards and `extra` arguments.
    pub fn start(store: &Path, cores: usize, extra: &[&str]) -> Broker {
        let binary = Path::new(env!("CARGO_BIN_EXE_comet-broker"));
        Broker(comet_test_support::Broker::start_binary(
            binary, store, cores, extra,
        ))
    }

    /// [`Broker::start`] with the broker's standard error appended to `log`.
    pub fn start_logging(store: &Path, cores: usize, extra: &[&str], log: &Path) -> Broker {
        let binary = Path::new(env!("CARGO_BIN_EXE_comet-broker"));
        Broker(comet_test_support::Broker::start_logging(
            binary,
            store,
            cores,
            extra,
            Some(log),
        ))
    }

    /// Restarts with `cores` shards on the same store and ports after a stop or kill.
    pub fn restart(&mut self, cores: usize) {
        self.0.cores = cores;
        self.0.restart();
    }

    /// A client connected to the broker.
    pub fn client(&self) -> Client {
        Client::connect(self.0.broker_addr)
    }

    /// A client connected to the embedded name server.
    pub fn namesrv_client(&self) -> Client {
        Client::connect(self.0.namesrv_addr)
    }
}

impl std::ops::Deref for Broker {
    type Target = comet_test_support::Broker;

    fn deref(&self) -> &comet_test_support::Broker {
        &self.0
    }
}

impl std::ops::DerefMut for Broker {
    fn deref_mut(&mut self) -> &mut comet_test_support::Broker {
        &mut self.0
    }
}

/// A blocking remoting client: one request at a time, or pipelined with `send`/`receive`.
pub struct Client {
    pub stream: TcpStream,
    buffer: BytesMut,
    next_opaque: i32,
}

impl Client {
    pub fn connect(addr: SocketAddr) -> Client {
        let stream = TcpStream::connect(addr).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(40)))
            .unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buffer: BytesMut::new(),
            next_opaque: 1,
        }
    }

    /// Sends a request, assigning its opaque; returns the opaque.
    pub fn send(&mut self, mut request: RemotingCommand) -> i32 {
        request.opaque = self.next_opaque;
        self.next_opaque += 1;
        let mut frame = BytesMut::new();
        encode(&request, &mut frame);
        self.stream.write_all(&frame).unwrap();
        request.opaque
    }

    /// Reads the next response frame (skipping broker-to-client requests).
    pub fn receive(&mut self) -> RemotingCommand {
        let decoder = FrameDecoder::default();
        loop {
            if let Some(Decoded::Command(command)) = decoder.decode(&mut self.buffer).unwrap() {
                if command.is_response() {
                    return command;
                }
                continue;
            }
            let mut chunk = [0u8; 65536];
            let read = self
                .stream
                .read(&mut chunk)
                .expect("response before timeout");
            assert!(read > 0, "connection closed by the broker");
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }

    /// One request, its response.
    pub fn call(&mut self, request: RemotingCommand) -> RemotingCommand {
        let opaque = self.send(request);
        let response = self.receive();
        assert_eq!(response.opaque, opaque);
        response
    }

    /// Sends `request`, waits for its answer and asserts it is SUCCESS (showing the remark
    /// when not).
    pub fn call_ok(&mut self, request: RemotingCommand) -> RemotingCommand {
        let response = self.call(request);
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            response.remark
        );
        response
    }
}

/// An UPDATE_AND_CREATE_TOPIC request of a read-write topic with `queues` read and write
/// queues.
pub fn create_topic_request(topic: &str, queues: i32) -> RemotingCommand {
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
    RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 0).with_header(&header)
}

/// UPDATE_AND_CREATE_TOPIC of a read-write topic with `queues` read and write queues;
/// panics unless the broker answers SUCCESS.
pub fn create_topic(client: &mut Client, topic: &str, queues: i32) {
    let response = client.call(create_topic_request(topic, queues));
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "creating {topic}: {:?}",
        response.remark
    );
}

/// A SEND_MESSAGE_V2 request as the Java client builds it.
pub fn send_request(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    tags: Option<&str>,
    keys: Option<&str>,
) -> RemotingCommand {
    let mut properties = Properties::new();
    if let Some(tags) = tags {
        properties.insert(names::TAGS, tags);
    }
    if let Some(keys) = keys {
        properties.insert(names::KEYS, keys);
    }
    properties.insert(names::WAIT, "true");
    send_request_with(topic, queue_id, body, &properties)
}

/// A SEND_MESSAGE_V2 request carrying exactly `properties`.
pub fn send_request_with(
    topic: &str,
    queue_id: i32,
    body: &[u8],
    properties: &Properties,
) -> RemotingCommand {
    let header = SendMessageRequestHeaderV2 {
        producer_group: "test_pg".into(),
        topic: topic.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 8,
        queue_id,
        sys_flag: 0,
        born_timestamp: 1_700_000_000_000,
        flag: 0,
        properties: Some(properties.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 0)
        .with_header(&header)
        .with_body(body.to_vec())
}

/// A PULL_MESSAGE for `group` with the `*` subscription in the request (sysflag bit 2), at
/// most `max_msg_nums` messages; long-polls for `suspend_ms` when it is above 0.
pub fn pull_request(
    group: &str,
    topic: &str,
    queue_id: i32,
    offset: i64,
    max_msg_nums: i32,
    suspend_ms: i64,
) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums,
        sys_flag: if suspend_ms > 0 { 2 | 4 } else { 4 },
        commit_offset: 0,
        suspend_timeout_millis: suspend_ms,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
        broker_name: None,
        logical: None,
    };
    RemotingCommand::request(RequestCode::PULL_MESSAGE, 0).with_header(&header)
}

/// QUERY_MESSAGE of `key` in `topic` over all time (`unique_key_query` as given), at most
/// 32 messages; panics unless the broker answers SUCCESS.
pub fn query_by_key(
    client: &mut Client,
    topic: &str,
    key: &str,
    unique_key_query: Option<bool>,
) -> Vec<MessageExt> {
    let header = QueryMessageRequestHeader {
        topic: topic.into(),
        key: key.into(),
        max_num: 32,
        begin_timestamp: 0,
        end_timestamp: i64::MAX,
        unique_key_query,
        broker_name: None,
    };
    let response =
        client.call(RemotingCommand::request(RequestCode::QUERY_MESSAGE, 0).with_header(&header));
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "key {key}: {:?}",
        response.remark
    );
    decode_records(response.body.clone())
}

/// Runs the broker binary (standalone, one unpinned shard, store `store`) with `args` until it
/// exits, which it must within 30 s (a start-up that should fail); its exit status and
/// standard error.
pub fn run_to_exit(args: &[&str], store: &Path) -> (Option<i32>, String) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_comet-broker"));
    command
        .args(["--standalone", "--no-pin", "--cores", "1"])
        .arg("--store")
        .arg(store)
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let what = format!("comet-broker {args:?}");
    let output = comet_test_support::run_to_exit(&what, &mut command, Duration::from_secs(30));
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status.code(), stderr)
}

/// Commits `offset` for `group` on (`topic`, `queue_id`); panics unless SUCCESS.
pub fn commit_offset(client: &mut Client, group: &str, topic: &str, queue_id: i32, offset: i64) {
    let header = comet_proto::headers::UpdateConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        commit_offset: offset,
        broker_name: None,
    };
    client.call_ok(
        RemotingCommand::request(RequestCode::UPDATE_CONSUMER_OFFSET, 0).with_header(&header),
    );
}

/// The committed offset of `group` on (`topic`, `queue_id`): `None` when the broker has none
/// (QUERY_NOT_FOUND); any other refusal fails the test.
pub fn committed_offset(
    client: &mut Client,
    group: &str,
    topic: &str,
    queue_id: i32,
) -> Option<i64> {
    let header = comet_proto::headers::QueryConsumerOffsetRequestHeader {
        consumer_group: group.into(),
        topic: topic.into(),
        queue_id,
        set_zero_if_not_found: Some(false),
        broker_name: None,
    };
    let response = client
        .call(RemotingCommand::request(RequestCode::QUERY_CONSUMER_OFFSET, 0).with_header(&header));
    match response.response_code() {
        ResponseCode::SUCCESS => response.ext_fields.optional_i64("offset").unwrap(),
        ResponseCode::QUERY_NOT_FOUND => None,
        other => panic!("query offset: {other} {:?}", response.remark),
    }
}

/// The options serving metrics (`metricsExporterType=PROM`) on loopback port `port`.
pub fn metrics_options(port: u16) -> Vec<String> {
    [
        "metricsExporterType=PROM".to_owned(),
        "metricsPromExporterHost=127.0.0.1".to_owned(),
        format!("metricsPromExporterPort={port}"),
    ]
    .into_iter()
    .flat_map(|setting| ["-o".to_owned(), setting])
    .collect()
}

/// The values of every series of metric `name` in a scrape of the metrics endpoint at
/// `addr` (GET /metrics, Prometheus text), in the order served.
pub fn metric_values(addr: SocketAddr, name: &str) -> Vec<f64> {
    let mut stream = TcpStream::connect(addr).expect("connect to the metrics endpoint");
    stream
        .set_read_timeout(Some(Duration::from_secs(15)))
        .unwrap();
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: broker\r\n\r\n")
        .unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).unwrap();
    let answer = String::from_utf8(answer).expect("a UTF-8 answer");
    let (_, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    body.lines()
        .filter(|line| !line.starts_with('#'))
        .filter_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            (series.split('{').next()? == name).then(|| value.parse().expect("a number"))
        })
        .collect()
}
