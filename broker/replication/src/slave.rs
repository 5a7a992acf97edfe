//! The slave's side: one [`Receiver`] per followed log.
//!
//! The receiver starts from the log's recovered state, says so in the Hello, carries out
//! the master's answer (continue, truncate, or start afresh), and then accepts a Data frame
//! only if it is for its log, starts exactly at its written end, is of an epoch no older
//! than the latest it holds, matches its payload CRC, and is whole records. Anything else is
//! an error that closes the stream; the next handshake decides again where to resume, so a
//! bad frame never leaves a gap or a duplicate in the log.
//!
//! Invariants: `durable <= written`; every epoch of the history starts below `written`;
//! what consumers of the slave may see ([`Receiver::visible_end`]) is durable here and
//! confirmed by the master.

use std::time::{Duration, Instant};

use bytes::Bytes;
use thiserror::Error;

use crate::epoch::{Epoch, EpochError, EpochHistory, EpochStart, ResumePlan};
use crate::limits::POSITION_MAX;
use crate::records::{scan, FramingError};
use crate::wire::{Ack, Close, CloseReason, Data, Heartbeat, LogAnswer, LogRefusal, LogState};

/// What the slave's store must do before appending, from the master's answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// Keep the log as it is; appends continue at `from`.
    Continue {
        /// The written end.
        from: u64,
    },
    /// Drop every byte from `to` on (and what was derived from them: consume-queue entries,
    /// index entries); appends continue at `to`.
    Truncate {
        /// The new written end.
        to: u64,
    },
    /// Drop the whole log and start it empty at `from` (the start of the master's oldest
    /// retained segment).
    Reset {
        /// Where the new log starts.
        from: u64,
    },
    /// The master will not stream this log.
    Stop(LogRefusal),
}

/// Bytes to append, from one accepted Data frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// Where they go: the written end before them.
    pub position: u64,
    /// The records (a segment end marker as its 8 bytes: the store rolls to `end`).
    pub bytes: Bytes,
    /// The written end after them.
    pub end: u64,
    /// An epoch that starts with these bytes: persist it with the history before the bytes
    /// can become durable, so a restart never holds bytes of an epoch it does not know.
    pub new_epoch: Option<EpochStart>,
}

