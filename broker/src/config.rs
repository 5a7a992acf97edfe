//! Broker configuration: RocketMQ's `broker.conf` keys, as `mqbroker -c` reads them.
//!
//! An operator brings their existing file; every key RocketMQ users set for a single broker is
//! understood under its RocketMQ name. Keys Comet does not know are reported back (the caller
//! logs a warning) rather than refused, because Java brokers have hundreds of tunables that
//! mean nothing here. A known key with a malformed value is an error naming the key: a broker
//! that silently ignores `listenPort=10911x` would listen somewhere unexpected.
//!
//! Every key is one entry of the table in `config/table.rs` ([`KEYS`], declared with
//! `comet_proto::config_table`): the field it sets,
//! its default, unit, when a change takes effect and a line of doc. Parsing (broker.conf,
//! `-o key=value`, UPDATE_BROKER_CONFIG, the persisted overrides), GET_BROKER_CONFIG,
//! `--help-config` and `docs/config/broker.md` all read that table. Internal names carry
//! units (`flush_interval_ms`, `message_bytes_max`); the RocketMQ key is the table's.

use std::net::SocketAddr;
use std::time::Duration;

use thiserror::Error;

pub use comet_proto::config_table::Applies;

/// One broker config key: what the table in `config/table.rs` declares for it.
pub type KeyDef = comet_proto::config_table::KeyDef<BrokerConfig, ConfigError>;

mod render;
mod table;
mod tls;
mod values;

pub use render::{help_text, markdown};
pub use table::{BrokerConfig, KEYS};

/// RocketMQ 5.x's ACL 2.0 switches: accepted only when off (see [`KEYS`] for ACL 1.0).
pub const ACL_2_KEYS: [&str; 2] = ["authenticationEnabled", "authorizationEnabled"];

/// When a send is acknowledged relative to the disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlushDiskType {
    /// Acknowledge after the `fdatasync` that covers the message (Comet's default).
    SyncFlush,
    /// Acknowledge after the in-memory append; flush every `flush_interval_ms`.
    AsyncFlush,
}

/// The broker's replication role (see `crate::replication`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BrokerRole {
    /// Master; slaves catch up asynchronously.
    AsyncMaster,
    /// Master whose sends wait for a slave. With no slave to wait for, sends are stored and
    /// answered SLAVE_NOT_AVAILABLE, as Apache RocketMQ's SYNC_MASTER answers while no slave
    /// is connected.
    SyncMaster,
    /// A read replica: follows the master of its `brokerName` log by log, refuses sends and
    /// metadata writes, serves reads.
    Slave,
}

impl BrokerRole {
    /// True for both master roles.
    pub fn is_master(self) -> bool {
        self != BrokerRole::Slave
    }
}

/// Where the broker's metrics go (`metricsExporterType`, RocketMQ 5.x's key).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MetricsExporter {
    /// No metrics are collected or served (Java's default).
    Disable,
    /// Prometheus text exposition over HTTP at `metricsPromExporterHost:metricsPromExporterPort`
    /// (docs/operations.md#metrics).
    Prom,
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

