//! Text helpers shared by every output route: UTF-8 decoding of a byte tail, ANSI
//! stripping and RFC 3339 timestamps. Sizing a window of output is not here: a
//! route never cuts text itself, it hands a `herd_hooks::Window` to the pipeline.
//!
//! The registry keeps output as raw bytes (the log keeps them verbatim) and decodes at
//! answer time. Decoding a contiguous tail is equivalent to incremental decoding: a
//! character split across reads is contiguous in the tail, an incomplete sequence at
//! the end of a running session's output is held back until it completes, and invalid
//! bytes become U+FFFD.

use std::time::{SystemTime, UNIX_EPOCH};

/// Decodes a byte tail to text.
///
/// `cut_at_start` says the tail does not begin at the first byte the session wrote,
/// so leading continuation bytes of a character whose head was dropped are skipped.
/// `hold_incomplete` holds back a trailing incomplete character (the session is still
/// writing it); otherwise it becomes U+FFFD.
pub(crate) fn decode_tail(bytes: &[u8], cut_at_start: bool, hold_incomplete: bool) -> String {
    let mut start = 0;
    if cut_at_start {
        while start < bytes.len().min(3) && (bytes[start] & 0xC0) == 0x80 {
            start += 1;
        }
    }
    let mut end = bytes.len();
    if hold_incomplete {
        end = start + complete_prefix_len(&bytes[start..]);
    }
    String::from_utf8_lossy(&bytes[start..end]).into_owned()
}

/// The length of `bytes` without a trailing incomplete (but so far valid) UTF-8 sequence.
pub(crate) fn complete_prefix_len(bytes: &[u8]) -> usize {
    let len = bytes.len();
    // A UTF-8 sequence is at most 4 bytes, so only the last 3 can be an unfinished one.
    for back in 1..=len.min(3) {
        let lead = bytes[len - back];
        if (lead & 0xC0) == 0x80 {
            continue;
        }
        let need = if lead >= 0xF0 {
            4
        } else if lead >= 0xE0 {
            3
        } else if lead >= 0xC0 {
            2
        } else {
            1
        };
        return if need > back { len - back } else { len };
    }
    len
}

/// Removes ANSI escape sequences (CSI, the OSC, DCS, SOS, PM and APC strings, and
/// two-byte escapes) from `text`.
pub(crate) fn strip_ansi(text: &str) -> String {
    if !text.contains('\u{1b}') {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\u{1b}' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('[') => {
                // CSI: parameters and intermediates, then one final byte in @..~.
                for c in chars.by_ref() {
                    if ('@'..='~').contains(&c) {
                        break;
                    }
                }
            }
            Some(']' | 'P' | 'X' | '^' | '_') => {
                // OSC, DCS, SOS, PM, APC: a string that ends with BEL or ESC \.
                while let Some(c) = chars.next() {
                    if c == '\u{7}' {
                        break;
                    }
                    // An unterminated string never swallows a line.
                    if c == '\n' {
                        out.push(c);
                        break;
                    }
                    if c == '\u{1b}' {
                        if chars.peek() == Some(&'\\') {
                            chars.next();
                        }
                        break;
                    }
                }
            }
            Some('(' | ')' | '*' | '+') => {
                chars.next();
            }
            _ => {}
        }
    }
    out
}

/// `time` as RFC 3339 UTC with second precision, e.g. `2026-11-29T23:04:05Z`.
pub fn rfc3339(time: SystemTime) -> String {
    let secs = time
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's days-to-civil conversion.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = u32::try_from(doy - (153 * mp + 2) / 5 + 1).unwrap_or(1);
    let m = u32::try_from(if mp < 10 { mp + 3 } else { mp - 9 }).unwrap_or(1);
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests;
