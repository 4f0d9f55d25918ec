//! The word-start searcher: the trigger literals of the patterns whose every match
//! starts at an ASCII word start, found by looking only at word starts.
//!
//! A pattern written `\b` + literal, the literal starting with a word byte
//! (`[0-9A-Za-z_]`), can only match at a position whose byte is a word byte and
//! whose previous byte is not (or that starts the text): the assertion holds there
//! and the match's first byte is the literal's. So instead of a packed search per
//! 64 literals over every byte (six passes for the provider rules), one pass marks
//! the word starts of 64 bytes at a time (a vector compare and a bit mask), and
//! each word start costs one bit test: the bit of its first three bytes' low five
//! bits (case and the byte's class folded away, so a literal's bit is that of
//! every text its pattern can match, case-insensitive ones included). A set bit is
//! verified against the literals that share it. Log text has a word start every
//! five or six bytes, and literals in the middle of words (`test_login`) are never
//! candidates.

/// The bits of a table's key.
const KEY_BITS: u32 = 15;

/// One literal: its bytes and whether it is compared as written (`true`) or with
/// the text ASCII-lowercased (`false`, the literal being lowercase).
pub(super) type Literal = (Vec<u8>, bool);

/// The literals of the word-start patterns and their tables.
#[derive(Debug, Clone)]
pub(crate) struct WordStarts {
    /// One bit per key of the first three bytes of a literal (the first test).
    three: Vec<u64>,
    /// One bit per key of the first four bytes of a longer literal.
    four: Vec<u64>,
    /// Bit `k` set when a three-byte literal has three-byte key `k`.
    short: Vec<u64>,
    /// `(key, literal)` sorted: the literals to verify for a set bit (a short
    /// literal's key is its `short` one, a longer one's its `long` one).
    index: Vec<(u16, u16)>,
    literals: Vec<Literal>,
}

/// The low five bits of each of the first four bytes of `head` (zero bytes past
/// its end): what a byte keeps under ASCII case folding and more.
fn folded(head: &[u8]) -> u32 {
    let mut four = [0u8; 4];
    let n = head.len().min(4);
    four[..n].copy_from_slice(&head[..n]);
    u32::from_le_bytes(four) & 0x1f1f_1f1f
}

/// The keys of three and of four folded bytes.
fn keys(folded: u32) -> (u16, u16) {
    let hash = |v: u32| (v.wrapping_mul(0x9e37_79b1) >> (32 - KEY_BITS)) as u16;
    (hash(folded & 0x001f_1f1f), hash(folded))
}

/// Whether bit `k` of `table` (of `1 << KEY_BITS` bits) is set.
fn has(table: &[u64], k: u16) -> bool {
    table
        .get(usize::from(k) / 64)
        .is_some_and(|word| word >> (k % 64) & 1 != 0)
}

/// Sets bit `k` of `table`.
fn set(table: &mut [u64], k: u16) {
    if let Some(word) = table.get_mut(usize::from(k) / 64) {
        *word |= 1 << (k % 64);
    }
}

/// An ASCII word byte (`[0-9A-Za-z_]`, what `(?-u:\b)` looks at).
pub(super) fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

impl WordStarts {
    /// The searcher of `literals`, each at least three bytes long and starting with
    /// a word byte; `None` when there are none, or a literal is not so.
    pub(super) fn new(literals: Vec<Literal>) -> Option<WordStarts> {
        if literals.is_empty()
            || literals.len() > usize::from(u16::MAX)
            || literals.iter().any(|(l, _)| l.len() < 3 || !is_word(l[0]))
        {
            return None;
        }
        let mut three = vec![0u64; (1 << KEY_BITS) / 64];
        let mut four = three.clone();
        let mut short = three.clone();
        let mut index = Vec::with_capacity(literals.len());
        for (idx, (lit, _)) in literals.iter().enumerate() {
            let (k3, k4) = keys(folded(lit));
            set(&mut three, k3);
            let k = if lit.len() == 3 {
                set(&mut short, k3);
                k3
            } else {
                set(&mut four, k4);
                k4
            };
            index.push((k, u16::try_from(idx).ok()?));
        }
        index.sort_unstable();
        Some(WordStarts {
            three,
            four,
            short,
            index,
            literals,
        })
    }

