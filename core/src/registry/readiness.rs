//! Readiness (issue 33): a session's durable mark that it is ready (`herd run
//! --ready PATTERN`, `--ready-port N`), set once, and what a dependent or a
//! `wait --ready` reads.
//!
//! The mark is committed to the running store first (`RunningStore::record_ready`,
//! on the blocking pool, off every lock), then set in the session's state, then the
//! `changes` watch is bumped, so whatever waits on session changes (`wait --ready`,
//! `--after-ready`, `herd top`) never acts on a mark a daemon crash could lose. A
//! finished session's receipt keeps it (`ResultReceipt::ready_at`).

use std::sync::Arc;
use std::time::SystemTime;

use super::Inner;
use super::durable::{from_unix_seconds, unix_seconds};
use crate::id::SessionId;

/// Whether a session is ready, as a dependent or `wait --ready` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// It became ready at this time (it may have ended since).
    Ready(SystemTime),
    /// It runs and is not ready yet.
    NotYet,
    /// It ended without becoming ready.
    Ended,
}

impl Inner {
    /// Marks the running session `id` ready now, once: commits the mark, then sets
    /// it, then wakes the `changes` receivers. Returns the time it was marked, or
    /// `None` when it is not running or was marked already.
    pub(crate) async fn mark_ready(self: &Arc<Self>, id: &SessionId) -> Option<SystemTime> {
        let session = self.lock().running_session(id).cloned()?;
        if session.state().ready_at.is_some() {
            return None;
        }
        let at = SystemTime::now();
        let store = Arc::clone(self.durable.checkpoint());
        let key = id.as_str().to_owned();
        let secs = unix_seconds(at);
        match tokio::task::spawn_blocking(move || store.record_ready(&key, secs)).await {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(session_id = %id, %error, "readiness not stored; a restart would forget it");
            }
            Err(error) => tracing::warn!(session_id = %id, %error, "readiness not stored"),
        }
        {
            let mut st = session.state();
            if st.ready_at.is_some() || st.finished.is_some() {
                return None;
            }
            st.ready_at = Some(at);
        }
        tracing::info!(session_id = %id, "session ready");
        self.changed();
        Some(at)
    }

    /// Whether `id` (an id, prefix or name) is ready, from memory or its receipt;
    /// `None` when it is unknown. Reads the store on a miss: call it off the table
    /// lock.
    pub(crate) fn readiness(&self, id: &str) -> Option<Readiness> {
        match self.lookup(id) {
            Ok(s) => {
                let st = s.state();
                Some(match (st.ready_at, st.finished.is_some()) {
                    (Some(at), _) => Readiness::Ready(at),
                    (None, false) => Readiness::NotYet,
                    (None, true) => Readiness::Ended,
                })
            }
            Err(miss) => {
                let (_, r) = self.receipt_lookup(id, miss).ok()?;
                Some(r.ready_at.map_or(Readiness::Ended, |at| {
                    Readiness::Ready(from_unix_seconds(at))
                }))
            }
        }
    }
}

impl super::Registry {
    /// Marks the running session `id` ready now (issue 33), once: the mark is
    /// committed to the store before it is set, so it survives a restart of the
    /// host, and it wakes [`super::Registry::changes`] receivers. Returns when it was
    /// marked, or `None` when the session is not running or was marked already.
    pub async fn mark_ready(&self, id: &SessionId) -> Option<SystemTime> {
        self.inner.mark_ready(id).await
    }

    /// Whether the session `id` (an id, unique prefix or name) is ready; `None` when
    /// no session answers to it. Reads the result store for a finished session
    /// memory no longer holds.
    pub fn readiness(&self, id: &str) -> Option<Readiness> {
        self.inner.readiness(id)
    }
}
