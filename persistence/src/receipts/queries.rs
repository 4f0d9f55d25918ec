//! Lookups over the result store: ids by prefix, the newest receipt of a name, the
//! finished sessions a `list` shows, tombstones of evicted sessions, and spawn
//! request keys.

use std::time::Duration;

use rusqlite::{OptionalExtension, params};

use super::{ReceiptStore, unix_now};
use crate::Error;
use crate::{Listed, ResultReceipt, Tombstone};

/// The most ids a prefix lookup returns (enough to say it is ambiguous).
const PREFIX_MATCHES_MAX: usize = 16;

impl ReceiptStore {
    /// Ids of stored receipts starting with `prefix` (at most 16), sorted.
    ///
    /// # Errors
    /// [`Error::StoreQuery`].
    pub fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, Error> {
        let n = i64::try_from(prefix.len()).unwrap_or(i64::MAX);
        let limit = i64::try_from(PREFIX_MATCHES_MAX).unwrap_or(i64::MAX);
        let ids = self.with_db(false, "look up result receipts by prefix", |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT session_id FROM results WHERE substr(session_id, 1, ?2) = ?1
                 ORDER BY session_id LIMIT ?3",
            )?;
            stmt.query_map(params![prefix, n, limit], |r| r.get(0))?
                .collect::<rusqlite::Result<Vec<String>>>()
        })?;
        Ok(ids.unwrap_or_default())
    }

    /// The newest receipt of a session named `name`.
    ///
    /// # Errors
    /// As [`ReceiptStore::load`].
    pub fn newest_named(&self, name: &str) -> Result<Option<ResultReceipt>, Error> {
        let found = self.with_db(false, "look up a result receipt by name", |conn| {
            conn.query_row(
                "SELECT receipt, output FROM results WHERE name = ?1
                 ORDER BY finished_at DESC LIMIT 1",
                [name],
                |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)),
            )
            .optional()
        })?;
        match found.flatten() {
            Some((json, output)) => self.parse(&json, output).map(Some),
            None => Ok(None),
        }
    }

    /// The finished sessions of `owner` (every owner for `None`) that finished at or
    /// after `since` (unix seconds; all for `None`), oldest first, each with the last
    /// `tail_chars` characters of its output, and how many finished before `since`.
    ///
    /// # Errors
    /// As [`ReceiptStore::load`].
    pub fn list(
        &self,
        owner: Option<&str>,
        since: Option<f64>,
        tail_chars: usize,
    ) -> Result<Listed, Error> {
        let since = since.unwrap_or(f64::MIN);
        let tail = i64::try_from(tail_chars).unwrap_or(i64::MAX);
        let found = self.with_db(false, "list result receipts", |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT receipt, substr(output, -?3), length(output) > ?3 FROM results
                 WHERE (?1 IS NULL OR owner_task_id = ?1) AND finished_at >= ?2
                 ORDER BY started_at, session_id",
            )?;
            let rows = stmt
                .query_map(params![owner, since, tail], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, String>(1)?,
                        r.get::<_, bool>(2)?,
                    ))
                })?
                .collect::<rusqlite::Result<Vec<_>>>()?;
            let n_older: i64 = conn.query_row(
                "SELECT count(*) FROM results
                 WHERE (?1 IS NULL OR owner_task_id = ?1) AND finished_at < ?2",
                params![owner, since],
                |r| r.get(0),
            )?;
            Ok((rows, n_older))
        })?;
        let Some((rows, n_older)) = found else {
            return Ok(Listed::default());
        };
        let mut receipts = Vec::with_capacity(rows.len());
        for (json, output, cut) in rows {
            let mut receipt = self.parse(&json, output)?;
            receipt.output_cut |= cut;
            receipts.push(receipt);
        }
        Ok(Listed {
            receipts,
            n_older: usize::try_from(n_older).unwrap_or(0),
        })
    }

    /// The tombstone of an evicted session: by full id, by a prefix that names one,
    /// or by name (the newest).
    ///
    /// # Errors
    /// [`Error::StoreQuery`].
    pub fn tombstone(&self, id_prefix_or_name: &str) -> Result<Option<Tombstone>, Error> {
        let wanted = id_prefix_or_name;
        let n = i64::try_from(wanted.len()).unwrap_or(i64::MAX);
        let found = self.with_db(false, "look up an expired session", |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT session_id, name, expired_at FROM tombstones
                 WHERE substr(session_id, 1, ?2) = ?1 LIMIT 2",
            )?;
            let by_id: Vec<Tombstone> = stmt
                .query_map(params![wanted, n], tombstone_of)?
                .collect::<rusqlite::Result<_>>()?;
            if let [one] = by_id.as_slice() {
                return Ok(Some(one.clone()));
            }
            conn.query_row(
                "SELECT session_id, name, expired_at FROM tombstones WHERE name = ?1
                 ORDER BY expired_at DESC LIMIT 1",
                [wanted],
                tombstone_of,
            )
            .optional()
        })?;
        Ok(found.flatten())
    }

    /// The answer stored for spawn request key `key` within the last `window`.
    ///
    /// # Errors
    /// [`Error::StoreQuery`].
    pub fn request_key(&self, key: &str, window: Duration) -> Result<Option<String>, Error> {
        let cutoff = unix_now() - window.as_secs_f64();
        let found = self.with_db(false, "look up a spawn request key", |conn| {
            conn.query_row(
                "SELECT answer FROM request_keys WHERE request_key = ?1 AND created_at >= ?2",
                params![key, cutoff],
                |r| r.get::<_, String>(0),
            )
            .optional()
        })?;
        Ok(found.flatten())
    }

    /// Keeps `answer` for spawn request key `key`, and drops keys older than `window`.
    ///
    /// # Errors
    /// [`Error::StoreQuery`] (and the open errors of [`ReceiptStore::open`]).
    pub fn put_request_key(&self, key: &str, answer: &str, window: Duration) -> Result<(), Error> {
        let now = unix_now();
        self.with_db(true, "store a spawn request key", |conn| {
            conn.execute(
                "DELETE FROM request_keys WHERE created_at < ?1",
                [now - window.as_secs_f64()],
            )?;
            conn.execute(
                "INSERT OR REPLACE INTO request_keys (request_key, answer, created_at)
                 VALUES (?1, ?2, ?3)",
                params![key, answer, now],
            )
        })?;
        Ok(())
    }
}

fn tombstone_of(r: &rusqlite::Row<'_>) -> rusqlite::Result<Tombstone> {
    Ok(Tombstone {
        id: r.get(0)?,
        name: r.get(1)?,
        expired_at: r.get(2)?,
    })
}
