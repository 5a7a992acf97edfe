//! GET_BROKER_CONFIG and UPDATE_BROKER_CONFIG (`mqadmin getBrokerConfig` /
//! `updateBrokerConfig`): the configuration as Java properties text, and run-time changes to
//! it (see `crate::live_config` for how they apply and persist).

use comet_proto::{java_properties, RemotingCommand, ResponseCode};

use crate::live_config::UpdateError;
use crate::shard::ShardBroker;

use super::error;

/// Largest UPDATE_BROKER_CONFIG body accepted: a full broker.conf is a few KiB.
pub const UPDATE_BODY_BYTES_MAX: usize = 64 * 1024;

/// GET_BROKER_CONFIG (26): the configuration now in force as Java properties text.
pub fn get(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let pairs = broker.config().to_pairs();
    let text = java_properties::write(pairs.iter().map(|(key, value)| (*key, value.as_str())));
    RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(text.into_bytes())
}

/// UPDATE_BROKER_CONFIG (25): applies the properties in the body, all or nothing, persisted
/// before they apply. Keys Comet does not know are ignored (Apache ignores keys with no config
/// field); a bad value refuses the whole update with a message naming the key; a change of
/// `brokerPermission` is re-registered with the name servers at once, as Apache does.
pub async fn update(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let body = &request.body;
    if body.is_empty() {
        return RemotingCommand::response_to(request, ResponseCode::SUCCESS);
    }
    if body.len() > UPDATE_BODY_BYTES_MAX {
        let remark = format!(
            "config update of {} bytes exceeds {UPDATE_BODY_BYTES_MAX}",
            body.len()
        );
        return error(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return error(
            request,
            ResponseCode::SYSTEM_ERROR,
            "string2Properties error",
        );
    };
    let pairs = java_properties::parse(text);
    let live = broker.live_config().clone();
    let update_pairs = pairs.clone();
    let result = comet_rt::task_class::run_blocking(move || live.update(&update_pairs)).await;
    match result {
        Ok(outcome) => {
            log::info!(
                "broker config updated: live {:?}, at next start {:?}, ignored {:?}",
                outcome.applied_live,
                outcome.applied_at_restart,
                outcome.ignored
            );
            if outcome
                .applied_live
                .iter()
                .any(|key| key == "brokerPermission")
            {
                broker.mark_topics_changed();
            }
            RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        }
        Err(e @ UpdateError::Blacklisted(_)) => {
            error(request, ResponseCode::NO_PERMISSION, e.to_string())
        }
        Err(e) => error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    }
}
