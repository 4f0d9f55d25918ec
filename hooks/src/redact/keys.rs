//! Private-key blocks, line by line, with state carried across texts.
//!
//! A PEM or PGP private key is many lines: a `-----BEGIN … PRIVATE KEY-----` line,
//! base64 body lines (after optional `Name: value` headers and an empty line), and
//! an `-----END … PRIVATE KEY-----` line. A route that shows part of the output (a
//! running job, a tail, a page, a follow) may see the BEGIN without the END, or body
//! lines whose BEGIN came before its window, so a block is not a pattern that needs
//! both ends: it is a state, open from its BEGIN line until its END line or the
//! first line that cannot be key body, carried from one text to the next.
//!
//! Masking keeps the line structure: each masked line becomes
//! `[REDACTED PRIVATE KEY]` on its own line, so line counts, pages and offsets agree
//! with the log. A one-line form (`"-----BEGIN …-----\nMIIE…\n-----END …-----"` in
//! JSON, or a key folded with spaces) is masked from its BEGIN to its END, or to the
//! first character that cannot be key body.
//!
//! What counts as key body: ASCII base64 (`A-Z a-z 0-9 + / =`) with spaces and
//! tabs, optionally wrapped in quotes and a trailing comma (a key in YAML, JSON or
//! HCL); `Name: value` armour headers (`Proc-Type:`, `DEK-Info:`, `Version:`); empty
//! lines; a base64 run of 16 characters or more (or a padded last line) as the last
//! field behind a log prefix (`web-1  | …`, a timestamp), the prefix kept. Any other
//! line ends the block. An armour header is recognised behind the same prefixes.
//!
//! PuTTY key files (`.ppk`) are blocks too (see `ppk`): opened by `Public-Lines:`
//! or `Private-Lines:`, closed by `Private-MAC:`, their header lines masked like
//! armour headers.

mod dashes;
mod encoded;
mod markers;
pub(crate) use markers::{Markers, has_marker};
mod ppk;

// The key index reads no line with neither a `-` nor an `L` while no block is
// open (`keyindex.rs`): every opening needle holds one of them.
const _: () = assert!(encoded::NEEDLE[0] == b'L' && ppk::NEEDLE[0] == b'-');

pub(crate) use encoded::NEEDLE as ENCODED_NEEDLE;
pub(crate) use ppk::NEEDLE as PPK_NEEDLE;

/// What every masked part of a block becomes.
pub(crate) const KEY_MASK: &str = "[REDACTED PRIVATE KEY]";

/// Byte ranges of `text` to replace with [`KEY_MASK`], none spanning a newline,
/// and whether a block is still open at the end of `text`. `open` says a block was
/// open where `text` starts.
pub(crate) fn spans(text: &str, open: bool) -> (Vec<(usize, usize)>, bool) {
    spans_from(text, open, true, Markers::new())
}

/// As [`spans`], with the hits of [`PPK_NEEDLE`] and of [`ENCODED_NEEDLE`] in
/// `text` found beforehand (each list in order): the text is not searched for
/// them again.
pub(crate) fn spans_found(
    text: &str,
    open: bool,
    found: [&[usize]; 2],
) -> (Vec<(usize, usize)>, bool) {
    spans_from(text, open, true, Markers::found(found))
}

/// As [`spans`] for a text that starts at a line's start (the key index's lines):
/// a line of dashes in a block is never read as the rest of a cut opener.
pub(crate) fn whole_line_spans(text: &str, open: bool) -> (Vec<(usize, usize)>, bool) {
    spans_from(text, open, false, Markers::new())
}

fn spans_from(
    text: &str,
    mut open: bool,
    may_start_cut: bool,
    mut markers: Markers<'_>,
) -> (Vec<(usize, usize)>, bool) {
    let mut found = Vec::new();
    let mut line_start = 0;
    while line_start <= text.len() {
        if !open {
            // Outside a block only a line with a marker matters: go to the next.
            let Some(at) = markers.next(text.as_bytes(), line_start) else {
                break;
            };
            line_start = memchr::memrchr(b'\n', &text.as_bytes()[..at])
                .map_or(0, |nl| nl + 1)
                .max(line_start);
        }
        let line_end = memchr::memchr(b'\n', &text.as_bytes()[line_start..])
            .map_or(text.len(), |idx| line_start + idx);
        let line = &text[line_start..line_end];
        // A text cut inside the line that opened its block starts with the rest.
        let content = line.strip_suffix('\r').unwrap_or(line);
        let cut = (may_start_cut && open && line_start == 0).then(|| rest_of_opener(content));
        open = match cut.flatten() {
            Some((end, header)) => begun(content, end, &header, &mut found),
            None => line_spans(line, line_start, open, &mut found),
        };
        if line_end == text.len() {
            break;
        }
        line_start = line_end + 1;
    }
    (found, open)
}

/// Where to start the state machine to learn whether a block is open at the end of
/// `before` (the text just before a window): past every line that could be key
/// body to the nearest one that cannot, however far back (a block is as long as it
/// is; there is no fixed look-back). `None` when every line of `before` could be
/// key body: then the state where `before` starts decides.
pub(crate) fn lookback_start(before: &str) -> Option<usize> {
    let mut end = before.len();
    loop {
        let line_start = memchr::memrchr(b'\n', &before.as_bytes()[..end]).map_or(0, |i| i + 1);
        if !could_be_body(&before[line_start..end]) {
            return Some(line_start);
        }
        if line_start == 0 {
            return None;
        }
        end = line_start - 1;
    }
}

