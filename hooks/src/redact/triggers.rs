//! Where the built-in code families can start: the prefilter of the redactor.
//!
//! Clean output never enters the regex automaton; it costs this scan alone, so the
//! scan is built for speed. One ASCII-case-insensitive automaton over all trigger
//! literals (and one- or two-byte ones among them) defeats aho-corasick's vector
//! prefilter and runs at a few hundred MB/s, so the literals are split:
//! - token prefixes (`ghp_`, `sk-`, `AKIA`, ...), case-sensitive like their
//!   patterns, each at least three bytes: one packed (Teddy) search;
//! - header and URL scheme names (`authorization`, `x-api-key`, `postgres`, ...),
//!   case-insensitive like their patterns: one packed search over an ASCII-lowercased
//!   copy of the text (same offsets);
//! - `+`, the start of an E.164 phone number: `memchr`.
//!
//! Invariant: every position where a pattern of `families::code_patterns` can
//! match is a position this scan reports.

use aho_corasick::{AhoCorasick, Input, MatchKind};

use super::families;

/// The compiled trigger searchers.
#[derive(Debug, Clone)]
pub(super) struct Triggers {
    tokens: AhoCorasick,
    headers: AhoCorasick,
}

impl Triggers {
    pub(super) fn new() -> Triggers {
        let build = |literals: Vec<&'static str>| {
            AhoCorasick::builder()
                .match_kind(MatchKind::LeftmostFirst)
                .build(literals)
                .expect("the trigger literals are a small fixed set")
        };
        Triggers {
            tokens: build(families::token_triggers()),
            headers: build(families::header_triggers()),
        }
    }

    /// A scan of `text` that yields trigger starts in order.
    pub(super) fn scan<'t>(&'t self, text: &'t str) -> Scan<'t> {
        let bytes = text.as_bytes();
        // Header and URL patterns need a `:` or `=`; most short texts have none.
        let lower = memchr::memchr2(b':', b'=', bytes).map(|_| bytes.to_ascii_lowercase());
        Scan {
            triggers: self,
            text,
            lower,
            next: [Next::Unknown; 3],
        }
    }
}

/// The next hit of one searcher at or after the scan's position.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    Unknown,
    At(usize, usize),
    None,
}

/// One scan over a text (see [`Triggers::scan`]).
#[derive(Debug)]
pub(super) struct Scan<'t> {
    triggers: &'t Triggers,
    text: &'t str,
    lower: Option<Vec<u8>>,
    /// Cached next hits of the token, header and `+` searchers.
    next: [Next; 3],
}

impl Scan<'_> {
    /// The first trigger starting at or after `pos`: its start and length.
    pub(super) fn next_from(&mut self, pos: usize) -> Option<(usize, usize)> {
        let len = self.text.len();
        if pos >= len {
            return None;
        }
        for idx in 0..3 {
            let stale = match self.next[idx] {
                Next::Unknown => true,
                Next::At(at, _) => at < pos,
                Next::None => false,
            };
            if !stale {
                continue;
            }
            self.next[idx] = match idx {
                0 => self
                    .triggers
                    .tokens
                    .find(Input::new(self.text).span(pos..len))
                    .map_or(Next::None, |m| Next::At(m.start(), m.len())),
                1 => match &self.lower {
                    Some(lower) => self
                        .triggers
                        .headers
                        .find(Input::new(lower.as_slice()).span(pos..len))
                        .map_or(Next::None, |m| Next::At(m.start(), m.len())),
                    None => Next::None,
                },
                _ => memchr::memchr(b'+', &self.text.as_bytes()[pos..])
                    .map_or(Next::None, |idx| Next::At(pos + idx, 1)),
            };
        }
        self.next
            .iter()
            .filter_map(|n| match n {
                Next::At(at, len) => Some((*at, *len)),
                _ => None,
            })
            .min()
    }
}
