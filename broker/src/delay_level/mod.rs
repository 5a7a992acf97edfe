//! Delayed messages (docs/protocol.md#delay-levels): delay levels on `SCHEDULE_TOPIC_XXXX`.
//!
//! A send carrying `DELAY` = level > 0 is stored rewritten ([`rewrite`]): topic
//! `SCHEDULE_TOPIC_XXXX`, queue `level - 1`, `REAL_TOPIC`/`REAL_QID` added. Records in one
//! level's queue are in store order, and all have the same delay, so they come due in queue
//! order: one cursor per level (the next schedule-queue offset to deliver) is all the state.
//!
//! Each shard runs [`delivery`] for the levels whose schedule queue it owns. A due record is
//! rebuilt for its real queue (`DELAY` removed, `UNIQ_KEY` kept, tag code recomputed by the
//! store, [`SCHEDULE_ORIGIN`] added) and appended on the real queue's owner
//! (`crate::reappend`). Cursors are persisted in `config/delayOffset-<shard>.json`
//! ([`cursor`]) only after the delivered records are durable.
//!
//! Exactly once across a crash: a round delivers at most [`ROUND_ENTRIES_MAX`] entries per
//! level past the persisted cursor and persists before starting the next round, so after a
//! crash only the first `ROUND_ENTRIES_MAX` entries past the persisted cursor can have been
//! delivered already. Those (and only those) are checked before delivery: the real topic's
//! index is searched for the `UNIQ_KEY`, and a hit carrying the same [`SCHEDULE_ORIGIN`] (the
//! schedule record's physical offset, unique per scheduled record) means it was delivered.
//! Under ASYNC_FLUSH a delivered record may be lost in a crash after the cursor moved past
//! it, as any acknowledged message can be under that policy.

pub mod cursor;
pub mod delivery;
pub mod limits;
pub mod rewrite;

use thiserror::Error;

/// Property added to delivered records: the physical offset of the schedule record they came
/// from, which makes delivery idempotent after a crash.
pub const SCHEDULE_ORIGIN: &str = "SCHEDULE_ORIGIN_OFFSET";
pub use limits::{POLL_INTERVAL_MS, ROUND_ENTRIES_MAX};

/// A `messageDelayLevel` entry that does not parse.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("messageDelayLevel entry {entry:?} is not <number><s|m|h|d>")]
pub struct DelayLevelError {
    /// The offending entry.
    pub entry: String,
}

/// Parses `messageDelayLevel` ("1s 5s 10s ... 2h") into delays in ms, level 1 first.
pub fn parse_delay_levels(text: &str) -> Result<Vec<i64>, DelayLevelError> {
    let mut levels = Vec::new();
    for entry in text.split_whitespace() {
        let bad = || DelayLevelError {
            entry: entry.to_owned(),
        };
        if !entry.is_ascii() || entry.len() < 2 {
            return Err(bad());
        }
        let (number, unit) = entry.split_at(entry.len() - 1);
        let unit_ms: i64 = match unit {
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        let number: i64 = number.parse().map_err(|_| bad())?;
        if number <= 0 {
            return Err(bad());
        }
        levels.push(number.checked_mul(unit_ms).ok_or_else(bad)?);
    }
    if levels.is_empty() {
        return Err(DelayLevelError {
            entry: text.to_owned(),
        });
    }
    Ok(levels)
}

/// The configured delay levels, falling back to RocketMQ's defaults (start-up refuses a
/// malformed value before this is used).
pub fn delay_levels_ms(config: &crate::config::BrokerConfig) -> Vec<i64> {
    parse_delay_levels(&config.message_delay_levels)
        .unwrap_or_else(|_| comet_store::config::default_delay_levels_ms())
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the default string gives RocketMQ's 18 levels and bad entries are refused.
    #[test]
    fn delay_level_strings() {
        let levels =
            parse_delay_levels(&crate::config::BrokerConfig::default().message_delay_levels)
                .unwrap();
        assert_eq!(levels.len(), 18);
        assert_eq!(levels[0], 1000);
        assert_eq!(levels[4], 60_000);
        assert_eq!(levels[17], 7_200_000);
        assert_eq!(
            parse_delay_levels("1s 2s 3s").unwrap(),
            vec![1000, 2000, 3000]
        );
        assert_eq!(parse_delay_levels("1d").unwrap(), vec![86_400_000]);
        assert!(parse_delay_levels("1x").is_err());
        assert!(parse_delay_levels("s").is_err());
        assert!(parse_delay_levels("0s").is_err());
        assert!(parse_delay_levels("").is_err());
    }
}
