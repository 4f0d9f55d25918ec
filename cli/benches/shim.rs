//! Benchmark: sessions under their `herd-shim` supervisor, against raw baselines
//! measured in the same run.
//!
//! A registry is driven in this process with `RegistryConfig::shim` set to the
//! `herd-shim` Cargo built for this bench, exactly as the daemon runs it (its shims are
//! forked by the launcher). A shim's CPU time is sampled from `/proc/<pid>/stat`
//! every 2 ms while it lives (the last 2 ms are not counted); `cat`'s is read from
//! its zombie before it is reaped.
//!
//! Figures (one `herd-bench` line each):
//! - `shim.ingest_1gib_tmpfs`: `yes <50-byte line> | head -c 1GiB` through herd
//!   (spawn → wait, home on /dev/shm) against the same writer into `cat > file` on
//!   /dev/shm; paired runs, the ratio is cat's time over herd's (target >= 0.9); the
//!   note gives the CPU seconds per GiB of shim + registry against cat's;
//! - `shim.pty_ingest_64mib`: 64 MiB through a PTY session against a raw PTY reader
//!   (target >= 0.9);
//! - `shim.spawn_to_exit_true`: spawn → wait of `true` against tokio spawn+wait of
//!   `bash -c true` (target <= 1.3);
//! - `shim.private_memory`: Private_Clean + Private_Dirty of a shim holding a running
//!   `sleep` (target <= 1 MiB);
//! - `shim.registry_rss_1000_running`: the registry's RSS growth with 1,000 running
//!   supervised sessions;
//! - `shim.new_job_p99_beside_many`: spawn → completion of a new job while N PTY and
//!   N pipe sessions run (N = `HERD_BENCH_SCALE`, default 2,000).
//!
//! `HERD_BENCH_ONLY=<substring>` runs only the matching figures.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use herd_core::{Event, Home, KillSource, Mode, Registry, RegistryConfig, SpawnRequest};
use serde_json::{Value, json};

const SHIM: &str = env!("CARGO_BIN_EXE_herd-shim");
const INGEST_BYTES: u64 = 1 << 30;
const INGEST_PAIRS: usize = 5;
const PTY_BYTES: u64 = 64 << 20;
const PTY_RUNS: usize = 3;
const SPAWNS: usize = 200;
const RUNNING: usize = 1_000;
/// A 50-byte log line (49 characters and the newline `yes` adds).
const LINE: &str = "herd-bench ingest line 0123456789 abcdefghijklmnop";

fn report(
    name: &str,
    unit: &str,
    value: f64,
    baseline: Option<(f64, &str)>,
    ratio: Option<f64>,
    target: &str,
    note: &str,
) {
    let line = json!({
        "name": name, "unit": unit, "value": value,
        "baseline": baseline.map(|b| b.0), "baseline_name": baseline.map(|b| b.1),
        "ratio": ratio, "target": (!target.is_empty()).then_some(target), "note": note,
    });
    println!("herd-bench {line}");
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let idx = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[idx.min(v.len() - 1)]
}

fn spread(v: &[f64]) -> String {
    let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    format!("{lo:.2}-{hi:.2}")
}

/// A registry under a temp home in `parent` whose sessions run under shims.
fn fixture(
    parent: Option<&Path>,
    tune: impl FnOnce(&mut RegistryConfig),
) -> (tempfile::TempDir, Registry) {
    let dir = match parent {
        Some(p) => tempfile::tempdir_in(p),
        None => tempfile::tempdir(),
    }
    .expect("temp dir");
    let mut config = RegistryConfig {
        shim: Some(PathBuf::from(SHIM)),
        ..RegistryConfig::default()
    };
    tune(&mut config);
    let registry = Registry::new(Home::new(dir.path()), config).expect("inside a runtime");
    (dir, registry)
}

#[expect(clippy::disallowed_methods, reason = "raw baselines")]
fn raw(program: &str) -> std::process::Command {
    std::process::Command::new(program)
}

/// utime + stime of a process (its own, not its children's), in seconds.
fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit(')').next()?.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    // SAFETY: sysconf reads a constant of the system.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    Some(ticks / hz)
}

fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| {
            s.rsplit(')')
                .next()
                .map(|r| r.trim_start().starts_with('Z'))
        })
        .unwrap_or(false)
}

/// Waits for our child `pid` to become a zombie, reads its CPU time, reaps it.
fn reap_with_cpu(pid: i32) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !is_zombie(pid) && Instant::now() < deadline {
        std::thread::park_timeout(Duration::from_millis(1));
    }
    let cpu = cpu_seconds(pid).unwrap_or(f64::NAN);
    let _ = nix::sys::wait::waitpid(nix::unistd::Pid::from_raw(pid), None);
    cpu
}

fn own_cpu() -> f64 {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    t(usage.user_time()) + t(usage.system_time())
}

fn shim_pid(home: &Path, id: &str) -> i32 {
    let text = std::fs::read_to_string(home.join("run/shims").join(id).join("info.json"))
        .expect("info.json");
    let info: Value = serde_json::from_str(&text).expect("JSON");
    i32::try_from(info["shim_pid"].as_i64().expect("shim_pid")).expect("pid")
}

fn writer_command() -> String {
    format!("yes '{LINE}' | head -c {INGEST_BYTES}")
}

async fn ingest() {
    let shm = Path::new("/dev/shm");
    let on_tmpfs = shm.is_dir();
    let mut ratios = Vec::new();
    let mut herd_cpu = Vec::new();
    let mut shim_only = Vec::new();
    let mut cat_cpu = Vec::new();
    let mut herd_mbs = Vec::new();
    for _ in 0..INGEST_PAIRS {
        let (dir, registry) = fixture(on_tmpfs.then_some(shm), |c| c.log_cap_bytes = 2 << 30);
        let cpu_before = own_cpu();
        let started = Instant::now();
        let info = registry
            .spawn(SpawnRequest {
                command: writer_command(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
        let shim = shim_pid(dir.path(), info.session_id.as_str());
        // The shim is the launcher's child, reaped by it the moment it ends: its CPU
        // time is sampled every 2 ms while it lives, and the last sample is taken.
        let sampler = tokio::task::spawn_blocking(move || {
            let mut last = 0.0;
            while let Some(cpu) = cpu_seconds(shim) {
                last = cpu;
                std::thread::park_timeout(Duration::from_millis(2));
            }
            last
        });
        let answer = registry
            .wait(info.session_id.as_str(), Duration::from_secs(170), None)
            .await
            .expect("wait");
        let herd_s = started.elapsed().as_secs_f64();
        let registry_cpu = own_cpu() - cpu_before;
        assert_eq!(answer.exit_code, Some(0));
        let shim_cpu = sampler.await.expect("join");
        herd_cpu.push(shim_cpu + registry_cpu);
        shim_only.push(shim_cpu);
        herd_mbs.push(INGEST_BYTES as f64 / herd_s / 1e6);
        drop(registry);
        drop(dir);

        let target = tempfile::NamedTempFile::new_in(if on_tmpfs { shm } else { Path::new(".") })
            .expect("target");
        let started = Instant::now();
        let mut writer = raw("bash")
            .args(["-c", &writer_command()])
            .stdout(Stdio::piped())
            .spawn()
            .expect("writer");
        let out = writer.stdout.take().expect("piped");
        let cat = raw("cat")
            .stdin(Stdio::from(out))
            .stdout(Stdio::from(target.reopen().expect("reopen")))
            .spawn()
            .expect("cat");
        let cat_pid = i32::try_from(cat.id()).expect("pid");
        let cpu = tokio::task::spawn_blocking(move || reap_with_cpu(cat_pid))
            .await
            .expect("join");
        // Reaped by `reap_with_cpu` after its CPU time was read from the zombie.
        std::mem::forget(cat);
        let cat_s = started.elapsed().as_secs_f64();
        let _ = writer.wait();
        assert_eq!(
            std::fs::metadata(target.path()).expect("stat").len(),
            INGEST_BYTES
        );
        cat_cpu.push(cpu);
        ratios.push(cat_s / herd_s);
    }
    let per_gib = |v: &[f64]| median(v.to_vec()) * (1u64 << 30) as f64 / INGEST_BYTES as f64;
    report(
        "shim.ingest_1gib_tmpfs",
        "ratio",
        median(ratios.clone()),
        None,
        Some(median(ratios.clone())),
        ">= 0.9",
        &format!(
            "median of {INGEST_PAIRS} paired runs (spread {}), cat's time / herd's; herd {:.0} MB/s; CPU s/GiB shim+registry {:.2} (spread {}; the shim alone {:.2}) vs cat {:.2} (spread {}); {}",
            spread(&ratios),
            median(herd_mbs),
            per_gib(&herd_cpu),
            spread(&herd_cpu),
            per_gib(&shim_only),
            per_gib(&cat_cpu),
            spread(&cat_cpu),
            if on_tmpfs {
                "home and cat target on /dev/shm"
            } else {
                "no /dev/shm: on disk"
            }
        ),
    );
}

async fn pty_ingest() {
    let mut herd = Vec::new();
    let mut raw_runs = Vec::new();
    for _ in 0..PTY_RUNS {
        let (_dir, registry) = fixture(None, |_| {});
        let started = Instant::now();
        let info = registry
            .spawn(SpawnRequest {
                command: format!("head -c {PTY_BYTES} /dev/zero"),
                mode: Mode::pty(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
        registry
            .wait(info.session_id.as_str(), Duration::from_secs(170), None)
            .await
            .expect("wait");
        herd.push(PTY_BYTES as f64 / started.elapsed().as_secs_f64() / 1e6);

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
            cmd.args(["-c", &format!("head -c {PTY_BYTES} /dev/zero")]);
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
        raw_runs.push(PTY_BYTES as f64 / started.elapsed().as_secs_f64() / 1e6);
    }
    let ratios = herd_test_support::bench::paired_ratios(&herd, &raw_runs);
    let (v, b) = (median(herd), median(raw_runs));
    report(
        "shim.pty_ingest_64mib",
        "MB/s",
        v,
        Some((b, "portable-pty blocking reader of the same child")),
        Some(v / b),
        ">= 0.9",
        &format!(
            "the shim runs the query responder and writes the log; paired ratios {}",
            spread(&ratios)
        ),
    );
}

async fn spawn_to_exit() {
    let (_dir, registry) = fixture(None, |_| {});
    let mut herd = Vec::new();
    let mut answered = Vec::new();
    let mut base = Vec::new();
    for _ in 0..SPAWNS {
        let started = Instant::now();
        let info = registry
            .spawn(SpawnRequest {
                command: "true".to_owned(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
        answered.push(started.elapsed().as_secs_f64() * 1e3);
        registry
            .wait(info.session_id.as_str(), Duration::from_secs(30), None)
            .await
            .expect("wait");
        herd.push(started.elapsed().as_secs_f64() * 1e3);
        let started = Instant::now();
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .status()
            .await
            .expect("bash");
        assert!(status.success());
        base.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let (v, b) = (median(herd.clone()), median(base));
    report(
        "shim.spawn_to_exit_true",
        "ms",
        v,
        Some((b, "tokio spawn+wait of bash -c true")),
        Some(v / b),
        "<= 1.3",
        &format!(
            "median of {SPAWNS}; p90 {:.2} ms; the spawn answers after {:.2} ms (shim started, job running, attached); the shim runs `true` directly and records the exit",
            percentile(herd, 0.9),
            median(answered)
        ),
    );
}

fn smaps_private_kib(pid: i32) -> f64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).expect("smaps_rollup");
    text.lines()
        .filter(|l| l.starts_with("Private_Clean:") || l.starts_with("Private_Dirty:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        .sum()
}

fn rss_kib() -> f64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS line")
}

async fn memory() {
    let (dir, registry) = fixture(None, |c| c.kill_grace = Duration::from_millis(200));
    let mut samples = Vec::new();
    for _ in 0..5 {
        let info = registry
            .spawn(SpawnRequest {
                command: "exec sleep 60".to_owned(),
                task_id: "mem".to_owned(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
        samples.push(smaps_private_kib(shim_pid(
            dir.path(),
            info.session_id.as_str(),
        )));
    }
    registry
        .kill_all("mem", &[], KillSource::HostShutdown)
        .await;
    report(
        "shim.private_memory",
        "KiB",
        median(samples.clone()),
        None,
        None,
        "<= 1024",
        &format!(
            "Private_Clean + Private_Dirty of a shim holding `sleep` (smaps_rollup), 5 shims, spread {}",
            spread(&samples)
        ),
    );

    let before = rss_kib();
    let started = Instant::now();
    for _ in 0..RUNNING {
        registry
            .spawn(SpawnRequest {
                command: "exec sleep 600".to_owned(),
                task_id: "many".to_owned(),
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn");
    }
    let spawned = started.elapsed().as_secs_f64();
    let after = rss_kib();
    let killed_at = Instant::now();
    let n = registry
        .kill_all("many", &[], KillSource::HostShutdown)
        .await;
    assert_eq!(n, RUNNING);
    report(
        "shim.registry_rss_1000_running",
        "MB",
        after / 1024.0,
        Some((before / 1024.0, "RSS before the 1,000 sessions")),
        None,
        "",
        &format!(
            "{:.1} KiB per running supervised session; spawning them took {spawned:.1} s, kill_all {:.1} s",
            (after - before) / RUNNING as f64,
            killed_at.elapsed().as_secs_f64()
        ),
    );
}

async fn scale() {
    let n: usize = std::env::var("HERD_BENCH_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2_000);
    let (_dir, registry) = fixture(None, |c| {
        c.kill_grace = Duration::from_millis(200);
        c.finished_cap = 100_000;
    });
    let started = Instant::now();
    for i in 0..2 * n {
        registry
            .spawn(SpawnRequest {
                command: "exec sleep 900".to_owned(),
                task_id: "crowd".to_owned(),
                mode: if i % 2 == 0 { Mode::pty() } else { Mode::Pipe },
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn beside the crowd");
    }
    let crowd_s = started.elapsed().as_secs_f64();
    let mut events = registry.subscribe();
    let mut latencies = Vec::new();
    for i in 0..50 {
        let started = Instant::now();
        let info = registry
            .spawn(SpawnRequest {
                command: "echo hi".to_owned(),
                mode: if i % 2 == 0 { Mode::pty() } else { Mode::Pipe },
                notify: true,
                ..SpawnRequest::default()
            })
            .await
            .expect("spawn a new job");
        loop {
            match tokio::time::timeout(Duration::from_secs(30), events.recv()).await {
                Ok(Ok(Event::Completion { session_id, .. })) if session_id == info.session_id => {
                    break;
                }
                Ok(Ok(_)) => {}
                other => panic!(
                    "no completion for a new job beside {} sessions: {other:?}",
                    2 * n
                ),
            }
        }
        latencies.push(started.elapsed().as_secs_f64() * 1e3);
    }
    let killed_at = Instant::now();
    registry
        .kill_all("crowd", &[], KillSource::HostShutdown)
        .await;
    report(
        "shim.new_job_p99_beside_many",
        "ms",
        percentile(latencies.clone(), 0.99),
        None,
        None,
        "",
        &format!(
            "spawn -> completion of 50 new jobs (PTY and pipe) beside {n} PTY + {n} pipe sessions; median {:.1} ms; starting the crowd took {crowd_s:.0} s, killing it {:.0} s",
            median(latencies),
            killed_at.elapsed().as_secs_f64()
        ),
    );
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let only = std::env::var("HERD_BENCH_ONLY").unwrap_or_default();
    let wanted = |name: &str| only.is_empty() || name.contains(&only);
    runtime.block_on(async {
        if wanted("ingest_1gib") {
            ingest().await;
        }
        if wanted("pty_ingest") {
            pty_ingest().await;
        }
        if wanted("spawn_to_exit") {
            spawn_to_exit().await;
        }
        if wanted("memory") || wanted("rss") {
            memory().await;
        }
        if wanted("beside_many") {
            scale().await;
        }
    });
}
