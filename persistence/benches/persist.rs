//! Benchmark: checkpoint writes, ledger commits and restore reads.
//!
//! Prints one `herd-bench {json}` line per figure (the protocol `cargo xtask
//! bench` reads). Every figure is measured next to a same-run baseline on the
//! same file system (the system temp dir), so the ratio says what our
//! durability and bookkeeping cost over the bare operation:
//!
//! - `persistence.checkpoint_write_1000`: `write_own` of 1,000 running
//!   sessions (one SQLite transaction under the writer's lock), median;
//!   baseline a plain `fs::write` of the same rows as one JSON document.
//! - `persistence.ledger_commit_median` / `_p99`: one `Ledger::commit`
//!   (SQLite WAL, `synchronous=FULL`); baseline a 200-byte write plus fsync of
//!   a small file, at the same percentile.
//! - `persistence.checkpoint_load_1000`: `load` of a 1,000-session
//!   checkpoint, median; baseline `fs::read` plus parsing that JSON document
//!   into a `serde_json::Value`.
#![allow(
    clippy::print_stdout,
    reason = "the herd-bench line protocol is read by xtask"
)]

use std::fs::{self, File};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use herd_persistence::{
    CheckpointStore, CompletionRecord, Home, Ledger, Mode, SessionRecord, Writer,
};

const N_SESSIONS: usize = 1_000;
const CHECKPOINT_RUNS: usize = 25;
const LOAD_RUNS: usize = 40;
const COMMITS: usize = 400;

fn session(n: usize) -> SessionRecord {
    SessionRecord {
        id: format!("proc_{n:012x}"),
        command: format!("npm run build -- --project app-{n} --watch"),
        pid: 10_000 + i32::try_from(n).expect("small"),
        pgid: 10_000 + i32::try_from(n).expect("small"),
        start_time: Some(123_456 + n as u64),
        task_id: "task-abc".to_owned(),
        owner_task_id: "sa-child-42".to_owned(),
        session_key: "agent:main:telegram:12345".to_owned(),
        mode: if n.is_multiple_of(3) {
            Mode::Pty
        } else {
            Mode::Pipe
        },
        notify: n.is_multiple_of(2),
        watch_patterns: vec!["ERROR".to_owned(), "Compiled successfully".to_owned()],
        heartbeat_seconds: 300,
        completion_output_chars: 2000,
        persist_on_release: n.is_multiple_of(5),
        log_path: PathBuf::from(format!("/home/user/.herd/logs/sessions/proc_{n:012x}.log")),
        cwd: Some(PathBuf::from("/home/user/projects/app")),
        started_at: 1_790_000_000.0 + n as f64,
        shim: None,
        name: None,
        options: None,
        command_given: None,
        runs: None,
    }
}

fn completion(n: usize) -> CompletionRecord {
    CompletionRecord {
        completion_id: format!("cmp_{n:08}"),
        session_id: format!("proc_{n:012x}"),
        owner_task_id: "owner".to_owned(),
        task_id: "task".to_owned(),
        session_key: "agent:main".to_owned(),
        event: serde_json::json!({
            "type": "completion",
            "session_id": format!("proc_{n:012x}"),
            "exit_code": 0,
            "completion_reason": "exited",
            "output": "x".repeat(2000),
        }),
        created_at: 1_790_000_000.0,
    }
}

fn percentile(samples: &mut [Duration], p: f64) -> f64 {
    samples.sort();
    let idx = ((samples.len() - 1) as f64 * p).round() as usize;
    samples[idx].as_secs_f64() * 1e3
}

fn time(mut f: impl FnMut()) -> Duration {
    let start = Instant::now();
    f();
    start.elapsed()
}

fn emit(name: &str, value: f64, baseline: f64, baseline_name: &str, target: &str, note: &str) {
    let line = serde_json::json!({
        "name": name,
        "unit": "ms",
        "value": value,
        "baseline": baseline,
        "baseline_name": baseline_name,
        "ratio": value / baseline,
        "target": target,
        "note": note,
    });
    println!("herd-bench {line}");
}

