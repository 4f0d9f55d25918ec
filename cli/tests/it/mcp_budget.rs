//! `herd mcp` answers fit an agent's budget: the head and tail of a long
//! output in whole lines with the omitted range and the calls that read it, a page
//! cap whatever `limit` asks, and `search` over the whole log.

use serde_json::json;

use crate::mcp::{call, connect, session_id};
use crate::support::Env;

/// The character count of a JSON string field.
fn chars(value: &serde_json::Value) -> usize {
    value.as_str().unwrap_or_default().chars().count()
}

/// A 10,000-line build that fails with its one error in the middle.
const BUILD: &str = "for i in $(seq 1 10000); do echo \"compiling unit $i of the build\"; \
     if [ $i = 5000 ]; then echo 'error[E0308]: mismatched types in unit 5000'; fi; done; exit 101";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b8_b39_mcp_a_10000_line_failing_build_fits_the_budget_and_search_finds_the_error() {
    let env = Env::new();
    let client = connect(&env).await;

    let (done, _, _) = call(
        &client,
        "terminal",
        json!({"command": BUILD, "timeout": 40}),
    )
    .await;
    assert_eq!(done["exit_code"], json!(101), "{done}");
    let output = done["output"].as_str().unwrap_or_default();
    assert!(
        chars(&done["output"]) <= 8_000,
        "{} characters",
        chars(&done["output"])
    );
    assert!(
        output.starts_with("compiling unit 1 of the build\n"),
        "{output}"
    );
    assert!(
        output.ends_with("compiling unit 10000 of the build"),
        "{output}"
    );
    assert!(
        !output.contains("error[E0308]"),
        "the middle is left out: {output}"
    );
    assert_eq!(done["total_lines"], json!(10_001), "{done}");
    let marker = output
        .lines()
        .find(|l| l.contains("lines omitted"))
        .expect("a line says how many lines were left out");
    assert!(
        marker.contains(&format!("{} lines omitted (lines ", done["omitted_lines"]))
            && marker.contains("action=\"log\"")
            && marker.contains("action=\"search\""),
        "{marker}"
    );
    for line in output.lines() {
        assert!(
            line.starts_with("compiling unit ") && line.ends_with(" of the build")
                || line == marker,
            "a whole line: {line}"
        );
    }
    let id = session_id(&done);

    // search: a regex, and the same text as written, find line 5001.
    for args in [
        json!({"pattern": "error\\[E[0-9]+\\]"}),
        json!({"pattern": "error[E0308]", "literal": true, "context": 1}),
    ] {
        let mut args = args;
        args["action"] = json!("search");
        args["session_id"] = json!(id);
        let (found, _, is_error) = call(&client, "process", args.clone()).await;
        assert!(!is_error, "{args}: {found}");
        assert_eq!(found["matches"], json!(1), "{found}");
        let text = found["output"].as_str().unwrap_or_default();
        assert!(
            text.contains("5001: error[E0308]: mismatched types in unit 5000")
                && text.contains("5000- compiling unit 5000 of the build"),
            "{found}"
        );
    }
    let (bad, _, is_error) = call(
        &client,
        "process",
        json!({"action": "search", "session_id": id, "pattern": "error["}),
    )
    .await;
    assert!(
        is_error
            && bad["error"]
                .as_str()
                .unwrap_or_default()
                .contains("literal=true"),
        "{bad}"
    );

    // A page asking for every line is capped, whichever end it starts from.
    for (offset, says) in [
        (json!(null), "the lines before are offset="),
        (json!(0), "next page is offset="),
    ] {
        let (page, _, is_error) = call(
            &client,
            "process",
            json!({"action": "log", "session_id": id, "limit": 10_001, "offset": offset}),
        )
        .await;
        assert!(!is_error, "{page}");
        assert!(
            chars(&page["output"]) <= 40_000,
            "{} characters",
            chars(&page["output"])
        );
        assert_eq!(page["page_cut"], json!(true), "{page}");
        assert!(
            page["note"].as_str().unwrap_or_default().contains(says),
            "{page}"
        );
    }
}

