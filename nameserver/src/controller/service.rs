//! The controller as a network service inside the name server (`enableControllerInNamesrv`),
//! replicated by Raft across the group `controllerDLegerPeers` names.
//!
//! As Java's controller-in-namesrv does, it answers on its own port, the one the peers list
//! gives this member (Java's DLedger port, which is what brokers' `controllerAddr` names),
//! not on the name server's port. The same port carries the group's Raft messages, one way,
//! under a request code of Comet's own ([`RAFT_MESSAGE_CODE`]).
//!
//! Everything runs on the name server's shard in the `Admin` task class, so route-table work
//! (its own class, more shares) is never behind it:
//!
//! * the Raft task ticks the [`Replica`], makes its entries and votes durable in the
//!   [`RaftStore`] (on the blocking thread, fsync before anything is acknowledged), sends
//!   its messages and applies committed records to the [`ControllerNode`];
//! * one sender task per peer keeps a connection and writes that peer's messages;
//! * requests are checked one at a time on the leader, after the leader has applied an entry
//!   of its own term (until then it may not know the latest state): the events are proposed,
//!   and the answer goes out once they are committed and applied. A follower answers
//!   CONTROLLER_NOT_LEADER, as Java's does; BROKER_HEARTBEAT and CONTROLLER_GET_METADATA_INFO
//!   every member answers itself (liveness is each member's own and is not replicated: a new
//!   leader already holds the heartbeats brokers send to every controller);
//! * the scan task starts the elections of broker sets whose master's heartbeats stopped,
//!   every `scanNotActiveBrokerInterval`, on the leader;
//! * after every election, when `notifyBrokerRoleChanged` is on, the live members of the set
//!   are sent NOTIFY_BROKER_ROLE_CHANGED.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::PathBuf;
use std::rc::Rc;
use std::time::{Duration, Instant};

use comet_net::{ConnectionId, DispatchTable, Server, ServerConfig};
use comet_proto::body::{JsonBody, SyncStateSet as WireSyncStateSet};
use comet_proto::frame::encode_to_bytes;
use comet_proto::headers::{GetMetaDataResponseHeader, NotifyBrokerRoleChangedRequestHeader};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_rt::clock::monotonic_now;
use comet_rt::fatal::{fatal, FatalReason};
use comet_rt::net::{Listener, Stream};
use comet_rt::shutdown::StopSignal;
use comet_rt::sync::{oneshot, race, Either, Notify, OneshotSender, WakerList};
use comet_rt::task_class::{run_blocking, sleep, spawn, spawn_detached, TaskClass};
use comet_rt::ShardId;
use protobuf::Message as _;
use raft::eraftpb::Message;
use thiserror::Error;

use super::raft_store::{RaftStore, StoreError};
use super::replica::{raft_logger, Committed, Record, Replica, ReplicaError, TICK_MS};
use super::{wire, BrokerId, ControllerConfig, ControllerNode, ControllerState, Request, Response};
use crate::NamesrvConfig;

/// The request code of a Raft message between controllers: Comet's own, outside RocketMQ's
/// codes. The body is the protobuf encoding of one raft-rs `Message`.
pub const RAFT_MESSAGE_CODE: i32 = 1_900_001;

/// How long a request waits for its events to commit before it is answered
/// CONTROLLER_NOT_LEADER (a leader cut off from the group steps down within an election
/// timeout, so this is longer than one).
const COMMIT_WAIT: Duration = Duration::from_secs(5);
/// Raft messages queued for one peer beyond which the oldest are dropped (Raft resends).
const OUTBOX_MESSAGES_MAX: usize = 4_096;
/// How long connecting to a peer or a broker may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Pause after a failed connection to a peer.
const RECONNECT_PAUSE: Duration = Duration::from_millis(200);
/// Java's remark on a follower's refusal.
const NOT_LEADER_REMARK: &str = "The controller is not in leader state";

