//! Broker configuration: RocketMQ's `broker.conf` keys, as `mqbroker -c` reads them.
//!
//! An operator brings their existing file; every key RocketMQ users set for a single broker is
//! understood under its RocketMQ name. Keys Comet does not know are reported back (the caller
//! logs a warning) rather than refused, because Java brokers have hundreds of tunables that
//! mean nothing here. A known key with a malformed value is an error naming the key: a broker
//! that silently ignores `listenPort=10911x` would listen somewhere unexpected.
//!
//! Internal names carry units (`flush_interval_ms`, `message_bytes_max`); the RocketMQ key is
//! kept beside each field.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use thiserror::Error;

/// When a send is acknowledged relative to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    /// Acknowledge after the `fdatasync` that covers the message (Comet's default).
    SyncFlush,
    /// Acknowledge after the in-memory append; flush every `flush_interval_ms`.
    AsyncFlush,
}

/// The broker's replication role. Comet does not replicate yet, so every broker is a master
/// and `SLAVE` is refused: a slave would register as a read replica holding nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerRole {
    /// Master; slaves would catch up asynchronously.
    AsyncMaster,
    /// Master whose sends wait for a slave. With no slave to wait for, sends are stored and
    /// answered SLAVE_NOT_AVAILABLE, as Apache RocketMQ's SYNC_MASTER answers while no slave
    /// is connected.
    SyncMaster,
}

/// A key whose value cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("broker config key `{key}` has invalid value {value:?}: expected {expected}")]
pub struct ConfigError {
    /// The RocketMQ key.
    pub key: String,
    /// The value given.
    pub value: String,
    /// What the key takes.
    pub expected: &'static str,
}

/// Everything a broker process is told at start-up.
#[derive(Clone, Debug)]
pub struct BrokerConfig {
    /// `brokerClusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// `brokerId`: 0 for a master.
    pub broker_id: i64,
    /// `namesrvAddr`: name servers to register with, `;`-separated in the file.
    pub namesrv_addrs: Vec<String>,
    /// `brokerIP1`: the address clients are told to connect to.
    pub broker_ip: IpAddr,
    /// `bindAddress`: the local address every listener of the process binds (the client port,
    /// and the embedded name server of `--standalone`). Default 0.0.0.0, every interface, as
    /// RocketMQ's `NettyServerConfig.bindAddress`; tests and local set-ups give 127.0.0.1.
    /// Always IPv4: the listeners' port reservation is IPv4-only.
    pub bind_address: IpAddr,
    /// `listenPort`.
    pub listen_port: u16,
    /// `haListenPort`.
    pub ha_listen_port: u16,
    /// `storePathRootDir`.
    pub store_root: PathBuf,
    /// `flushDiskType`.
    pub flush_disk_type: FlushDiskType,
    /// `flushIntervalCommitLog`: the ASYNC_FLUSH interval.
    pub flush_interval_ms: u64,
    /// `brokerRole`.
    pub broker_role: BrokerRole,
    /// `brokerPermission`.
    pub broker_permission: i32,
    /// `autoCreateTopicEnable`.
    pub auto_create_topic: bool,
    /// `autoCreateSubscriptionGroup`.
    pub auto_create_subscription_group: bool,
    /// `defaultTopicQueueNums`: queues of the `TBW102` template.
    pub default_topic_queue_nums: i32,
    /// `maxMessageSize`.
    pub message_bytes_max: usize,
    /// `mappedFileSizeCommitLog`.
    pub commit_log_segment_bytes: u64,
    /// `warmMapedFileEnable`: keep the commit log written with zeros a little ahead of the
    /// write position (on by default here, off in RocketMQ; see the store's `warm`).
    pub warm_commit_log: bool,
    /// `commitLogFlushesInFlight` (Comet's own key): 2 lets a commit-log flush start while
    /// another is writing when sends keep arriving (the default), 1 writes one at a time.
    pub commit_log_flushes_in_flight: usize,
    /// `fileReservedTime` (hours).
    pub file_reserved_hours: u64,
    /// `deleteWhen`: hours of the day when expired segments go, e.g. `04` or `04;16`.
    pub delete_when_hours: Vec<u8>,
    /// `diskMaxUsedSpaceRatio`: disk use (percent) past which expired files go at once.
    pub disk_used_high_percent: u8,
    /// `registerNameServerPeriod`, clamped to 10..60 s as RocketMQ does.
    pub register_period_ms: u64,
    /// `messageDelayLevel`.
    pub message_delay_levels: String,
    /// `clusterTopicEnable`.
    pub cluster_topic_enable: bool,
    /// `brokerTopicEnable`.
    pub broker_topic_enable: bool,
    /// `traceTopicEnable`.
    pub trace_topic_enable: bool,
    /// `longPollingEnable`.
    pub long_polling_enable: bool,
    /// `shortPollingTimeMills`.
    pub short_polling_ms: u64,
    /// `syncFlushTimeout`: how long a send waits for its flush before FLUSH_DISK_TIMEOUT.
    pub sync_flush_timeout_ms: u64,
    /// `transactionCheckInterval`.
    pub transaction_check_interval_ms: u64,
    /// `transactionTimeOut`.
    pub transaction_timeout_ms: u64,
    /// `transactionCheckMax`.
    pub transaction_check_max: i32,
    /// `timerWheelEnable`: timed messages (TIMER_DELIVER_MS, ...) are accepted.
    pub timer_wheel_enable: bool,
    /// `timerMaxDelaySec`: the furthest a timed message may be scheduled ahead.
    pub timer_max_delay_sec: u64,
    /// `regionId`, echoed in send responses as `MSG_REGION`.
    pub region_id: String,
    /// `traceOn`, echoed in send responses as `TRACE_ON`.
    pub trace_on: bool,
    /// `serverChannelMaxIdleTimeSeconds`.
    pub channel_idle_ms: u64,
    /// `consumerOffsetPersistInterval`-like: how often offsets and groups are persisted.
    pub persist_interval_ms: u64,
    /// `aclEnable`: check every request against the plain ACL accounts file (ACL 1.0).
    pub acl_enable: bool,
    /// `plainAclFile` (Comet's key; Java reads `${rocketmq.home.dir}/conf/plain_acl.yml`):
    /// the accounts file used when `aclEnable` is on. Default `conf/plain_acl.yml`, relative
    /// to the working directory as Java's is to the RocketMQ home.
    pub plain_acl_file: PathBuf,
}

