//! Name-server configuration: RocketMQ `namesrv.properties` keys, typed.
//!
//! A file in Java properties syntax (`key=value`, `#` comments) is read first, then
//! command-line flags override it. Keys are RocketMQ's where RocketMQ has one (`listenPort`,
//! `kvConfigPath`, `scanNotActiveBrokerInterval`, `orderMessageEnable`, ...); Comet's own
//! tunables follow the same spelling with units last (`brokerExpiryMs`, `frameBytesMax`).
//! Unknown keys (JVM-side settings such as `rocketmqHome`) are ignored with a warning, so an
//! operator's existing file loads unchanged.
//!
//! Every key is one entry of the table below ([`KEYS`], declared with
//! `comet_proto::config_table`): the field it sets, its default, unit, when a change takes
//! effect and a line of doc. Parsing, GET_NAMESRV_CONFIG,
//! `comet-nameserver --help-config` and `docs/config/nameserver.md` all read that table.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use comet_log::LogFormat;
use comet_net::{ClientAuth, ServerTlsSettings, TlsMode};
use comet_proto::java_properties;
use thiserror::Error;

use crate::limits::{
    BROKER_EXPIRY_DEFAULT, CONNECTIONS_MAX_DEFAULT, FRAME_BYTES_MAX_DEFAULT, LISTEN_PORT_DEFAULT,
    SCAN_INTERVAL_DEFAULT,
};

mod render;

pub use render::{help_text, markdown};

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

pub use comet_proto::config_table::Applies;

/// One name-server config key: what the table below declares for it. Its start-up only keys
/// are the ones UPDATE_NAMESRV_CONFIG refuses ([`CONFIG_BLACK_LIST`]).
pub type KeyDef = comet_proto::config_table::KeyDef<NamesrvConfig, ConfigError>;

