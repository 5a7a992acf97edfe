//! A slave's copy of its master's metadata, as Java's `SlaveSynchronize` makes it every
//! [`SYNC_INTERVAL`] over the master's remoting port (the `masterAddr` the name server
//! returns to REGISTER_BROKER, or the master the controller names), consumer offsets every
//! [`OFFSET_SYNC_INTERVAL`] so that consumers of a promoted slave go back less than one of
//! their own commit intervals (Java clients commit every 5 s):
//!
//! - shard 0: GET_ALL_TOPIC_CONFIG and GET_ALL_SUBSCRIPTIONGROUP_CONFIG replace the slave's
//!   topics and groups (re-registered and persisted as any change is);
//!   GET_ALL_DELAY_OFFSET moves the delay-level cursors forward; GET_ALL_MESSAGE_REQUEST_MODE
//!   replaces the slave's request modes (server-side assignment);
//! - every shard: GET_ALL_CONSUMER_OFFSET, keeping the queues the shard owns. An offset only
//!   moves forward, so stale master data never takes a newer slave offset back (Apache
//!   RocketMQ's slave could).

use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use comet_proto::body::{
    ConsumerOffsetSerializeWrapper, DelayOffsetSerializeWrapper, JsonBody,
    MessageRequestModeSerializeWrapper, SubscriptionGroupWrapper, TopicConfigSerializeWrapper,
};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_rt::shutdown::{Gate, StopSignal};
use comet_rt::sync::race;
use comet_rt::task_class::{run_blocking, sleep, TaskClass};
use thiserror::Error;

use crate::delay_level::cursor;
use crate::namesrv_client::{parse_addr, CallError, NameServerLink};
use crate::offset::OffsetTable;
use crate::shard::ShardBroker;

/// How often a slave copies its master's metadata (Java's `SlaveSynchronize` period).
pub const SYNC_INTERVAL: Duration = Duration::from_secs(10);
/// How often a slave copies its master's consumer offsets.
pub const OFFSET_SYNC_INTERVAL: Duration = Duration::from_secs(1);
/// Offset copies per full copy.
const OFFSET_SYNCS_PER_FULL: u32 = 10;
/// How often a slave looks for its master's address while it knows none.
const NO_MASTER_POLL: Duration = Duration::from_millis(500);
/// Longest wait for one answer from the master.
const CALL_WAIT_MAX: Duration = Duration::from_secs(3);

