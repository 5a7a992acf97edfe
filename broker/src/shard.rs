//! Per-shard broker state: the shard's store, the consumer offsets of the queues it owns,
//! and its end of the mesh to the other shards.
//!
//! A `ShardBroker` lives on exactly one shard (it is `Rc`, not `Send`); only its shard's
//! tasks touch it. Broker-wide state is in [`Metadata`], shared by all shards.

use std::cell::{Cell, OnceCell, RefCell};
use std::net::SocketAddr;
use std::path::Path;
use std::rc::Rc;
use std::sync::{Arc, MutexGuard};

use arc_swap::Guard;

use comet_net::{ConnectionId, Server};
use comet_proto::message_id::UniqueKeyGenerator;
use comet_proto::RemotingCommand;
use comet_rt::mesh::MeshPeer;
use comet_rt::ShardId;
use comet_store::Store;

use crate::clients::ClientRegistry;
use crate::config::BrokerConfig;
use crate::controller_role::ControllerRole;
use crate::live_config::LiveConfig;
use crate::lock::LockTable;
use crate::metadata::Metadata;
use crate::metrics::Metrics;
use crate::offset::OffsetTable;
use crate::ownership::owner_shard;
use crate::replication_state::ReplicationState;
use crate::stats::ItemStats;
use crate::subscription::GroupTable;
use crate::topic::TopicTable;
use crate::traffic::{ShardTraffic, Traffic};

/// Who sent a request: the connection it arrived on. Plain data, so it can cross shards.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestContext {
    /// The client's address (the born host of what it sends).
    pub peer: SocketAddr,
    /// The connection (and the shard that owns it).
    pub connection: ConnectionId,
}

/// What travels between shards.
pub enum ShardCall {
    /// A client request for a queue the target shard owns; the reply is the response
    /// (`None` for one-way requests).
    Request {
        /// Where it came from.
        context: RequestContext,
        /// The request.
        command: RemotingCommand,
    },
    /// A broker-to-client request for a connection that lives on the target shard.
    ToClient {
        /// Target connection.
        connection: ConnectionId,
        /// The request (one-way ones get no reply).
        command: RemotingCommand,
    },
    /// A broker-to-client request that expects an answer, for a connection that lives on the
    /// target shard; the reply is the client's answer, or the error answer for the admin
    /// when none came within `limit` (see `crate::processor::ask_client`).
    AskClient {
        /// Target connection.
        connection: ConnectionId,
        /// Group and client id, for error remarks.
        label: crate::clients::ClientLabel,
        /// The request (two-way).
        command: RemotingCommand,
        /// How long the client may take.
        limit: std::time::Duration,
    },
    /// Records the broker built itself (scheduled delivery, retries, transaction commits) for
    /// queues the target shard owns; the reply is a response whose code says whether the
    /// append is durable.
    Append {
        /// Encoded records (see `crate::reappend`).
        records: Vec<comet_proto::bytes::BytesMut>,
    },
    /// A scrape's request for the target shard's consumer figures: the target computes them
    /// from the queues it owns into its metrics slot (`crate::metrics::consumer`); the
    /// reply is `None` once they are there.
    ConsumerMetrics,
    /// A slave's replication connection for the target shard's log, accepted and checked by
    /// shard 0's HA listener; the target adopts the socket and streams to it (see
    /// `crate::replication`). The reply is `None` at once.
    Replica {
        /// The connection.
        stream: std::net::TcpStream,
        /// The slave's Hello, naming the target's log.
        hello: comet_replication::wire::Hello,
        /// Bytes read after the Hello.
        buffered: Vec<u8>,
    },
}

/// The reply to a [`ShardCall`].
pub type ShardReply = Option<RemotingCommand>;

/// This shard's end of the mesh.
pub type ShardMesh = Rc<MeshPeer<ShardCall, ShardReply>>;

