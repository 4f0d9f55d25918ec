//! Line pages of a session's log file: `log(offset, limit)` answers over the
//! whole output the log holds, not only the in-memory tail.
//!
//! The log can be hundreds of megabytes, so nothing here reads the whole file into
//! memory. Counting lines streams the file once in fixed-size blocks through
//! `memchr`'s newline counter (the page cache makes a repeat cheap). A default page
//! (the last `limit` lines) then needs one read of at most `max_bytes` from the end,
//! scanned backwards. A page at an explicit offset finds its first line by scanning
//! forwards from the start, or backwards from the end when that is closer.
//!
//! Lines are what `str::lines` makes of the text: a trailing newline does not start
//! an empty last line, and an unfinished last line (a running session mid-write)
//! counts as a line.
//!
//! Invariant: a page is at most `max_bytes` long, whatever the lines look like. Lines
//! that do not fit are left to the next page, so a page may hold fewer lines than
//! asked for (and says so). Only a line longer than the whole budget is cut, where
//! the budget ends: a default page (anchored at the end of the output) keeps the
//! end of that line, a page at an offset keeps its start.
//!
//! A page is never shown by itself: [`TextPage`] carries the text around it (up to
//! `herd_hooks::KEY_LOOKBACK_BYTES` before, the rest of a cut line after) so the output
//! pipeline redacts the page with its context and no secret is split by the page's
//! edges. The pipeline is the caller's.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;

use std::ops::Range;

use herd_hooks::{LINE_CONTEXT_BYTES, Shown, Window};

use crate::text;

/// Bytes read per block while counting or looking for a line.
const BLOCK_BYTES: usize = 64 * 1024;

/// Marks where a line was cut to fit a page; put around the pipeline's output.
pub(crate) const LINE_CUT_MARKER: &str = "[… line cut to fit the page …]";

/// A page of lines as text, ready for the output pipeline: the page's lines inside
/// the text around them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TextPage {
    /// The page with its context, decoded and ANSI-stripped.
    pub(crate) source: String,
    /// The page's own bytes in `source`: its lines, without the newline after the
    /// last one.
    pub(crate) range: Range<usize>,
    /// Lines in the whole source.
    pub(crate) n_total_lines: usize,
    /// Index of the first line shown.
    pub(crate) first_line_idx: usize,
    /// Lines shown, cut ones included.
    pub(crate) n_lines: usize,
    /// The first line shown is missing its start.
    pub(crate) is_head_cut: bool,
    /// The last line shown is missing its end.
    pub(crate) is_tail_cut: bool,
    /// The byte budget gave the page fewer lines than asked for, or cut one.
    pub(crate) is_byte_limited: bool,
    /// A private-key block is open where `source` starts (learnt from the log
    /// before it, as far back as the block reaches).
    pub(crate) key_open: bool,
    /// The page ends with the unfinished last line of a running session: what of
    /// it could still become a secret is held back, as a stream holds it.
    pub(crate) growing: bool,
}

impl TextPage {
    /// A page of already decoded text held in memory (the tail, or a receipt):
    /// `limit` lines from `offset`, or the last `limit`.
    pub(crate) fn of_text(text: &str, offset: Option<usize>, limit: usize) -> TextPage {
        let n_total_lines = text.lines().count();
        let start = offset
            .unwrap_or_else(|| n_total_lines.saturating_sub(limit))
            .min(n_total_lines);
        let end = start.saturating_add(limit).min(n_total_lines);
        let line_start = |n: usize| {
            if n == 0 {
                0
            } else {
                memchr::memchr_iter(b'\n', text.as_bytes())
                    .nth(n - 1)
                    .map_or(text.len(), |idx| idx + 1)
            }
        };
        let from = line_start(start);
        let mut to = line_start(end);
        if to > from && text.as_bytes()[to - 1] == b'\n' {
            to -= 1;
        }
        TextPage {
            source: text.to_owned(),
            range: from..to,
            n_total_lines,
            first_line_idx: start,
            n_lines: end - start,
            is_head_cut: false,
            is_tail_cut: false,
            is_byte_limited: false,
            key_open: false,
            growing: false,
        }
    }

