//! Registration with name servers
//! (docs/protocol.md#name-server-requests, docs/protocol.md#broker-and-name-server-conversation):
//! REGISTER_BROKER at start-up, every `registerNameServerPeriod` and after every topic change;
//! UNREGISTER_BROKER at shutdown. Every configured name server gets every registration; they need
//! nothing from each other.

use std::time::Duration;

use comet_proto::body::{JsonBody, RegisterBrokerBody, TopicConfigSerializeWrapper};
use comet_proto::headers::{
    RegisterBrokerRequestHeader, RegisterBrokerResponseHeader, UnRegisterBrokerRequestHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use crate::config::BrokerConfig;
use crate::namesrv_client::{parse_addr, NameServerLink};

/// How long one registration may take (RocketMQ uses 24 s; a local name server answers in
/// microseconds, so a shorter bound keeps shutdown prompt).
pub const REGISTER_TIMEOUT: Duration = Duration::from_secs(6);

/// The masked CRC-32 of a body, as `bodyCrc32` carries it (docs/protocol.md#masked-body-crc).
pub fn body_crc32(body: &[u8]) -> i32 {
    (crc32fast::hash(body) & 0x7FFF_FFFF) as i32
}

/// Builds the REGISTER_BROKER request for `topics`.
pub fn register_request(
    config: &BrokerConfig,
    topics: TopicConfigSerializeWrapper,
    opaque: i32,
) -> RemotingCommand {
    let body = RegisterBrokerBody {
        filter_server_list: Vec::new(),
        topic_config_serialize_wrapper: topics,
    }
    .encode();
    let header = RegisterBrokerRequestHeader {
        broker_name: config.broker_name.clone(),
        broker_addr: config.broker_addr(),
        cluster_name: config.cluster_name.clone(),
        ha_server_addr: config.ha_server_addr(),
        broker_id: config.broker_id,
        heartbeat_timeout_millis: Some(120_000),
        enable_acting_master: Some(false),
        compressed: false,
        body_crc32: Some(body_crc32(&body)),
    };
    RemotingCommand::request(RequestCode::REGISTER_BROKER, opaque)
        .with_header(&header)
        .with_body(body)
}

/// Links to every configured name server (addresses that do not parse are reported once
/// and skipped).
pub fn links(config: &BrokerConfig) -> Vec<NameServerLink> {
    let tls = crate::namesrv_client::client_tls(config);
    config
        .namesrv_addrs
        .iter()
        .filter_map(|text| match parse_addr(text) {
            Ok(addr) => Some(NameServerLink::new(addr, tls.clone())),
            Err(error) => {
                log::error!("{error}: this name server is skipped");
                None
            }
        })
        .collect()
}

/// What the name servers answered to one round of registration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Registered {
    /// How many accepted.
    pub accepted: usize,
    /// The master of this broker name as a name server named it (`haServerAddr`,
    /// `masterAddr` of the response header): how a slave learns where to replicate from,
    /// as Java slaves do. Empty for a master.
    pub master: crate::replication_state::MasterAddresses,
}

/// Registers with every name server. Failures are logged: the next period retries, and a
/// name server that is down must not stop the broker.
pub async fn register_all(
    config: &BrokerConfig,
    links: &mut [NameServerLink],
    topics: &TopicConfigSerializeWrapper,
    opaque: i32,
) -> Registered {
    let mut registered = Registered::default();
    for link in links.iter_mut() {
        let request = register_request(config, topics.clone(), opaque);
        match link.call(&request, REGISTER_TIMEOUT).await {
            Ok(response) if response.response_code() == ResponseCode::SUCCESS => {
                registered.accepted += 1;
                learn_master(&mut registered.master, &response);
            }
            Ok(response) => log::warn!(
                "name server {} refused registration: {} {:?}",
                link.addr(),
                response.response_code(),
                response.remark
            ),
            Err(error) => log::warn!("registration failed: {error}"),
        }
    }
    registered
}

/// Takes the master's addresses from a REGISTER_BROKER response header (the first name
/// server that names them wins; a header that does not decode names none).
fn learn_master(
    master: &mut crate::replication_state::MasterAddresses,
    response: &RemotingCommand,
) {
    let Ok(header) = RegisterBrokerResponseHeader::from_ext_fields(&response.ext_fields) else {
        return;
    };
    let named = |addr: Option<String>| addr.filter(|addr| !addr.is_empty());
    if master.ha_addr.is_none() {
        master.ha_addr = named(header.ha_server_addr);
    }
    if master.broker_addr.is_none() {
        master.broker_addr = named(header.master_addr);
    }
}

/// Unregisters from every name server (shutdown); errors are logged.
pub async fn unregister_all(config: &BrokerConfig, links: &mut [NameServerLink], opaque: i32) {
    let header = UnRegisterBrokerRequestHeader {
        broker_name: config.broker_name.clone(),
        broker_addr: config.broker_addr(),
        cluster_name: config.cluster_name.clone(),
        broker_id: config.broker_id,
    };
    for link in links.iter_mut() {
        let request =
            RemotingCommand::request(RequestCode::UNREGISTER_BROKER, opaque).with_header(&header);
        if let Err(error) = link.call(&request, REGISTER_TIMEOUT).await {
            log::warn!("unregistration failed: {error}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::topic::TopicTable;

    // Proves the request carries the header keys a Java name server reads, a body that
    // decodes to the topic table, and a matching masked CRC.
    #[test]
    fn register_request_shape() {
        let config = BrokerConfig::default();
        let table = TopicTable::new(&config, None);
        let request = register_request(&config, table.to_wrapper(6), 5);
        assert_eq!(request.request_code(), RequestCode::REGISTER_BROKER);
        let header = RegisterBrokerRequestHeader::from_ext_fields(&request.ext_fields).unwrap();
        assert_eq!(header.broker_addr, "127.0.0.1:10911");
        assert_eq!(header.body_crc32, Some(body_crc32(&request.body)));
        let body = RegisterBrokerBody::decode(&request.body).unwrap();
        assert!(body
            .topic_config_serialize_wrapper
            .topic_config_table
            .contains_key("TBW102"));
    }
}
