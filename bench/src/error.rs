//! Errors that end a bench run before or instead of a report.

use thiserror::Error;

/// Why a run could not start or complete.
#[derive(Debug, Error)]
pub enum BenchError {
    /// The command line asks for something impossible.
    #[error("invalid arguments: {0}")]
    Args(String),
    /// The client could not be built or started, or an admin call failed.
    #[error("client error: {0}")]
    Client(#[from] comet_client::ClientError),
    /// The histogram library refused a configuration or a merge.
    #[error("histogram error: {0}")]
    Histogram(String),
    /// Writing the JSON report failed.
    #[error("cannot write report {path}: {reason}")]
    Report {
        /// Report path.
        path: String,
        /// The operating system's reason.
        reason: String,
    },
    /// A background thread could not be started.
    #[error("cannot start thread: {0}")]
    Thread(String),
}

/// Shorthand used across the crate.
pub type Result<T, E = BenchError> = std::result::Result<T, E>;
