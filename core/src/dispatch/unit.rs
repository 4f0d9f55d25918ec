//! The systemd unit file for `herd serve`, as `herd service install` writes it.
//!
//! Why each line is there:
//! - `ExecStart` names the absolute binary (systemd does not search PATH the way a shell
//!   does, and a unit must keep working when the installing shell's PATH is gone) and
//!   `Environment=HERD_HOME=…` pins the home, so the service serves the same profile the
//!   operator installed it for.
//! - `KillMode=process`: on stop or restart systemd signals only the daemon. The daemon
//!   kills its own ordinary sessions when it shuts down; what it leaves behind on purpose
//!   (persisted jobs that could not get a scope, i.e. degraded dispatch) must not be
//!   swept away by the default `control-group` kill.
//! - `Delegate=yes`: the unit's cgroup subtree is the daemon's to manage, so it can give
//!   every session a cgroup of its own inside it (per-session containment)
//!   instead of one `systemd-run` per job. A unit installed without it (an earlier
//!   release) is reported by `herd doctor` and `herd service status` with the advice
//!   to reinstall ([`unit_lacks_delegate`]).
//! - `Restart=on-failure` with a short `RestartSec`: a crashed daemon comes back and
//!   restores its sessions from checkpoints; a clean stop stays stopped.
//! - No `HERD_SUPERVISED_CHILD`: that marker tells a *child* that its parent is a
//!   supervised herd, so the self-kill guard protects the parent. The daemon is the
//!   supervised process itself; it learns that from systemd's `INVOCATION_ID` and sets the
//!   marker in every child's environment. Setting it on the daemon would make the daemon
//!   believe it is somebody's child and leak the marker into processes herd did not start.
//! - A system unit runs as the named user (`User=`), never as root; its restart-safe
//!   workers need that user's manager, which is why the installer checks linger.

use std::path::Path;

/// Which systemd manager the unit is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnitKind<'a> {
    /// A user unit (`~/.config/systemd/user/herd.service`, `systemctl --user`).
    User,
    /// A system unit (`/etc/systemd/system/herd.service`) that runs as `user`.
    System {
        /// The account the daemon runs as.
        user: &'a str,
    },
}

/// The text of the `herd.service` unit running `<binary> serve` for `home`.
///
/// `binary` should be absolute (systemd rejects a relative `ExecStart`); paths are quoted
/// and escaped for systemd, so spaces, `%` and `$` in them are safe.
pub fn systemd_unit(binary: &Path, home: &Path, kind: UnitKind<'_>) -> String {
    let mut text = String::new();
    text.push_str("# Written by `herd service install`; reinstall rather than edit.\n");
    text.push_str("[Unit]\n");
    text.push_str("Description=herd background-process supervisor\n");
    if let UnitKind::System { .. } = kind {
        text.push_str("After=network.target\n");
    }
    text.push_str("\n[Service]\n");
    text.push_str("Type=exec\n");
    if let UnitKind::System { user } = kind {
        text.push_str(&format!("User={}\n", user.replace('%', "%%")));
    }
    text.push_str(&format!(
        "ExecStart={} serve\n",
        quote(&binary.to_string_lossy(), true)
    ));
    text.push_str(&format!(
        "Environment={}\n",
        quote(&format!("HERD_HOME={}", home.to_string_lossy()), false)
    ));
    text.push_str(
        "# Only the daemon is signalled on stop/restart: it ends its own sessions itself,\n\
         # and persisted jobs it leaves running must survive a restart.\n\
         # HERD_SUPERVISED_CHILD is deliberately absent: the daemon sets it for its children.\n",
    );
    text.push_str("KillMode=process\n");
    text.push_str("Delegate=yes\n");
    text.push_str("Restart=on-failure\n");
    text.push_str("RestartSec=2\n");
    text.push_str("TimeoutStopSec=30\n");
    text.push_str("\n[Install]\n");
    match kind {
        UnitKind::User => text.push_str("WantedBy=default.target\n"),
        UnitKind::System { .. } => text.push_str("WantedBy=multi-user.target\n"),
    }
    text
}

/// Quotes one value for a unit file: double quotes with C-style escapes, `%` doubled
/// (specifiers), and in `ExecStart` also `$` doubled (variable expansion).
fn quote(value: &str, exec: bool) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '%' => out.push_str("%%"),
            '$' if exec => out.push_str("$$"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Whether an installed unit's text lacks `Delegate=yes` (written by an earlier
/// release): herd cannot make per-session cgroups inside such a unit.
pub fn unit_lacks_delegate(text: &str) -> bool {
    !text.lines().any(|line| {
        let line = line.trim();
        line.strip_prefix("Delegate=")
            .is_some_and(|value| matches!(value.trim(), "yes" | "true" | "1" | "on"))
    })
}
