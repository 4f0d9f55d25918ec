//! One delegated cgroup for a daemon started from a login shell under systemd: the
//! daemon asks the user manager for a transient scope with `Delegate=yes`
//! holding itself, then makes every session's cgroup inside it, instead of one
//! `systemd-run` per job (tens of milliseconds each).
//!
//! A process started from a login shell sits in `session-N.scope`, which is not
//! delegated: herd may not make cgroups there, and sessions would fall back to the
//! subreaper. At start-up the daemon calls the manager's `StartTransientUnit` (through
//! `busctl --user`, found on the daemon's own `PATH`, talking to the user bus of the
//! daemon's own environment, as every tool herd runs) for `herd-<uid>-<pid>.scope`
//! with `PIDs=[its pid]`, `Delegate=yes` and `CollectMode=inactive-or-failed`, and
//! waits until `/proc/self/cgroup` names the scope.
//!
//! In the delegated unit (this scope, or a `herd*.service` installed with
//! `Delegate=yes`) the daemon then moves itself into a leaf, `herd-daemon`, and
//! enables the controllers the unit has (`cpu`, `memory`, `pids`) for its children:
//! cgroup v2 lets only leaves hold processes once controllers are enabled. Shims
//! started from there put sessions beside the leaf (`<unit>/herd-<uid>/<session>`,
//! see `sys::cgroup::placement`).
//!
//! The scope outlives the daemon while any session's process lives (a scope ends when
//! empty), so a session started without `--persist` already survives a daemon crash
//! or restart inside it. Nothing here is fatal: every refusal leaves the daemon where
//! it is, and `herd doctor` says why.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::bus::{derive_user_bus, resolve_program};

/// The switch that keeps the daemon where it was started (`HERD_DELEGATE=0`); the
/// subreaper switch `HERD_CONTAINMENT=subreaper` does too.
pub const DELEGATE_ENV: &str = "HERD_DELEGATE";
/// How long the manager may take to answer and to move the daemon.
const ASK_TIMEOUT: Duration = Duration::from_secs(5);
const BUSCTL: &str = "busctl";

/// What the start-up decision depends on, read from the daemon's own environment and
/// `/proc` (gathered by [`Facts::detect`], given directly by tests).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// `/run/systemd/system` exists: systemd is the init system.
    pub systemd_running: bool,
    /// The daemon was started by systemd as a unit (`INVOCATION_ID` is set).
    pub in_unit: bool,
    /// The daemon's cgroup v2 path, when there is a v2 hierarchy.
    pub own_cgroup: Option<String>,
    /// Whether session cgroups can be made where the daemon is now.
    pub cgroup_usable: bool,
    /// Why the daemon must stay where it is (`HERD_DELEGATE=0`, the subreaper forced).
    pub opted_out: Option<String>,
    /// `busctl`, found on the daemon's `PATH`.
    pub busctl: Option<PathBuf>,
    /// The user bus environment to hand to busctl, or why there is none.
    pub bus: Result<Vec<(String, String)>, String>,
    /// The daemon's uid and pid.
    pub uid: u32,
    /// See [`Facts::uid`].
    pub pid: u32,
}

/// What the daemon does at start-up about its cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Ask the user manager for the scope `unit` by running `argv` with `env` added.
    Ask {
        /// The transient scope's name.
        unit: String,
        /// `busctl --user call … StartTransientUnit …`.
        argv: Vec<String>,
        /// The user bus variables.
        env: Vec<(String, String)>,
    },
    /// Stay where it is; the text says why.
    Stay(String),
}

