//! Unit tests for the `rules` module: option parsing never reads a value as a target.

use super::{KILLALL, PKILL, Pattern, parse, pgrep_target, powershell_names};
use crate::host::Host;
use crate::shell::Word;
use crate::verdict::Rule;

fn words(line: &str) -> Vec<Word> {
    line.split_whitespace().map(Word::literal).collect()
}

fn positionals(line: &str, spec: &super::Spec) -> Vec<String> {
    let args = words(line);
    parse(&args, spec, false)
        .positionals
        .iter()
        .map(|w| w.value().to_owned())
        .collect()
}

#[test]
fn b33_option_values_are_not_targets() {
    assert_eq!(positionals("-u python node", &PKILL), ["node"]);
    assert_eq!(positionals("-upython node", &PKILL), ["node"]);
    assert_eq!(positionals("--signal KILL -P 4242 node", &PKILL), ["node"]);
    assert_eq!(
        positionals("-s python -u herd", &KILLALL),
        Vec::<String>::new()
    );
    assert_eq!(positionals("-9 -KILL -SIGTERM -HUP node", &PKILL), ["node"]);
    assert_eq!(positionals("-f -- -python", &PKILL), ["-python"]);
}

#[test]
fn signal_spellings_are_options() {
    let args = words("-SIGKILL -9 -fx python");
    let parsed = parse(&args, &PKILL, false);
    assert!(parsed.has("signal") && parsed.has("f") && parsed.has("x"));
    assert_eq!(parsed.positionals.len(), 1);
}

#[test]
fn b33_pgrep_patterns_are_regexes_against_the_host() {
    let host = Host::new(vec!["python".to_owned()], "python -m agent.main");
    let rule = |line: &str| pgrep_target(&words(line), &host).map(|(rule, _)| rule);
    assert_eq!(rule("py"), Some(Rule::KillByName));
    assert_eq!(rule("-x py"), None, "exact match needs the whole name");
    assert_eq!(rule("-x python3"), Some(Rule::KillByName));
    assert_eq!(rule("^(node|python)$"), Some(Rule::KillByName));
    assert_eq!(rule("-f agent"), Some(Rule::KillByCmdline));
    assert_eq!(rule("-f my_script"), None);
    assert_eq!(rule("node"), None);
    assert_eq!(rule("-u 1000"), Some(Rule::KillEveryone));
    assert_eq!(rule("-P 1"), None);
}

#[test]
fn b33_invalid_or_huge_patterns_fall_back_to_literal_text() {
    let invalid = Pattern::new("python(", false, false);
    assert!(
        invalid.matches("python3"),
        "an invalid regex still matches its literal text"
    );
    let huge = "p".repeat(10_000);
    assert!(!Pattern::new(&huge, false, false).matches("python"));
    assert!(Pattern::new("PYTHON", false, true).matches("python3"));
    assert!(!Pattern::new("PYTHON", false, false).matches("python3"));
}

#[test]
fn b33_powershell_name_parameters_are_read_in_every_spelling() {
    let names = |line: &str| powershell_names(&words(line), false);
    assert_eq!(names("-Name python,node -Force"), ["python", "node"]);
    assert_eq!(names("-n python"), ["python"]);
    assert_eq!(names("-ProcessName:python3"), ["python3"]);
    assert!(names("-Id 42").is_empty());
    assert_eq!(
        powershell_names(&words("python -ErrorAction SilentlyContinue"), true),
        ["python", "SilentlyContinue"]
    );
}
