//! Forgetting finished sessions on request (`herd clean`): the receipts of an owner
//! (or every owner) finished before a moment, with their logs and tombstones, in one
//! transaction. Unlike eviction, nothing answers "expired" afterwards: it was asked
//! for.

use rusqlite::params;

use super::{ReceiptStore, validate_id};
use crate::Error;

impl ReceiptStore {
    /// Ids of the stored receipts of `owner` (every owner for `None`) that finished
    /// at or before `finished_before` (unix seconds), oldest first.
    ///
    /// # Errors
    /// [`Error::StoreQuery`].
    pub fn finished_ids(
        &self,
        owner: Option<&str>,
        finished_before: f64,
    ) -> Result<Vec<String>, Error> {
        let ids = self.with_db(false, "list finished sessions to forget", |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT session_id FROM results
                 WHERE (?1 IS NULL OR owner_task_id = ?1) AND finished_at <= ?2
                 ORDER BY finished_at, session_id",
            )?;
            stmt.query_map(params![owner, finished_before], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })?;
        Ok(ids.unwrap_or_default())
    }

    /// Forgets the finished sessions `ids`: their receipts and tombstones in one
    /// transaction, then their logs. Returns the ids whose receipt was stored.
    ///
    /// # Caveats
    /// Every id's log is removed, stored or not: pass finished sessions only (a
    /// running session's log is never the store's to remove).
    ///
    /// # Errors
    /// [`Error::InvalidSessionId`] (nothing is forgotten then), [`Error::StoreQuery`].
    pub fn forget_all(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        for id in ids {
            validate_id(id)?;
        }
        let gone = self.with_db(false, "forget result receipts", |conn| {
            let tx = conn.unchecked_transaction()?;
            let mut gone = Vec::with_capacity(ids.len());
            {
                let mut delete = tx.prepare_cached("DELETE FROM results WHERE session_id = ?1")?;
                let mut unbury =
                    tx.prepare_cached("DELETE FROM tombstones WHERE session_id = ?1")?;
                for id in ids {
                    if delete.execute([id])? > 0 {
                        gone.push(id.clone());
                    }
                    unbury.execute([id])?;
                }
            }
            tx.commit()?;
            Ok(gone)
        })?;
        for id in ids {
            self.remove_log(id);
        }
        Ok(gone.unwrap_or_default())
    }
}
