//! The daemon's own answers and error data keep protocol 1's bytes: each type
//! writes the fields the hand-built answers wrote, `null` where they wrote `null`
//! and nothing where they wrote nothing, and reads both back.

use herd_protocol::daemon::{
    HostState, LinkStatus, PluginCounts, PluginRow, PluginsAnswer, RestoreCounts, RestoreSummary,
};
use herd_protocol::errors::GuardVerdict;
use serde_json::{Value, json};

fn written<T: serde::Serialize>(value: &T) -> Value {
    serde_json::to_value(value).expect("the answer serialises")
}

#[test]
fn b39_a_failed_restore_and_the_counts_read_apart() {
    let failed: RestoreSummary =
        serde_json::from_value(json!({"error": "cannot read"})).expect("reads");
    assert_eq!(
        failed,
        RestoreSummary::Failed {
            error: "cannot read".into()
        }
    );
    let counts = RestoreSummary::Counts(RestoreCounts {
        adopted: 2,
        ..RestoreCounts::default()
    });
    let value = written(&counts);
    assert_eq!(value["adopted"], 2);
    assert!(value["checkpoint_error"].is_null() && value.get("error").is_none());
    assert_eq!(
        serde_json::from_value::<RestoreSummary>(value).expect("reads"),
        counts
    );
}

#[test]
fn b39_plugin_rows_carry_counts_only_from_a_daemon_that_chained_the_plugin() {
    let files = PluginRow {
        name: "p".into(),
        status: "failed".into(),
        reason: Some("no library".into()),
        ..PluginRow::default()
    };
    let value = written(&files);
    for key in ["name", "version", "description", "path", "status", "reason"] {
        assert!(value.get(key).is_some(), "{key} is written: {value}");
    }
    for key in ["calls", "routes", "loaded_at", "last_failure"] {
        assert!(value.get(key).is_none(), "{key} is left out: {value}");
    }
    let chained = PluginRow {
        counts: Some(PluginCounts {
            calls: 3,
            ..PluginCounts::default()
        }),
        ..files
    };
    let value = written(&chained);
    assert_eq!(value["calls"], 3);
    assert!(value["last_failure"].is_null() && value["routes"].is_object());
    let read: PluginRow = serde_json::from_value(value).expect("reads");
    assert_eq!(read, chained);
    // No plugins started: the answer protocol 1 wrote.
    assert_eq!(
        written(&PluginsAnswer::default()),
        json!({"started_at": null, "enabled": [], "plugins": []})
    );
}

#[test]
fn b39_a_host_never_linked_is_its_name_and_idle() {
    let idle = HostState {
        name: "build1".into(),
        status: LinkStatus::Idle,
        since: None,
        message: None,
        jobs_live: None,
        jobs_known: None,
        answered: None,
        late: false,
    };
    assert_eq!(written(&idle), json!({"name": "build1", "status": "idle"}));
    let later: HostState =
        serde_json::from_value(json!({"name": "b", "status": "sleeping"})).expect("reads");
    assert_eq!(later.status, LinkStatus::Other);
}

#[test]
fn b39_an_allow_verdict_writes_its_nulls_and_no_target() {
    let allow = GuardVerdict {
        verdict: "allow".into(),
        rule: None,
        target: None,
        reason: None,
        remedy: None,
    };
    assert_eq!(
        written(&allow),
        json!({"verdict": "allow", "rule": null, "reason": null, "remedy": null})
    );
}

#[test]
fn a_status_names_itself_as_the_wire_does() {
    use herd_protocol::answers::{CompletionReason, KillStatus, SessionStatus, WaitStatus};
    fn check<T: serde::Serialize + Copy>(values: &[T], name: fn(T) -> &'static str) {
        for value in values {
            assert_eq!(written(value), Value::from(name(*value)));
        }
    }
    use SessionStatus as S;
    check(
        &[S::Queued, S::Running, S::Exited, S::Ended, S::Other],
        S::as_str,
    );
    use WaitStatus as W;
    check(
        &[W::Exited, W::Timeout, W::Interrupted, W::Ready, W::Other],
        W::as_str,
    );
    use KillStatus as K;
    check(
        &[K::Killed, K::AlreadyExited, K::KillIncomplete, K::Other],
        K::as_str,
    );
    use CompletionReason as C;
    check(
        &[
            C::Exited,
            C::Killed,
            C::Signaled,
            C::Lost,
            C::FailedStart,
            C::Other,
        ],
        C::as_str,
    );
}
