//! The thread that carries the controller session out: it sends the session's requests over
//! TCP, writes its identity files, feeds it the shards' figures and the controllers'
//! notifications, extends the master's write lease, and asks the runtime to restart its
//! shards when the decided role needs it.
//!
//! It is a plain thread, not a shard task: its requests wait on the network (one control
//! request at a time, as the session wants) and must never hold up a shard. It outlives the
//! runs of the shards, so a role change keeps one session and one lease.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode_to_bytes;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};
use comet_replication::controller::identity::{CONFIRMED_FILE_NAME, TEMP_FILE_NAME};
use comet_replication::controller::{
    AckPolicy, Action, BrokerControllerId, LogProgress, MasterView, Persist, Reply, RequestId,
    Session,
};
use comet_rt::clock::{monotonic_now, wall_clock_ms};

use super::wire::{to_command, to_reply};
use super::RunControl;
use crate::controller_role::{ControllerRole, Serving};

/// Longest the driver sleeps between looks at the stop request and the shards' figures.
pub const IDLE_WAIT_MAX: Duration = Duration::from_millis(50);

/// What the driver needs besides the session.
pub struct DriverConfig {
    /// Where the identity files live (the store root).
    pub identity_dir: PathBuf,
    /// How long after a request's send time an answer naming this broker master lets it
    /// acknowledge writes.
    pub lease: Duration,
    /// How many logs a slave must follow to count as in sync (the master's log count).
    pub log_count: usize,
    /// How long a control request may take.
    pub request_timeout: Duration,
    /// How long the shards may publish no figures before heartbeats stop.
    pub shards_silent_max: Duration,
    /// How replicated writes are acknowledged (`allAckInSyncStateSet` and friends).
    pub ack_policy: AckPolicy,
}

