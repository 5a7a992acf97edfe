//! Typed cross-shard messaging with a reply path, over glommio's bounded channel mesh.
//!
//! Two full meshes are built per [`Mesh`]: one carries requests, one carries replies. Every
//! shard runs one receiver task per peer for each mesh. A call works like this:
//!
//! ```text
//!  source shard                                   target shard
//!  call(target, req) --Envelope{call_id, req}-->  handler(source, req).await
//!    pending[call_id] = oneshot                       |
//!  reply task <-------Reply{call_id, resp}------------+
//!    completes pending[call_id]
//! ```
//!
//! Channels are bounded (`capacity` per ordered pair of shards), so a busy target pushes back
//! on its callers instead of queueing without limit. A request that cannot be handed over is
//! returned to the caller ([`MeshError::Closed`]). When a target closes its end
//! ([`MeshPeer::close`], or drops its peer) while calls to it are in flight, those calls end
//! with [`MeshError::ReplyLost`]: the request may or may not have run. A target that stops
//! without closing cannot be noticed here, so callers that must not wait forever wrap the call
//! in [`crate::task_class::timeout`]. A call to the local shard runs the handler in place.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::time::Duration;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use glommio::channels::local_channel::{self, LocalSender};
use glommio::channels::shared_channel::{self, ConnectedReceiver, ConnectedSender};
use glommio::channels::shared_channel::{SharedReceiver, SharedSender};
use thiserror::Error;

use crate::pool::current_shard;
use crate::shard_id::ShardId;
use crate::sync::{race, Either};
use crate::task_class::{sleep, spawn, spawn_detached, TaskClass};

/// A boxed, non-`Send` future: what a mesh handler returns.
pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// The handler a shard runs for requests from other shards: `(source, request) -> response`.
pub type MeshHandler<Req, Resp> = Rc<dyn Fn(ShardId, Req) -> LocalBoxFuture<Resp>>;

/// A cross-shard hand-off that failed.
#[derive(Debug, Error)]
pub enum MeshError<Req> {
    /// The request was not delivered (mesh closed or target out of range); it comes back and
    /// the caller may retry or fail it.
    #[error("mesh closed: request not delivered")]
    Closed(Req),
    /// The target took the request but no reply arrived; it may or may not have run, so the
    /// caller must not retry blindly.
    #[error("the target shard dropped the reply")]
    ReplyLost,
    /// Joining the mesh failed (wrong peer count).
    #[error("cannot join the mesh")]
    Join,
}

struct Envelope<Req> {
    call_id: u64,
    /// The class the target runs the request's handler in (see [`MeshPeer::call_in`]).
    class: TaskClass,
    request: Req,
}

struct Reply<Resp> {
    call_id: u64,
    response: Resp,
}

/// The unjoined mesh; clone it into every shard's start function, then [`Mesh::join`] on
/// every shard of a [`crate::pool::Pool`] (joins wait for each other).
///
/// Every channel is created up front by [`Mesh::new`] on the calling thread; a shard takes its
/// row of senders and its column of receivers when it joins. (glommio's own `MeshBuilder`
/// shares a non-atomic `Rc` between threads, which we measured hanging joins; this mesh only
/// shares an `Arc<Mutex<_>>` of channel ends.)
///
/// A shard that joins early waits for the others on an arrival count, sleeping between looks,
/// and connects its channel ends only once every shard has arrived (a connect that waits for
/// its peer keeps glommio's executor from parking).
pub struct Mesh<Req: Send + 'static, Resp: Send + 'static> {
    slots: Arc<Mutex<Slots<Req, Resp>>>,
    /// Shards that have entered [`Mesh::join`].
    arrived: Arc<AtomicUsize>,
    shard_count: usize,
}

impl<Req: Send + 'static, Resp: Send + 'static> Clone for Mesh<Req, Resp> {
    fn clone(&self) -> Self {
        Mesh {
            slots: self.slots.clone(),
            arrived: self.arrived.clone(),
            shard_count: self.shard_count,
        }
    }
}

