//! A slave whose shard count differs from its master's log count, on loopback: a name
//! server in this process, a master and a slave as broker processes. The slave hosts every
//! master log (log `l` on shard `l % shards`) once it learned the master's count, which its
//! first start records and a restart applies (see
//! `docs/architecture.md#slave-and-master-shard-counts`).

mod common;
mod sched_common;

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

use comet_nameserver::NameServerThread;
use comet_proto::message::{decode_records, MessageExt};
use comet_proto::properties::{names, Properties};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{free_port, poll_until};
use common::replication::{assert_same_view, send_messages, topic_known, Node, CONVERGE_LIMIT};
use common::{create_topic, pull_request, query_by_key, send_request_with, Client, TempDir};
use sched_common::transaction::{end_transaction, Half, Producer, COMMIT, PREPARED};
use sched_common::{send_with, send_with_delay};

/// Queues of the test topic: enough that every log of a 2-shard master holds some.
const QUEUES: i32 = 6;
const TOPIC: &str = "ReplHosted";

/// An `-o` pair of every broker here: a build machine's disk may be past the default hard
/// mark (90%) with compiler output, and these messages need no such guard.
const DISK_OPTION: &str = "diskSpaceWarningLevelRatio=99";

fn master_options(ha_port: u16) -> Vec<String> {
    vec![
        "brokerRole=ASYNC_MASTER".to_owned(),
        "brokerId=0".to_owned(),
        format!("haListenPort={ha_port}"),
        DISK_OPTION.to_owned(),
    ]
}

fn slave_options(master_ha_port: u16) -> Vec<String> {
    vec![
        "brokerRole=SLAVE".to_owned(),
        "brokerId=1".to_owned(),
        format!("haMasterAddress=127.0.0.1:{master_ha_port}"),
        DISK_OPTION.to_owned(),
    ]
}

/// A name server in this process and a master broker process registered with it, each in
/// a temporary directory named after the test; the test starts the slave once the master
/// holds what the slave should find.
struct Cluster {
    /// The master; killed on drop before the name servers stop.
    master: Node,
    /// The master's HA listen port, which its slave connects to.
    master_ha: u16,
    namesrv: NameServerThread,
    /// A name server of the slave's own, when it must not copy the master's metadata.
    slave_namesrv: Option<NameServerThread>,
    /// Prefix of the temporary directories' names.
    name: String,
    /// Removed last, once every process using them has gone.
    dirs: Vec<TempDir>,
}

impl Cluster {
    /// Starts the name server and a master with `cores` shards and `extra` `-o` pairs.
    fn start(name: &str, cores: usize, extra: &[&str]) -> Cluster {
        let namesrv_dir = TempDir::new(&format!("{name}-ns"));
        let namesrv = start_namesrv(namesrv_dir.path());
        let master_dir = TempDir::new(&format!("{name}-master"));
        let master_ha = free_port();
        let mut options = master_options(master_ha);
        options.extend(extra.iter().map(|option| (*option).to_owned()));
        let master = start_node(
            master_dir.path(),
            &namesrv.addr().to_string(),
            cores,
            options,
        );
        Cluster {
            master,
            master_ha,
            namesrv,
            slave_namesrv: None,
            name: name.to_owned(),
            dirs: vec![namesrv_dir, master_dir],
        }
    }

    /// Starts a slave with `cores` shards registered with the master's name server, restarted
    /// once it recorded the master's `logs` (see [`start_slave`]).
    fn start_slave(&mut self, cores: usize, logs: usize) -> Node {
        let namesrv = self.namesrv.addr().to_string();
        self.slave_on(&namesrv, cores, logs)
    }

    /// Starts a slave as [`Cluster::start_slave`] does, but registered with a name server of
    /// its own, so it never copies its master's metadata (delay cursors included).
    fn start_slave_apart(&mut self, cores: usize, logs: usize) -> Node {
        let namesrv_dir = TempDir::new(&format!("{}-ns-slave", self.name));
        let namesrv = start_namesrv(namesrv_dir.path());
        let addr = namesrv.addr().to_string();
        self.dirs.push(namesrv_dir);
        self.slave_namesrv = Some(namesrv);
        self.slave_on(&addr, cores, logs)
    }

