//! herd-core: the registry of background sessions.
//!
//! Owns: spawning (pipe and PTY), readers, output buffers and logs, completion,
//! heartbeat and watch events, tree kill, ownership, handoff, pruning, restore and
//! restart-safe dispatch. It is the only crate that forks, execs or signals.
//! Never: knows about the daemon, its socket or the CLI.
//! Depended on by: `herd-cli` and hosts that embed herd directly.
//!
//! The main type is [`Registry`]: [`Registry::spawn`] starts a [`SpawnRequest`] and
//! answers a [`SpawnInfo`]; `poll`, `log`, `log_chunk`, `wait`, `kill` and the stdin
//! calls answer the serialisable types re-exported below; each finished session
//! publishes exactly one [`Event::Completion`], delivered through
//! [`Registry::drain`] (per owner, once) and [`Registry::subscribe`] (everything),
//! and rendered for an agent by [`render_events`].
//!
//! # Example
//!
//! A registry on a home of its own, one job, its end, and the completion its
//! owner is woken with (taken once). The registry needs a tokio runtime; with
//! [`RegistryConfig::shim`] left at `None` it supervises in-process, so the
//! session ends with the registry. `cargo run -p herd-core --example embed` is
//! the same as a program, with the self-kill guard on.
//!
//! ```
//! use std::time::Duration;
//!
//! use herd_core::{Event, Home, Registry, RegistryConfig, SpawnRequest, WaitStatus};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let runtime = tokio::runtime::Runtime::new()?;
//! runtime.block_on(async {
//!     // Every path the registry writes (logs, checkpoint, ledger) is under the home.
//!     let dir = tempfile::tempdir()?;
//!     let registry = Registry::new(Home::new(dir.path()), RegistryConfig::default())?;
//!
//!     let info = registry
//!         .spawn(SpawnRequest {
//!             command: "echo built; echo 'key ghp_abcdefghijklmnopqrstuvwxyz0123456789'".into(),
//!             task_id: "agent-7".into(),
//!             notify: true,
//!             ..SpawnRequest::default()
//!         })
//!         .await?;
//!
//!     let done = registry
//!         .wait(info.session_id.as_str(), Duration::from_secs(30), None)
//!         .await?;
//!     assert_eq!(done.status, WaitStatus::Exited);
//!     assert_eq!(done.exit_code, Some(0));
//!     // Output leaves herd only through the redactor.
//!     assert!(done.output.starts_with("built\n"));
//!     assert!(!done.output.contains("ghp_abcdefghijklmnopqrstuvwxyz0123456789"));
//!
//!     // The completion is queued for the owner before the wait answers, and is
//!     // delivered once.
//!     let events = registry.drain("agent-7");
//!     assert!(matches!(
//!         events.as_slice(),
//!         [Event::Completion { session_id, .. }] if *session_id == info.session_id
//!     ));
//!     assert!(registry.drain("agent-7").is_empty());
//!
//!     registry.shutdown().await;
//!     Ok::<(), Box<dyn std::error::Error>>(())
//! })
//! # }
//! ```
//!
//! Durability: every spawn is checkpointed before it is answered,
//! every queued completion is committed to the home's ledger before it is published,
//! and every finished session leaves a result receipt. A host that starts on a home a
//! previous process used calls [`Registry::restore`] once, right after
//! [`Registry::new`], and gets a [`RestoreReport`].
//!
//! How a session runs: the child leads its own process group (its own session under
//! a PTY) with a sanitised environment tagged `HERD_SESSION=<id>`. With
//! [`RegistryConfig::shim`] set (the daemon's default) it runs under a supervisor
//! process of its own (`herd-shim`) that outlives the registry; otherwise one task per
//! session reads its output without a thread (pipes and PTY masters are registered
//! with the runtime) and waits for its exit; bytes pass the PTY query responder and
//! the shell-noise filter, then go to `<home>/logs/sessions/<id>.log` (complete, up
//! to the log cap) and to a bounded in-memory tail. When output and exit are both
//! done, one choke point moves the session to finished and
//! publishes its completion. Heartbeats and the watch breaker's release run off one
//! timer task for the whole registry; the checkpoint of running sessions is written
//! by one coalescing task.
//!
//! Why the shell is resolved on `PATH` by herd: with an explicit environment, std
//! would otherwise fork (copying the daemon's page tables) to search the child's
//! `PATH`; with a path it uses `posix_spawn`, which keeps spawn cost near a raw
//! spawn (see the `registry` bench).
//!
//! Wake-ups beyond the completion: watch patterns and heartbeats (served by one timer
//! task per registry; see `notify`), the per-home [`NotificationPolicy`], foreground
//! runs that yield to the background ([`Registry::run_foreground`]) and handoff
//! between parent and child agents ([`Registry::register_child`],
//! [`Registry::handoff`], [`Registry::finish_child`]).

