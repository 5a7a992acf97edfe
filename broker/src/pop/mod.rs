//! Pop consumption (5.x): the broker hands out messages with an invisible time, the consumer
//! acks each one, and what is not acked in time comes back through the group's pop retry
//! topic, then goes to its dead-letter topic (docs/architecture.md#pop).
//!
//! Everything about one queue happens on the shard owning it: [`take`] pops from the
//! group's pop position and writes a checkpoint (CK) record; acks and invisible-time changes
//! write ack and CK records ([`records`]); [`revive`] reads them back, pairs them and
//! re-stores what stayed unacked. The records go to this shard's own queue of the revive
//! topic ([`revive_queue`]), so they are durable with the group commit, survive recovery and
//! reach a slave with the log.
//!
//! - [`extra_info`]: the `POP_CK` receipt string and the offset-info strings of a pop answer,
//!   and the pop retry topic names.
//! - [`order`]: orderly pop's book of what is in flight per queue.
//! - [`records`]: the CK and ack records.
//! - [`state`]: this shard's pop state: queue locks, whether recovery finished, and the
//!   pops polling here (for POLLING_INFO).
//! - [`take`]: one pop of one queue.
//! - [`ack`]: ack and invisible-time records for one queue.
//! - [`revive`]: the revive scanner.
//! - [`retry`]: the re-stored message of a revive (retry topic or dead letters).

pub mod ack;
pub mod extra_info;
pub mod order;
pub mod records;
pub mod retry;
pub mod revive;
pub mod state;
pub mod take;

use crate::ownership::topic_hash;
use crate::shard::ShardBroker;

/// The system group whose offset on a revive queue is the revive scanner's cursor (Java's
/// `PopAckConstants.REVIVE_GROUP`).
pub const REVIVE_GROUP: &str = "CID_RMQ_SYS_REVIVE_GROUP";
/// Prefix of the revive topic; the cluster name follows (Java's
/// `PopAckConstants.REVIVE_TOPIC`).
pub const REVIVE_TOPIC_PREFIX: &str = "rmq_sys_REVIVE_LOG_";
/// Tag of a checkpoint record.
pub const CK_TAG: &str = "ck";
/// Tag of an ack record.
pub const ACK_TAG: &str = "ack";
/// Tag of a batch-ack record.
pub const BATCH_ACK_TAG: &str = "bAck";
/// Tag of an orderly ack record (Comet's own: Java keeps orderly acks in memory only).
pub const ORDER_ACK_TAG: &str = "oAck";
/// The revive queue id of an orderly pop's receipts (Java's
/// `KeyBuilder.POP_ORDER_REVIVE_QUEUE`): acks and changes carrying it are orderly.
pub const ORDER_REVIVE_QUEUE: i32 = 999;
/// Most messages one pop may ask for (Java answers INVALID_PARAMETER above).
pub const POP_MESSAGES_MAX: i32 = 32;
/// Queues of a pop retry topic (Java's `PopAckConstants.retryQueueNum`).
pub const RETRY_QUEUE_NUMS: i32 = 1;
/// Share (percent) of pops that read the retry topic before the topic itself (Java's
/// `popFromRetryProbability`).
pub const RETRY_FIRST_PERCENT: u32 = 20;

/// The revive topic of this broker's cluster.
pub fn revive_topic(broker: &ShardBroker) -> String {
    format!("{REVIVE_TOPIC_PREFIX}{}", broker.config().cluster_name)
}

/// This shard's queue of the revive topic: the one it owns, so its CK and ack records are
/// appended to its own log.
pub fn revive_queue(broker: &ShardBroker) -> i32 {
    let topic = revive_topic(broker);
    let logs = broker.queue_logs() as i64;
    let shard = broker.shard().index() as i64;
    // The owner of queue q is (hash + q) mod logs: q = (shard - hash) mod logs.
    let queue = (shard - i64::from(topic_hash(&topic))).rem_euclid(logs);
    let queue = i32::try_from(queue).expect("below the shard count");
    assert!(
        broker.owns(&topic, queue),
        "revive queue {queue} not owned here"
    );
    queue
}
