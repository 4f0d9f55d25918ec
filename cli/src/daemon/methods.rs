//! The daemon's methods: JSON params in, registry call, JSON answer out.
//!
//! Registry answers are passed through as serialised (their field names are the
//! wire contract, ARCHITECTURE.md's "The wire protocol"). Errors become JSON-RPC
//! errors with a herd code: lookups that fail are `NOT_FOUND` (the message lists
//! what matched), a guard refusal is `GUARDED` with the verdict as `data`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use herd_core::{
    AgentIdentity, DispatchConfig, Dispatcher, Event, HandoffError, KillSource, ListFilter,
    LookupError, Mode, NotificationPolicy, Registry, RegistryConfig, RestartError, SpawnError,
    SpawnRequest,
};
use herd_persistence::Home;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::Notify;

use super::connection::write;
use crate::config::{Config, Notifications};
use crate::protocol::{
    DISPATCH_FAILED, GUARDED, INTERNAL_ERROR, INVALID_PARAMS, METHOD_NOT_FOUND, NOT_FOUND, REFUSED,
    Response, RpcError,
};

/// The largest log chunk one `log_chunk` or stream message carries.
const CHUNK_BYTES: usize = 1 << 20;

/// Everything a connection needs: the registry and the stop signal.
#[derive(Debug)]
pub(crate) struct State {
    registry: Registry,
    /// Restart-safe dispatch (B34), shared with the registry; `status` asks it too.
    dispatcher: Arc<Dispatcher>,
    stop: Arc<Notify>,
    /// What the start-up restore did, for `status` and `herd doctor`.
    restored: Value,
    /// A `shutdown {"keep_jobs": true}` asked the daemon to detach, not to kill.
    keep_jobs: std::sync::atomic::AtomicBool,
    /// Jobs run under shims (they outlive the daemon).
    supervised: bool,
    /// The connections being served.
    pub(crate) connections: super::connection::Connections,
    /// Other hosts' herds (capability `hosts`, `hosts.rs`).
    hosts: super::hosts::Hosts,
}

/// How the daemon ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Every session is killed as `host_shutdown` (B17).
    KillJobs,
    /// Supervised jobs keep running; the next daemon re-attaches.
    Detach,
}

/// What a method answers.
#[derive(Debug)]
pub(crate) enum Reply {
    /// One result.
    Value(Value),
    /// One error.
    Error(RpcError),
    /// The connection becomes a stream.
    Stream(Stream),
}

/// A streaming method.
#[derive(Debug)]
pub(crate) enum Stream {
    /// `events.follow`: the owner's notifications, drained as they come.
    Events {
        /// The owner whose events are delivered.
        owner: String,
        /// Only say how many are pending, never take them (capability
        /// `events.pending`).
        peek: bool,
    },
    /// `logs.follow`: a session's output until it exits.
    Logs {
        /// The session.
        id: String,
        /// Where to start, in bytes of the log.
        from_byte: u64,
        /// End with the session's result, as `wait` answers it (capability
        /// `logs.follow.result`): a follower needs no second request.
        result: bool,
    },
    /// `sessions.follow`: a note whenever the home's sessions change (`sessions.rs`).
    Sessions,
    /// A far host's stream (`logs.follow` of `NAME:proc_…`), on a door of its own.
    Remote(super::hosts::RemoteStream),
}

/// Builds the registry's config from the home's config file.
fn registry_config(
    config: &Config,
    pipeline: Arc<herd_hooks::Pipeline>,
    dispatcher: Arc<Dispatcher>,
) -> RegistryConfig {
    let defaults = RegistryConfig::default();
    let mut env_deny = defaults.env_deny.clone();
    env_deny.extend(config.env_deny.iter().cloned());
    RegistryConfig {
        log_cap_bytes: config.log_cap_bytes,
        log_budget_bytes: config.log_budget_bytes,
        finished_cap: config.finished_cap,
        queue_cap: config.queue_cap,
        env_deny,
        kill_grace: Duration::from_secs_f64(config.kill_grace_seconds),
        wait_cap: Duration::from_secs(config.wait_cap_seconds),
        heartbeat_floor: Duration::from_secs(config.heartbeat_floor_seconds),
        notifications: match config.notifications {
            Notifications::All => NotificationPolicy::All,
            Notifications::Result => NotificationPolicy::Result,
            Notifications::Error => NotificationPolicy::Error,
            Notifications::Off => NotificationPolicy::Off,
        },
        guard: Some(crate::guard::host(&config.guard_host_images, None)),
        pipeline,
        dispatcher: Some(dispatcher),
        require_restart_safe_scope: config.require_restart_safe_scope,
        direct_exec: config.direct_exec,
        shim: config.shim_program(),
        ..defaults
    }
}

