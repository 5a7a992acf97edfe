//! The controller session against Apache RocketMQ's own controller, over real TCP.
//!
//! Opt-in (it needs Java and Apache's jars): `tests/compat/controller/run.sh` starts Apache's
//! name servers with their embedded controllers on free loopback ports and runs these tests
//! with `COMET_CONTROLLER_ADDR` (one controller) or `COMET_CONTROLLER_GROUP` (three) set.
//!
//! With one controller, two simulated brokers of one broker set, each a [`Session`] whose
//! requests travel as comet-proto frames, must:
//!
//! 1. claim two different controller ids (both ask at once, so one of them meets Apache's
//!    "id already taken" refusal and claims again), and agree on one master under epoch 1,
//!    the other its slave;
//! 2. see the master's sync-state-set proposal (the slave's logs all in sync) accepted;
//! 3. after the master stops heartbeating, see Apache elect the slave under a higher epoch,
//!    which the slave learns by notification or by polling;
//! 4. restart the old master from its identity files: it registers with its confirmed id
//!    (no new claim) and is told to follow the new master.
//!
//! With a group of three, a follower must answer CONTROLLER_NOT_LEADER, and after the
//! leader's process is killed the session must find the new leader by itself.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use comet_broker::controller_mode::wire::{to_command, to_reply};
use comet_broker::processor::controller::notification_view;
use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode_to_bytes;
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode};
use comet_replication::controller::identity::{CONFIRMED_FILE_NAME, TEMP_FILE_NAME};
use comet_replication::controller::*;

const ENV_CONTROLLER: &str = "COMET_CONTROLLER_ADDR";
const ENV_CAPTURE: &str = "COMET_CONTROLLER_CAPTURE";
const CLUSTER: &str = "CometControllerTest";
const BROKER_NAME: &str = "broker-ctl";
/// Generous: the controller's DLedger group elects itself leader first, on a busy machine.
const STEP_DEADLINE: Duration = Duration::from_secs(60);
const TICK: Duration = Duration::from_millis(20);

fn unix_ms() -> i64 {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970");
    i64::try_from(since.as_millis()).expect("ms fit in i64")
}

/// One blocking connection to the controller; answers are matched by opaque.
struct Link {
    stream: TcpStream,
    buffer: BytesMut,
    decoder: FrameDecoder,
    next_opaque: i32,
}

impl Link {
    fn connect(addr: &str) -> io::Result<Link> {
        let stream = TcpStream::connect(addr)?;
        stream.set_nodelay(true)?;
        Ok(Link {
            stream,
            buffer: BytesMut::new(),
            decoder: FrameDecoder::default(),
            next_opaque: 0,
        })
    }

    fn oneway(&mut self, mut command: RemotingCommand) -> io::Result<()> {
        self.next_opaque += 1;
        command.opaque = self.next_opaque;
        command.set_oneway();
        self.stream.write_all(&encode_to_bytes(&command))
    }

    fn call(
        &mut self,
        mut command: RemotingCommand,
        timeout: Duration,
    ) -> io::Result<RemotingCommand> {
        self.next_opaque += 1;
        let opaque = self.next_opaque;
        command.opaque = opaque;
        self.stream.write_all(&encode_to_bytes(&command))?;
        let deadline = Instant::now() + timeout;
        loop {
            let raw = match self.decoder.frame_length(&self.buffer) {
                Ok(Some(length)) => self.buffer[..length].to_vec(),
                _ => Vec::new(),
            };
            match self.decoder.decode(&mut self.buffer) {
                Ok(Some(Decoded::Command(answer))) if answer.is_response() => {
                    if answer.opaque == opaque {
                        let request = command.request_code();
                        let name = request.name().unwrap_or("UNKNOWN");
                        capture(&format!("{name} {}", answer.code), &raw);
                        return Ok(answer);
                    }
                }
                Ok(Some(_)) => {}
                Ok(None) => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(io::Error::new(io::ErrorKind::TimedOut, "no answer"));
                    }
                    self.stream.set_read_timeout(Some(left))?;
                    let mut chunk = [0u8; 8192];
                    let read = self.stream.read(&mut chunk)?;
                    if read == 0 {
                        return Err(io::ErrorKind::UnexpectedEof.into());
                    }
                    self.buffer.extend_from_slice(&chunk[..read]);
                }
                Err(error) => return Err(io::Error::new(io::ErrorKind::InvalidData, error)),
            }
        }
    }
}

