//! Consumption: the listener's futures, bounded by the consume permits (Java's consume pool,
//! `ConsumeMessageConcurrentlyService` and `ConsumeMessageOrderlyService`).
//!
//! * Concurrent: each pulled batch is split into chunks of `consume_batch_max`, each a task
//!   waiting for a permit. Success removes the chunk from its process queue and moves the
//!   offset to the oldest unfinished message. `ReconsumeLater` (or a panic) sends each
//!   message back (CONSUMER_SEND_MSG_BACK, with the retry-topic fallback); a message whose
//!   send-back failed stays in the queue and is consumed again here after 5 s, its reconsume
//!   count raised. Results for a queue taken away meanwhile are dropped, as Java drops them.
//! * Orderly: one task per queue at a time, in offset order, while the broker lock is held;
//!   after 60 s on one queue it yields. `SuspendCurrentQueueAMoment` puts the batch back and
//!   retries after `suspend_current_queue_time`; past `max_reconsume_times` the batch goes to
//!   the DLQ and consumption moves on.
//!
//! The listener's future runs as its own task, so a panic is seen as a failed consumption
//! and a cancellation (shutdown past its grace time) can drop it at once; a cancelled batch
//! is neither removed nor committed, so it is delivered again.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_proto::message::MessageExt;

use super::{AsyncMessageListener, Inner, ListenerFuture, Mode, QueueState};
use crate::consumer::{ConsumeConcurrentlyStatus, ConsumeOrderlyStatus};
use crate::message::MessageQueue;
use crate::trace::ConsumeReturnType;

/// Local redelivery delay when a send-back failed (Java: 5 s).
const LOCAL_RETRY_DELAY: Duration = Duration::from_secs(5);
/// Orderly consumption yields after this long on one queue (Java
/// `MAX_TIME_CONSUME_CONTINUOUSLY`).
const ORDERLY_SLICE: Duration = Duration::from_secs(60);
/// Orderly: next look at a queue whose lock is not held (Java `tryLockLaterAndReconsume`).
const ORDERLY_UNLOCKED_RETRY: Duration = Duration::from_millis(100);
/// Orderly: next slice after one that yielded.
const ORDERLY_YIELD: Duration = Duration::from_millis(10);

