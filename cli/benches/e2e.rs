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
//! - `cli.run_wait_one_client`: `herd run --wait -- true`, one client process that
//!   starts the job, follows it and ends with its exit, against `bash -c
//!   true` in the same run (target <= 2x); the note gives the medians of five blocks
//!   of 40 as a spread;
//! - `cli.run_wait_vs_floor`: the same runs against the floor below, each round
//!   paired with one floor sample (target <= 1.3); the note gives the
//!   spread of the paired ratios over the five blocks;
//! - `cli.run_wait_floor`: `herd --version` then `/usr/bin/true`, each spawned and
//!   reaped, against `bash -c true` in the same run: the two process starts a
//!   `run --wait` cannot avoid (the client and the job; bash runs `true` as a
//!   builtin), so the part of the figure above it is herd's own;
//! - `cli.client_start`: `herd --version` against `bash -c true`: the start-up of
//!   one client process, the floor under every CLI figure (a round trip starts two);
//! - `cli.client_page_faults`: the page faults of one `herd run --notify -- true`
//!   client process (median of 40, from the reaped children's resource usage)
//!   against `/usr/bin/true`'s: how much of the binary a client touches, which the
//!   client functions' placement (`cli/link/client-order.txt`) keeps small; a
//!   count, so it moves only when the code or its layout does (no target);
//! - `cli.notify_1000`: 1,000 separate `herd run --notify -- true` processes, then
//!   every completion drained through `herd events` (target <= 3.8 s);
//! - `cli.spawn_1000_one_connection`: 1,000 `spawn` requests on one socket
//!   connection (target <= 1.3 s);
//! - `cli.daemon_rss_1000_finished`: the daemon's RSS holding 1,000 finished
//!   sessions (target <= 38 MB);
//! - `cli.logs_1gib_first_read_vs_cat`: `herd logs ID > /dev/null` of a finished
//!   job's 1 GiB log of realistic lines that the daemon has not read out before
//!   (each run writes a fresh log by the same writer, reads it once and cleans
//!   it: no memo of an earlier read-out exists), against `cat <log file> > /dev/null` in the same
//!   run, 3 runs each alternating; value and baseline in MB/s, so the ratio is
//!   cat's time over herd's (the target is >= 0.5); the home is on /dev/shm when
//!   there is one;
//! - `cli.logs_1gib_vs_cat`: the same log read again by a daemon that has read it
//!   out before (an untimed warm-up read that checks every byte comes out, then
//!   each run): what a repeat read costs, the daemon sending the stretches its
//!   memo found unchanged straight from the file;
//! - `cli.logs_follow_1gib_vs_cat`: the same repeat read with `herd logs --follow
//!   ID` on the finished session, paired with the same `cat` runs;
//! - `cli.logs_follow_growing_vs_pipe`: a log followed while it grows: `herd run`
//!   of the same writer (1 GiB) and `herd logs --follow` of its session until it
//!   ends, `> /dev/null`, against the writer piped straight into `cat > /dev/null`
//!   (the same bytes moved from the job to a reader with nothing between), 3 runs
//!   each alternating; the ratio is the pipe's time over herd's (target >= 0.5).
//!
//! The log figures halve the log until it fits in a quarter of the free space of
//! the home's filesystem (the note says when); the rest of this file's figures
//! need no space to speak of.
//!
//! `HERD_BENCH_ONLY=<substring>[,<substring>...]` runs only the figures whose name
//! contains one of them. `HERD_BENCH_BIN=<path to herd>` measures that binary (with
//! its `herd-shim` beside it) instead of the one Cargo built: two builds compared by
//! one harness, run after run.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herd_test_support::bench::{Conn, figure_line, median, paired_ratios, spread};
use herd_test_support::home::{TempHome, command, daemon_pid, herd, stop_daemon};
use serde_json::{Value, json};

const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// The binary measured: `HERD_BENCH_BIN`, else the one Cargo built.
fn herd_bin() -> PathBuf {
    std::env::var_os("HERD_BENCH_BIN").map_or_else(|| PathBuf::from(HERD), PathBuf::from)
}

/// A temporary home whose daemon is shut down on drop.
struct Home {
    dir: TempHome,
    root: PathBuf,
}

