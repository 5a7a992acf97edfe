//! A master and a slave state machine driven against each other in memory, every frame
//! going through the encoder and the incremental decoder, with logs modelled as byte
//! vectors laid out as the store lays them out (records, segment end markers).

use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use comet_replication::epoch::EpochHistory;
use comet_replication::master::{
    welcome, MasterIdentity, MasterLog, Prepared, Sender, SenderConfig,
};
use comet_replication::records::{BLANK_MAGIC, BLANK_MARKER_BYTES, MAGIC_V2};
use comet_replication::slave::{Instruction, Receiver};
use comet_replication::sync_wait::{in_sync, ConfirmPosition, SyncOutcome, SyncWaiters};
use comet_replication::wire::{
    decode, encode, Ack, Close, CloseReason, Frame, Hello, LogAnswer, StoreFormat,
};

const SEGMENT_BYTES: u64 = 64 * 1024;
const LOG: u8 = 3;
const SYNC_TIMEOUT: Duration = Duration::from_secs(3);

fn format() -> StoreFormat {
    StoreFormat {
        format_version: 1,
        segment_bytes: SEGMENT_BYTES,
    }
}

/// One log: its bytes from `start`, its durable end and its epoch history.
#[derive(Clone, Debug)]
struct Log {
    start: u64,
    bytes: Vec<u8>,
    durable: u64,
    epochs: EpochHistory,
}

impl Log {
    fn empty() -> Log {
        Log {
            start: 0,
            bytes: Vec::new(),
            durable: 0,
            epochs: EpochHistory::new(),
        }
    }

    fn written(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }

    fn index(&self, position: u64) -> usize {
        usize::try_from(position - self.start).expect("small")
    }

    /// Appends one record of `length` bytes as the store does (ending the segment with a
    /// blank marker when it does not fit); returns the record's end position.
    fn append_record(&mut self, length: usize, fill: u8) -> u64 {
        let position = self.written();
        let segment_end = position - position % SEGMENT_BYTES + SEGMENT_BYTES;
        if position + length as u64 + BLANK_MARKER_BYTES > segment_end {
            let blank = segment_end - position;
            let mut marker = vec![0u8; usize::try_from(blank).expect("small")];
            marker[..4].copy_from_slice(&i32::try_from(blank).expect("small").to_be_bytes());
            marker[4..8].copy_from_slice(&BLANK_MAGIC.to_be_bytes());
            self.bytes.extend(marker);
        }
        let mut record = vec![fill; length];
        record[..4].copy_from_slice(&i32::try_from(length).expect("small").to_be_bytes());
        record[4..8].copy_from_slice(&MAGIC_V2.to_be_bytes());
        self.bytes.extend(record);
        self.written()
    }

    /// Appends records of the given lengths in `epoch` (begun first if new); returns their
    /// end positions.
    fn write(&mut self, epoch: u32, lengths: &[usize]) -> Vec<u64> {
        if self
            .epochs
            .latest()
            .is_none_or(|latest| latest.epoch != epoch)
        {
            self.epochs
                .begin(epoch, self.written())
                .expect("newer epoch");
        }
        let ends = lengths
            .iter()
            .enumerate()
            .map(|(index, &length)| {
                self.append_record(length, u8::try_from(index % 250).expect("small") + 1)
            })
            .collect();
        self.durable = self.written();
        ends
    }

    fn read(&self, position: u64, max_bytes: usize) -> Bytes {
        let from = self.index(position);
        let to = (from + max_bytes).min(self.bytes.len());
        Bytes::copy_from_slice(&self.bytes[from..to])
    }

    fn truncate(&mut self, to: u64) {
        let keep = self.index(to);
        self.bytes.truncate(keep);
        self.durable = self.durable.min(to);
        self.epochs.truncate_to(to);
    }

    /// Removes whole segments below `oldest` (retention).
    fn retain_from(&mut self, oldest: u64) {
        assert_eq!(oldest % SEGMENT_BYTES, 0);
        let drop = self.index(oldest);
        self.bytes.drain(..drop);
        self.start = oldest;
        self.epochs.truncate_from_start(oldest);
    }

