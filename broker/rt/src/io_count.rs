//! Completed I/O operations per executor thread (per shard), by kind, for the metrics
//! endpoint (docs/operations.md#metrics).
//!
//! glommio 0.9 counts no completions: its `IoStats` has successful file reads and writes,
//! opens and closes per ring, but no syncs, no sockets and no failures. So this crate counts
//! at its own seams ([`crate::io`], [`crate::net`]) every operation Comet hands to glommio,
//! once, when it completes (successfully or not). An operation refused before it reaches
//! glommio (the test fault injector) is not counted; glommio's own operations (timers,
//! readiness polls, its internal wake-ups) never pass these seams and are not counted.
//!
//! The counters are plain [`Cell`]s in a thread local: a shard is one thread, nothing else
//! writes them and only that thread reads them (it publishes them for a scrape), so an
//! operation costs one thread-local increment and no atomic.

use std::cell::Cell;

/// The kinds of operation counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum IoOp {
    /// Opening a file or a directory (io_uring `openat`).
    FileOpen,
    /// Closing a file or a directory (io_uring `close`).
    FileClose,
    /// A direct-I/O read (io_uring read).
    FileRead,
    /// A direct-I/O write, zero-filling included (io_uring write).
    FileWrite,
    /// fdatasync of a file, fsync of a directory (io_uring fsync).
    FileSync,
    /// Preallocation (io_uring `fallocate`).
    FileAllocate,
    /// A file's size (io_uring `statx`).
    FileStat,
    /// Setting a file's size (glommio runs it on its blocking helper thread).
    FileTruncate,
    /// Removing a file (glommio runs it on its blocking helper thread).
    FileRemove,
    /// A connection accepted (a non-blocking `accept`, or io_uring accept when none waits).
    SocketAccept,
    /// A connection made (io_uring connect).
    SocketConnect,
    /// A read from a socket (a non-blocking `recv` once the socket is readable; glommio
    /// waits for readability with an io_uring poll, which is not counted).
    SocketRecv,
    /// A write to a socket (a non-blocking `send`; an io_uring poll waits when it is full).
    SocketSend,
}

/// How many kinds there are.
pub const IO_OP_COUNT: usize = 13;

impl IoOp {
    /// Every kind, in label order.
    pub const ALL: [IoOp; IO_OP_COUNT] = [
        IoOp::FileOpen,
        IoOp::FileClose,
        IoOp::FileRead,
        IoOp::FileWrite,
        IoOp::FileSync,
        IoOp::FileAllocate,
        IoOp::FileStat,
        IoOp::FileTruncate,
        IoOp::FileRemove,
        IoOp::SocketAccept,
        IoOp::SocketConnect,
        IoOp::SocketRecv,
        IoOp::SocketSend,
    ];

    /// The metric label (`op`).
    pub fn label(self) -> &'static str {
        match self {
            IoOp::FileOpen => "file_open",
            IoOp::FileClose => "file_close",
            IoOp::FileRead => "file_read",
            IoOp::FileWrite => "file_write",
            IoOp::FileSync => "file_sync",
            IoOp::FileAllocate => "file_allocate",
            IoOp::FileStat => "file_stat",
            IoOp::FileTruncate => "file_truncate",
            IoOp::FileRemove => "file_remove",
            IoOp::SocketAccept => "socket_accept",
            IoOp::SocketConnect => "socket_connect",
            IoOp::SocketRecv => "socket_recv",
            IoOp::SocketSend => "socket_send",
        }
    }
}

thread_local! {
    static COMPLETED: [Cell<u64>; IO_OP_COUNT] = const { [const { Cell::new(0) }; IO_OP_COUNT] };
}

/// Counts one completed `op` on this thread.
#[inline]
pub(crate) fn completed(op: IoOp) {
    COMPLETED.with(|counts| {
        let count = &counts[op as usize];
        count.set(count.get().wrapping_add(1));
    });
}

/// Counts one completed `op` and hands `result` back: `done(IoOp::FileRead, read.await)`.
#[inline]
pub(crate) fn done<T>(op: IoOp, result: T) -> T {
    completed(op);
    result
}

/// Operations completed on one thread since it started, by kind.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct IoCompletions {
    /// Index: `IoOp as usize`, in the order of [`IoOp::ALL`].
    pub counts: [u64; IO_OP_COUNT],
}

impl IoCompletions {
    /// The count of `op`.
    pub fn get(&self, op: IoOp) -> u64 {
        self.counts[op as usize]
    }
}

/// The operations this thread (shard) completed since it started.
pub fn completions() -> IoCompletions {
    COMPLETED.with(|counts| IoCompletions {
        counts: std::array::from_fn(|index| counts[index].get()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the label order follows the enum (the counts index by it) and each kind
    // counts on its own thread only.
    #[test]
    fn counts_per_kind_and_thread() {
        for (index, op) in IoOp::ALL.iter().enumerate() {
            assert_eq!(*op as usize, index, "{op:?}");
        }
        let before = completions();
        completed(IoOp::FileSync);
        completed(IoOp::FileSync);
        completed(IoOp::SocketRecv);
        let after = completions();
        assert_eq!(after.get(IoOp::FileSync), before.get(IoOp::FileSync) + 2);
        assert_eq!(
            after.get(IoOp::SocketRecv),
            before.get(IoOp::SocketRecv) + 1
        );
        assert_eq!(after.get(IoOp::FileRead), before.get(IoOp::FileRead));
        let other = std::thread::spawn(|| completions().get(IoOp::FileSync))
            .join()
            .expect("the thread ran");
        assert_eq!(other, 0);
    }
}
