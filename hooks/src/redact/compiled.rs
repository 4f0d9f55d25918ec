//! One compiled automaton of redaction patterns and its search anchored at the
//! starts its trigger literals report.

use regex_automata::{Anchored, Input, meta};

use super::{Kind, triggers, visible};
use crate::Error;

/// One match found before the overlaps are resolved: start, priority (lower wins
/// a tie), end, kind, and its replacement when already made.
pub(super) type Candidate<'k> = (usize, u8, usize, &'k Kind, Option<String>);

/// One compiled automaton with the kind of each of its patterns.
#[derive(Debug, Clone)]
pub(super) struct Compiled {
    pub(super) re: meta::Regex,
    pub(super) kinds: Vec<Kind>,
    patterns: Vec<String>,
}

impl Compiled {
    pub(super) fn build(patterns: &[(String, Kind)]) -> Result<Compiled, Error> {
        let re =
            meta::Regex::new_many(&patterns.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>())
                .map_err(|source| Error::Automaton {
                    source: Box::new(source),
                })?;
        Ok(Compiled {
            re,
            kinds: patterns.iter().map(|(_, k)| k.clone()).collect(),
            patterns: patterns.iter().map(|(p, _)| p.clone()).collect(),
        })
    }

    /// Where these patterns can start, derived from them.
    pub(super) fn triggers(&self) -> Result<triggers::Triggers, Error> {
        triggers::Triggers::derive(&self.patterns.iter().map(String::as_str).collect::<Vec<_>>())
    }

    /// Every match in `text` (leftmost-first, as `re.find_iter` finds them),
    /// found by running `re` anchored only where `triggers` (derived from these
    /// patterns) report a possible start. Clean text costs the trigger scan alone.
    ///
    /// `map` is the visible copy's map onto the original (see `visible::strip`):
    /// where hidden bytes were removed just before a trigger (an escape, a
    /// backspace that overwrote a character), the text before it was written
    /// apart from it, so that seam counts as a word boundary (`e ESC SP g\bghp_…`
    /// shows `ghp_…` written over the `e`). So does a line end or a tab spelled
    /// out in a string just before it (`"…\nghp_…"`, a JSON log's message).
    /// A match whose replacement (`replace`) declines is left out, the search
    /// going on inside it; the others are pushed with their replacement (made once).
    pub(super) fn anchored_matches<'s>(
        &'s self,
        triggers: &triggers::Triggers,
        text: &str,
        map: Option<&[usize]>,
        priority: u8,
        out: &mut Vec<Candidate<'s>>,
        replace: fn(&Kind, &str, &str) -> Option<String>,
    ) {
        let mut pos = 0;
        // With a map, a trigger just after removed bytes is searched as the start of
        // the rest (a seam counts as a word boundary), and so is one just after a
        // line end spelled in a string (`\nghp_…`): every literal, even inside a
        // word, is a trigger then.
        let mut scan = if map.is_some() || visible::has_spelled_break(text.as_bytes()) {
            triggers.scan(text)
        } else {
            triggers.scan_starts(text)
        };
        while pos < text.len() {
            let Some((at, _)) = scan.next_from(pos) else {
                break;
            };
            let input = Input::new(text)
                .span(at..text.len())
                .anchored(Anchored::Yes);
            let found = match self.re.search(&input) {
                Some(m) if m.end() > m.start() => Some((m.start(), m.end(), m.pattern())),
                _ if seam(map, at) || visible::spelled_break_before(text.as_bytes(), at) => {
                    let input = Input::new(&text[at..]).anchored(Anchored::Yes);
                    self.re
                        .search(&input)
                        .filter(|m| m.end() > m.start())
                        .map(|m| (at + m.start(), at + m.end(), m.pattern()))
                }
                _ => None,
            };
            let kept = found.and_then(|(start, end, pattern)| {
                let kind = &self.kinds[pattern.as_usize()];
                // A declined match (a reference, a template) hides nothing.
                replace(kind, &text[start..end], &text[..start])
                    .map(|with| (start, end, kind, with))
            });
            match kept {
                Some((start, end, kind, with)) => {
                    out.push((start, priority, end, kind, Some(with)));
                    pos = end;
                }
                None => pos = at + 1,
            }
        }
    }
}

/// Whether hidden bytes were removed just before byte `at` of the visible copy
/// (`map` is its map onto the original).
fn seam(map: Option<&[usize]>, at: usize) -> bool {
    map.is_some_and(|map| at > 0 && map[at] != map[at - 1] + 1)
}
