//! Master and slave processes for the replication tests: a broker that registers with a name
//! server it is given (a slave, or a broker whose role changes between starts), sends and
//! pulls by queue and offset, and the check that a slave serves exactly its master's queues.

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use comet_proto::message::decode_records;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{
    free_port, poll_until, wait_for_port_closed, wait_for_ports, ChildGuard, LOOPBACK,
    STARTUP_ATTEMPTS, TEST_COMMIT_LOG_FILE_BYTES,
};

use super::{pull_request, send_request, Broker, Client};

/// How long replication, registration and the metadata copy may take to show an effect.
pub const CONVERGE_LIMIT: Duration = Duration::from_secs(40);
/// Shards of every broker (master logs, slave receivers).
pub const SHARDS: usize = 2;
/// Queues of the test topics.
pub const QUEUES: i32 = 4;

/// A broker process that is not standalone: it registers with a name server it is given
/// (a slave, or a broker whose role changes between starts).
pub struct Node {
    /// The process, `None` while stopped.
    pub guard: Option<ChildGuard>,
    /// The store root.
    pub store: std::path::PathBuf,
    /// The broker's listen address.
    pub addr: SocketAddr,
    /// Its `haListenPort`: the one in `options`, else a free port of its own. Never left to
    /// the default (listen port + 1), which may belong to another process when the listen
    /// port was only known to be free.
    pub ha_port: u16,
    /// The name server it registers with.
    pub namesrv: String,
    /// Shards (`--cores`).
    pub cores: usize,
    /// Role and HA settings, as `-o` pairs.
    pub options: Vec<String>,
    /// Where its standard error goes (inherited when `None`); appended to, so the file of a
    /// restarted node keeps what its earlier runs said.
    pub log: Option<std::path::PathBuf>,
}

/// A standalone SYNC_MASTER whose sends wait at most `sync_flush_timeout_ms` for the slave
/// and which drops a slave silent for `housekeeping_ms` (a [`Node`] slave acks at least
/// every 500 ms).
pub fn start_sync_master(store: &Path, housekeeping_ms: u64, sync_flush_timeout_ms: u64) -> Broker {
    let housekeeping = format!("haHousekeepingInterval={housekeeping_ms}");
    let sync_flush = format!("syncFlushTimeout={sync_flush_timeout_ms}");
    let options = [
        "brokerRole=SYNC_MASTER",
        "haSendHeartbeatInterval=300",
        &housekeeping,
        &sync_flush,
    ];
    start_master(store, &options)
}

/// A standalone master with [`SHARDS`] shards flushing every send, with `options` as `-o`
/// pairs (its role among them).
pub fn start_master(store: &Path, options: &[&str]) -> Broker {
    let mut args = vec!["--flush", "SYNC_FLUSH"];
    for option in options {
        args.extend(["-o", option]);
    }
    Broker::start(store, SHARDS, &args)
}

/// The `-o` pairs of a slave.
pub fn slave_options() -> Vec<String> {
    vec!["brokerRole=SLAVE".into(), "brokerId=1".into()]
}

impl Node {
    pub fn start(store: &Path, namesrv: &str, options: Vec<String>) -> Node {
        Node::start_with(store, namesrv, SHARDS, options, None)
    }

    pub fn start_with(
        store: &Path,
        namesrv: &str,
        cores: usize,
        options: Vec<String>,
        log: Option<&Path>,
    ) -> Node {
        let configured_ha_port = options.iter().find_map(|option| {
            option
                .strip_prefix("haListenPort=")
                .map(|port| port.parse::<u16>().expect("haListenPort is a port"))
        });
        let ha_port = configured_ha_port.unwrap_or_else(free_port);
        let mut options = options;
        if configured_ha_port.is_none() {
            options.push(format!("haListenPort={}", ha_port));
        }
        let mut node = Node {
            guard: None,
            store: store.to_path_buf(),
            addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            ha_port,
            namesrv: namesrv.to_owned(),
            cores,
            options,
            log: log.map(Path::to_path_buf),
        };
        node.spawn();
        node
    }