    fn slave_on(&mut self, namesrv: &str, cores: usize, logs: usize) -> Node {
        let slave_dir = TempDir::new(&format!("{}-slave", self.name));
        let slave = start_slave(slave_dir.path(), namesrv, cores, self.master_ha, logs);
        self.dirs.push(slave_dir);
        slave
    }

    /// Fails the master over to `slave` by hand: the master stops, then the slave, which
    /// comes back as a master. The clients of both go first.
    fn promote(&mut self, slave: &mut Node, master_client: Client, slave_client: Client) {
        self.promote_with(slave, master_client, slave_client, &[]);
    }

    /// Fails over as [`Cluster::promote`] does, the promoted slave with `extra` `-o` pairs.
    fn promote_with(
        &mut self,
        slave: &mut Node,
        master_client: Client,
        slave_client: Client,
        extra: &[&str],
    ) {
        drop(master_client);
        self.master.stop();
        drop(slave_client);
        slave.stop();
        slave.options = master_options(free_port());
        slave
            .options
            .extend(extra.iter().map(|option| (*option).to_owned()));
        slave.spawn();
    }

    /// Ends the master (stopped or not), then the name servers.
    fn stop(self) {
        let Cluster {
            master,
            namesrv,
            slave_namesrv,
            dirs,
            ..
        } = self;
        drop(master);
        namesrv.stop();
        if let Some(namesrv) = slave_namesrv {
            namesrv.stop();
        }
        drop(dirs);
    }
}

/// A broker registered with `namesrv`, its store and standard error log in `dir`.
fn start_node(dir: &Path, namesrv: &str, cores: usize, options: Vec<String>) -> Node {
    let log = dir.join("broker.log");
    Node::start_with(&dir.join("store"), namesrv, cores, options, Some(&log))
}

/// Every message of `queue` a broker serves, from offset 0 on.
fn pull_queue(client: &mut Client, queue: i32) -> Vec<MessageExt> {
    pull_queue_of(client, TOPIC, queue)
}

/// Every message of `queue` of `topic` a broker serves, from offset 0 on.
fn pull_queue_of(client: &mut Client, topic: &str, queue: i32) -> Vec<MessageExt> {
    let mut messages = Vec::new();
    let mut offset = 0;
    loop {
        let response = client.call(pull_request("hosted_cg", topic, queue, offset, 32, 0));
        if response.response_code() != ResponseCode::SUCCESS {
            return messages;
        }
        let batch = decode_records(response.body.clone());
        let Some(last) = batch.last() else {
            return messages;
        };
        offset = last.queue_offset + 1;
        messages.extend(batch);
    }
}

/// What identifies a stored message: queue offset, physical offset, msgId, body.
type Stored = (i64, i64, String, Vec<u8>);

fn stored(messages: &[MessageExt]) -> Vec<Stored> {
    messages
        .iter()
        .map(|message| {
            (
                message.queue_offset,
                message.commit_log_offset,
                message.msg_id.clone(),
                message.body.to_vec(),
            )
        })
        .collect()
}

fn pull_topic(client: &mut Client) -> Vec<Vec<Stored>> {
    (0..QUEUES)
        .map(|queue| stored(&pull_queue(client, queue)))
        .collect()
}

/// The log id of a physical offset (bits 62..56).
fn log_of(physical: i64) -> i64 {
    physical >> 56
}

