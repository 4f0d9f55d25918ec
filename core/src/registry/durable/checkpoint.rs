//! The running sessions in the store: a spawn's row (one transaction on the
//! blocking pool, committed before the spawn answers), coalesced refreshes of every
//! running row on the blocking pool (an owner changed by a handoff, notify turned on;
//! a burst shares one transaction), the deletion of finished sessions' rows (their
//! receipt's commit deletes each too; the refresh covers a receipt that failed), the
//! kill intents, and the checkpoint-only settings of each session.
//!
//! Owns [`Checkpoints`]; reads the table only to snapshot the running set (off the
//! table lock for the write itself). Nothing here touches SQLite under the table's
//! lock.

use crate::lock_order::{Mutex, rank};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use herd_persistence::{Home, RunningStore, SessionRecord, Writer};
use tokio::sync::watch;

use super::{Durable, Extras, Queue, lock, unix_seconds};
use crate::SpawnInfo;
use crate::answers::ModeName;
use crate::error::Error;
use crate::id::SessionId;
use crate::registry::Inner;
use crate::registry::in_place;
use crate::session::Session;

/// How long a finish waits for another write to cover it before asking for its own.
const FINISH_CHECKPOINT_DELAY: Duration = Duration::from_millis(100);

/// The checkpoint of running sessions: the store, its coalesced writes and the
/// pending entries of answered spawns no full write has covered yet.
#[derive(Debug)]
pub(super) struct Checkpoints {
    /// Where the rows go: the home's `state.db`, or the host's own store.
    store: Arc<dyn RunningStore>,
    /// This process, as checkpoint writer.
    writer: Writer,
    extras: Mutex<HashMap<SessionId, Extras>, { rank::CHECKPOINT_EXTRAS }>,
    queue: Mutex<Queue, { rank::CHECKPOINT }>,
    /// The generation the last finished checkpoint write covered.
    written: watch::Sender<u64>,
    /// Serialises checkpoint writes (the snapshot and the write happen under it).
    serial: Mutex<(), { rank::CHECKPOINT_SERIAL }>,
    /// A deferred write after finishes is scheduled; it is not needed once a write of
    /// this generation or later finished.
    deferred: Mutex<Option<u64>, { rank::CHECKPOINT_DEFERRED }>,
    /// Sessions that finished since the last refresh: their rows go with it.
    finished_ids: Mutex<Vec<String>, { rank::CHECKPOINT_FINISHED }>,
    /// A running session changed since its row was written (an owner, notify): the
    /// next background write rewrites the running rows, not only deletes finished
    /// ones (a stream of finishes then costs deletes alone).
    stale: std::sync::atomic::AtomicBool,
}

/// The running store of `home`: its `state.db`.
#[cfg(feature = "sqlite")]
fn default_store(home: &Home) -> Arc<dyn RunningStore> {
    Arc::new(herd_persistence::CheckpointStore::new(home))
}

/// Without the `sqlite` feature, running sessions are kept in memory.
#[cfg(not(feature = "sqlite"))]
fn default_store(_home: &Home) -> Arc<dyn RunningStore> {
    Arc::new(herd_persistence::MemoryRunningStore::new())
}

