//! The requests the async push consumer sends to brokers besides pulls: heartbeats,
//! consumer lists, offsets, queue locks, send-back and unregistering.

use std::collections::BTreeMap;

use std::sync::atomic::Ordering;

use std::sync::Arc;

use comet_proto::body::{
    CMResult, ConsumeMessageDirectlyResult, ConsumerRunningInfo, GetConsumerStatusBody, JsonBody,
    ResetOffsetBody,
};
use comet_proto::headers::{
    ConsumeMessageDirectlyResultRequestHeader, ConsumerSendMsgBackRequestHeader,
    GetConsumerStatusRequestHeader, ResetOffsetRequestHeader,
};
use comet_proto::message::decode_records;
use comet_proto::message::MessageExt;
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};

use super::{AsyncMessageListener, HookAnswer, Inner, Mode, QueueState};
use crate::consumer::core::{consumer_data, process_queue_info, running_info};
use crate::consumer::process_queue::ProcessQueue;
use crate::consumer::{retry_topic, ConsumeFromWhere};
use crate::consumer::{ConsumeConcurrentlyStatus, ConsumeOrderlyStatus};
use crate::error::{ClientError, Result};
use crate::instance::CLIENT_INNER_PRODUCER_GROUP;
use crate::message::{Message, MessageQueue};
use crate::producer::ProducerConfig;
use crate::protocol::{self, ConsumeType, HeartbeatData, ProducerData};
use crate::rebalance::allocate::java_string_cmp;
use crate::route;
use crate::util::lock;

use super::super::producer::AsyncProducer;

impl Inner {
    /// Answers what a broker asks the client (docs/protocol.md#broker-to-client-requests):
    /// NOTIFY_CONSUMER_IDS_CHANGED asks for a rebalance, GET_CONSUMER_RUNNING_INFO gets this
    /// consumer's running info, RESET_CONSUMER_CLIENT_OFFSET moves its queues,
    /// GET_CONSUMER_STATUS_FROM_CLIENT gets its in-memory offsets, CONSUME_MESSAGE_DIRECTLY
    /// runs the listener (answered later); the rest is not supported. Runs on a connection's
    /// reader task: nothing here waits.
    pub(super) fn handle_request(self: &Arc<Self>, request: &RemotingCommand) -> HookAnswer {
        let group = request.ext_fields.get("consumerGroup").unwrap_or_default();
        let ours = group == self.config.consumer.group;
        match request.request_code() {
            RequestCode::RESET_CONSUMER_CLIENT_OFFSET => {
                self.reset_offsets(request);
                HookAnswer::NotSupported
            }
            RequestCode::GET_CONSUMER_STATUS_FROM_CLIENT => {
                HookAnswer::Now(self.consumer_status(request))
            }
            RequestCode::NOTIFY_CONSUMER_IDS_CHANGED => {
                if ours {
                    self.wake.notify_one();
                }
                HookAnswer::NotSupported
            }
            RequestCode::GET_CONSUMER_RUNNING_INFO if !ours => {
                HookAnswer::Now(RemotingCommand::error_to(
                    request,
                    ResponseCode::SYSTEM_ERROR,
                    format!("the consumer group {group} is not online in this client"),
                ))
            }
            RequestCode::GET_CONSUMER_RUNNING_INFO => HookAnswer::Now(
                RemotingCommand::response_to(request, ResponseCode::SUCCESS)
                    .with_body(self.running_info().encode()),
            ),
            RequestCode::CONSUME_MESSAGE_DIRECTLY => self.consume_directly(request),
            _ => HookAnswer::NotSupported,
        }
    }