    /// A crash: everything past the durable end is lost.
    fn crash(&mut self) {
        self.truncate(self.durable);
    }
}

/// The master's side: identity, log, confirm position and SYNC_MASTER waiters.
struct Master {
    identity: MasterIdentity,
    log: Log,
    confirm: ConfirmPosition,
    waiters: SyncWaiters<u64>,
    answered: Vec<(u64, SyncOutcome)>,
}

impl Master {
    fn new() -> Master {
        Master {
            identity: MasterIdentity {
                cluster_name: "DefaultCluster".into(),
                broker_name: "broker-a".into(),
                broker_id: 0,
                format: format(),
            },
            log: Log::empty(),
            confirm: ConfirmPosition::new(0),
            waiters: SyncWaiters::new(),
            answered: Vec::new(),
        }
    }

    fn view(&self) -> MasterLog<'_> {
        MasterLog {
            log_id: LOG,
            epochs: &self.log.epochs,
            written: self.log.written(),
            oldest: self.log.start,
        }
    }

    /// SYNC_MASTER sends: each record's end waits for the slave.
    fn sync_send(&mut self, epoch: u32, lengths: &[usize], slave_in_sync: bool, now: Instant) {
        for end in self.log.write(epoch, lengths) {
            if let Some(answer) = self
                .waiters
                .register(end, now + SYNC_TIMEOUT, slave_in_sync, end)
            {
                self.answered.push(answer);
            }
        }
    }
}

/// What a master's session task holds: the sender once the handshake is done.
struct MasterSession {
    sender: Option<Sender>,
    closed: Option<Close>,
}

/// What a slave's session task holds.
struct SlaveSession {
    receiver: Receiver,
    closed: Option<Close>,
}

/// The two directions of one connection.
struct Wire {
    to_master: BytesMut,
    to_slave: BytesMut,
}

fn send(buffer: &mut BytesMut, frame: Frame) {
    encode(&frame, buffer).expect("encodable");
}

fn hello(receiver: &Receiver) -> Hello {
    Hello {
        cluster_name: "DefaultCluster".into(),
        broker_name: "broker-a".into(),
        broker_id: 1,
        format: format(),
        logs: vec![receiver.hello_state()],
    }
}

/// The master's task: takes every whole frame the slave sent, then sends what it may.
fn master_step(master: &mut Master, session: &mut MasterSession, wire: &mut Wire, now: Instant) {
    if session.closed.is_some() {
        return;
    }
    let close = |session: &mut MasterSession, wire: &mut Wire, close: Close| {
        send(&mut wire.to_slave, Frame::Close(close.clone()));
        session.closed = Some(close);
    };
    loop {
        let frame = match decode(&mut wire.to_master) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(error) => {
                return close(
                    session,
                    wire,
                    Close::new(CloseReason::Malformed, error.to_string()),
                )
            }
        };
        match (frame, session.sender.as_mut()) {
            (Frame::Hello(hello), None) => {
                match welcome(&master.identity, &hello, &[master.view()]) {
                    Ok(answer) => {
                        if let LogAnswer::Follow { plan, .. } = &answer.logs[0].answer {
                            let config = SenderConfig {
                                frame_payload_bytes: 16 * 1024,
                                window_bytes: 48 * 1024,
                                segment_bytes: SEGMENT_BYTES,
                            };
                            session.sender =
                                Some(Sender::start(&hello.logs[0], *plan, config, now));
                        }
                        send(&mut wire.to_slave, Frame::Welcome(answer));
                    }
                    Err(refusal) => return close(session, wire, refusal.close()),
                }
            }
            (Frame::Ack(ack), Some(sender)) => match sender.on_ack(&ack, now) {
                Ok(progress) => {
                    master
                        .answered
                        .extend(master.waiters.on_slave_durable(progress.visible));
                    master.confirm.advance(master.log.durable, progress.durable);
                }
                Err(error) => return close(session, wire, error.close()),
            },
            (Frame::Close(close), _) => {
                session.closed = Some(close);
                return;
            }
            (other, _) => {
                let detail = format!("unexpected {other:?}");
                return close(session, wire, Close::new(CloseReason::Malformed, detail));
            }
        }
    }
    let Some(sender) = session.sender.as_mut() else {
        return;
    };
    let view = MasterLog {
        log_id: LOG,
        epochs: &master.log.epochs,
        written: master.log.written(),
        oldest: master.log.start,
    };
    loop {
        let range = match sender.next_send(&view) {
            Ok(Some(range)) => range,
            Ok(None) => break,
            Err(error) => return close(session, wire, error.close()),
        };
        let bytes = master.log.read(range.position, range.max_bytes);
        match sender.prepare(bytes, &view, master.log.durable, now) {
            Ok(Prepared::Data(data)) => send(&mut wire.to_slave, Frame::Data(data)),
            Ok(Prepared::NeedMore { .. }) => continue,
            Ok(Prepared::Wait) => break,
            Err(error) => return close(session, wire, error.close()),
        }
    }
    // Frames carry the master's durable end: the slave shows what both hold durably.
    let confirm = master.log.durable;
    if sender.heartbeat_due(now, Duration::from_secs(5), confirm) {
        let beat = sender.heartbeat(&view, confirm, now);
        send(&mut wire.to_slave, Frame::Heartbeat(beat));
    }
}

