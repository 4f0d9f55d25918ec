//! The completion ledger: commits a queued completion before it is published,
//! commits far hosts' completions, replays earlier processes' undelivered ones once
//! per registry, and marks drained ones delivered.
//!
//! Owns [`Completions`]. The commit inside the finish choke point is its only work
//! under the table lock, and only on the rare slow path (a completion that changed
//! while it was drafted).

use crate::lock_order::{Mutex, MutexGuard, rank};
use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use herd_hooks::Stored;
use herd_persistence::{CompletionLedger, CompletionRecord, Home};
use serde::Deserialize;

use super::{Durable, lock, reason_from_name, unix_seconds};
use crate::event::Event;
use crate::id::SessionId;
use crate::registry::Inner;
use crate::registry::hooks_room::Hooks;

/// The completion ledger: opened on the first commit or delivery, and the
/// replay of earlier processes' undelivered completions.
#[derive(Debug)]
pub(super) struct Completions {
    /// `None` until the first commit or delivery needs it.
    slot: Mutex<Option<Arc<dyn CompletionLedger>>, { rank::LEDGER }>,
    /// The ledger the host gave, if any (else the home's).
    given: Option<Arc<dyn CompletionLedger>>,
    replay: Mutex<Replay, { rank::LEDGER_REPLAY }>,
    /// The home whose `state.db` holds the ledger when the host gave none.
    home: Home,
}

impl Completions {
    pub(super) fn new(home: &Home, given: Option<Arc<dyn CompletionLedger>>) -> Completions {
        Completions {
            slot: Mutex::new(None),
            given,
            home: home.clone(),
            replay: Mutex::new(Replay::Pending {
                committed_here: HashSet::new(),
            }),
        }
    }
}

