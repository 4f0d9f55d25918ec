//! Soak tests of the real daemon: connection churn, descriptor exhaustion, a client
//! that never reads a `logs.follow` stream, and a slow plugin under many finishing
//! sessions. Each takes from half a minute to minutes, so this module is compiled
//! only without debug assertions: `cargo xtask soak` runs it (`cargo test --release`,
//! one test at a time, sizes from `HERD_SOAK_*`), and a plain `cargo test` (debug)
//! neither builds nor runs it.
//!
//! Each test prints its figures (`herd-soak: ...` on stderr) and, when
//! `HERD_SOAK_FIGURES` names a file, appends them there for xtask's summary; it
//! prints before it asserts, so a failing run still reports what it measured.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Env, HERD, alive, wait_until};

/// A size from the environment, or its default.
pub(super) fn size(var: &str, default: u64) -> u64 {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Reports one figure: on stderr, and appended to `$HERD_SOAK_FIGURES`.
#[expect(clippy::print_stderr, reason = "a soak reports what it measured")]
pub(super) fn figure(line: &str) {
    eprintln!("herd-soak: {line}");
    if let Some(path) = std::env::var_os("HERD_SOAK_FIGURES") {
        let appended = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .and_then(|mut f| writeln!(f, "{line}"));
        if let Err(err) = appended {
            eprintln!("herd-soak: cannot append to HERD_SOAK_FIGURES: {err}");
        }
    }
}

/// A raw protocol connection.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    fn open_at(socket: &Path) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(20)))?;
        Ok(Conn {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    fn open(env: &Env) -> Conn {
        Conn::open_at(&env.socket()).expect("the daemon's socket accepts")
    }

    fn send(&mut self, request: &Value) -> std::io::Result<()> {
        self.writer.write_all(format!("{request}\n").as_bytes())
    }

    fn try_recv(&mut self) -> std::io::Result<Value> {
        let mut line = String::new();
        if self.reader.read_line(&mut line)? == 0 {
            return Err(std::io::ErrorKind::UnexpectedEof.into());
        }
        serde_json::from_str(&line)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params}))
            .expect("the daemon reads");
        self.try_recv()
            .unwrap_or_else(|e| panic!("no answer to {method} within 20 s: {e}"))
    }

    fn hello(&mut self) {
        let answer = self.call("hello", json!({"protocol": 1, "client": "soak"}));
        assert!(answer["result"]["pid"].is_u64(), "hello failed: {answer}");
    }

    fn greeted(env: &Env) -> Conn {
        let mut conn = Conn::open(env);
        conn.hello();
        conn
    }
}

/// The daemon's open descriptors.
fn fd_count(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(Iterator::count)
        .unwrap_or(0)
}

/// The daemon's resident memory, in KiB.
fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The CPU time the process has used (user plus system), in seconds. `/proc`
/// counts in USER_HZ, which Linux fixes at 100 for user space.
fn cpu_seconds(pid: i32) -> f64 {
    cpu_ticks(pid) as f64 / 100.0
}

/// The CPU time the process has used (user plus system), in clock ticks.
fn cpu_ticks(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|stat| {
            let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
            // After the command: state is field 3, utime 14 and stime 15.
            let utime: u64 = fields.get(11)?.parse().ok()?;
            let stime: u64 = fields.get(12)?.parse().ok()?;
            Some(utime + stime)
        })
        .unwrap_or(0)
}

/// `status` asked on `conn`.
fn status(conn: &mut Conn) -> Value {
    let answer = conn.call("status", json!({}));
    assert!(answer["result"].is_object(), "status failed: {answer}");
    answer["result"].clone()
}

/// A child killed and reaped when dropped (`herd serve` under `prlimit`).
struct JodChild(Child);

