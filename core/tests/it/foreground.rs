//! Foreground runs (B24) and the interruptible wait's notify tracking (B23).

use std::time::{Duration, Instant};

use herd_core::{
    CompletionReason, Event, ForegroundStatus, KillSource, SpawnError, SpawnRequest, WaitStatus,
};
use tokio_util::sync::CancellationToken;

use crate::support::{Fixture, wait_until};

fn req(command: &str) -> SpawnRequest {
    SpawnRequest {
        command: command.to_owned(),
        task_id: "t".to_owned(),
        ..SpawnRequest::default()
    }
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
async fn b24_a_quick_command_answers_its_output() {
    let fx = Fixture::new();
    let answer = fx
        .registry
        .run_foreground(req("echo hi; exit 2"), Duration::from_secs(10), None, None)
        .await
        .expect("runs");
    assert_eq!(answer.status, ForegroundStatus::Exited);
    assert_eq!(answer.output, "hi\n");
    assert_eq!(answer.exit_code, Some(2));
    assert!(!answer.process_running);
    assert_eq!(answer.note, None);
    assert!(
        fx.registry.drain("t").is_empty(),
        "a foreground run wakes nobody"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b24_past_yield_after_the_command_is_adopted_and_notifies() {
    let fx = Fixture::new();
    let answer = fx
        .registry
        .run_foreground(
            req("echo started; read -r _; echo finished"),
            Duration::from_secs(30),
            // Long enough for `started` to be printed before it on a loaded machine.
            Some(Duration::from_secs(5)),
            None,
        )
        .await
        .expect("runs");
    assert_eq!(answer.status, ForegroundStatus::Yielded);
    assert!(answer.process_running);
    let id = answer.session_id.clone();
    let note = answer.note.unwrap_or_default();
    assert!(
        note.contains(id.as_str()) && note.contains("you will be notified"),
        "{note}"
    );
    assert_eq!(answer.output, "started\n");
    fx.registry.submit(id.as_str(), "go").await.expect("submit");
    let Event::Completion {
        session_id, output, ..
    } = completion_for(&fx, "t").await
    else {
        unreachable!()
    };
    assert_eq!(session_id, id);
    assert_eq!(output, "started\nfinished\n");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b24_an_interrupt_adopts_within_a_second() {
    let fx = Fixture::new();
    let token = CancellationToken::new();
    let run = {
        let registry = fx.registry.clone();
        let token = token.clone();
        tokio::spawn(async move {
            registry
                .run_foreground(req("sleep 30"), Duration::from_secs(60), None, Some(token))
                .await
        })
    };
    wait_until(Duration::from_secs(10), "the foreground session", || {
        !fx.registry.snapshot_running_ids("t").is_empty()
    })
    .await;
    let fired = Instant::now();
    token.cancel();
    let answer = run.await.expect("joins").expect("runs");
    assert!(fired.elapsed() < Duration::from_secs(1));
    assert_eq!(answer.status, ForegroundStatus::Interrupted);
    assert!(answer.process_running);
    assert!(
        answer
            .note
            .unwrap_or_default()
            .contains("new message from the user")
    );
    let id = answer.session_id;
    fx.registry
        .kill(id.as_str(), KillSource::ProcessKill)
        .await
        .expect("kill");
    let Event::Completion {
        completion_reason, ..
    } = completion_for(&fx, "t").await
    else {
        unreachable!()
    };
    assert_eq!(completion_reason, CompletionReason::Killed);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b24_past_the_timeout_without_a_yield_the_command_is_killed() {
    let fx = Fixture::new();
    let answer = fx
        .registry
        .run_foreground(
            req("echo slow; sleep 30"),
            // Long enough for `slow` to be printed before it on a loaded machine.
            Duration::from_secs(5),
            None,
            None,
        )
        .await
        .expect("runs");
    assert_eq!(answer.status, ForegroundStatus::TimedOut);
    assert!(!answer.process_running);
    assert_eq!(answer.completion_reason, Some(CompletionReason::Killed));
    assert_eq!(answer.output, "slow\n");
    assert!(answer.note.unwrap_or_default().contains("timeout"));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b24_wake_requests_and_a_zero_timeout_are_refused() {
    let fx = Fixture::new();
    let notify = SpawnRequest {
        notify: true,
        ..req("true")
    };
    match fx
        .registry
        .run_foreground(notify, Duration::from_secs(1), None, None)
        .await
    {
        Err(SpawnError::InvalidRequest { message, .. }) => {
            assert!(message.contains("background"), "{message}");
        }
        other => panic!("notify in the foreground must be refused: {other:?}"),
    }
    match fx
        .registry
        .run_foreground(req("true"), Duration::ZERO, None, None)
        .await
    {
        Err(SpawnError::InvalidRequest { field, .. }) => assert_eq!(field, "timeout"),
        other => panic!("a zero timeout must be refused: {other:?}"),
    }
    assert!(
        fx.registry.snapshot_running_ids("t").is_empty(),
        "nothing started"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b23_an_interrupted_wait_leaves_the_session_notify_tracked() {
    let fx = Fixture::new();
    let info = fx
        .spawn(SpawnRequest {
            notify: true,
            ..req("read -r _; echo done")
        })
        .await;
    let id = info.session_id.as_str();
    let token = CancellationToken::new();
    let waiter = {
        let registry = fx.registry.clone();
        let token = token.clone();
        let id = id.to_owned();
        tokio::spawn(async move {
            registry
                .wait(&id, Duration::from_secs(100), Some(token))
                .await
        })
    };
    let fired = Instant::now();
    token.cancel();
    let answer = waiter.await.expect("joins").expect("waits");
    assert!(fired.elapsed() < Duration::from_secs(1));
    assert_eq!(answer.status, WaitStatus::Interrupted);
    assert!(answer.process_running);
    let note = answer.note.unwrap_or_default();
    assert!(note.contains("you will be notified on exit"), "{note}");
    let timeout = fx
        .registry
        .wait(id, Duration::from_millis(200), None)
        .await
        .expect("waits");
    assert_eq!(timeout.status, WaitStatus::Timeout);
    let note = timeout.note.unwrap_or_default();
    assert!(
        note.starts_with(
            "Wait window of 0.2s elapsed — the process is still running. This is not an error. Uptime: "
        ) && note.ends_with(
            "notify_on_complete is set: you will be notified on exit — do more work instead of waiting again."
        ),
        "{note}"
    );
    fx.registry.submit(id, "go").await.expect("submit");
    let Event::Completion { output, .. } = completion_for(&fx, "t").await else {
        unreachable!()
    };
    assert_eq!(output, "done\n");
    fx.assert_groups_gone().await;
}
