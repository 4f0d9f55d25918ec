//! Reading a long log out at memory speed: its whole lines redacted in blocks on
//! every core at once, text that needs no change handed out without a copy.
//!
//! [`Redactor::redact`] matches a long text in blocks of whole lines (each about
//! [`BLOCK_BYTES`], ended at the first line end after that many bytes), carrying
//! the private-key state from one block to the next; no built-in family's match
//! spans a line end, so the blocks are independent but for that state. Here the
//! blocks are cut by the same rule and cut into runs of consecutive blocks, a few
//! per thread, which the threads (the calling one among them) take in turn as each
//! becomes free, so one slowed by other work does not hold the batch up; each run
//! starts with the key state where it starts, found by
//! the look-back rule ([`Redactor::key_open_after`], the cost of the trailing lines
//! that could be key body), and then carries it block by block exactly as the
//! sequential walk does. The result is the sequential redaction's, byte for byte
//! (a property test checks it on random texts with secrets and key blocks, cut at
//! random sizes).
//!
//! A block the trigger prefilter finds nothing in comes out borrowed: the parts of
//! a [`ShownBlocks`] are ranges of the text read, or a block's redacted copy.
//!
//! Only a pipeline with no hooks and the built-in redactor (no configured
//! patterns, which may span lines) in ordinary output mode is read out this way
//! ([`Pipeline::show_log_blocks`] answers `None` otherwise); its callers keep
//! their own route for the rest.

use std::borrow::Cow;
use std::ops::Range;

use crate::redact::{Found, RedactMode, splice};
use crate::{Pipeline, Redactor};

/// The text of a log [`Pipeline::show_log_blocks`] reads: its bytes, and whether
/// they may change while they are read (a file's pages mapped, which another
/// process may write or cut short). Such text is read a block at a time into
/// memory of the reader's own, so the text checked to be UTF-8 is the text
/// redacted, whatever happens to the file meanwhile.
pub trait LogText: AsRef<[u8]> {
    /// Whether the bytes may change while they are read.
    fn may_change(&self) -> bool {
        false
    }
}

impl LogText for Vec<u8> {}

/// The size blocks are cut at: the redactor's own block size (about 64 KiB of
/// whole lines), so the blocks are the ones a sequential redaction walks.
pub const BLOCK_BYTES: usize = 64 * 1024;

/// Whole-line blocks of a log, shown: hooks (none) applied, secrets masked.
///
/// Made only by [`Pipeline::show_log_blocks`]; its parts are the text read (where
/// the redactor changed nothing) or redacted copies, in order. The text read is
/// held as it was given (`T`: a buffer, or the caller's map of the file).
#[derive(Debug)]
pub struct ShownBlocks<T = Vec<u8>> {
    text: T,
    parts: Vec<Part>,
    consumed: usize,
    key_open_after: bool,
    /// The blocks stopped at one that is not UTF-8 (at `consumed`).
    not_text: bool,
}

/// One part of a [`ShownBlocks`], as [`ShownBlocks::pieces`] hands it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Piece<'a> {
    /// Text shown as it was read: `bytes` are the text's own, from offset `at`
    /// (so a caller that read the text from a file may send this part straight
    /// from the file).
    Read {
        /// The offset of `bytes` in the text read.
        at: usize,
        /// The bytes.
        bytes: &'a [u8],
    },
    /// A block's redacted copy.
    Redacted(&'a [u8]),
}

impl<'a> Piece<'a> {
    /// The shown bytes.
    pub fn bytes(&self) -> &'a [u8] {
        match self {
            Piece::Read { bytes, .. } | Piece::Redacted(bytes) => bytes,
        }
    }
}

/// One part of a [`ShownBlocks`].
#[derive(Debug)]
enum Part {
    /// Unchanged text: this range of the text read.
    Same(Range<usize>),
    /// A block's redacted copy: the block's range of the text read, whether a
    /// private-key block was open at its start, and its shown text.
    Changed {
        block: Range<usize>,
        key_open: bool,
        text: String,
    },
}

/// What one part of a [`ShownBlocks`] covers, as [`ShownBlocks::extents`] hands
/// it out: enough to show the same text again from the log alone
/// ([`Pipeline::show_log_block`] for a changed block), without redacting the
/// unchanged ones again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extent {
    /// Text shown as it was read: this range of the text read.
    Same(Range<usize>),
    /// A block the redactor changed: its range of the text read, and whether a
    /// private-key block was open at its start.
    Changed {
        /// The block's range of the text read.
        block: Range<usize>,
        /// Whether a private-key block was open at the block's start.
        key_open: bool,
    },
}

