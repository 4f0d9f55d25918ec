//! Running sessions in the store (B27, B28): what a running session was
//! started with survives a daemon restart by SIGKILL and by `shutdown --keep-jobs`
//! (the command as given, its name, owner, kill_leftovers and limits, so a restart
//! repeats it), a home written by the release before the store (`processes.json`,
//! `processes.pending/`) is imported, and a kill in its grace window when the daemon
//! dies is reported by the next. Real daemons, real jobs, real SIGKILLs.

use std::path::Path;
use std::time::Duration;

use herd_persistence::{CheckpointEntry, CheckpointStore, Home};
use serde_json::{Value, json};

use crate::support::{Env, alive, wait_until};

/// A token the redactor masks (a GitHub classic token's shape).
const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/// SIGKILLs the home's daemon and waits until it is gone.
fn crash_daemon(env: &Env) {
    let pid = env.daemon_pid().expect("the daemon wrote its pid file");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the daemon can be signalled");
    wait_until(Duration::from_secs(5), || !alive(pid))
        .unwrap_or_else(|()| panic!("daemon {pid} did not die of SIGKILL"));
}

/// The store's row of a running session, read as the next daemon would.
fn row(env: &Env, id: &str) -> Option<CheckpointEntry> {
    CheckpointStore::new(&Home::new(env.home()))
        .load()
        .expect("the store loads")
        .entries
        .into_iter()
        .find(|e| e.session.id == id)
}

/// The `ps --all --json` row of a session.
fn listed(env: &Env, id: &str) -> Value {
    let rows = env.json(&["ps", "--all", "--json"]);
    rows["processes"]
        .as_array()
        .and_then(|r| r.iter().find(|r| r["session_id"] == id).cloned())
        .unwrap_or_else(|| panic!("{id} is not listed: {rows}"))
}

