//! `herd events`' reading of the daemon's events: a later daemon's type is an
//! event like any other; a known type that does not read fails by its field.

use serde_json::json;

use super::*;

fn heartbeat() -> Value {
    json!({
        "type": "heartbeat", "event_id": "evt_1", "session_id": "proc_1", "task_id": "t",
        "owner_task_id": "o", "session_key": null, "command": "sleep 9", "seq": 2,
        "interval": 5, "elapsed": 10, "output": "tick", "started_at": "2026-01-01T00:00:00Z",
    })
}

#[test]
fn an_event_type_of_a_later_daemon_reads_and_is_acknowledged_by_its_id() {
    let later = json!({"type": "moved", "event_id": "evt_9", "message": "elsewhere"});
    let event = Received::read(Drain::NAME, later.clone()).expect("a later event reads");
    assert!(event.known.is_none());
    assert_eq!(event.raw, later, "printed with --json as it came");
    let events = [
        Received::read(Drain::NAME, heartbeat()).expect("a heartbeat reads"),
        event,
    ];
    assert!(matches!(
        events[0].known,
        Some(Event::Heartbeat { seq: 2, .. })
    ));
    assert_eq!(
        event_ids(&events).expect("both have ids"),
        ["evt_1", "evt_9"]
    );
}

#[test]
fn a_known_event_with_a_mistyped_field_fails_naming_the_method_and_the_field() {
    // A fake event: a real daemon cannot send it, as it writes `seq` as a number.
    let mut beat = heartbeat();
    beat["seq"] = json!("two");
    let err = Received::read(Drain::NAME, beat)
        .err()
        .expect("a mistyped heartbeat does not read");
    let text = format!("{err:#}");
    assert!(text.contains("`drain`"), "{text}");
    assert!(text.contains("a `heartbeat` event's field `seq`"), "{text}");
}

#[test]
fn an_event_without_its_id_cannot_be_acknowledged() {
    let mut beat = heartbeat();
    beat.as_object_mut().expect("an object").remove("event_id");
    let events = [Received::read(Drain::NAME, beat).expect("reads: printing needs no id")];
    let err = event_ids(&events).expect_err("no id to acknowledge");
    assert!(err.to_string().contains("without its event_id"), "{err}");
}