    /// The same page, of a text whose private-key state at its start is
    /// `key_open`, still being written when `running` (the last line may be
    /// unfinished).
    pub(crate) fn live(mut self, key_open: bool, running: bool) -> TextPage {
        self.key_open = key_open;
        self.growing = running && self.range.end == self.source.len();
        self
    }

    /// The page ends with the unfinished last line of a running session (no line end
    /// yet): a reader that moves on by lines reads that line again once it is done.
    pub(crate) fn ends_unfinished(&self) -> bool {
        self.growing && !self.source.is_empty() && !self.source.ends_with('\n')
    }

    /// The page's own text, unredacted (tests only: a route shows [`Self::window`]).
    #[cfg(test)]
    pub(crate) fn text(&self) -> &str {
        &self.source[self.range.clone()]
    }

    /// The page as a window over its source, for the output pipeline.
    pub(crate) fn window(&self) -> Window<'_> {
        Window::range(&self.source, self.range.clone())
            .after_open_key(self.key_open)
            .growing(self.growing)
    }

    /// `output` (this page's text after the output pipeline) with [`LINE_CUT_MARKER`]
    /// where a line was cut, and the note that explains it.
    pub(crate) fn marked(&self, output: Shown, max_bytes: usize) -> (Shown, Option<String>) {
        let output = output.without_carriage_returns();
        if !self.is_byte_limited {
            return (output, None);
        }
        if !self.is_head_cut && !self.is_tail_cut {
            let note = format!(
                "the page holds fewer lines than asked for: a page carries at most {max_bytes} bytes of the log; page on from another offset for the rest"
            );
            return (output, Some(note));
        }
        let marked = output.framed(
            if self.is_head_cut {
                LINE_CUT_MARKER
            } else {
                ""
            },
            if self.is_tail_cut {
                LINE_CUT_MARKER
            } else {
                ""
            },
        );
        let note = format!(
            "a line longer than the page limit of {max_bytes} bytes was cut where it says {LINE_CUT_MARKER}; the log file holds it whole"
        );
        (marked, Some(note))
    }

    /// A page of the log file at `path` (see [`read_page`]), decoded and ANSI-stripped
    /// like the in-memory tail. `is_running` holds back an unfinished character at the
    /// end of the file. `Ok(None)` when there is no file.
    ///
    /// # Errors
    /// When the file exists but cannot be read.
    pub(crate) fn of_file(
        path: &Path,
        offset: Option<usize>,
        limit: usize,
        max_bytes: usize,
        is_running: bool,
        known: super::KeyLookup<'_>,
    ) -> io::Result<Option<TextPage>> {
        let file = match File::open(path) {
            Ok(file) => file,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(e),
        };
        let raw = read_page(&file, offset, limit, max_bytes)?;
        // The context: what the log holds before the page (for a private-key block
        // the page starts inside, or a cut line's start) and the rest of a cut line.
        let (before, key_open) = super::context_before(&file, raw.start_byte, known)?;
        let end_byte = raw.start_byte + raw.bytes.len() as u64;
        let mut after = Vec::new();
        if raw.is_tail_cut {
            after.resize(LINE_CONTEXT_BYTES, 0);
            let n = file.read_at(&mut after, end_byte)?;
            after.truncate(n);
        }
        let hold = raw.is_tail_cut || (is_running && raw.reaches_end);
        let before = text::strip_ansi(&before);
        let page = text::strip_ansi(&text::decode_tail(&raw.bytes, raw.is_head_cut, hold));
        let after = text::strip_ansi(&text::decode_tail(&after, true, true));
        // The page's lines, without the newline after the last one.
        let page_len = page.strip_suffix('\n').map_or(page.len(), str::len);
        let mut source = String::with_capacity(before.len() + page.len() + after.len());
        source.push_str(&before);
        source.push_str(&page);
        source.push_str(&after);
        Ok(Some(TextPage {
            range: before.len()..before.len() + page_len,
            source,
            n_total_lines: raw.n_total_lines,
            first_line_idx: raw.first_line_idx,
            n_lines: raw.n_lines,
            is_head_cut: raw.is_head_cut,
            is_tail_cut: raw.is_tail_cut,
            is_byte_limited: raw.is_byte_limited,
            key_open,
            growing: is_running && raw.reaches_end && !raw.is_tail_cut,
        }))
    }
}