comet_proto::config_table! {
    /// Everything the name server can be told: one field per key of [`KEYS`].
    pub struct NamesrvConfig;
    /// Every key the name server understands, in the order the docs list them.
    pub static KEYS: [KeyDef<_, ConfigError>];
    listen_port: u16 = LISTEN_PORT_DEFAULT => {
        key: "listenPort", unit: "", applies: AtRestart,
        doc: "Port the name server listens on.",
        parse: parse_number, show: ToString::to_string,
    },
    bind_address: IpAddr = IpAddr::from([0, 0, 0, 0]) => {
        key: "bindAddress", unit: "", applies: AtRestart,
        doc: "Address the name server listens on (0.0.0.0: every interface).",
        parse: parse_ip, show: ToString::to_string,
    },
    console_listen_port: u16 = 0 => {
        key: "consoleListenPort", unit: "", applies: AtRestart,
        doc: "Port of the web console on bindAddress (docs/operations.md#web-console); 0: off.",
        parse: parse_number, show: ToString::to_string,
    },
    kv_config_path: PathBuf = home_dir().join("namesrv").join("kvConfig.json") => {
        key: "kvConfigPath", unit: "", applies: StartUpOnly,
        doc: "File the KV config (mqadmin updateKvConfig) is kept in.",
        default_doc: "$HOME/namesrv/kvConfig.json",
        parse: parse_path, show: path_text,
    },
    /// How often silent brokers are looked for.
    scan_interval: Duration = SCAN_INTERVAL_DEFAULT => {
        key: "scanNotActiveBrokerInterval", unit: "ms", applies: Live,
        doc: "How often brokers that stopped sending heartbeats are looked for.",
        parse: parse_ms, show: ms_text,
    },
    /// Brokers that say their own `heartbeatTimeoutMillis` expire after that instead.
    broker_expiry: Duration = BROKER_EXPIRY_DEFAULT => {
        key: "brokerExpiryMs", unit: "ms", applies: Live,
        doc: "Silence after which a broker that names no heartbeat timeout is dropped.",
        parse: parse_ms, show: ms_text,
    },
    order_message_enable: bool = false => {
        key: "orderMessageEnable", unit: "", applies: Live,
        doc: "Fill routes' orderTopicConf from the ORDER_TOPIC_CONFIG KV namespace.",
        parse: parse_bool, show: ToString::to_string,
    },
    return_order_topic_config_to_broker: bool = true => {
        key: "returnOrderTopicConfigToBroker", unit: "", applies: Live,
        doc: "Send the ORDER_TOPIC_CONFIG namespace back on REGISTER_BROKER.",
        parse: parse_bool, show: ToString::to_string,
    },
    enable_all_topic_list: bool = true => {
        key: "enableAllTopicList", unit: "", applies: Live,
        doc: "Answer GET_ALL_TOPIC_LIST_FROM_NAMESERVER.",
        parse: parse_bool, show: ToString::to_string,
    },
    enable_topic_list: bool = true => {
        key: "enableTopicList", unit: "", applies: Live,
        doc: "Answer the per-cluster, system and unit topic lists.",
        parse: parse_bool, show: ToString::to_string,
    },
    delete_topic_with_broker_registration: bool = false => {
        key: "deleteTopicWithBrokerRegistration", unit: "", applies: Live,
        doc: "Drop a master's topics that its registration no longer lists.",
        parse: parse_bool, show: ToString::to_string,
    },
    /// Java reads the `tls.*` keys as system properties or from its `tls.config.file`; Comet
    /// reads them from the config file like any key (docs/operations.md#tls).
    tls_server_mode: TlsMode = TlsMode::Disabled => {
        key: "tls.server.mode", unit: "", applies: AtRestart,
        doc: "TLS on the port: disabled, permissive (TLS and plain) or enforcing.",
        parse: parse_tls_mode, show: ToString::to_string,
    },
    tls_server_cert_path: Option<PathBuf> = None => {
        key: "tls.server.certPath", unit: "", applies: AtRestart,
        doc: "PEM certificate chain of the TLS port, the name server's own first.",
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
        parse: parse_text, show: Clone::clone,
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
    connections_max: usize = CONNECTIONS_MAX_DEFAULT => {
        key: "connectionsMax", unit: "connections", applies: AtRestart,
        doc: "Connections served at once (at least 1).",
        parse: parse_number, show: ToString::to_string,
    },
    frame_bytes_max: usize = FRAME_BYTES_MAX_DEFAULT => {
        key: "frameBytesMax", unit: "bytes", applies: AtRestart,
        doc: "Largest request frame accepted (1024 ..= 2^31-1).",
        parse: parse_number, show: ToString::to_string,
    },
    enable_controller_in_namesrv: bool = false => {
        key: "enableControllerInNamesrv", unit: "", applies: AtRestart,
        doc: "Run the controller of RocketMQ 5 controller mode inside this name server.",
        parse: parse_bool, show: ToString::to_string,
    },
    controller_group: String = "DefaultControllerGroup".to_owned() => {
        key: "controllerDLegerGroup", unit: "", applies: AtRestart,
        doc: "Name of the controller group (Raft group); the same on every member.",
        parse: parse_text, show: Clone::clone,
    },
    controller_peers: String = "n0-localhost:9878".to_owned() => {
        key: "controllerDLegerPeers", unit: "", applies: AtRestart,
        doc: "Every controller as id-host:port, ';'-separated; brokers' controllerAddr.",
        parse: parse_text, show: Clone::clone,
    },
    controller_self_id: String = "n0".to_owned() => {
        key: "controllerDLegerSelfId", unit: "", applies: AtRestart,
        doc: "This controller's id among controllerDLegerPeers.",
        parse: parse_text, show: Clone::clone,
    },
    controller_store_path: PathBuf = home_dir().join("DledgerController") => {
        key: "controllerStorePath", unit: "", applies: AtRestart,
        doc: "Folder of the controller's Raft log (entries, votes, commit point).",
        default_doc: "$HOME/DledgerController",
        parse: parse_path, show: path_text,
    },
    enable_elect_unclean_master: bool = false => {
        key: "enableElectUncleanMaster", unit: "", applies: AtRestart,
        doc: "Elect a live broker outside the sync-state set when none inside is alive.",
        parse: parse_bool, show: ToString::to_string,
    },
    notify_broker_role_changed: bool = true => {
        key: "notifyBrokerRoleChanged", unit: "", applies: AtRestart,
        doc: "Send NOTIFY_BROKER_ROLE_CHANGED to a broker set's members after an election.",
        parse: parse_bool, show: ToString::to_string,
    },
    /// Read before anything is logged: the logger starts once the configuration is read.
    log_format: LogFormat = LogFormat::Text => {
        key: "logFormat", unit: "", applies: AtRestart,
        doc: "Log line format on stderr: text, kv (logfmt) or json (one object a line).",
        parse: parse_log_format, show: ToString::to_string,
    },
    controller_compact_after_entries: u64 = 1_000 => {
        key: "controllerCompactAfterEntries", unit: "entries", applies: AtRestart,
        doc: "Applied Raft entries after which the controller's log becomes a snapshot.",
        parse: parse_positive, show: ToString::to_string,
    },
}

/// `$HOME`, where RocketMQ's name server keeps its files by default.
fn home_dir() -> PathBuf {
    std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from)
}