impl Default for BrokerConfig {
    fn default() -> BrokerConfig {
        BrokerConfig {
            cluster_name: "DefaultCluster".to_owned(),
            broker_name: "broker-a".to_owned(),
            broker_id: 0,
            namesrv_addrs: Vec::new(),
            broker_ip: IpAddr::V4(Ipv4Addr::LOCALHOST),
            bind_address: IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            listen_port: 10911,
            ha_listen_port: 10912,
            store_root: PathBuf::from("store"),
            flush_disk_type: FlushDiskType::SyncFlush,
            flush_interval_ms: 500,
            broker_role: BrokerRole::AsyncMaster,
            broker_permission: 6,
            auto_create_topic: true,
            auto_create_subscription_group: true,
            default_topic_queue_nums: 8,
            message_bytes_max: 4 * 1024 * 1024,
            commit_log_segment_bytes: 1 << 30,
            warm_commit_log: true,
            commit_log_flushes_in_flight: comet_store::limits::FLUSHES_IN_FLIGHT_MAX,
            file_reserved_hours: 72,
            delete_when_hours: vec![4],
            disk_used_high_percent: 85,
            register_period_ms: 30_000,
            message_delay_levels: "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
                .to_owned(),
            cluster_topic_enable: true,
            broker_topic_enable: true,
            trace_topic_enable: false,
            long_polling_enable: true,
            short_polling_ms: 1000,
            sync_flush_timeout_ms: 5000,
            transaction_check_interval_ms: 60_000,
            transaction_timeout_ms: 6000,
            transaction_check_max: 15,
            timer_wheel_enable: true,
            timer_max_delay_sec: 3 * 24 * 3600,
            region_id: "DefaultRegion".to_owned(),
            trace_on: true,
            channel_idle_ms: 120_000,
            persist_interval_ms: 5000,
            acl_enable: false,
            plain_acl_file: PathBuf::from("conf/plain_acl.yml"),
        }
    }
}

