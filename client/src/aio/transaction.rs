//! The async transactional producer (Java `TransactionMQProducer` and its
//! `TransactionListener`), over [`AsyncProducer`]: the conversation of
//! docs/protocol.md#transaction-requests. The blocking [`crate::TransactionProducer`] is
//! its face on a runtime of its own.
//!
//! ```text
//!  send_in_transaction ── SEND (TRAN_MSG=true, PGROUP, sysflag PREPARED) ──► broker (half)
//!        │ SEND_OK
//!        ▼
//!  execute(message, send_result).await -> Commit | Rollback | Unknown
//!        │
//!        └── END_TRANSACTION one-way (8 / 12 / 0) ──► broker: stores or drops the message
//!
//!  broker, for a half still undecided after transactionTimeOut:
//!  CHECK_TRANSACTION_STATE one-way ──► a connection registered under PGROUP ──► the
//!  producer's request hook ──► checker task ──► END_TRANSACTION one-way
//!  (fromTransactionCheck=true) to the broker that asked
//! ```
//!
//! Invariants:
//! * a half not stored with `SEND_OK` is rolled back without running the local transaction;
//! * a decision never waits for the broker: END_TRANSACTION is one-way, so a lost decision
//!   costs only a check-back. Dropping `send_in_transaction`'s future after the half was
//!   stored sends no decision either: the broker checks the half back.
//! * check-backs run as tasks (an async checker) or on tokio's blocking pool (a blocking
//!   one), at most [`TRANSACTION_CHECKS_QUEUED_MAX`] at once; beyond that a check is dropped
//!   (the broker asks again at its next interval);
//! * a panicking checker answers Unknown (the broker asks again).
//!
//! The broker sends check-backs to a producer registered under the half's group, so this
//! producer heartbeats its group ([`AsyncTransactionProducer::start`], and before each
//! half is sent), then every `heartbeat_broker_interval`, as the async producer registers
//! for request-reply.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Weak};

use comet_proto::headers::CheckTransactionStateRequestHeader;
use comet_proto::message::MessageExt;
use comet_proto::properties::names;
use comet_proto::RemotingCommand;
use tokio::sync::Semaphore;

use super::producer::{AsyncProducer, CheckBacks, Inner};
use super::transport::HookAnswer;
use crate::error::Result;
use crate::limits::TRANSACTION_CHECKS_QUEUED_MAX;
use crate::message::{Message, SendResult, SendStatus};
use crate::producer::transaction::{
    check_answer, end_transaction_request, mark_half, LocalTransactionState,
    TransactionProducerConfig, TransactionSendResult,
};

/// The future an async checker returns.
pub type CheckFuture = Pin<Box<dyn Future<Output = LocalTransactionState> + Send + 'static>>;

type AsyncCheckFn = dyn Fn(MessageExt) -> CheckFuture + Send + Sync;
type BlockingCheckFn = dyn Fn(&MessageExt) -> LocalTransactionState + Send + Sync;

/// What answers the broker's check-backs: the state of the local transaction of a half
/// message the broker has no decision for (Java `TransactionListener.checkLocalTransaction`).
/// The half carries the application's properties and `UNIQ_KEY` (its `client_msg_id`).
#[derive(Clone)]
pub enum AsyncCheckListener {
    /// A function returning a future, run as a task of the runtime.
    Async(Arc<AsyncCheckFn>),
    /// A blocking function (one that may wait on a database, say), run on tokio's blocking
    /// pool so it never holds a runtime worker.
    Blocking(Arc<BlockingCheckFn>),
}

impl AsyncCheckListener {
    /// A checker from an async function or a closure returning a future.
    pub fn from_async<F, Fut>(check: F) -> AsyncCheckListener
    where
        F: Fn(MessageExt) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = LocalTransactionState> + Send + 'static,
    {
        AsyncCheckListener::Async(Arc::new(move |half| Box::pin(check(half))))
    }

