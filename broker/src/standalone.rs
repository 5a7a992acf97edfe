//! `--standalone`: the name server runs inside the broker process, on shard 0 in its own
//! task class, listening at the first `namesrvAddr` (default 127.0.0.1:9876), so one command
//! gives a working single-node system.

use std::net::SocketAddr;

use comet_nameserver::config::NamesrvConfig;
use comet_rt::shutdown::StopSignal;
use comet_rt::task_class::{spawn_detached, TaskClass};
use comet_rt::ShardId;

use crate::config::BrokerConfig;

/// Where clients find the embedded name server when `namesrvAddr` is not set.
pub const DEFAULT_NAMESRV_ADDR: &str = "127.0.0.1:9876";

/// The address the embedded name server listens at.
pub fn name_server_addr(config: &BrokerConfig) -> Result<SocketAddr, String> {
    let text = config
        .namesrv_addrs
        .first()
        .map_or(DEFAULT_NAMESRV_ADDR, String::as_str);
    text.parse()
        .map_err(|_| format!("namesrvAddr {text:?} is not an ip:port address"))
}

/// Starts the embedded name server on the current shard; it stops with `stop`.
pub fn spawn_name_server(config: &BrokerConfig, stop: StopSignal) -> Result<(), String> {
    let addr = name_server_addr(config)?;
    let namesrv_config = NamesrvConfig {
        listen_port: addr.port(),
        bind_address: addr.ip(),
        kv_config_path: config.store_root.join("namesrv").join("kvConfig.json"),
        ..NamesrvConfig::default()
    };
    let (name_server, listener) = comet_nameserver::start_on_shard(namesrv_config, ShardId(0))
        .map_err(|e| format!("embedded name server: {e}"))?;
    log::info!("embedded name server listening on {addr}");
    spawn_detached(TaskClass::NameServer, name_server.run(listener, stop));
    Ok(())
}
