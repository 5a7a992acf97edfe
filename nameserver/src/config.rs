//! Name-server configuration: RocketMQ `namesrv.properties` keys, typed.
//!
//! A file in Java properties syntax (`key=value`, `#` comments) is read first, then
//! command-line flags override it. Keys are RocketMQ's where RocketMQ has one (`listenPort`,
//! `kvConfigPath`, `scanNotActiveBrokerInterval`, `orderMessageEnable`, ...); Comet's own
//! tunables follow the same spelling with units last (`brokerExpiryMs`, `frameBytesMax`).
//! Unknown keys (JVM-side settings such as `rocketmqHome`) are ignored with a warning, so an
//! operator's existing file loads unchanged.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use comet_proto::java_properties;
use thiserror::Error;

use crate::limits::{
    BROKER_EXPIRY_DEFAULT, CONNECTIONS_MAX_DEFAULT, FRAME_BYTES_MAX_DEFAULT, LISTEN_PORT_DEFAULT,
    SCAN_INTERVAL_DEFAULT,
};

/// Keys UPDATE_NAMESRV_CONFIG may not change (RocketMQ's default `configBlackList`).
pub const CONFIG_BLACK_LIST: [&str; 3] = ["configBlackList", "configStorePath", "kvConfigPath"];

/// A configuration value that cannot be used.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ConfigError {
    /// A value does not parse as its key's type.
    #[error("config key {key}: invalid value {value:?} ({expected})")]
    Invalid {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// What was expected.
        expected: &'static str,
    },
    /// The config file cannot be read.
    #[error("cannot read config file {path}: {message}")]
    File {
        /// The file.
        path: String,
        /// The I/O error.
        message: String,
    },
}

/// Everything the name server can be told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamesrvConfig {
    /// `listenPort`.
    pub listen_port: u16,
    /// `bindAddress`: the address to listen on.
    pub bind_address: IpAddr,
    /// `kvConfigPath`: where the KV config is persisted.
    pub kv_config_path: PathBuf,
    /// `scanNotActiveBrokerInterval` (ms): how often silent brokers are looked for.
    pub scan_interval: Duration,
    /// `brokerExpiryMs`: expiry of brokers that do not send `heartbeatTimeoutMillis`.
    pub broker_expiry: Duration,
    /// `orderMessageEnable`: fill `orderTopicConf` from the ORDER_TOPIC_CONFIG namespace.
    pub order_message_enable: bool,
    /// `returnOrderTopicConfigToBroker`: send that namespace back on REGISTER_BROKER.
    pub return_order_topic_config_to_broker: bool,
    /// `enableAllTopicList`: answer GET_ALL_TOPIC_LIST_FROM_NAMESERVER.
    pub enable_all_topic_list: bool,
    /// `enableTopicList`: answer the per-cluster and unit topic lists.
    pub enable_topic_list: bool,
    /// `deleteTopicWithBrokerRegistration`: drop a broker's topics missing from its
    /// registration.
    pub delete_topic_with_broker_registration: bool,
    /// `connectionsMax`: connections served at once.
    pub connections_max: usize,
    /// `frameBytesMax`: largest frame accepted.
    pub frame_bytes_max: usize,
}

impl Default for NamesrvConfig {
    fn default() -> NamesrvConfig {
        let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
        NamesrvConfig {
            listen_port: LISTEN_PORT_DEFAULT,
            bind_address: IpAddr::from([0, 0, 0, 0]),
            kv_config_path: home.join("namesrv").join("kvConfig.json"),
            scan_interval: SCAN_INTERVAL_DEFAULT,
            broker_expiry: BROKER_EXPIRY_DEFAULT,
            order_message_enable: false,
            return_order_topic_config_to_broker: true,
            enable_all_topic_list: true,
            enable_topic_list: true,
            delete_topic_with_broker_registration: false,
            connections_max: CONNECTIONS_MAX_DEFAULT,
            frame_bytes_max: FRAME_BYTES_MAX_DEFAULT,
        }
    }
}

fn invalid(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "a non-negative integer"))
}

fn parse_ms(key: &str, value: &str) -> Result<Duration, ConfigError> {
    let ms: u64 = parse_number(key, value)?;
    if ms == 0 {
        return Err(invalid(key, value, "a positive number of milliseconds"));
    }
    Ok(Duration::from_millis(ms))
}

