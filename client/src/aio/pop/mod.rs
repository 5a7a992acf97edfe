//! The async pop consumer (RocketMQ 5.x pop consumption, docs/protocol.md#pop-requests).
//!
//! [`AsyncPopConsumer::receive`] asks a broker for messages with an invisible time; each
//! comes with its receipt handle (`POP_CK`), and [`AsyncPopConsumer::ack`] or
//! [`AsyncPopConsumer::change_invisible_time`] sends it back. A message not acked within its
//! invisible time is handed out again by the broker (to this or any consumer of the group)
//! with its reconsume count one higher: the broker stores it in the group's pop retry topic
//! `%RETRY%<group>_<topic>`, pops that topic along with the subscribed one, and answers its
//! messages under the subscribed topic; the receipt keeps the retry queue, where the ack
//! goes. There is no rebalance: every receive asks for queue id -1 (the broker picks among
//! all its queues, as RocketMQ 5.x's proxy asks), so a group may have more consumers than
//! queues and they all share every queue.
//!
//! Which broker: the subscribed topics' readable brokers from the name servers, taken in
//! turn. With one broker, a receive is one long-polling pop (`pollTime` =
//! [`PopConsumerConfig::poll_time`]). With several, it pops each once without waiting, then
//! waits with a NOTIFICATION to every broker at once (which takes nothing, so the ones still
//! waiting can be dropped) and pops the first broker that has messages.
//!
//! Bounded: no thread and no task per queue (a receive is one future; only the waits on
//! several brokers run as tasks, one per broker, for the wait), and at most
//! [`PopConsumerConfig::in_flight_messages_max`] messages held (received, not acked, invisible
//! time not over); a receive past it waits for room.

mod in_flight;
pub mod receipt;

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use comet_proto::filter::{TagSubscription, EXPRESSION_TYPE_SQL92, EXPRESSION_TYPE_TAG};
use comet_proto::headers::{
    AckMessageRequestHeader, ChangeInvisibleTimeRequestHeader, ChangeInvisibleTimeResponseHeader,
    NotificationRequestHeader, NotificationResponseHeader, PopMessageRequestHeader,
    PopMessageResponseHeader,
};
use comet_proto::message::{decode_records_with, DecodeOptions, MessageExt};
use comet_proto::properties::names as property;
use comet_proto::sql92::Selector;
use comet_proto::{CommandHeader, RequestCode, ResponseCode};
use tokio::task::JoinSet;
use tokio::time::Instant;

use self::in_flight::{InFlight, MessageKey, Reservation};
use self::receipt::{parse_order_counts, parse_start_offsets, OrderCounts, Receipt, RetryFlag};
use super::routes::AsyncRoutes;
use super::transport::{AsyncTransport, AsyncTransportConfig};
use crate::config::{now_ms, ClientConfig};
use crate::error::{ClientError, Result};
use crate::protocol;
use crate::route;
use crate::util::lock;
use crate::validate;

/// Most messages one receive may ask for (the broker refuses more).
pub const RECEIVE_MESSAGES_MAX: usize = 32;
/// Longest invisible time a receive or a change may ask for (the 5.x proxy's limit).
pub const INVISIBLE_TIME_MAX: Duration = Duration::from_secs(12 * 3600);

/// Where a group without a pop position starts in a queue (Java's `ConsumeInitMode`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PopInitMode {
    /// The queue's first message.
    First,
    /// Messages arriving from now on (Java's default, `CONSUME_FROM_LAST_OFFSET`).
    #[default]
    Last,
}

impl PopInitMode {
    fn wire(self) -> i32 {
        match self {
            PopInitMode::First => 0,
            PopInitMode::Last => 1,
        }
    }
}

