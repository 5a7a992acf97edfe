//! The master's side of a session: the peer check, the Welcome, and one [`Sender`] per
//! followed log.
//!
//! A Hello is refused whole (a Close frame, nothing streamed) unless it comes from a slave
//! of this very broker: same cluster, same broker name, a broker id that is neither 0 nor
//! the master's own, the same store format. Then each log named is answered by the
//! divergence rule ([`crate::epoch::reconcile`]).
//!
//! A [`Sender`] keeps, for one log of one session, the next position to send and what the
//! slave acknowledged. Its invariants:
//!
//! - `acked_durable <= acked_written <= next`: an Ack is accepted only if it claims no byte
//!   that was not sent in this session, is internally consistent, and moves nothing
//!   backwards; anything else is an error that closes the stream. So no peer can make a
//!   SYNC_MASTER send succeed with bytes it never received (as any client of Java's HA
//!   port could, by reporting an offset past the master's).
//! - `next - acked_written <= window_bytes`, except that one record larger than the window
//!   is sent alone once everything before it is acknowledged.
//! - A Data frame holds whole records of one segment and one epoch.

use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;

use crate::epoch::{reconcile, EpochHistory, MasterLogView, ResumePlan, SlaveLogView};
use crate::limits::DATA_PAYLOAD_BYTES_MAX;
use crate::records::{scan, FramingError, BLANK_MARKER_BYTES};
use crate::wire::{
    Ack, Close, CloseReason, Data, Heartbeat, Hello, LogAnswer, LogRefusal, LogState, LogWelcome,
    StoreFormat, Welcome,
};

/// Payload bytes the master puts in one Data frame by default: about a millisecond of a
/// gigabyte-per-second stream, so acks return often while per-frame costs stay negligible.
pub const FRAME_PAYLOAD_BYTES_DEFAULT: usize = 1024 * 1024;

/// Unacknowledged bytes the master lets one slave log have by default: enough to keep a
/// 10 Gbit/s link busy across a few milliseconds of slave group commit, small enough that a
/// slave that stops reading costs the master little.
pub const WINDOW_BYTES_DEFAULT: u64 = 32 * 1024 * 1024;

/// Who the master is; a Hello must match it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MasterIdentity {
    /// `brokerClusterName`.
    pub cluster_name: String,
    /// `brokerName`.
    pub broker_name: String,
    /// The master's own `brokerId` (0 unless a controller assigned another).
    pub broker_id: u64,
    /// The master's store format.
    pub format: StoreFormat,
}

/// Why a Hello is refused whole.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum PeerRefusal {
    /// Another cluster's broker.
    #[error("peer is of cluster {found:?}, this master of {expected:?}")]
    WrongCluster {
        /// The master's cluster.
        expected: String,
        /// The peer's.
        found: String,
    },
    /// Another broker's slave.
    #[error("peer follows broker {found:?}, this is {expected:?}")]
    WrongBrokerName {
        /// The master's broker name.
        expected: String,
        /// The peer's.
        found: String,
    },
    /// A peer claiming broker id 0, which only a master has.
    #[error("peer claims broker id 0, a master's")]
    MasterBrokerId,
    /// A peer claiming the master's own broker id.
    #[error("peer claims broker id {broker_id}, this master's own")]
    OwnBrokerId {
        /// The id claimed.
        broker_id: u64,
    },
    /// A store whose bytes would mean something else.
    #[error("peer's store format {found:?} differs from the master's {expected:?}")]
    FormatMismatch {
        /// The master's format.
        expected: StoreFormat,
        /// The peer's.
        found: StoreFormat,
    },
}

impl PeerRefusal {
    /// The Close frame that tells the peer.
    pub fn close(&self) -> Close {
        let reason = match self {
            PeerRefusal::WrongCluster { .. } => CloseReason::WrongCluster,
            PeerRefusal::WrongBrokerName { .. } => CloseReason::WrongBrokerName,
            PeerRefusal::MasterBrokerId | PeerRefusal::OwnBrokerId { .. } => {
                CloseReason::BrokerIdRefused
            }
            PeerRefusal::FormatMismatch { .. } => CloseReason::FormatMismatch,
        };
        Close::new(reason, self.to_string())
    }
}

/// Checks that `hello` comes from a slave of this master (see the module docs).
pub fn check_peer(identity: &MasterIdentity, hello: &Hello) -> Result<(), PeerRefusal> {
    if hello.cluster_name != identity.cluster_name {
        return Err(PeerRefusal::WrongCluster {
            expected: identity.cluster_name.clone(),
            found: hello.cluster_name.clone(),
        });
    }
    if hello.broker_name != identity.broker_name {
        return Err(PeerRefusal::WrongBrokerName {
            expected: identity.broker_name.clone(),
            found: hello.broker_name.clone(),
        });
    }
    if hello.broker_id == 0 {
        return Err(PeerRefusal::MasterBrokerId);
    }
    if hello.broker_id == identity.broker_id {
        return Err(PeerRefusal::OwnBrokerId {
            broker_id: hello.broker_id,
        });
    }
    if hello.format != identity.format {
        return Err(PeerRefusal::FormatMismatch {
            expected: identity.format,
            found: hello.format,
        });
    }
    Ok(())
}

