//! Real plugin libraries in the real daemon (B32, B30): a plugin whose init never
//! returns stalls no command, `herd plugins list` and `herd doctor` say what the
//! running daemon loaded, a stream calls plugins per batch of whole lines and never
//! with empty text, a panicking plugin's panics are counted and logged boundedly,
//! and a plugin enabled while the daemon runs is listed as "restart to apply".

use std::time::{Duration, Instant};

use herd_test_support::plugins::{PluginDir, cdylib};
use serde_json::Value;

use crate::support::{Env, alive, stdout, wait_until};

/// The command that builds the plugins these tests install.
const BUILD: &str = "cargo build -p herd-test-plugin-inithang -p herd-test-plugin-append -p herd-test-plugin-misbehave";

/// Installs the built `crate_lib` as plugin `name` and enables it in the config.
fn install_enabled(env: &Env, names: &[(&str, &str)]) {
    let dir = PluginDir::create(env.home().join("plugins"), BUILD);
    for (name, crate_lib) in names {
        dir.install_lib(name, crate_lib);
    }
    let list: Vec<String> = names.iter().map(|(n, _)| format!("\"{n}\"")).collect();
    std::fs::write(
        env.home().join("config.toml"),
        format!("[plugins]\nenabled = [{}]\n", list.join(", ")),
    )
    .expect("writable");
}

/// The wall-clock bound of a command that must not stall: far under "forever" (a
/// command that waited on a hung init would never answer), with room for a cold
/// daemon start on a busy 2-core machine. Where the plugin's state can prove that
/// a command did not wait ([`answers_before_deadline`]), that proof is used.
const NO_STALL: Duration = Duration::from_secs(20);

/// Runs `args`, asserting it answers within `limit`; its stdout.
fn answers_within(env: &Env, args: &[&str], limit: Duration) -> String {
    let started = Instant::now();
    let out = env.run(args);
    let took = started.elapsed();
    assert!(
        took < limit,
        "`herd {}` took {took:?} (limit {limit:?})",
        args.join(" ")
    );
    stdout(&out)
}

/// Runs `args` against the daemon while plugin `name`'s init hangs, asserting it did
/// not wait for the init: when `name` still reads `starting` after the command
/// answered, the init deadline had not passed, so the command cannot have waited
/// for it. On a machine so busy that the deadline passed meanwhile, the state
/// proves nothing and [`NO_STALL`] bounds the command instead. Its stdout.
fn answers_before_deadline(env: &Env, args: &[&str], name: &str) -> String {
    let out = answers_within(env, args, NO_STALL);
    let status = row(env, name)["status"].clone();
    // `starting`: proved by state; `failed`: the deadline passed meanwhile, bounded
    // by the clock only.
    assert!(
        status == "starting" || status == "failed",
        "`herd {}`: {name} is {status}",
        args.join(" ")
    );
    out
}

/// The `plugins list --json` row of `name`.
fn row(env: &Env, name: &str) -> Value {
    let listed = env.json(&["plugins", "list", "--json"]);
    listed["plugins"]
        .as_array()
        .and_then(|rows| rows.iter().find(|r| r["name"] == name).cloned())
        .unwrap_or_else(|| panic!("row {name} in {listed}"))
}

