//! Errors of the persistence layer.
//!
//! One enum for the crate: every variant names the file it concerns and says what
//! the user can do. The OS or SQLite cause is kept as the `source`, never repeated
//! in the message.

use std::path::PathBuf;

/// Everything that can go wrong reading or writing under a home.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The home directory itself is gone; writers never recreate it.
    #[error("home directory {path} does not exist; create it first or point HERD_HOME elsewhere")]
    HomeMissing { path: PathBuf },
    /// A directory under the home could not be created or secured.
    #[error("failed to create directory {path}")]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A path outside the home was passed where one under it was required.
    #[error("{path} is not under the home {home}")]
    OutsideHome { path: PathBuf, home: PathBuf },

    /// The lock file of an earlier release's checkpoint could not be opened or
    /// locked (to import it).
    #[error("failed to lock checkpoint {path}; check that the home is writable")]
    CheckpointLock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// An earlier release's checkpoint exists but could not be read (to import it).
    #[error("failed to read checkpoint {path}; check its permissions")]
    CheckpointRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A record handed to the checkpoint breaks a rule of the format.
    #[error("checkpoint record for session {session_id} is invalid: {reason}")]
    InvalidRecord {
        session_id: String,
        reason: &'static str,
    },
    /// A corrupt or unknown-version checkpoint could not be moved aside.
    #[error(
        "checkpoint {path} is unusable ({problem}) and could not be moved aside to {to}; \
         move it away by hand"
    )]
    CheckpointMoveAside {
        path: PathBuf,
        to: PathBuf,
        problem: crate::record::CheckpointProblem,
        #[source]
        source: std::io::Error,
    },

    /// The ledger file could not be created or opened.
    #[error("failed to open completion ledger {path}; check that the home is writable")]
    LedgerOpen {
        path: PathBuf,
        #[source]
        source: LedgerCause,
    },
    /// The ledger file is damaged (truncated, not a database, failed integrity check).
    #[error(
        "completion ledger {path} is damaged ({detail}); it was left untouched: move it \
         aside to start a fresh ledger or restore it from a backup"
    )]
    LedgerCorrupt { path: PathBuf, detail: String },
    /// The ledger was written by a newer herd.
    #[error(
        "completion ledger {path} has format version {found}, this herd understands up to \
         {supported}; upgrade herd"
    )]
    LedgerVersion {
        path: PathBuf,
        found: i64,
        supported: i64,
    },
    /// A ledger read or write failed after the ledger was opened.
    #[cfg(feature = "sqlite")]
    #[error("failed to {action} in completion ledger {path}")]
    LedgerQuery {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// `mark_delivered` named a completion the ledger never committed.
    #[error("completion {completion_id} is not in ledger {path}; commit it before delivering it")]
    LedgerUnknownCompletion {
        path: PathBuf,
        completion_id: String,
    },
    /// A stored event payload is not valid JSON.
    #[error("completion {completion_id} in ledger {path} holds an unreadable event payload")]
    LedgerEvent {
        path: PathBuf,
        completion_id: String,
        #[source]
        source: serde_json::Error,
    },

    /// A receipt id that could escape the results directory or is not a session id.
    #[error("{id} is not a session id; expected proc_ followed by letters, digits or _")]
    InvalidSessionId { id: String },
    /// A receipt could not be written.
    #[error(
        "failed to write result receipt {path}; check free space and that the home is writable"
    )]
    ReceiptWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A receipt exists but could not be read.
    #[error("failed to read result receipt {path}")]
    ReceiptRead {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A receipt exists but is not a receipt this herd understands.
    #[error("result receipt {path} is unreadable; delete it, it only affects that one session")]
    ReceiptCorrupt {
        path: PathBuf,
        #[source]
        source: serde_json::Error,
    },
    /// A shim record could not be written, or its directory removed.
    #[error(
        "failed to write the supervisor record {path}; check free space and that the home is writable"
    )]
    ShimRecordWrite {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// A shim record exists but cannot be read.
    #[error("supervisor record {path} is unreadable: {detail}")]
    ShimRecordRead { path: PathBuf, detail: String },
    /// A host name that is not 1 to 32 of `a-z`, `0-9`, `_` and `-`.
    #[error(
        "`{host}` is not a host name: use 1 to 32 of a-z, 0-9, `_` and `-`, starting with a letter or digit"
    )]
    InvalidHostName { host: String },
    /// No random id could be made for the home (reading `/dev/urandom` failed).
    #[error("could not make this home's id: /dev/urandom is unreadable")]
    HomeIdRandom {
        #[source]
        source: std::io::Error,
    },
    /// A read or write of the result store (`state.db`'s `results`, `tombstones` or
    /// `request_keys`) failed.
    #[cfg(feature = "sqlite")]
    #[error(
        "failed to {action} in the state database {path}; check free space and that the home is writable"
    )]
    StoreQuery {
        path: PathBuf,
        action: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// The results directory could not be listed or pruned.
    #[error("failed to prune result receipts in {dir}")]
    ReceiptPrune {
        dir: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// Why the ledger could not be opened: the file system or SQLite.
#[derive(Debug, thiserror::Error)]
pub enum LedgerCause {
    /// Creating or checking the file failed.
    #[error("file system error")]
    Io(#[from] std::io::Error),
    /// SQLite refused to open or configure the database.
    #[cfg(feature = "sqlite")]
    #[error("sqlite error")]
    Sqlite(#[from] rusqlite::Error),
}
