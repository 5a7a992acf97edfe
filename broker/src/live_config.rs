//! The broker configuration as it is now: start-up values plus what operators changed at run
//! time with UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`).
//!
//! Every request reads the configuration, on every shard, so reading must cost no more than a
//! pointer load: no lock, no shared reference count (an `Arc` clone per request would bounce
//! one cache line between all cores). A [`LiveConfig`] therefore holds an atomic pointer to an
//! immutable [`BrokerConfig`]; an update builds a new one and swaps the pointer. Old versions
//! are never freed, so a `&BrokerConfig` handed out earlier stays valid for the life of the
//! process; updates are rare operator actions, capped at [`UPDATES_MAX`] per process, so what
//! is retained stays bounded (a config is about 1 KiB).
//!
//! Updates are persisted before they apply: `config/broker.properties` under the store root
//! holds every key changed at run time, and start-up applies it after the `-c` file and before
//! command-line flags (see `comet-broker`'s `load_config`), so a restart keeps what was
//! changed, as Apache RocketMQ keeps it in its `brokerConfigPath` file.

use std::collections::BTreeMap;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use thiserror::Error;

use crate::config::{BrokerConfig, ConfigError};

/// Run-time updates accepted per process; each retains one config copy (see the module docs).
pub const UPDATES_MAX: u32 = 4096;

/// Name of the file, under the broker's `config/` folder, holding run-time updates.
pub const OVERRIDES_FILE_NAME: &str = "broker.properties";

/// Keys no update may change: the list itself and the file locations (the overrides file lives
/// under `storePathRootDir`, so moving it at run time would orphan the file that records it).
const BLACKLISTED_KEYS: [&str; 3] = ["configBlackList", "brokerConfigPath", "storePathRootDir"];

/// Why an update was refused. Nothing of a refused update applies.
#[derive(Debug, Error)]
pub enum UpdateError {
    /// A key on the black list (Apache RocketMQ answers NO_PERMISSION).
    #[error("Can not update config in black list. key: {0}")]
    Blacklisted(String),
    /// A known key with a value it cannot take.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// The per-process update budget is spent.
    #[error("more than {UPDATES_MAX} config updates since start-up; restart the broker")]
    TooManyUpdates,
    /// The overrides file could not be written; the update did not apply.
    #[error("cannot persist config updates to {path}: {message}")]
    Persist {
        /// The overrides file.
        path: PathBuf,
        /// The I/O error.
        message: String,
    },
}

/// What an accepted update changed.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct UpdateOutcome {
    /// Keys applied now.
    pub applied_live: Vec<String>,
    /// Keys recorded and persisted that take effect at the next start.
    pub applied_at_restart: Vec<String>,
    /// Keys Comet does not know (ignored, as Apache ignores keys with no config field).
    pub ignored: Vec<String>,
}

/// Broker-wide, shared by every shard. Dereferences to the current [`BrokerConfig`].
pub struct LiveConfig {
    current: AtomicPtr<BrokerConfig>,
    /// Serializes updates; holds the run-time overrides and the update count.
    updates: Mutex<Overrides>,
    overrides_path: PathBuf,
}

struct Overrides {
    pairs: BTreeMap<String, String>,
    updates_applied: u32,
}

impl LiveConfig {
    /// Wraps the start-up configuration; `overrides` are the run-time updates it already
    /// includes (read from the overrides file at start-up), kept so later updates add to them.
    pub fn new(config: BrokerConfig, overrides: BTreeMap<String, String>) -> LiveConfig {
        let overrides_path = overrides_path(&config.store_root);
        LiveConfig {
            current: AtomicPtr::new(Box::into_raw(Box::new(config))),
            updates: Mutex::new(Overrides {
                pairs: overrides,
                updates_applied: 0,
            }),
            overrides_path,
        }
    }

