//! Escapes written as text. Terminal output kept in a JSON string, a Python repr
//! or a C literal carries its escapes spelled out: `\u001b[31m`, `\x1b]0;t\x07`,
//! `\033[0m`, and once more escaped for each time the string was escaped again
//! (`\\u001b[31m`). Whoever decodes the string and prints it sees what a terminal
//! shows, so the redactor's copy drops these as it drops the escapes themselves,
//! and a key line or a token with a PM string spelled inside it is still whole.
//!
//! An ESC is spelled as a run of backslashes and `u001b`/`u001B`/`x1b`/`x1B`/`033`;
//! a run of `k` backslashes writes one escaping level, at which a literal
//! backslash (the `\` of the string terminator `ESC \`) is `2k` backslashes. BEL
//! is spelled `u0007`/`x07`/`007`/`a` behind the same run.

/// The spellings of ESC after the backslashes.
const ESC: [&[u8]; 5] = [b"u001b", b"u001B", b"x1b", b"x1B", b"033"];

/// The spellings of BEL after the backslashes.
const BEL: [&[u8]; 4] = [b"u0007", b"x07", b"007", b"a"];

/// The backslashes starting at `idx` and the spelling after them that is one of
/// `names`: `Some((backslashes, length))`.
fn spelled(bytes: &[u8], idx: usize, names: &[&[u8]]) -> Option<(usize, usize)> {
    let slashes = bytes[idx..].iter().take_while(|b| **b == b'\\').count();
    if slashes == 0 {
        return None;
    }
    let rest = &bytes[idx + slashes..];
    names
        .iter()
        .find(|name| rest.starts_with(name))
        .map(|name| (slashes, slashes + name.len()))
}

/// Whether `tail` (the end of a text) is backslashes and a proper beginning of a
/// spelling of ESC (nothing after the backslashes included).
fn cut_spelling(tail: &[u8]) -> bool {
    let slashes = tail.iter().take_while(|b| **b == b'\\').count();
    let rest = &tail[slashes..];
    slashes > 0 && rest.len() < 5 && ESC.iter().any(|name| name.starts_with(rest))
}

/// The length of a spelled-out escape sequence at `idx` (ESC, then what a
/// terminal's parser would take after it), or 0. An OSC/DCS/SOS/PM/APC string
/// with no terminator before the line (or the string) ends: only its introducer.
pub(super) fn sequence_len(bytes: &[u8], idx: usize) -> usize {
    let Some((slashes, esc)) = spelled(bytes, idx, &ESC) else {
        // A text cut inside a spelling (`\u00` at its end: a window's context, a
        // look-back) hides it, as a raw ESC cut before its final byte is hidden.
        return if cut_spelling(&bytes[idx..]) {
            bytes.len() - idx
        } else {
            0
        };
    };
    let at = idx + esc;
    match bytes.get(at) {
        Some(b'[') => esc + 1 + super::csi_body_len(&bytes[at + 1..]),
        Some(b']' | b'P' | b'X' | b'^' | b'_') => match string_body(bytes, at + 1, slashes) {
            Body::Ends(body) => esc + 1 + body,
            Body::Stops | Body::Open => esc + 1,
        },
        // The string terminator `ESC \` on its own: the backslash is escaped too.
        // (Fewer backslashes escape what follows them: ESC alone.)
        Some(b'\\') => {
            let run = bytes[at..].iter().take_while(|b| **b == b'\\').count();
            if run >= 2 * slashes {
                esc + 2 * slashes
            } else {
                esc
            }
        }
        Some(0x20..=0x2f) => {
            let n = bytes[at..]
                .iter()
                .take_while(|b| (0x20..=0x2f).contains(*b))
                .count();
            match bytes.get(at + n) {
                Some(0x30..=0x7e) => esc + n + 1,
                _ => esc + n,
            }
        }
        Some(0x30..=0x7e) => esc + 1,
        _ => esc,
    }
}

/// How a spelled-out string escape's body goes on from its introducer.
enum Body {
    /// Up to and including its spelled terminator (BEL, or ESC and the escaped
    /// backslash): this many bytes.
    Ends(usize),
    /// A line end (real or spelled), a quote or a control comes first.
    Stops,
    /// The text ends first.
    Open,
}

/// The body of a spelled-out string escape from `from`.
fn string_body(bytes: &[u8], from: usize, slashes: usize) -> Body {
    let mut at = from;
    while let Some(&b) = bytes.get(at) {
        match b {
            b'\\' => {
                if let Some((_, len)) = spelled(bytes, at, &BEL) {
                    return Body::Ends(at + len - from);
                }
                if let Some((_, len)) = spelled(bytes, at, &ESC) {
                    let after = at + len;
                    let run = bytes[after..].iter().take_while(|b| **b == b'\\').count();
                    return match run {
                        _ if run >= 2 * slashes => Body::Ends(after + 2 * slashes - from),
                        _ if after + run == bytes.len() => Body::Open,
                        _ => Body::Stops,
                    };
                }
                let run = bytes[at..].iter().take_while(|b| **b == b'\\').count();
                match bytes.get(at + run) {
                    Some(b'n' | b'r' | b'"' | b'\'') => return Body::Stops,
                    None => return Body::Open,
                    Some(_) => at += run,
                }
            }
            b'"' | b'\'' | 0x00..=0x1f | 0x7f => return Body::Stops,
            _ => at += 1,
        }
    }
    Body::Open
}

