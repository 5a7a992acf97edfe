//! Changing the number of stores (shards) without moving data.
//!
//! A broker runs one store per shard under `<root>/shard-<i>`, each with its own commit log
//! (log id `i`). Queue ownership depends on the shard count, so when it changes some queues
//! get a new owner. Their records stay where they are: the queue's consume-queue directory
//! (`consumequeue/<topic>/<queueId>`, whose entries carry the log id of every record) is
//! renamed into the new owner's store, which reads older entries from the other log's
//! segments ([`StoreConfig::other_logs`](crate::StoreConfig::other_logs)) and appends new
//! records to its own log. Logs of shards that no longer run stay readable; each is adopted
//! by one running store ([`adopted_logs`]), whose retention deletes their segments and, once
//! one holds none, renames its `shard-<k>` directory away and removes it (see `orphan`), so
//! [`existing_store_count`] stops counting it.
//!
//! ```text
//!  <root>/layout                     "shards <count>\n", written atomically
//!  <root>/shard-<i>/...              one store per shard (see the crate docs)
//! ```
//!
//! Order, each step idempotent so a crash anywhere is repaired by running it again:
//! 1. every existing store is opened under the old ownership (recovery dispatches records
//!    not yet in consume queues) and shut down cleanly, so consume queues are complete;
//! 2. [`hand_over_queues`] renames each queue directory into its new owner's store (one
//!    atomic rename per queue, parent directories synced), and moves the queue's line of the
//!    queue table with it: the line keeps the queue's min, which may lie past entries whose
//!    records were deleted with an adopted log. Without it the new owner would take the
//!    queue's files at their word, and a log id reused by a later shard could make those
//!    entries point at other records. The new owners' tables are written before any
//!    directory moves, the old owners' after; a table line for a queue not moved yet is never
//!    opened, since stores open only once step 3 is done;
//! 3. [`write_shard_count`] records the new count; only then do stores open for service.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use crate::error::{setup_error, StoreError};
use crate::offset::LogId;
use crate::queue_table::{self, QueueRecord};

const LAYOUT_FILE: &str = "layout";
/// Suffix a fully deleted store's directory gets (out of the `shard-<i>` namespace) before
/// it is removed (see `orphan`).
pub(crate) const RETIRED_SUFFIX: &str = ".retired";

/// The logs store `index` adopts while `shard_count` stores run and `store_count` exist: log
/// `k` of every store `k >= shard_count` (no shard writes it) goes to store
/// `k % shard_count`, which deletes its segments and answers key queries from its index
/// ([`StoreConfig::adopted_logs`](crate::StoreConfig::adopted_logs)).
pub fn adopted_logs(index: usize, shard_count: usize, store_count: usize) -> BTreeSet<LogId> {
    assert!(index < shard_count, "only running stores adopt logs");
    (shard_count..store_count)
        .filter(|log| log % shard_count == index)
        .filter_map(|log| u8::try_from(log).ok().and_then(LogId::new))
        .collect()
}

/// Removes what a crash left of fully deleted stores (`shard-<i>.retired` directories,
/// renamed away before their removal); returns how many went.
pub fn remove_retired_stores(root: &Path) -> Result<usize, StoreError> {
    let Ok(listing) = std::fs::read_dir(root) else {
        return Ok(0);
    };
    let mut removed = 0;
    for item in listing {
        let item = item.map_err(|error| setup_error(root, error))?;
        let name = item.file_name();
        let retired = name
            .to_str()
            .is_some_and(|name| name.starts_with("shard-") && name.ends_with(RETIRED_SUFFIX));
        if retired {
            let path = item.path();
            std::fs::remove_dir_all(&path).map_err(|error| setup_error(&path, error))?;
            log::info!("removed {}, left by an interrupted removal", path.display());
            removed += 1;
        }
    }
    Ok(removed)
}

/// The directory of store `index` under the broker's store root.
pub fn store_root(root: &Path, index: usize) -> PathBuf {
    root.join(format!("shard-{index}"))
}

/// One past the highest `shard-<i>` store directory under `root` (0 when there is none).
pub fn existing_store_count(root: &Path) -> Result<usize, StoreError> {
    let Ok(listing) = std::fs::read_dir(root) else {
        return Ok(0);
    };
    let mut count = 0;
    for item in listing {
        let item = item.map_err(|error| setup_error(root, error))?;
        let name = item.file_name();
        let Some(index) = name
            .to_str()
            .and_then(|name| name.strip_prefix("shard-"))
            .and_then(|index| index.parse::<usize>().ok())
        else {
            continue;
        };
        count = count.max(index + 1);
    }
    Ok(count)
}

