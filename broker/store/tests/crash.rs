//! The SIGKILL crash test (issue 3, point 9): a child process appends under SYNC_FLUSH with
//! hundreds of concurrent appenders and prints every acknowledged record; the parent kills it
//! with SIGKILL at a random moment, reopens the store, and checks that every acknowledged
//! record is present, intact, in its queue at its offset, and that offsets are dense and
//! ordered. Repeated for `COMET_CRASH_ROUNDS` rounds (default 20) on one store.
//!
//! The child is this test binary itself, re-run with `COMET_CRASH_CHILD` set so that only
//! `crash_child` does anything.

mod common;

use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use comet_proto::message::RecordView;
use comet_store::{FlushPolicy, GetStatus, MessageFilter, QueueOffset, Store, StoreConfig};
use comet_test_support::crash_seed::{crash_seed, XorShift};
use comet_test_support::ChildGuard;
use common::{body, properties, record, TempDir};

const QUEUES: i32 = 4;
const APPENDERS: u64 = 300;

fn crash_config(root: PathBuf) -> StoreConfig {
    let mut config = common::small_config(&root);
    config.segment_bytes = 1024 * 1024;
    config.flush_policy = FlushPolicy::Sync;
    config.cq_flush_interval_ms = 100;
    // Two blocks: far less than the queues hold, so the verifying reads go to the queue
    // files recovery trusted or repaired, not to memory.
    config.cq_cache_bytes = 40 * 1024;
    config
}

/// One acknowledged record as the child reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Ack {
    queue_id: i32,
    queue_offset: u64,
    physical: i64,
    tag: u64,
}

fn parse_ack(line: &str) -> Option<Ack> {
    let mut words = line.strip_prefix("ACK ")?.split(' ');
    Some(Ack {
        queue_id: words.next()?.parse().ok()?,
        queue_offset: words.next()?.parse().ok()?,
        physical: words.next()?.parse().ok()?,
        tag: words.next()?.parse().ok()?,
    })
}

// Not a test on its own: the child process body. Does nothing unless COMET_CRASH_CHILD
// names the store root.
#[test]
fn crash_child() {
    let Some(root) = std::env::var_os("COMET_CRASH_CHILD") else {
        return;
    };
    let round: u64 = std::env::var("COMET_CRASH_ROUND")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(0);
    comet_rt::local::run_local("crash-child", async move {
        let store = Store::open(crash_config(PathBuf::from(root)))
            .await
            .expect("open");
        println!("READY");
        let mut tasks = Vec::new();
        for appender in 0..APPENDERS {
            let store = store.clone();
            tasks.push(comet_rt::local::spawn(async move {
                for step in 0.. {
                    let tag = (round << 40) | (appender << 20) | step;
                    if appender % 3 == 0 {
                        // Appends that arrive while flushes run, as from a broker's
                        // connections: the store pads and pipelines flushes (see `flush`).
                        let pause_us = (tag * 7919) % 300;
                        comet_rt::local::sleep(std::time::Duration::from_micros(pause_us)).await;
                    }
                    let queue_id = i32::try_from(appender % QUEUES as u64).expect("below QUEUES");
                    let unique = format!("U{tag}");
                    let props = properties(&[("UNIQ_KEY", &unique)]);
                    let one = record(
                        "CrashTopic",
                        queue_id,
                        &body(tag, 100 + (tag % 900) as usize),
                        &props,
                    );
                    let done = store.append(&[one]).await.expect("append");
                    let line = format!(
                        "ACK {queue_id} {} {} {tag}\n",
                        done[0].queue_offset.0,
                        done[0].physical_offset.as_i64()
                    );
                    std::io::stdout()
                        .lock()
                        .write_all(line.as_bytes())
                        .expect("stdout");
                }
            }));
        }
        for task in tasks {
            task.await;
        }
    });
}

