//! Restore after a restart: every session the
//! checkpoint lists is re-adopted or honestly closed, and no stranger is signalled.
//!
//! [`Registry::restore`] is explicit, not part of [`Registry::new`]: the host (the
//! daemon) calls it once, right after `new` and before it serves requests, and logs or
//! shows the [`RestoreReport`]. Keeping it out of `new` keeps construction free of I/O
//! (the home is neither created nor replayed when a registry is built) and lets an embedding host decide whether a home's
//! leftovers are its to adopt.
//!
//! Each entry is classified:
//!
//! - written by another live process on this home (a second daemon): left alone;
//! - already tracked by this registry: left alone;
//! - its receipt exists: the session finished before the crash and only the
//!   checkpoint update was lost; the entry is dropped;
//! - its pid is alive and the start time matches the one recorded at spawn (or none
//!   was recorded): re-adopted as a *detached* session;
//! - its pid is alive with another start time: the pid was reused by a stranger;
//!   the session is closed as `lost` without any signal;
//! - its pid is gone (or a zombie): closed as `lost`.
//!
//! A detached session is not our child, so its exit status can never be collected:
//! its exit is watched through a pidfd (Linux 5.3+), else by polling `/proc` every
//! `reclaim::EXIT_POLL`, and when it ends it finishes through the choke point as `lost`
//! (its exit status is unknown; a kill by herd reads `killed`), with no completion
//! published: restore emits a completion only for a collected exit status. Closed
//! sessions pass the choke point the same way, so each gets a receipt and
//! answers poll by id. A detached pipe session gets its output back: the shell's
//! stdout and stderr are one pipe, which stays alive while the shell holds its write
//! end, so restore opens `/proc/<pid>/fd/1` for reading (after pinning the pid by
//! start time) and runs the ordinary reader on it, appending to the same log file.
//! Output written while no herd was running is lost with the pipe's reader (the
//! writer usually dies of SIGPIPE, and restore then finds it gone). A PTY session
//! loses its terminal with the old process and cannot be re-attached; its log holds
//! what was captured before. Either way, the tail answers start from the last
//! output the log file holds, and the session's note says that output before the
//! restart comes from the log file.
//!
//! Notifications: a re-adopted session whose output was reattached keeps its watch
//! patterns (matches are wakes while it runs). Heartbeats are not re-armed: a heartbeat
//! beats only sessions whose completion can be delivered, and a detached session's
//! never can. Both settings stay in the checkpoint for a later restore.
//!
//! A kill of a detached session goes through the ordinary tree kill, which checks the
//! start time pinned at restore before signalling anything.
//!
//! Invariant: restore never signals anything. Only a later kill by id, kill-all or
//! shutdown signals a re-adopted session, through tree kill's identity check.

use std::fs::OpenOptions;
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::Arc;

use herd_persistence::{CheckpointEntry, Writer};
use serde::Serialize;
use tokio::net::unix::pipe;
use tracing::Instrument;

use super::durable::{Extras, from_unix_seconds};
use super::notify::NotifyPlan;
use super::rebuilt::Rebuilt;
use super::reclaim::{seed_tail, tail_at, wait_gone};
use super::supervised::Reattached;
use super::{Inner, Registry};
use crate::answers::ModeName;
use crate::config::KillSource;
use crate::error::Error;
use crate::id::SessionId;
use crate::output::{LogWriter, Tail};
use crate::reader::{self, Finish, Source, Waiter};
use crate::session::{Scope, Session};
use crate::shim::wire::Progress;
use crate::sys;
use std::collections::HashSet;

