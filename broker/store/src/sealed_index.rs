//! The key index of one sealed commit-log segment: its entries sorted by key hash in one
//! file, found through a table of page fences kept in the file, so the index of a sealed
//! segment costs memory for its footer only (a few words, whatever its keys) instead of
//! ~48 bytes per key, and a lookup reads the fences and then one page.
//!
//! Layout of `index/<log id>/<20-digit segment start>.sorted` (all integers big-endian):
//!
//! ```text
//! entries   N × 32-byte entries (see `index`), by key hash ascending, then physical offset
//!           descending (newest first within a key); zero-padded to a page
//! fences    F × u64: the hash of the first entry of each entry page; zero-padded to a page
//! footer    one page: magic "CMTKIDX1", N, F, lowest and highest store time (ms), then the
//!           CRC32 of the fences and of these five words
//! ```
//!
//! Why: the chains of the append-order index (`index`) live in memory for as long as a key
//! is retained (72 hours by default). A sealed segment never changes, so its entries can be
//! sorted once and searched on disk. Sealing writes `<start>.sorting`, syncs it, renames it to
//! `<start>.sorted`, syncs the directory and only then deletes the append-order file: at
//! every step one complete copy exists, and a `.sorting` file left by a crash is deleted.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use comet_rt::io::{DirectFile, FaultInjector, OpenMode};

use crate::commit_log::to_index;
use crate::error::StoreError;
use crate::index_entry::IndexEntry;
use crate::limits::{INDEX_ENTRY_BYTES, PAGE_BYTES};
use crate::offset::{file_name, PhysicalOffset};

/// File name suffix of a sealed index.
pub(crate) const SEALED_SUFFIX: &str = ".sorted";
/// File name suffix of a sealed index being written (the sealed name plus
/// `comet_rt::fs::TEMPORARY_SUFFIX`): a crash leaves it behind, and opening the index
/// deletes it.
pub(crate) const PARTIAL_SUFFIX: &str = ".sorted.tmp";

const MAGIC: u64 = u64::from_be_bytes(*b"CMTKIDX1");
const ENTRIES_PER_PAGE: u64 = PAGE_BYTES / INDEX_ENTRY_BYTES;
/// Entry pages one read of a lookup covers (a key with more entries in one segment, over
/// 4,000, takes several reads).
const LOOKUP_READ_PAGES: usize = 32;

/// A sealed segment's index (see the module docs). Its file is open only during a lookup,
/// and its fences are read by each lookup rather than kept: a store retaining days of log
/// holds hundreds of sealed indexes and lookups by key are rare, so an idle one costs
/// neither a descriptor nor memory that grows with its keys (fences kept would be 8 bytes
/// per 128 keys of every retained message).
pub(crate) struct SealedIndex {
    path: PathBuf,
    faults: Option<Rc<FaultInjector>>,
    footer: Footer,
    /// The CRC the footer stores (of the fences' CRC and the footer's words).
    stored_crc: u32,
}

/// Path of the sealed index of segment `start` in `dir`.
pub(crate) fn sealed_path(dir: &Path, start: u64) -> PathBuf {
    dir.join(format!("{}{SEALED_SUFFIX}", file_name(start)))
}

/// The file bytes of a sealed index holding `entries` (sorted here). Pure CPU work: runs on
/// the blocking thread.
pub(crate) fn encode(mut entries: Vec<IndexEntry>) -> Vec<u8> {
    entries.sort_unstable_by(|a, b| a.hash.cmp(&b.hash).then(b.physical.cmp(&a.physical)));
    let page = to_index(PAGE_BYTES);
    let entry_bytes = to_index(INDEX_ENTRY_BYTES);
    let pad = |bytes: &mut Vec<u8>| bytes.resize(bytes.len().div_ceil(page) * page, 0);
    let mut bytes = vec![0u8; entries.len() * entry_bytes];
    for (entry, target) in entries.iter().zip(bytes.chunks_exact_mut(entry_bytes)) {
        entry.encode(target);
    }
    pad(&mut bytes);
    let fences_at = bytes.len();
    for first in entries.chunks(to_index(ENTRIES_PER_PAGE)) {
        bytes.extend_from_slice(&first[0].hash.to_be_bytes());
    }
    let fence_count = (bytes.len() - fences_at) / 8;
    let fence_crc = crc32fast::hash(&bytes[fences_at..]);
    pad(&mut bytes);
    let times = entries.iter().map(|entry| entry.store_timestamp_ms);
    let footer = Footer {
        entry_count: entries.len() as u64,
        fence_count: fence_count as u64,
        lowest_time_ms: times.clone().min().unwrap_or(0),
        highest_time_ms: times.max().unwrap_or(0),
    };
    let footer_at = bytes.len();
    bytes.resize(footer_at + page, 0);
    footer.encode(fence_crc, &mut bytes[footer_at..]);
    bytes
}

