//! `herd mcp`: an MCP server on stdio (rmcp) exposing `terminal` and `process`.
//!
//! One server process acts for one owner. Each tool call opens a connection to
//! the home's daemon (starting it when needed), so a long `wait` never blocks
//! another call. After every call the owner's pending notifications are drained
//! and attached to the result as a second text block, rendered for an agent
//! (B19–B22), and also sent as an MCP log notification for clients that show them.
//!
//! The tools are described with hand-written JSON schemas because `notify` is
//! "a boolean or a list of patterns", which the answer shapes of B39 and the
//! seeds' validation messages depend on.

use std::sync::Arc;

use anyhow::Context;
use herd_persistence::Home;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

use crate::client::{CallError, Client};
use crate::protocol;

/// The actions `process` accepts, in the order the error message lists them.
const ACTIONS: [&str; 10] = [
    "list", "poll", "log", "wait", "kill", "write", "submit", "close", "resize", "handoff",
];

/// The answer to a handoff from a server that has no parent agent (`--parent`).
const NOT_A_SUBAGENT: &str =
    "handoff is only available to a running subagent with a live parent; you are not one.";

/// The longest a foreground `terminal` call waits before the job is adopted into
/// the background (B24).
const FOREGROUND_MAX_TIMEOUT: u64 = 600;

/// The default foreground window.
const FOREGROUND_DEFAULT_TIMEOUT: u64 = 180;

/// The output size a foreground result carries.
const FOREGROUND_OUTPUT_CHARS: usize = 50_000;

/// Runs the MCP server on stdio until the client disconnects.
///
/// # Errors
/// Transport failures.
/// The owner of a server started without `--owner` (or `$HERD_OWNER`):
/// `mcp-<12 hex>`, fresh for each server, so two agents configured the same way on
/// one home never see, drain or kill each other's jobs. A host that wants the same
/// owner across restarts passes `--owner`.
pub(crate) fn fresh_owner() -> String {
    use std::hash::{BuildHasher, Hasher};
    // A randomly keyed SipHash of the pid and the time: 48 unpredictable bits.
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    format!("mcp-{:012x}", hasher.finish() & 0xffff_ffff_ffff)
}

pub(crate) fn serve(home: Home, owner: String, parent: Option<String>) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(async move {
        let server = Server {
            home: Arc::new(home),
            owner: Arc::new(owner),
            parent: parent.map(Arc::new),
            log_rank: Arc::new(std::sync::atomic::AtomicU8::new(0)),
        };
        let running = server
            .serve(rmcp::transport::stdio())
            .await
            .context("the MCP handshake failed")?;
        running.waiting().await.context("the MCP server failed")?;
        Ok(())
    })
}

/// The MCP server: the home it talks to and the owner it acts for.
#[derive(Debug, Clone)]
struct Server {
    home: Arc<Home>,
    owner: Arc<String>,
    /// The parent agent's owner (`--parent`), the only owner a handoff goes to.
    parent: Option<Arc<String>>,
    /// The least severe log level the client wants (`logging/setLevel`), as a rank
    /// (0 = debug … 7 = emergency); everything by default.
    log_rank: Arc<std::sync::atomic::AtomicU8>,
}

/// The severity rank of an MCP log level (RFC 5424 order).
#[expect(
    deprecated,
    reason = "MCP logging carries herd's notices to clients today"
)]
fn log_rank(level: &rmcp::model::LoggingLevel) -> u8 {
    use rmcp::model::LoggingLevel as L;
    match level {
        L::Debug => 0,
        L::Info => 1,
        L::Notice => 2,
        L::Warning => 3,
        L::Error => 4,
        L::Critical => 5,
        L::Alert => 6,
        L::Emergency => 7,
    }
}

/// A tool outcome: the JSON answer and whether it is an error.
type Outcome = (Value, bool);

impl Server {
    /// `Ok` when `session_id` resolves to a session of this server's owner; the
    /// error answer otherwise (the daemon's own lookup error for an unknown id).
    async fn own_session(&self, session_id: &str) -> Result<(), Value> {
        let (found, is_error) = self.call("lookup", json!({"id": session_id})).await;
        if is_error {
            return Err(found);
        }
        match found["owner_task_id"].as_str() {
            // An older daemon does not say: act as before.
            None => Ok(()),
            Some(owner) if owner == self.owner.as_str() => Ok(()),
            Some(_) => Err(json!({
                "status": "error",
                "error": format!(
                    "no session {session_id} of yours (owner `{}`); process(action=\"list\") shows your sessions",
                    self.owner
                ),
            })),
        }
    }

