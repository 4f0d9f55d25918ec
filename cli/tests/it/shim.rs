//! Sessions that outlive the daemon: every job runs under its own `herd-shim`, which
//! keeps its output flowing, collects its exit status and writes its exit record
//! while no daemon runs. Real daemons SIGKILLed mid-job, real shims, real PTYs.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, alive, raw_command, wait_until};

/// Starts `command` in the background with `flags` and returns its id and pid.
fn start(env: &Env, flags: &[&str], command: &str) -> (String, i32) {
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(flags);
    args.extend_from_slice(&["--", command]);
    let info = env.json(&args);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    let pid = i32::try_from(info["pid"].as_i64().expect("pid")).expect("a pid fits i32");
    (id, pid)
}

/// The session's shim directory.
fn shim_dir(env: &Env, id: &str) -> PathBuf {
    env.home().join("run/shims").join(id)
}

/// The shim's pid, from its info record.
fn shim_pid(env: &Env, id: &str) -> i32 {
    let info = std::fs::read_to_string(shim_dir(env, id).join("info.json"))
        .expect("the shim wrote its info record");
    let info: Value = serde_json::from_str(&info).expect("the info record is JSON");
    i32::try_from(info["shim_pid"].as_i64().expect("shim_pid")).expect("a pid fits i32")
}

/// The session's raw log.
fn log_text(env: &Env, id: &str) -> String {
    std::fs::read_to_string(env.home().join("logs/sessions").join(format!("{id}.log")))
        .unwrap_or_default()
}

/// SIGKILLs the home's daemon and waits until it is gone.
fn crash_daemon(env: &Env) -> i32 {
    let pid = env.daemon_pid().expect("the daemon wrote its pid file");
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    wait_until(Duration::from_secs(5), || !alive(pid))
        .unwrap_or_else(|()| panic!("daemon {pid} did not die of SIGKILL"));
    pid
}

fn signal(pid: i32, sig: nix::sys::signal::Signal) {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), sig)
        .expect("the process can be signalled");
}

/// Takes the owner's pending events now.
fn drain(env: &Env, owner: &str) -> Vec<Value> {
    let out = env.run(&["events", "--owner", owner]);
    if !out.status.success() {
        let log = std::fs::read_to_string(env.home().join("logs/daemon.log")).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(40).collect();
        panic!(
            "herd events failed: {}\ndaemon log, newest first:\n{}",
            String::from_utf8_lossy(&out.stderr),
            tail.join("\n")
        );
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("a JSON line"))
        .collect()
}

/// Takes the owner's pending completions, waiting up to 20 s for at least one.
fn completions(env: &Env, owner: &str) -> Vec<Value> {
    let mut got = Vec::new();
    let _ = wait_until(Duration::from_secs(20), || {
        got.extend(
            drain(env, owner)
                .into_iter()
                .filter(|e| e["type"] == "completion"),
        );
        !got.is_empty()
    });
    got
}

/// Pids of live processes tagged with the session (`HERD_SESSION=<id>`).
fn tagged(id: &str) -> Vec<i32> {
    let tag = format!("HERD_SESSION={id}");
    herd_test_support::procs::pids()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ")).is_ok_and(|environ| {
                environ.split(|b| *b == 0).any(|v| v == tag.as_bytes()) && alive(*pid)
            })
        })
        .collect()
}

/// Numbered lines `line-N` in `text`, in order of appearance.
fn numbered(text: &str) -> Vec<u32> {
    text.split(['\n', '\r'])
        .filter_map(|l| l.trim().strip_prefix("line-")?.parse().ok())
        .collect()
}

