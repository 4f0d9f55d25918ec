//! `herd proxy`: the far end of a host's door, driven here over its
//! own piped stdin/stdout against a real daemon on a temp home.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::support::{Env, alive, wait_until};

/// Generous: CI runs on two busy cores.
const DEADLINE: Duration = Duration::from_secs(30);

/// A `herd proxy` child and the lines it prints.
pub(crate) struct Proxy {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    next_id: u64,
}

impl Proxy {
    pub(crate) fn start(env: &Env) -> Proxy {
        let mut child = env
            .cmd(&["proxy"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("herd proxy starts");
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().expect("stdout is piped");
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Proxy {
            child,
            stdin,
            lines,
            next_id: 1,
        }
    }

    pub(crate) fn send(&mut self, method: &str, params: Value) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().expect("stdin is open");
        writeln!(stdin, "{line}").expect("the proxy reads its stdin");
        stdin.flush().expect("the proxy reads its stdin");
        id
    }

    /// The next line the proxy prints, parsed.
    pub(crate) fn recv(&mut self) -> Value {
        match self.lines.recv_timeout(DEADLINE) {
            Ok(line) => serde_json::from_str(&line).unwrap_or_else(|e| {
                panic!("the proxy printed a line that is not JSON ({e}): {line}")
            }),
            Err(RecvTimeoutError::Timeout) => {
                panic!("the proxy printed nothing within {DEADLINE:?}")
            }
            Err(RecvTimeoutError::Disconnected) => panic!("the proxy's stdout closed"),
        }
    }

    /// Calls `method` and returns the answer with its id (skipping notifications).
    pub(crate) fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send(method, params);
        loop {
            let message = self.recv();
            if message["id"] == json!(id) {
                return message;
            }
        }
    }

