//! The direct-I/O file seam: aligned reads and writes, fdatasync, preallocation and the
//! alignment query, over glommio's `DmaFile` (O_DIRECT, io_uring).
//!
//! Invariants every caller relies on:
//! - a write's position and length are multiples of [`DirectFile::alignment`] and its buffer
//!   comes from [`DirectFile::alloc_buffer`] (page aligned); a misaligned write is a bug and
//!   panics before reaching the kernel;
//! - a write either lands completely or fails: a short write (the device ran out of space
//!   mid-buffer) is reported as an error, never as partial success;
//! - every error carries the operation, the path and the offset ([`IoError`]).
//!
//! A file opened with [`DirectFile::open_data_sync`] also has O_DSYNC: each write is durable
//! when it completes (the kernel syncs it, with FUA where the device has it), so one io_uring
//! round trip replaces a write followed by an fdatasync.
//!
//! [`FaultInjector`] lets tests make writes fail with ENOSPC after a byte budget, or make
//! fdatasync (and the sync of O_DSYNC writes) fail, without a special file system.
//! Production code passes `None`.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use glommio::io::{DmaBuffer, DmaFile, OpenOptions};

use crate::io_count::{done, IoOp};

/// An I/O failure with its context: what was done, to which file, at which offset.
#[derive(Debug, thiserror::Error)]
#[error("{operation} {path} at offset {offset}: {source}")]
pub struct IoError {
    /// The operation that failed (`"write"`, `"fdatasync"`, ...).
    pub operation: &'static str,
    /// The file.
    pub path: PathBuf,
    /// The byte offset of the operation (0 when it has none).
    pub offset: u64,
    /// The operating system's error.
    #[source]
    pub source: std::io::Error,
}

impl IoError {
    /// The error of `operation` on `path` at `offset` (also for file work done with `std::fs`
    /// on a blocking thread).
    pub fn new(operation: &'static str, path: &Path, offset: u64, source: std::io::Error) -> Self {
        IoError {
            operation,
            path: path.to_path_buf(),
            offset,
            source,
        }
    }

    /// True when the failure is the device running out of space.
    pub fn is_no_space(&self) -> bool {
        self.source.raw_os_error() == Some(libc::ENOSPC)
    }
}

fn glommio_error(error: glommio::GlommioError<()>) -> std::io::Error {
    std::io::Error::from(error)
}

/// Test-only fault injection shared by every file opened with it.
///
/// Writes succeed until `write_budget_bytes` is spent; the write that would exceed it fails
/// with ENOSPC (like a full device). `fail_fdatasync` makes every later fdatasync fail
/// with EIO, and every later write to an O_DSYNC file (whose sync is part of the write).
/// The budget is shared, so a test can let a store run and then "fill the disk".
#[derive(Debug, Default)]
pub struct FaultInjector {
    write_budget_bytes: Cell<Option<u64>>,
    fail_fdatasync: Cell<bool>,
    fail_preallocate: Cell<bool>,
}

impl FaultInjector {
    /// An injector that injects nothing until configured.
    pub fn new() -> Rc<Self> {
        Rc::new(FaultInjector::default())
    }

    /// Writes fail with ENOSPC once `bytes` more bytes have been written.
    pub fn fail_writes_after_bytes(&self, bytes: u64) {
        self.write_budget_bytes.set(Some(bytes));
    }

    /// Every fdatasync, and every write to an O_DSYNC file, from now on fails with EIO.
    pub fn fail_fdatasync(&self) {
        self.fail_fdatasync.set(true);
    }

    /// Every preallocation from now on fails with ENOSPC.
    pub fn fail_preallocate(&self) {
        self.fail_preallocate.set(true);
    }

    /// Stops injecting faults.
    pub fn clear(&self) {
        self.write_budget_bytes.set(None);
        self.fail_fdatasync.set(false);
        self.fail_preallocate.set(false);
    }

    fn charge_write(&self, bytes: u64) -> std::io::Result<()> {
        match self.write_budget_bytes.get() {
            Some(left) if left < bytes => {
                self.write_budget_bytes.set(Some(0));
                Err(std::io::Error::from_raw_os_error(libc::ENOSPC))
            }
            Some(left) => {
                self.write_budget_bytes.set(Some(left - bytes));
                Ok(())
            }
            None => Ok(()),
        }
    }
}

