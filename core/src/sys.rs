//! Platform access for process control: reading the process table and sending signals,
//! and every other Linux-only mechanism herd-core uses (cgroups, signals read through
//! a descriptor, precise waits, descriptor-wide closes, pipe capacities, children born
//! in a cgroup, adopting orphans). Nothing outside this module names one (the
//! platform-boundary check of `cargo xtask lint`), so a port to another kernel gives
//! these modules a second implementation and touches nothing else; `docs/porting.md`
//! says what each maps to on macOS and FreeBSD.
//!
//! This is the only module in herd that sends signals (clippy bans `libc::kill` and
//! `libc::killpg` elsewhere). Everything above it works with plain values: a
//! [`ProcInfo`] per process read from the kernel's process table, and signal calls
//! that report `Err(errno)` instead of panicking. The Linux implementation reads
//! `/proc`; on other Unix systems the table reads return nothing, so tree kill falls
//! back to signalling the process group alone.

#[cfg(target_os = "linux")]
pub(crate) mod cgroup;
#[cfg(target_os = "linux")]
pub(crate) mod descriptors;
#[cfg(target_os = "linux")]
pub(crate) mod limits;
#[cfg(target_os = "linux")]
pub(crate) mod mapped;
#[cfg(target_os = "linux")]
pub(crate) mod peer;
#[cfg(target_os = "linux")]
pub(crate) mod poll;
#[cfg(target_os = "linux")]
pub(crate) mod process;
#[cfg(unix)]
pub(crate) mod procfs;
#[cfg(target_os = "linux")]
pub(crate) mod signals;
#[cfg(target_os = "linux")]
pub(crate) mod sockets;
#[cfg(unix)]
mod unix;
#[cfg(target_os = "linux")]
pub(crate) mod usage;

#[cfg(unix)]
pub(crate) use unix::*;
