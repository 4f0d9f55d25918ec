//! The daemon's own methods: the `hello` handshake's answer (protocol version and
//! capabilities), `status`, `scope` (B34) and `shutdown`; and the start-up
//! restore's report as `status` shows it.

use herd_protocol::answers::HelloAnswer;
use herd_protocol::params::ShutdownParams;
use serde_json::{Value, json};

use super::State;
use super::wire::{parse, to_value};
use crate::protocol::{self, PROTOCOL_VERSION, RpcError, VERSION_MISMATCH};

/// Additions to protocol 1 this daemon serves: herd-protocol's list
/// (`protocol/src/capabilities.rs` says what each adds).
pub(crate) const CAPABILITIES: &[&str] = herd_protocol::capabilities::ALL;

/// Answers the handshake.
pub(super) fn hello(state: &State, params: &Value) -> Result<Value, RpcError> {
    let client_version = params
        .get("client")
        .and_then(Value::as_str)
        .unwrap_or("unknown");
    match params.get("protocol").and_then(Value::as_u64) {
        Some(version) if version == u64::from(PROTOCOL_VERSION) => to_value(HelloAnswer {
            protocol: PROTOCOL_VERSION,
            daemon: env!("CARGO_PKG_VERSION").to_owned(),
            pid: std::process::id(),
            home: state.home().root().display().to_string(),
            // What this daemon serves beyond protocol 1's methods; a client checks
            // before using one and falls back without it.
            capabilities: CAPABILITIES.iter().map(|c| (*c).to_owned()).collect(),
        }),
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

/// `status`'s `containment`: what holds a new session's tree here and why.
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
