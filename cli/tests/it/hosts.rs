//! Jobs on other hosts through the local daemon's host link (part 2).
//!
//! The far host is a second herd home on this machine, reached through a local
//! door: `command = ["env", "HERD_HOME=<far home>", "<herd>", "proxy"]`. Every
//! process is real: the door, the far `herd proxy`, both daemons and the jobs;
//! faults are real signals to them.

use std::time::Duration;

use serde_json::{Value, json};

use crate::support::{Env, HERD, alive, stderr, stdout, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(60);

/// A local home whose config names the far home as host `far`, and an
/// unreachable host `down` (its door is `false`).
pub(crate) struct Pair {
    pub(crate) local: Env,
    pub(crate) far: Env,
}

impl Pair {
    fn new() -> Pair {
        Pair::through(Vec::new())
    }

    /// Host `far` is reached through `door` followed by the far proxy's argv.
    pub(crate) fn through(door: Vec<String>) -> Pair {
        let local = Env::new();
        let far = Env::new();
        let mut argv = door;
        argv.extend([
            "env".to_owned(),
            format!("HERD_HOME={}", far.home().display()),
            HERD.to_owned(),
            "proxy".to_owned(),
        ]);
        let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
        let config = format!(
            "[hosts.far]\ncommand = [{}]\n[hosts.down]\ncommand = [\"false\"]\n",
            quoted.join(", ")
        );
        std::fs::write(local.home().join("config.toml"), config).expect("the home is writable");
        Pair { local, far }
    }

    /// Adds host `name` to the local config, its door a shell `script` standing in
    /// for a far herd (it reads the requests on stdin and writes the answers).
    pub(crate) fn add_stand_in(&self, name: &str, script: &str) {
        let config = self.local.home().join("config.toml");
        let mut text = std::fs::read_to_string(&config).expect("config");
        text.push_str(&format!(
            "[hosts.{name}]\ncommand = [\"sh\", \"-c\", {script:?}]\n"
        ));
        std::fs::write(&config, text).expect("config");
    }

    /// Starts a far job, returning its qualified id.
    pub(crate) fn run(&self, args: &[&str]) -> String {
        let mut all = vec!["run", "--host", "far"];
        all.extend_from_slice(args);
        let id = self.local.ok(&all).trim().to_owned();
        assert!(id.starts_with("far:proc_"), "a qualified id: {id}");
        id
    }

    /// The local owner's events (`herd events --json`), parsed.
    pub(crate) fn events(&self) -> Vec<Value> {
        events_of(&self.local)
    }

    /// Drains events until `done` says the collected ones are enough.
    pub(crate) fn events_until(&self, mut done: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
        let mut all = Vec::new();
        let found = wait_until(DEADLINE, || {
            all.extend(self.events());
            done(&all)
        });
        if found.is_err() {
            let read = |p: std::path::PathBuf| std::fs::read_to_string(p).unwrap_or_default();
            let log = read(self.local.home().join("logs/daemon.log"));
            let tail: Vec<&str> = log.lines().rev().take(15).collect();
            panic!(
                "events never arrived: {all:?}\nthe host map: {}\nthe daemon's log, newest first: {tail:#?}",
                herd_persistence::HostLinks::new(&herd_persistence::Home::new(self.local.home()))
                    .load("far")
                    .ok()
                    .flatten()
                    .map(|b| String::from_utf8_lossy(&b).into_owned())
                    .unwrap_or_default()
            );
        }
        all
    }

    /// Pids of the far `herd proxy` processes serving this far home (the doors).
    fn doors(&self) -> Vec<i32> {
        proxy_doors(&self.far)
    }
}

/// `env`'s events (`herd events --json`), parsed.
pub(crate) fn events_of(env: &Env) -> Vec<Value> {
    env.ok(&["events", "--json"])
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).expect("events are JSON lines"))
        .collect()
}

/// Pids of the processes whose command line starts with `program` and that
/// name `far`'s home: the doors to it.
pub(crate) fn doors_named(far: &Env, program: &str) -> Vec<i32> {
    let far_home = format!("HERD_HOME={}", far.home().display());
    processes()
        .into_iter()
        .filter(|(_, line)| line.starts_with(program) && line.contains(&far_home))
        .map(|(pid, _)| pid)
        .collect()
}

/// Pids of the far `herd proxy` processes serving `far`'s home (local doors).
/// The command line is `<herd> proxy` (env execs it); only the environment
/// that follows may name the far home (the far daemon's has it too, and an
/// `http_proxy` variable would match a bare "proxy").
pub(crate) fn proxy_doors(far: &Env) -> Vec<i32> {
    doors_named(far, &format!("{HERD} proxy "))
}

/// Pids of the ssh clients whose far command names `far`'s home (ssh doors).
pub(crate) fn ssh_doors(far: &Env) -> Vec<i32> {
    doors_named(far, "ssh ")
}

/// Starts `rounds` notified `command` jobs under each host name in `names`
/// (each a door to one far home) and proves every completion arrives once,
/// under the name its job was started with. Returns the started ids.
pub(crate) fn completions_stay_with_their_names(
    near: &Env,
    names: &[&str],
    rounds: usize,
    command: &str,
) -> Vec<String> {
    let mut started = Vec::new();
    for _ in 0..rounds {
        for host in names {
            let id = near
                .ok(&["run", "--host", host, "--notify", "--", command])
                .trim()
                .to_owned();
            assert!(id.starts_with(&format!("{host}:proc_")), "{id}");
            started.push(id);
        }
    }
    let mut all = Vec::new();
    let found = wait_until(DEADLINE, || {
        all.extend(events_of(near));
        started
            .iter()
            .all(|id| !completions_of(&all, id).is_empty())
    });
    assert!(found.is_ok(), "not every completion arrived: {all:?}");
    for id in &started {
        assert_eq!(completions_of(&all, id).len(), 1, "{id}: {all:?}");
    }
    let completions = all.iter().filter(|e| e["type"] == "completion").count();
    assert_eq!(
        completions,
        started.len(),
        "none under the other name: {all:?}"
    );
    started
}

