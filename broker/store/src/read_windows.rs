//! Windows of the commit log read from disk, kept across pulls: one per store, bounded in
//! bytes (`StoreConfig::read_window_cache_bytes`, 0 keeps none).
//!
//! A cold read goes to disk in windows of [`READ_AHEAD_BYTES`](crate::limits::READ_AHEAD_BYTES)
//! on a fixed grid of the log (each clipped to its segment and the durable end). The queues of
//! a topic interleave in one log, so the pulls of the other queues need the same windows soon
//! after: kept here, each cold byte is read from disk about once instead of once per queue
//! (docs/architecture.md#read-windows). The grid matters: windows starting wherever a record
//! did overlapped, and a drain of four interleaved queues read the log about 3.3 times. A
//! window is a `Bytes` of one read, so a hit hands out a slice of it without copying; the
//! least recently used window goes first.
//!
//! Only durable bytes of the own log go in (the reads are bounded by `durable` and by the
//! segment's end, so a window never spans segments). The log below a window can still change:
//! a replica takes back an unconfirmed tail, retention deletes a segment. Both drop the
//! windows they touch ([`ReadWindows::drop_from`], [`ReadWindows::drop_below`]) and start a
//! new generation, and a read that began before (its bytes possibly stale) is not kept
//! ([`ReadWindows::keep`] with the generation it began in).

use bytes::Bytes;

struct Window {
    position: u64,
    bytes: Bytes,
    used_at: u64,
}

impl Window {
    fn end(&self) -> u64 {
        self.position + self.bytes.len() as u64
    }
}

/// The windows (see the module docs). Shard-local.
pub(crate) struct ReadWindows {
    bound_bytes: usize,
    /// Sum of the windows' lengths: each is the whole allocation of its read.
    held_bytes: usize,
    clock: u64,
    generation: u64,
    /// Few (the bound over the read-ahead, 16 by default): a scan is cheaper than an index.
    windows: Vec<Window>,
    /// Largest `held_bytes` ever seen (tests check it stays within the bound).
    peak_bytes: usize,
    /// Starts of the windows being read from disk now: the queues draining together reach
    /// a window at about the same moment, and each read it again until this said it was
    /// being read (a drain of four queues read the log about four times).
    reading: Vec<u64>,
}

impl ReadWindows {
    /// No window yet, at most `bound_bytes` of them.
    pub(crate) fn new(bound_bytes: usize) -> ReadWindows {
        ReadWindows {
            bound_bytes,
            held_bytes: 0,
            clock: 0,
            generation: 0,
            windows: Vec::new(),
            peak_bytes: 0,
            reading: Vec::new(),
        }
    }

    /// The generation a read must quote to [`ReadWindows::keep`] its bytes: taken with the
    /// log's bounds, before the read is issued.
    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// The bytes of a kept window from `position` to its end, if one holds at least
    /// `length_min` bytes from there; the window is marked as just used.
    pub(crate) fn get_from(&mut self, position: u64, length_min: usize) -> Option<Bytes> {
        let end = position.checked_add(length_min as u64)?;
        let window = self
            .windows
            .iter_mut()
            .find(|window| window.position <= position && end <= window.end())?;
        self.clock += 1;
        window.used_at = self.clock;
        let from = usize::try_from(position - window.position).ok()?;
        Some(window.bytes.slice(from..))
    }

    /// The whole window starting at `start`, if one is kept there holding at least
    /// `length_min` bytes; it is marked as just used. Windows of the read path start on the
    /// read-ahead grid (or a segment's start), so this is how a read finds one.
    pub(crate) fn get_at(&mut self, start: u64, length_min: usize) -> Option<Bytes> {
        let window = self
            .windows
            .iter_mut()
            .find(|window| window.position == start && window.bytes.len() >= length_min)?;
        self.clock += 1;
        window.used_at = self.clock;
        Some(window.bytes.clone())
    }

