//! The consume-queue block cache: one per store, bounded in bytes
//! (`StoreConfig::cq_cache_bytes`), holding blocks of consume-queue files that readers
//! fetched from disk (cold ranges: a backlog far behind the tail, lookups by time). A block
//! is [`CQ_BLOCK_ENTRIES`](crate::limits::CQ_BLOCK_ENTRIES) entries of one queue in their
//! 20-byte file form (20 KiB, whole pages), or fewer when the queue's flushed entries end
//! inside it; the least recently used block goes first. Hot tails live in the queues
//! themselves (`consume_queue`), never here.

use std::collections::{BTreeMap, HashMap};

use crate::limits::{CQ_BLOCK_ENTRIES, CQ_ENTRY_BYTES};

/// Bytes of a whole block (20 KiB: fits any usize).
#[allow(clippy::cast_possible_truncation)]
const BLOCK_BYTES: usize = (CQ_BLOCK_ENTRIES * CQ_ENTRY_BYTES) as usize;

/// A block: (the queue's cache key, queue offset of the block's first entry).
pub(crate) type BlockKey = (u64, u64);

struct CachedBlock {
    /// Counted by capacity: what its allocation holds.
    bytes: Vec<u8>,
    used_at: u64,
}

/// The cache (see the module docs). Shard-local.
pub(crate) struct CqCache {
    bound_bytes: usize,
    held_bytes: usize,
    clock: u64,
    blocks: HashMap<BlockKey, CachedBlock>,
    /// Blocks by last use, oldest first.
    by_use: BTreeMap<u64, BlockKey>,
    /// Largest `held_bytes` ever seen (tests and metrics check it stays within the bound).
    peak_bytes: usize,
}

impl CqCache {
    /// An empty cache holding at most `bound_bytes` of blocks.
    pub(crate) fn new(bound_bytes: usize) -> CqCache {
        CqCache {
            bound_bytes,
            held_bytes: 0,
            clock: 0,
            blocks: HashMap::new(),
            by_use: BTreeMap::new(),
            peak_bytes: 0,
        }
    }

    /// The bytes of a cached block, marked as just used.
    pub(crate) fn get(&mut self, key: BlockKey) -> Option<&[u8]> {
        self.clock += 1;
        let block = self.blocks.get_mut(&key)?;
        self.by_use.remove(&block.used_at);
        block.used_at = self.clock;
        self.by_use.insert(self.clock, key);
        Some(&block.bytes)
    }

    /// Caches `bytes` as block `key` (replacing an older copy), evicting the least recently
    /// used blocks to stay within the bound; a block larger than the bound is not kept.
    pub(crate) fn insert(&mut self, key: BlockKey, bytes: Vec<u8>) {
        self.remove(key);
        if bytes.capacity() > self.bound_bytes {
            return;
        }
        self.evict_for(bytes.capacity());
        self.clock += 1;
        self.held_bytes += bytes.capacity();
        self.peak_bytes = self.peak_bytes.max(self.held_bytes);
        let block = CachedBlock {
            bytes,
            used_at: self.clock,
        };
        self.blocks.insert(key, block);
        self.by_use.insert(self.clock, key);
        assert!(
            self.held_bytes <= self.bound_bytes,
            "cache within its bound"
        );
    }

    /// Evicts the least recently used blocks until `bytes` more fit the bound.
    fn evict_for(&mut self, bytes: usize) {
        while self.held_bytes + bytes > self.bound_bytes {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            if let Some(block) = self.blocks.remove(&oldest) {
                self.held_bytes -= block.bytes.capacity();
            }
        }
    }

    /// Extends block `key` with `bytes` at byte `at` of it: entries leaving a queue's hot
    /// tail join the cache, so a reader a little behind the tail still reads no file. Kept
    /// only where the cached block ends exactly at `at` (or `at` starts the block). A block
    /// started here gets a whole block's room at once, so it grows in place.
    pub(crate) fn append(&mut self, key: BlockKey, at: usize, bytes: &[u8]) {
        let held = self.blocks.get(&key).map(|block| block.bytes.len());
        let mut block = match held {
            Some(held) if held == at => self.remove(key).expect("held"),
            _ if at == 0 => Vec::with_capacity(BLOCK_BYTES.max(bytes.len())),
            _ => return,
        };
        block.truncate(at);
        block.extend_from_slice(bytes);
        self.insert(key, block);
    }

    fn remove(&mut self, key: BlockKey) -> Option<Vec<u8>> {
        let block = self.blocks.remove(&key)?;
        self.by_use.remove(&block.used_at);
        self.held_bytes -= block.bytes.capacity();
        Some(block.bytes)
    }

    /// Drops the blocks of queue `queue_key` that start below `first` (their entries were
    /// deleted, or their files went).
    pub(crate) fn forget_below(&mut self, queue_key: u64, first: u64) {
        let gone: Vec<BlockKey> = self
            .blocks
            .keys()
            .filter(|(queue, block)| *queue == queue_key && *block < first)
            .copied()
            .collect();
        for key in gone {
            self.remove(key);
        }
    }

    /// Bytes held now (the blocks' allocations).
    pub(crate) fn held_bytes(&self) -> usize {
        self.held_bytes
    }

    /// Most bytes ever held.
    pub(crate) fn peak_bytes(&self) -> usize {
        self.peak_bytes
    }

    /// The configured bound.
    pub(crate) fn bound_bytes(&self) -> usize {
        self.bound_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the cache evicts the least recently used block to stay within its bound, keeps
    // a block just read, refuses a block larger than the bound, and forgets a queue's old
    // blocks.
    #[test]
    fn evicts_least_recently_used_within_bound() {
        let mut cache = CqCache::new(300);
        cache.insert((1, 0), vec![1; 100]);
        cache.insert((1, 1024), vec![2; 100]);
        cache.insert((2, 0), vec![3; 100]);
        assert!(cache.get((1, 0)).is_some(), "touch the oldest");
        cache.insert((2, 1024), vec![4; 100]);
        assert!(cache.get((1, 1024)).is_none(), "least recently used went");
        assert_eq!(cache.get((1, 0)).map(|bytes| bytes[0]), Some(1));
        assert_eq!(cache.held_bytes(), 300);
        cache.insert((3, 0), vec![5; 301]);
        assert!(cache.get((3, 0)).is_none());
        cache.forget_below(2, 1024);
        assert!(cache.get((2, 0)).is_none());
        assert!(cache.get((2, 1024)).is_some());
        assert_eq!(cache.held_bytes(), 200);
        assert_eq!(cache.peak_bytes(), 300);
        cache.append((2, 1024), 100, &[6; 40]);
        assert_eq!(cache.get((2, 1024)).map(<[u8]>::len), Some(140));
        cache.append((2, 1024), 100, &[7; 20]);
        assert_eq!(
            cache.get((2, 1024)).map(<[u8]>::len),
            Some(140),
            "not where it ends"
        );
        assert!(cache.held_bytes() <= 300);
        // A block started from a hot tail reserves a whole block: more than this bound.
        cache.append((4, 0), 0, &[8; 20]);
        assert!(cache.get((4, 0)).is_none());
        let mut roomy = CqCache::new(2 * BLOCK_BYTES);
        roomy.append((4, 0), 0, &[8; 20]);
        roomy.append((4, 0), 20, &[9; 20]);
        assert_eq!(roomy.get((4, 0)).map(<[u8]>::len), Some(40));
        assert_eq!(
            roomy.held_bytes(),
            BLOCK_BYTES,
            "counted by the room it holds"
        );
    }
}
