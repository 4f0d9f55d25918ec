//! The `process` tool: one action on the caller's own sessions.

use super::wait_for;
use herd_protocol::Method;
use herd_protocol::answers::{ListAnswer, WaitStatus};
use herd_protocol::methods as m;
use herd_protocol::params::{
    HandoffParams, IdParams, ListParams, ListState, LogParams, ResizeParams,
};
use rmcp::RoleServer;
use rmcp::model::JsonObject;
use rmcp::service::RequestContext;
use serde_json::Value;

use super::args::{LIST_DEFAULT_ROWS, LIST_MAX_ROWS};
use super::read::{YIELD_DEFAULT_MS, YIELD_MAX_MS};
use super::results::{self, Common, ProcessResult, set_field};
use super::{
    ACTIONS, Answer, NOT_A_SUBAGENT, Server, WAIT_DEFAULT_SECONDS, WAIT_MAX_SECONDS, budget,
};
use crate::client::read_part;

/// What a resize without rows and cols in range is told.
const RESIZE_NEEDS: &str = "resize requires rows and cols (1 to 10000 each)";

/// How long a kill waits for the exit to be recorded, so its completion is
/// answered by the kill rather than sent as a notice.
const KILL_SETTLE_SECONDS: u64 = 5;

/// A list row's fields an agent has no use for: its own owner, the container key
/// when it is the owner, and flags at their defaults.
fn slim_row(row: &mut Value, owner: &str) {
    let Value::Object(map) = row else {
        return;
    };
    map.retain(|key, value| {
        !(value.is_null()
            || key == "owner_task_id"
            || (key == "task_id" && value == owner)
            || (key == "persist_on_release" && value == false))
    });
}

/// The whole number under `key`, if any; an answer saying what is wrong otherwise.
fn whole_number(args: &JsonObject, key: &str) -> Result<Option<u64>, Answer> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| Answer::failed(format!("{key} must be a whole number (got {v})"))),
    }
}

