//! Restart-safe dispatch: how a session that must outlive its parent is started when the
//! daemon runs under systemd.
//!
//! A service unit's default `KillMode=control-group` kills every process in the unit's
//! cgroup when the service stops or restarts, whatever process group or session a child
//! put itself in. A job meant to outlive its agent (`persist_on_release`) therefore dies
//! with every `systemctl restart herd` unless it lives in a cgroup of its own. `systemd-run
//! --user --scope` gives it one: systemd-run moves itself into a fresh transient scope of
//! the user manager and then execs the command, so the pid, the process group and the
//! pipes stay exactly what the registry set up.
//!
//! [`Dispatcher::dispatch`] answers one of three things, and the answer is a value the
//! caller must act on:
//! - [`Dispatch::InProcess`]: nothing to do; the daemon is not under systemd (no
//!   `INVOCATION_ID`, or not Linux) or the session is not meant to outlive its parent.
//! - [`Dispatch::Scoped`]: run the returned argv (the command wrapped in `systemd-run`)
//!   with the returned bus environment added.
//! - [`Dispatch::Degraded`]: a scope was wanted and the host cannot give one; the command
//!   runs as a direct subprocess and dies when the service restarts. It is a distinct
//!   variant so it can never be read as "in process, nothing lost".
//!
//! `systemd-run`, `systemctl` and the user bus are found through the environment the
//! caller passes, which the registry makes the daemon's own (the one `herd doctor`
//! judges), never the job's caller's: a caller without `PATH` or `XDG_RUNTIME_DIR` must
//! not turn a scope into a direct subprocess. A system unit is exec'd
//! without `XDG_RUNTIME_DIR`, so `/run/user/<uid>` is the fallback, and the user manager
//! (with linger) may come up after the daemon, so the bus is looked up fresh for every
//! dispatch. A runtime dir is trusted only when it is ours and not group or
//! other writable, and `bus` in it is a socket we own; anything else could let another
//! user capture our jobs.
//!
//! Whether `systemd-run --user --scope` works at all is found out by running a no-op
//! through it (`/bin/sh -c 'exit 0'`: NixOS has no `/bin/true`) with a 3 s timeout. The
//! verdict, either way, is cached for 60 s, and concurrent first callers wait for one
//! probe instead of starting one each.
//!
//! After a scoped spawn, [`wait_for_scope_ack`] watches the worker enter its unit; a worker
//! that exits first goes to [`Dispatcher::on_early_exit`], which re-checks the bus and, when
//! it vanished, flips the cached verdict. [`Dispatcher::stop_scope`] is the kill path's
//! sweep: stopping the scope ends descendants that left the process group.
//!
//! Invariant: herd only ever stops units it named itself (`herd-worker-<id>.scope`).
//!
//! Invariant: without a scope, the operator is told once per [`Dispatcher`], not once per
//! job: the condition belongs to the host, and a warning per job would bury it.
//!
//! Invariant: a refusal by the host ([`DispatchError::is_infrastructure`]) is never charged
//! to a job: [`FailureBreaker`] does not count it and retries it after a cooldown.

mod breaker;
mod bus;
// herd's daemon settles into its delegated systemd unit with this; only herd's own
// binaries use it (the `internals` feature).
#[cfg(feature = "internals")]
pub mod delegate;
#[cfg(not(feature = "internals"))]
#[allow(
    dead_code,
    unreachable_pub,
    reason = "the daemon's start-up step, public only with the `internals` feature"
)]
pub(crate) mod delegate;
mod memory;
mod probe;
mod scope;
mod unit;

#[cfg(test)]
mod tests;

use crate::lock_order::{AsyncMutex, Mutex, rank};
use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use serde::Serialize;

