//! `herd service install|uninstall|status`: running the daemon as a systemd unit (B34).
//!
//! Where systemd is not running (no `/run/systemd/system`) `install` says so and
//! writes nothing, unless `$HERD_SYSTEMD_UNIT_DIR` names where to stage the unit. A
//! unit installed without `Delegate=yes` (an earlier release) gets the advice to
//! reinstall, from `status` and from `herd doctor`.
//!
//! The unit text comes from `herd_core::systemd_unit` (`KillMode=process`,
//! `Delegate=yes`, a restart policy, `HERD_HOME` pinned to this home, the binary that runs this command). A user
//! unit lives in `~/.config/systemd/user/`, a system unit in `/etc/systemd/system/`
//! and runs as a named user; `$HERD_SYSTEMD_UNIT_DIR` overrides the directory (tests,
//! packaging). After writing, `systemctl [--user] daemon-reload` and `enable --now
//! herd` run, unless `--no-start` is given or systemctl is not installed, in which case
//! the command says what to run instead. Linger is checked with `loginctl show-user`:
//! without it a user manager (and so a user unit, and the scopes `--persist` jobs get)
//! only runs while the user is logged in.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::Context;
use herd_core::UnitKind;
use herd_persistence::Home;
use serde::Serialize;

use crate::args::{ServiceCommand, ServiceInstallArgs, ServiceScopeArgs};
use crate::exit::{Code, Failure};
use crate::output;

/// The unit's name.
const UNIT: &str = "herd";

/// The unit file's name.
const UNIT_FILE: &str = "herd.service";

/// The environment variable that overrides the unit directory.
const UNIT_DIR_ENV: &str = "HERD_SYSTEMD_UNIT_DIR";

/// Runs a `herd service` subcommand.
///
/// # Errors
/// An unwritable unit directory, or a systemctl call that fails (exit 1).
pub(crate) fn run(home: &Home, command: &ServiceCommand) -> anyhow::Result<()> {
    match command {
        ServiceCommand::Install(args) => install(home, args),
        ServiceCommand::Uninstall(scope) => uninstall(*scope),
        ServiceCommand::Status(scope) => status(*scope),
    }
}

/// Where the unit file of `scope` goes.
fn unit_path(scope: ServiceScopeArgs) -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os(UNIT_DIR_ENV).filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join(UNIT_FILE));
    }
    if scope.system {
        return Ok(PathBuf::from("/etc/systemd/system").join(UNIT_FILE));
    }
    let config = match std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir),
        None => directories::BaseDirs::new()
            .map(|dirs| dirs.home_dir().join(".config"))
            .ok_or_else(|| {
                Failure::new(
                    Code::Usage,
                    "cannot find your home directory for ~/.config/systemd/user; set HOME or HERD_SYSTEMD_UNIT_DIR",
                )
            })?,
    };
    Ok(config.join("systemd").join("user").join(UNIT_FILE))
}

/// The user a unit's daemon runs as, for `User=` and the linger check.
fn service_user(args_user: Option<&str>) -> String {
    if let Some(user) = args_user.filter(|u| !u.is_empty()) {
        return user.to_owned();
    }
    if let Ok(user) = std::env::var("SUDO_USER")
        && !user.is_empty()
    {
        return user;
    }
    herd_core::HostFacts::detect().user
}

/// `systemctl [--user] ARGS…` as one shown command line.
fn systemctl_args(scope: ServiceScopeArgs, args: &[&str]) -> Vec<String> {
    let mut all = Vec::new();
    if !scope.system {
        all.push("--user".to_owned());
    }
    all.extend(args.iter().map(|a| (*a).to_owned()));
    all
}

/// A program on `PATH`, if installed.
fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| {
            use std::os::unix::fs::PermissionsExt;
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}

/// What a tool run answered.
#[derive(Debug)]
struct ToolOutput {
    success: bool,
    stdout: String,
    stderr: String,
}

/// Runs a systemd tool to completion, stdin closed, and captures what it says.
fn run_tool(program: &Path, args: &[String]) -> anyhow::Result<ToolOutput> {
    let output = crate::auxiliary::command(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("failed to run {}", program.display()))?;
    Ok(ToolOutput {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).trim().to_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
    })
}

/// Runs `systemctl` with `args`; a failure is an error naming the command and what it said.
fn systemctl(program: &Path, args: Vec<String>) -> anyhow::Result<String> {
    let out = run_tool(program, &args)?;
    if !out.success {
        return Err(Failure::new(
            Code::Failed,
            format!(
                "`systemctl {}` failed: {}",
                args.join(" "),
                if out.stderr.is_empty() {
                    &out.stdout
                } else {
                    &out.stderr
                }
            ),
        )
        .into());
    }
    Ok(out.stdout)
}

