//! After a scoped spawn: watching the worker enter its unit, turning an early exit into
//! an error (and flipping the cached verdict when the user bus vanished), and stopping a
//! worker's scope on the kill path.
//!
//! Invariant: herd only ever stops units it named itself (`herd-worker-<id>.scope`).

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::PoisonError;
use std::time::Duration;

use serde::Serialize;

use super::bus::{derive_user_bus, resolve_program};
use super::probe::{CachedVerdict, ProbeKey};
use super::{
    BUS_ADDRESS_ENV, DispatchError, Dispatcher, PROBE_DETAIL_CHARS, SYSTEMCTL, SYSTEMD_RUN,
    ScopeStopError, WORKER_UNIT_PREFIX, validate_unit_id,
};

impl Dispatcher {
    /// Turns "a scoped worker exited before it acknowledged" into an error, re-checking the
    /// user bus from the worker's spawn environment (without the bus address it carried).
    /// When the bus is gone the error names it and the cached verdict flips to
    /// "unavailable", so the next dispatch degrades (or fails typed) instead of feeding
    /// another job to a dead wrapper.
    ///
    /// The registry calls this when [`wait_for_scope_ack`] answers [`ScopeAck::Exited`]
    /// for a [`Dispatch::Scoped`](crate::Dispatch::Scoped) child. [`DispatchError::LostUserBus`] is an
    /// infrastructure failure to record on the session; [`DispatchError::ExitedBeforeAck`]
    /// only says the bus is fine, and the session's own exit status stands.
    pub fn on_early_exit(
        &self,
        spawn_env: &HashMap<String, String>,
        unit: &str,
        exit_code: Option<i32>,
    ) -> DispatchError {
        let mut env = spawn_env.clone();
        env.remove(BUS_ADDRESS_ENV);
        let bus = derive_user_bus(&env, self.host.uid);
        if bus.env.is_some() {
            return DispatchError::ExitedBeforeAck {
                unit: unit.to_owned(),
                exit_code,
            };
        }
        let key = ProbeKey {
            program: resolve_program(SYSTEMD_RUN, spawn_env),
            bus_path: bus.bus_path.clone(),
        };
        let verdict = Err(format!("the user bus {} vanished", bus.bus_path.display()));
        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) = Some(CachedVerdict {
            key,
            verdict,
            at: self.clock.now(),
        });
        tracing::debug!(unit, bus_path = %bus.bus_path.display(), "scoped worker lost its user bus");
        DispatchError::LostUserBus {
            unit: unit.to_owned(),
            bus_path: bus.bus_path,
            user: self.host.user.clone(),
        }
    }

    /// Stops a worker scope with `systemctl --user stop <unit>`, which kills everything in
    /// it, including descendants that left the session's process group (`setsid`, double
    /// fork). A unit that is already gone ("not loaded", "not found", "does not exist")
    /// counts as stopped. `systemctl` is found on the spawn environment's `PATH` and given
    /// the same user bus as the dispatch.
    ///
    /// # Errors
    /// [`ScopeStopError::NotAWorkerScope`] for any unit not named
    /// `herd-worker-<id>.scope`; [`ScopeStopError::NoSystemctl`] and
    /// [`ScopeStopError::Failed`] when the stop did not happen, so the caller reports the
    /// kill as incomplete.
    pub async fn stop_scope(
        &self,
        unit: &str,
        spawn_env: &HashMap<String, String>,
    ) -> Result<(), ScopeStopError> {
        let is_worker_scope = unit
            .strip_prefix(WORKER_UNIT_PREFIX)
            .and_then(|rest| rest.strip_suffix(".scope"))
            .is_some_and(|id| validate_unit_id(id).is_ok());
        if !is_worker_scope {
            return Err(ScopeStopError::NotAWorkerScope {
                unit: unit.to_owned(),
            });
        }
        let Some(program) = resolve_program(SYSTEMCTL, spawn_env) else {
            return Err(ScopeStopError::NoSystemctl {
                unit: unit.to_owned(),
            });
        };
        let bus = derive_user_bus(spawn_env, self.host.uid);
        let failed = |detail: String| ScopeStopError::Failed {
            unit: unit.to_owned(),
            detail,
        };
        let mut command = tokio::process::Command::new(&program);
        command
            .args(["--user", "stop", unit])
            .env_clear()
            .envs(spawn_env)
            .envs(bus.env.iter().flatten().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command
            .spawn()
            .map_err(|err| failed(format!("could not start {}: {err}", program.display())))?;
        let output =
            match tokio::time::timeout(self.config.stop_timeout, child.wait_with_output()).await {
                Err(_elapsed) => {
                    return Err(failed(format!(
                        "systemctl did not finish within {} ms",
                        self.config.stop_timeout.as_millis()
                    )));
                }
                Ok(Err(err)) => return Err(failed(format!("could not wait for systemctl: {err}"))),
                Ok(Ok(output)) => output,
            };
        if output.status.success() {
            tracing::debug!(unit, "worker scope stopped");
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let lower = stderr.to_lowercase();
        if ["not loaded", "not found", "does not exist"]
            .iter()
            .any(|gone| lower.contains(gone))
        {
            tracing::debug!(unit, "worker scope was already gone");
            return Ok(());
        }
        let said: String = stderr.trim().chars().take(PROBE_DETAIL_CHARS).collect();
        Err(failed(format!(
            "systemctl exited with {}: {said}",
            output.status
        )))
    }
}

/// Whether `pid` runs inside the systemd unit `unit` (e.g. `herd-worker-<id>.scope`): its
/// `/proc/<pid>/cgroup` path ends in that unit. A scoped worker is "acknowledged" once this
/// is true: systemd-run has created the scope and exec'd the command.
pub fn is_in_scope(pid: i32, unit: &str) -> bool {
    let Some(text) = crate::sys::procfs::cgroup_of(pid) else {
        return false;
    };
    let suffix = format!("/{unit}");
    text.lines()
        .filter_map(|line| line.splitn(3, ':').nth(2))
        .any(|path| path.ends_with(&suffix))
}

/// How the start of a scoped worker went, as [`wait_for_scope_ack`] saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScopeAck {
    /// The worker runs inside its unit: systemd-run created the scope and exec'd it.
    Acknowledged,
    /// The worker exited (or became a zombie) without ever being seen inside its unit.
    Exited,
    /// Neither happened before the deadline.
    TimedOut,
}