/// Whether a block is open at the end of `before`, given whether one was open
/// where it starts (see [`lookback_start`]).
///
/// A line holding `-----` is never key body, so the state after the last such
/// line does not depend on what came before it: the machine runs from there
/// (found by one backwards search), and only a `before` without any marker needs
/// `open_at_start` and its lines.
#[cfg(test)]
pub(crate) fn open_after(before: &str, open_at_start: bool) -> bool {
    let last = [&b"-----"[..], ppk::NEEDLE, encoded::NEEDLE]
        .iter()
        .filter_map(|needle| memchr::memmem::rfind(before.as_bytes(), needle))
        .max();
    match last {
        Some(at) => {
            let from = memchr::memrchr(b'\n', &before.as_bytes()[..at]).map_or(0, |nl| nl + 1);
            spans(&before[from..], false).1
        }
        None if open_at_start => lookback_start(before).is_none(),
        None => false,
    }
}

/// Whether a block is open at the end of `before` (tests: no state before it).
#[cfg(test)]
fn open_at_end(before: &str) -> bool {
    open_after(before, false)
}

/// Where an unfinished BEGIN marker starts at the end of `partial` (an unfinished
/// line): `-----BEG`, `-----BEGIN RSA PRIV`, `-----BEGIN EC PRIVATE KEY---`.
pub(crate) fn unfinished_marker(partial: &str) -> Option<usize> {
    const MARKER: &str = "-----BEGIN";
    let from = partial.len().saturating_sub(64);
    let bytes = partial.as_bytes();
    (from..partial.len()).find(|&at| {
        let rest = &bytes[at..];
        if rest.len() <= MARKER.len() {
            return MARKER.as_bytes().starts_with(rest);
        }
        rest.starts_with(MARKER.as_bytes())
            && find_marker(&partial[at..], MARKER).is_none()
            && rest[MARKER.len()..]
                .iter()
                .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ' || *b == b'-')
    })
}

/// The complete BEGIN or END marker of `text` that byte `at` lies strictly inside.
pub(crate) fn marker_around(text: &str, at: usize) -> Option<(usize, usize)> {
    for marker in ["-----BEGIN", "-----END"] {
        let mut from = 0;
        while let Some((start, end)) = find_marker(&text[from..], marker) {
            let (start, end) = (from + start, from + end);
            if start < at && at < end {
                return Some((start, end));
            }
            from = end;
        }
    }
    None
}

/// Spans of one line (`offset` is its start in the whole text); returns the state
/// after it.
fn line_spans(line: &str, offset: usize, open: bool, found: &mut Vec<(usize, usize)>) -> bool {
    let content = line.strip_suffix('\r').unwrap_or(line);
    if open {
        if let Some((open_after, end)) = continued_string(content, offset, found) {
            // Where the string's block ends, the rest of the line is ordinary.
            return open_after || line_spans(&content[end..], offset + end, false, found);
        }
        if offset == 0
            && let Some(end) = string_tail(content)
        {
            // A text cut inside the last line of a block written as one string:
            // the rest of that line up to the string's closing quote is key body.
            // What follows is judged as a line of the block (a list's next
            // element is body too); a closing quote and what follows it end it.
            found.push((offset, offset + end));
            return line_spans(&content[end..], offset + end, true, found);
        }
        let lead = content.len() - content.trim_start().len();
        if let Some((start, end)) = find_marker(content, "-----END") {
            // Body glued to the marker is masked with it; a log prefix is kept.
            let glued = is_body(&content[lead..start]) || content[lead..start].trim().is_empty();
            found.push((offset + if glued { lead } else { start }, offset + end));
            return false;
        }
        if content.trim().is_empty() {
            return true;
        }
        if let Some((start, name)) = armour_header(content) {
            found.push((offset + start, offset + content.trim_end().len()));
            return !ppk::closes(name);
        }
        let n_before = found.len();
        body_frames(content, offset, found);
        if found.len() > n_before {
            return true;
        }
        // Not key body: the block is over, and this line is an ordinary one.
    }
    if let Some((start, end, wrapped)) = encoded::opener(content) {
        found.push((offset + start, offset + end));
        return wrapped;
    }
    if let Some((start, number_end)) = ppk::opener(content) {
        let (run, closed) = ppk::one_line_run(&content[number_end..]);
        let end = number_end + run;
        let end = if run == 0 {
            end.max(trailer_start(content.trim_end().as_bytes()))
        } else {
            end
        };
        found.push((offset + start, offset + end));
        return !closed && is_trailer(&content[end..]);
    }
    let mut from = 0;
    let mut open_after = false;
    while let Some((begin, header_end)) = find_marker(&content[from..], "-----BEGIN") {
        let (begin, header_end) = (from + begin, from + header_end);
        let body_end = header_end + body_run(&content[header_end..]);
        if let Some((_, end)) = content[body_end..]
            .starts_with("-----END")
            .then(|| find_marker(&content[body_end..], "-----END"))
            .flatten()
        {
            found.push((offset + begin, offset + body_end + end));
            from = body_end + end;
            continue;
        }
        let (lines, lines_end, lines_open) = escaped_lines(&content[header_end..]);
        if lines_end > body_end - header_end && !is_trailer(&content[body_end..]) {
            // Lines escaped into one string, each behind a prefix: masked line by
            // line, as if the escaped newlines were real ones.
            found.push((offset + begin, offset + header_end));
            for (start, end) in lines {
                let (start, end) = (offset + header_end + start, offset + header_end + end);
                match found.last_mut() {
                    Some(last) if last.1 == start => last.1 = end,
                    _ => found.push((start, end)),
                }
            }
            open_after = lines_open;
            from = header_end + lines_end;
            if open_after {
                break;
            }
            continue;
        }
        found.push((offset + begin, offset + body_end));
        open_after = is_trailer(&content[body_end..]);
        from = body_end.max(begin + 1);
        if open_after {
            break;
        }
    }
    open_after
}

