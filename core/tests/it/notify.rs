//! Wake-ups end to end: watch patterns and every limit of B20 (on a hand-driven
//! clock), heartbeats on the one timer (B21, real time with a 1 s floor), and the
//! notification policy (B22).
//!
//! Sessions here are `while read` echo loops: the test says a line, and waits until the
//! session's tail shows it. Saying a second line is the synchronisation point for the
//! first one's watch matching: the reader matches a chunk before it reads the next, and
//! the second line is only written after the first was seen.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use herd_core::{
    Clock, CompletionReason, Event, ListFilter, NotificationPolicy, RegistryConfig, SessionId,
    SpawnRequest, render_events,
};

use crate::support::{Fixture, next_completion, wait_until};

/// A clock the test moves by hand (the real thing, a 15 s spacing or a 30 s trip, is
/// too slow for a test; the registry reads this one instead).
#[derive(Debug)]
struct ManualClock {
    base: Instant,
    offset: Mutex<Duration>,
}

impl ManualClock {
    fn new() -> Arc<ManualClock> {
        Arc::new(ManualClock {
            base: Instant::now(),
            offset: Mutex::new(Duration::ZERO),
        })
    }

    fn advance(&self, by: Duration) {
        *self.offset.lock().expect("not poisoned") += by;
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.base + *self.offset.lock().expect("not poisoned")
    }
}

fn with_clock(clock: &Arc<ManualClock>) -> Fixture {
    let clock: Arc<dyn Clock> = Arc::clone(clock) as Arc<dyn Clock>;
    Fixture::with(move |c: &mut RegistryConfig| c.clock = clock)
}

/// An echo loop owned by `owner` watching for `ERROR`.
async fn watcher(fx: &Fixture, owner: &str) -> SessionId {
    let info = fx
        .spawn(SpawnRequest {
            command: "echo ready; while read -r l; do echo \"$l\"; done".to_owned(),
            task_id: owner.to_owned(),
            watch: vec!["ERROR".to_owned()],
            ..SpawnRequest::default()
        })
        .await;
    assert!(!info.notify_on_complete);
    assert_eq!(info.watch_patterns, ["ERROR".to_owned()]);
    seen(fx, &info.session_id, "ready").await;
    info.session_id
}

/// Waits until `line` is in the session's output.
async fn seen(fx: &Fixture, id: &SessionId, line: &str) {
    wait_until(
        Duration::from_secs(10),
        &format!("{line:?} in the output"),
        || {
            fx.registry
                .log(id.as_str(), None, Some(5))
                .expect("the session exists")
                .output
                .lines()
                .any(|l| l == line)
        },
    )
    .await;
}

/// Says `line` to the session and waits until it echoed it.
async fn say(fx: &Fixture, id: &SessionId, line: &str) {
    fx.registry
        .submit(id.as_str(), line)
        .await
        .expect("submit succeeds");
    seen(fx, id, line).await;
}

/// Says a line nobody watches for, so every earlier line has been matched.
async fn settle(fx: &Fixture, id: &SessionId) {
    let token = format!("sync-{}", next_token());
    say(fx, id, &token).await;
}

fn next_token() -> u64 {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    N.fetch_add(1, std::sync::atomic::Ordering::SeqCst)
}

/// Drains `owner` until `done` holds for everything drained so far, at most `limit`.
async fn drain_until(
    fx: &Fixture,
    owner: &str,
    limit: Duration,
    done: impl Fn(&[Event]) -> bool,
) -> Vec<Event> {
    let mut events = Vec::new();
    let deadline = Instant::now() + limit;
    loop {
        events.extend(fx.registry.drain(owner));
        if done(&events) {
            return events;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?}; drained so far: {events:#?}"
        );
        let _ = tokio::time::timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
    }
}

fn n_matches(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| matches!(e, Event::WatchMatch { .. }))
        .count()
}

