//! Unit tests of config parsing.

use std::path::Path;

use super::{Config, Notifications, is_host_name};
use crate::exit::{Code, code_of};

fn check_err(text: &str, needles: &[&str]) {
    let err = Config::parse(text, Path::new("/h/config.toml")).expect_err("config must be refused");
    assert_eq!(code_of(&err), Code::Usage);
    let message = format!("{err:#}");
    for needle in needles {
        assert!(
            message.contains(needle),
            "`{needle}` missing from: {message}"
        );
    }
}

#[test]
fn empty_config_is_the_default() {
    let config = Config::parse("", Path::new("c.toml")).expect("empty is valid");
    assert_eq!(config, Config::default());
}

#[test]
fn every_field_parses() {
    let text = r#"
notifications = "error"
heartbeat_floor_seconds = 5
kill_grace_seconds = 0.5
wait_cap_seconds = 30
finished_cap = 10
result_ttl = 3600
log_cap_bytes = 4096
env_deny = ["*_PASSWORD"]
redact_extra_patterns = ["sk-[a-z]+"]
guard_host_images = ["myhost"]
direct_exec = false

[plugins]
enabled = ["upper"]
"#;
    let config = Config::parse(text, Path::new("c.toml")).expect("valid config");
    assert_eq!(config.notifications, Notifications::Error);
    assert_eq!(config.heartbeat_floor_seconds, 5);
    assert_eq!(config.plugins.enabled, ["upper"]);
    assert_eq!(config.guard_host_images, ["myhost"]);
    assert!(!config.direct_exec);
    assert!(Config::default().direct_exec, "on unless turned off");
    // A deprecated key still loads (the daemon warns and ignores it).
    assert_eq!(config.finished_cap, Some(10));
    assert_eq!(config.result_ttl_seconds, 3600);
    assert_eq!(Config::default().result_ttl_seconds, 7 * 24 * 3600);
}

#[test]
fn unknown_key_names_the_key_and_line() {
    check_err(
        "finished_cap = 3\nheartbeat_flor = 5\n",
        &["heartbeat_flor", "line 2", "/h/config.toml"],
    );
}

#[test]
fn wrong_type_names_the_key_and_line() {
    check_err(
        "\n\nwait_cap_seconds = \"ten\"\n",
        &["wait_cap_seconds", "line 3"],
    );
}

#[test]
fn bad_policy_value_is_refused() {
    check_err("notifications = \"loud\"\n", &["notifications", "loud"]);
}

#[test]
fn negative_grace_is_refused() {
    check_err("kill_grace_seconds = -1.0\n", &["kill_grace_seconds"]);
}

#[test]
fn an_invalid_redaction_pattern_is_refused() {
    check_err(
        "redact_extra_patterns = [\"(unclosed\"]\n",
        &["redact_extra_patterns", "(unclosed"],
    );
}

#[test]
fn every_number_out_of_its_range_is_refused_with_the_range() {
    for (text, needle) in [
        (
            "kill_grace_seconds = 1e300\n",
            "kill_grace_seconds must be from 0 to 300",
        ),
        (
            "kill_grace_seconds = 1e18\n",
            "kill_grace_seconds must be from 0 to 300",
        ),
        (
            "heartbeat_floor_seconds = 18446744073709551615\n",
            "heartbeat_floor_seconds must be from 1 to 86400",
        ),
        ("heartbeat_floor_seconds = 0\n", "heartbeat_floor_seconds"),
        ("wait_cap_seconds = 0\n", "wait_cap_seconds must be from 1"),
        (
            "finished_cap = 100001\n",
            "finished_cap must be from 0 to 100000",
        ),
        ("log_cap_bytes = 0\n", "log_cap_bytes must be from 1"),
        (
            "result_ttl_seconds = 0\n",
            "result_ttl_seconds must be from 1 to 315360000",
        ),
        (
            "worker_memory_max_bytes = 1\n",
            "worker_memory_max_bytes must be from",
        ),
    ] {
        check_err(text, &[needle]);
    }
}

#[test]
fn hosts_table_is_read_and_judged() {
    let path = Path::new("config.toml");
    let config = Config::parse(
        "[hosts.build1]\ncommand = [\"ssh\", \"build1\", \"herd\", \"proxy\"]\n",
        path,
    )
    .expect("a host parses");
    assert_eq!(config.hosts["build1"].command[0], "ssh");
    assert_eq!(config.hosts["build1"].install, None);
    for (text, key) in [
        ("[hosts.Build]\ncommand = [\"ssh\"]\n", "hosts.Build"),
        ("[hosts.b]\ncommand = []\n", "hosts.b.command"),
        (
            "[hosts.b]\ncommand = [\"ssh\"]\ninstall = [\"\"]\n",
            "hosts.b.install",
        ),
    ] {
        let err = Config::parse(text, path).expect_err(text).to_string();
        assert!(err.contains(key), "{err}");
    }
    let err = Config::parse("[hosts.b]\ncmd = [\"ssh\"]\n", path)
        .expect_err("unknown key")
        .to_string();
    assert!(err.contains("cmd"), "{err}");
    assert!(is_host_name("a"));
    assert!(is_host_name("build-1_x"));
    assert!(!is_host_name("-a"));
    assert!(!is_host_name(&"a".repeat(33)));
    assert!(!is_host_name("a:b"));
}
