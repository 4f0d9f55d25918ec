//! The kernel holds the tree (B13, B15-B17): every process a job starts
//! stays in its session's cgroup, or under its shim as subreaper where no cgroup can
//! be had (forced here with `HERD_CONTAINMENT=subreaper`). Real processes, real
//! cgroups, real signals: escapees that `setsid`, double-fork, close their
//! descriptors, clear their environment or make a process group of their own die
//! with the session; leftovers of a job that exited are reported and held, and a kill
//! ends them; a kill survives a daemon SIGKILLed in its grace window.
//!
//! Survivors are found by scanning `/proc` for the marker sleeps (`sleep <n>`, each
//! test with numbers of its own) until a deadline. The cgroup tests need a writable
//! cgroup v2 hierarchy: without one they say so and pass, and under
//! `HERD_REQUIRE_CGROUP=1` (CI, which runs as root) they fail.

use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, wait_until};

/// Which containment a test runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Cgroup,
    Subreaper,
    /// The cgroup, killed by freezing as where `cgroup.kill` is missing (forced by
    /// `HERD_CONTAINMENT=freeze`).
    Freeze,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Cgroup | Kind::Freeze => "cgroup",
            Kind::Subreaper => "subreaper",
        }
    }
}

/// A home whose daemon uses `kind` (the subreaper forced by the switch).
fn home(kind: Kind) -> Env {
    let mut env = Env::new();
    match kind {
        Kind::Subreaper => env
            .vars
            .push(("HERD_CONTAINMENT".to_owned(), "subreaper".to_owned())),
        Kind::Freeze => env
            .vars
            .push(("HERD_CONTAINMENT".to_owned(), "freeze".to_owned())),
        Kind::Cgroup => {}
    }
    env
}

/// Pids of live processes whose command line is `sleep <marker>`.
fn marked(marker: u32) -> Vec<i32> {
    let want = format!("sleep\0{marker}\0");
    herd_test_support::procs::pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
                && std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
        })
        .collect()
}

/// Waits until every marker runs.
fn all_running(markers: &[u32]) {
    wait_until(Duration::from_secs(15), || {
        markers.iter().all(|m| !marked(*m).is_empty())
    })
    .unwrap_or_else(|()| {
        let missing: Vec<u32> = markers
            .iter()
            .copied()
            .filter(|m| marked(*m).is_empty())
            .collect();
        panic!("these marker sleeps never ran: {missing:?}")
    });
}

/// Waits until no marker runs; names the survivors otherwise.
fn none_left(markers: &[u32], what: &str) {
    wait_until(Duration::from_secs(15), || {
        markers.iter().all(|m| marked(*m).is_empty())
    })
    .unwrap_or_else(|()| {
        let left: Vec<(u32, Vec<i32>)> = markers
            .iter()
            .map(|m| (*m, marked(*m)))
            .filter(|(_, p)| !p.is_empty())
            .collect();
        panic!("{what}: survivors {left:?}")
    });
}

/// Starts `command` with `flags`; its id.
fn start(env: &Env, flags: &[&str], command: &str) -> String {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", command]);
    let info = env.json(&args);
    info["session_id"].as_str().expect("session_id").to_owned()
}

/// The session's `ps --all --json` row.
fn row(env: &Env, id: &str) -> Value {
    let listed = env.json(&["ps", "--all", "--json"]);
    listed["processes"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["session_id"] == id).cloned())
        .unwrap_or_else(|| panic!("{id} is not listed: {listed}"))
}

/// Whether the session runs under `kind`; `false` (after saying why, or failing under
/// `HERD_REQUIRE_CGROUP=1`) when this host has no cgroup for it.
#[expect(clippy::print_stderr, reason = "a skipped cgroup test says why")]
fn contained(env: &Env, id: &str, kind: Kind) -> bool {
    let got = row(env, id)["containment"].clone();
    if got == kind.name() {
        return true;
    }
    if kind != Kind::Subreaper && got == "subreaper" {
        let why = "no writable cgroup v2 hierarchy here (`herd doctor` says why)";
        if std::env::var("HERD_REQUIRE_CGROUP").as_deref() == Ok("1") {
            panic!("HERD_REQUIRE_CGROUP=1 but {why}");
        }
        eprintln!("skipped: {why}");
        return false;
    }
    panic!("{id} runs under {got}, not {}", kind.name());
}

