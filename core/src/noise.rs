//! Strips the noise a tty-less interactive shell prints before the command's own
//! output.
//!
//! `bash -i` without a terminal writes "cannot set terminal process group",
//! "no job control in this shell" and sometimes "tcsetattr: Inappropriate ioctl for
//! device", each as a separate write. Until the process has produced a non-blank line
//! of its own, complete lines containing those markers are dropped; after that, every
//! byte is the process's own and passes untouched. A partial line that could still
//! become a noise line is held (at most `MAX_HELD` bytes) until its newline arrives,
//! so the filter does not depend on how the writes were split into reads.

use std::borrow::Cow;

/// Substrings that mark a shell-noise line.
const MARKERS: &[&[u8]] = &[
    b"no job control in this shell",
    b"cannot set terminal process group",
    b"tcsetattr: Inappropriate ioctl for device",
];

/// The longest partial line held back while waiting for its newline.
const MAX_HELD: usize = 512;

/// Per-session noise filter.
#[derive(Debug, Default)]
pub(crate) struct NoiseFilter {
    /// The process has written real output; the filter is now a no-op.
    done: bool,
    /// A partial line held back because it may become noise.
    held: Vec<u8>,
}

impl NoiseFilter {
    /// Whether every byte now passes untouched (the process wrote output of its own
    /// and nothing is held).
    pub(crate) fn passes_all(&self) -> bool {
        self.done
    }

    /// Filters one chunk; returns the bytes to keep.
    pub(crate) fn feed<'a>(&mut self, chunk: &'a [u8]) -> Cow<'a, [u8]> {
        if self.done {
            return Cow::Borrowed(chunk);
        }
        let mut input = std::mem::take(&mut self.held);
        input.extend_from_slice(chunk);
        let mut out = Vec::new();
        let mut pos = 0;
        while pos < input.len() {
            let Some(nl) = memchr::memchr(b'\n', &input[pos..]) else {
                let rest = &input[pos..];
                if may_become_noise(rest) {
                    self.held = rest.to_vec();
                } else {
                    if !is_blank(rest) {
                        self.done = true;
                    }
                    out.extend_from_slice(rest);
                }
                return Cow::Owned(out);
            };
            let line = &input[pos..=pos + nl];
            pos += nl + 1;
            if is_noise(line) {
                continue;
            }
            out.extend_from_slice(line);
            if !is_blank(line) {
                self.done = true;
                out.extend_from_slice(&input[pos..]);
                return Cow::Owned(out);
            }
        }
        Cow::Owned(out)
    }

    /// Returns a held partial line at end of stream, unless it is noise.
    pub(crate) fn flush(&mut self) -> Vec<u8> {
        let held = std::mem::take(&mut self.held);
        if is_noise(&held) { Vec::new() } else { held }
    }
}

fn is_noise(line: &[u8]) -> bool {
    MARKERS
        .iter()
        .any(|m| memchr::memmem::find(line, m).is_some())
}

fn is_blank(bytes: &[u8]) -> bool {
    bytes.iter().all(u8::is_ascii_whitespace)
}

/// A partial line is held when it is short and looks like the start of a shell
/// diagnostic (`bash: `, `/bin/bash: `, `tcsetattr`), so ordinary prompts without a
/// newline are not delayed.
fn may_become_noise(partial: &[u8]) -> bool {
    if partial.len() > MAX_HELD {
        return false;
    }
    let trimmed = trim_start(partial);
    if trimmed.is_empty() {
        return true;
    }
    if is_noise(trimmed) {
        return true;
    }
    let first_word_end = trimmed
        .iter()
        .position(|b| *b == b':' || b.is_ascii_whitespace())
        .unwrap_or(trimmed.len());
    let word = &trimmed[..first_word_end];
    let looks_like_shell = word.ends_with(b"sh") || b"tcsetattr".starts_with(word);
    let prefix_of_shell = [&b"bash"[..], b"tcsetattr", b"/bin/bash"]
        .iter()
        .any(|s| s.starts_with(word));
    looks_like_shell || (first_word_end == trimmed.len() && prefix_of_shell)
}

fn trim_start(bytes: &[u8]) -> &[u8] {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(bytes.len());
    &bytes[start..]
}

#[cfg(test)]
mod tests;
