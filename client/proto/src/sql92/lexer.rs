//! Tokens of the SQL92 selector grammar, read one at a time as the parser asks for them
//! (as Java's generated token manager does, so text after a complete expression is only
//! looked at as far as the parser peeks).
//!
//! Keywords, literals and names are case-insensitive; names are ASCII (`[a-z_$][a-z0-9_$]*`);
//! whitespace, `--` line comments (ended by a line break) and `/* */` comments are skipped.
//! Positions are Java's: 1-based line and column, in UTF-16 units, a tab advancing the
//! column to the next multiple of 8 plus one.

use super::SqlError;

/// What a token is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Eof,
    Not,
    And,
    Or,
    Between,
    In,
    True,
    False,
    Null,
    Is,
    Contains,
    StartsWith,
    EndsWith,
    Decimal,
    Float,
    Str,
    Id,
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Open,
    Comma,
    Close,
    Plus,
    Minus,
}

impl Kind {
    /// Java's token image (`SelectorParserConstants.tokenImage`), used in error texts.
    pub(crate) fn image(self) -> &'static str {
        match self {
            Kind::Eof => "<EOF>",
            Kind::Not => "\"NOT\"",
            Kind::And => "\"AND\"",
            Kind::Or => "\"OR\"",
            Kind::Between => "\"BETWEEN\"",
            Kind::In => "\"IN\"",
            Kind::True => "\"TRUE\"",
            Kind::False => "\"FALSE\"",
            Kind::Null => "\"NULL\"",
            Kind::Is => "\"IS\"",
            Kind::Contains => "\"CONTAINS\"",
            Kind::StartsWith => "\"STARTSWITH\"",
            Kind::EndsWith => "\"ENDSWITH\"",
            Kind::Decimal => "<DECIMAL_LITERAL>",
            Kind::Float => "<FLOATING_POINT_LITERAL>",
            Kind::Str => "<STRING_LITERAL>",
            Kind::Id => "<ID>",
            Kind::Eq => "\"=\"",
            Kind::Ne => "\"<>\"",
            Kind::Gt => "\">\"",
            Kind::Ge => "\">=\"",
            Kind::Lt => "\"<\"",
            Kind::Le => "\"<=\"",
            Kind::Open => "\"(\"",
            Kind::Comma => "\",\"",
            Kind::Close => "\")\"",
            Kind::Plus => "\"+\"",
            Kind::Minus => "\"-\"",
        }
    }
}

/// Keywords, which win over a name of the same length.
const KEYWORDS: &[(&str, Kind)] = &[
    ("NOT", Kind::Not),
    ("AND", Kind::And),
    ("OR", Kind::Or),
    ("BETWEEN", Kind::Between),
    ("IN", Kind::In),
    ("TRUE", Kind::True),
    ("FALSE", Kind::False),
    ("NULL", Kind::Null),
    ("IS", Kind::Is),
    ("CONTAINS", Kind::Contains),
    ("STARTSWITH", Kind::StartsWith),
    ("ENDSWITH", Kind::EndsWith),
];

/// One token: its kind, its text as written and where it starts.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Token<'s> {
    pub(crate) kind: Kind,
    pub(crate) text: &'s str,
    pub(crate) line: u32,
    pub(crate) column: u32,
}

/// Reads tokens from a selector's text.
pub(crate) struct Lexer<'s> {
    text: &'s str,
    at: usize,
    /// Line and column of the last character read (Java's `SimpleCharStream`: a line break
    /// belongs to the line it ends).
    line: u32,
    column: u32,
    /// The last character read was `\n`, or a `\r` (the next starts a new line unless it
    /// is the `\n` of a `\r\n`).
    after_lf: bool,
    after_cr: bool,
}