/// The slave's task: takes every whole frame the master sent, appends to its log, makes
/// it durable when `flush` says so, and acks.
fn slave_step(
    log: &mut Log,
    session: &mut SlaveSession,
    wire: &mut Wire,
    flush: bool,
    now: Instant,
) {
    if session.closed.is_some() {
        return;
    }
    let receiver = &mut session.receiver;
    loop {
        let frame = match decode(&mut wire.to_slave) {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(error) => {
                let close = Close::new(CloseReason::Malformed, error.to_string());
                send(&mut wire.to_master, Frame::Close(close.clone()));
                session.closed = Some(close);
                return;
            }
        };
        let outcome = match frame {
            Frame::Welcome(answer) => receiver.on_answer(&answer.logs[0].answer).map(|order| {
                match order {
                    Instruction::Continue { from } => assert_eq!(from, log.written()),
                    Instruction::Truncate { to } => log.truncate(to),
                    Instruction::Reset { from } => {
                        *log = Log::empty();
                        log.start = from;
                        log.durable = from;
                    }
                    Instruction::Stop(refusal) => panic!("refused: {refusal:?}"),
                }
                log.epochs = receiver.epochs().clone();
            }),
            Frame::Data(data) => receiver.on_data(data).map(|append| {
                assert_eq!(append.position, log.written(), "the store appends in order");
                log.bytes.extend_from_slice(&append.bytes);
                let implied = append.end - log.written();
                log.bytes.extend(std::iter::repeat_n(
                    0,
                    usize::try_from(implied).expect("small"),
                ));
                log.epochs = receiver.epochs().clone();
            }),
            Frame::Heartbeat(beat) => receiver.on_heartbeat(&beat),
            Frame::Close(close) => {
                session.closed = Some(close);
                return;
            }
            other => panic!("a master does not send {other:?}"),
        };
        if let Err(error) = outcome {
            let close = error.close();
            send(&mut wire.to_master, Frame::Close(close.clone()));
            session.closed = Some(close);
            return;
        }
    }
    if flush && log.durable < log.written() {
        log.durable = log.written();
        receiver
            .on_durable(log.durable)
            .expect("durable within written");
    }
    if receiver.ack_due(now, Duration::from_secs(5)) {
        send(&mut wire.to_master, Frame::Ack(receiver.ack(now)));
    }
}

