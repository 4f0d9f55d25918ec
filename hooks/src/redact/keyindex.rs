//! The private-key state of a session's output, kept as the output is ingested, so
//! "is a block open at byte X" is a lookup instead of a read of the log before X.
//!
//! A block is open from the line after its BEGIN line to its END line or the first
//! line that cannot be key body (`keys`), and those lines are rare: a [`KeyIndex`]
//! records each block as the offsets of its BEGIN line's start and of its closing
//! line's start, fed the output as it arrives. While no block is open only lines
//! that could hold a marker are looked at (one vectorised pass finds the lines with
//! the start of a marker, and those with escapes or invisible characters, which
//! could hide one, if they hold a `-` at all: `prefilter`), each as a person
//! would see it; while one is open, every line
//! until it closes. Output of hidden bytes with no `-` (a run of NULs, binary)
//! costs a vectorised search per line, no reading as a person sees it. So a window
//! or a heartbeat deep in a long log, in a key however long, or after 20 MB of
//! `seq` output, learns the state at its start by a binary search.
//!
//! What the index has not seen it does not answer ([`KeyIndex::open_at`] is `None`):
//! output before it started (a session re-adopted after a restart, output the log
//! did not keep), and the lines after such a start until the first
//! line that decides the state on its own. The caller then asks the log
//! (`key_open_in_log`), as before.
//!
//! Invariant: for an offset the index answers, the answer is the state the state
//! machine reaches over the visible lines before it (at a line start), or the
//! state of the block the offset's line lies in (inside a line): a line inside a
//! block is taken as key body up to the offset, and the line that closes a block
//! is inside it up to its last mask (the rest of a block written as one string
//! with escaped newlines, which may end mid-line).

use std::borrow::Cow;

use super::{Found, context, keys, splice, visible};

mod prefilter;

/// An unfinished line longer than this is taken as ended there (memory stays
/// bounded; the stream redactor cuts long lines the same way).
const MAX_PENDING_BYTES: usize = 64 * 1024;

/// The most blocks kept; the oldest half is dropped beyond (then offsets before
/// the last dropped block's end are not answered).
const MAX_BLOCKS: usize = 16 * 1024;

/// The key blocks of one output, kept as it is ingested (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct KeyIndex {
    /// Offsets up to and including this one are not answered (`None`: none yet);
    /// the state is known exactly after it.
    known_from: Option<u64>,
    /// Blocks: the start of the BEGIN line, and the start of the line that closed
    /// the block (`None`: still open). Sorted, disjoint.
    blocks: Vec<(u64, Option<u64>)>,
    /// The unfinished last line (raw), which starts at `pending_at`.
    pending: Vec<u8>,
    pending_at: u64,
    /// Whether a block is open where `pending` starts.
    open: bool,
    /// Lines read as a person sees them (stripped and run through the state
    /// machine), for the tests of what is skipped.
    #[cfg(test)]
    lines_read: usize,
}

impl KeyIndex {
    /// An index of an output from its first byte (no block open there).
    pub fn new() -> KeyIndex {
        KeyIndex {
            known_from: Some(0),
            ..KeyIndex::default()
        }
    }

    /// An index that starts at output offset `at` without knowing the state there
    /// (a re-adopted session: what came before is in the log only).
    pub fn starting_at(at: u64) -> KeyIndex {
        let mut index = KeyIndex::new();
        index.restart(at);
        index
    }

    /// `n` bytes of output went by unseen (not read into memory): the index starts
    /// again after them, not knowing the state there.
    pub fn skip(&mut self, n: u64) {
        if n > 0 {
            let at = self.pending_at + self.pending.len() as u64 + n;
            self.restart(at);
        }
    }

    /// `n` bytes of output went by unseen, but whoever read them knows the state
    /// after them: they end at a line's start, inside a block or not (`open`), as
    /// another index over the same output gave it in [`Self::line_mark`]. The
    /// index answers from there on as if it had read them.
    pub fn skip_known(&mut self, n: u64, open: bool) {
        let at = self.pending_at + self.pending.len() as u64 + n;
        if at == 0 {
            *self = KeyIndex::new();
            return;
        }
        // The byte before `at` ends the line before it: offsets after it are
        // answered, and an open block reaches over `at`.
        *self = KeyIndex {
            known_from: Some(at - 1),
            blocks: if open {
                vec![(at - 1, None)]
            } else {
                Vec::new()
            },
            pending_at: at,
            open,
            ..KeyIndex::default()
        };
    }

