//! The text a person would see: terminal escapes and invisible characters removed.
//!
//! `sk-\u{200b}proj-...`, `ghp_\x1b[1mabc...` or a token coloured by `grep --color`
//! prints like a token on a terminal (or to an agent that strips escapes), but no
//! token pattern matches the bytes. When a text holds such sequences the redactor
//! matches on a copy without them and maps each match back onto the original, so a
//! route that prints raw bytes keeps its escapes outside the masked ranges.
//!
//! Removed: ESC sequences (CSI `ESC [ … final`, OSC `ESC ] … BEL|ST`, DCS, SOS, PM
//! and APC strings up to ST, nF escapes (`ESC`, any intermediates 0x20..=0x2F, a
//! final 0x30..=0x7E: `ESC ( B`, `ESC $ ( B`, `ESC SP g`), and the two-byte Fp, Fe
//! and Fs escapes), as a terminal's parser consumes them,
//! their C1 forms (U+009B CSI, U+009D OSC, U+0090 DCS, …), the other C0 controls but
//! tab, newline and carriage return, DEL, and the zero-width and bidi format
//! characters (U+00AD, U+061C, U+180E, U+200B..U+200F, U+202A..U+202E,
//! U+2060..U+2064, U+2066..U+2069, U+FEFF).
//!
//! Overstrike (`c\bc` bold, `_\bc` underline, as `man` prints through a pager) is
//! resolved as `col -b` resolves it: only the last character written to a column is
//! seen.
//!
//! Escapes spelled out as text in a JSON string, a Python repr or a C literal
//! (`\u001b[31m`, `\x1b]0;t\x07`) are removed too (`textual`).
//!
//! Invariant: a newline is never removed, so every line of the copy maps onto the
//! same line of the original.

mod textual;

/// A copy of `text` without escapes and invisible characters, and for each byte of
/// the copy the index of the same byte in `text`. `None` when there are none (the
/// common case: one pass over the bytes, no allocation).
pub(super) fn strip(text: &str) -> Option<(String, Vec<usize>)> {
    strip_as(text, false)
}

/// The other reading of a text with an nF escape whose final byte begins a word
/// (`ESC SP ghp_…`): a terminal eats that letter, a reader of the bytes sees the
/// word whole. This copy keeps such letters (and is otherwise [`strip`]'s), so a
/// token whose first letter the escape took is still found. `None` when the text
/// has no such escape (the common case).
pub(super) fn strip_keeping_word_finals(text: &str) -> Option<(String, Vec<usize>)> {
    let bytes = text.as_bytes();
    let any = memchr::memchr_iter(0x1b, bytes).any(|idx| {
        let len = escape_len(bytes, idx);
        len >= 3 && ends_on_a_word(bytes, idx, len)
    });
    if any { strip_as(text, true) } else { None }
}

/// Whether a line end or a tab spelled out in a string (`\n`, `\r`, `\t`,
/// escaped any number of times) ends just before byte `at`: a word starts at
/// `at` for whoever decodes the string.
pub(super) fn spelled_break_before(bytes: &[u8], at: usize) -> bool {
    at >= 2 && bytes[at - 2] == b'\\' && matches!(bytes[at - 1], b'n' | b'r' | b't')
}

/// Whether `bytes` hold a line end or a tab spelled out in a string just before a
/// word byte (see [`spelled_break_before`]).
pub(super) fn has_spelled_break(bytes: &[u8]) -> bool {
    memchr::memchr_iter(b'\\', bytes).any(|idx| {
        matches!(bytes.get(idx + 1), Some(b'n' | b'r' | b't'))
            && bytes
                .get(idx + 2)
                .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_')
    })
}

/// Whether the hidden sequence of `len` bytes at `idx` is an nF escape whose final
/// byte is a letter or digit followed by a word character.
fn ends_on_a_word(bytes: &[u8], idx: usize, len: usize) -> bool {
    let is_nf = bytes[idx] == 0x1b
        && bytes
            .get(idx + 1)
            .is_some_and(|b| (0x20..=0x2f).contains(b));
    let word =
        |b: Option<&u8>| b.is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'));
    is_nf && bytes[idx + len - 1].is_ascii_alphanumeric() && word(bytes.get(idx + len))
}

