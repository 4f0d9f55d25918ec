//! `herd doctor`'s reading of the daemon's answers: the lines they give, and an
//! answer that does not read as the protocol says failing by method and field.

use serde_json::{Value, json};

use super::*;

fn hello() -> HelloAnswer {
    HelloAnswer {
        protocol: 1,
        daemon: "0.1.0".to_owned(),
        pid: 42,
        home: "/h".to_owned(),
        capabilities: Vec::new(),
    }
}

/// What [`status_lines`] says of `answer`, and whether it read.
fn status_of(answer: Value) -> (bool, Vec<(&'static str, String)>) {
    let mut lines = Vec::new();
    let read = status_lines(
        &hello(),
        Ok(answer),
        Path::new("/h/run/herd.sock"),
        &mut |level, what| lines.push((level, what)),
    );
    (read, lines)
}

/// A `status` answer as this daemon writes it.
fn status_answer() -> Value {
    let mut answer = serde_json::to_value(herd_protocol::answers::StatusAnswer {
        pid: 42,
        version: "0.1.0".to_owned(),
        home: "/h".to_owned(),
        running: 3,
        finished: 4,
        supervisor: "shim".to_owned(),
        containment: ContainmentReport {
            kind: "cgroup".to_owned(),
            detail: "delegated".to_owned(),
        },
        connections: 1,
        restore: RestoreSummary::default(),
        log: DaemonLogReport::default(),
    })
    .expect("a status answer serialises");
    answer["log"]["path"] = json!("/h/daemon.log");
    answer
}

#[test]
fn a_status_answer_gives_the_daemon_restore_log_supervisor_and_containment_lines() {
    let (read, lines) = status_of(status_answer());
    assert!(read);
    let texts: Vec<String> = lines.iter().map(|(l, w)| format!("{l} {w}")).collect();
    assert_eq!(
        texts,
        [
            "ok daemon pid 42 version 0.1.0 (protocol 1) serving /h, 3 running, 4 finished sessions, socket /h/run/herd.sock",
            "ok restore at start: 0 re-attached to their supervisor, 0 finished while no daemon ran, 0 lost with their supervisor, 0 re-adopted without one, 0 closed as lost, 0 closed (pid reused), 0 already finished",
            "ok daemon log /h/daemon.log (rotated at 0 MiB, 0 files)",
            "ok jobs run under their own herd-shim and outlive the daemon",
            "ok containment: cgroup; delegated",
        ]
    );
}

#[test]
fn a_status_answer_without_a_required_field_fails_naming_the_method_and_the_field() {
    // A fake answer: a real daemon cannot send it, as it writes `status` from
    // herd-protocol's StatusAnswer, which always has `running`.
    let mut answer = status_answer();
    answer
        .as_object_mut()
        .expect("the answer is an object")
        .remove("running");
    let (read, lines) = status_of(answer);
    assert!(!read);
    let [(level, what)] = lines.as_slice() else {
        panic!("one line: {lines:?}");
    };
    assert_eq!(*level, "fail");
    assert!(what.contains("`status`"), "{what}");
    assert!(what.contains("missing field `running`"), "{what}");
}

#[test]
fn a_status_answer_with_a_mistyped_field_fails_naming_the_method_and_the_field() {
    // A fake answer, as above: the daemon writes `running` as a number.
    let mut answer = status_answer();
    answer["running"] = json!("three");
    let (read, lines) = status_of(answer);
    assert!(!read);
    let [(level, what)] = lines.as_slice() else {
        panic!("one line: {lines:?}");
    };
    assert_eq!(*level, "fail");
    assert!(what.contains("`status`"), "{what}");
    assert!(what.contains("field `running`"), "{what}");
}
