//! The generator the tools' schemas (`args.rs`, `results.rs`) are made with.

use rmcp::model::JsonObject;
use schemars::generate::{Contract, SchemaSettings};
use schemars::transform::RecursiveTransform;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::Value;

/// The generator of the tools' schemas, of what a type reads (`Deserialize`) or
/// writes (`Serialize`): JSON Schema 2020-12 (as MCP asks), without `$schema` and
/// without the Rust integer `format`s, which clients have no use for.
pub(super) fn generator(contract: Contract) -> SchemaGenerator {
    let mut settings = SchemaSettings::draft2020_12();
    settings.contract = contract;
    settings.meta_schema = None;
    settings
        .transforms
        .push(Box::new(RecursiveTransform(|schema: &mut Schema| {
            schema.remove("format");
        })));
    settings.into_generator()
}

/// `T`'s schema as a tool's schema object: no `title`, no `description` (the tool
/// has its own).
pub(super) fn object_schema<T: JsonSchema>(mut generator: SchemaGenerator) -> JsonObject {
    let schema = generator.root_schema_for::<T>();
    match schema.to_value() {
        Value::Object(mut map) => {
            map.remove("title");
            map.remove("description");
            map
        }
        _ => JsonObject::new(),
    }
}