#[test]
fn b32_a_plugin_whose_init_never_returns_stalls_no_command_and_is_reported_failed() {
    let env = Env::new();
    install_enabled(&env, &[("inithang", "herd_test_plugin_inithang")]);
    // Without a daemon, listing checks the files and runs no init.
    let listed = answers_within(&env, &["plugins", "list", "--json"], NO_STALL);
    let listed: Value = serde_json::from_str(&listed).expect("json");
    assert_eq!(listed["source"], "files", "{listed}");
    assert_eq!(listed["plugins"][0]["status"], "valid", "{listed}");
    // The daemon starts and serves at once; nothing waits on the init.
    answers_before_deadline(&env, &["ps", "--json"], "inithang");
    let info = answers_before_deadline(&env, &["run", "--json", "--", "echo hello"], "inithang");
    let info: Value = serde_json::from_str(&info).expect("json");
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    let doctor = answers_before_deadline(&env, &["doctor"], "inithang");
    assert!(doctor.contains("daemon pid"), "{doctor}");
    // Output the plugin would transform waits at most the init deadline (5 s), then
    // passes untransformed: `wait` answers, with room for the deadline on a busy
    // machine, far under its own timeout.
    let waited = answers_within(
        &env,
        &["wait", &id, "--timeout", "60", "--json"],
        Duration::from_secs(30),
    );
    let waited: Value = serde_json::from_str(&waited).expect("json");
    let output = waited["output"].as_str().unwrap_or_default();
    assert!(output.contains("hello"), "{waited}");
    assert!(!output.contains("inithang transformed"), "{waited}");
    // After the deadline it is failed with the reason, and says so in doctor.
    wait_until(Duration::from_secs(20), || {
        row(&env, "inithang")["status"] == "failed"
    })
    .unwrap_or_else(|()| panic!("never failed: {}", row(&env, "inithang")));
    let failed = row(&env, "inithang");
    assert!(
        failed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("init did not return within")),
        "{failed}"
    );
    let doctor = env.run(&["doctor"]);
    assert!(
        stdout(&doctor).contains("fail plugin inithang failed: init did not return"),
        "{}",
        stdout(&doctor)
    );
    let logs = answers_within(&env, &["logs", &id], NO_STALL);
    assert!(
        logs.contains("hello") && !logs.contains("inithang"),
        "{logs}"
    );
    // Installing another copy checks it without running its init.
    let staged = env.scratch().join("hang2");
    std::fs::create_dir_all(&staged).expect("writable");
    std::fs::copy(
        cdylib("herd_test_plugin_inithang", BUILD),
        staged.join("libhang2.so"),
    )
    .expect("copy");
    std::fs::write(
        staged.join("plugin.toml"),
        "name = \"hang2\"\nversion = \"0.0.1\"\nlibrary = \"libhang2.so\"\n",
    )
    .expect("writable");
    let library = staged.join("libhang2.so");
    answers_within(
        &env,
        &["plugins", "install", library.to_str().expect("utf-8 path")],
        NO_STALL,
    );
    // The daemon ends on shutdown although the init still sleeps on its thread.
    let pid = env.daemon_pid().expect("the daemon runs");
    answers_within(&env, &["shutdown", "--yes"], NO_STALL);
    wait_until(Duration::from_secs(20), || !alive(pid))
        .unwrap_or_else(|()| panic!("daemon {pid} still runs after shutdown"));
}

/// How many lines of `text` are `line`.
fn count_lines(text: &str, line: &str) -> usize {
    text.lines().filter(|l| *l == line).count()
}

#[test]
fn b30_a_stream_calls_a_plugin_once_per_batch_of_whole_lines_never_with_empty_text() {
    let env = Env::new();
    install_enabled(&env, &[("append", "herd_test_plugin_append")]);
    // `run --wait` follows the log: one burst of whole lines is one call. The
    // burst is one write: bash's own printf writes each line on its own (its stdout
    // is line-buffered), and a read between the two would rightly be two calls;
    // coreutils' printf writes a pipe once.
    let out = env.ok(&["run", "--wait", "--", "env printf 'one\\ntwo\\n'"]);
    assert_eq!(count_lines(&out, "[append:log]"), 1, "{out}");
    assert!(out.contains("one\ntwo\n[append:log]"), "{out}");
    // A poll answer is one window: one call, one appended line.
    let info = env.json(&["run", "--json", "--", "printf 'three\\n'"]);
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    env.ok(&["wait", &id, "--timeout", "30"]);
    let polled = env.json(&["poll", &id, "--json"]);
    let preview = polled["output_preview"].as_str().unwrap_or_default();
    assert_eq!(count_lines(preview, "[append:poll]"), 1, "{polled}");
    // The plugin refuses empty text with an error: none was counted on any route.
    let listed = env.json(&["plugins", "list", "--json"]);
    let append = &listed["plugins"][0];
    assert_eq!(append["status"], "loaded", "{listed}");
    assert_eq!(append["errors"], 0, "{listed}");
    assert!(
        append["routes"]["log"]["calls"].as_u64() >= Some(1),
        "{listed}"
    );
}

