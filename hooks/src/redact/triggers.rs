//! Where the patterns of a set can start: the prefilter of the redactor, derived
//! from the patterns themselves once, when the redactor is built.
//!
//! Clean output never enters the regex automaton; it costs this scan alone, so the
//! scan is built for speed. One ASCII-case-insensitive automaton over all trigger
//! literals (and one- or two-byte ones among them) defeats aho-corasick's vector
//! prefilter and runs at a few hundred MB/s, so each pattern's triggers go to one
//! of four searchers:
//! - `Tokens`: the pattern's prefix literals as written (regex-syntax's
//!   `hir::literal::Extractor`), case-sensitive, each at least
//!   [`MIN_LITERAL_LEN`] bytes (`ghp_`, `sk-`, `AKIA`, ...): one packed (Teddy)
//!   search over all of them;
//! - `Lowered`: the prefix literals of the pattern's ASCII-lowercased image, for
//!   case-insensitive patterns whose literals as written are too many
//!   (`authorization`, `x-api-key`, `postgres://`, ...): one packed search over an
//!   ASCII-lowercased copy of the text (same offsets). The copy is made only when
//!   the text holds one of the bytes every match of these patterns must contain
//!   (derived too: `:` or `=` for the built-in headers and URLs);
//! - `Bytes`: a pattern whose literals are shorter than that (the `+` of an E.164
//!   phone number) but start with at most [`MAX_BYTES`] distinct bytes: `memchr`;
//! - `Always`: a pattern with no usable literal (it can start with too many
//!   strings, or with anything): it always runs, unanchored over the whole text, and
//!   each of its match starts is a trigger.
//!
//! A pattern set's literals are prefixes of its matches (the extractor's own
//! guarantee; a literal may be cut shorter, never longer), so the invariant holds
//! by construction, and the agreement tests check it on generated matches: every
//! position where a pattern of the set can match is a position this scan reports.
//! The redactor runs its automaton anchored only at those positions.

use aho_corasick::packed::{self, Searcher};
use regex_automata::meta;
use regex_syntax::hir::literal::{ExtractKind, Extractor};
use regex_syntax::hir::{
    Capture, Class, ClassBytes, ClassBytesRange, ClassUnicode, ClassUnicodeRange, Hir, HirKind,
    Repetition,
};

use crate::Error;

mod starts;
use starts::{Literal, WordStarts, is_word};

/// The shortest literal a packed search takes (shorter ones defeat it).
pub(super) const MIN_LITERAL_LEN: usize = 3;

/// The most literals one pattern may bring; more are cut shorter until they fit
/// (a packed search holds 64 in all).
pub(super) const MAX_LITERALS_PER_PATTERN: usize = 64;

/// The most distinct first bytes the `memchr` searcher takes (`memchr3`).
pub(super) const MAX_BYTES: usize = 3;

/// The most bytes a gate holds (see [`required_bytes`]): one `memchr3` and one
/// `memchr2` tell whether a text holds one. The secret-named family needs five:
/// an assignment's `:` or `=`, an XML element's `>`, the space after a flag, the
/// comma after one in an argument list.
pub(super) const MAX_GATE_BYTES: usize = 5;

/// Literals of one pattern that agree on this many first bytes are cut to their
/// longest common prefix: `authorization` instead of `authorization:`,
/// `authorization "`, ... (the extractor goes on through small classes such as
/// `["']?[ \t]*[:=]`), `postgres` for `postgres://` and `postgresql://`. Four
/// keeps the vendor prefixes apart (`xoxa-`, `xoxb-`; `sk_live_`, `sk_test_`).
pub(super) const GROUP_LEN: usize = 4;

/// How one pattern is found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Trigger {
    /// Starts with one of these literals (case-sensitive).
    Tokens(Vec<Vec<u8>>),
    /// Its ASCII-lowercased match starts with one of these literals.
    Lowered(Vec<Vec<u8>>),
    /// Starts with one of these bytes.
    Bytes(Vec<u8>),
    /// No usable literal: searched unanchored over the whole text.
    Always,
}

