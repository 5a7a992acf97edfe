//! `consume --topics`: many consumer groups from one process, against a real
//! `comet-broker --standalone` on loopback (started by comet-test-support, see smoke.rs).

mod common;

use comet_test_support::{Broker, TempDir};

use common::{bench, number};

// Proves consume --topics 3 runs a group per topic (`<group>_<i>` on `<topic>_<i>`): the
// 600 messages produce --topics 3 spread over the three topics, and its unmeasured warm-up
// message to each, arrive, each exactly once.
#[test]
fn a_group_per_topic_receives_every_topic() {
    let dir = TempDir::new("bench-groups");
    let store = dir.path().join("store");
    let broker = Broker::start(&store, 1, &[]);
    let topics = ["--topic", "BenchGroups", "--topics", "3"];
    let send = [
        &["produce"],
        &topics[..],
        &["--queues", "2", "--messages", "600"],
    ]
    .concat();
    let produced = bench(&broker, dir.path(), "produce", &send);
    assert_eq!(number(&produced, "messages_total"), 600, "{produced}");
    assert_eq!(number(&produced, "errors_total"), 0, "{produced}");

    let receive = [
        &["consume", "--group", "bench_groups", "--threads", "2"],
        &topics[..],
        &["--from", "first", "--idle-exit", "2", "--duration", "60"],
    ]
    .concat();
    let received = bench(&broker, dir.path(), "groups", &receive);
    assert_eq!(number(&received, "messages_total"), 603, "{received}");
    assert_eq!(number(&received, "errors_total"), 0, "{received}");
}