/// Where a spelled-out escape that is not finished yet starts at the end of
/// `partial` (its next bytes may still turn it into one): the first backslash of
/// the last run, when what follows it is a proper prefix of a spelling of ESC, or
/// a spelled ESC whose sequence runs to the end.
pub(super) fn unfinished(partial: &[u8]) -> Option<usize> {
    let from = partial.len().saturating_sub(256);
    let last = from + memchr::memrchr(b'\\', &partial[from..])?;
    // The start of the backslash run `last` ends.
    let run_start = partial[..=last]
        .iter()
        .rposition(|b| *b != b'\\')
        .map_or(0, |i| i + 1);
    let tail = &partial[last + 1..];
    if tail.len() < 5 && ESC.iter().any(|name| name.starts_with(tail)) {
        return Some(run_start);
    }
    // A whole spelled ESC near the end whose sequence may go on.
    let mut at = from;
    while let Some(idx) = memchr::memchr(b'\\', &partial[at..]).map(|i| at + i) {
        let len = sequence_len(partial, idx);
        if len > 0 && idx + len >= partial.len() && !finished(partial, idx, len) {
            return Some(idx);
        }
        if len > 0 && string_is_open(partial, idx) {
            return Some(idx);
        }
        at = idx + len.max(1);
    }
    None
}

/// Whether a spelled-out string escape starts at `idx` and the text ends inside
/// its body.
fn string_is_open(bytes: &[u8], idx: usize) -> bool {
    let Some((slashes, esc)) = spelled(bytes, idx, &ESC) else {
        return false;
    };
    matches!(bytes.get(idx + esc), Some(b']' | b'P' | b'X' | b'^' | b'_'))
        && matches!(string_body(bytes, idx + esc + 1, slashes), Body::Open)
}

/// Whether the spelled-out sequence of `len` bytes at `idx` is complete (its
/// final byte or terminator is there), not only cut by the end of the text.
fn finished(bytes: &[u8], idx: usize, len: usize) -> bool {
    let Some((slashes, esc)) = spelled(bytes, idx, &ESC) else {
        return true;
    };
    let at = idx + esc;
    let last = bytes[idx + len - 1];
    match bytes.get(at) {
        None => false,
        Some(b'[') => len > esc + 1 && (0x40..=0x7e).contains(&last),
        Some(b']' | b'P' | b'X' | b'^' | b'_') => {
            matches!(string_body(bytes, at + 1, slashes), Body::Ends(_))
        }
        Some(b'\\') => len - esc >= 2 * slashes,
        Some(0x20..=0x2f) => (0x30..=0x7e).contains(&last),
        Some(_) => true,
    }
}

#[cfg(test)]
mod tests {
    use super::{sequence_len, unfinished};

    #[test]
    fn spelled_escapes_are_read_as_a_terminal_reads_them() {
        for (text, want) in [
            (r"\u001b[31m", 10),
            (r"\x1b[0m", 7),
            (r"\033[1;32m", 10),
            (r"\\u001b[31m", 11),
            (r"\u001b^pm\u001b\\", 17),
            (r"\\u001b^pm\\u001b\\\\", 21),
            (r"\x1b]0;title\x07", 16),
            (r"\u001b(B", 8),
            (r"\u001b\\", 8),
            // No terminator before the string ends: the introducer alone.
            (r#"\u001b]0;title""#, 7),
            (r"\u001b]0;title\nnext", 7),
            (r"\n", 0),
            (r"\u0007", 0),
            (r"\\ ", 0),
            // Cut inside a spelling at the text's end: hidden.
            (r"\u00", 4),
            (r"\\x1", 4),
            (r"\", 1),
        ] {
            assert_eq!(sequence_len(text.as_bytes(), 0), want, "{text}");
        }
    }

    #[test]
    fn a_spelled_escape_cut_at_the_end_is_unfinished() {
        for (text, want) in [
            (r"ghp_ab\u00", Some(6)),
            (r"ghp_ab\\u001", Some(6)),
            (r"ghp_ab\u001b[3", Some(6)),
            (r"ghp_ab\u001b^pm", Some(6)),
            (r"ghp_ab\u001b[31m", None),
            (r"line\n", None),
            ("plain", None),
        ] {
            assert_eq!(unfinished(text.as_bytes()), want, "{text}");
        }
    }
}