/// The compiled trigger searchers of one pattern set.
#[derive(Debug, Clone)]
pub(super) struct Triggers {
    /// One packed searcher per [`PACKED_LITERALS`] token literals (a packed
    /// search holds no more; two fast passes beat one slow one).
    tokens: Vec<Searcher>,
    lowered: Vec<Searcher>,
    /// The copy for `lowered` is made only when the text holds one of these bytes
    /// (`None`: always).
    gate: Option<Vec<u8>>,
    bytes: Vec<u8>,
    /// The patterns that always run.
    always: Option<meta::Regex>,
    /// The searchers of [`Triggers::scan_starts`] (`None`: it is [`Triggers::scan`]).
    fast: Option<Fast>,
    /// Each pattern's trigger, in the set's order.
    #[cfg(test)]
    plan: Vec<Trigger>,
}

/// The searchers of the scan for match starts: the literals of the patterns that
/// start at a word start in one [`WordStarts`], the others in one more that looks
/// at every position ([`WordStarts::anywhere`]), both over the text as written
/// (both cases of a case-insensitive literal in their tables, verified so). The
/// second replaced packed (fat Teddy) searches over an ASCII-lowercased copy of
/// the text: no copy is made, and the redactor's throughput rose 12% on the e2e
/// bench's log line and 7% on clean logs.
#[derive(Debug, Clone)]
struct Fast {
    starts: Option<WordStarts>,
    rest: Option<WordStarts>,
    /// `rest` is searched only when the text holds one of these bytes (`None`:
    /// always): every match of its patterns holds one.
    gate: Option<Vec<u8>>,
}

impl Triggers {
    /// Derives the triggers of `patterns` (each already accepted by the regex
    /// engine).
    ///
    /// # Errors
    ///
    /// `Error::Automaton` when the automaton of the patterns that always run cannot
    /// be built.
    pub(super) fn derive(patterns: &[&str]) -> Result<Triggers, Error> {
        let hirs: Vec<Option<Hir>> = patterns
            .iter()
            .map(|p| regex_syntax::parse(p).ok())
            .collect();
        let mut plan: Vec<Trigger> = hirs
            .iter()
            .map(|h| h.as_ref().map_or(Trigger::Always, plan_one))
            .collect();
        // The `memchr` searcher takes at most `MAX_BYTES` bytes in all.
        let mut bytes: Vec<u8> = Vec::new();
        for trigger in &mut plan {
            if let Trigger::Bytes(own) = trigger {
                let mut union = bytes.clone();
                union.extend_from_slice(own);
                union.sort_unstable();
                union.dedup();
                if union.len() <= MAX_BYTES {
                    bytes = union;
                } else {
                    *trigger = Trigger::Always;
                }
            }
        }
        let tokens = packed_searchers(&mut plan, |t| matches!(t, Trigger::Tokens(_)));
        let lowered = packed_searchers(&mut plan, |t| matches!(t, Trigger::Lowered(_)));
        // The lowered copy's gate: a few bytes every lowered pattern's match holds.
        let gate = if !lowered.is_empty() {
            let mut gate = Vec::new();
            let mut all = true;
            for (trigger, hir) in plan.iter().zip(&hirs) {
                if let (Trigger::Lowered(_), Some(hir)) = (trigger, hir) {
                    match required_bytes(hir) {
                        Some(set) => gate.extend(set),
                        None => all = false,
                    }
                }
            }
            gate.sort_unstable();
            gate.dedup();
            (all && gate.len() <= MAX_GATE_BYTES).then_some(gate)
        } else {
            None
        };
        let always_patterns: Vec<&str> = plan
            .iter()
            .zip(patterns)
            .filter(|(t, _)| **t == Trigger::Always)
            .map(|(_, p)| *p)
            .collect();
        let always = if always_patterns.is_empty() {
            None
        } else {
            Some(
                meta::Regex::new_many(&always_patterns).map_err(|source| Error::Automaton {
                    source: Box::new(source),
                })?,
            )
        };
        let fast = Fast::derive(&plan, &hirs);
        Ok(Triggers {
            tokens,
            lowered,
            gate,
            bytes,
            always,
            fast,
            #[cfg(test)]
            plan,
        })
    }

