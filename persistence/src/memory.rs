//! The in-memory stores: a ledger ([`MemoryLedger`]), results with request keys
//! ([`MemoryResultStore`]) and host links ([`MemoryHostLinks`]), for a host built
//! without the `sqlite` feature and for tests. Nothing survives the process; each
//! keeps the contract of its trait (the `stores` module), and a result store given a home
//! removes an evicted or forgotten session's log as the SQLite one does.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::receipt::{tail_start, validate_id};
use crate::{CompletionLedger, HostLinkStore, RequestKeys, ResultStore};
use crate::{CompletionRecord, Error, Home, Listed, PruneReport, RestartSpec, ResultReceipt};
use crate::{
    DEFAULT_LOG_BUDGET_BYTES, MAX_RECEIPT_OUTPUT_CHARS, RECEIPT_RETENTION, Stored,
    TOMBSTONE_RETENTION, Tombstone,
};

/// The most ids a prefix lookup returns (as the SQLite store).
const PREFIX_MATCHES_MAX: usize = 16;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// Completions in memory, in commit order.
#[derive(Debug, Default)]
pub struct MemoryLedger {
    /// Each completion with its delivery time (`None` until delivered).
    rows: Mutex<Vec<(CompletionRecord, Option<f64>)>>,
}

impl MemoryLedger {
    /// An empty ledger.
    pub fn new() -> MemoryLedger {
        MemoryLedger::default()
    }
}

impl CompletionLedger for MemoryLedger {
    fn commit(&self, record: &CompletionRecord) -> Result<bool, Error> {
        let mut rows = lock(&self.rows);
        if rows
            .iter()
            .any(|(r, _)| r.completion_id == record.completion_id)
        {
            return Ok(false);
        }
        rows.push((record.clone(), None));
        Ok(true)
    }

    fn commit_replacing(&self, record: &CompletionRecord) -> Result<bool, Error> {
        let mut rows = lock(&self.rows);
        match rows
            .iter_mut()
            .find(|(r, _)| r.completion_id == record.completion_id)
        {
            Some((row, None)) => {
                *row = record.clone();
                Ok(true)
            }
            Some((_, Some(_))) => Ok(false),
            None => {
                rows.push((record.clone(), None));
                Ok(true)
            }
        }
    }

    fn mark_delivered_many(
        &self,
        owner: Option<&str>,
        completion_ids: &[&str],
    ) -> Result<usize, Error> {
        let now = unix_now();
        let mut n = 0;
        for (row, delivered) in lock(&self.rows).iter_mut() {
            if delivered.is_none()
                && completion_ids.contains(&row.completion_id.as_str())
                && owner.is_none_or(|o| o == row.owner_task_id)
            {
                *delivered = Some(now);
                n += 1;
            }
        }
        Ok(n)
    }

    fn is_delivered(&self, completion_id: &str) -> Result<Option<bool>, Error> {
        Ok(lock(&self.rows)
            .iter()
            .find(|(r, _)| r.completion_id == completion_id)
            .map(|(_, d)| d.is_some()))
    }

    fn undelivered(&self) -> Result<Vec<CompletionRecord>, Error> {
        Ok(lock(&self.rows)
            .iter()
            .filter(|(_, d)| d.is_none())
            .map(|(r, _)| r.clone())
            .collect())
    }

    fn expire_unclaimed(&self, older_than: Duration) -> Result<usize, Error> {
        let cutoff = unix_now() - older_than.as_secs_f64();
        let mut rows = lock(&self.rows);
        let before = rows.len();
        rows.retain(|(r, d)| d.is_some() || r.created_at >= cutoff);
        Ok(before - rows.len())
    }
}

/// Results of finished sessions (and spawn request keys) in memory, kept for a TTL
/// within a budget like the SQLite store; a session's size is its output plus, with
/// a home, its log.
#[derive(Debug)]
pub struct MemoryResultStore {
    home: Option<Home>,
    ttl: Duration,
    log_budget_bytes: u64,
    state: Mutex<Results>,
}

#[derive(Debug, Default)]
struct Results {
    /// By id: the receipt, what a restart repeats, and its size.
    rows: BTreeMap<String, (Stored, u64)>,
    tombstones: BTreeMap<String, Tombstone>,
    /// Request key to its answer and when it was kept.
    keys: HashMap<String, (String, f64)>,
}

impl Default for MemoryResultStore {
    fn default() -> MemoryResultStore {
        MemoryResultStore::new()
    }
}

impl MemoryResultStore {
    /// An empty store with the default TTL and budget, removing no logs.
    pub fn new() -> MemoryResultStore {
        MemoryResultStore {
            home: None,
            ttl: RECEIPT_RETENTION,
            log_budget_bytes: DEFAULT_LOG_BUDGET_BYTES,
            state: Mutex::new(Results::default()),
        }
    }

    /// The same store counting and removing the session logs of `home`.
    #[must_use]
    pub fn with_home(mut self, home: &Home) -> MemoryResultStore {
        self.home = Some(home.clone());
        self
    }

