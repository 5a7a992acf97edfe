//! A slave whose shard count differs from its master's log count, on loopback: a name
//! server in this process, a master and a slave as broker processes. The slave hosts every
//! master log (log `l` on shard `l % shards`) once it learned the master's count, which its
//! first start records and a restart applies (see
//! `docs/architecture.md#slave-and-master-shard-counts`).

mod common;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{
    free_port, poll_until, wait_for_port, wait_for_port_closed, ChildGuard, LOOPBACK,
    TEST_COMMIT_LOG_FILE_BYTES,
};
use common::{create_topic, pull_request, send_request, send_request_with, Client, TempDir};

/// How long replication, registration and the metadata copy may take to show an effect.
const CONVERGE_LIMIT: Duration = Duration::from_secs(40);
/// Queues of the test topic: enough that every log of a 2-shard master holds some.
const QUEUES: i32 = 6;
const TOPIC: &str = "ReplHosted";

/// A broker process registered with the test's name server; killed on drop.
struct Node {
    guard: Option<ChildGuard>,
    store: PathBuf,
    addr: SocketAddr,
    namesrv: String,
    cores: usize,
    /// Role and HA settings, as `-o` pairs.
    options: Vec<String>,
    /// Where its standard error goes.
    log: PathBuf,
}

impl Node {
    fn start(dir: &Path, namesrv: &str, cores: usize, options: Vec<String>) -> Node {
        let mut node = Node {
            guard: None,
            store: dir.join("store"),
            addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            namesrv: namesrv.to_owned(),
            cores,
            options,
            log: dir.join("broker.log"),
        };
        node.spawn();
        node
    }

    fn spawn(&mut self) {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_comet-broker"));
        command
            .args(["--no-pin", "--cores", &self.cores.to_string()])
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
            .args(["-o", "haSendHeartbeatInterval=500"])
            // A build machine's disk may be past the default hard mark (90%) with compiler
            // output; these few messages need no such guard.
            .args(["-o", "diskSpaceWarningLevelRatio=99"])
            .args(
                self.options
                    .iter()
                    .flat_map(|option| ["-o", option.as_str()]),
            )
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::from(log));
        self.guard = Some(ChildGuard::spawn("a broker", &mut command));
        wait_for_port(self.addr, Duration::from_secs(60));
    }

    /// SIGTERM and wait for a clean exit.
    fn stop(&mut self) {
        let mut guard = self.guard.take().expect("running");
        let pid = libc::pid_t::try_from(guard.child().id()).unwrap();
        // SAFETY: kill(2) of a child this test spawned and has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = guard.wait_for_exit("a broker", Duration::from_secs(30));
        assert!(status.success(), "{status}: {}", self.log_text());
        wait_for_port_closed(self.addr, Duration::from_secs(15));
    }

    fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn master_options(ha_port: u16) -> Vec<String> {
    vec![
        "brokerRole=ASYNC_MASTER".to_owned(),
        "brokerId=0".to_owned(),
        format!("haListenPort={ha_port}"),
    ]
}

fn slave_options(master_ha_port: u16) -> Vec<String> {
    vec![
        "brokerRole=SLAVE".to_owned(),
        "brokerId=1".to_owned(),
        format!("haMasterAddress=127.0.0.1:{master_ha_port}"),
    ]
}

/// Sends `count` messages round robin over the queues, numbered from `first`.
fn send_messages(client: &mut Client, first: usize, count: usize) {
    for index in first..first + count {
        let queue = i32::try_from(index).unwrap() % QUEUES;
        let body = format!("message {index}");
        let response = client.call(send_request(TOPIC, queue, body.as_bytes(), None, None));
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            response.remark
        );
    }
}

/// Every message of `queue` a broker serves, from offset 0 on.
fn pull_queue(client: &mut Client, queue: i32) -> Vec<MessageExt> {
    pull_queue_of(client, TOPIC, queue)
}

