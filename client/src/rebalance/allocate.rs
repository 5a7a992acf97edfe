//! Queue allocation strategies (docs/protocol.md#queue-lists-and-allocation): pure functions of the
//! sorted queue list and the sorted consumer id list, so every member of a group computes the same
//! split without talking to the others.
//!
//! Both inputs must be sorted the same way on every member (queues by topic, broker name and
//! queue id; consumer ids as strings, see [`java_string_cmp`]). A consumer whose id is not in
//! the list gets nothing.

use std::collections::BTreeMap;

pub use comet_proto::allocate::{
    allocate_averagely, allocate_averagely_by_circle, java_string_cmp,
};
use comet_proto::body::MessageQueue;
use md5::{Digest, Md5};

/// Virtual nodes per consumer on the consistent-hash ring when none is configured (Java's
/// `AllocateMessageQueueConsistentHash()` default).
pub const CONSISTENT_HASH_VIRTUAL_NODES_DEFAULT: u32 = 10;

/// Most virtual nodes per consumer: the ring is rebuilt at every rebalance, so its size is
/// bounded (consumers x virtual nodes entries).
pub const CONSISTENT_HASH_VIRTUAL_NODES_MAX: u32 = 1_000;

/// A queue as the strategies see it. The consistent-hash ring and the by-config list both
/// name a queue by Java's `MessageQueue.toString()`, so members written in Java and in Rust
/// place every queue alike.
pub trait AllocatedQueue: Clone {
    /// `MessageQueue [topic=T, brokerName=B, queueId=N]`.
    fn java_string(&self) -> String;
}

impl AllocatedQueue for MessageQueue {
    fn java_string(&self) -> String {
        format!(
            "MessageQueue [topic={}, brokerName={}, queueId={}]",
            self.topic, self.broker_name, self.queue_id
        )
    }
}

/// How queues are spread over the consumers of a group.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum AllocateStrategy {
    /// Contiguous blocks, the first `n % c` consumers get one extra
    /// (`AllocateMessageQueueAveragely`, the Java default).
    #[default]
    Averagely,
    /// Round robin: consumer `i` takes queues `i`, `i + c`, `i + 2c`, ...
    /// (`AllocateMessageQueueAveragelyByCircle`).
    AveragelyByCircle,
    /// Each queue goes to the consumer after it on a ring of MD5 hashes, `virtual_nodes` points
    /// per consumer, so a member joining or leaving moves few queues
    /// (`AllocateMessageQueueConsistentHash`).
    ConsistentHash {
        /// Points per consumer on the ring, at most [`CONSISTENT_HASH_VIRTUAL_NODES_MAX`].
        virtual_nodes: u32,
    },
    /// Exactly these queues, whatever the other members take (`AllocateMessageQueueByConfig`):
    /// for a consumer pinned to queues by its operator. Queues not in the topic's route are
    /// left out, as nothing could be pulled from them.
    ByConfig(Vec<MessageQueue>),
}

impl AllocateStrategy {
    /// The consistent-hash strategy with Java's default of virtual nodes.
    pub fn consistent_hash() -> Self {
        AllocateStrategy::ConsistentHash {
            virtual_nodes: CONSISTENT_HASH_VIRTUAL_NODES_DEFAULT,
        }
    }

    /// The Java strategy name, as reported in running info.
    pub fn name(&self) -> &'static str {
        match self {
            AllocateStrategy::Averagely => "AVG",
            AllocateStrategy::AveragelyByCircle => "AVG_BY_CIRCLE",
            AllocateStrategy::ConsistentHash { .. } => "CONSISTENT_HASH",
            AllocateStrategy::ByConfig(_) => "CONFIG",
        }
    }

    /// The queues of `mq_all` that `current_cid` owns.
    pub fn allocate<T: AllocatedQueue>(
        &self,
        mq_all: &[T],
        cid_all: &[String],
        current_cid: &str,
    ) -> Vec<T> {
        match self {
            AllocateStrategy::Averagely => allocate_averagely(mq_all, cid_all, current_cid),
            AllocateStrategy::AveragelyByCircle => {
                allocate_averagely_by_circle(mq_all, cid_all, current_cid)
            }
            AllocateStrategy::ConsistentHash { virtual_nodes } => {
                allocate_consistent_hash(mq_all, cid_all, current_cid, *virtual_nodes)
            }
            AllocateStrategy::ByConfig(queues) => {
                let wanted: Vec<String> = queues.iter().map(AllocatedQueue::java_string).collect();
                mq_all
                    .iter()
                    .filter(|queue| wanted.contains(&queue.java_string()))
                    .cloned()
                    .collect()
            }
        }
    }
}

