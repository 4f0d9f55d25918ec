//! A terminal and a shell you can trust: the client's refusals and
//! the foreground behaviour of `herd` commands, against the real daemon on a
//! temp home. The full-screen clients (`attach`, `top`) are in their own files.

use std::time::{Duration, Instant};

use herd_test_support::procs::children;
use herd_test_support::tmux::Tmux;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::support::{Env, HERD, alive, stderr, wait_until};

/// How long a daemon or a job may take to do what a test waits for.
const DEADLINE: Duration = Duration::from_secs(30);

// `herd shutdown` with running jobs and no terminal to ask on (a
// script, an agent's shell tool) kills nothing and says to add --yes or
// --keep-jobs (exit 2); `--json` alike; `--yes` then kills them, and with no
// job running it stops the daemon without asking.
#[test]
fn shutdown_without_a_terminal_refuses_to_kill_running_jobs() {
    let env = Env::new();
    let id = env.ok(&["run", "--", "sleep", "300"]).trim().to_owned();
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    for args in [&["shutdown"][..], &["shutdown", "--json"]] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("1 job is running")
                && said.contains("--yes")
                && said.contains("--keep-jobs"),
            "{said}"
        );
    }
    assert!(alive(daemon), "the daemon still runs");
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");

    let out = env.ok(&["shutdown", "--yes"]);
    assert!(out.contains("1 running job killed"), "{out}");
    wait_until(DEADLINE, || !alive(daemon))
        .unwrap_or_else(|()| panic!("the daemon {daemon} outlived shutdown --yes"));

    // No job running: nothing to ask about.
    env.json(&["ps", "--json"]);
    let out = env.ok(&["shutdown"]);
    assert!(out.contains("0 running jobs killed"), "{out}");
}

/// A tmux pane of `cols` x `rows` running `/bin/sh` with the home's `HERD_HOME`,
/// its screen read joined.
fn pane(env: &Env, cols: u16, rows: u16) -> Tmux {
    Tmux::start(
        env.scratch().join("tmux.sock"),
        "people",
        env.home(),
        (cols, rows),
        &[],
    )
    .joined()
}

/// Types `echo MARKER=$?` once the pane's shell has no child left (what ran
/// has ended), and returns the exit status it prints.
fn status_after(tmux: &Tmux, marker: &str) -> String {
    let shell = tmux.shell_pid();
    if wait_until(DEADLINE, || children(shell).is_empty()).is_err() {
        panic!("herd is still running under the shell:\n{}", tmux.screen());
    }
    tmux.type_line(&format!("echo {marker}=$?"));
    let expect = format!("{marker}=");
    let screen = tmux.wait_for("the exit status", |s| {
        s.lines()
            .any(|l| l.trim_start_matches(['$', '#', ' ']).starts_with(&expect))
    });
    screen
        .lines()
        .map(|l| l.trim_start_matches(['$', '#', ' ']))
        .find_map(|l| l.strip_prefix(&expect))
        .unwrap_or_default()
        .trim()
        .to_owned()
}

