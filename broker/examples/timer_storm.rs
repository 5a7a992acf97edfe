//! Timer storm: loads N timed messages (default 1,000,000) all due at the same instant into a
//! standalone `comet-broker`, then measures how late each was stored in its real topic
//! (store timestamp of the delivered record minus its `TIMER_OUT_MS`), and when the last one
//! became visible to consumers.
//!
//! Build and run (release; the broker binary is taken from the same target directory):
//!
//! ```text
//! cargo build --release -p comet-broker --bin comet-broker --example timer_storm
//! target/release/examples/timer_storm --messages 1000000 --cores 2
//! ```
//!
//! The store goes to a temporary directory that is removed at the end; the broker is
//! stopped (SIGTERM, then SIGKILL after 30 s) on every exit path, and killed by a panic hook
//! when the harness panics (release builds abort on panic, so `Drop` would not run).
//!
//! Besides wall-clock lateness, which depends on how much CPU the broker gets on a shared
//! machine, it reports the CPU time (user + system, from `/proc`) each broker shard's threads
//! used from 200 ms before the due time until all messages were visible, and the machine's
//! load average, so runs on a busy machine can be read.

use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use comet_proto::bytes::BytesMut;
use comet_proto::frame::encode;
use comet_proto::headers::{PullMessageRequestHeader, SendMessageRequestHeaderV2};
use comet_proto::message::decode_records;
use comet_proto::properties::{names, Properties};
use comet_proto::{Decoded, FrameDecoder, RemotingCommand, RequestCode, ResponseCode};

const TOPIC: &str = "TimerStorm";
const QUEUES: i32 = 8;

struct Options {
    messages: usize,
    cores: usize,
    body_bytes: usize,
    connections: usize,
    window: usize,
    lead_secs: i64,
}

fn parse_options() -> Options {
    let mut options = Options {
        messages: 1_000_000,
        cores: 2,
        body_bytes: 32,
        connections: 8,
        window: 256,
        lead_secs: 60,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let value = pair.get(1).map(String::as_str).unwrap_or("");
        let number = || value.parse::<usize>().unwrap_or_else(|_| usage(&pair[0]));
        match pair[0].as_str() {
            "--messages" => options.messages = number(),
            "--cores" => options.cores = number(),
            "--body-bytes" => options.body_bytes = number(),
            "--connections" => options.connections = number(),
            "--window" => options.window = number(),
            "--lead-secs" => options.lead_secs = i64::try_from(number()).unwrap_or(60),
            other => usage(other),
        }
    }
    assert!(options.messages > 0 && options.connections > 0 && options.window > 0);
    options
}

fn usage(bad: &str) -> ! {
    eprintln!(
        "bad argument {bad}; options: --messages N --cores N --body-bytes N --connections N \
         --window N --lead-secs N"
    );
    std::process::exit(2)
}

fn now_ms() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The broker process; stopped on drop.
struct Broker {
    child: Child,
    addr: SocketAddr,
    store: PathBuf,
}

impl Broker {
    fn start(cores: usize) -> Broker {
        let exe = std::env::current_exe().unwrap();
        let binary = exe.parent().unwrap().parent().unwrap().join("comet-broker");
        assert!(
            binary.exists(),
            "build the broker first: {}",
            binary.display()
        );
        let store = std::env::temp_dir().join(format!("comet-timer-storm-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&store);
        let port = free_port();
        let child = Command::new(binary)
            .arg("--standalone")
            .args(["--cores", &cores.to_string()])
            .args(["--bind-address", "127.0.0.1"])
            .args(["--listen-port", &port.to_string()])
            .args(["--namesrv", &format!("127.0.0.1:{}", free_port())])
            .args(["--store", &store.display().to_string()])
            .env(
                "RUST_LOG",
                std::env::var("RUST_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start comet-broker");
        install_cleanup_on_panic(child.id(), store.clone());
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        while TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "broker did not start");
            std::thread::sleep(Duration::from_millis(50));
        }
        Broker { child, addr, store }
    }
}

impl Drop for Broker {
    fn drop(&mut self) {
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().ok().flatten().is_none() {
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = std::fs::remove_dir_all(&self.store);
    }
}

/// The broker and store a panic must not leave behind.
static ON_PANIC: OnceLock<(u32, PathBuf)> = OnceLock::new();

/// Makes any panic (in any thread) kill the broker and remove its store before the process
/// aborts.
fn install_cleanup_on_panic(pid: u32, store: PathBuf) {
    if ON_PANIC.set((pid, store)).is_err() {
        return;
    }
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        default_hook(info);
        if let Some((pid, store)) = ON_PANIC.get() {
            // SAFETY: kill only sends a signal to the broker this harness started.
            unsafe { libc::kill(*pid as i32, libc::SIGKILL) };
            let mut status = 0;
            // SAFETY: reaps that child; its store can then be removed.
            unsafe { libc::waitpid(*pid as i32, &mut status, 0) };
            let _ = std::fs::remove_dir_all(store);
        }
    }));
}