/// Every message of `queue` of `topic` a broker serves, from offset 0 on.
fn pull_queue_of(client: &mut Client, topic: &str, queue: i32) -> Vec<MessageExt> {
    let mut messages = Vec::new();
    let mut offset = 0;
    loop {
        let response = client.call(pull_request("hosted_cg", topic, queue, offset, 32, 0));
        if response.response_code() != ResponseCode::SUCCESS {
            return messages;
        }
        let batch = decode_records(response.body.clone());
        let Some(last) = batch.last() else {
            return messages;
        };
        offset = last.queue_offset + 1;
        messages.extend(batch);
    }
}

/// What identifies a stored message: queue offset, physical offset, msgId, body.
type Stored = (i64, i64, String, Vec<u8>);

fn stored(messages: &[MessageExt]) -> Vec<Stored> {
    messages
        .iter()
        .map(|message| {
            (
                message.queue_offset,
                message.commit_log_offset,
                message.msg_id.clone(),
                message.body.to_vec(),
            )
        })
        .collect()
}

fn pull_topic(client: &mut Client) -> Vec<Vec<Stored>> {
    (0..QUEUES)
        .map(|queue| stored(&pull_queue(client, queue)))
        .collect()
}

/// The log id of a physical offset (bits 62..56).
fn log_of(physical: i64) -> i64 {
    physical >> 56
}

/// Waits until `slave` serves exactly what `master` does for every queue of the topic, and
/// checks that is `expected` messages, dense from offset 0 in every queue, in `logs` logs.
fn wait_for_same_queues(master: &mut Client, slave: &mut Client, expected: usize, logs: i64) {
    let on_master = pull_topic(master);
    let held: usize = on_master.iter().map(Vec::len).sum();
    assert_eq!(held, expected, "the master holds what was sent");
    let used: BTreeSet<i64> = on_master
        .iter()
        .flatten()
        .map(|(_, physical, _, _)| log_of(*physical))
        .collect();
    assert_eq!(
        used,
        (0..logs).collect(),
        "the topic's queues span every log"
    );
    let mut on_slave = Vec::new();
    let same = poll_until(CONVERGE_LIMIT, || {
        on_slave = pull_topic(slave);
        on_slave == on_master
    });
    for (queue, messages) in on_slave.iter().enumerate() {
        let offsets: Vec<i64> = messages.iter().map(|stored| stored.0).collect();
        let dense: Vec<i64> = (0..i64::try_from(offsets.len()).unwrap()).collect();
        assert_eq!(offsets, dense, "queue {queue}: no gap, no duplicate");
    }
    assert!(
        same,
        "the slave serves the master's queues: same offsets, physical offsets, ids, bodies"
    );
}

/// Every message of the topic viewed by its physical offset (VIEW_MESSAGE_BY_ID) is the
/// same record on both brokers; the messages lie in `logs_expected` logs.
fn assert_views_match(master: &mut Client, slave: &mut Client, logs_expected: usize) {
    let mut logs = BTreeSet::new();
    for messages in pull_topic(slave) {
        for (_, physical, msg_id, _) in messages {
            let header = comet_proto::headers::ViewMessageRequestHeader {
                offset: physical,
                topic: None,
                broker_name: None,
            };
            let view = || {
                RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID, 0).with_header(&header)
            };
            let on_master = master.call_ok(view());
            let on_slave = slave.call_ok(view());
            assert_eq!(on_slave.body, on_master.body, "{msg_id}");
            logs.insert(log_of(physical));
        }
    }
    assert_eq!(
        logs.len(),
        logs_expected,
        "messages of every log were viewed"
    );
}

/// QUERY_MESSAGE by unique key finds the first message of every queue on `client`, whose
/// queues lie in `logs_expected` logs.
fn assert_found_by_key(client: &mut Client, logs_expected: usize) {
    let mut logs = BTreeSet::new();
    for queue in 0..QUEUES {
        let first = pull_queue(client, queue).remove(0);
        let key = first.uniq_key().expect("a unique key").to_owned();
        let header = comet_proto::headers::QueryMessageRequestHeader {
            topic: TOPIC.into(),
            key: key.clone(),
            max_num: 32,
            begin_timestamp: 0,
            end_timestamp: i64::MAX,
            unique_key_query: Some(true),
            broker_name: None,
        };
        let response = client
            .call(RemotingCommand::request(RequestCode::QUERY_MESSAGE, 0).with_header(&header));
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "key {key}: {:?}",
            response.remark
        );
        let found = decode_records(response.body.clone());
        let offsets: Vec<i64> = found.iter().map(|m| m.commit_log_offset).collect();
        assert_eq!(offsets, vec![first.commit_log_offset], "key {key}");
        logs.insert(log_of(first.commit_log_offset));
    }
    assert_eq!(logs.len(), logs_expected, "keys of every log were queried");
}

