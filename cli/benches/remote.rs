//! Benchmarks of jobs on another host through the local daemon's host link,
//! against a second herd home on this machine.
//!
//! Figures (one `herd-bench` line each, read by `cargo xtask bench`):
//! - `remote.run_completion_local_door`: `spawn` of `true` with `host` and
//!   `notify` on one socket connection, until its completion arrives on the local
//!   owner's `events.follow` stream, p50 (value) and p99 (note) of 200, over a local
//!   door (`env HERD_HOME=<far> herd proxy`), against the same on a local job;
//! - `remote.run_completion_ssh`: the same over loopback ssh (a private sshd on a
//!   free port, its own keys), when `/usr/sbin/sshd` is installed;
//! - `remote.run_wait_ssh`: `herd run --host far --wait -- true` (the whole CLI)
//!   over loopback ssh, p50 of 30, against `herd run --wait -- true` locally; the
//!   note has the door's round trip (`hosts check` ping p50) and a bare `ssh host
//!   true`; target: 2x local plus one door round trip;
//! - `remote.logs_vs_cat`: `herd logs NAME:ID > /dev/null` of a finished far job's
//!   log of realistic lines against `cat` of the same file through the same door
//!   argv (`env HERD_HOME=<far> cat FILE`), 3 runs each alternating, MB/s (the
//!   ratio is cat's time over herd's; target >= 0.5); `remote.logs_follow_vs_cat`
//!   the same with `herd logs -f`. The log is 1 GiB (`HERD_BENCH_REMOTE_MB`
//!   sets another size);
//! - `remote.logs_ssh_vs_cat` and `remote.logs_follow_ssh_vs_cat`: the issue's own
//!   form, the same over loopback ssh (the private sshd above): `herd logs
//!   far:ID` against `ssh host cat FILE` of the same file in the same run, when
//!   `/usr/sbin/sshd` is installed.
//!
//! - `remote.hosts10_jobs100`: 10 hosts (10 far homes, each with its own local
//!   door and daemon) × 100 `spawn`s of `true` with `notify`, sent on one socket
//!   connection, until all 1,000 completions have arrived on the local owner's
//!   `events.follow` stream, seconds.
//!
//! `HERD_BENCH_ONLY=<substring>[,…]` runs only the figures whose name has one.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herd_test_support::bench::figure_line;
use herd_test_support::home::{TempHome, command, herd, stop_daemon};
use serde_json::{Value, json};

const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// A local home and a far one, the far reached as host `far` through `door`.
struct Pair {
    _dir: TempHome,
    local: PathBuf,
    far: PathBuf,
    door: Vec<String>,
}

impl Pair {
    /// `door` is the transport before the far side's `env HERD_HOME=… herd proxy`.
    fn new(door: &[String]) -> Pair {
        let dir = TempHome::new("herd-bench-remote", "local");
        let local = dir.home().to_owned();
        let far = dir.scratch().join("far");
        std::fs::create_dir(&far).expect("home");
        let mut argv = door.to_vec();
        argv.extend([
            "env".to_owned(),
            format!("HERD_HOME={}", far.display()),
            HERD.to_owned(),
            "proxy".to_owned(),
        ]);
        let quoted: Vec<String> = argv.iter().map(|a| format!("{a:?}")).collect();
        std::fs::write(
            local.join("config.toml"),
            format!("[hosts.far]\ncommand = [{}]\n", quoted.join(", ")),
        )
        .expect("config");
        Pair {
            _dir: dir,
            local,
            far,
            door: door.to_vec(),
        }
    }

    fn herd(&self, home: &Path, args: &[&str]) -> Command {
        let mut cmd = herd(Path::new(HERD), home);
        cmd.args(args).stderr(Stdio::inherit());
        cmd
    }

    fn out(&self, args: &[&str]) -> String {
        let out = self.herd(&self.local, args).output().expect("herd runs");
        assert!(out.status.success(), "herd {args:?} failed");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    /// A connection to the local daemon, greeted.
    fn connect(&self) -> Rpc {
        self.out(&["ps"]);
        let stream = UnixStream::connect(self.local.join("run/herd.sock")).expect("socket");
        let mut rpc = Rpc {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
            next: 0,
        };
        rpc.call("hello", json!({"protocol": 1, "client": "bench"}));
        rpc
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        for home in [&self.local, &self.far] {
            stop_daemon(
                home,
                Duration::from_secs(5),
                &mut self.herd(home, &["shutdown", "--yes"]),
            );
        }
    }
}

/// A JSON-RPC connection.
struct Rpc {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next: u64,
}

impl Rpc {
    fn send(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let line = json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        writeln!(self.writer, "{line}").expect("the daemon reads");
        self.next
    }