fn main() {
    let tmp = tempfile::tempdir().expect("create a temp dir for the benchmark");
    let home = Home::new(tmp.path());
    let store = CheckpointStore::new(&home);
    let me = Writer::current();
    let records: Vec<SessionRecord> = (0..N_SESSIONS).map(session).collect();

    // Checkpoint write with 1,000 running sessions.
    store.write_own(&me, &records, &[]).expect("warm-up write");
    // The checkpoint is an SQLite table; the baselines write and read the same
    // rows as one JSON document (what a plain file store would keep).
    let bytes = serde_json::to_vec(&serde_json::json!({ "sessions": records }))
        .expect("the records serialise");
    let mut ours: Vec<Duration> = (0..CHECKPOINT_RUNS)
        .map(|_| {
            time(|| {
                store
                    .write_own(&me, &records, &[])
                    .expect("checkpoint write");
            })
        })
        .collect();
    let plain_path = tmp.path().join("plain.json");
    let mut plain: Vec<Duration> = (0..CHECKPOINT_RUNS)
        .map(|_| time(|| fs::write(&plain_path, &bytes).expect("plain write")))
        .collect();
    emit(
        "persistence.checkpoint_write_1000",
        percentile(&mut ours, 0.5),
        percentile(&mut plain, 0.5),
        "fs::write of the same rows as JSON (no fsync, no lock)",
        "<= 50 ms",
        &format!("{} bytes of JSON for the baseline", bytes.len()),
    );

    // Load of a 1,000-session checkpoint.
    let mut ours: Vec<Duration> = (0..LOAD_RUNS)
        .map(|_| {
            time(|| {
                let loaded = store.load().expect("load");
                assert_eq!(loaded.entries.len(), N_SESSIONS);
            })
        })
        .collect();
    let mut plain: Vec<Duration> = (0..LOAD_RUNS)
        .map(|_| {
            time(|| {
                let bytes = fs::read(&plain_path).expect("read");
                let value: serde_json::Value = serde_json::from_slice(&bytes).expect("parse");
                assert!(value.is_object());
            })
        })
        .collect();
    emit(
        "persistence.checkpoint_load_1000",
        percentile(&mut ours, 0.5),
        percentile(&mut plain, 0.5),
        "fs::read + serde_json::Value parse of the same rows as JSON",
        "<= 50 ms",
        "restore's read half; classifying pids is herd-core's",
    );

    // Ledger commit latency.
    let ledger = Ledger::create(&home).expect("create the ledger");
    let mut commits: Vec<Duration> = (0..COMMITS)
        .map(|n| {
            let record = completion(n);
            time(|| {
                ledger.commit(&record).expect("commit");
            })
        })
        .collect();
    let fsync_path = tmp.path().join("small");
    let payload = [b'x'; 200];
    let mut fsyncs: Vec<Duration> = (0..COMMITS)
        .map(|_| {
            time(|| {
                let mut file = File::options()
                    .create(true)
                    .append(true)
                    .open(&fsync_path)
                    .expect("open small file");
                file.write_all(&payload).expect("write");
                file.sync_all().expect("fsync");
            })
        })
        .collect();
    let mut commits_p99 = commits.clone();
    let mut fsyncs_p99 = fsyncs.clone();
    emit(
        "persistence.ledger_commit_median",
        percentile(&mut commits, 0.5),
        percentile(&mut fsyncs, 0.5),
        "append 200 bytes + fsync of a small file, median",
        "<= 3x baseline",
        "SQLite WAL, synchronous=FULL, 2 KB event",
    );
    emit(
        "persistence.ledger_commit_p99",
        percentile(&mut commits_p99, 0.99),
        percentile(&mut fsyncs_p99, 0.99),
        "append 200 bytes + fsync of a small file, p99",
        "<= 5x baseline",
        "SQLite WAL, synchronous=FULL, 2 KB event",
    );
}
