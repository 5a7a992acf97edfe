//! The namespaced key/value config store (PUT/GET/DELETE_KV_CONFIG, GET_KVLIST_BY_NAMESPACE),
//! persisted as RocketMQ's `kvConfig.json`: `{"configTable":{"<namespace>":{"<key>":"<value>"}}}`.
//!
//! Owned by the name server's shard, like the route table. Every change is persisted
//! atomically through `comet_rt::fs` (temporary file, fsync, rename, directory fsync), so a
//! crash leaves either the old or the new file, never a torn one.
//! Writes run on the executor's blocking thread; a version number makes sure an older
//! snapshot can never overwrite a newer one even if two writes were queued.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use comet_proto::body::KVTable;
use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::limits::{KV_ENTRIES_MAX, KV_ENTRY_BYTES_MAX};

/// A KV operation that cannot be done.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum KvError {
    /// A namespace, key or value exceeds [`KV_ENTRY_BYTES_MAX`].
    #[error("KV entry part of {bytes} bytes exceeds {max} bytes")]
    EntryTooLarge {
        /// Its length.
        bytes: usize,
        /// The limit.
        max: usize,
    },
    /// The store holds [`KV_ENTRIES_MAX`] entries already.
    #[error("KV store full ({0} entries)")]
    Full(usize),
    /// The persisted file cannot be read or parsed.
    #[error("KV config file {path}: {message}")]
    File {
        /// The file.
        path: String,
        /// What failed.
        message: String,
    },
}

#[derive(Default, Serialize, Deserialize)]
struct KvConfigFile {
    #[serde(rename = "configTable", default)]
    config_table: BTreeMap<String, BTreeMap<String, String>>,
}

/// The store. Lives on the name server's shard.
pub struct KvConfig {
    table: BTreeMap<String, BTreeMap<String, String>>,
    entry_count: usize,
    path: PathBuf,
    version: u64,
    written_version: Arc<Mutex<u64>>,
}

impl KvConfig {
    /// Loads `path`; a missing file is an empty store, a malformed one an error (the operator
    /// must look before we overwrite it).
    pub fn load(path: &Path) -> Result<KvConfig, KvError> {
        let table = match std::fs::read(path) {
            Ok(bytes) => {
                let file: KvConfigFile =
                    comet_proto::json::from_slice(&bytes).map_err(|error| KvError::File {
                        path: path.display().to_string(),
                        message: error.to_string(),
                    })?;
                file.config_table
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => BTreeMap::new(),
            Err(error) => {
                return Err(KvError::File {
                    path: path.display().to_string(),
                    message: error.to_string(),
                })
            }
        };
        let entry_count = table.values().map(BTreeMap::len).sum();
        Ok(KvConfig {
            table,
            entry_count,
            path: path.to_owned(),
            version: 0,
            written_version: Arc::new(Mutex::new(0)),
        })
    }

    /// Stores `value` under `(namespace, key)`.
    pub fn put(&mut self, namespace: &str, key: &str, value: &str) -> Result<(), KvError> {
        for part in [namespace, key, value] {
            if part.len() > KV_ENTRY_BYTES_MAX {
                return Err(KvError::EntryTooLarge {
                    bytes: part.len(),
                    max: KV_ENTRY_BYTES_MAX,
                });
            }
        }
        let exists = self.get(namespace, key).is_some();
        if !exists && self.entry_count >= KV_ENTRIES_MAX {
            return Err(KvError::Full(self.entry_count));
        }
        let entries = self.table.entry(namespace.to_owned()).or_default();
        entries.insert(key.to_owned(), value.to_owned());
        self.entry_count += usize::from(!exists);
        self.version += 1;
        Ok(())
    }

    /// The value under `(namespace, key)`.
    pub fn get(&self, namespace: &str, key: &str) -> Option<&str> {
        self.table.get(namespace)?.get(key).map(String::as_str)
    }

    /// Removes `(namespace, key)`; true when it existed.
    pub fn delete(&mut self, namespace: &str, key: &str) -> bool {
        let Some(entries) = self.table.get_mut(namespace) else {
            return false;
        };
        let removed = entries.remove(key).is_some();
        if entries.is_empty() {
            self.table.remove(namespace);
        }
        if removed {
            self.entry_count -= 1;
            self.version += 1;
        }
        removed
    }

    /// Every entry of `namespace`, `None` when it has none.
    pub fn list(&self, namespace: &str) -> Option<KVTable> {
        let entries = self.table.get(namespace)?;
        Some(KVTable {
            table: entries.clone(),
        })
    }

    /// A write job for the current state, to run on a blocking thread.
    pub fn persist_job(&self) -> impl FnOnce() -> std::io::Result<()> + Send + 'static {
        let file = KvConfigFile {
            config_table: self.table.clone(),
        };
        let bytes = comet_proto::json::to_bytes(&file);
        let path = self.path.clone();
        let version = self.version;
        let written_version = self.written_version.clone();
        move || {
            let mut written = written_version.lock().unwrap_or_else(|e| e.into_inner());
            if *written >= version && version > 0 {
                return Ok(());
            }
            comet_rt::fs::write_atomic(&path, &bytes)?;
            *written = version;
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves put/get/delete/list, the entry size limit, and that a persisted store loads back
    // identically in RocketMQ's file shape.
    #[test]
    fn kv_round_trip_and_limits() {
        let directory = tempfile::tempdir().unwrap();
        let path = directory.path().join("namesrv").join("kvConfig.json");
        let mut kv = KvConfig::load(&path).unwrap();
        kv.put("ORDER_TOPIC_CONFIG", "TopicA", "broker-a:4")
            .unwrap();
        kv.put("ns", "k", "v").unwrap();
        assert!(kv.delete("ns", "k"));
        assert!(!kv.delete("ns", "k"));
        assert_eq!(kv.get("ORDER_TOPIC_CONFIG", "TopicA"), Some("broker-a:4"));
        assert!(kv.list("ns").is_none());
        let huge = "x".repeat(KV_ENTRY_BYTES_MAX + 1);
        assert!(matches!(
            kv.put("ns", "k", &huge),
            Err(KvError::EntryTooLarge { .. })
        ));
        kv.persist_job()().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            r#"{"configTable":{"ORDER_TOPIC_CONFIG":{"TopicA":"broker-a:4"}}}"#
        );
        let loaded = KvConfig::load(&path).unwrap();
        assert_eq!(
            loaded.list("ORDER_TOPIC_CONFIG"),
            kv.list("ORDER_TOPIC_CONFIG")
        );
        std::fs::write(&path, b"{not json").unwrap();
        assert!(matches!(KvConfig::load(&path), Err(KvError::File { .. })));
    }
}
