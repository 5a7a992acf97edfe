//! The transactional producer (Java `TransactionMQProducer`,
//! docs/protocol.md#transaction-requests and docs/protocol.md#transactional-messages).
//!
//! A transaction is one half message and one decision:
//!
//! ```text
//!  send_in_transaction ── SEND (TRAN_MSG=true, PGROUP, sysflag PREPARED) ──► broker (half)
//!        │ SEND_OK
//!        ▼
//!  execute(&message, &send_result) -> Commit | Rollback | Unknown
//!        │
//!        └── END_TRANSACTION one-way (8 / 12 / 0) ──► broker: stores or drops the message
//!
//!  broker, for a half still undecided after transactionTimeOut:
//!  CHECK_TRANSACTION_STATE one-way ──► any live producer of PGROUP ──► check(&half) on the
//!  producer's check thread ──► END_TRANSACTION one-way (fromTransactionCheck=true)
//! ```
//!
//! Invariants:
//! * a half that was not stored (`SendStatus` other than `SEND_OK`) is rolled back without
//!   running the local transaction, as the Java client does;
//! * a decision never blocks on the broker: END_TRANSACTION is one-way, so a lost decision
//!   costs only a check-back;
//! * check-backs run one at a time on the producer's `comet-tx-check` thread, never on a
//!   transport thread; a full check queue drops the check (the broker asks again later);
//! * a panicking checker answers Unknown (the broker asks again), and the check thread
//!   lives on.
//!
//! A check can reach any producer instance of the group that heartbeats the broker, so a
//! restarted application answers for halves its previous instance left undecided. A fresh
//! instance heartbeats a broker only once it knows a route through it: list the topics in
//! [`TransactionProducerConfig::topics`] so `start` fetches their routes and heartbeats at
//! once (5.x's `DefaultMQProducer.topics`).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Weak};

use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, RequestCode};

use super::{Mode, Producer, ProducerConfig, ProducerInner};
use crate::error::{ClientError, Result};
use crate::instance::TransactionChecker;
use crate::limits::TRANSACTION_CHECKS_QUEUED_MAX;
use crate::message::{Message, SendResult, SendStatus};
use crate::util::Executor;

/// The outcome of a local transaction (Java `LocalTransactionState`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LocalTransactionState {
    /// The local transaction committed: the broker delivers the message.
    CommitMessage,
    /// The local transaction rolled back: the broker drops the message.
    RollbackMessage,
    /// Not known yet: the broker asks the check-back listener later.
    Unknown,
}

impl LocalTransactionState {
    /// The Java enum name (`UNKNOW` is spelled as Java spells it).
    pub fn name(self) -> &'static str {
        match self {
            LocalTransactionState::CommitMessage => "COMMIT_MESSAGE",
            LocalTransactionState::RollbackMessage => "ROLLBACK_MESSAGE",
            LocalTransactionState::Unknown => "UNKNOW",
        }
    }

    /// END_TRANSACTION's `commitOrRollback`: the sysflag transaction types 8, 12 and 0
    /// (docs/protocol.md#transaction-decisions-use-sysflag-values), not 1/2/0.
    pub fn commit_or_rollback(self) -> i32 {
        match self {
            LocalTransactionState::CommitMessage => message_sys_flag::TRANSACTION_COMMIT_TYPE,
            LocalTransactionState::RollbackMessage => message_sys_flag::TRANSACTION_ROLLBACK_TYPE,
            LocalTransactionState::Unknown => message_sys_flag::TRANSACTION_NOT_TYPE,
        }
    }
}

/// What [`TransactionProducer::send_in_transaction`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransactionSendResult {
    /// The half message's send result.
    pub send_result: SendResult,
    /// The decision sent to the broker.
    pub local_transaction_state: LocalTransactionState,
}

/// Transactional producer settings.
#[derive(Clone, Debug)]
pub struct TransactionProducerConfig {
    /// The producer settings; `group` is the transaction's producer group (`PGROUP`).
    pub producer: ProducerConfig,
    /// Topics whose routes `start` fetches, heartbeating their brokers at once so
    /// check-backs of earlier instances' halves reach this one without waiting for a send
    /// or the 30 s heartbeat.
    pub topics: Vec<String>,
}

impl TransactionProducerConfig {
    /// Settings for `producer`, no topics listed.
    pub fn new(producer: ProducerConfig) -> TransactionProducerConfig {
        TransactionProducerConfig {
            producer,
            topics: Vec::new(),
        }
    }
}

/// The check-back listener: the state of the local transaction of a half message the
/// broker has no decision for (Java `TransactionListener.checkLocalTransaction`). The message
/// carries the application's properties and `UNIQ_KEY` (its `client_msg_id`).
pub type CheckListener = dyn Fn(&MessageExt) -> LocalTransactionState + Send + Sync + 'static;