/// Writes `bytes` as the sealed index of segment `start` in `dir`, atomically and durably
/// (see `comet_rt::fs`). Blocking: runs on the blocking thread.
pub(crate) fn write_file(dir: &Path, start: u64, bytes: &[u8]) -> std::io::Result<()> {
    comet_rt::fs::write_atomic(&sealed_path(dir, start), bytes)
}

struct Footer {
    entry_count: u64,
    fence_count: u64,
    lowest_time_ms: i64,
    highest_time_ms: i64,
}

impl Footer {
    fn entry_pages(&self) -> u64 {
        self.entry_count
            .saturating_mul(INDEX_ENTRY_BYTES)
            .div_ceil(PAGE_BYTES)
    }

    fn fence_pages(&self) -> u64 {
        self.fence_count.saturating_mul(8).div_ceil(PAGE_BYTES)
    }

    fn words(&self) -> [u64; 5] {
        [
            MAGIC,
            self.entry_count,
            self.fence_count,
            self.lowest_time_ms as u64,
            self.highest_time_ms as u64,
        ]
    }

    /// CRC32 of the fences' CRC and the five words.
    fn crc(&self, fence_crc: u32) -> u32 {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&fence_crc.to_be_bytes());
        for word in self.words() {
            crc.update(&word.to_be_bytes());
        }
        crc.finalize()
    }

    fn encode(&self, fence_crc: u32, target: &mut [u8]) {
        for (at, word) in self.words().iter().enumerate() {
            target[at * 8..at * 8 + 8].copy_from_slice(&word.to_be_bytes());
        }
        target[40..44].copy_from_slice(&self.crc(fence_crc).to_be_bytes());
    }

    /// The footer in `raw` (one page) and the CRC it stores, if the magic matches.
    fn decode(raw: &[u8]) -> Option<(Footer, u32)> {
        let word = |at: usize| u64::from_be_bytes(raw[at * 8..at * 8 + 8].try_into().expect("8"));
        if word(0) != MAGIC {
            return None;
        }
        let footer = Footer {
            entry_count: word(1),
            fence_count: word(2),
            lowest_time_ms: word(3) as i64,
            highest_time_ms: word(4) as i64,
        };
        let stored = u32::from_be_bytes(raw[40..44].try_into().expect("4 bytes"));
        Some((footer, stored))
    }
}

impl SealedIndex {
    /// Opens the sealed index at `path`, checking its footer and that the file's size
    /// matches it; its fences are checked by each lookup that reads them.
    pub(crate) async fn open(
        path: &Path,
        faults: &Option<Rc<FaultInjector>>,
    ) -> Result<SealedIndex, StoreError> {
        let file = DirectFile::open(path, OpenMode::Read, faults.clone()).await?;
        let opened = Self::read_footer(path, &file).await;
        file.close().await?;
        let (footer, stored_crc) = opened?;
        Ok(SealedIndex {
            path: path.to_path_buf(),
            faults: faults.clone(),
            footer,
            stored_crc,
        })
    }

    /// The footer of the open `file` at `path` and the CRC it stores, checked against the
    /// file's size.
    async fn read_footer(path: &Path, file: &DirectFile) -> Result<(Footer, u32), StoreError> {
        let corrupt = |reason: &str| StoreError::corrupt(path, reason);
        let size = file.file_size().await?;
        if size < PAGE_BYTES || size % PAGE_BYTES != 0 {
            return Err(corrupt("size is not a whole number of pages"));
        }
        let footer_raw = file
            .read_at(size - PAGE_BYTES, to_index(PAGE_BYTES))
            .await?;
        let (footer, stored_crc) =
            Footer::decode(&footer_raw).ok_or_else(|| corrupt("no sealed-index footer"))?;
        let expected_size =
            (footer.entry_pages() + footer.fence_pages() + 1).saturating_mul(PAGE_BYTES);
        let expected_fences = footer.entry_count.div_ceil(ENTRIES_PER_PAGE);
        if expected_size != size || footer.fence_count != expected_fences {
            return Err(corrupt("footer counts do not match the file size"));
        }
        Ok((footer, stored_crc))
    }

