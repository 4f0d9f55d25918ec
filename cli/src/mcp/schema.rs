//! The two tools as MCP describes them: input schemas that survive strict-mode
//! conversion, one output schema per tool, annotations, and the check that refuses
//! an argument the schema does not name.
//!
//! Every optional property is nullable (`"type": [T, "null"]`): a strict-mode client
//! (OpenAI function calling) makes every property required, and sends `null` for the
//! ones it does not mean, so "the last N lines" is still `offset: null`.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::{Value, json};

use super::budget::{CONTEXT_DEFAULT, CONTEXT_MAX, PAGE_MAX_CHARS};
use super::read::{YIELD_DEFAULT_MS, YIELD_MAX_MS};
use super::{
    ACTIONS, FOREGROUND_DEFAULT_TIMEOUT, FOREGROUND_MAX_TIMEOUT, WAIT_DEFAULT_SECONDS,
    WAIT_MAX_SECONDS,
};

/// The longest heartbeat period a call may ask for, in seconds (one day).
pub(super) const HEARTBEAT_MAX_SECONDS: u64 = 86_400;

/// The longest time limit a call may give, in seconds (ten years, as `herd run`).
pub(super) const TIME_LIMIT_MAX_SECONDS: u64 = *herd_core::limits::TIME_LIMIT_SECONDS.end();

/// The most rows `process list` answers, and its default.
pub(super) const LIST_MAX_ROWS: u64 = 200;
pub(super) const LIST_DEFAULT_ROWS: u64 = 20;

/// A nullable property of `kind` with `extra` keywords.
fn nullable(kind: &str, description: &str, extra: Value) -> Value {
    let mut schema = json!({"type": [kind, "null"], "description": description});
    if let (Value::Object(into), Value::Object(from)) = (&mut schema, extra) {
        into.extend(from);
    }
    schema
}

fn terminal_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {"type": "string", "description": "The shell command line to run (bash -c)."},
            "background": nullable("boolean", "Run in the background and return a session_id at once (default false).", json!({})),
            "timeout": nullable("integer", &format!(
                "Foreground only: seconds to wait (default {FOREGROUND_DEFAULT_TIMEOUT}, at most {FOREGROUND_MAX_TIMEOUT}); \
                 a command still running then moves to the background with notify on, not killed."),
                json!({"minimum": 1, "maximum": FOREGROUND_MAX_TIMEOUT})),
            "workdir": nullable("string", "Working directory, relative to the server's (no shell metacharacters).", json!({})),
            "pty": nullable("boolean", "Background only: run under a pseudo-terminal.", json!({})),
            "notify": {
                "description": "Background only: true (default) = be told once when it exits; false = not; a list of strings = also be told when an output line contains one of them.",
                "anyOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}]
            },
            "heartbeat": nullable("integer", "Background only: every N seconds, be sent the new output (0 or null: off; 1 to 59 count as 60).",
                json!({"minimum": 0, "maximum": HEARTBEAT_MAX_SECONDS})),
            "persist_on_release": nullable("boolean", "Background only: keep running when this agent is released.", json!({})),
            "host": nullable("string", "Run on this host of herd's config.toml [hosts.NAME] instead of here; the session_id is then NAME:proc_…, which process takes like any other.", json!({"pattern": "^[a-z0-9][a-z0-9_-]{0,31}$"})),
            "time_limit": nullable("integer", &format!(
                "Kill the command and everything it started after this many seconds (1 to {TIME_LIMIT_MAX_SECONDS}), \
                 with termination_source time_limit; holds for persist_on_release too. null: no limit."),
                json!({"minimum": 1, "maximum": TIME_LIMIT_MAX_SECONDS})),
            "kill_leftovers": nullable("boolean", "Kill what the command leaves running (background children, daemons it started) once it exits, after a short grace; by default they are kept and `process(action=\"kill\")` ends them.", json!({})),
            "memory": nullable("string", "Memory limit of the command's whole process tree, e.g. \"512M\" or \"2G\" (1M to 1024T), through its cgroup; refused where no cgroup can carry it. null: the config's default (none unless set).", json!({})),
            "cpus": nullable("number", "CPU limit of the command's whole tree: 1.5 is one and a half CPUs (0.01 to 1024). null: the config's default.", json!({"minimum": 0.01, "maximum": 1024})),
            "pids": nullable("integer", "Most processes and threads of the command's whole tree at once (a fork bomb stops there). null: the config's default.", json!({"minimum": 1, "maximum": crate::sizes::PIDS_MAX}))
        },
        "required": ["command"],
        "additionalProperties": false
    })
}

