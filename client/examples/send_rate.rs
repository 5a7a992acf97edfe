//! Measures sends per second from one producer: `--mode sync` with `--threads` callers, or
//! `--mode async` with a window of `--window` sends in flight; prints the rate and the
//! process's CPU time per message (Linux `/proc/self/stat`).
//!
//! ```text
//! cargo run --release -p comet-client --example send_rate -- --namesrv 127.0.0.1:9876 \
//!     --mode sync --threads 64 --seconds 10 --size 128
//! ```

mod common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use comet_client::{ClientConfig, Message, Producer, ProducerConfig};

const USAGE: &str = "send_rate [--namesrv 127.0.0.1:9876] [--topic BenchTopic] \
[--mode sync|async] [--threads 64] [--window 1024] [--seconds 10] [--size 128]";

/// utime + stime of this process, in clock ticks (100 per second on Linux).
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the parenthesised command name; utime and stime are the 12th and 13th.
    let rest = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |index: usize| {
        fields
            .get(index)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    field(11) + field(12)
}

fn run_sync(
    producer: &Producer,
    topic: &str,
    body: &[u8],
    threads: u64,
    stop: &AtomicBool,
) -> (u64, u64) {
    let (sent, failed) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    thread::scope(|scope| {
        for _ in 0..threads {
            let (sent, failed) = (sent.clone(), failed.clone());
            scope.spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    match producer.send(Message::new(topic, body.to_vec())) {
                        Ok(_) => sent.fetch_add(1, Ordering::Relaxed),
                        Err(_) => failed.fetch_add(1, Ordering::Relaxed),
                    };
                }
            });
        }
    });
    (sent.load(Ordering::Relaxed), failed.load(Ordering::Relaxed))
}

fn run_async(
    producer: &Producer,
    topic: &str,
    body: &[u8],
    window: u64,
    stop: &AtomicBool,
) -> (u64, u64) {
    let (mut sent, mut failed) = (0, 0);
    let mut in_flight = VecDeque::new();
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        while !stopping && (in_flight.len() as u64) < window {
            match producer.send_async_future(Message::new(topic, body.to_vec())) {
                Ok(future) => in_flight.push_back(future),
                Err(_) => failed += 1,
            }
        }
        let Some(oldest) = in_flight.pop_front() else {
            break;
        };
        match oldest.wait() {
            Ok(_) => sent += 1,
            Err(_) => failed += 1,
        }
    }
    (sent, failed)
}

fn main() -> Result<(), comet_client::ClientError> {
    env_logger::init();
    let args = common::Args::parse(USAGE);
    let topic = args.get("topic", "BenchTopic");
    let client = ClientConfig::with_namesrv(&args.get("namesrv", "127.0.0.1:9876"));
    let producer = Producer::new(ProducerConfig::new("send_rate", client))?;
    producer.start()?;
    let body =
        vec![b'x'; usize::try_from(args.number("size", 128)).expect("--size fits in memory")];
    producer.send(Message::new(topic.as_str(), body.clone()))?;
    let stop = AtomicBool::new(false);
    let seconds = args.number("seconds", 10);
    let mode = args.get("mode", "sync");
    let (ticks_before, started) = (cpu_ticks(), Instant::now());
    let (sent, failed) = thread::scope(|scope| {
        scope.spawn(|| {
            thread::sleep(Duration::from_secs(seconds));
            stop.store(true, Ordering::Relaxed);
        });
        match mode.as_str() {
            "async" => run_async(&producer, &topic, &body, args.number("window", 1024), &stop),
            _ => run_sync(&producer, &topic, &body, args.number("threads", 64), &stop),
        }
    });
    let elapsed_s = started.elapsed().as_secs_f64();
    let cpu_s = (cpu_ticks() - ticks_before) as f64 / 100.0;
    println!(
        "mode={mode} sent={sent} failed={failed} elapsed_s={elapsed_s:.2} sends_per_s={:.0} \
         client_cpu_s={cpu_s:.2} client_cpu_share={:.2} cores client_cpu_us_per_send={:.1}",
        sent as f64 / elapsed_s,
        cpu_s / elapsed_s,
        cpu_s * 1e6 / sent.max(1) as f64
    );
    producer.shutdown();
    Ok(())
}
