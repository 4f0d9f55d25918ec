//! The incremental query scanner.
//!
//! The scanner is a tiny state machine over one buffer of pending bytes. Outside a
//! sequence it jumps from ESC to ESC with `memchr`, copying the text between them in
//! one go; a chunk with no ESC and nothing pending is handed back borrowed, without
//! a copy. Inside a sequence each byte either extends a possible query, completes
//! one (the reply is produced and the bytes are dropped from the output), or proves
//! the bytes are not a query (they are released as output, byte for byte). A new
//! ESC inside a pending sequence releases the pending bytes and starts over, so an
//! interrupted query never swallows the one after it.

use std::borrow::Cow;
use std::io::Write as _;

use crate::queries::{Query, QueryMatch, match_query};

const ESC: u8 = 0x1b;

/// The most bytes an unfinished sequence may hold: `ESC [ ? <10 digits> $ p`.
pub const MAX_PENDING: usize = 15;

/// The result of feeding one chunk: output to keep and replies to write back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scan<'a> {
    /// Bytes that belong in the captured output, queries removed. Borrowed from the
    /// chunk when nothing had to change.
    pub output: Cow<'a, [u8]>,
    /// Replies to write back to the PTY master, in order.
    pub replies: Vec<u8>,
}

/// What the pending bytes are, so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Status {
    /// A proper prefix of some query.
    Prefix,
    /// A whole query.
    Complete(Query),
    /// Not a query.
    NoMatch,
}

/// Incremental scanner for one PTY session.
#[derive(Debug, Clone)]
pub struct Scanner {
    rows: u16,
    cols: u16,
    cursor: (u16, u16),
    /// Invariant: empty, or starts with ESC and is a proper prefix of a query;
    /// never longer than `MAX_PENDING`.
    pending: Vec<u8>,
    stripped_bytes: u64,
    n_queries: u64,
    /// A real terminal is attached: queries stay in the output, unanswered, for it
    /// to answer.
    passthrough: bool,
}

impl Scanner {
    /// A scanner for a terminal of `rows` x `cols`, cursor reported at 1;1.
    pub fn new(rows: u16, cols: u16) -> Scanner {
        Scanner {
            rows,
            cols,
            cursor: (1, 1),
            pending: Vec::with_capacity(MAX_PENDING),
            stripped_bytes: 0,
            n_queries: 0,
            passthrough: false,
        }
    }

    /// Updates the size reported for `ESC[18t` (after a resize).
    pub fn set_size(&mut self, rows: u16, cols: u16) {
        self.rows = rows;
        self.cols = cols;
    }

    /// Sets the cursor position reported for `ESC[6n`, for callers that track it.
    pub fn set_cursor(&mut self, row: u16, col: u16) {
        self.cursor = (row, col);
    }

    /// While `on`, a real terminal is attached (`herd attach`): a query is left in
    /// the output, byte for byte, and not answered, so that terminal answers it with
    /// what it really shows (its reply reaches the job as typed input). Off again, the
    /// scanner answers as before.
    pub fn set_passthrough(&mut self, on: bool) {
        self.passthrough = on;
    }

    /// Whether queries are left for an attached terminal.
    pub fn passthrough(&self) -> bool {
        self.passthrough
    }

    /// Bytes removed from the output because they were answered queries.
    pub fn stripped_bytes(&self) -> u64 {
        self.stripped_bytes
    }

    /// Queries answered so far.
    pub fn n_queries(&self) -> u64 {
        self.n_queries
    }