fn process_input() -> Value {
    json!({
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ACTIONS, "description": "What to do."},
            "session_id": nullable("string", "The session id or a unique prefix; required except for list.", json!({})),
            "data": nullable("string", "stdin text for write/submit, or the purpose sentence for handoff.", json!({})),
            "timeout": nullable("integer", &format!("wait only: seconds to wait (default {WAIT_DEFAULT_SECONDS}, at most {WAIT_MAX_SECONDS})."), json!({"minimum": 1})),
            "offset": nullable("integer", "log only: first line, 0 being the first line of the whole output; null = the last `limit` lines.", json!({"minimum": 0})),
            "limit": nullable("integer", &format!(
                "log: number of lines (default 200; a page carries at most {PAGE_MAX_CHARS} characters). \
                 list: most rows, the newest (default {LIST_DEFAULT_ROWS}, at most {LIST_MAX_ROWS})."),
                json!({"minimum": 1})),
            "yield_ms": nullable("integer", &format!("write/submit: milliseconds to wait, then answer the output since your last read (default {YIELD_DEFAULT_MS}; 0: at once)."), json!({"minimum": 0, "maximum": YIELD_MAX_MS})),
            "pattern": nullable("string", "search only: a regex (or text, with literal=true) to find in the whole log.", json!({})),
            "literal": nullable("boolean", "search only: pattern is plain text.", json!({})),
            "context": nullable("integer", &format!("search only: lines around each match (default {CONTEXT_DEFAULT})."), json!({"minimum": 0, "maximum": CONTEXT_MAX})),
            "state": {
                "description": "list only: running (default), finished or all.",
                "enum": ["running", "finished", "all", null]
            },
            "since": nullable("integer", "list only: sessions started in the last this many seconds.", json!({"minimum": 1})),
            "rows": nullable("integer", "resize only: terminal rows of a PTY session.", json!({"minimum": 1, "maximum": 10000})),
            "cols": nullable("integer", "resize only: terminal columns of a PTY session.", json!({"minimum": 1, "maximum": 10000}))
        },
        "required": ["action"],
        "additionalProperties": false
    })
}

/// Fields every answer may carry, whatever produced it.
fn common_fields() -> Value {
    json!({
        "status": {"type": "string"},
        "session_id": {"type": "string"},
        "output": {"type": "string"},
        "note": {"type": "string"},
        "error": {"type": "string"},
        "exit_code": {"type": ["integer", "null"]},
        "total_lines": {"type": "integer"},
        "omitted_lines": {"type": "integer"},
        "notices": {"type": "string", "description": "Your pending notifications (completions, watch matches, heartbeats), also sent as a second text block."}
    })
}

fn terminal_output() -> Value {
    let mut properties = common_fields();
    if let Value::Object(map) = &mut properties {
        for (key, schema) in [
            ("pid", json!({"type": "integer"})),
            ("output_cut", json!({"type": "boolean"})),
            ("log_path", json!({"type": "string"})),
            ("hint", json!({"type": "string"})),
            ("notify_on_complete", json!({"type": "boolean"})),
            (
                "watch_patterns",
                json!({"type": "array", "items": {"type": "string"}}),
            ),
            ("heartbeat_seconds", json!({"type": "integer"})),
            ("persist_on_release", json!({"type": "boolean"})),
            ("time_limit_seconds", json!({"type": "integer"})),
        ] {
            map.insert(key.to_owned(), schema);
        }
    }
    json!({"type": "object", "properties": properties, "required": ["output"]})
}

