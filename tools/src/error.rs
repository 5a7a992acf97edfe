//! comet-admin's errors: what a command could not do, said so an operator knows what to fix.

use comet_client::ClientError;
use comet_proto::ResponseCode;

/// Why a command failed.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The server answered REQUEST_CODE_NOT_SUPPORTED: it does not serve the request this
    /// command needs (an older broker, or a name server asked for a broker's job).
    #[error(
        "{addr} does not support the request this command sends \
         (REQUEST_CODE_NOT_SUPPORTED{remark})"
    )]
    NotSupported {
        /// The server that refused.
        addr: String,
        /// Its remark, `: ` first, empty when it gave none.
        remark: String,
    },
    /// The client failed (connection, timeout, an error answer, a malformed body).
    #[error(transparent)]
    Client(ClientError),
    /// The arguments name something that does not exist or do not fit together.
    #[error("{0}")]
    Invalid(String),
    /// The output could not be written.
    #[error("cannot write the output: {0}")]
    Output(#[from] std::io::Error),
    /// The output could not be written as JSON.
    #[error("cannot write JSON: {0}")]
    Json(#[from] serde_json::Error),
}

impl From<ClientError> for AdminError {
    fn from(error: ClientError) -> AdminError {
        match error {
            ClientError::Response {
                addr,
                code: ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                remark,
            } => {
                let remark = match remark.trim() {
                    "" => String::new(),
                    text => format!(": {text}"),
                };
                AdminError::NotSupported { addr, remark }
            }
            other => AdminError::Client(other),
        }
    }
}

/// A command's outcome.
pub type Result<T> = std::result::Result<T, AdminError>;