pub use breaker::{BreakerGate, FailureBreaker};
pub use memory::memory_max;
use memory::{FALLBACK_TOTAL_RAM_BYTES, read_service_memory_max_bytes, read_total_ram_bytes};
#[cfg(test)]
use memory::{
    MEMORY_MAX_CAP_BYTES, MIN_MEMORY_MAX_BYTES, parse_cgroup_v2_path, parse_meminfo_total,
    parse_memory_max, read_service_memory_max_at,
};
use probe::{Availability, CachedVerdict};
pub use scope::{ScopeAck, is_in_scope, wait_for_scope_ack};
pub use unit::{UnitKind, systemd_unit, unit_lacks_delegate};

/// How long the availability probe may take before it counts as "no scope".
pub(crate) const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// How long a probe verdict (either way) is trusted before the next dispatch probes again.
pub(crate) const VERDICT_TTL: Duration = Duration::from_secs(60);

/// How long stopping a worker scope may take.
pub(crate) const STOP_TIMEOUT: Duration = Duration::from_secs(15);

/// Prefix of every worker unit name; the full name is `herd-worker-<unit_id>.scope`.
pub(crate) const WORKER_UNIT_PREFIX: &str = "herd-worker-";

/// Name of the environment variable systemd sets for every process it starts as a unit.
pub(crate) const INVOCATION_ID_ENV: &str = "INVOCATION_ID";

const BUS_ADDRESS_ENV: &str = "DBUS_SESSION_BUS_ADDRESS";
const RUNTIME_DIR_ENV: &str = "XDG_RUNTIME_DIR";
const SYSTEMD_RUN: &str = "systemd-run";
const SYSTEMCTL: &str = "systemctl";
const DEFAULT_PATH: &str = "/usr/local/bin:/usr/bin:/bin";
const PROBE_DETAIL_CHARS: usize = 300;

/// A source of monotonic time, injected so tests can prove the verdict TTL without waiting.
pub trait Clock: Send + Sync + fmt::Debug {
    /// The current instant.
    fn now(&self) -> Instant;
}

/// The real monotonic clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// Facts about the host the dispatch decision depends on, read once at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostFacts {
    /// `INVOCATION_ID` from the daemon's own environment: set means "we are a systemd unit".
    pub invocation_id: Option<String>,
    /// Our uid: the owner the runtime dir and the bus socket must have.
    pub uid: u32,
    /// Our user name, for the `loginctl enable-linger <user>` remedy.
    pub user: String,
    /// The effective `memory.max` of the daemon's own cgroup (None = unlimited or unknown).
    pub service_memory_max_bytes: Option<u64>,
    /// Physical RAM from `/proc/meminfo` (None = unreadable).
    pub total_ram_bytes: Option<u64>,
}

impl HostFacts {
    /// Reads the facts from this process: its environment, uid, user database entry,
    /// cgroup and `/proc/meminfo`. Unreadable facts become `None`, never an error.
    pub fn detect() -> HostFacts {
        let uid = nix::unistd::getuid();
        let user = match nix::unistd::User::from_uid(uid) {
            Ok(Some(entry)) => entry.name,
            _ => std::env::var("USER").unwrap_or_else(|_| uid.as_raw().to_string()),
        };
        HostFacts {
            invocation_id: std::env::var(INVOCATION_ID_ENV)
                .ok()
                .filter(|id| !id.is_empty()),
            uid: uid.as_raw(),
            user,
            service_memory_max_bytes: read_service_memory_max_bytes(),
            total_ram_bytes: read_total_ram_bytes(),
        }
    }

    /// Whether the daemon runs as a systemd unit: Linux and `INVOCATION_ID` set.
    pub fn is_under_systemd(&self) -> bool {
        cfg!(target_os = "linux") && self.invocation_id.is_some()
    }
}