/// What the master knows of one of its logs right now.
#[derive(Clone, Copy, Debug)]
pub struct MasterLog<'a> {
    /// The log's id.
    pub log_id: u8,
    /// Its epoch history (it covers every retained byte: a master begins an epoch before
    /// it writes).
    pub epochs: &'a EpochHistory,
    /// Its written end.
    pub written: u64,
    /// Start of its oldest retained segment.
    pub oldest: u64,
}

impl MasterLog<'_> {
    fn view(&self) -> MasterLogView<'_> {
        MasterLogView {
            history: self.epochs,
            written: self.written,
            oldest: self.oldest,
        }
    }
}

/// The answer for one log a slave named.
pub fn answer_log(master: &MasterLog<'_>, slave: &LogState) -> LogAnswer {
    let slave_view = SlaveLogView {
        history: &slave.epochs,
        written: slave.written,
    };
    match reconcile(master.view(), slave_view) {
        Ok(plan) => LogAnswer::Follow {
            plan,
            epochs: master.epochs.clone(),
        },
        Err(newer) => LogAnswer::Refused(LogRefusal::SlaveNewerEpoch {
            slave_epoch: newer.slave_epoch,
            master_epoch: newer.master_epoch,
        }),
    }
}

/// Checks the peer, then answers every log of `hello` (a log the master lacks is refused
/// on its own); `logs` are all of the master's logs.
pub fn welcome(
    identity: &MasterIdentity,
    hello: &Hello,
    logs: &[MasterLog<'_>],
) -> Result<Welcome, PeerRefusal> {
    check_peer(identity, hello)?;
    let answers = hello
        .logs
        .iter()
        .map(|slave| {
            let answer = match logs.iter().find(|log| log.log_id == slave.log_id) {
                Some(master) => answer_log(master, slave),
                None => LogAnswer::Refused(LogRefusal::UnknownLog),
            };
            LogWelcome {
                log_id: slave.log_id,
                answer,
            }
        })
        .collect();
    Ok(Welcome {
        master_logs: logs.iter().map(|log| log.log_id).collect(),
        logs: answers,
    })
}

/// How a [`Sender`] paces one log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SenderConfig {
    /// Payload bytes per Data frame (a larger record still goes whole, alone).
    pub frame_payload_bytes: usize,
    /// Most bytes sent but not acknowledged as written.
    pub window_bytes: u64,
    /// The log's segment size (from the agreed store format).
    pub segment_bytes: u64,
}

impl SenderConfig {
    /// The defaults for a log of `segment_bytes` segments.
    pub fn new(segment_bytes: u64) -> SenderConfig {
        SenderConfig {
            frame_payload_bytes: FRAME_PAYLOAD_BYTES_DEFAULT,
            window_bytes: WINDOW_BYTES_DEFAULT,
            segment_bytes,
        }
    }
}

/// Which log bytes to read next: up to `max_bytes` from `position` (fewer is fine).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SendRange {
    /// First position to read.
    pub position: u64,
    /// Most bytes to read.
    pub max_bytes: usize,
}

/// What [`Sender::prepare`] made of the bytes read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Prepared {
    /// Send this frame.
    Data(Data),
    /// Nothing may be sent now ([`Sender::next_send`] says `None`): the bytes were not used.
    Wait,
    /// The bytes hold no whole record: read at least `bytes` from `position` (the next
    /// [`Sender::next_send`] asks for them).
    NeedMore {
        /// Where to read.
        position: u64,
        /// Bytes the record there needs.
        bytes: usize,
    },
}

/// Why a Sender cannot go on; the stream closes, and the slave's next Hello decides again.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum SendError {
    /// The slave needs bytes retention has removed: its next handshake copies afresh.
    #[error("slave needs position {position}, the oldest retained is {oldest}")]
    BehindRetention {
        /// The position needed.
        position: u64,
        /// The oldest retained.
        oldest: u64,
    },
    /// The master's own bytes are not records: its log is damaged there.
    #[error("master log damaged: {0}")]
    Framing(#[from] FramingError),
    /// A record longer than any Data frame may be.
    #[error("record of {bytes} bytes at {position}, beyond the largest Data frame")]
    RecordTooLarge {
        /// Where it starts.
        position: u64,
        /// Its length.
        bytes: u64,
    },
    /// A record that claims more bytes than the log holds for it (past the written end or
    /// the epoch's end): the master's log is damaged there.
    #[error("record at {position} claims {bytes} bytes, the log holds {available} for it")]
    RecordPastEnd {
        /// Where it starts.
        position: u64,
        /// Its claimed length.
        bytes: u64,
        /// Bytes the log holds from there (to the written, segment or epoch end).
        available: u64,
    },
    /// The master's history does not cover a position it retains.
    #[error("no epoch of the master covers position {position}")]
    NoEpoch {
        /// The position.
        position: u64,
    },
}