impl Checkpoints {
    pub(super) fn new(home: &Home, store: Option<Arc<dyn RunningStore>>) -> Checkpoints {
        Checkpoints {
            store: store.unwrap_or_else(|| default_store(home)),
            writer: Writer::current(),
            extras: Mutex::new(HashMap::new()),
            queue: Mutex::new(Queue::default()),
            written: watch::channel(0).0,
            serial: Mutex::new(()),
            deferred: Mutex::new(None),
            finished_ids: Mutex::new(Vec::new()),
            stale: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub(super) fn store(&self) -> &Arc<dyn RunningStore> {
        &self.store
    }

    pub(super) fn writer(&self) -> Writer {
        self.writer
    }

    pub(super) fn set_extras(&self, id: SessionId, extras: Extras) {
        lock(&self.extras).insert(id, extras);
    }

    /// Drops a finished session's checkpoint-only settings; the next refresh
    /// deletes its row (if its receipt's commit has not already).
    pub(super) fn finished(&self, id: &SessionId) {
        lock(&self.extras).remove(id);
        lock(&self.finished_ids).push(id.as_str().to_owned());
    }

    /// The receipts of `ids` were stored, and with them their rows deleted (one
    /// transaction): no refresh needs to delete those rows again.
    pub(super) fn rows_gone<'a>(&self, ids: impl IntoIterator<Item = &'a str>) {
        let gone: std::collections::HashSet<&str> = ids.into_iter().collect();
        lock(&self.finished_ids).retain(|id| !gone.contains(id.as_str()));
    }

    /// Whether a background write would change anything: a row to rewrite (stale)
    /// or a finished session's row to delete.
    pub(super) fn has_work(&self) -> bool {
        self.stale.load(std::sync::atomic::Ordering::SeqCst) || !lock(&self.finished_ids).is_empty()
    }

    /// Commits one running session's row. Blocking.
    fn write_one(&self, record: &SessionRecord) -> Result<(), herd_persistence::Error> {
        self.store.write_one(&self.writer, record)
    }

    /// A running row changed: the next write rewrites every running row.
    fn mark_stale(&self) {
        self.stale.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Asks for a write: the generation that covers it, and whether a writer must
    /// be started (none is in flight; it is marked in flight now).
    fn want_write(&self) -> (u64, bool) {
        let mut q = lock(&self.queue);
        q.wanted += 1;
        let starts = !q.in_flight;
        q.in_flight = true;
        (q.wanted, starts)
    }

    /// Asks for a write that covers the next generation, deferred; whether the
    /// caller must schedule it (none was scheduled).
    fn defer_write(&self) -> bool {
        let after = lock(&self.queue).wanted + 1;
        let mut deferred = lock(&self.deferred);
        let scheduled = deferred.is_some();
        *deferred = Some(after);
        !scheduled
    }

    /// The deferred write is due: whether it is still needed (no write finished
    /// since that covers it).
    fn take_deferred(&self) -> bool {
        let Some(after) = lock(&self.deferred).take() else {
            return false;
        };
        // A write asked for after the last finish snapshotted after it too.
        *self.written.borrow() < after
    }

    /// Waits until a write covering `generation` finished (well or not).
    async fn settled(&self, generation: u64) {
        let mut rx = self.written.subscribe();
        let _ = rx.wait_for(|written| *written >= generation).await;
    }

    /// A writer's round begins: the generation it covers and whether it rewrites
    /// the running rows (they were stale).
    fn round(&self) -> (u64, bool) {
        let generation = lock(&self.queue).wanted;
        let stale = self.stale.swap(false, std::sync::atomic::Ordering::SeqCst);
        (generation, stale)
    }

    /// A writer's round covering `generation` ended; a failed round that was to
    /// rewrite the running rows leaves them stale. Whether the writer is done (no
    /// request came meanwhile; it is no longer in flight).
    fn round_done(&self, generation: u64, failed: bool, stale: bool) -> bool {
        if failed && stale {
            self.mark_stale();
        }
        self.written.send_modify(|w| *w = (*w).max(generation));
        let mut q = lock(&self.queue);
        if q.wanted == generation {
            q.in_flight = false;
            return true;
        }
        false
    }

    /// Writes this process's rows under the writers' serialisation: when
    /// `refresh`, every session `running` snapshots (made into rows by `record`,
    /// with their settings), and deletes the rows of sessions finished since the
    /// last write. Blocking.
    fn write_rows(
        &self,
        refresh: bool,
        running: impl FnOnce() -> Vec<Arc<Session>>,
        record: impl Fn(&Session, Option<&Extras>) -> SessionRecord,
    ) -> Result<(), herd_persistence::Error> {
        let _serial = lock(&self.serial);
        let records = if refresh {
            let running = running();
            let extras = lock(&self.extras);
            let mut records: Vec<SessionRecord> = running
                .iter()
                .map(|s| record(s, extras.get(&s.id)))
                .collect();
            records.sort_by(|a, b| a.id.cmp(&b.id));
            records
        } else {
            Vec::new()
        };
        // Taken after the snapshot: a session that finished before it is either in
        // this list or not in the snapshot (it left the running table first), and a
        // session in both is deleted (deletes follow the writes).
        let finished = std::mem::take(&mut *lock(&self.finished_ids));
        let ids: Vec<&str> = finished.iter().map(String::as_str).collect();
        let written = match self.store.write_own(&self.writer, &records, &ids) {
            Err(herd_persistence::Error::HomeMissing { .. }) if records.is_empty() => Ok(()),
            other => other,
        };
        if written.is_err() {
            lock(&self.finished_ids).extend(finished);
        }
        written
    }
}

impl Inner {
    /// After a spawn was answered by the table: records the checkpoint-only settings
    /// and commits the session's row (on the blocking pool) before the spawn
    /// answers, so an answered spawn is always found after a crash of the host.
    /// When that commit fails, asks for a refresh and waits for it instead.
    pub(in crate::registry) async fn spawned(self: &Arc<Self>, info: &SpawnInfo) {
        let extras = Extras {
            command_redacted: self.hooks.redact_command(&info.command).into_owned(),
            watch_patterns: info.watch_patterns.clone(),
            heartbeat_seconds: info.heartbeat_seconds.unwrap_or(0),
        };
        // While it runs: a session that already finished gets no extras (the
        // finish hook, which removes them, may have run already), and needs no row:
        // there is nothing left to restore.
        let running = self.table.while_running(&info.session_id, |s, _| {
            self.durable
                .checkpoint
                .set_extras(info.session_id.clone(), extras.clone());
            Arc::clone(s)
        });
        let Some(session) = running else {
            return;
        };
        let record = self.record_of(&session, Some(&extras));
        let inner = Arc::clone(self);
        // In place: the spawn's answer waits on this commit (see `in_place`).
        let written = in_place::run(move || inner.durable.checkpoint.write_one(&record)).await;
        let error = match written {
            Ok(Ok(())) => return,
            Ok(Err(error)) => error.to_string(),
            Err(unfinished) => unfinished.to_string(),
        };
        tracing::warn!(%error, "running session not stored; the spawn waits for a refresh of every running session instead");
        self.write_every_running_row().await;
    }

    /// Rewrites every running row and waits until that write has settled: the
    /// fallback of an update that met no row, or a row write that failed, before
    /// anyone is told what the row should hold.
    pub(in crate::registry) async fn write_every_running_row(self: &Arc<Self>) {
        let generation = self.request_checkpoint();
        self.durable.checkpoint_settled(generation).await;
    }

    /// Asks for a checkpoint write that rewrites every running row (something a row
    /// holds changed); returns the generation that covers this request.
    pub(crate) fn request_checkpoint(self: &Arc<Self>) -> u64 {
        self.durable.checkpoint.mark_stale();
        self.request_checkpoint_write()
    }

    /// Asks for a checkpoint write that rewrites the running rows only when one is
    /// stale (else it deletes finished sessions' rows alone: a stream of finishes
    /// must not rewrite thousands of running rows each); returns its generation.
    fn request_checkpoint_write(self: &Arc<Self>) -> u64 {
        let (generation, starts) = self.durable.checkpoint.want_write();
        if starts {
            let inner = Arc::clone(self);
            drop(self.runtime.spawn_blocking(move || inner.checkpoint_loop()));
        }
        generation
    }

    /// Asks for a checkpoint write within [`FINISH_CHECKPOINT_DELAY`], for a change
    /// nobody waits on (a finish). Finishes in a burst share one write, and a write
    /// that starts meanwhile for another reason (a spawn) covers them, so a stream of
    /// short jobs costs one write per spawn rather than two.
    #[expect(
        clippy::disallowed_methods,
        reason = "a debounce delay in production code; it synchronises nothing"
    )]
    pub(crate) fn request_checkpoint_soon(self: &Arc<Self>) {
        if !self.durable.checkpoint.defer_write() {
            return;
        }
        let inner = Arc::clone(self);
        drop(self.runtime.spawn(async move {
            tokio::time::sleep(FINISH_CHECKPOINT_DELAY).await;
            // Finishes whose receipts were stored meanwhile left nothing to do
            // (their rows went in the receipts' transaction): no write at all.
            if inner.durable.checkpoint.take_deferred() && inner.durable.checkpoint.has_work() {
                inner.request_checkpoint_write();
            }
        }));
    }

