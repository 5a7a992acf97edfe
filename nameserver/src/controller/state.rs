//! The controller's replicated state and the deterministic application of events (Java's
//! `ReplicasInfoManager.applyEvent`, `BrokerReplicaInfo` and `SyncStateInfo`).

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::{BrokerId, ElectTrigger, Epoch, Event, HeartbeatTable, Request, FIRST_BROKER_ID};

/// Java's `SyncStateSet`: the members in sync with the master (the master included) and the
/// epoch of that set.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SyncStateSet {
    /// Controller ids of the members.
    pub members: BTreeSet<BrokerId>,
    /// The set's epoch: every accepted change adds one.
    pub epoch: Epoch,
}

/// One member of a broker set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its address, `ip:port`.
    pub addr: String,
    /// The check code it claimed its id with.
    pub register_check_code: String,
}

/// Everything the controller records about one broker set.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BrokerSet {
    /// `brokerClusterName`, from the first claim.
    pub cluster_name: String,
    /// The members by controller id.
    pub members: BTreeMap<BrokerId, Member>,
    /// The id GET_NEXT_BROKER_ID offers.
    pub next_broker_id: BrokerId,
    /// The master, if there is one.
    pub master: Option<BrokerId>,
    /// The master epoch: 0 until the first election, then one more per election (failed
    /// controller-started ones included).
    pub master_epoch: Epoch,
    /// The sync-state set.
    pub sync_state_set: SyncStateSet,
}

impl BrokerSet {
    fn new(cluster_name: String) -> BrokerSet {
        BrokerSet {
            cluster_name,
            members: BTreeMap::new(),
            next_broker_id: FIRST_BROKER_ID,
            master: None,
            master_epoch: 0,
            sync_state_set: SyncStateSet::default(),
        }
    }

    /// The address of a member.
    pub fn addr(&self, broker_id: BrokerId) -> Option<&str> {
        self.members
            .get(&broker_id)
            .map(|member| member.addr.as_str())
    }

    /// Whether no master was ever elected (the first election elects the asker).
    pub fn first_election(&self) -> bool {
        self.master_epoch == 0
    }
}

/// The controller's replicated state: every broker set by broker name (Java keys its tables
/// by broker name alone, and several requests carry nothing else).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControllerState {
    broker_sets: BTreeMap<String, BrokerSet>,
}

impl ControllerState {
    /// An empty state.
    pub fn new() -> ControllerState {
        ControllerState::default()
    }

    /// A broker set by name.
    pub fn broker_set(&self, broker_name: &str) -> Option<&BrokerSet> {
        self.broker_sets.get(broker_name)
    }

    /// Every broker set, by name.
    pub fn broker_sets(&self) -> impl Iterator<Item = (&str, &BrokerSet)> {
        self.broker_sets
            .iter()
            .map(|(name, set)| (name.as_str(), set))
    }

    /// The elections the controller must start itself at `now_ms`: one per broker set whose
    /// recorded master's heartbeats in `liveness` stopped (Java's `scanNeedReelectBrokerSets`
    /// and `onBrokerInactive`). Handling each either elects a live member of the sync-state
    /// set or records the master as gone under a new epoch, after which the set is not listed
    /// again until a new master is elected. Java's leader scans every
    /// `scanInactiveMasterInterval` (5 s).
    pub fn expired(&self, liveness: &HeartbeatTable, now_ms: u64) -> Vec<Request> {
        self.broker_sets
            .iter()
            .filter(|(name, set)| {
                set.master.is_some_and(|master| {
                    !liveness.is_alive(&set.cluster_name, name, master, now_ms)
                })
            })
            .map(|(name, _)| Request::ElectMaster {
                broker_name: name.clone(),
                trigger: ElectTrigger::Controller,
            })
            .collect()
    }

