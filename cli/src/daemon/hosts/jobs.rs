//! Far jobs in the link's map: spawn, restart and handoff of a far job (its
//! local owner recorded before the answer goes back), a host's rows for `list`
//! (the last known ones while it is unreachable), qualified ids in answers, and
//! the map file.

use std::collections::BTreeMap;
use std::sync::Arc;

use herd_protocol::Method;
use herd_protocol::answers::{HandoffAnswer, SessionStatus};
use herd_protocol::daemon::HostState;
use herd_protocol::errors::{NotFoundData, RefusedData};
use herd_protocol::methods::{Poll, Restart};
use herd_protocol::params::{IdParams, ListParams, ListState, RestartParams, SpawnParams};
use serde::Serialize;
use serde_json::Value;

use super::{Answer, Job, LIST_BUDGET, Link, lock, to_params};
use crate::protocol;
use crate::protocol::{INVALID_PARAMS, RpcError};

impl Link {
    /// `spawn` on the far host: this home's far owner, the far proxy's
    /// environment plus the explicit `env`/`forward_env`; the far id goes into the
    /// map before the answer goes back.
    pub(super) async fn spawn(self: &Arc<Self>, params: Value) -> Answer {
        let mut far: SpawnParams = serde_json::from_value(params)
            .map_err(|err| RpcError::new(INVALID_PARAMS, format!("invalid spawn params: {err}")))?;
        let owner = std::mem::take(&mut far.owner);
        if owner.is_empty() {
            return Err(RpcError::new(INVALID_PARAMS, "spawn needs `owner`"));
        }
        let task_id = far.task_id.take().unwrap_or_else(|| owner.clone());
        let events = far.notify || !far.watch.is_empty() || far.heartbeat_seconds.is_some();
        let name = far.name.clone();
        far.host = None;
        far.caller_env = None;
        far.cwd = None;
        far.owner.clone_from(&self.far_owner);
        // The far side knows the local owner too: a lost map still routes.
        far.task_id = Some(owner.clone());
        // Opened first, so the proxy's environment is known.
        self.control().await?;
        if let Some(env) = self.proxy_env() {
            // The local cwd means nothing there: the job starts in the far home
            // directory, as a login over the door would.
            far.cwd = env.get("HOME").map(std::path::PathBuf::from);
            far.caller_env = Some(env);
        }
        // A door that closes after the spawn was written leaves it unknown
        // whether the job started: with a key the spawn can be sent again.
        if self.far_serves("spawn.request_key") {
            far.request_key = Some(self.request_key());
        }
        let answer = self.call_raw("spawn", to_params(&far)?).await?;
        let Some(far_id) = answer.get("session_id").and_then(Value::as_str) else {
            return Err(RpcError::new(
                protocol::INTERNAL_ERROR,
                format!("host {}: the far spawn answered no session_id", self.name),
            ));
        };
        // The row ps shows until the host lists the job itself: a host that
        // stops answering right after the spawn still shows its pid.
        let now = herd_core::rfc3339(std::time::SystemTime::now());
        let row = as_row(&SpawnedRow {
            session_id: format!("{}:{far_id}", self.name),
            host: &self.name,
            command: answer.get("command"),
            mode: answer.get("mode"),
            pid: answer.get("pid"),
            name: name.as_deref(),
            owner_task_id: &owner,
            task_id: &task_id,
            status: "running",
            started_at: &now,
            as_of: &now,
        });
        let job = Job {
            owner,
            task_id,
            events,
            finished: false,
            row: Some(row),
            name,
            started: now_nanos(),
        };
        lock(&self.book).jobs.insert(far_id.to_owned(), job);
        self.save().await;
        if events {
            self.start_events();
            self.wake.notify_one();
        }
        Ok(self.qualify(answer))
    }

    /// `restart` of a far job: run again there, in the far proxy's environment;
    /// the new far id joins the map with the old one's owner.
    pub(super) async fn restart(self: &Arc<Self>, params: Value) -> Answer {
        let mut params: RestartParams = serde_json::from_value(params).map_err(|err| {
            RpcError::new(INVALID_PARAMS, format!("invalid restart params: {err}"))
        })?;
        params.caller_env = self.proxy_env();
        let answer = self.call_raw("restart", to_params(&params)?).await?;
        let restarted = self.far_answer::<Restart>(&answer)?;
        let new = restarted.session_id;
        // A restart's answer names the session it replaced: without it the new
        // job would lose the old one's owner and events.
        let Some(old) = restarted.replaces else {
            return Err(RpcError::new(
                protocol::INTERNAL_ERROR,
                format!(
                    "host {}: the far daemon's answer to `restart` has no field `replaces`",
                    self.name
                ),
            ));
        };
        let events = {
            let mut book = lock(&self.book);
            let job = book.jobs.get(&old).cloned().map(|job| Job {
                finished: false,
                row: None,
                // One saved before names were kept stays so: its name is far.
                started: if job.name.is_none() && job.started == 0 {
                    0
                } else {
                    now_nanos()
                },
                ..job
            });
            let events = job.as_ref().is_some_and(|j| j.events);
            if let Some(job) = job {
                book.jobs.insert(new, job);
            }
            events
        };
        self.save().await;
        if events {
            self.start_events();
            self.wake.notify_one();
        }
        Ok(self.qualify(answer))
    }

