//! Host links in the store: the `host_links` table of `<home>/state.db`.
//!
//! The local daemon's link to each configured host keeps a map (far job id to local
//! owner, event keys already published) that must survive a restart of this daemon;
//! it is one row per host (`host`, the map as JSON in `book`, `updated_at`), written
//! whole in one transaction per change. The map's shape is the daemon's; this
//! module stores its bytes.
//!
//! Releases before the store kept it in `<home>/hosts/<host>.json`; the first load
//! of a host imports that file (one transaction) and removes it once committed.
//!
//! The home's stable id, which far hosts know it by (`herd-home-<id>`), is the
//! `home_id` row of the `home` table ([`HostLinks::home_id`]), made once. Releases
//! before the store kept it in `<home>/hosts/home_id`; the first call imports that
//! file (so far hosts keep knowing the home) and removes it once committed.
//!
//! Invariant: a host name is 1 to 32 of `a-z`, `0-9`, `_` and `-`, so the legacy
//! path derived from it stays in `hosts/`.

use std::path::PathBuf;
use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, params};

use crate::lazy_db::LazyDb;
use crate::memory::is_home_id;
use crate::{Error, Home, atomic};

/// Reads and writes the host links of a home. Cheap to clone (clones share one
/// connection); does no I/O until first used.
#[derive(Debug, Clone)]
pub struct HostLinks {
    db: LazyDb,
}

impl HostLinks {
    /// The host links of `home`. Does no I/O.
    pub fn new(home: &Home) -> HostLinks {
        HostLinks {
            db: LazyDb::new(home),
        }
    }

    fn legacy_path(&self, host: &str) -> PathBuf {
        self.db
            .home()
            .root()
            .join("hosts")
            .join(format!("{host}.json"))
    }

    /// The map of `host`, if one was stored (or its earlier release's file exists:
    /// it is imported first).
    ///
    /// # Errors
    /// [`Error::InvalidHostName`], [`Error::HomeMissing`], as [`Ledger::create`](crate::Ledger::create), and
    /// [`Error::StoreQuery`].
    pub fn load(&self, host: &str) -> Result<Option<Vec<u8>>, Error> {
        crate::memory::validate_host(host)?;
        let legacy = self.legacy_path(host);
        let file = match std::fs::read(&legacy) {
            Ok(bytes) => Some(bytes),
            Err(e) if atomic::is_missing(&e) => None,
            Err(error) => {
                tracing::warn!(path = %legacy.display(), %error, "host map of an earlier release unreadable; not imported");
                None
            }
        };
        let found = self.db.with("load a host link", |conn| {
            let tx = conn.unchecked_transaction()?;
            let row: Option<String> = tx
                .query_row("SELECT book FROM host_links WHERE host = ?1", [host], |r| {
                    r.get(0)
                })
                .optional()?;
            let found = match (row, &file) {
                (Some(book), _) => Some(book.into_bytes()),
                (None, Some(bytes)) => {
                    let book = String::from_utf8_lossy(bytes).into_owned();
                    tx.execute(
                        "INSERT INTO host_links (host, book, updated_at) VALUES (?1, ?2, ?3)",
                        params![host, book, unix_now()],
                    )?;
                    Some(book.into_bytes())
                }
                (None, None) => None,
            };
            tx.commit()?;
            Ok(found)
        })?;
        if file.is_some() {
            match std::fs::remove_file(&legacy) {
                Ok(()) => tracing::info!(
                    host,
                    "host map of an earlier release imported into the state database"
                ),
                Err(error) => {
                    tracing::warn!(path = %legacy.display(), %error, "imported host map not removed")
                }
            }
        }
        Ok(found)
    }

