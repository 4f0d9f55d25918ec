//! Whether a private-key block is open at some byte of a session's log: the one rule
//! every route that shows part of a log (a page, a chunk, a tail, a heartbeat, a
//! receipt) asks before redacting what it shows.
//!
//! A block is open at a position only when a BEGIN line was seen before it, no END
//! after that, and every line since could be key body (`keys::could_be_body`). Long
//! runs of lines that could be key body are no evidence on their own: the output of
//! `seq 1 3000000`, or a page of base64, is as body-like as a key's body but has no
//! BEGIN. So the look-back reads the last [`KEY_LOOKBACK_BYTES`] before the position
//! and decides from there when it can (a marker line, or a line that cannot be key
//! body, is in sight: the common case); otherwise it searches further back for the
//! nearest marker (`-----`, or a PuTTY key file's `-Lines: `: a vectorised search over raw bytes, however far), and only when
//! that line opens a block does it read forward from it to the position, checking
//! the lines between. A log without any marker before the position has no block open.
//!
//! A session's routes ask its `KeyIndex` first (kept as the output was
//! ingested: a lookup); this look-back answers only what the index did not see
//! decided (output from before a restart, output the log did not keep, a receipt
//! of a session that is gone).
//!
//! A log that does not reach the position (its cap, a failed write) says what it
//! can: a block open where the log stops is open, and for the output the log did
//! not keep, a block is open only when the text after the position shows an END
//! before any BEGIN.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use super::{KEY_LOOKBACK_BYTES, context, key_open_after, key_state_matters, keys, visible};

/// How much the far search reads at a time, backwards for a marker and forwards
/// over the lines of an open block.
const FAR_STEP_BYTES: usize = 1024 * 1024;

/// Whether a private-key block is open at byte `at` of a session's output, whose
/// kept log is `log` (`None`: no log could be opened), where `after` is the text
/// shown from `at` on (decoded, at least its first line). The log is asked only
/// when it matters: `at` is past the first byte and `after`'s first line could be
/// key body. A log that cannot be read is taken as ending inside a block (a key
/// body is never shown for want of a read).
pub fn key_open_in_log(log: Option<&File>, at: u64, after: &str) -> bool {
    if at == 0 || !key_state_matters(after) {
        return false;
    }
    let Some(file) = log else {
        return ends_a_block_it_did_not_begin(after);
    };
    match file.metadata() {
        Ok(meta) if meta.len() >= at => open_at(file, at)
            .and_then(|open| Ok(open || open_inside_its_line(file, at, after)?))
            .unwrap_or(true),
        Ok(meta) => {
            open_at(file, meta.len()).unwrap_or(true) || ends_a_block_it_did_not_begin(after)
        }
        Err(error) => {
            tracing::debug!(%error, "the log's length is unknown; a key is taken as open");
            true
        }
    }
}

/// How far back the line around a position is read for [`open_inside_its_line`]
/// (its BEGIN marker lies just before the position).
const LINE_BACK_BYTES: u64 = 4096;

/// Whether byte `at`, inside a line, lies in a block as the key index takes it:
/// the state at the line's start carried over the whole line (the part before
/// `at` alone may be a BEGIN marker cut in two, `-----BEGIN RSA PRI`, which opens
/// nothing yet, or a body line's prefix cut in two, `/home/u/.`, which is no body),
/// then open when the block goes on after the line, or when `at` lies between
/// the line's first mask and its last. The rest of the line is in `after`. A line
/// whose start lies more than [`LINE_BACK_BYTES`] back is left to [`open_at`].
///
/// # Errors
/// When the file cannot be read.
fn open_inside_its_line(file: &File, at: u64, after: &str) -> io::Result<bool> {
    let from = at.saturating_sub(LINE_BACK_BYTES);
    let head = decode(&read(file, from, at)?, from > 0);
    let partial = match memchr::memrchr(b'\n', head.as_bytes()) {
        Some(nl) => &head[nl + 1..],
        None if from == 0 => &head[..],
        None => return Ok(false),
    };
    if partial.is_empty() {
        return Ok(false);
    }
    let open_at_start = open_at(file, at - partial.len() as u64)?;
    let rest = memchr::memchr(b'\n', after.as_bytes()).map_or(after, |nl| &after[..nl]);
    let line = format!("{partial}{rest}");
    let (seen, cut) = match visible::strip(&line) {
        Some((copy, map)) => {
            let cut = map.partition_point(|&idx| idx < partial.len());
            (copy, cut)
        }
        None => (line, partial.len()),
    };
    let (spans, open) = keys::spans(&seen, open_at_start);
    let first = if open_at_start {
        Some(0)
    } else {
        spans.first().map(|s| s.0)
    };
    Ok(open
        || match (first, spans.last()) {
            (Some(first), Some(&(_, last))) => first < cut && cut <= last,
            _ => false,
        })
}

