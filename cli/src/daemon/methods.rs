//! The daemon's methods: JSON params in, registry call, JSON answer out. They know
//! nothing of the socket: the framing (`connection.rs`) hands each request to
//! [`State`] through its `Service` trait, and a streaming method writes into the
//! `Outlet` it is given.
//!
//! Registry answers are passed through as serialised (their field names are
//! herd-protocol's, which a test checks); the daemon's own answers, and the `data`
//! of its errors, are built as herd-protocol's types (`protocol/src/daemon.rs`,
//! `errors.rs`), never by hand. Errors become JSON-RPC
//! errors with a herd code (`wire.rs`): lookups that fail are `NOT_FOUND` (the
//! message lists what matched), a guard refusal is `GUARDED` with the verdict as
//! `data`.
//!
//! One file per concern: `spawn.rs` (spawn, restart), `query.rs` (list, lookup,
//! poll, log, log_chunk), `control.rs` (wait, kill, resize, stdin, handoff, adopt,
//! clean), `status.rs` (hello, status, scope, shutdown), `leases.rs` (drain and its
//! leases, kept per connection), `streams.rs`, `sessions.rs` and `dump.rs` (the
//! streaming methods). Requests about a far host's job go to the host link (`hosts.rs`)
//! first.

mod control;
mod dump;
mod groups;
mod keys;
mod leases;
mod query;
mod readout;
mod sessions;
mod spawn;
mod status;
mod streams;
mod wire;

use std::sync::Arc;
use std::time::Duration;

use herd_core::{DispatchConfig, Dispatcher, NotificationPolicy, Registry, RegistryConfig};
use herd_persistence::Home;
use serde_json::Value;
use tokio::sync::Notify;

use self::control::StdinOp;
use self::leases::Leases;
use self::status::{log_restore, restore_summary};
use self::wire::chain;
use super::connection::{Connections, Outlet, Service};
use super::hosts::Routed;
use crate::config::{Config, Notifications};
use crate::protocol::{INTERNAL_ERROR, METHOD_NOT_FOUND, RpcError};

pub(crate) use self::streams::Stream;
// Every method's params are herd-protocol's: the daemon reads what the clients write.
use herd_protocol::params::{IdParams, NoParams};

/// What a method answers: a value, an error, or a [`Stream`].
pub(crate) type Reply = super::connection::Reply<Stream>;

/// What the methods serve: the registry, the host links, the stop signal and
/// what `status` reports.
#[derive(Debug)]
pub(crate) struct State {
    registry: Registry,
    /// Restart-safe dispatch (B34), shared with the registry; `status` asks it too.
    dispatcher: Arc<Dispatcher>,
    stop: Arc<Notify>,
    /// What the start-up restore did, for `status` and `herd doctor`.
    restored: herd_protocol::daemon::RestoreSummary,
    /// A `shutdown {"keep_jobs": true}` asked the daemon to detach, not to kill.
    keep_jobs: std::sync::atomic::AtomicBool,
    /// Jobs run under shims (they outlive the daemon).
    supervised: bool,
    /// The connections being served (the accept loop counts them; `status` says
    /// how many).
    pub(crate) connections: Connections,
    /// Other hosts' herds (capability `hosts`, `hosts.rs`).
    hosts: super::hosts::Hosts,
    /// The keys of recent spawns, so one sent again is not started twice
    /// (capability `spawn.request_key`).
    spawn_keys: keys::SpawnKeys,
    /// What the plugins started with (capability `plugins`).
    plugins: Option<crate::plugins::Started>,
    /// The heap's free pages, given back after a large answer (a listing).
    give_back: super::give_back::GiveBack,
}

/// How the daemon ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ending {
    /// Every session is killed as `host_shutdown` (B17).
    KillJobs,
    /// Supervised jobs keep running; the next daemon re-attaches.
    Detach,
}

