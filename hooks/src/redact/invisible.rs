//! Zero-width and control characters that can hide a secret from a pattern.
//!
//! `sk-\u{200b}proj-...` or `ghp_\x00abc...` prints like a token to a person
//! (or an agent that strips the character), but no token pattern matches it.
//! When a text holds such characters, the redactor matches on a copy without
//! them and maps each match back to the original byte range.
//!
//! Removed: ASCII control characters other than tab, newline and carriage return
//! (ESC included: a token split by a colour change is a split token), DEL,
//! U+200B..U+200D, U+2060 and U+FEFF.

/// A copy of `text` without the invisible characters, and for each byte of the
/// copy the index of the same byte in `text`. `None` when there are none (the
/// common case: one pass over the bytes, no allocation).
pub(super) fn strip(text: &str) -> Option<(String, Vec<usize>)> {
    let bytes = text.as_bytes();
    let first = first_invisible(bytes)?;
    let mut copy = String::with_capacity(text.len());
    let mut map = Vec::with_capacity(text.len());
    copy.push_str(&text[..first]);
    map.extend(0..first);
    let mut idx = first;
    while idx < bytes.len() {
        let skip = invisible_len(bytes, idx);
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

/// Length in bytes of an invisible character starting at `idx`, or 0.
fn invisible_len(bytes: &[u8], idx: usize) -> usize {
    match bytes[idx] {
        b'\t' | b'\n' | b'\r' => 0,
        0x00..=0x1f | 0x7f => 1,
        0xe2 => match bytes.get(idx + 1..idx + 3) {
            Some([0x80, 0x8b..=0x8d]) | Some([0x81, 0xa0]) => 3,
            _ => 0,
        },
        0xef => match bytes.get(idx + 1..idx + 3) {
            Some([0xbb, 0xbf]) => 3,
            _ => 0,
        },
        _ => 0,
    }
}

/// Index of the first invisible character. Scans in blocks with a branch-free
/// test the compiler vectorises, and looks closer only at flagged blocks.
fn first_invisible(bytes: &[u8]) -> Option<usize> {
    const BLOCK: usize = 256;
    for (n_block, block) in bytes.chunks(BLOCK).enumerate() {
        let flagged = block.iter().fold(false, |acc, &b| {
            acc | ((b < 0x20) & (b != b'\n') & (b != b'\t') & (b != b'\r'))
                | (b == 0x7f)
                | (b == 0xe2)
                | (b == 0xef)
        });
        if !flagged {
            continue;
        }
        let base = n_block * BLOCK;
        for offset in 0..block.len() {
            if invisible_len(bytes, base + offset) > 0 {
                return Some(base + offset);
            }
        }
    }
    None
}
