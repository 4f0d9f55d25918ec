//! Background runs as tasks, for clients of the tasks extension
//! (`io.modelcontextprotocol/tasks`, 2026-07-28); `tasks_2025.rs` serves the same
//! tasks to clients of the 2025-11-25 revision.
//!
//! A `terminal(background=true)` call from a client that declares the extension is
//! answered with a task instead of a session id at once: `tasks/get` reports it
//! working (its status message names the session, which `process` also reaches)
//! and then completed with the same result a foreground run gives; `tasks/cancel`
//! kills the job's whole tree. Other clients get the background answer as before.

use super::wait_for;
use herd_protocol::answers::WaitStatus;
use herd_protocol::methods as m;
use herd_protocol::params::IdParams;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::{
    CallToolResponse, CallToolResult, ContentBlock, CreateTaskResult, DetailedTask, GetTaskResult,
    JsonObject, Task,
};
use rmcp::service::RequestContext;
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData as McpError, RoleServer};
use serde_json::Value;

use super::terminal::terminal_request;
use super::{Answer, Server, without_nulls};

/// How long a task and its result are kept: a week, like result receipts. A job
/// still running then is left running; its task is reported failed.
const TASK_TTL: Duration = Duration::from_secs(7 * 24 * 3600);

/// How often the client is asked to poll.
const TASK_POLL_MS: u64 = 1_000;

/// One daemon wait of a task, renewed until the exit.
const TASK_WAIT_SECONDS: u64 = 300;

/// The tasks this server runs.
#[derive(Clone, Default)]
pub(super) struct Tasks {
    manager: TaskManager,
    /// The ids of the tasks started, oldest first (for `tasks/list`).
    ids: Arc<Mutex<Vec<String>>>,
}

impl std::fmt::Debug for Tasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tasks")
            .field("running", &self.manager.running_task_count())
            .finish()
    }
}

impl Tasks {
    pub(super) fn get(&self, task_id: &str) -> Result<GetTaskResult, McpError> {
        Ok(GetTaskResult::new(self.manager.get_task(task_id)?))
    }

    pub(super) fn cancel(&self, task_id: &str) -> Result<(), McpError> {
        self.manager.cancel_task(task_id)
    }

    /// A task with its result or error, when it has one.
    pub(super) fn detailed(&self, task_id: &str) -> Result<DetailedTask, McpError> {
        self.manager.get_task(task_id)
    }

    /// The ids of the tasks kept, oldest first.
    pub(super) fn ids(&self) -> Vec<String> {
        self.ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

/// Whether this call becomes a task: a background run, from a client that
/// declared the tasks extension.
pub(super) fn wanted(args: &JsonObject, context: &RequestContext<RoleServer>) -> bool {
    args.get("background") == Some(&Value::Bool(true))
        && context
            .client_capabilities()
            .is_some_and(|c| c.supports_tasks())
}

impl Server {
    /// Starts the job and answers its task.
    pub(super) async fn start_task(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> CallToolResponse {
        match self.begin_task(args, None).await {
            Ok(task) => CallToolResponse::Task(CreateTaskResult::new(task).with_meta(self.meta())),
            Err(answer) => self.result(answer, context).await.into(),
        }
    }

    /// Starts the job as a task kept `ttl_ms` (at most, and by default, a week);
    /// the refusal's answer when the job does not start.
    pub(super) async fn begin_task(
        &self,
        args: &JsonObject,
        ttl_ms: Option<u64>,
    ) -> Result<Task, Answer> {
        let refused = |message: String| {
            Answer::error(super::results::to_value(
                &super::results::TerminalResult::refused(message),
            ))
        };
        let req = terminal_request(args).map_err(refused)?;
        // The task's result carries the exit: a completion notice only when asked.
        let session_id = self
            .start(&req, req.notify && req.notify_given)
            .await?
            .session_id;
        let server = self.clone();
        let most = u64::try_from(TASK_TTL.as_millis()).unwrap_or(u64::MAX);
        let options = TaskOptions::new()
            .with_ttl_ms(ttl_ms.map_or(most, |ms| ms.min(most)))
            .with_poll_interval_ms(TASK_POLL_MS)
            .with_status_message(format!("running as {session_id}"));
        let task = self.tasks.manager.spawn(options, move |ctx| {
            Box::pin(async move {
                tokio::select! {
                    () = ctx.cancelled() => {
                        let (killed, is_error) = server.ask::<m::Kill>(&IdParams::new(session_id.as_str())).await;
                        if is_error {
                            tracing::warn!(%session_id, answer = %killed, "a cancelled task's job was not killed");
                        }
                        Err(TaskExit::Cancelled)
                    }
                    answer = server.wait_to_exit(&session_id) => Ok(server.task_result(answer)),
                }
            })
        });
        let mut ids = self
            .tasks
            .ids
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        ids.retain(|id| self.tasks.manager.get_task(id).is_ok());
        ids.push(task.task_id.clone());
        Ok(task)
    }

    /// Waits, as long as it takes, for the job to exit.
    async fn wait_to_exit(&self, session_id: &str) -> Answer {
        loop {
            match self
                .ask_for::<m::Wait>(&wait_for(session_id, TASK_WAIT_SECONDS as f64, false))
                .await
            {
                Ok(waited) if waited.status == WaitStatus::Exited => {
                    return self.exited(&waited).await;
                }
                Ok(_) => {}
                Err(failed) => return Answer::error(failed),
            }
        }
    }

    /// A task's result: the answer a foreground run gives.
    fn task_result(&self, answer: Answer) -> CallToolResult {
        let value = without_nulls(answer.value);
        let content = vec![ContentBlock::text(value.to_string())];
        let mut result = if answer.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        result.structured_content = Some(value);
        result.meta = Some(self.meta());
        result
    }
}