/// Channel ends not yet taken, indexed `[source][target]`.
struct Slots<Req: Send + 'static, Resp: Send + 'static> {
    request_senders: Vec<Vec<Option<SharedSender<Envelope<Req>>>>>,
    request_receivers: Vec<Vec<Option<SharedReceiver<Envelope<Req>>>>>,
    reply_senders: Vec<Vec<Option<SharedSender<Reply<Resp>>>>>,
    reply_receivers: Vec<Vec<Option<SharedReceiver<Reply<Resp>>>>>,
}

type Grid<T> = (
    Vec<Vec<Option<SharedSender<T>>>>,
    Vec<Vec<Option<SharedReceiver<T>>>>,
);

fn grid<T: Send + 'static>(shard_count: usize, capacity: usize) -> Grid<T> {
    let mut senders = Vec::with_capacity(shard_count);
    let mut receivers = Vec::with_capacity(shard_count);
    for source in 0..shard_count {
        let mut sender_row = Vec::with_capacity(shard_count);
        let mut receiver_row = Vec::with_capacity(shard_count);
        for target in 0..shard_count {
            if source == target {
                sender_row.push(None);
                receiver_row.push(None);
            } else {
                let (sender, receiver) = shared_channel::new_bounded(capacity);
                sender_row.push(Some(sender));
                receiver_row.push(Some(receiver));
            }
        }
        senders.push(sender_row);
        receivers.push(receiver_row);
    }
    (senders, receivers)
}

fn take_column<T>(grid: &mut [Vec<Option<T>>], column: usize) -> Vec<Option<T>> {
    grid.iter_mut().map(|row| row[column].take()).collect()
}

/// The longest sleep between two looks at the arrival count: how late, at most, a waiting
/// shard notices that the last one has arrived.
const ARRIVAL_POLL_MAX: Duration = Duration::from_millis(2);

/// The first sleep between two looks at the arrival count; it doubles up to
/// [`ARRIVAL_POLL_MAX`], so shards that start together connect almost at once.
const ARRIVAL_POLL_FIRST: Duration = Duration::from_micros(100);

/// Waits, parked on a timer between looks, until `arrived` reaches `shard_count`.
///
/// A shard must not wait inside glommio's shared-channel connect: a pending connect registers
/// a "connection waker" with its reactor, and glommio 0.9's reactor wakes every connection
/// waker on every turn (`SharedChannels::process_shared_channels`), the woken connect registers
/// again, and the executor counts a wake-up each turn and never parks. A shard that joined
/// while another was still opening its store (start-up does that first, and recovery after a
/// crash can take seconds) so ran its core flat out, taking CPU from the shard it waited for on
/// a small machine. Waiting here instead costs one timer wake-up per look.
async fn wait_for_arrivals(arrived: &AtomicUsize, shard_count: usize) {
    let mut pause = ARRIVAL_POLL_FIRST;
    while arrived.load(Ordering::Acquire) < shard_count {
        sleep(pause).await;
        pause = (pause * 2).min(ARRIVAL_POLL_MAX);
    }
}

/// Polls `future` at least every millisecond until it completes.
///
/// glommio's shared-channel connect registers its waker with its own reactor only, and the
/// other side connecting does not wake it; an idle executor then parks forever and the join
/// hangs (we saw this with glommio's MeshBuilder too). Re-polling on a short timer while
/// joining (once, at start-up) makes the connect see its peer.
async fn repolled<F: Future>(future: F) -> F::Output {
    let mut future = pin!(future);
    loop {
        let outcome = race(future.as_mut(), sleep(Duration::from_millis(1))).await;
        if let Either::Left(value) = outcome {
            return value;
        }
    }
}

/// Connects channel ends concurrently (a connect waits for the other side's).
async fn connect_all<T: Send + 'static>(
    senders: Vec<Option<SharedSender<T>>>,
    receivers: Vec<Option<SharedReceiver<T>>>,
) -> (
    Vec<Option<ConnectedSender<T>>>,
    Vec<Option<ConnectedReceiver<T>>>,
) {
    let sender_tasks: Vec<_> = senders
        .into_iter()
        .map(|end| end.map(|end| spawn(TaskClass::Request, repolled(end.connect()))))
        .collect();
    let receiver_tasks: Vec<_> = receivers
        .into_iter()
        .map(|end| end.map(|end| spawn(TaskClass::Request, repolled(end.connect()))))
        .collect();
    let mut connected_senders = Vec::with_capacity(sender_tasks.len());
    for task in sender_tasks {
        connected_senders.push(match task {
            Some(task) => Some(task.await),
            None => None,
        });
    }
    let mut connected_receivers = Vec::with_capacity(receiver_tasks.len());
    for task in receiver_tasks {
        connected_receivers.push(match task {
            Some(task) => Some(task.await),
            None => None,
        });
    }
    (connected_senders, connected_receivers)
}

