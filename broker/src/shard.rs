//! Per-shard broker state: the shard's store, the consumer offsets of the queues it owns,
//! and its end of the mesh to the other shards.
//!
//! A `ShardBroker` lives on exactly one shard (it is `Rc`, not `Send`); only its shard's
//! tasks touch it. Broker-wide state is in [`Metadata`], shared by all shards.

use std::cell::{Cell, OnceCell, RefCell};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;

use comet_net::{ConnectionId, Server};
use comet_proto::message_id::UniqueKeyGenerator;
use comet_proto::RemotingCommand;
use comet_rt::mesh::MeshPeer;
use comet_rt::ShardId;
use comet_store::Store;

use crate::live_config::LiveConfig;
use crate::metadata::Metadata;
use crate::offset::OffsetTable;
use crate::ownership::owner_shard;
use crate::stats::ItemStats;
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

/// The broker as one shard sees it.
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
    pub store_host: SocketAddr,
    /// Generates `UNIQ_KEY` for messages that arrive without one.
    pub unique_keys: Arc<UniqueKeyGenerator>,
    /// This shard's remoting server (its connections).
    pub server: OnceCell<Rc<Server>>,
    /// The mesh, set once every shard has joined.
    pub mesh: OnceCell<ShardMesh>,
    /// Wall clock at start-up, ms.
    pub boot_timestamp_ms: i64,
    /// Round-robin cursor for sends that let the broker pick the queue.
    pub queue_cursor: Cell<u32>,
    /// Broker-wide traffic counters (this shard writes only its own slot).
    pub traffic: Arc<Traffic>,
    /// Per-topic and per-group statistics (this shard writes only its own slot).
    pub stats: Arc<ItemStats>,
    /// This shard's log replication: the slaves following it, or the master it follows.
    pub replication: crate::replication::ReplicationState,
}

impl ShardBroker {
    /// The shard owning `(topic, queue_id)`.
    pub fn owner_of(&self, topic: &str, queue_id: i32) -> ShardId {
        owner_shard(topic, queue_id, self.shard_count)
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
