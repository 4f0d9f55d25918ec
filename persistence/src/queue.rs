//! Queued jobs and job groups: what a restart needs to run a queued job
//! exactly once. The record's shape is herd-core's (the spawn request, its group
//! and its dependencies, as JSON); this module stores its bytes.
//!
//! [`QueueStore`] is the trait; [`MemoryQueueStore`] keeps everything in memory
//! (nothing survives the process), `QueueDb` (the `sqlite` feature) keeps it in
//! `state.db`'s `queued` and `queue_groups` tables.
//!
//! The contract every implementation keeps: a write returns once a later read of
//! the same store sees it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

use crate::Error;

/// One queued job as stored: its id, its place in submission order and the
/// caller's record (opaque bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct QueuedRow {
    /// The session id the job will run under.
    pub session_id: String,
    /// Submission order: lower started first.
    pub seq: u64,
    /// The record, as herd-core wrote it.
    pub record: Vec<u8>,
}

/// What a load answers: every queued job, in submission order, and every group
/// (`name`, `parallel`).
pub type QueueLoad = (Vec<QueuedRow>, Vec<(String, u32)>);

/// What the queue keeps: queued jobs and groups with their parallel limit.
pub trait QueueStore: Send + Sync + std::fmt::Debug {
    /// Every queued job, in submission order, and every group (`name`, `parallel`).
    ///
    /// # Errors
    /// A store that cannot be read.
    fn load(&self) -> Result<QueueLoad, Error>;

    /// Stores a queued job (the same id again replaces it).
    ///
    /// # Errors
    /// A store that cannot be written.
    fn put(&self, row: &QueuedRow) -> Result<(), Error>;

    /// Forgets a queued job (started, or ended without running); absent is no error.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn remove(&self, session_id: &str) -> Result<(), Error>;

    /// Stores a group and its parallel limit (the same name again replaces it).
    ///
    /// # Errors
    /// A store that cannot be written.
    fn put_group(&self, name: &str, parallel: u32) -> Result<(), Error>;

    /// Forgets a group; absent is no error.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn remove_group(&self, name: &str) -> Result<(), Error>;
}

/// A queue store in memory: nothing survives the process.
#[derive(Debug, Default)]
pub struct MemoryQueueStore {
    state: Mutex<(BTreeMap<String, QueuedRow>, BTreeMap<String, u32>)>,
}

impl MemoryQueueStore {
    fn lock(&self) -> MutexGuard<'_, (BTreeMap<String, QueuedRow>, BTreeMap<String, u32>)> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl QueueStore for MemoryQueueStore {
    fn load(&self) -> Result<QueueLoad, Error> {
        let st = self.lock();
        let mut rows: Vec<QueuedRow> = st.0.values().cloned().collect();
        rows.sort_by_key(|r| r.seq);
        let groups = st.1.iter().map(|(n, p)| (n.clone(), *p)).collect();
        Ok((rows, groups))
    }

    fn put(&self, row: &QueuedRow) -> Result<(), Error> {
        self.lock().0.insert(row.session_id.clone(), row.clone());
        Ok(())
    }

    fn remove(&self, session_id: &str) -> Result<(), Error> {
        self.lock().0.remove(session_id);
        Ok(())
    }

    fn put_group(&self, name: &str, parallel: u32) -> Result<(), Error> {
        self.lock().1.insert(name.to_owned(), parallel);
        Ok(())
    }

    fn remove_group(&self, name: &str) -> Result<(), Error> {
        self.lock().1.remove(name);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_store_keeps_rows_in_submission_order_and_groups() {
        let store = MemoryQueueStore::default();
        for (id, seq) in [("b", 2), ("a", 1)] {
            store
                .put(&QueuedRow {
                    session_id: id.to_owned(),
                    seq,
                    record: b"{}".to_vec(),
                })
                .unwrap_or_default();
        }
        store.put_group("build", 4).unwrap_or_default();
        store.remove("b").unwrap_or_default();
        let (rows, groups) = store.load().unwrap_or_default();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].session_id, "a");
        assert_eq!(groups, vec![("build".to_owned(), 4)]);
    }
}
