//! End-to-end test of the web console (`consoleListenPort`, docs/operations.md#web-console)
//! served by a real `comet-broker --standalone` process's embedded name server: after known
//! messages and offsets, the JSON API answers the exact offsets, counts and lag, finds
//! messages by id, key and queue offset, and its reset moves the group's offsets; bad HTTP
//! gets clear refusals.

mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use comet_proto::body::{JsonBody, RegisterBrokerBody, TopicConfig};
use comet_proto::headers::{RegisterBrokerRequestHeader, SendMessageResponseHeader};
use comet_proto::{CommandHeader, RemotingCommand, RequestCode};
use comet_test_support::{free_port, wait_for, wait_for_port, LOOPBACK};
use common::pop::create_group;
use common::{commit_offset, create_topic, send_request, Broker, Client, TempDir};
use serde_json::Value;

const TOPIC: &str = "ConsoleTopic";
const GROUP: &str = "ConsoleGroup";

/// How long the route of a new topic may take to reach the name server.
const ROUTE_WAIT: Duration = Duration::from_secs(40);

/// Sends raw bytes and reads the whole answer (the console closes after one): status line
/// and head, and body.
fn exchange(addr: SocketAddr, request: &[u8]) -> (String, String) {
    let mut stream = TcpStream::connect(addr).expect("connect to the console");
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .expect("read timeout");
    // The peer may close before taking all of a refused request: a failed write is fine.
    let _ = stream.write_all(request);
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).expect("read the answer");
    let answer = String::from_utf8(answer).expect("a UTF-8 answer");
    let (head, body) = answer.split_once("\r\n\r\n").expect("a head and a body");
    assert!(
        head.contains(&format!("Content-Length: {}", body.len())),
        "{head}"
    );
    (head.to_owned(), body.to_owned())
}

/// The status code of an answer's head.
fn status(head: &str) -> u16 {
    head.split(' ').nth(1).unwrap().parse().unwrap()
}

/// GET `path`: its status and JSON body.
fn get(addr: SocketAddr, path: &str) -> (u16, Value) {
    let request = format!("GET {path} HTTP/1.1\r\nHost: console\r\n\r\n");
    let (head, body) = exchange(addr, request.as_bytes());
    assert!(head.contains("Content-Type: application/json"), "{head}");
    (
        status(&head),
        serde_json::from_str(&body).expect("a JSON body"),
    )
}

/// GET `path`, which must answer 200.
fn get_ok(addr: SocketAddr, path: &str) -> Value {
    let (code, body) = get(addr, path);
    assert_eq!(code, 200, "{path}: {body}");
    body
}

/// POST a form to `path`.
fn post(addr: SocketAddr, path: &str, form: &str) -> (u16, Value) {
    let request = format!(
        "POST {path} HTTP/1.1\r\nHost: console\r\nContent-Type: \
         application/x-www-form-urlencoded\r\nX-Comet-Console: 1\r\n\
         Content-Length: {}\r\n\r\n{form}",
        form.len()
    );
    let (head, body) = exchange(addr, request.as_bytes());
    (
        status(&head),
        serde_json::from_str(&body).expect("a JSON body"),
    )
}

/// Sends one message and returns its offset message id.
fn send(client: &mut Client, queue_id: i32, body: &str, key: &str) -> String {
    let request = send_request(TOPIC, queue_id, body.as_bytes(), Some("TagA"), Some(key));
    let response = client.call_ok(request);
    SendMessageResponseHeader::from_ext_fields(&response.ext_fields)
        .unwrap()
        .msg_id
}

/// The group's (queue id, broker offset, consumer offset, lag) on TOPIC, and its total lag.
fn lag(addr: SocketAddr) -> (Vec<(i64, i64, i64, i64)>, i64) {
    let group = get_ok(addr, &format!("/api/group?group={GROUP}"));
    assert_eq!(group["errors"], serde_json::json!([]), "{group}");
    let mut queues: Vec<(i64, i64, i64, i64)> = group["queues"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|queue| queue["topic"] == TOPIC)
        .map(|queue| {
            let field = |name: &str| queue[name].as_i64().unwrap();
            (
                field("queueId"),
                field("brokerOffset"),
                field("consumerOffset"),
                field("lag"),
            )
        })
        .collect();
    queues.sort();
    (queues, group["totalLag"].as_i64().unwrap())
}

/// The single message of a lookup's answer.
fn only_message(answer: &Value) -> &Value {
    let messages = answer["messages"].as_array().expect("a messages list");
    assert_eq!(messages.len(), 1, "{answer}");
    &messages[0]
}

