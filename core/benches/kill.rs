//! Benchmark: tree-kill latency, against the raw cost of killing and reaping one process.
//!
//! Figures (herd-bench line protocol, read by `cargo xtask bench`):
//! - `kill.term_tree10_median` / `kill.term_tree10_p99`: a tree of 10 processes that
//!   honours SIGTERM (a shell and 9 children), from the kill call until the whole
//!   tree is gone. Baseline: `Child::kill` plus `wait` of a single process, the floor
//!   any kill pays.
//! - `kill.term_ignoring_overhead`: a tree of 10 processes that ignores SIGTERM;
//!   the kill takes the grace window plus this overhead (target <= 100 ms).
//!
//! Tree kill is crate-internal; the bench reaches it through the hidden
//! `herd_core::bench_support` module.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::io::{BufRead, BufReader};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use herd_core::bench_support;

const RUNS: usize = 100;
const IGNORING_RUNS: usize = 20;
const GRACE: Duration = Duration::from_millis(200);

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

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let idx = ((sorted.len() - 1) as f64 * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v
}

fn emit(name: &str, value: f64, baseline: Option<(f64, &str)>, target: Option<&str>, note: &str) {
    let (baseline_value, baseline_name, ratio) = match baseline {
        Some((b, n)) => (
            serde_json::json!(b),
            serde_json::json!(n),
            serde_json::json!(value / b),
        ),
        None => (
            serde_json::Value::Null,
            serde_json::Value::Null,
            serde_json::Value::Null,
        ),
    };
    let line = serde_json::json!({
        "name": name,
        "unit": "ms",
        "value": value,
        "baseline": baseline_value,
        "baseline_name": baseline_name,
        "ratio": ratio,
        "target": target,
        "note": note,
    });
    println!("herd-bench {line}");
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
        &format!("{RUNS} runs"),
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
}