    /// CONSUME_MESSAGE_DIRECTLY: runs the listener on the message the request carries,
    /// outside any queue, and answers its verdict (Java's `consumeMessageDirectly`); a lite
    /// consumer, having no listener, answers as Java's client does for an unknown group.
    fn consume_directly(&self, request: &RemotingCommand) -> HookAnswer {
        let error = |remark: String| {
            HookAnswer::Now(RemotingCommand::error_to(
                request,
                ResponseCode::SYSTEM_ERROR,
                remark,
            ))
        };
        let header: ConsumeMessageDirectlyResultRequestHeader = match request.decode_header() {
            Ok(header) => header,
            Err(bad) => return error(format!("bad consume-directly request: {bad}")),
        };
        let unknown = format!(
            "The Consumer Group <{}> not exist in this consumer",
            header.consumer_group
        );
        let Mode::Push(listener) = &self.mode else {
            return error(unknown);
        };
        if header.consumer_group != self.config.consumer.group {
            return error(unknown);
        }
        let Some(mut message) = decode_records(request.body.clone()).into_iter().next() else {
            return error("the consume-directly request carries no message".into());
        };
        // As Java's resetRetryAndNamespace: a redelivery shows its original topic.
        if message.topic == retry_topic(&self.config.consumer.group) {
            if let Some(original) = message.property(names::RETRY_TOPIC) {
                message.topic = original.to_owned();
            }
        }
        message.topic = self.config.consumer.client.unwrap_name(&message.topic);
        let broker_name = header.broker_name.unwrap_or_default();
        let queue = MessageQueue::new(message.topic.clone(), broker_name, message.queue_id);
        let (listener, request) = (listener.clone(), request.clone());
        HookAnswer::Later(Box::pin(async move {
            let started = std::time::Instant::now();
            let order = matches!(listener, AsyncMessageListener::Orderly(_));
            // As its own task, so a panic is a verdict, not the end of this one.
            let verdict = match listener {
                AsyncMessageListener::Concurrently(listener) => {
                    tokio::spawn(listener(vec![message], queue))
                        .await
                        .map(|status| match status {
                            ConsumeConcurrentlyStatus::ConsumeSuccess => CMResult::CR_SUCCESS,
                            ConsumeConcurrentlyStatus::ReconsumeLater => CMResult::CR_LATER,
                        })
                }
                AsyncMessageListener::Orderly(listener) => {
                    tokio::spawn(listener(vec![message], queue))
                        .await
                        .map(|status| match status {
                            ConsumeOrderlyStatus::Success => CMResult::CR_SUCCESS,
                            ConsumeOrderlyStatus::SuspendCurrentQueueAMoment => CMResult::CR_LATER,
                        })
                }
            };
            let (consume_result, remark) = match verdict {
                Ok(result) => (result, None),
                Err(failure) => (
                    CMResult::CR_THROW_EXCEPTION,
                    Some(format!("listener panicked: {failure}")),
                ),
            };
            let result = ConsumeMessageDirectlyResult {
                order,
                auto_commit: true,
                consume_result: Some(consume_result),
                remark,
                spent_time_mills: i64::try_from(started.elapsed().as_millis()).unwrap_or(i64::MAX),
            };
            RemotingCommand::response_to(&request, ResponseCode::SUCCESS).with_body(result.encode())
        }))
    }

    /// RESET_CONSUMER_CLIENT_OFFSET (one-way): each assigned queue of the topic restarts
    /// pulling at its new offset, which is stored at once.
    fn reset_offsets(self: &Arc<Self>, request: &RemotingCommand) {
        let header: ResetOffsetRequestHeader = match request.decode_header() {
            Ok(header) => header,
            Err(error) => return log::warn!("bad reset-offset request: {error}"),
        };
        if header.group != self.config.consumer.group || self.is_stopping() {
            return;
        }
        let body = match ResetOffsetBody::decode(&request.body) {
            Ok(body) => body,
            Err(error) => return log::warn!("bad reset-offset body: {error}"),
        };
        let mut moved = Vec::new();
        for (queue, offset) in &body.offset_table {
            if queue.topic == header.topic && self.reset_queue(queue, *offset) {
                log::info!("resetting {queue:?} to offset {offset}");
                moved.push(queue.clone());
            }
        }
        let inner = self.clone();
        tokio::spawn(async move { inner.persist_offsets(&moved).await });
    }

