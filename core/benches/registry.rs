//! Benchmark: ingest, spawn and completion latency against raw OS baselines, measured
//! in the same run (the herd-bench line protocol of `xtask/src/bench.rs`).
//!
//! Figures: pipe ingest of 1 GiB (herd session with its log on vs a plain reader of
//! the same child), PTY ingest (herd with the responder vs a plain PTY reader),
//! spawn-to-exit of `true` (registry vs raw tokio spawn+wait), exit-to-completion
//! latency (median and p99), and memory per idle session over 1,000 `sleep` sessions.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::io::Read;
use std::process::Stdio;
use std::time::{Duration, Instant};

use herd_core::{Event, Home, KillSource, Mode, Registry, RegistryConfig, SpawnRequest};
use tokio::io::AsyncReadExt;

const PIPE_BYTES: u64 = 1 << 30;
const PTY_BYTES: u64 = 64 << 20;
const RUNS: usize = 3;
const SPAWNS: usize = 300;
const LATENCY_SAMPLES: usize = 300;
const IDLE_SESSIONS: usize = 1_000;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let idx = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[idx]
}

fn line(
    name: &str,
    unit: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    ratio: Option<f64>,
    target: Option<&str>,
    note: &str,
) {
    let json = serde_json::json!({
        "name": name,
        "unit": unit,
        "value": value,
        "baseline": baseline.map(|b| b.0),
        "baseline_name": baseline.map(|b| b.1),
        "ratio": ratio,
        "target": target,
        "note": note,
    });
    println!("herd-bench {json}");
}

fn fixture(tune: impl FnOnce(&mut RegistryConfig)) -> (tempfile::TempDir, Registry) {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = RegistryConfig::default();
    tune(&mut config);
    let registry = Registry::new(Home::new(dir.path()), config).expect("inside a runtime");
    (dir, registry)
}

async fn run_session(registry: &Registry, req: SpawnRequest) -> Duration {
    let started = Instant::now();
    let info = registry.spawn(req).await.expect("spawn");
    let answer = registry
        .wait(info.session_id.as_str(), Duration::from_secs(170), None)
        .await
        .expect("wait");
    assert_eq!(answer.status, herd_core::WaitStatus::Exited);
    started.elapsed()
}

fn head_command(bytes: u64) -> String {
    format!("head -c {bytes} /dev/zero")
}

async fn pipe_ingest() {
    let mut herd = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..RUNS {
        let (_dir, registry) = fixture(|_| {});
        let t = run_session(
            &registry,
            SpawnRequest {
                command: head_command(PIPE_BYTES),
                ..SpawnRequest::default()
            },
        )
        .await;
        herd.push(PIPE_BYTES as f64 / t.as_secs_f64() / 1e6);

        let started = Instant::now();
        let mut child = tokio::process::Command::new("bash")
            .args(["-c", &head_command(PIPE_BYTES)])
            .stdout(Stdio::piped())
            .spawn()
            .expect("spawn baseline");
        let mut out = child.stdout.take().expect("piped");
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            let n = out.read(&mut buf).await.expect("read");
            if n == 0 {
                break;
            }
            total += n as u64;
        }
        child.wait().await.expect("wait");
        assert_eq!(total, PIPE_BYTES);
        raw.push(PIPE_BYTES as f64 / started.elapsed().as_secs_f64() / 1e6);
    }
    let (v, b) = (median(herd), median(raw));
    line(
        "core.pipe_ingest_1gib",
        "MB/s",
        v,
        Some((b, "tokio reader of the same child, 1 MiB reads, no log")),
        Some(v / b),
        Some(">= 0.8"),
        "herd writes every byte to the session log; spawn to completion",
    );
}

async fn pty_ingest() {
    let mut herd = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..RUNS {
        let (_dir, registry) = fixture(|_| {});
        let t = run_session(
            &registry,
            SpawnRequest {
                command: head_command(PTY_BYTES),
                mode: Mode::pty(),
                ..SpawnRequest::default()
            },
        )
        .await;
        herd.push(PTY_BYTES as f64 / t.as_secs_f64() / 1e6);

        let started = Instant::now();
        let total = tokio::task::spawn_blocking(|| {
            let pair = portable_pty::native_pty_system()
                .openpty(portable_pty::PtySize {
                    rows: 30,
                    cols: 120,
                    pixel_width: 0,
                    pixel_height: 0,
                })
                .expect("openpty");
            let mut cmd = portable_pty::CommandBuilder::new("bash");
            cmd.args(["-c", &head_command(PTY_BYTES)]);
            let mut child = pair.slave.spawn_command(cmd).expect("spawn");
            drop(pair.slave);
            let mut reader = pair.master.try_clone_reader().expect("reader");
            let mut buf = vec![0u8; 64 << 10];
            let mut total = 0u64;
            loop {
                match reader.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => total += n as u64,
                }
            }
            child.wait().expect("wait");
            total
        })
        .await
        .expect("join");
        assert!(total >= PTY_BYTES);
        raw.push(PTY_BYTES as f64 / started.elapsed().as_secs_f64() / 1e6);
    }
    let (v, b) = (median(herd), median(raw));
    line(
        "core.pty_ingest_64mib",
        "MB/s",
        v,
        Some((b, "portable-pty blocking reader of the same child")),
        Some(v / b),
        Some(">= 0.9"),
        "herd runs the query responder and writes the log",
    );
}

