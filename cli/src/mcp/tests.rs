//! Unit tests of `terminal` argument validation, the schemas and the result types.

use serde_json::json;

use rmcp::model::JsonObject;

use super::terminal_request;

fn args(value: serde_json::Value) -> JsonObject {
    value
        .as_object()
        .cloned()
        .expect("test arguments are an object")
}

fn check_err(value: serde_json::Value, needle: &str) {
    let err = terminal_request(&args(value)).expect_err("must be refused");
    assert!(err.contains(needle), "`{needle}` missing from: {err}");
}

#[test]
fn foreground_with_notify_names_background_true() {
    check_err(
        json!({"command": "make", "notify": true}),
        "background=true",
    );
    check_err(
        json!({"command": "make", "notify": ["done"]}),
        "background=true",
    );
    check_err(
        json!({"command": "make", "heartbeat": 60}),
        "background=true",
    );
    check_err(json!({"command": "make", "pty": true}), "background=true");
    check_err(
        json!({"command": "make", "persist_on_release": true}),
        "background=true",
    );
}

#[test]
fn b21_bad_heartbeat_values_are_refused_with_the_rule() {
    for bad in [json!(-1), json!(1.5), json!(true), json!("60")] {
        check_err(
            json!({"command": "x", "background": true, "heartbeat": bad}),
            "0 disables",
        );
    }
}

#[test]
fn heartbeat_zero_is_off_and_valid() {
    let req = terminal_request(&args(
        json!({"command": "x", "background": true, "heartbeat": 0}),
    ))
    .expect("0 is valid");
    assert_eq!(req.heartbeat, None);
}

#[test]
fn b20_notify_list_becomes_watch_patterns_and_the_exit_still_notifies() {
    let req = terminal_request(&args(
        json!({"command": "x", "background": true, "notify": ["ERROR", "ready"]}),
    ))
    .expect("a list is valid");
    assert!(req.notify);
    assert_eq!(req.watch, ["ERROR", "ready"]);
}

#[test]
fn notify_of_another_type_is_refused() {
    check_err(
        json!({"command": "x", "background": true, "notify": 3}),
        "list of output patterns",
    );
}

#[test]
fn the_action_schema_lists_every_action_in_order() {
    let schema = super::args::input_schema("process");
    let listed: Vec<&str> = schema["properties"]["action"]["enum"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_str)
        .collect();
    assert_eq!(listed, super::ACTIONS);
}

#[test]
fn results_serialise_only_what_they_carry() {
    let refused = super::results::to_value(&super::TerminalResult::refused("no"));
    assert_eq!(
        refused,
        json!({"output": "", "exit_code": -1, "error": "no"})
    );
    let failed = super::results::Common::failed_value("bad");
    assert_eq!(failed, json!({"status": "error", "error": "bad"}));
}