impl<'s> Lexer<'s> {
    pub(crate) fn new(text: &'s str) -> Lexer<'s> {
        Lexer {
            text,
            at: 0,
            line: 1,
            column: 0,
            after_lf: false,
            after_cr: false,
        }
    }

    fn peek_char(&self) -> Option<char> {
        self.text[self.at..].chars().next()
    }

    /// Consumes one character, keeping Java's line and column.
    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.at += c.len_utf8();
        self.column += 1;
        if self.after_lf {
            self.after_lf = false;
            self.line += 1;
            self.column = 1;
        } else if self.after_cr {
            self.after_cr = false;
            if c == '\n' {
                self.after_lf = true;
            } else {
                self.line += 1;
                self.column = 1;
            }
        }
        match c {
            '\r' => self.after_cr = true,
            '\n' => self.after_lf = true,
            '\t' => self.column = (self.column - 1) / 8 * 8 + 8,
            // A character beyond the Basic Multilingual Plane is two UTF-16 units.
            _ if c.len_utf16() == 2 => self.column += 1,
            _ => {}
        }
        Some(c)
    }

    /// The position the next character would have.
    fn next_position(&self) -> (u32, u32) {
        let new_line = self.after_lf || (self.after_cr && self.peek_char() != Some('\n'));
        if new_line {
            (self.line + 1, 1)
        } else {
            (self.line, self.column + 1)
        }
    }

    /// The token begun at `start` cannot go on: what Java's token manager reports. It has
    /// read what lies between `start` and here, and then the next character (the one that
    /// cannot continue the token) if there is one; it then looks one character further, and
    /// at the end of the text reports the end one column on.
    fn fail(&mut self, start: usize) -> SqlError {
        let read_before = self.text[start..self.at].chars().count();
        let Some(stopper) = self.peek_char() else {
            let (line, column) = match self.text[start..].chars().last() {
                Some('\n' | '\r') => (self.line + 1, 0),
                _ => (self.line, self.column + 1),
            };
            let after = if read_before > 1 {
                &self.text[start..]
            } else {
                ""
            };
            return SqlError::Lexical {
                line,
                column,
                found: None,
                after: after.to_owned(),
            };
        };
        let (line, column) = self.next_position();
        // Java reads UTF-16 units: a character beyond the Basic Multilingual Plane stops the
        // token with its first half, and its second half is still ahead.
        let ends = stopper.len_utf16() == 1 && self.text[self.at..].chars().nth(1).is_none();
        if ends {
            self.bump();
            let after = if read_before > 0 {
                &self.text[start..]
            } else {
                ""
            };
            return SqlError::Lexical {
                line,
                column: column + 1,
                found: None,
                after: after.to_owned(),
            };
        }
        let after = if read_before > 0 {
            &self.text[start..self.at]
        } else {
            ""
        };
        SqlError::Lexical {
            line,
            column,
            found: Some(stopper),
            after: after.to_owned(),
        }
    }

    /// Skips whitespace and complete comments.
    fn skip_blank(&mut self) {
        loop {
            match self.peek_char() {
                Some(' ' | '\t' | '\n' | '\r' | '\u{c}') => {
                    self.bump();
                }
                Some('-') if self.rest().starts_with("--") && self.line_comment_ends() => {
                    while let Some(c) = self.bump() {
                        if c == '\n' {
                            break;
                        }
                        if c == '\r' {
                            if self.peek_char() == Some('\n') {
                                self.bump();
                            }
                            break;
                        }
                    }
                }
                Some('/') if self.rest().starts_with("/*") && self.rest()[2..].contains("*/") => {
                    self.bump();
                    self.bump();
                    while !self.rest().starts_with("*/") {
                        self.bump();
                    }
                    self.bump();
                    self.bump();
                }
                _ => return,
            }
        }
    }

    /// A `--` comment is a token only when a line break ends it (Java's grammar); without
    /// one, `-` is read as minus.
    fn line_comment_ends(&self) -> bool {
        self.rest().contains(['\n', '\r'])
    }

