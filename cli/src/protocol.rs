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

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

pub(crate) mod escape;

// The wire's types, codes and limits are herd-protocol's (`protocol/`), shared by the
// daemon, the CLI, the MCP server and the host link.
pub(crate) use herd_protocol::{
    DISK_FULL, DISPATCH_FAILED, GUARDED, HANDSHAKE_REQUIRED, HOST_UNREACHABLE, INTERNAL_ERROR,
    INVALID_PARAMS, INVALID_REQUEST, LOG_BYTES, MAX_REQUEST_BYTES, MAX_RESPONSE_BYTES,
    METHOD_NOT_FOUND, NOT_FOUND, PARSE_ERROR, PEER_REFUSED, PROTOCOL_VERSION, REFUSED, Request,
    Response, RpcError, SHUTTING_DOWN, TOO_LARGE, TOO_MANY_CONNECTIONS, UNSUPPORTED,
    VERSION_MISMATCH, log_bytes_header,
};

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
///
/// On x86_64 with SSE2, which every x86_64 has, rather than `memchr::memchr`: its
/// first call detects the CPU's features, some ten `cpuid`s, each a trap to the
/// hypervisor in a virtual machine (12 µs apiece where this was measured), which a
/// client, one short process per command, would pay for the first line it reads.
fn memchr_newline(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if let Some(newline) = memchr::arch::x86_64::sse2::memchr::One::new(b'\n') {
        return newline.find(bytes);
    }
    memchr::memchr(b'\n', bytes)
}

#[cfg(test)]
mod tests;