/// Calls awaiting replies: call id -> (target shard index, reply slot).
type Pending<Resp> = Rc<RefCell<HashMap<u64, (usize, LocalSender<Resp>)>>>;

/// One shard's end of a joined mesh.
pub struct MeshPeer<Req: Send + 'static, Resp: Send + 'static> {
    shard: ShardId,
    shard_count: usize,
    senders: Vec<Option<ConnectedSender<Envelope<Req>>>>,
    reply_senders: Rc<Vec<Option<ConnectedSender<Reply<Resp>>>>>,
    pending: Pending<Resp>,
    gone_peers: GonePeers,
    next_call_id: Cell<u64>,
    handler: MeshHandler<Req, Resp>,
}

/// Peers whose reply stream has ended (they closed or stopped): calls to them fail at once.
type GonePeers = Rc<RefCell<std::collections::HashSet<usize>>>;

impl<Req: Send + 'static, Resp: Send + 'static> Mesh<Req, Resp> {
    /// A mesh between `shard_count` shards with `capacity` slots per ordered pair.
    pub fn new(shard_count: usize, capacity: usize) -> Mesh<Req, Resp> {
        assert!(shard_count >= 1);
        assert!(capacity >= 1);
        let (request_senders, request_receivers) = grid(shard_count, capacity);
        let (reply_senders, reply_receivers) = grid(shard_count, capacity);
        Mesh {
            slots: Arc::new(Mutex::new(Slots {
                request_senders,
                request_receivers,
                reply_senders,
                reply_receivers,
            })),
            arrived: Arc::new(AtomicUsize::new(0)),
            shard_count,
        }
    }

    /// Joins from the current shard (of a [`crate::pool::Pool`]), starting the receiver tasks
    /// that run `handler` for incoming requests and complete this shard's calls.
    pub async fn join(
        self,
        handler: MeshHandler<Req, Resp>,
    ) -> Result<Rc<MeshPeer<Req, Resp>>, MeshError<Req>> {
        let context = current_shard().ok_or(MeshError::Join)?;
        if context.shard_count != self.shard_count {
            return Err(MeshError::Join);
        }
        let me = context.shard.index();
        let taken = {
            let mut slots = self.slots.lock().unwrap_or_else(|e| e.into_inner());
            let request_receivers = take_column(&mut slots.request_receivers, me);
            let reply_receivers = take_column(&mut slots.reply_receivers, me);
            (
                std::mem::take(&mut slots.request_senders[me]),
                request_receivers,
                std::mem::take(&mut slots.reply_senders[me]),
                reply_receivers,
            )
        };
        let (request_senders, request_receivers, reply_senders, reply_receivers) = taken;
        if request_senders.len() != self.shard_count {
            return Err(MeshError::Join);
        }
        self.arrived.fetch_add(1, Ordering::AcqRel);
        wait_for_arrivals(&self.arrived, self.shard_count).await;
        let (senders, receivers) = connect_all(request_senders, request_receivers).await;
        let (reply_senders, reply_receivers) = connect_all(reply_senders, reply_receivers).await;
        let pending: Pending<Resp> = Rc::new(RefCell::new(HashMap::new()));
        let gone_peers: GonePeers = Rc::default();
        let reply_senders = Rc::new(reply_senders);
        serve_requests(receivers, reply_senders.clone(), handler.clone());
        serve_replies(reply_receivers, pending.clone(), gone_peers.clone());
        Ok(Rc::new(MeshPeer {
            shard: context.shard,
            shard_count: self.shard_count,
            senders,
            reply_senders,
            pending,
            gone_peers,
            next_call_id: Cell::new(0),
            handler,
        }))
    }
}

