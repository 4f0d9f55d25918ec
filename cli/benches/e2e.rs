//! End-to-end benchmarks of the `herd` binary against a real daemon.
//!
//! The binary is the one Cargo builds for this bench (`CARGO_BIN_EXE_herd`, bench
//! profile), so `cargo bench -p herd-cli --bench e2e` always measures the current
//! code; no separate `cargo build --release` is needed. Each figure uses a fresh
//! temporary home and shuts its daemon down afterwards.
//!
//! Figures (one `herd-bench` line each, read by `cargo xtask bench`):
//! - `cli.run_wait_roundtrip`: `herd run -- true` + `herd wait ID`, median, against
//!   spawning and reaping `bash -c true` (target <= 2x);
//! - `cli.client_start`: `herd --version` against `bash -c true`: the start-up of
//!   one client process, the floor under every CLI figure (a round trip starts two);
//! - `cli.notify_1000`: 1,000 separate `herd run --notify -- true` processes, then
//!   every completion drained through `herd events` (target <= 3.8 s);
//! - `cli.spawn_1000_one_connection`: 1,000 `spawn` requests on one socket
//!   connection (target <= 1.3 s);
//! - `cli.daemon_rss_1000_finished`: the daemon's RSS holding 1,000 finished
//!   sessions (target <= 38 MB).
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// A temporary home whose daemon is shut down on drop.
struct Home {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Home {
    fn new(config: &str) -> Home {
        let dir = tempfile::Builder::new()
            .prefix("herd-bench")
            .tempdir()
            .expect("temp dir");
        let root = dir.path().join("h");
        std::fs::create_dir(&root).expect("home");
        std::fs::write(root.join("config.toml"), config).expect("config");
        Home { _dir: dir, root }
    }

    fn herd(&self, args: &[&str]) -> Command {
        let mut cmd = raw_command(Path::new(HERD));
        cmd.args(args)
            .env("HERD_HOME", &self.root)
            .env_remove("HERD_OWNER")
            .stdin(Stdio::null())
            .stderr(Stdio::inherit());
        cmd
    }

    fn out(&self, args: &[&str]) -> String {
        let out = self.herd(args).output().expect("herd runs");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    fn daemon_pid(&self) -> i32 {
        std::fs::read_to_string(self.root.join("run/herd.pid"))
            .expect("pid file")
            .trim()
            .parse()
            .expect("pid")
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        let _ = self.herd(&["shutdown"]).stdout(Stdio::null()).status();
    }
}

#[expect(
    clippy::disallowed_methods,
    reason = "the bench drives the real binary and a bash baseline"
)]
fn raw_command(program: &Path) -> Command {
    Command::new(program)
}

fn median(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[samples.len() / 2]
}

fn report(
    name: &str,
    unit: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    target: &str,
    note: &str,
) {
    let (base, base_name, ratio) = match baseline {
        Some((b, n)) => (json!(b), json!(n), json!(value / b)),
        None => (Value::Null, Value::Null, Value::Null),
    };
    let line = json!({
        "name": name, "unit": unit, "value": value, "baseline": base, "baseline_name": base_name,
        "ratio": ratio, "target": (!target.is_empty()).then_some(target), "note": note,
    });
    println!("herd-bench {line}");
}

/// One `bash -c true`, spawned and reaped, in milliseconds: the baseline of the
/// per-command figures.
fn bash_true_ms() -> f64 {
    let start = Instant::now();
    let status = raw_command(Path::new("bash"))
        .args(["-c", "true"])
        .status()
        .expect("bash");
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    assert!(status.success());
    elapsed
}

