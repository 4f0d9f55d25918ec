//! Kills and their conclusion: marks the session as being killed, kills
//! its tree (one process-table sweep per step for many sessions), waits for the
//! reader to finish it, and stops a worker's scope.
//!
//! A kill never finishes a session itself: the reader does, through the one choke
//! point (`finish`). A kill that leaves survivors clears its mark and answers
//! `kill_incomplete` with the session still running.

use std::sync::Arc;
use std::time::Duration;

use herd_hooks::Route;

use super::{Inner, Registry};
use crate::answers::{KillAnswer, KillStatus, SessionStatus};
use crate::config::KillSource;
use crate::error::Error;
use crate::id::SessionId;
use crate::kill;
use crate::session::Session;

impl Registry {
    /// Kills the session's whole tree. `killed` only when the tree is gone;
    /// otherwise `kill_incomplete` with the survivors, and the session stays running.
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn kill(&self, id: &str, source: KillSource) -> Result<KillAnswer, Error> {
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => {
                if let Some(answer) = self.inner.kill_queued(id, source).await {
                    return Ok(answer);
                }
                return self.inner.kill_from_receipt(id, miss, source);
            }
        };
        let answer = self.inner.kill_session(&s, source).await;
        // Answered only once the ending is committed.
        self.inner.durable.receipt_attempted(&s.id).await;
        Ok(answer)
    }

    /// Kills every running session owned by `owner` (every owner when `owner` is
    /// empty) except `exclude`. Lifecycle sources spare `persist_on_release` sessions.
    /// Returns how many ended up killed or already exited.
    pub async fn kill_all(&self, owner: &str, exclude: &[SessionId], source: KillSource) -> usize {
        let (targets, finished): (Vec<Arc<Session>>, Vec<Arc<Session>>) = {
            let spared = |s: &Session| {
                exclude.contains(&s.id) || (source.spares_persistent() && s.persist_on_release)
            };
            let aimed =
                &|s: &Session| !spared(s) && (owner.is_empty() || s.state().owner_task_id == owner);
            // One look at the table for both.
            self.inner.table.select_both(aimed, |s| {
                let held = {
                    let st = s.state();
                    st.finished.is_some() && !st.leftovers.is_empty()
                };
                held && aimed(s)
            })
        };
        // Finished sessions still holding leftovers are reached too.
        let held = futures::future::join_all(
            finished
                .iter()
                .map(|s| self.inner.kill_leftovers(s, source)),
        )
        .await;
        drop(held);
        // Queued jobs first: a slot the kills free must not start one of them.
        let n_queued = self.inner.kill_queued_of(owner, exclude, source).await;
        let answers = self.inner.kill_sessions(&targets, source).await;
        answers
            .iter()
            .filter(|a| matches!(a.status, KillStatus::Killed | KillStatus::AlreadyExited))
            .count()
            + n_queued
    }
}

impl Inner {
    /// Commits the intent to kill `sessions` before the kill begins (see
    /// `Durable::record_kill_intent`). A session killed before its spawn committed
    /// its running row (a kill of an owner's sessions while one is being spawned)
    /// has no row to take it: every running row is written, then the intent again,
    /// so a daemon that dies during the kill still reports it.
    async fn record_kill_intent(self: &Arc<Self>, sessions: &[Arc<Session>], source: KillSource) {
        if self.durable.record_kill_intent(sessions, source).await {
            return;
        }
        self.write_every_running_row().await;
        if !self.durable.record_kill_intent(sessions, source).await {
            tracing::warn!(
                "kill intent not stored: a session has no running row; a daemon crash during the kill would not report it"
            );
        }
    }

    pub(crate) async fn kill_session(
        self: &Arc<Self>,
        s: &Arc<Session>,
        source: KillSource,
    ) -> KillAnswer {
        self.record_kill_intent(std::slice::from_ref(s), source)
            .await;
        let Some(target) = begin_kill(s, source) else {
            // A finished session whose leftovers live on is not "already exited":
            // the kill ends them.
            if let Some(answer) = self.kill_leftovers(s, source).await {
                return answer;
            }
            return self.kill_answer(s, source, KillStatus::AlreadyExited, Vec::new(), None);
        };
        if let Some(outcome) = self.shim_kill(s).await {
            return self.conclude_kill(s, source, outcome).await;
        }
        let outcome = kill::kill_tree(&target, self.config.kill_grace).await;
        self.conclude_kill(s, source, outcome).await
    }

    /// A supervised session's kill is its shim's: the follower has sent
    /// the request, and the shim kills the whole tree (TERM, the grace, KILL, until
    /// empty) and concludes, daemon or no daemon. Waits for that; `None` when the
    /// session has no shim or it did not conclude in time (an older shim, a broken
    /// link), and the registry's own tree kill takes over.
    async fn shim_kill(&self, s: &Arc<Session>) -> Option<kill::KillOutcome> {
        s.shim.as_ref()?;
        let limit = self.config.kill_grace + kill::SURVIVOR_PROBE + Duration::from_secs(3);
        let mut done = s.done.subscribe();
        if tokio::time::timeout(limit, done.wait_for(|d| *d))
            .await
            .is_err()
        {
            tracing::warn!(session_id = %s.id, "the shim did not finish the kill in time; killing the tree from here");
            return None;
        }
        // What survived the shim's SIGKILL is listed as its leftovers.
        let survivors: Vec<i32> = s.state().leftovers.iter().map(|l| l.pid).collect();
        Some(kill::KillOutcome {
            gone: survivors.is_empty(),
            survivors,
            ..kill::KillOutcome::default()
        })
    }