    fn rest(&self) -> &'s str {
        &self.text[self.at..]
    }

    /// The next token; [`Kind::Eof`] at the end.
    pub(crate) fn next_token(&mut self) -> Result<Token<'s>, SqlError> {
        self.skip_blank();
        let start = self.at;
        let (line, column) = self.next_position();
        let token = |lexer: &Lexer<'s>, kind| Token {
            kind,
            text: &lexer.text[start..lexer.at],
            line,
            column,
        };
        let Some(c) = self.peek_char() else {
            // Java places the end at the last character read (0, 0 for an empty text).
            return Ok(Token {
                kind: Kind::Eof,
                text: "",
                line: if self.at == 0 { 0 } else { self.line },
                column: self.column,
            });
        };
        let kind = match c {
            '=' => self.single(Kind::Eq),
            '(' => self.single(Kind::Open),
            ')' => self.single(Kind::Close),
            ',' => self.single(Kind::Comma),
            '+' => self.single(Kind::Plus),
            '-' => self.single(Kind::Minus),
            '>' => self.with_equal(Kind::Gt, Kind::Ge),
            '<' => {
                self.bump();
                match self.peek_char() {
                    Some('=') => self.single(Kind::Le),
                    Some('>') => self.single(Kind::Ne),
                    _ => Kind::Lt,
                }
            }
            '\'' => self.string(start)?,
            '0'..='9' | '.' => self.number(start)?,
            c if c.is_ascii_alphabetic() || c == '_' || c == '$' => self.name(start),
            '/' => return Err(self.slash(start)),
            _ => return Err(self.fail(start)),
        };
        Ok(token(self, kind))
    }

    /// A `/` that starts no complete comment: an unclosed `/*` runs to the end of the text.
    fn slash(&mut self, start: usize) -> SqlError {
        self.bump();
        if self.peek_char() == Some('*') {
            while self.bump().is_some() {}
        }
        self.fail(start)
    }

    fn single(&mut self, kind: Kind) -> Kind {
        self.bump();
        kind
    }

    fn with_equal(&mut self, plain: Kind, with: Kind) -> Kind {
        self.bump();
        if self.peek_char() == Some('=') {
            self.bump();
            with
        } else {
            plain
        }
    }

    fn string(&mut self, start: usize) -> Result<Kind, SqlError> {
        self.bump();
        loop {
            match self.peek_char() {
                None => return Err(self.fail(start)),
                Some('\'') => {
                    self.bump();
                    if self.peek_char() != Some('\'') {
                        return Ok(Kind::Str);
                    }
                    self.bump();
                }
                Some(_) => {
                    self.bump();
                }
            }
        }
    }

    /// Longest of the decimal and floating-point forms; a tie is decimal.
    fn number(&mut self, start: usize) -> Result<Kind, SqlError> {
        let rest = self.rest().as_bytes();
        let digits = |from: usize| {
            rest.get(from..).map_or(0, |tail| {
                tail.iter().take_while(|b| b.is_ascii_digit()).count()
            })
        };
        let exponent = |from: usize| -> usize {
            if !matches!(rest.get(from), Some(b'e' | b'E')) {
                return 0;
            }
            let sign = usize::from(matches!(rest.get(from + 1), Some(b'+' | b'-')));
            let count = digits(from + 1 + sign);
            if count == 0 {
                0
            } else {
                1 + sign + count
            }
        };
        let lead = digits(0);
        let decimal = match rest.first() {
            Some(b'0') => 1,
            Some(b'1'..=b'9') => lead + usize::from(matches!(rest.get(lead), Some(b'l' | b'L'))),
            _ => 0,
        };
        let float = if lead > 0 && rest.get(lead) == Some(&b'.') {
            let fraction = digits(lead + 1);
            lead + 1 + fraction + exponent(lead + 1 + fraction)
        } else if lead > 0 {
            let e = exponent(lead);
            if e > 0 {
                lead + e
            } else {
                0
            }
        } else {
            // ".5", ".5E3"; a lone "." is no token.
            let fraction = digits(1);
            if fraction == 0 {
                0
            } else {
                1 + fraction + exponent(1 + fraction)
            }
        };
        let (kind, length) = if float > decimal {
            (Kind::Float, float)
        } else {
            (Kind::Decimal, decimal)
        };
        if length == 0 {
            self.bump();
            return Err(self.fail(start));
        }
        for _ in 0..length {
            self.bump();
        }
        Ok(kind)
    }

    fn name(&mut self, start: usize) -> Kind {
        while self
            .peek_char()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$')
        {
            self.bump();
        }
        let text = &self.text[start..self.at];
        KEYWORDS
            .iter()
            .find(|(word, _)| word.eq_ignore_ascii_case(text))
            .map_or(Kind::Id, |(_, kind)| *kind)
    }
}
