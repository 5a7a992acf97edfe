//! Randomised simulation of three real broker sessions (comet-replication's controller
//! module) against this crate's controller state machine: every request is checked by
//! `ControllerState::handle` and its events are applied at once, as a single-node log
//! would. Faults: controller leader switches (two controllers share the replicated state;
//! each keeps its own heartbeat table, as brokers heartbeat to every controller), answers
//! lost after the controller applied the request, brokers dying and returning, heartbeats
//! lost for a while, role notifications delivered late, twice or out of order, and changing
//! in-sync flags. The brokers' side, its faults and the brokers' invariants are
//! comet-test-support's `controller_sim`. Checked after every step: a broker's master epoch
//! never goes down, no two brokers are master under one epoch, a broker is master under an
//! epoch only if the controller elected it under that epoch, and the controller's master is
//! always in its sync-state set with epochs that never go down. Once the faults stop, all
//! three converge on the controller's master, and replaying the event log rebuilds the same
//! state.

use std::collections::BTreeSet;

use comet_nameserver::controller::{
    ControllerConfig, ControllerState, ElectTrigger, Event, Heartbeat, HeartbeatTable,
    Request as ControllerRequest, Response,
};
use comet_replication::controller::{
    BrokerControllerId, ControllerEpoch, Heartbeat as BrokerHeartbeat, MasterView, Reply, Request,
    SyncStateSet,
};
use comet_test_support::controller_sim::{
    Controller, Fault, LostAnswer, Settings, Sim, BROKERS, BROKER_NAME, CLUSTER, CONTROLLERS,
};
use proptest::prelude::*;

/// The brokers report the heartbeat timeout the heartbeat tables expire them by; the real
/// controller acts on a request whose answer is lost, and must let the sessions go quiet.
const SETTINGS: Settings = Settings {
    heartbeat_timeout_ms: 3_000,
    kill_and_restart_weight: 2,
    lost_answer: LostAnswer::AfterTheController,
    must_go_quiet: true,
};

/// The controller group: one replicated state, a heartbeat table per controller.
struct Controllers {
    config: ControllerConfig,
    state: ControllerState,
    heartbeats: [HeartbeatTable; 2],
    /// Every event applied, in order: what a Raft log would hold.
    log: Vec<Event>,
    /// (epoch, master) of every applied election.
    elected: BTreeSet<(i32, i64)>,
    /// Every NOTIFY_BROKER_ROLE_CHANGED sent, with its recipients; the network may deliver
    /// any of them late, again, or out of order.
    notices: Vec<(MasterView, BTreeSet<String>)>,
    highest_master_epoch: i32,
}

impl Controllers {
    fn new(config: ControllerConfig) -> Controllers {
        Controllers {
            config,
            state: ControllerState::new(),
            heartbeats: [HeartbeatTable::new(), HeartbeatTable::new()],
            log: Vec::new(),
            elected: BTreeSet::new(),
            notices: Vec::new(),
            highest_master_epoch: 0,
        }
    }

    /// Checks and applies a request on the leader, which judges liveness by its own
    /// heartbeat table.
    fn run(
        &mut self,
        leader: usize,
        request: &ControllerRequest,
        now_ms: u64,
    ) -> Result<Response, Reply> {
        let handled = self
            .state
            .handle(request, &self.config, &self.heartbeats[leader], now_ms);
        let (events, response) = handled.map_err(|refusal| Reply::Refused {
            code: refusal.code.value(),
            remark: Some(refusal.remark),
        })?;
        for event in events {
            if let Event::ElectMaster {
                new_master: Some(id),
                ..
            } = &event
            {
                self.check_candidate(*id);
            }
            if self.state.apply(&event) {
                if let Event::ElectMaster {
                    new_master: Some(id),
                    master_epoch,
                    ..
                } = &event
                {
                    assert!(
                        self.elected.insert((*master_epoch, *id)),
                        "a second election under epoch {master_epoch}"
                    );
                }
            }
            self.log.push(event);
        }
        if let Response::Elected {
            master,
            sync_state_set,
            notify,
            ..
        } = &response
        {
            let view = MasterView {
                master_broker_id: Some(master.broker_id),
                master_addr: Some(master.addr.clone()),
                master_epoch: Some(master.master_epoch),
                sync_state_set: SyncStateSet {
                    members: sync_state_set.members.clone(),
                    epoch: sync_state_set.epoch,
                },
            };
            self.notices
                .push((view, notify.values().cloned().collect()));
        }
        self.check();
        Ok(response)
    }

