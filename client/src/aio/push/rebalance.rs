//! The service task (rebalance, offset persistence, heartbeats, lock renewal) and what a
//! rebalance does to the queue table.
//!
//! Rebalance order for a changed assignment, as the blocking consumer's: drop the queues
//! taken away (stop pulling, persist their offset, unlock them once no listener works on
//! them), create the new ones (orderly: locked at the broker first; initial offset per
//! consume-from-where), bump the topic's `subVersion` and heartbeat
//! (docs/protocol.md#subscription-version-before-pulling), then start pulling the new ones.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::{Inner, QueueState};
use crate::config::now_ms;
use crate::consumer::core::Subscription;
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::retry_topic;
use crate::error::Result;
use crate::message::MessageQueue;
use crate::util::lock;

/// Next rebalance after one that could not allocate a topic or lock a queue (5.x
/// `minInterval`).
const REBALANCE_RETRY_INTERVAL: Duration = Duration::from_secs(1);
/// Broker lock renewal period of orderly consumers (Java `REBALANCE_LOCK_INTERVAL`).
const LOCK_RENEW_INTERVAL: Duration = Duration::from_secs(20);
/// First offset persistence after start (Java: 10 s).
const FIRST_PERSIST_DELAY: Duration = Duration::from_secs(10);
/// Smallest per-queue byte threshold derived from a per-topic one.
const MIB: usize = 1024 * 1024;

impl Inner {
    /// First registration and rebalance, then the service task.
    pub(super) async fn start(self: &Arc<Self>) {
        self.started_ms
            .store(now_ms(), std::sync::atomic::Ordering::Relaxed);
        if !self.is_lite() && self.clustering() {
            // Failed messages come back through the retry topic
            // (docs/protocol.md#push-consumer-conversation).
            let retry = retry_topic(&self.config.consumer.group);
            lock(&self.subscriptions)
                .entry(retry)
                .or_insert_with(Subscription::all);
        }
        let topics: Vec<String> = lock(&self.subscriptions).keys().cloned().collect();
        for topic in &topics {
            if let Err(error) = self.routes.route(topic).await {
                log::debug!("first route fetch of {topic} failed: {error}");
            }
        }
        self.heartbeat_all().await;
        let balanced = self.rebalance().await;
        let service = tokio::spawn(self.clone().service(balanced));
        *lock(&self.service) = Some(service);
    }

    async fn service(self: Arc<Self>, balanced: bool) {
        let config = &self.config.consumer;
        let start = Instant::now();
        let mut next_rebalance = start + self.rebalance_wait(balanced);
        let mut next_persist = start + FIRST_PERSIST_DELAY;
        let mut next_heartbeat = start + config.client.heartbeat_broker_interval;
        let mut next_lock = start + LOCK_RENEW_INTERVAL;
        loop {
            let next = next_rebalance
                .min(next_persist)
                .min(next_heartbeat)
                .min(next_lock);
            let requested = tokio::select! {
                () = tokio::time::sleep_until(next) => false,
                () = self.wake.notified() => true,
            };
            if self.is_stopping() {
                return;
            }
            let now = Instant::now();
            if requested || now >= next_rebalance {
                let balanced = self.rebalance().await;
                next_rebalance = Instant::now() + self.rebalance_wait(balanced);
            }
            if now >= next_persist {
                let queues: Vec<MessageQueue> = lock(&self.table).keys().cloned().collect();
                self.persist_offsets(&queues).await;
                next_persist = Instant::now() + config.client.persist_consumer_offset_interval;
            }
            if now >= next_heartbeat {
                self.heartbeat_all().await;
                next_heartbeat = Instant::now() + config.client.heartbeat_broker_interval;
            }
            if now >= next_lock {
                if self.orderly {
                    self.lock_all().await;
                }
                next_lock = Instant::now() + LOCK_RENEW_INTERVAL;
            }
        }
    }

    fn rebalance_wait(&self, balanced: bool) -> Duration {
        let interval = self.config.consumer.rebalance_interval;
        if balanced {
            interval
        } else {
            REBALANCE_RETRY_INTERVAL.min(interval)
        }
    }

