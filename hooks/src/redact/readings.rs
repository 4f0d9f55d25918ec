//! The other reading of a text: where an nF escape's final byte begins a word
//! (`ESC SP ghp_…`), a terminal eats that letter but a reader of the bytes sees the
//! word whole, so tokens are looked for in both readings. The bodies of string
//! escapes, which neither reading holds, are matched on their own
//! (`escape_bodies`).

use super::{Found, RedactMode, Redactor, visible};

mod escape_bodies;

impl Redactor {
    /// Adds to `found` the tokens only the other reading of an nF escape shows (see
    /// `visible::strip_keeping_word_finals`), where they overlap nothing found.
    pub(super) fn find_in_other_reading(
        &self,
        text: &str,
        mode: RedactMode,
        found: &mut Vec<Found>,
    ) {
        // And what the bodies of string escapes hold, which no reading shows.
        self.find_in_escape_bodies(text, mode, found);
        let Some((copy, map)) = visible::strip_keeping_word_finals(text) else {
            return;
        };
        let mut more = Vec::new();
        for (start, end, mut with) in self.matches(&copy, Some(&map), mode) {
            let (s, e) = visible::widen_overstrike(text, map[start], map[end - 1] + 1);
            let overlaps = |f: &Found| f.start < e && s < f.end;
            if found.iter().any(overlaps) || more.iter().any(overlaps) {
                continue;
            }
            let n_newlines = memchr::memchr_iter(b'\n', &text.as_bytes()[s..e]).count();
            with.extend(std::iter::repeat_n('\n', n_newlines));
            more.push(Found {
                start: s,
                end: e,
                with,
            });
        }
        found.extend(more);
    }
}