/// Whether `text` shows the end of a private-key block before any beginning: then a
/// block was open where it starts, though what came before it is not known.
/// Markers are looked for as a person sees them (a string escape may sit inside).
fn ends_a_block_it_did_not_begin(text: &str) -> bool {
    let stripped = visible::strip(text);
    let text = stripped.as_ref().map_or(text, |(copy, _)| copy.as_str());
    let ends_first = |end: &[u8], begin: &[u8]| match (
        memchr::memmem::find(text.as_bytes(), end),
        memchr::memmem::find(text.as_bytes(), begin),
    ) {
        (Some(end), Some(begin)) => end < begin,
        (Some(_), None) => true,
        _ => false,
    };
    ends_first(b"-----END", b"-----BEGIN") || ends_first(b"Private-MAC: ", b"-Lines: ")
}

/// Whether a block is open at byte `at` of `file` (at most its length).
///
/// # Errors
/// When the file cannot be read.
fn open_at(file: &File, at: u64) -> io::Result<bool> {
    if at == 0 {
        return Ok(false);
    }
    let near_from = at.saturating_sub(KEY_LOOKBACK_BYTES as u64);
    let near = read(file, near_from, at)?;
    let text = decode(&near, near_from > 0);
    // A marker in sight, or a line that cannot be key body: decided here, unless
    // that line is the one the read starts inside (a line longer than the read,
    // such as a block kept in one string, is judged from its start, found below).
    let deciding_line = keys::lookback_start(&text);
    let decided = (near_from == 0 || deciding_line != Some(0))
        && (keys::has_marker(text.as_bytes()) || deciding_line.is_some());
    if decided || near_from == 0 {
        return Ok(open_at_end(&text, false));
    }
    // Every line in sight could be key body: the nearest marker before decides.
    let Some(marker) = rfind_marker(file, near_from)? else {
        return Ok(false);
    };
    open_from_marker(file, marker, near_from, &text)
}

/// The byte offset of the last marker (`-----`, a PuTTY key file's `-Lines: `, or
/// `LS0tLS1C`, a PEM file in base64)
/// in `file` before `end`, searched backwards in steps (the steps overlap by seven
/// bytes so a marker across two is found).
///
/// # Errors
/// When the file cannot be read.
fn rfind_marker(file: &File, end: u64) -> io::Result<Option<u64>> {
    let finders = [
        memchr::memmem::FinderRev::new(b"-----"),
        memchr::memmem::FinderRev::new(b"-Lines: "),
        memchr::memmem::FinderRev::new(keys::ENCODED_NEEDLE),
    ];
    let mut to = end;
    let mut buf = Vec::new();
    while to > 0 {
        let from = to.saturating_sub(FAR_STEP_BYTES as u64);
        read_into(file, &mut buf, from, (to + 7).min(end))?;
        if let Some(idx) = finders.iter().filter_map(|f| f.rfind(&buf)).max() {
            return Ok(Some(from + idx as u64));
        }
        to = from;
    }
    Ok(None)
}

