//! Statistics bodies: VIEW_BROKER_STATS_DATA's answer.

use serde::{Deserialize, Serialize};

use super::json_bodies;

/// One window of a statistic: what was counted in it, per second, and per counted call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BrokerStatsItem {
    /// Sum of the values added within the window.
    pub sum: i64,
    /// `sum` per second over the window.
    pub tps: f64,
    /// `sum` per call that added to it (e.g. messages per send request).
    pub avgpt: f64,
}

/// VIEW_BROKER_STATS_DATA (315) response body: one item over the last minute, hour and day.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BrokerStatsData {
    /// The last minute.
    #[serde(rename = "statsMinute")]
    pub stats_minute: BrokerStatsItem,
    /// The last hour.
    #[serde(rename = "statsHour")]
    pub stats_hour: BrokerStatsItem,
    /// The last day.
    #[serde(rename = "statsDay")]
    pub stats_day: BrokerStatsItem,
}

json_bodies!(BrokerStatsItem, BrokerStatsData);

#[cfg(test)]
mod tests {
    use super::*;
    use crate::body::JsonBody;

    // Proves the body carries Java's field names (sorted, as fastjson writes them) and reads
    // back.
    #[test]
    fn java_field_names() {
        let data = BrokerStatsData {
            stats_minute: BrokerStatsItem {
                sum: 12,
                tps: 0.2,
                avgpt: 1.5,
            },
            ..BrokerStatsData::default()
        };
        let text = String::from_utf8(data.encode().to_vec()).unwrap();
        assert!(text.contains("\"statsMinute\":{\"avgpt\":1.5,\"sum\":12,\"tps\":0.2}"));
        assert!(text.contains("\"statsHour\""));
        assert!(text.contains("\"statsDay\""));
        assert_eq!(BrokerStatsData::decode(text.as_bytes()).unwrap(), data);
    }
}
