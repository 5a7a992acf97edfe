//! Explicit bounds of the bench tool.

use std::time::Duration;

/// Highest latency a histogram holds, in microseconds (one hour); larger values saturate.
pub const LATENCY_US_MAX: u64 = 3_600_000_000;
/// Significant decimal digits kept by every histogram (0.1 % value resolution).
pub const HISTOGRAM_SIGNIFICANT_DIGITS: u8 = 3;
/// Histograms that recording threads spread over, so that recorders rarely share a lock.
pub const RECORDER_STRIPES: usize = 16;
/// Interval between progress lines.
pub const PROGRESS_INTERVAL: Duration = Duration::from_secs(1);
/// Largest message body the bench builds (the protocol's 4 MiB limit).
pub const MESSAGE_BYTES_MAX: usize = 4 * 1024 * 1024;
/// Most sender threads.
pub const THREADS_MAX: usize = 4096;
/// Largest async window.
pub const INFLIGHT_MAX: usize = 65_536;
/// Most topics one run spreads its messages over (`--topics`): ten thousand queues at 8
/// queues a topic, the many-queues benchmark's scale, with room to spare.
pub const TOPICS_MAX: usize = 10_000;
/// Largest batch (messages per request).
pub const BATCH_MAX: usize = 4096;
/// How long a run waits, after its senders stop, for answers still in flight or for the
/// consumer to catch up, beyond the send timeout.
pub const DRAIN_GRACE: Duration = Duration::from_secs(5);
/// How long an end-to-end run waits for its consumer to be assigned queues.
pub const ASSIGN_WAIT: Duration = Duration::from_secs(30);
/// Most pop consumers one run starts (each holds a connection).
pub const POP_CONSUMERS_MAX: usize = 1024;
