//! The replication link cut while clients still reach the master: a SYNC_MASTER with 2
//! shards and a slave with 2 shards whose `haMasterAddress` is a relay on loopback
//! (comet_test_support::relay) that the test black-holes and heals, like a network
//! partition between the two brokers only. Clients and the name server reach both brokers
//! directly all along.

mod common;

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use comet_proto::message::decode_records;
use comet_proto::ResponseCode;
use comet_test_support::relay::Relay;
use comet_test_support::{poll_until, wait_until, LOOPBACK};
use common::replication::{
    self, bodies_by_offset, pull_topic, send_one, slave_options, topic_known, wait_for_same_queues,
    Node, CONVERGE_LIMIT, QUEUES, SHARDS,
};
use common::{create_topic, Broker, Client, TempDir};

const TOPIC: &str = "ReplCut";
const SENDERS: usize = 8;
/// SEND_OK answers before the cut: the link is cut under load.
const SEND_OK_BEFORE_CUT: usize = 1000;
/// SEND_OK answers to sends issued after the heal before the senders stop.
const SEND_OK_AFTER_HEAL: usize = 100;
/// SLAVE_NOT_AVAILABLE answers a sender takes during the cut before it waits for the heal
/// (bounds what the slave must catch up on).
const NOT_AVAILABLE_PER_SENDER: usize = 20;
/// `haHousekeepingInterval` of both brokers: a link silent this long is dropped.
const HOUSEKEEPING_MS: u64 = 4000;
/// `syncFlushTimeout` of the master: how long a send waits for the slave.
const SYNC_FLUSH_TIMEOUT_MS: u64 = 500;

/// Where the link was when a send was issued or answered, in the order the test goes
/// through them: a brief cut (healed before the master drops the slave), then a cut long
/// enough for the drop.
const LINKED: u8 = 0;
const BRIEF_CUT: u8 = 1;
const BRIEF_HEALED: u8 = 2;
const CUT: u8 = 3;
const HEALED: u8 = 4;

/// Bytes of each message body (a sender's label, padded): enough that Data
/// frames fill the kernel's socket buffers and the relay's while the link is cut.
const BODY_BYTES: usize = 512;

/// One answer of the master to a send.
#[derive(Clone, Debug)]
struct Answer {
    code: ResponseCode,
    queue: i32,
    offset: i64,
    body: String,
    /// The link's phase when the send was issued, and when its answer arrived.
    sent_in: u8,
    answered_in: u8,
    /// Ticks of [`Load::clock`] at the send and at the answer: orders sends and answers
    /// across senders.
    issued_at: u64,
    answered_at: u64,
    /// How long the answer took.
    took: Duration,
}

/// What the senders and the test share.
struct Load {
    phase: AtomicU8,
    stop: AtomicBool,
    clock: AtomicU64,
    answers: Mutex<Vec<Answer>>,
}

impl Load {
    /// Sends `body` to `queue` and records the answer.
    fn send(&self, client: &mut Client, queue: i32, body: String) -> ResponseCode {
        let sent_in = self.phase.load(Ordering::SeqCst);
        let issued_at = self.clock.fetch_add(1, Ordering::SeqCst);
        let asked = Instant::now();
        let (code, offset) = send_one(client, TOPIC, queue, &body);
        let took = asked.elapsed();
        let answered_at = self.clock.fetch_add(1, Ordering::SeqCst);
        let answered_in = self.phase.load(Ordering::SeqCst);
        self.answers.lock().unwrap().push(Answer {
            code,
            queue,
            offset,
            body,
            sent_in,
            answered_in,
            issued_at,
            answered_at,
            took,
        });
        code
    }

