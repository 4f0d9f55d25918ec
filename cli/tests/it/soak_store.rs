//! Soak of the store: the time from a daemon's SIGKILL to the next
//! daemon's first answer (`herd ps`, which starts it) with many finished sessions in
//! the store and many running ones to restore. Compiled only without debug
//! assertions: `cargo xtask soak` runs it (sizes from `HERD_SOAK_STORE_*`).
//!
//! The finished sessions are written into `state.db` as the daemon would (their
//! receipts), which is what a restart reads of them; the running ones are real jobs
//! under real shims, started through the daemon.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use herd_persistence::{Home, ReceiptStore, ResultReceipt, Stored};
use serde_json::{Value, json};

use crate::soak::{figure, size};
use crate::support::{Env, alive, wait_until};

/// `n` finished sessions' receipts, as the daemon stores them (a line of output
/// each), in batches of one transaction.
fn store_finished(env: &Env, n: usize) {
    let store = ReceiptStore::new(&Home::new(env.home()));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64());
    let batch: Vec<Stored> = (0..n)
        .map(|i| Stored {
            receipt: {
                let finished_at = now - 3000.0 + i as f64 * 0.1;
                let mut r = ResultReceipt::exited(
                    &format!("proc_{i:012x}"),
                    &format!("make test-{i}"),
                    i32::from(i % 7 == 0),
                    finished_at,
                );
                r.started_at = finished_at - 600.0;
                r.task_id = "soak".to_owned();
                r.owner_task_id = format!("owner-{}", i % 50);
                r.output = format!("test-{i}: 12 passed\n");
                r
            },
            spawn: None,
        })
        .collect();
    for chunk in batch.chunks(1000) {
        store.store_all(chunk).expect("the receipts are stored");
    }
}

fn call(
    reader: &mut BufReader<UnixStream>,
    writer: &mut UnixStream,
    n: u64,
    method: &str,
    params: Value,
) -> Value {
    let request = json!({"jsonrpc": "2.0", "id": n, "method": method, "params": params});
    writer
        .write_all(format!("{request}\n").as_bytes())
        .expect("the daemon reads");
    let mut line = String::new();
    reader.read_line(&mut line).expect("the daemon answers");
    serde_json::from_str(&line).expect("JSON")
}

fn n_running(env: &Env) -> usize {
    let listed = env.json(&["ps", "--owner", "soak", "--json"]);
    listed["processes"].as_array().map_or(0, |rows| {
        rows.iter().filter(|r| r["status"] == "running").count()
    })
}

#[test]
fn soak_restart_after_a_sigkill_with_10000_finished_and_1000_running() {
    let finished = usize::try_from(size("HERD_SOAK_STORE_FINISHED", 10_000)).unwrap_or(usize::MAX);
    let running = usize::try_from(size("HERD_SOAK_STORE_RUNNING", 1_000)).unwrap_or(usize::MAX);
    let env = Env::new();
    env.ok(&["ps"]);
    store_finished(&env, finished);
    let stream = UnixStream::connect(env.socket()).expect("the socket accepts");
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .expect("a timeout");
    let mut reader = BufReader::new(stream.try_clone().expect("clone"));
    let mut writer = stream;
    let hello = call(
        &mut reader,
        &mut writer,
        0,
        "hello",
        json!({"protocol": 1, "client": "soak"}),
    );
    assert!(hello["result"]["pid"].is_u64(), "{hello}");
    for n in 0..running {
        let spawned = call(
            &mut reader,
            &mut writer,
            n as u64 + 1,
            "spawn",
            json!({"command": "sleep 900", "owner": "soak"}),
        );
        assert!(spawned["result"]["session_id"].is_string(), "{spawned}");
    }
    drop((reader, writer));
    assert_eq!(n_running(&env), running);

    let daemon = env.daemon_pid().expect("the daemon's pid");
    let killed = Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(daemon),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the daemon can be signalled");
    wait_until(Duration::from_secs(10), || !alive(daemon)).expect("the daemon died");
    let out = env.run(&["ps", "--json"]);
    let took = killed.elapsed();
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let after = n_running(&env);
    let rss_kib = env.daemon_pid().map_or(0, |pid| {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("VmRSS:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            })
            .unwrap_or(0)
    });
    figure(&format!(
        "restart after SIGKILL with {finished} finished and {running} running: `herd ps` answered {:.2} s after the kill; {after} running listed; daemon RSS {} MiB",
        took.as_secs_f64(),
        rss_kib / 1024
    ));
    assert_eq!(after, running, "every running session was restored");
    env.ok(&["shutdown", "--yes"]);
}