impl Drop for JodChild {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn soak_200_connections_in_a_loop_return_the_fd_count_and_connections_to_baseline() {
    let loops = size("HERD_SOAK_CONNECTION_LOOPS", 500);
    let n_conns = size("HERD_SOAK_CONNECTIONS", 200) as usize;
    let env = Env::new();
    env.json(&["ps", "--json"]);
    let pid = env.daemon_pid().expect("the daemon runs");
    let mut probe = Conn::greeted(&env);
    let base_conns = status(&mut probe)["connections"]
        .as_u64()
        .expect("connections");
    let base_fds = fd_count(pid);
    let start = Instant::now();
    let mut worst_fds = base_fds;
    for round in 0..loops {
        // A mix: greeted connections, silent ones and ones that leave half a line.
        let mut conns: Vec<Conn> = Vec::with_capacity(n_conns);
        for i in 0..n_conns {
            let mut conn = Conn::open(&env);
            if i % 4 != 0 {
                conn.hello();
            }
            conns.push(conn);
        }
        for conn in conns.iter_mut().skip(1).step_by(4) {
            conn.send(&json!({"jsonrpc": "2.0"}))
                .expect("the daemon reads");
            conn.writer
                .write_all(b"{\"jsonrpc\": \"2.0\", \"id\": 9, \"meth")
                .expect("the daemon reads");
        }
        let during = status(&mut probe)["connections"]
            .as_u64()
            .expect("connections");
        worst_fds = worst_fds.max(fd_count(pid));
        assert!(
            during >= base_conns + (n_conns as u64) * 3 / 4,
            "round {round}: {during} connections counted with {n_conns} open"
        );
        drop(conns);
        let mut seen = (0, 0);
        wait_until(Duration::from_secs(20), || {
            seen = (
                status(&mut probe)["connections"].as_u64().unwrap_or(u64::MAX),
                fd_count(pid),
            );
            seen == (base_conns, base_fds)
        })
        .unwrap_or_else(|()| {
            panic!(
                "round {round}: connections {} (baseline {base_conns}), fds {} (baseline {base_fds})",
                seen.0, seen.1
            )
        });
    }
    figure(&format!(
        "connection churn: {loops} rounds of {n_conns} connections in {:.1}s; fds {base_fds} at rest, {worst_fds} at most, back to {base_fds} after every round",
        start.elapsed().as_secs_f64()
    ));
    assert!(alive(pid));
}

#[test]
fn soak_fd_exhaustion_keeps_the_daemon_responsive_and_its_log_small() {
    let hold = Duration::from_secs(size("HERD_SOAK_EXHAUSTION_SECONDS", 15));
    let env = Env::new();
    // The descriptor limit, not max_connections, is what runs out.
    std::fs::write(env.home().join("config.toml"), "max_connections = 4096\n").expect("writable");
    let log_path = env.scratch().join("serve.log");
    let log = std::fs::File::create(&log_path).expect("writable");
    let child = env
        .cmd_at(
            Path::new("prlimit"),
            &["--nofile=256:256", "--", HERD, "serve"],
        )
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .expect("this soak needs prlimit (util-linux) to start `herd serve` with 256 descriptors");
    let daemon = JodChild(child);
    let pid = i32::try_from(daemon.0.id()).expect("a pid fits i32");
    let socket = env.socket();
    wait_until(Duration::from_secs(20), || {
        Conn::open_at(&socket).is_ok_and(|mut c| {
            c.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": {"protocol": 1, "client": "soak"}}))
                .is_ok()
                && c.try_recv().is_ok_and(|a| a["result"]["pid"].is_u64())
        })
    })
    .expect("herd serve came up under prlimit");
    // Open connections until one is not answered (accept fails with EMFILE) or is
    // refused.
    let mut held: Vec<Conn> = Vec::new();
    let (pending, how) = loop {
        assert!(held.len() < 1_000, "1000 connections and no limit reached");
        let mut conn = Conn::open_at(&socket).expect("connect succeeds while the backlog has room");
        conn.writer
            .set_read_timeout(Some(Duration::from_secs(3)))
            .expect("a timeout can be set");
        conn.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "hello", "params": {"protocol": 1, "client": "soak"}}))
            .expect("the daemon's backlog takes it");
        match conn.try_recv() {
            Ok(answer) if answer["result"]["pid"].is_u64() => held.push(conn),
            Ok(answer) if answer["error"]["code"] == -32018 => break (None, "refused with -32018"),
            Ok(answer) => panic!("unexpected answer to hello: {answer}"),
            Err(_) => break (Some(conn), "not accepted (EMFILE)"),
        }
    };
    let n_open = held.len();
    let log_before = std::fs::metadata(&log_path).map_or(0, |m| m.len());
    let cpu_before = cpu_seconds(pid);
    let held_since = Instant::now();
    // Held at the limit: the accept loop must back off, not spin, and log little.
    let mut conn_at_limit = held.pop().expect("at least one connection was served");
    let mut worst_status = Duration::ZERO;
    while held_since.elapsed() < hold {
        let asked = Instant::now();
        let answer = conn_at_limit.call("status", json!({}));
        assert!(
            answer["result"].is_object(),
            "status failed at the limit: {answer}"
        );
        worst_status = worst_status.max(asked.elapsed());
        std::thread::park_timeout(Duration::from_millis(200));
    }
    let held_for = held_since.elapsed();
    let cpu_share = (cpu_seconds(pid) - cpu_before) / held_for.as_secs_f64();
    let log_growth = std::fs::metadata(&log_path).map_or(0, |m| m.len()) - log_before;
    // Free some descriptors: the waiting connection is served, and new ones are.
    held.truncate(held.len().saturating_sub(32));
    let recovered = match pending {
        Some(mut conn) => {
            conn.writer
                .set_read_timeout(Some(Duration::from_secs(20)))
                .expect("a timeout can be set");
            conn.try_recv().is_ok_and(|a| a["result"]["pid"].is_u64())
        }
        None => true,
    };
    let mut fresh = Conn::open_at(&socket).expect("connects after the limit");
    fresh.hello();
    let after = status(&mut fresh);
    figure(&format!(
        "fd exhaustion (RLIMIT_NOFILE 256): {n_open} connections served, then {how}; held {:.0}s at the limit: daemon CPU {:.0}% of a core, log +{log_growth} bytes, status answered in at most {} ms; after freeing 32: the waiting connection served: {recovered}, {} connections",
        held_for.as_secs_f64(),
        cpu_share * 100.0,
        worst_status.as_millis(),
        after["connections"]
    ));
    assert!(
        recovered,
        "the connection waiting at the limit was never served"
    );
    assert!(
        log_growth <= 8 * 1024,
        "daemon log grew {log_growth} bytes in {:.0}s at the limit:\n{}",
        held_for.as_secs_f64(),
        std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .lines()
            .rev()
            .take(20)
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        cpu_share < 0.5,
        "the daemon spun at the limit: {:.0}% of a core",
        cpu_share * 100.0
    );
    assert!(
        worst_status < Duration::from_secs(2),
        "status took {worst_status:?} at the limit"
    );
    drop(held);
    drop(conn_at_limit);
    drop(fresh);
    let _ = env.run(&["shutdown", "--yes"]);
    drop(daemon);
}

