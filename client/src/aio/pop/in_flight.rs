//! The pop consumer's in-flight limit: messages received and neither acked, nor changed
//! past, nor expired.
//!
//! A message stops counting when it is acked, or when its invisible time has passed (the
//! broker hands it out again then, so this consumer no longer holds it), which bounds the
//! count without trusting the application to ack or even keep every message. A receive
//! reserves its room before it asks the broker, so concurrent receives together never take
//! more than the limit.

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;
use tokio::time::Instant;

/// What identifies a message in flight: broker name, queue topic, queue id, queue offset.
pub(crate) type MessageKey = (String, String, i32, i64);

#[derive(Default)]
struct Held {
    /// Each message in flight and when its invisible time ends.
    until: HashMap<MessageKey, Instant>,
    /// Room reserved by receives waiting for their answer.
    reserved: usize,
}

impl Held {
    fn purge(&mut self, now: Instant) {
        self.until.retain(|_, until| *until > now);
    }

    fn taken(&self) -> usize {
        self.until.len() + self.reserved
    }
}

/// The in-flight limit of one consumer.
pub(crate) struct InFlight {
    max: usize,
    held: Mutex<Held>,
    /// Signalled whenever room frees (an ack, a receive giving back its reservation).
    freed: Notify,
}

/// Room reserved for one receive; given back when dropped unless settled.
pub(crate) struct Reservation<'a> {
    in_flight: &'a InFlight,
    count: usize,
}

impl Reservation<'_> {
    /// How many messages the receive may ask for.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// Turns the reservation into the messages received (fewer, or none, give the rest
    /// back).
    pub(crate) fn settle(mut self, received: impl IntoIterator<Item = (MessageKey, Instant)>) {
        let mut held = self.in_flight.lock();
        held.reserved -= self.count;
        self.count = 0;
        held.until.extend(received);
        drop(held);
        self.in_flight.freed.notify_waiters();
    }
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        if self.count == 0 {
            return;
        }
        self.in_flight.lock().reserved -= self.count;
        self.in_flight.freed.notify_waiters();
    }
}

impl InFlight {
    /// A limit of `max` messages (at least one).
    pub(crate) fn new(max: usize) -> InFlight {
        assert!(max > 0, "an in-flight limit of zero would never receive");
        InFlight {
            max,
            held: Mutex::new(Held::default()),
            freed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Held> {
        self.held
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
    }

    /// Messages in flight now (reservations included).
    pub(crate) fn count(&self) -> usize {
        let mut held = self.lock();
        held.purge(Instant::now());
        held.taken()
    }

    /// Reserves room for up to `wanted` messages, waiting until some frees; `None` when
    /// none did by `deadline`.
    pub(crate) async fn reserve(
        &self,
        wanted: usize,
        deadline: Instant,
    ) -> Option<Reservation<'_>> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before looking, so a release between the look and the wait wakes it.
            freed.as_mut().enable();
            let next_expiry = {
                let now = Instant::now();
                let mut held = self.lock();
                held.purge(now);
                let room = self.max.saturating_sub(held.taken());
                if room > 0 {
                    let count = room.min(wanted);
                    held.reserved += count;
                    return Some(Reservation {
                        in_flight: self,
                        count,
                    });
                }
                if now >= deadline {
                    return None;
                }
                held.until.values().min().copied()
            };
            let wake = next_expiry.map_or(deadline, |expiry| expiry.min(deadline));
            tokio::select! {
                () = &mut freed => {}
                () = tokio::time::sleep_until(wake) => {}
            }
        }
    }

    /// Forgets a message (acked): its room frees at once.
    pub(crate) fn release(&self, key: &MessageKey) {
        let removed = self.lock().until.remove(key).is_some();
        if removed {
            self.freed.notify_waiters();
        }
    }

    /// Moves the end of a message's invisible time (it is held again if it had expired).
    pub(crate) fn extend(&self, key: MessageKey, until: Instant) {
        self.lock().until.insert(key, until);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn key(offset: i64) -> MessageKey {
        ("b".into(), "T".into(), 0, offset)
    }

    // Proves the limit holds across reservations, an ack frees room at once and an
    // expired invisible time frees it without an ack.
    #[tokio::test]
    async fn room_frees_on_release_and_on_expiry() {
        let in_flight = InFlight::new(3);
        let now = Instant::now();
        let first = in_flight.reserve(2, now).await.unwrap();
        assert_eq!(first.count(), 2);
        let second = in_flight.reserve(5, now).await.unwrap();
        assert_eq!(second.count(), 1);
        assert!(in_flight.reserve(1, now).await.is_none());
        let long = now + Duration::from_secs(60);
        first.settle([(key(1), long), (key(2), long)]);
        second.settle([(key(3), now + Duration::from_millis(300))]);
        assert_eq!(in_flight.count(), 3);
        in_flight.release(&key(1));
        assert_eq!(in_flight.reserve(9, now).await.unwrap().count(), 1);
        in_flight.extend(key(1), long);
        // Full again: the wait ends when offset 3's invisible time ends, 300 ms in.
        let third = in_flight.reserve(9, now + Duration::from_secs(30)).await;
        assert_eq!(third.map(|r| r.count()), Some(1));
        let waited = now.elapsed();
        assert!(
            waited >= Duration::from_millis(300),
            "woke after {waited:?}"
        );
        assert!(waited < Duration::from_secs(10), "woke after {waited:?}");
    }

    // Proves a dropped reservation gives its room back.
    #[tokio::test]
    async fn dropped_reservations_give_room_back() {
        let in_flight = InFlight::new(1);
        let now = Instant::now();
        drop(in_flight.reserve(1, now).await.unwrap());
        assert_eq!(in_flight.count(), 0);
        assert!(in_flight.reserve(1, now).await.is_some());
    }
}
