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
//!
//! Where the CPU has AVX-512 VBMI the tests are made on bit masks of the block
//! (each byte's class looked up in a 128-entry table), and a block without `:`,
//! `.` or `~`, or the `.` tests of a block without `.`, are skipped: 1.4-1.5x
//! the autovectorised test's speed on the e2e bench's log line (6.1-8.4 GB/s
//! against 4.3-5.5, one core), the same on realistic clean logs (4-5 GB/s).

/// The bytes of one tested block.
const BLOCK: usize = 64;
/// How far the test of one position looks before and after it.
const REACH: usize = 16;
/// A block with its context on both sides.
type Window = [u8; BLOCK + 2 * REACH];
/// The blocks classed at a time (the classes of a piece live on the stack).
const PIECE_BLOCKS: usize = 64;

/// The classes of a byte, as bits (see [`class`]): each byte of a piece is
/// classed once, not once for every position whose test looks at it.
const DIGIT: u8 = 1;
const HEX: u8 = 2;
const LOWER: u8 = 4;
const TOKEN: u8 = 8;

/// The ranges of `bytes` the side scanner must visit, in order and disjoint: the
/// flagged blocks (adjacent ones merged) and the few bytes at either end the test
/// cannot reach.
pub(super) fn candidate_ranges(bytes: &[u8]) -> Vec<(usize, usize)> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx512vbmi") && std::is_x86_feature_detected!("avx512bw")
        {
            // SAFETY: the CPU has AVX-512 VBMI and BW (checked just above).
            return unsafe { ranges_vbmi(bytes) };
        }
        if std::is_x86_feature_detected!("avx512bw") {
            // SAFETY: the CPU has AVX-512BW (checked just above).
            return unsafe { ranges_avx512(bytes) };
        }
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

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn ranges_avx512(bytes: &[u8]) -> Vec<(usize, usize)> {
    ranges(bytes)
}

/// [`ranges`] with each block's tests on AVX-512 VBMI: the block loaded at each
/// offset a test looks at, each loaded byte classed by one lookup in a 128-entry
/// table of [`class`] (a two-table byte permute), the classes and-ed as the tests
/// and them; a block without `:`, `.` or `~` is passed over after three compares,
/// and the tests of `.` are made only for a block holding one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
fn ranges_vbmi(bytes: &[u8]) -> Vec<(usize, usize)> {
    let len = bytes.len();
    if len < BLOCK + 2 * REACH {
        return vec![(0, len)];
    }
    let table = ClassTable::new();
    let mut out = vec![(0, REACH)];
    let mut base = REACH;
    while base + BLOCK + REACH <= len {
        // SAFETY: `REACH <= base` and `base + BLOCK + REACH <= len`: every load of
        // `flagged_vbmi` (64 bytes from `base - 16` to `base + 7`) is inside.
        if unsafe { flagged_vbmi(&table, bytes, base) } {
            push(&mut out, base, base + BLOCK);
        }
        base += BLOCK;
    }
    push(&mut out, base, len);
    out
}

/// [`class`] of each ASCII byte, in two vector registers (entries 0-63, 64-127).
#[cfg(target_arch = "x86_64")]
struct ClassTable([std::arch::x86_64::__m512i; 2]);

#[cfg(target_arch = "x86_64")]
impl ClassTable {
    /// [`class`] of each ASCII byte, computed when herd is compiled.
    const CLASSES: [u8; 128] = {
        let mut classes = [0u8; 128];
        let mut b = 0;
        while b < 128 {
            classes[b] = class(b as u8);
            b += 1;
        }
        classes
    };

    #[target_feature(enable = "avx512f")]
    fn new() -> ClassTable {
        use std::arch::x86_64::{__m512i, _mm512_loadu_si512};
        let classes = &Self::CLASSES;
        // SAFETY: 64-byte unaligned loads of the two halves of a 128-byte array.
        let half =
            |at: usize| unsafe { _mm512_loadu_si512(classes[at..].as_ptr().cast::<__m512i>()) };
        ClassTable([half(0), half(64)])
    }
}

