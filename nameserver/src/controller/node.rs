//! One controller: the replicated [`ControllerState`], the leader's own [`HeartbeatTable`]
//! and the [`ControllerConfig`], with the controller's own trigger for elections.

use super::handle::Handled;
use super::{
    BrokerId, ControllerConfig, ControllerState, Event, Heartbeat, HeartbeatTable, Request,
};

/// A controller node. Every request goes through [`ControllerNode::handle`]; the events it
/// returns go through the log (today: straight) to [`ControllerNode::apply`].
#[derive(Clone, Debug, Default)]
pub struct ControllerNode {
    config: ControllerConfig,
    state: ControllerState,
    heartbeats: HeartbeatTable,
}

impl ControllerNode {
    /// A node with an empty state.
    pub fn new(config: ControllerConfig) -> ControllerNode {
        ControllerNode {
            config,
            state: ControllerState::new(),
            heartbeats: HeartbeatTable::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ControllerConfig {
        &self.config
    }

    /// The replicated state.
    pub fn state(&self) -> &ControllerState {
        &self.state
    }

    /// The liveness table.
    pub fn heartbeats(&self) -> &HeartbeatTable {
        &self.heartbeats
    }

    /// Checks a request at `now_ms` ([`ControllerState::handle`]).
    pub fn handle(&self, request: &Request, now_ms: u64) -> Handled {
        self.state
            .handle(request, &self.config, &self.heartbeats, now_ms)
    }

    /// Applies a committed event ([`ControllerState::apply`]); a cleaned broker is also
    /// forgotten by the liveness table.
    pub fn apply(&mut self, event: &Event) -> bool {
        if let Event::CleanBrokerData {
            broker_name,
            broker_ids,
        } = event
        {
            if let Some(set) = self.state.broker_set(broker_name) {
                let cluster = set.cluster_name.clone();
                let ids: Vec<_> = match broker_ids.as_ref().filter(|ids| !ids.is_empty()) {
                    Some(ids) => ids.iter().copied().collect(),
                    None => set.members.keys().copied().collect(),
                };
                for id in ids {
                    self.heartbeats.forget(&cluster, broker_name, id);
                }
            }
        }
        self.state.apply(event)
    }

    /// Replaces the replicated state with one taken from a snapshot (the liveness table,
    /// which is not replicated, stays).
    pub fn restore(&mut self, state: ControllerState) {
        self.state = state;
    }

    /// Records a BROKER_HEARTBEAT arriving at `now_ms`.
    pub fn on_heartbeat(&mut self, heartbeat: &Heartbeat, now_ms: u64) {
        self.heartbeats.on_heartbeat(heartbeat, now_ms);
    }

    /// The connection `brokers` heartbeat on closed ([`HeartbeatTable::on_channel_closed`]);
    /// whether any of them now counts as gone.
    pub fn on_channel_closed(
        &mut self,
        brokers: &[(String, String, BrokerId)],
        now_ms: u64,
        idle_close_ms: u64,
    ) -> bool {
        let mut gone = false;
        for (cluster_name, broker_name, broker_id) in brokers {
            gone |= self.heartbeats.on_channel_closed(
                cluster_name,
                broker_name,
                *broker_id,
                now_ms,
                idle_close_ms,
            );
        }
        gone
    }

    /// The elections the controller must start itself at `now_ms`
    /// ([`ControllerState::expired`]).
    pub fn expired(&self, now_ms: u64) -> Vec<Request> {
        self.state.expired(&self.heartbeats, now_ms)
    }

    /// Drops liveness entries that expired before `now_ms`, bounding the table.
    pub fn forget_expired(&mut self, now_ms: u64) {
        self.heartbeats.forget_expired(now_ms);
    }
}
