//! The one way out: a window over output becomes [`Shown`] text only through
//! [`Pipeline::show`] (or a [`ShownStream`]), which runs the hooks on the window and
//! then redacts it *with its context*, so no cut can split a secret.
//!
//! Every route shows part of a longer text: the last 2,000 characters of a tail, the
//! first 200 of a command, a page of lines, a chunk of a log. Cutting first and
//! redacting the cut loses secrets: a token whose head lies before the cut matches
//! nothing, a private key whose BEGIN lies before the window matches nothing. So a
//! [`Window`] is not a string but a range of its source, and `show`:
//!
//! 1. widens the range to the whole lines it touches (at most
//!    [`LINE_CONTEXT_BYTES`] each way) and learns whether a private-key block is
//!    open where that context starts (looking back to the nearest line that
//!    cannot be key body, however far; the caller says whether one was open where
//!    the source starts, [`Window::after_open_key`]);
//! 2. for a character budget (the last or first N characters), runs the hooks and
//!    the redactor on those whole lines and then takes the budget from the result:
//!    redaction first, the cut after;
//! 3. for a range (a page, a delta, matched lines), runs the hooks on the range,
//!    redacts context + hooked range + context in one pass, and keeps the range's
//!    part: a replacement that straddles an edge is kept whole (a masked head or
//!    tail, never a raw one).
//!
//! Routes cannot do it in the other order: [`Shown`] has no public constructor, the
//! answer types carry `Shown`, and a `Window` never hands its raw text out.

use std::borrow::Cow;
use std::ops::Range;

use serde::{Deserialize, Serialize};

use std::sync::Arc;

use crate::StreamRedactor;
use crate::pipeline::OwnedContext;
use crate::redact::{RedactMode, splice, splice_window};
use crate::{OutputContext, Pipeline};

/// How far a window's context reaches past each of its edges to whole lines.
pub const LINE_CONTEXT_BYTES: usize = 16 * 1024;

/// Output that may leave herd: hooks applied, secrets masked.
///
/// Only the pipeline makes one from a session's output ([`Pipeline::show`],
/// [`ShownStream`]). It serializes as a plain string but does not deserialize:
/// text read back (a stored completion, a far herd's event) is [`Stored`], and
/// becomes shown only through [`Pipeline::recheck_output`] or
/// [`Pipeline::recheck_command`], which redact it again.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(transparent)]
pub struct Shown(String);

/// Text herd (this one, an older one, or a far one) showed once, read back from a
/// store or the wire: the same JSON string as [`Shown`], but not trusted as shown.
/// The store may have been written by a herd with fewer redaction rules, or edited,
/// and a far herd's rules may differ from this one's; [`Pipeline::recheck_output`]
/// and [`Pipeline::recheck_command`] redact it again with this herd's redactor.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(transparent)]
pub struct Stored(String);

impl Shown {
    /// Text that holds no output at all (an empty answer, a fixed message herd
    /// wrote itself).
    pub fn herd_text(text: &'static str) -> Shown {
        Shown(text.to_owned())
    }

    /// The text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The text, owned.
    pub fn into_string(self) -> String {
        self.0
    }

    /// Whether there is no text.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// `\r\n` and a lone trailing `\r` become `\n` / nothing (a page of lines).
    /// Removing a carriage return cannot reveal anything.
    pub fn without_carriage_returns(self) -> Shown {
        if !self.0.contains('\r') {
            return self;
        }
        Shown(
            self.0
                .split('\n')
                .map(|line| line.strip_suffix('\r').unwrap_or(line))
                .collect::<Vec<_>>()
                .join("\n"),
        )
    }

    /// Herd's own framing around shown text (a marker, a note, a header line):
    /// `before` + text + `after`. The framing is herd's, never output.
    pub fn framed(self, before: &str, after: &str) -> Shown {
        if before.is_empty() && after.is_empty() {
            return self;
        }
        Shown(format!("{before}{}{after}", self.0))
    }

    /// Joins shown texts with `sep` (herd's own separator).
    pub fn join(parts: impl IntoIterator<Item = Shown>, sep: &str) -> Shown {
        Shown(parts.into_iter().map(|s| s.0).collect::<Vec<_>>().join(sep))
    }
}

