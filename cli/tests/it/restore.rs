//! Restore across a daemon crash (B28): a SIGKILLed daemon's jobs are re-adopted by
//! the daemon the next client command starts, and jobs that died meanwhile are closed.

use std::time::Duration;

use crate::support::{Env, alive, wait_until};

/// Starts `command` in the background and returns its id and pid.
fn start(env: &Env, command: &str) -> (String, i32) {
    let info = env.json(&["run", "--json", "--", command]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    let pid = i32::try_from(info["pid"].as_i64().expect("pid")).expect("a pid fits i32");
    (id, pid)
}

/// Waits until the job's log holds `line`.
fn await_log_line(env: &Env, id: &str, line: &str) {
    wait_until(Duration::from_secs(10), || {
        env.ok(&["logs", id]).contains(line)
    })
    .unwrap_or_else(|()| panic!("the log of {id} never held {line:?}"));
}

#[test]
fn b28_a_sigkilled_daemons_job_is_readopted_by_the_next_daemon() {
    let env = Env::new();
    let (id, pid) = start(&env, "echo before; exec sleep 300");
    await_log_line(&env, &id, "before");
    let first = env.crash_daemon();
    assert!(alive(pid), "the job outlives the daemon's crash");

    // Any client command starts a new daemon, which restores before it serves.
    let polled = env.poll_json(&id);
    assert_ne!(
        env.daemon_pid(),
        Some(first),
        "a new daemon serves the home"
    );
    assert_eq!(polled["status"], "running", "{polled}");
    assert_eq!(polled["pid"], pid, "{polled}");
    assert!(
        env.ok(&["logs", &id]).contains("before"),
        "the log keeps the output from before the crash"
    );
    env.assert_reattached(1);

    env.ok(&["kill", &id]);
    wait_until(Duration::from_secs(10), || !alive(pid))
        .unwrap_or_else(|()| panic!("the re-adopted job {pid} survived its kill"));
    let after = env.poll_json(&id);
    assert_ne!(after["status"], "running", "{after}");
}

#[test]
fn b28_a_job_that_died_while_no_daemon_ran_finishes_with_its_real_status() {
    let env = Env::new();
    let (id, pid) = start(&env, "echo before; exec sleep 300");
    await_log_line(&env, &id, "before");
    env.crash_daemon();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("the orphaned job can be signalled");
    wait_until(Duration::from_secs(5), || !alive(pid))
        .unwrap_or_else(|()| panic!("job {pid} did not die of SIGKILL"));

    let polled = env.poll_json(&id);
    assert_ne!(polled["status"], "running", "{polled}");
    // Its supervisor collected the real status: killed by signal 9.
    assert_eq!(polled["completion_reason"], "signaled", "{polled}");
    let listed = env.json(&["ps", "--json"]);
    assert!(
        !listed.to_string().contains(&id),
        "the closed job is not listed as running: {listed}"
    );
}