    async fn client(&self) -> Result<Client, Value> {
        Client::connect(&self.home)
            .await
            .map_err(|err| json!({"status": "error", "error": format!("{err:#}")}))
    }

    async fn call(&self, method: &str, params: Value) -> Outcome {
        let mut client = match self.client().await {
            Ok(client) => client,
            Err(err) => return (err, true),
        };
        match client.call(method, params).await {
            Ok(value) => (value, false),
            Err(CallError::Rpc(err)) if err.code == protocol::NOT_FOUND => {
                (json!({"status": "not_found", "error": err.message}), true)
            }
            Err(CallError::Rpc(err)) => (json!({"status": "error", "error": err.message}), true),
            Err(CallError::Io(err)) => (
                json!({"status": "error", "error": format!("lost the connection to the daemon: {err}")}),
                true,
            ),
        }
    }

    async fn terminal(&self, args: &JsonObject) -> Outcome {
        match terminal_request(args) {
            Err(message) => (
                json!({"output": "", "exit_code": -1, "error": message}),
                true,
            ),
            Ok(req) => self.run_terminal(req).await,
        }
    }

    async fn run_terminal(&self, req: TerminalRequest) -> Outcome {
        // Jobs run where the agent works: the server's cwd, or `workdir` relative to it.
        let base = std::env::current_dir().unwrap_or_else(|_| self.home.root().to_path_buf());
        let cwd = match &req.workdir {
            Some(dir) => base.join(dir),
            None => base,
        };
        let mut params = json!({
            "command": req.command,
            "owner": self.owner.as_str(),
            "cwd": cwd,
            "pty": req.pty,
            "notify": req.notify,
            "watch": req.watch,
            "heartbeat_seconds": req.heartbeat,
            "persist_on_release": req.persist,
        });
        if !req.background {
            params["completion_output_chars"] = json!(FOREGROUND_OUTPUT_CHARS);
        }
        let mut client = match self.client().await {
            Ok(client) => client,
            Err(err) => return (err, true),
        };
        let info = match client.call("spawn", params).await {
            Ok(info) => info,
            Err(CallError::Rpc(err)) => {
                let mut answer = json!({"output": "", "exit_code": -1, "error": err.message});
                if err.code == protocol::GUARDED {
                    answer["verdict"] = err.data.unwrap_or(Value::Null);
                } else if err.code == protocol::DISPATCH_FAILED {
                    answer["infrastructure"] = err
                        .data
                        .as_ref()
                        .map_or(Value::Null, |d| d["infrastructure"].clone());
                }
                return (answer, true);
            }
            Err(CallError::Io(err)) => {
                return (
                    json!({"output": "", "exit_code": -1, "error": err.to_string()}),
                    true,
                );
            }
        };
        let session_id = info["session_id"].clone();
        if req.background {
            // The job has not finished: no exit fields.
            let mut answer = json!({
                "status": "running",
                "output": "Background process started",
                "session_id": session_id,
                "pid": info["pid"],
            });
            for key in [
                "notify_on_complete",
                "watch_patterns",
                "heartbeat_seconds",
                "pty_note",
                "note",
            ] {
                if !info[key].is_null() {
                    answer[key] = info[key].clone();
                }
            }
            if req.persist {
                answer["persist_on_release"] = json!(true);
                // Which dispatch a job meant to outlive its agent got (B34).
                answer["dispatch"] = info["dispatch"].clone();
            }
            if !req.notify && req.watch.is_empty() {
                answer["hint"] = json!(
                    "Nothing will tell you when this finishes: check it with process(action=\"poll\"), \
                     or pass notify=true next time."
                );
            }
            return (answer, false);
        }
        let timeout = req
            .timeout
            .unwrap_or(FOREGROUND_DEFAULT_TIMEOUT)
            .min(FOREGROUND_MAX_TIMEOUT);
        let waited = client
            .call(
                "wait",
                json!({"id": session_id, "timeout_seconds": timeout}),
            )
            .await;
        match waited {
            Ok(answer) if answer["status"] == "exited" => {
                let mut result = json!({
                    "output": answer["output"],
                    "exit_code": answer["exit_code"],
                    "error": null,
                });
                if answer["output_cut"] == json!(true) {
                    result["output_cut"] = json!(true);
                    result["log_path"] = answer["log_path"].clone();
                }
                (result, false)
            }
            Ok(answer) => (
                json!({
                    "output": answer["output"],
                    "exit_code": null,
                    "error": null,
                    "session_id": session_id,
                    "status": "running",
                    "note": format!(
                        "The command was still running after {timeout}s, so it was moved to the background \
                         (not killed) as {}. Use process(action=\"wait\"|\"poll\"|\"kill\", session_id=...) \
                         to follow it.",
                        session_id.as_str().unwrap_or_default()
                    ),
                }),
                false,
            ),
            Err(err) => (
                json!({"output": "", "exit_code": -1, "error": err.into_anyhow().to_string()}),
                true,
            ),
        }
    }

