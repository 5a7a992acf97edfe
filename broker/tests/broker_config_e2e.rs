//! End-to-end tests of run-time broker configuration (UPDATE_BROKER_CONFIG /
//! GET_BROKER_CONFIG) and of the traffic figures in GET_BROKER_RUNTIME_INFO, against a real
//! `comet-broker --standalone` process.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use comet_broker::config::KEYS;

use comet_proto::body::{JsonBody, KVTable};
use comet_proto::{java_properties, RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::config_docs::help_config_output;
use common::{pull_request, send_request, Broker, Client, TempDir};

fn update_config(client: &mut Client, text: &str) -> RemotingCommand {
    client.call(
        RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG, 0)
            .with_body(text.as_bytes().to_vec()),
    )
}

fn broker_config(client: &mut Client) -> BTreeMap<String, String> {
    let response = client.call(RemotingCommand::request(RequestCode::GET_BROKER_CONFIG, 0));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    java_properties::parse(std::str::from_utf8(&response.body).unwrap())
        .into_iter()
        .collect()
}

fn send_code(client: &mut Client, body_bytes: usize) -> ResponseCode {
    let body = vec![b'x'; body_bytes];
    client
        .call(send_request("ConfigTopic", 0, &body, None, None))
        .response_code()
}

// Proves an update applies at once, is refused whole when one value is bad or a key is
// black-listed, and survives a restart; a read-only broker permission stops sends.
#[test]
fn updates_apply_persist_and_survive_restart() {
    let directory = TempDir::new("e2e-config");
    let mut broker = Broker::start(&directory.0, 1, &[]);
    let mut client = broker.client();
    assert_eq!(send_code(&mut client, 1024), ResponseCode::SUCCESS);

    let response = update_config(&mut client, "maxMessageSize=512\n");
    assert_eq!(
        response.response_code(),
        ResponseCode::SUCCESS,
        "{:?}",
        response.remark
    );
    assert_eq!(send_code(&mut client, 1024), ResponseCode::MESSAGE_ILLEGAL);
    assert_eq!(send_code(&mut client, 256), ResponseCode::SUCCESS);
    assert_eq!(broker_config(&mut client)["maxMessageSize"], "512");

    let response = update_config(&mut client, "maxMessageSize=2048\nlistenPort=nope\n");
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(response.remark.unwrap_or_default().contains("listenPort"));
    assert_eq!(broker_config(&mut client)["maxMessageSize"], "512");

    let response = update_config(&mut client, "brokerConfigPath=/elsewhere\n");
    assert_eq!(response.response_code(), ResponseCode::NO_PERMISSION);

    let response = update_config(&mut client, "brokerPermission=4\n");
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(send_code(&mut client, 256), ResponseCode::NO_PERMISSION);

    drop(client);
    assert!(broker.stop().success());
    broker.restart(1);
    let mut client = broker.client();
    let config = broker_config(&mut client);
    assert_eq!(config["maxMessageSize"], "512");
    assert_eq!(config["brokerPermission"], "4");
    assert_eq!(send_code(&mut client, 256), ResponseCode::NO_PERMISSION);
    let response = update_config(&mut client, "brokerPermission=6\n");
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    assert_eq!(send_code(&mut client, 256), ResponseCode::SUCCESS);
}

fn runtime_info(client: &mut Client) -> BTreeMap<String, String> {
    let response = client.call(RemotingCommand::request(
        RequestCode::GET_BROKER_RUNTIME_INFO,
        0,
    ));
    assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    KVTable::decode(&response.body).unwrap().table
}

fn first_rate(figures: &BTreeMap<String, String>, key: &str) -> f64 {
    figures[key]
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|e| panic!("{key}={:?}: {e}", figures[key]))
}

