//! What the push and lite pull consumers share: subscriptions, rebalance, the per-queue pull
//! threads and offsets (docs/protocol.md#queue-lists-and-allocation,
//! docs/protocol.md#client-timings and docs/protocol.md#push-consumer-conversation).
//!
//! Threads:
//! * `comet-rebalance`: rebalance every 20 s and on request (start, NOTIFY_CONSUMER_IDS_
//!   CHANGED, subscribe), persist offsets every 5 s (first after 10 s), renew queue locks
//!   every 20 s for orderly clustering consumers;
//! * `comet-pull-*`: one per assigned queue, a blocking long-poll loop that pauses under
//!   flow control and stops when its queue is dropped or the consumer stops.
//!
//! Rebalance order for a changed assignment: drop the queues taken away (persist their
//! offset, unlock them), create the new ones (initial offset per consume-from-where), bump
//! the topic's `subVersion` and heartbeat
//! (docs/protocol.md#subscription-version-before-pulling), then start pulling the new queues.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, Weak};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use comet_proto::body::{
    ConsumeMessageDirectlyResult, ConsumerRunningInfo, ProcessQueueInfo, PROP_CLIENT_VERSION,
    PROP_CONSUMER_START_TIMESTAMP, PROP_CONSUME_ORDERLY, PROP_CONSUME_TYPE, PROP_NAMESERVER_ADDR,
};
use comet_proto::filter::TagSubscription;
use comet_proto::flags::pull as pull_flag;
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::names;
use comet_proto::ResponseCode;

use super::offset_store::{Backend, OffsetStore};
use super::process_queue::ProcessQueue;
use super::{retry_topic, ConsumeFromWhere, ConsumerConfig, MessageModel};
use crate::config::now_ms;
use crate::error::{ClientError, Result};
use crate::instance::{ClientInstance, ConsumerMember};
use crate::message::MessageQueue;
use crate::protocol::{
    self, ConsumeType, ConsumerData, PullRequest, PullResponseHeader, SubscriptionData,
    WireConsumeFromWhere, WireMessageModel,
};
use crate::rebalance::allocate::java_string_cmp;
use crate::route;
use crate::util::lock;

/// What a consumer does with pulled messages.
pub(crate) trait Delivery: Send + Sync {
    /// New messages are in `queue` (already put, already filtered).
    fn deliver(&self, queue: &Arc<ProcessQueue>, messages: Vec<MessageExt>);
    /// The queue was taken away or the consumer stopped.
    fn on_dropped(&self, queue: &Arc<ProcessQueue>) {
        let _ = queue;
    }
    /// CONSUME_MESSAGE_DIRECTLY: runs the listener on `message` alone, outside any process
    /// queue; `None` when this consumer has no listener (a pull consumer), as in Java.
    fn consume_directly(
        &self,
        message: MessageExt,
        broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        let _ = (message, broker_name);
        None
    }
}

/// One subscribed topic.
#[derive(Clone, Debug)]
pub(crate) struct Subscription {
    pub tags: TagSubscription,
    pub sub_version: i64,
}

/// What applying one topic's assignment did.
struct TableUpdate {
    /// Queues were added or dropped.
    changed: bool,
    /// Process queues created (to start pulling).
    created: Vec<Arc<ProcessQueue>>,
    /// False when an orderly queue could not be locked at the broker (still held by its
    /// previous owner), so it was left out for now.
    all_locked: bool,
}

/// Shared consumer machinery.
pub(crate) struct ConsumerCore {
    weak_self: Weak<ConsumerCore>,
    pub config: ConsumerConfig,
    pub instance: Arc<ClientInstance>,
    pub offsets: OffsetStore,
    pub orderly: bool,
    lite: bool,
    subscriptions: Mutex<BTreeMap<String, Subscription>>,
    table: Mutex<HashMap<MessageQueue, Arc<ProcessQueue>>>,
    assigned: Mutex<Option<BTreeSet<MessageQueue>>>,
    delivery: OnceLock<Weak<dyn Delivery>>,
    pull_threads: Mutex<Vec<JoinHandle<()>>>,
    service: Mutex<Option<JoinHandle<()>>>,
    /// Held for the duration of a rebalance pass.
    rebalancing: Mutex<()>,
    stopped: AtomicBool,
    /// Wall clock at start, ms (GET_CONSUMER_RUNNING_INFO reports it).
    started_ms: AtomicI64,
    signal: Mutex<bool>,
    wake: Condvar,
}

