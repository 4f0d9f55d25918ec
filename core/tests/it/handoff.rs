//! Handoff between agents and child teardown accounting (B25, B26).

use std::time::Duration;

use herd_core::{
    AgentIdentity, Event, HandoffError, KillSource, KillStatus, ListFilter, SessionId, SpawnRequest,
};

use crate::support::{Fixture, wait_until};

const PARENT: &str = "main";
const CHILD: &str = "sa-1";

fn parent() -> AgentIdentity {
    AgentIdentity {
        owner_task_id: PARENT.to_owned(),
        task_id: "container-main".to_owned(),
        session_key: Some("key-main".to_owned()),
    }
}

fn family() -> Fixture {
    let fx = Fixture::new();
    fx.registry.register_child(CHILD, parent());
    fx
}

async fn child_runs(fx: &Fixture, command: &str, notify: bool) -> herd_core::SpawnInfo {
    fx.spawn(SpawnRequest {
        command: command.to_owned(),
        task_id: "container-child".to_owned(),
        owner_task_id: Some(CHILD.to_owned()),
        notify,
        ..SpawnRequest::default()
    })
    .await
}

/// Drains `owner` until a completion arrives, at most 10 s.
async fn completion_for(fx: &Fixture, owner: &str) -> Event {
    let mut found = None;
    wait_until(Duration::from_secs(10), "a queued completion", || {
        found = fx
            .registry
            .drain(owner)
            .into_iter()
            .find(|e| matches!(e, Event::Completion { .. }));
        found.is_some()
    })
    .await;
    found.expect("found above")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b26_a_childs_notify_spawn_answers_false_with_the_note() {
    let fx = family();
    let info = child_runs(&fx, "true", true).await;
    assert!(!info.notify_on_complete);
    let note = info.note.unwrap_or_default();
    assert!(
        note.contains("child agent") && note.contains("hand it off"),
        "{note}"
    );
    fx.done(&info.session_id).await;
    assert!(fx.registry.drain(CHILD).is_empty());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b25_handoff_flips_ownership_and_the_completion_carries_the_note() {
    let fx = family();
    let info = child_runs(&fx, "read -r _; echo built", false).await;
    let id = info.session_id.as_str();
    let answer = fx
        .registry
        .handoff(id, CHILD, PARENT, "the release build; ship it if it passes")
        .expect("handed off");
    assert_eq!(answer.status, "handed_off");
    assert!(answer.note.contains("Your parent now owns this process"));
    let rows = fx.registry.list(&ListFilter {
        owner: Some(PARENT.to_owned()),
        ..ListFilter::default()
    });
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].task_id, "container-main");
    assert_eq!(rows[0].session_key.as_deref(), Some("key-main"));
    assert!(rows[0].notify_on_complete);
    fx.registry.submit(id, "go").await.expect("submit");
    let Event::Completion {
        owner_task_id,
        task_id,
        handoff_note,
        output,
        ..
    } = completion_for(&fx, PARENT).await
    else {
        unreachable!()
    };
    assert_eq!(owner_task_id, PARENT);
    assert_eq!(task_id, "container-main");
    assert_eq!(
        handoff_note.as_deref(),
        Some("the release build; ship it if it passes")
    );
    assert_eq!(output, "built\n");
    assert!(
        fx.registry.drain(CHILD).is_empty(),
        "the child gets nothing"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b25_handoff_cap_and_every_refusal() {
    let fx = family();
    let mut ids: Vec<SessionId> = Vec::new();
    for _ in 0..4 {
        ids.push(child_runs(&fx, "sleep 30", false).await.session_id);
    }
    let exited = child_runs(&fx, "true", false).await.session_id;
    fx.done(&exited).await;
    let foreign = fx
        .spawn(SpawnRequest {
            command: "sleep 30".to_owned(),
            task_id: "other".to_owned(),
            ..SpawnRequest::default()
        })
        .await
        .session_id;
    let handoff = |id: &SessionId, from: &str, to: &str, purpose: &str| {
        fx.registry.handoff(id.as_str(), from, to, purpose)
    };
    assert!(matches!(
        handoff(&ids[0], PARENT, "root", "why"),
        Err(HandoffError::NotAChild { .. })
    ));
    assert!(matches!(
        handoff(&ids[0], CHILD, "someone-else", "why"),
        Err(HandoffError::NotTheParent { .. })
    ));
    assert!(matches!(
        handoff(&ids[0], CHILD, PARENT, "  "),
        Err(HandoffError::MissingPurpose)
    ));
    let refused = handoff(&exited, CHILD, PARENT, "why");
    assert!(
        matches!(&refused, Err(HandoffError::NotRunningOwned { .. })),
        "{refused:?}"
    );
    let message = refused.expect_err("refused above").to_string();
    assert!(message.contains("already exited?"), "{message}");
    assert!(matches!(
        handoff(&foreign, CHILD, PARENT, "why"),
        Err(HandoffError::NotRunningOwned { .. })
    ));
    for id in &ids[..3] {
        handoff(id, CHILD, PARENT, "keep it").expect("within the cap");
    }
    let capped = handoff(&ids[3], CHILD, PARENT, "one too many");
    assert!(
        matches!(&capped, Err(HandoffError::CapReached { .. })),
        "{capped:?}"
    );
    assert_eq!(
        fx.registry.snapshot_running_ids(CHILD),
        vec![ids[3].clone()],
        "a refused handoff changes nothing"
    );
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b26_finish_child_lists_handoffs_orphans_and_unread_results() {
    let fx = family();
    let handed = child_runs(&fx, "sleep 30", false).await.session_id;
    let orphan = child_runs(&fx, "sleep 30", false).await.session_id;
    let unread = child_runs(&fx, "echo result; exit 5", false)
        .await
        .session_id;
    let read = child_runs(&fx, "echo seen", false).await.session_id;
    fx.done(&read).await; // a wait reads the result
    let mut stream = fx.registry.subscribe();
    wait_until(
        Duration::from_secs(10),
        "the unread session to finish",
        || !fx.registry.snapshot_running_ids(CHILD).contains(&unread),
    )
    .await;
    fx.registry
        .handoff(handed.as_str(), CHILD, PARENT, "watch the server")
        .expect("handed off");
    let teardown = fx.registry.finish_child(CHILD).await;
    assert_eq!(teardown.child, CHILD);
    assert_eq!(teardown.handed_off.len(), 1);
    assert_eq!(teardown.handed_off[0].session_id, handed);
    assert_eq!(teardown.handed_off[0].purpose, "watch the server");
    assert_eq!(teardown.orphaned.len(), 1);
    assert_eq!(teardown.orphaned[0].session_id, orphan);
    assert_eq!(teardown.orphaned[0].status, KillStatus::Killed);
    assert_eq!(teardown.unread_completions.len(), 1, "{teardown:#?}");
    let u = &teardown.unread_completions[0];
    assert_eq!(u.session_id, unread);
    assert_eq!(u.exit_code, Some(5));
    assert_eq!(u.output, "result\n");
    // The orphan died as agent_close; the handed-off session still runs, the parent's.
    let mut killed_by = None;
    while let Ok(event) = stream.try_recv() {
        if let Event::Completion {
            session_id,
            termination_source,
            ..
        } = event
            && session_id == orphan
        {
            killed_by = termination_source;
        }
    }
    assert_eq!(killed_by, Some(KillSource::AgentClose));
    assert_eq!(
        fx.registry.snapshot_running_ids(PARENT),
        vec![handed.clone()]
    );
    // The child is gone: it can no longer hand off.
    assert!(matches!(
        fx.registry.handoff(handed.as_str(), CHILD, PARENT, "again"),
        Err(HandoffError::NotAChild { .. })
    ));
    fx.registry.shutdown().await;
    fx.assert_groups_gone().await;
}

// Regression (found in review): the daemon's handoff once registered the sender as a
// subagent, which silenced every later notify spawn of that owner (the CLI's `cli`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b25_a_handoff_source_keeps_its_own_wake_ups() {
    let fx = Fixture::new();
    let run = |owner: &str, command: &str| SpawnRequest {
        command: command.to_owned(),
        task_id: owner.to_owned(),
        owner_task_id: Some(owner.to_owned()),
        notify: true,
        ..SpawnRequest::default()
    };
    let job = fx.spawn(run("cli", "read line")).await;
    fx.registry.register_handoff_source("cli", parent());
    fx.registry
        .handoff(
            job.session_id.as_str(),
            "cli",
            PARENT,
            "the parent watches it",
        )
        .expect("a handoff source may hand over its running job");
    let later = fx.spawn(run("cli", "true")).await;
    assert!(later.notify_on_complete, "{later:?}");
    let done = completion_for(&fx, "cli").await;
    assert_eq!(done.session_id(), Some(&later.session_id));
    fx.registry
        .kill(job.session_id.as_str(), KillSource::ProcessKill)
        .await
        .expect("kill the handed-off job");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b26_a_finished_childs_dropped_queue_is_not_replayed_after_a_restart() {
    let fx = Fixture::new();
    // A completion queued for an owner that then becomes a child agent and ends.
    let info = fx
        .spawn(SpawnRequest {
            command: "echo queued".to_owned(),
            task_id: "t".to_owned(),
            owner_task_id: Some("sa-2".to_owned()),
            notify: true,
            ..SpawnRequest::default()
        })
        .await;
    fx.done(&info.session_id).await;
    fx.registry.register_child("sa-2", parent());
    fx.registry.finish_child("sa-2").await;
    let ledger = herd_persistence::Ledger::open(&fx.home())
        .expect("the ledger opens")
        .expect("the ledger exists");
    assert!(ledger.undelivered().expect("readable").is_empty());
    let restarted = herd_core::Registry::new(fx.home(), herd_core::RegistryConfig::default())
        .expect("in a runtime");
    assert!(
        restarted.drain("sa-2").is_empty(),
        "the dropped completion came back"
    );
    fx.assert_groups_gone().await;
}