impl BrokerConfig {
    /// Applies `key = value` pairs in order (the last occurrence wins). Returns the keys Comet
    /// does not know, for the caller to warn about.
    pub fn apply_pairs<'a>(
        &mut self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Vec<String>, ConfigError> {
        let mut unknown = Vec::new();
        let mut ha_port_set = false;
        for (key, value) in pairs {
            ha_port_set |= key == "haListenPort";
            if !self.apply(key, value.trim())? {
                unknown.push(key.to_owned());
            }
        }
        if !ha_port_set {
            self.ha_listen_port = self.listen_port.saturating_add(1);
        }
        Ok(unknown)
    }

    /// Applies one key; `Ok(false)` for a key Comet does not know.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "brokerClusterName" => self.cluster_name = non_empty(key, value)?,
            "brokerName" => self.broker_name = non_empty(key, value)?,
            "brokerId" => self.broker_id = parse_master_id(key, value)?,
            "namesrvAddr" => self.namesrv_addrs = split_list(value),
            "brokerIP1" => self.broker_ip = parse(key, value, "an IP address")?,
            "bindAddress" => self.bind_address = parse_bind_address(key, value)?,
            "listenPort" => self.listen_port = parse(key, value, "a port number")?,
            "haListenPort" => self.ha_listen_port = parse(key, value, "a port number")?,
            "storePathRootDir" => self.store_root = PathBuf::from(non_empty(key, value)?),
            "flushDiskType" => self.flush_disk_type = parse_flush_disk_type(key, value)?,
            "flushIntervalCommitLog" => self.flush_interval_ms = parse(key, value, "ms")?,
            "brokerRole" => self.broker_role = parse_broker_role(key, value)?,
            "brokerPermission" => self.broker_permission = parse(key, value, "perm bits")?,
            "autoCreateTopicEnable" => self.auto_create_topic = parse_bool(key, value)?,
            "autoCreateSubscriptionGroup" => {
                self.auto_create_subscription_group = parse_bool(key, value)?
            }
            "defaultTopicQueueNums" => {
                self.default_topic_queue_nums = parse_positive(key, value)?;
            }
            "maxMessageSize" => self.message_bytes_max = parse_positive(key, value)?,
            "mappedFileSizeCommitLog" => {
                self.commit_log_segment_bytes = parse_positive(key, value)?;
            }
            "warmMapedFileEnable" => self.warm_commit_log = parse_bool(key, value)?,
            "commitLogFlushesInFlight" => {
                self.commit_log_flushes_in_flight = parse_flushes_in_flight(key, value)?;
            }
            "fileReservedTime" => self.file_reserved_hours = parse(key, value, "hours")?,
            "deleteWhen" => self.delete_when_hours = parse_hours(key, value)?,
            "diskMaxUsedSpaceRatio" => self.disk_used_high_percent = parse_percent(key, value)?,
            "registerNameServerPeriod" => {
                let period: u64 = parse(key, value, "ms")?;
                self.register_period_ms = period.clamp(10_000, 60_000);
            }
            "messageDelayLevel" => self.message_delay_levels = non_empty(key, value)?,
            "clusterTopicEnable" => self.cluster_topic_enable = parse_bool(key, value)?,
            "brokerTopicEnable" => self.broker_topic_enable = parse_bool(key, value)?,
            "traceTopicEnable" => self.trace_topic_enable = parse_bool(key, value)?,
            "longPollingEnable" => self.long_polling_enable = parse_bool(key, value)?,
            "shortPollingTimeMills" => self.short_polling_ms = parse(key, value, "ms")?,
            "syncFlushTimeout" => self.sync_flush_timeout_ms = parse(key, value, "ms")?,
            "transactionCheckInterval" => {
                self.transaction_check_interval_ms = parse(key, value, "ms")?;
            }
            "transactionTimeOut" => self.transaction_timeout_ms = parse(key, value, "ms")?,
            "transactionCheckMax" => self.transaction_check_max = parse(key, value, "a count")?,
            "timerWheelEnable" => self.timer_wheel_enable = parse_bool(key, value)?,
            "timerMaxDelaySec" => self.timer_max_delay_sec = parse(key, value, "seconds")?,
            "aclEnable" => self.acl_enable = parse_bool(key, value)?,
            "plainAclFile" => self.plain_acl_file = PathBuf::from(non_empty(key, value)?),
            "authenticationEnabled" | "authorizationEnabled" => {
                refuse_access_control(key, value)?;
            }
            "regionId" => self.region_id = non_empty(key, value)?,
            "traceOn" => self.trace_on = parse_bool(key, value)?,
            "serverChannelMaxIdleTimeSeconds" => {
                let seconds: u64 = parse(key, value, "seconds")?;
                self.channel_idle_ms = seconds.saturating_mul(1000);
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// True for keys whose new value the broker uses at once when changed at run time
    /// (UPDATE_BROKER_CONFIG): they are read on every request. The others are read when the
    /// broker starts (listeners, store, name-server links, periodic tasks) and take effect at
    /// the next start.
    pub fn is_live_key(key: &str) -> bool {
        matches!(
            key,
            "autoCreateTopicEnable"
                | "autoCreateSubscriptionGroup"
                | "brokerPermission"
                | "maxMessageSize"
                | "syncFlushTimeout"
                | "regionId"
                | "traceOn"
                | "longPollingEnable"
                | "shortPollingTimeMills"
                | "transactionTimeOut"
                | "transactionCheckMax"
        )
    }

    /// The address the client listener binds: `bindAddress:listenPort`.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// The address registered with name servers and handed to clients: `brokerIP1:listenPort`.
    pub fn broker_addr(&self) -> String {
        format!("{}:{}", self.broker_ip, self.listen_port)
    }

    /// The HA address registered with name servers: `brokerIP1:haListenPort`.
    pub fn ha_server_addr(&self) -> String {
        format!("{}:{}", self.broker_ip, self.ha_listen_port)
    }

    /// The ASYNC_FLUSH interval.
    pub fn flush_interval(&self) -> Duration {
        Duration::from_millis(self.flush_interval_ms)
    }

    /// The configuration as `key=value` pairs under RocketMQ's names (GET_BROKER_CONFIG).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        vec![
            ("brokerClusterName", self.cluster_name.clone()),
            ("brokerName", self.broker_name.clone()),
            ("brokerId", self.broker_id.to_string()),
            ("namesrvAddr", self.namesrv_addrs.join(";")),
            ("brokerIP1", self.broker_ip.to_string()),
            ("bindAddress", self.bind_address.to_string()),
            ("listenPort", self.listen_port.to_string()),
            ("haListenPort", self.ha_listen_port.to_string()),
            ("storePathRootDir", self.store_root.display().to_string()),
            (
                "flushDiskType",
                flush_disk_type_name(self.flush_disk_type).to_owned(),
            ),
            ("flushIntervalCommitLog", self.flush_interval_ms.to_string()),
            ("brokerRole", broker_role_name(self.broker_role).to_owned()),
            ("brokerPermission", self.broker_permission.to_string()),
            ("autoCreateTopicEnable", self.auto_create_topic.to_string()),
            (
                "autoCreateSubscriptionGroup",
                self.auto_create_subscription_group.to_string(),
            ),
            (
                "defaultTopicQueueNums",
                self.default_topic_queue_nums.to_string(),
            ),
            ("maxMessageSize", self.message_bytes_max.to_string()),
            (
                "mappedFileSizeCommitLog",
                self.commit_log_segment_bytes.to_string(),
            ),
            ("warmMapedFileEnable", self.warm_commit_log.to_string()),
            (
                "commitLogFlushesInFlight",
                self.commit_log_flushes_in_flight.to_string(),
            ),
            ("fileReservedTime", self.file_reserved_hours.to_string()),
            ("deleteWhen", hours_text(&self.delete_when_hours)),
            (
                "diskMaxUsedSpaceRatio",
                self.disk_used_high_percent.to_string(),
            ),
            (
                "registerNameServerPeriod",
                self.register_period_ms.to_string(),
            ),
            ("messageDelayLevel", self.message_delay_levels.clone()),
            ("clusterTopicEnable", self.cluster_topic_enable.to_string()),
            ("brokerTopicEnable", self.broker_topic_enable.to_string()),
            ("traceTopicEnable", self.trace_topic_enable.to_string()),
            ("longPollingEnable", self.long_polling_enable.to_string()),
            ("shortPollingTimeMills", self.short_polling_ms.to_string()),
            ("syncFlushTimeout", self.sync_flush_timeout_ms.to_string()),
            (
                "transactionCheckInterval",
                self.transaction_check_interval_ms.to_string(),
            ),
            (
                "transactionTimeOut",
                self.transaction_timeout_ms.to_string(),
            ),
            (
                "transactionCheckMax",
                self.transaction_check_max.to_string(),
            ),
            ("timerWheelEnable", self.timer_wheel_enable.to_string()),
            ("timerMaxDelaySec", self.timer_max_delay_sec.to_string()),
            ("regionId", self.region_id.clone()),
            ("traceOn", self.trace_on.to_string()),
            ("aclEnable", self.acl_enable.to_string()),
            ("plainAclFile", self.plain_acl_file.display().to_string()),
        ]
    }
}

