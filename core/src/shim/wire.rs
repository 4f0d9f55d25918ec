//! The shim's socket protocol: frames and messages, shared by both ends.
//!
//! A frame is one JSON header line (at most [`MAX_HEADER_BYTES`], ending in `\n`),
//! followed by `len` raw bytes when the header carries a `len` field (stdin data, at
//! most [`MAX_BODY_BYTES`]). Both ends parse incrementally with [`FrameReader`], so a
//! frame may arrive in any number of reads.
//!
//! Every message has an `op`. The first frame on a connection is the daemon's
//! `hello` naming its protocol; the shim answers with its own `hello` (its protocol
//! and what it knows of the job). An op a peer does not know is answered with
//! `error` and the connection goes on, so a newer daemon can probe an older shim.

use serde::{Deserialize, Serialize};

use herd_persistence::ExitRecord;

/// The longest header line either end accepts.
pub(crate) const MAX_HEADER_BYTES: usize = 64 * 1024;
/// The longest body either end accepts.
pub(crate) const MAX_BODY_BYTES: usize = 1 << 20;

/// What the daemon sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum ToShim {
    /// First frame: the daemon's protocol.
    Hello { protocol: u32, daemon: String },
    /// Send one `grew` once the log holds more than `after` bytes.
    Want { after: u64 },
    /// Write the `len` body bytes to the job's input; answered by `done`.
    Stdin { id: u64, len: usize },
    /// Close the job's input (pipe) or send end-of-file (PTY); answered by `done`.
    Close { id: u64 },
    /// Set the PTY's window size; answered by `done`.
    Resize { id: u64, rows: u16, cols: u16 },
    /// Kill the job's whole tree (SIGTERM, the grace, SIGKILL, until it is empty) and
    /// end the session after what is already buffered; `source` is the termination
    /// source the exit record carries as `killed_by` (absent from an older daemon).
    Kill {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        source: Option<String>,
    },
    /// Whether a real terminal is attached to the session (`herd attach`): while it
    /// is, the PTY's queries (cursor position, status, size) go out with the output
    /// for that terminal to answer, and the shim does not answer them; it answers
    /// again once told `false` or when the daemon's connection drops. Not answered
    /// (an older shim answers `error` and goes on answering the queries itself).
    Terminal { attached: bool },
}

/// What the shim sends.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum FromShim {
    /// Answer to the daemon's `hello`.
    Hello {
        protocol: u32,
        shim_pid: i32,
        pid: i32,
        pgid: i32,
        progress: Progress,
    },
    /// The log grew past the `want` mark.
    Grew { progress: Progress },
    /// A stdin, close or resize request finished; `error` says why it failed.
    Done {
        id: u64,
        #[serde(default)]
        error: Option<String>,
    },
    /// The job is done: the exit record is written and the log closed.
    Exit {
        record: ExitRecord,
        progress: Progress,
    },
    /// A frame the shim did not understand.
    Error { message: String },
}

/// How far the shim's output has come.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Progress {
    /// Bytes in the log file.
    pub(crate) log_bytes: u64,
    /// Every byte ingested (the log's plus those past its cap).
    pub(crate) total_ingested: u64,
    /// Bytes that are not in the log.
    pub(crate) bytes_not_kept: u64,
}

/// Encodes one frame: the header line, then `body` when it is not empty.
pub(crate) fn encode<T: Serialize>(message: &T, body: &[u8], out: &mut Vec<u8>) {
    // A message of plain fields always serialises; an error here is a broken
    // invariant of this module's own types, reported instead of panicking.
    match serde_json::to_writer(&mut *out, message) {
        Ok(()) => {}
        Err(error) => {
            tracing::error!(%error, "shim frame not encoded");
            return;
        }
    }
    out.push(b'\n');
    out.extend_from_slice(body);
}

/// Why a peer's bytes are not a frame; the connection is then dropped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The header line is longer than [`MAX_HEADER_BYTES`].
    #[error("frame header longer than {MAX_HEADER_BYTES} bytes")]
    HeaderTooLong,
    /// The body is longer than [`MAX_BODY_BYTES`].
    #[error("frame body of {0} bytes is longer than {MAX_BODY_BYTES}")]
    BodyTooLong(usize),
}

/// One parsed frame: the header's JSON and its body.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) header: Vec<u8>,
    pub(crate) body: Vec<u8>,
}

/// Incremental frame parser: feed bytes as they arrive, take whole frames out.
#[derive(Debug, Default)]
pub(crate) struct FrameReader {
    buf: Vec<u8>,
}

/// Only the `len` field of a header, to know how long its body is.
#[derive(Deserialize)]
struct BodyLen {
    #[serde(default)]
    len: usize,
}

impl FrameReader {
    /// Appends received bytes.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    /// [`FrameError`] when the peer sent something no valid frame starts with.
    pub(crate) fn next(&mut self) -> Result<Option<Frame>, FrameError> {
        let Some(nl) = memchr::memchr(b'\n', &self.buf) else {
            if self.buf.len() > MAX_HEADER_BYTES {
                return Err(FrameError::HeaderTooLong);
            }
            return Ok(None);
        };
        if nl > MAX_HEADER_BYTES {
            return Err(FrameError::HeaderTooLong);
        }
        // A header that is not JSON has no body; the caller answers its error.
        let len = serde_json::from_slice::<BodyLen>(&self.buf[..nl]).map_or(0, |b| b.len);
        if len > MAX_BODY_BYTES {
            return Err(FrameError::BodyTooLong(len));
        }
        if self.buf.len() < nl + 1 + len {
            return Ok(None);
        }
        let rest = self.buf.split_off(nl + 1 + len);
        let mut frame = std::mem::replace(&mut self.buf, rest);
        let body = frame.split_off(nl + 1);
        frame.truncate(nl);
        Ok(Some(Frame {
            header: frame,
            body,
        }))
    }

    /// Bytes received but not yet taken as frames.
    #[cfg(test)]
    pub(crate) fn pending_bytes(&self) -> usize {
        self.buf.len()
    }
}

#[cfg(test)]
mod tests;
