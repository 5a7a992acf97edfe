//! Test support for Comet's end-to-end tests, one copy of each piece every test crate needs:
//! a real `comet-broker --standalone` process (embedded name server) on free loopback ports,
//! temporary store directories, free ports, waiting for a condition until a deadline, and
//! running a process to its exit with a time limit.
//!
//! The only Comet crate this crate depends on is the sans-I/O comet-replication (for
//! [`controller_sim`]), which itself depends on none, so any crate's tests may use it
//! (comet-store's too, which must not depend on the broker).
//!
//! The broker binary is `COMET_BROKER_BIN` when set, else the workspace's own build
//! `target/<profile>/comet-broker`, found from the running test executable
//! (`target/<profile>/deps/<test>-<hash>`). `cargo test --workspace` builds it; a test run
//! that cannot find it fails and says how to build it, it never skips.
//!
//! Invariants: every process started here is killed and reaped when its [`Broker`] or
//! [`ChildGuard`] drops; every [`TempDir`] is removed when it drops; only 127.0.0.1 is used:
//! brokers are started with `--bind-address 127.0.0.1`, so nothing they open listens on
//! another interface.

pub mod config_docs;
pub mod controller_sim;
pub mod crash_seed;
pub mod layers;
pub mod relay;
pub mod tls;

use std::io::Read;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// The one address tests use: brokers bind it (`bindAddress`), clients connect to it.
pub const LOOPBACK: Ipv4Addr = Ipv4Addr::LOCALHOST;

/// How long a broker may take to open its ports: generous, because a loaded machine
/// (parallel tests, other builds) can take a while to start every shard.
pub const STARTUP_LIMIT: Duration = Duration::from_secs(60);
/// Starts of a broker process a test makes before it gives up (see [`wait_for_ports`]).
pub const STARTUP_ATTEMPTS: u32 = 2;

/// Waits up to [`STARTUP_LIMIT`] split over the attempts for every address in `addrs` to
/// accept connections from `child`. An early exit panics at once with its status; a child
/// that stays up without opening them is killed, and the error says which address.
pub fn wait_for_ports(child: &mut std::process::Child, addrs: &[SocketAddr]) -> Result<(), String> {
    let limit = STARTUP_LIMIT / STARTUP_ATTEMPTS;
    for addr in addrs {
        let mut exited = None;
        let open = poll_until(limit, || {
            // An early exit is reported at once instead of waiting the limit out.
            exited = child.try_wait().ok().flatten();
            exited.is_some() || TcpStream::connect_timeout(addr, Duration::from_millis(200)).is_ok()
        });
        if let Some(status) = exited {
            panic!("comet-broker exited during start-up: {status}");
        }
        if !open {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{addr} did not open within {limit:?}"));
        }
    }
    Ok(())
}

/// How long a broker may take to exit after SIGTERM before it is killed.
pub const STOP_LIMIT: Duration = Duration::from_secs(30);

/// Commit-log file size the test brokers use, small so a temporary store stays small.
pub const TEST_COMMIT_LOG_FILE_BYTES: u64 = 16 * 1024 * 1024;

/// How often the waiting helpers look at their condition again.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `condition` every [`POLL_INTERVAL`] until it holds or `limit` has passed; whether it
/// held. It is always looked at once at or after the deadline, so a slow machine's last poll
/// still counts.
pub fn poll_until(limit: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        let last = Instant::now() >= deadline;
        if condition() {
            return true;
        }
        if last {
            return false;
        }
        std::thread::sleep(POLL_INTERVAL);
    }
}

/// Polls `condition` until it holds; panics naming `what` when `limit` passes first.
pub fn wait_until(what: &str, limit: Duration, condition: impl FnMut() -> bool) {
    assert!(
        poll_until(limit, condition),
        "timed out after {limit:?} waiting for {what}"
    );
}

