//! The daemon's own methods: the `hello` handshake's answer (protocol version and
//! capabilities), `status`, `scope` (B34) and `shutdown`; and the start-up
//! restore's report as `status` shows it.

use serde::Deserialize;
use serde_json::{Value, json};

use super::State;
use super::wire::{parse, to_value};
use crate::protocol::{self, PROTOCOL_VERSION, RpcError, VERSION_MISMATCH};

/// Additions to protocol 1 this daemon serves: leased drains (`drain` with
/// `lease`, `drain.ack`, `drain.release`), `adopt`, and `list`'s `state`,
/// `since_seconds` and `limit`, `spawn`'s `caller_env`, `events.follow`'s
/// `peek` (`pending` counts instead of events), `clean`, `spawn`'s
/// `time_limit_seconds`, `restart`, and `sessions.follow` (a note whenever the
/// home's sessions change, for `herd top`), and `hosts`: other hosts' jobs by
/// qualified id (`NAME:proc_…`), `spawn`'s `host`, `list`'s `host` and
/// `all_hosts`, the `hosts` method and the `HOST_UNREACHABLE` error (`hosts.rs`),
/// and `spawn`'s `request_key` (a spawn sent again with the same key starts
/// nothing and gets the first one's answer, `keys.rs`), and `spawn`'s
/// `kill_leftovers` and `limits` (issue 36), and `events.ack` (acknowledging events
/// by their `event_id`, on any connection, `leases.rs`), and `logs.follow`'s
/// `terminal` (a real terminal shows the stream: the PTY's queries go to it),
/// and `logs.raw` (`raw` on
/// `logs.dump`/`logs.follow`: output as `log.bytes` frames, a header line and the
/// bytes unescaped, `connection/outlet.rs`), and `spawn`'s `follow` (the spawn's
/// answer as a note, then its log stream and result: `run --wait` in one request).
pub(crate) const CAPABILITIES: &[&str] = &[
    "clean",
    "drain.lease",
    "adopt",
    "list.filter",
    "list.window",
    "spawn.caller_env",
    "events.pending",
    "logs.follow.result",
    "logs.dump",
    "sessions.follow",
    "spawn.time_limit",
    "restart",
    "hosts",
    "spawn.request_key",
    "spawn.kill_leftovers",
    "spawn.limits",
    "events.ack",
    "logs.follow.terminal",
    "logs.raw",
    // `logs.dump`/`logs.follow`'s `frames`: the output as binary frames after the
    // answer, read out on every core first (`crate::logframes`, `methods/readout.rs`).
    "logs.frames",
    // `spawn`'s `ready`/`ready_port`, `wait`'s `ready` and the `ready` event (issue 33).
    "spawn.ready",
    // `spawn`'s `restart` policy and the `retry` event (issue 33).
    "spawn.restart",
    // `plugins`: what the daemon's plugins loaded, with their counts (cli/src/plugins/live.rs).
    "plugins",
    // `spawn`'s `follow`: the spawn answered as a `spawned` note, then the session's
    // logs.follow with its result on the same request (`streams.rs`, issue 32).
    "spawn.follow",
    // `queue`: groups, queued jobs and dependencies (spawn's `group`, `after`,
    // `after_ready`; `group.*`; status `queued`).
    "queue",
];

/// Answers the handshake.
pub(super) fn hello(state: &State, params: &Value) -> Result<Value, RpcError> {
    let client_version = params
        .get("client")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    match params.get("protocol").and_then(Value::as_u64) {
        Some(version) if version == u64::from(PROTOCOL_VERSION) => Ok(json!({
            "protocol": PROTOCOL_VERSION,
            "daemon": env!("CARGO_PKG_VERSION"),
            "pid": std::process::id(),
            "home": state.home().root().display().to_string(),
            // What this daemon serves beyond protocol 1's methods; a client checks
            // before using one and falls back without it.
            "capabilities": CAPABILITIES,
        })),
        Some(version) => Err(RpcError::new(
            VERSION_MISMATCH,
            format!(
                "protocol version mismatch: the client (herd {client_version}) speaks protocol {version}, \
                 the daemon (herd {}) speaks protocol {PROTOCOL_VERSION}; run `herd shutdown` with the \
                 daemon's binary, then retry (the new daemon starts automatically)",
                env!("CARGO_PKG_VERSION")
            ),
        )),
        None => Err(RpcError::new(
            protocol::INVALID_PARAMS,
            "hello needs `protocol`, the client's protocol version number",
        )),
    }
}

impl State {
    /// Whether restart-safe scopes can be created for this daemon's children (B34),
    /// with the remedy when they cannot; runs or reuses the dispatcher's probe.
    pub(super) async fn scope(&self) -> Result<Value, RpcError> {
        let env = herd_core::utf8_environment();
        let availability = self.dispatcher.availability(&env).await;
        let mut value = to_value(availability)?;
        value["memory_max_bytes"] = json!(self.dispatcher.memory_max_bytes());
        value["require_restart_safe_scope"] =
            json!(self.registry.config().require_restart_safe_scope);
        Ok(value)
    }

    /// `status`: the daemon's pid, version, counts, supervisor and restore.
    pub(super) fn status(&self) -> Value {
        let (running, finished) = self.registry.counts();
        json!({
            "pid": std::process::id(),
            "version": env!("CARGO_PKG_VERSION"),
            "home": self.home().root().display().to_string(),
            "running": running,
            "finished": finished,
            "supervisor": if self.supervised { "shim" } else { "in_process" },
            "containment": containment(self.supervised),
            "connections": self.connections.open(),
            "restore": self.restored,
            "log": crate::daemon_log::global().report(),
        })
    }

    /// `shutdown`: tells the accept loop to stop, killing the jobs or (with
    /// `keep_jobs`) detaching from them.
    pub(super) fn shutdown(&self, params: Value) -> Result<Value, RpcError> {
        parse::<ShutdownParams>(params).map(|p| {
            self.keep_jobs
                .store(p.keep_jobs, std::sync::atomic::Ordering::SeqCst);
            self.stop.notify_one();
            json!({
                "status": "stopping",
                "pid": std::process::id(),
                "jobs": if p.keep_jobs { "kept" } else { "killed" },
            })
        })
    }
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields, default)]
struct ShutdownParams {
    keep_jobs: bool,
}

/// Logs what the start-up restore did: the summary at info, problems at warn.
pub(super) fn log_restore(report: &herd_core::RestoreReport) {
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
pub(super) fn restore_summary(report: &herd_core::RestoreReport) -> Value {
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

/// `status`'s `containment`: what holds a new session's tree here and why (issue 36).
fn containment(supervised: bool) -> Value {
    if !supervised {
        return json!({
            "kind": "group",
            "detail": "jobs run inside the daemon: a kill reaches their process group, descendants and tagged escapees only",
        });
    }
    let (kind, detail) = herd_core::containment_report();
    json!({"kind": kind, "detail": detail})
}
