//! Structural bounds of the client. Each bound says what it limits and what it costs.

/// Requests waiting for a response on one connection. The Java client bounds async and
/// one-way requests with two semaphores of 65,535; one bound over both is simpler and keeps
/// the pending map (about 100 bytes an entry) under 7 MiB per connection.
pub const PENDING_REQUESTS_PER_CONNECTION_MAX: usize = 65_536;

/// Bytes the reader thread asks the socket for at once. Pull responses are up to 256 KiB by
/// default, so a 64 KiB read keeps the syscall count low without holding large idle buffers.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Broker-to-client requests queued for the handler thread of one client. Brokers send these
/// rarely (rebalance notices, admin queries); when the queue is full the client answers
/// SYSTEM_BUSY instead of blocking its reader threads.
pub const INBOUND_REQUESTS_QUEUED_MAX: usize = 1024;

/// Callbacks of asynchronous sends queued for the callback thread.
pub const CALLBACKS_QUEUED_MAX: usize = 65_536;

/// Worker threads of a blocking producer's runtime, which serve all its connections as
/// tasks and run its background sends (sync sends run on the calling threads).
pub const PRODUCER_IO_THREADS: usize = 2;

/// Transaction check-backs queued for a transactional producer's check thread (Java's
/// `checkRequestHolder` of 2000). Beyond it a check is dropped: the broker checks the half
/// again at its next interval, so nothing is lost but time.
pub const TRANSACTION_CHECKS_QUEUED_MAX: usize = 2000;

/// Largest message body, before compression (docs/protocol.md#names-and-sizes).
pub const MESSAGE_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Largest total body of one batch send request. Batches larger than this are split.
pub const BATCH_BODY_BYTES_MAX: usize = 4 * 1024 * 1024;

/// Messages kept in one process queue before the push consumer stops pulling that queue
/// (`pullThresholdForQueue`).
pub const PROCESS_QUEUE_MESSAGES_MAX: usize = 1000;

/// Bytes kept in one process queue before the push consumer stops pulling that queue
/// (`pullThresholdSizeForQueue`, 100 MiB).
pub const PROCESS_QUEUE_BYTES_MAX: usize = 100 * 1024 * 1024;

/// Longest properties string a message may carry (an i16 length on disk).
pub const PROPERTIES_BYTES_MAX: usize = i16::MAX as usize;

const _: () = assert!(BATCH_BODY_BYTES_MAX >= MESSAGE_BODY_BYTES_MAX);
const _: () = assert!(PROCESS_QUEUE_BYTES_MAX > MESSAGE_BODY_BYTES_MAX);
const _: () = assert!(READ_CHUNK_BYTES > 0);
