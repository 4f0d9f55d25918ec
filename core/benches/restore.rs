//! Benchmark: restore of 1,000 checkpointed sessions and the checkpoint's cost per spawn.
//!
//! Figures (herd-bench line protocol, read by `cargo xtask bench`):
//! - `restore.adopt_1000_live`: `Registry::restore` of a checkpoint listing 1,000 live
//!   `sleep` processes the bench started (each with stdout and stderr on one pipe
//!   whose read end the bench closed, as a crashed herd leaves them), so every one is
//!   re-adopted: pidfd exit watch, output pipe reopened, log reopened (a silent
//!   session's log is created only with its first byte). Baseline: the
//!   I/O floor of the same work, loading the checkpoint plus reading the 1,000
//!   `/proc/<pid>/stat` files.
//! - `restore.close_1000_gone`: restore of 1,000 entries whose pids are gone; each is
//!   closed through the choke point as `lost` and the restore waits for the receipts
//!   (the newest 64 are written) and the checkpoint update. Same baseline kind.
//! - `restore.spawn_burst200_per_spawn`: wall time of 200 concurrent spawns of `true`
//!   divided by 200; every spawn writes its pending checkpoint entry before it answers
//!   and the full writes behind them coalesce. Baseline: one full checkpoint write of
//!   200 sessions, the cost each spawn would pay if it waited for an uncoalesced write.
//! - `restore.spawn_sequential_median`: one spawn at a time (its pending entry included).
//!   Baseline: a raw fork and exec of `true` (`Command::spawn`).
//! - `restore.checkpoint_write_1000`: one checkpoint write listing 1,000 sessions.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

#[path = "support/figures.rs"]
mod figures;
use figures::{emit, ms};

use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use herd_core::{Home, ListFilter, Registry, RegistryConfig, SpawnRequest};
use herd_persistence::{CheckpointStore, Mode, SessionRecord, Writer};

const N_SESSIONS: usize = 1_000;
const ADOPT_RUNS: usize = 3;
const CLOSE_RUNS: usize = 5;
const BURST: usize = 200;
const BURST_RUNS: usize = 3;
const SEQUENTIAL_SPAWNS: usize = 50;
const WRITE_RUNS: usize = 9;

#[expect(
    clippy::disallowed_methods,
    reason = "the bench starts raw processes for the checkpoint to point at"
)]
fn raw(program: &str) -> Command {
    Command::new(program)
}

/// A `sleep` whose stdout and stderr are one pipe with no reader left.
fn orphaned_sleep() -> Child {
    let (read, write) = nix::unistd::pipe().expect("a pipe can be made");
    let write2 = write.try_clone().expect("a pipe end can be duplicated");
    let child = raw("sleep")
        .arg("600")
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::from(write2))
        .process_group(0)
        .spawn()
        .expect("sleep starts");
    drop(read);
    child
}

fn start_time(pid: i32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    herd_persistence::parse_stat_start_time(&stat)
}

fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn record(home: &Home, i: usize, pid: i32, start: Option<u64>) -> SessionRecord {
    let id = format!("proc_{i:012x}");
    SessionRecord {
        command: "sleep 600".to_owned(),
        pid,
        pgid: pid,
        start_time: start,
        task_id: "bench".to_owned(),
        owner_task_id: "bench".to_owned(),
        session_key: String::new(),
        mode: Mode::Pipe,
        notify: i.is_multiple_of(2),
        watch_patterns: Vec::new(),
        heartbeat_seconds: 0,
        completion_output_chars: 0,
        persist_on_release: false,
        log_path: home.session_log_path(&id),
        cwd: None,
        started_at: now_secs(),
        shim: None,
        name: None,
        options: None,
        command_given: None,
        runs: None,
        id,
    }
}

/// A writer no live process has: a reaped child's pid.
fn dead_writer() -> Writer {
    let mut child = raw("true").spawn().expect("true starts");
    let pid = i32::try_from(child.id()).expect("pids fit");
    child.wait().expect("true is reaped");
    Writer::new(pid, Some(1))
}

