//! The queue table of one commit log: for every consume queue the store owns, its min and
//! max offsets as durably written to its files, in `checkpoint/<log id>.queues`, replaced
//! whole (written aside, synced, renamed) by the maintenance checkpoint whenever a queue
//! moved, after the queue files it describes were synced and before the checkpoint itself.
//! At open it tells recovery what each queue's files must hold, so a queue file cut short,
//! deleted or zeroed is found even when no later record of that queue follows, and only
//! that queue is rebuilt from the commit log; it also keeps `min` across restarts.
//!
//! ```text
//!  0 magic "CMQT" u32   4 version u32 (1)   8 queue count u32
//!  per queue: topic length u16, topic bytes (UTF-8), queue id i32, min u64, max u64,
//!             physical offset of the record at min i64 (-1: unknown)
//!  end: CRC-32 of every byte before it u32
//! ```
//!
//! Its size grows with the number of queues (about 40 bytes each), never with messages.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use comet_rt::io::IoError;

use crate::error::StoreError;
use crate::offset::{LogId, PhysicalOffset};

const MAGIC: u32 = u32::from_be_bytes(*b"CMQT");
const VERSION: u32 = 1;
const HEADER_BYTES: usize = 12;

/// One queue's line in the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct QueueRecord {
    pub(crate) topic: String,
    pub(crate) queue_id: i32,
    /// The first entry with a record.
    pub(crate) min: u64,
    /// One past the last entry durably in the queue's files.
    pub(crate) max: u64,
    /// Where the record at `min` is, when known.
    pub(crate) min_physical: Option<PhysicalOffset>,
}

/// Why a table file cannot be used.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub(crate) enum TableFault {
    /// Shorter than its header, its records or its checksum.
    #[error("truncated")]
    Truncated,
    /// Not a queue table, or another version.
    #[error("unknown magic or version")]
    Format,
    /// The checksum does not match.
    #[error("checksum mismatch")]
    Checksum,
    /// A topic name that is not UTF-8.
    #[error("topic name is not UTF-8")]
    Topic,
}

/// `checkpoint/<log id>.queues` under `root`.
pub(crate) fn table_path(root: &Path, log_id: LogId) -> PathBuf {
    root.join("checkpoint").join(format!("{log_id}.queues"))
}

/// The table's bytes for `records`.
pub(crate) fn encode(records: &[QueueRecord]) -> Vec<u8> {
    let count = u32::try_from(records.len()).expect("queue count fits u32");
    let mut bytes = Vec::with_capacity(HEADER_BYTES + records.len() * 48 + 4);
    bytes.extend_from_slice(&MAGIC.to_be_bytes());
    bytes.extend_from_slice(&VERSION.to_be_bytes());
    bytes.extend_from_slice(&count.to_be_bytes());
    for record in records {
        let topic_bytes = u16::try_from(record.topic.len()).expect("topic names are short");
        bytes.extend_from_slice(&topic_bytes.to_be_bytes());
        bytes.extend_from_slice(record.topic.as_bytes());
        bytes.extend_from_slice(&record.queue_id.to_be_bytes());
        bytes.extend_from_slice(&record.min.to_be_bytes());
        bytes.extend_from_slice(&record.max.to_be_bytes());
        let physical = record.min_physical.map_or(-1, PhysicalOffset::as_i64);
        bytes.extend_from_slice(&physical.to_be_bytes());
    }
    let crc = crc32fast::hash(&bytes);
    bytes.extend_from_slice(&crc.to_be_bytes());
    bytes
}

/// Reads big-endian fields off the front of a byte slice.
struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn take(&mut self, count: usize) -> Result<&'a [u8], TableFault> {
        if self.rest.len() < count {
            return Err(TableFault::Truncated);
        }
        let (taken, rest) = self.rest.split_at(count);
        self.rest = rest;
        Ok(taken)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], TableFault> {
        let mut array = [0u8; N];
        array.copy_from_slice(self.take(N)?);
        Ok(array)
    }
}

