//! `publish_external`: a far event lands once, and a far completion survives a
//! restart of this registry like a local one.

use serde_json::json;

use super::External;
use crate::config::RegistryConfig;
use crate::event::Event;
use crate::id::SessionId;
use crate::registry::Registry;
use herd_persistence::Home;

fn completion() -> serde_json::Value {
    json!({
        "type": "completion", "session_id": "proc_0123456789ab", "task_id": "agent-7",
        "owner_task_id": "herd-home-00", "session_key": null, "command": "make",
        "exit_code": 0, "signal": null, "completion_reason": "exited",
        "termination_source": null, "output": "ok\n", "output_cut": false,
        "log_path": "/far/logs/proc_0123456789ab.log", "started_at": "2026-12-02T00:00:00Z",
        "finished_at": "2026-12-02T00:00:01Z", "handoff_note": null
    })
}

#[tokio::test]
async fn a_far_completion_is_queued_once_and_replayed_after_a_restart_under_its_qualified_id() {
    let dir = tempfile::tempdir().expect("temp dir");
    let home = Home::new(dir.path().to_path_buf());
    let id = SessionId::qualified("build1", "proc_0123456789ab").expect("a valid id");
    assert_eq!(id.as_str(), "build1:proc_0123456789ab");
    assert!(SessionId::qualified("Build 1", "proc_0123456789ab").is_none());
    assert!(SessionId::qualified("build1", "proc_xyz").is_none());

    let registry = Registry::new(home.clone(), RegistryConfig::default()).expect("registry");
    assert_eq!(
        registry.publish_external(&id, "agent-7", &completion()),
        External::Queued
    );
    // The far side replays it (the ack was lost): dropped.
    assert_eq!(
        registry.publish_external(&id, "agent-7", &completion()),
        External::Duplicate
    );
    assert_eq!(registry.pending("agent-7"), 1);
    drop(registry);

    // A restart before the owner drained: the ledger replays it, once.
    let registry = Registry::new(home.clone(), RegistryConfig::default()).expect("registry");
    assert_eq!(
        registry.publish_external(&id, "agent-7", &completion()),
        External::Duplicate
    );
    let events = registry.drain("agent-7");
    assert_eq!(events.len(), 1, "{events:?}");
    match &events[0] {
        Event::Completion {
            session_id,
            owner_task_id,
            ..
        } => {
            assert_eq!(session_id.as_str(), "build1:proc_0123456789ab");
            assert_eq!(owner_task_id, "agent-7");
        }
        other => panic!("not a completion: {other:?}"),
    }
    drop(registry);
    let registry = Registry::new(home, RegistryConfig::default()).expect("registry");
    assert!(
        registry.drain("agent-7").is_empty(),
        "delivered is delivered"
    );
}

#[tokio::test]
async fn far_heartbeats_and_watch_matches_are_rebuilt_and_unknown_events_dropped() {
    let dir = tempfile::tempdir().expect("temp dir");
    let registry = Registry::new(
        Home::new(dir.path().to_path_buf()),
        RegistryConfig::default(),
    )
    .expect("registry");
    let id = SessionId::qualified("build1", "proc_0123456789ab").expect("a valid id");
    let beat = json!({
        "type": "heartbeat", "session_id": "proc_0123456789ab", "task_id": "t",
        "owner_task_id": "far", "session_key": null, "command": "make", "seq": 3,
        "interval": 60, "elapsed": 180, "output": "50%", "started_at": "2026-12-02T00:00:00Z"
    });
    let watch = json!({
        "type": "watch_match", "session_id": "proc_0123456789ab", "task_id": "t",
        "owner_task_id": "far", "session_key": null, "command": "make", "pattern": "READY",
        "output": "READY", "suppressed": 0
    });
    assert_eq!(
        registry.publish_external(&id, "me", &beat),
        External::Queued
    );
    assert_eq!(
        registry.publish_external(&id, "me", &watch),
        External::Queued
    );
    assert_eq!(
        registry.publish_external(&id, "me", &json!({"type": "queue_folded"})),
        External::Unknown
    );
    let events = registry.drain("me");
    assert_eq!(events.len(), 2, "{events:?}");
    assert!(
        events
            .iter()
            .all(|e| e.session_id() == Some(&id) && e.owner_task_id() == Some("me"))
    );
}
