//! Name server commands: wipeWritePerm, addWritePerm, updateKvConfig, getNamesrvConfig. Each
//! goes to every name server given with `-n`, as mqadmin does.

use comet_client::protocol::request;
use comet_proto::headers::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    PutKVConfigRequestHeader, WipeWritePermOfBrokerRequestHeader,
    WipeWritePermOfBrokerResponseHeader,
};
use comet_proto::{RequestCode, ResponseCode};
use serde_json::json;

use crate::context::Context;
use crate::error::Result;
use crate::output::{Report, Table};

/// `wipeWritePerm` / `addWritePerm`.
#[derive(clap::Args, Clone, Debug)]
pub struct WritePermArgs {
    /// The broker name.
    #[arg(short = 'b', long = "brokerName")]
    broker_name: String,
}

/// `updateKvConfig`.
#[derive(clap::Args, Clone, Debug)]
pub struct UpdateKvConfigArgs {
    /// The namespace (`ORDER_TOPIC_CONFIG`, ...).
    #[arg(short = 's', long = "namespace")]
    namespace: String,
    /// The key.
    #[arg(short = 'k', long = "key")]
    key: String,
    /// The value.
    #[arg(short = 'v', long = "value")]
    value: String,
}

/// `wipeWritePerm` (`grant` false) or `addWritePerm` (true): the name servers stop (or
/// resume) routing writes to a broker's queues, the first step of taking it out of service.
pub fn write_perm(context: &Context, args: WritePermArgs, grant: bool) -> Result<Report> {
    let mut table = Table::new(&["#NameServer", "#TopicCount"]);
    let (verb, key) = if grant {
        ("add", "addTopicCount")
    } else {
        ("wipe", "wipeTopicCount")
    };
    let mut report = Report::new();
    for addr in context.name_servers() {
        let command = if grant {
            let header = AddWritePermOfBrokerRequestHeader {
                broker_name: args.broker_name.clone(),
            };
            request(RequestCode::ADD_WRITE_PERM_OF_BROKER, &header)
        } else {
            let header = WipeWritePermOfBrokerRequestHeader {
                broker_name: args.broker_name.clone(),
            };
            request(RequestCode::WIPE_WRITE_PERM_OF_BROKER, &header)
        };
        let response = context.invoke(&addr, command, &[ResponseCode::SUCCESS])?;
        let count = if grant {
            response
                .decode_header::<AddWritePermOfBrokerResponseHeader>()
                .map_err(comet_client::ClientError::from)?
                .add_topic_count
        } else {
            response
                .decode_header::<WipeWritePermOfBrokerResponseHeader>()
                .map_err(comet_client::ClientError::from)?
                .wipe_topic_count
        };
        report.line(format!(
            "{verb} write perm of broker[{}] in name server[{addr}] OK, {count}",
            args.broker_name
        ));
        table.row(vec![json!(addr), json!(count)]);
    }
    report.json("brokerName", args.broker_name);
    report.json(key, table.to_json());
    Ok(report)
}

/// `updateKvConfig`: PUT_KV_CONFIG on every name server.
pub fn update_kv_config(context: &Context, args: UpdateKvConfigArgs) -> Result<Report> {
    let mut report = Report::new();
    let mut updated = Vec::new();
    for addr in context.name_servers() {
        let header = PutKVConfigRequestHeader {
            namespace: args.namespace.clone(),
            key: args.key.clone(),
            value: args.value.clone(),
        };
        let command = request(RequestCode::PUT_KV_CONFIG, &header);
        context.invoke(&addr, command, &[ResponseCode::SUCCESS])?;
        report.line(format!("update kv config in name server[{addr}] success"));
        updated.push(addr);
    }
    report.json("nameServers", updated);
    report.json("namespace", args.namespace);
    report.json("key", args.key);
    report.json("value", args.value);
    Ok(report)
}

/// `getNamesrvConfig`: every name server's configuration, `key = value` under a
/// `====addr====` line as mqadmin prints it.
pub fn get_namesrv_config(context: &Context) -> Result<Report> {
    let mut report = Report::new();
    for addr in context.name_servers() {
        let part = super::cluster::config_of(context, &addr, RequestCode::GET_NAMESRV_CONFIG)?;
        report.push("nameServers", part);
    }
    Ok(report)
}
