//! END_TRANSACTION (37,
//! docs/protocol.md#transaction-requests, docs/protocol.md#transactional-messages): the producer's
//! commit or rollback of a half message, run on the shard whose commit log holds the half (the half
//! queue's owner).

use comet_proto::flags::message as message_sys_flag;
use comet_proto::headers::EndTransactionRequestHeader;
use comet_proto::message::RecordView;
use comet_proto::properties::names;
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};
use comet_store::PhysicalOffset;

use crate::reappend::{append_on_owners, ReappendError};
use crate::shard::ShardBroker;
use crate::transaction;

fn reply(request: &RemotingCommand, code: ResponseCode, remark: &str) -> Option<RemotingCommand> {
    if request.is_oneway() {
        if code != ResponseCode::SUCCESS {
            comet_net::warn_request!(request, "END_TRANSACTION refused: {remark}");
        }
        return None;
    }
    Some(RemotingCommand::error_to(request, code, remark))
}

/// Serves END_TRANSACTION; `None` for the one-way form (the Java producer's).
pub async fn process(broker: &ShardBroker, request: &RemotingCommand) -> Option<RemotingCommand> {
    if !broker.config().broker_role.is_master() {
        // As Java's `EndTransactionProcessor`: a slave's log holds only its master's records.
        let remark = "Message store is slave mode, so end transaction is forbidden.";
        return reply(request, ResponseCode::SLAVE_NOT_AVAILABLE, remark);
    }
    let header = match EndTransactionRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return reply(request, ResponseCode::SYSTEM_ERROR, &e.to_string()),
    };
    let commit = match header.commit_or_rollback {
        message_sys_flag::TRANSACTION_NOT_TYPE => return None,
        message_sys_flag::TRANSACTION_COMMIT_TYPE => true,
        message_sys_flag::TRANSACTION_ROLLBACK_TYPE => false,
        other => {
            let remark = format!("commitOrRollback {other} is not 0, 8 or 12");
            return reply(request, ResponseCode::SYSTEM_ERROR, &remark);
        }
    };
    let half = match PhysicalOffset::from_i64(header.commit_log_offset) {
        Some(physical) => broker.store().read_record(physical).await.ok().flatten(),
        None => None,
    };
    let Some(half) = half else {
        return reply(
            request,
            ResponseCode::SYSTEM_ERROR,
            "find prepared transaction message failed",
        );
    };
    let Ok(view) = RecordView::parse(&half) else {
        return reply(
            request,
            ResponseCode::SYSTEM_ERROR,
            "prepared message unreadable",
        );
    };
    if let Err(remark) = check_half(&view, &header) {
        return reply(request, ResponseCode::SYSTEM_ERROR, remark);
    }
    match decide(broker, &view, commit).await {
        Ok(Decision::Stored) => {
            // Under the half's real topic, as Java's commit and rollback totals are.
            let topic = view.property(names::REAL_TOPIC).unwrap_or(view.topic());
            let shard = broker.shard().index();
            let born_ms = view.born_timestamp();
            broker
                .metrics()
                .record_transaction(shard, topic, commit, born_ms);
            reply(request, ResponseCode::SUCCESS, "")
        }
        // Apache keeps no guard here (a second commit would store the message again); Comet
        // never applies a second decision, and answers as Apache does for a half it cannot
        // use, so a two-way caller learns its decision was not applied.
        Ok(Decision::AlreadyResolved) => {
            reply(request, ResponseCode::SYSTEM_ERROR, ALREADY_RESOLVED_REMARK)
        }
        Err(error) => reply(request, ResponseCode::SYSTEM_ERROR, &error.to_string()),
    }
}

/// The remark of the answer to a decision for a half that already has one (committed,
/// rolled back, or discarded after `transactionCheckMax` checks): Apache's wording for a half
/// it cannot find.
pub const ALREADY_RESOLVED_REMARK: &str = "Find prepared transaction message failed";

/// What [`decide`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// The decision was stored.
    Stored,
    /// The half already had a decision; nothing was stored.
    AlreadyResolved,
}

fn check_half(
    view: &RecordView<'_>,
    header: &EndTransactionRequestHeader,
) -> Result<(), &'static str> {
    if view.topic() != comet_proto::names::TRANS_HALF_TOPIC {
        return Err("the message at commitLogOffset is not a half message");
    }
    if view.property(names::PGROUP) != Some(header.producer_group.as_str()) {
        return Err("The producer group wrong");
    }
    if view.queue_offset() != header.tran_state_table_offset {
        return Err("The transaction state table offset wrong");
    }
    if view.physical_offset() != header.commit_log_offset {
        return Err("The commit log offset wrong");
    }
    Ok(())
}

/// Why a decision could not be stored.
#[derive(Debug, thiserror::Error)]
pub enum DecisionError {
    /// The half does not say where its committed message goes.
    #[error("the half message has no REAL_TOPIC/REAL_QID")]
    NoRealQueue,
    /// The committed message or the op record was not stored.
    #[error(transparent)]
    Reappend(#[from] ReappendError),
}

/// Stores the decision for a half once: the committed message (commit only), then the op
/// record. A half already resolved is left alone.
pub async fn decide(
    broker: &ShardBroker,
    half: &RecordView<'_>,
    commit: bool,
) -> Result<Decision, DecisionError> {
    let key = (half.queue_id(), half.queue_offset());
    if !transaction::mark_resolved(key) {
        return Ok(Decision::AlreadyResolved);
    }
    let result = store_decision(broker, half, commit).await;
    if result.is_err() {
        transaction::unmark_resolved(key);
    }
    result.map(|()| Decision::Stored)
}

async fn store_decision(
    broker: &ShardBroker,
    half: &RecordView<'_>,
    commit: bool,
) -> Result<(), DecisionError> {
    if commit {
        let level_count = broker.store().config().delay_levels_ms.len();
        let record = transaction::committed_record(broker, half, level_count)
            .ok_or(DecisionError::NoRealQueue)?;
        append_on_owners(broker, vec![record]).await?;
    }
    let op = transaction::op_record(broker, (half.queue_id(), half.queue_offset()));
    Ok(append_on_owners(broker, vec![op]).await?)
}