    /// `handoff` of a far job (B25): its events go to `to` from now on. The far
    /// side is not asked (its owner is this home); the job must be running and
    /// `from`'s.
    pub(super) async fn handoff(self: &Arc<Self>, params: Value) -> Answer {
        let text = |key: &str| {
            params
                .get(key)
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        let (far, from, to, note) = (text("id"), text("from"), text("to"), text("note"));
        if to.trim().is_empty() {
            return Err(RpcError::new(
                INVALID_PARAMS,
                "handoff needs `to`: the owner that takes the session over",
            ));
        }
        // The far id may be a prefix: the far side resolves it.
        let polled = self
            .call_raw("poll", to_params(&IdParams::new(far.as_str()))?)
            .await?;
        let polled = self.far_answer::<Poll>(&polled)?;
        let far_id = polled.session_id;
        let refused = |message: String| {
            RpcError::with_data(
                protocol::REFUSED,
                message,
                &RefusedData {
                    reason: "not_running_owned".to_owned(),
                },
            )
        };
        if polled.status != SessionStatus::Running {
            return Err(refused(format!(
                "{}:{far_id} has finished; only a running session is handed off",
                self.name
            )));
        }
        {
            let mut book = lock(&self.book);
            let Some(job) = book.jobs.get_mut(&far_id) else {
                return Err(refused(format!(
                    "{}:{far_id} was not started from this home",
                    self.name
                )));
            };
            if job.owner != from {
                return Err(refused(format!(
                    "{}:{far_id} is owned by {}, not by {from}",
                    self.name, job.owner
                )));
            }
            job.owner = to;
        }
        self.save().await;
        to_answer(&HandoffAnswer {
            status: "handed_off".to_owned(),
            session_id: format!("{}:{far_id}", self.name),
            command: polled.command,
            note,
        })
    }

    /// This host's rows for a `list` (the far `owner` is this home's; the local
    /// owner filter applies to the map), and the host's state. A host that does
    /// not answer within [`LIST_BUDGET`] gives the last rows it showed, marked
    /// `stale`, and its state says `answered: false`; its answer, when it comes,
    /// still refreshes the map for the next listing.
    pub(super) async fn list(self: &Arc<Self>, params: &ListParams) -> (Vec<Value>, HostState) {
        let owner = params.owner.clone();
        let far = ListParams {
            owner: Some(self.far_owner.clone()),
            ..params.clone()
        };
        let link = Arc::clone(self);
        let asked = tokio::spawn(async move { link.fresh_rows(far).await });
        let (fresh, late) = match tokio::time::timeout(LIST_BUDGET, asked).await {
            Ok(Ok(Some(rows))) => (Some(rows), false),
            Ok(_) => (None, false),
            Err(_) => (None, true),
        };
        let mut rows = fresh.unwrap_or_else(|| self.known_rows(params));
        if let Some(owner) = owner {
            rows.retain(|r| r.get("owner_task_id").and_then(Value::as_str) == Some(&owner));
        }
        let mut state = self.state();
        state.answered = Some(!late && !rows.iter().any(|r| r["stale"] == true));
        if late {
            state.late = true;
            state.message = Some(format!(
                "no answer within {} ms; its jobs show their last known state",
                LIST_BUDGET.as_millis()
            ));
        }
        (rows, state)
    }

    /// The far side's rows of this home's owner, qualified and kept in the map;
    /// none when the host does not answer.
    async fn fresh_rows(self: &Arc<Self>, far: ListParams) -> Option<Vec<Value>> {
        let answer = self.call_raw("list", to_params(&far).ok()?).await.ok()?;
        let mut rows = Vec::new();
        for row in answer
            .get("processes")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
        {
            let Some(far_id) = row.get("session_id").and_then(Value::as_str) else {
                continue;
            };
            let far_id = far_id.to_owned();
            let row = self.qualify(row);
            {
                let mut book = lock(&self.book);
                if let Some(job) = book.jobs.get_mut(&far_id) {
                    let mut kept = row.clone();
                    kept["as_of"] = Value::from(herd_core::rfc3339(std::time::SystemTime::now()));
                    job.row = Some(kept);
                    job.finished = row.get("status").and_then(Value::as_str) != Some("running");
                }
            }
            rows.push(row);
        }
        self.save().await;
        Some(rows)
    }

    /// The last known rows of this home's jobs of this host, marked `stale`.
    fn known_rows(&self, params: &ListParams) -> Vec<Value> {
        let book = lock(&self.book);
        let running_only =
            params.state == Some(ListState::Running) || (params.state.is_none() && !params.all);
        let mut rows = Vec::new();
        for (far_id, job) in &book.jobs {
            if running_only && job.finished {
                continue;
            }
            let mut row = job.row.clone().unwrap_or_else(|| {
                as_row(&BareRow {
                    session_id: format!("{}:{far_id}", self.name),
                    owner_task_id: &job.owner,
                    task_id: &job.task_id,
                    status: if job.finished { "exited" } else { "running" },
                })
            });
            // Known to have ended, how not known (e.g. a watch-only job's end
            // seen as its absence): never shown as still running.
            if job.finished && row["status"] == "running" {
                row["status"] = Value::from("ended");
            }
            row["host"] = Value::from(self.name.as_str());
            row["stale"] = Value::Bool(true);
            rows.push(row);
        }
        rows
    }

    /// The answer with every far `session_id` (and `replaces`) qualified, and the
    /// owner and task id of a known job put back to the local ones.
    pub(super) fn qualify(&self, mut value: Value) -> Value {
        let book = lock(&self.book);
        qualify_in(&self.name, &book.jobs, &mut value);
        value
    }

    /// A far daemon's `answer` to `M` as herd-protocol's type; one that does not
    /// read is an internal error naming the host, the method and the field.
    pub(super) fn far_answer<M: Method>(&self, answer: &Value) -> Result<M::Answer, RpcError> {
        crate::client::read_answer::<M>(answer).map_err(|err| {
            RpcError::new(
                protocol::INTERNAL_ERROR,
                format!("host {}: {err}", self.name),
            )
        })
    }

    /// Commits the map to the store (one transaction, on the blocking pool).
    pub(super) async fn save(self: &Arc<Self>) {
        let link = Arc::clone(self);
        let saved = tokio::task::spawn_blocking(move || link.save_now()).await;
        if let Ok(Err(err)) | Err(err) = saved.map_err(std::io::Error::other) {
            tracing::error!(host = %self.name, error = %err, "host map not written");
        }
    }

    pub(super) fn save_now(&self) -> std::io::Result<()> {
        let _saving = lock(&self.saving);
        let bytes = serde_json::to_vec(&*lock(&self.book)).map_err(std::io::Error::other)?;
        self.store
            .save(&self.name, &bytes)
            .map_err(std::io::Error::other)
    }
}

/// Whether `jobs` holds one saved before names were kept (no `name`, no
/// `started`, as serde's defaults fill them in a map of an earlier release).
pub(super) fn has_unnamed_legacy(jobs: &BTreeMap<String, Job>) -> bool {
    jobs.values().any(|j| j.name.is_none() && j.started == 0)
}

/// What a job's row takes from an answer or a completion about it.
const ROW_FIELDS: &[&str] = &[
    "exit_code",
    "signal",
    "completion_reason",
    "termination_source",
    "output_preview",
];

impl Link {
    /// Keeps what `answer` (a qualified poll, kill or wait answer, or a
    /// completion) says of a known far job in its row, for the view while the
    /// host does not answer: a job seen ended is never shown running. True when
    /// the map changed.
    pub(super) fn remember(&self, answer: &Value) -> bool {
        let Some(far_id) = answer
            .get("session_id")
            .and_then(Value::as_str)
            .and_then(|id| id.strip_prefix(&format!("{}:", self.name)))
        else {
            return false;
        };
        let Some(status) = answer.get("status").and_then(Value::as_str) else {
            return false;
        };
        let mut book = lock(&self.book);
        let Some(job) = book.jobs.get_mut(far_id) else {
            return false;
        };
        let running = status == "running";
        let row = job
            .row
            .get_or_insert_with(|| Value::Object(serde_json::Map::new()));
        row["session_id"] = answer["session_id"].clone();
        // A list row's status: running, or exited however it ended (the
        // completion reason says how).
        row["status"] = Value::from(if running { "running" } else { "exited" });
        for key in ROW_FIELDS {
            if let Some(value) = answer.get(*key).filter(|v| !v.is_null()) {
                row[*key] = value.clone();
            }
        }
        row["as_of"] = Value::from(herd_core::rfc3339(std::time::SystemTime::now()));
        job.finished = !running;
        true
    }

