//! What the controller is asked and what it answers, decoded from and encoded to the wire
//! by the network layer (the headers of `comet_proto::headers` and bodies of
//! `comet_proto::body`).

use std::collections::BTreeMap;

use comet_proto::code::ResponseCode;
use thiserror::Error;

use super::{BrokerId, Epoch, SyncStateSet};

/// Who asks for an election (Java's `ElectMasterRequestHeader`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ElectTrigger {
    /// A member without a master asks (`designateElect` false). On a set's first election
    /// it wins; later the policy picks.
    Broker(BrokerId),
    /// An admin designates the winner (`designateElect` true): it wins if the policy may
    /// pick it at all.
    Designated(BrokerId),
    /// The controller itself, because the master's heartbeats stopped (`brokerId` -1).
    Controller,
}

/// A controller request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// CONTROLLER_GET_NEXT_BROKER_ID.
    GetNextBrokerId {
        /// `clusterName`.
        cluster_name: String,
        /// `brokerName`.
        broker_name: String,
    },
    /// CONTROLLER_APPLY_BROKER_ID.
    ApplyBrokerId {
        /// `clusterName`.
        cluster_name: String,
        /// `brokerName`.
        broker_name: String,
        /// `appliedBrokerId`.
        broker_id: BrokerId,
        /// `registerCheckCode`: `brokerAddr;unixMillis`.
        register_check_code: String,
    },
    /// CONTROLLER_REGISTER_BROKER.
    RegisterBroker {
        /// `clusterName`.
        cluster_name: String,
        /// `brokerName`.
        broker_name: String,
        /// `brokerId`.
        broker_id: BrokerId,
        /// `brokerAddress`.
        broker_addr: String,
    },
    /// CONTROLLER_ELECT_MASTER, from a broker, an admin or the controller itself.
    ElectMaster {
        /// `brokerName`.
        broker_name: String,
        /// Who asks.
        trigger: ElectTrigger,
    },
    /// CONTROLLER_ALTER_SYNC_STATE_SET.
    AlterSyncStateSet {
        /// `brokerName`.
        broker_name: String,
        /// `masterBrokerId`: the proposer.
        master_broker_id: BrokerId,
        /// `masterEpoch`: the epoch the proposer holds.
        master_epoch: Epoch,
        /// The body: proposed members, with the epoch of the set they replace.
        proposal: SyncStateSet,
    },
    /// CONTROLLER_GET_REPLICA_INFO.
    GetReplicaInfo {
        /// `brokerName`.
        broker_name: String,
    },
    /// CONTROLLER_GET_SYNC_STATE_DATA: the body is a JSON list of broker names.
    GetSyncStateData {
        /// The broker sets asked about.
        broker_names: Vec<String>,
    },
    /// CLEAN_BROKER_DATA (Java's `CleanControllerBrokerDataRequestHeader`).
    CleanBrokerData {
        /// `clusterName`.
        cluster_name: String,
        /// `brokerName`.
        broker_name: String,
        /// `brokerControllerIdsToClean`: `id;id;...`, or none for the whole set.
        broker_ids_to_clean: Option<String>,
        /// `isCleanLivingBroker`: also remove members that are alive.
        clean_living_broker: bool,
    },
}

/// The master of a broker set as an answer names it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterInfo {
    /// `masterBrokerId`.
    pub broker_id: BrokerId,
    /// `masterAddress`.
    pub addr: String,
    /// `masterEpoch`.
    pub master_epoch: Epoch,
}

/// One member in a GET_SYNC_STATE_DATA answer (Java's `BrokerReplicasInfo.ReplicaIdentity`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReplicaIdentity {
    /// Controller id.
    pub broker_id: BrokerId,
    /// Address.
    pub addr: String,
    /// Whether its heartbeats are current.
    pub alive: bool,
}

