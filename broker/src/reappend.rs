//! Re-storing records the broker builds itself: scheduled deliveries, consumer retries,
//! dead letters and committed transactions.
//!
//! Each record names its queue; it is appended by the shard owning that queue, crossing the
//! mesh as [`ShardCall::Append`] when that is another shard. Records for one owner go in as
//! few `Store::append` calls as the size limit allows, so one group commit (one fdatasync)
//! covers many of them. [`append_on_owners`] resolves once every record is durable under the
//! flush policy (SYNC_FLUSH: on disk), which is what lets callers advance persisted cursors
//! only after what they delivered cannot be lost.

use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::time::Duration;

use comet_proto::bytes::BytesMut;
use comet_proto::message::{encode_record, RecordError, RecordSpec, RecordView};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_rt::task_class::{spawn, timeout, TaskClass, TaskHandle};
use comet_rt::ShardId;

use crate::shard::{ShardBroker, ShardCall};

/// Bytes of records handed to one `Store::append` call (well under the store's per-call
/// limit, so a call never spans more than one segment roll).
pub const APPEND_CHUNK_BYTES: usize = 1024 * 1024;

/// Chunk appends to other shards in flight at once per shard (each at most
/// [`APPEND_CHUNK_BYTES`]): enough to keep every owner's group commit full,
/// bounded so one storm cannot queue unbounded work on the mesh.
pub const APPENDS_IN_FLIGHT_MAX: usize = 64;

/// Chunk appends to the shard's own queues in flight at once (each at most
/// [`APPEND_CHUNK_BYTES`]): two store flushes' worth (a flush writes at most
/// 8 MiB), enough to keep the flusher busy while the next chunks are placed. More only holds
/// memory ahead of the flusher: in 1M-message storms on 2 shards, 16, 64 and 256 used the
/// same CPU per message and their wall-clock differences were within run-to-run noise.
pub const LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX: usize = 16;

const _: () = assert!(APPENDS_IN_FLIGHT_MAX > 0 && LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX > 0);

/// Why re-stored records are not durable.
#[derive(Debug, thiserror::Error)]
pub enum ReappendError {
    /// A record does not parse (a bug in the caller).
    #[error("record {index} is malformed: {source}")]
    Malformed {
        /// Position in the call.
        index: usize,
        /// The parser's error.
        #[source]
        source: RecordError,
    },
    /// The owner's store refused or timed out.
    #[error("append on {shard} failed: {reason}")]
    Append {
        /// The owner shard.
        shard: ShardId,
        /// Its explanation.
        reason: String,
    },
}

/// `view` re-encoded for `topic`/`queue_id` with `properties`, everything else (flag, sysflag,
/// born and store hosts, reconsume times, body) kept: how scheduled and timed messages are
/// delivered to their real queue. `None` if the record cannot be encoded.
pub fn restored_record(
    broker: &ShardBroker,
    view: &RecordView<'_>,
    topic: &str,
    queue_id: i32,
    properties: &str,
) -> Option<BytesMut> {
    let spec = RecordSpec {
        topic,
        queue_id,
        flag: view.flag(),
        sysflag: view.sysflag(),
        born_timestamp: view.born_timestamp(),
        born_host: view.born_host(),
        store_host: broker.store_host(),
        reconsume_times: view.reconsume_times(),
        prepared_transaction_offset: view.prepared_transaction_offset(),
        body: view.body(),
        properties,
    };
    let mut record = BytesMut::with_capacity(view.total_size() + 64);
    encode_record(&spec, 0, 0, 0, &mut record).ok()?;
    Some(record)
}

/// The shard owning the queue `record` names.
pub fn owner_of_record(broker: &ShardBroker, record: &[u8]) -> Result<ShardId, RecordError> {
    let view = RecordView::parse(record)?;
    Ok(broker.owner_of(view.topic(), view.queue_id()))
}

/// `records` grouped by the shard owning each one's queue, in their order; a record that does
/// not parse is an error naming its position.
fn group_by_owner(
    broker: &ShardBroker,
    records: Vec<BytesMut>,
) -> Result<BTreeMap<ShardId, Vec<BytesMut>>, ReappendError> {
    let mut by_owner: BTreeMap<ShardId, Vec<BytesMut>> = BTreeMap::new();
    for (index, record) in records.into_iter().enumerate() {
        let owner = owner_of_record(broker, &record)
            .map_err(|source| ReappendError::Malformed { index, source })?;
        by_owner.entry(owner).or_default().push(record);
    }
    Ok(by_owner)
}

/// Appends `records` (any queues) on their owners; resolves when all are durable. On error,
/// some owners may have stored theirs: callers must tolerate a retry storing them again or
/// detect it (the schedule service does, see `crate::delay_level`).
pub async fn append_on_owners(
    broker: &ShardBroker,
    records: Vec<BytesMut>,
) -> Result<(), ReappendError> {
    let by_owner = group_by_owner(broker, records)?;
    for (owner, records) in by_owner {
        for chunk in chunks(records) {
            append_chunk(broker, owner, chunk).await?;
        }
    }
    Ok(())
}

/// Splits records into runs of at most [`APPEND_CHUNK_BYTES`] (one record when larger).
pub(crate) fn chunks(records: Vec<BytesMut>) -> Vec<Vec<BytesMut>> {
    let mut chunks = Vec::new();
    let mut current = Vec::new();
    let mut bytes = 0;
    for record in records {
        if !current.is_empty() && bytes + record.len() > APPEND_CHUNK_BYTES {
            chunks.push(std::mem::take(&mut current));
            bytes = 0;
        }
        bytes += record.len();
        current.push(record);
    }
    if !current.is_empty() {
        chunks.push(current);
    }
    chunks
}