    /// Replaces an assigned queue's state with a fresh one pulling from `offset`, which
    /// becomes its offset to commit; false when the queue is not assigned.
    pub(super) fn reset_queue(self: &Arc<Self>, queue: &MessageQueue, offset: i64) -> bool {
        let Some(old) = lock(&self.table).get(queue).cloned() else {
            return false;
        };
        old.stop_pulling();
        let state = Arc::new(QueueState::new(ProcessQueue::new(queue.clone(), offset)));
        state.pq.set_locked(old.pq.is_locked());
        lock(&self.table).insert(queue.clone(), state.clone());
        lock(&self.offsets).insert(queue.clone(), offset);
        self.start_pulling(state);
        true
    }

    /// GET_CONSUMER_STATUS_FROM_CLIENT: the in-memory offsets of the topic's queues.
    fn consumer_status(&self, request: &RemotingCommand) -> RemotingCommand {
        let header: GetConsumerStatusRequestHeader = match request.decode_header() {
            Ok(header) => header,
            Err(error) => {
                let remark = format!("bad consumer-status request: {error}");
                return RemotingCommand::error_to(request, ResponseCode::SYSTEM_ERROR, remark);
            }
        };
        let message_queue_table = if header.group == self.config.consumer.group {
            lock(&self.offsets)
                .iter()
                .filter(|(queue, _)| header.topic.is_empty() || queue.topic == header.topic)
                .map(|(queue, offset)| (queue.clone(), *offset))
                .collect()
        } else {
            BTreeMap::new()
        };
        let body = GetConsumerStatusBody {
            message_queue_table,
            ..GetConsumerStatusBody::default()
        };
        RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(body.encode())
    }

    fn running_info(&self) -> ConsumerRunningInfo {
        let offsets = lock(&self.offsets).clone();
        let mq_table = lock(&self.table)
            .values()
            .map(|state| {
                let queue = state.pq.queue.clone();
                let info = process_queue_info(&state.pq, offsets.get(&queue).copied());
                (queue, info)
            })
            .collect();
        running_info(
            &self.config.consumer,
            self.heartbeat_data().consumer_data_set.remove(0),
            self.orderly,
            self.started_ms.load(Ordering::Relaxed),
            mq_table,
        )
    }

    fn heartbeat_data(&self) -> HeartbeatData {
        let consumer = consumer_data(
            &self.config.consumer,
            &lock(&self.subscriptions),
            if self.is_lite() {
                ConsumeType::CONSUME_ACTIVELY
            } else {
                ConsumeType::CONSUME_PASSIVELY
            },
        );
        HeartbeatData {
            client_id: self.client_id.clone(),
            producer_data_set: vec![ProducerData {
                group_name: CLIENT_INNER_PRODUCER_GROUP.into(),
            }],
            consumer_data_set: vec![consumer],
            heartbeat_fingerprint: 0,
            without_sub: false,
        }
    }

    /// Every broker address the routes know, masters and slaves (Java heartbeats both when
    /// consumers exist).
    fn broker_addrs(&self) -> Vec<String> {
        let mut addrs: Vec<String> = self
            .routes
            .cache()
            .brokers()
            .values()
            .flat_map(|members| members.values().cloned())
            .collect();
        addrs.sort();
        addrs.dedup();
        addrs
    }

    /// Sends a heartbeat to every known broker.
    pub(super) async fn heartbeat_all(&self) {
        self.heartbeat(self.broker_addrs()).await;
    }

    /// Sends a heartbeat to the brokers the routes name that have had none yet.
    pub(super) async fn heartbeat_new_brokers(&self) {
        let new: Vec<String> = {
            let heartbeated = lock(&self.heartbeated);
            self.broker_addrs()
                .into_iter()
                .filter(|addr| !heartbeated.contains(addr))
                .collect()
        };
        if !new.is_empty() {
            self.heartbeat(new).await;
        }
    }

    async fn heartbeat(&self, addrs: Vec<String>) {
        let body = self.heartbeat_data().encode();
        lock(&self.heartbeated).extend(addrs.iter().cloned());
        for addr in addrs {
            let request =
                RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(body.clone());
            if let Err(error) = self
                .routes
                .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
                .await
            {
                log::warn!("heartbeat to {addr} failed: {error}");
            }
        }
    }

