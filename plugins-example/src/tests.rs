//! Tests of the three tidy steps on terminal output as programs really print it.

use super::*;

fn check(input: &str, expected: Option<&str>) {
    assert_eq!(tidy(input).as_deref(), expected, "input: {input:?}");
}

#[test]
fn strips_colour_escapes() {
    check("\x1b[1;32mok\x1b[0m done\n", Some("ok done\n"));
    check("\x1b]0;title\x07text", Some("text"));
    check("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", Some("link"));
}

#[test]
fn collapses_progress_bars_to_final_state() {
    check(
        "start\n 10%\r 50%\r100%\ndone\n",
        Some("start\n100%\ndone\n"),
    );
    check("crlf line\r\nnext\r\n", Some("crlf line\nnext\n"));
}

#[test]
fn folds_identical_lines_with_a_count() {
    check("a\nb\nb\nb\nc", Some("a\nb [x3]\nc"));
    check("warn\nwarn\n", Some("warn [x2]\n"));
}

#[test]
fn leaves_plain_text_unchanged() {
    check("a\nb\nc\n", None);
    check("", None);
}