// Proves the runtime info counts what was stored and delivered, broker-wide across shards,
// and reports non-zero rates while traffic flows.
#[test]
fn runtime_info_reports_traffic() {
    let directory = TempDir::new("e2e-traffic");
    let broker = Broker::start(&directory.0, 2, &[]);
    let mut client = broker.client();
    let before = runtime_info(&mut client);
    assert_eq!(first_rate(&before, "putTps"), 0.0);
    let sent = 200;
    for number in 0..sent {
        let body = format!("traffic-{number}");
        let response = client.call(send_request(
            "TrafficTopic",
            number % 4,
            body.as_bytes(),
            None,
            None,
        ));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
    }
    let mut delivered = 0;
    for queue_id in 0..4 {
        let response = client.call(pull_request(
            "traffic_group",
            "TrafficTopic",
            queue_id,
            0,
            64,
            0,
        ));
        assert_eq!(response.response_code(), ResponseCode::SUCCESS);
        delivered += comet_proto::message::decode_records(response.body.clone()).len();
    }
    assert_eq!(delivered, sent as usize);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let figures = runtime_info(&mut client);
        let put: u64 = figures["msgPutTotalTodayNow"].parse().unwrap();
        let got: u64 = figures["msgGetTotalTodayNow"].parse().unwrap();
        if put >= sent as u64 && got >= sent as u64 && first_rate(&figures, "putTps") > 0.0 {
            assert!(first_rate(&figures, "getTransferredTps") > 0.0);
            assert!(first_rate(&figures, "getTransferedTps") > 0.0);
            let in_place: u64 = figures["requestsHandledInPlace"].parse().unwrap();
            let forwarded: u64 = figures["requestsForwardedToOwnerShard"].parse().unwrap();
            assert!(in_place + forwarded >= (sent + 4) as u64);
            break;
        }
        assert!(
            Instant::now() < deadline,
            "figures never caught up: {figures:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

// Proves malformed updates get clear errors and change nothing: a body that is not UTF-8, a
// body over the size limit, and an empty body (a no-op, as in Apache).
#[test]
fn malformed_updates_are_refused() {
    let directory = TempDir::new("e2e-config-bad");
    let broker = Broker::start(&directory.0, 1, &[]);
    let mut client = broker.client();
    let before = broker_config(&mut client);
    let not_utf8 = client.call(
        RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG, 0)
            .with_body(vec![b'm', 0xff, 0xfe, b'=', b'1']),
    );
    assert_eq!(not_utf8.response_code(), ResponseCode::SYSTEM_ERROR);
    let oversized = format!("maxMessageSize=1024\n#{}\n", "x".repeat(70 * 1024));
    let response = update_config(&mut client, &oversized);
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    assert!(response.remark.unwrap_or_default().contains("exceeds"));
    assert_eq!(
        update_config(&mut client, "").response_code(),
        ResponseCode::SUCCESS
    );
    assert_eq!(broker_config(&mut client), before);
}

// Proves GET_BROKER_CONFIG reports exactly the keys of the broker's key table, with the values
// given on the command line (serverChannelMaxIdleTimeSeconds was once accepted but never
// reported).
#[test]
fn get_config_reports_every_key_of_the_table() {
    let directory = TempDir::new("e2e-config-keys");
    let options = [
        "-o",
        "serverChannelMaxIdleTimeSeconds=45",
        "-o",
        "regionId=EU",
    ];
    let broker = Broker::start(&directory.0, 1, &options);
    let mut client = broker.client();
    let config = broker_config(&mut client);
    let reported: BTreeSet<&str> = config.keys().map(String::as_str).collect();
    let table: BTreeSet<&str> = KEYS.iter().map(|def| def.key).collect();
    assert_eq!(reported, table);
    assert_eq!(config["serverChannelMaxIdleTimeSeconds"], "45");
    assert_eq!(config["regionId"], "EU");
    assert_eq!(config["bindAddress"], "127.0.0.1");
}

// Proves `comet-broker --help-config` prints every key of the table with its default and
// exits 0 without starting a broker.
#[test]
fn help_config_prints_the_table() {
    let binary = env!("CARGO_BIN_EXE_comet-broker");
    let text = help_config_output(binary, KEYS.iter().map(|def| def.key));
    assert!(text.contains("listenPort = 10911 (restart)"), "{text}");
}
