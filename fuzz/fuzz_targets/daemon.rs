//! The daemon's request path, through the real binary: `herd-cli` is binary-only and
//! its request handling (line reader, JSON-RPC parsing, the dispatch and every
//! method's params) needs the whole daemon, so this target starts `herd serve` once
//! on a temporary home (the binary named by `HERD_FUZZ_BIN`; `cargo xtask fuzz` builds
//! it) and feeds it each input over its socket. libFuzzer sees only this side's
//! coverage, so inputs are structured: each line is raw bytes or a request built
//! from a method the daemon serves and arbitrary JSON params.
//!
//! Property: every line that is not a notification gets exactly one answer with the
//! same id, a result or an error with a documented code; a notification gets none
//! (a `status` sentinel follows it and must be the next answer); the daemon stays
//! alive and answers within 10 s.
//!
//! Made safe, not tame: spawns run `true` or `echo` whatever the params say, and
//! `shutdown`, `hello` and the streaming methods are never sent. The daemon runs its
//! jobs in-process (no shim outlives it), dies with this process
//! (`PR_SET_PDEATHSIG`) and is killed at exit.

#![no_main]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

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
const FORBIDDEN: &[&str] = &["shutdown", "hello", "events.follow", "logs.follow"];
const HARMLESS: &[&str] = &["true", "echo hi", "exit 3"];
const KEYS: &[&str] = &[
    "id",
    "owner",
    "command",
    "cwd",
    "env",
    "caller_env",
    "pty",
    "lease",
    "limit",
    "state",
    "data",
    "rows",
    "cols",
    "from",
    "to",
    "timeout_seconds",
    "all",
    "offset",
    "from_byte",
    "max_bytes",
    "watch",
    "heartbeat_seconds",
    "completion_output_chars",
    "answered",
];
const MAX_REQUEST_BYTES: usize = 1 << 20;

/// The daemon's pid, for the exit handler.
static DAEMON_PID: AtomicI32 = AtomicI32::new(0);

#[derive(Debug)]
struct Daemon {
    child: Child,
    socket: PathBuf,
    pid: u64,
    /// The ids of the sessions spawns started (the last is what `Id::Last` names).
    last_session: String,
    next_id: u64,
    _home: tempfile::TempDir,
}

extern "C" fn kill_daemon() {
    let pid = DAEMON_PID.load(Ordering::SeqCst);
    if pid > 0 {
        // SAFETY: kill(2) with a pid we started; no memory is involved.
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
    }
}

fn start() -> Daemon {
    let bin = std::env::var_os("HERD_FUZZ_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            panic!("set HERD_FUZZ_BIN to a built `herd` binary (`cargo xtask fuzz` does)")
        });
    let dir = tempfile::Builder::new()
        .prefix("herd-fuzz-daemon")
        .tempdir()
        .expect("a temp dir can be made");
    let home = dir.path().join("home");
    std::fs::create_dir(&home).expect("the temp dir is writable");
    std::fs::write(
        home.join("config.toml"),
        "supervisor = \"in_process\"\nwait_cap_seconds = 1\n",
    )
    .expect("the home is writable");
    let mut cmd = Command::new(&bin);
    cmd.arg("serve")
        .env("HERD_HOME", &home)
        .env_remove("HERD_OWNER")
        .env_remove("INVOCATION_ID")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // SAFETY: the closure runs between fork and exec and only calls prctl(2), which
    // is async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
    DAEMON_PID.store(child.id() as i32, Ordering::SeqCst);
    // SAFETY: registers a plain extern "C" function with no captured state.
    unsafe {
        libc::atexit(kill_daemon);
    }
    let socket = home.join("run").join("herd.sock");
    let deadline = Instant::now() + Duration::from_secs(20);
    let pid = loop {
        if let Ok(mut conn) = Conn::open(&socket)
            && let Some(pid) = conn.hello()
        {
            break pid;
        }
        assert!(
            Instant::now() < deadline,
            "herd serve did not come up in 20 s"
        );
        std::thread::yield_now();
    };
    Daemon {
        child,
        socket,
        pid,
        last_session: "proc_000000000000".to_owned(),
        next_id: 1,
        _home: dir,
    }
}

