//! Queue allocation strategies (docs/protocol.md#queue-lists-and-allocation): pure functions of the
//! sorted queue list and the sorted consumer id list, so every member of a group computes the same
//! split without talking to the others.
//!
//! Both inputs must be sorted the same way on every member (queues by topic, broker name and
//! queue id; consumer ids as strings, see [`java_string_cmp`]). A consumer whose id is not in
//! the list gets nothing.

use std::cmp::Ordering;

/// How queues are spread over the consumers of a group.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AllocateStrategy {
    /// Contiguous blocks, the first `n % c` consumers get one extra
    /// (`AllocateMessageQueueAveragely`, the Java default).
    #[default]
    Averagely,
    /// Round robin: consumer `i` takes queues `i`, `i + c`, `i + 2c`, ...
    /// (`AllocateMessageQueueAveragelyByCircle`).
    AveragelyByCircle,
}

impl AllocateStrategy {
    /// The Java strategy name, as reported in running info.
    pub fn name(self) -> &'static str {
        match self {
            AllocateStrategy::Averagely => "AVG",
            AllocateStrategy::AveragelyByCircle => "AVG_BY_CIRCLE",
        }
    }

    /// The queues of `mq_all` that `current_cid` owns.
    pub fn allocate<T: Clone>(self, mq_all: &[T], cid_all: &[String], current_cid: &str) -> Vec<T> {
        match self {
            AllocateStrategy::Averagely => allocate_averagely(mq_all, cid_all, current_cid),
            AllocateStrategy::AveragelyByCircle => {
                allocate_averagely_by_circle(mq_all, cid_all, current_cid)
            }
        }
    }
}

/// `AllocateMessageQueueAveragely`, with the exact integer arithmetic of
/// docs/protocol.md#queue-lists-and-allocation.
pub fn allocate_averagely<T: Clone>(mq_all: &[T], cid_all: &[String], current_cid: &str) -> Vec<T> {
    let Some(index) = cid_all.iter().position(|cid| cid == current_cid) else {
        return Vec::new();
    };
    let (n, c) = (mq_all.len(), cid_all.len());
    assert!(c > 0 && index < c);
    let modulo = n % c;
    let average = if n <= c {
        1
    } else if modulo > 0 && index < modulo {
        n / c + 1
    } else {
        n / c
    };
    let start = if modulo > 0 && index < modulo {
        index * average
    } else {
        index * average + modulo
    };
    if start >= n {
        return Vec::new();
    }
    let range = average.min(n - start);
    mq_all[start..start + range].to_vec()
}

/// `AllocateMessageQueueAveragelyByCircle`.
pub fn allocate_averagely_by_circle<T: Clone>(
    mq_all: &[T],
    cid_all: &[String],
    current_cid: &str,
) -> Vec<T> {
    let Some(index) = cid_all.iter().position(|cid| cid == current_cid) else {
        return Vec::new();
    };
    let c = cid_all.len();
    mq_all
        .iter()
        .enumerate()
        .skip(index)
        .filter(|(position, _)| position % c == index)
        .map(|(_, queue)| queue.clone())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cids(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("cid-{i}")).collect()
    }

    fn split(strategy: AllocateStrategy, n: usize, c: usize) -> Vec<Vec<usize>> {
        let queues: Vec<usize> = (0..n).collect();
        let cid_all = cids(c);
        cid_all
            .iter()
            .map(|cid| strategy.allocate(&queues, &cid_all, cid))
            .collect()
    }

    // Proves the reference example n=8, c=3 gives 3/3/2 contiguous blocks in order.
    #[test]
    fn averagely_matches_the_reference_example() {
        assert_eq!(
            split(AllocateStrategy::Averagely, 8, 3),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]
        );
    }

    // Proves fewer queues than consumers gives one queue each to the first n consumers and
    // nothing to the rest, and an unknown consumer gets nothing.
    #[test]
    fn averagely_with_more_consumers_than_queues() {
        assert_eq!(
            split(AllocateStrategy::Averagely, 2, 4),
            vec![vec![0], vec![1], vec![], vec![]]
        );
        let queues = [0, 1, 2];
        assert!(allocate_averagely(&queues, &cids(2), "stranger").is_empty());
        assert!(allocate_averagely::<usize>(&[], &cids(2), "cid-0").is_empty());
    }

    // Proves, for every n and c up to 40, that both strategies hand every queue to exactly
    // one consumer and that sizes differ by at most one.
    #[test]
    fn every_queue_has_exactly_one_owner() {
        for strategy in [
            AllocateStrategy::Averagely,
            AllocateStrategy::AveragelyByCircle,
        ] {
            for n in 0..40 {
                for c in 1..12 {
                    let parts = split(strategy, n, c);
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

    // Proves the circle strategy deals queues round robin.
    #[test]
    fn by_circle_deals_round_robin() {
        assert_eq!(
            split(AllocateStrategy::AveragelyByCircle, 8, 3),
            vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]
        );
    }

    // Proves Java ordering: UTF-16 order puts U+FF01 after U+10000 (a surrogate pair starts
    // with 0xD800), the opposite of UTF-8 byte order.
    #[test]
    fn java_string_order() {
        assert_eq!(java_string_cmp("a", "b"), Ordering::Less);
        assert_eq!(java_string_cmp("\u{FF01}", "\u{10000}"), Ordering::Greater);
        assert_eq!("\u{FF01}".cmp("\u{10000}"), Ordering::Less);
    }
}
