//! The consumer figures a shard computes from the queues it owns when a scrape asks
//! (`crate::metrics::consumer` holds what they are and how shards' figures merge; the bounds
//! below keep one scrape's work fixed whatever the number of groups and queues).

use comet_proto::body::ConsumeType;
use comet_proto::message::RecordView;
use comet_proto::names::is_retry_topic;
use comet_store::QueueOffset;

use crate::metrics::consumer::{LagFigures, LagKey, ShardConsumerFigures};
use crate::shard::ShardBroker;
use crate::topic::perm;

/// Queues one shard examines per scrape at most (each costs a few map lookups).
pub const QUEUES_PER_SCRAPE_MAX: usize = 16_384;
/// Store-time reads one shard makes per scrape at most (each reads a consume-queue entry and
/// a record's header, from memory or disk). Only queues behind need one: two per queue at
/// most, one for the lag and one for the queueing latency.
pub const STORE_TIME_READS_PER_SCRAPE_MAX: usize = 2048;
/// Groups (with consumers online) one scrape looks at at most.
pub const GROUPS_PER_SCRAPE_MAX: usize = 10_000;

/// Store time of the oldest record the logs of this shard hold (one record read per log;
/// Java's `getEarliestMessageTime`); `None` when they hold none.
pub async fn earliest_store_time(broker: &ShardBroker) -> Option<i64> {
    let logs = std::iter::once(broker.own_log()).chain(broker.hosted_logs().iter().cloned());
    let mut earliest: Option<i64> = None;
    for log in logs {
        if log.store.written_position() <= log.store.min_position() {
            continue;
        }
        let first = log.store.min_physical_offset();
        let time = match log.store.read_record(first).await {
            Ok(Some(record)) => RecordView::parse(&record)
                .ok()
                .map(|view| view.store_timestamp()),
            Ok(None) => None,
            Err(error) => {
                log::debug!("metrics: the oldest record at {first:?}: {error}");
                None
            }
        };
        if let Some(time) = time.filter(|time| *time > 0) {
            earliest = Some(earliest.map_or(time, |known| known.min(time)));
        }
    }
    earliest
}

/// A group with consumers online: its name, whether it pops, and the topics it subscribes.
struct OnlineGroup {
    group: String,
    pop: bool,
    topics: Vec<(String, i32)>,
}

/// The groups Java's `processAllGroup` visits, with each topic's write queue count.
fn online_groups(broker: &ShardBroker) -> Vec<OnlineGroup> {
    let mut groups: Vec<OnlineGroup> = {
        let clients = broker.clients();
        clients
            .consumer_groups()
            .take(GROUPS_PER_SCRAPE_MAX)
            .map(|(group, members)| OnlineGroup {
                group: group.to_owned(),
                pop: members.consume_type == ConsumeType::CONSUME_POP,
                topics: members
                    .subscriptions
                    .keys()
                    .filter(|topic| !is_retry_topic(topic))
                    .map(|topic| (topic.clone(), 0))
                    .collect(),
            })
            .collect()
    };
    {
        let table = broker.groups();
        groups.retain(|group| table.get(&group.group).is_some());
    }
    let broker_perm = broker.config().broker_permission;
    let topics = broker.topics();
    for group in &mut groups {
        group.topics.retain_mut(|(topic, queues)| {
            let Some(config) = topics.get(topic) else {
                return false;
            };
            let allowed = config.perm & broker_perm;
            *queues = config.write_queue_nums.max(0);
            perm::is_readable(allowed) || perm::is_writable(allowed)
        });
    }
    groups.sort_by(|left, right| left.group.cmp(&right.group));
    groups
}

/// What one computation may still spend.
struct Budget {
    queues: usize,
    store_time_reads: usize,
}

/// This shard's figures for the queues it owns (see the module docs).
pub async fn compute(broker: &ShardBroker) -> ShardConsumerFigures {
    let mut figures = ShardConsumerFigures {
        earliest_store_time_ms: earliest_store_time(broker).await,
        half_messages: super::half::pending_halves(broker).await,
        ..ShardConsumerFigures::default()
    };
    let mut budget = Budget {
        queues: QUEUES_PER_SCRAPE_MAX,
        store_time_reads: STORE_TIME_READS_PER_SCRAPE_MAX,
    };
    for group in online_groups(broker) {
        for (topic, queue_count) in &group.topics {
            let key = LagKey {
                group: group.group.clone(),
                topic: topic.clone(),
                is_retry: false,
            };
            let owned: Vec<i32> = (0..*queue_count)
                .filter(|queue_id| broker.owns(topic, *queue_id))
                .collect();
            if owned.len() > budget.queues || 2 * owned.len() > budget.store_time_reads {
                figures.skipped.push(key);
                continue;
            }
            budget.queues -= owned.len();
            let mut sum = LagFigures::default();
            for queue_id in owned {
                let queue = queue_figures(broker, &group, topic, queue_id, &mut budget).await;
                sum.add(&queue);
            }
            figures.series.insert(key, sum);
        }
    }
    figures
}

/// One queue's figures.
async fn queue_figures(
    broker: &ShardBroker,
    group: &OnlineGroup,
    topic: &str,
    queue_id: i32,
    budget: &mut Budget,
) -> LagFigures {
    let store = broker.queue_store(topic, queue_id);
    let max = store.max_offset(topic, queue_id).as_i64();
    let (committed, pulled) = {
        let offsets = broker.offsets().borrow();
        let committed = offsets.query(&group.group, topic, queue_id);
        (committed, offsets.query_pull(&group.group, topic, queue_id))
    };
    // No committed offset: nothing counts as behind (Java takes the max offset).
    let consumed = committed.unwrap_or(max).clamp(0, max);
    let pulled = pulled.or(committed).unwrap_or(max).clamp(0, max);
    let ready_messages = u64::try_from(max - pulled).unwrap_or(0);
    if group.pop {
        return LagFigures {
            ready_messages,
            ..LagFigures::default()
        };
    }
    let mut store_time = |offset: i64| {
        let wanted = offset < max && budget.store_time_reads > 0;
        if wanted {
            budget.store_time_reads -= 1;
        }
        async move {
            if !wanted {
                return None;
            }
            let at = QueueOffset(u64::try_from(offset).unwrap_or(0));
            match store.store_time_at(topic, queue_id, at).await {
                Ok(time) => time.filter(|time| *time > 0),
                Err(error) => {
                    log::debug!("metrics: store time of {topic}:{queue_id}@{offset}: {error}");
                    None
                }
            }
        }
    };
    let earliest_unconsumed_ms = store_time(consumed).await;
    let earliest_unpulled_ms = store_time(pulled).await;
    LagFigures {
        lag_messages: Some(u64::try_from(max - consumed).unwrap_or(0)),
        earliest_unconsumed_ms,
        inflight_messages: Some(u64::try_from(pulled.max(consumed) - consumed).unwrap_or(0)),
        earliest_unpulled_ms,
        ready_messages,
    }
}