/// A chatty job through a daemon SIGKILL: every numbered line, in order, and the
/// real exit code in exactly one completion.
fn chatty_job_survives_a_daemon_sigkill(flags: &[&str]) {
    let env = Env::new();
    let owner = "agent-a";
    let mut all = vec!["--notify", "--owner", owner];
    all.extend_from_slice(flags);
    let (id, pid) = start(
        &env,
        &all,
        "for i in $(seq 80); do echo line-$i; sleep 0.02; done; exit 7",
    );
    wait_until(Duration::from_secs(10), || {
        log_text(&env, &id).contains("line-5")
    })
    .expect("the job prints");
    crash_daemon(&env);
    assert!(
        alive(pid) || log_text(&env, &id).contains("line-80"),
        "the job outlives the daemon"
    );
    // The job keeps writing while no daemon runs; it ends on its own (80 forks of
    // `sleep`: seconds on a loaded machine).
    wait_until(Duration::from_secs(60), || {
        shim_dir(&env, &id).join("exit.json").exists()
    })
    .expect("the shim records the exit while no daemon runs");
    let events = completions(&env, owner);
    assert_eq!(events.len(), 1, "exactly one completion: {events:?}");
    assert_eq!(events[0]["exit_code"], 7, "{:?}", events[0]);
    assert_eq!(events[0]["session_id"], id.as_str());
    let lines = numbered(&log_text(&env, &id));
    assert_eq!(
        lines,
        (1..=80).collect::<Vec<u32>>(),
        "every line, once, in order"
    );
    let again = drain(&env, owner);
    assert!(
        again.is_empty(),
        "the completion is not delivered twice: {again:?}"
    );
    assert!(
        !shim_dir(&env, &id).exists(),
        "the finished session's shim directory is removed"
    );
}

#[test]
fn b28_shim_a_chatty_pipe_job_keeps_every_line_through_a_daemon_sigkill() {
    chatty_job_survives_a_daemon_sigkill(&[]);
}

#[test]
fn b28_shim_a_chatty_pty_job_keeps_every_line_through_a_daemon_sigkill() {
    chatty_job_survives_a_daemon_sigkill(&["--pty"]);
}

#[test]
fn b15_shim_a_job_runs_under_its_shim_outside_the_daemons_tree() {
    let env = Env::new();
    let (id, pid) = start(&env, &[], "sleep 30");
    let shim = shim_pid(&env, &id);
    assert_eq!(parent_of(pid), shim, "the shim is the job's parent");
    let daemon = env.daemon_pid().expect("daemon");
    assert_ne!(parent_of(shim), daemon, "the shim left the daemon's tree");
    let mode = std::fs::metadata(shim_dir(&env, &id))
        .map(|m| std::os::unix::fs::PermissionsExt::mode(&m.permissions()) & 0o777)
        .expect("the shim directory exists");
    assert_eq!(mode, 0o700);
    env.ok(&["kill", &id]);
    wait_until(Duration::from_secs(10), || !alive(shim)).expect("the shim ends with its job");
}

#[test]
fn b28_shim_stdin_and_resize_work_after_reattach() {
    let env = Env::new();
    let (id, _pid) = start(
        &env,
        &["--pty"],
        "stty size; read first; stty size; echo got:$first; read second; echo got:$second",
    );
    wait_until(Duration::from_secs(10), || {
        log_text(&env, &id).contains("30 120")
    })
    .expect("the PTY starts at 30x120");
    crash_daemon(&env);
    // The next daemon re-attaches; stdin and resize reach the job again.
    let resized = env.json(&["resize", &id, "--rows", "40", "--cols", "100", "--json"]);
    assert_eq!(resized["status"], "ok", "{resized}");
    env.ok(&["submit", &id, "hello"]);
    wait_until(Duration::from_secs(10), || {
        let log = log_text(&env, &id);
        log.contains("got:hello") && log.contains("40 100")
    })
    .unwrap_or_else(|()| {
        panic!(
            "stdin or resize did not reach the job: {:?}",
            log_text(&env, &id)
        )
    });
    env.ok(&["submit", &id, "again"]);
    let waited = env.json(&["wait", &id, "--timeout", "10", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    assert!(log_text(&env, &id).contains("got:again"));

    let pipe = start(&env, &[], "sleep 30").0;
    let refused = env.run(&["resize", &pipe, "--rows", "10", "--cols", "10"]);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("runs on pipes"),
        "{}",
        String::from_utf8_lossy(&refused.stderr)
    );
}

#[test]
fn b15_shim_sigkill_of_the_supervisor_closes_the_session_as_lost_without_orphans() {
    let env = Env::new();
    let owner = "agent-b";
    let (id, pid) = start(
        &env,
        &["--notify", "--owner", owner],
        "setsid sleep 300 & sleep 300 & echo started; wait",
    );
    wait_until(Duration::from_secs(10), || {
        log_text(&env, &id).contains("started") && tagged(&id).len() >= 3
    })
    .expect("the job and its children run");
    let shim = shim_pid(&env, &id);
    signal(shim, nix::sys::signal::Signal::SIGKILL);
    let events = completions(&env, owner);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["completion_reason"], "lost", "{:?}", events[0]);
    let polled = env.json(&["poll", &id, "--json"]);
    assert!(
        polled.to_string().contains("supervisor"),
        "the answer says the supervisor died: {polled}"
    );
    wait_until(Duration::from_secs(10), || tagged(&id).is_empty())
        .unwrap_or_else(|()| panic!("orphans left: {:?}", tagged(&id)));
    assert!(!alive(pid));
}

