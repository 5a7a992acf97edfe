//! The executor pool: one glommio `LocalExecutor` per shard, each on its own thread.
//!
//! Every builder option is set here explicitly from [`ExecutorOptions`] (never left to
//! glommio's defaults), so the values are visible in review and survive upstream changes.
//!
//! Memory note: each executor registers `io_memory_bytes` with io_uring, which counts against
//! the process's locked-memory limit (`ulimit -l`, often 8 MiB). The default here is small
//! (512 KiB) so that several executors fit in one process (a broker with a few shards plus an
//! embedded name server, or tests that start several servers); storage-heavy shards raise it.
//!
//! Placement: [`CpuPlacement::Pinned`] puts shard `i` on CPU `first_cpu + i` (thread-per-core);
//! [`CpuPlacement::Unbound`] lets the kernel schedule (tests, shared machines).

use std::future::Future;
use std::time::Duration;

use glommio::{LocalExecutorBuilder, Placement, PoolPlacement};
use thiserror::Error;

use crate::shard_id::{ShardId, SHARD_COUNT_MAX};

/// Default io_uring registered buffer per executor: small enough for several executors under
/// an 8 MiB memlock limit (see the module docs).
pub const IO_MEMORY_BYTES_DEFAULT: usize = 512 * 1024;
/// glommio refuses less than 64 KiB of I/O memory.
pub const IO_MEMORY_BYTES_MIN: usize = 64 * 1024;
/// Default io_uring submission depth: enough concurrent I/O for a shard's sockets and files.
pub const RING_DEPTH_DEFAULT: usize = 128;
/// Default preemption period: how long one task queue may run before others get a turn.
pub const PREEMPT_TIMER_DEFAULT: Duration = Duration::from_millis(10);

/// Builder options of one executor.
#[derive(Clone, Debug)]
pub struct ExecutorOptions {
    /// Thread name prefix; the shard number is appended.
    pub name: String,
    /// Bytes of I/O memory registered with io_uring (counts against `ulimit -l`).
    pub io_memory_bytes: usize,
    /// io_uring submission queue depth.
    pub ring_depth: usize,
    /// How often task queues are forced to yield to one another.
    pub preempt_timer: Duration,
    /// Busy-spin before parking the thread; zero parks at once (saves CPU on shared cores).
    pub spin_before_park: Duration,
}

impl Default for ExecutorOptions {
    fn default() -> ExecutorOptions {
        ExecutorOptions {
            name: "comet".to_owned(),
            io_memory_bytes: IO_MEMORY_BYTES_DEFAULT,
            ring_depth: RING_DEPTH_DEFAULT,
            preempt_timer: PREEMPT_TIMER_DEFAULT,
            spin_before_park: Duration::ZERO,
        }
    }
}

/// Where the shards' threads run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CpuPlacement {
    /// Not pinned: the kernel schedules the threads.
    Unbound,
    /// Shard `i` pinned to CPU `first_cpu + i`.
    Pinned {
        /// CPU of shard 0.
        first_cpu: usize,
    },
}

/// Shape of a pool.
#[derive(Clone, Debug)]
pub struct PoolConfig {
    /// Number of shards (executors), `1..=SHARD_COUNT_MAX`.
    pub shard_count: usize,
    /// Thread placement.
    pub placement: CpuPlacement,
    /// Options applied to every executor.
    pub executor: ExecutorOptions,
}

/// What a shard's start function learns about itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ShardContext {
    /// This shard.
    pub shard: ShardId,
    /// How many shards the pool has.
    pub shard_count: usize,
}

/// Failure to start or join an executor.
#[derive(Debug, Error)]
pub enum PoolError {
    /// The configuration is out of bounds.
    #[error("invalid pool configuration: {0}")]
    Config(String),
    /// glommio could not create the executor (io_uring setup, memlock, thread spawn).
    #[error("cannot start executor for {shard}: {message}")]
    Start {
        /// The shard that failed.
        shard: ShardId,
        /// glommio's description.
        message: String,
    },
    /// The executor's thread panicked.
    #[error("executor for {shard} panicked: {message}")]
    Panicked {
        /// The shard that failed.
        shard: ShardId,
        /// The panic message, when it is a string.
        message: String,
    },
}

fn validate(options: &ExecutorOptions) -> Result<(), PoolError> {
    if options.io_memory_bytes < IO_MEMORY_BYTES_MIN {
        return Err(PoolError::Config(format!(
            "io_memory_bytes {} is below {IO_MEMORY_BYTES_MIN}",
            options.io_memory_bytes
        )));
    }
    if options.ring_depth == 0 || options.preempt_timer.is_zero() {
        return Err(PoolError::Config(
            "ring_depth and preempt_timer must be positive".to_owned(),
        ));
    }
    Ok(())
}

fn builder(options: &ExecutorOptions, placement: Placement, name: &str) -> LocalExecutorBuilder {
    crate::allocator::tune_once();
    LocalExecutorBuilder::new(placement)
        .name(name)
        .io_memory(options.io_memory_bytes)
        .ring_depth(options.ring_depth)
        .preempt_timer(options.preempt_timer)
        .spin_before_park(options.spin_before_park)
        .record_io_latencies(false)
        // Blocking work (rare: config files at start-up) runs on one unpinned helper thread so
        // it never competes with a pinned shard for its core.
        .blocking_thread_pool_placement(PoolPlacement::Unbound(1))
        .detect_stalls(None)
}

fn placement_of(placement: CpuPlacement, shard: ShardId) -> Placement {
    match placement {
        CpuPlacement::Unbound => Placement::Unbound,
        CpuPlacement::Pinned { first_cpu } => Placement::Fixed(first_cpu + shard.index()),
    }
}

