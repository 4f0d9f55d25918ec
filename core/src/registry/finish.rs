//! The finish choke point: the only place a session moves from running to
//! finished. Where it may block (a completion hook, the ledger's fsync) it runs
//! off the runtime's async work, a few at once ([`FINISHES_AT_ONCE`]): on its
//! caller's worker thread with that worker's other tasks handed on meanwhile
//! (`in_place`), or on the blocking pool, so neither holds the runtime's other
//! tasks up; with neither to do it runs where it is called as plain code. Its
//! callers await it. Drafts the completion (hooks, ledger commit) before the table lock, then inside one
//! critical section removes the session from the running set, stamps it, queues
//! and broadcasts its completion; after the lock, hands it to durability and wakes
//! the waiters.

use std::sync::Arc;
use std::time::SystemTime;

use herd_hooks::{Route, Shown, Window};

use super::{Inner, in_place};
use crate::answers::CompletionReason;
use crate::config::KillSource;
use crate::event::Event;
use crate::id::SessionId;
use crate::reader::Finish;
use crate::session::{ExitInfo, Finished, Session, State};
use crate::text;

impl Inner {
    /// The one choke point: [`Inner::finish_blocking`] off the runtime's async
    /// work ([`FinishGate::off_runtime`]), awaited, so completion hooks (up to their
    /// time limit each) and the ledger's fsync never hold the runtime's other tasks
    /// up; in place when it has neither to do
    /// ([`Inner::finishes_in_place`]). Returns once the completion is committed,
    /// published and the waiters woken: whoever awaits this (a reader task, a kill,
    /// a restore) sees the session finished. A caller dropped meanwhile does not
    /// cancel it (a blocking task runs to its end; in place there is no await to
    /// stop at), so no completion is half published.
    pub(super) async fn finish(self: &Arc<Self>, s: &Arc<Session>, finish: Finish) {
        if self.finishes_in_place(s) {
            self.finish_blocking(s, finish);
            return;
        }
        let (inner, session) = (Arc::clone(self), Arc::clone(s));
        self.finishing
            .off_runtime(&s.id, move || inner.finish_blocking(&session, finish))
            .await;
    }

    /// Whether `s`'s choke point has nothing on it that may block, so it runs where
    /// it is called: no hook runs on the completion route (the redactor alone,
    /// CPU work on a window of the tail, as every answer's) and no completion is
    /// committed to the ledger (the session does not notify, or a restore closes
    /// it and it publishes nothing). The handing over to the blocking pool is the
    /// one thread hop between an exit and its completion that this saves: the
    /// receipt's write and the queue's row are on the blocking pool anyway.
    ///
    /// Notify turned on in the instant between this and the table lock is the
    /// choke point's rare path (the completion committed under the lock) taken in
    /// place.
    fn finishes_in_place(&self, s: &Session) -> bool {
        let commits = s.is_notify() && self.durable.emits_completion(s);
        !(self.hooks.runs_hooks() || commits)
    }

    /// Several choke points off the runtime in one blocking job, in order, as
    /// [`Inner::finish`] each (a restore's closed sessions: one hop, not one each).
    pub(super) async fn finish_all(self: &Arc<Self>, finishing: Vec<(Arc<Session>, Finish)>) {
        let Some((first, _)) = finishing.first() else {
            return;
        };
        let (inner, id) = (Arc::clone(self), first.id.clone());
        self.finishing
            .off_runtime(&id, move || {
                for (session, finish) in finishing {
                    inner.finish_blocking(&session, finish);
                }
            })
            .await;
    }

    /// [`Inner::finish_unstarted`] off the runtime, as [`Inner::finish`].
    pub(super) async fn finish_unstarted_off_runtime(
        self: &Arc<Self>,
        s: &Arc<Session>,
        source: Option<KillSource>,
    ) {
        let (inner, session) = (Arc::clone(self), Arc::clone(s));
        self.finishing
            .off_runtime(&s.id, move || inner.finish_unstarted(&session, source))
            .await;
    }

