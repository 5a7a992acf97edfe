//! Who becomes master (Java's `DefaultElectPolicy`): candidates are the live members of the
//! sync-state set, then, only with `enableElectUncleanMaster`, every live member.

use std::cmp::Ordering;

use super::{BrokerId, BrokerLive, BrokerSet, HeartbeatTable};

/// Picks the master of `set`: the old master if it is still a live candidate and no other
/// broker is preferred; else `prefer` if it is a live candidate (and nobody otherwise);
/// else the most advanced live candidate. `None` when there is no live candidate.
pub(super) fn elect(
    broker_name: &str,
    set: &BrokerSet,
    liveness: &HeartbeatTable,
    now_ms: u64,
    unclean: bool,
    prefer: Option<BrokerId>,
) -> Option<BrokerId> {
    let in_sync: Vec<BrokerId> = set.sync_state_set.members.iter().copied().collect();
    if let Some(master) = try_elect(broker_name, set, &in_sync, liveness, now_ms, prefer) {
        return Some(master);
    }
    if !unclean {
        return None;
    }
    let all: Vec<BrokerId> = set.members.keys().copied().collect();
    try_elect(broker_name, set, &all, liveness, now_ms, prefer)
}

fn try_elect(
    broker_name: &str,
    set: &BrokerSet,
    candidates: &[BrokerId],
    liveness: &HeartbeatTable,
    now_ms: u64,
    prefer: Option<BrokerId>,
) -> Option<BrokerId> {
    // Only registered members: a sync-state set never names anyone else, but an unknown id
    // must not become a master without an address.
    let live: Vec<(BrokerId, &BrokerLive)> = candidates
        .iter()
        .filter(|id| set.members.contains_key(id))
        .filter_map(|id| {
            liveness
                .get(&set.cluster_name, broker_name, *id)
                .filter(|live| live.alive(now_ms))
                .map(|live| (*id, live))
        })
        .collect();
    if live.is_empty() {
        return None;
    }
    let is_candidate = |id: BrokerId| live.iter().any(|(candidate, _)| *candidate == id);
    if let Some(master) = set.master {
        if is_candidate(master) && prefer.is_none_or(|preferred| preferred == master) {
            return Some(master);
        }
    }
    if let Some(preferred) = prefer {
        return is_candidate(preferred).then_some(preferred);
    }
    live.iter()
        .min_by(|a, b| more_advanced_first(a, b))
        .map(|(id, _)| *id)
}

/// Higher log epoch first, then higher max offset, then lower election priority; ties go to
/// the lower id so every replica of the controller picks the same broker.
fn more_advanced_first(a: &(BrokerId, &BrokerLive), b: &(BrokerId, &BrokerLive)) -> Ordering {
    b.1.epoch
        .cmp(&a.1.epoch)
        .then(b.1.max_offset.cmp(&a.1.max_offset))
        .then(a.1.election_priority.cmp(&b.1.election_priority))
        .then(a.0.cmp(&b.0))
}