impl<T: AsRef<[u8]>> ShownBlocks<T> {
    /// The shown parts, in order: together, the redacted form of the text's first
    /// [`ShownBlocks::consumed`] bytes.
    pub fn parts(&self) -> impl Iterator<Item = &[u8]> + '_ {
        self.parts.iter().map(|part| match part {
            Part::Same(range) => &self.text.as_ref()[range.clone()],
            Part::Changed { text, .. } => text.as_bytes(),
        })
    }

    /// What each part covers, in the order of [`ShownBlocks::pieces`]: a range of
    /// the text shown as read, or a changed block with its key state.
    pub fn extents(&self) -> impl Iterator<Item = Extent> + '_ {
        self.parts.iter().map(|part| match part {
            Part::Same(range) => Extent::Same(range.clone()),
            Part::Changed {
                block, key_open, ..
            } => Extent::Changed {
                block: block.clone(),
                key_open: *key_open,
            },
        })
    }

    /// The shown parts, in order, each saying whether it is the text as read
    /// (and where in it) or a redacted copy.
    pub fn pieces(&self) -> impl Iterator<Item = Piece<'_>> + '_ {
        self.parts.iter().map(|part| match part {
            Part::Same(range) => Piece::Read {
                at: range.start,
                bytes: &self.text.as_ref()[range.clone()],
            },
            Part::Changed { text, .. } => Piece::Redacted(text.as_bytes()),
        })
    }

    /// How many bytes of the text the blocks cover; the rest (an unfinished
    /// block, or from a block that is not text on) is to be read again, in front
    /// of what follows it.
    pub fn consumed(&self) -> usize {
        self.consumed
    }

    /// Whether the blocks stopped at one that is not UTF-8, at
    /// [`ShownBlocks::consumed`]: the text from there on is not shown this way.
    pub fn not_text(&self) -> bool {
        self.not_text
    }

    /// Whether a private-key block is open after the consumed bytes.
    pub fn key_open_after(&self) -> bool {
        self.key_open_after
    }

    /// The shown bytes in all.
    pub fn len(&self) -> usize {
        self.parts
            .iter()
            .map(|part| match part {
                Part::Same(range) => range.len(),
                Part::Changed { text, .. } => text.len(),
            })
            .sum()
    }

    /// Whether nothing is shown (no whole block was read).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The text read past the blocks, not shown: to be read again in front of
    /// what follows it.
    pub fn unconsumed(&self) -> &[u8] {
        &self.text.as_ref()[self.consumed..]
    }

    /// The text read, as it was given.
    pub fn text(&self) -> &T {
        &self.text
    }

    /// The text read, back for the next read (its unconsumed rest included).
    pub fn into_text(self) -> T {
        self.text
    }
}

/// The blocks of `text`, by [`Redactor::redact`]'s rule: each ends at the first
/// line end at least [`BLOCK_BYTES`] after its start, or at the text's end. With
/// `complete` false more text follows, so a last block with no such line end is
/// left out (it may grow): the blocks' end is returned with them.
pub(crate) fn blocks(bytes: &[u8], complete: bool) -> (Vec<Range<usize>>, usize) {
    let mut out = Vec::with_capacity(bytes.len() / BLOCK_BYTES + 1);
    let mut start = 0;
    while start < bytes.len() {
        let reach = start + BLOCK_BYTES;
        let end = match bytes.get(reach..) {
            Some(rest) => match memchr::memchr(b'\n', rest) {
                Some(nl) => reach + nl + 1,
                None if complete => bytes.len(),
                None => break,
            },
            None if complete => bytes.len(),
            None => break,
        };
        out.push(start..end);
        start = end;
    }
    (out, start)
}

/// Where the whole blocks of `text` end (the rule [`Pipeline::show_log_blocks`]
/// cuts them by): the bytes after it are an unfinished block, to be read again
/// in front of what follows (none when `complete`).
pub fn blocks_end(text: &[u8], complete: bool) -> usize {
    blocks(text, complete).1
}

/// What one run of blocks came to: its parts, the key state after them, and
/// whether it stopped at a block that is not UTF-8 (then the parts end there).
struct RunShown {
    parts: Vec<Part>,
    key_open: bool,
    not_text_at: Option<usize>,
}

