//! Jobs end to end through the CLI: run, ps, poll, logs, wait, kill, stdin, events.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, stderr, stdout, wait_until};

fn run_id(env: &Env, args: &[&str]) -> String {
    let mut full = vec!["run", "--json"];
    full.extend_from_slice(args);
    let info = env.json(&full);
    let id = info["session_id"]
        .as_str()
        .expect("run --json has session_id")
        .to_owned();
    assert!(info["pid"].as_i64().is_some_and(|p| p > 0), "{info}");
    id
}

#[test]
fn run_ps_poll_logs_wait_end_to_end() {
    let env = Env::new();
    let id = run_id(&env, &["--", "printf 'one\\ntwo\\n'; echo three"]);
    assert!(id.starts_with("proc_") && id.len() == 17, "{id}");
    let waited = env.json(&["wait", &id, "--timeout", "10", "--json"]);
    assert_eq!(waited["status"], "exited", "{waited}");
    assert_eq!(waited["exit_code"], 0);
    assert_eq!(
        env.ok(&["logs", &id]),
        "one\ntwo\nthree\n",
        "logs equals what the job printed"
    );
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "exited");
    assert_eq!(polled["exit_code"], 0);
    let listed = env.json(&["ps", "--all", "--json"]);
    let rows = listed["processes"].as_array().expect("processes is a list");
    assert!(
        rows.iter().any(|r| r["session_id"] == id.as_str()),
        "{listed}"
    );
    let paged = env.ok(&["logs", &id, "--offset", "1", "--limit", "1"]);
    assert_eq!(paged, "two\n");
    let table = env.ok(&["ps", "--all"]);
    assert!(table.contains(&id) && table.contains("three"), "{table}");
}

// Output shown to a terminal is safe to show. A job's command line
// and output may carry escape sequences and bidi overrides; the human forms of
// `ps`, `poll` and `wait` render them visibly instead of writing them through.
#[test]
fn ps_poll_and_wait_render_terminal_controls_visibly() {
    let env = Env::new();
    // The command line itself carries a title-setting OSC and an RLO; its output
    // carries CSI colours, an RLO, a BEL and a C1 CSI (U+009B).
    let command = concat!(
        ": '\u{1b}]0;cmd\u{7}\u{202e}x'; ",
        "printf '\\033[31mred\\033[0m \\342\\200\\256live\\007 \\302\\233 done\\n'",
    );
    let id = run_id(&env, &["--", command]);
    let waited = env.run(&["wait", &id, "--timeout", "10"]);
    assert_eq!(waited.status.code(), Some(0), "{}", stderr(&waited));
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["command"], command, "--json keeps the command exact");
    assert!(
        polled["output_preview"]
            .as_str()
            .is_some_and(|p| p.contains("\u{202e}live")),
        "--json keeps the preview's RLO: {polled}"
    );
    let shown = [
        ("wait", stdout(&waited)),
        ("ps --all", env.ok(&["ps", "--all"])),
        ("poll", env.ok(&["poll", &id])),
    ];
    for (what, text) in &shown {
        assert!(
            !text.contains('\u{1b}') && !text.contains('\u{202e}') && !text.contains('\u{9b}'),
            "herd {what} wrote a raw control to the terminal: {text:?}"
        );
        assert!(
            text.contains("<U+202E>live^G <U+009B> done"),
            "herd {what} shows the output's controls visibly: {text:?}"
        );
    }
    for (what, text) in &shown[1..] {
        assert!(
            text.contains(": '\\e]0;cmd^G<U+202E>x'; printf"),
            "herd {what} shows the command line's controls visibly: {text:?}"
        );
    }
}

#[test]
fn b39_logs_offset_pages_from_the_first_line_of_the_whole_log() {
    let env = Env::new();
    // 588,895 bytes of output: far beyond the daemon's in-memory tail.
    let id = run_id(&env, &["--", "seq 1 100000"]);
    env.ok(&["wait", &id, "--timeout", "30"]);
    assert_eq!(
        env.ok(&["logs", &id, "--offset", "0", "--limit", "2"]),
        "1\n2\n"
    );
    assert_eq!(
        env.ok(&["logs", &id, "--offset", "50000", "--limit", "1"]),
        "50001\n"
    );
    assert_eq!(env.ok(&["logs", &id, "--limit", "1"]), "100000\n");
    let page = env.json(&["logs", &id, "--limit", "1", "--json"]);
    assert_eq!(page["total_lines"], 100_000, "{page}");
}