impl Completions {
    /// The ledger, created on first use (a registry that never commits creates none).
    fn created(
        &self,
    ) -> Result<MutexGuard<'_, Option<Arc<dyn CompletionLedger>>>, herd_persistence::Error> {
        let mut slot = lock(&self.slot);
        if slot.is_none() {
            *slot = Some(self.create(&self.home)?);
        }
        Ok(slot)
    }

    /// The ledger to create: the host's, else the home's (in memory without the
    /// `sqlite` feature).
    fn create(&self, home: &Home) -> Result<Arc<dyn CompletionLedger>, herd_persistence::Error> {
        if let Some(given) = &self.given {
            return Ok(Arc::clone(given));
        }
        #[cfg(feature = "sqlite")]
        let created: Arc<dyn CompletionLedger> = Arc::new(crate::lock_order::foreign(
            herd_persistence::Ledger::create(home)?,
        ));
        #[cfg(not(feature = "sqlite"))]
        let created: Arc<dyn CompletionLedger> = {
            let _ = home;
            Arc::new(herd_persistence::MemoryLedger::new())
        };
        Ok(created)
    }

    /// The ledger to read, if one exists (creating nothing).
    fn open(
        &self,
        home: &Home,
    ) -> Result<Option<Arc<dyn CompletionLedger>>, herd_persistence::Error> {
        if let Some(given) = &self.given {
            return Ok(Some(Arc::clone(given)));
        }
        #[cfg(feature = "sqlite")]
        let opened = herd_persistence::Ledger::open(home)?
            .map(|l| Arc::new(crate::lock_order::foreign(l)) as Arc<dyn CompletionLedger>);
        #[cfg(not(feature = "sqlite"))]
        let opened = {
            let _ = home;
            None
        };
        Ok(opened)
    }

    /// Notes a completion this registry committed, so the replay skips it.
    fn committed_here(&self, completion_id: String) {
        if let Replay::Pending { committed_here } = &mut *lock(&self.replay) {
            committed_here.insert(completion_id);
        }
    }

    /// The ledger to read, opened now if it exists and was not (creating
    /// nothing); `Err` when it cannot be opened.
    fn opened(
        &self,
    ) -> Result<MutexGuard<'_, Option<Arc<dyn CompletionLedger>>>, herd_persistence::Error> {
        let mut slot = lock(&self.slot);
        if slot.is_none() {
            *slot = self.open(&self.home)?;
        }
        Ok(slot)
    }

    /// Commits `record` (replacing an undelivered row when `replace`), creating
    /// the ledger on first use, and notes it committed here. Whether it is to be
    /// queued: not when the ledger already holds it as delivered.
    fn commit(
        &self,
        record: CompletionRecord,
        replace: bool,
    ) -> Result<bool, herd_persistence::Error> {
        let slot = self.created()?;
        let ledger = slot.as_ref().expect("the ledger was just opened");
        let new = if replace {
            ledger.commit_replacing(&record)?
        } else {
            ledger.commit(&record)?
        };
        let queue = new || !matches!(ledger.is_delivered(&record.completion_id), Ok(Some(true)));
        // Noted while the ledger is still held: a replay that reads the ledger
        // after this commit finds it noted.
        self.committed_here(record.completion_id);
        drop(slot);
        Ok(queue)
    }

    /// Commits a completion produced elsewhere, noting it committed here when it
    /// was new (one the ledger held already is left to the replay). Whether it was
    /// new; `None` when the ledger cannot be written (logged).
    fn commit_external(&self, session_id: &SessionId, record: CompletionRecord) -> Option<bool> {
        let slot = match self.created() {
            Ok(slot) => slot,
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "a far completion not committed: the ledger cannot be opened");
                return None;
            }
        };
        let ledger = slot.as_ref().expect("the ledger was just opened");
        match ledger.commit(&record) {
            Ok(new) => {
                // Queued here now, so the replay must not queue it again (noted
                // while the ledger is still held).
                if new {
                    self.committed_here(record.completion_id);
                }
                drop(slot);
                Some(new)
            }
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "a far completion not committed to the ledger");
                None
            }
        }
    }

    /// Whether the replay of earlier processes' completions happened.
    fn is_replayed(&self) -> bool {
        matches!(*lock(&self.replay), Replay::Done)
    }

    /// The undelivered completions earlier processes left, after those unclaimed
    /// past `ttl` expired (logged; none when the ledger cannot be read).
    fn undelivered(&self, ttl: std::time::Duration) -> Vec<CompletionRecord> {
        let slot = match self.opened() {
            Ok(slot) => slot,
            Err(error) => {
                tracing::error!(%error, "undelivered completions not replayed: the ledger cannot be opened");
                return Vec::new();
            }
        };
        let Some(ledger) = slot.as_ref() else {
            return Vec::new();
        };
        // Completions of owners that never came back go after `result_ttl`, as
        // result receipts do; no count cap.
        match ledger.expire_unclaimed(ttl) {
            Ok(0) => {}
            Ok(n_expired) => {
                tracing::info!(n_expired, "unclaimed completions expired from the ledger");
            }
            Err(error) => tracing::warn!(%error, "unclaimed completions not expired"),
        }
        ledger.undelivered().unwrap_or_else(|error| {
            tracing::error!(%error, "undelivered completions not replayed: the ledger cannot be read");
            Vec::new()
        })
    }

    /// Ends the replay, once: the completions committed here before it, to skip;
    /// `None` when another consumer replayed already.
    fn end_replay(&self) -> Option<HashSet<String>> {
        match std::mem::replace(&mut *lock(&self.replay), Replay::Done) {
            Replay::Pending { committed_here } => Some(committed_here),
            Replay::Done => None,
        }
    }

    /// Forgets the completions unclaimed past `ttl`; creates no ledger (logged).
    fn expire_unclaimed(&self, ttl: std::time::Duration) {
        let slot = match self.opened() {
            Ok(slot) => slot,
            Err(error) => {
                tracing::warn!(%error, "unclaimed completions not expired: the ledger cannot be opened");
                return;
            }
        };
        let Some(ledger) = slot.as_ref() else { return };
        match ledger.expire_unclaimed(ttl) {
            Ok(0) => {}
            Ok(n_expired) => {
                tracing::info!(
                    n_expired,
                    "unclaimed completions expired from the ledger on schedule"
                );
            }
            Err(error) => tracing::warn!(%error, "unclaimed completions not expired"),
        }
    }

    /// Marks `completion_ids` delivered in one transaction (of `owner` only, when
    /// given); nothing to do when no ledger exists. `Err` when it was not written
    /// (logged).
    fn mark_delivered(&self, owner: Option<&str>, completion_ids: &[&str]) -> Result<(), ()> {
        let slot = match self.opened() {
            Ok(slot) => slot,
            Err(error) => {
                tracing::error!(%error, "drained completions not marked delivered yet; written again later, and delivered again after a restart until then");
                return Err(());
            }
        };
        let Some(ledger) = slot.as_ref() else {
            return Ok(());
        };
        match ledger.mark_delivered_many(owner, completion_ids) {
            Ok(_) => Ok(()),
            Err(error) => {
                tracing::error!(n_completions = completion_ids.len(), %error, "completions not marked delivered yet; written again later, and delivered again after a restart until then");
                Err(())
            }
        }
    }
}