/// Appends one chunk of records on `owner` (across the mesh when it is another shard).
pub(crate) async fn append_chunk(
    broker: &ShardBroker,
    owner: ShardId,
    records: Vec<BytesMut>,
) -> Result<(), ReappendError> {
    assert!(!records.is_empty());
    let response = if owner == broker.shard() {
        // The caller found the owner from each record already: no second parse.
        append_owned(broker, records).await
    } else {
        match broker
            .mesh()
            .call(owner, ShardCall::Append { records })
            .await
        {
            Ok(Some(response)) => response,
            Ok(None) => status(ResponseCode::SYSTEM_ERROR, "no reply"),
            Err(e) => status(ResponseCode::SYSTEM_BUSY, &e.to_string()),
        }
    };
    if response.response_code() == ResponseCode::SUCCESS {
        return Ok(());
    }
    Err(ReappendError::Append {
        shard: owner,
        reason: response.remark.unwrap_or_default(),
    })
}

fn status(code: ResponseCode, remark: &str) -> RemotingCommand {
    let request = RemotingCommand::request(RequestCode::Unknown(0), 0);
    RemotingCommand::response_to(&request, code).with_remark(remark)
}

/// Appends records for queues this shard owns; SUCCESS once durable.
pub async fn append_local(broker: &ShardBroker, records: Vec<BytesMut>) -> RemotingCommand {
    for record in &records {
        match owner_of_record(broker, record) {
            Ok(owner) => assert_eq!(
                owner,
                broker.shard(),
                "re-stored record sent to a non-owner"
            ),
            Err(error) => return status(ResponseCode::SYSTEM_ERROR, &error.to_string()),
        }
    }
    append_owned(broker, records).await
}

/// Appends records already known to be for queues this shard owns; SUCCESS once durable.
async fn append_owned(broker: &ShardBroker, records: Vec<BytesMut>) -> RemotingCommand {
    let limit = Duration::from_millis(broker.config().sync_flush_timeout_ms);
    match timeout(limit, broker.store().append(&records)).await {
        Ok(Ok(appended)) => {
            assert_eq!(appended.len(), records.len());
            status(ResponseCode::SUCCESS, "")
        }
        Ok(Err(e)) => status(ResponseCode::SYSTEM_ERROR, &e.to_string()),
        Err(_) => status(
            ResponseCode::FLUSH_DISK_TIMEOUT,
            "flush did not complete in time",
        ),
    }
}

/// Appends `records` (any real queues) on their owners and resolves when all are durable.
/// Chunks for this shard's own queues are appended directly (no mesh), up to
/// [`LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX`] at once; chunks for other shards cross the mesh, up to
/// [`APPENDS_IN_FLIGHT_MAX`] at once, round robin over owners so every owner's group commit
/// covers many chunks from the start. On error some chunks may be stored (the caller treats
/// the whole set as possibly delivered).
pub async fn append_concurrently(
    broker: &Rc<ShardBroker>,
    records: Vec<BytesMut>,
) -> Result<(), ReappendError> {
    let by_owner = group_by_owner(broker, records)?;
    let mut queues: Vec<(ShardId, VecDeque<Vec<BytesMut>>)> = by_owner
        .into_iter()
        .map(|(owner, records)| (owner, chunks(records).into()))
        .collect();
    let mut local = InFlight::new(LOCAL_APPEND_CHUNKS_IN_FLIGHT_MAX);
    let mut remote = InFlight::new(APPENDS_IN_FLIGHT_MAX);
    while queues.iter().any(|(_, chunks)| !chunks.is_empty()) {
        for (owner, chunks) in &mut queues {
            let Some(chunk) = chunks.pop_front() else {
                continue;
            };
            let lane = if *owner == broker.shard() {
                &mut local
            } else {
                &mut remote
            };
            let broker = broker.clone();
            let owner = *owner;
            lane.start(async move { append_chunk(&broker, owner, chunk).await })
                .await;
        }
    }
    local.finish().await;
    remote.finish().await;
    local.first_error.or(remote.first_error).map_or(Ok(()), Err)
}

/// Chunk appends running as their own tasks, at most `max` at once, oldest awaited first.
struct InFlight {
    max: usize,
    tasks: VecDeque<TaskHandle<Result<(), ReappendError>>>,
    first_error: Option<ReappendError>,
}

impl InFlight {
    fn new(max: usize) -> InFlight {
        assert!(max > 0);
        InFlight {
            max,
            tasks: VecDeque::new(),
            first_error: None,
        }
    }

    /// Starts `append` once fewer than `max` are in flight. Its task runs (and its records
    /// get their place and store time in the log) as soon as the caller yields.
    async fn start<F>(&mut self, append: F)
    where
        F: std::future::Future<Output = Result<(), ReappendError>> + 'static,
    {
        if self.tasks.len() >= self.max {
            let done = self.tasks.pop_front().expect("in flight");
            self.record(done.await);
        }
        self.tasks.push_back(spawn(TaskClass::Produce, append));
    }

    async fn finish(&mut self) {
        while let Some(done) = self.tasks.pop_front() {
            self.record(done.await);
        }
    }

    fn record(&mut self, result: Result<(), ReappendError>) {
        if let Err(e) = result {
            self.first_error.get_or_insert(e);
        }
    }
}