/// A transactional producer. Thread-safe; clones share one producer.
///
/// Ordinary sends go through [`TransactionProducer::producer`], as `TransactionMQProducer`
/// is a `DefaultMQProducer`.
#[derive(Clone)]
pub struct TransactionProducer {
    producer: Producer,
    checks: Arc<CheckService>,
    topics: Vec<String>,
}

/// Receives check-backs for one producer group (on the transport's inbound thread) and
/// queues them for the check thread.
struct CheckService {
    answerer: Arc<Answerer>,
    executor: Arc<Executor>,
}

/// Runs the listener and sends the answer, on the check thread.
struct Answerer {
    group: String,
    /// Weak: the instance (owned by the producer) holds this service, so a strong handle
    /// would keep the producer alive forever.
    producer: Weak<ProducerInner>,
    listener: Box<CheckListener>,
}

impl TransactionProducer {
    /// A transactional producer whose check-backs `check` answers; call
    /// [`TransactionProducer::start`] before sending.
    pub fn new(
        config: TransactionProducerConfig,
        check: impl Fn(&MessageExt) -> LocalTransactionState + Send + Sync + 'static,
    ) -> Result<TransactionProducer> {
        for topic in &config.topics {
            crate::validate::check_topic(topic)?;
        }
        let producer = Producer::new(config.producer)?;
        let checks = Arc::new(CheckService {
            answerer: Arc::new(Answerer {
                group: producer.inner.config.group.clone(),
                producer: Arc::downgrade(&producer.inner),
                listener: Box::new(check),
            }),
            executor: Executor::new("comet-tx-check", TRANSACTION_CHECKS_QUEUED_MAX),
        });
        Ok(TransactionProducer {
            producer,
            checks,
            topics: config.topics,
        })
    }

    /// Starts the producer, registers the check-back listener, and fetches the configured
    /// topics' publish routes and heartbeats their brokers (a failed fetch is logged: the
    /// periodic route refresh retries it).
    pub fn start(&self) -> Result<()> {
        self.producer.start()?;
        let instance = &self.producer.inner.instance;
        instance.register_checker(&self.checks.answerer.group, self.checks.clone());
        for topic in &self.topics {
            // The publish route: the topic's own, or the auto-create template's while the
            // name servers do not know the topic yet (a half alone does not register it).
            if let Err(error) = self.producer.inner.publish_route(topic) {
                log::warn!("route of {topic} not fetched at start: {error}");
            }
        }
        if !self.topics.is_empty() {
            instance.heartbeat_all();
        }
        Ok(())
    }

    /// Stops answering check-backs, then shuts the producer down. Idempotent.
    pub fn shutdown(&self) {
        self.producer
            .inner
            .instance
            .unregister_checker(&self.checks.answerer.group);
        self.checks.executor.shutdown();
        self.producer.shutdown();
    }