struct Conn {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Conn {
    fn open(socket: &std::path::Path) -> std::io::Result<Conn> {
        let stream = UnixStream::connect(socket)?;
        stream.set_read_timeout(Some(Duration::from_secs(10)))?;
        Ok(Conn {
            reader: BufReader::new(stream.try_clone()?),
            writer: stream,
        })
    }

    fn send(&mut self, bytes: &[u8]) {
        let mut line = bytes.to_vec();
        line.push(b'\n');
        self.writer
            .write_all(&line)
            .expect("the daemon reads its socket");
    }

    fn recv(&mut self) -> Value {
        let mut line = String::new();
        let n = self
            .reader
            .read_line(&mut line)
            .expect("the daemon answers within 10 s");
        assert!(n > 0, "the daemon closed the connection");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("an answer is not JSON ({e}): {line:?}"))
    }

    fn hello(&mut self) -> Option<u64> {
        self.send(
            br#"{"jsonrpc":"2.0","id":0,"method":"hello","params":{"protocol":1,"client":"fuzz"}}"#,
        );
        let mut line = String::new();
        self.reader.read_line(&mut line).ok()?;
        serde_json::from_str::<Value>(&line).ok()?["result"]["pid"].as_u64()
    }
}

/// A JSON value from fuzz input.
#[derive(Debug, Arbitrary)]
enum Json {
    Null,
    Bool(bool),
    U64(u64),
    I64(i64),
    F64(f64),
    Str(String),
    /// A session id the daemon has (the last one spawned).
    Session,
    Array(Vec<Json>),
    Object(Vec<(Key, Json)>),
}

#[derive(Debug, Arbitrary)]
enum Key {
    Known(u8),
    Other(String),
}

impl Json {
    fn to_value(&self, last: &str, depth: u32) -> Value {
        match self {
            Json::Null => Value::Null,
            Json::Bool(b) => json!(b),
            Json::U64(n) => json!(n),
            Json::I64(n) => json!(n),
            Json::F64(f) => serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Json::Str(s) => json!(s),
            Json::Session => json!(last),
            Json::Array(items) if depth < 6 => {
                Value::Array(items.iter().map(|v| v.to_value(last, depth + 1)).collect())
            }
            Json::Object(fields) if depth < 6 => Value::Object(
                fields
                    .iter()
                    .map(|(k, v)| {
                        let key = match k {
                            Key::Known(n) => KEYS[usize::from(*n) % KEYS.len()].to_owned(),
                            Key::Other(s) => s.clone(),
                        };
                        (key, v.to_value(last, depth + 1))
                    })
                    .collect(),
            ),
            _ => Value::Null,
        }
    }
}

#[derive(Debug, Arbitrary)]
enum Line {
    Raw(Vec<u8>),
    Request {
        method: u8,
        /// `None`: a notification.
        id: Option<Json>,
        params: Option<Json>,
        bad_version: bool,
    },
}

/// What a line must get: nothing, or one answer with this id.
fn expect(bytes: &[u8]) -> Option<(Value, Option<i64>)> {
    if bytes.len() > MAX_REQUEST_BYTES {
        return Some((Value::Null, Some(-32012)));
    }
    let Ok(value) = serde_json::from_slice::<Value>(bytes) else {
        return Some((Value::Null, Some(-32700)));
    };
    let id = value.get("id").cloned().unwrap_or(Value::Null);
    let is_request = value.is_object()
        && value.get("jsonrpc").is_some_and(Value::is_string)
        && value.get("method").is_some_and(Value::is_string);
    if !is_request || value["jsonrpc"] != "2.0" {
        return Some((id, Some(-32600)));
    }
    if id.is_null() { None } else { Some((id, None)) }
}

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