fn topic_known(client: &mut Client) -> bool {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_ALL_TOPIC_CONFIG,
        0,
    ));
    response.response_code() == ResponseCode::SUCCESS
        && String::from_utf8_lossy(&response.body).contains(&format!("\"{TOPIC}\""))
}

/// The log ids GET_BROKER_HA_STATUS lists, and whether each is connected to its master.
fn ha_logs(client: &mut Client) -> Vec<(u64, bool)> {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_BROKER_HA_STATUS,
        0,
    ));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    body["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|log| {
            (
                log["logId"].as_u64().unwrap(),
                log["connected"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// A name server on a free loopback port, in this process.
fn start_namesrv(dir: &Path) -> comet_nameserver::NameServerThread {
    let config = comet_nameserver::NamesrvConfig {
        listen_port: free_port(),
        bind_address: "127.0.0.1".parse().unwrap(),
        kv_config_path: dir.join("kvConfig.json"),
        ..comet_nameserver::NamesrvConfig::default()
    };
    comet_nameserver::NameServerThread::spawn(config).unwrap()
}

/// Starts a slave of the master at `master_ha`, waits for its first start to record the
/// master's `logs` and ask for a restart, and restarts it.
fn start_slave(dir: &Path, namesrv: &str, cores: usize, master_ha: u16, logs: usize) -> Node {
    let mut slave = Node::start(dir, namesrv, cores, slave_options(master_ha));
    let recorded = slave.store.join("master-logs");
    let expected = format!("logs {logs}\n");
    let told = poll_until(CONVERGE_LIMIT, || {
        slave
            .log_text()
            .contains("hosts every master log after a restart")
            && std::fs::read_to_string(&recorded).is_ok_and(|text| text == expected)
    });
    assert!(told, "{}", slave.log_text());
    slave.stop();
    slave.spawn();
    slave
}

// Proves a 1-core slave of a 2-core master: its first start learns the master's two logs,
// records them and says a restart hosts them; after the restart it holds every message of
// both logs with the master's queue offsets, physical offsets and msgIds, serves pulls and
// views by offset for queues of both logs, follows new sends, and reports both logs. Then
// the slave is promoted by hand (restarted as a 1-core master): it serves every message it
// held, the log it hosted included, and appends new sends after them.
#[test]
fn a_one_core_slave_hosts_both_logs_of_a_two_core_master() {
    let namesrv_dir = TempDir::new("repl-hosted-ns");
    let namesrv = start_namesrv(namesrv_dir.path());
    let namesrv_addr = namesrv.addr().to_string();
    let master_dir = TempDir::new("repl-hosted-master");
    let slave_dir = TempDir::new("repl-hosted-slave");
    let master_ha = free_port();
    let mut master = Node::start(
        master_dir.path(),
        &namesrv_addr,
        2,
        master_options(master_ha),
    );
    let mut master_client = master.client();
    create_topic(&mut master_client, TOPIC, QUEUES);
    send_messages(&mut master_client, 0, 30);

    let mut slave = start_slave(slave_dir.path(), &namesrv_addr, 1, master_ha, 2);
    let mut slave_client = slave.client();
    let known = poll_until(CONVERGE_LIMIT, || topic_known(&mut slave_client));
    assert!(known, "the slave copies the topic");
    wait_for_same_queues(&mut master_client, &mut slave_client, 30, 2);
    assert_views_match(&mut master_client, &mut slave_client, 2);
    assert_found_by_key(&mut slave_client, 2);
    send_messages(&mut master_client, 30, 18);
    wait_for_same_queues(&mut master_client, &mut slave_client, 48, 2);
    let connected = poll_until(CONVERGE_LIMIT, || {
        ha_logs(&mut slave_client) == vec![(0, true), (1, true)]
    });
    assert!(connected, "{:?}", ha_logs(&mut slave_client));

    // Promotion by hand: the master goes, the slave comes back as a 1-core master.
    let held = pull_topic(&mut slave_client);
    drop(master_client);
    master.stop();
    drop(slave_client);
    slave.stop();
    slave.options = master_options(free_port());
    slave.spawn();
    let mut promoted = slave.client();
    assert_eq!(
        pull_topic(&mut promoted),
        held,
        "the promoted slave serves what it held"
    );
    send_messages(&mut promoted, 48, QUEUES as usize);
    let after = pull_topic(&mut promoted);
    for (queue, (before, now)) in held.iter().zip(&after).enumerate() {
        assert_eq!(
            &now[..before.len()],
            &before[..],
            "queue {queue} keeps its messages"
        );
        let added: Vec<i64> = now[before.len()..].iter().map(|stored| stored.0).collect();
        assert_eq!(
            added,
            vec![i64::try_from(before.len()).unwrap()],
            "queue {queue}"
        );
    }
    drop(promoted);
    drop(slave);
    drop(master);
    namesrv.stop();
}

// Proves the reverse case, a 2-core slave of a 1-core master: after the restart its first
// start asks for, shard 0 hosts the master's only log and shard 1 hosts none; the slave
// serves every message with the master's offsets and reports the one log, connected.
#[test]
fn a_two_core_slave_of_a_one_core_master_leaves_a_shard_idle() {
    let namesrv_dir = TempDir::new("repl-idle-ns");
    let namesrv = start_namesrv(namesrv_dir.path());
    let namesrv_addr = namesrv.addr().to_string();
    let master_dir = TempDir::new("repl-idle-master");
    let slave_dir = TempDir::new("repl-idle-slave");
    let master_ha = free_port();
    let master = Node::start(
        master_dir.path(),
        &namesrv_addr,
        1,
        master_options(master_ha),
    );
    let mut master_client = master.client();
    create_topic(&mut master_client, TOPIC, QUEUES);
    send_messages(&mut master_client, 0, 24);
    let slave = start_slave(slave_dir.path(), &namesrv_addr, 2, master_ha, 1);
    let mut slave_client = slave.client();
    let known = poll_until(CONVERGE_LIMIT, || topic_known(&mut slave_client));
    assert!(known, "the slave copies the topic");
    wait_for_same_queues(&mut master_client, &mut slave_client, 24, 1);
    assert_views_match(&mut master_client, &mut slave_client, 1);
    send_messages(&mut master_client, 24, 12);
    wait_for_same_queues(&mut master_client, &mut slave_client, 36, 1);
    let connected = poll_until(CONVERGE_LIMIT, || {
        ha_logs(&mut slave_client) == vec![(0, true)]
    });
    assert!(connected, "{:?}", ha_logs(&mut slave_client));
    drop(slave_client);
    drop(slave);
    drop(master_client);
    drop(master);
    namesrv.stop();
}

/// Each log's written end as GET_BROKER_HA_STATUS reports it.
fn written_ends(client: &mut Client) -> Vec<(u64, u64)> {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_BROKER_HA_STATUS,
        0,
    ));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    body["logs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|log| {
            (
                log["logId"].as_u64().unwrap(),
                log["writtenOffset"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// How many times each message of `topic` is in its queues (by UNIQ_KEY).
fn deliveries(client: &mut Client, topic: &str) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for queue in 0..QUEUES {
        for message in pull_queue_of(client, topic, queue) {
            let key = message.uniq_key().unwrap_or_default().to_owned();
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    counts
}

/// Sends a message to `topic` due `delay_ms` after its arrival; returns its UNIQ_KEY.
fn send_timed(client: &mut Client, topic: &str, queue: i32, delay_ms: i64) -> String {
    let body = format!("due in {delay_ms} ms");
    send_delayed(
        client,
        topic,
        queue,
        (names::TIMER_DELAY_MS, delay_ms),
        &body,
    )
}

/// Sends `body` to `topic` with the delay property `delay` (a timer or a delay level);
/// returns its UNIQ_KEY.
fn send_delayed(
    client: &mut Client,
    topic: &str,
    queue: i32,
    delay: (&str, i64),
    body: &str,
) -> String {
    let mut properties = Properties::new();
    properties.insert(delay.0, delay.1.to_string());
    properties.insert(names::WAIT, "true");
    let response = client.call(send_request_with(
        topic,
        queue,
        body.as_bytes(),
        &properties,
    ));
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    use comet_proto::CommandHeader;
    let header =
        comet_proto::headers::SendMessageResponseHeader::from_ext_fields(&response.ext_fields)
            .unwrap();
    header.transaction_id.expect("the unique key is echoed")
}

// Proves the timer wheel's progress survives a failover to a slave with fewer cores: timed
// messages the old master delivered are not delivered again by the promoted slave, and
// those still pending at the failover are delivered by it, each exactly once. The slave
// holds no wheel of its own (its wheel is derived from the log when it is promoted).
#[test]
fn a_promoted_slave_delivers_pending_timers_once_and_delivered_ones_never_again() {
    let namesrv_dir = TempDir::new("repl-timer-ns");
    let namesrv = start_namesrv(namesrv_dir.path());
    let namesrv_addr = namesrv.addr().to_string();
    let master_dir = TempDir::new("repl-timer-master");
    let slave_dir = TempDir::new("repl-timer-slave");
    let master_ha = free_port();
    let mut master = Node::start(
        master_dir.path(),
        &namesrv_addr,
        2,
        master_options(master_ha),
    );
    let mut master_client = master.client();
    let real = "ReplTimerReal";
    create_topic(&mut master_client, real, QUEUES);
    let mut slave = start_slave(slave_dir.path(), &namesrv_addr, 1, master_ha, 2);
    let early: Vec<String> = (0..QUEUES)
        .map(|queue| send_timed(&mut master_client, real, queue, 300))
        .collect();
    let late: Vec<String> = (0..QUEUES)
        .map(|queue| send_timed(&mut master_client, real, queue, 8_000))
        .collect();
    let delivered = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut master_client, real).len() == early.len()
    });
    assert!(delivered, "the master delivers the early timers");
    let mut slave_client = slave.client();
    let caught_up = poll_until(CONVERGE_LIMIT, || {
        written_ends(&mut slave_client) == written_ends(&mut master_client)
    });
    assert!(caught_up, "the slave holds the master's logs");
    // The slave serves the topic once its metadata copy brought it over.
    let copied = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut slave_client, real).len() == early.len()
    });
    assert!(copied, "{:?}", deliveries(&mut slave_client, real));

    drop(master_client);
    master.stop();
    drop(slave_client);
    slave.stop();
    slave.options = master_options(free_port());
    slave.spawn();
    let mut promoted = slave.client();
    let all_there = poll_until(CONVERGE_LIMIT, || {
        let counts = deliveries(&mut promoted, real);
        late.iter().all(|key| counts.contains_key(key))
    });
    let counts = deliveries(&mut promoted, real);
    assert!(all_there, "the pending timers are delivered: {counts:?}");
    for key in early.iter().chain(&late) {
        assert_eq!(
            counts.get(key),
            Some(&1),
            "{key} delivered once: {counts:?}"
        );
    }
    assert_eq!(counts.len(), early.len() + late.len(), "{counts:?}");
    drop(promoted);
    drop(slave);
    drop(master);
    namesrv.stop();
}

