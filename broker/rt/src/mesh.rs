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
//! returned to the caller ([`MeshError::Closed`]); a reply that never comes (the target shut
//! down after taking the request) is [`MeshError::ReplyLost`], after which the request may or
//! may not have run. A call to the local shard runs the handler in place.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;

use glommio::channels::channel_mesh::{Full, MeshBuilder, Receivers, Senders};
use glommio::channels::local_channel::{self, LocalSender};
use thiserror::Error;

use crate::shard_id::ShardId;
use crate::task_class::{spawn_detached, TaskClass};

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
    request: Req,
}

struct Reply<Resp> {
    call_id: u64,
    response: Resp,
}

/// The unjoined mesh; clone it into every shard's start function, then [`Mesh::join`] on
/// every shard (joins wait for each other).
pub struct Mesh<Req: Send + 'static, Resp: Send + 'static> {
    requests: MeshBuilder<Envelope<Req>, Full>,
    replies: MeshBuilder<Reply<Resp>, Full>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Clone for Mesh<Req, Resp> {
    fn clone(&self) -> Self {
        Mesh {
            requests: self.requests.clone(),
            replies: self.replies.clone(),
        }
    }
}

type Pending<Resp> = Rc<RefCell<HashMap<u64, LocalSender<Resp>>>>;

/// One shard's end of a joined mesh.
pub struct MeshPeer<Req: Send + 'static, Resp: Send + 'static> {
    shard: ShardId,
    shard_count: usize,
    senders: Senders<Envelope<Req>>,
    pending: Pending<Resp>,
    next_call_id: Cell<u64>,
    handler: MeshHandler<Req, Resp>,
}

impl<Req: Send + 'static, Resp: Send + 'static> Mesh<Req, Resp> {
    /// A mesh between `shard_count` shards with `capacity` slots per ordered pair.
    pub fn new(shard_count: usize, capacity: usize) -> Mesh<Req, Resp> {
        assert!(shard_count >= 1);
        assert!(capacity >= 1);
        Mesh {
            requests: MeshBuilder::full(shard_count, capacity),
            replies: MeshBuilder::full(shard_count, capacity),
        }
    }

    /// Joins from the current shard, starting the receiver tasks that run `handler` for
    /// incoming requests and complete this shard's calls.
    pub async fn join(
        self,
        handler: MeshHandler<Req, Resp>,
    ) -> Result<Rc<MeshPeer<Req, Resp>>, MeshError<Req>> {
        let shard_count = self.requests.nr_peers();
        let (senders, receivers) = self.requests.join().await.map_err(|_| MeshError::Join)?;
        let (reply_senders, reply_receivers) =
            self.replies.join().await.map_err(|_| MeshError::Join)?;
        assert_eq!(senders.peer_id(), reply_senders.peer_id());
        let shard = ShardId(u16::try_from(senders.peer_id()).map_err(|_| MeshError::Join)?);
        let pending: Pending<Resp> = Rc::new(RefCell::new(HashMap::new()));
        serve_requests(receivers, Rc::new(reply_senders), handler.clone());
        serve_replies(reply_receivers, pending.clone());
        Ok(Rc::new(MeshPeer {
            shard,
            shard_count,
            senders,
            pending,
            next_call_id: Cell::new(0),
            handler,
        }))
    }
}

fn serve_requests<Req: Send + 'static, Resp: Send + 'static>(
    mut receivers: Receivers<Envelope<Req>>,
    reply_senders: Rc<Senders<Reply<Resp>>>,
    handler: MeshHandler<Req, Resp>,
) {
    for (source, receiver) in receivers.streams() {
        let reply_senders = reply_senders.clone();
        let handler = handler.clone();
        spawn_detached(TaskClass::Request, async move {
            let source_shard = ShardId(u16::try_from(source).expect("bounded shard count"));
            while let Some(envelope) = receiver.recv().await {
                let reply_senders = reply_senders.clone();
                let response = handler(source_shard, envelope.request);
                let call_id = envelope.call_id;
                spawn_detached(TaskClass::Request, async move {
                    let reply = Reply {
                        call_id,
                        response: response.await,
                    };
                    // A closed reply mesh means the caller's shard is stopping; nothing waits.
                    let _ = reply_senders.send_to(source, reply).await;
                });
            }
        });
    }
}

fn serve_replies<Resp: Send + 'static>(
    mut receivers: Receivers<Reply<Resp>>,
    pending: Pending<Resp>,
) {
    for (_, receiver) in receivers.streams() {
        let pending = pending.clone();
        spawn_detached(TaskClass::Request, async move {
            while let Some(reply) = receiver.recv().await {
                let waiter = pending.borrow_mut().remove(&reply.call_id);
                if let Some(waiter) = waiter {
                    // The caller may have given up (dropped its future); that is fine.
                    let _ = waiter.try_send(reply.response);
                }
            }
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

    /// Sends `request` to `target` and waits for its response.
    pub async fn call(&self, target: ShardId, request: Req) -> Result<Resp, MeshError<Req>> {
        if target == self.shard {
            return Ok((self.handler)(self.shard, request).await);
        }
        if target.index() >= self.shard_count {
            return Err(MeshError::Closed(request));
        }
        let call_id = self.next_call_id.get();
        self.next_call_id.set(call_id.wrapping_add(1));
        let (sender, receiver) = local_channel::new_bounded(1);
        assert!(self.pending.borrow_mut().insert(call_id, sender).is_none());
        let envelope = Envelope { call_id, request };
        if let Err(error) = self.senders.send_to(target.index(), envelope).await {
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

    /// Closes this shard's outgoing request channels; peers' receiver tasks then end.
    pub fn close(&self) {
        self.senders.close();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::{CpuPlacement, ExecutorOptions, Pool, PoolConfig};

    // Proves every shard can call every shard (itself included) and gets the response its
    // target computed, with the source shard passed to the handler.
    #[test]
    #[allow(clippy::cast_possible_truncation)]
    fn calls_cross_shards_and_reply() {
        let shard_count = 3;
        let mesh: Mesh<u64, (u16, u16, u64)> = Mesh::new(shard_count, 4);
        let config = PoolConfig {
            shard_count,
            placement: CpuPlacement::Unbound,
            executor: ExecutorOptions::default(),
        };
        let pool = Pool::start(&config, move |context| {
            let mesh = mesh.clone();
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
                // Stay alive until every peer has had its answers.
                crate::task_class::sleep(std::time::Duration::from_millis(200)).await;
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
}
