//! Streaming redaction for routes that deliver output in chunks.
//!
//! A secret can arrive split across two reads (`...sk-proj-AB` then `CD...`).
//! Redacting each chunk alone would miss it, so the stream holds back the
//! unfinished tail: everything after the last newline (no family except private
//! keys spans a newline), and an unterminated `-----BEGIN` block. The held text is
//! emitted, redacted, with a later chunk or by `finish`.
//!
//! Invariant: memory is bounded. When the held text exceeds `MAX_HELD_BYTES`
//! (a very long line, a runaway key block), all but the last `KEEP_BYTES` are
//! emitted, cut at whitespace and never inside a match.
//!
//! Invariant: the concatenation of everything `push` and `finish` return equals
//! `Redactor::redact` of the concatenated input, except that a secret longer than
//! `KEEP_BYTES` inside a line longer than `MAX_HELD_BYTES` may be cut.

use std::sync::Arc;

use super::{RedactMode, Redactor};

/// Held text above which the stream emits part of a line.
const MAX_HELD_BYTES: usize = 64 * 1024;
/// How much of a long line stays held after a forced emit.
const KEEP_BYTES: usize = 4 * 1024;

/// A redactor for one chunked output stream.
#[derive(Debug)]
pub struct StreamRedactor {
    redactor: Arc<Redactor>,
    mode: RedactMode,
    /// Input not yet emitted (unredacted).
    held: String,
}

impl StreamRedactor {
    /// A stream redacting in `mode`.
    pub fn new(redactor: Arc<Redactor>, mode: RedactMode) -> StreamRedactor {
        StreamRedactor {
            redactor,
            mode,
            held: String::new(),
        }
    }

    /// Feeds one chunk; returns the redacted text that is safe to emit now
    /// (possibly empty).
    pub fn push(&mut self, chunk: &str) -> String {
        self.held.push_str(chunk);
        let cut = self.safe_cut();
        if cut == 0 {
            return String::new();
        }
        let rest = self.held.split_off(cut);
        let ready = std::mem::replace(&mut self.held, rest);
        self.redactor.redact(&ready, self.mode).into_owned()
    }

    /// Emits everything still held, redacted. The stream can be reused after.
    pub fn finish(&mut self) -> String {
        let ready = std::mem::take(&mut self.held);
        self.redactor.redact(&ready, self.mode).into_owned()
    }

    /// Bytes currently held back.
    pub fn held_bytes(&self) -> usize {
        self.held.len()
    }

    /// Where the held text can be cut: everything before is emitted.
    fn safe_cut(&self) -> usize {
        let held = &self.held;
        let mut cut = held.rfind('\n').map_or(0, |idx| idx + 1);
        // An open private-key block stays held until its END line arrives.
        if let Some(begin) = held[..cut].rfind("-----BEGIN")
            && !held[begin..cut].contains("-----END")
        {
            cut = begin;
        }
        if held.len() - cut <= MAX_HELD_BYTES {
            return cut;
        }
        // Forced emit of a long line: keep the tail, cut at whitespace, never
        // inside a complete match.
        let mut forced = held.len() - KEEP_BYTES;
        while !held.is_char_boundary(forced) {
            forced -= 1;
        }
        if let Some(ws) = held[cut..forced].rfind(char::is_whitespace) {
            forced = cut + ws + 1;
        }
        for (start, end) in self.redactor.match_spans(held, self.mode) {
            if start < forced && forced < end {
                forced = start;
            }
        }
        forced.max(cut)
    }
}
