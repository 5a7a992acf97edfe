//! Tiny shard-local wake-up primitives (single-threaded, no locks): a list of wakers that a
//! state change wakes. Futures re-check their condition when polled, so spurious wake-ups are
//! harmless and a missed registration cannot happen (registration and the check are one
//! synchronous step on the shard thread).

use std::cell::RefCell;
use std::future::Future;
use std::pin::{pin, Pin};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Wakers waiting for "something changed".
#[derive(Default)]
pub(crate) struct WakerList {
    wakers: RefCell<Vec<Waker>>,
}

impl WakerList {
    /// Registers `waker` to be woken by the next [`WakerList::wake_all`].
    pub(crate) fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.borrow_mut();
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    /// Wakes every registered waker.
    pub(crate) fn wake_all(&self) {
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resolves once `ready()` holds, re-checking it each time this list is woken (whoever
    /// makes it true must wake the list).
    pub(crate) fn until<F: Fn() -> bool>(&self, ready: F) -> Until<'_, F> {
        Until { list: self, ready }
    }
}

/// See [`WakerList::until`].
pub(crate) struct Until<'l, F> {
    list: &'l WakerList,
    ready: F,
}

impl<F: Fn() -> bool> Future for Until<'_, F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if (self.ready)() {
            return Poll::Ready(());
        }
        self.list.register(cx.waker());
        Poll::Pending
    }
}

/// Sleeps for `duration`, or until `list` is woken with `stop()` true (a store closing, so
/// its background tasks end with it instead of sleeping on with its files).
pub(crate) async fn sleep_unless<F: Fn() -> bool>(list: &WakerList, stop: F, duration: Duration) {
    let mut sleep = pin!(comet_rt::local::sleep(duration));
    let mut stopped = pin!(list.until(stop));
    std::future::poll_fn(|cx| {
        if stopped.as_mut().poll(cx).is_ready() || sleep.as_mut().poll(cx).is_ready() {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    })
    .await;
}

/// Wakers ordered by the log position they wait for; positions arrive in ascending order
/// because appends are assigned positions in order.
#[derive(Default)]
pub(crate) struct PositionWaiters {
    waiters: RefCell<std::collections::VecDeque<(u64, Waker)>>,
}

impl PositionWaiters {
    /// Registers `waker` for when the durable position reaches `end`.
    pub(crate) fn register(&self, end: u64, waker: &Waker) {
        let mut waiters = self.waiters.borrow_mut();
        let position = waiters.partition_point(|(known, _)| *known <= end);
        waiters.insert(position, (end, waker.clone()));
    }

    /// Wakes every waiter whose position is at or below `durable`.
    pub(crate) fn wake_up_to(&self, durable: u64) {
        let mut woken = Vec::new();
        {
            let mut waiters = self.waiters.borrow_mut();
            while waiters.front().is_some_and(|(end, _)| *end <= durable) {
                woken.push(waiters.pop_front().expect("front exists").1);
            }
        }
        for waker in woken {
            waker.wake();
        }
    }

    /// Wakes every waiter (failure or shutdown).
    pub(crate) fn wake_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for (_, waker) in waiters {
            waker.wake();
        }
    }
}