/// `read` until its output contains `needle` (20 s at most); everything read.
async fn read_until(client: &crate::mcp::Mcp, id: &str, needle: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut seen = String::new();
    while std::time::Instant::now() < deadline {
        let (read, _, is_error) = call(
            client,
            "process",
            json!({"action": "read", "session_id": id}),
        )
        .await;
        assert!(!is_error, "{read}");
        seen.push_str(read["output"].as_str().unwrap_or_default());
        if seen.contains(needle) {
            return seen;
        }
    }
    panic!("`{needle}` never came: {seen}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_submit_answers_the_reply_and_read_returns_only_what_is_new() {
    let env = Env::new();
    let client = connect(&env).await;
    let (started, _, _) = call(
        &client,
        "terminal",
        json!({"command": "python3 -i -q", "background": true, "pty": true}),
    )
    .await;
    let id = session_id(&started);
    read_until(&client, &id, ">>>").await;

    // One call is one exchange: the reply comes back with the write.
    let (replied, _, is_error) = call(
        &client,
        "process",
        json!({"action": "submit", "session_id": id, "data": "print(6*7)", "yield_ms": 3000}),
    )
    .await;
    assert!(!is_error, "{replied}");
    let reply = replied["output"].as_str().unwrap_or_default();
    assert!(reply.lines().any(|l| l.trim() == "42"), "{replied}");
    assert_eq!(replied["status"], json!("running"), "{replied}");

    // What was read is not read again, by this server or the next one of the owner.
    drop(client);
    let client = connect(&env).await;
    let (again, _, _) = call(
        &client,
        "process",
        json!({"action": "submit", "session_id": id, "data": "print('x' * 3)", "yield_ms": 3000}),
    )
    .await;
    let text = again["output"].as_str().unwrap_or_default();
    assert!(text.lines().any(|l| l.trim() == "xxx"), "{again}");
    assert!(
        !text.lines().any(|l| l.trim() == "42"),
        "read again: {again}"
    );

    // A write to a finished job is an error saying how it ended.
    let (killed, notices, _) = call(
        &client,
        "process",
        json!({"action": "kill", "session_id": id}),
    )
    .await;
    assert!(killed.to_string().contains("kill"), "{killed}");
    let (refused, more, is_error) = call(
        &client,
        "process",
        json!({"action": "submit", "session_id": id, "data": "1"}),
    )
    .await;
    let error = refused["error"].as_str().unwrap_or_default();
    assert!(
        is_error && error.contains("already ended") && error.contains("nothing was written"),
        "{refused}"
    );
    // How it ended: the kill's signal, not a bare status.
    assert!(error.contains("killed by signal"), "{refused}");
    // The kill the agent asked for is not also a notice (the answer said it).
    let (_, last, _) = call(&client, "process", json!({"action": "list"})).await;
    let notices: Vec<String> = notices.into_iter().chain(more).chain(last).collect();
    assert!(!notices.iter().any(|n| n.contains(&id)), "{notices:?}");
}

/// A line that is not JSON is answered with a JSON-RPC parse error (−32700), and the
/// server goes on answering the requests after it.
#[test]
fn mcp_a_line_that_is_not_json_gets_a_parse_error_and_the_server_goes_on() {
    use std::io::Write;
    let env = Env::new();
    let (mut child, mut stdin, mut lines) = crate::mcp::raw_server(&env, "agent-raw");
    writeln!(stdin, "this is not json").expect("the server reads");
    let first: serde_json::Value =
        serde_json::from_str(&lines.next().expect("a line").expect("readable")).expect("JSON-RPC");
    assert_eq!(first["error"]["code"], json!(-32700), "{first}");
    let list = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"});
    writeln!(stdin, "{list}").expect("the server reads");
    let answer = crate::mcp::response_to(&mut lines, 7);
    assert!(answer["result"]["tools"].is_array(), "{answer}");
    drop(stdin);
    child.wait().expect("the server exits");
}

/// A prompt written in two pieces (`>`, then `>> ` once the test says so) is shown
/// whole by the read after its second piece: a read that saw only `>` does not count
/// the unfinished line as read (the flake of the REPL test above, made certain), and
/// the complete line before it is not shown again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn b39_mcp_read_never_passes_an_unfinished_last_line() {
    let env = Env::new();
    let go = env.scratch().join("go");
    let client = connect(&env).await;
    let command = format!(
        "echo 'a whole line'; printf '>'; while [ ! -e {go} ]; do sleep 0.02; done; printf '>> '; exec sleep 60",
        go = go.display()
    );
    let (started, _, _) = call(
        &client,
        "terminal",
        json!({"command": command, "background": true}),
    )
    .await;
    let id = session_id(&started);
    let first = read_until(&client, &id, ">").await;
    assert!(first.contains("a whole line"), "{first}");
    assert!(!first.contains(">>"), "{first}");

    std::fs::write(&go, b"").expect("the scratch directory is writable");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let prompt = loop {
        let (read, _, is_error) = call(
            &client,
            "process",
            json!({"action": "read", "session_id": id}),
        )
        .await;
        assert!(!is_error, "{read}");
        let output = read["output"].as_str().unwrap_or_default().to_owned();
        // Until the second piece lands, the read shows the first one again.
        if output != ">" {
            break output;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the prompt never grew: {read}"
        );
    };
    assert_eq!(prompt, ">>> ", "the next read shows the prompt whole");
    let (killed, _, _) = call(
        &client,
        "process",
        json!({"action": "kill", "session_id": id}),
    )
    .await;
    assert!(killed.to_string().contains("kill"), "{killed}");
}
