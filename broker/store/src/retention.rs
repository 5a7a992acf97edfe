//! Retention as Java's `CleanCommitLogService` does it: the disk-full state, and deleting
//! commit-log segments of this store's log and of the logs it adopted (`orphan`), each with
//! its index file and the consume-queue entries pointing into it.
//!
//! - Segments older than `file_reserved_hours` expire; expired ones go at the local hours of
//!   `delete_when_hours`, at any hour while disk use is past `disk_max_used_ratio`, and in
//!   the [`MANUAL_DELETE_PASSES`] passes after a manual request.
//! - Past `disk_high_ratio` (or past `disk_hard_ratio`) the oldest segment goes at once,
//!   expired or not.
//! - Past `disk_hard_ratio` appends are refused until a pass finds the disk below it.

use std::cell::RefCell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use crate::error::StoreError;
use crate::limits::MANUAL_DELETE_PASSES;
use crate::maintenance::{drop_gone_entries, modified_ms, sleep_unless_closed, MaintenanceLock};
use crate::orphan::{AdoptedLogs, Orphans};
use crate::shard::Shared;

/// Runs a retention pass every `retention_check_interval_ms` until the store closes.
pub(crate) async fn run_retention(shared: Rc<Shared>, orphans: Rc<RefCell<Orphans>>) {
    let retention = Retention::new(&shared, &orphans);
    let interval = Duration::from_millis(shared.config.retention_check_interval_ms);
    while !shared.closed.get() {
        if let Err(error) = retention.run_once(comet_rt::clock::wall_clock_ms()).await {
            log::error!("retention pass failed: {error}");
        }
        sleep_unless_closed(&shared, interval).await;
    }
}

/// The hour of the day (0..=23) of `epoch_ms` in the machine's local time zone (`TZ`, else
/// the system's zone), as Java's `UtilAll.isItTimeToDo` reads `deleteWhen` from a
/// `Calendar`; the UTC hour if the C library cannot convert it.
pub fn local_hour(epoch_ms: i64) -> u32 {
    let seconds: libc::time_t = epoch_ms.div_euclid(1000);
    // SAFETY: a zeroed `tm` is a valid value; localtime_r writes only into the one it is given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    // SAFETY: both pointers are valid for the call.
    let converted = unsafe { libc::localtime_r(&seconds, &mut tm) };
    match u32::try_from(tm.tm_hour) {
        Ok(hour) if !converted.is_null() && hour < 24 => hour,
        _ => u32::try_from(epoch_ms.div_euclid(3_600_000).rem_euclid(24)).unwrap_or(0),
    }
}

/// Marks the next [`MANUAL_DELETE_PASSES`] retention passes of the store whose state is
/// `shared` to delete expired segments whatever the hour.
pub(crate) fn request_manual_delete(shared: &Shared) {
    shared.manual_delete_passes.set(MANUAL_DELETE_PASSES);
}

/// Retention of one store: its own log and the logs it adopted.
pub(crate) struct Retention<'s> {
    shared: &'s Shared,
    adopted: AdoptedLogs<'s>,
}

impl<'s> Retention<'s> {
    /// Retention of the store whose state is `shared` and adopted logs are `orphans`.
    pub(crate) fn new(shared: &'s Shared, orphans: &'s RefCell<Orphans>) -> Retention<'s> {
        Retention {
            shared,
            adopted: AdoptedLogs::new(orphans, shared),
        }
    }

    /// One retention pass as of `now_ms` (see `Store::run_retention_once`); returns how
    /// many segments went.
    pub(crate) async fn run_once(&self, now_ms: i64) -> Result<u32, StoreError> {
        let config = &self.shared.config;
        let used = comet_rt::io::disk_used_ratio(&config.root)?;
        // A ratio of 0..=1 scaled to percent; `as` saturates anything else.
        #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
        let percent = |ratio: f64| (ratio * 100.0).round() as u32;
        let full = (used > config.disk_hard_ratio)
            .then(|| (percent(used), percent(config.disk_hard_ratio)));
        if full.is_some() && self.shared.disk_full.get().is_none() {
            log::error!(
                "disk use {:.1}% past the hard mark; refusing writes",
                used * 100.0
            );
        }
        self.shared.disk_full.set(full);
        {
            let _guard = MaintenanceLock {
                shared: self.shared,
            }
            .await;
            drop_gone_entries(self.shared).await?;
        }
        // Past the refusal mark Java cleans at once too, whatever the clean-forcibly mark.
        let forced = used > config.disk_high_ratio || full.is_some();
        let time_up = config.delete_when_hours.contains(&local_hour(now_ms));
        let crowded = used > config.disk_max_used_ratio;
        let manual = self.shared.manual_delete_passes.get();
        if manual > 0 {
            self.shared.manual_delete_passes.set(manual - 1);
        }
        let due = time_up || crowded || manual > 0;
        let reserved_ms = i64::try_from(config.file_reserved_hours * 3_600_000).unwrap_or(i64::MAX);
        let expiry_ms = now_ms.saturating_sub(reserved_ms);
        let expired = |path: &Path| due && modified_ms(path).unwrap_or(i64::MAX) <= expiry_ms;
        let mut deleted = 0;
        for (start, path) in self.deletable_segments() {
            if !expired(&path) {
                break;
            }
            self.delete_segment(start).await?;
            deleted += 1;
        }
        deleted += self.adopted.delete_expired_segments(&expired).await?;
        if forced && deleted == 0 && self.delete_oldest_segment().await? {
            deleted = 1;
        }
        Ok(deleted)
    }

    /// Deletes the oldest segment (by modification time) of this log's deletable ones and
    /// the adopted logs' (disk past the high mark). Returns whether one went.
    async fn delete_oldest_segment(&self) -> Result<bool, StoreError> {
        let own = self
            .deletable_segments()
            .into_iter()
            .next()
            .map(|(start, path)| (start, modified_ms(&path).unwrap_or(i64::MAX)));
        let orphan = self.adopted.oldest_segment()?;
        let orphan_older = match (own, orphan) {
            (Some((_, own_ms)), Some((_, _, orphan_ms))) => orphan_ms <= own_ms,
            (None, _) => true,
            (Some(_), None) => false,
        };
        match (own, orphan) {
            (_, Some((log_id, start, _))) if orphan_older => {
                self.adopted.force_delete_segment(log_id, start).await
            }
            (Some((start, _)), _) => {
                self.delete_segment(start).await?;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Sealed segments, oldest first, whose records are all durable and dispatched.
    fn deletable_segments(&self) -> Vec<(u64, PathBuf)> {
        let log = self.shared.log.borrow();
        let done = log.dispatched.min(log.durable);
        log.segments
            .iter()
            .filter(|(start, _)| **start + log.segment_bytes <= done)
            .map(|(start, file)| (*start, file.path().to_path_buf()))
            .collect()
    }

    /// Deletes the oldest segment (which starts at `start`) with its index file, and the
    /// consume-queue entries and files pointing into it; min offsets move.
    async fn delete_segment(&self, start: u64) -> Result<(), StoreError> {
        let shared = self.shared;
        let _guard = MaintenanceLock { shared }.await;
        let (file, new_min) = {
            let mut log = shared.log.borrow_mut();
            let file = log.remove_oldest_segment(start).expect("listed segment");
            (file, start + log.segment_bytes)
        };
        log::info!("retention deletes segment {}", file.path().display());
        comet_rt::io::remove_file(file.path()).await?;
        let dropped = shared.index.borrow_mut().drop_below(new_min);
        for path in dropped {
            comet_rt::io::remove_file(&path).await?;
        }
        drop_gone_entries(shared).await
    }
}
