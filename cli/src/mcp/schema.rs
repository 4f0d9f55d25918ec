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
            "background": nullable("boolean", "Return a session_id at once (default false).", json!({})),
            "timeout": nullable("integer", &format!(
                "Foreground: seconds to wait (default {FOREGROUND_DEFAULT_TIMEOUT}), then it moves to the background."),
                json!({"minimum": 1, "maximum": FOREGROUND_MAX_TIMEOUT})),
            "workdir": nullable("string", "Working directory, relative to the server's.", json!({})),
            "pty": nullable("boolean", "Background: run under a pseudo-terminal.", json!({})),
            "notify": {
                "description": "Background: be told when it exits (default true); a list of strings: also when an output line contains one.",
                "anyOf": [{"type": "boolean"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}]
            },
            "heartbeat": nullable("integer", "Background: every N seconds (min 60), be sent the new output; 0: off.",
                json!({"minimum": 0, "maximum": HEARTBEAT_MAX_SECONDS})),
            "persist_on_release": nullable("boolean", "Background: keep running when this agent is released.", json!({})),
            "host": nullable("string", "Run on this [hosts.NAME] of herd's config; the session_id is NAME:proc_….", json!({"pattern": "^[a-z0-9][a-z0-9_-]{0,31}$"})),
            "time_limit": nullable("integer", "Kill the command and all it started after this many seconds.",
                json!({"minimum": 1, "maximum": TIME_LIMIT_MAX_SECONDS})),
            "kill_leftovers": nullable("boolean", "Kill what the command leaves running once it exits (default: kept until process kill).", json!({})),
            "memory": nullable("string", "Memory limit of the whole tree, e.g. \"512M\", \"2G\" (a cgroup).", json!({})),
            "cpus": nullable("number", "CPU limit of the whole tree (1.5 = one and a half CPUs).", json!({"minimum": 0.01, "maximum": 1024})),
            "pids": nullable("integer", "Most processes and threads of the whole tree.", json!({"minimum": 1, "maximum": crate::sizes::PIDS_MAX})),
            "ready": nullable("string", "Background: ready when an output line matches this regex (a `ready` notice; process wait ready).", json!({})),
            "ready_port": nullable("integer", "Background: ready when it listens on this local TCP port.", json!({"minimum": 1, "maximum": 65535})),
            "group": nullable("string", "Background: queue it in this group (process group_add); runs when the group has room.", json!({})),
            "after": nullable("string", "Background: start after these ids/names (comma-separated) exit 0.", json!({})),
            "after_ready": nullable("string", "Background: start once these are ready.", json!({}))
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
            "session_id": nullable("string", "Session id or unique prefix.", json!({})),
            "data": nullable("string", "write/submit: stdin text; handoff: what it is for.", json!({})),
            "timeout": nullable("integer", &format!("wait: seconds (default {WAIT_DEFAULT_SECONDS}, at most {WAIT_MAX_SECONDS})."), json!({"minimum": 1})),
            "ready": nullable("boolean", "wait: until ready (terminal's ready/ready_port), not the exit.", json!({})),
            "offset": nullable("integer", "log: first line (0-based); null: the last `limit` lines.", json!({"minimum": 0})),
            "limit": nullable("integer", &format!(
                "log: lines (default 200; at most {PAGE_MAX_CHARS} characters a page). list: newest rows (default {LIST_DEFAULT_ROWS}, at most {LIST_MAX_ROWS})."),
                json!({"minimum": 1})),
            "yield_ms": nullable("integer", &format!("write/submit: ms to wait, then answer the new output (default {YIELD_DEFAULT_MS})."), json!({"minimum": 0, "maximum": YIELD_MAX_MS})),
            "pattern": nullable("string", "search: a regex to find in the whole log.", json!({})),
            "literal": nullable("boolean", "search: pattern is plain text.", json!({})),
            "context": nullable("integer", &format!("search: lines around each match (default {CONTEXT_DEFAULT})."), json!({"minimum": 0, "maximum": CONTEXT_MAX})),
            "state": {
                "description": "list: running (default), finished or all.",
                "enum": ["running", "finished", "all", null]
            },
            "since": nullable("integer", "list: started in the last this many seconds.", json!({"minimum": 1})),
            "rows": nullable("integer", "resize: PTY rows.", json!({"minimum": 1, "maximum": 10000})),
            "cols": nullable("integer", "resize: PTY columns.", json!({"minimum": 1, "maximum": 10000})),
            "group": nullable("string", "group_*: the group's name.", json!({})),
            "parallel": nullable("integer", "group_add/group_set: jobs of it at once.", json!({"minimum": 1, "maximum": 1024}))
        },
        "required": ["action"],
        "additionalProperties": false
    })
}

/// `{name: {"type": T}}` for each pair; an empty type is any value.
fn fields(pairs: &[(&str, &str)]) -> serde_json::Map<String, Value> {
    pairs
        .iter()
        .map(|(name, kind)| {
            let schema = if kind.is_empty() {
                json!({})
            } else {
                json!({"type": kind})
            };
            ((*name).to_owned(), schema)
        })
        .collect()
}