    /// The one choke point: stamps, releases handles and publishes exactly one
    /// completion, all inside one critical section of the table lock. May block
    /// (the hooks, an fsync): called off the runtime's async work by
    /// [`Inner::finish`], unless it has neither to do.
    ///
    /// Everything slow or foreign happens before the table lock: the hooks on the
    /// completion's output, and the ledger commit (an fsync). The event is drafted
    /// from the session as it is now; under the lock it is built again (cheap), and
    /// only if a kill, an adoption or a handoff changed it meanwhile is it committed
    /// there, the rare slow path.
    pub(super) fn finish_blocking(self: &Arc<Self>, s: &Arc<Session>, finish: Finish) {
        let draft = self.draft(s, finish);
        // A session restore re-adopted or closed has no collected exit status and
        // publishes nothing (B28).
        let emits = self.durable.emits_completion(s);
        let queued = |event: &Event| emits && s.is_notify() && self.outbox.allows(event);
        let early = draft.event(s, &s.state());
        // Committed before it is published (B29). A supervised session that a
        // restore finishes again (the previous daemon crashed after delivering it
        // but before its receipt was stored) is not queued a second time.
        let early_commit = queued(&early).then(|| self.commit_completion(&early));
        let pending = |id: &SessionId| self.durable.receipt_pending(id);
        let concluded = self.table.conclude(s, &self.retention, pending, |queues| {
            self.notifier.forget(&s.id);
            let event = draft.stamp(s);
            if queued(&event) {
                let commit = match early_commit {
                    Some(committed) if same_completion(&early, &event) => committed,
                    Some(_) => {
                        tracing::debug!(session_id = %s.id, "the completion changed while it was drafted; replaced under the lock");
                        self.recommit_completion(&event)
                    }
                    None => {
                        tracing::debug!(session_id = %s.id, "the completion became queued while it was drafted; committed under the lock");
                        self.commit_completion(&event)
                    }
                };
                if commit {
                    queues.enqueue(event.owner_task_id().unwrap_or_default(), event.clone());
                }
            } else if early_commit == Some(true) {
                // Committed early but not queued after all (the policy or notify
                // changed): marked delivered, so a restart does not replay it to nobody.
                self.mark_delivered(std::slice::from_ref(&early));
            }
            if emits {
                self.outbox.broadcast(event);
            }
            self.durable.expect_receipt(&s.id);
        });
        if concluded.is_none() {
            return;
        }
        // The receipt is queued before anyone can see the session done, so a
        // `sync_durable` (shutdown's included) after a `wait` always covers it.
        self.finished_durably(s);
        self.arm_recommits();
        s.done.send_replace(true);
        self.finishes.send_modify(|n| *n += 1);
        self.changed();
        self.queue_finished(&s.id);
        tracing::info!(session_id = %s.id, "session finished");
    }

    /// The choke point of a queued job that never ran: no process, so no
    /// exit; killed by `source`, else `failed_start`. Its tail holds why. Stamps it,
    /// enters it among the finished, publishes its one completion and queues its
    /// receipt, as [`Inner::finish_blocking`] does. Blocking.
    pub(super) fn finish_unstarted(self: &Arc<Self>, s: &Arc<Session>, source: Option<KillSource>) {
        s.state().kill_source = source;
        let no_exit = Finish {
            exit: Ok(ExitInfo {
                code: None,
                signal: None,
            }),
            descendants_alive: Vec::new(),
            killed_by: None,
            leftovers: Vec::new(),
        };
        let mut draft = self.draft(s, no_exit);
        draft.exit = None;
        draft.never_started = true;
        let early = draft.event(s, &s.state());
        let queued = s.is_notify() && self.outbox.allows(&early);
        let committed = queued && self.commit_completion(&early);
        let pending = |id: &SessionId| self.durable.receipt_pending(id);
        self.table
            .conclude_unstarted(s, &self.retention, pending, |queues| {
                let event = draft.stamp(s);
                if committed {
                    queues.enqueue(event.owner_task_id().unwrap_or_default(), event.clone());
                }
                self.outbox.broadcast(event);
                self.durable.expect_receipt(&s.id);
            });
        self.finished_durably(s);
        s.done.send_replace(true);
        self.finishes.send_modify(|n| *n += 1);
        self.changed();
    }