/// A pipelining connection.
struct Connection {
    stream: TcpStream,
    buffer: BytesMut,
    next_opaque: i32,
}

impl Connection {
    fn open(addr: SocketAddr) -> Connection {
        let stream = TcpStream::connect(addr).unwrap();
        stream.set_nodelay(true).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        Connection {
            stream,
            buffer: BytesMut::new(),
            next_opaque: 1,
        }
    }

    fn send(&mut self, mut request: RemotingCommand, out: &mut BytesMut) {
        request.opaque = self.next_opaque;
        self.next_opaque += 1;
        encode(&request, out);
    }

    fn flush(&mut self, out: &mut BytesMut) {
        self.stream.write_all(out).unwrap();
        out.clear();
    }

    fn receive(&mut self) -> RemotingCommand {
        let decoder = FrameDecoder::default();
        loop {
            if let Some(Decoded::Command(command)) = decoder.decode(&mut self.buffer).unwrap() {
                if command.is_response() {
                    return command;
                }
                continue;
            }
            let mut chunk = [0u8; 65536];
            let read = self
                .stream
                .read(&mut chunk)
                .expect("response before timeout");
            assert!(read > 0, "connection closed by the broker");
            self.buffer.extend_from_slice(&chunk[..read]);
        }
    }

    fn call(&mut self, request: RemotingCommand) -> RemotingCommand {
        let mut out = BytesMut::new();
        self.send(request, &mut out);
        self.flush(&mut out);
        self.receive()
    }
}

fn timed_send(index: usize, due_ms: i64, body: &[u8]) -> RemotingCommand {
    let mut properties = Properties::new();
    properties.insert(names::TIMER_DELIVER_MS, due_ms.to_string());
    properties.insert(names::KEYS, format!("k{index}"));
    let header = SendMessageRequestHeaderV2 {
        producer_group: "storm_pg".into(),
        topic: TOPIC.into(),
        default_topic: "TBW102".into(),
        default_topic_queue_nums: QUEUES,
        queue_id: i32::try_from(index).unwrap() % QUEUES,
        sys_flag: 0,
        born_timestamp: now_ms(),
        flag: 0,
        properties: Some(properties.encode()),
        reconsume_times: Some(0),
        unit_mode: Some(false),
        max_reconsume_times: None,
        batch: Some(false),
        broker_name: None,
    };
    RemotingCommand::request(RequestCode::SEND_MESSAGE_V2, 0)
        .with_header(&header)
        .with_body(body.to_vec())
}

/// Sends messages `index ≡ lane (mod lanes)` with up to `window` in flight; returns errors.
fn load_lane(addr: SocketAddr, lane: usize, lanes: usize, options: &Options, due_ms: i64) -> usize {
    let mut connection = Connection::open(addr);
    let body = vec![b'x'; options.body_bytes];
    let mut out = BytesMut::new();
    let (mut in_flight, mut errors) = (0usize, 0usize);
    let mut indexes = (lane..options.messages).step_by(lanes).peekable();
    while indexes.peek().is_some() || in_flight > 0 {
        while in_flight < options.window {
            let Some(index) = indexes.next() else { break };
            connection.send(timed_send(index, due_ms, &body), &mut out);
            in_flight += 1;
        }
        connection.flush(&mut out);
        let response = connection.receive();
        in_flight -= 1;
        if response.response_code() != ResponseCode::SUCCESS {
            errors += 1;
            if errors < 5 {
                eprintln!(
                    "send refused: {:?} {:?}",
                    response.response_code(),
                    response.remark
                );
            }
        }
    }
    errors
}

