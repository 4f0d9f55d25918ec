//! Readiness (B45) through the real daemon: `run --ready PATTERN`, `--ready-port N`,
//! `wait --ready`, the `ready` event and the mark's durability.

use std::time::Duration;

use crate::support::{Env, stderr, stdout, wait_until};

/// A TCP port free on 127.0.0.1 right now.
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("an ephemeral port can be bound")
        .port()
}

/// The owner's queued events of `kind`, taken.
fn take_events(env: &Env, owner: &str, kind: &str) -> Vec<serde_json::Value> {
    env.ok(&["events", "--json", "--owner", owner])
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["type"] == kind)
        .collect()
}

#[test]
fn b45_ready_by_pattern_wait_ready_returns_and_the_ready_event_comes_once() {
    let env = Env::new();
    let go = env.scratch().join("go");
    let command = format!(
        "echo starting; echo 'listening on 8080'; while [ ! -e {go} ]; do sleep 0.02; done; echo 'listening on 8081'; echo second-done; exec sleep 60",
        go = go.display()
    );
    let id = env.start_json(&[
        "--owner",
        "rdy",
        "--notify",
        "--ready",
        "listening on [0-9]+",
        "--",
        &command,
    ]);
    let out = env.run(&["wait", &id, "--ready", "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert!(stdout(&out).contains("ready at"), "{}", stdout(&out));
    let row = env.ps_row(&["--owner", "rdy"], &id).expect("listed");
    let ready_at = row["ready_at"]
        .as_str()
        .expect("ready_at in ps --json")
        .to_owned();
    assert_eq!(env.poll_json(&id)["ready_at"], ready_at.as_str());

    // A second matching line changes nothing: one event, the first time kept.
    std::fs::write(&go, b"").expect("scratch is writable");
    wait_until(Duration::from_secs(20), || {
        env.ok(&["logs", &id]).contains("second-done")
    })
    .expect("the job printed its second line");
    let events = take_events(&env, "rdy", "ready");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["by"], "pattern");
    assert_eq!(events[0]["detail"], "listening on 8080");
    assert_eq!(events[0]["event_id"], format!("ready:{id}").as_str());
    assert_eq!(env.poll_json(&id)["ready_at"], ready_at.as_str());
    env.ok(&["kill", &id]);
}

#[test]
fn b45_a_ready_pattern_matches_the_redacted_line_not_the_secret() {
    let env = Env::new();
    // The token is masked before the pattern sees the line: a pattern for the raw
    // token never matches, one for the line around it does.
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let command = format!("echo 'token {token} loaded'; echo done-printing; exec sleep 60");
    let id = env.start_json(&["--ready", "ghp_[A-Za-z0-9]{36}", "--", &command]);
    wait_until(Duration::from_secs(20), || {
        env.ok(&["logs", &id]).contains("done-printing")
    })
    .expect("the job printed");
    let out = env.run(&["wait", &id, "--ready", "--timeout", "1"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "timed out, not ready: {}",
        stdout(&out)
    );
    assert!(env.poll_json(&id)["ready_at"].is_null());
    env.ok(&["kill", &id]);

    let id = env.start_json(&["--ready", "^token .* loaded$", "--", &command]);
    let out = env.run(&["wait", &id, "--ready", "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    env.ok(&["kill", &id]);
}

#[test]
fn b45_wait_ready_on_a_job_that_ends_unready_exits_4() {
    let env = Env::new();
    let id = env.start_json(&["--ready", "never printed", "--", "echo something else"]);
    let out = env.run(&["wait", &id, "--ready", "--timeout", "20"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    assert!(env.poll_json(&id)["ready_at"].is_null());
}

#[test]
fn b45_ready_port_counts_a_listener_of_the_jobs_own_tree() {
    let env = Env::new();
    let port = free_port().to_string();
    // The listener is a grandchild of the job's shell.
    let command = format!(
        "python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.1\", {port})); s.listen(); time.sleep(60)' & wait"
    );
    let id = env.start_json(&[
        "--notify",
        "--owner",
        "rp",
        "--ready-port",
        &port,
        "--",
        &command,
    ]);
    let out = env.run(&["wait", &id, "--ready", "--timeout", "30"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let events = take_events(&env, "rp", "ready");
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["by"], "port");
    env.ok(&["kill", &id]);
}

#[test]
fn b45_a_listener_outside_the_tree_on_the_port_does_not_count() {
    let env = Env::new();
    // Someone else's server already holds 127.0.0.1:PORT.
    let outside = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = outside.local_addr().expect("addr").port().to_string();
    let go = env.scratch().join("go");
    // The job listens on the same port on another loopback address once told to.
    let command = format!(
        "while [ ! -e {go} ]; do sleep 0.02; done; exec python3 -c 'import socket,time; s=socket.socket(); s.bind((\"127.0.0.2\", {port})); s.listen(); time.sleep(60)'",
        go = go.display()
    );
    let id = env.start_json(&["--ready-port", &port, "--", &command]);
    // The port is taken the whole time, by a process outside the job's tree: the job
    // does not become ready (the daemon looks every 100 ms to 1 s).
    let out = env.run(&["wait", &id, "--ready", "--timeout", "2.5"]);
    assert_eq!(out.status.code(), Some(1), "not ready: {}", stdout(&out));
    assert!(env.poll_json(&id)["ready_at"].is_null());
    std::fs::write(&go, b"").expect("scratch is writable");
    let out = env.run(&["wait", &id, "--ready", "--timeout", "30"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    drop(outside);
    env.ok(&["kill", &id]);
}

#[test]
fn b45_the_ready_mark_survives_a_daemon_crash() {
    let env = Env::new();
    let id = env.start_json(&["--ready", "up", "--", "echo up; exec sleep 60"]);
    env.ok(&["wait", &id, "--ready", "--timeout", "20"]);
    let before = env.poll_json(&id)["ready_at"].clone();
    assert!(before.is_string(), "{before}");
    env.crash_daemon();
    // The next daemon re-attaches the job with its mark.
    assert_eq!(env.poll_json(&id)["ready_at"], before);
    env.ok(&["wait", &id, "--ready", "--timeout", "20"]);
    env.ok(&["kill", &id]);
    // A finished session's receipt keeps it.
    assert_eq!(env.poll_json(&id)["ready_at"], before);
}

#[test]
fn b45_a_bad_ready_pattern_or_port_is_refused_at_submission() {
    let env = Env::new();
    let out = env.run(&["run", "--ready", "listening (on", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a valid regular expression"),
        "{}",
        stderr(&out)
    );
    for port in ["0", "65536", "-1", "http"] {
        let out = env.run(&["run", "--ready-port", port, "--", "true"]);
        assert_eq!(out.status.code(), Some(2), "{port}: {}", stderr(&out));
    }
    assert!(env.ps_rows(&["--all"]).is_empty(), "nothing ran");
}

/// MCP: `terminal` takes `ready`, `process` `wait` with `ready: true` returns once
/// the job is ready, and the agent is told once, by one `ready` notice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b45_mcp_terminal_ready_and_process_wait_ready() {
    use crate::mcp::{call, connect, session_id};
    use serde_json::json;
    let env = Env::new();
    let client = connect(&env).await;
    let (started, first, is_error) = call(
        &client,
        "terminal",
        json!({"command": "echo warming; echo 'server up'; exec sleep 60", "background": true, "ready": "server up"}),
    )
    .await;
    assert!(!is_error, "{started}");
    let id = session_id(&started);
    let (waited, notices, is_error) = call(
        &client,
        "process",
        json!({"action": "wait", "session_id": id, "ready": true, "timeout": 20}),
    )
    .await;
    assert!(!is_error, "{waited}");
    assert_eq!(waited["status"], "ready", "{waited}");
    assert!(waited["ready_at"].is_string(), "{waited}");
    // The notice is published just after the mark: it comes with the terminal call
    // itself (on a busy machine the job is ready before that call answers), with the
    // wait, or with a later call (asked until a deadline), and only once.
    let mut seen: Vec<String> = first.into_iter().chain(notices).collect();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let count = |seen: &[String]| seen.iter().filter(|n| n.contains("is ready")).count();
    while count(&seen) == 0 && std::time::Instant::now() < deadline {
        let (_, more, _) = call(&client, "process", json!({"action": "list"})).await;
        seen.extend(more);
    }
    let (_, last, _) = call(&client, "process", json!({"action": "list"})).await;
    seen.extend(last);
    assert_eq!(count(&seen), 1, "{seen:?}");
    let (refused, _, is_error) = call(
        &client,
        "terminal",
        json!({"command": "true", "background": true, "ready_port": 0}),
    )
    .await;
    assert!(is_error, "{refused}");
    let (_, _, _) = call(
        &client,
        "process",
        json!({"action": "kill", "session_id": id}),
    )
    .await;
    client.cancel().await.expect("the client closes");
}
