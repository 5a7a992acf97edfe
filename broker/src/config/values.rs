//! How broker config values are read and written back: the parsers the key table uses, each
//! naming the key in its error, and the writers that give a value back in the form its
//! parser takes (GET_BROKER_CONFIG output applies unchanged).

use std::net::IpAddr;
use std::path::{Path, PathBuf};

use super::{BrokerRole, ConfigError, FlushDiskType, MetricsExporter};

pub(super) fn error(key: &str, value: &str, expected: &'static str) -> ConfigError {
    ConfigError {
        key: key.to_owned(),
        value: value.to_owned(),
        expected,
    }
}

/// Any value `T` parses from, with `expected` saying what the key takes.
pub(super) fn parse<T: std::str::FromStr>(
    key: &str,
    value: &str,
    expected: &'static str,
) -> Result<T, ConfigError> {
    value.parse().map_err(|_| error(key, value, expected))
}

/// A count of bytes, zero allowed.
pub(super) fn parse_bytes(key: &str, value: &str) -> Result<usize, ConfigError> {
    parse(key, value, "a number of bytes")
}

pub(super) fn parse_positive<T: std::str::FromStr + PartialOrd + Default>(
    key: &str,
    value: &str,
) -> Result<T, ConfigError> {
    let parsed: T = parse(key, value, "a positive integer")?;
    if parsed <= T::default() {
        return Err(error(key, value, "a positive integer"));
    }
    Ok(parsed)
}

pub(super) fn parse_bool(key: &str, value: &str) -> Result<bool, ConfigError> {
    match value.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(error(key, value, "true or false")),
    }
}

/// An IPv4 or IPv6 address, as `bindAddress` takes (no host name, no port): the listeners
/// bind it as it is, and `::` is every IPv6 interface as `0.0.0.0` is every IPv4 one.
pub(super) fn parse_bind_address(key: &str, value: &str) -> Result<IpAddr, ConfigError> {
    const EXPECTED: &str = "an IPv4 or IPv6 address such as 0.0.0.0, 127.0.0.1 or ::1";
    parse(key, value, EXPECTED)
}

pub(super) fn parse_flushes_in_flight(key: &str, value: &str) -> Result<usize, ConfigError> {
    let max = comet_store::limits::FLUSHES_IN_FLIGHT_MAX;
    let expected = "1 or 2";
    let flushes: usize = parse(key, value, expected)?;
    if !(1..=max).contains(&flushes) {
        return Err(error(key, value, expected));
    }
    Ok(flushes)
}

pub(super) fn parse_read_window_cache_bytes(key: &str, value: &str) -> Result<usize, ConfigError> {
    let expected = "0, or bytes from 262144 (one read-ahead) to 1073741824";
    let bytes: usize = parse(key, value, expected)?;
    let allowed =
        comet_store::limits::READ_AHEAD_BYTES..=comet_store::limits::READ_WINDOW_CACHE_BYTES_MAX;
    if bytes != 0 && !allowed.contains(&bytes) {
        return Err(error(key, value, expected));
    }
    Ok(bytes)
}

pub(super) fn parse_percent(key: &str, value: &str) -> Result<u8, ConfigError> {
    let percent: u8 = parse(key, value, "a percentage 10..95")?;
    if !(10..=95).contains(&percent) {
        return Err(error(key, value, "a percentage 10..95"));
    }
    Ok(percent)
}

/// The disk-use percentage past which writes are refused: 35..99. Java clamps its value to
/// 35..90; Comet refuses what it cannot honour and lets a disk that holds only the store go
/// fuller.
pub(super) fn parse_refuse_writes_percent(key: &str, value: &str) -> Result<u8, ConfigError> {
    let percent: u8 = parse(key, value, "a percentage 35..99")?;
    if !(35..=99).contains(&percent) {
        return Err(error(key, value, "a percentage 35..99"));
    }
    Ok(percent)
}

/// The disk-use percentage past which the oldest segment goes at once: 30..95. Java clamps
/// its value to 30..85; Comet refuses what it cannot honour.
pub(super) fn parse_clean_forcibly_percent(key: &str, value: &str) -> Result<u8, ConfigError> {
    let percent: u8 = parse(key, value, "a percentage 30..95")?;
    if !(30..=95).contains(&percent) {
        return Err(error(key, value, "a percentage 30..95"));
    }
    Ok(percent)
}