/// Why the controller cannot start.
#[derive(Debug, Error)]
pub enum ControllerError {
    /// `controllerDLegerPeers` or `controllerDLegerSelfId` is unusable.
    #[error("controller config: {0}")]
    Peers(String),
    /// The Raft log cannot be opened.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// raft-rs refused to start.
    #[error(transparent)]
    Replica(#[from] ReplicaError),
    /// The snapshot's state does not decode.
    #[error("controller snapshot: {0}")]
    Snapshot(#[from] serde_json::Error),
    /// The controller port cannot be bound.
    #[error("controller cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// The OS error.
        source: std::io::Error,
    },
}

/// One member of the controller group, as `controllerDLegerPeers` lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Peer {
    /// Its id, `n0`.
    pub name: String,
    /// `host:port` as configured: what GET_METADATA_INFO names.
    pub host_port: String,
    /// The resolved address.
    pub addr: SocketAddr,
    /// Its Raft id: its place among the ids sorted, from 1, the same on every member.
    pub raft_id: u64,
}

/// Parses `n0-host:port;n1-host:port;...` (Java's `controllerDLegerPeers`).
pub fn parse_peers(text: &str) -> Result<Vec<Peer>, ControllerError> {
    let mut named = BTreeMap::new();
    for part in text
        .split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let (name, host_port) = part
            .split_once('-')
            .ok_or_else(|| ControllerError::Peers(format!("peer {part:?} is not id-host:port")))?;
        let addr = host_port
            .to_socket_addrs()
            .ok()
            .and_then(|mut addrs| addrs.next())
            .ok_or_else(|| ControllerError::Peers(format!("peer {part:?}: no address")))?;
        if named
            .insert(name.to_owned(), (host_port.to_owned(), addr))
            .is_some()
        {
            return Err(ControllerError::Peers(format!(
                "peer id {name} listed twice"
            )));
        }
    }
    if named.is_empty() {
        return Err(ControllerError::Peers(
            "controllerDLegerPeers is empty".to_owned(),
        ));
    }
    Ok(named
        .into_iter()
        .zip(1..)
        .map(|((name, (host_port, addr)), raft_id)| Peer {
            name,
            host_port,
            addr,
            raft_id,
        })
        .collect())
}

/// The controller, bound and recovered, ready to [`ControllerService::run`].
pub struct ControllerService {
    shared: Rc<Shared>,
    listener: Listener,
    store: RaftStore,
}

struct Settings {
    group: String,
    peers: Vec<Peer>,
    me: usize,
    scan_interval: Duration,
    notify_broker_role_changed: bool,
    /// Applied entries past the snapshot after which the log is compacted into a new
    /// snapshot of the state (`controllerCompactAfterEntries`).
    compact_after_entries: u64,
}

/// What the proposer of a record is told.
enum Outcome {
    Applied,
    NotLeader,
}

struct Shared {
    settings: Settings,
    started: Instant,
    node: RefCell<ControllerNode>,
    replica: RefCell<Replica>,
    /// The Raft task has something to do (a message, a proposal).
    wake: Notify,
    /// What the Raft task hands to the node before its next ready: raft-rs must not be
    /// stepped between a ready and its advance, which spans the disk write.
    inbox: RefCell<Vec<Message>>,
    proposals: RefCell<Vec<Record>>,
    unreachable: RefCell<Vec<u64>>,
    /// The term in which this member, as leader, applied an entry of its own: requests are
    /// checked only then.
    serving_term: Cell<Option<u64>>,
    /// The last index applied to the node.
    applied: Cell<u64>,
    pending: RefCell<HashMap<u64, OneshotSender<Outcome>>>,
    next_tag: Cell<u64>,
    /// One request is checked, proposed and applied at a time.
    busy: Cell<bool>,
    turn: WakerList,
    outboxes: Vec<Outbox>,
    stop: RefCell<Option<StopSignal>>,
    /// The brokers each connection carried heartbeats for, so its close counts them gone.
    channels: RefCell<HashMap<ConnectionId, BTreeSet<BrokerKey>>>,
    /// Wakes the scan before its period (a master's connection closed).
    scan_now: Notify,
}

/// A broker as heartbeats name it: cluster name, broker name, controller id.
type BrokerKey = (String, String, BrokerId);

#[derive(Default)]
struct Outbox {
    messages: RefCell<VecDeque<Message>>,
    ready: Notify,
}

struct TurnGuard<'a>(&'a Shared);

impl Drop for TurnGuard<'_> {
    fn drop(&mut self) {
        self.0.busy.set(false);
        self.0.turn.wake_all();
    }
}

