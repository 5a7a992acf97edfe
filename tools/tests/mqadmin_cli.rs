//! comet-admin under mqadmin's command names and flags, against a real standalone broker:
//! every command added for operators (groups, broker config, write permission, producers,
//! message lookup by offset and unique key, send and consume, name server KV and config)
//! does what mqadmin's does, `--json` gives the same figures as JSON, and a request the
//! server does not serve is said to be unsupported.

use std::io::{BufRead, BufReader};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use comet_client::remoting::TransportConfig;
use comet_client::{ClientConfig, Message, Producer, ProducerConfig, RemotingClient};
use comet_proto::headers::{GetKVConfigRequestHeader, GetSubscriptionGroupConfigRequestHeader};
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use comet_test_support::{wait_for, wait_until, Broker, ChildGuard, TempDir};
use serde_json::Value;

const TOPIC: &str = "MqadminTopic";

fn admin(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_comet-admin"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "comet-admin failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs a command as mqadmin spells it: the command first, then its flags and `-n`.
fn run(namesrv: &str, args: &[&str]) -> String {
    let mut all = args.to_vec();
    all.extend(["-n", namesrv]);
    stdout_of(&admin(&all))
}

/// The same with `--json`, parsed.
fn json(namesrv: &str, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["-n", namesrv, "--json"]);
    let text = stdout_of(&admin(&all));
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{args:?}: {e}: {text}"))
}

/// A request sent straight to a server, to check what a command changed.
fn ask(addr: &str, request: RemotingCommand) -> RemotingCommand {
    let client = RemotingClient::new(TransportConfig::default());
    let response = client.invoke(addr, request, Duration::from_secs(5));
    client.shutdown();
    response.unwrap()
}

fn group_config(broker: &str, group: &str) -> Option<Value> {
    let header = GetSubscriptionGroupConfigRequestHeader {
        group: group.to_owned(),
    };
    let request =
        RemotingCommand::request(RequestCode::GET_SUBSCRIPTIONGROUP_CONFIG, 0).with_header(&header);
    let response = ask(broker, request);
    (response.response_code() == ResponseCode::SUCCESS)
        .then(|| serde_json::from_slice(&response.body).unwrap())
}

fn route_perm(namesrv: &str) -> i64 {
    let route = json(namesrv, &["topicRoute", "-t", TOPIC]);
    route["queueDatas"][0]["perm"].as_i64().unwrap()
}