/// Settings of a pop consumer.
#[derive(Clone, Debug)]
pub struct PopConsumerConfig {
    /// Consumer group.
    pub group: String,
    /// Client settings (name servers, credentials, API timeout).
    pub client: ClientConfig,
    /// Longest a receive waits for messages (the broker holds a pop at most 30 s).
    pub poll_time: Duration,
    /// Start of a queue the group has not popped yet.
    pub init_mode: PopInitMode,
    /// Messages held at most: received, not acked, invisible time not over.
    pub in_flight_messages_max: usize,
    /// Orderly (FIFO) pops: a queue gives the group its next messages only once the ones
    /// handed out are acked or visible again, and unacked ones come back in order from the
    /// queue itself (RocketMQ 5.x FIFO consumption). Off by default.
    pub orderly: bool,
}

impl PopConsumerConfig {
    /// Defaults for `group`: 15 s long polls, from the queues' end, 1024 messages in flight.
    pub fn new(group: &str, client: ClientConfig) -> PopConsumerConfig {
        PopConsumerConfig {
            group: group.to_owned(),
            client,
            poll_time: Duration::from_secs(15),
            init_mode: PopInitMode::Last,
            in_flight_messages_max: 1024,
            orderly: false,
        }
    }
}

/// A popped message with its receipt handle.
#[derive(Clone, Debug)]
pub struct PopMessage {
    /// The message, under the subscribed topic (also when it came from the pop retry
    /// topic), with its `POP_CK` property set to the current receipt.
    pub message: MessageExt,
    receipt: Receipt,
    receipt_text: String,
    /// The topic of the queue it came from: the subscribed topic or its pop retry topic.
    queue_topic: String,
}

impl PopMessage {
    /// The receipt handle (`POP_CK`) an ack or a change sends back.
    pub fn receipt_handle(&self) -> &str {
        &self.receipt_text
    }

    /// The parsed receipt.
    pub fn receipt(&self) -> &Receipt {
        &self.receipt
    }

    /// Deliveries before this one (0 the first time).
    pub fn reconsume_times(&self) -> i32 {
        self.message.reconsume_times
    }

    /// True when it came back through the group's pop retry topic.
    pub fn is_retry(&self) -> bool {
        self.receipt.retry != RetryFlag::Topic
    }

    /// The topic of the queue it came from (the pop retry topic for a retried message).
    pub fn queue_topic(&self) -> &str {
        &self.queue_topic
    }

    /// Broker name.
    pub fn broker_name(&self) -> &str {
        &self.receipt.broker_name
    }

    fn key(&self) -> MessageKey {
        (
            self.receipt.broker_name.clone(),
            self.queue_topic.clone(),
            self.receipt.queue_id,
            self.receipt.queue_offset,
        )
    }
}

/// An async pop consumer (RocketMQ 5.x `SimpleConsumer` over the remoting protocol).
///
/// Runs on the caller's tokio runtime and starts no thread. Cheap to clone; clones share one
/// consumer (its subscriptions, connections and in-flight limit).
#[derive(Clone)]
pub struct AsyncPopConsumer {
    inner: Arc<Inner>,
}

/// What a topic is subscribed with.
#[derive(Clone, Debug)]
enum Filter {
    /// A TAG expression: the broker filters by tag hash, the consumer by tag.
    Tag(TagSubscription),
    /// A SQL92 selector: the broker evaluates it and hands out only what matches.
    Sql(String),
}

impl Filter {
    fn expression_type(&self) -> &'static str {
        match self {
            Filter::Tag(_) => EXPRESSION_TYPE_TAG,
            Filter::Sql(_) => EXPRESSION_TYPE_SQL92,
        }
    }

    fn expression(&self) -> &str {
        match self {
            Filter::Tag(subscription) => subscription.expression(),
            Filter::Sql(selector) => selector,
        }
    }

    /// Whether a message the broker handed out is one the subscription wants.
    fn keeps(&self, message: &MessageExt) -> bool {
        match self {
            Filter::Tag(subscription) => subscription.matches_tags(message.tags()),
            Filter::Sql(_) => true,
        }
    }
}

/// One broker of one subscribed topic.
#[derive(Clone, Debug)]
struct Target {
    topic: String,
    subscription: Filter,
    broker_name: String,
}