    /// Where the unfinished last line starts and whether a block is open there,
    /// when the index knows it: what [`Self::skip_known`] of another index over
    /// the same output takes to go on from there without reading what came before.
    pub fn line_mark(&self) -> Option<(u64, bool)> {
        let known = self.known_from?;
        (self.pending_at > known || self.pending_at == 0).then_some((self.pending_at, self.open))
    }

    /// Forgets the blocks that closed before output offset `at` (a keeper that
    /// asks only for [`Self::line_mark`]s from there on): offsets up to the last
    /// such block's close are no longer answered.
    pub fn forget_before(&mut self, at: u64) {
        let closed = self
            .blocks
            .partition_point(|(_, end)| end.is_some_and(|end| end < at));
        if let Some(end) = closed.checked_sub(1).and_then(|last| self.blocks[last].1) {
            self.blocks.drain(..closed);
            self.known_from = self.known_from.map(|k| k.max(end));
        }
    }

    /// The number of blocks kept (the shim's memory test).
    pub fn blocks_kept(&self) -> usize {
        self.blocks.len()
    }

    fn restart(&mut self, at: u64) {
        *self = KeyIndex {
            known_from: if at == 0 { Some(0) } else { None },
            pending_at: at,
            ..KeyIndex::default()
        };
    }

