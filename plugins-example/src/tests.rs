//! Tests of the tidy steps on terminal output as programs really print it, and of
//! the token savings on two real PTY logs recorded in `testdata/` (see its README).

use super::*;

fn check(input: &str, expected: Option<&str>) {
    assert_eq!(tidy(input).as_deref(), expected, "input: {input:?}");
}

#[test]
fn strips_colour_escapes() {
    check("\x1b[1;32mok\x1b[0m done\n", Some("ok done\n"));
    check("\x1b]0;title\x07text", Some("text"));
    check("\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\", Some("link"));
    check("\x1b(B\x1b[mplain again\n", Some("plain again\n"));
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
fn renders_cursor_moves_and_erases_like_a_terminal() {
    // npm's spinner: a glyph, back to column 1, erase, the next glyph or the line.
    check(
        "⠙\x1b[1G\x1b[0K⠹\x1b[1G\x1b[0Knpm notice ok\n",
        Some("npm notice ok\n"),
    );
    // cargo's bar, cleared by `\r ESC [K` before the diagnostic is printed.
    check(
        "    Building [===>   ] 3/9: syn\r\x1b[Kwarning: unused\n",
        Some("warning: unused\n"),
    );
    // A shorter redraw without an erase leaves the tail of the longer one.
    check("downloading\rDONE\n", Some("DONEloading\n"));
    check("abc\x08\x08X\n", Some("aXc\n"));
    check("ab\x1b[3Cc\n", Some("ab   c\n"));
    // Cursor moves stop at a bound, as a terminal stops at its width.
    let far = tidy("\x1b[999999999Cx\x1b[99999999999999999999Gy\n").expect("changes");
    assert_eq!(far.len(), MAX_COLUMN + 3, "{far:?}");
    // Erase the whole line, then draw at column 3.
    check("old text\x1b[2K\x1b[3Gnew\n", Some("  new\n"));
}

#[test]
fn drops_spinners_and_progress_bars_left_on_screen() {
    check(
        "start\n⠼\n    Building [=====>      ] 12/40: syn\nFetch [==>    ] 2 complete; 3 pending\n 45% ████▌ 4/9\ndone\n",
        Some("start\ndone\n"),
    );
    check("⸨░░░░░░⸩ ⠙ idealTree: sill\nok\n", Some("ok\n"));
    // A bracketed bar without a number is not progress.
    check("[=====]\nsection\n", None);
}

#[test]
fn folds_identical_lines_with_a_count() {
    check("a\nb\nb\nb\nc", Some("a\nb [x3]\nc"));
    check("warn\nwarn\n", Some("warn [x2]\n"));
    check("a\n\n\n\nb\n", Some("a\n\nb\n"));
}

#[test]
fn folds_runs_of_status_lines_into_a_summary_and_the_last_line() {
    check(
        "   Compiling libc v0.2.1\n   Compiling cfg-if v1.0.0\n   Compiling syn v2.0.1\n   Compiling app v0.1.0 (/src/app)\n    Finished dev\n",
        Some(
            "   Compiling [3 lines folded: libc, cfg-if, syn]\n   Compiling app v0.1.0 (/src/app)\n    Finished dev\n",
        ),
    );
    // A tool's lower-case words lead together; a URL is named by its last part.
    check(
        "npm http fetch GET 200 https://r.example/a 5ms\nnpm http fetch GET 200 https://r.example/b 6ms\nnpm http fetch GET 200 https://r.example/c/-/c-1.0.tgz 7ms\nnpm http fetch GET 200 https://r.example/d 8ms\nadded 4 packages\n",
        Some(
            "npm http fetch GET 200 [3 lines folded: a, b, c-1.0.tgz]\nnpm http fetch GET 200 https://r.example/d 8ms\nadded 4 packages\n",
        ),
    );
    // Past RUN_NAMES names the summary counts the rest.
    let many: String = (0..12)
        .map(|n| format!("Downloaded crate{n} v1\n"))
        .collect();
    check(
        &many,
        Some(
            "Downloaded [11 lines folded: crate0, crate1, crate2, crate3, crate4, crate5, crate6, crate7, +3 more]\nDownloaded crate11 v1\n",
        ),
    );
    // Two lines are left as they are; so are lines led by a symbol or a number.
    check("Compiling a\nCompiling b\n", None);
    check("| a\n| b\n| c\n1 x\n1 y\n1 z\n", None);
}

#[test]
fn never_folds_a_line_that_says_error_or_warning() {
    check(
        "   Compiling a v1\n   Compiling b v1\n   Compiling thiserror v1\n   Compiling c v1\n   Compiling d v1\n   Compiling e v1\n",
        Some(
            "   Compiling a v1\n   Compiling b v1\n   Compiling thiserror v1\n   Compiling [2 lines folded: c, d]\n   Compiling e v1\n",
        ),
    );
    // Repeated, each is kept: a count would change the line.
    check("npm error\nnpm error\nnpm error\n", None);
    check("WARNING: x\nWARNING: x\n", None);
}

#[test]
fn never_summarises_lines_that_look_like_trouble() {
    check("npm warn a\nnpm warn b\nnpm warn c\n", None);
    check(
        "test a ... FAILED\ntest b ... FAILED\ntest c ... FAILED\n",
        None,
    );
}

#[test]
fn keeps_a_diagnostic_block_whole_through_its_blank_line() {
    let block = "error[E0308]: mismatched types\n  --> src/main.rs:3:5\n   |\n   |\n3  |     let x: String = 1;\nhelp: a\nhelp: b\nhelp: c\n\n";
    check(
        &format!("{block}help: d\nhelp: e\nhelp: f\n"),
        Some(&format!("{block}help: [2 lines folded: d, e]\nhelp: f\n")),
    );
    // A cargo status line ends a block that had no blank line.
    check(
        "warning: `app` generated 1 warning\n    Finished dev\nnote: x\nnote: y\nnote: z\n",
        Some(
            "warning: `app` generated 1 warning\n    Finished dev\nnote: [2 lines folded: x, y]\nnote: z\n",
        ),
    );
    // A header with no end keeps only MAX_BLOCK_LINES lines after it verbatim.
    let tail: String = (0..MAX_BLOCK_LINES + 5)
        .map(|n| format!("note: n{n}\n"))
        .collect();
    let out = tidy(&format!("error: could not compile `app`\n{tail}")).expect("folds");
    let n_verbatim = out.lines().filter(|l| l.starts_with("note: n")).count();
    assert_eq!(n_verbatim, MAX_BLOCK_LINES + 1, "{out}");
    assert!(out.contains("note: [4 lines folded"), "{out}");
    // A traceback heads a block too.
    check(
        "Traceback (most recent call last):\n  File a\n  File b\n  File c\nValueError: v\n",
        None,
    );
}

#[test]
fn leaves_plain_text_unchanged() {
    check("a\nb\nc\n", None);
    check("", None);
    check("no newline", None);
}

/// Tokens counted as characters / 4, rounded up (the rule of thumb for English and
/// code with OpenAI-style tokenizers). `testdata/count-tokens.mjs` counts the same
/// files with js-tiktoken's cl100k_base and o200k_base.
fn tokens(text: &str) -> usize {
    text.chars().count().div_ceil(4)
}

/// The visible text of a raw line as a log checker would take it, written apart
/// from `visible_line` on purpose: escape sequences removed, `ESC [ n G` (npm's
/// back-to-column-1) taken as a carriage return, and then what follows the last
/// carriage return (a trailing one ends a `\r\n` line).
fn checker_view(raw: &str) -> String {
    let raw = raw.strip_suffix('\r').unwrap_or(raw);
    let mut plain = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\x1b' {
            plain.push(c);
            continue;
        }
        if chars.next() == Some('[') {
            for c in chars.by_ref() {
                if ('@'..='~').contains(&c) {
                    if c == 'G' {
                        plain.push('\r');
                    }
                    break;
                }
            }
        }
    }
    plain.rsplit('\r').next().unwrap_or("").to_owned()
}

