//! herd-persistence: the on-disk layout under a home, checkpoints, the completion
//! ledger and result receipts.
//!
//! Owns: every file under the home's state directories and their format versions.
//! The entry point is [`Home`], which derives every path from the root it was
//! given; nothing here caches a path in a global (B4). The main types are
//! [`CheckpointStore`] (running sessions in `state.db`, B27, behind the
//! [`RunningStore`] trait with an in-memory [`MemoryRunningStore`]), [`Ledger`] (completions,
//! exactly-once delivery, B29) and [`ReceiptStore`] (results of finished
//! sessions in the same `state.db`, B38).
//! Never: knows about live processes, signals anything, or creates a home that
//! does not exist (a deleted profile is never resurrected by a late writer).
//! Depended on by: `herd-core` and `herd-cli`.

mod atomic;
mod checkpoint;
mod error;
mod home;
mod host_links;
mod ledger;
mod receipts;
mod running;
pub mod safe_path;
mod schema;
mod shim;

pub use checkpoint::{
    CHECKPOINT_VERSION, CheckpointEntry, CheckpointProblem, CheckpointStore, KillIntent, Loaded,
    Mode, MovedAside, SessionRecord, ShimRef, SpawnOptions, Writer, parse_stat_start_time,
};
pub use error::{Error, LedgerCause};
pub use home::Home;
pub use host_links::HostLinks;
pub use ledger::{
    CompletionRecord, DELIVERED_RETENTION, LEDGER_VERSION, Ledger, UNCLAIMED_RETENTION,
};
pub use receipts::{
    DEFAULT_LOG_BUDGET_BYTES, Listed, MAX_RECEIPT_OUTPUT_CHARS, PruneReport, RECEIPT_RETENTION,
    RECEIPT_VERSION, ReceiptStore, RestartSpec, ResultReceipt, Stored, TOMBSTONE_RETENTION,
    Tombstone,
};
pub use running::{MemoryRunningStore, RunningStore};
pub use shim::{ExitRecord, Leftover, SHIM_RECORD_VERSION, ShimDir, ShimInfo, shim_session_ids};
