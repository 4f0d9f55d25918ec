//! Property tests against the real daemon over its real socket: arbitrary JSON-RPC
//! traffic, and arbitrary numbers in `config.toml` for `herd ps`.
//!
//! Traffic: each case is one connection carrying a mix of requests for the
//! daemon's methods (with arbitrary params: wrong types, huge, negative and
//! fractional numbers, NUL bytes, `=` in environment names, missing and unknown
//! fields, positional params), notifications and garbage lines. Answers come in
//! order, so each line is followed by a read of its one answer, and a line that
//! must not be answered (a notification) by a sentinel `status` request whose
//! answer must be the next line read: an answered notification shows up as an
//! answer in the sentinel's place.
//!
//! The traffic is made safe to run, not tame: a spawn runs one of a few harmless
//! commands (whatever else the params say), `wait` is bounded by the daemon's
//! `wait_cap_seconds` (1 s here), and `shutdown`, `hello` and the streaming
//! methods are never sent, whatever a generated line says.
//!
//! Config: a random subset of the numeric keys with random values (in and out of
//! their documented ranges, of the wrong type, NaN and infinities). `herd ps` must
//! exit 0 when every value is in range and exit 2 naming a key otherwise, within a
//! deadline: never a panic, never "connection reset" (exit 3).
//!
//! Sized for CI (64 traffic cases, 128 config cases: seconds); `PROPTEST_CASES`
//! changes both.

use std::cell::RefCell;
use std::collections::HashSet;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::process::Stdio;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};
use serde_json::{Value, json};

use crate::support::{Env, alive, stderr, wait_until};

/// Traffic cases unless `PROPTEST_CASES` says otherwise (one to two seconds on an
/// idle machine; a `wait` on a running `sleep` costs up to its 0.2 s).
const TRAFFIC_CASES: u32 = 64;

/// Config cases unless `PROPTEST_CASES` says otherwise (a daemon start each, about
/// 30 ms).
const CONFIG_CASES: u32 = 128;

/// The methods the traffic calls (never `shutdown`, `hello` or a stream).
const METHODS: &[&str] = &[
    "spawn",
    "list",
    "lookup",
    "poll",
    "log",
    "log_chunk",
    "wait",
    "kill",
    "write",
    "submit",
    "close",
    "resize",
    "drain",
    "drain.ack",
    "drain.release",
    "adopt",
    "handoff",
    "status",
    "scope",
];

/// Methods a generated line may not call: they stop the daemon, restart the
/// handshake or take the connection over.
const FORBIDDEN: &[&str] = &["shutdown", "hello", "events.follow", "logs.follow"];

/// The commands a spawn may run.
const HARMLESS: &[&str] = &[
    "true",
    "echo hi",
    "exit 3",
    "printf 'a\\0b\\n'",
    "sleep 0.2",
    "echo $HOME; true",
];

/// Every error code the protocol documents.
fn is_documented_code(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602 | -32603 | -32004)
        || (-32019..=-32010).contains(&code)
}

/// The largest request line the daemon reads (`protocol::MAX_REQUEST_BYTES`).
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// Placeholders the runner fills in: a fresh id, the last spawned session's id, a
/// prefix of it, and a number literal JSON cannot hold as a value.
const ID: &str = "\u{1}id";
const LAST: &str = "\u{1}last";
const PREFIX: &str = "\u{1}prefix";
const RAW: &str = "\u{1}raw:";

/// Number literals that do not survive as an `f64` or `u64` (spliced into the
/// line as text).
const RAW_NUMBERS: &[&str] = &[
    "1e400",
    "-1e400",
    "18446744073709551616",
    "123456789012345678901234567890",
    "1e-400",
    "-0",
];

fn runner(default_cases: u32) -> TestRunner {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default_cases);
    TestRunner::new(Config {
        cases,
        // Shrinking re-runs cases against a live daemon: keep it short.
        max_shrink_iters: 64,
        failure_persistence: None,
        ..Config::default()
    })
}

fn string() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z_]{0,10}",
        2 => any::<String>(),
        1 => Just(String::new()),
        1 => Just("a\0b".to_owned()),
        1 => Just("A=B".to_owned()),
        1 => Just("proc_".to_owned()),
        1 => Just("proc_000000000000".to_owned()),
        3 => Just(LAST.to_owned()),
        1 => Just(PREFIX.to_owned()),
        1 => (0usize..70_000).prop_map(|n| "x".repeat(n)),
        1 => Just("\u{202e}\u{200b}\x1b[31m\r".to_owned()),
    ]
}

