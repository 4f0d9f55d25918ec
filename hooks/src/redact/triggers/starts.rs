//! The word-start searcher: the trigger literals of the patterns whose every match
//! starts at an ASCII word start, found by looking only at word starts; and, with
//! the same tests at every position ([`WordStarts::anywhere`]), the literals of the
//! other patterns (key names that may sit inside a word: `DB_PASSWORD`).
//!
//! A pattern written `\b` + literal, the literal starting with a word byte
//! (`[0-9A-Za-z_]`), can only match at a position whose byte is a word byte and
//! whose previous byte is not (or that starts the text): the assertion holds there
//! and the match's first byte is the literal's. So instead of a packed search per
//! 64 literals over every byte (six passes for the provider rules), one pass marks
//! the word starts of 64 bytes at a time (a vector compare and a bit mask) whose
//! first two bytes could start a literal (a packed test of eight buckets of
//! literals: each byte's nibbles looked up in tables holding, per bucket, the
//! nibbles of the bucket's literals' first and second bytes, both cases of a
//! letter in a case-insensitive literal), and each of those costs one bit test:
//! the bit of its first three bytes' low five
//! bits (case and the byte's class folded away, so a literal's bit is that of
//! every text its pattern can match, case-insensitive ones included). A set bit is
//! verified against the literals that share it. Log text has a word start every
//! five or six bytes, and (but for [`WordStarts::anywhere`]) literals in the
//! middle of words (`test_login`) are never candidates.
//!
//! Where the CPU can look a byte up in a 128-entry table (AVX-512 VBMI), the pair
//! test reads each of the first three bytes whole instead of as two nibbles: a
//! nibble test passes every mix of a bucket's nibbles (`I` for `i` and `A`,
//! `worker` for `webhook`), the whole-byte one only the bytes a literal has there.
//! On log text it leaves a quarter of the candidates (the e2e bench's line 0.85 in
//! 64 bytes instead of 3.4, realistic clean logs 1.05 instead of 4.2), each of which
//! costs a branch and a table test.

/// The bits of a table's key.
const KEY_BITS: u32 = 15;

/// The bits of the key of the first test.
const FIRST_BITS: u32 = 12;

/// One literal: its bytes and whether it is compared as written (`true`) or with
/// the text ASCII-lowercased (`false`, the literal being lowercase).
pub(super) type Literal = (Vec<u8>, bool);

/// The literals of the word-start patterns and their tables.
#[derive(Debug, Clone)]
pub(crate) struct WordStarts {
    /// One bit per key of the first three bytes of a literal, cut to
    /// [`FIRST_BITS`] (the first test: a small table stays in the nearest cache).
    three: Vec<u64>,
    /// One bit per key of the first four bytes of a longer literal.
    four: Vec<u64>,
    /// Bit `k` set when a three-byte literal has three-byte key `k`.
    short: Vec<u64>,
    /// `(key, literal)` sorted: the literals to verify for a set bit (a short
    /// literal's key is its `short` one, a longer one's its `long` one).
    index: Vec<(u16, u16)>,
    literals: Vec<Literal>,
    /// The pair test: per position in the literal (its first three bytes), the
    /// buckets whose literals have a byte of this low nibble there...
    low: [[u8; 16]; 3],
    /// ... and of this high nibble.
    high: [[u8; 16]; 3],
    /// The pair test on whole bytes.
    bytes: ByteSets,
    /// The literals are looked for at every position, not only at word starts
    /// ([`WordStarts::anywhere`]).
    anywhere: bool,
}

/// The pair test on whole bytes: per position of a literal's first three, the
/// buckets whose literals have each ASCII byte there, and (`high`) those with any
/// byte past ASCII there (a Unicode case variant such as `ſ`; every such byte
/// passes for them, a superset).
#[derive(Debug, Clone)]
struct ByteSets {
    ascii: [[u8; 128]; 3],
    high: [u8; 3],
}

