//! Tag codes and TAG subscription expressions
//! (docs/protocol.md#tags-and-subscription-expressions,
//! docs/protocol.md#tag-codes-hash-utf-16-code-units).
//!
//! The tag code stored in every consume-queue entry is Java's `String.hashCode()` of the
//! whole `TAGS` value: `h = 31 * h + unit` over UTF-16 code units with i32 wrap-around (so a
//! character outside the Basic Multilingual Plane counts as two surrogates). No tags give 0.
//!
//! A TAG expression is `*` (or empty: everything) or tags joined by the literal `||`; each
//! part is trimmed with Java's `String.trim` (characters up to U+0020) and empty parts are
//! dropped. The broker filters by code (collisions pass), the client re-filters by exact tag.

/// The expression that subscribes to every message.
pub const SUBSCRIBE_ALL: &str = "*";
/// Expression type of tag expressions (the default).
pub const EXPRESSION_TYPE_TAG: &str = "TAG";
/// Expression type of SQL92 selectors (see [`crate::sql92`]).
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// Java `String.hashCode()` of `text`, over its UTF-16 code units.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(i32::from(unit))
    })
}

/// The consume-queue tag code of a message: the hash of its `TAGS`, or 0 without tags.
/// Stored sign-extended in the 8-byte consume-queue field.
pub fn tag_code(tags: Option<&str>) -> i64 {
    tags.map_or(0, |tags| i64::from(java_string_hash(tags)))
}

/// The low 32 bits of a stored tag code as Java's `Long.intValue()` gives them.
pub fn tag_code_as_i32(tag_code: i64) -> i32 {
    let low_bits = u32::try_from(tag_code & 0xFFFF_FFFF).expect("masked to 32 bits");
    low_bits as i32
}

/// True when `expression_type` names tag filtering (absent means TAG, as in Java).
pub fn is_tag_type(expression_type: Option<&str>) -> bool {
    expression_type.is_none_or(|kind| kind.is_empty() || kind == EXPRESSION_TYPE_TAG)
}

/// Java's `String.trim`: strips characters up to and including U+0020 from both ends.
fn java_trim(text: &str) -> &str {
    text.trim_matches(|c: char| c <= '\u{20}')
}

/// A parsed TAG subscription (Java `SubscriptionData`'s `subString`, `tagsSet`, `codeSet`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagSubscription {
    expression: String,
    tags: Vec<String>,
    codes: Vec<i32>,
}

impl TagSubscription {
    /// Parses an expression; `None`, empty and `*` subscribe to everything.
    pub fn parse(expression: Option<&str>) -> TagSubscription {
        let text = expression.unwrap_or("");
        if text.is_empty() || text == SUBSCRIBE_ALL {
            return TagSubscription::all();
        }
        let mut tags: Vec<String> = Vec::new();
        let mut codes: Vec<i32> = Vec::new();
        for part in text
            .split("||")
            .map(java_trim)
            .filter(|part| !part.is_empty())
        {
            if !tags.iter().any(|tag| tag == part) {
                tags.push(part.to_owned());
            }
            let code = java_string_hash(part);
            if !codes.contains(&code) {
                codes.push(code);
            }
        }
        TagSubscription {
            expression: text.to_owned(),
            tags,
            codes,
        }
    }

    /// The subscription to every message.
    pub fn all() -> TagSubscription {
        TagSubscription {
            expression: SUBSCRIBE_ALL.to_owned(),
            tags: Vec::new(),
            codes: Vec::new(),
        }
    }

    /// True for `*`.
    pub fn is_all(&self) -> bool {
        self.expression == SUBSCRIBE_ALL
    }

    /// The expression as given (`subString`).
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Distinct tags, in expression order (`tagsSet`).
    pub fn tags(&self) -> &[String] {
        &self.tags
    }

    /// Distinct tag codes (`codeSet`).
    pub fn codes(&self) -> &[i32] {
        &self.codes
    }

    /// Broker-side filter on a consume-queue tag code; hash collisions pass.
    pub fn matches(&self, tag_code: i64) -> bool {
        self.is_all() || self.codes.contains(&tag_code_as_i32(tag_code))
    }

    /// Client-side re-filter on a message's `TAGS`: exact match when the subscription names
    /// tags; messages without tags fail a non-`*` subscription.
    pub fn matches_tags(&self, tags: Option<&str>) -> bool {
        if self.tags.is_empty() {
            return true;
        }
        tags.is_some_and(|tags| self.tags.iter().any(|tag| tag == tags))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves the verified hash examples and UTF-16 (not UTF-8) hashing of non-ASCII text.
    #[test]
    fn java_hash_examples() {
        assert_eq!(java_string_hash("TagA"), 2_598_919);
        assert_eq!(java_string_hash("TagB"), 2_598_920);
        assert_eq!(java_string_hash("*"), 42);
        assert_eq!(java_string_hash(""), 0);
        // "é" is one UTF-16 unit 0xE9 (two UTF-8 bytes); "😀" is two surrogates.
        assert_eq!(java_string_hash("é"), 0xE9);
        assert_eq!(java_string_hash("😀"), 0xD83D * 31 + 0xDE00);
        // Java: "polygenelubricants".hashCode() == Integer.MIN_VALUE.
        assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
        assert_eq!(tag_code(None), 0);
        assert_eq!(tag_code(Some("polygenelubricants")), -2_147_483_648);
        assert_eq!(tag_code_as_i32(0x1_0000_002A), 42);
    }

    // Proves expression parsing: all forms, trimming, empty parts, duplicates.
    #[test]
    fn expressions() {
        for all in [None, Some(""), Some("*")] {
            let subscription = TagSubscription::parse(all);
            assert!(subscription.is_all());
            assert!(subscription.matches(12345));
            assert!(subscription.matches_tags(None));
        }
        let subscription = TagSubscription::parse(Some(" TagA || TagB ||||\tTagA|| "));
        assert_eq!(subscription.tags(), ["TagA", "TagB"]);
        assert_eq!(subscription.codes(), [2_598_919, 2_598_920]);
        assert!(subscription.matches(2_598_919));
        assert!(!subscription.matches(42));
        assert!(subscription.matches_tags(Some("TagB")));
        assert!(!subscription.matches_tags(Some("TagC")));
        assert!(!subscription.matches_tags(None));
        // " * " is not the subscribe-all form in Java: it is the tag "*".
        let star = TagSubscription::parse(Some(" * "));
        assert!(!star.is_all());
        assert_eq!(star.codes(), [42]);
        assert!(is_tag_type(None) && is_tag_type(Some("TAG")) && !is_tag_type(Some("SQL92")));
    }
}
