//! The 2025-11-25 tasks revision, by hand: rmcp speaks only the
//! 2026-07-28 extension (`tasks.rs`), whose `tasks/get` answers another shape and
//! which has no `tasks/result` or `tasks/list`; the TypeScript SDK 1.x and other
//! 2025-11-25 clients speak this one.
//!
//! - Input ([`screen_line`], from `unparsable.rs`): an `initialize` asking for
//!   2025-11-25 marks the connection as of this era. A `tools/call`
//!   carrying `task` (how this revision asks for a task), `tasks/result` and
//!   `tasks/list` (unknown to the newer revision), and on such a connection
//!   `tasks/get` and `tasks/cancel`, are renamed `herd/tasks-2025/<op>` so they reach
//!   [`Server::tasks_2025`] through rmcp's custom requests, untouched otherwise.
//! - Output ([`outgoing`], from `delivery.rs`): on such a connection the
//!   `initialize` result declares `capabilities.tasks` (list, cancel, tools/call) and
//!   `tools/list` marks `terminal` with `execution.taskSupport: "optional"`.
//! - The tasks themselves are the ones `tasks.rs` runs (same task manager, ttl,
//!   kill on cancel); only the shapes differ: `{task: {...}}` for a created task, a
//!   flat `Task` for get/cancel, `{tasks: [...]}` for list, and `tasks/result` waits
//!   for the end and answers the `CallToolResult` with the related-task `_meta`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{
    CustomResult, JsonObject, JsonRpcMessage, ServerResult, Task, TaskPayload, TaskStatus,
};
use rmcp::service::{RequestContext, TxJsonRpcMessage};
use rmcp::{ErrorData as McpError, RoleServer};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Server;

/// The method prefix of the renamed requests.
pub(super) const PREFIX: &str = "herd/tasks-2025/";

/// How often `tasks/result` looks whether its task has ended.
const RESULT_POLL: Duration = Duration::from_millis(100);

/// The `_meta` key that ties a task's result to its task.
const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// Whether this connection's client shook hands in a revision before 2026.
#[derive(Debug, Clone, Default)]
pub(super) struct Era(Arc<AtomicBool>);

impl Era {
    fn is_2025(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }
}

/// The line `body` as the server should read it, when it must be renamed
/// (see the module docs); `None` to pass it on as it is.
pub(super) fn screen_line(body: &[u8], era: &Era) -> Option<Vec<u8>> {
    let has = |needle: &[u8]| body.windows(needle.len()).any(|w| w == needle);
    if !has(b"\"method\"") || !(has(b"initialize") || has(b"tasks/") || has(b"\"task\"")) {
        return None;
    }
    let mut message: Value = serde_json::from_slice(body).ok()?;
    let method = message.get("method")?.as_str()?.to_owned();
    let op = match method.as_str() {
        "initialize" => {
            let asked = message["params"]["protocolVersion"].as_str().unwrap_or("");
            // The one revision of this shape of tasks (older ones have none).
            era.0
                .store(("2025-11-25".."2026").contains(&asked), Ordering::Relaxed);
            return None;
        }
        "tools/call" if message["params"]["task"].is_object() => "call",
        "tasks/result" => "result",
        "tasks/list" => "list",
        "tasks/get" if era.is_2025() => "get",
        "tasks/cancel" if era.is_2025() => "cancel",
        _ => return None,
    };
    message["method"] = Value::from(format!("{PREFIX}{op}"));
    let mut line = serde_json::to_vec(&message).ok()?;
    line.push(b'\n');
    Some(line)
}

/// `item` as a client of `era` should see it (see the module docs).
pub(super) fn outgoing(
    item: TxJsonRpcMessage<RoleServer>,
    era: &Era,
) -> TxJsonRpcMessage<RoleServer> {
    if !era.is_2025() {
        return item;
    }
    let JsonRpcMessage::Response(mut response) = item else {
        return item;
    };
    let rewritten = match &response.result {
        ServerResult::InitializeResult(init) => serde_json::to_value(init).ok().map(|mut v| {
            v["capabilities"]["tasks"] = to_value(&TasksCapability::default());
            v
        }),
        ServerResult::ListToolsResult(list) => serde_json::to_value(list).ok().map(|mut v| {
            if let Some(tools) = v["tools"].as_array_mut() {
                for tool in tools.iter_mut().filter(|t| t["name"] == "terminal") {
                    tool["execution"] = to_value(&Execution {
                        task_support: "optional",
                    });
                }
            }
            v
        }),
        _ => None,
    };
    if let Some(mut value) = rewritten {
        if let Some(object) = value.as_object_mut() {
            object.remove("resultType");
        }
        response.result = ServerResult::CustomResult(CustomResult(value));
    }
    JsonRpcMessage::Response(response)
}

/// `capabilities.tasks` of this revision: list, cancel, and tasks for `tools/call`.
#[derive(Debug, Default, Serialize)]
struct TasksCapability {
    list: Empty,
    cancel: Empty,
    requests: TaskRequests,
}

/// `{}`: a capability with no options.
#[derive(Debug, Default, Serialize)]
struct Empty {}