impl State {
    /// Builds the registry for `home` and restores the sessions its checkpoint
    /// lists (B28), before any request is served.
    ///
    /// # Errors
    /// When the registry cannot start (e.g. an unreadable checkpoint directory).
    pub(crate) async fn new(
        home: Home,
        config: &Config,
        pipeline: Arc<herd_hooks::Pipeline>,
        stop: Arc<Notify>,
    ) -> anyhow::Result<State> {
        let dispatcher = Arc::new(Dispatcher::new(DispatchConfig {
            memory_max_bytes: config.worker_memory_max_bytes,
            ..DispatchConfig::default()
        }));
        let registry_config = registry_config(config, pipeline, Arc::clone(&dispatcher));
        let supervised = registry_config.shim.is_some();
        let registry = Registry::new(home, registry_config)?;
        let hosts = super::hosts::Hosts::new(registry.home(), registry.clone(), config)?;
        let restored = match registry.restore().await {
            Ok(report) => {
                log_restore(&report);
                restore_summary(&report)
            }
            Err(err) => {
                // A checkpoint we cannot read is reported, not fatal: the daemon
                // still serves new sessions, and the next start tries again.
                let error = chain(&err);
                tracing::warn!(%error, "restore failed; no session was restored");
                json!({"error": error})
            }
        };
        Ok(State {
            registry,
            dispatcher,
            stop,
            restored,
            keep_jobs: std::sync::atomic::AtomicBool::new(false),
            supervised,
            connections: super::connection::Connections::default(),
            hosts,
        })
    }

    /// The registry served.
    pub(crate) fn registry(&self) -> &Registry {
        &self.registry
    }

    /// The home served.
    pub(crate) fn home(&self) -> &Home {
        self.registry.home()
    }

    /// Ends the registry: kills every session (as `host_shutdown`) or detaches.
    pub(crate) async fn end(&self, ending: Ending) {
        match ending {
            Ending::KillJobs => self.registry.shutdown().await,
            Ending::Detach => self.registry.detach().await,
        }
    }