struct Inner {
    config: PopConsumerConfig,
    transport: AsyncTransport,
    routes: AsyncRoutes,
    subscriptions: Mutex<BTreeMap<String, Filter>>,
    in_flight: InFlight,
    /// Turns the brokers: each receive starts at the next one.
    turn: AtomicUsize,
    stopped: AtomicBool,
}

fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX)
}

impl AsyncPopConsumer {
    /// A pop consumer with its own connections.
    pub fn new(config: PopConsumerConfig) -> Result<AsyncPopConsumer> {
        let transport = AsyncTransport::new(AsyncTransportConfig::from_client(&config.client)?)?;
        AsyncPopConsumer::with_transport(config, transport)
    }

    /// A pop consumer over a given transport (to share connections between consumers).
    pub fn with_transport(
        config: PopConsumerConfig,
        transport: AsyncTransport,
    ) -> Result<AsyncPopConsumer> {
        validate::check_group(&config.group)?;
        if config.client.namesrv_addrs.is_empty() {
            return Err(ClientError::NameServer(
                "no name server address configured".into(),
            ));
        }
        if config.in_flight_messages_max == 0 {
            return Err(ClientError::Invalid(
                "in_flight_messages_max must be at least 1".into(),
            ));
        }
        if config.poll_time > Duration::from_secs(3600) {
            return Err(ClientError::Invalid(format!(
                "poll_time {:?} is above an hour",
                config.poll_time
            )));
        }
        Ok(AsyncPopConsumer {
            inner: Arc::new(Inner {
                in_flight: InFlight::new(config.in_flight_messages_max),
                routes: AsyncRoutes::new(
                    transport.clone(),
                    config.client.namesrv_addrs.clone(),
                    config.client.api_timeout,
                    config.client.poll_name_server_interval,
                ),
                config,
                transport,
                subscriptions: Mutex::new(BTreeMap::new()),
                turn: AtomicUsize::new(route::random_index(usize::MAX)),
                stopped: AtomicBool::new(false),
            }),
        })
    }