/// Tunables of a [`Dispatcher`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchConfig {
    /// A configured worker memory limit; it wins only when it is tighter than the computed one.
    pub memory_max_bytes: Option<u64>,
    /// How long the availability probe may run (3 s by default).
    pub probe_timeout: Duration,
    /// How long a probe verdict is cached (60 s by default).
    pub verdict_ttl: Duration,
    /// How long `systemctl --user stop` may take in [`Dispatcher::stop_scope`] (15 s by
    /// default: stopping waits for the processes in the scope to die).
    pub stop_timeout: Duration,
}

impl Default for DispatchConfig {
    fn default() -> Self {
        DispatchConfig {
            memory_max_bytes: None,
            probe_timeout: PROBE_TIMEOUT,
            verdict_ttl: VERDICT_TTL,
            stop_timeout: STOP_TIMEOUT,
        }
    }
}

/// Which kind of dispatch a session got; serialises as `"in_process"`, `"scoped"` or
/// `"degraded"` for the spawn answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DispatchKind {
    /// Started like any other session, in the daemon's own cgroup.
    InProcess,
    /// Started inside its own systemd user scope; survives a restart of the herd service.
    Scoped,
    /// Wanted a scope, did not get one: a direct subprocess that dies with the service.
    Degraded,
}

impl DispatchKind {
    /// The wire name: `in_process`, `scoped` or `degraded`.
    pub fn as_str(self) -> &'static str {
        match self {
            DispatchKind::InProcess => "in_process",
            DispatchKind::Scoped => "scoped",
            DispatchKind::Degraded => "degraded",
        }
    }
}

impl fmt::Display for DispatchKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The dispatch decision for one session.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "dispatch", rename_all = "snake_case")]
pub enum Dispatch {
    /// Run the original argv as usual.
    InProcess,
    /// Run `argv` (the original argv wrapped in `systemd-run`) with `env` added on top of
    /// the spawn environment.
    Scoped {
        /// `<abs path of systemd-run> --user --scope --quiet --collect
        /// [--expand-environment=no] --unit herd-worker-<id> --property
        /// MemoryAccounting=yes --property MemoryMax=<bytes> -- <original argv…>`; the
        /// switch is there whenever this systemd-run knows it (254 and later), because those
        /// versions otherwise expand `$VAR` in the command before the shell sees it.
        argv: Vec<String>,
        /// The transient unit, `herd-worker-<id>.scope`: record it with the session; it is
        /// what `systemctl --user stop` takes and what the worker's `/proc/<pid>/cgroup`
        /// ends with once systemd-run has exec'd the command.
        unit: String,
        /// `XDG_RUNTIME_DIR` and `DBUS_SESSION_BUS_ADDRESS` the wrapper needs to reach the
        /// user manager; overrides on top of the spawn environment.
        #[serde(skip)]
        env: Vec<(String, String)>,
    },
    /// Run the original argv as a direct subprocess; it will not survive a service restart.
    Degraded {
        /// Why no scope was available (host-level; the same for every job until it changes).
        reason: String,
    },
}

impl Dispatch {
    /// Which kind of dispatch this is.
    pub fn kind(&self) -> DispatchKind {
        match self {
            Dispatch::InProcess => DispatchKind::InProcess,
            Dispatch::Scoped { .. } => DispatchKind::Scoped,
            Dispatch::Degraded { .. } => DispatchKind::Degraded,
        }
    }

    /// True only for [`Dispatch::Scoped`]: the job survives a restart of the herd service.
    pub fn is_restart_safe(&self) -> bool {
        matches!(self, Dispatch::Scoped { .. })
    }

    /// A sentence for the spawn answer (`note`), or `None` when there is nothing to say.
    pub fn note(&self) -> Option<String> {
        match self {
            Dispatch::InProcess => None,
            Dispatch::Scoped { unit, .. } => Some(format!(
                "dispatched in systemd scope {unit}: survives a restart of the herd service"
            )),
            Dispatch::Degraded { reason } => Some(format!(
                "dispatched as a direct subprocess ({reason}): it will die when the herd \
                 service restarts"
            )),
        }
    }
}

