//! Groups, queued jobs and dependencies (B40-B44) through the real
//! daemon: parallel limits seen by the jobs themselves and by `ps`, a kill of a
//! queued job, a daemon SIGKILL with a queue waiting, dependency chains, failing and
//! unknown dependencies.

use std::path::Path;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, stderr, wait_until};

/// The completions `owner` has queued (taken).
fn completions(env: &Env, owner: &str) -> Vec<Value> {
    env.ok(&["events", "--json", "--owner", owner])
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "completion")
        .collect()
}

/// Waits until every id in `ids` has a completion among `seen` (taking more).
fn await_completions(env: &Env, owner: &str, ids: &[String], seen: &mut Vec<Value>) {
    wait_until(Duration::from_secs(30), || {
        seen.extend(completions(env, owner));
        ids.iter()
            .all(|id| seen.iter().any(|e| e["session_id"] == id.as_str()))
    })
    .unwrap_or_else(|()| panic!("not every job of {ids:?} completed: {seen:?}"));
}

/// The most `start` lines not yet matched by an `end` line in `log`, in order.
fn most_at_once(log: &Path) -> (usize, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let (mut now, mut most, mut starts) = (0usize, 0usize, 0usize);
    for line in text.lines() {
        if line.starts_with("start") {
            now += 1;
            starts += 1;
            most = most.max(now);
        } else if line.starts_with("end") {
            now = now.saturating_sub(1);
        }
    }
    (most, starts)
}

#[test]
fn b40_a_group_of_parallel_2_never_runs_more_than_2_of_its_5_jobs() {
    let env = Env::new();
    env.ok(&["group", "add", "shards", "--parallel", "2"]);
    let log = env.scratch().join("slots.log");
    // Each job holds its slot until the gate opens, so two run at once and the rest
    // queue however slowly the submissions go (a short sleep could end first).
    let gate = env.scratch().join("gate");
    let job = format!(
        "echo start $$ >> {0}; while [ ! -e {1} ]; do sleep 0.05; done; echo end $$ >> {0}",
        log.display(),
        gate.display()
    );
    let ids: Vec<String> = (0..5)
        .map(|_| env.start_json(&["--owner", "q", "--notify", "--group", "shards", "--", &job]))
        .collect();
    let mut most_seen = 0;
    let mut saw_queued = false;
    // Polls `ps` until `done` holds for the jobs' (running, queued, exited) counts.
    let mut watch = |done: &dyn Fn([usize; 3]) -> bool| {
        wait_until(Duration::from_secs(30), || {
            let rows = env.ps_rows(&["--all", "--owner", "q"]);
            let mine = |status: &str| {
                rows.iter()
                    .filter(|r| ids.iter().any(|id| r["session_id"] == id.as_str()))
                    .filter(|r| r["status"] == status)
                    .count()
            };
            most_seen = most_seen.max(mine("running"));
            saw_queued |= mine("queued") > 0;
            done([mine("running"), mine("queued"), mine("exited")])
        })
    };
    // Both running jobs have written their start before the gate opens.
    watch(&|[running, queued, _]| running == 2 && queued == 3 && most_at_once(&log).1 == 2)
        .unwrap_or_else(|()| panic!("two jobs did not start with three queued"));
    std::fs::write(&gate, b"").unwrap_or_else(|e| panic!("gate: {e}"));
    watch(&|[_, _, exited]| exited == 5).unwrap_or_else(|()| panic!("the 5 jobs did not all run"));
    assert!(most_seen <= 2, "ps showed {most_seen} running at once");
    assert!(saw_queued, "ps never showed a queued job");
    let (most, starts) = most_at_once(&log);
    assert_eq!(
        starts,
        5,
        "each job ran once: {}",
        std::fs::read_to_string(&log).unwrap_or_default()
    );
    assert_eq!(most, 2, "the jobs themselves saw {most} at once");
    let listed = env.ok(&["group", "list"]);
    assert!(
        listed.contains("shards") && listed.contains("default"),
        "{listed}"
    );
    // The default group keeps today's behaviour: no queue, a pid at once.
    let now = env.json(&["run", "--json", "--group", "default", "--", "sleep 5"]);
    assert!(now["pid"].as_i64().is_some_and(|p| p > 0), "{now}");
    assert!(now.get("queued").is_none(), "{now}");
    env.ok(&["kill", now["session_id"].as_str().unwrap_or_default()]);
}