    /// Each pattern's trigger, in the set's order.
    #[cfg(test)]
    pub(super) fn plan(&self) -> &[Trigger] {
        &self.plan
    }

    /// A scan of `text` that yields trigger starts in order.
    pub(super) fn scan<'t>(&'t self, text: &'t str) -> Scan<'t> {
        let bytes = text.as_bytes();
        let lower = match (self.lowered.is_empty(), &self.gate) {
            (true, _) => None,
            (false, None) => Some(bytes.to_ascii_lowercase()),
            (false, Some(gate)) => holds_any(gate, bytes).then(|| bytes.to_ascii_lowercase()),
        };
        Scan {
            triggers: self,
            fast: None,
            text,
            lower,
            next: vec![Next::Unknown; 2 + self.tokens.len() + self.lowered.len()],
        }
    }

    /// A scan of `text` that yields, in order, a superset of the positions where a
    /// pattern of the set can start a match in `text` (searched as a whole: a word
    /// boundary before the text's first byte holds). Unlike [`Self::scan`] it
    /// skips a literal inside a word when every match of its pattern starts at a
    /// word start; the literal lengths it yields are not those of `scan`.
    pub(super) fn scan_starts<'t>(&'t self, text: &'t str) -> Scan<'t> {
        let Some(fast) = &self.fast else {
            return self.scan(text);
        };
        let bytes = text.as_bytes();
        // The rest's patterns all need a byte of the gate: without one, none runs
        // (its searcher's next hit is known to be none).
        let rest_open = fast.gate.as_ref().is_none_or(|gate| holds_any(gate, bytes));
        let rest = if rest_open { Next::Unknown } else { Next::None };
        Scan {
            triggers: self,
            fast: Some(fast),
            text,
            lower: None,
            next: vec![Next::Unknown, Next::Unknown, Next::Unknown, rest],
        }
    }
}

impl Fast {
    /// The searchers of the scan for match starts of the patterns planned as
    /// `plan` (`hirs` their parsed forms); `None` when one cannot be built.
    fn derive(plan: &[Trigger], hirs: &[Option<Hir>]) -> Option<Fast> {
        let mut at_words: Vec<Literal> = Vec::new();
        let mut others: Vec<Literal> = Vec::new();
        let mut gate: Vec<u8> = Vec::new();
        let mut all_gated = true;
        for (trigger, hir) in plan.iter().zip(hirs) {
            let (lits, exact) = match trigger {
                Trigger::Tokens(lits) => (lits, true),
                Trigger::Lowered(lits) => (lits, false),
                _ => continue,
            };
            let at_word = hir.as_ref().is_some_and(starts_at_word)
                && lits.iter().all(|l| l.first().copied().is_some_and(is_word));
            let own = lits.iter().map(|l| (l.clone(), exact));
            if at_word {
                at_words.extend(own);
            } else {
                others.extend(own);
                match hir.as_ref().and_then(required_bytes) {
                    Some(set) => gate.extend(set),
                    None => all_gated = false,
                }
            }
        }
        let starts = if at_words.is_empty() {
            None
        } else {
            Some(WordStarts::new(at_words)?)
        };
        // Each literal is at least `MIN_LITERAL_LEN` bytes long (`plan_one`): only
        // an empty list is refused.
        let rest = if others.is_empty() {
            None
        } else {
            Some(WordStarts::anywhere(others)?)
        };
        gate.sort_unstable();
        gate.dedup();
        Some(Fast {
            starts,
            rest,
            gate: (all_gated && gate.len() <= MAX_GATE_BYTES).then_some(gate),
        })
    }
}

