//! A protocol-1 client of an early release still works (B39): the requests that
//! client wrote, kept as bytes in `fixtures/protocol1-session.txt` (the file says
//! where they come from and how it reads), are replayed over a real daemon's socket,
//! and each answer must still carry every field that client read, with the same JSON
//! type, and the same value where it is deterministic (exit code, output, status
//! names, error code).
//!
//! The requests are deliberately not built from herd-protocol's types: the point is
//! that the old bytes are still taken. Only the session ids (which differ per run)
//! are put in where the fixture says `${NAME}`.
//!
//! The client protocol has one version constant, `herd_protocol::PROTOCOL_VERSION`
//! (1); there is no oldest-accepted constant for it (the shim's
//! `OLDEST_FULL_ATTACH` is another protocol). This test replays protocol 1, the
//! fixture's `version` line, and `hello` must still take it.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use serde_json::Value;

use crate::support::{Env, alive, wait_until};

/// The recorded session.
const SESSION: &str = include_str!("fixtures/protocol1-session.txt");

/// The client protocol the fixture's requests speak.
const REPLAYED_PROTOCOL: u32 = 1;

// This herd speaks the replayed protocol or a later one (checked when it builds).
const _: () = assert!(
    herd_protocol::PROTOCOL_VERSION >= REPLAYED_PROTOCOL,
    "this herd speaks a protocol older than the recorded client's"
);

/// How long one answer may take (a failure deadline, not a pause).
const ANSWER_DEADLINE: Duration = Duration::from_secs(30);

/// One item of the fixture.
#[derive(Debug)]
enum Step<'a> {
    /// A new connection.
    Connect,
    /// Request bytes, before the ids are put in.
    Send(&'a str),
    /// The shape of the next answer.
    Expect(Value),
}

/// The fixture's version and its steps.
fn steps(text: &str) -> (u32, Vec<Step<'_>>) {
    let mut version = None;
    let mut steps = Vec::new();
    for (idx, line) in text.lines().enumerate() {
        let at = idx + 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(n) = line.strip_prefix("version ") {
            version = Some(
                n.parse()
                    .unwrap_or_else(|e| panic!("line {at}: {e}: {line}")),
            );
        } else if line == "connect" {
            steps.push(Step::Connect);
        } else if let Some(bytes) = line.strip_prefix("> ") {
            steps.push(Step::Send(bytes));
        } else if let Some(shape) = line.strip_prefix("< ") {
            let shape = serde_json::from_str(shape)
                .unwrap_or_else(|e| panic!("line {at}: the shape is not JSON ({e}): {shape}"));
            steps.push(Step::Expect(shape));
        } else {
            panic!("line {at} of the fixture is none of its items: {line}");
        }
    }
    (version.expect("the fixture names its version"), steps)
}

/// `bytes` with every `${NAME}` replaced by the string captured as NAME.
fn fill_in(bytes: &str, captures: &BTreeMap<String, Value>) -> String {
    let mut out = bytes.to_owned();
    for (name, value) in captures {
        let marker = format!("${{{name}}}");
        if out.contains(&marker) {
            let text = value
                .as_str()
                .unwrap_or_else(|| panic!("{name} is put in a request but is not a string"));
            assert!(
                !text.contains(['"', '\\']),
                "{name} would need escaping: {text}"
            );
            out = out.replace(&marker, text);
        }
    }
    assert!(
        !out.contains("${"),
        "a request names an id not captured: {out}"
    );
    out
}

/// Whether `value` has the JSON type `kind`.
fn has_type(value: &Value, kind: &str) -> bool {
    match kind {
        "string" => value.is_string(),
        "integer" => value.is_i64() || value.is_u64(),
        "number" => value.is_number(),
        "bool" => value.is_boolean(),
        "null" => value.is_null(),
        "object" => value.is_object(),
        "array" => value.is_array(),
        other => panic!("the fixture names an unknown type <{other}>"),
    }
}

/// Matches `actual` at `path` against the `expected` shape, capturing into
/// `captures` and noting every mismatch in `faults`.
fn check(
    expected: &Value,
    actual: Option<&Value>,
    path: &str,
    captures: &mut BTreeMap<String, Value>,
    faults: &mut Vec<String>,
) {
    let Some(actual) = actual else {
        faults.push(format!("{path}: missing (a protocol-1 client reads it)"));
        return;
    };
    match expected {
        Value::String(token) if token.starts_with('<') && token.ends_with('>') => {
            let inner = &token[1..token.len() - 1];
            let (kinds, name) = match inner.split_once(" as ") {
                Some((kinds, name)) => (kinds, Some(name)),
                None => (inner, None),
            };
            if !kinds.split('|').any(|kind| has_type(actual, kind)) {
                faults.push(format!("{path}: {actual} is not <{kinds}>"));
            } else if let Some(name) = name {
                captures.insert(name.to_owned(), actual.clone());
            }
        }
        Value::String(token) if token.starts_with("${") && token.ends_with('}') => {
            let name = &token[2..token.len() - 1];
            let want = captures
                .get(name)
                .unwrap_or_else(|| panic!("{path}: {name} is compared before it is captured"));
            if want != actual {
                faults.push(format!("{path}: {actual}, not {name} ({want})"));
            }
        }
        Value::Object(fields) => {
            for (key, shape) in fields {
                let at = format!("{path}.{key}");
                check(shape, actual.get(key), &at, captures, faults);
            }
        }
        Value::Array(items) => match actual.as_array() {
            Some(got) if got.len() == items.len() => {
                for (idx, (shape, item)) in items.iter().zip(got).enumerate() {
                    check(
                        shape,
                        Some(item),
                        &format!("{path}[{idx}]"),
                        captures,
                        faults,
                    );
                }
            }
            _ => faults.push(format!("{path}: {actual} is not {} items", items.len())),
        },
        exact if exact != actual => faults.push(format!("{path}: {actual}, not {exact}")),
        _ => {}
    }
}