/// What [`Registry::restore`] did with each checkpointed session.
#[derive(Debug, Clone, Default, Serialize)]
#[non_exhaustive]
pub struct RestoreReport {
    /// Still running with their recorded identity: re-adopted as detached sessions.
    pub adopted: Vec<SessionId>,
    /// Their process was gone: closed as `lost`, no completion (no exit status).
    pub closed_lost: Vec<SessionId>,
    /// Their pid now belongs to another process (start time differs): closed as
    /// `lost`; nothing was signalled.
    pub closed_reused: Vec<SessionId>,
    /// Finished before the restart (a receipt exists); the stale entry was dropped.
    pub already_finished: Vec<SessionId>,
    /// Written by another live process on this home; left alone.
    pub skipped_live_writer: Vec<SessionId>,
    /// Already tracked by this registry; left alone.
    pub already_tracked: Vec<SessionId>,
    /// Supervised sessions whose shim still ran: attached again, ordinary sessions
    /// (live output, stdin, resize, watch, heartbeat and one completion at the end).
    pub reattached: Vec<SessionId>,
    /// Supervised sessions whose job ended while no registry ran: finished with the
    /// exit code their shim recorded, one completion each.
    pub finished_while_away: Vec<SessionId>,
    /// Supervised sessions whose shim speaks a protocol this herd does not attach to:
    /// followed by their exit record only, never killed for it.
    pub records_only: Vec<SessionId>,
    /// Supervised sessions whose shim had died: what was left was killed and the
    /// session closed as `lost`.
    pub supervisor_died: Vec<SessionId>,
    /// Entries that could not be used, with the reason; left in the checkpoint.
    pub invalid: Vec<String>,
    /// The checkpoint was unusable and was moved aside (its sessions were not
    /// restored): what was wrong and where the file is now.
    pub moved_aside: Option<String>,
    /// Entries that could not be dropped from the checkpoint or taken over (they are
    /// classified again at the next restore).
    pub checkpoint_error: Option<String>,
}

/// What became of a checkpointed pid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Fate {
    /// Alive, with this (matching) start time.
    Running { start_time: u64 },
    /// Alive, but a different process.
    Reused,
    /// No live process has the pid.
    Gone,
}

/// Classifies a checkpointed pid by its start time. Reads `/proc` only.
pub(super) fn fate(pid: i32, recorded: Option<u64>) -> Fate {
    if pid <= 1 || pid == sys::own_pid() {
        // A corrupt record naming init or this very process is never ours to adopt.
        return Fate::Reused;
    }
    match sys::proc_info(pid) {
        None => Fate::Gone,
        Some(p) if p.is_dead() => Fate::Gone,
        Some(p) => match recorded {
            Some(t) if t != p.start_time => Fate::Reused,
            _ => Fate::Running {
                start_time: p.start_time,
            },
        },
    }
}

/// Whether `writer` is a live process other than this one (another herd on the home).
fn is_other_live_writer(writer: &Writer, me: &Writer) -> bool {
    if writer == me {
        return false;
    }
    match sys::proc_info(writer.pid) {
        Some(p) if p.is_alive() => writer.start_time.is_none_or(|t| t == p.start_time),
        _ => false,
    }
}

/// What restore reads about one checkpoint entry from `/proc` and the result store,
/// on the blocking pool: whether another live herd wrote it, and (unless so) what
/// the classification asks for. A supervised entry: whether its receipt is stored
/// and, only then, its shim's fate; any other: its process's fate and, only when
/// that is not running, whether its receipt is stored.
#[derive(Debug, Clone, Copy)]
struct Facts {
    other_live_writer: bool,
    has_receipt: bool,
    fate: Option<Fate>,
}

impl Facts {
    /// Reads the facts of `entry` (`id`) against this process `me`. Blocking.
    fn read(
        receipts: &dyn herd_persistence::ResultStore,
        entry: &CheckpointEntry,
        id: &SessionId,
        me: &Writer,
    ) -> Facts {
        if is_other_live_writer(&entry.writer, me) {
            return Facts {
                other_live_writer: true,
                has_receipt: false,
                fate: None,
            };
        }
        let has_receipt = || matches!(receipts.load(id.as_str()), Ok(Some(_)));
        if let Some(shim) = entry.session.shim {
            let has_receipt = has_receipt();
            return Facts {
                other_live_writer: false,
                has_receipt,
                fate: has_receipt.then(|| fate(shim.pid, shim.start_time)),
            };
        }
        let fate = fate(entry.session.pid, entry.session.start_time);
        Facts {
            other_live_writer: false,
            has_receipt: !matches!(fate, Fate::Running { .. }) && has_receipt(),
            fate: Some(fate),
        }
    }
}

