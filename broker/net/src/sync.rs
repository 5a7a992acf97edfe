//! Single-thread synchronisation used by a connection's tasks: a wake-up flag, a one-shot
//! slot, and a race of two futures. All live on one shard; nothing here is `Send`.

use std::cell::RefCell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// A level-triggered wake-up: `notify` sets a flag, `notified` waits for it and clears it.
/// Several waiters may wait; all are woken.
#[derive(Default)]
pub(crate) struct Notify {
    state: RefCell<(bool, Vec<Waker>)>,
}

impl Notify {
    pub(crate) fn notify(&self) {
        let waiters = {
            let mut state = self.state.borrow_mut();
            state.0 = true;
            std::mem::take(&mut state.1)
        };
        for waker in waiters {
            waker.wake();
        }
    }

    pub(crate) async fn notified(&self) {
        poll_fn(|cx| {
            let mut state = self.state.borrow_mut();
            if state.0 {
                state.0 = false;
                return Poll::Ready(());
            }
            if !state.1.iter().any(|waker| waker.will_wake(cx.waker())) {
                state.1.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await;
    }
}

struct SlotState<T> {
    value: Option<T>,
    sender_gone: bool,
    waker: Option<Waker>,
}

/// The sending end of a one-shot slot.
pub(crate) struct OneshotSender<T> {
    state: Rc<RefCell<SlotState<T>>>,
}

/// The receiving end of a one-shot slot.
pub(crate) struct OneshotReceiver<T> {
    state: Rc<RefCell<SlotState<T>>>,
}

pub(crate) fn oneshot<T>() -> (OneshotSender<T>, OneshotReceiver<T>) {
    let state = Rc::new(RefCell::new(SlotState {
        value: None,
        sender_gone: false,
        waker: None,
    }));
    (
        OneshotSender {
            state: state.clone(),
        },
        OneshotReceiver { state },
    )
}

impl<T> OneshotSender<T> {
    pub(crate) fn send(self, value: T) {
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
    pub(crate) async fn recv(self) -> Option<T> {
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
pub(crate) enum Either<A, B> {
    Left(A),
    Right(B),
}

/// Polls both futures, `left` first, and returns the first output; the other is dropped.
pub(crate) async fn race<A: Future, B: Future>(left: A, right: B) -> Either<A::Output, B::Output> {
    let mut left = pin!(left);
    let mut right = pin!(right);
    poll_fn(|cx| {
        if let Poll::Ready(value) = left.as_mut().poll(cx) {
            return Poll::Ready(Either::Left(value));
        }
        if let Poll::Ready(value) = right.as_mut().poll(cx) {
            return Poll::Ready(Either::Right(value));
        }
        Poll::Pending
    })
    .await
}
