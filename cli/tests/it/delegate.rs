//! A daemon in a delegated unit of herd's: started inside a cgroup named as
//! the scope it asks systemd for (`herd-…​.scope`), it moves itself into the leaf
//! `herd-daemon` and its sessions get cgroups beside the leaf, never inside it (cgroup
//! v2 lets only leaves hold processes once controllers are enabled). systemd does not
//! run here, so the scope is a real cgroup the test makes in the v2 hierarchy and
//! moves the daemon into before its exec; the asking itself is unit-tested in
//! `herd-core` (`dispatch::delegate`). Needs a writable v2 hierarchy (root); skips
//! with a reason otherwise, fails under `HERD_REQUIRE_CGROUP=1`.

use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use crate::support::{Env, HERD, wait_until};

/// The v2 mount point, from mountinfo.
fn v2_mount() -> Option<PathBuf> {
    let text = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    text.lines().find_map(|line| {
        let (left, right) = line.split_once(" - ")?;
        (right.split_whitespace().next()? == "cgroup2")
            .then(|| left.split_whitespace().nth(4).map(PathBuf::from))?
    })
}

/// The v2 cgroup of `pid` (its `0::` line).
fn cgroup_of(pid: &str) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .to_owned()
}

/// The stand-in scope, removed (with what herd made in it) once empty.
struct Scope {
    dir: PathBuf,
    /// Its path inside the hierarchy, as `/proc/PID/cgroup` names it.
    name: String,
}

impl Scope {
    #[allow(clippy::print_stderr, reason = "a skipped test says why")]
    fn new() -> Option<Scope> {
        let made = v2_mount().and_then(|mount| {
            let own = cgroup_of("self");
            let name = format!(
                "{}/herd-it-{}.scope",
                own.trim_end_matches('/'),
                std::process::id()
            );
            let dir = mount.join(name.trim_start_matches('/'));
            std::fs::create_dir(&dir).ok()?;
            Some(Scope { dir, name })
        });
        if made.is_none() {
            let why = "no writable cgroup v2 hierarchy here";
            if std::env::var("HERD_REQUIRE_CGROUP").as_deref() == Ok("1") {
                panic!("HERD_REQUIRE_CGROUP=1 but {why}");
            }
            eprintln!("skipped: {why}");
        }
        made
    }

    fn populated(&self) -> bool {
        std::fs::read_to_string(self.dir.join("cgroup.events"))
            .is_ok_and(|e| e.lines().any(|l| l == "populated 1"))
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let _ = wait_until(Duration::from_secs(20), || !self.populated());
        // Children first: herd-<uid>/<session>, herd-<uid>, herd-daemon.
        if let Ok(entries) = std::fs::read_dir(&self.dir) {
            for entry in entries.flatten().filter(|e| e.path().is_dir()) {
                if let Ok(inner) = std::fs::read_dir(entry.path()) {
                    for sub in inner.flatten().filter(|e| e.path().is_dir()) {
                        let _ = std::fs::remove_dir(sub.path());
                    }
                }
                let _ = std::fs::remove_dir(entry.path());
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// `herd serve` as a child of the test, killed on drop.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn b15_a_daemon_in_a_herd_scope_holds_a_leaf_and_puts_sessions_beside_it() {
    let Some(scope) = Scope::new() else {
        return;
    };
    let env = Env::new();
    let procs = scope.dir.join("cgroup.procs");
    let daemon = Serve(
        env.cmd_at(
            Path::new("sh"),
            &[
                "-c",
                "echo $$ > \"$1\" && exec \"$2\" serve",
                "sh",
                &procs.to_string_lossy(),
                HERD,
            ],
        )
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("sh runs"),
    );
    let leaf = format!("{}/herd-daemon", scope.name);
    let pid = daemon.0.id().to_string();
    wait_until(Duration::from_secs(20), || {
        cgroup_of(&pid) == leaf && env.daemon_pid().is_some() && env.socket().exists()
    })
    .unwrap_or_else(|()| panic!("the daemon never moved into {leaf}: {}", cgroup_of(&pid)));
    let marker = 36990;
    let info = env.json(&["run", "--json", "--", &format!("sleep {marker}")]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    let job = info["pid"].as_u64().expect("pid").to_string();
    let uid = nix::unistd::getuid().as_raw();
    let beside = format!("{}/herd-{uid}/{id}", scope.name);
    wait_until(Duration::from_secs(10), || cgroup_of(&job) == beside)
        .unwrap_or_else(|()| panic!("the job is in {}, not {beside}", cgroup_of(&job)));
    let doctor = env.ok(&["doctor"]);
    assert!(
        doctor.contains("holds the leaf") && doctor.contains("herd-daemon"),
        "doctor says where the daemon settled: {doctor}"
    );
    let killed = env.json(&["kill", &id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    env.ok(&["shutdown", "--yes"]);
    wait_until(Duration::from_secs(20), || !scope.populated())
        .expect("daemon, launcher, shim and job all leave the scope");
    drop(daemon);
}
