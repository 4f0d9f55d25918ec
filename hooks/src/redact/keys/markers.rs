//! The search for the lines that can open a private-key block.

use super::{dashes, encoded, ppk};

/// The search for the lines that can open a block (a `-----` marker, a PuTTY
/// file's `-Lines: `, a PEM file in base64), each needle's next hit kept, so a text is read once per
/// needle however many times it is asked.
pub(crate) struct Markers<'a> {
    finders: &'static [memchr::memmem::Finder<'static>; 2],
    /// The hits of the finders' needles when they were found beforehand (each
    /// list in order, of the same bytes every call): looked up, not searched.
    found: Option<[&'a [usize]; 2]>,
    /// The next hit of the dashes and of each finder at or after the last position
    /// asked (`None`: not searched yet; `Some(None)`: none left).
    next: [Option<Option<usize>>; 3],
}

impl Markers<'static> {
    pub(crate) fn new() -> Markers<'static> {
        // Built once: a searcher costs more to build than a short text to search.
        static FINDERS: std::sync::OnceLock<[memchr::memmem::Finder<'static>; 2]> =
            std::sync::OnceLock::new();
        Markers {
            finders: FINDERS.get_or_init(|| {
                [
                    memchr::memmem::Finder::new(ppk::NEEDLE),
                    memchr::memmem::Finder::new(encoded::NEEDLE),
                ]
            }),
            found: None,
            next: [None, None, None],
        }
    }
}

impl<'a> Markers<'a> {
    /// The search with the hits of [`super::PPK_NEEDLE`] and [`super::ENCODED_NEEDLE`] found
    /// beforehand (see [`super::spans_found`]).
    pub(super) fn found(found: [&'a [usize]; 2]) -> Markers<'a> {
        Markers {
            found: Some(found),
            ..Markers::new()
        }
    }

    /// The first hit at or after `from` in `bytes` (the same bytes every call).
    pub(crate) fn next(&mut self, bytes: &[u8], from: usize) -> Option<usize> {
        for idx in 0..self.next.len() {
            let stale = match self.next[idx] {
                None => true,
                Some(Some(at)) => at < from,
                Some(None) => false,
            };
            if stale {
                let hit = match (idx.checked_sub(1), self.found) {
                    (None, _) => bytes.get(from..).and_then(dashes::find).map(|i| from + i),
                    (Some(needle), Some(found)) => {
                        let hits = found[needle];
                        hits.get(hits.partition_point(|at| *at < from)).copied()
                    }
                    (Some(needle), None) => bytes
                        .get(from..)
                        .and_then(|rest| self.finders[needle].find(rest))
                        .map(|i| from + i),
                };
                self.next[idx] = Some(hit);
            }
        }
        self.next.iter().flatten().flatten().min().copied()
    }
}

/// Whether `bytes` hold anything that can open or close a block.
pub(crate) fn has_marker(bytes: &[u8]) -> bool {
    Markers::new().next(bytes, 0).is_some()
}
