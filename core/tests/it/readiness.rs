//! Readiness (B45): the mark is set once, committed to the store before it is
//! seen, shown in poll, list and wait answers and kept by the receipt.

use herd_core::{Readiness, SessionId};
use herd_persistence::CheckpointStore;

use crate::support::Fixture;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b45_a_session_is_marked_ready_once_durably_and_its_receipt_keeps_it() {
    let fx = Fixture::new();
    let info = fx.run("sleep 30").await;
    let id: SessionId = info.session_id.clone();
    assert_eq!(fx.registry.readiness(id.as_str()), Some(Readiness::NotYet));
    assert!(
        fx.registry
            .poll(id.as_str())
            .expect("poll")
            .ready_at
            .is_none()
    );
    let mut changes = fx.registry.changes();
    changes.borrow_and_update();

    let at = fx.registry.mark_ready(&id).await.expect("first mark");
    assert!(
        changes.has_changed().expect("registry alive"),
        "the mark woke the changes receivers"
    );
    assert_eq!(
        fx.registry.mark_ready(&id).await,
        None,
        "a second mark changes nothing"
    );
    assert_eq!(
        fx.registry.readiness(id.as_str()),
        Some(Readiness::Ready(at))
    );
    let shown = herd_core::rfc3339(at);
    assert_eq!(
        fx.registry
            .poll(id.as_str())
            .expect("poll")
            .ready_at
            .as_deref(),
        Some(shown.as_str())
    );
    let row = fx
        .registry
        .list(&herd_core::ListFilter::default())
        .into_iter()
        .find(|r| r.session_id == id)
        .expect("listed");
    assert_eq!(row.ready_at.as_deref(), Some(shown.as_str()));
    // Committed before it was seen: the store's row has it.
    let stored = CheckpointStore::new(&fx.home()).load().expect("load");
    let entry = stored
        .entries
        .iter()
        .find(|e| e.session.id == id.as_str())
        .expect("row stored");
    assert!(entry.ready_at.is_some(), "the store's row carries the mark");

    fx.registry
        .kill(id.as_str(), herd_core::KillSource::ProcessKill)
        .await
        .expect("kill");
    let done = fx.done(&id).await;
    assert_eq!(done.ready_at.as_deref(), Some(shown.as_str()));
    assert_eq!(
        fx.registry.mark_ready(&id).await,
        None,
        "a finished session is not marked"
    );
    fx.registry.sync_durable().await.expect("synced");
    assert_eq!(
        fx.registry.readiness(id.as_str()),
        Some(Readiness::Ready(at))
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b45_a_session_that_ends_unready_reads_ended() {
    let fx = Fixture::new();
    let info = fx.run("true").await;
    fx.done(&info.session_id).await;
    assert_eq!(
        fx.registry.readiness(info.session_id.as_str()),
        Some(Readiness::Ended)
    );
    assert_eq!(fx.registry.readiness("proc_ffffffffffff"), None);
}
