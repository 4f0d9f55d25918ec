//! Table-driven tests for the scanner: every case is also re-fed split at every
//! byte boundary and in random chunkings, and must give identical results.

use super::*;
use proptest::prelude::*;

/// Feeds `chunks` and returns (output, replies, flushed tail).
fn run(chunks: &[&[u8]]) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let mut s = Scanner::new(30, 120);
    let mut out = Vec::new();
    let mut replies = Vec::new();
    for c in chunks {
        let scan = s.feed(c);
        out.extend_from_slice(&scan.output);
        replies.extend_from_slice(&scan.replies);
    }
    let tail = s.flush();
    (out, replies, tail)
}

/// One case, checked whole, at every split point, and at every pair of split points.
fn check(input: &[u8], output: &[u8], replies: &[u8], tail: &[u8]) {
    let show = |b: &[u8]| String::from_utf8_lossy(b).replace('\x1b', "ESC");
    let want = (output.to_vec(), replies.to_vec(), tail.to_vec());
    let whole = run(&[input]);
    assert_eq!(whole, want, "whole input {}", show(input));
    for i in 0..=input.len() {
        let got = run(&[&input[..i], &input[i..]]);
        assert_eq!(got, want, "split at {i} of {}", show(input));
        for j in i..=input.len() {
            let got = run(&[&input[..i], &input[i..j], &input[j..]]);
            assert_eq!(got, want, "split at {i} and {j} of {}", show(input));
        }
    }
    let bytewise: Vec<&[u8]> = input.chunks(1).collect();
    assert_eq!(run(&bytewise), want, "byte by byte {}", show(input));
}

#[test]
fn b7_device_status_is_answered_and_stripped() {
    check(b"a\x1b[5nb", b"ab", b"\x1b[0n", b"");
}

#[test]
fn b7_cursor_position_is_answered_at_one_one() {
    check(b"\x1b[6n", b"", b"\x1b[1;1R", b"");
}

#[test]
fn b7_cursor_position_uses_a_tracked_cursor() {
    let mut s = Scanner::new(30, 120);
    s.set_cursor(7, 42);
    assert_eq!(s.feed(b"\x1b[6n").replies, b"\x1b[7;42R");
}

#[test]
fn b7_text_area_size_reports_rows_and_columns() {
    check(b"x\x1b[18ty", b"xy", b"\x1b[8;30;120t", b"");
    let mut s = Scanner::new(30, 120);
    s.set_size(50, 200);
    assert_eq!(s.feed(b"\x1b[18t").replies, b"\x1b[8;50;200t");
}

#[test]
fn b7_dec_private_mode_is_answered_not_recognised() {
    check(b"\x1b[?2026$p", b"", b"\x1b[?2026;0$y", b"");
    check(b"\x1b[?1$p", b"", b"\x1b[?1;0$y", b"");
    check(b"\x1b[?1234567890$p", b"", b"\x1b[?1234567890;0$y", b"");
}

#[test]
fn b7_other_sequences_pass_through_byte_for_byte() {
    check(b"\x1b[31mred\x1b[0m", b"\x1b[31mred\x1b[0m", b"", b"");
    check(b"\x1bM", b"\x1bM", b"", b"");
    check(b"\x1b[12345678901$p", b"\x1b[12345678901$p", b"", b"");
    check(b"\x1b[?x$p", b"\x1b[?x$p", b"", b"");
    check(b"\x1b[?$p", b"\x1b[?$p", b"", b"");
    check(b"\x1b[?12$q", b"\x1b[?12$q", b"", b"");
    check(b"\x1b[7n", b"\x1b[7n", b"", b"");
    check(b"\x1b[18x", b"\x1b[18x", b"", b"");
    check(b"\x1b[2J\x1b[H", b"\x1b[2J\x1b[H", b"", b"");
}

#[test]
fn b7_a_new_escape_releases_the_pending_bytes() {
    check(b"\x1b[6\x1b[5n", b"\x1b[6", b"\x1b[0n", b"");
    check(b"\x1b\x1b\x1b[6n", b"\x1b\x1b", b"\x1b[1;1R", b"");
}

#[test]
fn b7_several_queries_answer_in_order() {
    check(
        b"a\x1b[5nb\x1b[6nc\x1b[18td",
        b"abcd",
        b"\x1b[0n\x1b[1;1R\x1b[8;30;120t",
        b"",
    );
}

