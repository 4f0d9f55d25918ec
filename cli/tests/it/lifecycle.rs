//! Lifecycle verbs against the real daemon: `run --time-limit` (a kill
//! source of its own that reaches `--persist` jobs and holds while no daemon runs)
//! and `herd restart` (the same command, cwd, mode and options in the caller's
//! current environment). Real jobs, real PTYs, a real daemon SIGKILLed mid-job.
//!
//! Terms (docs/behaviors.md, in these tests' words): a *kill source* says who ended a job
//! (B17); `time_limit` and `restarted` are explicit sources, so unlike a release
//! sweep they reach persistent jobs too. A *tree kill* (B15) ends the job's shell and
//! everything it started, which is why each test checks a child of the job as well.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, alive, stderr, stdout, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(30);

/// `herd args…` with `vars` set for that one run.
fn run_with(env: &Env, vars: &[(&str, &str)], args: &[&str]) -> Output {
    let mut cmd = env.cmd(args);
    for (k, v) in vars {
        cmd.env(k, v);
    }
    cmd.output().expect("the herd binary runs")
}

/// Parses the JSON `herd` printed, failing with what it said otherwise.
fn json_of(out: &Output, what: &str) -> Value {
    assert!(
        out.status.success(),
        "{what} failed with {:?}\nstdout: {}\nstderr: {}",
        out.status.code(),
        stdout(out),
        stderr(out)
    );
    serde_json::from_str(&stdout(out))
        .unwrap_or_else(|e| panic!("{what} printed invalid JSON ({e}): {}", stdout(out)))
}

fn id_of(info: &Value) -> String {
    info["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no session_id in {info}"))
        .to_owned()
}

/// Waits until the session's log holds `needle`, returning the log.
fn log_until(env: &Env, id: &str, needle: &str) -> String {
    let mut text = String::new();
    let found = wait_until(DEADLINE, || {
        text = std::fs::read_to_string(env.home().join("logs/sessions").join(format!("{id}.log")))
            .unwrap_or_default();
        text.contains(needle)
    });
    assert!(
        found.is_ok(),
        "{id}'s log never held {needle:?}; it holds {text:?}"
    );
    text
}

/// The pid the job printed as `child=<pid>`.
fn child_pid(log: &str) -> i32 {
    log.split(['\n', '\r'])
        .find_map(|l| l.trim().strip_prefix("child=")?.parse().ok())
        .unwrap_or_else(|| panic!("no child=<pid> line in {log:?}"))
}

/// `herd wait ID --json` (exit 1 for a job that did not exit 0: parsed either way).
fn wait_json(env: &Env, id: &str) -> Value {
    let out = env.run(&["wait", id, "--timeout", "60", "--json"]);
    serde_json::from_str(&stdout(&out)).unwrap_or_else(|e| {
        panic!(
            "herd wait printed invalid JSON ({e}): {}\nstderr: {}",
            stdout(&out),
            stderr(&out)
        )
    })
}

/// The job starts a child that would outlive a kill of the shell alone.
const TREE_JOB: &str = "sleep 300 & echo child=$!; sleep 300";

fn assert_killed_by(answer: &Value, source: &str) {
    assert_eq!(answer["status"], "exited", "{answer}");
    assert_eq!(answer["completion_reason"], "killed", "{answer}");
    assert_eq!(answer["termination_source"], source, "{answer}");
}

#[test]
fn b17_time_limit_kills_the_job_and_its_child_tree_with_reason_time_limit() {
    let env = Env::new();
    let info = env.json(&[
        "run",
        "--json",
        "--notify",
        "--owner",
        "tl",
        // Long enough for the job to print its child's pid first on a loaded
        // machine (a 2 s limit could end it before that).
        "--time-limit",
        "5s",
        "--",
        TREE_JOB,
    ]);
    assert_eq!(info["time_limit_seconds"], 5, "{info}");
    let id = id_of(&info);
    let child = child_pid(&log_until(&env, &id, "child="));

    let answer = wait_json(&env, &id);
    assert_killed_by(&answer, "time_limit");
    assert_eq!(answer["time_limit_seconds"], 5, "{answer}");
    wait_until(DEADLINE, || !alive(child))
        .unwrap_or_else(|()| panic!("the job's child {child} survived the time limit"));

    // Every answer names the source in the field kills use.
    let poll = env.json(&["poll", &id, "--json"]);
    assert_eq!(poll["termination_source"], "time_limit", "{poll}");
    let ps = env.json(&["ps", "--all", "--json"]);
    let row = ps["processes"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["session_id"] == id.as_str()))
        .unwrap_or_else(|| panic!("{id} is not in ps --all: {ps}"));
    assert_eq!(row["termination_source"], "time_limit", "{row}");
    let events = env.ok(&["events", "--owner", "tl"]);
    let completion: Value = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["type"] == "completion")
        .unwrap_or_else(|| panic!("no completion among the events: {events}"));
    assert_eq!(
        completion["termination_source"], "time_limit",
        "{completion}"
    );

    // A person reads how it ended.
    let human = env.run(&["wait", &id, "--timeout", "10"]);
    assert_eq!(
        human.status.code(),
        Some(1),
        "a killed job is a failed wait"
    );
    assert!(
        stdout(&human).contains(&format!("{id} killed (time limit 5s, SIGTERM)")),
        "wait says: {}",
        stdout(&human)
    );
    let table = env.ok(&["ps", "--all", "--owner", "tl"]);
    assert!(
        table.contains("killed (time limit 5s, SIGTERM)"),
        "ps says: {table}"
    );
}