fn error(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn parse<T: std::str::FromStr>(
    key: &str,
    value: &str,
    expected: &'static str,
) -> Result<T, ConfigError> {
    value.parse().map_err(|_| error(key, value, expected))
}

fn parse_positive<T: std::str::FromStr + PartialOrd + Default>(
    key: &str,
    value: &str,
) -> Result<T, ConfigError> {
    let parsed: T = parse(key, value, "a positive integer")?;
    if parsed <= T::default() {
        return Err(error(key, value, "a positive integer"));
    }
    Ok(parsed)
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(error(key, value, "true or false")),
    }
}

/// An IPv4 address, as `bindAddress` takes: the broker's listeners reserve their port on an
/// IPv4 socket, so an IPv6 address is refused here rather than when the broker binds.
fn parse_bind_address(key: &str, value: &str) -> Result<IpAddr, ConfigError> {
    const EXPECTED: &str = "an IPv4 address such as 0.0.0.0 or 127.0.0.1";
    let address: Ipv4Addr = parse(key, value, EXPECTED)?;
    Ok(IpAddr::V4(address))
}

fn parse_flushes_in_flight(key: &str, value: &str) -> Result<usize, ConfigError> {
    let max = comet_store::limits::FLUSHES_IN_FLIGHT_MAX;
    let expected = "1 or 2";
    let flushes: usize = parse(key, value, expected)?;
    if !(1..=max).contains(&flushes) {
        return Err(error(key, value, expected));
    }
    Ok(flushes)
}

