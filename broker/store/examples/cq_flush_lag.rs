//! How long the consume-queue checkpoint lags behind many new queues (issue 25,
//! perf/README.md#many-queues-issue-25): opens a new store under `--dir`, appends one record
//! to each of `--queues` queues (each queue new, so each flush creates its file and
//! directory), then times the shutdown, which writes every dirty queue's file, syncs it and
//! writes the checkpoint. Prints one line; run it with `--release` on a real disk:
//!
//! ```text
//! cargo run --release -p comet-store --example cq_flush_lag -- \
//!     --dir target/cq-flush-lag --queues 10000
//! ```
//!
//! `--dir` must not exist yet (every run creates its files anew); remove it after the run.
//! Removing ten thousand files just before a run slows the run's file creation (ext4 skips
//! recently freed inodes), so remove older runs' directories a minute ahead.

use std::path::PathBuf;

use bytes::BytesMut;
use clap::Parser;
use comet_proto::message::{encode_record, RecordSpec};
use comet_store::{FlushPolicy, LogId, Store, StoreConfig};

#[derive(Parser, Debug)]
struct Args {
    /// Store directory (a real file system, not tmpfs), created by the run.
    #[arg(long, default_value = "target/cq-flush-lag")]
    dir: PathBuf,
    /// New queues, one record each (topic `Lag`).
    #[arg(long, default_value_t = 10_000)]
    queues: i32,
}

fn record(queue_id: i32) -> BytesMut {
    let host = "127.0.0.1:10911".parse().expect("address");
    let spec = RecordSpec {
        topic: "Lag",
        queue_id,
        flag: 0,
        sysflag: 0,
        born_timestamp: comet_rt::clock::wall_clock_ms(),
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: b"lag",
        properties: "",
    };
    let mut buffer = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut buffer).expect("encodable");
    buffer
}

fn main() {
    let args = Args::parse();
    if args.dir.exists() {
        eprintln!("{} exists: give a new directory", args.dir.display());
        std::process::exit(2);
    }
    std::fs::create_dir_all(&args.dir).expect("store directory");
    let line = comet_rt::local::run_local("cq-flush-lag", async {
        let mut config = StoreConfig::new(&args.dir, LogId::new(0).expect("log id 0"));
        config.flush_policy = FlushPolicy::Async;
        let store = Store::open(config).await.expect("open");
        let batch: Vec<BytesMut> = (0..args.queues).map(record).collect();
        for chunk in batch.chunks(512) {
            store.append(chunk).await.expect("append");
        }
        let started = comet_rt::clock::monotonic_now();
        store.shutdown().await.expect("shutdown");
        let shutdown = started.elapsed();
        let stats = store.stats();
        format!(
            "{} new queues: shutdown (every queue flushed and synced, then the checkpoint) \
             {} ms; lazy flushes before it {}",
            args.queues,
            shutdown.as_millis(),
            stats.cq_flushes
        )
    });
    println!("{line}");
}
