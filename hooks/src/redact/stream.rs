//! Streaming redaction for routes that deliver output as it comes (follow, attach,
//! a live view) or in chunks.
//!
//! A secret can arrive split across two reads (`...sk-proj-AB` then `CD...`), and a
//! private-key block across many. The stream emits whole lines (a line ends at `\n`
//! or `\r`: no token spans either), redacted, and carries the private-key state from
//! one line to the next, so a block is masked line by line as it arrives and never
//! held whole. The unfinished last line is held until it ends, until the stream goes
//! idle (then all of it that cannot still become a secret is released: a prompt, an
//! echoed keystroke, a progress bar), or until `finish`.
//!
//! Invariant: memory is bounded. When the held line exceeds `MAX_HELD_BYTES`, all
//! but the last `KEEP_BYTES` are emitted, cut at whitespace (or anywhere, when a match
//! covers the last whitespace) and never inside a match. One match longer than that
//! (a 100 KiB key written as one string) is held until the line goes past it.
//!
//! Invariant: the work per pushed byte is bounded. A push looks for a line end only
//! in what it added (the held text never holds one between calls), and a held line
//! that a match keeps from being cut is judged again only once it has doubled, so a
//! long line fed in small chunks costs time linear in its length, not quadratic
//! (fuzz finding: a long key in one string, fed 19 bytes at a time, was judged
//! whole at every push).
//!
//! Invariant: the concatenation of everything `push`, `release_idle` and `finish`
//! return has the same lines as `Redactor::redact` of the concatenated input, and
//! masks every secret that does; a token longer than `KEEP_BYTES` inside a line
//! longer than `MAX_HELD_BYTES` may be cut.

use std::sync::Arc;

use super::{RedactMode, Redactor, context, splice_continuing};

#[cfg(test)]
mod tests;

/// Held text above which the stream emits part of a line.
const MAX_HELD_BYTES: usize = 64 * 1024;
/// How much of a long line stays held after a forced emit.
const KEEP_BYTES: usize = 4 * 1024;

/// A redactor for one output stream.
#[derive(Debug)]
pub struct StreamRedactor {
    redactor: Arc<Redactor>,
    mode: RedactMode,
    /// Input not yet emitted (unredacted).
    ///
    /// Invariant: between calls, at most one unfinished line: no `\n` or `\r`.
    held: String,
    /// The held line is not judged for a forced cut before it has this many bytes:
    /// twice what it had when a match last kept every cut back (0: no such match).
    judge_again_bytes: usize,
    /// Bytes the cut search has scanned so far (the tests bound the work per byte).
    #[cfg(test)]
    n_judged_bytes: usize,
    /// The start of the unfinished line that was already emitted (on idle, or a
    /// forced cut), raw: context for matching the rest of the line (at most
    /// `KEEP_BYTES`).
    line_shown: String,
    /// The replacement shown for a match that ran to the end of `line_shown` (a key
    /// line masked on idle): the rest of that match adds nothing.
    shown_mask: Option<String>,
    /// A private-key block is open where `line_shown` (or `held`, when nothing of
    /// the line was shown) starts.
    key_open: bool,
}

impl StreamRedactor {
    /// A stream redacting in `mode`.
    pub fn new(redactor: Arc<Redactor>, mode: RedactMode) -> StreamRedactor {
        StreamRedactor {
            redactor,
            mode,
            held: String::new(),
            judge_again_bytes: 0,
            #[cfg(test)]
            n_judged_bytes: 0,
            line_shown: String::new(),
            shown_mask: None,
            key_open: false,
        }
    }

    /// A stream that starts inside a private-key block when `key_open` (the output
    /// before the stream's first byte ended inside one; see `Redactor::key_open_at_end`).
    pub fn starting_in_key(mut self, key_open: bool) -> StreamRedactor {
        self.key_open = key_open;
        self
    }

    /// Feeds one chunk; returns the redacted text that is safe to emit now
    /// (possibly empty).
    pub fn push(&mut self, chunk: &str) -> String {
        let from = self.held.len();
        self.held.push_str(chunk);
        let cut = self.safe_cut(from);
        self.emit(cut)
    }

    /// [`Self::push`] of a chunk the caller gives away: with nothing held (a
    /// stream fed whole lines), the chunk becomes the held text, and whole lines
    /// with nothing to mask go out without a copy.
    pub(crate) fn push_owned(&mut self, chunk: String) -> String {
        let from = self.held.len();
        if self.held.is_empty() {
            self.held = chunk;
        } else {
            self.held.push_str(&chunk);
        }
        let cut = self.safe_cut(from);
        self.emit(cut)
    }

    /// The stream went idle: emits the held unfinished line except a trailing part
    /// that could still become a secret (see `Redactor::hold_point`).
    pub fn release_idle(&mut self) -> String {
        if self.held.is_empty() {
            return String::new();
        }
        // Judged with the part of the line already shown: a token whose head went
        // out on an earlier idle is still a token-like run, so its next characters
        // stay held instead of going out a few at a time before it can match.
        let cut = if self.line_shown.is_empty() {
            self.redactor.hold_point(&self.held, self.mode)
        } else {
            let shown = self.line_shown.len();
            let mut line = String::with_capacity(shown + self.held.len());
            line.push_str(&self.line_shown);
            line.push_str(&self.held);
            self.redactor
                .hold_point(&line, self.mode)
                .saturating_sub(shown)
        };
        if cut > 0 {
            self.judge_again_bytes = 0;
        }
        self.emit(cut)
    }