    /// The far id of this home's job of this host named `wanted`, or whose id
    /// `wanted` is a unique prefix of; none when no job of the map matches.
    ///
    /// # Errors
    /// A name or prefix that matches more than one running job (B37).
    pub(super) fn resolve_local(&self, wanted: &str) -> Result<Option<String>, RpcError> {
        let book = lock(&self.book);
        if book.jobs.contains_key(wanted) {
            return Ok(Some(wanted.to_owned()));
        }
        let named: Vec<(&String, &Job)> = book
            .jobs
            .iter()
            .filter(|(_, j)| j.name.as_deref() == Some(wanted))
            .collect();
        let running: Vec<&String> = named
            .iter()
            .filter(|(_, j)| !j.finished)
            .map(|(id, _)| *id)
            .collect();
        match running.as_slice() {
            [one] => return Ok(Some((*one).clone())),
            [] => {
                if let Some((id, _)) = named.iter().max_by_key(|(_, j)| j.started) {
                    return Ok(Some((*id).clone()));
                }
            }
            many => return Err(self.ambiguous(wanted, many)),
        }
        let bare = wanted.strip_prefix("proc_").unwrap_or(wanted);
        if bare.len() < 4 || !bare.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Ok(None);
        }
        let prefix = format!("proc_{bare}");
        let matches: Vec<&String> = book
            .jobs
            .keys()
            .filter(|id| id.starts_with(&prefix))
            .collect();
        match matches.as_slice() {
            [one] => Ok(Some((*one).clone())),
            _ => Ok(None),
        }
    }