impl ConsumerCore {
    pub(crate) fn new(
        mut config: ConsumerConfig,
        orderly: bool,
        lite: bool,
    ) -> Result<Arc<ConsumerCore>> {
        config.group = config.client.wrap_name(&config.group);
        crate::validate::check_group(&config.group)?;
        crate::validate::check_allocate(&config.allocate)?;
        if config.client.namesrv_addrs.is_empty() {
            return Err(ClientError::NameServer(
                "no name server address configured".into(),
            ));
        }
        let instance = ClientInstance::new(config.client.clone());
        let backend = match config.message_model {
            MessageModel::Clustering => Backend::Remote,
            MessageModel::Broadcasting => Backend::Local(super::offset_store::local_path(
                &config.local_offset_dir,
                instance.client_id(),
                &config.group,
            )),
        };
        let offsets = OffsetStore::new(&config.group, instance.clone(), backend);
        Ok(Arc::new_cyclic(|weak_self| ConsumerCore {
            weak_self: weak_self.clone(),
            config,
            instance,
            offsets,
            orderly,
            lite,
            subscriptions: Mutex::new(BTreeMap::new()),
            table: Mutex::new(HashMap::new()),
            assigned: Mutex::new(None),
            delivery: OnceLock::new(),
            pull_threads: Mutex::new(Vec::new()),
            service: Mutex::new(None),
            rebalancing: Mutex::new(()),
            stopped: AtomicBool::new(false),
            started_ms: AtomicI64::new(0),
            signal: Mutex::new(false),
            wake: Condvar::new(),
        }))
    }

    /// Moves assigned queues of `topic` to the given offsets (the broker's
    /// RESET_CONSUMER_CLIENT_OFFSET): each restarts pulling there and the offset is stored.
    pub(crate) fn reset_offsets(&self, topic: &str, offsets: &BTreeMap<MessageQueue, i64>) {
        let Some(core) = self.weak_self.upgrade() else {
            return;
        };
        for pq in self.process_queues() {
            if pq.queue.topic != topic {
                continue;
            }
            if let Some(offset) = offsets.get(&pq.queue) {
                log::info!("resetting {:?} to offset {offset}", pq.queue);
                core.reset_queue(&pq, *offset);
                if let Err(error) = self.offsets.persist(&pq.queue) {
                    log::warn!(
                        "persisting the reset offset of {:?} failed: {error}",
                        pq.queue
                    );
                }
            }
        }
    }

    pub(crate) fn set_delivery(&self, delivery: Weak<dyn Delivery>) {
        assert!(self.delivery.set(delivery).is_ok(), "delivery set twice");
    }