/// The table entry of `key`, if the name server knows it.
pub fn key_def(key: &str) -> Option<&'static KeyDef> {
    comet_proto::config_table::find(KEYS, key)
}

fn invalid(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError::Invalid {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

fn parse_log_format(key: &str, value: &str) -> Result<LogFormat, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "text, kv or json"))
}

fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(invalid(key, value, "true or false")),
    }
}

fn parse_tls_mode(key: &str, value: &str) -> Result<TlsMode, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "disabled, permissive or enforcing"))
}

fn parse_client_auth(key: &str, value: &str) -> Result<ClientAuth, ConfigError> {
    value
        .parse()
        .map_err(|_| invalid(key, value, "none, optional or require"))
}

/// A file path, empty for none.
fn parse_optional_path(_key: &str, value: &str) -> Result<Option<PathBuf>, ConfigError> {
    let value = value.trim();
    Ok((!value.is_empty()).then(|| PathBuf::from(value)))
}

fn optional_path_text(path: &Option<PathBuf>) -> String {
    path.as_deref()
        .map(|path| path.display().to_string())
        .unwrap_or_default()
}

/// The TLS settings of the port, as the `tls.server.*` keys say.
impl NamesrvConfig {
    /// What comet-net needs to serve the port with TLS.
    pub fn server_tls_settings(&self) -> ServerTlsSettings {
        ServerTlsSettings {
            mode: self.tls_server_mode,
            cert_path: self.tls_server_cert_path.clone(),
            key_path: self.tls_server_key_path.clone(),
            key_password: self.tls_server_key_password.clone(),
            client_auth: self.tls_server_need_client_auth,
            trust_cert_path: self.tls_server_trust_cert_path.clone(),
        }
    }
}

fn parse_number<T: std::str::FromStr>(key: &str, value: &str) -> Result<T, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "a non-negative integer"))
}

fn parse_positive(key: &str, value: &str) -> Result<u64, ConfigError> {
    match parse_number(key, value)? {
        0 => Err(invalid(key, value, "a positive integer")),
        number => Ok(number),
    }
}

fn parse_ms(key: &str, value: &str) -> Result<Duration, ConfigError> {
    let ms: u64 = parse_number(key, value)?;
    if ms == 0 {
        return Err(invalid(key, value, "a positive number of milliseconds"));
    }
    Ok(Duration::from_millis(ms))
}

fn ms_text(duration: &Duration) -> String {
    duration.as_millis().to_string()
}

fn parse_ip(key: &str, value: &str) -> Result<IpAddr, ConfigError> {
    value
        .trim()
        .parse()
        .map_err(|_| invalid(key, value, "an IP address"))
}

fn parse_text(_key: &str, value: &str) -> Result<String, ConfigError> {
    Ok(value.trim().to_owned())
}

fn parse_path(_key: &str, value: &str) -> Result<PathBuf, ConfigError> {
    Ok(PathBuf::from(value.trim()))
}

fn path_text(path: &std::path::Path) -> String {
    path.display().to_string()
}