    fn line(&mut self) -> Value {
        let mut line = String::new();
        self.reader
            .read_line(&mut line)
            .expect("the daemon answers");
        serde_json::from_str(&line).expect("JSON")
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let message = self.line();
            if message["id"] == id {
                assert!(message["error"].is_null(), "{method}: {message}");
                return message["result"].clone();
            }
        }
    }
}

/// A command for a baseline or the binary itself.
fn raw_command(program: &Path) -> Command {
    command(program)
}

fn percentile(samples: &mut [f64], p: f64) -> f64 {
    samples.sort_by(f64::total_cmp);
    let at = ((samples.len() as f64 - 1.0) * p).round() as usize;
    samples[at]
}

fn report(
    name: &str,
    unit: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    target: &str,
    note: &str,
) {
    let target = (!target.is_empty()).then_some(target);
    println!("{}", figure_line(name, unit, value, baseline, target, note));
}

/// Milliseconds from `spawn` to the completion on the owner's stream, `n` times;
/// `host` none for a local job.
fn run_completion(pair: &Pair, host: Option<&str>, n: usize) -> Vec<f64> {
    let mut control = pair.connect();
    let mut events = pair.connect();
    events.send("events.follow", json!({"owner": "bench"}));
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let mut params = json!({"command": "true", "owner": "bench", "notify": true});
        if let Some(host) = host {
            params["host"] = json!(host);
        }
        let start = Instant::now();
        let id = control.call("spawn", params)["session_id"]
            .as_str()
            .expect("a session id")
            .to_owned();
        loop {
            let note = events.line();
            if note["params"]["type"] == "completion" && note["params"]["session_id"] == id {
                break;
            }
        }
        samples.push(start.elapsed().as_secs_f64() * 1e3);
    }
    samples
}

fn run_completion_figure(name: &str, pair: &Pair, what: &str) {
    let n = 200;
    // Warm: the doors open on first use.
    run_completion(pair, Some("far"), 5);
    let mut remote = run_completion(pair, Some("far"), n);
    let mut local = run_completion(pair, None, n);
    let p50 = percentile(&mut remote, 0.5);
    let p99 = percentile(&mut remote, 0.99);
    let local_p50 = percentile(&mut local, 0.5);
    let local_p99 = percentile(&mut local, 0.99);
    report(
        name,
        "ms",
        p50,
        Some((local_p50, "the same on a local job (p50)")),
        "",
        &format!(
            "p50 {p50:.2} ms, p99 {p99:.2} ms of {n} spawn -> completion over {what}; local p99 {local_p99:.2} ms"
        ),
    );
}

/// Seconds of `cmd` with stdout to /dev/null.
fn timed(mut cmd: Command) -> f64 {
    cmd.stdout(Stdio::null());
    let start = Instant::now();
    let status = cmd.status().expect("runs");
    assert!(status.success(), "{cmd:?} failed");
    start.elapsed().as_secs_f64()
}

/// Seconds of `cmd` with its stdout read through a pipe (as a door's output
/// would be), and the bytes read.
fn timed_piped(mut cmd: Command) -> (f64, u64) {
    use std::io::Read;
    cmd.stdout(Stdio::piped());
    let start = Instant::now();
    let mut child = cmd.spawn().expect("runs");
    let mut out = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 256 << 10];
    let mut total = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => total += n as u64,
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => {}
            Err(err) => panic!("reading {cmd:?}: {err}"),
        }
    }
    assert!(child.wait().expect("exits").success(), "{cmd:?} failed");
    (start.elapsed().as_secs_f64(), total)
}

