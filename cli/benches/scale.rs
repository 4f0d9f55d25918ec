//! Many concurrent sessions: one daemon holding 10,000 running jobs.
//!
//! Figures (one `herd-bench` line each, read by `cargo xtask bench`):
//! - `cli.sessions_10000_new_job_p99`: the p99 of a new job's `spawn` (request to
//!   answer, 200 jobs of `true` on one connection) while the daemon holds the
//!   running sessions, against the same on the same daemon before it held any
//!   (target <= 25 ms);
//! - `cli.sessions_10000_ps`: `herd ps` (a client process listing every running
//!   session as its table) with them, against `herd ps` of the empty daemon
//!   before (target <= 200 ms);
//! - `cli.sessions_10000_ps_json`: `herd ps --json` (every field, the trees' CPU
//!   and memory too) the same way (target <= 200 ms);
//! - `cli.sessions_10000_rss`: the daemon's RSS with them, against the same
//!   daemon empty (reported, no target); the note has the descriptors it holds;
//! - `cli.sessions_10000_rss_after_listings`: the daemon's RSS after the 200 probe
//!   spawns and the ten listings above, once it has stopped falling (the daemon
//!   gives the heap's freed pages back after a large answer, within a second),
//!   against its RSS with the sessions before them (reported, no target);
//! - `cli.sessions_10000_shutdown`: `herd shutdown --yes` with them until the
//!   daemon is gone (reported, no target); the note has the most threads and RSS
//!   the daemon had meanwhile (a burst of finishes on the blocking pool shows there).
//!
//! Every figure's note has the fill's spawn latencies (p50, p99 and the slowest,
//! of all, of the first tenth and of the last tenth).
//!
//! The jobs are `sleep 600` of owner `cli` (the one `herd ps` lists), started by 8
//! socket clients at once, and every one
//! is killed with the daemon at the end (`shutdown`, then a check that no job of
//! the home's is left). The count is `HERD_BENCH_SESSIONS` (default 10,000),
//! scaled down, with the reason in the note, when this process's descriptor
//! limit or the system's free pids cannot hold it (a job and its shim are two
//! processes; the daemon holds one descriptor per silent session).
//!
//! `HERD_BENCH_ONLY=<substring>[,<substring>...]` runs only the figures whose name
//! contains one of them. `HERD_BENCH_HERD=<path>` runs another build's `herd` (its
//! `herd-shim` beside it), so two builds are compared by one bench binary.
//! `HERD_BENCH_HOLD=<file>` keeps the full daemon up after the figures: the home
//! and the daemon's pid are written to the file, and the bench ends once it is
//! removed (to profile the daemon by hand).

#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herd_test_support::bench::{Conn, figure_line, median, spread};
use herd_test_support::home::{TempHome, daemon_pid, herd, stop_daemon};
use serde_json::json;

const HERD: &str = env!("CARGO_BIN_EXE_herd");
const DEFAULT_SESSIONS: usize = 10_000;
const FILLERS: usize = 8;
const PROBES: usize = 200;

/// A temporary home whose daemon, and every job in it, is stopped on drop.
struct Home {
    dir: TempHome,
    root: PathBuf,
}

impl Home {
    fn new() -> Home {
        let dir = TempHome::new_in(None, "herd-bench", "h");
        let root = dir.home().to_owned();
        std::fs::write(root.join("config.toml"), "max_connections = 64\n").expect("config");
        Home { dir, root }
    }

    fn herd(&self, args: &[&str]) -> Command {
        let mut cmd = herd(&herd_program(), self.dir.home());
        cmd.args(args).stderr(Stdio::inherit());
        cmd
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // Stopping thousands of jobs takes a while: each shim ends its own.
        stop_daemon(
            &self.root,
            Duration::from_secs(300),
            &mut self.herd(&["shutdown", "--yes"]),
        );
    }
}

/// The `herd` measured: `HERD_BENCH_HERD`, else this build's.
fn herd_program() -> PathBuf {
    std::env::var_os("HERD_BENCH_HERD").map_or_else(|| PathBuf::from(HERD), PathBuf::from)
}

