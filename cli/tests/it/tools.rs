//! The commands that need no job: plugins, doctor, completions, man, help.

use serde_json::Value;

use crate::support::{Env, stderr, stdout};

#[test]
fn b32_plugins_list_reports_status_and_reasons() {
    let env = Env::new();
    let plugins = env.home().join("plugins");
    std::fs::create_dir_all(plugins.join("upper")).expect("writable");
    std::fs::write(
        plugins.join("upper/plugin.toml"),
        "name = \"upper\"\nversion = \"1.2.0\"\nlibrary = \"libupper.so\"\n",
    )
    .expect("writable");
    std::fs::create_dir_all(plugins.join("broken")).expect("writable");
    let listed = env.json(&["plugins", "list", "--json"]);
    let rows = listed["plugins"].as_array().expect("a list of rows");
    assert_eq!(rows.len(), 2, "{listed}");
    for row in rows {
        for key in ["name", "version", "path", "status", "reason"] {
            assert!(row.get(key).is_some(), "{key} in {row}");
        }
        assert_eq!(row["status"], "disabled", "plugins are opt-in: {row}");
    }
    env.ok(&["plugins", "enable", "upper"]);
    env.ok(&["plugins", "enable", "broken"]);
    let config = std::fs::read_to_string(env.home().join("config.toml")).expect("config written");
    assert!(
        config.contains("upper") && config.contains("broken"),
        "{config}"
    );
    let listed = env.json(&["plugins", "list", "--json"]);
    let by_name = |name: &str| -> Value {
        listed["plugins"]
            .as_array()
            .and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned())
            .unwrap_or_else(|| panic!("row {name} in {listed}"))
    };
    // The library is missing and the other manifest is missing: both are load
    // failures with the loader's reason, and the listing itself succeeds.
    assert_eq!(by_name("upper")["status"], "failed", "{listed}");
    assert_eq!(by_name("upper")["version"], "1.2.0");
    assert!(
        by_name("upper")["reason"]
            .as_str()
            .is_some_and(|r| !r.is_empty()),
        "{listed}"
    );
    assert_eq!(by_name("broken")["status"], "failed");
    assert!(
        by_name("broken")["reason"]
            .as_str()
            .is_some_and(|r| r.contains("manifest")),
        "{listed}"
    );
    // The daemon starts anyway and doctor names the failures.
    env.json(&["ps", "--json"]);
    let doctor = env.run(&["doctor"]);
    assert!(
        stdout(&doctor).contains("fail plugin upper failed"),
        "{}",
        stdout(&doctor)
    );
    env.ok(&["plugins", "disable", "broken"]);
    env.ok(&["plugins", "disable", "upper"]);
    let out = env.run(&["plugins", "enable", "nonesuch"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("not installed"), "{}", stderr(&out));
}

#[test]
fn redact_extra_patterns_mask_job_output() {
    let env = Env::new();
    std::fs::write(
        env.home().join("config.toml"),
        "redact_extra_patterns = [\"internal-[0-9]{6}\"]\n",
    )
    .expect("writable");
    let info = env.json(&["run", "--json", "--", "echo id=internal-123456 ok"]);
    let id = info["session_id"].as_str().expect("session_id");
    env.ok(&["wait", id, "--timeout", "10"]);
    let logs = env.ok(&["logs", id]);
    assert!(!logs.contains("internal-123456"), "masked: {logs}");
    assert!(logs.contains("ok"), "{logs}");
}

