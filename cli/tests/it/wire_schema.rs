//! The daemon's answers are herd-protocol's: every answer and event of a real
//! daemon, over its socket, reads as the protocol's typed answer, and names no field
//! the generated schema (`docs/protocol/schema.json`) lacks. A field the registry
//! adds without adding it to the protocol fails here.

use herd_protocol::Method;
use herd_protocol::methods::{Drain, Kill, List, Log, LogChunk, Lookup, Poll, Spawn, Wait};
use serde_json::{Value, json};

use crate::support::{Conn, Env, wait_until};

/// The `$defs` entry a method's result (or a def by name) is.
fn def<'a>(schema: &'a Value, name: &str) -> &'a Value {
    &schema["$defs"][name]
}

fn result_def(schema: &Value, method: &str) -> String {
    schema["methods"][method]["result"]["$ref"]
        .as_str()
        .and_then(|r| r.rsplit('/').next())
        .unwrap_or_else(|| panic!("{method}'s result is a $ref"))
        .to_owned()
}

/// Every key of `value` is a property of def `name` (or of a variant of it).
pub(crate) fn assert_known(schema: &Value, name: &str, value: &Value, what: &str) {
    let def = def(schema, name);
    let mut known: Vec<String> = Vec::new();
    let mut collect = |d: &Value| {
        if let Some(props) = d["properties"].as_object() {
            known.extend(props.keys().cloned());
        }
    };
    collect(def);
    for key in ["oneOf", "anyOf", "allOf"] {
        for variant in def[key].as_array().into_iter().flatten() {
            collect(variant);
            for inner in variant["allOf"].as_array().into_iter().flatten() {
                collect(inner);
                if let Some(r) = inner["$ref"].as_str() {
                    collect(&schema["$defs"][r.rsplit('/').next().unwrap_or_default()]);
                }
            }
        }
    }
    for inner in def["allOf"].as_array().into_iter().flatten() {
        if let Some(r) = inner["$ref"].as_str() {
            collect(&schema["$defs"][r.rsplit('/').next().unwrap_or_default()]);
        }
    }
    let object = value
        .as_object()
        .unwrap_or_else(|| panic!("{what} is an object: {value}"));
    for key in object.keys() {
        assert!(
            known.iter().any(|k| k == key),
            "{what} carries `{key}`, which herd-protocol's {name} does not name: add it to \
             protocol/src and regenerate docs/protocol ({value})"
        );
    }
}

/// `answer` reads as `M`'s answer and names nothing the schema lacks.
pub(crate) fn check<M: Method>(schema: &Value, answer: &Value) {
    serde_json::from_value::<M::Answer>(answer.clone()).unwrap_or_else(|e| {
        panic!(
            "{}'s answer does not read as the protocol's: {e}: {answer}",
            M::NAME
        )
    });
    assert_known(schema, &result_def(schema, M::NAME), answer, M::NAME);
}

#[test]
fn b39_every_answer_reads_as_the_protocol_types_and_names_no_field_the_schema_lacks() {
    let schema = herd_protocol::schema::document();
    let env = Env::new();
    let mut conn = Conn::open(&env, "wire-schema-test");
    let spawned = conn.result(
        "spawn",
        json!({"command": "echo schema-line; exit 3", "owner": "schema", "notify": true, "name": "one"}),
    );
    check::<Spawn>(&schema, &spawned);
    let id = spawned["session_id"]
        .as_str()
        .expect("spawn names its session")
        .to_owned();
    let waited = conn.result("wait", json!({"id": id, "timeout_seconds": 20}));
    check::<Wait>(&schema, &waited);
    assert_eq!(
        waited["exit_code"], 3,
        "the job ran to its exit 3: {waited}"
    );
    check::<Poll>(&schema, &conn.result("poll", json!({"id": id})));
    check::<Lookup>(&schema, &conn.result("lookup", json!({"id": "one"})));
    check::<Log>(&schema, &conn.result("log", json!({"id": id})));
    check::<LogChunk>(&schema, &conn.result("log_chunk", json!({"id": id})));
    let listed = conn.result("list", json!({"owner": "schema", "state": "all"}));
    check::<List>(&schema, &listed);
    for row in listed["processes"].as_array().expect("list has rows") {
        assert_known(&schema, "ListRow", row, "a list row");
    }
    // Its completion, drained once the daemon has queued it.
    let mut events = Vec::new();
    wait_until(std::time::Duration::from_secs(20), || {
        let drained = conn.result("drain", json!({"owner": "schema"}));
        check::<Drain>(&schema, &drained);
        events.extend(drained["events"].as_array().cloned().unwrap_or_default());
        !events.is_empty()
    })
    .expect("the completion is drained within 20 s");
    for event in &events {
        assert_known(&schema, "Event", event, "an event");
    }
    let running = conn.result("spawn", json!({"command": "sleep 30", "owner": "schema"}));
    let running = running["session_id"]
        .as_str()
        .expect("spawn names its session")
        .to_owned();
    let polled = conn.result("poll", json!({"id": running}));
    check::<Poll>(&schema, &polled);
    check::<Kill>(&schema, &conn.result("kill", json!({"id": running})));
}