    /// The fences of the open `file`, checked against the footer's CRC and for order.
    async fn read_fences(&self, file: &DirectFile) -> Result<Vec<u64>, StoreError> {
        let fence_bytes = if self.footer.fence_count == 0 {
            Vec::new()
        } else {
            let length = to_index(self.footer.fence_count * 8);
            file.read_at(self.footer.entry_pages() * PAGE_BYTES, length)
                .await?
        };
        let corrupt = |reason: &str| StoreError::corrupt(&self.path, reason);
        if self.footer.crc(crc32fast::hash(&fence_bytes)) != self.stored_crc {
            return Err(corrupt("footer or fence CRC does not match"));
        }
        let fences: Vec<u64> = fence_bytes
            .chunks_exact(8)
            .map(|raw| u64::from_be_bytes(raw.try_into().expect("8 bytes")))
            .collect();
        if fences.windows(2).any(|pair| pair[0] > pair[1]) {
            return Err(corrupt("fences are not sorted"));
        }
        Ok(fences)
    }

    /// The file, for deletion by retention.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Physical offsets of entries with `hash` stored within `[begin_ms, end_ms]`, newest
    /// first, at most `max`.
    pub(crate) async fn lookup(
        &self,
        hash: u64,
        max: usize,
        begin_ms: i64,
        end_ms: i64,
    ) -> Result<Vec<PhysicalOffset>, StoreError> {
        let footer = &self.footer;
        if max == 0 || end_ms < footer.lowest_time_ms || begin_ms > footer.highest_time_ms {
            return Ok(Vec::new());
        }
        let file = DirectFile::open(&self.path, OpenMode::Read, self.faults.clone()).await?;
        let found = self.lookup_open(&file, hash, max, (begin_ms, end_ms)).await;
        file.close().await?;
        found
    }

    /// [`SealedIndex::lookup`] in the open `file`.
    async fn lookup_open(
        &self,
        file: &DirectFile,
        hash: u64,
        max: usize,
        times: (i64, i64),
    ) -> Result<Vec<PhysicalOffset>, StoreError> {
        let fences = self.read_fences(file).await?;
        // The key's entries start in the last page whose first hash is below it (or the
        // first page) and run through the pages whose first hash equals it.
        let first_page = fences
            .partition_point(|fence| *fence < hash)
            .saturating_sub(1);
        let end_page = fences.partition_point(|fence| *fence <= hash);
        self.lookup_in(file, hash, max, times, first_page..end_page)
            .await
    }

