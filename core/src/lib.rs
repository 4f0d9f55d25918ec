//! herd-core: the registry of background sessions.
//!
//! Owns: spawning (pipe and PTY), readers, output buffers and logs, completion,
//! heartbeat and watch events, tree kill, ownership, handoff, pruning, restore and
//! restart-safe dispatch. It is the only crate that forks, execs or signals.
//! Never: knows about the daemon, its socket or the CLI.
//! Depended on by: `herd-cli` and hosts that embed herd directly.

mod kill;
mod sys;
mod watch;

#[doc(hidden)]
pub use kill::bench_support;