    /// Whether the last `shutdown` request asked to keep the jobs.
    pub(crate) fn keeps_jobs(&self) -> bool {
        self.keep_jobs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Dispatches one request.
    pub(crate) async fn handle(&self, method: &str, params: Value) -> Reply {
        // A far host's job (`NAME:proc_…`, spawn with `host`) goes to its link.
        let params = match self.hosts.route(method, params).await {
            super::hosts::Routed::Reply(reply) => return reply,
            super::hosts::Routed::Local(params) => params,
        };
        let result = match method {
            "spawn" => self.spawn(params).await,
            "list" if super::hosts::Hosts::wants(&params) => self.list_hosts(params).await,
            "list" => off_worker(&self.registry, move |r| list(r, params)).await,
            "lookup" => {
                off_worker(&self.registry, move |r| {
                    let p = parse::<IdParams>(params)?;
                    let (id, owner) = r.lookup_owned(&p.id).map_err(lookup_error)?;
                    Ok(json!({"session_id": id.to_string(), "owner_task_id": owner}))
                })
                .await
            }
            "poll" => {
                off_worker(&self.registry, move |r| {
                    let p = parse::<IdParams>(params)?;
                    to_value(r.poll(&p.id).map_err(core_error)?)
                })
                .await
            }
            "log" => off_worker(&self.registry, move |r| log(r, params)).await,
            "log_chunk" => off_worker(&self.registry, move |r| log_chunk(r, params)).await,
            "wait" => self.wait(params).await,
            "kill" => self.kill(params).await,
            "restart" => self.restart(params).await,
            "write" => self.stdin(params, StdinOp::Write).await,
            "submit" => self.stdin(params, StdinOp::Submit).await,
            "close" => self.stdin(params, StdinOp::Close).await,
            "clean" => match parse::<CleanParams>(params) {
                Ok(p) => {
                    // Receipts still being written are waited for, so a session
                    // that just finished is forgotten too, not skipped.
                    if let Err(err) = self.registry.sync_durable().await {
                        tracing::warn!(error = %err, "receipts not settled before clean");
                    }
                    off_worker(&self.registry, move |r| {
                        let ids = r.clean(
                            p.owner.as_deref(),
                            Duration::from_secs(p.older_than_seconds.unwrap_or(0)),
                        );
                        Ok(json!({"forgotten": ids.len(), "session_ids": ids}))
                    })
                    .await
                }
                Err(err) => Err(err),
            },
            "adopt" => parse::<IdParams>(params).and_then(|p| {
                let (id, adoption) = self.registry.adopt(&p.id).map_err(core_error)?;
                Ok(json!({"session_id": id.to_string(), "adoption": adoption}))
            }),
            "handoff" => self.handoff(params),
            "status" => Ok(self.status()),
            "scope" => self.scope().await,
            "shutdown" => parse::<ShutdownParams>(params).map(|p| {
                self.keep_jobs
                    .store(p.keep_jobs, std::sync::atomic::Ordering::SeqCst);
                self.stop.notify_one();
                json!({
                    "status": "stopping",
                    "pid": std::process::id(),
                    "jobs": if p.keep_jobs { "kept" } else { "killed" },
                })
            }),
            "resize" => self.resize(params).await,
            "events.follow" => {
                return match parse::<EventsParams>(params) {
                    Ok(p) => Reply::Stream(Stream::Events {
                        owner: p.owner,
                        peek: p.peek,
                    }),
                    Err(err) => Reply::Error(err),
                };
            }
            "sessions.follow" => {
                return match parse::<NoParams>(params) {
                    Ok(NoParams {}) => Reply::Stream(Stream::Sessions),
                    Err(err) => Reply::Error(err),
                };
            }
            "logs.follow" => {
                return match parse::<FollowParams>(params) {
                    Ok(p) => match self.registry.lookup(&p.id) {
                        Ok(id) => Reply::Stream(Stream::Logs {
                            id: id.to_string(),
                            from_byte: p.from_byte,
                            result: p.result,
                        }),
                        Err(err) => Reply::Error(lookup_error(err)),
                    },
                    Err(err) => Reply::Error(err),
                };
            }
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!(
                    "unknown method `{other}`; the daemon serves: spawn, list, lookup, poll, log, \
                     log_chunk, wait, kill, restart, write, submit, close, resize, drain, drain.ack, drain.release, adopt, clean, \
                     handoff, status, scope, shutdown, events.follow, logs.follow, sessions.follow, hosts"
                ),
            )),
        };
        match result {
            Ok(value) => Reply::Value(value),
            Err(error) => Reply::Error(error),
        }
    }

    /// `list` with `host` or `all_hosts` (capability `hosts`): the far rows, after
    /// the local ones for `all_hosts`.
    async fn list_hosts(&self, params: Value) -> Result<Value, RpcError> {
        let all_hosts = params.get("all_hosts").and_then(Value::as_bool) == Some(true);
        let local = if all_hosts {
            let mut local_params = params.clone();
            if let Some(object) = local_params.as_object_mut() {
                object.remove("host");
                object.remove("all_hosts");
            }
            let answer = off_worker(&self.registry, move |r| list(r, local_params)).await?;
            Some(answer["processes"].as_array().cloned().unwrap_or_default())
        } else {
            None
        };
        self.hosts.list(params, local).await
    }

    async fn spawn(&self, params: Value) -> Result<Value, RpcError> {
        let p: SpawnParams = parse(params)?;
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
        env.push(("HERD_SUPERVISED_CHILD".to_owned(), "1".to_owned()));
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
        };
        match self.registry.spawn(request).await {
            Ok(info) => to_value(info),
            Err(err) => Err(spawn_error(err)),
        }
    }

    /// `restart {"id", "caller_env"?}`: the session started again (same command,
    /// cwd, mode and options, in the caller's environment), a running one killed
    /// first as `restarted`; answers the new spawn's info with `replaces`.
    async fn restart(&self, params: Value) -> Result<Value, RpcError> {
        let p: RestartParams = parse(params)?;
        check_env_names(&[], p.caller_env.as_ref())?;
        let caller_env = Some(match p.caller_env {
            Some(vars) => vars.into_iter().collect(),
            None => minimal_env(),
        });
        let env = vec![("HERD_SUPERVISED_CHILD".to_owned(), "1".to_owned())];
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
            Err(err @ RestartError::NotStopped { .. }) => {
                Err(RpcError::new(INTERNAL_ERROR, err.to_string()))
            }
        }
    }

    async fn wait(&self, params: Value) -> Result<Value, RpcError> {
        let p: WaitParams = parse(params)?;
        let timeout = match p.timeout_seconds {
            Some(t) if !(t.is_finite() && t > 0.0) => {
                return Err(RpcError::new(
                    INVALID_PARAMS,
                    format!("timeout must be positive (got {t})"),
                ));
            }
            Some(t) => Duration::from_secs_f64(t.min(1.0e9)),
            // No timeout: wait for the exit, one registry-capped window at a time.
            None => self.registry.config().wait_cap,
        };
        loop {
            let answer = self
                .registry
                .wait(&p.id, timeout, None)
                .await
                .map_err(core_error)?;
            let value = to_value(answer)?;
            // Without a timeout the caller waits for the exit itself, across the
            // registry's per-call cap.
            if p.timeout_seconds.is_some() || value["status"] != "timeout" {
                return Ok(value);
            }
        }
    }

    async fn kill(&self, params: Value) -> Result<Value, RpcError> {
        let p: IdParams = parse(params)?;
        let answer = self
            .registry
            .kill(&p.id, KillSource::ProcessKill)
            .await
            .map_err(core_error)?;
        to_value(answer)
    }

    async fn resize(&self, params: Value) -> Result<Value, RpcError> {
        let p: ResizeParams = parse(params)?;
        let answer = self
            .registry
            .resize(&p.id, p.rows, p.cols)
            .await
            .map_err(core_error)?;
        to_value(answer)
    }

    async fn stdin(&self, params: Value, op: StdinOp) -> Result<Value, RpcError> {
        let p: StdinParams = parse(params)?;
        let answer = match op {
            StdinOp::Write => self.registry.write(&p.id, p.data.as_bytes()).await,
            StdinOp::Submit => self.registry.submit(&p.id, &p.data).await,
            StdinOp::Close => self.registry.close_stdin(&p.id).await,
        }
        .map_err(core_error)?;
        to_value(answer)
    }

    /// Hands session `id` from owner `from` to owner `to` (B25). The caller is
    /// registered as a handoff source of `to` first (not a subagent, so its own
    /// wake-ups keep coming), and the registry's rules (the cap of three, running
    /// sessions the caller owns, a purpose) decide; its refusals come back as
    /// `REFUSED` errors with their message.
    fn handoff(&self, params: Value) -> Result<Value, RpcError> {
        let p: HandoffParams = parse(params)?;
        let Some(to) = p.to.filter(|to| !to.trim().is_empty()) else {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "handoff needs `to`: the owner that takes the session over",
            ));
        };
        self.registry.register_handoff_source(
            &p.from,
            AgentIdentity {
                owner_task_id: to.clone(),
                task_id: to.clone(),
                session_key: None,
            },
        );
        match self.registry.handoff(&p.id, &p.from, &to, &p.note) {
            Ok(answer) => to_value(answer),
            Err(HandoffError::Lookup(err)) => Err(lookup_error(err)),
            Err(err) => {
                let reason = match &err {
                    HandoffError::NotAChild { .. } => "not_a_child",
                    HandoffError::NotTheParent { .. } => "not_the_parent",
                    HandoffError::CapReached { .. } => "cap_reached",
                    HandoffError::MissingPurpose => "missing_purpose",
                    HandoffError::NotRunningOwned { .. } => "not_running_owned",
                    HandoffError::Lookup(_) => "not_found",
                };
                Err(RpcError {
                    code: REFUSED,
                    message: err.to_string(),
                    data: Some(json!({"reason": reason})),
                })
            }
        }
    }

    /// Whether restart-safe scopes can be created for this daemon's children (B34),
    /// with the remedy when they cannot; runs or reuses the dispatcher's probe.
    async fn scope(&self) -> Result<Value, RpcError> {
        let env = herd_core::utf8_environment();
        let availability = self.dispatcher.availability(&env).await;
        let mut value = to_value(availability)?;
        value["memory_max_bytes"] = json!(self.dispatcher.memory_max_bytes());
        value["require_restart_safe_scope"] =
            json!(self.registry.config().require_restart_safe_scope);
        Ok(value)
    }

    fn status(&self) -> Value {
        let (running, finished) = self.registry.counts();
        json!({
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "home": self.home().root().display().to_string(),
            "running": running,
            "finished": finished,
            "supervisor": if self.supervised { "shim" } else { "in_process" },
            "connections": self.connections.open(),
            "restore": self.restored,
        })
    }
}

