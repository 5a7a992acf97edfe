//! `extFields`: the string-to-string map that carries every typed header on the wire.
//!
//! Headers hold a dozen entries at most, so the map is a vector with linear lookup: it keeps
//! insertion order (useful for golden bytes and logs), and a repeated key replaces the earlier
//! value in place, as Java's `HashMap.put` does on decode (reference 1.4).
//!
//! Layout: every key and value lives back to back in one `String`, and each entry is three
//! offsets into it (key start, key end = value start, value end). A decoded header of 15
//! fields is then two allocations instead of 31 (the broker decodes one per request, and
//! allocation was a tenth of its CPU).
//!
//! Values are parsed with Java's rules (reference 1.7): `Integer.parseInt` and `Long.parseLong`
//! accept an optional sign and decimal digits only; `Boolean.parseBoolean` is true only for a
//! case-insensitive `true` (trap T22).

use std::fmt::{self, Write as _};
use std::ops::Range;

use crate::error::HeaderError;

/// The ext-field map of one command.
#[derive(Clone, Default)]
pub struct ExtFields {
    /// Keys and values, back to back.
    text: String,
    /// Per entry, in insertion order: key start, key end (its value's start), value end.
    spans: Vec<(usize, usize, usize)>,
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
            text: String::with_capacity(capacity * BYTES_PER_ENTRY_GUESS),
            spans: Vec::with_capacity(capacity),
        }
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// True when there are no entries.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// The value under `key`, if any.
    pub fn get(&self, key: &str) -> Option<&str> {
        let index = self.position(key)?;
        let (_, key_end, value_end) = self.spans[index];
        Some(&self.text[key_end..value_end])
    }

    /// Sets `key` to `value`, replacing an earlier value (last one wins).
    pub fn insert(&mut self, key: impl AsRef<str>, value: impl AsRef<str>) {
        let (key, value) = (key.as_ref(), value.as_ref());
        match self.position(key) {
            Some(index) => self.replace_value(index, value),
            None => {
                let key_start = self.text.len();
                self.text.push_str(key);
                let key_end = self.text.len();
                self.text.push_str(value);
                self.spans.push((key_start, key_end, self.text.len()));
            }
        }
    }

    /// Sets `key` when `value` is `Some`; Java omits null fields.
    pub fn insert_opt<V: fmt::Display>(&mut self, key: &str, value: Option<V>) {
        if let Some(value) = value {
            self.insert_rendered(key, |text| {
                write!(text, "{value}").expect("writing to a String cannot fail");
            });
        }
    }

    /// Sets `key` to the text `render` appends to the string it is given (no allocation of
    /// its own for a new key).
    pub fn insert_rendered(&mut self, key: &str, render: impl FnOnce(&mut String)) {
        if let Some(index) = self.position(key) {
            let mut value = String::new();
            render(&mut value);
            self.replace_value(index, &value);
            return;
        }
        let key_start = self.text.len();
        self.text.push_str(key);
        let key_end = self.text.len();
        render(&mut self.text);
        self.spans.push((key_start, key_end, self.text.len()));
    }

    /// Removes `key`, returning its value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let index = self.position(key)?;
        let (key_start, key_end, value_end) = self.spans.remove(index);
        let value = self.text[key_end..value_end].to_owned();
        self.cut(key_start..value_end, index, 0);
        Some(value)
    }

    /// Entries in insertion order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans.iter().map(|&(key_start, key_end, value_end)| {
            (
                &self.text[key_start..key_end],
                &self.text[key_end..value_end],
            )
        })
    }

    fn position(&self, key: &str) -> Option<usize> {
        self.spans
            .iter()
            .position(|&(key_start, key_end, _)| &self.text[key_start..key_end] == key)
    }

    /// Puts `value` in place of entry `index`'s value, moving the entries after it.
    fn replace_value(&mut self, index: usize, value: &str) {
        let (_, key_end, value_end) = self.spans[index];
        self.spans[index].2 = key_end + value.len();
        self.cut(key_end..value_end, index + 1, value.len());
        self.text.insert_str(key_end, value);
    }

    /// Removes `range` from the text, with `inserted` bytes about to go at its start, and
    /// moves the spans from `first_moved` on accordingly.
    fn cut(&mut self, range: Range<usize>, first_moved: usize, inserted: usize) {
        let removed = range.len();
        self.text.replace_range(range, "");
        for span in &mut self.spans[first_moved..] {
            span.0 = span.0 - removed + inserted;
            span.1 = span.1 - removed + inserted;
            span.2 = span.2 - removed + inserted;
        }
    }

    /// The text to append a decoded entry to (see [`ExtFields::commit_appended`]).
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    /// Makes the key `[key_start, key_end)` and the value after it, both just appended to the
    /// text, an entry; an earlier entry with the same key gets the value instead (last wins).
    pub(crate) fn commit_appended(&mut self, key_start: usize, key_end: usize) {
        let value_end = self.text.len();
        assert!(key_start <= key_end && key_end <= value_end);
        let key = &self.text[key_start..key_end];
        match self.position(key) {
            Some(index) => {
                let value = self.text[key_end..value_end].to_owned();
                self.text.truncate(key_start);
                self.replace_value(index, &value);
            }
            None => self.spans.push((key_start, key_end, value_end)),
        }
    }

    /// Drops text appended past `len` (a decoded key whose value was null).
    pub(crate) fn truncate_text(&mut self, len: usize) {
        assert!(self.spans.last().is_none_or(|span| span.2 <= len));
        self.text.truncate(len);
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

/// Equal when they hold the same entries in the same order, however their text was built.
impl PartialEq for ExtFields {
    fn eq(&self, other: &ExtFields) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
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

    // Proves replacing and removing keep every other entry intact and in order (their text
    // moves), and that equality compares entries, not how the text was built.
    #[test]
    fn replace_and_remove_move_the_rest() {
        let mut ext = ExtFields::with_capacity(4);
        ext.insert("a", "1");
        ext.insert("bb", "22");
        ext.insert_opt("ccc", Some(333));
        ext.insert_opt::<i32>("none", None);
        ext.insert("bb", "a much longer value");
        ext.insert("a", "");
        let entries: Vec<(&str, &str)> = ext.iter().collect();
        assert_eq!(
            entries,
            vec![("a", ""), ("bb", "a much longer value"), ("ccc", "333")]
        );
        assert_eq!(ext.remove("bb").as_deref(), Some("a much longer value"));
        assert_eq!(ext.get("ccc"), Some("333"));
        ext.insert_opt("ccc", Some("x"));
        let rebuilt: ExtFields = [("a", ""), ("ccc", "x")].into_iter().collect();
        assert_eq!(ext, rebuilt);
        assert_ne!(ext, ExtFields::new());
        assert_eq!(format!("{rebuilt:?}"), r#"{"a": "", "ccc": "x"}"#);
    }
}