/// `capabilities.tasks.requests`: `tools/call` may run as a task.
#[derive(Debug, Default, Serialize)]
struct TaskRequests {
    tools: ToolsCall,
}

/// `{"call": {}}`.
#[derive(Debug, Default, Serialize)]
struct ToolsCall {
    call: Empty,
}

/// A tool's `execution` of this revision.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Execution {
    task_support: &'static str,
}

/// A task as this revision shows it (the newer revision's names differ: `ttlMs`,
/// `pollIntervalMs`).
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Task2025<'a> {
    task_id: &'a str,
    status: &'a TaskStatus,
    ttl: Option<u64>,
    created_at: &'a str,
    last_updated_at: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    poll_interval: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    status_message: Option<&'a str>,
}

/// `{"task": …, "_meta": …}`: a created task.
#[derive(Debug, Serialize)]
struct Created<'a> {
    task: Task2025<'a>,
    #[serde(rename = "_meta")]
    meta: rmcp::model::MetaObject,
}

/// `{"tasks": […]}`: the tasks of `tasks/list`.
#[derive(Debug, Serialize)]
struct Listed<'a> {
    tasks: Vec<Task2025<'a>>,
}

/// `{"taskId": …}`: the related task of a result's `_meta`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
struct Related<'a> {
    task_id: &'a str,
}

/// One of this module's shapes as JSON (strings, numbers and maps: it serialises).
fn to_value<T: Serialize>(shape: &T) -> Value {
    serde_json::to_value(shape).unwrap_or_default()
}

/// A task as this revision shows it.
fn task_2025(task: &Task) -> Task2025<'_> {
    Task2025 {
        task_id: &task.task_id,
        status: &task.status,
        ttl: task.ttl_ms,
        created_at: &task.created_at,
        last_updated_at: &task.last_updated_at,
        poll_interval: task.poll_interval_ms,
        status_message: task.status_message.as_deref(),
    }
}

/// [`task_2025`] as JSON.
fn task_json(task: &Task) -> Value {
    to_value(&task_2025(task))
}

/// The params of `tasks/get`, `tasks/cancel` and `tasks/result`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct TaskRef {
    #[serde(default)]
    task_id: Option<String>,
}

/// The params of a `tools/call` that asks for a task.
#[derive(Debug, Deserialize)]
struct TaskCall {
    #[serde(default)]
    name: String,
    #[serde(default)]
    arguments: Option<JsonObject>,
    #[serde(default)]
    task: Option<TaskAsked>,
}

/// A `tools/call`'s `task`: how long to keep it.
#[derive(Debug, Default, Deserialize)]
struct TaskAsked {
    /// Checked by [`asked_ttl`], which says what is wrong with it.
    #[serde(default)]
    ttl: Option<Value>,
}

/// The `taskId` of a request's params.
fn task_id(params: &Value) -> Result<String, McpError> {
    TaskRef::deserialize(params)
        .ok()
        .and_then(|asked| asked.task_id)
        .filter(|id| !id.is_empty())
        .ok_or_else(|| {
            McpError::invalid_params(
                "taskId is required: the id that tools/call answered in task.taskId",
                None,
            )
        })
}

/// The ttl a `tools/call`'s `task` asks for, in ms (`None`: the server's).
fn asked_ttl(task: &TaskAsked) -> Result<Option<u64>, McpError> {
    match &task.ttl {
        None | Some(Value::Null) => Ok(None),
        Some(ttl) => ttl.as_u64().map(Some).ok_or_else(|| {
            McpError::invalid_params(
                format!("task.ttl must be a whole number of milliseconds, 0 or more (got {ttl})"),
                None,
            )
        }),
    }
}

impl Server {
    /// A renamed request of the 2025-11-25 tasks revision: `op` is what follows
    /// [`PREFIX`].
    pub(super) async fn tasks_2025(
        &self,
        op: &str,
        params: Value,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        let answer = match op {
            "call" => {
                let call = TaskCall::deserialize(&params).map_err(|err| {
                    McpError::invalid_params(format!("tools/call with task: {err}"), None)
                })?;
                let name = call.name.as_str();
                if name != "terminal" {
                    return Err(McpError::invalid_params(
                        format!(
                            "only terminal runs as a task (its execution.taskSupport); call `{name}` without task"
                        ),
                        None,
                    ));
                }
                let mut args: JsonObject = call.arguments.unwrap_or_default();
                super::schema::coerce(name, &mut args);
                super::schema::check_arguments(name, &args)
                    .map_err(|why| McpError::invalid_params(why, None))?;
                let ttl = asked_ttl(&call.task.unwrap_or_default())?;
                let task = self.begin_task(&args, ttl).await.map_err(|answer| {
                    let why = answer.value["error"]
                        .as_str()
                        .unwrap_or("the job did not start")
                        .to_owned();
                    McpError::invalid_params(why, Some(answer.value))
                })?;
                to_value(&Created {
                    task: task_2025(&task),
                    meta: self.meta(),
                })
            }
            "get" => task_json(&self.tasks.detailed(&task_id(&params)?)?.task),
            "cancel" => {
                let id = task_id(&params)?;
                self.tasks.cancel(&id)?;
                let mut task = self.tasks.detailed(&id)?.task;
                task.status = TaskStatus::Cancelled;
                task_json(&task)
            }
            "list" => {
                let tasks: Vec<Task> = self
                    .tasks
                    .ids()
                    .iter()
                    .filter_map(|id| self.tasks.detailed(id).ok())
                    .map(|d| d.task)
                    .collect();
                to_value(&Listed {
                    tasks: tasks.iter().map(task_2025).collect(),
                })
            }
            "result" => self.task_result_2025(&task_id(&params)?, &context).await?,
            _ => {
                return Err(McpError::new(
                    rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                    format!("no such tasks method `tasks/{op}`"),
                    None,
                ));
            }
        };
        Ok(CustomResult(answer))
    }

