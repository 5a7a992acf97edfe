//! Cluster and broker commands: clusterList, brokerStatus, haStatus, getBrokerConfig,
//! updateBrokerConfig, brokerConsumeStats.

use comet_client::admin::HaStatus;
use comet_proto::java_properties;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use serde_json::{json, Map, Value};

use super::parse_bool;
use crate::context::Context;
use crate::error::{AdminError, Result};
use crate::output::{Report, Table};

/// `clusterList`: clusters, their brokers and addresses.
#[derive(clap::Args, Clone, Debug)]
pub struct ClusterListArgs {
    /// Only this cluster.
    #[arg(short = 'c', long = "clusterName")]
    cluster: Option<String>,
    /// Print again every this many seconds, until stopped.
    #[arg(short = 'i', long = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_s: Option<u64>,
}

/// `haStatus`: `-b` or `-c`, and a repeat interval.
#[derive(clap::Args, Clone, Debug)]
pub struct HaStatusArgs {
    #[command(flatten)]
    target: BrokerOrCluster,
    /// Print again every this many seconds, until stopped.
    #[arg(short = 'i', long = "interval", value_parser = clap::value_parser!(u64).range(1..))]
    pub interval_s: Option<u64>,
}

/// `-b` or `-c`: one broker, or the brokers of a cluster.
#[derive(clap::Args, Clone, Debug)]
#[command(group(clap::ArgGroup::new("target").required(true).args(["broker", "cluster"])))]
pub struct BrokerOrCluster {
    /// Broker address `ip:port`.
    #[arg(short = 'b', long = "brokerAddr", alias = "broker")]
    broker: Option<String>,
    /// Every broker of this cluster.
    #[arg(short = 'c', long = "clusterName", alias = "cluster")]
    cluster: Option<String>,
}

/// `updateBrokerConfig`: sets one key of a broker's (or a cluster's) configuration.
#[derive(clap::Args, Clone, Debug)]
pub struct UpdateBrokerConfigArgs {
    #[command(flatten)]
    target: BrokerOrCluster,
    /// With `-c`: slaves too (`true`), not only masters.
    #[arg(short = 'a', long = "updateAllBroker", value_parser = parse_bool,
          num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    all: bool,
    /// The key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// Its new value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

/// `brokerConsumeStats`: every group's progress and lag on every topic it consumes.
#[derive(clap::Args, Clone, Debug)]
pub struct BrokerConsumeStatsArgs {
    /// Broker address `ip:port`.
    #[arg(short = 'b', long = "brokerAddr", alias = "broker")]
    broker: String,
    /// Only ordered topics (`true`).
    #[arg(short = 'o', long = "order", value_parser = parse_bool,
          num_args = 0..=1, default_missing_value = "true", default_value = "false")]
    order_only: bool,
    /// Only queues at least this many messages behind.
    #[arg(short = 'l', long = "level", default_value_t = 0)]
    level: i64,
    /// Request timeout in milliseconds (read before connecting, see `main`).
    #[arg(short = 't', long = "timeoutMillis")]
    pub timeout_ms: Option<u64>,
}

/// `clusterList`.
pub fn cluster_list(context: &Context, args: ClusterListArgs) -> Result<Report> {
    let mut table = Table::new(&["#Cluster", "#BrokerName", "#BrokerId", "#Addr"]);
    let info = context.admin.cluster_info()?;
    if let Some(wanted) = &args.cluster {
        if !info.cluster_addr_table.contains_key(wanted) {
            return Err(AdminError::Invalid(format!("no cluster named {wanted}")));
        }
    }
    for (cluster, brokers) in &info.cluster_addr_table {
        if args
            .cluster
            .as_ref()
            .is_some_and(|wanted| wanted != cluster)
        {
            continue;
        }
        for broker_name in brokers {
            let Some(data) = info.broker_addr_table.get(broker_name) else {
                continue;
            };
            for (id, addr) in &data.broker_addrs {
                table.row(vec![
                    json!(cluster),
                    json!(broker_name),
                    json!(id),
                    json!(addr),
                ]);
            }
        }
    }
    let mut report = Report::new();
    report.table("brokers", table);
    Ok(report)
}

