//! The job queue against pueue 4.0.4 in the same run.
//!
//! Figures (one `herd-bench` line each, read by `cargo xtask bench`):
//! - `queue.jobs1000_parallel16`: 1,000 jobs of `true` submitted one CLI call each
//!   (`herd run --group bench -- true`) into a group of parallel 16, from the first
//!   submission until every one has finished, seconds; the baseline is pueue doing
//!   the same (`pueue add --group bench -- true` each, a group of parallel 16,
//!   `pueue wait --group bench`) when `pueue` is on PATH or in ~/.cargo/bin,
//!   skipped with a printed reason otherwise;
//! - `queue.protocol_jobs1000_parallel16`: the same 1,000 jobs sent as `spawn`s on
//!   one socket connection, seconds (no process per submission);
//! - `queue.latency_p50` (µs; p99 in the note): from a slot of the group freeing
//!   (a job finishing) to the next queued job's process started, measured by the
//!   daemon over the runs above (`queue.latency`).
//!
//! `HERD_BENCH_QUEUE_JOBS` sets another job count.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use herd_test_support::bench::{Conn, figure_line};
use herd_test_support::home::{TempHome, command, herd, stop_daemon};
use herd_test_support::wait::poll_until;
use serde_json::json;

const HERD: &str = env!("CARGO_BIN_EXE_herd");
const PARALLEL: u64 = 16;

fn jobs() -> usize {
    std::env::var("HERD_BENCH_QUEUE_JOBS")
        .ok()
        .and_then(|n| n.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(1_000)
}

fn ok(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Waits (polling `group.list`, a bench's pause, not a test's) until the group
/// `bench` has nothing queued or running.
fn herd_drained(home: &Path) {
    let mut conn = Conn::open(home);
    poll_until(Duration::from_secs(600), || {
        let groups = conn.call("group.list", json!({}));
        groups["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|g| g["name"] == "bench")
            .all(|g| g["queued"] == 0 && g["running"] == 0)
    })
    .unwrap_or_else(|_| panic!("the group did not drain within 10 minutes"));
}

/// 1,000 jobs through a parallel-16 group, one CLI call each; seconds.
fn herd_cli(n: usize) -> f64 {
    let dir = TempHome::new("herd-bench-queue", "home");
    let home = dir.home().to_owned();
    let run = |args: &[&str]| {
        let mut cmd = herd(Path::new(HERD), &home);
        cmd.args(args).stdout(Stdio::null());
        cmd
    };
    ok(
        run(&["group", "add", "bench", "--parallel", "16"]),
        "herd group add",
    );
    let began = Instant::now();
    for _ in 0..n {
        ok(run(&["run", "--group", "bench", "--", "true"]), "herd run");
    }
    herd_drained(&home);
    let secs = began.elapsed().as_secs_f64();
    stop_daemon(
        &home,
        Duration::from_secs(10),
        &mut run(&["shutdown", "--yes"]),
    );
    secs
}

/// The same through the protocol on one connection; seconds, and the daemon's
/// scheduling latency `(p50 µs, p99 µs)`.
fn herd_protocol(n: usize) -> (f64, u64, u64) {
    let dir = TempHome::new("herd-bench-queue", "home");
    let home = dir.home().to_owned();
    let mut start = herd(Path::new(HERD), &home);
    start.args(["ps"]).stdout(Stdio::null());
    ok(start, "herd ps");
    let mut conn = Conn::open(&home);
    conn.call("group.add", json!({"name": "bench", "parallel": PARALLEL}));
    let cwd = std::env::temp_dir();
    let began = Instant::now();
    for _ in 0..n {
        conn.call(
            "spawn",
            json!({"command": "true", "owner": "bench", "group": "bench", "cwd": cwd}),
        );
    }
    herd_drained(&home);
    let secs = began.elapsed().as_secs_f64();
    let latency = conn.call("queue.latency", json!({}));
    let mut stop = herd(Path::new(HERD), &home);
    stop.args(["shutdown", "--yes"]);
    stop_daemon(&home, Duration::from_secs(10), &mut stop);
    (
        secs,
        latency["p50_us"].as_u64().unwrap_or(0),
        latency["p99_us"].as_u64().unwrap_or(0),
    )
}

/// pueue's binary: on PATH, else ~/.cargo/bin.
fn pueue_bin() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("pueue"))
            .find(|p| p.is_file())
    });
    on_path.or_else(|| {
        let home = std::env::var_os("HOME")?;
        let p = PathBuf::from(home).join(".cargo/bin/pueue");
        p.is_file().then_some(p)
    })
}