impl ControllerService {
    /// Reads the controller keys of `config`, opens the Raft log under `controllerStorePath`
    /// (cutting a torn tail) and binds the controller port. Runs at start-up, on the shard.
    pub fn prepare(config: &NamesrvConfig) -> Result<ControllerService, ControllerError> {
        let peers = parse_peers(&config.controller_peers)?;
        let me = peers
            .iter()
            .position(|peer| peer.name == config.controller_self_id)
            .ok_or_else(|| {
                ControllerError::Peers(format!(
                    "controllerDLegerSelfId {} is not in controllerDLegerPeers",
                    config.controller_self_id
                ))
            })?;
        let store_path: PathBuf = config.controller_store_path.clone();
        let (store, recovered) = RaftStore::open(&store_path)?;
        let restored = match &recovered.snapshot {
            Some(snapshot) => Some(serde_json::from_slice::<ControllerState>(&snapshot.data)?),
            None => None,
        };
        let voters: Vec<u64> = peers.iter().map(|peer| peer.raft_id).collect();
        let replica = Replica::new(peers[me].raft_id, &voters, recovered, &raft_logger())?;
        let addr = SocketAddr::new(config.bind_address, peers[me].addr.port());
        comet_rt::net::ensure_port_free(addr)
            .map_err(|source| ControllerError::Bind { addr, source })?;
        let listener =
            Listener::bind(addr).map_err(|source| ControllerError::Bind { addr, source })?;
        let mut node = ControllerNode::new(ControllerConfig {
            enable_elect_unclean_master: config.enable_elect_unclean_master,
        });
        if let Some(state) = restored {
            node.restore(state);
        }
        let outboxes = peers.iter().map(|_| Outbox::default()).collect();
        let shared = Shared {
            settings: Settings {
                group: config.controller_group.clone(),
                peers,
                me,
                scan_interval: config.scan_interval,
                notify_broker_role_changed: config.notify_broker_role_changed,
                compact_after_entries: config.controller_compact_after_entries,
            },
            started: monotonic_now(),
            node: RefCell::new(node),
            replica: RefCell::new(replica),
            wake: Notify::default(),
            inbox: RefCell::new(Vec::new()),
            proposals: RefCell::new(Vec::new()),
            unreachable: RefCell::new(Vec::new()),
            serving_term: Cell::new(None),
            applied: Cell::new(0),
            pending: RefCell::new(HashMap::new()),
            // Tags of an earlier run of this member may still be in the log: start past them.
            next_tag: Cell::new(u64::try_from(comet_rt::clock::wall_clock_ms()).unwrap_or(0) << 16),
            busy: Cell::new(false),
            turn: WakerList::default(),
            outboxes,
            stop: RefCell::new(None),
            channels: RefCell::new(HashMap::new()),
            scan_now: Notify::default(),
        };
        Ok(ControllerService {
            shared: Rc::new(shared),
            listener,
            store,
        })
    }

    /// The controller port's address.
    pub fn local_addr(&self) -> SocketAddr {
        self.listener.local_addr()
    }

    /// Serves until `stop`: the controller port, the Raft task, the peer senders and the
    /// liveness scan.
    pub async fn run(self, shard: ShardId, connections_max: usize, stop: StopSignal) {
        let ControllerService {
            shared,
            listener,
            store,
        } = self;
        *shared.stop.borrow_mut() = Some(stop.clone());
        let me = shared.settings.me;
        log::info!(
            "controller {} of group {} on {} ({} member(s))",
            shared.settings.peers[me].name,
            shared.settings.group,
            listener.local_addr(),
            shared.settings.peers.len()
        );
        let raft = spawn(
            TaskClass::Admin,
            raft_loop(shared.clone(), store, stop.clone()),
        );
        for index in (0..shared.settings.peers.len()).filter(|index| *index != me) {
            spawn_detached(
                TaskClass::Admin,
                peer_sender(shared.clone(), index, stop.clone()),
            );
        }
        let scan = spawn(
            TaskClass::Housekeeping,
            scan_loop(shared.clone(), stop.clone()),
        );
        let server_config = ServerConfig {
            connections_max,
            task_class: TaskClass::Admin,
            ..ServerConfig::default()
        };
        let idle_close = server_config.idle_timeout;
        let mut server = Server::new(shard, dispatch_table(&shared), server_config);
        let closed = shared.clone();
        server.on_connection_closed(Rc::new(move |connection| {
            closed.on_channel_closed(connection.id(), idle_close);
        }));
        server.serve(listener, stop).await;
        raft.await;
        scan.await;
    }
}