/// A page of lines from a log file, as raw bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RawPage {
    /// The page's bytes: whole lines with their newlines, except where a cut flag says
    /// a line was cut.
    pub(crate) bytes: Vec<u8>,
    /// Lines in the file (as long as it was when the page was read).
    pub(crate) n_total_lines: usize,
    /// Index of the first line on the page (0 is the file's first line).
    pub(crate) first_line_idx: usize,
    /// Lines on the page, cut ones included.
    pub(crate) n_lines: usize,
    /// The first line on the page is missing its start (it did not fit).
    pub(crate) is_head_cut: bool,
    /// The last line on the page is missing its end (it did not fit).
    pub(crate) is_tail_cut: bool,
    /// The byte budget gave the page fewer lines than asked for, or cut one.
    pub(crate) is_byte_limited: bool,
    /// The page ends where the file ended when it was read.
    pub(crate) reaches_end: bool,
    /// The file offset of the page's first byte.
    pub(crate) start_byte: u64,
}

/// The note of a page answered from a tail held in memory because the log file
/// cannot serve it: `why` says what is wrong with the file, `source` names the tail,
/// `is_whole` says whether that tail holds all of the output.
pub(crate) fn fallback_note(why: &str, source: &str, is_whole: bool) -> String {
    if is_whole {
        format!("{why}; answered from {source}, which holds all of the output")
    } else {
        format!(
            "{why}, so this page, total_lines and offset cover only {source}: the start of the output is not available here"
        )
    }
}

/// Why a log file of `held` bytes is not the whole output, when `bytes_not_kept`
/// later bytes did not reach it: it reached the log cap `cap`, or a write to it
/// failed. Callers ask only when the count kept at ingest says bytes were lost,
/// never because the file's size meets the cap in force now (a log that filled
/// its cap exactly lost nothing; a cap lowered since cut nothing).
pub(crate) fn cut_log(held: u64, bytes_not_kept: u64, cap: u64) -> String {
    format!(
        "the log file holds only the first {held} bytes of output ({}; {bytes_not_kept} later bytes were not kept)",
        if held >= cap {
            format!("it reached its cap of {cap} bytes")
        } else {
            "a write to it failed".to_owned()
        }
    )
}

/// Reads one page of `file`: `limit` lines from line `offset`, or the last `limit`
/// lines when `offset` is `None`, at most `max_bytes` long. An offset past the last
/// line gives an empty page at the end.
///
/// The file may grow while it is read (a running session's log): everything is
/// judged against its length when the call started.
///
/// # Errors
/// When the file cannot be read.
pub(crate) fn read_page(
    file: &File,
    offset: Option<usize>,
    limit: usize,
    max_bytes: usize,
) -> io::Result<RawPage> {
    let len_bytes = file.metadata()?.len();
    let (n_newlines, last_byte) = count_newlines(file, len_bytes)?;
    let n_total_lines = usize::try_from(n_newlines)
        .unwrap_or(usize::MAX)
        .saturating_add(usize::from(last_byte.is_some_and(|b| b != b'\n')));
    let max_bytes = max_bytes.max(1);
    match offset {
        None => tail_page(file, len_bytes, n_total_lines, limit, max_bytes),
        Some(offset) => offset_page(
            file,
            len_bytes,
            n_newlines,
            n_total_lines,
            offset,
            limit,
            max_bytes,
        ),
    }
}

