//! Statistics headers (docs/protocol.md#admin-requests): the per-topic and per-group figures
//! RocketMQ's tools read by name and key.

use super::command_header;

command_header! {
    /// VIEW_BROKER_STATS_DATA (315) request.
    pub struct ViewBrokerStatsDataRequestHeader {
        /// Statistic name, e.g. `TOPIC_PUT_NUMS`, `GROUP_GET_NUMS`.
        stats_name: String => "statsName",
        /// Item key: a topic, `topic@group`, or the cluster name for broker-wide items.
        stats_key: String => "statsKey",
    }
}
