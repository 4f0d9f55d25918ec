//! Where the text read before a cut point starts (its context): the start of the
//! point's line, at most a reach back; in a longer line, the start of the last line
//! escaped in it (after a spelled `\n`: a block of lines kept in one string), so
//! the key state is judged at a line's start, never inside a line's prefix (a
//! `cat -n` number, a `path:`) or a spelled escape.

/// The start of the context before byte `at` of `text`, at most `reach` bytes back.
pub(crate) fn context_start(text: &str, at: usize, reach: usize) -> usize {
    let floor = at.saturating_sub(reach);
    let before = &text.as_bytes()[floor..at];
    let found = memchr::memrchr(b'\n', before)
        .map(|idx| floor + idx + 1)
        .or_else(|| escaped_line_start(before).map(|idx| floor + idx));
    let mut start = found.unwrap_or(floor);
    while !text.is_char_boundary(start) {
        start += 1;
    }
    start
}

/// The offset just after the last `\n` spelled in `bytes` (a backslash and an
/// `n`, escaped once or more) that a reader sees, if any: a backslash that ends a
/// terminal string (`ESC P … ESC \`) or lies inside one spells nothing, and taken
/// as a line start it would cut the context inside the token it hides in
/// (`sk-proj-a ESC P q ESC \ nl0Dg…`, a fuzz finding).
pub(crate) fn escaped_line_start(bytes: &[u8]) -> Option<usize> {
    super::visible::rfind_seen(bytes, b"\\n").map(|idx| idx + 2)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn b30_a_spelled_line_break_starts_the_context_but_a_string_terminator_does_not() {
        // Escaped once and twice: the context starts after the last one.
        assert_eq!(escaped_line_start(br#"{"k":"a\nb\nc"}"#), Some(12));
        assert_eq!(escaped_line_start(br#"{"k":"a\\nbc"}"#), Some(10));
        // `ESC \` ends a DCS string: the `n` after it is text, not half of `\n`.
        let dcs = b"sk-proj-a\x1bPq#0;2\x1b\\nl0DgKx79HcMYRt5xX";
        assert_eq!(escaped_line_start(dcs), None);
        // Nor inside the string a terminal consumes.
        assert_eq!(escaped_line_start(b"ab\x1b]0;x\\ny\x07cd"), None);
        // A seen one before a terminator still counts; so does one after it.
        let both = b"a\\nb\x1b_app\x1b\\nc";
        assert_eq!(escaped_line_start(both), Some(3));
        let after = b"a\x1b_app\x1b\\nc\\nd";
        assert_eq!(escaped_line_start(after), Some(after.len() - 1));
        assert_eq!(context_start("ab\\ncd", 6, 100), 4);
        let line = "sk-proj-a\x1bPq#0;2\x1b\\nl0DgKx79HcMYRt5xX";
        assert_eq!(context_start(line, line.len(), 1000), 0);
    }
}
