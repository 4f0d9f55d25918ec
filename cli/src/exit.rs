//! Exit codes and the error type that carries one out of a command.
//!
//! Commands return `anyhow::Result`; an error that should end the process with a
//! specific code wraps a [`Failure`]. `main` maps everything else to
//! [`Code::Usage`] or [`Code::Failed`] and treats a broken stdout pipe as a quiet
//! success (`herd ps | head -1`).

use std::fmt;
use std::process::ExitCode;

/// The documented exit codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Code {
    /// Success.
    Ok = 0,
    /// The job failed, was killed or timed out; or the guard blocked a command.
    Failed = 1,
    /// Usage error, unknown or ambiguous id, bad configuration.
    Usage = 2,
    /// The daemon could not be reached or started.
    Unreachable = 3,
    /// `wait --ready`: the job ended without becoming ready.
    NotReady = 4,
}

impl From<Code> for ExitCode {
    fn from(code: Code) -> ExitCode {
        ExitCode::from(code as u8)
    }
}

/// An error that ends the process with a chosen exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    /// The exit code.
    pub(crate) code: Code,
    /// What to tell the user; empty when the command already printed everything.
    pub(crate) message: String,
    /// A far host did not answer (`client::gone`): a follower asks again.
    pub(crate) host_lost: bool,
}

impl Failure {
    /// A failure with a message.
    pub(crate) fn new(code: Code, message: impl Into<String>) -> Failure {
        Failure {
            code,
            message: message.into(),
            host_lost: false,
        }
    }

    /// A failure whose explanation has already been printed.
    pub(crate) fn silent(code: Code) -> Failure {
        Failure {
            code,
            message: String::new(),
            host_lost: false,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Failure {}

/// True when any cause in the chain is a broken pipe.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

/// The exit code an error maps to.
pub(crate) fn code_of(err: &anyhow::Error) -> Code {
    err.chain()
        .find_map(|cause| cause.downcast_ref::<Failure>().map(|f| f.code))
        .unwrap_or(Code::Failed)
}