/// Whether the pair test passes for bytes `b` (a bucket has a literal whose first
/// three bytes could be these).
fn pair_passes(low: &[[u8; 16]; 3], high: &[[u8; 16]; 3], b: [u8; 3]) -> bool {
    let bucket = |j: usize| low[j][usize::from(b[j] & 15)] & high[j][usize::from(b[j] >> 4)];
    bucket(0) & bucket(1) & bucket(2) != 0
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
        if literals
            .iter()
            .any(|(l, _)| !l.first().copied().is_some_and(is_word))
        {
            return None;
        }
        Self::build(literals, false)
    }

    /// The searcher of `literals` (each at least three bytes long) at every
    /// position of a text: the same tests without the word-start one. What the
    /// packed search of the ASCII-lowercased copy found, without the copy: the
    /// case-insensitive literals' tables hold both cases and are verified so.
    pub(super) fn anywhere(literals: Vec<Literal>) -> Option<WordStarts> {
        Self::build(literals, true)
    }

    fn build(literals: Vec<Literal>, anywhere: bool) -> Option<WordStarts> {
        if literals.is_empty()
            || literals.len() > usize::from(u16::MAX)
            || literals.iter().any(|(l, _)| l.len() < 3)
        {
            return None;
        }
        let mut three = vec![0u64; (1 << FIRST_BITS) / 64];
        let mut four = vec![0u64; (1 << KEY_BITS) / 64];
        let mut short = four.clone();
        let mut index = Vec::with_capacity(literals.len());
        let (mut low, mut high) = ([[0u8; 16]; 3], [[0u8; 16]; 3]);
        let mut bytes = ByteSets {
            ascii: [[0u8; 128]; 3],
            high: [0u8; 3],
        };
        for (lit, exact) in &literals {
            // Literals of one first letter share a bucket (their second bytes
            // differ more than their first ones).
            let bucket = 1u8 << ((lit[0] & 31) % 8);
            for (j, b) in lit.iter().take(3).enumerate() {
                let upper = b.to_ascii_uppercase();
                let variants = if !*exact && upper != *b {
                    [*b, upper]
                } else {
                    [*b, *b]
                };
                for v in variants {
                    low[j][usize::from(v & 15)] |= bucket;
                    high[j][usize::from(v >> 4)] |= bucket;
                    match bytes.ascii[j].get_mut(usize::from(v)) {
                        Some(entry) => *entry |= bucket,
                        None => bytes.high[j] |= bucket,
                    }
                }
            }
        }
        for (idx, (lit, _)) in literals.iter().enumerate() {
            let (k3, k4) = keys(folded(lit));
            set(&mut three, k3 >> (KEY_BITS - FIRST_BITS));
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
            low,
            high,
            bytes,
            anywhere,
        })
    }

    /// The first word start (with [`Self::anywhere`], position) at or after `from`
    /// where a literal starts: its position and the length of the shortest literal
    /// there.
    pub(super) fn find(&self, text: &[u8], from: usize) -> Option<(usize, usize)> {
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx512vbmi")
                && std::is_x86_feature_detected!("avx512bw")
            {
                // SAFETY: the CPU has AVX-512 VBMI and BW (checked just above).
                return unsafe { self.find_vbmi(text, from) };
            }
            if std::is_x86_feature_detected!("avx512bw") {
                // SAFETY: the CPU has AVX-512BW (checked just above).
                return unsafe { self.find_avx512(text, from) };
            }
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2 (checked just above).
                return unsafe { self.find_avx2(text, from) };
            }
        }
        self.find_with(text, from, |text, base| {
            (
                word_mask(text, base),
                pair_mask(&self.low, &self.high, text, base),
            )
        })
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn find_avx2(&self, text: &[u8], from: usize) -> Option<(usize, usize)> {
        let tables = PairTables::new(&self.low, &self.high);
        self.find_with(text, from, |text, base| {
            if base + 66 > text.len() {
                return (
                    word_mask(text, base),
                    pair_mask(&self.low, &self.high, text, base),
                );
            }
            // SAFETY: only called from this function, which runs with AVX2, and
            // `base + 66 <= text.len()` (checked just above).
            unsafe { masks_avx2(&tables, text, base) }
        })
    }

    /// [`Self::find_avx2`] 64 bytes to a vector: the compares give their bit masks
    /// straight (mask registers), half the instructions of two AVX2 halves.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw")]
    fn find_avx512(&self, text: &[u8], from: usize) -> Option<(usize, usize)> {
        let tables = PairTables512::new(&self.low, &self.high);
        self.find_with(text, from, |text, base| {
            if base + 66 > text.len() {
                return (
                    word_mask(text, base),
                    pair_mask(&self.low, &self.high, text, base),
                );
            }
            // SAFETY: only called from this function, which runs with AVX-512BW,
            // and `base + 66 <= text.len()` (checked just above).
            unsafe { masks_avx512(&tables, text, base) }
        })
    }

    /// [`Self::find_avx512`] with the pair test on whole bytes (`bytes`, see the
    /// module): the same positions pass the word test, far fewer the pair test.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    fn find_vbmi(&self, text: &[u8], from: usize) -> Option<(usize, usize)> {
        let bytes = &self.bytes;
        let tables = ByteTables::new(bytes);
        self.find_with(text, from, |text, base| {
            if base + 66 > text.len() {
                return (word_mask(text, base), byte_mask(bytes, text, base));
            }
            // SAFETY: only called from this function, which runs with AVX-512 VBMI
            // and BW, and `base + 66 <= text.len()` (checked just above).
            unsafe { masks_vbmi(&tables, text, base) }
        })
    }

    #[inline(always)]
    fn find_with(
        &self,
        text: &[u8],
        from: usize,
        masks: impl Fn(&[u8], usize) -> (u64, u64),
    ) -> Option<(usize, usize)> {
        let len = text.len();
        let mut base = from;
        let mut carry = u64::from(from > 0 && from <= len && is_word(text[from - 1]));
        while base + 3 <= len {
            let (words, pairs) = masks(text, base);
            let mut starts = if self.anywhere {
                pairs
            } else {
                words & !((words << 1) | carry) & pairs
            };
            carry = words >> 63;
            while starts != 0 {
                let at = base + starts.trailing_zeros() as usize;
                starts &= starts - 1;
                let bits = match text.get(at..at + 4) {
                    Some(&[a, b, c, d]) => u32::from_le_bytes([a, b, c, d]) & 0x1f1f_1f1f,
                    _ if at + 3 <= len => folded(&text[at..]),
                    _ => return None,
                };
                let (k3, k4) = keys(bits);
                if !has(&self.three, k3 >> (KEY_BITS - FIRST_BITS)) {
                    continue;
                }
                let head = &text[at..];
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
                // Byte by byte: a literal is a few bytes, a `memcmp` call costs more.
                Some(part) if *exact => part.iter().zip(lit).all(|(a, b)| a == b),
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

/// Bit `i` set when the pair test passes at `text[base + i]` (up to 64 bytes; a
/// missing second or third byte is a zero byte).
fn pair_mask(low: &[[u8; 16]; 3], high: &[[u8; 16]; 3], text: &[u8], base: usize) -> u64 {
    text[base..]
        .iter()
        .take(64)
        .enumerate()
        .fold(0, |m, (i, b)| {
            let at = |k: usize| text.get(base + i + k).copied().unwrap_or(0);
            m | (u64::from(pair_passes(low, high, [*b, at(1), at(2)])) << i)
        })
}

/// Whether the pair test on whole bytes passes for bytes `b`.
fn bytes_pass(bytes: &ByteSets, b: [u8; 3]) -> bool {
    let bucket = |j: usize| {
        bytes.ascii[j]
            .get(usize::from(b[j]))
            .copied()
            .unwrap_or(bytes.high[j])
    };
    bucket(0) & bucket(1) & bucket(2) != 0
}

/// Bit `i` set when the pair test on whole bytes passes at `text[base + i]` (up to
/// 64 bytes; a missing second or third byte is a zero byte).
fn byte_mask(bytes: &ByteSets, text: &[u8], base: usize) -> u64 {
    text[base..]
        .iter()
        .take(64)
        .enumerate()
        .fold(0, |m, (i, b)| {
            let at = |k: usize| text.get(base + i + k).copied().unwrap_or(0);
            m | (u64::from(bytes_pass(bytes, [*b, at(1), at(2)])) << i)
        })
}

/// The whole-byte tables in vector registers: per position, entries 0-63 and
/// 64-127, and the buckets of a byte past ASCII in every byte.
#[cfg(target_arch = "x86_64")]
struct ByteTables {
    ascii: [[std::arch::x86_64::__m512i; 2]; 3],
    high: [std::arch::x86_64::__m512i; 3],
}

#[cfg(target_arch = "x86_64")]
impl ByteTables {
    #[target_feature(enable = "avx512f,avx512bw")]
    fn new(bytes: &ByteSets) -> ByteTables {
        use std::arch::x86_64::{__m512i, _mm512_loadu_si512, _mm512_set1_epi8};
        // SAFETY: 64-byte unaligned loads of the two halves of a 128-byte array.
        let half = |t: &[u8; 128], at: usize| unsafe {
            _mm512_loadu_si512(t[at..].as_ptr().cast::<__m512i>())
        };
        ByteTables {
            ascii: bytes.ascii.each_ref().map(|t| [half(t, 0), half(t, 64)]),
            high: bytes.high.map(|b| _mm512_set1_epi8(b as i8)),
        }
    }
}

/// [`word_mask`] and [`byte_mask`] with AVX-512: each position's bytes looked up
/// whole in its 128-entry table (VBMI's two-table byte permute), a byte past ASCII
/// given its position's `high` buckets instead; needs `base + 66 <= text.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
unsafe fn masks_vbmi(tables: &ByteTables, text: &[u8], base: usize) -> (u64, u64) {
    use std::arch::x86_64::{_mm512_mask_mov_epi8, _mm512_movepi8_mask, _mm512_permutex2var_epi8};
    // SAFETY: `base + 66 <= text.len()` (the caller's contract).
    let v = unsafe { three_loads(text, base) };
    let bucket = |j: usize| {
        let [lo, hi] = tables.ascii[j];
        // The permute reads an index's low seven bits: a byte past ASCII would
        // read an ASCII byte's entry, so its lane takes the `high` buckets.
        let ascii = _mm512_permutex2var_epi8(lo, v[j], hi);
        _mm512_mask_mov_epi8(ascii, _mm512_movepi8_mask(v[j]), tables.high[j])
    };
    word_and_pair_masks(v[0], [bucket(0), bucket(1), bucket(2)])
}

/// The pair test's tables in vector registers (each in both 128-bit lanes).
#[cfg(target_arch = "x86_64")]
struct PairTables {
    low: [std::arch::x86_64::__m256i; 3],
    high: [std::arch::x86_64::__m256i; 3],
}

#[cfg(target_arch = "x86_64")]
impl PairTables {
    #[target_feature(enable = "avx2")]
    fn new(low: &[[u8; 16]; 3], high: &[[u8; 16]; 3]) -> PairTables {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm256_broadcastsi128_si256};
        let load = |table: &[u8; 16]| {
            // SAFETY: a 16-byte unaligned load of a 16-byte array.
            _mm256_broadcastsi128_si256(unsafe {
                _mm_loadu_si128(table.as_ptr().cast::<__m128i>())
            })
        };
        PairTables {
            low: [load(&low[0]), load(&low[1]), load(&low[2])],
            high: [load(&high[0]), load(&high[1]), load(&high[2])],
        }
    }
}

/// [`word_mask`] and [`pair_mask`] with AVX2 compares and shuffles; needs
/// `base + 66 <= text.len()` (the third byte of the 64th position).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn masks_avx2(tables: &PairTables, text: &[u8], base: usize) -> (u64, u64) {
    use std::arch::x86_64::{
        __m256i, _mm256_and_si256, _mm256_cmpeq_epi8, _mm256_cmpgt_epi8, _mm256_loadu_si256,
        _mm256_movemask_epi8, _mm256_or_si256, _mm256_set1_epi8, _mm256_setzero_si256,
        _mm256_shuffle_epi8, _mm256_srli_epi16,
    };
    let word = |v: __m256i| {
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
    let nibbles = |v: __m256i| {
        let mask = _mm256_set1_epi8(15);
        (
            _mm256_and_si256(v, mask),
            _mm256_and_si256(_mm256_srli_epi16::<4>(v), mask),
        )
    };
    let pair = |v: [__m256i; 3]| {
        let bucket = |j: usize| {
            let (lo, hi) = nibbles(v[j]);
            _mm256_and_si256(
                _mm256_shuffle_epi8(tables.low[j], lo),
                _mm256_shuffle_epi8(tables.high[j], hi),
            )
        };
        let buckets = _mm256_and_si256(_mm256_and_si256(bucket(0), bucket(1)), bucket(2));
        let none = _mm256_cmpeq_epi8(buckets, _mm256_setzero_si256());
        u64::from(!_mm256_movemask_epi8(none).cast_unsigned())
    };
    // SAFETY: `base + 66 <= text.len()` (the caller's contract): the 32-byte
    // unaligned loads at `base` to `base + 2` and `base + 32` to `base + 34` stay
    // inside `text`.
    let load = |at: usize| unsafe { _mm256_loadu_si256(text.as_ptr().add(at).cast::<__m256i>()) };
    let (a, b) = (
        [load(base), load(base + 1), load(base + 2)],
        [load(base + 32), load(base + 33), load(base + 34)],
    );
    (word(a[0]) | (word(b[0]) << 32), pair(a) | (pair(b) << 32))
}

/// The pair test's tables in 512-bit registers (each in all four 128-bit lanes).
#[cfg(target_arch = "x86_64")]
struct PairTables512 {
    low: [std::arch::x86_64::__m512i; 3],
    high: [std::arch::x86_64::__m512i; 3],
}

#[cfg(target_arch = "x86_64")]
impl PairTables512 {
    #[target_feature(enable = "avx512f,avx512bw")]
    fn new(low: &[[u8; 16]; 3], high: &[[u8; 16]; 3]) -> PairTables512 {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm512_broadcast_i32x4};
        let load = |table: &[u8; 16]| {
            // SAFETY: a 16-byte unaligned load of a 16-byte array.
            _mm512_broadcast_i32x4(unsafe { _mm_loadu_si128(table.as_ptr().cast::<__m128i>()) })
        };
        PairTables512 {
            low: [load(&low[0]), load(&low[1]), load(&low[2])],
            high: [load(&high[0]), load(&high[1]), load(&high[2])],
        }
    }
}

/// [`word_mask`] and [`pair_mask`] with AVX-512BW compares into mask registers
/// and shuffles; needs `base + 66 <= text.len()` (the third byte of the 64th
/// position).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn masks_avx512(tables: &PairTables512, text: &[u8], base: usize) -> (u64, u64) {
    use std::arch::x86_64::{
        _mm512_and_si512, _mm512_set1_epi8, _mm512_shuffle_epi8, _mm512_srli_epi16,
    };
    // SAFETY: `base + 66 <= text.len()` (the caller's contract).
    let v = unsafe { three_loads(text, base) };
    let mask = _mm512_set1_epi8(15);
    let bucket = |j: usize| {
        let lo = _mm512_and_si512(v[j], mask);
        let hi = _mm512_and_si512(_mm512_srli_epi16::<4>(v[j]), mask);
        _mm512_and_si512(
            _mm512_shuffle_epi8(tables.low[j], lo),
            _mm512_shuffle_epi8(tables.high[j], hi),
        )
    };
    word_and_pair_masks(v[0], [bucket(0), bucket(1), bucket(2)])
}