    /// One pass over every subscribed topic. False when a topic (other than the retry
    /// topic, which appears only once the broker creates it) could not be allocated, or an
    /// orderly queue could not be locked yet: the next pass then comes soon.
    pub(super) async fn rebalance(self: &Arc<Self>) -> bool {
        let _one_pass = self.rebalancing.lock().await;
        self.heartbeat_new_brokers().await;
        let mut balanced = true;
        let mut created = Vec::new();
        let mut changed_topics = Vec::new();
        let topics: Vec<String> = lock(&self.subscriptions).keys().cloned().collect();
        for topic in topics {
            if self.is_stopping() {
                return true;
            }
            match self.allocate_topic(&topic).await {
                Ok(queues) => {
                    let (changed, new, all_locked) = self.update_table(&topic, queues).await;
                    if changed {
                        changed_topics.push(topic.clone());
                    }
                    balanced &= all_locked;
                    created.extend(new);
                    self.update_topic_thresholds(&topic);
                }
                Err(error) => {
                    log::debug!("rebalance of {topic} skipped: {error}");
                    balanced &= comet_proto::names::is_retry_topic(&topic);
                }
            }
        }
        self.drop_unsubscribed().await;
        if !changed_topics.is_empty() {
            let now = now_ms();
            {
                let mut subscriptions = lock(&self.subscriptions);
                for topic in &changed_topics {
                    if let Some(subscription) = subscriptions.get_mut(topic) {
                        subscription.sub_version = subscription.sub_version.max(now);
                    }
                }
            }
            self.heartbeat_all().await;
        }
        for state in created {
            self.start_pulling(state);
        }
        balanced
    }

    /// Queues of `topic` this consumer owns now.
    async fn allocate_topic(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        if let Some(fixed) = self.assigned() {
            return Ok(fixed.into_iter().filter(|q| q.topic == topic).collect());
        }
        let route = self.routes.route(topic).await?;
        let all = route.subscribe.clone();
        if !self.clustering() {
            return Ok(all);
        }
        let ids = self.consumer_ids(topic).await?;
        if ids.is_empty() {
            return Err(crate::error::ClientError::State(
                "the broker lists no consumer for the group",
            ));
        }
        Ok(self
            .config
            .consumer
            .allocate
            .allocate(&all, &ids, &self.client_id))
    }

    /// Applies an assignment: (changed, queues created, every orderly queue locked).
    async fn update_table(
        self: &Arc<Self>,
        topic: &str,
        assigned: Vec<MessageQueue>,
    ) -> (bool, Vec<Arc<QueueState>>, bool) {
        let assigned: BTreeSet<MessageQueue> = assigned.into_iter().collect();
        let removed: Vec<Arc<QueueState>> = {
            let mut table = lock(&self.table);
            let gone: Vec<MessageQueue> = table
                .keys()
                .filter(|queue| queue.topic == topic && !assigned.contains(*queue))
                .cloned()
                .collect();
            gone.iter()
                .filter_map(|queue| table.remove(queue))
                .collect()
        };
        let mut changed = !removed.is_empty();
        self.release_taken(&removed).await;
        let mut created = Vec::new();
        let mut all_locked = true;
        for queue in assigned {
            if self.is_stopping() {
                break;
            }
            if lock(&self.table).contains_key(&queue) {
                continue;
            }
            if self.orderly && !self.lock_queue(&queue).await {
                all_locked = false;
                continue;
            }
            match self.initial_offset(&queue).await {
                Ok(offset) => {
                    let state = Arc::new(QueueState::new(ProcessQueue::new(queue.clone(), offset)));
                    if self.orderly {
                        state.pq.set_locked(true);
                    }
                    lock(&self.table).insert(queue, state.clone());
                    created.push(state);
                    changed = true;
                }
                Err(error) => {
                    log::warn!("no start offset for {queue:?}, retrying next rebalance: {error}");
                    if self.orderly {
                        self.unlock_queues(std::slice::from_ref(&queue)).await;
                    }
                }
            }
        }
        (changed, created, all_locked)
    }

    /// Java `pullThresholdForTopic` / `pullThresholdSizeForTopic`: the per-queue thresholds
    /// become the topic's divided among the queues this consumer holds of it.
    fn update_topic_thresholds(&self, topic: &str) {
        let (by_messages, by_bytes) = (
            self.config.pull_threshold_messages_per_topic,
            self.config.pull_threshold_bytes_per_topic,
        );
        if by_messages.is_none() && by_bytes.is_none() {
            return;
        }
        let queues = lock(&self.table)
            .keys()
            .filter(|queue| queue.topic == topic)
            .count()
            .max(1);
        let consumer = &self.config.consumer;
        let messages = by_messages.map_or(consumer.pull_threshold_messages_per_queue, |total| {
            (total / queues).max(1)
        });
        let bytes = by_bytes.map_or(consumer.pull_threshold_bytes_per_queue, |total| {
            (total / queues).max(MIB)
        });
        lock(&self.topic_thresholds).insert(topic.to_owned(), (messages, bytes));
    }