/// Connects `slave_log` to `master`: the slave's Hello, then steps both sides until
/// nothing moves or `steps` run out. Returns both sessions.
fn connect(
    master: &mut Master,
    slave_log: &mut Log,
    steps: usize,
    flush: impl Fn(usize) -> bool,
    now: Instant,
) -> (MasterSession, SlaveSession) {
    let receiver = Receiver::new(
        LOG,
        SEGMENT_BYTES,
        slave_log.epochs.clone(),
        slave_log.written(),
        slave_log.durable,
    )
    .expect("a recovered log");
    let mut wire = Wire {
        to_master: BytesMut::new(),
        to_slave: BytesMut::new(),
    };
    send(&mut wire.to_master, Frame::Hello(hello(&receiver)));
    let mut master_session = MasterSession {
        sender: None,
        closed: None,
    };
    let mut slave_session = SlaveSession {
        receiver,
        closed: None,
    };
    for step in 0..steps {
        master_step(master, &mut master_session, &mut wire, now);
        slave_step(slave_log, &mut slave_session, &mut wire, flush(step), now);
        if wire.to_master.is_empty() && wire.to_slave.is_empty() {
            break;
        }
    }
    (master_session, slave_session)
}

fn assert_same_log(master: &Log, slave: &Log) {
    assert_eq!(slave.start, master.start, "log starts");
    assert_eq!(slave.written(), master.written(), "written ends");
    assert!(
        slave.bytes == master.bytes,
        "the slave's bytes differ from the master's"
    );
    // A master's newest epoch holds no bytes until it writes; the slave learns epochs
    // from the bytes.
    let mut holding_bytes = master.epochs.clone();
    holding_bytes.truncate_to(master.written());
    assert_eq!(slave.epochs, holding_bytes, "epoch histories");
}

fn lengths(count: usize) -> Vec<usize> {
    (0..count).map(|index| 100 + (index * 397) % 3000).collect()
}

// Proves a fresh slave copies a multi-segment log byte for byte, SYNC_MASTER sends are
// answered SEND_OK only by the slave's acks (all of them, several per ack), and the confirm
// position reaches the end.
#[test]
fn fresh_slave_catches_up_and_releases_sync_sends() {
    let now = Instant::now();
    let mut master = Master::new();
    master.sync_send(1, &lengths(200), true, now);
    assert!(master.log.written() > 3 * SEGMENT_BYTES);
    assert!(
        master.answered.is_empty(),
        "nothing is SEND_OK before the slave has it"
    );
    let mut slave = Log::empty();
    let (master_session, slave_session) = connect(&mut master, &mut slave, 1000, |_| true, now);
    assert!(master_session.closed.is_none() && slave_session.closed.is_none());
    assert_same_log(&master.log, &slave);
    assert_eq!(master.answered.len(), 200);
    assert!(master
        .answered
        .iter()
        .all(|(_, outcome)| *outcome == SyncOutcome::SendOk));
    assert!(master.waiters.is_empty());
    assert_eq!(master.confirm.get(), master.log.written());
    assert_eq!(
        slave_session.receiver.visible_end(),
        master.log.written(),
        "the slave's consumers see what is confirmed"
    );
}

// Proves the old master of epoch 1, restarted as a slave of the promoted one, truncates the
// tail its successor never had and follows epoch 2 without a gap.
#[test]
fn diverged_slave_truncates_and_follows() {
    let now = Instant::now();
    let mut old_master = Log::empty();
    old_master.write(1, &lengths(40));
    let mut promoted = Master::new();
    // What the promoted broker had replicated before the old master died: a prefix.
    promoted.log = old_master.clone();
    promoted.log.truncate(old_master.written() / 2);
    let prefix_end = promoted.log.written();
    old_master.write(1, &lengths(10)); // never replicated
    promoted.log.write(2, &lengths(30));
    let mut rejoined = old_master.clone();
    let (master_session, _) = connect(&mut promoted, &mut rejoined, 1000, |_| true, now);
    assert!(master_session.closed.is_none());
    assert_same_log(&promoted.log, &rejoined);
    assert_eq!(rejoined.epochs.entries()[1].start, prefix_end);
    assert_ne!(rejoined.written(), old_master.written());
}