/// The end of the rest of a BEGIN marker that a text inside an open block starts
/// with (`EGIN RSA PRIVATE KEY-----`, `EY-----`, `--`): the text was cut inside the
/// line that opened the block, where the key index and the look-back take the
/// block as open already (from its line's start). Only when the marker's rest ends
/// the line, or is followed by what may follow a BEGIN (an escaped newline of a
/// block written as one string, a trailer). The rest may start a few bytes in
/// when its BEGIN keyword shows (the last bytes of a string escape cut in two,
/// `q\u{9c}EGIN …`); the rest of an END marker (`ND RSA PRIVATE KEY-----`) is none.
pub(crate) fn rest_of_begin(content: &str) -> Option<usize> {
    const OPENER: &str = "-----BEGIN ";
    let rest_at = |p: usize| -> Option<usize> {
        let rest = &content[p..];
        let k = (0..=OPENER.len()).find(|&k| rest.starts_with(&OPENER[k..]))?;
        let keyword = OPENER.len() - k;
        // Junk before the rest only with a letter of the keyword in sight.
        if p > 0 && keyword < 2 {
            return None;
        }
        let after = &rest[keyword..];
        let run = after
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
            .count();
        let label = after[..run].trim_end();
        let dashes = after[run..].bytes().take_while(|b| *b == b'-').count();
        let tails = ["PRIVATE KEY", "PRIVATE KEY BLOCK"];
        let label_ok = if keyword >= 2 {
            tails.iter().any(|t| label.ends_with(t))
        } else if label.is_empty() {
            p == 0 && (1..=5).contains(&dashes)
        } else {
            p == 0
                && !["END ", "ND ", "D "].iter().any(|e| label.starts_with(e))
                && tails
                    .iter()
                    .any(|t| label.ends_with(t) || t.ends_with(label))
        };
        let end = p + keyword + run + dashes;
        let closed = dashes >= 5 || (label.is_empty() && keyword < 2);
        let follows = &content[end..];
        (label_ok && closed && (follows.starts_with('\\') || is_trailer(follows))).then_some(end)
    };
    (0..=content.len().min(16))
        .filter(|p| content.is_char_boundary(*p))
        .find_map(rest_at)
}

/// The end of the rest of a PuTTY key file's `Private-Lines: N` or
/// `Public-Lines: N` header a text starts with (`vate-Lines: 2`, `es: 2`), and
/// the header whole; as [`rest_of_begin`], a few bytes in when the keyword shows.
fn rest_of_ppk_header(content: &str) -> Option<(usize, String)> {
    let rest_at = |p: usize| -> Option<(usize, String)> {
        let rest = &content[p..];
        let (keyword, header) = ["Private-Lines: ", "Public-Lines: "]
            .iter()
            .filter_map(|h| {
                let k = (0..h.len()).find(|&k| rest.starts_with(&h[k..]))?;
                Some((h.len() - k, *h))
            })
            .max()?;
        if keyword < if p > 0 { 3 } else { 1 } {
            return None;
        }
        let digits = rest[keyword..]
            .bytes()
            .take_while(u8::is_ascii_digit)
            .count();
        let end = p + keyword + digits;
        let follows = &content[end..];
        (digits > 0 && (follows.starts_with('\\') || is_trailer(follows)))
            .then(|| (end, format!("{header}{}", &content[end - digits..end])))
    };
    (0..=content.len().min(16))
        .filter(|p| content.is_char_boundary(*p))
        .find_map(rest_at)
}

/// The end of the rest of an opener (a BEGIN marker, a PuTTY key file's lines
/// header) that a text inside an open block starts with, and the opener whole.
pub(crate) fn rest_of_opener(content: &str) -> Option<(usize, String)> {
    rest_of_begin(content)
        .map(|end| (end, "-----BEGIN PRIVATE KEY-----".to_owned()))
        .or_else(|| rest_of_ppk_header(content))
}

/// The first line of a text cut inside an opener ([`rest_of_opener`]: its rest
/// ends at `end`, `header` is the opener whole), judged as that opener's line: the
/// rest masked, and what follows as what follows the opener (a block written as
/// one string goes on).
fn begun(content: &str, end: usize, header: &str, found: &mut Vec<(usize, usize)>) -> bool {
    let whole = format!("{header}{}", &content[end..]);
    let mut spans = Vec::new();
    let open = line_spans(&whole, 0, false, &mut spans);
    let back = |at: usize| at.checked_sub(header.len()).map_or(0, |past| past + end);
    found.push((0, end));
    for (start, stop) in spans {
        let (start, stop) = (back(start).max(end), back(stop));
        match found.last_mut() {
            Some(last) if last.1 >= start => last.1 = last.1.max(stop),
            _ if stop > start => found.push((start, stop)),
            _ => {}
        }
    }
    open
}

/// Whether `line` holds a marker that opens or closes a block (`-----`, a PuTTY
/// key file's lines header, a PEM file in base64): the key state after it does not
/// depend on the state before it.
pub(crate) fn is_marker_line(line: &str) -> bool {
    memchr::memmem::find(line.as_bytes(), b"-----").is_some()
        || ppk::opener(line).is_some()
        || encoded::opener(line).is_some()
}

/// Whether `line` could be part of a block (key body, an armour header or empty);
/// used to look back for a BEGIN. Any line the state machine keeps a block open
/// on passes; a line with a marker never does (the look-back must stop there).
pub(crate) fn could_be_body(line: &str) -> bool {
    let content = line.strip_suffix('\r').unwrap_or(line);
    if memchr::memmem::find(content.as_bytes(), b"-----").is_some()
        || ppk::opener(content).is_some()
        || encoded::opener(content).is_some()
    {
        return false;
    }
    if content.trim().is_empty() || continues_string(content) == Some(true) {
        return true;
    }
    // A header keeps a block open, except the one that closes it (a PuTTY file's
    // MAC): the look-back must stop there.
    if let Some((_, name)) = armour_header(content) {
        return !ppk::closes(name);
    }
    content.split('\r').any(|frame| frame_body(frame).is_some())
}