    async fn drop_unsubscribed(self: &Arc<Self>) {
        let subscriptions: BTreeSet<String> = lock(&self.subscriptions).keys().cloned().collect();
        let orphans: Vec<Arc<QueueState>> = {
            let mut table = lock(&self.table);
            let gone: Vec<MessageQueue> = table
                .keys()
                .filter(|queue| !subscriptions.contains(&queue.topic))
                .cloned()
                .collect();
            gone.iter()
                .filter_map(|queue| table.remove(queue))
                .collect()
        };
        self.release_taken(&orphans).await;
    }

    /// Gives up queues a rebalance took away. Concurrent: at once. Orderly: pulling stops at
    /// once, and a task releases them once no listener works on them (Java waits for the
    /// consume lock too), so a listener that takes long holds up neither this pass nor the
    /// next; a queue assigned back meanwhile keeps its lock.
    async fn release_taken(self: &Arc<Self>, states: &[Arc<QueueState>]) {
        if !self.orderly {
            self.release_queues(states).await;
            return;
        }
        for state in states {
            state.stop_pulling();
        }
        let (inner, states) = (self.clone(), states.to_vec());
        let task = tokio::spawn(async move {
            let mut guards = Vec::with_capacity(states.len());
            for state in &states {
                guards.push(state.consume_lock.lock().await);
            }
            let taken_back = |queue: &MessageQueue| lock(&inner.table).contains_key(queue);
            let queues: Vec<MessageQueue> = states
                .iter()
                .map(|state| state.pq.queue.clone())
                .filter(|queue| !taken_back(queue))
                .collect();
            inner.persist_offsets(&queues).await;
            inner.unlock_queues(&queues).await;
            if inner.clustering() {
                let mut offsets = lock(&inner.offsets);
                for queue in &queues {
                    offsets.remove(queue);
                }
            }
        });
        let mut releasing = lock(&self.releasing);
        releasing.retain(|task| !task.is_finished());
        releasing.push(task);
    }

    /// Gives queues up now (shutdown, after listeners were cancelled; or a concurrent
    /// consumer's rebalance): stops pulling, persists and forgets their offsets, and for an
    /// orderly consumer unlocks them at the broker once no listener works on them (the lock
    /// of a queue being consumed is not given to another consumer before its batch ends).
    pub(super) async fn release_queues(&self, states: &[Arc<QueueState>]) {
        if states.is_empty() {
            return;
        }
        for state in states {
            state.stop_pulling();
        }
        let queues: Vec<MessageQueue> = states.iter().map(|s| s.pq.queue.clone()).collect();
        if self.orderly {
            let mut guards = Vec::with_capacity(states.len());
            for state in states {
                guards.push(state.consume_lock.lock().await);
            }
            self.persist_offsets(&queues).await;
            self.unlock_queues(&queues).await;
            drop(guards);
        } else {
            self.persist_offsets(&queues).await;
        }
        // The local file (broadcasting) keeps every queue's offset.
        if self.clustering() {
            let mut offsets = lock(&self.offsets);
            for queue in &queues {
                offsets.remove(queue);
            }
        }
    }

    /// Renews the broker locks of every assigned queue, broker by broker.
    async fn lock_all(&self) {
        let mut by_broker: BTreeMap<String, Vec<Arc<QueueState>>> = BTreeMap::new();
        for state in lock(&self.table).values() {
            by_broker
                .entry(state.pq.queue.broker_name.clone())
                .or_default()
                .push(state.clone());
        }
        for (broker, states) in by_broker {
            let queues: Vec<MessageQueue> = states.iter().map(|s| s.pq.queue.clone()).collect();
            match self.lock_batch(&broker, &queues).await {
                Ok(locked) => {
                    for state in states {
                        state.pq.set_locked(locked.contains(&state.pq.queue));
                    }
                }
                Err(error) => log::debug!("renewing locks on {broker} failed: {error}"),
            }
        }
    }

    pub(super) fn start_pulling(self: &Arc<Self>, state: Arc<QueueState>) {
        if self.is_stopping() || state.pq.is_dropped() {
            return;
        }
        let mut slot = lock(&state.pull_task);
        let task = tokio::spawn(self.clone().pull_loop(state.clone()));
        *slot = Some(task);
        drop(slot);
        // A drop that ran between the check and the spawn did not see the task.
        if state.pq.is_dropped() {
            state.stop_pulling();
        }
    }
}