/// A percentage 0..100 (Java's `accessMessageInMemoryMaxRatio`).
pub(super) fn parse_ratio_percent(key: &str, value: &str) -> Result<u8, ConfigError> {
    let percent: u8 = parse(key, value, "a percentage 0..100")?;
    if percent > 100 {
        return Err(error(key, value, "a percentage 0..100"));
    }
    Ok(percent)
}

pub(super) fn parse_hours(key: &str, value: &str) -> Result<Vec<u8>, ConfigError> {
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

pub(super) fn hours_text(hours: &[u8]) -> String {
    hours
        .iter()
        .map(|hour| format!("{hour:02}"))
        .collect::<Vec<_>>()
        .join(";")
}

pub(super) fn non_empty(key: &str, value: &str) -> Result<String, ConfigError> {
    if value.is_empty() {
        return Err(error(key, value, "a non-empty value"));
    }
    Ok(value.to_owned())
}

pub(super) fn non_empty_path(key: &str, value: &str) -> Result<PathBuf, ConfigError> {
    non_empty(key, value).map(PathBuf::from)
}

pub(super) fn path_text(path: &Path) -> String {
    path.display().to_string()
}

/// A `;`-separated list (`namesrvAddr`); empty parts are dropped.
pub(super) fn split_list(_key: &str, value: &str) -> Result<Vec<String>, ConfigError> {
    Ok(value
        .split(';')
        .map(str::trim)
        .filter(|part| !part.is_empty())
        .map(str::to_owned)
        .collect())
}

pub(super) fn list_text(items: &[String]) -> String {
    items.join(";")
}

pub(super) fn parse_log_format(
    key: &str,
    value: &str,
) -> Result<comet_log::LogFormat, ConfigError> {
    value
        .parse()
        .map_err(|_| error(key, value, "text, kv or json"))
}

pub(super) fn parse_flush_disk_type(key: &str, value: &str) -> Result<FlushDiskType, ConfigError> {
    match value {
        "SYNC_FLUSH" => Ok(FlushDiskType::SyncFlush),
        "ASYNC_FLUSH" => Ok(FlushDiskType::AsyncFlush),
        _ => Err(error(key, value, "SYNC_FLUSH or ASYNC_FLUSH")),
    }
}

pub(super) fn flush_disk_type_text(flush: &FlushDiskType) -> String {
    match flush {
        FlushDiskType::SyncFlush => "SYNC_FLUSH",
        FlushDiskType::AsyncFlush => "ASYNC_FLUSH",
    }
    .to_owned()
}

pub(super) fn parse_broker_role(key: &str, value: &str) -> Result<BrokerRole, ConfigError> {
    match value {
        "ASYNC_MASTER" => Ok(BrokerRole::AsyncMaster),
        "SYNC_MASTER" => Ok(BrokerRole::SyncMaster),
        "SLAVE" => Ok(BrokerRole::Slave),
        _ => Err(error(key, value, "ASYNC_MASTER, SYNC_MASTER or SLAVE")),
    }
}

pub(super) fn broker_role_text(role: &BrokerRole) -> String {
    match role {
        BrokerRole::AsyncMaster => "ASYNC_MASTER",
        BrokerRole::SyncMaster => "SYNC_MASTER",
        BrokerRole::Slave => "SLAVE",
    }
    .to_owned()
}

/// RocketMQ 5.x's ACL 2.0 switches (`authenticationEnabled` / `authorizationEnabled`): only
/// "off" is accepted. Comet implements ACL 1.0 (`aclEnable`) only, and a broker asked for
/// ACL 2.0 must not quietly run open.
pub(super) fn refuse_access_control(key: &str, value: &str) -> Result<(), ConfigError> {
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

/// `brokerId`: 0 for a master, 1 or more for a slave (whether it fits `brokerRole` is
/// checked once every key is read, see `BrokerConfig::check_role`).
pub(super) fn parse_broker_id(key: &str, value: &str) -> Result<i64, ConfigError> {
    const EXPECTED: &str = "0 (a master) or a positive id (a slave)";
    let id: i64 = parse(key, value, EXPECTED)?;
    if id < 0 {
        return Err(error(key, value, EXPECTED));
    }
    Ok(id)
}

/// An IP address, or nothing for an empty value (`brokerIP2`).
pub(super) fn parse_optional_ip(key: &str, value: &str) -> Result<Option<IpAddr>, ConfigError> {
    if value.is_empty() {
        return Ok(None);
    }
    parse(key, value, "an IP address, or nothing").map(Some)
}

pub(super) fn optional_ip_text(address: &Option<IpAddr>) -> String {
    address
        .map(|address| address.to_string())
        .unwrap_or_default()
}

/// `host:port`, or nothing for an empty value (`haMasterAddress`).
pub(super) fn parse_optional_host_port(key: &str, value: &str) -> Result<String, ConfigError> {
    const EXPECTED: &str = "host:port with a port number, or nothing";
    if value.is_empty() {
        return Ok(String::new());
    }
    match value.rsplit_once(':') {
        Some((host, port)) if !host.is_empty() && port.parse::<u16>().is_ok() => {
            Ok(value.to_owned())
        }
        _ => Err(error(key, value, EXPECTED)),
    }
}

/// `registerNameServerPeriod`, clamped to 10..60 s as RocketMQ does.
pub(super) fn parse_register_period(key: &str, value: &str) -> Result<u64, ConfigError> {
    let period_ms: u64 = parse(key, value, "ms")?;
    Ok(period_ms.clamp(10_000, 60_000))
}

/// `serverChannelMaxIdleTimeSeconds`, kept in milliseconds.
pub(super) fn parse_seconds_as_ms(key: &str, value: &str) -> Result<u64, ConfigError> {
    let seconds: u64 = parse(key, value, "seconds")?;
    Ok(seconds.saturating_mul(1000))
}

/// Milliseconds written back as the whole seconds [`parse_seconds_as_ms`] reads.
pub(super) fn ms_as_seconds_text(ms: &u64) -> String {
    (ms / 1000).to_string()
}

/// `metricsExporterType`: Java's DISABLE and PROM. Its OTLP_GRPC and LOG exporters are
/// refused rather than taken as DISABLE: an operator who asked for metrics must not get none
/// without a word.
pub(super) fn parse_metrics_exporter(
    key: &str,
    value: &str,
) -> Result<MetricsExporter, ConfigError> {
    match value {
        "DISABLE" => Ok(MetricsExporter::Disable),
        "PROM" => Ok(MetricsExporter::Prom),
        _ => Err(error(
            key,
            value,
            "DISABLE or PROM (Comet serves Prometheus only: OTLP_GRPC and LOG are not \
             implemented; scrape the PROM endpoint instead)",
        )),
    }
}

pub(super) fn metrics_exporter_text(exporter: &MetricsExporter) -> String {
    match exporter {
        MetricsExporter::Disable => "DISABLE",
        MetricsExporter::Prom => "PROM",
    }
    .to_owned()
}

/// `tls.server.mode`: disabled, permissive or enforcing (any case).
pub(super) fn parse_tls_mode(key: &str, value: &str) -> Result<comet_net::TlsMode, ConfigError> {
    parse(key, value, "disabled, permissive or enforcing")
}

/// `tls.server.need.client.auth`: none, optional or require (any case).
pub(super) fn parse_client_auth(
    key: &str,
    value: &str,
) -> Result<comet_net::ClientAuth, ConfigError> {
    parse(key, value, "none, optional or require")
}

/// A file path, empty for none.
pub(super) fn parse_optional_path(_key: &str, value: &str) -> Result<Option<PathBuf>, ConfigError> {
    let value = value.trim();
    Ok((!value.is_empty()).then(|| PathBuf::from(value)))
}

pub(super) fn optional_path_text(path: &Option<PathBuf>) -> String {
    path.as_deref().map(path_text).unwrap_or_default()
}

/// `defaultMessageRequestMode`: PULL or POP, by Java's constant names (case matters, as in
/// Java's `MessageRequestMode.valueOf`).
pub(super) fn parse_message_request_mode(
    key: &str,
    value: &str,
) -> Result<comet_proto::body::MessageRequestMode, ConfigError> {
    comet_proto::body::MessageRequestMode::from_name(value.trim())
        .ok_or_else(|| error(key, value, "PULL or POP"))
}

pub(super) fn message_request_mode_text(mode: &comet_proto::body::MessageRequestMode) -> String {
    mode.name().to_owned()
}