/// Whether a block is open at the end of `near` (the text read just before
/// `near_from`'s end, every line of which could be key body), given that the last
/// marker before `near_from` is at byte `marker`: the block opened on that line
/// must still be open when `near` starts, so the lines from it to `near_from` are
/// run through the state machine, forwards, stopping as soon as the block ends.
///
/// # Errors
/// When the file cannot be read.
fn open_from_marker(file: &File, marker: u64, near_from: u64, near: &str) -> io::Result<bool> {
    // The marker's line, from its start (at most one step back).
    let line_from = marker.saturating_sub(FAR_STEP_BYTES as u64);
    let head = read(file, line_from, marker)?;
    let mut at = memchr::memrchr(b'\n', &head).map_or(line_from, |nl| line_from + nl as u64 + 1);
    let mut open = false;
    let mut buf = Vec::new();
    // The part of a line `near` starts inside that is judged with `near` (from the
    // last line escaped in it: the state machine knows a block kept in one string
    // at an escaped line's start, not inside a line's prefix).
    let mut carried = String::new();
    while at < near_from {
        read_into(
            file,
            &mut buf,
            at,
            (at + FAR_STEP_BYTES as u64).min(near_from),
        )?;
        // Whole lines only; a line longer than a step is taken as it is.
        let n = if at + (buf.len() as u64) < near_from {
            memchr::memrchr(b'\n', &buf).map_or(buf.len(), |nl| nl + 1)
        } else {
            let line = memchr::memrchr(b'\n', &buf).map_or(0, |nl| nl + 1);
            match context::escaped_line_start(&buf[line..]) {
                Some(idx) if line + idx < buf.len() => {
                    carried = decode(&buf[line + idx..], false);
                    line + idx
                }
                _ => buf.len(),
            }
        };
        let text = decode(&buf[..n], false);
        open = match visible::strip(&text) {
            Some((seen, _)) => keys::spans(&seen, open).1,
            None => keys::spans(&text, open).1,
        };
        if !open {
            // No marker after this one: nothing can open a block again.
            return Ok(false);
        }
        if n < buf.len() {
            break;
        }
        at += n as u64;
    }
    carried.push_str(near);
    Ok(open_at_end(&carried, open))
}

/// Whether a block is open at the end of `text`, given the state where it starts.
/// An end inside a line escaped in a string (a block kept in one string) is in the
/// block when the block is open where that escaped line starts and the part of it
/// before the end does not close it: the state machine judges an escaped line
/// once it has seen it whole.
fn open_at_end(text: &str, open_at_start: bool) -> bool {
    let line = memchr::memrchr(b'\n', text.as_bytes()).map_or(0, |nl| nl + 1);
    match context::escaped_line_start(&text.as_bytes()[line..]) {
        Some(idx) if line + idx < text.len() => {
            let start = line + idx;
            let part = &text[start..];
            let closes = memchr::memchr2(b'"', b'\'', part.as_bytes()).is_some()
                || memchr::memmem::find(part.as_bytes(), b"-----END").is_some();
            key_open_after(&text[..start], open_at_start) && !closes
        }
        _ => key_open_after(text, open_at_start),
    }
}

/// The bytes of `file` from `from` to `to` (fewer at its end).
///
/// # Errors
/// When the file cannot be read.
fn read(file: &File, from: u64, to: u64) -> io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    read_into(file, &mut buf, from, to)?;
    Ok(buf)
}

/// Fills `buf` with the bytes of `file` from `from` to `to` (fewer at its end).
///
/// # Errors
/// When the file cannot be read.
fn read_into(file: &File, buf: &mut Vec<u8>, from: u64, to: u64) -> io::Result<()> {
    buf.clear();
    buf.resize(usize::try_from(to.saturating_sub(from)).unwrap_or(0), 0);
    let mut filled = 0;
    while filled < buf.len() {
        match file.read_at(&mut buf[filled..], from + filled as u64) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    buf.truncate(filled);
    Ok(())
}

/// Bytes as text for the key state: lossy, and when `cut` (the bytes start inside
/// the output) without a first character cut in two.
fn decode(bytes: &[u8], cut: bool) -> String {
    let skip = if cut {
        bytes
            .iter()
            .take(3)
            .take_while(|b| (**b & 0xC0) == 0x80)
            .count()
    } else {
        0
    };
    String::from_utf8_lossy(&bytes[skip..]).into_owned()
}

#[cfg(test)]
mod tests;
