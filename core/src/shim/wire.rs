//! The shim's protocols: frames and messages, shared by both ends.
//!
//! One framing carries every link between the daemon, the launcher and the shims
//! ([`Framing::Lengths`]): an 8-byte prefix (the header's length and the body's, both
//! 32-bit little-endian), the JSON header, then the raw body (stdin data, at most
//! [`MAX_BODY_BYTES`] on a socket). Launch specs and ready answers travel in it on the
//! launcher's and a standalone shim's stdin and stdout, and the socket's messages do
//! once both ends said so in their `hello`.
//!
//! The socket's `hello` itself is always a protocol-1 frame ([`Framing::Lines`]: one
//! JSON header line, then `len` body bytes when the header has a `len` field), because
//! shims outlive the daemon: a daemon upgraded and restarted must still reach a shim
//! started by the binary before it, and that shim reads nothing but lines. The daemon's
//! hello names its protocol and its capabilities; the shim answers with the protocol
//! both speak (the lower of the two) and its own capabilities, and when both announce
//! [`CAP_FRAMES`] every later frame on that connection, both ways, is a length-prefixed
//! one. Both ends parse incrementally with [`FrameReader`], so a frame may arrive in any
//! number of reads. An op a peer does not know is answered with `error` and the
//! connection goes on, so a newer daemon can probe an older shim.

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
    /// First frame (always a line): the daemon's protocol and capabilities.
    Hello {
        protocol: u32,
        daemon: String,
        /// What the daemon can do beyond its protocol (absent from protocol 1).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        capabilities: Vec<String>,
    },
    /// Send one `grew` once the log holds more than `after` bytes. With
    /// `mark_lag` (absent from an older daemon), `grew` and `exit` carry the
    /// newest key mark at least that many bytes before the log's end.
    Want {
        after: u64,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mark_lag: Option<u64>,
    },
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
    /// Answer to the daemon's `hello` (always a line): the protocol both speak and the
    /// shim's capabilities.
    Hello {
        protocol: u32,
        shim_pid: i32,
        pid: i32,
        pgid: i32,
        progress: Progress,
        /// What the shim can do beyond its protocol (absent from protocol 1).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        capabilities: Vec<String>,
    },
    /// The log grew past the `want` mark.
    Grew {
        progress: Progress,
        /// The key mark the `want` asked for, when the shim has one (absent from
        /// an older shim).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mark: Option<KeyMark>,
    },
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
        /// As in `grew`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        mark: Option<KeyMark>,
    },
    /// A frame the shim did not understand.
    Error { message: String },
}

/// The private-key state of the log at a line start: whether a block is open at
/// byte `at` of the log, which starts a line (the shim's key index read every
/// byte before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyMark {
    pub(crate) at: u64,
    pub(crate) open: bool,
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

/// The capability of length-prefixed frames after the hello (protocol 2).
pub(crate) const CAP_FRAMES: &str = "frames";

/// Every capability this build announces in its hello.
pub(crate) fn capabilities() -> Vec<String> {
    vec![CAP_FRAMES.to_owned()]
}

/// Whether a hello's `capabilities` include length-prefixed frames.
pub(crate) fn frames_agreed(capabilities: &[String]) -> bool {
    capabilities.iter().any(|c| c == CAP_FRAMES)
}

/// The length of a [`Framing::Lengths`] frame's prefix.
const PREFIX_BYTES: usize = 8;

/// How frames are delimited on a link.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) enum Framing {
    /// Protocol 1: a JSON header line, then `len` body bytes; every `hello`.
    #[default]
    Lines,
    /// The header's and the body's length (u32 LE each), the header, the body.
    Lengths,
}

/// Why a message could not be encoded (nothing was appended then).
#[derive(Debug, thiserror::Error)]
pub(crate) enum EncodeError {
    #[error("shim message not encoded as JSON: {0}")]
    Json(#[from] serde_json::Error),
    #[error("shim frame part of {0} bytes does not fit a frame's 32-bit length")]
    TooLong(usize),
}

impl Framing {
    /// Appends one frame of `message` and `body` to `out`; on an error `out` is left as
    /// it was (no partial frame is ever sent).
    ///
    /// # Errors
    /// [`EncodeError`]: a message that does not serialise (a broken invariant of this
    /// module's own types), or a part too long for the length prefix.
    pub(crate) fn encode<T: Serialize>(
        self,
        message: &T,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        let start = out.len();
        let result = self.encode_unchecked(message, body, out);
        if result.is_err() {
            out.truncate(start);
        }
        result
    }

