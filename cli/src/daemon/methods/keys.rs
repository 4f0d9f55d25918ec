//! Spawn request keys (capability `spawn.request_key`): a `spawn` that carries a
//! key this daemon has already taken is answered with that spawn's answer, and
//! starts nothing.
//!
//! Why: a caller whose connection died after it sent a spawn cannot know whether
//! the job started. A host link (a far job's `spawn` crossing an ssh door that was
//! cut or killed just then) sends the same spawn again with the same key on a new
//! connection: the far daemon then starts the job at most once, and the caller gets
//! its id either way. A retry that arrives while the first is still being started
//! waits for it.
//!
//! Invariant: a key maps to one started session (or one refusal) for
//! [`KEEP`] after its spawn ended; at most [`MAX_KEYS`] keys are kept in memory
//! (the oldest finished ones go first). Each answer is also committed to the
//! home's store (`state.db`, table `request_keys`, kept [`KEEP`]) before it is
//! sent, and a key memory does not hold is looked up there: a retry that reaches
//! the next daemon after this one restarted (crash, upgrade) gets the first answer
//! too. The one window left is a daemon that dies after starting the job and before
//! committing its key (a few hundred microseconds): that retry starts it again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use herd_core::lock_order::{Mutex, MutexGuard, rank};
use herd_persistence::{Home, ReceiptStore, RequestKeys};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::protocol::{INVALID_PARAMS, RpcError};

/// How long a finished spawn's answer is kept for a retry.
pub(crate) const KEEP: Duration = Duration::from_secs(600);

/// The most keys kept at once.
pub(crate) const MAX_KEYS: usize = 4096;

/// The longest key accepted.
const MAX_KEY_CHARS: usize = 64;

type Answer = Result<Value, RpcError>;

/// An answer as the store keeps it: `{"ok": answer}` or `{"error": error}`.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum Stored {
    Ok(Value),
    Error(RpcError),
}

impl From<&Answer> for Stored {
    fn from(answer: &Answer) -> Stored {
        match answer {
            Ok(value) => Stored::Ok(value.clone()),
            Err(error) => Stored::Error(error.clone()),
        }
    }
}

/// The keys of recent spawns and what became of them.
#[derive(Debug, Default)]
pub(crate) struct SpawnKeys {
    keys: Mutex<HashMap<String, Entry>, { rank::DAEMON_SPAWN_KEYS }>,
    /// Where answers outlive this daemon; `None` keeps them in memory only.
    store: Option<std::sync::Arc<dyn RequestKeys>>,
}

#[derive(Debug)]
enum Entry {
    /// Being started; the answer is sent on the channel when it is known.
    InFlight(watch::Receiver<Option<Answer>>),
    /// Started (or refused) at `at`.
    Done { answer: Answer, at: Instant },
}

/// What a spawn with a key is to do.
#[derive(Debug)]
pub(crate) enum Claim<'a> {
    /// Start the job, then [`Started::finish`] with the answer.
    Start(Started<'a>),
    /// A spawn with this key already ended: its answer.
    Answered(Answer),
}

/// A key this spawn is starting; dropped unfinished (the spawn was cancelled), the
/// key is free again.
#[derive(Debug)]
pub(crate) struct Started<'a> {
    keys: &'a SpawnKeys,
    key: String,
    tx: watch::Sender<Option<Answer>>,
    finished: bool,
}

impl SpawnKeys {
    /// Keys kept in memory and in `home`'s store.
    pub(crate) fn durable(home: &Home) -> SpawnKeys {
        SpawnKeys {
            keys: Mutex::default(),
            store: Some(std::sync::Arc::new(ReceiptStore::new(home))),
        }
    }

    /// Commits `answer` under `key` to the store (before the answer is sent). A
    /// store that cannot be written is logged: the key still holds in memory.
    pub(crate) async fn remember(&self, key: &str, answer: &Answer) {
        let Some(store) = self.store.clone() else {
            return;
        };
        let text = serde_json::to_string(&Stored::from(answer)).unwrap_or_default();
        let key = key.to_owned();
        let stored =
            tokio::task::spawn_blocking(move || store.put_request_key(&key, &text, KEEP)).await;
        if let Ok(Err(error)) = stored {
            tracing::warn!(%error, "spawn request key not stored; a retry after a restart would start the job again");
        }
    }

