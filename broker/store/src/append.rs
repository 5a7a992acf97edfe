//! The appender: validates records, copies them into the commit log's open chunk
//! synchronously (queue offsets assigned, QUEUEOFFSET / PHYSICALOFFSET / STORETIMESTAMP
//! patched in place), creates the spare segment the log rolls into, and waits until the
//! flush lanes (`flush`) made the appended records durable.

use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use comet_proto::message::RecordView;
use comet_rt::io::{DirectFile, OpenMode};

use crate::commit_log::NeedSpare;
use crate::config::FlushPolicy;
use crate::error::StoreError;
use crate::offset::{file_name, PhysicalOffset, QueueOffset};
use crate::queues::{
    queue_state, TRANSACTION_PREPARED, TRANSACTION_ROLLBACK, TRANSACTION_TYPE_MASK,
};
use crate::shard::Shared;

/// Where one appended record went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AppendedRecord {
    /// Its commit-log offset (with the log id).
    pub physical_offset: PhysicalOffset,
    /// Its offset in its consume queue (0 for prepared and rollback transaction records,
    /// which get no consume-queue entry).
    pub queue_offset: QueueOffset,
    /// STORETIMESTAMP written into it.
    pub store_timestamp_ms: i64,
    /// Its TOTALSIZE.
    pub size_bytes: u32,
}

/// A record validated before append, with what the appender needs from it.
struct Incoming<'a> {
    bytes: &'a [u8],
    topic: &'a str,
    queue_id: i32,
    store_timestamp_position: usize,
    gets_queue_offset: bool,
}

/// The appending side of one store.
pub(crate) struct Appender<'s> {
    shared: &'s Rc<Shared>,
}

