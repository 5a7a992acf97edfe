//! The controller session's requests and answers as remoting frames
//! (docs/protocol.md#controller-protocol): the session speaks in `Request` and `Reply`, the
//! controllers in RemotingCommands with Java's headers and JSON bodies.

use comet_proto::body::{ElectMasterResponseBody, JsonBody, SyncStateSet as WireSyncStateSet};
use comet_proto::headers::{
    AlterSyncStateSetRequestHeader, ApplyBrokerIdRequestHeader, BrokerHeartbeatRequestHeader,
    ElectMasterRequestHeader, ElectMasterResponseHeader, GetMetaDataResponseHeader,
    GetNextBrokerIdRequestHeader, GetNextBrokerIdResponseHeader, GetReplicaInfoRequestHeader,
    GetReplicaInfoResponseHeader, RegisterBrokerToControllerRequestHeader,
    RegisterBrokerToControllerResponseHeader,
};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_replication::controller::{Reply, Request, SessionConfig, SyncStateSet};

pub use crate::processor::controller::WireError;
use crate::processor::controller::{master_view, sync_state_set};

/// The frame for one of the session's requests (`invoke_time_ms`: wall clock, Unix ms).
pub fn to_command(
    config: &SessionConfig,
    request: &Request,
    invoke_time_ms: i64,
) -> RemotingCommand {
    let cluster_name = config.cluster_name.clone();
    let broker_name = config.broker_name.clone();
    match request {
        Request::GetMetadata => {
            RemotingCommand::request(RequestCode::CONTROLLER_GET_METADATA_INFO, 0)
        }
        Request::GetNextBrokerId => {
            RemotingCommand::request(RequestCode::CONTROLLER_GET_NEXT_BROKER_ID, 0).with_header(
                &GetNextBrokerIdRequestHeader {
                    cluster_name,
                    broker_name,
                },
            )
        }
        Request::ApplyBrokerId {
            broker_id,
            register_check_code,
        } => RemotingCommand::request(RequestCode::CONTROLLER_APPLY_BROKER_ID, 0).with_header(
            &ApplyBrokerIdRequestHeader {
                cluster_name,
                broker_name,
                applied_broker_id: *broker_id,
                register_check_code: register_check_code.clone(),
            },
        ),
        Request::RegisterBroker { broker_id } => {
            RemotingCommand::request(RequestCode::CONTROLLER_REGISTER_BROKER, 0).with_header(
                &RegisterBrokerToControllerRequestHeader {
                    cluster_name,
                    broker_name,
                    broker_id: *broker_id,
                    broker_address: config.broker_addr.clone(),
                    invoke_time: Some(invoke_time_ms),
                },
            )
        }
        Request::Heartbeat(heartbeat) => RemotingCommand::request(RequestCode::BROKER_HEARTBEAT, 0)
            .with_header(&BrokerHeartbeatRequestHeader {
                cluster_name,
                broker_addr: config.broker_addr.clone(),
                broker_name,
                broker_id: Some(heartbeat.broker_id),
                epoch: Some(heartbeat.epoch),
                max_offset: Some(heartbeat.max_offset),
                confirm_offset: Some(heartbeat.confirm_offset),
                heartbeat_timeout_mills: Some(heartbeat.timeout_ms),
                election_priority: Some(heartbeat.election_priority),
            }),
        Request::GetReplicaInfo => {
            RemotingCommand::request(RequestCode::CONTROLLER_GET_REPLICA_INFO, 0)
                .with_header(&GetReplicaInfoRequestHeader { broker_name })
        }
        Request::ElectMaster { broker_id } => {
            RemotingCommand::request(RequestCode::CONTROLLER_ELECT_MASTER, 0).with_header(
                &ElectMasterRequestHeader {
                    cluster_name,
                    broker_name,
                    broker_id: *broker_id,
                    designate_elect: false,
                    invoke_time: Some(invoke_time_ms),
                },
            )
        }
        Request::AlterSyncStateSet {
            master_broker_id,
            master_epoch,
            proposal,
        } => RemotingCommand::request(RequestCode::CONTROLLER_ALTER_SYNC_STATE_SET, 0)
            .with_header(&AlterSyncStateSetRequestHeader {
                broker_name,
                master_broker_id: *master_broker_id,
                master_epoch: *master_epoch,
                invoke_time: Some(invoke_time_ms),
            })
            .with_body(
                WireSyncStateSet {
                    sync_state_set: proposal.members.clone(),
                    sync_state_set_epoch: proposal.epoch,
                }
                .encode(),
            ),
    }
}

