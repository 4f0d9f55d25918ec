//! The stores behind traits, so a host keeps them where it likes: the
//! SQLite ones of `state.db` (the `sqlite` feature, what the daemon uses) or the
//! in-memory ones of the `memory` module (nothing survives the process; no rusqlite).
//!
//! [`crate::RunningStore`] (running sessions) is in the `running` module; here are the
//! completion ledger ([`CompletionLedger`]), the results of finished sessions
//! ([`ResultStore`]), spawn request keys ([`RequestKeys`]) and host links
//! ([`HostLinkStore`]). Each SQLite implementation delegates to the type's own
//! methods, whose documentation says what each call does and how it fails.
//!
//! The contract every implementation keeps: a write returns once a later read of
//! the same store sees it; a batch ([`ResultStore::store_all`],
//! [`CompletionLedger::mark_delivered_many`]) is all or nothing.

use std::time::Duration;

use crate::Tombstone;
use crate::{CompletionRecord, Error, Listed, PruneReport, RestartSpec, ResultReceipt, Stored};

/// Where completions wait for their consumer. See the module docs.
pub trait CompletionLedger: Send + Sync + std::fmt::Debug {
    /// Commits a completion; `true` when it is new (the same id again is a no-op).
    ///
    /// # Errors
    /// A store that cannot be written.
    fn commit(&self, record: &CompletionRecord) -> Result<bool, Error>;

    /// Commits a completion, replacing an undelivered one of the same id; `true`
    /// when it was new or replaced.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn commit_replacing(&self, record: &CompletionRecord) -> Result<bool, Error>;

    /// Marks these completions delivered (of `owner` only, when given), in one
    /// write; returns how many this call delivered.
    ///
    /// # Errors
    /// A store that cannot be written; then none is marked.
    fn mark_delivered_many(
        &self,
        owner: Option<&str>,
        completion_ids: &[&str],
    ) -> Result<usize, Error>;

    /// Whether a completion was delivered; `None` when the ledger does not hold it.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn is_delivered(&self, completion_id: &str) -> Result<Option<bool>, Error>;

    /// Every committed completion not yet delivered, oldest first.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn undelivered(&self) -> Result<Vec<CompletionRecord>, Error>;

    /// Forgets undelivered completions older than `older_than` (default
    /// [`crate::UNCLAIMED_RETENTION`]); returns how many.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn expire_unclaimed(&self, older_than: Duration) -> Result<usize, Error>;
}

/// Where the results of finished sessions are kept, by time and size.
pub trait ResultStore: Send + Sync + std::fmt::Debug {
    /// How long a finished session is kept.
    fn ttl(&self) -> Duration;

    /// Opens the store now (creating or migrating it), for a process about to
    /// serve, so its first answer does not pay for it. Nothing to do by default.
    ///
    /// # Errors
    /// A store that cannot be opened.
    fn open(&self) -> Result<(), Error> {
        Ok(())
    }

    /// Stores a batch of receipts at once (replacing earlier ones of the same id).
    ///
    /// # Errors
    /// An invalid id, or a store that cannot be written (nothing is stored then).
    fn store_all(&self, batch: &[Stored]) -> Result<(), Error>;

    /// Evicts at most `max` sessions past the TTL or beyond the budget, oldest
    /// first, leaving a tombstone each.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn prune_at_most(&self, max: usize) -> Result<PruneReport, Error>;

    /// The receipt of `id`, if stored.
    ///
    /// # Errors
    /// An invalid id, a store that cannot be read.
    fn load(&self, id: &str) -> Result<Option<ResultReceipt>, Error>;

    /// What a restart of `id` repeats, if its receipt kept it.
    ///
    /// # Errors
    /// As [`ResultStore::load`].
    fn restart_spec(&self, id: &str) -> Result<Option<RestartSpec>, Error>;

    /// Ids of stored receipts starting with `prefix` (at most 16), sorted.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, Error>;

    /// The newest receipt of a session named `name`.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn newest_named(&self, name: &str) -> Result<Option<ResultReceipt>, Error>;

    /// The finished sessions of `owner` (all for `None`) that finished at or after
    /// `since`, oldest first, each output cut to `tail_chars`; and how many older.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn list(
        &self,
        owner: Option<&str>,
        since: Option<f64>,
        tail_chars: usize,
    ) -> Result<Listed, Error>;

    /// The tombstone of an evicted session, by id, prefix or name.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn tombstone(&self, id_prefix_or_name: &str) -> Result<Option<Tombstone>, Error>;

    /// Ids of `owner`'s receipts (all for `None`) finished at or before
    /// `finished_before`, oldest first.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn finished_ids(&self, owner: Option<&str>, finished_before: f64)
    -> Result<Vec<String>, Error>;

    /// Forgets these finished sessions (no tombstone); returns the ids it held.
    ///
    /// # Errors
    /// An invalid id, a store that cannot be written.
    fn forget_all(&self, ids: &[String]) -> Result<Vec<String>, Error>;
}

/// Answers kept for spawn request keys, so a retried spawn starts once.
pub trait RequestKeys: Send + Sync + std::fmt::Debug {
    /// The answer stored for `key` within the last `window`.
    ///
    /// # Errors
    /// A store that cannot be read.
    fn request_key(&self, key: &str, window: Duration) -> Result<Option<String>, Error>;