/// The id of the one running session.
fn the_running_id(env: &Env) -> String {
    let listed = env.json(&["ps", "--json"]);
    let rows = listed["processes"].as_array().cloned().unwrap_or_default();
    assert_eq!(rows.len(), 1, "{listed}");
    rows[0]["session_id"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

// `herd run --wait` is a foreground program: Ctrl-C reaches the job's
// process group (its trap runs, its exit is the one reported, herd exits 1 for
// it), and SIGTERM sent to herd reaches the job too.
#[test]
fn run_wait_passes_ctrl_c_and_sigterm_to_the_job() {
    let env = Env::new();
    let tmux = pane(&env, 120, 30);
    tmux.type_line(&format!(
        "{HERD} run --wait -- sh -c 'trap \"printf got-%s INT; echo; exit 7\" INT; printf ready-%s int; echo; \
         while :; do sleep 0.1; done'"
    ));
    tmux.wait_for("the job", |s| s.contains("ready-int"));
    tmux.keys(&["C-c"]);
    let screen = tmux.wait_for("the job's trap", |s| s.contains("got-INT"));
    assert!(
        screen.contains("Ctrl-C again after 2 s detaches"),
        "{screen}"
    );
    assert_eq!(status_after(&tmux, "int"), "1");
    let screen = tmux.screen();
    assert!(screen.contains("exited 7"), "{screen}");

    tmux.type_line(&format!(
        "clear; {HERD} run --wait -- sh -c 'trap \"printf got-%s TERM; echo; exit 5\" TERM; printf ready-%s term; echo; \
         while :; do sleep 0.1; done'"
    ));
    tmux.wait_for("the job", |s| s.contains("ready-term"));
    let shell = tmux.shell_pid();
    let herd = children(shell);
    assert_eq!(herd.len(), 1, "one herd under the shell: {herd:?}");
    kill(Pid::from_raw(herd[0]), Signal::SIGTERM).expect("herd can be signalled");
    tmux.wait_for("the job's trap", |s| s.contains("got-TERM"));
    assert_eq!(status_after(&tmux, "term"), "1");
    assert!(tmux.screen().contains("exited 5"), "{}", tmux.screen());
}

// A job that keeps running after Ctrl-C: the next Ctrl-C within 2 s
// is passed on too; one 2 s after the first detaches, printing the id and how
// to follow it; herd exits 1 and the job runs on.
#[test]
fn run_wait_second_ctrl_c_after_two_seconds_detaches() {
    let env = Env::new();
    let tmux = pane(&env, 160, 30);
    tmux.type_line(&format!(
        "{HERD} run --wait -- sh -c 'n=0; trap \"n=\\$((n+1)); printf ignored-INT-%s \\$n; echo\" INT; printf ready-%s detach; echo; \
         while :; do sleep 0.1; done'"
    ));
    tmux.wait_for("the job", |s| s.contains("ready-detach"));
    let id = the_running_id(&env);
    let started = Instant::now();
    // Ctrl-C until herd lets go, each once the last has had its effect: every
    // one before the 2 s reaches the job (its trap says so), then one detaches.
    let detached = |s: &str| s.contains("herd: detached from");
    let mut n = 0;
    while !detached(&tmux.screen()) {
        assert!(
            started.elapsed() < DEADLINE,
            "herd never detached:\n{}",
            tmux.screen()
        );
        n += 1;
        let caught = format!("ignored-INT-{n}");
        tmux.keys(&["C-c"]);
        tmux.wait_for("the Ctrl-C to reach the job or detach", |s| {
            s.contains(&caught) || detached(s)
        });
    }
    assert!(started.elapsed() >= Duration::from_secs(2));
    let screen = tmux.screen();
    assert!(n >= 2, "Ctrl-C within the 2 s reached the job: {n}");
    assert!(
        screen.contains(&format!("herd logs -f {id}")),
        "the id and how to follow it:\n{screen}"
    );
    assert_eq!(status_after(&tmux, "detached"), "1");
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");
}

// `herd run --pty --wait` on a terminal is an attach: typed input
// reaches the job, its exit is reported (exit 1 for its 4); a PTY job that ends
// at once still has its output shown.
#[test]
fn run_pty_wait_passes_typed_input() {
    let env = Env::new();
    let tmux = pane(&env, 120, 30);
    tmux.type_line(&format!(
        "{HERD} run --pty --wait -- sh -c 'printf ask-%s line; echo; read -r l; echo \"typed:$l\"; exit 4'"
    ));
    tmux.wait_for("the job's question", |s| s.contains("ask-line"));
    tmux.type_line("hello");
    tmux.wait_for("the job's answer", |s| s.contains("typed:hello"));
    assert_eq!(status_after(&tmux, "pty"), "1");
    assert!(tmux.screen().contains("exited 4"), "{}", tmux.screen());

    tmux.type_line(&format!(
        "clear; {HERD} run --pty --wait -- sh -c 'printf quick-%s output; echo'"
    ));
    assert_eq!(status_after(&tmux, "quick"), "0");
    assert!(tmux.screen().contains("quick-output"), "{}", tmux.screen());
}

// A stopped daemon (SIGSTOP) takes connections and answers nothing:
// `ps` fails within a few seconds (exit 3) naming its pid and how to resume
// it, and `doctor` says it is stopped; resumed, everything answers again.
#[test]
fn a_stopped_daemon_is_named_not_waited_on() {
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    let pid = Pid::from_raw(daemon);
    kill(pid, Signal::SIGSTOP).expect("the daemon can be stopped");
    let started = Instant::now();
    let out = env.run(&["ps"]);
    let took = started.elapsed();
    let doctor = env.run(&["doctor"]);
    kill(pid, Signal::SIGCONT).expect("the daemon can be resumed");
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("the daemon (pid {daemon}) is stopped"))
            && stderr(&out).contains(&format!("kill -CONT {daemon}")),
        "{}",
        stderr(&out)
    );
    assert!(
        took < Duration::from_secs(5),
        "found stopped after {took:?}"
    );
    let said = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        said.contains(&format!("the daemon (pid {daemon}) is stopped")),
        "doctor: {said}"
    );
    env.json(&["ps", "--json"]);
}

