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
//! <root>/abort                                          present while running (crash marker)
//! <root>/lock                                           flock held while open
//! ```
//!
//! Physical offsets carry the log id in their top bits ([`offset`]), so an offset message id
//! finds its log, and a consume queue may point into several logs: when the shard count
//! changes, queues are handed to their new owner's store without moving records ([`remap`]),
//! and reads of older entries open the other log's segments read-only; logs no shard writes
//! any more are deleted and queried by the store that adopts them (module `orphan`). The write path (append, group commit, visibility) is described in
//! [`store`](crate::store) and [`flush`](crate::flush); recovery in [`recovery`].
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

pub mod checkpoint;
pub(crate) mod commit_log;
pub mod config;
pub mod consume_queue;
pub mod error;
pub(crate) mod flush;
pub mod index;
pub mod limits;
pub(crate) mod maintenance;
pub mod offset;
pub(crate) mod orphan;
pub mod read;
pub mod recovery;
pub mod remap;
pub(crate) mod sealed_index;
pub mod store;
pub(crate) mod sync;
pub(crate) mod warm;

pub use config::{FlushPolicy, OwnsQueue, StoreConfig};
pub use error::StoreError;
pub use offset::{LogId, PhysicalOffset, QueueOffset};
pub use read::{GetResult, GetStatus, MessageFilter, TimeBoundary};
pub use store::{AppendedRecord, Store, StoreStats};
