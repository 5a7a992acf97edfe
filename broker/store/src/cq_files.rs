//! Consume-queue files open for writing: a small pool per store, bounded by
//! `StoreConfig::cq_open_files_max`, instead of one open file per queue. A queue's file is
//! open only while a flush writes it, unless the pool still holds it from an earlier flush
//! (least recently used out first, closed). File descriptors therefore do not grow with the
//! number of queues: a store with ten thousand queues holds at most the bound, and a store
//! with a few busy queues keeps them open and pays no open per flush
//! (docs/architecture.md#consume-queues).
//!
//! [`flush_queue`] is the single place a queue's entries are written, shared by the lazy
//! flush (`maintenance`, through the pool) and recovery (`recovery`, `queue_repair`: files
//! opened for the duration of the flush and closed after it).
//!
//! The lazy flush writes up to [`QUEUE_FLUSHES_IN_FLIGHT_MAX`] queues at once
//! ([`run_bounded`]): each queue's fdatasync (and a new queue's directory syncs) wait on the
//! disk, and io_uring takes many at once, where one after the other ten thousand new queues
//! kept the checkpoint minutes behind (perf/README.md#many-queues-issue-25). The checkpoint
//! still comes after every one of them has synced.

use std::cell::{Cell, RefCell, RefMut};
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use comet_rt::io::{DirectFile, FaultInjector, OpenMode};
use futures::stream::{FuturesUnordered, StreamExt};

use crate::consume_queue::{ConsumeQueue, FileWrite, FlushFile};
use crate::cq_cache::CqCache;
use crate::error::{setup_error, StoreError};

struct OpenFile {
    file: Rc<DirectFile>,
    used_at: u64,
}

/// The pool (see the module docs). Shard-local.
pub(crate) struct CqFiles {
    bound: usize,
    clock: u64,
    files: HashMap<PathBuf, OpenFile>,
    /// Paths by last use, oldest first.
    by_use: BTreeMap<u64, PathBuf>,
    /// Most files held at once (tests and metrics check it stays within the bound).
    peak: usize,
}

impl CqFiles {
    /// An empty pool holding at most `bound` files (at least one).
    pub(crate) fn new(bound: usize) -> CqFiles {
        assert!(bound > 0, "the pool holds at least one file");
        CqFiles {
            bound,
            clock: 0,
            files: HashMap::new(),
            by_use: BTreeMap::new(),
            peak: 0,
        }
    }

    /// Files held now.
    pub(crate) fn len(&self) -> usize {
        self.files.len()
    }

    /// Most files held at once.
    pub(crate) fn peak(&self) -> usize {
        self.peak
    }

    /// The bound.
    pub(crate) fn bound(&self) -> usize {
        self.bound
    }

    /// The open file at `path`, taken out of the pool (given back with [`CqFiles::put`]).
    fn take(&mut self, path: &Path) -> Option<Rc<DirectFile>> {
        let held = self.files.remove(path)?;
        self.by_use.remove(&held.used_at);
        Some(held.file)
    }

    /// Keeps `file` open as the file at `path`; returns the files it pushes out of the pool,
    /// for the caller to close.
    fn put(&mut self, path: PathBuf, file: Rc<DirectFile>) -> Vec<Rc<DirectFile>> {
        let mut evicted: Vec<Rc<DirectFile>> = self.take(&path).into_iter().collect();
        while self.files.len() >= self.bound {
            let Some((_, oldest)) = self.by_use.pop_first() else {
                break;
            };
            evicted.extend(self.files.remove(&oldest).map(|held| held.file));
        }
        self.clock += 1;
        self.by_use.insert(self.clock, path.clone());
        let held = OpenFile {
            file,
            used_at: self.clock,
        };
        self.files.insert(path, held);
        self.peak = self.peak.max(self.files.len());
        assert!(self.files.len() <= self.bound, "pool within its bound");
        evicted
    }

    /// Takes out the file at `path` if held (its file is being deleted: the descriptor
    /// must not keep its blocks allocated).
    pub(crate) fn forget(&mut self, path: &Path) -> Option<Rc<DirectFile>> {
        self.take(path)
    }

    /// Takes out every file (the store closes).
    pub(crate) fn drain(&mut self) -> Vec<Rc<DirectFile>> {
        self.by_use.clear();
        self.files.drain().map(|(_, held)| held.file).collect()
    }
}