/// `brokerStatus`: runtime figures of a broker, or of every broker of a cluster (each line
/// then starts with the broker's address).
pub fn broker_status(context: &Context, args: BrokerOrCluster) -> Result<Report> {
    let single = args.broker.is_some();
    let addrs = context.targets(args.broker.as_deref(), args.cluster.as_deref(), true)?;
    let mut report = Report::new();
    for addr in addrs {
        let figures = context.admin.broker_runtime_info(&addr)?;
        let mut part = Report::new();
        part.json("addr", addr.clone());
        for (key, value) in &figures {
            if single {
                part.line(format!("{key:<32}: {value}"));
            } else {
                part.line(format!("{addr:<24} {key:<32}: {value}"));
            }
        }
        let table: Map<String, Value> = figures
            .into_iter()
            .map(|(k, v)| (k, Value::String(v)))
            .collect();
        part.json("runtime", Value::Object(table));
        report.push("brokers", part);
    }
    Ok(report)
}

/// `haStatus`: replication of a broker's logs, or of every master of a cluster.
pub fn ha_status(context: &Context, args: HaStatusArgs) -> Result<Report> {
    let target = args.target;
    let single = target.broker.is_some();
    let addrs = context.targets(target.broker.as_deref(), target.cluster.as_deref(), false)?;
    let mut report = Report::new();
    for addr in addrs {
        let status = context.admin.ha_status(&addr)?;
        let mut part = Report::new();
        if !single {
            part.line(format!("#Broker {addr}"));
        }
        part.json("addr", addr);
        ha_report(&mut part, &status);
        report.push("brokers", part);
    }
    Ok(report)
}

/// One line per (log, slave) on a master, one per log on a slave; a Java broker's
/// connections when it names no logs.
fn ha_report(report: &mut Report, status: &HaStatus) {
    report.json("master", status.master);
    report.json("inSyncSlaveNums", status.in_sync_slave_nums);
    if status.logs.is_empty() {
        let mut table = Table::new(&["#SlaveAddr", "#SlaveAckOffset", "#Diff", "#InSync"]);
        for connection in &status.ha_connection_info {
            table.row(vec![
                json!(connection.addr),
                json!(connection.slave_ack_offset),
                json!(connection.diff),
                json!(connection.in_sync),
            ]);
        }
        report.table("connections", table);
        return;
    }
    if !status.master {
        let mut table = Table::new(&[
            "#Log",
            "#Written",
            "#Durable",
            "#MasterAddr",
            "#Connected",
            "#Stopped",
        ]);
        for log in &status.logs {
            table.row(vec![
                json!(log.log_id),
                json!(log.written_offset),
                json!(log.durable_offset),
                json!(log.master_addr),
                json!(log.connected),
                json!(log.stopped),
            ]);
        }
        report.table("logs", table);
        return;
    }
    let mut table = Table::new(&[
        "#Log",
        "#Written",
        "#Durable",
        "#Confirm",
        "#Slave",
        "#BrokerId",
        "#SlaveWritten",
        "#SlaveDurable",
        "#LagBytes",
        "#LagMs",
        "#LastAckMs",
        "#InSync",
    ]);
    for log in &status.logs {
        let here = [
            json!(log.log_id),
            json!(log.written_offset),
            json!(log.durable_offset),
            json!(log.confirm_offset),
        ];
        if log.slaves.is_empty() {
            let mut row = here.to_vec();
            row.extend(std::iter::repeat_n(Value::Null, 8));
            table.row(row);
        }
        for slave in &log.slaves {
            let mut row = here.to_vec();
            row.extend([
                json!(slave.addr),
                json!(slave.broker_id),
                json!(slave.slave_written_offset),
                json!(slave.slave_durable_offset),
                json!(slave.lag_bytes),
                json!(slave.lag_millis),
                json!(slave.last_ack_timestamp),
                json!(slave.in_sync),
            ]);
            table.row(row);
        }
    }
    report.table("logs", table);
}