impl Registry {
    /// Restores the sessions the home's checkpoint lists: call once, right after
    /// [`Registry::new`], before serving requests. See the module docs of
    /// `registry::restore` for the classification.
    ///
    /// Nothing is signalled. Re-adopted sessions answer poll, list, log, wait and kill
    /// like any other, with a note saying that output before the restart comes from the
    /// log file; they never publish a completion, because their exit status cannot be
    /// collected. Closed sessions get a receipt and answer poll by id as `lost`.
    ///
    /// # Errors
    /// [`Error::Home`] when the checkpoint exists but cannot be read or locked, or is
    /// unusable and cannot be moved aside; nothing was restored or changed then. An
    /// unusable checkpoint that was moved aside is not an error: it is in
    /// [`RestoreReport::moved_aside`].
    pub async fn restore(&self) -> Result<RestoreReport, Error> {
        let inner = Arc::clone(&self.inner);
        let store = Arc::clone(inner.durable.checkpoint());
        // The result store first (created or migrated, earlier releases' receipt
        // files imported, expired sessions evicted), so the first answer after a
        // start does not pay for it and has everything (B38).
        let receipts = inner.durable.receipts().clone();
        let loaded = tokio::task::spawn_blocking(move || {
            if let Err(error) = receipts.open() {
                tracing::warn!(%error, "result store not opened; finished sessions are answerable only from memory");
            }
            store.load()
        })
            .await
            .map_err(|e| Error::Io {
                path: inner.home.ledger_path(),
                source: io::Error::other(e),
            })??;
        let mut pass = Pass {
            report: RestoreReport::default(),
            me: inner.durable.writer(),
            supervised: tokio::task::JoinSet::new(),
            seen: HashSet::new(),
            to_drop: Vec::new(),
            closing: Vec::new(),
        };
        if let Some(moved) = &loaded.moved_aside {
            tracing::warn!(%moved, "checkpoint unusable; no session restored from it");
            pass.report.moved_aside = Some(moved.to_string());
        }
        for entry in loaded.entries {
            inner.restore_entry(entry, &mut pass).await;
        }
        inner.finish_all(std::mem::take(&mut pass.closing)).await;
        while let Some(joined) = pass.supervised.join_next().await {
            let Ok((id, raw_id, outcome)) = joined else {
                continue;
            };
            pass.reattached(id, raw_id, outcome);
        }
        inner.sweep_orphan_shims().await;
        // Receipts of the closed sessions land before their entries leave the
        // checkpoint, so a crash in between loses neither.
        inner.durable.receipts_settled().await;
        let Pass {
            mut report,
            to_drop,
            ..
        } = pass;
        let writer = Arc::clone(&inner);
        let checkpointed = tokio::task::spawn_blocking(move || {
            writer.write_checkpoint()?;
            let ids: Vec<&str> = to_drop.iter().map(String::as_str).collect();
            writer.durable.checkpoint().remove(&ids)
        })
        .await;
        match checkpointed {
            Ok(Ok(_)) => {}
            Ok(Err(error)) => {
                tracing::warn!(%error, "checkpoint not updated after restore");
                report.checkpoint_error = Some(error.to_string());
            }
            Err(error) => report.checkpoint_error = Some(error.to_string()),
        }
        report.log();
        inner.restore_queue().await;
        Ok(report)
    }

    /// Writes the checkpoint of the running sessions now and waits until every result
    /// receipt queued so far is stored. A spawn answers once its pending checkpoint
    /// entry is written (enough for restore after a crash of the host process); this
    /// is for a host that wants a point that is durable on disk too (shutdown, a test,
    /// a backup).
    ///
    /// # Errors
    /// [`Error::Home`] when the checkpoint cannot be written.
    pub async fn sync_durable(&self) -> Result<(), Error> {
        self.inner.sync_durable().await
    }
}

