//! Bookkeeping of the flushes planned and in flight (see `flush`): where the next flush may
//! start, and how far the log is durable once flushes complete, in any order.

use std::collections::VecDeque;

use crate::limits::PAGE_BYTES;

/// The flushes planned and not yet folded into `durable`.
pub(crate) struct Flights {
    /// End of the last planned flush: `durable <= planned <= write`.
    planned: u64,
    /// Targets of the flushes in flight, oldest first, and whether each has completed.
    in_flight: VecDeque<(u64, bool)>,
    /// Most flushes in flight at once (1 or 2).
    pub(crate) max: usize,
}

impl Flights {
    /// No flush in flight, the log durable up to `durable`.
    pub(crate) fn new(durable: u64, max: usize) -> Flights {
        assert!((1..=2).contains(&max), "one or two flushes in flight");
        Flights {
            planned: durable,
            in_flight: VecDeque::with_capacity(max),
            max,
        }
    }

    /// Where the next flush starts, if one may be planned now with the log written up to
    /// `write`: something is dirty past the last planned flush, and either nothing is in
    /// flight or the flushes in flight end on a page boundary and leave a place.
    pub(crate) fn next_start(&self, write: u64) -> Option<u64> {
        if write <= self.planned {
            return None;
        }
        let free = self.in_flight.is_empty()
            || (self.in_flight.len() < self.max && self.planned % PAGE_BYTES == 0);
        free.then_some(self.planned)
    }

    /// Bytes appended that no planned flush covers.
    pub(crate) fn unplanned_bytes(&self, write: u64) -> u64 {
        write.saturating_sub(self.planned)
    }

    /// Whether a flush is planned or in flight (the warmer writes only when none is).
    pub(crate) fn busy(&self) -> bool {
        !self.in_flight.is_empty()
    }

    /// Records a flush planned up to `target`.
    pub(crate) fn begin(&mut self, target: u64) {
        assert!(target > self.planned, "flushes are planned in log order");
        assert!(self.in_flight.len() < self.max, "a place was free");
        self.planned = target;
        self.in_flight.push_back((target, false));
    }

    /// Records the flush up to `target` completed; returns the new durable position when this
    /// completes the oldest flushes in flight (the log is durable up to the last of them).
    pub(crate) fn complete(&mut self, target: u64) -> Option<u64> {
        let flight = self
            .in_flight
            .iter_mut()
            .find(|(known, _)| *known == target)
            .expect("a completed flush was in flight");
        assert!(!flight.1, "a flush completes once");
        flight.1 = true;
        let mut durable = None;
        while let Some(&(oldest, true)) = self.in_flight.front() {
            durable = Some(oldest);
            self.in_flight.pop_front();
        }
        durable
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves durable moves only over completed flushes in log order, whatever order they
    // complete in, and a second flush starts only behind a flush ending on a page.
    #[test]
    fn flights_fold_in_order_and_share_no_page() {
        let mut flights = Flights::new(100, 2);
        assert_eq!(flights.next_start(100), None, "nothing dirty");
        assert_eq!(flights.next_start(5000), Some(100));
        flights.begin(5000);
        assert_eq!(flights.next_start(9000), None, "5000 is mid-page");

        let mut flights = Flights::new(100, 2);
        flights.begin(8192);
        assert_eq!(flights.next_start(9000), Some(8192));
        flights.begin(9000);
        assert_eq!(flights.next_start(20_000), None, "two in flight");
        assert_eq!(
            flights.complete(9000),
            None,
            "the older flush is still in flight"
        );
        assert_eq!(flights.next_start(20_000), None, "9000 is mid-page");
        assert_eq!(flights.complete(8192), Some(9000));
        assert!(!flights.busy());
        assert_eq!(flights.next_start(20_000), Some(9000));

        let mut single = Flights::new(0, 1);
        single.begin(4096);
        assert_eq!(single.next_start(9000), None, "one flush at a time");
        assert_eq!(single.complete(4096), Some(4096));
        assert_eq!(single.unplanned_bytes(9000), 9000 - 4096);
    }
}