    /// The entries of [`SealedIndex::lookup`] in `pages` of the open `file`.
    async fn lookup_in(
        &self,
        file: &DirectFile,
        hash: u64,
        max: usize,
        (begin_ms, end_ms): (i64, i64),
        pages: std::ops::Range<usize>,
    ) -> Result<Vec<PhysicalOffset>, StoreError> {
        let (mut page, end_page) = (pages.start, pages.end);
        let mut found = Vec::new();
        while page < end_page {
            let pages = (end_page - page).min(LOOKUP_READ_PAGES);
            let bytes = file
                .read_at(page as u64 * PAGE_BYTES, pages * to_index(PAGE_BYTES))
                .await?;
            let entries_left = self.footer.entry_count - page as u64 * ENTRIES_PER_PAGE;
            for raw in bytes
                .chunks_exact(to_index(INDEX_ENTRY_BYTES))
                .take(to_index(entries_left))
            {
                let entry = IndexEntry::decode(raw)
                    .ok_or_else(|| StoreError::corrupt(self.path(), "invalid entry"))?;
                if entry.hash > hash {
                    return Ok(found);
                }
                let in_range = (begin_ms..=end_ms).contains(&entry.store_timestamp_ms);
                if entry.hash == hash && in_range {
                    found.push(entry.physical);
                    if found.len() == max {
                        return Ok(found);
                    }
                }
            }
            page += pages;
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::offset::LogId;

    fn entry(hash: u64, position: u64, time: i64) -> IndexEntry {
        IndexEntry {
            hash,
            physical: PhysicalOffset::new(LogId::new(1).expect("id"), position),
            store_timestamp_ms: time,
        }
    }

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::var_os("COMET_TEST_DIR")
            .map_or_else(|| PathBuf::from("target/tmp/test-stores"), PathBuf::from)
            .join(format!("sealed-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("test dir");
        dir
    }

    // Proves a sealed index finds every key's entries newest first, within the time range
    // and limit, including keys whose entries span pages, and finds nothing for absent keys.
    #[test]
    fn lookups_across_pages() {
        let dir = temp_dir("lookup");
        // 1,000 entries: hash h = i % 7 * 1000 (7 keys of ~143 entries, each over 2 pages),
        // plus one key with a single entry; positions ascending.
        let mut entries: Vec<IndexEntry> = (0..1000u64)
            .map(|i| entry(i % 7 * 1000, i * 100, 1_000 + i as i64))
            .collect();
        entries.push(entry(3_500, 200_000, 5_000));
        let bytes = encode(entries.clone());
        write_file(&dir, 0, &bytes).expect("write");
        comet_rt::local::run_local("sealed-lookup", async {
            let sealed = SealedIndex::open(&sealed_path(&dir, 0), &None)
                .await
                .expect("open");
            for key in 0..7u64 {
                let found = sealed
                    .lookup(key * 1000, 1000, 0, i64::MAX)
                    .await
                    .expect("ok");
                let mut expected: Vec<PhysicalOffset> = entries
                    .iter()
                    .filter(|entry| entry.hash == key * 1000)
                    .map(|entry| entry.physical)
                    .collect();
                expected.reverse();
                assert_eq!(found, expected, "key {key}");
                let two = sealed.lookup(key * 1000, 2, 0, i64::MAX).await.expect("ok");
                assert_eq!(two, expected[..2]);
            }
            let single = sealed.lookup(3_500, 10, 0, i64::MAX).await.expect("ok");
            assert_eq!(single, vec![entries[1000].physical]);
            let ranged = sealed.lookup(0, 10, 1_000, 1_014).await.expect("ok");
            assert_eq!(
                ranged,
                vec![
                    entries[14].physical,
                    entries[7].physical,
                    entries[0].physical
                ]
            );
            for absent in [1, 999, 3_499, 6_001, u64::MAX] {
                assert!(sealed
                    .lookup(absent, 10, 0, i64::MAX)
                    .await
                    .expect("ok")
                    .is_empty());
            }
            assert!(sealed
                .lookup(0, 10, 10_000, 20_000)
                .await
                .expect("ok")
                .is_empty());
        });
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    // Proves a key with more entries than one read covers is found whole, newest first.
    #[test]
    fn a_hot_key_spans_several_reads() {
        let dir = temp_dir("hot");
        let count = LOOKUP_READ_PAGES as u64 * ENTRIES_PER_PAGE * 2 + 77;
        let mut entries: Vec<IndexEntry> = (0..count).map(|i| entry(42, i * 10, 1)).collect();
        entries.push(entry(41, 5, 1));
        entries.push(entry(43, count * 10, 1));
        write_file(&dir, 0, &encode(entries)).expect("write");
        comet_rt::local::run_local("sealed-hot", async {
            let sealed = SealedIndex::open(&sealed_path(&dir, 0), &None)
                .await
                .expect("open");
            let found = sealed
                .lookup(42, usize::MAX, 0, i64::MAX)
                .await
                .expect("ok");
            let positions: Vec<u64> = found.iter().map(|offset| offset.position()).collect();
            assert_eq!(
                positions,
                (0..count).rev().map(|i| i * 10).collect::<Vec<_>>()
            );
            assert_eq!(
                sealed.lookup(43, 9, 0, i64::MAX).await.expect("ok").len(),
                1
            );
        });
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    // Proves a damaged file (flipped fence byte, truncated, not a sealed index) is refused
    // with a clear error, at open or at the lookup that reads the fences, never read as an
    // index.
    #[test]
    fn damaged_files_are_refused() {
        let dir = temp_dir("damaged");
        let entries: Vec<IndexEntry> = (0..300u64).map(|i| entry(i, i * 10, 1)).collect();
        let good = encode(entries);
        let mut flipped = good.clone();
        let fences_at = (300 * 32u64).div_ceil(PAGE_BYTES) * PAGE_BYTES;
        flipped[to_index(fences_at) + 3] ^= 0x40;
        let truncated = good[..good.len() - to_index(PAGE_BYTES)].to_vec();
        let zeros = vec![0u8; to_index(PAGE_BYTES) * 3];
        for (start, bytes) in [(1u64, &flipped), (2, &truncated), (3, &zeros)] {
            write_file(&dir, start, bytes).expect("write");
        }
        comet_rt::local::run_local("sealed-damaged", async {
            // The flipped fence is found by the lookup that reads the fences.
            let flipped = SealedIndex::open(&sealed_path(&dir, 1), &None)
                .await
                .expect("the footer is whole");
            let looked_up = flipped.lookup(7, 10, 0, i64::MAX).await;
            let error = looked_up.expect_err("refused").to_string();
            assert!(error.contains("corrupt"), "flipped: {error}");
            for start in 2..=3u64 {
                let opened = SealedIndex::open(&sealed_path(&dir, start), &None).await;
                let error = opened.err().expect("refused").to_string();
                assert!(error.contains("corrupt"), "{start}: {error}");
            }
        });
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
