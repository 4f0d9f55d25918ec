//! The tools' results as Rust types: their `outputSchema`s are generated from these
//! structs, and the answers the server builds itself (refusals, starts, exits,
//! searches, reads) are these structs. An answer of the daemon that a `process`
//! action passes on is herd-protocol's answer as the daemon wrote it; the output
//! schemas leave other properties open for it.
//!
//! The schema of a field keeps what clients were told before these types (a plain
//! `{"type": "string"}` for an optional string, `{}` for a value of any shape), so
//! `with`/`schema_with` say it where the Rust type would say more.

use rmcp::model::JsonObject;
use schemars::generate::Contract;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde_json::Value;

use super::generate::{generator, object_schema};

/// A property of any JSON value (`{}`).
fn any(_: &mut SchemaGenerator) -> Schema {
    Schema::from(JsonObject::new())
}

/// A property that is an array (`{"type": "array"}`), of whatever items.
fn array(_: &mut SchemaGenerator) -> Schema {
    let mut schema = Schema::from(JsonObject::new());
    schema.insert("type".to_owned(), Value::from("array"));
    schema
}

/// Fields every answer may carry, whatever produced it.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub(super) struct Common {
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) status: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) note: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) error: Option<String>,
    /// Lines of the whole log (a JSON Schema `integer`).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) total_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) omitted_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) pid: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_string")]
    pub(super) log_path: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub(super) output_cut: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any_string")]
    pub(super) completion_reason: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) termination_source: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any")]
    pub(super) signal: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) notices: Option<String>,
    /// The exit code; `null` when the job was killed by a signal.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub(super) exit_code: Option<Value>,
}

/// A string property (`{"type": "string"}`) whose value is passed on from the
/// daemon's answer as it came.
fn any_string(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<String>()
}

impl Common {
    /// A refusal: `status` "error" and what went wrong.
    pub(super) fn failed(error: impl Into<String>) -> Common {
        Common {
            status: Some("error".to_owned()),
            error: Some(error.into()),
            ..Common::default()
        }
    }

    /// [`Common::failed`] as the JSON of an answer.
    pub(super) fn failed_value(error: impl Into<String>) -> Value {
        to_value(&Common::failed(error))
    }
}

/// `terminal`'s result.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub(super) struct TerminalResult {
    /// The output (or a line saying the job started).
    #[schemars(with = "String")]
    pub(super) output: Value,
    #[serde(flatten)]
    pub(super) common: Common,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) hint: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub(super) notify_on_complete: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "array")]
    pub(super) watch_patterns: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) heartbeat_seconds: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub(super) persist_on_release: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) time_limit_seconds: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) pty_note: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any")]
    pub(super) dispatch: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any")]
    pub(super) verdict: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any")]
    pub(super) infrastructure: Option<Value>,
}

impl TerminalResult {
    /// A call refused before any job started: no output, exit code -1.
    pub(super) fn refused(error: impl Into<String>) -> TerminalResult {
        TerminalResult {
            output: Value::from(""),
            common: Common {
                exit_code: Some(Value::from(-1)),
                error: Some(error.into()),
                ..Common::default()
            },
            ..TerminalResult::default()
        }
    }
}

/// `process`'s result: the fields of every action's answer, declared once.
#[derive(Debug, Clone, Default, Serialize, JsonSchema)]
pub(super) struct ProcessResult {
    /// The action answered.
    pub(super) action: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) output: Option<String>,
    #[serde(flatten)]
    pub(super) common: Common,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "array")]
    pub(super) processes: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) more: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) offset: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) showing: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub(super) page_cut: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) matches: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) new_lines: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) bytes_written: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) output_preview: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "f64")]
    pub(super) uptime_seconds: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "i64")]
    pub(super) total_ingested: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "bool")]
    pub(super) process_running: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) message: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any")]
    pub(super) containment: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "any")]
    pub(super) usage: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(with = "String")]
    pub(super) ready_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "array")]
    pub(super) groups: Option<Value>,
}

/// A result type's JSON: its fields are strings, numbers and JSON values, so it
/// always serialises.
pub(super) fn to_value<T: Serialize>(result: &T) -> Value {
    serde_json::to_value(result).unwrap_or_default()
}

/// Sets `key` of an answer passed on as the daemon wrote it (a note, the output
/// within the budget): the server's own field, written, never read. Unlike
/// `answer[key] = …` it cannot panic: an answer that is no object is left as it is
/// (the daemon's answers are objects, and the caller has read this one as one).
pub(super) fn set_field(answer: &mut Value, key: &str, value: impl Into<Value>) {
    if let Value::Object(map) = answer {
        map.insert(key.to_owned(), value.into());
    }
}

/// `tool`'s output schema (`terminal`'s, else `process`'s), as clients see it:
/// the fields' properties open to more (a `process` action passes the daemon's
/// answer on) and the one field every answer has required.
pub(super) fn output_schema(tool: &str) -> JsonObject {
    let generator = generator(Contract::Serialize);
    let mut schema = match tool {
        "terminal" => object_schema::<TerminalResult>(generator),
        _ => object_schema::<ProcessResult>(generator),
    };
    // Open: `additionalProperties` unset, as before these types.
    schema.remove("additionalProperties");
    if let Some(Value::Object(properties)) = schema.get_mut("properties") {
        for property in properties.values_mut() {
            if let Value::Object(p) = property {
                p.remove("description");
            }
        }
    }
    schema
}

/// The data of the `notice` log message that carries the owner's notices.
#[derive(Debug, Clone, Serialize)]
pub(super) struct NoticeLog<'a> {
    /// The owner this server acts for.
    pub(super) owner: &'a str,
    /// The notices, rendered for an agent.
    pub(super) notifications: &'a str,
}