impl Inner {
    /// Restores one checkpoint entry: skipped, re-adopted, closed, or (a supervised
    /// one) handed to a task of `pass` that re-attaches its shim.
    async fn restore_entry(self: &Arc<Self>, entry: CheckpointEntry, pass: &mut Pass) {
        let raw_id = entry.session.id.clone();
        let report = &mut pass.report;
        let Some(id) = SessionId::parse(&raw_id) else {
            report.invalid.push(format!(
                "{raw_id}: not a session id; left in the checkpoint"
            ));
            return;
        };
        if !pass.seen.insert(id.clone()) {
            report
                .invalid
                .push(format!("{raw_id}: listed twice; the first entry was used"));
            return;
        }
        // The store's read and the `/proc` reads go to the blocking pool.
        let facts = {
            let receipts = Arc::clone(self.durable.receipts());
            let (probe, probe_id, me) = (entry.clone(), id.clone(), pass.me);
            tokio::task::spawn_blocking(move || Facts::read(&*receipts, &probe, &probe_id, &me))
                .await
                .unwrap_or_else(|_| Facts::read(&**self.durable.receipts(), &entry, &id, &pass.me))
        };
        if facts.other_live_writer {
            report.skipped_live_writer.push(id);
            return;
        }
        if self.table.contains(&id) {
            report.already_tracked.push(id);
            return;
        }
        if let Some(shim) = entry.session.shim {
            if facts.has_receipt {
                // A shim that still lives may hold leftovers: the sweep decides.
                if !matches!(facts.fate, Some(Fate::Running { .. }))
                    && let Ok(dir) = herd_persistence::ShimDir::new(&self.home, id.as_str())
                {
                    let _ = dir.remove();
                }
                pass.to_drop.push(raw_id);
                report.already_finished.push(id);
                return;
            }
            // Every shim is tried at once: a dead one fails fast and never holds
            // up the others.
            let task_inner = Arc::clone(self);
            pass.supervised.spawn(async move {
                let outcome = task_inner.reattach(id.clone(), entry, shim).await;
                (id, raw_id, outcome)
            });
            return;
        }
        let Some(fate) = facts.fate else {
            return;
        };
        if facts.has_receipt {
            pass.to_drop.push(raw_id);
            report.already_finished.push(id);
            return;
        }
        match fate {
            Fate::Running { start_time } => {
                self.adopt(id.clone(), &entry, start_time);
                report.adopted.push(id);
            }
            Fate::Reused => {
                self.close(id.clone(), &entry, "closed at restore: its pid now belongs to another process (the start time differs), which was not signalled; the session's own exit status is unknown", pass);
                pass.to_drop.push(raw_id);
                pass.report.closed_reused.push(id);
            }
            Fate::Gone => {
                self.close(id.clone(), &entry, "closed at restore: its process was gone when herd restarted, and its exit status is unknown", pass);
                pass.to_drop.push(raw_id);
                pass.report.closed_lost.push(id);
            }
        }
    }

    /// A session record for a checkpoint entry, its tail seeded from its log file.
    /// The worker scope a re-adopted session still runs in. The scope is not
    /// checkpointed; its name follows from the id, and the process's own cgroup says
    /// whether it is in it. `systemctl` and the user bus are then looked up from the
    /// daemon's environment, which its children's environment was derived from.
    fn rediscover_scope(&self, id: &SessionId, pid: i32, persist: bool) -> Option<Scope> {
        self.config.dispatcher.as_ref()?;
        let unit = format!("herd-worker-{id}.scope");
        (persist && crate::dispatch::is_in_scope(pid, &unit)).then(|| Scope {
            unit,
            env: crate::spawn::utf8_environment(),
        })
    }

    fn detached_session(
        &self,
        id: SessionId,
        entry: &CheckpointEntry,
        start_time: Option<u64>,
    ) -> Arc<Session> {
        self.session_from_entry(id, entry, start_time, None, None)
    }

