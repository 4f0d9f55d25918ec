//! Benchmark: 10,000 heartbeat sessions on the registry's one notification timer.
//!
//! Figures (herd-bench line protocol, read by `cargo xtask bench`):
//! - `notify.heartbeat_10k_cpu_1s`: CPU seconds per second of wall time (getrusage of
//!   this process before and after) of one timer task serving 10,000 heartbeats at a
//!   1 s interval, each beat carrying one new line: 10,000 beats per second, 60 times
//!   the production floor's rate. Each beat is ticked, sized, redacted through the
//!   output pipeline and queued, as the registry does.
//! - `notify.heartbeat_10k_cpu_60s`: the same at the production floor of 60 s
//!   (about 167 beats per second).
//! - Baseline: the same timer loop with no sessions (what an idle timer costs).
//!
//! The sessions are synthetic (in-memory output tails driven through the registry's
//! `BeatSchedule`): 10,000 real processes would measure fork and pipe costs, not the
//! timer. The hidden `herd_core::notify_bench_support` module is the seam.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::time::{Duration, Instant};

use herd_core::notify_bench_support::heartbeat_load;

const N_SESSIONS: usize = 10_000;
const WALL: Duration = Duration::from_secs(4);
const RUNS: usize = 3;

/// User plus system CPU time of this process so far.
fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a full rusage into the pointer it is given, which
    // points at a zeroed, properly aligned rusage.
    let rc = unsafe { libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()) };
    assert_eq!(rc, 0, "getrusage(RUSAGE_SELF) cannot fail");
    // SAFETY: getrusage succeeded, so the value is initialised.
    let usage = unsafe { usage.assume_init() };
    let tv = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

/// CPU seconds per wall second of one run, and the beats it delivered.
fn run(rt: &tokio::runtime::Runtime, n_sessions: usize, interval: Duration) -> (f64, u64) {
    let cpu0 = cpu_time();
    let wall0 = Instant::now();
    let load = rt.block_on(heartbeat_load(n_sessions, interval, WALL));
    let cpu = (cpu_time() - cpu0).as_secs_f64();
    let wall = wall0.elapsed().as_secs_f64();
    (cpu / wall, load.n_beats)
}

fn median(mut xs: Vec<f64>) -> f64 {
    xs.sort_by(f64::total_cmp);
    xs[xs.len() / 2]
}

fn main() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .expect("a current-thread runtime can be built");
    let baseline = median(
        (0..RUNS)
            .map(|_| run(&rt, 0, Duration::from_secs(1)).0)
            .collect(),
    );
    for (name, interval) in [
        ("notify.heartbeat_10k_cpu_1s", Duration::from_secs(1)),
        ("notify.heartbeat_10k_cpu_60s", Duration::from_secs(60)),
    ] {
        let runs: Vec<(f64, u64)> = (0..RUNS).map(|_| run(&rt, N_SESSIONS, interval)).collect();
        let n_beats = runs.iter().map(|(_, n)| *n).max().unwrap_or(0);
        let value = median(runs.into_iter().map(|(v, _)| v).collect());
        println!(
            "herd-bench {{\"name\":\"{name}\",\"unit\":\"cpu s/s\",\"value\":{value:.5},\"baseline\":{baseline:.5},\"baseline_name\":\"the same timer with no sessions\",\"ratio\":null,\"target\":\"< 0.05 at the 60 s floor\",\"note\":\"{N_SESSIONS} sessions, {}s interval, {n_beats} beats in {}s (one run), one timer task\"}}",
            interval.as_secs(),
            WALL.as_secs()
        );
    }
}