/// Whether restart-safe scopes can be created, as `herd doctor` reports it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum ScopeAvailability {
    /// The daemon is not a systemd unit; nothing needs a scope.
    NotUnderSystemd,
    /// `systemd-run --user --scope` works through this bus.
    Available {
        /// The user bus socket.
        bus_path: PathBuf,
    },
    /// No scope can be created.
    Unavailable {
        /// What went wrong.
        detail: String,
        /// The bus socket looked for.
        bus_path: PathBuf,
        /// What the operator can do.
        remedy: String,
    },
}

/// Why a dispatch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DispatchError {
    /// The host cannot create a restart-safe scope and the caller required one.
    #[error(
        "cannot create a restart-safe systemd scope ({detail}); the usual cause is that the \
         user manager of {user} is not running, so there is no user bus at {}: run \
         `loginctl enable-linger {user}` so it runs without a login session",
        bus_path.display()
    )]
    ScopeUnavailable {
        /// The user bus socket that was looked for.
        bus_path: PathBuf,
        /// The user the remedy names.
        user: String,
        /// What the lookup or the probe found.
        detail: String,
    },
    /// A scoped worker exited before acknowledging, and its user bus is gone.
    #[error(
        "scoped worker {unit} exited before it started: the user bus {} vanished; run \
         `loginctl enable-linger {user}` so the user manager keeps running, or set \
         KillMode=process in the herd service unit",
        bus_path.display()
    )]
    LostUserBus {
        /// The transient unit.
        unit: String,
        /// The bus socket that is gone.
        bus_path: PathBuf,
        /// The user the remedy names.
        user: String,
    },
    /// A scoped worker exited before acknowledging while the bus is still there: the
    /// wrapper or the command itself failed.
    #[error(
        "scoped worker {unit} exited before it started (exit {}); the user bus is still \
         there, so see the session log for what the command or systemd-run printed",
        exit_code.map_or_else(|| "by signal".to_owned(), |code| code.to_string())
    )]
    ExitedBeforeAck {
        /// The transient unit.
        unit: String,
        /// The exit code, `None` when killed by a signal.
        exit_code: Option<i32>,
    },
    /// The unit id cannot be part of a systemd unit name.
    #[error(
        "invalid unit id {unit_id:?}: use 1 to 200 characters from ASCII letters, digits, \
         '_', '.', ':' and '-'"
    )]
    InvalidUnitId {
        /// The id given.
        unit_id: String,
    },
    /// There is no command to dispatch.
    #[error("nothing to dispatch: the argv is empty; pass the command to run")]
    EmptyArgv,
}

impl DispatchError {
    /// True when the host refused (no scope, bus gone), as opposed to the job failing.
    /// Such a failure must not count toward the job's failure breaker.
    pub fn is_infrastructure(&self) -> bool {
        match self {
            DispatchError::ScopeUnavailable { .. } | DispatchError::LostUserBus { .. } => true,
            DispatchError::ExitedBeforeAck { .. }
            | DispatchError::InvalidUnitId { .. }
            | DispatchError::EmptyArgv => false,
        }
    }
}

/// Why a worker scope could not be stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ScopeStopError {
    /// The unit is not a herd worker scope; herd never stops units it did not create.
    #[error(
        "refusing to stop {unit:?}: only herd worker scopes (herd-worker-<id>.scope) are \
         stopped by herd; stop other units with systemctl yourself"
    )]
    NotAWorkerScope {
        /// The unit given.
        unit: String,
    },
    /// `systemctl` is not on the spawn PATH.
    #[error(
        "cannot stop systemd scope {unit}: systemctl was not found on the spawn PATH; stop \
         it by hand with `systemctl --user stop {unit}`"
    )]
    NoSystemctl {
        /// The scope.
        unit: String,
    },
    /// `systemctl --user stop` failed, timed out or could not be run.
    #[error(
        "cannot stop systemd scope {unit} ({detail}); its processes may still run: stop it \
         by hand with `systemctl --user stop {unit}`"
    )]
    Failed {
        /// The scope.
        unit: String,
        /// What systemctl said, or why it could not be run.
        detail: String,
    },
}

