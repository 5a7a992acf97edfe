//! Controller-mode headers (docs/protocol.md#controller-protocol): what a broker sends to
//! the RocketMQ 5 controller (broker identity, replica info, elections, sync-state-set
//! changes) and what the controller sends back or pushes (NOTIFY_BROKER_ROLE_CHANGED).
//!
//! The liveness request of controller mode, BROKER_HEARTBEAT, shares its header with the
//! name server's: [`super::BrokerHeartbeatRequestHeader`].
//!
//! Java declares most of these fields as boxed types, which it omits when null, so they are
//! `Option` here unless Java declares a primitive or marks the field `@CFNotNull`. The
//! `invokeTime` fields Java stamps on some requests are informational (the controller only
//! logs them) and optional.

use super::command_header;

command_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012) request: which controller id the next new member
    /// of a broker set would get (Java's `GetNextBrokerIdRequestHeader`).
    pub struct GetNextBrokerIdRequestHeader {
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Logical broker name (the broker set).
        broker_name: String => "brokerName",
    }
}

command_header! {
    /// CONTROLLER_GET_NEXT_BROKER_ID (1012) response.
    pub struct GetNextBrokerIdResponseHeader {
        /// Cluster name, echoed.
        cluster_name: Option<String> => "clusterName",
        /// Logical broker name, echoed.
        broker_name: Option<String> => "brokerName",
        /// The id to apply for: 1 for a broker set the controller has never seen.
        next_broker_id: Option<i64> => "nextBrokerId",
    }
}

command_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013) request: claims a controller id for this broker
    /// (Java's `ApplyBrokerIdRequestHeader`).
    pub struct ApplyBrokerIdRequestHeader {
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// The id claimed.
        applied_broker_id: i64 => "appliedBrokerId",
        /// `brokerAddr;unixMillis`: the controller keeps it with the id and takes the address
        /// before the `;` as the broker's; a second apply with the same code is accepted.
        register_check_code: String => "registerCheckCode",
    }
}

command_header! {
    /// CONTROLLER_APPLY_BROKER_ID (1013) response.
    pub struct ApplyBrokerIdResponseHeader {
        /// Cluster name, echoed.
        cluster_name: Option<String> => "clusterName",
        /// Logical broker name, echoed.
        broker_name: Option<String> => "brokerName",
    }
}

command_header! {
    /// CONTROLLER_REGISTER_BROKER (1003) request: a broker with a confirmed id announces its
    /// address (Java's `RegisterBrokerToControllerRequestHeader`).
    pub struct RegisterBrokerToControllerRequestHeader {
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// The broker's confirmed controller id.
        broker_id: i64 => "brokerId",
        /// The broker's address, `ip:port`.
        broker_address: String => "brokerAddress",
        /// When the broker sent it, Unix ms (informational).
        invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_REGISTER_BROKER (1003) response; the body is a [`crate::body::SyncStateSet`].
    /// The master fields are set only when the set has a live master.
    pub struct RegisterBrokerToControllerResponseHeader {
        /// Cluster name, echoed.
        cluster_name: Option<String> => "clusterName",
        /// Logical broker name, echoed.
        broker_name: Option<String> => "brokerName",
        /// The master's controller id.
        master_broker_id: Option<i64> => "masterBrokerId",
        /// The master's address.
        master_address: Option<String> => "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> => "masterEpoch",
        /// The sync-state-set epoch.
        sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004) request.
    pub struct GetReplicaInfoRequestHeader {
        /// Logical broker name.
        broker_name: String => "brokerName",
    }
}

command_header! {
    /// CONTROLLER_GET_REPLICA_INFO (1004) response; the body is a
    /// [`crate::body::SyncStateSet`]. A set whose master is gone has no master id or address
    /// but still an epoch (a failed election counts one).
    pub struct GetReplicaInfoResponseHeader {
        /// The master's controller id.
        master_broker_id: Option<i64> => "masterBrokerId",
        /// The master's address.
        master_address: Option<String> => "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> => "masterEpoch",
    }
}

command_header! {
    /// CONTROLLER_ELECT_MASTER (1002) request (Java's `ElectMasterRequestHeader`). A broker
    /// asks with its own id: on the set's first election that id wins; later the controller's
    /// policy picks among live members of the sync-state set. `designateElect` (an admin's
    /// request) makes the id the preferred winner.
    pub struct ElectMasterRequestHeader {
        /// Cluster name.
        cluster_name: String => "clusterName",
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// The asking broker's controller id (-1 when the controller itself triggers it).
        broker_id: i64 => "brokerId",
        /// True when an admin designates `brokerId` as the new master.
        designate_elect: bool => "designateElect",
        /// When it was sent, Unix ms (informational).
        invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_ELECT_MASTER (1002) response, on SUCCESS (a new master) and on
    /// CONTROLLER_MASTER_STILL_EXIST (the current master stays); the body is an
    /// [`crate::body::ElectMasterResponseBody`].
    pub struct ElectMasterResponseHeader {
        /// The master's controller id.
        master_broker_id: Option<i64> => "masterBrokerId",
        /// The master's address.
        master_address: Option<String> => "masterAddress",
        /// The master epoch.
        master_epoch: Option<i32> => "masterEpoch",
        /// The sync-state-set epoch.
        sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) request: the master proposes a new in-sync set;
    /// the body is a [`crate::body::SyncStateSet`] holding the proposed members and the epoch
    /// of the set it replaces.
    pub struct AlterSyncStateSetRequestHeader {
        /// Logical broker name.
        broker_name: String => "brokerName",
        /// The proposing master's controller id.
        master_broker_id: i64 => "masterBrokerId",
        /// The master epoch the proposer holds.
        master_epoch: i32 => "masterEpoch",
        /// When it was sent, Unix ms (informational).
        invoke_time: Option<i64> => "invokeTime",
    }
}

command_header! {
    /// CONTROLLER_ALTER_SYNC_STATE_SET (1001) response; the body is the new
    /// [`crate::body::SyncStateSet`].
    pub struct AlterSyncStateSetResponseHeader {
        /// The epoch of the accepted set.
        new_sync_state_set_epoch: i32 => "newSyncStateSetEpoch",
    }
}

command_header! {
    /// CONTROLLER_GET_METADATA_INFO (1005) response (the request has no header): who leads
    /// the controller group. Brokers send every other controller request to the leader.
    pub struct GetMetaDataResponseHeader {
        /// The controller group name.
        group: Option<String> => "group",
        /// The leader's member id (`n0`).
        controller_leader_id: Option<String> => "controllerLeaderId",
        /// The leader's address, `ip:port`; absent or empty while no leader is known.
        controller_leader_address: Option<String> => "controllerLeaderAddress",
        /// True when the answering controller is the leader (Java's field is `isLeader`).
        is_leader: bool => "isLeader",
        /// `id:ip:port;` for every member.
        peers: Option<String> => "peers",
    }
}

command_header! {
    /// NOTIFY_BROKER_ROLE_CHANGED (1008) request, controller to broker, one way: the outcome
    /// of an election. The body is a [`crate::body::SyncStateSet`].
    pub struct NotifyBrokerRoleChangedRequestHeader {
        /// The new master's address.
        master_address: Option<String> => "masterAddress",
        /// The new master epoch.
        master_epoch: Option<i32> => "masterEpoch",
        /// The sync-state-set epoch.
        sync_state_set_epoch: Option<i32> => "syncStateSetEpoch",
        /// The new master's controller id.
        master_broker_id: Option<i64> => "masterBrokerId",
    }
}
