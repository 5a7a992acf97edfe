//! Which line format a process writes.

use std::fmt;
use std::str::FromStr;

use thiserror::Error;

/// The line format of a process's log (`logFormat`, `--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LogFormat {
    /// env_logger's line: `[2026-12-02T05:30:01Z WARN  target] message`.
    #[default]
    Text,
    /// logfmt: `ts=... level=warn shard=3 target=... msg="..." code=10 opaque=42`.
    Kv,
    /// One JSON object a line, every field a key.
    Json,
}

/// A `logFormat` value that names no format.
#[derive(Debug, Error, PartialEq, Eq)]
#[error("unknown log format {value:?}: expected text, kv or json")]
pub struct LogFormatError {
    /// The value given.
    pub value: String,
}

impl LogFormat {
    /// Every format, in the order the docs list them.
    pub const ALL: [LogFormat; 3] = [LogFormat::Text, LogFormat::Kv, LogFormat::Json];

    /// The config value naming this format.
    pub const fn as_str(self) -> &'static str {
        match self {
            LogFormat::Text => "text",
            LogFormat::Kv => "kv",
            LogFormat::Json => "json",
        }
    }
}

impl FromStr for LogFormat {
    type Err = LogFormatError;

    /// Case-insensitive, surrounding blanks ignored; anything else is refused, never guessed.
    fn from_str(value: &str) -> Result<LogFormat, LogFormatError> {
        let trimmed = value.trim();
        LogFormat::ALL
            .into_iter()
            .find(|format| format.as_str().eq_ignore_ascii_case(trimmed))
            .ok_or_else(|| LogFormatError {
                value: value.to_owned(),
            })
    }
}

impl fmt::Display for LogFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Proves every format parses from its own name (any case) and an unknown name is a typed
    // error naming the value, never a silent default.
    #[test]
    fn names_parse_and_unknown_ones_are_refused() {
        for format in LogFormat::ALL {
            assert_eq!(format.as_str().parse::<LogFormat>(), Ok(format));
            let upper = format.as_str().to_uppercase();
            assert_eq!(upper.parse::<LogFormat>(), Ok(format));
        }
        assert_eq!(" json ".parse::<LogFormat>(), Ok(LogFormat::Json));
        let error = "logfmt".parse::<LogFormat>().unwrap_err();
        assert_eq!(error.value, "logfmt");
        assert!(error.to_string().contains("text, kv or json"), "{error}");
        assert!("".parse::<LogFormat>().is_err());
    }
}