/// Starts, on host `far` from `near`, a PTY job that prints `far-ready`, then
/// answers each typed line with `got:<line>` and exits 3 on `quit`: its id.
pub(crate) fn start_far_echoer(near: &Env, far: &Env) -> String {
    let script = far.scratch().join("echoer.sh");
    std::fs::write(
        &script,
        "echo far-ready\nwhile IFS= read -r line; do\n  [ \"$line\" = quit ] && exit 3\n  echo \"got:$line\"\ndone\n",
    )
    .expect("the scratch dir is writable");
    let script = script.display().to_string();
    near.ok(&["run", "--host", "far", "--pty", "--", "bash", &script])
        .trim()
        .to_owned()
}

/// SIGKILLs the far daemon, waits until it is gone, then SIGKILLs every door
/// `doors` finds: the next door starts another far daemon.
pub(crate) fn kill_far_daemon_and_doors(far: &Env, doors: impl Fn(&Env) -> Vec<i32>) {
    let far_daemon = far.daemon_pid().expect("the far daemon runs");
    sigkill(far_daemon);
    assert!(wait_until(DEADLINE, || !alive(far_daemon)).is_ok());
    for pid in doors(far) {
        sigkill(pid);
    }
}

/// Every process with its command line (NULs as spaces) and environment
/// (`HERD_HOME=…` is in the env command's argv, so the line is enough).
pub(crate) fn processes() -> Vec<(i32, String)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        let text = String::from_utf8_lossy(&cmdline).replace('\0', " ")
            + " "
            + &String::from_utf8_lossy(&environ).replace('\0', " ");
        if alive(pid) {
            out.push((pid, text));
        }
    }
    out
}

/// Children of `pid`, recursively.
pub(crate) fn descendants(pid: i32) -> Vec<i32> {
    let mut found = Vec::new();
    let mut frontier = vec![pid];
    while let Some(parent) = frontier.pop() {
        let path = format!("/proc/{parent}/task/{parent}/children");
        let text = std::fs::read_to_string(path).unwrap_or_default();
        for child in text.split_whitespace().filter_map(|c| c.parse().ok()) {
            found.push(child);
            frontier.push(child);
        }
    }
    found
}

pub(crate) fn sigkill(pid: i32) {
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

pub(crate) fn completions_of<'a>(events: &'a [Value], id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == "completion" && e["session_id"] == id)
        .collect()
}

#[test]
fn run_host_poll_logs_wait_by_qualified_id_and_prefix() {
    let pair = Pair::new();
    // The far job runs until the listings below have seen it.
    let gate = pair.far.scratch().join("gate");
    let id = pair.run(&[
        "--notify",
        "--",
        &format!(
            "echo one; while [ ! -e {} ]; do sleep 0.05; done; echo two",
            gate.display()
        ),
    ]);
    // A prefix after the colon works as the whole id does.
    let hex = id.trim_start_matches("far:proc_");
    let prefix = format!("far:{}", &hex[..6]);
    let polled = pair.local.json(&["poll", &prefix, "--json"]);
    assert_eq!(polled["session_id"], id.as_str(), "{polled}");
    assert_eq!(polled["host"], "far");

    // ps --host and --all-hosts have the HOST column; the local ps does not show it.
    let ps = pair.local.ok(&["ps", "--host", "far"]);
    assert!(ps.contains("HOST") && ps.contains(&id), "{ps}");
    let local_job = pair.local.ok(&["run", "--", "sleep 30"]).trim().to_owned();
    let all = pair.local.ok(&["ps", "--all-hosts"]);
    assert!(all.contains(&id) && all.contains(&local_job), "{all}");
    assert!(all.contains("local") && all.contains("far"), "{all}");
    let json = pair.local.json(&["ps", "--all-hosts", "--json"]);
    let rows = json["processes"].as_array().expect("rows");
    assert!(
        rows.iter().any(|r| r["session_id"] == id.as_str()
            && r["host"] == "far"
            && r["owner_task_id"] == "cli"),
        "{json}"
    );

    // logs -f streams to the end and exits with the job.
    std::fs::write(&gate, b"").unwrap_or_else(|e| panic!("gate: {e}"));
    let followed = pair.local.ok(&["logs", "-f", &id]);
    assert!(
        followed.contains("one") && followed.contains("two"),
        "{followed}"
    );
    let waited = pair.local.run(&["wait", &prefix]);
    assert!(waited.status.success(), "{}", stderr(&waited));
    let logs = pair.local.ok(&["logs", &id]);
    assert_eq!(logs.lines().collect::<Vec<_>>(), ["one", "two"], "{logs}");

    // The completion reaches the local owner once, under the qualified id.
    let events = pair.events_until(|all| !completions_of(all, &id).is_empty());
    assert_eq!(completions_of(&events, &id).len(), 1, "{events:?}");
    assert_eq!(completions_of(&events, &id)[0]["owner_task_id"], "cli");
    pair.local.ok(&["kill", &local_job]);
}

