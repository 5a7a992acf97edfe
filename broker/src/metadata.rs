//! Broker-wide metadata shared by every shard: topics, subscription groups, clients and
//! queue locks.
//!
//! Each table has its own mutex; critical sections are short (a lookup or an insert) and are
//! never held across an await, so a shard never waits behind another for long. Topic and
//! group changes are rare; heartbeats touch the client registry every 30 s per client. The
//! data path (appends, pulls, offsets) does not go through here except for one topic lookup
//! per send.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use comet_proto::body::{JsonBody, SubscriptionGroupWrapper, TopicConfigSerializeWrapper};

use crate::assignment::AssignmentState;
use crate::clients::ClientRegistry;
use crate::config::BrokerConfig;
use crate::lock::LockTable;
use crate::persist::{self, PersistError};
use crate::subscription::GroupTable;
use crate::topic::TopicTable;

/// The shared tables.
pub struct Metadata {
    topics: Mutex<TopicTable>,
    groups: Mutex<GroupTable>,
    clients: Mutex<ClientRegistry>,
    locks: Mutex<LockTable>,
    assignment: AssignmentState,
    topics_changed: AtomicBool,
    /// Counts topic changes; see [`Metadata::mark_topics_changed`].
    topics_generation: AtomicU64,
    /// The generation the last registration with the name servers included.
    registered_generation: AtomicU64,
    config_dir: PathBuf,
    /// Serializes writers of the config files (they share temporary file names).
    persist_lock: Mutex<()>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A poisoned lock means a shard panicked while holding it; the release profile aborts on
    // panic, so this only happens in tests, where going on with the data is the useful choice.
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Metadata {
    /// Loads `config/topics.json`, `config/subscriptionGroup.json` and
    /// `config/messageRequestMode.json` (falling back to their `.bak`) and adds the system
    /// topics and built-in groups.
    pub fn load(config: &BrokerConfig) -> Result<Metadata, PersistError> {
        let config_dir = config.store_root.join("config");
        let topics = persist::read_json(
            &config_dir.join("topics.json"),
            TopicConfigSerializeWrapper::decode,
        )?;
        let groups = persist::read_json(
            &config_dir.join("subscriptionGroup.json"),
            SubscriptionGroupWrapper::decode,
        )?;
        Ok(Metadata {
            topics: Mutex::new(TopicTable::new(config, topics)),
            groups: Mutex::new(GroupTable::new(groups)),
            clients: Mutex::new(ClientRegistry::new()),
            locks: Mutex::new(LockTable::new()),
            assignment: AssignmentState::load(&config_dir)?,
            topics_changed: AtomicBool::new(true),
            topics_generation: AtomicU64::new(0),
            registered_generation: AtomicU64::new(0),
            config_dir,
            persist_lock: Mutex::new(()),
        })
    }

    /// The topic table.
    pub fn topics(&self) -> MutexGuard<'_, TopicTable> {
        lock(&self.topics)
    }

    /// The subscription groups.
    pub fn groups(&self) -> MutexGuard<'_, GroupTable> {
        lock(&self.groups)
    }

    /// The client registry.
    pub fn clients(&self) -> MutexGuard<'_, ClientRegistry> {
        lock(&self.clients)
    }

    /// The queue locks.
    pub fn locks(&self) -> MutexGuard<'_, LockTable> {
        lock(&self.locks)
    }

    /// The server-side assignment state: request modes and cached routes.
    pub fn assignment(&self) -> &AssignmentState {
        &self.assignment
    }

    /// Marks the topic table changed: it is persisted and re-registered soon. Returns the
    /// change's generation, which [`Metadata::registered_generation`] reaches once a
    /// registration that includes the change has been sent.
    pub fn mark_topics_changed(&self) -> u64 {
        let generation = self.topics_generation.fetch_add(1, Ordering::AcqRel) + 1;
        self.topics_changed.store(true, Ordering::Release);
        generation
    }

    /// Whether a topic change waits for the registration loop.
    pub fn topics_change_pending(&self) -> bool {
        self.topics_changed.load(Ordering::Acquire)
    }

    /// Takes the changed mark, with the generation the table is at from then on: a change
    /// marked later sets the mark again.
    pub fn take_topics_changed(&self) -> (bool, u64) {
        let changed = self.topics_changed.swap(false, Ordering::AcqRel);
        (changed, self.topics_generation.load(Ordering::Acquire))
    }

    /// The topic table's generation now (what a wait for its registration waits for).
    pub fn topics_generation(&self) -> u64 {
        self.topics_generation.load(Ordering::Acquire)
    }

    /// Records that a registration including topic generation `generation` was sent.
    pub fn set_registered_generation(&self, generation: u64) {
        self.registered_generation
            .fetch_max(generation, Ordering::AcqRel);
    }

    /// The newest topic generation the name servers were sent.
    pub fn registered_generation(&self) -> u64 {
        self.registered_generation.load(Ordering::Acquire)
    }

    /// Where config files live.
    pub fn config_dir(&self) -> &Path {
        &self.config_dir
    }

    /// Writes `topics.json` (blocking; called from the persist task and at shutdown).
    pub fn persist_topics(&self) -> std::io::Result<()> {
        // Persist the topics' own permissions; the broker permission masks only what name
        // servers are told.
        let _writer = lock(&self.persist_lock);
        let wrapper = self.topics().to_wrapper(crate::topic::perm::READ_WRITE);
        persist::write_atomic(&self.config_dir.join("topics.json"), &wrapper.encode())
    }

    /// Writes `subscriptionGroup.json` when it changed.
    pub fn persist_groups(&self) -> std::io::Result<()> {
        let _writer = lock(&self.persist_lock);
        let snapshot = {
            let mut groups = self.groups();
            if !groups.is_changed() {
                return Ok(());
            }
            groups.take_snapshot()
        };
        persist::write_atomic(
            &self.config_dir.join("subscriptionGroup.json"),
            &snapshot.encode(),
        )
    }

    /// Writes `messageRequestMode.json` (blocking; after each SET_MESSAGE_REQUEST_MODE,
    /// before it is acknowledged, as Java persists at once).
    pub fn persist_request_modes(&self) -> std::io::Result<()> {
        let _writer = lock(&self.persist_lock);
        let bytes = self.assignment.modes().encode();
        persist::write_atomic(
            &self.config_dir.join(crate::assignment::modes::FILE_NAME),
            &bytes,
        )
    }
}