impl Server {
    pub(super) async fn process(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Answer {
        let action = args
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !ACTIONS.contains(&action) {
            return Answer::error(results::to_value(&ProcessResult {
                action: action.to_owned(),
                common: Common::failed(format!(
                    "Unknown process action: {action:?}. Use: {}",
                    ACTIONS.join(", ")
                )),
                ..ProcessResult::default()
            }));
        }
        let mut answer = self.act(action, args, context).await;
        if let Value::Object(map) = &mut answer.value {
            map.insert("action".to_owned(), Value::from(action));
        }
        answer
    }

    async fn act(
        &self,
        action: &str,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Answer {
        let number = |key: &str| whole_number(args, key);
        if action == "list" {
            return match (number("limit"), number("since")) {
                (Ok(limit), Ok(since)) => self.list(args, limit, since).await,
                (Err(e), _) | (_, Err(e)) => e,
            };
        }
        if action.starts_with("group_") {
            return self.group_action(action, args).await;
        }
        let session_id = match args.get("session_id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return Answer::failed(format!("session_id is required for {action}"));
            }
        };
        // Another owner's session is not this agent's to see or touch (B31): it is
        // answered as belonging to another agent.
        if let Err(refused) = self.own_session(&session_id).await {
            return Answer::error(refused);
        }
        let data = args
            .get("data")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match action {
            "poll" => {
                self.answer_typed::<m::Poll>(&IdParams::new(&*session_id))
                    .await
            }
            "log" => match (number("offset"), number("limit")) {
                (Ok(offset), Ok(limit)) => {
                    let params = LogParams {
                        id: session_id.clone(),
                        offset: offset.and_then(|o| usize::try_from(o).ok()),
                        limit: limit.and_then(|l| usize::try_from(l).ok()),
                    };
                    match self.ask_kept::<m::Log>(&params).await {
                        Ok((mut page, log)) => {
                            budget::cap_page(&mut page, &log, offset.is_some());
                            Answer::ok(page)
                        }
                        Err(failed) => Answer::error(failed),
                    }
                }
                (Err(e), _) | (_, Err(e)) => e,
            },
            "search" => self.search_action(&session_id, args).await,
            "wait" => {
                let ready = matches!(args.get("ready"), Some(Value::Bool(true)));
                self.wait(&session_id, number("timeout"), ready, context)
                    .await
            }
            "kill" => {
                let mut killed = self
                    .answer_typed::<m::Kill>(&IdParams::new(session_id.as_str()))
                    .await;
                if !killed.is_error {
                    // The answer says it was killed: its completion is not sent again
                    // as a notice (once the exit is recorded, which a kill makes quick).
                    let _ = self
                        .ask::<m::Wait>(&wait_for(&session_id, KILL_SETTLE_SECONDS as f64, false))
                        .await;
                    killed.answered = Some(session_id.clone());
                }
                killed
            }
            "write" | "submit" => self.write_action(action, &session_id, &data, args).await,
            "read" => match self.read_new(&session_id).await {
                Ok(read) => Answer::ok(results::to_value(&read)),
                Err(failed) => Answer::error(failed),
            },
            "close" => {
                self.answer_typed::<m::Close>(&IdParams::new(&*session_id).into())
                    .await
            }
            "resize" => {
                self.resize(&session_id, number("rows"), number("cols"))
                    .await
            }
            _ => self.handoff(&session_id, &data).await,
        }
    }

    /// `resize`: a PTY session's window, rows and cols 1 to 10000 each.
    async fn resize(
        &self,
        session_id: &str,
        rows: Result<Option<u64>, Answer>,
        cols: Result<Option<u64>, Answer>,
    ) -> Answer {
        let (rows, cols) = match (rows, cols) {
            (Ok(Some(rows)), Ok(Some(cols))) => (rows, cols),
            (Err(e), _) | (_, Err(e)) => return e,
            _ => return Answer::failed(RESIZE_NEEDS),
        };
        match (u16::try_from(rows), u16::try_from(cols)) {
            (Ok(rows), Ok(cols)) => {
                self.answer_typed::<m::Resize>(&ResizeParams {
                    id: session_id.to_owned(),
                    rows,
                    cols,
                })
                .await
            }
            _ => Answer::failed(RESIZE_NEEDS),
        }
    }

    /// `wait`: until the session exits or `timeout` seconds passed; a cancelled call
    /// stops waiting and leaves the job running.
    async fn wait(
        &self,
        session_id: &str,
        timeout: Result<Option<u64>, Answer>,
        ready: bool,
        context: &RequestContext<RoleServer>,
    ) -> Answer {
        let timeout = match timeout {
            Ok(t) if t != Some(0) => t.unwrap_or(WAIT_DEFAULT_SECONDS),
            Ok(_) => {
                return Answer::failed("timeout must be positive (got 0)");
            }
            Err(e) => return e,
        };
        // Under the clients' 60 s request timeout, whatever was asked.
        let clamped = (timeout > WAIT_MAX_SECONDS).then_some(timeout);
        let timeout = timeout.min(WAIT_MAX_SECONDS);
        // A cancelled wait stops waiting; the job runs on.
        let params = wait_for(session_id, timeout as f64, ready);
        let waited = tokio::select! {
            waited = self.ask_kept::<m::Wait>(&params) => waited,
            () = context.ct.cancelled() => {
                return Answer::failed("the wait was cancelled; the process runs on");
            }
        };
        match waited {
            Ok((mut answer, waited)) if waited.status == WaitStatus::Exited => {
                if let Some(budgeted) = self.budget_output(&waited).await {
                    budgeted.write_into(&mut answer);
                }
                // The wait carries the exit: the completion is delivered by it,
                // not again as a notice.
                let mut exited = Answer::ok(answer);
                exited.answered = Some(waited.session_id);
                exited
            }
            Ok((mut answer, _)) => {
                if let Some(asked) = clamped {
                    set_field(
                        &mut answer,
                        "note",
                        format!(
                            "waited {WAIT_MAX_SECONDS}s (the most one wait takes here, under clients' 60s request timeout; {asked}s was asked): still running, which is not an error; wait again or do other work, you will be told when it ends"
                        ),
                    );
                }
                Answer::ok(answer)
            }
            Err(failed) => Answer::error(failed),
        }
    }

    /// `write`/`submit`: the data, then the output after `yield_ms`.
    async fn write_action(
        &self,
        action: &str,
        session_id: &str,
        data: &str,
        args: &JsonObject,
    ) -> Answer {
        match whole_number(args, "yield_ms") {
            Ok(Some(n)) if n > YIELD_MAX_MS => {
                Answer::failed(format!("yield_ms must be 0 to {YIELD_MAX_MS} (got {n})"))
            }
            Ok(wait) => {
                let wait = wait.unwrap_or(YIELD_DEFAULT_MS);
                let (value, is_error) = self.write_and_read(action, session_id, data, wait).await;
                Answer::new(value, is_error)
            }
            Err(e) => e,
        }
    }

    /// `search`: `pattern` (a regex, or literal text) over the whole log, with
    /// `context` lines around each match.
    async fn search_action(&self, session_id: &str, args: &JsonObject) -> Answer {
        let fail = |message: String| Answer::failed(message);
        let Some(text) = args
            .get("pattern")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
        else {
            return fail(
                "search requires pattern: a regex (or literal=true for plain text)".to_owned(),
            );
        };
        let literal = match args.get("literal") {
            None | Some(Value::Null) => false,
            Some(Value::Bool(b)) => *b,
            Some(v) => return fail(format!("literal must be true or false (got {v})")),
        };
        let context = match whole_number(args, "context") {
            Ok(None) => budget::CONTEXT_DEFAULT,
            Ok(Some(n)) if n <= budget::CONTEXT_MAX => n,
            Ok(Some(n)) => {
                return fail(format!(
                    "context must be 0 to {} lines (got {n})",
                    budget::CONTEXT_MAX
                ));
            }
            Err(e) => return e,
        };
        match budget::pattern(text, literal) {
            Ok(re) => match self.search(session_id, &re, context as usize).await {
                Ok(found) => Answer::ok(found),
                Err(failed) => Answer::error(failed),
            },
            Err(message) => fail(message),
        }
    }

    /// `handoff`: the session goes to the parent agent with a note saying what it is for.
    async fn handoff(&self, session_id: &str, data: &str) -> Answer {
        let Some(parent) = &self.parent else {
            return Answer::failed(NOT_A_SUBAGENT);
        };
        if data.trim().is_empty() {
            return Answer::failed(
                "handoff requires `data`: one sentence saying what the process is for and what the new owner should do with its result.",
            );
        }
        self.answer_typed::<m::Handoff>(&HandoffParams {
            id: session_id.to_owned(),
            from: self.owner.as_str().to_owned(),
            to: Some(parent.as_str().to_owned()),
            note: data.to_owned(),
        })
        .await
    }

    /// The owner's sessions: running ones by default, the newest `limit`.
    async fn list(&self, args: &JsonObject, limit: Option<u64>, since: Option<u64>) -> Answer {
        let state = match args.get("state") {
            None | Some(Value::Null) => "running",
            Some(Value::String(s)) if ["running", "finished", "all"].contains(&s.as_str()) => s,
            Some(other) => {
                return Answer::failed(format!(
                    "state must be running, finished or all (got {other})"
                ));
            }
        };
        let limit = limit.unwrap_or(LIST_DEFAULT_ROWS);
        if !(1..=LIST_MAX_ROWS).contains(&limit) {
            return Answer::failed(format!(
                "limit must be 1 to {LIST_MAX_ROWS} rows for list (got {limit})"
            ));
        }
        let params = ListParams {
            owner: Some(self.owner.as_str().to_owned()),
            state: Some(match state {
                "finished" => ListState::Finished,
                "all" => ListState::All,
                _ => ListState::Running,
            }),
            since_seconds: since,
            limit: usize::try_from(limit).ok(),
            ..ListParams::default()
        };
        let (mut answer, is_error) = self.ask::<m::List>(&params).await;
        if is_error {
            return Answer::error(answer);
        }
        // The rows as the daemon wrote them (a later daemon's fields with them),
        // read as herd-protocol's list answer.
        let listed = match read_part::<ListAnswer<Value>>(m::List::NAME, "", &answer) {
            Ok(listed) => listed,
            Err(err) => return Answer::failed(format!("{err:#}")),
        };
        let is_empty = listed.processes.is_empty();
        let mut rows = listed.processes;
        for row in &mut rows {
            slim_row(row, &self.owner);
        }
        set_field(&mut answer, "processes", rows);
        if state == "running" && is_empty {
            set_field(
                &mut answer,
                "note",
                "no running sessions; state=\"finished\" or \"all\" lists the others",
            );
        }
        Answer::ok(answer)
    }
}
