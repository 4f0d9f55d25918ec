//! Applying replacements: the whole text, a window of it, or the rest of a line a
//! stream already showed the start of.

use std::borrow::Cow;

use super::Found;

/// `text` with every replacement in `found` (sorted, non-overlapping) applied.
pub(crate) fn splice<'t>(text: &'t str, found: &[Found]) -> Cow<'t, str> {
    if found.is_empty() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for f in found {
        out.push_str(&text[last..f.start]);
        out.push_str(&f.with);
        last = f.end;
    }
    out.push_str(&text[last..]);
    Cow::Owned(out)
}

/// The part of `text[edge_start..edge_end]` with the replacements in `found`
/// applied, where `found` was computed over all of `text` (the window with its
/// context). A replacement that straddles an edge is kept whole.
pub(crate) fn splice_window(
    text: &str,
    found: &[Found],
    edge_start: usize,
    edge_end: usize,
) -> String {
    splice_from(text, found, edge_start, edge_end, None)
}

/// Like [`splice_window`], for a stream that already showed `text[..edge_start]`
/// (the start of an unfinished line): a replacement that straddles the edge and
/// begins with what was shown (a token mask keeps the token's head) is emitted
/// without that head, so the line reads as if redacted whole; one that continues a
/// mask already shown up to the edge (`shown_mask`, the same replacement) adds
/// nothing.
pub(crate) fn splice_continuing(
    text: &str,
    found: &[Found],
    edge_start: usize,
    shown_mask: Option<&str>,
) -> String {
    splice_from(text, found, edge_start, text.len(), Some(shown_mask))
}

fn splice_from(
    text: &str,
    found: &[Found],
    edge_start: usize,
    edge_end: usize,
    continuing: Option<Option<&str>>,
) -> String {
    let mut out = String::with_capacity(edge_end - edge_start);
    let mut pos = edge_start;
    for f in found {
        if f.end <= edge_start || (f.start == f.end) {
            continue;
        }
        if f.start >= edge_end {
            break;
        }
        if f.start > pos {
            out.push_str(&text[pos..f.start]);
        }
        let shown = &text[f.start.min(edge_start)..edge_start];
        match (continuing, f.with.strip_prefix(shown)) {
            (Some(Some(mask)), _) if f.start < edge_start && mask == f.with => {}
            (Some(_), Some(rest)) if f.start < edge_start => out.push_str(rest),
            _ => out.push_str(&f.with),
        }
        pos = pos.max(f.end);
    }
    if pos < edge_end {
        out.push_str(&text[pos..edge_end]);
    }
    out
}
