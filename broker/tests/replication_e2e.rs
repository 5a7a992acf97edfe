//! Master and slave on loopback: a standalone master (its embedded name server is the name
//! server both register with) with 2 shards under SYNC_FLUSH, and a slave with 2 shards that
//! learns the master's HA address from the name server's answer to its registration.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_proto::message::decode_records;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_replication::wire::{self, CloseReason, Frame, Hello, LogState, StoreFormat};
use comet_test_support::{
    free_port, poll_until, wait_for_port, wait_for_port_closed, ChildGuard, LOOPBACK,
    TEST_COMMIT_LOG_FILE_BYTES,
};
use common::{create_topic, pull_request, send_request, Broker, Client, TempDir};

/// How long replication, registration and the metadata copy may take to show an effect.
const CONVERGE_LIMIT: Duration = Duration::from_secs(40);
const SHARDS: usize = 2;
const QUEUES: i32 = 4;

/// A slave broker process (not standalone: it registers with the master's name server).
struct Slave {
    guard: Option<ChildGuard>,
    store: std::path::PathBuf,
    addr: SocketAddr,
    namesrv: String,
}

impl Slave {
    fn start(store: &Path, namesrv: &str) -> Slave {
        let mut slave = Slave {
            guard: None,
            store: store.to_path_buf(),
            addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            namesrv: namesrv.to_owned(),
        };
        slave.spawn();
        slave
    }

    fn spawn(&mut self) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_comet-broker"));
        command
            .args(["--no-pin", "--cores", &SHARDS.to_string()])
            .args(["--bind-address", "127.0.0.1"])
            .args(["--listen-port", &self.addr.port().to_string()])
            .args(["--namesrv", &self.namesrv])
            .arg("--store")
            .arg(&self.store)
            .args(["--flush", "SYNC_FLUSH"])
            .args([
                "-o",
                &format!("mappedFileSizeCommitLog={TEST_COMMIT_LOG_FILE_BYTES}"),
            ])
            .args(["-o", "brokerRole=SLAVE", "-o", "brokerId=1"])
            .args(["-o", "haSendHeartbeatInterval=500"])
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        self.guard = Some(ChildGuard::spawn("the slave", &mut command));
        wait_for_port(self.addr, Duration::from_secs(60));
    }

    fn kill(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            guard.kill();
        }
        wait_for_port_closed(self.addr, Duration::from_secs(15));
    }

    fn client(&self) -> Client {
        Client::connect(self.addr)
    }
}

fn start_master(store: &Path, ha_port: u16) -> Broker {
    Broker::start(
        store,
        SHARDS,
        &[
            "--flush",
            "SYNC_FLUSH",
            "-o",
            "brokerRole=ASYNC_MASTER",
            "-o",
            &format!("haListenPort={ha_port}"),
            "-o",
            "haSendHeartbeatInterval=500",
        ],
    )
}

/// The records of `queue` from `offset` on, as a broker serves them (raw record bytes).
fn pull_all(client: &mut Client, topic: &str, queue: i32) -> Vec<u8> {
    let mut records = Vec::new();
    let mut offset = 0;
    loop {
        let response = client.call(pull_request("repl_cg", topic, queue, offset, 32, 0));
        if response.response_code() != ResponseCode::SUCCESS {
            return records;
        }
        let batch = decode_records(response.body.clone());
        if batch.is_empty() {
            return records;
        }
        offset = batch.last().map_or(offset, |last| last.queue_offset + 1);
        records.extend_from_slice(&response.body);
    }
}

/// Every queue of `topic`, as raw records, on one broker.
fn pull_topic(client: &mut Client, topic: &str) -> Vec<Vec<u8>> {
    (0..QUEUES)
        .map(|queue| pull_all(client, topic, queue))
        .collect()
}

fn topic_known(client: &mut Client, topic: &str) -> bool {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_ALL_TOPIC_CONFIG,
        0,
    ));
    response.response_code() == ResponseCode::SUCCESS
        && String::from_utf8_lossy(&response.body).contains(&format!("\"{topic}\""))
}

fn send_messages(client: &mut Client, topic: &str, first: usize, count: usize) {
    for index in first..first + count {
        let queue = i32::try_from(index).unwrap() % QUEUES;
        let body = format!("message {index}");
        let response = client.call(send_request(topic, queue, body.as_bytes(), None, None));
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            response.remark
        );
    }
}

/// Waits until the slave serves exactly the master's records of `topic`, and checks they
/// are what was sent: `expected` messages, offsets dense from 0, msgIds equal.
fn wait_for_same_queues(master: &mut Client, slave: &mut Client, topic: &str, expected: usize) {
    let on_master = pull_topic(master, topic);
    let held: usize = on_master
        .iter()
        .map(|records| decode_records(records.clone().into()).len())
        .sum();
    assert_eq!(held, expected, "the master holds what was sent");
    let mut on_slave = Vec::new();
    let same = poll_until(CONVERGE_LIMIT, || {
        on_slave = pull_topic(slave, topic);
        on_slave == on_master
    });
    for (queue, (master_records, slave_records)) in on_master.iter().zip(&on_slave).enumerate() {
        let master_messages = decode_records(master_records.clone().into());
        let slave_messages = decode_records(slave_records.clone().into());
        let offsets: Vec<i64> = slave_messages.iter().map(|m| m.queue_offset).collect();
        let dense: Vec<i64> = (0..i64::try_from(offsets.len()).unwrap()).collect();
        assert_eq!(offsets, dense, "queue {queue}: no gap, no duplicate");
        let ids = |messages: &[comet_proto::message::MessageExt]| {
            messages
                .iter()
                .map(|m| m.msg_id.clone())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ids(&master_messages),
            ids(&slave_messages),
            "queue {queue} msgIds"
        );
    }
    assert!(same, "the slave's queues of {topic} equal the master's");
}