fn run_wait_roundtrip() {
    let home = Home::new("");
    home.out(&["ps"]); // autostart outside the measurement
    let mut herd = Vec::new();
    let mut bash = Vec::new();
    for _ in 0..40 {
        let start = Instant::now();
        let id = home.out(&["run", "--", "true"]);
        let status = home
            .herd(&["wait", id.trim()])
            .stdout(Stdio::null())
            .status()
            .expect("wait");
        herd.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(status.success());
        bash.push(bash_true_ms());
    }
    report(
        "cli.run_wait_roundtrip",
        "ms",
        median(herd),
        Some((median(bash), "spawn and reap bash -c true")),
        "<= 2.0",
        "median of 40; two herd client processes per round trip",
    );
}

fn client_start() {
    let mut herd = Vec::new();
    let mut bash = Vec::new();
    for _ in 0..40 {
        let start = Instant::now();
        let status = raw_command(Path::new(HERD))
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .expect("herd --version");
        herd.push(start.elapsed().as_secs_f64() * 1e3);
        assert!(status.success());
        bash.push(bash_true_ms());
    }
    report(
        "cli.client_start",
        "ms",
        median(herd),
        Some((median(bash), "spawn and reap bash -c true")),
        "",
        "median of 40; `herd --version`: exec, dynamic loading, argument parsing, no socket",
    );
}

fn notify_1000_once(config: &str) -> f64 {
    let home = Home::new(&format!("finished_cap = 2000\n{config}"));
    home.out(&["ps"]);
    let start = Instant::now();
    for _ in 0..1000 {
        let status = home
            .herd(&["run", "--notify", "--", "true"])
            .stdout(Stdio::null())
            .status()
            .expect("run");
        assert!(status.success());
    }
    let mut drained = 0usize;
    let deadline = Instant::now() + Duration::from_secs(60);
    while drained < 1000 && Instant::now() < deadline {
        drained += home
            .out(&["events"])
            .lines()
            .filter(|l| l.contains("\"completion\""))
            .count();
    }
    let elapsed = start.elapsed().as_secs_f64();
    assert_eq!(drained, 1000, "every completion is drained");
    elapsed
}

fn notify_1000() {
    // Paired: each run of the default (every job under its shim) beside one with the
    // jobs held by the daemon itself, so the ratio is the shim's cost.
    let mut runs = Vec::new();
    let mut in_process = Vec::new();
    for _ in 0..3 {
        runs.push(notify_1000_once(""));
        in_process.push(notify_1000_once("supervisor = \"in_process\"\n"));
    }
    let herd = median(runs);
    report(
        "cli.notify_1000",
        "s",
        herd,
        Some((median(in_process), "the same with supervisor = in_process")),
        "<= 3.8",
        "median of 3; 1,000 sequential `herd run --notify` processes, then `herd events` until all drained",
    );
    match pueue_1000() {
        Some(pueue) => report(
            "cli.notify_1000_vs_pueue",
            "x faster",
            pueue / herd,
            None,
            ">= 10",
            &format!(
                "pueue 4 doing the same in this run (1,000 `pueue add -- true`, 16 parallel, then `pueue wait`): {pueue:.1} s against herd's {herd:.2} s"
            ),
        ),
        None => report(
            "cli.notify_1000_vs_pueue",
            "x faster",
            f64::NAN,
            None,
            ">= 10",
            "not measured: no pueue and pueued on PATH or in $HERD_BENCH_PUEUE_DIR (`cargo install pueue --version 4.0.4 --locked`)",
        ),
    }
}

/// `pueue` and `pueued` from `$HERD_BENCH_PUEUE_DIR`, else from `PATH`.
fn pueue_bin(name: &str) -> Option<PathBuf> {
    let dirs = std::env::var_os("HERD_BENCH_PUEUE_DIR")
        .into_iter()
        .chain(std::env::var_os("PATH"))
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>());
    dirs.map(|d| d.join(name)).find(|p| p.is_file())
}