/// With `COMET_CONTROLLER_CAPTURE` set to a file, appends the first frame of each kind the
/// controller sends (`label hex` lines): the source of comet-proto's captured controller
/// frames.
fn capture(label: &str, raw: &[u8]) {
    static SEEN: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());
    let Ok(path) = std::env::var(ENV_CAPTURE) else {
        return;
    };
    let mut seen = SEEN.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if raw.is_empty() || !seen.insert(label.to_owned()) {
        return;
    }
    let hex: String = raw.iter().map(|byte| format!("{byte:02x}")).collect();
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .expect("capture file opens");
    writeln!(file, "{label} {hex}").expect("capture line written");
}

/// Accepts the controller's connections to the broker's address and forwards each
/// NOTIFY_BROKER_ROLE_CHANGED as a [`MasterView`].
fn listen_for_notifications(listener: TcpListener, to: Sender<MasterView>) {
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let to = to.clone();
            thread::spawn(move || {
                let decoder = FrameDecoder::default();
                let mut buffer = BytesMut::new();
                let mut chunk = [0u8; 8192];
                loop {
                    while let Ok(Some(length)) = decoder.frame_length(&buffer) {
                        let raw = buffer[..length].to_vec();
                        let Ok(Some(decoded)) = decoder.decode(&mut buffer) else {
                            return;
                        };
                        if let Decoded::Command(command) = decoded {
                            if command.request_code() != RequestCode::NOTIFY_BROKER_ROLE_CHANGED {
                                continue;
                            }
                            capture("NOTIFY_BROKER_ROLE_CHANGED request", &raw);
                            if to
                                .send(
                                    notification_view(&command).expect("the notification decodes"),
                                )
                                .is_err()
                            {
                                return;
                            }
                        }
                    }
                    match stream.read(&mut chunk) {
                        Ok(0) | Err(_) => return,
                        Ok(read) => buffer.extend_from_slice(&chunk[..read]),
                    }
                }
            });
        }
    });
}

/// What a simulated broker observed.
#[derive(Debug, Default)]
struct Observed {
    masters: Vec<ControllerEpoch>,
    slaves: Vec<(BrokerControllerId, ControllerEpoch)>,
    notifications: usize,
    claims: usize,
    refused_claims: usize,
    sync_state_sets: Vec<SyncStateSet>,
    /// The controllers that answered CONTROLLER_GET_REPLICA_INFO with SUCCESS, in order.
    replica_info_from: Vec<String>,
}

/// A broker runtime reduced to the controller conversation: a session, a connection to each
/// controller, an identity folder, and a notification listener on the broker address.
struct SimBroker {
    name: &'static str,
    session: Session,
    links: BTreeMap<String, Link>,
    store: PathBuf,
    queue: VecDeque<Action>,
    notifications: Receiver<MasterView>,
    heartbeating: bool,
    seen: Observed,
}

impl SimBroker {
    fn start(
        name: &'static str,
        controllers: &[String],
        store: &Path,
        listener: TcpListener,
    ) -> SimBroker {
        let broker_addr = listener.local_addr().expect("bound").to_string();
        let (to, notifications) = mpsc::channel();
        listen_for_notifications(listener, to);
        let mut config = SessionConfig::new(
            CLUSTER,
            BROKER_NAME,
            broker_addr,
            controllers.to_vec(),
            unix_ms(),
        );
        config.heartbeat_timeout_ms = 3_000;
        config.sync_broker_metadata_period = Duration::from_millis(1_000);
        config.check_sync_state_set_period = Duration::from_millis(1_000);
        let session = Session::new(config, read_identity(store)).expect("session starts");
        SimBroker {
            name,
            session,
            links: BTreeMap::new(),
            store: store.to_owned(),
            queue: VecDeque::new(),
            notifications,
            heartbeating: true,
            seen: Observed::default(),
        }
    }

    fn link(&mut self, addr: &str) -> io::Result<&mut Link> {
        if !self.links.contains_key(addr) {
            self.links.insert(addr.to_owned(), Link::connect(addr)?);
        }
        Ok(self.links.get_mut(addr).expect("just connected"))
    }