    /// Closes stdin and waits for the proxy to exit.
    pub(crate) fn close(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let pid = self.child.id() as i32;
        let end = Instant::now() + DEADLINE;
        loop {
            if let Some(status) = self.child.try_wait().expect("the proxy can be waited on") {
                assert!(!alive(pid), "the proxy {pid} still runs");
                return status;
            }
            assert!(
                Instant::now() < end,
                "the proxy did not exit within {DEADLINE:?} of its stdin closing"
            );
            std::thread::park_timeout(Duration::from_millis(10));
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The daemon's open connections, asked over a fresh one (which counts itself).
pub(crate) fn connections(env: &Env) -> u64 {
    let stream =
        std::os::unix::net::UnixStream::connect(env.socket()).expect("the daemon's socket accepts");
    stream
        .set_read_timeout(Some(DEADLINE))
        .expect("a timeout can be set");
    let mut writer = stream.try_clone().expect("the stream clones");
    writer
        .write_all(
            b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1}}\n\
              {\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"status\",\"params\":{}}\n",
        )
        .expect("the daemon reads");
    let mut lines = BufReader::new(stream).lines();
    let _hello = lines.next();
    let status: Value = lines
        .next()
        .and_then(Result::ok)
        .and_then(|l| serde_json::from_str(&l).ok())
        .expect("the daemon answers status");
    status["result"]["connections"].as_u64().unwrap_or(u64::MAX)
}

#[test]
fn proxy_bridges_hello_spawn_wait_and_a_stream() {
    // `herd proxy` speaks herd's protocol on stdin/stdout, bridged to
    // its home's daemon, which it starts.
    let env = Env::new();
    let mut proxy = Proxy::start(&env);
    let hello = proxy.call("hello", json!({"protocol": 1, "client": "test"}));
    let result = &hello["result"];
    assert_eq!(result["protocol"], 1, "{hello}");
    assert_eq!(result["home"], env.home().display().to_string(), "{hello}");
    assert_eq!(
        result["proxy"]["version"],
        env!("CARGO_PKG_VERSION"),
        "{hello}"
    );
    assert_eq!(result["proxy"]["os"], std::env::consts::OS, "{hello}");
    assert_eq!(
        result["proxy"]["uid"],
        json!(nix::unistd::getuid().as_raw()),
        "{hello}"
    );
    assert!(
        env.daemon_pid().is_some_and(alive),
        "the proxy started the daemon"
    );

    let spawned = proxy.call(
        "spawn",
        json!({"command": "echo through-the-door; exit 3", "owner": "remote-test"}),
    );
    let id = spawned["result"]["session_id"]
        .as_str()
        .unwrap_or_else(|| panic!("spawn answered {spawned}"))
        .to_owned();
    let waited = proxy.call("wait", json!({"id": id, "timeout_seconds": 25}));
    assert_eq!(waited["result"]["exit_code"], 3, "{waited}");

    // A streaming method crosses the bridge too: notifications, then the answer.
    let follow = proxy.send("logs.follow", json!({"id": id, "result": true}));
    let mut seen = String::new();
    loop {
        let message = proxy.recv();
        if message["method"] == "log" {
            seen.push_str(&message.to_string());
            continue;
        }
        assert_eq!(message["id"], json!(follow), "{message}");
        break;
    }
    assert!(
        seen.contains("through-the-door"),
        "log notifications: {seen}"
    );

    let status = proxy.close();
    assert!(status.success(), "the proxy ended with {status:?}");
    wait_until(DEADLINE, || connections(&env) == 1)
        .unwrap_or_else(|()| panic!("the proxy's connection stayed open: {}", connections(&env)));
}

#[test]
fn proxy_ends_on_stdin_eof_in_the_middle_of_a_stream() {
    // The bridge ends when either side closes, a stream included.
    let env = Env::new();
    let mut proxy = Proxy::start(&env);
    let hello = proxy.call("hello", json!({"protocol": 1, "client": "test"}));
    assert_eq!(hello["result"]["protocol"], 1, "{hello}");
    proxy.send("events.follow", json!({"owner": "nobody-here"}));
    let status = proxy.close();
    assert!(status.success(), "the proxy ended with {status:?}");
    wait_until(DEADLINE, || connections(&env) == 1)
        .unwrap_or_else(|()| panic!("the stream's connection stayed open: {}", connections(&env)));
}

#[test]
fn proxy_passes_a_version_mismatch_through_with_its_platform() {
    // A far herd of another protocol is refused naming both versions;
    // the proxy adds what `herd hosts install` needs to the refusal.
    let env = Env::new();
    let mut proxy = Proxy::start(&env);
    let hello = proxy.call("hello", json!({"protocol": 99, "client": "future"}));
    let error = &hello["error"];
    assert_eq!(error["code"], -32011, "{hello}");
    let message = error["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("99") && message.contains("protocol 1"),
        "{hello}"
    );
    assert_eq!(
        error["data"]["proxy"]["arch"],
        std::env::consts::ARCH,
        "{hello}"
    );
    assert!(proxy.close().success());
}

#[test]
fn proxy_that_cannot_reach_a_daemon_says_why_on_one_line() {
    // Exit non-zero with a one-line reason on stderr, nothing on stdout.
    let env = Env::new();
    std::fs::write(env.home().join("config.toml"), "queue_cap = \"many\"\n")
        .expect("the home is writable");
    let out = env
        .cmd(&["proxy"])
        .stdin(Stdio::piped())
        .output()
        .expect("herd proxy runs");
    assert_ne!(out.status.code(), Some(0), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(stderr.trim_end().lines().count(), 1, "one line: {stderr}");
    assert!(
        stderr.contains("proxy:") && stderr.contains("config"),
        "{stderr}"
    );
    assert!(
        out.stdout.is_empty(),
        "stdout is the protocol: {:?}",
        out.stdout
    );
    assert!(
        env.daemon_pid().is_none_or(|pid| !alive(pid)),
        "no daemon started"
    );
}

#[test]
fn proxy_ends_when_its_daemon_goes_away() {
    // The bridge ends when either side closes; the daemon's side here.
    let env = Env::new();
    let mut proxy = Proxy::start(&env);
    let hello = proxy.call("hello", json!({"protocol": 1, "client": "test"}));
    assert_eq!(hello["result"]["protocol"], 1, "{hello}");
    let daemon = env.daemon_pid().expect("the proxy started a daemon");
    env.ok(&["shutdown", "--yes"]);
    let pid = proxy.child.id() as i32;
    wait_until(DEADLINE, || proxy.child.try_wait().ok().flatten().is_some())
        .unwrap_or_else(|()| panic!("the proxy outlived its daemon by {DEADLINE:?}"));
    assert!(!alive(pid), "proxy {pid} still runs");
    // `shutdown` returns when the daemon closes its connection; the process may
    // still be on its way out.
    wait_until(DEADLINE, || !alive(daemon))
        .unwrap_or_else(|()| panic!("daemon {daemon} still runs {DEADLINE:?} after shutdown"));
    // Its stdin is still open: the proxy did not wait for it.
    assert!(proxy.stdin.is_some());
}