    /// Whether the book holds a job saved before names were kept (no `name`,
    /// no `started`): a name not found here may be its, so it goes far.
    pub(super) fn has_unnamed_legacy(&self) -> bool {
        has_unnamed_legacy(&lock(&self.book).jobs)
    }

    fn ambiguous(&self, wanted: &str, ids: &[&String]) -> RpcError {
        let matches: Vec<String> = ids.iter().map(|id| format!("{}:{id}", self.name)).collect();
        RpcError::with_data(
            protocol::NOT_FOUND,
            format!(
                "{wanted} names more than one running session on host {}: {}; use an id",
                self.name,
                matches.join(", ")
            ),
            &NotFoundData { matches },
        )
    }
}

/// A far job's row before its host lists it: the fields of herd-protocol's
/// `ListRow` this home knows from the far spawn's answer (`null` where it lacked
/// one).
#[derive(Serialize)]
struct SpawnedRow<'a> {
    session_id: String,
    host: &'a str,
    command: Option<&'a Value>,
    mode: Option<&'a Value>,
    pid: Option<&'a Value>,
    name: Option<&'a str>,
    owner_task_id: &'a str,
    task_id: &'a str,
    status: &'static str,
    started_at: &'a str,
    as_of: &'a str,
}

/// A far job's row from the map alone (a job saved before rows were kept).
#[derive(Serialize)]
struct BareRow<'a> {
    session_id: String,
    owner_task_id: &'a str,
    task_id: &'a str,
    status: &'static str,
}

/// A row as the map keeps it and `list` relays it (rows of strings always
/// serialise).
fn as_row<R: Serialize>(row: &R) -> Value {
    serde_json::to_value(row).unwrap_or_default()
}

/// A typed answer as the link hands it back.
fn to_answer<A: Serialize>(answer: &A) -> Answer {
    serde_json::to_value(answer).map_err(|err| {
        RpcError::new(
            protocol::INTERNAL_ERROR,
            format!("failed to encode the answer: {err}"),
        )
    })
}

/// Now, in ns since the epoch.
fn now_nanos() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::SystemTime::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// Rewrites `value` in place: see [`Link::qualify`].
pub(super) fn qualify_in(host: &str, jobs: &BTreeMap<String, Job>, value: &mut Value) {
    match value {
        Value::Object(map) => {
            let far = map
                .get("session_id")
                .and_then(Value::as_str)
                .filter(|id| !id.contains(':'))
                .map(str::to_owned);
            if let Some(far) = far {
                map.insert("session_id".into(), Value::from(format!("{host}:{far}")));
                if let Some(job) = jobs.get(&far) {
                    if map.contains_key("owner_task_id") {
                        map.insert("owner_task_id".into(), Value::from(job.owner.as_str()));
                    }
                    if map.contains_key("task_id") {
                        map.insert("task_id".into(), Value::from(job.task_id.as_str()));
                    }
                }
                if map.contains_key("status") || map.contains_key("command") {
                    map.insert("host".into(), Value::from(host));
                }
            }
            if let Some(Value::String(id)) = map.get_mut("replaces")
                && !id.contains(':')
            {
                *id = format!("{host}:{id}");
            }
            for (key, inner) in map.iter_mut() {
                if key != "session_id" {
                    qualify_in(host, jobs, inner);
                }
            }
        }
        Value::Array(items) => {
            for item in items {
                qualify_in(host, jobs, item);
            }
        }
        _ => {}
    }
}
