//! The consume side of message trace, as Java's `ConsumeMessageTraceHookImpl` writes it
//! around each listener call of a push consumer (docs/protocol.md#message-trace):
//!
//! * before the call, one `SubBefore` record per message (the call's wall clock, the
//!   message's region or `DefaultRegion`, the group without its namespace, a request id
//!   shared by the call, the message id, its reconsume count, its keys);
//! * after it, one `SubAfter` record per message with the same request id, the call's
//!   duration divided by its number of messages, whether it succeeded, and the outcome as
//!   Java's `ConsumeReturnType` ordinal.
//!
//! Messages with `TRACE_ON=false` and messages of the trace topic itself are not traced; a
//! call with none left writes nothing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use comet_proto::message::MessageExt;
use comet_proto::message_id::UniqueKeyGenerator;
use comet_proto::properties::names;

use super::{SubAfterTrace, SubBeforeTrace, TraceDispatcher, TraceRecord, REGION_DEFAULT};
use crate::config::now_ms;

/// A listener call running this long or longer counts as timed out (Java's
/// `consumeTimeout`, 15 min, as `ConsumeMessageConcurrentlyService` reads it).
pub const CONSUME_TIMEOUT: Duration = Duration::from_secs(15 * 60);

/// A listener call's outcome, Java's `ConsumeReturnType` (written as its ordinal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsumeReturnType {
    /// Consumed.
    Success = 0,
    /// Ran [`CONSUME_TIMEOUT`] or longer (whatever it returned).
    TimeOut = 1,
    /// The listener panicked.
    Exception = 2,
    /// The listener returned nothing (Java's null status); kept for the ordinal.
    ReturnNull = 3,
    /// Asked for a redelivery (`ReconsumeLater`, `SuspendCurrentQueueAMoment`).
    Failed = 4,
}

impl ConsumeReturnType {
    /// The outcome of a call that took `elapsed`, as Java classifies it: no status means a
    /// panic; otherwise a timeout first, then the status.
    pub fn classify(status_success: Option<bool>, elapsed: Duration) -> ConsumeReturnType {
        match status_success {
            None => ConsumeReturnType::Exception,
            Some(_) if elapsed >= CONSUME_TIMEOUT => ConsumeReturnType::TimeOut,
            Some(true) => ConsumeReturnType::Success,
            Some(false) => ConsumeReturnType::Failed,
        }
    }
}

/// Writes a push consumer's consume records.
pub struct ConsumeTracer {
    dispatcher: Arc<TraceDispatcher>,
    /// The group as the application names it.
    group: String,
    trace_topic: String,
    ids: UniqueKeyGenerator,
}

/// What a call's `SubAfter` records need from its `SubBefore` records.
pub struct ConsumeTraceCall {
    request_id: String,
    started: Instant,
    /// Message id and keys of each traced message.
    messages: Vec<(String, Option<String>)>,
    /// Messages handed to the listener (traced or not): the cost is shared over them.
    message_count: usize,
}

impl ConsumeTracer {
    /// A tracer of `group` (without its namespace) writing to `dispatcher`, which sends to
    /// `trace_topic`.
    pub fn new(
        dispatcher: Arc<TraceDispatcher>,
        group: &str,
        trace_topic: &str,
        client_id: &str,
    ) -> ConsumeTracer {
        ConsumeTracer {
            dispatcher,
            group: group.to_owned(),
            trace_topic: trace_topic.to_owned(),
            ids: crate::producer::id_generator(client_id),
        }
    }

    /// The dispatcher.
    pub fn dispatcher(&self) -> &Arc<TraceDispatcher> {
        &self.dispatcher
    }

    /// Writes the `SubBefore` records of a call about to consume `messages` (topics as the
    /// broker names them); `None` when none of them is traced.
    pub fn before(&self, messages: &[MessageExt]) -> Option<ConsumeTraceCall> {
        let timestamp_ms = now_ms();
        let request_id = self.ids.next(timestamp_ms);
        let mut traced = Vec::new();
        for message in messages {
            if message.property(names::TRACE_ON) == Some("false")
                || message.topic == self.trace_topic
            {
                continue;
            }
            let msg_id = message.client_msg_id().to_owned();
            let keys = message.property(names::KEYS).map(str::to_owned);
            self.dispatcher
                .append(TraceRecord::SubBefore(SubBeforeTrace {
                    timestamp_ms,
                    region_id: message
                        .property(names::MSG_REGION)
                        .unwrap_or(REGION_DEFAULT)
                        .to_owned(),
                    group: self.group.clone(),
                    request_id: request_id.clone(),
                    msg_id: msg_id.clone(),
                    retry_times: i64::from(message.reconsume_times),
                    keys: keys.clone(),
                }));
            traced.push((msg_id, keys));
        }
        (!traced.is_empty()).then(|| ConsumeTraceCall {
            request_id,
            started: Instant::now(),
            messages: traced,
            message_count: messages.len(),
        })
    }

    /// Writes the `SubAfter` records of `call`, which ended with `outcome`.
    pub fn after(&self, call: ConsumeTraceCall, success: bool, outcome: ConsumeReturnType) {
        let count = u128::try_from(call.message_count.max(1)).unwrap_or(1);
        let cost_ms = i64::try_from(call.started.elapsed().as_millis() / count).unwrap_or(i64::MAX);
        let timestamp_ms = now_ms();
        for (msg_id, keys) in call.messages {
            self.dispatcher.append(TraceRecord::SubAfter(SubAfterTrace {
                request_id: call.request_id.clone(),
                msg_id,
                cost_ms,
                success,
                keys,
                context_code: outcome as i64,
                timestamp_ms,
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves Java's classification order: a panic is an exception whatever the time, a
    // call past the consume timeout is a timeout whatever it returned, then the status.
    #[test]
    fn return_types() {
        let quick = Duration::from_millis(5);
        assert_eq!(
            ConsumeReturnType::classify(None, quick),
            ConsumeReturnType::Exception
        );
        assert_eq!(
            ConsumeReturnType::classify(Some(true), quick),
            ConsumeReturnType::Success
        );
        assert_eq!(
            ConsumeReturnType::classify(Some(false), quick),
            ConsumeReturnType::Failed
        );
        assert_eq!(
            ConsumeReturnType::classify(Some(true), CONSUME_TIMEOUT),
            ConsumeReturnType::TimeOut
        );
        assert_eq!(ConsumeReturnType::Failed as i64, 4);
    }
}
