//! Watch patterns and heartbeats wired through the registry (B20, B21).

use std::time::Duration;

use herd_core::{Event, RegistryConfig, SpawnRequest};

use crate::support::Fixture;

async fn next_matching(
    rx: &mut tokio::sync::broadcast::Receiver<Event>,
    what: &str,
    pred: impl Fn(&Event) -> bool,
) -> Event {
    loop {
        match tokio::time::timeout(Duration::from_secs(10), rx.recv()).await {
            Ok(Ok(e)) if pred(&e) => return e,
            Ok(Ok(_)) => {}
            Ok(Err(e)) => panic!("event stream failed: {e}"),
            Err(_) => panic!("no {what} within 10 s"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b20_watch_pattern_delivers_the_matching_lines() {
    let fx = Fixture::new();
    let mut events = fx.registry.subscribe();
    let info = fx
        .spawn(SpawnRequest {
            command: "echo ok; echo 'ERROR: disk full'; read -r _".to_owned(),
            task_id: "t".to_owned(),
            watch: vec!["ERROR".to_owned()],
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(info.watch_patterns, vec!["ERROR".to_owned()]);
    let event = next_matching(&mut events, "watch match", |e| {
        matches!(e, Event::WatchMatch { .. })
    })
    .await;
    let Event::WatchMatch {
        session_id,
        pattern,
        output,
        suppressed,
        ..
    } = &event
    else {
        unreachable!()
    };
    assert_eq!(session_id, &info.session_id);
    assert_eq!(
        (pattern.as_str(), output.as_str(), *suppressed),
        ("ERROR", "ERROR: disk full", 0)
    );
    let text = herd_core::render_events(std::slice::from_ref(&event));
    assert!(text.contains("matched watch pattern \"ERROR\""), "{text}");
    fx.registry
        .close_stdin(info.session_id.as_str())
        .await
        .unwrap();
    fx.done(&info.session_id).await;
    let queued = fx.registry.drain("t");
    assert_eq!(
        queued.len(),
        1,
        "the match is queued, no completion without notify: {queued:?}"
    );
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b21_heartbeats_carry_only_new_output() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.heartbeat_floor = Duration::from_millis(250));
    let mut events = fx.registry.subscribe();
    let info = fx
        .spawn(SpawnRequest {
            command: "echo first; read -r _; echo second; read -r _".to_owned(),
            task_id: "t".to_owned(),
            heartbeat_seconds: Some(1),
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(info.heartbeat_seconds, Some(1));
    assert!(info.notify_on_complete, "a heartbeat implies notify");
    let is_beat = |e: &Event| matches!(e, Event::Heartbeat { .. });
    let first = next_matching(&mut events, "heartbeat 1", is_beat).await;
    let Event::Heartbeat { seq, output, .. } = &first else {
        unreachable!()
    };
    assert_eq!((*seq, output.as_str()), (1, "first\n"));
    fx.registry
        .submit(info.session_id.as_str(), "go")
        .await
        .unwrap();
    let second = next_matching(&mut events, "heartbeat 2", is_beat).await;
    let Event::Heartbeat { seq, output, .. } = &second else {
        unreachable!()
    };
    assert_eq!(
        (*seq, output.as_str()),
        (2, "second\n"),
        "only output since the last beat"
    );
    fx.registry
        .close_stdin(info.session_id.as_str())
        .await
        .unwrap();
    fx.done(&info.session_id).await;
    fx.assert_groups_gone().await;
}