fn number() -> impl Strategy<Value = Value> {
    prop_oneof![
        any::<u64>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        (0u64..100).prop_map(Value::from),
        prop::sample::select(vec![
            json!(u64::MAX),
            json!(i64::MIN),
            json!(-1),
            json!(0),
            json!(1),
            json!(1e300),
            json!(1e18),
            json!(0.5),
            json!(-0.0),
            json!(65_536),
            json!(1_000_000_000_000_u64),
        ]),
        prop::sample::select(RAW_NUMBERS).prop_map(|raw| Value::String(format!("{RAW}{raw}"))),
    ]
}

/// Object keys: the daemon's own field names (so a random object can look like
/// real params) or anything.
fn key() -> impl Strategy<Value = String> {
    prop_oneof![
        prop::sample::select(vec![
            "id",
            "owner",
            "command",
            "cwd",
            "env",
            "lease",
            "limit",
            "state",
            "data",
            "rows",
            "cols",
            "from",
            "to",
            "timeout_seconds",
            "pty",
            "all",
        ])
        .prop_map(str::to_owned),
        string(),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        number(),
        string().prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(key(), inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// What a known field holds when it holds the right type.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Id,
    Text,
    Owner,
    Command,
    Cwd,
    Bool,
    Count,
    Seconds,
    EnvPairs,
    EnvMap,
    Names,
    Small,
    State,
}

fn env_name() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Z_]{1,8}",
        1 => Just(String::new()),
        1 => Just("A=B".to_owned()),
        1 => Just("A\0B".to_owned()),
        1 => string(),
    ]
}

fn typed(kind: Kind, scratch: String) -> BoxedStrategy<Value> {
    match kind {
        Kind::Id => prop_oneof![
            4 => Just(json!(LAST)),
            1 => Just(json!(PREFIX)),
            2 => string().prop_map(Value::from),
        ]
        .boxed(),
        Kind::Text => string().prop_map(Value::from).boxed(),
        Kind::Owner => prop_oneof![
            3 => "[a-z]{1,6}".prop_map(Value::from),
            1 => string().prop_map(Value::from),
        ]
        .boxed(),
        Kind::Command => prop::sample::select(HARMLESS).prop_map(Value::from).boxed(),
        Kind::Cwd => prop_oneof![
            3 => Just(Value::from(scratch)),
            1 => Just(json!("/nonexistent/dir")),
            1 => Just(json!("/etc/passwd")),
            1 => string().prop_map(Value::from),
        ]
        .boxed(),
        Kind::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Kind::Count | Kind::Small => number().boxed(),
        Kind::Seconds => prop_oneof![
            3 => (0.01f64..0.5).prop_map(Value::from),
            1 => number(),
        ]
        .boxed(),
        Kind::EnvPairs => prop::collection::vec(
            prop_oneof![
                4 => (env_name(), string()).prop_map(|(k, v)| json!([k, v])),
                1 => env_name().prop_map(|k| json!([k])),
                1 => json_value(),
            ],
            0..4,
        )
        .prop_map(Value::Array)
        .boxed(),
        Kind::EnvMap => prop::collection::btree_map(env_name(), string(), 0..4)
            .prop_map(|m| json!(m))
            .boxed(),
        Kind::Names => prop::collection::vec(string().prop_map(Value::from), 0..3)
            .prop_map(Value::Array)
            .boxed(),
        Kind::State => prop_oneof![
            3 => prop::sample::select(vec!["running", "finished", "all", "done"]).prop_map(Value::from),
            1 => string().prop_map(Value::from),
        ]
        .boxed(),
    }
}