    pub fn spawn(&mut self) {
        let stderr = match &self.log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .unwrap(),
            ),
            None => Stdio::inherit(),
        };
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
            .stderr(stderr);
        // A stalled start is killed and started once more, loudly (see `wait_for_ports`).
        for attempt in 1..=STARTUP_ATTEMPTS {
            let mut guard = ChildGuard::spawn("a broker", &mut command);
            match wait_for_ports(guard.child(), &[self.addr]) {
                Ok(()) => {
                    self.guard = Some(guard);
                    return;
                }
                Err(what) if attempt < STARTUP_ATTEMPTS => {
                    eprintln!("broker start {attempt} stalled ({what}): starting it again");
                }
                Err(what) => panic!("the broker did not start: {what}: {}", self.log_text()),
            }
        }
    }

    pub fn kill(&mut self) {
        if let Some(mut guard) = self.guard.take() {
            guard.kill();
        }
        wait_for_port_closed(self.addr, Duration::from_secs(15));
    }

    /// SIGTERM and wait for a clean exit.
    pub fn stop(&mut self) {
        let mut guard = self.guard.take().expect("running");
        let pid = libc::pid_t::try_from(guard.child().id()).unwrap();
        // SAFETY: kill(2) of a child this test spawned and has not reaped.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let status = guard.wait_for_exit("a broker", Duration::from_secs(30));
        assert!(status.success(), "{status}: {}", self.log_text());
        wait_for_port_closed(self.addr, Duration::from_secs(15));
    }

    pub fn client(&self) -> Client {
        Client::connect(self.addr)
    }

    /// Sends `signal` to the running broker (SIGSTOP freezes it, SIGCONT resumes it).
    pub fn signal(&mut self, signal: libc::c_int) {
        let guard = self.guard.as_mut().expect("running");
        let pid = libc::pid_t::try_from(guard.child().id()).unwrap();
        // SAFETY: kill(2) of a child this test spawned and has not reaped.
        unsafe { libc::kill(pid, signal) };
    }

    pub fn log_text(&self) -> String {
        self.log
            .as_ref()
            .and_then(|path| std::fs::read_to_string(path).ok())
            .unwrap_or_default()
    }
}

