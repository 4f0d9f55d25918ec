//! `herd mcp`: an MCP server on stdio (rmcp) exposing `terminal` and `process`.
//!
//! One server process acts for one owner: `--owner`/`$HERD_OWNER`, else the one
//! derived from the host that runs it (`owner.rs`). Each tool call opens a connection to
//! the home's daemon (starting it when needed), so a long `wait` never blocks
//! another call. After every call the owner's pending notices are taken from the
//! daemon as a lease and attached to the result as a second text block, rendered
//! for an agent (B19–B22), and sent as an MCP log message to clients that want
//! them; the lease is acknowledged once the result is written (`delivery.rs`).
//!
//! - `terminal.rs`: validation, background starts, foreground runs that move to the
//!   background with notify on (timeout, cancellation), progress.
//! - `process.rs`: the actions on the caller's own sessions.
//! - `schema.rs`: input and output schemas, annotations, unknown-argument refusal.
//! - `tasks.rs`: background runs as tasks for clients of the tasks extension;
//!   `tasks_2025.rs`: the same tasks for the 2025-11-25 revision.
//! - `push.rs`: the notifications as a resource a client can subscribe to.

mod args;
mod budget;
mod delivery;
mod generate;
mod groups;
mod owner;
mod process;
mod push;
mod read;
mod results;
mod schema;
mod tasks;
mod tasks_2025;
mod terminal;
mod unparsable;

use std::sync::Arc;

use anyhow::Context;
use herd_persistence::Home;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CancelTaskParams, ContentBlock,
    CustomRequest, CustomResult, GetTaskParams, GetTaskResult, Implementation, ListResourcesResult,
    ListToolsResult, MetaObject, PaginatedRequestParams, ReadResourceRequestParams,
    ReadResourceResponse, ServerCapabilities, ServerConfig, SubscribeRequestParams,
    SubscriptionFilter, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};
use rmcp::transport::async_rw::AsyncRwTransport;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler, ServiceExt};
use serde_json::Value;

pub(crate) use owner::sweep_hourly as sweep_owners_hourly;

use crate::client::{CallError, Client};
use crate::protocol;
use herd_protocol::Method;
use herd_protocol::events::{DrainAnswer, EventEnvelope};
use herd_protocol::methods as m;
use herd_protocol::params::{DrainParams, IdParams, LogParams, WaitParams};
use results::{Common, ProcessResult, TerminalResult};
#[cfg(test)]
use terminal::terminal_request;

/// The actions `process` accepts, in the order the error message lists them.
const ACTIONS: [&str; 16] = [
    "list",
    "poll",
    "read",
    "log",
    "search",
    "wait",
    "kill",
    "write",
    "submit",
    "close",
    "resize",
    "handoff",
    "group_add",
    "group_set",
    "group_list",
    "group_rm",
];

/// The answer to a handoff from a server that has no parent agent (`--parent`).
const NOT_A_SUBAGENT: &str =
    "handoff is only available to a running subagent with a live parent; you are not one.";

/// The longest a foreground `terminal` call waits before the job is moved to the
/// background with notify on (B24).
const FOREGROUND_MAX_TIMEOUT: u64 = 600;

/// The default foreground window: under the 60 s request timeout of common
/// clients (the TypeScript SDK, the Inspector), so the answer beats it.
const FOREGROUND_DEFAULT_TIMEOUT: u64 = 45;

/// `process wait`'s default and longest wait, under the same 60 s.
const WAIT_DEFAULT_SECONDS: u64 = 30;
const WAIT_MAX_SECONDS: u64 = 50;

/// The output size a foreground job's completion carries (its result composes the
/// head and tail of the log within the same budget, `budget.rs`).
const FOREGROUND_OUTPUT_CHARS: usize = budget::OUTPUT_BUDGET_CHARS;

/// A fresh owner, `mcp-<12 hex>`, for a server whose host cannot be told
/// (`owner.rs` derives it from the host otherwise).
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