    /// Feeds one chunk as read from the PTY master.
    pub fn feed<'a>(&mut self, chunk: &'a [u8]) -> Scan<'a> {
        if self.pending.is_empty() && is_passthrough(chunk) {
            return Scan {
                output: Cow::Borrowed(chunk),
                replies: Vec::new(),
            };
        }
        let mut output = Vec::with_capacity(chunk.len() + self.pending.len());
        let mut replies = Vec::new();
        let mut idx = 0;
        while idx < chunk.len() {
            if self.pending.is_empty() {
                match memchr::memchr(ESC, &chunk[idx..]) {
                    None => {
                        output.extend_from_slice(&chunk[idx..]);
                        break;
                    }
                    Some(off) => {
                        output.extend_from_slice(&chunk[idx..idx + off]);
                        self.pending.push(ESC);
                        idx += off + 1;
                    }
                }
                continue;
            }
            let byte = chunk[idx];
            idx += 1;
            if byte == ESC {
                output.extend_from_slice(&self.pending);
                self.pending.clear();
                self.pending.push(ESC);
                continue;
            }
            self.pending.push(byte);
            match classify(&self.pending) {
                Status::Prefix => {}
                Status::Complete(_) if self.passthrough => {
                    output.extend_from_slice(&self.pending);
                    self.pending.clear();
                }
                Status::Complete(query) => {
                    self.reply(query, &mut replies);
                    self.stripped_bytes += self.pending.len() as u64;
                    self.n_queries += 1;
                    self.pending.clear();
                }
                Status::NoMatch => {
                    output.extend_from_slice(&self.pending);
                    self.pending.clear();
                }
            }
        }
        Scan {
            output: Cow::Owned(output),
            replies,
        }
    }

    /// Returns the incomplete escape sequence held at end of stream, once; later
    /// calls return nothing until more bytes are fed.
    pub fn flush(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.pending)
    }

    fn reply(&self, query: Query, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = match query {
            Query::Status => out.write_all(b"\x1b[0n"),
            Query::Cursor => write!(out, "\x1b[{};{}R", self.cursor.0, self.cursor.1),
            Query::Size => write!(out, "\x1b[8;{};{}t", self.rows, self.cols),
            // Never classified as complete: not answered.
            Query::Other => Ok(()),
            Query::Mode => {
                // pending is `ESC [ ? digits $ p`.
                let digits = &self.pending[3..self.pending.len() - 2];
                out.extend_from_slice(b"\x1b[?");
                out.extend_from_slice(digits);
                out.write_all(b";0$y")
            }
        };
    }
}

/// Whether `chunk` holds no query and ends outside any possible query, so that
/// (with nothing pending before it) its output is the chunk itself.
///
/// This is the fast path for ordinary coloured output: each ESC is classified in
/// place over at most `MAX_PENDING` bytes, without copying anything.
fn is_passthrough(chunk: &[u8]) -> bool {
    for esc_idx in memchr::memchr_iter(ESC, chunk) {
        // Quick reject: every query starts `ESC [` then one of `5 6 1 ?`; colour
        // and cursor-motion sequences fail here after two byte comparisons.
        match chunk.get(esc_idx + 1..esc_idx + 3) {
            Some([b'[', b'5' | b'6' | b'1' | b'?']) => {}
            Some([b'[', _]) => continue,
            Some([_, _]) => continue,
            _ => {
                // Fewer than two bytes after ESC: `ESC` or `ESC [` at the very
                // end is a possible query, anything else is not.
                match chunk.get(esc_idx + 1) {
                    None | Some(b'[') => return false,
                    Some(_) => continue,
                }
            }
        }
        let window = &chunk[esc_idx..chunk.len().min(esc_idx + MAX_PENDING)];
        let mut settled = false;
        for end in 2..=window.len() {
            if window[end - 1] == ESC {
                // A new ESC ends this sequence as plain output; the next iteration
                // classifies the new one.
                settled = true;
                break;
            }
            match classify(&window[..end]) {
                Status::Prefix => {}
                Status::NoMatch => {
                    settled = true;
                    break;
                }
                Status::Complete(_) => return false,
            }
        }
        if !settled {
            // The window ended while the bytes could still become a query: either
            // the chunk ends mid-sequence (must be held) or the window is exhausted.
            return false;
        }
    }
    true
}

/// Classifies pending bytes, which start with ESC, against the queries the
/// scanner answers (the one list: [`crate::queries`]).
fn classify(p: &[u8]) -> Status {
    match match_query(p, true) {
        QueryMatch::Prefix => Status::Prefix,
        QueryMatch::Query(query, _) => Status::Complete(query),
        QueryMatch::NoMatch => Status::NoMatch,
    }
}

#[cfg(test)]
mod tests;