/// The shard count recorded in `<root>/layout`, or `None` before the first one.
pub fn read_shard_count(root: &Path) -> Result<Option<usize>, StoreError> {
    let path = root.join(LAYOUT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(setup_error(&path, error)),
    };
    let count = text
        .trim()
        .strip_prefix("shards ")
        .and_then(|count| count.parse::<usize>().ok())
        .filter(|count| *count >= 1)
        .ok_or_else(|| StoreError::corrupt(&path, format!("not a layout: {text:?}")))?;
    Ok(Some(count))
}

/// Records `count` in `<root>/layout` atomically and durably (see `comet_rt::fs`).
pub fn write_shard_count(root: &Path, count: usize) -> Result<(), StoreError> {
    assert!(count >= 1, "a broker has at least one shard");
    let path = root.join(LAYOUT_FILE);
    comet_rt::fs::write_atomic(&path, format!("shards {count}\n").as_bytes())
        .map_err(|error| setup_error(&path, error))
}

/// Renames every queue directory of the `stores` (indexed by store number) that `owner`
/// assigns to another store into that store; returns how many moved. A queue found in two
/// stores is refused (it cannot happen: a queue has one directory, moved atomically).
pub fn hand_over_queues(
    stores: &[PathBuf],
    owner: impl Fn(&str, i32) -> usize,
) -> Result<usize, StoreError> {
    let mut moves = Vec::new();
    for (index, store) in stores.iter().enumerate() {
        for (topic, queue_id, source) in queue_dirs(store)? {
            let target_store = owner(&topic, queue_id);
            assert!(target_store < stores.len(), "owner names a listed store");
            if target_store != index {
                moves.push((index, target_store, topic, queue_id, source));
            }
        }
    }
    let mut tables = QueueTables::read(stores)?;
    for (index, target_store, topic, queue_id, _) in &moves {
        tables.copy_line(*index, *target_store, (topic, *queue_id));
    }
    tables.write_changed()?;
    let mut moved = 0;
    for (index, target_store, topic, queue_id, source) in moves {
        move_queue_dir(&source, &stores[target_store], (&topic, queue_id))?;
        log::info!("queue {topic}/{queue_id} handed from store {index} to {target_store}");
        tables.remove_line(index, (&topic, queue_id));
        moved += 1;
    }
    tables.write_changed()?;
    Ok(moved)
}

/// Renames the queue directory `source` into `target_store`, parent directories synced.
fn move_queue_dir(
    source: &Path,
    target_store: &Path,
    (topic, queue_id): (&str, i32),
) -> Result<(), StoreError> {
    let topic_dir = target_store.join("consumequeue").join(topic);
    let target = topic_dir.join(queue_id.to_string());
    if target.exists() {
        return Err(StoreError::corrupt(
            &target,
            format!("queue also present in {}", source.display()),
        ));
    }
    std::fs::create_dir_all(&topic_dir).map_err(|error| setup_error(&topic_dir, error))?;
    std::fs::rename(source, &target).map_err(|error| setup_error(source, error))?;
    sync_dir(&topic_dir)?;
    sync_dir(source.parent().expect("queue dirs live in a topic dir"))
}

/// The queue tables of every store (store `i` holds log `i`), edited in memory and written
/// back whole where they changed.
struct QueueTables {
    paths: Vec<PathBuf>,
    tables: Vec<std::collections::HashMap<(String, i32), QueueRecord>>,
    changed: Vec<bool>,
}

impl QueueTables {
    fn read(stores: &[PathBuf]) -> Result<QueueTables, StoreError> {
        let mut paths = Vec::with_capacity(stores.len());
        for (index, store) in stores.iter().enumerate() {
            let log_id = u8::try_from(index)
                .ok()
                .and_then(LogId::new)
                .ok_or_else(|| {
                    StoreError::corrupt(store, format!("store {index} has no log id"))
                })?;
            paths.push(queue_table::table_path(store, log_id));
        }
        let tables = paths.iter().map(|path| queue_table::read(path)).collect();
        let changed = vec![false; stores.len()];
        Ok(QueueTables {
            paths,
            tables,
            changed,
        })
    }

    /// Gives `target` the line `source` holds for the queue, if it holds one.
    fn copy_line(&mut self, source: usize, target: usize, (topic, queue_id): (&str, i32)) {
        let key = (topic.to_owned(), queue_id);
        if let Some(record) = self.tables[source].get(&key).cloned() {
            self.tables[target].insert(key, record);
            self.changed[target] = true;
        }
    }

    fn remove_line(&mut self, store: usize, (topic, queue_id): (&str, i32)) {
        if self.tables[store]
            .remove(&(topic.to_owned(), queue_id))
            .is_some()
        {
            self.changed[store] = true;
        }
    }