impl Inner {
    /// Runs a listener future as a task: `None` when cancelled meanwhile (the future is
    /// dropped), `Some(None)` when it panicked.
    async fn run_listener<T: Send + 'static>(
        &self,
        future: ListenerFuture<T>,
    ) -> Option<Option<T>> {
        let mut task = tokio::spawn(future);
        tokio::select! {
            biased;
            () = self.cancelled() => {
                task.abort();
                None
            }
            joined = &mut task => Some(joined.ok()),
        }
    }

    /// `messages` and their `queue` as the listener sees them: topics without the client's
    /// namespace (the consumer keeps the broker-side names, which send-back needs).
    fn shown(
        &self,
        messages: &[MessageExt],
        queue: &MessageQueue,
    ) -> (Vec<MessageExt>, MessageQueue) {
        let client = &self.config.consumer.client;
        (
            crate::message::unwrap_messages(client, messages.to_vec()),
            crate::message::unwrap_queue(client, queue),
        )
    }

    /// Sleeps `delay`; false when cancelled meanwhile.
    async fn pause(&self, delay: Duration) -> bool {
        if delay.is_zero() {
            return true;
        }
        tokio::select! {
            () = tokio::time::sleep(delay) => true,
            () = self.cancelled() => false,
        }
    }

    /// Spawns the consumption of `messages` of `state` after `delay`.
    pub(super) fn spawn_concurrently(
        self: &Arc<Self>,
        state: &Arc<QueueState>,
        messages: Vec<MessageExt>,
        delay: Duration,
    ) {
        tokio::spawn(
            self.clone()
                .consume_concurrently(state.clone(), messages, delay),
        );
    }

    async fn consume_concurrently(
        self: Arc<Self>,
        state: Arc<QueueState>,
        messages: Vec<MessageExt>,
        delay: Duration,
    ) {
        let Mode::Push(AsyncMessageListener::Concurrently(listener)) = &self.mode else {
            unreachable!("concurrent consumption on an orderly consumer")
        };
        if !self.pause(delay).await {
            return;
        }
        let permit = tokio::select! {
            permit = self.permits.clone().acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
            () = self.cancelled() => return,
        };
        let pq = &state.pq;
        if pq.is_dropped() || self.is_stopping() {
            return;
        }
        let (shown, queue) = self.shown(&messages, &pq.queue);
        let trace = self
            .tracer
            .as_ref()
            .and_then(|tracer| tracer.before(&messages));
        let started = Instant::now();
        let future = listener(shown, queue);
        let Some(outcome) = self.run_listener(future).await else {
            return;
        };
        if let (Some(tracer), Some(call)) = (&self.tracer, trace) {
            let success = outcome.map(|status| status == ConsumeConcurrentlyStatus::ConsumeSuccess);
            let kind = ConsumeReturnType::classify(success, started.elapsed());
            tracer.after(call, success == Some(true), kind);
        }
        let status = outcome.unwrap_or(ConsumeConcurrentlyStatus::ReconsumeLater);
        if pq.is_dropped() {
            return;
        }
        let mut retry_locally = Vec::new();
        // Broadcasting drops failed messages, as Java does (no retry topic per member).
        if status == ConsumeConcurrentlyStatus::ReconsumeLater && self.clustering() {
            for message in &messages {
                if let Err(error) = self.send_back(&pq.queue, message, 0).await {
                    log::warn!(
                        "send-back of {} failed, retrying locally: {error}",
                        message.msg_id
                    );
                    retry_locally.push(message.clone());
                }
            }
        }
        let done: Vec<i64> = messages
            .iter()
            .map(|m| m.queue_offset)
            .filter(|offset| !retry_locally.iter().any(|r| r.queue_offset == *offset))
            .collect();
        let offset = pq.remove(done);
        if !pq.is_dropped() {
            self.update_offset(&pq.queue, offset);
        }
        drop(permit);
        if !retry_locally.is_empty() {
            for message in &mut retry_locally {
                message.reconsume_times += 1;
            }
            self.spawn_concurrently(&state, retry_locally, LOCAL_RETRY_DELAY);
        }
    }

    /// Schedules the orderly consumption of `state` after `delay`, unless it is already
    /// scheduled or running.
    pub(super) fn schedule_orderly(self: &Arc<Self>, state: &Arc<QueueState>, delay: Duration) {
        if state.pq.consume_scheduled.swap(true, Ordering::AcqRel) {
            return;
        }
        tokio::spawn(self.clone().consume_orderly(state.clone(), delay));
    }

    async fn consume_orderly(self: Arc<Self>, state: Arc<QueueState>, delay: Duration) {
        let reschedule = if self.pause(delay).await {
            self.consume_orderly_slice(&state).await
        } else {
            None
        };
        state.pq.consume_scheduled.store(false, Ordering::Release);
        if state.pq.is_dropped() || self.is_stopping() {
            return;
        }
        match reschedule {
            Some(delay) => self.schedule_orderly(&state, delay),
            // Messages put after the slice found the queue empty scheduled nothing (this
            // task was still marked scheduled).
            None if !state.pq.is_empty() => self.schedule_orderly(&state, Duration::ZERO),
            None => {}
        }
    }

    /// Consumes in order until the queue is empty (`None`) or a pause is needed.
    async fn consume_orderly_slice(&self, state: &QueueState) -> Option<Duration> {
        let Mode::Push(AsyncMessageListener::Orderly(listener)) = &self.mode else {
            unreachable!("orderly consumption on a concurrent consumer")
        };
        let pq = &state.pq;
        let _serial = state.consume_lock.lock().await;
        let started = Instant::now();
        loop {
            if pq.is_dropped() || self.is_stopping() {
                return None;
            }
            if !pq.is_locked() {
                return Some(ORDERLY_UNLOCKED_RETRY);
            }
            if started.elapsed() > ORDERLY_SLICE {
                return Some(ORDERLY_YIELD);
            }
            let _permit = tokio::select! {
                permit = self.permits.clone().acquire_owned() => permit.ok()?,
                () = self.cancelled() => return None,
            };
            if pq.is_dropped() || self.is_stopping() {
                return None;
            }
            let messages = pq.take_in_order(self.config.consume_batch_max);
            if messages.is_empty() {
                return None;
            }
            let (shown, queue) = self.shown(&messages, &pq.queue);
            let trace = self
                .tracer
                .as_ref()
                .and_then(|tracer| tracer.before(&messages));
            let call_started = Instant::now();
            let future = listener(shown, queue);
            // Cancelled: the batch stays in the consuming set, uncommitted.
            let outcome = self.run_listener(future).await?;
            if let (Some(tracer), Some(call)) = (&self.tracer, trace) {
                let success = outcome.map(|status| status == ConsumeOrderlyStatus::Success);
                let kind = ConsumeReturnType::classify(success, call_started.elapsed());
                tracer.after(call, success == Some(true), kind);
            }
            let status = outcome.unwrap_or(ConsumeOrderlyStatus::SuspendCurrentQueueAMoment);
            let mut give_up = false;
            if status == ConsumeOrderlyStatus::SuspendCurrentQueueAMoment
                && messages
                    .iter()
                    .any(|m| m.reconsume_times >= self.config.max_reconsume_times)
            {
                give_up = true;
                for message in &messages {
                    if let Err(error) = self.send_back(&pq.queue, message, -1).await {
                        log::warn!("sending {} to the DLQ failed: {error}", message.msg_id);
                        give_up = false;
                        break;
                    }
                }
            }
            if status == ConsumeOrderlyStatus::Success || give_up {
                let offset = pq.commit_consuming();
                if !pq.is_dropped() {
                    self.update_offset(&pq.queue, offset);
                }
            } else {
                pq.rollback_consuming();
                return Some(self.config.suspend_current_queue_time);
            }
        }
    }
}