    /// Subscribes `topic` with a TAG expression (`*`, `TagA`, `TagA || TagB`), replacing an
    /// earlier subscription of it. Takes effect at the next receive.
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        validate::check_topic(topic)?;
        let subscription = TagSubscription::parse(Some(expression.trim()));
        if !subscription.is_all() && subscription.tags().is_empty() {
            return Err(ClientError::Invalid(format!(
                "tag expression {expression:?} names no tag"
            )));
        }
        lock(&self.inner.subscriptions).insert(topic.to_owned(), Filter::Tag(subscription));
        Ok(())
    }

    /// Subscribes `topic` with a SQL92 selector over the messages' properties (Java's
    /// `MessageSelector.bySql`, docs/protocol.md#sql92-property-filters), replacing an
    /// earlier subscription of it; the broker hands out only the messages it matches. A
    /// selector that does not compile is refused here with the broker's reason. Takes effect
    /// at the next receive.
    pub fn subscribe_sql(&self, topic: &str, selector: &str) -> Result<()> {
        validate::check_topic(topic)?;
        if let Err(error) = Selector::compile(selector) {
            return Err(ClientError::Invalid(format!(
                "SQL92 selector {selector:?} does not compile: {error}"
            )));
        }
        lock(&self.inner.subscriptions).insert(topic.to_owned(), Filter::Sql(selector.to_owned()));
        Ok(())
    }

    /// Drops the subscription of `topic`.
    pub fn unsubscribe(&self, topic: &str) {
        lock(&self.inner.subscriptions).remove(topic);
    }

    /// Receives up to `max_messages` (1 to [`RECEIVE_MESSAGES_MAX`]) messages, each
    /// invisible to the group for `invisible_time` unless acked sooner. Waits up to
    /// [`PopConsumerConfig::poll_time`] for some to arrive, then resolves to what came
    /// (possibly nothing). Waits for room first when the in-flight limit is reached.
    ///
    /// Dropping the future while a pop is on the wire may leave messages popped but never
    /// seen: they come back after `invisible_time`, as after a lost answer.
    pub async fn receive(
        &self,
        max_messages: usize,
        invisible_time: Duration,
    ) -> Result<Vec<PopMessage>> {
        let inner = &self.inner;
        inner.check_running()?;
        if !(1..=RECEIVE_MESSAGES_MAX).contains(&max_messages) {
            return Err(ClientError::Invalid(format!(
                "max_messages is {max_messages}, it must be 1 to {RECEIVE_MESSAGES_MAX}"
            )));
        }
        check_invisible_time(invisible_time)?;
        let deadline = Instant::now() + inner.config.poll_time;
        let mut targets = inner.targets().await?;
        let Some(reservation) = inner.in_flight.reserve(max_messages, deadline).await else {
            return Ok(Vec::new());
        };
        let turn = inner.turn.fetch_add(1, Ordering::Relaxed) % targets.len();
        targets.rotate_left(turn);
        let ask = Ask {
            count: reservation.count(),
            invisible_time,
            // One id per receive: the broker lets a repeated pop of the same attempt through
            // a queue this consumer's own earlier pop of it blocks.
            attempt_id: inner
                .config
                .orderly
                .then(|| format!("{:016x}", route::random_u64())),
        };
        if let [target] = targets.as_slice() {
            let poll = deadline.saturating_duration_since(Instant::now());
            let received = inner.pop(target, &ask, poll).await?;
            return Ok(inner.hold(reservation, received, invisible_time));
        }
        let mut failures = 0;
        let mut last_error = None;
        for target in &targets {
            match inner.pop(target, &ask, Duration::ZERO).await {
                Ok(received) if !received.is_empty() => {
                    return Ok(inner.hold(reservation, received, invisible_time));
                }
                Ok(_) => {}
                Err(error) => {
                    log::debug!("pop of {target:?} failed: {error}");
                    failures += 1;
                    last_error = Some(error);
                }
            }
        }
        if let Some(error) = last_error.filter(|_| failures == targets.len()) {
            return Err(error);
        }
        while let Some(index) = Inner::first_notified(inner, &targets, deadline).await {
            let received = inner.pop(&targets[index], &ask, Duration::ZERO).await?;
            if !received.is_empty() {
                return Ok(inner.hold(reservation, received, invisible_time));
            }
        }
        Ok(Vec::new())
    }

    /// Acks `message`: the group never gets it again. An ack after the invisible time
    /// passed may come too late (the message may be handed out again meanwhile).
    pub async fn ack(&self, message: &PopMessage) -> Result<()> {
        let inner = &self.inner;
        inner.check_running()?;
        let receipt = &message.receipt;
        let header = AckMessageRequestHeader {
            consumer_group: inner.config.group.clone(),
            topic: message.queue_topic.clone(),
            queue_id: receipt.queue_id,
            extra_info: message.receipt_text.clone(),
            offset: receipt.queue_offset,
            broker_name: Some(receipt.broker_name.clone()),
        };
        let request = protocol::request(RequestCode::ACK_MESSAGE, &header);
        let addr = inner
            .routes
            .master_addr(&receipt.broker_name, &message.message.topic)
            .await?;
        let timeout = inner.config.client.api_timeout;
        let response = inner.transport.invoke(&addr, request, timeout).await?;
        protocol::expect(&addr, response, &[ResponseCode::SUCCESS])?;
        inner.in_flight.release(&message.key());
        Ok(())
    }

    /// Makes `message` invisible for `invisible_time` from now (to postpone its return, or
    /// with a short time to hand it back sooner). Its receipt changes: later acks and
    /// changes must use the updated `message`.
    pub async fn change_invisible_time(
        &self,
        message: &mut PopMessage,
        invisible_time: Duration,
    ) -> Result<()> {
        let inner = &self.inner;
        inner.check_running()?;
        check_invisible_time(invisible_time)?;
        let receipt = &message.receipt;
        let header = ChangeInvisibleTimeRequestHeader {
            consumer_group: inner.config.group.clone(),
            topic: message.queue_topic.clone(),
            queue_id: receipt.queue_id,
            extra_info: message.receipt_text.clone(),
            offset: receipt.queue_offset,
            invisible_time: millis(invisible_time),
            broker_name: Some(receipt.broker_name.clone()),
        };
        let request = protocol::request(RequestCode::CHANGE_MESSAGE_INVISIBLETIME, &header);
        let addr = inner
            .routes
            .master_addr(&receipt.broker_name, &message.message.topic)
            .await?;
        let timeout = inner.config.client.api_timeout;
        let asked_at = Instant::now();
        let response = inner.transport.invoke(&addr, request, timeout).await?;
        let response = protocol::expect(&addr, response, &[ResponseCode::SUCCESS])?;
        let answer = ChangeInvisibleTimeResponseHeader::from_ext_fields(&response.ext_fields)?;
        // As Java's client builds it: the new checkpoint starts at the message itself.
        let changed = Receipt {
            ck_queue_offset: receipt.queue_offset,
            pop_time_ms: answer.pop_time,
            invisible_time_ms: answer.invisible_time,
            revive_queue_id: answer.revive_qid,
            ..receipt.clone()
        };
        message.receipt_text = changed.text();
        message.receipt = changed;
        message
            .message
            .properties
            .insert(property::POP_CK, &message.receipt_text);
        inner
            .in_flight
            .extend(message.key(), asked_at + invisible_time);
        Ok(())
    }

    /// Messages held now (received, not acked, invisible time not over), receives waiting
    /// for their answer included.
    pub fn in_flight(&self) -> usize {
        self.inner.in_flight.count()
    }

    /// The transport (for its counters, or to close a connection).
    pub fn transport(&self) -> &AsyncTransport {
        &self.inner.transport
    }

    /// Closes every connection, failing the calls in flight; later calls fail with
    /// `State("shut down")`. Messages held and not acked come back after their invisible
    /// time. Idempotent.
    pub fn shutdown(&self) {
        self.inner.stopped.store(true, Ordering::SeqCst);
        self.inner.transport.shutdown();
    }
}