// Proves a slave that crashes with a non-durable tail, and restarts, resumes from what it
// kept: no gap, no duplicate, the same bytes in the end.
#[test]
fn slave_restart_resumes_without_gaps() {
    let now = Instant::now();
    let mut master = Master::new();
    master.sync_send(1, &lengths(150), true, now);
    let mut slave = Log::empty();
    // Flush only on some steps, and stop early: the slave has an unflushed tail.
    let (_, first) = connect(&mut master, &mut slave, 7, |step| step % 3 == 1, now);
    assert!(slave.durable < slave.written(), "a tail to lose");
    let durable_before = first.receiver.durable();
    slave.crash();
    assert_eq!(slave.written(), durable_before);
    let released_before = master.answered.len();
    assert!(released_before < 150);
    let (master_session, _) = connect(&mut master, &mut slave, 1000, |_| true, now);
    assert!(master_session.closed.is_none());
    assert_same_log(&master.log, &slave);
    assert_eq!(master.answered.len(), 150, "every waiter answered once");
    // The master, restarted too, begins a new epoch; the slave follows it.
    master.sync_send(2, &lengths(5), true, now);
    connect(&mut master, &mut slave, 1000, |_| true, now);
    assert_same_log(&master.log, &slave);
    assert_eq!(slave.epochs.latest().map(|latest| latest.epoch), Some(2));
}

// Proves a wiped slave, whose master retention removed the first segments, is copied from
// the master's oldest retained segment (not only its newest).
#[test]
fn wiped_slave_copies_from_oldest_retained_segment() {
    let now = Instant::now();
    let mut master = Master::new();
    master.log.write(1, &lengths(250));
    master.log.retain_from(2 * SEGMENT_BYTES);
    assert!(master.log.written() > 4 * SEGMENT_BYTES);
    // A slave left with an old log that retention has since outrun.
    let mut slave = Log::empty();
    slave.write(1, &lengths(3));
    slave.durable = slave.written();
    let (master_session, slave_session) = connect(&mut master, &mut slave, 1000, |_| true, now);
    assert!(master_session.closed.is_none());
    assert_eq!(slave.start, 2 * SEGMENT_BYTES);
    assert_same_log(&master.log, &slave);
    assert_eq!(slave_session.receiver.written(), master.log.written());
}

// Proves strangers get a Close with their reason and not one byte of the log: another
// cluster, another broker name, broker id 0, another segment size.
#[test]
fn strangers_get_nothing() {
    let now = Instant::now();
    let mut master = Master::new();
    master.log.write(1, &lengths(20));
    let receiver = Receiver::new(LOG, SEGMENT_BYTES, EpochHistory::new(), 0, 0).expect("empty");
    type Disguise = fn(&mut Hello);
    let strangers: [(Disguise, CloseReason); 4] = [
        (
            |hello| hello.cluster_name = "Other".into(),
            CloseReason::WrongCluster,
        ),
        (
            |hello| hello.broker_name = "broker-b".into(),
            CloseReason::WrongBrokerName,
        ),
        (|hello| hello.broker_id = 0, CloseReason::BrokerIdRefused),
        (
            |hello| hello.format.segment_bytes = 1 << 30,
            CloseReason::FormatMismatch,
        ),
    ];
    for (disguise, reason) in strangers {
        let mut stranger = hello(&receiver);
        disguise(&mut stranger);
        let mut wire = Wire {
            to_master: BytesMut::new(),
            to_slave: BytesMut::new(),
        };
        send(&mut wire.to_master, Frame::Hello(stranger));
        let mut session = MasterSession {
            sender: None,
            closed: None,
        };
        master_step(&mut master, &mut session, &mut wire, now);
        master_step(&mut master, &mut session, &mut wire, now);
        let frames = drain(&mut wire.to_slave);
        assert_eq!(frames.len(), 1, "only the Close");
        let Frame::Close(close) = &frames[0] else {
            panic!("a Close, got {:?}", frames[0]);
        };
        assert_eq!(close.reason, reason);
        assert!(session.sender.is_none());
    }
}

