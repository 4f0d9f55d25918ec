//! The self-kill guard through `herd guard check` and `herd run` (B33).

use serde_json::Value;

use crate::support::{Env, stderr, stdout};

#[test]
fn b33_guard_check_blocks_killing_the_host_by_name() {
    let env = Env::new();
    let out = env.run(&[
        "guard",
        "check",
        "--json",
        "--host-image",
        "python",
        "--host-cmdline",
        "python -m app",
        "--",
        "pkill -9 python3",
    ]);
    assert_eq!(out.status.code(), Some(1), "blocked exits 1");
    let verdict: Value = serde_json::from_slice(&out.stdout).expect("JSON verdict");
    assert_eq!(verdict["verdict"], "block", "{verdict}");
    for key in ["rule", "reason", "remedy"] {
        assert!(
            verdict[key].as_str().is_some_and(|s| !s.is_empty()),
            "{key} in {verdict}"
        );
    }
}

#[test]
fn b33_guard_check_allows_an_unrelated_pattern() {
    let env = Env::new();
    let out = env.run(&[
        "guard",
        "check",
        "--json",
        "--host-image",
        "python",
        "--host-cmdline",
        "python -m app",
        "--",
        "pkill -f my_script.py",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let verdict: Value = serde_json::from_slice(&out.stdout).expect("JSON verdict");
    assert_eq!(verdict["verdict"], "allow");
    assert!(!env.socket().exists(), "guard check needs no daemon");
}

#[test]
fn b33_run_refuses_a_command_that_would_kill_the_host() {
    let mut env = Env::new();
    env.vars
        .push(("HERD_HOST_IMAGES".into(), "herd-it-host".into()));
    let out = env.run(&["run", "--", "pkill herd-it-host"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "stdout: {} stderr: {}",
        stdout(&out),
        stderr(&out)
    );
    assert!(stderr(&out).contains("guard"), "{}", stderr(&out));
    let listed = env.json(&["ps", "--all", "--json"]);
    assert_eq!(
        listed["processes"],
        serde_json::json!([]),
        "nothing was started"
    );
}

// `guard check` judges as the daemon would: `pkill -f` of a pattern in
// the checker's own command line (which holds the command it checks) is
// allowed, while one matching the daemon's (`herd serve`) is still blocked.
#[test]
fn guard_check_ignores_the_checkers_own_command_line() {
    let env = Env::new();
    let out = env.run(&["guard", "check", "--", "pkill -f ANYTHING"]);
    assert_eq!(out.status.code(), Some(0), "{}", stdout(&out));
    assert_eq!(stdout(&out).trim(), "allow");
    let out = env.run(&["guard", "check", "--", "pkill -f 'herd serve'"]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
}