/// Whether every match of `hir` starts with a word-boundary assertion (so a match
/// whose first byte is a word byte starts where the byte before is none).
fn starts_at_word(hir: &Hir) -> bool {
    use regex_syntax::hir::Look;
    match hir.kind() {
        HirKind::Look(look) => matches!(
            look,
            Look::WordAscii
                | Look::WordUnicode
                | Look::WordStartAscii
                | Look::WordStartUnicode
                | Look::WordStartHalfAscii
                | Look::WordStartHalfUnicode
        ),
        HirKind::Concat(subs) => subs.first().is_some_and(starts_at_word),
        HirKind::Capture(cap) => starts_at_word(&cap.sub),
        HirKind::Alternation(subs) => subs.iter().all(starts_at_word),
        _ => false,
    }
}

/// The trigger of one pattern (before the set's limits apply).
fn plan_one(hir: &Hir) -> Trigger {
    let written = prefixes(hir);
    let lowered = prefixes(&ascii_lowercase(hir));
    let usable = |lits: &Option<Vec<Vec<u8>>>| match lits {
        Some(lits) if lits.iter().all(|l| l.len() >= MIN_LITERAL_LEN) => Some(lits.len()),
        _ => None,
    };
    match (usable(&written), usable(&lowered)) {
        (Some(n_written), Some(n_lowered)) if n_lowered < n_written => {
            Trigger::Lowered(lowered.unwrap_or_default())
        }
        (Some(_), _) => Trigger::Tokens(written.unwrap_or_default()),
        (None, Some(_)) => Trigger::Lowered(lowered.unwrap_or_default()),
        (None, None) => match written {
            Some(lits) if !lits.is_empty() && lits.iter().all(|l| !l.is_empty()) => {
                let mut first: Vec<u8> = lits.iter().map(|l| l[0]).collect();
                first.sort_unstable();
                first.dedup();
                if first.len() <= MAX_BYTES {
                    Trigger::Bytes(first)
                } else {
                    Trigger::Always
                }
            }
            _ => Trigger::Always,
        },
    }
}

/// The prefix literals of `hir`, prefix-free, at most
/// [`MAX_LITERALS_PER_PATTERN`] (cut shorter until they fit); `None` when a match
/// can start with anything (the extractor's infinite sequence). Empty: the
/// pattern matches nothing.
fn prefixes(hir: &Hir) -> Option<Vec<Vec<u8>>> {
    let seq = Extractor::new().kind(ExtractKind::Prefix).extract(hir);
    let mut lits: Vec<Vec<u8>> = seq
        .literals()?
        .iter()
        .map(|l| l.as_bytes().to_vec())
        .collect();
    prefix_free(&mut lits);
    cut_groups(&mut lits);
    while lits.len() > MAX_LITERALS_PER_PATTERN {
        let longest = lits.iter().map(Vec::len).max().unwrap_or(0);
        if longest <= 1 {
            return None;
        }
        for lit in &mut lits {
            lit.truncate(longest - 1);
        }
        prefix_free(&mut lits);
        cut_groups(&mut lits);
    }
    Some(lits)
}

/// Sorts `lits` and drops each one that another one is a prefix of (a match
/// starting with the longer one starts with the shorter one).
fn prefix_free(lits: &mut Vec<Vec<u8>>) {
    lits.sort_unstable();
    lits.dedup();
    let mut kept: Vec<Vec<u8>> = Vec::with_capacity(lits.len());
    for lit in lits.drain(..) {
        // Sorted: a kept prefix of `lit` is the last one kept.
        if kept.last().is_some_and(|last| lit.starts_with(last)) {
            continue;
        }
        kept.push(lit);
    }
    *lits = kept;
}