/// Runs the session until the process stops.
pub fn drive(
    mut session: Session,
    config: DriverConfig,
    role: Arc<ControllerRole>,
    notifications: Receiver<MasterView>,
    control: Arc<RunControl>,
) {
    let mut driver = Driver {
        config,
        role,
        control,
        links: HashMap::new(),
        reported: BTreeMap::new(),
        ha_lookup_at: None,
        silent_shards_reported: false,
    };
    let mut queue: VecDeque<Action> = session.poll(monotonic_now()).into();
    loop {
        if driver.control.process_stop_requested() {
            driver.control.stop_run();
            return;
        }
        while let Some(action) = queue.pop_front() {
            queue.extend(driver.execute(&mut session, action));
        }
        let now = monotonic_now();
        queue.extend(driver.report_figures(&mut session, now));
        // A proposal the figures caused is pending in the session already, so the
        // requirement published now waits for its members.
        driver
            .role
            .set_ack_requirement(session.ack_requirement(&driver.config.ack_policy));
        driver.role.end_driver_pass();
        driver.look_up_master_ha(now);
        if session.next_wakeup().is_some_and(|at| at <= now) {
            queue.extend(session.poll(now));
            continue;
        }
        let wait = session
            .next_wakeup()
            .map_or(IDLE_WAIT_MAX, |at| at.saturating_duration_since(now))
            .min(IDLE_WAIT_MAX);
        match notifications.recv_timeout(wait) {
            Ok(view) => {
                log::info!("the controller notified a role change: {view:?}");
                queue.extend(session.on_role_notification(monotonic_now(), view));
            }
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
    }
}

struct Driver {
    config: DriverConfig,
    role: Arc<ControllerRole>,
    control: Arc<RunControl>,
    links: HashMap<String, Link>,
    /// What the session was last told of each slave's logs.
    reported: BTreeMap<BrokerControllerId, Vec<bool>>,
    /// When to ask the master for its HA address (a slave that does not know it yet).
    ha_lookup_at: Option<Instant>,
    /// Whether silent shards were already reported (one error per silence).
    silent_shards_reported: bool,
}

impl Driver {
    fn execute(&mut self, session: &mut Session, action: Action) -> Vec<Action> {
        match action {
            Action::Send { id, to, request } => {
                let sent_at = monotonic_now();
                let frame = to_command(session.config(), &request, wall_clock_ms());
                let answer = self.call(&to, frame);
                let now = monotonic_now();
                let reply = match answer {
                    Ok(answer) => to_reply(&request, &answer),
                    Err(error) => {
                        log::debug!("controller {to}: {error}");
                        self.link_to_leader_lost(session, &to);
                        self.links.remove(&to);
                        return session.on_failure(now, id);
                    }
                };
                match reply {
                    Ok(reply) => self.answered(session, now, sent_at, id, reply),
                    Err(error) => {
                        log::warn!("controller {to} answered what cannot be read: {error}");
                        session.on_failure(now, id)
                    }
                }
            }
            Action::SendOneway { to, request } => {
                if !self.shards_alive() {
                    return Vec::new();
                }
                let mut frame = to_command(session.config(), &request, wall_clock_ms());
                frame.set_oneway();
                if let Err(error) = self.link(&to).and_then(|link| link.oneway(frame)) {
                    log::debug!("controller {to}: heartbeat not sent: {error}");
                    self.link_to_leader_lost(session, &to);
                    self.links.remove(&to);
                }
                Vec::new()
            }
            Action::Persist(persist) => match self.persist(&persist) {
                Ok(()) => {
                    if let Persist::WriteConfirmed(confirmed) = &persist {
                        self.role.set_broker_id(confirmed.broker_id);
                    }
                    session.on_persisted(monotonic_now())
                }
                Err(error) => {
                    log::error!("cannot write the broker's controller identity: {error}");
                    session.on_persist_failed(monotonic_now())
                }
            },
            Action::BecomeMaster { epoch, .. } => {
                if let Some(id) = session.broker_id() {
                    self.role.set_broker_id(id);
                }
                self.decide(Serving::Master { epoch });
                Vec::new()
            }
            Action::BecomeSlave {
                master_addr, epoch, ..
            } => {
                if let Some(id) = session.broker_id() {
                    self.role.set_broker_id(id);
                }
                self.role.revoke_lease();
                self.decide(Serving::Slave { master_addr, epoch });
                self.ha_lookup_at = Some(monotonic_now());
                Vec::new()
            }
            Action::SyncStateSetChanged(set) => {
                log::info!("the controller accepted the in-sync set {set:?}");
                Vec::new()
            }
        }
    }

    /// Whether the shards of the current run turn (they publish figures), so heartbeats may
    /// say this broker is alive. Before the first run, the driver alone speaks for it.
    fn shards_alive(&mut self) -> bool {
        if self.role.serving() == Serving::Undecided {
            return true;
        }
        let alive = self
            .role
            .shards_alive(monotonic_now(), self.config.shards_silent_max);
        if !alive && !self.silent_shards_reported {
            log::warn!(
                "the shards published nothing for {:?}: no heartbeats until they do",
                self.config.shards_silent_max
            );
        }
        self.silent_shards_reported = !alive;
        alive
    }

    /// A link to the leading controller failed and is about to be closed. Apache
    /// RocketMQ's controller and Comet's count a broker whose connection closed as gone at
    /// once (they do not wait for the heartbeat timeout), so another master may be elected
    /// as soon as the close arrives: the lease ends here, before it.
    fn link_to_leader_lost(&self, session: &Session, addr: &str) {
        if session.leader() == Some(addr) && self.role.lease_valid(monotonic_now()) {
            log::warn!("lost the link to the leading controller {addr}: acknowledging no writes");
            self.role.revoke_lease();
        }
    }

    /// Feeds an answer to the session, after extending the lease when it names this broker
    /// master: the controller held it master when it answered, which was after `sent_at`.
    fn answered(
        &mut self,
        session: &mut Session,
        now: Instant,
        sent_at: Instant,
        id: RequestId,
        reply: Reply,
    ) -> Vec<Action> {
        let view = match &reply {
            Reply::Registered(view) | Reply::ReplicaInfo(view) | Reply::Elected(view) => Some(view),
            _ => None,
        };
        if let (Some(view), Some(own)) = (view, session.broker_id()) {
            if view.master_broker_id == Some(own) {
                self.role.extend_lease(sent_at + self.config.lease);
            } else if view.master_broker_id.is_some() {
                self.role.revoke_lease();
            }
        }
        match session.on_reply(now, id, reply) {
            Ok(actions) => actions,
            Err(error) => {
                log::warn!("the controller's answer does not fit the session: {error}");
                session.on_failure(now, id)
            }
        }
    }

    /// Takes the role the controller decided: at once where the run can (an undecided run
    /// already follows as a slave would), else by restarting the shards into it.
    fn decide(&mut self, serving: Serving) {
        let current = self.role.serving();
        if current == serving {
            return;
        }
        // A master elected again under a newer epoch keeps serving: no other broker wrote
        // in between, because the controller elects only from the sync-state set, which
        // this broker could not have left and re-entered without following another master.
        let live = match (&current, &serving) {
            (Serving::Undecided, Serving::Slave { .. }) => {
                self.control.run_broker_id() == self.role.broker_id()
            }
            (Serving::Master { .. }, Serving::Master { .. }) => true,
            _ => false,
        };
        log::info!(
            "the controller decided {serving:?} (serving {current:?}): {}",
            if live {
                "taken at once"
            } else {
                "restarting the shards into it"
            }
        );
        self.control.set_desired(serving.clone());
        if live {
            self.role.set_serving(serving);
        } else {
            // A master keeps the lease the controller's answer just gave it; anyone else
            // must not acknowledge a write from now on.
            if !serving.is_master() {
                self.role.revoke_lease();
            }
            self.control.stop_run();
        }
    }

    /// Tells the session what the logs hold and which slaves are in sync.
    fn report_figures(&mut self, session: &mut Session, now: Instant) -> Vec<Action> {
        let logs = self.role.logs();
        let sum = |value: fn(&crate::controller_role::LogFigures) -> u64| {
            logs.values().map(value).fold(0u64, u64::saturating_add)
        };
        session.set_log_progress(LogProgress {
            epoch: logs
                .values()
                .map(|log| log.epoch)
                .max()
                .map_or(0, |epoch| i32::try_from(epoch).unwrap_or(i32::MAX)),
            max_offset: i64::try_from(sum(|log| log.written)).unwrap_or(i64::MAX),
            confirm_offset: i64::try_from(sum(|log| log.confirmed)).unwrap_or(i64::MAX),
        });
        let mut actions = Vec::new();
        if !self.role.serving().is_master() {
            return actions;
        }
        let replicas = self.role.replica_logs(self.config.log_count);
        let gone: Vec<_> = self
            .reported
            .keys()
            .filter(|slave| !replicas.contains_key(slave))
            .copied()
            .collect();
        for slave in gone {
            self.reported.remove(&slave);
            actions.extend(session.forget_replica(now, slave));
        }
        for (slave, logs) in replicas {
            if self.reported.get(&slave) != Some(&logs) {
                actions.extend(session.set_replica_logs_in_sync(now, slave, &logs));
                self.reported.insert(slave, logs);
            }
        }
        actions
    }

    /// A slave learns its master's HA address from the master itself (GET_BROKER_CONFIG:
    /// `brokerIP2` or `brokerIP1`, and `haListenPort`), retried until it answers.
    fn look_up_master_ha(&mut self, now: Instant) {
        let Some(at) = self.ha_lookup_at else { return };
        if now < at {
            return;
        }
        let Serving::Slave { master_addr, .. } = self.control.desired() else {
            self.ha_lookup_at = None;
            return;
        };
        let request = RemotingCommand::request(RequestCode::GET_BROKER_CONFIG, 0);
        let answer = self.call(&master_addr, request);
        if answer.is_err() {
            self.links.remove(&master_addr);
        }
        match answer.map(|answer| ha_addr_of(&answer)) {
            Ok(Some(ha_addr)) => {
                log::info!("following the master {master_addr} through its HA port {ha_addr}");
                self.role
                    .shared_replication()
                    .set_master(Some(ha_addr), Some(master_addr));
                self.ha_lookup_at = None;
            }
            Ok(None) => {
                log::warn!("the master {master_addr} does not say where its HA port is");
                self.ha_lookup_at = Some(now + HA_LOOKUP_RETRY);
            }
            Err(error) => {
                log::debug!("master {master_addr}: {error}");
                self.links.remove(&master_addr);
                self.ha_lookup_at = Some(now + HA_LOOKUP_RETRY);
            }
        }
    }

    fn persist(&self, persist: &Persist) -> io::Result<()> {
        let dir = &self.config.identity_dir;
        let invalid = |e| io::Error::new(io::ErrorKind::InvalidInput, e);
        match persist {
            Persist::WriteTemp(temp) => crate::persist::write_atomic(
                &dir.join(TEMP_FILE_NAME),
                temp.encode().map_err(invalid)?.as_bytes(),
            ),
            Persist::WriteConfirmed(confirmed) => {
                crate::persist::write_atomic(
                    &dir.join(CONFIRMED_FILE_NAME),
                    confirmed.encode().map_err(invalid)?.as_bytes(),
                )?;
                remove_if_present(&dir.join(TEMP_FILE_NAME))
            }
            Persist::DeleteTemp => remove_if_present(&dir.join(TEMP_FILE_NAME)),
        }
    }

    fn link(&mut self, addr: &str) -> io::Result<&mut Link> {
        if !self.links.contains_key(addr) {
            let link = Link::connect(addr, self.config.request_timeout)?;
            self.links.insert(addr.to_owned(), link);
        }
        self.links
            .get_mut(addr)
            .ok_or_else(|| io::Error::other("link just inserted"))
    }

    /// One request and its answer. A failed link stays until the caller drops it: a link to
    /// the leading controller may close only after the lease ended, because the controller
    /// counts a master whose connection closed as gone at once.
    fn call(&mut self, addr: &str, request: RemotingCommand) -> io::Result<RemotingCommand> {
        let timeout = self.config.request_timeout;
        self.link(addr).and_then(|link| link.call(request, timeout))
    }
}

/// Pause between HA address lookups that failed.
const HA_LOOKUP_RETRY: Duration = Duration::from_millis(500);

/// Frames larger than this from a controller or master are refused.
const ANSWER_BYTES_MAX: usize = 4 * 1024 * 1024;

fn remove_if_present(path: &std::path::Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// The HA address in a GET_BROKER_CONFIG answer (Java properties text).
fn ha_addr_of(answer: &RemotingCommand) -> Option<String> {
    if answer.response_code() != ResponseCode::SUCCESS {
        return None;
    }
    let text = std::str::from_utf8(&answer.body).ok()?;
    let properties: HashMap<String, String> = comet_proto::java_properties::parse(text)
        .into_iter()
        .collect();
    let port = properties.get("haListenPort")?.trim().parse::<u16>().ok()?;
    let ip = properties
        .get("brokerIP2")
        .filter(|ip| !ip.trim().is_empty())
        .or_else(|| properties.get("brokerIP1"))?;
    Some(format!("{}:{port}", ip.trim()))
}

/// One blocking connection; answers are matched by opaque.
struct Link {
    stream: TcpStream,
    buffer: BytesMut,
    decoder: FrameDecoder,
    next_opaque: i32,
}

impl Link {
    fn connect(addr: &str, timeout: Duration) -> io::Result<Link> {
        let target = addr
            .to_socket_addrs()?
            .next()
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no address"))?;
        let stream = TcpStream::connect_timeout(&target, timeout)?;
        stream.set_nodelay(true)?;
        stream.set_write_timeout(Some(timeout))?;
        Ok(Link {
            stream,
            buffer: BytesMut::new(),
            decoder: FrameDecoder::new(ANSWER_BYTES_MAX),
            next_opaque: 0,
        })
    }

    fn opaque(&mut self) -> i32 {
        self.next_opaque = self.next_opaque.wrapping_add(1);
        self.next_opaque
    }

    fn oneway(&mut self, mut command: RemotingCommand) -> io::Result<()> {
        command.opaque = self.opaque();
        self.stream.write_all(&encode_to_bytes(&command))
    }

    fn call(
        &mut self,
        mut command: RemotingCommand,
        timeout: Duration,
    ) -> io::Result<RemotingCommand> {
        let opaque = self.opaque();
        command.opaque = opaque;
        self.stream.write_all(&encode_to_bytes(&command))?;
        let deadline = monotonic_now() + timeout;
        let mut chunk = [0u8; 8192];
        loop {
            while let Some(decoded) = self
                .decoder
                .decode(&mut self.buffer)
                .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?
            {
                if let Decoded::Command(answer) = decoded {
                    if answer.is_response() && answer.opaque == opaque {
                        return Ok(answer);
                    }
                }
            }
            let left = deadline.saturating_duration_since(monotonic_now());
            if left.is_zero() {
                return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer in time"));
            }
            self.stream.set_read_timeout(Some(left))?;
            match self.stream.read(&mut chunk)? {
                0 => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "closed")),
                read => self.buffer.extend_from_slice(&chunk[..read]),
            }
        }
    }
}
