//! Queued jobs and groups in the store: the `queued` and `queue_groups` tables of
//! `<home>/state.db`. One row per queued job (`session_id`, `seq`, the
//! record as JSON) from its submission to its start (or its end without running),
//! and one row per group (`name`, `parallel`). Each write is one commit.
//!
//! Invariant: a load of a home without `state.db` reads nothing and creates nothing.

use rusqlite::params;

use crate::lazy_db::LazyDb;
use crate::queue::{QueueLoad, QueueStore, QueuedRow};
use crate::{Error, Home};

/// The queue of a home in `state.db`. Cheap to clone (clones share one
/// connection); does no I/O until first used.
#[derive(Debug, Clone)]
pub struct QueueDb {
    db: LazyDb,
}

impl QueueDb {
    /// The queue of `home`. Does no I/O.
    pub fn new(home: &Home) -> QueueDb {
        QueueDb {
            db: LazyDb::new(home),
        }
    }
}

impl QueueStore for QueueDb {
    fn load(&self) -> Result<QueueLoad, Error> {
        if !self.db.is_open() && !self.db.home().ledger_path().exists() {
            return Ok((Vec::new(), Vec::new()));
        }
        self.db.with("load the queue", |conn| {
            let mut rows = Vec::new();
            let mut stmt =
                conn.prepare("SELECT session_id, seq, record FROM queued ORDER BY seq")?;
            let mut it = stmt.query([])?;
            while let Some(r) = it.next()? {
                let seq: i64 = r.get(1)?;
                let record: String = r.get(2)?;
                rows.push(QueuedRow {
                    session_id: r.get(0)?,
                    seq: u64::try_from(seq).unwrap_or(0),
                    record: record.into_bytes(),
                });
            }
            let mut groups = Vec::new();
            let mut stmt = conn.prepare("SELECT name, parallel FROM queue_groups ORDER BY name")?;
            let mut it = stmt.query([])?;
            while let Some(r) = it.next()? {
                let parallel: i64 = r.get(1)?;
                groups.push((r.get(0)?, u32::try_from(parallel).unwrap_or(1)));
            }
            Ok((rows, groups))
        })
    }

    fn put(&self, row: &QueuedRow) -> Result<(), Error> {
        let record = String::from_utf8_lossy(&row.record).into_owned();
        let seq = i64::try_from(row.seq).unwrap_or(i64::MAX);
        self.db.with("store a queued job", |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO queued (session_id, seq, record) VALUES (?1, ?2, ?3)",
                params![row.session_id, seq, record],
            )
            .map(drop)
        })
    }

    fn remove(&self, session_id: &str) -> Result<(), Error> {
        self.db.with("forget a queued job", |conn| {
            conn.execute("DELETE FROM queued WHERE session_id = ?1", [session_id])
                .map(drop)
        })
    }

    fn put_group(&self, name: &str, parallel: u32) -> Result<(), Error> {
        self.db.with("store a group", |conn| {
            conn.execute(
                "INSERT OR REPLACE INTO queue_groups (name, parallel) VALUES (?1, ?2)",
                params![name, i64::from(parallel)],
            )
            .map(drop)
        })
    }

    fn remove_group(&self, name: &str) -> Result<(), Error> {
        self.db.with("forget a group", |conn| {
            conn.execute("DELETE FROM queue_groups WHERE name = ?1", [name])
                .map(drop)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_and_groups_survive_a_new_connection() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let home = Home::new(dir.path());
        assert_eq!(
            QueueDb::new(&home).load().ok(),
            Some((Vec::new(), Vec::new()))
        );
        assert!(!home.ledger_path().exists(), "a load created the store");
        let q = QueueDb::new(&home);
        let row = QueuedRow {
            session_id: "proc_aa".to_owned(),
            seq: 7,
            record: b"{\"x\":1}".to_vec(),
        };
        assert!(q.put(&row).is_ok());
        assert!(q.put_group("build", 3).is_ok());
        let (rows, groups) = QueueDb::new(&home).load().unwrap_or_default();
        assert_eq!(rows, vec![row]);
        assert_eq!(groups, vec![("build".to_owned(), 3)]);
        assert!(q.remove("proc_aa").is_ok() && q.remove_group("build").is_ok());
        assert_eq!(
            QueueDb::new(&home).load().ok(),
            Some((Vec::new(), Vec::new()))
        );
    }
}