/// Cuts the literals sharing their first [`GROUP_LEN`] bytes to the group's
/// longest common prefix (a prefix of a prefix of every match is one too).
/// `lits` is sorted and prefix-free, and stays so.
fn cut_groups(lits: &mut Vec<Vec<u8>>) {
    let mut out: Vec<Vec<u8>> = Vec::with_capacity(lits.len());
    for lit in lits.drain(..) {
        match out.last_mut() {
            Some(last)
                if last.len() >= GROUP_LEN
                    && lit.len() >= GROUP_LEN
                    && last[..GROUP_LEN] == lit[..GROUP_LEN] =>
            {
                let common = last.iter().zip(&lit).take_while(|(a, b)| a == b).count();
                last.truncate(common);
            }
            _ => out.push(lit),
        }
    }
    *lits = out;
}

/// The most literals one packed (Teddy) searcher holds.
pub(super) const PACKED_LITERALS: usize = 64;

/// The packed searchers over the literals of the patterns `in_group` selects,
/// [`PACKED_LITERALS`] at a time. If one cannot be built, those patterns always
/// run instead.
fn packed_searchers(plan: &mut [Trigger], in_group: impl Fn(&Trigger) -> bool) -> Vec<Searcher> {
    let mut lits: Vec<Vec<u8>> = plan
        .iter()
        .filter(|t| in_group(t))
        .flat_map(|t| match t {
            Trigger::Tokens(l) | Trigger::Lowered(l) => l.clone(),
            _ => Vec::new(),
        })
        .collect();
    prefix_free(&mut lits);
    let mut searchers = Vec::new();
    for chunk in packed_groups(lits) {
        match packed_searcher(&chunk) {
            Some(searcher) => searchers.push(searcher),
            None => {
                tracing::warn!(
                    "redaction trigger literals cannot be packed; those patterns run over the whole text"
                );
                for t in plan.iter_mut().filter(|t| in_group(t)) {
                    *t = Trigger::Always;
                }
                return Vec::new();
            }
        }
    }
    searchers
}

/// `lits` (prefix-free) in the groups of one packed searcher each, at most
/// [`PACKED_LITERALS`] a group.
fn packed_groups(mut lits: Vec<Vec<u8>>) -> Vec<Vec<Vec<u8>>> {
    // Which literals share a searcher decides its speed: a packed search tells
    // candidates apart by the first three bytes, bucket by bucket, and verifies
    // every literal of a bucket whose bytes all fit. Literals sorted by those bytes
    // read backwards (the third byte first) share buckets with literals that end
    // their prefix alike (`ghp_`, `npm_`, `brv_`; `sk-`, `fc-`), which log text
    // fits far less often than literals that merely start alike (`gh…`, `sk…`):
    // measured, the token searchers ran 1.5x faster than in plain sorted order.
    //
    // And a packed search compares as many first bytes as its shortest literal
    // has (up to four): the three-byte literals (`sk-`, `hf_`, `eyJ`) go first and
    // get searchers of their own, so the others compare four bytes, which log text
    // fits far less often than three (a searcher of 30 three-byte and 34 longer
    // literals cost 1.5x one of four-byte literals: more candidates to verify). A
    // group of 32 or fewer is a slim searcher, which reads twice the bytes a step.
    lits.sort_by(|a, b| {
        let key = |l: &[u8]| l.iter().take(3).rev().copied().collect::<Vec<u8>>();
        (a.len() > MIN_LITERAL_LEN, key(a))
            .cmp(&(b.len() > MIN_LITERAL_LEN, key(b)))
            .then_with(|| a.cmp(b))
    });
    let n_short = lits.partition_point(|l| l.len() <= MIN_LITERAL_LEN);
    let (short, long) = lits.split_at(n_short);
    short
        .chunks(PACKED_LITERALS)
        .chain(long.chunks(PACKED_LITERALS))
        .map(<[Vec<u8>]>::to_vec)
        .collect()
}

/// The packed searcher itself (Teddy, verifying its own candidates), not an
/// automaton behind it as a prefilter: a trigger is only a literal.
fn packed_searcher(lits: &[Vec<u8>]) -> Option<Searcher> {
    packed::Config::new()
        .match_kind(packed::MatchKind::LeftmostFirst)
        .builder()
        .extend(lits)
        .build()
}

