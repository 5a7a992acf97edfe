//! The processes: three comet-nameserver members with the controller (a Raft group) in the
//! root namespace, and two comet-broker processes of one broker set in controller mode, each
//! in its own network namespace. Every process is killed when its [`Process`] drops, and
//! also when this program dies (parent-death signal), so no run leaves one behind.

use std::fs::{File, OpenOptions};
use std::net::{SocketAddr, TcpListener};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::net::{Network, NAMESRV_ADDR};
use crate::{wire, ChaosError};

/// The broker set's name.
pub const BROKER_NAME: &str = "chaos-a";
/// The cluster's name.
pub const CLUSTER: &str = "ChaosCluster";
/// The default `controllerHeartBeatTimeoutMills` of a run: the controller counts a broker
/// gone after this much silence; a master's write lease is 70% of it.
pub const HEARTBEAT_TIMEOUT_MS: u64 = 3_000;
/// The port each broker listens on inside its namespace.
pub const BROKER_PORT: u16 = 10_911;
/// How long a process may take to open its port.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);

/// A child process killed and reaped on drop.
pub struct Process {
    child: Child,
    /// Whether it was stopped with SIGSTOP and not resumed yet.
    frozen: bool,
}

impl Process {
    fn spawn(what: &str, command: &mut Command) -> Result<Process, ChaosError> {
        // SAFETY: the closure runs in the child between fork and exec and only calls
        // prctl(2), which is async-signal-safe. It asks the kernel to SIGKILL the child when
        // this process dies, so an interrupted run leaves no broker or name server behind.
        unsafe {
            command.pre_exec(|| {
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().map_err(|source| ChaosError::Io {
            what: "starting a process",
            path: PathBuf::from(what),
            source,
        })?;
        Ok(Process {
            child,
            frozen: false,
        })
    }

    /// Sends `signal` (SIGSTOP, SIGCONT, SIGKILL).
    pub fn signal(&mut self, signal: libc::c_int) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill(2) of our own child, not yet reaped (reaping happens on drop).
            unsafe { libc::kill(pid, signal) };
        }
        if signal == libc::SIGSTOP {
            self.frozen = true;
        } else if signal == libc::SIGCONT {
            self.frozen = false;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Waits until `addr` accepts a connection; whether it did within `limit`.
fn wait_for_port(addr: SocketAddr, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

/// A free port on the name servers' address.
fn free_port() -> Result<u16, ChaosError> {
    TcpListener::bind((NAMESRV_ADDR, 0))
        .and_then(|listener| listener.local_addr())
        .map(|addr| addr.port())
        .map_err(|source| ChaosError::Io {
            what: "finding a free port",
            path: PathBuf::from(NAMESRV_ADDR.to_string()),
            source,
        })
}

fn log_file(path: &Path) -> Result<File, ChaosError> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|source| ChaosError::Io {
            what: "opening a log",
            path: path.to_path_buf(),
            source,
        })
}

/// One name server with the controller inside.
pub struct Member {
    /// Its id in `controllerDLegerPeers` (`n0`).
    pub id: String,
    /// Its name server address (clients and brokers).
    pub namesrv: SocketAddr,
    /// Its controller address.
    pub controller: SocketAddr,
    dir: PathBuf,
    process: Option<Process>,
}

/// One broker of the set.
pub struct Broker {
    /// Its number (and its namespace's).
    pub index: usize,
    /// Its address, inside its namespace, reachable from the root namespace.
    pub addr: SocketAddr,
    namespace: String,
    dir: PathBuf,
    process: Option<Process>,
}

/// Where the binaries are and where processes keep their stores and logs.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The directory holding comet-broker and comet-nameserver.
    pub bin_dir: PathBuf,
    /// Stores and logs (a real file system: the store uses O_DIRECT).
    pub work_dir: PathBuf,
    /// The brokers' `controllerHeartBeatTimeoutMills` (their lease is 70% of it).
    pub controller_timeout_ms: u64,
}

/// The whole cluster; its processes die when it drops.
pub struct Cluster {
    /// The controller group.
    pub members: Vec<Member>,
    /// The broker set.
    pub brokers: Vec<Broker>,
    layout: Layout,
}

impl Cluster {
    /// Writes the configurations and starts three members and two brokers in `network`'s
    /// namespaces.
    pub fn start(layout: Layout, network: &Network) -> Result<Cluster, ChaosError> {
        for binary in ["comet-broker", "comet-nameserver"] {
            if !layout.bin_dir.join(binary).is_file() {
                return Err(ChaosError::Prerequisite(format!(
                    "{binary} is not in {} (build it: cargo build -p comet-broker \
                     -p comet-nameserver, or pass --bin-dir)",
                    layout.bin_dir.display()
                )));
            }
        }
        let mut members = Vec::new();
        for index in 0..3 {
            let namesrv = SocketAddr::new(NAMESRV_ADDR.into(), free_port()?);
            let controller = SocketAddr::new(NAMESRV_ADDR.into(), free_port()?);
            members.push(Member {
                id: format!("n{index}"),
                namesrv,
                controller,
                dir: layout.work_dir.join(format!("n{index}")),
                process: None,
            });
        }
        let peers = members
            .iter()
            .map(|member| format!("{}-{}", member.id, member.controller))
            .collect::<Vec<_>>()
            .join(";");
        for member in &members {
            create_dir(&member.dir)?;
            let config = format!(
                "listenPort={}\nbindAddress={NAMESRV_ADDR}\nkvConfigPath={}\n\
                 enableControllerInNamesrv=true\ncontrollerDLegerGroup=chaos\n\
                 controllerDLegerPeers={peers}\ncontrollerDLegerSelfId={}\n\
                 controllerStorePath={}\nscanNotActiveBrokerInterval=1000\n\
                 notifyBrokerRoleChanged=true\n",
                member.namesrv.port(),
                member.dir.join("kvConfig.json").display(),
                member.id,
                member.dir.join("store").display(),
            );
            let path = member.dir.join("namesrv.properties");
            std::fs::write(&path, config).map_err(|source| ChaosError::Io {
                what: "writing a name server config",
                path,
                source,
            })?;
        }
        let brokers = network
            .namespaces
            .iter()
            .enumerate()
            .map(|(index, ns)| Broker {
                index,
                addr: SocketAddr::new(ns.addr.into(), BROKER_PORT),
                namespace: ns.name.clone(),
                dir: layout.work_dir.join(format!("broker{index}")),
                process: None,
            })
            .collect();
        let mut cluster = Cluster {
            members,
            brokers,
            layout,
        };
        for index in 0..cluster.members.len() {
            cluster.start_member(index)?;
        }
        for index in 0..cluster.brokers.len() {
            cluster.start_broker(index)?;
        }
        Ok(cluster)
    }

    /// The name servers, `;`-separated, as clients and brokers take them.
    pub fn namesrv_list(&self) -> String {
        self.members
            .iter()
            .map(|member| member.namesrv.to_string())
            .collect::<Vec<_>>()
            .join(";")
    }

    fn controller_list(&self) -> String {
        self.members
            .iter()
            .map(|member| member.controller.to_string())
            .collect::<Vec<_>>()
            .join(";")
    }

    /// Starts member `index` (again) on its store.
    pub fn start_member(&mut self, index: usize) -> Result<(), ChaosError> {
        let member = &mut self.members[index];
        let binary = self.layout.bin_dir.join("comet-nameserver");
        let mut command = Command::new(&binary);
        command
            .arg("-c")
            .arg(member.dir.join("namesrv.properties"))
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log_file(&member.dir.join("namesrv.log"))?);
        member.process = Some(Process::spawn(&member.id, &mut command)?);
        if !wait_for_port(member.controller, STARTUP_LIMIT) {
            return Err(ChaosError::Timeout(format!(
                "name server {} to open {}",
                member.id, member.controller
            )));
        }
        Ok(())
    }

    /// SIGKILLs member `index` and reaps it.
    pub fn kill_member(&mut self, index: usize) {
        self.members[index].process = None;
    }

    /// Starts broker `index` (again) on its store, inside its namespace.
    pub fn start_broker(&mut self, index: usize) -> Result<(), ChaosError> {
        let (namesrv, controllers) = (self.namesrv_list(), self.controller_list());
        let broker = &mut self.brokers[index];
        create_dir(&broker.dir)?;
        let ip = broker.addr.ip().to_string();
        let options = [
            "enableControllerMode=true".to_owned(),
            format!("controllerAddr={controllers}"),
            format!("brokerClusterName={CLUSTER}"),
            format!("brokerName={BROKER_NAME}"),
            "brokerRole=SYNC_MASTER".into(),
            format!(
                "controllerHeartBeatTimeoutMills={}",
                self.layout.controller_timeout_ms
            ),
            "brokerHeartbeatInterval=300".into(),
            "syncBrokerMetadataPeriod=500".into(),
            "checkSyncStateSetPeriod=500".into(),
            "syncControllerMetadataPeriod=2000".into(),
            "haHousekeepingInterval=3000".into(),
            "haSendHeartbeatInterval=500".into(),
            "syncFlushTimeout=2000".into(),
            // Small commit-log files keep a run's stores small.
            format!("mappedFileSizeCommitLog={}", 16 * 1024 * 1024),
            // A run stores a few MiB; a machine whose disk other work has filled past the
            // default 90% must not turn every round into refused sends.
            "diskSpaceWarningLevelRatio=98".into(),
        ];
        let mut command = Command::new("ip");
        command
            .args(["netns", "exec", &broker.namespace])
            .arg(self.layout.bin_dir.join("comet-broker"))
            .args(["--no-pin", "--cores", "2"])
            .args(["--bind-address", &ip, "--broker-ip", &ip])
            .args(["--listen-port", &BROKER_PORT.to_string()])
            .args(["--namesrv", &namesrv, "--flush", "SYNC_FLUSH"])
            .arg("--store")
            .arg(broker.dir.join("store"))
            .args(options.iter().flat_map(|option| ["-o", option.as_str()]))
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::null())
            .stderr(log_file(&broker.dir.join("broker.log"))?);
        // `ip netns exec` enters the namespace and execs the broker: the child's pid is the
        // broker's, so signals reach the broker itself.
        broker.process = Some(Process::spawn("comet-broker", &mut command)?);
        if !wait_for_port(broker.addr, STARTUP_LIMIT) {
            return Err(ChaosError::Timeout(format!(
                "broker {index} to open {}",
                broker.addr
            )));
        }
        Ok(())
    }