    /// Without unclean elections a new master comes from the sync-state set (or is the
    /// first master of the set).
    fn check_candidate(&self, id: i64) {
        let set = self
            .state
            .broker_set(BROKER_NAME)
            .expect("an election needs the set");
        assert!(
            self.config.enable_elect_unclean_master
                || set.master_epoch == 0
                || set.sync_state_set.members.contains(&id),
            "broker {id} elected from outside the sync-state set {:?}",
            set.sync_state_set
        );
    }

    fn check(&mut self) {
        let set = self.state.broker_set(BROKER_NAME);
        if let Some(set) = set {
            assert!(
                set.master_epoch >= self.highest_master_epoch,
                "the controller's master epoch went down"
            );
            self.highest_master_epoch = set.master_epoch;
            if let Some(master) = set.master {
                assert!(
                    set.sync_state_set.members.contains(&master),
                    "master {master} outside its sync-state set"
                );
            }
        }
    }
}

fn sync_set(set: comet_nameserver::controller::SyncStateSet) -> SyncStateSet {
    SyncStateSet {
        members: set.members,
        epoch: set.epoch,
    }
}

/// The answer as the broker's runtime decodes it.
fn to_reply(response: Response) -> Reply {
    match response {
        Response::NextBrokerId { next_broker_id } => Reply::NextBrokerId {
            next_broker_id: Some(next_broker_id),
        },
        Response::BrokerIdApplied => Reply::BrokerIdApplied,
        Response::Registered {
            master,
            sync_state_set,
        } => Reply::Registered(MasterView {
            master_broker_id: master.as_ref().map(|m| m.broker_id),
            master_addr: master.as_ref().map(|m| m.addr.clone()),
            master_epoch: master.as_ref().map(|m| m.master_epoch),
            sync_state_set: sync_set(sync_state_set),
        }),
        Response::ReplicaInfo {
            master_broker_id,
            master_addr,
            master_epoch,
            sync_state_set,
        } => Reply::ReplicaInfo(MasterView {
            master_broker_id,
            master_addr,
            master_epoch: Some(master_epoch),
            sync_state_set: sync_set(sync_state_set),
        }),
        Response::Elected {
            master,
            sync_state_set,
            ..
        }
        | Response::MasterStillExists {
            master,
            sync_state_set,
        } => Reply::Elected(MasterView {
            master_broker_id: Some(master.broker_id),
            master_addr: Some(master.addr),
            master_epoch: Some(master.master_epoch),
            sync_state_set: sync_set(sync_state_set),
        }),
        Response::SyncStateSetAltered(set) => Reply::SyncStateSetAltered(sync_set(set)),
        other => panic!("no broker request is answered with {other:?}"),
    }
}

impl Controller for Controllers {
    fn answer(
        &mut self,
        leader: usize,
        request: &Request,
        broker_addr: &str,
        now_ms: u64,
    ) -> Reply {
        let translated = match request {
            Request::GetMetadata | Request::Heartbeat(_) => {
                unreachable!("answered elsewhere")
            }
            Request::GetNextBrokerId => ControllerRequest::GetNextBrokerId {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
            },
            Request::ApplyBrokerId {
                broker_id,
                register_check_code,
            } => ControllerRequest::ApplyBrokerId {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
                broker_id: *broker_id,
                register_check_code: register_check_code.clone(),
            },
            Request::RegisterBroker { broker_id } => ControllerRequest::RegisterBroker {
                cluster_name: CLUSTER.to_owned(),
                broker_name: BROKER_NAME.to_owned(),
                broker_id: *broker_id,
                broker_addr: broker_addr.to_owned(),
            },
            Request::GetReplicaInfo => ControllerRequest::GetReplicaInfo {
                broker_name: BROKER_NAME.to_owned(),
            },
            Request::ElectMaster { broker_id } => ControllerRequest::ElectMaster {
                broker_name: BROKER_NAME.to_owned(),
                trigger: ElectTrigger::Broker(*broker_id),
            },
            Request::AlterSyncStateSet {
                master_broker_id,
                master_epoch,
                proposal,
            } => ControllerRequest::AlterSyncStateSet {
                broker_name: BROKER_NAME.to_owned(),
                master_broker_id: *master_broker_id,
                master_epoch: *master_epoch,
                proposal: comet_nameserver::controller::SyncStateSet {
                    members: proposal.members.clone(),
                    epoch: proposal.epoch,
                },
            },
        };
        match self.run(leader, &translated, now_ms) {
            Err(reply) => reply,
            Ok(response) => to_reply(response),
        }
    }