    /// Adds or replaces a subscription (`*`, empty, or `TagA || TagB`).
    pub(crate) fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        let topic = &self.config.client.wrap_name(topic);
        crate::validate::check_topic(topic)?;
        let subscription = Subscription {
            tags: TagSubscription::parse(Some(expression)),
            sub_version: now_ms(),
        };
        lock(&self.subscriptions).insert(topic.to_owned(), subscription);
        self.request_rebalance();
        Ok(())
    }

    /// Removes a subscription.
    pub(crate) fn unsubscribe(&self, topic: &str) {
        lock(&self.subscriptions).remove(&self.config.client.wrap_name(topic));
        self.request_rebalance();
    }

    /// Fixes the assignment (lite pull `assign`): no rebalance, no group membership. On a
    /// started consumer the assignment is applied before this returns, as Java's `assign`
    /// does, so a `seek` right after it finds the queues.
    pub(crate) fn assign(self: &Arc<Self>, queues: Vec<MessageQueue>) {
        let client = &self.config.client;
        let queues: Vec<MessageQueue> = queues
            .iter()
            .map(|queue| {
                MessageQueue::new(
                    client.wrap_name(&queue.topic),
                    &queue.broker_name,
                    queue.queue_id,
                )
            })
            .collect();
        for queue in &queues {
            lock(&self.subscriptions)
                .entry(queue.topic.clone())
                .or_insert_with(|| Subscription {
                    tags: TagSubscription::all(),
                    sub_version: now_ms(),
                });
        }
        *lock(&self.assigned) = Some(queues.into_iter().collect());
        if lock(&self.service).is_some() && !self.is_stopped() {
            self.rebalance();
        } else {
            self.request_rebalance();
        }
    }

    /// Starts the service thread (first rebalance at once) and registers the group.
    pub(crate) fn start(self: &Arc<Self>) -> Result<()> {
        self.offsets.load()?;
        self.started_ms.store(now_ms(), Ordering::Relaxed);
        if self.config.message_model == MessageModel::Clustering && !self.lite {
            // Failed messages come back through the retry topic
            // (docs/protocol.md#push-consumer-conversation).
            let retry = retry_topic(&self.config.group);
            lock(&self.subscriptions)
                .entry(retry)
                .or_insert_with(|| Subscription {
                    tags: TagSubscription::all(),
                    sub_version: now_ms(),
                });
        }
        self.instance.register_consumer(self.clone());
        self.instance.start();
        for topic in lock(&self.subscriptions).keys() {
            if let Err(error) = self.instance.update_route(topic) {
                log::debug!("first route fetch of {topic} failed: {error}");
            }
        }
        self.instance.heartbeat_all();
        let weak = Arc::downgrade(self);
        let handle = thread::Builder::new()
            .name("comet-rebalance".into())
            .spawn(move || service_main(weak))
            .map_err(|error| ClientError::State(leak_reason(&error)))?;
        *lock(&self.service) = Some(handle);
        self.request_rebalance();
        Ok(())
    }

    pub(crate) fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Acquire)
    }

    pub(crate) fn request_rebalance(&self) {
        *lock(&self.signal) = true;
        self.wake.notify_all();
    }

    /// Sleeps up to `duration`, returning early when the consumer stops.
    pub(crate) fn pause(&self, duration: Duration) {
        let guard = lock(&self.signal);
        let _released = self
            .wake
            .wait_timeout_while(guard, duration, |_| !self.is_stopped());
    }

    /// Snapshot of the assigned queues.
    pub(crate) fn process_queues(&self) -> Vec<Arc<ProcessQueue>> {
        lock(&self.table).values().cloned().collect()
    }

    /// The process queue of `queue`, if assigned.
    pub(crate) fn process_queue(&self, queue: &MessageQueue) -> Option<Arc<ProcessQueue>> {
        lock(&self.table).get(queue).cloned()
    }

    /// One rebalance pass over every subscribed topic.
    /// Returns false when a subscribed topic (other than the retry topic, which appears
    /// only after the broker creates it) could not be allocated, or an orderly queue could
    /// not be locked yet, so the caller retries soon instead of after the full interval (as
    /// the 5.x client does when unbalanced).
    pub(crate) fn rebalance(self: &Arc<Self>) -> bool {
        // One pass at a time: `assign` may run one on the caller's thread while the service
        // thread runs another, and two passes would both create a queue's process queue.
        let _one_pass = lock(&self.rebalancing);
        let mut balanced = true;
        let mut created = Vec::new();
        let mut changed_topics = Vec::new();
        let fixed = lock(&self.assigned).clone();
        let topics: Vec<String> = lock(&self.subscriptions).keys().cloned().collect();
        for topic in topics {
            let assignment = match &fixed {
                Some(queues) => Ok(queues
                    .iter()
                    .filter(|q| q.topic == topic)
                    .cloned()
                    .collect()),
                None => self.allocate_topic(&topic),
            };
            match assignment {
                Ok(queues) => {
                    let update = self.update_table(&topic, queues);
                    if update.changed {
                        changed_topics.push(topic);
                    }
                    // A queue whose broker lock is still held by the previous owner is
                    // retried soon, as the 5.x client does (`rebalanceLater(500)`), not
                    // after the full interval.
                    balanced &= update.all_locked;
                    created.extend(update.created);
                }
                Err(error) => {
                    log::debug!("rebalance of {topic} skipped: {error}");
                    balanced &= comet_proto::names::is_retry_topic(&topic);
                }
            }
        }
        self.drop_unsubscribed();
        if !changed_topics.is_empty() {
            let now = now_ms();
            let mut subscriptions = lock(&self.subscriptions);
            for topic in &changed_topics {
                if let Some(subscription) = subscriptions.get_mut(topic) {
                    subscription.sub_version = subscription.sub_version.max(now);
                }
            }
            drop(subscriptions);
            self.instance.heartbeat_all();
        }
        for queue in created {
            self.start_pulling(queue);
        }
        balanced
    }

    /// Queues of `topic` this consumer owns now.
    fn allocate_topic(&self, topic: &str) -> Result<Vec<MessageQueue>> {
        let route = match self.instance.routes().get(topic) {
            Some(route) => route,
            None => self.instance.route(topic)?,
        };
        let all = route.subscribe.clone();
        if self.config.message_model == MessageModel::Broadcasting {
            return Ok(all);
        }
        let addr = route
            .data
            .broker_datas
            .iter()
            .filter_map(|broker| {
                broker
                    .master_addr()
                    .or(broker.broker_addrs.values().next().map(String::as_str))
            })
            .nth(route::random_index(route.data.broker_datas.len()))
            .map(str::to_owned)
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: "no broker address in the route".into(),
            })?;
        let response = self.instance.invoke_broker(
            &addr,
            protocol::get_consumer_list(&self.config.group),
            &[ResponseCode::SUCCESS],
        )?;
        let list: protocol::GetConsumerListByGroupResponseBody =
            protocol::decode_body("consumerIdList", &response.body)?;
        let mut ids = list.consumer_id_list;
        if ids.is_empty() {
            return Err(ClientError::State(
                "the broker lists no consumer for the group",
            ));
        }
        ids.sort_by(|a, b| java_string_cmp(a, b));
        Ok(self
            .config
            .allocate
            .allocate(&all, &ids, self.instance.client_id()))
    }

    /// Applies an assignment to the table.
    fn update_table(&self, topic: &str, assigned: Vec<MessageQueue>) -> TableUpdate {
        let assigned: BTreeSet<MessageQueue> = assigned.into_iter().collect();
        let current: Vec<Arc<ProcessQueue>> = lock(&self.table)
            .values()
            .filter(|pq| pq.queue.topic == topic)
            .cloned()
            .collect();
        let mut changed = false;
        for pq in &current {
            if !assigned.contains(&pq.queue) {
                lock(&self.table).remove(&pq.queue);
                self.drop_queue(pq);
                changed = true;
            }
        }
        let mut created = Vec::new();
        let mut all_locked = true;
        for queue in assigned {
            if lock(&self.table).contains_key(&queue) {
                continue;
            }
            if self.orderly
                && self.config.message_model == MessageModel::Clustering
                && !self.lock_queue(&queue)
            {
                all_locked = false;
                continue;
            }
            match self.initial_offset(&queue) {
                Ok(offset) => {
                    let pq = Arc::new(ProcessQueue::new(queue.clone(), offset));
                    if self.orderly {
                        pq.set_locked(self.config.message_model == MessageModel::Clustering);
                    }
                    lock(&self.table).insert(queue, pq.clone());
                    created.push(pq);
                    changed = true;
                }
                Err(error) => {
                    log::warn!("no start offset for {queue:?}, retrying next rebalance: {error}")
                }
            }
        }
        TableUpdate {
            changed,
            created,
            all_locked,
        }
    }

    fn drop_unsubscribed(&self) {
        let subscriptions: BTreeSet<String> = lock(&self.subscriptions).keys().cloned().collect();
        let orphans: Vec<Arc<ProcessQueue>> = lock(&self.table)
            .values()
            .filter(|pq| !subscriptions.contains(&pq.queue.topic))
            .cloned()
            .collect();
        for pq in orphans {
            lock(&self.table).remove(&pq.queue);
            self.drop_queue(&pq);
        }
    }

    /// Stops a queue: no more pulls or commits, offset persisted, lock released.
    fn drop_queue(&self, pq: &Arc<ProcessQueue>) {
        pq.set_dropped();
        if let Err(error) = self.offsets.persist(&pq.queue) {
            log::warn!(
                "persisting the offset of dropped {:?} failed: {error}",
                pq.queue
            );
        }
        if self.config.message_model == MessageModel::Clustering {
            self.offsets.remove(&pq.queue);
            if self.orderly {
                self.unlock_queues(std::slice::from_ref(&pq.queue));
            }
        }
        if let Some(delivery) = self.delivery.get().and_then(Weak::upgrade) {
            delivery.on_dropped(pq);
        }
    }

    /// Start offset of a newly assigned queue (docs/protocol.md#client-timings).
    pub(crate) fn initial_offset(&self, queue: &MessageQueue) -> Result<i64> {
        if let Some(offset) = self.offsets.read_store(queue)? {
            if offset >= 0 {
                return Ok(offset);
            }
        }
        let retry = comet_proto::names::is_retry_topic(&queue.topic);
        match self.config.consume_from_where {
            ConsumeFromWhere::LastOffset if retry => Ok(0),
            ConsumeFromWhere::LastOffset => self.max_offset(queue),
            ConsumeFromWhere::FirstOffset => Ok(0),
            ConsumeFromWhere::Timestamp if retry => self.max_offset(queue),
            ConsumeFromWhere::Timestamp => {
                let timestamp = self
                    .config
                    .consume_timestamp_ms
                    .unwrap_or_else(|| now_ms() - 30 * 60 * 1000);
                self.search_offset(queue, timestamp)
            }
        }
    }

    /// GET_MAX_OFFSET of a queue.
    pub(crate) fn max_offset(&self, queue: &MessageQueue) -> Result<i64> {
        self.offset_request(queue, protocol::get_max_offset(queue))
    }

    /// GET_MIN_OFFSET of a queue.
    pub(crate) fn min_offset(&self, queue: &MessageQueue) -> Result<i64> {
        self.offset_request(queue, protocol::get_min_offset(queue))
    }

    /// Replaces a queue's process queue with a fresh one pulling from `offset` (seek).
    pub(crate) fn reset_queue(self: &Arc<Self>, old: &Arc<ProcessQueue>, offset: i64) {
        old.set_dropped();
        let pq = Arc::new(ProcessQueue::new(old.queue.clone(), offset));
        lock(&self.table).insert(old.queue.clone(), pq.clone());
        self.offsets.update(&old.queue, offset, false);
        self.start_pulling(pq);
    }

    /// SEARCH_OFFSET_BY_TIMESTAMP of a queue.
    pub(crate) fn search_offset(&self, queue: &MessageQueue, timestamp_ms: i64) -> Result<i64> {
        self.offset_request(queue, protocol::search_offset(queue, timestamp_ms))
    }

    fn offset_request(
        &self,
        queue: &MessageQueue,
        request: comet_proto::RemotingCommand,
    ) -> Result<i64> {
        let addr = self
            .instance
            .master_addr(&queue.broker_name, &queue.topic)?;
        let response = self
            .instance
            .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])?;
        protocol::offset_field(&response.ext_fields)
    }

    /// LOCK_BATCH_MQ for one queue; true when the broker granted it.
    pub(crate) fn lock_queue(&self, queue: &MessageQueue) -> bool {
        self.lock_batch(&queue.broker_name, std::slice::from_ref(queue))
            .is_ok_and(|locked| locked.contains(queue))
    }

    fn lock_batch(&self, broker_name: &str, queues: &[MessageQueue]) -> Result<Vec<MessageQueue>> {
        let topic = queues.first().map(|q| q.topic.clone()).unwrap_or_default();
        let addr = self.instance.master_addr(broker_name, &topic)?;
        let body = protocol::LockBatchRequestBody {
            client_id: self.instance.client_id().to_owned(),
            consumer_group: self.config.group.clone(),
            mq_set: queues.iter().cloned().collect(),
            only_this_broker: false,
        };
        let response = self.instance.invoke_broker(
            &addr,
            protocol::lock_batch(&body),
            &[ResponseCode::SUCCESS],
        )?;
        let locked: protocol::LockBatchResponseBody =
            protocol::decode_body("lockOKMQSet", &response.body)?;
        Ok(locked.lock_ok_mq_set.into_iter().collect())
    }

    /// Renews the locks of every assigned queue, broker by broker.
    pub(crate) fn lock_all(&self) {
        let mut by_broker: BTreeMap<String, Vec<Arc<ProcessQueue>>> = BTreeMap::new();
        for pq in self.process_queues() {
            by_broker
                .entry(pq.queue.broker_name.clone())
                .or_default()
                .push(pq);
        }
        for (broker, pqs) in by_broker {
            let queues: Vec<MessageQueue> = pqs.iter().map(|pq| pq.queue.clone()).collect();
            match self.lock_batch(&broker, &queues) {
                Ok(locked) => {
                    for pq in pqs {
                        pq.set_locked(locked.contains(&pq.queue));
                    }
                }
                Err(error) => log::debug!("renewing locks on {broker} failed: {error}"),
            }
        }
    }

    fn unlock_queues(&self, queues: &[MessageQueue]) {
        let Some(first) = queues.first() else { return };
        let Ok(addr) = self.instance.master_addr(&first.broker_name, &first.topic) else {
            return;
        };
        let body = protocol::UnlockBatchRequestBody {
            client_id: self.instance.client_id().to_owned(),
            consumer_group: self.config.group.clone(),
            mq_set: queues.iter().cloned().collect(),
            only_this_broker: false,
        };
        if let Err(error) = self
            .instance
            .remoting()
            .invoke_oneway(&addr, protocol::unlock_batch(&body))
        {
            log::debug!("unlock on {addr} failed: {error}");
        }
    }

    fn start_pulling(self: &Arc<Self>, pq: Arc<ProcessQueue>) {
        let core = self.clone();
        let name = format!("comet-pull-{}-{}", pq.queue.topic, pq.queue.queue_id);
        match thread::Builder::new()
            .name(name)
            .spawn(move || pull_loop(&core, &pq))
        {
            Ok(handle) => lock(&self.pull_threads).push(handle),
            Err(error) => log::error!("cannot start a pull thread: {error}"),
        }
    }

    /// One pull; returns how long to wait before the next one.
    fn pull_step(&self, pq: &Arc<ProcessQueue>) -> Option<Duration> {
        let (count, bytes) = pq.held();
        if count > self.config.pull_threshold_messages_per_queue
            || bytes > self.config.pull_threshold_bytes_per_queue
        {
            return Some(self.config.flow_control_delay);
        }
        if self.orderly && self.config.message_model == MessageModel::Clustering && !pq.is_locked()
        {
            let locked = self.lock_queue(&pq.queue);
            pq.set_locked(locked);
            if !locked {
                return Some(Duration::from_secs(1));
            }
        }
        let Some(subscription) = lock(&self.subscriptions).get(&pq.queue.topic).cloned() else {
            return Some(self.config.pull_delay_on_error);
        };
        match self.pull(pq, &subscription) {
            Ok(()) => None,
            Err(error) => {
                log::debug!("pull of {:?} failed: {error}", pq.queue);
                if matches!(
                    error.response_code(),
                    Some(
                        ResponseCode::SUBSCRIPTION_NOT_EXIST
                            | ResponseCode::SUBSCRIPTION_NOT_LATEST
                    )
                ) {
                    self.instance.heartbeat_all();
                }
                Some(self.config.pull_delay_on_error)
            }
        }
    }

    fn pull(&self, pq: &Arc<ProcessQueue>, subscription: &Subscription) -> Result<()> {
        let queue = &pq.queue;
        let offset = pq.next_offset.load(Ordering::Acquire);
        let request = self.pull_request(queue, offset, subscription);
        let addr = self
            .instance
            .master_addr(&queue.broker_name, &queue.topic)?;
        let response = self
            .instance
            .remoting()
            .invoke(&addr, request, self.config.pull_timeout)?;
        let code = response.response_code();
        let accepted = [
            ResponseCode::SUCCESS,
            ResponseCode::PULL_NOT_FOUND,
            ResponseCode::PULL_RETRY_IMMEDIATELY,
            ResponseCode::PULL_OFFSET_MOVED,
        ];
        let response = protocol::expect(&addr, response, &accepted)?;
        let header = protocol::pull_response_header(&response.ext_fields)?;
        if pq.is_dropped() {
            return Ok(());
        }
        pq.next_offset
            .store(header.next_begin_offset, Ordering::Release);
        match code {
            ResponseCode::SUCCESS => {
                let messages =
                    self.filter(decode_records(response.body), subscription, &header, offset);
                if messages.is_empty() {
                    self.correct_tags_offset(pq, header.next_begin_offset);
                } else {
                    pq.put(&messages);
                    if let Some(delivery) = self.delivery.get().and_then(Weak::upgrade) {
                        delivery.deliver(pq, messages);
                    }
                }
            }
            ResponseCode::PULL_OFFSET_MOVED => {
                log::warn!(
                    "{queue:?}: offset {offset} moved to {}",
                    header.next_begin_offset
                );
                self.offsets.update(queue, header.next_begin_offset, false);
                let _ = self.offsets.persist(queue);
            }
            _ => self.correct_tags_offset(pq, header.next_begin_offset),
        }
        Ok(())
    }

    /// The pull request of docs/protocol.md#push-consumer-conversation step 7 (push) or of the lite
    /// pull consumer.
    fn pull_request(
        &self,
        queue: &MessageQueue,
        offset: i64,
        subscription: &Subscription,
    ) -> comet_proto::RemotingCommand {
        let commit_offset = match self.config.message_model {
            MessageModel::Clustering if !self.lite => self.offsets.read_memory(queue).unwrap_or(0),
            _ => 0,
        };
        let mut sys_flag = pull_flag::build(commit_offset > 0, true, self.lite, false);
        if self.lite {
            sys_flag |= pull_flag::LITE_PULL;
        }
        protocol::pull_message(&PullRequest {
            group: self.config.group.clone(),
            queue: queue.clone(),
            offset,
            max_messages: self.config.pull_batch_size,
            max_bytes: self.config.pull_batch_bytes,
            sys_flag,
            commit_offset,
            suspend: self.config.suspend,
            subscription: self.lite.then(|| subscription.tags.expression().to_owned()),
            sub_version: subscription.sub_version,
            lite: self.lite,
        })
    }

    /// Nothing is waiting for consumption, so everything before `next_offset` is done
    /// (filtered out or consumed): commit it (Java `correctTagsOffset`).
    fn correct_tags_offset(&self, pq: &ProcessQueue, next_offset: i64) {
        if !self.lite && pq.held().0 == 0 {
            self.offsets.update(&pq.queue, next_offset, true);
        }
    }

    /// Client-side tag re-filter, see [`filter_pulled`].
    fn filter(
        &self,
        messages: Vec<MessageExt>,
        subscription: &Subscription,
        header: &PullResponseHeader,
        requested: i64,
    ) -> Vec<MessageExt> {
        filter_pulled(
            &self.config.group,
            messages,
            subscription,
            header,
            requested,
        )
    }

    /// One queue's line of GET_CONSUMER_RUNNING_INFO.
    fn process_queue_info(&self, pq: &ProcessQueue) -> ProcessQueueInfo {
        process_queue_info(pq, self.offsets.read_memory(&pq.queue))
    }

    /// Persists the offsets of every assigned queue.
    pub(crate) fn persist_all(&self) {
        let queues: Vec<MessageQueue> = self
            .process_queues()
            .iter()
            .map(|pq| pq.queue.clone())
            .collect();
        if let Err(error) = self.offsets.persist_all(&queues) {
            log::debug!("persisting offsets failed: {error}");
        }
    }

    /// Stops pulling and rebalancing, persists offsets, releases locks, leaves the group
    /// and stops the transport. `before_persist` runs after pulling stopped and before the
    /// final persist (the push consumer drains its listeners there).
    pub(crate) fn shutdown(&self, before_persist: impl FnOnce()) {
        if self.stopped.swap(true, Ordering::AcqRel) {
            return;
        }
        self.wake.notify_all();
        if let Some(handle) = lock(&self.service).take() {
            let _ = handle.join();
        }
        // Listeners running now finish and commit; queued work is skipped (stopped).
        before_persist();
        let queues: Vec<Arc<ProcessQueue>> = lock(&self.table).drain().map(|(_, pq)| pq).collect();
        for pq in &queues {
            pq.set_dropped();
        }
        let list: Vec<MessageQueue> = queues.iter().map(|pq| pq.queue.clone()).collect();
        if let Err(error) = self.offsets.persist_all(&list) {
            log::warn!("final offset persist failed: {error}");
        }
        if self.orderly && self.config.message_model == MessageModel::Clustering {
            let mut by_broker: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
            for queue in list {
                by_broker
                    .entry(queue.broker_name.clone())
                    .or_default()
                    .push(queue);
            }
            for queues in by_broker.values() {
                self.unlock_queues(queues);
            }
        }
        if lock(&self.assigned).is_none() {
            self.instance.unregister(None, Some(&self.config.group));
        }
        self.instance.shutdown();
        for handle in lock(&self.pull_threads).drain(..) {
            let _ = handle.join();
        }
    }
}