fn says_error_or_warning(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.contains("error") || lower.contains("warning")
}

fn check_log(name: &str, raw_bytes: &[u8]) {
    let raw = String::from_utf8(raw_bytes.to_vec()).expect("the recorded logs are UTF-8");
    let out = tidy(&raw).expect("a raw PTY log always changes");
    let (n_raw, n_out) = (tokens(&raw), tokens(&out));
    assert!(
        n_out * 2 <= n_raw,
        "{name}: {n_out} tokens out of {n_raw} is more than half:\n{out}"
    );
    assert!(
        !out.contains(['\x1b', '\r']),
        "{name}: escape or carriage return left"
    );

    let view: Vec<String> = raw.split('\n').map(checker_view).collect();
    let want: Vec<&str> = view
        .iter()
        .map(String::as_str)
        .filter(|l| says_error_or_warning(l))
        .collect();
    let got: Vec<&str> = out.lines().filter(|l| says_error_or_warning(l)).collect();
    assert!(!want.is_empty(), "{name}: the log has no error or warning");
    assert_eq!(got, want, "{name}: error and warning lines, in order");

    // Every diagnostic (a line starting `error` or `warning`, through the blank
    // line or cargo status line that ends it) is in the output, line for line.
    let out_lines: Vec<&str> = out.lines().collect();
    for (idx, head) in view.iter().enumerate() {
        let lower = head.trim_start().to_ascii_lowercase();
        if !(lower.starts_with("error") || lower.starts_with("warning")) {
            continue;
        }
        let block: Vec<&str> = std::iter::once(head.as_str())
            .chain(
                view[idx + 1..]
                    .iter()
                    .map(String::as_str)
                    .take_while(|l| !l.trim().is_empty() && !looks_like_cargo_status(l)),
            )
            .collect();
        assert!(
            out_lines
                .windows(block.len())
                .any(|w| w == block.as_slice()),
            "{name}: diagnostic not kept whole: {block:#?}\nin:\n{out}"
        );
    }
}

fn looks_like_cargo_status(line: &str) -> bool {
    let body = line.trim_start();
    line.len() - body.len() >= 2 && body.starts_with(|c: char| c.is_ascii_uppercase())
}

#[test]
fn cargo_build_log_halves_its_tokens_and_keeps_every_error_and_warning() {
    check_log(
        "cargo-build.pty.log",
        include_bytes!("../testdata/cargo-build.pty.log"),
    );
}

#[test]
fn npm_install_log_halves_its_tokens_and_keeps_every_error_and_warning() {
    check_log(
        "npm-install.pty.log",
        include_bytes!("../testdata/npm-install.pty.log"),
    );
}

#[test]
fn cargo_diagnostics_survive_with_locations_and_snippets() {
    let raw = String::from_utf8(include_bytes!("../testdata/cargo-build.pty.log").to_vec())
        .expect("the recorded logs are UTF-8");
    let out = tidy(&raw).expect("a raw PTY log always changes");
    for kept in [
        "error[E0308]: mismatched types",
        "  --> src/main.rs:13:27",
        "13 |     let retries: String = job.retries;",
        "warning: unused variable: `unused_count`",
        "  --> src/main.rs:11:9",
    ] {
        assert!(
            out.lines().any(|l| l == kept),
            "{kept:?} missing from:\n{out}"
        );
    }
    assert!(!out.contains("Building ["), "progress bar left in:\n{out}");
}
