//! The events a checked request turns into: what the controller's log carries and
//! [`super::ControllerState::apply`] applies (Java's `ApplyBrokerIdEvent`,
//! `UpdateBrokerAddressEvent`, `ElectMasterEvent`, `AlterSyncStateSetEvent` and
//! `CleanBrokerDataEvent`).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::{BrokerId, Epoch};

/// One change to the controller's state. Each carries the epochs it was checked under, and
/// applying it is skipped when they no longer hold.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Event {
    /// A broker claimed a controller id; the broker set is created with its first member.
    ApplyBrokerId {
        /// `brokerClusterName`.
        cluster_name: String,
        /// The broker set.
        broker_name: String,
        /// The id claimed.
        broker_id: BrokerId,
        /// The broker's address (the part of the check code before `;`).
        broker_addr: String,
        /// `brokerAddr;unixMillis`: a second claim with the same code is the same broker.
        register_check_code: String,
    },
    /// A registered member announced a new address.
    UpdateBrokerAddress {
        /// The broker set.
        broker_name: String,
        /// The member.
        broker_id: BrokerId,
        /// Its new address.
        broker_addr: String,
    },
    /// An election ended: `new_master` under `master_epoch`, or, when `new_master` is
    /// `None`, the old master is gone and nobody could replace it (the epoch still moves on,
    /// so brokers see that the master they knew is no longer master).
    ElectMaster {
        /// The broker set.
        broker_name: String,
        /// The elected member, if any.
        new_master: Option<BrokerId>,
        /// The new master epoch: applies only when it is one above the current one.
        master_epoch: Epoch,
        /// The sync-state-set epoch the candidates were taken from: applies only while it is
        /// still current.
        checked_sync_state_set_epoch: Epoch,
    },
    /// The master's proposed sync-state set was accepted.
    AlterSyncStateSet {
        /// The broker set.
        broker_name: String,
        /// The proposing master: applies only while it is master.
        master_broker_id: BrokerId,
        /// Its master epoch: applies only while it is current.
        master_epoch: Epoch,
        /// The new set's epoch: applies only when it is one above the current one.
        sync_state_set_epoch: Epoch,
        /// The new members.
        members: BTreeSet<BrokerId>,
    },
    /// An admin removed members (or, with `broker_ids` `None`, the whole broker set).
    CleanBrokerData {
        /// The broker set.
        broker_name: String,
        /// The members to remove; `None` removes the set.
        broker_ids: Option<BTreeSet<BrokerId>>,
    },
}

impl Event {
    /// The broker set the event changes.
    pub fn broker_name(&self) -> &str {
        match self {
            Event::ApplyBrokerId { broker_name, .. }
            | Event::UpdateBrokerAddress { broker_name, .. }
            | Event::ElectMaster { broker_name, .. }
            | Event::AlterSyncStateSet { broker_name, .. }
            | Event::CleanBrokerData { broker_name, .. } => broker_name,
        }
    }
}
