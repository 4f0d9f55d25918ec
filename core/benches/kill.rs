//! Benchmark: tree-kill latency, against the raw cost of killing and reaping one process.
//!
//! Figures (herd-bench line protocol, read by `cargo xtask bench`):
//! - `kill.term_tree10_median` / `kill.term_tree10_p99`: a tree of 10 processes that
//!   honours SIGTERM (a shell and 9 children), from the kill call until the whole
//!   tree is gone. Baseline: `Child::kill` plus `wait` of a single process, the floor
//!   any kill pays. Of 100 runs the p99 is the second slowest, so its note adds
//!   the p90 and the slowest: a tail of one or two runs shows as such. On a busy
//!   machine the tail is the kill's look at the process table (`/proc` reads of
//!   every process, and the environment of every same-uid process younger than the
//!   tree), not a wait: the tree is nearly always gone by the end of that look.
//! - `kill.term_ignoring_overhead`: a tree of 10 processes that ignores SIGTERM;
//!   the kill takes the grace window plus this overhead (target <= 100 ms).
//!
//! - `kill.sweep_20_sessions`: 20 TERM-honouring sessions of 3 processes ended by
//!   one `kill_trees` sweep (kill-all, shutdown). Baseline: the same 20 sessions
//!   ended one `kill_tree` call at a time.
//!
//! Tree kill is crate-internal; the bench reaches it through the hidden
//! `herd_core::bench_support` module.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

#[path = "support/figures.rs"]
mod figures;
use figures::{emit, ms};

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use herd_core::bench_support;

const RUNS: usize = 100;
const IGNORING_RUNS: usize = 20;
const GRACE: Duration = Duration::from_millis(200);
const SWEEP_SESSIONS: usize = 20;
const SWEEP_RUNS: usize = 7;

/// A tree under test: the leader and its session tag.
struct Tree {
    child: Child,
    tag: String,
}

#[expect(
    clippy::disallowed_methods,
    reason = "the bench drives raw children as the registry would"
)]
fn spawn(script: &str, tag: &str) -> Child {
    Command::new("/bin/bash")
        .arg("-c")
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env(bench_support::SESSION_TAG_ENV, tag)
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("bash is installed on the bench machine")
}

/// Starts a 10-process tree and waits for its readiness line.
fn spawn_tree(ignore_term: bool, run_idx: usize) -> Tree {
    let tag = format!("proc_bench{:07x}", run_idx);
    let trap = if ignore_term { "trap '' TERM; " } else { "" };
    let script = format!("{trap}for i in 1 2 3 4 5 6 7 8 9; do sleep 600 & done; echo ready; wait");
    let mut child = spawn(&script, &tag);
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut line = String::new();
    BufReader::new(stdout)
        .read_line(&mut line)
        .expect("the tree prints its readiness line");
    assert_eq!(line.trim(), "ready", "unexpected first line from the tree");
    Tree { child, tag }
}

/// Starts `n` small TERM-honouring sessions (a shell and two children each).
fn spawn_sessions(n: usize, first_idx: usize) -> Vec<Tree> {
    (0..n)
        .map(|i| {
            let tag = format!("proc_bench{:07x}", first_idx + i);
            let mut child = spawn("sleep 600 & sleep 600 & echo ready; wait", &tag);
            let stdout = child.stdout.take().expect("stdout was piped");
            let mut line = String::new();
            BufReader::new(stdout)
                .read_line(&mut line)
                .expect("the session prints its readiness line");
            assert_eq!(line.trim(), "ready", "unexpected first line from a session");
            Tree { child, tag }
        })
        .collect()
}

/// Ends `sessions` in one sweep (or one at a time) and returns how long it took.
fn time_sessions(rt: &tokio::runtime::Runtime, sessions: Vec<Tree>, one_sweep: bool) -> Duration {
    let specs: Vec<(i32, Option<u64>, String)> = sessions
        .iter()
        .map(|tree| {
            let pid = leader(tree);
            (pid, bench_support::start_time(pid), tree.tag.clone())
        })
        .collect();
    let started = Instant::now();
    let gone = rt.block_on(async {
        if one_sweep {
            bench_support::kill_trees(&specs, GRACE).await
        } else {
            let mut all_gone = true;
            for (pid, start_time, tag) in &specs {
                all_gone &= bench_support::kill_tree(*pid, *start_time, tag, GRACE).await;
            }
            all_gone
        }
    });
    let elapsed = started.elapsed();
    assert!(gone, "a session was not fully killed");
    for mut tree in sessions {
        tree.child.wait().expect("the leader can be reaped");
    }
    elapsed
}

