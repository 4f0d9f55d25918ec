//! The one place herd-cli starts a program: auxiliary tools it needs or the user
//! configured (the autostarted `herd serve`, `systemctl` and `loginctl`), never a job.
//!
//! Job processes are started only through herd-core's spawn path (inside each
//! session's shim); clippy's `disallowed-methods` rule keeps `Command::new` out of
//! everything else.

use std::ffi::OsStr;
use std::process::Command;

/// A command for the auxiliary program `program`.
#[expect(
    clippy::disallowed_methods,
    reason = "the one helper through which herd-cli starts auxiliary programs, never jobs"
)]
pub(crate) fn command(program: impl AsRef<OsStr>) -> Command {
    Command::new(program)
}