    /// Leaves the group at every known broker.
    pub(super) async fn unregister(&self) {
        for addr in self.broker_addrs() {
            let request = protocol::unregister_client(
                &self.client_id,
                None,
                Some(&self.config.consumer.group),
            );
            if let Err(error) = self
                .routes
                .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
                .await
            {
                log::debug!("unregister from {addr} failed: {error}");
            }
        }
    }

    /// The group's client ids as a broker of `topic` lists them, sorted as Java sorts.
    pub(super) async fn consumer_ids(&self, topic: &str) -> Result<Vec<String>> {
        let route = self.routes.route(topic).await?;
        let addrs: Vec<String> = route
            .data
            .broker_datas
            .iter()
            .filter_map(|broker| {
                broker
                    .master_addr()
                    .or(broker.broker_addrs.values().next().map(String::as_str))
                    .map(str::to_owned)
            })
            .collect();
        let addr = addrs
            .get(route::random_index(addrs.len()))
            .cloned()
            .ok_or_else(|| ClientError::NoRoute {
                topic: topic.to_owned(),
                reason: "no broker address in the route".into(),
            })?;
        let response = self
            .routes
            .invoke_broker(
                &addr,
                protocol::get_consumer_list(&self.config.consumer.group),
                &[ResponseCode::SUCCESS],
            )
            .await?;
        let list: protocol::GetConsumerListByGroupResponseBody =
            protocol::decode_body("consumerIdList", &response.body)?;
        let mut ids = list.consumer_id_list;
        ids.sort_by(|a, b| java_string_cmp(a, b));
        Ok(ids)
    }

    pub(super) async fn offset_request(
        &self,
        queue: &MessageQueue,
        request: RemotingCommand,
    ) -> Result<i64> {
        let addr = self
            .routes
            .master_addr(&queue.broker_name, &queue.topic)
            .await?;
        let response = self
            .routes
            .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
            .await?;
        protocol::offset_field(&response.ext_fields)
    }

    /// The stored offset of `queue` for the group (`None`: none stored): the broker's, or
    /// (broadcasting) the local file's, loaded at start.
    pub(super) async fn stored_offset(&self, queue: &MessageQueue) -> Result<Option<i64>> {
        if !self.clustering() {
            return Ok(lock(&self.offsets).get(queue).copied());
        }
        let addr = self
            .routes
            .master_addr(&queue.broker_name, &queue.topic)
            .await?;
        let request = protocol::query_consumer_offset(&self.config.consumer.group, queue);
        let response = self
            .routes
            .invoke_broker(
                &addr,
                request,
                &[ResponseCode::SUCCESS, ResponseCode::QUERY_NOT_FOUND],
            )
            .await?;
        if response.response_code() == ResponseCode::QUERY_NOT_FOUND {
            return Ok(None);
        }
        protocol::offset_field(&response.ext_fields).map(Some)
    }

    /// Start offset of a newly assigned queue (docs/protocol.md#client-timings), as the
    /// blocking consumer's: the stored one, else per consume-from-where.
    pub(super) async fn initial_offset(&self, queue: &MessageQueue) -> Result<i64> {
        if let Some(offset) = self.stored_offset(queue).await? {
            if offset >= 0 {
                return Ok(offset);
            }
        }
        let retry = comet_proto::names::is_retry_topic(&queue.topic);
        let config = &self.config.consumer;
        match config.consume_from_where {
            ConsumeFromWhere::LastOffset if retry => Ok(0),
            ConsumeFromWhere::FirstOffset => Ok(0),
            ConsumeFromWhere::LastOffset => {
                self.offset_request(queue, protocol::get_max_offset(queue))
                    .await
            }
            ConsumeFromWhere::Timestamp if retry => {
                self.offset_request(queue, protocol::get_max_offset(queue))
                    .await
            }
            ConsumeFromWhere::Timestamp => {
                let timestamp = config
                    .consume_timestamp_ms
                    .unwrap_or_else(|| crate::config::now_ms() - 30 * 60 * 1000);
                self.offset_request(queue, protocol::search_offset(queue, timestamp))
                    .await
            }
        }
    }

