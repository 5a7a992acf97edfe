//! The dispatch table: request code → async processor.
//!
//! A processor receives a [`RequestContext`] (peer address, shard, a handle to the connection
//! so it can answer later or send requests of its own) and the request, and returns the
//! response, or `None` when there is nothing to send now (one-way requests, or a processor
//! that answers later through [`crate::ConnectionHandle::send`], such as a long poll).
//! The connection never answers one-way requests, whatever the processor returns. A code with
//! no processor goes to the fallback processor when one is set (the Java server's default
//! processor: the broker's ACL check runs there for codes it does not serve), else is
//! answered `REQUEST_CODE_NOT_SUPPORTED` the way the Java server does.

use std::collections::HashMap;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;

use comet_proto::{RemotingCommand, RequestCode};
use comet_rt::task_class::TaskClass;
use comet_rt::ShardId;

use crate::connection::ConnectionHandle;

/// A boxed, non-`Send` future.
pub type LocalBoxFuture<T> = Pin<Box<dyn Future<Output = T>>>;

/// What a processor is given besides the request.
#[derive(Clone)]
pub struct RequestContext {
    /// The connection the request arrived on.
    pub connection: ConnectionHandle,
    /// The shard running the connection.
    pub shard: ShardId,
}

impl RequestContext {
    /// The remote address of the requester.
    pub fn peer_addr(&self) -> SocketAddr {
        self.connection.peer_addr()
    }
}

/// A request processor.
pub type Processor =
    Rc<dyn Fn(RequestContext, RemotingCommand) -> LocalBoxFuture<Option<RemotingCommand>>>;

/// Request code → processor, built once per shard before serving.
#[derive(Clone, Default)]
pub struct DispatchTable {
    processors: HashMap<i32, Processor>,
    fallback: Option<Processor>,
    /// Codes whose requests run in a task class of their own instead of the connection's
    /// (see [`DispatchTable::set_class`]).
    classes: HashMap<i32, TaskClass>,
}

impl DispatchTable {
    /// An empty table: every code is unsupported.
    pub fn new() -> DispatchTable {
        DispatchTable::default()
    }

    /// Registers `processor` for `code`, replacing an earlier one.
    pub fn register(&mut self, code: RequestCode, processor: Processor) {
        self.processors.insert(code.value(), processor);
    }

    /// Registers an async function for `code`.
    pub fn register_fn<F, Fut>(&mut self, code: RequestCode, function: F)
    where
        F: Fn(RequestContext, RemotingCommand) -> Fut + 'static,
        Fut: Future<Output = Option<RemotingCommand>> + 'static,
    {
        let processor: Processor =
            Rc::new(move |context, request| Box::pin(function(context, request)));
        self.register(code, processor);
    }

    /// Sets the processor of every code without one of its own (Java's default processor).
    pub fn set_fallback(&mut self, processor: Processor) {
        self.fallback = Some(processor);
    }

    /// Runs the requests of `code` in `class` rather than in the connection's class: reads
    /// that may stream hundreds of MB/s (pulls of a backlog) in a queue with fewer shares, so
    /// that sends arriving meanwhile are served first.
    pub fn set_class(&mut self, code: RequestCode, class: TaskClass) {
        self.classes.insert(code.value(), class);
    }

    /// The task class the requests of a raw code run in, when it is not the connection's.
    pub fn class_of(&self, code: i32) -> Option<TaskClass> {
        self.classes.get(&code).copied()
    }

    /// The processor for a raw code.
    pub fn get(&self, code: i32) -> Option<&Processor> {
        self.processors.get(&code)
    }

    /// Number of registered codes.
    pub fn len(&self) -> usize {
        self.processors.len()
    }

    /// True when nothing is registered.
    pub fn is_empty(&self) -> bool {
        self.processors.is_empty()
    }

    /// Runs the processor for `request`, or builds the not-supported answer.
    pub(crate) async fn dispatch(
        &self,
        context: RequestContext,
        request: RemotingCommand,
    ) -> Option<RemotingCommand> {
        match self
            .processors
            .get(&request.code)
            .or(self.fallback.as_ref())
        {
            Some(processor) => processor(context, request).await,
            None => {
                crate::log_request!(
                    log::Level::Debug,
                    &request,
                    "request code {} not supported (peer {}, opaque {})",
                    request.code,
                    context.peer_addr(),
                    request.opaque
                );
                Some(RemotingCommand::not_supported_to(&request))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a code given its own class reports it, and every other code keeps the
    // connection's (none of its own).
    #[test]
    fn codes_keep_the_class_they_were_given() {
        let mut table = DispatchTable::new();
        assert_eq!(table.class_of(RequestCode::PULL_MESSAGE.value()), None);
        table.set_class(RequestCode::PULL_MESSAGE, TaskClass::Pull);
        assert_eq!(
            table.class_of(RequestCode::PULL_MESSAGE.value()),
            Some(TaskClass::Pull)
        );
        assert_eq!(table.class_of(RequestCode::SEND_MESSAGE.value()), None);
    }
}