impl Shared {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// A connection closed: the brokers that heartbeated on it count as gone, and the scan
    /// runs at once, so a killed master is replaced without waiting for its timeout.
    fn on_channel_closed(&self, connection: ConnectionId, idle_close: Duration) {
        let Some(brokers) = self.channels.borrow_mut().remove(&connection) else {
            return;
        };
        let brokers: Vec<_> = brokers.into_iter().collect();
        let idle_close_ms = u64::try_from(idle_close.as_millis()).unwrap_or(u64::MAX);
        let gone = self
            .node
            .borrow_mut()
            .on_channel_closed(&brokers, self.now_ms(), idle_close_ms);
        if gone {
            log::info!("controller: the connection of {brokers:?} closed: counted as gone");
            self.scan_now.notify();
        }
    }

    fn stopped(&self) -> bool {
        self.stop
            .borrow()
            .as_ref()
            .is_some_and(StopSignal::is_triggered)
    }

    fn peer_by_raft_id(&self, raft_id: u64) -> Option<&Peer> {
        self.settings
            .peers
            .iter()
            .find(|peer| peer.raft_id == raft_id)
    }

    fn send(&self, messages: Vec<Message>) {
        for message in messages {
            let Some(index) = self
                .settings
                .peers
                .iter()
                .position(|peer| peer.raft_id == message.to)
            else {
                continue;
            };
            let outbox = &self.outboxes[index];
            let mut queue = outbox.messages.borrow_mut();
            if queue.len() >= OUTBOX_MESSAGES_MAX {
                queue.pop_front();
            }
            queue.push_back(message);
            outbox.ready.notify();
        }
    }

    fn apply(&self, committed: Vec<Committed>) {
        let (leader, term) = {
            let replica = self.replica.borrow();
            (replica.is_leader(), replica.term())
        };
        for entry in committed {
            self.applied.set(entry.index);
            if let Some(record) = entry.record {
                let mut node = self.node.borrow_mut();
                for event in &record.events {
                    node.apply(event);
                }
                drop(node);
                if let Some(waiting) = self.pending.borrow_mut().remove(&record.tag) {
                    waiting.send(Outcome::Applied);
                }
            }
            if leader && entry.term == term {
                self.serving_term.set(Some(term));
            }
        }
    }

    /// Hands queued messages, proposals and unreachable peers to the node (between readies).
    fn feed(&self) {
        let mut replica = self.replica.borrow_mut();
        for message in self.inbox.borrow_mut().drain(..) {
            replica.step(message);
        }
        for id in self.unreachable.borrow_mut().drain(..) {
            replica.report_unreachable(id);
        }
        for record in self.proposals.borrow_mut().drain(..) {
            if let Err(error) = replica.propose(&record) {
                log::info!("controller: proposal refused: {error}");
                if let Some(waiting) = self.pending.borrow_mut().remove(&record.tag) {
                    waiting.send(Outcome::NotLeader);
                }
            }
        }
    }

    fn nothing_to_feed(&self) -> bool {
        self.inbox.borrow().is_empty()
            && self.proposals.borrow().is_empty()
            && self.unreachable.borrow().is_empty()
    }

    /// Forgets the leader's duties when it no longer leads.
    fn check_leadership(&self) {
        let (leader, term) = {
            let replica = self.replica.borrow();
            (replica.is_leader(), replica.term())
        };
        if !leader || self.serving_term.get().is_some_and(|served| served != term) {
            self.serving_term.set(None);
            for (_, waiting) in self.pending.borrow_mut().drain() {
                waiting.send(Outcome::NotLeader);
            }
        }
    }

