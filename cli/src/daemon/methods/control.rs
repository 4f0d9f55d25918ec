//! The methods that act on a session: `wait`, `kill`, `resize`, the stdin ones
//! (`write`, `submit`, `close`), `handoff` (B25), `adopt` and `clean`.

use std::time::Duration;

use herd_core::{AgentIdentity, HandoffError, KillSource};
use herd_protocol::answers::{AdoptAnswer, CleanAnswer};
use herd_protocol::errors::RefusedData;
use herd_protocol::params::{CleanParams, HandoffParams, ResizeParams, StdinParams, WaitParams};
use serde_json::Value;

use super::wire::{core_error, lookup_error, parse, to_value, word};
use super::{IdParams, State, off_worker};
use crate::protocol::{INVALID_PARAMS, REFUSED, RpcError};

impl State {
    pub(super) async fn wait(&self, params: Value) -> Result<Value, RpcError> {
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
            let answer = if p.ready {
                self.registry.wait_ready(&p.id, timeout, None).await
            } else {
                self.registry.wait(&p.id, timeout, None).await
            }
            .map_err(core_error)?;
            let value = to_value(answer)?;
            // Without a timeout the caller waits for the exit itself, across the
            // registry's per-call cap.
            if p.timeout_seconds.is_some() || value["status"] != "timeout" {
                return Ok(value);
            }
        }
    }

    pub(super) async fn kill(&self, params: Value) -> Result<Value, RpcError> {
        let p: IdParams = parse(params)?;
        let answer = self
            .registry
            .kill(&p.id, KillSource::ProcessKill)
            .await
            .map_err(core_error)?;
        to_value(answer)
    }

    pub(super) async fn resize(&self, params: Value) -> Result<Value, RpcError> {
        let p: ResizeParams = parse(params)?;
        let answer = self
            .registry
            .resize(&p.id, p.rows, p.cols)
            .await
            .map_err(core_error)?;
        to_value(answer)
    }

    pub(super) async fn stdin(&self, params: Value, op: StdinOp) -> Result<Value, RpcError> {
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
    pub(super) fn handoff(&self, params: Value) -> Result<Value, RpcError> {
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
                    _ => "refused",
                };
                Err(RpcError::with_data(
                    REFUSED,
                    err.to_string(),
                    &RefusedData {
                        reason: reason.to_owned(),
                    },
                ))
            }
        }
    }

    /// `clean`: forgets finished sessions (and their logs and receipts), by owner
    /// and age.
    pub(super) async fn clean(&self, params: Value) -> Result<Value, RpcError> {
        let p = parse::<CleanParams>(params)?;
        // Receipts still being written are waited for, so a session that just
        // finished is forgotten too, not skipped.
        if let Err(err) = self.registry.sync_durable().await {
            tracing::warn!(error = %err, "receipts not settled before clean");
        }
        off_worker(&self.registry, move |r| {
            let ids = r.clean(
                p.owner.as_deref(),
                Duration::from_secs(p.older_than_seconds.unwrap_or(0)),
            );
            to_value(CleanAnswer {
                forgotten: ids.len() as u64,
                session_ids: ids.iter().map(ToString::to_string).collect(),
            })
        })
        .await
    }

    /// `adopt`: a foreground job moved to the background, notify on.
    pub(super) fn adopt(&self, params: Value) -> Result<Value, RpcError> {
        let p = parse::<IdParams>(params)?;
        let (id, adoption) = self.registry.adopt(&p.id).map_err(core_error)?;
        to_value(AdoptAnswer {
            session_id: id.to_string(),
            adoption: word(&adoption),
        })
    }
}

/// Stdin operations.
#[derive(Debug, Clone, Copy)]
pub(super) enum StdinOp {
    Write,
    Submit,
    Close,
}
