//! `comet-rt`: the runtime seam of the broker and the name server.
//!
//! This is the only crate that names glommio. Everything else is written against the small
//! types and functions here (shards, clock, files, network, cross-shard channels, shutdown),
//! which keeps the runtime swappable and makes a simulation backend possible.

pub mod allocator;
pub mod clock;
pub mod fatal;
pub mod io;
pub mod io_count;
pub mod local;
pub mod mesh;
pub mod net;
pub mod pool;
pub mod shard_id;
pub mod shutdown;
pub mod sync;
pub mod task_class;

pub use comet_fs as fs;
pub use shard_id::ShardId;
