//! Key marks: the private-key state of the log at line starts, kept by the shim
//! as it writes the log, so a daemon with nothing watching a chatty job goes on
//! from the newest mark before the tail it holds instead of reading the whole
//! backlog back for its key index (`link::catch_up`).
//!
//! A daemon asks for them in the launch spec and in its `want`s, naming how far
//! behind the log's end it wants one (its tail's size and a look-back's context).
//! The index must see every byte, so the output is
//! read, not spliced, unless a daemon that asks for no marks (an older one) is
//! attached; output that went by unseen leaves the index not knowing the state
//! until a line decides it, and no mark is given before.

use std::collections::VecDeque;

use herd_hooks::KeyIndex;

use super::super::wire::KeyMark;

/// Marks are at least this many bytes apart.
const SPACING: u64 = 16 * 1024;
/// The most marks kept while no `want` takes them (the oldest go first).
const MAX_MARKS: usize = 4096;
/// Beyond this many key blocks, the index forgets those closed before its mark.
const MAX_BLOCKS: usize = 64;

/// The shim's key index and its recent marks.
#[derive(Debug, Default)]
pub(super) struct Marks {
    index: KeyIndex,
    /// Line starts and whether a block is open there, oldest first.
    marks: VecDeque<(u64, bool)>,
    /// How far behind the log's end the daemon wants its mark; `None`: no daemon
    /// asked, and the output is not indexed.
    lag: Option<u64>,
}

impl Marks {
    /// Marks for a log that starts empty, `lag` bytes before its end when the
    /// launch spec says (see [`Self::want`]).
    pub(super) fn new(lag: Option<u64>) -> Marks {
        Marks {
            index: KeyIndex::new(),
            lag,
            ..Marks::default()
        }
    }

    /// Whether a daemon asked for marks (the output must then be read to be seen).
    pub(super) fn wanted(&self) -> bool {
        self.lag.is_some()
    }

    /// A daemon asks for the newest mark at least `lag` bytes before the log's end.
    pub(super) fn want(&mut self, lag: u64) {
        self.lag = Some(lag);
    }

    /// Bytes written to the log, in order.
    pub(super) fn logged(&mut self, bytes: &[u8]) {
        self.index.push(bytes);
        let Some((at, open)) = self.index.line_mark() else {
            return;
        };
        if self.index.blocks_kept() > MAX_BLOCKS {
            // Only marks are asked of this index: the blocks closed before them
            // go (a job printing key after key keeps a few, not 16,384).
            self.index.forget_before(at);
        }
        if self
            .marks
            .back()
            .is_none_or(|&(last, _)| at >= last + SPACING)
        {
            if self.marks.len() == MAX_MARKS {
                self.marks.pop_front();
            }
            self.marks.push_back((at, open));
        }
    }

    /// Bytes that went into the log unseen (spliced): the marks before them go
    /// (a daemon that asks again is past them), and the next once a line decides.
    pub(super) fn unseen(&mut self, n: u64) {
        self.index.skip(n);
        self.marks.clear();
    }

    /// The newest mark at least the wanted lag before `log_bytes`, if any; older
    /// ones are dropped (a daemon's cursor only moves on).
    pub(super) fn before(&mut self, log_bytes: u64) -> Option<KeyMark> {
        let limit = log_bytes.checked_sub(self.lag?)?;
        while self.marks.get(1).is_some_and(|&(at, _)| at <= limit) {
            self.marks.pop_front();
        }
        let &(at, open) = self.marks.front().filter(|&&(at, _)| at <= limit)?;
        Some(KeyMark { at, open })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LINE: &[u8] = b"herd-bench ingest line 0123456789 abcdefghijklmnop\n";
    const BODY: &[u8] = b"MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\n";
    const BEGIN: &[u8] = b"-----BEGIN RSA PRIVATE KEY-----\n";

    /// `before`, then a key opened and `body_lines` of its body (never closed).
    fn ending_in_a_key(mut before: Vec<u8>, body_lines: usize) -> Vec<u8> {
        before.extend_from_slice(BEGIN);
        before.extend_from_slice(&BODY.repeat(body_lines));
        before
    }

    /// Logs `text` in reads of `chunk` bytes.
    fn feed(marks: &mut Marks, text: &[u8], chunk: usize) {
        for piece in text.chunks(chunk) {
            marks.logged(piece);
        }
    }

    #[test]
    fn b30_a_mark_lies_a_lag_behind_the_end_at_a_line_start_with_the_key_state_there() {
        let mut marks = Marks::new(Some(200_000));
        let text = ending_in_a_key(LINE.repeat(10_000), 10_000);
        feed(&mut marks, &text, 65_536);
        let end = text.len() as u64;
        // In the lines before the key: closed.
        let in_lines = marks.before(400_000).expect("a mark");
        assert!(!in_lines.open && in_lines.at <= 200_000 && in_lines.at > 100_000);
        // Deep in the key: open, at a line start within a read's worth of the lag.
        let mark = marks.before(end).expect("a mark");
        assert!(mark.at <= end - 200_000 && mark.at + 200_000 + 65_536 + 100 > end);
        assert_eq!(text[usize::try_from(mark.at).expect("small") - 1], b'\n');
        assert!(mark.open, "deep in the key");
        // The daemon only moves on: older marks are gone.
        assert_eq!(marks.before(400_000), None);
        // Never less than the lag before the end.
        assert_eq!(marks.before(100_000), None);
    }

    #[test]
    fn b30_a_job_printing_key_after_key_keeps_few_blocks_and_true_marks() {
        let mut marks = Marks::new(Some(1_000));
        let one_key = [BEGIN, BODY, b"-----END RSA PRIVATE KEY-----\n", LINE].concat();
        let text = ending_in_a_key(one_key.repeat(2_000), 1_000);
        feed(&mut marks, &text, 4_096);
        assert!(marks.index.blocks_kept() <= MAX_BLOCKS + 1);
        let mark = marks.before(text.len() as u64).expect("a mark");
        assert!(mark.open, "inside the last key");
        let mut full = KeyIndex::new();
        full.push(&text);
        assert_eq!(full.open_at(mark.at), Some(mark.open));
    }

    #[test]
    fn b30_no_mark_is_given_before_a_daemon_asks_or_while_the_state_is_unknown() {
        let mut marks = Marks::new(None);
        for _ in 0..10_000 {
            marks.logged(BODY);
        }
        assert!(!marks.wanted());
        assert_eq!(marks.before(1 << 30), None, "nobody asked");
        // Output spliced unseen could have opened a block: lines that could be
        // key body decide nothing, a line that cannot does.
        marks.want(1_000);
        marks.unseen(1_000_000);
        for _ in 0..1_000 {
            marks.logged(BODY);
        }
        assert_eq!(marks.before(1 << 30), None);
        marks.logged(b"compiling herd-core v0.1.0 (/work/main/core): done in 2.5 s\n");
        for _ in 0..1_000 {
            marks.logged(LINE);
        }
        let mark = marks.before(1 << 30).expect("decided");
        assert!(!mark.open);
    }
}