/// The ledger row of a completion whose event JSON is `value`; `None` for any other
/// event.
fn completion_record(event: &Event, value: serde_json::Value) -> Option<CompletionRecord> {
    let Event::Completion {
        session_id,
        task_id,
        owner_task_id,
        session_key,
        ..
    } = event
    else {
        return None;
    };
    Some(CompletionRecord {
        completion_id: session_id.as_str().to_owned(),
        session_id: session_id.as_str().to_owned(),
        owner_task_id: owner_task_id.clone(),
        task_id: task_id.clone(),
        session_key: session_key.clone().unwrap_or_default(),
        event: value,
        created_at: unix_seconds(SystemTime::now()),
    })
}

impl Inner {
    /// Commits a completion to the ledger before it is published. Called inside
    /// the choke point's critical section for completions that are queued. A failure
    /// is logged at error; the caller publishes anyway. Returns whether the completion
    /// is to be queued: not when the ledger already holds it as delivered.
    pub(in crate::registry) fn commit_completion(&self, event: &Event) -> bool {
        self.commit_completion_as(event, false)
    }

    /// [`Inner::commit_completion`] for a completion that changed after its first
    /// commit: the undelivered row is replaced, so a replay after a restart carries
    /// what was queued.
    pub(in crate::registry) fn recommit_completion(&self, event: &Event) -> bool {
        self.commit_completion_as(event, true)
    }

    fn commit_completion_as(&self, event: &Event, replace: bool) -> bool {
        match self.try_commit_completion(event, replace) {
            Ok(queue) => queue,
            Err(()) => {
                // Published all the same (a live consumer gets it); committed again
                // later, so a restart does not lose it.
                self.recommits.recommit_later(event.clone(), replace);
                true
            }
        }
    }

    /// Commits a completion (see [`Inner::commit_completion`]); `Err` when the ledger
    /// could not be written (logged here), for the caller to try again later.
    /// `Ok(queue)` says whether it is to be queued.
    pub(in crate::registry) fn try_commit_completion(
        &self,
        event: &Event,
        replace: bool,
    ) -> Result<bool, ()> {
        let Event::Completion {
            session_id,
            command,
            ..
        } = event
        else {
            return Ok(true);
        };
        let mut value = match serde_json::to_value(event) {
            Ok(value) => value,
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "completion not committed to the ledger: not encodable");
                return Ok(true);
            }
        };
        if let Some(slot) = value.get_mut("command") {
            *slot = serde_json::Value::String(self.hooks.redact_command(command).into_owned());
        }
        let Some(record) = completion_record(event, value) else {
            return Ok(true);
        };
        match self.durable.ledger.commit(record, replace) {
            Ok(queue) => Ok(queue),
            Err(error) => {
                tracing::error!(session_id = %session_id, %error, "completion not committed to the ledger yet; it is published, and committed again once the ledger can be written");
                Err(())
            }
        }
    }

    /// Re-queues, once per registry, the undelivered completions earlier processes
    /// left in the home's ledger. Called by the first `drain` or `subscribe`.
    pub(in crate::registry) fn replay_once(&self) {
        if self.durable.ledger.is_replayed() {
            return;
        }
        let records = self.durable.ledger.undelivered(self.config.result_ttl);
        // Rebuilt (and redacted again) before the table lock: redaction is not for
        // under it.
        let events: Vec<(String, Option<Event>)> = records
            .into_iter()
            .map(|record| {
                let event = event_from_ledger(&record.event, &self.hooks);
                (record.completion_id, event)
            })
            .collect();
        let replayed = self.table.with_queues(|queues| {
            // None when another consumer replayed meanwhile.
            let committed_here = self.durable.ledger.end_replay()?;
            let mut n_replayed = 0;
            for (completion_id, event) in events {
                if committed_here.contains(&completion_id) {
                    continue;
                }
                let Some(event) = event else {
                    tracing::error!(completion_id = %completion_id, "undelivered completion not replayed: its stored event is not a completion");
                    continue;
                };
                queues.enqueue(event.owner_task_id().unwrap_or_default(), event.clone());
                self.outbox.broadcast(event);
                n_replayed += 1;
            }
            Some(n_replayed)
        });
        let Some(n_replayed) = replayed else {
            return;
        };
        if n_replayed > 0 {
            tracing::info!(
                n_replayed,
                "undelivered completions replayed from the ledger"
            );
        }
    }

    /// Forgets the completions nobody drained within `result_ttl` (unclaimed
    /// completions are kept as long as results), for the retention timer, so they
    /// go on schedule and not only at the next replay. Creates no ledger. Blocking.
    pub(in crate::registry) fn expire_unclaimed_completions(&self) {
        self.durable.ledger.expire_unclaimed(self.config.result_ttl);
    }

    /// Marks drained completions delivered in the ledger.
    pub(crate) fn mark_delivered(&self, events: &[Event]) {
        let ids: Vec<&str> = events
            .iter()
            .filter(|e| matches!(e, Event::Completion { .. }))
            .filter_map(Event::session_id)
            .map(SessionId::as_str)
            .collect();
        self.mark_completions_delivered(None, &ids);
    }

    /// Marks the completions `completion_ids` delivered in the ledger, in one
    /// transaction (one fsync for the batch). Ids the ledger does not hold are
    /// skipped, and with `owner` so are other owners' completions. Returns whether
    /// the ledger took the write (or had nothing to mark).
    pub(crate) fn mark_completions_delivered(
        &self,
        owner: Option<&str>,
        completion_ids: &[&str],
    ) -> bool {
        if completion_ids.is_empty() {
            return true;
        }
        self.recommits.note_delivered_before_commit(completion_ids);
        if self
            .durable
            .ledger
            .mark_delivered(owner, completion_ids)
            .is_err()
        {
            self.recommits.recommit_acks_later(completion_ids);
            return false;
        }
        true
    }
}