/// `n` pids that no process has right now.
fn gone_pids(n: usize) -> Vec<i32> {
    (400_000..4_000_000)
        .filter(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        .take(n)
        .collect()
}

/// The I/O floor of a restore: load the checkpoint and read every pid's stat.
fn floor(home: &Home, pids: &[i32]) -> f64 {
    let started = Instant::now();
    let loaded = CheckpointStore::new(home)
        .load()
        .expect("the checkpoint loads");
    let mut n = 0;
    for pid in pids {
        n += usize::from(start_time(*pid).is_some());
    }
    std::hint::black_box((loaded.entries.len(), n));
    ms(started.elapsed())
}

fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

async fn wait_running_empty(registry: &Registry, limit: Duration) {
    let deadline = Instant::now() + limit;
    while !registry.list(&ListFilter::default()).is_empty() {
        assert!(
            Instant::now() < deadline,
            "re-adopted sessions did not finish within {limit:?}"
        );
        let _ = tokio::time::timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
    }
}

async fn adopt_run() -> (f64, f64) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = Home::new(dir.path());
    let mut children: Vec<Child> = (0..N_SESSIONS).map(|_| orphaned_sleep()).collect();
    let records: Vec<SessionRecord> = children
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let pid = i32::try_from(c.id()).expect("pids fit");
            record(&home, i, pid, start_time(pid))
        })
        .collect();
    let pids: Vec<i32> = records.iter().map(|r| r.pid).collect();
    CheckpointStore::new(&home)
        .write_own(&dead_writer(), &records, &[])
        .expect("the checkpoint is written");
    let baseline = floor(&home, &pids);
    let registry = Registry::new(home, RegistryConfig::default()).expect("inside a runtime");
    let started = Instant::now();
    let report = registry.restore().await.expect("restore runs");
    let value = ms(started.elapsed());
    assert_eq!(
        report.adopted.len(),
        N_SESSIONS,
        "every live session is adopted"
    );
    for child in &mut children {
        let _ = child.kill();
    }
    for child in &mut children {
        let _ = child.wait();
    }
    wait_running_empty(&registry, Duration::from_secs(60)).await;
    registry.sync_durable().await.expect("the home is writable");
    (value, baseline)
}

async fn close_run() -> (f64, f64) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = Home::new(dir.path());
    let pids = gone_pids(N_SESSIONS);
    let records: Vec<SessionRecord> = pids
        .iter()
        .enumerate()
        .map(|(i, pid)| record(&home, i, *pid, Some(12_345)))
        .collect();
    CheckpointStore::new(&home)
        .write_own(&dead_writer(), &records, &[])
        .expect("the checkpoint is written");
    let baseline = floor(&home, &pids);
    let registry = Registry::new(home, RegistryConfig::default()).expect("inside a runtime");
    let started = Instant::now();
    let report = registry.restore().await.expect("restore runs");
    let value = ms(started.elapsed());
    assert_eq!(
        report.closed_lost.len(),
        N_SESSIONS,
        "every gone session is closed"
    );
    registry.sync_durable().await.expect("the home is writable");
    (value, baseline)
}

fn true_request() -> SpawnRequest {
    SpawnRequest {
        command: "true".to_owned(),
        task_id: "bench".to_owned(),
        ..SpawnRequest::default()
    }
}

async fn burst_run() -> (f64, f64) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = Home::new(dir.path());
    // Baseline: one write listing BURST sessions.
    let records: Vec<SessionRecord> = (0..BURST)
        .map(|i| {
            record(
                &home,
                i,
                100_000 + i32::try_from(i).expect("small"),
                Some(1),
            )
        })
        .collect();
    let store = CheckpointStore::new(&home);
    let writer = dead_writer();
    let started = Instant::now();
    store
        .write_own(&writer, &records, &[])
        .expect("the checkpoint is written");
    let baseline = ms(started.elapsed());
    store
        .write_own(
            &writer,
            &[],
            &records.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(),
        )
        .expect("the checkpoint is written");
    let registry = Registry::new(home, RegistryConfig::default()).expect("inside a runtime");
    let started = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..BURST {
        let registry = registry.clone();
        set.spawn(async move { registry.spawn(true_request()).await });
    }
    while let Some(r) = set.join_next().await {
        r.expect("the spawn task ran").expect("spawn succeeds");
    }
    let value = ms(started.elapsed()) / BURST as f64;
    wait_running_empty(&registry, Duration::from_secs(60)).await;
    registry.sync_durable().await.expect("the home is writable");
    (value, baseline)
}

