//! The checker, in the spirit of openmessaging-chaos and Redpanda's consistency checks: what
//! the producers were told (SEND_OK at a queue and offset, or a failure) against what the
//! final master serves from offset 0 of every queue.
//!
//! A round passes when: every SEND_OK message is served at its acknowledged queue and offset
//! (nothing lost, nothing overwritten); no two SEND_OKs name one queue and offset (no offset
//! was handed out twice); each sharding key's messages sit in one queue in their numbering
//! order; a message is served more than once only if a send of it failed and was retried;
//! and nothing is served that was never sent.

use std::collections::{BTreeMap, HashMap, HashSet};

use crate::workload::{body_of, parse_body, History};

/// One message as the final master serves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Served {
    /// Its queue.
    pub queue: i32,
    /// Its queue offset.
    pub offset: i64,
    /// Its body.
    pub body: Vec<u8>,
}

/// A round's figures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// SEND_OK answers.
    pub acked: usize,
    /// Failed attempts (each retried, or abandoned when the workload stopped).
    pub failed_attempts: usize,
    /// Messages served by the final master.
    pub served: usize,
    /// Extra copies served of retried sends (allowed).
    pub duplicates: usize,
    /// Acknowledged messages not served, or served with another body at their position.
    pub lost: usize,
    /// Queue positions acknowledged for two different messages.
    pub reused_offsets: usize,
    /// Every broken rule, with its evidence; empty when the round passed.
    pub violations: Vec<String>,
}