/// What a shard's broker is made of at start-up (see [`ShardBroker::new`]).
pub struct ShardParts {
    /// This shard.
    pub shard: ShardId,
    /// Number of shards.
    pub shard_count: usize,
    /// The configuration, shared by every shard.
    pub config: Arc<LiveConfig>,
    /// Broker-wide tables.
    pub metadata: Arc<Metadata>,
    /// This shard's store.
    pub store: Store,
    /// `brokerIP1:listenPort`.
    pub store_host: SocketAddr,
    /// The `UNIQ_KEY` generator, shared by every shard.
    pub unique_keys: Arc<UniqueKeyGenerator>,
    /// Broker-wide traffic counters.
    pub traffic: Arc<Traffic>,
    /// Per-topic and per-group statistics.
    pub stats: Arc<ItemStats>,
    /// The metrics every shard counts into (see `crate::metrics`).
    pub metrics: Arc<Metrics>,
    /// This shard's log replication.
    pub replication: ReplicationState,
    /// How many logs the queues belong to (see [`ShardBroker::queue_logs`]).
    pub queue_logs: usize,
    /// The other logs this shard hosts (a slave with fewer shards than its master has
    /// logs), each with its store and replication state.
    pub hosted: Vec<HostedLog>,
    /// Controller mode: the role the controller decided and the master's write lease.
    pub controller: Option<Arc<ControllerRole>>,
}

/// A log a shard hosts besides its own: on a slave with fewer shards than its master has
/// logs, master log `l` lives on shard `l % shard_count` (see
/// `docs/architecture.md#slave-and-master-shard-counts`). Cloning gives other handles to the
/// same store and state.
#[derive(Clone)]
pub struct HostedLog {
    /// The log's store (log id `l`, under `shard-<l>`).
    pub store: Store,
    /// The log's replication state.
    pub replication: Rc<ReplicationState>,
}

/// The broker as one shard sees it. The layers above reach it through the accessors below,
/// grouped by what they need: who this shard is, the configuration, the broker-wide tables,
/// the store and offsets, the send path, the counters, the connections.
///
/// `shard`, `shard_count`, `config`, `metadata`, `store`, `offsets` and `replication` are
/// still public fields because the replication module reads them directly; everything else
/// uses the accessors, and those fields become private once it does too.
pub struct ShardBroker {
    /// This shard.
    pub shard: ShardId,
    /// Number of shards.
    pub shard_count: usize,
    /// The configuration as it is now (shared; `config.load()` reads the current
    /// `BrokerConfig`, which UPDATE_BROKER_CONFIG replaces).
    pub config: Arc<LiveConfig>,
    /// Broker-wide tables.
    pub metadata: Arc<Metadata>,
    /// This shard's store (its own commit log).
    pub store: Store,
    /// Consumer offsets of the queues this shard owns.
    pub offsets: RefCell<OffsetTable>,
    /// `brokerIP1:listenPort`, written into every record as its store host.
    store_host: SocketAddr,
    /// Generates `UNIQ_KEY` for messages that arrive without one.
    unique_keys: Arc<UniqueKeyGenerator>,
    /// This shard's remoting server (its connections).
    server: OnceCell<Rc<Server>>,
    /// The mesh, set once every shard has joined.
    mesh: OnceCell<ShardMesh>,
    /// Wall clock at start-up, ms.
    boot_timestamp_ms: i64,
    /// Round-robin cursor for sends that let the broker pick the queue.
    queue_cursor: Cell<u32>,
    /// Broker-wide traffic counters (this shard writes only its own slot).
    traffic: Arc<Traffic>,
    /// Per-topic and per-group statistics (this shard writes only its own slot).
    stats: Arc<ItemStats>,
    /// The metrics (this shard counts only into its own slot).
    metrics: Arc<Metrics>,
    /// This shard's log replication: the slaves following it, or the master it follows.
    pub replication: Rc<ReplicationState>,
    /// How many logs the queues belong to: the shard count on a master, the master's log
    /// count on a slave.
    queue_logs: usize,
    /// The other logs this shard hosts.
    hosted: Vec<HostedLog>,
    controller: Option<Arc<ControllerRole>>,
}