/// The records of a table file.
pub(crate) fn decode(bytes: &[u8]) -> Result<Vec<QueueRecord>, TableFault> {
    let body_bytes = bytes.len().checked_sub(4).ok_or(TableFault::Truncated)?;
    let (body, crc) = bytes.split_at(body_bytes);
    let mut fields = Fields { rest: body };
    let magic = u32::from_be_bytes(fields.array()?);
    let version = u32::from_be_bytes(fields.array()?);
    if magic != MAGIC || version != VERSION {
        return Err(TableFault::Format);
    }
    if crc32fast::hash(body).to_be_bytes() != crc {
        return Err(TableFault::Checksum);
    }
    let count = u32::from_be_bytes(fields.array()?);
    let mut records = Vec::new();
    for _ in 0..count {
        let topic_bytes = usize::from(u16::from_be_bytes(fields.array()?));
        let topic =
            std::str::from_utf8(fields.take(topic_bytes)?).map_err(|_| TableFault::Topic)?;
        let queue_id = i32::from_be_bytes(fields.array()?);
        let min = u64::from_be_bytes(fields.array()?);
        let max = u64::from_be_bytes(fields.array()?);
        let physical = i64::from_be_bytes(fields.array()?);
        records.push(QueueRecord {
            topic: topic.to_string(),
            queue_id,
            min,
            max,
            min_physical: PhysicalOffset::from_i64(physical),
        });
    }
    if !fields.rest.is_empty() {
        return Err(TableFault::Truncated);
    }
    Ok(records)
}

/// The table at `path` by (topic, queue id), read at start-up (blocking); empty when there
/// is none (a new store) or it cannot be used (logged: recovery then trusts the queue files
/// and the queues a record past the checkpoint proves short).
pub(crate) fn read(path: &Path) -> HashMap<(String, i32), QueueRecord> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return HashMap::new(),
        Err(error) => {
            log::warn!("queue table {} unreadable: {error}", path.display());
            return HashMap::new();
        }
    };
    match decode(&bytes) {
        Ok(records) => records
            .into_iter()
            .map(|record| ((record.topic.clone(), record.queue_id), record))
            .collect(),
        Err(fault) => {
            log::warn!("queue table {} ignored: {fault}", path.display());
            HashMap::new()
        }
    }
}

/// Replaces the table at `path` with `bytes` durably, on the blocking thread.
pub(crate) async fn write(path: &Path, bytes: Vec<u8>) -> Result<(), StoreError> {
    let target = path.to_path_buf();
    let written =
        comet_rt::task_class::run_blocking(move || comet_rt::fs::write_atomic(&target, &bytes))
            .await;
    written.map_err(|error| StoreError::Io(IoError::new("write queue table", path, 0, error)))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves records round-trip, and that a truncated, altered or foreign file is refused.
    #[test]
    fn round_trip_and_damage() {
        let records = vec![
            QueueRecord {
                topic: "TopicA".to_string(),
                queue_id: 3,
                min: 10,
                max: 2000,
                min_physical: Some(PhysicalOffset::new(LogId::new(2).expect("id"), 4096)),
            },
            QueueRecord {
                topic: "B".to_string(),
                queue_id: 0,
                min: 0,
                max: 0,
                min_physical: None,
            },
        ];
        let bytes = encode(&records);
        assert_eq!(decode(&bytes), Ok(records));
        assert_eq!(decode(&bytes[..bytes.len() - 1]), Err(TableFault::Checksum));
        assert_eq!(decode(&bytes[..3]), Err(TableFault::Truncated));
        let mut altered = bytes.clone();
        altered[20] ^= 1;
        assert_eq!(decode(&altered), Err(TableFault::Checksum));
        altered = bytes;
        altered[0] ^= 1;
        assert_eq!(decode(&altered), Err(TableFault::Format));
    }
}