    /// The completion's parts that do not change under the lock: the exit the
    /// reader collected, the output through the completion route, the command.
    fn draft(&self, s: &Session, finish: Finish) -> Draft {
        let Finish {
            exit,
            descendants_alive,
            killed_by,
            leftovers,
        } = finish;
        if let Some(source) = killed_by {
            // The shim killed the job itself (its time limit); a kill the registry
            // began meanwhile keeps its own source.
            s.state().kill_source.get_or_insert(source);
        }
        let exit = match exit {
            Ok(info) => Some(info),
            Err(error) => {
                // B14: the status may be known already; only a truly unknown status
                // reads "lost".
                let known = s.state().exit;
                if known.is_none() {
                    tracing::warn!(%error, "exit status could not be collected");
                }
                known
            }
        };
        let (final_text, final_cut, final_from) = s.text_final();
        let key_open = s.key_open_at(&final_text, final_cut, final_from);
        let window = Window::last_chars(&final_text, s.completion_chars).after_open_key(key_open);
        let output_cut = final_cut || window.omits_start();
        let output = {
            let (owner, exit_known) = {
                let st = s.state();
                (st.owner_task_id.clone(), exit.or(st.exit))
            };
            // The hooks see the return code the completion will carry.
            self.show_as(s, &owner, exit_known, Route::Completion, window)
        };
        let leftovers = leftovers
            .into_iter()
            .map(|l| herd_persistence::Leftover {
                pid: l.pid,
                command: self.hooks.show_command(&l.command).to_string(),
            })
            .collect();
        Draft {
            never_started: false,
            exit,
            descendants_alive,
            leftovers,
            bytes_not_kept: s.tail().bytes_not_kept(),
            output,
            output_cut,
            command: self.shown_command(s),
            now: SystemTime::now(),
        }
    }
}

/// How many finish choke points run off the runtime's async work at once. They
/// take the table lock (and a notified one the ledger's) in turn anyway; unbounded,
/// a mass shutdown of thousands of jobs had a blocking thread started for nearly
/// each (hundreds of threads, their stacks and allocator arenas in the daemon's RSS;
/// a job run in place hands its worker's tasks to a pool thread as well).
pub(super) const FINISHES_AT_ONCE: usize = 8;

/// Runs the finish choke points off the runtime's async work, at most a fixed
/// number at once; the others wait their turn on the runtime (a task, not a thread).
#[derive(Debug)]
pub(super) struct FinishGate {
    turns: Arc<tokio::sync::Semaphore>,
}

impl FinishGate {
    pub(super) fn new(at_once: usize) -> FinishGate {
        FinishGate {
            turns: Arc::new(tokio::sync::Semaphore::new(at_once.max(1))),
        }
    }

    /// Runs `job` (a choke point) off the runtime's async work once a turn is free
    /// and waits for it; a panic in it is the caller's panic, as it was when the
    /// choke point ran in place. A free turn is taken at once and the job run by
    /// the caller's own worker thread, its other tasks handed on meanwhile (no hop:
    /// the finish's latency; see `in_place`); only when every turn is taken is the
    /// turn waited for by a task of its own, which hands the job to the blocking pool.
    /// Either way a caller dropped meanwhile cancels neither the wait nor the job
    /// (a blocking task runs to its end; the turn goes with the job), so no session
    /// is left unfinished and no completion half published.
    pub(super) async fn off_runtime(&self, id: &SessionId, job: impl FnOnce() + Send + 'static) {
        let ran = match Arc::clone(&self.turns).try_acquire_owned() {
            // In place where the runtime allows it: the finish's publication waits
            // on this job, and a hop to the pool and back is two wake-ups.
            Ok(turn) => {
                in_place::run(move || {
                    let _turn = turn;
                    job();
                })
                .await
            }
            Err(_) => {
                let turns = Arc::clone(&self.turns);
                tokio::spawn(async move {
                    // Never closed: the semaphore lives as long as this task holds it.
                    let turn = turns.acquire_owned().await;
                    tokio::task::spawn_blocking(move || {
                        let _turn = turn;
                        job();
                    })
                    .await
                })
                .await
                .and_then(|ran| ran)
                .map_err(in_place::Unfinished::from)
            }
        };
        let error = match ran {
            Ok(()) => return,
            Err(in_place::Unfinished::Panicked(payload)) => std::panic::resume_unwind(payload),
            Err(in_place::Unfinished::Cancelled(error)) => error,
        };
        tracing::warn!(session_id = %id, %error, "session not finished: the runtime is shutting down");
    }
}