mod answers;
mod config;
mod dispatch;
mod error;
mod event;
mod foreground;
// herd's own binaries' internals (process hygiene, the shim, systemd delegation):
// public for them with the `internals` feature, not part of the documented API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod hygiene;
#[cfg(not(feature = "internals"))]
#[allow(
    dead_code,
    unreachable_pub,
    reason = "herd's binaries' entry points, public only with the `internals` feature"
)]
mod hygiene;
mod id;
mod kill;
// The ranked mutex, for herd's binaries' own locks (the daemon's): public with
// the `internals` feature, narrowly (see the module), not part of the documented API.
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod lock_order;
#[cfg(not(feature = "internals"))]
#[allow(
    unreachable_pub,
    reason = "the daemon's ranks and the mutex are public only with the `internals` feature"
)]
mod lock_order;
mod machine;
mod noise;
mod output;
mod reader;
mod registry;
mod session;
#[cfg(feature = "internals")]
#[doc(hidden)]
pub mod shim;
#[cfg(not(feature = "internals"))]
#[allow(
    dead_code,
    unreachable_pub,
    reason = "herd's binaries' entry points, public only with the `internals` feature"
)]
mod shim;
mod spawn;
mod sys;
mod text;
mod watch;

pub use answers::{
    CompletionReason, Containment, KillAnswer, KillStatus, ListRow, LogAnswer, LogChunk, ModeName,
    PollAnswer, SessionStatus, SpawnInfo, StdinAnswer, StdinStatus, TreeUsage, WaitAnswer,
    WaitStatus,
};
pub use config::{
    DEFAULT_ENV_DENY, KillSource, ListFilter, Mode, NotificationPolicy, RegistryConfig,
    RestartPolicy, SpawnRequest, limits,
};
#[cfg(feature = "internals")]
#[doc(hidden)]
pub use dispatch::delegate;
pub use dispatch::{
    BreakerGate, Clock, Dispatch, DispatchConfig, DispatchError, DispatchKind, Dispatcher,
    FailureBreaker, HostFacts, ScopeAck, ScopeAvailability, ScopeStopError, SystemClock, UnitKind,
    is_in_scope, memory_max, systemd_unit, unit_lacks_delegate, wait_for_scope_ack,
};
pub use error::{Error, LookupError, RestartError, SpawnError};
pub use event::{COMPLETION_ID_PREFIX, Event, completion_of, render_events};
pub use foreground::{Adoption, FOREGROUND_OUTPUT_CHARS, ForegroundAnswer, ForegroundStatus};
pub use herd_persistence::Home;
pub use id::SessionId;
#[cfg(feature = "bench-support")]
#[doc(hidden)]
pub use kill::bench_support;
#[cfg(feature = "bench-support")]
#[doc(hidden)]
pub use registry::notify_bench_support;
pub use registry::{
    Acknowledgement, Drained, External, FollowRead, LogFollower, LogReadout, Readiness,
    ReadoutBatch, ReadoutPiece, Registry, RestoreReport, TerminalGuard,
};
pub use registry::{
    AgentIdentity, ChildTeardown, HandedOff, HandoffAnswer, HandoffError, MAX_HANDOFFS_PER_CHILD,
    OrphanKill, UnreadCompletion,
};
pub use registry::{
    DEFAULT_GROUP, GroupError, GroupRow, MAX_DEPENDENCIES, MAX_GROUPS, PARALLEL_RANGE,
    QueueLatency, QueueRequest, check_group_name,
};
pub use spawn::utf8_environment;
pub use sys::limits::Limits;
pub use text::rfc3339;
/// Lets log read-outs ([`LogReadout`]) map a log's pages rather than copy them:
/// installs a process-wide `SIGBUS` handler that turns a fault in such a map (the
/// log cut short under it) into a read-out that stops and goes on by the chunked
/// route, and hands every other fault to the handler that was there before. For a
/// host that owns its process's signal handling (herd's daemon calls it at start);
/// without it, read-outs copy the log as they always did. Once per process.
///
/// # Errors
/// The OS error of `sigaction`: then read-outs copy.
pub fn guard_mapped_reads() -> std::io::Result<()> {
    sys::mapped::guard()
}

/// What `wait` and foreground calls take to be interrupted (re-exported so a host
/// needs no direct `tokio-util` dependency).
pub use tokio_util::sync::CancellationToken;

/// Which containment sessions started by this process's shims get: the
/// session cgroup (`Containment::Cgroup` and where) or the shim as subreaper
/// (`Containment::Subreaper` and why no cgroup), for `herd doctor`. Creates the
/// `herd-<uid>` cgroup when it can.
pub fn containment_report() -> (Containment, String) {
    if std::env::var(sys::cgroup::CONTAINMENT_ENV).is_ok_and(|v| v == "subreaper") {
        return (
            Containment::Subreaper,
            format!("forced by {}=subreaper", sys::cgroup::CONTAINMENT_ENV),
        );
    }
    let (kind, mut detail) = match sys::cgroup::report() {
        (true, detail) => (Containment::Cgroup, detail),
        (false, why) => (Containment::Subreaper, why),
    };
    if let Some(settled) = dispatch::delegate::outcome() {
        detail.push_str(&format!(" (at start-up: {settled})"));
    }
    (kind, detail)
}