impl std::fmt::Display for Shown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl AsRef<str> for Shown {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::ops::Deref for Shown {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl PartialEq<str> for Shown {
    fn eq(&self, other: &str) -> bool {
        self.0 == other
    }
}

impl PartialEq<String> for Shown {
    fn eq(&self, other: &String) -> bool {
        &self.0 == other
    }
}

impl From<Shown> for String {
    fn from(shown: Shown) -> String {
        shown.0
    }
}

impl PartialEq<&str> for Shown {
    fn eq(&self, other: &&str) -> bool {
        self.0 == *other
    }
}

/// Whether `text` is what [`crate::redact::mask`] makes of a token: `***`, or six
/// characters, `...`, four characters, none of them blank.
fn is_mask(text: &str) -> bool {
    if text == "***" {
        return true;
    }
    let chars: Vec<char> = text.chars().collect();
    chars.len() == 13 && chars[6..9] == ['.', '.', '.'] && chars.iter().all(|c| !c.is_whitespace())
}

/// Which part of the redacted window a route keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Keep {
    All,
    LastChars(usize),
    FirstChars(usize),
}

/// A part of a text that a route shows: a range of its source, never the raw text.
#[derive(Debug, Clone, Copy)]
pub struct Window<'a> {
    source: &'a str,
    start: usize,
    end: usize,
    keep: Keep,
    /// Where the text the window may take characters from starts (`LastChars` only:
    /// its budget never reaches before it).
    floor: usize,
    /// `source` is output still being written (a running session's tail): its
    /// unfinished last line may be the start of a secret.
    growing: bool,
    /// Whether a private-key block is open where `source` starts; the caller knows
    /// when the output before `source` is not at hand (a carried stream state).
    key_open_at_source: bool,
}

