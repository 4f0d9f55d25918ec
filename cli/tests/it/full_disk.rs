//! A full disk: a home on a small tmpfs the test mounts and fills.
//!
//! Mounting needs root: without it a test says why on stderr and passes, and under
//! `HERD_REQUIRE_TMPFS=1` (which `.ci/run` sets; CI runs as root) it fails.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::Value;

use crate::support::{Env, raw_command, stderr, stdout};

/// The tmpfs's size: room for the daemon's files and a few small jobs.
const TMPFS_BYTES: u64 = 8 << 20;

/// A home on its own tmpfs; the daemon is stopped (`env` drops first) before the
/// tmpfs is unmounted.
struct DiskEnv {
    env: Env,
    mount: Mount,
}

struct Mount {
    at: PathBuf,
}

impl Drop for Mount {
    fn drop(&mut self) {
        // Lazily, so a process a failed test left behind does not keep it mounted.
        let _ = raw_command(Path::new("umount"))
            .args(["-l"])
            .arg(&self.at)
            .output();
    }
}

/// Says why a test cannot run here: a failure under `HERD_REQUIRE_TMPFS=1`.
#[expect(
    clippy::print_stderr,
    reason = "a skipped tmpfs test says so and what it needs"
)]
fn skipped(why: &str) {
    if std::env::var("HERD_REQUIRE_TMPFS").as_deref() == Ok("1") {
        panic!("HERD_REQUIRE_TMPFS=1 but {why}");
    }
    eprintln!("skipped: {why}");
}

impl DiskEnv {
    /// A fresh home on a fresh tmpfs, or `None` (said why) where mounting is not
    /// allowed.
    fn new() -> Option<DiskEnv> {
        let env = Env::new();
        if !nix::unistd::geteuid().is_root() {
            skipped("mounting a tmpfs needs root");
            return None;
        }
        let at = env.home().to_path_buf();
        let out = raw_command(Path::new("mount"))
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={TMPFS_BYTES},mode=0700"))
            .args(["herd-it-tmpfs"])
            .arg(&at)
            .stdin(Stdio::null())
            .output();
        match out {
            Ok(out) if out.status.success() => Some(DiskEnv {
                env,
                mount: Mount { at },
            }),
            Ok(out) => {
                skipped(&format!("mount -t tmpfs failed: {}", stderr(&out)));
                None
            }
            Err(err) => {
                skipped(&format!("mount cannot run: {err}"));
                None
            }
        }
    }

    fn filler(&self) -> PathBuf {
        self.mount.at.join("filler")
    }

    /// Fills the tmpfs until a write fails for want of space.
    fn fill(&self) {
        let mut file = std::fs::File::create(self.filler()).expect("the filler opens");
        let block = vec![0u8; 64 << 10];
        loop {
            if let Err(err) = file.write_all(&block) {
                assert_eq!(err.raw_os_error(), Some(nix::libc::ENOSPC), "{err}");
                break;
            }
        }
        // The last partial page too.
        while file.write_all(&[0u8; 512]).is_ok() {}
    }

    fn free(&self) {
        std::fs::remove_file(self.filler()).expect("the filler is removed");
    }
}

/// Starts a notified job of `owner` that waits for `go` to exist, then runs `then`.
fn gated_job(env: &Env, owner: &str, go: &Path, then: &str) -> String {
    let command = format!(
        "while [ ! -e '{}' ]; do sleep 0.05; done; {then}",
        go.display()
    );
    env.start_json(&["--notify", "--owner", owner, "--", &command])
}

fn completions(env: &Env, owner: &str) -> Vec<Value> {
    env.ok(&["events", "--json", "--owner", owner])
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).expect("a JSON line"))
        .filter(|e| e["type"] == "completion")
        .collect()
}

