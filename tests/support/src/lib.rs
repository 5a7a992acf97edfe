//! Test support for Comet's end-to-end tests: a real `comet-broker --standalone` process
//! (embedded name server) on free loopback ports with a temporary store, stopped on drop.
//!
//! The broker binary is `COMET_BROKER_BIN` when set, else the workspace's own build
//! `target/<profile>/comet-broker`, found from the running test executable
//! (`target/<profile>/deps/<test>-<hash>`). `cargo test --workspace` builds it; a test run
//! that cannot find it fails and says how to build it, it never skips.
//!
//! Invariants: every process started here is killed and reaped when its [`Broker`] drops;
//! every [`TempDir`] is removed when it drops; only 127.0.0.1 is used: brokers are started
//! with `--bind-address 127.0.0.1`, so nothing they open listens on another interface.

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

/// The one address tests use: brokers bind it (`bindAddress`), clients connect to it.
pub const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// How long a broker may take to open its ports: generous, because a loaded machine
/// (parallel tests, other builds) can take a while to start every shard.
pub const STARTUP_LIMIT: Duration = Duration::from_secs(60);

/// How long a broker may take to exit after SIGTERM before it is killed.
pub const STOP_LIMIT: Duration = Duration::from_secs(30);

/// Commit-log file size the test brokers use, small so a temporary store stays small.
pub const TEST_COMMIT_LOG_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// A free loopback port (bound then released; the broker binds it right after).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .expect("bind an ephemeral loopback port")
}

/// `target/<profile>`: the directory holding the workspace's binaries, found from the
/// running test executable (`target/<profile>/deps/<test>-<hash>`, or
/// `target/<profile>/examples/<name>` for an example).
pub fn profile_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    exe.parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("the test executable lives in target/<profile>/deps")
}

/// The `comet-broker` binary to run: `COMET_BROKER_BIN`, else `target/<profile>/comet-broker`.
pub fn broker_binary() -> PathBuf {
    if let Some(path) = std::env::var_os("COMET_BROKER_BIN") {
        let binary = PathBuf::from(path);
        assert!(
            binary.is_file(),
            "COMET_BROKER_BIN={} is not a file",
            binary.display()
        );
        return binary;
    }
    let binary = profile_dir().join("comet-broker");
    assert!(
        binary.is_file(),
        "comet-broker not found at {}: build it first with `cargo build -p comet-broker` \
         (`cargo test --workspace` builds it too), or set COMET_BROKER_BIN",
        binary.display()
    );
    binary
}

/// A temporary directory on the real file system (the store's O_DIRECT needs one; tmpfs
/// would not do), removed on drop. It lives under `COMET_TEST_DIR`, else `target/tmp`.
pub struct TempDir(pub PathBuf);

