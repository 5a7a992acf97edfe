//! The queue allocation arithmetic every member of a consumer group must compute alike,
//! whether the client rebalances (comet-client) or the broker assigns (QUERY_ASSIGNMENT), and
//! Java's ordering of the lists it runs on (docs/protocol.md#queue-lists-and-allocation).
//!
//! Both lists must be sorted the same way on every member: queues by [`sort_queues`], client
//! ids by [`sort_client_ids`]. A client whose id is not in the list gets nothing.

use std::cmp::Ordering;

use crate::body::MessageQueue;

/// `AllocateMessageQueueAveragely`: contiguous blocks, the first `n % c` clients one queue
/// more.
pub fn allocate_averagely<T: Clone>(mq_all: &[T], cid_all: &[String], current_cid: &str) -> Vec<T> {
    let Some(index) = cid_all.iter().position(|cid| cid == current_cid) else {
        return Vec::new();
    };
    let (n, c) = (mq_all.len(), cid_all.len());
    assert!(c > 0 && index < c);
    let modulo = n % c;
    let extra = modulo > 0 && index < modulo;
    let average = if n <= c {
        1
    } else if extra {
        n / c + 1
    } else {
        n / c
    };
    let start = if extra {
        index * average
    } else {
        index * average + modulo
    };
    if start >= n {
        return Vec::new();
    }
    mq_all[start..start + average.min(n - start)].to_vec()
}

/// `AllocateMessageQueueAveragelyByCircle`: client `i` takes queues `i`, `i + c`, `i + 2c`,
/// ...
pub fn allocate_averagely_by_circle<T: Clone>(
    mq_all: &[T],
    cid_all: &[String],
    current_cid: &str,
) -> Vec<T> {
    let Some(index) = cid_all.iter().position(|cid| cid == current_cid) else {
        return Vec::new();
    };
    mq_all
        .iter()
        .skip(index)
        .step_by(cid_all.len())
        .cloned()
        .collect()
}

/// Java `String.compareTo`: lexicographic over UTF-16 code units. Differs from Rust's byte
/// order only for characters above U+FFFF against U+E000..U+FFFF, but every member of a
/// group must sort identically, including Java members.
pub fn java_string_cmp(left: &str, right: &str) -> Ordering {
    if left.is_ascii() && right.is_ascii() {
        return left.cmp(right);
    }
    left.encode_utf16().cmp(right.encode_utf16())
}

/// Java's `MessageQueue.compareTo`: topic, broker name, queue id.
pub fn compare_queues(a: &MessageQueue, b: &MessageQueue) -> Ordering {
    java_string_cmp(&a.topic, &b.topic)
        .then_with(|| java_string_cmp(&a.broker_name, &b.broker_name))
        .then_with(|| a.queue_id.cmp(&b.queue_id))
}

/// Sorts queues as Java does ([`compare_queues`]).
pub fn sort_queues(queues: &mut [MessageQueue]) {
    queues.sort_by(compare_queues);
}

/// Sorts client ids as Java's `Collections.sort` of strings.
pub fn sort_client_ids(ids: &mut [String]) {
    ids.sort_by(|left, right| java_string_cmp(left, right));
}

#[cfg(test)]
mod tests {
    use super::*;

    type Allocate = fn(&[usize], &[String], &str) -> Vec<usize>;

    fn cids(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("cid-{i}")).collect()
    }

    fn split(allocate: Allocate, n: usize, c: usize) -> Vec<Vec<usize>> {
        let queues: Vec<usize> = (0..n).collect();
        let cid_all = cids(c);
        cid_all
            .iter()
            .map(|cid| allocate(&queues, &cid_all, cid))
            .collect()
    }

    // Proves the reference example n=8, c=3 gives 3/3/2 contiguous blocks in order.
    #[test]
    fn averagely_matches_the_reference_example() {
        assert_eq!(
            split(allocate_averagely, 8, 3),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]
        );
    }

    // Proves fewer queues than clients gives one queue each to the first n clients and
    // nothing to the rest, and an unknown client gets nothing.
    #[test]
    fn averagely_with_more_clients_than_queues() {
        assert_eq!(
            split(allocate_averagely, 2, 4),
            vec![vec![0], vec![1], vec![], vec![]]
        );
        let queues = [0, 1, 2];
        assert!(allocate_averagely(&queues, &cids(2), "stranger").is_empty());
        assert!(allocate_averagely::<usize>(&[], &cids(2), "cid-0").is_empty());
    }

    // Proves, for every n and c up to 40, that both strategies hand every queue to exactly
    // one client and that sizes differ by at most one.
    #[test]
    fn every_queue_has_exactly_one_owner() {
        let strategies: [(&str, Allocate); 2] = [
            ("averagely", allocate_averagely),
            ("by circle", allocate_averagely_by_circle),
        ];
        for (name, allocate) in strategies {
            for n in 0..40 {
                for c in 1..12 {
                    let parts = split(allocate, n, c);
                    let mut all: Vec<usize> = parts.iter().flatten().copied().collect();
                    all.sort_unstable();
                    assert_eq!(all, (0..n).collect::<Vec<_>>(), "{name} n={n} c={c}");
                    let sizes: Vec<usize> = parts.iter().map(Vec::len).collect();
                    let spread = sizes.iter().max().unwrap() - sizes.iter().min().unwrap();
                    assert!(spread <= 1, "{name} n={n} c={c} sizes={sizes:?}");
                }
            }
        }
    }

    // Proves the circle strategy deals queues round robin.
    #[test]
    fn by_circle_deals_round_robin() {
        assert_eq!(
            split(allocate_averagely_by_circle, 8, 3),
            vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]
        );
    }

    // Proves Java ordering: UTF-16 order puts U+FF01 after U+10000 (a surrogate pair starts
    // with 0xD800), the opposite of UTF-8 byte order, and queues sort by topic, broker, id.
    #[test]
    fn java_order() {
        assert_eq!(java_string_cmp("a", "b"), Ordering::Less);
        assert_eq!(java_string_cmp("\u{FF01}", "\u{10000}"), Ordering::Greater);
        assert_eq!("\u{FF01}".cmp("\u{10000}"), Ordering::Less);
        let mut queues = vec![
            MessageQueue::new("T", "b", 0),
            MessageQueue::new("T", "a", 10),
            MessageQueue::new("T", "a", 2),
        ];
        sort_queues(&mut queues);
        let order: Vec<(&str, i32)> = queues
            .iter()
            .map(|queue| (queue.broker_name.as_str(), queue.queue_id))
            .collect();
        assert_eq!(order, [("a", 2), ("a", 10), ("b", 0)]);
    }
}