impl SendError {
    /// The Close frame that tells the slave.
    pub fn close(&self) -> Close {
        Close::new(CloseReason::Resync, self.to_string())
    }
}

/// An Ack the master cannot accept; the stream closes.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq)]
pub enum AckError {
    /// For another log than this sender's.
    #[error("ack for log {found} on the stream of log {expected}")]
    WrongLog {
        /// This sender's log.
        expected: u8,
        /// The ack's.
        found: u8,
    },
    /// Durable beyond written.
    #[error("ack durable {durable} beyond its written {written}")]
    DurableBeyondWritten {
        /// Written claimed.
        written: u64,
        /// Durable claimed.
        durable: u64,
    },
    /// Written beyond what was sent.
    #[error("ack written {written} beyond the {sent} sent")]
    BeyondSent {
        /// Written claimed.
        written: u64,
        /// The end of what was sent.
        sent: u64,
    },
    /// A confirm position the master never sent.
    #[error("ack confirm {confirm} beyond the {sent} sent")]
    ConfirmBeyondSent {
        /// Confirm claimed.
        confirm: u64,
        /// The highest confirm position sent.
        sent: u64,
    },
    /// A position moving backwards.
    #[error("ack {what} went back from {previous} to {found}")]
    Backwards {
        /// "written" or "durable".
        what: &'static str,
        /// The last accepted.
        previous: u64,
        /// The new claim.
        found: u64,
    },
}

impl AckError {
    /// The Close frame that tells the slave.
    pub fn close(&self) -> Close {
        Close::new(CloseReason::AckInvalid, self.to_string())
    }
}

/// What an accepted Ack changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckProgress {
    /// The slave's written end now.
    pub written: u64,
    /// The slave's durable end now (for `sync_wait`).
    pub durable: u64,
    /// Whether durable moved.
    pub durable_advanced: bool,
    /// How far the slave shows its log to consumers: its durable end, capped by the
    /// highest confirm position it has received. A SYNC_MASTER send is answered SEND_OK
    /// once this covers it (see `sync_wait`).
    pub visible: u64,
}

/// The master's state of one followed log in one session (see the module docs).
#[derive(Clone, Debug)]
pub struct Sender {
    log_id: u8,
    config: SenderConfig,
    next: u64,
    acked_written: u64,
    acked_durable: u64,
    record_bytes_needed: Option<u64>,
    last_ack_at: Instant,
    last_sent_at: Instant,
    confirm_sent: u64,
}

impl Sender {
    /// Starts following `slave` (as named in its Hello) by `plan` (from the Welcome). The
    /// slave's own durable claim counts up to where it resumes: the divergence rule vouches
    /// for those bytes, and a SYNC_MASTER send whose ack was lost with the last session is
    /// released by them.
    pub fn start(slave: &LogState, plan: ResumePlan, config: SenderConfig, now: Instant) -> Sender {
        let next = plan.position();
        let acked_durable = match plan {
            ResumePlan::Continue { .. } | ResumePlan::Truncate { .. } => slave.durable.min(next),
            ResumePlan::FullCopy { from } => from,
        };
        Sender {
            log_id: slave.log_id,
            config,
            next,
            acked_written: next,
            acked_durable,
            record_bytes_needed: None,
            last_ack_at: now,
            last_sent_at: now,
            confirm_sent: 0,
        }
    }

    /// The log followed.
    pub fn log_id(&self) -> u8 {
        self.log_id
    }

    /// The end of what was sent: the next Data frame starts here.
    pub fn next_position(&self) -> u64 {
        self.next
    }

    /// The slave's acknowledged written end.
    pub fn acked_written(&self) -> u64 {
        self.acked_written
    }

    /// The slave's acknowledged durable end.
    pub fn acked_durable(&self) -> u64 {
        self.acked_durable
    }

    /// Bytes sent and not yet acknowledged as written.
    pub fn unacked_bytes(&self) -> u64 {
        self.next - self.acked_written
    }

    /// Bytes the slave's durable end is behind `master_written`.
    pub fn lag_bytes(&self, master_written: u64) -> u64 {
        master_written.saturating_sub(self.acked_durable)
    }

    /// Time since the last accepted Ack (or the start): past `slaveTimeout` the session is
    /// dead.
    pub fn silent_for(&self, now: Instant) -> Duration {
        now.saturating_duration_since(self.last_ack_at)
    }

