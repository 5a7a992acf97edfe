//! Bounds and defaults of the name server. Each says what it limits and why.

use std::time::Duration;

/// Default listening port (RocketMQ's `mqnamesrv`).
pub const LISTEN_PORT_DEFAULT: u16 = 9876;

/// How often silent brokers are looked for. RocketMQ 4.x scans every 10 s (5.x every 5 s,
/// docs/protocol.md#name-server-expiry-scan); expiry itself is per broker, so the scan only bounds
/// how late a drop happens.
pub const SCAN_INTERVAL_DEFAULT: Duration = Duration::from_secs(10);

/// A broker that has not registered for this long is dropped, unless its registration named
/// its own `heartbeatTimeoutMillis`.
pub const BROKER_EXPIRY_DEFAULT: Duration = Duration::from_secs(120);

/// Connections the name server serves at once: every broker and client keeps one.
pub const CONNECTIONS_MAX_DEFAULT: usize = 10_000;

/// Largest frame accepted. A register body of a broker with 10,000 topics is about 2 MiB of
/// JSON; 16 MiB is the Java limit and bounds what one peer can make us buffer.
pub const FRAME_BYTES_MAX_DEFAULT: usize = comet_proto::limits::FRAME_BYTES_MAX_DEFAULT;

/// Requests processed at once per connection (route lookups are cheap; this only bounds
/// memory held for one pipelining peer).
pub const INFLIGHT_REQUESTS_PER_CONNECTION_MAX: usize = 256;

/// Longest KV namespace, key or value accepted: the KV store is persisted whole on every
/// change, so one entry must not be able to make it huge.
pub const KV_ENTRY_BYTES_MAX: usize = 64 * 1024;

/// Entries the KV store holds at most, for the same reason.
pub const KV_ENTRIES_MAX: usize = 100_000;

/// The KV namespace whose entries become `orderTopicConf` in routes and the REGISTER_BROKER
/// response body (Java `NamesrvUtil.NAMESPACE_ORDER_TOPIC_CONFIG`).
pub const ORDER_TOPIC_CONFIG_NAMESPACE: &str = "ORDER_TOPIC_CONFIG";

const _: () = assert!(BROKER_EXPIRY_DEFAULT.as_secs() > SCAN_INTERVAL_DEFAULT.as_secs());
