//! Delayed messages end to end (issue 9, point 1): each level's delay within tolerance, and
//! no loss or duplicate across restarts and crashes.

mod common;
mod sched_common;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use comet_proto::properties::{names, Properties};
use comet_proto::ResponseCode;
use common::{Broker, Client, TempDir};
use sched_common::{call_pipelined, collect, max_offset, pull_once, send_with, send_with_delay};

/// How late a delivery may be (RocketMQ polls every 100 ms; a pull loop adds a little).
const LATE_TOLERANCE: Duration = Duration::from_millis(1000);

fn send_delayed(client: &mut Client, topic: &str, queue_id: i32, body: &str, level: i32) -> String {
    send_with_delay(client, topic, queue_id, (names::DELAY, level.into()), body)
}

fn check_level(broker_addr: SocketAddr, topic: &str, level: i32, delay: Duration) {
    let mut client = Client::connect(broker_addr);
    let started = Instant::now();
    let key = send_delayed(&mut client, topic, 0, &format!("level-{level}"), level);
    let got = collect(&mut client, topic, 0, 1, delay + Duration::from_secs(5));
    assert_eq!(got.len(), 1, "level {level} never delivered");
    let (message, seen) = &got[0];
    let elapsed = seen.duration_since(started);
    assert!(
        elapsed + Duration::from_millis(5) >= delay,
        "level {level} early: {elapsed:?}"
    );
    assert!(
        elapsed <= delay + LATE_TOLERANCE,
        "level {level} late: {elapsed:?}"
    );
    assert_eq!(message.body.as_ref(), format!("level-{level}").as_bytes());
    assert_eq!(message.uniq_key(), Some(key.as_str()));
    assert_eq!(message.property(names::DELAY), None);
    assert_eq!(message.property(names::REAL_TOPIC), Some(topic));
    assert_eq!(message.topic, topic);
}

