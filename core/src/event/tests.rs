//! Unit tests for event rendering.

use std::path::PathBuf;

use super::*;
use herd_hooks::Shown;

fn completion(id: &str, code: i32, cut: bool) -> Event {
    Event::Completion {
        session_id: SessionId::from_test(id),
        task_id: "t".to_owned(),
        owner_task_id: "t".to_owned(),
        session_key: None,
        command: Shown::herd_text("make test"),
        exit_code: Some(code),
        signal: None,
        completion_reason: CompletionReason::Exited,
        termination_source: None,
        output: Shown::herd_text("done"),
        output_cut: cut,
        log_path: PathBuf::from("/h/logs/sessions/x.log"),
        started_at: "2026-01-01T00:00:00Z".to_owned(),
        finished_at: "2026-01-01T00:00:01Z".to_owned(),
        handoff_note: None,
        descendants_alive: Vec::new(),
        leftovers: Vec::new(),
        bytes_not_kept: 0,
        runs: None,
    }
}

#[test]
fn b19_single_completion_names_status_and_output() {
    let text = render_events(&[completion("proc_000000000001", 0, false)]);
    assert_eq!(
        text,
        "[IMPORTANT: Background process proc_000000000001 completed normally (exit code 0).\nCommand: make test\nOutput:\ndone]"
    );
}

#[test]
fn b8_cut_completion_names_the_log() {
    let text = render_events(&[completion("proc_000000000001", 2, true)]);
    assert!(text.contains("exited (exit code 2)"), "{text}");
    assert!(
        text.contains("the full output is in /h/logs/sessions/x.log"),
        "{text}"
    );
}

#[test]
fn b39_two_completions_render_as_one_batch() {
    let text = render_events(&[
        completion("proc_000000000001", 0, false),
        completion("proc_000000000002", 1, false),
    ]);
    assert!(
        text.starts_with("[IMPORTANT: 2 background processes completed."),
        "{text}"
    );
    assert_eq!(
        text.matches("Background process proc_").count(),
        2,
        "{text}"
    );
}

#[test]
fn ages_are_compact() {
    assert_eq!(format_age(45), "45s");
    assert_eq!(format_age(18 * 60), "18m");
    assert_eq!(format_age(18 * 60 + 5), "18m5s");
    assert_eq!(format_age(7200), "2h");
    assert_eq!(format_age(7380), "2h3m");
}

fn killed(id: &str) -> Event {
    let mut event = completion(id, 0, false);
    if let Event::Completion {
        exit_code,
        signal,
        completion_reason,
        termination_source,
        ..
    } = &mut event
    {
        *exit_code = None;
        *signal = Some(15);
        *completion_reason = CompletionReason::Killed;
        *termination_source = Some(KillSource::ProcessKill);
    }
    event
}

#[test]
fn b19_killed_completion_names_the_source_and_the_signal() {
    let text = render_events(&[killed("proc_000000000001")]);
    assert!(
        text.starts_with(
            "[IMPORTANT: Background process proc_000000000001 terminated by process_kill (signal 15, SIGTERM).\n"
        ),
        "{text}"
    );
}

#[test]
fn b25_handoff_note_is_attributed() {
    let mut event = completion("proc_000000000001", 0, false);
    if let Event::Completion { handoff_note, .. } = &mut event {
        *handoff_note = Some("the nightly build; report failures".to_owned());
    }
    let text = render_events(&[event]);
    assert!(
        text.contains(
            "(exit code 0).\nHanded off to you by a subagent before it finished. Purpose: the nightly build; report failures\nCommand: make test"
        ),
        "{text}"
    );
}

#[test]
fn b21_heartbeat_text() {
    let text = render_events(&[Event::Heartbeat {
        session_id: SessionId::from_test("proc_000000000001"),
        task_id: "t".to_owned(),
        owner_task_id: "t".to_owned(),
        session_key: None,
        command: Shown::herd_text("make"),
        seq: 3,
        interval: 60,
        elapsed: 18 * 60 + 5,
        output: Shown::herd_text("step 9"),
        started_at: "2026-01-01T00:00:00Z".to_owned(),
    }]);
    assert_eq!(
        text,
        "[Background process proc_000000000001 heartbeat #3 — still running after 18m5s (next in 60s when there is new output; you will also be told when it exits).\nCommand: make\nOutput since last heartbeat:\nstep 9]"
    );
}

#[test]
fn b20_watch_texts() {
    let matched = Event::WatchMatch {
        session_id: SessionId::from_test("proc_000000000001"),
        task_id: "t".to_owned(),
        owner_task_id: "t".to_owned(),
        session_key: None,
        command: Shown::herd_text("tail -f app.log"),
        pattern: "ERROR".to_owned(),
        output: Shown::herd_text("ERROR disk full"),
        suppressed: 4,
        matched_at: "2026-12-02T07:00:00Z".to_owned(),
    };
    let tripped = Event::WatchOverflowTripped {
        message: "paused".to_owned(),
    };
    let text = render_events(&[matched, tripped]);
    assert_eq!(
        text,
        "[IMPORTANT: Background process proc_000000000001 matched watch pattern \"ERROR\".\nCommand: tail -f app.log\nMatched output:\nERROR disk full\n(4 earlier matches were suppressed by rate limit)]\n\n[IMPORTANT: paused]"
    );
}

#[test]
fn b39_a_watch_event_splits_completion_batches() {
    let text = render_events(&[
        completion("proc_000000000001", 0, false),
        Event::WatchOverflowReleased {
            suppressed: 2,
            message: "resumed".to_owned(),
        },
        completion("proc_000000000002", 1, false),
        completion("proc_000000000003", 1, false),
    ]);
    assert_eq!(
        text.matches("background processes completed").count(),
        1,
        "{text}"
    );
    assert!(
        text.contains("[IMPORTANT: resumed]\n\n[IMPORTANT: 2 background processes completed."),
        "{text}"
    );
}
