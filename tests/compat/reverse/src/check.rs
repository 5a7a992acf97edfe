//! What a scenario sends and the checks applied to what arrives.
//!
//! Every message carries a user property `cid` (compat id) unique to the run; an arrival is
//! matched to what was sent by it and compared field by field: topic, body bytes, tags, the
//! raw `KEYS` property (two keys joined by a space on odd messages), every user property, and
//! sane system fields (offset message id, queue offset, born and store timestamps). The
//! message shapes are those of the Java suite (`tests/compat/java`), so both directions test
//! the same traffic.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use comet_client::{ClientError, Message, MessageExt};

/// A scenario failure with a readable reason.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// A check did not hold.
    #[error("{0}")]
    Check(String),
    /// The client under test returned an error.
    #[error("client error: {0}")]
    Client(#[from] ClientError),
}

/// The outcome of one scenario: a short detail line when it passed.
pub type Outcome = Result<String, Failure>;

/// Fails with `message` unless `condition` holds.
pub fn ensure(condition: bool, message: impl FnOnce() -> String) -> Result<(), Failure> {
    if condition {
        Ok(())
    } else {
        Err(Failure::Check(message()))
    }
}

/// How often `wait_for` re-evaluates its condition.
const POLL_INTERVAL: Duration = Duration::from_millis(50);

/// Polls `done` until it holds; fails after `timeout`, saying what `state` reports then.
pub fn wait_for(
    what: &str,
    timeout: Duration,
    mut done: impl FnMut() -> bool,
    state: impl Fn() -> String,
) -> Result<(), Failure> {
    let deadline = Instant::now() + timeout;
    while !done() {
        if Instant::now() > deadline {
            let reached = state();
            let reached = if reached.is_empty() {
                String::new()
            } else {
                format!(" ({reached})")
            };
            return Err(Failure::Check(format!(
                "timed out after {} ms waiting for {what}{reached}",
                timeout.as_millis()
            )));
        }
        std::thread::sleep(POLL_INTERVAL);
    }
    Ok(())
}

/// What was sent: enough to rebuild the message and compare an arrival with it.
#[derive(Clone, Debug)]
pub struct Sent {
    /// The run-unique id, also the `cid` property.
    pub cid: String,
    /// Destination topic.
    pub topic: String,
    /// The one tag.
    pub tags: String,
    /// The keys, joined by a space as RocketMQ stores them.
    pub keys: String,
    /// Body bytes.
    pub body: Vec<u8>,
    /// User properties, `cid` included.
    pub props: Vec<(String, String)>,
    /// Order id (ordered scenarios put each on one queue; `seq` property is the position).
    pub order_id: u32,
}

impl Sent {
    /// The message to hand to the producer.
    pub fn to_message(&self) -> Result<Message, Failure> {
        let mut message = Message::new(self.topic.clone(), self.body.clone())
            .with_tags(self.tags.clone())
            .with_keys(self.keys.split(' '));
        for (name, value) in &self.props {
            message.put_user_property(name, value.clone())?;
        }
        Ok(message)
    }
}

/// Builds message `index` of a scenario: tags cycling through `tags`, two keys on odd
/// messages, a non-ASCII property value containing `=`, and a body of `body_bytes` (bodies
/// above 4 KiB make the producer compress them).
pub fn make(
    run_id: &str,
    topic: &str,
    index: u32,
    tags: &[&str],
    body_bytes: usize,
    order_id: u32,
    seq: u32,
) -> Sent {
    assert!(!tags.is_empty(), "a message needs a tag to cycle through");
    let cid = format!("{run_id}-{topic}-{index}");
    let keys = if index % 2 == 1 {
        format!("k{index}-{run_id} alt{index}-{run_id}")
    } else {
        format!("k{index}-{run_id}")
    };
    let mut body = format!("body {cid} ").into_bytes();
    while body.len() < body_bytes {
        let letter = (body.len() * 7 + index as usize) % 26;
        body.push(b'a' + u8::try_from(letter).expect("a letter index is below 26"));
    }
    let props = vec![
        ("cid".to_owned(), cid.clone()),
        ("idx".to_owned(), index.to_string()),
        ("order".to_owned(), order_id.to_string()),
        ("seq".to_owned(), seq.to_string()),
        (
            "note".to_owned(),
            "h\u{e9}llo w\u{f6}rld \u{2713} a=b".to_owned(),
        ),
    ];
    Sent {
        cid,
        topic: topic.to_owned(),
        tags: tags[index as usize % tags.len()].to_owned(),
        keys,
        body,
        props,
        order_id,
    }
}

/// The `cid` property of an arrival ("" when it has none).
pub fn cid(message: &MessageExt) -> &str {
    message.property("cid").unwrap_or("")
}