    /// Persists the in-memory offset of each of `queues` (UPDATE_CONSUMER_OFFSET), or
    /// (broadcasting) the whole table to the local file: a small file written whole and
    /// fsynced on the calling task, every persist interval and at shutdown.
    pub(super) async fn persist_offsets(&self, queues: &[MessageQueue]) {
        if let Some(path) = &self.local_offsets {
            let table = lock(&self.offsets).clone();
            if let Err(error) = crate::consumer::offset_store::write_local(path, &table) {
                log::warn!("persisting offsets failed: {error}");
            }
            return;
        }
        for queue in queues {
            let Some(offset) = lock(&self.offsets).get(queue).copied() else {
                continue;
            };
            let outcome = async {
                let addr = self
                    .routes
                    .master_addr(&queue.broker_name, &queue.topic)
                    .await?;
                let request =
                    protocol::update_consumer_offset(&self.config.consumer.group, queue, offset);
                self.routes
                    .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
                    .await
            };
            if let Err(error) = outcome.await {
                log::debug!("persisting the offset of {queue:?} failed: {error}");
            }
        }
    }

    /// LOCK_BATCH_MQ of `queues` (one broker's): the ones the broker granted.
    pub(super) async fn lock_batch(
        &self,
        broker_name: &str,
        queues: &[MessageQueue],
    ) -> Result<Vec<MessageQueue>> {
        if !self.clustering() {
            // Broadcasting: every member consumes every queue, nothing to lock.
            return Ok(queues.to_vec());
        }
        let topic = queues.first().map(|q| q.topic.clone()).unwrap_or_default();
        let addr = self.routes.master_addr(broker_name, &topic).await?;
        let body = protocol::LockBatchRequestBody {
            client_id: self.client_id.clone(),
            consumer_group: self.config.consumer.group.clone(),
            mq_set: queues.iter().cloned().collect(),
            only_this_broker: false,
        };
        let response = self
            .routes
            .invoke_broker(&addr, protocol::lock_batch(&body), &[ResponseCode::SUCCESS])
            .await?;
        let locked: protocol::LockBatchResponseBody =
            protocol::decode_body("lockOKMQSet", &response.body)?;
        Ok(locked.lock_ok_mq_set.into_iter().collect())
    }

    /// True when the broker granted the lock of `queue`.
    pub(super) async fn lock_queue(&self, queue: &MessageQueue) -> bool {
        match self
            .lock_batch(&queue.broker_name, std::slice::from_ref(queue))
            .await
        {
            Ok(locked) => locked.contains(queue),
            Err(error) => {
                log::debug!("locking {queue:?} failed: {error}");
                false
            }
        }
    }

    /// UNLOCK_BATCH_MQ of `queues`, grouped by broker, each awaited (Java's shutdown
    /// unlocks two-way too).
    pub(super) async fn unlock_queues(&self, queues: &[MessageQueue]) {
        if !self.clustering() {
            return;
        }
        let mut by_broker: BTreeMap<String, Vec<MessageQueue>> = BTreeMap::new();
        for queue in queues {
            by_broker
                .entry(queue.broker_name.clone())
                .or_default()
                .push(queue.clone());
        }
        for (broker, queues) in by_broker {
            let outcome = async {
                let addr = self.routes.master_addr(&broker, &queues[0].topic).await?;
                let body = protocol::UnlockBatchRequestBody {
                    client_id: self.client_id.clone(),
                    consumer_group: self.config.consumer.group.clone(),
                    mq_set: queues.iter().cloned().collect(),
                    only_this_broker: false,
                };
                self.routes
                    .invoke_broker(
                        &addr,
                        protocol::unlock_batch(&body),
                        &[ResponseCode::SUCCESS],
                    )
                    .await
            };
            if let Err(error) = outcome.await {
                log::warn!("unlocking queues on {broker} failed: {error}");
            }
        }
    }