/// The `remote.logs*` figures over `pair`'s door: `infix` goes into their names
/// (`_ssh`), `door` into their notes.
fn logs_vs_cat(pair: &Pair, infix: &str, door: &str) {
    let mb: u64 = std::env::var("HERD_BENCH_REMOTE_MB")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|v| (1..=4096).contains(v))
        .unwrap_or(1024);
    let bytes = mb << 20;
    let id = pair
        .out(&[
            "run",
            "--host",
            "far",
            "--",
            &format!(
                "yes '2026-12-02T00:00:00Z INFO worker[17] processed batch 4711 in 12.5 ms (ok, 128 rows, cache hit)' | head -c {bytes}"
            ),
        ])
        .trim()
        .to_owned();
    pair.out(&["wait", &id]);
    let far_id = id.trim_start_matches("far:");
    let file = pair.far.join("logs/sessions").join(format!("{far_id}.log"));
    let size = std::fs::metadata(&file).expect("the far log").len();
    assert!(size >= bytes, "the far log holds {size} bytes");
    // cat through the same door argv: the transport, then the far command.
    let cat = || {
        let mut argv = pair.door.clone();
        argv.extend([
            "env".to_owned(),
            format!("HERD_HOME={}", pair.far.display()),
            "cat".to_owned(),
            file.display().to_string(),
        ]);
        let mut cmd = raw_command(Path::new(&argv[0]));
        cmd.args(&argv[1..]).stdin(Stdio::null());
        cmd
    };
    // One untimed warm-up of each, which checks every byte comes out.
    let (_, cat_bytes) = timed_piped(cat());
    let (_, herd_bytes) = timed_piped(pair.herd(&pair.local, &["logs", &id]));
    assert_eq!(cat_bytes, size);
    assert!(
        herd_bytes >= size * 9 / 10,
        "herd logs printed {herd_bytes} of {size} bytes"
    );
    let mut herd_s = Vec::new();
    let mut follow_s = Vec::new();
    let mut cat_s = Vec::new();
    let mut far_s = Vec::new();
    for _ in 0..3 {
        herd_s.push(timed(pair.herd(&pair.local, &["logs", &id])));
        cat_s.push(timed_piped(cat()).0);
        follow_s.push(timed(pair.herd(&pair.local, &["logs", "-f", &id])));
        far_s.push(timed(pair.herd(&pair.far, &["logs", far_id])));
    }
    let mbs = |s: &mut Vec<f64>| size as f64 / 1e6 / percentile(s, 0.5);
    let cat_mbs = mbs(&mut cat_s);
    let far_mbs = mbs(&mut far_s);
    let spread = |s: &[f64]| {
        let rates: Vec<String> = s
            .iter()
            .map(|t| format!("{:.0}", size as f64 / 1e6 / t))
            .collect();
        rates.join("/")
    };
    let note = format!(
        "{mb} MiB far log, median of 3 each, through {door} (cat's output read through a \
         pipe); MB/s of the runs: herd logs {}, herd logs -f {}, cat {}; the far herd's own \
         `herd logs` of it on the far side: {far_mbs:.0} MB/s",
        spread(&herd_s),
        spread(&follow_s),
        spread(&cat_s),
    );
    report(
        &format!("remote.logs{infix}_vs_cat"),
        "MB/s",
        mbs(&mut herd_s),
        Some((cat_mbs, "cat through the same door argv")),
        ">= 0.5x",
        &note,
    );
    report(
        &format!("remote.logs_follow{infix}_vs_cat"),
        "MB/s",
        mbs(&mut follow_s),
        Some((cat_mbs, "cat through the same door argv")),
        ">= 0.5x",
        &note,
    );
}