/// Whether `user` has linger: `Some(true|false)`, `None` when loginctl cannot say.
fn linger(user: &str) -> Option<bool> {
    let program = find_program("loginctl")?;
    let args = vec![
        "show-user".to_owned(),
        user.to_owned(),
        "-p".to_owned(),
        "Linger".to_owned(),
    ];
    let out = run_tool(&program, &args).ok()?;
    if !out.success {
        // A user with no session and no linger is unknown to logind: no linger.
        return Some(false);
    }
    let value = out
        .stdout
        .rsplit('=')
        .next()
        .unwrap_or_default()
        .trim()
        .to_owned();
    Some(value == "yes")
}

/// Where systemd, when it is the running init, says so (`sd_booted`).
const SYSTEMD_RUNNING_DIR: &str = "/run/systemd/system";

/// Refuses to install a unit on a host where systemd is not running: the unit would
/// never start. A unit directory given explicitly (`HERD_SYSTEMD_UNIT_DIR`: packaging,
/// staging a unit for another machine) is written where asked.
fn check_systemd_running() -> anyhow::Result<()> {
    let staged = std::env::var_os(UNIT_DIR_ENV).is_some_and(|d| !d.is_empty());
    if staged || Path::new(SYSTEMD_RUNNING_DIR).is_dir() {
        return Ok(());
    }
    Err(Failure::new(
        Code::Failed,
        format!(
            "systemd is not running on this host ({SYSTEMD_RUNNING_DIR} is missing), so a \
             herd.service unit would never start; nothing was written. herd needs no service: \
             the first herd command starts its daemon. To stage a unit for another machine, \
             set {UNIT_DIR_ENV} to the directory to write it in"
        ),
    )
    .into())
}

/// The advice for an installed unit written without `Delegate=yes` (an earlier
/// release), `None` when the unit at `path` is absent, unreadable or current.
pub(crate) fn stale_unit_advice(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    herd_core::unit_lacks_delegate(&text).then(|| {
        format!(
            "the unit {} has no Delegate=yes (an earlier herd wrote it), so herd cannot give \
             each session a cgroup of its own under it; reinstall it with `herd service install`",
            path.display()
        )
    })
}

/// The installed unit's advice for `herd doctor`: both scopes' unit paths.
pub(crate) fn installed_unit_advice() -> Vec<String> {
    [false, true]
        .into_iter()
        .filter_map(|system| {
            let scope = ServiceScopeArgs {
                user: !system,
                system,
                json: false,
            };
            unit_path(scope).ok()
        })
        .collect::<std::collections::BTreeSet<_>>()
        .iter()
        .filter_map(|path| stale_unit_advice(path))
        .collect()
}

/// `herd service install`.
fn install(home: &Home, args: &ServiceInstallArgs) -> anyhow::Result<()> {
    let scope = args.scope;
    check_systemd_running()?;
    let binary = std::env::current_exe()
        .and_then(|exe| exe.canonicalize())
        .context("cannot find the absolute path of the herd executable")?;
    let root = home.root().to_path_buf();
    let user = service_user(args.run_as.as_deref());
    let kind = if scope.system {
        UnitKind::System { user: &user }
    } else {
        UnitKind::User
    };
    let text = herd_core::systemd_unit(&binary, &root, kind);
    let path = unit_path(scope)?;
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("failed to create the unit directory {}", dir.display()))?;
    }
    std::fs::write(&path, &text)
        .with_context(|| format!("failed to write the unit file {}", path.display()))?;

    let mut notes = Vec::new();
    let mut started = false;
    let enable = systemctl_args(scope, &["enable", "--now", UNIT]);
    if args.no_start {
        notes.push(format!(
            "not started (--no-start); start it with `systemctl {}`",
            enable.join(" ")
        ));
    } else if let Some(program) = find_program("systemctl") {
        systemctl(&program, systemctl_args(scope, &["daemon-reload"]))?;
        systemctl(&program, enable.clone())?;
        started = true;
    } else {
        notes.push(format!(
            "systemctl was not found, so the unit was only written; on a systemd host run \
             `systemctl {}` and then `systemctl {}`",
            systemctl_args(scope, &["daemon-reload"]).join(" "),
            enable.join(" ")
        ));
    }
    let lingering = linger(&user);
    match lingering {
        Some(true) => {}
        Some(false) => notes.push(format!(
            "linger is off for {user}: run `loginctl enable-linger {user}` so {} without a \
             login session",
            if scope.system {
                "--persist jobs get restart-safe scopes"
            } else {
                "the user unit (and its --persist jobs' scopes) keeps running"
            }
        )),
        None => notes.push(format!(
            "could not check linger (no loginctl); make sure `loginctl enable-linger {user}` \
             is set so herd runs without a login session"
        )),
    }
    if scope.json {
        output::json_pretty(&Installed {
            unit_path: path.display().to_string(),
            kind: if scope.system { "system" } else { "user" },
            binary: binary.display().to_string(),
            home: root.display().to_string(),
            user: &user,
            started,
            linger: lingering,
            notes: &notes,
        })?;
    } else {
        output::line(&format!("wrote {}", path.display()))?;
        if started {
            output::line(&format!("enabled and started {UNIT_FILE}"))?;
        }
        for note in &notes {
            output::line(&format!("note: {note}"))?;
        }
    }
    Ok(())
}

