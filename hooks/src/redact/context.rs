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
/// `n`, escaped once or more), if any.
pub(crate) fn escaped_line_start(bytes: &[u8]) -> Option<usize> {
    memchr::memmem::rfind(bytes, b"\\n").map(|idx| idx + 2)
}