/// A connection to the daemon's socket, with everything said on it kept for a
/// failure's message.
struct Wire<'a> {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
    transcript: &'a mut Vec<String>,
}

impl<'a> Wire<'a> {
    fn open(env: &Env, transcript: &'a mut Vec<String>) -> Wire<'a> {
        let stream = UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
        stream
            .set_read_timeout(Some(ANSWER_DEADLINE))
            .expect("a read deadline can be set");
        transcript.push("connect".to_owned());
        Wire {
            reader: BufReader::new(stream.try_clone().expect("the stream clones")),
            writer: stream,
            transcript,
        }
    }

    fn send(&mut self, bytes: &str) {
        self.transcript.push(format!("> {bytes}"));
        let mut line = bytes.as_bytes().to_vec();
        line.push(b'\n');
        self.writer.write_all(&line).expect("the daemon reads");
    }

    fn answer(&mut self) -> Value {
        let mut line = String::new();
        let read = self.reader.read_line(&mut line);
        let so_far = self.transcript.join("\n");
        match read {
            Ok(n) if n > 0 => {}
            Ok(_) => panic!("the daemon closed the connection; the session so far:\n{so_far}"),
            Err(e) => {
                panic!("no answer within {ANSWER_DEADLINE:?} ({e}); the session so far:\n{so_far}")
            }
        }
        self.transcript.push(format!("< {}", line.trim_end()));
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
    }
}

/// Replays the steps against `env`'s daemon; the captures.
fn replay(env: &Env, steps: &[Step<'_>]) -> BTreeMap<String, Value> {
    let mut captures = BTreeMap::new();
    let mut transcript = Vec::new();
    let mut wire: Option<Wire<'_>> = None;
    let mut faults = Vec::new();
    for step in steps {
        match step {
            Step::Connect => {
                drop(wire.take());
                wire = Some(Wire::open(env, &mut transcript));
            }
            Step::Send(bytes) => {
                let line = fill_in(bytes, &captures);
                wire.as_mut()
                    .expect("the fixture connects first")
                    .send(&line);
            }
            Step::Expect(shape) => {
                let wire = wire.as_mut().expect("the fixture connects first");
                let answer = wire.answer();
                let before = faults.len();
                check(shape, Some(&answer), "answer", &mut captures, &mut faults);
                if faults.len() > before {
                    faults.push(format!("  in {answer}"));
                }
            }
        }
    }
    drop(wire);
    assert!(
        faults.is_empty(),
        "a protocol-1 client would misread these answers:\n{}\nthe session:\n{}",
        faults.join("\n"),
        transcript.join("\n")
    );
    captures
}

#[test]
fn b39_a_recorded_protocol_1_client_session_still_works() {
    let (version, steps) = steps(SESSION);
    assert_eq!(
        version, REPLAYED_PROTOCOL,
        "the fixture replays protocol {REPLAYED_PROTOCOL}"
    );
    let env = Env::new();
    env.ok(&["ps"]);
    let captures = replay(&env, &steps);
    // The long job was killed: its process is gone, not left behind.
    let pid = captures["long_pid"]
        .as_i64()
        .and_then(|pid| i32::try_from(pid).ok())
        .expect("the fixture captures the long job's pid as an integer");
    wait_until(Duration::from_secs(10), || !alive(pid))
        .unwrap_or_else(|()| panic!("the killed job's process {pid} is alive after 10 s"));
}

#[test]
fn b39_the_replay_fails_an_answer_that_drops_or_retypes_a_field() {
    let shape = serde_json::json!({"result": {"session_id": "<string as id>", "exit_code": 0,
        "pid": "<integer>", "output": "a\nb\n"}});
    let whole = serde_json::json!({"result": {"session_id": "proc_1", "exit_code": 0,
        "pid": 7, "output": "a\nb\n", "added_later": true}});
    let mut captures = BTreeMap::new();
    let mut faults = Vec::new();
    check(&shape, Some(&whole), "answer", &mut captures, &mut faults);
    assert!(faults.is_empty(), "an added field is fine: {faults:?}");
    assert_eq!(captures["id"], "proc_1");
    let broken = serde_json::json!({"result": {"session_id": "proc_1", "exit_code": 1,
        "pid": "7"}});
    check(&shape, Some(&broken), "answer", &mut captures, &mut faults);
    assert_eq!(
        faults,
        [
            "answer.result.exit_code: 1, not 0",
            "answer.result.output: missing (a protocol-1 client reads it)",
            "answer.result.pid: \"7\" is not <integer>",
        ],
        "a changed value, a dropped field and a retyped one each fail"
    );
}