/// A value of the right type and in range: what a correct client sends.
fn sane(kind: Kind, scratch: String) -> BoxedStrategy<Value> {
    match kind {
        Kind::Id => prop_oneof![
            4 => Just(json!(LAST)),
            1 => Just(json!(PREFIX)),
        ]
        .boxed(),
        Kind::Text => "[a-z ]{0,10}".prop_map(Value::from).boxed(),
        Kind::Owner => "[a-c]{1,2}".prop_map(Value::from).boxed(),
        Kind::Command => prop::sample::select(HARMLESS).prop_map(Value::from).boxed(),
        Kind::Cwd => Just(Value::from(scratch)).boxed(),
        Kind::Bool => any::<bool>().prop_map(Value::from).boxed(),
        Kind::Count => (0u64..100).prop_map(Value::from).boxed(),
        Kind::Small => (1u64..200).prop_map(Value::from).boxed(),
        Kind::Seconds => (0.01f64..0.5).prop_map(Value::from).boxed(),
        Kind::EnvPairs => prop::collection::vec(("[A-Z]{1,6}", "[a-z]{0,6}"), 0..3)
            .prop_map(|pairs| json!(pairs))
            .boxed(),
        Kind::EnvMap => prop::collection::btree_map("[A-Z]{1,6}", "[a-z]{0,6}", 0..3)
            .prop_map(|m| json!(m))
            .boxed(),
        Kind::Names => prop::collection::vec("[a-z]{1,5}".prop_map(Value::from), 0..3)
            .prop_map(Value::Array)
            .boxed(),
        Kind::State => prop::sample::select(vec!["running", "finished", "all"])
            .prop_map(Value::from)
            .boxed(),
    }
}

/// The fields of each method, and whether each is required.
fn fields(method: &str) -> &'static [(&'static str, Kind, bool)] {
    use Kind::*;
    match method {
        "spawn" => &[
            ("command", Command, true),
            ("owner", Owner, true),
            ("task_id", Text, false),
            ("cwd", Cwd, false),
            ("env", EnvPairs, false),
            ("forward_env", Names, false),
            ("caller_env", EnvMap, false),
            ("pty", Bool, false),
            ("notify", Bool, false),
            ("watch", Names, false),
            ("heartbeat_seconds", Count, false),
            ("completion_output_chars", Count, false),
        ],
        "list" => &[
            ("owner", Owner, false),
            ("all", Bool, false),
            ("state", State, false),
            ("since_seconds", Count, false),
            ("limit", Count, false),
        ],
        "lookup" | "poll" | "kill" | "adopt" => &[("id", Id, true)],
        "log" => &[
            ("id", Id, true),
            ("offset", Count, false),
            ("limit", Count, false),
        ],
        "log_chunk" => &[
            ("id", Id, true),
            ("from_byte", Count, false),
            ("max_bytes", Count, false),
        ],
        "wait" => &[("id", Id, true), ("timeout_seconds", Seconds, false)],
        "write" | "submit" | "close" => &[("id", Id, true), ("data", Text, false)],
        "resize" => &[
            ("id", Id, true),
            ("rows", Small, true),
            ("cols", Small, true),
        ],
        "drain" => &[
            ("owner", Owner, true),
            ("lease", Bool, false),
            ("answered", Names, false),
        ],
        "drain.ack" | "drain.release" => &[("lease", Count, true)],
        "handoff" => &[
            ("id", Id, true),
            ("from", Owner, true),
            ("to", Owner, false),
            ("note", Text, false),
        ],
        _ => &[],
    }
}

/// Params for `method`, one of: what a correct client sends; its own fields, each
/// present or not, of the right type or not, with wild values, sometimes with an
/// unknown field; anything at all; none.
fn params(method: &'static str, scratch: String) -> BoxedStrategy<Option<Value>> {
    let correct: Vec<BoxedStrategy<Option<(String, Value)>>> = fields(method)
        .iter()
        .map(|&(name, kind, required)| {
            let value = sane(kind, scratch.clone()).prop_map(move |v| Some((name.to_owned(), v)));
            if required {
                value.boxed()
            } else {
                prop_oneof![value, Just(None)].boxed()
            }
        })
        .collect();
    let wild: Vec<BoxedStrategy<Option<(String, Value)>>> = fields(method)
        .iter()
        .map(|&(name, kind, _)| {
            prop_oneof![
                4 => sane(kind, scratch.clone()).prop_map(move |v| Some((name.to_owned(), v))),
                3 => typed(kind, scratch.clone()).prop_map(move |v| Some((name.to_owned(), v))),
                1 => json_value().prop_map(move |v| Some((name.to_owned(), v))),
                2 => Just(None),
            ]
            .boxed()
        })
        .collect();
    let object = |fields: Vec<Option<(String, Value)>>, unknown: Option<(String, Value)>| {
        let mut map = serde_json::Map::new();
        for (k, v) in fields.into_iter().flatten().chain(unknown) {
            map.insert(k, v);
        }
        Some(Value::Object(map))
    };
    prop_oneof![
        5 => correct.prop_map(move |fields| object(fields, None)),
        5 => (wild, prop::option::weighted(0.15, (key(), json_value())))
            .prop_map(move |(fields, unknown)| object(fields, unknown)),
        1 => json_value().prop_map(Some),
        1 => Just(None),
    ]
    .boxed()
}

