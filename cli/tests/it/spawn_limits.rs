//! A spawn the host refuses for want of processes fails promptly with an error that
//! names the limit (B1, B35): run the real daemon in a v1 `pids` cgroup whose
//! `pids.max` leaves room for a few jobs, start `sleep`s until one is refused, and
//! check that the refusal came within its deadline and says what to do. Needs root and
//! the v1 pids hierarchy; skips with a reason otherwise, fails under
//! `HERD_REQUIRE_CGROUP=1`.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use crate::support::{Env, HERD, stderr};

const PIDS_V1: &str = "/sys/fs/cgroup/pids";

/// A v1 pids cgroup of this test's; removed on drop once empty.
struct PidsGroup(PathBuf);

impl PidsGroup {
    #[allow(clippy::print_stderr, reason = "a skipped test says why")]
    fn new() -> Option<PidsGroup> {
        let path =
            PathBuf::from(PIDS_V1).join(format!("herd-it-spawn-limit-{}", std::process::id()));
        match std::fs::create_dir(&path) {
            Ok(()) => Some(PidsGroup(path)),
            Err(error) => {
                let why = format!("no writable v1 pids hierarchy at {PIDS_V1}: {error}");
                if std::env::var("HERD_REQUIRE_CGROUP").as_deref() == Ok("1") {
                    panic!("HERD_REQUIRE_CGROUP=1 but {why}");
                }
                eprintln!("skipped: {why}");
                None
            }
        }
    }

    fn write(&self, file: &str, value: &str) {
        std::fs::write(self.0.join(file), value).expect("the pids cgroup takes the write");
    }

    fn current(&self) -> u64 {
        std::fs::read_to_string(self.0.join("pids.current"))
            .expect("pids.current")
            .trim()
            .parse()
            .expect("a number")
    }
}

impl Drop for PidsGroup {
    fn drop(&mut self) {
        // The env (declared later, dropped first) has shut the daemon down; its jobs
        // and launcher leave the group as they end.
        let _ = crate::support::wait_until(Duration::from_secs(20), || {
            std::fs::read_to_string(self.0.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty())
        });
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn b35_a_spawn_over_the_pids_limit_fails_promptly_naming_the_limit() {
    let Some(group) = PidsGroup::new() else {
        return;
    };
    let env = Env::new();
    env.ok(&["ps"]);
    let daemon = env.daemon_pid().expect("the daemon runs");
    group.write("cgroup.procs", &daemon.to_string());
    // Room for a few jobs (a supervisor and a `sleep` each), then refusals.
    group.write("pids.max", &(group.current() + 12).to_string());
    let mut refused = None;
    for _ in 0..20 {
        let started = Instant::now();
        let out = env
            .cmd_at(
                std::path::Path::new("timeout"),
                &["30", HERD, "run", "--", "sleep", "600"],
            )
            .output()
            .expect("timeout runs herd");
        let took = started.elapsed();
        assert_ne!(
            out.status.code(),
            Some(124),
            "the spawn hung: {}",
            stderr(&out)
        );
        if !out.status.success() {
            refused = Some((stderr(&out), took));
            break;
        }
    }
    let (err, took) = refused.expect("a spawn over pids.max was refused");
    assert!(
        took < Duration::from_secs(15),
        "the refusal took {took:?}: {err}"
    );
    assert!(
        err.contains("process limit") && err.contains("pids.max") && err.contains("herd kill"),
        "the refusal names the limit and what to do: {err}"
    );
    assert!(
        !err.contains("check the shell"),
        "not blamed on the command: {err}"
    );
    env.ok(&["shutdown", "--yes"]);
}