    /// A checker from a blocking function.
    pub fn blocking<F>(check: F) -> AsyncCheckListener
    where
        F: Fn(&MessageExt) -> LocalTransactionState + Send + Sync + 'static,
    {
        AsyncCheckListener::Blocking(Arc::new(check))
    }

    /// The checker's answer about `half`; Unknown when it panicked.
    async fn run(&self, half: MessageExt) -> LocalTransactionState {
        // Each as a task of its own, so a panic is an answer, not the end of the caller.
        let outcome = match self {
            AsyncCheckListener::Async(check) => tokio::spawn(check(half)).await,
            AsyncCheckListener::Blocking(check) => {
                let check = check.clone();
                tokio::task::spawn_blocking(move || check(&half)).await
            }
        };
        outcome.unwrap_or_else(|error| {
            log::warn!("check-back listener failed ({error}): answering UNKNOW");
            LocalTransactionState::Unknown
        })
    }
}

/// An async transactional producer. Cheap to clone; clones share one producer.
///
/// Ordinary sends go through [`AsyncTransactionProducer::producer`], as
/// `TransactionMQProducer` is a `DefaultMQProducer`.
#[derive(Clone)]
pub struct AsyncTransactionProducer {
    producer: AsyncProducer,
    checks: Arc<CheckService>,
    /// The configured topics, in the client's namespace.
    topics: Vec<String>,
}

/// Answers check-backs for one producer group.
struct CheckService {
    group: String,
    /// Weak: the producer's transport holds this service through its hook.
    producer: Weak<Inner>,
    listener: AsyncCheckListener,
    /// Check-backs running at once, at most [`TRANSACTION_CHECKS_QUEUED_MAX`].
    running: Arc<Semaphore>,
}

impl AsyncTransactionProducer {
    /// A transactional producer whose check-backs `checker` answers. Needs no runtime;
    /// call [`AsyncTransactionProducer::start`] on one before sending.
    pub fn new(
        config: TransactionProducerConfig,
        checker: AsyncCheckListener,
    ) -> Result<AsyncTransactionProducer> {
        for topic in &config.topics {
            crate::validate::check_topic(topic)?;
        }
        let topics = config
            .topics
            .iter()
            .map(|topic| config.producer.client.wrap_name(topic))
            .collect();
        let producer = AsyncProducer::new(config.producer)?;
        let inner = producer.shared();
        let checks = Arc::new(CheckService {
            group: inner.config().group.clone(),
            producer: Arc::downgrade(inner),
            listener: checker,
            running: Arc::new(Semaphore::new(TRANSACTION_CHECKS_QUEUED_MAX)),
        });
        let set = inner.set_checks(checks.clone());
        assert!(set, "a new producer answers no check-backs yet");
        Ok(AsyncTransactionProducer {
            producer,
            checks,
            topics,
        })
    }

    /// Registers the group with the brokers of the configured topics' publish routes (a
    /// heartbeat each; a failed route fetch or heartbeat is logged) and starts the periodic
    /// heartbeat, on the current tokio runtime. Check-backs of halves an earlier instance of
    /// the group left undecided can reach this one from then on.
    pub async fn start(&self) -> Result<()> {
        let inner = self.producer.shared();
        inner.check_running()?;
        if self.topics.is_empty() {
            inner.register(None).await;
        }
        for topic in &self.topics {
            inner.register(Some(topic.as_str())).await;
        }
        Ok(())
    }

    /// The underlying producer, for ordinary sends.
    pub fn producer(&self) -> &AsyncProducer {
        &self.producer
    }

    /// Check-backs being answered now.
    pub fn checks_running(&self) -> usize {
        TRANSACTION_CHECKS_QUEUED_MAX - self.checks.running.available_permits()
    }