/// Runs until `child` exits (within [`DEADLINE`]); its status, stdout, stderr.
fn finish(mut child: std::process::Child, what: &str) -> (Option<i32>, String, String) {
    use std::io::Read;
    let mut status = None;
    if wait_until(DEADLINE, || {
        status = child.try_wait().ok().flatten();
        status.is_some()
    })
    .is_err()
    {
        let _ = child.kill();
        panic!("{what} never ended");
    }
    let mut out = String::new();
    let mut err = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        pipe.read_to_string(&mut out).expect("stdout reads");
    }
    if let Some(mut pipe) = child.stderr.take() {
        pipe.read_to_string(&mut err).expect("stderr reads");
    }
    (status.and_then(|s| s.code()), out, err)
}

// `run --wait`, `logs -f` and `wait` ride through a daemon killed
// with SIGKILL (the next one started by their reconnect, the job kept running
// by its shim): every line once and in order, a partial line completed once,
// and the job's real exit (3, so each exits 1 saying so).
#[test]
fn followers_ride_through_a_daemon_sigkill() {
    use std::process::Stdio;
    let env = Env::new();
    let gate = env.scratch().join("gate");
    let script = format!(
        "for i in $(seq 1 20); do echo line-$i; done; printf partial-; \
         while [ ! -e {} ]; do sleep 0.05; done; echo rest; \
         for i in $(seq 21 40); do echo line-$i; done; exit 3",
        gate.display()
    );
    let spawn = |args: &[&str]| {
        env.cmd(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("herd starts")
    };
    let run = spawn(&["run", "--wait", "--", "sh", "-c", &script]);
    let mut id = String::new();
    wait_until(DEADLINE, || {
        let listed = env.json(&["ps", "--json"]);
        id = listed["processes"][0]["session_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        !id.is_empty() && env.ok(&["logs", &id]).contains("line-20")
    })
    .unwrap_or_else(|()| panic!("the job never printed line-20"));
    let follow = spawn(&["logs", "-f", &id]);
    let waiter = spawn(&["wait", &id]);
    // Both are following (their connections are the daemon's) before it dies.
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    wait_until(DEADLINE, || {
        std::fs::read_dir(format!("/proc/{daemon}/fd")).is_ok_and(|fds| fds.count() >= 8)
    })
    .unwrap_or_else(|()| panic!("the clients never connected"));
    kill(Pid::from_raw(daemon), Signal::SIGKILL).expect("the daemon can be killed");
    wait_until(DEADLINE, || !alive(daemon))
        .unwrap_or_else(|()| panic!("the daemon {daemon} outlived SIGKILL"));
    std::fs::write(&gate, "").expect("the scratch dir is writable");

    let mut expected: Vec<String> = (1..=20).map(|i| format!("line-{i}")).collect();
    expected.push("partial-rest".to_owned());
    expected.extend((21..=40).map(|i| format!("line-{i}")));
    for (child, what) in [(run, "run --wait"), (follow, "logs -f")] {
        let (code, out, err) = finish(child, what);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines, expected, "{what}: stderr {err}");
        assert_eq!(code, Some(1), "{what}: {err}");
        assert!(err.contains("exited 3"), "{what}: {err}");
    }
    let (code, out, err) = finish(waiter, "wait");
    assert_eq!(code, Some(1), "wait: {out} {err}");
    assert!(out.contains("exited 3"), "wait: {out} {err}");
    assert_ne!(env.daemon_pid(), Some(daemon), "a new daemon serves");
}

// `events -f` prints, then acknowledges, and rides through a daemon
// SIGKILL: each completion once, those before the kill and those after it.
#[test]
fn events_follow_rides_through_a_daemon_sigkill_printing_each_once() {
    use std::process::Stdio;
    let env = Env::new();
    let out_path = env.scratch().join("events.out");
    let out = std::fs::File::create(&out_path).expect("the scratch dir is writable");
    let mut follower = env
        .cmd(&["events", "-f", "--json"])
        .stdout(Stdio::from(out))
        .stderr(Stdio::null())
        .spawn()
        .expect("herd starts");
    let printed = || -> Vec<String> {
        std::fs::read_to_string(&out_path)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == "completion")
            .filter_map(|e| e["session_id"].as_str().map(str::to_owned))
            .collect()
    };
    let mut ids = Vec::new();
    for round in 0..2 {
        for _ in 0..3 {
            ids.push(env.ok(&["run", "--notify", "--", "true"]).trim().to_owned());
        }
        let want = ids.len();
        if wait_until(DEADLINE, || printed().len() >= want).is_err() {
            let _ = follower.kill();
            panic!("round {round}: printed {:?} of {ids:?}", printed());
        }
        if round == 0 {
            let daemon = env.daemon_pid().expect("the daemon's pid file");
            kill(Pid::from_raw(daemon), Signal::SIGKILL).expect("the daemon can be killed");
            wait_until(DEADLINE, || !alive(daemon))
                .unwrap_or_else(|()| panic!("the daemon {daemon} outlived SIGKILL"));
        }
    }
    let still = follower.try_wait().expect("try_wait works");
    let _ = follower.kill();
    let _ = follower.wait();
    assert!(still.is_none(), "events -f ended: {still:?}");
    let mut seen = printed();
    assert_eq!(seen.len(), ids.len(), "each once: {seen:?}");
    seen.sort();
    ids.sort();
    assert_eq!(seen, ids);
}