    /// Kills several sessions with one sweep of the process table per step.
    pub(super) async fn kill_sessions(
        self: &Arc<Self>,
        sessions: &[Arc<Session>],
        source: KillSource,
    ) -> Vec<KillAnswer> {
        let mut started = Vec::new();
        let mut answers = Vec::new();
        let mut supervised = Vec::new();
        self.record_kill_intent(sessions, source).await;
        for s in sessions {
            match begin_kill(s, source) {
                Some(_) if s.shim.is_some() => supervised.push(Arc::clone(s)),
                Some(target) => started.push((Arc::clone(s), target)),
                None => answers.push(self.kill_answer(
                    s,
                    source,
                    KillStatus::AlreadyExited,
                    Vec::new(),
                    None,
                )),
            }
        }
        // Supervised sessions are killed by their shims, all at once; one that does
        // not conclude in time joins the registry's own sweep.
        let by_shims =
            futures::future::join_all(supervised.iter().map(|s| self.shim_kill(s))).await;
        let mut shim_killed = Vec::new();
        for (s, outcome) in supervised.into_iter().zip(by_shims) {
            match outcome {
                Some(outcome) => shim_killed.push((s, outcome)),
                None => {
                    let target = kill::KillTarget {
                        pid: s.pid,
                        pgid: s.pgid,
                        start_time: s.start_time,
                        session_tag: s.id.as_str().to_owned(),
                    };
                    started.push((s, target));
                }
            }
        }
        answers.extend(
            futures::future::join_all(
                shim_killed.into_iter().map(|(s, outcome)| async move {
                    self.conclude_kill(&s, source, outcome).await
                }),
            )
            .await,
        );
        let targets: Vec<kill::KillTarget> = started.iter().map(|(_, t)| t.clone()).collect();
        let outcomes = kill::kill_trees(&targets, self.config.kill_grace).await;
        // Concluded together: each waits for its reader to finish the session, and
        // thousands of sessions (a shutdown) must not wait one after another.
        let concluded = futures::future::join_all(
            started
                .iter()
                .zip(outcomes)
                .map(|((s, _), outcome)| self.conclude_kill(s, source, outcome)),
        )
        .await;
        answers.extend(concluded);
        answers
    }

    /// Turns a kill outcome into the answer: `killed` once the reader has finished the
    /// session, `kill_incomplete` (session left running) when something survived.
    pub(super) async fn conclude_kill(
        &self,
        s: &Arc<Session>,
        source: KillSource,
        outcome: kill::KillOutcome,
    ) -> KillAnswer {
        let answer = self.conclude_tree_kill(s, source, outcome).await;
        let (Some(scope), Some(dispatcher)) = (&s.scope, &self.config.dispatcher) else {
            return answer;
        };
        if answer.status == KillStatus::KillIncomplete {
            return answer;
        }
        match dispatcher.stop_scope(&scope.unit, &scope.env).await {
            Ok(()) => answer,
            Err(err) => {
                let detail = err.to_string();
                tracing::warn!(session_id = %s.id, unit = %scope.unit, error = %detail, "worker scope not stopped");
                KillAnswer {
                    status: KillStatus::KillIncomplete,
                    error: Some(format!(
                        "kill incomplete: the tree is gone but its scope was not stopped: {detail}"
                    )),
                    scope_stop_failed: Some(detail),
                    ..answer
                }
            }
        }
    }

    /// The tree kill's part of [`Inner::conclude_kill`].
    pub(super) async fn conclude_tree_kill(
        &self,
        s: &Arc<Session>,
        source: KillSource,
        outcome: kill::KillOutcome,
    ) -> KillAnswer {
        if outcome.gone || outcome.identity_mismatch {
            // The reader finishes the session once the child is reaped; it drains only
            // what is already buffered because a kill was requested.
            let mut done = s.done.subscribe();
            let limit = self.config.idle_drain + Duration::from_secs(5);
            if tokio::time::timeout(limit, done.wait_for(|d| *d))
                .await
                .is_err()
            {
                tracing::error!(session_id = %s.id, "killed session did not finish in time");
            }
            let finished = s.state().finished.is_some();
            let status = if finished {
                KillStatus::Killed
            } else {
                KillStatus::KillIncomplete
            };
            return self.kill_answer(s, source, status, Vec::new(), None);
        }
        {
            let mut st = s.state();
            if st.finished.is_none() {
                st.kill_source = None;
            }
        }
        s.kill_requested.send_replace(false);
        let error = format!(
            "kill incomplete: {} process(es) still alive ({}); session running",
            outcome.survivors.len(),
            outcome
                .survivors
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.kill_answer(
            s,
            source,
            KillStatus::KillIncomplete,
            outcome.survivors,
            Some(error),
        )
    }

    pub(super) fn kill_answer(
        &self,
        s: &Session,
        source: KillSource,
        status: KillStatus,
        survivors: Vec<i32>,
        error: Option<String>,
    ) -> KillAnswer {
        s.mark_read();
        let (subject, output) = self.sized_subject(s, Route::Kill);
        let running = s.status() == SessionStatus::Running;
        let error = if status == KillStatus::KillIncomplete && error.is_none() {
            Some("kill incomplete: the session did not finish after its tree was killed".to_owned())
        } else {
            error
        };
        subject.kill_answer(status, source, output, survivors, running, error)
    }
}

/// Marks `s` as being killed by `source` and returns its target; `None` when it has
/// already finished.
fn begin_kill(s: &Session, source: KillSource) -> Option<kill::KillTarget> {
    {
        let mut st = s.state();
        if st.finished.is_some() {
            return None;
        }
        st.kill_source = Some(source);
    }
    s.kill_requested.send_replace(true);
    Some(kill::KillTarget {
        pid: s.pid,
        pgid: s.pgid,
        start_time: s.start_time,
        session_tag: s.id.as_str().to_owned(),
    })
}
