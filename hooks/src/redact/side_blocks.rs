//! Where the side scanner (`families::side_matches`) must look: the blocks of a
//! text holding a byte that passes its families' first tests.
//!
//! Log text is full of `:` and `.` (times, versions, paths, hosts): visiting each
//! one cost the scanner more than the literal search of every provider. So the
//! text is first tested a block of [`BLOCK`] bytes at a time by a branch-free test
//! the compiler vectorises (with AVX2 where the CPU has it), and only the blocks it
//! flags are visited. Each test is implied by its family's own checks, so no match
//! lies outside the flagged blocks:
//! - `:` after eight digits (a Telegram bot id is 8 to 10 digits; the test looks
//!   at the first four and the eighth), or before `//` (URL userinfo, `scheme://`);
//! - `.` after 32 hex digits (Zhipu; the test looks at the first three, the eighth
//!   and the sixteenth), before `at` (Terraform's `.atlasv1.`), seven bytes before
//!   another `.` after 24 token bytes (Discord; the first, eighth and sixteenth
//!   looked at), or after an `s` that starts a word (older Vault tokens `s.…`;
//!   the test asks only that the byte before the `s` is no lower-case letter);
//! - `~` after `Q` (Azure AD client secrets).

/// The bytes of one tested block.
const BLOCK: usize = 64;
/// How far the test of one position looks before and after it.
const REACH: usize = 16;
/// A block with its context on both sides.
type Window = [u8; BLOCK + 2 * REACH];

/// The ranges of `bytes` the side scanner must visit, in order and disjoint: the
/// flagged blocks (adjacent ones merged) and the few bytes at either end the test
/// cannot reach.
pub(super) fn candidate_ranges(bytes: &[u8]) -> Vec<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { ranges_avx2(bytes) };
        }
    }
    ranges(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn ranges_avx2(bytes: &[u8]) -> Vec<(usize, usize)> {
    ranges(bytes)
}

#[inline(always)]
fn ranges(bytes: &[u8]) -> Vec<(usize, usize)> {
    let len = bytes.len();
    if len < BLOCK + 2 * REACH {
        return vec![(0, len)];
    }
    let mut out = vec![(0, REACH)];
    let mut base = REACH;
    while base + BLOCK + REACH <= len {
        let Ok(window) = <&Window>::try_from(&bytes[base - REACH..base + BLOCK + REACH]) else {
            break;
        };
        if flagged(window) {
            push(&mut out, base, base + BLOCK);
        }
        base += BLOCK;
    }
    push(&mut out, base, len);
    out
}

/// Appends `from..to`, merged with the last range when they touch.
fn push(out: &mut Vec<(usize, usize)>, from: usize, to: usize) {
    match out.last_mut() {
        Some(last) if last.1 == from => last.1 = to,
        _ => out.push((from, to)),
    }
}

/// Whether a position of the block in the middle of `window` passes a test.
#[inline(always)]
fn flagged(window: &Window) -> bool {
    let digit = |b: u8| u8::from(b.wrapping_sub(b'0') < 10);
    let hex = |b: u8| digit(b) | u8::from(b.wrapping_sub(b'a') < 6);
    let lower = |b: u8| u8::from(b.wrapping_sub(b'a') < 26);
    let is = |b: u8, c: u8| u8::from(b == c);
    let token = |b: u8| {
        digit(b) | lower(b) | u8::from(b.wrapping_sub(b'A') < 26) | is(b, b'_') | is(b, b'-')
    };
    let mut any = 0u8;
    for i in REACH..REACH + BLOCK {
        let (b, p1, p2, p3) = (window[i], window[i - 1], window[i - 2], window[i - 3]);
        let (p4, p8, p16) = (window[i - 4], window[i - 8], window[i - 16]);
        let (n1, n2, n7) = (window[i + 1], window[i + 2], window[i + 7]);
        let colon = is(b, b':')
            & ((digit(p1) & digit(p2) & digit(p3) & digit(p4) & digit(p8))
                | (is(n1, b'/') & is(n2, b'/')));
        let dot = is(b, b'.')
            & ((hex(p1) & hex(p2) & hex(p3) & hex(p8) & hex(p16))
                | (is(n1, b'a') & is(n2, b't'))
                | (is(n7, b'.') & token(p1) & token(p8) & token(p16))
                | (is(p1, b's') & (lower(p2) ^ 1)));
        let tilde = is(b, b'~') & is(p1, b'Q');
        any |= colon | dot | tilde;
    }
    any != 0
}

#[cfg(test)]
mod tests {
    use super::{candidate_ranges, ranges};

    #[test]
    fn b30_every_side_scanner_start_lies_in_a_flagged_range() {
        let pad = "x".repeat(100);
        for needle in [
            "1234567890:AAHdqTcvCH1vGWJxfSeofSAs0K5PALDsawx",
            "https://user:pass@host",
            "0a1b2c3d4e5f67890a1b2c3d4e5f6789.AbCdEf1234567890",
            "MTA4NjM5MzY1NzQ4NjY2MzY5Ng.GAbCdE.AbCd",
            "AbCdEf12345678.atlasv1.x",
            " s.Tv0wIvKzH9Cg6BOMe5KxCYqZ",
            "abc8Q~AbCd",
        ] {
            for at in 0..80 {
                let text = format!("{}{needle}{pad}", &pad[..at]);
                let key = needle
                    .find([':', '.', '~'])
                    .map(|idx| at + idx)
                    .unwrap_or(0);
                for got in [candidate_ranges(text.as_bytes()), ranges(text.as_bytes())] {
                    assert!(
                        got.iter().any(|(from, to)| (*from..*to).contains(&key)),
                        "{needle:?} at {at}: {got:?}"
                    );
                }
            }
        }
        // Clean text is mostly skipped.
        let clean = "2024-05-01T12:00:00.123Z INFO listening on 0.0.0.0:8080 v1.0.117 files.pythonhosted.org\n".repeat(40);
        let visited: usize = candidate_ranges(clean.as_bytes())
            .iter()
            .map(|(from, to)| to - from)
            .sum();
        assert!(visited < clean.len() / 4, "{visited} of {}", clean.len());
    }
}