/// Why one round of the copy failed (the next round retries).
#[derive(Debug, Error)]
pub enum SyncError {
    /// The master could not be asked.
    #[error("master {addr}: {source}")]
    Call {
        /// The master's address.
        addr: String,
        /// The cause.
        #[source]
        source: CallError,
    },
    /// The master refused a request.
    #[error("master refused {code:?}: {status:?} {remark:?}")]
    Refused {
        /// The request.
        code: RequestCode,
        /// The answer's code.
        status: ResponseCode,
        /// Its remark.
        remark: Option<String>,
    },
    /// An answer's body does not parse.
    #[error("master's answer to {code:?} does not parse: {reason}")]
    Body {
        /// The request.
        code: RequestCode,
        /// Why.
        reason: String,
    },
    /// The delay cursors could not be written.
    #[error("delay cursors: {0}")]
    Cursor(#[source] std::io::Error),
    /// The request modes could not be written.
    #[error("request modes: {0}")]
    RequestModes(#[source] std::io::Error),
}

/// Starts the copy on this shard.
pub fn spawn(broker: &Rc<ShardBroker>, tasks: &Gate, stop: &StopSignal) {
    let copying = run(broker.clone(), stop.clone());
    if tasks
        .spawn("slave-metadata-sync", TaskClass::Housekeeping, copying)
        .is_err()
    {
        log::warn!(
            "{}: replication is stopping: no metadata copy",
            broker.shard
        );
    }
}

async fn run(broker: Rc<ShardBroker>, stop: StopSignal) {
    let mut link: Option<(String, NameServerLink)> = None;
    let mut opaque = 0i32;
    let mut round = 0u32;
    while !stop.is_triggered() {
        let Some(addr) = broker.replication.shared.master().broker_addr else {
            race(stop.wait(), sleep(NO_MASTER_POLL)).await;
            continue;
        };
        if link.as_ref().is_none_or(|(known, _)| *known != addr) {
            match parse_addr(&addr) {
                Ok(socket) => {
                    let tls = crate::namesrv_client::client_tls(&broker.config());
                    link = Some((addr.clone(), NameServerLink::new(socket, tls)));
                }
                Err(error) => {
                    log::warn!("slave metadata copy: {error}");
                    race(stop.wait(), sleep(SYNC_INTERVAL)).await;
                    continue;
                }
            }
        }
        if let Some((addr, link)) = link.as_mut() {
            let mut master = Master {
                addr,
                link,
                opaque: &mut opaque,
            };
            let full = round % OFFSET_SYNCS_PER_FULL == 0;
            match sync_once(&broker, &mut master, full).await {
                Ok(()) => round = round.wrapping_add(1),
                Err(error) => log::warn!("{}: slave metadata copy: {error}", broker.shard),
            }
        }
        race(stop.wait(), sleep(OFFSET_SYNC_INTERVAL)).await;
    }
}

/// The master's remoting port.
struct Master<'a> {
    addr: &'a str,
    link: &'a mut NameServerLink,
    opaque: &'a mut i32,
}

impl Master<'_> {
    async fn get<T: JsonBody>(&mut self, code: RequestCode) -> Result<T, SyncError> {
        *self.opaque = self.opaque.wrapping_add(1);
        let request = RemotingCommand::request(code, *self.opaque);
        let response = self
            .link
            .call(&request, CALL_WAIT_MAX)
            .await
            .map_err(|source| SyncError::Call {
                addr: self.addr.to_owned(),
                source,
            })?;
        if response.response_code() != ResponseCode::SUCCESS {
            return Err(SyncError::Refused {
                code,
                status: response.response_code(),
                remark: response.remark.clone(),
            });
        }
        T::decode(&response.body).map_err(|error| SyncError::Body {
            code,
            reason: error.to_string(),
        })
    }
}