impl<'a> Window<'a> {
    /// All of `source`.
    pub fn all(source: &'a str) -> Window<'a> {
        Window::over(source, 0, source.len(), Keep::All)
    }

    /// The last `n_chars` characters of `source` (the sizing of every answer's output).
    pub fn last_chars(source: &'a str, n_chars: usize) -> Window<'a> {
        Window::last_chars_after(source, 0, n_chars)
    }

    /// The last `n_chars` characters of `source[from..]`; the text before `from` is
    /// context only (a heartbeat's new output, with the output before it).
    pub fn last_chars_after(source: &'a str, from: usize, n_chars: usize) -> Window<'a> {
        let mut from = from.min(source.len());
        while !source.is_char_boundary(from) {
            from -= 1;
        }
        let start = if n_chars == 0 {
            source.len()
        } else {
            from + nth_char_from_end(&source[from..], n_chars - 1)
        };
        let mut window = Window::over(source, start, source.len(), Keep::LastChars(n_chars));
        window.floor = from;
        window
    }

    /// The first `n_chars` characters of `source`.
    pub fn first_chars(source: &'a str, n_chars: usize) -> Window<'a> {
        let end = source
            .char_indices()
            .nth(n_chars)
            .map_or(source.len(), |(idx, _)| idx);
        Window::over(source, 0, end, Keep::FirstChars(n_chars))
    }

    /// The bytes `range` of `source` (snapped outwards to character boundaries and
    /// clamped to the text).
    pub fn range(source: &'a str, range: Range<usize>) -> Window<'a> {
        let mut start = range.start.min(source.len());
        while !source.is_char_boundary(start) {
            start -= 1;
        }
        let mut end = range.end.clamp(start, source.len());
        while !source.is_char_boundary(end) {
            end += 1;
        }
        Window::over(source, start, end, Keep::All)
    }

    /// Lines `first..first + n` of `source` (as `str::lines` counts them), without
    /// the newline after the last one.
    pub fn lines(source: &'a str, first: usize, n: usize) -> Window<'a> {
        let start = match first {
            0 => 0,
            _ => nth_newline(source.as_bytes(), 0, first - 1).map_or(source.len(), |idx| idx + 1),
        };
        let mut end = match n {
            0 => start,
            _ if start == source.len() => start,
            _ => nth_newline(source.as_bytes(), start, n - 1).map_or(source.len(), |idx| idx + 1),
        };
        if end > start && source.as_bytes()[end - 1] == b'\n' {
            end -= 1;
        }
        Window::over(source, start, end, Keep::All)
    }

    /// Says that the output before `source` ended inside a private-key block
    /// (a stream's carried state), so its first lines are key body.
    pub fn after_open_key(mut self, open: bool) -> Window<'a> {
        self.key_open_at_source = open;
        self
    }

    /// Says that `source` is still being written (a running session's output):
    /// the part of its unfinished last line that could still become a secret
    /// (`ghp_abc`, `Authorization: Bearer `) is not shown until the line goes on,
    /// as a stream would hold it.
    pub fn growing(mut self, growing: bool) -> Window<'a> {
        self.growing = growing;
        self
    }

    /// Whether the window leaves out text of its source before it.
    pub fn omits_start(&self) -> bool {
        self.start > 0
    }

    /// Whether the window leaves out text of its source after it.
    pub fn omits_end(&self) -> bool {
        self.end < self.source.len()
    }

    fn over(source: &'a str, start: usize, end: usize, keep: Keep) -> Window<'a> {
        Window {
            source,
            start,
            end,
            keep,
            floor: 0,
            growing: false,
            key_open_at_source: false,
        }
    }
}

/// Where the `nth` character (from 0) counted from the end of `text` starts, 0
/// when it has fewer characters. Log text is mostly ASCII: when its last `nth + 1`
/// bytes are, they are the characters (one vectorised test instead of decoding
/// them one by one from the end).
fn nth_char_from_end(text: &str, nth: usize) -> usize {
    if let Some(start) = text.len().checked_sub(nth + 1)
        && text.as_bytes()[start..].is_ascii()
    {
        return start;
    }
    text.char_indices().rev().nth(nth).map_or(0, |(idx, _)| idx)
}

/// The index of the newline that is the `nth` (from 0) at or after `from`. Whole
/// blocks are skipped by a vectorised count, so a page deep in a long text costs
/// little more than the page.
fn nth_newline(bytes: &[u8], from: usize, nth: usize) -> Option<usize> {
    // Counted a small block at a time (one vectorised count each), so that only
    // the newlines of the block holding the one asked for are visited one by one.
    const BLOCK: usize = 4 * 1024;
    let mut left = nth;
    let mut at = from;
    while at < bytes.len() {
        let block_end = (at + BLOCK).min(bytes.len());
        let block = &bytes[at..block_end];
        let n_here = memchr::memchr_iter(b'\n', block).count();
        if n_here > left {
            return memchr::memchr_iter(b'\n', block)
                .nth(left)
                .map(|idx| at + idx);
        }
        left -= n_here;
        at = block_end;
    }
    None
}

/// The end of the context after byte `at`: the end of its line, at most
/// [`LINE_CONTEXT_BYTES`] on.
fn context_end(text: &str, at: usize) -> usize {
    let ceil = at.saturating_add(LINE_CONTEXT_BYTES).min(text.len());
    let found = memchr::memchr2(b'\n', b'\r', &text.as_bytes()[at..ceil]).map(|idx| at + idx);
    let mut end = found.unwrap_or(ceil);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    end
}

impl Pipeline {
    /// The one way output leaves herd: `window` through the hooks, then redacted
    /// with its context (see the module docs).
    pub fn show(&self, ctx: &OutputContext<'_>, window: Window<'_>) -> Shown {
        let Window {
            source,
            start,
            end,
            keep,
            floor,
            growing,
            key_open_at_source,
        } = window;
        let mode = RedactMode::for_command(ctx.command);
        let (source, start, end, floor) = if growing && end == source.len() {
            let line_start = memchr::memrchr2(b'\n', b'\r', source.as_bytes()).map_or(0, |i| i + 1);
            let shown_end = line_start + self.redactor().hold_point(&source[line_start..], mode);
            let source = &source[..shown_end];
            (
                source,
                start.min(shown_end),
                shown_end,
                floor.min(shown_end),
            )
        } else {
            (source, start, end, floor)
        };
        let from = crate::redact::context::context_start(source, start, LINE_CONTEXT_BYTES);
        let to = context_end(source, end);
        let key_open = if from == 0 {
            key_open_at_source
        } else {
            self.redactor()
                .key_open_after(&source[..from], key_open_at_source)
        };
        let out = match keep {
            // A character budget: hooks and the redactor see the whole lines the
            // window touches (the lines before `floor` are context only), and the
            // budget is taken from what they made of them.
            Keep::LastChars(n) | Keep::FirstChars(n) => {
                let hooked = self.chain().run(ctx, &source[from..to]);
                let (found, _) = self.redactor().find(&hooked, mode, key_open);
                let out = if floor > from && hooked.len() == to - from {
                    splice_window(&hooked, &found, floor - from, to - from)
                } else {
                    splice(&hooked, &found).into_owned()
                };
                let cut = if matches!(keep, Keep::LastChars(_)) {
                    nth_char_from_end(&out, n.saturating_sub(1))
                } else {
                    out.char_indices().nth(n).map_or(out.len(), |(idx, _)| idx)
                };
                match keep {
                    _ if n == 0 => String::new(),
                    Keep::LastChars(_) => out[cut..].to_owned(),
                    _ => out[..cut].to_owned(),
                }
            }
            // A range: hooks see the range itself, the redactor the range with its
            // context, and a replacement across an edge is kept whole.
            Keep::All => {
                let hooked = self.chain().run(ctx, &source[start..end]);
                let (combined, edge_start, edge_end) = match &hooked {
                    Cow::Borrowed(_) => {
                        (Cow::Borrowed(&source[from..to]), start - from, end - from)
                    }
                    Cow::Owned(text) => {
                        let mut joined = String::with_capacity(to - from + text.len());
                        joined.push_str(&source[from..start]);
                        joined.push_str(text);
                        joined.push_str(&source[end..to]);
                        (Cow::Owned(joined), start - from, start - from + text.len())
                    }
                };
                let (found, _) = self.redactor().find(&combined, mode, key_open);
                splice_window(&combined, &found, edge_start, edge_end)
            }
        };
        Shown(out)
    }

    /// Stored output of `command` (itself shown text), redacted again with this
    /// pipeline's redactor; no hooks run (they ran when it was first shown). A
    /// match that is already a mask (`***`, `ghp_ab...6789`) is left as it is, so
    /// text this herd stored reads back unchanged.
    pub fn recheck_output(&self, command: &Shown, stored: Stored) -> Shown {
        self.recheck(stored, RedactMode::for_command(command))
    }

    /// A stored command line, redacted again for every secret of a recognised shape
    /// (the output families, `Code` mode), masks left as they are. The command-line
    /// rules that mask by position only (a bare value after `--password`) are not
    /// applied again.
    pub fn recheck_command(&self, stored: Stored) -> Shown {
        self.recheck(stored, RedactMode::Code)
    }

    fn recheck(&self, stored: Stored, mode: RedactMode) -> Shown {
        let (mut found, _) = self.redactor().find(&stored.0, mode, false);
        // A match is a rule's span, which may take in a label (`token ghp_…`): it is
        // already masked when its last word is a mask.
        found.retain(|f| {
            let span = &stored.0[f.start..f.end];
            let last = span
                .rsplit(|c: char| c.is_whitespace() || matches!(c, '=' | ':' | '"' | '\''))
                .find(|w| !w.is_empty())
                .unwrap_or(span);
            !is_mask(last)
        });
        match splice(&stored.0, &found) {
            Cow::Borrowed(_) => Shown(stored.0),
            Cow::Owned(text) => Shown(text),
        }
    }

    /// A command line as it may leave herd (no hooks run on commands).
    pub fn show_command(&self, command: &str) -> Shown {
        Shown(self.redact_command(command).into_owned())
    }

    /// The first `n_chars` characters of a command line, redacted before the cut.
    pub fn show_command_head(&self, command: &str, n_chars: usize) -> Shown {
        let redacted = self.redact_command(command);
        Shown(match redacted.char_indices().nth(n_chars) {
            Some((idx, _)) => redacted[..idx].to_owned(),
            None => redacted.into_owned(),
        })
    }

    /// A stream of output through `pipeline`: each chunk through the hooks, then a
    /// streaming redactor that carries its state from chunk to chunk. The stream
    /// owns a handle on the pipeline, so it can live in a long-running follower.
    ///
    /// The call contract for hooks: a stream calls them once per batch of whole
    /// lines (what each push completes), never with empty text, and with the
    /// unfinished last line flagged `partial` when the stream goes idle or ends.
    pub fn show_stream(pipeline: &Arc<Pipeline>, ctx: &OutputContext<'_>) -> ShownStream {
        ShownStream {
            unhooked: String::new(),
            redact: StreamRedactor::new(
                Arc::clone(pipeline.redactor()),
                RedactMode::for_command(ctx.command),
            ),
            pipeline: Arc::clone(pipeline),
            ctx: OwnedContext::from_ctx(ctx),
        }
    }
}

/// An unfinished line longer than this goes through the hooks as a `partial` piece.
const MAX_UNHOOKED_BYTES: usize = 64 * 1024;

/// A live output stream through a pipeline (follow, attach, chunked dumps). See
/// [`StreamRedactor`] for what is held and when it is released.
#[derive(Debug)]
pub struct ShownStream {
    pipeline: Arc<Pipeline>,
    ctx: OwnedContext,
    redact: StreamRedactor,
    /// Input after the last line end, not yet through the hooks (raw).
    unhooked: String,
}

impl ShownStream {
    /// Starts the stream inside a private-key block when `before` (the output just
    /// before the stream's first byte) ends inside one.
    pub fn after(self, before: &str) -> Self {
        self.after_state(before, false)
    }

    /// Like [`Self::after`], given whether a private-key block was open where
    /// `before` starts (see [`crate::key_state_matters`]).
    pub fn after_state(mut self, before: &str, open_at_start: bool) -> Self {
        let open = self
            .pipeline
            .redactor()
            .key_open_after(before, open_at_start);
        self.redact.set_key_open(open);
        self
    }

    /// Feeds one chunk of output; returns what is safe to show now. The hooks
    /// see the whole lines the chunk completes, at once; an unfinished line waits
    /// for its end (or for [`Self::release_idle`] or [`Self::finish`]).
    pub fn push(&mut self, chunk: &str) -> Shown {
        self.unhooked.push_str(chunk);
        let mut out = match memchr::memrchr2(b'\n', b'\r', self.unhooked.as_bytes()) {
            Some(last_end) => {
                let rest = self.unhooked.split_off(last_end + 1);
                let lines = std::mem::replace(&mut self.unhooked, rest);
                let hooked = match self.pipeline.chain().run(&self.ctx.as_ctx(), &lines) {
                    Cow::Owned(changed) => Some(changed),
                    Cow::Borrowed(_) => None,
                };
                // The lines themselves when no hook changed them: no copy.
                self.redact.push_owned(hooked.unwrap_or(lines))
            }
            None => String::new(),
        };
        // Memory stays bounded: a line that never ends goes on as partial pieces.
        if self.unhooked.len() > MAX_UNHOOKED_BYTES {
            out.push_str(&self.push_partial());
        }
        Shown(out)
    }

    /// The unfinished line through the hooks, flagged `partial`, into the redactor.
    fn push_partial(&mut self) -> String {
        if self.unhooked.is_empty() {
            return String::new();
        }
        let line = std::mem::take(&mut self.unhooked);
        let mut ctx = self.ctx.as_ctx();
        ctx.partial = true;
        let hooked = self.pipeline.chain().run(&ctx, &line);
        self.redact.push(&hooked)
    }

    /// The stream went idle: the unfinished line goes through the hooks (flagged
    /// `partial`), and what cannot still become a secret is released.
    pub fn release_idle(&mut self) -> Shown {
        let pushed = self.push_partial();
        let released = self.redact.release_idle();
        Shown(pushed + &released)
    }

    /// Releases everything held (the output ended).
    pub fn finish(&mut self) -> Shown {
        let pushed = self.push_partial();
        let finished = self.redact.finish();
        Shown(pushed + &finished)
    }

    /// Bytes of input held back, not yet shown.
    pub fn held_bytes(&self) -> usize {
        self.redact.held_bytes() + self.unhooked.len()
    }

    /// The input held back, in bytes, when what was shown ends at a line's start
    /// and all after it is held as it came (the unfinished line not yet through
    /// the hooks, nothing of it shown on idle or by a forced cut): another route
    /// may then show the rest from there. `None` otherwise: text the hooks already
    /// took may not have the length of the input it came from.
    pub fn held_from_line_start(&self) -> Option<usize> {
        (self.redact.held_bytes() == 0 && self.redact.nothing_of_the_line_shown())
            .then_some(self.unhooked.len())
    }
}

#[cfg(test)]
mod tests;