#[test]
fn b28_shim_a_dead_shim_found_at_restore_is_closed_fast_and_its_job_killed() {
    let env = Env::new();
    let (dead, dead_pid) = start(&env, &[], "sleep 300");
    let (live, live_pid) = start(&env, &[], "sleep 300");
    crash_daemon(&env);
    let shim = shim_pid(&env, &dead);
    signal(shim, nix::sys::signal::Signal::SIGKILL);
    wait_until(Duration::from_secs(5), || !alive(shim)).expect("the shim dies");
    let started = std::time::Instant::now();
    let polled = env.json(&["poll", &dead, "--json"]);
    assert_eq!(polled["completion_reason"], "lost", "{polled}");
    assert!(
        started.elapsed() < Duration::from_secs(15),
        "restore does not wait long on a dead shim"
    );
    wait_until(Duration::from_secs(10), || !alive(dead_pid))
        .expect("the dead shim's job is killed");
    assert!(alive(live_pid), "the other job keeps running");
    assert_eq!(env.json(&["poll", &live, "--json"])["status"], "running");
}

#[test]
fn b17_shim_shutdown_keep_jobs_detaches_and_the_next_daemon_reattaches() {
    let env = Env::new();
    let (id, pid) = start(&env, &[], "echo one; read x; echo two:$x");
    let stopped = env.json(&["shutdown", "--keep-jobs", "--json"]);
    assert_eq!(stopped["jobs"], "kept", "{stopped}");
    assert!(alive(pid), "the job keeps running");
    env.ok(&["submit", &id, "back"]);
    let waited = env.json(&["wait", &id, "--timeout", "10", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    assert!(log_text(&env, &id).contains("two:back"));
}

/// A fake shim of protocol 99: binds the socket, answers hello with its protocol,
/// runs `sleep` as its child and writes an exit record when the child ends.
const FAKE_SHIM: &str = r#"
import json, os, socket, sys, time
d = sys.argv[1]
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(os.path.join(d, "sock"))
srv.listen(8)
pid = os.fork()
if pid == 0:
    os.setpgid(0, 0)
    os.execvp("sleep", ["sleep", "300"])
def start_time(p):
    return int(open(f"/proc/{p}/stat").read().rsplit(")", 1)[1].split()[19])
json.dump({"version": 1, "protocol": 99, "shim_pid": os.getpid(), "shim_start_time": start_time(os.getpid()),
           "pid": pid, "pgid": pid, "start_time": start_time(pid), "mode": "pipe"}, open(os.path.join(d, "info.json"), "w"))
print(pid, flush=True)
srv.setblocking(False)
while True:
    try:
        c, _ = srv.accept()
        c.setblocking(True)
        c.recv(65536)
        c.sendall(b'{"op":"hello","protocol":99,"shim_pid":%d,"pid":%d,"pgid":%d,"progress":{"log_bytes":0,"total_ingested":0,"bytes_not_kept":0}}\n' % (os.getpid(), pid, pid))
        c.close()
    except BlockingIOError:
        pass
    done, status = os.waitpid(pid, os.WNOHANG)
    if done:
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else None
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else None
        tmp = os.path.join(d, "exit.json.tmp")
        json.dump({"version": 1, "code": code, "signal": sig, "finished_at_ms": int(time.time() * 1000)}, open(tmp, "w"))
        os.rename(tmp, os.path.join(d, "exit.json"))
        sys.exit(0)
    time.sleep(0.05)
"#;

#[test]
fn b28_shim_of_another_protocol_is_refused_by_name_and_followed_by_its_records() {
    let env = Env::new();
    // A real daemon writes the checkpoint shape; a real session is started to get one,
    // then its entry is pointed at the fake shim.
    let (id, _) = start(&env, &[], "sleep 300");
    env.ok(&["kill", &id]);
    env.ok(&["shutdown", "--yes"]);
    let fake_id = "proc_0123456789ab";
    let dir = shim_dir(&env, fake_id);
    std::fs::create_dir_all(&dir).expect("shim dir");
    let script = env.scratch().join("fake_shim.py");
    std::fs::write(&script, FAKE_SHIM).expect("script written");
    let mut fake = raw_command(std::path::Path::new("python3"));
    fake.arg(&script)
        .arg(&dir)
        .stdout(std::process::Stdio::piped())
        .stdin(std::process::Stdio::null());
    let mut fake = fake.spawn().expect("python3 runs");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(fake.stdout.take().expect("stdout")),
        &mut line,
    )
    .expect("the fake shim prints its job's pid");
    let job: i32 = line.trim().parse().expect("a pid");
    let info: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("info.json")).expect("info"))
            .expect("JSON");
    let pending = env.home().join("processes.pending");
    std::fs::create_dir_all(&pending).expect("pending dir");
    let entry = serde_json::json!({
        "version": 1,
        "entry": {
            "writer": {"pid": 1, "start_time": 1},
            "id": fake_id, "command": "sleep 300", "pid": job, "pgid": job,
            "start_time": info["start_time"], "task_id": "cli", "owner_task_id": "cli",
            "mode": "pipe", "log_path": env.home().join("logs/sessions/x.log"),
            "started_at": 1.0,
            "shim": {"pid": info["shim_pid"], "start_time": info["shim_start_time"], "protocol": 99},
        }
    });
    std::fs::write(pending.join(format!("{fake_id}.json")), entry.to_string()).expect("entry");

    let polled = env.json(&["poll", fake_id, "--json"]);
    assert_eq!(
        polled["status"], "running",
        "never killed for its version: {polled}"
    );
    assert!(alive(job));
    let text = polled.to_string();
    assert!(
        text.contains("protocol 99")
            && text.contains(&format!("protocols 1 to {}", herd_core::shim::PROTOCOL)),
        "the note names both versions: {polled}"
    );
    // The frozen contract still stops it and reports its real status.
    let killed = env.json(&["kill", fake_id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    let after = env.json(&["poll", fake_id, "--json"]);
    assert_eq!(after["completion_reason"], "killed", "{after}");
    let _ = fake.wait();
}

/// The parent pid of `pid`.
fn parent_of(pid: i32) -> i32 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after = stat.rsplit(')').next().expect("fields");
    after
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse().ok())
        .expect("ppid")
}