impl TempDir {
    /// A fresh directory whose name starts with `name`.
    pub fn new(name: &str) -> TempDir {
        let base = std::env::var_os("COMET_TEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                profile_dir()
                    .parent()
                    .map(|target| target.join("tmp"))
                    .expect("target/<profile> has a parent")
            });
        let path = base.join(format!("{name}-{}-{}", std::process::id(), free_port()));
        std::fs::create_dir_all(&path).expect("create a temporary directory");
        TempDir(path)
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Waits until `addr` accepts connections; panics after `limit`.
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

/// Waits until nothing accepts connections on `addr` any more. A killed broker's listener can
/// outlive the process for a moment (the kernel tears down its io_uring instance, which holds
/// the socket, asynchronously) and still complete handshakes; a restart probed before it is
/// gone would take that dying listener for the new broker.
pub fn wait_for_port_closed(addr: SocketAddr, limit: Duration) {
    let deadline = Instant::now() + limit;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
        assert!(
            Instant::now() < deadline,
            "{addr} still accepts connections {limit:?} after its broker exited"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A running standalone broker process; killed on drop.
pub struct Broker {
    /// The process, `None` while stopped.
    pub child: Option<Child>,
    /// The binary it runs.
    pub binary: PathBuf,
    /// The broker's listen address.
    pub broker_addr: SocketAddr,
    /// The embedded name server's address.
    pub namesrv_addr: SocketAddr,
    /// The store root.
    pub store: PathBuf,
    /// Shards (`--cores`).
    pub cores: usize,
    /// Extra command-line arguments (`-o key=value` settings and such). The broker applies
    /// `-o` settings after its named flags, so one here overrides a harness flag's key.
    pub extra: Vec<String>,
}

impl Broker {
    /// Starts the workspace's broker binary with `cores` shards, a store at `store` and
    /// `extra` arguments, on free ports; returns once both ports accept connections.
    pub fn start(store: &Path, cores: usize, extra: &[&str]) -> Broker {
        Broker::start_binary(&broker_binary(), store, cores, extra)
    }

    /// [`Broker::start`] with an explicit binary.
    pub fn start_binary(binary: &Path, store: &Path, cores: usize, extra: &[&str]) -> Broker {
        let mut broker = Broker {
            child: None,
            binary: binary.to_path_buf(),
            broker_addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            namesrv_addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            store: store.to_path_buf(),
            cores,
            extra: extra.iter().map(|arg| arg.to_string()).collect(),
        };
        broker.spawn();
        broker
    }

    /// The name server address as clients take it (`127.0.0.1:<port>`).
    pub fn namesrv(&self) -> String {
        self.namesrv_addr.to_string()
    }

    fn spawn(&mut self) {
        let mut command = Command::new(&self.binary);
        command
            .arg("--standalone")
            .arg("--no-pin")
            .args(["--cores", &self.cores.to_string()])
            // Both listeners on loopback only (the broker's default is every interface).
            .args(["--bind-address", &LOOPBACK.to_string()])
            .args(["--listen-port", &self.broker_addr.port().to_string()])
            .args(["--namesrv", &self.namesrv_addr.to_string()])
            .args(["--store", &self.store.display().to_string()])
            .args([
                "-o",
                &format!("mappedFileSizeCommitLog={TEST_COMMIT_LOG_FILE_BYTES}"),
            ])
            .args(&self.extra)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit());
        let mut child = command.spawn().expect("start comet-broker");
        for addr in [self.broker_addr, self.namesrv_addr] {
            let deadline = Instant::now() + STARTUP_LIMIT;
            while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
                // An early exit is reported at once instead of waiting the limit out.
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("comet-broker exited during start-up: {status}");
                }
                if Instant::now() >= deadline {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{addr} did not open within {STARTUP_LIMIT:?}");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        self.child = Some(child);
    }

    /// Starts the broker again on the same store, ports and arguments after a stop or kill.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "stop the broker first");
        self.spawn();
    }

    /// SIGTERM and wait: a clean shutdown (killed after [`STOP_LIMIT`], then a panic).
    pub fn stop(&mut self) -> ExitStatus {
        let mut child = self.child.take().expect("the broker is running");
        let pid = libc::pid_t::try_from(child.id()).expect("a pid fits pid_t");
        // SAFETY: kill(2) with a pid this process spawned and has not reaped yet, so the
        // pid cannot name another process.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        let deadline = Instant::now() + STOP_LIMIT;
        loop {
            if let Some(status) = child.try_wait().expect("poll the broker") {
                self.wait_for_ports_closed();
                return status;
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("the broker did not stop within {STOP_LIMIT:?} of SIGTERM");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGKILL: a crash.
    pub fn kill(&mut self) {
        let mut child = self.child.take().expect("the broker is running");
        let _ = child.kill();
        let _ = child.wait();
        self.wait_for_ports_closed();
    }

    fn wait_for_ports_closed(&self) {
        for addr in [self.broker_addr, self.namesrv_addr] {
            wait_for_port_closed(addr, Duration::from_secs(15));
        }
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