/// Masks the key body of each `\r` frame of `content` (a line inside an open
/// block): a progress frame before or after the body stays as it is.
fn body_frames(content: &str, offset: usize, found: &mut Vec<(usize, usize)>) {
    let mut at = 0;
    for frame in content.split('\r') {
        if let Some((start, end)) = frame_body(frame) {
            found.push((offset + at + start, offset + at + end));
        }
        at += frame.len() + 1;
    }
}

/// The key body in one frame of a line inside an open block, whatever the line
/// carries around it: a prefix (`path:` from `grep -r`, `grep -n`'s number, a diff
/// marker, a log prefix or timestamp) and a trailer (`cat -A`'s `$`, a quote and
/// comma, an escaped newline of a JSON or Python string, escaped once or twice).
/// `None` when the frame cannot be key body.
fn frame_body(frame: &str) -> Option<(usize, usize)> {
    if memchr::memmem::find(frame.as_bytes(), b"-----").is_some() {
        return None;
    }
    // Folded with spaces, or quoted: the whole frame.
    if is_body(frame) {
        let lead = frame.len() - frame.trim_start().len();
        return Some((lead, frame.trim_end().len()));
    }
    let bytes = frame.as_bytes();
    let end = trailer_start(bytes);
    let core = &frame[..end];
    if core.trim().is_empty() {
        return None;
    }
    if is_body(core) {
        let lead = core.len() - core.trim_start().len();
        return Some((lead, core.trim_end().len()));
    }
    let run_len = bytes[..end]
        .iter()
        .rev()
        .take_while(|b| is_base64(**b))
        .count();
    if run_len < 2 {
        return None;
    }
    let run_start = end - run_len;
    let prefix = core[..run_start].trim_end();
    let marked_prefix = prefix.is_empty()
        || prefix.ends_with([':', '|', '-', '+', '>', '<', '!', '$', '#', ']'])
        || prefix.ends_with("\\n");
    let long = run_len >= 16 || core.ends_with('=');
    // A short run behind a prefix is body only if it looks like base64, not a
    // word (`status: ok`, `INFO: Started`).
    let run = &core[run_start..];
    let base64ish = run
        .bytes()
        .any(|b| b.is_ascii_digit() || matches!(b, b'+' | b'/'))
        || (run.len() >= 8
            && run.bytes().filter(u8::is_ascii_uppercase).count() >= 2
            && run.bytes().any(|b| b.is_ascii_lowercase()));
    (long || (marked_prefix && base64ish)).then_some((run_start, end))
}

/// Where the trailer of a body frame starts: trailing spaces, `$` (`cat -A`), `^M`,
/// quotes, commas, a backslash, and escaped newlines (`\n`, `\\n`).
fn trailer_start(bytes: &[u8]) -> usize {
    let mut end = bytes.len();
    loop {
        match bytes[..end] {
            [.., b'\\', b'n' | b'r'] => end -= 2,
            [.., b' ' | b'\t' | b'$' | b'"' | b'\'' | b',' | b';' | b'\\'] => end -= 1,
            [.., b'^', b'M'] => end -= 2,
            _ => return end,
        }
    }
}

/// The key lines of a block escaped into one string (`\\n` between them, escaped
/// once or more), read like real lines: each may carry a prefix (a log prefix, a
/// path) and `\\r` progress frames, kept. `rest` follows the BEGIN marker. Returns
/// the spans to mask (relative to `rest`; a line's escaped newline is masked with
/// the line before it when the line has no prefix), where the block ends, and
/// whether it is still open there.
fn escaped_lines(rest: &str) -> (Vec<(usize, usize)>, usize, bool) {
    let mut spans: Vec<(usize, usize)> = Vec::new();
    // What may end the BEGIN line (`cat -A`'s `$`, spaces) before its newline.
    let first = next_escaped(rest, 0, b'n');
    let mut pos = if is_trailer(&rest[..first]) { first } else { 0 };
    loop {
        let esc = escaped(&rest[pos..], b'n');
        if esc == 0 {
            return (spans, pos, false);
        }
        let start = pos + esc;
        let end = next_escaped(rest, start, b'n');
        let line = &rest[start..end];
        if let Some((s, e)) = find_marker(line, "-----END") {
            let glued = is_body(&line[..s]) || line[..s].trim().is_empty();
            spans.push((if glued { pos } else { start + s }, start + e));
            return (spans, start + e, false);
        }
        // The string ends on the last line: its body runs to the closing quote.
        let last = end == rest.len();
        let cut = if last {
            line.find(['"', '\'', '\\']).unwrap_or(line.len())
        } else {
            line.len()
        };
        if last && cut == line.len() && !line.is_empty() && line.bytes().all(is_base64) {
            // The text ends inside a body line (a look-back cut at a window's
            // start): however short the part seen, the line goes on.
            spans.push((pos, end));
            return (spans, end, true);
        }
        let n_before = spans.len();
        let mut frame_start = 0;
        let mut body_end = 0;
        while frame_start <= cut {
            let frame_end = next_escaped(&line[..cut], frame_start, b'r');
            if let Some((s, e)) = frame_body(&line[frame_start..frame_end]) {
                let s = if frame_start + s == 0 {
                    pos
                } else {
                    start + frame_start + s
                };
                spans.push((s, start + frame_start + e));
                body_end = frame_start + e;
            }
            if frame_end == cut {
                break;
            }
            frame_start = frame_end + escaped(&line[frame_end..], b'r');
        }
        let blank = line[..cut].trim().is_empty();
        if spans.len() == n_before && !blank {
            return (spans, pos, false);
        }
        if last {
            let end_at = if spans.len() > n_before { body_end } else { 0 };
            return (spans, start + end_at, is_trailer(&line[end_at..]));
        }
        pos = end;
    }
}

