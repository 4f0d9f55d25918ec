//! Errors of the registry: lookup, spawn and everything else.

use std::path::PathBuf;

use crate::SessionId;

/// A session id or prefix did not name exactly one session.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// Nothing matched.
    #[error("no session {id}; list sessions to see the ids that exist")]
    NotFound {
        /// What was asked for.
        id: String,
    },
    /// More than one session matched the prefix.
    #[error("prefix {prefix} matches {n} sessions; give more characters of the id", n = matches.len())]
    Ambiguous {
        /// What was asked for.
        prefix: String,
        /// Every id it matched.
        matches: Vec<SessionId>,
    },
    /// The session finished and was evicted from the store (past `result_ttl`, or
    /// the oldest beyond `log_budget_bytes`); only its tombstone is left.
    #[error(
        "session {id} expired on {on}: finished sessions are kept for result_ttl within \
         log_budget_bytes (see config.toml); its result and log are gone"
    )]
    Expired {
        /// The evicted session's id.
        id: String,
        /// When it was evicted, RFC 3339.
        on: String,
    },
    /// The prefix has fewer than 4 characters after `proc_`.
    #[error("prefix {prefix} is too short; give at least 4 characters after proc_")]
    TooShort {
        /// What was asked for.
        prefix: String,
    },
}

/// A spawn was refused or failed; nothing is left running.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SpawnError {
    /// The self-kill guard refused the command.
    #[error("command refused by the self-kill guard: {0}")]
    Guarded(herd_guards::Block),
    /// A request field is unusable.
    #[error("invalid spawn request: {field}: {message}")]
    InvalidRequest {
        /// The offending field.
        field: &'static str,
        /// What is wrong and what to do.
        message: String,
    },
    /// The OS refused to start the child.
    #[error("failed to start {command:?}; check the shell and the working directory")]
    Spawn {
        /// The command line as given.
        command: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The host refused a process or a descriptor the spawn needed: a limit was hit.
    /// Nothing is left running.
    #[error("failed to start {command:?}: {limit}")]
    Exhausted {
        /// The command line as given.
        command: String,
        /// The limit hit and what to do about it.
        limit: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A directory or file under the home could not be prepared.
    #[error("failed to prepare {path} for the session; check the home directory")]
    Prepare {
        /// The path that failed.
        path: PathBuf,
        /// The cause.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// Restart-safe dispatch refused the spawn; nothing was started. See
    /// [`crate::DispatchError::is_infrastructure`]: a host refusal is not the job's fault.
    #[error(transparent)]
    Dispatch(#[from] crate::DispatchError),
    /// The disk holding the home's logs is full: nothing was started.
    #[error(
        "not starting the job: the disk holding {path} has {free} free, under the {needed} herd needs to record a job and keep its log; free space there and retry (list, poll, wait, logs, kill and shutdown still work)"
    )]
    DiskFull {
        /// The directory whose file system is full.
        path: PathBuf,
        /// The free space, for a person (`12.0 KiB`).
        free: String,
        /// What a spawn needs, for a person.
        needed: String,
    },
    /// The registry is shutting down or detaching: no new job starts.
    #[error("herd is shutting down; no new job starts (retry once a new daemon runs)")]
    ShuttingDown,
}

/// A restart was refused or failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RestartError {
    /// The session id did not resolve.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// Only the session's result receipt is left: how it was started is forgotten.
    #[error(
        "{id} cannot be restarted: its result was stored by an older herd, which kept the result but not how it was started; start it again with herd run"
    )]
    Forgotten {
        /// The session.
        id: SessionId,
    },
    /// The command herd knows is the redacted text, not what ran.
    #[error(
        "{id} cannot be restarted: its command held a secret and herd kept only the redacted text since the daemon restarted; start it again with herd run"
    )]
    CommandRedacted {
        /// The session.
        id: SessionId,
    },
    /// The running session could not be killed, so nothing new was started.
    #[error("{id} was not restarted: {why}; see herd poll {id}")]
    NotStopped {
        /// The session.
        id: SessionId,
        /// What the kill left.
        why: String,
    },
    /// The new session could not be started (the old one is gone).
    #[error("{id} was stopped but its restart failed")]
    Spawn {
        /// The session that was replaced.
        id: SessionId,
        /// Why the spawn failed.
        #[source]
        source: SpawnError,
    },
}

/// Everything else the registry can fail at.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The session id did not resolve.
    #[error(transparent)]
    Lookup(#[from] LookupError),
    /// An argument is out of range.
    #[error("invalid argument: {message}")]
    InvalidArgument {
        /// What is wrong and what to do.
        message: String,
    },
    /// A file operation failed.
    #[error("failed to access {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The registry was created outside a tokio runtime.
    #[error("the registry needs a tokio runtime; create it from inside one")]
    NoRuntime,
    /// The home given to `Registry::new` is not an existing directory. herd-core
    /// never creates a home: the host decides where it lives and makes it.
    #[error(
        "the home {} does not exist or is not a directory; create it (mode 0700) before building the registry",
        path.display()
    )]
    HomeMissing {
        /// The home's root.
        path: std::path::PathBuf,
    },
    /// A directory under the home could not be created.
    #[error("failed to prepare the home")]
    Home(#[from] herd_persistence::Error),
}