fn check_invisible_time(invisible_time: Duration) -> Result<()> {
    if invisible_time < Duration::from_millis(1) || invisible_time > INVISIBLE_TIME_MAX {
        return Err(ClientError::Invalid(format!(
            "invisible time {invisible_time:?} must be 1 ms to {INVISIBLE_TIME_MAX:?}"
        )));
    }
    Ok(())
}

/// What one receive asks each broker for.
struct Ask {
    count: usize,
    invisible_time: Duration,
    /// Set for an orderly pop.
    attempt_id: Option<String>,
}

impl Inner {
    fn check_running(&self) -> Result<()> {
        if self.stopped.load(Ordering::SeqCst) {
            return Err(ClientError::State("shut down"));
        }
        Ok(())
    }

    /// Holds what a receive got against its reservation.
    fn hold(
        &self,
        reservation: Reservation<'_>,
        received: Vec<PopMessage>,
        invisible_time: Duration,
    ) -> Vec<PopMessage> {
        let until = Instant::now() + invisible_time;
        reservation.settle(received.iter().map(|message| (message.key(), until)));
        received
    }

    /// Every readable broker of every subscribed topic, in a fixed order.
    async fn targets(&self) -> Result<Vec<Target>> {
        let subscriptions: Vec<(String, Filter)> = lock(&self.subscriptions)
            .iter()
            .map(|(topic, subscription)| (topic.clone(), subscription.clone()))
            .collect();
        if subscriptions.is_empty() {
            return Err(ClientError::State("subscribed to no topic"));
        }
        let mut targets = Vec::new();
        for (topic, subscription) in subscriptions {
            let route = self.routes.route(&topic).await?;
            let mut brokers: Vec<&str> = route
                .subscribe
                .iter()
                .map(|queue| queue.broker_name.as_str())
                .collect();
            brokers.dedup();
            targets.extend(brokers.into_iter().map(|broker_name| Target {
                topic: topic.clone(),
                subscription: subscription.clone(),
                broker_name: broker_name.to_owned(),
            }));
        }
        if targets.is_empty() {
            return Err(ClientError::NoRoute {
                topic: lock(&self.subscriptions)
                    .keys()
                    .cloned()
                    .collect::<Vec<_>>()
                    .join(","),
                reason: "no readable queue".into(),
            });
        }
        Ok(targets)
    }