/// Polls `probe` until it returns a value and returns it; panics naming `what` when `limit`
/// passes first.
pub fn wait_for<T>(what: &str, limit: Duration, mut probe: impl FnMut() -> Option<T>) -> T {
    let mut found = None;
    wait_until(what, limit, || {
        found = probe();
        found.is_some()
    });
    found.expect("wait_until returned, so the probe answered")
}

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
    /// A fresh, empty directory whose name starts with `name`, unique within the test run
    /// (process id and a per-process counter).
    pub fn new(name: &str) -> TempDir {
        static CREATED: AtomicU32 = AtomicU32::new(0);
        let base = std::env::var_os("COMET_TEST_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                profile_dir()
                    .parent()
                    .map(|target| target.join("tmp"))
                    .expect("target/<profile> has a parent")
            });
        let unique = CREATED.fetch_add(1, Ordering::Relaxed);
        let path = base.join(format!("{name}-{}-{unique}", std::process::id()));
        // A directory left by an earlier run whose process id came round again.
        let _ = std::fs::remove_dir_all(&path);
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
    wait_until(&format!("{addr} to accept connections"), limit, || {
        TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
    });
}

/// Waits until nothing accepts connections on `addr` any more. A killed broker's listener can
/// outlive the process for a moment (the kernel tears down its io_uring instance, which holds
/// the socket, asynchronously) and still complete handshakes; a restart probed before it is
/// gone would take that dying listener for the new broker.
pub fn wait_for_port_closed(addr: SocketAddr, limit: Duration) {
    wait_until(
        &format!("{addr} to stop accepting connections"),
        limit,
        || TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
    );
}

/// A child process that is killed and reaped when dropped, so a test that fails half-way
/// leaves no process running.
pub struct ChildGuard(Option<Child>);

impl ChildGuard {
    /// Starts `command`; panics naming `what` when it cannot start.
    pub fn spawn(what: &str, command: &mut Command) -> ChildGuard {
        match command.spawn() {
            Ok(child) => ChildGuard(Some(child)),
            Err(error) => panic!("start {what}: {error}"),
        }
    }

    /// The running process.
    pub fn child(&mut self) -> &mut Child {
        self.0
            .as_mut()
            .expect("the guard holds its child until dropped")
    }

    /// Waits for the process to exit on its own; kills it and panics naming `what` when it
    /// is still running after `limit`.
    pub fn wait_for_exit(&mut self, what: &str, limit: Duration) -> ExitStatus {
        let child = self.child();
        let mut status = None;
        let exited = poll_until(limit, || {
            status = child.try_wait().expect("poll a child process");
            status.is_some()
        });
        if !exited {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what} still running {limit:?} after it started");
        }
        status.expect("poll_until returned true, so the child exited")
    }

    /// SIGKILL now and reap: the process's status.
    pub fn kill(&mut self) -> ExitStatus {
        let child = self.child();
        let _ = child.kill();
        child.wait().expect("reap a killed child process")
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        if let Some(mut child) = self.0.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Runs `command` until it exits, which it must within `limit` (else it is killed and this
/// panics naming `what`); its status and whatever it wrote to the streams the command pipes
/// (`Stdio::piped()`; a stream not piped reads as empty). The pipes are drained while it
/// runs, so a chatty process cannot block on a full pipe.
pub fn run_to_exit(what: &str, command: &mut Command, limit: Duration) -> Output {
    let mut guard = ChildGuard::spawn(what, command);
    let drain = |stream: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut bytes = Vec::new();
            if let Some(mut stream) = stream {
                let _ = stream.read_to_end(&mut bytes);
            }
            bytes
        })
    };
    let child = guard.child();
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let status = guard.wait_for_exit(what, limit);
    Output {
        status,
        stdout: stdout.join().expect("the stdout reader"),
        stderr: stderr.join().expect("the stderr reader"),
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
    /// The port a master listens on for slaves (`haListenPort`), free like the others
    /// rather than the listen port + 1, which another process may hold.
    pub ha_port: u16,
    /// The store root.
    pub store: PathBuf,
    /// Shards (`--cores`).
    pub cores: usize,
    /// Extra command-line arguments (`-o key=value` settings and such). The broker applies
    /// `-o` settings after its named flags, so one here overrides a harness flag's key.
    pub extra: Vec<String>,
    /// The file its standard error is appended to; `None`: this process's standard error.
    pub stderr_log: Option<PathBuf>,
}

impl Broker {
    /// Starts the workspace's broker binary with `cores` shards, a store at `store` and
    /// `extra` arguments, on free ports; returns once both ports accept connections.
    pub fn start(store: &Path, cores: usize, extra: &[&str]) -> Broker {
        Broker::start_binary(&broker_binary(), store, cores, extra)
    }