/// Client-side tag re-filter of pulled messages
/// (docs/protocol.md#tags-and-subscription-expressions): drops what lies before the requested
/// offset or does not match the tags, restores the original topic of retry-topic messages, and
/// sets MIN/MAX_OFFSET from the pull answer.
pub(crate) fn filter_pulled(
    group: &str,
    messages: Vec<MessageExt>,
    subscription: &Subscription,
    header: &PullResponseHeader,
    requested: i64,
) -> Vec<MessageExt> {
    let retry = retry_topic(group);
    messages
        .into_iter()
        .filter(|message| message.queue_offset >= requested)
        .filter(|message| subscription.tags.matches_tags(message.tags()))
        .map(|mut message| {
            message
                .properties
                .insert(names::MIN_OFFSET, header.min_offset.to_string());
            message
                .properties
                .insert(names::MAX_OFFSET, header.max_offset.to_string());
            if message.topic == retry {
                if let Some(original) = message.property(names::RETRY_TOPIC) {
                    message.topic = original.to_owned();
                }
            }
            message
        })
        .collect()
}

/// One queue's line of GET_CONSUMER_RUNNING_INFO.
pub(crate) fn process_queue_info(
    pq: &ProcessQueue,
    commit_offset: Option<i64>,
) -> ProcessQueueInfo {
    let (messages, bytes) = pq.held();
    ProcessQueueInfo {
        commit_offset: commit_offset.unwrap_or(-1),
        cached_msg_count: i32::try_from(messages).unwrap_or(i32::MAX),
        cached_msg_size_in_mib: i32::try_from(bytes / (1024 * 1024)).unwrap_or(i32::MAX),
        dropped: pq.is_dropped(),
        locked: pq.is_locked(),
        ..ProcessQueueInfo::default()
    }
}

