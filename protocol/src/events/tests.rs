//! Events as a client reads them: the envelope first, the known types as [`Event`].

use serde_json::{Value, json};

use super::*;

/// The `type` constants of [`Event`]'s schema, one per variant.
fn schema_types() -> Vec<String> {
    let schema = serde_json::to_value(schemars::schema_for!(Event)).expect("the schema is JSON");
    let variants = schema["oneOf"].as_array().expect("the schema is a oneOf");
    variants
        .iter()
        .map(|variant| {
            let kind = &variant["properties"]["type"];
            kind["const"]
                .as_str()
                .or_else(|| kind["enum"][0].as_str())
                .unwrap_or_else(|| panic!("a variant without its type: {variant}"))
                .to_owned()
        })
        .collect()
}

#[test]
fn the_types_listed_are_the_events_variants() {
    let mut listed: Vec<String> = Event::TYPES.iter().map(|t| (*t).to_owned()).collect();
    let mut in_schema = schema_types();
    listed.sort();
    in_schema.sort();
    assert_eq!(listed, in_schema);
}

fn heartbeat() -> Value {
    json!({
        "type": "heartbeat", "event_id": "evt_1", "session_id": "proc_1", "task_id": "t",
        "owner_task_id": "o", "session_key": null, "command": "sleep 9", "seq": 2,
        "interval": 5, "elapsed": 10, "output": "tick", "started_at": "2026-01-01T00:00:00Z",
    })
}

#[test]
fn a_known_event_reads_as_its_envelope_and_as_the_event() {
    let envelope = EventEnvelope::deserialize(&heartbeat()).expect("an envelope");
    assert_eq!(envelope.kind, "heartbeat");
    assert_eq!(envelope.event_id.as_deref(), Some("evt_1"));
    assert_eq!(envelope.session_id.as_deref(), Some("proc_1"));
    assert_eq!(envelope.command.as_deref(), Some("sleep 9"));
    assert_eq!(envelope.output.as_deref(), Some("tick"));
    assert!(Event::knows(&envelope.kind));
    let event = Event::deserialize(&heartbeat()).expect("a heartbeat");
    assert!(matches!(
        event,
        Event::Heartbeat {
            seq: 2,
            elapsed: 10,
            ..
        }
    ));
    assert_eq!(event.event_id(), "evt_1");
}

#[test]
fn a_later_daemons_event_type_reads_as_an_envelope_only() {
    let later = json!({
        "type": "moved", "event_id": "evt_9", "session_id": "proc_1",
        "message": "moved to another host", "output": {"lines": 3}, "command": 7,
    });
    assert!(Event::deserialize(&later).is_err());
    let envelope = EventEnvelope::deserialize(&later).expect("an envelope");
    assert!(!Event::knows(&envelope.kind));
    assert_eq!(envelope.event_id.as_deref(), Some("evt_9"));
    assert_eq!(envelope.message.as_deref(), Some("moved to another host"));
    // Texts of another type read as none: the event is still readable.
    assert_eq!(envelope.output, None);
    assert_eq!(envelope.command, None);
}

#[test]
fn an_event_without_its_type_is_no_envelope() {
    let err = EventEnvelope::deserialize(&json!({"event_id": "evt_1"})).expect_err("no type");
    assert!(err.to_string().contains("missing field `type`"), "{err}");
}
