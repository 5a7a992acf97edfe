//! `extFields`: the string-to-string map that carries every typed header on the wire.
//!
//! Headers hold a dozen entries at most, so the map is a vector with linear lookup: it keeps
//! insertion order (useful for golden bytes and logs), and a repeated key replaces the earlier
//! value in place, as Java's `HashMap.put` does on decode
//! (docs/protocol.md#rocketmq-binary-header).
//!
//! Storage: every key and value back to back in one `String` (`pairs`). A decoded header of
//! 15 fields is two allocations instead of 31 (the broker decodes one per request, and
//! allocation was a tenth of its CPU).
//!
//! Values are parsed with Java's rules (docs/protocol.md#typed-headers-and-ext-fields):
//! `Integer.parseInt` and `Long.parseLong` accept an optional sign and decimal digits only;
//! `Boolean.parseBoolean` is true only for a case-insensitive `true`
//! (docs/protocol.md#java-boolean-parsing).

use std::fmt;

use crate::error::HeaderError;
use crate::pairs::{push_display, TextPairs};

/// The ext-field map of one command.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct ExtFields {
    pairs: TextPairs,
}

/// Bytes reserved per expected entry (short keys, values of a few dozen bytes).
const BYTES_PER_ENTRY_GUESS: usize = 24;

impl ExtFields {
    /// An empty map.
    pub fn new() -> ExtFields {
        ExtFields::default()
    }

    /// An empty map with room for `capacity` entries.
    pub fn with_capacity(capacity: usize) -> ExtFields {
        ExtFields {
            pairs: TextPairs::with_capacity(capacity, capacity * BYTES_PER_ENTRY_GUESS),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.pairs.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs.get(key)
    }

    /// Sets `key` to `value`, replacing an earlier value (last one wins).
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        self.pairs.insert(key.as_ref(), value.as_ref());
    }

    /// Sets `key` when `value` is `Some`; Java omits null fields.
    pub fn insert_opt<V: fmt::Display>(&mut self, key: &str, value: Option<V>) {
        if let Some(value) = value {
            self.insert_rendered(key, |text| push_display(text, value));
        }
    }

    /// Sets `key` to the text `render` appends to the string it is given (no allocation of
    /// its own for a new key).
    pub fn insert_rendered(&mut self, key: &str, render: impl FnOnce(&mut String)) {
        self.pairs.insert_rendered(key, render);
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        self.pairs.remove(key)
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.pairs.iter()
    }

    /// The storage, for the JSON decoder to append entries to (see `header`).
    pub(crate) fn pairs_mut(&mut self) -> &mut TextPairs {
        &mut self.pairs
    }

    /// A required string field.
    pub fn required_str(&self, field: &'static str) -> Result<&str, HeaderError> {
        self.get(field).ok_or(HeaderError::Missing { field })
    }

    /// A required string field, owned.
    pub fn required_string(&self, field: &'static str) -> Result<String, HeaderError> {
        self.required_str(field).map(str::to_owned)
    }

    /// An optional string field, owned.
    pub fn optional_string(&self, field: &str) -> Option<String> {
        self.get(field).map(str::to_owned)
    }

    /// A required Java `Integer` field.
    pub fn required_i32(&self, field: &'static str) -> Result<i32, HeaderError> {
        parse_i32(field, self.required_str(field)?)
    }

    /// An optional Java `Integer` field; a value that does not parse is an error.
    pub fn optional_i32(&self, field: &'static str) -> Result<Option<i32>, HeaderError> {
        self.get(field)
            .map(|value| parse_i32(field, value))
            .transpose()
    }

    /// A required Java `Long` field.
    pub fn required_i64(&self, field: &'static str) -> Result<i64, HeaderError> {
        parse_i64(field, self.required_str(field)?)
    }

    /// An optional Java `Long` field; a value that does not parse is an error.
    pub fn optional_i64(&self, field: &'static str) -> Result<Option<i64>, HeaderError> {
        self.get(field)
            .map(|value| parse_i64(field, value))
            .transpose()
    }