#[test]
fn b40_group_names_and_limits_have_ranges_and_clear_errors() {
    let env = Env::new();
    for (args, says) in [
        (
            vec!["group", "add", "Bad!", "--parallel", "2"],
            "invalid group name",
        ),
        (vec!["group", "add", "ok", "--parallel", "0"], "1..=1024"),
        (vec!["group", "add", "ok", "--parallel", "1025"], "1..=1024"),
        (
            vec!["group", "set", "nosuch", "--parallel", "2"],
            "no group nosuch",
        ),
        (vec!["group", "rm", "default"], "default group"),
        (
            vec!["run", "--group", "nosuch", "--", "true"],
            "no group nosuch",
        ),
    ] {
        let out = env.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
}

#[test]
fn b41_a_killed_queued_job_never_runs_and_completes_once_saying_so() {
    let env = Env::new();
    env.ok(&["group", "add", "one", "--parallel", "1"]);
    let marker = env.scratch().join("ran");
    let blocker = env.start_json(&["--owner", "k", "--group", "one", "--", "sleep 30"]);
    let queued = env.start_json(&[
        "--owner",
        "k",
        "--notify",
        "--group",
        "one",
        "--name",
        "later",
        "--",
        &format!("touch {}", marker.display()),
    ]);
    let polled = env.poll_json("later");
    assert_eq!(polled["status"], "queued", "{polled}");
    assert!(env.ok(&["logs", &queued]).is_empty());
    let waited = env.run(&["wait", &queued, "--timeout", "1"]);
    assert_eq!(
        waited.status.code(),
        Some(1),
        "a wait on a queued job times out"
    );
    let killed = env.json(&["kill", &queued, "--json"]);
    assert!(killed.to_string().contains("killed"), "{killed}");
    let mut seen = Vec::new();
    await_completions(&env, "k", std::slice::from_ref(&queued), &mut seen);
    let mine: Vec<&Value> = seen
        .iter()
        .filter(|e| e["session_id"] == queued.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "{seen:?}");
    assert_eq!(mine[0]["completion_reason"], "killed", "{seen:?}");
    assert!(
        mine[0]["output"]
            .to_string()
            .contains("killed while queued"),
        "{seen:?}"
    );
    env.ok(&["kill", &blocker]);
    // The slot it would have had goes to nobody: it never runs.
    let after = env.poll_json(&queued);
    assert_eq!(after["completion_reason"], "killed", "{after}");
    assert!(!marker.exists(), "the killed queued job ran");
}

#[test]
fn b42_a_chain_of_5_runs_in_order_and_a_failing_dependency_stops_its_dependants() {
    let env = Env::new();
    let log = env.scratch().join("chain.log");
    let mut ids = Vec::new();
    let mut prev: Option<String> = None;
    for i in 0..5 {
        let cmd = format!("echo {i} >> {}", log.display());
        let name = format!("link{i}");
        let mut args = vec!["--owner", "c", "--notify", "--name", &name];
        let after;
        if let Some(p) = &prev {
            after = p.clone();
            args.extend(["--after", &after]);
        }
        args.extend(["--", &cmd]);
        ids.push(env.start_json(&args));
        prev = Some(name);
    }
    let mut seen = Vec::new();
    await_completions(&env, "c", &ids, &mut seen);
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        "0\n1\n2\n3\n4\n",
        "the chain ran once each, in order"
    );
    // A failing dependency: its dependants never run and say which one failed.
    let marker = env.scratch().join("ran");
    let bad = env.start_json(&["--owner", "f", "--name", "bad", "--", "sleep 0.3; exit 3"]);
    let child = env.start_json(&[
        "--owner",
        "f",
        "--notify",
        "--after",
        "bad",
        "--",
        &format!("touch {}", marker.display()),
    ]);
    let grandchild = env.start_json(&[
        "--owner",
        "f",
        "--notify",
        "--after",
        &child,
        "--",
        &format!("touch {}", marker.display()),
    ]);
    let mut seen = Vec::new();
    await_completions(&env, "f", &[child.clone(), grandchild.clone()], &mut seen);
    let of = |id: &str| {
        seen.iter()
            .find(|e| e["session_id"] == id)
            .cloned()
            .unwrap_or_default()
    };
    assert_eq!(of(&child)["completion_reason"], "failed_start", "{seen:?}");
    assert_ne!(of(&child)["exit_code"], 0, "{seen:?}");
    let says = of(&child)["output"].to_string();
    assert!(says.contains(&bad) && says.contains("exit 3"), "{says}");
    assert!(
        of(&grandchild)["output"].to_string().contains(&child),
        "{seen:?}"
    );
    assert!(!marker.exists(), "a job whose dependency failed ran");
}

