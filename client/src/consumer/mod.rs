//! The blocking consumers, faces of the async ones (`crate::aio`), which do the rebalance,
//! the pulling (a task per queue), flow control and offsets; and what both share.
//!
//! * [`push`]: [`PushConsumer`], concurrent and orderly listeners on a consume pool, over
//!   `AsyncPushConsumer` on a runtime of its own.
//! * [`lite`]: [`LitePullConsumer`], subscribe or assign, poll, commit, seek, over
//!   `AsyncLitePullConsumer`.
//! * [`pop`]: [`PopConsumer`], the blocking face of the async pop consumer (receive, ack,
//!   change invisible time; no rebalance).
//! * [`core`]: subscriptions, the client-side re-filter, heartbeat and running-info
//!   bodies; [`process_queue`]: a queue's cached messages; [`offset_store`]: the
//!   broadcasting offsets file.

pub mod core;
pub mod lite;
pub mod offset_store;
pub mod pop;
pub mod process_queue;
pub mod push;

use std::path::PathBuf;
use std::time::Duration;

pub use comet_proto::message::MessageExt;

pub use self::lite::{LitePullConfig, LitePullConsumer};
pub use self::pop::PopConsumer;
pub use self::push::{
    ConsumeConcurrentlyStatus, ConsumeOrderlyStatus, MessageListener, PushConsumer,
    PushConsumerConfig,
};
use crate::config::ClientConfig;
use crate::rebalance::AllocateStrategy;

/// Where offsets live and who gets each message.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MessageModel {
    /// Each message goes to one member of the group; offsets on the broker.
    #[default]
    Clustering,
    /// Each message goes to every member; offsets in a local file.
    Broadcasting,
}

impl MessageModel {
    /// The Java enum name.
    pub fn name(self) -> &'static str {
        match self {
            MessageModel::Clustering => "CLUSTERING",
            MessageModel::Broadcasting => "BROADCASTING",
        }
    }
}

/// Where a queue with no stored offset starts (docs/protocol.md#client-timings).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ConsumeFromWhere {
    /// The queue's end (new messages only); 0 for retry topics.
    #[default]
    LastOffset,
    /// The queue's beginning.
    FirstOffset,
    /// The first message stored at or after the configured timestamp.
    Timestamp,
}

impl ConsumeFromWhere {
    /// The Java enum name.
    pub fn name(self) -> &'static str {
        match self {
            ConsumeFromWhere::LastOffset => "CONSUME_FROM_LAST_OFFSET",
            ConsumeFromWhere::FirstOffset => "CONSUME_FROM_FIRST_OFFSET",
            ConsumeFromWhere::Timestamp => "CONSUME_FROM_TIMESTAMP",
        }
    }
}

/// Settings shared by both consumers (Java defaults, docs/protocol.md#client-timings).
#[derive(Clone, Debug)]
pub struct ConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// Client settings.
    pub client: ClientConfig,
    /// Clustering or broadcasting.
    pub message_model: MessageModel,
    /// Start of a queue with no stored offset.
    pub consume_from_where: ConsumeFromWhere,
    /// For [`ConsumeFromWhere::Timestamp`], ms since the epoch (default: 30 min before
    /// start).
    pub consume_timestamp_ms: Option<i64>,
    /// Allocation strategy.
    pub allocate: AllocateStrategy,
    /// Messages per pull (`pullBatchSize`).
    pub pull_batch_size: i32,
    /// Bytes per pull (`pullBatchSizeInBytes`).
    pub pull_batch_bytes: i32,
    /// Pulling pauses while a queue holds this many messages.
    pub pull_threshold_messages_per_queue: usize,
    /// Pulling pauses while a queue holds this many body bytes.
    pub pull_threshold_bytes_per_queue: usize,
    /// Long-poll hold asked of the broker.
    pub suspend: Duration,
    /// Timeout of one pull request.
    pub pull_timeout: Duration,
    /// Pause after a failed pull.
    pub pull_delay_on_error: Duration,
    /// Pause while flow control holds a queue.
    pub flow_control_delay: Duration,
    /// Rebalance period.
    pub rebalance_interval: Duration,
    /// Directory of broadcasting offset files.
    pub local_offset_dir: PathBuf,
    /// Push consumers: write a `SubBefore` and a `SubAfter` trace record around each
    /// listener call to [`ConsumerConfig::trace_topic`] (`enableMsgTrace`; see
    /// [`crate::trace`]).
    pub enable_msg_trace: bool,
    /// The trace topic (`customizedTraceTopic`).
    pub trace_topic: String,
    /// Worker threads of the runtime a blocking consumer owns, which runs every queue's
    /// pulls, the rebalance and the connections as tasks (Java's `pullThreadNums`, here 2:
    /// these threads never block). The async consumers ignore it: they run on the caller's
    /// runtime. 1 to 64.
    pub pull_thread_nums: usize,
}

impl ConsumerConfig {
    /// Defaults for `group` with the given client settings.
    pub fn new(group: &str, client: ClientConfig) -> ConsumerConfig {
        let home = std::env::var_os("HOME").map_or_else(std::env::temp_dir, PathBuf::from);
        ConsumerConfig {
            group: group.to_owned(),
            client,
            message_model: MessageModel::Clustering,
            consume_from_where: ConsumeFromWhere::LastOffset,
            consume_timestamp_ms: None,
            allocate: AllocateStrategy::Averagely,
            pull_batch_size: 32,
            pull_batch_bytes: 256 * 1024,
            pull_threshold_messages_per_queue: crate::limits::PROCESS_QUEUE_MESSAGES_MAX,
            pull_threshold_bytes_per_queue: crate::limits::PROCESS_QUEUE_BYTES_MAX,
            suspend: Duration::from_secs(15),
            pull_timeout: Duration::from_secs(30),
            pull_delay_on_error: Duration::from_secs(1),
            flow_control_delay: Duration::from_millis(50),
            rebalance_interval: Duration::from_secs(20),
            local_offset_dir: home.join(".rocketmq_offsets"),
            enable_msg_trace: false,
            trace_topic: crate::trace::TRACE_TOPIC_DEFAULT.to_owned(),
            pull_thread_nums: 2,
        }
    }
}

pub use comet_proto::names::retry_topic;