    /// SIGKILLs broker `index` and reaps it.
    pub fn kill_broker(&mut self, index: usize) {
        self.brokers[index].process = None;
    }

    /// Sends `signal` to broker `index` (SIGSTOP, SIGCONT).
    pub fn signal_broker(&mut self, index: usize, signal: libc::c_int) {
        if let Some(process) = self.brokers[index].process.as_mut() {
            process.signal(signal);
        }
    }

    /// Resumes every frozen broker (a failed round must not leave one stopped).
    pub fn resume_all(&mut self) {
        for broker in &mut self.brokers {
            if let Some(process) = broker.process.as_mut().filter(|process| process.frozen) {
                process.signal(libc::SIGCONT);
            }
        }
    }

    /// Restarts every broker and member that is not running.
    pub fn restart_dead(&mut self) -> Result<(), ChaosError> {
        for index in 0..self.members.len() {
            if self.members[index].process.is_none() {
                self.start_member(index)?;
            }
        }
        for index in 0..self.brokers.len() {
            if self.brokers[index].process.is_none() {
                self.start_broker(index)?;
            }
        }
        Ok(())
    }

    /// The member that says it leads the controller group now, if one does.
    pub fn controller_leader(&self) -> Option<usize> {
        self.members.iter().position(|member| {
            member.process.is_some() && wire::is_controller_leader(member.controller)
        })
    }

