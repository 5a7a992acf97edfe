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
//!  runtime's blocking-pool thread ──► END_TRANSACTION one-way (fromTransactionCheck=true)
//! ```
//!
//! Invariants:
//! * a half that was not stored (`SendStatus` other than `SEND_OK`) is rolled back without
//!   running the local transaction, as the Java client does;
//! * a decision never blocks on the broker: END_TRANSACTION is one-way, so a lost decision
//!   costs only a check-back;
//! * check-backs run one at a time on the producer's runtime's blocking-pool thread, never
//!   on a thread serving connections; beyond [`crate::limits::TRANSACTION_CHECKS_QUEUED_MAX`]
//!   waiting, a check is dropped (the broker asks again later);
//! * a panicking checker answers Unknown (the broker asks again).
//!
//! [`TransactionProducer`] is the blocking face of [`AsyncTransactionProducer`], which does
//! the conversation; it runs on the runtime of its [`Producer`] (the face of the same async
//! producer): `execute` runs on the calling thread, the checker on the runtime's one
//! blocking-pool thread.
//!
//! A check can reach any producer instance of the group that heartbeats the broker, so a
//! restarted application answers for halves its previous instance left undecided. A fresh
//! instance heartbeats a broker only once it knows a route through it: list the topics in
//! [`TransactionProducerConfig::topics`] so `start` fetches their routes and heartbeats at
//! once (5.x's `DefaultMQProducer.topics`).

use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::{CheckTransactionStateRequestHeader, EndTransactionRequestHeader};
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::message_id::decode_offset_msg_id;
use comet_proto::properties::names;
use comet_proto::{RemotingCommand, RequestCode};

use super::{Producer, ProducerConfig};
use crate::aio::{AsyncCheckListener, AsyncTransactionProducer};
use crate::error::{ClientError, Result};
use crate::message::{Message, SendResult};

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

/// A transactional producer. Thread-safe; clones share one producer. Not for use inside an
/// async runtime (use [`AsyncTransactionProducer`] there).
///
/// Ordinary sends go through [`TransactionProducer::producer`], as `TransactionMQProducer`
/// is a `DefaultMQProducer`.
#[derive(Clone)]
pub struct TransactionProducer {
    transactions: AsyncTransactionProducer,
    /// The face of `transactions`' producer, whose runtime runs everything.
    producer: Producer,
}

impl TransactionProducer {
    /// A transactional producer whose check-backs `check` answers; call
    /// [`TransactionProducer::start`] before sending.
    pub fn new(
        config: TransactionProducerConfig,
        check: impl Fn(&MessageExt) -> LocalTransactionState + Send + Sync + 'static,
    ) -> Result<TransactionProducer> {
        let transactions =
            AsyncTransactionProducer::new(config, AsyncCheckListener::blocking(check))?;
        let producer = Producer::over(transactions.producer().clone())?;
        Ok(TransactionProducer {
            transactions,
            producer,
        })
    }

    /// Starts the producer and registers the group with the brokers of the configured
    /// topics' publish routes ([`AsyncTransactionProducer::start`]; a failed route fetch or
    /// heartbeat is logged), so check-backs can reach this instance once this returns.
    pub fn start(&self) -> Result<()> {
        self.producer.start()?;
        self.producer.inner.run(self.transactions.start())
    }

    /// Stops answering check-backs, then shuts the producer down. Idempotent.
    pub fn shutdown(&self) {
        self.transactions.stop_checks();
        self.producer.shutdown();
    }

    /// The underlying producer, for ordinary sends.
    pub fn producer(&self) -> &Producer {
        &self.producer
    }

    /// The async transactional producer underneath.
    pub fn as_async(&self) -> &AsyncTransactionProducer {
        &self.transactions
    }

    /// Sends `message` as a half message (sync, with the producer's retries), runs `execute`
    /// on the calling thread once it is stored, and sends the decision. A delay level is
    /// ignored (transactional messages cannot be delayed). When the half is stored with a
    /// status other than `SEND_OK`, `execute` is not run and the half is rolled back.
    ///
    /// If `execute` panics, the panic propagates and no decision is sent; the broker then
    /// checks the half back, as it does for Unknown.
    pub fn send_in_transaction(
        &self,
        message: Message,
        execute: impl FnOnce(&Message, &SendResult) -> LocalTransactionState,
    ) -> Result<TransactionSendResult> {
        let sending = self
            .transactions
            .send_in_transaction(message, |message, send_result| async move {
                execute(&message, &send_result)
            });
        self.producer.inner.run(sending)
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
