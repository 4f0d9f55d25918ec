//! The read-only methods: `list` (local, and with `host`/`all_hosts` the far rows
//! too), `lookup`, `poll`, `log` and `log_chunk`. The local ones run on the
//! blocking pool (`off_worker`): they read files and run output plugins.

use herd_core::{ListFilter, Registry};
use herd_protocol::answers::{ListAnswer, LookupAnswer};
use herd_protocol::params::{FollowParams, ListParams, ListState, LogParams};
use serde_json::Value;

use super::wire::{core_error, lookup_error, parse, to_value};
use super::{IdParams, State, off_worker};
use crate::protocol::{INTERNAL_ERROR, INVALID_PARAMS, RpcError};

/// The largest log chunk one `log_chunk` or stream message carries.
pub(super) const CHUNK_BYTES: usize = 1 << 20;

impl State {
    /// `list` with `host` or `all_hosts` (capability `hosts`): the far rows, after
    /// the local ones for `all_hosts`.
    pub(super) async fn list_hosts(&self, params: Value) -> Result<Value, RpcError> {
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
}

/// `list`: the sessions by owner, state, age and a newest-N limit, as a `Value`
/// (for the far rows to join).
pub(super) fn list(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    to_value(list_answer(registry, params)?)
}

/// `list`'s answer serialised in one pass: thousands of rows go to the socket
/// with no `Value` of them built first.
pub(super) fn list_json(registry: &Registry, params: Value) -> Result<Vec<u8>, RpcError> {
    let answer = list_answer(registry, params)?;
    serde_json::to_vec(&answer).map_err(|err| {
        RpcError::new(
            INTERNAL_ERROR,
            format!("failed to encode the answer: {err}"),
        )
    })
}

/// `list`'s answer.
fn list_answer(
    registry: &Registry,
    params: Value,
) -> Result<ListAnswer<herd_core::ListRow>, RpcError> {
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
    if let Some(window) = p.finished_since_seconds
        && !herd_core::limits::RESULT_TTL_SECONDS.contains(&window)
    {
        return Err(RpcError::new(
            INVALID_PARAMS,
            format!(
                "finished_since_seconds must be from 1 to {} (got {window})",
                herd_core::limits::RESULT_TTL_SECONDS.end()
            ),
        ));
    }
    let filter = ListFilter {
        owner: p.owner,
        session_key: None,
        include_finished: state != ListState::Running,
    };
    let since = p
        .finished_since_seconds
        .map(|s| std::time::SystemTime::now() - std::time::Duration::from_secs(s));
    let (mut rows, n_older) = registry.list_rows(&filter, since, p.usage != Some(false));
    if state == ListState::Finished {
        rows.retain(|r| r.status != herd_core::SessionStatus::Running);
    }
    if let Some(since) = p.since_seconds {
        rows.retain(|r| r.uptime_seconds <= since);
    }
    // Oldest first; a limit keeps the newest.
    let more = p.limit.map_or(0, |limit| rows.len().saturating_sub(limit));
    rows.drain(..more);
    let count = |n: usize| (n > 0).then(|| u64::try_from(n).unwrap_or(u64::MAX));
    Ok(ListAnswer {
        processes: rows,
        more: count(more),
        older: count(n_older),
        hosts: None,
    })
}

/// `log`: one page of a session's output.
pub(super) fn log(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p: LogParams = parse(params)?;
    let answer = registry.log(&p.id, p.offset, p.limit).map_err(core_error)?;
    to_value(answer)
}

/// `log_chunk`: raw bytes of a session's log.
pub(super) fn log_chunk(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p: FollowParams = parse(params)?;
    let max = p.max_bytes.unwrap_or(CHUNK_BYTES).min(CHUNK_BYTES);
    let chunk = registry
        .log_chunk(&p.id, p.from_byte, max)
        .map_err(core_error)?;
    to_value(chunk)
}

/// `lookup`: a session's full id and owner from an id, a prefix or a name.
pub(super) fn lookup(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p = parse::<IdParams>(params)?;
    let (id, owner) = registry.lookup_owned(&p.id).map_err(lookup_error)?;
    to_value(LookupAnswer {
        session_id: id.to_string(),
        owner_task_id: Some(owner),
    })
}

/// `poll`: a session's state and output preview.
pub(super) fn poll(registry: &Registry, params: Value) -> Result<Value, RpcError> {
    let p = parse::<IdParams>(params)?;
    to_value(registry.poll(&p.id).map_err(core_error)?)
}

/// The most rows one `list` answers.
const LIST_MAX_ROWS: usize = 10_000;