    /// The underlying producer, for ordinary sends.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// Sends `message` as a half message (sync, with the producer's retries), runs `execute`
    /// once it is stored, and sends the decision. A delay level is ignored (transactional
    /// messages cannot be delayed). When the half is stored with a status other than
    /// `SEND_OK`, `execute` is not run and the half is rolled back.
    ///
    /// If `execute` panics, the panic propagates and no decision is sent; the broker then
    /// checks the half back, as it does for Unknown.
    pub fn send_in_transaction(
        &self,
        mut message: Message,
        execute: impl FnOnce(&Message, &SendResult) -> LocalTransactionState,
    ) -> Result<TransactionSendResult> {
        let inner = &self.producer.inner;
        inner.check_running()?;
        mark_half(&mut message, &inner.config.group);
        let prepared = inner.prepare(message.clone())?;
        let send_result = inner
            .send_with_retries(&prepared, Mode::Sync)?
            .expect("sync sends return a result");
        let state = if send_result.status == SendStatus::SendOk {
            message
                .properties
                .insert(names::UNIQ_KEY, send_result.msg_id.clone());
            execute(&message, &send_result)
        } else {
            LocalTransactionState::RollbackMessage
        };
        if let Err(error) = end_transaction(inner, &send_result, state) {
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
}

/// Makes `message` the half message of a transaction of producer group `group`: the
/// transaction flag and group properties, and no delay (transactional messages cannot be
/// delayed).
pub(crate) fn mark_half(message: &mut Message, group: &str) {
    message.properties.remove(names::DELAY);
    message.properties.insert(names::TRAN_MSG, "true");
    message.properties.insert(names::PGROUP, group);
}

/// END_TRANSACTION for a half this producer just sent (Java `endTransaction`), with the
/// decision `state`: the half is named by the physical offset in the response's offset
/// msgId and by its queue offset.
pub(crate) fn end_transaction_request(
    group: &str,
    send_result: &SendResult,
    state: LocalTransactionState,
) -> Result<RemotingCommand> {
    let id = if send_result.offset_msg_id.is_empty() {
        &send_result.msg_id
    } else {
        &send_result.offset_msg_id
    };
    let commit_log_offset = decode_offset_msg_id(id)
        .map_err(|error| {
            ClientError::Invalid(format!("the half's message id {id} is unreadable: {error}"))
        })?
        .commit_log_offset;
    let queue = &send_result.queue;
    let header = EndTransactionRequestHeader {
        topic: Some(queue.topic.clone()),
        producer_group: group.to_owned(),
        tran_state_table_offset: send_result.queue_offset,
        commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: Some(false),
        msg_id: send_result.msg_id.clone(),
        transaction_id: Some(
            send_result
                .transaction_id
                .clone()
                .unwrap_or_else(|| send_result.msg_id.clone()),
        ),
        broker_name: Some(queue.broker_name.clone()),
    };
    Ok(RemotingCommand::request(RequestCode::END_TRANSACTION, 0).with_header(&header))
}

/// END_TRANSACTION for a blocking producer's half, one-way to the master of its queue.
fn end_transaction(
    inner: &ProducerInner,
    send_result: &SendResult,
    state: LocalTransactionState,
) -> Result<()> {
    let request = end_transaction_request(&inner.config.group, send_result, state)?;
    let queue = &send_result.queue;
    let addr = inner
        .instance
        .master_addr(&queue.broker_name, &queue.topic)?;
    inner.instance.remoting().invoke_oneway(&addr, request)
}

/// The half message a CHECK_TRANSACTION_STATE from `addr` carries (its body is the half as
/// a stored record) and the producer group its `PGROUP` names (Java's
/// `ClientRemotingProcessor.checkTransactionState`); `None`, logged, when it lacks either.
pub(crate) fn checked_half(addr: &str, request: &RemotingCommand) -> Option<(String, MessageExt)> {
    let Some(message) = decode_records(request.body.clone()).into_iter().next() else {
        log::warn!("check-back from {addr}: the body holds no message");
        return None;
    };
    let Some(group) = message.property(names::PGROUP).map(str::to_owned) else {
        log::warn!("check-back from {addr}: the message names no producer group");
        return None;
    };
    Some((group, message))
}

/// The END_TRANSACTION answering a check-back (Java `processTransactionState`): the half
/// named as the check named it, the message's `UNIQ_KEY` as `msgId`, marked as coming from
/// a check.
pub(crate) fn check_answer(
    group: &str,
    header: &CheckTransactionStateRequestHeader,
    half: &MessageExt,
    state: LocalTransactionState,
) -> RemotingCommand {
    let end = EndTransactionRequestHeader {
        topic: header.topic.clone(),
        producer_group: group.to_owned(),
        tran_state_table_offset: header.tran_state_table_offset,
        commit_log_offset: header.commit_log_offset,
        commit_or_rollback: state.commit_or_rollback(),
        from_transaction_check: Some(true),
        msg_id: half.client_msg_id().to_owned(),
        transaction_id: header.transaction_id.clone(),
        broker_name: header.broker_name.clone(),
    };
    RemotingCommand::request(RequestCode::END_TRANSACTION, 0).with_header(&end)
}

impl TransactionChecker for CheckService {
    fn check(&self, addr: &str, request: &RemotingCommand, message: MessageExt) {
        let header: CheckTransactionStateRequestHeader = match request.decode_header() {
            Ok(header) => header,
            Err(error) => return log::warn!("bad check-back request from {addr}: {error}"),
        };
        let answerer = self.answerer.clone();
        let addr = addr.to_owned();
        let job = Box::new(move || answerer.answer(&addr, &header, &message));
        if self.executor.try_submit(job).is_err() {
            log::warn!(
                "check-back queue of {} full or stopped: check dropped",
                self.answerer.group
            );
        }
    }
}

impl Answerer {
    /// Asks the listener and sends its answer to the broker that asked (Java
    /// `processTransactionState`): the half named as the check named it, the message's
    /// `UNIQ_KEY` as `msgId`.
    fn answer(&self, addr: &str, header: &CheckTransactionStateRequestHeader, half: &MessageExt) {
        let Some(producer) = self.producer.upgrade() else {
            return;
        };
        let state = match catch_unwind(AssertUnwindSafe(|| (self.listener)(half))) {
            Ok(state) => state,
            Err(_) => {
                log::warn!(
                    "check-back listener of {} panicked on {}: answering UNKNOW",
                    self.group,
                    half.client_msg_id()
                );
                LocalTransactionState::Unknown
            }
        };
        let request = check_answer(&self.group, header, half, state);
        if let Err(error) = producer.instance.remoting().invoke_oneway(addr, request) {
            log::warn!(
                "check-back answer for {} to {addr} not sent: {error}",
                half.client_msg_id()
            );
        }
    }
}