    /// Writes every table that changed since the last call, durably.
    fn write_changed(&mut self) -> Result<(), StoreError> {
        for (index, path) in self.paths.iter().enumerate() {
            if !std::mem::take(&mut self.changed[index]) {
                continue;
            }
            let mut records: Vec<QueueRecord> = self.tables[index].values().cloned().collect();
            records.sort_by(|a, b| (&a.topic, a.queue_id).cmp(&(&b.topic, b.queue_id)));
            comet_rt::fs::write_atomic(path, &queue_table::encode(&records))
                .map_err(|error| setup_error(path, error))?;
        }
        Ok(())
    }
}

/// `(topic, queue id, directory)` of every consume queue of the store at `store`.
fn queue_dirs(store: &Path) -> Result<Vec<(String, i32, PathBuf)>, StoreError> {
    let root = store.join("consumequeue");
    let mut found = Vec::new();
    let Ok(topics) = std::fs::read_dir(&root) else {
        return Ok(found);
    };
    for topic in topics {
        let topic = topic.map_err(|error| setup_error(&root, error))?;
        let Some(name) = topic.file_name().to_str().map(str::to_string) else {
            continue;
        };
        let Ok(queues) = std::fs::read_dir(topic.path()) else {
            continue;
        };
        for queue in queues {
            let queue = queue.map_err(|error| setup_error(&topic.path(), error))?;
            if let Some(queue_id) = queue.file_name().to_str().and_then(|q| q.parse().ok()) {
                found.push((name.clone(), queue_id, queue.path()));
            }
        }
    }
    Ok(found)
}

fn sync_dir(dir: &Path) -> Result<(), StoreError> {
    comet_rt::fs::sync_dir(dir).map_err(|error| setup_error(dir, error))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_root(name: &str) -> PathBuf {
        let root = std::env::temp_dir().join(format!("comet-remap-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).expect("root");
        root
    }

    // Proves the layout file round-trips, is absent before the first write, and that a
    // damaged one is a clear error rather than a guess.
    #[test]
    fn layout_round_trip() {
        let root = temp_root("layout");
        assert_eq!(read_shard_count(&root).expect("read"), None);
        write_shard_count(&root, 3).expect("write");
        assert_eq!(read_shard_count(&root).expect("read"), Some(3));
        std::fs::write(root.join(LAYOUT_FILE), "shards x").expect("damage");
        assert!(read_shard_count(&root).is_err());
        std::fs::remove_dir_all(&root).expect("cleanup");
    }

    // Proves every log of a store past the shard count has exactly one adopter (log k by
    // store k % count) and that no log of a running store is adopted.
    #[test]
    fn each_stopped_log_has_one_adopter() {
        let adopted: Vec<Vec<u8>> = (0..2)
            .map(|index| {
                adopted_logs(index, 2, 7)
                    .iter()
                    .map(|log| log.get())
                    .collect()
            })
            .collect();
        assert_eq!(adopted, vec![vec![2, 4, 6], vec![3, 5]]);
        assert!(adopted_logs(0, 3, 3).is_empty());
        assert!(adopted_logs(0, 4, 2).is_empty(), "more shards than stores");
    }

    // Proves queues move to their new owner with their files, stay put when already there,
    // that running the hand-over again moves nothing, and that a queue present in two stores
    // is refused.
    #[test]
    fn queues_move_once() {
        let root = temp_root("move");
        let stores: Vec<PathBuf> = (0..3).map(|i| store_root(&root, i)).collect();
        for (store, queue) in [(0, 0), (0, 1), (1, 2)] {
            let dir = stores[store].join(format!("consumequeue/T/{queue}"));
            std::fs::create_dir_all(&dir).expect("dir");
            let byte = u8::try_from(queue).expect("small queue id");
            std::fs::write(dir.join("00000000000000000000"), [byte]).expect("file");
        }
        assert_eq!(existing_store_count(&root).expect("count"), 2);
        let leftover = root.join(format!("shard-5{RETIRED_SUFFIX}"));
        std::fs::create_dir_all(leftover.join("index/5")).expect("leftover");
        assert_eq!(
            existing_store_count(&root).expect("count"),
            2,
            "not a store"
        );
        assert_eq!(remove_retired_stores(&root).expect("remove"), 1);
        assert!(!leftover.exists() && stores[1].exists());
        let owner = |_: &str, queue: i32| usize::try_from(queue).expect("non-negative queue id");
        assert_eq!(hand_over_queues(&stores, owner).expect("hand over"), 2);
        for (queue, store) in stores.iter().enumerate().take(3) {
            let file = store.join(format!("consumequeue/T/{queue}/00000000000000000000"));
            let byte = u8::try_from(queue).expect("small queue id");
            assert_eq!(std::fs::read(file).expect("moved"), vec![byte]);
        }
        assert_eq!(hand_over_queues(&stores, owner).expect("again"), 0);
        std::fs::create_dir_all(stores[0].join("consumequeue/T/1")).expect("duplicate");
        assert!(hand_over_queues(&stores, owner).is_err());
        std::fs::remove_dir_all(&root).expect("cleanup");
    }
}