/// Starts a job with options that a restart must repeat, restarts the daemon with
/// `restart_daemon`, and checks the session is still running with its options and
/// that `herd restart` repeats the command as given (its secret included) with them.
fn running_session_keeps_its_options(restart_daemon: impl FnOnce(&Env)) {
    let env = Env::new();
    let ran = env.scratch().join("ran");
    let command = format!("echo {TOKEN} > {}; echo up; sleep 300", ran.display());
    let info = env.json(&[
        "run",
        "--json",
        "--name",
        "live-opts",
        "--owner",
        "agent-x",
        "--kill-leftovers",
        "--pids",
        "64",
        "--",
        &command,
    ]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    let entry = row(&env, &id).expect("the spawn's row was committed before it answered");
    assert_eq!(
        entry.session.command_given.as_deref(),
        Some(command.as_str())
    );
    assert!(!entry.session.command.contains(TOKEN), "{entry:?}");
    wait_until(Duration::from_secs(10), || ran.exists()).expect("the job ran");

    restart_daemon(&env);

    let row_after = listed(&env, &id);
    assert_eq!(row_after["status"], "running", "{row_after}");
    assert_eq!(row_after["name"], "live-opts", "{row_after}");
    assert!(
        !row_after.to_string().contains(TOKEN),
        "answers show the redacted command: {row_after}"
    );
    std::fs::remove_file(&ran).expect("the marker is removable");
    let restarted = env.json(&["restart", "live-opts", "--json"]);
    let new_id = restarted["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("restart answered {restarted}"))
        .to_owned();
    assert_ne!(new_id, id);
    wait_until(Duration::from_secs(10), || {
        std::fs::read_to_string(&ran).is_ok_and(|t| t.trim() == TOKEN)
    })
    .expect("the restart ran the command as given, secret included");
    let new = row(&env, &new_id).expect("the restarted session has its row");
    assert_eq!(new.session.owner_task_id, "agent-x");
    assert_eq!(new.session.name.as_deref(), Some("live-opts"));
    let options = new.session.options.expect("options are stored");
    assert_eq!(options.kill_leftovers, Some(true), "{options:?}");
    assert_eq!(options.pids, Some(64), "{options:?}");
    assert_eq!(options.replaces.as_deref(), Some(id.as_str()));
    env.ok(&["kill", &new_id]);
}

#[test]
fn b27_b28_a_running_session_keeps_its_options_across_a_daemon_sigkill() {
    running_session_keeps_its_options(crash_daemon);
}

#[test]
fn b27_b28_a_running_session_keeps_its_options_across_shutdown_keep_jobs() {
    running_session_keeps_its_options(|env| {
        env.ok(&["shutdown", "--keep-jobs"]);
    });
}

/// A `sleep` of the test's own (not herd's child), and its `/proc` start time.
fn stray_sleep() -> (std::process::Child, u64) {
    let child = crate::support::raw_command(Path::new("sleep"))
        .arg("300")
        .spawn()
        .expect("sleep starts");
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", child.id())).expect("its stat");
    let start = herd_persistence::parse_stat_start_time(&stat).expect("a start time");
    (child, start)
}

/// A checkpoint entry exactly as the release before the store wrote it.
fn old_entry(home: &Path, id: &str, pid: u32, start: u64, name: &str) -> Value {
    json!({
        "writer": {"pid": 1, "start_time": 1},
        "id": id, "command": "sleep 300", "pid": pid, "pgid": pid, "start_time": start,
        "task_id": "t", "owner_task_id": "old-owner", "session_key": "", "mode": "pipe",
        "notify": false, "watch_patterns": [], "heartbeat_seconds": 0,
        "completion_output_chars": 0, "persist_on_release": false,
        "log_path": home.join(format!("logs/sessions/{id}.log")),
        "cwd": "/", "started_at": 1_790_000_000.0, "name": name,
    })
}

#[test]
fn b27_b28_running_sessions_of_the_release_before_the_store_are_imported_and_readopted() {
    let env = Env::new();
    let home = env.home();
    let (mut full, full_start) = stray_sleep();
    let (mut pending, pending_start) = stray_sleep();
    let full_id = "proc_00000000f011";
    let pending_id = "proc_00000000f012";
    let file = json!({"version": 1, "sessions": [
        old_entry(home, full_id, full.id(), full_start, "old-full"),
    ]});
    std::fs::write(home.join("processes.json"), file.to_string()).expect("processes.json");
    std::fs::write(home.join("processes.json.lock"), b"").expect("its lock");
    std::fs::create_dir(home.join("processes.pending")).expect("the pending dir");
    let entry = json!({"version": 1, "entry":
        old_entry(home, pending_id, pending.id(), pending_start, "old-pending")});
    std::fs::write(
        home.join("processes.pending")
            .join(format!("{pending_id}.json")),
        entry.to_string(),
    )
    .expect("a pending entry");

    for (id, name) in [(full_id, "old-full"), (pending_id, "old-pending")] {
        let row = listed(&env, id);
        assert_eq!(row["status"], "running", "{row}");
        assert_eq!(row["name"], name, "{row}");
    }
    for gone in ["processes.json", "processes.json.lock", "processes.pending"] {
        assert!(!home.join(gone).exists(), "{gone} was imported and removed");
    }
    assert!(row(&env, full_id).is_some() && row(&env, pending_id).is_some());
    // Taken over by the daemon: a crash of it leaves them for the next.
    crash_daemon(&env);
    assert_eq!(listed(&env, pending_id)["status"], "running");
    env.ok(&["kill", full_id]);
    env.ok(&["kill", "old-pending"]);
    for child in [&mut full, &mut pending] {
        let status = child.wait().expect("the sleep is reaped");
        assert!(!status.success(), "killed by herd: {status}");
    }
    // Their receipts' commits end their rows.
    wait_until(Duration::from_secs(10), || {
        row(&env, full_id).is_none() && row(&env, pending_id).is_none()
    })
    .expect("finished sessions leave the running rows");
}

#[test]
fn b17_b27_a_kill_in_its_grace_window_when_the_daemon_dies_is_reported_by_the_next() {
    let env = Env::new();
    std::fs::write(env.home().join("config.toml"), "kill_grace_seconds = 30\n").expect("config");
    let id = env.json(&[
        "run",
        "--json",
        "--",
        "trap '' TERM; echo up; while :; do sleep 0.2; done",
    ])["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    wait_until(Duration::from_secs(10), || {
        env.ok(&["logs", &id]).contains("up")
    })
    .expect("the job traps TERM");
    let mut kill = env
        .cmd(&["kill", &id, "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("herd kill starts");
    wait_until(Duration::from_secs(10), || {
        row(&env, &id).is_some_and(|e| e.kill_intent.is_some())
    })
    .expect("the kill's intent is committed before it begins");
    let intent = row(&env, &id).and_then(|e| e.kill_intent).expect("intent");
    assert_eq!(intent.source, "process_kill");
    crash_daemon(&env);
    let _ = kill.wait();

    // The next daemon: the job still runs (the shim's grace is 30 s), and says a
    // kill is under way.
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");
    let note = polled["note"].as_str().unwrap_or_default();
    assert!(
        note.contains("process_kill") && note.contains("in progress"),
        "{polled}"
    );
    // End the grace early; the completion is the kill's.
    let pid = i32::try_from(polled["pid"].as_i64().expect("pid")).expect("a pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the job can be signalled");
    let out = env.run(&["wait", &id, "--json", "--timeout", "20"]);
    let waited: Value =
        serde_json::from_str(&crate::support::stdout(&out)).expect("wait prints JSON");
    assert_eq!(waited["completion_reason"], "killed", "{waited}");
    assert_eq!(waited["termination_source"], "process_kill", "{waited}");
    wait_until(Duration::from_secs(10), || row(&env, &id).is_none())
        .expect("the finish removed the row");
}

#[test]
fn b38_restart_of_a_store_only_session_repeats_kill_leftovers_and_limits() {
    let env = Env::new();
    let mark = env.scratch().join("first-run");
    // The first run exits at once; the restart finds the mark and keeps running.
    let command = format!(
        "test -e {m} || {{ touch {m}; exit 0; }}; echo again; sleep 300",
        m = mark.display()
    );
    let id = env.json(&[
        "run",
        "--json",
        "--name",
        "store-opts",
        "--kill-leftovers",
        "--pids",
        "48",
        "--",
        &command,
    ])["session_id"]
        .as_str()
        .expect("session_id")
        .to_owned();
    let out = env.run(&["wait", &id, "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(0), "the first run exits 0");
    // After a crash the finished session is only in the store.
    crash_daemon(&env);
    let restarted = env.json(&["restart", "store-opts", "--json"]);
    let new_id = restarted["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("restart answered {restarted}"))
        .to_owned();
    let new = row(&env, &new_id).expect("the restarted session runs");
    let options = new.session.options.expect("options are stored");
    assert_eq!(options.kill_leftovers, Some(true), "{options:?}");
    assert_eq!(options.pids, Some(48), "{options:?}");
    assert_eq!(options.replaces.as_deref(), Some(id.as_str()));
    env.ok(&["kill", &new_id]);
}
