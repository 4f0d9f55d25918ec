//! The rare literals some side scanners start from, found in one packed pass over
//! the text instead of one `memmem` pass each:
//! - `_mmk`, the end of a MaxMind license key, and `-us`, the data centre suffix of
//!   a Mailchimp API key (`suffixed`);
//! - `password`, the word every `.netrc` line the netrc scanner masks holds
//!   (`providers::files`);
//! - `\n+ ` and `\n++`, the start of a line a shell traced (`set -x`; `echoed`),
//!   three bytes each rather than `\n+`, so that the packed search tests three-byte
//!   fingerprints (every literal has three), which lets fewer candidates through;
//! - `]$ ` and `]# `, the end of a bracketed prompt (`echoed`);
//! - `-Lines: ` and `LS0tLS1C`, the needles of PuTTY key files and of PEM blocks in
//!   base64, two of the private-key markers (`keys::spans_found`).
//!
//! No suffix of one literal is a prefix of another or of itself, so two hits
//! never overlap and the packed search's non-overlapping hits are all of them.

use aho_corasick::packed::{Config, MatchKind, Searcher};

/// What a hit is a hit of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Rare {
    MaxMind,
    Mailchimp,
    Password,
    Traced,
    PromptEnd,
    PuttyLines,
    EncodedPem,
}

/// The literals, in the order of their [`Rare`] names.
const LITERALS: [(&[u8], Rare); 9] = [
    (b"_mmk", Rare::MaxMind),
    (b"-us", Rare::Mailchimp),
    (b"password", Rare::Password),
    (b"\n+ ", Rare::Traced),
    (b"\n++", Rare::Traced),
    (b"]$ ", Rare::PromptEnd),
    (b"]# ", Rare::PromptEnd),
    (super::keys::PPK_NEEDLE, Rare::PuttyLines),
    (super::keys::ENCODED_NEEDLE, Rare::EncodedPem),
];

/// The hits of a text, in order: each literal's start.
#[derive(Debug, Default)]
pub(super) struct RareHits(Vec<(usize, Rare)>);

impl RareHits {
    /// Every hit in `bytes`.
    pub(super) fn find(bytes: &[u8]) -> RareHits {
        static SEARCHER: std::sync::OnceLock<Option<Searcher>> = std::sync::OnceLock::new();
        let searcher = SEARCHER.get_or_init(|| {
            Config::new()
                .match_kind(MatchKind::LeftmostFirst)
                .builder()
                .extend(LITERALS.iter().map(|(lit, _)| lit))
                .build()
        });
        let hits = match searcher {
            Some(searcher) => searcher
                .find_iter(bytes)
                .map(|m| (m.start(), LITERALS[m.pattern().as_usize()].1))
                .collect(),
            // No packed searcher on this target: one pass per literal.
            None => {
                let mut hits: Vec<(usize, Rare)> = LITERALS
                    .iter()
                    .flat_map(|(lit, rare)| {
                        memchr::memmem::find_iter(bytes, lit).map(|at| (at, *rare))
                    })
                    .collect();
                hits.sort_unstable_by_key(|(at, _)| *at);
                hits
            }
        };
        RareHits(hits)
    }

    /// The starts of the hits of `rare`, in order, as a list.
    pub(super) fn list(&self, rare: Rare) -> Vec<usize> {
        self.of(rare).collect()
    }

    /// The starts of the hits of `rare`, in order.
    pub(super) fn of(&self, rare: Rare) -> impl Iterator<Item = usize> + '_ {
        self.0
            .iter()
            .filter(move |(_, r)| *r == rare)
            .map(|(at, _)| *at)
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::{LITERALS, RareHits};

    proptest! {
        /// Every occurrence of every literal is a hit, and nothing else is.
        #[test]
        fn b30_rare_hits_are_every_occurrence(
            text in proptest::collection::vec(
                proptest::sample::select(b"_mk-uspaword\n+ xLine: S0t1C$#]".to_vec()),
                0..3000,
            )
        ) {
            let hits = RareHits::find(&text);
            for (_, rare) in LITERALS {
                // Every occurrence of every literal standing for `rare`, in order.
                let mut want: Vec<usize> = LITERALS
                    .iter()
                    .filter(|(_, r)| *r == rare)
                    .flat_map(|(lit, _)| memchr::memmem::find_iter(&text, lit))
                    .collect();
                want.sort_unstable();
                let got: Vec<usize> = hits.of(rare).collect();
                prop_assert_eq!(got, want);
            }
        }
    }
}
