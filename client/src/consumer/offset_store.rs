//! Consumer offsets: where each queue's consumption stands.
//!
//! * Clustering: offsets live on the broker. The store keeps the latest consumed offset per
//!   queue in memory, reads a missing one with QUERY_CONSUMER_OFFSET, and persists with
//!   one-way UPDATE_CONSUMER_OFFSET (every 5 s, when a queue is dropped, at shutdown).
//! * Broadcasting: offsets live in a local JSON file per client and group, written through a
//!   temporary file and a rename so a crash leaves either the old or the new file.
//!
//! The stored offset is the next offset to consume (everything below it is done).

use std::collections::{BTreeMap, HashMap};
use std::fs;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use comet_proto::ResponseCode;
use serde::{Deserialize, Serialize};

use crate::error::{ClientError, Result};
use crate::instance::ClientInstance;
use crate::message::MessageQueue;
use crate::protocol;

/// Where offsets are kept.
pub(crate) enum Backend {
    /// On the brokers (clustering).
    Remote,
    /// In a local file (broadcasting).
    Local(PathBuf),
}

/// The offsets of one consumer group in one client.
pub(crate) struct OffsetStore {
    group: String,
    instance: Arc<ClientInstance>,
    backend: Backend,
    table: Mutex<HashMap<MessageQueue, i64>>,
}

#[derive(Serialize, Deserialize)]
struct LocalFile {
    #[serde(rename = "offsetTable")]
    offset_table: Vec<LocalEntry>,
}

#[derive(Serialize, Deserialize)]
struct LocalEntry {
    queue: MessageQueue,
    offset: i64,
}