#[test]
fn unknown_host_exits_2_and_unreachable_exits_3_naming_since_and_the_door() {
    let pair = Pair::new();
    let unknown = pair.local.run(&["run", "--host", "nope", "--", "true"]);
    assert_eq!(unknown.status.code(), Some(2), "{}", stderr(&unknown));
    let said = stderr(&unknown);
    assert!(
        said.contains("nope") && said.contains("down") && said.contains("far"),
        "{said}"
    );

    let down = pair.local.run(&["run", "--host", "down", "--", "true"]);
    assert_eq!(down.status.code(), Some(3), "{}", stderr(&down));
    let said = stderr(&down);
    assert!(said.contains("unreachable since"), "{said}");
    assert!(
        said.contains("exit code 1"),
        "the door's own ending: {said}"
    );

    let poll = pair.local.run(&["poll", "down:proc_0123456789ab"]);
    assert_eq!(poll.status.code(), Some(3), "{}", stderr(&poll));
    let unknown_id = pair.local.run(&["poll", "nope:proc_0123456789ab"]);
    assert_eq!(unknown_id.status.code(), Some(2), "{}", stderr(&unknown_id));
    // A far id that does not exist: the far side's not-found, exit 2.
    let missing = pair.local.run(&["poll", "far:proc_0123456789ab"]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
}

#[test]
fn remote_kill_leaves_no_process_of_the_tree_on_the_far_side() {
    let pair = Pair::new();
    let id = pair.run(&["--", "sleep 300 & sleep 300 & wait"]);
    let mut tree = Vec::new();
    let grown = wait_until(DEADLINE, || {
        let polled = pair.local.json(&["poll", &id, "--json"]);
        let Some(pid) = polled["pid"].as_i64() else {
            return false;
        };
        let pid = i32::try_from(pid).unwrap_or_default();
        tree = std::iter::once(pid).chain(descendants(pid)).collect();
        tree.len() >= 3
    });
    assert!(
        grown.is_ok(),
        "the far job never had its two sleeps: {tree:?}"
    );
    pair.local.ok(&["kill", &id]);
    let gone = wait_until(DEADLINE, || tree.iter().all(|p| !alive(*p)));
    assert!(
        gone.is_ok(),
        "still alive on the far side: {:?}",
        tree.iter().filter(|p| alive(**p)).collect::<Vec<_>>()
    );
    let polled = pair.local.json(&["poll", &id, "--json"]);
    assert_eq!(polled["completion_reason"], "killed", "{polled}");
    assert_eq!(polled["termination_source"], "process_kill", "{polled}");
}

#[test]
fn a_secret_printed_far_away_arrives_masked() {
    let pair = Pair::new();
    let token = format!("ghp_{}", "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8");
    let id = pair.run(&["--", &format!("echo token {token} end")]);
    let waited = pair.local.run(&["wait", &id]);
    assert!(waited.status.success(), "{}", stderr(&waited));
    let logs = pair.local.ok(&["logs", &id]);
    assert!(logs.contains("token") && logs.contains("end"), "{logs}");
    assert!(!logs.contains(&token), "the token crossed the door: {logs}");
    let followed = pair.local.ok(&["logs", "-f", &id]);
    assert!(!followed.contains(&token), "{followed}");
}

#[test]
fn the_far_job_runs_in_the_proxy_environment_plus_explicit_env_only() {
    let pair = Pair::new();
    // The local daemon starts without the variable; only the caller has it.
    pair.local.ok(&["ps"]);
    let out = pair
        .local
        .cmd(&[
            "run",
            "--host",
            "far",
            "--env",
            "GIVEN=yes",
            "--",
            "echo caller=${HERD_IT_CALLER:-unset} given=$GIVEN",
        ])
        .env("HERD_IT_CALLER", "leaked")
        .output()
        .expect("herd runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let id = stdout(&out).trim().to_owned();
    pair.local.ok(&["wait", &id]);
    let logs = pair.local.ok(&["logs", &id]);
    assert_eq!(logs.trim(), "caller=unset given=yes", "{logs}");
}

#[test]
fn completion_arrives_once_across_a_killed_door_far_daemon_and_local_daemon() {
    let pair = Pair::new();
    let marker = pair.far.scratch().join("go");
    // The job waits for the test's go, so every fault lands while it runs.
    let id = pair.run(&[
        "--notify",
        "--",
        &format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo finished",
            marker.display()
        ),
    ]);
    // The events door and the control door are open.
    assert!(
        wait_until(DEADLINE, || pair.doors().len() >= 2).is_ok(),
        "the doors never opened"
    );
    // 1. The doors die: the link reconnects.
    for pid in pair.doors() {
        sigkill(pid);
    }
    assert!(
        wait_until(DEADLINE, || !pair.doors().is_empty()).is_ok(),
        "the link never reopened its doors"
    );
    // 2. The far daemon dies (the job lives on under its shim).
    let far_daemon = pair.far.daemon_pid().expect("the far daemon runs");
    sigkill(far_daemon);
    assert!(wait_until(DEADLINE, || !alive(far_daemon)).is_ok());
    // 3. The local daemon dies too.
    let local_daemon = pair.local.daemon_pid().expect("the local daemon runs");
    sigkill(local_daemon);
    assert!(wait_until(DEADLINE, || !alive(local_daemon)).is_ok());
    for pid in pair.doors() {
        sigkill(pid);
    }
    std::fs::write(&marker, b"").expect("the scratch dir is writable");

    // A new local daemon catches up, through a new far daemon.
    let events = pair.events_until(|all| !completions_of(all, &id).is_empty());
    let first = completions_of(&events, &id);
    assert_eq!(first.len(), 1, "{events:?}");
    assert_eq!(first[0]["exit_code"], 0, "{events:?}");
    assert!(
        first[0]["output"]
            .as_str()
            .unwrap_or_default()
            .contains("finished"),
        "{events:?}"
    );

    // Kill the doors once more, then a second job's completion comes after any
    // replay of the first would have: the first is still there once. The spawn
    // goes out at once, before the link has noticed: one the dead door cannot
    // take is sent again on a new door, and one written into a door still dying
    // is sent again with its request key (the far herd starts it once).
    for pid in pair.doors() {
        sigkill(pid);
    }
    let second = pair.run(&["--notify", "--", "true"]);
    let later = pair.events_until(|all| !completions_of(all, &second).is_empty());
    assert!(
        completions_of(&later, &id).is_empty(),
        "the first completion came again: {later:?}"
    );
    assert_eq!(completions_of(&later, &second).len(), 1, "{later:?}");
}

/// A home whose host map is the file of the release before the store
/// (`hosts/far.json`) gets it imported: the far job's completion still reaches its
/// local owner once, and the file is gone.
#[test]
fn a_host_map_file_of_the_release_before_the_store_is_imported() {
    let pair = Pair::new();
    let marker = pair.far.scratch().join("go");
    let id = pair.run(&[
        "--notify",
        "--",
        &format!(
            "while [ ! -e {} ]; do sleep 0.05; done; echo finished",
            marker.display()
        ),
    ]);
    pair.local.ok(&["shutdown", "--keep-jobs"]);
    let db = pair.local.home().join("state.db");
    let book: String = rusqlite::Connection::open(&db)
        .and_then(|c| {
            let book = c.query_row("SELECT book FROM host_links WHERE host = 'far'", [], |r| {
                r.get(0)
            })?;
            c.execute("DELETE FROM host_links", [])?;
            Ok(book)
        })
        .expect("the link's map was committed before the spawn answered");
    let file = pair.local.home().join("hosts/far.json");
    std::fs::write(&file, book).expect("the map as the release before kept it");
    std::fs::write(&marker, b"").expect("the scratch dir is writable");

    let events = pair.events_until(|all| !completions_of(all, &id).is_empty());
    let done = completions_of(&events, &id);
    assert_eq!(done.len(), 1, "{events:?}");
    assert!(!file.exists(), "the map file was imported and removed");
    let second = pair.run(&["--notify", "--", "true"]);
    let later = pair.events_until(|all| !completions_of(all, &second).is_empty());
    assert!(completions_of(&later, &id).is_empty(), "{later:?}");
}

#[test]
fn an_unreachable_host_shows_its_jobs_last_known_state() {
    let pair = Pair::new();
    let id = pair.run(&["--", "sleep 30"]);
    let ps = pair.local.json(&["ps", "--host", "far", "--json"]);
    assert!(
        ps["processes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["session_id"] == id.as_str())),
        "{ps}"
    );
    // The far home goes away: its door can no longer start a far herd there.
    let far_daemon = pair.far.daemon_pid().expect("the far daemon runs");
    let config = pair.local.home().join("config.toml");
    let text = std::fs::read_to_string(&config).expect("config");
    std::fs::write(
        &config,
        text.replace(
            "[hosts.far]\ncommand = [",
            "[hosts.far]\ncommand = [\"false\", ",
        ),
    )
    .expect("config");
    // The new config takes effect with a new local daemon.
    pair.local.ok(&["shutdown", "--keep-jobs"]);
    let out = pair.local.run(&["ps", "--host", "far"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(said.contains("unreachable since"), "{said}");
    assert!(
        stdout(&out).contains(&id),
        "the last known row: {}",
        stdout(&out)
    );
    let poll = pair.local.run(&["poll", &id]);
    assert_eq!(poll.status.code(), Some(3), "{}", stderr(&poll));
    // The far home's guard shuts its daemon down, and the job with it.
    assert!(alive(far_daemon), "the far daemon was left alone");
}

/// One MCP tool call's first text block, parsed, and whether it is an error.
async fn tool(
    client: &rmcp::service::RunningService<rmcp::RoleClient, ()>,
    name: &'static str,
    args: Value,
) -> (Value, bool) {
    let params = rmcp::model::CallToolRequestParams::new(name)
        .with_arguments(args.as_object().cloned().expect("object args"));
    let result = client
        .call_tool(params)
        .await
        .expect("the tool call is answered");
    let text = result
        .content
        .iter()
        .find_map(|c| c.as_text().map(|t| t.text.clone()))
        .expect("a text block");
    (
        serde_json::from_str(&text).expect("the first block is JSON"),
        result.is_error == Some(true),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_terminal_takes_host_and_process_takes_the_qualified_id() {
    use rmcp::ServiceExt;
    let pair = Pair::new();
    let mut cmd = tokio::process::Command::new(HERD);
    cmd.args(["mcp", "--owner", "agent-1"])
        .env("HERD_HOME", pair.local.home())
        .env_remove("HERD_OWNER")
        .env_remove("INVOCATION_ID")
        .env("HERD_LOG", "warn")
        .current_dir(pair.local.scratch());
    let transport = rmcp::transport::TokioChildProcess::new(cmd).expect("herd mcp starts");
    let client = ().serve(transport).await.expect("the MCP handshake succeeds");

    let (started, is_error) = tool(
        &client,
        "terminal",
        json!({"command": "echo from-far", "background": true, "notify": true, "host": "far"}),
    )
    .await;
    assert!(!is_error, "{started}");
    let id = started["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(id.starts_with("far:proc_"), "{started}");
    let (waited, is_error) = tool(
        &client,
        "process",
        json!({"action": "wait", "session_id": id, "timeout": 30}),
    )
    .await;
    assert!(!is_error, "{waited}");
    assert_eq!(waited["exit_code"], 0, "{waited}");
    let (log, _) = tool(
        &client,
        "process",
        json!({"action": "log", "session_id": id}),
    )
    .await;
    assert!(log.to_string().contains("from-far"), "{log}");

    // A foreground command on the host answers its output.
    let (fg, is_error) = tool(
        &client,
        "terminal",
        json!({"command": "echo fg-far", "host": "far"}),
    )
    .await;
    assert!(!is_error, "{fg}");
    assert!(
        fg["output"].as_str().unwrap_or_default().contains("fg-far"),
        "{fg}"
    );
    assert_eq!(fg["exit_code"], 0, "{fg}");

    let (bad, is_error) = tool(
        &client,
        "terminal",
        json!({"command": "true", "background": true, "host": "Bad Name"}),
    )
    .await;
    assert!(is_error, "{bad}");
    let _ = client.cancel().await;
}

#[test]
fn handoff_of_a_far_job_sends_its_completion_to_the_new_owner() {
    let pair = Pair::new();
    let marker = pair.far.scratch().join("go");
    let id = pair.run(&[
        "--notify",
        "--",
        &format!("while [ ! -e {} ]; do sleep 0.05; done", marker.display()),
    ]);
    let handed = pair.local.json(&[
        "handoff",
        &id,
        "--to",
        "agent-2",
        "--note",
        "yours now",
        "--json",
    ]);
    assert_eq!(handed["session_id"], id.as_str(), "{handed}");
    let ps = pair
        .local
        .json(&["ps", "--host", "far", "--owner", "agent-2", "--json"]);
    assert!(
        ps["processes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["session_id"] == id.as_str())),
        "{ps}"
    );
    // Not the old owner's any more.
    let again = pair
        .local
        .run(&["handoff", &id, "--to", "agent-3", "--note", "x"]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    std::fs::write(&marker, b"").expect("the scratch dir is writable");
    let mut all = Vec::new();
    let arrived = wait_until(DEADLINE, || {
        let text = pair.local.ok(&["events", "--owner", "agent-2", "--json"]);
        all.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
        );
        !completions_of(&all, &id).is_empty()
    });
    assert!(arrived.is_ok(), "{all:?}");
    assert_eq!(completions_of(&all, &id)[0]["owner_task_id"], "agent-2");
    assert!(completions_of(&pair.events(), &id).is_empty());
}

#[test]
fn over_real_ssh_a_job_runs_streams_and_completes_once_across_a_killed_ssh() {
    let Some(sshd) = crate::sshd::Sshd::start() else {
        return;
    };
    let pair = Pair::through(sshd.ssh());
    let marker = pair.far.scratch().join("go");
    let id = pair.run(&[
        "--notify",
        "--",
        &format!(
            "echo over-ssh; while [ ! -e {} ]; do sleep 0.05; done; echo done",
            marker.display()
        ),
    ]);
    let polled = pair.local.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");
    // Every ssh client of this door dies mid-job.
    let far_home = format!("HERD_HOME={}", pair.far.home().display());
    let ssh_doors = || -> Vec<i32> {
        processes()
            .into_iter()
            .filter(|(_, line)| line.starts_with("ssh ") && line.contains(&far_home))
            .map(|(pid, _)| pid)
            .collect()
    };
    assert!(wait_until(DEADLINE, || !ssh_doors().is_empty()).is_ok());
    for pid in ssh_doors() {
        sigkill(pid);
    }
    std::fs::write(&marker, b"").expect("the scratch dir is writable");
    let followed = pair.local.ok(&["logs", "-f", &id]);
    assert!(
        followed.contains("over-ssh") && followed.contains("done"),
        "{followed}"
    );
    let events = pair.events_until(|all| !completions_of(all, &id).is_empty());
    assert_eq!(completions_of(&events, &id).len(), 1, "{events:?}");
    let second = pair.run(&["--notify", "--", "true"]);
    let later = pair.events_until(|all| !completions_of(all, &second).is_empty());
    assert!(completions_of(&later, &id).is_empty(), "{later:?}");
}

#[test]
fn a_far_watch_wake_arrives_once_with_the_qualified_id() {
    let pair = Pair::new();
    let marker = pair.far.scratch().join("go");
    let id = pair.run(&[
        "--notify",
        "--watch",
        "READY",
        "--",
        &format!(
            "echo READY now; while [ ! -e {} ]; do sleep 0.05; done",
            marker.display()
        ),
    ]);
    let events = pair.events_until(|all| {
        all.iter()
            .any(|e| e["type"] == "watch_match" && e["session_id"] == id.as_str())
    });
    let wakes: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "watch_match" && e["session_id"] == id.as_str())
        .collect();
    assert_eq!(wakes.len(), 1, "{events:?}");
    assert_eq!(wakes[0]["owner_task_id"], "cli", "{events:?}");
    // The doors die and come back; the wake is not replayed, the completion
    // comes once.
    for pid in pair.doors() {
        sigkill(pid);
    }
    std::fs::write(&marker, b"").expect("the scratch dir is writable");
    let later = pair.events_until(|all| !completions_of(all, &id).is_empty());
    assert!(
        !later.iter().any(|e| e["type"] == "watch_match"),
        "the wake came again: {later:?}"
    );
    assert_eq!(completions_of(&later, &id).len(), 1, "{later:?}");
}

#[test]
fn restart_of_a_far_job_runs_it_again_there_with_both_ids_qualified() {
    let pair = Pair::new();
    let id = pair.run(&[
        "--owner",
        "agent-9",
        "--notify",
        "--",
        "echo run-$((1 + 1))",
    ]);
    pair.local.ok(&["wait", &id]);
    let out = pair
        .local
        .cmd(&["restart", &id, "--json"])
        .env("HERD_IT_CALLER", "leaked")
        .output()
        .expect("herd runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let info: Value = serde_json::from_str(stdout(&out).trim()).expect("JSON");
    let again = info["session_id"].as_str().unwrap_or_default().to_owned();
    assert!(again.starts_with("far:proc_") && again != id, "{info}");
    assert_eq!(info["replaces"], id.as_str(), "{info}");
    pair.local.ok(&["wait", &again]);
    assert_eq!(pair.local.ok(&["logs", &again]).trim(), "run-2");
    // The new far job is the same owner's: listed as its, its completion its.
    let ps = pair.local.json(&[
        "ps", "--host", "far", "--owner", "agent-9", "--all", "--json",
    ]);
    assert!(
        ps["processes"]
            .as_array()
            .is_some_and(|r| r.iter().any(|r| r["session_id"] == again.as_str())),
        "{ps}"
    );
    let mut all = Vec::new();
    let arrived = wait_until(DEADLINE, || {
        let text = pair.local.ok(&["events", "--owner", "agent-9", "--json"]);
        all.extend(
            text.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok()),
        );
        !completions_of(&all, &again).is_empty()
    });
    assert!(arrived.is_ok(), "{all:?}");
}

#[test]
fn a_far_herd_without_leased_drains_is_refused_naming_what_it_lacks() {
    let pair = Pair::new();
    // A stand-in for an older far herd: it greets with no capabilities.
    let answer = r#"{"jsonrpc":"2.0","id":1,"result":{"protocol":1,"daemon":"0.0.9","home":"/far","capabilities":[]}}"#;
    pair.add_stand_in(
        "old",
        &format!("read -r hello; echo '{answer}'; read -r next"),
    );
    let out = pair.local.run(&["run", "--host", "old", "--", "true"]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let said = stderr(&out);
    assert!(
        said.contains("0.0.9")
            && said.contains("drain.lease")
            && said.contains("hosts install old"),
        "{said}"
    );
}

/// The events of `kind` about `id`.
fn of_kind<'a>(events: &'a [Value], kind: &str, id: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e["type"] == kind && e["session_id"] == id)
        .collect()
}

#[test]
fn far_heartbeats_and_a_far_watch_wake_reach_the_local_owner_once_each() {
    // A far job's heartbeats (B21) and another's watch wake (B20) reach
    // the local owner through the host link under the qualified ids, each once,
    // across doors killed between them.
    let pair = Pair::new();
    // The far daemon starts with the door, so it reads this floor.
    std::fs::write(
        pair.far.home().join("config.toml"),
        "heartbeat_floor_seconds = 1\n",
    )
    .expect("the far home is writable");
    let wait_for = |name: &str| {
        format!(
            "while [ ! -e {} ]; do sleep 0.05; done",
            pair.far.scratch().join(name).display()
        )
    };
    let go = |name: &str| {
        std::fs::write(pair.far.scratch().join(name), b"").expect("the scratch dir is writable");
    };
    // Each line comes only after the previous beat arrived here, so each beat
    // carries one line; nothing is printed after the last, so there are two.
    let beating = pair.run(&[
        "--heartbeat",
        "1",
        "--",
        &format!(
            "echo beat-one; {}; echo beat-two; {}",
            wait_for("one"),
            wait_for("two")
        ),
    ]);
    let watched = pair.run(&[
        "--notify",
        "--watch",
        "READY",
        "--",
        &format!("echo booting; echo READY on 8080; {}", wait_for("two")),
    ]);
    let beat_with = |all: &[Value], text: &str| {
        of_kind(all, "heartbeat", &beating)
            .iter()
            .any(|e| e["output"].as_str().is_some_and(|o| o.contains(text)))
    };
    let mut all = pair.events_until(|got| {
        beat_with(got, "beat-one") && !of_kind(got, "watch_match", &watched).is_empty()
    });
    // Every door dies; the link reopens them and drains again.
    for pid in pair.doors() {
        sigkill(pid);
    }
    go("one");
    all.extend(pair.events_until(|got| beat_with(got, "beat-two")));
    for pid in pair.doors() {
        sigkill(pid);
    }
    go("two");
    // Both completions come after any replay of the earlier events would.
    all.extend(pair.events_until(|got| {
        !completions_of(got, &beating).is_empty() && !completions_of(got, &watched).is_empty()
    }));

    let beats = of_kind(&all, "heartbeat", &beating);
    let seqs: Vec<&Value> = beats.iter().map(|e| &e["seq"]).collect();
    assert_eq!(seqs, [1, 2], "two beats, once each: {all:?}");
    for (beat, text) in beats.iter().zip(["beat-one", "beat-two"]) {
        assert!(
            beat["output"].as_str().is_some_and(|o| o.contains(text)),
            "{beat}"
        );
        assert_eq!(beat["owner_task_id"], "cli", "{beat}");
        assert_eq!(beat["interval"], 1, "{beat}");
    }
    let wakes = of_kind(&all, "watch_match", &watched);
    assert_eq!(wakes.len(), 1, "one wake: {all:?}");
    assert_eq!(wakes[0]["pattern"], "READY", "{all:?}");
    assert_eq!(wakes[0]["owner_task_id"], "cli", "{all:?}");
    assert!(
        wakes[0]["output"]
            .as_str()
            .is_some_and(|o| o.contains("READY on 8080")),
        "{all:?}"
    );
    // A heartbeat implies notify (B21): both jobs' completions, once each.
    assert_eq!(completions_of(&all, &beating).len(), 1, "{all:?}");
    assert_eq!(completions_of(&all, &watched).len(), 1, "{all:?}");
    // Nothing arrived for another session or owner.
    assert!(
        all.iter()
            .all(|e| e["session_id"] == beating.as_str() || e["session_id"] == watched.as_str()),
        "{all:?}"
    );
}

#[test]
fn a_far_heartbeat_after_the_far_daemon_restarted_is_not_dropped() {
    // After a far daemon restart a re-attached job's beats count from 1
    // again; a beat is told from a replay by its whole content (its age differs).
    let pair = Pair::new();
    std::fs::write(
        pair.far.home().join("config.toml"),
        "heartbeat_floor_seconds = 1\n",
    )
    .expect("the far home is writable");
    let marker = pair.far.scratch().join("one");
    let id = pair.run(&[
        "--heartbeat",
        "1",
        "--",
        &format!(
            "echo beat-one; while [ ! -e {} ]; do sleep 0.05; done; echo beat-two; sleep 30",
            marker.display()
        ),
    ]);
    let beat_with = |all: &[Value], text: &str| {
        of_kind(all, "heartbeat", &id)
            .iter()
            .any(|e| e["output"].as_str().is_some_and(|o| o.contains(text)))
    };
    let mut all = pair.events_until(|got| beat_with(got, "beat-one"));
    let far_daemon = pair.far.daemon_pid().expect("the far daemon runs");
    sigkill(far_daemon);
    assert!(wait_until(DEADLINE, || !alive(far_daemon)).is_ok());
    for pid in pair.doors() {
        sigkill(pid);
    }
    std::fs::write(&marker, b"").expect("the scratch dir is writable");
    // The far job (re-attached by a new far daemon) beats `beat-two` as seq 1.
    let arrived = wait_until(DEADLINE, || {
        all.extend(pair.events());
        beat_with(&all, "beat-two")
    });
    pair.local.ok(&["kill", &id]);
    assert!(
        arrived.is_ok(),
        "the beat after the far restart was dropped: {all:?}"
    );
}

#[test]
fn two_identical_far_watch_wakes_both_arrive() {
    // B20: a far job that prints the same matching line twice, more
    // than the 15 s spacing apart, wakes its owner twice, as a local job does;
    // the second differs from a replay of the first by when it matched.
    let pair = Pair::new();
    let id = pair.run(&[
        "--watch",
        "READY",
        "--",
        "echo READY; sleep 17; echo READY; sleep 30",
    ]);
    let mut all = Vec::new();
    let _ = wait_until(Duration::from_secs(60), || {
        all.extend(pair.events());
        of_kind(&all, "watch_match", &id).len() >= 2
    });
    pair.local.ok(&["kill", &id]);
    assert_eq!(of_kind(&all, "watch_match", &id).len(), 2, "{all:?}");
}

#[test]
fn logs_of_a_long_far_log_stream_all_of_it_as_the_far_side_shows_it() {
    // `herd logs NAME:ID` of a log longer than one chunk takes the rest
    // as one `logs.dump` stream through the far herd; what it prints is exactly
    // what the far herd's own `herd logs` prints, which for text with no secret
    // is the log file itself.
    let pair = Pair::new();
    let id = pair.run(&[
        "--",
        "i=0; while [ $i -lt 40 ]; do yes \"line $i of a long far log\" | head -n 4000; i=$((i+1)); done",
    ]);
    pair.local.ok(&["wait", &id]);
    let far_id = id.trim_start_matches("far:");
    let file = pair
        .far
        .home()
        .join("logs/sessions")
        .join(format!("{far_id}.log"));
    let raw = std::fs::read_to_string(&file).expect("the far log");
    assert!(
        raw.len() > 3 << 20,
        "a log of several chunks: {}",
        raw.len()
    );
    let here = pair.local.ok(&["logs", &id]);
    assert_eq!(here.len(), raw.len());
    assert!(here == raw, "herd logs of the far job differs from its log");
    assert!(pair.far.ok(&["logs", far_id]) == raw);
    let answer: Value =
        serde_json::from_str(&pair.local.ok(&["logs", &id, "--json"])).expect("JSON");
    assert_eq!(answer["next_byte"], json!(raw.len()));
    assert!(answer["output"].as_str() == Some(raw.as_str()));
}

#[test]
fn logs_of_a_long_log_from_a_far_herd_without_logs_dump_go_chunk_by_chunk() {
    // A far herd of an older version does not serve `logs.dump`; `herd
    // logs` of a long log there reads the rest chunk by chunk, nothing lost or
    // printed twice, and asks for the stream once only. The stand-in far herd
    // answers lookup and log_chunk (two chunks of 600,001 bytes, then "tail",
    // then the end) and refuses logs.dump as an unknown method, noting each ask.
    let pair = Pair::new();
    let asked = pair.local.scratch().join("dump-asked");
    let head = r#"{"jsonrpc":"2.0","id":%s,"result":{"session_id":"proc_00000000000a""#;
    let chunk = |from: u64, fill: char, next: u64| {
        format!(
            r#"*'"from_byte":{from}'[,}}]*) printf '{head},"output":"' "$id"; head -c 600000 /dev/zero | tr '\0' {fill}; printf '\\n","next_byte":{next},"is_running":false}}}}\n' ;;"#
        )
    };
    let script = format!(
        r#"read -r hello
echo '{{"jsonrpc":"2.0","id":1,"result":{{"protocol":1,"daemon":"0.0.9","home":"/far","capabilities":["drain.lease","events.pending","logs.follow.result"]}}}}'
while read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/.*"id":\([0-9][0-9]*\)[,}}].*/\1/p')
  case "$line" in
    *'"logs.dump"'*) echo asked >> {asked}; printf '{{"jsonrpc":"2.0","id":%s,"error":{{"code":-32601,"message":"unknown method"}}}}\n' "$id" ;;
    *'"lookup"'*) printf '{head}}}}}\n' "$id" ;;
    {first}
    {second}
    *'"from_byte":1200002'[,}}]*) printf '{head},"output":"tail\\n","next_byte":1200007,"is_running":false}}}}\n' "$id" ;;
    *) printf '{head},"output":"","next_byte":1200007,"is_running":false}}}}\n' "$id" ;;
  esac
