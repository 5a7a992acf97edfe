//! Environmental dead ends stop the process with a distinct exit status per reason.
//!
//! After a failed write or fdatasync the state of the page cache and the device is unknown;
//! retrying in place could acknowledge data that is not on disk. Stopping, and recovering from
//! the checkpoint on the next start, is the only honest answer.

/// Why the process stops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FatalReason {
    /// A write or fdatasync of the store failed.
    StorageIo,
    /// The store directory is locked by another process or cannot be opened.
    StoreLocked,
    /// The configuration cannot be used.
    Config,
    /// A listener could not bind.
    Bind,
}

impl FatalReason {
    /// The process exit status for this reason.
    pub const fn exit_code(self) -> i32 {
        match self {
            FatalReason::StorageIo => 70,
            FatalReason::StoreLocked => 71,
            FatalReason::Config => 72,
            FatalReason::Bind => 73,
        }
    }
}

/// Logs `message` and exits with the reason's status.
pub fn fatal(reason: FatalReason, message: &str) -> ! {
    log::error!("fatal ({reason:?}): {message}");
    eprintln!("comet: fatal ({reason:?}): {message}");
    std::process::exit(reason.exit_code())
}