    /// Keeps `bytes`, read from `position` in generation `generation`, evicting the least
    /// recently used windows to stay within the bound. Not kept: when the log changed since
    /// the read began (another generation), when the bound is 0 or below the window's length.
    pub(crate) fn keep(&mut self, generation: u64, position: u64, bytes: Bytes) {
        let length = bytes.len();
        if generation != self.generation || length == 0 || length > self.bound_bytes {
            return;
        }
        // A window read again from the same start (it ended at the durable end then, or two
        // pulls missed it at once) replaces the one kept.
        if let Some(index) = self
            .windows
            .iter()
            .position(|window| window.position == position)
        {
            let replaced = self.windows.swap_remove(index);
            self.held_bytes -= replaced.bytes.len();
        }
        while self.held_bytes + length > self.bound_bytes {
            let oldest = self
                .windows
                .iter()
                .enumerate()
                .min_by_key(|(_, window)| window.used_at)
                .map(|(index, _)| index)
                .expect("held bytes are in some window");
            let evicted = self.windows.swap_remove(oldest);
            self.held_bytes -= evicted.bytes.len();
        }
        self.clock += 1;
        self.windows.push(Window {
            position,
            bytes,
            used_at: self.clock,
        });
        self.held_bytes += length;
        self.peak_bytes = self.peak_bytes.max(self.held_bytes);
        assert!(
            self.held_bytes <= self.bound_bytes,
            "windows within their bound"
        );
    }

    /// Marks the window at `start` as being read; false when it already is (the caller then
    /// waits for that read rather than issuing its own).
    pub(crate) fn begin_read(&mut self, start: u64) -> bool {
        if self.reading.contains(&start) {
            return false;
        }
        self.reading.push(start);
        true
    }

    /// The read of the window at `start` ended (kept, failed or dropped).
    pub(crate) fn end_read(&mut self, start: u64) {
        let index = self.reading.iter().position(|at| *at == start);
        let index = index.expect("a read that began");
        self.reading.swap_remove(index);
    }

    /// True while the window at `start` is being read.
    pub(crate) fn is_reading(&self, start: u64) -> bool {
        self.reading.contains(&start)
    }

    /// Drops every window holding bytes at or past `position` (the log is taken back to it)
    /// and starts a new generation.
    pub(crate) fn drop_from(&mut self, position: u64) {
        self.drop_where(|window| window.end() > position);
    }

    /// Drops every window starting below `position` (the segments below it are deleted) and
    /// starts a new generation.
    pub(crate) fn drop_below(&mut self, position: u64) {
        self.drop_where(|window| window.position < position);
    }

    fn drop_where(&mut self, dropped: impl Fn(&Window) -> bool) {
        self.generation += 1;
        self.windows.retain(|window| !dropped(window));
        self.held_bytes = self.windows.iter().map(|window| window.bytes.len()).sum();
    }

    /// Bytes the windows hold now, and the most they ever held.
    pub(crate) fn held_and_peak_bytes(&self) -> (usize, usize) {
        (self.held_bytes, self.peak_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes_at(position: u64, length: u64) -> Bytes {
        (position..position + length)
            .map(|at| u8::try_from(at % 256).expect("a byte"))
            .collect()
    }

    // Proves a hit returns the bytes at its position, the least recently used window goes
    // first, the bound is never passed, and a read of an older generation is not kept.
    #[test]
    fn windows_stay_within_the_bound_and_the_generation() {
        let mut windows = ReadWindows::new(300);
        windows.keep(0, 0, bytes_at(0, 100));
        windows.keep(0, 100, bytes_at(100, 100));
        windows.keep(0, 200, bytes_at(200, 100));
        assert_eq!(windows.get_from(10, 5).expect("hit"), bytes_at(10, 90));
        assert!(windows.get_from(95, 10).is_none(), "spans two windows");
        windows.keep(0, 300, bytes_at(300, 100));
        assert!(
            windows.get_from(150, 1).is_none(),
            "least recently used went"
        );
        assert!(windows.get_from(10, 1).is_some(), "used, so kept");
        assert_eq!(windows.held_and_peak_bytes(), (300, 300));
        windows.keep(0, 400, bytes_at(400, 301));
        assert!(windows.get_from(400, 1).is_none(), "longer than the bound");

        let generation = windows.generation();
        windows.drop_from(250);
        assert!(windows.get_from(300, 1).is_none(), "taken back");
        assert!(windows.get_from(210, 1).is_none(), "reaches past the cut");
        assert!(windows.get_from(10, 1).is_some(), "below the cut");
        windows.keep(generation, 300, bytes_at(300, 100));
        assert!(windows.get_from(300, 1).is_none(), "read before the cut");
        windows.drop_below(100);
        assert_eq!(windows.held_and_peak_bytes().0, 0);

        let mut none = ReadWindows::new(0);
        none.keep(0, 0, bytes_at(0, 1));
        assert!(none.get_from(0, 1).is_none(), "a bound of 0 keeps nothing");
    }
}