done
"#,
        asked = asked.display(),
        first = chunk(0, 'a', 600_001),
        second = chunk(600_001, 'b', 1_200_002),
    );
    pair.add_stand_in("old", &script);
    let out = pair.local.run(&["logs", "old:proc_00000000000a"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let printed = stdout(&out);
    let want = format!("{}\n{}\ntail\n", "a".repeat(600_000), "b".repeat(600_000));
    assert_eq!(printed.len(), want.len(), "{}", stderr(&out));
    assert!(printed == want);
    let asks = std::fs::read_to_string(&asked).expect("the stream was asked for");
    assert_eq!(asks.lines().count(), 1, "logs.dump asked for {asks:?}");
}

#[test]
fn a_spawn_whose_door_closed_after_it_was_sent_is_sent_again_with_its_key() {
    // The door dies after the spawn was written and before it was
    // answered, so the job may or may not have started. A far herd that serves
    // `spawn.request_key` gets the spawn again on a new door with the same key
    // (and starts the job once, tested in daemon.rs); the caller gets its id.
    // The stand-in far herd notes every spawn's key, and its first door exits
    // as soon as it has read one.
    let pair = Pair::new();
    let keys = pair.local.scratch().join("keys");
    let dropped = pair.local.scratch().join("dropped");
    let script = format!(
        r#"read -r hello
echo '{{"jsonrpc":"2.0","id":1,"result":{{"protocol":1,"daemon":"0.1.0","home":"/far","capabilities":["drain.lease","events.pending","logs.follow.result","spawn.request_key"]}}}}'
while read -r line; do
  id=$(printf '%s' "$line" | sed -n 's/^{{"id":\([0-9][0-9]*\),.*/\1/p')
  case "$line" in
    *'"method":"spawn"'*)
      printf '%s\n' "$line" | sed -n 's/.*"request_key":"\([^"]*\)".*/\1/p' >> {keys}
      if [ ! -e {dropped} ]; then : > {dropped}; exit 0; fi
      printf '{{"id":%s,"jsonrpc":"2.0","result":{{"session_id":"proc_00000000000b","pid":4242}}}}\n' "$id" ;;
    *) printf '{{"id":%s,"jsonrpc":"2.0","result":{{}}}}\n' "$id" ;;
  esac
done
"#,
        keys = keys.display(),
        dropped = dropped.display(),
    );
    pair.add_stand_in("stub", &script);
    let out = pair.local.run(&["run", "--host", "stub", "--", "true"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), "stub:proc_00000000000b");
    let sent = std::fs::read_to_string(&keys).expect("the spawns were noted");
    let sent: Vec<&str> = sent.lines().collect();
    assert_eq!(sent.len(), 2, "the spawn was sent twice: {sent:?}");
    assert!(
        !sent[0].is_empty() && sent[0] == sent[1],
        "one key: {sent:?}"
    );
}