/// The pattern's image under ASCII lowercasing: every match of `hir`, lowercased,
/// is a match of the image (the text the `Lowered` searcher sees).
fn ascii_lowercase(hir: &Hir) -> Hir {
    match hir.kind() {
        HirKind::Empty => Hir::empty(),
        HirKind::Literal(lit) => Hir::literal(lit.0.to_ascii_lowercase()),
        HirKind::Class(Class::Unicode(class)) => {
            let upper = ClassUnicode::new([ClassUnicodeRange::new('A', 'Z')]);
            let mut shifted = class.clone();
            shifted.intersect(&upper);
            let mut image = class.clone();
            image.difference(&upper);
            image.union(&ClassUnicode::new(shifted.ranges().iter().map(|r| {
                ClassUnicodeRange::new(r.start().to_ascii_lowercase(), r.end().to_ascii_lowercase())
            })));
            Hir::class(Class::Unicode(image))
        }
        HirKind::Class(Class::Bytes(class)) => {
            let upper = ClassBytes::new([ClassBytesRange::new(b'A', b'Z')]);
            let mut shifted = class.clone();
            shifted.intersect(&upper);
            let mut image = class.clone();
            image.difference(&upper);
            image.union(&ClassBytes::new(shifted.ranges().iter().map(|r| {
                ClassBytesRange::new(r.start().to_ascii_lowercase(), r.end().to_ascii_lowercase())
            })));
            Hir::class(Class::Bytes(image))
        }
        // Lowercasing keeps every byte's class (word or not, line break or not).
        HirKind::Look(look) => Hir::look(*look),
        HirKind::Repetition(rep) => Hir::repetition(Repetition {
            min: rep.min,
            max: rep.max,
            greedy: rep.greedy,
            sub: Box::new(ascii_lowercase(&rep.sub)),
        }),
        HirKind::Capture(cap) => Hir::capture(Capture {
            index: cap.index,
            name: cap.name.clone(),
            sub: Box::new(ascii_lowercase(&cap.sub)),
        }),
        HirKind::Concat(subs) => Hir::concat(subs.iter().map(ascii_lowercase).collect()),
        HirKind::Alternation(subs) => Hir::alternation(subs.iter().map(ascii_lowercase).collect()),
    }
}

/// At most [`MAX_GATE_BYTES`] bytes one of which every match of `hir` contains,
/// preferring punctuation (rarer in text than letters); `None` when there are
/// none so few.
pub(super) fn required_bytes(hir: &Hir) -> Option<Vec<u8>> {
    let class_bytes = |ranges: &mut dyn Iterator<Item = (u32, u32)>| {
        let mut out = Vec::new();
        for (start, end) in ranges {
            if end > 0x7f || end - start >= MAX_GATE_BYTES as u32 || out.len() > MAX_GATE_BYTES {
                return None;
            }
            out.extend((start..=end).filter_map(|b| u8::try_from(b).ok()));
        }
        (!out.is_empty() && out.len() <= MAX_GATE_BYTES).then_some(out)
    };
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => None,
        HirKind::Literal(lit) => {
            let pick = lit
                .0
                .iter()
                .find(|b| !b.is_ascii_alphanumeric())
                .or(lit.0.first());
            pick.map(|b| vec![*b])
        }
        HirKind::Class(Class::Unicode(class)) => class_bytes(
            &mut class
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end()))),
        ),
        HirKind::Class(Class::Bytes(class)) => class_bytes(
            &mut class
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end()))),
        ),
        HirKind::Repetition(rep) if rep.min >= 1 => required_bytes(&rep.sub),
        HirKind::Repetition(_) => None,
        HirKind::Capture(cap) => required_bytes(&cap.sub),
        HirKind::Concat(subs) => subs
            .iter()
            .filter_map(required_bytes)
            // An assignment's `:` or `=` first (every header and URL family shares
            // them, so the gate stays small), then the rarest-looking set.
            .min_by_key(|set| {
                (
                    !set.iter().all(|b| matches!(b, b':' | b'=')),
                    set.iter().any(u8::is_ascii_alphanumeric),
                    set.len(),
                )
            }),
        HirKind::Alternation(subs) => {
            let mut union = Vec::new();
            for sub in subs {
                union.extend(required_bytes(sub)?);
            }
            union.sort_unstable();
            union.dedup();
            (union.len() <= MAX_GATE_BYTES).then_some(union)
        }
    }
}

