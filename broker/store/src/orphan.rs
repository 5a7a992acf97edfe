//! Commit logs of shards that no longer run.
//!
//! When the shard count shrinks (see [`remap`](crate::remap)), log `k` of a shard that is
//! gone is written by nobody, but consume queues handed to other stores still point into it.
//! Each such log is adopted by exactly one running store
//! ([`StoreConfig::adopted_logs`](crate::StoreConfig::adopted_logs); the broker gives log `k`
//! to shard `k % shards`), which:
//! - deletes its segments under the rules of its own log's retention (expired ones when due:
//!   a delete hour of `delete_when_hours`, or the oldest one at once past the disk high mark),
//!   oldest first, each with its index file;
//! - once the last segment is gone, retires the log: its store directory `shard-<k>` is
//!   renamed out of the `shard-<i>` namespace in one atomic step (so
//!   [`remap::existing_store_count`](crate::remap::existing_store_count) and the broker's
//!   layout no longer count it), then removed;
//! - answers queries by key from the log's index files, loaded read-only in the background
//!   (queries wait for the load, which yields to the shard between files).
//!
//! Every store's queues treat entries into a log whose directory holds no segment or is gone,
//! or into a log that no store holds, as deleted, so their min offsets move past them (see
//! `drop_gone_entries`).
//!
//! Invariants: an adopted log is closed, its store shut down cleanly before the queues were
//! handed over, so all its segments are sealed, durable and indexed; a log whose store still
//! holds an `abort` file is left alone (its tail was never verified). Deleting takes the
//! log's store lock, so it never races a process that opened that store.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::task::{Context, Poll};

use comet_proto::bytes::Bytes;
use comet_proto::message::RecordView;
use comet_rt::sync::WakerList;

use crate::config::StoreConfig;
use crate::error::{setup_error, StoreError};
use crate::index::{KeyIndex, LookupPlan};
use crate::maintenance::{drop_gone_entries, list_segments, modified_ms, MaintenanceLock};
use crate::offset::{file_name, LogId, PhysicalOffset};
use crate::read::{record_has_key, ReadPath};
use crate::remap::RETIRED_SUFFIX;
use crate::sealed_index::sealed_path;
use crate::shard::Shared;

/// One adopted log.
struct OrphanLog {
    log_id: LogId,
    /// `shard-<k>`: the log's whole store directory.
    store_root: PathBuf,
    /// `shard-<k>/commitlog/<k>`.
    segments_dir: PathBuf,
    /// Its key index, once loaded (`None` before, after a failed load, or once retired).
    index: Option<KeyIndex>,
    /// Its store directory is gone.
    retired: bool,
    /// A skip (unclean store, lock held elsewhere) was logged.
    warned: bool,
}

/// The logs a store adopted (see the module docs).
pub(crate) struct Orphans {
    logs: Vec<OrphanLog>,
    /// Index loading finished for every log (successfully or not).
    loaded: Cell<bool>,
    /// Queries waiting for the load.
    ready: WakerList,
}

impl Orphans {
    /// The adopted logs of `config`; each must be listed in `other_logs` as
    /// `<store root>/commitlog/<log id>`.
    pub(crate) fn new(config: &StoreConfig) -> Result<Orphans, StoreError> {
        let mut logs = Vec::new();
        for log_id in &config.adopted_logs {
            let bad = |what: &str| Err(StoreError::Config(format!("adopted log {log_id}: {what}")));
            if *log_id == config.log_id {
                return bad("is this store's own log");
            }
            let Some(dir) = config.other_logs.get(log_id) else {
                return bad("not among other_logs");
            };
            let named = dir.file_name().and_then(|name| name.to_str()) == Some(&log_id.to_string());
            let parent = dir.parent();
            let in_commitlog =
                parent.and_then(Path::file_name).and_then(|n| n.to_str()) == Some("commitlog");
            let Some(store_root) = parent
                .and_then(Path::parent)
                .filter(|_| named && in_commitlog)
            else {
                return bad("directory is not <store>/commitlog/<log id>");
            };
            logs.push(OrphanLog {
                log_id: *log_id,
                store_root: store_root.to_path_buf(),
                segments_dir: dir.clone(),
                index: None,
                retired: false,
                warned: false,
            });
        }
        let loaded = Cell::new(logs.is_empty());
        Ok(Orphans {
            logs,
            loaded,
            ready: WakerList::default(),
        })
    }