    async fn take_turn(&self) -> TurnGuard<'_> {
        self.turn.until(|| !self.busy.get()).await;
        self.busy.set(true);
        TurnGuard(self)
    }

    /// Checks `request` on the leader and, when it changes the state, answers once its events
    /// are committed and applied. `None`: this member cannot answer (not the leader).
    async fn decide(&self, request: &Request) -> Option<Result<Response, super::Refusal>> {
        let _turn = self.take_turn().await;
        self.serving_term.get()?;
        let handled = self.node.borrow().handle(request, self.now_ms());
        let (events, response) = match handled {
            Ok(handled) => handled,
            Err(refusal) => return Some(Err(refusal)),
        };
        if events.is_empty() {
            return Some(Ok(response));
        }
        let tag = self.next_tag.get();
        self.next_tag.set(tag.wrapping_add(1));
        let (sender, receiver) = oneshot();
        self.pending.borrow_mut().insert(tag, sender);
        self.proposals.borrow_mut().push(Record { tag, events });
        self.wake.notify();
        match race(receiver.recv(), sleep(COMMIT_WAIT)).await {
            Either::Left(Some(Outcome::Applied)) => Some(Ok(response)),
            Either::Left(_) => None,
            Either::Right(()) => {
                self.pending.borrow_mut().remove(&tag);
                None
            }
        }
    }

    /// After an election: NOTIFY_BROKER_ROLE_CHANGED to the set's live members.
    fn notify_elected(&self, response: &Response) {
        let Response::Elected {
            master,
            sync_state_set,
            notify,
            ..
        } = response
        else {
            return;
        };
        if !self.settings.notify_broker_role_changed {
            return;
        }
        let mut command = RemotingCommand::request(RequestCode::NOTIFY_BROKER_ROLE_CHANGED, 0)
            .with_header(&NotifyBrokerRoleChangedRequestHeader {
                master_address: Some(master.addr.clone()),
                master_epoch: Some(master.master_epoch),
                sync_state_set_epoch: Some(sync_state_set.epoch),
                master_broker_id: Some(master.broker_id),
            })
            .with_body(
                WireSyncStateSet {
                    sync_state_set: sync_state_set.members.clone(),
                    sync_state_set_epoch: sync_state_set.epoch,
                }
                .encode(),
            );
        command.set_oneway();
        let frame = encode_to_bytes(&command);
        for addr in notify.values() {
            let Ok(addr) = addr.parse::<SocketAddr>() else {
                log::warn!("controller: broker address {addr} is not ip:port; not notified");
                continue;
            };
            let frame = frame.clone();
            spawn_detached(TaskClass::Admin, async move {
                let sent = async {
                    let stream = connect(addr).await?;
                    stream.write_all(&frame).await?;
                    stream.shutdown();
                    Ok::<(), std::io::Error>(())
                };
                if let Err(error) = sent.await {
                    log::info!("controller: cannot notify broker {addr}: {error}");
                }
            });
        }
    }

    fn metadata(&self, command: &RemotingCommand) -> RemotingCommand {
        let replica = self.replica.borrow();
        let leader = replica.leader_id().and_then(|id| self.peer_by_raft_id(id));
        let peers: String = self
            .settings
            .peers
            .iter()
            .map(|peer| format!("{}:{};", peer.name, peer.host_port))
            .collect();
        RemotingCommand::response_to(command, ResponseCode::SUCCESS).with_header(
            &GetMetaDataResponseHeader {
                group: Some(self.settings.group.clone()),
                controller_leader_id: leader.map(|peer| peer.name.clone()),
                controller_leader_address: leader.map(|peer| peer.host_port.clone()),
                is_leader: replica.is_leader(),
                peers: Some(peers),
            },
        )
    }
}

async fn connect(addr: SocketAddr) -> std::io::Result<Stream> {
    match race(Stream::connect(addr), sleep(CONNECT_TIMEOUT)).await {
        Either::Left(stream) => {
            let stream = stream?;
            stream.set_nodelay(true)?;
            Ok(stream)
        }
        Either::Right(()) => Err(std::io::ErrorKind::TimedOut.into()),
    }
}

