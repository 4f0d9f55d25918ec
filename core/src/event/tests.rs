//! Unit tests for event rendering.

use std::path::PathBuf;

use super::*;

fn completion(id: &str, code: i32, cut: bool) -> Event {
    Event::Completion {
        session_id: SessionId::from_test(id),
        task_id: "t".to_owned(),
        owner_task_id: "t".to_owned(),
        session_key: None,
        command: "make test".to_owned(),
        exit_code: Some(code),
        signal: None,
        completion_reason: CompletionReason::Exited,
        termination_source: None,
        output: "done".to_owned(),
        output_cut: cut,
        log_path: PathBuf::from("/h/logs/sessions/x.log"),
        started_at: "2026-01-01T00:00:00Z".to_owned(),
        finished_at: "2026-01-01T00:00:01Z".to_owned(),
        handoff_note: None,
        descendants_alive: Vec::new(),
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