/// Most problems listed in one failure line.
const PROBLEMS_SHOWN: usize = 8;
/// Most missing ids named one by one.
const MISSING_NAMED: usize = 3;

/// Compares arrivals with what was expected. Every expected message must arrive intact; an
/// arrival that was never sent (or not expected here, e.g. filtered out by tag) fails, and
/// duplicates fail unless `allow_duplicates` (at-least-once delivery around rebalances).
pub fn verify(expected: &[Sent], got: &[MessageExt], allow_duplicates: bool) -> Outcome {
    let by_cid: HashMap<&str, &Sent> = expected.iter().map(|s| (s.cid.as_str(), s)).collect();
    let mut seen: HashMap<&str, u32> = HashMap::new();
    let mut problems = Vec::new();
    let mut duplicates = 0;
    for message in got {
        let id = cid(message);
        let Some(sent) = by_cid.get(id) else {
            problems.push(format!(
                "unexpected message cid={id:?} tags={:?} id={}",
                message.tags(),
                message.msg_id
            ));
            continue;
        };
        let count = seen.entry(id).or_insert(0);
        *count += 1;
        if *count > 1 {
            duplicates += 1;
            continue;
        }
        compare(sent, message, &mut problems);
    }
    let missing: Vec<&str> = expected
        .iter()
        .filter(|s| !seen.contains_key(s.cid.as_str()))
        .map(|s| s.cid.as_str())
        .collect();
    for id in missing.iter().take(MISSING_NAMED) {
        problems.push(format!("missing cid={id}"));
    }
    if missing.len() > MISSING_NAMED {
        problems.push(format!("... {} missing in all", missing.len()));
    }
    if duplicates > 0 && !allow_duplicates {
        problems.push(format!("{duplicates} duplicate deliveries"));
    }
    if !problems.is_empty() {
        let shown = problems.len().min(PROBLEMS_SHOWN);
        return Err(Failure::Check(format!(
            "{} problem(s): {}",
            problems.len(),
            problems[..shown].join("; ")
        )));
    }
    let dup = if duplicates > 0 {
        format!(", {duplicates} dup")
    } else {
        String::new()
    };
    Ok(format!("{} msgs intact{dup}", expected.len()))
}

fn compare(sent: &Sent, message: &MessageExt, problems: &mut Vec<String>) {
    let id = format!("cid={}: ", sent.cid);
    if message.topic != sent.topic {
        problems.push(format!("{id}topic {} != {}", message.topic, sent.topic));
    }
    if message.body.as_ref() != sent.body.as_slice() {
        problems.push(format!(
            "{id}body differs ({} bytes, sent {})",
            message.body.len(),
            sent.body.len()
        ));
    }
    if message.tags() != Some(sent.tags.as_str()) {
        problems.push(format!("{id}tags {:?} != {:?}", message.tags(), sent.tags));
    }
    if message.property("KEYS") != Some(sent.keys.as_str()) {
        problems.push(format!(
            "{id}keys {:?} != {:?}",
            message.property("KEYS"),
            sent.keys
        ));
    }
    for (name, value) in &sent.props {
        if message.property(name) != Some(value.as_str()) {
            problems.push(format!(
                "{id}property {name}={:?} != {value:?}",
                message.property(name)
            ));
        }
    }
    if message.msg_id.is_empty()
        || message.uniq_key().is_none()
        || message.queue_offset < 0
        || message.store_timestamp <= 0
        || message.born_timestamp <= 0
    {
        problems.push(format!(
            "{id}bad system fields msgId={} uniqKey={:?} queueOffset={} storeTimestamp={}",
            message.msg_id,
            message.uniq_key(),
            message.queue_offset,
            message.store_timestamp
        ));
    }
}

fn number_property(message: &MessageExt, name: &str) -> Result<u32, Failure> {
    message
        .property(name)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| {
            Failure::Check(format!(
                "cid={}: property {name} missing or not a number",
                cid(message)
            ))
        })
}

/// Checks that, per order id, the first delivery of each message came in send order (seq 0,
/// 1, 2, ...). `got` must be in the order the listener saw the messages.
pub fn in_order_per_order_id(got: &[MessageExt]) -> Result<(), Failure> {
    let mut next: HashMap<u32, u32> = HashMap::new();
    for message in first_arrivals(got) {
        let order = number_property(&message, "order")?;
        let seq = number_property(&message, "seq")?;
        let want = next.entry(order).or_insert(0);
        ensure(seq == *want, || {
            format!("order {order}: got seq {seq} where {want} was due")
        })?;
        *want += 1;
    }
    Ok(())
}