    fn log_mut(&mut self, log_id: LogId) -> &mut OrphanLog {
        self.logs
            .iter_mut()
            .find(|log| log.log_id == log_id)
            .expect("adopted log")
    }
}

/// Resolves once the adopted logs' indexes are loaded.
struct IndexesLoaded<'a, 's> {
    adopted: &'a AdoptedLogs<'s>,
}

impl Future for IndexesLoaded<'_, '_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let orphans = self.adopted.orphans.borrow();
        if orphans.loaded.get() || self.adopted.shared.closed.get() {
            return Poll::Ready(());
        }
        orphans.ready.register(cx.waker());
        Poll::Pending
    }
}

/// The adopted logs of one store, with the store's state they operate on.
pub(crate) struct AdoptedLogs<'s> {
    orphans: &'s RefCell<Orphans>,
    shared: &'s Shared,
}

impl<'s> AdoptedLogs<'s> {
    /// The adopted logs `orphans` of the store whose state is `shared`.
    pub(crate) fn new(orphans: &'s RefCell<Orphans>, shared: &'s Shared) -> AdoptedLogs<'s> {
        AdoptedLogs { orphans, shared }
    }

    /// Loads the index of every adopted log (background task started at open).
    pub(crate) async fn load_indexes(&self) {
        let shared = self.shared;
        let targets: Vec<(LogId, PathBuf)> = self
            .orphans
            .borrow()
            .logs
            .iter()
            .map(|log| {
                (
                    log.log_id,
                    log.store_root.join("index").join(log.log_id.to_string()),
                )
            })
            .collect();
        for (log_id, dir) in targets {
            if shared.closed.get() {
                break;
            }
            // The span the index was written with (read on the blocking thread).
            let span = {
                let dir = dir.clone();
                let segment_bytes = shared.config.segment_bytes;
                comet_rt::task_class::run_blocking(move || {
                    crate::index::index_span(&dir, segment_bytes, segment_bytes, false)
                })
                .await
            };
            let span = match span {
                Ok(span) => span,
                Err(error) => {
                    log::error!("adopted log {log_id}: its keys cannot be queried: {error}");
                    continue;
                }
            };
            let mut index = KeyIndex::new(dir, log_id, span);
            match index.load_adopted().await {
                Ok(()) => {
                    log::info!("loaded the key index of adopted log {log_id}");
                    let mut orphans = self.orphans.borrow_mut();
                    let log = orphans.log_mut(log_id);
                    if !log.retired {
                        log.index = Some(index);
                    }
                }
                Err(error) => {
                    log::error!("adopted log {log_id}: its keys cannot be queried: {error}")
                }
            }
        }
        let orphans = self.orphans.borrow();
        orphans.loaded.set(true);
        orphans.ready.wake_all();
    }

    /// Records of adopted logs indexed under `topic#key` within `[begin_ms, end_ms]`, at
    /// most `max` per log (the caller merges and cuts). Records deleted meanwhile are skipped.
    pub(crate) async fn query(
        &self,
        topic: &str,
        key: &str,
        max: usize,
        (begin_ms, end_ms): (i64, i64),
    ) -> Result<Vec<Bytes>, StoreError> {
        IndexesLoaded { adopted: self }.await;
        let plans: Vec<LookupPlan> = {
            let orphans = self.orphans.borrow();
            let indexes = orphans.logs.iter().filter_map(|log| log.index.as_ref());
            indexes
                .map(|index| index.plan_lookup(topic, key, max, begin_ms, end_ms))
                .collect()
        };
        let mut found: Vec<PhysicalOffset> = Vec::new();
        for plan in plans {
            found.extend(plan.finish().await?);
        }
        let mut records = Vec::new();
        for physical in found {
            let bytes = match ReadPath::new(self.shared).read_record(physical).await {
                Ok(Some(bytes)) => bytes,
                // Its segment was deleted by retention after the lookup.
                Ok(None) | Err(StoreError::Corrupt { .. }) => continue,
                Err(error) => return Err(error),
            };
            let Ok(view) = RecordView::parse(&bytes) else {
                continue;
            };
            if view.topic() == topic && record_has_key(&view, key) {
                records.push(bytes);
            }
        }
        Ok(records)
    }

    /// Adopted logs still held, once their indexes are loaded (deletion would race the
    /// load otherwise).
    fn live_orphans(&self) -> Vec<LogId> {
        let orphans = self.orphans.borrow();
        if !orphans.loaded.get() {
            return Vec::new();
        }
        let live = orphans.logs.iter().filter(|log| !log.retired);
        live.map(|log| log.log_id).collect()
    }

    fn orphan_paths(&self, log_id: LogId) -> (PathBuf, PathBuf) {
        let mut orphans = self.orphans.borrow_mut();
        let log = orphans.log_mut(log_id);
        (log.store_root.clone(), log.segments_dir.clone())
    }

    /// Logs `message` once per adopted log.
    fn warn_orphan_once(&self, log_id: LogId, message: &str) {
        let mut orphans = self.orphans.borrow_mut();
        let log = orphans.log_mut(log_id);
        if !std::mem::replace(&mut log.warned, true) {
            log::warn!("adopted log {log_id}: {message}; its segments are kept");
        }
    }

    /// Takes the store lock of an adopted log if it may be changed: its store closed
    /// cleanly and not opened by anyone. `None` (logged once) when it must be left alone.
    fn lock_orphan(&self, log_id: LogId) -> Result<Option<std::fs::File>, StoreError> {
        let (store_root, _) = self.orphan_paths(log_id);
        if store_root.join("abort").exists() {
            self.warn_orphan_once(log_id, "its store did not shut down cleanly");
            return Ok(None);
        }
        match crate::recovery::take_lock(&store_root.join("lock")) {
            Ok(lock) => Ok(Some(lock)),
            Err(StoreError::Locked { .. }) => {
                self.warn_orphan_once(log_id, "its store is open elsewhere");
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    /// Deletes the segments of adopted logs for which `expired(path)` holds, oldest first
    /// per log, and retires every log left without segments. Returns how many segments went.
    pub(crate) async fn delete_expired_segments(
        &self,
        expired: &dyn Fn(&Path) -> bool,
    ) -> Result<u32, StoreError> {
        let mut deleted = 0;
        for log_id in self.live_orphans() {
            let (store_root, segments_dir) = self.orphan_paths(log_id);
            if !store_root.exists() {
                // Removed by an earlier retirement cut short by a crash.
                self.orphans.borrow_mut().log_mut(log_id).retired = true;
                continue;
            }
            let segments = list_segments(&segments_dir)?.unwrap_or_default();
            let first_kept = segments
                .iter()
                .position(|start| !expired(&segments_dir.join(file_name(*start))));
            if first_kept == Some(0) {
                continue;
            }
            let Some(_lock) = self.lock_orphan(log_id)? else {
                continue;
            };
            for start in &segments[..first_kept.unwrap_or(segments.len())] {
                self.delete_orphan_segment(log_id, *start).await?;
                deleted += 1;
            }
            if first_kept.is_none() {
                self.retire_orphan(log_id).await?;
            }
        }
        Ok(deleted)
    }

    /// The oldest segment of the adopted logs (by modification time): `(log, start, mtime)`.
    pub(crate) fn oldest_segment(&self) -> Result<Option<(LogId, u64, i64)>, StoreError> {
        let mut oldest: Option<(LogId, u64, i64)> = None;
        for log_id in self.live_orphans() {
            let (_, segments_dir) = self.orphan_paths(log_id);
            let segments = list_segments(&segments_dir)?.unwrap_or_default();
            let Some(start) = segments.first() else {
                continue;
            };
            let modified = modified_ms(&segments_dir.join(file_name(*start))).unwrap_or(i64::MAX);
            if oldest.is_none_or(|(_, _, known)| modified < known) {
                oldest = Some((log_id, *start, modified));
            }
        }
        Ok(oldest)
    }

    /// Deletes one segment of an adopted log at once (disk past the high mark); retires the
    /// log when it was the last. Returns whether it went (false: the log must be left alone).
    pub(crate) async fn force_delete_segment(
        &self,
        log_id: LogId,
        start: u64,
    ) -> Result<bool, StoreError> {
        let Some(_lock) = self.lock_orphan(log_id)? else {
            return Ok(false);
        };
        self.delete_orphan_segment(log_id, start).await?;
        let (_, segments_dir) = self.orphan_paths(log_id);
        if list_segments(&segments_dir)?.is_none_or(|segments| segments.is_empty()) {
            self.retire_orphan(log_id).await?;
        }
        Ok(true)
    }

    /// Deletes segment `start` of adopted log `log_id` (its lock held by the caller) with
    /// its index file and index entries; every queue drops entries pointing into it.
    async fn delete_orphan_segment(&self, log_id: LogId, start: u64) -> Result<(), StoreError> {
        let shared = self.shared;
        let _guard = MaintenanceLock { shared }.await;
        let (store_root, segments_dir) = self.orphan_paths(log_id);
        let path = segments_dir.join(file_name(start));
        log::info!(
            "retention deletes segment {} of adopted log {log_id}",
            path.display()
        );
        comet_rt::io::remove_file(&path).await?;
        let index_dir = store_root.join("index").join(log_id.to_string());
        let next = start + shared.config.segment_bytes;
        if let Some(index) = self.orphans.borrow_mut().log_mut(log_id).index.as_mut() {
            // Its files are removed by path below, loaded or not.
            index.drop_below(next);
        }
        for index_file in [
            index_dir.join(file_name(start)),
            sealed_path(&index_dir, start),
        ] {
            if index_file.exists() {
                comet_rt::io::remove_file(&index_file).await?;
            }
        }
        drop_gone_entries(self.shared).await
    }

    /// Removes the store directory of an adopted log without segments: renamed out of the
    /// `shard-<i>` namespace first (atomic, synced), so a crash leaves either the whole
    /// directory or none under its name.
    async fn retire_orphan(&self, log_id: LogId) -> Result<(), StoreError> {
        let shared = self.shared;
        let _guard = MaintenanceLock { shared }.await;
        let (store_root, _) = self.orphan_paths(log_id);
        let parent = store_root
            .parent()
            .expect("store roots live in a directory");
        let name = store_root.file_name().and_then(|name| name.to_str());
        let retired = parent.join(format!("{}{RETIRED_SUFFIX}", name.unwrap_or("store")));
        if retired.exists() {
            std::fs::remove_dir_all(&retired).map_err(|error| setup_error(&retired, error))?;
        }
        std::fs::rename(&store_root, &retired).map_err(|error| setup_error(&store_root, error))?;
        comet_rt::io::sync_directory(parent).await?;
        std::fs::remove_dir_all(&retired).map_err(|error| setup_error(&retired, error))?;
        {
            let mut orphans = self.orphans.borrow_mut();
            let log = orphans.log_mut(log_id);
            log.retired = true;
            log.index = None;
        }
        log::info!(
            "adopted log {log_id} fully deleted: removed {}",
            store_root.display()
        );
        drop_gone_entries(self.shared).await
    }
}
