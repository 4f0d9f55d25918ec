//! Time limits and restarts.
//!
//! A time limit is a kill source of its own, [`KillSource::TimeLimit`]: explicit, so
//! it reaches `persist_on_release` sessions too (persistence spares them only from lifecycle
//! sweeps). Its deadline is a wall-clock instant fixed at spawn, written to the
//! checkpoint, and enforced by the session machine (`crate::machine`) of whoever
//! supervises the session, once:
//! - a supervised session's shim (`shim/supervise`), whose launch spec carries the
//!   deadline, kills the tree itself, daemon or no daemon; its exit record then says
//!   `killed_by: "time_limit"`, and the registry that reads it concludes the session
//!   with that source;
//! - an in-process session's reader (`crate::reader`) runs the same machine with the
//!   deadline, and when it fires hands the kill to the registry's tree kill as
//!   `time_limit` ([`Inner::supervision`]); a restored session past its deadline is
//!   killed as soon as its reader starts.
//!
//! No timer of the registry's own watches a deadline.
//!
//! A restart repeats a session's spawn: the same command, working directory, mode
//! and options ([`Origin`]), the same owner and name, in the *caller's* environment
//! (forwarded names are forwarded again from it; no value was ever stored). A running
//! session is tree-killed first as [`KillSource::Restarted`], and the new spawn waits
//! until the old one has passed the choke point, so its name is free.

use std::sync::Arc;
use std::time::Duration;

use super::{Inner, Registry};
use crate::answers::{KillStatus, SpawnInfo};
use crate::config::{KillSource, Mode, SpawnRequest};
use crate::error::RestartError;
use crate::id::SessionId;
use crate::reader::Supervision;
use crate::session::{Origin, Session};
use herd_persistence::{RestartSpec, ResultReceipt};

/// How long a restart waits for the killed session to pass the choke point.
const RESTART_FINISH_WAIT: Duration = Duration::from_secs(30);

impl Origin {
    /// What `req` asked for, as a restart repeats it.
    pub(crate) fn of(req: &SpawnRequest) -> Origin {
        Origin {
            notify: req.notify,
            watch: req.watch.clone(),
            heartbeat_seconds: req.heartbeat_seconds,
            completion_output_chars: req.completion_output_chars,
            forward_env: req.forward_env.clone(),
            env_names: req
                .env
                .iter()
                .map(|(name, _)| name.clone())
                .filter(|name| {
                    name != herd_guards::SUPERVISED_CHILD_ENV && !req.forward_env.contains(name)
                })
                .collect(),
            pty: match req.mode {
                Mode::Pty { rows, cols } => Some((rows, cols)),
                Mode::Pipe => None,
            },
            command_redacted: false,
            replaces: req.replaces.clone(),
            kill_leftovers: req.kill_leftovers,
            limits: req.limits,
            ready: req.ready.clone(),
            ready_port: req.ready_port,
            restart: req.restart,
        }
    }
}

impl Inner {
    /// How `s`'s in-process reader supervises it: the idle drain, the session's time
    /// limit, and the registry's tree kill as the carrier of the kill the session
    /// machine decides at the deadline. The kill runs as a task of its own (the reader
    /// must go on reading for the killed session to finish); a detaching host kills
    /// nothing.
    pub(super) fn supervision(self: &Arc<Self>, s: &Arc<Session>) -> Supervision {
        let weak = Arc::downgrade(self);
        let session = Arc::clone(s);
        Supervision {
            idle_drain: self.config.idle_drain,
            deadline: s.time_limit.map(|limit| limit.deadline),
            killer: Box::new(move |source: KillSource| {
                let Some(inner) = weak.upgrade() else {
                    return;
                };
                if inner.detach.is_cancelled() {
                    return;
                }
                let session = Arc::clone(&session);
                let runtime = inner.runtime.clone();
                drop(runtime.spawn(async move {
                    let limit_seconds = session.time_limit.map(|t| t.limit.as_secs());
                    tracing::info!(session_id = %session.id, limit_seconds, source = source.as_str(), "time limit reached; killing the session's tree");
                    let answer = inner.kill_session(&session, source).await;
                    if answer.status == KillStatus::KillIncomplete {
                        tracing::warn!(session_id = %session.id, survivors = ?answer.survivors, source = source.as_str(), "time-limit kill left survivors");
                    }
                }));
            }),
        }
    }
}

