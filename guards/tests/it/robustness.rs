//! Arbitrary input never panics and finishes within a budget: random text, 64 KiB lines,
//! NUL bytes, unbalanced quotes and deep nesting of every construct the walker follows.

use std::time::{Duration, Instant};

use herd_guards::{Verdict, judge};
use proptest::prelude::*;

use crate::host;

/// Generous: the machine is shared and noisy; a judgement normally takes microseconds.
const BUDGET: Duration = Duration::from_secs(2);

/// Judges `command`, asserting it returns within the budget.
fn timed(command: &str) -> Verdict {
    let start = Instant::now();
    let verdict = judge(command, &host());
    let elapsed = start.elapsed();
    assert!(
        elapsed < BUDGET,
        "judging {} bytes took {elapsed:?} (starts {:?})",
        command.len(),
        command.chars().take(80).collect::<String>()
    );
    verdict
}

/// Shell fragments that open, close and nest things, plus kill verbs.
const FRAGMENTS: &[&str] = &[
    "$(",
    ")",
    "`",
    "\"",
    "'",
    "{",
    "}",
    "(",
    "((",
    "[[",
    "]]",
    "\\",
    "\\\n",
    "\n",
    ";",
    "&&",
    "||",
    "|",
    "&",
    "<<EOF\n",
    "<<'EOF'\n",
    "EOF\n",
    "<<<",
    "<(",
    ">(",
    "${",
    "$'",
    "#",
    "\0",
    "bash -c '",
    "sh -c \"",
    "eval ",
    "sudo ",
    "env -S '",
    "xargs ",
    "for i in ",
    "do ",
    "done",
    "case x in ",
    "esac",
    "if ",
    "then ",
    "fi",
    "function f ",
    "pkill ",
    "python ",
    "kill -9 ",
    "$(pgrep ",
    "herd ",
    "shutdown ",
    "systemctl ",
    "restart ",
    "launchctl ",
    "kick\"start\" ",
    "taskkill /IM ",
    "Stop-Process -Name ",
    "python -c '",
    "os.system(\"",
    "[\"pkill\", ",
    "x=",
    "$x",
    "${x%%:*}",
    "=~",
    "**",
    "ü",
    "日本",
    "\u{1F600}",
    " ",
];

/// The case count: CI's default, or `PROPTEST_CASES` when `cargo xtask soak` raises it.
fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn fragments() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(FRAGMENTS), 0..200).prop_map(|parts| parts.concat())
}

fn long_line() -> impl Strategy<Value = String> {
    (
        prop::sample::select(FRAGMENTS),
        prop::sample::select(FRAGMENTS),
        1usize..64 * 1024,
    )
        .prop_map(|(a, b, len)| {
            let unit = format!("{a}{b}");
            let mut line = unit.repeat(len / unit.len().max(1) + 1);
            let mut cut = len.min(line.len());
            while !line.is_char_boundary(cut) {
                cut -= 1;
            }
            line.truncate(cut);
            line
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(256), ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_never_panics(command in any::<String>()) {
        timed(&command);
    }

    #[test]
    fn shell_fragments_never_panic(command in fragments()) {
        timed(&command);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(24), ..ProptestConfig::default() })]

    #[test]
    fn long_lines_never_panic(command in long_line()) {
        timed(&command);
    }
}

#[test]
fn deep_command_substitution_finishes() {
    let depth = 20_000;
    let command = format!("{}pkill python{}", "$(".repeat(depth), ")".repeat(depth));
    assert!(
        timed(&command).is_block(),
        "the innermost kill is still seen or the verb scan fires"
    );
}

#[test]
fn deep_subshells_and_braces_finish() {
    for (open, close) in [("(", ")"), ("{ ", "; }"), ("`", "`"), ("\"$(", ")\"")] {
        let command = format!("{}true{}", open.repeat(10_000), close.repeat(10_000));
        timed(&command);
    }
}

#[test]
fn deep_nested_shell_strings_finish() {
    // Each level quotes the one inside it; past depth 8 the verb scan judges the rest.
    let mut command = "pkill python".to_owned();
    for _ in 0..11 {
        command = format!("bash -c {}", shell_quote(&command));
    }
    assert!(command.len() < 16 * 1024 * 1024);
    assert!(timed(&command).is_block());
}

#[test]
fn unbalanced_quotes_64k_finish() {
    for quote in ["\"", "'", "`", "$(", "<<EOF\n"] {
        let command = format!("echo {quote}{}", "a b c ".repeat(11_000));
        assert_eq!(
            timed(&command),
            Verdict::Allow,
            "no verb, so allowed: {quote:?}"
        );
    }
}

#[test]
fn nul_bytes_everywhere_finish() {
    let command: String = "pkill python; echo hi"
        .chars()
        .flat_map(|c| [c, '\0'])
        .collect();
    assert!(timed(&command).is_block());
    timed(&"\0".repeat(64 * 1024));
}

#[test]
fn many_commands_on_one_line_finish() {
    let command = "echo hi; ".repeat(7_000) + "pkill python";
    assert!(timed(&command).is_block());
}

#[test]
fn many_code_literals_finish() {
    let code = "print('x'); ".repeat(5_000) + "os.system('pkill python')";
    let command = format!("python -c \"{code}\"");
    assert!(
        timed(&command).is_block(),
        "past the literal budget the verb scan still fires"
    );
}

fn shell_quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "'\\''"))
}

// Regression: the proptest found that 46 KB of `"|"|"|…` kept tree-sitter busy
// for 18 s between its progress checks; such text now goes to the verb scan.
#[test]
fn operator_floods_are_judged_within_the_budget() {
    for flood in [
        "\"|".repeat(23_000),
        "\"|\n".repeat(10_000),
        "echo a | ".repeat(5_000),
    ] {
        assert_eq!(timed(&flood), Verdict::Allow);
    }
    let hidden_kill = format!("{}pkill -9 python3", "echo a | ".repeat(5_000));
    assert!(
        matches!(timed(&hidden_kill), Verdict::Block(_)),
        "a kill verb inside a flood still blocks"
    );
}

// Regression: the soak found a segfault inside tree-sitter-bash's scanner,
// which calls C `isdigit` on the code point after `{` (and after `..`); any code point
// above 255 there crashed the process that judged it.
#[test]
fn wide_characters_in_brace_position_do_not_crash() {
    for text in [
        "echo {\u{10FFFF}",
        "echo {\u{E0000}}",
        "echo {1..\u{10FFFF}}",
        "a{\u{1F600}",
        "pkill -9 {\u{10FFFF}",
    ] {
        let _ = timed(text);
    }
    assert!(matches!(
        timed("pkill -9 python3 # {\u{10FFFF}"),
        Verdict::Block(_)
    ));
}
