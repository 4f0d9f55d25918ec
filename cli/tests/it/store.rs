//! The store (B38): finished sessions, their results and logs stay
//! answerable by id and name whatever other owners do, across daemon restarts by
//! crash and by `--keep-jobs`, until `result_ttl` or the log budget evicts them;
//! an evicted one answers "expired on DATE". Real daemons, real jobs, real SIGKILLs.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Conn, Env, alive, finished_job, session_id, stderr, stdout, wait_until};

/// A token the redactor masks (a GitHub classic token's shape).
const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";

/// `poll`, `wait` and `logs` of `id_or_name` answer the job's exit 3 and its output.
fn assert_answers(env: &Env, id_or_name: &str, id: &str, name: &str) {
    let poll = env.run(&["poll", id_or_name, "--json"]);
    assert_eq!(
        poll.status.code(),
        Some(0),
        "poll {id_or_name}: {}",
        stderr(&poll)
    );
    let poll: Value = serde_json::from_str(&stdout(&poll)).expect("poll prints JSON");
    assert_eq!(poll["session_id"], id, "{poll}");
    assert_eq!(poll["exit_code"], 3, "{poll}");
    let wait = env.run(&["wait", id_or_name, "--json", "--timeout", "5"]);
    let wait_json: Value = serde_json::from_str(&stdout(&wait)).expect("wait prints JSON");
    assert_eq!(wait_json["exit_code"], 3, "{wait_json}");
    let logs = env.ok(&["logs", id_or_name]);
    assert!(logs.contains(&format!("result-of-{name}")), "{logs}");
}

#[test]
fn b38_300_jobs_of_another_owner_leave_an_owners_result_answerable() {
    let env = Env::new();
    let id = finished_job(&env, "alice", "alices-build");
    let mut conn = Conn::open(&env, "test");
    let mut others = Vec::new();
    for _ in 0..300 {
        let spawned = conn.call("spawn", json!({"command": "true", "owner": "bob"}));
        others.push(
            spawned["result"]["session_id"]
                .as_str()
                .unwrap_or_else(|| panic!("spawn failed: {spawned}"))
                .to_owned(),
        );
    }
    for other in &others {
        let waited = conn.call("wait", json!({"id": other, "timeout_seconds": 30}));
        assert_eq!(waited["result"]["status"], "exited", "{waited}");
    }
    // Every one of bob's 300 is listed (no count cap), and alice's job answers by
    // id and by name with its code and output.
    let listed = conn.call(
        "list",
        json!({"owner": "bob", "state": "finished", "limit": 1000}),
    );
    let n_bob = listed["result"]["processes"].as_array().map_or(0, Vec::len);
    assert_eq!(n_bob, 300, "{}", listed["result"]["more"]);
    assert_answers(&env, &id, &id, "alices-build");
    assert_answers(&env, "alices-build", &id, "alices-build");
}