fn drain(buffer: &mut BytesMut) -> Vec<Frame> {
    let mut frames = Vec::new();
    while let Some(frame) = decode(buffer).expect("valid frames") {
        frames.push(frame);
    }
    frames
}

// Proves garbage on the HA port (before or after the handshake) closes only that stream
// as malformed, streams nothing more, and the master keeps serving the next slave.
#[test]
fn garbage_bytes_close_the_stream() {
    let now = Instant::now();
    let mut master = Master::new();
    master.log.write(1, &lengths(30));
    for garbage in [
        &b"GET / HTTP/1.1\r\n\r\n"[..],
        &[0x43, 0x4D, 0x54, 0x52, 9, 9, 9, 9][..],
    ] {
        let mut wire = Wire {
            to_master: BytesMut::from(garbage),
            to_slave: BytesMut::new(),
        };
        let mut session = MasterSession {
            sender: None,
            closed: None,
        };
        master_step(&mut master, &mut session, &mut wire, now);
        assert_eq!(
            session.closed.map(|close| close.reason),
            Some(CloseReason::Malformed)
        );
        assert_eq!(drain(&mut wire.to_slave).len(), 1, "only the Close");
    }
    // Mid-stream: a good session, then a corrupted frame from the slave.
    let mut slave = Log::empty();
    let (mut session, _) = connect(&mut master, &mut slave, 3, |_| true, now);
    let sent_before = session.sender.as_ref().map(Sender::next_position);
    let mut wire = Wire {
        to_master: BytesMut::new(),
        to_slave: BytesMut::new(),
    };
    send(
        &mut wire.to_master,
        Frame::Ack(Ack {
            log_id: LOG,
            written: 0,
            durable: 0,
            confirm: 0,
        }),
    );
    wire.to_master[20] ^= 0xFF;
    master_step(&mut master, &mut session, &mut wire, now);
    assert_eq!(
        session.closed.map(|close| close.reason),
        Some(CloseReason::Malformed)
    );
    assert_eq!(
        session.sender.as_ref().map(Sender::next_position),
        sent_before
    );
    // The master serves the next, honest connection from where the slave is.
    let (master_session, _) = connect(&mut master, &mut slave, 1000, |_| true, now);
    assert!(master_session.closed.is_none());
    assert_same_log(&master.log, &slave);
}

// Proves an ack beyond what was sent closes the stream and releases no SYNC_MASTER send:
// they time out as FLUSH_SLAVE_TIMEOUT; with no slave in sync, sends answer
// SLAVE_NOT_AVAILABLE at once.
#[test]
fn ack_beyond_sent_releases_nothing() {
    let now = Instant::now();
    let mut master = Master::new();
    let mut slave = Log::empty();
    let (mut session, _) = connect(&mut master, &mut slave, 1000, |_| true, now);
    assert!(session.closed.is_none());
    master.sync_send(1, &lengths(10), true, now);
    let liar = Ack {
        log_id: LOG,
        written: master.log.written(),
        durable: master.log.written(),
        confirm: master.log.written(),
    };
    let mut wire = Wire {
        to_master: BytesMut::new(),
        to_slave: BytesMut::new(),
    };
    send(&mut wire.to_master, Frame::Ack(liar));
    master_step(&mut master, &mut session, &mut wire, now);
    assert_eq!(
        session.closed.map(|close| close.reason),
        Some(CloseReason::AckInvalid)
    );
    assert!(master.answered.is_empty(), "no send released by the lie");
    assert_eq!(master.confirm.get(), 0, "nothing confirmed");
    let expired = master.waiters.expire(now + SYNC_TIMEOUT);
    assert_eq!(expired.len(), 10);
    assert!(expired
        .iter()
        .all(|(_, outcome)| *outcome == SyncOutcome::FlushSlaveTimeout));
    // No slave connected now: SYNC_MASTER sends are answered SLAVE_NOT_AVAILABLE.
    let slave_in_sync = in_sync(master.log.written(), None, 256 * 1024 * 1024);
    master.sync_send(1, &lengths(2), slave_in_sync, now);
    assert_eq!(master.answered.len(), 2);
    assert!(master
        .answered
        .iter()
        .all(|(_, outcome)| *outcome == SyncOutcome::SlaveNotAvailable));
}