#[test]
fn several_words_after_double_dash_keep_their_argv() {
    let env = Env::new();
    let id = run_id(&env, &["--", "bash", "-c", "echo a; echo b", "ignored"]);
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", &id]), "a\nb\n");
}

#[test]
fn wait_exit_code_follows_the_job() {
    let env = Env::new();
    let id = run_id(&env, &["--", "exit 3"]);
    let out = env.run(&["wait", &id, "--timeout", "10", "--json"]);
    assert_eq!(out.status.code(), Some(1), "a failed job exits 1");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(answer["exit_code"], 3);
}

#[test]
fn kill_stops_a_running_job_and_its_children() {
    let env = Env::new();
    let id = run_id(&env, &["--", "sleep 300 & sleep 300; wait"]);
    let listed = env.json(&["ps", "--json"]);
    assert!(
        listed["processes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["session_id"] == id.as_str()))
    );
    let killed = env.json(&["kill", &id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "exited", "{polled}");
    let out = env.run(&["wait", &id, "--timeout", "5"]);
    assert_eq!(out.status.code(), Some(1), "a killed job is not a success");
}

#[test]
fn submit_and_close_reach_the_job_stdin() {
    let env = Env::new();
    let id = run_id(&env, &["--", "read line; echo got:$line; cat"]);
    env.ok(&["submit", &id, "hello"]);
    env.ok(&["send", &id, "tail"]);
    env.ok(&["close", &id]);
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", &id]), "got:hello\ntail");
}

#[test]
fn b19_events_drain_each_completion_once() {
    let env = Env::new();
    let id = run_id(&env, &["--notify", "--", "echo done"]);
    env.ok(&["wait", &id, "--timeout", "10"]);
    let mut lines = Vec::new();
    wait_until(Duration::from_secs(5), || {
        let out = env.ok(&["events", "--json"]);
        lines.extend(out.lines().map(str::to_owned));
        !lines.is_empty()
    })
    .expect("the completion is queued");
    let events: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["type"], "completion");
    assert_eq!(events[0]["session_id"], id.as_str());
    assert_eq!(
        env.ok(&["events"]),
        "",
        "drained: a second call gets nothing"
    );
}

#[test]
fn events_belong_to_their_owner() {
    let env = Env::new();
    let id = run_id(&env, &["--notify", "--owner", "alice", "--", "true"]);
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(
        env.ok(&["events"]),
        "",
        "the default owner `cli` gets nothing of alice's"
    );
    let mut got = String::new();
    wait_until(Duration::from_secs(5), || {
        got.push_str(&env.ok(&["events", "--owner", "alice"]));
        !got.is_empty()
    })
    .expect("alice's completion is queued for alice");
    assert!(got.contains(&id));
}

#[test]
fn logs_follow_streams_until_the_job_exits() {
    let env = Env::new();
    let id = run_id(&env, &["--", "echo first; read _; echo second"]);
    let mut follower = env.cmd(&["logs", &id, "--follow"]);
    let child = follower
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("herd runs");
    env.ok(&["submit", &id, "go"]);
    let out = child
        .wait_with_output()
        .expect("logs --follow ends when the job exits");
    assert!(out.status.success());
    assert_eq!(stdout(&out), "first\nsecond\n");
}

#[test]
fn unknown_and_ambiguous_ids_exit_2() {
    let env = Env::new();
    let out = env.run(&["poll", "proc_ffffffffffff"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("proc_ffffffffffff"),
        "{}",
        stderr(&out)
    );
    for cmd in [
        ["kill", "proc_ffffffffffff"],
        ["logs", "proc_ffffffffffff"],
        ["wait", "nope"],
    ] {
        let out = env.run(&cmd);
        assert_eq!(out.status.code(), Some(2), "{cmd:?}: {}", stderr(&out));
    }
}

#[test]
fn bad_flag_values_exit_2() {
    let env = Env::new();
    for args in [
        &["wait", "proc_x", "--timeout", "-1"][..],
        &["wait", "proc_x", "--timeout", "soon"],
        &["run", "--heartbeat", "-5", "--", "true"],
        &["run", "--env", "NOEQUALS", "--", "true"],
        &["run", "--cwd", "/nonexistent/dir", "--", "true"],
        &["logs", "proc_x", "--limit", "0"],
        &["run"],
        &["frobnicate"],
    ] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn a_job_runs_with_the_supervised_marker_and_its_cwd() {
    let env = Env::new();
    let dir = env.scratch().to_path_buf();
    let dir_text = dir.display().to_string();
    let id = run_id(
        &env,
        &[
            "--cwd",
            &dir_text,
            "--env",
            "GREETING=hi",
            "--",
            "echo $HERD_SUPERVISED_CHILD $GREETING; pwd",
        ],
    );
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", &id]), format!("1 hi\n{dir_text}\n"));
}

#[test]
fn events_follow_streams_completions_as_they_happen() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let mut follower = env
        .cmd(&["events", "--follow"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("herd runs");
    let id = run_id(&env, &["--notify", "--", "echo streamed"]);
    let stdout = follower.stdout.take().expect("piped stdout");
    let mut reader = std::io::BufReader::new(stdout);
    let mut line = String::new();
    std::io::BufRead::read_line(&mut reader, &mut line).expect("a streamed event");
    // Printed, then acknowledged: once acknowledged it is gone.
    let acked = wait_until(Duration::from_secs(10), || {
        env.ok(&["events", "--peek"]).is_empty()
    });
    let _ = follower.kill();
    let _ = follower.wait();
    let event: Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(event["type"], "completion");
    assert_eq!(event["session_id"], id.as_str());
    assert!(acked.is_ok(), "the printed event was never acknowledged");
    assert_eq!(env.ok(&["events"]), "", "the stream consumed it");
}

#[test]
fn b25_handoff_moves_the_completion_to_the_new_owner() {
    let env = Env::new();
    let id = run_id(&env, &["--owner", "child", "--", "read x; echo done $x"]);
    let answer = env.json(&[
        "handoff",
        &id,
        "--owner",
        "child",
        "--to",
        "parent",
        "--note",
        "the build; report its result",
        "--json",
    ]);
    assert_eq!(answer["status"], "handed_off", "{answer}");
    let listed = env.json(&["ps", "--owner", "parent", "--json"]);
    assert!(listed.to_string().contains(&id), "{listed}");
    env.ok(&["submit", &id, "now"]);
    let event = await_event(&env, "parent", "completion");
    assert_eq!(event["session_id"], id.as_str(), "{event}");
    assert_eq!(
        event["handoff_note"], "the build; report its result",
        "{event}"
    );
    assert_eq!(
        env.ok(&["events", "--owner", "child"]),
        "",
        "the child gets nothing"
    );
}

#[test]
fn b25_handoff_is_capped_at_three_per_child() {
    let env = Env::new();
    let ids: Vec<String> = (0..4)
        .map(|_| run_id(&env, &["--owner", "child", "--", "sleep 30"]))
        .collect();
    let hand = |id: &str| {
        env.run(&[
            "handoff", id, "--owner", "child", "--to", "parent", "--note", "a worker",
        ])
    };
    for id in &ids[..3] {
        let out = hand(id);
        assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    }
    let out = hand(&ids[3]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("handoff cap reached"),
        "{}",
        stderr(&out)
    );
    for id in &ids {
        env.ok(&["kill", id]);
    }
}

#[test]
fn b25_handing_off_an_exited_session_is_refused() {
    let env = Env::new();
    let id = run_id(&env, &["--owner", "child", "--", "true"]);
    env.ok(&["wait", &id, "--timeout", "10"]);
    let out = env.run(&[
        "handoff", &id, "--owner", "child", "--to", "parent", "--note", "a result",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("cannot hand off") && stderr(&out).contains("already exited"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_closed_stdout_pipe_is_a_quiet_exit() {
    let env = Env::new();
    let id = run_id(&env, &["--", "seq 1 300000"]);
    env.ok(&["wait", &id, "--timeout", "20"]);
    let mut reader = env
        .cmd(&["logs", &id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("herd runs");
    let mut stdout = reader.stdout.take().expect("piped stdout");
    let mut first = [0u8; 8];
    std::io::Read::read_exact(&mut stdout, &mut first).expect("the log starts");
    assert_eq!(&first, b"1\n2\n3\n4\n");
    drop(stdout);
    let out = reader.wait_with_output().expect("herd finishes");
    assert_eq!(
        out.status.code(),
        Some(0),
        "like `herd logs ID | head`: {}",
        stderr(&out)
    );
    assert_eq!(stderr(&out), "", "no broken-pipe noise");
}

/// Drains `herd events` (for `owner`) until an event of `kind` arrives.
fn await_event(env: &Env, owner: &str, kind: &str) -> Value {
    let mut seen = Vec::new();
    let found = wait_until(Duration::from_secs(10), || {
        let out = env.ok(&["events", "--owner", owner]);
        seen.extend(
            out.lines()
                .map(|l| serde_json::from_str::<Value>(l).expect("JSON line")),
        );
        seen.iter().any(|e| e["type"] == kind)
    });
    assert!(found.is_ok(), "no {kind} event within 10 s; saw {seen:?}");
    seen.into_iter()
        .find(|e| e["type"] == kind)
        .expect("found above")
}

#[test]
fn b20_watch_pattern_queues_a_match() {
    let env = Env::new();
    let id = run_id(
        &env,
        &[
            "--watch",
            "READY",
            "--",
            "echo booting; echo READY on 8080; read _",
        ],
    );
    let event = await_event(&env, "cli", "watch_match");
    assert_eq!(event["session_id"], id.as_str());
    assert_eq!(event["pattern"], "READY");
    assert!(
        event["output"]
            .as_str()
            .is_some_and(|o| o.contains("READY on 8080")),
        "{event}"
    );
    env.ok(&["submit", &id, "done"]);
    env.ok(&["wait", &id, "--timeout", "10"]);
}

#[test]
fn b21_heartbeat_carries_new_output_with_a_lowered_floor() {
    let env = Env::new();
    std::fs::write(
        env.home().join("config.toml"),
        "heartbeat_floor_seconds = 1\n",
    )
    .expect("writable");
    let info = env.json(&[
        "run",
        "--json",
        "--heartbeat",
        "1",
        "--",
        "echo tick; read _",
    ]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    assert_eq!(info["heartbeat_seconds"], 1, "{info}");
    let event = await_event(&env, "cli", "heartbeat");
    assert_eq!(event["session_id"], id.as_str());
    assert!(
        event["output"].as_str().is_some_and(|o| o.contains("tick")),
        "{event}"
    );
    env.ok(&["submit", &id, "done"]);
    env.ok(&["wait", &id, "--timeout", "10"]);
}

/// The output of `command` run by `herd run` from a shell with `vars` set and
/// `TMUX` unset unless `vars` sets it.
fn output_with(env: &Env, vars: &[(&str, &str)], command: &str) -> String {
    let mut cmd = env.cmd(&["run", "--json", "--", command]);
    cmd.env_remove("TMUX");
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("herd runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let info: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let id = info["session_id"].as_str().expect("an id").to_owned();
    env.ok(&["wait", &id, "--timeout", "10"]);
    env.ok(&["logs", &id])
}

#[test]
fn b36_a_job_runs_in_its_callers_environment_not_the_daemons() {
    let env = Env::new();
    // The first client starts the daemon, so its environment is the daemon's.
    let probe = "echo foo=${HERD_IT_FOO:-none} tmux=${TMUX:-none}";
    let first = output_with(
        &env,
        &[("HERD_IT_FOO", "first"), ("TMUX", "/run/tmux-first,1,0")],
        probe,
    );
    assert_eq!(first, "foo=first tmux=/run/tmux-first,1,0\n");
    let second = output_with(&env, &[("HERD_IT_FOO", "second")], probe);
    assert_eq!(
        second, "foo=second tmux=none\n",
        "the daemon's environment leaked"
    );
    // A changed PATH is the job's PATH too (a direct exec resolves through it).
    let bin = env.scratch().join("bin");
    std::fs::create_dir_all(&bin).expect("a bin dir");
    let tool = bin.join("herd-it-only-here");
    std::fs::write(&tool, "#!/bin/sh\necho found-on-the-callers-path\n").expect("a script");
    std::fs::set_permissions(&tool, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("executable");
    let path = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    assert_eq!(
        output_with(&env, &[("PATH", &path)], "herd-it-only-here"),
        "found-on-the-callers-path\n"
    );
    // Credentials are still removed from the caller's environment.
    assert_eq!(
        output_with(
            &env,
            &[("OPENAI_API_KEY", "sk-caller")],
            "echo key=${OPENAI_API_KEY:-none}"
        ),
        "key=none\n"
    );
}

#[test]
fn run_takes_the_command_without_double_dash_and_run_wait_follows_and_exits_by_the_job() {
    let env = Env::new();
    // `herd run echo hi` is what a person types; options after the command are the
    // command's.
    let out = env.run(&["run", "--wait", "echo", "hi", "--notify"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "hi --notify\n");
    assert!(stderr(&out).contains(" exited 0"), "{}", stderr(&out));
    let out = env.run(&["run", "--wait", "--", "sh", "-c", "echo out; exit 3"]);
    assert_eq!(out.status.code(), Some(1), "a failed job fails the command");
    assert_eq!(stdout(&out), "out\n");
    assert!(stderr(&out).contains(" exited 3"), "{}", stderr(&out));
    let answer = env.run(&["run", "--wait", "--json", "--", "sh", "-c", "exit 4"]);
    assert_eq!(answer.status.code(), Some(1));
    let answer: Value = serde_json::from_slice(&answer.stdout).expect("JSON");
    assert_eq!(answer["exit_code"], 4, "{answer}");
}

#[test]
fn logs_n_follow_starts_at_the_last_lines_and_ends_with_how_the_job_ended() {
    let env = Env::new();
    let id = run_id(
        &env,
        &[
            "--",
            "sh",
            "-c",
            "for i in 1 2 3 4 5; do echo line $i; done; read -r _; echo last; exit 5",
        ],
    );
    wait_until(Duration::from_secs(10), || {
        env.ok(&["logs", &id]).contains("line 5")
    })
    .expect("the first lines are logged");
    let mut follower = env
        .cmd(&["logs", "-n", "2", "-f", &id])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("herd logs runs");
    // Lines as the follower prints them, read on a thread so waiting has a deadline.
    let (lines_tx, lines) = std::sync::mpsc::channel();
    let out_pipe = follower.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(out_pipe)
            .lines()
            .map_while(Result::ok)
        {
            let _ = lines_tx.send(line);
        }
    });
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(
            lines
                .recv_timeout(Duration::from_secs(10))
                .expect("the last two lines come first"),
        );
    }
    assert_eq!(seen, ["line 4", "line 5"]);
    // Only now does the job go on: what it prints next is followed.
    env.ok(&["submit", &id, "go"]);
    seen.push(
        lines
            .recv_timeout(Duration::from_secs(10))
            .expect("the followed line"),
    );
    assert_eq!(seen, ["line 4", "line 5", "last"]);
    let out = follower
        .wait_with_output()
        .expect("the follower ends with the job");
    reader.join().expect("the reader thread ends at EOF");
    assert!(
        stderr(&out).contains(&format!("{id} exited 5")),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1), "the job failed");
}

#[test]
fn ps_says_killed_with_the_signal_and_a_finished_job_shows_how_long_it_ran() {
    let env = Env::new();
    let id = run_id(&env, &["--", "sleep", "30"]);
    env.ok(&["kill", &id]);
    let table = env.ok(&["ps", "--all"]);
    let row = table
        .lines()
        .find(|l| l.contains(&id))
        .expect("the killed job is listed");
    assert!(row.contains("killed (SIGTERM)"), "{table}");
    let listed = env.json(&["ps", "--all", "--json"]);
    let row = &listed["processes"][0];
    assert_eq!(row["signal"], 15, "{row}");
    assert!(row["duration_seconds"].is_u64(), "{row}");
}

#[test]
fn stop_and_rm_point_at_kill_and_doctor_says_the_config_is_absent() {
    let env = Env::new();
    for verb in ["stop", "rm"] {
        let out = env.run(&[verb, "proc_0123"]);
        assert_eq!(out.status.code(), Some(2));
        assert!(stderr(&out).contains("herd kill ID"), "{}", stderr(&out));
    }
    let doctor = env.run(&["doctor"]);
    assert!(stdout(&doctor).contains("is absent"), "{}", stdout(&doctor));
    let unknown = env.run(&["poll", "proc_ffffffffffff"]);
    assert!(
        stderr(&unknown).contains("`herd ps --all`"),
        "{}",
        stderr(&unknown)
    );
}

#[test]
fn events_on_a_terminal_print_one_readable_line_per_event_and_json_elsewhere() {
    let env = Env::new();
    let ok = run_id(
        &env,
        &[
            "--notify",
            "--name",
            "build",
            "--",
            "sh",
            "-c",
            "echo built fine",
        ],
    );
    let failed = run_id(&env, &["--notify", "--", "sh", "-c", "echo boom; exit 2"]);
    env.ok(&["wait", &ok, "--timeout", "10"]);
    let _ = env.run(&["wait", &failed, "--timeout", "10"]);
    // A real terminal: util-linux `script` runs the command on a fresh PTY.
    let line = format!("{} events --color=always", crate::support::HERD);
    let out = env
        .cmd_at(std::path::Path::new("script"), &["-qc", &line, "/dev/null"])
        .output()
        .expect("script runs");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    let ok_line = text
        .lines()
        .find(|l| l.contains(&ok))
        .expect("a line for the first job");
    assert!(
        ok_line.contains("\x1b[32mexited 0\x1b[0m") && ok_line.contains("built fine"),
        "{text}"
    );
    // Its name follows its id; the unnamed one has none.
    assert!(ok_line.contains(&format!("{ok} build ")), "{text}");
    let failed_line = text
        .lines()
        .find(|l| l.contains(&failed))
        .expect("a line for the second");
    assert!(
        failed_line.contains("\x1b[31mexited 2") && failed_line.contains("boom"),
        "{text}"
    );
    assert!(!text.contains("\"type\""), "JSON on a terminal: {text}");
    // Off a terminal, JSON lines as before (nothing left to take now, so queue one).
    let third = run_id(&env, &["--notify", "--", "true"]);
    env.ok(&["wait", &third, "--timeout", "10"]);
    let json = env.ok(&["events"]);
    let event: Value = serde_json::from_str(json.lines().next().expect("a line")).expect("JSON");
    assert_eq!(event["session_id"], json!(third));
}

#[test]
fn a_name_works_wherever_an_id_does_is_unique_while_running_and_survives_a_daemon_crash() {
    let env = Env::new();
    let id = run_id(&env, &["--name", "web", "--", "sleep", "30"]);
    // Unique among the owner's running sessions; never id-like or unprintable.
    for (name, needle) in [
        ("web", "already the name of your running session"),
        ("cafe", "looks like a session id"),
        ("proc_web", "looks like a session id"),
        ("a:b", "only letters, digits"),
    ] {
        let out = env.run(&["run", "--name", name, "--", "true"]);
        assert_eq!(out.status.code(), Some(2), "{name}");
        assert!(stderr(&out).contains(needle), "{name}: {}", stderr(&out));
    }
    let polled = env.json(&["poll", "web", "--json"]);
    assert_eq!(polled["session_id"], json!(id));
    assert!(env.ok(&["ps"]).contains(&format!("{id} web")));
    // The name is checkpointed: a daemon killed with SIGKILL comes back knowing it.
    let pid = env.daemon_pid().expect("the daemon runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("SIGKILL the daemon");
    wait_until(Duration::from_secs(10), || !crate::support::alive(pid)).expect("the daemon died");
    let polled = env.json(&["poll", "web", "--json"]);
    assert_eq!(polled["session_id"], json!(id), "{polled}");
    env.ok(&["kill", "web"]);
    // Once it ended, the name is free again, and finds the newest session that has it.
    let second = run_id(&env, &["--name", "web", "--", "echo", "again"]);
    env.ok(&["wait", &second, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", "web"]), "again\n");
}

#[test]
fn kill_takes_several_ids_or_all_of_an_owner_and_a_second_kill_says_how_it_ended() {
    let env = Env::new();
    let a = run_id(&env, &["--", "sleep", "30"]);
    let b = run_id(&env, &["--name", "pg", "--", "sleep", "30"]);
    let other = run_id(&env, &["--owner", "someone-else", "--", "sleep", "30"]);
    let out = env.ok(&["kill", &a, "pg"]);
    assert!(
        out.contains(&format!("{a} killed")) && out.contains(&format!("{b} killed")),
        "{out}"
    );
    let again = env.ok(&["kill", &a]);
    assert!(
        again.contains("had already ended") && !again.contains("null"),
        "{again}"
    );
    let mine = run_id(&env, &["--", "sleep", "30"]);
    let out = env.ok(&["kill", "--all"]);
    assert!(
        out.contains(&format!("{mine} killed")) && !out.contains(&other),
        "{out}"
    );
    let lines = env.ok(&["kill", "--all", "--owner", "someone-else", "--json"]);
    let answer: Value = serde_json::from_str(lines.trim()).expect("one JSON object");
    assert_eq!(answer["session_id"], json!(other));
}

#[test]
fn clean_forgets_the_owners_finished_sessions_with_their_logs_and_spares_running_ones() {
    let env = Env::new();
    let done = run_id(&env, &["--", "echo", "one"]);
    let others = run_id(&env, &["--owner", "someone-else", "--", "echo", "two"]);
    let running = run_id(&env, &["--", "sleep", "30"]);
    env.ok(&["wait", &done, "--timeout", "10"]);
    env.ok(&["wait", &others, "--timeout", "10"]);
    let log = env.home().join("logs/sessions").join(format!("{done}.log"));
    assert!(log.exists());
    // Nothing finished an hour ago.
    let none = env.json(&["clean", "--older-than", "1h", "--json"]);
    assert_eq!(none["forgotten"], 0, "{none}");
    let cleaned = env.json(&["clean", "--json"]);
    assert_eq!(cleaned["session_ids"], json!([done]), "{cleaned}");
    assert!(!log.exists(), "the log went with the session");
    let unknown = env.run(&["poll", &done]);
    assert_eq!(
        unknown.status.code(),
        Some(2),
        "a forgotten session is unknown"
    );
    let listed = env.ok(&["ps", "--all"]);
    assert!(
        listed.contains(&others) && listed.contains(&running),
        "{listed}"
    );
    let bad = env.run(&["clean", "--older-than", "5x"]);
    assert_eq!(bad.status.code(), Some(2));
    env.ok(&["kill", &running]);
}

/// Lines a follower prints, read on a thread so every wait has a deadline.
fn line_reader(child: &mut std::process::Child) -> std::sync::mpsc::Receiver<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let pipe = child.stdout.take().expect("piped");
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(pipe).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    rx
}

/// Collects `(label, text)` lines until `want` are all seen.
fn seen_until(
    lines: &std::sync::mpsc::Receiver<String>,
    want: &[(&str, &str)],
) -> Vec<(String, String)> {
    let mut seen: Vec<(String, String)> = Vec::new();
    while !want
        .iter()
        .all(|(l, t)| seen.iter().any(|(sl, st)| sl == l && st == t))
    {
        let line = lines
            .recv_timeout(Duration::from_secs(15))
            .unwrap_or_else(|_| panic!("expected {want:?}, saw {seen:?}"));
        let (label, text) = line
            .split_once(" | ")
            .unwrap_or_else(|| panic!("a line without its label: {line:?}"));
        seen.push((label.trim_end().to_owned(), text.to_owned()));
    }
    seen
}

#[test]
fn logs_follow_of_several_sessions_interleaves_lines_after_each_label() {
    let env = Env::new();
    let alpha = run_id(
        &env,
        &[
            "--name",
            "alpha",
            "--",
            "echo a1; read -r _; echo a2; exit 0",
        ],
    );
    let other = run_id(&env, &["--", "echo b1; read -r _; echo b2; exit 4"]);
    let short = &other["proc_".len().."proc_".len() + 8];
    let mut follower = env
        .cmd(&["logs", "-f", "alpha", &other])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("herd logs runs");
    let lines = line_reader(&mut follower);
    seen_until(&lines, &[("alpha", "a1"), (short, "b1")]);
    // Only now do the jobs go on: what they print next is followed, each labelled.
    env.ok(&["submit", &alpha, "go"]);
    env.ok(&["submit", &other, "go"]);
    let seen = seen_until(&lines, &[("alpha", "a2"), (short, "b2")]);
    assert!(
        !seen.iter().any(|(_, t)| t == "a1" || t == "b1"),
        "printed twice: {seen:?}"
    );
    let out = follower
        .wait_with_output()
        .expect("the follower ends with the jobs");
    let err = stderr(&out);
    assert!(err.contains(&format!("{alpha} exited 0")), "{err}");
    assert!(err.contains(&format!("{other} exited 4")), "{err}");
    assert_eq!(out.status.code(), Some(1), "one of them failed: {err}");
}

#[test]
fn logs_follow_all_follows_the_owners_running_sessions_and_wait_follow_prints_then_ends() {
    let mut env = Env::new();
    env.vars.push(("HERD_OWNER".into(), "person".into()));
    let web = run_id(
        &env,
        &["--name", "web", "--", "echo up; read -r _; echo served"],
    );
    let api = run_id(
        &env,
        &["--name", "api", "--", "echo up; read -r _; echo answered"],
    );
    // Another owner's session is not followed.
    run_id(
        &env,
        &["--owner", "someone", "--", "read -r _; echo theirs"],
    );
    let mut follower = env
        .cmd(&["logs", "-f", "--all"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("herd logs runs");
    let lines = line_reader(&mut follower);
    // The follower has both streams once it printed the lines they gave before.
    seen_until(&lines, &[("web", "up"), ("api", "up")]);
    env.ok(&["submit", &web, "go"]);
    seen_until(&lines, &[("web", "served")]);
    env.ok(&["submit", &api, "go"]);
    let seen = seen_until(&lines, &[("api", "answered")]);
    assert!(!seen.iter().any(|(_, t)| t == "theirs"), "{seen:?}");
    let out = follower.wait_with_output().expect("ends with the jobs");
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));

    let id = run_id(&env, &["--", "echo first; echo second; exit 3"]);
    let out = env.run(&["wait", "-f", &id]);
    assert_eq!(stdout(&out), "first\nsecond\n");
    assert!(
        stderr(&out).contains(&format!("{id} exited 3")),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn several_ids_without_follow_say_to_add_it() {
    let env = Env::new();
    let a = run_id(&env, &["--", "true"]);
    let b = run_id(&env, &["--", "true"]);
    let out = env.run(&["logs", &a, &b]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--follow"), "{}", stderr(&out));
    let out = env.run(&["logs", "--all"]);
    assert_eq!(out.status.code(), Some(2), "--all needs --follow");
}

/// What bash would offer after `words` (the last is the word being completed),
/// through the script `herd completions bash` prints.
fn bash_completes(env: &Env, words: &[&str]) -> Vec<String> {
    let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
    let script = format!(
        "source <('{herd}' completions bash) && COMP_WORDS=({words}) && COMP_CWORD={cword} && \
         COMP_TYPE=9 && _clap_complete_herd herd '{current}' herd && printf '%s\\n' \"${{COMPREPLY[@]}}\"",
        herd = crate::support::HERD,
        words = quoted.join(" "),
        cword = words.len() - 1,
        current = words[words.len() - 1],
    );
    let mut bash = crate::support::raw_command(std::path::Path::new("bash"));
    bash.args(["-c", &script])
        .env("HERD_HOME", env.home())
        .env_remove("HERD_OWNER");
    let out = bash.output().expect("bash runs");
    assert!(out.status.success(), "{}", stderr(&out));
    stdout(&out)
        .lines()
        .filter(|l| !l.is_empty())
        .map(str::to_owned)
        .collect()
}

#[test]
fn bash_completes_session_ids_and_names_from_the_daemon() {
    let env = Env::new();
    // No daemon: nothing to offer, and completing starts none.
    let offered = bash_completes(&env, &["herd", "logs", "proc_"]);
    assert!(offered.is_empty(), "{offered:?}");
    assert_eq!(env.daemon_pid(), None, "completion started a daemon");
    let web = run_id(&env, &["--name", "web", "--", "sleep", "30"]);
    let done = run_id(&env, &["--", "true"]);
    env.json(&["wait", &done, "--json"]);
    let offered = bash_completes(&env, &["herd", "logs", ""]);
    for want in ["web", web.as_str(), done.as_str()] {
        assert!(
            offered.iter().any(|o| o == want),
            "{want} not in {offered:?}"
        );
    }
    assert_eq!(bash_completes(&env, &["herd", "kill", "we"]), ["web"]);
    let offered = bash_completes(&env, &["herd", "poll", &web[..9]]);
    assert_eq!(offered, std::slice::from_ref(&web));
    env.ok(&["kill", &web]);
}
