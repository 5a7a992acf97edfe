//! VIEW_BROKER_STATS_DATA (315): one statistic's last minute, hour and day, as
//! `mqadmin statsAll` and the dashboard read them (see `crate::stats` for the names, keys and
//! windows).

use comet_proto::body::JsonBody;
use comet_proto::headers::ViewBrokerStatsDataRequestHeader;
use comet_proto::{CommandHeader, RemotingCommand, ResponseCode};

use crate::shard::ShardBroker;
use crate::stats::{split_key, StatsName};

use super::error;

/// VIEW_BROKER_STATS_DATA (315). An item never counted (or a name not kept) is the error
/// RocketMQ gives: SYSTEM_ERROR "The stats <name> <key> not exist".
pub fn view(broker: &ShardBroker, request: &RemotingCommand) -> RemotingCommand {
    let header = match ViewBrokerStatsDataRequestHeader::from_ext_fields(&request.ext_fields) {
        Ok(header) => header,
        Err(e) => return error(request, ResponseCode::SYSTEM_ERROR, e.to_string()),
    };
    let now_ms = comet_rt::clock::wall_clock_ms();
    let data = StatsName::parse(&header.stats_name).and_then(|name| {
        let (first, second) = split_key(name, &header.stats_key)?;
        broker.stats().view(name, first, second, now_ms)
    });
    match data {
        Some(data) => {
            RemotingCommand::response_to(request, ResponseCode::SUCCESS).with_body(data.encode())
        }
        None => error(
            request,
            ResponseCode::SYSTEM_ERROR,
            format!(
                "The stats <{}> <{}> not exist",
                header.stats_name, header.stats_key
            ),
        ),
    }
}