/// After the daemon restarts (`restart` runs it as it was run), a finished job is
/// listed, answers by id and name, and restarts with the command as given while
/// every route shows the redacted one.
fn assert_survived_restart(env: &Env, id: &str, name: &str, marker: &std::path::Path) {
    let row = env
        .ps_row(&["--all"], id)
        .unwrap_or_else(|| panic!("{id} not listed after the restart"));
    assert_eq!(row["exit_code"], 3, "{row}");
    assert_eq!(row["name"], name, "{row}");
    let shown = row["command"].as_str().unwrap_or_default();
    assert!(
        !shown.contains(TOKEN),
        "the command is shown redacted: {shown}"
    );
    assert_answers(env, id, id, name);
    assert_answers(env, name, id, name);
    let _ = std::fs::remove_file(marker);
    let again = env.json(&["restart", name, "--json"]);
    assert_eq!(again["replaces"], id, "{again}");
    let new_id = session_id(&again);
    let out = env.run(&["wait", &new_id, "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    // The command ran as given: the token it wrote is the real one, not the mask.
    assert_eq!(
        std::fs::read_to_string(marker).expect("the restarted job ran"),
        TOKEN
    );
}

/// A named job whose command holds a secret, run to exit 3.
fn secret_job(env: &Env, name: &str) -> (String, std::path::PathBuf) {
    let marker = env.scratch().join(format!("{name}.out"));
    let command = format!(
        "printf %s {TOKEN} > {}; echo result-of-{name}; exit 3",
        marker.display()
    );
    let id = env.start_json(&["--name", name, "--", &command]);
    let out = env.run(&["wait", &id, "--timeout", "20"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    (id, marker)
}

#[test]
fn b38_a_sigkilled_daemon_forgets_no_finished_session() {
    let env = Env::new();
    let (id, marker) = secret_job(&env, "nightly");
    env.crash_daemon();
    assert_survived_restart(&env, &id, "nightly", &marker);
}

#[test]
fn b38_shutdown_keep_jobs_forgets_no_finished_session() {
    let env = Env::new();
    let (id, marker) = secret_job(&env, "deploy");
    let stopped = env.json(&["shutdown", "--keep-jobs", "--json"]);
    assert_eq!(stopped["jobs"], "kept", "{stopped}");
    assert_survived_restart(&env, &id, "deploy", &marker);
    // And once more through SIGTERM.
    let pid = env.daemon_pid().expect("a daemon runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGTERM,
    )
    .expect("the daemon can be signalled");
    wait_until(Duration::from_secs(10), || !alive(pid)).expect("SIGTERM stops the daemon");
    assert_answers(&env, &id, &id, "deploy");
}

#[test]
fn b38_an_evicted_session_answers_expired_on_its_date_with_exit_2() {
    let env = Env::new();
    // Long enough that `wait` still finds the result on a loaded machine (a 1 s one
    // could expire before it asks).
    std::fs::write(env.home().join("config.toml"), "result_ttl_seconds = 10\n")
        .expect("write the config");
    let id = finished_job(&env, "cli", "short-lived");
    // Eviction runs as receipts are stored: later finishes evict it once its
    // time is up.
    let expired = wait_until(Duration::from_secs(60), || {
        env.ok(&["run", "--", "true"]);
        let out = env.run(&["poll", &id]);
        out.status.code() == Some(2) && stderr(&out).contains("expired on")
    });
    let out = env.run(&["poll", &id]);
    assert!(expired.is_ok(), "never expired: {}", stderr(&out));
    let message = stderr(&out);
    assert!(
        message.contains(&id) && message.contains("result_ttl"),
        "{message}"
    );
    // By name too, and `wait` and `logs` say the same.
    for args in [
        vec!["poll", "short-lived"],
        vec!["wait", id.as_str()],
        vec!["logs", id.as_str()],
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("expired on"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    // An id that never existed is still "no session".
    let out = env.run(&["poll", "proc_0123456789ab"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(!stderr(&out).contains("expired"), "{}", stderr(&out));
}

#[test]
fn b38_ps_all_shows_a_recent_window_and_counts_the_older() {
    let env = Env::new();
    let id = finished_job(&env, "cli", "recent");
    assert!(env.ps_row(&["--all"], &id).is_some(), "{id} not listed");
    // Once it finished more than a second ago, a 1 s window leaves it out and
    // counts it.
    let mut out = env.run(&["ps", "--all", "--since", "1s"]);
    let left_out = wait_until(Duration::from_secs(10), || {
        out = env.run(&["ps", "--all", "--since", "1s"]);
        out.status.success() && !stdout(&out).contains(&id)
    });
    assert!(left_out.is_ok(), "{}", stdout(&out));
    assert!(
        stderr(&out).contains("1 older finished session not shown")
            && stderr(&out).contains("--since"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_spawn_retried_with_its_request_key_after_a_daemon_crash_starts_once() {
    let env = Env::new();
    let marker = env.scratch().join("starts");
    let spawn = json!({
        "command": format!("echo started >> {}", marker.display()),
        "owner": "far-home",
        "request_key": "home1-27-1",
    });
    let mut first = Conn::open(&env, "test");
    let one = first.call("spawn", spawn.clone());
    let id = one["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("spawn failed: {one}"))
        .to_owned();
    drop(first);
    env.ok(&["wait", &id]);
    // The daemon dies; the retry reaches the next one.
    env.crash_daemon();
    let mut second = Conn::open(&env, "test");
    let again = second.call("spawn", spawn);
    assert_eq!(again["result"]["session_id"], id.as_str(), "{again}");
    assert_eq!(
        std::fs::read_to_string(&marker).expect("the job ran"),
        "started\n",
        "the retry started nothing"
    );
    // A refusal is remembered as a refusal.
    let refused = json!({"command": "true", "owner": "far-home", "request_key": "home1-27-2", "time_limit_seconds": 0});
    let no = second.call("spawn", refused.clone());
    assert!(no["error"].is_object(), "{no}");
    env.crash_daemon();
    let mut third = Conn::open(&env, "test");
    let still_no = third.call("spawn", refused);
    assert_eq!(still_no["error"]["code"], no["error"]["code"], "{still_no}");
}

/// The persistence crate's fixtures: files as the release before the store wrote them.
fn fixture(name: &str) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../persistence/tests/data")
        .join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn b27_b29_b38_a_home_written_by_the_release_before_the_store_loads_with_everything_answerable() {
    let env = Env::new();
    let home = env.home();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs_f64();
    // results/<id>.json with its log, finished a minute ago.
    let mut receipt: Value =
        serde_json::from_str(&fixture("v1_result_receipt.json")).expect("the fixture is JSON");
    receipt["started_at"] = json!(now - 120.0);
    receipt["finished_at"] = json!(now - 60.0);
    let id = "proc_00000000c0de";
    for dir in ["results", "logs/sessions"] {
        std::fs::create_dir_all(home.join(dir)).expect("a home directory");
    }
    std::fs::write(
        home.join("results").join(format!("{id}.json")),
        receipt.to_string(),
    )
    .expect("write the receipt file");
    std::fs::write(
        home.join("logs/sessions").join(format!("{id}.log")),
        receipt["output"].as_str().expect("output"),
    )
    .expect("write the log");
    // A version-1 state.db with undelivered completions, and a processes.json whose
    // sessions' processes are long gone.
    rusqlite::Connection::open(home.join("state.db"))
        .and_then(|c| {
            c.execute_batch(&fixture("v1_ledger.sql"))?;
            // A completion as the release wrote it, committed a minute ago (one older
            // than result_ttl would expire), not yet delivered.
            let event = json!({
                "type": "completion", "session_id": "proc_00000000beef", "task_id": "t",
                "owner_task_id": "sa-child-1", "command": "make", "exit_code": 2,
                "completion_reason": "exited", "output": "make: *** [all] Error 2\n",
                "output_cut": false, "log_path": "/h/logs/sessions/proc_00000000beef.log",
                "started_at": "2026-12-03T09:00:00Z", "finished_at": "2026-12-03T09:00:05Z",
            });
            c.execute(
                "INSERT INTO completions (completion_id, session_id, owner_task_id, task_id,
                     session_key, event, created_at)
                 VALUES ('proc_00000000beef', 'proc_00000000beef', 'sa-child-1', 't', '', ?1, ?2)",
                rusqlite::params![event.to_string(), now - 60.0],
            )
        })
        .expect("build the v1 ledger");
    std::fs::write(home.join("processes.json"), fixture("v1_checkpoint.json"))
        .expect("write the checkpoint");

    let poll = env.poll_json(id);
    assert_eq!(poll["exit_code"], 3, "{poll}");
    assert_eq!(poll["command"], "cargo test --token=***", "{poll}");
    let logs = env.ok(&["logs", id]);
    assert!(logs.contains("1 failed"), "{logs}");
    let out = env.run(&["wait", id, "--json", "--timeout", "5"]);
    let waited: Value = serde_json::from_str(&stdout(&out)).expect("wait prints JSON");
    assert_eq!(waited["exit_code"], 3, "{waited}");
    assert!(
        !home.join("results").exists(),
        "the receipt files were imported"
    );
    // The checkpointed sessions were closed (their pids are not theirs) and are listed.
    let rows = env.ps_rows(&["--all"]);
    for closed in [id, "proc_0123456789ab", "proc_ba9876543210"] {
        assert!(
            rows.iter().any(|r| r["session_id"] == closed),
            "{closed} not listed: {rows:?}"
        );
    }
    // The ledger's undelivered completion is delivered once, to its owner.
    let events = env.ok(&["events", "--owner", "sa-child-1"]);
    assert!(events.contains("proc_00000000beef"), "{events}");
    let again = env.ok(&["events", "--owner", "sa-child-1"]);
    assert!(
        !again.contains("proc_00000000beef"),
        "first: {events}\nagain: {again}"
    );
    let version: i64 = rusqlite::Connection::open(home.join("state.db"))
        .and_then(|c| c.query_row("PRAGMA user_version", [], |r| r.get(0)))
        .expect("read the version");
    assert_eq!(version, herd_persistence::LEDGER_VERSION);
}