/// The newlines in the first `len_bytes` of `file`, and its last byte.
fn count_newlines(file: &File, len_bytes: u64) -> io::Result<(u64, Option<u8>)> {
    let mut buf = vec![0; BLOCK_BYTES];
    let mut n_newlines = 0u64;
    let mut last_byte = None;
    let mut pos = 0u64;
    while pos < len_bytes {
        let n = read_block(file, &mut buf, pos, len_bytes)?;
        n_newlines += memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
        last_byte = Some(buf[n - 1]);
        pos += n as u64;
    }
    Ok((n_newlines, last_byte))
}

/// Fills as much of `buf` as lies between `pos` and `end` from `file`; returns how
/// many bytes (at least one when `pos < end`).
fn read_block(file: &File, buf: &mut [u8], pos: u64, end: u64) -> io::Result<usize> {
    let want = usize::try_from(end - pos)
        .unwrap_or(usize::MAX)
        .min(buf.len());
    file.read_exact_at(&mut buf[..want], pos)?;
    Ok(want)
}

/// The last `limit` lines, within the last `max_bytes` of the file.
fn tail_page(
    file: &File,
    len_bytes: u64,
    n_total_lines: usize,
    limit: usize,
    max_bytes: usize,
) -> io::Result<RawPage> {
    if limit == 0 || len_bytes == 0 {
        return Ok(empty_page(n_total_lines));
    }
    // One byte more than the budget, so the byte before the window tells whether the
    // window starts at a line start.
    let from = len_bytes.saturating_sub((max_bytes as u64).saturating_add(1));
    let mut window = vec![0; usize::try_from(len_bytes - from).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut window, from)?;
    // Line starts are the bytes after a newline; a newline that is the file's last
    // byte starts no line.
    let body = &window[..window.len() - 1];
    let mut n_lines = 0;
    let mut start_idx = None;
    for nl_idx in memchr::memrchr_iter(b'\n', body) {
        n_lines += 1;
        if n_lines == limit {
            start_idx = Some(nl_idx + 1);
            break;
        }
    }
    let (start_idx, is_head_cut, is_byte_limited) = match start_idx {
        Some(idx) if window.len() - idx <= max_bytes => (idx, false, false),
        // Fewer than `limit` lines in the window and it holds the whole file.
        None if from == 0 && window.len() <= max_bytes => {
            n_lines += 1;
            (0, false, false)
        }
        // Too long for the budget: keep the last `max_bytes`, from the first line
        // that starts in them; only a last line longer than the budget is cut.
        _ => {
            let idx = window.len() - max_bytes;
            let start_idx = if window[idx - 1] == b'\n' {
                Some(idx)
            } else {
                memchr::memchr(b'\n', &body[idx..]).map(|nl_idx| idx + nl_idx + 1)
            };
            match start_idx {
                Some(start_idx) => {
                    n_lines = memchr::memchr_iter(b'\n', &body[start_idx..]).count() + 1;
                    (start_idx, false, true)
                }
                None => {
                    n_lines = 1;
                    (idx, true, true)
                }
            }
        }
    };
    Ok(RawPage {
        start_byte: from + start_idx as u64,
        bytes: window[start_idx..].to_vec(),
        n_total_lines,
        first_line_idx: n_total_lines - n_lines,
        n_lines,
        is_head_cut,
        is_tail_cut: false,
        is_byte_limited,
        reaches_end: true,
    })
}

