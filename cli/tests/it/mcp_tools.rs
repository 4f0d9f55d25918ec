//! The MCP tools as clients see them: `tools/list` of a real `herd mcp` server,
//! for each MCP revision whose handshake changes it, equals the published copy
//! `docs/protocol/mcp-tools.json` (compared as JSON values, so key order is free).
//! The tools' schemas come from typed structs (`cli/src/mcp/args.rs`,
//! `cli/src/mcp/results.rs`); a change to a name, a description, a bound or what is
//! required fails here until the copy is written again with
//! `HERD_PROTOCOL_WRITE=1 cargo test -p herd-cli --test it mcp_tools`.

use std::io::Write;
use std::path::PathBuf;

use serde_json::{Map, Value, json};

use crate::mcp::{raw_server_at, response_to};
use crate::support::Env;

/// The revisions whose `tools/list` differ: 2025-06-18 (the plain list) and
/// 2025-11-25 (the tasks extension's `execution` on `terminal`).
const REVISIONS: [&str; 2] = ["2025-06-18", "2025-11-25"];

fn published() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/protocol/mcp-tools.json")
}

/// `tools/list`'s `tools` of a fresh server after a handshake at `revision`.
fn tools_at(env: &Env, revision: &str) -> Value {
    let (mut child, mut stdin, mut lines) = raw_server_at(env, "agent-tools", revision);
    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    writeln!(stdin, "{list}").expect("the server reads");
    let listed = response_to(&mut lines, 2);
    drop(stdin);
    child.wait().expect("the server exits");
    listed["result"]["tools"].clone()
}

#[test]
fn b39_mcp_tools_list_is_the_published_contract() {
    let env = Env::new();
    let seen: Map<String, Value> = REVISIONS
        .iter()
        .map(|revision| ((*revision).to_owned(), tools_at(&env, revision)))
        .collect();
    let seen = Value::Object(seen);
    let path = published();
    if std::env::var_os("HERD_PROTOCOL_WRITE").is_some_and(|v| v == "1") {
        let mut text = serde_json::to_string_pretty(&seen).expect("JSON");
        text.push('\n');
        std::fs::write(&path, text).expect("docs/protocol is writable");
        return;
    }
    let text = std::fs::read_to_string(&path).expect("docs/protocol/mcp-tools.json exists");
    let pinned: Value = serde_json::from_str(&text).expect("the published copy is JSON");
    for revision in REVISIONS {
        let (now, then) = (&seen[revision], &pinned[revision]);
        let names = |tools: &Value| -> Vec<String> {
            tools
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t["name"].as_str().map(str::to_owned))
                .collect()
        };
        assert_eq!(names(now), names(then), "{revision}: the tool names");
        for (tool, old) in now
            .as_array()
            .into_iter()
            .flatten()
            .zip(then.as_array().into_iter().flatten())
        {
            for key in ["inputSchema", "outputSchema", "annotations", "description"] {
                assert_eq!(
                    tool[key], old[key],
                    "{revision}: {}'s {key} changed; if meant, write the copy again \
                     (HERD_PROTOCOL_WRITE=1) and say why in the commit",
                    tool["name"]
                );
            }
        }
        assert_eq!(now, then, "{revision}: tools/list changed");
    }
}
