//! Load benchmarks of the daemon over its socket.
//!
//! Figures (one `herd-bench` line each, read by `cargo xtask bench`):
//! - `cli.clients50x40_vs_raw`: 50 socket clients, each on its own thread and
//!   connection, each doing 40 `spawn` of `true` + `wait` in turn (2,000 jobs),
//!   against 50 threads in one process each spawning and reaping `true` 40 times in
//!   the same run; value and baseline in jobs/s, so the ratio is herd's rate over
//!   the raw one (target >= 0.3). Median of 3 runs alternating; the note gives the
//!   spread, herd's per-job p50/p99 latency and the paired ratios.
//!
//! `HERD_BENCH_ONLY=<substring>[,<substring>...]` runs only the figures whose name
//! contains one of them. `HERD_BENCH_BIN=<path to herd>` measures that binary (with
//! its `herd-shim` beside it) instead of the one Cargo built: two builds compared by
//! one harness, run after run.

#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herd_test_support::bench::{Conn, figure_line, median, spread};
use herd_test_support::home::{TempHome, command, herd, stop_daemon};
use serde_json::json;

const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// The herd binary measured: `HERD_BENCH_BIN`, or the one Cargo built.
fn herd_bin() -> PathBuf {
    std::env::var_os("HERD_BENCH_BIN").map_or_else(|| PathBuf::from(HERD), PathBuf::from)
}
const CLIENTS: usize = 50;
const JOBS_EACH: usize = 40;
const RUNS: usize = 3;

/// A temporary home whose daemon is shut down on drop.
struct Home {
    dir: TempHome,
    root: PathBuf,
}

impl Home {
    fn new(config: &str) -> Home {
        let dir = TempHome::new_in(None, "herd-bench", "h");
        let root = dir.home().to_owned();
        std::fs::write(root.join("config.toml"), config).expect("config");
        Home { dir, root }
    }

    fn herd(&self, args: &[&str]) -> Command {
        let mut cmd = herd(&herd_bin(), self.dir.home());
        cmd.args(args).stderr(Stdio::inherit());
        cmd
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        stop_daemon(
            &self.root,
            Duration::from_secs(5),
            &mut self.herd(&["shutdown", "--yes"]),
        );
    }
}

/// One herd run: seconds for all jobs, and every job's spawn+wait latency (ms).
fn herd_once() -> (f64, Vec<f64>) {
    let home = Home::new("finished_cap = 5000\n");
    let ps = home.herd(&["ps"]).stdout(Stdio::null()).status();
    assert!(ps.is_ok_and(|s| s.success()), "the daemon starts");
    let conns: Vec<Conn> = (0..CLIENTS).map(|_| Conn::open(&home.root)).collect();
    let start = Instant::now();
    let threads: Vec<_> = conns
        .into_iter()
        .enumerate()
        .map(|(i, mut conn)| {
            std::thread::spawn(move || {
                let owner = format!("bench-{i}");
                let mut latencies = Vec::with_capacity(JOBS_EACH);
                for _ in 0..JOBS_EACH {
                    let t = Instant::now();
                    let info = conn.call("spawn", json!({"command": "true", "owner": owner}));
                    let id = info["session_id"].as_str().expect("session_id").to_owned();
                    let ended = conn.call("wait", json!({"id": id, "timeout_seconds": 60}));
                    assert_eq!(ended["exit_code"], 0, "{ended}");
                    latencies.push(t.elapsed().as_secs_f64() * 1e3);
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::new();
    for t in threads {
        latencies.extend(t.join().expect("a client thread"));
    }
    (start.elapsed().as_secs_f64(), latencies)
}

/// One raw run: 50 threads each spawning and reaping `true` 40 times; seconds.
fn raw_once() -> f64 {
    let start = Instant::now();
    let threads: Vec<_> = (0..CLIENTS)
        .map(|_| {
            std::thread::spawn(|| {
                for _ in 0..JOBS_EACH {
                    let status = command(Path::new("true")).status().expect("true runs");
                    assert!(status.success());
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a raw thread");
    }
    start.elapsed().as_secs_f64()
}

fn clients50x40() {
    let jobs = (CLIENTS * JOBS_EACH) as f64;
    let (mut herds, mut raws, mut all) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..RUNS {
        raws.push(raw_once());
        let (secs, latencies) = herd_once();
        herds.push(secs);
        all.extend(latencies);
    }
    all.sort_by(f64::total_cmp);
    let p = |q: f64| all[((all.len() - 1) as f64 * q) as usize];
    let ratios = herd_test_support::bench::paired_ratios(&raws, &herds);
    let (herd_s, raw_s) = (median(herds.clone()), median(raws.clone()));
    let figure = figure_line(
        "cli.clients50x40_vs_raw",
        "jobs/s",
        jobs / herd_s,
        Some((
            jobs / raw_s,
            "50 threads spawning and reaping `true` 40 times each, same run",
        )),
        Some(">= 0.3"),
        &format!(
            "{CLIENTS} socket clients x {JOBS_EACH} spawn+wait of `true`; median of {RUNS} runs alternating: herd {herd_s:.2} s (spread {} s), raw {raw_s:.2} s (spread {} s), paired ratios raw/herd {}; herd spawn+wait latency p50 {:.1} ms, p99 {:.1} ms",
            spread(&herds, 2),
            spread(&raws, 2),
            spread(&ratios, 3),
            p(0.5),
            p(0.99),
        ),
    );
    println!("{figure}");
}

fn main() {
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|part| !part.is_empty() && name.contains(part))
    };
    if wanted("cli.clients50x40_vs_raw") {
        clients50x40();
    }
}
