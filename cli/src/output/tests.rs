//! Unit tests of the terminal-safe rendering of job-controlled text.

use std::borrow::Cow;

use super::{visible, visible_lines};

/// Renders `input` both ways and compares with the expected texts.
fn check(input: &str, line: &str, lines: &str) {
    assert_eq!(visible(input), line, "visible({input:?})");
    assert_eq!(visible_lines(input), lines, "visible_lines({input:?})");
}

#[test]
fn terminal_controls_in_job_text_are_rendered_visibly() {
    let cases = [
        // (input, as a one-line field, as a multi-line block)
        ("plain text", "plain text", "plain text"),
        ("\u{1b}]0;pwned\u{7}", "\\e]0;pwned^G", "\\e]0;pwned^G"),
        ("\u{1b}[2J\u{1b}[H", "\\e[2J\\e[H", "\\e[2J\\e[H"),
        (
            "\u{1b}[01;31mred\u{1b}[0m",
            "\\e[01;31mred\\e[0m",
            "\\e[01;31mred\\e[0m",
        ),
        ("\u{0}\u{1}\u{8}\u{1f}\u{7f}", "^@^A^H^_^?", "^@^A^H^_^?"),
        ("a\nb\tc", "a^Jb^Ic", "a\nb\tc"),
        ("crlf\r\nnext", "crlf^M^Jnext", "crlf\r\nnext"),
        ("10%\r100%\n", "10%^M100%^J", "10%^M100%\n"),
        ("trailing\r", "trailing^M", "trailing^M"),
        (
            "\u{9b}31m \u{85}",
            "<U+009B>31m <U+0085>",
            "<U+009B>31m <U+0085>",
        ),
        ("a\u{202e}cba", "a<U+202E>cba", "a<U+202E>cba"),
        (
            "\u{2066}\u{2067}\u{2068}\u{2069}",
            "<U+2066><U+2067><U+2068><U+2069>",
            "<U+2066><U+2067><U+2068><U+2069>",
        ),
        (
            "\u{200e}\u{200f}\u{61c}",
            "<U+200E><U+200F><U+061C>",
            "<U+200E><U+200F><U+061C>",
        ),
        (
            "r\u{200b}m \u{feff}",
            "r<U+200B>m <U+FEFF>",
            "r<U+200B>m <U+FEFF>",
        ),
        ("\u{2028}\u{2029}", "<U+2028><U+2029>", "<U+2028><U+2029>"),
        ("tag\u{e0041}", "tag<U+E0041>", "tag<U+E0041>"),
        // Printable non-ASCII text is left alone.
        (
            "café ✓ 日本 العربية",
            "café ✓ 日本 العربية",
            "café ✓ 日本 العربية",
        ),
    ];
    for (input, line, lines) in cases {
        check(input, line, lines);
    }
}

#[test]
fn text_with_nothing_to_render_is_borrowed() {
    assert!(matches!(visible("echo hi ✓"), Cow::Borrowed("echo hi ✓")));
    assert!(matches!(
        visible_lines("one\r\ntwo\tthree\n"),
        Cow::Borrowed("one\r\ntwo\tthree\n")
    ));
    assert!(matches!(visible("a\nb"), Cow::Owned(_)));
}

// B7: the queries a log holds from an attached period are left out of
// what `herd logs` writes to a terminal; every other byte stays.
#[test]
fn b7_terminal_queries_are_left_out_and_the_rest_kept() {
    let text = "a\x1b[6nb\x1b[1mc\x1b[?2004$p\x1b[c\x1b[?25h\x1b[18t\x1b[?$p\x1b[5";
    assert_eq!(
        super::without_queries(text),
        "ab\x1b[1mc\x1b[?25h\x1b[?$p\x1b[5"
    );
    assert!(matches!(
        super::without_queries("plain \x1b[31mred"),
        std::borrow::Cow::Owned(_)
    ));
    assert!(matches!(
        super::without_queries("plain"),
        std::borrow::Cow::Borrowed(_)
    ));
}

// B7: a query split across two writes at any byte is left out as one
// whole; the text around it is kept.
#[test]
fn b7_a_query_split_across_chunks_is_left_out() {
    for query in ["\x1b[6n", "\x1b[?2004$p", "\x1b[>0c", "\x1b[18t"] {
        let text = format!("a\x1b[1mb{query}c");
        for cut in 0..=text.len() {
            let mut filter = super::QueryFilter::new();
            let mut out = filter.filter(&text[..cut]).into_owned();
            out.push_str(&filter.filter(&text[cut..]));
            assert_eq!(out, "a\x1b[1mbc", "{query:?} cut at {cut}");
        }
    }
    // A held start that is not a query is written with the next chunk.
    let mut filter = super::QueryFilter::new();
    assert_eq!(filter.filter("x\x1b["), "x");
    assert_eq!(filter.filter("31mred"), "\x1b[31mred");
}