/// The table entry of `key`, if the broker knows it.
pub fn key_def(key: &str) -> Option<&'static KeyDef> {
    comet_proto::config_table::find(KEYS, key)
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
        self.check_role()?;
        self.check_ha_intervals()?;
        Ok(unknown)
    }

    /// Checks that an idle replication link heartbeats before `haHousekeepingInterval`
    /// closes it: otherwise every idle link is closed and its slave leaves the in-sync set
    /// and rejoins over and over (a master killed meanwhile leaves no one to elect).
    pub fn check_ha_intervals(&self) -> Result<(), ConfigError> {
        if self.ha_heartbeat_interval_ms >= self.ha_slave_timeout_ms {
            return Err(ConfigError {
                key: "haSendHeartbeatInterval".to_owned(),
                value: self.ha_heartbeat_interval_ms.to_string(),
                expected: "below haHousekeepingInterval (an idle replication link must \
                           heartbeat before it is closed as silent)",
            });
        }
        Ok(())
    }

    /// Checks that `brokerId` fits `brokerRole`: clients send to id 0, so a master must have
    /// it and a slave must not (a slave with id 0 would take its master's place in routes).
    /// In controller mode the controller hands out ids and roles instead: `controllerAddr`
    /// must name one controller at least.
    pub fn check_role(&self) -> Result<(), ConfigError> {
        if self.enable_controller_mode {
            if self.controller_addrs.is_empty() {
                return Err(ConfigError {
                    key: "controllerAddr".to_owned(),
                    value: String::new(),
                    expected: "one controller `host:port` at least with enableControllerMode=true",
                });
            }
            // The master's lease (70% of the timeout) stays inside the time the controller
            // waits only if heartbeats go at least that often (docs/architecture.md#failover).
            if self.broker_heartbeat_interval_ms * 10 > self.controller_heartbeat_timeout_ms * 3 {
                return Err(ConfigError {
                    key: "brokerHeartbeatInterval".to_owned(),
                    value: self.broker_heartbeat_interval_ms.to_string(),
                    expected: "at most 30% of controllerHeartBeatTimeoutMills in controller mode",
                });
            }
            return Ok(());
        }
        let value = self.broker_id.to_string();
        match (self.broker_role, self.broker_id) {
            (BrokerRole::Slave, 0) => Err(ConfigError {
                key: "brokerId".to_owned(),
                value,
                expected: "1 or more with brokerRole=SLAVE (0 is the master's id)",
            }),
            (BrokerRole::AsyncMaster | BrokerRole::SyncMaster, id) if id != 0 => Err(ConfigError {
                key: "brokerId".to_owned(),
                value,
                expected: "0 with brokerRole ASYNC_MASTER or SYNC_MASTER (1 or more is a \
                               slave's id: set brokerRole=SLAVE)",
            }),
            _ => Ok(()),
        }
    }

    /// Applies one key; `Ok(false)` for a key Comet does not know.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        if let Some(def) = key_def(key) {
            (def.parse)(self, value)?;
            return Ok(true);
        }
        if ACL_2_KEYS.contains(&key) {
            values::refuse_access_control(key, value)?;
            return Ok(true);
        }
        Ok(false)
    }

    /// True for keys whose new value the broker uses at once when changed at run time
    /// (UPDATE_BROKER_CONFIG); see [`Applies`].
    pub fn is_live_key(key: &str) -> bool {
        key_def(key).is_some_and(|def| def.applies == Applies::Live)
    }

    /// The address the client listener binds: `bindAddress:listenPort`.
    pub fn listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.listen_port)
    }

    /// The address registered with name servers and handed to clients: `brokerIP1:listenPort`.
    pub fn broker_addr(&self) -> String {
        format!("{}:{}", self.broker_ip, self.listen_port)
    }

    /// The HA address registered with name servers: `brokerIP2:haListenPort` (`brokerIP1`
    /// when `brokerIP2` is unset), as Java's `getHAServerAddr`.
    pub fn ha_server_addr(&self) -> String {
        let ip = self.broker_ip2.unwrap_or(self.broker_ip);
        format!("{ip}:{}", self.ha_listen_port)
    }

    /// The address the HA listener binds: `bindAddress:haListenPort`.
    pub fn ha_listen_addr(&self) -> SocketAddr {
        SocketAddr::new(self.bind_address, self.ha_listen_port)
    }

    /// How often an idle replication link hears from each end (`haSendHeartbeatInterval`).
    pub fn ha_heartbeat_interval(&self) -> Duration {
        Duration::from_millis(self.ha_heartbeat_interval_ms)
    }

    /// How long a replication link may stay silent (`haHousekeepingInterval`).
    pub fn ha_slave_timeout(&self) -> Duration {
        Duration::from_millis(self.ha_slave_timeout_ms)
    }

    /// The address the metrics endpoint binds: `metricsPromExporterHost` (`brokerIP1` when
    /// unset, as Java's `BrokerMetricsManager`) and `metricsPromExporterPort`.
    pub fn metrics_listen_addr(&self) -> SocketAddr {
        let ip = self.metrics_prom_exporter_host.unwrap_or(self.broker_ip);
        SocketAddr::new(ip, self.metrics_prom_exporter_port)
    }

    /// The ASYNC_FLUSH interval.
    pub fn flush_interval(&self) -> Duration {
        Duration::from_millis(self.flush_interval_ms)
    }

    /// Every key of [`KEYS`] with its value, under RocketMQ's names (GET_BROKER_CONFIG).
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        KEYS.iter().map(|def| (def.key, (def.show)(self))).collect()
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};
    use std::path::PathBuf;

    use comet_test_support::config_docs::assert_samples_round_trip;

    use super::*;

    /// A value other than the default for every key, to prove each one round-trips.
    /// `brokerId` takes only its default here: a master's id.
    const SAMPLES: &[(&str, &str)] = &[
        ("brokerClusterName", "C1"),
        ("brokerName", "broker-b"),
        ("brokerId", "0"),
        ("namesrvAddr", "10.0.0.1:9876;10.0.0.2:9876"),
        ("brokerIP1", "10.1.2.3"),
        ("bindAddress", "127.0.0.1"),
        ("listenPort", "20911"),
        ("haListenPort", "20999"),
        ("brokerIP2", "10.9.8.7"),
        ("haMasterAddress", "10.0.0.5:10912"),
        ("slaveReadEnable", "true"),
        ("enablePropertyFilter", "true"),
        ("accessMessageInMemoryMaxRatio", "25"),
        ("haMaxGapNotInSync", "1048576"),
        ("haSendHeartbeatInterval", "1000"),
        ("haHousekeepingInterval", "5000"),
        ("enableControllerMode", "true"),
        ("controllerAddr", "10.0.0.9:9878;10.0.0.10:9878"),
        ("brokerElectionPriority", "3"),
        ("controllerHeartBeatTimeoutMills", "6000"),
        ("brokerHeartbeatInterval", "500"),
        ("syncBrokerMetadataPeriod", "2000"),
        ("checkSyncStateSetPeriod", "2500"),
        ("syncControllerMetadataPeriod", "7000"),
        ("allAckInSyncStateSet", "false"),
        ("inSyncReplicas", "2"),
        ("minInSyncReplicas", "2"),
        ("storePathRootDir", "/var/lib/comet"),
        ("flushDiskType", "ASYNC_FLUSH"),
        ("flushIntervalCommitLog", "200"),
        ("brokerRole", "SYNC_MASTER"),
        ("brokerPermission", "4"),
        ("autoCreateTopicEnable", "false"),
        ("autoCreateSubscriptionGroup", "false"),
        ("defaultTopicQueueNums", "4"),
        ("maxMessageSize", "1024"),
        ("mappedFileSizeCommitLog", "1048576"),
        ("warmMapedFileEnable", "false"),
        ("commitLogFlushesInFlight", "1"),
        ("fileReservedTime", "48"),
        ("deleteWhen", "03;15"),
        ("diskMaxUsedSpaceRatio", "90"),
        ("diskSpaceCleanForciblyRatio", "80"),
        ("diskSpaceWarningLevelRatio", "95"),
        ("consumeQueueCacheBytes", "1048576"),
        ("commitLogReadWindowCacheBytes", "0"),
        ("registerNameServerPeriod", "20000"),
        ("messageDelayLevel", "1s 2s"),
        ("clusterTopicEnable", "false"),
        ("brokerTopicEnable", "false"),
        ("traceTopicEnable", "true"),
        ("longPollingEnable", "false"),
        ("shortPollingTimeMills", "300"),
        ("syncFlushTimeout", "1500"),
        ("transactionCheckInterval", "30000"),
        ("transactionTimeOut", "3000"),
        ("transactionCheckMax", "5"),
        ("timerWheelEnable", "false"),
        ("timerMaxDelaySec", "3600"),
        ("recallMessageEnable", "true"),
        ("initPopOffsetByCheckMsgInMem", "false"),
        ("popCkMaxBufferSize", "1000"),
        ("regionId", "EU"),
        ("traceOn", "false"),
        ("serverChannelMaxIdleTimeSeconds", "60"),
        ("flushConsumerOffsetInterval", "1000"),
        ("aclEnable", "true"),
        ("plainAclFile", "/etc/comet/plain_acl.yml"),
        ("tls.server.mode", "enforcing"),
        ("tls.server.certPath", "/etc/comet/tls/broker.pem"),
        ("tls.server.keyPath", "/etc/comet/tls/broker.key"),
        ("tls.server.keyPassword", "secret"),
        ("tls.server.need.client.auth", "require"),
        ("tls.server.trustCertPath", "/etc/comet/tls/ca.pem"),
        ("tls.enable", "true"),
        ("tls.test.mode.enable", "false"),
        ("tls.client.authServer", "true"),
        ("tls.client.trustCertPath", "/etc/comet/tls/ca.pem"),
        ("metricsExporterType", "PROM"),
        ("metricsPromExporterHost", "127.0.0.2"),
        ("metricsPromExporterPort", "15557"),
        ("consoleListenPort", "18080"),
        ("logFormat", "json"),
        ("defaultMessageRequestMode", "POP"),
        ("defaultPopShareQueueNum", "2"),
        ("serverLoadBalancerEnable", "false"),
    ];

    // Proves every key of the table round-trips: a non-default sample applies, is reported
    // back unchanged by to_pairs (GET_BROKER_CONFIG), and re-applying the whole report gives
    // an equal config; and the report lists exactly the table's keys, each once.
    #[test]
    fn every_key_round_trips() {
        let keys: Vec<&str> = KEYS.iter().map(|def| def.key).collect();
        let config = assert_samples_round_trip(
            &keys,
            SAMPLES,
            &["brokerId"],
            |config: &mut BrokerConfig, key, value| config.apply(key, value),
            BrokerConfig::to_pairs,
        );
        let reported = config.to_pairs();
        let reported_keys: Vec<&str> = reported.iter().map(|(key, _)| *key).collect();
        assert_eq!(reported_keys, keys);
        let mut again = BrokerConfig::default();
        let unknown = again
            .apply_pairs(reported.iter().map(|(key, value)| (*key, value.as_str())))
            .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        assert_eq!(again, config);
        assert_eq!(BrokerConfig::default().to_pairs().len(), KEYS.len());
    }

    // Proves the live-update rule comes from the table and a key the table does not hold is
    // neither live nor known.
    #[test]
    fn live_keys_come_from_the_table() {
        assert!(BrokerConfig::is_live_key("maxMessageSize"));
        assert!(!BrokerConfig::is_live_key("listenPort"));
        assert!(!BrokerConfig::is_live_key("noSuchKey"));
        assert_eq!(
            key_def("storePathRootDir").map(|def| def.applies),
            Some(Applies::StartUpOnly)
        );
        assert_eq!(BrokerConfig::default().apply("noSuchKey", "1"), Ok(false));
    }

    // Proves controller mode's checks: a controller address is required, the heartbeat must
    // go at least every 30% of the timeout (the lease depends on it), and brokerId/brokerRole
    // pairs that fixed roles refuse are left to the controller.
    #[test]
    fn controller_mode_needs_a_controller_and_frequent_heartbeats() {
        let apply = |pairs: &[(&str, &str)]| {
            let mut config = BrokerConfig::default();
            config.apply_pairs(pairs.iter().copied()).map(|_| config)
        };
        let error = apply(&[("enableControllerMode", "true")]).unwrap_err();
        assert_eq!(error.key, "controllerAddr");
        let slow = [
            ("enableControllerMode", "true"),
            ("controllerAddr", "127.0.0.1:9878"),
            ("controllerHeartBeatTimeoutMills", "3000"),
            ("brokerHeartbeatInterval", "1000"),
        ];
        assert_eq!(apply(&slow).unwrap_err().key, "brokerHeartbeatInterval");
        let silent = [("haHousekeepingInterval", "3000")];
        assert_eq!(apply(&silent).unwrap_err().key, "haSendHeartbeatInterval");
        let heard = [
            ("haHousekeepingInterval", "3000"),
            ("haSendHeartbeatInterval", "1000"),
        ];
        assert!(apply(&heard).is_ok());
        let config = apply(&[
            ("enableControllerMode", "true"),
            ("controllerAddr", "127.0.0.1:9878"),
            ("brokerRole", "SLAVE"),
            ("brokerId", "0"),
        ])
        .unwrap();
        assert!(config.enable_controller_mode);
    }

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
        for bad in ["4096", "1073741825", "-1", "4MiB"] {
            let error = config
                .apply("commitLogReadWindowCacheBytes", bad)
                .unwrap_err();
            assert_eq!(error.key, "commitLogReadWindowCacheBytes");
        }
        assert_eq!(config.apply("commitLogReadWindowCacheBytes", "0"), Ok(true));
        assert_eq!(
            config.apply("commitLogReadWindowCacheBytes", "262144"),
            Ok(true)
        );
        assert_eq!(config.commit_log_read_window_cache_bytes, 262_144);
        assert_eq!(config.apply("registerNameServerPeriod", "1000"), Ok(true));
        assert_eq!(config.register_period_ms, 10_000);
    }

    // Proves a slave takes an id of 1 or more and a master only 0, each error naming
    // `brokerId` and the fix, and every role applies with its own id.
    #[test]
    fn broker_id_must_fit_the_role() {
        let slave_zero = BrokerConfig::default()
            .apply_pairs([("brokerRole", "SLAVE")])
            .unwrap_err();
        assert_eq!(slave_zero.key, "brokerId");
        assert!(
            slave_zero.to_string().contains("brokerRole=SLAVE"),
            "{slave_zero}"
        );
        let master_one = BrokerConfig::default()
            .apply_pairs([("brokerId", "1")])
            .unwrap_err();
        assert_eq!(master_one.key, "brokerId");
        assert!(
            master_one.to_string().contains("set brokerRole=SLAVE"),
            "{master_one}"
        );
        let mut config = BrokerConfig::default();
        assert!(config.apply("brokerId", "-1").is_err());
        assert!(config.apply("brokerId", "x").is_err());
        assert!(config.apply("brokerRole", "BACKUP").is_err());
        let pairs = [("brokerRole", "SLAVE"), ("brokerId", "2")];
        assert!(config.apply_pairs(pairs).unwrap().is_empty());
        assert_eq!(config.broker_role, BrokerRole::Slave);
        assert!(!config.broker_role.is_master());
        for role in ["SYNC_MASTER", "ASYNC_MASTER"] {
            let mut config = BrokerConfig::default();
            assert!(config.apply_pairs([("brokerRole", role)]).is_ok(), "{role}");
            assert!(config.broker_role.is_master());
        }
    }

    // Proves the HA keys: brokerIP2 replaces brokerIP1 in the HA address only, the HA
    // listener binds bindAddress, haMasterAddress takes host:port or nothing, and the
    // defaults are Java's.
    #[test]
    fn ha_keys_apply() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.ha_max_gap_not_in_sync_bytes, 256 * 1024 * 1024);
        assert_eq!(config.ha_heartbeat_interval(), Duration::from_secs(5));
        assert_eq!(config.ha_slave_timeout(), Duration::from_secs(20));
        assert_eq!(config.ha_server_addr(), "127.0.0.1:10912");
        let pairs = [("brokerIP2", "10.0.0.9"), ("bindAddress", "127.0.0.1")];
        assert!(config.apply_pairs(pairs).unwrap().is_empty());
        assert_eq!(config.ha_server_addr(), "10.0.0.9:10912");
        assert_eq!(config.broker_addr(), "127.0.0.1:10911");
        assert_eq!(config.ha_listen_addr().to_string(), "127.0.0.1:10912");
        assert_eq!(config.apply("brokerIP2", ""), Ok(true));
        assert_eq!(config.broker_ip2, None);
        for bad in ["10.0.0.1", "10.0.0.1:x", ":10912", "host:70000"] {
            let error = config.apply("haMasterAddress", bad).unwrap_err();
            assert_eq!(error.key, "haMasterAddress", "{bad}");
        }
        assert_eq!(config.apply("haMasterAddress", "master:10912"), Ok(true));
        assert_eq!(config.ha_master_address, "master:10912");
        assert!(config.apply("haSendHeartbeatInterval", "0").is_err());
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

    // Proves the metrics keys take Java's values and defaults: DISABLE or PROM (the other
    // exporters are refused, naming the key), an IP address or nothing for the host (then
    // brokerIP1), port 5557.
    #[test]
    fn metrics_keys_apply() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.metrics_exporter, MetricsExporter::Disable);
        assert_eq!(config.metrics_listen_addr().to_string(), "127.0.0.1:5557");
        for bad in ["OTLP_GRPC", "LOG", "prom", ""] {
            let error = config.apply("metricsExporterType", bad).unwrap_err();
            assert_eq!(error.key, "metricsExporterType", "{bad:?}");
            assert!(error.to_string().contains("DISABLE or PROM"), "{error}");
        }
        assert_eq!(config.apply("metricsExporterType", "PROM"), Ok(true));
        assert_eq!(config.metrics_exporter, MetricsExporter::Prom);
        for bad in ["localhost", "10.0.0.1:5557", "1.2.3"] {
            let error = config.apply("metricsPromExporterHost", bad).unwrap_err();
            assert_eq!(error.key, "metricsPromExporterHost", "{bad:?}");
        }
        assert!(config.apply("metricsPromExporterPort", "70000").is_err());
        let pairs = [
            ("brokerIP1", "10.0.0.3"),
            ("metricsPromExporterPort", "9100"),
        ];
        assert!(config.apply_pairs(pairs).unwrap().is_empty());
        assert_eq!(config.metrics_listen_addr().to_string(), "10.0.0.3:9100");
        assert_eq!(config.apply("metricsPromExporterHost", "0.0.0.0"), Ok(true));
        assert_eq!(config.metrics_listen_addr().to_string(), "0.0.0.0:9100");
        assert!(!BrokerConfig::is_live_key("metricsExporterType"));
    }

    // Proves `bindAddress` defaults to every interface, takes an IPv4 or IPv6 address,
    // refuses a host name, a bracketed address, a port or an empty value with an error naming
    // the key, and is listed in the key/value dump GET_BROKER_CONFIG returns.
    #[test]
    fn bind_address_is_an_ip_address() {
        let mut config = BrokerConfig::default();
        assert_eq!(config.listen_addr().to_string(), "0.0.0.0:10911");
        let pairs = [("bindAddress", " 127.0.0.1 "), ("listenPort", "20911")];
        assert!(config.apply_pairs(pairs).unwrap().is_empty());
        assert_eq!(config.bind_address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        assert_eq!(config.listen_addr().to_string(), "127.0.0.1:20911");
        config.apply("bindAddress", "::1").unwrap();
        assert_eq!(config.listen_addr().to_string(), "[::1]:20911");
        config.apply("bindAddress", "127.0.0.1").unwrap();
        for bad in [
            "localhost",
            "[::1]",
            "127.0.0.1:10911",
            "",
            "127.0.0.256",
            "0.0.0.0x",
        ] {
            let error = config.apply("bindAddress", bad).unwrap_err();
            assert_eq!(error.key, "bindAddress", "{bad:?}");
            assert!(error.to_string().contains("IPv6"), "{error}");
        }
        assert_eq!(config.bind_address, IpAddr::V4(Ipv4Addr::LOCALHOST));
        let dump = config.to_pairs();
        assert!(dump.contains(&("bindAddress", "127.0.0.1".to_owned())));
        assert!(!BrokerConfig::is_live_key("bindAddress"));
    }
}