    /// One POP_MESSAGE of queue id -1 to `target`'s broker, waiting up to `poll`.
    async fn pop(&self, target: &Target, ask: &Ask, poll: Duration) -> Result<Vec<PopMessage>> {
        let header = PopMessageRequestHeader {
            consumer_group: self.config.group.clone(),
            topic: target.topic.clone(),
            queue_id: -1,
            max_msg_nums: i32::try_from(ask.count).unwrap_or(1),
            invisible_time: millis(ask.invisible_time),
            poll_time: millis(poll),
            born_time: now_ms(),
            init_mode: self.config.init_mode.wire(),
            exp_type: Some(target.subscription.expression_type().to_owned()),
            exp: Some(target.subscription.expression().to_owned()),
            order: Some(self.config.orderly),
            attempt_id: ask.attempt_id.clone(),
            broker_name: Some(target.broker_name.clone()),
        };
        let request = protocol::request(RequestCode::POP_MESSAGE, &header);
        let addr = self
            .routes
            .master_addr(&target.broker_name, &target.topic)
            .await?;
        let timeout = poll + self.config.client.api_timeout;
        let response = self.transport.invoke(&addr, request, timeout).await?;
        match response.response_code() {
            ResponseCode::SUCCESS => {}
            ResponseCode::POLLING_TIMEOUT
            | ResponseCode::POLLING_FULL
            | ResponseCode::PULL_NOT_FOUND => return Ok(Vec::new()),
            // A refusal: the error of the answer as the broker gave it.
            _ => return protocol::expect(&addr, response, &[]).map(|_| Vec::new()),
        }
        let answer = PopMessageResponseHeader::from_ext_fields(&response.ext_fields)?;
        let (messages, stop) = decode_records_with(response.body, &DecodeOptions::default());
        if let Some(stop) = stop {
            // The rest were popped and come back after their invisible time.
            log::warn!(
                "pop answer from {addr}: record at byte {} does not decode: {}",
                stop.offset,
                stop.error
            );
        }
        let starts = parse_start_offsets(answer.start_offset_info.as_deref().unwrap_or(""));
        let counts = parse_order_counts(answer.order_count_info.as_deref().unwrap_or(""));
        let mut popped = Vec::with_capacity(messages.len());
        let mut unwanted = Vec::new();
        for message in messages {
            let one = match self.popped(target, &answer, (&starts, &counts), message) {
                Ok(one) => one,
                Err(error) => {
                    log::warn!("pop answer from {addr}: {error}");
                    continue;
                }
            };
            // The broker filters tags by hash; a colliding tag is acked and dropped, as
            // the 5.x proxy does with a message that does not match.
            if target.subscription.keeps(&one.message) {
                popped.push(one);
            } else {
                unwanted.push(one);
            }
        }
        for message in unwanted {
            if let Err(error) = self.ack_unwanted(&addr, &message).await {
                log::debug!("ack of a message not matching its subscription failed: {error}");
            }
        }
        Ok(popped)
    }

