//! Appender benchmark (issue 3, point 10): 1 KiB records from N concurrent appenders under
//! SYNC_FLUSH and ASYNC_FLUSH, on the disk under `--dir`. Prints appends/s, MB/s, fsyncs/s and
//! records per fsync as a Markdown table. Run with `--release`:
//!
//! ```text
//! cargo run --release -p comet-store --example store_bench -- --dir target/bench-store
//! ```
//!
//! `--stores K` runs K stores at once, each on its own executor thread with its own N
//! appenders, the way a broker with K shards runs one store per core; the rates are summed.
//! `--pause-us P` makes each appender pause a pseudo-random 0..P µs before each append, so
//! appends arrive while flushes run (as a broker's connections send) instead of all at once
//! when a flush completes; `--flights 1` writes one flush at a time. Append latency (call to
//! resolution) is reported as p50 / p99.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use bytes::BytesMut;
use clap::Parser;
use comet_proto::message::{encode_record, RecordSpec};
use comet_store::{FlushPolicy, LogId, Store, StoreConfig};
use hdrhistogram::Histogram;

#[derive(Parser, Debug)]
struct Args {
    /// Directory for the benchmark stores (a real file system, not tmpfs).
    #[arg(long, default_value = "target/bench-store")]
    dir: PathBuf,
    /// Seconds per measurement.
    #[arg(long, default_value_t = 3.0)]
    seconds: f64,
    /// Record body bytes (the stored record is ~100 bytes larger).
    #[arg(long, default_value_t = 1024)]
    body_bytes: usize,
    /// Concurrent appender counts to measure.
    #[arg(long, value_delimiter = ',', default_value = "1,16,256,1024")]
    appenders: Vec<u64>,
    /// Policies to measure: sync, async.
    #[arg(long, value_delimiter = ',', default_value = "sync,async")]
    policies: Vec<String>,
    /// Stores measured at once, one per executor thread (a broker runs one per shard).
    #[arg(long, default_value_t = 1)]
    stores: u8,
    /// Most commit-log flushes in flight (1 or 2; see the store's `flush`).
    #[arg(long, default_value_t = comet_store::limits::FLUSHES_IN_FLIGHT_MAX)]
    flights: usize,
    /// Each appender pauses a pseudo-random 0..N µs before each append, so appends arrive
    /// while flushes run, as a broker's connections send; 0: closed loop, no pause.
    #[arg(long, default_value_t = 0)]
    pause_us: u64,
}

/// What one store did during one measurement.
struct Sample {
    records: f64,
    bytes: f64,
    fsyncs: f64,
    flushes: f64,
    pipelined_flushes: f64,
    padding_bytes: f64,
    cpu_us: f64,
    elapsed_seconds: f64,
    latency_us: Histogram<u64>,
}

impl Default for Sample {
    fn default() -> Sample {
        Sample {
            records: 0.0,
            bytes: 0.0,
            fsyncs: 0.0,
            flushes: 0.0,
            pipelined_flushes: 0.0,
            padding_bytes: 0.0,
            cpu_us: 0.0,
            elapsed_seconds: 0.0,
            latency_us: Histogram::new(3).expect("histogram"),
        }
    }
}

struct Row {
    policy: &'static str,
    stores: u8,
    appenders: u64,
    appends_per_second: f64,
    megabytes_per_second: f64,
    fsyncs_per_second: f64,
    records_per_fsync: f64,
    cpu_us_per_record: f64,
    latency_us_p50: u64,
    latency_us_p99: u64,
    pipelined_percent: f64,
    padding_percent: f64,
}

/// CPU time (user + system) this thread has used, in microseconds. The machine may be shared,
/// so CPU per record is reported beside the wall-clock rates.
fn thread_cpu_us() -> f64 {
    // SAFETY: getrusage fills the zeroed struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: valid out-parameter, RUSAGE_THREAD is supported on Linux.
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let micros = |time: libc::timeval| time.tv_sec as f64 * 1e6 + time.tv_usec as f64;
    micros(usage.ru_utime) + micros(usage.ru_stime)
}

fn encoded_record(body_bytes: usize) -> BytesMut {
    let host = "127.0.0.1:10911".parse().expect("address");
    let body = vec![0x5Au8; body_bytes];
    let spec = RecordSpec {
        topic: "BenchTopic",
        queue_id: 0,
        flag: 0,
        sysflag: 0,
        born_timestamp: 1_700_000_000_000,
        born_host: host,
        store_host: host,
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body: &body,
        properties: "",
    };
    let mut buffer = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut buffer).expect("encodable");
    buffer
}