/// One round of the copy: the consumer offsets, and with `full` the rest too.
async fn sync_once(
    broker: &ShardBroker,
    master: &mut Master<'_>,
    full: bool,
) -> Result<(), SyncError> {
    if full && broker.shard.0 == 0 {
        let topics: TopicConfigSerializeWrapper =
            master.get(RequestCode::GET_ALL_TOPIC_CONFIG).await?;
        apply_topics(broker, &topics);
        let groups: SubscriptionGroupWrapper = master
            .get(RequestCode::GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
            .await?;
        apply_groups(broker, &groups);
        let delays: DelayOffsetSerializeWrapper =
            master.get(RequestCode::GET_ALL_DELAY_OFFSET).await?;
        apply_delay_offsets(broker, &delays).await?;
        match master.get(RequestCode::GET_ALL_MESSAGE_REQUEST_MODE).await {
            Ok(modes) => apply_request_modes(broker, modes).await?,
            // A master that predates server-side assignment has no modes to copy.
            Err(SyncError::Refused {
                status: ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                ..
            }) => {}
            Err(error) => return Err(error),
        }
    }
    let offsets: ConsumerOffsetSerializeWrapper =
        master.get(RequestCode::GET_ALL_CONSUMER_OFFSET).await?;
    apply_consumer_offsets(broker, &offsets);
    Ok(())
}

/// The master's topic table replaces the slave's (as Java's slave clears and refills it).
fn apply_topics(broker: &ShardBroker, master: &TopicConfigSerializeWrapper) {
    let changed = {
        let mut topics = broker.metadata.topics();
        let stale: Vec<String> = topics
            .iter()
            .map(|config| config.topic_name.clone())
            .filter(|name| !master.topic_config_table.contains_key(name))
            .collect();
        let mut changed = false;
        for name in stale {
            changed |= topics.delete(&name);
        }
        for (name, config) in &master.topic_config_table {
            if topics.get(name) != Some(config) {
                topics.upsert(config.clone());
                changed = true;
            }
        }
        changed
    };
    if changed {
        broker.metadata.mark_topics_changed();
    }
}

/// The master's request modes replace the slave's, written to `messageRequestMode.json`
/// when they changed (Java's `SlaveSynchronize.syncMessageRequestMode`), so a promoted
/// slave tells consumers the modes the master did.
async fn apply_request_modes(
    broker: &ShardBroker,
    master: MessageRequestModeSerializeWrapper,
) -> Result<(), SyncError> {
    let changed = broker.metadata.assignment().modes().replace(master);
    if changed {
        let metadata = broker.metadata.clone();
        run_blocking(move || metadata.persist_request_modes())
            .await
            .map_err(SyncError::RequestModes)?;
    }
    Ok(())
}

/// The master's groups replace the slave's (persisted by the control loop).
fn apply_groups(broker: &ShardBroker, master: &SubscriptionGroupWrapper) {
    let mut groups = broker.metadata.groups();
    for name in groups.names() {
        if !master.subscription_group_table.contains_key(&name) {
            groups.delete(&name);
        }
    }
    for (name, config) in &master.subscription_group_table {
        if groups.get(name) != Some(config) {
            groups.upsert(config.clone());
        }
    }
}

/// Delay-level cursors move forward only; kept in shard 0's cursor file, which a start as
/// master merges with the others (largest wins).
async fn apply_delay_offsets(
    broker: &ShardBroker,
    master: &DelayOffsetSerializeWrapper,
) -> Result<(), SyncError> {
    let config_dir = broker.metadata.config_dir().to_path_buf();
    let by_queue: BTreeMap<i32, i64> = master
        .offset_table
        .iter()
        .filter_map(|(&level, &offset)| Some((level.checked_sub(1)?, offset)))
        .filter(|(queue_id, _)| *queue_id >= 0)
        .collect();
    run_blocking(move || {
        let held = cursor::load_all(&config_dir);
        let mut merged = held.clone();
        for (queue_id, offset) in by_queue {
            let slot = merged.entry(queue_id).or_insert(offset);
            *slot = (*slot).max(offset);
        }
        if merged == held {
            return Ok(());
        }
        cursor::store(&cursor::path(&config_dir, 0), &merged)
    })
    .await
    .map_err(SyncError::Cursor)
}

/// Offsets of the queues this shard owns, each only moving forward.
fn apply_consumer_offsets(broker: &ShardBroker, master: &ConsumerOffsetSerializeWrapper) {
    let mut offsets = broker.offsets.borrow_mut();
    merge_forward(&mut offsets, master, |topic, queue_id| {
        broker.owns(crate::transaction::offset_owner_topic(topic), queue_id)
    });
}

/// Takes each of `master`'s offsets that `owns` accepts and that is ahead of the table's.
fn merge_forward(
    offsets: &mut OffsetTable,
    master: &ConsumerOffsetSerializeWrapper,
    owns: impl Fn(&str, i32) -> bool,
) {
    for (key, queues) in &master.offset_table {
        let Some((topic, group)) = key.split_once('@') else {
            continue;
        };
        for (&queue_id, &offset) in queues {
            if queue_id < 0 || !owns(topic, queue_id) {
                continue;
            }
            let held = offsets.query(group, topic, queue_id);
            if held.is_none_or(|held| held < offset) {
                offsets.commit(group, topic, queue_id, offset);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the offset merge: the master's newer offsets arrive, an older master offset
    // never moves a newer slave offset back, and malformed keys are skipped.
    #[test]
    fn consumer_offsets_only_move_forward() {
        let mut table = OffsetTable::new();
        table.commit("g", "t", 0, 50);
        let mut master = ConsumerOffsetSerializeWrapper::default();
        master
            .offset_table
            .insert("t@g".to_owned(), BTreeMap::from([(0, 40), (1, 7)]));
        master
            .offset_table
            .insert("no-separator".to_owned(), BTreeMap::from([(0, 1)]));
        let owns = |_: &str, _: i32| true;
        merge_forward(&mut table, &master, owns);
        assert_eq!(table.query("g", "t", 0), Some(50), "never backwards");
        assert_eq!(table.query("g", "t", 1), Some(7));
        master
            .offset_table
            .insert("t@g".to_owned(), BTreeMap::from([(0, 60)]));
        merge_forward(&mut table, &master, owns);
        assert_eq!(table.query("g", "t", 0), Some(60));
    }
}