thread_local! {
    static CURRENT_SHARD: std::cell::Cell<Option<ShardContext>> =
        const { std::cell::Cell::new(None) };
}

/// The shard the calling thread runs, when it is an executor started by this module.
pub fn current_shard() -> Option<ShardContext> {
    CURRENT_SHARD.with(std::cell::Cell::get)
}

/// A running executor thread.
pub struct ShardHandle<T: Send + 'static> {
    shard: ShardId,
    handle: glommio::ExecutorJoinHandle<T>,
}

impl<T: Send + 'static> ShardHandle<T> {
    /// The shard this thread runs.
    pub fn shard(&self) -> ShardId {
        self.shard
    }

    /// Waits for the shard's start future to finish and returns its output.
    pub fn join(self) -> Result<T, PoolError> {
        let shard = self.shard;
        self.handle.join().map_err(|error| PoolError::Panicked {
            shard,
            message: error.to_string(),
        })
    }
}

/// Starts one executor on a new thread, running `make(context)` to completion on it.
pub fn spawn_shard<G, F, T>(
    options: &ExecutorOptions,
    placement: CpuPlacement,
    context: ShardContext,
    make: G,
) -> Result<ShardHandle<T>, PoolError>
where
    G: FnOnce(ShardContext) -> F + Send + 'static,
    F: Future<Output = T> + 'static,
    T: Send + 'static,
{
    validate(options)?;
    assert!(context.shard.index() < context.shard_count);
    let name = format!("{}-{}", options.name, context.shard.0);
    let builder = builder(options, placement_of(placement, context.shard), &name);
    let handle = builder
        .spawn(move || {
            CURRENT_SHARD.with(|current| current.set(Some(context)));
            make(context)
        })
        .map_err(|error| PoolError::Start {
            shard: context.shard,
            message: error.to_string(),
        })?;
    Ok(ShardHandle {
        shard: context.shard,
        handle,
    })
}

/// All executors of a pool.
pub struct Pool<T: Send + 'static> {
    shards: Vec<ShardHandle<T>>,
}

impl<T: Send + 'static> Pool<T> {
    /// Starts `config.shard_count` executors; shard `i` runs `make(ShardContext { shard: i })`.
    pub fn start<G, F>(config: &PoolConfig, make: G) -> Result<Pool<T>, PoolError>
    where
        G: Fn(ShardContext) -> F + Send + Clone + 'static,
        F: Future<Output = T> + 'static,
        T: Send + 'static,
    {
        if config.shard_count == 0 || config.shard_count > SHARD_COUNT_MAX {
            return Err(PoolError::Config(format!(
                "shard_count {} is outside 1..={SHARD_COUNT_MAX}",
                config.shard_count
            )));
        }
        let mut shards = Vec::with_capacity(config.shard_count);
        for index in 0..config.shard_count {
            let shard = ShardId(u16::try_from(index).expect("bounded by SHARD_COUNT_MAX"));
            let context = ShardContext {
                shard,
                shard_count: config.shard_count,
            };
            let make = make.clone();
            shards.push(spawn_shard(
                &config.executor,
                config.placement,
                context,
                make,
            )?);
        }
        Ok(Pool { shards })
    }

    /// Number of shards.
    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// Waits for every shard, in shard order.
    pub fn join(self) -> Vec<Result<T, PoolError>> {
        self.shards.into_iter().map(ShardHandle::join).collect()
    }
}

/// Runs `future` on a new executor on the calling thread (binaries with one shard, tests).
pub fn run_on_current_thread<F, T>(options: &ExecutorOptions, future: F) -> Result<T, PoolError>
where
    F: Future<Output = T>,
{
    validate(options)?;
    let shard = ShardId(0);
    let executor = builder(options, Placement::Unbound, &options.name)
        .make()
        .map_err(|error| PoolError::Start {
            shard,
            message: error.to_string(),
        })?;
    let context = ShardContext {
        shard,
        shard_count: 1,
    };
    let previous = CURRENT_SHARD.with(|current| current.replace(Some(context)));
    let output = executor.run(future);
    CURRENT_SHARD.with(|current| current.set(previous));
    Ok(output)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a pool starts one executor per shard, each sees its own id, and results come
    // back in shard order.
    #[test]
    fn pool_runs_every_shard() {
        let config = PoolConfig {
            shard_count: 3,
            placement: CpuPlacement::Unbound,
            executor: ExecutorOptions::default(),
        };
        let pool = Pool::start(&config, |context: ShardContext| async move {
            (context.shard, context.shard_count)
        })
        .unwrap();
        assert_eq!(pool.shard_count(), 3);
        let results: Vec<_> = pool.join().into_iter().map(Result::unwrap).collect();
        assert_eq!(
            results,
            vec![(ShardId(0), 3), (ShardId(1), 3), (ShardId(2), 3)]
        );
    }

    // Proves bad configurations are refused with a typed error instead of a glommio panic.
    #[test]
    fn bad_configuration_is_refused() {
        let config = PoolConfig {
            shard_count: 0,
            placement: CpuPlacement::Unbound,
            executor: ExecutorOptions::default(),
        };
        assert!(matches!(
            Pool::start(&config, |_| async {}),
            Err(PoolError::Config(_))
        ));
        let options = ExecutorOptions {
            io_memory_bytes: 1024,
            ..ExecutorOptions::default()
        };
        assert!(matches!(
            run_on_current_thread(&options, async {}),
            Err(PoolError::Config(_))
        ));
        assert_eq!(
            run_on_current_thread(&ExecutorOptions::default(), async { 7 }).unwrap(),
            7
        );
    }
}