#[test]
fn soak_a_client_that_never_reads_logs_follow_leaves_memory_bounded_and_others_answered() {
    let seconds = size("HERD_SOAK_FOLLOW_SECONDS", 20);
    let env = Env::new();
    // The log keeps 1 GiB of the output (the default cap); the job prints on, at
    // whatever rate the machine allows, for the whole run.
    env.json(&["ps", "--json"]);
    let pid = env.daemon_pid().expect("the daemon runs");
    let mut control = Conn::greeted(&env);
    let base_rss = rss_kib(pid);
    let spawned = control.call(
        "spawn",
        json!({
            "command": format!("timeout {seconds} yes herd-soak-0123456789abcdefghijklmnopqrstuvwxyz"),
            "owner": "soak",
            "cwd": env.scratch(),
        }),
    );
    let id = spawned["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("spawn failed: {spawned}"))
        .to_owned();
    let mut follower = Conn::greeted(&env);
    follower
        .send(&json!({"jsonrpc": "2.0", "id": 2, "method": "logs.follow", "params": {"id": id}}))
        .expect("the daemon reads");
    // Never read from `follower` again. Meanwhile: memory, and other requests.
    let start = Instant::now();
    let mut max_rss = base_rss;
    let mut worst = Duration::ZERO;
    let mut n_asked = 0u32;
    let mut exited_at = None;
    while exited_at.is_none_or(|t: Instant| t.elapsed() < Duration::from_secs(5)) {
        assert!(
            start.elapsed() < Duration::from_secs(seconds + 120),
            "the job did not end within two minutes of its timeout"
        );
        let asked = Instant::now();
        let polled = control.call("poll", json!({"id": id}));
        let listed = control.call("list", json!({"state": "all"}));
        worst = worst.max(asked.elapsed());
        n_asked += 1;
        assert!(listed["result"]["processes"].is_array(), "{listed}");
        if exited_at.is_none() && polled["result"]["status"] == "exited" {
            exited_at = Some(Instant::now());
        }
        max_rss = max_rss.max(rss_kib(pid));
        std::thread::park_timeout(Duration::from_millis(50));
    }
    let logged = std::fs::metadata(env.home().join(format!("logs/sessions/{id}.log")))
        .map_or(0, |m| m.len());
    figure(&format!(
        "slow logs.follow client: the job printed for {:.1}s ({} MiB logged); daemon RSS {} MiB at rest, {} MiB at most; {n_asked} poll+list pairs meanwhile, the slowest {} ms",
        exited_at.map_or(0.0, |t| (t - start).as_secs_f64()),
        logged >> 20,
        base_rss / 1024,
        max_rss / 1024,
        worst.as_millis()
    ));
    assert!(
        max_rss <= base_rss + 64 * 1024,
        "the daemon grew from {} to {} MiB with a follower that never reads",
        base_rss / 1024,
        max_rss / 1024
    );
    assert!(
        worst < Duration::from_secs(2),
        "a request took {worst:?} meanwhile"
    );
    drop(follower);
    assert!(alive(pid));
}

/// The slow plugin built beside this test executable.
fn slow_plugin() -> PathBuf {
    let exe = std::env::current_exe().expect("the test executable's path");
    let lib = exe
        .parent()
        .and_then(Path::parent)
        .expect("the test executable sits in <target>/<profile>/deps")
        .join("libherd_test_plugin_slowcompletion.so");
    assert!(
        lib.is_file(),
        "this soak needs the slow plugin: run `cargo build --release -p herd-test-plugin-slowcompletion` first (looked for {})",
        lib.display()
    );
    lib
}

/// How often the slow-plugin soak lists.
const LIST_PERIOD: Duration = Duration::from_millis(10);

/// The `p`th percentile (0 to 100) of sorted `samples`.
fn percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = (sorted.len() * p).div_ceil(100).saturating_sub(1);
    sorted[idx.min(sorted.len() - 1)]
}