#[test]
fn b17_time_limit_reaches_a_persist_job() {
    let env = Env::new();
    let info = env.json(&[
        "run",
        "--json",
        "--persist",
        "--time-limit",
        "5",
        "--",
        TREE_JOB,
    ]);
    assert_eq!(info["persist_on_release"], true, "{info}");
    let id = id_of(&info);
    let child = child_pid(&log_until(&env, &id, "child="));
    let answer = wait_json(&env, &id);
    assert_killed_by(&answer, "time_limit");
    wait_until(DEADLINE, || !alive(child))
        .unwrap_or_else(|()| panic!("the persistent job's child {child} survived"));
}

#[test]
fn b28_the_shim_kills_at_the_deadline_while_no_daemon_runs() {
    let env = Env::new();
    // Long enough that the daemon is gone before the deadline on a loaded machine.
    let info = env.json(&["run", "--json", "--time-limit", "8s", "--", TREE_JOB]);
    let id = id_of(&info);
    let pid = i32::try_from(info["pid"].as_i64().expect("pid")).expect("a pid fits i32");
    let child = child_pid(&log_until(&env, &id, "child="));

    // The daemon dies without a word; only the job's shim is left holding it.
    let daemon = env.daemon_pid().expect("the daemon wrote its pid file");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the daemon can be signalled");
    wait_until(DEADLINE, || !alive(daemon))
        .unwrap_or_else(|()| panic!("daemon {daemon} did not die of SIGKILL"));

    // No herd command runs here (one would start a daemon): the shim alone ends the
    // tree and says why in its exit record.
    wait_until(DEADLINE, || !alive(pid) && !alive(child)).unwrap_or_else(|()| {
        panic!("with no daemon, the job ({pid}, alive {}) or its child ({child}, alive {}) outlived its time limit", alive(pid), alive(child))
    });
    let record_path = env.home().join("run/shims").join(&id).join("exit.json");
    let mut record = Value::Null;
    wait_until(DEADLINE, || {
        record = std::fs::read_to_string(&record_path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        !record.is_null()
    })
    .unwrap_or_else(|()| panic!("the shim wrote no exit record at {}", record_path.display()));
    assert_eq!(record["killed_by"], "time_limit", "{record}");
    assert!(
        env.daemon_pid().is_none_or(|p| !alive(p)),
        "no daemon ran meanwhile"
    );

    // The next daemon concludes the session as the shim ended it.
    let answer = wait_json(&env, &id);
    assert_killed_by(&answer, "time_limit");
}

/// A directory of its own for a job to run in.
fn workdir(env: &Env) -> std::path::PathBuf {
    let dir = env.scratch().join("work");
    std::fs::create_dir_all(&dir).expect("the scratch dir is writable");
    dir
}

#[test]
fn restart_of_a_running_session_repeats_it_in_the_callers_environment() {
    let env = Env::new();
    let dir = workdir(&env);
    let dir_text = dir.to_str().expect("a UTF-8 temp path");
    // MY_TOKEN matches the credential deny-list (`*_TOKEN`): it reaches the job only
    // because it is forwarded, from whichever shell asks.
    let job = "echo tok=$MY_TOKEN; pwd; tty; sleep 300";
    let first = json_of(
        &run_with(
            &env,
            &[("MY_TOKEN", "first-value")],
            &[
                "run",
                "--json",
                "--pty",
                "--name",
                "web",
                "--cwd",
                dir_text,
                "--forward-env",
                "MY_TOKEN",
                "--time-limit",
                "1h",
                "--",
                job,
            ],
        ),
        "herd run",
    );
    let old = id_of(&first);
    log_until(&env, &old, "tok=first-value");

    let restarted = json_of(
        &run_with(
            &env,
            &[("MY_TOKEN", "second-value")],
            &["restart", "web", "--json"],
        ),
        "herd restart web",
    );
    let new = id_of(&restarted);
    assert_ne!(new, old, "{restarted}");
    assert_eq!(restarted["replaces"], old.as_str(), "{restarted}");
    assert_eq!(restarted["name"], "web", "{restarted}");
    assert_eq!(restarted["mode"], "pty", "{restarted}");
    assert_eq!(restarted["time_limit_seconds"], 3600, "{restarted}");
    assert_eq!(restarted["command"], job, "{restarted}");

    // The old one was killed as `restarted`, whole tree.
    let old_poll = env.json(&["poll", &old, "--json"]);
    assert_eq!(old_poll["status"], "exited", "{old_poll}");
    assert_eq!(old_poll["termination_source"], "restarted", "{old_poll}");
    let old_pid = i32::try_from(first["pid"].as_i64().expect("pid")).expect("a pid fits i32");
    assert!(!alive(old_pid), "the old job {old_pid} still runs");

    // The new one: same cwd and terminal, the caller's value now, and it says what
    // it replaced.
    let log = log_until(&env, &new, "/dev/pts/");
    assert!(log.contains("tok=second-value"), "new log: {log:?}");
    assert!(!log.contains("first-value"), "new log: {log:?}");
    let canonical = std::fs::canonicalize(&dir).expect("the workdir exists");
    assert!(
        log.contains(dir_text) || log.contains(canonical.to_str().unwrap_or(dir_text)),
        "the new job ran elsewhere than {dir_text}: {log:?}"
    );
    let new_poll = env.json(&["poll", "web", "--json"]);
    assert_eq!(
        new_poll["session_id"],
        new.as_str(),
        "the name moved on: {new_poll}"
    );
    assert_eq!(new_poll["replaces"], old.as_str(), "{new_poll}");
    assert_eq!(new_poll["status"], "running", "{new_poll}");
    env.ok(&["kill", &new]);
}

#[test]
fn restart_of_a_finished_session_runs_it_again() {
    let env = Env::new();
    let dir = workdir(&env);
    let dir_text = dir.to_str().expect("a UTF-8 temp path");
    let first = json_of(
        &run_with(
            &env,
            &[("MARK", "a")],
            &[
                "run",
                "--json",
                "--name",
                "once",
                "--cwd",
                dir_text,
                "--",
                "echo mark=$MARK; pwd",
            ],
        ),
        "herd run",
    );
    let old = id_of(&first);
    let done = wait_json(&env, &old);
    assert_eq!(done["exit_code"], 0, "{done}");

    let out = run_with(&env, &[("MARK", "b")], &["restart", "once"]);
    assert!(out.status.success(), "restart failed: {}", stderr(&out));
    let new = stdout(&out).trim().to_owned();
    assert!(
        new.starts_with("proc_") && new != old,
        "restart printed {new:?}"
    );
    let again = wait_json(&env, &new);
    assert_eq!(again["exit_code"], 0, "{again}");
    let log = log_until(&env, &new, "mark=");
    assert!(
        log.contains("mark=b"),
        "the restart ran in the old environment: {log:?}"
    );
    assert!(log.contains("work"), "the restart ran elsewhere: {log:?}");
    let poll = env.json(&["poll", &new, "--json"]);
    assert_eq!(poll["replaces"], old.as_str(), "{poll}");
    // A finished session is not killed: it keeps how it ended.
    let old_poll = env.json(&["poll", &old, "--json"]);
    assert_eq!(old_poll["completion_reason"], "exited", "{old_poll}");
    assert!(old_poll["termination_source"].is_null(), "{old_poll}");
}

#[test]
fn restart_of_an_unknown_id_exits_2_naming_ps_all() {
    let env = Env::new();
    let out = env.run(&["restart", "proc_0000deadbeef"]);
    assert_eq!(out.status.code(), Some(2), "stderr: {}", stderr(&out));
    assert!(
        stderr(&out).contains("herd ps --all"),
        "the error does not say how to find ids: {}",
        stderr(&out)
    );
}

#[test]
fn bad_time_limits_are_refused_naming_the_flag() {
    let env = Env::new();
    for bad in ["0", "0s", "5x", "4000d", "-3"] {
        let out = env.run(&["run", "--time-limit", bad, "--", "true"]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "--time-limit {bad}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("--time-limit"),
            "--time-limit {bad} is refused without naming the flag: {}",
            stderr(&out)
        );
    }
    // Nothing was started for any of them.
    assert!(
        !Path::new(&env.socket()).exists()
            || env.json(&["ps", "--all", "--json"])["processes"]
                .as_array()
                .is_some_and(Vec::is_empty),
        "a refused run started a job"
    );
}

/// Reads JSON-RPC lines from a raw `herd mcp` until the response with `id`.
fn response_to(lines: &mut impl Iterator<Item = std::io::Result<String>>, id: u64) -> Value {
    for line in lines {
        let line = line.expect("the server writes lines");
        let message: Value = serde_json::from_str(&line).expect("JSON-RPC");
        if message["id"] == serde_json::json!(id) {
            return message;
        }
    }
    panic!("the server closed before answering request {id}");
}

#[test]
fn mcp_terminal_time_limit_kills_as_time_limit_and_refuses_zero() {
    use serde_json::json;
    use std::io::Write;
    let env = Env::new();
    let (mut child, mut stdin, mut lines) = crate::mcp::raw_server(&env, "agent-tl");

    let call = |n: u64, args: Value| {
        json!({"jsonrpc": "2.0", "id": n, "method": "tools/call",
            "params": {"name": "terminal", "arguments": args}})
    };
    writeln!(
        stdin,
        "{}",
        call(
            2,
            json!({"command": "sleep 300", "background": true, "time_limit": 0})
        )
    )
    .expect("the server reads");
    let refused = response_to(&mut lines, 2);
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(
        refused.to_string().contains("time_limit must be"),
        "{refused}"
    );

    writeln!(
        stdin,
        "{}",
        call(
            3,
            json!({"command": TREE_JOB, "background": true, "time_limit": 5, "pty": null})
        )
    )
    .expect("the server reads");
    let started = response_to(&mut lines, 3);
    let text = started["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text block: {started}"));
    let answer: Value = serde_json::from_str(text).expect("the first block is JSON");
    assert_eq!(answer["time_limit_seconds"], 5, "{answer}");
    let id = id_of(&answer);
    drop(stdin);
    child.wait().expect("the server exits");

    let child_pid = child_pid(&log_until(&env, &id, "child="));
    let waited = wait_json(&env, &id);
    assert_killed_by(&waited, "time_limit");
    wait_until(DEADLINE, || !alive(child_pid))
        .unwrap_or_else(|()| panic!("the job's child {child_pid} survived"));
}