/// Closes `files` (those no flush still uses; the others close when it drops them).
/// A failed close is logged: every write to them was synced before they left the pool.
pub(crate) async fn close_files(files: Vec<Rc<DirectFile>>) {
    for file in files {
        if let Ok(file) = Rc::try_unwrap(file) {
            let path = file.path().to_path_buf();
            if let Err(error) = file.close().await {
                log::warn!("closing consume-queue file {}: {error}", path.display());
            }
        }
    }
}

/// Creates a derived file (a queue file, a key-index file) at `path`, and its directories,
/// durably: the file and a new directory (and its two parents: a queue's and its topic's)
/// survive a crash.
pub(crate) async fn create_file(
    path: &Path,
    faults: &Option<Rc<FaultInjector>>,
) -> Result<DirectFile, StoreError> {
    let dir = path.parent().expect("queue files live in a directory");
    let created_dir = !dir.exists();
    std::fs::create_dir_all(dir).map_err(|error| setup_error(dir, error))?;
    let file = DirectFile::open(path, OpenMode::CreateReadWrite, faults.clone()).await?;
    comet_rt::io::sync_directory(dir).await?;
    if created_dir {
        for parent in dir.ancestors().skip(1).take(2) {
            comet_rt::io::sync_directory(parent).await?;
        }
    }
    Ok(file)
}

/// Writes `writes` and syncs every file they touched.
pub(crate) async fn write_and_sync(writes: Vec<FileWrite>) -> Result<(), StoreError> {
    let mut files: Vec<Rc<DirectFile>> = Vec::new();
    for write in writes {
        write.file.write_at(write.buffer, write.position).await?;
        if !files.iter().any(|file| Rc::ptr_eq(file, &write.file)) {
            files.push(write.file);
        }
    }
    for file in files {
        file.fdatasync().await?;
    }
    Ok(())
}

/// Where a flush gets its files: the store's pool, or none (recovery: each file is opened
/// for the flush and closed after it).
pub(crate) struct FlushFiles<'s> {
    /// The pool, if any.
    pub(crate) pool: Option<&'s RefCell<CqFiles>>,
    /// Fault injection of the store's files (tests).
    pub(crate) faults: &'s Option<Rc<FaultInjector>>,
    /// Files opened or created so far.
    pub(crate) opened: Cell<u64>,
}

impl FlushFiles<'_> {
    /// Most queues flushed at once through these files: up to
    /// [`QUEUE_FLUSHES_IN_FLIGHT_MAX`], but no more than the pool holds, so the files the
    /// flushes hold outside the pool stay within its bound too; one without a pool.
    pub(crate) fn flushes_in_flight_max(&self) -> usize {
        self.pool.map_or(1, |pool| {
            pool.borrow().bound().min(QUEUE_FLUSHES_IN_FLIGHT_MAX)
        })
    }

    /// Most files one step of a flush holds open: the pool's bound shared among the flushes
    /// that may run at once (a queue with more files to write takes more steps).
    fn step_files_max(&self) -> usize {
        self.pool.map_or(2, |pool| {
            (pool.borrow().bound() / self.flushes_in_flight_max()).max(1)
        })
    }

    /// Opens (or creates) `needed`, from the pool when it holds them.
    async fn open(
        &self,
        needed: Vec<FlushFile>,
    ) -> Result<Vec<(FlushFile, Rc<DirectFile>)>, StoreError> {
        let mut opened = Vec::with_capacity(needed.len());
        for file in needed {
            let pooled = self
                .pool
                .and_then(|pool| pool.borrow_mut().take(&file.path));
            let handle = match pooled {
                Some(handle) => handle,
                None if file.exists => {
                    let handle =
                        DirectFile::open(&file.path, OpenMode::ReadWrite, self.faults.clone());
                    Rc::new(handle.await?)
                }
                None => Rc::new(create_file(&file.path, self.faults).await?),
            };
            opened.push((file, handle));
        }
        Ok(opened)
    }

    /// Gives the files of a step back to the pool, or closes them without one.
    async fn release(&self, opened: Vec<(FlushFile, Rc<DirectFile>)>) {
        let mut closing = Vec::new();
        for (file, handle) in opened {
            match self.pool {
                Some(pool) => closing.extend(pool.borrow_mut().put(file.path, handle)),
                None => closing.push(handle),
            }
        }
        close_files(closing).await;
    }
}