/// Reads what the HA port sends back to a connection within a moment: every frame must
/// be a Close (a stranger gets nothing else).
fn frames_sent_to(mut stranger: TcpStream) -> Vec<Frame> {
    stranger
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut received = Vec::new();
    let _ = stranger.read_to_end(&mut received);
    let mut buffer = comet_proto::bytes::BytesMut::from(&received[..]);
    let mut frames = Vec::new();
    while let Ok(Some(frame)) = wire::decode(&mut buffer) {
        frames.push(frame);
    }
    frames
}

fn assert_only_close(frames: &[Frame], reason: CloseReason) {
    match frames {
        [Frame::Close(close)] => assert_eq!(close.reason, reason, "{close:?}"),
        other => panic!("a stranger got {other:?}"),
    }
}

// Proves master to slave replication end to end: sends to the master reach the slave with
// equal consume queues (same records, offsets and msgIds); topics created on the master,
// before and after the slave started, appear on the slave; the slave refuses sends and
// topic writes; strangers on the HA port get a Close and nothing else while the master keeps
// serving; a slave killed with SIGKILL and restarted resumes without gaps or duplicates.
#[test]
fn master_streams_its_logs_to_a_slave() {
    let master_dir = TempDir::new("repl-master");
    let slave_dir = TempDir::new("repl-slave");
    let ha_port = free_port();
    let master = start_master(master_dir.path(), ha_port);
    let mut master_client = master.client();
    create_topic(&mut master_client, "ReplA", QUEUES);
    send_messages(&mut master_client, "ReplA", 0, 40);

    let mut slave = Slave::start(slave_dir.path(), &master.namesrv());
    let mut slave_client = slave.client();
    let known = poll_until(CONVERGE_LIMIT, || topic_known(&mut slave_client, "ReplA"));
    assert!(known, "a topic created before the slave started reaches it");
    wait_for_same_queues(&mut master_client, &mut slave_client, "ReplA", 40);

    create_topic(&mut master_client, "ReplB", QUEUES);
    send_messages(&mut master_client, "ReplB", 0, 12);
    send_messages(&mut master_client, "ReplA", 40, 20);
    let known = poll_until(CONVERGE_LIMIT, || topic_known(&mut slave_client, "ReplB"));
    assert!(known, "a topic created on the master appears on the slave");
    wait_for_same_queues(&mut master_client, &mut slave_client, "ReplA", 60);
    wait_for_same_queues(&mut master_client, &mut slave_client, "ReplB", 12);

    let refused = slave_client.call(send_request("ReplA", 0, b"to the slave", None, None));
    assert_eq!(refused.response_code(), ResponseCode::SERVICE_NOT_AVAILABLE);
    let header = comet_proto::headers::CreateTopicRequestHeader {
        topic: "OnSlave".into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 1,
        write_queue_nums: 1,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: Some(0),
        order: false,
        attributes: None,
        force: None,
    };
    let create =
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 0).with_header(&header);
    let refused = slave_client.call(create);
    assert_eq!(refused.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(refused.remark.unwrap_or_default().contains("slave"));

    // Strangers: bytes that are not a frame, and a Hello for another broker name.
    let ha_addr = SocketAddr::new(LOOPBACK.into(), ha_port);
    let mut garbage = TcpStream::connect(ha_addr).unwrap();
    garbage.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    assert_only_close(&frames_sent_to(garbage), CloseReason::Malformed);
    let mut stranger = TcpStream::connect(ha_addr).unwrap();
    let hello = Hello {
        cluster_name: "DefaultCluster".into(),
        broker_name: "someone-else".into(),
        broker_id: 1,
        format: StoreFormat {
            format_version: comet_broker::replication::STORE_FORMAT_VERSION,
            segment_bytes: TEST_COMMIT_LOG_FILE_BYTES,
        },
        logs: vec![LogState {
            log_id: 0,
            written: 0,
            durable: 0,
            epochs: Default::default(),
        }],
    };
    let mut frame = comet_proto::bytes::BytesMut::new();
    wire::encode(&Frame::Hello(hello), &mut frame).unwrap();
    stranger.write_all(&frame).unwrap();
    assert_only_close(&frames_sent_to(stranger), CloseReason::WrongBrokerName);
    send_messages(&mut master_client, "ReplA", 60, 8);
    wait_for_same_queues(&mut master_client, &mut slave_client, "ReplA", 68);

    // SIGKILL the slave, write while it is away, restart it: it resumes where it was.
    drop(slave_client);
    slave.kill();
    send_messages(&mut master_client, "ReplA", 68, 20);
    slave.spawn();
    let mut slave_client = slave.client();
    wait_for_same_queues(&mut master_client, &mut slave_client, "ReplA", 88);
    wait_for_same_queues(&mut master_client, &mut slave_client, "ReplB", 12);
}
