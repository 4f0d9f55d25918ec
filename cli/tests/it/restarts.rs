//! Restart policies (B46) through the real daemon: `run --restart on-failure|always
//! --max-restarts N --restart-delay D`, separators in one log, `retry` events, one
//! completion with the number of runs, kills during the back-off, per-run time
//! limits and a daemon SIGKILL between runs.

use std::time::Duration;

use crate::support::{Env, stderr, stdout, wait_until};

/// The owner's queued events, taken, by type.
fn take_events(env: &Env, owner: &str) -> Vec<serde_json::Value> {
    env.ok(&["events", "--json", "--owner", owner])
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .collect()
}

fn of_type<'a>(events: &'a [serde_json::Value], kind: &str) -> Vec<&'a serde_json::Value> {
    events.iter().filter(|e| e["type"] == kind).collect()
}

/// Waits for `id` to end; the wait's exit code.
fn wait_end(env: &Env, id: &str) -> Option<i32> {
    env.run(&["wait", id, "--timeout", "60"]).status.code()
}

#[test]
fn b46_on_failure_runs_again_with_separators_retry_events_and_one_completion() {
    let env = Env::new();
    let id = env.start_json(&[
        "--owner",
        "rs",
        "--notify",
        "--restart",
        "on-failure",
        "--max-restarts",
        "2",
        "--restart-delay",
        "100ms",
        "--",
        "echo attempt; exit 3",
    ]);
    assert_eq!(wait_end(&env, &id), Some(1));
    let log = env.ok(&["logs", &id]);
    assert_eq!(log.matches("attempt").count(), 3, "{log}");
    assert!(
        log.contains("── herd: run 2 of 3 (previous exit 3) ──\n"),
        "{log}"
    );
    assert!(
        log.contains("── herd: run 3 of 3 (previous exit 3) ──\n"),
        "{log}"
    );
    let events = take_events(&env, "rs");
    let retries = of_type(&events, "retry");
    assert_eq!(
        retries
            .iter()
            .map(|e| e["run"].as_u64())
            .collect::<Vec<_>>(),
        [Some(2), Some(3)],
        "{events:?}"
    );
    assert_eq!(retries[0]["previous"], "exit 3");
    let completions = of_type(&events, "completion");
    assert_eq!(completions.len(), 1, "{events:?}");
    assert_eq!(completions[0]["runs"], 3);
    assert_eq!(completions[0]["exit_code"], 3);
    assert_eq!(env.poll_json(&id)["exit_code"], 3);
}

#[test]
fn b46_on_failure_stops_at_the_first_success() {
    let env = Env::new();
    let count = env.scratch().join("count");
    let command = format!(
        "n=$(cat {f} 2>/dev/null || echo 0); n=$((n+1)); echo $n > {f}; echo run-$n; [ $n -ge 2 ]",
        f = count.display()
    );
    let id = env.start_json(&[
        "--owner",
        "ok",
        "--notify",
        "--restart",
        "on-failure",
        "--restart-delay",
        "100ms",
        "--",
        &command,
    ]);
    assert_eq!(wait_end(&env, &id), Some(0));
    let completions: Vec<serde_json::Value> = take_events(&env, "ok")
        .into_iter()
        .filter(|e| e["type"] == "completion")
        .collect();
    assert_eq!(completions.len(), 1);
    assert_eq!(completions[0]["runs"], 2);
    assert_eq!(completions[0]["exit_code"], 0);
}

#[test]
fn b46_always_runs_until_max_restarts_even_after_success() {
    let env = Env::new();
    let id = env.start_json(&[
        "--owner",
        "al",
        "--notify",
        "--restart",
        "always",
        "--max-restarts",
        "2",
        "--restart-delay",
        "100ms",
        "--",
        "echo hello",
    ]);
    assert_eq!(wait_end(&env, &id), Some(0));
    let log = env.ok(&["logs", &id]);
    assert_eq!(log.matches("hello").count(), 3, "{log}");
    assert!(log.contains("(previous exit 0)"), "{log}");
    let events = take_events(&env, "al");
    assert_eq!(of_type(&events, "retry").len(), 2, "{events:?}");
    let completions = of_type(&events, "completion");
    assert_eq!(completions.len(), 1, "{events:?}");
    assert_eq!(completions[0]["runs"], 3);
}