/// Whether two drafts of one completion would be recorded alike: the fields a
/// kill, an adoption or a handoff can change between the draft and the lock.
fn same_completion(a: &Event, b: &Event) -> bool {
    match (a, b) {
        (
            Event::Completion {
                owner_task_id: o1,
                completion_reason: r1,
                termination_source: s1,
                exit_code: e1,
                signal: g1,
                handoff_note: h1,
                ..
            },
            Event::Completion {
                owner_task_id: o2,
                completion_reason: r2,
                termination_source: s2,
                exit_code: e2,
                signal: g2,
                handoff_note: h2,
                ..
            },
        ) => o1 == o2 && r1 == r2 && s1 == s2 && e1 == e2 && g1 == g2 && h1 == h2,
        _ => false,
    }
}

/// A completion drafted before the table lock.
struct Draft {
    /// A queued job that never ran: `failed_start` unless killed.
    never_started: bool,
    exit: Option<ExitInfo>,
    descendants_alive: Vec<i32>,
    /// Leftovers, their commands as they leave herd (masked).
    leftovers: Vec<herd_persistence::Leftover>,
    bytes_not_kept: u64,
    output: Shown,
    output_cut: bool,
    command: Shown,
    now: SystemTime,
}

impl Draft {
    /// How the session ended, as `st` says now.
    fn outcome(&self, st: &State) -> (CompletionReason, Option<KillSource>) {
        match (st.kill_source, self.exit.or(st.exit)) {
            (Some(source), _) => (CompletionReason::Killed, Some(source)),
            (None, _) if self.never_started => (CompletionReason::FailedStart, None),
            (None, None) => (CompletionReason::Lost, None),
            (None, Some(e)) if e.signal.is_some() => (CompletionReason::Signaled, None),
            (None, Some(_)) => (CompletionReason::Exited, None),
        }
    }

    /// The completion event of `s` as `st` says now.
    fn event(&self, s: &Session, st: &State) -> Event {
        let (reason, source) = self.outcome(st);
        let exit = self.exit.or(st.exit);
        Event::Completion {
            session_id: s.id.clone(),
            task_id: st.task_id.clone(),
            owner_task_id: st.owner_task_id.clone(),
            session_key: st.session_key.clone(),
            command: self.command.clone(),
            exit_code: exit.and_then(|e| e.code),
            signal: exit.and_then(|e| e.signal),
            completion_reason: reason,
            termination_source: source,
            output: self.output.clone(),
            output_cut: self.output_cut,
            log_path: s.log_path.clone(),
            started_at: text::rfc3339(s.started_at),
            finished_at: text::rfc3339(self.now),
            handoff_note: st.handoff_note.clone(),
            descendants_alive: self.descendants_alive.clone(),
            leftovers: self.leftovers.clone(),
            bytes_not_kept: self.bytes_not_kept,
            runs: (st.runs > 0).then_some(st.runs),
        }
    }

    /// Stamps `s` finished (releasing its stdin) and returns its completion, under
    /// the table lock.
    fn stamp(&self, s: &Session) -> Event {
        let mut st = s.state();
        let event = self.event(s, &st);
        let (reason, source) = self.outcome(&st);
        st.exit = self.exit.or(st.exit);
        st.finished = Some(Finished {
            at: self.now,
            reason,
            source,
            exit: st.exit,
        });
        st.stdin = None;
        st.leftovers.clone_from(&self.leftovers);
        event
    }
}

#[cfg(test)]
mod tests;
