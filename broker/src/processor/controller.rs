//! NOTIFY_BROKER_ROLE_CHANGED: a controller tells a broker in controller mode that its broker
//! set has a new master; the driver (`crate::controller_mode`) acts on it. Also the decoding
//! of the controller's sync-state-set bodies, shared with the driver's answers.

use comet_proto::body::{JsonBody, SyncStateSet as WireSyncStateSet};
use comet_proto::headers::NotifyBrokerRoleChangedRequestHeader;
use comet_proto::json::JsonError;
use comet_proto::{HeaderError, RemotingCommand, ResponseCode};
use comet_replication::controller::{
    BrokerControllerId, ControllerEpoch, MasterView, SyncStateSet,
};
use thiserror::Error;

use crate::shard::ShardBroker;

/// A controller's answer or notification whose header or body cannot be read.
#[derive(Debug, Error)]
pub enum WireError {
    /// A header field is missing or malformed.
    #[error("{what}: {source}")]
    Header {
        /// Which frame.
        what: &'static str,
        /// The cause.
        #[source]
        source: HeaderError,
    },
    /// The JSON body is malformed.
    #[error("{what} body: {source}")]
    Body {
        /// Which frame.
        what: &'static str,
        /// The cause.
        #[source]
        source: JsonError,
    },
}

/// Hands a role notification to the controller driver. A broker not in controller mode
/// answers as Java's does when the feature is off.
pub fn notify_role_changed(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let Some(role) = broker.controller() else {
        return RemotingCommand::error_to(
            request,
            ResponseCode::SYSTEM_ERROR,
            "this broker is not in controller mode (enableControllerMode=false)",
        );
    };
    match notification_view(request) {
        Ok(view) => {
            role.notify(view);
            RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        }
        Err(error) => RemotingCommand::error_to(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!("cannot read the role notification: {error}"),
        ),
    }
}

/// The master a NOTIFY_BROKER_ROLE_CHANGED names.
pub fn notification_view(command: &RemotingCommand) -> Result<MasterView, WireError> {
    let fields: NotifyBrokerRoleChangedRequestHeader =
        command
            .decode_header()
            .map_err(|source| WireError::Header {
                what: "role notification",
                source,
            })?;
    let mut set = sync_state_set(&command.body, "role notification")?;
    if command.body.is_empty() {
        set.epoch = fields.sync_state_set_epoch.unwrap_or_default();
    }
    Ok(master_view(
        fields.master_broker_id,
        fields.master_address,
        fields.master_epoch,
        set,
    ))
}

/// A sync-state-set body (an empty body is the empty set, epoch 0).
pub fn sync_state_set(body: &[u8], what: &'static str) -> Result<SyncStateSet, WireError> {
    if body.is_empty() {
        return Ok(SyncStateSet::default());
    }
    let set = WireSyncStateSet::decode(body).map_err(|source| WireError::Body { what, source })?;
    Ok(SyncStateSet {
        members: set.sync_state_set,
        epoch: set.sync_state_set_epoch,
    })
}

/// The master fields that registration, replica info, election answers and notifications
/// all carry.
pub fn master_view(
    master_broker_id: Option<BrokerControllerId>,
    master_addr: Option<String>,
    master_epoch: Option<ControllerEpoch>,
    sync_state_set: SyncStateSet,
) -> MasterView {
    MasterView {
        master_broker_id,
        master_addr,
        master_epoch,
        sync_state_set,
    }
}
