//! Restart-safe dispatch: how a session that must outlive its parent is started when the
//! daemon runs under systemd (B34, B35).
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
//! The user bus is derived from the spawn environment, never from the daemon's own: a
//! system unit is exec'd without `XDG_RUNTIME_DIR` or `DBUS_SESSION_BUS_ADDRESS`, and the
//! user manager (with linger) may come up after the daemon, so the bus is looked up fresh
//! for every dispatch. A runtime dir is trusted only when it is ours and not group or
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
//! to a job: [`FailureBreaker`] does not count it and retries it after a cooldown (B35).

mod breaker;
mod memory;
mod unit;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
pub use unit::{UnitKind, systemd_unit};

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
    /// Such a failure must not count toward the job's failure breaker (B35).
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
    cache: Mutex<Option<CachedVerdict>>,
    /// Held while a probe runs, so concurrent first callers share one probe.
    probe_gate: tokio::sync::Mutex<()>,
    warned: AtomicBool,
    n_degrade_warnings: AtomicUsize,
    n_probes: AtomicUsize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct ProbeKey {
    program: Option<PathBuf>,
    bus_path: PathBuf,
}

/// What a successful probe learned about the host's systemd-run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScopeSupport {
    /// systemd-run accepts `--expand-environment=no` (systemd 254 and later). Those
    /// versions expand `$VAR` in the command line of a scope by default, which would
    /// rewrite every shell command herd runs (`$f` in a loop becomes an empty string);
    /// earlier versions neither expand nor know the switch.
    no_expand: bool,
}

/// A probe run that failed: the detail for the operator, and systemd-run's stderr.
struct ProbeFailure {
    detail: String,
    stderr: String,
}

#[derive(Debug, Clone)]
struct CachedVerdict {
    key: ProbeKey,
    verdict: Result<ScopeSupport, String>,
    at: Instant,
}

/// The user bus derived from a spawn environment.
#[derive(Debug, Clone, PartialEq, Eq)]
struct UserBus {
    bus_path: PathBuf,
    /// `Some` when the bus is usable: the env overrides to hand to the wrapper.
    env: Option<Vec<(String, String)>>,
    /// Why the bus is not usable, when it is not.
    problem: String,
}

enum Availability {
    NotUnderSystemd,
    Ready {
        program: PathBuf,
        bus: UserBus,
        support: ScopeSupport,
    },
    Unavailable {
        detail: String,
        bus_path: PathBuf,
    },
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
            probe_gate: tokio::sync::Mutex::new(()),
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
    /// environment the child will get (its `PATH` finds `systemd-run`, its
    /// `XDG_RUNTIME_DIR` locates the user bus), `outlives_parent` says the session must
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

    /// Turns "a scoped worker exited before it acknowledged" into an error, re-checking the
    /// user bus from the worker's spawn environment (without the bus address it carried).
    /// When the bus is gone the error names it and the cached verdict flips to
    /// "unavailable", so the next dispatch degrades (or fails typed) instead of feeding
    /// another job to a dead wrapper.
    ///
    /// The registry calls this when [`wait_for_scope_ack`] answers [`ScopeAck::Exited`]
    /// for a [`Dispatch::Scoped`] child. [`DispatchError::LostUserBus`] is an
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

