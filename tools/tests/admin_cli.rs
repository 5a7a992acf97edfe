//! comet-admin against a real standalone broker under its kebab-case names (kept as aliases of
//! mqadmin's): every subcommand that reads or changes a topic, a broker or a group runs and
//! prints what the broker holds.

use std::process::{Command, Output};
use std::time::Duration;

use comet_client::{
    ClientConfig, ConsumeConcurrentlyStatus, ConsumerConfig, Message, MessageListener, Producer,
    ProducerConfig, PushConsumer, PushConsumerConfig,
};
use comet_test_support::{wait_for, wait_until, Broker, TempDir};

fn admin(namesrv: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_comet-admin"))
        .args(["-n", namesrv])
        .args(args)
        .output()
        .unwrap()
}

fn client_config(namesrv: &str) -> ClientConfig {
    ClientConfig {
        namesrv_addrs: vec![namesrv.to_owned()],
        ..ClientConfig::default()
    }
}

fn stdout_of(output: &Output) -> String {
    assert!(
        output.status.success(),
        "comet-admin failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

// Proves the CLI creates a topic, lists it, shows its route, status, the cluster, the
// topic's traffic after sends, a consumer's own status, consume-queue entries, an offset
// clone, the broker's consume stats, runtime and replication figures, and reports a clear
// error for a topic that does not exist.
#[test]
fn admin_commands_against_a_standalone_broker() {
    // The broker (workspace build, started by comet-test-support) drops before its store.
    let store = TempDir::new("admin-cli");
    let broker = Broker::start(store.path(), 2, &[]);
    let namesrv = broker.namesrv();
    let broker_port = broker.broker_addr.port();
    wait_until("the broker's registration", Duration::from_secs(15), || {
        stdout_of(&admin(&namesrv, &["cluster-list"])).contains(&format!(":{broker_port}"))
    });
    let created = stdout_of(&admin(
        &namesrv,
        &["update-topic", "-t", "AdminCliTopic", "-q", "3"],
    ));
    assert!(created.contains("AdminCliTopic"), "{created}");
    wait_until(
        "the topic at the name server",
        Duration::from_secs(15),
        || {
            stdout_of(&admin(&namesrv, &["topic-list"]))
                .lines()
                .any(|line| line == "AdminCliTopic")
        },
    );
    let route = stdout_of(&admin(&namesrv, &["topic-route", "-t", "AdminCliTopic"]));
    assert!(route.contains("broker-a 3 3 6"), "{route}");
    let status = stdout_of(&admin(&namesrv, &["topic-status", "-t", "AdminCliTopic"]));
    assert_eq!(
        status
            .lines()
            .filter(|line| line.starts_with("broker-a "))
            .count(),
        3,
        "{status}"
    );
    let producer = ProducerConfig::new("admin_cli_pg", client_config(&namesrv));
    let producer = Producer::new(producer).unwrap();
    producer.start().unwrap();
    for number in 0..7 {
        let message = Message::new("AdminCliTopic", format!("stats-{number}"));
        producer.send(message).unwrap();
    }
    producer.shutdown();
    let stats = stdout_of(&admin(&namesrv, &["stats-all", "-t", "AdminCliTopic"]));
    let row: Vec<&str> = stats
        .lines()
        .find(|line| line.starts_with("AdminCliTopic "))
        .unwrap_or_else(|| panic!("no stats row: {stats}"))
        .split(' ')
        .collect();
    assert_eq!(row[1], "-", "{stats}");
    assert!(row[3].parse::<f64>().unwrap() > 0.0, "{stats}");
    assert_eq!(row[5], "7", "{stats}");
    assert_eq!(row[6], "NO_CONSUMER", "{stats}");
    let consumer_config = ConsumerConfig::new("admin_cli_cg", client_config(&namesrv));
    let listener = MessageListener::concurrently(|_, _| ConsumeConcurrentlyStatus::ConsumeSuccess);
    let consumer = PushConsumer::new(PushConsumerConfig::new(consumer_config), listener).unwrap();
    consumer.subscribe("AdminCliTopic", "*").unwrap();
    consumer.start().unwrap();
    let status = wait_for("the consumer's status", Duration::from_secs(30), || {
        let output = admin(&namesrv, &["consumer-status", "-g", "admin_cli_cg"]);
        let status = String::from_utf8_lossy(&output.stdout).into_owned();
        status
            .contains("subscription AdminCliTopic *")
            .then_some(status)
    });
    assert!(status.starts_with("#ClientId "), "{status}");
    assert!(
        status.contains("property PROP_CONSUME_TYPE CONSUME_PASSIVELY"),
        "{status}"
    );
    // Without -t, as mqadmin: the group's members and progress over every topic it consumes,
    // found through its retry topic.
    let connection = stdout_of(&admin(
        &namesrv,
        &["consumerConnection", "-g", "admin_cli_cg"],
    ));
    assert!(connection.contains("\nAdminCliTopic *\n"), "{connection}");
    assert!(
        connection.contains("consumeType CONSUME_PASSIVELY"),
        "{connection}"
    );
    // A group's topics are those it committed offsets on: wait for the first commit.
    wait_until(
        "the group's committed offsets",
        Duration::from_secs(30),
        || {
            let args = ["consumerProgress", "-g", "admin_cli_cg"];
            stdout_of(&admin(&namesrv, &args)).contains("\nAdminCliTopic broker-a ")
        },
    );
    // The same figures with --json.
    let json_of = |args: &[&str]| -> serde_json::Value {
        let mut all = args.to_vec();
        all.push("--json");
        serde_json::from_str(&stdout_of(&admin(&namesrv, &all))).unwrap()
    };
    let status = json_of(&["consumerStatus", "-g", "admin_cli_cg"]);
    let client = &status["clients"][0];
    assert!(client["clientId"].is_string(), "{status}");
    let subscriptions = client["subscriptions"].as_array().unwrap();
    assert!(
        subscriptions.iter().any(|s| s["topic"] == "AdminCliTopic"),
        "{status}"
    );
    assert_eq!(
        client["properties"]["PROP_CONSUME_TYPE"],
        "CONSUME_PASSIVELY"
    );
    let connection = json_of(&["consumerConnection", "-g", "admin_cli_cg"]);
    assert_eq!(
        connection["connections"][0]["clientId"], client["clientId"],
        "{connection}"
    );
    assert_eq!(
        connection["consumeType"], "CONSUME_PASSIVELY",
        "{connection}"
    );
    consumer.shutdown();
    let mut entries = 0;
    for queue in ["0", "1", "2"] {
        let args = ["query-cq", "-t", "AdminCliTopic", "-q", queue, "-c", "32"];
        let listing = stdout_of(&admin(&namesrv, &args));
        assert!(
            listing.starts_with("minQueueIndex 0 maxQueueIndex "),
            "{listing}"
        );
        entries += listing.lines().skip(2).count();
    }
    assert_eq!(entries, 7, "one entry per message sent");
    // The source group's offsets moved to the end; the clone's copy shows no lag.
    let reset = [
        "reset-offset-by-time",
        "-g",
        "admin_cli_cg",
        "-t",
        "AdminCliTopic",
        "-s",
        "-1",
    ];
    stdout_of(&admin(&namesrv, &reset));
    let progress = [
        "consumer-progress",
        "-g",
        "admin_cli_clone",
        "-t",
        "AdminCliTopic",
    ];
    assert!(stdout_of(&admin(&namesrv, &progress)).contains("Diff Total: 7"));
    let clone = [
        "clone-group-offset",
        "-s",
        "admin_cli_cg",
        "-d",
        "admin_cli_clone",
        "-t",
        "AdminCliTopic",
        "--offline",
    ];
    stdout_of(&admin(&namesrv, &clone));
    let cloned = stdout_of(&admin(&namesrv, &progress));
    assert!(cloned.contains("Diff Total: 0"), "{cloned}");
    let broker = format!("127.0.0.1:{broker_port}");
    let consume_stats = stdout_of(&admin(&namesrv, &["broker-consume-stats", "-b", &broker]));
    assert!(
        consume_stats.contains("AdminCliTopic admin_cli_cg "),
        "{consume_stats}"
    );
    assert!(consume_stats.contains("Diff Total: "), "{consume_stats}");
    let runtime = stdout_of(&admin(&namesrv, &["broker-status", "-b", &broker]));
    assert!(runtime.contains("brokerVersionDesc"), "{runtime}");
    // A master without a slave: one line per log, no slave on it.
    let ha = stdout_of(&admin(&namesrv, &["ha-status", "-b", &broker]));
    let rows: Vec<&str> = ha.lines().skip(1).collect();
    assert_eq!(rows.len(), 2, "one row per log: {ha}");
    for (log, row) in rows.iter().enumerate() {
        assert!(row.starts_with(&format!("{log} ")), "{ha}");
        assert!(row.ends_with("- - - - - - - -"), "{ha}");
    }
    // setConsumeMode on every master of the cluster: the broker writes the mode down;
    // a retry topic is refused, a mode other than PULL or POP never leaves the CLI.
    let set_mode = |topic: &str, mode: &str| {
        let args = [
            "set-consume-mode",
            "-c",
            "DefaultCluster",
            "-t",
            topic,
            "-g",
            "admin_cli_cg",
            "-m",
            mode,
            "-q",
            "-1",
        ];
        admin(&namesrv, &args)
    };
    let set = stdout_of(&set_mode("AdminCliTopic", "POP"));
    assert!(
        set.contains(&format!("set consume mode to {broker} success.")),
        "{set}"
    );
    let modes = std::fs::read_to_string(store.path().join("config/messageRequestMode.json"));
    assert!(
        modes
            .as_deref()
            .unwrap_or("")
            .contains(r#""mode":"POP","popShareQueueNum":-1"#),
        "{modes:?}"
    );
    assert!(!set_mode("%RETRY%admin_cli_cg", "POP").status.success());
    assert!(!set_mode("AdminCliTopic", "PUSH").status.success());
    let missing = admin(&namesrv, &["topic-route", "-t", "NoSuchTopic"]);
    assert!(!missing.status.success());
    assert!(!String::from_utf8_lossy(&missing.stderr).is_empty());
}
