//! The tools' arguments as Rust types: their JSON Schemas (`inputSchema` of
//! `tools/list`) are generated from these structs, with the bounds and
//! descriptions on the fields.
//!
//! These types never cross to the daemon (the tools turn them into herd-protocol
//! params), so they live with the MCP server rather than in herd-protocol; what
//! clients see is pinned by `docs/protocol/mcp-tools.json` (the `mcp_tools` test).
//!
//! Every optional property is nullable (`"type": [T, "null"]`): a strict-mode client
//! (OpenAI function calling) makes every property required, and sends `null` for the
//! ones it does not mean, so "the last N lines" is still `offset: null`. The
//! arguments themselves are read by the tools' own checks (`terminal.rs`,
//! `process.rs`), whose messages name the argument and its range; these types are
//! the schema's single source.

use rmcp::model::JsonObject;
use schemars::generate::Contract;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

use super::budget::{CONTEXT_DEFAULT, CONTEXT_MAX, PAGE_MAX_CHARS};
use super::generate::{generator, object_schema};
use super::read::{YIELD_DEFAULT_MS, YIELD_MAX_MS};
use super::{
    FOREGROUND_DEFAULT_TIMEOUT, FOREGROUND_MAX_TIMEOUT, WAIT_DEFAULT_SECONDS, WAIT_MAX_SECONDS,
};
use crate::sizes::PIDS_MAX;

/// The longest heartbeat period a call may ask for, in seconds (one day).
pub(super) const HEARTBEAT_MAX_SECONDS: u64 = 86_400;

/// The longest time limit a call may give, in seconds (ten years, as `herd run`).
pub(super) const TIME_LIMIT_MAX_SECONDS: u64 = *herd_core::limits::TIME_LIMIT_SECONDS.end();

/// The most rows `process list` answers, and its default.
pub(super) const LIST_MAX_ROWS: u64 = 200;
pub(super) const LIST_DEFAULT_ROWS: u64 = 20;

/// A host name of `[hosts.NAME]`.
const HOST_PATTERN: &str = "^[a-z0-9][a-z0-9_-]{0,31}$";

/// `terminal`'s arguments.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "the schema's source; the tool reads its arguments with its own checks"
)]
pub(super) struct TerminalArgs {
    /// The shell command line to run (bash -c).
    command: String,
    /// Return a session_id at once (default false).
    background: Option<bool>,
    #[schemars(
        description = format!("Foreground: seconds to wait (default {FOREGROUND_DEFAULT_TIMEOUT}), then it moves to the background."),
        range(min = 1, max = FOREGROUND_MAX_TIMEOUT)
    )]
    timeout: Option<u64>,
    /// Working directory, relative to the server's.
    workdir: Option<String>,
    /// Background: run under a pseudo-terminal.
    pty: Option<bool>,
    /// Background: be told when it exits (default true); a list of strings: also when an output line contains one.
    #[serde(default)]
    #[schemars(schema_with = "nullable::<Notify>")]
    notify: Option<Notify>,
    /// Background: every N seconds (min 60), be sent the new output; 0: off.
    #[schemars(range(min = 0, max = HEARTBEAT_MAX_SECONDS))]
    heartbeat: Option<u64>,
    /// Background: keep running when this agent is released.
    persist_on_release: Option<bool>,
    /// Run on this [hosts.NAME] of herd's config; the session_id is NAME:proc_….
    #[schemars(pattern(HOST_PATTERN))]
    host: Option<String>,
    /// Kill the command and all it started after this many seconds.
    #[schemars(range(min = 1, max = TIME_LIMIT_MAX_SECONDS))]
    time_limit: Option<u64>,
    /// Kill what the command leaves running once it exits (default: kept until process kill).
    kill_leftovers: Option<bool>,
    /// Memory limit of the whole tree, e.g. "512M", "2G" (a cgroup).
    memory: Option<String>,
    /// CPU limit of the whole tree (1.5 = one and a half CPUs).
    #[schemars(range(min = 0.01, max = 1024))]
    cpus: Option<f64>,
    /// Most processes and threads of the whole tree.
    #[schemars(range(min = 1, max = PIDS_MAX))]
    pids: Option<u64>,
    /// Background: ready when an output line matches this regex (a `ready` notice; process wait ready).
    ready: Option<String>,
    /// Background: ready when it listens on this local TCP port.
    #[schemars(range(min = 1, max = 65535))]
    ready_port: Option<u64>,
    /// Background: queue it in this group (process group_add); runs when the group has room.
    group: Option<String>,
    /// Background: start after these ids/names (comma-separated) exit 0.
    after: Option<String>,
    /// Background: start once these are ready.
    after_ready: Option<String>,
}