impl Home {
    fn new(config: &str) -> Home {
        Home::new_in(None, config)
    }

    /// A home under `parent` (the system's temp dir when `None`).
    fn new_in(parent: Option<&Path>, config: &str) -> Home {
        let dir = TempHome::new_in(parent, "herd-bench", "h");
        let root = dir.home().to_owned();
        std::fs::write(root.join("config.toml"), config).expect("config");
        Home { dir, root }
    }

    fn herd(&self, args: &[&str]) -> Command {
        let mut cmd = herd(&herd_bin(), self.dir.home());
        cmd.args(args).stderr(Stdio::inherit());
        cmd
    }

    fn out(&self, args: &[&str]) -> String {
        let out = self.herd(args).output().expect("herd runs");
        String::from_utf8(out.stdout).expect("utf-8")
    }

    fn daemon_pid(&self) -> i32 {
        daemon_pid(&self.root).expect("pid file")
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

/// A command for a baseline or the binary itself.
fn raw_command(program: &Path) -> Command {
    command(program)
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

fn run_wait_one_client() {
    let home = Home::new("");
    home.out(&["ps"]); // autostart outside the measurement
    let mut herd = Vec::new();
    let mut bash = Vec::new();
    let mut floor = Vec::new();
    let mut blocks = Vec::new();
    for _ in 0..5 {
        let mut block = Vec::new();
        for _ in 0..40 {
            let start = Instant::now();
            let status = home
                .herd(&["run", "--wait", "--", "true"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .expect("run --wait");
            let ms = start.elapsed().as_secs_f64() * 1e3;
            assert!(status.success());
            herd.push(ms);
            block.push(ms);
            bash.push(bash_true_ms());
            floor.push(two_starts_ms());
        }
        blocks.push(median(block));
    }
    let bash = median(bash);
    report(
        "cli.run_wait_one_client",
        "ms",
        median(herd.clone()),
        Some((bash, "spawn and reap bash -c true")),
        "<= 2.0",
        &format!(
            "median of 200; medians of 5 blocks of 40: {} ms; one client process",
            spread(&blocks, 2)
        ),
    );
    // What no supervisor can go under: the client and the job are two process
    // starts, where `bash -c true` is one (it runs `true` as a builtin).
    let floor_ms = median(floor.clone());
    let paired = paired_ratios(&herd, &floor);
    let block_ratios: Vec<f64> = paired.chunks(40).map(|c| median(c.to_vec())).collect();
    report(
        "cli.run_wait_vs_floor",
        "ms",
        median(herd.clone()),
        Some((
            floor_ms,
            "`herd --version` then `/usr/bin/true`, each spawned and reaped, same rounds",
        )),
        "<= 1.3",
        &format!(
            "median of 200 `herd run --wait -- true`, each round beside one floor sample; medians of the paired ratios in 5 blocks of 40: {}; the home on the ordinary disk (two commits: the spawn's row, the completion)",
            spread(&block_ratios, 2)
        ),
    );
    report(
        "cli.run_wait_floor",
        "ms",
        floor_ms,
        Some((bash, "spawn and reap bash -c true")),
        "",
        "median of 200 of `herd --version` then `/usr/bin/true`, each spawned and reaped: the two process starts of a run --wait with no daemon work",
    );
}

/// `herd --version` and then `/usr/bin/true`, each spawned and reaped, in
/// milliseconds.
fn two_starts_ms() -> f64 {
    let start = Instant::now();
    let client = raw_command(&herd_bin())
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .expect("herd --version");
    let job = raw_command(Path::new("/usr/bin/true"))
        .status()
        .expect("/usr/bin/true");
    let elapsed = start.elapsed().as_secs_f64() * 1e3;
    assert!(client.success() && job.success());
    elapsed
}

/// Minor page faults of this process's reaped children so far.
fn children_minor_faults() -> i64 {
    nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage")
        .minor_page_faults()
}

/// The median page faults of 40 runs of `cmd()`, each spawned and reaped.
fn median_faults(mut cmd: impl FnMut() -> Command) -> f64 {
    let faults = (0..40)
        .map(|_| {
            let before = children_minor_faults();
            let status = cmd().stdout(Stdio::null()).status().expect("spawn");
            assert!(status.success());
            (children_minor_faults() - before) as f64
        })
        .collect();
    median(faults)
}

fn client_page_faults() {
    let home = Home::new("finished_cap = 2000\n");
    home.out(&["ps"]);
    let client = median_faults(|| home.herd(&["run", "--notify", "--", "true"]));
    let floor = median_faults(|| raw_command(Path::new("/usr/bin/true")));
    report(
        "cli.client_page_faults",
        "faults",
        client,
        Some((floor, "/usr/bin/true, spawned and reaped")),
        "",
        "median of 40; page faults of one `herd run --notify -- true` client process (its start, the spawn's round trip, its exit)",
    );
}

fn client_start() {
    let mut herd = Vec::new();
    let mut bash = Vec::new();
    for _ in 0..40 {
        let start = Instant::now();
        let status = raw_command(&herd_bin())
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
        // A NaN figure would be a JSON null, which is no figure: a plain line says why.
        None => println!(
            "skipped cli.notify_1000_vs_pueue: no pueue and pueued in $HERD_BENCH_PUEUE_DIR, on PATH or in ~/.cargo/bin, or pueue failed (`cargo install pueue --version 4.0.4 --locked`)"
        ),
    }
}

/// `pueue` and `pueued` from `$HERD_BENCH_PUEUE_DIR`, else from `PATH`, else from
/// cargo's bin directory (where `cargo install` puts them).
fn pueue_bin(name: &str) -> Option<PathBuf> {
    let cargo_bin = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .map(|c| c.join("bin").into_os_string());
    let dirs = std::env::var_os("HERD_BENCH_PUEUE_DIR")
        .into_iter()
        .chain(std::env::var_os("PATH"))
        .chain(cargo_bin)
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

/// One run: the time for 1,000 spawns, and the daemon's RSS (MB) once they finished.
fn spawn_1000_once() -> (f64, f64, usize) {
    let home = Home::new("finished_cap = 2000\n");
    home.out(&["ps"]);
    let mut conn = Conn::open(&home.root);
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

/// The log figures' line: 75 characters and the newline `yes` adds.
const LOG_LINE: &str = "INFO 2026-12-01T10:00:00Z worker-3 processed batch 1234 in 56 ms status=ok";
const LOG_BYTES: u64 = 1 << 30;
const LOG_RUNS: usize = 3;

/// utime + stime of `pid` in seconds (its own, not its children's).
fn cpu_seconds(pid: i32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("proc stat");
    let fields: Vec<&str> = stat
        .rsplit(')')
        .next()
        .expect("stat has a command in parentheses")
        .split_whitespace()
        .collect();
    let ticks: f64 =
        fields[11].parse::<f64>().expect("utime") + fields[12].parse::<f64>().expect("stime");
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    ticks / hz
}

/// CPU seconds of this process's reaped children so far.
fn children_cpu() -> f64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    t(usage.user_time()) + t(usage.system_time())
}

fn dev_null() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null"),
    )
}

/// One timed run of `cmd` with stdout on /dev/null: (seconds, the child's CPU
/// seconds, the daemon's CPU seconds meanwhile).
fn timed_run(mut cmd: Command, daemon_pid: i32) -> (f64, f64, f64) {
    let daemon_before = cpu_seconds(daemon_pid);
    let children_before = children_cpu();
    let start = Instant::now();
    let status = cmd.stdout(dev_null()).status().expect("runs");
    let elapsed = start.elapsed().as_secs_f64();
    assert!(status.success(), "{cmd:?} failed: {status}");
    (
        elapsed,
        children_cpu() - children_before,
        cpu_seconds(daemon_pid) - daemon_before,
    )
}

/// Bytes `cmd` writes to stdout (the untimed warm-up that checks the output).
fn stdout_bytes(mut cmd: Command) -> u64 {
    let mut child = cmd.stdout(Stdio::piped()).spawn().expect("runs");
    let mut out = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 1 << 20];
    let mut n_bytes = 0u64;
    loop {
        match out.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n_bytes += n as u64,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => panic!("reading {cmd:?}: {e}"),
        }
    }
    let status = child.wait().expect("wait");
    assert!(status.success(), "{cmd:?} failed: {status}");
    n_bytes
}

/// Free bytes of the filesystem holding `path`.
fn free_bytes(path: &Path) -> u64 {
    let st = nix::sys::statvfs::statvfs(path).expect("statvfs");
    st.blocks_available() * st.fragment_size()
}

/// The per-run figures of one reader of the log against `cat`'s.
struct Reader {
    seconds: Vec<f64>,
    client_cpu: Vec<f64>,
    daemon_cpu: Vec<f64>,
}

impl Reader {
    fn new() -> Reader {
        Reader {
            seconds: Vec::new(),
            client_cpu: Vec::new(),
            daemon_cpu: Vec::new(),
        }
    }

    fn push(&mut self, (seconds, client, daemon): (f64, f64, f64)) {
        self.seconds.push(seconds);
        self.client_cpu.push(client);
        self.daemon_cpu.push(daemon);
    }
}

/// MB/s of `Redactor::redact` over the first 64 MiB of `log` in this process, in
/// the mode the daemon picks for `command`: a timing split, what the redactor alone
/// costs on the same text.
fn in_process_redaction(log: &Path, command: &str) -> f64 {
    let mut text = Vec::with_capacity(64 << 20);
    std::fs::File::open(log)
        .expect("the session log")
        .take(64 << 20)
        .read_to_end(&mut text)
        .expect("read the log");
    let text = String::from_utf8(text).expect("the log is ASCII");
    let redactor = herd_hooks::Redactor::builtin();
    let mode = herd_hooks::RedactMode::for_command(command);
    let samples = (0..3)
        .map(|_| {
            let start = Instant::now();
            let n_bytes = std::hint::black_box(redactor.redact(&text, mode)).len();
            assert_eq!(n_bytes, text.len(), "the log has no secrets");
            text.len() as f64 / 1e6 / start.elapsed().as_secs_f64()
        })
        .collect();
    median(samples)
}

/// The owner of the sessions whose logs `cli.logs_1gib_first_read_vs_cat` reads.
const FIRST_READ_OWNER: &str = "bench-first-read";

/// The owner of the sessions `cli.logs_follow_growing_vs_pipe` follows.
const GROWING_OWNER: &str = "bench-growing";

/// `herd run --owner GROWING_OWNER -- writer`, then `herd logs --follow` of its
/// session to its end, as one command (its stdout the followed log): what an agent
/// does to watch a job's output as it comes.
fn run_and_follow(home: &Home, writer: &str) -> Command {
    let mut cmd = raw_command(Path::new("bash"));
    cmd.arg("-c")
        .arg(r#"id=$("$0" run --owner "$1" -- "$2") && exec "$0" logs --follow "$id""#)
        .arg(herd_bin())
        .arg(GROWING_OWNER)
        .arg(writer);
    let with_home = home.herd(&[]);
    for (key, value) in with_home.get_envs() {
        match value {
            Some(value) => cmd.env(key, value),
            None => cmd.env_remove(key),
        };
    }
    cmd
}

/// The writer piped straight into `cat` (its stdout): the baseline of
/// `cli.logs_follow_growing_vs_pipe`.
fn writer_into_cat(writer: &str) -> Command {
    let mut cmd = raw_command(Path::new("bash"));
    cmd.arg("-c").arg(format!("{writer} | cat"));
    cmd
}

/// Runs `writer` (it writes `n_bytes`) as a job of `owner` (the CLI's by default)
/// and waits for it to finish: its session id, its log checked whole.
fn finished_log(home: &Home, writer: &str, n_bytes: u64, owner: Option<&str>) -> String {
    let mut args = vec!["run"];
    if let Some(owner) = owner {
        args.extend(["--owner", owner]);
    }
    args.extend(["--", writer]);
    let id = home.out(&args).trim().to_owned();
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let answer: Value =
            serde_json::from_str(&home.out(&["wait", &id, "--timeout", "170", "--json"]))
                .expect("wait answers JSON");
        if answer["status"] != "running" {
            assert_eq!(
                answer["exit_code"],
                json!(0),
                "the writer succeeded: {answer}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the writer did not finish: {answer}"
        );
    }
    let log = home.root.join("logs/sessions").join(format!("{id}.log"));
    assert_eq!(
        std::fs::metadata(&log).expect("the session log").len(),
        n_bytes,
        "the log holds all the output"
    );
    id
}

fn logs_vs_cat(with_first: bool, with_dump: bool, with_follow: bool, with_growing: bool) {
    let shm = Path::new("/dev/shm");
    let parent = shm.is_dir().then_some(shm);
    // The cap above the log, so the whole log is kept.
    let home = Home::new_in(parent, &format!("log_cap_bytes = {}\n", 2 * LOG_BYTES));
    let free = free_bytes(&home.root);
    let mut n_bytes = LOG_BYTES;
    while n_bytes > (64 << 20) && n_bytes > free / 4 {
        n_bytes /= 2;
    }
    let scaled = if n_bytes < LOG_BYTES {
        format!(
            "; SCALED DOWN to {} MiB: only {} MiB free where the home is",
            n_bytes >> 20,
            free >> 20
        )
    } else {
        String::new()
    };
    home.out(&["ps"]);
    let writer = format!("yes '{LOG_LINE}' | head -c {n_bytes}");
    let id = finished_log(&home, &writer, n_bytes, None);
    let log = home.root.join("logs/sessions").join(format!("{id}.log"));
    let daemon = home.daemon_pid();
    let cat = || {
        let mut cmd = raw_command(Path::new("cat"));
        cmd.arg(&log);
        cmd
    };
    // Warm-up, untimed: every byte comes out (the log has no secrets, so herd shows
    // it unchanged).
    assert_eq!(stdout_bytes(cat()), n_bytes);
    if with_dump {
        assert_eq!(
            stdout_bytes(home.herd(&["logs", &id])),
            n_bytes,
            "herd logs"
        );
    }
    if with_follow {
        assert_eq!(
            stdout_bytes(home.herd(&["logs", "--follow", &id])),
            n_bytes,
            "herd logs --follow"
        );
    }
    if with_growing {
        assert_eq!(
            stdout_bytes(run_and_follow(&home, &writer)),
            n_bytes,
            "herd run, then herd logs --follow"
        );
        home.out(&["clean", "--owner", GROWING_OWNER]);
    }
    let redact_mbs = in_process_redaction(&log, &writer);
    let mut pipes = Reader::new();
    let mut growing = Reader::new();
    let mut cats = Reader::new();
    let mut dumps = Reader::new();
    let mut follows = Reader::new();
    let mut firsts = Reader::new();
    for _ in 0..LOG_RUNS {
        if with_first {
            // A log the daemon has never read out: the same writer again, under
            // an owner of its own so its session alone is cleaned after the run.
            let fresh = finished_log(&home, &writer, n_bytes, Some(FIRST_READ_OWNER));
            firsts.push(timed_run(home.herd(&["logs", &fresh]), daemon));
            home.out(&["clean", "--owner", FIRST_READ_OWNER]);
        }
        cats.push(timed_run(cat(), daemon));
        if with_dump {
            dumps.push(timed_run(home.herd(&["logs", &id]), daemon));
        }
        if with_follow {
            follows.push(timed_run(home.herd(&["logs", "--follow", &id]), daemon));
        }
        if with_growing {
            pipes.push(timed_run(writer_into_cat(&writer), daemon));
            growing.push(timed_run(run_and_follow(&home, &writer), daemon));
            home.out(&["clean", "--owner", GROWING_OWNER]);
        }
    }
    let where_ = if parent.is_some() {
        "home on /dev/shm"
    } else {
        "no /dev/shm: home on disk"
    };
    let mbs = |s: f64| n_bytes as f64 / 1e6 / s;
    let cat_s = median(cats.seconds.clone());
    let figure = |name: &str, what: &str, which: &str, herd: &Reader| {
        let herd_s = median(herd.seconds.clone());
        let ratios = paired_ratios(&cats.seconds, &herd.seconds);
        report(
            name,
            "MB/s",
            mbs(herd_s),
            Some((mbs(cat_s), "cat of the log file > /dev/null, same run")),
            ">= 0.5",
            &format!(
                "`{what} ID > /dev/null` of a finished job's {} MiB log ({}-byte lines, no secrets), {which}, {where_}; median of {LOG_RUNS} runs alternating with cat: herd {herd_s:.2} s (spread {} s), cat {cat_s:.3} s (spread {} s), paired ratios cat/herd {}; CPU per run: herd client {:.2} s (spread {}), daemon {:.2} s (spread {}), cat {:.3} s; in-process Redactor::redact of the log's first 64 MiB: {redact_mbs:.0} MB/s (one core, the floor under any redacted route){scaled}",
                n_bytes >> 20,
                LOG_LINE.len() + 1,
                spread(&herd.seconds, 2),
                spread(&cats.seconds, 3),
                spread(&ratios, 3),
                median(herd.client_cpu.clone()),
                spread(&herd.client_cpu, 2),
                median(herd.daemon_cpu.clone()),
                spread(&herd.daemon_cpu, 2),
                median(cats.client_cpu.clone()),
            ),
        );
    };
    if with_first {
        figure(
            "cli.logs_1gib_first_read_vs_cat",
            "herd logs",
            "its first read (a fresh log each run: no memo)",
            &firsts,
        );
    }
    if with_dump {
        figure(
            "cli.logs_1gib_vs_cat",
            "herd logs",
            "a repeat read (the daemon read the log out before and keeps its memo)",
            &dumps,
        );
    }
    if with_follow {
        figure(
            "cli.logs_follow_1gib_vs_cat",
            "herd logs --follow",
            "a repeat read (the daemon read the log out before and keeps its memo)",
            &follows,
        );
    }
    if with_growing {
        growing_figure(n_bytes, &pipes, &growing, where_, &scaled);
    }
    // The home (and the log in it) goes with `home`: the daemon is shut down, then
    // the temp dir removed.
    drop(home);
}

/// Reports `cli.logs_follow_growing_vs_pipe` from its paired runs.
fn growing_figure(n_bytes: u64, pipes: &Reader, growing: &Reader, where_: &str, scaled: &str) {
    let mbs = |s: f64| n_bytes as f64 / 1e6 / s;
    let (pipe_s, herd_s) = (
        median(pipes.seconds.clone()),
        median(growing.seconds.clone()),
    );
    let ratios = paired_ratios(&pipes.seconds, &growing.seconds);
    report(
        "cli.logs_follow_growing_vs_pipe",
        "MB/s",
        mbs(herd_s),
        Some((
            mbs(pipe_s),
            "the writer piped into cat > /dev/null, same run",
        )),
        ">= 0.5",
        &format!(
            "`herd run -- WRITER` then `herd logs --follow ID > /dev/null` until the job ends, WRITER writing {} MiB ({}-byte lines, no secrets), {where_}; median of {LOG_RUNS} runs alternating with `WRITER | cat > /dev/null`: herd {herd_s:.2} s (spread {} s), pipe {pipe_s:.2} s (spread {} s), paired ratios pipe/herd {}; CPU per run: herd clients {:.2} s, daemon {:.2} s (spread {}){scaled}",
            n_bytes >> 20,
            LOG_LINE.len() + 1,
            spread(&growing.seconds, 2),
            spread(&pipes.seconds, 2),
            spread(&ratios, 3),
            median(growing.client_cpu.clone()),
            median(growing.daemon_cpu.clone()),
            spread(&growing.daemon_cpu, 2),
        ),
    );
}

fn main() {
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| {
        only.is_empty()
            || only
                .split(',')
                .any(|part| !part.is_empty() && name.contains(part))
    };
    if wanted("cli.run_wait_roundtrip") {
        run_wait_roundtrip();
    }
    if wanted("cli.run_wait_one_client") {
        run_wait_one_client();
    }
    if wanted("cli.client_start") {
        client_start();
    }
    if wanted("cli.client_page_faults") {
        client_page_faults();
    }
    if wanted("cli.spawn_1000_one_connection") || wanted("cli.daemon_rss_1000_finished") {
        spawn_1000_and_rss();
    }
    if wanted("cli.notify_1000") {
        notify_1000();
    }
    let (first, dump, follow, growing) = (
        wanted("cli.logs_1gib_first_read_vs_cat"),
        wanted("cli.logs_1gib_vs_cat"),
        wanted("cli.logs_follow_1gib_vs_cat"),
        wanted("cli.logs_follow_growing_vs_pipe"),
    );
    if first || dump || follow || growing {
        logs_vs_cat(first, dump, follow, growing);
    }
}
