//! Comet's controller for RocketMQ 5 controller mode, as a sans-I/O state machine
//! (docs/protocol.md#controller-protocol describes the wire side, docs/architecture.md#controller
//! what is built).
//!
//! A broker in controller mode does not choose its role: the controller records, per broker
//! set (cluster, broker name), the members and their addresses, the master and its master
//! epoch, and the sync-state set (the members in sync with the master) and its epoch. It is
//! built as Java's controller is, in two layers, so that a Raft log can later replicate the
//! second one:
//!
//! 1. [`ControllerState::handle`] checks a [`Request`] against the state (and, for liveness,
//!    a [`HeartbeatTable`]) and answers with zero or more [`Event`]s and a [`Response`], or a
//!    [`Refusal`] carrying Java's response code and remark. It changes nothing.
//! 2. [`ControllerState::apply`] applies one event. It is deterministic and cannot fail: it
//!    reads no clock and no liveness, so every replica applying the same log reaches the same
//!    state. Events are serde-serialisable for that log.
//!
//! Events carry the epochs they were checked under and are skipped when those no longer hold
//! (an election checked against master epoch 4 applies only while the epoch is still 4), so
//! two requests checked against the same state before either is applied cannot both take
//! effect: master epochs and sync-state-set epochs only ever go up by one per applied change.
//!
//! Liveness is the leader's alone, as with Java's `DefaultBrokerHeartbeatManager`: BROKER_HEARTBEAT
//! feeds the [`HeartbeatTable`] (last time, timeout, log epoch, max offset, election
//! priority), which is not replicated. [`ControllerNode`] ties state, table and
//! [`ControllerConfig`] together: [`ControllerNode::expired`] lists the elections the controller
//! must start itself because a master's heartbeats stopped, and an election's
//! [`Response::Elected`] names the brokers to send NOTIFY_BROKER_ROLE_CHANGED to.
//!
//! The rules refuse what caused Apache RocketMQ's controller-mode losses where the controller
//! is responsible: a new master comes only from the live members of the sync-state set unless
//! `enableElectUncleanMaster` is on (an admin's designated election included); a sync-state
//! set changes only at the request of the current master under the current master epoch and
//! sync-state-set epoch, and always keeps that master.

mod elect;
mod event;
mod handle;
mod liveness;
mod node;
pub mod raft_store;
pub mod replica;
mod request;
pub mod service;
mod state;
mod wire;

pub use event::Event;
pub use handle::Handled;
pub use liveness::{BrokerLive, Heartbeat, HeartbeatTable, HEARTBEAT_TIMEOUT_MS_DEFAULT};
pub use node::ControllerNode;
pub use request::{
    BrokerSetSyncData, ElectTrigger, MasterInfo, Refusal, ReplicaIdentity, Request, Response,
};
pub use state::{BrokerSet, ControllerState, Member, SyncStateSet};

/// A broker's controller id (Java's `Long brokerId`; the first member of a set gets 1).
pub type BrokerId = i64;

/// A master epoch or sync-state-set epoch (Java `int`s; both start at 0).
pub type Epoch = i32;

/// The id the first member of a new broker set gets (Java's `FIRST_BROKER_CONTROLLER_ID`).
pub const FIRST_BROKER_ID: BrokerId = 1;

/// The controller's settings that change its decisions (Java's `ControllerConfig` keys).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControllerConfig {
    /// `enableElectUncleanMaster`: when no live member of the sync-state set can take over,
    /// elect any live member, accepting that acknowledged messages may be lost.
    pub enable_elect_unclean_master: bool,
}

impl Default for ControllerConfig {
    /// Java's defaults.
    fn default() -> ControllerConfig {
        ControllerConfig {
            enable_elect_unclean_master: false,
        }
    }
}

#[cfg(test)]
mod tests;