fn parse_percent(key: &str, value: &str) -> Result<u8, ConfigError> {
    let percent: u8 = parse(key, value, "a percentage 10..95")?;
    if !(10..=95).contains(&percent) {
        return Err(error(key, value, "a percentage 10..95"));
    }
    Ok(percent)
}

fn parse_hours(key: &str, value: &str) -> Result<Vec<u8>, ConfigError> {
    let mut hours = Vec::new();
    for part in value
        .split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
    {
        let hour: u8 = parse(key, part, "hours of the day 00..23 separated by ';'")?;
        if hour > 23 {
            return Err(error(
                key,
                value,
                "hours of the day 00..23 separated by ';'",
            ));
        }
        hours.push(hour);
    }
    Ok(hours)
}

fn hours_text(hours: &[u8]) -> String {
    hours
        .iter()
        .map(|hour| format!("{hour:02}"))
        .collect::<Vec<_>>()
        .join(";")
}

fn non_empty(key: &str, value: &str) -> Result<String, ConfigError> {
    if value.is_empty() {
        return Err(error(key, value, "a non-empty value"));
    }
    Ok(value.to_owned())
}

fn split_list(value: &str) -> Vec<String> {
    value
        .split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect()
}

fn parse_flush_disk_type(key: &str, value: &str) -> Result<FlushDiskType, ConfigError> {
    match value {
        "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
        "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
        _ => Err(error(key, value, "SYNC_FLUSH or ASYNC_FLUSH")),
    }
}

