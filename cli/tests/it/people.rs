//! A terminal and a shell you can trust (issue 29): the client's refusals and
//! the foreground behaviour of `herd` commands, against the real daemon on a
//! temp home. The full-screen clients (`attach`, `top`) are in their own files.

use std::time::Duration;

use crate::support::{Env, alive, stderr};

/// How long a daemon or a job may take to do what a test waits for.
const DEADLINE: Duration = Duration::from_secs(30);

// Issue 29: `herd shutdown` with running jobs and no terminal to ask on (a
// script, an agent's shell tool) kills nothing and says to add --yes or
// --keep-jobs (exit 2); `--json` alike; `--yes` then kills them, and with no
// job running it stops the daemon without asking.
#[test]
fn issue_29_shutdown_without_a_terminal_refuses_to_kill_running_jobs() {
    let env = Env::new();
    let id = env.ok(&["run", "--", "sleep", "300"]).trim().to_owned();
    let daemon = env.daemon_pid().expect("the daemon's pid file");
    for args in [&["shutdown"][..], &["shutdown", "--json"]] {
        let out = env.run(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("1 job is running")
                && said.contains("--yes")
                && said.contains("--keep-jobs"),
            "{said}"
        );
    }
    assert!(alive(daemon), "the daemon still runs");
    let polled = env.json(&["poll", &id, "--json"]);
    assert_eq!(polled["status"], "running", "{polled}");

    let out = env.ok(&["shutdown", "--yes"]);
    assert!(out.contains("1 running job killed"), "{out}");
    crate::support::wait_until(DEADLINE, || !alive(daemon))
        .unwrap_or_else(|()| panic!("the daemon {daemon} outlived shutdown --yes"));

    // No job running: nothing to ask about.
    env.json(&["ps", "--json"]);
    let out = env.ok(&["shutdown"]);
    assert!(out.contains("0 running jobs killed"), "{out}");
}