#[test]
fn b28_shim_a_killed_launcher_is_started_again_and_its_jobs_run_on() {
    let env = Env::new();
    let (first, first_pid) = start(&env, &[], "sleep 30");
    let launcher = parent_of(shim_pid(&env, &first));
    let cmdline = std::fs::read(format!("/proc/{launcher}/cmdline")).expect("cmdline");
    assert!(
        String::from_utf8_lossy(&cmdline).contains("--launcher"),
        "the shim was forked by the launcher"
    );
    signal(launcher, nix::sys::signal::Signal::SIGKILL);
    wait_until(Duration::from_secs(5), || !alive(launcher)).expect("the launcher dies");
    assert!(alive(first_pid), "a job outlives its launcher");
    let (second, _) = start(&env, &[], "echo second; sleep 30");
    let relaunched = parent_of(shim_pid(&env, &second));
    assert_ne!(relaunched, launcher, "a new launcher serves the next spawn");
    assert!(alive(relaunched));
    assert_eq!(env.json(&["poll", &first, "--json"])["status"], "running");
    env.ok(&["kill", &first]);
    env.ok(&["kill", &second]);
}

/// A job of the soak: its id, its command's kind and the exit code it must report.
#[derive(Debug)]
struct SoakJob {
    id: String,
    lines: u32,
    code: i32,
}

/// Open descriptors of `pid`.
fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// SIGSTOPs up to `n` supervisors of the running sessions (their pids from their
/// info records): the stopped ones.
fn stop_supervisors(env: &Env, n: usize) -> Vec<nix::unistd::Pid> {
    let shims = env.home().join("run/shims");
    let mut stopped = Vec::new();
    for entry in std::fs::read_dir(&shims).into_iter().flatten().flatten() {
        if stopped.len() == n || entry.path().join("exit.json").exists() {
            continue;
        }
        let Ok(info) = std::fs::read_to_string(entry.path().join("info.json")) else {
            continue;
        };
        let pid = serde_json::from_str::<Value>(&info)
            .ok()
            .and_then(|v| v["shim_pid"].as_i64())
            .and_then(|p| i32::try_from(p).ok());
        // The recorded pid is still a supervisor (not a pid reused since).
        if let Some(pid) = pid.map(nix::unistd::Pid::from_raw)
            && std::fs::read_to_string(format!("/proc/{pid}/comm"))
                .is_ok_and(|comm| comm.trim() == "herd-shim")
            && nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).is_ok()
        {
            stopped.push(pid);
        }
    }
    stopped
}

