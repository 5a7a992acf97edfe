//! The records pop writes to its revive queue, in the JSON shape of Java's `PopCheckPoint`,
//! `AckMsg` and `BatchAckMsg`, told apart by tag ([`CK_TAG`], [`ACK_TAG`],
//! [`BATCH_ACK_TAG`]).
//!
//! A checkpoint (CK) names the messages one pop took from one queue: the start offset, each
//! message's offset as a difference from it, the pop and invisible times. An ack names a CK
//! by topic, group, queue, start offset and pop time ([`CkKey`]) and one or more acked
//! offsets. Comet adds one field to the CK, `no`: the queue offset the pop moved the
//! group's pop position to, so a restart can put the position back from the records alone.
//!
//! An orderly pop writes no CK (its messages come back by being popped again from the
//! group's consume offset); Comet writes a record of its own for each orderly ack
//! ([`ORDER_ACK_TAG`], [`OrderAck`]) so that the consume offset it moved, and an ack ahead
//! of it, survive a crash.

use comet_proto::bytes::BytesMut;
use comet_proto::message::{encode_record, RecordError, RecordSpec, RecordView};
use comet_proto::properties::{names, Properties};
use serde::{Deserialize, Serialize};

use super::{ACK_TAG, BATCH_ACK_TAG, CK_TAG, ORDER_ACK_TAG};
use crate::shard::ShardBroker;

/// A checkpoint: what one pop of one queue handed out.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct CheckPoint {
    /// Queue offset the pop started at.
    #[serde(rename = "so")]
    pub start_offset: i64,
    /// Pop time, ms.
    #[serde(rename = "pt")]
    pub pop_time: i64,
    /// Invisible time, ms.
    #[serde(rename = "it")]
    pub invisible_time: i64,
    /// Java's ack bitmap, always 0 when written (acks are separate records).
    #[serde(rename = "bm")]
    pub bit_map: i32,
    /// Messages handed out.
    #[serde(rename = "n")]
    pub num: u8,
    /// Queue id.
    #[serde(rename = "q")]
    pub queue_id: i32,
    /// The queue's topic (a pop retry topic for a retry queue).
    #[serde(rename = "t")]
    pub topic: String,
    /// Consumer group.
    #[serde(rename = "c")]
    pub cid: String,
    /// Java's revive offset field (unused here: the record's own queue offset is it).
    #[serde(rename = "ro")]
    pub revive_offset: i64,
    /// Each message's queue offset minus `start_offset`.
    #[serde(rename = "d")]
    pub queue_offset_diff: Vec<i32>,
    /// Broker name.
    #[serde(rename = "bn")]
    pub broker_name: String,
    /// Where the pop left the group's pop position (Comet's field).
    #[serde(rename = "no")]
    pub next_offset: i64,
}

impl CheckPoint {
    /// The key acks name it by.
    pub fn key(&self) -> CkKey {
        CkKey {
            topic: self.topic.clone(),
            group: self.cid.clone(),
            queue_id: self.queue_id,
            start_offset: self.start_offset,
            pop_time: self.pop_time,
        }
    }

    /// When its unacked messages come back, ms.
    pub fn revive_time_ms(&self) -> i64 {
        self.pop_time.saturating_add(self.invisible_time)
    }

    /// The queue offset of message `index`.
    pub fn offset_of(&self, index: usize) -> i64 {
        self.start_offset + i64::from(self.queue_offset_diff[index])
    }

    /// The index of the message at queue offset `offset`, if this CK holds it.
    pub fn index_of(&self, offset: i64) -> Option<usize> {
        let diff = i32::try_from(offset.checked_sub(self.start_offset)?).ok()?;
        self.queue_offset_diff.iter().position(|d| *d == diff)
    }
}

/// What names a checkpoint (Java pairs acks with CKs by the same fields).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CkKey {
    /// The queue's topic.
    pub topic: String,
    /// Consumer group.
    pub group: String,
    /// Queue id.
    pub queue_id: i32,
    /// The CK's start offset.
    pub start_offset: i64,
    /// The CK's pop time, ms.
    pub pop_time: i64,
}

/// An ack of one or more messages of one checkpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct AckRecord {
    /// The acked offset (one ack).
    #[serde(rename = "ao")]
    pub ack_offset: i64,
    /// The CK's start offset.
    #[serde(rename = "so")]
    pub start_offset: i64,
    /// Consumer group.
    #[serde(rename = "c")]
    pub consumer_group: String,
    /// The queue's topic.
    #[serde(rename = "t")]
    pub topic: String,
    /// Queue id.
    #[serde(rename = "q")]
    pub queue_id: i32,
    /// The CK's pop time, ms.
    #[serde(rename = "pt")]
    pub pop_time: i64,
    /// Broker name.
    #[serde(rename = "bn")]
    pub broker_name: String,
    /// The acked offsets (a batch ack); empty for one ack.
    #[serde(rename = "aol", skip_serializing_if = "Vec::is_empty")]
    pub ack_offset_list: Vec<i64>,
}

impl AckRecord {
    /// The key of the CK it acks.
    pub fn key(&self) -> CkKey {
        CkKey {
            topic: self.topic.clone(),
            group: self.consumer_group.clone(),
            queue_id: self.queue_id,
            start_offset: self.start_offset,
            pop_time: self.pop_time,
        }
    }

    /// The acked offsets.
    pub fn offsets(&self) -> Vec<i64> {
        if self.ack_offset_list.is_empty() {
            vec![self.ack_offset]
        } else {
            self.ack_offset_list.clone()
        }
    }
}