impl Stream {
    /// Runs the stream on the connection until it ends or the client leaves.
    pub(crate) async fn run(
        self,
        state: &State,
        reader: &mut BufReader<OwnedReadHalf>,
        writer: &mut OwnedWriteHalf,
        id: Value,
    ) {
        match self {
            Stream::Events { owner, peek } => {
                events_stream(state, &owner, peek, reader, writer).await;
            }
            Stream::Logs {
                id: session,
                from_byte,
                result,
            } => {
                logs_stream(state, &session, from_byte, result, reader, writer, id).await;
            }
            Stream::Sessions => super::sessions::follow(state, reader, writer).await,
            Stream::Remote(remote) => remote.run(reader, writer, id).await,
        }
    }
}

/// Streams the owner's events: drain now, then again whenever anything is
/// published. Each batch is a lease acknowledged once written, so events a
/// client never received go back to the queue. With `peek`, only a `pending`
/// notification with the count is sent, whenever it grows.
async fn events_stream(
    state: &State,
    owner: &str,
    peek: bool,
    reader: &mut BufReader<OwnedReadHalf>,
    writer: &mut OwnedWriteHalf,
) {
    // Subscribe before the first drain, so an event published in between wakes us.
    let mut published = state.registry.subscribe();
    let mut closed = Box::pin(client_gone(reader));
    // With `peek`: told at the start when something waits, then after every
    // event published for this owner while something waits (a read that emptied
    // the queue in between publishes nothing, so counts alone would miss the next).
    let mut for_owner = true;
    loop {
        if peek {
            let pending = state.registry.pending(owner);
            if pending > 0 && for_owner {
                let note = Response::notification("pending", json!({"count": pending}));
                if write(writer, &note).await.is_err() {
                    return;
                }
            }
        } else {
            let lease = state.registry.take(owner);
            for event in lease.events() {
                let params = serde_json::to_value(event).unwrap_or(Value::Null);
                if write(writer, &Response::notification("event", params))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            lease.acknowledge();
        }
        tokio::select! {
            received = published.recv() => match received {
                Ok(event) => for_owner = event.owner_task_id().is_none_or(|o| o == owner),
                // Lagged: something may be for this owner.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => for_owner = true,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            },
            () = &mut closed => return,
        }
    }
}

/// Streams a session's log from `from_byte` until the session has exited and
/// everything is sent, then answers the request with the final offset.
async fn logs_stream(
    state: &State,
    session: &str,
    from_byte: u64,
    with_result: bool,
    reader: &mut BufReader<OwnedReadHalf>,
    writer: &mut OwnedWriteHalf,
    id: Value,
) {
    let mut follower = match state.registry.log_follower(session, from_byte) {
        Ok(follower) => follower,
        Err(err) => {
            let _ = write(writer, &Response::err(id, core_error(err))).await;
            return;
        }
    };
    let mut published = state.registry.subscribe();
    let mut closed = Box::pin(client_gone(reader));
    // New output is not an event, so the log is also re-read on a short tick.
    let mut tick = tokio::time::interval(Duration::from_millis(50));
    loop {
        let read = match follower.read(CHUNK_BYTES) {
            Ok(read) => read,
            Err(err) => {
                let _ = write(writer, &Response::err(id, core_error(err))).await;
                return;
            }
        };
        // Nothing new since the last read: the stream is idle, so the unfinished
        // line it holds goes out unless it can still become a secret (a prompt, an
        // echoed keystroke, a progress bar show within one tick).
        let output = if read.progressed || read.is_done {
            read.output
        } else {
            herd_hooks::Shown::join([read.output, follower.release_idle()], "")
        };
        if !output.is_empty()
            && write(
                writer,
                &Response::notification("log", json!({"output": output})),
            )
            .await
            .is_err()
        {
            return;
        }
        if read.is_done {
            let mut answer = json!({"next_byte": follower.next_byte()});
            if with_result {
                // The session has ended, so this wait answers at once (its
                // timeout only has to be positive).
                let ended = state
                    .registry
                    .wait(session, Duration::from_secs(1), None)
                    .await;
                answer["result"] = match ended.map_err(core_error).and_then(to_value) {
                    Ok(value) => value,
                    Err(err) => json!({"error": err.message}),
                };
            }
            let _ = write(writer, &Response::ok(id, answer)).await;
            return;
        }
        if read.progressed {
            continue;
        }
        tokio::select! {
            _ = published.recv() => {}
            _ = tick.tick() => {}
            () = &mut closed => return,
        }
    }
}

/// Resolves when the client closes its end (or sends anything: streams take no input).
pub(super) async fn client_gone(reader: &mut BufReader<OwnedReadHalf>) {
    let mut buf = Vec::new();
    let _ = crate::protocol::read_line(reader, &mut buf, 1024).await;
}

/// Logs what the start-up restore did: the summary at info, problems at warn.
fn log_restore(report: &herd_core::RestoreReport) {
    tracing::info!(
        adopted = report.adopted.len(),
        reattached = report.reattached.len(),
        finished_while_away = report.finished_while_away.len(),
        supervisor_died = report.supervisor_died.len(),
        records_only = report.records_only.len(),
        closed_lost = report.closed_lost.len(),
        closed_reused = report.closed_reused.len(),
        already_finished = report.already_finished.len(),
        skipped_live_writer = report.skipped_live_writer.len(),
        invalid = report.invalid.len(),
        "restore done"
    );
    if let Some(moved) = &report.moved_aside {
        tracing::warn!(%moved, "the checkpoint was unusable and was moved aside");
    }
    if let Some(error) = &report.checkpoint_error {
        tracing::warn!(%error, "the checkpoint was not updated after restore");
    }
    for entry in &report.invalid {
        tracing::warn!(%entry, "unusable checkpoint entry");
    }
}

/// The restore report as counts plus its problems, for `status`.
fn restore_summary(report: &herd_core::RestoreReport) -> Value {
    json!({
        "adopted": report.adopted.len(),
        "reattached": report.reattached.len(),
        "finished_while_away": report.finished_while_away.len(),
        "supervisor_died": report.supervisor_died.len(),
        "records_only": report.records_only.len(),
        "closed_lost": report.closed_lost.len(),
        "closed_reused": report.closed_reused.len(),
        "already_finished": report.already_finished.len(),
        "skipped_live_writer": report.skipped_live_writer.len(),
        "invalid": report.invalid,
        "moved_aside": report.moved_aside,
        "checkpoint_error": report.checkpoint_error,
    })
}

/// `list`: the sessions by owner, state, age and a newest-N limit.
fn list(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p: ListParams = parse(params)?;

    if let Some(limit) = p.limit
        && !(1..=LIST_MAX_ROWS).contains(&limit)
    {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!("limit must be 1 to {LIST_MAX_ROWS} rows (got {limit})"),
        ));
    }
    let state = p.state.unwrap_or(if p.all {
        ListState::All
    } else {
        ListState::Running
    });
    let filter = ListFilter {
        owner: p.owner,
        session_key: None,
        include_finished: state != ListState::Running,
    };
    let mut rows = registry.list(&filter);
    if state == ListState::Finished {
        rows.retain(|r| r.status != herd_core::SessionStatus::Running);
    }
    if let Some(since) = p.since_seconds {
        rows.retain(|r| r.uptime_seconds <= since);
    }
    // Oldest first; a limit keeps the newest.
    let more = p.limit.map_or(0, |limit| rows.len().saturating_sub(limit));
    rows.drain(..more);
    let mut answer = json!({"processes": to_value(rows)?});
    if more > 0 {
        answer["more"] = json!(more);
    }
    Ok(answer)
}

