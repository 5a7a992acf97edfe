//! Shard-local task helpers: spawn, sleep, yield, and a one-shard executor for tools,
//! tests and benchmarks. Crates other than `comet-rt` use these instead of naming glommio.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

/// A spawned shard-local task; awaiting it yields its output. Dropping it cancels the task
/// unless [`LocalTask::detach`] was called.
pub struct LocalTask<T> {
    inner: glommio::Task<T>,
}

impl<T> LocalTask<T> {
    /// Lets the task run to completion on its own.
    pub fn detach(self) {
        self.inner.detach();
    }
}

impl<T> Future for LocalTask<T> {
    type Output = T;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        Pin::new(&mut self.inner).poll(cx)
    }
}

/// Spawns `future` on the current shard's executor (current task queue).
pub fn spawn<T: 'static>(future: impl Future<Output = T> + 'static) -> LocalTask<T> {
    LocalTask {
        inner: glommio::spawn_local(future),
    }
}

/// Waits `duration` without blocking the shard.
pub async fn sleep(duration: Duration) {
    glommio::timer::sleep(duration).await;
}

/// Yields to other tasks if this one has run for its time slice; call it in long loops.
pub async fn yield_if_needed() {
    glommio::yield_if_needed().await;
}

/// Yields to other tasks unconditionally.
pub async fn yield_now() {
    glommio::executor().yield_now().await;
}

/// Runs `future` to completion on a fresh one-shard executor on this thread (unpinned).
///
/// For tests, tools and benchmarks; the broker uses the shard pool instead.
pub fn run_local<T>(name: &str, future: impl Future<Output = T>) -> T {
    crate::allocator::tune_once();
    let executor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .name(name)
        // No pre-registered io memory: the memlock limit of test machines is small, and
        // direct-I/O buffers fall back to ordinary aligned allocations.
        .io_memory(0)
        .ring_depth(128)
        .preempt_timer(Duration::from_millis(100))
        .make()
        .unwrap_or_else(|error| panic!("cannot build a local executor: {error}"));
    executor.run(async move {
        let output = future.await;
        // Files dropped as `future` ended are closed by the reactor's next I/O cycle, which
        // never comes once the executor returns: one short sleep gives it that cycle, so a
        // process running executors one after another does not leak descriptors.
        sleep(Duration::from_millis(1)).await;
        output
    })
}