    /// Only controller `to` learns of the heartbeat.
    fn heartbeat(&mut self, to: &str, broker_addr: &str, beat: &BrokerHeartbeat, now_ms: u64) {
        let index = CONTROLLERS
            .iter()
            .position(|addr| *addr == to)
            .expect("a known controller");
        let heartbeat = Heartbeat {
            cluster_name: CLUSTER.to_owned(),
            broker_name: BROKER_NAME.to_owned(),
            broker_addr: broker_addr.to_owned(),
            broker_id: beat.broker_id,
            epoch: Some(beat.epoch),
            max_offset: Some(beat.max_offset),
            confirm_offset: Some(beat.confirm_offset),
            heartbeat_timeout_ms: Some(beat.timeout_ms),
            election_priority: Some(beat.election_priority),
        };
        self.heartbeats[index].on_heartbeat(&heartbeat, now_ms);
    }

    /// The leader's own scan: a master without heartbeats is replaced.
    fn scan(&mut self, leader: usize, now_ms: u64) {
        let expired = self.state.expired(&self.heartbeats[leader], now_ms);
        for request in expired {
            let response = self.run(leader, &request, now_ms);
            assert!(
                matches!(
                    response,
                    Ok(Response::Elected { .. } | Response::MasterGone { .. })
                ),
                "a controller-started election answered {response:?}"
            );
        }
    }

    fn elected(&self) -> &BTreeSet<(ControllerEpoch, BrokerControllerId)> {
        &self.elected
    }

    /// A notice reaches only the brokers it was sent to.
    fn notice(&self, pick: usize, broker_addr: &str) -> Option<MasterView> {
        if self.notices.is_empty() {
            return None;
        }
        let (view, recipients) = &self.notices[pick % self.notices.len()];
        recipients.contains(broker_addr).then(|| view.clone())
    }
}

fn simulate(faults: Vec<Fault>, config: ControllerConfig) -> Result<(), TestCaseError> {
    let mut sim = Sim::new(Controllers::new(config), SETTINGS);
    sim.run_and_heal(faults);
    let set = sim
        .controller
        .state
        .broker_set(BROKER_NAME)
        .expect("the broker set is known");
    let epoch = set.master_epoch;
    let master_id = set.master.expect("a master after healing");
    let master_addr = set
        .addr(master_id)
        .expect("the master's address")
        .to_owned();
    prop_assert_eq!(
        set.sync_state_set.members.len(),
        BROKERS,
        "all back in sync"
    );
    sim.check_converged(master_id, &master_addr, epoch)?;
    let mut replayed = ControllerState::new();
    for event in &sim.controller.log {
        replayed.apply(event);
    }
    prop_assert_eq!(
        &replayed,
        &sim.controller.state,
        "the log rebuilds the state"
    );
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    // The invariants of the file docs under random faults, and convergence after.
    #[test]
    fn sessions_agree_with_the_controller(
        faults in prop::collection::vec(SETTINGS.fault(), 1..80),
    ) {
        simulate(faults, ControllerConfig::default())?;
    }

    // The same with unclean elections allowed: they may lose data, never split the brain.
    #[test]
    fn sessions_agree_with_an_unclean_controller(
        faults in prop::collection::vec(SETTINGS.fault(), 1..80),
    ) {
        simulate(faults, ControllerConfig { enable_elect_unclean_master: true })?;
    }
}