const TX_GROUP: &str = "hosted_tx_pg";
const TX_TOPIC: &str = "ReplTxReal";
/// sysFlag of a transaction's half message.
const PREPARED: i32 = 0x4;
/// END_TRANSACTION's commit decision.
const COMMIT: i32 = 8;

/// A half message as its producer knows it after the send.
struct Half {
    unique_key: String,
    queue_offset: i64,
    commit_log_offset: i64,
}

fn send_half(client: &mut Client, body: &str) -> Half {
    use comet_proto::CommandHeader;
    let mut properties = Properties::new();
    properties.insert(names::TRAN_MSG, "true");
    properties.insert(names::PGROUP, TX_GROUP);
    properties.insert(names::WAIT, "true");
    let header = comet_proto::headers::SendMessageRequestHeaderV2 {
        producer_group: TX_GROUP.into(),
        topic: TX_TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: 4,
        queue_id: 0,
        sys_flag: PREPARED,
        born_timestamp: 1_700_000_000_000,
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
    let response = client.call_ok(request);
    let header =
        comet_proto::headers::SendMessageResponseHeader::from_ext_fields(&response.ext_fields)
            .unwrap();
    Half {
        unique_key: header.transaction_id.unwrap(),
        queue_offset: header.queue_offset,
        commit_log_offset: comet_proto::message_id::decode_offset_msg_id(&header.msg_id)
            .unwrap()
            .commit_log_offset,
    }
}

/// END_TRANSACTION (one-way, as Java producers send it) committing `half`.
fn commit(client: &mut Client, half: &Half, from_check: bool) {
    let header = comet_proto::headers::EndTransactionRequestHeader {
        topic: Some(TX_TOPIC.into()),
        producer_group: TX_GROUP.into(),
        tran_state_table_offset: half.queue_offset,
        commit_log_offset: half.commit_log_offset,
        commit_or_rollback: COMMIT,
        from_transaction_check: Some(from_check),
        msg_id: half.unique_key.clone(),
        transaction_id: Some(half.unique_key.clone()),
        broker_name: None,
    };
    let mut request =
        RemotingCommand::request(RequestCode::END_TRANSACTION, 0).with_header(&header);
    request.set_oneway();
    client.send(request);
}

/// A producer connection of [`TX_GROUP`], registered by heartbeat, reading the broker's
/// check-backs.
struct Producer {
    client: Client,
    reader: std::net::TcpStream,
    buffer: comet_proto::bytes::BytesMut,
}

impl Producer {
    fn connect(node: &Node, client_id: &str) -> Producer {
        use comet_proto::body::{HeartbeatData, JsonBody, ProducerData};
        let mut client = node.client();
        let data = HeartbeatData {
            client_id: client_id.into(),
            producer_data_set: vec![ProducerData {
                group_name: TX_GROUP.into(),
            }],
            ..HeartbeatData::default()
        };
        let request = RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode());
        assert_eq!(client.call(request).response_code(), ResponseCode::SUCCESS);
        let reader = client.stream.try_clone().unwrap();
        Producer {
            client,
            reader,
            buffer: comet_proto::bytes::BytesMut::new(),
        }
    }

    /// The next CHECK_TRANSACTION_STATE within `limit`.
    fn next_check(&mut self, limit: Duration) -> Option<RemotingCommand> {
        use std::io::Read;
        let deadline = std::time::Instant::now() + limit;
        let decoder = comet_proto::frame::FrameDecoder::default();
        loop {
            while let Some(comet_proto::Decoded::Command(command)) =
                decoder.decode(&mut self.buffer).unwrap()
            {
                if command.request_code() == RequestCode::CHECK_TRANSACTION_STATE {
                    return Some(command);
                }
            }
            let left = deadline.checked_duration_since(std::time::Instant::now())?;
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

/// The bodies of the messages in queue 0 of the transaction topic.
fn committed_bodies(client: &mut Client) -> Vec<String> {
    pull_queue_of(client, TX_TOPIC, 0)
        .iter()
        .map(|message| String::from_utf8_lossy(&message.body).into_owned())
        .collect()
}

// Proves delay levels survive a failover to a slave with fewer cores: messages of level 1
// (1 s) the old master delivered are not delivered again by the promoted slave, and those
// of level 3 (10 s) still pending at the failover are delivered by it, each exactly once.
#[test]
fn a_promoted_slave_delivers_pending_delay_levels_once() {
    let namesrv_dir = TempDir::new("repl-delay-ns");
    let namesrv = start_namesrv(namesrv_dir.path());
    let namesrv_addr = namesrv.addr().to_string();
    let master_dir = TempDir::new("repl-delay-master");
    let slave_dir = TempDir::new("repl-delay-slave");
    let master_ha = free_port();
    let mut master = Node::start(
        master_dir.path(),
        &namesrv_addr,
        2,
        master_options(master_ha),
    );
    let mut master_client = master.client();
    let real = "ReplDelayReal";
    create_topic(&mut master_client, real, QUEUES);
    let mut slave = start_slave(slave_dir.path(), &namesrv_addr, 1, master_ha, 2);
    let early: Vec<String> = (0..QUEUES)
        .map(|queue| send_delayed(&mut master_client, real, queue, (names::DELAY, 1), "1 s"))
        .collect();
    let late: Vec<String> = (0..QUEUES)
        .map(|queue| send_delayed(&mut master_client, real, queue, (names::DELAY, 3), "10 s"))
        .collect();
    let delivered = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut master_client, real).len() == early.len()
    });
    assert!(delivered, "the master delivers level 1");
    let mut slave_client = slave.client();
    let caught_up = poll_until(CONVERGE_LIMIT, || {
        written_ends(&mut slave_client) == written_ends(&mut master_client)
    });
    assert!(caught_up, "the slave holds the master's logs");

    drop(master_client);
    master.stop();
    drop(slave_client);
    slave.stop();
    slave.options = master_options(free_port());
    slave.spawn();
    let mut promoted = slave.client();
    let all_there = poll_until(CONVERGE_LIMIT, || {
        let counts = deliveries(&mut promoted, real);
        late.iter().all(|key| counts.contains_key(key))
    });
    let counts = deliveries(&mut promoted, real);
    assert!(
        all_there,
        "the pending level-3 messages are delivered: {counts:?}"
    );
    for key in early.iter().chain(&late) {
        assert_eq!(
            counts.get(key),
            Some(&1),
            "{key} delivered once: {counts:?}"
        );
    }
    assert_eq!(counts.len(), early.len() + late.len(), "{counts:?}");
    drop(promoted);
    drop(slave);
    drop(master);
    namesrv.stop();
}

