//! herd-pty: answers the terminal queries a program sends through a PTY.
//!
//! Some programs ask their terminal a question (cursor position, device status,
//! window size, a DEC private mode) and wait for the reply. herd's sessions have
//! no real terminal behind them, so without an answer they hang. [`Scanner`] takes
//! bytes read from the PTY master, in whatever chunks they arrived, and returns the
//! output to keep (the queries removed) and the replies to write back.
//!
//! Owns: the scanner and the reply formats.
//! Never: opens a file descriptor, starts a thread or reads the clock; `herd-core`
//! owns the PTY and writes the replies.
//! Depended on by: `herd-core` (its PTY reader) and `herd-cli`.
//!
//! Invariant: the output and replies depend only on the bytes seen so far, not on
//! how they were chunked. A query split across reads is answered once, when its
//! final byte arrives; the tests re-feed every case at every split point.
//!
//! Invariant: memory is bounded. At most [`MAX_PENDING`] bytes of an unfinished
//! escape sequence are held; the longest query is exactly that long, so anything
//! longer is not a query and is released as output.
//!
//! ```
//! let mut scanner = herd_pty::Scanner::new(30, 120);
//! let scan = scanner.feed(b"ready\x1b[6n");
//! assert_eq!(&scan.output[..], b"ready");
//! assert_eq!(scan.replies, b"\x1b[1;1R");
//! ```

mod queries;
mod scanner;

pub use queries::{Query, QueryMatch, match_query, unfinished_query_at};
pub use scanner::{MAX_PENDING, Scan, Scanner};