/// Checks `history` against `served` (every queue's messages from offset 0).
pub fn check(history: &History, served: &[Served]) -> Summary {
    let mut violations = Vec::new();
    let by_position: HashMap<(i32, i64), &Served> = served
        .iter()
        .map(|message| ((message.queue, message.offset), message))
        .collect();
    // Lost or overwritten, and offsets handed out twice.
    let mut acked_at: HashMap<(i32, i64), (&str, u64)> = HashMap::new();
    let (mut lost, mut reused_offsets) = (0, 0);
    for ack in &history.acked {
        let position = (ack.queue, ack.offset);
        if let Some((key, seq)) = acked_at.insert(position, (&ack.key, ack.seq)) {
            reused_offsets += 1;
            violations.push(format!(
                "offset reused: queue {} offset {} acknowledged for {key} {seq} and for {} {}",
                ack.queue, ack.offset, ack.key, ack.seq
            ));
        }
        let expected = body_of(&ack.key, ack.seq);
        match by_position.get(&position) {
            None => {
                lost += 1;
                violations.push(format!(
                    "lost: {expected} acknowledged at queue {} offset {}, not served",
                    ack.queue, ack.offset
                ));
            }
            Some(message) if message.body != expected.as_bytes() => {
                lost += 1;
                violations.push(format!(
                    "overwritten: {expected} acknowledged at queue {} offset {}, served {:?}",
                    ack.queue,
                    ack.offset,
                    String::from_utf8_lossy(&message.body)
                ));
            }
            Some(_) => {}
        }
    }
    // Each key's acknowledged numbers must have increasing offsets in one queue.
    let mut acked_by_key: BTreeMap<&str, Vec<(u64, i32, i64)>> = BTreeMap::new();
    for ack in &history.acked {
        acked_by_key
            .entry(&ack.key)
            .or_default()
            .push((ack.seq, ack.queue, ack.offset));
    }
    for (key, acks) in &mut acked_by_key {
        acks.sort_unstable();
        for pair in acks.windows(2) {
            let ((seq_a, queue_a, offset_a), (seq_b, queue_b, offset_b)) = (pair[0], pair[1]);
            if queue_a != queue_b || offset_b <= offset_a {
                violations.push(format!(
                    "order: {key} {seq_a} acknowledged at queue {queue_a} offset {offset_a}, \
                     {key} {seq_b} at queue {queue_b} offset {offset_b}"
                ));
            }
        }
    }
    // What is served: only what was sent, each key in order, copies only of retried sends.
    let retried: HashSet<(&str, u64)> = history
        .failed
        .iter()
        .map(|failure| (failure.key.as_str(), failure.seq))
        .collect();
    let acked: HashSet<(&str, u64)> = history
        .acked
        .iter()
        .map(|ack| (ack.key.as_str(), ack.seq))
        .collect();
    let mut sorted: Vec<&Served> = served.iter().collect();
    sorted.sort_unstable_by_key(|message| (message.queue, message.offset));
    let mut copies: HashMap<(String, u64), usize> = HashMap::new();
    let mut last_by_key: HashMap<String, (u64, i32, i64)> = HashMap::new();
    let mut duplicates = 0;
    for message in sorted {
        let Some((key, seq)) = parse_body(&message.body) else {
            violations.push(format!(
                "foreign message at queue {} offset {}: {:?}",
                message.queue,
                message.offset,
                String::from_utf8_lossy(&message.body)
            ));
            continue;
        };
        let id = (key.as_str(), seq);
        if !acked.contains(&id) && !retried.contains(&id) {
            violations.push(format!(
                "never sent: {key} {seq} served at queue {} offset {}",
                message.queue, message.offset
            ));
        }
        let count = copies.entry((key.clone(), seq)).or_default();
        *count += 1;
        if *count > 1 {
            duplicates += 1;
            if !retried.contains(&id) {
                violations.push(format!(
                    "duplicate of a send never retried: {key} {seq} again at queue {} \
                     offset {}",
                    message.queue, message.offset
                ));
            }
        }
        let here = (seq, message.queue, message.offset);
        if let Some((last_seq, last_queue, last_offset)) = last_by_key.insert(key.clone(), here) {
            if last_queue != message.queue || seq < last_seq {
                violations.push(format!(
                    "served order: {key} {last_seq} at queue {last_queue} offset \
                     {last_offset}, then {key} {seq} at queue {} offset {}",
                    message.queue, message.offset
                ));
            }
        }
    }
    Summary {
        acked: history.acked.len(),
        failed_attempts: history.failed.len(),
        served: served.len(),
        duplicates,
        lost,
        reused_offsets,
        violations,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workload::{Acked, Failed};

    fn ack(key: &str, seq: u64, queue: i32, offset: i64) -> Acked {
        Acked {
            key: key.into(),
            seq,
            queue,
            offset,
        }
    }

    fn served(queue: i32, offset: i64, key: &str, seq: u64) -> Served {
        Served {
            queue,
            offset,
            body: body_of(key, seq).into_bytes(),
        }
    }

    fn failed(key: &str, seq: u64) -> Failed {
        Failed {
            key: key.into(),
            seq,
            reason: "timeout".into(),
        }
    }

    fn history(acked: Vec<Acked>, failed: Vec<Failed>) -> History {
        History { acked, failed }
    }

    #[test]
    fn a_clean_round_passes_and_a_retried_copy_is_allowed() {
        let history = history(
            vec![ack("a", 0, 1, 0), ack("a", 1, 1, 2), ack("b", 0, 2, 0)],
            vec![failed("a", 1)],
        );
        let on_master = [
            served(1, 0, "a", 0),
            served(1, 1, "a", 1),
            served(1, 2, "a", 1),
            served(2, 0, "b", 0),
        ];
        let summary = check(&history, &on_master);
        assert_eq!(summary.violations, Vec::<String>::new());
        assert_eq!(
            (summary.acked, summary.served, summary.duplicates),
            (3, 4, 1)
        );
    }

    #[test]
    fn a_lost_an_overwritten_and_a_reused_offset_are_reported() {
        let history = history(
            vec![ack("a", 0, 1, 0), ack("a", 1, 1, 1), ack("b", 0, 1, 1)],
            vec![],
        );
        let summary = check(&history, &[served(1, 1, "a", 1)]);
        let text = summary.violations.join("\n");
        assert!(text.contains("lost: a 0"), "{text}");
        assert!(text.contains("overwritten: b 0"), "{text}");
        assert!(text.contains("offset reused: queue 1 offset 1"), "{text}");
        assert_eq!((summary.lost, summary.reused_offsets), (2, 1));
    }

    #[test]
    fn reordering_and_unretried_copies_are_reported() {
        let history = history(vec![ack("a", 0, 0, 1), ack("a", 1, 0, 0)], vec![]);
        let on_master = [
            served(0, 0, "a", 1),
            served(0, 1, "a", 0),
            served(0, 2, "a", 0),
        ];
        let text = check(&history, &on_master).violations.join("\n");
        assert!(text.contains("order: a 0 acknowledged"), "{text}");
        assert!(text.contains("served order: a 1"), "{text}");
        assert!(
            text.contains("duplicate of a send never retried: a 0"),
            "{text}"
        );
    }

    #[test]
    fn a_message_never_sent_is_reported() {
        let text = check(&History::default(), &[served(3, 0, "z", 9)])
            .violations
            .join("\n");
        assert!(text.contains("never sent: z 9"), "{text}");
    }
}