#[test]
fn b42_an_unknown_dependency_is_refused_at_submission_with_exit_2() {
    let env = Env::new();
    let out = env.run(&["run", "--after", "nosuch", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("dependency nosuch"),
        "{}",
        stderr(&out)
    );
    let out = env.run(&["run", "--after", "proc_0123456789ab", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // The guard refuses at submission too: a refused command never waits.
    env.ok(&["group", "add", "g", "--parallel", "1"]);
    let out = env.run(&["run", "--group", "g", "--", "pkill -f herd"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("guard"), "{}", stderr(&out));
    assert!(
        env.ps_rows(&["--all"]).is_empty(),
        "a refused job was queued"
    );
}

#[test]
fn b43_a_queue_survives_a_daemon_sigkill_and_each_job_runs_exactly_once() {
    let mut env = Env::new();
    // The restore's every step, for the daemon log a failure prints.
    env.vars
        .push(("HERD_LOG".to_owned(), "herd_core=debug,info".to_owned()));
    env.ok(&["group", "add", "serial", "--parallel", "1"]);
    let log = env.scratch().join("once.log");
    let gate = env.scratch().join("gate");
    let first = env.start_json(&[
        "--owner", "d", "--notify", "--group", "serial", "--",
        &format!("echo start first >> {0}; while [ ! -e {1} ]; do sleep 0.05; done; echo end first >> {0}", log.display(), gate.display()),
    ]);
    let queued: Vec<String> = (0..3)
        .map(|i| {
            env.start_json(&[
                "--owner",
                "d",
                "--notify",
                "--group",
                "serial",
                "--",
                &format!("echo start {i} >> {0}; echo end {i} >> {0}", log.display()),
            ])
        })
        .collect();
    assert_eq!(env.poll_json(&queued[2])["status"], "queued");
    // The first job's start is committed before the crash (a poll says running only
    // then); a crash while it is still starting ends it unstarted instead (B43).
    wait_until(Duration::from_secs(30), || {
        env.poll_json(&first)["status"] == "running"
    })
    .unwrap_or_else(|()| panic!("the first job never ran: {}", env.poll_json(&first)));
    env.crash_daemon();
    // The next daemon restores the queue: the group is still full (first runs on).
    assert_eq!(env.poll_json(&queued[0])["status"], "queued");
    let listed = env.ok(&["group", "list"]);
    assert!(listed.contains("serial"), "the group survived: {listed}");
    std::fs::write(&gate, b"").unwrap_or_else(|e| panic!("gate: {e}"));
    let mut seen = Vec::new();
    let mut all = queued.clone();
    all.push(first.clone());
    await_completions(&env, "d", &queued, &mut seen);
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(
        text, "start first\nend first\nstart 0\nend 0\nstart 1\nend 1\nstart 2\nend 2\n",
        "each job ran once, one at a time"
    );
    for id in &queued {
        let n = seen
            .iter()
            .filter(|e| e["session_id"] == id.as_str())
            .count();
        assert_eq!(n, 1, "{id}: {seen:?}");
    }
    // Nothing runs again on the next restart.
    env.crash_daemon();
    env.ok(&["ps"]);
    assert!(
        completions(&env, "d")
            .iter()
            .all(|e| !queued.iter().any(|id| e["session_id"] == id.as_str()))
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap_or_default(), text);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b44_mcp_queues_in_a_group_after_a_dependency_and_manages_groups() {
    use crate::mcp::{call, connect, session_id};
    use serde_json::json;
    let env = Env::new();
    let client = connect(&env).await;
    let (added, _, is_error) = call(
        &client,
        "process",
        json!({"action": "group_add", "group": "agents", "parallel": 1}),
    )
    .await;
    assert!(!is_error, "{added}");
    let (bad, _, is_error) = call(
        &client,
        "process",
        json!({"action": "group_add", "group": "x", "parallel": 0}),
    )
    .await;
    assert!(is_error, "{bad}");
    let gate = env.scratch().join("gate");
    let (first, _, is_error) = call(
        &client,
        "terminal",
        json!({"command": format!("while [ ! -e {} ]; do sleep 0.05; done; echo first", gate.display()),
               "background": true, "group": "agents", "notify": false}),
    )
    .await;
    assert!(!is_error, "{first}");
    let first = session_id(&first);
    let (second, _, is_error) = call(
        &client,
        "terminal",
        json!({"command": "echo second-ran", "background": true, "group": "agents",
               "after": first, "notify": false}),
    )
    .await;
    assert!(!is_error, "{second}");
    assert_eq!(second["status"], "queued", "{second}");
    let second = session_id(&second);
    let (listed, _, _) = call(&client, "process", json!({"action": "group_list"})).await;
    assert!(listed.to_string().contains("agents"), "{listed}");
    let (polled, _, _) = call(
        &client,
        "process",
        json!({"action": "poll", "session_id": second}),
    )
    .await;
    assert_eq!(polled["status"], "queued", "{polled}");
    let (refused, _, is_error) = call(
        &client,
        "terminal",
        json!({"command": "true", "background": true, "after": "nosuch"}),
    )
    .await;
    assert!(
        is_error && refused.to_string().contains("nosuch"),
        "{refused}"
    );
    std::fs::write(&gate, b"").unwrap_or_else(|e| panic!("gate: {e}"));
    let (waited, _, _) = call(
        &client,
        "process",
        json!({"action": "wait", "session_id": second, "timeout": 30}),
    )
    .await;
    assert_eq!(waited["exit_code"], 0, "{waited}");
    assert!(
        waited["output"].to_string().contains("second-ran"),
        "{waited}"
    );
    client
        .cancel()
        .await
        .unwrap_or_else(|e| panic!("close: {e}"));
}

#[test]
fn b41_kill_all_ends_the_owners_queued_jobs_unrun() {
    let env = Env::new();
    env.ok(&["group", "add", "one", "--parallel", "1"]);
    let marker = env.scratch().join("ran");
    let running = env.start_json(&["--owner", "ka", "--group", "one", "--", "sleep 30"]);
    let queued = env.start_json(&[
        "--owner",
        "ka",
        "--notify",
        "--group",
        "one",
        "--",
        &format!("touch {}", marker.display()),
    ]);
    env.ok(&["kill", "--all", "--owner", "ka"]);
    let mut seen = Vec::new();
    await_completions(&env, "ka", std::slice::from_ref(&queued), &mut seen);
    assert_eq!(env.poll_json(&queued)["completion_reason"], "killed");
    assert_ne!(env.poll_json(&running)["status"], "running");
    assert!(!marker.exists(), "a queued job ran after kill --all");
}

// B41: `run --wait` of a job that is queued first waits through the queue and the
// run: it prints the job's output and ends as for a job that starts at once.
#[test]
fn b41_run_wait_of_a_queued_job_waits_for_its_run_and_reports_its_code() {
    let env = Env::new();
    let out = run_wait_behind_a_blocker(&env, "echo from-the-queue; exit 5", |_| {});
    // Exit 1: the job failed (README's exit codes); the line says its code.
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("exited 5"), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("from-the-queue"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

// B41: against a daemon with `logs.follow.queued`, `run --wait` of a queued job is
// one pipelined request whose stream waits through the queue: the daemon serves no
// `poll` (an older daemon is polled until the job leaves the queue).
#[test]
fn b41_run_wait_of_a_queued_job_lets_the_daemon_wait_and_polls_nothing() {
    let mut env = Env::new();
    // The daemon logs every request by method at this level (`herd::requests`).
    env.vars.push((
        "HERD_LOG".to_owned(),
        "info,herd::requests=debug".to_owned(),
    ));
    let out = run_wait_behind_a_blocker(&env, "echo queued-run; exit 3", |env| {
        // Long enough for a client loop to have polled a few times.
        let waited = wait_until(Duration::from_millis(300), || requests(env, "poll") > 0);
        assert!(waited.is_err(), "the waiting client polled the daemon");
    });
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("exited 3"), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("queued-run"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    // The log counts requests (two spawns were served), and no poll among them.
    assert_eq!(requests(&env, "spawn"), 2, "{}", daemon_log(&env));
    assert_eq!(requests(&env, "poll"), 0, "{}", daemon_log(&env));
}

/// `herd run --group one --wait -- sh -c COMMAND` behind a running job of group
/// `one` (parallel 1) that holds its slot until a gate file appears: once the run
/// is seen queued, `while_queued` runs, then the gate opens. The run's output.
fn run_wait_behind_a_blocker(
    env: &Env,
    command: &str,
    while_queued: impl FnOnce(&Env),
) -> std::process::Output {
    env.ok(&["group", "add", "one", "--parallel", "1"]);
    let gate = env.scratch().join("gate");
    let blocker = format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display());
    env.ok(&["run", "--group", "one", "--", "sh", "-c", &blocker]);
    std::thread::scope(|scope| {
        let waiter = scope
            .spawn(|| env.run(&["run", "--group", "one", "--wait", "--", "sh", "-c", command]));
        wait_until(Duration::from_secs(30), || {
            env.ps_rows(&["--all"])
                .iter()
                .any(|r| r["status"] == "queued")
        })
        .unwrap_or_else(|()| panic!("the second job was never queued"));
        while_queued(env);
        std::fs::write(&gate, "").expect("the scratch dir is writable");
        waiter.join().expect("the waiting run")
    })
}

/// The daemon's log.
fn daemon_log(env: &Env) -> String {
    std::fs::read_to_string(env.home().join("logs/daemon.log")).unwrap_or_default()
}

/// How many `method` requests the daemon's log records (`herd::requests` at debug).
fn requests(env: &Env, method: &str) -> usize {
    let wanted = format!("method={method}");
    daemon_log(env)
        .lines()
        .filter(|l| l.contains("herd::requests") && l.split_whitespace().any(|w| w == wanted))
        .count()
}

// B41: `logs -f` of a queued job waits through the queue and prints the run; a
// follow of a queued job that is killed before it starts ends with the kill.
#[test]
fn b41_logs_follow_of_a_queued_job_waits_for_its_run() {
    let env = Env::new();
    env.ok(&["group", "add", "one", "--parallel", "1"]);
    let gate = env.scratch().join("gate");
    let blocker = format!("while [ ! -e {} ]; do sleep 0.05; done", gate.display());
    env.ok(&["run", "--group", "one", "--", "sh", "-c", &blocker]);
    let job = |script: &str| {
        let out = env.ok(&["run", "--json", "--group", "one", "--", "sh", "-c", script]);
        let info: Value = serde_json::from_str(&out).expect("run --json answers JSON");
        assert_eq!(info["queued"], true, "{info}");
        info["session_id"]
            .as_str()
            .expect("a session id")
            .to_owned()
    };
    let (ran, killed) = (job("echo from-the-queue; exit 4"), job("echo never"));
    let spawn_follow = |id: &str| {
        env.cmd(&["logs", "-f", id])
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("herd logs -f starts")
    };
    let (mut follow_ran, mut follow_killed) = (spawn_follow(&ran), spawn_follow(&killed));
    // While the jobs are queued the follows go on (a follow of the placeholder
    // used to end after a second with "timeout").
    let ended = wait_until(Duration::from_millis(2500), || {
        !matches!(follow_ran.try_wait(), Ok(None)) || !matches!(follow_killed.try_wait(), Ok(None))
    });
    assert!(
        ended.is_err(),
        "a follow of a queued job ended while it was queued"
    );
    env.ok(&["kill", &killed]);
    let out = follow_killed
        .wait_with_output()
        .expect("the follow of the killed job");
    assert!(stderr(&out).contains("killed"), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("never"));
    std::fs::write(&gate, "").expect("the scratch dir is writable");
    let out = follow_ran
        .wait_with_output()
        .expect("the follow of the queued job");
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(stderr(&out).contains("exited 4"), "{}", stderr(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("from-the-queue"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
