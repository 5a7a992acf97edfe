//! Shard-local synchronisation: the one set of wake-up primitives the shards' tasks use.
//!
//! Everything here lives on one shard thread, so nothing is `Send` and nothing locks: a
//! future checks its condition and registers its waker in one synchronous step, so a wake-up
//! cannot be missed between the two. Waiters re-check their condition when polled, which
//! makes spurious wake-ups harmless.
//!
//! * [`WakerList`]: wakers waiting for "something changed"; [`WakerList::until`] waits for a
//!   condition.
//! * [`Notify`]: a level-triggered flag: [`Notify::notify`] sets it, [`Notify::notified`]
//!   waits for it and clears it.
//! * [`PositionWaiters`]: wakers ordered by the position they wait for (durable log ends).
//! * [`oneshot`]: a slot one side fills once and the other awaits.
//! * [`race`]: the first of two futures to finish; [`sleep_unless`]: a sleep a condition cuts
//!   short.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// Wakers waiting for "something changed".
#[derive(Default)]
pub struct WakerList {
    wakers: RefCell<Vec<Waker>>,
}

impl WakerList {
    /// Registers `waker` to be woken by the next [`WakerList::wake_all`] (once, however often
    /// the same task registers).
    pub fn register(&self, waker: &Waker) {
        let mut wakers = self.wakers.borrow_mut();
        if !wakers.iter().any(|known| known.will_wake(waker)) {
            wakers.push(waker.clone());
        }
    }

    /// Wakes every registered waker and forgets them.
    pub fn wake_all(&self) {
        // Taken out first: a woken waker may register again while we iterate.
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for waker in wakers {
            waker.wake();
        }
    }

    /// Resolves once `ready()` holds, re-checking it each time this list is woken (whoever
    /// makes it true must wake the list).
    pub fn until<F: Fn() -> bool>(&self, ready: F) -> Until<'_, F> {
        Until { list: self, ready }
    }
}

/// See [`WakerList::until`].
pub struct Until<'l, F> {
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

/// A level-triggered wake-up: [`Notify::notify`] sets a flag, [`Notify::notified`] waits for
/// it and clears it. Several tasks may wait; all are woken, and the first to run consumes
/// the flag.
#[derive(Default)]
pub struct Notify {
    notified: Cell<bool>,
    waiters: WakerList,
}

impl Notify {
    /// Sets the flag and wakes every waiter.
    pub fn notify(&self) {
        self.notified.set(true);
        self.waiters.wake_all();
    }

    /// Completes once the flag is set (at once if it already is), clearing it.
    pub async fn notified(&self) {
        poll_fn(|cx| {
            if self.notified.replace(false) {
                return Poll::Ready(());
            }
            self.waiters.register(cx.waker());
            Poll::Pending
        })
        .await;
    }
}

/// Wakers ordered by the position they wait for. Positions usually arrive in ascending order
/// (appends are assigned positions in order), which keeps registration a push at the back.
#[derive(Default)]
pub struct PositionWaiters {
    waiters: RefCell<VecDeque<(u64, Waker)>>,
}

impl PositionWaiters {
    /// Registers `waker` for when the position reaches `end`.
    ///
    /// A waker already waiting for the same position is not added again: a future polled
    /// again before its position is reached would otherwise leave one more clone each time,
    /// and the runtime's count of a task's waker clones is small (16 bits).
    pub fn register(&self, end: u64, waker: &Waker) {
        let mut waiters = self.waiters.borrow_mut();
        let at = waiters.partition_point(|(known, _)| *known <= end);
        let already = waiters
            .range(..at)
            .rev()
            .take_while(|(known, _)| *known == end)
            .any(|(_, known)| known.will_wake(waker));
        if already {
            return;
        }
        waiters.insert(at, (end, waker.clone()));
    }

    /// How many wakers wait.
    pub fn len(&self) -> usize {
        self.waiters.borrow().len()
    }

    /// True when no waker waits.
    pub fn is_empty(&self) -> bool {
        self.waiters.borrow().is_empty()
    }