/// A private sshd on a free loopback port with its own keys; the ssh argv to
/// reach it, and the child (killed on drop of the guard).
struct Sshd {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    ssh: Vec<String>,
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sshd() -> Option<Sshd> {
    let program = Path::new("/usr/sbin/sshd");
    if !program.is_file() || std::fs::create_dir_all("/run/sshd").is_err() {
        return None;
    }
    let dir = tempfile::Builder::new()
        .prefix("herd-bench-sshd")
        .tempdir()
        .ok()?;
    let d = dir.path();
    for key in ["host_key", "user_key"] {
        let ok = raw_command(Path::new("ssh-keygen"))
            .args(["-q", "-t", "ed25519", "-N", "", "-f"])
            .arg(d.join(key))
            .stdin(Stdio::null())
            .status()
            .ok()?
            .success();
        if !ok {
            return None;
        }
    }
    std::fs::copy(d.join("user_key.pub"), d.join("authorized_keys")).ok()?;
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let host_pub = std::fs::read_to_string(d.join("host_key.pub")).ok()?;
    std::fs::write(
        d.join("known_hosts"),
        format!("[127.0.0.1]:{port} {host_pub}"),
    )
    .ok()?;
    let child = raw_command(program)
        .args(["-D", "-e", "-f", "/dev/null", "-p", &port.to_string()])
        .args(["-h", &d.join("host_key").display().to_string()])
        .args(["-o", "ListenAddress=127.0.0.1", "-o", "UsePAM=no"])
        .args(["-o", "PermitRootLogin=prohibit-password"])
        .args([
            "-o",
            &format!("AuthorizedKeysFile={}", d.join("authorized_keys").display()),
        ])
        .args([
            "-o",
            "StrictModes=no",
            "-o",
            &format!("PidFile={}", d.join("pid").display()),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let ssh: Vec<String> = [
        "ssh",
        "-F",
        "/dev/null",
        "-p",
        &port.to_string(),
        "-i",
        &d.join("user_key").display().to_string(),
        "-o",
        "IdentitiesOnly=yes",
        "-o",
        &format!("UserKnownHostsFile={}", d.join("known_hosts").display()),
        "-o",
        "StrictHostKeyChecking=yes",
        "-o",
        "BatchMode=yes",
        "127.0.0.1",
    ]
    .iter()
    .map(|s| (*s).to_owned())
    .collect();
    let guard = Sshd {
        child,
        _dir: dir,
        ssh,
    };
    // Ready when a login runs `true`.
    let deadline = Instant::now() + Duration::from_secs(20);
    while Instant::now() < deadline {
        let ok = raw_command(Path::new("ssh"))
            .args(&guard.ssh[1..])
            .arg("true")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            return Some(guard);
        }
        std::thread::park_timeout(Duration::from_millis(100));
    }
    None
}

/// Milliseconds of `cmd` (stdout and stderr to /dev/null), `n` times.
fn times_ms(mut make: impl FnMut() -> Command, n: usize) -> Vec<f64> {
    (0..n)
        .map(|_| {
            let mut cmd = make();
            cmd.stderr(Stdio::null());
            timed(cmd) * 1e3
        })
        .collect()
}

/// `remote.run_wait_ssh`: `herd run --host far --wait -- true` (a whole CLI
/// process each) over loopback ssh against `herd run --wait -- true` on a local
/// job, with the two round trips it is judged by: the door's own (`hosts check`'s
/// ping p50 over the open door) and a bare `ssh host true` (a new connection).
fn run_wait_figure(pair: &Pair, ssh: &[String]) {
    let n = 30;
    let far = || {
        pair.herd(
            &pair.local,
            &["run", "--host", "far", "--wait", "--", "true"],
        )
    };
    let local = || pair.herd(&pair.local, &["run", "--wait", "--", "true"]);
    // Warm: the daemons start and the host's doors open on first use.
    times_ms(far, 3);
    times_ms(local, 3);
    let mut remote = times_ms(far, n);
    let mut here = times_ms(local, n);
    let mut bare = times_ms(
        || {
            let mut cmd = raw_command(Path::new(&ssh[0]));
            cmd.args(&ssh[1..]).arg("true").stdin(Stdio::null());
            cmd
        },
        10,
    );
    let check: Value =
        serde_json::from_str(&pair.out(&["hosts", "check", "far", "--json", "--pings", "20"]))
            .expect("hosts check --json");
    let ping = check["latency_ms"]["p50"].as_f64().unwrap_or(f64::NAN);
    let (p50, p99) = (percentile(&mut remote, 0.5), percentile(&mut remote, 0.99));
    let (local_p50, ssh_p50) = (percentile(&mut here, 0.5), percentile(&mut bare, 0.5));
    let target = 2.0 * local_p50 + ping;
    report(
        "remote.run_wait_ssh",
        "ms",
        p50,
        Some((local_p50, "`herd run --wait -- true` on a local job (p50)")),
        &format!("<= {target:.1} ms (2x local + one door round trip)"),
        &format!(
            "p50 {p50:.1} ms, p99 {p99:.1} ms of {n} `herd run --host far --wait -- true` over loopback ssh; \
             local p50 {local_p50:.1} ms; door round trip p50 {ping:.2} ms; bare `ssh host true` p50 {ssh_p50:.1} ms"
        ),
    );
}

/// 10 hosts × 100 notified `true` jobs, spawned on one connection, until every
/// completion is on the owner's stream.
fn hosts10_jobs100() {
    const HOSTS: usize = 10;
    const JOBS: usize = 100;
    let pair = Pair::new(&[]);
    let fars: Vec<tempfile::TempDir> = (0..HOSTS)
        .map(|_| {
            tempfile::Builder::new()
                .prefix("herd-bench-far")
                .tempdir()
                .expect("temp dir")
        })
        .collect();
    let mut config = String::new();
    for (i, far) in fars.iter().enumerate() {
        config.push_str(&format!(
            "[hosts.far{i}]\ncommand = [\"env\", \"HERD_HOME={}\", {HERD:?}, \"proxy\"]\n",
            far.path().display()
        ));
    }
    std::fs::write(pair.local.join("config.toml"), config).expect("config");
    let mut control = pair.connect();
    let mut events = pair.connect();
    events.send("events.follow", json!({"owner": "bench"}));
    // Doors open and far daemons start before the clock runs.
    for i in 0..HOSTS {
        control.call("list", json!({"host": format!("far{i}")}));
    }
    let start = Instant::now();
    // Sent in windows of 50 with their answers read in between: a client that
    // only writes would fill the socket both ways.
    for window in 0..(HOSTS * JOBS / 50) {
        for k in 0..50 {
            let host = (window * 50 + k) % HOSTS;
            control.send(
                "spawn",
                json!({"command": "true", "owner": "bench", "notify": true, "host": format!("far{host}")}),
            );
        }
        for _ in 0..50 {
            let message = control.line();
            assert!(message["error"].is_null(), "{message}");
        }
    }
    let spawned = start.elapsed().as_secs_f64();
    let mut completions = 0;
    while completions < HOSTS * JOBS {
        let note = events.line();
        if note["params"]["type"] == "completion" {
            completions += 1;
        }
    }
    let total = start.elapsed().as_secs_f64();
    report(
        "remote.hosts10_jobs100",
        "s",
        total,
        None,
        "",
        &format!(
            "{HOSTS} hosts x {JOBS} notified `true` jobs over local doors, spawned on one connection \
             (all answered after {spawned:.2} s), until all {} completions were on the local owner's stream",
            HOSTS * JOBS
        ),
    );
    for far in &fars {
        let _ = pair
            .herd(far.path(), &["shutdown", "--yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

fn main() {
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || only.split(',').any(|o| name.contains(o));
    if wanted("remote.run_completion_local_door") {
        let pair = Pair::new(&[]);
        run_completion_figure("remote.run_completion_local_door", &pair, "a local door");
    }
    if wanted("remote.logs_vs_cat") || wanted("remote.logs_follow_vs_cat") {
        logs_vs_cat(&Pair::new(&[]), "", "the local door");
    }
    if wanted("remote.hosts10_jobs100") {
        hosts10_jobs100();
    }
    let over_ssh = [
        "remote.run_wait_ssh",
        "remote.run_completion_ssh",
        "remote.logs_ssh_vs_cat",
        "remote.logs_follow_ssh_vs_cat",
    ];
    if over_ssh.iter().any(|name| wanted(name)) {
        match sshd() {
            Some(sshd) => {
                let pair = Pair::new(&sshd.ssh);
                if wanted("remote.run_wait_ssh") {
                    run_wait_figure(&pair, &sshd.ssh);
                }
                if wanted("remote.run_completion_ssh") {
                    run_completion_figure("remote.run_completion_ssh", &pair, "loopback ssh");
                }
                if wanted("remote.logs_ssh_vs_cat") || wanted("remote.logs_follow_ssh_vs_cat") {
                    logs_vs_cat(&pair, "_ssh", "loopback ssh (`ssh host cat FILE`)");
                }
            }
            None => println!("{} skipped: no usable /usr/sbin/sshd", over_ssh.join(", ")),
        }
    }
}