    async fn availability_inner(&self, spawn_env: &HashMap<String, String>) -> Availability {
        if !self.is_under_systemd() {
            return Availability::NotUnderSystemd;
        }
        let bus = derive_user_bus(spawn_env, self.host.uid);
        if bus.env.is_none() {
            return Availability::Unavailable {
                detail: bus.problem,
                bus_path: bus.bus_path,
            };
        }
        let program = resolve_program(SYSTEMD_RUN, spawn_env);
        let key = ProbeKey {
            program: program.clone(),
            bus_path: bus.bus_path.clone(),
        };
        let verdict = match self.fresh_verdict(&key) {
            Some(verdict) => verdict,
            None => {
                let _gate = self.probe_gate.lock().await;
                // Another caller may have probed while we waited for the gate.
                match self.fresh_verdict(&key) {
                    Some(verdict) => verdict,
                    None => {
                        let verdict = match &program {
                            Some(program) => self.probe(program, spawn_env, &bus).await,
                            None => Err(format!("{SYSTEMD_RUN} was not found on the spawn PATH")),
                        };
                        *self.cache.lock().unwrap_or_else(PoisonError::into_inner) =
                            Some(CachedVerdict {
                                key,
                                verdict: verdict.clone(),
                                at: self.clock.now(),
                            });
                        verdict
                    }
                }
            }
        };
        match (verdict, program) {
            (Ok(support), Some(program)) => Availability::Ready {
                program,
                bus,
                support,
            },
            (Ok(_), None) => Availability::Unavailable {
                detail: format!("{SYSTEMD_RUN} was not found on the spawn PATH"),
                bus_path: bus.bus_path,
            },
            (Err(detail), _) => Availability::Unavailable {
                detail,
                bus_path: bus.bus_path,
            },
        }
    }

    fn fresh_verdict(&self, key: &ProbeKey) -> Option<Result<ScopeSupport, String>> {
        let cache = self.cache.lock().unwrap_or_else(PoisonError::into_inner);
        let cached = cache.as_ref()?;
        let age = self.clock.now().saturating_duration_since(cached.at);
        (cached.key == *key && age < self.config.verdict_ttl).then(|| cached.verdict.clone())
    }

    /// Runs `/bin/sh -c 'exit 0'` through `systemd-run --user --scope`, first with
    /// `--expand-environment=no`, and again without it when this systemd-run predates it.
    async fn probe(
        &self,
        program: &Path,
        spawn_env: &HashMap<String, String>,
        bus: &UserBus,
    ) -> Result<ScopeSupport, String> {
        let verdict = match self.probe_once(program, spawn_env, bus, true).await {
            Ok(()) => Ok(ScopeSupport { no_expand: true }),
            Err(failure) if failure.stderr.contains("expand-environment") => self
                .probe_once(program, spawn_env, bus, false)
                .await
                .map(|()| ScopeSupport { no_expand: false })
                .map_err(|failure| failure.detail),
            Err(failure) => Err(failure.detail),
        };
        tracing::debug!(ok = verdict.is_ok(), "systemd scope probe finished");
        verdict
    }

