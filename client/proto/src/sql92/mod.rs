//! SQL92 message selectors (`MessageSelector.bySql`), with Apache RocketMQ's grammar and
//! semantics (its `filter` module), see docs/protocol.md#sql92-property-filters.
//!
//! [`Selector::compile`] parses and type-checks once; [`Selector::matches`] then evaluates
//! against one message's properties without allocating. Conditions: `=`, `<>`, `>`, `>=`,
//! `<`, `<=`, `[NOT] BETWEEN .. AND ..`, `[NOT] IN ('..', ..)`, `IS [NOT] NULL`,
//! `[NOT] CONTAINS|STARTSWITH|ENDSWITH '..'`, `AND`, `OR`, `NOT`, parentheses; literals:
//! strings in single quotes (`''` for a quote), integers (optional `L`), decimals with
//! optional exponent, `TRUE`, `FALSE`, `NULL`. Names are message properties (the system
//! ones too, such as `TAGS` and `KEYS`); their values are strings, compared as numbers
//! against number literals. A missing property is NULL and makes a comparison unknown,
//! which never matches.
//!
//! Compile errors render as Java's exception text (`Display`), which the broker returns as
//! the remark of a refused CHECK_CLIENT_CONFIG; each also says where it happened. Hostile
//! input is bounded: [`SQL_LENGTH_MAX`], [`NESTING_DEPTH_MAX`] and [`IN_LIST_MAX`].

mod ast;
mod eval;
mod lexer;
mod parser;

use thiserror::Error;

/// Longest selector accepted, in bytes.
pub const SQL_LENGTH_MAX: usize = 16 * 1024;
/// Deepest nesting of parentheses, prefix operators and operator nodes accepted; keeps
/// parsing and evaluation far from the stack's end.
pub const NESTING_DEPTH_MAX: usize = 64;
/// Most literals in one `IN` list.
pub const IN_LIST_MAX: usize = 1024;

/// Why a selector does not compile. `Display` gives Java's exception text where Java has
/// one.
#[derive(Clone, Debug, Error, PartialEq, Eq)]
pub enum SqlError {
    /// A token the grammar does not allow here.
    #[error(
        "org.apache.rocketmq.filter.parser.ParseException: Encountered \"{}\" at line {line}, \
         column {column}.",
        encountered(token, text)
    )]
    Syntax {
        /// Java's name of the token kind (`<ID>`, `"AND"`, `<EOF>`, ...).
        token: &'static str,
        /// The token as written.
        text: String,
        /// 1-based line.
        line: u32,
        /// 1-based column, in UTF-16 units.
        column: u32,
    },
    /// Text that is no token.
    #[error(
        "org.apache.rocketmq.filter.parser.TokenMgrError: Lexical error at line {line}, \
         column {column}.  Encountered: {}after : \"{}\"",
        lexical_found(*found),
        java_escape(after)
    )]
    Lexical {
        /// 1-based line.
        line: u32,
        /// 1-based column, in UTF-16 units.
        column: u32,
        /// The character that starts no token; `None` at the end of the text.
        found: Option<char>,
        /// What was read of the unfinished token.
        after: String,
    },
    /// A value where a condition is needed (`5 AND a = 1`).
    #[error(
        "org.apache.rocketmq.filter.parser.ParseException: Expression will not result in a \
         boolean value: {expression}"
    )]
    NotBoolean {
        /// Java's text of the value.
        expression: String,
        /// 1-based line of the operator that needed a condition.
        line: u32,
        /// 1-based column of that operator.
        column: u32,
    },
    /// A type rule of the grammar is broken (`a > 'x'`, `a = NULL`, `a BETWEEN 2 AND 1`).
    #[error("java.lang.RuntimeException: {reason}")]
    Invalid {
        /// Java's message.
        reason: String,
        /// 1-based line of the operator.
        line: u32,
        /// 1-based column of the operator.
        column: u32,
    },
    /// An integer literal beyond 64 bits.
    #[error("java.lang.NumberFormatException: For input string: \"{input}\"")]
    NumberFormat {
        /// The literal.
        input: String,
        /// 1-based line.
        line: u32,
        /// 1-based column.
        column: u32,
    },
    /// The selector is longer than [`SQL_LENGTH_MAX`].
    #[error("selector of {length} bytes exceeds the limit of {max} bytes")]
    TooLong {
        /// Its length in bytes.
        length: usize,
        /// The limit.
        max: usize,
    },
    /// The selector nests deeper than [`NESTING_DEPTH_MAX`].
    #[error("selector nests deeper than {max} levels at line {line}, column {column}")]
    TooDeep {
        /// The limit.
        max: usize,
        /// 1-based line where the limit was passed.
        line: u32,
        /// 1-based column where the limit was passed.
        column: u32,
    },
    /// An `IN` list longer than [`IN_LIST_MAX`].
    #[error("IN list longer than {max} values at line {line}, column {column}")]
    InListTooLong {
        /// The limit.
        max: usize,
        /// 1-based line where the limit was passed.
        line: u32,
        /// 1-based column where the limit was passed.
        column: u32,
    },
}