impl ShardBroker {
    /// A shard's broker from its parts, with no server or mesh yet ([`ShardBroker::set_mesh`],
    /// [`ShardBroker::set_server`]); its boot time is now.
    pub fn new(parts: ShardParts) -> ShardBroker {
        ShardBroker {
            shard: parts.shard,
            shard_count: parts.shard_count,
            config: parts.config,
            metadata: parts.metadata,
            store: parts.store,
            offsets: RefCell::new(OffsetTable::new()),
            store_host: parts.store_host,
            unique_keys: parts.unique_keys,
            server: OnceCell::new(),
            mesh: OnceCell::new(),
            boot_timestamp_ms: comet_rt::clock::wall_clock_ms(),
            // Shards start their round robin at different queues.
            queue_cursor: Cell::new(u32::from(parts.shard.0)),
            traffic: parts.traffic,
            stats: parts.stats,
            metrics: parts.metrics,
            replication: Rc::new(parts.replication),
            queue_logs: parts.queue_logs,
            hosted: parts.hosted,
            controller: parts.controller,
        }
    }

    /// Controller mode: the role the controller decided and the master's write lease
    /// (`None` when the configuration decides the role).
    pub fn controller(&self) -> Option<&Arc<ControllerRole>> {
        self.controller.as_ref()
    }

    /// This shard.
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    /// `brokerIP1:listenPort`, written into every record as its store host.
    pub fn store_host(&self) -> SocketAddr {
        self.store_host
    }

    /// Wall clock at start-up, ms.
    pub fn boot_timestamp_ms(&self) -> i64 {
        self.boot_timestamp_ms
    }

    /// The configuration in force now (UPDATE_BROKER_CONFIG may replace it between reads).
    pub fn config(&self) -> Guard<Arc<BrokerConfig>> {
        self.config.load()
    }

    /// The live configuration itself: what UPDATE_BROKER_CONFIG changes.
    pub fn live_config(&self) -> &Arc<LiveConfig> {
        &self.config
    }