    /// Wakes every waiter whose position is at or below `reached`.
    pub fn wake_up_to(&self, reached: u64) {
        let mut woken = Vec::new();
        {
            let mut waiters = self.waiters.borrow_mut();
            while let Some((end, _)) = waiters.front() {
                if *end > reached {
                    break;
                }
                if let Some((_, waker)) = waiters.pop_front() {
                    woken.push(waker);
                }
            }
        }
        for waker in woken {
            waker.wake();
        }
    }

    /// Wakes every waiter (failure or shutdown: they re-check and find out why).
    pub fn wake_all(&self) {
        let waiters = std::mem::take(&mut *self.waiters.borrow_mut());
        for (_, waker) in waiters {
            waker.wake();
        }
    }
}

struct SlotState<T> {
    value: Option<T>,
    sender_gone: bool,
    waker: Option<Waker>,
}

/// The sending end of a [`oneshot`] slot.
pub struct OneshotSender<T> {
    state: Rc<RefCell<SlotState<T>>>,
}

/// The receiving end of a [`oneshot`] slot.
pub struct OneshotReceiver<T> {
    state: Rc<RefCell<SlotState<T>>>,
}

/// A slot the sender fills once and the receiver awaits; dropping the sender without sending
/// ends the wait with `None`.
pub fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let state = Rc::new(RefCell::new(SlotState {
        value: None,
        sender_gone: false,
        waker: None,
    }));
    let sender = OneshotSender {
        state: Rc::clone(&state),
    };
    (sender, OneshotReceiver { state })
}

impl<T> OneshotSender<T> {
    /// Fills the slot; the receiver is woken when `self` drops right after.
    pub fn send(self, value: T) {
        self.state.borrow_mut().value = Some(value);
    }
}

impl<T> Drop for OneshotSender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut state = self.state.borrow_mut();
            state.sender_gone = true;
            state.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> OneshotReceiver<T> {
    /// The value, or `None` when the sender was dropped without sending.
    pub async fn recv(self) -> Option<T> {
        poll_fn(|cx| {
            let mut state = self.state.borrow_mut();
            if let Some(value) = state.value.take() {
                return Poll::Ready(Some(value));
            }
            if state.sender_gone {
                return Poll::Ready(None);
            }
            state.waker = Some(cx.waker().clone());
            Poll::Pending
        })
        .await
    }
}

/// Which of two raced futures finished first.
#[derive(Debug, PartialEq, Eq)]
pub enum Either<A, B> {
    /// The first (`left`) future's output.
    Left(A),
    /// The second (`right`) future's output.
    Right(B),
}

/// Polls both futures, `left` first (so it wins a tie), and returns the first output; the
/// other future is dropped.
pub async fn race<A: Future, B: Future>(left: A, right: B) -> Either<A::Output, B::Output> {
    futures_lite::future::or(async { Either::Left(left.await) }, async {
        Either::Right(right.await)
    })
    .await
}