    /// The sync-state set's size as the leader answers it.
    pub fn sync_state_set_size(&self) -> Option<usize> {
        let leader = self.controller_leader()?;
        wire::sync_state_set(self.members[leader].controller, BROKER_NAME)
            .map(|set| set.sync_state_set.len())
    }

    /// The brokers that answer that they are master.
    pub fn masters(&self) -> Vec<usize> {
        (0..self.brokers.len())
            .filter(|index| wire::is_master(self.brokers[*index].addr))
            .collect()
    }

    /// Waits until exactly one broker is master, `topics` exist on it, a probe send to it
    /// is answered SEND_OK (its slave follows), and the controller counts both brokers in
    /// the sync-state set; returns the master.
    pub fn wait_for_master_with_slave(
        &self,
        topics: &[&str],
        queues: i32,
        limit: Duration,
    ) -> Result<usize, ChaosError> {
        let deadline = Instant::now() + limit;
        let mut probes = 0u64;
        let mut last_state = String::new();
        while Instant::now() < deadline {
            let masters = self.masters();
            if let [master] = masters[..] {
                let addr = self.brokers[master].addr;
                probes += 1;
                let created = topics
                    .iter()
                    .all(|topic| wire::create_topic(addr, topic, queues));
                let probed = created
                    && wire::probe_send(addr, crate::workload::PROBE_TOPIC, &format!("p{probes}"));
                let set = self.sync_state_set_size();
                if probed && set == Some(self.brokers.len()) {
                    return Ok(master);
                }
                last_state = format!(
                    "master {master}, topics created {created}, probe {probed}, \
                     sync-state set {set:?}"
                );
            } else {
                last_state = format!("masters {masters:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Err(ChaosError::Timeout(format!(
            "one master with an in-sync slave (last seen: {last_state})"
        )))
    }

