//! Unit tests for the text helpers.

use std::time::{Duration, UNIX_EPOCH};

use super::*;

#[test]
fn b5_incomplete_trailing_char_is_held_while_running() {
    let bytes = "héllo €".as_bytes();
    let cut = &bytes[..bytes.len() - 1];
    assert_eq!(decode_tail(cut, false, true), "héllo ");
    assert_eq!(decode_tail(cut, false, false), "héllo \u{fffd}");
    assert_eq!(decode_tail(bytes, false, true), "héllo €");
}

#[test]
fn b5_tail_cut_inside_a_char_skips_its_continuation_bytes() {
    let bytes = "€x".as_bytes();
    assert_eq!(decode_tail(&bytes[1..], true, true), "x");
}

#[test]
fn b5_invalid_bytes_become_replacement_chars() {
    assert_eq!(decode_tail(b"a\xffb", false, true), "a\u{fffd}b");
}

#[test]
fn ansi_sequences_are_stripped() {
    assert_eq!(
        strip_ansi("\u{1b}[31mred\u{1b}[0m \u{1b}]0;title\u{7}ok"),
        "red ok"
    );
}

#[test]
fn rfc3339_formats_utc() {
    let t = UNIX_EPOCH + Duration::from_secs(1_796_000_645);
    assert_eq!(rfc3339(t), "2026-11-30T01:04:05Z");
}