/// Watches a freshly spawned scoped worker until it is inside `unit` ([`is_in_scope`]),
/// has exited, or `timeout` passed. Polls `/proc/<pid>` every 10 ms; a spawn that is
/// acknowledged costs one or two reads.
///
/// The registry starts this right after spawning a [`Dispatch::Scoped`](crate::Dispatch::Scoped) command; when the
/// answer is [`ScopeAck::Exited`] it asks [`Dispatcher::on_early_exit`] what happened.
pub async fn wait_for_scope_ack(pid: i32, unit: &str, timeout: Duration) -> ScopeAck {
    let deadline = tokio::time::Instant::now() + timeout;
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    loop {
        tick.tick().await;
        if is_in_scope(pid, unit) {
            return ScopeAck::Acknowledged;
        }
        if !is_alive(pid) {
            return ScopeAck::Exited;
        }
        if tokio::time::Instant::now() >= deadline {
            return ScopeAck::TimedOut;
        }
    }
}

/// Whether `pid` exists and is not a zombie (`/proc/<pid>/stat` state other than `Z`/`X`).
pub(super) fn is_alive(pid: i32) -> bool {
    let Some(stat) = crate::sys::procfs::stat_of(pid) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself hold ") ".
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
        .is_some_and(|state| !matches!(state, 'Z' | 'X' | 'x'))
}