#[test]
fn b32_a_panicking_plugin_is_counted_as_panics_and_the_daemon_log_stays_bounded() {
    let env = Env::new();
    install_enabled(&env, &[("misbehave", "herd_test_plugin_misbehave")]);
    // The daemon starts with backtraces on: a plugin's own panic printing would
    // write one per call.
    let started = env
        .cmd(&["run", "--json", "--", "echo PLEASE_PANIC"])
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("herd runs");
    let info: Value = serde_json::from_slice(&started.stdout).expect("json");
    let id = info["session_id"].as_str().expect("session_id").to_owned();
    env.ok(&["wait", &id, "--timeout", "30"]);
    env.ok(&["poll", &id]);
    let log = env.home().join("logs/daemon.log");
    let size = || std::fs::metadata(&log).map_or(0, |m| m.len());
    let before = size();
    for _ in 0..50 {
        env.ok(&["poll", &id]);
    }
    let grown = size().saturating_sub(before);
    assert!(
        grown < 4096,
        "daemon.log grew {grown} bytes over 50 panicking polls"
    );
    let listed = env.json(&["plugins", "list", "--json"]);
    let row = &listed["plugins"][0];
    assert!(row["panics"].as_u64() >= Some(51), "{listed}");
    assert_eq!(row["errors"], 0, "{listed}");
    assert!(
        row["routes"]["poll"]["panics"].as_u64() >= Some(51),
        "{listed}"
    );
    assert!(
        row["last_failure"]
            .as_str()
            .is_some_and(|f| f.contains("asked to panic")),
        "{listed}"
    );
}

#[test]
fn b32_plugins_list_against_a_running_daemon_says_restart_to_apply() {
    let env = Env::new();
    // The daemon starts with no plugin; one is installed and enabled afterwards.
    env.ok(&["run", "--wait", "--", "true"]);
    let pid = env.daemon_pid().expect("the daemon runs");
    install_enabled(&env, &[("append", "herd_test_plugin_append")]);
    let listed = env.json(&["plugins", "list", "--json"]);
    assert_eq!(listed["source"], "daemon", "{listed}");
    let pending = row(&env, "append");
    assert_eq!(pending["status"], "not loaded", "{pending}");
    assert!(
        pending["pending"]
            .as_str()
            .is_some_and(|p| p.contains("restart to apply")),
        "{pending}"
    );
    let table = env.ok(&["plugins", "list"]);
    assert!(
        table.contains("restart to apply") && table.contains(&format!("pid {pid}")),
        "{table}"
    );
    // It is not applied until the restart: the daemon's output carries no line of it.
    let out = env.ok(&["run", "--wait", "--", "printf 'one\\n'"]);
    assert!(!out.contains("[append:"), "{out}");
    // After a restart the daemon runs it and nothing is pending.
    env.ok(&["shutdown", "--yes"]);
    wait_until(Duration::from_secs(20), || !alive(pid))
        .unwrap_or_else(|()| panic!("daemon {pid} still runs after shutdown"));
    let out = env.ok(&["run", "--wait", "--", "printf 'two\\n'"]);
    assert_eq!(count_lines(&out, "[append:log]"), 1, "{out}");
    let applied = row(&env, "append");
    assert_eq!(applied["status"], "loaded", "{applied}");
    assert!(applied["pending"].is_null(), "{applied}");
}