/// Whether `line` would go on with a block written as one string that is open
/// where it starts (see `continued_string`), and if so whether the block is still
/// open after it.
pub(crate) fn continues_string(line: &str) -> Option<bool> {
    let content = line.strip_suffix('\r').unwrap_or(line);
    continued_string(content, 0, &mut Vec::new()).map(|(open, _)| open)
}

/// A line that starts inside a block written as one string with escaped newlines
/// (a text cut inside such a line: a window deep in a long one): its first part is
/// the rest of a key line, the parts after it the block's next lines. Pushes the
/// spans and returns whether the block is open after the line, and where it ends
/// on the line if not; `None` when `content` holds no escaped newline or its first
/// part cannot be key body (the line rules decide).
fn continued_string(
    content: &str,
    offset: usize,
    found: &mut Vec<(usize, usize)>,
) -> Option<(bool, usize)> {
    let first = next_escaped(content, 0, b'n');
    if first == content.len() {
        return None;
    }
    let head = &content[..first];
    if find_marker(head, "-----END").is_some() || armour_header(head).is_some() {
        return None;
    }
    let head_span = frame_body(head);
    if head_span.is_none() && !head.trim().is_empty() {
        return None;
    }
    if let Some((start, end)) = head_span {
        found.push((offset + start, offset + end));
    }
    let (lines, end, open) = escaped_lines(&content[first..]);
    for (start, end) in lines {
        let (start, end) = (offset + first + start, offset + first + end);
        match found.last_mut() {
            Some(last) if last.1 == start => last.1 = end,
            _ => found.push((start, end)),
        }
    }
    Some((open, first + end))
}

/// A text that starts inside the last line of a block written as one string (no
/// escaped newline after the cut): the end of the base64 run it starts with when a
/// closing quote (escaped any number of times) follows the run and the rest is
/// no trailer of a body line (`…AB=="}`, not `…AB==",`); `None` otherwise (the
/// line rules decide).
fn string_tail(content: &str) -> Option<usize> {
    let bytes = content.as_bytes();
    let run = bytes.iter().take_while(|b| is_base64(**b)).count();
    let slashes = bytes[run..].iter().take_while(|b| **b == b'\\').count();
    let quote = bytes.get(run + slashes).copied();
    (run > 0 && matches!(quote, Some(b'"' | b'\'')) && !is_trailer(&content[run..])).then_some(run)
}

/// The length of the escapes (`\\n`, `\\\\n`, … for `letter` `n`) `text` starts with.
fn escaped(text: &str, letter: u8) -> usize {
    let bytes = text.as_bytes();
    let mut n = 0;
    loop {
        let slashes = bytes[n..].iter().take_while(|b| **b == b'\\').count();
        match bytes.get(n + slashes) {
            Some(b) if *b == letter && slashes > 0 => n += slashes + 1,
            _ => return n,
        }
    }
}

/// Where the next escape of `letter` at or after `from` starts (`text.len()` if none).
fn next_escaped(text: &str, from: usize, letter: u8) -> usize {
    let bytes = text.as_bytes();
    let mut at = from;
    while let Some(idx) = memchr::memchr(b'\\', &bytes[at..]) {
        let slash = at + idx;
        if escaped(&text[slash..], letter) > 0 {
            return slash;
        }
        at = slash + bytes[slash..].iter().take_while(|b| **b == b'\\').count();
    }
    text.len()
}

/// Whether what follows a BEGIN marker (and its one-line body) on its line leaves
/// the block open: nothing, or only spaces, `cat -A`'s `$` and escaped newlines.
fn is_trailer(rest: &str) -> bool {
    let bytes = rest.as_bytes();
    let mut end = bytes.len();
    loop {
        match bytes[..end] {
            [] => return true,
            [.., b'\\', b'n' | b'r'] => end -= 2,
            [.., b' ' | b'\t' | b'$' | b'\r' | b'\\'] => end -= 1,
            // A quote and comma ending a list element (`'-----BEGIN …-----',`).
            [.., b'\'' | b'"', b','] => end -= 2,
            [.., b'^', b'M'] => end -= 2,
            _ => return false,
        }
    }
}

/// A base64 byte.
fn is_base64(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=')
}

/// A base64 body line, optionally quoted with a trailing comma.
fn is_body(content: &str) -> bool {
    let core = content
        .trim()
        .trim_end_matches(',')
        .trim_matches(|c| c == '"' || c == '\'');
    !core.is_empty()
        && core
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b' ' | b'\t'))
}

/// An armour header of PEM (RFC 1421) or OpenPGP (RFC 4880) (`Proc-Type: 4,ENCRYPTED`,
/// `DEK-Info: …`, `Version: …`, `Comment: …`) or a header of a PuTTY key file
/// (`Private-Lines: 14`, `Private-MAC: …`), behind any prefix that ends in a
/// non-word byte (`path:`, `12:`, `+`, a log prefix, an indent, a quote): where
/// its name starts, and the name.
fn armour_header(content: &str) -> Option<(usize, &str)> {
    const NAMES: [&str; 7] = [
        "Proc-Type",
        "DEK-Info",
        "Version",
        "Comment",
        "Hash",
        "Charset",
        "MessageID",
    ];
    let bytes = content.as_bytes();
    let colons = memchr::memchr_iter(b':', bytes).filter(|at| bytes.get(at + 1) == Some(&b' '));
    for colon in colons {
        let run = bytes[..colon]
            .iter()
            .rev()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'-')
            .count();
        let mut start = colon - run;
        while start < colon && !bytes[start].is_ascii_alphabetic() {
            start += 1;
        }
        let name = &content[start..colon];
        let boundary = ppk::boundary_before(bytes, start);
        if boundary && (NAMES.contains(&name) || ppk::is_header(name)) {
            return Some((start, name));
        }
    }
    None
}