    /// The answer an earlier daemon committed under `key` within [`KEEP`].
    async fn recall(&self, key: &str) -> Option<Answer> {
        let store = self.store.clone()?;
        let owned = key.to_owned();
        let found = tokio::task::spawn_blocking(move || store.request_key(&owned, KEEP))
            .await
            .ok()?;
        let text = match found {
            Ok(text) => text?,
            Err(error) => {
                tracing::warn!(%error, "spawn request keys unreadable");
                return None;
            }
        };
        match serde_json::from_str(&text).ok()? {
            Stored::Ok(value) => Some(Ok(value)),
            Stored::Error(error) => Some(Err(error)),
        }
    }

    fn map(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        self.keys.acquire()
    }

    /// Takes `key` for a spawn, or the answer of the spawn that took it (waiting
    /// for one still being started).
    ///
    /// # Errors
    /// A key that is empty, longer than 64 characters or not of `A-Z a-z 0-9 _ -`.
    pub(crate) async fn claim(&self, key: &str) -> Result<Claim<'_>, RpcError> {
        check_key(key)?;
        if !self.map().contains_key(key)
            && let Some(answer) = self.recall(key).await
        {
            return Ok(Claim::Answered(answer));
        }
        loop {
            let mut waiting = {
                let mut map = self.map();
                match map.get(key) {
                    Some(Entry::Done { answer, at }) if at.elapsed() < KEEP => {
                        return Ok(Claim::Answered(answer.clone()));
                    }
                    Some(Entry::InFlight(rx)) => rx.clone(),
                    _ => {
                        prune(&mut map);
                        let (tx, rx) = watch::channel(None);
                        map.insert(key.to_owned(), Entry::InFlight(rx));
                        return Ok(Claim::Start(Started {
                            keys: self,
                            key: key.to_owned(),
                            tx,
                            finished: false,
                        }));
                    }
                }
            };
            // The spawn that took the key is still starting the job: its answer,
            // or (it was cancelled, the key freed) another try at taking it.
            if let Ok(answer) = waiting.wait_for(Option::is_some).await
                && let Some(answer) = answer.clone()
            {
                return Ok(Claim::Answered(answer));
            }
        }
    }
}

impl Started<'_> {
    /// Records the spawn's answer under its key and hands it to any retry waiting.
    pub(crate) fn finish(mut self, answer: &Answer) {
        self.finished = true;
        self.keys.map().insert(
            self.key.clone(),
            Entry::Done {
                answer: answer.clone(),
                at: Instant::now(),
            },
        );
        let _ = self.tx.send(Some(answer.clone()));
    }
}

impl Drop for Started<'_> {
    fn drop(&mut self) {
        if !self.finished {
            self.keys.map().remove(&self.key);
        }
    }
}

/// Drops answers older than [`KEEP`], then the oldest finished ones while the map
/// is full.
fn prune(map: &mut HashMap<String, Entry>) {
    map.retain(|_, entry| match entry {
        Entry::Done { at, .. } => at.elapsed() < KEEP,
        Entry::InFlight(_) => true,
    });
    while map.len() >= MAX_KEYS {
        let oldest = map
            .iter()
            .filter_map(|(key, entry)| match entry {
                Entry::Done { at, .. } => Some((key.clone(), *at)),
                Entry::InFlight(_) => None,
            })
            .min_by_key(|(_, at)| *at)
            .map(|(key, _)| key);
        match oldest {
            Some(key) => {
                map.remove(&key);
            }
            // Every kept key is a spawn still starting: let the map grow past
            // the bound rather than forget one.
            None => break,
        }
    }
}

fn check_key(key: &str) -> Result<(), RpcError> {
    let well_formed = !key.is_empty()
        && key.len() <= MAX_KEY_CHARS
        && key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if well_formed {
        Ok(())
    } else {
        Err(RpcError::new(
            INVALID_PARAMS,
            format!(
                "invalid request_key {key:?}: use 1 to {MAX_KEY_CHARS} characters of A-Z, a-z, 0-9, `_` and `-` (one per spawn; the same key again means the same spawn)"
            ),
        ))
    }
}

#[cfg(test)]
mod tests;