fn dispatch_table(shared: &Rc<Shared>) -> DispatchTable {
    let mut table = DispatchTable::new();
    let raft = shared.clone();
    table.register_fn(RequestCode::from(RAFT_MESSAGE_CODE), move |_, command| {
        match Message::parse_from_bytes(&command.body) {
            Ok(message) => {
                raft.inbox.borrow_mut().push(message);
                raft.wake.notify();
            }
            Err(error) => log::warn!("controller: unreadable Raft message: {error}"),
        }
        async { None }
    });
    let heartbeats = shared.clone();
    table.register_fn(RequestCode::BROKER_HEARTBEAT, move |context, command| {
        let answer = match wire::heartbeat(&command) {
            Ok(heartbeat) => {
                let key = (
                    heartbeat.cluster_name.clone(),
                    heartbeat.broker_name.clone(),
                    heartbeat.broker_id,
                );
                heartbeats
                    .channels
                    .borrow_mut()
                    .entry(context.connection.id())
                    .or_default()
                    .insert(key);
                let now_ms = heartbeats.now_ms();
                heartbeats
                    .node
                    .borrow_mut()
                    .on_heartbeat(&heartbeat, now_ms);
                RemotingCommand::response_to(&command, ResponseCode::SUCCESS)
            }
            Err(answer) => answer,
        };
        async { Some(answer) }
    });
    let metadata = shared.clone();
    table.register_fn(
        RequestCode::CONTROLLER_GET_METADATA_INFO,
        move |_, command| {
            let answer = metadata.metadata(&command);
            async { Some(answer) }
        },
    );
    for code in [
        RequestCode::CONTROLLER_GET_NEXT_BROKER_ID,
        RequestCode::CONTROLLER_APPLY_BROKER_ID,
        RequestCode::CONTROLLER_REGISTER_BROKER,
        RequestCode::CONTROLLER_GET_REPLICA_INFO,
        RequestCode::CONTROLLER_ELECT_MASTER,
        RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET,
    ] {
        let shared = shared.clone();
        table.register_fn(code, move |_, command| {
            let shared = shared.clone();
            async move { Some(answer(&shared, &command).await) }
        });
    }
    table
}

async fn answer(shared: &Shared, command: &RemotingCommand) -> RemotingCommand {
    let request = match wire::decode(command) {
        Ok(request) => request,
        Err(answer) => return answer,
    };
    let not_leader = || {
        RemotingCommand::error_to(
            command,
            ResponseCode::CONTROLLER_NOT_LEADER,
            NOT_LEADER_REMARK,
        )
    };
    if shared.serving_term.get().is_none() {
        return not_leader();
    }
    match shared.decide(&request).await {
        Some(Ok(response)) => {
            shared.notify_elected(&response);
            wire::encode(command, &request, &response)
        }
        Some(Err(refusal)) => wire::refusal(command, &refusal),
        None => not_leader(),
    }
}

/// Ticks the Raft node, persists what it asks, sends its messages and applies what commits.
async fn raft_loop(shared: Rc<Shared>, store: RaftStore, stop: StopSignal) {
    let tick = Duration::from_millis(TICK_MS);
    let mut next_tick = monotonic_now() + tick;
    let mut store = Some(store);
    while !stop.is_triggered() {
        let now = monotonic_now();
        if now >= next_tick {
            shared.replica.borrow_mut().tick();
            next_tick = now + tick;
        }
        shared.feed();
        loop {
            let work = shared.replica.borrow_mut().ready();
            let Some(mut work) = work else { break };
            shared.send(std::mem::take(&mut work.send));
            if !work.entries.is_empty() || work.hard_state.is_some() {
                let Some(mut owned) = store.take() else { break };
                let entries = work.entries.clone();
                let hard_state = work.hard_state.clone();
                let snapshot = work.snapshot.clone();
                let (returned, written) = run_blocking(move || {
                    let written = match (&snapshot, &hard_state) {
                        (Some(snapshot), Some(hard_state)) => {
                            owned.save_snapshot(snapshot, &entries, hard_state)
                        }
                        _ => owned.append(&entries, hard_state.as_ref()),
                    };
                    (owned, written)
                })
                .await;
                store = Some(returned);
                if let Err(error) = written {
                    // A vote or entry that may not be durable cannot be acknowledged, and
                    // Raft has no way to take it back: stop, as a failed commit-log write does.
                    fatal(FatalReason::StorageIo, &error.to_string());
                }
            }
            let persisted = shared.replica.borrow_mut().persisted(work);
            match persisted {
                Ok(persisted) => {
                    shared.send(persisted.send);
                    if let Some(data) = persisted.restored {
                        match serde_json::from_slice::<ControllerState>(&data) {
                            Ok(state) => shared.node.borrow_mut().restore(state),
                            Err(error) => fatal(
                                FatalReason::StorageIo,
                                &format!("controller snapshot from the leader: {error}"),
                            ),
                        }
                    }
                    shared.apply(persisted.committed);
                }
                Err(error) => fatal(FatalReason::StorageIo, &error.to_string()),
            }
        }
        shared.check_leadership();
        if let Some(owned) = store.take() {
            store = Some(compact_if_due(&shared, owned).await);
        }
        let wait = next_tick.saturating_duration_since(monotonic_now());
        if shared.nothing_to_feed() && !wait.is_zero() {
            race(shared.wake.notified(), race(sleep(wait), stop.wait())).await;
        }
    }
}