/// Redacts the blocks `run` of `text` in order, starting with `key_open`: each
/// block checked to be UTF-8 (each starts after a line end, so a valid text's
/// blocks are valid on their own) and redacted as the sequential walk redacts it.
///
/// With `copy` (the text may change under the reader: a file's mapped pages),
/// each block is copied before it is read, so what is checked to be UTF-8 is what
/// is redacted.
fn redact_run(
    redactor: &Redactor,
    text: &[u8],
    run: &[Range<usize>],
    mut key_open: bool,
    copy: bool,
) -> RunShown {
    let mut parts: Vec<Part> = Vec::new();
    let mut scratch: Vec<u8> = Vec::new();
    for block in run {
        let bytes = stable(&text[block.clone()], copy, &mut scratch);
        let Ok(block_text) = std::str::from_utf8(bytes) else {
            return RunShown {
                parts,
                key_open,
                not_text_at: Some(block.start),
            };
        };
        let (found, open): (Vec<Found>, bool) =
            redactor.find(block_text, RedactMode::Code, key_open);
        if found.is_empty() {
            // Adjacent unchanged blocks are one range: long runs go out whole.
            match parts.last_mut() {
                Some(Part::Same(range)) if range.end == block.start => range.end = block.end,
                _ => parts.push(Part::Same(block.clone())),
            }
        } else {
            parts.push(Part::Changed {
                block: block.clone(),
                key_open,
                text: splice(block_text, &found).into_owned(),
            });
        }
        key_open = open;
    }
    RunShown {
        parts,
        key_open,
        not_text_at: None,
    }
}

/// Whether a private-key block is open at `at` (a line start) in `text`, given
/// that one was open at its start (`open_at_start`): [`Redactor::key_open_after`]
/// over the shortest stretch before `at` that decides it (the nearest line that
/// cannot be key body is usually the last one), so the text before a run need
/// not be checked for UTF-8 whole. Bytes there that are not UTF-8 answer
/// `open_at_start`: the run before stops at them, and this run is not shown.
fn key_open_at(
    redactor: &Redactor,
    text: &[u8],
    at: usize,
    open_at_start: bool,
    copy: bool,
) -> bool {
    let mut reach = LOOKBACK_BYTES;
    let mut scratch: Vec<u8> = Vec::new();
    loop {
        let from = match at.checked_sub(reach) {
            Some(cut) => memchr::memrchr(b'\n', &text[..cut]).map_or(0, |nl| nl + 1),
            None => 0,
        };
        let Ok(before) = std::str::from_utf8(stable(&text[from..at], copy, &mut scratch)) else {
            return open_at_start;
        };
        if from == 0 {
            return redactor.key_open_after(before, open_at_start);
        }
        // Decided within this stretch when its start's state does not matter.
        let closed = redactor.key_open_after(before, false);
        if closed == redactor.key_open_after(before, true) {
            return closed;
        }
        reach = reach.saturating_mul(4);
    }
}

/// `bytes` as they are, or (with `copy`) copied into `scratch`: bytes that may
/// change under the reader are read once, into memory of the reader's own.
fn stable<'a>(bytes: &'a [u8], copy: bool, scratch: &'a mut Vec<u8>) -> &'a [u8] {
    if !copy {
        return bytes;
    }
    scratch.clear();
    scratch.extend_from_slice(bytes);
    scratch
}

/// How far back [`key_open_at`] looks first.
const LOOKBACK_BYTES: usize = 4 * 1024;

/// How many runs a batch is cut into per thread (see [`redact_runs`]).
const RUNS_PER_THREAD: usize = 4;

/// Redacts `runs` of `text` (consecutive, the first starting with `key_open`) on
/// `threads` threads, the calling one among them: each thread takes the next run
/// not yet taken, finds the key state where it starts by the look-back
/// ([`key_open_at`], the cost of the trailing lines that could be key body) and
/// redacts it. The results in the runs' order.
fn redact_runs(
    redactor: &Redactor,
    text: &[u8],
    runs: &[&[Range<usize>]],
    key_open: bool,
    threads: usize,
    copy: bool,
) -> Vec<RunShown> {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let one = |run: &[Range<usize>]| {
        let open = match run.first() {
            Some(first) if first.start > 0 => {
                key_open_at(redactor, text, first.start, key_open, copy)
            }
            _ => key_open,
        };
        redact_run(redactor, text, run, open, copy)
    };
    if threads <= 1 {
        return runs.iter().map(|run| one(run)).collect();
    }
    let next = AtomicUsize::new(0);
    // Each thread keeps what it redacted with the runs' indices (no shared slots,
    // so no lock): put in order once all are joined.
    let work = || {
        let mut done: Vec<(usize, RunShown)> = Vec::new();
        loop {
            let idx = next.fetch_add(1, Ordering::Relaxed);
            let Some(run) = runs.get(idx) else {
                return done;
            };
            done.push((idx, one(run)));
        }
    };
    let mut all: Vec<(usize, RunShown)> = std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..threads).map(|_| scope.spawn(work)).collect();
        let mut all = work();
        for helper in helpers {
            match helper.join() {
                Ok(done) => all.extend(done),
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
        all
    });
    all.sort_unstable_by_key(|(idx, _)| *idx);
    all.into_iter().map(|(_, shown)| shown).collect()
}