    /// Bytes the log can give one frame from `next`: bounded by the written end, the
    /// segment's end and the epoch's end.
    fn log_bytes_available(&self, master: &MasterLog<'_>) -> Result<u64, SendError> {
        if self.next < master.oldest {
            return Err(SendError::BehindRetention {
                position: self.next,
                oldest: master.oldest,
            });
        }
        let segment_bytes = self.config.segment_bytes.max(1);
        let segment_end = (self.next - self.next % segment_bytes).saturating_add(segment_bytes);
        let epoch_end = master
            .epochs
            .next_start_after(self.next)
            .unwrap_or(u64::MAX);
        let end = master.written.min(segment_end).min(epoch_end);
        Ok(end.saturating_sub(self.next))
    }

    /// Which bytes to read for the next Data frame, or `None` when there is nothing to
    /// send or the window is full (wait for an Ack or more writes).
    pub fn next_send(&self, master: &MasterLog<'_>) -> Result<Option<SendRange>, SendError> {
        let available = self.log_bytes_available(master)?;
        let room = self
            .config
            .window_bytes
            .saturating_sub(self.unacked_bytes());
        let mut max_bytes = available
            .min(room)
            .min(self.config.frame_payload_bytes as u64);
        if let Some(needed) = self.record_bytes_needed {
            if needed > max_bytes {
                if self.unacked_bytes() > 0 || needed > available {
                    return Ok(None);
                }
                max_bytes = needed;
            }
        }
        if max_bytes == 0 {
            return Ok(None);
        }
        let max_bytes = usize::try_from(max_bytes.min(DATA_PAYLOAD_BYTES_MAX as u64))
            .expect("bounded by DATA_PAYLOAD_BYTES_MAX");
        Ok(Some(SendRange {
            position: self.next,
            max_bytes,
        }))
    }

    /// Turns `bytes`, read from the log at [`Sender::next_position`], into the next Data
    /// frame: the whole records among them within what [`Sender::next_send`] allows (this
    /// segment, this epoch, the window), so reading more than asked is harmless. `confirm`
    /// is the master's confirm position (see `sync_wait`).
    pub fn prepare(
        &mut self,
        bytes: Bytes,
        master: &MasterLog<'_>,
        confirm: u64,
        now: Instant,
    ) -> Result<Prepared, SendError> {
        let Some(range) = self.next_send(master)? else {
            return Ok(Prepared::Wait);
        };
        let usable = range.max_bytes.min(bytes.len());
        let found = scan(&bytes[..usable], self.next, self.config.segment_bytes)?;
        if found.whole_bytes == 0 {
            let needed = found.next_record_bytes.unwrap_or(BLANK_MARKER_BYTES);
            if needed > DATA_PAYLOAD_BYTES_MAX as u64 {
                return Err(SendError::RecordTooLarge {
                    position: self.next,
                    bytes: needed,
                });
            }
            // A record reaching past the written end or into the next epoch is damage:
            // waiting for it would stall this slave for ever.
            let available = self.log_bytes_available(master)?;
            if needed > available {
                return Err(SendError::RecordPastEnd {
                    position: self.next,
                    bytes: needed,
                    available,
                });
            }
            self.record_bytes_needed = Some(needed);
            return Ok(Prepared::NeedMore {
                position: self.next,
                bytes: usize::try_from(needed).expect("bounded by DATA_PAYLOAD_BYTES_MAX"),
            });
        }
        let epoch = master
            .epochs
            .epoch_at(self.next)
            .ok_or(SendError::NoEpoch {
                position: self.next,
            })?;
        let data = Data::new(
            self.log_id,
            epoch,
            self.next,
            confirm,
            bytes.slice(..found.whole_bytes),
        );
        self.next = found.end_position;
        self.record_bytes_needed = None;
        self.last_sent_at = now;
        self.confirm_sent = self.confirm_sent.max(confirm);
        Ok(Prepared::Data(data))
    }

    /// Whether to send a [`Sender::heartbeat`]: nothing was sent for `interval`
    /// (`haSendHeartbeatInterval`), or `confirm` moved past what the slave was last told
    /// (its consumers wait for it; call this when there is no Data to send).
    pub fn heartbeat_due(&self, now: Instant, interval: Duration, confirm: u64) -> bool {
        now.saturating_duration_since(self.last_sent_at) >= interval || confirm > self.confirm_sent
    }

    /// A Heartbeat telling the slave where the master is.
    pub fn heartbeat(&mut self, master: &MasterLog<'_>, confirm: u64, now: Instant) -> Heartbeat {
        self.last_sent_at = now;
        self.confirm_sent = self.confirm_sent.max(confirm);
        Heartbeat {
            log_id: self.log_id,
            epoch: master.epochs.latest().map_or(0, |latest| latest.epoch),
            written: master.written,
            confirm,
        }
    }