/// `notify`: a flag, or output patterns to watch for.
#[derive(Debug, Clone, JsonSchema)]
#[serde(untagged)]
#[schemars(inline)]
#[expect(dead_code, reason = "the schema's source")]
pub(super) enum Notify {
    Flag(bool),
    Patterns(Vec<String>),
}

/// What `process` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[expect(dead_code, reason = "the schema's source")]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub(super) enum Action {
    List,
    Poll,
    Read,
    Log,
    Search,
    Wait,
    Kill,
    Write,
    Submit,
    Close,
    Resize,
    Handoff,
    GroupAdd,
    GroupSet,
    GroupList,
    GroupRm,
}

/// Which sessions `list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, JsonSchema)]
#[expect(dead_code, reason = "the schema's source")]
#[serde(rename_all = "snake_case")]
#[schemars(inline)]
pub(super) enum ListState {
    Running,
    Finished,
    All,
}

/// `process`'s arguments.
#[derive(Debug, Clone, JsonSchema)]
#[serde(deny_unknown_fields)]
#[expect(
    dead_code,
    reason = "the schema's source; the tool reads its arguments with its own checks"
)]
pub(super) struct ProcessArgs {
    /// What to do.
    action: Action,
    /// Session id or unique prefix.
    session_id: Option<String>,
    /// write/submit: stdin text; handoff: what it is for.
    data: Option<String>,
    #[schemars(
        description = format!("wait: seconds (default {WAIT_DEFAULT_SECONDS}, at most {WAIT_MAX_SECONDS})."),
        range(min = 1)
    )]
    timeout: Option<u64>,
    /// wait: until ready (terminal's ready/ready_port), not the exit.
    ready: Option<bool>,
    /// log: first line (0-based); null: the last `limit` lines.
    #[schemars(range(min = 0))]
    offset: Option<u64>,
    #[schemars(
        description = format!("log: lines (default 200; at most {PAGE_MAX_CHARS} characters a page). list: newest rows (default {LIST_DEFAULT_ROWS}, at most {LIST_MAX_ROWS})."),
        range(min = 1)
    )]
    limit: Option<u64>,
    #[schemars(
        description = format!("write/submit: ms to wait, then answer the new output (default {YIELD_DEFAULT_MS})."),
        range(min = 0, max = YIELD_MAX_MS)
    )]
    yield_ms: Option<u64>,
    /// search: a regex to find in the whole log.
    pattern: Option<String>,
    /// search: pattern is plain text.
    literal: Option<bool>,
    #[schemars(
        description = format!("search: lines around each match (default {CONTEXT_DEFAULT})."),
        range(min = 0, max = CONTEXT_MAX)
    )]
    context: Option<u64>,
    /// list: running (default), finished or all.
    #[serde(default)]
    #[schemars(schema_with = "nullable::<ListState>")]
    state: Option<ListState>,
    /// list: started in the last this many seconds.
    #[schemars(range(min = 1))]
    since: Option<u64>,
    /// resize: PTY rows.
    #[schemars(range(min = 1, max = 10000))]
    rows: Option<u64>,
    /// resize: PTY columns.
    #[schemars(range(min = 1, max = 10000))]
    cols: Option<u64>,
    /// group_*: the group's name.
    group: Option<String>,
    /// group_add/group_set: jobs of it at once.
    #[schemars(range(min = 1, max = 1024))]
    parallel: Option<u64>,
}

/// `T`'s schema with `null` allowed among its alternatives (`anyOf`) or values
/// (`enum`), rather than wrapped in another `anyOf` as `Option<T>`'s is.
fn nullable<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = generator.subschema_for::<T>();
    let null = generator.subschema_for::<()>();
    if let Some(Value::Array(any)) = schema.get_mut("anyOf") {
        any.push(null.to_value());
    } else if let Some(Value::Array(values)) = schema.get_mut("enum") {
        values.push(Value::Null);
        schema.remove("type");
    }
    schema
}

/// `tool`'s input schema (`terminal`'s, else `process`'s).
pub(super) fn input_schema(tool: &str) -> JsonObject {
    match tool {
        "terminal" => object_schema::<TerminalArgs>(generator(Contract::Deserialize)),
        _ => object_schema::<ProcessArgs>(generator(Contract::Deserialize)),
    }
}
