//! Checking a request against the state (Java's `ReplicasInfoManager` request methods): the
//! answer, the events that make it true, or Java's refusal.

use std::collections::BTreeSet;

use comet_proto::code::ResponseCode;

use super::request::member_addrs;
use super::{
    elect, BrokerId, BrokerSet, BrokerSetSyncData, ControllerConfig, ControllerState, ElectTrigger,
    Epoch, Event, HeartbeatTable, MasterInfo, Refusal, ReplicaIdentity, Request, Response,
    SyncStateSet, FIRST_BROKER_ID,
};

/// What a checked request comes to.
pub type Handled = Result<(Vec<Event>, Response), Refusal>;

/// What a request is checked with besides the state.
struct Context<'a> {
    config: &'a ControllerConfig,
    liveness: &'a HeartbeatTable,
    now_ms: u64,
}

impl Context<'_> {
    fn alive(&self, broker_name: &str, set: &BrokerSet, broker_id: BrokerId) -> bool {
        self.liveness
            .is_alive(&set.cluster_name, broker_name, broker_id, self.now_ms)
    }
}

impl ControllerState {
    /// Checks `request` against the state, with `liveness` at `now_ms` for whoever must be
    /// alive, and says what to answer and which events make that answer true. Changes
    /// nothing: the caller applies the events ([`ControllerState::apply`]) before it sends
    /// the answer or the notifications it names.
    pub fn handle(
        &self,
        request: &Request,
        config: &ControllerConfig,
        liveness: &HeartbeatTable,
        now_ms: u64,
    ) -> Handled {
        let context = Context {
            config,
            liveness,
            now_ms,
        };
        match request {
            Request::GetNextBrokerId { broker_name, .. } => {
                let next_broker_id = self
                    .broker_set(broker_name)
                    .map_or(FIRST_BROKER_ID, |set| set.next_broker_id);
                Ok((Vec::new(), Response::NextBrokerId { next_broker_id }))
            }
            Request::ApplyBrokerId {
                cluster_name,
                broker_name,
                broker_id,
                register_check_code,
            } => self.apply_broker_id(cluster_name, broker_name, *broker_id, register_check_code),
            Request::RegisterBroker {
                broker_name,
                broker_id,
                broker_addr,
                ..
            } => self.register_broker(&context, broker_name, *broker_id, broker_addr),
            Request::ElectMaster {
                broker_name,
                trigger,
            } => self.elect_master(&context, broker_name, *trigger),
            Request::AlterSyncStateSet {
                broker_name,
                master_broker_id,
                master_epoch,
                proposal,
            } => self.alter_sync_state_set(
                &context,
                broker_name,
                *master_broker_id,
                *master_epoch,
                proposal,
            ),
            Request::GetReplicaInfo { broker_name } => {
                let set = self.broker_set(broker_name).ok_or_else(|| {
                    Refusal::new(
                        ResponseCode::CONTROLLER_BROKER_METADATA_NOT_EXIST,
                        "Broker metadata is not existed",
                    )
                })?;
                let response = Response::ReplicaInfo {
                    master_broker_id: set.master,
                    master_addr: set.master.and_then(|id| set.addr(id)).map(str::to_owned),
                    master_epoch: set.master_epoch,
                    sync_state_set: set.sync_state_set.clone(),
                };
                Ok((Vec::new(), response))
            }
            Request::GetSyncStateData { broker_names } => {
                let data = broker_names
                    .iter()
                    .filter_map(|name| {
                        let set = self.broker_set(name)?;
                        Some((name.clone(), sync_data(&context, name, set)))
                    })
                    .collect();
                Ok((Vec::new(), Response::SyncStateData(data)))
            }
            Request::CleanBrokerData {
                broker_name,
                broker_ids_to_clean,
                clean_living_broker,
                ..
            } => self.clean_broker_data(
                &context,
                broker_name,
                broker_ids_to_clean.as_deref(),
                *clean_living_broker,
            ),
        }
    }