fn flush_disk_type_name(flush: FlushDiskType) -> &'static str {
    match flush {
        FlushDiskType::SyncFlush => "SYNC_FLUSH",
        FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
    }
}

fn parse_broker_role(key: &str, value: &str) -> Result<BrokerRole, ConfigError> {
    match value {
        "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
        "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
        _ => Err(error(
            key,
            value,
            "ASYNC_MASTER or SYNC_MASTER (Comet does not replicate yet, so it runs no slaves)",
        )),
    }
}

/// RocketMQ 5.x's ACL 2.0 switches (`authenticationEnabled` / `authorizationEnabled`): only
/// "off" is accepted. Comet implements ACL 1.0 (`aclEnable`) only, and a broker asked for
/// ACL 2.0 must not quietly run open.
fn refuse_access_control(key: &str, value: &str) -> Result<(), ConfigError> {
    match parse_bool(key, value)? {
        false => Ok(()),
        true => Err(error(
            key,
            value,
            "false (Comet has no ACL 2.0; use ACL 1.0, aclEnable=true with plainAclFile; it will \
             not run open where access control was asked for)",
        )),
    }
}

/// `brokerId` of a master: 0, the id clients send to (a non-zero id would register a broker
/// that producers never choose).
fn parse_master_id(key: &str, value: &str) -> Result<i64, ConfigError> {
    match parse(key, value, "0 (a master's id)")? {
        0 => Ok(0),
        _ => Err(error(
            key,
            value,
            "0 (a master's id; Comet does not replicate yet, so it runs no slaves)",
        )),
    }
}