/// Daemon SIGKILLs at random moments while 20 jobs (pipe and PTY, some ending, some
/// chatty, some long) run: every numbered line kept in order, exactly one completion
/// per job with its real exit code, no orphans, no descriptor growth in the daemon.
/// `HERD_SOAK_DAEMON_KILLS` sets the number of kills (3 here, 100 in `cargo xtask
/// soak`).
#[test]
fn b28_shim_soak_daemon_sigkills_lose_no_line_and_no_completion() {
    let kills: u32 = std::env::var("HERD_SOAK_DAEMON_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let env = Env::new();
    let owner = "soak";
    let mut finite: Vec<SoakJob> = Vec::new();
    let mut long: Vec<String> = Vec::new();
    let mut next = 0u32;
    let mut start_job = |env: &Env, finite: &mut Vec<SoakJob>, long: &mut Vec<String>| {
        next += 1;
        let code = i32::try_from(next % 50 + 1).expect("small");
        let pty = next.is_multiple_of(2);
        let mut flags = vec!["--notify", "--owner", owner];
        if pty {
            flags.push("--pty");
        }
        match next % 4 {
            0 => long.push(start(env, &flags, "sleep 600").0),
            1 => finite.push(SoakJob {
                id: start(env, &flags, &format!("echo line-1; exit {code}")).0,
                lines: 1,
                code,
            }),
            _ => {
                let lines = 40 + next % 40;
                let command = format!(
                    "for i in $(seq {lines}); do echo line-$i; sleep 0.01; done; exit {code}"
                );
                finite.push(SoakJob {
                    id: start(env, &flags, &command).0,
                    lines,
                    code,
                });
            }
        }
    };
    for _ in 0..20 {
        start_job(&env, &mut finite, &mut long);
    }
    let mut seen: Vec<Value> = Vec::new();
    for round in 0..kills {
        // A random moment, not a synchronisation: the crash may hit anything.
        #[expect(
            clippy::disallowed_methods,
            reason = "a random delay places the crash at a random moment"
        )]
        std::thread::sleep(Duration::from_millis(fastrand_ms()));
        // Every fifth crash (the second first) finds three supervisors stopped:
        // the next daemon's restore gives up waiting for their sockets, and they
        // are attached once they run again.
        let stopped = if round % 5 == 1 {
            let stopped = stop_supervisors(&env, 3);
            assert!(!stopped.is_empty(), "no running supervisor to stop");
            stopped
        } else {
            Vec::new()
        };
        crash_daemon(&env);
        // The next command starts a daemon, which re-attaches before it answers.
        seen.extend(
            drain(&env, owner)
                .into_iter()
                .filter(|e| e["type"] == "completion"),
        );
        for pid in stopped {
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGCONT);
        }
        // Keep about 20 jobs running.
        let done = seen.len();
        while finite.len() + long.len() < 20 + done {
            start_job(&env, &mut finite, &mut long);
        }
    }
    let _ = wait_until(Duration::from_secs(60), || {
        seen.extend(
            drain(&env, owner)
                .into_iter()
                .filter(|e| e["type"] == "completion"),
        );
        finite
            .iter()
            .all(|j| seen.iter().any(|e| e["session_id"] == j.id.as_str()))
    });
    for job in &finite {
        let got: Vec<&Value> = seen
            .iter()
            .filter(|e| e["session_id"] == job.id.as_str())
            .collect();
        assert_eq!(
            got.len(),
            1,
            "exactly one completion for {}: {got:?}",
            job.id
        );
        assert_eq!(got[0]["exit_code"], job.code, "{:?}", got[0]);
        assert_eq!(
            numbered(&log_text(&env, &job.id)),
            (1..=job.lines).collect::<Vec<u32>>(),
            "every line of {}, once, in order",
            job.id
        );
    }
    for id in &long {
        let killed = env.json(&["kill", id, "--json"]);
        assert_eq!(killed["status"], "killed", "{killed}");
    }
    let _ = wait_until(Duration::from_secs(20), || {
        seen.extend(
            drain(&env, owner)
                .into_iter()
                .filter(|e| e["type"] == "completion"),
        );
        long.iter()
            .all(|id| seen.iter().any(|e| e["session_id"] == id.as_str()))
    });
    for id in &long {
        let got = seen
            .iter()
            .filter(|e| e["session_id"] == id.as_str())
            .count();
        assert_eq!(got, 1, "exactly one completion for the killed {id}");
    }
    for id in finite.iter().map(|j| &j.id).chain(&long) {
        assert!(tagged(id).is_empty(), "orphans of {id}: {:?}", tagged(id));
    }
    // Descriptors: the daemon that served the end holds none per finished session.
    let daemon = env.daemon_pid().expect("a daemon");
    let warm = start(&env, &[], "true").0;
    env.ok(&["wait", &warm, "--timeout", "10"]);
    let before = fd_count(daemon);
    for _ in 0..20 {
        let id = start(&env, &[], "echo x").0;
        env.ok(&["wait", &id, "--timeout", "10"]);
    }
    // Transient descriptors (a client's connection, a receipt being written) come and
    // go; growth is what stays.
    wait_until(Duration::from_secs(10), || fd_count(daemon) <= before).unwrap_or_else(|()| {
        panic!(
            "the daemon's descriptors grew from {before} to {}",
            fd_count(daemon)
        )
    });
}