fn serve_requests<Req: Send + 'static, Resp: Send + 'static>(
    receivers: Vec<Option<ConnectedReceiver<Envelope<Req>>>>,
    reply_senders: Rc<Vec<Option<ConnectedSender<Reply<Resp>>>>>,
    handler: MeshHandler<Req, Resp>,
) {
    let streams = receivers.into_iter().enumerate();
    for (source, receiver) in streams.filter_map(|(index, end)| end.map(|end| (index, end))) {
        let reply_senders = reply_senders.clone();
        let handler = handler.clone();
        spawn_detached(TaskClass::Request, async move {
            let source_shard = ShardId(u16::try_from(source).expect("bounded shard count"));
            while let Some(envelope) = receiver.recv().await {
                let reply_senders = reply_senders.clone();
                let response = handler(source_shard, envelope.request);
                let call_id = envelope.call_id;
                spawn_detached(envelope.class, async move {
                    let reply = Reply {
                        call_id,
                        response: response.await,
                    };
                    // A closed reply channel means the caller's shard is stopping; nothing waits.
                    if let Some(Some(sender)) = reply_senders.get(source) {
                        let _ = sender.send(reply).await;
                    }
                });
            }
        });
    }
}

fn serve_replies<Resp: Send + 'static>(
    receivers: Vec<Option<ConnectedReceiver<Reply<Resp>>>>,
    pending: Pending<Resp>,
    gone_peers: GonePeers,
) {
    let streams = receivers.into_iter().enumerate();
    for (peer, receiver) in streams.filter_map(|(index, end)| end.map(|end| (index, end))) {
        let pending = pending.clone();
        let gone_peers = gone_peers.clone();
        spawn_detached(TaskClass::Request, async move {
            while let Some(reply) = receiver.recv().await {
                let waiter = pending.borrow_mut().remove(&reply.call_id);
                if let Some((_, waiter)) = waiter {
                    // The caller may have given up (dropped its future); that is fine.
                    let _ = waiter.try_send(reply.response);
                }
            }
            // The peer is gone: its outstanding calls will never be answered. Dropping their
            // reply slots wakes the callers with ReplyLost.
            gone_peers.borrow_mut().insert(peer);
            pending
                .borrow_mut()
                .retain(|_, (target, _)| *target != peer);
        });
    }
}

impl<Req: Send + 'static, Resp: Send + 'static> MeshPeer<Req, Resp> {
    /// This shard.
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// Number of shards in the mesh.
    pub fn shard_count(&self) -> usize {
        self.shard_count
    }

    /// Calls this shard has sent that await their reply, per target shard (index = target):
    /// queued between the shards or running on the target. Counted from the calls' own
    /// bookkeeping, so nothing is added to a call's path.
    pub fn pending_calls(&self) -> Vec<u64> {
        let mut pending = vec![0u64; self.shard_count];
        for (target, _) in self.pending.borrow().values() {
            if let Some(count) = pending.get_mut(*target) {
                *count += 1;
            }
        }
        pending
    }

    /// Sends `request` to `target` and waits for its response; the target runs it as a
    /// request ([`TaskClass::Request`]).
    pub async fn call(&self, target: ShardId, request: Req) -> Result<Resp, MeshError<Req>> {
        self.call_in(TaskClass::Request, target, request).await
    }