async fn measure_store(
    args: &Args,
    policy: FlushPolicy,
    appenders: u64,
    store_number: u8,
    start: &Barrier,
) -> Sample {
    let root = args
        .dir
        .join(format!("{policy:?}-{appenders}-{store_number}"));
    let _ = std::fs::remove_dir_all(&root);
    let mut config = StoreConfig::new(&root, LogId::new(store_number).expect("id"));
    config.flush_policy = policy;
    config.flush_interval_ms = 10;
    config.flushes_in_flight_max = args.flights;
    let store = Store::open(config).await.expect("open store");
    let record = Rc::new(encoded_record(args.body_bytes));
    let stop = Rc::new(Cell::new(false));
    let latency_us = Rc::new(RefCell::new(Histogram::<u64>::new(3).expect("histogram")));
    // Every store is open before any measures (nothing else runs on this thread yet).
    start.wait();
    let before = store.stats();
    let cpu_before = thread_cpu_us();
    let started = Instant::now();
    let mut tasks = Vec::new();
    for appender in 0..appenders {
        let (store, stop, latency_us) = (store.clone(), stop.clone(), latency_us.clone());
        let mut one = BytesMut::from(&record[..]);
        // Spread appenders over 8 queues (QUEUEID is at byte 12).
        one[12..16].copy_from_slice(&((appender % 8) as i32).to_be_bytes());
        let pause_us = args.pause_us;
        tasks.push(comet_rt::local::spawn(async move {
            let mut seed = appender.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
            while !stop.get() {
                if pause_us > 0 {
                    seed ^= seed << 13;
                    seed ^= seed >> 7;
                    seed ^= seed << 17;
                    comet_rt::local::sleep(Duration::from_micros(seed % pause_us)).await;
                }
                let sent = Instant::now();
                store.append(&[&one[..]]).await.expect("append");
                let micros = u64::try_from(sent.elapsed().as_micros()).unwrap_or(u64::MAX);
                latency_us.borrow_mut().saturating_record(micros);
            }
        }));
    }
    comet_rt::local::sleep(Duration::from_secs_f64(args.seconds)).await;
    stop.set(true);
    for task in tasks {
        task.await;
    }
    let elapsed_seconds = started.elapsed().as_secs_f64();
    let cpu_us = thread_cpu_us() - cpu_before;
    let after = store.stats();
    store.shutdown().await.expect("shutdown");
    let _ = std::fs::remove_dir_all(&root);
    let histogram = latency_us.borrow().clone();
    Sample {
        records: (after.appended_records - before.appended_records) as f64,
        bytes: (after.appended_bytes - before.appended_bytes) as f64,
        fsyncs: (after.fdatasyncs - before.fdatasyncs) as f64,
        flushes: (after.flushes - before.flushes) as f64,
        pipelined_flushes: (after.pipelined_flushes - before.pipelined_flushes) as f64,
        padding_bytes: (after.padding_bytes - before.padding_bytes) as f64,
        cpu_us,
        elapsed_seconds,
        latency_us: histogram,
    }
}

/// Runs `args.stores` stores at once, one per thread, and sums what they did.
fn measure(args: &Arc<Args>, policy: FlushPolicy, appenders: u64) -> Row {
    let start = Arc::new(Barrier::new(usize::from(args.stores)));
    let threads: Vec<_> = (0..args.stores)
        .map(|store_number| {
            let (args, start) = (Arc::clone(args), Arc::clone(&start));
            std::thread::spawn(move || {
                comet_rt::local::run_local(&format!("store-bench-{store_number}"), async {
                    measure_store(&args, policy, appenders, store_number, &start).await
                })
            })
        })
        .collect();
    let mut total = Sample::default();
    for thread in threads {
        let sample = thread.join().expect("bench thread");
        total.records += sample.records;
        total.bytes += sample.bytes;
        total.fsyncs += sample.fsyncs;
        total.flushes += sample.flushes;
        total.pipelined_flushes += sample.pipelined_flushes;
        total.padding_bytes += sample.padding_bytes;
        total.cpu_us += sample.cpu_us;
        total.elapsed_seconds = total.elapsed_seconds.max(sample.elapsed_seconds);
        total
            .latency_us
            .add(&sample.latency_us)
            .expect("same histogram shape");
    }
    let elapsed = total.elapsed_seconds;
    Row {
        policy: if policy == FlushPolicy::Sync {
            "SYNC_FLUSH"
        } else {
            "ASYNC_FLUSH"
        },
        stores: args.stores,
        appenders,
        appends_per_second: total.records / elapsed,
        megabytes_per_second: total.bytes / elapsed / 1e6,
        fsyncs_per_second: total.fsyncs / elapsed,
        records_per_fsync: if total.fsyncs > 0.0 {
            total.records / total.fsyncs
        } else {
            0.0
        },
        cpu_us_per_record: total.cpu_us / total.records.max(1.0),
        pipelined_percent: total.pipelined_flushes * 100.0 / total.flushes.max(1.0),
        padding_percent: total.padding_bytes * 100.0 / total.bytes.max(1.0),
        latency_us_p50: total.latency_us.value_at_quantile(0.5),
        latency_us_p99: total.latency_us.value_at_quantile(0.99),
    }
}

fn main() {
    let args = Arc::new(Args::parse());
    assert!(args.stores >= 1, "--stores must be at least 1");
    std::fs::create_dir_all(&args.dir).expect("bench dir");
    let mut rows = Vec::new();
    for policy in &args.policies {
        let policy = match policy.as_str() {
            "sync" => FlushPolicy::Sync,
            "async" => FlushPolicy::Async,
            other => panic!("unknown policy {other}"),
        };
        for &appenders in &args.appenders {
            rows.push(measure(&args, policy, appenders));
        }
    }
    println!(
        "| policy | stores | appenders per store | appends/s | MB/s | fsyncs/s | records/fsync \
         | CPU µs/record | p50 / p99 µs | pipelined flushes | padding |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for row in rows {
        println!(
            "| {} | {} | {} | {:.0} | {:.1} | {:.0} | {:.1} | {:.2} | {} / {} | {:.0}% | {:.1}% |",
            row.policy,
            row.stores,
            row.appenders,
            row.appends_per_second,
            row.megabytes_per_second,
            row.fsyncs_per_second,
            row.records_per_fsync,
            row.cpu_us_per_record,
            row.latency_us_p50,
            row.latency_us_p99,
            row.pipelined_percent,
            row.padding_percent
        );
    }
}