    /// Per phase sent in and code: how many answers, and the slowest one (for messages).
    fn summary(&self) -> String {
        let mut groups: HashMap<(u8, ResponseCode), (usize, Duration)> = HashMap::new();
        for answer in self.answers.lock().unwrap().iter() {
            let group = groups.entry((answer.sent_in, answer.code)).or_default();
            group.0 += 1;
            group.1 = group.1.max(answer.took);
        }
        let mut groups: Vec<_> = groups.into_iter().collect();
        groups.sort_by_key(|((phase, code), _)| (*phase, format!("{code:?}")));
        groups
            .iter()
            .map(|((phase, code), (count, slowest))| {
                format!("phase {phase} {code:?}: {count} (slowest {slowest:?})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Polls `condition` until it holds; panics naming `what` and showing the answers so
    /// far when [`CONVERGE_LIMIT`] passes first.
    fn wait_until(&self, what: &str, condition: impl FnMut() -> bool) {
        assert!(
            poll_until(CONVERGE_LIMIT, condition),
            "timed out after {CONVERGE_LIMIT:?} waiting for {what}; answers: {}",
            self.summary()
        );
    }

    fn answers(&self) -> Vec<Answer> {
        self.answers.lock().unwrap().clone()
    }

    fn count(&self, matching: impl Fn(&Answer) -> bool) -> usize {
        self.answers
            .lock()
            .unwrap()
            .iter()
            .filter(|a| matching(a))
            .count()
    }

    /// Whether every queue got an answer matching `matching` (every queue: both shards).
    fn on_every_queue(&self, matching: impl Fn(&Answer) -> bool) -> bool {
        let answers = self.answers.lock().unwrap();
        (0..QUEUES).all(|queue| answers.iter().any(|a| a.queue == queue && matching(a)))
    }
}

/// Stops the senders when dropped.
struct StopOnDrop<'a>(&'a Load);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.stop.store(true, Ordering::SeqCst);
    }
}

/// One sender: its own connection to the master, every queue in turn, until stopped. During
/// the cut it stops after [`NOT_AVAILABLE_PER_SENDER`] SLAVE_NOT_AVAILABLE answers and waits
/// for the heal.
fn send_until_stopped(master: SocketAddr, load: &Load, sender: usize) {
    let mut client = Client::connect(master);
    let mut not_available = 0;
    let mut index = 0usize;
    while !load.stop.load(Ordering::SeqCst) {
        let cut = load.phase.load(Ordering::SeqCst) == CUT;
        if cut && not_available >= NOT_AVAILABLE_PER_SENDER {
            poll_until(CONVERGE_LIMIT, || {
                load.phase.load(Ordering::SeqCst) != CUT || load.stop.load(Ordering::SeqCst)
            });
            continue;
        }
        let queue = i32::try_from((sender + index) % usize::try_from(QUEUES).unwrap()).unwrap();
        let mut body = format!("s{sender} n{index} ");
        body.extend(std::iter::repeat_n(
            '.',
            BODY_BYTES.saturating_sub(body.len()),
        ));
        let code = load.send(&mut client, queue, body);
        if cut && code == ResponseCode::SLAVE_NOT_AVAILABLE {
            not_available += 1;
        }
        index += 1;
    }
}

/// Every message answered SEND_OK so far is on the slave, read from the slave itself, at
/// the queue offset it was acknowledged with.
fn assert_slave_holds_every_send_ok(slave: &mut Client, load: &Load, when: &str) {
    let held = bodies_by_offset(slave, TOPIC);
    let acknowledged: Vec<Answer> = load
        .answers()
        .into_iter()
        .filter(|answer| answer.code == ResponseCode::SUCCESS)
        .collect();
    assert!(
        !acknowledged.is_empty(),
        "{when}: something was acknowledged"
    );
    for answer in &acknowledged {
        assert_eq!(
            held.get(&(answer.queue, answer.offset)),
            Some(&answer.body),
            "{when}: acknowledged, so on the slave: {answer:?}"
        );
    }
}

/// A standalone SYNC_MASTER whose sends wait [`SYNC_FLUSH_TIMEOUT_MS`] for the slave and
/// which drops a slave silent for [`HOUSEKEEPING_MS`].
fn start_sync_master(store: &Path) -> Broker {
    replication::start_sync_master(store, HOUSEKEEPING_MS, SYNC_FLUSH_TIMEOUT_MS)
}

/// The master's replication figures (GET_BROKER_HA_STATUS through comet-client's admin
/// API).
fn ha_status(master: &Broker) -> comet_client::admin::HaStatus {
    let config = comet_client::ClientConfig::with_namesrv(&master.namesrv());
    let admin = comet_client::Admin::new(config).unwrap();
    let status = admin.ha_status(&master.broker_addr.to_string()).unwrap();
    admin.shutdown();
    status
}

/// A cut the test heals before the master drops the slave: sends issued during it wait
/// and are answered FLUSH_SLAVE_TIMEOUT, the slave holds every SEND_OK message all along,
/// and the held bytes, delivered at the heal, let the same connections carry on to SEND_OK.
fn brief_cut(relay: &Relay, load: &Load, slave: &mut Client) {
    let accepted = relay.connections_accepted();
    relay.cut();
    load.phase.store(BRIEF_CUT, Ordering::SeqCst);
    assert_slave_holds_every_send_ok(slave, load, "at a brief cut");
    load.wait_until("FLUSH_SLAVE_TIMEOUT in a brief cut", || {
        load.count(|answer| {
            answer.sent_in == BRIEF_CUT && answer.code == ResponseCode::FLUSH_SLAVE_TIMEOUT
        }) > 0
    });
    assert_slave_holds_every_send_ok(slave, load, "in a brief cut");
    load.phase.store(BRIEF_HEALED, Ordering::SeqCst);
    relay.heal();
    load.wait_until("SEND_OK on every queue after a brief cut", || {
        load.on_every_queue(|answer| {
            answer.sent_in == BRIEF_HEALED && answer.code == ResponseCode::SUCCESS
        })
    });
    assert_eq!(
        relay.connections_accepted(),
        accepted,
        "the slave carried on over the connections it had; answers: {}",
        load.summary()
    );
}

/// A cut longer than `haHousekeepingInterval`: FLUSH_SLAVE_TIMEOUT, then
/// SLAVE_NOT_AVAILABLE once the master dropped the slave, the slave holding every SEND_OK
/// message all along; after the heal the slave reconnects, catches up, and sends are
/// answered SEND_OK again.
fn long_cut(relay: &Relay, load: &Load, master: &Broker, slave: &mut Client) {
    relay.cut();
    load.phase.store(CUT, Ordering::SeqCst);
    assert_slave_holds_every_send_ok(slave, load, "at the cut");
    load.wait_until("FLUSH_SLAVE_TIMEOUT after the cut", || {
        load.count(|answer| {
            answer.sent_in == CUT && answer.code == ResponseCode::FLUSH_SLAVE_TIMEOUT
        }) > 0
    });
    assert_slave_holds_every_send_ok(slave, load, "cut, slave not dropped");
    load.wait_until("SLAVE_NOT_AVAILABLE on every queue after the cut", || {
        load.on_every_queue(|answer| {
            answer.sent_in == CUT && answer.code == ResponseCode::SLAVE_NOT_AVAILABLE
        })
    });
    let status = ha_status(master);
    assert_eq!(
        status.in_sync_slave_nums, 0,
        "the silent slave is dropped: {status:?}"
    );
    assert!(status.ha_connection_info.is_empty(), "{status:?}");
    assert!(relay.is_cut());
    assert_slave_holds_every_send_ok(slave, load, "cut, slave dropped");
    for answer in load.answers() {
        if answer.sent_in == CUT {
            assert_ne!(answer.code, ResponseCode::SUCCESS, "while cut: {answer:?}");
        }
    }
    load.phase.store(HEALED, Ordering::SeqCst);
    relay.heal();
    load.wait_until("SEND_OK on every queue after the heal", || {
        load.on_every_queue(|answer| {
            answer.sent_in == HEALED && answer.code == ResponseCode::SUCCESS
        })
    });
    load.wait_until("SEND_OK answers after the heal", || {
        load.count(|answer| answer.sent_in == HEALED && answer.code == ResponseCode::SUCCESS)
            >= SEND_OK_AFTER_HEAL
    });
}

// Proves a SYNC_MASTER acknowledges nothing its slave lacks when the replication link is
// black-holed under load (8 senders). A brief cut, healed before the master drops the
// slave, only delays: FLUSH_SLAVE_TIMEOUT meanwhile, then SEND_OK on the same
// connections. After a long cut, sends issued after it are answered
// FLUSH_SLAVE_TIMEOUT, then SLAVE_NOT_AVAILABLE once the master drops the silent slave, and
// never SEND_OK while the cut lasts; at the cut and after it, with the link still cut,
// every message answered SEND_OK is on the slave at its acknowledged queue offset; after
// the heal the slave catches up, sends are answered SEND_OK again, and master and slave
// serve the same queues holding every message stored, no gap, no duplicate.
#[test]
fn a_cut_replication_link_acknowledges_nothing_the_slave_lacks() {
    let master_dir = TempDir::new("repl-cut-master");
    let slave_dir = TempDir::new("repl-cut-slave");
    let master = start_sync_master(master_dir.path());
    let mut master_client = master.client();
    create_topic(&mut master_client, TOPIC, QUEUES);
    let relay = Relay::start(SocketAddr::new(LOOPBACK.into(), master.ha_port)).unwrap();
    let mut options = slave_options();
    options.extend([
        format!("haMasterAddress={}", relay.addr()),
        format!("haHousekeepingInterval={HOUSEKEEPING_MS}"),
        "haSendHeartbeatInterval=300".to_owned(),
    ]);
    let slave = Node::start(slave_dir.path(), &master.namesrv(), options);
    let mut slave_client = slave.client();
    wait_until("the slave copies the topic", CONVERGE_LIMIT, || {
        topic_known(&mut slave_client, TOPIC)
    });
    let load = Load {
        phase: AtomicU8::new(LINKED),
        stop: AtomicBool::new(false),
        clock: AtomicU64::new(0),
        answers: Mutex::new(Vec::new()),
    };
    let mut probe = 0;
    load.wait_until("SEND_OK on every queue through the relay", || {
        probe += 1;
        let queue = probe % QUEUES;
        load.send(&mut master_client, queue, format!("probe {probe}"));
        load.on_every_queue(|answer| answer.code == ResponseCode::SUCCESS)
    });
    assert!(
        relay.open_connections() >= SHARDS,
        "each log follows through the relay"
    );

    std::thread::scope(|scope| {
        let senders: Vec<_> = (0..SENDERS)
            .map(|sender| {
                let load = &load;
                let addr = master.broker_addr;
                scope.spawn(move || send_until_stopped(addr, load, sender))
            })
            .collect();
        // The senders stop on every way out of this scope, a failed assertion included.
        let stopping = StopOnDrop(&load);
        load.wait_until("SEND_OK answers under load", || {
            load.count(|answer| answer.code == ResponseCode::SUCCESS) >= SEND_OK_BEFORE_CUT
        });
        let started = Instant::now();
        brief_cut(&relay, &load, &mut slave_client);
        let brief = started.elapsed();
        let started = Instant::now();
        long_cut(&relay, &load, &master, &mut slave_client);
        let long = started.elapsed();
        eprintln!("brief cut and heal {brief:?}, long cut and heal {long:?}");
        drop(stopping);
        for sender in senders {
            sender.join().unwrap();
        }
    });

    eprintln!("answers: {}", load.summary());
    let answers = load.answers();
    check_answers(&answers);
    // A SYNC_MASTER's consumers see what its in-sync slave holds: all of it once caught up.
    wait_until(
        "the master serves every stored message",
        CONVERGE_LIMIT,
        || {
            let served: usize = pull_topic(&mut master_client, TOPIC)
                .into_iter()
                .map(|records| decode_records(records.into()).len())
                .sum();
            served == answers.len()
        },
    );
    assert_slave_holds_every_send_ok(&mut slave_client, &load, "after the heal");
    wait_for_same_queues(&mut master_client, &mut slave_client, TOPIC, answers.len());
    // The sessions of the cut connections (and of any the slave gave up while cut) ended:
    // one per log is left, in sync.
    let mut status = ha_status(&master);
    let settled = poll_until(CONVERGE_LIMIT, || {
        status = ha_status(&master);
        status.in_sync_slave_nums == 1 && status.ha_connection_info.len() == SHARDS
    });
    assert!(settled, "{status:?}");
    let held = bodies_by_offset(&mut slave_client, TOPIC);
    for answer in &answers {
        assert_eq!(
            held.get(&(answer.queue, answer.offset)),
            Some(&answer.body),
            "stored, so on the slave after the heal: {answer:?}"
        );
    }
}

/// The answers as a whole: only send statuses (each message stored), one queue offset per
/// message, FLUSH_SLAVE_TIMEOUT then SLAVE_NOT_AVAILABLE for sends issued during the long
/// cut (once a queue's send was answered SLAVE_NOT_AVAILABLE, every later one of that queue
/// too), and SEND_OK for a send issued during a cut only when answered after its heal.
fn check_answers(answers: &[Answer]) {
    let mut codes: HashMap<ResponseCode, usize> = HashMap::new();
    let mut offsets = HashSet::new();
    for answer in answers {
        assert!(
            matches!(
                answer.code,
                ResponseCode::SUCCESS
                    | ResponseCode::FLUSH_SLAVE_TIMEOUT
                    | ResponseCode::SLAVE_NOT_AVAILABLE
            ),
            "{answer:?}"
        );
        assert!(
            offsets.insert((answer.queue, answer.offset)),
            "queue offset given twice: {answer:?}"
        );
        if answer.sent_in == CUT {
            *codes.entry(answer.code).or_default() += 1;
        }
        if matches!(answer.sent_in, BRIEF_CUT | CUT) && answer.code == ResponseCode::SUCCESS {
            assert!(
                answer.answered_in > answer.sent_in,
                "SEND_OK while cut: {answer:?}"
            );
        }
    }
    assert!(
        codes.contains_key(&ResponseCode::FLUSH_SLAVE_TIMEOUT),
        "{codes:?}"
    );
    // Per queue: a queue belongs to one shard, and each shard drops its slave on its own.
    for queue in 0..QUEUES {
        let in_queue = || answers.iter().filter(move |a| a.queue == queue);
        let dropped_at = in_queue()
            .filter(|a| a.sent_in == CUT && a.code == ResponseCode::SLAVE_NOT_AVAILABLE)
            .map(|a| a.answered_at)
            .min()
            .expect("SLAVE_NOT_AVAILABLE on every queue during the cut");
        for answer in in_queue() {
            let still_cut = answer.sent_in == CUT && answer.answered_in == CUT;
            if still_cut && answer.issued_at > dropped_at {
                assert_eq!(
                    answer.code,
                    ResponseCode::SLAVE_NOT_AVAILABLE,
                    "issued after the slave was dropped, still cut: {answer:?}"
                );
            }
        }
    }
}