    async fn process(&self, args: &JsonObject) -> Outcome {
        let action = args
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or_default();
        if !ACTIONS.contains(&action) {
            return (
                json!({"status": "error", "error": format!("Unknown process action: {action}. Use: {}", ACTIONS.join(", "))}),
                true,
            );
        }
        if action == "list" {
            return self
                .call("list", json!({"owner": self.owner.as_str(), "all": true}))
                .await;
        }
        let session_id = match args.get("session_id") {
            Some(Value::String(s)) if !s.is_empty() => s.clone(),
            Some(Value::Number(n)) => n.to_string(),
            _ => {
                return (
                    json!({"status": "error", "error": format!("session_id is required for {action}")}),
                    true,
                );
            }
        };
        // Another owner's session is not this agent's to see or touch (B31): it is
        // answered as unknown, like an id that does not exist.
        if let Err(refused) = self.own_session(&session_id).await {
            return (refused, true);
        }
        let number = |key: &str| -> Result<Option<u64>, Value> {
            match args.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(v) => v.as_u64().map(Some).ok_or_else(|| {
                    json!({"status": "error", "error": format!("{key} must be a whole number (got {v})")})
                }),
            }
        };
        let data = args
            .get("data")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        match action {
            "poll" => self.call("poll", json!({"id": session_id})).await,
            "log" => match (number("offset"), number("limit")) {
                (Ok(offset), Ok(limit)) => {
                    self.call(
                        "log",
                        json!({"id": session_id, "offset": offset, "limit": limit}),
                    )
                    .await
                }
                (Err(e), _) | (_, Err(e)) => (e, true),
            },
            "wait" => {
                let timeout = match args.get("timeout") {
                    None | Some(Value::Null) => None,
                    Some(v) => match v.as_f64() {
                        Some(t) if t > 0.0 => Some(t),
                        _ => {
                            return (
                                json!({"status": "error", "error": format!("timeout must be positive (got {v})")}),
                                true,
                            );
                        }
                    },
                };
                self.call(
                    "wait",
                    json!({"id": session_id, "timeout_seconds": timeout}),
                )
                .await
            }
            "kill" => self.call("kill", json!({"id": session_id})).await,
            "write" => {
                self.call("write", json!({"id": session_id, "data": data}))
                    .await
            }
            "submit" => {
                self.call("submit", json!({"id": session_id, "data": data}))
                    .await
            }
            "close" => self.call("close", json!({"id": session_id})).await,
            "resize" => match (number("rows"), number("cols")) {
                (Ok(Some(rows)), Ok(Some(cols))) => {
                    self.call(
                        "resize",
                        json!({"id": session_id, "rows": rows, "cols": cols}),
                    )
                    .await
                }
                (Err(e), _) | (_, Err(e)) => (e, true),
                _ => (
                    json!({"status": "error", "error": "resize requires rows and cols (1 to 10000 each)"}),
                    true,
                ),
            },
            _ => {
                let Some(parent) = &self.parent else {
                    return (json!({"status": "error", "error": NOT_A_SUBAGENT}), true);
                };
                if data.trim().is_empty() {
                    return (
                        json!({"status": "error", "error": "handoff requires `data`: one sentence saying what the process is for and what the new owner should do with its result."}),
                        true,
                    );
                }
                self.call(
                    "handoff",
                    json!({"id": session_id, "from": self.owner.as_str(), "to": parent.as_str(), "note": data}),
                )
                .await
            }
        }
    }

    /// Drains the owner's notifications: the rendered text, if any.
    async fn pending_notifications(&self) -> Option<String> {
        let mut client = Client::connect(&self.home).await.ok()?;
        let drained = client
            .call("drain", json!({"owner": self.owner.as_str()}))
            .await
            .ok()?;
        drained["rendered"]
            .as_str()
            .filter(|r| !r.is_empty())
            .map(str::to_owned)
    }
}