impl<'s> Appender<'s> {
    /// The appender of the store whose state is `shared`.
    pub(crate) fn new(shared: &'s Rc<Shared>) -> Appender<'s> {
        Appender { shared }
    }

    /// Appends encoded records (each as produced by `comet_proto::message::encode_record`,
    /// offsets and store time left zero) for any queues. Each record gets the next offset of
    /// its queue; a batch of records for one queue gets consecutive offsets and one durability
    /// wait. Resolves under SYNC_FLUSH after the fdatasync covering the last record, under
    /// ASYNC_FLUSH after the in-memory append.
    pub(crate) async fn append<R: AsRef<[u8]>>(
        &self,
        records: &[R],
    ) -> Result<Vec<AppendedRecord>, StoreError> {
        self.check_writable()?;
        let incoming = validate(records, self.shared.config.record_bytes_max())?;
        let (appended, end) = loop {
            match self.try_append(&incoming) {
                Ok(done) => break done,
                Err(NeedSpare) => self.wait_for_spare().await?,
            }
        };
        self.shared.flush_wanted.wake_all();
        self.shared.appended.wake_all();
        let wait_until = match self.shared.config.flush_policy {
            FlushPolicy::Sync => end,
            // Back-pressure: an ASYNC append waits only when more than
            // `async_dirty_bytes_max` would be waiting for the disk, so memory stays bounded.
            FlushPolicy::Async => end.saturating_sub(self.shared.config.async_dirty_bytes_max),
        };
        if self.shared.log.borrow().durable < wait_until {
            DurableWait {
                shared: self.shared,
                end: wait_until,
            }
            .await?;
        } else if self.shared.config.flush_policy == FlushPolicy::Async {
            // An ASYNC append completes without suspending; let the flusher and other tasks
            // run when this task has used its time slice.
            comet_rt::local::yield_if_needed().await;
        }
        Ok(appended)
    }

    /// Refuses writes to a closed store, after a write failure, or above the disk's hard mark.
    pub(crate) fn check_writable(&self) -> Result<(), StoreError> {
        let shared = &self.shared;
        if shared.closed.get() {
            return Err(StoreError::Closed);
        }
        if let Some(reason) = shared.failure.borrow().as_ref() {
            return Err(StoreError::WriteFailed {
                reason: reason.clone(),
            });
        }
        if let Some((used_percent, hard_percent)) = shared.disk_full.get() {
            return Err(StoreError::DiskFull {
                used_percent,
                hard_percent,
            });
        }
        Ok(())
    }

    /// Copies the records into the log (all or none) and returns where they went and the
    /// log position the append is durable at.
    fn try_append(
        &self,
        incoming: &[Incoming<'_>],
    ) -> Result<(Vec<AppendedRecord>, u64), NeedSpare> {
        let shared = &self.shared;
        let mut log = shared.log.borrow_mut();
        let rolls = log.rolls_needed(incoming.iter().map(|record| record.bytes.len()));
        assert!(
            rolls <= 1,
            "append size limit keeps a call within two segments"
        );
        if rolls == 1 && log.spare.is_none() {
            drop(log);
            self.request_spare();
            return Err(NeedSpare);
        }
        let mut queues = shared.queues.borrow_mut();
        let store_timestamp_ms = comet_rt::clock::wall_clock_ms();
        let mut appended = Vec::with_capacity(incoming.len());
        for record in incoming {
            let queue = queue_state(&mut queues, &shared.config, record.topic, record.queue_id);
            let queue_offset = if record.gets_queue_offset {
                queue.next_offset
            } else {
                0
            };
            let log_id = log.log_id;
            let patch = |bytes: &mut [u8], position: u64| {
                let physical = PhysicalOffset::new(log_id, position).as_i64();
                patch_record(bytes, record, queue_offset, physical, store_timestamp_ms);
            };
            let position = log
                .append_record(record.bytes, patch)
                .expect("spare checked");
            if record.gets_queue_offset {
                queue.next_offset += 1;
            }
            appended.push(AppendedRecord {
                physical_offset: log.physical(position),
                queue_offset: QueueOffset(queue_offset),
                store_timestamp_ms,
                size_bytes: u32::try_from(record.bytes.len()).expect("record size limit"),
            });
        }
        let end = log.write;
        let needs_spare = log.spare.is_none();
        drop(queues);
        drop(log);
        self.count_appended(incoming);
        if needs_spare {
            self.request_spare();
        }
        Ok((appended, end))
    }

    fn count_appended(&self, incoming: &[Incoming<'_>]) {
        let mut stats = self.shared.stats.get();
        stats.appended_records += incoming.len() as u64;
        stats.appended_bytes += incoming.iter().map(|r| r.bytes.len() as u64).sum::<u64>();
        self.shared.stats.set(stats);
    }

    /// Starts creating the spare segment in the background unless it exists or is underway.
    pub(crate) fn request_spare(&self) {
        let (start, dir, segment_bytes) = {
            let mut log = self.shared.log.borrow_mut();
            if log.spare.is_some() || log.spare_creating {
                return;
            }
            log.spare_creating = true;
            (log.spare_start(), log.dir.clone(), log.segment_bytes)
        };
        let shared = Rc::clone(self.shared);
        comet_rt::local::spawn(async move {
            let path = dir.join(file_name(start));
            let created = create_segment(&path, segment_bytes, &shared).await;
            let mut log = shared.log.borrow_mut();
            log.spare_creating = false;
            match created {
                Ok(file) if log.spare_start() == start => {
                    log.spare = Some(Rc::new(file));
                    *shared.spare_failure.borrow_mut() = None;
                }
                Ok(_) => log::warn!("spare segment {} no longer needed", path.display()),
                Err(error) => {
                    log::error!("cannot create segment {}: {error}", path.display());
                    *shared.spare_failure.borrow_mut() = Some(error.to_string());
                }
            }
            drop(log);
            shared.spare_ready.wake_all();
            shared.warm_wanted.wake_all();
        })
        .detach();
    }

    /// Resolves when the spare segment is ready, or fails when it cannot be created.
    pub(crate) async fn wait_for_spare(&self) -> Result<(), StoreError> {
        SpareWait { appender: self }.await
    }

    /// Resolves when the log is durable up to `end`, or fails with the store's failure.
    pub(crate) async fn wait_durable(&self, end: u64) -> Result<(), StoreError> {
        DurableWait {
            shared: self.shared,
            end,
        }
        .await
    }

    /// Counts records appended by a replica (see `replica`).
    pub(crate) fn count_replicated(&self, records: u64, bytes: u64) {
        let mut stats = self.shared.stats.get();
        stats.appended_records += records;
        stats.appended_bytes += bytes;
        self.shared.stats.set(stats);
    }
}

/// Creates, preallocates and syncs a segment file (and its directory entry).
async fn create_segment(
    path: &std::path::Path,
    segment_bytes: u64,
    shared: &Shared,
) -> Result<DirectFile, StoreError> {
    let file = DirectFile::open_data_sync(
        path,
        OpenMode::CreateReadWrite,
        shared.config.faults.clone(),
    )
    .await?;
    file.preallocate(segment_bytes).await?;
    file.fdatasync().await?;
    if let Some(parent) = path.parent() {
        comet_rt::io::sync_directory(parent).await?;
    }
    Ok(file)
}

fn validate<R: AsRef<[u8]>>(
    records: &[R],
    record_bytes_max: usize,
) -> Result<Vec<Incoming<'_>>, StoreError> {
    let total: usize = records.iter().map(|record| record.as_ref().len()).sum();
    if total > record_bytes_max {
        return Err(StoreError::RecordTooLarge {
            length: total,
            max: record_bytes_max,
        });
    }
    let mut incoming = Vec::with_capacity(records.len());
    for (index, record) in records.iter().enumerate() {
        let bytes = record.as_ref();
        let invalid = |reason: String| StoreError::RecordInvalid { index, reason };
        let view = RecordView::parse(bytes).map_err(|error| invalid(error.to_string()))?;
        if view.total_size() != bytes.len() {
            return Err(invalid(format!(
                "{} trailing bytes",
                bytes.len() - view.total_size()
            )));
        }
        if !view.body_crc_matches() {
            return Err(invalid("body CRC does not match the body".to_string()));
        }
        let transaction = view.sysflag() & TRANSACTION_TYPE_MASK;
        incoming.push(Incoming {
            bytes,
            topic: view.topic(),
            queue_id: view.queue_id(),
            store_timestamp_position: comet_proto::message::store_timestamp_position(
                view.sysflag(),
            ),
            gets_queue_offset: transaction != TRANSACTION_PREPARED
                && transaction != TRANSACTION_ROLLBACK,
        });
    }
    Ok(incoming)
}

fn patch_record(
    bytes: &mut [u8],
    record: &Incoming<'_>,
    queue_offset: u64,
    physical: i64,
    store_timestamp_ms: i64,
) {
    use comet_proto::message::{PHYSICAL_OFFSET_POSITION, QUEUE_OFFSET_POSITION};
    let queue_offset = i64::try_from(queue_offset).expect("queue offsets below 2^63");
    bytes[QUEUE_OFFSET_POSITION..QUEUE_OFFSET_POSITION + 8]
        .copy_from_slice(&queue_offset.to_be_bytes());
    bytes[PHYSICAL_OFFSET_POSITION..PHYSICAL_OFFSET_POSITION + 8]
        .copy_from_slice(&physical.to_be_bytes());
    let at = record.store_timestamp_position;
    bytes[at..at + 8].copy_from_slice(&store_timestamp_ms.to_be_bytes());
}

/// Resolves when the log is durable up to `end`, or fails with the store's failure.
struct DurableWait<'s> {
    shared: &'s Shared,
    end: u64,
}

impl Future for DurableWait<'_> {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if self.shared.log.borrow().durable >= self.end {
            return Poll::Ready(Ok(()));
        }
        if let Some(reason) = self.shared.failure.borrow().as_ref() {
            return Poll::Ready(Err(StoreError::WriteFailed {
                reason: reason.clone(),
            }));
        }
        if self.shared.abandoned.get() {
            return Poll::Ready(Err(StoreError::Closed));
        }
        self.shared.durable_waiters.register(self.end, cx.waker());
        Poll::Pending
    }
}

/// Resolves when the spare segment is ready (or its creation failed).
struct SpareWait<'a, 's> {
    appender: &'a Appender<'s>,
}

impl Future for SpareWait<'_, '_> {
    type Output = Result<(), StoreError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let shared = &self.appender.shared;
        if let Err(error) = self.appender.check_writable() {
            return Poll::Ready(Err(error));
        }
        let (ready, creating) = {
            let log = shared.log.borrow();
            (log.spare.is_some(), log.spare_creating)
        };
        if ready {
            return Poll::Ready(Ok(()));
        }
        if !creating {
            if let Some(reason) = shared.spare_failure.borrow_mut().take() {
                return Poll::Ready(Err(StoreError::SegmentUnavailable { reason }));
            }
            self.appender.request_spare();
        }
        shared.spare_ready.register(cx.waker());
        Poll::Pending
    }
}