impl Facts {
    /// Reads the facts from this process and `tools_env` (the environment herd's own
    /// tools are resolved in: the daemon's).
    pub fn detect(tools_env: &HashMap<String, String>) -> Facts {
        let uid = nix::unistd::getuid().as_raw();
        let containment = tools_env.get(crate::sys::cgroup::CONTAINMENT_ENV);
        let opted_out = if tools_env.get(DELEGATE_ENV).is_some_and(|v| v == "0") {
            Some(format!("{DELEGATE_ENV}=0"))
        } else if containment.is_some_and(|v| v == "subreaper") {
            Some(format!("{}=subreaper", crate::sys::cgroup::CONTAINMENT_ENV))
        } else {
            None
        };
        let bus = derive_user_bus(tools_env, uid);
        Facts {
            systemd_running: Path::new("/run/systemd/system").is_dir(),
            in_unit: tools_env
                .get(super::INVOCATION_ID_ENV)
                .is_some_and(|v| !v.is_empty()),
            own_cgroup: crate::sys::cgroup::own_cgroup(),
            cgroup_usable: matches!(
                crate::sys::cgroup::placement(),
                crate::sys::cgroup::Placement::Cgroup { .. }
            ),
            opted_out,
            busctl: resolve_program(BUSCTL, tools_env),
            bus: bus.env.ok_or(bus.problem),
            uid,
            pid: std::process::id(),
        }
    }
}

/// The start-up decision for `facts`.
pub fn decide(facts: &Facts) -> Decision {
    if let Some(why) = &facts.opted_out {
        return Decision::Stay(format!("no delegated scope asked for: {why}"));
    }
    if !facts.systemd_running {
        return Decision::Stay("systemd is not running (no /run/systemd/system)".to_owned());
    }
    if facts.cgroup_usable {
        return Decision::Stay(
            "the daemon's cgroup already takes session cgroups (a delegated unit, or root)"
                .to_owned(),
        );
    }
    if facts.in_unit {
        return Decision::Stay(
            "the daemon runs as a systemd unit without Delegate=yes; reinstall it with `herd service install`"
                .to_owned(),
        );
    }
    if facts.own_cgroup.is_none() {
        return Decision::Stay("no cgroup v2 hierarchy holds the daemon".to_owned());
    }
    let Some(busctl) = &facts.busctl else {
        return Decision::Stay(format!("no {BUSCTL} on the daemon's PATH"));
    };
    let env = match &facts.bus {
        Ok(env) => env.clone(),
        Err(problem) => return Decision::Stay(format!("no user bus: {problem}")),
    };
    let unit = format!("herd-{}-{}.scope", facts.uid, facts.pid);
    Decision::Ask {
        argv: start_transient_scope(busctl, &unit, facts.pid),
        unit,
        env,
    }
}

/// `busctl --user call` of the manager's `StartTransientUnit` for a scope `unit`
/// holding `pid`, delegated, collected once inactive or failed.
fn start_transient_scope(busctl: &Path, unit: &str, pid: u32) -> Vec<String> {
    let mut argv: Vec<String> = vec![
        busctl.to_string_lossy().into_owned(),
        "--user".into(),
        "--quiet".into(),
        format!("--timeout={}", ASK_TIMEOUT.as_secs()),
        "call".into(),
        "org.freedesktop.systemd1".into(),
        "/org/freedesktop/systemd1".into(),
        "org.freedesktop.systemd1.Manager".into(),
        "StartTransientUnit".into(),
        "ssa(sv)a(sa(sv))".into(),
        unit.into(),
        "fail".into(),
        "4".into(),
    ];
    for property in [
        vec!["PIDs", "au", "1", &pid.to_string()],
        vec!["Delegate", "b", "true"],
        vec!["CollectMode", "s", "inactive-or-failed"],
        vec!["Description", "s", "herd daemon and its sessions"],
    ] {
        argv.extend(property.into_iter().map(str::to_owned));
    }
    argv.push("0".into());
    argv
}

/// What [`settle`] did in this process, for `herd doctor` (through `status`).
static OUTCOME: std::sync::OnceLock<String> = std::sync::OnceLock::new();

/// What [`settle`] did in this process, if it ran.
pub fn outcome() -> Option<&'static str> {
    OUTCOME.get().map(String::as_str)
}