fn leader(tree: &Tree) -> i32 {
    i32::try_from(tree.child.id()).expect("pids fit in i32")
}

/// Kills one tree and returns how long the kill took.
fn time_kill(rt: &tokio::runtime::Runtime, tree: Tree, grace: Duration) -> Duration {
    let pid = leader(&tree);
    let start_time = bench_support::start_time(pid);
    let started = Instant::now();
    let gone = rt.block_on(bench_support::kill_tree(pid, start_time, &tree.tag, grace));
    let elapsed = started.elapsed();
    assert!(gone, "the tree of pid {pid} was not fully killed");
    let mut child = tree.child;
    child.wait().expect("the leader can be reaped");
    elapsed
}

/// Baseline: SIGKILL one process and reap it.
#[expect(
    clippy::disallowed_methods,
    reason = "the bench drives raw children as the registry would"
)]
fn time_single_kill() -> Duration {
    let mut child = Command::new("/bin/sleep")
        .arg("600")
        .stdin(Stdio::null())
        .spawn()
        .expect("sleep is installed on the bench machine");
    let started = Instant::now();
    child.kill().expect("a running child can be killed");
    child.wait().expect("a killed child can be reaped");
    started.elapsed()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");

    let mut single = Vec::with_capacity(RUNS);
    let mut honouring = Vec::with_capacity(RUNS);
    for run_idx in 0..RUNS {
        single.push(ms(time_single_kill()));
        let tree = spawn_tree(false, run_idx);
        honouring.push(ms(time_kill(&rt, tree, GRACE)));
    }
    let single = sorted(single);
    let honouring = sorted(honouring);
    let single_median = percentile(&single, 0.5);

    let mut overhead = Vec::with_capacity(IGNORING_RUNS);
    for run_idx in 0..IGNORING_RUNS {
        let tree = spawn_tree(true, RUNS + run_idx);
        overhead.push(ms(time_kill(&rt, tree, GRACE)) - ms(GRACE));
    }
    let overhead = sorted(overhead);

    let mut sweep = Vec::with_capacity(SWEEP_RUNS);
    let mut one_by_one = Vec::with_capacity(SWEEP_RUNS);
    for run_idx in 0..SWEEP_RUNS {
        let first_idx = 10_000 + run_idx * 2 * SWEEP_SESSIONS;
        let sessions = spawn_sessions(SWEEP_SESSIONS, first_idx);
        sweep.push(ms(time_sessions(&rt, sessions, true)));
        let sessions = spawn_sessions(SWEEP_SESSIONS, first_idx + SWEEP_SESSIONS);
        one_by_one.push(ms(time_sessions(&rt, sessions, false)));
    }
    let sweep = sorted(sweep);
    let one_by_one = sorted(one_by_one);

    emit(
        "kill.term_tree10_median",
        percentile(&honouring, 0.5),
        Some((single_median, "Child::kill + wait of one process")),
        None,
        &format!("{RUNS} runs; shell + 9 children honouring SIGTERM"),
    );
    emit(
        "kill.term_tree10_p99",
        percentile(&honouring, 0.99),
        Some((
            percentile(&single, 0.99),
            "Child::kill + wait of one process, p99",
        )),
        None,
        &format!(
            "{RUNS} runs (the second slowest); p90 {:.1} ms, slowest {:.1} ms",
            percentile(&honouring, 0.9),
            percentile(&honouring, 1.0)
        ),
    );
    emit(
        "kill.term_ignoring_overhead",
        percentile(&overhead, 0.5),
        None,
        Some("<= 100"),
        &format!(
            "median kill time minus the {} ms grace, {IGNORING_RUNS} runs, shell + 9 children ignoring SIGTERM; p99 {:.1} ms",
            GRACE.as_millis(),
            percentile(&overhead, 0.99)
        ),
    );
    emit(
        "kill.sweep_20_sessions",
        percentile(&sweep, 0.5),
        Some((
            percentile(&one_by_one, 0.5),
            "the same sessions, one kill_tree call each",
        )),
        None,
        &format!("{SWEEP_SESSIONS} sessions of 3 processes, {SWEEP_RUNS} runs, median"),
    );
}
