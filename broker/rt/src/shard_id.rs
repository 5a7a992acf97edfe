//! Shard identities. A shard is one pinned executor; shards share nothing mutable.

use std::fmt;

/// The index of a shard, `0..shard_count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub u16);

impl ShardId {
    /// The index as a `usize`, for indexing per-shard tables.
    pub fn index(self) -> usize {
        usize::from(self.0)
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "shard-{}", self.0)
    }
}

/// Largest supported shard count: bounds the per-shard tables and the mesh (n² channels).
pub const SHARD_COUNT_MAX: usize = 256;