/// [`flagged`] for the block of `bytes` at `base`; needs `REACH <= base` and
/// `base + BLOCK + REACH <= bytes.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn flagged_vbmi(table: &ClassTable, bytes: &[u8], base: usize) -> bool {
    use std::arch::x86_64::{
        __m512i, _mm512_and_si512, _mm512_cmpeq_epi8_mask, _mm512_loadu_si512,
        _mm512_maskz_permutex2var_epi8, _mm512_movepi8_mask, _mm512_set1_epi8,
        _mm512_test_epi8_mask,
    };
    // SAFETY: the caller's contract keeps `base - 16 ..= base + 70` (the last
    // byte of the load at `base + 7`) inside.
    let at = |offset: isize| unsafe {
        _mm512_loadu_si512(bytes.as_ptr().add(base).offset(offset).cast::<__m512i>())
    };
    let is = |v: __m512i, b: u8| _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b as i8));
    // A byte past ASCII has no class (the permute reads an index's low seven bits).
    let [lo, hi] = table.0;
    let class = |offset: isize| {
        let v = at(offset);
        _mm512_maskz_permutex2var_epi8(!_mm512_movepi8_mask(v), lo, v, hi)
    };
    let has = |c: __m512i, bit: u8| _mm512_test_epi8_mask(c, _mm512_set1_epi8(bit as i8));
    let and = _mm512_and_si512;
    let here = at(0);
    let (colons, dots, tildes) = (is(here, b':'), is(here, b'.'), is(here, b'~'));
    if colons | dots | tildes == 0 {
        return false;
    }
    let (p1, n1, n2) = (at(-1), at(1), at(2));
    let (c1, c2, c8) = (class(-1), class(-2), class(-8));
    let run = and(and(c1, c2), and(class(-3), c8));
    let colon = colons & (has(and(run, class(-4)), DIGIT) | (is(n1, b'/') & is(n2, b'/')));
    let dot = if dots == 0 {
        0
    } else {
        let c16 = class(-16);
        dots & (has(and(run, c16), HEX)
            | (is(n1, b'a') & is(n2, b't'))
            | (is(at(7), b'.') & has(and(and(c1, c8), c16), TOKEN))
            | (is(p1, b's') & !has(c2, LOWER)))
    };
    colon | dot | (tildes & is(p1, b'Q')) != 0
}