/// 50 to 400 ms, different each call.
fn fastrand_ms() -> u64 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::from(d.subsec_nanos()));
    50 + nanos % 350
}

/// A restore that finds an exit record the previous daemon had already delivered (it
/// crashed after the agent took the completion, before the receipt was stored) does
/// not deliver it again.
#[test]
fn b29_shim_a_completion_delivered_before_a_crash_is_not_delivered_again() {
    let env = Env::new();
    let owner = "agent-c";
    let (id, _) = start(&env, &["--notify", "--owner", owner], "echo done; exit 4");
    let first = completions(&env, owner);
    assert_eq!(first.len(), 1, "{first:?}");
    // What a crash between delivery and the receipt leaves: the exit record and the
    // checkpoint entry, no receipt.
    let checkpoint = std::fs::read_to_string(env.home().join("processes.json")).unwrap_or_default();
    env.ok(&["shutdown", "--keep-jobs"]);
    let dir = shim_dir(&env, &id);
    std::fs::create_dir_all(&dir).expect("shim dir");
    std::fs::write(
        dir.join("exit.json"),
        r#"{"version":1,"code":4,"finished_at_ms":1,"total_ingested":5}"#,
    )
    .expect("exit record");
    // No receipt: the row goes from the store (the log may go with it; the exit
    // record is what the restore must use).
    herd_persistence::ReceiptStore::new(&herd_persistence::Home::new(env.home()))
        .forget(&id)
        .expect("the receipt is forgotten");
    let pending = env.home().join("processes.pending");
    std::fs::create_dir_all(&pending).expect("pending dir");
    let entry = serde_json::json!({
        "version": 1,
        "entry": {
            "writer": {"pid": 1, "start_time": 1},
            "id": id, "command": "echo done; exit 4", "pid": 999_999, "pgid": 999_999,
            "start_time": 1, "task_id": owner, "owner_task_id": owner, "mode": "pipe",
            "notify": true, "log_path": env.home().join("logs/sessions/x.log"), "started_at": 1.0,
            "shim": {"pid": 999_998, "start_time": 1, "protocol": 1},
        }
    });
    std::fs::write(pending.join(format!("{id}.json")), entry.to_string()).expect("entry");
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(
        polled["exit_code"], 4,
        "restore took the exit record: {polled} (checkpoint was {checkpoint})"
    );
    let again = drain(&env, owner);
    assert!(
        again.iter().all(|e| e["type"] != "completion"),
        "a delivered completion is not delivered twice: {again:?}"
    );
}