/// Sends `count` messages to `topic` round robin over its `queues` queues, numbered from
/// `first`; each must be stored.
pub fn send_messages(client: &mut Client, topic: &str, queues: i32, first: usize, count: usize) {
    for index in first..first + count {
        let queue = i32::try_from(index).unwrap() % queues;
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

/// VIEW_MESSAGE_BY_ID of the message at `physical` answers the same record on both brokers
/// (`msg_id` names it in a failure).
pub fn assert_same_view(master: &mut Client, slave: &mut Client, physical: i64, msg_id: &str) {
    let header = comet_proto::headers::ViewMessageRequestHeader {
        offset: physical,
        topic: None,
        broker_name: None,
    };
    let view = || RemotingCommand::request(RequestCode::VIEW_MESSAGE_BY_ID, 0).with_header(&header);
    let on_master = master.call_ok(view());
    let on_slave = slave.call_ok(view());
    assert_eq!(on_slave.body, on_master.body, "{msg_id}");
}

/// Sends `body` to `queue` of `topic`; the answer's code and queue offset (the message is
/// stored whenever the code is one of the send statuses).
pub fn send_one(client: &mut Client, topic: &str, queue: i32, body: &str) -> (ResponseCode, i64) {
    let response = client.call(send_request(topic, queue, body.as_bytes(), None, None));
    let offset = response
        .ext_fields
        .get("queueOffset")
        .and_then(|offset| offset.parse().ok())
        .unwrap_or(-1);
    (response.response_code(), offset)
}

/// The body of the message at `offset` of `queue`, if the broker serves it now.
pub fn body_at(client: &mut Client, topic: &str, queue: i32, offset: i64) -> Option<String> {
    let response = client.call(pull_request("repl_cg", topic, queue, offset, 1, 0));
    if response.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    decode_records(response.body.clone())
        .into_iter()
        .find(|message| message.queue_offset == offset)
        .map(|message| String::from_utf8_lossy(&message.body).into_owned())
}

/// The records of `queue` from `offset` on, as a broker serves them (raw record bytes).
pub fn pull_all(client: &mut Client, topic: &str, queue: i32) -> Vec<u8> {
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
pub fn pull_topic(client: &mut Client, topic: &str) -> Vec<Vec<u8>> {
    (0..QUEUES)
        .map(|queue| pull_all(client, topic, queue))
        .collect()
}

pub fn topic_known(client: &mut Client, topic: &str) -> bool {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_ALL_TOPIC_CONFIG,
        0,
    ));
    response.response_code() == ResponseCode::SUCCESS
        && String::from_utf8_lossy(&response.body).contains(&format!("\"{topic}\""))
}

/// Waits until the slave serves exactly the master's records of `topic`, and checks they
/// are what was sent: `expected` messages, offsets dense from 0, msgIds equal.
pub fn wait_for_same_queues(master: &mut Client, slave: &mut Client, topic: &str, expected: usize) {
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

/// What the slave serves of every queue of `topic`: queue -> offset -> body.
pub fn bodies_by_offset(
    client: &mut Client,
    topic: &str,
) -> std::collections::HashMap<(i32, i64), String> {
    let mut held = std::collections::HashMap::new();
    for (queue, records) in pull_topic(client, topic).into_iter().enumerate() {
        for message in decode_records(records.into()) {
            let body = String::from_utf8_lossy(&message.body).into_owned();
            held.insert((i32::try_from(queue).unwrap(), message.queue_offset), body);
        }
    }
    held
}

/// One SEND_OK answer: who sent it, where it went, what it held.
#[derive(Clone, Debug)]
pub struct Acknowledged {
    /// The sender's number.
    pub sender: usize,
    /// The queue it went to.
    pub queue: i32,
    /// Its queue offset.
    pub offset: i64,
    /// Its body.
    pub body: String,
}

/// Sends from its own comet-client producer until `stop` is set or its broker is gone;
/// returns the messages answered SEND_OK, in the order they were answered.
pub fn send_until_stopped(
    namesrv: String,
    topic: &'static str,
    label: String,
    sender: usize,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    acked: std::sync::Arc<std::sync::atomic::AtomicUsize>,
) -> Vec<Acknowledged> {
    use comet_client::{ClientConfig, Message, Producer, ProducerConfig, SendStatus};
    use std::sync::atomic::Ordering;
    let client = ClientConfig {
        instance_name: label.clone(),
        ..ClientConfig::with_namesrv(&namesrv)
    };
    let mut config = ProducerConfig::new("repl_kill_pg", client);
    config.retry_times_when_send_failed = 0;
    config.send_latency_fault_enable = false;
    let producer = Producer::new(config).unwrap();
    producer.start().unwrap();
    let mut answered = Vec::new();
    // A failover takes seconds: keep trying until stopped, unless nothing succeeds for
    // longer than any convergence the tests wait for.
    let mut failing_since: Option<std::time::Instant> = None;
    for index in 0.. {
        let failing_too_long = failing_since.is_some_and(|since| since.elapsed() > CONVERGE_LIMIT);
        if stop.load(Ordering::SeqCst) || failing_too_long {
            break;
        }
        let body = format!("{label} n{index}");
        match producer.send(Message::new(topic, body.clone().into_bytes())) {
            Ok(result) if result.status == SendStatus::SendOk => {
                answered.push(Acknowledged {
                    sender,
                    queue: result.queue.queue_id,
                    offset: result.queue_offset,
                    body,
                });
                acked.fetch_add(1, Ordering::SeqCst);
                failing_since = None;
            }
            Ok(_) => {}
            Err(_) => {
                failing_since.get_or_insert_with(std::time::Instant::now);
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    producer.shutdown();
    answered
}