    fn apply_broker_id(
        &self,
        cluster_name: &str,
        broker_name: &str,
        broker_id: BrokerId,
        register_check_code: &str,
    ) -> Handled {
        let broker_addr = register_check_code.split(';').next().unwrap_or_default();
        let event = Event::ApplyBrokerId {
            cluster_name: cluster_name.to_owned(),
            broker_name: broker_name.to_owned(),
            broker_id,
            broker_addr: broker_addr.to_owned(),
            register_check_code: register_check_code.to_owned(),
        };
        if broker_id < FIRST_BROKER_ID || broker_addr.is_empty() {
            // Java takes any id; an id below 1 would read as "no broker" (-1) or as a 4.x
            // master id (0) elsewhere, and an empty address cannot be reached.
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                format!(
                    "Fail to apply brokerId: {broker_id} in broker-set: {broker_name}: ids start \
                     at {FIRST_BROKER_ID} and the check code must start with an address"
                ),
            ));
        }
        let Some(set) = self.broker_set(broker_name) else {
            if broker_id == FIRST_BROKER_ID {
                return Ok((vec![event], Response::BrokerIdApplied));
            }
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                format!(
                    "Broker-set: {broker_name} hasn't been registered in controller, but broker \
                     try to apply brokerId: {broker_id}"
                ),
            ));
        };
        match set.members.get(&broker_id) {
            None => Ok((vec![event], Response::BrokerIdApplied)),
            // The same broker repeating a claim whose answer it lost.
            Some(member) if member.register_check_code == register_check_code => {
                Ok((Vec::new(), Response::BrokerIdApplied))
            }
            Some(_) => Err(Refusal::new(
                ResponseCode::CONTROLLER_BROKER_ID_INVALID,
                format!("Fail to apply brokerId: {broker_id} in broker-set: {broker_name}"),
            )),
        }
    }

    fn register_broker(
        &self,
        context: &Context<'_>,
        broker_name: &str,
        broker_id: BrokerId,
        broker_addr: &str,
    ) -> Handled {
        let set = self.broker_set(broker_name).ok_or_else(|| {
            Refusal::new(
                ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                format!("Broker-set: {broker_name} hasn't been registered in controller"),
            )
        })?;
        let Some(member) = set.members.get(&broker_id) else {
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                format!(
                    "BrokerId: {broker_id} hasn't been registered in broker-set: {broker_name}"
                ),
            ));
        };
        let master = set
            .master
            .filter(|id| context.alive(broker_name, set, *id))
            .and_then(|id| master_info(set, id));
        let mut events = Vec::new();
        if member.addr != broker_addr {
            events.push(Event::UpdateBrokerAddress {
                broker_name: broker_name.to_owned(),
                broker_id,
                broker_addr: broker_addr.to_owned(),
            });
        }
        let response = Response::Registered {
            master,
            sync_state_set: set.sync_state_set.clone(),
        };
        Ok((events, response))
    }

    fn elect_master(
        &self,
        context: &Context<'_>,
        broker_name: &str,
        trigger: ElectTrigger,
    ) -> Handled {
        let set = self.broker_set(broker_name).ok_or_else(|| {
            Refusal::new(
                ResponseCode::CONTROLLER_BROKER_NEED_TO_BE_REGISTERED,
                "Broker hasn't been registered",
            )
        })?;
        let asker = match trigger {
            ElectTrigger::Broker(id) | ElectTrigger::Designated(id) => Some(id),
            ElectTrigger::Controller => None,
        };
        if let Some(id) = asker.filter(|id| !set.members.contains_key(id)) {
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
                format!(
                    "Failed to elect a new master: brokerId {id} is not a member of {broker_name}"
                ),
            ));
        }
        let new_master = match asker {
            // The set's first election: the asker wins, as in Java.
            Some(id) if set.first_election() => Some(id),
            _ => {
                let prefer = match trigger {
                    ElectTrigger::Designated(id) => Some(id),
                    _ => None,
                };
                let unclean = context.config.enable_elect_unclean_master;
                elect::elect(
                    broker_name,
                    set,
                    context.liveness,
                    context.now_ms,
                    unclean,
                    prefer,
                )
            }
        };
        // Epochs only go up: an exhausted one refuses the change rather than wrap.
        let exhausted = || {
            Refusal::new(
                ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
                format!("Failed to elect a new master: the epochs of {broker_name} are exhausted"),
            )
        };
        match new_master {
            Some(id) if set.master == Some(id) => {
                let master = master_info(set, id).ok_or_else(|| missing_addr(broker_name, id))?;
                let response = Response::MasterStillExists {
                    master,
                    sync_state_set: set.sync_state_set.clone(),
                };
                Ok((Vec::new(), response))
            }
            Some(id) => {
                let addr = set
                    .addr(id)
                    .ok_or_else(|| missing_addr(broker_name, id))?
                    .to_owned();
                let master_epoch = set.master_epoch.checked_add(1).ok_or_else(exhausted)?;
                let sync_state_set_epoch = set
                    .sync_state_set
                    .epoch
                    .checked_add(1)
                    .ok_or_else(exhausted)?;
                let event = Event::ElectMaster {
                    broker_name: broker_name.to_owned(),
                    new_master: Some(id),
                    master_epoch,
                    checked_sync_state_set_epoch: set.sync_state_set.epoch,
                };
                let notify = set
                    .members
                    .iter()
                    .filter(|(member, _)| {
                        **member == id || context.alive(broker_name, set, **member)
                    })
                    .map(|(member, entry)| (*member, entry.addr.clone()))
                    .collect();
                let response = Response::Elected {
                    master: MasterInfo {
                        broker_id: id,
                        addr,
                        master_epoch,
                    },
                    sync_state_set: SyncStateSet {
                        members: BTreeSet::from([id]),
                        epoch: sync_state_set_epoch,
                    },
                    members: member_addrs(set),
                    notify,
                };
                Ok((vec![event], response))
            }
            None if asker.is_none() && set.master.is_some() => {
                let master_epoch = set.master_epoch.checked_add(1).ok_or_else(exhausted)?;
                let event = Event::ElectMaster {
                    broker_name: broker_name.to_owned(),
                    new_master: None,
                    master_epoch,
                    checked_sync_state_set_epoch: set.sync_state_set.epoch,
                };
                Ok((vec![event], Response::MasterGone { master_epoch }))
            }
            None if asker.is_none() => {
                // Already recorded as gone: nothing changes, the epoch stays.
                let master_epoch = set.master_epoch;
                Ok((Vec::new(), Response::MasterGone { master_epoch }))
            }
            None => Err(Refusal::new(
                ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
                "Failed to elect a new master",
            )),
        }
    }

    fn alter_sync_state_set(
        &self,
        context: &Context<'_>,
        broker_name: &str,
        master_broker_id: BrokerId,
        master_epoch: Epoch,
        proposal: &SyncStateSet,
    ) -> Handled {
        let failed = |remark: String| {
            Err(Refusal::new(
                ResponseCode::CONTROLLER_ALTER_SYNC_STATE_SET_FAILED,
                remark,
            ))
        };
        let Some(set) = self.broker_set(broker_name) else {
            return failed("Broker metadata is not existed".to_owned());
        };
        let current = &set.sync_state_set;
        if proposal.members == current.members {
            return failed(
                "The newSyncStateSet is equal with oldSyncStateSet, no needed to update \
                 syncStateSet"
                    .to_owned(),
            );
        }
        if set.master != Some(master_broker_id) {
            let current_master = set.master.map_or("null".to_owned(), |id| id.to_string());
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_INVALID_MASTER,
                format!(
                    "Rejecting alter syncStateSet request because the current leader \
                     is:{{{current_master}}}, not {{{master_broker_id}}}"
                ),
            ));
        }
        if master_epoch != set.master_epoch {
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_FENCED_MASTER_EPOCH,
                format!(
                    "Rejecting alter syncStateSet request because the current master epoch \
                     is:{{{}}}, not {{{master_epoch}}}",
                    set.master_epoch
                ),
            ));
        }
        if proposal.epoch != current.epoch {
            return Err(Refusal::new(
                ResponseCode::CONTROLLER_FENCED_SYNC_STATE_SET_EPOCH,
                format!(
                    "Rejecting alter syncStateSet request because the current syncStateSet epoch \
                     is:{{{}}}, not {{{}}}",
                    current.epoch, proposal.epoch
                ),
            ));
        }
        for replica in &proposal.members {
            if !set.members.contains_key(replica) {
                return Err(Refusal::new(
                    ResponseCode::CONTROLLER_INVALID_REPLICAS,
                    format!(
                        "Rejecting alter syncStateSet request because the replicas {{{replica}}} \
                         don't exist"
                    ),
                ));
            }
            if !context.alive(broker_name, set, *replica) {
                return Err(Refusal::new(
                    ResponseCode::CONTROLLER_BROKER_NOT_ALIVE,
                    format!(
                        "Rejecting alter syncStateSet request because the replicas {{{replica}}} \
                         don't alive"
                    ),
                ));
            }
        }
        if !proposal.members.contains(&master_broker_id) {
            return failed(format!(
                "Rejecting alter syncStateSet request because the newSyncStateSet don't contains \
                 origin leader {{{master_broker_id}}}"
            ));
        }
        let Some(sync_state_set_epoch) = current.epoch.checked_add(1) else {
            return failed(format!(
                "The syncStateSet epoch of {broker_name} is exhausted"
            ));
        };
        let event = Event::AlterSyncStateSet {
            broker_name: broker_name.to_owned(),
            master_broker_id,
            master_epoch,
            sync_state_set_epoch,
            members: proposal.members.clone(),
        };
        let accepted = SyncStateSet {
            members: proposal.members.clone(),
            epoch: sync_state_set_epoch,
        };
        Ok((vec![event], Response::SyncStateSetAltered(accepted)))
    }

    fn clean_broker_data(
        &self,
        context: &Context<'_>,
        broker_name: &str,
        ids_to_clean: Option<&str>,
        clean_living_broker: bool,
    ) -> Handled {
        let invalid = |remark: String| {
            Err(Refusal::new(
                ResponseCode::CONTROLLER_INVALID_CLEAN_BROKER_METADATA,
                remark,
            ))
        };
        let ids_text = ids_to_clean.map(str::trim).filter(|text| !text.is_empty());
        let mut broker_ids = None;
        if let Some(text) = ids_text {
            let mut ids = BTreeSet::new();
            for part in text.split(';').filter(|part| !part.is_empty()) {
                match part.trim().parse::<BrokerId>() {
                    Ok(id) => ids.insert(id),
                    Err(_) => {
                        return invalid(format!(
                            "Please set the option <brokerControllerIdsToClean> according to the \
                             format, exception: java.lang.NumberFormatException: For input \
                             string: \"{part}\""
                        ))
                    }
                };
            }
            broker_ids = Some(ids);
        }
        let set = self.broker_set(broker_name);
        if !clean_living_broker {
            match (&broker_ids, set) {
                (None, Some(set)) if set.master.is_some() => {
                    return invalid(format!(
                        "Broker {broker_name} is still alive, clean up failure"
                    ));
                }
                (Some(ids), Some(set)) => {
                    if let Some(id) = ids.iter().find(|id| context.alive(broker_name, set, **id)) {
                        return invalid(format!(
                            "Broker [{broker_name},  {id}] is still alive, clean up failure"
                        ));
                    }
                }
                _ => {}
            }
        }
        if set.is_none() {
            return invalid(format!(
                "Broker {broker_name} is not existed,clean broker data failure."
            ));
        }
        let event = Event::CleanBrokerData {
            broker_name: broker_name.to_owned(),
            broker_ids,
        };
        Ok((vec![event], Response::BrokerDataCleaned))
    }
}

