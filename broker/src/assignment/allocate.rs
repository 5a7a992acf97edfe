//! The allocation strategies QUERY_ASSIGNMENT runs for a client, by the names Java clients
//! send (`AVG`, `AVG_BY_CIRCLE`), and the POP-mode sharing rule of Java's
//! `QueryAssignmentProcessor.allocate4Pop`.
//!
//! The arithmetic is comet-proto's, shared with the client's rebalance
//! (docs/protocol.md#queue-lists-and-allocation); this module adds Java's argument checks and
//! the POP-mode rule.

use comet_proto::allocate::{allocate_averagely, allocate_averagely_by_circle};
pub use comet_proto::allocate::{sort_client_ids, sort_queues};
use comet_proto::body::MessageQueue;

/// A strategy a client may name in QUERY_ASSIGNMENT.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Strategy {
    /// `AllocateMessageQueueAveragely`: contiguous blocks, the first `n % c` consumers one
    /// queue more.
    Averagely,
    /// `AllocateMessageQueueAveragelyByCircle`: consumer `i` takes queues `i`, `i + c`, ...
    AveragelyByCircle,
}

/// Why a client gets no usable answer (Java's strategies throw, and the processor answers
/// with no assignment at all, which keeps the client's current queues).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AllocateError {
    /// The asking client sent no id.
    #[error("the client id is empty")]
    NoClientId,
    /// The topic has no queue to allocate.
    #[error("the topic has no queue")]
    NoQueue,
    /// The group has no consumer.
    #[error("the group has no consumer")]
    NoConsumer,
}

impl Strategy {
    /// The strategy Java names `name`; `None` for one the broker does not run.
    pub fn from_name(name: &str) -> Option<Strategy> {
        match name {
            "AVG" => Some(Strategy::Averagely),
            "AVG_BY_CIRCLE" => Some(Strategy::AveragelyByCircle),
            _ => None,
        }
    }

    /// The queues of `mq_all` `current_cid` gets. Both lists must be sorted (see
    /// [`sort_queues`] and [`sort_client_ids`]); a client not in `cid_all` gets none.
    pub fn allocate(
        self,
        mq_all: &[MessageQueue],
        cid_all: &[String],
        current_cid: &str,
    ) -> Result<Vec<MessageQueue>, AllocateError> {
        check(mq_all, cid_all, current_cid)?;
        Ok(match self {
            Strategy::Averagely => allocate_averagely(mq_all, cid_all, current_cid),
            Strategy::AveragelyByCircle => {
                allocate_averagely_by_circle(mq_all, cid_all, current_cid)
            }
        })
    }
}

/// Java's `AbstractAllocateMessageQueueStrategy.check`.
fn check(
    mq_all: &[MessageQueue],
    cid_all: &[String],
    current_cid: &str,
) -> Result<(), AllocateError> {
    if current_cid.is_empty() {
        return Err(AllocateError::NoClientId);
    }
    if mq_all.is_empty() {
        return Err(AllocateError::NoQueue);
    }
    if cid_all.is_empty() {
        return Err(AllocateError::NoConsumer);
    }
    Ok(())
}