    /// Validates and applies an Ack (see the module docs for what is refused).
    pub fn on_ack(&mut self, ack: &Ack, now: Instant) -> Result<AckProgress, AckError> {
        if ack.log_id != self.log_id {
            return Err(AckError::WrongLog {
                expected: self.log_id,
                found: ack.log_id,
            });
        }
        if ack.durable > ack.written {
            return Err(AckError::DurableBeyondWritten {
                written: ack.written,
                durable: ack.durable,
            });
        }
        if ack.written > self.next {
            return Err(AckError::BeyondSent {
                written: ack.written,
                sent: self.next,
            });
        }
        if ack.written < self.acked_written {
            return Err(AckError::Backwards {
                what: "written",
                previous: self.acked_written,
                found: ack.written,
            });
        }
        if ack.durable < self.acked_durable {
            return Err(AckError::Backwards {
                what: "durable",
                previous: self.acked_durable,
                found: ack.durable,
            });
        }
        if ack.confirm > self.confirm_sent {
            return Err(AckError::ConfirmBeyondSent {
                confirm: ack.confirm,
                sent: self.confirm_sent,
            });
        }
        let durable_advanced = ack.durable > self.acked_durable;
        self.acked_written = ack.written;
        self.acked_durable = ack.durable;
        self.last_ack_at = now;
        Ok(AckProgress {
            written: ack.written,
            durable: ack.durable,
            durable_advanced,
            visible: ack.durable.min(ack.confirm),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::{blank, record};

    const SEGMENT_BYTES: u64 = 4096;

    fn identity() -> MasterIdentity {
        MasterIdentity {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 0,
            format: StoreFormat {
                format_version: 1,
                segment_bytes: SEGMENT_BYTES,
            },
        }
    }

    fn hello(logs: Vec<LogState>) -> Hello {
        Hello {
            cluster_name: "DefaultCluster".into(),
            broker_name: "broker-a".into(),
            broker_id: 1,
            format: identity().format,
            logs,
        }
    }

    fn empty_state(log_id: u8) -> LogState {
        LogState {
            log_id,
            written: 0,
            durable: 0,
            epochs: EpochHistory::new(),
        }
    }

    fn epochs(entries: &[(u32, u64)]) -> EpochHistory {
        let mut history = EpochHistory::new();
        for &(epoch, start) in entries {
            history.begin(epoch, start).expect("increasing");
        }
        history
    }

    /// Log bytes from position 0: records of `lengths`, rolling segments as the store does.
    fn log_bytes(lengths: &[usize]) -> Vec<u8> {
        let mut bytes = Vec::new();
        for (index, &length) in lengths.iter().enumerate() {
            let position = bytes.len() as u64;
            let segment_end = position - position % SEGMENT_BYTES + SEGMENT_BYTES;
            if position + length as u64 + BLANK_MARKER_BYTES > segment_end {
                bytes.extend(blank(segment_end - position));
            }
            bytes.extend(record(length, u8::try_from(index % 200).expect("small")));
        }
        bytes
    }

    // Proves each kind of stranger is refused with its own reason, and a slave of this
    // broker is accepted.
    #[test]
    fn peer_check() {
        let master = identity();
        assert_eq!(check_peer(&master, &hello(vec![])), Ok(()));
        let mut other = hello(vec![]);
        other.cluster_name = "OtherCluster".into();
        let refusal = check_peer(&master, &other).expect_err("other cluster");
        assert_eq!(refusal.close().reason, CloseReason::WrongCluster);
        let mut other = hello(vec![]);
        other.broker_name = "broker-b".into();
        let refusal = check_peer(&master, &other).expect_err("other broker");
        assert_eq!(refusal.close().reason, CloseReason::WrongBrokerName);
        let mut other = hello(vec![]);
        other.broker_id = 0;
        assert_eq!(
            check_peer(&master, &other),
            Err(PeerRefusal::MasterBrokerId)
        );
        let mut promoted = identity();
        promoted.broker_id = 3;
        let mut other = hello(vec![]);
        other.broker_id = 3;
        assert_eq!(
            check_peer(&promoted, &other),
            Err(PeerRefusal::OwnBrokerId { broker_id: 3 })
        );
        let mut other = hello(vec![]);
        other.format.segment_bytes *= 2;
        let refusal = check_peer(&master, &other).expect_err("other format");
        assert_eq!(refusal.close().reason, CloseReason::FormatMismatch);
        assert!(welcome(&master, &other, &[]).is_err());
    }

    // Proves the Welcome answers each log: a plan with the master's history, a refusal for
    // a log the master lacks or for a slave with a newer epoch, and lists the master's logs.
    #[test]
    fn welcome_answers_every_log() {
        let history = epochs(&[(1, 0), (2, 100)]);
        let logs = [
            MasterLog {
                log_id: 0,
                epochs: &history,
                written: 500,
                oldest: 0,
            },
            MasterLog {
                log_id: 1,
                epochs: &history,
                written: 500,
                oldest: 0,
            },
        ];
        let mut newer = empty_state(1);
        newer.epochs = epochs(&[(1, 0), (9, 50)]);
        newer.written = 60;
        let answer = welcome(
            &identity(),
            &hello(vec![empty_state(0), newer, empty_state(7)]),
            &logs,
        )
        .expect("a slave of this broker");
        assert_eq!(answer.master_logs, vec![0, 1]);
        assert_eq!(
            answer.logs[0].answer,
            LogAnswer::Follow {
                plan: ResumePlan::Continue { from: 0 },
                epochs: history.clone()
            }
        );
        assert_eq!(
            answer.logs[1].answer,
            LogAnswer::Refused(LogRefusal::SlaveNewerEpoch {
                slave_epoch: 9,
                master_epoch: Some(2)
            })
        );
        assert_eq!(
            answer.logs[2].answer,
            LogAnswer::Refused(LogRefusal::UnknownLog)
        );
    }

    // Proves a slave whose end the master's retention has outrun is told, in the Welcome, to
    // start afresh at the master's oldest retained segment, and that the Welcome survives
    // the wire.
    #[test]
    fn welcome_says_full_copy() {
        let history = epochs(&[(1, 2 * SEGMENT_BYTES)]);
        let logs = [MasterLog {
            log_id: 0,
            epochs: &history,
            written: 5 * SEGMENT_BYTES,
            oldest: 2 * SEGMENT_BYTES,
        }];
        let mut behind = empty_state(0);
        behind.epochs = epochs(&[(1, 0)]);
        behind.written = SEGMENT_BYTES + 100;
        behind.durable = SEGMENT_BYTES;
        let answer = welcome(&identity(), &hello(vec![behind]), &logs).expect("accepted");
        assert_eq!(
            answer.logs[0].answer,
            LogAnswer::Follow {
                plan: ResumePlan::FullCopy {
                    from: 2 * SEGMENT_BYTES
                },
                epochs: history.clone()
            }
        );
        let frame = crate::wire::Frame::Welcome(answer);
        let mut encoded = bytes::BytesMut::new();
        crate::wire::encode(&frame, &mut encoded).expect("encodable");
        assert_eq!(crate::wire::decode(&mut encoded), Ok(Some(frame)));
    }

    fn sender(config: SenderConfig, plan: ResumePlan, now: Instant) -> Sender {
        Sender::start(&empty_state(0), plan, config, now)
    }

    fn read(log: &[u8], range: SendRange) -> Bytes {
        let from = usize::try_from(range.position).expect("small");
        Bytes::copy_from_slice(&log[from..(from + range.max_bytes).min(log.len())])
    }

    fn data(prepared: Prepared) -> Data {
        match prepared {
            Prepared::Data(data) => data,
            other => panic!("expected data, got {other:?}"),
        }
    }

    // Proves frames hold whole records, stop at the window until an ack, stop at the
    // segment's end (whose marker travels as 8 bytes) and at the next epoch's start.
    #[test]
    fn frames_respect_window_segment_and_epoch() {
        let log = log_bytes(&[1000, 1000, 1000, 1100, 500]);
        let written = log.len() as u64;
        assert_eq!(written, 4096 + 1100 + 500);
        let history = epochs(&[(1, 0), (2, 4096 + 1100)]);
        let master = MasterLog {
            log_id: 0,
            epochs: &history,
            written,
            oldest: 0,
        };
        let now = Instant::now();
        let config = SenderConfig {
            frame_payload_bytes: 2500,
            window_bytes: 3000,
            segment_bytes: SEGMENT_BYTES,
        };
        let mut sender = sender(config, ResumePlan::Continue { from: 0 }, now);
        let range = sender
            .next_send(&master)
            .expect("ok")
            .expect("bytes to send");
        assert_eq!(
            range,
            SendRange {
                position: 0,
                max_bytes: 2500
            }
        );
        let first = data(
            sender
                .prepare(read(&log, range), &master, 0, now)
                .expect("ok"),
        );
        assert_eq!(
            (first.start, first.payload.len(), first.epoch),
            (0, 2000, 1)
        );
        assert_eq!(first.payload_crc, crc32fast::hash(&first.payload));
        let range = sender.next_send(&master).expect("ok").expect("window room");
        assert_eq!(range.max_bytes, 1000, "window of 3000 with 2000 unacked");
        let read_too_much = Bytes::copy_from_slice(&log[2000..]);
        let second = data(sender.prepare(read_too_much, &master, 0, now).expect("ok"));
        assert_eq!((second.start, second.payload.len()), (2000, 1000));
        assert_eq!(sender.next_send(&master), Ok(None), "window full");
        assert_eq!(
            sender.prepare(Bytes::copy_from_slice(&log[3000..]), &master, 0, now),
            Ok(Prepared::Wait),
            "bytes read past the window are not sent"
        );
        sender
            .on_ack(
                &Ack {
                    log_id: 0,
                    written: 3000,
                    durable: 1000,
                    confirm: 0,
                },
                now,
            )
            .expect("valid ack");
        let range = sender.next_send(&master).expect("ok").expect("room again");
        let third = data(
            sender
                .prepare(read(&log, range), &master, 0, now)
                .expect("ok"),
        );
        assert_eq!(
            (third.start, third.payload.len()),
            (3000, 8),
            "the end marker alone"
        );
        assert_eq!(sender.next_position(), 4096);
        sender
            .on_ack(
                &Ack {
                    log_id: 0,
                    written: 4096,
                    durable: 4096,
                    confirm: 0,
                },
                now,
            )
            .expect("valid ack");
        let range = sender
            .next_send(&master)
            .expect("ok")
            .expect("next segment");
        assert_eq!(range.max_bytes, 1100, "stops at epoch 2");
        let fourth = data(
            sender
                .prepare(read(&log, range), &master, 0, now)
                .expect("ok"),
        );
        assert_eq!((fourth.start, fourth.epoch), (4096, 1));
        let range = sender.next_send(&master).expect("ok").expect("epoch 2");
        let fifth = data(
            sender
                .prepare(read(&log, range), &master, 77, now)
                .expect("ok"),
        );
        assert_eq!((fifth.start, fifth.epoch, fifth.confirm), (5196, 2, 77));
        assert_eq!(sender.next_send(&master), Ok(None), "all sent");
    }

    // Proves a record larger than the frame size or window is asked for whole and sent
    // alone once nothing is unacknowledged.
    #[test]
    fn a_large_record_goes_alone() {
        let log = log_bytes(&[200, 3000]);
        let history = epochs(&[(1, 0)]);
        let master = MasterLog {
            log_id: 0,
            epochs: &history,
            written: log.len() as u64,
            oldest: 0,
        };
        let now = Instant::now();
        let config = SenderConfig {
            frame_payload_bytes: 1000,
            window_bytes: 1000,
            segment_bytes: SEGMENT_BYTES,
        };
        let mut sender = sender(config, ResumePlan::Continue { from: 0 }, now);
        let range = sender.next_send(&master).expect("ok").expect("bytes");
        let small = data(
            sender
                .prepare(read(&log, range), &master, 0, now)
                .expect("ok"),
        );
        assert_eq!(small.payload.len(), 200);
        let range = sender.next_send(&master).expect("ok").expect("bytes");
        assert_eq!(
            sender.prepare(read(&log, range), &master, 0, now),
            Ok(Prepared::NeedMore {
                position: 200,
                bytes: 3000
            })
        );
        assert_eq!(
            sender.next_send(&master),
            Ok(None),
            "waits for the ack first"
        );
        sender
            .on_ack(
                &Ack {
                    log_id: 0,
                    written: 200,
                    durable: 0,
                    confirm: 0,
                },
                now,
            )
            .expect("valid");
        let range = sender
            .next_send(&master)
            .expect("ok")
            .expect("the big record");
        assert_eq!(range.max_bytes, 3000);
        let big = data(
            sender
                .prepare(read(&log, range), &master, 0, now)
                .expect("ok"),
        );
        assert_eq!(big.payload.len(), 3000);
    }

    // Proves every bad ack is refused with its reason and changes nothing, and good acks
    // advance and report whether durable moved.
    #[test]
    fn acks_are_validated() {
        let log = log_bytes(&[500, 500]);
        let history = epochs(&[(1, 0)]);
        let master = MasterLog {
            log_id: 0,
            epochs: &history,
            written: 1000,
            oldest: 0,
        };
        let now = Instant::now();
        let mut sender = sender(
            SenderConfig::new(SEGMENT_BYTES),
            ResumePlan::Continue { from: 0 },
            now,
        );
        let range = sender.next_send(&master).expect("ok").expect("bytes");
        sender
            .prepare(read(&log, range), &master, 0, now)
            .expect("ok");
        let ack = |written, durable| Ack {
            log_id: 0,
            written,
            durable,
            confirm: 0,
        };
        assert_eq!(
            sender.on_ack(&ack(1001, 0), now),
            Err(AckError::BeyondSent {
                written: 1001,
                sent: 1000
            })
        );
        assert!(matches!(
            sender.on_ack(&ack(500, 600), now),
            Err(AckError::DurableBeyondWritten { .. })
        ));
        assert!(matches!(
            sender.on_ack(
                &Ack {
                    log_id: 4,
                    written: 0,
                    durable: 0,
                    confirm: 0,
                },
                now
            ),
            Err(AckError::WrongLog {
                expected: 0,
                found: 4
            })
        ));
        let later = now + Duration::from_secs(3);
        let progress = sender.on_ack(&ack(800, 500), later).expect("valid");
        assert!(progress.durable_advanced);
        assert_eq!(
            sender.silent_for(later + Duration::from_secs(1)),
            Duration::from_secs(1)
        );
        assert!(matches!(
            sender.on_ack(&ack(700, 500), later),
            Err(AckError::Backwards {
                what: "written",
                ..
            })
        ));
        assert!(matches!(
            sender.on_ack(&ack(800, 400), later),
            Err(AckError::Backwards {
                what: "durable",
                ..
            })
        ));
        assert_eq!(sender.acked_durable(), 500);
        assert_eq!(sender.lag_bytes(1000), 500);
        let progress = sender.on_ack(&ack(1000, 500), later).expect("valid");
        assert!(!progress.durable_advanced);
        // The slave shows what is durable there and confirmed to it; it can only have
        // received a confirm this sender sent.
        sender.heartbeat(&master, 700, later);
        let with_confirm = |confirm| Ack {
            log_id: 0,
            written: 1000,
            durable: 500,
            confirm,
        };
        assert_eq!(
            sender.on_ack(&with_confirm(701), later),
            Err(AckError::ConfirmBeyondSent {
                confirm: 701,
                sent: 700
            })
        );
        let progress = sender.on_ack(&with_confirm(700), later).expect("valid");
        assert_eq!(progress.visible, 500, "capped by the slave's durable end");
        assert_eq!(
            AckError::WrongLog {
                expected: 0,
                found: 1
            }
            .close()
            .reason,
            CloseReason::AckInvalid
        );
    }

    // Proves the start state: a resuming slave's durable claim counts only up to where it
    // resumes, a fresh copy counts from its start, and nothing sent means no ack accepted.
    #[test]
    fn start_state() {
        let now = Instant::now();
        let mut state = empty_state(2);
        state.written = 900;
        state.durable = 800;
        let config = SenderConfig::new(SEGMENT_BYTES);
        let resumed = Sender::start(&state, ResumePlan::Continue { from: 900 }, config, now);
        assert_eq!(
            (resumed.acked_written(), resumed.acked_durable()),
            (900, 800)
        );
        let cut = Sender::start(&state, ResumePlan::Truncate { to: 700 }, config, now);
        assert_eq!((cut.acked_written(), cut.acked_durable()), (700, 700));
        let mut fresh = Sender::start(&state, ResumePlan::FullCopy { from: 8192 }, config, now);
        assert_eq!((fresh.next_position(), fresh.acked_durable()), (8192, 8192));
        assert!(fresh
            .on_ack(
                &Ack {
                    log_id: 2,
                    written: 8193,
                    durable: 0,
                    confirm: 0,
                },
                now
            )
            .is_err());
    }

    // Proves a slave behind retention, a damaged master log and a position no epoch
    // covers stop the sender with a Resync close.
    #[test]
    fn cannot_continue() {
        let history = epochs(&[(1, 100)]);
        let now = Instant::now();
        let master = MasterLog {
            log_id: 0,
            epochs: &history,
            written: 5000,
            oldest: 4096,
        };
        let mut behind = sender(
            SenderConfig::new(SEGMENT_BYTES),
            ResumePlan::Continue { from: 100 },
            now,
        );
        let error = behind.next_send(&master).expect_err("behind retention");
        assert_eq!(error.close().reason, CloseReason::Resync);
        let master = MasterLog {
            oldest: 0,
            ..master
        };
        assert!(matches!(
            behind.prepare(Bytes::from(vec![0u8; 200]), &master, 0, now),
            Err(SendError::Framing(_))
        ));
        let mut damaged = record(200, 1);
        damaged.truncate(150);
        let short = MasterLog {
            written: 250,
            ..master
        };
        let mut cut = sender(
            SenderConfig::new(SEGMENT_BYTES),
            ResumePlan::Continue { from: 100 },
            now,
        );
        assert_eq!(
            cut.prepare(Bytes::from(damaged), &short, 0, now),
            Err(SendError::RecordPastEnd {
                position: 100,
                bytes: 200,
                available: 150
            })
        );
        let mut uncovered = sender(
            SenderConfig::new(SEGMENT_BYTES),
            ResumePlan::Continue { from: 0 },
            now,
        );
        assert_eq!(
            uncovered.prepare(Bytes::from(record(100, 1)), &master, 0, now),
            Err(SendError::NoEpoch { position: 0 })
        );
    }

    // Proves heartbeats fall due after the interval without frames, and carry the
    // master's epoch, end and confirm position.
    #[test]
    fn heartbeats() {
        let history = epochs(&[(1, 0), (4, 10)]);
        let master = MasterLog {
            log_id: 0,
            epochs: &history,
            written: 300,
            oldest: 0,
        };
        let now = Instant::now();
        let mut sender = sender(
            SenderConfig::new(SEGMENT_BYTES),
            ResumePlan::Continue { from: 300 },
            now,
        );
        let interval = Duration::from_secs(5);
        assert!(!sender.heartbeat_due(now + Duration::from_secs(4), interval, 0));
        assert!(sender.heartbeat_due(now + interval, interval, 0));
        let beat = sender.heartbeat(&master, 250, now + interval);
        assert_eq!(
            beat,
            Heartbeat {
                log_id: 0,
                epoch: 4,
                written: 300,
                confirm: 250
            }
        );
        assert!(!sender.heartbeat_due(now + interval, interval, 250));
        assert!(
            sender.heartbeat_due(now + interval, interval, 260),
            "the slave must learn a new confirm position"
        );
    }
}