/// Bytes of key body after a BEGIN header on the same line: base64, spaces, tabs,
/// the escapes `\n` / `\r` / `\/` of a key written as one JSON or Python string
/// (escaped once or twice), and the `', '` between the elements of a list of the
/// key's lines (`['-----BEGIN …-----\n', 'MIIE…\n', …]`).
fn body_run(rest: &str) -> usize {
    let bytes = rest.as_bytes();
    let mut n = 0;
    while n < bytes.len() {
        match bytes[n] {
            b'\\' => {
                let n_slashes = bytes[n..].iter().take_while(|b| **b == b'\\').count();
                match bytes.get(n + n_slashes) {
                    Some(b'n' | b'r' | b'/') => n += n_slashes + 1,
                    _ => break,
                }
            }
            b'\'' | b'"' => {
                // The end of one element of a list of lines (`readlines()`, each
                // ending in `\n`, or `splitlines()`, the BEGIN line its own
                // element), and the next one: a quote, a comma, a quote.
                let sep = bytes[n + 1..]
                    .iter()
                    .take_while(|b| matches!(b, b',' | b' '))
                    .count();
                let has_comma = bytes[n + 1..n + 1 + sep].contains(&b',');
                // The next element must be key text too (a line of body or the
                // END marker), or this one must have ended a line (`…\n'`): a
                // JSON object's next field (`", "n": 1`) is not.
                let next_at = n + 2 + sep;
                let next_is_key = bytes.get(next_at..).is_some_and(|next| {
                    next.starts_with(b"-----END")
                        || next.iter().take_while(|b| is_base64(**b)).count() >= 16
                });
                let ended_line = n >= 2 && bytes[n - 1] == b'n' && bytes[n - 2] == b'\\';
                match bytes.get(n + 1 + sep) {
                    Some(b'\'' | b'"') if has_comma && (ended_line || next_is_key) => {
                        n += sep + 2;
                    }
                    _ => break,
                }
            }
            b if is_base64(b) || matches!(b, b' ' | b'\t') => n += 1,
            _ => break,
        }
    }
    n
}

/// `<marker> <LABEL>PRIVATE KEY[ BLOCK]-----` in `text` (marker is `-----BEGIN` or
/// `-----END`): its start and end.
fn find_marker(text: &str, marker: &str) -> Option<(usize, usize)> {
    let mut from = 0;
    while let Some(idx) = memchr::memmem::find(&text.as_bytes()[from..], marker.as_bytes()) {
        let at = from + idx;
        let rest = &text[at + marker.len()..];
        let label_len = rest
            .bytes()
            .take_while(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || *b == b' ')
            .count();
        let label = rest[..label_len].trim_end();
        if (label.ends_with("PRIVATE KEY") || label.ends_with("PRIVATE KEY BLOCK"))
            && rest[label_len..].starts_with("-----")
        {
            let mut end = at + marker.len() + label_len + 5;
            // Dashes beyond five belong to the marker too.
            end += text[end..].bytes().take_while(|b| *b == b'-').count();
            return Some((at, end));
        }
        from = at + 1;
    }
    None
}

#[cfg(test)]
pub(crate) mod tests {
    use super::{open_at_end, spans};

