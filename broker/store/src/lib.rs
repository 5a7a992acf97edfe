//! `comet-store`: the per-shard store of the Comet broker.
//!
//! One [`Store`] per shard, driven by that shard's executor; nothing in it is shared across
//! shards (`Rc`/`RefCell` inside, no locks). Layout under the store root:
//!
//! ```text
//! <root>/commitlog/<log id>/<20-digit start position>   direct-I/O segments (commit_log)
//! <root>/consumequeue/<topic>/<queueId>/<20-digit byte> 20-byte entries (consume_queue)
//! <root>/index/<log id>/<20-digit segment start>        key index entries (index)
//! <root>/checkpoint/<log id>                            two checksummed slots (checkpoint)
//! <root>/checkpoint/<log id>.queues                     queue min/max table (queue_table)
//! <root>/abort                                          present while running (crash marker)
//! <root>/lock                                           flock held while open
//! ```
//!
//! Physical offsets carry the log id in their top bits ([`offset`]), so an offset message id
//! finds its log, and a consume queue may point into several logs: when the shard count
//! changes, queues are handed to their new owner's store without moving records ([`remap`]),
//! and reads of older entries open the other log's segments read-only; logs no shard writes
//! any more are deleted and queried by the store that adopts them (module `orphan`). The
//! write path (append, group commit, visibility) is described in modules `append` and
//! `flush`; recovery in [`recovery`]; replication (a master's raw log reads, a slave's
//! checked appends of the same bytes at the same positions) in [`replica`].
//!
//! # Layers
//!
//! Each module uses only modules below it in this list (`tests/layers.rs` checks it), so the
//! store reads top-down: the facade, the parts that operate on the shard state, the state,
//! the on-disk formats, the leaves.
//!
//! - `store`: the facade; owns the shard state and the adopted logs, opens, starts the
//!   background tasks, shuts down, and hands each public call to the part below.
//! - `retention`: the disk-full state and deleting expired segments of the own and adopted
//!   logs.
//! - `orphan`: logs of shards that no longer run: key queries, deleting, retiring.
//! - `maintenance`: derived-file flush and checkpoint, key-index sealing and linking, the
//!   maintenance lock, queue min offsets past deleted records.
//! - `replica`: replication: raw log reads for a master, checked appends of a master's bytes
//!   for a slave, the confirmed position that limits visibility.
//! - `read`: the read path: pulls, lookups by time, offset and key, waits for new data.
//! - `append`: validates records, copies them into the log, spare segments, durable waits.
//! - `flush`: the flush lanes (group commit) and dispatch of newly durable records.
//! - `warm`: writes zeros ahead of the write position.
//! - `recovery`: locks, loads and verifies the files at open, producing the shard state.
//! - `queue_repair`: rebuilds one short consume queue from the commit log at open, and the
//!   progress log of long recovery steps.
//! - `shard`: the shard state the parts above share, and the counters.
//! - `flights`: bookkeeping of the flushes planned and in flight.
//! - `cq_files`: the store's bounded pool of open consume-queue files, and the flush of one
//!   queue through it.
//! - `queues`: per-queue state, and dispatch of one record into its queue and the key index.
//! - `index`: the key index of one log: in-memory chains over append-order files.
//! - `sealed_index`: a segment's key index sorted by hash in one file.
//! - `index_entry`: the 32-byte key-index entry both index files hold.
//! - `consume_queue`: one queue's files of 20-byte entries and its hot tail in memory.
//! - `cq_cache`: the store's bounded cache of consume-queue blocks read from disk.
//! - `checkpoint`: the two-slot checkpoint file.
//! - `commit_log`: segments, the open chunk, the read cache and flush plans of the log.
//! - `read_windows`: the store's bounded windows of the log read from disk, kept across
//!   pulls.
//! - `config`: [`StoreConfig`] and [`FlushPolicy`].
//! - `remap`: hands queues to their new owner stores when the shard count changes, with
//!   their queue-table lines.
//! - `queue_table`: each queue's min and max as its files held them at the checkpoint.
//! - `error`: [`StoreError`].
//! - `offset`: [`LogId`], [`PhysicalOffset`], [`QueueOffset`] and file names.
//! - `recovery_progress`: [`RecoveryProgress`], how far an open has got, for readers on
//!   other threads.
//! - `histogram`: [`Histogram`], the fixed-bucket histograms the store records into, and
//!   [`RecoveryFigures`].
//! - `limits`: sizes and counts the store is built around.
//!
//! ```no_run
//! use comet_store::{LogId, Store, StoreConfig};
//! comet_rt::local::run_local("example", async {
//!     let config = StoreConfig::new("/var/lib/comet/store", LogId::new(0).unwrap());
//!     let store = Store::open(config).await.unwrap();
//!     // records: encoded with comet_proto::message::encode_record
//!     # let records: Vec<Vec<u8>> = Vec::new();
//!     let appended = store.append(&records).await.unwrap();
//!     store.shutdown().await.unwrap();
//! });
//! ```

pub(crate) mod append;
pub mod checkpoint;
pub(crate) mod commit_log;
pub mod config;
pub mod consume_queue;
pub(crate) mod cq_cache;
pub(crate) mod cq_files;
pub mod error;
pub(crate) mod flights;
pub(crate) mod flush;
pub mod histogram;
pub mod index;
pub(crate) mod index_entry;
pub mod limits;
pub(crate) mod maintenance;
pub mod offset;
pub(crate) mod orphan;
pub(crate) mod queue_repair;
pub(crate) mod queue_table;
pub(crate) mod queues;
pub mod read;
pub(crate) mod read_windows;
pub mod recovery;
pub mod recovery_progress;
pub mod remap;
pub mod replica;
pub(crate) mod retention;
pub(crate) mod sealed_index;
pub(crate) mod shard;
pub mod store;
pub(crate) mod warm;

pub use config::{FlushPolicy, OwnsQueue, StoreConfig};
pub use error::{ReplicaFault, StoreError, TruncateFault};
pub use histogram::{Histogram, RecoveryFigures, StoreHistograms};
pub use offset::{LogId, PhysicalOffset, QueueOffset};
pub use read::{GetResult, GetStatus, MessageFilter, TimeBoundary};
pub use recovery_progress::{RecoveryProgress, RecoveryStatus};
pub use replica::LogChunk;
pub use retention::local_hour;
pub use store::{
    AppendedRecord, ConsumeQueueMemory, ReadWindowMemory, Store, StoreMemory, StoreStats,
};