/// Sleeps for `duration`, or until `list` is woken with `stop()` true (a store closing, so
/// its background tasks end with it instead of sleeping on).
pub async fn sleep_unless<F: Fn() -> bool>(list: &WakerList, stop: F, duration: Duration) {
    race(list.until(stop), crate::local::sleep(duration)).await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::local::{run_local, spawn, yield_now};

    /// Lets every spawned task run until it parks.
    async fn settle() {
        for _ in 0..4 {
            yield_now().await;
        }
    }

    // Proves a notify before the wait is kept (level-triggered), consumed by one wait, and
    // that a later notify wakes a parked waiter.
    #[test]
    fn notify_is_level_triggered() {
        run_local("sync-notify", async {
            let notify = Rc::new(Notify::default());
            notify.notify();
            notify.notified().await;
            let woken = Rc::new(Cell::new(false));
            let task = spawn({
                let (notify, woken) = (Rc::clone(&notify), Rc::clone(&woken));
                async move {
                    notify.notified().await;
                    woken.set(true);
                }
            });
            settle().await;
            assert!(!woken.get(), "the first notify was consumed");
            notify.notify();
            task.await;
            assert!(woken.get());
        });
    }

    // Proves `until` resolves only once its condition holds and the list is woken.
    #[test]
    fn until_waits_for_the_condition() {
        run_local("sync-until", async {
            let list = Rc::new(WakerList::default());
            let level = Rc::new(Cell::new(0));
            let task = spawn({
                let (list, level) = (Rc::clone(&list), Rc::clone(&level));
                async move { list.until(|| level.get() >= 2).await }
            });
            level.set(1);
            list.wake_all();
            settle().await;
            level.set(2);
            list.wake_all();
            task.await;
            assert_eq!(level.get(), 2);
        });
    }

    // Proves a waker polled again for the same position is registered once, and a second
    // task waiting for that position still is.
    #[test]
    fn position_waiters_register_a_waker_once_per_position() {
        run_local("sync-positions-once", async {
            let waiters = Rc::new(PositionWaiters::default());
            let polls = Rc::new(Cell::new(0u32));
            let reached = Rc::new(Cell::new(0u64));
            let mut tasks = Vec::new();
            for _ in 0..2 {
                let (waiters, polls, reached) =
                    (Rc::clone(&waiters), Rc::clone(&polls), Rc::clone(&reached));
                tasks.push(spawn(async move {
                    poll_fn(|cx| {
                        polls.set(polls.get() + 1);
                        if reached.get() >= 10 {
                            return Poll::Ready(());
                        }
                        waiters.register(10, cx.waker());
                        waiters.register(10, cx.waker());
                        // Woken at once, as a spurious wake-up would: polled again.
                        if polls.get() < 100 {
                            cx.waker().wake_by_ref();
                        }
                        Poll::Pending
                    })
                    .await;
                }));
            }
            while polls.get() < 100 {
                settle().await;
            }
            assert_eq!(waiters.len(), 2, "one entry per task, however often polled");
            reached.set(10);
            waiters.wake_up_to(10);
            for task in tasks {
                task.await;
            }
            assert!(waiters.is_empty());
        });
    }

    // Proves position waiters wake in order and only up to the position reached.
    #[test]
    fn position_waiters_wake_up_to_the_position() {
        run_local("sync-positions", async {
            let waiters = Rc::new(PositionWaiters::default());
            let reached = Rc::new(Cell::new(0u64));
            let woken = Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for end in [30u64, 10, 20] {
                let (waiters, reached, woken) =
                    (Rc::clone(&waiters), Rc::clone(&reached), Rc::clone(&woken));
                tasks.push(spawn(async move {
                    poll_fn(|cx| {
                        if reached.get() >= end {
                            return Poll::Ready(());
                        }
                        waiters.register(end, cx.waker());
                        Poll::Pending
                    })
                    .await;
                    woken.borrow_mut().push(end);
                }));
            }
            settle().await;
            reached.set(20);
            waiters.wake_up_to(20);
            settle().await;
            assert_eq!(*woken.borrow(), [10, 20]);
            reached.set(30);
            waiters.wake_up_to(30);
            for task in tasks {
                task.await;
            }
            assert_eq!(*woken.borrow(), [10, 20, 30]);
        });
    }

    // Proves the one-shot slot delivers a sent value, and `None` when the sender is dropped.
    #[test]
    fn oneshot_delivers_or_reports_a_dropped_sender() {
        run_local("sync-oneshot", async {
            let (sender, receiver) = oneshot();
            let task = spawn(receiver.recv());
            settle().await;
            sender.send(7);
            assert_eq!(task.await, Some(7));
            let (sender, receiver) = oneshot::<u8>();
            drop(sender);
            assert_eq!(receiver.recv().await, None);
        });
    }

    // Proves race returns the first future to finish, and `left` on a tie.
    #[test]
    fn race_returns_the_first_to_finish() {
        run_local("sync-race", async {
            let never = std::future::pending::<()>();
            assert_eq!(race(never, async { 2 }).await, Either::Right(2));
            assert_eq!(race(async { 1 }, async { 2 }).await, Either::Left(1));
            let list = WakerList::default();
            let started = crate::clock::monotonic_now();
            sleep_unless(&list, || true, Duration::from_secs(60)).await;
            assert!(started.elapsed() < Duration::from_secs(30));
        });
    }
}