    /// The fuzz findings' shape: `lines` of a key file numbered as `cat -n` prints
    /// them, `escape` inserted after each line's sixth character, the whole
    /// escaped into a JSON string twice, on one line between two others.
    pub(crate) fn numbered_in_one_string(lines: &[String], escape: &str) -> String {
        let numbered: Vec<String> = lines
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let mut line = line.clone();
                line.insert_str(6.min(line.len()), escape);
                format!("{:6}\t{line}", i + 1)
            })
            .collect();
        let [_, twice] = in_one_string(&format!("{}\n", numbered.join("\n")), "secret");
        format!("start\n{twice}\ndone\n")
    }

    /// `block` escaped into a JSON string once (`{"key": "…"}`) and twice (that
    /// object escaped again as the value of `outer`): the two shapes of a key kept
    /// in one string that the fuzz findings had.
    pub(crate) fn in_one_string(block: &str, outer: &str) -> [String; 2] {
        let once = serde_json::to_string(block).unwrap_or_default();
        let inner = format!("{{\"key\": {once}}}");
        let twice = serde_json::to_string(&inner).unwrap_or_default();
        [inner, format!("{{\"{outer}\": {twice}}}")]
    }

    fn masked(text: &str, open: bool) -> (String, bool) {
        let (found, open) = spans(text, open);
        let mut out = String::new();
        let mut last = 0;
        for (s, e) in found {
            out.push_str(&text[last..s]);
            out.push_str("[K]");
            last = e;
        }
        out.push_str(&text[last..]);
        (out, open)
    }

    #[test]
    fn b30_a_block_is_masked_line_by_line_from_its_begin() {
        let pem =
            "x\n-----BEGIN RSA PRIVATE KEY-----\nMIIEow\nIBAAK\n-----END RSA PRIVATE KEY-----\ny";
        assert_eq!(
            masked(pem, false),
            ("x\n[K]\n[K]\n[K]\n[K]\ny".into(), false)
        );
        let open = "log\n-----BEGIN OPENSSH PRIVATE KEY-----\r\nb3Bl\r\nbnNz";
        assert_eq!(masked(open, false), ("log\n[K]\r\n[K]\r\n[K]".into(), true));
        // The block ends at the first line that cannot be body.
        let ended = "-----BEGIN PRIVATE KEY-----\nMIIE\nerror: truncated key\nMIIE";
        assert_eq!(
            masked(ended, false),
            ("[K]\n[K]\nerror: truncated key\nMIIE".into(), false)
        );
        // Carried state: a text that starts inside a block.
        assert_eq!(
            masked("MIIE\n  \"abc+/=\",\n-----END PRIVATE KEY-----\nok", true),
            ("[K]\n  [K]\n[K]\nok".into(), false)
        );
        let encrypted = "-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,AB12\n\nMIIE\n";
        assert_eq!(
            masked(encrypted, false),
            ("[K]\n[K]\n[K]\n\n[K]\n".into(), true)
        );
        let pgp = "-----BEGIN PGP PRIVATE KEY BLOCK-----\nVersion: GnuPG v2\n\nlQOY\n=abcd\n-----END PGP PRIVATE KEY BLOCK-----";
        assert_eq!(
            masked(pgp, false),
            ("[K]\n[K]\n\n[K]\n[K]\n[K]".into(), false)
        );
    }

    #[test]
    fn b30_a_key_behind_a_log_prefix_is_masked_and_the_prefix_kept() {
        let compose = "web-1  | -----BEGIN RSA PRIVATE KEY-----\nweb-1  | MIIEowIBAAKCAQEA7bq3xGZ8\nweb-1  | AB12==\nweb-1  | -----END RSA PRIVATE KEY-----\nweb-1  | ready";
        assert_eq!(
            masked(compose, false),
            (
                "web-1  | [K]\nweb-1  | [K]\nweb-1  | [K]\nweb-1  | [K]\nweb-1  | ready".into(),
                false
            )
        );
        let stamped = "2026-12-01T10:00:00.1Z -----BEGIN PRIVATE KEY-----\n2026-12-01T10:00:00.2Z MIIEvQIBADANBgkqhkiG9w0B\n2026-12-01T10:00:00.3Z done";
        assert_eq!(
            masked(stamped, false),
            (
                "2026-12-01T10:00:00.1Z [K]\n2026-12-01T10:00:00.2Z [K]\n2026-12-01T10:00:00.3Z done".into(),
                false
            )
        );
        assert!(open_at_end(
            "x\nweb-1  | -----BEGIN RSA PRIVATE KEY-----\nweb-1  | MIIEowIBAAKCAQEA7bq3xGZ8\n"
        ));
    }

    #[test]
    fn b30_one_line_keys_are_masked_to_their_end_or_the_first_non_body_character() {
        let json = r#"{"key": "-----BEGIN PRIVATE KEY-----\nMIIE\nabc\n-----END PRIVATE KEY-----\n", "n": 1}"#;
        assert_eq!(masked(json, false).0, r#"{"key": "[K]\n", "n": 1}"#);
        let cut = r#"{"key": "-----BEGIN PRIVATE KEY-----\nMIIE\nab"#;
        // Cut at the end of the text: the key may go on in the next text.
        assert_eq!(masked(cut, false), (r#"{"key": "[K]"#.into(), true));
        let quoted = r#"{"key": "-----BEGIN PRIVATE KEY-----\nMIIE", "n": 1}"#;
        assert_eq!(
            masked(quoted, false),
            (r#"{"key": "[K]", "n": 1}"#.into(), false)
        );
        let code = r#"if line.startswith("-----BEGIN RSA PRIVATE KEY-----"):"#;
        assert_eq!(
            masked(code, false),
            (r#"if line.startswith("[K]"):"#.into(), false)
        );
        assert!(!masked("-----BEGIN PUBLIC KEY-----\nMIIB", false).1);
    }

    #[test]
    fn b30_a_window_inside_a_block_finds_its_begin() {
        let before = "start\n-----BEGIN EC PRIVATE KEY-----\nMHcC\nAQEE\n";
        assert!(open_at_end(before));
        assert!(open_at_end("-----BEGIN EC PRIVATE KEY-----\nMHcC\nAQ"));
        assert!(!open_at_end(
            "start\n-----BEGIN EC PRIVATE KEY-----\nMHcC\n-----END EC PRIVATE KEY-----\n"
        ));
        assert!(!open_at_end("plain text\nmore words here\n"));
        assert!(!open_at_end(""));
        // However far back: found (no fixed look-back).
        let far = format!(
            "x\n-----BEGIN PRIVATE KEY-----\n{}",
            "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n".repeat(10_000)
        );
        assert!(open_at_end(&far));
        // A BEGIN at the end of a line longer than 64 KiB.
        let long = format!(
            "{}-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n",
            "x".repeat(70_000)
        );
        assert!(open_at_end(&long));
        // Every line could be body: the state before decides.
        assert!(super::open_after("MIIEvQIBADANBgkqhkiG9w0B\nAB==\n", true));
        assert!(!super::open_after(
            "MIIEvQIBADANBgkqhkiG9w0B\nAB==\n",
            false
        ));
        assert!(!super::open_after(
            "MIIEvQIBADANBgkqhkiG9w0B\ndone.\n",
            true
        ));
    }

    #[test]
    fn b30_key_body_is_masked_whatever_each_line_carries() {
        let body = [
            "MIIEowIBAAKCAQEA7bq3xGZ8pQrT",
            "Zm9vYmFyYmF6cXV4cXV1eA0K",
            "AB12==",
        ];
        let forms: [(&str, &str); 8] = [
            ("dir/id_rsa:", ""),
            ("", "$"),
            ("12:", ""),
            ("dir/id_rsa:12:", ""),
            ("+", ""),
            ("-", ""),
            ("progress 40%\r", ""),
            ("2026-12-01T10:00:00Z app[web.1]: ", ""),
        ];
        for (prefix, suffix) in forms {
            let mut text = format!("{prefix}-----BEGIN RSA PRIVATE KEY-----{suffix}\n");
            for line in body {
                text.push_str(&format!("{prefix}{line}{suffix}\n"));
            }
            text.push_str(&format!("{prefix}Ab3x{suffix}\n"));
            text.push_str(&format!(
                "{prefix}-----END RSA PRIVATE KEY-----{suffix}\nafter\n"
            ));
            let (out, open) = masked(&text, false);
            assert!(!open, "{prefix:?}: {out}");
            for line in body.iter().chain(&["Ab3x"]) {
                assert!(
                    !out.contains(line),
                    "{prefix:?}{suffix:?} shows {line}: {out}"
                );
            }
            assert!(out.ends_with("after\n"), "{out}");
        }
    }

    /// A PuTTY key file (version 3, encrypted): its secret lines.
    pub(crate) const PPK: &str = "PuTTY-User-Key-File-3: ssh-ed25519\nEncryption: aes256-cbc\nComment: ed25519-key-20260101\nPublic-Lines: 2\nAAAAC3NzaC1lZDI1NTE5AAAAIBz0c3VwZXJwdWJsaWNrZXlib2R5\nbWFkZXVwZm9ydGhldGVzdA==\nKey-Derivation: Argon2id\nArgon2-Memory: 8192\nArgon2-Passes: 13\nArgon2-Parallelism: 1\nArgon2-Salt: 5b2ec0f1a2b3c4d5e6f708192a3b4c5d\nPrivate-Lines: 2\nQ2hhbmdlTWVQbGVhc2VUaGlzSXNBVGVzdEtleQ1x\nVGhlUHJpdmF0ZVBhcnRJc0hlcmVBbmRNYXNrZWQ2\nPrivate-MAC: 6c1a9e0f2b3d4c5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d\n";

    /// The parts of [`PPK`] no route may show.
    pub(crate) const PPK_SECRETS: [&str; 3] = [
        "Q2hhbmdlTWVQbGVhc2VUaGlz",
        "VGhlUHJpdmF0ZVBhcnRJc0hl",
        "6c1a9e0f2b3d4c5e6f70",
    ];

    #[test]
    fn b30_a_putty_key_file_is_masked_whatever_each_line_carries() {
        let forms: [(&str, &str); 7] = [
            ("", ""),
            ("dir/id.ppk:", ""),
            ("", "$"),
            ("12:", ""),
            ("dir/id.ppk:12:", ""),
            ("  ", ""),
            ("2026-12-01T10:00:00Z app[web.1]: ", ""),
        ];
        for (prefix, suffix) in forms {
            let mut text = String::from("before\n");
            for line in PPK.lines() {
                text.push_str(&format!("{prefix}{line}{suffix}\n"));
            }
            text.push_str("after\n");
            let (out, open) = masked(&text, false);
            assert!(
                !open,
                "{prefix:?}{suffix:?}: the MAC closes the block: {out}"
            );
            for secret in PPK_SECRETS {
                assert!(
                    !out.contains(secret),
                    "{prefix:?}{suffix:?} shows {secret}: {out}"
                );
            }
            assert!(
                out.contains("ssh-ed25519") && out.ends_with("after\n"),
                "{out}"
            );
            // A text that starts inside the block, its opener before it.
            let line_of = |needle: &str| {
                text.find(needle)
                    .map_or(0, |at| text[..at].rfind('\n').map_or(0, |nl| nl + 1))
            };
            let (out, _) = masked(&text[line_of("Q2hh")..], true);
            assert!(!out.contains(PPK_SECRETS[1]), "{out}");
            assert!(
                open_at_end(&text[..line_of("VGhl")]),
                "{prefix:?}{suffix:?}"
            );
        }
        // The private part alone (`grep -A2 Private-Lines`).
        let (out, open) = masked(
            "Private-Lines: 1\nQ2hhbmdlTWVQbGVhc2VUaGlzSXNBVGVzdEtleQ1x\n",
            false,
        );
        assert!(open && !out.contains("Q2hhbmdl"), "{out}");
    }

    #[test]
    fn b30_a_putty_key_file_in_one_string_is_masked() {
        let once = PPK.replace('\n', "\\n");
        let twice = PPK.replace('\n', "\\\\n");
        let list = format!(
            "['{}']",
            PPK.lines()
                .map(|l| format!("{l}\\n"))
                .collect::<Vec<_>>()
                .join("', '")
        );
        for text in [
            format!("{{\"key\": \"{once}\", \"n\": 1}}"),
            format!("{{\"a\": \"{{\\\"key\\\": \\\"{twice}\\\"}}\"}}"),
            format!("key = '{once}'"),
            list,
        ] {
            let (out, open) = masked(&text, false);
            for secret in PPK_SECRETS {
                assert!(!out.contains(secret), "shows {secret}: {out}");
            }
            assert!(!open, "{out}");
        }
        // Cut before its MAC: the block goes on in the next text.
        let cut = &once[..once.find("Private-MAC").unwrap_or(0)];
        assert!(masked(&format!("\"{cut}"), false).1);
        // Prose that names the format is not a key.
        let prose = "the header Public-Lines: says how many lines follow\nok";
        assert_eq!(masked(prose, false), (prose.to_owned(), false));
    }

    #[test]
    fn b30_one_line_keys_escaped_twice_or_as_a_list_are_masked() {
        let twice = r#"{"a": "{\"key\": \"-----BEGIN PRIVATE KEY-----\\nMIIEvQIBADANBgkqhkiG9w0B\\nQEFAASC\\n-----END PRIVATE KEY-----\\n\"}"}"#;
        let out = masked(twice, false).0;
        assert!(!out.contains("MIIEvQ") && !out.contains("QEFAASC"), "{out}");
        let list = r#"['-----BEGIN RSA PRIVATE KEY-----\n', 'MIIEvQIBADANBgkqhkiG9w0B\n', 'QEFAASC\n', '-----END RSA PRIVATE KEY-----\n']"#;
        let out = masked(list, false).0;
        assert!(!out.contains("MIIEvQ") && !out.contains("QEFAASC"), "{out}");
        // The block stays open after a `cat -A` BEGIN line.
        assert!(masked("-----BEGIN EC PRIVATE KEY-----$", false).1);
        // But not after code that names the marker.
        assert!(!masked(r#"x = "-----BEGIN EC PRIVATE KEY-----""#, false).1);
    }
}
