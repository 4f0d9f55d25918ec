//! Integration tests of herd-core against real processes, pipes and PTYs.
//!
//! Every test gets its own temporary home, waits on real conditions with deadlines
//! (never fixed sleeps), and checks at the end that every session's process group is
//! gone.

mod checkpoint_writes;
mod delivery;
mod dispatch;
mod events;
mod foreground;
mod handoff;
mod lifecycle;
mod memory_stores;
mod notify;
mod output;
mod paging;
mod pty;
mod queue;
mod readiness;
mod restore;
mod spawning;
mod stdin;
mod support;