fn broker_role_name(role: BrokerRole) -> &'static str {
    match role {
        BrokerRole::AsyncMaster => "ASYNC_MASTER",
        BrokerRole::SyncMaster => "SYNC_MASTER",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a typical RocketMQ broker.conf applies, unknown keys come back for a warning,
    // and the HA port follows the listen port unless set.
    #[test]
    fn applies_a_rocketmq_broker_conf() {
        let text = "brokerClusterName=C1\nbrokerName=b1\nbrokerId=0\ndeleteWhen=04\n\
                    fileReservedTime=48\nbrokerRole=ASYNC_MASTER\nflushDiskType=ASYNC_FLUSH\n\
                    namesrvAddr=127.0.0.1:9876;127.0.0.1:9877\nlistenPort=20911\n\
                    storePathRootDir=/tmp/x\nsendMessageThreadPoolNums=16\n\
                    warmMapedFileEnable=false\n";
        let pairs = comet_proto::java_properties::parse(text);
        let mut config = BrokerConfig::default();
        let unknown = config
            .apply_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .unwrap();
        assert_eq!(unknown, vec!["sendMessageThreadPoolNums".to_owned()]);
        assert_eq!(config.cluster_name, "C1");
        assert_eq!(config.flush_disk_type, FlushDiskType::AsyncFlush);
        assert_eq!(config.namesrv_addrs.len(), 2);
        assert_eq!(config.listen_port, 20911);
        assert_eq!(config.ha_listen_port, 20912);
        assert_eq!(config.file_reserved_hours, 48);
        assert!(!config.warm_commit_log);
        assert_eq!(config.broker_addr(), "127.0.0.1:20911");
    }

    // Proves a malformed value is an error naming the key, and defaults are durable.
    #[test]
    fn bad_values_are_errors() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.flush_disk_type, FlushDiskType::SyncFlush);
        let error = config.apply("listenPort", "10911x").unwrap_err();
        assert_eq!(error.key, "listenPort");
        assert!(config.apply("flushDiskType", "SOMETIMES").is_err());
        assert!(config.apply("maxMessageSize", "0").is_err());
        assert!(config.apply("deleteWhen", "25").is_err());
        assert!(config.apply("autoCreateTopicEnable", "yes").is_err());
        assert_eq!(config.commit_log_flushes_in_flight, 2);
        for bad in ["0", "3", "two"] {
            let error = config.apply("commitLogFlushesInFlight", bad).unwrap_err();
            assert_eq!(error.key, "commitLogFlushesInFlight");
        }
        assert_eq!(config.apply("commitLogFlushesInFlight", "1"), Ok(true));
        assert_eq!(config.commit_log_flushes_in_flight, 1);
        assert_eq!(config.apply("registerNameServerPeriod", "1000"), Ok(true));
        assert_eq!(config.register_period_ms, 10_000);
    }

    // Proves a slave's configuration is refused with a reason (Comet has no replication for
    // it to follow), while both master roles apply.
    #[test]
    fn slave_roles_are_refused() {
        let mut config = BrokerConfig::default();
        let error = config.apply("brokerRole", "SLAVE").unwrap_err();
        assert_eq!(error.key, "brokerRole");
        assert!(error.to_string().contains("does not replicate"), "{error}");
        let error = config.apply("brokerId", "1").unwrap_err();
        assert_eq!(error.key, "brokerId");
        assert!(config.apply("brokerId", "x").is_err());
        assert_eq!(config.apply("brokerId", "0"), Ok(true));
        assert_eq!(config.apply("brokerRole", "SYNC_MASTER"), Ok(true));
        assert_eq!(config.broker_role, BrokerRole::SyncMaster);
        assert_eq!(config.apply("brokerRole", "ASYNC_MASTER"), Ok(true));
    }

    // Proves ACL 2.0 (5.x authentication/authorization) is refused with a reason while
    // turning it off applies, and ACL 1.0 (`aclEnable`, `plainAclFile`) is taken.
    #[test]
    fn only_acl_1_is_accepted() {
        let mut config = BrokerConfig::default();
        for key in ["authenticationEnabled", "authorizationEnabled"] {
            let error = config.apply(key, "true").unwrap_err();
            assert_eq!(error.key, key);
            assert!(error.to_string().contains("no ACL 2.0"), "{error}");
            assert_eq!(config.apply(key, "false"), Ok(true));
            assert!(config.apply(key, "maybe").is_err());
        }
        assert!(!config.acl_enable);
        assert_eq!(config.plain_acl_file, PathBuf::from("conf/plain_acl.yml"));
        assert_eq!(config.apply("aclEnable", "true"), Ok(true));
        assert!(config.acl_enable);
        assert!(config.apply("aclEnable", "maybe").is_err());
        assert_eq!(config.apply("plainAclFile", "/etc/acl.yml"), Ok(true));
        assert_eq!(config.plain_acl_file, PathBuf::from("/etc/acl.yml"));
        assert!(config.apply("plainAclFile", "").is_err());
        assert!(!BrokerConfig::is_live_key("aclEnable"));
    }

    // Proves `bindAddress` defaults to every interface, takes an IPv4 address, refuses a
    // host name, an IPv6 address, a port or an empty value with an error naming the key, and
    // is listed in the key/value dump GET_BROKER_CONFIG returns.
    #[test]
    fn bind_address_is_an_ipv4_address() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.listen_addr().to_string(), "0.0.0.0:10911");
        let pairs = [("bindAddress", " 127.0.0.1 "), ("listenPort", "20911")];
        assert!(config.apply_pairs(pairs).unwrap().is_empty());
        assert_eq!(config.bind_address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(config.listen_addr().to_string(), "127.0.0.1:20911");
        for bad in [
            "localhost",
            "::1",
            "127.0.0.1:10911",
            "",
            "127.0.0.256",
            "0.0.0.0x",
        ] {
            let error = config.apply("bindAddress", bad).unwrap_err();
            assert_eq!(error.key, "bindAddress", "{bad:?}");
            assert!(error.to_string().contains("IPv4"), "{error}");
        }
        assert_eq!(config.bind_address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        let dump = config.to_pairs();
        assert!(dump.contains(&("bindAddress", "127.0.0.1".to_owned())));
        assert!(!BrokerConfig::is_live_key("bindAddress"));
    }
}