/// An ack of one message of an orderly pop (Comet's record).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OrderAck {
    /// The queue's topic.
    #[serde(rename = "t")]
    pub topic: String,
    /// Consumer group.
    #[serde(rename = "c")]
    pub consumer_group: String,
    /// Queue id.
    #[serde(rename = "q")]
    pub queue_id: i32,
    /// The acked message's queue offset.
    #[serde(rename = "ao")]
    pub ack_offset: i64,
    /// The group's consume offset after the ack.
    #[serde(rename = "no")]
    pub next_offset: i64,
}

/// A record read back from the revive queue.
#[derive(Clone, Debug)]
pub enum ReviveRecord {
    /// A checkpoint.
    Ck(CheckPoint),
    /// An ack or batch ack.
    Ack(AckRecord),
    /// An ack of an orderly pop.
    OrderAck(OrderAck),
}

/// Why a revive record was not understood.
#[derive(Debug, thiserror::Error)]
pub enum ReviveRecordError {
    /// Its tag is none of pop's.
    #[error("revive record with tag {0:?}")]
    Tag(Option<String>),
    /// Its body is not the JSON its tag says.
    #[error("revive record body: {0}")]
    Body(#[from] serde_json::Error),
}

/// Reads a revive record.
pub fn parse(view: &RecordView<'_>) -> Result<ReviveRecord, ReviveRecordError> {
    match view.property(names::TAGS) {
        Some(CK_TAG) => Ok(ReviveRecord::Ck(serde_json::from_slice(view.body())?)),
        Some(ACK_TAG | BATCH_ACK_TAG) => {
            Ok(ReviveRecord::Ack(serde_json::from_slice(view.body())?))
        }
        Some(ORDER_ACK_TAG) => Ok(ReviveRecord::OrderAck(serde_json::from_slice(view.body())?)),
        other => Err(ReviveRecordError::Tag(other.map(str::to_owned))),
    }
}

/// A CK record for this shard's revive queue.
pub fn ck_record(broker: &ShardBroker, ck: &CheckPoint) -> Result<BytesMut, RecordError> {
    let body = serde_json::to_vec(ck).expect("a checkpoint serializes");
    revive_record(broker, CK_TAG, &body)
}

/// An ack record for this shard's revive queue (a batch ack when it names several offsets).
pub fn ack_record(broker: &ShardBroker, ack: &AckRecord) -> Result<BytesMut, RecordError> {
    let body = serde_json::to_vec(ack).expect("an ack serializes");
    let tag = if ack.ack_offset_list.is_empty() {
        ACK_TAG
    } else {
        BATCH_ACK_TAG
    };
    revive_record(broker, tag, &body)
}

/// An orderly ack's record for this shard's revive queue.
pub fn order_ack_record(broker: &ShardBroker, ack: &OrderAck) -> Result<BytesMut, RecordError> {
    let body = serde_json::to_vec(ack).expect("an orderly ack serializes");
    revive_record(broker, ORDER_ACK_TAG, &body)
}

fn revive_record(broker: &ShardBroker, tag: &str, body: &[u8]) -> Result<BytesMut, RecordError> {
    let topic = super::revive_topic(broker);
    let mut properties = Properties::new();
    properties.insert(names::TAGS, tag);
    let properties = properties.encode();
    let spec = RecordSpec {
        topic: &topic,
        queue_id: super::revive_queue(broker),
        flag: 0,
        sysflag: 0,
        born_timestamp: comet_rt::clock::wall_clock_ms(),
        born_host: broker.store_host(),
        store_host: broker.store_host(),
        reconsume_times: 0,
        prepared_transaction_offset: 0,
        body,
        properties: &properties,
    };
    let mut record = BytesMut::new();
    encode_record(&spec, 0, 0, 0, &mut record)?;
    Ok(record)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the JSON keys are Java's (so a Java tool reading the revive topic understands
    // them), an ack finds its message in the CK by offset, and a batch ack lists offsets.
    #[test]
    fn ck_and_ack_bodies_use_javas_keys() {
        let ck = CheckPoint {
            start_offset: 10,
            pop_time: 1000,
            invisible_time: 500,
            num: 2,
            queue_id: 1,
            topic: "T".into(),
            cid: "g".into(),
            queue_offset_diff: vec![0, 3],
            broker_name: "b".into(),
            next_offset: 14,
            ..CheckPoint::default()
        };
        let json = serde_json::to_string(&ck).unwrap();
        for key in [
            "\"so\":10",
            "\"pt\":1000",
            "\"it\":500",
            "\"n\":2",
            "\"d\":[0,3]",
        ] {
            assert!(json.contains(key), "{json} lacks {key}");
        }
        assert_eq!(serde_json::from_str::<CheckPoint>(&json).unwrap(), ck);
        assert_eq!(ck.revive_time_ms(), 1500);
        assert_eq!(ck.index_of(13), Some(1));
        assert_eq!(ck.index_of(12), None);
        assert_eq!(ck.index_of(9), None);
        assert_eq!(ck.offset_of(1), 13);
        let ack = AckRecord {
            ack_offset: 13,
            start_offset: 10,
            consumer_group: "g".into(),
            topic: "T".into(),
            queue_id: 1,
            pop_time: 1000,
            broker_name: "b".into(),
            ack_offset_list: Vec::new(),
        };
        assert_eq!(ack.key(), ck.key());
        assert_eq!(ack.offsets(), [13]);
        let ack_json = serde_json::to_string(&ack).unwrap();
        assert!(ack_json.contains("\"ao\":13") && !ack_json.contains("aol"));
        let batch = AckRecord {
            ack_offset_list: vec![10, 13],
            ..ack
        };
        assert_eq!(batch.offsets(), [10, 13]);
    }
}
