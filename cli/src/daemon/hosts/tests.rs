//! Unit tests of the host link: qualified ids in answers and the keys that make far events publish once.

use std::collections::BTreeMap;

use serde_json::json;

use super::Job;
use super::events::event_key;
use super::jobs::{has_unnamed_legacy, qualify_in};

fn jobs() -> BTreeMap<String, Job> {
    let mut jobs = BTreeMap::new();
    jobs.insert(
        "proc_0123456789ab".to_owned(),
        Job {
            owner: "agent-7".into(),
            task_id: "task-7".into(),
            events: true,
            finished: false,
            row: None,
            name: None,
            started: 0,
        },
    );
    jobs
}

#[test]
fn qualify_rewrites_far_ids_and_known_owners_everywhere() {
    let mut value = json!({
        "processes": [
            {"session_id": "proc_0123456789ab", "owner_task_id": "herd-home-x", "task_id": "agent-7", "status": "running"},
            {"session_id": "proc_ffffffffffff", "owner_task_id": "herd-home-x", "status": "exited"},
            {"session_id": "other:proc_ffffffffffff"}
        ],
        "replaces": "proc_aaaaaaaaaaaa"
    });
    qualify_in("build1", &jobs(), &mut value);
    assert_eq!(
        value["processes"][0]["session_id"],
        "build1:proc_0123456789ab"
    );
    assert_eq!(value["processes"][0]["owner_task_id"], "agent-7");
    assert_eq!(value["processes"][0]["task_id"], "task-7");
    assert_eq!(value["processes"][0]["host"], "build1");
    assert_eq!(
        value["processes"][1]["session_id"],
        "build1:proc_ffffffffffff"
    );
    assert_eq!(value["processes"][1]["owner_task_id"], "herd-home-x");
    assert_eq!(
        value["processes"][2]["session_id"],
        "other:proc_ffffffffffff"
    );
    assert_eq!(value["replaces"], "build1:proc_aaaaaaaaaaaa");
}

#[test]
fn event_keys_tell_beats_apart_and_leave_completions_to_the_ledger() {
    let beat = |seq| json!({"type": "heartbeat", "session_id": "proc_0123456789ab", "seq": seq});
    let a = event_key("proc_0123456789ab", "heartbeat", &beat(1));
    let b = event_key("proc_0123456789ab", "heartbeat", &beat(2));
    assert!(a.is_some() && a != b);
    assert_eq!(a, event_key("proc_0123456789ab", "heartbeat", &beat(1)));
    assert_eq!(
        event_key("proc_0123456789ab", "completion", &json!({})),
        None
    );
    // After a far daemon restart a reattached job counts its beats from 1 again:
    // the same number at another age is a new beat, not a replay.
    let restarted =
        json!({"type": "heartbeat", "session_id": "proc_0123456789ab", "seq": 1, "elapsed": 40});
    assert_ne!(a, event_key("proc_0123456789ab", "heartbeat", &restarted));
    let watch =
        |at: &str| json!({"type": "watch_match", "pattern": "x", "output": "x1", "matched_at": at});
    assert_eq!(
        event_key(
            "proc_0123456789ab",
            "watch_match",
            &watch("2026-12-02T07:00:00Z")
        ),
        event_key(
            "proc_0123456789ab",
            "watch_match",
            &watch("2026-12-02T07:00:00Z")
        )
    );
    // The same line matched again later is a second wake.
    assert_ne!(
        event_key(
            "proc_0123456789ab",
            "watch_match",
            &watch("2026-12-02T07:00:00Z")
        ),
        event_key(
            "proc_0123456789ab",
            "watch_match",
            &watch("2026-12-02T07:00:20Z")
        )
    );
}

#[test]
fn a_map_saved_before_names_were_kept_sends_unknown_names_far() {
    // A job of an earlier release's map has neither `name` nor `started`: a
    // `host:NAME` not found here may be its name, so it goes to the far side.
    let old: super::Book = serde_json::from_str(
        r#"{"jobs": {"proc_0123456789ab": {"owner": "a", "task_id": "t", "events": true, "finished": false}}}"#,
    )
    .unwrap();
    assert!(has_unnamed_legacy(&old.jobs));
    let mut named = old.jobs.clone();
    for job in named.values_mut() {
        job.name = Some("web".into());
        job.started = 1;
    }
    assert!(!has_unnamed_legacy(&named));
    let mut unnamed_new = old.jobs;
    for job in unnamed_new.values_mut() {
        job.started = 1;
    }
    assert!(!has_unnamed_legacy(&unnamed_new));
}
