//! The controller's requests and answers as RocketMQ remoting frames: the headers of
//! `comet_proto::headers` (controller and BROKER_HEARTBEAT) and the bodies of
//! `comet_proto::body`, as Java's `ControllerRequestProcessor` reads and writes them.

use comet_proto::body::{BrokerMemberGroup, ElectMasterResponseBody, JsonBody, SyncStateSet};
use comet_proto::headers::{
    AlterSyncStateSetRequestHeader, AlterSyncStateSetResponseHeader, ApplyBrokerIdRequestHeader,
    ApplyBrokerIdResponseHeader, BrokerHeartbeatRequestHeader, ElectMasterRequestHeader,
    ElectMasterResponseHeader, GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader,
    GetReplicaInfoRequestHeader, GetReplicaInfoResponseHeader,
    RegisterBrokerToControllerRequestHeader, RegisterBrokerToControllerResponseHeader,
};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode, ResponseCode};

use super::{
    ElectTrigger, Heartbeat, MasterInfo, Refusal, Request, Response,
    SyncStateSet as ControllerSyncStateSet,
};

/// A request the controller cannot read: answered with this command as it is.
pub type Unreadable = RemotingCommand;

fn header<H: CommandHeader>(command: &RemotingCommand) -> Result<H, Unreadable> {
    command.decode_header().map_err(|error| {
        RemotingCommand::error_to(command, ResponseCode::SYSTEM_ERROR, error.to_string())
    })
}

/// The controller request a frame carries. BROKER_HEARTBEAT and CONTROLLER_GET_METADATA_INFO
/// are not among them: every controller answers those itself ([`heartbeat`]).
pub fn decode(command: &RemotingCommand) -> Result<Request, Unreadable> {
    let request = match command.request_code() {
        RequestCode::CONTROLLER_GET_NEXT_BROKER_ID => {
            let h: GetNextBrokerIdRequestHeader = header(command)?;
            Request::GetNextBrokerId {
                cluster_name: h.cluster_name,
                broker_name: h.broker_name,
            }
        }
        RequestCode::CONTROLLER_APPLY_BROKER_ID => {
            let h: ApplyBrokerIdRequestHeader = header(command)?;
            Request::ApplyBrokerId {
                cluster_name: h.cluster_name,
                broker_name: h.broker_name,
                broker_id: h.applied_broker_id,
                register_check_code: h.register_check_code,
            }
        }
        RequestCode::CONTROLLER_REGISTER_BROKER => {
            let h: RegisterBrokerToControllerRequestHeader = header(command)?;
            Request::RegisterBroker {
                cluster_name: h.cluster_name,
                broker_name: h.broker_name,
                broker_id: h.broker_id,
                broker_addr: h.broker_address,
            }
        }
        RequestCode::CONTROLLER_GET_REPLICA_INFO => {
            let h: GetReplicaInfoRequestHeader = header(command)?;
            Request::GetReplicaInfo {
                broker_name: h.broker_name,
            }
        }
        RequestCode::CONTROLLER_ELECT_MASTER => {
            let h: ElectMasterRequestHeader = header(command)?;
            let trigger = if h.designate_elect {
                ElectTrigger::Designated(h.broker_id)
            } else if h.broker_id < 0 {
                ElectTrigger::Controller
            } else {
                ElectTrigger::Broker(h.broker_id)
            };
            Request::ElectMaster {
                broker_name: h.broker_name,
                trigger,
            }
        }
        RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET => {
            let h: AlterSyncStateSetRequestHeader = header(command)?;
            let body = SyncStateSet::decode(&command.body).map_err(|error| {
                RemotingCommand::error_to(command, ResponseCode::SYSTEM_ERROR, error.to_string())
            })?;
            Request::AlterSyncStateSet {
                broker_name: h.broker_name,
                master_broker_id: h.master_broker_id,
                master_epoch: h.master_epoch,
                proposal: ControllerSyncStateSet {
                    members: body.sync_state_set,
                    epoch: body.sync_state_set_epoch,
                },
            }
        }
        _ => return Err(RemotingCommand::not_supported_to(command)),
    };
    Ok(request)
}

/// The heartbeat a BROKER_HEARTBEAT carries; one without `brokerId` is refused as Java
/// refuses it.
pub fn heartbeat(command: &RemotingCommand) -> Result<Heartbeat, Unreadable> {
    let h: BrokerHeartbeatRequestHeader = header(command)?;
    let Some(broker_id) = h.broker_id else {
        return Err(RemotingCommand::error_to(
            command,
            ResponseCode::CONTROLLER_INVALID_REQUEST,
            "Heart beat with empty brokerId",
        ));
    };
    Ok(Heartbeat {
        cluster_name: h.cluster_name,
        broker_name: h.broker_name,
        broker_addr: h.broker_addr,
        broker_id,
        epoch: h.epoch,
        max_offset: h.max_offset,
        confirm_offset: h.confirm_offset,
        heartbeat_timeout_ms: h.heartbeat_timeout_mills,
        election_priority: h.election_priority,
    })
}