/// The GET_CONSUMER_RUNNING_INFO answer of a consumer: what Java's admin tools read (the
/// consume type, orderly, the start time as a long), its settings under their Java field
/// names, its subscriptions and its queues.
pub(crate) fn running_info(
    config: &ConsumerConfig,
    data: ConsumerData,
    orderly: bool,
    started_ms: i64,
    mq_table: BTreeMap<MessageQueue, ProcessQueueInfo>,
) -> ConsumerRunningInfo {
    let text = |value: &str| serde_json::Value::String(value.to_owned());
    let mut properties = BTreeMap::new();
    properties.insert(PROP_CONSUME_TYPE.to_owned(), text(data.consume_type.name()));
    properties.insert(PROP_CONSUME_ORDERLY.to_owned(), text(&orderly.to_string()));
    properties.insert(
        PROP_CONSUMER_START_TIMESTAMP.to_owned(),
        text(&started_ms.to_string()),
    );
    let namesrv = config.client.namesrv_addrs.join(";");
    properties.insert(PROP_NAMESERVER_ADDR.to_owned(), text(&namesrv));
    properties.insert(PROP_CLIENT_VERSION.to_owned(), text("V5_3_3"));
    properties.insert("consumerGroup".to_owned(), text(&config.group));
    properties.insert("messageModel".to_owned(), text(config.message_model.name()));
    properties.insert(
        "consumeFromWhere".to_owned(),
        text(config.consume_from_where.name()),
    );
    ConsumerRunningInfo {
        properties,
        subscription_set: data.subscription_data_set,
        mq_table,
        ..ConsumerRunningInfo::default()
    }
}

