//! Fixtures and helpers that herd's test crates and benches share, so each is
//! written once: waiting on a condition with a deadline ([`wait`]), process
//! groups and children from `/proc` ([`procs`]), built plugin libraries and a
//! plugins directory to install them in ([`plugins`]), a temporary home and the
//! `herd` binary run against it with its daemon stopped afterwards ([`home`]), a
//! private tmux server to drive a full-screen program on a real terminal
//! ([`tmux`]), and the `herd-bench` figure line ([`bench`]).
//!
//! It owns no herd behaviour and depends on no herd crate, so any crate, a leaf
//! included, may take it as a dev-dependency; it is never a normal dependency and
//! never published. Registry fixtures stay in the crates whose API they drive
//! (`core/tests/it/support.rs`, `tests/tests/it/support.rs`).
//!
//! Everything here panics with a message naming what failed: it runs only in
//! tests and benches, where a panic is the failure report.

pub mod bench;
pub mod home;
pub mod plugins;
pub mod procs;
pub mod tmux;
pub mod wait;
