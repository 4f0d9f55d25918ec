//! Supervised sessions: jobs that run under a shim process of their own (see
//! `crate::shim`), started, followed and, after a restart, re-attached here.
//!
//! A supervised session is an ordinary session: the same table entry, tail, choke
//! point, completion and receipt. Only who holds the job differs: its shim, which the
//! registry reaches through the session's [`Link`] and follows by its log file.
//!
//! What survives what:
//! - a crash or a detach of this registry: the shim and its job run on; restore
//!   re-attaches (output written meanwhile is in the log; a job that ended meanwhile
//!   left its exit record and gets exactly one completion with its real exit code);
//! - the death of a shim: the follower notices at once (its socket closes without an
//!   exit record); what the shim left of the job is killed (the whole tree, tagged
//!   escapees included) and the session finishes as `lost`, saying that its
//!   supervisor died;
//! - a shim of a protocol this registry does not attach to: it is followed through
//!   its records only (exit record, tree kill) and never killed for its version.

use std::io;
use std::sync::Arc;
use std::time::Duration;

use herd_persistence::{CheckpointEntry, ShimDir, ShimRef};

use super::Inner;
use super::notify::NotifyPlan;
use crate::id::SessionId;
use crate::kill;
use crate::reader::{Finish, Observer};
use crate::session::{Session, Stdin};
use crate::shim::link::{self, AttachError, Attached, Cursor, Followed};
use crate::shim::wire::Progress;

/// How soon restore tries again to reach a live supervisor it could not reach at
/// first ([`Inner::follow_until_attached`]); the pause doubles after each try, up
/// to [`LATE_ATTACH_RETRY_MOST`] (a supervisor stopped for hours costs a connect
/// every few seconds, not four a second).
const LATE_ATTACH_RETRY: Duration = Duration::from_millis(250);
/// See [`LATE_ATTACH_RETRY`].
const LATE_ATTACH_RETRY_MOST: Duration = Duration::from_secs(4);

/// What restore did with one supervised checkpoint entry.
#[derive(Debug)]
pub(super) enum Reattached {
    /// Attached to its live shim: an ordinary session again.
    Attached,
    /// The job ended while no registry ran; finished with its exit record.
    Finished,
    /// The shim speaks another protocol; followed by its records only.
    RecordsOnly,
    /// The shim died; what was left was killed and the session closed as lost.
    SupervisorDied,
}