/// Compacts the log into a snapshot of the state once enough entries were applied past the
/// last snapshot, and makes the compaction durable.
async fn compact_if_due(shared: &Shared, mut store: RaftStore) -> RaftStore {
    let applied = shared.applied.get();
    let since = applied.saturating_sub(shared.replica.borrow().snapshot_index());
    if since < shared.settings.compact_after_entries {
        return store;
    }
    let compaction = serde_json::to_vec(shared.node.borrow().state())
        .map_err(ReplicaError::from)
        .and_then(|data| shared.replica.borrow_mut().compact(applied, data));
    let compaction = match compaction {
        Ok(compaction) => compaction,
        Err(error) => fatal(
            FatalReason::StorageIo,
            &format!("controller compaction: {error}"),
        ),
    };
    let (store, saved) = run_blocking(move || {
        let saved = store.save_snapshot(
            &compaction.snapshot,
            &compaction.entries_after,
            &compaction.hard_state,
        );
        (store, saved)
    })
    .await;
    if let Err(error) = saved {
        fatal(FatalReason::StorageIo, &error.to_string());
    }
    log::info!("controller: log compacted into a snapshot at index {applied}");
    store
}

/// Keeps a connection to peer `index` and writes the Raft messages queued for it.
async fn peer_sender(shared: Rc<Shared>, index: usize, stop: StopSignal) {
    let peer = shared.settings.peers[index].clone();
    let outbox = &shared.outboxes[index];
    let mut connection: Option<Stream> = None;
    while !stop.is_triggered() {
        if outbox.messages.borrow().is_empty() {
            race(outbox.ready.notified(), stop.wait()).await;
            continue;
        }
        let stream = match connection.take() {
            Some(stream) => stream,
            None => match connect(peer.addr).await {
                Ok(stream) => stream,
                Err(error) => {
                    log::debug!("controller: peer {} unreachable: {error}", peer.name);
                    outbox.messages.borrow_mut().clear();
                    shared.unreachable.borrow_mut().push(peer.raft_id);
                    shared.wake.notify();
                    race(sleep(RECONNECT_PAUSE), stop.wait()).await;
                    continue;
                }
            },
        };
        let mut frames = Vec::new();
        for message in outbox.messages.borrow_mut().drain(..) {
            let Ok(body) = message.write_to_bytes() else {
                continue;
            };
            let mut command =
                RemotingCommand::request(RequestCode::from(RAFT_MESSAGE_CODE), 0).with_body(body);
            command.set_oneway();
            frames.extend_from_slice(&encode_to_bytes(&command));
        }
        match stream.write_all(&frames).await {
            Ok(()) => connection = Some(stream),
            Err(error) => {
                log::debug!("controller: peer {} connection lost: {error}", peer.name);
                shared.unreachable.borrow_mut().push(peer.raft_id);
                shared.wake.notify();
            }
        }
    }
}

/// On the leader, every `scanNotActiveBrokerInterval`: elections for broker sets whose
/// master stopped heartbeating, then the table is trimmed.
async fn scan_loop(shared: Rc<Shared>, stop: StopSignal) {
    while !stop.is_triggered() {
        let period = race(
            sleep(shared.settings.scan_interval),
            shared.scan_now.notified(),
        );
        race(period, stop.wait()).await;
        if shared.stopped() || shared.serving_term.get().is_none() {
            continue;
        }
        let now_ms = shared.now_ms();
        let elections = shared.node.borrow().expired(now_ms);
        for request in elections {
            match shared.decide(&request).await {
                Some(Ok(response)) => {
                    log::info!("controller: {request:?} after lost heartbeats: {response:?}");
                    shared.notify_elected(&response);
                }
                Some(Err(refusal)) => log::info!("controller: {request:?}: {refusal}"),
                None => break,
            }
        }
        shared.node.borrow_mut().forget_expired(shared.now_ms());
    }
}