    /// A session record for a checkpoint entry. Its tail is seeded from the log file:
    /// from the end, or, for a supervised session, from where `progress` says the log
    /// ended, with the counters the shim reported.
    pub(super) fn session_from_entry(
        &self,
        id: SessionId,
        entry: &CheckpointEntry,
        start_time: Option<u64>,
        shim: Option<herd_persistence::ShimRef>,
        progress: Option<Progress>,
    ) -> Arc<Session> {
        let r = &entry.session;
        // The log path is derived from the id, never taken from the file: a damaged
        // checkpoint must not make herd append to an arbitrary file.
        let log_path = self.home.session_log_path(id.as_str());
        let tail = match &progress {
            Some(progress) => tail_at(&log_path, self.config.buffer_bytes, progress),
            None => {
                let mut tail = Tail::new(self.config.buffer_bytes);
                seed_tail(&mut tail, &log_path, self.config.buffer_bytes);
                tail
            }
        };
        Rebuilt {
            // The command as given, when the store kept it (a restart repeats it);
            // answers show the redacted one.
            command: r.command_given.clone().unwrap_or_else(|| r.command.clone()),
            cwd: r.cwd.clone().unwrap_or_default(),
            pid: r.pid,
            pgid: r.pgid,
            start_time,
            mode: r.mode,
            started_at: r.started_at,
            task_id: r.task_id.clone(),
            owner_task_id: r.owner_task_id.clone(),
            session_key: r.session_key.clone(),
            notify: r.notify,
            log_path,
            tail,
            persist_on_release: r.persist_on_release,
            scope: self.rediscover_scope(&id, r.pid, r.persist_on_release),
            shim,
            completion_chars: match usize::try_from(r.completion_output_chars) {
                Ok(0) | Err(_) => self.config.completion_output_chars,
                Ok(n) => n,
            },
            name: r.name.clone(),
            time_limit: r.options.as_ref().and_then(|o| {
                Some(crate::session::TimeLimit::from_record(
                    o.time_limit_seconds?,
                    o.deadline_unix_ms?,
                ))
            }),
            origin: origin_of_record(r),
            finished: None,
            // A kill the previous daemon began: its source is what the session
            // ends by (the shim carries the kill through its grace window).
            kill_source: entry
                .kill_intent
                .as_ref()
                .and_then(|k| KillSource::from_name(&k.source)),
            containment: if shim.is_some() {
                crate::answers::Containment::Subreaper
            } else {
                crate::answers::Containment::Group
            },
            leftovers: Vec::new(),
            ready_at: entry.ready_at,
            runs: r.runs.unwrap_or(0),
            id,
        }
        .into_session()
    }

    /// Closes a checkpointed session whose process is not ours any more: through the
    /// choke point, as `lost`, without a completion and without any signal. The
    /// session is entered now; its finish joins `pass`'s batch, which the restore
    /// runs in one blocking job after the entries (one hop, not one per session).
    fn close(
        self: &Arc<Self>,
        id: SessionId,
        entry: &CheckpointEntry,
        note: &str,
        pass: &mut Pass,
    ) {
        let s = self.detached_session(id.clone(), entry, entry.session.start_time);
        self.durable.mark_detached(id, note.to_owned());
        self.table.add_running(Arc::clone(&s));
        let finish = Finish {
            exit: Err(io::Error::other(note.to_owned())),
            descendants_alive: Vec::new(),
            killed_by: None,
            leftovers: Vec::new(),
        };
        pass.closing.push((s, finish));
    }