#[test]
fn shim_a_missing_shim_program_falls_back_to_in_process_jobs_and_doctor_says_so() {
    let env = Env::new();
    std::fs::write(
        env.home().join("config.toml"),
        "shim_path = \"/nonexistent/herd-shim\"\n",
    )
    .expect("config");
    let (id, _) = start(&env, &[], "echo still-runs");
    let waited = env.json(&["wait", &id, "--timeout", "10", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    assert!(!shim_dir(&env, &id).exists(), "no shim ran");
    let doctor = env.json(&["doctor", "--json"]).to_string();
    assert!(
        doctor.contains("jobs run inside the daemon and end with it"),
        "{doctor}"
    );
    let log = std::fs::read_to_string(env.home().join("logs/daemon.log")).unwrap_or_default();
    assert!(
        log.contains("herd-shim not found"),
        "the daemon log names the problem"
    );

    std::fs::write(env.home().join("config.toml"), "supervisor = \"bogus\"\n").expect("config");
    env.ok(&["shutdown", "--yes"]);
    let out = env.run(&["ps"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("supervisor"),
        "a bad value names the key: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A machine reboot takes shim and job together: restore closes the session as
/// lost, once, and says its supervisor is gone.
#[test]
fn b28_shim_a_job_gone_with_its_shim_is_closed_as_lost_once() {
    let env = Env::new();
    let owner = "agent-d";
    let (id, pid) = start(&env, &["--notify", "--owner", owner], "sleep 300");
    let shim = shim_pid(&env, &id);
    crash_daemon(&env);
    signal(shim, nix::sys::signal::Signal::SIGKILL);
    signal(pid, nix::sys::signal::Signal::SIGKILL);
    wait_until(Duration::from_secs(5), || !alive(shim) && !alive(pid)).expect("both die");
    let events = completions(&env, owner);
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0]["completion_reason"], "lost", "{:?}", events[0]);
    let polled = env.json(&["poll", &id, "--json"]);
    assert!(polled.to_string().contains("supervisor"), "{polled}");
    assert!(drain(&env, owner).is_empty(), "closed once");
}

/// An embedding host that gives its registry a shim: sessions run under it, and once
/// the registry is dropped its launcher exits while the jobs run on.
#[test]
fn b28_shim_an_embedded_registry_lets_go_of_its_launcher_when_dropped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = herd_core::Home::new(dir.path().join("home"));
    std::fs::create_dir(home.root()).expect("home");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (job, shim) = runtime.block_on(async {
        let registry = herd_core::Registry::new(
            home.clone(),
            herd_core::RegistryConfig {
                shim: Some(std::path::PathBuf::from(env!("CARGO_BIN_EXE_herd-shim"))),
                ..herd_core::RegistryConfig::default()
            },
        )
        .expect("inside a runtime");
        let info = registry
            .spawn(herd_core::SpawnRequest {
                command: "sleep 30".to_owned(),
                ..herd_core::SpawnRequest::default()
            })
            .await
            .expect("spawn");
        let text = std::fs::read_to_string(
            home.shims_dir()
                .join(info.session_id.as_str())
                .join("info.json"),
        )
        .expect("the shim wrote its info record");
        let shim: Value = serde_json::from_str(&text).expect("JSON");
        let shim = i32::try_from(shim["shim_pid"].as_i64().expect("shim_pid")).expect("pid");
        (info.pid, shim)
    });
    let launcher = parent_of(shim);
    assert_ne!(
        launcher,
        std::process::id() as i32,
        "the shim is not the host's child"
    );
    drop(runtime);
    wait_until(Duration::from_secs(10), || !alive(launcher))
        .expect("the launcher exits once its registry is gone");
    assert!(alive(job) && alive(shim), "the job and its shim run on");
    signal(job, nix::sys::signal::Signal::SIGKILL);
    wait_until(Duration::from_secs(10), || !alive(shim)).unwrap_or_else(|()| {
        panic!(
            "the shim ends with its job: shim {:?}, job {:?}",
            std::fs::read_to_string(format!("/proc/{shim}/stat")),
            std::fs::read_to_string(format!("/proc/{job}/stat"))
        )
    });
}

/// The spare shim directories of the home (inode numbers), as a daemon keeps them.
fn spare_inodes(env: &Env) -> Vec<u64> {
    use std::os::unix::fs::MetadataExt;
    std::fs::read_dir(env.home().join("run/shims"))
        .expect("the shims directory")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(".spare-"))
        .filter_map(|e| e.metadata().ok())
        .map(|m| m.ino())
        .collect()
}

fn dir_inode(path: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).expect("the directory").ino()
}

/// Runs `true` to its end and waits until its shim directory is retired.
fn finish_one(env: &Env) {
    let (id, _) = start(env, &[], "true");
    wait_until(Duration::from_secs(20), || !shim_dir(env, &id).exists())
        .expect("a finished session's shim directory is retired");
}