/// Decides and prepares restart-safe dispatch; one per registry (home). Cheap to share in
/// an `Arc`; holds no global state.
#[derive(Debug)]
pub struct Dispatcher {
    config: DispatchConfig,
    host: HostFacts,
    clock: Arc<dyn Clock>,
    memory_max_bytes: u64,
    /// The last probe verdict, keyed by what it was probed with.
    cache: Mutex<Option<CachedVerdict>, { rank::DISPATCH_CACHE }>,
    /// Held while a probe runs, so concurrent first callers share one probe.
    probe_gate: AsyncMutex<(), { rank::DISPATCH_PROBE }>,
    warned: AtomicBool,
    n_degrade_warnings: AtomicUsize,
    n_probes: AtomicUsize,
}

impl Dispatcher {
    /// A dispatcher for this process: detects the host and uses the real clock.
    pub fn new(config: DispatchConfig) -> Dispatcher {
        Dispatcher::with_host(config, HostFacts::detect(), Arc::new(SystemClock))
    }

    /// A dispatcher with injected host facts and clock (tests, embedding hosts).
    pub fn with_host(config: DispatchConfig, host: HostFacts, clock: Arc<dyn Clock>) -> Dispatcher {
        let memory_max_bytes = memory_max(
            host.service_memory_max_bytes,
            host.total_ram_bytes.unwrap_or(FALLBACK_TOTAL_RAM_BYTES),
            config.memory_max_bytes,
        );
        Dispatcher {
            config,
            host,
            clock,
            memory_max_bytes,
            cache: Mutex::new(None),
            probe_gate: AsyncMutex::new(()),
            warned: AtomicBool::new(false),
            n_degrade_warnings: AtomicUsize::new(0),
            n_probes: AtomicUsize::new(0),
        }
    }

    /// The host facts this dispatcher decides on.
    pub fn host(&self) -> &HostFacts {
        &self.host
    }

    /// The `MemoryMax` every scoped worker gets.
    pub fn memory_max_bytes(&self) -> u64 {
        self.memory_max_bytes
    }

    /// Whether the daemon runs as a systemd unit (Linux and `INVOCATION_ID` set).
    pub fn is_under_systemd(&self) -> bool {
        self.host.is_under_systemd()
    }

    /// How many degrade warnings this dispatcher has logged (0 or 1).
    pub fn n_degrade_warnings(&self) -> usize {
        self.n_degrade_warnings.load(Ordering::SeqCst)
    }

    /// How many availability probes this dispatcher has run.
    pub fn n_probes(&self) -> usize {
        self.n_probes.load(Ordering::SeqCst)
    }