#[test]
fn b7_a_partial_escape_at_end_of_stream_is_flushed_once() {
    check(b"done\x1b[", b"done", b"", b"\x1b[");
    check(b"\x1b[?12", b"", b"", b"\x1b[?12");
    let mut s = Scanner::new(30, 120);
    let scan = s.feed(b"\x1b[1");
    assert!(scan.output.is_empty());
    assert_eq!(s.flush(), b"\x1b[1");
    assert_eq!(s.flush(), b"");
}

#[test]
fn b7_plain_text_is_returned_without_a_copy() {
    let mut s = Scanner::new(30, 120);
    let chunk = b"plain text, no escapes\n";
    let scan = s.feed(chunk);
    assert!(matches!(scan.output, Cow::Borrowed(_)));
    assert!(scan.replies.is_empty());
}

#[test]
fn b7_pending_bytes_stay_bounded() {
    let mut s = Scanner::new(30, 120);
    let mut input = b"\x1b[?".to_vec();
    input.extend(std::iter::repeat_n(b'9', 1000));
    let scan = s.feed(&input);
    assert_eq!(scan.output.len() + s.pending.len(), input.len());
    assert!(s.pending.len() <= MAX_PENDING);
}

#[test]
fn counters_account_for_answered_queries() {
    let mut s = Scanner::new(30, 120);
    let _ = s.feed(b"\x1b[5n\x1b[6n\x1b[31m");
    assert_eq!(s.n_queries(), 2);
    assert_eq!(s.stripped_bytes(), 8);
}

/// Bytes rich in escapes and query fragments, so random inputs hit every state.
fn terminalish() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        Just(b"\x1b".to_vec()),
        Just(b"[".to_vec()),
        Just(b"?".to_vec()),
        Just(b"$".to_vec()),
        Just(b"p".to_vec()),
        Just(b"n".to_vec()),
        Just(b"t".to_vec()),
        Just(b"5".to_vec()),
        Just(b"6".to_vec()),
        Just(b"18".to_vec()),
        Just(b"\x1b[6n".to_vec()),
        Just(b"\x1b[?25$p".to_vec()),
        Just(b"\x1b[31m".to_vec()),
        proptest::collection::vec(any::<u8>(), 0..8),
    ];
    proptest::collection::vec(piece, 0..64).prop_map(|v| v.concat())
}

proptest! {
    #[test]
    fn b7_any_chunking_gives_identical_output_and_replies(
        input in terminalish(),
        cuts in proptest::collection::vec(any::<prop::sample::Index>(), 0..6),
    ) {
        let whole = run(&[&input]);
        let mut points: Vec<usize> = cuts.iter().map(|c| c.index(input.len() + 1)).collect();
        points.sort_unstable();
        let mut chunks = Vec::new();
        let mut last = 0;
        for p in points {
            chunks.push(&input[last..p]);
            last = p;
        }
        chunks.push(&input[last..]);
        prop_assert_eq!(run(&chunks), whole);
    }

    #[test]
    fn b7_output_and_queries_account_for_every_byte(input in terminalish()) {
        let mut s = Scanner::new(30, 120);
        let mut out_bytes = 0usize;
        for chunk in input.chunks(7) {
            let scan = s.feed(chunk);
            out_bytes += scan.output.len();
            prop_assert!(s.pending.len() <= MAX_PENDING);
        }
        out_bytes += s.flush().len();
        prop_assert_eq!(out_bytes as u64 + s.stripped_bytes(), input.len() as u64);
    }
}

/// B7: with a terminal attached the queries stay in the output for it to answer,
/// split anywhere; detached again, they are answered and stripped.
#[test]
fn b7_an_attached_terminal_gets_the_queries_unanswered() {
    let input: &[u8] = b"a\x1b[6nb\x1b[5n\x1b[18t\x1b[?25$p\x1b[1mc";
    for split in 0..=input.len() {
        let mut s = Scanner::new(30, 120);
        s.set_passthrough(true);
        let mut out = s.feed(&input[..split]).output.into_owned();
        let second = s.feed(&input[split..]);
        assert!(second.replies.is_empty(), "split at {split}");
        out.extend_from_slice(&second.output);
        out.extend_from_slice(&s.flush());
        assert_eq!(out, input, "split at {split}");
        assert_eq!(s.n_queries(), 0);
    }
    let mut s = Scanner::new(30, 120);
    s.set_passthrough(true);
    assert!(s.passthrough());
    s.set_passthrough(false);
    let scan = s.feed(b"x\x1b[6n");
    assert_eq!(&scan.output[..], b"x");
    assert_eq!(scan.replies, b"\x1b[1;1R");
}