/// `limit` lines from line `offset`, at most `max_bytes`.
fn offset_page(
    file: &File,
    len_bytes: u64,
    n_newlines: u64,
    n_total_lines: usize,
    offset: usize,
    limit: usize,
    max_bytes: usize,
) -> io::Result<RawPage> {
    if offset >= n_total_lines || limit == 0 {
        let mut page = empty_page(n_total_lines);
        page.first_line_idx = offset.min(n_total_lines);
        return Ok(page);
    }
    let start = line_start(file, len_bytes, n_newlines, offset as u64)?;
    let want_lines = limit.min(n_total_lines - offset);
    let end_cap = len_bytes.min(start.saturating_add(max_bytes as u64));
    let mut window = vec![0; usize::try_from(end_cap - start).unwrap_or(usize::MAX)];
    file.read_exact_at(&mut window, start)?;
    let (keep, n_lines, is_tail_cut, is_byte_limited) =
        match memchr::memchr_iter(b'\n', &window).nth(want_lines - 1) {
            Some(nl_idx) => (nl_idx + 1, want_lines, false, false),
            // The whole rest of the file fits.
            None if end_cap == len_bytes => {
                let n_newlines_shown = memchr::memchr_iter(b'\n', &window).count();
                let ends_at_newline = window.last() == Some(&b'\n');
                let n_lines = n_newlines_shown + usize::from(!ends_at_newline);
                (window.len(), n_lines, false, false)
            }
            // The budget ends first: stop after the last whole line, and cut only a
            // first line longer than the budget.
            None => match memchr::memrchr(b'\n', &window) {
                Some(nl_idx) => {
                    let n_lines = memchr::memchr_iter(b'\n', &window).count();
                    (nl_idx + 1, n_lines, false, true)
                }
                None => (window.len(), 1, true, true),
            },
        };
    window.truncate(keep);
    Ok(RawPage {
        start_byte: start,
        reaches_end: start + keep as u64 == len_bytes,
        bytes: window,
        n_total_lines,
        first_line_idx: offset,
        n_lines,
        is_head_cut: false,
        is_tail_cut,
        is_byte_limited,
    })
}

/// A page with no lines, placed at the end of the file.
fn empty_page(n_total_lines: usize) -> RawPage {
    RawPage {
        start_byte: 0,
        bytes: Vec::new(),
        n_total_lines,
        first_line_idx: n_total_lines,
        n_lines: 0,
        is_head_cut: false,
        is_tail_cut: false,
        is_byte_limited: false,
        reaches_end: true,
    }
}

/// The byte where line `line_idx` starts (`1 <= line_idx <= n_newlines` starts after
/// the `line_idx`-th newline; line 0 at 0). Scans from whichever end is closer.
fn line_start(file: &File, len_bytes: u64, n_newlines: u64, line_idx: u64) -> io::Result<u64> {
    if line_idx == 0 {
        return Ok(0);
    }
    if line_idx > n_newlines {
        return Ok(len_bytes);
    }
    let mut buf = vec![0; BLOCK_BYTES];
    if line_idx <= n_newlines / 2 {
        // Forwards: skip whole blocks by count, then find the newline in its block.
        let mut seen = 0u64;
        let mut pos = 0u64;
        while pos < len_bytes {
            let n = read_block(file, &mut buf, pos, len_bytes)?;
            let in_block = memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
            if seen + in_block >= line_idx {
                let nth = usize::try_from(line_idx - seen - 1).unwrap_or(usize::MAX);
                if let Some(idx) = memchr::memchr_iter(b'\n', &buf[..n]).nth(nth) {
                    return Ok(pos + idx as u64 + 1);
                }
            }
            seen += in_block;
            pos += n as u64;
        }
    } else {
        // Backwards: the wanted newline is this many from the end, counting from 1.
        let from_end = n_newlines - line_idx + 1;
        let mut seen = 0u64;
        let mut end = len_bytes;
        while end > 0 {
            let pos = end.saturating_sub(BLOCK_BYTES as u64);
            let n = read_block(file, &mut buf, pos, end)?;
            let in_block = memchr::memchr_iter(b'\n', &buf[..n]).count() as u64;
            if seen + in_block >= from_end {
                let nth = usize::try_from(from_end - seen - 1).unwrap_or(usize::MAX);
                if let Some(idx) = memchr::memrchr_iter(b'\n', &buf[..n]).nth(nth) {
                    return Ok(pos + idx as u64 + 1);
                }
            }
            seen += in_block;
            end = pos;
        }
    }
    // The file changed under us (truncated by hand): answer from its end.
    Ok(len_bytes)
}

#[cfg(test)]
mod tests;
