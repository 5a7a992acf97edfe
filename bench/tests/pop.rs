//! The bench's pop mode against a real `comet-broker --standalone` on loopback (started and
//! stopped by comet-test-support, as in the smoke test).

mod common;

use comet_test_support::{Broker, TempDir};

use common::{bench, number};

// Proves that an end-to-end pop run measures only its own messages from the queues' end: a
// sitting warms up and measures on one topic, and a new pop group would otherwise read a young
// queue from its first message, so every earlier run's messages came first (as foreign
// messages) and this run's latency grew with the topic's backlog.
#[test]
fn end_to_end_pop_starts_at_the_end_of_a_topic_with_a_backlog() {
    let dir = TempDir::new("bench-pop");
    let store = dir.path().join("store");
    let broker = Broker::start(&store, 1, &[]);
    let topic = ["--topic", "BenchPopE", "--queues", "4"];

    let backlog = [
        &["produce"],
        &topic[..],
        &["--inflight", "32", "--messages", "2000"],
    ]
    .concat();
    let filled = bench(&broker, dir.path(), "backlog", &backlog);
    assert_eq!(number(&filled, "messages_total"), 2000, "{filled}");
    assert_eq!(number(&filled, "errors_total"), 0, "{filled}");

    let e2e = [
        &["pop"],
        &topic[..],
        &["--rate", "200", "--consumers", "3", "--duration", "2"],
    ]
    .concat();
    for run in ["pop-e2e-1", "pop-e2e-2"] {
        let report = bench(&broker, dir.path(), run, &e2e);
        assert!(number(&report, "messages_total") > 0, "{report}");
        assert_eq!(number(&report, "send_errors_total"), 0, "{report}");
        assert_eq!(number(&report, "errors_total"), 0, "{report}");
        assert_eq!(number(&report, "e2e_missing_total"), 0, "{report}");
        assert_eq!(number(&report, "foreign_messages_total"), 0, "{report}");
    }
}