/// A page-aligned buffer for direct I/O.
pub struct AlignedBuffer {
    inner: DmaBuffer,
}

impl AlignedBuffer {
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        self.inner.as_bytes()
    }

    /// The bytes, writable.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        self.inner.as_bytes_mut()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.inner.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.inner.is_empty()
    }
}

/// How to open a [`DirectFile`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenMode {
    /// Read only; the file must exist.
    Read,
    /// Read and write; the file must exist.
    ReadWrite,
    /// Read and write; created if missing (never truncated).
    CreateReadWrite,
}

/// A file opened with O_DIRECT, read and written through io_uring. Shard-local (`!Send`).
pub struct DirectFile {
    file: DmaFile,
    path: PathBuf,
    faults: Option<Rc<FaultInjector>>,
    /// Opened with O_DSYNC: a completed write is durable.
    data_sync: bool,
}

impl DirectFile {
    /// Opens `path` for direct I/O.
    pub async fn open(
        path: &Path,
        mode: OpenMode,
        faults: Option<Rc<FaultInjector>>,
    ) -> Result<DirectFile, IoError> {
        Self::open_flagged(path, mode, faults, false).await
    }

    /// Opens `path` for direct I/O with O_DSYNC: every write is durable when it completes
    /// (see the module docs), and [`DirectFile::writes_are_durable`] says so.
    pub async fn open_data_sync(
        path: &Path,
        mode: OpenMode,
        faults: Option<Rc<FaultInjector>>,
    ) -> Result<DirectFile, IoError> {
        Self::open_flagged(path, mode, faults, true).await
    }

    async fn open_flagged(
        path: &Path,
        mode: OpenMode,
        faults: Option<Rc<FaultInjector>>,
        data_sync: bool,
    ) -> Result<DirectFile, IoError> {
        let path = &absolute(path);
        prime_iopoll_probe(path).await;
        let mut options = OpenOptions::new();
        match mode {
            OpenMode::Read => options.read(true),
            OpenMode::ReadWrite => options.read(true).write(true),
            OpenMode::CreateReadWrite => options.read(true).write(true).create(true),
        };
        if data_sync {
            options.custom_flags(libc::O_DSYNC);
        }
        let file = done(IoOp::FileOpen, options.dma_open(path).await)
            .map_err(|error| IoError::new("open", path, 0, glommio_error(error)))?;
        Ok(DirectFile {
            file,
            path: path.to_path_buf(),
            faults,
            data_sync,
        })
    }

