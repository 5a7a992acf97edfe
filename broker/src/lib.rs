//! `comet-broker`: the broker.
//!
//! One pinned executor per core (a shard). Every message queue is owned by one shard
//! ([`ownership`]); a request for a queue is handled where the queue lives, crossing the mesh
//! when the connection that carried it lives elsewhere. Broker-wide metadata (topics,
//! subscription groups, clients, locks) is shared by all shards behind short critical
//! sections; consumer offsets and everything on the data path are shard-local.
//!
//! # Layers
//!
//! Each module uses only modules below it in this list (`tests/layers.rs` checks it, and that
//! no files import each other in a circle), so the broker reads top-down. Where a lower layer
//! needs something from above, it is passed in: the processors reach a queue's owner through
//! the mesh handler the runtime installs, not by name.
//!
//! Runtime:
//! - `main`: the binary: command line, config file and overrides, exit statuses.
//! - `controller_mode`: `enableControllerMode`: the controller session's driver thread, and
//!   the runs of the shards in the role the controller decided.
//! - `runtime`: starts the shards (store, mesh, server per core), runs the housekeeping loops
//!   and the stop order.
//! - `register`: registration with the name servers.
//! - `standalone`: the name server embedded in stand-alone mode.
//! - `metrics_server`: the metrics endpoint on shard 0 and each shard's figures for it.
//! - `metrics_collect`: what a shard computes from its own queues when a scrape asks.
//! - `start_progress`: progress lines of start-up steps that run past a second.
//!
//! Processors:
//! - `processor`: one module per family of request codes: decodes a request, calls the layers
//!   below, encodes the answer; `handle` sends a request to the shard that serves it.
//!
//! Features:
//! - `replication`: master/slave replication of each shard's log, and a slave's copy of its
//!   master's metadata.
//! - `transaction`: half messages, END_TRANSACTION decisions and the check-back service.
//! - `timer_wheel`: 5.x timed messages: the send-time rewrite and each shard's persistent
//!   timing wheel.
//! - `delay_level`: RocketMQ's 18 delay levels on `SCHEDULE_TOPIC_XXXX`: the send-time
//!   rewrite and the per-level delivery.
//! - `pop`: 5.x pop consumption: pops of one queue, acks, the checkpoint and ack records
//!   and each shard's revive scanner.
//!
//! Shard context:
//! - `routing`: runs a request on the shard that owns its queue, pushes a request to a
//!   client's shard, looks keys up on a queue's owner.
//! - `reappend`: appends records the broker built itself on the shards owning their queues.
//! - `queue_cursor`: reads the broker's own queues (delay levels, timer) from a cursor.
//! - `selected_read`: reads of a queue through a SQL92 selector, for pulls and pops.
//! - `memory`: the machine's memory and Java's rule for what is still served from it.
//! - `shard`: [`shard::ShardBroker`], one shard's view of the broker, and what crosses the
//!   mesh.
//! - `controller_role`: controller mode's decided role, the master's write lease, and the
//!   figures the shards publish for the controller.
//! - `replication_state`: one shard's replication state: its log's epochs, the slaves
//!   following it or the stream it follows.
//!
//! Tables:
//! - `metrics`: the metrics' per-shard counts, their names and labels, and the scrape
//!   requests.
//! - `metadata`: the broker-wide tables behind their locks, and persisting them.
//! - `assignment`: server-side assignment: request modes per topic and group, queue
//!   allocation, the routes it splits.
//! - `clients`: the producers and consumers connected, by group.
//! - `lock`: the queue locks of orderly consumers.
//! - `subscription`: the subscription groups.
//! - `topic`: the topic table: system topics, auto-creation, permissions, data version.
//! - `topic_attributes`: 5.x topic attributes (`message.type`, ...) and their changes.
//! - `offset`: the consumer offsets of the queues a shard owns, and their file.
//! - `stats`: per-topic and per-group statistics.
//! - `traffic`: broker-wide traffic counters and rates.
//! - `namesrv_client`: one request to a name server.
//! - `live_config`: the configuration in force, replaced at run time by
//!   UPDATE_BROKER_CONFIG.
//! - `config`: `BrokerConfig` and its key table.
//! - `acl`: the plain ACL: accounts, permissions, request signatures.
//! - `ownership`: which shard owns a queue.
//! - `persist`: atomic writes and reads of the JSON config files.

pub mod acl;
pub mod assignment;
pub mod clients;
pub mod config;
pub mod controller_mode;
pub mod controller_role;
pub mod delay_level;
pub mod live_config;
pub mod lock;
pub mod memory;
pub mod metadata;
pub mod metrics;
pub mod metrics_collect;
pub mod metrics_server;
pub mod namesrv_client;
pub mod offset;
pub mod ownership;
pub mod persist;
pub mod pop;
pub mod processor;
pub mod queue_cursor;
pub mod reappend;
pub mod register;
pub mod replication;
pub mod replication_state;
pub mod routing;
pub mod runtime;
pub mod selected_read;
pub mod shard;
pub mod standalone;
pub mod start_progress;
pub mod stats;
pub mod subscription;
pub mod timer_wheel;
pub mod topic;
pub mod topic_attributes;
pub mod traffic;
pub mod transaction;