/// Waits until `slave` serves exactly what `master` does for every queue of the topic, and
/// checks that is `expected` messages, dense from offset 0 in every queue, in `logs` logs.
fn wait_for_same_queues(master: &mut Client, slave: &mut Client, expected: usize, logs: usize) {
    let on_master = pull_topic(master);
    let held: usize = on_master.iter().map(Vec::len).sum();
    assert_eq!(held, expected, "the master holds what was sent");
    let used: BTreeSet<i64> = on_master
        .iter()
        .flatten()
        .map(|(_, physical, _, _)| log_of(*physical))
        .collect();
    assert_eq!(
        used,
        (0..i64::try_from(logs).unwrap()).collect(),
        "the topic's queues span every log"
    );
    let mut on_slave = Vec::new();
    let same = poll_until(CONVERGE_LIMIT, || {
        on_slave = pull_topic(slave);
        on_slave == on_master
    });
    for (queue, messages) in on_slave.iter().enumerate() {
        let offsets: Vec<i64> = messages.iter().map(|stored| stored.0).collect();
        let dense: Vec<i64> = (0..i64::try_from(offsets.len()).unwrap()).collect();
        assert_eq!(offsets, dense, "queue {queue}: no gap, no duplicate");
    }
    assert!(
        same,
        "the slave serves the master's queues: same offsets, physical offsets, ids, bodies"
    );
}

/// Every message of the topic viewed by its physical offset (VIEW_MESSAGE_BY_ID) is the
/// same record on both brokers; the messages lie in `logs_expected` logs.
fn assert_views_match(master: &mut Client, slave: &mut Client, logs_expected: usize) {
    let mut logs = BTreeSet::new();
    for messages in pull_topic(slave) {
        for (_, physical, msg_id, _) in messages {
            assert_same_view(master, slave, physical, &msg_id);
            logs.insert(log_of(physical));
        }
    }
    assert_eq!(
        logs.len(),
        logs_expected,
        "messages of every log were viewed"
    );
}

/// QUERY_MESSAGE by unique key finds the first message of every queue on `client`, whose
/// queues lie in `logs_expected` logs.
fn assert_found_by_key(client: &mut Client, logs_expected: usize) {
    let mut logs = BTreeSet::new();
    for queue in 0..QUEUES {
        let first = pull_queue(client, queue).remove(0);
        let key = first.uniq_key().expect("a unique key").to_owned();
        let found = query_by_key(client, TOPIC, &key, Some(true));
        let offsets: Vec<i64> = found.iter().map(|m| m.commit_log_offset).collect();
        assert_eq!(offsets, vec![first.commit_log_offset], "key {key}");
        logs.insert(log_of(first.commit_log_offset));
    }
    assert_eq!(logs.len(), logs_expected, "keys of every log were queried");
}

/// The `logs` entries of GET_BROKER_HA_STATUS.
fn ha_status_logs(client: &mut Client) -> Vec<serde_json::Value> {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_BROKER_HA_STATUS,
        0,
    ));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    let mut body: serde_json::Value = serde_json::from_slice(&response.body).unwrap();
    match body["logs"].take() {
        serde_json::Value::Array(logs) => logs,
        other => panic!("no list of logs: {other}"),
    }
}

/// The log ids GET_BROKER_HA_STATUS lists, and whether each is connected to its master.
fn ha_logs(client: &mut Client) -> Vec<(u64, bool)> {
    ha_status_logs(client)
        .iter()
        .map(|log| {
            (
                log["logId"].as_u64().unwrap(),
                log["connected"].as_bool().unwrap_or(false),
            )
        })
        .collect()
}

/// A name server on a free loopback port, in this process.
fn start_namesrv(dir: &Path) -> NameServerThread {
    let config = comet_nameserver::NamesrvConfig {
        listen_port: free_port(),
        bind_address: "127.0.0.1".parse().unwrap(),
        kv_config_path: dir.join("kvConfig.json"),
        ..comet_nameserver::NamesrvConfig::default()
    };
    NameServerThread::spawn(config).unwrap()
}

/// Starts a slave of the master at `master_ha`, waits for its first start to record the
/// master's `logs` and ask for a restart, and restarts it.
fn start_slave(dir: &Path, namesrv: &str, cores: usize, master_ha: u16, logs: usize) -> Node {
    let mut slave = start_node(dir, namesrv, cores, slave_options(master_ha));
    let recorded = slave.store.join("master-logs");
    let expected = format!("logs {logs}\n");
    let told = poll_until(CONVERGE_LIMIT, || {
        slave
            .log_text()
            .contains("hosts every master log after a restart")
            && std::fs::read_to_string(&recorded).is_ok_and(|text| text == expected)
    });
    assert!(told, "{}", slave.log_text());
    slave.stop();
    slave.spawn();
    slave
}