// Proves the console's JSON API reports what the broker holds, exactly: the cluster's broker
// with its role, a topic's per-queue offsets, a group's per-queue lag; finds a message by
// offset message id, by key and by queue offset with its body and properties; and that the
// reset (the only POST) moves the group's offsets to the end and back to the start.
#[test]
fn console_api_reports_and_resets() {
    let dir = TempDir::new("console-api");
    let console_port = free_port();
    let option = format!("consoleListenPort={console_port}");
    let broker = Broker::start(dir.path(), 2, &["-o", &option]);
    let console = SocketAddr::new(LOOPBACK.into(), console_port);
    wait_for_port(console, Duration::from_secs(10));

    let mut client = broker.client();
    create_topic(&mut client, TOPIC, 2);
    let mut ids = Vec::new();
    for (index, queue_id) in [0, 0, 0, 1, 1].into_iter().enumerate() {
        ids.push(send(
            &mut client,
            queue_id,
            &format!("body-{index}"),
            &format!("key-{index}"),
        ));
    }
    create_group(&mut client, GROUP, 16);
    commit_offset(&mut client, GROUP, TOPIC, 0, 1);
    commit_offset(&mut client, GROUP, TOPIC, 1, 0);

    // The page itself and its script.
    let (head, page) = exchange(console, b"GET / HTTP/1.1\r\nHost: c\r\n\r\n");
    assert_eq!(status(&head), 200, "{head}");
    assert!(head.contains("Content-Type: text/html"), "{head}");
    assert!(page.contains("<title>Comet console</title>"), "{page}");
    let (head, _) = exchange(console, b"GET /console.js HTTP/1.1\r\nHost: c\r\n\r\n");
    assert!(head.contains("Content-Type: text/javascript"), "{head}");

    let cluster = get_ok(console, "/api/cluster");
    let clusters = cluster["clusters"].as_array().unwrap();
    assert_eq!(clusters.len(), 1, "{cluster}");
    let brokers = clusters[0]["brokers"].as_array().unwrap();
    assert_eq!(brokers.len(), 1, "{cluster}");
    let me = &brokers[0];
    assert_eq!(me["role"], "master");
    assert_eq!(me["brokerId"], 0);
    assert_eq!(me["addr"], broker.broker_addr.to_string());
    assert!(me["error"].is_null(), "{me}");
    assert!(
        me["runtime"]["brokerVersionDesc"]
            .as_str()
            .unwrap()
            .starts_with('V'),
        "{me}"
    );
    let broker_name = me["brokerName"].as_str().unwrap().to_owned();

    // The route reaches the name server with the broker's next registration.
    wait_for("the topic's route", ROUTE_WAIT, || {
        let topics = get_ok(console, "/api/topics");
        topics["topics"]
            .as_array()
            .unwrap()
            .iter()
            .any(|topic| topic["topic"] == TOPIC)
            .then_some(())
    });
    let topics = get_ok(console, "/api/topics");
    let row = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|topic| topic["topic"] == TOPIC)
        .unwrap();
    assert_eq!(row["kind"], "normal");
    // The topic brokers register under their cluster's name is the broker's own.
    let cluster_name = clusters[0]["name"].as_str().unwrap();
    let own = topics["topics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|topic| topic["topic"] == cluster_name)
        .unwrap_or_else(|| panic!("{cluster_name} in {topics}"));
    assert_eq!(own["kind"], "system");
    assert_eq!(row["brokers"][0]["readQueues"], 2, "{row}");

    let topic = get_ok(console, &format!("/api/topic?topic={TOPIC}"));
    let mut queues: Vec<(i64, i64, i64)> = topic["queues"]
        .as_array()
        .unwrap()
        .iter()
        .map(|queue| {
            assert_eq!(queue["brokerName"], broker_name.as_str());
            (
                queue["queueId"].as_i64().unwrap(),
                queue["minOffset"].as_i64().unwrap(),
                queue["maxOffset"].as_i64().unwrap(),
            )
        })
        .collect();
    queues.sort();
    assert_eq!(queues, vec![(0, 0, 3), (1, 0, 2)], "{topic}");
    assert_eq!(topic["messages"], 5);
    assert_eq!(topic["errors"], serde_json::json!([]));

    let groups = get_ok(console, "/api/groups");
    let find = |name: &str| {
        groups["groups"]
            .as_array()
            .unwrap()
            .iter()
            .find(|group| group["group"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{name} in {groups}"))
    };
    assert_eq!(find(GROUP)["system"], false);
    assert_eq!(find(GROUP)["retryMaxTimes"], 16);
    assert_eq!(find("TOOLS_CONSUMER")["system"], true);

    assert_eq!(lag(console), (vec![(0, 3, 1, 2), (1, 2, 0, 2)], 4));
    let group = get_ok(console, &format!("/api/group?group={GROUP}"));
    assert_eq!(group["connections"], serde_json::json!([]), "{group}");

    // By offset message id: the third message.
    let found = get_ok(console, &format!("/api/message/id?id={}", ids[2]));
    let message = only_message(&found);
    assert_eq!(message["body"], "body-2");
    assert_eq!(message["bodyEncoding"], "utf-8");
    assert_eq!(message["keys"], serde_json::json!(["key-2"]));
    assert_eq!(message["tags"], "TagA");
    assert_eq!(message["properties"]["KEYS"], "key-2");
    assert_eq!(message["queueId"], 0);
    assert_eq!(message["queueOffset"], 2);
    assert_eq!(message["msgId"], ids[2].as_str());

    // By key: only the message with that key (the index matches hashes).
    let found = get_ok(
        console,
        &format!("/api/message/key?topic={TOPIC}&key=key-3"),
    );
    let message = only_message(&found);
    assert_eq!(message["body"], "body-3");
    assert_eq!(message["queueId"], 1);
    assert_eq!(message["queueOffset"], 0);
    let none = get_ok(
        console,
        &format!("/api/message/key?topic={TOPIC}&key=no-such"),
    );
    assert_eq!(none["messages"], serde_json::json!([]));

    // By queue offset: the fifth message, and an offset past the end.
    let path = format!("/api/message/offset?topic={TOPIC}&broker={broker_name}&queue=1&offset=1");
    let found = get_ok(console, &path);
    let message = only_message(&found);
    assert_eq!(message["body"], "body-4");
    assert_eq!(message["msgId"], ids[4].as_str());
    let path = format!("/api/message/offset?topic={TOPIC}&broker={broker_name}&queue=1&offset=2");
    let (code, answer) = get(console, &path);
    assert_eq!(code, 404, "{answer}");
    assert!(
        answer["error"].as_str().unwrap().contains("offsets 0 to 1"),
        "{answer}"
    );

    // Reset to the end: no lag; then to the earliest message: everything is lag.
    let form = format!("group={GROUP}&topic={TOPIC}&timestamp=-1");
    let (code, answer) = post(console, "/api/group/reset", &form);
    assert_eq!(code, 200, "{answer}");
    assert_eq!(answer["offsets"].as_array().unwrap().len(), 2, "{answer}");
    assert_eq!(lag(console), (vec![(0, 3, 3, 0), (1, 2, 2, 0)], 0));
    let form = format!("group={GROUP}&topic={TOPIC}&timestamp=0");
    let (code, answer) = post(console, "/api/group/reset", &form);
    assert_eq!(code, 200, "{answer}");
    assert_eq!(lag(console), (vec![(0, 3, 0, 3), (1, 2, 0, 2)], 5));
}

// Proves bad requests get clear refusals and the console goes on serving: garbage, an
// oversized head, a chunked body, unknown paths, wrong methods, missing or bad parameters,
// and a message id naming a broker that is not registered.
#[test]
fn console_refuses_bad_requests() {
    let dir = TempDir::new("console-bad");
    let console_port = free_port();
    let option = format!("consoleListenPort={console_port}");
    let broker = Broker::start(dir.path(), 1, &["-o", &option]);
    let console = SocketAddr::new(LOOPBACK.into(), console_port);
    wait_for_port(console, Duration::from_secs(10));

    let refused = |request: &[u8], expected: u16, reason: &str| {
        let (head, body) = exchange(console, request);
        assert_eq!(status(&head), expected, "{head}\n{body}");
        let body: Value = serde_json::from_str(&body).expect("a JSON refusal");
        let error = body["error"].as_str().expect("an error text");
        assert!(error.contains(reason), "{error:?} lacks {reason:?}");
    };
    refused(
        b"\x16\x03\x01garbage\r\n\r\n",
        400,
        "malformed request head",
    );
    let mut huge = b"GET / HTTP/1.1\r\nX-Big: ".to_vec();
    huge.extend(std::iter::repeat_n(b'a', 20 * 1024));
    huge.extend_from_slice(b"\r\n\r\n");
    refused(&huge, 400, "larger than 16384 bytes");
    refused(
        b"POST /api/group/reset HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
        "Transfer-Encoding",
    );
    refused(
        b"GET /nope HTTP/1.1\r\n\r\n",
        404,
        "no page or API at /nope",
    );
    refused(
        b"DELETE /api/topics HTTP/1.1\r\n\r\n",
        405,
        "GET and HEAD only",
    );
    refused(b"GET /api/group/reset HTTP/1.1\r\n\r\n", 405, "is a POST");
    refused(b"GET /api/topic HTTP/1.1\r\n\r\n", 400, "?topic=");
    refused(
        b"GET /api/topic?topic=NoSuch HTTP/1.1\r\n\r\n",
        404,
        "no route",
    );
    refused(
        b"GET /api/message/id?id=zz HTTP/1.1\r\n\r\n",
        400,
        "not an offset message id",
    );
    let elsewhere = comet_proto::message_id::encode_offset_msg_id(
        SocketAddr::new(LOOPBACK.into(), free_port()),
        0,
    );
    let request = format!("GET /api/message/id?id={elsewhere} HTTP/1.1\r\n\r\n");
    refused(request.as_bytes(), 404, "not registered here");
    // A reset without the page's header, as a form on another site would send it.
    let form = "group=g&topic=t&timestamp=-1";
    let request = format!(
        "POST /api/group/reset HTTP/1.1\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    refused(request.as_bytes(), 403, "X-Comet-Console");
    let form = "group=g&topic=t&timestamp=soon";
    let request = format!(
        "POST /api/group/reset HTTP/1.1\r\nX-Comet-Console: 1\r\nContent-Length: {}\r\n\r\n\
         {form}",
        form.len()
    );
    refused(request.as_bytes(), 400, "not a number of ms");
    let request =
        b"POST /api/group/reset HTTP/1.1\r\nX-Comet-Console: 1\r\nContent-Length: 3\r\n\r\na=b";
    refused(request, 400, "group, topic and timestamp");
    // A HEAD answer has the head only.
    let mut stream = TcpStream::connect(console).unwrap();
    stream.write_all(b"HEAD / HTTP/1.1\r\n\r\n").unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200 OK\r\n"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n"), "{answer}");
    // Still serving, and the broker is alive.
    let cluster = get_ok(console, "/api/cluster");
    assert_eq!(
        cluster["clusters"][0]["brokers"][0]["addr"],
        broker.broker_addr.to_string()
    );
}

/// Registers a broker named `name` at `addr`, where nothing answers, serving `topic`; it
/// stays registered while `client`'s connection lasts.
fn register_silent_broker(client: &mut Client, name: &str, addr: SocketAddr, topic: &str) {
    let mut body = RegisterBrokerBody::default();
    let wrapper = &mut body.topic_config_serialize_wrapper;
    wrapper.data_version.counter = 1;
    wrapper
        .topic_config_table
        .insert(topic.to_owned(), TopicConfig::new(topic.to_owned()));
    let header = RegisterBrokerRequestHeader {
        broker_name: name.to_owned(),
        broker_addr: addr.to_string(),
        cluster_name: "DefaultCluster".to_owned(),
        ha_server_addr: addr.to_string(),
        broker_id: 0,
        heartbeat_timeout_millis: None,
        enable_acting_master: Some(false),
        compressed: false,
        body_crc32: None,
    };
    client.call_ok(
        RemotingCommand::request(RequestCode::REGISTER_BROKER, 0)
            .with_header(&header)
            .with_body(body.encode().to_vec()),
    );
}

// Proves a broker that does not answer is named with its error while the others' answers
// are shown: the cluster page marks it, and a topic it serves lists the error.
#[test]
fn console_names_a_silent_broker() {
    let dir = TempDir::new("console-silent");
    let console_port = free_port();
    let option = format!("consoleListenPort={console_port}");
    let broker = Broker::start(dir.path(), 1, &["-o", &option]);
    let console = SocketAddr::new(LOOPBACK.into(), console_port);
    wait_for_port(console, Duration::from_secs(10));
    let silent = SocketAddr::new(LOOPBACK.into(), free_port());
    let mut registration = broker.namesrv_client();
    register_silent_broker(&mut registration, "broker-silent", silent, "SilentTopic");

    // The broker registers with its embedded name server shortly after its ports open.
    let cluster = wait_for("both brokers in the console", ROUTE_WAIT, || {
        let cluster = get_ok(console, "/api/cluster");
        let count = cluster["clusters"][0]["brokers"]
            .as_array()
            .map_or(0, Vec::len);
        (count == 2).then_some(cluster)
    });
    let brokers = cluster["clusters"][0]["brokers"].as_array().unwrap();
    let by_addr = |addr: String| {
        brokers
            .iter()
            .find(|row| row["addr"] == addr.as_str())
            .unwrap_or_else(|| panic!("{addr} in {cluster}"))
    };
    let alive = by_addr(broker.broker_addr.to_string());
    assert!(alive["error"].is_null(), "{alive}");
    assert!(alive["runtime"]["brokerVersionDesc"].is_string(), "{alive}");
    let dead = by_addr(silent.to_string());
    assert_eq!(dead["brokerName"], "broker-silent");
    assert!(dead["runtime"].is_null(), "{dead}");
    let error = dead["error"]
        .as_str()
        .expect("an error for the silent broker");
    assert!(error.contains(&silent.to_string()), "{error}");

    let topic = get_ok(console, "/api/topic?topic=SilentTopic");
    assert_eq!(topic["queues"], serde_json::json!([]), "{topic}");
    let errors = topic["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 1, "{topic}");
    assert_eq!(errors[0]["brokerName"], "broker-silent");
    assert_eq!(errors[0]["addr"], silent.to_string());
}