/// Runs one child, kills it after `run_ms` of appending, returns the acks it printed.
fn run_child(root: &std::path::Path, round: u64, run_ms: u64) -> Vec<Ack> {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env("COMET_CRASH_CHILD", root)
        .env("COMET_CRASH_ROUND", round.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    // Killed on drop too, so a failed assertion here leaves no appender running.
    let mut child = ChildGuard::spawn("the crash child", &mut command);
    let stdout = child.child().stdout.take().expect("piped");
    let (ready_sender, ready) = mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut acks = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            // libtest prints `test crash_child ... ` before the test's own output, on the
            // same line.
            if line.ends_with("READY") {
                let _ = ready_sender.send(());
            } else if let Some(ack) = parse_ack(&line) {
                acks.push(ack);
            }
        }
        acks
    });
    // The child opens (and recovers) the store before it appends; only then does the
    // random run time start.
    ready
        .recv_timeout(Duration::from_secs(30))
        .expect("the child opened its store and printed READY");
    // The kill at a random moment of the run is what this test is about.
    std::thread::sleep(Duration::from_millis(run_ms));
    let status = child.kill();
    assert!(!status.success(), "the child runs until killed: {status:?}");
    reader.join().expect("reader thread")
}

/// Reopens the store and checks every ack, density and order of every queue; returns how
/// many records the reopened store holds.
fn verify(root: &std::path::Path, acked: &HashMap<(i32, u64), Ack>) -> usize {
    comet_rt::local::run_local("crash-verify", async {
        let mut recovered = 0;
        let store = Store::open(crash_config(root.to_path_buf()))
            .await
            .expect("reopen");
        for queue_id in 0..QUEUES {
            let records = read_queue(&store, queue_id).await;
            for (offset, bytes) in records.iter().enumerate() {
                let view = RecordView::parse(bytes).expect("intact record");
                assert!(view.body_crc_matches(), "crc at {queue_id}/{offset}");
                assert_eq!(view.queue_offset(), offset as i64, "dense, ordered offsets");
                assert_eq!(view.queue_id(), queue_id);
                let tag = u64::from_be_bytes(view.body()[..8].try_into().expect("8"));
                if let Some(ack) = acked.get(&(queue_id, offset as u64)) {
                    assert_eq!(ack.tag, tag, "acked record at {queue_id}/{offset}");
                    assert_eq!(ack.physical, view.physical_offset());
                }
            }
            recovered += records.len();
            let max = records.len() as u64;
            for ack in acked.values().filter(|ack| ack.queue_id == queue_id) {
                assert!(ack.queue_offset < max, "acked {ack:?} lost (max {max})");
            }
        }
        store.shutdown().await.expect("shutdown");
        recovered
    })
}

async fn read_queue(store: &Store, queue_id: i32) -> Vec<bytes::Bytes> {
    let mut records = Vec::new();
    let mut offset = QueueOffset(0);
    loop {
        let got = store
            .get_messages(
                "CrashTopic",
                queue_id,
                offset,
                1024,
                8 << 20,
                MessageFilter::All,
            )
            .await
            .expect("get");
        if got.status != GetStatus::Found {
            assert!(
                matches!(
                    got.status,
                    GetStatus::OffsetOverflowOne | GetStatus::NoMessageInQueue
                ),
                "{:?}",
                got.status
            );
            return records;
        }
        records.extend(got.records);
        offset = got.next_offset;
    }
}

// Proves nothing acknowledged under SYNC_FLUSH is lost or damaged by SIGKILL at random
// moments, over many rounds on one store (see the module docs).
#[test]
fn sigkill_rounds() {
    if std::env::var_os("COMET_CRASH_CHILD").is_some() {
        return;
    }
    let rounds: u64 = std::env::var("COMET_CRASH_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(20);
    let seed = crash_seed();
    eprintln!("crash test seed {seed} (set COMET_CRASH_SEED to replay)");
    let mut random = XorShift(seed);
    let dir = TempDir::new("sigkill");
    let mut acked: HashMap<(i32, u64), Ack> = HashMap::new();
    let mut per_round = BTreeMap::new();
    for round in 0..rounds {
        let run_ms = 150 + random.next_word() % 400;
        let acks = run_child(dir.path(), round, run_ms);
        let acknowledged = acks.len();
        per_round.insert(round, acknowledged);
        for ack in acks {
            let previous = acked.insert((ack.queue_id, ack.queue_offset), ack);
            assert!(previous.is_none(), "offset acknowledged twice: {ack:?}");
        }
        let recovered = verify(dir.path(), &acked);
        // One line per round in a fixed form, so a soak script can sum what was acknowledged
        // (tests/soak/sigkill.sh). `recovered` counts every record the store holds.
        eprintln!("crash round {round}: acknowledged {acknowledged}, recovered {recovered}");
    }
    eprintln!("acks per round: {per_round:?}");
    assert!(
        acked.len() > 1000,
        "the children acknowledged too little: {}",
        acked.len()
    );
}