/// Checks the slave copied the topic and serves the `sent` messages as the master does,
/// views by physical offset included, from `logs` logs.
fn assert_serves_copy(master: &mut Client, slave: &mut Client, sent: usize, logs: usize) {
    let known = poll_until(CONVERGE_LIMIT, || topic_known(slave, TOPIC));
    assert!(known, "the slave copies the topic");
    wait_for_same_queues(master, slave, sent, logs);
    assert_views_match(master, slave, logs);
}

/// Sends `count` more messages after the `sent` ones and checks the slave follows, with
/// each of the master's `logs` logs listed as connected.
fn assert_follows(master: &mut Client, slave: &mut Client, sent: usize, count: usize, logs: u64) {
    send_messages(master, TOPIC, QUEUES, sent, count);
    wait_for_same_queues(master, slave, sent + count, usize::try_from(logs).unwrap());
    let expected: Vec<(u64, bool)> = (0..logs).map(|log| (log, true)).collect();
    let connected = poll_until(CONVERGE_LIMIT, || ha_logs(slave) == expected);
    assert!(connected, "{:?}", ha_logs(slave));
}

/// Waits until the slave's logs end where the master's do.
fn wait_caught_up(master: &mut Client, slave: &mut Client) {
    let caught_up = poll_until(CONVERGE_LIMIT, || {
        written_ends(slave) == written_ends(master)
    });
    assert!(caught_up, "the slave holds the master's logs");
}

// Proves a 1-core slave of a 2-core master: its first start learns the master's two logs,
// records them and says a restart hosts them; after the restart it holds every message of
// both logs with the master's queue offsets, physical offsets and msgIds, serves pulls and
// views by offset for queues of both logs, follows new sends, and reports both logs. Then
// the slave is promoted by hand (restarted as a 1-core master): it serves every message it
// held, the log it hosted included, and appends new sends after them.
#[test]
fn a_one_core_slave_hosts_both_logs_of_a_two_core_master() {
    let mut cluster = Cluster::start("repl-hosted", 2, &[]);
    let mut master_client = cluster.master.client();
    create_topic(&mut master_client, TOPIC, QUEUES);
    send_messages(&mut master_client, TOPIC, QUEUES, 0, 30);

    let mut slave = cluster.start_slave(1, 2);
    let mut slave_client = slave.client();
    assert_serves_copy(&mut master_client, &mut slave_client, 30, 2);
    assert_found_by_key(&mut slave_client, 2);
    assert_follows(&mut master_client, &mut slave_client, 30, 18, 2);

    // Promotion by hand: the master goes, the slave comes back as a 1-core master.
    let held = pull_topic(&mut slave_client);
    cluster.promote(&mut slave, master_client, slave_client);
    let mut promoted = slave.client();
    assert_eq!(
        pull_topic(&mut promoted),
        held,
        "the promoted slave serves what it held"
    );
    send_messages(&mut promoted, TOPIC, QUEUES, 48, QUEUES as usize);
    let after = pull_topic(&mut promoted);
    for (queue, (before, now)) in held.iter().zip(&after).enumerate() {
        assert_eq!(
            &now[..before.len()],
            &before[..],
            "queue {queue} keeps its messages"
        );
        let added: Vec<i64> = now[before.len()..].iter().map(|stored| stored.0).collect();
        assert_eq!(
            added,
            vec![i64::try_from(before.len()).unwrap()],
            "queue {queue}"
        );
    }
    drop(promoted);
    drop(slave);
    cluster.stop();
}

