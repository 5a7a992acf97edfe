//! The 5.x base keys every RPC request header inherits
//! (docs/protocol.md#typed-headers-and-ext-fields). Typed headers that target a broker name `bname`
//! themselves; [`RpcRequestBase`] reads all five from any request, so a server can look at them
//! without knowing the request's own header.

use super::command_header;

command_header! {
    /// The optional 5.x base keys of a request.
    pub struct RpcRequestBase {
        /// Namespace (rarely set by clients).
        namespace: Option<String> => "ns",
        /// The names in the request are already namespaced.
        namespaced: Option<bool> => "nsd",
        /// Logical broker name the request targets.
        broker_name: Option<String> => "bname",
        /// One-way hint.
        oneway: Option<bool> => "oway",
        /// Logical-queue (static topic) request.
        logical: Option<bool> => "lo",
    }
}