    /// [`Broker::start`] with an explicit binary.
    pub fn start_binary(binary: &Path, store: &Path, cores: usize, extra: &[&str]) -> Broker {
        Broker::start_logging(binary, store, cores, extra, None)
    }

    /// [`Broker::start_binary`] with the broker's standard error appended to `stderr_log`
    /// (for tests that read its log lines).
    pub fn start_logging(
        binary: &Path,
        store: &Path,
        cores: usize,
        extra: &[&str],
        stderr_log: Option<&Path>,
    ) -> Broker {
        let mut broker = Broker {
            child: None,
            binary: binary.to_path_buf(),
            broker_addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            namesrv_addr: SocketAddr::new(LOOPBACK.into(), free_port()),
            ha_port: free_port(),
            store: store.to_path_buf(),
            cores,
            extra: extra.iter().map(|arg| arg.to_string()).collect(),
            stderr_log: stderr_log.map(Path::to_path_buf),
        };
        broker.spawn();
        broker
    }

    /// The name server address as clients take it (`127.0.0.1:<port>`).
    pub fn namesrv(&self) -> String {
        self.namesrv_addr.to_string()
    }

    fn spawn(&mut self) {
        let stderr = match &self.stderr_log {
            Some(path) => Stdio::from(
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .expect("open the broker's log file"),
            ),
            None => Stdio::inherit(),
        };
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
            .args(["-o", &format!("haListenPort={}", self.ha_port)])
            .args(&self.extra)
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(stderr);
        // A start that stalls (a known, rare hang of a shard's first turns under load, see
        // docs/operations.md#start-up-stalls) is killed and started once more, loudly.
        for attempt in 1..=STARTUP_ATTEMPTS {
            let mut child = command.spawn().expect("start comet-broker");
            match wait_for_ports(&mut child, &[self.broker_addr, self.namesrv_addr]) {
                Ok(()) => {
                    self.child = Some(child);
                    return;
                }
                Err(what) if attempt < STARTUP_ATTEMPTS => {
                    eprintln!("comet-broker start {attempt} stalled ({what}): starting it again");
                }
                Err(what) => panic!("comet-broker did not start: {what}"),
            }
        }
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
        let mut status = None;
        let stopped = poll_until(STOP_LIMIT, || {
            status = child.try_wait().expect("poll the broker");
            status.is_some()
        });
        if !stopped {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the broker did not stop within {STOP_LIMIT:?} of SIGTERM");
        }
        self.wait_for_ports_closed();
        status.expect("poll_until returned true, so the broker exited")
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

#[cfg(test)]
mod tests {
    use super::*;

    // Proves poll_until waits for a condition that comes true, and gives up after the limit
    // (looking at least once at the deadline) on one that never does.
    #[test]
    fn poll_until_waits_then_gives_up() {
        let mut calls = 0;
        assert!(poll_until(Duration::from_secs(5), || {
            calls += 1;
            calls == 3
        }));
        let started = Instant::now();
        let mut looks = 0;
        assert!(!poll_until(Duration::from_millis(100), || {
            looks += 1;
            false
        }));
        assert!(started.elapsed() >= Duration::from_millis(100));
        assert!(looks >= 2, "looked {looks} times");
        assert_eq!(wait_for("a value", Duration::from_secs(1), || Some(7)), 7);
    }

    // Proves run_to_exit returns the status and both piped streams, and kills a process that
    // outlives its limit (the panic names it).
    #[test]
    fn run_to_exit_captures_and_bounds() {
        let mut command = Command::new("sh");
        command
            .args(["-c", "echo out; echo err >&2; exit 3"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let output = run_to_exit("sh", &mut command, Duration::from_secs(30));
        assert_eq!(output.status.code(), Some(3));
        assert_eq!(output.stdout, b"out\n");
        assert_eq!(output.stderr, b"err\n");
        let started = Instant::now();
        let outcome = std::panic::catch_unwind(|| {
            let mut sleeper = Command::new("sleep");
            sleeper.arg("30");
            run_to_exit("the sleeper", &mut sleeper, Duration::from_millis(200))
        });
        let message = outcome.expect_err("a process past its limit fails the caller");
        let text = message
            .downcast_ref::<String>()
            .cloned()
            .unwrap_or_default();
        assert!(text.contains("the sleeper still running"), "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "it was killed, not awaited"
        );
    }
}