/// One request (or, without an id, a notification) as a JSON object.
fn request(scratch: String) -> impl Strategy<Value = Value> {
    let method = prop_oneof![
        10 => prop::sample::select(METHODS),
        1 => Just("no_such_method"),
    ];
    let id = prop_oneof![
        20 => Just(Some(json!(ID))),
        2 => Just(None),
        1 => Just(Some(Value::Null)),
        1 => json_value().prop_map(Some),
    ];
    let jsonrpc = prop_oneof![
        20 => Just(Some(json!("2.0"))),
        1 => Just(None),
        1 => json_value().prop_map(Some),
    ];
    (method, id, jsonrpc, any::<bool>()).prop_flat_map(
        move |(method, id, jsonrpc, wrong_method_type)| {
            params(method, scratch.clone()).prop_map(move |params| {
                let mut map = serde_json::Map::new();
                if let Some(v) = &jsonrpc {
                    map.insert("jsonrpc".into(), v.clone());
                }
                if let Some(v) = &id {
                    map.insert("id".into(), v.clone());
                }
                // Now and then the method is not a string at all.
                let method_value = if wrong_method_type && method == "no_such_method" {
                    json!(5)
                } else {
                    json!(method)
                };
                map.insert("method".into(), method_value);
                if let Some(p) = params {
                    map.insert("params".into(), p);
                }
                Value::Object(map)
            })
        },
    )
}

/// One line of traffic, before the runner fills in its placeholders.
#[derive(Debug, Clone)]
enum Line {
    Json(Value),
    Raw(Vec<u8>),
}

fn garbage() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        6 => prop::collection::vec(any::<u8>(), 0..200),
        6 => prop::sample::select(vec![
            "",
            "   ",
            "{",
            "[1, 2, 3]",
            "null",
            "\"text\"",
            "{}",
            "{\"id\": 1}",
            "{\"jsonrpc\": \"2.0\"}",
            "{\"jsonrpc\": \"1.0\", \"id\": 2, \"method\": \"list\"}",
            "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": 5}",
            "{\"jsonrpc\": \"2.0\", \"id\": 4, \"method\": \"list\", \"params\": {\"limit\": 1e400}}",
            "{\"jsonrpc\": \"2.0\", \"id\": 5, \"method\": \"list\"} trailing",
            "\u{feff}{\"jsonrpc\": \"2.0\", \"id\": 6, \"method\": \"status\"}",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        // Past the line limit: discarded and answered with the limit.
        1 => (0usize..3).prop_map(|n| vec![b'x'; MAX_REQUEST_BYTES + 1 + n]),
    ]
    .prop_map(|mut bytes| {
        bytes.retain(|&b| b != b'\n');
        bytes
    })
}

fn line(scratch: String) -> impl Strategy<Value = Line> {
    prop_oneof![
        8 => request(scratch).prop_map(Line::Json),
        1 => garbage().prop_map(Line::Raw),
    ]
}

/// One case: whether the connection says hello first, and its lines.
fn traffic(scratch: String) -> impl Strategy<Value = (bool, Vec<Line>)> {
    (
        prop::bool::weighted(0.9),
        prop::collection::vec(line(scratch), 1..16),
    )
}

/// What the daemon must do with a line.
#[derive(Debug, PartialEq)]
enum Expect {
    /// Nothing: a notification.
    Silence,
    /// One answer with this id and, when given, this error code.
    Answer { id: Value, code: Option<i64> },
}

/// What the protocol says the daemon does with `bytes` on a connection that has
/// (or has not) said hello.
fn expect(bytes: &[u8], greeted: bool) -> Expect {
    if bytes.len() > MAX_REQUEST_BYTES {
        return Expect::Answer {
            id: Value::Null,
            code: Some(-32012),
        };
    }
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return Expect::Answer {
            id: Value::Null,
            code: Some(-32700),
        };
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let is_request = value.get("jsonrpc").is_some_and(Value::is_string)
        && value.get("method").is_some_and(Value::is_string)
        && value.is_object();
    if !is_request || value["jsonrpc"] != "2.0" {
        return Expect::Answer {
            id,
            code: Some(-32600),
        };
    }
    if id.is_null() {
        return Expect::Silence;
    }
    Expect::Answer {
        id,
        code: (!greeted).then_some(-32013),
    }
}