/// `log`: one page of a session's output.
fn log(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p: LogParams = parse(params)?;
    let answer = registry.log(&p.id, p.offset, p.limit).map_err(core_error)?;
    to_value(answer)
}

/// `log_chunk`: raw bytes of a session's log.
fn log_chunk(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p: FollowParams = parse(params)?;
    let max = p.max_bytes.unwrap_or(CHUNK_BYTES).min(CHUNK_BYTES);
    let chunk = registry
        .log_chunk(&p.id, p.from_byte, max)
        .map_err(core_error)?;
    to_value(chunk)
}

/// Runs `f` on the blocking pool: registry calls that read files, run output
/// plugins (which may take their whole budget) or scan receipts must not hold one
/// of the runtime's two workers, or the accept loop and every other connection
/// stall behind them.
async fn off_worker<T: Send + 'static>(
    registry: &Registry,
    f: impl FnOnce(&Registry) -> Result<T, RpcError> + Send + 'static,
) -> Result<T, RpcError> {
    let registry = registry.clone();
    tokio::task::spawn_blocking(move || f(&registry))
        .await
        .unwrap_or_else(|err| {
            Err(RpcError::new(
                INTERNAL_ERROR,
                format!("the request's worker failed: {err}"),
            ))
        })
}

/// The JSON of drained events: the events and their rendering.
pub(crate) fn drained_json(events: &[Event]) -> Value {
    let rendered = if events.is_empty() {
        String::new()
    } else {
        herd_core::render_events(events)
    };
    json!({"events": events, "rendered": rendered})
}

