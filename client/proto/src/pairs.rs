//! String pairs kept back to back in one `String`: the storage of [`ExtFields`] and
//! [`Properties`], the two small string maps every request and message carries.
//!
//! Each entry is three offsets into the text (key start, key end = value start, value end),
//! in insertion order; lookup is linear (a dozen entries at most). A map of N entries costs
//! two allocations instead of 2N + 1, and a repeated key replaces the earlier value in place
//! (the text after it moves).
//!
//! [`ExtFields`]: crate::ext::ExtFields
//! [`Properties`]: crate::properties::Properties

use std::fmt::{self, Write as _};
use std::ops::Range;

/// Appends `value` as `Display` renders it (how numbers and booleans become header and
/// property text).
pub(crate) fn push_display(text: &mut String, value: impl fmt::Display) {
    write!(text, "{value}").expect("writing to a String cannot fail");
}

/// See the module docs.
#[derive(Clone, Default)]
pub(crate) struct TextPairs {
    /// Keys and values, back to back.
    text: String,
    /// Per entry, in insertion order: key start, key end (its value's start), value end.
    spans: Vec<(usize, usize, usize)>,
}

impl TextPairs {
    /// Room for `entries` entries of `text_bytes` bytes in all.
    pub(crate) fn with_capacity(entries: usize, text_bytes: usize) -> TextPairs {
        TextPairs {
            text: String::with_capacity(text_bytes),
            spans: Vec::with_capacity(entries),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.spans.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }

    /// Bytes of all keys and values.
    pub(crate) fn text_len(&self) -> usize {
        self.text.len()
    }

    pub(crate) fn get(&self, key: &str) -> Option<&str> {
        let index = self.position(key)?;
        let (_, key_end, value_end) = self.spans[index];
        Some(&self.text[key_end..value_end])
    }

    /// Sets `key` to `value`, replacing an earlier value in place.
    pub(crate) fn insert(&mut self, key: &str, value: &str) {
        self.insert_rendered(key, |text| text.push_str(value));
    }

    /// Sets `key` to the text `render` appends to the string it is given.
    pub(crate) fn insert_rendered(&mut self, key: &str, render: impl FnOnce(&mut String)) {
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

    pub(crate) fn remove(&mut self, key: &str) -> Option<String> {
        let index = self.position(key)?;
        let (key_start, key_end, value_end) = self.spans.remove(index);
        let value = self.text[key_end..value_end].to_owned();
        self.cut(key_start..value_end, index, 0);
        Some(value)
    }

    /// Entries in insertion order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.spans.iter().map(|&(key_start, key_end, value_end)| {
            (
                &self.text[key_start..key_end],
                &self.text[key_end..value_end],
            )
        })
    }

    /// Every lookup, insert and decoded entry scans the keys (a send's header and properties
    /// cost a few hundred key comparisons), so the scan compares bytes without re-checking
    /// char boundaries (spans always sit on them), and lengths and first bytes before calling
    /// memcmp (most keys are one to a dozen bytes and differ in their first byte).
    fn position(&self, key: &str) -> Option<usize> {
        let text = self.text.as_bytes();
        let key = key.as_bytes();
        self.spans.iter().position(|&(key_start, key_end, _)| {
            let candidate = &text[key_start..key_end];
            candidate.len() == key.len() && candidate.first() == key.first() && candidate == key
        })
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

    /// The text to append a decoded entry to (see [`TextPairs::commit_appended`]).
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    /// Makes the key `[key_start, key_end)` and the value after it, both just appended to the
    /// text, an entry; an earlier entry with the same key gets the value instead (last wins).
    pub(crate) fn commit_appended(&mut self, key_start: usize, key_end: usize) {
        let value_end = self.text.len();
        assert!(key_start <= key_end && key_end <= value_end);
        assert!(self.spans.last().is_none_or(|span| span.2 <= key_start));
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
}

/// Equal when they hold the same entries in the same order, however their text was built.
impl PartialEq for TextPairs {
    fn eq(&self, other: &TextPairs) -> bool {
        self.len() == other.len() && self.iter().eq(other.iter())
    }
}

impl Eq for TextPairs {}

impl fmt::Debug for TextPairs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves replacing and removing keep every other entry intact and in order (their text
    // moves), that a decoded repeat goes to the first place, and that equality compares
    // entries, not how the text was built.
    #[test]
    fn replace_and_remove_move_the_rest() {
        let mut pairs = TextPairs::with_capacity(4, 64);
        pairs.insert("a", "1");
        pairs.insert("bb", "22");
        pairs.insert_rendered("ccc", |text| text.push_str("333"));
        pairs.insert("bb", "a much longer value");
        pairs.insert("a", "");
        let entries: Vec<(&str, &str)> = pairs.iter().collect();
        assert_eq!(
            entries,
            vec![("a", ""), ("bb", "a much longer value"), ("ccc", "333")]
        );
        assert_eq!(pairs.remove("bb").as_deref(), Some("a much longer value"));
        assert_eq!(pairs.get("ccc"), Some("333"));
        let start = pairs.text_len();
        pairs.text_mut().push_str("ccc");
        pairs.text_mut().push('x');
        pairs.commit_appended(start, start + 3);
        let start = pairs.text_len();
        pairs.text_mut().push_str("gone");
        pairs.truncate_text(start);
        let mut rebuilt = TextPairs::default();
        rebuilt.insert("a", "");
        rebuilt.insert("ccc", "x");
        assert_eq!(pairs, rebuilt);
        assert_ne!(pairs, TextPairs::default());
        assert_eq!(format!("{rebuilt:?}"), r#"{"a": "", "ccc": "x"}"#);
    }

    // Proves lookups match whole keys only: keys that share a length and a first byte, a key
    // that is a prefix of another, a multi-byte first character and the empty key (whose
    // span is followed by its value's bytes) each find their own entry.
    #[test]
    fn lookups_match_whole_keys() {
        let mut pairs = TextPairs::default();
        for (key, value) in [("ab", "1"), ("ac", "2"), ("a", "3"), ("", "4"), ("é", "5")] {
            pairs.insert(key, value);
        }
        assert_eq!(pairs.get("ab"), Some("1"));
        assert_eq!(pairs.get("ac"), Some("2"));
        assert_eq!(pairs.get("a"), Some("3"));
        assert_eq!(pairs.get(""), Some("4"));
        assert_eq!(pairs.get("é"), Some("5"));
        assert_eq!(pairs.get("ad"), None);
        assert_eq!(pairs.get("b"), None);
        assert_eq!(pairs.get("abc"), None);
        pairs.insert("", "replaced");
        assert_eq!(pairs.get(""), Some("replaced"));
        assert_eq!(pairs.len(), 5);
    }
}
