//! `--standalone`: the name server runs inside the broker process, on shard 0 in its own
//! task class, listening at the first `namesrvAddr`, so one command gives a working
//! single-node system.
//!
//! Invariant: the embedded name server never listens beyond `bindAddress`. With the default
//! wildcard `bindAddress` it listens on the first `namesrvAddr`'s own IP (127.0.0.1:9876 when
//! none is set); with a specific `bindAddress` the first `namesrvAddr` must be on that
//! address (it defaults to `bindAddress:9876`), because the broker registers there and
//! clients are told to connect there.

use std::net::{AddrParseError, IpAddr, SocketAddr};

use comet_nameserver::config::NamesrvConfig;
use comet_nameserver::NameServerError;
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::{spawn_detached, TaskClass};
use comet_rt::ShardId;

use crate::config::BrokerConfig;

/// Where clients find the embedded name server when neither `namesrvAddr` nor a specific
/// `bindAddress` is set.
pub const DEFAULT_NAMESRV_ADDR: &str = "127.0.0.1:9876";

/// The embedded name server's port when `namesrvAddr` is not set.
const DEFAULT_NAMESRV_PORT: u16 = 9876;

/// The `namesrvAddr` a standalone broker uses when none is configured: its own name server on
/// the loopback address, or on `bindAddress` when that names one address.
pub fn default_namesrv_addr(config: &BrokerConfig) -> String {
    if config.bind_address.is_unspecified() {
        DEFAULT_NAMESRV_ADDR.to_owned()
    } else {
        SocketAddr::new(config.bind_address, DEFAULT_NAMESRV_PORT).to_string()
    }
}

/// Why the embedded name server cannot run.
#[derive(Debug, thiserror::Error)]
pub enum StandaloneError {
    /// The first `namesrvAddr` is not an `ip:port` address.
    #[error("namesrvAddr {text:?} is not an ip:port address")]
    NotAnAddress {
        /// The address as configured.
        text: String,
        /// The parser's error.
        #[source]
        source: AddrParseError,
    },
    /// The first `namesrvAddr` is outside a specific `bindAddress`.
    #[error(
        "namesrvAddr {addr} is not on bindAddress {bind}: the embedded name server listens \
         only on bindAddress, where the broker must find it (use {bind}:{port})",
        port = addr.port()
    )]
    OutsideBindAddress {
        /// The name server address.
        addr: SocketAddr,
        /// The broker's `bindAddress`.
        bind: IpAddr,
    },
    /// The name server did not start.
    #[error("embedded name server: {0}")]
    Start(#[source] NameServerError),
}

/// The address the embedded name server listens at: the first `namesrvAddr`, which must be
/// on `bindAddress` unless that is the wildcard (see the module docs).
pub fn name_server_addr(config: &BrokerConfig) -> Result<SocketAddr, StandaloneError> {
    let text = config
        .namesrv_addrs
        .first()
        .map_or(DEFAULT_NAMESRV_ADDR, String::as_str);
    let addr: SocketAddr = text
        .parse()
        .map_err(|source| StandaloneError::NotAnAddress {
            text: text.to_owned(),
            source,
        })?;
    if !config.bind_address.is_unspecified() && addr.ip() != config.bind_address {
        return Err(StandaloneError::OutsideBindAddress {
            addr,
            bind: config.bind_address,
        });
    }
    Ok(addr)
}

/// Starts the embedded name server on the current shard; it stops with `stop`.
pub fn spawn_name_server(config: &BrokerConfig, stop: StopSignal) -> Result<(), StandaloneError> {
    let addr = name_server_addr(config)?;
    let namesrv_config = NamesrvConfig {
        listen_port: addr.port(),
        bind_address: addr.ip(),
        kv_config_path: config.store_root.join("namesrv").join("kvConfig.json"),
        console_listen_port: config.console_listen_port,
        // One process, one certificate: the embedded name server's port is the broker's.
        tls_server_mode: config.tls_server_mode,
        tls_server_cert_path: config.tls_server_cert_path.clone(),
        tls_server_key_path: config.tls_server_key_path.clone(),
        tls_server_key_password: config.tls_server_key_password.clone(),
        tls_server_need_client_auth: config.tls_server_need_client_auth,
        tls_server_trust_cert_path: config.tls_server_trust_cert_path.clone(),
        ..NamesrvConfig::default()
    };
    let (name_server, listener) = comet_nameserver::start_on_shard(namesrv_config, ShardId(0))
        .map_err(StandaloneError::Start)?;
    log::info!("embedded name server listening on {addr}");
    if let Some(console) = name_server.console_addr() {
        log::info!("web console on http://{console}/");
    }
    spawn_detached(TaskClass::NameServer, name_server.run(listener, stop));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pairs: &[(&str, &str)]) -> BrokerConfig {
        let mut config = BrokerConfig::default();
        config.apply_pairs(pairs.iter().copied()).unwrap();
        config
    }

    // Proves the embedded name server stays on the configured name server address under the
    // wildcard bindAddress, follows a specific bindAddress by default, and refuses a
    // namesrvAddr outside a specific bindAddress instead of listening where the broker and
    // clients would not look.
    #[test]
    fn name_server_listens_within_bind_address() {
        let wildcard = config(&[("namesrvAddr", "10.0.0.7:9877")]);
        assert_eq!(default_namesrv_addr(&wildcard), DEFAULT_NAMESRV_ADDR);
        assert_eq!(
            name_server_addr(&wildcard).unwrap().to_string(),
            "10.0.0.7:9877"
        );
        let loopback = config(&[("bindAddress", "127.0.0.1")]);
        assert_eq!(default_namesrv_addr(&loopback), "127.0.0.1:9876");
        assert_eq!(
            name_server_addr(&loopback).unwrap().to_string(),
            "127.0.0.1:9876"
        );
        let outside = config(&[
            ("bindAddress", "127.0.0.1"),
            ("namesrvAddr", "10.0.0.7:9877"),
        ]);
        let error = name_server_addr(&outside).unwrap_err().to_string();
        assert!(error.contains("bindAddress 127.0.0.1"), "{error}");
        assert!(error.contains("127.0.0.1:9877"), "{error}");
        let inside = config(&[
            ("bindAddress", "10.0.0.7"),
            ("namesrvAddr", "10.0.0.7:9877"),
        ]);
        assert_eq!(
            name_server_addr(&inside).unwrap().to_string(),
            "10.0.0.7:9877"
        );
    }
}