    /// Emits everything still held, redacted. The stream can be reused after.
    pub fn finish(&mut self) -> String {
        let cut = self.held.len();
        let out = self.emit(cut);
        self.judge_again_bytes = 0;
        self.key_open = false;
        self.line_shown.clear();
        self.shown_mask = None;
        out
    }

    /// Bytes currently held back.
    pub fn held_bytes(&self) -> usize {
        self.held.len()
    }

    /// Whether nothing of the unfinished line was emitted yet (no idle release or
    /// forced cut showed its start): what was emitted ends where the held text
    /// starts, at a line's start.
    pub fn nothing_of_the_line_shown(&self) -> bool {
        self.line_shown.is_empty() && self.shown_mask.is_none()
    }

    /// Sets whether a private-key block is open where the held text starts.
    pub(crate) fn set_key_open(&mut self, open: bool) {
        self.key_open = open;
    }

    /// Whether a private-key block is open at the end of what was emitted.
    pub fn is_in_key(&self) -> bool {
        self.key_open
    }

    /// Emits `held[..cut]`, redacted, carrying the key state.
    fn emit(&mut self, cut: usize) -> String {
        if cut == 0 {
            return String::new();
        }
        let rest = self.held.split_off(cut);
        let ready = std::mem::replace(&mut self.held, rest);
        let n_shown = self.line_shown.len();
        let text = if n_shown == 0 {
            ready
        } else {
            let mut text = std::mem::take(&mut self.line_shown);
            text.push_str(&ready);
            text
        };
        let (found, open) = self.redactor.find(&text, self.mode, self.key_open);
        if n_shown == 0 && found.is_empty() && text.ends_with('\n') {
            // Whole lines with nothing to mask (most output): they go out as they
            // are, without a copy.
            self.shown_mask = None;
            self.key_open = open;
            return text;
        }
        let out = splice_continuing(&text, &found, n_shown, self.shown_mask.as_deref());
        self.shown_mask = None;
        // A `\r` ends what is emitted (a progress frame goes out live) but not the
        // line the key state is kept by: `50% done\r` then `MIIE…` is one line.
        match memchr::memrchr(b'\n', text.as_bytes()) {
            Some(idx) if idx + 1 == text.len() => self.key_open = open,
            last => {
                self.shown_mask = found
                    .last()
                    .filter(|f| f.end == text.len())
                    .map(|f| f.with.clone());
                // The line goes on: keep what was shown of it as context.
                let line_start = last.map_or(0, |idx| idx + 1);
                let mut keep_from = line_start.max(text.len().saturating_sub(KEEP_BYTES));
                // Of a long line, from the start of a line escaped in it (a block of
                // lines kept in one string) when one is in reach, with the key state
                // there: kept from inside a line's prefix, the rest of a key written
                // as one string would be read as no key (fuzz finding).
                let escaped = (keep_from > line_start)
                    .then(|| context::escaped_line_start(&text.as_bytes()[keep_from..]))
                    .flatten()
                    .map(|idx| keep_from + idx)
                    .filter(|&at| at < text.len());
                if let Some(at) = escaped {
                    keep_from = at;
                    self.key_open = self.redactor.key_open_after(&text[..at], self.key_open);
                } else if line_start > 0 {
                    self.key_open = self
                        .redactor
                        .key_state_after(&text[..line_start], self.key_open);
                }
                while !text.is_char_boundary(keep_from) {
                    keep_from += 1;
                }
                self.line_shown = text[keep_from..].to_owned();
            }
        }
        out
    }

    /// Where the held text can be cut: everything before is emitted. `from` is where
    /// the bytes pushed last start (no line end before it).
    fn safe_cut(&mut self, from: usize) -> usize {
        let bytes = self.held.as_bytes();
        let Some(tail) = bytes.get(from..) else {
            return 0;
        };
        #[cfg(test)]
        {
            self.n_judged_bytes += tail.len();
        }
        let cut = match memchr::memrchr2(b'\n', b'\r', tail) {
            Some(idx) => {
                // A new line: nothing is known of it yet.
                self.judge_again_bytes = 0;
                from + idx + 1
            }
            None => 0,
        };
        let line_bytes = self.held.len() - cut;
        if line_bytes <= MAX_HELD_BYTES || line_bytes < self.judge_again_bytes {
            return cut;
        }
        #[cfg(test)]
        {
            self.n_judged_bytes += line_bytes;
        }
        let forced = self.forced_cut(cut);
        self.judge_again_bytes = if forced > cut { 0 } else { 2 * line_bytes };
        forced.max(cut)
    }

    /// The forced cut of the long line `held[cut..]`: at the last whitespace before
    /// its last `KEEP_BYTES`, or else (none, or a match covers it) at their start;
    /// moved back to the start of a match it falls in: `cut` when one match covers
    /// the line from its start.
    fn forced_cut(&self, cut: usize) -> usize {
        let held = &self.held;
        let mut plain = held.len() - KEEP_BYTES;
        while !held.is_char_boundary(plain) {
            plain -= 1;
        }
        let (found, _) = self.redactor.find(&held[cut..], self.mode, self.key_open);
        let outside = |at: usize| {
            found
                .iter()
                .find(|f| cut + f.start < at && at < cut + f.end)
                .map_or(at, |f| cut + f.start)
        };
        held[cut..plain]
            .rfind(char::is_whitespace)
            .map(|ws| outside(cut + ws + 1))
            .filter(|&at| at > cut)
            .unwrap_or_else(|| outside(plain))
    }
}
