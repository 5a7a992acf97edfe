//! The per-(topic, group) request modes SET_MESSAGE_REQUEST_MODE sets (Java's
//! `MessageRequestModeManager`), kept in `config/messageRequestMode.json` in Java's shape
//! (docs/protocol.md#config-json-files).

use std::path::Path;

use comet_proto::body::{
    JsonBody, MessageRequestMode, MessageRequestModeSerializeWrapper,
    SetMessageRequestModeRequestBody,
};
use comet_proto::names::is_retry_topic;

use crate::persist::{self, PersistError};

/// The file name under the broker's config directory (Java's
/// `BrokerPathConfigHelper.getMessageRequestModePath`).
pub const FILE_NAME: &str = "messageRequestMode.json";

/// The mode every consumer of a (topic, group) is told, and its POP sharing count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestMode {
    /// PULL or POP.
    pub mode: MessageRequestMode,
    /// POP only: how many following consumers' queues each consumer also pops.
    pub pop_share_queue_num: i32,
}

/// The modes set so far.
#[derive(Debug, Default)]
pub struct RequestModeTable {
    table: MessageRequestModeSerializeWrapper,
}

impl RequestModeTable {
    /// Reads `<config_dir>/messageRequestMode.json` (or its `.bak`); an empty table when
    /// neither exists.
    pub fn load(config_dir: &Path) -> Result<RequestModeTable, PersistError> {
        let table = persist::read_json(
            &config_dir.join(FILE_NAME),
            MessageRequestModeSerializeWrapper::decode,
        )?;
        Ok(RequestModeTable {
            table: table.unwrap_or_default(),
        })
    }

    /// The entry set for `(topic, group)`, if any.
    pub fn get(&self, topic: &str, group: &str) -> Option<&SetMessageRequestModeRequestBody> {
        self.table.message_request_mode_map.get(topic)?.get(group)
    }

    /// Records `entry` under its topic and group, replacing any earlier one.
    pub fn set(&mut self, entry: SetMessageRequestModeRequestBody) {
        self.table
            .message_request_mode_map
            .entry(entry.topic.clone())
            .or_default()
            .insert(entry.consumer_group.clone(), entry);
    }

    /// Replaces the whole table with `table` (a slave's copy of its master's); true when
    /// that changed it.
    pub fn replace(&mut self, table: MessageRequestModeSerializeWrapper) -> bool {
        let changed = self.table != table;
        self.table = table;
        changed
    }

    /// The JSON the file holds (and GET_ALL_MESSAGE_REQUEST_MODE answers).
    pub fn encode(&self) -> comet_proto::bytes::Bytes {
        self.table.encode()
    }

    /// The mode QUERY_ASSIGNMENT uses for `(topic, group)`: the one set, else a retry
    /// topic's PULL, else the broker's default (with its default sharing count in POP).
    pub fn effective(
        &self,
        topic: &str,
        group: &str,
        default_mode: MessageRequestMode,
        default_pop_share_queue_num: i32,
    ) -> RequestMode {
        if let Some(entry) = self.get(topic, group) {
            return RequestMode {
                mode: entry.mode,
                pop_share_queue_num: entry.pop_share_queue_num,
            };
        }
        // Java leaves the sharing count at the body's default 0 outside POP.
        if is_retry_topic(topic) || default_mode == MessageRequestMode::PULL {
            return RequestMode {
                mode: MessageRequestMode::PULL,
                pop_share_queue_num: 0,
            };
        }
        RequestMode {
            mode: MessageRequestMode::POP,
            pop_share_queue_num: default_pop_share_queue_num,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(
        topic: &str,
        group: &str,
        mode: MessageRequestMode,
        share: i32,
    ) -> SetMessageRequestModeRequestBody {
        SetMessageRequestModeRequestBody {
            topic: topic.into(),
            consumer_group: group.into(),
            mode,
            pop_share_queue_num: share,
        }
    }

    // Proves the defaults: PULL unless the broker defaults to POP, retry topics PULL even
    // then, and a set entry winning over both.
    #[test]
    fn effective_mode() {
        let mut table = RequestModeTable::default();
        let pull = RequestMode {
            mode: MessageRequestMode::PULL,
            pop_share_queue_num: 0,
        };
        assert_eq!(
            table.effective("T", "g", MessageRequestMode::PULL, -1),
            pull
        );
        assert_eq!(
            table.effective("T", "g", MessageRequestMode::POP, -1),
            RequestMode {
                mode: MessageRequestMode::POP,
                pop_share_queue_num: -1
            }
        );
        assert_eq!(
            table.effective("%RETRY%g", "g", MessageRequestMode::POP, -1),
            pull
        );
        table.set(entry("T", "g", MessageRequestMode::POP, 2));
        assert_eq!(
            table.effective("T", "g", MessageRequestMode::PULL, -1),
            RequestMode {
                mode: MessageRequestMode::POP,
                pop_share_queue_num: 2
            }
        );
        assert_eq!(
            table.effective("T", "other", MessageRequestMode::PULL, -1),
            pull
        );
        table.set(entry("T", "g", MessageRequestMode::PULL, 0));
        assert_eq!(table.effective("T", "g", MessageRequestMode::POP, 3), pull);
    }

    // Proves the table survives a write and a reload, in Java's file shape, and that an
    // absent file gives an empty table.
    #[test]
    fn persists_in_java_shape() {
        let directory = tempfile::tempdir().unwrap();
        assert!(RequestModeTable::load(directory.path())
            .unwrap()
            .get("T", "g")
            .is_none());
        let mut table = RequestModeTable::default();
        table.set(entry("T", "g", MessageRequestMode::POP, -1));
        persist::write_atomic(&directory.path().join(FILE_NAME), &table.encode()).unwrap();
        let text = std::fs::read_to_string(directory.path().join(FILE_NAME)).unwrap();
        assert_eq!(
            text,
            concat!(
                r#"{"messageRequestModeMap":{"T":{"g":{"consumerGroup":"g","mode":"POP","#,
                r#""popShareQueueNum":-1,"topic":"T"}}}}"#
            )
        );
        let loaded = RequestModeTable::load(directory.path()).unwrap();
        assert_eq!(loaded.get("T", "g"), table.get("T", "g"));
    }
}