/// Writes the entries of the queue `queue` gives access to that were dispatched before the
/// call (and zeros over stale ones), creating its files as needed, and syncs them; entries
/// dispatched meanwhile may wait for the next flush. No borrow of the queue is held across
/// an await. On error the files of the step are closed and the caller stops the store.
pub(crate) async fn flush_queue<'q>(
    queue: impl Fn() -> RefMut<'q, ConsumeQueue>,
    files: &FlushFiles<'_>,
    cache: Option<&RefCell<CqCache>>,
) -> Result<(), StoreError> {
    let target = queue().max_offset();
    loop {
        let needed = {
            let queue = queue();
            if !queue.is_dirty() || (queue.flushed_offset() >= target && !queue.has_stale()) {
                return Ok(());
            }
            queue.flush_files(files.step_files_max())
        };
        let opened = files.open(needed).await?;
        let (writes, reached) = {
            let mut queue = queue();
            for (file, _) in opened.iter().filter(|(file, _)| !file.exists) {
                queue.mark_created(file.start);
            }
            let handles: Vec<(u64, Rc<DirectFile>)> = opened
                .iter()
                .map(|(file, handle)| (file.start, Rc::clone(handle)))
                .collect();
            queue.plan_flush(&handles)
        };
        let progress = !writes.is_empty();
        let written = write_and_sync(writes).await;
        files.release(opened).await;
        written?;
        {
            let mut cache = cache.map(RefCell::borrow_mut);
            queue().finish_flush(reached, cache.as_deref_mut());
        }
        if !progress {
            return Ok(());
        }
    }
}

/// Most queue flushes a lazy flush runs at once: enough to keep the disk's queue full (their
/// fdatasyncs are what they wait on), few enough that a flush holds a bounded number of
/// files and buffers.
pub(crate) const QUEUE_FLUSHES_IN_FLIGHT_MAX: usize = 64;