/// A raw protocol connection.
struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    fn open(env: &Env) -> Conn {
        let stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
        stream
            .set_read_timeout(Some(Duration::from_secs(15)))
            .expect("a timeout can be set");
        Conn {
            reader: BufReader::new(stream.try_clone().expect("the stream clones")),
            writer: stream,
        }
    }

    fn send(&mut self, bytes: &[u8]) -> Result<(), TestCaseError> {
        let mut line = bytes.to_vec();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .map_err(|e| TestCaseError::fail(format!("the daemon stopped reading: {e}")))
    }

    fn recv(&mut self) -> Result<Value, TestCaseError> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err(TestCaseError::fail("the daemon closed the connection")),
            Ok(_) => serde_json::from_str(&line)
                .map_err(|e| TestCaseError::fail(format!("an answer is not JSON ({e}): {line:?}"))),
            Err(e) => Err(TestCaseError::fail(format!("no answer within 15 s ({e})"))),
        }
    }

    fn call(&mut self, id: Value, method: &str, params: Value) -> Result<Value, TestCaseError> {
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send(request.to_string().as_bytes())?;
        self.recv()
    }
}

/// State the cases share: the ids handed out and the sessions spawns started.
#[derive(Debug, Default)]
struct Shared {
    next_id: u64,
    started: Vec<String>,
}

impl Shared {
    fn last(&self) -> String {
        self.started
            .last()
            .cloned()
            .unwrap_or_else(|| "proc_000000000000".to_owned())
    }