    /// One step: a due poll, notifications, then at most one queued action (so two brokers
    /// driven in turn interleave their requests).
    fn tick(&mut self) {
        let now = Instant::now();
        let polled = self.session.poll(now);
        self.queue.extend(polled);
        while let Ok(view) = self.notifications.try_recv() {
            self.seen.notifications += 1;
            let actions = self.session.on_role_notification(Instant::now(), view);
            self.queue.extend(actions);
        }
        if let Some(action) = self.queue.pop_front() {
            self.carry_out(action);
        }
    }

    fn carry_out(&mut self, action: Action) {
        match action {
            Action::Send { id, to, request } => {
                let command = to_command(self.session.config(), &request, unix_ms());
                let timeout = self.session.config().request_timeout;
                let answer = self.link(&to).and_then(|link| link.call(command, timeout));
                let now = Instant::now();
                let actions = match answer {
                    Ok(answer) => {
                        let reply = to_reply(&request, &answer).expect("the answer decodes");
                        if matches!(reply, Reply::ReplicaInfo(_)) {
                            self.seen.replica_info_from.push(to.clone());
                        }
                        if matches!(request, Request::ApplyBrokerId { .. }) {
                            self.seen.claims += 1;
                            if matches!(reply, Reply::Refused { .. }) {
                                self.seen.refused_claims += 1;
                            }
                        }
                        self.session
                            .on_reply(now, id, reply)
                            .unwrap_or_else(|e| panic!("{}: {e}", self.name))
                    }
                    Err(_) => {
                        self.links.remove(&to);
                        self.session.on_failure(now, id)
                    }
                };
                self.queue.extend(actions);
            }
            Action::SendOneway { to, request } => {
                if self.heartbeating {
                    let command = to_command(self.session.config(), &request, unix_ms());
                    if self
                        .link(&to)
                        .and_then(|link| link.oneway(command))
                        .is_err()
                    {
                        self.links.remove(&to);
                    }
                }
            }
            Action::Persist(persist) => {
                let done = persist_identity(&self.store, &persist);
                let now = Instant::now();
                let actions = match done {
                    Ok(()) => self.session.on_persisted(now),
                    Err(_) => self.session.on_persist_failed(now),
                };
                self.queue.extend(actions);
            }
            Action::BecomeMaster { epoch, .. } => self.seen.masters.push(epoch),
            Action::BecomeSlave {
                master_broker_id,
                epoch,
                ..
            } => self.seen.slaves.push((master_broker_id, epoch)),
            Action::SyncStateSetChanged(set) => self.seen.sync_state_sets.push(set),
        }
    }
}

fn read_identity(store: &Path) -> StoredIdentity {
    let read = |name: &str| std::fs::read_to_string(store.join(name)).ok();
    StoredIdentity {
        confirmed: read(CONFIRMED_FILE_NAME)
            .map(|text| ConfirmedIdentity::decode(&text).expect("confirmed file reads")),
        temp: read(TEMP_FILE_NAME)
            .map(|text| TempIdentity::decode(&text).expect("temp file reads")),
    }
}

fn persist_identity(store: &Path, persist: &Persist) -> io::Result<()> {
    let invalid = |e: IdentityError| io::Error::new(io::ErrorKind::InvalidInput, e);
    match persist {
        Persist::WriteTemp(temp) => {
            std::fs::write(store.join(TEMP_FILE_NAME), temp.encode().map_err(invalid)?)
        }
        Persist::WriteConfirmed(confirmed) => {
            std::fs::write(
                store.join(CONFIRMED_FILE_NAME),
                confirmed.encode().map_err(invalid)?,
            )?;
            std::fs::remove_file(store.join(TEMP_FILE_NAME))
        }
        Persist::DeleteTemp => std::fs::remove_file(store.join(TEMP_FILE_NAME)),
    }
}