    /// Applies one event and says whether it changed anything. An event whose recorded
    /// epochs, master or members no longer hold is skipped: it was checked against a state
    /// that another event has since replaced, and applying it would undo the fencing.
    pub fn apply(&mut self, event: &Event) -> bool {
        match event {
            Event::ApplyBrokerId {
                cluster_name,
                broker_name,
                broker_id,
                broker_addr,
                register_check_code,
            } => {
                let set = self
                    .broker_sets
                    .entry(broker_name.clone())
                    .or_insert_with(|| BrokerSet::new(cluster_name.clone()));
                if set.members.contains_key(broker_id) {
                    return false;
                }
                set.members.insert(
                    *broker_id,
                    Member {
                        addr: broker_addr.clone(),
                        register_check_code: register_check_code.clone(),
                    },
                );
                // Java adds one per claim whatever id was claimed; past the claimed id keeps a
                // later GET_NEXT_BROKER_ID from offering an id already held.
                set.next_broker_id = set.next_broker_id.max(broker_id.saturating_add(1));
                true
            }
            Event::UpdateBrokerAddress {
                broker_name,
                broker_id,
                broker_addr,
            } => match self
                .broker_sets
                .get_mut(broker_name)
                .and_then(|set| set.members.get_mut(broker_id))
            {
                Some(member) if member.addr != *broker_addr => {
                    member.addr = broker_addr.clone();
                    true
                }
                _ => false,
            },
            Event::ElectMaster {
                broker_name,
                new_master,
                master_epoch,
                checked_sync_state_set_epoch,
            } => {
                let Some(set) = self.broker_sets.get_mut(broker_name) else {
                    return false;
                };
                if set.master_epoch.checked_add(1) != Some(*master_epoch)
                    || set.sync_state_set.epoch != *checked_sync_state_set_epoch
                {
                    return false;
                }
                match new_master {
                    Some(id) if set.members.contains_key(id) => {
                        let Some(sync_state_set_epoch) = set.sync_state_set.epoch.checked_add(1)
                        else {
                            return false;
                        };
                        set.master = Some(*id);
                        set.master_epoch = *master_epoch;
                        set.sync_state_set = SyncStateSet {
                            members: BTreeSet::from([*id]),
                            epoch: sync_state_set_epoch,
                        };
                        true
                    }
                    Some(_) => false,
                    None => {
                        // The set is kept: its members are the only ones a clean election may
                        // pick once one of them returns.
                        set.master = None;
                        set.master_epoch = *master_epoch;
                        true
                    }
                }
            }
            Event::AlterSyncStateSet {
                broker_name,
                master_broker_id,
                master_epoch,
                sync_state_set_epoch,
                members,
            } => {
                let Some(set) = self.broker_sets.get_mut(broker_name) else {
                    return false;
                };
                let current = set.master == Some(*master_broker_id)
                    && set.master_epoch == *master_epoch
                    && set.sync_state_set.epoch.checked_add(1) == Some(*sync_state_set_epoch)
                    && members.contains(master_broker_id)
                    && members.iter().all(|id| set.members.contains_key(id));
                if !current {
                    return false;
                }
                set.sync_state_set = SyncStateSet {
                    members: members.clone(),
                    epoch: *sync_state_set_epoch,
                };
                true
            }
            Event::CleanBrokerData {
                broker_name,
                broker_ids,
            } => {
                let Some(ids) = broker_ids.as_ref().filter(|ids| !ids.is_empty()) else {
                    return self.broker_sets.remove(broker_name).is_some();
                };
                let Some(set) = self.broker_sets.get_mut(broker_name) else {
                    return false;
                };
                let mut changed = false;
                let mut shrunk = false;
                for id in ids {
                    changed |= set.members.remove(id).is_some();
                    shrunk |= set.sync_state_set.members.remove(id);
                }
                if shrunk {
                    // Java keeps the epoch; a new one fences proposals made against the old set.
                    set.sync_state_set.epoch = set.sync_state_set.epoch.saturating_add(1);
                    changed = true;
                }
                if set.master.is_some_and(|master| ids.contains(&master)) {
                    // Unlike Java, which keeps naming a removed master: without a master and
                    // under a new epoch, the remaining members ask for an election.
                    set.master = None;
                    set.master_epoch = set.master_epoch.saturating_add(1);
                }
                if set.members.is_empty() {
                    self.broker_sets.remove(broker_name);
                }
                changed
            }
        }
    }
}
