//! A completion as a ledger keeps it ([`CompletionRecord`]) and how long, whatever
//! ledger keeps it.

use std::time::Duration;

/// How long a delivered completion is kept before [`Ledger::create`](crate::Ledger::create) prunes it.
pub const DELIVERED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// How long a completion nobody drained is kept: as long as a result receipt.
pub const UNCLAIMED_RETENTION: Duration = Duration::from_secs(7 * 24 * 3600);

/// One completion as the ledger stores it.
#[derive(Debug, Clone, PartialEq)]
pub struct CompletionRecord {
    /// Unique id of this completion; committing the same id again is a no-op.
    pub completion_id: String,
    /// The session that finished.
    pub session_id: String,
    /// The turn or agent that owns the session.
    pub owner_task_id: String,
    /// The container/session key of the caller.
    pub task_id: String,
    /// Gateway session key used for routing.
    pub session_key: String,
    /// The completion event exactly as herd-core publishes it.
    pub event: serde_json::Value,
    /// Wall-clock time of the completion, unix seconds.
    pub created_at: f64,
}