/// How many sessions this machine can hold now, and why fewer than asked.
fn sessions_to_hold() -> (usize, String) {
    let asked = std::env::var("HERD_BENCH_SESSIONS")
        .ok()
        .and_then(|n| n.parse::<usize>().ok())
        .filter(|n| (1..=100_000).contains(n))
        .unwrap_or(DEFAULT_SESSIONS);
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    // The daemon inherits this process's limits (it raises its soft limit to the
    // hard one itself).
    let (_, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    // The daemon holds one descriptor per silent session (its shim's socket; a
    // session that printed holds its log file too), plus some of its own.
    let by_fds = usize::try_from(hard.saturating_sub(1_024)).unwrap_or(usize::MAX);
    let pid_max: usize = std::fs::read_to_string("/proc/sys/kernel/pid_max")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(32_768);
    let running = std::fs::read_dir("/proc")
        .map(|d| {
            d.filter(|e| {
                e.as_ref()
                    .is_ok_and(|e| e.file_name().to_string_lossy().parse::<u32>().is_ok())
            })
            .count()
        })
        .unwrap_or(0);
    let by_pids = pid_max.saturating_sub(running + 2_000) / 2;
    let can = asked.min(by_fds).min(by_pids);
    let why = if can < asked {
        format!(
            "; SCALED DOWN from {asked}: descriptors (hard limit {hard}) hold {by_fds}, free pids ({pid_max} max, {running} in use) hold {by_pids}"
        )
    } else {
        String::new()
    };
    (can, why)
}

/// Milliseconds of each of `PROBES` spawns of `true` on one connection.
fn probe_spawns(root: &Path) -> Vec<f64> {
    let mut conn = Conn::open(root);
    (0..PROBES)
        .map(|_| {
            let start = Instant::now();
            conn.call("spawn", json!({"command": "true", "owner": "probe"}));
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

fn p99(mut samples: Vec<f64>) -> f64 {
    samples.sort_by(f64::total_cmp);
    samples[(samples.len() - 1) * 99 / 100]
}

/// Milliseconds of each of 5 runs of `herd ps` with `args`.
fn ps_runs(home: &Home, args: &[&str]) -> Vec<f64> {
    (0..5)
        .map(|_| {
            let start = Instant::now();
            let status = home
                .herd(args)
                .stdout(Stdio::null())
                .status()
                .expect("herd ps");
            assert!(status.success(), "herd ps failed");
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect()
}

/// How many descriptors process `pid` holds.
fn descriptors(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// A number field (`VmRSS:`, `Threads:`) of process `pid`'s status.
fn status_field(pid: i32, field: &str) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("proc status");
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("a status field")
}

fn rss_mb(pid: i32) -> f64 {
    status_field(pid, "VmRSS:") / 1024.0
}

/// Process `pid`'s RSS in MB once it has not fallen for 1.5 s (at most 15 s).
fn settled_rss_mb(pid: i32) -> f64 {
    let start = Instant::now();
    let mut low = rss_mb(pid);
    let mut low_at = Instant::now();
    while low_at.elapsed() < Duration::from_millis(1500)
        && start.elapsed() < Duration::from_secs(15)
    {
        std::thread::park_timeout(Duration::from_millis(100));
        let now = rss_mb(pid);
        if now < low - 0.5 {
            low = now;
            low_at = Instant::now();
        }
    }
    low
}

/// Keeps the daemon up while `HERD_BENCH_HOLD`'s file exists.
fn hold(home: &Home, daemon: i32) {
    let Some(file) = std::env::var_os("HERD_BENCH_HOLD") else {
        return;
    };
    let file = PathBuf::from(file);
    std::fs::write(
        &file,
        format!("HERD_HOME={} pid={daemon}\n", home.root.display()),
    )
    .expect("the hold file");
    while file.exists() {
        #[expect(
            clippy::disallowed_methods,
            reason = "a person removes the file; nothing to wait on"
        )]
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Starts `n` `sleep 600` jobs from `FILLERS` connections at once (each waits for
/// its spawn's answer before the next: `FILLERS` in flight, as that many clients
/// would); seconds, and the milliseconds of each spawn in the order they began.
fn fill(root: &Path, n: usize) -> (f64, Vec<f64>) {
    let start = Instant::now();
    let threads: Vec<_> = (0..FILLERS)
        .map(|i| {
            let root = root.to_owned();
            let share = n / FILLERS + usize::from(i < n % FILLERS);
            std::thread::spawn(move || {
                let mut conn = Conn::open(&root);
                (0..share)
                    .map(|_| {
                        let began = start.elapsed().as_secs_f64();
                        conn.call("spawn", json!({"command": "sleep 600", "owner": "cli"}));
                        (began, start.elapsed().as_secs_f64() - began)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let mut spawns: Vec<(f64, f64)> = threads
        .into_iter()
        .flat_map(|t| t.join().expect("a filler"))
        .collect();
    spawns.sort_by(|a, b| a.0.total_cmp(&b.0));
    let ms = spawns.into_iter().map(|(_, took)| took * 1e3).collect();
    (start.elapsed().as_secs_f64(), ms)
}

/// The fill's spawns as a note: p50, p99 and the slowest, of the first and of
/// the last tenth (whether a spawn slows as the sessions grow).
fn fill_note(ms: &[f64]) -> String {
    let tenth = (ms.len() / 10).max(1);
    let part = |samples: &[f64]| {
        let mut s = samples.to_vec();
        s.sort_by(f64::total_cmp);
        format!(
            "p50 {:.1}, p99 {:.1}, max {:.1} ms",
            s[s.len() / 2],
            s[(s.len() - 1) * 99 / 100],
            s[s.len() - 1]
        )
    };
    format!(
        "fill spawns: all {}; first tenth {}; last tenth {}",
        part(ms),
        part(&ms[..tenth.min(ms.len())]),
        part(&ms[ms.len().saturating_sub(tenth)..])
    )
}

/// Stops the daemon with `shutdown` (every job of the home with it) and waits for
/// it to be gone: seconds, and the most threads and RSS (MB) it had meanwhile.
fn shut_down(home: &Home, daemon: i32) -> (f64, f64, f64) {
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let sampling = std::sync::Arc::clone(&sampling);
        std::thread::spawn(move || {
            let (mut threads, mut rss) = (0.0_f64, 0.0_f64);
            while sampling.load(std::sync::atomic::Ordering::SeqCst) {
                let Ok(status) = std::fs::read_to_string(format!("/proc/{daemon}/status")) else {
                    break;
                };
                let field = |name: &str| {
                    status
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .and_then(|v| v.split_whitespace().next())
                        .and_then(|v| v.parse::<f64>().ok())
                        .unwrap_or(0.0)
                };
                threads = threads.max(field("Threads:"));
                rss = rss.max(field("VmRSS:") / 1024.0);
                #[expect(
                    clippy::disallowed_methods,
                    reason = "a sampling period, not a wait for a condition"
                )]
                std::thread::sleep(Duration::from_millis(20));
            }
            (threads, rss)
        })
    };
    let start = Instant::now();
    let status = home
        .herd(&["shutdown", "--yes"])
        .stdout(Stdio::null())
        .status()
        .expect("herd shutdown");
    assert!(status.success(), "herd shutdown failed");
    herd_test_support::wait::poll_until(Duration::from_secs(300), || {
        !herd_test_support::procs::alive(daemon)
    })
    .expect("the daemon stops");
    let secs = start.elapsed().as_secs_f64();
    sampling.store(false, std::sync::atomic::Ordering::SeqCst);
    let (threads, rss) = sampler.join().expect("the sampler");
    (secs, threads, rss)
}

fn sessions() {
    let (n, scaled) = sessions_to_hold();
    let home = Home::new();
    let ps = home.herd(&["ps"]).stdout(Stdio::null()).status();
    assert!(ps.is_ok_and(|s| s.success()), "the daemon starts");
    let daemon = daemon_pid(&home.root).expect("pid file");
    let rss_empty = rss_mb(daemon);
    let idle_spawns = probe_spawns(&home.root);
    let idle_ps = ps_runs(&home, &["ps"]);
    let idle_json = ps_runs(&home, &["ps", "--json"]);
    let fds_empty = descriptors(daemon);
    let (fill_s, fill_ms) = fill(&home.root, n);
    let mut conn = Conn::open(&home.root);
    let running = conn.call("list", json!({"owner": "cli"}))["processes"]
        .as_array()
        .map_or(0, Vec::len);
    assert_eq!(running, n, "every filler job runs");
    let rss_full = rss_mb(daemon);
    let full_spawns = probe_spawns(&home.root);
    let fds_full = descriptors(daemon);
    let full_ps = ps_runs(&home, &["ps"]);
    let full_json = ps_runs(&home, &["ps", "--json"]);
    let rss_after = rss_mb(daemon);
    let rss_settled = settled_rss_mb(daemon);
    let threads = status_field(daemon, "Threads:");
    let note = format!(
        "{n} running `sleep 600` sessions (started by {FILLERS} clients in {fill_s:.1} s; {}); daemon RSS {rss_full:.0} MB with them, {rss_empty:.0} MB empty; {PROBES} spawns of `true` on one connection each way{scaled}",
        fill_note(&fill_ms)
    );
    println!(
        "{}",
        figure_line(
            "cli.sessions_10000_new_job_p99",
            "ms",
            p99(full_spawns.clone()),
            Some((
                p99(idle_spawns.clone()),
                "the same spawns on the same daemon holding no session, before",
            )),
            Some("<= 25"),
            &format!(
                "{note}; medians {:.1} ms with them, {:.1} ms without",
                median(full_spawns),
                median(idle_spawns)
            ),
        )
    );
    println!(
        "{}",
        figure_line(
            "cli.sessions_10000_ps",
            "ms",
            median(full_ps.clone()),
            Some((
                median(idle_ps),
                "`herd ps` of the same daemon empty, before"
            )),
            Some("<= 200"),
            &format!("{note}; median of 5 (spread {} ms)", spread(&full_ps, 0)),
        )
    );
    println!(
        "{}",
        figure_line(
            "cli.sessions_10000_ps_json",
            "ms",
            median(full_json.clone()),
            Some((
                median(idle_json),
                "`herd ps --json` of the same daemon empty, before"
            )),
            Some("<= 200"),
            &format!("{note}; median of 5 (spread {} ms)", spread(&full_json, 0)),
        )
    );
    println!(
        "{}",
        figure_line(
            "cli.sessions_10000_rss",
            "MB",
            rss_full,
            Some((rss_empty, "the same daemon holding no session, before")),
            None,
            &format!(
                "{note}; the daemon held {fds_full} descriptors with them, {fds_empty} empty ({:.2} a session); {rss_after:.0} MB and {threads} threads after the probes and the 10 listings",
                (fds_full.saturating_sub(fds_empty)) as f64 / n as f64
            ),
        )
    );
    println!(
        "{}",
        figure_line(
            "cli.sessions_10000_rss_after_listings",
            "MB",
            rss_settled,
            Some((
                rss_full,
                "the same daemon with the sessions, before the probes and listings"
            )),
            None,
            &format!(
                "{note}; {rss_after:.0} MB right after the last of 5 `herd ps` and 5 `herd ps --json`, {rss_settled:.0} MB once it stopped falling"
            ),
        )
    );
    hold(&home, daemon);
    drop(conn);
    let (stop_s, stop_threads, stop_rss) = shut_down(&home, daemon);
    println!(
        "{}",
        figure_line(
            "cli.sessions_10000_shutdown",
            "s",
            stop_s,
            None,
            None,
            &format!(
                "`herd shutdown --yes` of the daemon holding {n} running sessions until it is gone (every job stopped); the daemon's most threads {stop_threads:.0} and RSS {stop_rss:.0} MB meanwhile (sampled every 20 ms){scaled}"
            ),
        )
    );
    drop(home);
}

fn main() {
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|part| !part.is_empty() && name.contains(part))
    };
    if wanted("cli.sessions_10000") {
        sessions();
    }
}
