//! Topic attributes (5.x): the `attributes` of UPDATE_AND_CREATE_TOPIC, a modification such
//! as `+message.type=FIFO,-reserve.time`, applied to a topic's attributes as Java's
//! `AttributeParser` and `AttributeUtil.alterCurrentAttributes` apply it, with Java's
//! supported keys (`TopicAttributes`) and error texts.
//!
//! The broker keeps them and answers them (GET_TOPIC_CONFIG, GET_ALL_TOPIC_CONFIG), which is
//! what 5.x's proxy reads a topic's message type from. Values Comet has no behaviour for
//! are refused rather than kept as if they worked: `queue.type=BatchCQ`,
//! `cleanup.policy=COMPACTION` and a `reserve.time` other than -1 (the broker-wide
//! retention applies).

use std::collections::BTreeMap;

use thiserror::Error;

/// Why a modification was refused (Java's texts, and Comet's for what it does not build).
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum AttributeError {
    /// `key=value` without the `+` sign.
    #[error("add/alter attribute format is wrong: {0}")]
    AddFormat(String),
    /// A bare key without the `-` sign.
    #[error("delete attribute format is wrong: {0}")]
    DeleteFormat(String),
    /// The same signed key twice.
    #[error("key duplication: {0}")]
    Duplicate(String),
    /// An empty key, or one holding a sign.
    #[error("kv string format wrong.")]
    KeyFormat,
    /// The same key twice with different signs.
    #[error("alter duplication key. key: {0}")]
    AlterDuplicate(String),
    /// A `-key` when creating a topic.
    #[error("only add attribute is supported while creating topic. key: {0}")]
    OnlyAddOnCreate(String),
    /// A `-key` the topic does not have.
    #[error("attempt to delete a nonexistent key: {0}")]
    DeleteMissing(String),
    /// A key that is none of the supported ones.
    #[error("unsupported key: {0}")]
    Unsupported(String),
    /// A change of a key that can only be set at creation.
    #[error("attempt to update an unchangeable attribute. key: {0}")]
    Unchangeable(String),
    /// A value outside an enumerated attribute's set.
    #[error("value is not in set: [{0}]")]
    NotInSet(String),
    /// A value outside a numeric attribute's range, or not a number.
    #[error("value is not in range({min}, {max})")]
    NotInRange {
        /// Smallest value.
        min: i64,
        /// Largest value.
        max: i64,
    },
    /// A value Java accepts but Comet has no behaviour for.
    #[error("{key}={value} is not supported by this broker")]
    NotBuilt {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
}

/// What values a supported key takes.
enum Values {
    /// One of these.
    OneOf(&'static [&'static str]),
    /// An integer within the range.
    Range(i64, i64),
}

/// A supported attribute (Java's `TopicAttributes.ALL`).
struct Attribute {
    name: &'static str,
    changeable: bool,
    values: Values,
    /// The values Comet implements (all of them when `None`).
    built: Option<&'static [&'static str]>,
}

const ALL: &[Attribute] = &[
    Attribute {
        name: "queue.type",
        changeable: false,
        values: Values::OneOf(&["BatchCQ", "SimpleCQ"]),
        built: Some(&["SimpleCQ"]),
    },
    Attribute {
        name: "cleanup.policy",
        changeable: false,
        values: Values::OneOf(&["DELETE", "COMPACTION"]),
        built: Some(&["DELETE"]),
    },
    Attribute {
        name: "message.type",
        changeable: true,
        values: Values::OneOf(&[
            "UNSPECIFIED",
            "NORMAL",
            "FIFO",
            "DELAY",
            "TRANSACTION",
            "MIXED",
        ]),
        built: None,
    },
    Attribute {
        name: "reserve.time",
        changeable: true,
        values: Values::Range(-1, i64::MAX),
        built: Some(&["-1"]),
    },
];

/// One entry of a modification.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Change {
    signed_key: String,
    value: String,
}

/// Reads a modification (`+k1=v1,+k2=v2,-k3`; Java's `AttributeParser.parseToMap`).
fn parse(modification: &str) -> Result<Vec<Change>, AttributeError> {
    let mut changes: Vec<Change> = Vec::new();
    if modification.is_empty() {
        return Ok(changes);
    }
    for entry in modification.split(',') {
        let change = match entry.split_once('=') {
            Some((key, value)) => {
                if !key.contains('+') {
                    return Err(AttributeError::AddFormat(key.to_owned()));
                }
                // Java keeps what lies between the first and a second `=`.
                let value = value.split('=').next().unwrap_or_default();
                Change {
                    signed_key: key.to_owned(),
                    value: value.to_owned(),
                }
            }
            None => {
                if !entry.contains('-') {
                    return Err(AttributeError::DeleteFormat(entry.to_owned()));
                }
                Change {
                    signed_key: entry.to_owned(),
                    value: String::new(),
                }
            }
        };
        if changes.iter().any(|c| c.signed_key == change.signed_key) {
            return Err(AttributeError::Duplicate(change.signed_key));
        }
        changes.push(change);
    }
    Ok(changes)
}