fn strip_as(text: &str, keep_word_finals: bool) -> Option<(String, Vec<usize>)> {
    let bytes = text.as_bytes();
    let first = first_hidden(bytes)?;
    let mut copy = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    copy.push_str(&text[..first]);
    map.extend(0..first);
    let mut idx = first;
    while idx < bytes.len() {
        if bytes[idx] == 0x08 {
            idx += overstrike(text, idx, &mut copy, &mut map);
            continue;
        }
        let skip = match hidden_len(bytes, idx) {
            // A string escape with no terminator (it runs to a newline, a control
            // or the end of the text): a terminal would wait and show nothing, but
            // a reader of the bytes sees its body, so only the introducer goes.
            len if is_open_string(bytes, idx, len) => 2,
            len if keep_word_finals && len >= 3 && ends_on_a_word(bytes, idx, len) => len - 1,
            len => len,
        };
        if skip > 0 {
            idx += skip;
            continue;
        }
        // Copy one whole character.
        let ch_len = text[idx..].chars().next().map_or(1, char::len_utf8);
        copy.push_str(&text[idx..idx + ch_len]);
        map.extend(idx..idx + ch_len);
        idx += ch_len;
    }
    Some((copy, map))
}

/// A backspace at `idx` (`text[idx]`) as `col -b` resolves it: the character
/// after it is written over the one before it, so only the later one is seen
/// (`c\bc` bold is `c`); in an underline (`_\bc`, `c\b_`) the letter is seen, not
/// the underscore. Returns the bytes consumed (the backspace, and an underscore
/// that underlines the previous character).
fn overstrike(text: &str, idx: usize, copy: &mut String, map: &mut Vec<usize>) -> usize {
    // What is written over the previous column: the next character after any
    // hidden sequences (an escape between the backspace and the letter writes
    // nothing; `_\b ESC_apc ST _\bU` shows `U`).
    let bytes = text.as_bytes();
    let mut at = idx + 1;
    while at < bytes.len() && bytes[at] != 0x08 {
        match hidden_len(bytes, at) {
            0 => break,
            len if is_open_string(bytes, at, len) => at += 2,
            len => at += len,
        }
    }
    let next = text[at..].chars().next();
    let printable = |c: char| !c.is_control();
    let Some(prev) = copy.chars().next_back().filter(|c| printable(*c)) else {
        return 1;
    };
    match next {
        // An underline after the letter (`x\b_`); behind an escape, left to copy.
        Some('_') if prev != '_' && at == idx + 1 => 2,
        Some('_') if prev != '_' => 1,
        Some(c) if printable(c) => {
            copy.truncate(copy.len() - prev.len_utf8());
            map.truncate(copy.len());
            1
        }
        _ => 1,
    }
}

/// The span `start..end` of `text` widened over the overstrike around it: the
/// characters a backspace wrote over (`g\b` before `ghp_…`) and an underline after
/// (`x\b_`), so a masked match leaves none of its characters in the raw bytes.
pub(super) fn widen_overstrike(text: &str, mut start: usize, mut end: usize) -> (usize, usize) {
    let bytes = text.as_bytes();
    while start >= 2 && bytes[start - 1] == 0x08 {
        let prev = text[..start - 1]
            .chars()
            .next_back()
            .map_or(1, char::len_utf8);
        start -= 1 + prev;
    }
    while bytes.get(end) == Some(&0x08) && bytes.get(end + 1) == Some(&b'_') {
        end += 2;
    }
    (start, end)
}

/// Where an escape sequence that is not finished yet starts at the end of
/// `partial` (a stream's unfinished line): releasing its first half would turn
/// the rest into visible text glued to what follows (`;31mghp_…`).
pub(super) fn unfinished_escape(partial: &str) -> Option<usize> {
    let spelled = textual::unfinished(partial.as_bytes());
    let raw = unfinished_raw_escape(partial);
    raw.into_iter().chain(spelled).min()
}

