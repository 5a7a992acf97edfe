//! What a scenario sends and the checks applied to what arrives (the message shapes of the
//! Java and Go suites): every message carries a unique `cid` property; an arrival is matched
//! by it and compared field by field: topic, body bytes, tags, the raw `KEYS` property (two
//! keys joined by a space on odd messages), every user property, and sane system fields.

use std::collections::HashMap;

use rocketmq_model::common::message::message_ext::MessageExt;
use rocketmq_model::common::message::message_single::Message;

/// Bodies above 4 KiB are compressed by the producer: every 25th message is this large.
const LARGE_BODY_BYTES: usize = 8 * 1024;
/// Most problems listed in one failure line.
const PROBLEMS_SHOWN: usize = 8;

/// What was sent.
#[derive(Clone, Debug)]
pub struct Sent {
    /// The run-unique id, also the `cid` property.
    pub cid: String,
    /// Destination topic.
    pub topic: String,
    /// The one tag.
    pub tags: String,
    /// The keys as sent.
    pub keys: Vec<String>,
    /// Body bytes.
    pub body: Vec<u8>,
    /// User properties, `cid` included.
    pub props: Vec<(String, String)>,
    /// Order id (ordered scenarios put each on one queue).
    pub order_id: u32,
}

impl Sent {
    /// The message to hand to the producer.
    pub fn to_message(&self) -> Result<Message, String> {
        let mut builder = Message::builder()
            .topic(self.topic.as_str())
            .body_slice(&self.body)
            .tags(self.tags.as_str())
            .keys(self.keys.clone());
        for (name, value) in &self.props {
            builder = builder
                .raw_property(name.as_str(), value.as_str())
                .map_err(|e| format!("property {name}: {e}"))?;
        }
        builder.build().map_err(|e| format!("message: {e}"))
    }
}

/// Builds message `index`: tags cycling through `tags`, two keys on odd messages, a non-ASCII
/// property value containing `=`, every 25th body large enough to be compressed.
pub fn make(run_id: &str, topic: &str, index: u32, tags: &[&str], order_id: u32) -> Sent {
    assert!(!tags.is_empty(), "a message needs a tag to cycle through");
    let cid = format!("{run_id}-{topic}-{index}");
    let mut keys = vec![format!("k{index}-{run_id}")];
    if index % 2 == 1 {
        keys.push(format!("alt{index}-{run_id}"));
    }
    let size = if index % 25 == 0 {
        LARGE_BODY_BYTES
    } else {
        100 + index as usize % 300
    };
    let mut body = format!("body {cid} ").into_bytes();
    while body.len() < size {
        body.push(b'a' + ((body.len() * 7 + index as usize) % 26) as u8);
    }
    let props = vec![
        ("cid".to_owned(), cid.clone()),
        ("idx".to_owned(), index.to_string()),
        ("order".to_owned(), order_id.to_string()),
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
pub fn cid(message: &MessageExt) -> String {
    message
        .message_inner()
        .property("cid")
        .unwrap_or("")
        .to_owned()
}

/// Compares arrivals with what was expected: every expected message intact, nothing else,
/// no duplicates unless `allow_duplicates` (at-least-once delivery around a rebalance).
pub fn verify(
    expected: &[Sent],
    got: &[MessageExt],
    allow_duplicates: bool,
) -> Result<String, String> {
    let by_cid: HashMap<&str, &Sent> = expected.iter().map(|s| (s.cid.as_str(), s)).collect();
    let mut seen: HashMap<String, u32> = HashMap::new();
    let mut problems = Vec::new();
    let mut duplicates = 0;
    for message in got {
        let id = cid(message);
        let Some(sent) = by_cid.get(id.as_str()) else {
            problems.push(format!(
                "unexpected message cid={id:?} tags={:?}",
                message.message_inner().tags()
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
    let missing: Vec<&Sent> = expected
        .iter()
        .filter(|s| !seen.contains_key(&s.cid))
        .collect();
    for s in missing.iter().take(3) {
        problems.push(format!("missing cid={}", s.cid));
    }
    if missing.len() > 3 {
        problems.push(format!("... {} missing in all", missing.len()));
    }
    if duplicates > 0 && !allow_duplicates {
        problems.push(format!("{duplicates} duplicate deliveries"));
    }
    if !problems.is_empty() {
        let shown = problems.len().min(PROBLEMS_SHOWN);
        return Err(format!(
            "{} problem(s): {}",
            problems.len(),
            problems[..shown].join("; ")
        ));
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
    let inner = message.message_inner();
    if message.topic().as_str() != sent.topic {
        problems.push(format!("{id}topic {} != {}", message.topic(), sent.topic));
    }
    let body = message.body().unwrap_or_default();
    if body.as_ref() != sent.body.as_slice() {
        problems.push(format!(
            "{id}body differs ({} bytes, sent {})",
            body.len(),
            sent.body.len()
        ));
    }
    if inner.tags() != Some(sent.tags.as_str()) {
        problems.push(format!("{id}tags {:?} != {:?}", inner.tags(), sent.tags));
    }
    let keys = sent.keys.join(" ");
    if inner.property("KEYS") != Some(keys.as_str()) {
        problems.push(format!("{id}keys {:?} != {keys:?}", inner.property("KEYS")));
    }
    for (name, value) in &sent.props {
        if inner.property(name) != Some(value.as_str()) {
            problems.push(format!(
                "{id}property {name}={:?} != {value:?}",
                inner.property(name)
            ));
        }
    }
    if message.msg_id().is_empty()
        || message.queue_offset() < 0
        || message.store_timestamp() <= 0
        || message.born_timestamp() <= 0
    {
        problems.push(format!(
            "{id}bad system fields msgId={} queueOffset={} storeTimestamp={}",
            message.msg_id(),
            message.queue_offset(),
            message.store_timestamp()
        ));
    }
}