#[test]
fn b28_shim_a_finished_sessions_directory_is_reused_by_a_later_session_across_a_restart() {
    let env = Env::new();
    finish_one(&env);
    let spares = spare_inodes(&env);
    assert_eq!(spares.len(), 1, "the finished session's directory is kept");
    let (running, running_pid) = start(&env, &[], "sleep 300");
    assert_eq!(
        dir_inode(&shim_dir(&env, &running)),
        spares[0],
        "a new session takes the spare"
    );
    assert!(
        alive(shim_pid(&env, &running)),
        "the info record in the taken spare names the live shim"
    );
    assert!(spare_inodes(&env).is_empty());
    finish_one(&env);
    let left = spare_inodes(&env);
    assert_eq!(left.len(), 1);
    assert_ne!(left[0], spares[0]);

    crash_daemon(&env);
    let polled = env.json(&["poll", &running, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");
    let (next, _) = start(&env, &[], "sleep 300");
    assert_eq!(
        dir_inode(&shim_dir(&env, &next)),
        left[0],
        "the next daemon takes the spare the crashed one kept"
    );
    let out = env.run(&["kill", &running, "--json"]);
    assert!(out.status.success());
    let out = env.run(&["kill", &next, "--json"]);
    assert!(out.status.success());
    wait_until(Duration::from_secs(10), || !alive(running_pid)).expect("the job is killed");
}

// B30: a job nobody watches writes 8 MB ending inside a private key while the
// daemon is stopped: the daemon holds only the last tail of the backlog and goes
// on from the key mark its shim gave (the shim's key index read every byte as it
// wrote the log), so the completion masks the key body at its start without the
// daemon reading the backlog back.
#[test]
fn b30_shim_a_skipped_backlog_takes_the_key_state_from_the_shims_marks() {
    let mut env = Env::new();
    env.vars
        .push(("HERD_LOG".to_owned(), "info,herd::follow=debug".to_owned()));
    let body = "MIIEpAIBAAKCAQEA0123456789abcdefghijklmnopqrstuvwxyzAB";
    let mut text = String::new();
    for i in 0..80_000 {
        text.push_str(&format!("INFO worker-3 processed batch {i} in 56 ms\n"));
    }
    text.push_str("-----BEGIN RSA PRIVATE KEY-----\n");
    for _ in 0..80_000 {
        text.push_str(body);
        text.push('\n');
    }
    let file = env.scratch().join("keyed.txt");
    std::fs::write(&file, &text).expect("the scratch file");
    let gate = env.scratch().join("gate");
    let command = format!(
        "while [ ! -e {} ]; do sleep 0.02; done; cat {}",
        gate.display(),
        file.display()
    );
    let (id, _) = start(&env, &[], &command);
    // The daemon stopped while the job writes it all: it then finds the whole
    // output as one backlog, however fast this machine is.
    let daemon = env.daemon_pid().expect("the daemon wrote its pid file");
    signal(daemon, nix::sys::signal::Signal::SIGSTOP);
    std::fs::write(&gate, "").expect("the gate");
    let exit = shim_dir(&env, &id).join("exit.json");
    let ended = wait_until(Duration::from_secs(30), || exit.exists());
    signal(daemon, nix::sys::signal::Signal::SIGCONT);
    ended.unwrap_or_else(|()| panic!("the job did not end while the daemon was stopped"));
    let waited = env.json(&["wait", &id, "--timeout", "60", "--json"]);
    assert_eq!(waited["exit_code"], 0, "{waited}");
    let output = waited["output"].as_str().expect("the completion's output");
    assert!(!output.is_empty() && !output.contains(body), "{output:?}");
    assert!(
        output
            .lines()
            .all(|l| l.is_empty() || l == "[REDACTED PRIVATE KEY]"),
        "{output:?}"
    );
    let log = std::fs::read_to_string(env.home().join("logs/daemon.log")).unwrap_or_default();
    let marked = log
        .lines()
        .filter(|l| l.contains("went on from the shim's key mark") && l.contains(&id))
        .count();
    assert!(
        marked > 0,
        "the daemon read the backlog back instead:\n{log}"
    );
    // What the log holds is every byte, and `herd logs` masks it the same way.
    assert_eq!(log_text(&env, &id).len(), text.len());
    let logged = env.run(&["logs", &id]);
    let shown = String::from_utf8_lossy(&logged.stdout);
    assert!(shown.contains("processed batch 79999 in") && !shown.contains(body));
}
