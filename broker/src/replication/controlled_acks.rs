//! Controller mode on a master shard: keeps the log's view of what the sync-state set asks
//! of a write (`ControlledAcks`) in step with the controller driver, and decides which
//! slaves to report in sync on this log, joiners included (comet_replication's `ack_set`,
//! docs/architecture.md#failover).

use std::collections::BTreeMap;

use comet_replication::ack_set::{Joining, SlaveView};
use comet_replication::controller::{AckRequirement, BrokerControllerId};
use comet_replication::sync_wait::in_sync;

use crate::controller_role::ControllerRole;
use crate::replication_state::ControlledAcks;
use crate::shard::ShardBroker;

/// How far behind the master's durable end a slave may be when it starts joining: writes
/// wait for it from then on, so this bounds their stall to the slave's catching up on this
/// much (with `haMaxGapNotInSync` as the ceiling).
pub const JOIN_LAG_MAX_BYTES: u64 = 4 * 1024 * 1024;

/// Takes the driver's latest requirement if it changed, and answers the sends it frees.
pub fn refresh(broker: &ShardBroker, role: &ControllerRole) {
    let (generation, requirement) = role.ack_requirement();
    let own = role.broker_id();
    let state = &broker.replication;
    let changed = {
        let mut controlled = state.controlled.borrow_mut();
        match controlled.as_mut() {
            Some(current) if current.generation == generation && current.own == own => false,
            Some(current) => {
                current.generation = generation;
                current.requirement = requirement;
                current.own = own;
                true
            }
            None => {
                *controlled = Some(ControlledAcks {
                    generation,
                    requirement,
                    own,
                    joining: Joining::new(),
                });
                true
            }
        }
    };
    if changed {
        state.on_progress(0);
    }
}

/// One look at every slave of this log: refreshes the requirement, moves joiners along,
/// answers the sends now held as required, and returns per slave whether it is in sync
/// on this log (what the driver proposes the sync-state set from).
pub fn review(broker: &ShardBroker, role: &ControllerRole) -> BTreeMap<BrokerControllerId, bool> {
    // The pass count first, then the requirement (see `ack_set`'s WITHDRAWN_PASSES).
    let driver_pass = role.driver_passes();
    refresh(broker, role);
    let state = &broker.replication;
    let gap = broker.config().ha_max_gap_not_in_sync_bytes;
    let written = broker.store().written_position();
    let master_durable = broker.store().durable_position();
    let durables = state.slave_durables();
    let reports = {
        let mut controlled = state.controlled.borrow_mut();
        let controlled = controlled
            .as_mut()
            .expect("refresh set the controlled acks");
        match &controlled.requirement {
            AckRequirement::AllOf(members) => {
                let views = durables
                    .iter()
                    .map(|(slave, durable)| {
                        let view = SlaveView {
                            durable: *durable,
                            gap_in_sync: in_sync(written, Some(*durable), gap),
                            member: members.contains(slave),
                        };
                        (*slave, view)
                    })
                    .collect();
                controlled.joining.review(
                    master_durable,
                    &views,
                    JOIN_LAG_MAX_BYTES.min(gap),
                    driver_pass,
                )
            }
            // Without allAckInSyncStateSet (or while not master) the set promises nothing
            // about which slave holds what: Java's gap rule alone.
            _ => {
                controlled.joining = Joining::new();
                durables
                    .iter()
                    .map(|(slave, durable)| (*slave, in_sync(written, Some(*durable), gap)))
                    .collect()
            }
        }
    };
    state.on_progress(0);
    reports
}