    /// `tasks/result`: waits for the task to end and answers its `CallToolResult`.
    async fn task_result_2025(
        &self,
        id: &str,
        context: &RequestContext<RoleServer>,
    ) -> Result<Value, McpError> {
        let mut tick = tokio::time::interval(RESULT_POLL);
        loop {
            let detailed = self.tasks.detailed(id)?;
            match detailed.payload {
                TaskPayload::Completed { result } => {
                    let mut result = Value::Object(result);
                    if let Some(object) = result.as_object_mut() {
                        object.remove("resultType");
                    }
                    result["_meta"][RELATED_TASK] = to_value(&Related { task_id: id });
                    return Ok(result);
                }
                TaskPayload::Failed { error } => {
                    let message = error
                        .get("message")
                        .and_then(Value::as_str)
                        .unwrap_or("the task failed")
                        .to_owned();
                    return Err(McpError::internal_error(
                        format!("task {id} failed: {message}"),
                        Some(Value::Object(error)),
                    ));
                }
                TaskPayload::Cancelled => {
                    return Err(McpError::invalid_params(
                        format!("task {id} was cancelled: it has no result (its job was killed)"),
                        None,
                    ));
                }
                _ => {}
            }
            tokio::select! {
                () = context.ct.cancelled() => {
                    return Err(McpError::invalid_request("tasks/result was cancelled", None));
                }
                _ = tick.tick() => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn screened(line: &Value, era: &Era) -> Option<Value> {
        screen_line(line.to_string().as_bytes(), era)
            .map(|l| serde_json::from_slice(&l).expect("a renamed line is JSON"))
    }

    fn request(method: &str, params: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    }

    #[test]
    fn only_a_2025_handshake_renames_tasks_get_and_cancel() {
        let era = Era::default();
        let get = request("tasks/get", json!({"taskId": "t"}));
        assert_eq!(
            screened(&get, &era),
            None,
            "2026-07-28's tasks/get is rmcp's"
        );
        let init = request("initialize", json!({"protocolVersion": "2025-11-25"}));
        assert_eq!(screened(&init, &era), None, "initialize passes as it is");
        assert!(era.is_2025());
        for (method, op) in [("tasks/get", "get"), ("tasks/cancel", "cancel")] {
            let renamed = screened(&request(method, json!({"taskId": "t"})), &era);
            assert_eq!(
                renamed.map(|m| m["method"].clone()),
                Some(json!(format!("{PREFIX}{op}")))
            );
        }
        for other in ["2026-07-28", "2025-06-18"] {
            let init = request("initialize", json!({"protocolVersion": other}));
            screened(&init, &era);
            assert!(!era.is_2025(), "{other} has no tasks of this shape");
        }
    }

    #[test]
    fn a_task_augmented_call_result_and_list_are_renamed_in_any_era() {
        let era = Era::default();
        let call = request(
            "tools/call",
            json!({"name": "terminal", "arguments": {"command": "true"}, "task": {"ttl": 5}}),
        );
        let renamed = screened(&call, &era).expect("renamed");
        assert_eq!(renamed["method"], json!(format!("{PREFIX}call")));
        assert_eq!(renamed["params"], call["params"], "params untouched");
        let plain = request("tools/call", json!({"name": "terminal", "arguments": {}}));
        assert_eq!(screened(&plain, &era), None);
        for (method, op) in [("tasks/result", "result"), ("tasks/list", "list")] {
            let renamed = screened(&request(method, json!({})), &era).expect("renamed");
            assert_eq!(renamed["method"], json!(format!("{PREFIX}{op}")));
        }
    }

    #[test]
    fn a_ttl_must_be_whole_milliseconds() {
        let task = |v: Value| TaskAsked::deserialize(v).expect("a task object");
        assert_eq!(asked_ttl(&task(json!({}))).ok(), Some(None));
        assert_eq!(asked_ttl(&task(json!({"ttl": null}))).ok(), Some(None));
        assert_eq!(
            asked_ttl(&task(json!({"ttl": 60000}))).ok(),
            Some(Some(60_000))
        );
        for bad in [
            json!({"ttl": -1}),
            json!({"ttl": "soon"}),
            json!({"ttl": 1.5}),
        ] {
            let error = asked_ttl(&task(bad)).expect_err("refused");
            assert!(error.message.contains("whole number"), "{error:?}");
        }
    }
}