/// Per order id, the sequence only increases (some members of an order may be filtered out).
pub fn increasing_per_order_id(got: &[MessageExt]) -> Result<(), Failure> {
    let mut last: HashMap<u32, u32> = HashMap::new();
    for message in got {
        let order = number_property(message, "order")?;
        let seq = number_property(message, "seq")?;
        if let Some(prev) = last.insert(order, seq) {
            ensure(seq > prev, || {
                format!("order {order}: seq {seq} arrived after {prev}")
            })?;
        }
    }
    Ok(())
}

/// The first delivery of each message, in arrival order (later re-deliveries dropped).
pub fn first_arrivals(got: &[MessageExt]) -> Vec<MessageExt> {
    let mut seen = HashSet::new();
    got.iter()
        .filter(|m| seen.insert(cid(m).to_owned()))
        .cloned()
        .collect()
}

/// Within each queue, offsets (hence messages) arrived in increasing order.
pub fn in_order_per_queue(got: &[MessageExt]) -> Result<(), Failure> {
    let mut last: HashMap<i32, i64> = HashMap::new();
    for message in got {
        if let Some(prev) = last.insert(message.queue_id, message.queue_offset) {
            ensure(message.queue_offset > prev, || {
                format!(
                    "queue {}: offset {} arrived after {prev}",
                    message.queue_id, message.queue_offset
                )
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use comet_proto::bytes::Bytes;
    use comet_proto::properties::Properties;

    /// The arrival a correct broker and client would deliver for `sent`.
    fn arrival(sent: &Sent, queue_offset: i64) -> MessageExt {
        let mut properties = Properties::new();
        properties.insert("TAGS", sent.tags.clone());
        properties.insert("KEYS", sent.keys.clone());
        properties.insert("UNIQ_KEY", format!("UNIQ{queue_offset}"));
        for (name, value) in &sent.props {
            properties.insert(name.clone(), value.clone());
        }
        let host = "127.0.0.1:10911".parse().expect("a literal address");
        MessageExt {
            topic: sent.topic.clone(),
            queue_id: 0,
            flag: 0,
            queue_offset,
            commit_log_offset: 0,
            sysflag: 0,
            born_timestamp: 1,
            born_host: host,
            store_timestamp: 2,
            store_host: host,
            reconsume_times: 0,
            prepared_transaction_offset: 0,
            body_crc: 0,
            store_size: 0,
            body: Bytes::from(sent.body.clone()),
            body_compression: None,
            properties,
            msg_id: format!("OFFSETID{queue_offset}"),
        }
    }

    fn three() -> Vec<Sent> {
        (0..3)
            .map(|i| make("run", "t", i, &["TagA", "TagB"], 120, 0, i))
            .collect()
    }

    // Proves verify passes intact arrivals and names each kind of damage: a changed body, a
    // missing message, an unexpected one, and duplicates unless they are allowed.
    #[test]
    fn verify_flags_every_kind_of_damage() {
        let sent = three();
        let good: Vec<MessageExt> = sent.iter().zip(0..).map(|(s, o)| arrival(s, o)).collect();
        assert_eq!(verify(&sent, &good, false).unwrap(), "3 msgs intact");

        let mut corrupted = good.clone();
        corrupted[1].body = Bytes::from_static(b"other");
        let reason = verify(&sent, &corrupted, false).unwrap_err().to_string();
        assert!(reason.contains("body differs"), "{reason}");

        let reason = verify(&sent, &good[..2], false).unwrap_err().to_string();
        assert!(reason.contains("missing cid=run-t-2"), "{reason}");

        let reason = verify(&sent[..2], &good, false).unwrap_err().to_string();
        assert!(reason.contains("unexpected message"), "{reason}");

        let mut doubled = good.clone();
        doubled.push(good[0].clone());
        let reason = verify(&sent, &doubled, false).unwrap_err().to_string();
        assert!(reason.contains("1 duplicate deliveries"), "{reason}");
        assert_eq!(
            verify(&sent, &doubled, true).unwrap(),
            "3 msgs intact, 1 dup"
        );
    }

    // Proves the per-order check accepts the send order and rejects a swap, and that keys
    // and tags are compared as RocketMQ stores them (two keys joined by a space).
    #[test]
    fn order_and_key_checks() {
        let sent = three();
        let got: Vec<MessageExt> = sent.iter().zip(0..).map(|(s, o)| arrival(s, o)).collect();
        assert!(in_order_per_order_id(&got).is_ok());
        let swapped = vec![got[1].clone(), got[0].clone(), got[2].clone()];
        assert!(in_order_per_order_id(&swapped).is_err());
        assert!(in_order_per_queue(&swapped).is_err());
        assert_eq!(sent[1].keys, "k1-run alt1-run");
        let mut wrong_keys = got.clone();
        wrong_keys[1].properties.insert("KEYS", "k1-run");
        let reason = verify(&sent, &wrong_keys, false).unwrap_err().to_string();
        assert!(reason.contains("keys"), "{reason}");
    }
}