/// Java's `ParseException` rendering of one token.
fn encountered(token: &str, text: &str) -> String {
    if token == "<EOF>" {
        token.to_owned()
    } else {
        format!(" {token} \"{} \"", java_escape(text))
    }
}

fn lexical_found(found: Option<char>) -> String {
    match found {
        None => "<EOF> ".to_owned(),
        Some(c) => {
            // Java names one UTF-16 unit: the first half of a surrogate pair.
            let unit = c.encode_utf16(&mut [0; 2])[0];
            let text = String::from_utf16_lossy(&[unit]);
            let escaped = if c.len_utf16() == 2 {
                format!("\\u{unit:04x}")
            } else {
                java_escape(&text)
            };
            format!("\"{escaped}\" ({unit}), ")
        }
    }
}

/// JavaCC's `add_escapes`.
fn java_escape(text: &str) -> String {
    let mut escaped = String::with_capacity(text.len());
    for unit in text.encode_utf16() {
        match unit {
            0x08 => escaped.push_str("\\b"),
            0x09 => escaped.push_str("\\t"),
            0x0A => escaped.push_str("\\n"),
            0x0C => escaped.push_str("\\f"),
            0x0D => escaped.push_str("\\r"),
            0x22 => escaped.push_str("\\\""),
            0x27 => escaped.push_str("\\'"),
            0x5C => escaped.push_str("\\\\"),
            0x20..=0x7E => escaped.push(char::from(u8::try_from(unit).unwrap_or(b'?'))),
            other => escaped.push_str(&format!("\\u{other:04x}")),
        }
    }
    escaped
}

/// A compiled SQL92 selector.
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    expression: String,
    root: ast::Expr,
}

impl Selector {
    /// Parses and type-checks `expression` as Java's `SqlFilter.compile` does.
    pub fn compile(expression: &str) -> Result<Selector, SqlError> {
        if expression.len() > SQL_LENGTH_MAX {
            return Err(SqlError::TooLong {
                length: expression.len(),
                max: SQL_LENGTH_MAX,
            });
        }
        let root = parser::Parser::new(expression).selector()?;
        Ok(Selector {
            expression: expression.to_owned(),
            root,
        })
    }

    /// The expression as given.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// True when the message whose properties `property` looks up is selected. Unknown
    /// results (a missing property) and what Java would throw on (`a > 5` with `a = 'x'`)
    /// do not match.
    pub fn matches<'a, F>(&'a self, property: F) -> bool
    where
        F: Fn(&str) -> Option<&'a str>,
    {
        matches!(
            eval::evaluate(&self.root, &property),
            Ok(eval::Value::Bool(true))
        )
    }
}

#[cfg(test)]
mod tests;