    /// The first word start at or after `from` where a literal starts: its
    /// position and the length of the shortest literal there.
    pub(super) fn find(&self, text: &[u8], from: usize) -> Option<(usize, usize)> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                return unsafe { self.find_avx2(text, from) };
            }
        }
        self.find_with(text, from, word_mask)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn find_avx2(&self, text: &[u8], from: usize) -> Option<(usize, usize)> {
        self.find_with(text, from, |text, base| {
            // SAFETY: only called from this function, which runs with AVX2.
            unsafe { word_mask_avx2(text, base) }
        })
    }

    #[inline(always)]
    fn find_with(
        &self,
        text: &[u8],
        from: usize,
        mask: impl Fn(&[u8], usize) -> u64,
    ) -> Option<(usize, usize)> {
        let len = text.len();
        let mut base = from;
        let mut carry = u64::from(from > 0 && from <= len && is_word(text[from - 1]));
        while base + 3 <= len {
            let words = mask(text, base);
            let mut starts = words & !((words << 1) | carry);
            carry = words >> 63;
            while starts != 0 {
                let at = base + starts.trailing_zeros() as usize;
                starts &= starts - 1;
                let Some(head) = text.get(at..).filter(|h| h.len() >= 3) else {
                    return None;
                };
                let bits = match head.get(..4) {
                    Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) & 0x1f1f_1f1f,
                    _ => folded(head),
                };
                let (k3, k4) = keys(bits);
                if !has(&self.three, k3) {
                    continue;
                }
                let short = has(&self.short, k3)
                    .then(|| self.verify(head, k3))
                    .flatten();
                let long = has(&self.four, k4).then(|| self.verify(head, k4)).flatten();
                if let Some(n) = short.into_iter().chain(long).min() {
                    return Some((at, n));
                }
            }
            base += 64;
        }
        None
    }

    /// The length of the shortest literal of key `k` that `head` starts with.
    fn verify(&self, head: &[u8], k: u16) -> Option<usize> {
        let first = self.index.partition_point(|(key, _)| *key < k);
        self.index[first..]
            .iter()
            .take_while(|(key, _)| *key == k)
            .filter_map(|(_, idx)| self.literals.get(usize::from(*idx)))
            .filter(|(lit, exact)| match head.get(..lit.len()) {
                Some(part) if *exact => part == lit.as_slice(),
                Some(part) => part.eq_ignore_ascii_case(lit),
                None => false,
            })
            .map(|(lit, _)| lit.len())
            .min()
    }
}

/// Bit `i` set when `text[base + i]` is a word byte (up to 64 bytes).
fn word_mask(text: &[u8], base: usize) -> u64 {
    text[base..]
        .iter()
        .take(64)
        .enumerate()
        .fold(0, |m, (i, b)| m | (u64::from(is_word(*b)) << i))
}

/// [`word_mask`] with AVX2 compares.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn word_mask_avx2(text: &[u8], base: usize) -> u64 {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8,
    };
    if base + 64 > text.len() {
        return word_mask(text, base);
    }
    let half = |v: __m256i| {
        // Bytes of 0x80 and up are negative (signed compares): never in a range.
        let between = |v: __m256i, lo: u8, hi: u8| {
            _mm256_and_si256(
                _mm256_cmpgt_epi8(v, _mm256_set1_epi8((lo - 1) as i8)),
                _mm256_cmpgt_epi8(_mm256_set1_epi8((hi + 1) as i8), v),
            )
        };
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        let word = _mm256_or_si256(
            _mm256_or_si256(between(folded, b'a', b'z'), between(v, b'0', b'9')),
            _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'_' as i8)),
        );
        u64::from(_mm256_movemask_epi8(word).cast_unsigned())
    };
    // SAFETY: `base + 64 <= text.len()` (checked above): two unaligned 32-byte
    // loads from `base` stay inside `text`.
    let (lo, hi) = unsafe {
        let ptr = text.as_ptr().add(base).cast::<__m256i>();
        (_mm256_loadu_si256(ptr), _mm256_loadu_si256(ptr.add(1)))
    };
    half(lo) | (half(hi) << 32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b30_word_starts_are_found_with_and_without_vectors() {
        let ws = WordStarts::new(vec![
            (b"ghp_".to_vec(), true),
            (b"authorization".to_vec(), false),
            (b"sk-".to_vec(), true),
        ])
        .expect("valid literals");
        let text = b"xghp_a ghp_b AUTHORIZATION: sk- _sk- sk";
        let mut found = Vec::new();
        let mut from = 0;
        while let Some((at, n)) = ws.find(text, from) {
            found.push((at, n));
            from = at + 1;
        }
        assert_eq!(found, vec![(7, 4), (13, 13), (28, 3)]);
        // The scalar mask agrees with the vector one on every byte.
        let all: Vec<u8> = (0..=255u8).collect();
        for base in (0..256).step_by(64).chain([200]) {
            let scalar = word_mask(&all, base);
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                assert_eq!(unsafe { word_mask_avx2(&all, base) }, scalar);
            }
            for (i, b) in all[base..].iter().take(64).enumerate() {
                assert_eq!(scalar >> i & 1 == 1, is_word(*b), "{b}");
            }
        }
        // Across a chunk edge, and from inside a word.
        let long = format!("{}ghp_x {}zghp_", "a ".repeat(31), "b".repeat(70));
        assert_eq!(ws.find(long.as_bytes(), 0), Some((62, 4)));
        assert_eq!(ws.find(long.as_bytes(), 63), None);
        assert_eq!(ws.find(b"ghp_", 1), None);
        assert_eq!(ws.find(b"ghp_", 0), Some((0, 4)));
    }
}
