//! Consume-queue scale check (docs/architecture.md#consume-queues): fills one store with
//! `--messages` small records spread over `--queues` queues, then reports the process's
//! resident memory (VmRSS), its open file descriptors and the store's queue memory after
//! the fill, after a clean restart, and after a restart following a drop without shutdown
//! (as a crash leaves the store), with the time each open took, as a Markdown table; then
//! the fill's rate, what its lazy consume-queue flushes cost (count, mean time, files
//! opened) and how long the shutdown after it took (one last flush of every queue). Not a
//! CI test: run it with `--release` on a real disk, alone on the machine:
//!
//! ```text
//! cargo run --release -p comet-store --example cq_scale -- \
//!     --dir target/cq-scale --messages 10000000 --queues 10000
//! ```
//!
//! An existing store under `--dir` is filled further (`--messages 0` only reopens it).

use std::path::PathBuf;
use std::time::Duration;

use bytes::BytesMut;
use clap::Parser;
use comet_proto::message::{encode_record, RecordSpec};
use comet_store::{ConsumeQueueMemory, FlushPolicy, LogId, Store, StoreConfig};

#[derive(Parser, Debug)]
struct Args {
    /// Store directory (a real file system, not tmpfs).
    #[arg(long, default_value = "target/cq-scale")]
    dir: PathBuf,
    /// Records appended before the restarts.
    #[arg(long, default_value_t = 1_000_000)]
    messages: u64,
    /// Queues the records are spread over (topic `Scale`, round robin).
    #[arg(long, default_value_t = 8)]
    queues: i32,
    /// Record body bytes (the stored record is ~100 bytes larger).
    #[arg(long, default_value_t = 16)]
    body_bytes: usize,
    /// Records per append call.
    #[arg(long, default_value_t = 512)]
    batch: usize,
    /// Consume-queue block cache per store, bytes.
    #[arg(long, default_value_t = comet_store::limits::CQ_CACHE_BYTES_DEFAULT)]
    cq_cache_bytes: usize,
}

fn config(args: &Args) -> StoreConfig {
    let mut config = StoreConfig::new(&args.dir, LogId::new(0).expect("log id 0"));
    // Acknowledged once copied: the fill runs at memory speed, bounded by the dirty limit.
    config.flush_policy = FlushPolicy::Async;
    config.cq_cache_bytes = args.cq_cache_bytes;
    config
}

fn record(queue_id: i32, body: &[u8]) -> BytesMut {
    let host = "127.0.0.1:10911".parse().expect("address");
    let spec = RecordSpec {
        topic: "Scale",
        queue_id,
        flag: 0,
        sysflag: 0,
        born_timestamp: comet_rt::clock::wall_clock_ms(),
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: "",
    };
    let mut buffer = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut buffer).expect("encodable");
    buffer
}

/// The process's resident set, MiB (`VmRSS` of /proc/self/status).
fn resident_mib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let kib = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| {
            rest.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0);
    kib / 1024.0
}

/// The process's open file descriptors (entries of /proc/self/fd).
fn open_descriptors() -> usize {
    std::fs::read_dir("/proc/self/fd").map_or(0, Iterator::count)
}

fn row(phase: &str, open: Option<Duration>, memory: ConsumeQueueMemory) {
    let open = open.map_or("-".to_string(), |open| format!("{}", open.as_millis()));
    println!(
        "| {phase} | {open} | {:.1} | {} | {} | {} | {} | {} |",
        resident_mib(),
        open_descriptors(),
        memory.queues,
        memory.resident_entries,
        memory.cache_peak_bytes,
        memory.open_files_peak
    );
}

async fn open_timed(args: &Args) -> (Store, Duration) {
    let started = comet_rt::clock::monotonic_now();
    let store = Store::open(config(args)).await.expect("open");
    (store, started.elapsed())
}

/// Appends `messages` records round robin over the queues.
async fn fill(store: &Store, args: &Args, messages: u64) {
    let body = vec![7u8; args.body_bytes];
    let mut queue_id = 0;
    let mut appended = 0u64;
    while appended < messages {
        let count = usize::try_from((messages - appended).min(args.batch as u64))
            .expect("batch fits usize");
        let batch: Vec<BytesMut> = (0..count)
            .map(|_| {
                queue_id = (queue_id + 1) % args.queues;
                record(queue_id, &body)
            })
            .collect();
        store.append(&batch).await.expect("append");
        appended += count as u64;
    }
}

fn main() {
    let args = Args::parse();
    std::fs::create_dir_all(&args.dir).expect("store directory");
    println!(
        "| phase | open ms | VmRSS MiB | fds | queues | hot entries | cache peak bytes \
         | queue files open (peak) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let fill_report = comet_rt::local::run_local("cq-scale-fill", async {
        let (store, open) = open_timed(&args).await;
        row("before the fill", Some(open), store.consume_queue_memory());
        let started = comet_rt::clock::monotonic_now();
        fill(&store, &args, args.messages).await;
        let filled = started.elapsed();
        row("after the fill", None, store.consume_queue_memory());
        let stats = store.stats();
        let started = comet_rt::clock::monotonic_now();
        store.shutdown().await.expect("shutdown");
        let shutdown = started.elapsed();
        let rate = args.messages as f64 / filled.as_secs_f64().max(1e-9);
        let mean_flush_ms = stats.cq_flush_us as f64 / 1000.0 / stats.cq_flushes.max(1) as f64;
        format!(
            "fill: {} records over {} queues in {:.2} s ({rate:.0} records/s); lazy \
             consume-queue flushes during it: {}, mean {mean_flush_ms:.1} ms, {} files \
             opened; shutdown (last flush of every queue): {} ms",
            args.messages,
            args.queues,
            filled.as_secs_f64(),
            stats.cq_flushes,
            stats.cq_file_opens,
            shutdown.as_millis()
        )
    });
    comet_rt::local::run_local("cq-scale-clean", async {
        let (store, open) = open_timed(&args).await;
        row(
            "after a clean stop",
            Some(open),
            store.consume_queue_memory(),
        );
        fill(&store, &args, args.batch as u64).await;
        // Dropped without shutdown: the next open recovers as after a crash.
    });
    comet_rt::local::run_local("cq-scale-crash", async {
        let (store, open) = open_timed(&args).await;
        row(
            "after a drop (crash)",
            Some(open),
            store.consume_queue_memory(),
        );
        store.shutdown().await.expect("shutdown");
    });
    println!();
    println!("{fill_report}");
}