/// A frame or a local report the receiver cannot accept; the stream closes.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum ReceiveError {
    /// For another log.
    #[error("frame for log {found} on the stream of log {expected}")]
    WrongLog {
        /// This receiver's log.
        expected: u8,
        /// The frame's.
        found: u8,
    },
    /// Data before the master's answer was carried out.
    #[error("data before the handshake finished")]
    NotFollowing,
    /// The master's plan does not fit this log (it continues elsewhere than the written
    /// end, or truncates beyond it).
    #[error("master's plan {plan:?} does not fit a log written to {written}")]
    PlanMismatch {
        /// The plan.
        plan: ResumePlan,
        /// The written end.
        written: u64,
    },
    /// Data not starting at the written end (a gap or a duplicate).
    #[error("data starts at {found}, the log is written to {expected}")]
    NotContiguous {
        /// The written end.
        expected: u64,
        /// The frame's start.
        found: u64,
    },
    /// Data or a heartbeat of an epoch older than the latest held: a stale master.
    #[error("epoch {epoch} is older than the latest epoch {latest}")]
    StaleEpoch {
        /// The frame's epoch.
        epoch: Epoch,
        /// The latest epoch of the history.
        latest: Epoch,
    },
    /// The payload does not match its CRC.
    #[error("payload CRC {expected:#010x}, computed {computed:#010x}")]
    PayloadCrc {
        /// The CRC the frame carries.
        expected: u32,
        /// The CRC of the payload.
        computed: u32,
    },
    /// An empty payload (it would make no progress).
    #[error("empty data frame at {position}")]
    EmptyPayload {
        /// The frame's start.
        position: u64,
    },
    /// The payload is not records.
    #[error("payload is not records: {0}")]
    Framing(#[from] FramingError),
    /// The payload ends inside a record, or goes on past a segment's end.
    #[error("payload of {payload_bytes} bytes at {position} holds {whole_bytes} of whole records")]
    NotWholeRecords {
        /// The frame's start.
        position: u64,
        /// Bytes of whole records at its start.
        whole_bytes: usize,
        /// Bytes of the payload.
        payload_bytes: usize,
    },
    /// The master says its log ends before this one: it lost bytes this slave holds.
    #[error("master written to {master_written}, this slave to {written}")]
    MasterBehind {
        /// The master's written end.
        master_written: u64,
        /// This log's written end.
        written: u64,
    },
    /// The store reported durability beyond the written end, or moving backwards.
    #[error("durable {durable} reported, written {written}, durable before {previous}")]
    DurableInvalid {
        /// The report.
        durable: u64,
        /// The written end.
        written: u64,
        /// The durable end before.
        previous: u64,
    },
    /// The starting state is impossible (durable beyond written, or beyond positions).
    #[error("log state written {written}, durable {durable} is impossible")]
    StateInvalid {
        /// The written end.
        written: u64,
        /// The durable end.
        durable: u64,
    },
    /// The history refused the new epoch.
    #[error(transparent)]
    Epoch(#[from] EpochError),
}

impl ReceiveError {
    /// The Close frame that tells the master.
    pub fn close(&self) -> Close {
        let reason = match self {
            ReceiveError::StaleEpoch { .. } => CloseReason::StaleMaster,
            ReceiveError::MasterBehind { .. } => CloseReason::Resync,
            ReceiveError::DurableInvalid { .. } | ReceiveError::StateInvalid { .. } => {
                CloseReason::Shutdown
            }
            _ => CloseReason::DataInvalid,
        };
        Close::new(reason, self.to_string())
    }
}

/// The slave's state of one followed log (see the module docs).
#[derive(Clone, Debug)]
pub struct Receiver {
    log_id: u8,
    segment_bytes: u64,
    epochs: EpochHistory,
    written: u64,
    durable: u64,
    confirm: u64,
    following: bool,
    acked: Option<Acked>,
    highest_epoch_seen: Option<Epoch>,
}

impl Receiver {
    /// A receiver for a log recovered to `written` (of which `durable` is on disk), with
    /// its stored history. Epochs starting at or past `written` hold no bytes (the log lost
    /// them in a crash) and are forgotten.
    pub fn new(
        log_id: u8,
        segment_bytes: u64,
        mut epochs: EpochHistory,
        written: u64,
        durable: u64,
    ) -> Result<Receiver, ReceiveError> {
        if durable > written || written > POSITION_MAX {
            return Err(ReceiveError::StateInvalid { written, durable });
        }
        epochs.truncate_to(written);
        let highest_epoch_seen = epochs.latest().map(|latest| latest.epoch);
        Ok(Receiver {
            log_id,
            segment_bytes,
            epochs,
            written,
            durable,
            confirm: 0,
            following: false,
            acked: None,
            highest_epoch_seen,
        })
    }

    /// The log followed.
    pub fn log_id(&self) -> u8 {
        self.log_id
    }

    /// The history (persist it after [`Receiver::on_answer`] and with every new epoch).
    pub fn epochs(&self) -> &EpochHistory {
        &self.epochs
    }

    /// The written end.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// The durable end.
    pub fn durable(&self) -> u64 {
        self.durable
    }

    /// The highest epoch this log has heard of: its own, the master's history in the
    /// Welcome, Data and Heartbeat frames. A master begins an epoch before it writes in it,
    /// so its newest epoch may hold no bytes this slave could record; promoted by hand, this
    /// log must begin an epoch above this one (persist it with the history), or it could
    /// reuse the number of an epoch whose bytes it never got.
    pub fn highest_epoch_seen(&self) -> Option<Epoch> {
        self.highest_epoch_seen
    }

    /// Takes an epoch heard of before a restart (see [`Receiver::highest_epoch_seen`]).
    pub fn remember_epoch(&mut self, epoch: Epoch) {
        self.highest_epoch_seen = self.highest_epoch_seen.max(Some(epoch));
    }

    /// The latest confirm position the master sent.
    pub fn confirm(&self) -> u64 {
        self.confirm
    }

    /// What consumers of the slave may see: durable here and confirmed by the master.
    pub fn visible_end(&self) -> u64 {
        self.durable.min(self.confirm)
    }

    /// This log's entry in the Hello.
    pub fn hello_state(&self) -> LogState {
        LogState {
            log_id: self.log_id,
            written: self.written,
            durable: self.durable,
            epochs: self.epochs.clone(),
        }
    }

    /// Takes the master's answer for this log; the store must carry out the returned
    /// instruction before appending anything.
    pub fn on_answer(&mut self, answer: &LogAnswer) -> Result<Instruction, ReceiveError> {
        let plan = match answer {
            LogAnswer::Refused(refusal) => {
                self.following = false;
                return Ok(Instruction::Stop(*refusal));
            }
            LogAnswer::Follow { plan, epochs } => {
                if let Some(latest) = epochs.latest() {
                    self.remember_epoch(latest.epoch);
                }
                *plan
            }
        };
        let mismatch = ReceiveError::PlanMismatch {
            plan,
            written: self.written,
        };
        let instruction = match plan {
            ResumePlan::Continue { from } if from == self.written => Instruction::Continue { from },
            ResumePlan::Continue { .. } => return Err(mismatch),
            ResumePlan::Truncate { to } if to <= self.written => {
                self.epochs.truncate_to(to);
                self.written = to;
                self.durable = self.durable.min(to);
                self.confirm = self.confirm.min(to);
                Instruction::Truncate { to }
            }
            ResumePlan::Truncate { .. } => return Err(mismatch),
            ResumePlan::FullCopy { from } => {
                self.epochs.clear();
                self.written = from;
                self.durable = from;
                self.confirm = from;
                Instruction::Reset { from }
            }
        };
        self.following = true;
        self.acked = None;
        Ok(instruction)
    }

    /// Checks a Data frame (see the module docs) and says what to append.
    pub fn on_data(&mut self, data: Data) -> Result<Append, ReceiveError> {
        if data.log_id != self.log_id {
            return Err(ReceiveError::WrongLog {
                expected: self.log_id,
                found: data.log_id,
            });
        }
        if !self.following {
            return Err(ReceiveError::NotFollowing);
        }
        if data.start != self.written {
            return Err(ReceiveError::NotContiguous {
                expected: self.written,
                found: data.start,
            });
        }
        let latest = self.epochs.latest();
        if let Some(latest) = latest.filter(|latest| data.epoch < latest.epoch) {
            return Err(ReceiveError::StaleEpoch {
                epoch: data.epoch,
                latest: latest.epoch,
            });
        }
        let computed = crc32fast::hash(&data.payload);
        if computed != data.payload_crc {
            return Err(ReceiveError::PayloadCrc {
                expected: data.payload_crc,
                computed,
            });
        }
        if data.payload.is_empty() {
            return Err(ReceiveError::EmptyPayload {
                position: data.start,
            });
        }
        let found = scan(&data.payload, data.start, self.segment_bytes)?;
        if found.whole_bytes != data.payload.len() {
            return Err(ReceiveError::NotWholeRecords {
                position: data.start,
                whole_bytes: found.whole_bytes,
                payload_bytes: data.payload.len(),
            });
        }
        let new_epoch = if latest.is_none_or(|latest| data.epoch > latest.epoch) {
            self.epochs.begin(data.epoch, data.start)?;
            Some(EpochStart {
                epoch: data.epoch,
                start: data.start,
            })
        } else {
            None
        };
        self.written = found.end_position;
        self.confirm = self.confirm.max(data.confirm);
        self.remember_epoch(data.epoch);
        Ok(Append {
            position: data.start,
            bytes: data.payload,
            end: found.end_position,
            new_epoch,
        })
    }

    /// Checks a Heartbeat: the master must be of an epoch no older than the latest held and
    /// hold at least this log's bytes; takes its confirm position.
    pub fn on_heartbeat(&mut self, heartbeat: &Heartbeat) -> Result<(), ReceiveError> {
        if heartbeat.log_id != self.log_id {
            return Err(ReceiveError::WrongLog {
                expected: self.log_id,
                found: heartbeat.log_id,
            });
        }
        if let Some(latest) = self.epochs.latest() {
            if heartbeat.epoch < latest.epoch {
                return Err(ReceiveError::StaleEpoch {
                    epoch: heartbeat.epoch,
                    latest: latest.epoch,
                });
            }
        }
        if self.following && heartbeat.written < self.written {
            return Err(ReceiveError::MasterBehind {
                master_written: heartbeat.written,
                written: self.written,
            });
        }
        self.confirm = self.confirm.max(heartbeat.confirm);
        self.remember_epoch(heartbeat.epoch);
        Ok(())
    }

    /// The store made the log durable up to `durable`; returns whether it moved.
    pub fn on_durable(&mut self, durable: u64) -> Result<bool, ReceiveError> {
        if durable > self.written || durable < self.durable {
            return Err(ReceiveError::DurableInvalid {
                durable,
                written: self.written,
                previous: self.durable,
            });
        }
        let advanced = durable > self.durable;
        self.durable = durable;
        Ok(advanced)
    }

    /// Whether to send an Ack: something moved since the last one, or `interval`
    /// (`haSendHeartbeatInterval`) passed, so the master knows the slave is alive.
    pub fn ack_due(&self, now: Instant, interval: Duration) -> bool {
        match self.acked {
            None => true,
            Some(acked) => {
                acked.written != self.written
                    || acked.durable != self.durable
                    || acked.confirm != self.confirm
                    || now.saturating_duration_since(acked.at) >= interval
            }
        }
    }

    /// The Ack to send now (recorded for [`Receiver::ack_due`]).
    pub fn ack(&mut self, now: Instant) -> Ack {
        self.acked = Some(Acked {
            written: self.written,
            durable: self.durable,
            confirm: self.confirm,
            at: now,
        });
        Ack {
            log_id: self.log_id,
            written: self.written,
            durable: self.durable,
            confirm: self.confirm,
        }
    }
}

/// What the last Ack said, and when.
#[derive(Clone, Copy, Debug)]
struct Acked {
    written: u64,
    durable: u64,
    confirm: u64,
    at: Instant,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::records::tests::{blank, record};

    const SEGMENT_BYTES: u64 = 4096;

    fn epochs(entries: &[(u32, u64)]) -> EpochHistory {
        let mut history = EpochHistory::new();
        for &(epoch, start) in entries {
            history.begin(epoch, start).expect("increasing");
        }
        history
    }

    fn follow(plan: ResumePlan) -> LogAnswer {
        LogAnswer::Follow {
            plan,
            epochs: epochs(&[(1, 0)]),
        }
    }

    fn following(written: u64) -> Receiver {
        let history = if written > 0 {
            epochs(&[(1, 0)])
        } else {
            EpochHistory::new()
        };
        let mut receiver =
            Receiver::new(0, SEGMENT_BYTES, history, written, written).expect("valid state");
        let instruction = receiver
            .on_answer(&follow(ResumePlan::Continue { from: written }))
            .expect("fits");
        assert_eq!(instruction, Instruction::Continue { from: written });
        receiver
    }

    fn data(epoch: u32, start: u64, payload: Vec<u8>) -> Data {
        Data::new(0, epoch, start, 0, Bytes::from(payload))
    }

    // Proves the start state: impossible states are refused, epochs without bytes are
    // forgotten, and the Hello says what the log holds.
    #[test]
    fn start_state() {
        assert!(Receiver::new(0, SEGMENT_BYTES, EpochHistory::new(), 10, 11).is_err());
        let receiver =
            Receiver::new(3, SEGMENT_BYTES, epochs(&[(1, 0), (2, 500)]), 500, 400).expect("valid");
        let state = receiver.hello_state();
        assert_eq!(state.epochs, epochs(&[(1, 0)]));
        assert_eq!((state.log_id, state.written, state.durable), (3, 500, 400));
    }

    // Proves each plan becomes its instruction and updates the state, and plans that do
    // not fit the log are refused.
    #[test]
    fn answers() {
        let mut receiver =
            Receiver::new(0, SEGMENT_BYTES, epochs(&[(1, 0), (2, 300)]), 500, 450).expect("valid");
        assert!(matches!(
            receiver.on_answer(&follow(ResumePlan::Continue { from: 400 })),
            Err(ReceiveError::PlanMismatch { .. })
        ));
        assert!(matches!(
            receiver.on_answer(&follow(ResumePlan::Truncate { to: 501 })),
            Err(ReceiveError::PlanMismatch { .. })
        ));
        assert_eq!(
            receiver.on_answer(&follow(ResumePlan::Truncate { to: 300 })),
            Ok(Instruction::Truncate { to: 300 })
        );
        assert_eq!(receiver.epochs(), &epochs(&[(1, 0)]));
        assert_eq!((receiver.written(), receiver.durable()), (300, 300));
        assert_eq!(
            receiver.on_answer(&follow(ResumePlan::FullCopy { from: 8192 })),
            Ok(Instruction::Reset { from: 8192 })
        );
        assert!(receiver.epochs().is_empty());
        assert_eq!((receiver.written(), receiver.durable()), (8192, 8192));
        assert_eq!(
            receiver.on_answer(&LogAnswer::Refused(LogRefusal::UnknownLog)),
            Ok(Instruction::Stop(LogRefusal::UnknownLog))
        );
        assert_eq!(
            receiver.on_data(data(1, 8192, record(100, 1))),
            Err(ReceiveError::NotFollowing)
        );
    }

    // Proves accepted data appends at the written end, records a new epoch once, rolls
    // past a segment end marker, and takes the confirm position.
    #[test]
    fn accepted_data() {
        let mut receiver = following(0);
        let append = receiver.on_data(data(3, 0, record(100, 1))).expect("valid");
        assert_eq!((append.position, append.end), (0, 100));
        assert_eq!(append.new_epoch, Some(EpochStart { epoch: 3, start: 0 }));
        let mut payload = record(3988, 2);
        payload.extend(blank(8));
        let append = receiver.on_data(data(3, 100, payload)).expect("valid");
        assert_eq!((append.end, append.new_epoch), (4096, None));
        let mut next = Data::new(0, 5, 4096, 4000, Bytes::from(record(200, 3)));
        next.confirm = 4000;
        let append = receiver.on_data(next).expect("valid");
        assert_eq!(
            append.new_epoch,
            Some(EpochStart {
                epoch: 5,
                start: 4096
            })
        );
        assert_eq!(receiver.epochs(), &epochs(&[(3, 0), (5, 4096)]));
        assert_eq!(receiver.written(), 4296);
        assert_eq!(receiver.visible_end(), 0, "nothing durable yet");
        assert_eq!(receiver.on_durable(4296), Ok(true));
        assert_eq!(receiver.visible_end(), 4000, "confirmed by the master");
    }

    // Proves every bad frame is refused and leaves the state as it was.
    #[test]
    fn refused_data() {
        let mut receiver = following(0);
        receiver.on_data(data(3, 0, record(100, 1))).expect("valid");
        let before = receiver.hello_state();
        let mut wrong_log = data(3, 100, record(100, 1));
        wrong_log.log_id = 1;
        assert!(matches!(
            receiver.on_data(wrong_log),
            Err(ReceiveError::WrongLog { .. })
        ));
        assert_eq!(
            receiver.on_data(data(3, 200, record(100, 1))),
            Err(ReceiveError::NotContiguous {
                expected: 100,
                found: 200
            })
        );
        assert_eq!(
            receiver.on_data(data(3, 0, record(100, 1))),
            Err(ReceiveError::NotContiguous {
                expected: 100,
                found: 0
            }),
            "a duplicate"
        );
        let stale = receiver
            .on_data(data(2, 100, record(100, 1)))
            .expect_err("stale");
        assert_eq!(stale.close().reason, CloseReason::StaleMaster);
        let mut corrupt = data(3, 100, record(100, 1));
        corrupt.payload_crc ^= 1;
        assert!(matches!(
            receiver.on_data(corrupt),
            Err(ReceiveError::PayloadCrc { .. })
        ));
        assert!(matches!(
            receiver.on_data(data(3, 100, Vec::new())),
            Err(ReceiveError::EmptyPayload { .. })
        ));
        let mut cut = record(100, 1);
        cut.truncate(60);
        assert!(matches!(
            receiver.on_data(data(3, 100, cut)),
            Err(ReceiveError::NotWholeRecords { .. })
        ));
        assert!(matches!(
            receiver.on_data(data(3, 100, vec![7u8; 100])),
            Err(ReceiveError::Framing(_))
        ));
        let mut past_segment = record(3988, 1);
        past_segment.extend(blank(8));
        past_segment.extend(record(100, 2));
        let error = receiver
            .on_data(data(4, 100, past_segment))
            .expect_err("past segment");
        assert_eq!(error.close().reason, CloseReason::DataInvalid);
        assert_eq!(receiver.hello_state(), before, "nothing changed");
    }

    // Proves heartbeats: a stale epoch or a master behind this log is refused; the confirm
    // position only moves forward.
    #[test]
    fn heartbeats() {
        let mut receiver = following(0);
        receiver.on_data(data(3, 0, record(100, 1))).expect("valid");
        let beat = |epoch, written, confirm| Heartbeat {
            log_id: 0,
            epoch,
            written,
            confirm,
        };
        assert_eq!(receiver.on_heartbeat(&beat(3, 100, 80)), Ok(()));
        assert_eq!(receiver.confirm(), 80);
        assert_eq!(receiver.on_heartbeat(&beat(3, 100, 50)), Ok(()));
        assert_eq!(receiver.confirm(), 80);
        assert!(matches!(
            receiver.on_heartbeat(&beat(2, 100, 80)),
            Err(ReceiveError::StaleEpoch { .. })
        ));
        let behind = receiver
            .on_heartbeat(&beat(3, 99, 80))
            .expect_err("master behind");
        assert_eq!(behind.close().reason, CloseReason::Resync);
    }

    // Proves the highest epoch heard of covers epochs with no bytes here: the master's
    // newest from the Welcome and heartbeats, and one remembered across a restart.
    #[test]
    fn highest_epoch_seen() {
        let mut receiver =
            Receiver::new(0, SEGMENT_BYTES, epochs(&[(1, 0)]), 100, 100).expect("valid");
        assert_eq!(receiver.highest_epoch_seen(), Some(1));
        let answer = LogAnswer::Follow {
            plan: ResumePlan::Continue { from: 100 },
            epochs: epochs(&[(1, 0), (4, 100)]),
        };
        receiver.on_answer(&answer).expect("fits");
        assert_eq!(
            receiver.epochs(),
            &epochs(&[(1, 0)]),
            "epoch 4 holds no bytes here"
        );
        assert_eq!(receiver.highest_epoch_seen(), Some(4));
        let beat = Heartbeat {
            log_id: 0,
            epoch: 6,
            written: 100,
            confirm: 100,
        };
        receiver.on_heartbeat(&beat).expect("valid");
        assert_eq!(receiver.highest_epoch_seen(), Some(6));
        receiver.remember_epoch(2);
        assert_eq!(receiver.highest_epoch_seen(), Some(6));
        let mut fresh = Receiver::new(0, SEGMENT_BYTES, EpochHistory::new(), 0, 0).expect("ok");
        assert_eq!(fresh.highest_epoch_seen(), None);
        fresh.remember_epoch(9);
        assert_eq!(fresh.highest_epoch_seen(), Some(9));
    }

    // Proves durable reports are checked and acks fall due on progress or the interval.
    #[test]
    fn durable_and_acks() {
        let now = Instant::now();
        let interval = Duration::from_secs(5);
        let mut receiver = following(0);
        assert!(receiver.ack_due(now, interval), "first ack");
        assert_eq!(
            receiver.ack(now),
            Ack {
                log_id: 0,
                written: 0,
                durable: 0,
                confirm: 0
            }
        );
        assert!(!receiver.ack_due(now, interval));
        receiver.on_data(data(1, 0, record(100, 1))).expect("valid");
        assert!(receiver.ack_due(now, interval), "written moved");
        receiver.ack(now);
        assert!(matches!(
            receiver.on_durable(101),
            Err(ReceiveError::DurableInvalid { .. })
        ));
        assert_eq!(receiver.on_durable(100), Ok(true));
        assert!(matches!(
            receiver.on_durable(50),
            Err(ReceiveError::DurableInvalid { .. })
        ));
        assert_eq!(receiver.on_durable(100), Ok(false));
        assert_eq!(
            receiver.ack(now),
            Ack {
                log_id: 0,
                written: 100,
                durable: 100,
                confirm: 0
            }
        );
        assert!(!receiver.ack_due(now + Duration::from_secs(4), interval));
        assert!(receiver.ack_due(now + interval, interval), "keep-alive");
        let beat = Heartbeat {
            log_id: 0,
            epoch: 1,
            written: 100,
            confirm: 60,
        };
        receiver.on_heartbeat(&beat).expect("valid");
        assert!(receiver.ack_due(now, interval), "confirm moved");
        assert_eq!(
            receiver.ack(now).confirm,
            60,
            "the master hears what is shown"
        );
    }
}