    /// Whether a completed write is already durable (opened with O_DSYNC), so no fdatasync
    /// is needed after it.
    pub fn writes_are_durable(&self) -> bool {
        self.data_sync
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The alignment positions and lengths of direct I/O must respect.
    pub fn alignment(&self) -> u64 {
        self.file.alignment()
    }

    /// A zero-filled aligned buffer of `len` bytes (a multiple of the alignment).
    pub fn alloc_buffer(&self, len: usize) -> AlignedBuffer {
        assert!(
            len as u64 % self.alignment() == 0,
            "unaligned buffer length {len}"
        );
        let mut inner = self.file.alloc_dma_buffer(len);
        inner.as_bytes_mut().fill(0);
        AlignedBuffer { inner }
    }

    /// An aligned buffer of `len` bytes (a multiple of the alignment) whose first `filled`
    /// bytes `fill` writes, every one of them, returning `filled`; only the rest is zeroed.
    /// For buffers a caller fills almost entirely (commit-log flushes), this saves clearing
    /// the whole buffer first.
    pub fn alloc_buffer_with(
        &self,
        len: usize,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> AlignedBuffer {
        assert!(
            len as u64 % self.alignment() == 0,
            "unaligned buffer length {len}"
        );
        let mut inner = self.file.alloc_dma_buffer(len);
        let bytes = inner.as_bytes_mut();
        let filled = fill(bytes);
        assert!(filled <= len, "filled {filled} of a {len}-byte buffer");
        bytes[filled..].fill(0);
        AlignedBuffer { inner }
    }

    /// Writes all of `buffer` at `position` (both aligned). A short write is an error.
    pub async fn write_at(&self, buffer: AlignedBuffer, position: u64) -> Result<(), IoError> {
        if let Some(faults) = &self.faults {
            faults
                .charge_write(buffer.len() as u64)
                .map_err(|error| IoError::new("write", &self.path, position, error))?;
            if self.data_sync && faults.fail_fdatasync.get() {
                let error = std::io::Error::from_raw_os_error(libc::EIO);
                return Err(IoError::new(
                    "write (fdatasync of O_DSYNC)",
                    &self.path,
                    position,
                    error,
                ));
            }
        }
        self.write_whole(buffer, position).await
    }

    /// Writes `len` zero bytes at `position` (both aligned): turns preallocated blocks into
    /// written ones ahead of the data that will overwrite them (see the store's `warm`).
    /// Not charged to the fault injector's write budget, which models running out of
    /// blocks: these blocks are already allocated.
    pub async fn write_zeros_at(&self, len: usize, position: u64) -> Result<(), IoError> {
        self.write_whole(self.alloc_buffer(len), position).await
    }

    /// Writes all of `buffer` at `position` (both aligned), past the fault injector.
    async fn write_whole(&self, buffer: AlignedBuffer, position: u64) -> Result<(), IoError> {
        let len = buffer.len() as u64;
        assert!(
            position % self.alignment() == 0,
            "unaligned write at {position}"
        );
        assert!(len % self.alignment() == 0, "unaligned write length {len}");
        let written = done(
            IoOp::FileWrite,
            self.file.write_at(buffer.inner, position).await,
        )
        .map_err(|error| IoError::new("write", &self.path, position, glommio_error(error)))?;
        if (written as u64) < len {
            let error = std::io::Error::from_raw_os_error(libc::ENOSPC);
            return Err(IoError::new("write (short)", &self.path, position, error));
        }
        Ok(())
    }

    /// Reads `len` bytes at `position` (any alignment); fewer at the end of the file.
    pub async fn read_at(&self, position: u64, len: usize) -> Result<Vec<u8>, IoError> {
        let result = done(IoOp::FileRead, self.file.read_at(position, len).await)
            .map_err(|error| IoError::new("read", &self.path, position, glommio_error(error)))?;
        Ok(result.to_vec())
    }

    /// Makes every completed write durable.
    pub async fn fdatasync(&self) -> Result<(), IoError> {
        if let Some(faults) = &self.faults {
            if faults.fail_fdatasync.get() {
                let error = std::io::Error::from_raw_os_error(libc::EIO);
                return Err(IoError::new("fdatasync", &self.path, 0, error));
            }
        }
        done(IoOp::FileSync, self.file.fdatasync().await)
            .map_err(|error| IoError::new("fdatasync", &self.path, 0, glommio_error(error)))
    }

    /// Reserves blocks for the first `len_bytes` bytes and sets the file size to at least
    /// that, so later writes inside it never allocate (and never find the disk full).
    pub async fn preallocate(&self, len_bytes: u64) -> Result<(), IoError> {
        if let Some(faults) = &self.faults {
            if faults.fail_preallocate.get() {
                let error = std::io::Error::from_raw_os_error(libc::ENOSPC);
                return Err(IoError::new("preallocate", &self.path, 0, error));
            }
        }
        done(
            IoOp::FileAllocate,
            self.file.pre_allocate(len_bytes, false).await,
        )
        .map_err(|error| IoError::new("preallocate", &self.path, len_bytes, glommio_error(error)))
    }

    /// The file's size in bytes.
    pub async fn file_size(&self) -> Result<u64, IoError> {
        done(IoOp::FileStat, self.file.file_size().await)
            .map_err(|error| IoError::new("stat", &self.path, 0, glommio_error(error)))
    }

    /// Sets the file's size.
    pub async fn truncate(&self, len_bytes: u64) -> Result<(), IoError> {
        done(IoOp::FileTruncate, self.file.truncate(len_bytes).await)
            .map_err(|error| IoError::new("truncate", &self.path, len_bytes, glommio_error(error)))
    }

    /// Closes the file.
    pub async fn close(self) -> Result<(), IoError> {
        let path = self.path;
        done(IoOp::FileClose, self.file.close().await)
            .map_err(|error| IoError::new("close", &path, 0, glommio_error(error)))
    }
}

/// glommio resolves paths against no directory (a relative path fails with EBADF), so every
/// path is made absolute against the working directory first.
fn absolute(path: &Path) -> PathBuf {
    std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf())
}

/// glommio decides per device (and per thread), on the first direct-I/O open, whether the
/// device supports polled I/O by reading the first block of that file. On an empty file the
/// read succeeds trivially, so devices without polling support (virtio disks, for example)
/// are taken as pollable and every later read fails with EOPNOTSUPP. Opening a non-empty
/// file first makes the probe meaningful. Done once per device per thread, at the first open
/// (start-up); other opens on the thread wait for it.
async fn prime_iopoll_probe(path: &Path) {
    use std::os::unix::fs::MetadataExt;
    thread_local! {
        static PRIMED: std::cell::RefCell<Vec<(u64, bool)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }
    let Some(dir) = path.parent() else { return };
    let Ok(metadata) = std::fs::metadata(dir) else {
        return;
    };
    let device = metadata.dev();
    loop {
        let state = PRIMED.with(|primed| {
            let mut primed = primed.borrow_mut();
            let known = primed
                .iter()
                .find(|(known, _)| *known == device)
                .map(|p| p.1);
            if known.is_none() {
                primed.push((device, false));
            }
            known
        });
        match state {
            Some(true) => return,
            Some(false) => glommio::executor().yield_now().await,
            None => break,
        }
    }
    let thread = format!("{:?}", std::thread::current().id());
    let thread: String = thread.chars().filter(char::is_ascii_digit).collect();
    let probe = dir.join(format!(
        ".comet-iopoll-probe-{}-{thread}",
        std::process::id()
    ));
    if std::fs::write(&probe, vec![0u8; 4096]).is_ok() {
        if let Ok(file) = done(
            IoOp::FileOpen,
            OpenOptions::new().read(true).dma_open(&probe).await,
        ) {
            let _ = done(IoOp::FileClose, file.close().await);
        }
        let _ = std::fs::remove_file(&probe);
    }
    PRIMED.with(|primed| {
        for entry in primed.borrow_mut().iter_mut() {
            if entry.0 == device {
                entry.1 = true;
            }
        }
    });
}

/// Removes a file without blocking the executor thread.
pub async fn remove_file(path: &Path) -> Result<(), IoError> {
    let path = &absolute(path);
    done(IoOp::FileRemove, glommio::io::remove(path).await)
        .map_err(|error| IoError::new("remove", path, 0, glommio_error(error)))
}

/// Disk usage of the file system holding `path`, as a fraction in [0, 1].
///
/// `statvfs` reads file-system counters only (no data I/O), so it is cheap enough to call
/// from a periodic task on a shard.
pub fn disk_used_ratio(path: &Path) -> Result<f64, IoError> {
    use std::os::unix::ffi::OsStrExt;
    let mut bytes = path.as_os_str().as_bytes().to_vec();
    bytes.push(0);
    let mut stat: libc::statvfs = unsafe_zeroed_statvfs();
    // SAFETY: `bytes` is NUL terminated and `stat` is a valid out-parameter.
    let status = unsafe { libc::statvfs(bytes.as_ptr().cast(), &mut stat) };
    if status != 0 {
        return Err(IoError::new(
            "statvfs",
            path,
            0,
            std::io::Error::last_os_error(),
        ));
    }
    // As df computes "Use%": blocks in use over blocks in use plus blocks available to
    // unprivileged users (reserved blocks count as neither).
    let used = stat.f_blocks.saturating_sub(stat.f_bfree) as f64;
    let usable = used + stat.f_bavail as f64;
    if usable <= 0.0 {
        return Ok(0.0);
    }
    Ok((used / usable).clamp(0.0, 1.0))
}

fn unsafe_zeroed_statvfs() -> libc::statvfs {
    // SAFETY: statvfs is a plain C struct of integers; all-zero is a valid value.
    unsafe { std::mem::zeroed() }
}

/// Makes the directory entries of `path` (a directory) durable: needed after creating a
/// file whose existence must survive a crash.
pub async fn sync_directory(path: &Path) -> Result<(), IoError> {
    let path = &absolute(path);
    let directory = done(IoOp::FileOpen, glommio::io::Directory::open(path).await)
        .map_err(|error| IoError::new("open directory", path, 0, glommio_error(error)))?;
    done(IoOp::FileSync, directory.sync().await)
        .map_err(|error| IoError::new("sync directory", path, 0, glommio_error(error)))?;
    done(IoOp::FileClose, directory.close().await)
        .map_err(|error| IoError::new("close directory", path, 0, glommio_error(error)))
}