    /// The topic table (a short critical section: never held across an await).
    pub fn topics(&self) -> MutexGuard<'_, TopicTable> {
        self.metadata.topics()
    }

    /// The subscription groups (a short critical section).
    pub fn groups(&self) -> MutexGuard<'_, GroupTable> {
        self.metadata.groups()
    }

    /// The client registry (a short critical section).
    pub fn clients(&self) -> MutexGuard<'_, ClientRegistry> {
        self.metadata.clients()
    }

    /// The queue locks (a short critical section).
    pub fn locks(&self) -> MutexGuard<'_, LockTable> {
        self.metadata.locks()
    }

    /// Marks the topic table changed (see [`Metadata::mark_topics_changed`]).
    pub fn mark_topics_changed(&self) -> u64 {
        self.metadata.mark_topics_changed()
    }

    /// The broker-wide tables as a whole: persisting them, the registration generations,
    /// the config directory.
    pub fn metadata(&self) -> &Arc<Metadata> {
        &self.metadata
    }

    /// Where the broker's config files live (`<storeRoot>/config`).
    pub fn config_dir(&self) -> &Path {
        self.metadata.config_dir()
    }

    /// This shard's log replication: the slaves following it, or the master it follows.
    pub fn replication(&self) -> &ReplicationState {
        &self.replication
    }

    /// This shard's store (its own commit log).
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Consumer offsets of the queues this shard owns.
    pub fn offsets(&self) -> &RefCell<OffsetTable> {
        &self.offsets
    }

    /// A new `UNIQ_KEY` for a message that arrived without one.
    pub fn unique_key(&self, now_ms: i64) -> String {
        self.unique_keys.next(now_ms)
    }

    /// Round-robin cursor for sends that let the broker pick the queue.
    pub fn queue_cursor(&self) -> &Cell<u32> {
        &self.queue_cursor
    }

    /// Broker-wide traffic counters (this shard writes only its own slot, [`Self::traffic`]).
    pub fn all_traffic(&self) -> &Arc<Traffic> {
        &self.traffic
    }

    /// Per-topic and per-group statistics (this shard writes only its own slot).
    pub fn stats(&self) -> &ItemStats {
        &self.stats
    }

    /// The metrics (this shard counts only into its own slot).
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// This shard's remoting server; present once start-up finished.
    pub fn server(&self) -> Option<&Rc<Server>> {
        self.server.get()
    }

    /// Sets the remoting server (once, at start-up).
    pub fn set_server(&self, server: Rc<Server>) {
        assert!(self.server.set(server).is_ok(), "server set twice");
    }

    /// Sets this shard's end of the mesh (once, when every shard has joined).
    pub fn set_mesh(&self, mesh: ShardMesh) {
        assert!(self.mesh.set(mesh).is_ok(), "mesh set twice");
    }

    /// The shard owning `(topic, queue_id)`: the one hosting the queue's log.
    pub fn owner_of(&self, topic: &str, queue_id: i32) -> ShardId {
        let log = self.log_of(topic, queue_id);
        ShardId(u16::try_from(log % self.shard_count).expect("shard count is bounded"))
    }

    /// The log holding the records of `(topic, queue_id)` (its index among the
    /// [`Self::queue_logs`]).
    pub fn log_of(&self, topic: &str, queue_id: i32) -> usize {
        owner_shard(topic, queue_id, self.queue_logs).index()
    }

    /// How many logs the queues belong to: the shard count on a master; on a slave the
    /// number of logs its master has, which this slave's shards host (log `l` on shard
    /// `l % shard_count`).
    pub fn queue_logs(&self) -> usize {
        self.queue_logs
    }

    /// The shard hosting log `log`, if the queues belong to it.
    pub fn host_of_log(&self, log: usize) -> Option<ShardId> {
        (log < self.queue_logs)
            .then(|| ShardId(u16::try_from(log % self.shard_count).expect("bounded")))
    }

    /// The store holding the consume queue of `(topic, queue_id)`, a queue this shard owns:
    /// its own store, or the store of a log it hosts.
    pub fn queue_store(&self, topic: &str, queue_id: i32) -> &Store {
        let log = self.log_of(topic, queue_id);
        self.log_store(u8::try_from(log).unwrap_or(u8::MAX))
            .unwrap_or(&self.store)
    }

    /// The store writing log `log_id` on this shard (its own, or one it hosts).
    pub fn log_store(&self, log_id: u8) -> Option<&Store> {
        if self.replication.log_id == log_id {
            return Some(&self.store);
        }
        self.hosted
            .iter()
            .find(|hosted| hosted.replication.log_id == log_id)
            .map(|hosted| &hosted.store)
    }

    /// The logs this shard hosts besides its own.
    pub fn hosted_logs(&self) -> &[HostedLog] {
        &self.hosted
    }

    /// This shard's own log as a [`HostedLog`] handle.
    pub fn own_log(&self) -> HostedLog {
        HostedLog {
            store: self.store.clone(),
            replication: self.replication.clone(),
        }
    }

    /// True when this shard owns `(topic, queue_id)`.
    pub fn owns(&self, topic: &str, queue_id: i32) -> bool {
        self.owner_of(topic, queue_id) == self.shard
    }

    /// This shard's traffic counters.
    pub fn traffic(&self) -> &ShardTraffic {
        self.traffic.shard(self.shard.index())
    }

    /// The mesh; present once start-up finished.
    pub fn mesh(&self) -> &ShardMesh {
        self.mesh.get().expect("mesh joined before serving")
    }
}
