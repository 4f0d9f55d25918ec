//! herd-protocol: the daemon's wire protocol as Rust types.
//!
//! Owns: the JSON-RPC envelope ([`Request`], [`Response`], [`RpcError`]), every
//! error code ([`codes`]) and the `data` its errors carry ([`errors`]), every
//! capability name ([`capabilities`]), and every method's params ([`params`]),
//! answer ([`answers`], and [`daemon`] for the daemon's own: status, scope,
//! plugins, hosts) and stream notes ([`events`]); what a far host's door adds
//! ([`door`]); [`methods`] ties each method name to its types, and [`schema`]
//! generates the JSON Schema of the wire (`docs/protocol/schema.json`) and the
//! method table (`docs/protocol/methods.md`) from them.
//! Never: does IO, or knows about sessions beyond their wire form.
//! Depended on by: `herd-cli` (the daemon's methods, the CLI, the MCP server and
//! the host link). A leaf: it depends on no workspace crate.
//!
//! The protocol grows by capabilities: the daemon announces them in `hello`'s
//! answer and a client checks before using one. A field a capability added is
//! optional in its params, and clients leave it out unless set, so a protocol-1
//! daemon takes every request that asks nothing new.

pub mod answers;
pub mod capabilities;
pub mod codes;
pub mod daemon;
pub mod door;
pub mod errors;
pub mod events;
pub mod methods;
pub mod params;
pub mod schema;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub use codes::*;
pub use methods::Method;

/// The protocol version this crate speaks. Bump on any incompatible change.
pub const PROTOCOL_VERSION: u32 = 1;

/// The largest request line the daemon reads.
pub const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The largest response line a client reads.
pub const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// The method of a raw output frame (capability `logs.raw`): its header line names
/// how many bytes of output follow it, unescaped.
pub const LOG_BYTES: &str = "log.bytes";

/// A request line.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Request {
    /// Always "2.0".
    pub jsonrpc: String,
    /// The request id; absent for notifications (which the daemon ignores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<Value>,
    /// The method name.
    pub method: String,
    /// The parameters object.
    #[serde(default)]
    pub params: Value,
}

/// An error object.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RpcError {
    /// One of the [`codes`].
    pub code: i64,
    /// A sentence for the user.
    pub message: String,
    /// Structured detail (the guard verdict, the ids that matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
}

impl RpcError {
    /// An error without data.
    pub fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

impl std::fmt::Display for RpcError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (code {})", self.message, self.code)
    }
}

impl std::error::Error for RpcError {}

/// A response line: an answer (`id` and `result` or `error`) or a stream note
/// (`method` and `params`, `id` null).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Response {
    /// Always "2.0".
    pub jsonrpc: String,
    /// The id of the request answered (null when it could not be read).
    #[serde(default)]
    pub id: Value,
    /// The result, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<Value>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<RpcError>,
    /// Set on stream notifications instead of `id`/`result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
    /// The notification's payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub params: Option<Value>,
}

impl Response {
    /// A success answer.
    pub fn ok(id: Value, result: Value) -> Response {
        Response {
            jsonrpc: "2.0".into(),
            id,
            result: Some(result),
            error: None,
            method: None,
            params: None,
        }
    }

    /// An error answer.
    pub fn err(id: Value, error: RpcError) -> Response {
        Response {
            jsonrpc: "2.0".into(),
            id,
            result: None,
            error: Some(error),
            method: None,
            params: None,
        }
    }

    /// A stream notification.
    pub fn notification(method: &str, params: Value) -> Response {
        Response {
            jsonrpc: "2.0".into(),
            id: Value::Null,
            result: None,
            error: None,
            method: Some(method.to_owned()),
            params: Some(params),
        }
    }

    /// The line to send, newline included.
    pub fn to_line(&self) -> Vec<u8> {
        // A Response holds only strings, numbers and `Value`s, whose map keys are
        // strings: serialising it cannot fail.
        let mut line = serde_json::to_vec(self).unwrap_or_else(|_| b"{}".to_vec());
        line.push(b'\n');
        line
    }
}

/// The header line of a `log.bytes` frame of `len` bytes, newline included.
pub fn log_bytes_header(len: usize) -> Vec<u8> {
    let mut line =
        format!(r#"{{"jsonrpc":"2.0","id":null,"method":"{LOG_BYTES}","params":{{"len":{len}}}}}"#)
            .into_bytes();
    line.push(b'\n');
    line
}

/// A typed params value as the JSON a request carries.
///
/// # Errors
/// When `params` does not serialise (a map with non-string keys; none of this
/// crate's types has one).
pub fn to_params<P: Serialize>(params: &P) -> Result<Value, serde_json::Error> {
    serde_json::to_value(params)
}
