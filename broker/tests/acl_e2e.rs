//! End-to-end tests of the plain ACL (ACL 1.0): a real `comet-broker --standalone` started
//! with `aclEnable=true` and an accounts file, driven by signed and unsigned requests over
//! the wire; and start-up refused when the accounts file is missing or malformed.

mod common;

use std::path::Path;

use comet_proto::acl::{sign, Credentials};
use comet_proto::body::{
    ConsumeType, ConsumerData, HeartbeatData, JsonBody, ProducerData, SubscriptionData,
};
use comet_proto::headers::CreateTopicRequestHeader;
use comet_proto::{RemotingCommand, RequestCode, ResponseCode};
use common::{pull_request, send_request, Broker, TempDir};

const ACCOUNTS: &str = "\
accounts:
  - accessKey: app000001
    secretKey: app-secret-1
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - AclTopic=PUB|SUB
      - DeniedTopic=DENY
  - accessKey: admin00001
    secretKey: admin-secret
    admin: true
";

fn app() -> Credentials {
    Credentials::new("app000001", "app-secret-1")
}

fn signed(mut request: RemotingCommand, credentials: &Credentials) -> RemotingCommand {
    sign(&mut request, credentials);
    request
}

fn start_acl_broker(directory: &TempDir) -> Broker {
    let file = directory.0.join("plain_acl.yml");
    std::fs::write(&file, ACCOUNTS).unwrap();
    let file_option = format!("plainAclFile={}", file.display());
    let extra = ["-o", "aclEnable=true", "-o", file_option.as_str()];
    Broker::start(&directory.0.join("store"), 2, &extra)
}

/// Asserts Java's refusal: SYSTEM_ERROR, the AclException text with `message`.
fn assert_refused(response: &RemotingCommand, message: &str) {
    assert_eq!(response.response_code(), ResponseCode::SYSTEM_ERROR);
    let remark = response.remark.clone().unwrap_or_default();
    let expected = format!("org.apache.rocketmq.acl.common.AclException: {message}");
    assert!(
        remark.starts_with(&expected),
        "remark {remark:?}, expected {expected:?}"
    );
}

fn heartbeat(group: &str, topic: &str) -> RemotingCommand {
    let data = HeartbeatData {
        client_id: "127.0.0.1@acl".into(),
        producer_data_set: vec![ProducerData {
            group_name: "acl_pg".into(),
        }],
        consumer_data_set: vec![ConsumerData {
            group_name: group.into(),
            consume_type: ConsumeType::CONSUME_PASSIVELY,
            subscription_data_set: vec![SubscriptionData {
                topic: topic.into(),
                sub_string: "*".into(),
                ..SubscriptionData::default()
            }],
            ..ConsumerData::default()
        }],
        ..HeartbeatData::default()
    };
    RemotingCommand::request(RequestCode::HEART_BEAT, 0).with_body(data.encode())
}

// Proves signed sends, pulls and heartbeats of the right account pass, and the admin
// account may run an admin-only code, on a two-shard broker with ACL on.
#[test]
fn signed_requests_of_the_right_account_pass() {
    let directory = TempDir::new("e2e-acl-pass");
    let broker = start_acl_broker(&directory);
    let mut client = broker.client();
    let send = signed(send_request("AclTopic", 0, b"hello", None, None), &app());
    client.call_ok(send);
    let pull = signed(pull_request("acl_group", "AclTopic", 0, 0, 32, 0), &app());
    let response = client.call_ok(pull);
    assert!(!response.body.is_empty());
    client.call_ok(signed(heartbeat("acl_group", "AclTopic"), &app()));
    let header = CreateTopicRequestHeader {
        topic: "AdminTopic".into(),
        default_topic: "TBW102".into(),
        read_queue_nums: 4,
        write_queue_nums: 4,
        perm: 6,
        topic_filter_type: "SINGLE_TAG".into(),
        topic_sys_flag: None,
        order: false,
        attributes: None,
        force: None,
    };
    let create =
        RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 0).with_header(&header);
    let admin = Credentials::new("admin00001", "admin-secret");
    client.call_ok(signed(create, &admin));
}