// Proves the mqadmin names and flags are taken as they are, that each new command reads or
// changes what mqadmin's does on a real broker, and that every read command's --json output
// holds the figures its text shows.
#[test]
fn mqadmin_commands_against_a_standalone_broker() {
    let store = TempDir::new("mqadmin-cli");
    let broker = Broker::start(store.path(), 2, &[]);
    let namesrv = broker.namesrv();
    let addr = format!("127.0.0.1:{}", broker.broker_addr.port());
    wait_until("the broker's registration", Duration::from_secs(15), || {
        stdout_of(&admin(&["clusterList", "-n", &namesrv])).contains(&addr)
    });
    let clusters = json(&namesrv, &["clusterList", "-c", "DefaultCluster"]);
    assert_eq!(clusters["brokers"][0]["addr"], addr.as_str(), "{clusters}");
    assert_eq!(
        clusters["brokers"][0]["brokerName"], "broker-a",
        "{clusters}"
    );

    // updateTopic with mqadmin's flags: -r/-w queue counts, -o taking a value.
    let created = run(
        &namesrv,
        &[
            "updateTopic",
            "-c",
            "DefaultCluster",
            "-t",
            TOPIC,
            "-r",
            "2",
            "-w",
            "2",
            "-o",
            "false",
        ],
    );
    assert!(created.contains(TOPIC), "{created}");
    wait_until("the topic's route", Duration::from_secs(15), || {
        json(&namesrv, &["topicList"])["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|topic| topic == TOPIC)
    });
    let route = run(&namesrv, &["topicRoute", "--topic", TOPIC, "-l"]);
    assert!(route.contains("broker-a 2 2 6"), "{route}");
    // updateTopic -a: 5.x attributes reach the broker's topic config.
    let typed = [
        "updateTopic",
        "-c",
        "DefaultCluster",
        "-t",
        TOPIC,
        "-r",
        "2",
        "-w",
        "2",
        "-a",
        "+message.type=FIFO",
    ];
    run(&namesrv, &typed);
    let mut config = RemotingCommand::request(RequestCode::GET_TOPIC_CONFIG, 0);
    config.ext_fields.insert("topic", TOPIC);
    let config: Value = serde_json::from_slice(&ask(&addr, config).body).unwrap();
    assert_eq!(config["attributes"]["message.type"], "FIFO", "{config}");

    // sendMessage: to the topic, then three to queue 0 of broker-a.
    let sent = run(
        &namesrv,
        &[
            "sendMessage",
            "-t",
            TOPIC,
            "-p",
            "first body",
            "-k",
            "mq-key-0",
            "-c",
            "TagA",
        ],
    );
    assert!(
        sent.starts_with("#BrokerName #QueueId #SendResult #MsgId #OffsetMsgId\n"),
        "{sent}"
    );
    assert!(sent.contains(" SEND_OK "), "{sent}");
    let mut ids = Vec::new();
    for number in 1..=3 {
        let body = format!("body {number}");
        let key = format!("mq-key-{number}");
        let args = [
            "sendMessage",
            "-t",
            TOPIC,
            "-p",
            &body,
            "-k",
            &key,
            "-b",
            "broker-a",
            "-i",
            "0",
        ];
        let sent = json(&namesrv, &args);
        let row = &sent["sent"][0];
        assert_eq!(row["brokerName"], "broker-a", "{sent}");
        assert_eq!(row["queueId"], 0, "{sent}");
        assert_eq!(row["sendResult"], "SEND_OK", "{sent}");
        ids.push((
            row["msgId"].as_str().unwrap().to_owned(),
            row["offsetMsgId"].as_str().unwrap().to_owned(),
            sent["queueOffset"].as_i64().unwrap(),
        ));
    }
    let offsets: Vec<i64> = ids.iter().map(|(_, _, offset)| *offset).collect();
    let first = offsets[0];
    assert_eq!(offsets, [first, first + 1, first + 2]);

    // Lookups: by unique key, by offset message id, by queue offset, by key.
    let (uniq, offset_id, _) = &ids[1];
    let found = run(&namesrv, &["queryMsgByUniqueKey", "-i", uniq, "-t", TOPIC]);
    assert!(found.contains(&format!("msgId={uniq} ")), "{found}");
    assert!(found.contains("body=\"body 2\""), "{found}");
    let found = json(&namesrv, &["queryMsgById", "-i", offset_id]);
    assert_eq!(found["messages"][0]["msgId"], uniq.as_str(), "{found}");
    assert_eq!(found["messages"][0]["keys"][0], "mq-key-2", "{found}");
    let by_uniq_key = json(&namesrv, &["queryMsgById", "-i", uniq, "-t", TOPIC]);
    assert_eq!(
        by_uniq_key["messages"][0]["offsetMsgId"],
        offset_id.as_str()
    );
    let at = (first + 2).to_string();
    let found = json(
        &namesrv,
        &[
            "queryMsgByOffset",
            "-t",
            TOPIC,
            "-b",
            "broker-a",
            "-i",
            "0",
            "-o",
            &at,
        ],
    );
    assert_eq!(found["messages"][0]["body"], "body 3", "{found}");
    assert_eq!(found["messages"][0]["queueOffset"], first + 2, "{found}");
    let beyond = (first + 3).to_string();
    let missing = admin(&[
        "queryMsgByOffset",
        "-n",
        &namesrv,
        "-t",
        TOPIC,
        "-b",
        "broker-a",
        "-i",
        "0",
        "-o",
        &beyond,
    ]);
    assert!(!missing.status.success());
    assert!(String::from_utf8_lossy(&missing.stderr).contains("no message at offset"));
    let found = run(
        &namesrv,
        &["queryMsgByKey", "-t", TOPIC, "-k", "mq-key-3", "-m", "8"],
    );
    assert!(found.ends_with("1 message(s)\n"), "{found}");

    // consumeMessage: by queue from an offset, with a count; then the whole topic.
    let from = (first + 1).to_string();
    let consumed = json(
        &namesrv,
        &[
            "consumeMessage",
            "-t",
            TOPIC,
            "-b",
            "broker-a",
            "-i",
            "0",
            "-o",
            &from,
            "-c",
            "5",
        ],
    );
    let bodies: Vec<&str> = consumed["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["body"].as_str().unwrap())
        .collect();
    assert_eq!(bodies, ["body 2", "body 3"], "{consumed}");
    let all = run(&namesrv, &["consumeMessage", "-t", TOPIC]);
    assert!(all.ends_with("4 message(s)\n"), "{all}");
    let two = run(&namesrv, &["consumeMessage", "-t", TOPIC, "-c", "2"]);
    assert!(two.ends_with("2 message(s)\n"), "{two}");

    // resetOffsetByTime on one queue (-b -q -o): the group's offset there moves.
    let to = (first + 2).to_string();
    let reset = run(
        &namesrv,
        &[
            "resetOffsetByTime",
            "-g",
            "mqadmin_reset",
            "-t",
            TOPIC,
            "-s",
            "now",
            "-b",
            &addr,
            "-q",
            "0",
            "-o",
            &to,
        ],
    );
    assert!(reset.ends_with(&format!("to {to}\n")), "{reset}");
    let progress = json(
        &namesrv,
        &["consumerProgress", "-g", "mqadmin_reset", "-t", TOPIC],
    );
    let queue_0 = progress["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|queue| queue["queueId"] == 0)
        .unwrap_or_else(|| panic!("{progress}"));
    assert_eq!(queue_0["consumerOffset"], first + 2, "{progress}");

    // producerConnection: a live producer of a group shows up.
    let client = ClientConfig {
        namesrv_addrs: vec![namesrv.clone()],
        ..ClientConfig::default()
    };
    let producer = Producer::new(ProducerConfig::new("mqadmin_pg", client)).unwrap();
    producer.start().unwrap();
    producer
        .send(Message::new(TOPIC, "from a producer"))
        .unwrap();
    let client_id = producer.client_id().to_owned();
    let connections = wait_for("the producer's connection", Duration::from_secs(30), || {
        let output = admin(&[
            "producerConnection",
            "-n",
            &namesrv,
            "-g",
            "mqadmin_pg",
            "-t",
            TOPIC,
        ]);
        let text = String::from_utf8_lossy(&output.stdout).into_owned();
        text.contains(&client_id).then_some(text)
    });
    assert!(connections.starts_with("#ClientId #ClientAddr #Language #Version\n"));
    let connections = json(
        &namesrv,
        &["producerConnection", "-g", "mqadmin_pg", "-t", TOPIC],
    );
    assert_eq!(
        connections["connections"][0]["clientId"],
        client_id.as_str()
    );
    producer.shutdown();

    // updateSubGroup / deleteSubGroup: the broker's group table changes.
    let updated = run(
        &namesrv,
        &[
            "updateSubGroup",
            "-c",
            "DefaultCluster",
            "-g",
            "mqadmin_cg",
            "-r",
            "5",
            "-q",
            "2",
            "-o",
            "true",
            "-s",
            "false",
        ],
    );
    assert!(updated.contains(&format!("create subscription group to {addr} success.")));
    let config = group_config(&addr, "mqadmin_cg").expect("the group exists");
    assert_eq!(config["retryMaxTimes"], 5, "{config}");
    assert_eq!(config["retryQueueNums"], 2, "{config}");
    assert_eq!(config["consumeMessageOrderly"], true, "{config}");
    assert_eq!(config["consumeEnable"], false, "{config}");
    let deleted = run(
        &namesrv,
        &[
            "deleteSubGroup",
            "-b",
            &addr,
            "-g",
            "mqadmin_cg",
            "-r",
            "true",
        ],
    );
    assert!(
        deleted.contains("delete subscription group [mqadmin_cg]"),
        "{deleted}"
    );
    assert!(group_config(&addr, "mqadmin_cg").is_none());
    let bad = admin(&[
        "updateSubGroup",
        "-n",
        &namesrv,
        "-b",
        &addr,
        "-g",
        "g",
        "-o",
        "maybe",
    ]);
    assert!(!bad.status.success(), "a boolean flag takes true or false");

    // getBrokerConfig / updateBrokerConfig: a live key changes and reads back.
    let config = run(&namesrv, &["getBrokerConfig", "-b", &addr]);
    assert!(
        config.starts_with(&format!("============{addr}============\n")),
        "{config}"
    );
    assert!(config
        .lines()
        .any(|l| l.starts_with("brokerName ") && l.ends_with("=  broker-a")));
    let updated = run(
        &namesrv,
        &[
            "updateBrokerConfig",
            "-c",
            "DefaultCluster",
            "-k",
            "maxMessageSize",
            "-v",
            "2097152",
        ],
    );
    assert!(
        updated.contains(&format!("update broker config success, {addr}")),
        "{updated}"
    );
    let config = json(&namesrv, &["getBrokerConfig", "-c", "DefaultCluster"]);
    assert_eq!(
        config["brokers"][0]["config"]["maxMessageSize"], "2097152",
        "{config}"
    );

    // wipeWritePerm / addWritePerm: the name server's route loses and regains the write bit.
    let wiped = run(&namesrv, &["wipeWritePerm", "-b", "broker-a"]);
    let prefix = format!("wipe write perm of broker[broker-a] in name server[{namesrv}] OK, ");
    let count: i64 = wiped
        .trim()
        .strip_prefix(&prefix)
        .unwrap_or_else(|| panic!("{wiped}"))
        .parse()
        .unwrap();
    assert!(count >= 1, "{wiped}");
    assert_eq!(route_perm(&namesrv), 4, "read-only once wiped");
    let added = json(&namesrv, &["addWritePerm", "-b", "broker-a"]);
    assert!(
        added["addTopicCount"][0]["topicCount"].as_i64().unwrap() >= 1,
        "{added}"
    );
    assert_eq!(route_perm(&namesrv), 6, "read-write again");

    // updateKvConfig / getNamesrvConfig.
    let kv = run(
        &namesrv,
        &[
            "updateKvConfig",
            "-s",
            "MQADMIN_NS",
            "-k",
            "some.key",
            "-v",
            "v1",
        ],
    );
    assert!(kv.contains("success"), "{kv}");
    let header = GetKVConfigRequestHeader {
        namespace: "MQADMIN_NS".into(),
        key: "some.key".into(),
    };
    let answer = ask(
        &namesrv,
        RemotingCommand::request(RequestCode::GET_KV_CONFIG, 0).with_header(&header),
    );
    assert_eq!(answer.ext_fields.get("value"), Some("v1"));
    let config = run(&namesrv, &["getNamesrvConfig"]);
    assert!(
        config.starts_with(&format!("============{namesrv}============\n")),
        "{config}"
    );
    let config = json(&namesrv, &["getNamesrvConfig"]);
    assert!(!config["nameServers"][0]["config"]
        .as_object()
        .unwrap()
        .is_empty());

    // haStatus and brokerStatus over a cluster; mqadmin's long flag names.
    let ha = run(&namesrv, &["haStatus", "-c", "DefaultCluster"]);
    assert!(ha.starts_with(&format!("#Broker {addr}\n")), "{ha}");
    let ha = json(&namesrv, &["haStatus", "--brokerAddr", &addr]);
    assert_eq!(ha["brokers"][0]["master"], true, "{ha}");
    assert_eq!(
        ha["brokers"][0]["logs"].as_array().unwrap().len(),
        2,
        "{ha}"
    );
    let status = json(
        &namesrv,
        &["brokerStatus", "--clusterName", "DefaultCluster"],
    );
    assert!(
        status["brokers"][0]["runtime"]["brokerVersionDesc"].is_string(),
        "{status}"
    );
    let topic_status = json(&namesrv, &["topicStatus", "-t", TOPIC]);
    let queues = topic_status["queues"].as_array().unwrap();
    assert_eq!(queues.len(), 2, "{topic_status}");
    let stored: i64 = queues
        .iter()
        .map(|q| q["maxOffset"].as_i64().unwrap())
        .sum();
    assert_eq!(stored, 5, "{topic_status}");
    let stats = json(&namesrv, &["statsAll", "--topic", TOPIC]);
    assert_eq!(stats["stats"][0]["inMsg24Hour"], 5, "{stats}");
    let cq = json(
        &namesrv,
        &["queryCq", "-t", TOPIC, "-q", "0", "-b", &addr, "-c", "8"],
    );
    assert_eq!(
        cq["entries"].as_array().unwrap().len() as i64,
        cq["maxQueueIndex"].as_i64().unwrap()
    );
    let consume_stats = json(
        &namesrv,
        &[
            "brokerConsumeStats",
            "-b",
            &addr,
            "-o",
            "false",
            "-t",
            "5000",
        ],
    );
    assert!(consume_stats["diffTotal"].is_i64(), "{consume_stats}");

    // haStatus -i: the figures again every interval until stopped.
    let mut watch = ChildGuard::spawn(
        "comet-admin haStatus -i 1",
        Command::new(env!("CARGO_BIN_EXE_comet-admin"))
            .args(["haStatus", "-n", &namesrv, "-b", &addr, "-i", "1"])
            .stdout(Stdio::piped()),
    );
    let stdout = watch.child().stdout.take().unwrap();
    let (lines, received) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let mut headers = 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while headers < 3 {
        let left = deadline.saturating_duration_since(Instant::now());
        let line = received
            .recv_timeout(left)
            .unwrap_or_else(|_| panic!("{headers} rounds of haStatus -i 1 in 20 s"));
        headers += usize::from(line.starts_with("#Log "));
    }
    watch.kill();

    // deleteTopic: gone from the brokers and the name server.
    run(
        &namesrv,
        &[
            "updateTopic",
            "-c",
            "DefaultCluster",
            "-t",
            "MqadminDoomed",
            "-r",
            "1",
            "-w",
            "1",
        ],
    );
    wait_until("the doomed topic's route", Duration::from_secs(15), || {
        admin(&["topicRoute", "-n", &namesrv, "-t", "MqadminDoomed"])
            .status
            .success()
    });
    let deleted = run(
        &namesrv,
        &["deleteTopic", "-t", "MqadminDoomed", "-c", "DefaultCluster"],
    );
    assert!(deleted.contains("MqadminDoomed deleted"), "{deleted}");
    let topics = json(&namesrv, &["topicList"]);
    assert!(!topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t == "MqadminDoomed"));
    assert!(
        !admin(&["topicRoute", "-n", &namesrv, "-t", "MqadminDoomed"])
            .status
            .success()
    );

    // A request the server does not serve: a name server asked for a broker's config.
    let refused = admin(&["getBrokerConfig", "-n", &namesrv, "-b", &namesrv]);
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("does not support"), "{stderr}");
    assert!(stderr.contains("REQUEST_CODE_NOT_SUPPORTED"), "{stderr}");
}