impl Registry {
    /// Starts session `id` (full id, prefix or name) again: the same command, working
    /// directory, mode, owner, name and options (notify, watch, heartbeat, persist,
    /// time limit, completion size, forwarded names), in `caller_env` as a new spawn
    /// would be (`None` starts from this process's environment, as
    /// [`SpawnRequest::caller_env`] says), with `env` applied after it. A running
    /// session is tree-killed first as [`KillSource::Restarted`]; the new one is
    /// spawned once the old one has finished, and its answer names the old one in
    /// `replaces`.
    ///
    /// `--env` values of the original are not repeated: herd never keeps environment
    /// values, and the answer's note names what was not repeated.
    ///
    /// # Errors
    /// [`RestartError::Lookup`] when `id` names no session; [`RestartError::Forgotten`]
    /// when only its result receipt is left; [`RestartError::CommandRedacted`] when the
    /// command herd knows is the redacted text; [`RestartError::NotStopped`] when the
    /// kill left survivors or the session did not finish in time (nothing new is
    /// started); [`RestartError::Spawn`] when the new spawn fails.
    pub async fn restart(
        &self,
        id: &str,
        caller_env: Option<Vec<(String, String)>>,
        env: Vec<(String, String)>,
    ) -> Result<SpawnInfo, RestartError> {
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => {
                // Only the store knows it: repeat what its receipt kept.
                let (id, r) = self
                    .inner
                    .durable
                    .receipt_lookup(id, miss)
                    .map_err(RestartError::Lookup)?;
                let Some(spec) = self.inner.durable.stored_restart_spec(&id) else {
                    return Err(RestartError::Forgotten { id });
                };
                let repeated_not = spec.options.env_names.clone();
                let request = stored_restart_request(&id, &r, spec, caller_env, env);
                return self.spawn_restart(&id, request, &repeated_not).await;
            }
        };
        if s.origin.command_redacted {
            return Err(RestartError::CommandRedacted { id: s.id.clone() });
        }
        let request = restart_request(&s, caller_env, env);
        let repeated_not: Vec<String> = s.origin.env_names.clone();
        if s.state().finished.is_none() {
            let answer = self.inner.kill_session(&s, KillSource::Restarted).await;
            if answer.status == KillStatus::KillIncomplete {
                return Err(RestartError::NotStopped {
                    id: s.id.clone(),
                    why: answer
                        .error
                        .unwrap_or_else(|| format!("the kill left {:?} alive", answer.survivors)),
                });
            }
        }
        // The old session leaves the running set at the choke point, which may come
        // a moment after the kill (the reader drains what is left): its name is
        // free only then.
        let mut done = s.done.subscribe();
        if tokio::time::timeout(RESTART_FINISH_WAIT, done.wait_for(|d| *d))
            .await
            .is_err()
        {
            return Err(RestartError::NotStopped {
                id: s.id.clone(),
                why: format!(
                    "it was killed but did not finish within {} s",
                    RESTART_FINISH_WAIT.as_secs()
                ),
            });
        }
        self.spawn_restart(&s.id, request, &repeated_not).await
    }

    /// Spawns the repeat of `old`, noting the `--env` names it did not repeat.
    async fn spawn_restart(
        &self,
        old: &SessionId,
        request: SpawnRequest,
        repeated_not: &[String],
    ) -> Result<SpawnInfo, RestartError> {
        let mut info = self
            .spawn(request)
            .await
            .map_err(|source| RestartError::Spawn {
                id: old.clone(),
                source,
            })?;
        if !repeated_not.is_empty() {
            let note = format!(
                "not repeated: --env {} (herd keeps no environment values; set them in your environment)",
                repeated_not.join(", ")
            );
            info.note = Some(match info.note.take() {
                Some(more) => format!("{note}; {more}"),
                None => note,
            });
        }
        tracing::info!(replaced = %old, session_id = %info.session_id, "session restarted");
        Ok(info)
    }
}

/// The spawn request that repeats a session only the store knows, from its receipt
/// and the restart spec kept with it.
fn stored_restart_request(
    id: &SessionId,
    r: &ResultReceipt,
    spec: RestartSpec,
    caller_env: Option<Vec<(String, String)>>,
    env: Vec<(String, String)>,
) -> SpawnRequest {
    let options = spec.options;
    SpawnRequest {
        command: spec.command,
        cwd: r.cwd.clone(),
        env,
        forward_env: options.forward_env,
        caller_env,
        mode: match (spec.mode, options.pty) {
            (_, Some((rows, cols))) => Mode::Pty { rows, cols },
            (herd_persistence::Mode::Pty, None) => Mode::pty(),
            (herd_persistence::Mode::Pipe, None) => Mode::Pipe,
        },
        task_id: r.task_id.clone(),
        owner_task_id: Some(r.owner_task_id.clone()),
        session_key: (!r.session_key.is_empty()).then(|| r.session_key.clone()),
        notify: options.notify,
        watch: spec.watch_patterns,
        heartbeat_seconds: spec.heartbeat_seconds,
        persist_on_release: r.persist_on_release,
        completion_output_chars: spec.completion_output_chars,
        name: r.name.clone(),
        time_limit: options.time_limit_seconds.map(Duration::from_secs),
        replaces: Some(id.clone()),
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

/// The spawn request that repeats `s` in `caller_env` with `env`.
fn restart_request(
    s: &Session,
    caller_env: Option<Vec<(String, String)>>,
    env: Vec<(String, String)>,
) -> SpawnRequest {
    let st = s.state();
    let origin = &s.origin;
    SpawnRequest {
        command: s.command.clone(),
        cwd: Some(s.cwd.clone()),
        env,
        forward_env: origin.forward_env.clone(),
        caller_env,
        mode: match origin.pty {
            Some((rows, cols)) => Mode::Pty { rows, cols },
            None => Mode::Pipe,
        },
        task_id: st.task_id.clone(),
        owner_task_id: Some(st.owner_task_id.clone()),
        session_key: st.session_key.clone(),
        notify: origin.notify,
        watch: origin.watch.clone(),
        heartbeat_seconds: origin.heartbeat_seconds,
        persist_on_release: s.persist_on_release,
        completion_output_chars: origin.completion_output_chars,
        name: s.name.clone(),
        time_limit: s.time_limit.map(|t| t.limit),
        replaces: Some(s.id.clone()),
        kill_leftovers: origin.kill_leftovers,
        limits: origin.limits,
        ready: origin.ready.clone(),
        ready_port: origin.ready_port,
        restart: origin.restart,
    }
}