async fn sequential() -> (f64, f64) {
    let dir = tempfile::tempdir().expect("a temp dir");
    let registry =
        Registry::new(Home::new(dir.path()), RegistryConfig::default()).expect("inside a runtime");
    let mut spawns = Vec::new();
    let mut raws = Vec::new();
    for _ in 0..SEQUENTIAL_SPAWNS {
        let started = Instant::now();
        registry
            .spawn(true_request())
            .await
            .expect("spawn succeeds");
        spawns.push(ms(started.elapsed()));
        let started = Instant::now();
        let mut child = raw("true")
            .stdin(Stdio::null())
            .spawn()
            .expect("true starts");
        raws.push(ms(started.elapsed()));
        child.wait().expect("true is reaped");
    }
    wait_running_empty(&registry, Duration::from_secs(60)).await;
    (median(&spawns), median(&raws))
}

fn checkpoint_write_1000() -> f64 {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = Home::new(dir.path());
    let records: Vec<SessionRecord> = (0..N_SESSIONS)
        .map(|i| {
            record(
                &home,
                i,
                100_000 + i32::try_from(i).expect("small"),
                Some(1),
            )
        })
        .collect();
    let store = CheckpointStore::new(&home);
    let writer = dead_writer();
    let times: Vec<f64> = (0..WRITE_RUNS)
        .map(|_| {
            let started = Instant::now();
            store
                .write_own(&writer, &records, &[])
                .expect("the checkpoint is written");
            ms(started.elapsed())
        })
        .collect();
    median(&times)
}

/// `n` runs of `run`, each giving (value, baseline): the values and the baselines.
async fn runs<F, Fut>(n: usize, mut run: F) -> (Vec<f64>, Vec<f64>)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = (f64, f64)>,
{
    let mut values = Vec::with_capacity(n);
    let mut baselines = Vec::with_capacity(n);
    for _ in 0..n {
        let (v, b) = run().await;
        values.push(v);
        baselines.push(b);
    }
    (values, baselines)
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime can be built");
    rt.block_on(async {
        let (values, baselines) = runs(ADOPT_RUNS, adopt_run).await;
        emit(
            "restore.adopt_1000_live",
            median(&values),
            Some((median(&baselines), "checkpoint load + 1,000 /proc stat reads")),
            Some("< 1000"),
            "1,000 live sleeps re-adopted: pidfd exit watch, output pipe reopened, log reopened (created only with its first byte)",
        );
        let (values, baselines) = runs(CLOSE_RUNS, close_run).await;
        emit(
            "restore.close_1000_gone",
            median(&values),
            Some((median(&baselines), "checkpoint load + 1,000 /proc stat reads")),
            Some("< 1000"),
            "1,000 entries with gone pids closed as lost; newest 64 receipts and the checkpoint written before restore returns",
        );
        let (values, baselines) = runs(BURST_RUNS, burst_run).await;
        emit(
            "restore.spawn_burst200_per_spawn",
            median(&values),
            Some((median(&baselines), "one checkpoint write of 200 sessions")),
            Some("ratio < 1 (writes coalesce)"),
            "200 concurrent spawns of true, each answered after its pending checkpoint entry; full writes coalesce behind them",
        );
        let (spawn, raw_spawn) = sequential().await;
        emit(
            "restore.spawn_sequential_median",
            spawn,
            Some((raw_spawn, "raw fork+exec of true (Command::spawn)")),
            None,
            "one spawn at a time, its pending checkpoint entry included",
        );
    });
    emit(
        "restore.checkpoint_write_1000",
        checkpoint_write_1000(),
        None,
        None,
        "one atomic checkpoint write (lock, temp, fsync, rename, dir fsync) listing 1,000 sessions",
    );
}