fn render(line: &Line, daemon: &mut Daemon) -> Vec<u8> {
    match line {
        Line::Raw(bytes) => {
            let mut bytes: Vec<u8> = bytes.iter().copied().filter(|&b| b != b'\n').collect();
            if let Ok(mut value) = serde_json::from_slice::<Value>(&bytes) {
                let before = value.clone();
                defuse(&mut value);
                if value != before {
                    bytes = value.to_string().into_bytes();
                }
            }
            bytes
        }
        Line::Request {
            method,
            id,
            params,
            bad_version,
        } => {
            let mut map = serde_json::Map::new();
            map.insert(
                "jsonrpc".into(),
                json!(if *bad_version { "1.0" } else { "2.0" }),
            );
            if let Some(id) = id {
                let id = match id {
                    Json::Session => {
                        daemon.next_id += 1;
                        json!(daemon.next_id)
                    }
                    other => other.to_value(&daemon.last_session, 0),
                };
                map.insert("id".into(), id);
            }
            map.insert(
                "method".into(),
                json!(METHODS[usize::from(*method) % METHODS.len()]),
            );
            if let Some(params) = params {
                map.insert("params".into(), params.to_value(&daemon.last_session, 0));
            }
            let mut value = Value::Object(map);
            defuse(&mut value);
            value.to_string().into_bytes()
        }
    }
}

fn is_documented(code: i64) -> bool {
    matches!(code, -32700 | -32600 | -32601 | -32602 | -32603 | -32004)
        || (-32019..=-32010).contains(&code)
}

/// Whether an answer's id is the request's, a fraction to within rounding (serde_json
/// without `float_roundtrip` may read a long float's last digit differently).
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

fn daemon() -> &'static Mutex<Daemon> {
    static DAEMON: OnceLock<Mutex<Daemon>> = OnceLock::new();
    DAEMON.get_or_init(|| Mutex::new(start()))
}

fuzz_target!(|lines: Vec<Line>| {
    let mut daemon = daemon()
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let daemon = &mut *daemon;
    if let Ok(Some(status)) = daemon.child.try_wait() {
        panic!("the daemon exited: {status}");
    }
    let mut conn = Conn::open(&daemon.socket).expect("the daemon's socket accepts");
    assert_eq!(
        conn.hello(),
        Some(daemon.pid),
        "the daemon answers hello as itself"
    );
    for line in lines.iter().take(16) {
        let bytes = render(line, daemon);
        let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(300)]).into_owned();
        conn.send(&bytes);
        match expect(&bytes) {
            Some((id, code)) => {
                let answer = conn.recv();
                assert_eq!(answer["jsonrpc"], "2.0", "{answer} to {shown}");
                assert!(same_id(&answer["id"], &id), "{answer} to {shown}");
                assert!(
                    answer.get("result").is_some() != answer.get("error").is_some(),
                    "{answer} to {shown}"
                );
                if let Some(error) = answer.get("error") {
                    let got = error["code"].as_i64().unwrap_or_default();
                    assert!(is_documented(got), "undocumented code: {answer} to {shown}");
                    if let Some(code) = code {
                        assert_eq!(got, code, "{answer} to {shown}");
                    }
                }
                if let Some(session) = answer["result"]["session_id"].as_str() {
                    daemon.last_session = session.to_owned();
                }
            }
            None => {
                daemon.next_id += 1;
                let sentinel = format!("sentinel-{}", daemon.next_id);
                let status = json!({"jsonrpc": "2.0", "id": sentinel, "method": "status"});
                conn.send(status.to_string().as_bytes());
                let answer = conn.recv();
                assert_eq!(
                    answer["id"], sentinel,
                    "a notification was answered: {answer} after {shown}"
                );
            }
        }
    }
});