/// One step of a randomised history of two brokers.
#[derive(Clone, Debug)]
enum Step {
    /// The master writes records of these lengths.
    Write(Vec<usize>),
    /// A session that runs `steps` rounds, the slave flushing every `flush_every` rounds.
    Replicate { steps: usize, flush_every: usize },
    /// The slave crashes and loses its unflushed tail.
    CrashSlave,
    /// The master's retention removes its oldest segment, if one is complete.
    Retain,
    /// The master is lost; the slave is promoted (a new epoch at its end) and the old master
    /// returns as its slave with everything it had.
    Failover,
}

fn step_strategy() -> impl proptest::strategy::Strategy<Value = Step> {
    use proptest::prelude::*;
    prop_oneof![
        3 => proptest::collection::vec(100usize..6000, 1..40).prop_map(Step::Write),
        3 => (1usize..12, 1usize..4)
            .prop_map(|(steps, flush_every)| Step::Replicate { steps, flush_every }),
        1 => Just(Step::CrashSlave),
        1 => Just(Step::Retain),
        1 => Just(Step::Failover),
    ]
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(64))]

    // Proves that whatever happens between them (partial sessions, slave crashes, retention
    // outrunning the slave, failovers that leave the returning master with a diverged tail),
    // no honest session is ever
    // refused, and one full session leaves both logs and histories identical: replication
    // never wedges and never keeps a diverged byte.
    #[test]
    fn any_history_converges(steps in proptest::collection::vec(step_strategy(), 1..25)) {
        let now = Instant::now();
        let mut master = Master::new();
        let mut epoch = 1;
        master.log.epochs.begin(epoch, 0).expect("first epoch");
        let mut slave = Log::empty();
        for step in steps {
            match step {
                Step::Write(lengths) => {
                    master.log.write(epoch, &lengths);
                }
                Step::Replicate { steps, flush_every } => {
                    let (session, slave_session) = connect(
                        &mut master,
                        &mut slave,
                        steps,
                        |round| round % flush_every == 0,
                        now,
                    );
                    proptest::prop_assert!(session.closed.is_none(), "{:?}", session.closed);
                    proptest::prop_assert!(slave_session.closed.is_none());
                }
                Step::CrashSlave => slave.crash(),
                Step::Retain => {
                    let written = master.log.written();
                    let oldest = master.log.start + SEGMENT_BYTES;
                    if oldest <= written - written % SEGMENT_BYTES {
                        master.log.retain_from(oldest);
                    }
                }
                Step::Failover => {
                    std::mem::swap(&mut master.log, &mut slave);
                    master.log.durable = master.log.written();
                    epoch += 1;
                    let end = master.log.written();
                    master.log.epochs.begin(epoch, end).expect("newer epoch");
                    master.confirm = ConfirmPosition::new(0);
                    master.waiters = SyncWaiters::new();
                }
            }
        }
        let (session, _) = connect(&mut master, &mut slave, 10_000, |_| true, now);
        proptest::prop_assert!(session.closed.is_none(), "{:?}", session.closed);
        // Retention runs on each broker for itself: either may keep older segments than the
        // other (a promoted slave that was copied afresh starts later than its old master).
        let common_start = slave.start.max(master.log.start);
        let mut master_log = master.log.clone();
        for log in [&mut master_log, &mut slave] {
            if log.start < common_start {
                log.retain_from(common_start);
            }
        }
        assert_same_log(&master_log, &slave);
    }
}
