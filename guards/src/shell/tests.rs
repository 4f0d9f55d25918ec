//! Unit tests for the `shell` module: parsing and word reading against the real grammar.

use std::time::{Duration, Instant};

use super::{Vars, Word, command_words, for_each_node, parse};

/// The words of every command in `line`, as their first values.
fn commands(line: &str) -> Vec<Vec<String>> {
    let tree = parse(line, Instant::now() + Duration::from_secs(5)).expect("a parse within 5 s");
    let mut out = Vec::new();
    let _ = for_each_node(tree.root_node(), |node| {
        if node.kind() == "command" {
            let words = command_words(node, line, &Vars::new());
            out.push(words.iter().map(|w| w.value().to_owned()).collect());
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    out
}

#[test]
fn quote_splices_read_as_one_word() {
    for line in [
        "launchctl kick\"start\"",
        "launchctl kick'start'",
        "launchctl kick\\start",
        "launchctl \"kickstart\"",
        "launchctl $'kick\\x73tart'",
    ] {
        assert_eq!(
            commands(line),
            vec![vec!["launchctl", "kickstart"]],
            "{line}"
        );
    }
}

#[test]
fn line_continuations_join_words() {
    assert_eq!(
        commands("pkill \\\n  -9 python"),
        vec![vec!["pkill", "-9", "python"]]
    );
}

#[test]
fn nested_substitutions_are_separate_commands() {
    assert_eq!(
        commands("echo \"$(kill $(pgrep x))\""),
        vec![
            vec!["echo".to_owned(), "$(kill $(pgrep x))".to_owned()],
            vec!["kill".to_owned(), "$(pgrep x)".to_owned()],
            vec!["pgrep".to_owned(), "x".to_owned()],
        ]
    );
}

#[test]
fn known_variables_are_substituted() {
    let line = "p=python; pkill \"$p\"3";
    let tree = parse(line, Instant::now() + Duration::from_secs(5)).expect("a parse within 5 s");
    let mut vars = Vars::new();
    vars.insert("p".to_owned(), vec!["python".to_owned()]);
    let mut seen = Vec::new();
    let _ = for_each_node(tree.root_node(), |node| {
        if node.kind() == "command" {
            seen = command_words(node, line, &vars);
        }
        std::ops::ControlFlow::<()>::Continue(())
    });
    assert_eq!(seen.get(1).map(Word::value), Some("python3"));
    assert_eq!(seen.first(), Some(&Word::literal("pkill")));
}

#[test]
fn deep_nesting_is_walked_without_recursion() {
    let depth = 3000;
    let line = format!("{}pkill x{}", "$(".repeat(depth), ")".repeat(depth));
    let found = commands(&line)
        .iter()
        .any(|c| c.first().is_some_and(|n| n == "pkill"));
    assert!(found, "the innermost command is found");
}