fn max_offsets(connection: &mut Connection) -> i64 {
    (0..QUEUES)
        .map(|queue_id| {
            let mut request = RemotingCommand::request(RequestCode::GET_MAX_OFFSET, 0);
            request.ext_fields.insert("topic", TOPIC);
            request.ext_fields.insert("queueId", queue_id.to_string());
            let response = connection.call(request);
            response
                .ext_fields
                .optional_i64("offset")
                .ok()
                .flatten()
                .unwrap_or(0)
        })
        .sum()
}

fn pull(queue_id: i32, offset: i64) -> RemotingCommand {
    let header = PullMessageRequestHeader {
        consumer_group: "storm_check".into(),
        topic: TOPIC.into(),
        queue_id,
        queue_offset: offset,
        max_msg_nums: 1024,
        sys_flag: 4,
        commit_offset: 0,
        suspend_timeout_millis: 0,
        subscription: Some("*".into()),
        sub_version: 0,
        expression_type: Some("TAG".into()),
        max_msg_bytes: None,
        request_source: None,
        proxy_froward_client_id: None,
        broker_name: None,
        logical: None,
    };
    RemotingCommand::request(RequestCode::PULL_MESSAGE, 0).with_header(&header)
}

/// Reads every delivered message: (lateness histogram in ms, distinct keys, total, earliest
/// lateness).
fn measure(connection: &mut Connection) -> (hdrhistogram::Histogram<u64>, usize, usize, i64) {
    let mut histogram = hdrhistogram::Histogram::<u64>::new(3).unwrap();
    let mut keys = HashSet::new();
    let (mut total, mut earliest) = (0usize, i64::MAX);
    for queue_id in 0..QUEUES {
        let mut offset = 0;
        loop {
            let response = connection.call(pull(queue_id, offset));
            if response.response_code() != ResponseCode::SUCCESS {
                break;
            }
            let messages = decode_records(response.body.clone());
            if messages.is_empty() {
                break;
            }
            for message in &messages {
                let due: i64 = message
                    .property(names::TIMER_OUT_MS)
                    .and_then(|v| v.parse().ok())
                    .unwrap_or(0);
                let late = message.store_timestamp - due;
                earliest = earliest.min(late);
                histogram
                    .record(u64::try_from(late.max(0)).unwrap())
                    .unwrap();
                keys.insert(message.property(names::KEYS).unwrap_or("").to_owned());
                total += 1;
            }
            offset = response
                .ext_fields
                .optional_i64("nextBeginOffset")
                .ok()
                .flatten()
                .unwrap_or(offset + 1);
        }
    }
    (histogram, keys.len(), total, earliest)
}

/// CPU time (user + system, ms) used so far by the threads of `pid` named `comet-shard-*`,
/// by thread name (a shard's blocking helper threads share its name). Empty when `/proc`
/// cannot be read.
fn shard_cpu_ms(pid: u32) -> BTreeMap<String, u64> {
    // SAFETY: sysconf only reads a system constant.
    let ticks_per_second = u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .unwrap_or(100)
        .max(1);
    let mut by_name = BTreeMap::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return by_name;
    };
    for task in tasks.flatten() {
        let Ok(stat) = std::fs::read_to_string(task.path().join("stat")) else {
            continue;
        };
        // "tid (name) state ppid ...": utime and stime are fields 14 and 15, the 12th and
        // 13th after the name (which may hold spaces, so split after its last ')').
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = &stat[open + 1..close];
        if !name.starts_with("comet-shard") {
            continue;
        }
        let fields: Vec<&str> = stat[close + 1..].split_whitespace().collect();
        let ticks: u64 = [11, 12]
            .iter()
            .filter_map(|index| fields.get(*index)?.parse::<u64>().ok())
            .sum();
        *by_name.entry(name.to_owned()).or_default() += ticks * 1000 / ticks_per_second;
    }
    by_name
}