impl OffsetStore {
    pub(crate) fn new(group: &str, instance: Arc<ClientInstance>, backend: Backend) -> OffsetStore {
        OffsetStore {
            group: group.to_owned(),
            instance,
            backend,
            table: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<MessageQueue, i64>> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Loads the local file (broadcasting); nothing to do for the remote backend.
    pub(crate) fn load(&self) -> Result<()> {
        let Backend::Local(path) = &self.backend else {
            return Ok(());
        };
        let loaded = load_local(path)?;
        self.lock().extend(loaded);
        Ok(())
    }

    /// Records consumption progress. With `increase_only`, never moves an offset backwards.
    pub(crate) fn update(&self, queue: &MessageQueue, offset: i64, increase_only: bool) {
        let mut table = self.lock();
        let entry = table.entry(queue.clone()).or_insert(offset);
        if !increase_only || offset > *entry {
            *entry = offset;
        }
    }

    /// The in-memory offsets of `topic`'s queues (of every queue when `topic` is empty), as
    /// Java's `cloneOffsetTable`.
    pub(crate) fn snapshot(&self, topic: &str) -> BTreeMap<MessageQueue, i64> {
        self.lock()
            .iter()
            .filter(|(queue, _)| topic.is_empty() || queue.topic == topic)
            .map(|(queue, offset)| (queue.clone(), *offset))
            .collect()
    }

    /// The in-memory offset.
    pub(crate) fn read_memory(&self, queue: &MessageQueue) -> Option<i64> {
        self.lock().get(queue).copied()
    }

    /// The stored offset: the local file's, or the broker's (`None` when the broker has
    /// none). Remembers what it read.
    pub(crate) fn read_store(&self, queue: &MessageQueue) -> Result<Option<i64>> {
        match &self.backend {
            Backend::Local(_) => Ok(self.read_memory(queue)),
            Backend::Remote => {
                let addr = self
                    .instance
                    .master_addr(&queue.broker_name, &queue.topic)?;
                let request = protocol::query_consumer_offset(&self.group, queue);
                let response = self.instance.invoke_broker(
                    &addr,
                    request,
                    &[ResponseCode::SUCCESS, ResponseCode::QUERY_NOT_FOUND],
                )?;
                if response.response_code() == ResponseCode::QUERY_NOT_FOUND {
                    return Ok(None);
                }
                let offset = protocol::offset_field(&response.ext_fields)?;
                self.update(queue, offset, false);
                Ok(Some(offset))
            }
        }
    }

    /// Forgets a queue (after it was persisted on drop).
    pub(crate) fn remove(&self, queue: &MessageQueue) {
        self.lock().remove(queue);
    }

    /// Persists one queue's offset.
    pub(crate) fn persist(&self, queue: &MessageQueue) -> Result<()> {
        match &self.backend {
            Backend::Local(_) => self.persist_all(&[]),
            Backend::Remote => {
                let Some(offset) = self.read_memory(queue) else {
                    return Ok(());
                };
                let addr = self
                    .instance
                    .master_addr(&queue.broker_name, &queue.topic)?;
                let request = protocol::update_consumer_offset(&self.group, queue, offset);
                self.instance.remoting().invoke_oneway(&addr, request)
            }
        }
    }

    /// Persists the offsets of `queues` (remote) or the whole table (local file).
    pub(crate) fn persist_all(&self, queues: &[MessageQueue]) -> Result<()> {
        match &self.backend {
            Backend::Remote => {
                let mut first_error = None;
                for queue in queues {
                    if let Err(error) = self.persist(queue) {
                        log::debug!("persisting the offset of {queue:?} failed: {error}");
                        first_error.get_or_insert(error);
                    }
                }
                first_error.map_or(Ok(()), Err)
            }
            Backend::Local(path) => {
                let table = self.lock().clone();
                write_local(path, &table)
            }
        }
    }
}

/// The broadcasting offsets file of `group` in the client `client_id` under `dir`.
pub(crate) fn local_path(dir: &std::path::Path, client_id: &str, group: &str) -> PathBuf {
    dir.join(client_id.replace(['@', ':'], "_"))
        .join(group)
        .join("offsets.json")
}

/// Reads a broadcasting offsets file (empty when there is none).
pub(crate) fn load_local(path: &std::path::Path) -> Result<HashMap<MessageQueue, i64>> {
    let text = match fs::read(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(error) => return Err(local_error(path, &error.to_string())),
    };
    let file: LocalFile =
        serde_json::from_slice(&text).map_err(|error| local_error(path, &error.to_string()))?;
    Ok(file
        .offset_table
        .into_iter()
        .map(|entry| (entry.queue, entry.offset))
        .collect())
}

/// Replaces a broadcasting offsets file with `table`, durably.
pub(crate) fn write_local(
    path: &std::path::Path,
    table: &HashMap<MessageQueue, i64>,
) -> Result<()> {
    let file = LocalFile {
        offset_table: table
            .iter()
            .map(|(queue, offset)| LocalEntry {
                queue: queue.clone(),
                offset: *offset,
            })
            .collect(),
    };
    write_atomically(path, &protocol::encode_json(&file))
}

fn local_error(path: &std::path::Path, reason: &str) -> ClientError {
    ClientError::LocalStore {
        path: path.display().to_string(),
        reason: reason.to_owned(),
    }
}

/// Replaces the offsets file whole and durably (file and directory fsynced), so a crash leaves
/// either the previous offsets or the new ones, never an empty or torn file.
fn write_atomically(path: &std::path::Path, bytes: &[u8]) -> Result<()> {
    comet_fs::write_atomic(path, bytes).map_err(|e| local_error(path, &e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ClientConfig;

    // Proves the broadcasting file round trip: offsets persisted by one store are loaded by
    // the next, increase-only updates never move backwards, and a missing file is empty.
    #[test]
    fn local_file_round_trip() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("group").join("offsets.json");
        let instance = ClientInstance::new(ClientConfig::with_namesrv("127.0.0.1:9876"));
        let queue = MessageQueue::new("T", "broker-a", 1);
        let first = OffsetStore::new("g", instance.clone(), Backend::Local(path.clone()));
        first.load().unwrap();
        assert_eq!(first.read_store(&queue).unwrap(), None);
        first.update(&queue, 7, true);
        first.update(&queue, 5, true);
        assert_eq!(first.read_memory(&queue), Some(7));
        first.persist_all(&[]).unwrap();
        let second = OffsetStore::new("g", instance.clone(), Backend::Local(path));
        second.load().unwrap();
        assert_eq!(second.read_store(&queue).unwrap(), Some(7));
        instance.shutdown();
    }
}
