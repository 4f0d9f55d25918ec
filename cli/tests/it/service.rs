//! `herd service install|status|uninstall`: the unit file it writes, and
//! the systemctl and loginctl calls it makes.
//!
//! systemd does not run in the test container, so `systemctl` and `loginctl` are the
//! recording fakes of `core/tests/fixtures/fake-systemd/` (first on PATH). The unit
//! file is real and is checked by the real `systemd-analyze verify` where installed.

use std::path::{Path, PathBuf};

use crate::support::{Env, HERD, raw_command, stdout};

/// A home whose `herd service` writes into a private unit dir, with the fakes on PATH.
fn service_env() -> (Env, PathBuf, PathBuf) {
    let mut env = Env::new();
    let units = env.scratch().join("units");
    let record = env.scratch().join("record");
    let fakes = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("core/tests/fixtures/fake-systemd");
    let path = format!(
        "{}:{}",
        fakes.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    env.vars.extend([
        (
            "HERD_SYSTEMD_UNIT_DIR".to_owned(),
            units.display().to_string(),
        ),
        ("PATH".to_owned(), path),
        (
            "FAKE_SYSTEMD_RECORD".to_owned(),
            record.display().to_string(),
        ),
    ]);
    (env, units.join("herd.service"), record)
}

/// `systemd-analyze` on PATH, if installed.
fn systemd_analyze() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("systemd-analyze"))
        .find(|p| p.is_file())
}

/// Checks the unit: `systemd-analyze verify` where available, else a parse check.
fn assert_valid_unit(unit: &Path, text: &str) {
    if let Some(analyze) = systemd_analyze() {
        let out = raw_command(&analyze)
            .arg("verify")
            .arg(unit)
            .output()
            .expect("systemd-analyze runs");
        assert!(
            out.status.success(),
            "systemd-analyze verify rejected the unit: {}{}\n{text}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let sections: Vec<&str> = text.lines().filter(|l| l.starts_with('[')).collect();
    assert_eq!(sections, ["[Unit]", "[Service]", "[Install]"], "{text}");
    for line in text.lines() {
        assert!(
            line.is_empty() || line.starts_with('#') || line.starts_with('[') || line.contains('='),
            "not a key=value line: {line:?}"
        );
    }
}

#[test]
fn service_install_writes_a_valid_user_unit_and_enables_it() {
    let (env, unit, record) = service_env();
    let out = env.ok(&["service", "install"]);
    let text = std::fs::read_to_string(&unit).expect("the unit file was written");
    let binary = Path::new(HERD)
        .canonicalize()
        .expect("the test binary exists");
    assert!(
        text.contains(&format!("ExecStart=\"{}\" serve", binary.display())),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Environment=\"HERD_HOME={}\"",
            env.home().display()
        )),
        "{text}"
    );
    assert!(text.contains("KillMode=process") && text.contains("WantedBy=default.target"));
    assert!(text.contains("\nDelegate=yes\n"), "{text}");
    assert_valid_unit(&unit, &text);
    let calls = std::fs::read_to_string(&record).expect("the fakes recorded their calls");
    assert!(
        calls.contains("systemctl --user daemon-reload\nsystemctl --user enable --now herd\n"),
        "{calls}"
    );
    assert!(calls.contains("loginctl show-user"), "{calls}");
    assert!(
        out.contains("loginctl enable-linger"),
        "linger is said: {out}"
    );

    let status = env.json(&["service", "status", "--json"]);
    assert_eq!(status["installed"], true, "{status}");
    assert_eq!(status["unit_path"], unit.display().to_string());

    let removed = env.json(&["service", "uninstall", "--json"]);
    assert_eq!(removed["removed"], true, "{removed}");
    assert!(!unit.exists());
    let calls = std::fs::read_to_string(&record).expect("the record exists");
    assert!(
        calls.contains("systemctl --user disable --now herd"),
        "{calls}"
    );
}