// Proves the delay levels' check at promotion covers every entry its old master may have
// delivered, beyond the one round a crash leaves in doubt: the slave registers with a name
// server of its own, so it never copies its master's delay cursors (the stalest copy
// possible), while its master delivers more than a round (2048 entries) of level 1. The
// promoted slave delivers none of them again.
#[test]
fn a_promoted_slave_with_stale_delay_cursors_delivers_nothing_twice() {
    const SENT: usize = 2100;
    let master_ns_dir = TempDir::new("repl-stale-ns-master");
    let slave_ns_dir = TempDir::new("repl-stale-ns-slave");
    let master_ns = start_namesrv(master_ns_dir.path());
    let slave_ns = start_namesrv(slave_ns_dir.path());
    let master_dir = TempDir::new("repl-stale-master");
    let slave_dir = TempDir::new("repl-stale-slave");
    let master_ha = free_port();
    let master_ns_addr = master_ns.addr().to_string();
    let mut master = Node::start(
        master_dir.path(),
        &master_ns_addr,
        2,
        master_options(master_ha),
    );
    let mut master_client = master.client();
    let real = "ReplStaleReal";
    create_topic(&mut master_client, real, 1);
    let slave_ns_addr = slave_ns.addr().to_string();
    let mut slave = start_slave(slave_dir.path(), &slave_ns_addr, 1, master_ha, 2);
    let mut properties = Properties::new();
    properties.insert(names::DELAY, "1");
    properties.insert(names::WAIT, "true");
    for chunk in (0..SENT).collect::<Vec<_>>().chunks(64) {
        for index in chunk {
            let body = format!("level 1 #{index}");
            master_client.send(send_request_with(real, 0, body.as_bytes(), &properties));
        }
        for _ in chunk {
            let response = master_client.receive();
            assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        }
    }
    let delivered = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut master_client, real).len() == SENT
    });
    assert!(delivered, "the master delivers level 1");
    let mut slave_client = slave.client();
    let caught_up = poll_until(CONVERGE_LIMIT, || {
        written_ends(&mut slave_client) == written_ends(&mut master_client)
    });
    assert!(caught_up, "the slave holds the master's logs");

    drop(master_client);
    master.stop();
    drop(slave_client);
    slave.stop();
    slave.options = master_options(free_port());
    slave.spawn();
    let mut promoted = slave.client();
    create_topic(&mut promoted, real, 1);
    // The promoted slave's delivery has run its first rounds once a message of the next
    // level 1 round, sent now, is delivered after everything in the schedule queue before it.
    let marker = send_delayed(
        &mut promoted,
        real,
        0,
        (names::DELAY, 1),
        "after the failover",
    );
    let marked = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut promoted, real).contains_key(&marker)
    });
    assert!(marked, "the promoted slave delivers level 1");
    let counts = deliveries(&mut promoted, real);
    let twice: Vec<&String> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(twice.is_empty(), "{} delivered twice", twice.len());
    assert_eq!(counts.len(), SENT + 1);
    drop(promoted);
    drop(slave);
    drop(master);
    master_ns.stop();
    slave_ns.stop();
}