impl Durable {
    /// Commits a completion produced elsewhere (a far host's, under its qualified
    /// id) to the ledger, noting it as committed here so the replay does not queue
    /// it a second time. Returns `Some(true)` when it was new, `Some(false)` when the
    /// ledger held it already (a replay from the far side: it was queued before),
    /// `None` when the ledger cannot be written.
    pub(in crate::registry) fn commit_external(&self, event: &Event) -> Option<bool> {
        let Event::Completion { session_id, .. } = event else {
            return Some(true);
        };
        let record = completion_record(event, serde_json::to_value(event).ok()?)?;
        self.ledger.commit_external(session_id, record)
    }
}

/// Replay state: before the first consume, the completions this registry committed.
#[derive(Debug)]
enum Replay {
    Pending { committed_here: HashSet<String> },
    Done,
}

/// A completion as the ledger stores it (the JSON of [`Event::Completion`]).
#[derive(Debug, Deserialize)]
struct StoredCompletion {
    #[serde(rename = "type")]
    kind: String,
    session_id: String,
    task_id: String,
    owner_task_id: String,
    session_key: Option<String>,
    command: Stored,
    exit_code: Option<i32>,
    signal: Option<i32>,
    completion_reason: String,
    termination_source: Option<String>,
    output: Stored,
    output_cut: bool,
    log_path: PathBuf,
    started_at: String,
    finished_at: String,
    handoff_note: Option<String>,
    #[serde(default)]
    descendants_alive: Vec<i32>,
    #[serde(default)]
    leftovers: Vec<herd_persistence::Leftover>,
    #[serde(default)]
    bytes_not_kept: u64,
    #[serde(default)]
    runs: Option<u32>,
}

/// Rebuilds a completion event from its ledger JSON; `None` when it is not one. Its
/// command and output are redacted again through the hooks room (see [`Stored`]).
pub(in crate::registry) fn event_from_ledger(
    value: &serde_json::Value,
    hooks: &Hooks,
) -> Option<Event> {
    let stored: StoredCompletion = serde_json::from_value(value.clone()).ok()?;
    if stored.kind != "completion" {
        return None;
    }
    let command = hooks.recheck_command(stored.command);
    let output = hooks.recheck_output(&command, stored.output);
    Some(Event::Completion {
        // A far host's completion is kept under its qualified id.
        session_id: SessionId::parse_any(&stored.session_id)?,
        task_id: stored.task_id,
        owner_task_id: stored.owner_task_id,
        session_key: stored.session_key,
        command,
        exit_code: stored.exit_code,
        signal: stored.signal,
        completion_reason: reason_from_name(&stored.completion_reason),
        termination_source: stored
            .termination_source
            .as_deref()
            .and_then(crate::KillSource::from_name),
        output,
        output_cut: stored.output_cut,
        log_path: stored.log_path,
        started_at: stored.started_at,
        finished_at: stored.finished_at,
        handoff_note: stored.handoff_note,
        descendants_alive: stored.descendants_alive,
        leftovers: stored.leftovers,
        bytes_not_kept: stored.bytes_not_kept,
        runs: stored.runs,
    })
}