/// The heartbeat entry of a consumer with these settings and subscriptions.
pub(crate) fn consumer_data(
    config: &ConsumerConfig,
    subscriptions: &BTreeMap<String, Subscription>,
    consume_type: ConsumeType,
) -> ConsumerData {
    let subscription_data_set = subscriptions
        .iter()
        .map(|(topic, subscription)| SubscriptionData {
            class_filter_mode: false,
            topic: topic.clone(),
            sub_string: subscription.tags.expression().to_owned(),
            tags_set: subscription.tags.tags().iter().cloned().collect(),
            code_set: subscription.tags.codes().iter().copied().collect(),
            sub_version: subscription.sub_version,
            expression_type: "TAG".into(),
        })
        .collect();
    ConsumerData {
        group_name: config.group.clone(),
        consume_type,
        message_model: match config.message_model {
            MessageModel::Clustering => WireMessageModel::CLUSTERING,
            MessageModel::Broadcasting => WireMessageModel::BROADCASTING,
        },
        consume_from_where: match config.consume_from_where {
            ConsumeFromWhere::LastOffset => WireConsumeFromWhere::CONSUME_FROM_LAST_OFFSET,
            ConsumeFromWhere::FirstOffset => WireConsumeFromWhere::CONSUME_FROM_FIRST_OFFSET,
            ConsumeFromWhere::Timestamp => WireConsumeFromWhere::CONSUME_FROM_TIMESTAMP,
        },
        subscription_data_set,
        unit_mode: false,
    }
}

