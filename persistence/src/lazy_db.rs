//! A connection to `<home>/state.db` opened on first use and shared by clones: the
//! small stores (queued jobs, host links) each hold one.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

use crate::{Error, Home, Ledger};

/// The state database of a home, opened (created and migrated) by the first call
/// that needs it. Cheap to clone: clones share one connection.
#[derive(Debug, Clone)]
pub(crate) struct LazyDb {
    home: Home,
    db: Arc<Mutex<Option<(Connection, PathBuf)>>>,
}

impl LazyDb {
    /// The database of `home`. Does no I/O.
    pub(crate) fn new(home: &Home) -> LazyDb {
        LazyDb {
            home: home.clone(),
            db: Arc::new(Mutex::new(None)),
        }
    }

    /// The home this database belongs to.
    pub(crate) fn home(&self) -> &Home {
        &self.home
    }

    /// Whether a connection was opened already.
    pub(crate) fn is_open(&self) -> bool {
        lock(&self.db).is_some()
    }

    /// Runs `f` on the connection, opening the database first; a query error names
    /// `action` and the database's path.
    pub(crate) fn with<T>(
        &self,
        action: &'static str,
        f: impl FnOnce(&Connection) -> rusqlite::Result<T>,
    ) -> Result<T, Error> {
        let mut db = lock(&self.db);
        if db.is_none() {
            *db = Some(Ledger::create(&self.home)?.into_parts());
        }
        let Some((conn, path)) = db.as_ref() else {
            return Err(Error::HomeMissing {
                path: self.home.root().to_path_buf(),
            });
        };
        f(conn).map_err(|source| Error::StoreQuery {
            path: path.clone(),
            action,
            source,
        })
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