    /// Sends `message` as a half message (with the producer's retries), awaits `execute`
    /// once it is stored, and sends the decision. A delay level is ignored (transactional
    /// messages cannot be delayed). When the half is stored with a status other than
    /// `SEND_OK`, `execute` is not run and the half is rolled back.
    ///
    /// `execute` gets the message as sent (its `UNIQ_KEY` is the send result's `msg_id`)
    /// and the half's send result. If it panics, or this future is dropped before the
    /// decision is sent, no decision is sent: the broker checks the half back, as it does
    /// for Unknown.
    pub async fn send_in_transaction<F, Fut>(
        &self,
        mut message: Message,
        execute: F,
    ) -> Result<TransactionSendResult>
    where
        F: FnOnce(Message, SendResult) -> Fut,
        Fut: Future<Output = LocalTransactionState>,
    {
        let inner = self.producer.shared();
        inner.check_running()?;
        let group = inner.config().group.clone();
        mark_half(&mut message, &group);
        let prepared = inner.rules().prepare(message.clone())?;
        // The broker must know this client under the group before it could check back.
        inner.register(Some(prepared.topic.as_str())).await;
        let send_result = inner.send_retrying(&prepared).await?;
        let state = if send_result.status == SendStatus::SendOk {
            message
                .properties
                .insert(names::UNIQ_KEY, send_result.msg_id.clone());
            execute(message, send_result.clone()).await
        } else {
            LocalTransactionState::RollbackMessage
        };
        if let Err(error) =
            end_transaction(inner, &group, &prepared.topic, &send_result, state).await
        {
            // One-way, as in Java: a lost decision is recovered by the broker's check-back.
            log::warn!(
                "END_TRANSACTION for {} ({}) not sent: {error}",
                send_result.msg_id,
                state.name()
            );
        }
        Ok(TransactionSendResult {
            send_result,
            local_transaction_state: state,
        })
    }

    /// Stops answering check-backs (those running finish) and shuts the producer down.
    /// Idempotent.
    pub fn shutdown(&self) {
        self.stop_checks();
        self.producer.shutdown();
    }

    /// Stops answering check-backs (those running finish); the producer goes on.
    pub(crate) fn stop_checks(&self) {
        self.checks.running.close();
    }
}

/// END_TRANSACTION with `state` for the half `send_result` names, one-way to the master of
/// its queue (`topic` as the broker names it).
async fn end_transaction(
    inner: &Inner,
    group: &str,
    topic: &str,
    send_result: &SendResult,
    state: LocalTransactionState,
) -> Result<()> {
    let request = end_transaction_request(group, send_result, state)?;
    let addr = inner
        .routes()
        .master_addr(&send_result.queue.broker_name, topic)
        .await?;
    let timeout = inner.config().client.api_timeout;
    inner
        .transport()
        .invoke_oneway(&addr, request, timeout)
        .await
}

impl CheckBacks for CheckService {
    fn check(&self, addr: &str, request: &RemotingCommand, half: MessageExt) -> HookAnswer {
        let header: CheckTransactionStateRequestHeader = match request.decode_header() {
            Ok(header) => header,
            Err(error) => {
                log::warn!("bad check-back request from {addr}: {error}");
                return HookAnswer::NotSupported;
            }
        };
        let Ok(permit) = self.running.clone().try_acquire_owned() else {
            log::warn!(
                "{TRANSACTION_CHECKS_QUEUED_MAX} check-backs of {} running or the producer \
                 shut down: check dropped",
                self.group
            );
            return HookAnswer::NotSupported;
        };
        let (producer, listener) = (self.producer.clone(), self.listener.clone());
        let (group, addr) = (self.group.clone(), addr.to_owned());
        HookAnswer::Task(Box::pin(async move {
            let _running = permit;
            let state = listener.run(half.clone()).await;
            let Some(inner) = producer.upgrade() else {
                return;
            };
            let answer = check_answer(&group, &header, &half, state);
            let timeout = inner.config().client.api_timeout;
            if let Err(error) = inner
                .transport()
                .invoke_oneway(&addr, answer, timeout)
                .await
            {
                log::warn!(
                    "check-back answer for {} to {addr} not sent: {error}",
                    half.client_msg_id()
                );
            }
        }))
    }
}