// A name of 1 to 3 hex letters (`db`, `ed`) is a name (too short to
// be an id prefix) and finds its session; `cafe` is still refused; `herd attach
// <TAB>` completes the running sessions' ids and names, not the finished ones.
#[test]
fn short_hex_names_and_attach_completes_running_sessions() {
    let env = Env::new();
    let db = env
        .ok(&["run", "--name", "db", "--", "sleep", "300"])
        .trim()
        .to_owned();
    let polled = env.json(&["poll", "db", "--json"]);
    assert_eq!(polled["session_id"], db.as_str(), "{polled}");
    let out = env.run(&["run", "--name", "cafe", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("looks like a session id"),
        "{}",
        stderr(&out)
    );
    let done = env
        .ok(&["run", "--name", "ed", "--", "true"])
        .trim()
        .to_owned();
    env.ok(&["wait", "ed"]);

    let mut complete = env.cmd(&["--", "herd", "attach", ""]);
    complete.env("COMPLETE", "fish");
    let out = complete.output().expect("herd runs");
    let said = String::from_utf8_lossy(&out.stdout);
    let words: Vec<&str> = said.lines().filter_map(|l| l.split('\t').next()).collect();
    assert!(
        words.contains(&"db") && words.contains(&db.as_str()),
        "{said}"
    );
    assert!(
        !words.contains(&"ed") && !words.contains(&done.as_str()),
        "a finished session is not offered: {said}"
    );
}

// `ps --all` on an 80-column terminal with a long name, an
// `mcp-<hex>` owner and a restarted, killed session: no row wraps.
#[test]
fn ps_all_fits_an_80_column_terminal_with_long_cells() {
    let env = Env::new();
    let long = "a-rather-long-service-name-for-ps";
    let first = env
        .ok(&[
            "run",
            "--owner",
            "mcp-0123456789ab",
            "--name",
            long,
            "--",
            "sleep",
            "300",
        ])
        .trim()
        .to_owned();
    env.ok(&["restart", &first]);
    env.ok(&["kill", long]);
    let tmux = pane(&env, 80, 24);
    tmux.type_line(&format!("clear; {HERD} ps --all"));
    let screen = tmux.wait_for("the table", |s| s.contains("STATE") && s.contains("killed"));
    for line in screen.lines() {
        assert!(
            line.chars().count() <= 80,
            "a row wraps: {line:?}\n{screen}"
        );
    }
    assert!(
        screen.contains("COMMAND"),
        "the command keeps a column:\n{screen}"
    );
}

// `herd man` on a terminal is shown as `man` shows a page (through
// $MANPAGER), not dumped as roff; into a pipe it is still the roff.
#[test]
fn man_on_a_terminal_is_paged_not_roff() {
    let env = Env::new();
    let roff = env.ok(&["man", "run"]);
    assert!(roff.contains(".TH"), "{roff}");
    let tmux = Tmux::start(
        env.scratch().join("tmux.sock"),
        "man",
        env.home(),
        (100, 40),
        &[("MANPAGER", "cat"), ("MANWIDTH", "90")],
    );
    tmux.type_line(&format!("clear; {HERD} man run; echo man-rc=$?"));
    let screen = tmux.wait_for("the page", |s| s.lines().any(|l| l.starts_with("man-rc=")));
    assert!(screen.contains("man-rc=0"), "{screen}");
    assert!(
        screen.contains("NAME") && screen.contains("herd-run"),
        "{screen}"
    );
    assert!(
        !screen.contains(".TH") && !screen.contains(".SH"),
        "{screen}"
    );
}

/// A child killed and reaped when dropped (an assert that fails does not leak it).
struct Decoy(std::process::Child);

impl Drop for Decoy {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

// `herd run --wait -- 'pkill -KILL -f MARK'` kills what matches MARK
// but not the herd client whose own command line held MARK: the client rewrites
// its command line after parsing. A decoy that matches proves the pkill ran and
// found something (exit 0), and the client reports the job's exit, 0. (SIGKILL:
// a SIGTERM the client would pass on to the job and survive.)
#[test]
fn a_jobs_pkill_f_of_its_own_command_spares_the_run_client() {
    let env = Env::new();
    let marker = format!("herdpk{}x{}", std::process::id(), line!());
    let mut decoy = Decoy(
        crate::support::raw_command(std::path::Path::new("bash"))
            .args(["-c", &format!("exec -a {marker}-decoy sleep 60")])
            .spawn()
            .expect("bash starts"),
    );
    let decoy_pid = i32::try_from(decoy.0.id()).expect("a pid fits i32");
    wait_until(DEADLINE, || {
        std::fs::read(format!("/proc/{decoy_pid}/cmdline"))
            .is_ok_and(|c| String::from_utf8_lossy(&c).contains(&marker))
    })
    .expect("the decoy shows the marker");
    let out = env.run(&["run", "--wait", "--", &format!("pkill -KILL -f {marker}")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "the client did not report the job's exit 0 (killed by the job?): {out:?}"
    );
    let status = decoy.0.wait().expect("the decoy is waited for");
    assert_eq!(
        std::os::unix::process::ExitStatusExt::signal(&status),
        Some(9),
        "the decoy was not killed by the pkill: {status:?}"
    );
}

/// A daemon frozen by a cgroup v2 freezer (alive and `S`leeping, its socket
/// taking connections, nothing answered: a hung daemon, not a stopped one) for as
/// long as it lives; dropped, the daemon is thawed and put back in its cgroup.
struct Frozen {
    dir: std::path::PathBuf,
    home_cgroup: std::path::PathBuf,
    pid: i32,
}

impl Frozen {
    /// Freezes `pid`; `None` (after saying why, or failing under
    /// `HERD_REQUIRE_CGROUP=1`) when there is no writable cgroup v2 hierarchy.
    #[expect(clippy::print_stderr, reason = "a skipped cgroup test says why")]
    fn new(pid: i32) -> Option<Frozen> {
        let root = ["/sys/fs/cgroup/unified", "/sys/fs/cgroup"]
            .into_iter()
            .map(std::path::PathBuf::from)
            .find(|root| root.join("cgroup.controllers").exists());
        let made = root.and_then(|root| {
            let own = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).ok()?;
            let path = own.lines().find_map(|l| l.strip_prefix("0::"))?.to_owned();
            let dir = root.join(format!("herd-it-hung-{}", std::process::id()));
            std::fs::create_dir(&dir).ok()?;
            let frozen = Frozen {
                home_cgroup: root.join(path.trim_start_matches('/')),
                dir,
                pid,
            };
            std::fs::write(frozen.dir.join("cgroup.procs"), pid.to_string()).ok()?;
            std::fs::write(frozen.dir.join("cgroup.freeze"), "1").ok()?;
            Some(frozen)
        });
        if made.is_none() {
            let why = "no writable cgroup v2 hierarchy with a freezer here";
            if std::env::var("HERD_REQUIRE_CGROUP").as_deref() == Ok("1") {
                panic!("HERD_REQUIRE_CGROUP=1 but {why}");
            }
            eprintln!("skipped: {why}");
        }
        made
    }
}

impl Drop for Frozen {
    fn drop(&mut self) {
        let _ = std::fs::write(self.dir.join("cgroup.freeze"), "0");
        let _ = std::fs::write(self.home_cgroup.join("cgroup.procs"), self.pid.to_string());
        let _ = std::fs::remove_dir(&self.dir);
    }
}

// A daemon that hangs (alive, sleeping, its socket taking
// connections, nothing answered; frozen by its cgroup) under a long call (`run
// --wait` following its job): the client's liveness check (a `hello` on a
// second connection after a silence; 500 ms here through the debug-only
// HERD_TEST_PING_MS, 5 s then 10 s in a release) finds it and exits 3 naming its
// pid; thawed, the daemon answers again.
#[test]
fn a_hung_daemon_is_named_by_a_long_call() {
    let mut env = Env::new();
    env.vars
        .push(("HERD_TEST_PING_MS".to_owned(), "500".to_owned()));
    let out = env.scratch().join("run-wait.out");
    let mut child = env
        .cmd(&[
            "run",
            "--wait",
            "--",
            "sh",
            "-c",
            "echo hung-ready; exec sleep 300",
        ])
        .stdout(std::fs::File::create(&out).expect("the scratch dir is writable"))
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("herd starts");
    wait_until(DEADLINE, || {
        std::fs::read_to_string(&out).is_ok_and(|o| o.contains("hung-ready"))
    })
    .expect("run --wait shows the job's first line");
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    let Some(frozen) = Frozen::new(daemon) else {
        let _ = child.kill();
        let _ = child.wait();
        return;
    };
    let started = Instant::now();
    let (code, _, said) = finish(child, "run --wait under a hung daemon");
    let took = started.elapsed();
    drop(frozen);
    assert_eq!(code, Some(3), "{said}");
    assert!(
        said.contains(&format!(
            "the daemon (pid {daemon}, sleeping) is not answering"
        )) && said.contains(&format!("`kill {daemon}`")),
        "{said}"
    );
    assert!(took < Duration::from_secs(10), "found hung after {took:?}");
    env.json(&["ps", "--json"]);
}