/// A live job whose children escape every way but the cgroup (or the subreaper's
/// parentage): `setsid` + `env -i`, a double fork that closes its descriptors, a
/// process group of its own by job control and by `setpgid`. `herd kill` leaves none.
fn escapees_die_with_the_session(kind: Kind, base: u32) {
    let env = home(kind);
    let m: Vec<u32> = (0..5).map(|i| base + i).collect();
    let command = format!(
        "setsid sh -c \"env -i sleep {} & exit 0\" & \
         (setsid sh -c 'exec 0<&- 1>&- 2>&-; env -i sleep {}' &) ; \
         bash -c 'set -m; sleep {} & wait' & \
         python3 -c 'import os; os.setpgid(0, 0); os.execvp(\"sleep\", [\"sleep\", \"{}\"])' & \
         sleep {}",
        m[0], m[1], m[2], m[3], m[4]
    );
    let id = start(&env, &[], &command);
    if !contained(&env, &id, kind) {
        return;
    }
    all_running(&m);
    let killed = env.json(&["kill", &id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    none_left(&m, "after herd kill");
}

#[test]
fn b15_escapees_of_a_live_job_die_with_its_cgroup() {
    escapees_die_with_the_session(Kind::Cgroup, 36100);
}

#[test]
fn b15_escapees_of_a_live_job_die_under_the_subreaper_fallback() {
    escapees_die_with_the_session(Kind::Subreaper, 36200);
}

/// A job that exits and leaves three sleeps (one in its group, one `setsid`, one
/// `setsid env -i` after a double fork): the session completes `exited 0` (B13), the
/// completion and `ps --json` list the leftovers, they keep running held by the
/// session, and `herd kill` ends them (not "already exited").
fn leftovers_are_reported_held_and_killed(kind: Kind, base: u32) {
    let env = home(kind);
    let owner = format!("left-{}", kind.name());
    let m: Vec<u32> = (0..3).map(|i| base + i).collect();
    let command = format!(
        "sleep {} & setsid sleep {} & (setsid env -i sleep {} &); exit 0",
        m[0], m[1], m[2]
    );
    let id = start(&env, &["--notify", "--owner", &owner], &command);
    if !contained(&env, &id, kind) {
        return;
    }
    let mut completion = Value::Null;
    wait_until(Duration::from_secs(20), || {
        let out = env.ok(&["events", "--owner", &owner]);
        if let Some(found) = out
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .find(|e| e["type"] == "completion")
        {
            completion = found;
        }
        !completion.is_null()
    })
    .expect("the session completes although its leftovers run on");
    assert_eq!(completion["exit_code"], 0, "{completion}");
    assert_eq!(completion["completion_reason"], "exited", "{completion}");
    let listed = completion["leftovers"].to_string();
    for marker in &m {
        assert!(
            listed.contains(&format!("sleep {marker}")),
            "leftover sleep {marker} is reported: {completion}"
        );
    }
    all_running(&m);
    let r = row(&env, &id);
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["leftovers"].as_array().map(Vec::len), Some(3), "{r}");
    let table = env.ok(&["ps", "--all"]);
    assert!(
        table.contains("exited 0, 3 left"),
        "ps says what is left: {table}"
    );
    let killed = env.json(&["kill", &id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    none_left(&m, "after herd kill of the exited session");
    let r = row(&env, &id);
    assert!(r["leftovers"].is_null(), "nothing is held any more: {r}");
}

#[test]
fn b13_leftovers_are_reported_held_and_killed_in_the_cgroup() {
    leftovers_are_reported_held_and_killed(Kind::Cgroup, 36300);
}

#[test]
fn b13_leftovers_are_reported_held_and_killed_under_the_subreaper() {
    leftovers_are_reported_held_and_killed(Kind::Subreaper, 36400);
}

/// `--kill-leftovers`: what outlives the main process is killed after the grace, and
/// the session still completes as exited 0.
fn kill_leftovers_ends_them(kind: Kind, base: u32) {
    let env = home(kind);
    let m: Vec<u32> = (0..2).map(|i| base + i).collect();
    let command = format!(
        "trap '' TERM; sleep {} & (setsid env -i sleep {} &); exit 0",
        m[0], m[1]
    );
    let id = start(&env, &["--kill-leftovers"], &command);
    if !contained(&env, &id, kind) {
        return;
    }
    let waited = env.json(&["wait", &id, "--timeout", "20", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    none_left(
        &m,
        "with --kill-leftovers (they ignore SIGTERM: SIGKILL after the grace)",
    );
}

#[test]
fn b15_kill_leftovers_ends_them_in_the_cgroup() {
    kill_leftovers_ends_them(Kind::Cgroup, 36500);
}

#[test]
fn b15_kill_leftovers_ends_them_under_the_subreaper() {
    kill_leftovers_ends_them(Kind::Subreaper, 36600);
}

/// A job that traps SIGTERM (its children ignore it); `herd kill`; the daemon is
/// SIGKILLed in the grace window. The shim finishes the kill: nothing survives, and
/// the next daemon reports the session killed by `process_kill`.
fn kill_survives_a_daemon_sigkill(kind: Kind, base: u32) {
    let env = home(kind);
    let m: Vec<u32> = (0..3).map(|i| base + i).collect();
    let mark = env.scratch().join(format!("term-{base}"));
    let command = format!(
        "trap '' TERM; sleep {} & setsid env -i sleep {} & (setsid sleep {} &); \
         trap 'echo got > {}' TERM; while :; do sleep 0.1; done",
        m[0],
        m[1],
        m[2],
        mark.display()
    );
    let id = start(&env, &[], &command);
    if !contained(&env, &id, kind) {
        return;
    }
    all_running(&m);
    let mut kill = env
        .cmd(&["kill", &id, "--json"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("herd kill starts");
    wait_until(Duration::from_secs(10), || mark.exists())
        .expect("the job got SIGTERM: the kill is in its grace window");
    let daemon = env.daemon_pid().expect("the daemon's pid");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the daemon can be killed");
    let _ = kill.wait();
    none_left(&m, "after the daemon died in the kill's grace window");
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "exited", "{polled}");
    assert_eq!(polled["completion_reason"], "killed", "{polled}");
    assert_eq!(polled["termination_source"], "process_kill", "{polled}");
}

#[test]
fn b16_a_kill_completes_when_the_daemon_dies_in_its_grace_in_the_cgroup() {
    kill_survives_a_daemon_sigkill(Kind::Cgroup, 36700);
}

#[test]
fn b16_a_kill_completes_when_the_daemon_dies_in_its_grace_under_the_subreaper() {
    kill_survives_a_daemon_sigkill(Kind::Subreaper, 36800);
}

/// The time limit reaches leftovers too: a job that exits at once and leaves a sleep
/// behind (held by the session) loses it when its limit runs out.
#[test]
fn b17_the_time_limit_reaches_leftovers() {
    let env = home(Kind::Cgroup);
    let marker = 36900;
    let id = start(
        &env,
        &["--time-limit", "2"],
        &format!("setsid env -i sleep {marker} & exit 0"),
    );
    if !contained(&env, &id, Kind::Cgroup) {
        return;
    }
    let waited = env.json(&["wait", &id, "--timeout", "20", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    none_left(&[marker], "after the time limit");
}

/// Kill latency of a 100-process tree (1 shell, 50 sleeps in its group, 49 `setsid`
/// ones) through `herd kill`, end to end, in the cgroup and under the subreaper:
/// `HERD_SOAK_KILL_RUNS` runs each (default 20); p50 and p99 as figures; no survivor.
#[cfg(not(debug_assertions))]
#[test]
#[expect(clippy::print_stderr, reason = "a soak reports what it measured")]
fn soak_kill_latency_of_a_100_process_tree() {
    let runs: usize = std::env::var("HERD_SOAK_KILL_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    for (kind, base) in [(Kind::Cgroup, 36910), (Kind::Subreaper, 36920)] {
        let env = home(kind);
        let mut took = Vec::with_capacity(runs);
        for _ in 0..runs {
            let command = format!(
                "for i in $(seq 50); do sleep {base} & done; for i in $(seq 49); do setsid sleep {} & done; wait",
                base + 1
            );
            let id = start(&env, &[], &command);
            if !contained(&env, &id, kind) {
                return;
            }
            wait_until(Duration::from_secs(20), || {
                marked(base).len() + marked(base + 1).len() >= 99
            })
            .expect("the tree of 100 runs");
            let started = std::time::Instant::now();
            let killed = env.json(&["kill", &id, "--json"]);
            took.push(started.elapsed());
            assert_eq!(killed["status"], "killed", "{killed}");
            none_left(&[base, base + 1], "after a kill of the 100-process tree");
        }
        took.sort();
        let p = |q: f64| {
            let idx = ((took.len() as f64 - 1.0) * q).round() as usize;
            took[idx].as_secs_f64() * 1000.0
        };
        let line = format!(
            "kill of a 100-process tree ({}): p50 {:.1} ms, p99 {:.1} ms over {} runs",
            kind.name(),
            p(0.5),
            p(0.99),
            took.len()
        );
        eprintln!("herd-soak: {line}");
        if let Some(path) = std::env::var_os("HERD_SOAK_FIGURES") {
            use std::io::Write;
            let _ = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .and_then(|mut f| writeln!(f, "{line}"));
        }
    }
}

/// `--pids` bounds the whole tree through its cgroup: a job that forks 60 sleeps
/// under `--pids 20` gets fork failures, never more than 20 processes, and its kill
/// leaves none; `--memory` and `--cpus` are set alongside.
#[test]
fn b15_a_pids_limit_bounds_a_fork_storm() {
    let env = home(Kind::Cgroup);
    let marker = 36970;
    let id = start(
        &env,
        &["--pids", "20", "--memory", "256M", "--cpus", "0.5"],
        &format!("for i in $(seq 60); do sleep {marker} & done; echo forked; wait"),
    );
    if !contained(&env, &id, Kind::Cgroup) {
        return;
    }
    // bash retries a failed fork with a growing pause: the first failure is the sign.
    wait_until(Duration::from_secs(20), || {
        env.ok(&["logs", &id]).contains("fork") && marked(marker).len() >= 10
    })
    .expect("forks past the limit fail");
    let n = marked(marker).len();
    assert!((1..20).contains(&n), "{n} sleeps run under --pids 20");
    let killed = env.json(&["kill", &id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    none_left(&[marker], "after the kill of a limited tree");
}

/// `herd clean` forgets a finished session and leaves nothing of it running: its
/// leftovers are killed.
#[test]
fn b13_clean_ends_the_leftovers_it_forgets() {
    let env = home(Kind::Cgroup);
    let marker = 36980;
    let id = start(&env, &[], &format!("setsid env -i sleep {marker} & exit 0"));
    if !contained(&env, &id, Kind::Cgroup) {
        return;
    }
    let waited = env.json(&["wait", &id, "--timeout", "20", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    all_running(&[marker]);
    env.ok(&["clean"]);
    none_left(&[marker], "after herd clean");
}

/// How a daemon goes away while a finished session's shim holds its leftovers.
#[derive(Debug, Clone, Copy)]
enum Gone {
    /// `herd shutdown --keep-jobs`.
    KeepJobs,
    /// SIGKILL.
    Killed,
}

/// What reaches the leftovers after the restart.
#[derive(Debug, Clone, Copy)]
enum End {
    /// `herd kill ID`, which answers `killed`.
    Kill,
    /// `herd shutdown`.
    Shutdown,
    /// `herd clean`.
    Clean,
}

/// A session that finished with leftovers, then its daemon went away (`gone`): the
/// next daemon holds them again. `ps` and `poll` show them, and `end` (`herd kill`
/// of the finished session, `herd shutdown`, `herd clean`) ends them: 0 survivors.
fn leftovers_are_held_across_a_restart(kind: Kind, gone: Gone, end: End, base: u32) {
    let env = home(kind);
    let m: Vec<u32> = (0..3).map(|i| base + i).collect();
    let command = format!(
        "sleep {} & setsid sleep {} & (setsid env -i sleep {} &); exit 0",
        m[0], m[1], m[2]
    );
    let id = start(&env, &[], &command);
    if !contained(&env, &id, kind) {
        return;
    }
    let waited = env.json(&["wait", &id, "--timeout", "20", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    all_running(&m);
    match gone {
        Gone::KeepJobs => {
            env.ok(&["shutdown", "--keep-jobs"]);
        }
        Gone::Killed => {
            let daemon = env.daemon_pid().expect("the daemon's pid");
            nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(daemon),
                nix::sys::signal::Signal::SIGKILL,
            )
            .expect("the daemon can be killed");
            wait_until(Duration::from_secs(10), || {
                std::fs::read_to_string(format!("/proc/{daemon}/stat"))
                    .map_or(true, |s| s.contains(") Z"))
            })
            .expect("the daemon is gone");
        }
    }
    all_running(&m);
    // The next daemon (autostarted) holds them again.
    let r = row(&env, &id);
    assert_eq!(r["status"], "exited", "{r}");
    assert_eq!(r["leftovers"].as_array().map(Vec::len), Some(3), "{r}");
    let table = env.ok(&["ps", "--all"]);
    assert!(
        table.contains("exited 0, 3 left"),
        "ps says what is left after the restart: {table}"
    );
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(
        polled["leftovers"].as_array().map(Vec::len),
        Some(3),
        "{polled}"
    );
    match end {
        End::Kill => {
            let killed = env.json(&["kill", &id, "--json"]);
            assert_eq!(killed["status"], "killed", "{killed}");
        }
        End::Shutdown => {
            env.ok(&["shutdown", "--yes"]);
        }
        End::Clean => {
            env.ok(&["clean"]);
        }
    }
    none_left(
        &m,
        &format!("after {end:?} of the exited session after a restart"),
    );
}

#[test]
fn b13_leftovers_are_held_after_shutdown_keep_jobs_in_the_cgroup() {
    leftovers_are_held_across_a_restart(Kind::Cgroup, Gone::KeepJobs, End::Kill, 37000);
}

#[test]
fn b13_leftovers_are_held_after_a_daemon_sigkill_in_the_cgroup() {
    leftovers_are_held_across_a_restart(Kind::Cgroup, Gone::Killed, End::Kill, 37100);
}

#[test]
fn b13_leftovers_are_held_after_a_daemon_sigkill_under_the_subreaper() {
    leftovers_are_held_across_a_restart(Kind::Subreaper, Gone::Killed, End::Kill, 37200);
}

#[test]
fn b17_shutdown_reaches_leftovers_held_after_a_restart() {
    leftovers_are_held_across_a_restart(Kind::Cgroup, Gone::KeepJobs, End::Shutdown, 37300);
}

#[test]
fn b13_clean_reaches_leftovers_held_after_a_restart() {
    leftovers_are_held_across_a_restart(Kind::Subreaper, Gone::Killed, End::Clean, 37400);
}

/// A shell line that prints the `pids.max` of the cgroups it runs in (the v1 `pids`
/// hierarchy of a hybrid host, or the v2 one).
const PRINT_PIDS_MAX: &str = "for f in /sys/fs/cgroup/pids$(awk -F: '$2==\"pids\"{print $3}' /proc/self/cgroup)/pids.max \
     /sys/fs/cgroup/unified$(awk -F: '$1==\"0\"{print $3}' /proc/self/cgroup)/pids.max \
     /sys/fs/cgroup$(awk -F: '$1==\"0\"{print $3}' /proc/self/cgroup)/pids.max; \
     do cat \"$f\" 2>/dev/null; done; echo end";

/// Config `[limits]` bounds every job whose request sets none (`pids = 19` reaches
/// the job's cgroup; `--pids` on the command line wins); a bad value is a config
/// error that names the key.
#[test]
fn b15_config_limits_are_every_jobs_default() {
    let env = home(Kind::Cgroup);
    std::fs::write(env.home().join("config.toml"), "[limits]\npids = 19\n").expect("config");
    let id = start(&env, &[], PRINT_PIDS_MAX);
    if !contained(&env, &id, Kind::Cgroup) {
        return;
    }
    let waited = env.json(&["wait", &id, "--timeout", "20", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    let out = env.ok(&["logs", &id]);
    assert!(
        out.lines().any(|l| l.trim() == "19"),
        "the config's pids limit is the job's: {out}"
    );
    let id = start(&env, &["--pids", "23"], PRINT_PIDS_MAX);
    env.json(&["wait", &id, "--timeout", "20", "--json"]);
    let out = env.ok(&["logs", &id]);
    assert!(
        out.lines().any(|l| l.trim() == "23"),
        "the request's limit wins over the config's: {out}"
    );
    env.ok(&["shutdown", "--yes"]);
    for (bad, key) in [
        ("[limits]\nmemory = \"2X\"\n", "limits.memory"),
        ("[limits]\ncpus = 0.0\n", "limits.cpus"),
        ("[limits]\npids = 0\n", "limits.pids"),
    ] {
        std::fs::write(env.home().join("config.toml"), bad).expect("config");
        let out = env.run(&["ps"]);
        let err = crate::support::stderr(&out);
        assert!(!out.status.success(), "{bad}: accepted");
        assert!(
            err.contains("invalid config") && err.contains(key),
            "{bad}: the error names {key}: {err}"
        );
    }
}

/// Where `cgroup.kill` is missing (before Linux 5.14; forced here with
/// `HERD_CONTAINMENT=freeze`) the kill freezes the cgroup, SIGKILLs each member and
/// thaws it: `herd doctor` says so, and the escapees of a live job die all the same.
#[test]
fn b15_escapees_die_under_the_freeze_kill() {
    let env = home(Kind::Freeze);
    let doctor = env.ok(&["doctor"]);
    if doctor.contains("cgroup of its own") {
        assert!(
            doctor.contains("forced by HERD_CONTAINMENT=freeze"),
            "doctor names the freeze kill: {doctor}"
        );
    }
    escapees_die_with_the_session(Kind::Freeze, 37500);
}

/// The freeze kill reaches leftovers of an exited job too, and ones that ignore
/// SIGTERM die after the grace.
#[test]
fn b15_kill_leftovers_ends_them_under_the_freeze_kill() {
    kill_leftovers_ends_them(Kind::Freeze, 37600);
}

/// `ps --json` and `poll` take CPU and memory of the whole tree from the session's
/// cgroup: a busy loop in a `setsid` child (outside the job's group) counts, its CPU
/// time grows, and the memory a child holds (20 MB in a shell variable) is counted
/// (from the v1 memory cgroup of a session with `--memory` on a hybrid host).
#[test]
fn b39_ps_and_poll_take_usage_from_the_cgroup() {
    let env = home(Kind::Cgroup);
    let marker = 37700;
    let id = start(
        &env,
        &["--memory", "256M"],
        &format!(
            "setsid sh -c 'while :; do :; done' & \
             bash -c 'x=$(head -c 20000000 /dev/zero | tr \"\\0\" a); sleep {marker}; true' & wait"
        ),
    );
    if !contained(&env, &id, Kind::Cgroup) {
        return;
    }
    all_running(&[marker]);
    let cpu = |v: &Value| v["usage"]["cpu_usec"].as_u64().unwrap_or(0);
    let first = cpu(&row(&env, &id));
    let mut last = Value::Null;
    wait_until(Duration::from_secs(15), || {
        last = row(&env, &id);
        cpu(&last) > first + 200_000
    })
    .unwrap_or_else(|()| panic!("the tree's CPU time grows from {first}: {last}"));
    let polled = env.json(&["poll", &id, "--json"]);
    assert!(cpu(&polled) >= cpu(&last), "{polled}");
    let memory = polled["usage"]["memory_bytes"].as_u64().unwrap_or(0);
    assert!(
        memory > 20_000_000,
        "the tree's memory is counted: {polled}"
    );
    let killed = env.json(&["kill", &id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    none_left(&[marker], "after the kill");
}

/// A `list` that asks for no usage (`usage: false`, what `ps`'s table sends) leaves
/// every row's CPU and memory out and nothing else: the same rows, the same fields
/// otherwise; the default list of the same session carries its cgroup's usage.
#[test]
fn b39_a_list_without_usage_leaves_only_the_usage_out() {
    let env = home(Kind::Cgroup);
    let marker = 37750;
    let id = start(&env, &[], &format!("sleep {marker}"));
    if !contained(&env, &id, Kind::Cgroup) {
        return;
    }
    let mut conn = crate::support::Conn::open(&env, "it");
    let listed = |conn: &mut crate::support::Conn, params: Value| {
        let answer = conn.result("list", params);
        answer["processes"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["session_id"] == id).cloned())
            .unwrap_or_else(|| panic!("{id} is not listed: {answer}"))
    };
    let full = listed(&mut conn, serde_json::json!({"owner": "cli"}));
    assert!(
        full["usage"]["cpu_usec"].is_u64(),
        "the default row has usage: {full}"
    );
    let lean = listed(
        &mut conn,
        serde_json::json!({"owner": "cli", "usage": false}),
    );
    assert!(lean.get("usage").is_none_or(Value::is_null), "{lean}");
    let (mut full, mut lean) = (full, lean);
    for row in [&mut full, &mut lean] {
        if let Some(fields) = row.as_object_mut() {
            // Fields that change between two listings.
            for moving in ["usage", "uptime_seconds"] {
                fields.remove(moving);
            }
        }
    }
    assert_eq!(full, lean, "only the usage differs");
    let refused = conn.call("list", serde_json::json!({"owner": "cli", "usage": "no"}));
    assert!(
        refused["error"].is_object(),
        "a usage that is not a bool is refused: {refused}"
    );
    env.ok(&["kill", &id]);
    none_left(&[marker], "after the kill");
}

/// Soak: `herd kill` races a daemon SIGKILLed at a random moment (0 to
/// 1.5 s after the kill is asked, so before, in and after the grace window), round
/// after round on one home: no process of any session survives, and each session
/// gets exactly one completion. `HERD_SOAK_KILL_RACES` rounds (default 2, sized to
/// seconds for CI; `cargo xtask soak` runs 30).
#[test]
fn b16_soak_kill_races_a_daemon_sigkill() {
    let rounds: u32 = std::env::var("HERD_SOAK_KILL_RACES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
        .clamp(1, 1000);
    let env = home(Kind::Cgroup);
    let owner = "kill-races";
    let mut ids = Vec::new();
    for round in 0..rounds {
        let base = 38000 + round * 4;
        let m: Vec<u32> = (0..3).map(|i| base + i).collect();
        let id = start(
            &env,
            &["--notify", "--owner", owner],
            &format!(
                "trap '' TERM; sleep {} & setsid env -i sleep {} & (setsid sleep {} &); \
                 while :; do sleep 0.1; done",
                m[0], m[1], m[2]
            ),
        );
        if round == 0 && !contained(&env, &id, Kind::Cgroup) {
            return;
        }
        all_running(&m);
        let mut kill = env
            .cmd(&["kill", &id, "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("herd kill starts");
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        // A random moment: the test waits for the kill client or the delay, whichever
        // comes first, so a fast kill still races the next step.
        let delay = Duration::from_millis(u64::from(nanos % 1500));
        let _ = wait_until(delay, || kill.try_wait().is_ok_and(|s| s.is_some()));
        if let Some(daemon) = env.daemon_pid() {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(daemon),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
        let _ = kill.wait();
        // The shim finishes a kill it was given; one the daemon died before sending
        // is asked again of the next daemon.
        let answer = env.json(&["kill", &id, "--json"]);
        assert!(
            answer["status"] == "killed" || answer["status"] == "already_exited",
            "round {round}: {answer}"
        );
        none_left(&m, &format!("round {round}, {delay:?} after the kill"));
        ids.push(id);
    }
    let mut seen: Vec<String> = Vec::new();
    wait_until(Duration::from_secs(20), || {
        let out = env.ok(&["events", "--owner", owner]);
        seen.extend(
            out.lines()
                .filter_map(|l| serde_json::from_str::<Value>(l).ok())
                .filter(|e| e["type"] == "completion")
                .filter_map(|e| e["session_id"].as_str().map(str::to_owned)),
        );
        ids.iter().all(|id| seen.contains(id))
    })
    .unwrap_or_else(|()| panic!("every session completes: {ids:?}, seen {seen:?}"));
    for id in &ids {
        let n = seen.iter().filter(|s| *s == id).count();
        assert_eq!(n, 1, "{id}: one completion, got {n} ({seen:?})");
    }
}

/// A pipe job is born in its session's cgroup (`clone3` into it, no
/// migration after the fork): the first thing it runs already reads the session's
/// cgroup as its own, and the session's output is that line.
#[test]
fn b15_a_pipe_job_starts_inside_its_cgroup() {
    let env = home(Kind::Cgroup);
    for command in ["cat /proc/self/cgroup", "exec cat /proc/self/cgroup; :"] {
        let id = start(&env, &[], command);
        let waited = env.json(&["wait", &id, "--timeout", "20", "--json"]);
        assert_eq!(waited["exit_code"], 0, "{waited}");
        if !contained(&env, &id, Kind::Cgroup) {
            return;
        }
        let log = env.ok(&["logs", &id]);
        let own = log.lines().find_map(|l| l.strip_prefix("0::"));
        assert!(
            own.is_some_and(|path| path.ends_with(&format!("/{id}"))),
            "{command}: the job's cgroup is not its session's: {log}"
        );
    }
}
