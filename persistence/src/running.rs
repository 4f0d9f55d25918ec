//! The running sessions of a home behind a trait, so a host can keep them where it
//! likes: [`CheckpointStore`] (the `sessions` table of `state.db`, what the daemon
//! uses) or [`MemoryRunningStore`] (in memory: nothing survives the process, for
//! embedders and tests that need no disk for it).
//!
//! The contract every implementation keeps: a write returns once a later
//! [`RunningStore::load`] of the same store sees it; a row keeps its kill intent
//! until the row goes; [`RunningStore::write_own`] writes before it deletes, so a
//! session both written and finished is gone.

use std::collections::BTreeMap;
use std::sync::Mutex;

#[cfg(feature = "sqlite")]
use crate::CheckpointStore;
use crate::{CheckpointEntry, Error, KillIntent, Loaded, SessionRecord, Writer};

/// Where a registry keeps its running sessions (B27). See the module docs.
pub trait RunningStore: Send + Sync + std::fmt::Debug {
    /// Every running session of every writer.
    ///
    /// # Errors
    /// When the store cannot be read.
    fn load(&self) -> Result<Loaded, Error>;

    /// Writes one session's row (a spawn).
    ///
    /// # Errors
    /// An invalid record, or a store that cannot be written.
    fn write_one(&self, writer: &Writer, record: &SessionRecord) -> Result<(), Error>;

    /// Writes `records` as `writer`'s, then deletes the rows of `finished`.
    ///
    /// # Errors
    /// As [`RunningStore::write_one`].
    fn write_own(
        &self,
        writer: &Writer,
        records: &[SessionRecord],
        finished: &[&str],
    ) -> Result<(), Error>;

    /// Deletes these sessions' rows; returns how many went.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn remove(&self, session_ids: &[&str]) -> Result<usize, Error>;

    /// Records that a kill of these sessions began; returns for how many rows.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn record_kill_intent(&self, session_ids: &[&str], intent: &KillIntent)
    -> Result<usize, Error>;

    /// Records that a running session became ready at `ready_at` (unix seconds),
    /// once: a row keeps its first mark through later writes. Returns whether this
    /// call marked it.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn record_ready(&self, session_id: &str, ready_at: f64) -> Result<bool, Error>;
}

#[cfg(feature = "sqlite")]
impl RunningStore for CheckpointStore {
    fn load(&self) -> Result<Loaded, Error> {
        CheckpointStore::load(self)
    }

    fn write_one(&self, writer: &Writer, record: &SessionRecord) -> Result<(), Error> {
        CheckpointStore::write_one(self, writer, record)
    }

    fn write_own(
        &self,
        writer: &Writer,
        records: &[SessionRecord],
        finished: &[&str],
    ) -> Result<(), Error> {
        CheckpointStore::write_own(self, writer, records, finished)
    }

    fn remove(&self, session_ids: &[&str]) -> Result<usize, Error> {
        CheckpointStore::remove(self, session_ids)
    }

    fn record_kill_intent(
        &self,
        session_ids: &[&str],
        intent: &KillIntent,
    ) -> Result<usize, Error> {
        CheckpointStore::record_kill_intent(self, session_ids, intent)
    }

    fn record_ready(&self, session_id: &str, ready_at: f64) -> Result<bool, Error> {
        CheckpointStore::record_ready(self, session_id, ready_at)
    }
}

/// Running sessions kept in memory, in id order.
#[derive(Debug, Default)]
pub struct MemoryRunningStore {
    rows: Mutex<BTreeMap<String, CheckpointEntry>>,
}

impl MemoryRunningStore {
    /// An empty store.
    pub fn new() -> MemoryRunningStore {
        MemoryRunningStore::default()
    }

    fn rows(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, CheckpointEntry>> {
        self.rows
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn put(rows: &mut BTreeMap<String, CheckpointEntry>, writer: &Writer, record: &SessionRecord) {
        let kill_intent = rows.get(&record.id).and_then(|e| e.kill_intent.clone());
        let ready_at = rows.get(&record.id).and_then(|e| e.ready_at);
        rows.insert(
            record.id.clone(),
            CheckpointEntry {
                writer: *writer,
                session: record.clone(),
                kill_intent,
                ready_at,
            },
        );
    }
}

impl RunningStore for MemoryRunningStore {
    fn load(&self) -> Result<Loaded, Error> {
        let mut entries: Vec<CheckpointEntry> = self.rows().values().cloned().collect();
        entries.sort_by(|a, b| {
            a.session
                .started_at
                .total_cmp(&b.session.started_at)
                .then_with(|| a.session.id.cmp(&b.session.id))
        });
        Ok(Loaded {
            entries,
            moved_aside: None,
        })
    }

    fn write_one(&self, writer: &Writer, record: &SessionRecord) -> Result<(), Error> {
        crate::record::validate(record)?;
        Self::put(&mut self.rows(), writer, record);
        Ok(())
    }

    fn write_own(
        &self,
        writer: &Writer,
        records: &[SessionRecord],
        finished: &[&str],
    ) -> Result<(), Error> {
        let mut ids = std::collections::HashSet::with_capacity(records.len());
        for record in records {
            if !ids.insert(record.id.as_str()) {
                return Err(Error::InvalidRecord {
                    session_id: record.id.clone(),
                    reason: "the session is listed twice",
                });
            }
            crate::record::validate(record)?;
        }
        let mut rows = self.rows();
        for record in records {
            Self::put(&mut rows, writer, record);
        }
        for id in finished {
            rows.remove(*id);
        }
        Ok(())
    }

    fn remove(&self, session_ids: &[&str]) -> Result<usize, Error> {
        let mut rows = self.rows();
        Ok(session_ids
            .iter()
            .filter(|id| rows.remove(**id).is_some())
            .count())
    }

    fn record_kill_intent(
        &self,
        session_ids: &[&str],
        intent: &KillIntent,
    ) -> Result<usize, Error> {
        let mut rows = self.rows();
        let mut n = 0;
        for id in session_ids {
            if let Some(entry) = rows.get_mut(*id) {
                entry.kill_intent = Some(intent.clone());
                n += 1;
            }
        }
        Ok(n)
    }

    fn record_ready(&self, session_id: &str, ready_at: f64) -> Result<bool, Error> {
        let mut rows = self.rows();
        match rows.get_mut(session_id) {
            Some(entry) if entry.ready_at.is_none() => {
                entry.ready_at = Some(ready_at);
                Ok(true)
            }
            _ => Ok(false),
        }
    }
}

#[cfg(test)]
mod tests;