impl NamesrvConfig {
    /// Applies one key; unknown keys are ignored (logged). Returns whether the key is known.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        match key {
            "listenPort" => self.listen_port = parse_number(key, value)?,
            "bindAddress" => {
                self.bind_address = value
                    .trim()
                    .parse()
                    .map_err(|_| invalid(key, value, "an IP address"))?;
            }
            "kvConfigPath" => self.kv_config_path = PathBuf::from(value.trim()),
            "scanNotActiveBrokerInterval" => self.scan_interval = parse_ms(key, value)?,
            "brokerExpiryMs" => self.broker_expiry = parse_ms(key, value)?,
            "orderMessageEnable" => self.order_message_enable = parse_bool(key, value)?,
            "returnOrderTopicConfigToBroker" => {
                self.return_order_topic_config_to_broker = parse_bool(key, value)?;
            }
            "enableAllTopicList" => self.enable_all_topic_list = parse_bool(key, value)?,
            "enableTopicList" => self.enable_topic_list = parse_bool(key, value)?,
            "deleteTopicWithBrokerRegistration" => {
                self.delete_topic_with_broker_registration = parse_bool(key, value)?;
            }
            "connectionsMax" => self.connections_max = parse_number(key, value)?,
            "frameBytesMax" => self.frame_bytes_max = parse_number(key, value)?,
            _ => {
                log::warn!("ignoring unknown name-server config key {key}");
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Applies every pair of a properties text, in order.
    pub fn apply_properties(&mut self, text: &str) -> Result<(), ConfigError> {
        for (key, value) in java_properties::parse(text) {
            self.apply(&key, &value)?;
        }
        self.validate()
    }

    /// Reads a `namesrv.properties` file over the defaults.
    pub fn from_file(path: &std::path::Path) -> Result<NamesrvConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::File {
            path: path.display().to_string(),
            message: error.to_string(),
        })?;
        let mut config = NamesrvConfig::default();
        config.apply_properties(&text)?;
        Ok(config)
    }

    /// Checks cross-key bounds.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.connections_max == 0 {
            return Err(invalid("connectionsMax", "0", "at least 1"));
        }
        let frame_min = comet_proto::limits::FRAME_TOTAL_LENGTH_MIN;
        if self.frame_bytes_max < 1024 || self.frame_bytes_max > i32::MAX as usize {
            let value = self.frame_bytes_max.to_string();
            return Err(invalid("frameBytesMax", &value, "1024 ..= 2^31-1 bytes"));
        }
        assert!(self.frame_bytes_max >= frame_min);
        Ok(())
    }

    /// The configuration as properties text (GET_NAMESRV_CONFIG), keys sorted.
    pub fn to_properties(&self) -> String {
        let values = [
            ("bindAddress", self.bind_address.to_string()),
            ("brokerExpiryMs", self.broker_expiry.as_millis().to_string()),
            ("connectionsMax", self.connections_max.to_string()),
            (
                "deleteTopicWithBrokerRegistration",
                self.delete_topic_with_broker_registration.to_string(),
            ),
            ("enableAllTopicList", self.enable_all_topic_list.to_string()),
            ("enableTopicList", self.enable_topic_list.to_string()),
            ("frameBytesMax", self.frame_bytes_max.to_string()),
            ("kvConfigPath", self.kv_config_path.display().to_string()),
            ("listenPort", self.listen_port.to_string()),
            ("orderMessageEnable", self.order_message_enable.to_string()),
            (
                "returnOrderTopicConfigToBroker",
                self.return_order_topic_config_to_broker.to_string(),
            ),
            (
                "scanNotActiveBrokerInterval",
                self.scan_interval.as_millis().to_string(),
            ),
        ];
        java_properties::write(values.iter().map(|(key, value)| (*key, value.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a namesrv.properties text with comments, unknown keys and RocketMQ keys loads,
    // and that a bad value is a typed error naming the key.
    #[test]
    fn properties_load_and_errors() {
        let mut config = NamesrvConfig::default();
        let text = "# comment\nlistenPort=19876\nrocketmqHome=/opt/rmq\n\
                    scanNotActiveBrokerInterval = 2000\norderMessageEnable=true\n";
        config.apply_properties(text).unwrap();
        assert_eq!(config.listen_port, 19876);
        assert_eq!(config.scan_interval, Duration::from_secs(2));
        assert!(config.order_message_enable);
        let error = config.apply("listenPort", "abc").unwrap_err();
        assert!(matches!(error, ConfigError::Invalid { key, .. } if key == "listenPort"));
        assert!(config.apply("scanNotActiveBrokerInterval", "0").is_err());
        let round_trip = {
            let mut copy = NamesrvConfig::default();
            copy.apply_properties(&config.to_properties()).unwrap();
            copy
        };
        assert_eq!(round_trip, config);
    }
}