fn kinds(events: &[Event]) -> Vec<&'static str> {
    events
        .iter()
        .map(|e| match e {
            Event::Completion { .. } => "completion",
            Event::Heartbeat { .. } => "heartbeat",
            Event::WatchMatch { .. } => "watch_match",
            Event::WatchDisabled { .. } => "watch_disabled",
            Event::WatchOverflowTripped { .. } => "tripped",
            Event::WatchOverflowReleased { .. } => "released",
            Event::QueueFolded { .. } => "folded",
            Event::Ready { .. } => "ready",
            Event::Retry { .. } => "retry",
            _ => "other",
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b20_spacing_suppresses_then_the_lifetime_cap_falls_back_to_notify() {
    let clock = ManualClock::new();
    let fx = with_clock(&clock);
    let id = watcher(&fx, "t").await;
    say(&fx, &id, "ERROR 1").await;
    say(&fx, &id, "all good").await;
    // Within the 15 s spacing: counted, not delivered.
    say(&fx, &id, "ERROR 2").await;
    say(&fx, &id, "ERROR 3").await;
    settle(&fx, &id).await;
    let first = drain_until(&fx, "t", Duration::from_secs(5), |e| n_matches(e) == 1).await;
    let Event::WatchMatch {
        pattern,
        output,
        suppressed,
        command,
        ..
    } = &first[0]
    else {
        panic!("not a match: {first:?}")
    };
    assert_eq!(
        (pattern.as_str(), output.as_str(), *suppressed),
        ("ERROR", "ERROR 1", 0)
    );
    assert!(command.contains("while read"), "{command}");
    // Seven more deliveries, one per clean window; the eighth is the last.
    for n in 4..=10 {
        clock.advance(Duration::from_secs(15));
        say(&fx, &id, &format!("ERROR {n}")).await;
        settle(&fx, &id).await;
    }
    let events = drain_until(&fx, "t", Duration::from_secs(5), |e| {
        e.iter().any(|e| matches!(e, Event::WatchDisabled { .. }))
    })
    .await;
    assert_eq!(n_matches(&events), 7, "{events:#?}");
    let Event::WatchMatch { suppressed, .. } = &events[0] else {
        panic!("{events:#?}")
    };
    assert_eq!(
        *suppressed, 2,
        "the two lines inside the spacing are counted"
    );
    let Some(Event::WatchDisabled { message, .. }) = events.last() else {
        panic!("{events:#?}")
    };
    assert!(message.contains("8 matches were delivered"), "{message}");
    // Watching is over; the session now notifies on completion instead.
    let rows = fx.registry.list(&ListFilter::default());
    assert!(rows[0].notify_on_complete);
    clock.advance(Duration::from_secs(15));
    say(&fx, &id, "ERROR after the cap").await;
    fx.registry.close_stdin(id.as_str()).await.expect("close");
    let tail = drain_until(&fx, "t", Duration::from_secs(10), |e| {
        e.iter().any(|e| matches!(e, Event::Completion { .. }))
    })
    .await;
    assert_eq!(kinds(&tail), ["completion"], "{tail:#?}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b20_three_struck_windows_in_a_row_disable_watching_once() {
    let clock = ManualClock::new();
    let fx = with_clock(&clock);
    let id = watcher(&fx, "t").await;
    for window in 0..3 {
        if window > 0 {
            clock.advance(Duration::from_secs(15));
        }
        say(&fx, &id, &format!("ERROR delivered {window}")).await;
        say(&fx, &id, &format!("ERROR struck {window}")).await;
        settle(&fx, &id).await;
    }
    let events = drain_until(&fx, "t", Duration::from_secs(5), |e| {
        e.iter().any(|e| matches!(e, Event::WatchDisabled { .. }))
    })
    .await;
    assert_eq!(
        kinds(&events),
        [
            "watch_match",
            "watch_match",
            "watch_match",
            "watch_disabled"
        ]
    );
    let Event::WatchDisabled {
        suppressed,
        message,
        ..
    } = &events[3]
    else {
        unreachable!()
    };
    assert_eq!(*suppressed, 1);
    assert!(message.contains("3 windows in a row"), "{message}");
    clock.advance(Duration::from_secs(15));
    say(&fx, &id, "ERROR ignored").await;
    settle(&fx, &id).await;
    assert!(fx.registry.drain("t").is_empty(), "nothing after disabling");
    fx.registry.close_stdin(id.as_str()).await.expect("close");
    fx.done(&id).await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b20_global_breaker_trips_at_16_and_the_timer_announces_the_release() {
    let clock = ManualClock::new();
    let fx = with_clock(&clock);
    let mut ids = Vec::new();
    for n in 0..17 {
        ids.push(watcher(&fx, &format!("owner-{n}")).await);
    }
    for id in &ids {
        say(&fx, id, "ERROR flood").await;
        settle(&fx, id).await;
    }
    let mut delivered = 0;
    for n in 0..15 {
        let events = fx.registry.drain(&format!("owner-{n}"));
        assert_eq!(kinds(&events), ["watch_match"], "owner-{n}: {events:#?}");
        delivered += 1;
    }
    assert_eq!(delivered, 15);
    assert_eq!(kinds(&fx.registry.drain("owner-15")), ["tripped"]);
    assert!(
        fx.registry.drain("owner-16").is_empty(),
        "dropped while tripped"
    );
    // The release comes from the timer, with no further match.
    clock.advance(Duration::from_secs(30));
    for owner in ["owner-15", "owner-16"] {
        let events = drain_until(&fx, owner, Duration::from_secs(5), |e| !e.is_empty()).await;
        let [
            Event::WatchOverflowReleased {
                suppressed,
                message,
            },
        ] = events.as_slice()
        else {
            panic!("{owner}: {events:#?}")
        };
        assert_eq!(*suppressed, 2, "the tripping match and the dropped one");
        assert!(message.contains("2 match(es) were dropped"), "{message}");
        let text = render_events(&events);
        assert!(
            text.starts_with("[IMPORTANT: watch notifications are back on"),
            "{text}"
        );
    }
    for id in &ids {
        fx.registry.close_stdin(id.as_str()).await.expect("close");
    }
    for id in &ids {
        fx.done(id).await;
    }
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b20_watch_and_notify_combine_a_match_wakes_and_the_exit_still_wakes_once() {
    let fx = Fixture::new();
    let mut stream = fx.registry.subscribe();
    // A dev server that says it is ready, then crashes.
    let info = fx
        .spawn(SpawnRequest {
            command: "echo server ready; read _; exit 3".to_owned(),
            task_id: "t".to_owned(),
            notify: true,
            watch: vec!["ready".to_owned()],
            ..SpawnRequest::default()
        })
        .await;
    assert!(info.notify_on_complete);
    assert_eq!(info.watch_patterns, ["ready"]);
    assert!(
        !info.note.unwrap_or_default().contains("ignored"),
        "nothing is dropped"
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut events = Vec::new();
    while events.is_empty() && Instant::now() < deadline {
        let _ = tokio::time::timeout(Duration::from_millis(200), stream.recv()).await;
        events = fx.registry.drain("t");
    }
    assert_eq!(kinds(&events), ["watch_match"], "{events:#?}");
    fx.registry
        .close_stdin(info.session_id.as_str())
        .await
        .expect("close");
    let answer = fx.done(&info.session_id).await;
    assert_eq!(answer.exit_code, Some(3));
    let events = fx.registry.drain("t");
    assert_eq!(
        kinds(&events),
        ["completion"],
        "one completion: {events:#?}"
    );
    assert!(fx.registry.drain("t").is_empty());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b20_a_final_partial_line_matches_before_the_exit_and_nothing_after() {
    let fx = Fixture::new();
    let mut stream = fx.registry.subscribe();
    let info = fx
        .spawn(SpawnRequest {
            command: "printf 'ERROR without newline'".to_owned(),
            task_id: "t".to_owned(),
            watch: vec!["ERROR".to_owned()],
            ..SpawnRequest::default()
        })
        .await;
    next_completion(&mut stream, Duration::from_secs(10)).await;
    let events = fx.registry.drain("t");
    // Not notify: the match is the only wake-up, and it came before the exit.
    assert_eq!(kinds(&events), ["watch_match"], "{events:#?}");
    let Event::WatchMatch {
        output, session_id, ..
    } = &events[0]
    else {
        unreachable!()
    };
    assert_eq!(session_id, &info.session_id);
    assert_eq!(output, "ERROR without newline");
    let more = tokio::time::timeout(Duration::from_millis(300), stream.recv()).await;
    assert!(more.is_err(), "an event after the completion: {more:?}");
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b21_heartbeat_deltas_cover_each_line_once_then_one_completion() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.heartbeat_floor = Duration::from_secs(1));
    let mut stream = fx.registry.subscribe();
    let info = fx
        .spawn(SpawnRequest {
            command: "echo ready; while read -r l; do echo \"$l\"; done; echo bye".to_owned(),
            task_id: "t".to_owned(),
            heartbeat_seconds: Some(1),
            ..SpawnRequest::default()
        })
        .await;
    let id = info.session_id.clone();
    assert_eq!(info.heartbeat_seconds, Some(1));
    assert!(info.notify_on_complete, "a heartbeat implies notify");
    assert_eq!(fx.registry.n_heartbeats(), 1);
    let mut beats: Vec<(u64, String)> = Vec::new();
    let covered = |beats: &[(u64, String)], line: &str| {
        beats.iter().any(|(_, out)| out.lines().any(|l| l == line))
    };
    for n in 1..=3 {
        let line = format!("line {n}");
        say(&fx, &id, &line).await;
        let deadline = Instant::now() + Duration::from_secs(10);
        while !covered(&beats, &line) {
            assert!(
                Instant::now() < deadline,
                "no beat carried {line:?}: {beats:?}"
            );
            for event in fx.registry.drain("t") {
                let Event::Heartbeat {
                    seq,
                    output,
                    interval,
                    ..
                } = event
                else {
                    panic!("only heartbeats while running: {event:?}")
                };
                assert_eq!(interval, 1);
                beats.push((seq, output.into_string()));
            }
            let _ =
                tokio::time::timeout(Duration::from_millis(10), std::future::pending::<()>()).await;
        }
    }
    // An idle interval delivers nothing (empty ticks are skipped).
    while stream.try_recv().is_ok() {}
    let quiet = tokio::time::timeout(Duration::from_millis(2_500), async {
        loop {
            if let Ok(Event::Heartbeat { .. }) = stream.recv().await {
                return;
            }
        }
    })
    .await;
    assert!(quiet.is_err(), "a heartbeat without new output");
    fx.registry.close_stdin(id.as_str()).await.expect("close");
    let completion = drain_until(&fx, "t", Duration::from_secs(10), |e| {
        e.iter().any(|e| matches!(e, Event::Completion { .. }))
    })
    .await;
    // The last line ("bye") may ride one more beat or only the completion.
    let mut tail = completion.clone();
    let Some(Event::Completion { output, .. }) = tail.pop() else {
        panic!("the completion is last: {completion:#?}")
    };
    for event in tail {
        let Event::Heartbeat { seq, output, .. } = event else {
            panic!("{event:?}")
        };
        beats.push((seq, output.into_string()));
    }
    assert!(output.ends_with("bye\n"), "{output:?}");
    let seqs: Vec<u64> = beats.iter().map(|(s, _)| *s).collect();
    let expected: Vec<u64> = (1..=seqs.len() as u64).collect();
    assert_eq!(seqs, expected, "seq counts delivered beats");
    let lines: Vec<String> = beats
        .iter()
        .flat_map(|(_, out)| out.lines().map(str::to_owned).collect::<Vec<_>>())
        .collect();
    let mut want = vec!["ready", "line 1", "line 2", "line 3"];
    if lines.len() == 5 {
        want.push("bye");
    }
    assert_eq!(lines, want, "each line in exactly one beat");
    assert_eq!(fx.registry.n_heartbeats(), 0, "the heartbeat stops at exit");
    let _ = next_completion(&mut stream, Duration::from_secs(5)).await;
    let after = tokio::time::timeout(Duration::from_millis(2_500), stream.recv()).await;
    assert!(after.is_err(), "an event after the completion: {after:?}");
    assert!(fx.registry.drain("t").is_empty());
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b21_a_long_delta_keeps_its_tail_and_counts_the_rest() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.heartbeat_floor = Duration::from_secs(1));
    let info = fx
        .spawn(SpawnRequest {
            // The 500 rows in one write: a loop of `echo`s writes each row on its own,
            // and a beat could fall among them on a loaded machine.
            command: "seq -f 'row %g' 1 500 | dd bs=1M iflag=fullblock status=none; read -r _"
                .to_owned(),
            task_id: "t".to_owned(),
            heartbeat_seconds: Some(1),
            ..SpawnRequest::default()
        })
        .await;
    let events = drain_until(&fx, "t", Duration::from_secs(10), |e| !e.is_empty()).await;
    let Event::Heartbeat { output, seq, .. } = &events[0] else {
        panic!("{events:#?}")
    };
    assert_eq!(*seq, 1);
    let (head, body) = output.split_once('\n').expect("a note line");
    let total: usize = (1..=500).map(|i| format!("row {i}\n").len()).sum();
    assert_eq!(
        head,
        format!("...({} earlier characters omitted)", total - 2_000)
    );
    assert_eq!(body.chars().count(), 2_000);
    assert!(body.ends_with("row 500\n"), "{body:?}");
    let text = render_events(&events);
    assert!(
        text.contains("heartbeat #1 — still running after"),
        "{text}"
    );
    fx.registry
        .close_stdin(info.session_id.as_str())
        .await
        .expect("close");
    fx.done(&info.session_id).await;
    fx.assert_groups_gone().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b21_bad_heartbeat_values_are_refused_with_the_b21_message() {
    let fx = Fixture::with(|c: &mut RegistryConfig| c.heartbeat_floor = Duration::from_secs(30));
    for bad in [
        serde_json::json!(-1),
        serde_json::json!(1.5),
        serde_json::json!(true),
        serde_json::json!("60"),
        serde_json::json!([60]),
    ] {
        match fx.registry.heartbeat_from_json(&bad) {
            Err(herd_core::SpawnError::InvalidRequest { field, message }) => {
                assert_eq!(field, "heartbeat_seconds");
                assert!(
                    message.contains("0 turns heartbeats off") && message.contains("raised to 30"),
                    "{message}"
                );
            }
            other => panic!("{bad} must be refused, got {other:?}"),
        }
    }
    let ok = |v: serde_json::Value| fx.registry.heartbeat_from_json(&v).expect("valid");
    assert_eq!(ok(serde_json::json!(0)), None);
    assert_eq!(ok(serde_json::json!(null)), None);
    assert_eq!(ok(serde_json::json!(5)), Some(30));
    assert_eq!(ok(serde_json::json!(90.0)), Some(90));
    // A heartbeat below the floor at spawn is raised, with a note.
    let info = fx
        .spawn(SpawnRequest {
            command: "true".to_owned(),
            task_id: "t".to_owned(),
            heartbeat_seconds: Some(2),
            ..SpawnRequest::default()
        })
        .await;
    assert_eq!(info.heartbeat_seconds, Some(30));
    assert!(
        info.note
            .unwrap_or_default()
            .contains("raised to the minimum of 30s")
    );
    fx.done(&info.session_id).await;
    fx.assert_groups_gone().await;
}

/// Runs a heartbeat-and-watch session to its exit under `policy` and returns what was
/// queued for the owner and what the stream saw.
async fn under_policy(policy: NotificationPolicy, exit_code: i32) -> (Vec<Event>, Vec<Event>) {
    let fx = Fixture::with(move |c: &mut RegistryConfig| {
        c.notifications = policy;
        c.heartbeat_floor = Duration::from_secs(1);
    });
    let mut stream = fx.registry.subscribe();
    let watching = watcher(&fx, "t").await;
    say(&fx, &watching, "ERROR seen").await;
    settle(&fx, &watching).await;
    let beating = fx
        .spawn(SpawnRequest {
            command: format!("echo tick; read -r _; exit {exit_code}"),
            task_id: "t".to_owned(),
            heartbeat_seconds: Some(1),
            ..SpawnRequest::default()
        })
        .await;
    // Wait on the stream (which sees everything) for the beat, then end it.
    let deadline = Duration::from_secs(10);
    let mut seen_events = Vec::new();
    let got_beat = tokio::time::timeout(deadline, async {
        loop {
            let event = stream.recv().await.expect("stream open");
            let is_beat = matches!(event, Event::Heartbeat { .. });
            seen_events.push(event);
            if is_beat {
                return;
            }
        }
    })
    .await;
    assert!(
        got_beat.is_ok(),
        "no heartbeat within {deadline:?}: {seen_events:#?}"
    );
    fx.registry
        .submit(beating.session_id.as_str(), "go")
        .await
        .expect("submit");
    fx.done(&beating.session_id).await;
    fx.registry
        .close_stdin(watching.as_str())
        .await
        .expect("close");
    fx.done(&watching).await;
    while let Ok(event) = stream.try_recv() {
        seen_events.push(event);
    }
    let queued = fx.registry.drain("t");
    fx.assert_groups_gone().await;
    (queued, seen_events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b22_policy_decides_which_wakes_are_queued() {
    let (all, _) = under_policy(NotificationPolicy::All, 0).await;
    let all = kinds(&all);
    for kind in ["watch_match", "heartbeat", "completion"] {
        assert!(all.contains(&kind), "all: {all:?}");
    }
    let (result, _) = under_policy(NotificationPolicy::Result, 0).await;
    assert_eq!(kinds(&result), ["completion"], "result: completions only");
    let (error_ok, _) = under_policy(NotificationPolicy::Error, 0).await;
    assert!(
        error_ok.is_empty(),
        "error: a clean exit is muted: {error_ok:#?}"
    );
    let (error_failed, _) = under_policy(NotificationPolicy::Error, 3).await;
    let [
        Event::Completion {
            exit_code,
            completion_reason,
            ..
        },
    ] = error_failed.as_slice()
    else {
        panic!("error: the failed completion only: {error_failed:#?}")
    };
    assert_eq!(
        (*exit_code, *completion_reason),
        (Some(3), CompletionReason::Exited)
    );
    let (off, stream) = under_policy(NotificationPolicy::Off, 3).await;
    assert!(off.is_empty(), "off: nothing queued: {off:#?}");
    let stream = kinds(&stream);
    for kind in ["watch_match", "heartbeat", "completion"] {
        assert!(
            stream.contains(&kind),
            "off: subscribe still sees {kind}: {stream:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b30_watch_and_heartbeat_outputs_go_through_the_pipeline() {
    const GHP: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
    const GHP_MASKED: &str = "ghp_ab...6789";
    let fx = Fixture::with(|c: &mut RegistryConfig| c.heartbeat_floor = Duration::from_secs(1));
    let id = watcher(&fx, "w").await;
    // The log answer is masked too, so the test waits for the masked line.
    fx.registry
        .submit(id.as_str(), &format!("ERROR token {GHP}"))
        .await
        .expect("submit");
    seen(&fx, &id, &format!("ERROR token {GHP_MASKED}")).await;
    settle(&fx, &id).await;
    let beating = fx
        .spawn(SpawnRequest {
            command: format!("echo token {GHP}; read -r _"),
            task_id: "h".to_owned(),
            heartbeat_seconds: Some(1),
            ..SpawnRequest::default()
        })
        .await;
    let watched = drain_until(&fx, "w", Duration::from_secs(5), |e| !e.is_empty()).await;
    let beats = drain_until(&fx, "h", Duration::from_secs(10), |e| !e.is_empty()).await;
    let Event::WatchMatch { output, .. } = &watched[0] else {
        panic!("{watched:#?}")
    };
    assert_eq!(output, &format!("ERROR token {GHP_MASKED}"));
    let Event::Heartbeat {
        output, command, ..
    } = &beats[0]
    else {
        panic!("{beats:#?}")
    };
    assert_eq!(output, &format!("token {GHP_MASKED}\n"));
    assert!(
        !command.contains(GHP) && command.contains(GHP_MASKED),
        "{command}"
    );
    let rendered = render_events(&[watched, beats].concat());
    assert!(!rendered.contains(GHP), "{rendered}");
    fx.registry.close_stdin(id.as_str()).await.expect("close");
    fx.registry
        .close_stdin(beating.session_id.as_str())
        .await
        .expect("close");
    fx.done(&id).await;
    fx.done(&beating.session_id).await;
    fx.assert_groups_gone().await;
}
