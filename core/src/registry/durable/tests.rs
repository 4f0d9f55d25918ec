//! Unit tests of the durable side: the ledger's event round trip and the wire names
//! receipts store.

use std::path::PathBuf;

use super::*;
use crate::KillSource;
use crate::event::Event;
use crate::registry::hooks_room::Hooks;
use herd_hooks::Shown;

#[test]
fn a_completion_survives_the_ledger_json_round_trip() {
    let event = Event::Completion {
        session_id: SessionId::parse("proc_0123456789ab").expect("a valid id"),
        task_id: "t".to_owned(),
        owner_task_id: "o".to_owned(),
        session_key: Some("k".to_owned()),
        command: Shown::herd_text("echo hi"),
        exit_code: Some(3),
        signal: None,
        completion_reason: CompletionReason::Killed,
        termination_source: Some(KillSource::TurnTimeout),
        output: Shown::herd_text("hi\n"),
        output_cut: true,
        log_path: PathBuf::from("/x/proc_0123456789ab.log"),
        started_at: "2026-01-01T00:00:00Z".to_owned(),
        finished_at: "2026-01-01T00:00:01Z".to_owned(),
        handoff_note: Some("why".to_owned()),
        descendants_alive: vec![7],
        leftovers: Vec::new(),
        bytes_not_kept: 12,
        runs: None,
    };
    let value = serde_json::to_value(&event).expect("events serialize");
    let back =
        event_from_ledger(&value, &Hooks::redaction_only()).expect("a completion reads back");
    assert_eq!(
        serde_json::to_value(&back).expect("events serialize"),
        value
    );
}

#[test]
fn stored_text_is_redacted_again_when_read_back_and_masked_text_reads_back_unchanged() {
    // A ledger row written by a herd with fewer rules (or edited): the secret in its
    // command and output must not leave as shown text.
    let secret = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    let value = serde_json::json!({
        "type": "completion",
        "session_id": "proc_0123456789ab",
        "task_id": "t",
        "owner_task_id": "o",
        "session_key": null,
        "command": format!("curl -H 'Authorization: token {secret}' x"),
        "exit_code": 0,
        "signal": null,
        "completion_reason": "exited",
        "termination_source": null,
        "output": format!("token is {secret}\n"),
        "output_cut": false,
        "log_path": "/x/proc_0123456789ab.log",
        "started_at": "2026-01-01T00:00:00Z",
        "finished_at": "2026-01-01T00:00:01Z",
        "handoff_note": null,
    });
    let hooks = Hooks::redaction_only();
    let back = event_from_ledger(&value, &hooks).expect("a completion reads back");
    let shown = serde_json::to_value(&back).expect("events serialize");
    for field in ["command", "output"] {
        let text = shown[field].as_str().expect("a string");
        assert!(!text.contains(secret), "{field}: {text}");
        assert!(text.contains("ghp_ab...6789"), "{field}: {text}");
    }
    // What this herd stored (already masked) reads back byte for byte.
    let again = event_from_ledger(&shown, &hooks).expect("a completion reads back");
    assert_eq!(
        serde_json::to_value(&again).expect("events serialize"),
        shown
    );
}

#[test]
fn a_non_completion_is_not_replayed() {
    let value = serde_json::json!({"type": "watch_overflow_tripped", "message": "m"});
    assert!(event_from_ledger(&value, &Hooks::redaction_only()).is_none());
}

#[test]
fn reasons_and_sources_keep_their_wire_names() {
    for reason in [
        CompletionReason::Exited,
        CompletionReason::Killed,
        CompletionReason::Signaled,
        CompletionReason::Lost,
        CompletionReason::FailedStart,
    ] {
        let wire = serde_json::to_value(reason).expect("reasons serialize");
        assert_eq!(wire.as_str(), Some(reason_name(reason)));
        assert_eq!(reason_from_name(reason_name(reason)), reason);
    }
    for source in [
        KillSource::ProcessKill,
        KillSource::OperatorStop,
        KillSource::KillAll,
        KillSource::TurnTimeout,
        KillSource::AgentClose,
        KillSource::HostShutdown,
    ] {
        assert_eq!(KillSource::from_name(source.as_str()), Some(source));
    }
    assert_eq!(KillSource::from_name(""), None);
}

#[test]
fn only_well_formed_ids_parse_back() {
    assert!(SessionId::parse("proc_0123456789ab").is_some());
    for bad in [
        "proc_0123456789AB",
        "proc_0123",
        "0123456789ab",
        "proc_0123456789abc",
        "proc_../../etc/x",
    ] {
        assert!(SessionId::parse(bad).is_none(), "{bad} parsed");
    }
}

#[test]
fn unix_seconds_round_trip_and_bad_values_read_as_the_epoch() {
    let t = UNIX_EPOCH + Duration::from_millis(1_790_000_000_250);
    assert_eq!(from_unix_seconds(unix_seconds(t)), t);
    assert_eq!(from_unix_seconds(f64::NAN), UNIX_EPOCH);
    assert_eq!(from_unix_seconds(-1.0), UNIX_EPOCH);
}

#[test]
fn b27_a_finish_whose_receipt_took_its_row_leaves_the_refresh_nothing_to_delete() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = herd_persistence::Home::new(dir.path().to_owned());
    let store: std::sync::Arc<dyn RunningStore> =
        std::sync::Arc::new(herd_persistence::MemoryRunningStore::new());
    let checkpoints = checkpoint::Checkpoints::new(&home, Some(store));
    let stored = SessionId::parse("proc_0123456789ab").expect("a valid id");
    let failed = SessionId::parse("proc_ba9876543210").expect("a valid id");
    checkpoints.finished(&stored);
    checkpoints.finished(&failed);
    assert!(checkpoints.has_work(), "two finished rows to delete");
    // The first one's receipt was stored (its row went in that transaction); the
    // other's was not, so its row is still the refresh's to delete.
    checkpoints.rows_gone([stored.as_str()]);
    assert!(checkpoints.has_work(), "the unstored one's row is left");
    checkpoints.rows_gone([failed.as_str()]);
    assert!(
        !checkpoints.has_work(),
        "nothing left: the deferred write is skipped"
    );
}