/// A stand-in for a daemon of an older herd: it answers `hello` with protocol 1 and
/// no capabilities, and any other method with an error naming it. (A mock because
/// no older herd binary is available to the tests; the client side is the real one.)
/// Returns the methods it was asked for once the client has gone.
fn old_daemon(env: &Env) -> std::thread::JoinHandle<Vec<String>> {
    use std::io::{BufRead, Write};
    use std::os::unix::fs::PermissionsExt;
    let run = env.home().join("run");
    std::fs::create_dir_all(&run).expect("the home is writable");
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700))
        .expect("the run dir is ours");
    let listener =
        std::os::unix::net::UnixListener::bind(env.socket()).expect("the socket path is free");
    let home = env.home().display().to_string();
    std::thread::spawn(move || {
        let mut asked = Vec::new();
        let Ok((stream, _)) = listener.accept() else {
            return asked;
        };
        let mut writer = stream.try_clone().expect("the stream clones");
        for line in std::io::BufReader::new(stream).lines() {
            let Ok(line) = line else { break };
            let Ok(request) = serde_json::from_str::<Value>(&line) else {
                break;
            };
            let method = request["method"].as_str().unwrap_or_default().to_owned();
            let answer = if method == "hello" {
                serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "result": {
                    "protocol": 1, "daemon": "0.0.1-old", "pid": std::process::id(), "home": home}})
            } else {
                serde_json::json!({"jsonrpc": "2.0", "id": request["id"], "error": {
                    "code": -32601, "message": format!("the stand-in was asked for {method}")}})
            };
            asked.push(method);
            if writeln!(writer, "{answer}").is_err() {
                break;
            }
        }
        asked
    })
}

#[test]
fn an_old_daemon_makes_time_limit_and_restart_refuse_naming_the_daemon() {
    for args in [
        &["run", "--time-limit", "5m", "--", "sleep", "300"][..],
        &["restart", "web"][..],
    ] {
        let env = Env::new();
        let daemon = old_daemon(&env);
        let out = env.run(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "herd {args:?}: {}",
            stderr(&out)
        );
        assert!(
            stderr(&out).contains("herd shutdown --keep-jobs")
                && stderr(&out).contains("0.0.1-old"),
            "herd {args:?} does not say the daemon must be replaced: {}",
            stderr(&out)
        );
        let asked = daemon
            .join()
            .expect("the stand-in ends when the client goes");
        assert_eq!(
            asked,
            ["hello"],
            "herd {args:?} sent more than the handshake"
        );
    }
}
