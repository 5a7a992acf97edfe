//! Broadcasting consumer offsets: a local JSON file per client and group, written through a
//! temporary file and a rename so a crash leaves either the old or the new file (clustering
//! offsets live on the broker, see `crate::aio::push`). The stored offset is the next offset
//! to consume (everything below it is done).

use std::collections::HashMap;
use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{ClientError, Result};
use crate::message::MessageQueue;
use crate::protocol;

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

    // Proves the broadcasting file round trip: offsets written are read back, and a
    // missing file is empty.
    #[test]
    fn local_file_round_trip() {
        let directory = tempfile::tempdir().unwrap();
        let path = local_path(directory.path(), "127.0.0.1@1", "g");
        assert!(load_local(&path).unwrap().is_empty());
        let queue = MessageQueue::new("T", "broker-a", 1);
        let table = HashMap::from([(queue.clone(), 7)]);
        write_local(&path, &table).unwrap();
        assert_eq!(load_local(&path).unwrap(), table);
    }
}