fn master_info(set: &BrokerSet, broker_id: BrokerId) -> Option<MasterInfo> {
    Some(MasterInfo {
        broker_id,
        addr: set.addr(broker_id)?.to_owned(),
        master_epoch: set.master_epoch,
    })
}

fn missing_addr(broker_name: &str, broker_id: BrokerId) -> Refusal {
    Refusal::new(
        ResponseCode::CONTROLLER_ELECT_MASTER_FAILED,
        format!(
            "Failed to elect a new master: brokerId {broker_id} of {broker_name} has no address"
        ),
    )
}

fn sync_data(context: &Context<'_>, broker_name: &str, set: &BrokerSet) -> BrokerSetSyncData {
    let mut in_sync = Vec::new();
    let mut not_in_sync = Vec::new();
    for (id, member) in &set.members {
        let replica = ReplicaIdentity {
            broker_id: *id,
            addr: member.addr.clone(),
            alive: context.alive(broker_name, set, *id),
        };
        if set.sync_state_set.members.contains(id) {
            in_sync.push(replica);
        } else {
            not_in_sync.push(replica);
        }
    }
    BrokerSetSyncData {
        master_broker_id: set.master,
        master_addr: set.master.and_then(|id| set.addr(id)).map(str::to_owned),
        master_epoch: set.master_epoch,
        sync_state_set_epoch: set.sync_state_set.epoch,
        in_sync,
        not_in_sync,
    }
}