/// Ticks `brokers` in turn until `done` holds, failing after [`STEP_DEADLINE`].
fn drive_until(
    what: &str,
    brokers: &mut [&mut SimBroker],
    done: impl Fn(&[&mut SimBroker]) -> bool,
) {
    let deadline = Instant::now() + STEP_DEADLINE;
    while !done(brokers) {
        assert!(
            Instant::now() < deadline,
            "{what}: not reached in {STEP_DEADLINE:?}; {:#?}",
            brokers
                .iter()
                .map(|b| (b.name, b.session.role(), &b.seen))
                .collect::<Vec<_>>()
        );
        for broker in brokers.iter_mut() {
            broker.tick();
        }
        thread::sleep(TICK);
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("comet-controller-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch folder");
    dir
}

fn bind() -> TcpListener {
    TcpListener::bind("127.0.0.1:0").expect("a free loopback port")
}

// Proves the session against Apache's controller: ids, first election, sync-state set,
// failover after lost heartbeats, and a restart with a persisted id (see the module docs).
#[test]
#[ignore = "needs Java and Apache RocketMQ's controller: run tests/compat/controller/run.sh"]
fn failover_with_apache_controller() {
    let controller = std::env::var(ENV_CONTROLLER).unwrap_or_else(|_| {
        panic!("{ENV_CONTROLLER} is not set: run tests/compat/controller/run.sh")
    });
    let controller = [controller];
    let (store_one, store_two) = (scratch("one"), scratch("two"));
    let mut one = SimBroker::start("one", &controller, &store_one, bind());
    let mut two = SimBroker::start("two", &controller, &store_two, bind());

    // 1. Ids and the first election.
    drive_until("both roles decided", &mut [&mut one, &mut two], |b| {
        b.iter().all(|b| *b.session.role() != Role::Undecided)
    });
    let ids: BTreeSet<_> = [&one, &two]
        .iter()
        .filter_map(|b| b.session.broker_id())
        .collect();
    assert_eq!(ids.len(), 2, "two different controller ids: {ids:?}");
    assert!(
        one.seen.refused_claims + two.seen.refused_claims <= 1,
        "at most one claim collides"
    );
    let (master, slave) = match one.session.role() {
        Role::Master { .. } => (&mut one, &mut two),
        _ => (&mut two, &mut one),
    };
    assert_eq!(
        master.session.role(),
        &Role::Master { epoch: 1 },
        "first master epoch"
    );
    let master_id = master.session.broker_id().expect("master id");
    let slave_id = slave.session.broker_id().expect("slave id");
    assert!(
        matches!(slave.session.role(), Role::Slave { master_broker_id, epoch: 1, .. }
            if *master_broker_id == master_id),
        "slave of the master: {:?}",
        slave.session.role()
    );
    println!(
        "ids: master {master_id} ({}), slave {slave_id} ({}); claims {} + {}, refused {} + {}",
        master.name,
        slave.name,
        master.seen.claims,
        slave.seen.claims,
        master.seen.refused_claims,
        slave.seen.refused_claims
    );

    // 2. The slave's logs are all in sync: the master proposes it and Apache accepts.
    let now = Instant::now();
    let actions = master
        .session
        .set_replica_logs_in_sync(now, slave_id, &[true, true, true]);
    master.queue.extend(actions);
    drive_until(
        "sync-state set holds both",
        &mut [&mut *master, &mut *slave],
        |b| {
            b.iter().any(|b| {
                matches!(b.session.role(), Role::Master { .. })
                    && b.session.sync_state_set().members == BTreeSet::from([master_id, slave_id])
            })
        },
    );
    println!(
        "sync-state set accepted: {:?}",
        master.session.sync_state_set()
    );

    // 3. The master stops heartbeating (its connection stays open): Apache must elect the
    //    slave under a higher epoch.
    master.heartbeating = false;
    let stopped = Instant::now();
    drive_until(
        "slave promoted",
        &mut [&mut *slave],
        |b| matches!(b[0].session.role(), Role::Master { epoch } if *epoch > 1),
    );
    let new_epoch = slave.session.master_epoch();
    println!(
        "promoted after {:?} at epoch {new_epoch} ({} notification(s) received)",
        stopped.elapsed(),
        slave.seen.notifications
    );
    for (_, link) in std::mem::take(&mut master.links) {
        let _ = link.stream.shutdown(Shutdown::Both);
    }

    // 4. The old master restarts from its files: same id, told to follow the new master.
    // It comes back on another port (its old listener still runs in this process); the
    // registration updates its address at the controller.
    let old_store = master.store.clone();
    let restarted_identity = read_identity(&old_store);
    assert_eq!(
        restarted_identity.confirmed.as_ref().map(|c| c.broker_id),
        Some(master_id),
        "the confirmed file holds the id"
    );
    assert!(restarted_identity.temp.is_none(), "no claim left over");
    let mut restarted = SimBroker::start("restarted", &controller, &old_store, bind());
    drive_until(
        "old master follows",
        &mut [&mut restarted, &mut *slave],
        |b| *b[0].session.role() != Role::Undecided,
    );
    assert_eq!(
        restarted.seen.claims, 0,
        "a persisted id is not claimed again"
    );
    assert_eq!(restarted.session.broker_id(), Some(master_id));
    assert!(
        matches!(restarted.session.role(), Role::Slave { master_broker_id, epoch, .. }
            if *master_broker_id == slave_id && *epoch == new_epoch),
        "restarted old master follows the new one: {:?}",
        restarted.session.role()
    );
    println!("restarted old master follows {slave_id} at epoch {new_epoch}");
    let _ = std::fs::remove_dir_all(&store_one);
    let _ = std::fs::remove_dir_all(&store_two);
}

/// `COMET_CONTROLLER_GROUP`: `addr=pid;addr=pid;addr=pid`, the members of a three-controller
/// group and the process ids of their name servers.
const ENV_GROUP: &str = "COMET_CONTROLLER_GROUP";

fn group_members() -> Vec<(String, u32)> {
    let group = std::env::var(ENV_GROUP)
        .unwrap_or_else(|_| panic!("{ENV_GROUP} is not set: run tests/compat/controller/run.sh"));
    group
        .split(';')
        .map(|member| {
            let (addr, pid) = member.split_once('=').expect("addr=pid");
            (addr.to_owned(), pid.parse().expect("a process id"))
        })
        .collect()
}

// Proves the leader redirect against a three-member Apache controller group: a follower
// answers CONTROLLER_NOT_LEADER (the code the session redirects on); after the leader's
// process is killed the session finds the new leader on its own, keeps heartbeating to every
// member, and its replica polls are answered by the new leader while it stays master.
#[test]
#[ignore = "needs Java and Apache RocketMQ's controllers: run tests/compat/controller/run.sh"]
fn controller_leader_change_with_apache() {
    let members = group_members();
    let addrs: Vec<String> = members.iter().map(|(addr, _)| addr.clone()).collect();
    let store = scratch("group");
    let mut broker = SimBroker::start("solo", &addrs, &store, bind());
    drive_until("elected master", &mut [&mut broker], |b| {
        matches!(b[0].session.role(), Role::Master { .. })
    });
    let leader = broker.session.leader().expect("a leader").to_owned();
    let epoch = broker.session.master_epoch();
    println!("master at epoch {epoch}; controller leader {leader}");

    for follower in addrs.iter().filter(|addr| **addr != leader) {
        let request = Request::GetReplicaInfo;
        let command = to_command(broker.session.config(), &request, unix_ms());
        let answer = Link::connect(follower)
            .and_then(|mut link| link.call(command, Duration::from_secs(5)))
            .expect("a follower answers");
        assert_eq!(
            to_reply(&request, &answer).expect("the answer decodes"),
            Reply::Refused {
                code: codes::CONTROLLER_NOT_LEADER,
                remark: answer.remark.clone(),
            },
            "follower {follower}"
        );
    }

    let (_, pid) = members
        .iter()
        .find(|(addr, _)| *addr == leader)
        .expect("the leader is a member");
    let killed = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status()
        .expect("kill runs");
    assert!(killed.success(), "leader process {pid} killed");
    let killed_at = Instant::now();
    let polls_before = broker.seen.replica_info_from.len();
    drive_until("new leader answers", &mut [&mut broker], |b| {
        b[0].session.leader().is_some_and(|l| l != leader)
            && b[0].seen.replica_info_from[polls_before..]
                .iter()
                .any(|from| *from != leader)
    });
    let new_leader = broker.session.leader().expect("new leader").to_owned();
    println!(
        "controller leader moved {leader} -> {new_leader} in {:?}; role {:?}",
        killed_at.elapsed(),
        broker.session.role()
    );
    assert!(
        matches!(broker.session.role(), Role::Master { .. }),
        "still master: {:?}",
        broker.session.role()
    );
    let _ = std::fs::remove_dir_all(&store);
}
