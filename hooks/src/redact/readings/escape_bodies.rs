//! Secrets inside the bodies of terminal string escapes: an OSC 8 hyperlink's
//! target (`ESC ] 8 ; ; https://user:pass@host/path ESC \`), a window title, a DCS,
//! SOS, PM or APC string.
//!
//! Matching runs on the text a person would see (`visible`), which has no escape
//! bodies, so a route that prints raw bytes would show what a body holds: a
//! terminal hides an OSC 8 target, but a reader of the bytes (an agent, a log
//! viewer, `cat -v`) sees it, and the terminal shows it on hover. Each terminated
//! string's body is therefore matched on its own, as a text of its own, and what
//! it holds is masked in place. A mask holds no control byte, so the escape stays
//! well-formed: the introducer, the parameters before the secret and the
//! terminator are kept. A string nothing terminates is no body here: `visible`
//! keeps its bytes in the text it matches.

use crate::redact::{Found, RedactMode, Redactor};

/// The string escapes: their introducer after `ESC` (7-bit) and as a C1 character.
const STRINGS: [(u8, char); 5] = [
    (b']', '\u{9d}'),
    (b'P', '\u{90}'),
    (b'X', '\u{98}'),
    (b'^', '\u{9e}'),
    (b'_', '\u{9f}'),
];

/// The bodies of the terminated string escapes of `text`, as byte ranges.
pub(super) fn bodies(text: &str) -> Vec<(usize, usize)> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let Some(idx) = memchr::memchr2(0x1b, 0xc2, &bytes[at..]) else {
            break;
        };
        let idx = at + idx;
        let next = bytes.get(idx + 1).copied().unwrap_or(0);
        let is_string = STRINGS.iter().any(|(seven, c1)| {
            let mut buf = [0u8; 2];
            let c1 = c1.encode_utf8(&mut buf).as_bytes();
            (bytes[idx] == 0x1b && next == *seven) || bytes[idx..].starts_with(c1)
        });
        if !is_string {
            at = idx + 1;
            continue;
        }
        let start = idx + 2;
        match terminator(bytes, start) {
            Some((end, after)) => {
                if end > start {
                    out.push((start, end));
                }
                at = after;
            }
            None => at = start,
        }
    }
    out
}

/// Where the string escape whose body starts at `start` ends: the body's end and
/// the byte after the terminator (`BEL`, `ESC \`, or the C1 ST). `None` when a
/// newline, another `ESC` or the end of the text comes first.
fn terminator(bytes: &[u8], start: usize) -> Option<(usize, usize)> {
    let mut at = start;
    while at < bytes.len() {
        match bytes[at] {
            0x07 => return Some((at, at + 1)),
            0x1b if bytes.get(at + 1) == Some(&b'\\') => return Some((at, at + 2)),
            0xc2 if bytes.get(at + 1) == Some(&0x9c) => return Some((at, at + 2)),
            b'\n' | 0x1b => return None,
            _ => at += 1,
        }
    }
    None
}

impl Redactor {
    /// Adds to `found` the secrets inside the bodies of `text`'s string escapes,
    /// each body matched as a text of its own, where they overlap nothing found.
    pub(in crate::redact) fn find_in_escape_bodies(
        &self,
        text: &str,
        mode: RedactMode,
        found: &mut Vec<Found>,
    ) {
        let mut more = Vec::new();
        for (from, to) in bodies(text) {
            let body = &text[from..to];
            for (start, end, with) in self.matches(body, None, mode) {
                let (s, e) = (from + start, from + end);
                let overlaps = |f: &Found| f.start < e && s < f.end;
                if found.iter().any(overlaps) || more.iter().any(overlaps) {
                    continue;
                }
                more.push(Found {
                    start: s,
                    end: e,
                    with,
                });
            }
        }
        found.extend(more);
    }
}

#[cfg(test)]
mod tests;