// Proves transaction state survives a failover to a slave with fewer cores: a half message
// committed on the old master is neither checked back nor committed again by the promoted
// slave, and a half still pending at the failover is checked back on the producer's
// connection to the promoted slave, whose commit stores it once.
#[test]
fn a_promoted_slave_checks_back_the_pending_half_only() {
    let namesrv_dir = TempDir::new("repl-tx-ns");
    let namesrv = start_namesrv(namesrv_dir.path());
    let namesrv_addr = namesrv.addr().to_string();
    let master_dir = TempDir::new("repl-tx-master");
    let slave_dir = TempDir::new("repl-tx-slave");
    let master_ha = free_port();
    let mut options = master_options(master_ha);
    // The old master must not check the pending half back before the failover.
    options.push("transactionTimeOut=600000".to_owned());
    let mut master = Node::start(master_dir.path(), &namesrv_addr, 2, options);
    let mut master_client = master.client();
    create_topic(&mut master_client, TX_TOPIC, 1);
    let mut slave = start_slave(slave_dir.path(), &namesrv_addr, 1, master_ha, 2);
    let committed = send_half(&mut master_client, "committed before the failover");
    commit(&mut master_client, &committed, false);
    let pending = send_half(&mut master_client, "pending at the failover");
    let stored = poll_until(CONVERGE_LIMIT, || {
        committed_bodies(&mut master_client) == ["committed before the failover"]
    });
    assert!(stored, "{:?}", committed_bodies(&mut master_client));
    let mut slave_client = slave.client();
    let caught_up = poll_until(CONVERGE_LIMIT, || {
        written_ends(&mut slave_client) == written_ends(&mut master_client)
    });
    assert!(caught_up, "the slave holds the master's logs");
    let copied = poll_until(CONVERGE_LIMIT, || {
        committed_bodies(&mut slave_client) == ["committed before the failover"]
    });
    assert!(copied, "{:?}", committed_bodies(&mut slave_client));

    drop(master_client);
    master.stop();
    drop(slave_client);
    slave.stop();
    slave.options = master_options(free_port());
    slave
        .options
        .push("transactionCheckInterval=300".to_owned());
    slave.options.push("transactionTimeOut=1000".to_owned());
    slave.spawn();
    let mut producer = Producer::connect(&slave, "127.0.0.1@hosted-tx");
    let check = producer
        .next_check(CONVERGE_LIMIT)
        .expect("the pending half is checked back");
    let messages = decode_records(check.body.clone());
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body.as_ref(), b"pending at the failover");
    assert_eq!(messages[0].uniq_key(), Some(pending.unique_key.as_str()));
    let header = {
        use comet_proto::CommandHeader;
        comet_proto::headers::CheckTransactionStateRequestHeader::from_ext_fields(&check.ext_fields)
            .unwrap()
    };
    let checked = Half {
        unique_key: header.msg_id.clone().unwrap(),
        queue_offset: header.tran_state_table_offset,
        commit_log_offset: header.commit_log_offset,
    };
    commit(&mut producer.client, &checked, true);
    let mut reader = slave.client();
    let both = poll_until(CONVERGE_LIMIT, || committed_bodies(&mut reader).len() == 2);
    assert!(both, "{:?}", committed_bodies(&mut reader));
    // A further check would come within a few check intervals past the timeout.
    assert!(
        producer.next_check(Duration::from_millis(2500)).is_none(),
        "nothing is left to check"
    );
    assert_eq!(
        committed_bodies(&mut reader),
        ["committed before the failover", "pending at the failover"]
    );
    drop(reader);
    drop(producer);
    drop(slave);
    drop(master);
    namesrv.stop();
}
