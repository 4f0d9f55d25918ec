//! The two tools as MCP describes them: input schemas (from the argument types of
//! `args.rs`) that survive strict-mode conversion, one output schema per tool (from
//! the result types of `results.rs`), annotations, and the check that refuses an
//! argument the schema does not name.

use std::sync::Arc;

use rmcp::model::{JsonObject, Tool, ToolAnnotations};
use serde_json::Value;

use super::args::input_schema;
use super::results::output_schema;

/// The tool list.
pub(super) fn tools() -> Vec<Tool> {
    vec![
        Tool::new(
            "terminal",
            "Run a shell command. Foreground: its output and exit code; still running after `timeout`, it \
             moves to the background. background=true: a session_id at once. You are told when a \
             background job ends (notify=false: not). Commands that would kill the host are refused.",
            input_schema("terminal"),
        )
        .with_title("Run a shell command")
        .with_raw_output_schema(Arc::new(output_schema("terminal")))
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
            input_schema("process"),
        )
        .with_title("Manage background processes")
        .with_raw_output_schema(Arc::new(output_schema("process")))
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
    let schema = Value::Object(input_schema(tool));
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
            Some(Value::Bool(text == "true"))
        } else if types.contains(&"integer") {
            text.parse::<u64>().ok().map(Value::from)
        } else if types.contains(&"number") {
            text.parse::<f64>()
                .ok()
                .filter(|n| n.is_finite())
                .map(Value::from)
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
    let schema = Value::Object(input_schema(tool));
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A JSON object literal as arguments.
    fn as_object(value: Value) -> JsonObject {
        match value {
            Value::Object(map) => map,
            _ => JsonObject::new(),
        }
    }

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