/// A job that ends while the disk is full keeps its real exit code: after space is
/// freed and the daemon crashes and restarts, `wait` and `poll` say `exited 9`, and
/// exactly one completion is delivered, never `lost`.
#[test]
fn b28_a_job_ending_on_a_full_disk_keeps_its_exit_code_across_a_restart() {
    let Some(disk) = DiskEnv::new() else {
        return;
    };
    let env = &disk.env;
    let owner = "full";
    let go = env.scratch().join("go");
    let id = gated_job(env, owner, &go, "echo done; exit 9");
    disk.fill();
    std::fs::write(&go, b"").expect("go");
    let waited = env.run(&["wait", "--json", &id]);
    let answer: Value = serde_json::from_slice(&waited.stdout).expect("wait answers JSON");
    assert_eq!(answer["exit_code"], 9, "{answer}");
    assert_eq!(answer["completion_reason"], "exited", "{answer}");
    disk.free();
    env.crash_daemon();
    // The next daemon finds the job's end in its supervisor's exit record (written
    // once there was room) or in the ledger: the same code, once.
    let waited = env.run(&["wait", "--json", &id]);
    let answer: Value = serde_json::from_slice(&waited.stdout).expect("wait answers JSON");
    assert_eq!(answer["exit_code"], 9, "after the restart: {answer}");
    let polled = env.poll_json(&id);
    assert_eq!(polled["exit_code"], 9, "{polled}");
    assert_eq!(polled["completion_reason"], "exited", "{polled}");
    let mut got = completions(env, owner);
    got.extend(completions(env, owner));
    let mine: Vec<&Value> = got
        .iter()
        .filter(|e| e["session_id"] == id.as_str())
        .collect();
    assert_eq!(mine.len(), 1, "exactly one completion: {got:?}");
    assert_eq!(mine[0]["exit_code"], 9, "{got:?}");
    assert_eq!(mine[0]["completion_reason"], "exited", "{got:?}");
}

/// On a full disk the daemon starts and serves: `ps` lists a running job, `kill`
/// stops it, `doctor` runs, and a spawn is refused with the free space and the
/// path named; once space is back, spawns work again.
#[test]
fn a_daemon_on_a_full_disk_serves_and_refuses_spawns_naming_the_free_space() {
    let Some(disk) = DiskEnv::new() else {
        return;
    };
    let env = &disk.env;
    let info = env.json(&["run", "--json", "--", "sleep 600"]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    env.ok(&["shutdown", "--keep-jobs"]);
    disk.fill();
    // A daemon started on the full disk.
    assert!(env.ps_row(&[], &id).is_some(), "{id} not listed");
    let refused = env.run(&["run", "--", "echo never"]);
    assert_eq!(refused.status.code(), Some(1), "{}", stderr(&refused));
    let why = stderr(&refused);
    let logs_dir = env.home().join("logs").join("sessions");
    assert!(
        why.contains("free") && why.contains(&logs_dir.display().to_string()),
        "the refusal names the free space and the path: {why}"
    );
    let doctor = env.run(&["doctor"]);
    assert!(
        stdout(&doctor).contains("daemon pid"),
        "doctor reaches the daemon: {}",
        stdout(&doctor)
    );
    let killed = env.run(&["kill", &id]);
    assert!(killed.status.success(), "{}", stderr(&killed));
    disk.free();
    env.ok(&["run", "--", "true"]);
}

/// Output the disk could not keep is flagged on every route that shows it: `wait`,
/// `poll` and the completion carry `bytes_not_kept` (and the CLI says so on
/// stderr), `logs` says so on stderr and in its JSON.
#[test]
fn b5_output_cut_by_a_full_disk_is_flagged_on_wait_logs_and_poll() {
    let Some(disk) = DiskEnv::new() else {
        return;
    };
    let env = &disk.env;
    let go = env.scratch().join("go");
    let id = gated_job(
        env,
        "cut",
        &go,
        "echo before; head -c 300000 /dev/zero | tr '\\0' y; echo; exit 0",
    );
    disk.fill();
    std::fs::write(&go, b"").expect("go");
    let waited = env.run(&["wait", "--json", &id]);
    let answer: Value = serde_json::from_slice(&waited.stdout).expect("wait answers JSON");
    let n = answer["bytes_not_kept"].as_u64().unwrap_or(0);
    assert!(n > 0, "wait says bytes were not kept: {answer}");
    let human = env.run(&["wait", &id]);
    assert!(
        stderr(&human).contains("output incomplete"),
        "{}",
        stderr(&human)
    );
    let polled = env.poll_json(&id);
    assert_eq!(polled["bytes_not_kept"].as_u64(), Some(n), "{polled}");
    let human = env.run(&["poll", &id]);
    assert!(
        stderr(&human).contains("output incomplete"),
        "{}",
        stderr(&human)
    );
    let logs = env.run(&["logs", &id]);
    assert!(
        stderr(&logs).contains("output incomplete"),
        "{}",
        stderr(&logs)
    );
    let logs = env.json(&["logs", "--json", &id]);
    assert_eq!(logs["bytes_not_kept"].as_u64(), Some(n), "{logs}");
    // The completion an agent gets says so too.
    let got = completions(env, "cut");
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["bytes_not_kept"].as_u64(), Some(n), "{got:?}");
    disk.free();
}