/// Splits `blocks` into at most `n` runs of consecutive blocks of about equal
/// bytes.
fn runs(blocks: &[Range<usize>], n: usize) -> Vec<&[Range<usize>]> {
    let total: usize = blocks.iter().map(Range::len).sum();
    let share = total.div_ceil(n.max(1)).max(1);
    let mut out = Vec::with_capacity(n);
    let mut first = 0;
    let mut bytes = 0;
    for (idx, block) in blocks.iter().enumerate() {
        bytes += block.len();
        if bytes >= share && out.len() + 1 < n {
            out.push(&blocks[first..=idx]);
            first = idx + 1;
            bytes = 0;
        }
    }
    if first < blocks.len() {
        out.push(&blocks[first..]);
    }
    out
}

impl Pipeline {
    /// One block of `command`'s log shown again: `block` (a block a
    /// [`ShownBlocks`] gave as [`Extent::Changed`], read from the same log)
    /// redacted as [`Pipeline::show_log_blocks`] redacted it, starting with
    /// `key_open`, its key state there. `None` when this pipeline does not read
    /// out in blocks, or `block` is not UTF-8.
    pub fn show_log_block<'t>(
        &self,
        command: &str,
        block: &'t [u8],
        key_open: bool,
    ) -> Option<Cow<'t, str>> {
        if !self.shows_log_blocks(command) {
            return None;
        }
        let text = std::str::from_utf8(block).ok()?;
        let (found, _) = self.redactor().find(text, RedactMode::Code, key_open);
        Some(splice(text, &found))
    }

    /// Whether this pipeline's log output can be read out in blocks
    /// ([`Pipeline::show_log_blocks`]) for a session running `command`.
    pub fn shows_log_blocks(&self, command: &str) -> bool {
        self.chain().is_empty()
            && self.has_builtin_redactor()
            && RedactMode::for_command(command) == RedactMode::Code
    }

    /// The whole blocks of `text` (a part of `command`'s log that starts at a block
    /// edge: the log's start, or where the last call's blocks ended; `at_end` when
    /// nothing follows it), redacted on up to `threads` threads at once, starting
    /// with `key_open` (a private-key block is open where `text` starts).
    ///
    /// `None` when this pipeline does not read out in blocks
    /// ([`Pipeline::shows_log_blocks`]): hooks, configured patterns or an
    /// environment dump need the route that shows a window at a time.
    pub fn show_log_blocks<T: LogText>(
        &self,
        command: &str,
        text: T,
        key_open: bool,
        at_end: bool,
        threads: usize,
    ) -> Option<ShownBlocks<T>> {
        if !self.shows_log_blocks(command) {
            return None;
        }
        let redactor: &Redactor = self.redactor();
        let bytes = text.as_ref();
        let copy = text.may_change();
        let (blocks, consumed) = blocks(bytes, at_end);
        let threads = threads.max(1);
        // More runs than threads, taken in turn by whichever thread is free: a
        // thread slowed by other work on the machine does not hold the others up
        // at the end of the batch.
        let runs = runs(&blocks, threads * RUNS_PER_THREAD);
        let results = redact_runs(
            redactor,
            bytes,
            &runs,
            key_open,
            threads.min(runs.len()),
            copy,
        );
        let mut shown = ShownBlocks {
            text,
            parts: Vec::new(),
            consumed,
            key_open_after: key_open,
            not_text: false,
        };
        for run in results {
            for part in run.parts {
                match (shown.parts.last_mut(), part) {
                    (Some(Part::Same(range)), Part::Same(next)) if range.end == next.start => {
                        range.end = next.end;
                    }
                    (_, part) => shown.parts.push(part),
                }
            }
            shown.key_open_after = run.key_open;
            if let Some(at) = run.not_text_at {
                // The runs after it are not shown: the text stops here.
                shown.consumed = at;
                shown.not_text = true;
                break;
            }
        }
        Some(shown)
    }
}

#[cfg(test)]
mod tests;
