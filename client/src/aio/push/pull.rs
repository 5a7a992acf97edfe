//! The pull task of one queue: long polling with Java's flow control
//! (`DefaultMQPushConsumerImpl.pullMessage`).
//!
//! Before each pull, in Java's order: more than the queue's message threshold cached, or
//! more than its byte threshold, or (concurrent consumption) a span between the oldest and
//! newest cached message above `consume_concurrently_max_span`, delays the pull by
//! `flow_control_delay` (50 ms). The checks come before a pull, as in Java, so a queue may
//! hold up to one pull batch more than its threshold. An orderly queue whose broker lock is
//! not held tries to lock it, and waits 1 s when refused.
//!
//! The task is cancelled (aborted) when its queue is taken away or the consumer stops; that
//! is safe at any await: a pull answer not yet applied is simply dropped (the next owner
//! pulls from the committed offset).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use comet_proto::flags::pull as pull_flag;
use comet_proto::message::decode_records;
use comet_proto::ResponseCode;

use super::{AsyncMessageListener, Inner, Mode, QueueState};
use crate::consumer::core::{filter_pulled, Subscription};
use crate::error::Result;
use crate::protocol::{self, PullRequest};
use crate::util::lock;

/// Wait of an orderly queue whose broker lock was refused.
const LOCK_RETRY_DELAY: Duration = Duration::from_secs(1);

impl Inner {
    pub(super) async fn pull_loop(self: Arc<Self>, state: Arc<QueueState>) {
        while !self.is_stopping() && !state.pq.is_dropped() {
            if let Some(delay) = self.pull_step(&state).await {
                tokio::time::sleep(delay).await;
            }
        }
    }

    /// One pull, or the reason to wait: how long to wait before the next one.
    async fn pull_step(self: &Arc<Self>, state: &Arc<QueueState>) -> Option<Duration> {
        let pq = &state.pq;
        let config = &self.config.consumer;
        let (cached_messages, cached_bytes) = pq.held();
        let (messages_max, bytes_max) = self.thresholds(&pq.queue.topic);
        if cached_messages > messages_max || cached_bytes > bytes_max {
            return Some(config.flow_control_delay);
        }
        if !self.orderly {
            if pq.max_span() > self.config.consume_concurrently_max_span {
                return Some(config.flow_control_delay);
            }
        } else if !pq.is_locked() {
            let locked = self.lock_queue(&pq.queue).await;
            pq.set_locked(locked);
            if !locked {
                return Some(LOCK_RETRY_DELAY);
            }
        }
        let subscription = lock(&self.subscriptions).get(&pq.queue.topic).cloned();
        let Some(subscription) = subscription else {
            return Some(config.pull_delay_on_error);
        };
        match self.pull(state, &subscription).await {
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
                    self.heartbeat_all().await;
                }
                Some(config.pull_delay_on_error)
            }
        }
    }

    async fn pull(
        self: &Arc<Self>,
        state: &Arc<QueueState>,
        subscription: &Subscription,
    ) -> Result<()> {
        let config = &self.config.consumer;
        let pq = &state.pq;
        let queue = &pq.queue;
        let offset = pq.next_offset.load(Ordering::Acquire);
        let lite = self.is_lite();
        // A lite pull consumer commits through its offset store only (Java's lite pulls
        // carry no commit offset, but the subscription).
        let commit_offset = if lite || !self.clustering() {
            0
        } else {
            lock(&self.offsets).get(queue).copied().unwrap_or(0)
        };
        let mut sys_flag = pull_flag::build(commit_offset > 0, true, lite, false);
        if lite {
            sys_flag |= pull_flag::LITE_PULL;
        }
        let request = protocol::pull_message(&PullRequest {
            group: config.group.clone(),
            queue: queue.clone(),
            offset,
            max_messages: config.pull_batch_size,
            max_bytes: config.pull_batch_bytes,
            sys_flag,
            commit_offset,
            suspend: config.suspend,
            subscription: lite.then(|| subscription.expression().to_owned()),
            sub_version: subscription.sub_version,
            expression_type: subscription.expression_type(),
            lite,
        });
        let addr = self
            .routes
            .master_addr(&queue.broker_name, &queue.topic)
            .await?;
        let response = self
            .transport
            .invoke(&addr, request, config.pull_timeout)
            .await?;
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
                let messages = filter_pulled(
                    &config.group,
                    decode_records(response.body),
                    subscription,
                    &header,
                    offset,
                );
                if messages.is_empty() {
                    self.correct_tags_offset(state, header.next_begin_offset);
                } else {
                    pq.put(&messages);
                    state.cached_peak.fetch_max(pq.held().0, Ordering::Relaxed);
                    self.deliver(state, messages);
                }
            }
            ResponseCode::PULL_OFFSET_MOVED => {
                log::warn!(
                    "{queue:?}: offset {offset} moved to {}",
                    header.next_begin_offset
                );
                lock(&self.offsets).insert(queue.clone(), header.next_begin_offset);
                self.persist_offsets(std::slice::from_ref(queue)).await;
            }
            _ => self.correct_tags_offset(state, header.next_begin_offset),
        }
        Ok(())
    }

    /// Nothing waits for consumption, so everything before `next_offset` is done (filtered
    /// out or consumed): commit it (Java `correctTagsOffset`).
    fn correct_tags_offset(&self, state: &QueueState, next_offset: i64) {
        if !self.is_lite() && state.pq.held().0 == 0 {
            self.update_offset(&state.pq.queue, next_offset);
        }
    }

    /// Hands pulled messages (already in the process queue) to consumption.
    fn deliver(
        self: &Arc<Self>,
        state: &Arc<QueueState>,
        messages: Vec<comet_proto::message::MessageExt>,
    ) {
        match &self.mode {
            Mode::Lite(buffer) => buffer.deliver(state, messages),
            Mode::Push(AsyncMessageListener::Concurrently(_)) => {
                for chunk in messages.chunks(self.config.consume_batch_max) {
                    self.spawn_concurrently(state, chunk.to_vec(), Duration::ZERO);
                }
            }
            Mode::Push(AsyncMessageListener::Orderly(_)) => {
                self.schedule_orderly(state, Duration::ZERO)
            }
        }
    }
}