#[test]
fn soak_a_slow_completion_plugin_under_200_finishing_sessions_keeps_list_p99_within_50ms() {
    let n_sessions = size("HERD_SOAK_SLOW_SESSIONS", 200);
    let env = Env::new();
    let dir = env.home().join("plugins").join("slow");
    std::fs::create_dir_all(&dir).expect("writable");
    for d in [env.home().join("plugins"), dir.clone()] {
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }
    std::fs::copy(slow_plugin(), dir.join("libslow.so")).expect("the plugin copies");
    std::fs::write(
        dir.join("plugin.toml"),
        "name = \"slow\"\nversion = \"0.0.1\"\nlibrary = \"libslow.so\"\n",
    )
    .expect("writable");
    std::fs::write(
        env.home().join("config.toml"),
        "[plugins]\nenabled = [\"slow\"]\n",
    )
    .expect("writable");
    env.json(&["ps", "--json"]);
    // The daemon starts plugins on their own threads: `starting` until the init returns.
    wait_until(Duration::from_secs(10), || {
        env.json(&["plugins", "list", "--json"])["plugins"][0]["status"] == "loaded"
    })
    .unwrap_or_else(|()| panic!("{}", env.json(&["plugins", "list", "--json"])));
    let pid = env.daemon_pid().expect("the daemon runs");
    let mut lister = Conn::greeted(&env);
    // (when, how long) of every list.
    let mut samples: Vec<(Duration, Duration)> = Vec::new();
    let start = Instant::now();
    let spawned_in = std::thread::scope(|scope| {
        let spawner = scope.spawn(|| {
            let mut conn = Conn::greeted(&env);
            // Staggered ends: the sessions finish over about four seconds, and
            // every finish makes a completion that goes through the plugin.
            for i in 0..n_sessions {
                let answer = conn.call(
                    "spawn",
                    json!({
                        "command": format!("sleep {:.2}", 0.5 + (i as f64) * 4.0 / n_sessions as f64),
                        "owner": "soak",
                        "notify": true,
                        "cwd": env.scratch(),
                    }),
                );
                assert!(answer["result"]["session_id"].is_string(), "spawn {i} failed: {answer}");
            }
            start.elapsed()
        });
        // One list every LIST_PERIOD (as a client polling `herd ps` would) while the
        // sessions start and finish, and for a few seconds after the last one (its
        // completion's plugin call).
        let mut quiet_since: Option<Instant> = None;
        let mut next = Instant::now();
        while quiet_since.is_none_or(|t| t.elapsed() < Duration::from_secs(3)) {
            assert!(
                start.elapsed() < Duration::from_secs(600),
                "the sessions did not finish in 10 minutes"
            );
            while Instant::now() < next {
                std::thread::park_timeout(next - Instant::now());
            }
            let asked = Instant::now();
            let answer = lister.call("list", json!({"state": "all"}));
            samples.push((asked - start, asked.elapsed()));
            assert!(answer["result"]["processes"].is_array(), "{answer}");
            next = (next + LIST_PERIOD).max(Instant::now());
            let running = status(&mut lister)["running"].as_u64().unwrap_or(u64::MAX);
            if spawner.is_finished() && running == 0 {
                quiet_since.get_or_insert_with(Instant::now);
            }
        }
        spawner.join().expect("the spawner finished")
    });
    let mut raw: Vec<Duration> = samples.iter().map(|&(_, took)| took).collect();
    raw.sort_unstable();
    // A list that took longer than the period delayed the ones that were due
    // meanwhile; count them at the latency they would have seen (coordinated
    // omission: without this a 2 s stall is one sample among thousands).
    let mut corrected = raw.clone();
    for &took in &raw {
        let mut missed = took.saturating_sub(LIST_PERIOD);
        while !missed.is_zero() {
            corrected.push(missed);
            missed = missed.saturating_sub(LIST_PERIOD);
        }
    }
    corrected.sort_unstable();
    let slow: Vec<String> = samples
        .iter()
        .filter(|&&(_, took)| took > Duration::from_millis(50))
        .map(|&(at, took)| {
            format!(
                "{:.0} ms at {:.1}s",
                took.as_secs_f64() * 1e3,
                at.as_secs_f64()
            )
        })
        .collect();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let p99 = percentile(&corrected, 99);
    figure(&format!(
        "slow completion plugin (1.5 s per completion), {n_sessions} sessions spawned in {:.1}s and finished: {} lists (one per {} ms) in {:.1}s; latency p50 {:.1} ms, p99 {:.1} ms ({:.1} ms without counting the lists a stall delayed), max {:.1} ms; over 50 ms: {}",
        spawned_in.as_secs_f64(),
        raw.len(),
        LIST_PERIOD.as_millis(),
        start.elapsed().as_secs_f64(),
        ms(percentile(&corrected, 50)),
        ms(p99),
        ms(percentile(&raw, 99)),
        ms(raw.last().copied().unwrap_or_default()),
        if slow.is_empty() {
            "none".to_owned()
        } else {
            slow.join(", ")
        }
    ));
    assert!(alive(pid));
    assert!(
        p99 <= Duration::from_millis(50),
        "list p99 {p99:?} over 50 ms"
    );
}

