//! Benchmark: following a growing log (`herd logs -f` of a job while it writes),
//! against the same writer piped into `cat` in the same run.
//!
//! Figure (one `herd-bench` line, read by `cargo xtask bench`):
//! - `cli.logs_follow_growing_vs_pipe`: `herd run -- <writer>` then
//!   `herd logs -f ID > /dev/null` until the job ends, where the writer is
//!   `yes <75-byte line> | head -c 1GiB`, against `<writer> | cat > /dev/null`;
//!   value and baseline in MB/s, runs alternating, paired ratios (the pipe's time
//!   over herd's) in the note; the home is on /dev/shm when there is one, and each
//!   run's session is cleaned before the next. The finished-log figures
//!   (`cli.logs_1gib_first_read_vs_cat`, `cli.logs_1gib_vs_cat`,
//!   `cli.logs_follow_1gib_vs_cat`) are `e2e.rs`'s.
//!
//! The log halves until it fits in a quarter of the free space where the home is.
//! `HERD_BENCH_LOG_MB=<n>` sets its size instead. `HERD_BENCH_BIN=<path to herd>`
//! measures that binary (with its `herd-shim` beside it) instead of the one Cargo
//! built: two builds compared by one harness.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use herd_test_support::bench::{figure_line, median, spread};
use herd_test_support::home::{TempHome, command, herd, stop_daemon};

const HERD: &str = env!("CARGO_BIN_EXE_herd");

/// The binary measured: `HERD_BENCH_BIN`, else the one Cargo built.
fn herd_bin() -> PathBuf {
    std::env::var_os("HERD_BENCH_BIN").map_or_else(|| PathBuf::from(HERD), PathBuf::from)
}
const LOG_LINE: &str = "INFO 2026-12-01T10:00:00Z worker-3 processed batch 1234 in 56 ms status=ok";
const LOG_BYTES: u64 = 1 << 30;
const RUNS: usize = 3;

/// A temporary home whose daemon is shut down on drop.
struct Home {
    dir: TempHome,
    root: PathBuf,
}

impl Home {
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
        assert!(out.status.success(), "herd {args:?}: {}", out.status);
        String::from_utf8(out.stdout).expect("utf-8")
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

fn dev_null() -> Stdio {
    Stdio::from(
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/null")
            .expect("/dev/null"),
    )
}

/// Seconds `cmd` takes, its stdout on /dev/null; it must succeed.
fn timed(mut cmd: Command) -> f64 {
    let start = Instant::now();
    let status = cmd.stdout(dev_null()).status().expect("runs");
    assert!(status.success(), "{cmd:?} failed: {status}");
    start.elapsed().as_secs_f64()
}

fn free_bytes(path: &Path) -> u64 {
    let st = nix::sys::statvfs::statvfs(path).expect("statvfs");
    st.blocks_available() * st.fragment_size()
}

fn follow_growing() {
    let shm = Path::new("/dev/shm");
    let parent = shm.is_dir().then_some(shm);
    let home = Home::new_in(parent, &format!("log_cap_bytes = {}\n", 2 * LOG_BYTES));
    let mut n_bytes = match std::env::var("HERD_BENCH_LOG_MB") {
        Ok(mb) => mb.parse::<u64>().expect("HERD_BENCH_LOG_MB is a number") << 20,
        Err(_) => LOG_BYTES,
    };
    let free = free_bytes(&home.root);
    while n_bytes > (64 << 20) && n_bytes > free / 4 {
        n_bytes /= 2;
    }
    home.out(&["ps"]);
    let writer = format!("yes '{LOG_LINE}' | head -c {n_bytes}");
    let (mut pipes, mut herds) = (Vec::new(), Vec::new());
    for _ in 0..RUNS {
        let mut pipe = command(Path::new("bash"));
        pipe.args(["-c", &format!("{writer} | cat")]);
        pipes.push(timed(pipe));
        let start = Instant::now();
        let id = home.out(&["run", "--", &writer]).trim().to_owned();
        let mut follow = home.herd(&["logs", "-f", &id]);
        let status = follow
            .stdout(dev_null())
            .status()
            .expect("herd logs -f runs");
        herds.push(start.elapsed().as_secs_f64());
        assert!(status.success(), "herd logs -f {id}: {status}");
        let log = home.root.join("logs/sessions").join(format!("{id}.log"));
        assert_eq!(std::fs::metadata(&log).expect("the log").len(), n_bytes);
        home.out(&["clean"]);
    }
    let mbs = |s: f64| n_bytes as f64 / 1e6 / s;
    let ratios = herd_test_support::bench::paired_ratios(&pipes, &herds);
    let note = format!(
        "`herd run -- W` + `herd logs -f ID > /dev/null` to the job's end against `W | cat > /dev/null`, W = `yes <{}-byte line> | head -c {}` ({} MiB), {}; median of {RUNS} alternating runs: herd {:.2} s (spread {}), pipe {:.2} s (spread {}), paired ratios pipe/herd {}",
        LOG_LINE.len() + 1,
        n_bytes,
        n_bytes >> 20,
        if parent.is_some() {
            "home on /dev/shm"
        } else {
            "no /dev/shm: home on disk"
        },
        median(herds.clone()),
        spread(&herds, 2),
        median(pipes.clone()),
        spread(&pipes, 2),
        spread(&ratios, 3),
    );
    println!(
        "{}",
        figure_line(
            "cli.logs_follow_growing_vs_pipe",
            "MB/s",
            mbs(median(herds)),
            Some((
                mbs(median(pipes)),
                "the writer piped into cat > /dev/null, same run"
            )),
            Some(">= 0.5"),
            &note,
        )
    );
}

fn main() {
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    if only.is_empty()
        || only
            .split(',')
            .any(|p| !p.is_empty() && "cli.logs_follow_growing_vs_pipe".contains(p))
    {
        follow_growing();
    }
}