/// The same through pueue (its own daemon, config and socket in a temp dir);
/// seconds and pueue's version.
fn pueue(bin: &Path, n: usize) -> (f64, String) {
    let dir = TempHome::new("herd-bench-pueue", "pueue");
    let root = dir.home().to_owned();
    let config = root.join("pueue.yml");
    std::fs::write(
        &config,
        format!(
            "shared:\n  pueue_directory: {0}\n  runtime_directory: {0}\n  use_unix_socket: true\n  unix_socket_path: {0}/pueue.socket\ndaemon:\n  default_parallel_tasks: 1\n",
            root.display()
        ),
    )
    .expect("pueue config");
    let daemon_bin = bin.with_file_name("pueued");
    let mut daemon: Child = command(&daemon_bin)
        .args(["-c"])
        .arg(&config)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("pueued starts");
    let pueue = |args: &[&str]| {
        let mut cmd = command(bin);
        cmd.arg("-c").arg(&config).args(args).stdout(Stdio::null());
        cmd
    };
    poll_until(Duration::from_secs(20), || {
        pueue(&["status"])
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
    .unwrap_or_else(|_| panic!("pueued did not answer within 20 s"));
    let version = command(bin)
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    ok(
        pueue(&["group", "add", "bench", "--parallel", "16"]),
        "pueue group add",
    );
    let began = Instant::now();
    for _ in 0..n {
        ok(
            pueue(&["add", "--group", "bench", "--", "true"]),
            "pueue add",
        );
    }
    ok(
        pueue(&["wait", "--group", "bench", "--quiet"]),
        "pueue wait",
    );
    let secs = began.elapsed().as_secs_f64();
    let _ = pueue(&["shutdown"]).status();
    if daemon.try_wait().ok().flatten().is_none() {
        let _ = daemon.kill();
    }
    let _ = daemon.wait();
    (secs, version)
}

fn main() {
    let n = jobs();
    let herd_secs = herd_cli(n);
    let baseline = match pueue_bin() {
        Some(bin) => {
            let (secs, version) = pueue(&bin, n);
            Some((secs, version))
        }
        None => {
            println!(
                "queue: pueue skipped: no pueue on PATH or in ~/.cargo/bin (cargo install pueue --version 4.0.4)"
            );
            None
        }
    };
    let note = format!("{n} jobs of `true`, one CLI call each, group parallel {PARALLEL}");
    println!(
        "{}",
        figure_line(
            &format!("queue.jobs{n}_parallel{PARALLEL}"),
            "s",
            herd_secs,
            baseline.as_ref().map(|(s, v)| (*s, v.as_str())),
            Some("<= 1.0 (ratio to pueue)"),
            &note,
        )
    );
    let (proto_secs, p50, p99) = herd_protocol(n);
    println!(
        "{}",
        figure_line(
            &format!("queue.protocol_jobs{n}_parallel{PARALLEL}"),
            "s",
            proto_secs,
            None,
            None,
            &format!("{n} spawns with group on one connection"),
        )
    );
    #[allow(clippy::cast_precision_loss, reason = "microseconds fit an f64")]
    let p50_f = p50 as f64;
    println!(
        "{}",
        figure_line(
            "queue.latency_p50",
            "us",
            p50_f,
            None,
            None,
            &format!("slot freed to the next queued job's process started; p99 {p99} us"),
        )
    );
}
