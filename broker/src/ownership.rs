//! Which shard owns a message queue.
//!
//! Every queue `(topic, queueId)` is owned by exactly one shard: `(hash(topic) + queueId) %
//! shards`. The owner holds the queue's consume queue, its consumer offsets and its long-poll
//! waiters, and appends its messages to its own commit log, which makes per-queue order and
//! offsets correct without locks. Consecutive queue ids of a topic land on consecutive shards,
//! so a topic's load spreads evenly.
//!
//! The hash is FNV-1a over the topic's UTF-8 bytes: stable across processes, versions and
//! platforms (ownership must not change between a crash and the recovery that follows).

use comet_rt::ShardId;

/// FNV-1a, 32 bits.
pub fn topic_hash(topic: &str) -> u32 {
    let mut hash: u32 = 0x811C_9DC5;
    for byte in topic.bytes() {
        hash ^= u32::from(byte);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    hash
}

/// The shard owning `(topic, queue_id)` among `shard_count` shards.
pub fn owner_shard(topic: &str, queue_id: i32, shard_count: usize) -> ShardId {
    assert!(shard_count >= 1, "no shards");
    assert!(shard_count <= comet_rt::shard_id::SHARD_COUNT_MAX);
    // A negative queue id never reaches ownership (it is resolved to a real queue first), but
    // a hostile one must not panic: rem_euclid keeps the index in range.
    let mixed = i64::from(topic_hash(topic)) + i64::from(queue_id);
    let index = mixed.rem_euclid(shard_count as i64);
    ShardId(u16::try_from(index).expect("index below SHARD_COUNT_MAX"))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the function is deterministic, in range, and spreads a topic's queues over
    // every shard.
    #[test]
    fn ownership_is_stable_and_spread() {
        assert_eq!(topic_hash("TopicTest"), topic_hash("TopicTest"));
        for shards in 1..=8usize {
            let owners: std::collections::HashSet<_> = (0..i32::try_from(shards).unwrap())
                .map(|q| owner_shard("TopicTest", q, shards))
                .collect();
            assert_eq!(owners.len(), shards, "{shards} shards");
        }
        assert!(owner_shard("t", -5, 3).index() < 3);
        assert!(owner_shard("t", i32::MAX, 3).index() < 3);
    }
}
