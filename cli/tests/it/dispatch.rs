//! Restart-safe dispatch through the daemon (B34): a daemon that believes it is a
//! systemd unit (`INVOCATION_ID`) wraps `--persist` jobs in `systemd-run --scope`.
//!
//! systemd itself cannot run in the test container, so `systemd-run`, `systemctl` and
//! `loginctl` are the recording fakes of `core/tests/fixtures/fake-systemd/` (first on
//! PATH); everything else is real: the daemon, the user-bus socket the test binds, the
//! jobs, the logs.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use crate::support::{Env, stderr};

/// The recording fakes.
fn fakes_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("core/tests/fixtures/fake-systemd")
}

/// A home whose daemon runs "under systemd", with a private runtime dir; with `bus`
/// a real socket named `bus` is bound there (returned, to keep it alive).
fn systemd_env(bus: bool) -> (Env, PathBuf, Option<UnixListener>) {
    let mut env = Env::new();
    let runtime = env.scratch().join("xdg");
    std::fs::create_dir(&runtime).expect("the scratch dir is writable");
    std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))
        .expect("the runtime dir is ours");
    let listener = bus.then(|| UnixListener::bind(runtime.join("bus")).expect("bind the fake bus"));
    let record = env.scratch().join("record");
    let path = format!(
        "{}:{}",
        fakes_dir().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.vars.extend([
        ("INVOCATION_ID".to_owned(), "0123456789abcdef".to_owned()),
        ("XDG_RUNTIME_DIR".to_owned(), runtime.display().to_string()),
        ("DBUS_SESSION_BUS_ADDRESS".to_owned(), String::new()),
        ("PATH".to_owned(), path),
        (
            "FAKE_SYSTEMD_RECORD".to_owned(),
            record.display().to_string(),
        ),
    ]);
    (env, record, listener)
}

fn recorded(record: &PathBuf) -> String {
    std::fs::read_to_string(record).unwrap_or_default()
}

#[test]
fn b34_a_persist_job_runs_in_its_own_scope_and_its_kill_stops_it() {
    let (env, record, _bus) = systemd_env(true);
    let info = env.json(&["run", "--persist", "--json", "--", "echo scoped-ok"]);
    assert_eq!(info["dispatch"], "scoped", "{info}");
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    assert!(
        info["note"]
            .as_str()
            .is_some_and(|n| n.contains(&format!("herd-worker-{id}.scope"))),
        "{info}"
    );
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", &id]), "scoped-ok\n");
    let calls = recorded(&record);
    let wrapped = calls
        .lines()
        .find(|l| l.contains(&format!("--unit herd-worker-{id} ")))
        .unwrap_or_else(|| panic!("no systemd-run for {id}: {calls}"));
    assert!(
        wrapped.starts_with("systemd-run --user --scope --quiet --collect")
            && wrapped.contains("--property MemoryAccounting=yes --property MemoryMax=")
            // Delegated, so the shim makes the session's cgroup inside it.
            && wrapped.contains("--property Delegate=yes -- ")
            // The scope wraps the job's supervisor, so both outlive a service restart.
            && wrapped.contains(" -- ")
            && wrapped.ends_with("herd-shim"),
        "{wrapped}"
    );

    let doctor = env.json(&["doctor", "--json"]);
    assert!(
        doctor.to_string().contains("restart-safe scopes available"),
        "doctor reports the scope: {doctor}"
    );

    // A job without --persist stays in the daemon's own cgroup.
    let plain = env.json(&["run", "--json", "--", "true"]);
    assert_eq!(plain["dispatch"], "in_process", "{plain}");

    // Killing a scoped job stops its scope after the tree kill.
    let long = env.json(&["run", "--persist", "--json", "--", "sleep 30"]);
    let long_id = long["session_id"].as_str().expect("session_id").to_owned();
    let killed = env.json(&["kill", &long_id, "--json"]);
    assert_eq!(killed["status"], "killed", "{killed}");
    assert!(
        recorded(&record).contains(&format!(
            "systemctl --user stop herd-worker-{long_id}.scope"
        )),
        "{}",
        recorded(&record)
    );
}

#[test]
fn b34_without_a_user_bus_a_persist_job_degrades_with_a_note() {
    let (env, _record, _bus) = systemd_env(false);
    let info = env.json(&["run", "--persist", "--json", "--", "echo direct"]);
    assert_eq!(info["dispatch"], "degraded", "{info}");
    assert!(
        info["note"]
            .as_str()
            .is_some_and(|n| n.contains("direct subprocess") && n.contains("restarts")),
        "{info}"
    );
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    env.ok(&["wait", &id, "--timeout", "10"]);
    assert_eq!(env.ok(&["logs", &id]), "direct\n");
}

#[test]
fn b34_a_required_scope_without_a_bus_fails_typed() {
    let (env, _record, _bus) = systemd_env(false);
    std::fs::write(
        env.home().join("config.toml"),
        "require_restart_safe_scope = true\n",
    )
    .expect("the home is writable");
    let out = env.run(&["run", "--persist", "--", "echo never"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("loginctl enable-linger")
            && stderr(&out).contains("cannot create a restart-safe systemd scope"),
        "{}",
        stderr(&out)
    );
    let doctor = env.run(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        text.contains("no restart-safe scope") && text.contains("enable-linger"),
        "{text}"
    );
}

#[test]
fn b34_a_caller_without_path_or_runtime_dir_still_gets_a_scope_found_through_the_daemons_own_environment()
 {
    let (env, record, _bus) = systemd_env(true);
    // The daemon starts with the systemd environment (the fakes on its PATH, its
    // runtime dir); the caller then has neither.
    env.json(&["ps", "--json"]);
    let out = env
        .cmd(&["run", "--persist", "--json", "--", "echo scoped-anyway"])
        .env("PATH", "/usr/bin:/bin")
        .env_remove("XDG_RUNTIME_DIR")
        .output()
        .expect("herd runs");
    assert!(out.status.success(), "{}", stderr(&out));
    let info: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(info["dispatch"], "scoped", "{info}");
    let id = info["session_id"].as_str().expect("session_id");
    assert!(
        recorded(&record).contains(&format!("--unit herd-worker-{id} ")),
        "systemd-run was found on the daemon's PATH: {}",
        recorded(&record)
    );
}