    /// A required Java `Boolean` field (only a case-insensitive `true` is true).
    pub fn required_bool(&self, field: &'static str) -> Result<bool, HeaderError> {
        self.required_str(field).map(parse_bool)
    }

    /// An optional Java `Boolean` field.
    pub fn optional_bool(&self, field: &str) -> Option<bool> {
        self.get(field).map(parse_bool)
    }
}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.pairs.fmt(f)
    }
}

impl<K: AsRef<str>, V: AsRef<str>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> ExtFields {
        let mut fields = ExtFields::new();
        for (key, value) in iter {
            fields.insert(key, value);
        }
        fields
    }
}

/// Java `Integer.parseInt`: optional sign, then decimal digits, nothing else.
pub fn parse_i32(field: &'static str, value: &str) -> Result<i32, HeaderError> {
    if !is_java_integer(value) {
        return Err(invalid(field, value, "a 32-bit integer"));
    }
    value
        .parse::<i32>()
        .map_err(|_| invalid(field, value, "a 32-bit integer"))
}

/// Java `Long.parseLong`: optional sign, then decimal digits, nothing else.
pub fn parse_i64(field: &'static str, value: &str) -> Result<i64, HeaderError> {
    if !is_java_integer(value) {
        return Err(invalid(field, value, "a 64-bit integer"));
    }
    value
        .parse::<i64>()
        .map_err(|_| invalid(field, value, "a 64-bit integer"))
}

/// Java `Boolean.parseBoolean`.
pub fn parse_bool(value: &str) -> bool {
    value.eq_ignore_ascii_case("true")
}

fn is_java_integer(value: &str) -> bool {
    let digits = value.strip_prefix(['-', '+']).unwrap_or(value);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

fn invalid(field: &'static str, value: &str, expected: &'static str) -> HeaderError {
    HeaderError::Invalid {
        field,
        value: value.to_owned(),
        expected,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves Java's parsing rules: signs allowed, spaces and decimals refused, any case of
    // "true" is true and everything else false.
    #[test]
    fn java_parsing_rules() {
        assert_eq!(parse_i32("f", "-12"), Ok(-12));
        assert_eq!(parse_i32("f", "+7"), Ok(7));
        assert!(parse_i32("f", " 7").is_err());
        assert!(parse_i32("f", "1.5").is_err());
        assert!(parse_i32("f", "").is_err());
        assert!(parse_i32("f", "2147483648").is_err());
        assert_eq!(parse_i64("f", "1795960828956"), Ok(1_795_960_828_956));
        assert!(parse_bool("TRUE"));
        assert!(!parse_bool("1"));
        assert!(!parse_bool("yes"));
    }

    // Proves last-wins on repeated keys and the typed errors that name the field.
    #[test]
    fn map_semantics_and_errors() {
        let mut ext = ExtFields::new();
        ext.insert("topic", "a");
        ext.insert("topic", "b");
        assert_eq!(ext.len(), 1);
        assert_eq!(ext.get("topic"), Some("b"));
        assert_eq!(
            ext.required_i32("queueId"),
            Err(HeaderError::Missing { field: "queueId" })
        );
        ext.insert("queueId", "x");
        assert!(matches!(
            ext.required_i32("queueId"),
            Err(HeaderError::Invalid {
                field: "queueId",
                ..
            })
        ));
        assert_eq!(ext.optional_i64("absent"), Ok(None));
        assert_eq!(ext.remove("topic").as_deref(), Some("b"));
        assert!(ext.get("topic").is_none());
    }

    // Proves the map's own additions over its storage: null options are left out, a
    // rendered value replaces in place, and collecting keeps the last value of a repeat.
    #[test]
    fn options_and_rendering() {
        let mut ext = ExtFields::with_capacity(4);
        ext.insert_opt("n", Some(5));
        ext.insert_opt::<i32>("none", None);
        ext.insert("s", "x");
        ext.insert_opt("n", Some("five"));
        let collected: ExtFields = [("n", "five"), ("s", "y"), ("s", "x")]
            .into_iter()
            .collect();
        assert_eq!(ext, collected);
        assert_eq!(format!("{ext:?}"), r#"{"n": "five", "s": "x"}"#);
    }
}
