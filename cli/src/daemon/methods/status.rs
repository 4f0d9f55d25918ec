//! The daemon's own methods: the `hello` handshake's answer (protocol version and
//! capabilities), `status`, `scope` (B34) and `shutdown`; and the start-up
//! restore's report as `status` shows it.

use herd_core::ScopeAvailability;
use herd_protocol::answers::{HelloAnswer, ShutdownAnswer, StatusAnswer};
use herd_protocol::daemon::{ContainmentReport, RestoreCounts, RestoreSummary, ScopeAnswer};
use herd_protocol::params::ShutdownParams;
use serde_json::Value;

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
        let mut answer = ScopeAnswer {
            status: String::new(),
            bus_path: None,
            detail: None,
            remedy: None,
            memory_max_bytes: self.dispatcher.memory_max_bytes(),
            require_restart_safe_scope: self.registry.config().require_restart_safe_scope,
        };
        match availability {
            ScopeAvailability::NotUnderSystemd => answer.status = "not_under_systemd".into(),
            ScopeAvailability::Available { bus_path } => {
                answer.status = "available".into();
                answer.bus_path = Some(bus_path.display().to_string());
            }
            ScopeAvailability::Unavailable {
                detail,
                bus_path,
                remedy,
            } => {
                answer.status = "unavailable".into();
                answer.bus_path = Some(bus_path.display().to_string());
                answer.detail = Some(detail);
                answer.remedy = Some(remedy);
            }
        }
        to_value(answer)
    }

    /// `status`: the daemon's pid, version, counts, supervisor and restore.
    pub(super) fn status(&self) -> Result<Value, RpcError> {
        let (running, finished) = self.registry.counts();
        to_value(StatusAnswer {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
            home: self.home().root().display().to_string(),
            running: running as u64,
            finished: finished as u64,
            supervisor: if self.supervised {
                "shim"
            } else {
                "in_process"
            }
            .to_owned(),
            containment: containment(self.supervised),
            connections: self.connections.open() as u64,
            restore: self.restored.clone(),
            log: crate::daemon_log::global().report(),
        })
    }

    /// `shutdown`: tells the accept loop to stop, killing the jobs or (with
    /// `keep_jobs`) detaching from them.
    pub(super) fn shutdown(&self, params: Value) -> Result<Value, RpcError> {
        let p = parse::<ShutdownParams>(params)?;
        self.keep_jobs
            .store(p.keep_jobs, std::sync::atomic::Ordering::SeqCst);
        self.stop.notify_one();
        to_value(ShutdownAnswer {
            status: "stopping".to_owned(),
            pid: std::process::id(),
            jobs: if p.keep_jobs { "kept" } else { "killed" }.to_owned(),
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
pub(super) fn restore_summary(report: &herd_core::RestoreReport) -> RestoreSummary {
    let n = |ids: &[herd_core::SessionId]| ids.len() as u64;
    RestoreSummary::Counts(RestoreCounts {
        adopted: n(&report.adopted),
        reattached: n(&report.reattached),
        finished_while_away: n(&report.finished_while_away),
        supervisor_died: n(&report.supervisor_died),
        records_only: n(&report.records_only),
        closed_lost: n(&report.closed_lost),
        closed_reused: n(&report.closed_reused),
        already_finished: n(&report.already_finished),
        skipped_live_writer: n(&report.skipped_live_writer),
        invalid: report.invalid.clone(),
        moved_aside: report.moved_aside.clone(),
        checkpoint_error: report.checkpoint_error.clone(),
    })
}

/// `status`'s `containment`: what holds a new session's tree here and why.
fn containment(supervised: bool) -> ContainmentReport {
    if !supervised {
        return ContainmentReport {
            kind: "group".to_owned(),
            detail: "jobs run inside the daemon: a kill reaches their process group, descendants and tagged escapees only".to_owned(),
        };
    }
    let (kind, detail) = herd_core::containment_report();
    let kind = serde_json::to_value(kind)
        .ok()
        .and_then(|v| v.as_str().map(str::to_owned))
        .unwrap_or_else(|| "group".to_owned());
    ContainmentReport { kind, detail }
}
