//! Unit tests of the client-side formatting helpers.

use super::ps::{age, last_line};
use super::{command_line, truncate};

#[test]
fn one_word_is_a_shell_line_and_several_are_quoted() {
    assert_eq!(
        command_line(&["make && make test".into()]),
        "make && make test"
    );
    assert_eq!(
        command_line(&["bash".into(), "-c".into(), "echo a; echo b".into()]),
        "bash -c 'echo a; echo b'"
    );
}

#[test]
fn ages_read_like_a_clock() {
    assert_eq!(age(45.2), "45s");
    assert_eq!(age(18.0 * 60.0 + 5.0), "18m5s");
    assert_eq!(age(2.0 * 3600.0 + 180.0), "2h3m");
    assert_eq!(age(-1.0), "0s");
}

#[test]
fn the_last_line_skips_trailing_blanks_and_long_text_is_cut() {
    assert_eq!(last_line("a\nb\n\n  \n"), "b");
    assert_eq!(truncate("abcdef", 4), "abc…");
    // Measured in terminal columns: a wide character takes two.
    assert_eq!(truncate("日本語のログ", 7), "日本語…");
    assert_eq!(truncate("日本語", 6), "日本語");
    assert_eq!(truncate("a  b\nc", 10), "a b c");
}

#[test]
fn the_command_column_is_flattened_then_rendered_then_cut() {
    assert_eq!(
        truncate("printf '\u{1b}[2J'\n\u{202e}x", 40),
        "printf '\\e[2J' <U+202E>x"
    );
    assert_eq!(truncate("\u{1b}]0;title\u{7}", 6), "\\e]0;…");
    assert_eq!(
        truncate("a\tb", 10),
        "a b",
        "whitespace controls become one space"
    );
}