fn leak_reason(error: &std::io::Error) -> &'static str {
    log::error!("cannot start the rebalance thread: {error}");
    "unable to start the rebalance thread"
}

fn pull_loop(core: &Arc<ConsumerCore>, pq: &Arc<ProcessQueue>) {
    while !core.is_stopped() && !pq.is_dropped() {
        if let Some(delay) = core.pull_step(pq) {
            core.pause(delay);
        }
    }
}

/// Next rebalance after one that could not allocate a topic (5.x `minInterval`).
const REBALANCE_RETRY_INTERVAL: Duration = Duration::from_secs(1);

fn service_main(core: Weak<ConsumerCore>) {
    let start = Instant::now();
    let mut next_rebalance = start;
    let mut next_persist = start + Duration::from_secs(10);
    let mut next_lock = start + Duration::from_secs(20);
    loop {
        let Some(core) = core.upgrade() else { return };
        if core.is_stopped() {
            return;
        }
        let requested = std::mem::take(&mut *lock(&core.signal));
        let now = Instant::now();
        if requested || now >= next_rebalance {
            let wait = if core.rebalance() {
                core.config.rebalance_interval
            } else {
                REBALANCE_RETRY_INTERVAL.min(core.config.rebalance_interval)
            };
            next_rebalance = Instant::now() + wait;
        }
        if now >= next_persist {
            core.persist_all();
            next_persist = Instant::now() + core.config.client.persist_consumer_offset_interval;
        }
        if core.orderly && core.config.message_model == MessageModel::Clustering && now >= next_lock
        {
            core.lock_all();
            next_lock = Instant::now() + Duration::from_secs(20);
        }
        let wait = next_rebalance
            .min(next_persist)
            .min(next_lock)
            .saturating_duration_since(Instant::now());
        let guard = lock(&core.signal);
        let _released = core
            .wake
            .wait_timeout_while(guard, wait, |signal| !*signal && !core.is_stopped());
    }
}

