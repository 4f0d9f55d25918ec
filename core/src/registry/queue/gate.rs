//! The dependency gate: whether a queued job's dependencies let it start, keep it
//! waiting, or mean it can never run. Reads the table, the queue and (for a
//! dependency only the store still knows) its receipt, under no lock held across.

use std::collections::HashMap;
use std::sync::Arc;

use super::{Inner, known_ids};
use crate::answers::CompletionReason;
use crate::error::{LookupError, SpawnError};
use crate::id::SessionId;

/// What a job's dependencies say.
#[derive(Debug, Clone)]
pub(super) enum Gate {
    Open,
    Wait,
    /// It can never run; why.
    Failed(String),
}

/// One dependency's state.
enum Dep {
    Done,
    Pending,
    Failed(String),
}

impl Inner {
    /// The gate of every waiting job that has dependencies.
    pub(super) async fn gates(self: &Arc<Self>) -> HashMap<SessionId, Gate> {
        let (jobs, known) = {
            let st = self.queue.state();
            let jobs: Vec<(SessionId, Vec<SessionId>, Vec<SessionId>)> = st
                .waiting
                .iter()
                .filter(|e| !e.starting && (!e.after.is_empty() || !e.after_ready.is_empty()))
                .map(|e| (e.id.clone(), e.after.clone(), e.after_ready.clone()))
                .collect();
            (jobs, known_ids(&st))
        };
        let mut gates = HashMap::new();
        for (id, after, after_ready) in jobs {
            let deps = after
                .iter()
                .map(|d| (d, false))
                .chain(after_ready.iter().map(|d| (d, true)));
            let mut gate = Gate::Open;
            for (dep, ready) in deps {
                match self.dependency(dep, ready, &known) {
                    Dep::Done => {}
                    Dep::Pending => gate = Gate::Wait,
                    Dep::Failed(why) => {
                        gate = Gate::Failed(why);
                        break;
                    }
                }
            }
            gates.insert(id, gate);
        }
        gates
    }

    /// One dependency: `ready` asks for its readiness rather than its end.
    fn dependency(
        &self,
        dep: &SessionId,
        ready: bool,
        queued: &std::collections::HashSet<SessionId>,
    ) -> Dep {
        if let Ok(s) = self.lookup(dep.as_str()) {
            let st = s.state();
            let ready_now = ready && st.ready_at.is_some();
            return match st.finished.as_ref() {
                _ if ready_now => Dep::Done,
                None => Dep::Pending,
                Some(f) => {
                    let code = f.exit.and_then(|e| e.code);
                    if !ready && f.reason == CompletionReason::Exited && code == Some(0) {
                        Dep::Done
                    } else {
                        Dep::Failed(failed(
                            dep,
                            s.name.as_deref(),
                            ready,
                            f.reason,
                            code,
                            f.source.map(|k| k.as_str()),
                        ))
                    }
                }
            };
        }
        if queued.contains(dep) {
            return Dep::Pending;
        }
        match self.durable.receipt_lookup(
            dep.as_str(),
            LookupError::NotFound {
                id: dep.as_str().to_owned(),
            },
        ) {
            Ok((_, r)) => {
                let reason = super::super::durable::reason_from_name(&r.reason);
                if ready && r.ready_at.is_some() {
                    return Dep::Done;
                }
                if !ready && reason == CompletionReason::Exited && r.exit_code == Some(0) {
                    Dep::Done
                } else {
                    let source = crate::KillSource::from_name(&r.source).map(|k| k.as_str());
                    Dep::Failed(failed(
                        dep,
                        r.name.as_deref(),
                        ready,
                        reason,
                        r.exit_code,
                        source,
                    ))
                }
            }
            Err(error) => Dep::Failed(format!(
                "dependency {dep} is no longer known ({error}); it never ran"
            )),
        }
    }

    /// Resolves dependencies given by id, prefix or name to ids, at submission:
    /// running, queued and finished sessions the store keeps; anything else refused.
    pub(super) fn resolve_dependencies(
        &self,
        given: &[String],
        field: &'static str,
    ) -> Result<Vec<SessionId>, SpawnError> {
        let mut ids: Vec<SessionId> = Vec::new();
        for one in given {
            let one = one.trim();
            let id = match self.lookup(one) {
                Ok(s) => s.id.clone(),
                Err(miss) => match self.queue.placeholder_of(one) {
                    Some(s) => s.id.clone(),
                    None => self
                        .durable
                        .receipt_lookup(one, miss)
                        .map(|(id, _)| id)
                        .map_err(|error| SpawnError::InvalidRequest {
                            field,
                            message: format!("dependency {one}: {error}"),
                        })?,
                },
            };
            if !ids.contains(&id) {
                ids.push(id);
            }
        }
        Ok(ids)
    }
}

/// Why a job never runs: its dependency ended badly.
fn failed(
    dep: &SessionId,
    name: Option<&str>,
    ready: bool,
    reason: CompletionReason,
    code: Option<i32>,
    source: Option<&str>,
) -> String {
    let who = match name {
        Some(name) => format!("{dep} ({name})"),
        None => dep.to_string(),
    };
    let how = match (reason, code, source) {
        (CompletionReason::Killed, _, Some(source)) => format!("was killed ({source})"),
        (CompletionReason::Killed, _, None) => "was killed".to_owned(),
        (CompletionReason::FailedStart, _, _) => "never ran".to_owned(),
        (CompletionReason::Lost, _, _) => "ended with its exit status lost".to_owned(),
        (CompletionReason::Signaled, _, _) => "was ended by a signal".to_owned(),
        (CompletionReason::Exited, Some(code), _) => format!("ended with exit {code}"),
        (CompletionReason::Exited, None, _) => "ended".to_owned(),
    };
    if ready {
        format!("dependency {who} {how} before it was ready; this job never ran")
    } else {
        format!("dependency {who} {how}; this job never ran")
    }
}