#[test]
fn service_install_system_no_start_only_writes_the_unit() {
    let (env, unit, record) = service_env();
    let info = env.json(&[
        "service",
        "install",
        "--system",
        "--run-as",
        "worker",
        "--no-start",
        "--json",
    ]);
    assert_eq!(info["kind"], "system", "{info}");
    assert_eq!(info["started"], false, "{info}");
    let text = std::fs::read_to_string(&unit).expect("the unit file was written");
    assert!(
        text.contains("User=worker") && text.contains("WantedBy=multi-user.target"),
        "{text}"
    );
    let parsed = text.lines().filter(|l| l.starts_with('[')).count();
    assert_eq!(parsed, 3, "{text}");
    let calls = std::fs::read_to_string(&record).unwrap_or_default();
    assert!(
        !calls.contains("systemctl"),
        "--no-start runs no systemctl: {calls}"
    );
    assert!(
        calls.contains("loginctl show-user worker -p Linger"),
        "{calls}"
    );
}

#[test]
fn service_install_without_systemctl_says_what_to_run() {
    let (mut env, unit, _record) = service_env();
    // A PATH with loginctl only: copy the fake into a dir of its own.
    let bin = env.scratch().join("bin");
    std::fs::create_dir(&bin).expect("the scratch dir is writable");
    let fakes = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join("core/tests/fixtures/fake-systemd");
    std::fs::copy(fakes.join("loginctl"), bin.join("loginctl")).expect("copy the fake");
    env.vars.retain(|(k, _)| k != "PATH");
    env.vars
        .push(("PATH".to_owned(), bin.display().to_string()));
    let out = env.run(&["service", "install"]);
    assert!(out.status.success(), "{out:?}");
    let text = stdout(&out);
    assert!(
        text.contains("systemctl was not found")
            && text.contains("systemctl --user enable --now herd"),
        "{text}"
    );
    assert!(unit.is_file());
}

#[test]
fn a_unit_without_delegate_is_reported_with_the_advice_to_reinstall() {
    let (env, unit, _record) = service_env();
    env.ok(&["service", "install", "--no-start"]);
    let current = env.json(&["service", "status", "--json"]);
    assert_eq!(current["delegate"], true, "{current}");
    // A unit as an earlier release wrote it: no Delegate=yes.
    let text = std::fs::read_to_string(&unit).expect("the unit was written");
    std::fs::write(&unit, text.replace("Delegate=yes\n", "")).expect("writable");
    let stale = env.json(&["service", "status", "--json"]);
    assert_eq!(stale["delegate"], false, "{stale}");
    assert!(
        stale["advice"]
            .as_str()
            .is_some_and(|a| a.contains("no Delegate=yes") && a.contains("herd service install")),
        "{stale}"
    );
    let doctor = stdout(&env.run(&["doctor"]));
    assert!(
        doctor.contains("no Delegate=yes") && doctor.contains("reinstall"),
        "{doctor}"
    );
}

#[test]
#[expect(
    clippy::print_stderr,
    reason = "on a host that runs systemd the refusal cannot be shown, and the test says so"
)]
fn service_install_where_systemd_is_not_running_says_so_and_writes_nothing() {
    if Path::new("/run/systemd/system").is_dir() {
        eprintln!("skipped: systemd runs on this host, so install would not be refused");
        return;
    }
    let (mut env, _staged, record) = service_env();
    env.vars.retain(|(k, _)| k != "HERD_SYSTEMD_UNIT_DIR");
    let config = env.scratch().join("config-home");
    env.vars
        .push(("XDG_CONFIG_HOME".to_owned(), config.display().to_string()));
    let out = env.run(&["service", "install"]);
    let err = crate::support::stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.contains("systemd is not running on this host")
            && err.contains("nothing was written")
            && err.contains("HERD_SYSTEMD_UNIT_DIR"),
        "{err}"
    );
    assert!(
        !config.exists(),
        "nothing was written under {}",
        config.display()
    );
    assert!(
        std::fs::read_to_string(&record)
            .unwrap_or_default()
            .is_empty(),
        "no systemctl was run"
    );
}
