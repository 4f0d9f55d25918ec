//! Lifecycle: the choke point, orphans, churn, kill, wait, ownership, events
//! (B2, B9-B13, B17, B19, B22, B23, B39).

use std::collections::HashSet;
use std::time::{Duration, Instant};

use herd_core::{
    CompletionReason, Error, Event, KillSource, KillStatus, ListFilter, NotificationPolicy,
    RegistryConfig, SessionStatus, SpawnRequest, WaitStatus,
};
use tokio_util::sync::CancellationToken;

use crate::support::{Fixture, fd_count_outside, next_completion};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b13_orphan_holding_the_pipe_still_completes_once_within_2s() {
    let fx = Fixture::new();
    let mut events = fx.registry.subscribe();
    let started = Instant::now();
    let info = fx.run("(sleep 30 &); echo started").await;
    let event = next_completion(&mut events, Duration::from_secs(5)).await;
    let elapsed = started.elapsed();
    let Event::Completion {
        session_id,
        output,
        exit_code,
        descendants_alive,
        ..
    } = &event
    else {
        unreachable!("next_completion returns completions")
    };
    assert_eq!(session_id, &info.session_id);
    assert_eq!(output, "started\n");
    assert_eq!(*exit_code, Some(0));
    assert!(
        !descendants_alive.is_empty(),
        "the orphaned sleep is listed"
    );
    assert!(
        elapsed < Duration::from_secs(2),
        "completion took {elapsed:?}"
    );
    // Exactly one completion: nothing else arrives for this session.
    let more = tokio::time::timeout(Duration::from_millis(300), events.recv()).await;
    assert!(more.is_err(), "a second event arrived: {more:?}");
    Fixture::kill_group(info.pid);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b9_b10_200_concurrent_sessions_publish_exactly_200_completions_and_none_stays_pending() {
    let fx = Fixture::new();
    let mut events = fx.registry.subscribe();
    let mut ids = HashSet::new();
    for i in 0..200 {
        let info = fx
            .spawn(SpawnRequest {
                command: format!("echo {i}"),
                task_id: "t".to_owned(),
                notify: true,
                ..SpawnRequest::default()
            })
            .await;
        ids.insert(info.session_id);
    }
    let mut seen = HashSet::new();
    while seen.len() < 200 {
        let Event::Completion { session_id, .. } =
            next_completion(&mut events, Duration::from_secs(30)).await
        else {
            unreachable!()
        };
        assert!(ids.contains(&session_id));
        assert!(
            seen.insert(session_id.clone()),
            "duplicate completion for {session_id}"
        );
    }
    assert!(
        fx.registry
            .wait_for_pending_completions("t", Duration::from_secs(5))
            .await
    );
    let drained = fx.registry.drain("t");
    assert_eq!(drained.len(), 200);
    assert!(
        fx.registry.drain("t").is_empty(),
        "each event is delivered once"
    );
    let more = tokio::time::timeout(Duration::from_millis(200), events.recv()).await;
    assert!(more.is_err(), "an extra event arrived: {more:?}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b12_2000_spawn_finish_cycles_leave_the_fd_count_unchanged() {
    let fx = Fixture::exclusive(|c: &mut RegistryConfig| c.finished_cap = 16);
    // Warm up: the runtime opens its own descriptors lazily on first use.
    for _ in 0..20 {
        let info = fx.run("true").await;
        fx.done(&info.session_id).await;
    }
    // Checkpoint and receipt writes run in the background; count with none in flight.
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    let home = fx.home();
    let before = fd_count_outside(home.root());
    let before_targets = crate::support::fd_targets();
    for _ in 0..250 {
        let mut batch = Vec::new();
        for _ in 0..8 {
            batch.push(fx.run("true").await);
        }
        for info in batch {
            fx.done(&info.session_id).await;
        }
    }
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    // Other tests in this binary open pipes and pidfds for a moment while they run, so
    // a single sample can catch a few transient descriptors on either side. A leak over
    // 2,000 cycles is permanent: re-sample until the count is back, within a deadline.
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut after = fd_count_outside(home.root());
    while after > before && Instant::now() < deadline {
        let _ = tokio::time::timeout(Duration::from_millis(50), std::future::pending::<()>()).await;
        after = fd_count_outside(home.root());
    }
    assert!(
        after <= before,
        "fd count grew over 2,000 cycles ({before} -> {after}):\nbefore {before_targets:#?}\nafter {:#?}",
        crate::support::fd_targets()
    );
    // Memory keeps a bounded cache; the store keeps every one (no count cap, B38).
    let in_memory = fx.registry.counts().1;
    assert!(
        in_memory <= 16,
        "finished sessions in memory are pruned to the cap: {in_memory}"
    );
    fx.registry
        .sync_durable()
        .await
        .expect("the home is writable");
    let listed = fx.registry.list(&ListFilter {
        include_finished: true,
        ..ListFilter::default()
    });
    assert!(listed.len() >= 2_000, "the store lists {}", listed.len());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_kill_ends_the_tree_and_reads_killed() {
    let fx = Fixture::new();
    let info = fx.run("sleep 30 & sleep 30 & echo ready; wait").await;
    let id = info.session_id.as_str();
    crate::support::wait_until(Duration::from_secs(10), "the ready line", || {
        fx.registry
            .poll(id)
            .unwrap()
            .output_preview
            .contains("ready")
    })
    .await;
    let answer = fx.registry.kill(id, KillSource::ProcessKill).await.unwrap();
    assert_eq!(answer.status, KillStatus::Killed, "{answer:?}");
    assert_eq!(answer.completion_reason, Some(CompletionReason::Killed));
    assert_eq!(answer.termination_source, KillSource::ProcessKill);
    assert!(!answer.process_running);
    assert_eq!(answer.output, "ready\n");
    let poll = fx.registry.poll(id).unwrap();
    assert_eq!(poll.status, SessionStatus::Exited);
    assert_eq!(poll.completion_reason, Some(CompletionReason::Killed));
    let again = fx.registry.kill(id, KillSource::ProcessKill).await.unwrap();
    assert_eq!(again.status, KillStatus::AlreadyExited);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b17_kill_all_spares_persistent_sessions_for_lifecycle_sources() {
    let fx = Fixture::new();
    let plain = fx.run("sleep 30").await;
    let kept = fx
        .spawn(SpawnRequest {
            command: "sleep 30".to_owned(),
            task_id: "t".to_owned(),
            persist_on_release: true,
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(fx.registry.kill_all("t", &[], KillSource::KillAll).await, 1);
    assert_eq!(
        fx.registry.poll(plain.session_id.as_str()).unwrap().status,
        SessionStatus::Exited
    );
    assert_eq!(
        fx.registry.poll(kept.session_id.as_str()).unwrap().status,
        SessionStatus::Running
    );
    assert_eq!(
        fx.registry.snapshot_running_ids("t"),
        vec![kept.session_id.clone()]
    );
    fx.registry.shutdown().await;
    assert_eq!(
        fx.registry.poll(kept.session_id.as_str()).unwrap().status,
        SessionStatus::Exited
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b23_wait_timeout_clamp_and_interrupt() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.wait_cap = Duration::from_millis(300));
    let info = fx.run("sleep 30").await;
    let id = info.session_id.as_str();
    match fx.registry.wait(id, Duration::ZERO, None).await {
        Err(Error::InvalidArgument { message }) => assert!(message.contains("positive")),
        other => panic!("zero timeout must be an error, got {other:?}"),
    }
    let clamped = fx
        .registry
        .wait(id, Duration::from_secs(60), None)
        .await
        .unwrap();
    assert_eq!(clamped.status, WaitStatus::Timeout);
    assert!(clamped.process_running);
    let note = clamped.note.unwrap_or_default();
    assert!(
        note.contains("clamped") && note.contains("not an error"),
        "{note}"
    );
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
    let answer = waiter.await.unwrap().unwrap();
    assert!(fired.elapsed() < Duration::from_secs(1));
    assert_eq!(answer.status, WaitStatus::Interrupted);
    assert!(answer.process_running);
    assert_eq!(
        fx.registry.poll(id).unwrap().status,
        SessionStatus::Running,
        "untouched"
    );
    fx.registry.kill(id, KillSource::ProcessKill).await.unwrap();
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b2_ownership_filters_compare_the_owner_alone() {
    let fx = Fixture::new();
    let req = |owner: &str, key: &str| SpawnRequest {
        command: "sleep 30".to_owned(),
        task_id: "container".to_owned(),
        owner_task_id: Some(owner.to_owned()),
        session_key: Some(key.to_owned()),
        ..SpawnRequest::default()
    };
    let a = fx.spawn(req("turn-a", "k1")).await;
    let b = fx.spawn(req("turn-b", "k2")).await;
    assert_eq!(
        fx.registry.snapshot_running_ids("turn-a"),
        vec![a.session_id.clone()]
    );
    assert!(fx.registry.snapshot_running_ids("container").is_empty());
    assert!(fx.registry.has_active_processes("container"));
    assert!(!fx.registry.has_active_processes("turn-a"));
    let rows = fx.registry.list(&ListFilter {
        owner: Some("turn-b".to_owned()),
        ..ListFilter::default()
    });
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].session_id, b.session_id);
    assert_eq!(rows[0].task_id, "container");
    let by_key = fx.registry.list(&ListFilter {
        session_key: Some("k1".to_owned()),
        ..ListFilter::default()
    });
    assert_eq!(by_key[0].session_id, a.session_id);
    let json = serde_json::to_value(&rows[0]).unwrap();
    assert!(json["started_at"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        fx.registry
            .kill_all("turn-a", &[], KillSource::TurnTimeout)
            .await,
        1
    );
    assert_eq!(
        fx.registry.snapshot_running_ids("turn-b"),
        vec![b.session_id.clone()]
    );
    fx.registry.shutdown().await;
    assert!(!fx.registry.has_active_processes("container"));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b22_policy_off_mutes_the_queue_but_not_the_stream() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.notifications = NotificationPolicy::Off);
    let mut events = fx.registry.subscribe();
    let info = fx
        .spawn(SpawnRequest {
            command: "true".to_owned(),
            task_id: "t".to_owned(),
            notify: true,
            ..SpawnRequest::default()
        })
        .await;
    next_completion(&mut events, Duration::from_secs(10)).await;
    assert!(fx.registry.drain("t").is_empty());
    fx.done(&info.session_id).await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b19_only_notify_sessions_are_queued_for_their_owner() {
    let fx = Fixture::new();
    let quiet = fx.run("exit 3").await;
    let loud = fx
        .spawn(SpawnRequest {
            command: "echo out; exit 4".to_owned(),
            task_id: "t".to_owned(),
            notify: true,
            ..SpawnRequest::default()
        })
        .await;
    fx.done(&quiet.session_id).await;
    let answer = fx.done(&loud.session_id).await;
    assert_eq!(answer.exit_code, Some(4));
    assert_eq!(answer.completion_reason, Some(CompletionReason::Exited));
    let events = fx.registry.drain("t");
    assert_eq!(events.len(), 1);
    let text = herd_core::render_events(&events);
    assert!(
        text.contains(&format!(
            "Background process {} exited (exit code 4)",
            loud.session_id
        )),
        "{text}"
    );
    assert!(text.contains("Output:\nout\n"), "{text}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b9_a_signal_reads_signaled() {
    let fx = Fixture::new();
    let info = fx.run("kill -USR1 $$").await;
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.completion_reason, Some(CompletionReason::Signaled));
    assert_eq!(answer.signal, Some(10));
    assert_eq!(answer.exit_code, None);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b11_finished_sessions_expire_after_the_ttl_and_spawns_are_never_refused() {
    let fx = Fixture::with(|c: &mut RegistryConfig| {
        c.finished_ttl = Duration::ZERO;
        c.finished_cap = 0;
    });
    let first = fx.run("echo one").await;
    fx.done(&first.session_id).await;
    let second = fx.run("echo two").await;
    fx.done(&second.session_id).await;
    // Gone from memory, the result is still answerable from its receipt (B38).
    let poll = fx
        .registry
        .poll(first.session_id.as_str())
        .expect("an expired session answers from its receipt");
    assert_eq!(poll.exit_code, Some(0));
    // Pruning runs at each spawn and finish, and keeps a session until its receipt is
    // written; a few more short sessions give it the chance once the receipt is down.
    let listed = |fx: &Fixture| fx.registry.counts().1 > 0;
    let deadline = Instant::now() + Duration::from_secs(20);
    while listed(&fx) {
        assert!(
            Instant::now() < deadline,
            "the expired session never left the in-memory table"
        );
        let more = fx.run("true").await;
        fx.done(&more.session_id).await;
    }
    let log = fx.home().session_log_path(first.session_id.as_str());
    assert_eq!(
        std::fs::read_to_string(log).unwrap(),
        "one\n",
        "the log outlives the in-memory record"
    );
    // Out of memory, it is still listed, from the store.
    assert!(
        fx.registry
            .list(&herd_core::ListFilter {
                include_finished: true,
                ..Default::default()
            })
            .iter()
            .any(|row| row.session_id == first.session_id)
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b22_policy_error_queues_only_failures() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.notifications = NotificationPolicy::Error);
    let req = |command: &str| SpawnRequest {
        command: command.to_owned(),
        task_id: "t".to_owned(),
        notify: true,
        ..SpawnRequest::default()
    };
    let ok = fx.spawn(req("true")).await;
    let bad = fx.spawn(req("false")).await;
    fx.done(&ok.session_id).await;
    fx.done(&bad.session_id).await;
    let events = fx.registry.drain("t");
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].session_id(), Some(&bad.session_id));
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b15_kill_reaches_a_pty_session() {
    let fx = Fixture::new();
    let info = fx
        .spawn(SpawnRequest {
            command: "echo ready; sleep 30".to_owned(),
            mode: herd_core::Mode::pty(),
            ..SpawnRequest::default()
        })
        .await;
    let id = info.session_id.as_str();
    crate::support::wait_until(Duration::from_secs(10), "the ready line", || {
        fx.registry
            .poll(id)
            .unwrap()
            .output_preview
            .contains("ready")
    })
    .await;
    let answer = fx
        .registry
        .kill(id, KillSource::OperatorStop)
        .await
        .unwrap();
    assert_eq!(answer.status, KillStatus::Killed, "{answer:?}");
    assert_eq!(answer.termination_source, KillSource::OperatorStop);
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b17_a_spawn_after_shutdown_began_is_refused_and_nothing_survives() {
    let fx = Fixture::new();
    let running = fx.run("sleep 300").await;
    fx.registry.shutdown().await;
    let refused = fx
        .registry
        .spawn(herd_core::SpawnRequest {
            command: "sleep 300".to_owned(),
            task_id: "t".to_owned(),
            ..herd_core::SpawnRequest::default()
        })
        .await
        .expect_err("no job starts once shutdown began");
    assert!(
        matches!(refused, herd_core::SpawnError::ShuttingDown),
        "{refused}"
    );
    let polled = fx
        .registry
        .poll(running.session_id.as_str())
        .expect("known");
    assert_eq!(polled.status, herd_core::SessionStatus::Exited);
    fx.assert_groups_gone().await;
}

/// The in-process reader holds the time limit through the session machine, which asks
/// the registry's tree kill for it at the deadline: the whole tree ends, as
/// `time_limit`, and no separate timer is involved.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b17_in_process_time_limit_kills_the_tree_as_time_limit() {
    let fx = Fixture::new();
    let started = Instant::now();
    let info = fx
        .spawn(SpawnRequest {
            command: "sleep 30 & sleep 30 & echo ready; wait".to_owned(),
            task_id: "t".to_owned(),
            time_limit: Some(Duration::from_secs(1)),
            ..SpawnRequest::default()
        })
        .await;
    let answer = fx.done(&info.session_id).await;
    let elapsed = started.elapsed();
    assert_eq!(
        answer.completion_reason,
        Some(CompletionReason::Killed),
        "{answer:?}"
    );
    assert_eq!(
        answer.termination_source,
        Some(KillSource::TimeLimit),
        "{answer:?}"
    );
    assert_eq!(answer.time_limit_seconds, Some(1));
    assert_eq!(answer.output, "ready\n");
    assert!(!answer.process_running);
    assert!(
        elapsed >= Duration::from_secs(1),
        "killed before its deadline, after {elapsed:?}"
    );
    fx.assert_groups_gone().await;
}

/// A session that ends before its deadline ends by its exit: the time limit leaves it
/// alone, and nothing of it fires later.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b17_in_process_time_limit_spares_a_job_that_ends_first() {
    let fx = Fixture::new();
    let info = fx
        .spawn(SpawnRequest {
            command: "echo quick".to_owned(),
            task_id: "t".to_owned(),
            time_limit: Some(Duration::from_secs(1)),
            ..SpawnRequest::default()
        })
        .await;
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.exit_code, Some(0), "{answer:?}");
    assert_eq!(answer.completion_reason, Some(CompletionReason::Exited));
    assert_eq!(answer.termination_source, None);
    fx.assert_groups_gone().await;
}