/// A refusal as Java sends it: its code and remark.
pub fn refusal(command: &RemotingCommand, refusal: &Refusal) -> RemotingCommand {
    RemotingCommand::error_to(command, refusal.code, refusal.remark.clone())
}

fn wire_set(set: &ControllerSyncStateSet) -> SyncStateSet {
    SyncStateSet {
        sync_state_set: set.members.clone(),
        sync_state_set_epoch: set.epoch,
    }
}

fn elect_header(master: &MasterInfo, sync_state_set_epoch: i32) -> ElectMasterResponseHeader {
    ElectMasterResponseHeader {
        master_broker_id: Some(master.broker_id),
        master_address: Some(master.addr.clone()),
        master_epoch: Some(master.master_epoch),
        sync_state_set_epoch: Some(sync_state_set_epoch),
    }
}

/// The answer to `command` (which asked `request`) once `response` holds.
pub fn encode(
    command: &RemotingCommand,
    request: &Request,
    response: &Response,
) -> RemotingCommand {
    let (cluster_name, broker_name) = match request {
        Request::GetNextBrokerId {
            cluster_name,
            broker_name,
        }
        | Request::ApplyBrokerId {
            cluster_name,
            broker_name,
            ..
        }
        | Request::RegisterBroker {
            cluster_name,
            broker_name,
            ..
        } => (Some(cluster_name.clone()), Some(broker_name.clone())),
        _ => (None, None),
    };
    let mut answer = RemotingCommand::response_to(command, response.code());
    if let Some(remark) = response.remark() {
        answer.remark = Some(remark.to_owned());
    }
    match response {
        Response::NextBrokerId { next_broker_id } => {
            answer.with_header(&GetNextBrokerIdResponseHeader {
                cluster_name,
                broker_name,
                next_broker_id: Some(*next_broker_id),
            })
        }
        Response::BrokerIdApplied => answer.with_header(&ApplyBrokerIdResponseHeader {
            cluster_name,
            broker_name,
        }),
        Response::Registered {
            master,
            sync_state_set,
        } => answer
            .with_header(&RegisterBrokerToControllerResponseHeader {
                cluster_name,
                broker_name,
                master_broker_id: master.as_ref().map(|m| m.broker_id),
                master_address: master.as_ref().map(|m| m.addr.clone()),
                master_epoch: master.as_ref().map(|m| m.master_epoch),
                // Java names the set's epoch here only with a live master.
                sync_state_set_epoch: master.as_ref().map(|_| sync_state_set.epoch),
            })
            .with_body(wire_set(sync_state_set).encode()),
        Response::ReplicaInfo {
            master_broker_id,
            master_addr,
            master_epoch,
            sync_state_set,
        } => answer
            .with_header(&GetReplicaInfoResponseHeader {
                master_broker_id: *master_broker_id,
                master_address: master_addr.clone(),
                master_epoch: Some(*master_epoch),
            })
            .with_body(wire_set(sync_state_set).encode()),
        Response::Elected {
            master,
            sync_state_set,
            members,
            ..
        } => {
            // The request's cluster name, as Java fills the member group with it.
            let cluster = command
                .decode_header::<ElectMasterRequestHeader>()
                .map(|header| header.cluster_name)
                .unwrap_or_default();
            let group = match request {
                Request::ElectMaster { broker_name, .. } => Some(BrokerMemberGroup {
                    broker_addrs: members.clone(),
                    broker_name: broker_name.clone(),
                    cluster,
                }),
                _ => None,
            };
            let body = ElectMasterResponseBody {
                broker_member_group: group,
                sync_state_set: sync_state_set.members.clone(),
            };
            answer
                .with_header(&elect_header(master, sync_state_set.epoch))
                .with_body(body.encode())
        }
        Response::MasterStillExists {
            master,
            sync_state_set,
        } => {
            let body = ElectMasterResponseBody {
                broker_member_group: None,
                sync_state_set: sync_state_set.members.clone(),
            };
            answer
                .with_header(&elect_header(master, sync_state_set.epoch))
                .with_body(body.encode())
        }
        Response::MasterGone { master_epoch } => answer.with_header(&ElectMasterResponseHeader {
            master_broker_id: None,
            master_address: None,
            master_epoch: Some(*master_epoch),
            sync_state_set_epoch: None,
        }),
        Response::SyncStateSetAltered(set) => answer
            .with_header(&AlterSyncStateSetResponseHeader {
                new_sync_state_set_epoch: set.epoch,
            })
            .with_body(wire_set(set).encode()),
        // Not decoded from the wire (their request codes are answered as not supported).
        Response::SyncStateData(_) | Response::BrokerDataCleaned => answer,
    }
}
