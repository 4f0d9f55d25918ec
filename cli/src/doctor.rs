//! `herd doctor`: checks the home, config, socket, daemon and plugins.
//!
//! Each line is `ok`, `warn` or `fail`, with the fix on failures. Doctor never
//! starts a daemon; it reports whether one answers.

use std::os::unix::fs::PermissionsExt;

use herd_persistence::Home;
use herd_protocol::methods::{Scope, Status};
use herd_protocol::params::NoParams;
use serde_json::json;

use crate::client::{Client, check_socket_path};
use crate::config::Config;
use crate::exit::{Code, Failure};
use crate::output;

/// One finding.
#[derive(Debug)]
struct Finding {
    level: &'static str,
    what: String,
}

/// Runs the checks and prints them; exits 1 when any check fails.
///
/// # Errors
/// Exit code 1 when a check fails.
pub(crate) async fn run(home: &Home, json: bool) -> anyhow::Result<()> {
    let mut findings = Vec::new();
    let mut push = |level: &'static str, what: String| findings.push(Finding { level, what });
    check_home(home, &mut push);
    let config = check_config(home, &mut push);
    check_run_dir(home, &mut push);
    let scope = check_daemon(home, &mut push).await;
    if let Some(config) = &config {
        check_plugins(home, config, &mut push).await;
    }
    for advice in crate::service::installed_unit_advice() {
        push("warn", advice);
    }
    match &scope {
        Some(scope) => scope_line(scope, |level, what| {
            findings.push(Finding { level, what });
        }),
        None => findings.push(Finding {
            level: "warn",
            what:
                "scope availability unknown: no daemon answered; start one with any client command"
                    .to_owned(),
        }),
    }
    let failed = findings.iter().any(|f| f.level == "fail");
    if json {
        let rows: Vec<_> = findings
            .iter()
            .map(|f| json!({"level": f.level, "message": f.what}))
            .collect();
        output::json_pretty(&json!({"checks": rows}))?;
    } else {
        for finding in &findings {
            output::line(&format!("{:<4} {}", finding.level, finding.what))?;
        }
    }
    if failed {
        return Err(Failure::silent(Code::Failed).into());
    }
    Ok(())
}

