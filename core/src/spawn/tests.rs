//! Unit tests for the command rewrite and the environment plan.

use std::path::PathBuf;

use super::*;

fn check(input: &str, expected: &str) {
    assert_eq!(
        rewrite_compound_background(input),
        expected,
        "input {input:?}"
    );
}

#[test]
fn b1_compound_background_is_rewritten() {
    check("make && ./server &", "make && { ./server & }");
    check("a || b &", "a || { b & }");
    check(
        "cd x && npm run dev > log 2>&1 &",
        "cd x && { npm run dev > log 2>&1 & }",
    );
    check("a; b && c &", "a; b && { c & }");
}

#[test]
fn b1_other_commands_are_left_alone() {
    check("sleep 1 &", "sleep 1 &");
    check("a && b", "a && b");
    check("a && b && c", "a && b && c");
    check("echo 'a && b &'", "echo 'a && b &'");
    check("(a && b) &", "(a && b) &");
    check("a && b & c", "a && b & c");
    check("a &> log &", "a &> log &");
    check("a && b; c &", "a && b; c &");
}

#[test]
fn b36_deny_globs_match_names() {
    assert!(glob_matches("*_API_KEY", "FAKE_API_KEY"));
    assert!(glob_matches("*_api_key", "fake_api_key"));
    assert!(!glob_matches("*_API_KEY", "API_KEYS"));
    assert!(glob_matches("OPENAI_*KEY*", "OPENAI_API_KEY"));
    assert!(glob_matches("HF_TOKEN", "HF_TOKEN"));
    assert!(!glob_matches("HF_TOKEN", "HF_TOKENS"));
}

#[test]
fn b36_env_is_sanitised_and_tagged() {
    let deny = vec!["*_API_KEY".to_owned()];
    let forward = vec!["KEEP_API_KEY".to_owned()];
    let overrides = vec![("EXTRA".to_owned(), "1".to_owned())];
    let scratch = PathBuf::from("/home/x/cache/scratch");
    let plan = EnvPlan {
        deny: &deny,
        forward: &forward,
        overrides: &overrides,
        scratch: &scratch,
        session_id: "proc_0123456789ab",
        pty: true,
    };
    let host = [
        ("FAKE_API_KEY", "s"),
        ("KEEP_API_KEY", "k"),
        ("PATH", "/bin"),
        ("PAGER", "less"),
    ]
    .into_iter()
    .map(|(k, v)| (OsString::from(k), OsString::from(v)));
    let env = child_env(&plan, host);
    let get = |k: &str| env.get(&OsString::from(k)).and_then(|v| v.to_str());
    assert_eq!(get("FAKE_API_KEY"), None);
    assert_eq!(get("KEEP_API_KEY"), Some("k"));
    assert_eq!(get("EXTRA"), Some("1"));
    assert_eq!(get("TMPDIR"), Some("/home/x/cache/scratch"));
    assert_eq!(get("PYTHONUNBUFFERED"), Some("1"));
    assert_eq!(get("HERD_SESSION"), Some("proc_0123456789ab"));
    assert_eq!(get("HERD_SUPERVISED_CHILD"), Some("1"));
    assert_eq!(get("PAGER"), Some("less"));
    assert_eq!(get("GIT_PAGER"), Some("cat"));
}
