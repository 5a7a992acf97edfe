//! `comet-log`: the one log set-up of Comet's processes (`comet-broker`, `comet-nameserver`,
//! `comet-admin`), docs/operations.md#logs.
//!
//! - [`LogFormat`]: `text` (env_logger's own line, what Comet always wrote), `kv` (logfmt, one
//!   `key=value` line) or `json` (one JSON object a line), chosen by the processes' `logFormat`
//!   key or `--log-format` flag.
//! - [`thread_tag`]: which shard (or which named thread) a line comes from; a shard thread
//!   says so once with [`set_thread_shard`].
//! - Structured fields travel as the `log` crate's key-values
//!   (`log::warn!(code = 10, opaque = 42; "...")`), so call sites need nothing of this crate.
//! - [`progress::Progress`]: the progress lines of a start-up step that runs past a second.
//!
//! The level filter stays env_logger's `RUST_LOG`.

mod context;
mod format;
mod line;
pub mod progress;

pub use context::{set_thread_shard, thread_tag, ThreadTag};
pub use format::{LogFormat, LogFormatError};
pub use line::{write_json_line, write_kv_line, write_kv_pairs, LineHead};

use std::io::Write;

/// Installs the process logger writing `format` lines to stderr, filtered by `RUST_LOG` or,
/// when it is unset, by `default_filter` (`"info"`, `"warn"`).
///
/// Panics when a logger is already installed (a second call is a programming error).
pub fn init(format: LogFormat, default_filter: &str) {
    builder(format, default_filter).init();
}

/// The env_logger builder [`init`] installs, for processes that adjust it further.
pub fn builder(format: LogFormat, default_filter: &str) -> env_logger::Builder {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(default_filter));
    match format {
        // env_logger's default line; fields a statement carries follow the message as logfmt
        // pairs (quoted when needed), so a line without fields reads as it always did.
        LogFormat::Text => {
            builder.format_key_values(|formatter, source| write_kv_pairs(formatter, source));
        }
        LogFormat::Kv => {
            builder.format(|formatter, record| {
                let ts = formatter.timestamp_millis().to_string();
                let mut line = String::with_capacity(160);
                write_kv_line(&mut line, &LineHead::of(&ts, record, &thread_tag()), record);
                formatter.write_all(line.as_bytes())
            });
        }
        LogFormat::Json => {
            builder.format(|formatter, record| {
                let ts = formatter.timestamp_millis().to_string();
                let mut line = String::with_capacity(200);
                write_json_line(&mut line, &LineHead::of(&ts, record, &thread_tag()), record);
                formatter.write_all(line.as_bytes())
            });
        }
    }
    builder
}