    /// The same store keeping finished sessions for `ttl`.
    #[must_use]
    pub fn with_ttl(mut self, ttl: Duration) -> MemoryResultStore {
        self.ttl = ttl;
        self
    }

    /// The same store keeping finished sessions within `bytes`.
    #[must_use]
    pub fn with_log_budget(mut self, bytes: u64) -> MemoryResultStore {
        self.log_budget_bytes = bytes;
        self
    }

    fn remove_log(&self, id: &str) -> usize {
        let Some(home) = &self.home else { return 0 };
        usize::from(std::fs::remove_file(home.session_log_path(id)).is_ok())
    }

    fn log_bytes(&self, id: &str) -> u64 {
        self.home.as_ref().map_or(0, |home| {
            std::fs::metadata(home.session_log_path(id)).map_or(0, |m| m.len())
        })
    }
}

/// `receipt` with its output cut to what a receipt keeps.
fn kept(mut item: Stored) -> Stored {
    if let Some(start) = tail_start(&item.receipt.output, MAX_RECEIPT_OUTPUT_CHARS) {
        item.receipt.output.drain(..start);
        item.receipt.output_cut = true;
    }
    item
}

impl ResultStore for MemoryResultStore {
    fn ttl(&self) -> Duration {
        self.ttl
    }

    fn store_all(&self, batch: &[Stored]) -> Result<(), Error> {
        for item in batch {
            validate_id(&item.receipt.id)?;
        }
        let sized: Vec<(Stored, u64)> = batch
            .iter()
            .map(|item| {
                let item = kept(item.clone());
                let size = self
                    .log_bytes(&item.receipt.id)
                    .saturating_add(item.receipt.output.len() as u64);
                (item, size)
            })
            .collect();
        let mut state = lock(&self.state);
        for (mut item, size) in sized {
            let id = item.receipt.id.clone();
            if item.spawn.is_none() {
                item.spawn = state.rows.get(&id).and_then(|(old, _)| old.spawn.clone());
            }
            state.tombstones.remove(&id);
            state.rows.insert(id, (item, size));
        }
        Ok(())
    }

    fn prune_at_most(&self, max: usize) -> Result<PruneReport, Error> {
        let now = unix_now();
        let ttl_cutoff = now - self.ttl.as_secs_f64();
        let mut state = lock(&self.state);
        let mut oldest: Vec<(f64, String, u64)> = state
            .rows
            .iter()
            .map(|(id, (item, size))| (item.receipt.finished_at, id.clone(), *size))
            .collect();
        oldest.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        let mut total: u64 = oldest.iter().map(|(_, _, n)| n).sum();
        let mut report = PruneReport::default();
        for (finished_at, id, size) in oldest {
            let expired = finished_at < ttl_cutoff;
            if !expired && total <= self.log_budget_bytes {
                break;
            }
            if report.evicted.len() >= max {
                report.more = true;
                break;
            }
            if expired {
                report.n_expired += 1;
            } else {
                report.n_over_budget += 1;
            }
            total = total.saturating_sub(size);
            let name = state
                .rows
                .remove(&id)
                .and_then(|(item, _)| item.receipt.name);
            state.tombstones.insert(
                id.clone(),
                Tombstone {
                    id: id.clone(),
                    name,
                    expired_at: now,
                },
            );
            report.evicted.push(id);
        }
        let stale = now - TOMBSTONE_RETENTION.as_secs_f64();
        state.tombstones.retain(|_, t| t.expired_at >= stale);
        drop(state);
        for id in &report.evicted {
            report.n_logs += self.remove_log(id);
        }
        Ok(report)
    }

    fn load(&self, id: &str) -> Result<Option<ResultReceipt>, Error> {
        validate_id(id)?;
        Ok(lock(&self.state)
            .rows
            .get(id)
            .map(|(item, _)| item.receipt.clone()))
    }

    fn restart_spec(&self, id: &str) -> Result<Option<RestartSpec>, Error> {
        validate_id(id)?;
        Ok(lock(&self.state)
            .rows
            .get(id)
            .and_then(|(item, _)| item.spawn.clone()))
    }

    fn ids_with_prefix(&self, prefix: &str) -> Result<Vec<String>, Error> {
        Ok(lock(&self.state)
            .rows
            .range(prefix.to_owned()..)
            .take_while(|(id, _)| id.starts_with(prefix))
            .take(PREFIX_MATCHES_MAX)
            .map(|(id, _)| id.clone())
            .collect())
    }

    fn newest_named(&self, name: &str) -> Result<Option<ResultReceipt>, Error> {
        Ok(lock(&self.state)
            .rows
            .values()
            .filter(|(item, _)| item.receipt.name.as_deref() == Some(name))
            .max_by(|a, b| a.0.receipt.finished_at.total_cmp(&b.0.receipt.finished_at))
            .map(|(item, _)| item.receipt.clone()))
    }

