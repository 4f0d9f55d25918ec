//! The far events of this home's far owner: the events door followed while a
//! far job can still produce events, each note answered by a leased drain whose
//! events are published into their local owners' queues once (keys drop a
//! replayed lease) before the lease is acknowledged.

use std::sync::Arc;
use std::time::{Duration, Instant};

use herd_core::{External, SessionId};
use herd_protocol::answers::ListAnswer;
use herd_protocol::params::{DrainParams, EventsParams, LeaseParams, ListParams};
use serde_json::Value;

use super::link::request_line;
use super::stream::Source;
use super::{BACKOFF_FIRST, BACKOFF_LAST, EVENTS_LINGER, KEPT_KEYS, Link, lock, to_params};

impl Link {
    /// Whether a far job can still produce events.
    pub(super) fn events_due(&self) -> bool {
        lock(&self.book)
            .jobs
            .values()
            .any(|j| j.events && !j.finished)
    }

    /// Starts the event loop once.
    pub(super) fn start_events(self: &Arc<Self>) {
        if self
            .events_started
            .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return;
        }
        let link = Arc::clone(self);
        tokio::spawn(async move { link.events_loop().await });
    }

    /// While a far job can produce events: the events door open, each `pending`
    /// note answered with a leased drain; reconnects with back-off.
    pub(super) async fn events_loop(self: Arc<Self>) {
        let mut backoff = BACKOFF_FIRST;
        loop {
            if !self.events_due() {
                self.wake.notified().await;
                continue;
            }
            let started = Instant::now();
            let ended = self.follow_events().await;
            if started.elapsed() > BACKOFF_LAST {
                backoff = BACKOFF_FIRST;
            }
            match ended {
                Ok(()) => backoff = BACKOFF_FIRST,
                Err(why) => {
                    tracing::debug!(host = %self.name, %why, "events door ended; reconnecting");
                    pause(backoff).await;
                    backoff = (backoff * 2).min(BACKOFF_LAST);
                }
            }
        }
    }

    /// One events door's life: drains at once (catching up), then on every note.
    /// `events.follow` rides a channel of the host's mux door when its far proxy
    /// serves one (over ssh, no connection of its own), else a door of its own.
    pub(super) async fn follow_events(self: &Arc<Self>) -> Result<(), String> {
        let params = EventsParams {
            owner: self.far_owner.clone(),
            peek: true,
        };
        let line = request_line(
            1,
            "events.follow",
            to_params(&params).map_err(|e| e.message)?,
        );
        let mut source = Source::open(self, &line).await.map_err(|e| e.message)?;
        self.drain().await?;
        let mut buf = Vec::new();
        let mut idle_since: Option<Instant> = None;
        loop {
            let due = self.events_due();
            if due {
                idle_since = None;
            } else if idle_since.get_or_insert_with(Instant::now).elapsed() >= EVENTS_LINGER {
                return Ok(());
            }
            let read = tokio::time::timeout(Duration::from_secs(5), source.next(&mut buf)).await;
            match read {
                // Idle, lingering: nothing to learn until a job can produce events.
                Err(_) if !due => {}
                // A quiet stretch: drain anyway (a note lost in a reconnect), and
                // learn which jobs ended without an event (a watch-only job's end
                // queues nothing), so their door is not held for ever.
                Err(_) => self.note_ended().await?,
                Ok(true) => {}
                Ok(false) => return Err("the events door closed".into()),
            }
            self.drain().await?;
        }
    }

    /// Marks finished the jobs of the map the far side no longer runs.
    pub(super) async fn note_ended(self: &Arc<Self>) -> Result<(), String> {
        let params = ListParams {
            owner: Some(self.far_owner.clone()),
            ..ListParams::default()
        };
        let running = self
            .call_raw("list", to_params(&params).map_err(|e| e.message)?)
            .await
            .map_err(|e| e.message)?;
        // Read as the protocol's answer: a list without its rows is an error, not
        // "every job ended".
        let running: ListAnswer = serde_json::from_value(running)
            .map_err(|e| format!("the far list does not read as the protocol says: {e}"))?;
        let live: std::collections::HashSet<String> = running
            .processes
            .into_iter()
            .map(|r| r.session_id)
            .collect();
        let changed = {
            let mut book = lock(&self.book);
            let mut changed = false;
            for (far_id, job) in &mut book.jobs {
                if !job.finished && !live.contains(far_id) {
                    job.finished = true;
                    changed = true;
                }
            }
            changed
        };
        if changed {
            // Events already queued for them are still taken by the next drain.
            self.drain().await?;
            self.save().await;
        }
        Ok(())
    }

    /// Takes the far owner's events with a lease, publishes each into its local
    /// owner's queue, then acknowledges. Repeats while a drain brings events.
    pub(super) async fn drain(self: &Arc<Self>) -> Result<(), String> {
        loop {
            let params = DrainParams {
                owner: self.far_owner.clone(),
                lease: true,
                answered: Vec::new(),
            };
            let answer = self
                .call_raw("drain", to_params(&params).map_err(|e| e.message)?)
                .await
                .map_err(|e| e.message)?;
            let events = answer
                .get("events")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let Some(lease) = answer.get("lease").and_then(Value::as_u64) else {
                return Ok(());
            };
            let lease = to_params(&LeaseParams { lease }).map_err(|e| e.message)?;
            let link = Arc::clone(self);
            let published = tokio::task::spawn_blocking(move || link.publish(&events))
                .await
                .map_err(|e| format!("publishing failed: {e}"))?;
            if !published {
                // The ledger refused a commit: release, so the far side keeps them.
                let _ = self.call_raw("drain.release", lease).await;
                return Err("the far events were not committed here; kept on the far side".into());
            }
            self.call_raw("drain.ack", lease)
                .await
                .map_err(|e| e.message)?;
        }
    }

    /// Publishes one lease's events (on the blocking pool: ledger commits and the
    /// map file are written here). False when one could not be committed.
    pub(super) fn publish(&self, events: &[Value]) -> bool {
        let mut ok = true;
        let mut changed = false;
        for event in events {
            let Some(far_id) = event.get("session_id").and_then(Value::as_str) else {
                tracing::debug!(host = %self.name, "a far global event is not forwarded");
                continue;
            };
            let Some(id) = SessionId::qualified(&self.name, far_id) else {
                continue;
            };
            let kind = event.get("type").and_then(Value::as_str).unwrap_or("");
            let key = event_key(far_id, kind, event);
            let (owner, seen) = {
                let mut book = lock(&self.book);
                let owner = book.jobs.get(far_id).map_or_else(
                    || {
                        event
                            .get("task_id")
                            .and_then(Value::as_str)
                            .unwrap_or("cli")
                            .to_owned()
                    },
                    |j| j.owner.clone(),
                );
                if kind == "completion"
                    && let Some(job) = book.jobs.get_mut(far_id)
                {
                    job.finished = true;
                    if let Some(row) = job.row.as_mut() {
                        row["status"] = Value::from("exited");
                        for key in [
                            "exit_code",
                            "signal",
                            "completion_reason",
                            "termination_source",
                        ] {
                            if let Some(value) = event.get(key).filter(|v| !v.is_null()) {
                                row[key] = value.clone();
                            }
                        }
                    }
                    changed = true;
                }
                (owner, key.as_ref().is_some_and(|k| book.keys.contains(k)))
            };
            if seen {
                tracing::debug!(host = %self.name, %far_id, kind, "replayed far event dropped");
                continue;
            }
            match self.registry.publish_external(&id, &owner, event) {
                External::Queued => {}
                External::Duplicate => {
                    tracing::debug!(host = %self.name, %far_id, "replayed far completion dropped");
                }
                External::Unknown => {
                    tracing::debug!(host = %self.name, %far_id, kind, "far event not understood");
                }
                External::NotCommitted => {
                    ok = false;
                    continue;
                }
            }
            if let Some(key) = key {
                let mut book = lock(&self.book);
                book.keys.push_back(key);
                while book.keys.len() > KEPT_KEYS {
                    book.keys.pop_front();
                }
                changed = true;
            }
        }
        if changed && let Err(err) = self.save_now() {
            tracing::error!(host = %self.name, error = %err, "host map not written");
            return false;
        }
        ok
    }
}

/// The key a non-completion event is recognised by when a lease is replayed
/// (completions are keyed by the ledger): its whole content. A replay is the same
/// queued event, byte for byte; two real events of one job differ — a heartbeat by
/// its age (its count starts again at 1 when the far daemon restarts and the job
/// reattaches), a watch match by when it matched (matches of one pattern are at
/// least the watch spacing apart).
pub(super) fn event_key(far_id: &str, kind: &str, event: &Value) -> Option<String> {
    if kind == "completion" {
        return None;
    }
    use std::hash::{Hash, Hasher};
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    event.to_string().hash(&mut hasher);
    Some(format!("{kind}:{far_id}:{:016x}", hasher.finish()))
}

/// The pause between reconnects.
#[expect(
    clippy::disallowed_methods,
    reason = "a back-off between reconnects, not a synchronisation"
)]
pub(super) async fn pause(after: Duration) {
    tokio::time::sleep(after).await;
}