/// `AllocateMessageQueueConsistentHash`: consumer `cid` sits on the ring at the hashes of
/// `"{cid}-{i}"` for `i` in `0..virtual_nodes`; a queue belongs to the first point at or after
/// its own hash, wrapping to the first point. Where two points hash alike the later consumer
/// in `cid_all` keeps it, as Java's ring (a sorted map filled in that order) does.
pub fn allocate_consistent_hash<T: AllocatedQueue>(
    mq_all: &[T],
    cid_all: &[String],
    current_cid: &str,
    virtual_nodes: u32,
) -> Vec<T> {
    assert!(virtual_nodes <= CONSISTENT_HASH_VIRTUAL_NODES_MAX);
    if !cid_all.iter().any(|cid| cid == current_cid) {
        return Vec::new();
    }
    let mut ring: BTreeMap<u32, &str> = BTreeMap::new();
    for cid in cid_all {
        for replica in 0..virtual_nodes {
            ring.insert(ring_hash(&format!("{cid}-{replica}")), cid);
        }
    }
    mq_all
        .iter()
        .filter(|queue| {
            let point = ring_hash(&queue.java_string());
            let owner = ring
                .range(point..)
                .next()
                .or_else(|| ring.iter().next())
                .map(|(_, cid)| *cid);
            owner == Some(current_cid)
        })
        .cloned()
        .collect()
}

/// The ring position of `key`: the first four bytes of its MD5 digest, big-endian (Java's
/// `ConsistentHashRouter.MD5Hash`, whose value is never negative).
fn ring_hash(key: &str) -> u32 {
    let digest = Md5::digest(key.as_bytes());
    u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]])
}

#[cfg(test)]
mod tests {
    use super::*;

    impl AllocatedQueue for usize {
        fn java_string(&self) -> String {
            MessageQueue::new("T", "broker-a", i32::try_from(*self).unwrap()).java_string()
        }
    }

    fn cids(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("cid-{i}")).collect()
    }

    fn split(strategy: &AllocateStrategy, n: usize, c: usize) -> Vec<Vec<usize>> {
        let queues: Vec<usize> = (0..n).collect();
        let cid_all = cids(c);
        cid_all
            .iter()
            .map(|cid| strategy.allocate(&queues, &cid_all, cid))
            .collect()
    }

    // Proves, for every n and c up to 40, that the strategies hand every queue to exactly
    // one consumer and that sizes differ by at most one (the arithmetic itself is pinned in
    // comet_proto::allocate).
    #[test]
    fn every_queue_has_exactly_one_owner() {
        for strategy in [
            AllocateStrategy::Averagely,
            AllocateStrategy::AveragelyByCircle,
        ] {
            for n in 0..40 {
                for c in 1..12 {
                    let parts = split(&strategy, n, c);
                    let mut all: Vec<usize> = parts.iter().flatten().copied().collect();
                    all.sort_unstable();
                    assert_eq!(all, (0..n).collect::<Vec<_>>(), "{strategy:?} n={n} c={c}");
                    let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
                    let spread = sizes.iter().max().unwrap() - sizes.iter().min().unwrap();
                    assert!(spread <= 1, "{strategy:?} n={n} c={c} sizes={sizes:?}");
                }
            }
        }
    }

    // Proves the consistent-hash strategy gives every queue exactly one owner and, when a
    // consumer leaves, moves only the queues that consumer held.
    #[test]
    fn consistent_hash_moves_only_the_leavers_queues() {
        let strategy = AllocateStrategy::consistent_hash();
        for c in 1..8 {
            let parts = split(&strategy, 64, c);
            let mut all: Vec<usize> = parts.iter().flatten().copied().collect();
            all.sort_unstable();
            assert_eq!(all, (0..64).collect::<Vec<_>>(), "c={c}");
        }
        let before = split(&strategy, 64, 4);
        let remaining: Vec<String> = cids(4).into_iter().filter(|cid| cid != "cid-2").collect();
        let queues: Vec<usize> = (0..64).collect();
        for (index, cid) in cids(4)
            .iter()
            .enumerate()
            .filter(|(_, cid)| *cid != "cid-2")
        {
            let after = strategy.allocate(&queues, &remaining, cid);
            assert!(
                before[index].iter().all(|queue| after.contains(queue)),
                "{cid}"
            );
        }
        assert!(strategy.allocate(&queues, &cids(2), "stranger").is_empty());
    }

    // Proves the ring positions are Java's: the first four MD5 bytes, big-endian (MD5 of the
    // empty string starts d4 1d 8c d9; of "a", 0c c1 75 b9), and queues hash by their Java
    // string.
    #[test]
    fn consistent_hash_positions_are_javas() {
        assert_eq!(ring_hash(""), 0xd41d_8cd9);
        assert_eq!(ring_hash("a"), 0x0cc1_75b9);
        assert_eq!(
            MessageQueue::new("T", "b", 3).java_string(),
            "MessageQueue [topic=T, brokerName=b, queueId=3]"
        );
    }

    // Proves by-config takes exactly the configured queues that the route has, for any member.
    #[test]
    fn by_config_takes_the_configured_queues() {
        let strategy = AllocateStrategy::ByConfig(vec![
            MessageQueue::new("T", "broker-a", 1),
            MessageQueue::new("T", "broker-a", 5),
            MessageQueue::new("T", "broker-b", 0),
        ]);
        let queues: Vec<usize> = (0..4).collect();
        assert_eq!(strategy.allocate(&queues, &cids(3), "cid-2"), vec![1]);
        assert_eq!(strategy.name(), "CONFIG");
    }
}
