//! Controller-mode bodies (docs/protocol.md#controller-protocol): the sync-state set that
//! travels with replica info, registration, sync-state-set changes and role notifications,
//! and the election result.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::json_bodies;
use super::BrokerMemberGroup;
use crate::json::lenient;

/// Java's `SyncStateSet`: the controller ids of the members in sync with the master (the
/// master included), and the epoch of that set. Body of the CONTROLLER_GET_REPLICA_INFO,
/// CONTROLLER_REGISTER_BROKER and CONTROLLER_ALTER_SYNC_STATE_SET responses, of the
/// CONTROLLER_ALTER_SYNC_STATE_SET request (the proposal, with the epoch it replaces) and of
/// NOTIFY_BROKER_ROLE_CHANGED.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct SyncStateSet {
    /// Controller ids of the in-sync members.
    #[serde(rename = "syncStateSet", deserialize_with = "lenient::or_default")]
    pub sync_state_set: BTreeSet<i64>,
    /// The set's epoch: each accepted change adds one.
    #[serde(rename = "syncStateSetEpoch", deserialize_with = "lenient::i32")]
    pub sync_state_set_epoch: i32,
}

/// Java's `ElectMasterResponseBody`: body of the CONTROLLER_ELECT_MASTER response.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct ElectMasterResponseBody {
    /// Every member of the broker set and its address; set when a new master was elected.
    #[serde(rename = "brokerMemberGroup", skip_serializing_if = "Option::is_none")]
    pub broker_member_group: Option<BrokerMemberGroup>,
    /// The sync-state set after the election (the new master alone after a change).
    #[serde(rename = "syncStateSet", deserialize_with = "lenient::or_default")]
    pub sync_state_set: BTreeSet<i64>,
}

json_bodies!(SyncStateSet, ElectMasterResponseBody);