    /// Sends `request` to `target`, which runs its handler in `class`, and waits for its
    /// response. On this shard the handler runs in place, in the caller's task (and class).
    pub async fn call_in(
        &self,
        class: TaskClass,
        target: ShardId,
        request: Req,
    ) -> Result<Resp, MeshError<Req>> {
        if target == self.shard {
            return Ok((self.handler)(self.shard, request).await);
        }
        let gone = self.gone_peers.borrow().contains(&target.index());
        if target.index() >= self.shard_count || gone {
            return Err(MeshError::Closed(request));
        }
        let call_id = self.next_call_id.get();
        self.next_call_id.set(call_id.wrapping_add(1));
        let (sender, receiver) = local_channel::new_bounded(1);
        let previous = self
            .pending
            .borrow_mut()
            .insert(call_id, (target.index(), sender));
        assert!(previous.is_none(), "call ids are unique");
        let envelope = Envelope {
            call_id,
            class,
            request,
        };
        let Some(Some(sender)) = self.senders.get(target.index()) else {
            self.pending.borrow_mut().remove(&call_id);
            return Err(MeshError::Closed(envelope.request));
        };
        if let Err(error) = sender.send(envelope).await {
            self.pending.borrow_mut().remove(&call_id);
            return match error {
                glommio::GlommioError::Closed(glommio::ResourceType::Channel(envelope)) => {
                    Err(MeshError::Closed(envelope.request))
                }
                _ => Err(MeshError::ReplyLost),
            };
        }
        let response = receiver.recv().await;
        self.pending.borrow_mut().remove(&call_id);
        response.ok_or(MeshError::ReplyLost)
    }

    /// Closes this shard's outgoing channels: peers' receiver tasks end and their calls to
    /// this shard fail (`ReplyLost` for calls in flight, `Closed` afterwards). A stopping shard
    /// calls this, and dropping the peer does it too.
    pub fn close(&self) {
        for sender in self.senders.iter().flatten() {
            sender.close();
        }
        for sender in self.reply_senders.iter().flatten() {
            sender.close();
        }
    }
}

