//! `herd doctor`: checks the home, config, socket, daemon and plugins.
//!
//! Each line is `ok`, `warn` or `fail`, with the fix on failures. Doctor never
//! starts a daemon; it reports whether one answers.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use herd_persistence::Home;
use herd_protocol::answers::HelloAnswer;
use herd_protocol::daemon::{
    ContainmentReport, DaemonLogReport, PluginRow, RestoreSummary, ScopeAnswer,
};
use herd_protocol::methods::{Scope, Status};
use herd_protocol::params::NoParams;
use serde_json::json;

use crate::client::{Client, answer_of, check_socket_path};
use crate::config::Config;
use crate::exit::{Code, Failure};
use crate::output;
use crate::plugins::Listed;

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
) -> Option<ScopeAnswer> {
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
            let status = client.send_typed::<Status>(&NoParams {}).await;
            if !status_lines(&client.hello, status, &socket, push) {
                return None;
            }
            // A daemon that does not answer `scope` leaves it unknown (said below);
            // one whose answer does not read is a failure naming the field.
            if let Ok(answer) = client.send_typed::<Scope>(&NoParams {}).await {
                match answer_of::<Scope>(answer) {
                    Ok(answer) => scope = Some(answer),
                    Err(err) => push("fail", format!("{err:#}")),
                }
            }
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

/// The lines of the daemon's `status` answer (`status`, as sent): its pid, version,
/// counts, restore, log, supervisor and containment; false (with a failure line)
/// when it did not answer or its answer does not read as the protocol says.
fn status_lines(
    hello: &HelloAnswer,
    status: anyhow::Result<serde_json::Value>,
    socket: &Path,
    push: &mut impl FnMut(&'static str, String),
) -> bool {
    let status = match status.and_then(answer_of::<Status>) {
        Ok(status) => status,
        Err(err) => {
            push("fail", format!("{err:#}"));
            return false;
        }
    };
    push(
        "ok",
        format!(
            "daemon pid {} version {} (protocol {}) serving {}, {} running, {} finished sessions, socket {}",
            hello.pid,
            hello.daemon,
            hello.protocol,
            hello.home,
            status.running,
            status.finished,
            socket.display()
        ),
    );
    restore_lines(&status.restore, push);
    log_lines(&status.log, push);
    // Absent (empty) from a daemon that does not say: no line, as for `null`.
    match status.supervisor.as_str() {
        "" => {}
        "shim" => push(
            "ok",
            "jobs run under their own herd-shim and outlive the daemon".to_owned(),
        ),
        _ => push(
            "warn",
            "jobs run inside the daemon and end with it: install herd-shim beside herd (or set shim_path), or leave supervisor = \"in_process\" if that is meant".to_owned(),
        ),
    }
    let ContainmentReport { kind, detail } = &status.containment;
    match kind.as_str() {
        "" => {}
        "cgroup" => push("ok", format!("containment: cgroup; {detail}")),
        kind => push(
            "warn",
            format!(
                "containment: {kind}, no session cgroup: {detail}; a job's processes are found by parentage (the shim is their subreaper), group and tag"
            ),
        ),
    }
    true
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
    let failed: Vec<&PluginRow> = listing
        .rows
        .iter()
        .map(|listed| &listed.row)
        .filter(|row| row.status == herd_hooks::PluginStatus::Failed.as_str())
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
        let name = &row.name;
        push(
            "fail",
            format!(
                "plugin {name} failed: {}; fix it or run `herd plugins disable {name}`",
                row.reason.as_deref().unwrap_or("unknown reason"),
            ),
        );
    }
    for Listed { row, pending } in &listing.rows {
        if let Some(pending) = pending {
            push("warn", format!("plugin {}: {pending}", row.name));
        }
        if let Some(counts) = &row.counts
            && (counts.panics > 0 || counts.timeouts > 0)
        {
            push(
                "warn",
                format!(
                    "plugin {}: {} panic(s), {} timeout(s) in {} call(s); last: {}",
                    row.name,
                    counts.panics,
                    counts.timeouts,
                    counts.calls,
                    counts.last_failure.as_deref().unwrap_or("none"),
                ),
            );
        }
    }
}

/// Doctor lines for the daemon's own log: where it is, and writes that failed (a
/// full disk), with the newest lines it could not write.
fn log_lines(log: &DaemonLogReport, push: &mut impl FnMut(&'static str, String)) {
    let n_failed = log.failed_writes;
    let path = log.path.as_deref().unwrap_or("stderr");
    if n_failed == 0 {
        push(
            "ok",
            format!(
                "daemon log {path} (rotated at {} MiB, {} files)",
                log.max_bytes / (1024 * 1024),
                log.generations
            ),
        );
        return;
    }
    push(
        "warn",
        format!(
            "{n_failed} daemon log write(s) failed, the last: {}; free space where {path} is",
            log.last_error.as_deref().unwrap_or("unknown")
        ),
    );
    for line in log.recent_failed_lines.iter().rev().take(10) {
        push("warn", format!("  not written: {}", output::visible(line)));
    }
}

/// Doctor lines for what the daemon's start-up restore did.
fn restore_lines(restore: &RestoreSummary, push: &mut impl FnMut(&'static str, String)) {
    let restore = match restore {
        RestoreSummary::Failed { error } => {
            push(
                "warn",
                format!(
                    "restore at start failed ({error}); fix the checkpoint's permissions, then `herd shutdown` so the next daemon retries"
                ),
            );
            return;
        }
        RestoreSummary::Counts(counts) => counts,
    };
    push(
        "ok",
        format!(
            "restore at start: {} re-attached to their supervisor, {} finished while no daemon ran, {} lost with their supervisor, {} re-adopted without one, {} closed as lost, {} closed (pid reused), {} already finished",
            restore.reattached,
            restore.finished_while_away,
            restore.supervisor_died,
            restore.adopted,
            restore.closed_lost,
            restore.closed_reused,
            restore.already_finished
        ),
    );
    if restore.records_only > 0 {
        push(
            "warn",
            format!(
                "{} supervised session(s) run under a herd-shim of another protocol: followed by their exit record only (no live output, stdin or resize); they finish normally",
                restore.records_only
            ),
        );
    }
    if let Some(moved) = &restore.moved_aside {
        push(
            "warn",
            format!(
                "the checkpoint was unusable and moved aside ({moved}); its sessions were not restored"
            ),
        );
    }
    if let Some(error) = &restore.checkpoint_error {
        push(
            "warn",
            format!("the checkpoint was not updated after restore: {error}"),
        );
    }
}

/// The doctor line for restart-safe dispatch (B34), from the daemon's `scope` answer.
fn scope_line(scope: &ScopeAnswer, mut push: impl FnMut(&'static str, String)) {
    let bus_path = scope.bus_path.as_deref().unwrap_or("?");
    match scope.status.as_str() {
        "not_under_systemd" => push(
            "ok",
            "the daemon is not a systemd unit: --persist jobs run as its own children, no scope needed"
                .to_owned(),
        ),
        "available" => push(
            "ok",
            format!(
                "restart-safe scopes available through the user bus {bus_path}: --persist jobs survive a restart of the service"
            ),
        ),
        _ => push(
            if scope.require_restart_safe_scope { "fail" } else { "warn" },
            format!(
                "no restart-safe scope ({}; bus {bus_path}): --persist jobs die when the herd service restarts; {}",
                scope.detail.as_deref().unwrap_or("unknown"),
                scope.remedy.as_deref().unwrap_or("run `loginctl enable-linger $USER`")
            ),
        ),
    }
}

#[cfg(test)]
mod tests;