// Proves a wrong secret, an unknown key, a DENY topic, a topic outside the account's
// default, a non-admin admin request, a tampered body and an unsigned request are each
// refused with Java's code and remark, codes Comet does not serve are checked too, and the
// broker keeps serving the same connection (and new ones) afterwards.
#[test]
fn refusals_carry_java_code_and_remark() {
    let directory = TempDir::new("e2e-acl-refuse");
    let broker = start_acl_broker(&directory);
    let mut client = broker.client();
    let send = || send_request("AclTopic", 0, b"hello", None, None);
    let wrong_secret = Credentials::new("app000001", "not-the-secret");
    let response = client.call(signed(send(), &wrong_secret));
    assert_refused(&response, "Check signature failed for accessKey=app000001");
    let stranger = Credentials::new("stranger01", "whatever-secret");
    assert_refused(
        &client.call(signed(send(), &stranger)),
        "No acl config for stranger01",
    );
    let denied = send_request("DeniedTopic", 0, b"x", None, None);
    let response = client.call(signed(denied, &app()));
    assert_refused(&response, "No permission for topic:DeniedTopic");
    let other = send_request("OtherTopic", 0, b"x", None, None);
    let response = client.call(signed(other, &app()));
    assert_refused(&response, "No default permission for topic:OtherTopic");
    let mut create = RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_TOPIC, 0);
    create.ext_fields.insert("topic", "Sneaky");
    let response = client.call(signed(create, &app()));
    assert_refused(
        &response,
        "Need admin permission for request code=17, but accessKey=app000001 is not",
    );
    assert_refused(&client.call(send()), "No accessKey is configured");
    let mut tampered = signed(send(), &app());
    tampered.body = comet_proto::bytes::Bytes::from_static(b"changed after signing");
    let response = client.call(tampered);
    assert_refused(&response, "Check signature failed for accessKey=app000001");
    // A code Comet does not serve is checked too (Java's default processor runs after the
    // hook): refused unsigned or without admin, REQUEST_CODE_NOT_SUPPORTED for the admin.
    let acl_update = || RemotingCommand::request(RequestCode::UPDATE_AND_CREATE_ACL_CONFIG, 0);
    assert_refused(&client.call(acl_update()), "No accessKey is configured");
    let response = client.call(signed(acl_update(), &app()));
    assert_refused(&response, "Need admin permission for request code=50");
    let admin = Credentials::new("admin00001", "admin-secret");
    let response = client.call(signed(acl_update(), &admin));
    assert_eq!(
        response.response_code(),
        ResponseCode::REQUEST_CODE_NOT_SUPPORTED
    );
    client.call_ok(signed(send(), &app()));
    let mut fresh = broker.client();
    fresh.call_ok(signed(send(), &app()));
}

/// Runs the broker binary with `extra` options and expects it to exit during start-up;
/// returns its standard error.
fn failed_start(directory: &Path, extra: &[&str]) -> String {
    let port = comet_test_support::free_port().to_string();
    let namesrv = format!("127.0.0.1:{}", comet_test_support::free_port());
    let mut args = vec!["--bind-address", "127.0.0.1", "--listen-port", &port];
    args.extend(["--namesrv", &namesrv]);
    args.extend(extra);
    let (code, stderr) = common::run_to_exit(&args, &directory.join("store"));
    assert_ne!(code, Some(0), "comet-broker started with a bad ACL set-up");
    stderr
}

// Proves the broker refuses to start, naming the file and the fault, when ACL is on and the
// accounts file is missing or malformed; and ACL 2.0 keys are still refused.
#[test]
fn bad_accounts_files_stop_the_start() {
    let directory = TempDir::new("e2e-acl-bad");
    let missing = directory.0.join("absent.yml");
    let option = format!("plainAclFile={}", missing.display());
    let stderr = failed_start(&directory.0, &["-o", "aclEnable=true", "-o", &option]);
    assert!(
        stderr.contains("absent.yml") && stderr.contains("cannot read"),
        "{stderr}"
    );
    let malformed = directory.0.join("malformed.yml");
    std::fs::write(
        &malformed,
        "accounts:\n  - accessKey: short\n    secretKey: s\n",
    )
    .unwrap();
    let option = format!("plainAclFile={}", malformed.display());
    let stderr = failed_start(&directory.0, &["-o", "aclEnable=true", "-o", &option]);
    assert!(
        stderr.contains("malformed.yml") && stderr.contains("accessKey"),
        "{stderr}"
    );
    let stderr = failed_start(&directory.0, &["-o", "authenticationEnabled=true"]);
    assert!(stderr.contains("authenticationEnabled"), "{stderr}");
}

// Proves a running broker applies an edited accounts file without a restart: once AclTopic is
// made DENY in the file, a signed send to it is refused within a few seconds.
#[test]
fn edited_accounts_apply_without_a_restart() {
    let directory = TempDir::new("e2e-acl-reload");
    let broker = start_acl_broker(&directory);
    let mut client = broker.client();
    let send = || signed(send_request("AclTopic", 0, b"hello", None, None), &app());
    assert_eq!(client.call(send()).response_code(), ResponseCode::SUCCESS);
    let edited = ACCOUNTS.replace("AclTopic=PUB|SUB", "AclTopic=DENY");
    std::fs::write(directory.0.join("plain_acl.yml"), edited).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    loop {
        let response = client.call(send());
        if response.response_code() != ResponseCode::SUCCESS {
            assert_refused(&response, "No permission for topic:AclTopic");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the edited file was not applied"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}