// Proves the reverse case, a 2-core slave of a 1-core master: after the restart its first
// start asks for, shard 0 hosts the master's only log and shard 1 hosts none; the slave
// serves every message with the master's offsets and reports the one log, connected.
#[test]
fn a_two_core_slave_of_a_one_core_master_leaves_a_shard_idle() {
    let mut cluster = Cluster::start("repl-idle", 1, &[]);
    let mut master_client = cluster.master.client();
    create_topic(&mut master_client, TOPIC, QUEUES);
    send_messages(&mut master_client, TOPIC, QUEUES, 0, 24);
    let slave = cluster.start_slave(2, 1);
    let mut slave_client = slave.client();
    assert_serves_copy(&mut master_client, &mut slave_client, 24, 1);
    assert_follows(&mut master_client, &mut slave_client, 24, 12, 1);
    drop(slave_client);
    drop(slave);
    drop(master_client);
    cluster.stop();
}

/// Each log's written end as GET_BROKER_HA_STATUS reports it.
fn written_ends(client: &mut Client) -> Vec<(u64, u64)> {
    ha_status_logs(client)
        .iter()
        .map(|log| {
            (
                log["logId"].as_u64().unwrap(),
                log["writtenOffset"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// How many times each message of `topic` is in its queues (by UNIQ_KEY).
fn deliveries(client: &mut Client, topic: &str) -> std::collections::BTreeMap<String, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for queue in 0..QUEUES {
        for message in pull_queue_of(client, topic, queue) {
            let key = message.uniq_key().unwrap_or_default().to_owned();
            *counts.entry(key).or_insert(0) += 1;
        }
    }
    counts
}

/// Sends a message to `topic` due `delay_ms` after its arrival; returns its UNIQ_KEY.
fn send_timed(client: &mut Client, topic: &str, queue: i32, delay_ms: i64) -> String {
    let body = format!("due in {delay_ms} ms");
    send_with_delay(
        client,
        topic,
        queue,
        (names::TIMER_DELAY_MS, delay_ms),
        &body,
    )
}

/// Waits until `promoted` has delivered every one of `late` (`what`), then checks each of
/// `early` and `late` is in `topic` exactly once and nothing else is.
fn assert_delivered_once(
    promoted: &mut Client,
    topic: &str,
    early: &[String],
    late: &[String],
    what: &str,
) {
    let all_there = poll_until(CONVERGE_LIMIT, || {
        let counts = deliveries(promoted, topic);
        late.iter().all(|key| counts.contains_key(key))
    });
    let counts = deliveries(promoted, topic);
    assert!(all_there, "{what} are delivered: {counts:?}");
    for key in early.iter().chain(late) {
        assert_eq!(
            counts.get(key),
            Some(&1),
            "{key} delivered once: {counts:?}"
        );
    }
    assert_eq!(counts.len(), early.len() + late.len(), "{counts:?}");
}

// Proves the timer wheel's progress survives a failover to a slave with fewer cores: timed
// messages the old master delivered are not delivered again by the promoted slave, and
// those still pending at the failover are delivered by it, each exactly once. The slave
// holds no wheel of its own (its wheel is derived from the log when it is promoted).
#[test]
fn a_promoted_slave_delivers_pending_timers_once_and_delivered_ones_never_again() {
    let mut cluster = Cluster::start("repl-timer", 2, &[]);
    let mut master_client = cluster.master.client();
    let real = "ReplTimerReal";
    create_topic(&mut master_client, real, QUEUES);
    let mut slave = cluster.start_slave(1, 2);
    let early: Vec<String> = (0..QUEUES)
        .map(|queue| send_timed(&mut master_client, real, queue, 300))
        .collect();
    let late: Vec<String> = (0..QUEUES)
        .map(|queue| send_timed(&mut master_client, real, queue, 8_000))
        .collect();
    let delivered = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut master_client, real).len() == early.len()
    });
    assert!(delivered, "the master delivers the early timers");
    let mut slave_client = slave.client();
    wait_caught_up(&mut master_client, &mut slave_client);
    // The slave serves the topic once its metadata copy brought it over.
    let copied = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut slave_client, real).len() == early.len()
    });
    assert!(copied, "{:?}", deliveries(&mut slave_client, real));

    cluster.promote(&mut slave, master_client, slave_client);
    let mut promoted = slave.client();
    assert_delivered_once(&mut promoted, real, &early, &late, "the pending timers");
    drop(promoted);
    drop(slave);
    cluster.stop();
}

