//! The broker configuration as it is now: start-up values plus what operators changed at run
//! time with UPDATE_BROKER_CONFIG (`mqadmin updateBrokerConfig`).
//!
//! Every request reads the configuration, on every shard, while an operator may replace it at
//! any moment from another thread. A [`LiveConfig`] therefore holds an immutable
//! [`BrokerConfig`] behind an [`ArcSwap`]: an update builds a new config and swaps it in, and
//! the old one is freed once the last reader lets go of it. A read ([`LiveConfig::load`])
//! takes no lock and bumps no shared reference count (that would bounce one cache line between
//! all cores on every request): `arc-swap` borrows the config through a slot of the reading
//! thread. Readers keep the guard for a few field reads; code that keeps a config across an
//! `await` or for a long time takes its own reference with [`LiveConfig::snapshot`].
//!
//! Updates are persisted before they apply: `config/broker.properties` under the store root
//! holds every key changed at run time, and start-up applies it after the `-c` file and before
//! command-line flags (see `comet-broker`'s `load_config`), so a restart keeps what was
//! changed, as Apache RocketMQ keeps it in its `brokerConfigPath` file.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arc_swap::{ArcSwap, Guard};
use thiserror::Error;

use crate::config::{key_def, Applies, BrokerConfig, ConfigError};

/// Name of the file, under the broker's `config/` folder, holding run-time updates.
pub const OVERRIDES_FILE_NAME: &str = "broker.properties";

/// Java's keys no update may change (its default `configBlackList`: the list itself and the
/// file locations). Comet does not use them; its own such keys are those of the key table
/// marked [`Applies::StartUpOnly`].
const JAVA_BLACKLISTED_KEYS: [&str; 2] = ["configBlackList", "brokerConfigPath"];

/// True for keys UPDATE_BROKER_CONFIG refuses (Apache RocketMQ answers NO_PERMISSION).
pub fn is_blacklisted(key: &str) -> bool {
    JAVA_BLACKLISTED_KEYS.contains(&key)
        || key_def(key).is_some_and(|def| def.applies == Applies::StartUpOnly)
}

/// Why an update was refused. Nothing of a refused update applies.
#[derive(Debug, Error)]
pub enum UpdateError {
    /// A key on the black list (Apache RocketMQ answers NO_PERMISSION).
    #[error("Can not update config in black list. key: {0}")]
    Blacklisted(String),
    /// A known key with a value it cannot take.
    #[error(transparent)]
    Invalid(#[from] ConfigError),
    /// The overrides file could not be written; the update did not apply.
    #[error("cannot persist config updates to {}: {source}", path.display())]
    Persist {
        /// The overrides file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
}

/// The overrides file exists but cannot be read.
#[derive(Debug, Error)]
#[error("cannot read broker config updates from {}: {source}", path.display())]
pub struct OverridesError {
    /// The overrides file.
    pub path: PathBuf,
    /// The I/O error.
    pub source: std::io::Error,
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

/// Broker-wide, shared by every shard: the current [`BrokerConfig`] ([`LiveConfig::load`]).
pub struct LiveConfig {
    current: ArcSwap<BrokerConfig>,
    /// Serializes updates; holds the run-time overrides.
    overrides: Mutex<BTreeMap<String, String>>,
    overrides_path: PathBuf,
}

impl LiveConfig {
    /// Wraps the start-up configuration; `overrides` are the run-time updates it already
    /// includes (read from the overrides file at start-up), kept so later updates add to them.
    pub fn new(config: BrokerConfig, overrides: BTreeMap<String, String>) -> LiveConfig {
        let overrides_path = overrides_path(&config.store_root);
        LiveConfig {
            current: ArcSwap::from_pointee(config),
            overrides: Mutex::new(overrides),
            overrides_path,
        }
    }

    /// The configuration now in force, for a few field reads: drop the guard soon (each
    /// thread has few cheap guards; more fall back to counting references).
    pub fn load(&self) -> Guard<Arc<BrokerConfig>> {
        self.current.load()
    }

    /// The configuration now in force, as an owned reference to keep across an `await` or
    /// for long (it does not follow later updates).
    pub fn snapshot(&self) -> Arc<BrokerConfig> {
        self.current.load_full()
    }

    /// Applies `pairs` atomically: all of them or none. The overrides file is rewritten
    /// (durably) before the new values become visible. Blocking (small file I/O): call it off
    /// the shards' hot path.
    pub fn update(&self, pairs: &[(String, String)]) -> Result<UpdateOutcome, UpdateError> {
        if let Some((key, _)) = pairs.iter().find(|(key, _)| is_blacklisted(key)) {
            return Err(UpdateError::Blacklisted(key.clone()));
        }
        let mut overrides = self
            .overrides
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut next = BrokerConfig::clone(&self.current.load());
        let mut outcome = UpdateOutcome::default();
        let mut merged = overrides.clone();
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
        if merged != *overrides {
            let text = comet_proto::java_properties::write(
                merged
                    .iter()
                    .map(|(key, value)| (key.as_str(), value.as_str())),
            );
            crate::persist::write_atomic(&self.overrides_path, text.as_bytes()).map_err(
                |source| UpdateError::Persist {
                    path: self.overrides_path.clone(),
                    source,
                },
            )?;
            *overrides = merged;
        }
        self.current.store(Arc::new(next));
        Ok(outcome)
    }
}

/// Where run-time updates live for a broker whose store root is `store_root`.
pub fn overrides_path(store_root: &Path) -> PathBuf {
    store_root.join("config").join(OVERRIDES_FILE_NAME)
}

/// Reads the run-time updates recorded under `store_root` (empty when there are none).
pub fn read_overrides(store_root: &Path) -> Result<BTreeMap<String, String>, OverridesError> {
    let path = overrides_path(store_root);
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(comet_proto::java_properties::parse(&text)
            .into_iter()
            .collect()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(BTreeMap::new()),
        Err(source) => Err(OverridesError { path, source }),
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

    // Proves an update is visible at once through the shared handle, is persisted, and that
    // snapshots taken before it still read the old values.
    #[test]
    fn update_applies_and_persists() {
        let dir = tempfile::tempdir().unwrap();
        let config = live(dir.path());
        let before = config.snapshot();
        assert!(config.load().auto_create_topic);
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
        assert!(!config.load().auto_create_topic);
        assert_eq!(config.load().listen_port, 20911);
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
        assert_eq!(config.load().message_bytes_max, 4 * 1024 * 1024);
        let error = config
            .update(&pairs(&[("brokerConfigPath", "/elsewhere")]))
            .unwrap_err();
        assert!(error.to_string().contains("black list"), "{error}");
        let error = config
            .update(&pairs(&[("storePathRootDir", "/elsewhere")]))
            .unwrap_err();
        assert!(matches!(error, UpdateError::Blacklisted(_)), "{error}");
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
        assert_eq!(config.load().message_bytes_max, 1024);
        assert_eq!(config.load().broker_permission, 4);
    }
}
