//! herd-core: the registry of background sessions.
//!
//! Owns: spawning (pipe and PTY), readers, output buffers and logs, completion,
//! heartbeat and watch events, tree kill, ownership, handoff, pruning, restore and
//! restart-safe dispatch. It is the only crate that forks, execs or signals.
//! Never: knows about the daemon, its socket or the CLI.
//! Depended on by: `herd-cli` and hosts that embed herd directly.
//! Benchmark: ingest, spawn and completion latency against raw OS baselines.
//!
//! The main type is [`Registry`]: [`Registry::spawn`] starts a [`SpawnRequest`] and
//! answers a [`SpawnInfo`]; `poll`, `log`, `wait`, `kill` and friends answer the
//! serialisable types in [`answers`]; finished sessions publish one [`Event::Completion`]
//! each, delivered through [`Registry::drain`] and [`Registry::subscribe`], and
//! rendered for an agent by [`render_events`].
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
mod handoff;
mod id;
mod kill;
mod noise;
mod notify;
mod output;
mod reader;
mod registry;
mod session;
mod spawn;
mod sys;
mod text;
mod watch;

pub use answers::{
    CompletionReason, KillAnswer, KillStatus, ListRow, LogAnswer, LogChunk, ModeName, PollAnswer,
    SessionStatus, SpawnInfo, StdinAnswer, StdinStatus, WaitAnswer, WaitStatus,
};
pub use config::{
    DEFAULT_ENV_DENY, KillSource, ListFilter, Mode, NotificationPolicy, RegistryConfig,
    SpawnRequest,
};
pub use dispatch::{
    BreakerGate, Clock, Dispatch, DispatchConfig, DispatchError, DispatchKind, Dispatcher,
    FailureBreaker, HostFacts, ScopeAck, ScopeAvailability, ScopeStopError, SystemClock, UnitKind,
    is_in_scope, memory_max, systemd_unit, wait_for_scope_ack,
};
pub use error::{Error, LookupError, SpawnError};
pub use event::{Event, render_events};
pub use foreground::{FOREGROUND_OUTPUT_CHARS, ForegroundAnswer, ForegroundStatus};
pub use handoff::{
    AgentIdentity, ChildTeardown, HandedOff, HandoffAnswer, HandoffError, MAX_HANDOFFS_PER_CHILD,
    OrphanKill, UnreadCompletion,
};
pub use herd_persistence::Home;
pub use id::SessionId;
#[doc(hidden)]
pub use kill::bench_support;
#[doc(hidden)]
pub use notify::bench_support as notify_bench_support;
pub use registry::{Registry, RestoreReport};