const TX_GROUP: &str = "hosted_tx_pg";
const TX_TOPIC: &str = "ReplTxReal";

/// Sends a half message of [`TX_GROUP`] to queue 0 of the transaction topic and waits for
/// it to be stored.
fn send_half(client: &mut Client, body: &str) -> Half {
    let mut properties = Properties::new();
    properties.insert(names::TRAN_MSG, "true");
    properties.insert(names::PGROUP, TX_GROUP);
    properties.insert(names::WAIT, "true");
    let request = send_with(
        TX_TOPIC,
        0,
        body.as_bytes(),
        &properties,
        PREPARED,
        TX_GROUP,
    );
    Half::from_send(&client.call_ok(request))
}

/// END_TRANSACTION (one-way, as Java producers send it) committing `half`.
fn commit(client: &mut Client, half: &Half, from_check: bool) {
    end_transaction(client, TX_TOPIC, TX_GROUP, half, COMMIT, from_check);
}

/// The bodies of the messages in queue 0 of the transaction topic.
fn committed_bodies(client: &mut Client) -> Vec<String> {
    pull_queue_of(client, TX_TOPIC, 0)
        .iter()
        .map(|message| String::from_utf8_lossy(&message.body).into_owned())
        .collect()
}

// Proves delay levels survive a failover to a slave with fewer cores: messages of level 1
// (1 s) the old master delivered are not delivered again by the promoted slave, and those
// of level 3 (10 s) still pending at the failover are delivered by it, each exactly once.
#[test]
fn a_promoted_slave_delivers_pending_delay_levels_once() {
    let mut cluster = Cluster::start("repl-delay", 2, &[]);
    let mut master_client = cluster.master.client();
    let real = "ReplDelayReal";
    create_topic(&mut master_client, real, QUEUES);
    let mut slave = cluster.start_slave(1, 2);
    let early: Vec<String> = (0..QUEUES)
        .map(|queue| send_with_delay(&mut master_client, real, queue, (names::DELAY, 1), "1 s"))
        .collect();
    let late: Vec<String> = (0..QUEUES)
        .map(|queue| send_with_delay(&mut master_client, real, queue, (names::DELAY, 3), "10 s"))
        .collect();
    let delivered = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut master_client, real).len() == early.len()
    });
    assert!(delivered, "the master delivers level 1");
    let mut slave_client = slave.client();
    wait_caught_up(&mut master_client, &mut slave_client);

    cluster.promote(&mut slave, master_client, slave_client);
    let mut promoted = slave.client();
    let pending = "the pending level-3 messages";
    assert_delivered_once(&mut promoted, real, &early, &late, pending);
    drop(promoted);
    drop(slave);
    cluster.stop();
}