/// Runs `jobs` in the calling task, at most `in_flight_max` at once, started in order.
/// After a job fails no other starts; the first error is returned once every started job
/// has ended, so none is left half done (a dropped flush would leave a queue's planned
/// writes unfinished while the store still runs).
///
/// A job is polled only when its own waker fired. Polling every running job on each wake-up
/// is not harmless here: a glommio I/O source keeps a clone of the task's waker per poll
/// until its operation completes, and a task's waker count is a 16-bit figure, so 64 slow
/// flushes re-polled on every completion overflowed it (the runtime aborts the process).
pub(crate) async fn run_bounded<F, E>(
    jobs: impl IntoIterator<Item = F>,
    in_flight_max: usize,
) -> Result<(), E>
where
    F: Future<Output = Result<(), E>>,
{
    assert!(in_flight_max > 0, "at least one job runs");
    let mut waiting = jobs.into_iter();
    let mut running = FuturesUnordered::new();
    let mut first_error: Option<E> = None;
    loop {
        while first_error.is_none() && running.len() < in_flight_max {
            match waiting.next() {
                Some(job) => running.push(job),
                None => break,
            }
        }
        match running.next().await {
            None => return first_error.map_or(Ok(()), Err),
            Some(Ok(())) => {}
            Some(Err(error)) => {
                first_error.get_or_insert(error);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::Pin;
    use std::task::{Poll, Waker};

    /// One of several differently shaped jobs, boxed.
    type BoxedJob<'a> = Pin<Box<dyn Future<Output = Result<(), ()>> + 'a>>;

    // Proves the pool stays within its bound, pushes out the least recently used file, and
    // gives a file back once.
    #[test]
    fn pool_is_bounded_and_least_recently_used_goes() {
        comet_rt::local::run_local("cq-files-test", async {
            let dir = comet_test_support::TempDir::new("cq-files");
            let mut pool = CqFiles::new(2);
            let open = |name: &str| {
                let path = dir.path().join(name);
                async move {
                    let file = DirectFile::open(&path, OpenMode::CreateReadWrite, None).await;
                    (path, Rc::new(file.expect("create")))
                }
            };
            let (a, file_a) = open("a").await;
            let (b, file_b) = open("b").await;
            let (c, file_c) = open("c").await;
            assert!(pool.put(a.clone(), file_a).is_empty());
            assert!(pool.put(b.clone(), file_b).is_empty());
            let used = pool.take(&a).expect("held");
            assert!(
                pool.put(a.clone(), used).is_empty(),
                "given back, not evicted"
            );
            let evicted = pool.put(c.clone(), file_c);
            assert_eq!(evicted.len(), 1);
            assert_eq!(evicted[0].path(), b.as_path(), "b was used least recently");
            close_files(evicted).await;
            assert_eq!(pool.len(), 2);
            assert_eq!(pool.peak(), 2);
            assert!(pool.take(&b).is_none());
            assert!(pool.forget(&a).is_some());
            assert_eq!(pool.drain().len(), 1);
            assert_eq!(pool.len(), 0);
        });
    }

    /// A job for [`run_bounded`] tests: counts itself in and out of `in_flight` (keeping the
    /// most seen in `peak`) around a short sleep, then fails if `fails`.
    async fn job(
        in_flight: &Cell<usize>,
        peak: &Cell<usize>,
        ended: &Cell<usize>,
        fails: bool,
    ) -> Result<(), usize> {
        in_flight.set(in_flight.get() + 1);
        peak.set(peak.get().max(in_flight.get()));
        comet_rt::local::sleep(std::time::Duration::from_millis(2)).await;
        in_flight.set(in_flight.get() - 1);
        ended.set(ended.get() + 1);
        if fails {
            return Err(ended.get());
        }
        Ok(())
    }

    // Proves run_bounded runs every job, as many at once as allowed and never more.
    #[test]
    fn run_bounded_runs_all_jobs_within_the_bound() {
        comet_rt::local::run_local("run-bounded", async {
            let (in_flight, peak, ended) = (Cell::new(0), Cell::new(0), Cell::new(0));
            let jobs = (0..50).map(|_| job(&in_flight, &peak, &ended, false));
            assert_eq!(run_bounded(jobs, 8).await, Ok(()));
            assert_eq!(ended.get(), 50);
            assert_eq!(peak.get(), 8, "eight jobs ran at once");
            assert_eq!(in_flight.get(), 0);
            let no_jobs = (0..0).map(|_| job(&in_flight, &peak, &ended, false));
            assert_eq!(run_bounded(no_jobs, 8).await, Ok(()));
        });
    }

    /// A job that stays pending, counting its polls, until `open` is set (then it is woken
    /// through the waker it left in `waker`).
    async fn gated_job(open: &Cell<bool>, waker: &RefCell<Option<Waker>>, polls: &Cell<u32>) {
        std::future::poll_fn(|cx| {
            polls.set(polls.get() + 1);
            if open.get() {
                return Poll::Ready(());
            }
            *waker.borrow_mut() = Some(cx.waker().clone());
            Poll::Pending
        })
        .await;
    }

    // Proves a running job is polled again only when its own waker fired, not on every other
    // job's wake-up: each poll of a pending glommio I/O keeps one more clone of the waker, and
    // a task's waker count overflows past 32,767 (see run_bounded).
    #[test]
    fn run_bounded_polls_only_the_jobs_that_were_woken() {
        comet_rt::local::run_local("run-bounded-wakes", async {
            let (open, polls) = (Cell::new(false), Cell::new(0));
            let waker: RefCell<Option<Waker>> = RefCell::new(None);
            let busy_rounds = 200;
            let gate = &open;
            let gate_waker = &waker;
            let busy = async move {
                for _ in 0..busy_rounds {
                    comet_rt::local::yield_now().await;
                }
                gate.set(true);
                if let Some(waker) = gate_waker.borrow_mut().take() {
                    waker.wake();
                }
                Ok::<(), ()>(())
            };
            let jobs: Vec<BoxedJob<'_>> = vec![
                Box::pin(async {
                    gated_job(&open, &waker, &polls).await;
                    Ok(())
                }),
                Box::pin(busy),
            ];
            assert_eq!(run_bounded(jobs, 2).await, Ok(()));
            assert!(
                polls.get() <= 3,
                "the gated job was polled {} times while {busy_rounds} other wake-ups ran",
                polls.get()
            );
        });
    }

    // Proves a failed job stops new jobs from starting, yet run_bounded returns its error
    // only after the jobs already running have ended.
    #[test]
    fn run_bounded_stops_starting_jobs_after_a_failure() {
        comet_rt::local::run_local("run-bounded-failure", async {
            let (in_flight, peak, ended) = (Cell::new(0), Cell::new(0), Cell::new(0));
            let started = Cell::new(0);
            let jobs = (0..50).map(|index| {
                started.set(started.get() + 1);
                job(&in_flight, &peak, &ended, index == 2)
            });
            let result = run_bounded(jobs, 4).await;
            assert!(result.is_err(), "the failure is returned");
            assert_eq!(in_flight.get(), 0, "no job left running");
            assert_eq!(ended.get(), started.get(), "every started job ended");
            assert!(started.get() < 50, "jobs after the failure never started");
        });
    }
}