    /// A decoded message of a pop answer as the application gets it: under the subscribed
    /// topic, with its receipt (the broker's `POP_CK` when it set one, else built from the
    /// answer as Java's client does).
    fn popped(
        &self,
        target: &Target,
        answer: &PopMessageResponseHeader,
        (starts, counts): (&HashMap<(RetryFlag, i32), i64>, &OrderCounts),
        mut message: MessageExt,
    ) -> Result<PopMessage> {
        if let Some(times) = counts.of(message.queue_id, message.queue_offset) {
            // An orderly pop's message comes back from its own queue, not through the retry
            // topic: its deliveries so far are in the answer (Java's client does the same).
            message.reconsume_times = times;
        }
        let receipt = match message.property(property::POP_CK) {
            Some(text) => Receipt::parse(text, message.queue_offset)?,
            None => {
                let retry = RetryFlag::of_topic(&message.topic);
                let start = starts.get(&(retry, message.queue_id)).ok_or_else(|| {
                    ClientError::Invalid(format!(
                        "no start offset for queue {} of {}",
                        message.queue_id, message.topic
                    ))
                })?;
                Receipt {
                    ck_queue_offset: *start,
                    pop_time_ms: answer.pop_time,
                    invisible_time_ms: answer.invisible_time,
                    revive_queue_id: answer.revive_qid,
                    retry,
                    broker_name: target.broker_name.clone(),
                    queue_id: message.queue_id,
                    queue_offset: message.queue_offset,
                }
            }
        };
        let receipt_text = receipt.text();
        message.topic.clone_from(&target.topic);
        message.properties.insert(property::POP_CK, &receipt_text);
        if message.property(property::FIRST_POP_TIME).is_none() {
            let pop_time = answer.pop_time.to_string();
            message
                .properties
                .insert(property::FIRST_POP_TIME, pop_time);
        }
        Ok(PopMessage {
            message,
            queue_topic: receipt.retry.queue_topic(&target.topic, &self.config.group),
            receipt,
            receipt_text,
        })
    }

    async fn ack_unwanted(&self, addr: &str, message: &PopMessage) -> Result<()> {
        let header = AckMessageRequestHeader {
            consumer_group: self.config.group.clone(),
            topic: message.queue_topic.clone(),
            queue_id: message.receipt.queue_id,
            extra_info: message.receipt_text.clone(),
            offset: message.receipt.queue_offset,
            broker_name: Some(message.receipt.broker_name.clone()),
        };
        let request = protocol::request(RequestCode::ACK_MESSAGE, &header);
        let timeout = self.config.client.api_timeout;
        let response = self.transport.invoke(addr, request, timeout).await?;
        protocol::expect(addr, response, &[ResponseCode::SUCCESS])?;
        Ok(())
    }

    /// Waits (until `deadline`) for the first of `targets` whose broker says, through a
    /// NOTIFICATION, that it has messages for the group; `None` when none did.
    async fn first_notified(
        inner: &Arc<Inner>,
        targets: &[Target],
        deadline: Instant,
    ) -> Option<usize> {
        let poll = deadline.saturating_duration_since(Instant::now());
        if poll.is_zero() {
            return None;
        }
        let mut waits = JoinSet::new();
        for (index, target) in targets.iter().enumerate() {
            let (inner, target) = (inner.clone(), target.clone());
            waits.spawn(async move { (index, inner.notification(&target, poll).await) });
        }
        // Dropping the set aborts the waits still running: a notification takes nothing.
        while let Some(joined) = waits.join_next().await {
            match joined {
                Ok((index, Ok(true))) => return Some(index),
                Ok((_, Ok(false))) => {}
                Ok((index, Err(error))) => {
                    log::debug!("notification of {:?} failed: {error}", targets[index]);
                }
                Err(error) => log::debug!("notification task failed: {error}"),
            }
        }
        None
    }

    /// One NOTIFICATION of queue id -1: whether the broker has messages for the group.
    async fn notification(&self, target: &Target, poll: Duration) -> Result<bool> {
        let header = NotificationRequestHeader {
            consumer_group: self.config.group.clone(),
            topic: target.topic.clone(),
            queue_id: -1,
            poll_time: millis(poll),
            born_time: now_ms(),
            order: Some(self.config.orderly),
            attempt_id: None,
            broker_name: Some(target.broker_name.clone()),
        };
        let request = protocol::request(RequestCode::NOTIFICATION, &header);
        let addr = self
            .routes
            .master_addr(&target.broker_name, &target.topic)
            .await?;
        let timeout = poll + self.config.client.api_timeout;
        let response = self.transport.invoke(&addr, request, timeout).await?;
        let response = protocol::expect(&addr, response, &[ResponseCode::SUCCESS])?;
        Ok(NotificationResponseHeader::from_ext_fields(&response.ext_fields)?.has_msg)
    }
}
