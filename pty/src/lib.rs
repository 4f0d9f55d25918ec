//! herd-pty: answers the terminal queries a program sends through a PTY (B7).
//!
//! Owns: a sans-IO scanner that takes bytes read from a PTY master and returns the
//! output to keep plus the replies to write back.
//! Never: opens a file descriptor, starts a thread or reads the clock.
//! Depended on by: `herd-core` (its PTY reader) and `herd-cli`.

use std::borrow::Cow;

/// The result of feeding one chunk: output to keep and replies to write back.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Scan<'a> {
    /// Bytes that belong in the captured output, queries removed.
    pub output: Cow<'a, [u8]>,
    /// Replies to write back to the PTY master, in order.
    pub replies: Vec<u8>,
}

/// Incremental scanner for one PTY session.
#[derive(Debug, Clone)]
pub struct Scanner {
    rows: u16,
    cols: u16,
}

impl Scanner {
    /// A scanner for a terminal of `rows` x `cols`.
    pub fn new(rows: u16, cols: u16) -> Scanner {
        Scanner { rows, cols }
    }

    /// Updates the size reported for `ESC[18t`.
    pub fn set_size(&mut self, rows: u16, cols: u16) {
        self.rows = rows;
        self.cols = cols;
    }

    /// Feeds one chunk as read from the PTY master.
    pub fn feed<'a>(&mut self, chunk: &'a [u8]) -> Scan<'a> {
        Scan {
            output: Cow::Borrowed(chunk),
            replies: Vec::new(),
        }
    }

    /// Returns an incomplete escape sequence held at end of stream, once.
    pub fn flush(&mut self) -> Vec<u8> {
        Vec::new()
    }
}