    /// Writes every live broker's and member's thread stacks (gdb, when installed) next to
    /// its log, so a process stuck when a round failed shows where; the files written.
    pub fn dump_stacks(&self) -> Vec<PathBuf> {
        let members = self.members.iter().map(|m| (&m.process, &m.dir));
        let brokers = self.brokers.iter().map(|b| (&b.process, &b.dir));
        let mut written = Vec::new();
        for (process, dir) in members.chain(brokers) {
            let Some(process) = process else { continue };
            let pid = process.child.id().to_string();
            let Ok(output) = Command::new("gdb")
                .args(["-p", &pid, "-batch", "-ex", "thread apply all bt"])
                .output()
            else {
                continue;
            };
            let path = dir.join("stacks.txt");
            if std::fs::write(&path, &output.stdout).is_ok() {
                written.push(path);
            }
        }
        written
    }

    /// The brokers' ERROR lines (at most ten per broker), for a failure's evidence.
    pub fn log_errors(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for broker in &self.brokers {
            let text = std::fs::read_to_string(broker.dir.join("broker.log")).unwrap_or_default();
            lines.extend(
                text.lines()
                    .filter(|line| line.contains(" ERROR "))
                    .take(10)
                    .map(|line| format!("broker {}: {line}", broker.index)),
            );
        }
        lines
    }

    /// The logs' paths, for a failure's evidence.
    pub fn log_paths(&self) -> Vec<PathBuf> {
        let members = self.members.iter().map(|m| m.dir.join("namesrv.log"));
        let brokers = self.brokers.iter().map(|b| b.dir.join("broker.log"));
        members.chain(brokers).collect()
    }
}

fn create_dir(path: &Path) -> Result<(), ChaosError> {
    std::fs::create_dir_all(path).map_err(|source| ChaosError::Io {
        what: "creating a directory",
        path: path.to_path_buf(),
        source,
    })
}