#[inline(always)]
fn ranges(bytes: &[u8]) -> Vec<(usize, usize)> {
    let len = bytes.len();
    if len < BLOCK + 2 * REACH {
        return vec![(0, len)];
    }
    let mut out = vec![(0, REACH)];
    let mut classes = [0u8; PIECE_BLOCKS * BLOCK + 2 * REACH];
    let mut base = REACH;
    while base + BLOCK + REACH <= len {
        let n_blocks = ((len - REACH - base) / BLOCK).min(PIECE_BLOCKS);
        let piece = &bytes[base - REACH..base + n_blocks * BLOCK + REACH];
        for (c, b) in classes.iter_mut().zip(piece) {
            *c = class(*b);
        }
        for block in 0..n_blocks {
            let at = block * BLOCK;
            let (Ok(window), Ok(classed)) = (
                <&Window>::try_from(&piece[at..at + BLOCK + 2 * REACH]),
                <&Window>::try_from(&classes[at..at + BLOCK + 2 * REACH]),
            ) else {
                break;
            };
            if flagged(window, classed) {
                push(&mut out, base + at, base + at + BLOCK);
            }
        }
        base += n_blocks * BLOCK;
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

/// The class bits of `b`: a digit is hex and a token byte too; a token byte is
/// an ASCII letter, digit, `_` or `-`.
#[inline(always)]
const fn class(b: u8) -> u8 {
    let digit = (b.wrapping_sub(b'0') < 10) as u8;
    let lower = (b.wrapping_sub(b'a') < 26) as u8;
    let hex_letter = (b.wrapping_sub(b'a') < 6) as u8;
    let upper = (b.wrapping_sub(b'A') < 26) as u8;
    let token = digit | lower | upper | (b == b'_') as u8 | (b == b'-') as u8;
    (digit * DIGIT) | ((digit | hex_letter) * HEX) | (lower * LOWER) | (token * TOKEN)
}

/// Whether a position of the block in the middle of `window` passes a test;
/// `classes` holds the class of each byte of `window`.
#[inline(always)]
fn flagged(window: &Window, classes: &Window) -> bool {
    let is = |b: u8, c: u8| u8::from(b == c);
    let has = |classes: u8, bit: u8| u8::from(classes & bit != 0);
    let mut any = 0u8;
    for i in REACH..REACH + BLOCK {
        let (b, p1, n1, n2, n7) = (
            window[i],
            window[i - 1],
            window[i + 1],
            window[i + 2],
            window[i + 7],
        );
        let (c1, c2, c8, c16) = (
            classes[i - 1],
            classes[i - 2],
            classes[i - 8],
            classes[i - 16],
        );
        let run = c1 & c2 & classes[i - 3] & c8;
        let colon =
            is(b, b':') & (has(run & classes[i - 4], DIGIT) | (is(n1, b'/') & is(n2, b'/')));
        let dot = is(b, b'.')
            & (has(run & c16, HEX)
                | (is(n1, b'a') & is(n2, b't'))
                | (is(n7, b'.') & has(c1 & c8 & c16, TOKEN))
                | (is(p1, b's') & (has(c2, LOWER) ^ 1)));
        let tilde = is(b, b'~') & is(p1, b'Q');
        any |= colon | dot | tilde;
    }
    any != 0
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{REACH, candidate_ranges, ranges};

    /// The test of one position, byte by byte, as the module's doc states it.
    fn passes(bytes: &[u8], i: usize) -> bool {
        let at = |d: isize| bytes[i.wrapping_add_signed(d)];
        let all = |offsets: &[isize], test: fn(&u8) -> bool| offsets.iter().all(|d| test(&at(*d)));
        let hex = |b: &u8| b.is_ascii_digit() || (b'a'..=b'f').contains(b);
        let token = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-');
        match bytes[i] {
            b':' => {
                all(&[-1, -2, -3, -4, -8], u8::is_ascii_digit) || (at(1) == b'/' && at(2) == b'/')
            }
            b'.' => {
                all(&[-1, -2, -3, -8, -16], hex)
                    || (at(1) == b'a' && at(2) == b't')
                    || (at(7) == b'.' && all(&[-1, -8, -16], token))
                    || (at(-1) == b's' && !at(-2).is_ascii_lowercase())
            }
            b'~' => at(-1) == b'Q',
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn b30_every_position_that_passes_lies_in_a_range(
            text in proptest::collection::vec(
                proptest::sample::select(b"0123456789abcdefstAQZ_-:./~ \n\xb0\xb3\xe1".to_vec()),
                0..9000,
            )
        ) {
            // The vector ranges are the portable ones.
            prop_assert_eq!(candidate_ranges(&text), ranges(&text));
            for got in [candidate_ranges(&text), ranges(&text)] {
                prop_assert_eq!(got.first().map(|r| r.0), Some(0));
                prop_assert_eq!(got.last().map(|r| r.1), Some(text.len()));
                prop_assert!(got.windows(2).all(|w| w[0].1 < w[1].0));
                for i in REACH..text.len().saturating_sub(REACH) {
                    if passes(&text, i) {
                        prop_assert!(got.iter().any(|(from, to)| (*from..*to).contains(&i)), "{i}");
                    }
                }
            }
        }
    }

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
        // Bytes past ASCII are of no class: eight of `\xb0` (`0` in its low seven
        // bits) before a `:` are no digits.
        let mut wide = vec![b'x'; 100];
        wide.extend_from_slice(b"\xb0\xb0\xb0\xb0\xb0\xb0\xb0\xb0:\xae\xe1\xf4");
        wide.extend(std::iter::repeat_n(b'x', 100));
        assert_eq!(candidate_ranges(&wide), ranges(&wide));
        assert!(
            !candidate_ranges(&wide)
                .iter()
                .any(|(from, to)| (*from..*to).contains(&108))
        );
        // Clean text is mostly skipped.
        let clean = "2024-05-01T12:00:00.123Z INFO listening on 0.0.0.0:8080 v1.0.117 files.pythonhosted.org\n".repeat(40);
        let visited: usize = candidate_ranges(clean.as_bytes())
            .iter()
            .map(|(from, to)| to - from)
            .sum();
        assert!(visited < clean.len() / 4, "{visited} of {}", clean.len());
    }
}
