//! The search for `-----` (the dashes every PEM and OpenSSH marker holds).
//!
//! Log text is full of single dashes (dates, UUIDs, flags, `-->`), and a substring
//! search for a needle of one repeated byte verifies a candidate at each of them: it
//! cost more than every other key test together. So the text is first tested a
//! block of [`BLOCK`] bytes at a time for a run of five dashes starting in it, by a
//! branch-free test the compiler vectorises (with AVX2 where the CPU has it), and
//! only a flagged block is searched exactly.

/// The needle.
const DASHES: &[u8] = b"-----";
/// The starts tested in one block.
const BLOCK: usize = 64;
/// A block with the bytes a run starting at its end reaches.
type Window = [u8; BLOCK + DASHES.len() - 1];

/// The offset of the first `-----` in `bytes`.
pub(crate) fn find(bytes: &[u8]) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    {
        if std::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU has AVX2 (checked just above).
            return unsafe { find_avx2(bytes) };
        }
    }
    find_in(bytes)
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn find_avx2(bytes: &[u8]) -> Option<usize> {
    find_in(bytes)
}

#[inline(always)]
fn find_in(bytes: &[u8]) -> Option<usize> {
    let mut base = 0;
    while let Some(window) = bytes
        .get(base..base + BLOCK + DASHES.len() - 1)
        .and_then(|w| <&Window>::try_from(w).ok())
    {
        if flagged(window) {
            // The first start in this block is the first in the text; the exact
            // search cannot go past it into the next block's starts.
            return memchr::memmem::find(window, DASHES).map(|idx| base + idx);
        }
        base += BLOCK;
    }
    memchr::memmem::find(&bytes[base..], DASHES).map(|idx| base + idx)
}

/// Whether a run of five dashes starts in the first [`BLOCK`] bytes of `window`.
#[inline(always)]
fn flagged(window: &Window) -> bool {
    let dash = |b: u8| u8::from(b == b'-');
    let mut any = 0u8;
    for i in 0..BLOCK {
        any |= dash(window[i])
            & dash(window[i + 1])
            & dash(window[i + 2])
            & dash(window[i + 3])
            & dash(window[i + 4]);
    }
    any != 0
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn b30_the_dash_run_search_agrees_with_a_substring_search(
            parts in proptest::collection::vec(
                prop_oneof![Just("-"), Just("--"), Just("-----"), Just("a"), Just("\n"), Just("x-y")],
                0..200,
            ),
        ) {
            let text = parts.concat();
            prop_assert_eq!(
                super::find(text.as_bytes()),
                memchr::memmem::find(text.as_bytes(), b"-----")
            );
        }
    }

    #[test]
    fn b30_the_dash_run_search_finds_a_run_at_every_offset_and_block_edge() {
        for len in [0, 4, 5, 63, 64, 67, 68, 69, 130, 200] {
            for at in 0..len {
                let mut text = vec![b'-'; len];
                // Single dashes everywhere but one run of five at `at`.
                for (idx, byte) in text.iter_mut().enumerate() {
                    if idx % 2 == 1 && !(at..at + 5).contains(&idx) {
                        *byte = b'a';
                    }
                }
                assert_eq!(
                    super::find(&text),
                    memchr::memmem::find(&text, b"-----"),
                    "len {len}, run at {at}"
                );
            }
        }
    }
}
