//! Test harness: a real `comet-broker --standalone` process on loopback with its own store
//! and ports, and a minimal blocking remoting client built on comet-proto frames.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use comet_proto::bytes::BytesMut;
use comet_proto::frame::{encode, FrameDecoder};
use comet_proto::headers::{PullMessageRequestHeader, SendMessageRequestHeaderV2};
use comet_proto::properties::{names, Properties};
use comet_proto::{Decoded, RemotingCommand, RequestCode};

/// A free loopback port (bound then released; the broker binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A temporary directory on the real file system (O_DIRECT needs one; tmpfs would not do),
/// removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let base = std::env::var_os("COMET_TEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(env!("CARGO_TARGET_TMPDIR")));
        let path = base.join(format!("{name}-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// How long a broker may take to open its ports.
pub const STARTUP_LIMIT: Duration = Duration::from_secs(60);

/// A running broker process; killed on drop.
pub struct Broker {
    pub child: Option<Child>,
    pub broker_addr: SocketAddr,
    pub namesrv_addr: SocketAddr,
    pub store: PathBuf,
    pub extra: Vec<String>,
}

impl Broker {
    /// Starts a standalone broker with `cores` shards and `extra` arguments.
    pub fn start(store: &Path, cores: usize, extra: &[&str]) -> Broker {
        let broker_port = free_port();
        let namesrv_port = free_port();
        let mut broker = Broker {
            child: None,
            broker_addr: format!("127.0.0.1:{broker_port}").parse().unwrap(),
            namesrv_addr: format!("127.0.0.1:{namesrv_port}").parse().unwrap(),
            store: store.to_path_buf(),
            extra: extra.iter().map(|s| s.to_string()).collect(),
        };
        let _ = cores;
        broker.spawn(cores);
        broker
    }

    fn spawn(&mut self, cores: usize) {
        let mut command = Command::new(env!("CARGO_BIN_EXE_comet-broker"));
        command
            .arg("--standalone")
            .arg("--no-pin")
            .args(["--cores", &cores.to_string()])
            .args(["--listen-port", &self.broker_addr.port().to_string()])
            .args(["--namesrv", &self.namesrv_addr.to_string()])
            .args(["--store", &self.store.display().to_string()])
            .args(["-o", "mappedFileSizeCommitLog=16777216"])
            .args(&self.extra)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("start comet-broker");
        // Generous: a loaded machine (parallel tests, other builds) can take a while to start
        // every shard; an early exit is reported at once instead of waiting it out.
        for addr in [self.broker_addr, self.namesrv_addr] {
            let deadline = Instant::now() + STARTUP_LIMIT;
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                if let Some(status) = child.try_wait().unwrap() {
                    panic!("comet-broker exited during start-up: {status}");
                }
                assert!(
                    Instant::now() < deadline,
                    "{addr} did not open within {STARTUP_LIMIT:?}"
                );
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.child = Some(child);
    }

    /// Restarts on the same store and ports after a stop or kill.
    pub fn restart(&mut self, cores: usize) {
        assert!(self.child.is_none(), "stop the broker first");
        self.spawn(cores);
    }

    /// SIGTERM and wait: a clean shutdown.
    pub fn stop(&mut self) -> std::process::ExitStatus {
        let mut child = self.child.take().expect("running");
        unsafe { libc::kill(child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(status) = child.try_wait().unwrap() {
                return status;
            }
            if Instant::now() > deadline {
                child.kill().unwrap();
                panic!("broker did not stop within 30 s of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: a crash.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("running");
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A client connected to the broker.
    pub fn client(&self) -> Client {
        Client::connect(self.broker_addr)
    }

    /// A client connected to the embedded name server.
    pub fn namesrv_client(&self) -> Client {
        Client::connect(self.namesrv_addr)
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

pub fn wait_for_port(addr: SocketAddr, limit: Duration) {
    let deadline = Instant::now() + limit;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{addr} did not open within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
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