/// Builds the registry's config from the home's config file.
fn registry_config(
    config: &Config,
    pipeline: Arc<herd_hooks::Pipeline>,
    dispatcher: Arc<Dispatcher>,
    shim: Option<std::path::PathBuf>,
) -> RegistryConfig {
    let defaults = RegistryConfig::default();
    if let Some(cap) = config.finished_cap {
        tracing::warn!(
            finished_cap = cap,
            "config key finished_cap is deprecated and ignored: finished sessions are kept in the \
             store for result_ttl_seconds within log_budget_bytes; remove it from config.toml"
        );
    }
    let mut env_deny = defaults.env_deny.clone();
    env_deny.extend(config.env_deny.iter().cloned());
    RegistryConfig {
        log_cap_bytes: config.log_cap_bytes,
        log_budget_bytes: config.log_budget_bytes,
        result_ttl: Duration::from_secs(config.result_ttl_seconds),
        queue_cap: config.queue_cap,
        env_deny,
        kill_grace: Duration::from_secs_f64(config.kill_grace_seconds),
        kill_leftovers: config.leftovers == crate::config::Leftovers::Kill,
        default_limits: config.limits.to_limits(),
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
        shim,
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
        let shim = config.shim_program()?;
        let registry_config = registry_config(config, pipeline, Arc::clone(&dispatcher), shim);
        let supervised = registry_config.shim.is_some();
        let home_for_keys = home.clone();
        // Log read-outs map the log rather than copy it (a log cut short under
        // the map is met, not fatal).
        if let Err(err) = herd_core::guard_mapped_reads() {
            tracing::warn!(%err, "log read-outs copy the log: the SIGBUS handler was refused");
        }
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
                herd_protocol::daemon::RestoreSummary::Failed { error }
            }
        };
        Ok(State {
            registry,
            dispatcher,
            stop,
            restored,
            keep_jobs: std::sync::atomic::AtomicBool::new(false),
            supervised,
            connections: Connections::default(),
            hosts,
            spawn_keys: keys::SpawnKeys::durable(&home_for_keys),
            plugins: None,
            give_back: super::give_back::GiveBack::default(),
        })
    }

    /// The plugins' start-up report, for the `plugins` method.
    #[must_use]
    pub(crate) fn with_plugins(mut self, started: crate::plugins::Started) -> State {
        self.plugins = Some(started);
        self
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

    /// Answers one request: a far host's job goes to its link, the rest to the
    /// method of its name.
    async fn handle(&self, method: &str, params: Value) -> Reply {
        // A far host's job (`NAME:proc_…`, spawn with `host`) goes to its link,
        // whose answer or far stream becomes this method's reply.
        // A log stream's `raw` framing is this connection's (capability
        // `logs.raw`): a far stream is relayed as the far herd wrote it, in notes.
        let (params, raw) = streams::take_raw(method, params);
        // So are its binary frames (capability `logs.frames`, `crate::logframes`).
        let (params, frames) = streams::take_frames(method, params);
        // `spawn`'s `follow` (capability `spawn.follow`) is this connection's too:
        // a far spawn is answered as a plain one.
        let (params, follow) = match method {
            "spawn" => streams::take_flag(params, "follow"),
            _ => (params, false),
        };
        let params = match self.hosts.route(method, params).await {
            Routed::Answer(Ok(value)) => return Reply::Value(value),
            Routed::Answer(Err(error)) => return Reply::Error(error),
            Routed::Stream(remote) => return Reply::Stream(Stream::Remote(remote)),
            Routed::Local(params) => params,
        };
        let result = match method {
            "spawn" if follow => return self.spawn_follow(params, raw, frames).await,
            "spawn" => self.spawn(params).await,
            "list" if super::hosts::Hosts::wants(&params) => self.list_hosts(params).await,
            "list" => {
                let answer = off_worker(&self.registry, move |r| query::list_json(r, params));
                return match answer.await {
                    Ok(json) => Reply::Json(json),
                    Err(error) => Reply::Error(error),
                };
            }
            "lookup" => off_worker(&self.registry, move |r| query::lookup(r, params)).await,
            "poll" => self.poll(params).await,
            "log" => off_worker(&self.registry, move |r| query::log(r, params)).await,
            "log_chunk" => off_worker(&self.registry, move |r| query::log_chunk(r, params)).await,
            "wait" => self.wait(params).await,
            "kill" => self.kill(params).await,
            "restart" => self.restart(params).await,
            m if m.starts_with("group.") || m.starts_with("queue.") => self.group(m, params).await,
            "write" => self.stdin(params, StdinOp::Write).await,
            "submit" => self.stdin(params, StdinOp::Submit).await,
            "close" => self.stdin(params, StdinOp::Close).await,
            "clean" => self.clean(params).await,
            "adopt" => self.adopt(params),
            "handoff" => self.handoff(params),
            "status" => self.status(),
            "plugins" => wire::to_value(crate::plugins::report(
                self.plugins.as_ref(),
                &self.registry.config().pipeline,
            )),
            "scope" => self.scope().await,
            "shutdown" => self.shutdown(params),
            "resize" => self.resize(params).await,
            "events.follow" => return State::events_follow(params),
            "sessions.follow" => return State::sessions_follow(params),
            "logs.follow" => return self.logs_follow(params, raw, frames),
            "logs.dump" => return self.logs_dump(params, raw, frames),
            other => Err(RpcError::new(
                METHOD_NOT_FOUND,
                format!(
                    "unknown method `{other}`; the daemon serves: spawn, list, lookup, poll, log, \
                     log_chunk, wait, kill, restart, write, submit, close, resize, drain, drain.ack, drain.release, events.ack, adopt, clean, \
                     handoff, status, scope, shutdown, events.follow, logs.follow, logs.dump, sessions.follow, hosts, \
                     group.add, group.set, group.list, group.rm"
                ),
            )),
        };
        match result {
            Ok(value) => Reply::Value(value),
            Err(error) => Reply::Error(error),
        }
    }
}

impl Service for State {
    /// A connection's drain leases (`leases.rs`): dropped with it, which puts
    /// their events back.
    type Connection = Leases;
    type Stream = Stream;

    fn hello(&self, params: &Value) -> Result<Value, RpcError> {
        status::hello(self, params)
    }

    async fn call(&self, leases: &mut Leases, method: &str, params: Value) -> Reply {
        if let Some(answer) = leases.handle(self, method, &params).await {
            return match answer {
                Ok(result) => Reply::Value(result),
                Err(error) => Reply::Error(error),
            };
        }
        self.handle(method, params).await
    }

    /// A wait ends when its client leaves: a dev server never exits, and nobody
    /// would read the answer.
    fn ends_with_client(&self, method: &str) -> bool {
        method == "wait"
    }

    async fn stream(&self, stream: Stream, outlet: Outlet<'_>) {
        stream.run(self, outlet).await;
    }

    fn large_answer_sent(&self) {
        self.give_back.after_large_answer();
    }
}

impl State {
    /// `poll`, sent only once a finished session's receipt is committed.
    async fn poll(&self, params: Value) -> Result<Value, RpcError> {
        let answer = off_worker(&self.registry, move |r| query::poll(r, params)).await?;
        if let Some(id) = answer["session_id"].as_str() {
            self.registry.result_committed(id).await;
        }
        Ok(answer)
    }
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
