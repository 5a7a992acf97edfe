//! The broker's keys: one entry per key declares the [`BrokerConfig`] field, its default, its
//! RocketMQ name, unit, when a change takes effect, one line for operators, and how the value
//! is read and written back. Parsing, GET_BROKER_CONFIG, the live-update rule,
//! `comet-broker --help-config` and `docs/config/broker.md` all come from here.

use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;

use comet_log::LogFormat;
use comet_net::{ClientAuth, TlsMode};
use comet_proto::body::MessageRequestMode;

use super::values::*;
use super::{BrokerRole, ConfigError, FlushDiskType, MetricsExporter};

comet_proto::config_table! {
    /// Everything a broker process is told at start-up: one field per key of [`KEYS`].
    pub struct BrokerConfig;
    /// Every key the broker understands, in the order GET_BROKER_CONFIG lists them.
    pub static KEYS: [KeyDef<_, ConfigError>];
    cluster_name: String = "DefaultCluster".to_owned() => {
        key: "brokerClusterName", unit: "", applies: AtRestart,
        doc: "Cluster the broker registers in.",
        parse: non_empty, show: ToString::to_string,
    },
    broker_name: String = "broker-a".to_owned() => {
        key: "brokerName", unit: "", applies: AtRestart,
        doc: "Broker name, registered with the name servers and handed to clients.",
        parse: non_empty, show: ToString::to_string,
    },
    broker_id: i64 = 0 => {
        key: "brokerId", unit: "", applies: AtRestart,
        doc: "0 for a master, 1 or more for a slave of the master with the same brokerName.",
        parse: parse_broker_id, show: ToString::to_string,
    },
    namesrv_addrs: Vec<String> = Vec::new() => {
        key: "namesrvAddr", unit: "", applies: AtRestart,
        doc: "Name servers to register with, `host:port` separated by `;`.",
        parse: split_list, show: list_text,
    },
    broker_ip: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST) => {
        key: "brokerIP1", unit: "", applies: AtRestart,
        doc: "Address clients are told to connect to.",
        parse: |key, value| parse(key, value, "an IP address"), show: ToString::to_string,
    },
    /// Tests and local set-ups give 127.0.0.1. Always IPv4: the listeners' port reservation is
    /// IPv4-only.
    bind_address: IpAddr = IpAddr::V4(Ipv4Addr::UNSPECIFIED) => {
        key: "bindAddress", unit: "", applies: AtRestart,
        doc: "Local IPv4 or IPv6 address every listener binds (0.0.0.0: every interface).",
        parse: parse_bind_address, show: ToString::to_string,
    },
    listen_port: u16 = 10911 => {
        key: "listenPort", unit: "", applies: AtRestart,
        doc: "Port of the client listener.",
        parse: |key, value| parse(key, value, "a port number"), show: ToString::to_string,
    },
    ha_listen_port: u16 = 10912 => {
        key: "haListenPort", unit: "", applies: AtRestart,
        doc: "A master's replication port (slaves connect to it); listenPort + 1 unless set.",
        parse: |key, value| parse(key, value, "a port number"), show: ToString::to_string,
    },
    /// Java's `brokerIP2`; unset, the HA address uses `brokerIP1`.
    broker_ip2: Option<IpAddr> = None => {
        key: "brokerIP2", unit: "", applies: AtRestart,
        doc: "Address of a master's replication port given to slaves (default brokerIP1).",
        parse: parse_optional_ip, show: optional_ip_text,
    },
    /// Empty: the slave takes the `haServerAddr` the name server returns to its
    /// REGISTER_BROKER, as Java slaves do.
    ha_master_address: String = String::new() => {
        key: "haMasterAddress", unit: "", applies: AtRestart,
        doc: "A slave's master HA address `host:port` (empty: learned from the name server).",
        parse: parse_optional_host_port, show: ToString::to_string,
    },
    slave_read_enable: bool = false => {
        key: "slaveReadEnable", unit: "", applies: Live,
        doc: "Whether a master suggests its slave to a consumer far behind (brokerId 1).",
        parse: parse_bool, show: ToString::to_string,
    },
    enable_property_filter: bool = false => {
        key: "enablePropertyFilter", unit: "", applies: Live,
        doc: "Whether consumers may subscribe with SQL92 selectors over message properties.",
        parse: parse_bool, show: ToString::to_string,
    },
    /// Java's `accessMessageInMemoryMaxRatio`: the share of the machine's memory past which
    /// a consumer's backlog is no longer in memory.
    access_message_in_memory_max_ratio_percent: u8 = 40 => {
        key: "accessMessageInMemoryMaxRatio", unit: "%", applies: Live,
        doc: "A pull further behind than this share of RAM is sent to the slave (0..100).",
        parse: parse_ratio_percent, show: ToString::to_string,
    },
    ha_max_gap_not_in_sync_bytes: u64 = 256 * 1024 * 1024 => {
        key: "haMaxGapNotInSync", unit: "bytes", applies: Live,
        doc: "A slave further behind than this is not in sync (SYNC_MASTER: SLAVE_NOT_AVAILABLE).",
        parse: |key, value| parse(key, value, "bytes"), show: ToString::to_string,
    },
    ha_heartbeat_interval_ms: u64 = 5000 => {
        key: "haSendHeartbeatInterval", unit: "ms", applies: AtRestart,
        doc: "Most time between replication heartbeats (master) and acks (slave) on an idle link.",
        parse: parse_positive, show: ToString::to_string,
    },
    /// Java's slave timeout (`haHousekeepingInterval`).
    ha_slave_timeout_ms: u64 = 20_000 => {
        key: "haHousekeepingInterval", unit: "ms", applies: AtRestart,
        doc: "A replication link silent this long is closed (the slave reconnects).",
        parse: parse_positive, show: ToString::to_string,
    },
    enable_controller_mode: bool = false => {
        key: "enableControllerMode", unit: "", applies: AtRestart,
        doc: "Let the controllers (controllerAddr) choose this brokerName's master and slaves.",
        parse: parse_bool, show: ToString::to_string,
    },
    controller_addrs: Vec<String> = Vec::new() => {
        key: "controllerAddr", unit: "", applies: AtRestart,
        doc: "Controllers, `host:port` separated by `;` (controller mode).",
        parse: split_list, show: list_text,
    },
    broker_election_priority: i32 = i32::MAX => {
        key: "brokerElectionPriority", unit: "", applies: AtRestart,
        doc: "Controller mode: among equally advanced candidates, the lowest becomes master.",
        parse: |key, value| parse(key, value, "an integer"), show: ToString::to_string,
    },
    controller_heartbeat_timeout_ms: u64 = 10_000 => {
        key: "controllerHeartBeatTimeoutMills", unit: "ms", applies: AtRestart,
        doc: "Controller mode: silence after which the controller counts this broker as gone; \
              a master stops acknowledging writes before that.",
        parse: parse_positive, show: ToString::to_string,
    },
    broker_heartbeat_interval_ms: u64 = 1_000 => {
        key: "brokerHeartbeatInterval", unit: "ms", applies: AtRestart,
        doc: "Controller mode: how often the broker heartbeats to every controller.",
        parse: parse_positive, show: ToString::to_string,
    },
    sync_broker_metadata_period_ms: u64 = 5_000 => {
        key: "syncBrokerMetadataPeriod", unit: "ms", applies: AtRestart,
        doc: "Controller mode: how often the broker asks the controller for its broker set.",
        parse: parse_positive, show: ToString::to_string,
    },
    check_sync_state_set_period_ms: u64 = 5_000 => {
        key: "checkSyncStateSetPeriod", unit: "ms", applies: AtRestart,
        doc: "Controller mode: how often a master re-checks which slaves are in sync.",
        parse: parse_positive, show: ToString::to_string,
    },
    sync_controller_metadata_period_ms: u64 = 10_000 => {
        key: "syncControllerMetadataPeriod", unit: "ms", applies: AtRestart,
        doc: "Controller mode: how often the broker looks the leading controller up again.",
        parse: parse_positive, show: ToString::to_string,
    },
    /// Java's `allAckInSyncStateSet`, on by default here (Java's default is off, which with
    /// `inSyncReplicas=1` lets a SYNC_MASTER acknowledge what no slave holds, so a failover
    /// could lose it: Comet is durable unless told otherwise).
    all_ack_in_sync_state_set: bool = true => {
        key: "allAckInSyncStateSet", unit: "", applies: AtRestart,
        doc: "Controller mode, SYNC_MASTER: a send waits for every member of the sync-state set.",
        parse: parse_bool, show: ToString::to_string,
    },
    in_sync_replicas: usize = 1 => {
        key: "inSyncReplicas", unit: "", applies: AtRestart,
        doc: "Controller mode, SYNC_MASTER without allAckInSyncStateSet: copies a send needs \
              (the master's included).",
        parse: parse_positive, show: ToString::to_string,
    },
    min_in_sync_replicas: usize = 1 => {
        key: "minInSyncReplicas", unit: "", applies: AtRestart,
        doc: "Controller mode, SYNC_MASTER: with a smaller sync-state set sends are refused.",
        parse: parse_positive, show: ToString::to_string,
    },
    store_root: PathBuf = PathBuf::from("store") => {
        key: "storePathRootDir", unit: "", applies: StartUpOnly,
        doc: "Root of the store: commit logs, queues, metadata and run-time config updates.",
        parse: non_empty_path, show: path_text,
    },
    flush_disk_type: FlushDiskType = FlushDiskType::SyncFlush => {
        key: "flushDiskType", unit: "", applies: AtRestart,
        doc: "SYNC_FLUSH acknowledges a send after its fdatasync; ASYNC_FLUSH after the append.",
        parse: parse_flush_disk_type, show: flush_disk_type_text,
    },
    flush_interval_ms: u64 = 500 => {
        key: "flushIntervalCommitLog", unit: "ms", applies: AtRestart,
        doc: "How often ASYNC_FLUSH flushes the commit log.",
        parse: |key, value| parse(key, value, "ms"), show: ToString::to_string,
    },
    broker_role: BrokerRole = BrokerRole::AsyncMaster => {
        key: "brokerRole", unit: "", applies: AtRestart,
        doc: "ASYNC_MASTER, SYNC_MASTER, or SLAVE (a read replica of its master's logs).",
        parse: parse_broker_role, show: broker_role_text,
    },
    broker_permission: i32 = 6 => {
        key: "brokerPermission", unit: "", applies: Live,
        doc: "Permission bits of the whole broker: 6 read and write, 4 read only, 2 write only.",
        parse: |key, value| parse(key, value, "perm bits"), show: ToString::to_string,
    },
    auto_create_topic: bool = true => {
        key: "autoCreateTopicEnable", unit: "", applies: Live,
        doc: "Create a topic on its first send (from the TBW102 template).",
        parse: parse_bool, show: ToString::to_string,
    },
    auto_create_subscription_group: bool = true => {
        key: "autoCreateSubscriptionGroup", unit: "", applies: Live,
        doc: "Create a consumer group on its first use.",
        parse: parse_bool, show: ToString::to_string,
    },
    default_topic_queue_nums: i32 = 8 => {
        key: "defaultTopicQueueNums", unit: "queues", applies: AtRestart,
        doc: "Queues of the TBW102 template that auto-created topics copy.",
        parse: parse_positive, show: ToString::to_string,
    },
    message_bytes_max: usize = 4 * 1024 * 1024 => {
        key: "maxMessageSize", unit: "bytes", applies: Live,
        doc: "Largest message body a send may carry.",
        parse: parse_positive, show: ToString::to_string,
    },
    commit_log_segment_bytes: u64 = 1 << 30 => {
        key: "mappedFileSizeCommitLog", unit: "bytes", applies: AtRestart,
        doc: "Size of one commit-log segment file.",
        parse: parse_positive, show: ToString::to_string,
    },
    /// Comet's own: Java reads consume queues through the page cache, Comet reads cold
    /// ranges with direct I/O into this cache (docs/architecture.md#consume-queues).
    consume_queue_cache_bytes: usize = 32 * 1024 * 1024 => {
        key: "consumeQueueCacheBytes", unit: "bytes", applies: AtRestart,
        doc: "Per shard: consume-queue blocks cached for reads far behind the tail (backlogs, \
              lookups by time); 0 reads every cold block from disk.",
        parse: parse_bytes, show: ToString::to_string,
    },
    /// Comet's own: Java reads cold commit-log ranges through the page cache, Comet with direct
    /// I/O, keeping the last read-ahead windows (docs/architecture.md#read-windows).
    commit_log_read_window_cache_bytes: usize =
        comet_store::limits::READ_WINDOW_CACHE_BYTES_DEFAULT => {
        key: "commitLogReadWindowCacheBytes", unit: "bytes", applies: AtRestart,
        doc: "Per shard: commit-log windows read from disk (256 KiB each) kept across pulls, so \
              queues draining a backlog together read each cold range once; 0 keeps none \
              (and reads nothing ahead), else 262144..1073741824.",
        parse: parse_read_window_cache_bytes, show: ToString::to_string,
    },
    /// On by default here, off in RocketMQ; see the store's `warm`.
    warm_commit_log: bool = true => {
        key: "warmMapedFileEnable", unit: "", applies: AtRestart,
        doc: "Keep the commit log written with zeros a little ahead of the write position.",
        parse: parse_bool, show: ToString::to_string,
    },
    /// Comet's own key.
    commit_log_flushes_in_flight: usize = comet_store::limits::FLUSHES_IN_FLIGHT_MAX => {
        key: "commitLogFlushesInFlight", unit: "flushes", applies: AtRestart,
        doc: "2 lets a commit-log flush start while another is writing; 1 writes one at a time.",
        parse: parse_flushes_in_flight, show: ToString::to_string,
    },
    file_reserved_hours: u64 = 72 => {
        key: "fileReservedTime", unit: "hours", applies: AtRestart,
        doc: "How long commit-log segments are kept before they expire.",
        parse: |key, value| parse(key, value, "hours"), show: ToString::to_string,
    },
    delete_when_hours: Vec<u8> = vec![4] => {
        key: "deleteWhen", unit: "hours", applies: AtRestart,
        doc: "Hours of the day when expired segments go, e.g. `04` or `04;16`.",
        parse: parse_hours, show: hours_text,
    },
    /// Java's meaning and default (`CleanCommitLogService`): past it, expired segments go
    /// whatever the hour; only the clean-forcibly mark deletes unexpired ones.
    disk_max_used_percent: u8 = 75 => {
        key: "diskMaxUsedSpaceRatio", unit: "%", applies: AtRestart,
        doc: "Disk use past which expired segments go at any hour, not only at deleteWhen \
              (10..95).",
        parse: parse_percent, show: ToString::to_string,
    },
    disk_clean_forcibly_percent: u8 = 85 => {
        key: "diskSpaceCleanForciblyRatio", unit: "%", applies: AtRestart,
        doc: "Disk use past which the oldest segment goes at once, expired or not (30..95; \
              Java caps it at 85).",
        parse: parse_clean_forcibly_percent, show: ToString::to_string,
    },
    disk_refuse_writes_percent: u8 = 90 => {
        key: "diskSpaceWarningLevelRatio", unit: "%", applies: AtRestart,
        doc: "Disk use past which sends are refused until space frees (35..99; Java caps it \
              at 90).",
        parse: parse_refuse_writes_percent, show: ToString::to_string,
    },
    register_period_ms: u64 = 30_000 => {
        key: "registerNameServerPeriod", unit: "ms", applies: AtRestart,
        doc: "How often the broker registers with the name servers, clamped to 10000..60000.",
        parse: parse_register_period, show: ToString::to_string,
    },
    message_delay_levels: String =
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h".to_owned() => {
        key: "messageDelayLevel", unit: "", applies: AtRestart,
        doc: "Delays of the delay levels 1, 2, ..., separated by spaces (`s`, `m`, `h`, `d`).",
        parse: non_empty, show: ToString::to_string,
    },
    cluster_topic_enable: bool = true => {
        key: "clusterTopicEnable", unit: "", applies: AtRestart,
        doc: "Create the topic named after the cluster.",
        parse: parse_bool, show: ToString::to_string,
    },
    broker_topic_enable: bool = true => {
        key: "brokerTopicEnable", unit: "", applies: AtRestart,
        doc: "Create the topic named after the broker.",
        parse: parse_bool, show: ToString::to_string,
    },
    trace_topic_enable: bool = false => {
        key: "traceTopicEnable", unit: "", applies: AtRestart,
        doc: "Create the message-trace topic RMQ_SYS_TRACE_TOPIC.",
        parse: parse_bool, show: ToString::to_string,
    },
    long_polling_enable: bool = true => {
        key: "longPollingEnable", unit: "", applies: Live,
        doc: "Hold a pull that finds nothing until a message arrives or it times out.",
        parse: parse_bool, show: ToString::to_string,
    },
    short_polling_ms: u64 = 1000 => {
        key: "shortPollingTimeMills", unit: "ms", applies: Live,
        doc: "How long a pull is held when long polling is off.",
        parse: |key, value| parse(key, value, "ms"), show: ToString::to_string,
    },
    sync_flush_timeout_ms: u64 = 5000 => {
        key: "syncFlushTimeout", unit: "ms", applies: Live,
        doc: "How long a send waits for its flush (FLUSH_DISK_TIMEOUT), then for a \
              SYNC_MASTER's slave (FLUSH_SLAVE_TIMEOUT).",
        parse: |key, value| parse(key, value, "ms"), show: ToString::to_string,
    },
    transaction_check_interval_ms: u64 = 60_000 => {
        key: "transactionCheckInterval", unit: "ms", applies: AtRestart,
        doc: "How often half (prepared) transaction messages are checked.",
        parse: |key, value| parse(key, value, "ms"), show: ToString::to_string,
    },
    transaction_timeout_ms: u64 = 6000 => {
        key: "transactionTimeOut", unit: "ms", applies: Live,
        doc: "Age of a half message before its producer is asked for the outcome.",
        parse: |key, value| parse(key, value, "ms"), show: ToString::to_string,
    },
    transaction_check_max: i32 = 15 => {
        key: "transactionCheckMax", unit: "checks", applies: Live,
        doc: "Checks of a half message before it is given up (rolled back).",
        parse: |key, value| parse(key, value, "a count"), show: ToString::to_string,
    },
    timer_wheel_enable: bool = true => {
        key: "timerWheelEnable", unit: "", applies: AtRestart,
        doc: "Accept timed messages (TIMER_DELIVER_MS, TIMER_DELAY_SEC, TIMER_DELAY_MS).",
        parse: parse_bool, show: ToString::to_string,
    },
    timer_max_delay_sec: u64 = 3 * 24 * 3600 => {
        key: "timerMaxDelaySec", unit: "s", applies: AtRestart,
        doc: "Furthest ahead a timed message may be scheduled.",
        parse: |key, value| parse(key, value, "seconds"), show: ToString::to_string,
    },
    init_pop_offset_by_check_msg_in_mem: bool = true => {
        key: "initPopOffsetByCheckMsgInMem", unit: "", applies: Live,
        doc: "A pop group new to a queue asking to start at its end starts at its first \
              message while the queue was never trimmed and that message is still within \
              accessMessageInMemoryMaxRatio of memory (as RocketMQ).",
        parse: parse_bool, show: ToString::to_string,
    },
    /// Java's key bounds its in-memory buffer of pop checkpoints (`PopBufferMergeService`);
    /// here it bounds what the revive scanners hold (docs/architecture.md#pop).
    pop_ck_max_buffer_size: usize = 200_000 => {
        key: "popCkMaxBufferSize", unit: "checkpoints", applies: Live,
        doc: "Pop checkpoints the revive scanners hold in memory, split evenly between the \
              shards (about 600 bytes each); the others wait in the revive queue, still \
              revived, later.",
        parse: parse_positive, show: ToString::to_string,
    },
    recall_message_enable: bool = false => {
        key: "recallMessageEnable", unit: "", applies: Live,
        doc: "Serve RECALL_MESSAGE (off by default, as in RocketMQ).",
        parse: parse_bool, show: ToString::to_string,
    },
    region_id: String = "DefaultRegion".to_owned() => {
        key: "regionId", unit: "", applies: Live,
        doc: "Region echoed in send responses as MSG_REGION.",
        parse: non_empty, show: ToString::to_string,
    },
    trace_on: bool = true => {
        key: "traceOn", unit: "", applies: Live,
        doc: "Echoed in send responses as TRACE_ON.",
        parse: parse_bool, show: ToString::to_string,
    },
    channel_idle_ms: u64 = 120_000 => {
        key: "serverChannelMaxIdleTimeSeconds", unit: "s", applies: AtRestart,
        doc: "A client connection silent this long is closed.",
        parse: parse_seconds_as_ms, show: ms_as_seconds_text,
    },
    /// Comet saves at least once a second whatever the value, so a crash loses little.
    persist_interval_ms: u64 = 5000 => {
        key: "flushConsumerOffsetInterval", unit: "ms", applies: AtRestart,
        doc: "How often consumer offsets are saved (at least every second in Comet).",
        parse: |key, value| parse(key, value, "ms"), show: ToString::to_string,
    },
    acl_enable: bool = false => {
        key: "aclEnable", unit: "", applies: AtRestart,
        doc: "Check every request against the plain ACL accounts file (ACL 1.0).",
        parse: parse_bool, show: ToString::to_string,
    },
    /// Comet's key: Java reads `${rocketmq.home.dir}/conf/plain_acl.yml`. Relative to the
    /// working directory, as Java's is to the RocketMQ home.
    plain_acl_file: PathBuf = PathBuf::from("conf/plain_acl.yml") => {
        key: "plainAclFile", unit: "", applies: AtRestart,
        doc: "The ACL 1.0 accounts file used when aclEnable is on.",
        parse: non_empty_path, show: path_text,
    },
    /// Java reads the `tls.*` keys as system properties or from its `tls.config.file`; Comet
    /// reads them from broker.conf like any key (docs/operations.md#tls).
    tls_server_mode: TlsMode = TlsMode::Disabled => {
        key: "tls.server.mode", unit: "", applies: AtRestart,
        doc: "TLS on the client port: disabled, permissive (TLS and plain) or enforcing.",
        parse: parse_tls_mode, show: ToString::to_string,
    },
    tls_server_cert_path: Option<PathBuf> = None => {
        key: "tls.server.certPath", unit: "", applies: AtRestart,
        doc: "PEM certificate chain of the TLS port, the broker's own certificate first.",
        parse: parse_optional_path, show: optional_path_text,
    },
    tls_server_key_path: Option<PathBuf> = None => {
        key: "tls.server.keyPath", unit: "", applies: AtRestart,
        doc: "PEM private key of the TLS port (PKCS#8, PKCS#1 or SEC1, not encrypted).",
        parse: parse_optional_path, show: optional_path_text,
    },
    tls_server_key_password: String = String::new() => {
        key: "tls.server.keyPassword", unit: "", applies: AtRestart,
        doc: "Password of an encrypted key: refused at start-up (decrypt the key instead).",
        parse: |_key, value| Ok(value.to_owned()), show: ToString::to_string,
    },
    tls_server_need_client_auth: ClientAuth = ClientAuth::None => {
        key: "tls.server.need.client.auth", unit: "", applies: AtRestart,
        doc: "Client certificates: none, optional or require (checked against trustCertPath).",
        parse: parse_client_auth, show: ToString::to_string,
    },
    tls_server_trust_cert_path: Option<PathBuf> = None => {
        key: "tls.server.trustCertPath", unit: "", applies: AtRestart,
        doc: "PEM CA certificates client certificates must chain to.",
        parse: parse_optional_path, show: optional_path_text,
    },
    /// Java's `TlsSystemConfig.tlsEnable`; its broker turns it on by default when its own
    /// port enforces TLS, and so does Comet.
    tls_enable: bool = false => {
        key: "tls.enable", unit: "", applies: AtRestart,
        doc: "TLS on the broker's own connections to name servers (also on when enforcing).",
        parse: parse_bool, show: ToString::to_string,
    },
    tls_test_mode_enable: bool = true => {
        key: "tls.test.mode.enable", unit: "", applies: AtRestart,
        doc: "Outgoing TLS accepts any server certificate (Java's default; false to check).",
        parse: parse_bool, show: ToString::to_string,
    },
    tls_client_auth_server: bool = false => {
        key: "tls.client.authServer", unit: "", applies: AtRestart,
        doc: "With test mode off: check name servers' certificates against trustCertPath.",
        parse: parse_bool, show: ToString::to_string,
    },
    tls_client_trust_cert_path: Option<PathBuf> = None => {
        key: "tls.client.trustCertPath", unit: "", applies: AtRestart,
        doc: "PEM CA certificates outgoing TLS trusts when tls.client.authServer is on.",
        parse: parse_optional_path, show: optional_path_text,
    },
    metrics_exporter: MetricsExporter = MetricsExporter::Disable => {
        key: "metricsExporterType", unit: "", applies: AtRestart,
        doc: "DISABLE, or PROM: serve Prometheus metrics over HTTP under RocketMQ's names.",
        parse: parse_metrics_exporter, show: metrics_exporter_text,
    },
    /// Java's key takes a host name too; an address here, so the endpoint binds what is
    /// written.
    metrics_prom_exporter_host: Option<IpAddr> = None => {
        key: "metricsPromExporterHost", unit: "", applies: AtRestart,
        doc: "Address the metrics endpoint binds (empty: brokerIP1).",
        parse: parse_optional_ip, show: optional_ip_text,
    },
    metrics_prom_exporter_port: u16 = 5557 => {
        key: "metricsPromExporterPort", unit: "", applies: AtRestart,
        doc: "Port of the metrics endpoint (GET /metrics).",
        parse: |key, value| parse(key, value, "a port number"), show: ToString::to_string,
    },
    /// Handed to the name server `--standalone` embeds (its own `consoleListenPort`).
    console_listen_port: u16 = 0 => {
        key: "consoleListenPort", unit: "", applies: AtRestart,
        doc: "--standalone: port of the embedded name server's web console \
              (docs/operations.md#web-console), on its address; 0: off.",
        parse: |key, value| parse(key, value, "a port number"), show: ToString::to_string,
    },
    /// Read before anything is logged: the logger starts once the configuration is read.
    log_format: LogFormat = LogFormat::Text => {
        key: "logFormat", unit: "", applies: AtRestart,
        doc: "Log line format on stderr: text, kv (logfmt) or json (one object a line).",
        parse: parse_log_format, show: ToString::to_string,
    },
    /// QUERY_ASSIGNMENT's mode for a (topic, group) no SET_MESSAGE_REQUEST_MODE named;
    /// retry topics are always PULL (Java's `QueryAssignmentProcessor`).
    default_message_request_mode: MessageRequestMode = MessageRequestMode::PULL => {
        key: "defaultMessageRequestMode", unit: "", applies: Live,
        doc: "PULL or POP: how server-rebalanced consumers read a group's queues by default.",
        parse: parse_message_request_mode, show: message_request_mode_text,
    },
    default_pop_share_queue_num: i32 = -1 => {
        key: "defaultPopShareQueueNum", unit: "consumers", applies: Live,
        doc: "Default POP sharing: following consumers' queues each pops (<= 0: every queue).",
        parse: |key, value| parse(key, value, "an integer"), show: ToString::to_string,
    },
    /// Java spells the key without a final `d`.
    server_load_balancer_enable: bool = true => {
        key: "serverLoadBalancerEnable", unit: "", applies: Live,
        doc: "QUERY_ASSIGNMENT splits queues among a group (false: every consumer gets all).",
        parse: parse_bool, show: ToString::to_string,
    },
}