/// The 1-minute load average, or -1 when unknown.
fn load_average() -> f64 {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|text| text.split_whitespace().next()?.parse().ok())
        .unwrap_or(-1.0)
}

fn main() {
    let options = parse_options();
    let broker = Broker::start(options.cores);
    let due_ms = now_ms() + options.lead_secs * 1000;
    let started = Instant::now();
    let errors: usize = std::thread::scope(|scope| {
        let lanes: Vec<_> = (0..options.connections)
            .map(|lane| {
                let options = &options;
                scope.spawn(move || {
                    load_lane(broker.addr, lane, options.connections, options, due_ms)
                })
            })
            .collect();
        lanes.into_iter().map(|lane| lane.join().unwrap()).sum()
    });
    let load_secs = started.elapsed().as_secs_f64();
    let loaded_ms = now_ms();
    println!(
        "loaded {} timed messages in {load_secs:.1} s ({:.0}/s), {errors} refused, \
         {} ms before the due time",
        options.messages,
        options.messages as f64 / load_secs,
        due_ms - loaded_ms
    );
    assert!(
        loaded_ms < due_ms - 5000,
        "loading ended too close to the due time: raise --lead-secs"
    );
    let mut connection = Connection::open(broker.addr);
    let expected = i64::try_from(options.messages - errors).unwrap();
    std::thread::sleep(Duration::from_millis(
        u64::try_from(due_ms - now_ms() - 200).unwrap_or(0),
    ));
    let cpu_before = shard_cpu_ms(broker.child.id());
    let load_at_due = load_average();
    let visible_at = loop {
        if max_offsets(&mut connection) >= expected {
            break now_ms();
        }
        assert!(
            now_ms() < due_ms + 120_000,
            "not all delivered within 120 s"
        );
        std::thread::sleep(Duration::from_millis(5));
    };
    let cpu_after = shard_cpu_ms(broker.child.id());
    let cpu_ms: BTreeMap<&String, u64> = cpu_after
        .iter()
        .map(|(name, ms)| (name, ms - cpu_before.get(name).copied().unwrap_or(0)))
        .collect();
    let cpu_total_ms: u64 = cpu_ms.values().sum();
    println!(
        "broker CPU from 200 ms before the due time until all visible: {cpu_ms:?} ms, \
         {:.2} us per message; load average {load_at_due:.1} at the due time",
        cpu_total_ms as f64 * 1000.0 / expected.max(1) as f64
    );
    let (histogram, distinct, total, earliest) = measure(&mut connection);
    println!(
        "delivered {total} messages ({distinct} distinct keys); \
         all visible {} ms after the due time",
        visible_at - due_ms
    );
    println!(
        "lateness (store time - due time) ms: min {earliest} p50 {} p99 {} p99.9 {} max {}",
        histogram.value_at_quantile(0.5),
        histogram.value_at_quantile(0.99),
        histogram.value_at_quantile(0.999),
        histogram.max()
    );
    println!(
        "{{\"messages\":{},\"cores\":{},\"body_bytes\":{},\"load_secs\":{load_secs:.2},\
         \"delivered\":{total},\"distinct\":{distinct},\"visible_after_due_ms\":{},\
         \"late_ms_p50\":{},\"late_ms_p99\":{},\"late_ms_max\":{},\"late_ms_min\":{earliest},\
         \"broker_cpu_ms\":{cpu_total_ms},\"load_average_at_due\":{load_at_due:.1}}}",
        options.messages,
        options.cores,
        options.body_bytes,
        visible_at - due_ms,
        histogram.value_at_quantile(0.5),
        histogram.value_at_quantile(0.99),
        histogram.max()
    );
}
