//! SYNC_MASTER on a master shard: sends waiting for a slave, and the confirm position that
//! limits what consumers see.
//!
//! A send is appended and made durable here first (the store's group commit), then waits
//! in the log's [`SyncWaiters`](comet_replication::sync_wait::SyncWaiters): the sender's
//! ack reader hands every accepted Ack's durable position to
//! [`ReplicationState::on_slave_durable`], which answers every waiter it covers at once.
//! The answers are Java's (`CommitLog.submitReplicaRequest`, `HAService.isSlaveOK`):
//! SEND_OK once a slave holds the message durably, FLUSH_SLAVE_TIMEOUT when none did
//! before `syncFlushTimeout`, SLAVE_NOT_AVAILABLE at once when no slave is in sync (none
//! follows the log, or the best is `haMaxGapNotInSync` or more behind). The message stays
//! stored in every case.
//!
//! In controller mode the sync-state set decides instead (`controlled_acks`): a send waits
//! for every slave the set (and a proposal not yet answered, and a slave joining it)
//! names, answering SEND_OK at once when it names none, and FLUSH_SLAVE_TIMEOUT when one
//! did not hold it in time; consumers see what all of them hold.
//!
//! The store of a SYNC_MASTER is opened with `visible_after_confirm`: consumers see a
//! record only once [`Store::confirm`](comet_store::Store::confirm) covers it. The confirm
//! task moves it to the smallest durable end of the in-sync set (the master and every slave
//! in sync), or the master's own durable end while no slave is in sync, so a consumer never
//! reads a message an in-sync slave lacks, and a master without a slave keeps serving.

use std::future::poll_fn;
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use comet_replication::sync_wait::SyncOutcome;
use comet_rt::clock::monotonic_now;
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::race;
use comet_rt::sync::WakerList;
use comet_rt::task_class::{sleep, TaskClass};

use super::SyncSlot;
use crate::shard::ShardBroker;

/// The longest the confirm task sleeps without looking: a slave falling out of sync by
/// time alone (its master writing on) is noticed within it.
const CONFIRM_RECHECK_MAX: Duration = Duration::from_millis(100);

/// Waits until a slave holds the log durably up to `end` (the message's end, already
/// durable here), at most until `deadline`; answers at once when no slave is in sync.
pub async fn wait_for_slave(broker: &ShardBroker, end: u64, deadline: Instant) -> SyncOutcome {
    let state = broker.replication();
    let gap_max = broker.config().ha_max_gap_not_in_sync_bytes;
    // In controller mode the sync-state set says whom to wait for, and a slave missing from
    // it is waited for until the controller accepted the smaller set: no SLAVE_NOT_AVAILABLE.
    let in_sync = match state.controlled_covered() {
        Some(covered) => {
            let released = state.sync_waiters.borrow_mut().set_covered(covered);
            crate::replication_state::answer(released);
            true
        }
        None => state.slave_in_sync(end, gap_max),
    };
    let slot = Rc::new(SyncSlot::default());
    let registered =
        state
            .sync_waiters
            .borrow_mut()
            .register(end, deadline, in_sync, Rc::clone(&slot));
    if let Some((_, outcome)) = registered {
        return outcome;
    }
    loop {
        if let Some(outcome) = slot.outcome.get() {
            return outcome;
        }
        let now = monotonic_now();
        if now >= deadline {
            // Answers this waiter too (its deadline is past), and any other overdue one.
            state.expire_sync_waiters(now);
            continue;
        }
        race(slot.woken.notified(), sleep(deadline - now)).await;
    }
}

/// Starts the confirm task of a SYNC_MASTER shard (see the module docs).
pub fn spawn_confirm(broker: &Rc<ShardBroker>, tasks: &Gate, stop: &StopSignal) {
    let confirming = confirm_loop(broker.clone(), stop.clone());
    if tasks
        .spawn("ha-confirm", TaskClass::Replication, confirming)
        .is_err()
    {
        log::warn!(
            "{}: replication is stopping: no confirm task",
            broker.shard()
        );
    }
}

async fn confirm_loop(broker: Rc<ShardBroker>, stop: StopSignal) {
    let store = broker.store();
    while !stop.is_triggered() {
        if let Some(role) = broker.controller() {
            super::controlled_acks::refresh(&broker, role);
        }
        let durable = store.durable_position();
        let gap_max = broker.config().ha_max_gap_not_in_sync_bytes;
        let state = broker.replication();
        // In controller mode consumers see what every slave the set requires holds, so
        // nothing they read can be missing on the master a failover picks.
        let target = match state.controlled_covered() {
            Some(covered) => durable.min(covered),
            None => state.confirm_target(durable, store.written_position(), gap_max),
        };
        // In controller mode a master whose lease lapsed shows nothing more: another master
        // may be elected, and a tail shown to consumers could no longer be taken back when
        // this broker has to follow it.
        let lease_lapsed = broker
            .controller()
            .is_some_and(|role| !role.lease_valid(comet_rt::clock::monotonic_now()));
        if !lease_lapsed {
            store.confirm(target);
        }
        let moved = race(
            store.wait_durable_beyond(durable),
            next_wake(&broker.replication().acks),
        );
        race(stop.wait(), race(moved, sleep(CONFIRM_RECHECK_MAX))).await;
    }
}

/// Resolves at the next wake of `list` (the first poll only registers).
async fn next_wake(list: &WakerList) {
    let mut registered = false;
    poll_fn(|cx| {
        if registered {
            return Poll::Ready(());
        }
        registered = true;
        list.register(cx.waker());
        Poll::Pending
    })
    .await;
}