/// [`unfinished_escape`] for an escape written as bytes.
fn unfinished_raw_escape(partial: &str) -> Option<usize> {
    let bytes = partial.as_bytes();
    let from = bytes.len().saturating_sub(4096);
    let at = from + memchr::memrchr2(0x1b, 0xc2, &bytes[from..])?;
    if bytes[at] == 0xc2
        && !matches!(
            bytes.get(at + 1),
            None | Some(0x9b | 0x9d | 0x90 | 0x98 | 0x9e | 0x9f)
        )
    {
        return None;
    }
    let len = hidden_len(bytes, at);
    if at + len < bytes.len() {
        return None;
    }
    // It runs to the end: finished only if its last byte is a terminator.
    let last = bytes[bytes.len() - 1];
    let is_csi = bytes.get(at + 1) == Some(&b'[') || bytes.get(at..at + 2) == Some(&[0xc2, 0x9b]);
    let finished = match bytes.get(at + 1) {
        None => false,
        _ if is_csi => (0x40..=0x7e).contains(&last) && at + 2 < bytes.len(),
        Some(b']' | b'P' | b'X' | b'^' | b'_' | 0x9d | 0x90 | 0x98 | 0x9e | 0x9f) => {
            last == 0x07 || bytes.ends_with(b"\x1b\\") || bytes.ends_with(&[0xc2, 0x9c])
        }
        // nF: finished by its final byte.
        Some(0x20..=0x2f) => (0x30..=0x7e).contains(&last),
        Some(_) => true,
    };
    (!finished).then_some(at)
}

/// Whether the hidden sequence of `len` bytes at `idx` is an OSC, DCS, SOS, PM or
/// APC string that no BEL or ST ends.
fn is_open_string(bytes: &[u8], idx: usize, len: usize) -> bool {
    let string = matches!(
        (bytes[idx], bytes.get(idx + 1)),
        (0x1b, Some(b']' | b'P' | b'X' | b'^' | b'_'))
            | (0xc2, Some(0x9d | 0x90 | 0x98 | 0x9e | 0x9f))
    );
    let end = idx + len;
    let terminated = len > 2
        && (bytes[end - 1] == 0x07 || matches!(bytes[end - 2..end], [0x1b, b'\\'] | [0xc2, 0x9c]));
    string && len >= 2 && !terminated
}

/// Length in bytes of a hidden sequence starting at `idx`, or 0. Always ends on a
/// character boundary (every byte it skips past the introducer is ASCII or the
/// whole sequence ends at a boundary it checked).
fn hidden_len(bytes: &[u8], idx: usize) -> usize {
    match bytes[idx] {
        b'\t' | b'\n' | b'\r' => 0,
        0x1b => escape_len(bytes, idx),
        b'\\' => textual::sequence_len(bytes, idx),
        0x00..=0x1f | 0x7f => 1,
        0xc2 => match bytes.get(idx + 1) {
            // C1 CSI, then parameters and a final byte.
            Some(0x9b) => 2 + csi_body_len(&bytes[idx + 2..]),
            // C1 OSC, DCS, SOS, PM, APC: a string up to its terminator.
            Some(0x9d | 0x90 | 0x98 | 0x9e | 0x9f) => 2 + string_body_len(&bytes[idx + 2..]),
            Some(0x80..=0x9f | 0xad) => 2,
            _ => 0,
        },
        0xd8 => match bytes.get(idx + 1) {
            Some(0x9c) => 2,
            _ => 0,
        },
        0xe1 => match bytes.get(idx + 1..idx + 3) {
            Some([0xa0, 0x8e]) => 3,
            _ => 0,
        },
        0xe2 => match bytes.get(idx + 1..idx + 3) {
            Some([0x80, 0x8b..=0x8f | 0xaa..=0xae]) | Some([0x81, 0xa0..=0xa4 | 0xa6..=0xa9]) => 3,
            _ => 0,
        },
        0xef => match bytes.get(idx + 1..idx + 3) {
            Some([0xbb, 0xbf]) => 3,
            _ => 0,
        },
        _ => 0,
    }
}

/// Length of an ESC sequence at `idx` (`bytes[idx]` is ESC).
fn escape_len(bytes: &[u8], idx: usize) -> usize {
    let rest = &bytes[idx + 1..];
    match rest.first() {
        None => 1,
        Some(b'[') => 2 + csi_body_len(&rest[1..]),
        Some(b']' | b'P' | b'X' | b'^' | b'_') => 2 + string_body_len(&rest[1..]),
        // nF (ECMA-35: charset designations `ESC ( B`, `ESC $ ( B`, `ESC SP F`, ...):
        // any number of intermediates 0x20..=0x2F, then one final byte
        // 0x30..=0x7E; a terminal shows none of it. Without a final byte the
        // intermediates are still swallowed (the terminal waits for one).
        Some(0x20..=0x2f) => {
            let n_intermediates = rest
                .iter()
                .take_while(|b| (0x20..=0x2f).contains(*b))
                .count();
            match rest.get(n_intermediates) {
                Some(0x30..=0x7e) => 2 + n_intermediates,
                _ => 1 + n_intermediates,
            }
        }
        // Fp, Fe and Fs two-byte escapes (`ESC 7`, `ESC M`, `ESC c`).
        Some(0x30..=0x7e) => 2,
        // ESC before a non-ASCII byte, DEL or a control: the ESC alone.
        Some(_) => 1,
    }
}