impl Inner {
    /// Runs the follower of a supervised session on the runtime.
    #[expect(
        clippy::too_many_arguments,
        reason = "the parts of one started session"
    )]
    pub(super) fn follow_shim(
        self: &Arc<Self>,
        s: Arc<Session>,
        attached: Attached,
        cursor: Cursor,
        observer: Option<Box<dyn Observer>>,
        dir: ShimDir,
        shim_pid: i32,
        span: tracing::Span,
    ) {
        use tracing::Instrument;
        let inner = Arc::clone(self);
        let detach = self.detach.clone();
        let task = async move {
            let Attached { link, incoming, .. } = attached;
            let followed = link::follow(
                Arc::clone(&s),
                incoming,
                link,
                cursor,
                observer,
                dir,
                shim_pid,
                detach,
            )
            .await;
            inner.settle(&s, followed).await;
        };
        drop(self.runtime.spawn(task.instrument(span)));
    }

    /// Ends a followed session the way its follower ended.
    async fn settle(self: &Arc<Self>, s: &Arc<Session>, followed: Followed) {
        match followed {
            Followed::Finished(finish) => self.finish(s, finish).await,
            Followed::Detached => {
                tracing::debug!(session_id = %s.id, "detached from a supervised session")
            }
            Followed::SupervisorDied(why) => self.supervisor_died(s, &why).await,
        }
    }

    /// The shim died without an exit record: kill what it left, close as lost.
    async fn supervisor_died(self: &Arc<Self>, s: &Arc<Session>, why: &str) {
        tracing::warn!(session_id = %s.id, reason = why, "session supervisor died; killing what it left");
        let target = kill::KillTarget {
            pid: s.pid,
            pgid: s.pgid,
            start_time: s.start_time,
            session_tag: s.id.as_str().to_owned(),
        };
        let mut outcome = kill::kill_tree(&target, self.config.kill_grace).await;
        if let Ok(dir) = self.shims.dir(s.id.as_str()) {
            // The cgroup holds what the walk could not find.
            outcome
                .survivors
                .extend(super::held::reclaim_cgroup(&dir).await);
        }
        let note = format!(
            "lost: {why}; its exit status is unknown and herd killed what was left of its process tree"
        );
        self.durable.mark_note(s.id.clone(), note.clone());
        self.finish(
            s,
            Finish {
                exit: Err(io::Error::other(note)),
                descendants_alive: outcome.survivors,
                killed_by: None,
                leftovers: Vec::new(),
            },
        )
        .await;
    }

    /// Restores one supervised checkpoint entry: re-attaches to its shim, or takes
    /// the exit record it left, or closes it when the shim died.
    pub(super) async fn reattach(
        self: &Arc<Self>,
        id: SessionId,
        entry: CheckpointEntry,
        shim: ShimRef,
    ) -> Reattached {
        let Ok(dir) = self.shims.dir(id.as_str()) else {
            return self
                .restore_died(
                    id,
                    &entry,
                    shim,
                    "its supervisor's directory name is invalid",
                )
                .await;
        };
        if let Ok(Some(record)) = dir.read_exit() {
            let s = self.restored_session(id, &entry, shim, None, Some(link::progress_of(&record)));
            self.finish(&s, link::finish_of(record)).await;
            return Reattached::Finished;
        }
        match link::attach_live(&dir, || shim_may_live(shim)).await {
            Ok(attached) => {
                let s = self.restored_session(
                    id,
                    &entry,
                    shim,
                    Some(super::stdin::shim_stdin(&attached.link)),
                    Some(attached.hello.progress),
                );
                self.follow_restored(s, &entry, attached, dir, shim);
                Reattached::Attached
            }
            Err(error @ AttachError::Version { .. }) => {
                let s = self.restored_session(id.clone(), &entry, shim, None, None);
                self.not_attached(&id, &error);
                self.follow_records(s, dir, shim);
                Reattached::RecordsOnly
            }
            Err(AttachError::Unreachable(error)) => {
                // The shim may have written its record and exited just now.
                if let Ok(Some(record)) = dir.read_exit() {
                    let s = self.restored_session(
                        id,
                        &entry,
                        shim,
                        None,
                        Some(link::progress_of(&record)),
                    );
                    self.finish(&s, link::finish_of(record)).await;
                    return Reattached::Finished;
                }
                tracing::debug!(session_id = %id, %error, "supervisor unreachable at restore");
                if shim_alive(shim) {
                    // A shim that has ended its job but could not write its exit record
                    // yet (a full disk) lives on, trying: wait for the record rather
                    // than call the job lost.
                    tracing::info!(session_id = %id, shim_pid = shim.pid, "supervisor alive but not reachable yet; attaching when it binds its socket, else waiting for its exit record");
                    let s = self.restored_session(id, &entry, shim, None, None);
                    self.follow_until_attached(s, entry, dir, shim);
                    return Reattached::Attached;
                }
                self.restore_died(
                    id,
                    &entry,
                    shim,
                    &format!(
                        "its supervisor (herd-shim, pid {}) died while no herd daemon ran",
                        shim.pid
                    ),
                )
                .await
            }
        }
    }

    async fn restore_died(
        self: &Arc<Self>,
        id: SessionId,
        entry: &CheckpointEntry,
        shim: ShimRef,
        why: &str,
    ) -> Reattached {
        let s = self.restored_session(id, entry, shim, None, None);
        self.supervisor_died(&s, why).await;
        Reattached::SupervisorDied
    }

    /// A session record for a supervised checkpoint entry, in the running table, its
    /// tail seeded from the log as far as `progress` says.
    fn restored_session(
        &self,
        id: SessionId,
        entry: &CheckpointEntry,
        shim: ShimRef,
        stdin: Option<Stdin>,
        progress: Option<Progress>,
    ) -> Arc<Session> {
        let s = self.session_from_entry(
            id.clone(),
            entry,
            entry.session.start_time,
            Some(shim),
            progress,
        );
        let containment = self
            .shims
            .dir(id.as_str())
            .map_or(crate::answers::Containment::Subreaper, |dir| {
                super::shims::containment_of(&dir)
            });
        {
            let mut st = s.state();
            st.stdin = stdin;
            st.containment = containment;
        }
        let r = &entry.session;
        self.durable.set_extras(
            id.clone(),
            super::durable::Extras {
                command_redacted: r.command.clone(),
                watch_patterns: r.watch_patterns.clone(),
                heartbeat_seconds: r.heartbeat_seconds,
            },
        );
        self.table.add_running(Arc::clone(&s));
        // A shim carries its kill itself: only the note is wanted.
        let _ = self.resume_kill(&s, entry);
        s
    }

    /// How session `s` ended by the exit record its supervisor wrote: its tail seeded
    /// from the log as far as the record says.
    fn finished_by(&self, s: &Session, record: herd_persistence::ExitRecord) -> Followed {
        super::reclaim::reseed_tail(s, self.config.buffer_bytes, &link::progress_of(&record));
        Followed::Finished(link::finish_of(record))
    }

    /// Notes that session `id`'s supervisor speaks a protocol this daemon does not
    /// attach to (it is followed by its records).
    fn not_attached(&self, id: &SessionId, error: &AttachError) {
        tracing::warn!(session_id = %id, %error, "supervised session not attached");
        self.durable.mark_note(id.clone(), format!("{error}"));
    }

    /// Follows a restored session `s` on the connection `attached` to its live
    /// supervisor: its notifications armed again from its checkpoint `entry`.
    fn follow_restored(
        self: &Arc<Self>,
        s: Arc<Session>,
        entry: &CheckpointEntry,
        attached: Attached,
        dir: ShimDir,
        shim: ShimRef,
    ) {
        let progress = attached.hello.progress;
        let attached_pid = attached.hello.pid;
        let r = &entry.session;
        let plan = NotifyPlan {
            notify: r.notify,
            watch: r.watch_patterns.clone(),
            heartbeat: (r.heartbeat_seconds > 0).then(|| Duration::from_secs(r.heartbeat_seconds)),
            notes: Vec::new(),
        };
        let observer = self.arm_notifications(&s, &plan);
        let observer = self.arm_readiness(&s, observer);
        let observer = self.arm_restarts(&s, observer);
        let cursor = Cursor {
            log_bytes: progress.log_bytes,
            progress,
        };
        let id = s.id.clone();
        let span = tracing::info_span!("session", id = %id);
        self.follow_shim(s, attached, cursor, observer, dir, shim.pid, span);
        tracing::info!(session_id = %id, pid = attached_pid, shim_pid = shim.pid, "supervised session re-attached");
    }

    /// Follows a restored session whose supervisor lives but could not be reached
    /// at restore (it had not bound its socket within the wait: thousands binding
    /// at once, or a stopped one): its socket is tried again while it lives, after
    /// [`LATE_ATTACH_RETRY`] and then pauses twice as long each time up to
    /// [`LATE_ATTACH_RETRY_MOST`], and once reached the session is
    /// followed as any re-attached one (input, kill, live output, notifications).
    /// A job that ends first is settled by its exit record at once; a supervisor
    /// that dies first, or turns out to speak another protocol, is followed by its
    /// records ([`Inner::follow_records`]). Input meanwhile is refused saying so
    /// (`State::reaching`), and a kill asked meanwhile makes it try at once.
    fn follow_until_attached(
        self: &Arc<Self>,
        s: Arc<Session>,
        entry: CheckpointEntry,
        dir: ShimDir,
        shim: ShimRef,
    ) {
        s.state().reaching = true;
        let inner = Arc::clone(self);
        let detach = self.detach.clone();
        let task = async move {
            let mut kill_rx = s.kill_requested.subscribe();
            let mut pause = LATE_ATTACH_RETRY;
            loop {
                let wait = async {
                    match shim.start_time {
                        Some(start) => super::reclaim::wait_gone(shim.pid, start).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = detach.cancelled() => return,
                    gone = tokio::time::timeout(pause, wait) => if gone.is_ok() {
                        break;
                    },
                    // A kill asked meanwhile: try at once (the supervisor carries it
                    // once reached; `shim_kill` goes on without it if not).
                    Ok(()) = kill_rx.changed() => {}
                }
                pause = (pause * 2).min(LATE_ATTACH_RETRY_MOST);
                match dir.read_exit() {
                    Ok(None) if shim_may_live(shim) => {}
                    // The job ended: its record settles it, even while its
                    // supervisor lingers (holding leftovers), as at restore.
                    Ok(Some(record)) => {
                        s.state().reaching = false;
                        let finished = inner.finished_by(&s, record);
                        inner.settle(&s, finished).await;
                        return;
                    }
                    _ => break,
                }
                match link::attach(&dir).await {
                    Ok(attached) => {
                        super::reclaim::reseed_tail(
                            &s,
                            inner.config.buffer_bytes,
                            &attached.hello.progress,
                        );
                        super::stdin::attach_late(&s, &attached.link);
                        inner.follow_restored(s, &entry, attached, dir, shim);
                        return;
                    }
                    Err(error @ AttachError::Version { .. }) => {
                        inner.not_attached(&s.id, &error);
                        break;
                    }
                    Err(AttachError::Unreachable(error)) => {
                        tracing::debug!(session_id = %s.id, %error, "supervisor not reachable yet");
                    }
                }
            }
            s.state().reaching = false;
            inner.follow_records(s, dir, shim);
        };
        drop(self.runtime.spawn(task));
    }

    /// Follows a supervisor by its records (one of another protocol, or one that
    /// could not be reached and ended): waits for the shim process to end, then
    /// takes its exit record (or reports it died).
    fn follow_records(self: &Arc<Self>, s: Arc<Session>, dir: ShimDir, shim: ShimRef) {
        let inner = Arc::clone(self);
        let task = async move {
            if let Some(start) = shim.start_time {
                super::reclaim::wait_gone(shim.pid, start).await;
            }
            let followed = match dir.read_exit() {
                Ok(Some(record)) => inner.finished_by(&s, record),
                _ => Followed::SupervisorDied(format!(
                    "its supervisor (herd-shim, pid {}) ended without an exit record",
                    shim.pid
                )),
            };
            inner.settle(&s, followed).await;
        };
        drop(self.runtime.spawn(task));
    }
}

