//! herd-persistence: the on-disk layout under a home, checkpoints, the completion
//! ledger and result receipts.
//!
//! Owns: every file under the home's state directories and their format versions.
//! The entry point is [`Home`], which derives every path from the root it was
//! given; nothing here caches a path in a global. The main types are
//! [`CheckpointStore`] (running sessions in `state.db`, behind the
//! [`RunningStore`] trait with an in-memory [`MemoryRunningStore`]), [`Ledger`] (completions,
//! exactly-once delivery) and [`ReceiptStore`] (results of finished
//! sessions in the same `state.db`).
//! Every store sits behind a trait ([`RunningStore`], [`CompletionLedger`],
//! [`ResultStore`], [`RequestKeys`], [`HostLinkStore`]) with an in-memory
//! implementation; the SQLite ones are the `sqlite` feature's (on by default), so a
//! host can build without rusqlite.
//! Never: knows about live processes, signals anything, or creates a home that
//! does not exist (a deleted profile is never resurrected by a late writer).
//! Depended on by: `herd-core` and `herd-cli`.

#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
mod atomic;
#[cfg(feature = "sqlite")]
mod checkpoint;
mod completion;
mod error;
mod home;
#[cfg(feature = "sqlite")]
mod host_links;
#[cfg(feature = "sqlite")]
mod lazy_db;
#[cfg(feature = "sqlite")]
mod ledger;
mod memory;
mod queue;
#[cfg(feature = "sqlite")]
mod queue_db;
mod receipt;
#[cfg(feature = "sqlite")]
mod receipts;
mod record;
mod running;
pub mod safe_path;
#[cfg(feature = "sqlite")]
mod schema;
mod shim;
mod stores;
mod sys;

#[cfg(feature = "sqlite")]
pub use checkpoint::CheckpointStore;
pub use completion::{CompletionRecord, DELIVERED_RETENTION, UNCLAIMED_RETENTION};
pub use error::{Error, LedgerCause};
pub use home::Home;
#[cfg(feature = "sqlite")]
pub use host_links::HostLinks;
#[cfg(feature = "sqlite")]
pub use ledger::{LEDGER_VERSION, Ledger};
pub use memory::{MemoryHostLinks, MemoryLedger, MemoryResultStore};
pub use queue::{MemoryQueueStore, QueueLoad, QueueStore, QueuedRow};
#[cfg(feature = "sqlite")]
pub use queue_db::QueueDb;
pub use receipt::{
    DEFAULT_LOG_BUDGET_BYTES, Listed, MAX_RECEIPT_OUTPUT_CHARS, PruneReport, RECEIPT_RETENTION,
    RECEIPT_VERSION, RestartSpec, ResultReceipt, Stored, TOMBSTONE_RETENTION, Tombstone,
};
#[cfg(feature = "sqlite")]
pub use receipts::ReceiptStore;
pub use record::{
    CHECKPOINT_VERSION, CheckpointEntry, CheckpointProblem, KillIntent, Loaded, Mode, MovedAside,
    RestartRecord, SessionRecord, ShimRef, SpawnOptions, Writer, parse_stat_start_time,
};
pub use running::{MemoryRunningStore, RunningStore};
pub use shim::{
    ExitRecord, Leftover, SHIM_RECORD_VERSION, ShimDir, ShimInfo, shim_session_ids, spare_shim_dirs,
};
pub use stores::{CompletionLedger, HostLinkStore, RequestKeys, ResultStore};