    /// Applies `pairs` atomically: all of them or none. The overrides file is rewritten
    /// (durably) before the new values become visible. Blocking (small file I/O): call it off
    /// the shards' hot path.
    pub fn update(&self, pairs: &[(String, String)]) -> Result<UpdateOutcome, UpdateError> {
        if let Some((key, _)) = pairs
            .iter()
            .find(|(key, _)| BLACKLISTED_KEYS.contains(&key.as_str()))
        {
            return Err(UpdateError::Blacklisted(key.clone()));
        }
        let mut overrides = self
            .updates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if overrides.updates_applied >= UPDATES_MAX {
            return Err(UpdateError::TooManyUpdates);
        }
        let mut next = BrokerConfig::clone(self);
        let mut outcome = UpdateOutcome::default();
        let mut merged = overrides.pairs.clone();
        for (key, value) in pairs {
            if !next.apply(key, value.trim())? {
                outcome.ignored.push(key.clone());
                continue;
            }
            merged.insert(key.clone(), value.trim().to_owned());
            if BrokerConfig::is_live_key(key) {
                outcome.applied_live.push(key.clone());
            } else {
                outcome.applied_at_restart.push(key.clone());
            }
        }
        if merged != overrides.pairs {
            let text = comet_proto::java_properties::write(
                merged
                    .iter()
                    .map(|(key, value)| (key.as_str(), value.as_str())),
            );
            crate::persist::write_atomic(&self.overrides_path, text.as_bytes()).map_err(|e| {
                UpdateError::Persist {
                    path: self.overrides_path.clone(),
                    message: e.to_string(),
                }
            })?;
            overrides.pairs = merged;
        }
        overrides.updates_applied += 1;
        // The previous config is deliberately not freed: readers may still hold it.
        self.current
            .store(Box::into_raw(Box::new(next)), Ordering::Release);
        Ok(outcome)
    }
}

impl Deref for LiveConfig {
    type Target = BrokerConfig;

    fn deref(&self) -> &BrokerConfig {
        // SAFETY: `current` always points to a `BrokerConfig` made by `Box::into_raw` and never
        // freed (see the module docs), and configs are immutable once published (Release store
        // pairs with this Acquire load), so the reference is valid for as long as `self` is.
        unsafe { &*self.current.load(Ordering::Acquire) }
    }
}

/// Where run-time updates live for a broker whose store root is `store_root`.
pub fn overrides_path(store_root: &Path) -> PathBuf {
    store_root.join("config").join(OVERRIDES_FILE_NAME)
}

/// Reads the run-time updates recorded under `store_root` (empty when there are none).
pub fn read_overrides(store_root: &Path) -> Result<BTreeMap<String, String>, String> {
    let path = overrides_path(store_root);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(comet_proto::java_properties::parse(&text)
            .into_iter()
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn live(root: &Path) -> LiveConfig {
        let config = BrokerConfig {
            store_root: root.to_path_buf(),
            ..BrokerConfig::default()
        };
        LiveConfig::new(config, BTreeMap::new())
    }

    fn pairs(items: &[(&str, &str)]) -> Vec<(String, String)> {
        items
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    // Proves an update is visible at once through earlier handles, is persisted, and that
    // references taken before it still read the old values.
    #[test]
    fn update_applies_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let config = live(dir.path());
        let before: &BrokerConfig = &config;
        assert!(config.auto_create_topic);
        let outcome = config
            .update(&pairs(&[
                ("autoCreateTopicEnable", "false"),
                ("listenPort", "20911"),
                ("noSuchKey", "1"),
            ]))
            .unwrap();
        assert_eq!(outcome.applied_live, vec!["autoCreateTopicEnable"]);
        assert_eq!(outcome.applied_at_restart, vec!["listenPort"]);
        assert_eq!(outcome.ignored, vec!["noSuchKey"]);
        assert!(!config.auto_create_topic);
        assert_eq!(config.listen_port, 20911);
        assert!(before.auto_create_topic);
        let stored = read_overrides(dir.path()).unwrap();
        assert_eq!(stored.get("autoCreateTopicEnable").unwrap(), "false");
        assert_eq!(stored.get("listenPort").unwrap(), "20911");
        assert!(!stored.contains_key("noSuchKey"));
    }

    // Proves a bad value or a black-listed key refuses the whole update and changes nothing.
    #[test]
    fn refused_updates_change_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let config = live(dir.path());
        let error = config
            .update(&pairs(&[("maxMessageSize", "1024"), ("listenPort", "x")]))
            .unwrap_err();
        assert!(matches!(error, UpdateError::Invalid(_)), "{error}");
        assert_eq!(config.message_bytes_max, 4 * 1024 * 1024);
        let error = config
            .update(&pairs(&[("brokerConfigPath", "/elsewhere")]))
            .unwrap_err();
        assert!(error.to_string().contains("black list"), "{error}");
        assert!(read_overrides(dir.path()).unwrap().is_empty());
    }

    // Proves later updates add to earlier ones in the overrides file.
    #[test]
    fn overrides_accumulate() {
        let dir = tempfile::tempdir().unwrap();
        let config = live(dir.path());
        config
            .update(&pairs(&[("maxMessageSize", "1024")]))
            .unwrap();
        config.update(&pairs(&[("brokerPermission", "4")])).unwrap();
        let stored = read_overrides(dir.path()).unwrap();
        assert_eq!(stored.len(), 2);
        assert_eq!(config.message_bytes_max, 1024);
        assert_eq!(config.broker_permission, 4);
    }
}
