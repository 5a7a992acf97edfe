//! A histogram with fixed bucket bounds, plain counters a single shard writes (no atomics,
//! no allocation): the store records its group-commit sizes and sync latencies into it, and
//! the broker encodes it for its metrics (docs/operations.md#metrics).

/// Counts of values at or under each of `N` bounds (not cumulative: bucket `i` holds the
/// values above bound `i - 1`), with the count and sum of every value, those past the last
/// bound included. The bounds are the caller's; every `observe` on one histogram must pass
/// the same ones.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Histogram<const N: usize> {
    /// Values at or under bound `i` and above bound `i - 1`.
    pub in_bucket: [u64; N],
    /// Every value observed.
    pub count: u64,
    /// Sum of the values (wrapping: a counter that runs for ever).
    pub sum: u64,
}

impl<const N: usize> Default for Histogram<N> {
    fn default() -> Self {
        Histogram {
            in_bucket: [0; N],
            count: 0,
            sum: 0,
        }
    }
}

impl<const N: usize> Histogram<N> {
    /// Counts `value` against `bounds` (ascending).
    pub fn observe(&mut self, bounds: &[u64; N], value: u64) {
        debug_assert!(bounds.windows(2).all(|pair| pair[0] < pair[1]));
        if let Some(bucket) = bounds.iter().position(|bound| value <= *bound) {
            self.in_bucket[bucket] += 1;
        }
        self.count += 1;
        self.sum = self.sum.wrapping_add(value);
    }

    /// Adds another histogram's counts (same bounds).
    pub fn merge(&mut self, other: &Histogram<N>) {
        for (mine, theirs) in self.in_bucket.iter_mut().zip(other.in_bucket) {
            *mine += theirs;
        }
        self.count += other.count;
        self.sum = self.sum.wrapping_add(other.sum);
    }

    /// Values past the last bound (the `+Inf` bucket's own share).
    pub fn over_last_bound(&self) -> u64 {
        self.count - self.in_bucket.iter().sum::<u64>()
    }
}

/// Upper bounds of [`StoreHistograms::commit_records`]' buckets, in records.
pub const COMMIT_RECORDS_BOUNDS: [u64; 12] = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 4096];

/// Upper bounds of [`StoreHistograms::commit_bytes`]' buckets, in bytes (a flush writes at most
/// [`FLUSH_BYTES_MAX`](crate::limits::FLUSH_BYTES_MAX)).
pub const COMMIT_BYTES_BOUNDS: [u64; 10] = [
    512,
    4 * 1024,
    16 * 1024,
    64 * 1024,
    256 * 1024,
    1024 * 1024,
    4 * 1024 * 1024,
    16 * 1024 * 1024,
    64 * 1024 * 1024,
    256 * 1024 * 1024,
];

/// Upper bounds of [`StoreHistograms::sync_latency_us`]' buckets, in microseconds.
pub const SYNC_LATENCY_BOUNDS_US: [u64; 14] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000,
    1_000_000,
];

/// The store's histograms since open.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StoreHistograms {
    /// Records per group commit (one per flush, as [`StoreStats::flushes`] counts them): the
    /// records appended since the previous flush was planned; a flush cut short at
    /// [`FLUSH_BYTES_MAX`](crate::limits::FLUSH_BYTES_MAX) gets its share by bytes and leaves
    /// the rest to the next, so the sum is every record flushed.
    ///
    /// [`StoreStats::flushes`]: crate::StoreStats::flushes
    pub commit_records: Histogram<12>,
    /// Log bytes per group commit (padding included): what the flush made durable.
    pub commit_bytes: Histogram<10>,
    /// Microseconds per segment sync (one per [`StoreStats::fdatasyncs`]): the O_DSYNC write
    /// of a segment, or the fdatasync of a file opened without it.
    ///
    /// [`StoreStats::fdatasyncs`]: crate::StoreStats::fdatasyncs
    pub sync_latency_us: Histogram<14>,
}

/// What the last open's recovery did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RecoveryFigures {
    /// Wall time of the open up to a servable store, in milliseconds.
    pub duration_ms: u64,
    /// Log bytes the recovery scan read and checked (from the checkpoint, or the start of its
    /// segment after a crash, to the end of valid data).
    pub scanned_bytes: u64,
    /// The previous run did not shut down cleanly.
    pub crashed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    const BOUNDS: [u64; 3] = [1, 10, 100];

    // Proves a value lands in the first bucket whose bound it does not exceed (bounds
    // inclusive), a value past the last bound counts only in count and sum, and sum adds up.
    #[test]
    fn observe_puts_values_in_their_bucket() {
        let mut histogram = Histogram::<3>::default();
        for value in [0, 1, 2, 10, 11, 100, 101, 5000] {
            histogram.observe(&BOUNDS, value);
        }
        assert_eq!(histogram.in_bucket, [2, 2, 2]);
        assert_eq!(histogram.count, 8);
        assert_eq!(histogram.over_last_bound(), 2);
        assert_eq!(histogram.sum, 1 + 2 + 10 + 11 + 100 + 101 + 5000);
    }

    // Proves merging adds bucket by bucket, and the sum wraps instead of overflowing.
    #[test]
    fn merge_adds_and_sum_wraps() {
        let mut left = Histogram::<3>::default();
        left.observe(&BOUNDS, 5);
        left.observe(&BOUNDS, u64::MAX);
        let mut right = Histogram::<3>::default();
        right.observe(&BOUNDS, 50);
        right.observe(&BOUNDS, 3);
        left.merge(&right);
        assert_eq!(left.in_bucket, [0, 2, 1]);
        assert_eq!(left.count, 4);
        assert_eq!(left.sum, 5u64.wrapping_add(u64::MAX) + 53);
    }

    // Proves the shipped bounds ascend (a bucket search relies on it) and fit their unit.
    #[test]
    fn shipped_bounds_ascend() {
        let ascending = |bounds: &[u64]| bounds.windows(2).all(|pair| pair[0] < pair[1]);
        assert!(ascending(&COMMIT_RECORDS_BOUNDS));
        assert!(ascending(&COMMIT_BYTES_BOUNDS));
        assert!(ascending(&SYNC_LATENCY_BOUNDS_US));
        assert!(COMMIT_BYTES_BOUNDS[9] >= crate::limits::FLUSH_BYTES_MAX as u64);
    }
}