    /// Runs on the blocking pool until no request is left uncovered.
    fn checkpoint_loop(&self) {
        loop {
            let (generation, stale) = self.durable.checkpoint.round();
            let written = self.write_rows(stale);
            if let Err(error) = &written {
                tracing::warn!(%error, "checkpoint not written; running sessions would not be restored after a crash");
            }
            if self
                .durable
                .checkpoint
                .round_done(generation, written.is_err(), stale)
            {
                return;
            }
        }
    }

    /// Snapshots the running set and writes it as this process's rows, deleting the
    /// rows of sessions that finished since the last refresh. Blocking.
    pub(in crate::registry) fn write_checkpoint(&self) -> Result<(), herd_persistence::Error> {
        self.write_rows(true)
    }

    /// Deletes the rows of sessions that finished since the last write and, when
    /// `refresh`, rewrites every running row first. Blocking.
    fn write_rows(&self, refresh: bool) -> Result<(), herd_persistence::Error> {
        self.durable.checkpoint.write_rows(
            refresh,
            || self.table.running(),
            |s, extra| self.record_of(s, extra),
        )
    }

    /// The checkpoint record of one session.
    fn record_of(&self, s: &Session, extra: Option<&Extras>) -> SessionRecord {
        let command = extra.map_or_else(
            || self.hooks.redact_command(&s.command).into_owned(),
            |e| e.command_redacted.clone(),
        );
        let options = options_record(s, &command);
        let command_given =
            (command != s.command && !s.origin.command_redacted).then(|| s.command.clone());
        let st = s.state();
        SessionRecord {
            command_given,
            id: s.id.as_str().to_owned(),
            command,
            pid: s.pid,
            pgid: s.pgid,
            start_time: s.start_time,
            task_id: st.task_id.clone(),
            owner_task_id: st.owner_task_id.clone(),
            session_key: st.session_key.clone().unwrap_or_default(),
            mode: match s.mode {
                ModeName::Pipe => herd_persistence::Mode::Pipe,
                ModeName::Pty => herd_persistence::Mode::Pty,
            },
            notify: s.is_notify(),
            watch_patterns: extra.map(|e| e.watch_patterns.clone()).unwrap_or_default(),
            heartbeat_seconds: extra.map_or(0, |e| e.heartbeat_seconds),
            completion_output_chars: s.completion_chars as u64,
            persist_on_release: s.persist_on_release,
            log_path: s.log_path.clone(),
            cwd: Some(s.cwd.clone()),
            started_at: unix_seconds(s.started_at),
            shim: s.shim,
            name: s.name.clone(),
            options: Some(options),
            runs: (st.runs > 0).then_some(st.runs),
        }
    }

