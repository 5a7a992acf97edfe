//! GET_BROKER_HA_STATUS (907): the replication figures of every log of the broker, in the
//! shape of Java's `HARuntimeInfo` (what `mqadmin haStatus` prints), with each log's own
//! figures under `logs` (`comet-admin ha-status` prints those).
//!
//! Java's body describes one commit log; a Comet broker has one per shard, so:
//! - `haConnectionInfo` has one entry per (log, slave session): Java's `addr`,
//!   `slaveAckOffset` (the slave's durable end of that log), `diff` (bytes the master holds
//!   beyond it) and `inSync`, plus `logId`;
//! - `masterCommitLogMaxOffset` and the slave's `maxOffset` sum the logs' written ends (the
//!   bytes held), and `inSyncSlaveNums` counts the slaves in sync on every log;
//! - `logs` holds, per log, the written, durable and confirmed ends here and, on a master,
//!   each slave's written and durable ends, its lag in bytes and in milliseconds, and its
//!   last Ack (wall-clock ms); on a slave, the link's state.
//!
//! The request arrives on one shard; each shard reports the logs it holds (`local`: its
//! own, and on a slave with fewer shards than its master has logs those it hosts; a slave's
//! shard past its master's logs reports none) and the arriving shard merges them
//! (`gather`).

use std::collections::BTreeMap;

use comet_proto::{RemotingCommand, ResponseCode};
use comet_rt::clock::{monotonic_now, wall_clock_ms};
use serde_json::{json, Value};

use crate::replication_state::ReplicationState;
use crate::routing::{on_shard, shard_id};
use crate::shard::{RequestContext, ShardBroker};

use super::error;

/// The logs this shard holds, as a JSON array of one object per log (see the module docs).
pub fn local(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let own =
        broker.config().broker_role.is_master() || broker.shard().index() < broker.queue_logs();
    let mut logs: Vec<Value> = Vec::new();
    if own {
        logs.push(log_figures(broker, broker.replication(), broker.store()));
    }
    for hosted in broker.hosted_logs() {
        logs.push(log_figures(broker, &hosted.replication, &hosted.store));
    }
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
        .with_body(Value::Array(logs).to_string())
}

/// One log's figures.
fn log_figures(
    broker: &ShardBroker,
    state: &ReplicationState,
    store: &comet_store::Store,
) -> Value {
    let config = broker.config();
    let written = store.written_position();
    let mut log = json!({
        "logId": state.log_id,
        "role": if config.broker_role.is_master() { "master" } else { "slave" },
        "writtenOffset": written,
        "durableOffset": store.durable_position(),
        "confirmOffset": store.confirmed_position(),
    });
    if config.broker_role.is_master() {
        let now = monotonic_now();
        let wall_now_ms = wall_clock_ms();
        let gap_max = config.ha_max_gap_not_in_sync_bytes;
        let slaves: Vec<Value> = state
            .followers
            .borrow()
            .values()
            .map(|slave| {
                let since_ack = now.saturating_duration_since(slave.last_ack_at);
                let last_ack_ms = wall_now_ms - i64::try_from(since_ack.as_millis()).unwrap_or(0);
                let lag_ms = state.lag_behind(slave.durable, now).as_millis();
                json!({
                    "addr": slave.peer.to_string(),
                    "brokerId": slave.broker_id,
                    "slaveWrittenOffset": slave.written,
                    "slaveDurableOffset": slave.durable,
                    "lagBytes": written.saturating_sub(slave.durable),
                    "lagMillis": u64::try_from(lag_ms).unwrap_or(u64::MAX),
                    "lastAckTimestamp": last_ack_ms,
                    "inSync": written.saturating_sub(slave.durable) < gap_max,
                })
            })
            .collect();
        log["slaves"] = Value::Array(slaves);
    } else {
        let follow = state.follow.borrow();
        log["connected"] = json!(follow.connected);
        log["masterAddr"] = json!(follow.master);
        log["masterConfirmOffset"] = json!(follow.confirm);
        log["stopped"] = json!(follow.stopped);
    }
    log
}