    /// Keeps `answer` for `key`, dropping keys older than `window`.
    ///
    /// # Errors
    /// A store that cannot be written.
    fn put_request_key(&self, key: &str, answer: &str, window: Duration) -> Result<(), Error>;
}

/// The map each host link keeps across restarts (its bytes; the shape is the
/// daemon's).
pub trait HostLinkStore: Send + Sync + std::fmt::Debug {
    /// The map of `host`, if one was stored.
    ///
    /// # Errors
    /// An invalid host name, a store that cannot be read.
    fn load(&self, host: &str) -> Result<Option<Vec<u8>>, Error>;

    /// Stores the map of `host`, whole.
    ///
    /// # Errors
    /// An invalid host name, a store that cannot be written.
    fn save(&self, host: &str, book: &[u8]) -> Result<(), Error>;

    /// This home's stable id (16 hex digits), which far hosts know it by; made
    /// once.
    ///
    /// # Errors
    /// A store that cannot be read or written, no random source.
    fn home_id(&self) -> Result<String, Error>;
}

#[cfg(feature = "sqlite")]
mod sqlite {
    use std::sync::Mutex;
    use std::time::Duration;

    use super::{CompletionLedger, HostLinkStore, RequestKeys, ResultStore};
    use crate::{CompletionRecord, Error, HostLinks, Ledger, Listed, PruneReport, ReceiptStore};
    use crate::{RestartSpec, ResultReceipt, Stored, Tombstone};

    fn lock(m: &Mutex<Ledger>) -> std::sync::MutexGuard<'_, Ledger> {
        m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The SQLite ledger, one connection behind a mutex.
    impl CompletionLedger for Mutex<Ledger> {
        fn commit(&self, record: &CompletionRecord) -> Result<bool, Error> {
            lock(self).commit(record)
        }

        fn commit_replacing(&self, record: &CompletionRecord) -> Result<bool, Error> {
            lock(self).commit_replacing(record)
        }

        fn mark_delivered_many(
            &self,
            owner: Option<&str>,
            completion_ids: &[&str],
        ) -> Result<usize, Error> {
            lock(self).mark_delivered_many(owner, completion_ids)
        }

        fn is_delivered(&self, completion_id: &str) -> Result<Option<bool>, Error> {
            lock(self).is_delivered(completion_id)
        }

        fn undelivered(&self) -> Result<Vec<CompletionRecord>, Error> {
            lock(self).undelivered()
        }

        fn expire_unclaimed(&self, older_than: Duration) -> Result<usize, Error> {
            lock(self).expire_unclaimed(older_than)
        }
    }

    impl ResultStore for ReceiptStore {
        fn ttl(&self) -> Duration {
            ReceiptStore::ttl(self)
        }

        fn open(&self) -> Result<(), Error> {
            ReceiptStore::open(self)
        }

        fn store_all(&self, batch: &[Stored]) -> Result<(), Error> {
            ReceiptStore::store_all(self, batch)
        }

        fn prune_at_most(&self, max: usize) -> Result<PruneReport, Error> {
            ReceiptStore::prune_at_most(self, max)
        }

        fn load(&self, id: &str) -> Result<Option<ResultReceipt>, Error> {
            ReceiptStore::load(self, id)
        }

        fn restart_spec(&self, id: &str) -> Result<Option<RestartSpec>, Error> {
            ReceiptStore::restart_spec(self, id)
        }

        fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, Error> {
            ReceiptStore::ids_with_prefix(self, prefix)
        }

        fn newest_named(&self, name: &str) -> Result<Option<ResultReceipt>, Error> {
            ReceiptStore::newest_named(self, name)
        }

        fn list(
            &self,
            owner: Option<&str>,
            since: Option<f64>,
            tail_chars: usize,
        ) -> Result<Listed, Error> {
            ReceiptStore::list(self, owner, since, tail_chars)
        }

        fn tombstone(&self, id_prefix_or_name: &str) -> Result<Option<Tombstone>, Error> {
            ReceiptStore::tombstone(self, id_prefix_or_name)
        }

        fn finished_ids(
            &self,
            owner: Option<&str>,
            finished_before: f64,
        ) -> Result<Vec<String>, Error> {
            ReceiptStore::finished_ids(self, owner, finished_before)
        }

        fn forget_all(&self, ids: &[String]) -> Result<Vec<String>, Error> {
            ReceiptStore::forget_all(self, ids)
        }
    }

    impl RequestKeys for ReceiptStore {
        fn request_key(&self, key: &str, window: Duration) -> Result<Option<String>, Error> {
            ReceiptStore::request_key(self, key, window)
        }

        fn put_request_key(&self, key: &str, answer: &str, window: Duration) -> Result<(), Error> {
            ReceiptStore::put_request_key(self, key, answer, window)
        }
    }

    impl HostLinkStore for HostLinks {
        fn load(&self, host: &str) -> Result<Option<Vec<u8>>, Error> {
            HostLinks::load(self, host)
        }

        fn save(&self, host: &str, book: &[u8]) -> Result<(), Error> {
            HostLinks::save(self, host, book)
        }

        fn home_id(&self) -> Result<String, Error> {
            HostLinks::home_id(self)
        }
    }
}
