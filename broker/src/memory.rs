//! The machine's memory, and Java's rule for what a broker still serves from it
//! (`accessMessageInMemoryMaxRatio`): a pull far behind is sent to a slave, a new pop group
//! starts at a queue's first message only while that message is in memory.

use std::sync::OnceLock;

use comet_store::QueueOffset;

use crate::shard::ShardBroker;

/// The machine's physical memory in bytes, read from `/proc/meminfo` once at start-up
/// ([`read_total_memory`]); 0 until then or where it cannot be read.
static TOTAL_MEMORY_BYTES: OnceLock<u64> = OnceLock::new();

/// Reads the machine's physical memory for the slave suggestion (Java's
/// `StoreUtil.TOTAL_PHYSICAL_MEMORY_SIZE`). Blocking: call it at start-up, before shards
/// serve. Without it (or without `/proc`), no pull is judged far behind.
pub fn read_total_memory() {
    let total = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|text| mem_total_bytes(&text));
    if total.is_none() {
        log::warn!("/proc/meminfo names no MemTotal: consumers are never sent to a slave");
    }
    let _ = TOTAL_MEMORY_BYTES.set(total.unwrap_or(0));
}

/// The machine's memory in bytes ([`read_total_memory`]); 0 when unknown.
pub fn total_memory_bytes() -> u64 {
    TOTAL_MEMORY_BYTES.get().copied().unwrap_or(0)
}

/// `MemTotal` of a `/proc/meminfo` text, in bytes.
fn mem_total_bytes(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|line| line.starts_with("MemTotal:"))?;
    let mut words = line["MemTotal:".len()..].split_whitespace();
    let amount: u64 = words.next()?.parse().ok()?;
    match words.next() {
        Some("kB") => amount.checked_mul(1024),
        None => Some(amount),
        Some(_) => None,
    }
}

/// Java's rule for a pull that is no longer served from memory
/// (`DefaultMessageStore.getMessage`): the log holds more than `ratio_percent` of the
/// machine's memory past the last entry the pull looked at.
pub fn is_far_behind(behind_bytes: u64, memory_bytes: u64, ratio_percent: u8) -> bool {
    let in_memory = u128::from(memory_bytes) * u128::from(ratio_percent) / 100;
    u128::from(behind_bytes) > in_memory
}

/// True while the message at `queue_offset` of (`topic`, `queue_id`) is within
/// `accessMessageInMemoryMaxRatio` of memory from the end of its log (Java's
/// `checkInMemByConsumeOffset`); true too when the machine's memory is unknown, and false
/// when there is no such entry (or it lies in another shard's log).
pub fn is_in_memory(broker: &ShardBroker, topic: &str, queue_id: i32, queue_offset: u64) -> bool {
    let store = broker.queue_store(topic, queue_id);
    let entry = store
        .consume_queue_entries(topic, queue_id, QueueOffset(queue_offset), 1)
        .into_iter()
        .next()
        .filter(|(_, entry)| entry.physical.log_id() == store.config().log_id);
    let Some((_, entry)) = entry else {
        return false;
    };
    let behind = store
        .written_position()
        .saturating_sub(entry.physical.position());
    let memory = total_memory_bytes();
    let ratio = broker.config().access_message_in_memory_max_ratio_percent;
    memory == 0 || !is_far_behind(behind, memory, ratio)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves MemTotal is read in bytes from /proc/meminfo's text, and a text without it or
    // with an unknown unit gives nothing.
    #[test]
    fn mem_total_is_read_in_bytes() {
        let text = "MemTotal:        8048576 kB\nMemFree:  100 kB\n";
        assert_eq!(mem_total_bytes(text), Some(8_048_576 * 1024));
        assert_eq!(mem_total_bytes("MemFree: 1 kB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: 1 MB\n"), None);
        assert_eq!(mem_total_bytes("MemTotal: lots kB\n"), None);
    }

    // Proves Java's rule: behind by more than ratio% of memory is far behind, exactly the
    // share is not, and ratio 0 sends every pull that has anything behind it to the slave.
    #[test]
    fn far_behind_is_a_share_of_memory() {
        let gib = 1u64 << 30;
        assert!(!is_far_behind(4 * gib, 10 * gib, 40));
        assert!(is_far_behind(4 * gib + 1, 10 * gib, 40));
        assert!(is_far_behind(1, 10 * gib, 0));
        assert!(!is_far_behind(0, 10 * gib, 0));
        assert!(!is_far_behind(u64::MAX, u64::MAX, 100));
    }
}