    /// Re-adopts a checkpointed session whose process still runs as recorded.
    fn adopt(self: &Arc<Self>, id: SessionId, entry: &CheckpointEntry, start_time: u64) {
        let s = self.detached_session(id.clone(), entry, Some(start_time));
        let output = match s.mode {
            ModeName::Pipe => reattach_output(s.pid, start_time),
            ModeName::Pty => None,
        };
        let log = output.as_ref().and_then(|_| self.reopen_log(&s.log_path));
        let note = if log.is_some() {
            format!(
                "re-adopted after a herd restart: output before the restart comes from the log file {}; later output is captured again. herd is not this process's parent any more, so its exit status cannot be collected and no completion will be sent when it ends: poll or wait for it",
                s.log_path.display()
            )
        } else {
            format!(
                "re-adopted after a herd restart: output before the restart comes from the log file {}; later output cannot be captured (its terminal or pipe ended with the previous herd). herd is not this process's parent any more, so its exit status cannot be collected and no completion will be sent when it ends: poll or wait for it",
                s.log_path.display()
            )
        };
        self.durable.mark_detached(id.clone(), note);
        let r = &entry.session;
        self.durable.set_extras(
            id.clone(),
            Extras {
                command_redacted: r.command.clone(),
                watch_patterns: r.watch_patterns.clone(),
                heartbeat_seconds: r.heartbeat_seconds,
            },
        );
        self.table.add_running(Arc::clone(&s));
        // Watch patterns keep matching the reattached output (B20 events are wakes
        // while the session runs, not completions). Heartbeats are not re-armed:
        // B21 beats only sessions whose completion can be delivered, and a detached
        // session's never can.
        let plan = NotifyPlan {
            notify: r.notify,
            watch: if log.is_some() {
                r.watch_patterns.clone()
            } else {
                Vec::new()
            },
            heartbeat: None,
            notes: Vec::new(),
        };
        let observer = self.arm_notifications(&s, &plan);
        let observer = self.arm_readiness(&s, observer);
        let observer = self.arm_restarts(&s, observer);
        if let Some(source) = self.resume_kill(&s, entry) {
            // No shim carries this kill: finish it from here.
            let inner = Arc::clone(self);
            let s = Arc::clone(&s);
            drop(self.runtime.spawn(async move {
                inner.kill_session(&s, source).await;
            }));
        }
        let pid = s.pid;
        let exit = self
            .runtime
            .spawn(async move { wait_exit(pid, start_time).await });
        let inner = Arc::clone(self);
        let span = tracing::info_span!("session", id = %id);
        // The reader holds the time limit (its session machine) whether or not the
        // output could be reopened: without it, it only waits for the exit.
        let supervision = self.supervision(&s);
        let (source, log) = match (output, log) {
            (Some(rx), Some(log)) => (Some(Source::Pipe { rx, raised: false }), log),
            // Nothing is read, so nothing is written: the log is never created.
            _ => (None, LogWriter::new(s.log_path.clone(), 0)),
        };
        let task = async move {
            let finish = reader::run(
                Arc::clone(&s),
                source,
                Waiter::Blocking(exit),
                log,
                observer,
                supervision,
            )
            .await;
            inner.finish(&s, finish).await;
        };
        drop(self.runtime.spawn(task.instrument(span)));
        tracing::info!(session_id = %id, pid, "session re-adopted");
    }

    /// A kill the previous daemon began and did not see end (its intent is in the
    /// store): the session's answers say so. Returns the kill's source when no shim
    /// carries it (a re-adopted session): the caller kills it again, through the
    /// identity check.
    pub(super) fn resume_kill(&self, s: &Session, entry: &CheckpointEntry) -> Option<KillSource> {
        let intent = entry.kill_intent.as_ref()?;
        let source = s.state().kill_source?;
        let when = crate::text::rfc3339(from_unix_seconds(intent.requested_at));
        let by = if s.shim.is_some() {
            "its supervisor carries it through"
        } else {
            "this daemon carries it through"
        };
        self.durable.mark_note(
            s.id.clone(),
            format!(
                "a kill ({}, asked at {when}) was in progress when the previous herd daemon stopped; {by}",
                source.as_str()
            ),
        );
        s.shim.is_none().then_some(source)
    }