/// Parameter and intermediate bytes of a CSI, then its final byte (ECMA-48). Stops
/// before anything else (a malformed sequence loses only what it consumed).
fn csi_body_len(bytes: &[u8]) -> usize {
    let mut n = 0;
    while let Some(&b) = bytes.get(n) {
        match b {
            0x20..=0x3f => n += 1,
            0x40..=0x7e => return n + 1,
            _ => return n,
        }
    }
    n
}

/// The body of an OSC/DCS-like string up to and including its terminator (BEL,
/// `ESC \` or C1 ST). Stops before a newline or another control, so an
/// unterminated string never swallows a line.
fn string_body_len(bytes: &[u8]) -> usize {
    let mut n = 0;
    while let Some(&b) = bytes.get(n) {
        match b {
            0x07 => return n + 1,
            0x1b => {
                return if bytes.get(n + 1) == Some(&b'\\') {
                    n + 2
                } else {
                    n
                };
            }
            0xc2 if bytes.get(n + 1) == Some(&0x9c) => return n + 2,
            b'\n' | b'\r' => return n,
            // A backspace in the string (the string overstruck with the line it
            // sits in, as `man` prints) is the string's too, as a terminal takes it.
            0x08 => n += 1,
            0x00..=0x1f => return n,
            // Any other byte (UTF-8 in a title included) is part of the string; only
            // a terminator ends it, so the count ends on a character boundary.
            _ => n += 1,
        }
    }
    n
}

/// Whether a hidden sequence starts at `idx` of `bytes`.
pub(super) fn hidden_starts_at(bytes: &[u8], idx: usize) -> bool {
    hidden_len(bytes, idx) > 0
}

/// Index of the last `needle` in `bytes` that is seen: not inside a hidden
/// sequence (`ESC P q ESC \` then `n` spells no `\n`, since the backslash ends
/// the string a terminal consumes), if any. One pass over the hidden sequences
/// before the last occurrence; none when the text has none (the common case).
pub(super) fn rfind_seen(bytes: &[u8], needle: &[u8]) -> Option<usize> {
    let last = memchr::memmem::rfind(bytes, needle)?;
    if first_hidden(&bytes[..last + 1]).is_none() {
        return Some(last);
    }
    let mut seen = None;
    let mut hidden = hidden_spans(bytes);
    let mut span = hidden.next();
    for idx in memchr::memmem::find_iter(&bytes[..last + needle.len()], needle) {
        while span.is_some_and(|(_, end)| end <= idx) {
            span = hidden.next();
        }
        if span.is_none_or(|(start, _)| start > idx) {
            seen = Some(idx);
        }
    }
    seen
}

/// The hidden sequences of `bytes`, in order, as `start..end` pairs (an
/// unterminated string escape is its introducer only, as [`strip`] reads it).
fn hidden_spans(bytes: &[u8]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut pos = 0;
    std::iter::from_fn(move || {
        let idx = pos + first_hidden(&bytes[pos..])?;
        let len = match hidden_len(bytes, idx) {
            len if is_open_string(bytes, idx, len) => 2,
            len => len.max(1),
        };
        pos = idx + len;
        Some((idx, pos))
    })
}

/// Index of the first hidden sequence at or after `from` (the key index's search
/// before its block test, which its tests hold it to).
#[cfg(test)]
pub(super) fn first_hidden_from(bytes: &[u8], from: usize) -> Option<usize> {
    first_hidden(&bytes[from..]).map(|idx| from + idx)
}

/// Index of the first hidden sequence: an escape spelled out as text (few
/// texts hold a backslash, and `memchr` finds them) or one of the bytes below.
fn first_hidden(bytes: &[u8]) -> Option<usize> {
    let found = first_hidden_byte(bytes);
    let limit = found.unwrap_or(bytes.len());
    memchr::memchr_iter(b'\\', &bytes[..limit])
        .find(|idx| textual::sequence_len(bytes, *idx) > 0)
        .or(found)
}

