//! `--after-ready` through the registry (B44): a job queued after another's
//! readiness starts once that session's durable ready mark is set, and never runs
//! when the dependency ends without becoming ready.

use std::time::Duration;

use herd_core::{QueueRequest, SessionStatus, SpawnRequest};

use crate::support::{Fixture, wait_until};

fn request(command: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_owned(),
        task_id: "t".to_owned(),
        ..SpawnRequest::default()
    }
}

fn after_ready(id: &str) -> QueueRequest {
    QueueRequest {
        after_ready: vec![id.to_owned()],
        ..QueueRequest::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b44_after_ready_starts_on_the_ready_mark_and_never_when_the_dependency_ends_unready() {
    let fx = Fixture::new();
    let db = fx.run("sleep 30").await;
    let api = fx
        .registry
        .spawn_queued(request("echo api-up"), after_ready(db.session_id.as_str()))
        .await
        .unwrap_or_else(|e| panic!("queued: {e}"));
    assert!(api.queued);
    let api_id = api.session_id.as_str().to_owned();
    let status = |id: &str| fx.registry.poll(id).map(|p| p.status).ok();
    assert_eq!(status(&api_id), Some(SessionStatus::Queued));
    fx.registry
        .mark_ready(&db.session_id)
        .await
        .unwrap_or_else(|| panic!("the mark is set"));
    wait_until(Duration::from_secs(10), "the dependant to run", || {
        status(&api_id) == Some(SessionStatus::Exited)
    })
    .await;
    let done = fx.done(&api.session_id).await;
    assert_eq!(done.exit_code, Some(0), "{done:?}");

    // A dependency that ends without being ready: the dependant never runs.
    let short = fx.run("sleep 0.2").await;
    let never = fx
        .registry
        .spawn_queued(
            request("echo never"),
            after_ready(short.session_id.as_str()),
        )
        .await
        .unwrap_or_else(|e| panic!("queued: {e}"));
    let done = fx.done(&never.session_id).await;
    assert_eq!(
        done.completion_reason,
        Some(herd_core::CompletionReason::FailedStart),
        "{done:?}"
    );
    assert!(
        done.output.to_string().contains("before it was ready"),
        "{done:?}"
    );
    fx.registry
        .kill(db.session_id.as_str(), herd_core::KillSource::ProcessKill)
        .await
        .unwrap_or_else(|e| panic!("kill: {e}"));
}
