//! Structural bounds of the remoting server. Each says what it limits and what it costs.

use std::time::Duration;

/// Connections one shard accepts at most; further connections are accepted and closed at once
/// (the peer sees a reset instead of waiting in the backlog). Each costs its read chunk (from
/// [`READ_CHUNK_BYTES_MIN`] idle to [`READ_CHUNK_BYTES`] busy), the bytes of frames not yet
/// whole, and its pending responses.
pub const CONNECTIONS_PER_SHARD_MAX_DEFAULT: usize = 10_000;

/// Requests of one connection being processed at once. When reached, the connection stops
/// reading (TCP back-pressure reaches the client) until one finishes. Bounds the memory held
/// by one pipelining client to this many requests and responses.
pub const INFLIGHT_REQUESTS_PER_CONNECTION_MAX_DEFAULT: usize = 1024;

/// Server-to-client requests (check-transaction, notify, running-info queries) awaiting a
/// response on one connection; more are refused with an error, not queued.
pub const SERVER_REQUESTS_PER_CONNECTION_MAX: usize = 64;

/// Most bytes read from the socket per read call; frames larger than this are assembled from
/// several reads, never reserved ahead of their arrival beyond this step.
pub const READ_CHUNK_BYTES: usize = 64 * 1024;

/// Bytes a read call starts with, and an idle connection holds: the chunk doubles after a
/// read fills it, up to [`READ_CHUNK_BYTES`], and halves after reads using under a quarter of
/// it, so a connection that mostly waits (a consumer's long poll, a heartbeat every 30 s)
/// holds 4 KiB to read into, not 64 KiB.
pub const READ_CHUNK_BYTES_MIN: usize = 4 * 1024;

/// A connection with nothing received for this long is closed (Java's
/// `serverChannelMaxIdleTimeSeconds`, 120 s); clients heartbeat every 30 s.
pub const IDLE_TIMEOUT_DEFAULT: Duration = Duration::from_secs(120);

/// How long a connection on a TLS-enabled port may take to send its first byte and then to
/// finish the TLS handshake; a client that does neither is closed (docs/operations.md#tls).
pub const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stopping server waits for its connections to finish their in-flight work.
pub const DRAIN_WAIT_MAX_DEFAULT: Duration = Duration::from_secs(5);

const _: () = assert!(READ_CHUNK_BYTES >= 4096);
const _: () =
    assert!(SERVER_REQUESTS_PER_CONNECTION_MAX <= INFLIGHT_REQUESTS_PER_CONNECTION_MAX_DEFAULT);
