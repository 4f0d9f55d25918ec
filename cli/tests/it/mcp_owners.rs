//! The files `herd mcp` keeps per owner in `<home>/run/owners/`: the
//! daemon sweeps those of owners that are gone, and keeps those of owners with a
//! live server (derived or explicit `--owner`), sessions or undelivered notices.

use std::path::Path;
use std::time::Duration;

use crate::support::{Env, finished_job, wait_until};

/// Whether `dir/name` exists.
fn exists(dir: &Path, name: &str) -> bool {
    dir.join(name).exists()
}

#[test]
fn mcp_the_daemon_sweeps_the_files_of_owners_that_are_gone_and_keeps_the_others() {
    let env = Env::new();
    let busy = env.start_json(&["--owner", "busy", "--", "sleep 60"]);
    finished_job(&env, "done", "kept-result");
    let dir = env.home().join("run").join("owners");
    std::fs::create_dir_all(&dir).expect("the home is writable");

    // A server with no `--owner` holds its host's lock while it runs.
    let mut live = env
        .cmd(&["mcp"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("herd mcp starts");
    let live_lock = || {
        std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .filter_map(Result::ok)
            .filter_map(|e| e.file_name().into_string().ok())
            .find(|n| n.starts_with("mcp-") && n.ends_with(".lock"))
    };
    wait_until(Duration::from_secs(20), || live_lock().is_some())
        .expect("the live server takes its owner's lock");
    let live_lock = live_lock().expect("found above");

    // Two servers with an explicit `--owner` hold that owner's lock together, so
    // the owner is live and its read cursors are kept, sessions or not.
    let mut explicit: Vec<std::process::Child> = (0..2)
        .map(|_| {
            env.cmd(&["mcp", "--owner", "explicit"])
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::null())
                .spawn()
                .expect("herd mcp starts")
        })
        .collect();
    wait_until(Duration::from_secs(20), || exists(&dir, "explicit.lock"))
        .expect("the explicit owner's servers take its lock");

    let gone = [
        "gone.read.json",
        "mcp-000000000000.lock",
        "mcp-000000000000.read.json",
        // Last in the sweep's (sorted) order: once it is gone, every file was seen.
        "zz-gone.read.json",
    ];
    let kept = [
        "busy.read.json",
        "done.read.json",
        // Escaped characters: the owner cannot be told from the name.
        "odd_name.read.json",
        // The explicit owner's live servers hold its lock: no sessions, still kept.
        "explicit.read.json",
    ];
    for name in gone.iter().chain(&kept) {
        std::fs::write(dir.join(name), b"{}").expect("the owners directory is writable");
    }

    // The next daemon sweeps at its start.
    env.ok(&["shutdown", "--keep-jobs"]);
    env.ok(&["ps"]);
    wait_until(Duration::from_secs(20), || {
        gone.iter().all(|name| !exists(&dir, name))
    })
    .unwrap_or_else(|()| {
        panic!(
            "gone owners' files are left: {:?}",
            std::fs::read_dir(&dir).map(|d| d
                .filter_map(Result::ok)
                .map(|e| e.file_name())
                .collect::<Vec<_>>())
        )
    });
    for name in kept.iter().chain([&live_lock.as_str(), &"explicit.lock"]) {
        assert!(exists(&dir, name), "{name} was swept");
    }
    assert!(
        env.poll_json(&busy)["status"] == "running",
        "{busy} still runs"
    );
    for server in &mut explicit {
        assert!(
            matches!(server.try_wait(), Ok(None)),
            "both servers of one explicit owner run at once"
        );
    }
    for server in explicit.iter_mut().chain([&mut live]) {
        server.kill().expect("the server is ours to stop");
        server.wait().expect("the server ends");
    }
}
