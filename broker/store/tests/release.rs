//! A store that shuts down releases every file it opened, so a process can open and close
//! stores repeatedly (tests, tools, a broker re-mapping shards) without running out of file
//! descriptors. Its own test binary: the count is per process.

mod common;

use comet_store::Store;
use common::{body, record, small_config, TempDir};

/// Descriptors of this process open on files under `dir`.
fn open_under(dir: &std::path::Path) -> usize {
    let dir = std::fs::canonicalize(dir).expect("store dir");
    std::fs::read_dir("/proc/self/fd")
        .expect("/proc/self/fd")
        .filter_map(|entry| std::fs::read_link(entry.ok()?.path()).ok())
        .filter(|target| target.starts_with(&dir))
        .count()
}

// Proves opening, using and shutting down a store leaves none of its files open, five times:
// background tasks (maintenance, retention, index linking) end with the store instead of
// sleeping on with its files.
#[test]
fn shutdown_releases_every_file() {
    let dir = TempDir::new("release");
    let config = small_config(dir.path());
    for round in 0..5u64 {
        comet_rt::local::run_local("release", async {
            let store = Store::open(config.clone()).await.expect("open");
            for step in 0..300 {
                let one = record(
                    "Release",
                    (step % 4) as i32,
                    &body(round * 1000 + step, 900),
                    "",
                );
                store.append(&[one]).await.expect("append");
            }
            store.shutdown().await.expect("shutdown");
        });
        assert_eq!(
            open_under(dir.path()),
            0,
            "files left open after round {round}"
        );
    }
}