/// Index of the first hidden byte sequence. Scans in blocks with a branch-free
/// test the compiler vectorises (with AVX2 where the CPU has it), and looks
/// closer only at flagged blocks.
fn first_hidden_byte(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { first_hidden_avx2(bytes) };
        }
    }
    first_hidden_in(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn first_hidden_avx2(bytes: &[u8]) -> Option<usize> {
    first_hidden_in(bytes)
}

#[inline(always)]
fn first_hidden_in(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 256;
    for (n_block, block) in bytes.chunks(BLOCK).enumerate() {
        // A cheap superset first (a control but tab, newline and carriage return,
        // DEL, or any non-ASCII byte: four operations a byte, vectorised), then the
        // exact set of introducers on the blocks it flags.
        let maybe = block.iter().fold(0u8, |acc, &b| {
            acc | u8::from(
                (b.wrapping_sub(0x20) >= 0x5f) & (b != b'\n') & (b != b'\t') & (b != b'\r'),
            )
        });
        if maybe == 0 {
            continue;
        }
        let flagged = block.iter().fold(false, |acc, &b| {
            acc | ((b < 0x20) & (b != b'\n') & (b != b'\t') & (b != b'\r'))
                | (b == 0x7f)
                | (b == 0xc2)
                | (b == 0xd8)
                | (b == 0xe1)
                | (b == 0xe2)
                | (b == 0xef)
        });
        if !flagged {
            continue;
        }
        let base = n_block * BLOCK;
        for offset in 0..block.len() {
            if hidden_len(bytes, base + offset) > 0 {
                return Some(base + offset);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::strip;

    fn seen(text: &str) -> String {
        strip(text).map_or_else(|| text.to_owned(), |(copy, _)| copy)
    }

    #[test]
    fn escapes_and_invisible_characters_are_removed_and_lines_kept() {
        let cases = [
            ("plain", "plain"),
            ("\x1b[01;31mred\x1b[m", "red"),
            ("a\x1b]0;title\x07b", "ab"),
            ("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b", "alinkb"),
            ("a\x1b(Bb", "ab"),
            ("a\x1b$(Bb", "ab"),
            ("a\x1b g\x1b!xb", "ab"),
            ("a\x1b \nb", "a\nb"),
            ("a\x1bcb\x1bMc", "abc"),
            ("a\x1b7b\x1b8", "ab"),
            ("sk-\u{200b}proj", "sk-proj"),
            ("x\u{202e}y\u{2066}z\u{2069}", "xyz"),
            ("soft\u{ad}hyphen", "softhyphen"),
            ("c1\u{9b}1mcsi", "c1csi"),
            // Nothing ends the string: its body is what a reader of the bytes sees.
            (
                "unterminated \x1b]0;title\nnext",
                "unterminated 0;title\nnext",
            ),
            ("tab\tnl\ncr\r", "tab\tnl\ncr\r"),
            ("café °C", "café °C"),
            ("\x1b", ""),
            ("\x1b[", ""),
            ("a\x1bé", "aé"),
            // Overstruck around a string escape: the letter after it is written
            // over the column before it.
            ("-_\x08\u{9f}_\x08a_\x08p_\x08c_\x08\u{9c}_\x08U", "-U"),
            ("X\x08\x1b^pm\x1b\\X", "X"),
        ];
        for (input, want) in cases {
            assert_eq!(seen(input), want, "input {input:?}");
        }
    }

    #[test]
    fn unfinished_escapes_at_the_end_are_found() {
        use super::unfinished_escape;
        for (text, want) in [
            ("ab\x1b", Some(2)),
            ("ab\x1b[01", Some(2)),
            ("ab\x1b[01;31m", None),
            ("ab\x1b[0m x", None),
            ("ab\x1b]0;tit", Some(2)),
            ("ab\x1b]0;title\x07", None),
            ("ab\x1b(", Some(2)),
            ("ab\x1b(B", None),
            ("ab\x1b$(", Some(2)),
            ("ab\x1b$(B", None),
            ("ab\x1b g", None),
            ("plain", None),
            ("café", None),
        ] {
            assert_eq!(unfinished_escape(text), want, "{text:?}");
        }
    }

    #[test]
    fn the_map_points_at_the_same_bytes() {
        let text = "\x1b[1mgh\x1b[0mp_x\u{200b}y";
        let (copy, map) = strip(text).expect("has escapes");
        for (idx, b) in copy.bytes().enumerate() {
            assert_eq!(text.as_bytes()[map[idx]], b);
        }
    }
}