/// One broker set in a GET_SYNC_STATE_DATA answer (Java's `BrokerReplicasInfo.ReplicasInfo`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BrokerSetSyncData {
    /// The master, if any.
    pub master_broker_id: Option<BrokerId>,
    /// Its address.
    pub master_addr: Option<String>,
    /// The master epoch.
    pub master_epoch: Epoch,
    /// The sync-state-set epoch.
    pub sync_state_set_epoch: Epoch,
    /// Members in the sync-state set.
    pub in_sync: Vec<ReplicaIdentity>,
    /// The other members.
    pub not_in_sync: Vec<ReplicaIdentity>,
}

/// A successful (or, for elections, informative) answer. It holds once the events returned
/// with it are applied.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Response {
    /// GET_NEXT_BROKER_ID.
    NextBrokerId {
        /// `nextBrokerId`.
        next_broker_id: BrokerId,
    },
    /// APPLY_BROKER_ID accepted.
    BrokerIdApplied,
    /// REGISTER_BROKER accepted.
    Registered {
        /// The master, when it is alive.
        master: Option<MasterInfo>,
        /// The sync-state set.
        sync_state_set: SyncStateSet,
    },
    /// GET_REPLICA_INFO.
    ReplicaInfo {
        /// The recorded master, alive or not.
        master_broker_id: Option<BrokerId>,
        /// Its address.
        master_addr: Option<String>,
        /// The master epoch (also without a master: a failed election counts one).
        master_epoch: Epoch,
        /// The sync-state set.
        sync_state_set: SyncStateSet,
    },
    /// ELECT_MASTER chose a new master (SUCCESS).
    Elected {
        /// The new master under the new epoch.
        master: MasterInfo,
        /// The new sync-state set: the master alone.
        sync_state_set: SyncStateSet,
        /// Every member and its address (`brokerMemberGroup`).
        members: BTreeMap<BrokerId, String>,
        /// The live members to send NOTIFY_BROKER_ROLE_CHANGED to, by id, with addresses.
        notify: BTreeMap<BrokerId, String>,
    },
    /// ELECT_MASTER kept the live master (CONTROLLER_MASTER_STILL_EXIST).
    MasterStillExists {
        /// The master.
        master: MasterInfo,
        /// The sync-state set.
        sync_state_set: SyncStateSet,
    },
    /// A controller-started election found no one: the old master is recorded as gone
    /// under a new epoch (CONTROLLER_MASTER_NOT_AVAILABLE).
    MasterGone {
        /// The new master epoch.
        master_epoch: Epoch,
    },
    /// ALTER_SYNC_STATE_SET accepted: the new set.
    SyncStateSetAltered(SyncStateSet),
    /// GET_SYNC_STATE_DATA: the known sets among those asked.
    SyncStateData(BTreeMap<String, BrokerSetSyncData>),
    /// CLEAN_BROKER_DATA accepted.
    BrokerDataCleaned,
}

impl Response {
    /// The response code Java answers with.
    pub fn code(&self) -> ResponseCode {
        match self {
            Response::MasterStillExists { .. } => ResponseCode::CONTROLLER_MASTER_STILL_EXIST,
            Response::MasterGone { .. } => ResponseCode::CONTROLLER_MASTER_NOT_AVAILABLE,
            _ => ResponseCode::SUCCESS,
        }
    }

    /// The remark Java answers with, when it sets one.
    pub fn remark(&self) -> Option<&'static str> {
        match self {
            Response::MasterGone { .. } => {
                Some("Old master has down and failed to elect a new broker master")
            }
            _ => None,
        }
    }
}

/// A request the controller refuses, with Java's response code and remark.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{remark} (response code {})", code.value())]
pub struct Refusal {
    /// The response code.
    pub code: ResponseCode,
    /// The remark.
    pub remark: String,
}

impl Refusal {
    pub(super) fn new(code: ResponseCode, remark: impl Into<String>) -> Refusal {
        Refusal {
            code,
            remark: remark.into(),
        }
    }
}

/// Members of a broker set as `id → address`.
pub(super) fn member_addrs(set: &super::BrokerSet) -> BTreeMap<BrokerId, String> {
    set.members
        .iter()
        .map(|(id, member)| (*id, member.addr.clone()))
        .collect()
}