/// A validated `terminal` call.
#[derive(Debug)]
struct TerminalRequest {
    command: String,
    background: bool,
    pty: bool,
    notify: bool,
    watch: Vec<String>,
    heartbeat: Option<u64>,
    persist: bool,
    timeout: Option<u64>,
    workdir: Option<String>,
}

/// Validates `terminal` arguments with the seeds' messages.
fn terminal_request(args: &JsonObject) -> Result<TerminalRequest, String> {
    let command = match args.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        _ => return Err("command is required: the shell command line to run".to_owned()),
    };
    let flag = |key: &str| -> Result<bool, String> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("{key} must be true or false (got {other})")),
        }
    };
    let background = flag("background")?;
    let pty = flag("pty")?;
    let persist = flag("persist_on_release")?;
    let (notify, watch) = match args.get("notify") {
        None | Some(Value::Null) => (false, Vec::new()),
        Some(Value::Bool(b)) => (*b, Vec::new()),
        Some(Value::Array(items)) => {
            let mut patterns = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(p) if !p.is_empty() => patterns.push(p.to_owned()),
                    _ => {
                        return Err(format!(
                            "notify patterns must be non-empty strings (got {item})"
                        ));
                    }
                }
            }
            // A list watches for its patterns; the exit still wakes once (B20).
            (true, patterns)
        }
        Some(other) => {
            return Err(format!(
                "notify must be true/false or a list of output patterns to watch for (got {other})"
            ));
        }
    };
    let heartbeat = match args.get("heartbeat") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64().filter(|&s| s > 0),
        Some(_) => {
            return Err(
                "heartbeat must be a whole number of seconds (0 disables; positive values are clamped to min 60)."
                    .to_owned(),
            );
        }
    };
    let timeout = match args.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(t) if t >= 1 => Some(t),
            _ => {
                return Err(format!(
                    "timeout must be a whole number of seconds >= 1 (got {v})"
                ));
            }
        },
    };
    let workdir = match args.get("workdir") {
        None | Some(Value::Null) => None,
        Some(Value::String(w)) => {
            if w.chars().any(|c| "`$;&|<>(){}\n\r*?!\"'\\".contains(c)) {
                return Err(format!(
                    "workdir contains characters that are not allowed: {w}"
                ));
            }
            Some(w.clone())
        }
        Some(other) => return Err(format!("workdir must be a string (got {other})")),
    };
    if !background {
        if notify || !watch.is_empty() || heartbeat.is_some() {
            return Err("notify and heartbeat need background=true: a foreground command already returns its result".to_owned());
        }
        if pty {
            return Err("pty requires background=true (interactive programs run in the background; talk to them with process(action=\"submit\"))".to_owned());
        }
        if persist {
            return Err("persist_on_release requires background=true".to_owned());
        }
    }
    Ok(TerminalRequest {
        command,
        background,
        pty,
        // A heartbeat implies notification on completion.
        notify: notify || heartbeat.is_some(),
        watch,
        heartbeat,
        persist,
        timeout,
        workdir,
    })
}