    /// Feeds the next bytes of output.
    pub fn push(&mut self, chunk: &[u8]) {
        let mut rest = chunk;
        if !self.pending.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(nl) => {
                    self.pending.extend_from_slice(&rest[..nl]);
                    let line = std::mem::take(&mut self.pending);
                    self.line(&line, self.pending_at);
                    self.pending_at += line.len() as u64 + 1;
                    self.pending = line;
                    self.pending.clear();
                    rest = &rest[nl + 1..];
                }
                None => {
                    self.pending.extend_from_slice(rest);
                    self.cut_long_line();
                    return;
                }
            }
        }
        let complete = memchr::memrchr(b'\n', rest).map_or(0, |nl| nl + 1);
        self.lines(&rest[..complete], self.pending_at);
        self.pending_at += complete as u64;
        self.pending.extend_from_slice(&rest[complete..]);
        self.cut_long_line();
    }

    /// Whether a private-key block is open at output offset `at`; `None` when the
    /// index did not see what decides it (ask the log).
    pub fn open_at(&self, at: u64) -> Option<bool> {
        let known = self.known_from?;
        if at <= known {
            return (at == 0 && known == 0).then_some(false);
        }
        let idx = self.blocks.partition_point(|(begin, _)| *begin < at);
        Some(match idx.checked_sub(1).map(|i| self.blocks[i]) {
            Some((_, None)) => true,
            Some((_, Some(end))) => at <= end,
            None => false,
        })
    }

    /// An unfinished line over the cap is taken as ended: at the start of the last
    /// line escaped in it (a block of lines kept in one string) when it holds one,
    /// so the rest is judged from a line's start, not from inside a line's prefix.
    fn cut_long_line(&mut self) {
        if self.pending.len() <= MAX_PENDING_BYTES {
            return;
        }
        let cut = context::escaped_line_start(&self.pending)
            .filter(|&at| at < self.pending.len())
            .unwrap_or(self.pending.len());
        let rest = self.pending.split_off(cut);
        let line = std::mem::replace(&mut self.pending, rest);
        self.line(&line, self.pending_at);
        self.pending_at += line.len() as u64;
    }

    /// Complete lines `text` (each ending with a newline) at offset `base`.
    fn lines(&mut self, text: &[u8], base: u64) {
        let mut pos = 0;
        while pos < text.len() {
            if !self.open && self.known_from.is_some() {
                // Closed: go to the next line that could hold a marker (one pass
                // over the text for every kind of start, see `prefilter`).
                let Some(hit) = prefilter::next_candidate(text, pos) else {
                    return;
                };
                pos = memchr::memrchr(b'\n', &text[..hit])
                    .map_or(0, |nl| nl + 1)
                    .max(pos);
            }
            let end = memchr::memchr(b'\n', &text[pos..]).map_or(text.len(), |idx| pos + idx);
            self.line(&text[pos..end], base + pos as u64);
            pos = end + 1;
        }
    }

    /// One line (without its newline) starting at output offset `at`.
    fn line(&mut self, raw: &[u8], at: u64) {
        if !self.open && self.known_from.is_some() && memchr::memchr2(b'-', b'L', raw).is_none() {
            // Closed, and no marker can be seen: every marker holds a `-` but the
            // base64 one (`keys::encoded::NEEDLE`), which starts with `L`, and what a
            // person sees of a line is some of its characters (escapes and
            // invisible characters removed, overstruck ones replaced by later ones),
            // so a line with neither byte cannot open a block. Such a line (a run
            // of NULs, binary, escape-heavy output) costs one vectorised search.
            return;
        }
        #[cfg(test)]
        {
            self.lines_read += 1;
        }
        let text = String::from_utf8_lossy(raw);
        let stripped = visible::strip(&text);
        let seen = stripped.as_ref().map_or(text.as_ref(), |(copy, _)| copy);
        if self.known_from.is_none() {
            // A line that could go on with a block (a body line, or the rest of a
            // block written as one string) does not decide the state, nor does the
            // rest of an opener (an index started inside `-----BEGIN RSA PRI|VATE
            // KEY-----`: the block opened there; fuzz finding, it was called closed).
            if keys::could_be_body(seen)
                || keys::continues_string(seen).is_some()
                || keys::rest_of_opener(seen).is_some()
            {
                return;
            }
            // The first line that decides the state on its own.
            self.known_from = Some(at);
            self.open = false;
        }
        let before = self.open;
        let (spans, open) = keys::whole_line_spans(seen, before);
        self.open = open;
        // Inside the closing line the block reaches to its last mask: the line may
        // go on with a block written as one string (cut from the line's start, a
        // long line taken in parts), its END mid-line.
        let masked_to = || {
            let masked_to = spans.last().and_then(|&(_, end)| match &stripped {
                Some((_, map)) => end.checked_sub(1).and_then(|e| map.get(e)).map(|e| e + 1),
                None => Some(end),
            });
            at + masked_to.unwrap_or(0).min(raw.len()) as u64
        };
        match (before, self.open) {
            (false, true) => self.open_block(at),
            (true, false) => {
                let close = masked_to();
                if let Some(last) = self.blocks.last_mut() {
                    last.1 = Some(close);
                }
            }
            // A block written as one string that opens and closes on this line:
            // a window cut inside the line (a long line's context is cut) starts
            // inside it up to its last mask.
            (false, false) if !spans.is_empty() => {
                let first = spans.first().map_or(0, |&(start, _)| match &stripped {
                    Some((_, map)) => map.get(start).copied().unwrap_or(0),
                    None => start,
                });
                let close = masked_to();
                self.open_block(at + first.min(raw.len()) as u64);
                if let Some(last) = self.blocks.last_mut() {
                    last.1 = Some(close);
                }
            }
            _ => {}
        }
    }

    /// Records a block opened at `at` (the oldest half dropped beyond
    /// [`MAX_BLOCKS`]).
    fn open_block(&mut self, at: u64) {
        if self.blocks.len() >= MAX_BLOCKS {
            let dropped = self.blocks.len() / 2;
            let last_end = self.blocks[dropped - 1].1.unwrap_or(at);
            self.blocks.drain(..dropped);
            self.known_from = self.known_from.map(|k| k.max(last_end));
        }
        self.blocks.push((at, None));
    }
}

/// Private-key blocks over a stream of lines, for a route that sees output one line
/// at a time and shows some of the lines later (watch matches): each line comes
/// back with the parts of a block masked, the state carried to the next line.
#[derive(Debug, Default, Clone)]
pub struct KeyLines {
    open: bool,
}

impl KeyLines {
    /// A tracker outside any block.
    pub fn new() -> KeyLines {
        KeyLines::default()
    }

    /// Feeds one line (without its newline): the line with its key parts masked.
    pub fn line<'l>(&mut self, line: &'l str) -> Cow<'l, str> {
        let (spans, open) = keys::spans(line, self.open);
        self.open = open;
        let found: Vec<Found> = spans
            .into_iter()
            .filter(|(s, e)| e > s)
            .map(|(start, end)| Found {
                start,
                end,
                with: keys::KEY_MASK.to_owned(),
            })
            .collect();
        splice(line, &found)
    }

    /// Whether a block is open after the lines fed so far.
    pub fn is_open(&self) -> bool {
        self.open
    }
}

#[cfg(test)]
mod tests;