/// The queues a POP-mode client gets (Java's `allocate4Pop`): with `pop_share_queue_num`
/// at most 0, or at least the number of the other consumers, every queue of every broker
/// as queue id -1 (the client pops any queue of that broker); otherwise its own share plus
/// the shares of the `pop_share_queue_num` consumers after it in the sorted id list, or,
/// when there are more consumers than queues, the one queue at its index modulo the count.
pub fn allocate_for_pop(
    strategy: Strategy,
    mq_all: &[MessageQueue],
    cid_all: &[String],
    current_cid: &str,
    pop_share_queue_num: i32,
) -> Result<Vec<MessageQueue>, AllocateError> {
    // Java compares with `cidAll.size() - 1`, an int that is -1 for an empty list.
    let others = i64::try_from(cid_all.len()).unwrap_or(i64::MAX) - 1;
    if pop_share_queue_num <= 0 || i64::from(pop_share_queue_num) >= others {
        return Ok(mq_all
            .iter()
            .map(|queue| MessageQueue::new(queue.topic.clone(), queue.broker_name.clone(), -1))
            .collect());
    }
    if cid_all.len() <= mq_all.len() {
        let mut result = strategy.allocate(mq_all, cid_all, current_cid)?;
        if let Some(mut index) = cid_all.iter().position(|cid| cid == current_cid) {
            for _ in 0..pop_share_queue_num {
                index = (index + 1) % cid_all.len();
                result.extend(strategy.allocate(mq_all, cid_all, &cid_all[index])?);
            }
        }
        return Ok(result);
    }
    check(mq_all, cid_all, current_cid)?;
    Ok(match cid_all.iter().position(|cid| cid == current_cid) {
        Some(index) => vec![mq_all[index % mq_all.len()].clone()],
        None => Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn queues(brokers: &[&str], per_broker: i32) -> Vec<MessageQueue> {
        let mut all: Vec<MessageQueue> = brokers
            .iter()
            .flat_map(|broker| (0..per_broker).map(move |id| MessageQueue::new("T", *broker, id)))
            .collect();
        sort_queues(&mut all);
        all
    }

    fn cids(count: usize) -> Vec<String> {
        (0..count).map(|i| format!("cid-{i}")).collect()
    }

    fn ids(result: &[MessageQueue]) -> Vec<i32> {
        result.iter().map(|queue| queue.queue_id).collect()
    }

    fn split(strategy: Strategy, queue_count: i32, consumers: usize) -> Vec<Vec<i32>> {
        let mq_all = queues(&["b"], queue_count);
        let cid_all = cids(consumers);
        cid_all
            .iter()
            .map(|cid| ids(&strategy.allocate(&mq_all, &cid_all, cid).unwrap()))
            .collect()
    }

    // Proves AVG gives the documented 3/3/2 contiguous blocks for 8 queues and 3
    // consumers, one queue each (and nothing for the last) with more consumers than queues.
    #[test]
    fn averagely_blocks() {
        assert_eq!(
            split(Strategy::Averagely, 8, 3),
            vec![vec![0, 1, 2], vec![3, 4, 5], vec![6, 7]]
        );
        assert_eq!(
            split(Strategy::Averagely, 2, 3),
            vec![vec![0], vec![1], vec![]]
        );
        assert_eq!(
            split(Strategy::Averagely, 4, 2),
            vec![vec![0, 1], vec![2, 3]]
        );
    }

    // Proves AVG_BY_CIRCLE deals queues round robin.
    #[test]
    fn by_circle_round_robin() {
        assert_eq!(
            split(Strategy::AveragelyByCircle, 8, 3),
            vec![vec![0, 3, 6], vec![1, 4, 7], vec![2, 5]]
        );
    }

    // Proves the names Java clients send, an unknown name refused, and Java's checks: an
    // empty client id or queue list is an error, a client outside the group gets nothing.
    #[test]
    fn names_and_checks() {
        assert_eq!(Strategy::from_name("AVG"), Some(Strategy::Averagely));
        assert_eq!(
            Strategy::from_name("AVG_BY_CIRCLE"),
            Some(Strategy::AveragelyByCircle)
        );
        assert_eq!(Strategy::from_name("CONSISTENT_HASH"), None);
        let mq_all = queues(&["b"], 4);
        let cid_all = cids(2);
        let avg = Strategy::Averagely;
        assert_eq!(
            avg.allocate(&mq_all, &cid_all, ""),
            Err(AllocateError::NoClientId)
        );
        assert_eq!(
            avg.allocate(&[], &cid_all, "cid-0"),
            Err(AllocateError::NoQueue)
        );
        assert_eq!(
            avg.allocate(&mq_all, &[], "cid-0"),
            Err(AllocateError::NoConsumer)
        );
        assert_eq!(avg.allocate(&mq_all, &cid_all, "stranger"), Ok(Vec::new()));
    }

    // Proves POP with a share count <= 0, or one reaching the other consumers, gives every
    // broker's queues as queue id -1, once per broker.
    #[test]
    fn pop_without_sharing_takes_every_broker() {
        let mq_all = queues(&["a", "b"], 4);
        for share in [-1, 0, 2, 5] {
            let result =
                allocate_for_pop(Strategy::Averagely, &mq_all, &cids(3), "cid-1", share).unwrap();
            let mut unique: Vec<(String, i32)> = result
                .iter()
                .map(|queue| (queue.broker_name.clone(), queue.queue_id))
                .collect();
            unique.dedup();
            assert_eq!(
                unique,
                vec![("a".into(), -1), ("b".into(), -1)],
                "share {share}"
            );
        }
    }

    // Proves POP sharing: with 8 queues, 4 consumers and share 1, consumer 1 gets its own
    // two queues and consumer 2's; the last consumer wraps to the first's.
    #[test]
    fn pop_sharing_follows_the_next_consumers() {
        let mq_all = queues(&["b"], 8);
        let cid_all = cids(4);
        let pop = |cid: &str| {
            ids(&allocate_for_pop(Strategy::Averagely, &mq_all, &cid_all, cid, 1).unwrap())
        };
        assert_eq!(pop("cid-1"), vec![2, 3, 4, 5]);
        assert_eq!(pop("cid-3"), vec![6, 7, 0, 1]);
        assert_eq!(pop("stranger"), Vec::<i32>::new());
    }

    // Proves POP sharing with more consumers than queues gives each consumer the queue at
    // its index modulo the queue count.
    #[test]
    fn pop_sharing_with_more_consumers_than_queues() {
        let mq_all = queues(&["b"], 2);
        let cid_all = cids(5);
        let pop = |cid: &str| {
            ids(&allocate_for_pop(Strategy::Averagely, &mq_all, &cid_all, cid, 1).unwrap())
        };
        assert_eq!(pop("cid-0"), vec![0]);
        assert_eq!(pop("cid-3"), vec![1]);
        assert_eq!(pop("cid-4"), vec![0]);
        assert_eq!(
            allocate_for_pop(Strategy::Averagely, &[], &cid_all, "cid-0", 1),
            Err(AllocateError::NoQueue)
        );
    }

    // Proves the sort follows Java's String.compareTo (UTF-16) rather than byte order.
    #[test]
    fn java_order() {
        let mut names = vec![
            "\u{FF61}".to_owned(),
            "\u{1F600}".to_owned(),
            "a".to_owned(),
        ];
        sort_client_ids(&mut names);
        assert_eq!(names, vec!["a", "\u{1F600}", "\u{FF61}"]);
    }
}
