//! Recall handles (RocketMQ 5.3+): what a send of a timed message answers in its
//! `recallHandle` field and what RECALL_MESSAGE (370) takes back
//! (docs/protocol.md#recall-message).
//!
//! A version-1 handle is the URL-safe base64 (padded, as Java's `Base64.getUrlEncoder`) of
//! five space-separated fields: `v1 <topic> <brokerName> <timestampMs> <messageId>`, where
//! the timestamp is a time in the timer slot the message is due in and the message id is its
//! `UNIQ_KEY` (Java's `RecallMessageHandle.HandleV1`). Decoding follows Java's
//! `RecallMessageHandle.decodeHandle`: padding is optional, fields past the fifth are
//! ignored, and the timestamp stays text (the broker's validation parses it).

use base64::engine::general_purpose::{URL_SAFE, URL_SAFE_NO_PAD};
use base64::Engine;
use thiserror::Error;

const VERSION_1: &str = "v1";

/// A decoded version-1 recall handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecallHandle {
    /// The message's topic.
    pub topic: String,
    /// The broker that stored it.
    pub broker_name: String,
    /// A time in the timer slot the message is due in, epoch ms, as text.
    pub timestamp: String,
    /// The message's `UNIQ_KEY`.
    pub message_id: String,
}

/// Why a handle cannot be decoded; the text is Java's remark for every case.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("recall handle is invalid")]
pub struct InvalidRecallHandle;

impl RecallHandle {
    /// The handle's wire form.
    pub fn encode(&self) -> String {
        let raw = [
            VERSION_1,
            &self.topic,
            &self.broker_name,
            &self.timestamp,
            &self.message_id,
        ]
        .join(" ");
        URL_SAFE.encode(raw.as_bytes())
    }

    /// Parses a handle's wire form.
    pub fn decode(handle: &str) -> Result<RecallHandle, InvalidRecallHandle> {
        if handle.is_empty() {
            return Err(InvalidRecallHandle);
        }
        let bytes = URL_SAFE
            .decode(handle)
            .or_else(|_| URL_SAFE_NO_PAD.decode(handle))
            .map_err(|_| InvalidRecallHandle)?;
        // Java decodes the bytes as UTF-8 with replacement, never failing.
        let raw = String::from_utf8_lossy(&bytes);
        // Java's `String.split(" ")`: empty fields are kept except trailing ones.
        let mut items: Vec<&str> = raw.split(' ').collect();
        while items.len() > 1 && items.last() == Some(&"") {
            items.pop();
        }
        if items[0] != VERSION_1 || items.len() < 5 {
            return Err(InvalidRecallHandle);
        }
        Ok(RecallHandle {
            topic: items[1].to_owned(),
            broker_name: items[2].to_owned(),
            timestamp: items[3].to_owned(),
            message_id: items[4].to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves a handle survives encode/decode, that Java's encoding of a known handle decodes
    // (padding present or stripped), and that empty, non-base64, wrong-version and short
    // handles are refused with Java's remark.
    #[test]
    fn handles_round_trip_and_bad_ones_are_refused() {
        let handle = RecallHandle {
            topic: "TopicA".into(),
            broker_name: "broker-a".into(),
            timestamp: "1700000000001".into(),
            message_id: "7F0000010001".into(),
        };
        let wire = handle.encode();
        assert_eq!(
            wire,
            URL_SAFE.encode("v1 TopicA broker-a 1700000000001 7F0000010001")
        );
        assert_eq!(RecallHandle::decode(&wire), Ok(handle.clone()));
        assert_eq!(
            RecallHandle::decode(wire.trim_end_matches('=')),
            Ok(handle.clone())
        );
        let extra = URL_SAFE.encode("v1 TopicA broker-a 1700000000001 7F0000010001 more");
        assert_eq!(RecallHandle::decode(&extra), Ok(handle));
        for bad in [
            String::new(),
            "!!!".to_owned(),
            URL_SAFE.encode("v2 TopicA broker-a 1 id"),
            URL_SAFE.encode("v1 TopicA broker-a 1"),
            URL_SAFE.encode("v1 TopicA broker-a 1 "),
        ] {
            assert_eq!(
                RecallHandle::decode(&bad),
                Err(InvalidRecallHandle),
                "{bad}"
            );
        }
        assert_eq!(InvalidRecallHandle.to_string(), "recall handle is invalid");
    }
}