async fn spawn_to_exit() {
    // `true` is plain words, so herd execs it without the shell (spawn/direct.rs); the
    // baseline is what a supervisor without that does: bash -c. `true && true` needs
    // the shell on both sides, so its ratio is the registry's own overhead.
    for (name, command, target, note) in [
        (
            "core.spawn_to_exit_true",
            "true",
            "<= 1.2",
            "registry spawn through wait() returning exited; herd execs `true` directly",
        ),
        (
            "core.spawn_to_exit_shell",
            "true && true",
            "",
            "the same through bash on both sides: the registry's own overhead",
        ),
    ] {
        let (_dir, registry) = fixture(|_| {});
        let mut herd = Vec::new();
        let mut raw = Vec::new();
        for _ in 0..SPAWNS {
            let t = run_session(
                &registry,
                SpawnRequest {
                    command: command.to_owned(),
                    ..SpawnRequest::default()
                },
            )
            .await;
            herd.push(t.as_secs_f64() * 1e3);
            let started = Instant::now();
            let status = tokio::process::Command::new("bash")
                .args(["-c", command])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .await
                .expect("raw spawn");
            assert!(status.success());
            raw.push(started.elapsed().as_secs_f64() * 1e3);
        }
        let (v, b) = (median(herd), median(raw));
        line(
            name,
            "ms",
            v,
            Some((b, &format!("tokio spawn+wait of bash -c '{command}'"))),
            Some(v / b),
            (!target.is_empty()).then_some(target),
            note,
        );
    }
}

async fn exit_to_completion() {
    let (_dir, registry) = fixture(|_| {});
    let mut events = registry.subscribe();
    let mut herd = Vec::new();
    let mut raw = Vec::new();
    for _ in 0..LATENCY_SAMPLES {
        // The child says it is ready, then exits as soon as its stdin closes; the
        // clock starts at the close, so both sides measure EOF -> exit -> notice.
        let info = registry
            .spawn(SpawnRequest {
                command: "echo r; read -r _".to_owned(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
        let id = info.session_id.as_str();
        while registry.poll(id).expect("poll").total_ingested == 0 {
            tokio::task::yield_now().await;
        }
        let started = Instant::now();
        registry.close_stdin(id).await.expect("close");
        loop {
            match events.recv().await.expect("event stream") {
                Event::Completion { session_id, .. } if session_id == info.session_id => break,
                _ => {}
            }
        }
        herd.push(started.elapsed().as_secs_f64() * 1e3);

        let mut child = tokio::process::Command::new("bash")
            .args(["-c", "echo r; read -r _"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("raw spawn");
        let stdin = child.stdin.take();
        let mut stdout = child.stdout.take().expect("piped");
        let mut ready = [0u8; 2];
        stdout.read_exact(&mut ready).await.expect("ready line");
        let started = Instant::now();
        drop(stdin);
        child.wait().await.expect("wait");
        raw.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let b = median(raw.clone());
    let v = median(herd.clone());
    line(
        "core.exit_to_completion_median",
        "ms",
        v,
        Some((b, "stdin close to tokio wait() return of a raw child")),
        Some(v / b),
        None,
        "stdin close to the completion event on subscribe(); includes the child's own exit",
    );
    let (p, bp) = (percentile(herd, 0.99), percentile(raw, 0.99));
    line(
        "core.exit_to_completion_p99",
        "ms",
        p,
        Some((bp, "raw child p99")),
        Some(p / bp),
        Some("<= raw p99 + 1 ms"),
        "",
    );
}

fn rss_kib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

async fn idle_memory() {
    let (_dir, registry) = fixture(|c| c.kill_grace = Duration::from_millis(200));
    // Warm up the runtime's own allocations before the first reading.
    let warm = registry
        .spawn(SpawnRequest {
            command: "true".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .expect("spawn");
    let _ = registry
        .wait(warm.session_id.as_str(), Duration::from_secs(10), None)
        .await;
    let before = rss_kib();
    for _ in 0..IDLE_SESSIONS {
        registry
            .spawn(SpawnRequest {
                command: "exec sleep 600".to_owned(),
                task_id: "idle".to_owned(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
    }
    let after = rss_kib();
    let per = (after - before) / IDLE_SESSIONS as f64;
    let killed_at = Instant::now();
    let n = registry
        .kill_all("idle", &[], KillSource::HostShutdown)
        .await;
    // A kill whose tree outlives its grace on a loaded machine reports
    // `KillIncomplete`; the figure is memory, so the count goes in the note.
    line(
        "core.idle_session_memory",
        "KiB",
        per,
        None,
        None,
        Some("<= 64 KiB"),
        &format!(
            "RSS growth over {IDLE_SESSIONS} idle sessions / {IDLE_SESSIONS}; kill_all of them took {:.0} ms and reported {n} killed",
            killed_at.elapsed().as_secs_f64() * 1e3
        ),
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // HERD_BENCH_ONLY=<substring> runs only the matching figures (for iteration).
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || name.contains(&only);
    runtime.block_on(async {
        if wanted("pipe_ingest") {
            pipe_ingest().await;
        }
        if wanted("pty_ingest") {
            pty_ingest().await;
        }
        if wanted("spawn_to_exit") {
            spawn_to_exit().await;
        }
        if wanted("exit_to_completion") {
            exit_to_completion().await;
        }
        if wanted("idle_memory") {
            idle_memory().await;
        }
    });
}