#[test]
fn b46_a_kill_during_the_backoff_ends_the_session_with_one_completion() {
    let env = Env::new();
    let id = env.start_json(&[
        "--owner",
        "kb",
        "--notify",
        "--restart",
        "always",
        "--restart-delay",
        "5m",
        "--",
        "echo once",
    ]);
    wait_until(Duration::from_secs(20), || {
        env.ok(&["logs", &id]).contains("once")
    })
    .expect("the first run printed");
    env.ok(&["kill", &id]);
    assert_eq!(wait_end(&env, &id), Some(1));
    let events = take_events(&env, "kb");
    let completions = of_type(&events, "completion");
    assert_eq!(completions.len(), 1, "{events:?}");
    assert_eq!(completions[0]["completion_reason"], "killed");
    assert_eq!(completions[0]["runs"], 1);
    assert!(of_type(&events, "retry").is_empty(), "{events:?}");
    assert!(!env.ok(&["logs", &id]).contains("── herd: run 2"));
}

#[test]
fn b46_the_time_limit_applies_to_each_run() {
    let env = Env::new();
    let id = env.start_json(&[
        "--owner",
        "tl",
        "--notify",
        "--restart",
        "on-failure",
        "--max-restarts",
        "1",
        "--restart-delay",
        "100ms",
        // Long enough for each run to print `start` before its limit on a loaded
        // machine (a 1 s one could end a run before that).
        "--time-limit",
        "5",
        "--",
        "echo start; sleep 30",
    ]);
    assert_eq!(wait_end(&env, &id), Some(1));
    let log = env.ok(&["logs", &id]);
    assert_eq!(log.matches("start").count(), 2, "{log}");
    assert!(log.contains("(previous run's time limit)"), "{log}");
    let events = take_events(&env, "tl");
    let completions = of_type(&events, "completion");
    assert_eq!(completions.len(), 1, "{events:?}");
    assert_eq!(completions[0]["runs"], 2);
}

#[test]
fn b46_a_daemon_sigkill_between_runs_keeps_the_count_and_runs_each_once() {
    let env = Env::new();
    let runs = env.scratch().join("runs");
    let command = format!("echo ran >> {}; echo attempt; exit 1", runs.display());
    let id = env.start_json(&[
        "--owner",
        "dk",
        "--notify",
        "--restart",
        "on-failure",
        "--max-restarts",
        "2",
        // The daemon is killed in the first delay: long enough that the second run
        // has not begun by then on a loaded machine.
        "--restart-delay",
        "5s",
        "--",
        &command,
    ]);
    wait_until(Duration::from_secs(20), || {
        std::fs::read_to_string(&runs).is_ok_and(|t| t.lines().count() == 1)
    })
    .expect("the first run ran");
    env.crash_daemon();
    // The next daemon (started by this call) re-attaches the session mid-policy.
    assert_eq!(wait_end(&env, &id), Some(1));
    let ran = std::fs::read_to_string(&runs).expect("the runs file");
    assert_eq!(ran.lines().count(), 3, "each run exactly once: {ran}");
    let completions: Vec<serde_json::Value> = take_events(&env, "dk")
        .into_iter()
        .filter(|e| e["type"] == "completion")
        .collect();
    assert_eq!(completions.len(), 1, "{completions:?}");
    assert_eq!(completions[0]["runs"], 3);
}

#[test]
fn b46_bad_restart_values_are_refused() {
    let env = Env::new();
    for args in [
        &["--restart", "sometimes"][..],
        &["--restart", "always", "--max-restarts", "0"],
        &["--restart", "always", "--max-restarts", "10001"],
        &["--restart", "always", "--restart-delay", "10ms"],
        &["--restart", "always", "--restart-delay", "6m"],
        &["--restart", "always", "--restart-delay", "soon"],
        &["--max-restarts", "3"],
    ] {
        let mut all = vec!["run"];
        all.extend_from_slice(args);
        all.extend(["--", "true"]);
        let out = env.run(&all);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}{}",
            stdout(&out),
            stderr(&out)
        );
    }
}
