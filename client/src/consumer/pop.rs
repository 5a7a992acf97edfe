//! [`PopConsumer`]: the async pop consumer ([`AsyncPopConsumer`]) for programs without an
//! async runtime.
//!
//! It owns a current-thread tokio runtime and runs each call on it with `block_on`, on the
//! calling thread: no thread of its own. Its connections are served while some thread is
//! inside a call (answers wait in the socket meanwhile), which suits request-answer traffic.
//! Several threads may call at once: one drives the runtime, the others are woken by it.
//! Not for use inside an async runtime (a call would block that runtime's thread; use
//! [`AsyncPopConsumer`] there).

use std::time::Duration;

use crate::aio::pop::{AsyncPopConsumer, PopConsumerConfig, PopMessage};
use crate::error::{ClientError, Result};

/// A blocking pop consumer (receive, ack, change invisible time). See
/// [`AsyncPopConsumer`] for the semantics of each call.
pub struct PopConsumer {
    consumer: AsyncPopConsumer,
    runtime: tokio::runtime::Runtime,
}

impl PopConsumer {
    /// A pop consumer with its own connections and runtime.
    pub fn new(config: PopConsumerConfig) -> Result<PopConsumer> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|error| ClientError::Runtime(error.to_string()))?;
        Ok(PopConsumer {
            consumer: AsyncPopConsumer::new(config)?,
            runtime,
        })
    }

    /// Subscribes `topic` with a TAG expression ([`AsyncPopConsumer::subscribe`]).
    pub fn subscribe(&self, topic: &str, expression: &str) -> Result<()> {
        self.consumer.subscribe(topic, expression)
    }

    /// Subscribes `topic` with a SQL92 selector ([`AsyncPopConsumer::subscribe_sql`]).
    pub fn subscribe_sql(&self, topic: &str, selector: &str) -> Result<()> {
        self.consumer.subscribe_sql(topic, selector)
    }

    /// Drops the subscription of `topic`.
    pub fn unsubscribe(&self, topic: &str) {
        self.consumer.unsubscribe(topic);
    }

    /// Receives up to `max_messages`, blocking up to the poll time
    /// ([`AsyncPopConsumer::receive`]).
    pub fn receive(
        &self,
        max_messages: usize,
        invisible_time: Duration,
    ) -> Result<Vec<PopMessage>> {
        self.runtime
            .block_on(self.consumer.receive(max_messages, invisible_time))
    }

    /// Acks `message` ([`AsyncPopConsumer::ack`]).
    pub fn ack(&self, message: &PopMessage) -> Result<()> {
        self.runtime.block_on(self.consumer.ack(message))
    }

    /// Makes `message` invisible for `invisible_time` from now, updating its receipt
    /// ([`AsyncPopConsumer::change_invisible_time`]).
    pub fn change_invisible_time(
        &self,
        message: &mut PopMessage,
        invisible_time: Duration,
    ) -> Result<()> {
        self.runtime
            .block_on(self.consumer.change_invisible_time(message, invisible_time))
    }

    /// Messages held now ([`AsyncPopConsumer::in_flight`]).
    pub fn in_flight(&self) -> usize {
        self.consumer.in_flight()
    }

    /// The async consumer underneath (shares subscriptions and connections).
    pub fn as_async(&self) -> &AsyncPopConsumer {
        &self.consumer
    }

    /// Closes every connection; later calls fail with `State("shut down")`. Idempotent.
    pub fn shutdown(&self) {
        self.consumer.shutdown();
    }
}