/// The session's form of a controller's `answer` to `request`. An election that kept the
/// live master (CONTROLLER_MASTER_STILL_EXIST) names it as a success does.
pub fn to_reply(request: &Request, answer: &RemotingCommand) -> Result<Reply, WireError> {
    let code = answer.response_code();
    let kept_master = matches!(request, Request::ElectMaster { .. })
        && code == ResponseCode::CONTROLLER_MASTER_STILL_EXIST;
    if code != ResponseCode::SUCCESS && !kept_master {
        return Ok(Reply::Refused {
            code: code.value(),
            remark: answer.remark.clone(),
        });
    }
    let header = |what| move |source| WireError::Header { what, source };
    Ok(match request {
        Request::GetMetadata => {
            let fields: GetMetaDataResponseHeader =
                answer.decode_header().map_err(header("metadata"))?;
            Reply::Metadata {
                leader_addr: fields.controller_leader_address,
            }
        }
        Request::GetNextBrokerId => {
            let fields: GetNextBrokerIdResponseHeader =
                answer.decode_header().map_err(header("next broker id"))?;
            Reply::NextBrokerId {
                next_broker_id: fields.next_broker_id,
            }
        }
        Request::ApplyBrokerId { .. } => Reply::BrokerIdApplied,
        Request::RegisterBroker { .. } => {
            let fields: RegisterBrokerToControllerResponseHeader =
                answer.decode_header().map_err(header("register"))?;
            Reply::Registered(master_view(
                fields.master_broker_id,
                fields.master_address,
                fields.master_epoch,
                sync_state_set(&answer.body, "register")?,
            ))
        }
        Request::GetReplicaInfo => {
            let fields: GetReplicaInfoResponseHeader =
                answer.decode_header().map_err(header("replica info"))?;
            Reply::ReplicaInfo(master_view(
                fields.master_broker_id,
                fields.master_address,
                fields.master_epoch,
                sync_state_set(&answer.body, "replica info")?,
            ))
        }
        Request::ElectMaster { .. } => {
            let fields: ElectMasterResponseHeader =
                answer.decode_header().map_err(header("elect master"))?;
            let body = if answer.body.is_empty() {
                ElectMasterResponseBody::default()
            } else {
                ElectMasterResponseBody::decode(&answer.body).map_err(|source| WireError::Body {
                    what: "elect master",
                    source,
                })?
            };
            Reply::Elected(master_view(
                fields.master_broker_id,
                fields.master_address,
                fields.master_epoch,
                SyncStateSet {
                    members: body.sync_state_set,
                    epoch: fields.sync_state_set_epoch.unwrap_or_default(),
                },
            ))
        }
        Request::AlterSyncStateSet { .. } => {
            Reply::SyncStateSetAltered(sync_state_set(&answer.body, "alter sync state set")?)
        }
        // One way: never answered, so never decoded (the driver sends it without a reply).
        Request::Heartbeat(_) => Reply::Refused {
            code: code.value(),
            remark: Some("a heartbeat has no answer".to_owned()),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_replication::controller::Heartbeat;

    fn config() -> SessionConfig {
        SessionConfig::new(
            "c",
            "b",
            "127.0.0.1:10911",
            vec!["127.0.0.1:9878".into()],
            1,
        )
    }

    // Proves a refused answer becomes Refused with its code, an election that kept the master
    // is read as an election, and a malformed answer is an error rather than a panic.
    #[test]
    fn answers_decode_or_fail_cleanly() {
        let elect = Request::ElectMaster { broker_id: 1 };
        let command = to_command(&config(), &elect, 5);
        assert_eq!(command.request_code(), RequestCode::CONTROLLER_ELECT_MASTER);
        let refused =
            RemotingCommand::error_to(&command, ResponseCode::CONTROLLER_NOT_LEADER, "no");
        assert!(matches!(
            to_reply(&elect, &refused).unwrap(),
            Reply::Refused { code, .. } if code == ResponseCode::CONTROLLER_NOT_LEADER.value()
        ));
        let kept =
            RemotingCommand::response_to(&command, ResponseCode::CONTROLLER_MASTER_STILL_EXIST)
                .with_header(&ElectMasterResponseHeader {
                    master_broker_id: Some(2),
                    master_address: Some("127.0.0.1:10921".into()),
                    master_epoch: Some(3),
                    sync_state_set_epoch: Some(4),
                });
        let Reply::Elected(view) = to_reply(&elect, &kept).unwrap() else {
            panic!("an election answer")
        };
        assert_eq!(view.master_broker_id, Some(2));
        assert_eq!(view.sync_state_set.epoch, 4);
        let info = Request::GetReplicaInfo;
        let garbage = RemotingCommand::response_to(&command, ResponseCode::SUCCESS)
            .with_body(comet_proto::bytes::Bytes::from_static(b"{not json"));
        assert!(to_reply(&info, &garbage).is_err());
        let heartbeat = Request::Heartbeat(Heartbeat {
            broker_id: 1,
            epoch: 2,
            max_offset: 3,
            confirm_offset: 3,
            timeout_ms: 10_000,
            election_priority: 7,
        });
        let frame = to_command(&config(), &heartbeat, 5);
        assert_eq!(frame.request_code(), RequestCode::BROKER_HEARTBEAT);
    }
}