/// Asks for the scope when [`decide`] says so, and settles the daemon in a leaf of
/// its delegated unit; returns what was done, in words for the log and `doctor`.
/// Runs once, at start-up, before the registry starts anything.
pub async fn settle(tools_env: &HashMap<String, String>) -> String {
    let said = settle_inner(tools_env).await;
    let _ = OUTCOME.set(said.clone());
    said
}

async fn settle_inner(tools_env: &HashMap<String, String>) -> String {
    let facts = Facts::detect(tools_env);
    let said = match decide(&facts) {
        Decision::Stay(why) => why,
        Decision::Ask { unit, argv, env } => match ask(&unit, &argv, &env).await {
            Ok(()) => format!("the daemon runs in the delegated scope {unit}"),
            Err(why) => format!("the user manager did not give the scope {unit}: {why}"),
        },
    };
    match enter_leaf() {
        Ok(Some(leaf)) => format!("{said}; the daemon holds the leaf {}", leaf.display()),
        Ok(None) => said,
        Err(why) => format!("{said}; {why}"),
    }
}

/// Runs `argv` and waits until the daemon's cgroup is `unit`.
async fn ask(unit: &str, argv: &[String], env: &[(String, String)]) -> Result<(), String> {
    let (program, args) = argv.split_first().ok_or("no busctl argv")?;
    let mut command = tokio::process::Command::new(program);
    command
        .args(args)
        .envs(env.iter().cloned())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let output = match tokio::time::timeout(ASK_TIMEOUT, command.output()).await {
        Ok(Ok(output)) => output,
        Ok(Err(error)) => return Err(format!("{program} did not run: {error}")),
        Err(_) => return Err(format!("no answer within {} s", ASK_TIMEOUT.as_secs())),
    };
    if !output.status.success() {
        let text = String::from_utf8_lossy(&output.stderr);
        return Err(format!("{program} failed: {}", text.trim()));
    }
    // The job that moves the pid runs after the call returns.
    let deadline = tokio::time::Instant::now() + ASK_TIMEOUT;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    while tokio::time::Instant::now() < deadline {
        if crate::sys::cgroup::own_cgroup().is_some_and(|own| own.ends_with(&format!("/{unit}"))) {
            return Ok(());
        }
        tick.tick().await;
    }
    Err(format!(
        "the daemon was not moved into it within {} s",
        ASK_TIMEOUT.as_secs()
    ))
}

/// In a delegated unit of herd's (`herd-*.scope`, `herd*.service`) whose cgroup is
/// ours: moves the daemon into the leaf `herd-daemon` and enables the unit's
/// controllers for its children. `Ok(None)` where that does not apply.
fn enter_leaf() -> Result<Option<PathBuf>, String> {
    let (Some(mount), Some(own)) = (
        crate::sys::cgroup::v2_mount(),
        crate::sys::cgroup::own_cgroup(),
    ) else {
        return Ok(None);
    };
    if !is_herd_unit(&own) {
        return Ok(None);
    }
    let unit = mount.join(own.trim_start_matches('/'));
    if !crate::sys::cgroup::can_move_into(&unit) {
        return Ok(None);
    }
    let leaf = unit.join(crate::sys::cgroup::DAEMON_LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("{} cannot be made: {e}", leaf.display())),
    }
    crate::sys::cgroup::SessionCgroup::move_self_to(&leaf)
        .map_err(|e| format!("the daemon could not move into {}: {e}", leaf.display()))?;
    // Not in a service: systemd puts the next main process in the unit's own cgroup
    // at a restart, which v2 refuses once controllers are enabled below it.
    if own.ends_with(".scope") {
        crate::sys::cgroup::enable_controllers(&unit);
    }
    Ok(Some(leaf))
}

/// Whether the cgroup path `own` is a unit herd runs in: its last component is
/// `herd-<…>.scope` or `herd<…>.service`.
pub(crate) fn is_herd_unit(own: &str) -> bool {
    let last = own.rsplit('/').next().unwrap_or_default();
    (last.starts_with("herd-") && last.ends_with(".scope"))
        || (last.starts_with("herd") && last.ends_with(".service"))
}

#[cfg(test)]
mod tests;
