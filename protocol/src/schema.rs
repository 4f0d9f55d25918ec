//! The JSON Schema of the wire and the method table, generated from this crate's
//! types. `docs/protocol/schema.json` and `docs/protocol/methods.md` are their
//! checked-in copies; `cargo test -p herd-protocol` fails when they differ from
//! what [`document`] and [`method_table`] give, and
//! `HERD_PROTOCOL_WRITE=1 cargo test -p herd-protocol --test schema` writes them
//! again.

use std::fmt::Write as _;

use schemars::generate::SchemaSettings;
use serde_json::{Map, Value, json};

use crate::{PROTOCOL_VERSION, Request, Response, capabilities, codes, methods};

/// The whole schema document: the envelope, every method's params, answer and
/// notes (by `$ref` into `$defs`), the capabilities and the error codes.
pub fn document() -> Value {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let request = generator.subschema_for::<Request>();
    let response = generator.subschema_for::<Response>();
    let mut methods = Map::new();
    for info in methods::ALL {
        let mut notes = Map::new();
        for (name, schema) in info.notes {
            notes.insert((*name).to_owned(), schema(&mut generator).to_value());
        }
        let mut method = Map::new();
        method.insert("summary".into(), json!(info.summary));
        if let Some(capability) = info.capability {
            method.insert("capability".into(), json!(capability));
        }
        method.insert("params".into(), (info.params)(&mut generator).to_value());
        method.insert("result".into(), (info.answer)(&mut generator).to_value());
        if !notes.is_empty() {
            method.insert("notes".into(), Value::Object(notes));
        }
        methods.insert(info.name.to_owned(), Value::Object(method));
    }
    let errors: Map<String, Value> = codes::ALL
        .iter()
        .map(|(code, name, meaning)| {
            (
                (*name).to_owned(),
                json!({"code": code, "meaning": meaning}),
            )
        })
        .collect();
    let defs = generator.take_definitions(true);
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://github.com/herd-supervisor/herd/docs/protocol/schema.json",
        "title": "herd daemon wire protocol",
        "description": "JSON-RPC 2.0 over a Unix socket, one message a line. Generated from the herd-protocol crate; do not edit.",
        "protocol": PROTOCOL_VERSION,
        "capabilities": capabilities::ALL,
        "errors": errors,
        "request": request.to_value(),
        "response": response.to_value(),
        "methods": methods,
        "$defs": defs,
    })
}

/// The schema document as its checked-in file holds it: pretty, newline-ended.
pub fn document_text() -> String {
    let mut text = serde_json::to_string_pretty(&document()).unwrap_or_default();
    text.push('\n');
    text
}

/// The `$defs` name a `$ref` schema points at.
fn def_name(schema: &Value) -> String {
    schema
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.rsplit('/').next())
        .map_or_else(|| "open (see docs/protocol.md)".to_owned(), str::to_owned)
}

/// The method table (`docs/protocol/methods.md`): each method with the capability
/// that added it, its params and answer types, and its notes; then the error codes
/// and the capabilities.
pub fn method_table() -> String {
    let mut generator = SchemaSettings::draft2020_12().into_generator();
    let mut out = String::from(
        "# herd wire methods\n\n\
         Generated from the `herd-protocol` crate (`protocol/src/methods.rs`); do not edit.\n\
         Regenerate with `HERD_PROTOCOL_WRITE=1 cargo test -p herd-protocol --test schema`.\n\
         The types are `$defs` of [schema.json](schema.json).\n\n\
         | method | capability | params | answer | notes | what it does |\n\
         |---|---|---|---|---|---|\n",
    );
    for info in methods::ALL {
        let params = def_name(&(info.params)(&mut generator).to_value());
        let answer = def_name(&(info.answer)(&mut generator).to_value());
        let notes: Vec<String> = info
            .notes
            .iter()
            .map(|(name, schema)| {
                format!("`{name}` {}", def_name(&schema(&mut generator).to_value()))
            })
            .collect();
        let _ = writeln!(
            out,
            "| `{}` | {} | {params} | {answer} | {} | {} |",
            info.name,
            info.capability
                .map_or_else(|| "1".to_owned(), |c| format!("`{c}`")),
            notes.join(", "),
            info.summary,
        );
    }
    out.push_str("\n## Error codes\n\n| code | name | meaning |\n|---|---|---|\n");
    for (code, name, meaning) in codes::ALL {
        let _ = writeln!(out, "| {code} | `{name}` | {meaning} |");
    }
    out.push_str("\n## Capabilities\n\nAnnounced in `hello`'s answer, in this order:\n\n");
    for capability in capabilities::ALL {
        let _ = writeln!(out, "- `{capability}`");
    }
    out
}