impl ConsumerMember for ConsumerCore {
    fn group(&self) -> String {
        self.config.group.clone()
    }

    fn consumer_data(&self) -> ConsumerData {
        consumer_data(
            &self.config,
            &lock(&self.subscriptions),
            if self.lite {
                ConsumeType::CONSUME_ACTIVELY
            } else {
                ConsumeType::CONSUME_PASSIVELY
            },
        )
    }

    fn topics(&self) -> Vec<String> {
        lock(&self.subscriptions).keys().cloned().collect()
    }

    fn on_consumer_ids_changed(&self) {
        self.request_rebalance();
    }

    fn reset_offsets(&self, topic: &str, offsets: &BTreeMap<MessageQueue, i64>) {
        ConsumerCore::reset_offsets(self, topic, offsets);
    }

    fn consume_directly(
        &self,
        message: MessageExt,
        broker_name: &str,
    ) -> Option<ConsumeMessageDirectlyResult> {
        let delivery = self.delivery.get().and_then(Weak::upgrade)?;
        delivery.consume_directly(message, broker_name)
    }

    fn offsets_of(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        self.offsets.snapshot(topic)
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        let mq_table = self
            .process_queues()
            .iter()
            .map(|pq| (pq.queue.clone(), self.process_queue_info(pq)))
            .collect();
        running_info(
            &self.config,
            self.consumer_data(),
            self.orderly,
            self.started_ms.load(Ordering::Relaxed),
            mq_table,
        )
    }
}