    fn fresh_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

/// Replaces the placeholders in `value`, and a harmful method or command by a
/// harmless one.
fn fill(value: &mut Value, shared: &mut Shared) {
    match value {
        Value::String(s) if s == ID => *value = json!(shared.fresh_id()),
        Value::String(s) if s == LAST => *value = json!(shared.last()),
        Value::String(s) if s == PREFIX => {
            *value = json!(shared.last().chars().take(8).collect::<String>());
        }
        Value::Array(items) => items.iter_mut().for_each(|v| fill(v, shared)),
        Value::Object(map) => map.values_mut().for_each(|v| fill(v, shared)),
        _ => {}
    }
}

/// Makes a line safe to send: whatever it says, no forbidden method and no spawn
/// of a command outside [`HARMLESS`].
fn defuse(value: &mut Value) {
    let Some(map) = value.as_object_mut() else {
        return;
    };
    if map
        .get("method")
        .and_then(Value::as_str)
        .is_some_and(|m| FORBIDDEN.contains(&m))
    {
        map.insert("method".into(), json!("no_such_method"));
    }
    if map.get("method").and_then(Value::as_str) == Some("spawn")
        && let Some(Value::Object(params)) = map.get_mut("params")
        && let Some(command) = params.get_mut("command")
        && command.as_str().is_some_and(|c| !HARMLESS.contains(&c))
    {
        *command = json!("true");
    }
}

/// The bytes of a line: placeholders filled, raw number literals spliced in.
fn render(line: &Line, shared: &mut Shared) -> Vec<u8> {
    match line {
        Line::Json(value) => {
            let mut value = value.clone();
            fill(&mut value, shared);
            defuse(&mut value);
            let mut text = value.to_string();
            for raw in RAW_NUMBERS {
                text = text.replace(&format!("\"\\u0001raw:{raw}\""), raw);
            }
            text.into_bytes()
        }
        Line::Raw(bytes) => {
            // Garbage that happens to parse as a request is defused too.
            if let Ok(mut value) = serde_json::from_slice::<Value>(bytes)
                && value.is_object()
            {
                let before = value.clone();
                defuse(&mut value);
                if value != before {
                    return value.to_string().into_bytes();
                }
            }
            bytes.clone()
        }
    }
}

/// Whether an answer's id is the request's. A fractional number is compared to
/// within rounding: serde_json (without `float_roundtrip`) may parse the last digit
/// of a long float differently from how it printed it, and JSON-RPC ids should not
/// have fractions anyway.
fn same_id(got: &Value, sent: &Value) -> bool {
    match (got, sent) {
        (Value::Number(a), Value::Number(b)) if a.is_f64() || b.is_f64() => {
            let (a, b) = (
                a.as_f64().unwrap_or(f64::NAN),
                b.as_f64().unwrap_or(f64::NAN),
            );
            a == b || (a - b).abs() <= a.abs().max(b.abs()) * 1e-12
        }
        (Value::Array(a), Value::Array(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_id(x, y))
        }
        (Value::Object(a), Value::Object(b)) => {
            a.len() == b.len()
                && a.iter()
                    .all(|(k, x)| b.get(k).is_some_and(|y| same_id(x, y)))
        }
        _ => got == sent,
    }
}

/// Checks one answer against what was expected of its line.
fn check_answer(
    answer: &Value,
    id: &Value,
    code: Option<i64>,
    line: &[u8],
) -> Result<(), TestCaseError> {
    let shown = String::from_utf8_lossy(&line[..line.len().min(300)]).into_owned();
    prop_assert_eq!(&answer["jsonrpc"], "2.0", "answer {} to {}", answer, shown);
    prop_assert!(
        same_id(&answer["id"], id),
        "the answer's id is not the request's: {} to {}",
        answer,
        shown
    );
    let has_result = answer.get("result").is_some();
    let error = answer.get("error");
    prop_assert!(
        has_result != error.is_some(),
        "an answer has a result or an error, not both or neither: {} to {}",
        answer,
        shown
    );
    if let Some(error) = error {
        let got = error["code"].as_i64();
        prop_assert!(
            got.is_some_and(is_documented_code),
            "undocumented error code: {} to {}",
            answer,
            shown
        );
        prop_assert!(
            error["message"].as_str().is_some_and(|m| !m.is_empty()),
            "an error without a message: {}",
            answer
        );
        if let Some(code) = code {
            prop_assert_eq!(got, Some(code), "answer {} to {}", answer, shown);
        }
    } else if let Some(code) = code {
        return Err(TestCaseError::fail(format!(
            "expected error {code}, got {answer} to {shown}"
        )));
    }
    Ok(())
}

/// Runs one case on a connection of its own.
fn run_traffic(
    env: &Env,
    shared: &RefCell<Shared>,
    hello: bool,
    lines: &[Line],
) -> Result<(), TestCaseError> {
    let mut conn = Conn::open(env);
    if hello {
        let answer = conn.call(json!(0), "hello", json!({"protocol": 1, "client": "props"}))?;
        prop_assert!(answer["result"]["pid"].is_u64(), "hello failed: {}", answer);
    }
    for line in lines {
        let bytes = render(line, &mut shared.borrow_mut());
        let expected = expect(&bytes, hello);
        let is_spawn =
            serde_json::from_slice::<Value>(&bytes).is_ok_and(|v| v["method"] == "spawn");
        match expected {
            Expect::Answer { id, code } => {
                conn.send(&bytes)?;
                let answer = conn.recv()?;
                check_answer(&answer, &id, code, &bytes)?;
                if is_spawn && let Some(session) = answer["result"]["session_id"].as_str() {
                    shared.borrow_mut().started.push(session.to_owned());
                }
            }
            Expect::Silence => {
                conn.send(&bytes)?;
                let sentinel = json!(format!("sentinel-{}", shared.borrow_mut().fresh_id()));
                let answer = conn.call(sentinel.clone(), "status", json!({}))?;
                prop_assert_eq!(
                    &answer["id"],
                    &sentinel,
                    "a notification was answered: {} after {}",
                    answer,
                    String::from_utf8_lossy(&bytes)
                );
            }
        }
    }
    Ok(())
}

/// The ids of the sessions `list` shows in `state`.
fn listed(env: &Env, state: &str) -> Vec<String> {
    let mut conn = Conn::open(env);
    let hello = conn
        .call(json!(0), "hello", json!({"protocol": 1, "client": "props"}))
        .expect("hello answers");
    assert!(hello["result"]["pid"].is_u64(), "{hello}");
    let answer = conn
        .call(json!(1), "list", json!({"state": state}))
        .expect("list answers");
    answer["result"]["processes"]
        .as_array()
        .unwrap_or_else(|| panic!("list failed: {answer}"))
        .iter()
        .filter_map(|row| row["session_id"].as_str().map(str::to_owned))
        .collect()
}

#[test]
fn arbitrary_traffic_gets_one_documented_answer_per_request_and_leaves_nothing_behind() {
    let env = Env::new();
    // Every wait ends within a second, whatever its params say.
    std::fs::write(env.home().join("config.toml"), "wait_cap_seconds = 1\n").expect("writable");
    env.json(&["ps", "--json"]);
    let pid = env.daemon_pid().expect("the daemon runs");
    let scratch = env.scratch().display().to_string();
    let shared = RefCell::new(Shared::default());
    let result = runner(TRAFFIC_CASES).run(&traffic(scratch), |(hello, lines)| {
        run_traffic(&env, &shared, hello, &lines)?;
        prop_assert!(alive(pid), "the daemon died");
        Ok(())
    });
    if let Err(err) = result {
        panic!("{err}");
    }
    // Still the same daemon.
    let mut conn = Conn::open(&env);
    let hello = conn
        .call(json!(0), "hello", json!({"protocol": 1, "client": "props"}))
        .expect("hello answers");
    assert_eq!(hello["result"]["pid"], pid, "{hello}");
    drop(conn);
    // Every session the daemon has came from a spawn that was answered (none from
    // a notification or a refused spawn).
    let started: HashSet<String> = shared.borrow().started.iter().cloned().collect();
    let all = listed(&env, "all");
    let strangers: Vec<&String> = all.iter().filter(|id| !started.contains(*id)).collect();
    assert!(
        strangers.is_empty(),
        "sessions no answered spawn started: {strangers:?}"
    );
    // Nothing keeps running once what the test started is killed.
    let mut conn = Conn::open(&env);
    conn.call(json!(0), "hello", json!({"protocol": 1, "client": "props"}))
        .expect("hello answers");
    for id in listed(&env, "running") {
        let answer = conn
            .call(json!(1), "kill", json!({"id": id}))
            .expect("kill answers");
        assert!(
            answer["result"].is_object() || answer["error"]["code"] == -32004,
            "{answer}"
        );
    }
    let mut running = Vec::new();
    wait_until(Duration::from_secs(20), || {
        running = listed(&env, "running");
        running.is_empty()
    })
    .unwrap_or_else(|()| panic!("sessions still running after the kills: {running:?}"));
    assert!(alive(pid), "the daemon died");
}

/// The numeric keys of `config.toml`, their type and documented range.
#[derive(Debug, Clone, Copy)]
struct NumericKey {
    name: &'static str,
    float: bool,
    min: f64,
    max: f64,
}

const NUMERIC_KEYS: &[NumericKey] = &[
    NumericKey {
        name: "heartbeat_floor_seconds",
        float: false,
        min: 1.0,
        max: 86_400.0,
    },
    NumericKey {
        name: "kill_grace_seconds",
        float: true,
        min: 0.0,
        max: 300.0,
    },
    NumericKey {
        name: "wait_cap_seconds",
        float: false,
        min: 1.0,
        max: 86_400.0,
    },
    NumericKey {
        name: "finished_cap",
        float: false,
        min: 0.0,
        max: 100_000.0,
    },
    NumericKey {
        name: "log_cap_bytes",
        float: false,
        min: 1.0,
        max: (1u64 << 40) as f64,
    },
    NumericKey {
        name: "log_budget_bytes",
        float: false,
        min: (1u64 << 20) as f64,
        max: (1u64 << 50) as f64,
    },
    NumericKey {
        name: "queue_cap",
        float: false,
        min: 1.0,
        max: 1_000_000.0,
    },
    NumericKey {
        name: "max_connections",
        float: false,
        min: 1.0,
        max: 65_536.0,
    },
    NumericKey {
        name: "worker_memory_max_bytes",
        float: false,
        min: (16u64 << 20) as f64,
        max: (1u64 << 50) as f64,
    },
];

/// A value as written in the TOML file.
#[derive(Debug, Clone)]
enum TomlValue {
    Int(i128),
    Float(f64),
    /// `nan`, `inf`, `-inf`.
    Special(&'static str),
    Str(String),
    Bool(bool),
    Array,
}

impl TomlValue {
    fn text(&self) -> String {
        match self {
            TomlValue::Int(n) => n.to_string(),
            // `{:?}` keeps a fractional part or an exponent, as TOML floats need.
            TomlValue::Float(f) => format!("{f:?}"),
            TomlValue::Special(s) => (*s).to_owned(),
            TomlValue::Str(s) => format!("{s:?}"),
            TomlValue::Bool(b) => b.to_string(),
            TomlValue::Array => "[1, 2]".to_owned(),
        }
    }