/// Whether `bytes` holds one of `gate` (at most [`MAX_GATE_BYTES`] bytes).
fn holds_any(gate: &[u8], bytes: &[u8]) -> bool {
    match gate.split_at_checked(MAX_BYTES) {
        Some((three, rest)) if !rest.is_empty() => {
            any_byte(three, bytes, 0).is_some() || any_byte(rest, bytes, 0).is_some()
        }
        _ => any_byte(gate, bytes, 0).is_some(),
    }
}

/// The first position at or after `from` holding one of `set` (at most three bytes).
fn any_byte(set: &[u8], bytes: &[u8], from: usize) -> Option<usize> {
    let hay = &bytes[from..];
    let found = match *set {
        [a] => memchr::memchr(a, hay),
        [a, b] => memchr::memchr2(a, b, hay),
        [a, b, c] => memchr::memchr3(a, b, c, hay),
        _ => None,
    };
    found.map(|idx| from + idx)
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
    /// Set for a scan of match starts ([`Triggers::scan_starts`]).
    fast: Option<&'t Fast>,
    text: &'t str,
    /// The ASCII-lowercased text the lowered searchers read (a plain scan only).
    lower: Option<Vec<u8>>,
    /// Cached next hits of the byte and always searchers, then of each token
    /// searcher, then of each lowered one (a scan of match starts: of the
    /// word-start searcher, then of the rest's).
    next: Vec<Next>,
}

impl Scan<'_> {
    /// The first trigger starting at or after `pos`: its start and length (the
    /// literal's; a byte's is 1, a match start of a pattern that always runs 0).
    pub(super) fn next_from(&mut self, pos: usize) -> Option<(usize, usize)> {
        let len = self.text.len();
        if pos >= len {
            return None;
        }
        let t = self.triggers;
        for idx in 0..self.next.len() {
            let stale = match self.next[idx] {
                Next::Unknown => true,
                Next::At(at, _) => at < pos,
                Next::None => false,
            };
            if !stale {
                continue;
            }
            let n_tokens = t.tokens.len();
            let hit = match (self.fast, idx) {
                (_, 0) => any_byte(&t.bytes, self.text.as_bytes(), pos).map(|at| (at, 1)),
                (_, 1) => t.always.as_ref().and_then(|re| {
                    re.search(&regex_automata::Input::new(self.text).span(pos..len))
                        .map(|m| (m.start(), 0))
                }),
                (Some(fast), 2 | 3) => if idx == 2 { &fast.starts } else { &fast.rest }
                    .as_ref()
                    .and_then(|ws| ws.find(self.text.as_bytes(), pos)),
                (Some(_), _) => None,
                (None, n) if n < 2 + n_tokens => t.tokens.get(n - 2).and_then(|ac| {
                    ac.find_in(self.text, aho_corasick::Span::from(pos..len))
                        .map(|m| (m.start(), m.len()))
                }),
                (None, n) => match (t.lowered.get(n - 2 - n_tokens), &self.lower) {
                    (Some(ac), Some(lower)) => ac
                        .find_in(lower.as_slice(), aho_corasick::Span::from(pos..len))
                        .map(|m| (m.start(), m.len())),
                    _ => None,
                },
            };
            self.next[idx] = hit.map_or(Next::None, |(at, n)| Next::At(at, n));
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

#[cfg(test)]
mod tests;