/// Stdin operations.
#[derive(Debug, Clone, Copy)]
enum StdinOp {
    Write,
    Submit,
    Close,
}

/// Params of a method that takes none.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct NoParams {}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ShutdownParams {
    keep_jobs: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ResizeParams {
    id: String,
    rows: u16,
    cols: u16,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct IdParams {
    id: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct HandoffParams {
    id: String,
    from: String,
    #[serde(default)]
    to: Option<String>,
    #[serde(default)]
    note: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct CleanParams {
    /// Only this owner's sessions; every owner's when absent.
    #[serde(default)]
    owner: Option<String>,
    /// Only sessions finished at least this long ago.
    #[serde(default)]
    older_than_seconds: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EventsParams {
    owner: String,
    #[serde(default)]
    peek: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ListParams {
    #[serde(default)]
    owner: Option<String>,
    #[serde(default)]
    all: bool,
    /// `running`, `finished` or `all`; wins over `all` (capability `list.filter`).
    #[serde(default)]
    state: Option<ListState>,
    /// Only sessions started in the last this many seconds.
    #[serde(default)]
    since_seconds: Option<u64>,
    /// At most this many rows, the newest (1 to [`LIST_MAX_ROWS`]).
    #[serde(default)]
    limit: Option<usize>,
}

/// Which sessions a `list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
enum ListState {
    Running,
    Finished,
    All,
}

/// The most rows one `list` answers.
const LIST_MAX_ROWS: usize = 10_000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct LogParams {
    id: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FollowParams {
    id: String,
    #[serde(default)]
    from_byte: u64,
    #[serde(default)]
    result: bool,
    #[serde(default)]
    max_bytes: Option<usize>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WaitParams {
    id: String,
    #[serde(default)]
    timeout_seconds: Option<f64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct StdinParams {
    id: String,
    #[serde(default)]
    data: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpawnParams {
    command: String,
    owner: String,
    #[serde(default)]
    task_id: Option<String>,
    #[serde(default)]
    cwd: Option<PathBuf>,
    #[serde(default)]
    env: Vec<(String, String)>,
    #[serde(default)]
    forward_env: Vec<String>,
    /// The caller's whole environment (capability `spawn.caller_env`); without
    /// it the job gets [`minimal_env`], never the daemon's own.
    #[serde(default)]
    caller_env: Option<std::collections::BTreeMap<String, String>>,
    #[serde(default)]
    pty: bool,
    #[serde(default)]
    notify: bool,
    #[serde(default)]
    watch: Vec<String>,
    #[serde(default)]
    heartbeat_seconds: Option<u64>,
    #[serde(default)]
    persist_on_release: bool,
    #[serde(default)]
    completion_output_chars: Option<usize>,
    #[serde(default)]
    name: Option<String>,
    /// Kill the tree after this many seconds (capability `spawn.time_limit`).
    #[serde(default)]
    time_limit_seconds: Option<u64>,
}

/// `restart` (capability `restart`): the session to start again, and the caller's
/// environment the new one runs in.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RestartParams {
    id: String,
    #[serde(default)]
    caller_env: Option<std::collections::BTreeMap<String, String>>,
}

/// A spawn's error as the wire carries it.
fn spawn_error(err: SpawnError) -> RpcError {
    match err {
        SpawnError::Guarded(block) => RpcError {
            code: GUARDED,
            message: format!("refused by the self-kill guard: {block}"),
            data: Some(crate::guard::verdict_json(Some(&block))),
        },
        SpawnError::InvalidRequest { field, message } => {
            RpcError::new(INVALID_PARAMS, format!("invalid {field}: {message}"))
        }
        SpawnError::ShuttingDown => RpcError::new(
            crate::protocol::SHUTTING_DOWN,
            SpawnError::ShuttingDown.to_string(),
        ),
        SpawnError::Dispatch(err) => RpcError {
            code: DISPATCH_FAILED,
            message: chain(&err),
            data: Some(json!({"infrastructure": err.is_infrastructure()})),
        },
        err => RpcError::new(INTERNAL_ERROR, chain(&err)),
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

/// Deserialises params, or an `INVALID_PARAMS` error naming the problem.
pub(super) fn parse<T: DeserializeOwned>(params: Value) -> Result<T, RpcError> {
    let params = match params {
        Value::Null => json!({}),
        Value::Object(_) => params,
        // serde would map an array onto the fields in order: a request that names
        // nothing must not set them by position.
        other => {
            return Err(RpcError::new(
                INVALID_PARAMS,
                format!(
                    "invalid params: they must be an object of named fields, not {}",
                    match other {
                        Value::Array(_) => "a positional array",
                        _ => "a bare value",
                    }
                ),
            ));
        }
    };
    serde_json::from_value(params)
        .map_err(|err| RpcError::new(INVALID_PARAMS, format!("invalid params: {err}")))
}

/// Serialises an answer.
fn to_value<T: serde::Serialize>(answer: T) -> Result<Value, RpcError> {
    serde_json::to_value(answer).map_err(|err| {
        RpcError::new(
            INTERNAL_ERROR,
            format!("failed to encode the answer: {err}"),
        )
    })
}

/// A lookup failure as a `NOT_FOUND` error.
fn lookup_error(err: LookupError) -> RpcError {
    let matches: Vec<String> = match &err {
        LookupError::Ambiguous { matches, .. } => matches.iter().map(ToString::to_string).collect(),
        _ => Vec::new(),
    };
    let mut message = chain(&err);
    if !matches.is_empty() {
        message.push_str(&format!(" (it matches {})", matches.join(", ")));
    }
    RpcError {
        code: NOT_FOUND,
        message,
        data: Some(json!({"matches": matches})),
    }
}

/// A registry error as a JSON-RPC error.
fn core_error(err: herd_core::Error) -> RpcError {
    match err {
        herd_core::Error::Lookup(lookup) => lookup_error(lookup),
        herd_core::Error::InvalidArgument { .. } => RpcError::new(INVALID_PARAMS, chain(&err)),
        other => RpcError::new(INTERNAL_ERROR, chain(&other)),
    }
}

/// An error and its causes, joined.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}