/// Many long-running jobs (default 1,000 `sleep`s) start one after another through
/// the real daemon: every spawn answers within 20 s (none hangs), all of them run at
/// once, and the time to start them is reported. A refusal must name a limit.
#[test]
fn soak_1000_running_sleeps_start_and_none_hangs() {
    let jobs = size("HERD_SOAK_RUNNING_JOBS", 1000);
    let env = Env::new();
    let started = Instant::now();
    for n in 0..jobs {
        let out = env
            .cmd_at(
                Path::new("timeout"),
                &["20", HERD, "run", "--", "sleep", "600"],
            )
            .output()
            .expect("timeout runs herd");
        let err = crate::support::stderr(&out);
        assert_ne!(out.status.code(), Some(124), "spawn {n} hung: {err}");
        assert!(out.status.success(), "spawn {n} was refused: {err}");
    }
    let took = started.elapsed();
    let listed = env.json(&["ps", "--json"]);
    let running = listed["processes"].as_array().map_or(0, |rows| {
        rows.iter().filter(|r| r["status"] == "running").count()
    });
    figure(&format!(
        "{jobs} running sleeps started one after another in {:.1} s; {running} listed running",
        took.as_secs_f64()
    ));
    assert_eq!(running as u64, jobs, "every job runs: {listed}");
    env.ok(&["shutdown", "--yes"]);
}
