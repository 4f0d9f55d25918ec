//! herd-core: the registry of background sessions.
//!
//! Owns: spawning (pipe and PTY), readers, output buffers and logs, completion,
//! heartbeat and watch events, tree kill, ownership, handoff, pruning, restore and
//! restart-safe dispatch. It is the only crate that forks, execs or signals.
//! Never: knows about the daemon, its socket or the CLI.
//! Depended on by: `herd-cli` and hosts that embed herd directly.

mod dispatch;
pub use dispatch::{
    BreakerGate, Clock, Dispatch, DispatchConfig, DispatchError, DispatchKind, Dispatcher,
    FailureBreaker, HostFacts, ScopeAck, ScopeAvailability, ScopeStopError, SystemClock, UnitKind,
    is_in_scope, memory_max, systemd_unit, wait_for_scope_ack,
};