/// Whether the shim `shim` names may still run, for a bounded wait on its socket:
/// its pid lives, with the recorded start time when one was recorded.
fn shim_may_live(shim: ShimRef) -> bool {
    crate::sys::proc_info(shim.pid)
        .is_some_and(|p| p.is_alive() && shim.start_time.is_none_or(|t| t == p.start_time))
}

/// Whether the shim `shim` names still runs (its pid with its start time).
fn shim_alive(shim: ShimRef) -> bool {
    let Some(start) = shim.start_time else {
        return false;
    };
    crate::sys::proc_info(shim.pid).is_some_and(|p| p.start_time == start && p.is_alive())
}

impl Inner {
    /// Removes shim directories no session of this registry owns: leftovers of
    /// sessions whose receipt is written, and shims of spawns that never answered
    /// (their job is killed: nobody was told it runs). A finished session whose
    /// shim still holds leftovers is put back in the table instead (`lingering`).
    pub(super) async fn sweep_orphan_shims(self: &Arc<Self>) {
        for raw in self.shims.session_ids() {
            let Some(id) = SessionId::parse(&raw) else {
                continue;
            };
            if self.table.contains(&id) {
                continue;
            }
            let Ok(dir) = self.shims.dir(&raw) else {
                continue;
            };
            // A finished session whose shim still holds leftovers is held again.
            if self.hold_lingering(&id, &dir) {
                continue;
            }
            if matches!(dir.read_exit(), Ok(None))
                && let Ok(Some(info)) = dir.read_info()
                && link::attach_live(&dir, || {
                    shim_may_live(ShimRef {
                        pid: info.shim_pid,
                        start_time: info.shim_start_time,
                        protocol: info.protocol,
                    })
                })
                .await
                .is_ok()
            {
                self.shims.stop_orphan(&raw, &info).await;
            }
            if let Err(error) = dir.remove() {
                tracing::warn!(session_id = %raw, %error, "leftover supervisor directory not removed");
            }
        }
    }
}