    /// CONSUMER_SEND_MSG_BACK (docs/protocol.md#consumer-send-back); `delay_level` 0 lets the
    /// broker choose, -1 sends to the DLQ at once. When the broker refuses a redelivery, it
    /// is sent to `%RETRY%<group>` by an internal producer, as the Java client's fallback.
    pub(super) async fn send_back(
        &self,
        queue: &MessageQueue,
        message: &MessageExt,
        delay_level: i32,
    ) -> Result<()> {
        match self.send_back_to_broker(queue, message, delay_level).await {
            Ok(()) => Ok(()),
            Err(error) if delay_level >= 0 => {
                log::debug!("send-back refused ({error}); sending to the retry topic");
                self.send_to_retry_topic(message).await
            }
            Err(error) => Err(error),
        }
    }

    async fn send_back_to_broker(
        &self,
        queue: &MessageQueue,
        message: &MessageExt,
        delay_level: i32,
    ) -> Result<()> {
        let addr = self
            .routes
            .master_addr(&queue.broker_name, &queue.topic)
            .await?;
        let origin_msg_id = message
            .property(names::ORIGIN_MESSAGE_ID)
            .unwrap_or(&message.msg_id)
            .to_owned();
        let request = protocol::consumer_send_msg_back(ConsumerSendMsgBackRequestHeader {
            offset: message.commit_log_offset,
            group: self.config.consumer.group.clone(),
            delay_level,
            origin_msg_id: Some(origin_msg_id),
            origin_topic: Some(message.topic.clone()),
            unit_mode: Some(false),
            max_reconsume_times: Some(self.config.max_reconsume_times),
            broker_name: Some(queue.broker_name.clone()),
        });
        self.routes
            .invoke_broker(&addr, request, &[ResponseCode::SUCCESS])
            .await
            .map(|_| ())
    }

    /// The fallback of docs/protocol.md#consumer-send-back: a normal send to
    /// `%RETRY%<group>` carrying the original topic and id, the next reconsume count and its
    /// delay level.
    async fn send_to_retry_topic(&self, message: &MessageExt) -> Result<()> {
        let producer = self.retry_producer()?;
        let mut properties = message.properties.clone();
        if properties.get(names::RETRY_TOPIC).is_none() {
            properties.insert(names::RETRY_TOPIC, message.topic.clone());
        }
        if properties.get(names::ORIGIN_MESSAGE_ID).is_none() {
            properties.insert(names::ORIGIN_MESSAGE_ID, message.msg_id.clone());
        }
        let reconsume_times = message.reconsume_times + 1;
        properties.insert(names::RECONSUME_TIME, reconsume_times.to_string());
        let max = self.config.max_reconsume_times;
        properties.insert(names::MAX_RECONSUME_TIMES, max.to_string());
        properties.insert(names::DELAY, (3 + message.reconsume_times).to_string());
        properties.remove(names::TRAN_MSG);
        properties.remove(names::MIN_OFFSET);
        properties.remove(names::MAX_OFFSET);
        let retry = Message {
            topic: retry_topic(&self.config.consumer.group),
            flag: message.flag,
            body: message.body.clone(),
            properties,
        };
        producer.send(retry).await.map(|_| ())
    }

    /// The internal producer of the fallback, made on first use.
    fn retry_producer(&self) -> Result<AsyncProducer> {
        let mut slot = lock(&self.retry_producer);
        if let Some(producer) = slot.as_ref() {
            return Ok(producer.clone());
        }
        if self.is_stopping() {
            return Err(ClientError::State("shut down"));
        }
        let mut client = self.config.consumer.client.clone();
        client.instance_name = format!("{}-retry", self.client_id.replace('@', "-"));
        let producer =
            AsyncProducer::new(ProducerConfig::new(CLIENT_INNER_PRODUCER_GROUP, client))?;
        *slot = Some(producer.clone());
        Ok(producer)
    }
}