/// `herd service uninstall`.
fn uninstall(scope: ServiceScopeArgs) -> anyhow::Result<()> {
    let path = unit_path(scope)?;
    let mut notes = Vec::new();
    let systemctl_program = find_program("systemctl");
    if let Some(program) = &systemctl_program {
        if let Err(err) = systemctl(program, systemctl_args(scope, &["disable", "--now", UNIT])) {
            notes.push(format!("{err:#}; the unit may not have been enabled"));
        }
    } else {
        notes.push("systemctl was not found; nothing was stopped".to_owned());
    }
    let removed = match std::fs::remove_file(&path) {
        Ok(()) => true,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => false,
        Err(err) => {
            return Err(err)
                .with_context(|| format!("failed to remove the unit file {}", path.display()));
        }
    };
    if let Some(program) = &systemctl_program {
        systemctl(program, systemctl_args(scope, &["daemon-reload"]))?;
    }
    if scope.json {
        output::json_pretty(&Uninstalled {
            unit_path: path.display().to_string(),
            removed,
            notes: &notes,
        })?;
    } else {
        if removed {
            output::line(&format!("removed {}", path.display()))?;
        } else {
            output::line(&format!("no unit file at {}", path.display()))?;
        }
        for note in &notes {
            output::line(&format!("note: {note}"))?;
        }
    }
    Ok(())
}

/// `herd service status`.
fn status(scope: ServiceScopeArgs) -> anyhow::Result<()> {
    let path = unit_path(scope)?;
    let installed = path.is_file();
    // What systemctl says, `unknown` when it says nothing; none without systemctl.
    let ask = |verb: &str| -> Option<String> {
        let program = find_program("systemctl")?;
        Some(
            match run_tool(&program, &systemctl_args(scope, &[verb, UNIT])) {
                Ok(out) if !out.stdout.is_empty() => {
                    out.stdout.lines().next().unwrap_or_default().to_owned()
                }
                Ok(_) | Err(_) => "unknown".to_owned(),
            },
        )
    };
    let enabled = ask("is-enabled");
    let active = ask("is-active");
    let advice = stale_unit_advice(&path);
    if scope.json {
        output::json_pretty(&Status {
            unit_path: path.display().to_string(),
            installed,
            enabled: enabled.as_deref(),
            active: active.as_deref(),
            delegate: installed.then(|| advice.is_none()),
            advice: advice.as_deref(),
        })?;
    } else {
        output::line(&format!(
            "unit {} ({})",
            path.display(),
            if installed {
                "installed"
            } else {
                "not installed; run `herd service install`"
            }
        ))?;
        let shown = |v: &Option<String>| {
            v.as_deref()
                .unwrap_or("unknown (systemctl not found)")
                .to_owned()
        };
        output::line(&format!("enabled: {}", shown(&enabled)))?;
        output::line(&format!("active: {}", shown(&active)))?;
        if let Some(advice) = &advice {
            output::line(&format!("note: {advice}"))?;
        }
    }
    Ok(())
}

/// `herd service install --json`.
#[derive(Serialize)]
struct Installed<'a> {
    unit_path: String,
    kind: &'static str,
    binary: String,
    home: String,
    user: &'a str,
    started: bool,
    linger: Option<bool>,
    notes: &'a [String],
}

/// `herd service uninstall --json`.
#[derive(Serialize)]
struct Uninstalled<'a> {
    unit_path: String,
    removed: bool,
    notes: &'a [String],
}

/// `herd service status --json`: systemctl's words (null without systemctl).
#[derive(Serialize)]
struct Status<'a> {
    unit_path: String,
    installed: bool,
    enabled: Option<&'a str>,
    active: Option<&'a str>,
    delegate: Option<bool>,
    advice: Option<&'a str>,
}