#[test]
fn doctor_reports_each_check_with_a_level() {
    let env = Env::new();
    let before = env.ok(&["doctor"]);
    assert!(before.contains("warn no daemon is running"), "{before}");
    assert!(!env.socket().exists(), "doctor starts no daemon");
    env.json(&["ps", "--json"]);
    let after = env.ok(&["doctor"]);
    let pid = env.daemon_pid().expect("pid file");
    assert!(after.contains(&format!("ok   daemon pid {pid}")), "{after}");
    assert!(after.contains("socket mode 0600"), "{after}");
    std::fs::write(env.home().join("config.toml"), "wait_cap_seconds = \"x\"\n").expect("writable");
    let out = env.run(&["doctor"]);
    assert_eq!(out.status.code(), Some(1), "a failed check exits 1");
    assert!(
        stdout(&out).contains("fail") && stdout(&out).contains("wait_cap_seconds"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn completions_and_man_page_are_generated() {
    let env = Env::new();
    let bash = env.ok(&["completions", "bash"]);
    assert!(
        bash.contains("herd") && bash.contains("complete"),
        "bash completion script"
    );
    let man = env.ok(&["man"]);
    assert!(man.contains(".TH herd"), "roff man page");
    let help = env.ok(&["run", "--help"]);
    assert!(
        help.contains("--notify") && help.contains("shell quoting"),
        "{help}"
    );
    let top = env.ok(&["--help"]);
    assert!(top.contains("Exit codes"), "{top}");
}

#[test]
fn b30_an_enabled_plugin_transforms_output_before_redaction() {
    // The test executable lives in <target>/debug/deps; the plugin beside <target>/debug.
    let exe = std::env::current_exe().expect("the test executable's path");
    let lib = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("the test executable sits in <target>/debug/deps")
        .join("libherd_plugin_example.so");
    assert!(
        lib.is_file(),
        "this test needs the example plugin: run `cargo build -p herd-plugin-example` first (looked for {})",
        lib.display()
    );
    let env = Env::new();
    let dir = env.home().join("plugins/tidy");
    std::fs::create_dir_all(&dir).expect("writable");
    std::fs::copy(&lib, dir.join("libtidy.so")).expect("the plugin copies");
    std::fs::write(
        dir.join("plugin.toml"),
        "name = \"tidy\"\nversion = \"0.1.0\"\nlibrary = \"libtidy.so\"\n",
    )
    .expect("writable");
    env.ok(&["plugins", "enable", "tidy"]);
    // No daemon yet: the files check out, no init runs.
    let listed = env.json(&["plugins", "list", "--json"]);
    assert_eq!(listed["plugins"][0]["status"], "valid", "{listed}");
    let info = env.json(&[
        "run",
        "--json",
        "--",
        "printf 'same\\nsame\\nsame\\ntoken ghp_abcdefghijklmnopqrstuvwxyz0123456789\\n'",
    ]);
    let id = info["session_id"].as_str().expect("session_id");
    let waited = env.json(&["wait", id, "--timeout", "10", "--json"]);
    let output = waited["output"].as_str().unwrap_or_default();
    assert!(
        output.contains("same [x3]"),
        "the plugin folded the lines: {output}"
    );
    assert!(
        !output.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        "redacted after: {output}"
    );
    // The running daemon says it loaded the plugin, and counts its calls by route.
    let listed = env.json(&["plugins", "list", "--json"]);
    assert_eq!(listed["source"], "daemon", "{listed}");
    let tidy = &listed["plugins"][0];
    assert_eq!(tidy["status"], "loaded", "{listed}");
    assert!(tidy["loaded_at"].as_f64().is_some(), "{listed}");
    assert!(
        tidy["routes"]["wait"]["calls"].as_u64() >= Some(1),
        "{listed}"
    );
    assert!(tidy["pending"].is_null(), "{listed}");
    // Disabled while the daemon runs: it still runs until a restart, and says so.
    env.ok(&["plugins", "disable", "tidy"]);
    let listed = env.json(&["plugins", "list", "--json"]);
    assert_eq!(listed["plugins"][0]["status"], "loaded", "{listed}");
    assert!(
        listed["plugins"][0]["pending"]
            .as_str()
            .is_some_and(|p| p.contains("restart")),
        "{listed}"
    );
    let doctor = env.ok(&["doctor"]);
    assert!(
        doctor.contains("warn plugin tidy: disabled after the daemon started"),
        "{doctor}"
    );
}
