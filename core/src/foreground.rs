//! Foreground runs that yield to the background.
//!
//! [`Registry::run_foreground`] runs a command the way a tool call would: it waits for
//! the exit and answers the output (through the pipeline as `Route::Foreground`). The
//! command is a registry session from the start, so nothing has to be re-spawned or
//! re-attached when the caller stops waiting: if the caller's interrupt fires, or the
//! command runs past `yield_after`, the session is *adopted* — notify-on-complete is
//! turned on and the answer names its id — and it keeps running untouched. Past
//! `timeout` (without a yield) the command is killed.
//!
//! Invariant: adoption turns notify on under the table lock and only while the session
//! is in the running table, so either the completion is queued for the owner, or the
//! answer carries the exit itself; never neither, never both.

use std::time::Duration;

use herd_hooks::{Route, Shown};
use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::answers::{CompletionReason, SessionStatus};
use crate::{KillSource, Registry, SessionId, SpawnError, SpawnRequest};

/// Characters of output a foreground answer carries (the tail; the log has the rest).
pub const FOREGROUND_OUTPUT_CHARS: usize = 50_000;

/// How a foreground run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ForegroundStatus {
    /// The command finished; the answer has its output.
    Exited,
    /// It ran past `timeout` and was killed.
    TimedOut,
    /// It ran past `yield_after` and now runs in the background with notify on.
    Yielded,
    /// The caller's interrupt fired; it now runs in the background with notify on.
    Interrupted,
}

/// The answer to a foreground run.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ForegroundAnswer {
    /// How it ended.
    pub status: ForegroundStatus,
    /// The session that ran (or still runs) the command.
    pub session_id: SessionId,
    /// The command line (secrets masked).
    pub command: Shown,
    /// The exit code, once exited normally.
    pub exit_code: Option<i32>,
    /// The signal that ended it, if one did.
    pub signal: Option<i32>,
    /// Why it finished, once finished.
    pub completion_reason: Option<CompletionReason>,
    /// The output (so far), at most [`FOREGROUND_OUTPUT_CHARS`] characters.
    pub output: Shown,
    /// Earlier output is only in the log.
    pub output_cut: bool,
    /// Whether it still runs (in the background).
    pub process_running: bool,
    /// What happened, for a yield, an interrupt or a timeout.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What adopting a session into the background did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Adoption {
    /// It runs on with notify on: its owner gets one completion when it exits.
    Notified,
    /// It runs on, but its owner is a child agent, which is never notified:
    /// the child waits on it, kills it or hands it off.
    ChildNotNotified,
    /// It had already finished: nothing will be queued, and its exit is there to be
    /// read (poll or wait) by whoever adopted it.
    Finished,
}

impl Registry {
    /// Moves a session its caller was waiting on in the foreground to the
    /// background with notify on: for a front end that runs the foreground
    /// wait itself (spawn, then wait) and stops waiting on a timeout or a
    /// cancellation. See [`Adoption`] for the outcomes.
    ///
    /// # Errors
    /// [`crate::Error::Lookup`] for an unknown id.
    pub fn adopt(&self, id: &str) -> Result<(SessionId, Adoption), crate::Error> {
        let s = self.inner.lookup(id)?;
        Ok((s.id.clone(), self.inner.adopt_foreground(&s)))
    }

    /// Runs `req` in the foreground: waits up to `timeout` for the exit and answers
    /// the output. If `interrupt` fires, or the command runs past `yield_after`, it is
    /// adopted as a background session with notify on and the answer gives its id;
    /// past `timeout` it is killed.
    ///
    /// # Errors
    /// [`SpawnError::InvalidRequest`] when `req` asks for notify, watch or heartbeat
    /// (those need a background session) or `timeout` is zero; any spawn error.
    pub async fn run_foreground(
        &self,
        req: SpawnRequest,
        timeout: Duration,
        yield_after: Option<Duration>,
        interrupt: Option<CancellationToken>,
    ) -> Result<ForegroundAnswer, SpawnError> {
        if req.notify || !req.watch.is_empty() || req.heartbeat_seconds.unwrap_or(0) > 0 {
            return Err(SpawnError::InvalidRequest {
                field: "notify",
                message: "notify, watch and heartbeat need a background session; spawn the command in the background instead".to_owned(),
            });
        }
        if timeout.is_zero() {
            return Err(SpawnError::InvalidRequest {
                field: "timeout",
                message: "timeout must be positive (got 0s)".to_owned(),
            });
        }
        // Through the public spawn, so the session is checkpointed like any other.
        let info = self.spawn(req).await?;
        let s = self.inner.session(&info.session_id);
        let Some(s) = s else {
            // Pruned between the spawn and here: only possible with a finished cap of
            // zero; the log still has everything.
            return Err(SpawnError::InvalidRequest {
                field: "finished_cap",
                message: "the session was pruned as soon as it finished; raise finished_cap"
                    .to_owned(),
            });
        };
        let window = yield_after.map_or(timeout, |y| y.min(timeout));
        let interrupt = interrupt.unwrap_or_default();
        let mut done = s.done.subscribe();
        let mut status = tokio::select! {
            r = tokio::time::timeout(window, done.wait_for(|d| *d)) => match r {
                Ok(_) => ForegroundStatus::Exited,
                Err(_) if window < timeout => ForegroundStatus::Yielded,
                Err(_) => ForegroundStatus::TimedOut,
            },
            () = interrupt.cancelled() => ForegroundStatus::Interrupted,
        };
        let mut note = None;
        match status {
            ForegroundStatus::Exited => {}
            ForegroundStatus::TimedOut => {
                let _ = self.inner.kill_session(&s, KillSource::ProcessKill).await;
                note = Some(format!(
                    "the command ran past its timeout of {}s and was killed; run it in the background to let it finish",
                    timeout.as_secs()
                ));
            }
            ForegroundStatus::Yielded | ForegroundStatus::Interrupted => {
                match self.inner.adopt_foreground(&s) {
                    Adoption::Finished => status = ForegroundStatus::Exited,
                    adoption => {
                        let notified = adoption == Adoption::Notified;
                        let when = if status == ForegroundStatus::Interrupted {
                            "the wait was interrupted by a new message from the user".to_owned()
                        } else {
                            format!("the command is still running after {}s", window.as_secs())
                        };
                        let then = if notified {
                            "you will be notified when it exits; poll, wait on or kill it by that id. Answer the user now"
                        } else {
                            "as a child agent you will not be notified; wait on it, kill it, or hand it off to your parent"
                        };
                        note = Some(format!(
                            "{when}; it was moved to the background as {} and keeps running: {then}",
                            s.id
                        ));
                    }
                }
            }
        }
        let growing = s.status() == SessionStatus::Running;
        let (text, cut, key_open) = s.text();
        let window = crate::output::live_tail(&text, FOREGROUND_OUTPUT_CHARS, growing, key_open);
        let cut = cut || window.omits_start();
        let output = self.inner.show(&s, Route::Foreground, window);
        let fin = s.state().finished.clone();
        s.mark_read();
        Ok(ForegroundAnswer {
            status,
            session_id: s.id.clone(),
            command: self.inner.shown_command(&s),
            exit_code: fin.as_ref().and_then(|f| f.exit).and_then(|e| e.code),
            signal: fin.as_ref().and_then(|f| f.exit).and_then(|e| e.signal),
            completion_reason: fin.as_ref().map(|f| f.reason),
            output,
            output_cut: cut,
            process_running: fin.is_none(),
            note,
        })
    }
}