    /// This home's stable id (16 hex digits), made once: the store's, else the
    /// one an earlier release kept in `hosts/home_id` (imported, then the file
    /// removed), else a new random one. Two processes asking at once get one id.
    ///
    /// # Errors
    /// [`Error::HomeMissing`], as [`Ledger::create`](crate::Ledger::create), [`Error::StoreQuery`], and
    /// [`Error::HomeIdRandom`] when no random id can be made.
    pub fn home_id(&self) -> Result<String, Error> {
        let legacy = self.db.home().root().join("hosts").join("home_id");
        let read = |conn: &Connection| {
            conn.query_row("SELECT value FROM home WHERE key = 'home_id'", [], |r| {
                r.get::<_, String>(0)
            })
            .optional()
        };
        let stored = match self.db.with("load the home id", read) {
            Ok(stored) => stored,
            // A full disk: the database cannot be opened for writing, but the id
            // it holds can still be read.
            Err(error) => {
                let path = self.db.home().ledger_path();
                let found = crate::checkpoint::read_only(&path)
                    .and_then(|conn| read(&conn))
                    .ok()
                    .flatten();
                match found {
                    Some(id) => return Ok(id),
                    None => return Err(error),
                }
            }
        };
        if let Some(id) = stored {
            return Ok(id);
        }
        let from_file = std::fs::read_to_string(&legacy)
            .ok()
            .map(|text| text.trim().to_owned())
            .filter(|id| is_home_id(id));
        let candidate = match &from_file {
            Some(id) => id.clone(),
            None => crate::memory::random_home_id()?,
        };
        let id = self.db.with("store the home id", |conn| {
            conn.execute(
                "INSERT OR IGNORE INTO home (key, value) VALUES ('home_id', ?1)",
                [&candidate],
            )?;
            conn.query_row("SELECT value FROM home WHERE key = 'home_id'", [], |r| {
                r.get::<_, String>(0)
            })
        })?;
        if from_file.is_some() {
            match std::fs::remove_file(&legacy) {
                Ok(()) => {
                    tracing::info!("home id of an earlier release imported into the state database")
                }
                Err(error) => {
                    tracing::warn!(path = %legacy.display(), %error, "imported home id file not removed")
                }
            }
        }
        Ok(id)
    }

    /// Replaces the map of `host` with `book` (JSON), in one transaction.
    ///
    /// # Errors
    /// As [`HostLinks::load`].
    pub fn save(&self, host: &str, book: &[u8]) -> Result<(), Error> {
        crate::memory::validate_host(host)?;
        let book = String::from_utf8_lossy(book).into_owned();
        self.db.with("store a host link", |conn| {
            conn.prepare_cached(
                "INSERT INTO host_links (host, book, updated_at) VALUES (?1, ?2, ?3)
                 ON CONFLICT (host) DO UPDATE SET book = excluded.book,
                     updated_at = excluded.updated_at",
            )?
            .execute(params![host, book, unix_now()])
            .map(drop)
        })
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_map_of_the_release_before_is_imported_and_saves_go_to_the_store() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let home = Home::new(tmp.path());
        let links = HostLinks::new(&home);
        assert_eq!(links.load("build1").expect("load"), None);
        std::fs::create_dir(home.root().join("hosts")).expect("hosts dir");
        let old = br#"{"jobs":{"proc_000000000001":{"owner":"a"}},"keys":[]}"#;
        std::fs::write(home.root().join("hosts/far.json"), old).expect("old map");
        assert_eq!(links.load("far").expect("load").as_deref(), Some(&old[..]));
        assert!(!home.root().join("hosts/far.json").exists(), "imported");
        links.save("far", b"{\"jobs\":{}}").expect("save");
        let again = HostLinks::new(&home).load("far").expect("load");
        assert_eq!(again.as_deref(), Some(&b"{\"jobs\":{}}"[..]));
        let err = links.load("../etc").unwrap_err();
        assert!(matches!(err, Error::InvalidHostName { .. }), "{err}");
    }

    #[test]
    fn the_home_id_is_made_once_in_the_store_and_an_old_file_is_imported() {
        let tmp = tempfile::tempdir().expect("temp dir");
        let home = Home::new(tmp.path());
        let made = HostLinks::new(&home).home_id().expect("home id");
        assert!(is_home_id(&made), "{made}");
        assert_eq!(HostLinks::new(&home).home_id().expect("again"), made);
        assert!(
            !home.root().join("hosts/home_id").exists(),
            "no file is written"
        );
        // A home of the release before keeps the id far hosts know it by.
        let old = tempfile::tempdir().expect("temp dir");
        let home = Home::new(old.path());
        std::fs::create_dir(home.root().join("hosts")).expect("hosts dir");
        std::fs::write(home.root().join("hosts/home_id"), "0123456789abcdef\n").expect("old id");
        assert_eq!(
            HostLinks::new(&home).home_id().expect("imported"),
            "0123456789abcdef"
        );
        assert!(!home.root().join("hosts/home_id").exists(), "imported once");
        assert_eq!(
            HostLinks::new(&home).home_id().expect("kept"),
            "0123456789abcdef"
        );
    }
}