    /// Decides how to start a session.
    ///
    /// `argv` is the full command (e.g. `["bash", "-c", "make test"]`), `spawn_env` the
    /// environment herd's own tools are resolved in, the daemon's (its `PATH` finds
    /// `systemd-run`, its `XDG_RUNTIME_DIR` locates the user bus), `outlives_parent` says the session must
    /// survive a restart of the service (`persist_on_release`), and `unit_id` names the
    /// scope (`herd-worker-<unit_id>.scope`; the session id fits).
    ///
    /// # Errors
    /// [`DispatchError::ScopeUnavailable`] when a scope is needed, none can be created and
    /// `require_restart_safe_scope` is set (without it the answer is
    /// [`Dispatch::Degraded`]); [`DispatchError::EmptyArgv`] and
    /// [`DispatchError::InvalidUnitId`] for bad input.
    pub async fn dispatch(
        &self,
        argv: &[String],
        spawn_env: &HashMap<String, String>,
        outlives_parent: bool,
        require_restart_safe_scope: bool,
        unit_id: &str,
    ) -> Result<Dispatch, DispatchError> {
        if argv.is_empty() {
            return Err(DispatchError::EmptyArgv);
        }
        validate_unit_id(unit_id)?;
        if !outlives_parent {
            return Ok(Dispatch::InProcess);
        }
        match self.availability_inner(spawn_env).await {
            Availability::NotUnderSystemd => Ok(Dispatch::InProcess),
            Availability::Ready {
                program,
                bus,
                support,
            } => {
                let unit_name = format!("{WORKER_UNIT_PREFIX}{unit_id}");
                let mut wrapped = vec![
                    program.to_string_lossy().into_owned(),
                    "--user".to_owned(),
                    "--scope".to_owned(),
                    "--quiet".to_owned(),
                    "--collect".to_owned(),
                ];
                if support.no_expand {
                    wrapped.push("--expand-environment=no".to_owned());
                }
                wrapped.extend([
                    "--unit".to_owned(),
                    unit_name.clone(),
                    "--property".to_owned(),
                    "MemoryAccounting=yes".to_owned(),
                    "--property".to_owned(),
                    format!("MemoryMax={}", self.memory_max_bytes),
                    // The shim makes the session's cgroup inside its worker scope.
                    "--property".to_owned(),
                    "Delegate=yes".to_owned(),
                    "--".to_owned(),
                ]);
                wrapped.extend(argv.iter().cloned());
                tracing::debug!(unit = %unit_name, "dispatch scoped");
                Ok(Dispatch::Scoped {
                    argv: wrapped,
                    unit: format!("{unit_name}.scope"),
                    env: bus.env.unwrap_or_default(),
                })
            }
            Availability::Unavailable { detail, bus_path } => {
                if require_restart_safe_scope {
                    tracing::debug!(unit_id, "dispatch refused: no scope and one is required");
                    return Err(DispatchError::ScopeUnavailable {
                        bus_path,
                        user: self.host.user.clone(),
                        detail,
                    });
                }
                self.warn_degraded_once(&bus_path, &detail);
                tracing::debug!(unit_id, "dispatch degraded");
                Ok(Dispatch::Degraded { reason: detail })
            }
        }
    }

    /// Whether restart-safe scopes can be created for children with this environment
    /// (runs or reuses the cached probe); for `herd doctor`.
    pub async fn availability(&self, spawn_env: &HashMap<String, String>) -> ScopeAvailability {
        match self.availability_inner(spawn_env).await {
            Availability::NotUnderSystemd => ScopeAvailability::NotUnderSystemd,
            Availability::Ready { bus, .. } => ScopeAvailability::Available {
                bus_path: bus.bus_path,
            },
            Availability::Unavailable { detail, bus_path } => ScopeAvailability::Unavailable {
                detail,
                bus_path,
                remedy: self.remedy(),
            },
        }
    }

    fn remedy(&self) -> String {
        format!(
            "run `loginctl enable-linger {}` so the user manager and its bus run without a \
             login session, or set KillMode=process in the herd service unit",
            self.host.user
        )
    }

    fn warn_degraded_once(&self, bus_path: &Path, detail: &str) {
        if self.warned.swap(true, Ordering::SeqCst) {
            return;
        }
        self.n_degrade_warnings.fetch_add(1, Ordering::SeqCst);
        tracing::warn!(
            bus_path = %bus_path.display(),
            cause = %detail,
            consequence = "sessions meant to outlive their agent run as direct subprocesses \
                           and die when the herd service restarts",
            remedy = %self.remedy(),
            "restart-safe dispatch unavailable; degrading to direct subprocesses"
        );
    }
}

fn validate_unit_id(unit_id: &str) -> Result<(), DispatchError> {
    let valid = !unit_id.is_empty()
        && unit_id.len() <= 200
        && unit_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b':' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(DispatchError::InvalidUnitId {
            unit_id: unit_id.to_owned(),
        })
    }
}
