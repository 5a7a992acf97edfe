//! Controller mode: each shard publishes what its logs hold, and a master shard which slaves
//! are in sync on its log, for the controller driver's heartbeats and sync-state-set
//! proposals (`crate::controller_role`).

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::race;
use comet_rt::task_class::{sleep, TaskClass};

use crate::controller_role::{ControllerRole, LogFigures};
use crate::shard::{HostedLog, ShardBroker};

/// How often the figures are published: well under the heartbeat interval, so a heartbeat
/// never reports figures much older than itself.
pub const PUBLISH_INTERVAL: Duration = Duration::from_millis(200);

/// Publishes this shard's figures until `stop`.
pub fn spawn(broker: &Rc<ShardBroker>, role: Arc<ControllerRole>, tasks: &Gate, stop: &StopSignal) {
    let (broker, stop) = (broker.clone(), stop.clone());
    let spawned = tasks.spawn("controller figures", TaskClass::Housekeeping, async move {
        while !stop.is_triggered() {
            publish(&broker, &role);
            race(stop.wait(), sleep(PUBLISH_INTERVAL)).await;
        }
    });
    if spawned.is_err() {
        log::debug!("replication is stopping: the controller figures do not start");
    }
}

fn publish(broker: &ShardBroker, role: &ControllerRole) {
    let config = broker.config();
    let master = config.broker_role.is_master();
    let own = (master || broker.shard().index() < broker.queue_logs()).then(|| broker.own_log());
    let now = comet_rt::clock::monotonic_now();
    for log in own.iter().chain(broker.hosted_logs()) {
        role.publish_log(now, log.replication.log_id, figures(log, master));
    }
    if master {
        let in_sync = super::controlled_acks::review(broker, role);
        role.publish_replicas(broker.replication.log_id, &in_sync);
    }
}

fn figures(log: &HostedLog, master: bool) -> LogFigures {
    let epoch = if master {
        log.replication
            .epochs
            .borrow()
            .latest()
            .map_or(0, |start| start.epoch)
    } else {
        0
    };
    LogFigures {
        epoch,
        written: log.store.written_position(),
        confirmed: log.store.confirmed_position(),
    }
}