/// `getBrokerConfig`: every key of a broker's configuration, or of each broker of a
/// cluster, as mqadmin prints them (`key = value` under a `====addr====` line).
pub fn get_broker_config(context: &Context, args: BrokerOrCluster) -> Result<Report> {
    let addrs = context.targets(args.broker.as_deref(), args.cluster.as_deref(), true)?;
    let mut report = Report::new();
    for addr in addrs {
        let part = config_of(context, &addr, RequestCode::GET_BROKER_CONFIG)?;
        report.push("brokers", part);
    }
    Ok(report)
}

/// One server's configuration as `code` (GET_BROKER_CONFIG, GET_NAMESRV_CONFIG) answers it, as
/// mqadmin prints it: an `====addr====` line, then `key = value` lines.
pub fn config_of(context: &Context, addr: &str, code: RequestCode) -> Result<Report> {
    let request = RemotingCommand::request(code, 0);
    let response = context.invoke(addr, request, &[ResponseCode::SUCCESS])?;
    let text = String::from_utf8_lossy(&response.body);
    let mut part = Report::new();
    part.line(format!("============{addr}============"));
    let mut config = Map::new();
    for (key, value) in java_properties::parse(&text) {
        part.line(format!("{key:<50}=  {value}"));
        config.insert(key, Value::String(value));
    }
    part.json("addr", addr);
    part.json("config", Value::Object(config));
    Ok(part)
}

/// `updateBrokerConfig`: UPDATE_BROKER_CONFIG with one `key=value` on each broker named.
pub fn update_broker_config(context: &Context, args: UpdateBrokerConfigArgs) -> Result<Report> {
    let target = &args.target;
    let addrs = context.targets(
        target.broker.as_deref(),
        target.cluster.as_deref(),
        args.all,
    )?;
    let body = java_properties::write([(args.key.as_str(), args.value.as_str())]);
    let mut report = Report::new();
    let mut updated = Vec::new();
    for addr in addrs {
        let request =
            RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG, 0).with_body(body.clone());
        context.invoke(&addr, request, &[ResponseCode::SUCCESS])?;
        report.line(format!("update broker config success, {addr}"));
        updated.push(addr);
    }
    report.json("updated", updated);
    report.json("key", args.key);
    report.json("value", args.value);
    Ok(report)
}

/// `brokerConsumeStats`.
pub fn broker_consume_stats(context: &Context, args: BrokerConsumeStatsArgs) -> Result<Report> {
    let list = context
        .admin
        .broker_consume_stats(&args.broker, args.order_only)?;
    let mut table = Table::new(&[
        "#Topic",
        "#Group",
        "#BrokerName",
        "#QueueId",
        "#BrokerOffset",
        "#ConsumerOffset",
        "#Diff",
        "#LastTime",
    ]);
    for groups in &list.consume_stats_list {
        for (group, stats) in groups {
            for (queue, offset) in stats.iter().flat_map(|s| &s.offset_table) {
                let diff = offset.broker_offset - offset.consumer_offset;
                if diff < args.level {
                    continue;
                }
                table.row(vec![
                    json!(queue.topic),
                    json!(group),
                    json!(queue.broker_name),
                    json!(queue.queue_id),
                    json!(offset.broker_offset),
                    json!(offset.consumer_offset),
                    json!(diff),
                    json!(offset.last_timestamp),
                ]);
            }
        }
    }
    let mut report = Report::new();
    report.table("queues", table);
    report.field(
        "diffTotal",
        list.total_diff,
        format!("Diff Total: {}", list.total_diff),
    );
    Ok(report)
}