/// 1,000 `pueue add -- true` against a private pueued with 16 parallel slots, then
/// `pueue wait`: seconds, or `None` when pueue is not installed.
fn pueue_1000() -> Option<f64> {
    let (client, daemon) = (pueue_bin("pueue")?, pueue_bin("pueued")?);
    let dir = tempfile::tempdir().ok()?;
    let root = dir.path();
    let config = root.join("config.yml");
    std::fs::write(
        &config,
        format!(
            "shared:\n  pueue_directory: {0}/data\n  runtime_directory: {0}/run\n  use_unix_socket: true\n  unix_socket_path: {0}/run/pueue.socket\n",
            root.display()
        ),
    )
    .ok()?;
    for sub in ["data", "run"] {
        std::fs::create_dir_all(root.join(sub)).ok()?;
    }
    let mut pueued = raw_command(&daemon)
        .arg("--config")
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    let socket = root.join("run/pueue.socket");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !socket.exists() && Instant::now() < deadline {
        std::thread::park_timeout(Duration::from_millis(10));
    }
    let pueue = |args: &[&str]| {
        raw_command(&client)
            .arg("--config")
            .arg(&config)
            .args(args)
            .env("NO_COLOR", "1")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    let measured = (|| {
        if !pueue(&["parallel", "16"]) {
            return None;
        }
        let start = Instant::now();
        for _ in 0..1000 {
            if !pueue(&["add", "--", "true"]) {
                return None;
            }
        }
        pueue(&["wait"]).then(|| start.elapsed().as_secs_f64())
    })();
    let _ = pueue(&["shutdown"]);
    let _ = pueued.kill();
    let _ = pueued.wait();
    measured
}

struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    next: u64,
}

impl Conn {
    fn open(home: &Home) -> Conn {
        let stream = UnixStream::connect(home.root.join("run/herd.sock")).expect("socket");
        let mut conn = Conn {
            reader: BufReader::new(stream.try_clone().expect("clone")),
            writer: stream,
            next: 0,
        };
        conn.call("hello", json!({"protocol": 1, "client": "bench"}));
        conn
    }

    fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let request =
            json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        self.writer
            .write_all(format!("{request}\n").as_bytes())
            .expect("write");
        let mut line = String::new();
        self.reader.read_line(&mut line).expect("read");
        let answer: Value = serde_json::from_str(&line).expect("json");
        assert!(answer["error"].is_null(), "{answer}");
        answer["result"].clone()
    }
}

/// One run: the time for 1,000 spawns, and the daemon's RSS (MB) once they finished.
fn spawn_1000_once() -> (f64, f64, usize) {
    let home = Home::new("finished_cap = 2000\n");
    home.out(&["ps"]);
    let mut conn = Conn::open(&home);
    let start = Instant::now();
    for _ in 0..1000 {
        conn.call("spawn", json!({"command": "true", "owner": "bench"}));
    }
    let elapsed = start.elapsed().as_secs_f64();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let running = conn.call("list", json!({"owner": "bench"}))["processes"]
            .as_array()
            .map_or(0, Vec::len);
        if running == 0 || Instant::now() > deadline {
            break;
        }
        std::thread::park_timeout(Duration::from_millis(20));
    }
    let finished = conn.call("list", json!({"all": true}))["processes"]
        .as_array()
        .map_or(0, Vec::len);
    let status = std::fs::read_to_string(format!("/proc/{}/status", home.daemon_pid()))
        .expect("proc status");
    let rss_kb: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS");
    (elapsed, rss_kb / 1024.0, finished)
}

fn spawn_1000_and_rss() {
    let runs: Vec<(f64, f64, usize)> = (0..3).map(|_| spawn_1000_once()).collect();
    report(
        "cli.spawn_1000_one_connection",
        "s",
        median(runs.iter().map(|r| r.0).collect()),
        None,
        "<= 1.3",
        "median of 3; sequential request/answer on one connection",
    );
    report(
        "cli.daemon_rss_1000_finished",
        "MB",
        median(runs.iter().map(|r| r.1).collect()),
        None,
        "<= 38",
        &format!("median of 3; {} finished sessions held", runs[0].2),
    );
}

fn main() {
    run_wait_roundtrip();
    client_start();
    spawn_1000_and_rss();
    notify_1000();
}
