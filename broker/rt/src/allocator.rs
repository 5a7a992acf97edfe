//! Process-wide tuning of the C allocator (glibc malloc), applied once before the first
//! executor starts.
//!
//! Why: the data path allocates large, short-lived buffers all the time: commit-log chunks
//! (4 MiB), flush buffers (up to 8 MiB), read buffers. With glibc's defaults an allocation
//! above the mmap threshold gets its own `mmap` and is `munmap`ed when freed, and memory freed
//! at the top of a heap is returned to the kernel past the trim threshold. Either way the next
//! buffer starts on fresh pages: one page fault and one page clear per 4 KiB touched. The store
//! benchmark spent ~20% of its CPU in those faults (`exc_page_fault`, `clear_page_erms`),
//! and ~25-35% less CPU per record with the thresholds below (ASYNC_FLUSH, 1 KiB records;
//! perf/README.md).
//!
//! What it costs: memory freed by the data path stays in the process (up to
//! [`TRIM_THRESHOLD_BYTES`] of free space at the top of each heap) instead of going back to the
//! kernel, so the resident size is the high-water mark of the buffers in use, which the
//! store's limits already bound (chunk cache, unflushed bytes, reads in flight).
//!
//! Other allocators (musl, jemalloc builds) are left alone: this only applies with glibc.

use std::sync::Once;

/// Allocations up to this size come from the heap, not from their own mapping (glibc's
/// largest allowed value on 64-bit, `HEAP_MAX_SIZE / 2`).
pub const MMAP_THRESHOLD_BYTES: i32 = 32 * 1024 * 1024;

/// Free space kept at the top of a heap before it is returned to the kernel.
pub const TRIM_THRESHOLD_BYTES: i32 = 256 * 1024 * 1024;

static TUNE: Once = Once::new();

/// Applies the thresholds once per process; later calls do nothing.
pub fn tune_once() {
    TUNE.call_once(|| {
        #[cfg(target_env = "gnu")]
        {
            // SAFETY: mallopt only changes allocator parameters; it is called once, before
            // the executors start, and both values are within glibc's accepted ranges.
            let mmap = unsafe { libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD_BYTES) };
            let trim = unsafe { libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD_BYTES) };
            if mmap != 1 || trim != 1 {
                log::warn!("the allocator refused its thresholds (mmap {mmap}, trim {trim})");
            }
        }
    });
}
