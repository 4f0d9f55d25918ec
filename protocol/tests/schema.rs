//! The checked-in schema and method table match the code.
//! `HERD_PROTOCOL_WRITE=1 cargo test -p herd-protocol --test schema` writes them again.

use std::path::PathBuf;

fn check(file: &str, generated: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../docs/protocol")
        .join(file);
    if std::env::var_os("HERD_PROTOCOL_WRITE").is_some() {
        std::fs::create_dir_all(path.parent().expect("docs/protocol has a parent"))
            .expect("docs/protocol can be created");
        std::fs::write(&path, generated).expect("the generated file can be written");
        return;
    }
    let checked_in = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        checked_in == generated,
        "{} differs from what herd-protocol generates; run \
         `HERD_PROTOCOL_WRITE=1 cargo test -p herd-protocol --test schema` and commit it",
        path.display()
    );
}

#[test]
fn schema_json_matches_the_code() {
    check("schema.json", &herd_protocol::schema::document_text());
}

#[test]
fn methods_md_matches_the_code() {
    check("methods.md", &herd_protocol::schema::method_table());
}

#[test]
fn every_method_has_params_and_a_result_in_the_schema() {
    let doc = herd_protocol::schema::document();
    let defs = doc["$defs"].as_object().expect("the document has $defs");
    for (name, method) in doc["methods"].as_object().expect("methods is an object") {
        for part in ["params", "result"] {
            let schema = &method[part];
            if let Some(r) = schema["$ref"].as_str() {
                let def = r.rsplit('/').next().expect("a $ref names a def");
                assert!(
                    defs.contains_key(def),
                    "{name}'s {part} names a missing def {def}"
                );
            } else {
                assert!(
                    schema.is_object() || schema.is_boolean(),
                    "{name}'s {part} is a schema"
                );
            }
        }
    }
}
