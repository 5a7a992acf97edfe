//! Client settings shared by producers, consumers and the admin API, with the Java
//! defaults of
//! docs/protocol.md#client-timings. Durations are `Duration`; raw integers carry their unit.

use std::net::UdpSocket;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::remoting::TransportConfig;
use crate::route::NameServers;
pub use comet_proto::acl::Credentials;

/// Settings of one client instance (one transport, one client id).
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// Name server addresses, `host:port`.
    pub namesrv_addrs: Vec<String>,
    /// Instance name; `DEFAULT` becomes `<pid>#<nanos>` so each instance is a new member
    /// (docs/protocol.md#client-ids-change-on-restart).
    pub instance_name: String,
    /// The IP reported in the client id; found from the route to the name server if unset.
    pub client_ip: Option<String>,
    /// Route refresh period (`pollNameServerInterval`).
    pub poll_name_server_interval: Duration,
    /// Heartbeat period (`heartbeatBrokerInterval`).
    pub heartbeat_broker_interval: Duration,
    /// Consumer offset persist period (`persistConsumerOffsetInterval`).
    pub persist_consumer_offset_interval: Duration,
    /// Timeout of metadata and admin calls (`mqClientApiTimeout`).
    pub api_timeout: Duration,
    /// Transport settings.
    pub transport: TransportConfig,
    /// ACL 1.0 credentials: when set, every request this client sends (to brokers and name
    /// servers) is signed as Java's `AclClientRPCHook` signs it, so brokers running with
    /// `aclEnable=true` (Comet or Apache RocketMQ) accept it.
    pub credentials: Option<Credentials>,
    /// Java's `ClientConfig.namespace`: topics and groups this client names are
    /// `<namespace>%<name>` at the broker (retry and dead-letter prefixes in front, system
    /// topics and groups never wrapped; `comet_proto::names::wrap_namespace`), and the
    /// application sees them without it.
    pub namespace: Option<String>,
}

impl Default for ClientConfig {
    fn default() -> ClientConfig {
        ClientConfig {
            namesrv_addrs: Vec::new(),
            instance_name: String::from("DEFAULT"),
            client_ip: None,
            poll_name_server_interval: Duration::from_secs(30),
            heartbeat_broker_interval: Duration::from_secs(30),
            persist_consumer_offset_interval: Duration::from_secs(5),
            api_timeout: Duration::from_secs(3),
            transport: TransportConfig::default(),
            credentials: None,
            namespace: None,
        }
    }
}

impl ClientConfig {
    /// Defaults with the given name servers (`host:port;host:port`).
    pub fn with_namesrv(list: &str) -> ClientConfig {
        ClientConfig {
            namesrv_addrs: NameServers::parse_list(list),
            ..ClientConfig::default()
        }
    }

    /// The broker-side name of a topic or group `name` of the application (unchanged
    /// without a namespace).
    pub fn wrap_name(&self, name: &str) -> String {
        match self.namespace.as_deref() {
            Some(namespace) => comet_proto::names::wrap_namespace(namespace, name),
            None => name.to_owned(),
        }
    }

    /// The application's name of a broker-side topic or group: without this client's
    /// namespace when it is in it (Java's `ClientConfig.withoutNamespace`).
    pub fn unwrap_name(&self, name: &str) -> String {
        match self.namespace.as_deref() {
            Some(namespace) => comet_proto::names::without_namespace_of(name, namespace),
            None => name.to_owned(),
        }
    }

    /// The client id `<ip>@<instance>`
    /// (docs/protocol.md#json-body-shapes), resolving the defaults.
    pub fn build_client_id(&self) -> String {
        let ip = self.client_ip.clone().unwrap_or_else(|| self.local_ip());
        let instance = if self.instance_name == "DEFAULT" {
            let nanos = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |elapsed| elapsed.as_nanos());
            format!("{}#{nanos}", std::process::id())
        } else {
            self.instance_name.clone()
        };
        format!("{ip}@{instance}")
    }

    /// The local address the OS would use towards the first name server. Connecting a UDP
    /// socket only consults the routing table; nothing is sent.
    fn local_ip(&self) -> String {
        let probe = || -> Option<String> {
            let target = self.namesrv_addrs.first()?;
            let socket = UdpSocket::bind("0.0.0.0:0").ok()?;
            socket.connect(target.as_str()).ok()?;
            Some(socket.local_addr().ok()?.ip().to_string())
        };
        probe().unwrap_or_else(|| String::from("127.0.0.1"))
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| {
            i64::try_from(elapsed.as_millis()).unwrap_or(i64::MAX)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the client id uses the configured IP and instance, and that the default
    // instance becomes `<pid>#<nanos>`.
    #[test]
    fn client_id_forms() {
        let mut config = ClientConfig::with_namesrv("127.0.0.1:9876");
        assert_eq!(config.namesrv_addrs, ["127.0.0.1:9876"]);
        config.client_ip = Some("10.0.0.1".into());
        config.instance_name = "bench".into();
        assert_eq!(config.build_client_id(), "10.0.0.1@bench");
        config.instance_name = "DEFAULT".into();
        let id = config.build_client_id();
        let prefix = format!("10.0.0.1@{}#", std::process::id());
        assert!(id.starts_with(&prefix), "{id}");
        config.client_ip = None;
        assert!(config.build_client_id().starts_with("127.0.0.1@"));
    }
}