    async fn probe_once(
        &self,
        program: &Path,
        spawn_env: &HashMap<String, String>,
        bus: &UserBus,
        no_expand: bool,
    ) -> Result<(), ProbeFailure> {
        self.n_probes.fetch_add(1, Ordering::SeqCst);
        let failure = |detail: String| ProbeFailure {
            detail,
            stderr: String::new(),
        };
        let unit = format!(
            "herd-probe-{}-{:08x}",
            std::process::id(),
            fastrand::u32(..)
        );
        let mut command = tokio::process::Command::new(program);
        command.args(["--user", "--scope", "--quiet", "--collect"]);
        if no_expand {
            command.arg("--expand-environment=no");
        }
        command
            .args(["--unit", &unit, "--", "/bin/sh", "-c", "exit 0"])
            .env_clear()
            .envs(spawn_env)
            .envs(bus.env.iter().flatten().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let child = command
            .spawn()
            .map_err(|err| failure(format!("could not start {}: {err}", program.display())))?;
        match tokio::time::timeout(self.config.probe_timeout, child.wait_with_output()).await {
            Err(_elapsed) => Err(failure(format!(
                "{} --user --scope did not finish within {} ms",
                program.display(),
                self.config.probe_timeout.as_millis()
            ))),
            Ok(Err(err)) => Err(failure(format!(
                "could not wait for {}: {err}",
                program.display()
            ))),
            Ok(Ok(output)) if output.status.success() => Ok(()),
            Ok(Ok(output)) => {
                let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
                let said: String = stderr.trim().chars().take(PROBE_DETAIL_CHARS).collect();
                Err(ProbeFailure {
                    detail: format!(
                        "{} --user --scope failed ({}){}",
                        program.display(),
                        output.status,
                        if said.is_empty() {
                            String::new()
                        } else {
                            format!(": {said}")
                        }
                    ),
                    stderr,
                })
            }
        }
    }
}

/// Whether `pid` runs inside the systemd unit `unit` (e.g. `herd-worker-<id>.scope`): its
/// `/proc/<pid>/cgroup` path ends in that unit. A scoped worker is "acknowledged" once this
/// is true: systemd-run has created the scope and exec'd the command.
pub fn is_in_scope(pid: i32, unit: &str) -> bool {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/cgroup")) else {
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
/// The registry starts this right after spawning a [`Dispatch::Scoped`] command; when the
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
fn is_alive(pid: i32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // The state follows the parenthesised command name, which may itself hold ") ".
    stat.rsplit_once(") ")
        .and_then(|(_, rest)| rest.chars().next())
        .is_some_and(|state| !matches!(state, 'Z' | 'X' | 'x'))
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

/// Derives the user bus from a spawn environment: an explicit `DBUS_SESSION_BUS_ADDRESS`
/// is kept; otherwise `<runtime dir>/bus` is used when the runtime dir (`XDG_RUNTIME_DIR`,
/// else `/run/user/<uid>`) and the socket pass the ownership checks.
fn derive_user_bus(spawn_env: &HashMap<String, String>, uid: u32) -> UserBus {
    let runtime_dir = spawn_env
        .get(RUNTIME_DIR_ENV)
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(format!("/run/user/{uid}")), PathBuf::from);
    let bus_path = runtime_dir.join("bus");
    if let Some(address) = spawn_env.get(BUS_ADDRESS_ENV).filter(|a| !a.is_empty()) {
        let bus_path = address
            .strip_prefix("unix:path=")
            .map(|rest| PathBuf::from(rest.split(',').next().unwrap_or(rest)))
            .unwrap_or(bus_path);
        return UserBus {
            bus_path,
            env: Some(vec![(BUS_ADDRESS_ENV.to_owned(), address.clone())]),
            problem: String::new(),
        };
    }
    match trust_problem(&runtime_dir, &bus_path, uid) {
        Some(problem) => UserBus {
            bus_path,
            env: None,
            problem,
        },
        None => UserBus {
            env: Some(vec![
                (
                    RUNTIME_DIR_ENV.to_owned(),
                    runtime_dir.to_string_lossy().into_owned(),
                ),
                (
                    BUS_ADDRESS_ENV.to_owned(),
                    format!("unix:path={}", bus_path.display()),
                ),
            ]),
            bus_path,
            problem: String::new(),
        },
    }
}

/// Why the runtime dir or its bus socket cannot be trusted, or `None` when both can.
fn trust_problem(runtime_dir: &Path, bus_path: &Path, uid: u32) -> Option<String> {
    if !runtime_dir.is_absolute() {
        return Some(format!(
            "runtime dir {} is not an absolute path",
            runtime_dir.display()
        ));
    }
    let dir = match std::fs::metadata(runtime_dir) {
        Ok(meta) => meta,
        Err(err) => {
            return Some(format!(
                "no user bus at {}: runtime dir {} is missing ({err})",
                bus_path.display(),
                runtime_dir.display()
            ));
        }
    };
    if !dir.is_dir() || dir.uid() != uid || dir.permissions().mode() & 0o022 != 0 {
        return Some(format!(
            "runtime dir {} is not trusted: it must be a directory owned by uid {uid} and \
             not group or other writable",
            runtime_dir.display()
        ));
    }
    match std::fs::symlink_metadata(bus_path) {
        Ok(meta) if meta.file_type().is_socket() && meta.uid() == uid => None,
        Ok(_) => Some(format!(
            "{} is not a socket owned by uid {uid}",
            bus_path.display()
        )),
        Err(_) => Some(format!("no user bus at {}", bus_path.display())),
    }
}

/// Finds `name` as an executable file on the spawn environment's `PATH`.
fn resolve_program(name: &str, spawn_env: &HashMap<String, String>) -> Option<PathBuf> {
    let path = spawn_env.get("PATH").map_or(DEFAULT_PATH, String::as_str);
    path.split(':')
        .map(Path::new)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(name))
        .find(|candidate| {
            std::fs::metadata(candidate)
                .is_ok_and(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        })
}