impl<Req: Send + 'static, Resp: Send + 'static> Drop for MeshPeer<Req, Resp> {
    fn drop(&mut self) {
        self.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{CpuPlacement, ExecutorOptions, Pool, PoolConfig};

    /// A pool of `shard_count` executors on no particular CPU.
    fn unbound_pool(shard_count: usize) -> PoolConfig {
        PoolConfig {
            shard_count,
            placement: CpuPlacement::Unbound,
            executor: ExecutorOptions::default(),
        }
    }

    /// Counts this shard as done, then keeps it serving calls until every shard is.
    async fn all_done(done: &std::sync::atomic::AtomicUsize, shard_count: usize) {
        done.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        while done.load(std::sync::atomic::Ordering::Acquire) < shard_count {
            crate::task_class::sleep(std::time::Duration::from_millis(2)).await;
        }
    }

    // Proves every shard can call every shard (itself included) and gets the response its
    // target computed, with the source shard passed to the handler.
    #[test]
    #[allow(clippy::cast_possible_truncation)]
    fn calls_cross_shards_and_reply() {
        let shard_count = 3;
        let mesh: Mesh<u64, (u16, u16, u64)> = Mesh::new(shard_count, 4);
        let config = unbound_pool(shard_count);
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let pool = Pool::start(&config, move |context| {
            let mesh = mesh.clone();
            let done = done.clone();
            async move {
                let me = context.shard.0;
                let handler: MeshHandler<u64, (u16, u16, u64)> = Rc::new(move |source, value| {
                    Box::pin(async move { (source.0, me, value * 2) })
                });
                let peer = mesh.join(handler).await.unwrap();
                let mut answers = Vec::new();
                for target in 0..3u16 {
                    let value = u64::from(me * 10 + target);
                    let answer = peer.call(ShardId(target), value).await.unwrap();
                    answers.push(answer);
                }
                // Keep serving until every shard has had its answers.
                all_done(&done, shard_count).await;
                answers
            }
        })
        .unwrap();
        for (source, result) in pool.join().into_iter().enumerate() {
            let answers = result.unwrap();
            for (target, answer) in answers.into_iter().enumerate() {
                let value = (source * 10 + target) as u64;
                assert_eq!(answer, (source as u16, target as u16, value * 2));
            }
        }
    }

    // Proves a call's handler runs on its target in the class the caller named: call_in(Pull)
    // in Pull, call in Request.
    #[test]
    fn calls_run_in_the_class_they_name() {
        let shard_count = 2;
        let mesh: Mesh<(), (bool, bool)> = Mesh::new(shard_count, 4);
        let config = unbound_pool(shard_count);
        let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let pool = Pool::start(&config, move |context| {
            let mesh = mesh.clone();
            let done = done.clone();
            async move {
                let handler: MeshHandler<(), (bool, bool)> = Rc::new(move |_, ()| {
                    Box::pin(async move {
                        let pull = crate::task_class::runs_in(TaskClass::Pull);
                        (pull, crate::task_class::runs_in(TaskClass::Request))
                    })
                });
                let peer = mesh.join(handler).await.unwrap();
                let other = ShardId(1 - context.shard.0);
                let pulled = peer.call_in(TaskClass::Pull, other, ()).await.unwrap();
                let requested = peer.call(other, ()).await.unwrap();
                all_done(&done, shard_count).await;
                (pulled, requested)
            }
        })
        .unwrap();
        for result in pool.join() {
            let (pulled, requested) = result.unwrap();
            assert_eq!(pulled, (true, false), "call_in(Pull) runs in Pull");
            assert_eq!(requested, (false, true), "call runs in Request");
        }
    }

    /// CPU time the calling thread has used so far.
    fn thread_cpu_time() -> Duration {
        let mut now = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime writes one timespec into the one it is given.
        let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
        assert_eq!(status, 0, "the thread CPU clock is readable");
        let seconds = u64::try_from(now.tv_sec).unwrap();
        let nanos = u32::try_from(now.tv_nsec).unwrap();
        Duration::new(seconds, nanos)
    }

    // Proves a shard that joins early parks while it waits: shard 1 joins 2 s after shard 0,
    // and shard 0's thread uses little CPU over that wait (a join that waits inside glommio's
    // connect runs its core flat out), yet its join ends soon after shard 1 arrives and the
    // joined mesh carries calls both ways.
    #[test]
    fn early_joiner_parks_until_the_last_arrives() {
        let shard_count = 2;
        let late_by = Duration::from_secs(2);
        let mesh: Mesh<u64, u64> = Mesh::new(shard_count, 4);
        let config = unbound_pool(shard_count);
        let late_arrival = Arc::new(Mutex::new(None));
        let done = Arc::new(AtomicUsize::new(0));
        let pool = Pool::start(&config, move |context| {
            let mesh = mesh.clone();
            let late_arrival = late_arrival.clone();
            let done = done.clone();
            async move {
                let me = context.shard.0;
                let handler: MeshHandler<u64, u64> =
                    Rc::new(move |_, value| Box::pin(async move { value + u64::from(me) }));
                if me == 1 {
                    sleep(late_by).await;
                    *late_arrival.lock().unwrap() = Some(crate::clock::monotonic_now());
                }
                let wall_before = crate::clock::monotonic_now();
                let cpu_before = thread_cpu_time();
                let peer = mesh.join(handler).await.unwrap();
                let cpu_used = thread_cpu_time() - cpu_before;
                let joined_at = crate::clock::monotonic_now();
                let wall_waited = joined_at - wall_before;
                let other = ShardId(1 - me);
                let answer = peer.call(other, 100).await.unwrap();
                done.fetch_add(1, Ordering::AcqRel);
                while done.load(Ordering::Acquire) < shard_count {
                    sleep(Duration::from_millis(2)).await;
                }
                let late_arrival = late_arrival.lock().unwrap().expect("shard 1 arrived");
                (answer, cpu_used, wall_waited, joined_at, late_arrival)
            }
        })
        .unwrap();
        let results: Vec<_> = pool.join().into_iter().map(Result::unwrap).collect();
        assert_eq!(results[0].0, 101, "shard 1 answered shard 0");
        assert_eq!(results[1].0, 100, "shard 0 answered shard 1");
        let (_, cpu_used, wall_waited, joined_at, late_arrival) = results[0];
        assert!(
            joined_at >= late_arrival,
            "shard 0 joined before shard 1 arrived"
        );
        // Shard 0 starts its join about when shard 1 starts its sleep.
        assert!(
            wall_waited > late_by / 2,
            "shard 0 waited only {wall_waited:?}"
        );
        assert!(
            cpu_used < wall_waited / 5,
            "shard 0 used {cpu_used:?} of CPU over {wall_waited:?} of waiting"
        );
        // Generous for a loaded machine; the wait looks at least every 2 ms.
        let after_last = joined_at - late_arrival;
        assert!(
            after_last < Duration::from_millis(500),
            "shard 0 joined {after_last:?} after shard 1 arrived"
        );
    }
}