    fn encode_unchecked<T: Serialize>(
        self,
        message: &T,
        body: &[u8],
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        match self {
            Framing::Lines => {
                serde_json::to_writer(&mut *out, message)?;
                out.push(b'\n');
            }
            Framing::Lengths => {
                let start = out.len();
                out.extend_from_slice(&[0; PREFIX_BYTES]);
                serde_json::to_writer(&mut *out, message)?;
                let header = out.len() - start - PREFIX_BYTES;
                let header_len = u32::try_from(header).map_err(|_| EncodeError::TooLong(header))?;
                let body_len =
                    u32::try_from(body.len()).map_err(|_| EncodeError::TooLong(body.len()))?;
                out[start..start + 4].copy_from_slice(&header_len.to_le_bytes());
                out[start + 4..start + PREFIX_BYTES].copy_from_slice(&body_len.to_le_bytes());
            }
        }
        out.extend_from_slice(body);
        Ok(())
    }
}

/// Appends one frame to `out`, logging instead of failing: for the shim's and the
/// link's own messages, whose encoding cannot fail but for a broken invariant.
pub(crate) fn encode<T: Serialize>(framing: Framing, message: &T, body: &[u8], out: &mut Vec<u8>) {
    if let Err(error) = framing.encode(message, body, out) {
        tracing::error!(%error, "shim frame not encoded");
    }
}

/// Why a peer's bytes are not a frame; the connection is then dropped.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FrameError {
    /// The header is longer than the link allows.
    #[error("frame header longer than {0} bytes")]
    HeaderTooLong(usize),
    /// The body is longer than the link allows.
    #[error("frame body of {0} bytes is longer than the {1} a frame may carry")]
    BodyTooLong(usize, usize),
}

/// One parsed frame: the header's JSON and its body.
#[derive(Debug)]
pub(crate) struct Frame {
    pub(crate) header: Vec<u8>,
    pub(crate) body: Vec<u8>,
}

/// Incremental frame parser: feed bytes as they arrive, take whole frames out.
#[derive(Debug)]
pub(crate) struct FrameReader {
    buf: Vec<u8>,
    framing: Framing,
    max_header: usize,
    max_body: usize,
}

impl Default for FrameReader {
    /// A socket's reader: lines first (the hello), the socket's limits.
    fn default() -> FrameReader {
        FrameReader::new(Framing::Lines, MAX_HEADER_BYTES, MAX_BODY_BYTES)
    }
}

/// Only the `len` field of a header, to know how long its body is.
#[derive(Deserialize)]
struct BodyLen {
    #[serde(default)]
    len: usize,
}

impl FrameReader {
    /// A reader of `framing` frames of at most `max_header` and `max_body` bytes.
    pub(crate) fn new(framing: Framing, max_header: usize, max_body: usize) -> FrameReader {
        FrameReader {
            buf: Vec::new(),
            framing,
            max_header,
            max_body,
        }
    }

    /// Parses the bytes from here on (those already received included) as `framing`.
    pub(crate) fn set_framing(&mut self, framing: Framing) {
        self.framing = framing;
    }

    /// Appends received bytes.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next complete frame, `Ok(None)` when more bytes are needed.
    ///
    /// # Errors
    /// [`FrameError`] when the peer sent something no valid frame starts with.
    pub(crate) fn next(&mut self) -> Result<Option<Frame>, FrameError> {
        let (header_at, header_len, body_len) = match self.framing {
            Framing::Lines => {
                let Some(nl) = memchr::memchr(b'\n', &self.buf) else {
                    if self.buf.len() > self.max_header {
                        return Err(FrameError::HeaderTooLong(self.max_header));
                    }
                    return Ok(None);
                };
                // A header that is not JSON has no body; the caller answers its error.
                let len = serde_json::from_slice::<BodyLen>(&self.buf[..nl]).map_or(0, |b| b.len);
                (0, nl, len)
            }
            Framing::Lengths => {
                let Some(prefix) = self.buf.first_chunk::<PREFIX_BYTES>() else {
                    return Ok(None);
                };
                let mut header = [0u8; 4];
                let mut body = [0u8; 4];
                header.copy_from_slice(&prefix[..4]);
                body.copy_from_slice(&prefix[4..]);
                let header = u32::from_le_bytes(header) as usize;
                let body = u32::from_le_bytes(body) as usize;
                (PREFIX_BYTES, header, body)
            }
        };
        if header_len > self.max_header {
            return Err(FrameError::HeaderTooLong(self.max_header));
        }
        if body_len > self.max_body {
            return Err(FrameError::BodyTooLong(body_len, self.max_body));
        }
        // A line's newline sits between its header and its body.
        let body_at = header_at + header_len + usize::from(self.framing == Framing::Lines);
        if self.buf.len() < body_at + body_len {
            return Ok(None);
        }
        let rest = self.buf.split_off(body_at + body_len);
        let mut frame = std::mem::replace(&mut self.buf, rest);
        let body = frame.split_off(body_at);
        frame.truncate(header_at + header_len);
        frame.drain(..header_at);
        Ok(Some(Frame {
            header: frame,
            body,
        }))
    }

    /// Bytes received but not yet taken as frames.
    pub(crate) fn pending_bytes(&self) -> usize {
        self.buf.len()
    }

    /// The bytes received but not yet taken as frames, for the reader that goes on
    /// with the connection.
    pub(crate) fn into_pending(self) -> Vec<u8> {
        self.buf
    }
}

#[cfg(test)]
mod tests;