/// The tool list.
fn tools() -> Vec<Tool> {
    let terminal = json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command line to run (bash -c)."},
            "background": {"type": "boolean", "default": false, "description": "Run in the background and return a session_id at once."},
            "timeout": {"type": "integer", "minimum": 1, "default": FOREGROUND_DEFAULT_TIMEOUT, "description": "Foreground only: seconds to wait (max 600); a command still running then is moved to the background, not killed."},
            "workdir": {"type": "string", "description": "Working directory (no shell metacharacters)."},
            "pty": {"type": "boolean", "default": false, "description": "Background only: run under a pseudo-terminal."},
            "notify": {"description": "Background only: true = be told when it exits; a list of strings = be told when an output line contains one of them, and when it exits.", "anyOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}}]},
            "heartbeat": {"type": "integer", "minimum": 0, "default": 0, "description": "Background only: every N seconds, be sent the new output (0 disables; positive values are clamped to min 60)."},
            "persist_on_release": {"type": "boolean", "default": false, "description": "Background only: keep running when this agent is released."}
        },
        "required": ["command"]
    });
    let process = json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ACTIONS},
            "session_id": {"type": "string", "description": "The session id or a unique prefix; required except for list."},
            "data": {"type": "string", "description": "stdin text for write/submit, or the purpose sentence for handoff."},
            "timeout": {"type": "integer", "minimum": 1, "description": "wait only: seconds to wait."},
            "offset": {"type": "integer", "minimum": 0, "description": "log only: first line, 0 being the first line of the whole output (default: the last `limit` lines)."},
            "limit": {"type": "integer", "minimum": 1, "default": 200, "description": "log only: number of lines (a page carries at most 200,000 bytes; the note says when it holds fewer lines)."},
            "rows": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "resize only: terminal rows of a PTY session."},
            "cols": {"type": "integer", "minimum": 1, "maximum": 10000, "description": "resize only: terminal columns of a PTY session."}
        },
        "required": ["action"]
    });
    vec![
        Tool::new(
            "terminal",
            "Run a shell command. Foreground calls return its output and exit code; background=true \
             returns a session_id at once (use notify=true to be told when it finishes). Commands that \
             would kill the host are refused.",
            as_object(terminal),
        ),
        Tool::new(
            "process",
            "Manage background processes started with terminal(background=true): list, poll (status + \
             latest output), log (full output, paged by lines), wait (block until exit or timeout), kill \
             (the whole process tree), write (raw stdin), submit (stdin + Enter), close (EOF), handoff \
             (give the process to another owner with a note).",
            as_object(process),
        ),
    ]
}

/// An answer without its `null` fields: they carry nothing an agent can use and
/// cost tokens on every call (issue 16).
fn without_nulls(answer: Value) -> Value {
    match answer {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
        }
        other => other,
    }
}

/// A JSON object literal as a schema object.
fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}

impl ServerHandler for Server {
    #[expect(
        deprecated,
        reason = "the logging capability is how herd's notifications reach MCP clients today"
    )]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(Implementation::new("herd", env!("CARGO_PKG_VERSION")))
            .with_instructions(format!(
                "herd supervises shell commands. Start long jobs with terminal(background=true, notify=true); \
                 completions arrive with later tool results. You act as herd owner `{}`: you see, wait on \
                 and kill only your own jobs, and only your completions reach you.",
                self.owner
            ))
    }

    #[expect(
        deprecated,
        reason = "MCP logging carries herd's notices to clients today"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.log_rank.store(
            log_rank(&request.level),
            std::sync::atomic::Ordering::Relaxed,
        );
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = request.arguments.unwrap_or_default();
        let (answer, is_error) = match request.name.as_ref() {
            "terminal" => self.terminal(&args).await,
            "process" => self.process(&args).await,
            other => {
                return Err(McpError::invalid_params(
                    format!("unknown tool `{other}`; herd offers `terminal` and `process`"),
                    None,
                ));
            }
        };
        let mut content = vec![ContentBlock::text(without_nulls(answer).to_string())];
        if let Some(rendered) = self.pending_notifications().await {
            content.push(ContentBlock::text(rendered.clone()));
            #[expect(
                deprecated,
                reason = "MCP logging carries herd's notices to clients today"
            )]
            let wanted = self.log_rank.load(std::sync::atomic::Ordering::Relaxed)
                <= log_rank(&rmcp::model::LoggingLevel::Notice);
            #[expect(
                deprecated,
                reason = "MCP logging is how clients surface server-side notices today"
            )]
            let sent = if !wanted {
                Ok(())
            } else {
                context
                    .peer
                    .notify_logging_message(
                        rmcp::model::LoggingMessageNotificationParam::new(
                            rmcp::model::LoggingLevel::Notice,
                            json!({"owner": self.owner.as_str(), "notifications": rendered}),
                        )
                        .with_logger("herd"),
                    )
                    .await
            };
            if let Err(err) = sent {
                tracing::debug!(error = %err, "failed to send the notification log message");
            }
        }
        let result = if is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        Ok(result.into())
    }
}

#[cfg(test)]
mod tests;
