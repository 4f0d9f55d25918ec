//! A JSON string encoder for long output (log chunks), byte for byte what
//! `serde_json` writes, several times faster on text.
//!
//! serde_json looks every byte up in its escape table. Log text is mostly bytes
//! that need no escape, with a newline every line, so this encoder tests eight
//! bytes at a time (one word: any byte below 0x20, a quote or a backslash?) and
//! copies clean runs whole; only a flagged word is looked at byte by byte.
//!
//! Invariant: the output equals `serde_json::to_vec(&text)` for every string
//! (short escapes for `\b \f \n \r \t \" \\`, `\u00XX` with lowercase hex for the
//! other control bytes, everything else as it is); a test compares them.

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Whether any byte of `word` is zero (exact as a yes/no).
fn has_zero(word: u64) -> bool {
    word.wrapping_sub(LO) & !word & HI != 0
}

/// Whether any byte of `word` needs an escape: below 0x20, `"` or `\`.
fn needs_escape(word: u64) -> bool {
    // A byte below 0x20 is one whose value minus 0x20 borrows: the high bit of
    // (b - 0x20) set where b's own high bit is clear.
    let below = word.wrapping_sub(0x20 * LO) & !word & HI != 0;
    below || has_zero(word ^ (u64::from(b'"') * LO)) || has_zero(word ^ (u64::from(b'\\') * LO))
}

/// Appends `text` to `out` as a JSON string, quotes included.
pub(crate) fn json_string(out: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    out.reserve(bytes.len() + bytes.len() / 16 + 2);
    out.push(b'"');
    let mut clean_from = 0;
    let mut idx = 0;
    while idx + 8 <= bytes.len() {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[idx..idx + 8]);
        if !needs_escape(u64::from_le_bytes(word)) {
            idx += 8;
            continue;
        }
        for at in idx..idx + 8 {
            if let Some(escape) = escape_of(bytes[at]) {
                out.extend_from_slice(&bytes[clean_from..at]);
                push_escape(out, bytes[at], escape);
                clean_from = at + 1;
            }
        }
        idx += 8;
    }
    for at in idx..bytes.len() {
        if let Some(escape) = escape_of(bytes[at]) {
            out.extend_from_slice(&bytes[clean_from..at]);
            push_escape(out, bytes[at], escape);
            clean_from = at + 1;
        }
    }
    out.extend_from_slice(&bytes[clean_from..]);
    out.push(b'"');
}

/// The line of a `log` note carrying `output`: what
/// `Response::notification("log", json!({"output": output})).to_line()` writes.
pub(crate) fn log_note_line(output: &str) -> Vec<u8> {
    const HEAD: &[u8] = br#"{"jsonrpc":"2.0","id":null,"method":"log","params":{"output":"#;
    let mut line = Vec::with_capacity(HEAD.len() + output.len() + output.len() / 16 + 5);
    line.extend_from_slice(HEAD);
    json_string(&mut line, output);
    line.extend_from_slice(b"}}\n");
    line
}

/// The short escape of `b` (`u` for the `\u00XX` form), or `None` when `b` goes
/// out as it is.
fn escape_of(b: u8) -> Option<u8> {
    match b {
        b'"' => Some(b'"'),
        b'\\' => Some(b'\\'),
        0x08 => Some(b'b'),
        0x0c => Some(b'f'),
        b'\n' => Some(b'n'),
        b'\r' => Some(b'r'),
        b'\t' => Some(b't'),
        0x00..=0x1f => Some(b'u'),
        _ => None,
    }
}

fn push_escape(out: &mut Vec<u8>, b: u8, escape: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    if escape == b'u' {
        out.extend_from_slice(&[
            b'\\',
            b'u',
            b'0',
            b'0',
            HEX[usize::from(b >> 4)],
            HEX[usize::from(b & 0xf)],
        ]);
    } else {
        out.extend_from_slice(&[b'\\', escape]);
    }
}

#[cfg(test)]
mod tests {
    use super::{json_string, log_note_line};
    use crate::protocol::Response;

    fn ours(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        json_string(&mut out, text);
        out
    }

    #[test]
    fn every_byte_is_encoded_as_serde_json_encodes_it() {
        // Every ASCII byte, at every offset within a word, next to plain text
        // and to multi-byte characters.
        for b in 0u8..0x80 {
            let c = char::from(b);
            for pad in 0..10 {
                let text = format!("{}{c}é{}{c}", "a".repeat(pad), "z".repeat(9 - pad));
                assert_eq!(
                    ours(&text),
                    serde_json::to_vec(&text).expect("a string serialises"),
                    "byte {b:#x} at {pad}"
                );
            }
        }
    }

    #[test]
    fn log_text_is_encoded_as_serde_json_encodes_it() {
        let mut text = String::new();
        for n in 0..500 {
            text.push_str(&format!(
                "2026-12-02T00:00:{n:02}Z INFO \"quoted\" path\\to\\x \x1b[1mbold\x1b[0m\tcafé 日本 \u{7f}\r\n"
            ));
        }
        for end in [0, 1, 7, 8, 9, 63, 64, 65, text.len()] {
            let mut cut = end.min(text.len());
            while !text.is_char_boundary(cut) {
                cut -= 1;
            }
            let part = &text[..cut];
            assert_eq!(
                ours(part),
                serde_json::to_vec(part).expect("a string serialises")
            );
        }
    }

    #[test]
    fn a_log_note_is_the_line_a_notification_makes() {
        for text in ["", "plain\n", "a \"quote\" and \\ and \u{1}\n"] {
            let want = Response::notification("log", serde_json::json!({"output": text})).to_line();
            assert_eq!(log_note_line(text), want);
        }
    }
}
