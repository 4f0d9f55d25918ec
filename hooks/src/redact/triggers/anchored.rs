//! The rare-byte prefilter: trigger literals found through a byte rarer in text
//! than letters that they hold (`_`, `-`, `.`: `ghp_`, `sk-`, `xoxb-`, `hvs.`,
//! `x-api-`), as ripgrep and gitleaks find many literals. One `memchr3` pass
//! yields candidate positions; at each, only the literals whose anchor byte it is
//! and whose byte before the anchor matches the text's are compared, whole. So
//! the number of literals costs nothing per byte of text: most provider prefixes
//! are found here, and only the few literals without such a byte are left to the
//! packed searchers.
//!
//! Invariant: every occurrence of a literal in the table (ASCII case ignored for
//! a lowered one) is reported, and nothing else.

/// The anchor bytes, in `memchr3` order.
pub(super) const ANCHORS: [u8; 3] = [b'_', b'-', b'.'];

/// One literal of the table.
#[derive(Debug, Clone)]
struct Lit {
    bytes: Vec<u8>,
    /// Where its anchor byte is (its first anchor byte).
    k: usize,
    /// Compared ASCII-case-insensitively (a lowered pattern's literal).
    fold: bool,
}

impl Lit {
    /// Whether the literal occurs in `text` at `start`.
    fn at(&self, text: &[u8], start: usize) -> bool {
        let Some(found) = text.get(start..start + self.bytes.len()) else {
            return false;
        };
        if self.fold {
            found.eq_ignore_ascii_case(&self.bytes)
        } else {
            found == self.bytes.as_slice()
        }
    }
}

/// The literals found through their anchor byte.
#[derive(Debug, Clone, Default)]
pub(super) struct Anchored {
    /// Per anchor, per lowercased byte before it: the literals whose anchor is
    /// not their first byte (`ANCHORS.len() * 256` lists).
    buckets: Vec<Vec<Lit>>,
    /// Per anchor: the literals that start with it.
    at_start: [Vec<Lit>; 3],
    /// The largest anchor offset: no literal starts further before its anchor.
    max_k: usize,
    len: usize,
}

impl Anchored {
    /// Where `lit`'s anchor is, if it has one.
    pub(super) fn anchor_of(lit: &[u8]) -> Option<usize> {
        lit.iter().position(|b| ANCHORS.contains(b))
    }

    /// Adds `lit` (it must have an anchor); `fold` compares it ignoring ASCII
    /// case.
    pub(super) fn add(&mut self, lit: &[u8], fold: bool) {
        let Some(k) = Anchored::anchor_of(lit) else {
            return;
        };
        if self.buckets.is_empty() {
            self.buckets = vec![Vec::new(); ANCHORS.len() * 256];
        }
        let anchor = ANCHORS.iter().position(|a| *a == lit[k]).unwrap_or(0);
        let entry = Lit {
            bytes: if fold {
                lit.to_ascii_lowercase()
            } else {
                lit.to_vec()
            },
            k,
            fold,
        };
        if k == 0 {
            self.at_start[anchor].push(entry);
        } else {
            // A folded literal is found whatever the case of the byte before.
            let before = lit[k - 1];
            let mut keys = vec![before.to_ascii_lowercase()];
            if fold && before.is_ascii_alphabetic() {
                keys.push(before.to_ascii_uppercase());
            } else if !fold {
                keys = vec![before];
            }
            for key in keys {
                self.buckets[anchor * 256 + usize::from(key)].push(entry.clone());
            }
        }
        self.max_k = self.max_k.max(k);
        self.len += 1;
    }

    /// The literals in the table.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    /// The first occurrence of a literal starting at or after `pos`: its start
    /// and length.
    pub(super) fn next_from(&self, text: &[u8], pos: usize) -> Option<(usize, usize)> {
        if self.len == 0 {
            return None;
        }
        let mut best: Option<(usize, usize)> = None;
        for idx in memchr::memchr3_iter(ANCHORS[0], ANCHORS[1], ANCHORS[2], &text[pos..]) {
            let idx = pos + idx;
            // No literal found from here on can start before the best one.
            if best.is_some_and(|(start, _)| idx >= start + self.max_k) {
                break;
            }
            let anchor = ANCHORS.iter().position(|a| *a == text[idx]).unwrap_or(0);
            let candidates = self.at_start[anchor].iter().chain(
                idx.checked_sub(1)
                    .map(|before| &self.buckets[anchor * 256 + usize::from(text[before])])
                    .into_iter()
                    .flatten(),
            );
            for lit in candidates {
                let Some(start) = idx.checked_sub(lit.k) else {
                    continue;
                };
                if start >= pos && best.is_none_or(|(s, _)| start < s) && lit.at(text, start) {
                    best = Some((start, lit.bytes.len()));
                }
            }
        }
        best
    }
}
