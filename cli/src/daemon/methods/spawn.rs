//! `spawn` and `restart`: a job's request checked and completed (the supervisor
//! marker, the caller's environment or a minimal one), then handed to the registry.

use std::time::Duration;

use herd_core::{Mode, RestartError, SpawnRequest};
use herd_protocol::params::{RestartParams, RestartPolicy, SpawnParams};
use serde_json::Value;

use super::State;
use super::keys::Claim;
use super::wire::{core_error, parse, spawn_error, to_value};
use crate::protocol::{INTERNAL_ERROR, INVALID_PARAMS, RpcError};

impl State {
    /// `spawn`: with a `request_key` (capability `spawn.request_key`), a spawn
    /// sent again with a key already taken gets that spawn's answer and starts
    /// nothing (`keys.rs`).
    pub(super) async fn spawn(&self, params: Value) -> Result<Value, RpcError> {
        let mut p: SpawnParams = parse(params)?;
        let Some(key) = p.request_key.take() else {
            return self.spawn_once(p).await;
        };
        match self.spawn_keys.claim(&key).await? {
            Claim::Answered(answer) => answer,
            Claim::Start(started) => {
                let answer = self.spawn_once(p).await;
                self.spawn_keys.remember(&key, &answer).await;
                started.finish(&answer);
                answer
            }
        }
    }

    async fn spawn_once(&self, p: SpawnParams) -> Result<Value, RpcError> {
        let task_id = p.task_id.clone().unwrap_or_else(|| p.owner.clone());
        // Children must know they run under a supervisor (B33).
        check_env_names(&p.env, p.caller_env.as_ref())?;
        if p.command.contains('\0') {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "invalid command: it contains a NUL byte, which no program can receive",
            ));
        }
        if p.cwd
            .as_ref()
            .is_some_and(|c| c.as_os_str().as_encoded_bytes().contains(&0))
        {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "invalid cwd: it contains a NUL byte",
            ));
        }
        let mut env = p.env;
        env.push((herd_guards::SUPERVISED_CHILD_ENV.to_owned(), "1".to_owned()));
        let caller_env = Some(match p.caller_env {
            Some(vars) => vars.into_iter().collect(),
            None => minimal_env(),
        });
        let request = SpawnRequest {
            command: p.command,
            cwd: p.cwd,
            env,
            forward_env: p.forward_env,
            caller_env,
            mode: if p.pty {
                Mode::Pty {
                    rows: 30,
                    cols: 120,
                }
            } else {
                Mode::Pipe
            },
            task_id,
            owner_task_id: Some(p.owner),
            session_key: None,
            notify: p.notify,
            watch: p.watch,
            heartbeat_seconds: p.heartbeat_seconds,
            persist_on_release: p.persist_on_release,
            completion_output_chars: p.completion_output_chars,
            name: p.name,
            time_limit: p.time_limit_seconds.map(Duration::from_secs),
            replaces: None,
            kill_leftovers: p.kill_leftovers,
            limits: p
                .limits
                .map_or_else(herd_core::Limits::default, |l| herd_core::Limits {
                    memory_bytes: l.memory_bytes,
                    cpu_millis: l.cpu_millis,
                    pids: l.pids,
                }),
            ready: p.ready,
            ready_port: p.ready_port,
            restart: p.restart.as_ref().map(restart_policy).transpose()?,
        };
        let queue = herd_core::QueueRequest {
            group: p.group,
            after: p.after,
            after_ready: p.after_ready,
        };
        match self.registry.spawn_queued(request, queue).await {
            Ok(info) => to_value(info),
            Err(err) => Err(spawn_error(err)),
        }
    }

    /// `restart {"id", "caller_env"?}`: the session started again (same command,
    /// cwd, mode and options, in the caller's environment), a running one killed
    /// first as `restarted`; answers the new spawn's info with `replaces`.
    pub(super) async fn restart(&self, params: Value) -> Result<Value, RpcError> {
        let p: RestartParams = parse(params)?;
        check_env_names(&[], p.caller_env.as_ref())?;
        let caller_env = Some(match p.caller_env {
            Some(vars) => vars.into_iter().collect(),
            None => minimal_env(),
        });
        let env = vec![(herd_guards::SUPERVISED_CHILD_ENV.to_owned(), "1".to_owned())];
        match self.registry.restart(&p.id, caller_env, env).await {
            Ok(info) => to_value(info),
            Err(RestartError::Lookup(err)) => Err(core_error(herd_core::Error::Lookup(err))),
            Err(RestartError::Spawn { id, source }) => {
                let mut err = spawn_error(source);
                err.message = format!(
                    "{id} was stopped but could not be started again: {}",
                    err.message
                );
                Err(err)
            }
            Err(err @ (RestartError::Forgotten { .. } | RestartError::CommandRedacted { .. })) => {
                Err(RpcError::new(INVALID_PARAMS, err.to_string()))
            }
            // `NotStopped`, and whatever a later herd-core adds (the enum is non-exhaustive).
            Err(err) => Err(RpcError::new(INTERNAL_ERROR, err.to_string())),
        }
    }
}

/// `spawn`'s `restart` as the registry takes it.
fn restart_policy(restart: &RestartPolicy) -> Result<herd_core::RestartPolicy, RpcError> {
    {
        let always = match restart.policy.as_str() {
            "always" => true,
            "on-failure" => false,
            other => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("restart policy must be on-failure or always (got {other:?})"),
                ));
            }
        };
        Ok(herd_core::RestartPolicy {
            always,
            max_restarts: restart.max_restarts,
            delay: Duration::from_millis(restart.delay_ms),
        })
    }
}

/// The environment of a job whose request carries none (a protocol-1 client):
/// `PATH`, `HOME`, `USER`, `LOGNAME` and `LANG` (`TERM` is added under a PTY).
/// The daemon's own environment, frozen from whichever client started it, never
/// reaches a job.
fn minimal_env() -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), "/usr/local/bin:/usr/bin:/bin".to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ];
    if let Ok(Some(user)) = nix::unistd::User::from_uid(nix::unistd::getuid()) {
        env.push(("HOME".to_owned(), user.dir.display().to_string()));
        env.push(("USER".to_owned(), user.name.clone()));
        env.push(("LOGNAME".to_owned(), user.name));
    }
    env
}

/// Refuses environment names no OS accepts: empty, with `=` or NUL, and NUL in
/// values.
fn check_env_names(
    env: &[(String, String)],
    caller_env: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<(), RpcError> {
    let pairs = env
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str(), "env"))
        .chain(
            caller_env
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.as_str(), v.as_str(), "caller_env")),
        );
    for (name, value, field) in pairs {
        let problem = if name.is_empty() {
            Some("an empty name")
        } else if name.contains('=') {
            Some("a name with `=` (write NAME=VALUE as the pair [NAME, VALUE])")
        } else if name.contains('\0') || value.contains('\0') {
            Some("a NUL byte")
        } else {
            None
        };
        if let Some(problem) = problem {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "invalid {field}: {problem} in {name:?}; names are non-empty, without `=` or NUL"
                ),
            ));
        }
    }
    Ok(())
}
