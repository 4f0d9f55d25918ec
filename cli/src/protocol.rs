//! The daemon's wire protocol: JSON-RPC 2.0 over a Unix socket, one message a line.
//!
//! A connection starts with `hello {"protocol": N, "client": "<version>"}`; the
//! daemon answers `{"protocol", "daemon", "pid", "home"}` or, when the versions
//! differ, an error naming both. Every later line is a request; the answer is one
//! line with the same id. The two streaming methods (`events.follow`,
//! `logs.follow`) answer with any number of notifications (`{"method": "event"}`
//! / `{"method": "log"}`) and then, for logs, one final response; the client ends an
//! events stream by closing the connection.
//!
//! Invariant: a line longer than [`MAX_REQUEST_BYTES`] is never buffered whole;
//! the reader discards the rest of it and the daemon answers with an error that
//! names the limit, keeping the connection.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub(crate) mod escape;

/// The protocol version this binary speaks. Bump on any incompatible change.
pub(crate) const PROTOCOL_VERSION: u32 = 1;

/// The largest request line the daemon reads.
pub(crate) const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The largest response line a client reads.
pub(crate) const MAX_RESPONSE_BYTES: usize = 256 << 20;

/// JSON-RPC: invalid JSON.
pub(crate) const PARSE_ERROR: i64 = -32700;
/// JSON-RPC: not a valid request object.
pub(crate) const INVALID_REQUEST: i64 = -32600;
/// JSON-RPC: unknown method.
pub(crate) const METHOD_NOT_FOUND: i64 = -32601;
/// JSON-RPC: bad parameters.
pub(crate) const INVALID_PARAMS: i64 = -32602;
/// JSON-RPC: the daemon failed internally.
pub(crate) const INTERNAL_ERROR: i64 = -32603;
/// herd: the session id matched nothing, several sessions, or was too short.
pub(crate) const NOT_FOUND: i64 = -32004;
/// herd: the self-kill guard refused the command.
pub(crate) const GUARDED: i64 = -32010;
/// herd: client and daemon speak different protocol versions.
pub(crate) const VERSION_MISMATCH: i64 = -32011;
/// herd: the request line exceeded [`MAX_REQUEST_BYTES`].
pub(crate) const TOO_LARGE: i64 = -32012;
/// herd: the first request was not `hello`.
pub(crate) const HANDSHAKE_REQUIRED: i64 = -32013;
/// herd: the peer is another user; the connection is closed.
pub(crate) const PEER_REFUSED: i64 = -32015;
/// herd: the operation is not supported by this daemon.
pub(crate) const UNSUPPORTED: i64 = -32014;
/// herd: the registry refused the operation (e.g. a handoff over the cap); `data`
/// names the reason.
pub(crate) const REFUSED: i64 = -32016;
/// herd: restart-safe dispatch refused the spawn (B34); `data` carries
/// `infrastructure` (true when the host, not the job, is at fault).
pub(crate) const DISPATCH_FAILED: i64 = -32017;
/// The daemon serves as many connections as it may (`max_connections`); the
/// message names the limit.
pub(crate) const TOO_MANY_CONNECTIONS: i64 = -32018;
/// The daemon is shutting down: no new job starts.
pub(crate) const SHUTTING_DOWN: i64 = -32019;
/// herd: the far host of a qualified id (`NAME:proc_…`) does not answer; the
/// message says since when and the door's last words, `data.host` names it
/// (capability `hosts`; the CLI exits 3).
pub(crate) const HOST_UNREACHABLE: i64 = -32020;
/// The disk holding the home is full: the spawn started nothing (the message
/// names the free space and the path). The CLI exits 1.
pub(crate) const DISK_FULL: i64 = -32021;

/// A request line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Request {
    /// Always "2.0".
    pub(crate) jsonrpc: String,
    /// The request id; absent for notifications (which the daemon ignores).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) id: Option<Value>,
    /// The method name.
    pub(crate) method: String,
    /// The parameters object.
    #[serde(default)]
    pub(crate) params: Value,
}

/// An error object.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct RpcError {
    /// One of the codes above.
    pub(crate) code: i64,
    /// A sentence for the user.
    pub(crate) message: String,
    /// Structured detail (the guard verdict, the ids that matched).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) data: Option<Value>,
}

impl RpcError {
    /// An error without data.
    pub(crate) fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }
}

/// A response line.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Response {
    /// Always "2.0".
    pub(crate) jsonrpc: String,
    /// The id of the request answered (null when it could not be read).
    #[serde(default)]
    pub(crate) id: Value,
    /// The result, on success.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) result: Option<Value>,
    /// The error, on failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) error: Option<RpcError>,
    /// Set on stream notifications instead of `id`/`result`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) method: Option<String>,
    /// The notification's payload.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) params: Option<Value>,
}

impl Response {
    /// A success answer.
    pub(crate) fn ok(id: Value, result: Value) -> Response {
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
    pub(crate) fn err(id: Value, error: RpcError) -> Response {
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
    pub(crate) fn notification(method: &str, params: Value) -> Response {
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
    pub(crate) fn to_line(&self) -> Vec<u8> {
        let mut line = serde_json::to_vec(self).expect("a Response always serialises");
        line.push(b'\n');
        line
    }
}

/// What [`read_line`] found.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// A complete line (without its newline) is in the buffer.
    Complete,
    /// The line exceeded the limit; it was discarded up to and including its newline.
    TooLong,
    /// The peer closed the connection.
    Eof,
}

/// The method of a raw output frame (capability `logs.raw`): its header line names
/// how many bytes of output follow it, unescaped.
pub(crate) const LOG_BYTES: &str = "log.bytes";

/// The header line of a `log.bytes` frame of `len` bytes, newline included.
pub(crate) fn log_bytes_header(len: usize) -> Vec<u8> {
    let mut line =
        format!(r#"{{"jsonrpc":"2.0","id":null,"method":"{LOG_BYTES}","params":{{"len":{len}}}}}"#)
            .into_bytes();
    line.push(b'\n');
    line
}

/// Reads one newline-terminated line into `buf` (cleared first), never holding more
/// than `limit` bytes.
///
/// # Errors
/// The underlying read error.
pub(crate) async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    buf: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<Line> {
    buf.clear();
    let mut discarding = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(if discarding {
                Line::TooLong
            } else if buf.is_empty() {
                Line::Eof
            } else {
                Line::Complete
            });
        }
        let (chunk, found) = match memchr_newline(available) {
            Some(idx) => (&available[..idx], Some(idx)),
            None => (available, None),
        };
        if !discarding {
            if buf.len() + chunk.len() > limit {
                discarding = true;
                buf.clear();
            } else {
                buf.extend_from_slice(chunk);
            }
        }
        let consumed = found.map_or(available.len(), |idx| idx + 1);
        reader.consume(consumed);
        if found.is_some() {
            return Ok(if discarding {
                Line::TooLong
            } else {
                Line::Complete
            });
        }
    }
}

/// The index of the first `\n`.
fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

#[cfg(test)]
mod tests;