/// Every shard's log, merged into Java's `HARuntimeInfo` shape (see the module docs).
pub async fn gather(
    broker: &ShardBroker,
    context: RequestContext,
    request: RemotingCommand,
) -> RemotingCommand {
    let mut logs = Vec::new();
    for index in 0..broker.shard_count() {
        let answer = on_shard(broker, context, shard_id(index), request.clone()).await;
        let parsed = answer
            .filter(|answer| answer.response_code() == ResponseCode::SUCCESS)
            .and_then(|answer| serde_json::from_slice::<Vec<Value>>(&answer.body).ok());
        match parsed {
            Some(held) => logs.extend(held),
            None => {
                let remark = format!("shard {index} did not report its replication state");
                return error(&request, ResponseCode::SYSTEM_ERROR, remark);
            }
        }
    }
    logs.sort_by_key(|log| log["logId"].as_u64());
    let body = merge(broker.config().broker_role.is_master(), logs);
    RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(body.to_string())
}

/// Java's `HARuntimeInfo` fields from the per-log objects, with the logs under `logs`.
fn merge(master: bool, logs: Vec<Value>) -> Value {
    let number = |log: &Value, key: &str| log[key].as_u64().unwrap_or(0);
    let held: u64 = logs.iter().map(|log| number(log, "writtenOffset")).sum();
    let mut connections = Vec::new();
    // brokerId -> logs on which that slave is in sync.
    let mut in_sync: BTreeMap<u64, usize> = BTreeMap::new();
    for log in &logs {
        for slave in log["slaves"].as_array().into_iter().flatten() {
            let synced = slave["inSync"].as_bool().unwrap_or(false);
            if synced {
                *in_sync.entry(number(slave, "brokerId")).or_default() += 1;
            }
            connections.push(json!({
                "addr": slave["addr"],
                "slaveAckOffset": slave["slaveDurableOffset"],
                "diff": slave["lagBytes"],
                "inSync": synced,
                "logId": log["logId"],
            }));
        }
    }
    let in_sync_slaves = in_sync
        .values()
        .filter(|&&count| count == logs.len())
        .count();
    let activated = !master && logs.iter().all(|log| log["connected"] == json!(true));
    let master_addr = logs.iter().find_map(|log| log["masterAddr"].as_str());
    json!({
        "master": master,
        "masterCommitLogMaxOffset": if master { held } else { 0 },
        "inSyncSlaveNums": in_sync_slaves,
        "haConnectionInfo": connections,
        "haClientRuntimeInfo": {
            "masterAddr": master_addr,
            "maxOffset": if master { 0 } else { held },
            "isActivated": activated,
        },
        "logs": logs,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the merge: one connection per (log, slave), a slave counts as in sync only
    // when it is on every log, and the held bytes sum the logs.
    #[test]
    fn merge_counts_slaves_in_sync_on_every_log() {
        let slave = |id: u64, durable: u64, in_sync: bool| {
            json!({"addr": "a:1", "brokerId": id, "slaveDurableOffset": durable,
                   "lagBytes": 100 - durable, "inSync": in_sync})
        };
        let logs = vec![
            json!({"logId": 0, "writtenOffset": 100,
                   "slaves": [slave(1, 100, true), slave(2, 10, false)]}),
            json!({"logId": 1, "writtenOffset": 50, "slaves": [slave(1, 50, true)]}),
        ];
        let merged = merge(true, logs);
        assert_eq!(merged["masterCommitLogMaxOffset"], json!(150));
        assert_eq!(merged["inSyncSlaveNums"], json!(1));
        let connections = merged["haConnectionInfo"].as_array().unwrap();
        assert_eq!(connections.len(), 3);
        assert_eq!(connections[1]["diff"], json!(90));
        assert_eq!(connections[2]["logId"], json!(1));
        let slave_side = merge(
            false,
            vec![json!({"writtenOffset": 7, "connected": true,
                                                   "masterAddr": "m:2"})],
        );
        assert_eq!(slave_side["haClientRuntimeInfo"]["maxOffset"], json!(7));
        assert_eq!(
            slave_side["haClientRuntimeInfo"]["isActivated"],
            json!(true)
        );
        assert_eq!(
            slave_side["haClientRuntimeInfo"]["masterAddr"],
            json!("m:2")
        );
    }
}