/// The attributes of a topic after `modification`: `current` for an existing topic, `None`
/// when the modification creates it (only additions then).
pub fn alter(
    current: Option<&BTreeMap<String, String>>,
    modification: &str,
) -> Result<BTreeMap<String, String>, AttributeError> {
    let empty = BTreeMap::new();
    let current_attributes = current.unwrap_or(&empty);
    let mut result = current_attributes.clone();
    let mut seen: Vec<String> = Vec::new();
    for change in parse(modification)? {
        let mut chars = change.signed_key.chars();
        let sign = chars.next();
        let key: String = chars.collect();
        if key.is_empty() || key.contains('+') || key.contains('-') {
            return Err(AttributeError::KeyFormat);
        }
        if seen.contains(&key) {
            return Err(AttributeError::AlterDuplicate(key));
        }
        seen.push(key.clone());
        let attribute = || {
            ALL.iter()
                .find(|attribute| attribute.name == key)
                .ok_or_else(|| AttributeError::Unsupported(key.clone()))
        };
        match (sign, current) {
            (Some('+'), None) => {
                verify(attribute()?, &change.value)?;
                result.insert(key, change.value);
            }
            (_, None) => return Err(AttributeError::OnlyAddOnCreate(key)),
            (Some('+'), Some(_)) => {
                let attribute = attribute()?;
                if !attribute.changeable {
                    return Err(AttributeError::Unchangeable(key));
                }
                verify(attribute, &change.value)?;
                result.insert(key, change.value);
            }
            (Some('-'), Some(existing)) => {
                if !existing.contains_key(&key) {
                    return Err(AttributeError::DeleteMissing(key));
                }
                if !attribute()?.changeable {
                    return Err(AttributeError::Unchangeable(key));
                }
                result.remove(&key);
            }
            (_, Some(_)) => return Err(AttributeError::KeyFormat),
        }
    }
    Ok(result)
}

fn verify(attribute: &Attribute, value: &str) -> Result<(), AttributeError> {
    match attribute.values {
        Values::OneOf(set) => {
            if !set.contains(&value) {
                return Err(AttributeError::NotInSet(set.join(", ")));
            }
        }
        Values::Range(min, max) => {
            let inside = value
                .parse::<i64>()
                .is_ok_and(|number| (min..=max).contains(&number));
            if !inside {
                return Err(AttributeError::NotInRange { min, max });
            }
        }
    }
    if attribute.built.is_some_and(|built| !built.contains(&value)) {
        return Err(AttributeError::NotBuilt {
            key: attribute.name.to_owned(),
            value: value.to_owned(),
        });
    }
    Ok(())
}

/// The message type a modification sets, if any (the broker refuses MIXED, as Java does
/// without `enableMixedMessageType`).
pub fn message_type_set(modification: &str) -> Option<String> {
    parse(modification)
        .ok()?
        .into_iter()
        .find_map(|change| (change.signed_key == "+message.type").then_some(change.value))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    // Proves a creation takes additions only, an update adds, changes and deletes, and the
    // stored keys carry no sign.
    #[test]
    fn create_then_alter() {
        let created = alter(None, "+message.type=FIFO").unwrap();
        assert_eq!(created, map(&[("message.type", "FIFO")]));
        assert_eq!(
            alter(None, "-message.type"),
            Err(AttributeError::OnlyAddOnCreate("message.type".into()))
        );
        let changed = alter(Some(&created), "+message.type=DELAY,+reserve.time=-1").unwrap();
        assert_eq!(
            changed,
            map(&[("message.type", "DELAY"), ("reserve.time", "-1")])
        );
        let deleted = alter(Some(&changed), "-reserve.time").unwrap();
        assert_eq!(deleted, map(&[("message.type", "DELAY")]));
        assert_eq!(alter(Some(&deleted), "").unwrap(), deleted);
        assert_eq!(alter(None, "").unwrap(), BTreeMap::new());
    }

    // Proves Java's refusals, with its texts, and Comet's for values it does not build.
    #[test]
    fn refusals() {
        let fifo = map(&[("message.type", "FIFO")]);
        type Case<'a> = (Option<&'a BTreeMap<String, String>>, &'a str, &'a str);
        let cases: &[Case<'_>] = &[
            (
                None,
                "message.type=FIFO",
                "add/alter attribute format is wrong: message.type",
            ),
            (
                None,
                "message.type",
                "delete attribute format is wrong: message.type",
            ),
            (None, "+a=1,+a=2", "key duplication: +a"),
            (
                Some(&fifo),
                "+message.type=FIFO,-message.type",
                "alter duplication key. key: message.type",
            ),
            (None, "+=1", "kv string format wrong."),
            (None, "+colour=red", "unsupported key: colour"),
            (
                None,
                "+message.type=fifo",
                "value is not in set: [UNSPECIFIED, NORMAL, FIFO, DELAY, TRANSACTION, MIXED]",
            ),
            (
                None,
                "+reserve.time=-2",
                "value is not in range(-1, 9223372036854775807)",
            ),
            (
                None,
                "+reserve.time=x",
                "value is not in range(-1, 9223372036854775807)",
            ),
            (
                Some(&fifo),
                "+queue.type=SimpleCQ",
                "attempt to update an unchangeable attribute. key: queue.type",
            ),
            (
                Some(&fifo),
                "-reserve.time",
                "attempt to delete a nonexistent key: reserve.time",
            ),
            (
                None,
                "+queue.type=BatchCQ",
                "queue.type=BatchCQ is not supported by this broker",
            ),
            (
                None,
                "+cleanup.policy=COMPACTION",
                "cleanup.policy=COMPACTION is not supported by this broker",
            ),
            (
                None,
                "+reserve.time=72",
                "reserve.time=72 is not supported by this broker",
            ),
        ];
        for (current, modification, text) in cases {
            let refused = alter(*current, modification).unwrap_err();
            assert_eq!(refused.to_string(), *text, "{modification}");
        }
        assert_eq!(
            message_type_set("+message.type=MIXED"),
            Some("MIXED".into())
        );
        assert_eq!(message_type_set("+queue.type=SimpleCQ"), None);
    }
}