    /// Writes the checkpoint now and waits for pending receipts (for shutdown, restore
    /// and tests).
    pub(in crate::registry) async fn sync_durable(self: &Arc<Self>) -> Result<(), Error> {
        let inner = Arc::clone(self);
        let written = tokio::task::spawn_blocking(move || inner.write_checkpoint())
            .await
            .map_err(|e| Error::Io {
                path: self.home.ledger_path(),
                source: std::io::Error::other(e),
            })?;
        self.durable.receipts_settled().await;
        written.map_err(Error::from)
    }
}

impl Durable {
    /// Commits the intent to kill the running ones of `sessions` (one transaction, on
    /// the blocking pool) before the kill begins, so a daemon that dies during the
    /// kill's grace window leaves it for the next to report. A failure is
    /// logged; the kill goes on. Returns `false` when a running one had no running
    /// row to take it (its spawn's commit had not landed yet).
    pub(in crate::registry) async fn record_kill_intent(
        &self,
        sessions: &[Arc<Session>],
        source: crate::config::KillSource,
    ) -> bool {
        let ids: Vec<String> = sessions
            .iter()
            .filter(|s| s.state().finished.is_none())
            .map(|s| s.id.as_str().to_owned())
            .collect();
        if ids.is_empty() {
            return true;
        }
        let wanted = ids.len();
        let store = Arc::clone(self.checkpoint.store());
        let intent = herd_persistence::KillIntent {
            source: source.as_str().to_owned(),
            requested_at: unix_seconds(std::time::SystemTime::now()),
        };
        let recorded = tokio::task::spawn_blocking(move || {
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            store.record_kill_intent(&ids, &intent)
        })
        .await;
        match recorded {
            Ok(Ok(rows)) => return rows >= wanted,
            Ok(Err(error)) => {
                tracing::warn!(%error, "kill intent not stored; a daemon crash during the kill would not report it");
            }
            Err(error) => tracing::warn!(%error, "kill intent not stored"),
        }
        true
    }

    /// Waits until a checkpoint write covering `generation` finished (well or not).
    pub(in crate::registry) async fn checkpoint_settled(&self, generation: u64) {
        self.checkpoint.settled(generation).await;
    }
}

/// The spawn options a checkpoint keeps beyond the record's own fields.
pub(super) fn options_record(s: &Session, command_written: &str) -> herd_persistence::SpawnOptions {
    let origin = &s.origin;
    herd_persistence::SpawnOptions {
        time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
        deadline_unix_ms: s.time_limit.map(|t| t.deadline_unix_ms()),
        forward_env: origin.forward_env.clone(),
        env_names: origin.env_names.clone(),
        notify: origin.notify,
        pty: origin.pty,
        // The record's command is the redacted one; it is what ran only if redaction
        // left it as it was.
        command_redacted: origin.command_redacted || command_written != s.command,
        replaces: origin.replaces.as_ref().map(|id| id.as_str().to_owned()),
        kill_leftovers: origin.kill_leftovers,
        memory_bytes: origin.limits.memory_bytes,
        cpu_millis: origin.limits.cpu_millis,
        pids: origin.limits.pids,
        ready: origin.ready.clone(),
        ready_port: origin.ready_port,
        restart: origin.restart.map(crate::RestartPolicy::record),
    }
}