    /// Opens a re-adopted session's log for appending, its cap reduced by what it
    /// holds already.
    fn reopen_log(&self, path: &Path) -> Option<LogWriter> {
        let warn = |error: &dyn std::fmt::Display| {
            tracing::warn!(path = %path.display(), %error, "log of a re-adopted session cannot be reopened; its later output is not captured");
        };
        match OpenOptions::new()
            .append(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(path)
        {
            Ok(file) => {
                let held = file.metadata().map_or(0, |m| m.len());
                let cap = self.config.log_cap_bytes.saturating_sub(held);
                Some(LogWriter::with_file(path.to_path_buf(), file, cap))
            }
            // A session that never printed has no log yet: like a new session's, it
            // is created with the first byte (a restore of many silent sessions
            // creates no files).
            Err(error) if error.kind() == io::ErrorKind::NotFound => {
                match self.home.ensure_dir(&self.home.session_logs_dir()) {
                    Ok(_) => Some(LogWriter::new(
                        path.to_path_buf(),
                        self.config.log_cap_bytes,
                    )),
                    Err(error) => {
                        warn(&error);
                        None
                    }
                }
            }
            Err(error) => {
                warn(&error);
                None
            }
        }
    }
}

/// Waits for a process that is not our child to end, and reports that its exit
/// status cannot be collected (it is always an `Err`).
async fn wait_exit(pid: i32, start_time: u64) -> io::Result<std::process::ExitStatus> {
    wait_gone(pid, start_time).await;
    Err(io::Error::other(
        "the process ended after herd re-adopted it; herd is not its parent, so its exit status cannot be collected",
    ))
}

/// Opens the read side of a re-adopted pipe session's output pipe, through
/// `/proc/<pid>/fd/1`, when its stdout and stderr are still one pipe (as spawn set
/// them up) and the pid still has `start_time` after the open.
fn reattach_output(pid: i32, start_time: u64) -> Option<pipe::Receiver> {
    let out = sys::procfs::fd_target(pid, 1)?;
    let err = sys::procfs::fd_target(pid, 2)?;
    if out != err || !out.to_str().is_some_and(|n| n.starts_with("pipe:[")) {
        return None;
    }
    let file = sys::procfs::open_fd_for_reading(pid, 1).ok()?;
    // Verify after opening: the pipe we opened belonged to the process we adopted.
    if sys::start_time(pid) != Some(start_time) {
        return None;
    }
    match pipe::Receiver::from_file(file) {
        Ok(rx) => Some(rx),
        Err(error) => {
            tracing::debug!(pid, %error, "output pipe of a re-adopted session not reopened");
            None
        }
    }
}

/// One restore's progress: the report so far, the supervised sessions being
/// re-attached, and the checkpoint entries to drop at the end.
struct Pass {
    report: RestoreReport,
    /// This process, as checkpoint writer.
    me: Writer,
    supervised: tokio::task::JoinSet<(SessionId, String, Reattached)>,
    seen: HashSet<SessionId>,
    to_drop: Vec<String>,
    /// Closed sessions entered and not yet through the choke point.
    closing: Vec<(Arc<Session>, Finish)>,
}

impl Pass {
    /// Records how a supervised session's re-attachment went.
    fn reattached(&mut self, id: SessionId, raw_id: String, outcome: Reattached) {
        match outcome {
            Reattached::Attached => self.report.reattached.push(id),
            Reattached::RecordsOnly => self.report.records_only.push(id),
            Reattached::Finished => {
                self.to_drop.push(raw_id);
                self.report.finished_while_away.push(id);
            }
            Reattached::SupervisorDied => {
                self.to_drop.push(raw_id);
                self.report.supervisor_died.push(id);
            }
        }
    }
}

impl RestoreReport {
    /// Logs the counts of one restore.
    fn log(&self) {
        tracing::info!(
            n_adopted = self.adopted.len(),
            n_reattached = self.reattached.len(),
            n_finished_while_away = self.finished_while_away.len(),
            n_supervisor_died = self.supervisor_died.len(),
            n_records_only = self.records_only.len(),
            n_closed_lost = self.closed_lost.len(),
            n_closed_reused = self.closed_reused.len(),
            n_already_finished = self.already_finished.len(),
            n_skipped_live_writer = self.skipped_live_writer.len(),
            "sessions restored from the checkpoint"
        );
    }
}

#[cfg(test)]
mod tests;

/// What a restart repeats of a checkpointed session. A checkpoint written before
/// the options were kept gives what its record says (a PTY at the default size).
fn origin_of_record(r: &herd_persistence::SessionRecord) -> crate::session::Origin {
    let options = r.options.clone().unwrap_or_default();
    crate::session::Origin {
        notify: if r.options.is_some() {
            options.notify
        } else {
            r.notify
        },
        watch: r.watch_patterns.clone(),
        heartbeat_seconds: (r.heartbeat_seconds > 0).then_some(r.heartbeat_seconds),
        completion_output_chars: usize::try_from(r.completion_output_chars)
            .ok()
            .filter(|n| *n > 0),
        forward_env: options.forward_env,
        env_names: options.env_names,
        pty: options.pty.or(match r.mode {
            herd_persistence::Mode::Pty => Some((30, 120)),
            herd_persistence::Mode::Pipe => None,
        }),
        // With the command as given kept, the session's command is what ran.
        command_redacted: options.command_redacted && r.command_given.is_none(),
        replaces: options
            .replaces
            .as_deref()
            .and_then(crate::SessionId::parse),
        kill_leftovers: options.kill_leftovers,
        limits: crate::Limits {
            memory_bytes: options.memory_bytes,
            cpu_millis: options.cpu_millis,
            pids: options.pids,
        },
        ready: options.ready,
        ready_port: options.ready_port,
        restart: options.restart.map(crate::RestartPolicy::from_record),
    }
}
