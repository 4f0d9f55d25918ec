//! The closed index's one pass over new output: where the next line starts that
//! could hold a marker or a hidden sequence.
//!
//! While no block is open the index reads only lines that hold the start of a
//! marker (`-----`, a PuTTY file's `-Lines: `, a PEM file in base64) or of a hidden
//! sequence (an escape, a control, an invisible character, an escape spelled out
//! with a backslash). Searching for each of those in turn read every byte four
//! times; here one branch-free test of a block of [`BLOCK`] bytes (vectorised, with
//! AVX2 where the CPU has it) flags every block where any of them could start, and
//! only a flagged block is looked at exactly. The test is a superset of each
//! start: a run of dashes needs a `-` and another four bytes on, a needle its
//! first two bytes, a hidden sequence a control, DEL, a non-ASCII byte or a
//! backslash; so the first exact start it finds is the first in the text.

use super::super::{keys, visible};

/// The starts tested in one block.
const BLOCK: usize = 64;
/// How far past a start the test looks (the fifth dash).
const REACH: usize = 4;
/// A block with the bytes its last start's test reaches.
type Window = [u8; BLOCK + REACH];

/// The first offset at or after `from` in `text` where a marker or a hidden
/// sequence starts; `None` when none does.
pub(super) fn next_candidate(text: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    while at < text.len() {
        let block = next_flagged(text, at)?;
        let end = (block + BLOCK).min(text.len());
        if let Some(hit) = (block..end).find(|&p| starts_here(text, p)) {
            return Some(hit);
        }
        at = end;
    }
    None
}

/// Whether a marker or a hidden sequence starts at `p` (the exact test).
fn starts_here(text: &[u8], p: usize) -> bool {
    let rest = &text[p..];
    rest.starts_with(b"-----")
        || rest.starts_with(keys::PPK_NEEDLE)
        || rest.starts_with(keys::ENCODED_NEEDLE)
        || visible::hidden_starts_at(text, p)
}

/// The start of the first block at or after `from` (blocks of [`BLOCK`] bytes from
/// `from` on) the superset test flags; the last, shorter block is always taken.
fn next_flagged(text: &[u8], from: usize) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { next_flagged_avx2(text, from) };
        }
    }
    next_flagged_in(text, from)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn next_flagged_avx2(text: &[u8], from: usize) -> Option<usize> {
    next_flagged_in(text, from)
}

#[inline(always)]
fn next_flagged_in(text: &[u8], from: usize) -> Option<usize> {
    let mut base = from;
    while let Some(window) = text
        .get(base..base + BLOCK + REACH)
        .and_then(|w| <&Window>::try_from(w).ok())
    {
        if flagged(window) {
            return Some(base);
        }
        base += BLOCK;
    }
    (base < text.len()).then_some(base)
}

/// Whether anything that [`starts_here`] could start in the first [`BLOCK`] bytes
/// of `window`.
#[inline(always)]
fn flagged(window: &Window) -> bool {
    let mut any = 0u8;
    for i in 0..BLOCK {
        let b = window[i];
        let next = window[i + 1];
        let dash = u8::from(b == b'-');
        // A control but tab, newline and carriage return, DEL, or non-ASCII.
        let hidden = u8::from(b.wrapping_sub(0x20) >= 0x5f)
            & u8::from(b != b'\n')
            & u8::from(b != b'\t')
            & u8::from(b != b'\r');
        any |= hidden
            | u8::from(b == b'\\')
            | (dash & u8::from(window[i + REACH] == b'-'))
            | (dash & u8::from(next == keys::PPK_NEEDLE[1]))
            | (u8::from(b == keys::ENCODED_NEEDLE[0]) & u8::from(next == keys::ENCODED_NEEDLE[1]));
    }
    any != 0
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    /// The first start as the searches the block test replaced find it: the next
    /// marker, and the next hidden sequence, each searched for on its own.
    fn first_start(text: &[u8], from: usize) -> Option<usize> {
        let marker = crate::redact::keys::Markers::new().next(text, from);
        let hidden = crate::redact::visible::first_hidden_from(text, from);
        [marker, hidden].into_iter().flatten().min()
    }

    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            4 => "[a-z0-9 ]{0,90}".prop_map(String::into_bytes),
            1 => Just(b"-----".to_vec()),
            1 => Just(b"-Lines: ".to_vec()),
            1 => Just(b"LS0tLS1C".to_vec()),
            1 => Just(b"-L".to_vec()),
            1 => Just(b"LS".to_vec()),
            1 => Just(b"a-b-c--d".to_vec()),
            1 => Just(b"\n".to_vec()),
            1 => Just(b"\t\r".to_vec()),
            1 => Just(b"\x1b[1m".to_vec()),
            1 => Just(b"\\x1b[0m \\u001b[".to_vec()),
            1 => Just(b"\\n\\t".to_vec()),
            1 => Just(vec![0u8, 7, 0x7f]),
            1 => Just("\u{200b}\u{feff}é\u{a0}".as_bytes().to_vec()),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(500))]

        #[test]
        fn b30_the_block_test_finds_the_first_start_the_exact_test_finds(
            pieces in proptest::collection::vec(piece(), 0..60),
            from in 0usize..200,
        ) {
            let text = pieces.concat();
            let from = from.min(text.len());
            prop_assert_eq!(super::next_candidate(&text, from), first_start(&text, from));
        }
    }

    #[test]
    fn b30_each_kind_of_start_is_found_at_every_offset_and_block_edge() {
        let kinds: [&[u8]; 8] = [
            b"-----",
            b"-Lines: ",
            b"LS0tLS1C",
            b"\x1b[0m",
            b"\x07",
            b"\\x1b[0m",
            "\u{200b}".as_bytes(),
            b"\x7f",
        ];
        for kind in kinds {
            for len in [8, 63, 64, 65, 67, 68, 69, 130, 200] {
                for at in 0..len {
                    let mut text = vec![b'a'; len];
                    // Single dashes and lone `L`s everywhere, which start nothing.
                    for (idx, byte) in text.iter_mut().enumerate() {
                        if idx % 3 == 1 {
                            *byte = b'-';
                        }
                    }
                    let end = (at + kind.len()).min(len);
                    text[at..end].copy_from_slice(&kind[..end - at]);
                    for from in [0, at.saturating_sub(1), at] {
                        assert_eq!(
                            super::next_candidate(&text, from),
                            first_start(&text, from),
                            "{kind:?} at {at} of {len}, from {from}"
                        );
                    }
                }
            }
        }
    }
}