/// The 64 bytes of `text` at `base`, `base + 1` and `base + 2`: what a position's
/// first three bytes are, 64 positions at a time; needs `base + 66 <= text.len()`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn three_loads(text: &[u8], base: usize) -> [std::arch::x86_64::__m512i; 3] {
    use std::arch::x86_64::{__m512i, _mm512_loadu_si512};
    // SAFETY: the unaligned loads at `base` to `base + 2` end at `base + 65`,
    // inside `text` by the caller's contract.
    let load = |at: usize| unsafe { _mm512_loadu_si512(text.as_ptr().add(at).cast::<__m512i>()) };
    [load(base), load(base + 1), load(base + 2)]
}

/// The word mask of the 64 bytes `first` (each position's first byte) and the
/// pair mask of the three positions' `buckets`: the positions all three share one.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn word_and_pair_masks(
    first: std::arch::x86_64::__m512i,
    buckets: [std::arch::x86_64::__m512i; 3],
) -> (u64, u64) {
    use std::arch::x86_64::{_mm512_and_si512, _mm512_test_epi8_mask};
    let [a, b, c] = buckets;
    let all = _mm512_and_si512(_mm512_and_si512(a, b), c);
    (words_avx512(first), _mm512_test_epi8_mask(all, all))
}

/// [`word_mask`] of the 64 bytes of `v` with AVX-512BW compares.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512bw")]
fn words_avx512(v: std::arch::x86_64::__m512i) -> u64 {
    use std::arch::x86_64::{
        __m512i, _mm512_cmpeq_epi8_mask, _mm512_cmple_epu8_mask, _mm512_or_si512, _mm512_set1_epi8,
        _mm512_sub_epi8,
    };
    // Unsigned ranges: bytes of 0x80 and up are never in one.
    let within = |v: __m512i, lo: u8, n: u8| {
        _mm512_cmple_epu8_mask(
            _mm512_sub_epi8(v, _mm512_set1_epi8(lo as i8)),
            _mm512_set1_epi8(n as i8),
        )
    };
    let folded = _mm512_or_si512(v, _mm512_set1_epi8(0x20));
    within(folded, b'a', 25)
        | within(v, b'0', 9)
        | _mm512_cmpeq_epi8_mask(v, _mm512_set1_epi8(b'_' as i8))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether this CPU runs the whole-byte search.
    #[cfg(target_arch = "x86_64")]
    fn vbmi() -> bool {
        std::is_x86_feature_detected!("avx512vbmi") && std::is_x86_feature_detected!("avx512bw")
    }

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
        let all: Vec<u8> = (0..=255u8).chain(0..=255u8).rev().collect();
        for base in (0..400).step_by(37) {
            let scalar = (
                word_mask(&all, base),
                pair_mask(&ws.low, &ws.high, &all, base),
            );
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx2") && base + 66 <= all.len() {
                // SAFETY: the CPU has AVX2, and 66 bytes follow `base`.
                let vector = unsafe {
                    let tables = PairTables::new(&ws.low, &ws.high);
                    masks_avx2(&tables, &all, base)
                };
                assert_eq!(vector, scalar, "at {base}");
            }
            #[cfg(target_arch = "x86_64")]
            if std::is_x86_feature_detected!("avx512bw") && base + 66 <= all.len() {
                // SAFETY: the CPU has AVX-512BW, and 66 bytes follow `base`.
                let vector = unsafe {
                    let tables = PairTables512::new(&ws.low, &ws.high);
                    masks_avx512(&tables, &all, base)
                };
                assert_eq!(vector, scalar, "at {base} (512)");
            }
            let bytes = &ws.bytes;
            let whole = byte_mask(bytes, &all, base);
            // The whole-byte test passes only where the nibble test does.
            assert_eq!(whole & !scalar.1, 0, "at {base}");
            #[cfg(target_arch = "x86_64")]
            if vbmi() && base + 66 <= all.len() {
                // SAFETY: the CPU has AVX-512 VBMI and BW, and 66 bytes follow `base`.
                let vector = unsafe { masks_vbmi(&ByteTables::new(bytes), &all, base) };
                assert_eq!(vector, (scalar.0, whole), "at {base} (VBMI)");
            }
            for (i, b) in all[base..].iter().take(64).enumerate() {
                assert_eq!(scalar.0 >> i & 1 == 1, is_word(*b), "{b}");
            }
        }
        // Every literal passes the pair test, in every case it can be written in.
        for (lit, text) in [("ghp_", "ghp_"), ("authorization", "AuThorization")] {
            let _ = lit;
            let b = text.as_bytes();
            assert!(pair_passes(&ws.low, &ws.high, [b[0], b[1], b[2]]), "{text}");
        }
        assert!(!pair_passes(&ws.low, &ws.high, *b"gxp"));
        let bytes = &ws.bytes;
        for text in ["ghp_", "AuThorization", "sk-"] {
            let b = text.as_bytes();
            assert!(bytes_pass(bytes, [b[0], b[1], b[2]]), "{text}");
        }
        // Two literals of one bucket: the nibble test passes mixes of their bytes
        // (`I` is `i`'s low nibble and `A`'s high one), the whole-byte test does not.
        let mixed = WordStarts::new(vec![(b"Abc1".to_vec(), true), (b"iyz2".to_vec(), true)])
            .expect("valid literals");
        assert!(pair_passes(&mixed.low, &mixed.high, *b"Ibz"));
        let bytes = &mixed.bytes;
        assert!(!bytes_pass(bytes, *b"Ibz"));
        assert!(bytes_pass(bytes, *b"Abc") && bytes_pass(bytes, *b"iyz"));
        // A byte past ASCII: one no literal has there never passes, though its low
        // seven bits are a literal's byte (`\xe7` is `g`'s, `\xf0` `p`'s); one a
        // literal has there (`é`, C3 A9) passes as any byte past ASCII does.
        let wide = WordStarts::new(vec![
            (b"ghp_".to_vec(), true),
            ("aé_".as_bytes().to_vec(), true),
        ])
        .expect("valid");
        for (text, passes) in [
            (&b"\xe7hp"[..], false),
            (b"gh\xf0", false),
            (b"ghp", true),
            ("aé".as_bytes(), true),
            (b"a\xff\xa0", true),
            (b"a\xc3_", false),
        ] {
            assert_eq!(
                bytes_pass(&wide.bytes, [text[0], text[1], text[2]]),
                passes,
                "{text:?}"
            );
        }
        let mut text = b"x \xe7hp_ gh\xf0_ a\xff\xa0_ ".repeat(8);
        text.extend_from_slice("aé_ ghp_".as_bytes());
        #[cfg(target_arch = "x86_64")]
        for base in 0..text.len() - 66 {
            let whole = (word_mask(&text, base), byte_mask(&wide.bytes, &text, base));
            if vbmi() {
                // SAFETY: the CPU has AVX-512 VBMI and BW, and 66 bytes follow `base`.
                let vector = unsafe { masks_vbmi(&ByteTables::new(&wide.bytes), &text, base) };
                assert_eq!(vector, whole, "at {base}");
            }
        }
        let aé = text.len() - "aé_ ghp_".len();
        assert_eq!(wide.find(&text, 0), Some((aé, 4)));
        assert_eq!(wide.find(&text, aé + 1), Some((aé + 5, 4)));
        // Across a chunk edge, and from inside a word.
        let long = format!("{}ghp_x {}zghp_", "a ".repeat(31), "b".repeat(70));
        assert_eq!(ws.find(long.as_bytes(), 0), Some((62, 4)));
        assert_eq!(ws.find(long.as_bytes(), 63), None);
        assert_eq!(ws.find(b"ghp_", 1), None);
        assert_eq!(ws.find(b"ghp_", 0), Some((0, 4)));
    }

    /// The first position at or after `from` where a literal starts, literal by
    /// literal: the reference of [`WordStarts::anywhere`].
    fn first_literal(literals: &[Literal], text: &[u8], from: usize) -> Option<(usize, usize)> {
        (from..text.len()).find_map(|at| {
            literals
                .iter()
                .filter(|(lit, exact)| match text.get(at..at + lit.len()) {
                    Some(part) if *exact => part == lit.as_slice(),
                    Some(part) => part.eq_ignore_ascii_case(lit),
                    None => false,
                })
                .map(|(lit, _)| lit.len())
                .min()
                .map(|n| (at, n))
        })
    }

    /// What each search of `ws` finds from `from` in `text`, by name: the portable
    /// ones (the nibble and the whole-byte test), `find`, and the vector ones the
    /// CPU runs.
    fn every_search(
        ws: &WordStarts,
        text: &[u8],
        from: usize,
    ) -> Vec<(&'static str, Option<(usize, usize)>)> {
        let nibbles = |text: &[u8], base| {
            (
                word_mask(text, base),
                pair_mask(&ws.low, &ws.high, text, base),
            )
        };
        let whole = |text: &[u8], base| (word_mask(text, base), byte_mask(&ws.bytes, text, base));
        let mut all = vec![
            ("find", ws.find(text, from)),
            ("nibbles", ws.find_with(text, from, nibbles)),
            ("whole bytes", ws.find_with(text, from, whole)),
        ];
        #[cfg(target_arch = "x86_64")]
        {
            if std::is_x86_feature_detected!("avx2") {
                // SAFETY: the CPU has AVX2.
                all.push(("avx2", unsafe { ws.find_avx2(text, from) }));
            }
            if std::is_x86_feature_detected!("avx512bw") {
                // SAFETY: the CPU has AVX-512BW.
                all.push(("avx512", unsafe { ws.find_avx512(text, from) }));
            }
            if vbmi() {
                // SAFETY: the CPU has AVX-512 VBMI and BW.
                all.push(("vbmi", unsafe { ws.find_vbmi(text, from) }));
            }
        }
        all
    }

    fn rest_literals() -> Vec<Literal> {
        ["-pass", "_pass", "pass", "auth", "token", "<add", "pwd"]
            .iter()
            .map(|l| (l.as_bytes().to_vec(), false))
            .chain([(b"\"auth\"".to_vec(), true)])
            .collect()
    }

    #[test]
    fn b30_literals_anywhere_are_found_inside_words_in_either_case() {
        let ws = WordStarts::anywhere(rest_literals()).expect("valid literals");
        let text = b"DB_PASSWORD=x \"AUTH\" \"auth\": oauth2 <Add key";
        let mut found = Vec::new();
        let mut from = 0;
        while let Some(hit) = ws.find(text, from) {
            found.push(hit);
            from = hit.0 + 1;
        }
        // `_PASS` and `PASS` inside a word; `"AUTH"` only in its own case, its
        // `AUTH` in any; `auth` inside `oauth2`; `<Add`.
        assert_eq!(
            found,
            vec![(2, 5), (3, 4), (15, 4), (21, 6), (22, 4), (30, 4), (36, 4)]
        );
        assert_eq!(found, {
            let mut all = Vec::new();
            let mut from = 0;
            while let Some(hit) = first_literal(&rest_literals(), text, from) {
                all.push(hit);
                from = hit.0 + 1;
            }
            all
        });
        // A literal shorter than three bytes is refused (the triggers never hold
        // one: `MIN_LITERAL_LEN`).
        assert!(WordStarts::anywhere(vec![(b"pw".to_vec(), false)]).is_none());
    }

    proptest::proptest! {
        /// Every search of [`WordStarts::anywhere`] (portable with nibbles and with
        /// whole bytes, AVX2, AVX-512BW, AVX-512 VBMI as the CPU has them) finds
        /// what testing each position finds.
        #[test]
        fn b30_literals_anywhere_are_found_as_a_position_by_position_test_finds_them(
            text in proptest::collection::vec(
                proptest::sample::select(b"pasPAStokenTOKEuhUHd_-<\"w \n\xf0\xe1".to_vec()),
                0..300,
            ),
            from in 0usize..300,
        ) {
            let literals = rest_literals();
            let ws = WordStarts::anywhere(literals.clone()).expect("valid literals");
            let from = from.min(text.len());
            let expected = first_literal(&literals, &text, from);
            for (search, found) in every_search(&ws, &text, from) {
                proptest::prop_assert_eq!(found, expected, "{}", search);
            }
        }

        /// The vector searches (AVX2, AVX-512BW, AVX-512 VBMI, as the CPU has them)
        /// and the whole-byte one find what the byte-by-byte one finds, from any
        /// position, in any text.
        #[test]
        fn b30_vector_word_start_searches_agree_with_the_scalar_one(
            text in proptest::collection::vec(
                proptest::sample::select(b"ghpskGHPSaut_-:. \n0x\x80\xe7\xf0oO".to_vec()),
                0..400,
            ),
            from in 0usize..400,
        ) {
            let ws = WordStarts::new(vec![
                (b"ghp_".to_vec(), true),
                (b"authorization".to_vec(), false),
                (b"sk-".to_vec(), true),
                (b"ghs_".to_vec(), true),
            ])
            .expect("valid literals");
            let from = from.min(text.len());
            let scalar = ws.find_with(&text, from, |text, base| {
                (word_mask(text, base), pair_mask(&ws.low, &ws.high, text, base))
            });
            for (search, found) in every_search(&ws, &text, from) {
                proptest::prop_assert_eq!(found, scalar, "{}", search);
            }
        }
    }
}