    fn list(
        &self,
        owner: Option<&str>,
        since: Option<f64>,
        tail_chars: usize,
    ) -> Result<Listed, Error> {
        let since = since.unwrap_or(f64::MIN);
        let state = lock(&self.state);
        let mine = state
            .rows
            .values()
            .map(|(item, _)| &item.receipt)
            .filter(|r| owner.is_none_or(|o| o == r.owner_task_id));
        let mut listed = Listed::default();
        for r in mine {
            if r.finished_at < since {
                listed.n_older += 1;
                continue;
            }
            let mut r = r.clone();
            if let Some(start) = tail_start(&r.output, tail_chars) {
                r.output.drain(..start);
                r.output_cut = true;
            }
            listed.receipts.push(r);
        }
        listed.receipts.sort_by(|a, b| {
            a.started_at
                .total_cmp(&b.started_at)
                .then_with(|| a.id.cmp(&b.id))
        });
        Ok(listed)
    }

    fn tombstone(&self, id_prefix_or_name: &str) -> Result<Option<Tombstone>, Error> {
        let state = lock(&self.state);
        let by_id: Vec<&Tombstone> = state
            .tombstones
            .values()
            .filter(|t| t.id.starts_with(id_prefix_or_name))
            .take(2)
            .collect();
        if let [one] = by_id.as_slice() {
            return Ok(Some((*one).clone()));
        }
        Ok(state
            .tombstones
            .values()
            .filter(|t| t.name.as_deref() == Some(id_prefix_or_name))
            .max_by(|a, b| a.expired_at.total_cmp(&b.expired_at))
            .cloned())
    }

    fn finished_ids(
        &self,
        owner: Option<&str>,
        finished_before: f64,
    ) -> Result<Vec<String>, Error> {
        let state = lock(&self.state);
        let mut found: Vec<(f64, String)> = state
            .rows
            .values()
            .map(|(item, _)| &item.receipt)
            .filter(|r| owner.is_none_or(|o| o == r.owner_task_id))
            .filter(|r| r.finished_at <= finished_before)
            .map(|r| (r.finished_at, r.id.clone()))
            .collect();
        found.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        Ok(found.into_iter().map(|(_, id)| id).collect())
    }

    fn forget_all(&self, ids: &[String]) -> Result<Vec<String>, Error> {
        for id in ids {
            validate_id(id)?;
        }
        let gone = {
            let mut state = lock(&self.state);
            let mut gone = Vec::with_capacity(ids.len());
            for id in ids {
                if state.rows.remove(id).is_some() {
                    gone.push(id.clone());
                }
                state.tombstones.remove(id);
            }
            gone
        };
        for id in ids {
            self.remove_log(id);
        }
        Ok(gone)
    }
}

impl RequestKeys for MemoryResultStore {
    fn request_key(&self, key: &str, window: Duration) -> Result<Option<String>, Error> {
        let cutoff = unix_now() - window.as_secs_f64();
        Ok(lock(&self.state)
            .keys
            .get(key)
            .filter(|(_, at)| *at >= cutoff)
            .map(|(answer, _)| answer.clone()))
    }

    fn put_request_key(&self, key: &str, answer: &str, window: Duration) -> Result<(), Error> {
        let now = unix_now();
        let cutoff = now - window.as_secs_f64();
        let mut state = lock(&self.state);
        state.keys.retain(|_, (_, at)| *at >= cutoff);
        state.keys.insert(key.to_owned(), (answer.to_owned(), now));
        Ok(())
    }
}

/// Host links in memory.
#[derive(Debug, Default)]
pub struct MemoryHostLinks {
    books: Mutex<HashMap<String, Vec<u8>>>,
    home_id: Mutex<Option<String>>,
}

impl MemoryHostLinks {
    /// No links.
    pub fn new() -> MemoryHostLinks {
        MemoryHostLinks::default()
    }
}

impl HostLinkStore for MemoryHostLinks {
    fn load(&self, host: &str) -> Result<Option<Vec<u8>>, Error> {
        validate_host(host)?;
        Ok(lock(&self.books).get(host).cloned())
    }

    fn save(&self, host: &str, book: &[u8]) -> Result<(), Error> {
        validate_host(host)?;
        lock(&self.books).insert(host.to_owned(), book.to_vec());
        Ok(())
    }

    fn home_id(&self) -> Result<String, Error> {
        let mut id = lock(&self.home_id);
        if let Some(id) = id.as_ref() {
            return Ok(id.clone());
        }
        let made = random_home_id()?;
        *id = Some(made.clone());
        Ok(made)
    }
}

/// Whether `id` is a home id: 16 hex digits.
#[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
pub(crate) fn is_home_id(id: &str) -> bool {
    id.len() == 16 && id.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A new random home id: 16 hex digits from the kernel's random source.
pub(crate) fn random_home_id() -> Result<String, Error> {
    use std::io::Read;
    let mut random = [0u8; 8];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut random))
        .map_err(|source| Error::HomeIdRandom { source })?;
    Ok(format!("{:016x}", u64::from_ne_bytes(random)))
}

/// A host name is 1 to 32 of `a-z`, `0-9`, `_` and `-`, not starting with `_`/`-`.
pub(crate) fn validate_host(host: &str) -> Result<(), Error> {
    let valid = (1..=32).contains(&host.len())
        && host
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-')
        && !host.starts_with(['_', '-']);
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidHostName {
            host: host.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests;