/// One branch per action, told apart by `action`, and one for a call that names
/// no known action; the fields are declared once.
fn process_output() -> Value {
    let mut properties = common_fields();
    if let Value::Object(map) = &mut properties {
        for (key, schema) in [
            ("action", json!({"type": "string"})),
            (
                "processes",
                json!({"type": "array", "items": {"type": "object"}}),
            ),
            ("more", json!({"type": "integer"})),
            ("offset", json!({"type": "integer"})),
            ("matches", json!({"type": "integer"})),
            ("new_lines", json!({"type": "integer"})),
            ("bytes_written", json!({"type": "integer"})),
            ("page_cut", json!({"type": "boolean"})),
        ] {
            map.insert(key.to_owned(), schema);
        }
    }
    let mut branches: Vec<Value> = ACTIONS
        .iter()
        .map(|action| json!({"properties": {"action": {"const": action}}, "required": ["action"]}))
        .collect();
    // A call naming no known action is answered with the error and what it named.
    branches.push(json!({
        "properties": {"action": {"not": {"enum": ACTIONS}}, "status": {"const": "error"}},
        "required": ["action", "status", "error"]
    }));
    json!({"type": "object", "properties": properties, "required": ["action"], "oneOf": branches})
}

/// The tool list.
pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "terminal",
            "Run a shell command. Foreground calls return its output and exit code; one still running \
             after `timeout` moves to the background and you are told when it ends. background=true \
             returns a session_id at once and you are told when it finishes (notify=false: not). Commands that \
             would kill the host are refused.",
            as_object(terminal_input()),
        )
        .with_title("Run a shell command")
        .with_raw_output_schema(Arc::new(as_object(terminal_output())))
        .with_annotations(
            ToolAnnotations::with_title("Run a shell command")
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
        Tool::new(
            "process",
            "Manage background processes started with terminal(background=true): list (running ones; \
             state=finished|all for the rest), poll (status + latest output), read (output since your last read), log (full output, paged \
             by lines), search (pattern over the whole log), wait (block until exit or timeout), kill (the whole process tree), write (raw \
             stdin), submit (stdin + Enter; both answer the output that follows), close (EOF), resize, handoff (give the process to the \
             parent agent with a note).",
            as_object(process_input()),
        )
        .with_title("Manage background processes")
        .with_raw_output_schema(Arc::new(as_object(process_output())))
        .with_annotations(
            ToolAnnotations::with_title("Manage background processes")
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ),
    ]
}

/// `Err` naming an argument `tool`'s schema does not have, and the one meant when
/// it looks like a misspelling of one.
pub(super) fn check_arguments(tool: &str, args: &JsonObject) -> Result<(), String> {
    let schema = match tool {
        "terminal" => terminal_input(),
        _ => process_input(),
    };
    let Some(known) = schema["properties"].as_object() else {
        return Ok(());
    };
    for key in args.keys() {
        if known.contains_key(key) {
            continue;
        }
        let names: Vec<&str> = known.keys().map(String::as_str).collect();
        let hint = closest(key, &names)
            .map(|near| format!("did you mean `{near}`? "))
            .unwrap_or_default();
        return Err(format!(
            "unknown argument `{key}` for {tool}; {hint}{tool} takes: {}",
            names.join(", ")
        ));
    }
    Ok(())
}

/// The known name `key` most likely misspells, if any is close.
fn closest<'a>(key: &str, names: &[&'a str]) -> Option<&'a str> {
    let squash = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_ascii_alphanumeric())
            .map(|c| c.to_ascii_lowercase())
            .collect()
    };
    let wanted = squash(key);
    names
        .iter()
        .map(|name| (strsim::damerau_levenshtein(&wanted, &squash(name)), *name))
        .filter(|(distance, name)| *distance <= 2.max(name.len() / 4))
        .min_by_key(|(distance, _)| *distance)
        .map(|(_, name)| name)
}

/// A JSON object literal as a schema object.
pub(super) fn as_object(value: Value) -> JsonObject {
    match value {
        Value::Object(map) => map,
        _ => JsonObject::new(),
    }
}
