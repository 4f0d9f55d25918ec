//! Platform access for process control: reading the process table and sending signals.
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
pub(crate) mod limits;
#[cfg(unix)]
pub(crate) mod procfs;
#[cfg(target_os = "linux")]
pub(crate) mod sockets;
#[cfg(unix)]
mod unix;
#[cfg(target_os = "linux")]
pub(crate) mod usage;

#[cfg(unix)]
pub(crate) use unix::*;