// Proves the delay levels' check at promotion covers every entry its old master may have
// delivered, beyond the one round a crash leaves in doubt: the slave registers with a name
// server of its own, so it never copies its master's delay cursors (the stalest copy
// possible), while its master delivers more than a round (2048 entries) of level 1. The
// promoted slave delivers none of them again.
#[test]
fn a_promoted_slave_with_stale_delay_cursors_delivers_nothing_twice() {
    const SENT: usize = 2100;
    let mut cluster = Cluster::start("repl-stale", 2, &[]);
    let mut master_client = cluster.master.client();
    let real = "ReplStaleReal";
    create_topic(&mut master_client, real, 1);
    let mut slave = cluster.start_slave_apart(1, 2);
    let mut properties = Properties::new();
    properties.insert(names::DELAY, "1");
    properties.insert(names::WAIT, "true");
    for chunk in (0..SENT).collect::<Vec<_>>().chunks(64) {
        for index in chunk {
            let body = format!("level 1 #{index}");
            master_client.send(send_request_with(real, 0, body.as_bytes(), &properties));
        }
        for _ in chunk {
            let response = master_client.receive();
            assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        }
    }
    let delivered = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut master_client, real).len() == SENT
    });
    assert!(delivered, "the master delivers level 1");
    let mut slave_client = slave.client();
    wait_caught_up(&mut master_client, &mut slave_client);

    cluster.promote(&mut slave, master_client, slave_client);
    let mut promoted = slave.client();
    create_topic(&mut promoted, real, 1);
    // The promoted slave's delivery has run its first rounds once a message of the next
    // level 1 round, sent now, is delivered after everything in the schedule queue before it.
    let marker = send_with_delay(
        &mut promoted,
        real,
        0,
        (names::DELAY, 1),
        "after the failover",
    );
    let marked = poll_until(CONVERGE_LIMIT, || {
        deliveries(&mut promoted, real).contains_key(&marker)
    });
    assert!(marked, "the promoted slave delivers level 1");
    let counts = deliveries(&mut promoted, real);
    let twice: Vec<&String> = counts
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(k, _)| k)
        .collect();
    assert!(twice.is_empty(), "{} delivered twice", twice.len());
    assert_eq!(counts.len(), SENT + 1);
    drop(promoted);
    drop(slave);
    cluster.stop();
}

// Proves transaction state survives a failover to a slave with fewer cores: a half message
// committed on the old master is neither checked back nor committed again by the promoted
// slave, and a half still pending at the failover is checked back on the producer's
// connection to the promoted slave, whose commit stores it once.
#[test]
fn a_promoted_slave_checks_back_the_pending_half_only() {
    // The old master must not check the pending half back before the failover.
    let mut cluster = Cluster::start("repl-tx", 2, &["transactionTimeOut=600000"]);
    let mut master_client = cluster.master.client();
    create_topic(&mut master_client, TX_TOPIC, 1);
    let mut slave = cluster.start_slave(1, 2);
    let committed = send_half(&mut master_client, "committed before the failover");
    commit(&mut master_client, &committed, false);
    let pending = send_half(&mut master_client, "pending at the failover");
    let stored = poll_until(CONVERGE_LIMIT, || {
        committed_bodies(&mut master_client) == ["committed before the failover"]
    });
    assert!(stored, "{:?}", committed_bodies(&mut master_client));
    let mut slave_client = slave.client();
    wait_caught_up(&mut master_client, &mut slave_client);
    let copied = poll_until(CONVERGE_LIMIT, || {
        committed_bodies(&mut slave_client) == ["committed before the failover"]
    });
    assert!(copied, "{:?}", committed_bodies(&mut slave_client));

    let check_soon = ["transactionCheckInterval=300", "transactionTimeOut=1000"];
    cluster.promote_with(&mut slave, master_client, slave_client, &check_soon);
    let mut producer = Producer::connect(slave.client(), "127.0.0.1@hosted-tx", TX_GROUP);
    let check = producer
        .next_check(CONVERGE_LIMIT)
        .expect("the pending half is checked back");
    let messages = decode_records(check.body.clone());
    assert_eq!(messages.len(), 1);
    assert_eq!(messages[0].body.as_ref(), b"pending at the failover");
    assert_eq!(messages[0].uniq_key(), Some(pending.unique_key.as_str()));
    commit(&mut producer.client, &Half::from_check(&check), true);
    let mut reader = slave.client();
    let both = poll_until(CONVERGE_LIMIT, || committed_bodies(&mut reader).len() == 2);
    assert!(both, "{:?}", committed_bodies(&mut reader));
    // A further check would come within a few check intervals past the timeout.
    assert!(
        producer.next_check(Duration::from_millis(2500)).is_none(),
        "nothing is left to check"
    );
    assert_eq!(
        committed_bodies(&mut reader),
        ["committed before the failover", "pending at the failover"]
    );
    drop(reader);
    drop(producer);
    drop(slave);
    cluster.stop();
}