    /// Whether `key` accepts this value (right type, in range).
    fn is_valid_for(&self, key: &NumericKey) -> bool {
        let in_range = |v: f64| v >= key.min && v <= key.max;
        match self {
            TomlValue::Int(n) => {
                // Integers are exact; compare them as integers where they are whole.
                let (min, max) = (key.min as i128, key.max as i128);
                (min..=max).contains(n)
            }
            TomlValue::Float(f) => key.float && f.is_finite() && in_range(*f),
            _ => false,
        }
    }
}

fn toml_value(key: NumericKey) -> impl Strategy<Value = TomlValue> {
    let (min, max) = (key.min as i128, key.max as i128);
    prop_oneof![
        4 => (min..=max).prop_map(TomlValue::Int),
        3 => prop::sample::select(vec![
            min - 1,
            min,
            max,
            max + 1,
            0,
            -1,
            i128::from(i64::MAX),
            i128::from(i64::MIN),
            i128::from(u64::MAX),
            i128::from(u64::MAX) + 1,
        ])
        .prop_map(TomlValue::Int),
        1 => any::<i64>().prop_map(|n| TomlValue::Int(n.into())),
        2 => prop_oneof![
            (key.min..=key.max).prop_map(TomlValue::Float),
            prop::sample::select(vec![1e300, -1.0, 0.5, 1e18, 300.0, 300.5, -0.0, 2.0])
                .prop_map(TomlValue::Float),
            any::<f64>().prop_filter("finite", |f| f.is_finite()).prop_map(TomlValue::Float),
        ],
        1 => prop::sample::select(vec!["nan", "inf", "-inf", "+nan"]).prop_map(TomlValue::Special),
        1 => prop::sample::select(vec!["NaN", "10", "", "1e300"]).prop_map(|s| TomlValue::Str(s.to_owned())),
        1 => any::<bool>().prop_map(TomlValue::Bool),
        1 => Just(TomlValue::Array),
    ]
}

fn config_case() -> impl Strategy<Value = Vec<(NumericKey, TomlValue)>> {
    prop::sample::subsequence(NUMERIC_KEYS.to_vec(), 1..=4).prop_flat_map(|keys| {
        keys.into_iter()
            .map(|key| toml_value(key).prop_map(move |v| (key, v)))
            .collect::<Vec<_>>()
    })
}

/// Runs `herd ps` for a home whose config holds `values`, and checks the outcome.
fn check_config(values: &[(NumericKey, TomlValue)]) -> Result<(), TestCaseError> {
    let env = Env::new();
    let text: String = values
        .iter()
        .map(|(key, value)| format!("{} = {}\n", key.name, value.text()))
        .collect();
    std::fs::write(env.home().join("config.toml"), &text).expect("writable");
    let mut child = env
        .cmd(&["ps"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the herd binary runs");
    let finished = wait_until(Duration::from_secs(30), || {
        child.try_wait().ok().flatten().is_some()
    });
    if finished.is_err() {
        let _ = child.kill();
        let _ = child.wait();
        return Err(TestCaseError::fail(format!(
            "`herd ps` hung with config:\n{text}"
        )));
    }
    let out = child.wait_with_output().expect("the output is collected");
    let err = stderr(&out);
    let invalid: Vec<&str> = values
        .iter()
        .filter(|(key, value)| !value.is_valid_for(key))
        .map(|(key, _)| key.name)
        .collect();
    prop_assert!(
        !err.contains("panicked") && !err.to_lowercase().contains("connection reset"),
        "config:\n{}stderr: {}",
        text,
        err
    );
    if invalid.is_empty() {
        prop_assert_eq!(
            out.status.code(),
            Some(0),
            "config:\n{}stderr: {}",
            text,
            err
        );
    } else {
        prop_assert_eq!(
            out.status.code(),
            Some(2),
            "config:\n{}stderr: {}",
            text,
            err
        );
        prop_assert!(
            invalid.iter().any(|name| err.contains(name)),
            "the error names none of {:?}; config:\n{}stderr: {}",
            invalid,
            text,
            err
        );
    }
    if out.status.success() {
        let log = std::fs::read_to_string(env.home().join("logs/daemon.log")).unwrap_or_default();
        prop_assert!(
            !log.contains("panicked"),
            "config:\n{}daemon.log: {}",
            text,
            log
        );
    }
    Ok(())
}

#[test]
fn arbitrary_config_numbers_start_the_daemon_or_are_refused_naming_the_key() {
    let result = runner(CONFIG_CASES).run(&config_case(), |values| check_config(&values));
    if let Err(err) = result {
        panic!("{err}");
    }
}