/// Fields every answer may carry, whatever produced it.
fn common_fields() -> serde_json::Map<String, Value> {
    let mut map = fields(&[
        ("status", "string"),
        ("session_id", "string"),
        ("output", "string"),
        ("note", "string"),
        ("error", "string"),
        ("total_lines", "integer"),
        ("omitted_lines", "integer"),
        ("pid", "integer"),
        ("command", "string"),
        ("log_path", "string"),
        ("output_cut", "boolean"),
        ("completion_reason", "string"),
        ("termination_source", "string"),
        ("signal", ""),
        ("notices", "string"),
    ]);
    map.insert("exit_code".to_owned(), json!({"type": ["integer", "null"]}));
    map
}

fn terminal_output() -> Value {
    let mut properties = common_fields();
    properties.extend(fields(&[
        ("hint", "string"),
        ("notify_on_complete", "boolean"),
        ("watch_patterns", "array"),
        ("heartbeat_seconds", "integer"),
        ("persist_on_release", "boolean"),
        ("time_limit_seconds", "integer"),
        ("pty_note", "string"),
        ("dispatch", ""),
        ("verdict", ""),
        ("infrastructure", ""),
    ]));
    json!({"type": "object", "properties": properties, "required": ["output"]})
}

/// Every field any action answers, declared once.
fn process_output() -> Value {
    let mut properties = common_fields();
    properties.extend(fields(&[
        ("action", "string"),
        ("processes", "array"),
        ("more", "integer"),
        ("offset", "integer"),
        ("showing", "string"),
        ("page_cut", "boolean"),
        ("matches", "integer"),
        ("new_lines", "integer"),
        ("bytes_written", "integer"),
        ("output_preview", "string"),
        ("uptime_seconds", "number"),
        ("total_ingested", "integer"),
        ("process_running", "boolean"),
        ("message", "string"),
        ("containment", ""),
        ("usage", ""),
        ("ready_at", "string"),
        ("groups", "array"),
    ]));
    json!({"type": "object", "properties": properties, "required": ["action"]})
}

/// The tool list.
pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "terminal",
            "Run a shell command. Foreground: its output and exit code; still running after `timeout`, it \
             moves to the background. background=true: a session_id at once. You are told when a \
             background job ends (notify=false: not). Commands that would kill the host are refused.",
            as_object(terminal_input()),
        )
        .with_title("Run a shell command")
        .with_raw_output_schema(Arc::new(as_object(terminal_output())))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(true),
        ),
        Tool::new(
            "process",
            "Act on your background jobs: list (running; state=finished|all), poll, read (output since \
             your last read), log (paged lines), search (regex over the log), wait, kill (whole tree), \
             write (stdin), submit (stdin + Enter; both answer what follows), close (EOF), resize, \
             handoff (to the parent agent, with a note).",
            as_object(process_input()),
        )
        .with_title("Manage background processes")
        .with_raw_output_schema(Arc::new(as_object(process_output())))
        .with_annotations(
            ToolAnnotations::new()
                .read_only(false)
                .destructive(true)
                .idempotent(false)
                .open_world(false),
        ),
    ]
}

/// The JSON types a property's schema allows (`type`, a type list, or `anyOf`).
fn types_of(property: &Value) -> Vec<&str> {
    let mut types: Vec<&str> = match &property["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(list) => list.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    for branch in property["anyOf"].as_array().into_iter().flatten() {
        types.extend(branch["type"].as_str());
    }
    types
}

/// Reads a string argument that spells a boolean or a number as that value where
/// the schema wants one: clients that can only send strings (the Inspector CLI's
/// `--tool-arg key=value` against nullable types) are understood. Anything else is
/// left for the checks to refuse with their message.
pub(super) fn coerce(tool: &str, args: &mut JsonObject) {
    let schema = match tool {
        "terminal" => terminal_input(),
        _ => process_input(),
    };
    for (key, value) in args.iter_mut() {
        let Value::String(text) = value else {
            continue;
        };
        let types = types_of(&schema["properties"][key.as_str()]);
        if types.contains(&"string") {
            continue;
        }
        let text = text.trim();
        let read = if types.contains(&"boolean") && matches!(text, "true" | "false") {
            Some(json!(text == "true"))
        } else if types.contains(&"integer") {
            text.parse::<u64>().ok().map(|n| json!(n))
        } else if types.contains(&"number") {
            text.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .map(|n| json!(n))
        } else {
            None
        };
        if let Some(read) = read {
            *value = read;
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_that_spell_booleans_and_numbers_are_read_as_them() {
        let mut args = as_object(json!({
            "command": "true", "background": "true", "timeout": "30", "cpus": "1.5",
            "notify": "false", "memory": "512M", "pty": "yes",
        }));
        coerce("terminal", &mut args);
        assert_eq!(
            Value::Object(args),
            json!({
                "command": "true", "background": true, "timeout": 30, "cpus": 1.5,
                "notify": false, "memory": "512M", "pty": "yes",
            })
        );
        let mut args = as_object(
            json!({"action": "wait", "timeout": "10", "literal": "true", "session_id": "12"}),
        );
        coerce("process", &mut args);
        assert_eq!(
            Value::Object(args),
            json!({"action": "wait", "timeout": 10, "literal": true, "session_id": "12"})
        );
    }
}
