//! `comet-broker`: the broker.
//!
//! One pinned executor per core (a shard). Every message queue is owned by one shard
//! ([`ownership`]); a request for a queue is handled where the queue lives, crossing the mesh
//! when the connection that carried it lives elsewhere. Broker-wide metadata (topics,
//! subscription groups, clients, locks) is shared by all shards behind short critical
//! sections; consumer offsets and everything on the data path are shard-local.

pub mod acl;
pub mod clients;
pub mod config;
pub mod delay_level;
pub mod live_config;
pub mod lock;
pub mod metadata;
pub mod namesrv_client;
pub mod offset;
pub mod ownership;
pub mod persist;
pub mod processor;
pub mod reappend;
pub mod register;
pub mod replication;
pub mod routing;
pub mod runtime;
pub mod shard;
pub mod standalone;
pub mod stats;
pub mod subscription;
pub mod timer_wheel;
pub mod topic;
pub mod traffic;
pub mod transaction;