/// Whether the home exists.
fn check_home(home: &Home, push: &mut impl FnMut(&'static str, String)) {
    let root = home.root();
    if root.is_dir() {
        push("ok", format!("home {}", root.display()));
    } else {
        push(
            "warn",
            format!(
                "home {} does not exist yet; the first `herd run` creates it",
                root.display()
            ),
        );
    }
}

/// Whether the config loads; returns it when it does.
fn check_config(home: &Home, push: &mut impl FnMut(&'static str, String)) -> Option<Config> {
    match Config::load(home) {
        Ok(config) => {
            let path = home.config_path();
            if path.exists() {
                push("ok", format!("config {}", path.display()));
            } else {
                push(
                    "ok",
                    format!(
                        "config {} is absent: every key has its default",
                        path.display()
                    ),
                );
            }
            if !config.redact_extra_patterns.is_empty() {
                push(
                    "warn",
                    "redact_extra_patterns is set but not applied yet by this build".to_owned(),
                );
            }
            Some(config)
        }
        Err(err) => {
            push("fail", format!("{err:#}; fix or remove the offending key"));
            None
        }
    }
}

/// The socket path and the run directory's mode.
fn check_run_dir(home: &Home, push: &mut impl FnMut(&'static str, String)) {
    let socket = home.socket_path();
    match check_socket_path(&socket) {
        Ok(()) => {}
        Err(err) => push("fail", format!("{err:#}")),
    }
    if let Ok(meta) = std::fs::metadata(home.run_dir()) {
        let mode = meta.permissions().mode() & 0o777;
        if mode == 0o700 {
            push(
                "ok",
                format!("run directory {} is 0700", home.run_dir().display()),
            );
        } else {
            push(
                "fail",
                format!(
                    "run directory {} is {mode:o}; run `chmod 700` on it",
                    home.run_dir().display()
                ),
            );
        }
    }
}

/// Whether a daemon answers, and what it says; returns its scope answer.
async fn check_daemon(
    home: &Home,
    push: &mut impl FnMut(&'static str, String),
) -> Option<serde_json::Value> {
    let socket = home.socket_path();
    let mut scope = None;
    // A stopped daemon takes connections and answers none: said from /proc
    // without asking it (a hung one is found by the calls' deadline).
    if let Some(pid) = crate::client::pid_from_file(home)
        && crate::client::state_of(pid).is_some_and(crate::client::is_stopped)
    {
        push("fail", crate::client::stopped_message(pid));
        return None;
    }
    match Client::try_connect(home).await {
        Ok(Some(mut client)) => {
            let status = match client.send_typed::<Status>(&NoParams {}).await {
                Ok(status) => status,
                Err(err) => {
                    push("fail", format!("{err:#}"));
                    return None;
                }
            };
            push(
                "ok",
                format!(
                    "daemon pid {} version {} (protocol {}) serving {}, {} running, {} finished sessions, socket {}",
                    client.hello.pid,
                    client.hello.daemon,
                    client.hello.protocol,
                    client.hello.home,
                    status["running"],
                    status["finished"],
                    socket.display()
                ),
            );
            restore_lines(&status["restore"], push);
            log_lines(&status["log"], push);
            match status["supervisor"].as_str() {
                Some("shim") => push(
                    "ok",
                    "jobs run under their own herd-shim and outlive the daemon".to_owned(),
                ),
                Some(_) => push(
                    "warn",
                    "jobs run inside the daemon and end with it: install herd-shim beside herd (or set shim_path), or leave supervisor = \"in_process\" if that is meant".to_owned(),
                ),
                None => {}
            }
            match status["containment"]["kind"].as_str() {
                Some("cgroup") => push(
                    "ok",
                    format!(
                        "containment: cgroup; {}",
                        status["containment"]["detail"].as_str().unwrap_or_default()
                    ),
                ),
                Some(kind) => push(
                    "warn",
                    format!(
                        "containment: {kind}, no session cgroup: {}; a job's processes are found by parentage (the shim is their subreaper), group and tag",
                        status["containment"]["detail"].as_str().unwrap_or_default()
                    ),
                ),
                None => {}
            }
            scope = client.send_typed::<Scope>(&NoParams {}).await.ok();
            if let Ok(meta) = std::fs::metadata(&socket) {
                let mode = meta.permissions().mode() & 0o777;
                if mode == 0o600 {
                    push("ok", "socket mode 0600".to_owned());
                } else {
                    push(
                        "fail",
                        format!(
                            "socket mode is {mode:o}; run `herd shutdown` so the next daemon recreates it"
                        ),
                    );
                }
            }
        }
        Ok(None) => push(
            "warn",
            "no daemon is running; any client command starts one (or run `herd serve`)".to_owned(),
        ),
        Err(err) => push("fail", format!("{err:#}")),
    }
    scope
}

/// Plugins that failed (as the running daemon says, else as the files check out
/// without running any init), and changes the daemon does not run yet.
async fn check_plugins(home: &Home, config: &Config, push: &mut impl FnMut(&'static str, String)) {
    let listing = match crate::plugins::Listing::current(home, config).await {
        Ok(listing) => listing,
        Err(err) => {
            push("fail", format!("plugins: {err:#}"));
            return;
        }
    };
    let failed: Vec<&serde_json::Value> = listing
        .rows
        .iter()
        .filter(|r| r["status"] == herd_hooks::PluginStatus::Failed.as_str())
        .collect();
    let source = match listing.daemon {
        Some(pid) => format!("as loaded by daemon pid {pid}"),
        None => "checked without running their init (no daemon)".to_owned(),
    };
    if failed.is_empty() {
        push(
            "ok",
            format!("{} plugin(s), none failed, {source}", listing.rows.len()),
        );
    }
    for row in failed {
        let name = row["name"].as_str().unwrap_or_default();
        push(
            "fail",
            format!(
                "plugin {name} failed: {}; fix it or run `herd plugins disable {name}`",
                row["reason"].as_str().unwrap_or("unknown reason"),
            ),
        );
    }
    for row in &listing.rows {
        if let Some(pending) = row["pending"].as_str() {
            push(
                "warn",
                format!(
                    "plugin {}: {pending}",
                    row["name"].as_str().unwrap_or_default()
                ),
            );
        }
        if row["panics"].as_u64().is_some_and(|n| n > 0)
            || row["timeouts"].as_u64().is_some_and(|n| n > 0)
        {
            push(
                "warn",
                format!(
                    "plugin {}: {} panic(s), {} timeout(s) in {} call(s); last: {}",
                    row["name"].as_str().unwrap_or_default(),
                    row["panics"],
                    row["timeouts"],
                    row["calls"],
                    row["last_failure"].as_str().unwrap_or("none"),
                ),
            );
        }
    }
}

/// Doctor lines for the daemon's own log: where it is, and writes that failed (a
/// full disk), with the newest lines it could not write.
fn log_lines(log: &serde_json::Value, push: &mut impl FnMut(&'static str, String)) {
    if log.is_null() {
        return;
    }
    let n_failed = log["failed_writes"].as_u64().unwrap_or(0);
    let path = log["path"].as_str().unwrap_or("stderr");
    if n_failed == 0 {
        push(
            "ok",
            format!(
                "daemon log {path} (rotated at {} MiB, {} files)",
                log["max_bytes"].as_u64().unwrap_or(0) / (1024 * 1024),
                log["generations"]
            ),
        );
        return;
    }
    push(
        "warn",
        format!(
            "{n_failed} daemon log write(s) failed, the last: {}; free space where {path} is",
            log["last_error"].as_str().unwrap_or("unknown")
        ),
    );
    for line in log["recent_failed_lines"]
        .as_array()
        .into_iter()
        .flatten()
        .rev()
        .take(10)
        .filter_map(serde_json::Value::as_str)
    {
        push("warn", format!("  not written: {}", output::visible(line)));
    }
}

/// Doctor lines for what the daemon's start-up restore did.
fn restore_lines(restore: &serde_json::Value, push: &mut impl FnMut(&'static str, String)) {
    if restore.is_null() {
        return;
    }
    if let Some(error) = restore["error"].as_str() {
        push(
            "warn",
            format!(
                "restore at start failed ({error}); fix the checkpoint's permissions, then `herd shutdown` so the next daemon retries"
            ),
        );
        return;
    }
    push(
        "ok",
        format!(
            "restore at start: {} re-attached to their supervisor, {} finished while no daemon ran, {} lost with their supervisor, {} re-adopted without one, {} closed as lost, {} closed (pid reused), {} already finished",
            restore["reattached"],
            restore["finished_while_away"],
            restore["supervisor_died"],
            restore["adopted"],
            restore["closed_lost"],
            restore["closed_reused"],
            restore["already_finished"]
        ),
    );
    if restore["records_only"].as_u64().is_some_and(|n| n > 0) {
        push(
            "warn",
            format!(
                "{} supervised session(s) run under a herd-shim of another protocol: followed by their exit record only (no live output, stdin or resize); they finish normally",
                restore["records_only"]
            ),
        );
    }
    if let Some(moved) = restore["moved_aside"].as_str() {
        push(
            "warn",
            format!(
                "the checkpoint was unusable and moved aside ({moved}); its sessions were not restored"
            ),
        );
    }
    if let Some(error) = restore["checkpoint_error"].as_str() {
        push(
            "warn",
            format!("the checkpoint was not updated after restore: {error}"),
        );
    }
}

/// The doctor line for restart-safe dispatch (B34), from the daemon's `scope` answer.
fn scope_line(scope: &serde_json::Value, mut push: impl FnMut(&'static str, String)) {
    match scope["status"].as_str() {
        Some("not_under_systemd") => push(
            "ok",
            "the daemon is not a systemd unit: --persist jobs run as its own children, no scope needed"
                .to_owned(),
        ),
        Some("available") => push(
            "ok",
            format!(
                "restart-safe scopes available through the user bus {}: --persist jobs survive a restart of the service",
                scope["bus_path"].as_str().unwrap_or("?")
            ),
        ),
        _ => push(
            if scope["require_restart_safe_scope"] == true { "fail" } else { "warn" },
            format!(
                "no restart-safe scope ({}; bus {}): --persist jobs die when the herd service restarts; {}",
                scope["detail"].as_str().unwrap_or("unknown"),
                scope["bus_path"].as_str().unwrap_or("?"),
                scope["remedy"].as_str().unwrap_or("run `loginctl enable-linger $USER`")
            ),
        ),
    }
}