// Proves the default levels 1-3 (1 s, 5 s, 10 s) each deliver within [delay, delay + 1 s] of
// the send, to the real topic and queue, with DELAY removed and UNIQ_KEY kept; sent together
// so the test takes about 10 s.
#[test]
fn default_short_levels_deliver_on_time() {
    let directory = TempDir::new("e2e-delay-default");
    let broker = Broker::start(&directory.0, 2, &[]);
    let delays = [(1, 1), (2, 5), (3, 10)];
    let threads: Vec<_> = delays
        .iter()
        .map(|(level, seconds)| {
            let topic = format!("DelayDefault{level}");
            let level = *level;
            let delay = Duration::from_secs(*seconds);
            let broker_addr = broker.broker_addr;
            std::thread::spawn(move || check_level(broker_addr, &topic, level, delay))
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
}

// Proves a configured messageDelayLevel is honoured for every level it defines (here
// 1 s 2 s 3 s, standing in for the long default levels), and that levels past the last are
// clamped to it.
#[test]
fn configured_levels_deliver_on_time_and_clamp() {
    let directory = TempDir::new("e2e-delay-configured");
    let broker = Broker::start(&directory.0, 3, &["-o", "messageDelayLevel=1s 2s 3s"]);
    for level in 1..=3 {
        let delay = Duration::from_secs(level as u64);
        check_level(
            broker.broker_addr,
            &format!("DelayConfigured{level}"),
            level,
            delay,
        );
    }
    let mut client = broker.client();
    let started = Instant::now();
    send_delayed(&mut client, "DelayClamped", 0, "clamped", 9);
    let got = collect(&mut client, "DelayClamped", 0, 1, Duration::from_secs(8));
    assert_eq!(got.len(), 1);
    let elapsed = got[0].1.duration_since(started);
    assert!(elapsed >= Duration::from_millis(2995) && elapsed <= Duration::from_secs(4));
}

/// Scheduled messages in the crash test: the 100,000 by default;
/// `COMET_DELAY_CRASH_MESSAGES` changes it.
fn crash_messages() -> usize {
    std::env::var("COMET_DELAY_CRASH_MESSAGES")
        .ok()
        .and_then(|count| count.parse().ok())
        .unwrap_or(100_000)
}
const CRASH_TOPIC: &str = "DelayCrash";
const CRASH_QUEUES: i32 = 4;
/// Connections sending the crash test's messages, each pipelining [`CRASH_WINDOW`] sends.
const CRASH_SENDERS: usize = 4;
const CRASH_WINDOW: usize = 128;

/// The crash test's levels while it sends: nothing comes due, however slow the sending.
const CRASH_PARKED_LEVELS: &str = "messageDelayLevel=1d 1d 1d";
/// The crash test's levels from the restart after sending on: everything is due at once, so
/// the scheduler delivers as fast as it can when the kill comes.
const CRASH_DUE_LEVELS: &str = "messageDelayLevel=1s 2s 3s";

/// Sends messages `sender, sender + CRASH_SENDERS, ...` below `count`, pipelined; message
/// `i` goes to real queue `i % CRASH_QUEUES` on level `1 + i % 3`, with body `m<i>`.
fn send_crash_share(broker_addr: SocketAddr, sender: usize, count: usize) {
    let mut client = Client::connect(broker_addr);
    let requests: Vec<_> = (sender..count)
        .step_by(CRASH_SENDERS)
        .map(|index| {
            let mut properties = Properties::new();
            properties.insert(names::DELAY, (1 + index % 3).to_string());
            properties.insert(names::WAIT, "true");
            let queue_id = i32::try_from(index).unwrap() % CRASH_QUEUES;
            let body = format!("m{index}");
            send_with(CRASH_TOPIC, queue_id, body.as_bytes(), &properties, 0, "pg")
        })
        .collect();
    for response in call_pipelined(&mut client, requests, CRASH_WINDOW) {
        assert_eq!(
            response.response_code(),
            ResponseCode::SUCCESS,
            "{:?}",
            response.remark
        );
    }
}

/// Messages visible in the crash test's real queues.
fn crash_delivered(client: &mut Client) -> i64 {
    (0..CRASH_QUEUES)
        .map(|queue_id| max_offset(client, CRASH_TOPIC, queue_id))
        .sum()
}

/// Waits until at least `threshold` scheduled deliveries are visible in the real queues;
/// returns how many are.
fn wait_for_deliveries(client: &mut Client, threshold: i64, limit: Duration) -> i64 {
    let deadline = Instant::now() + limit;
    loop {
        let delivered = crash_delivered(client);
        if delivered >= threshold {
            return delivered;
        }
        assert!(
            Instant::now() < deadline,
            "{delivered} delivered within {limit:?}, expected {threshold}"
        );
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Every record pulled so far from the crash test's real queues, counted by body.
#[derive(Default)]
struct Tally {
    next_offsets: BTreeMap<i32, i64>,
    counts: BTreeMap<String, usize>,
    records: usize,
}

impl Tally {
    /// Pulls whatever arrived since the last call.
    fn pull_new(&mut self, client: &mut Client) {
        for queue_id in 0..CRASH_QUEUES {
            let offset = self.next_offsets.entry(queue_id).or_insert(0);
            loop {
                let (messages, next) = pull_once(client, CRASH_TOPIC, queue_id, *offset);
                if messages.is_empty() {
                    break;
                }
                *offset = next;
                self.records += messages.len();
                for message in messages {
                    let body = String::from_utf8(message.body.to_vec()).unwrap();
                    *self.counts.entry(body).or_default() += 1;
                }
            }
        }
    }

    /// Pulls until `count` distinct messages arrived or `limit` passed.
    fn pull_until(&mut self, client: &mut Client, count: usize, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            self.pull_new(client);
            if self.counts.len() >= count || Instant::now() >= deadline {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Asserts that messages `m0..m<count>` each arrived exactly once, and nothing else.
    fn assert_exactly_once(&self, count: usize) {
        let missing: Vec<_> = (0..count)
            .map(|index| format!("m{index}"))
            .filter(|body| !self.counts.contains_key(body))
            .take(5)
            .collect();
        assert!(missing.is_empty(), "lost (first 5): {missing:?}");
        let duplicated: Vec<_> = self
            .counts
            .iter()
            .filter(|(_, n)| **n > 1)
            .take(5)
            .collect();
        assert!(
            duplicated.is_empty(),
            "delivered twice (first 5): {duplicated:?}"
        );
        assert_eq!(self.counts.len(), count, "unexpected bodies delivered");
        assert_eq!(self.records, count);
    }
}

/// Schedules `count` messages with the levels parked, then restarts the broker with the
/// levels due; returns the time sending took.
fn schedule_crash_messages(broker: &mut Broker, count: usize) -> Duration {
    let started = Instant::now();
    let senders: Vec<_> = (0..CRASH_SENDERS)
        .map(|sender| {
            let addr = broker.broker_addr;
            std::thread::spawn(move || send_crash_share(addr, sender, count))
        })
        .collect();
    for sender in senders {
        sender.join().unwrap();
    }
    let sent = started.elapsed();
    assert_eq!(
        crash_delivered(&mut broker.client()),
        0,
        "delivered while parked"
    );
    broker.stop();
    broker.extra = vec!["-o".into(), CRASH_DUE_LEVELS.into()];
    broker.restart(2);
    sent
}

// Proves issue 9's "a crash with 100k scheduled messages pending delivers every one exactly
// once after restart". 100,000 messages (by default) are scheduled on three levels that are
// parked (1 day) while sending, so the sending speed does not matter; a restart with
// 1 s/2 s/3 s levels makes all of them due, and the broker is SIGKILLed once the first
// `count / 50` deliveries are visible: delivery rounds are under way and at least 3/4 of the
// messages (about 94% in practice) are still pending (asserted, and printed with the
// timings). After a restart every
// message must appear exactly once in its real queue, and a clean restart must then deliver
// nothing again.
#[test]
fn sigkill_with_pending_schedule_delivers_each_exactly_once() {
    let count = crash_messages();
    let directory = TempDir::new("e2e-delay-crash");
    let mut broker = Broker::start(&directory.0, 2, &["-o", CRASH_PARKED_LEVELS]);
    let sent = schedule_crash_messages(&mut broker, count);
    sched_common::wait_until_serving(broker.broker_addr);
    let due = Instant::now();
    let threshold = i64::try_from(count / 50).unwrap().max(1);
    let delivered = wait_for_deliveries(&mut broker.client(), threshold, Duration::from_secs(60));
    broker.kill();
    let killed = due.elapsed();
    let pending = count - usize::try_from(delivered).unwrap();
    eprintln!(
        "delay crash: {count} scheduled in {sent:?}; killed {killed:?} after they came due, \
         with {delivered} delivered and {pending} pending"
    );
    assert!(
        pending >= count * 3 / 4,
        "the kill came too late to cover much"
    );
    let restarted = Instant::now();
    broker.restart(2);
    sched_common::wait_until_serving(broker.broker_addr);
    let serving = restarted.elapsed();
    let mut client = broker.client();
    let mut tally = Tally::default();
    tally.pull_until(&mut client, count, Duration::from_secs(120));
    eprintln!(
        "delay crash: restart serving after {serving:?}, all delivered after {:?}",
        restarted.elapsed()
    );
    // One more sweep, so duplicates stored after the last distinct message are seen too.
    tally.pull_new(&mut client);
    tally.assert_exactly_once(count);
    broker.stop();
    broker.restart(2);
    sched_common::wait_until_serving(broker.broker_addr);
    // Each schedule queue delivers in order, so once markers scheduled now on every queue and
    // level have arrived, whatever the restart would deliver again has arrived before them.
    let mut client = broker.client();
    let markers = send_markers(&mut client);
    tally.pull_until(&mut client, count + markers, Duration::from_secs(60));
    tally.pull_new(&mut client);
    assert_eq!(tally.counts.len(), count + markers, "markers missing");
    assert_eq!(
        tally.records,
        count + markers,
        "a clean restart delivered again"
    );
}

/// Sends one message per real queue of the crash topic and per level (body
/// `marker-<queue>-<level>`), so every shard's schedule queue of every level holds one;
/// returns how many.
fn send_markers(client: &mut Client) -> usize {
    let mut sent = 0;
    for queue_id in 0..CRASH_QUEUES {
        for level in 1..=3 {
            send_delayed(
                client,
                CRASH_TOPIC,
                queue_id,
                &format!("marker-{queue_id}-{level}"),
                level,
            );
            sent += 1;
        }
    }
    sent
}