/// Runs the MCP server on stdio until the client disconnects.
///
/// # Errors
/// Transport failures.
pub(crate) fn serve(
    home: Home,
    owner: Option<String>,
    parent: Option<String>,
) -> anyhow::Result<()> {
    // Without `--owner`, the host's owner, locked while this server runs; with it,
    // that owner's lock shared with its other servers (so the sweep keeps its files).
    let (owner, _owner_lock, _explicit_lock) = match owner {
        Some(owner) => {
            let held = owner::explicit_owner_lock(&home, &owner);
            (owner, None, held)
        }
        None => {
            let derived = owner::host_owner(&home);
            (derived.owner.clone(), Some(derived), None)
        }
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("failed to start the async runtime")?;
    runtime.block_on(async move {
        let pending = Arc::new(delivery::Pending::default());
        let server = Server {
            home: Arc::new(home),
            owner: Arc::new(owner),
            parent: parent.map(Arc::new),
            log_rank: Arc::new(std::sync::atomic::AtomicU8::new(0)),
            pending: Arc::clone(&pending),
            tasks: tasks::Tasks::default(),
            subscription: push::Subscription::default(),
            collected: Arc::new(std::sync::atomic::AtomicU64::new(0)),
        };
        let (stdin, stdout) = rmcp::transport::stdio();
        let (refused, unparsable) = tokio::sync::mpsc::unbounded_channel();
        let era = tasks_2025::Era::default();
        let stdin = unparsable::Screened::new(stdin, refused, era.clone());
        let transport = delivery::Acking {
            inner: AsyncRwTransport::<RoleServer, _, _>::new(stdin, stdout),
            pending,
            unparsable,
            era,
        };
        let running = server
            .serve(transport)
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
    /// Notices in results not yet written.
    pending: Arc<delivery::Pending>,
    /// Background runs served as tasks.
    tasks: tasks::Tasks,
    /// A legacy `resources/subscribe` to the notifications.
    subscription: push::Subscription,
    /// How many times this server took notices (a pushed wake-up announces only
    /// what arrived since).
    collected: Arc<std::sync::atomic::AtomicU64>,
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

/// A tool's answer: the JSON, whether it is an error, and the session whose exit
/// it carries (a wait that ended
/// in the exit delivers that completion itself).
#[derive(Debug, Clone)]
struct Answer {
    value: Value,
    is_error: bool,
    answered: Option<String>,
}

impl Answer {
    fn new(value: Value, is_error: bool) -> Answer {
        Answer {
            value,
            is_error,
            answered: None,
        }
    }

    fn ok(value: Value) -> Answer {
        Answer::new(value, false)
    }

    fn error(value: Value) -> Answer {
        Answer::new(value, true)
    }

    /// A refusal: `status` "error" and what went wrong.
    fn failed(error: impl Into<String>) -> Answer {
        Answer::error(Common::failed_value(error))
    }
}

impl Server {
    /// `Ok` when `session_id` resolves to a session of this server's owner; the
    /// error answer otherwise (the daemon's own lookup error for an unknown id).
    async fn own_session(&self, session_id: &str) -> Result<(), Value> {
        let found = self
            .ask_for::<m::Lookup>(&IdParams::new(session_id))
            .await?;
        match found.owner_task_id.as_deref() {
            // An older daemon does not say: act as before.
            None => Ok(()),
            Some(owner) if owner == self.owner.as_str() => Ok(()),
            // Said as such, not as unknown (B31): a host that runs several agents
            // learns to pass `--owner` per agent.
            Some(other) => Err(Common::failed_value(format!(
                "session {session_id} belongs to another agent (owner `{other}`), not to you (`{}`); \
                 start the server with --owner {other} to act for that agent; \
                 process(action=\"list\") shows your sessions",
                self.owner
            ))),
        }
    }

    async fn client(&self) -> Result<Client, Value> {
        Client::connect(&self.home)
            .await
            .map_err(|err| Common::failed_value(format!("{err:#}")))
    }

    async fn call(&self, method: &str, params: Value) -> (Value, bool) {
        let mut client = match self.client().await {
            Ok(client) => client,
            Err(err) => return (err, true),
        };
        match client.call(method, params).await {
            Ok(value) => (value, false),
            Err(CallError::Rpc(err)) if err.code == protocol::NOT_FOUND => {
                let not_found = Common {
                    status: Some("not_found".to_owned()),
                    ..Common::failed(err.message)
                };
                (results::to_value(&not_found), true)
            }
            Err(CallError::Rpc(err)) => (Common::failed_value(err.message), true),
            Err(CallError::Io(err)) => (
                Common::failed_value(format!("lost the connection to the daemon: {err}")),
                true,
            ),
        }
    }

    /// Method `M` of the daemon with herd-protocol's typed params.
    async fn ask<M: Method>(&self, params: &M::Params) -> (Value, bool) {
        match herd_protocol::to_params(params) {
            Ok(params) => self.call(M::NAME, params).await,
            Err(err) => (
                Common::failed_value(format!("cannot encode the {} request: {err}", M::NAME)),
                true,
            ),
        }
    }

    /// Method `M` with typed params, its answer read as the protocol's type (a
    /// missing or mistyped field is an error naming the method, never a default);
    /// the error answer otherwise.
    async fn ask_for<M: Method>(&self, params: &M::Params) -> Result<M::Answer, Value> {
        self.ask_kept::<M>(params).await.map(|(_, answer)| answer)
    }

    /// [`Server::ask_for`] keeping the answer as the daemon wrote it too, for an
    /// action that passes it on (a later daemon's fields with it) after reading it.
    async fn ask_kept<M: Method>(&self, params: &M::Params) -> Result<(Value, M::Answer), Value> {
        let (value, is_error) = self.ask::<M>(params).await;
        if is_error {
            return Err(value);
        }
        match crate::client::answer_of::<M>(&value) {
            Ok(answer) => Ok((value, answer)),
            Err(err) => Err(Common::failed_value(format!("{err:#}"))),
        }
    }

    /// [`Server::ask`] as an [`Answer`].
    async fn answer_typed<M: Method>(&self, params: &M::Params) -> Answer {
        let (value, is_error) = self.ask::<M>(params).await;
        Answer::new(value, is_error)
    }

    /// Takes the owner's notices, leaving out the completion of `answered` (the
    /// answer carries that exit): their rendering, and the lease to acknowledge once
    /// the result is written (`None` from a daemon without leases, whose drain is
    /// delivered at once).
    async fn notices(
        &self,
        answered: Option<&str>,
    ) -> Option<(String, Vec<String>, Option<delivery::Lease>)> {
        let mut client = Client::connect(&self.home).await.ok()?;
        let leased = client.hello.serves("drain.lease");
        let params = DrainParams {
            owner: self.owner.as_str().to_owned(),
            lease: leased,
            answered: if leased {
                answered.into_iter().map(str::to_owned).collect()
            } else {
                Vec::new()
            },
        };
        let drained = client.send_typed::<m::Drain>(&params).await.ok()?;
        // Each event read as its envelope (its `event_id`), whatever kind of event a
        // newer daemon sends.
        let drained = match crate::client::read_part::<DrainAnswer<EventEnvelope>>(
            m::Drain::NAME,
            "",
            &drained,
        ) {
            Ok(drained) => drained,
            Err(err) => {
                // The lease, if one was taken, goes back when this connection drops.
                tracing::warn!(error = %err, "the daemon's drain answer does not read as the protocol says");
                return None;
            }
        };
        if drained.rendered.is_empty() {
            return None;
        }
        let rendered = drained.rendered;
        self.collected
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A daemon before `events.ack` gives no ids: its lease is acknowledged by number.
        let ids: Vec<String> = drained
            .events
            .into_iter()
            .filter_map(|e| e.event_id)
            .collect();
        let lease = drained.lease.map(|number| delivery::Lease {
            client,
            number,
            owner: self.owner.as_str().to_owned(),
            ids: ids.clone(),
            home: self.home.clone(),
        });
        Some((rendered, ids, lease))
    }

    /// Whether a notice log message is wanted: by the request's own level on the
    /// 2026-07-28 revision (no level, no messages), by `logging/setLevel` before it.
    #[expect(
        deprecated,
        reason = "MCP logging carries herd's notices to clients today"
    )]
    fn wants_notice_logs(&self, context: &RequestContext<RoleServer>) -> bool {
        let notice = log_rank(&rmcp::model::LoggingLevel::Notice);
        match context.meta.log_level() {
            Some(level) => log_rank(&level) <= notice,
            None if context.meta.protocol_version().is_some() => false,
            None => self.log_rank.load(std::sync::atomic::Ordering::Relaxed) <= notice,
        }
    }

    /// Sends `rendered` notices as a `notice` log message, when wanted.
    #[expect(
        deprecated,
        reason = "MCP logging is how clients surface server-side notices today"
    )]
    async fn log_notices(&self, rendered: &str, context: &RequestContext<RoleServer>) {
        if !self.wants_notice_logs(context) {
            return;
        }
        let message = rmcp::model::LoggingMessageNotificationParam::new(
            rmcp::model::LoggingLevel::Notice,
            results::to_value(&results::NoticeLog {
                owner: self.owner.as_str(),
                notifications: rendered,
            }),
        )
        .with_logger("herd");
        if let Err(err) = context.peer.notify_logging_message(message).await {
            tracing::debug!(error = %err, "failed to send the notification log message");
        }
    }

    /// Metadata on every result: the owner this server acts for.
    fn meta(&self) -> MetaObject {
        let mut meta = MetaObject::new();
        meta.insert("herd/owner".to_owned(), Value::from(self.owner.as_str()));
        meta
    }

    /// An answer as a tool result: its JSON (also as structured content) and the
    /// owner's notices after it, as a second text block and as the structured
    /// content's `notices`.
    async fn result(&self, answer: Answer, context: &RequestContext<RoleServer>) -> CallToolResult {
        let mut value = without_nulls(answer.value);
        let mut content = vec![ContentBlock::text(value.to_string())];
        let mut event_ids: Vec<String> = Vec::new();
        self.pending.sweep();
        // A cancelled request's result is never written: leave its notices queued
        // (a lease taken as the cancellation landed is dropped, which returns them).
        if !context.ct.is_cancelled()
            && let Some((rendered, ids, lease)) = self.notices(answer.answered.as_deref()).await
            && !context.ct.is_cancelled()
        {
            content.push(ContentBlock::text(rendered.clone()));
            // Also where clients that read only `structuredContent` look (the
            // first text block stays the answer alone).
            if let Value::Object(map) = &mut value {
                map.insert("notices".to_owned(), Value::from(rendered.as_str()));
            }
            event_ids = ids;
            self.log_notices(&rendered, context).await;
            if let Some(lease) = lease {
                self.pending.hold(context.id.clone(), lease);
            }
        }
        let mut result = if answer.is_error {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        // Every result, errors too, is also structured (clients check only the
        // non-error ones against the output schema).
        result.structured_content = Some(value);
        let mut meta = self.meta();
        if !event_ids.is_empty() {
            // The ids of the notices attached: a client that sees one twice (it
            // crashed before the acknowledgement) can tell.
            meta.insert("herd/event_ids".to_owned(), Value::from(event_ids));
        }
        result.meta = Some(meta);
        result
    }
}

/// An answer without its `null` fields: they carry nothing an agent can use and
/// cost tokens on every call.
fn without_nulls(answer: Value) -> Value {
    match answer {
        Value::Object(map) => {
            Value::Object(map.into_iter().filter(|(_, v)| !v.is_null()).collect())
        }
        other => other,
    }
}

impl ServerHandler for Server {
    #[expect(
        deprecated,
        reason = "the logging capability is how herd's notifications reach MCP clients today"
    )]
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_resources()
                .enable_resources_subscribe()
                .enable_tasks()
                .build(),
        )
        .with_server_info(Implementation::new("herd", env!("CARGO_PKG_VERSION")))
        .with_instructions(format!(
            "herd supervises shell commands. Start long jobs with terminal(background=true); \
             their completions arrive with later tool results. A foreground command still running after its \
             timeout moves to the background and you are told when it ends. You act as herd owner `{}`: \
             you see, wait on and kill only your own jobs, and only your completions reach you.",
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
        Ok(ListToolsResult::with_all_items(schema::tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let mut args = request.arguments.unwrap_or_default();
        let tool = request.name.as_ref();
        schema::coerce(tool, &mut args);
        if !matches!(tool, "terminal" | "process") {
            return Err(McpError::invalid_params(
                format!("unknown tool `{tool}`; herd offers `terminal` and `process`"),
                None,
            ));
        }
        if let Err(message) = schema::check_arguments(tool, &args) {
            // Shaped like the tool's other errors, so it matches its output schema.
            let answer = Answer::error(if tool == "terminal" {
                let mut refused = TerminalResult::refused(message);
                refused.common.status = Some("error".to_owned());
                results::to_value(&refused)
            } else {
                let action = args
                    .get("action")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                results::to_value(&ProcessResult {
                    action: action.to_owned(),
                    common: Common::failed(message),
                    ..ProcessResult::default()
                })
            });
            return Ok(self.result(answer, &context).await.into());
        }
        if tool == "terminal" && tasks::wanted(&args, &context) {
            return Ok(self.start_task(&args, &context).await);
        }
        let answer = match tool {
            "terminal" => self.terminal(&args, &context).await,
            _ => self.process(&args, &context).await,
        };
        Ok(self.result(answer, &context).await.into())
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, McpError> {
        Ok(ListResourcesResult::with_all_items(vec![
            self.notifications_resource(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, McpError> {
        self.read_notifications(&request.uri, &context)
            .await
            .map(Into::into)
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.subscribe_legacy(&request.uri, context.peer.clone())
    }

    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.unsubscribe_legacy();
        Ok(())
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        let wants = requested
            .resource_subscriptions
            .as_ref()
            .is_some_and(|uris| uris.iter().any(|u| u == push::NOTIFICATIONS_URI));
        wants.then(|| {
            SubscriptionFilter::builder()
                .resource_subscription(push::NOTIFICATIONS_URI)
                .build()
        })
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), McpError> {
        self.listen_notifications(context).await;
        Ok(())
    }

    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, McpError> {
        match request.method.strip_prefix(tasks_2025::PREFIX) {
            Some(op) => {
                let params = request.params.unwrap_or(Value::Null);
                self.tasks_2025(op, params, context).await
            }
            None => Err(McpError::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("no such method `{}`", request.method),
                None,
            )),
        }
    }

    async fn get_task(
        &self,
        request: GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetTaskResult, McpError> {
        self.tasks.get(&request.task_id)
    }

    async fn cancel_task(
        &self,
        request: CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), McpError> {
        self.tasks.cancel(&request.task_id)
    }
}

/// `log`'s params: a page of `limit` lines from `offset` (the last lines without).
fn log_page(id: &str, offset: Option<usize>, limit: impl TryInto<usize>) -> LogParams {
    LogParams {
        id: id.to_owned(),
        offset,
        limit: limit.try_into().ok(),
    }
}

/// `wait`'s params: until `id` ends (or is ready), at most `timeout_seconds`.
fn wait_for(id: &str, timeout_seconds: f64, ready: bool) -> WaitParams {
    WaitParams {
        id: id.to_owned(),
        timeout_seconds: Some(timeout_seconds),
        ready,
    }
}

#[cfg(test)]
mod tests;