impl NamesrvConfig {
    /// Applies one key; unknown keys are ignored (logged). Returns whether the key is known.
    pub fn apply(&mut self, key: &str, value: &str) -> Result<bool, ConfigError> {
        let Some(def) = key_def(key) else {
            log::warn!("ignoring unknown name-server config key {key}");
            return Ok(false);
        };
        (def.parse)(self, value)?;
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

    /// Every key of [`KEYS`] with its value, sorted by key.
    pub fn to_pairs(&self) -> Vec<(&'static str, String)> {
        let mut pairs: Vec<_> = KEYS.iter().map(|def| (def.key, (def.show)(self))).collect();
        pairs.sort_by_key(|(key, _)| *key);
        pairs
    }

    /// The configuration as properties text (GET_NAMESRV_CONFIG), keys sorted.
    pub fn to_properties(&self) -> String {
        let pairs = self.to_pairs();
        java_properties::write(pairs.iter().map(|(key, value)| (*key, value.as_str())))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use comet_test_support::config_docs::assert_samples_round_trip;

    use super::*;

    /// A value other than the default for every key, to prove each one round-trips.
    const SAMPLES: &[(&str, &str)] = &[
        ("listenPort", "19876"),
        ("bindAddress", "127.0.0.1"),
        ("consoleListenPort", "18080"),
        ("tls.server.mode", "permissive"),
        ("tls.server.certPath", "/etc/comet/tls/namesrv.pem"),
        ("tls.server.keyPath", "/etc/comet/tls/namesrv.key"),
        ("tls.server.keyPassword", "secret"),
        ("tls.server.need.client.auth", "optional"),
        ("tls.server.trustCertPath", "/etc/comet/tls/ca.pem"),
        ("kvConfigPath", "/var/lib/comet/kvConfig.json"),
        ("scanNotActiveBrokerInterval", "2000"),
        ("brokerExpiryMs", "30000"),
        ("orderMessageEnable", "true"),
        ("returnOrderTopicConfigToBroker", "false"),
        ("enableAllTopicList", "false"),
        ("enableTopicList", "false"),
        ("deleteTopicWithBrokerRegistration", "true"),
        ("connectionsMax", "100"),
        ("frameBytesMax", "65536"),
        ("enableControllerInNamesrv", "true"),
        ("controllerDLegerGroup", "group-a"),
        (
            "controllerDLegerPeers",
            "n0-127.0.0.1:9878;n1-127.0.0.1:9879",
        ),
        ("controllerDLegerSelfId", "n1"),
        ("controllerStorePath", "/var/lib/comet/controller"),
        ("enableElectUncleanMaster", "true"),
        ("notifyBrokerRoleChanged", "false"),
        ("logFormat", "kv"),
        ("controllerCompactAfterEntries", "50"),
    ];

    // Proves every key of the table round-trips: a non-default sample applies and is reported
    // back unchanged (GET_NAMESRV_CONFIG), re-reading the whole report gives an equal config,
    // and the report lists exactly the table's keys.
    #[test]
    fn every_key_round_trips() {
        let keys: Vec<&str> = KEYS.iter().map(|def| def.key).collect();
        let config = assert_samples_round_trip(
            &keys,
            SAMPLES,
            &[],
            |config: &mut NamesrvConfig, key, value| config.apply(key, value),
            NamesrvConfig::to_pairs,
        );
        let reported: BTreeSet<&str> = config.to_pairs().iter().map(|(key, _)| *key).collect();
        assert_eq!(reported, keys.into_iter().collect());
        let mut again = NamesrvConfig::default();
        again.apply_properties(&config.to_properties()).unwrap();
        assert_eq!(again, config);
    }

    // Proves the keys the table marks start-up only are the ones UPDATE_NAMESRV_CONFIG
    // refuses.
    #[test]
    fn start_up_only_keys_are_black_listed() {
        for def in KEYS {
            let listed = CONFIG_BLACK_LIST.contains(&def.key);
            assert_eq!(listed, def.applies == Applies::StartUpOnly, "{}", def.key);
        }
    }

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