#[test]
fn a_second_wait_on_a_far_job_reuses_the_door_of_the_first() {
    // A far `wait` runs on a door of its own (it may last an hour);
    // once answered the door is kept, so the next wait does not open another (over
    // ssh, a new connection). A kept door that died meanwhile costs nothing: the
    // wait goes again on a new one. The door notes each time it is opened.
    let opened = std::env::temp_dir().join(format!("herd-doors-{}", std::process::id()));
    let _ = std::fs::remove_file(&opened);
    let pair = Pair::through(vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("echo opened >> {}; exec \"$@\"", opened.display()),
        "door".to_owned(),
    ]);
    let count = || {
        std::fs::read_to_string(&opened)
            .map(|t| t.lines().count())
            .unwrap_or(0)
    };
    let id = pair.run(&["--", "echo done"]);
    pair.local.ok(&["wait", &id]);
    let after_first = count();
    let answer: Value =
        serde_json::from_str(&pair.local.ok(&["wait", &id, "--json"])).expect("JSON");
    assert_eq!(answer["exit_code"], 0, "{answer}");
    assert_eq!(count(), after_first, "the second wait opened a door");
    let doors = pair.doors();
    for pid in &doors {
        sigkill(*pid);
    }
    assert!(
        wait_until(DEADLINE, || doors.iter().all(|pid| !alive(*pid))).is_ok(),
        "the doors never died"
    );
    let again: Value =
        serde_json::from_str(&pair.local.ok(&["wait", &id, "--json"])).expect("JSON");
    assert_eq!(again["exit_code"], 0, "{again}");
    assert_eq!(again["session_id"], id.as_str(), "{again}");
    assert!(count() > after_first, "a new door after the kept one died");
    let _ = std::fs::remove_file(&opened);
}
