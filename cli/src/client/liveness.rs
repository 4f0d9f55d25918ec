//! Whether the daemon is there to answer: no call waits forever on a daemon that
//! was stopped (SIGSTOP, a debugger) or hangs.
//!
//! While a call waits for its answer, the daemon's process state is read from
//! `/proc/<pid>/stat` every [`WATCH_EVERY`]: a stopped daemon fails the call at
//! once, naming its pid and how to resume it. A simple call (a lookup, a list,
//! a poll; [`deadline_of`]) also has a deadline, [`SIMPLE_DEADLINE`]; calls that
//! legitimately take long (`wait`, `kill` with its grace, `spawn`, `shutdown`,
//! the streams, and the event drains and acknowledgements, which keep their own
//! limits) have none but are still watched for a stopped daemon, and for a hung
//! one: after [`PING_AFTER`] without an answer (and again after each such period)
//! the daemon is asked `hello` on a second connection; a daemon that does not
//! answer that within [`PING_DEADLINE`] twice in a row, and is neither running
//! nor in uninterruptible IO (`R`, `D`: busy, not hung) when it misses, fails the
//! call, naming its pid (exit 3).
//! A daemon busy with a long kill still answers `hello` at once; one that hangs
//! (alive, its socket taking connections, nothing answered) does not. `shutdown`
//! is not checked so: the daemon stops accepting before it answers it.

use std::path::{Path, PathBuf};
use std::time::Duration;

use herd_persistence::Home;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

/// How long a simple call may wait for its answer.
pub(crate) const SIMPLE_DEADLINE: Duration = Duration::from_secs(10);

/// How long a call without a deadline waits for its answer (or a stream for its
/// next note) before the daemon is asked whether it still answers.
const PING_AFTER: Duration = Duration::from_secs(5);

/// How long that liveness check may wait for the daemon's `hello`.
const PING_DEADLINE: Duration = SIMPLE_DEADLINE;

/// The daemon a call waits on: its pid and its socket.
#[derive(Debug, Clone, Default)]
pub(crate) struct Watched {
    /// Its pid (`None` until known).
    pub(crate) pid: Option<u32>,
    /// Its socket, for the liveness check of a long call (`None`: no check).
    pub(crate) socket: Option<PathBuf>,
}

/// The liveness check's timings: [`PING_AFTER`] and [`PING_DEADLINE`]; in debug
/// builds `HERD_TEST_PING_MS` (50 to 60,000) sets both, for the tests.
fn ping_timings() -> (Duration, Duration) {
    #[cfg(debug_assertions)]
    if let Some(ms) = std::env::var("HERD_TEST_PING_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|ms| (50..=60_000).contains(ms))
    {
        return (Duration::from_millis(ms), Duration::from_millis(ms));
    }
    (PING_AFTER, PING_DEADLINE)
}

/// Asks the daemon at `socket` for `hello` on a connection of its own; `false`
/// when no answer came within `deadline`. A daemon that is gone (nothing listens)
/// counts as answering: the call's own connection reports that.
async fn answers(socket: &Path, deadline: Duration) -> bool {
    let hello = async {
        let stream = match tokio::net::UnixStream::connect(socket).await {
            Ok(stream) => stream,
            Err(_) => return true,
        };
        let (read, mut write) = stream.into_split();
        let request = herd_protocol::Request {
            jsonrpc: "2.0".into(),
            id: Some(serde_json::Value::from(1)),
            method: <herd_protocol::methods::Hello as herd_protocol::Method>::NAME.to_owned(),
            params: super::hello_params(),
        };
        let Ok(mut line) = serde_json::to_vec(&request) else {
            return true;
        };
        line.push(b'\n');
        if write.write_all(&line).await.is_err() {
            return true;
        }
        let mut answer = Vec::new();
        let mut reader = tokio::io::BufReader::new(read.take(64 * 1024));
        // Any line, even an error, is an answer; a closed connection is a daemon
        // going away, which the call's own connection sees.
        let _ = reader.read_until(b'\n', &mut answer).await;
        true
    };
    tokio::time::timeout(deadline, hello).await.unwrap_or(false)
}

/// What to say about a daemon that hangs.
fn hung_message(daemon: &Watched, method: &str, silent: Duration, deadline: Duration) -> String {
    let (who, end) = match daemon.pid {
        Some(pid) => {
            let state = state_of(pid).map(state_words).unwrap_or("gone");
            (
                format!("pid {pid}, {state}"),
                format!("`kill {pid}` ends it"),
            )
        }
        None => ("pid unknown".to_owned(), "stop it".to_owned()),
    };
    format!(
        "the daemon ({who}) is not answering: nothing came for `{method}` in {:.1} s and a \
         liveness check got no answer within {:.1} s; `herd doctor` looks at it, and {end} \
         so the next command starts another (jobs under herd-shim keep running)",
        silent.as_secs_f64(),
        deadline.as_secs_f64()
    )
}

/// How often the daemon's state is looked at while a call waits.
const WATCH_EVERY: Duration = Duration::from_millis(250);

/// How much longer a call the daemon passes to another host may take: opening
/// the host's door is allowed this long (`remote::door::HELLO_DEADLINE`).
const FAR_EXTRA: Duration = Duration::from_secs(20);

/// The deadline of a call to `method` with `params`: [`deadline_of`]'s, longer
/// for one that goes to another host (an id `NAME:proc_…`, or hosts asked for).
pub(crate) fn deadline_for(method: &str, params: &serde_json::Value) -> Option<Duration> {
    let is_far = params["id"].as_str().is_some_and(|id| id.contains(':'))
        || ["host", "hosts", "all_hosts"]
            .iter()
            .any(|key| params.get(key).is_some_and(|v| !v.is_null()));
    deadline_of(method).map(|d| if is_far { d + FAR_EXTRA } else { d })
}

/// The deadline of a call to `method`: `None` for the calls that take as long
/// as what they wait for.
pub(crate) fn deadline_of(method: &str) -> Option<Duration> {
    match method {
        "hello" | "list" | "lookup" | "poll" | "log" | "log_chunk" | "status" | "scope"
        | "write" | "submit" | "close" | "resize" | "handoff" | "adopt" => Some(SIMPLE_DEADLINE),
        _ => None,
    }
}

/// The daemon's pid as its pid file says (before the handshake names it).
pub(crate) fn pid_from_file(home: &Home) -> Option<u32> {
    std::fs::read_to_string(home.run_dir().join("herd.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The state letter of process `pid` (`R`, `S`, `D`, `T`, `t`, `Z`...), from
/// `/proc/<pid>/stat`; `None` when it cannot be read (gone, another pid
/// namespace).
pub(crate) fn state_of(pid: u32) -> Option<char> {
    let stat = crate::sys::stat(pid)?;
    // The command name (field 2) may hold spaces and parentheses.
    stat.get(stat.rfind(')')? + 1..)?
        .trim_start()
        .chars()
        .next()
}

/// A state letter in words.
pub(crate) fn state_words(state: char) -> &'static str {
    match state {
        'R' => "running",
        'S' => "sleeping",
        'D' => "in uninterruptible IO (D)",
        'T' | 't' => "stopped",
        'Z' => "a zombie",
        'X' | 'x' => "dead",
        _ => "in an unknown state",
    }
}

/// Whether `state` is a busy process, not a hung one: running (`R`) or in
/// uninterruptible IO (`D`, an fsync on a slow disk). A process frozen by its
/// cgroup shows `S`.
fn is_busy(state: char) -> bool {
    matches!(state, 'R' | 'D')
}

/// How many liveness checks in a row must go unanswered (the daemon neither
/// stopped nor busy) before the daemon is called hung: one missed `hello` may
/// be a daemon briefly busy.
const MISSES_FOR_HUNG: u32 = 2;

/// Whether `state` is a stopped process (SIGSTOP, SIGTSTP, a tracer).
pub(crate) fn is_stopped(state: char) -> bool {
    matches!(state, 'T' | 't')
}

/// What to say about a stopped daemon.
pub(crate) fn stopped_message(pid: u32) -> String {
    format!(
        "the daemon (pid {pid}) is stopped (SIGSTOP or a debugger) and answers nothing; \
         `kill -CONT {pid}` resumes it, or `kill -KILL {pid}` ends it and the next command starts \
         another (jobs under herd-shim keep running)"
    )
}

/// Resolves, with what to say, when the daemon is seen stopped, with a
/// `deadline` once it has passed, and without one when the daemon does not answer
/// a liveness check (after each [`PING_AFTER`] of waiting). Never resolves
/// otherwise.
pub(crate) async fn watch(daemon: &Watched, method: &str, deadline: Option<Duration>) -> String {
    watch_with(daemon, method, deadline, ping_timings()).await
}

/// [`watch`] with the liveness check's timings: after how long a silence, and
/// how long the check may take.
async fn watch_with(
    daemon: &Watched,
    method: &str,
    deadline: Option<Duration>,
    (ping_after, ping_deadline): (Duration, Duration),
) -> String {
    let pid = daemon.pid;
    let started = tokio::time::Instant::now();
    let mut checked = started;
    let mut missed = 0_u32;
    let mut tick = tokio::time::interval_at(started + WATCH_EVERY, WATCH_EVERY);
    loop {
        tick.tick().await;
        let state = pid.and_then(state_of);
        if let (Some(pid), Some(state)) = (pid, state)
            && is_stopped(state)
        {
            return stopped_message(pid);
        }
        if let Some(limit) = deadline
            && started.elapsed() >= limit
        {
            let who = match (pid, state) {
                (Some(pid), Some(state)) => format!("pid {pid}, {}", state_words(state)),
                (Some(pid), None) => format!("pid {pid}"),
                (None, _) => "pid unknown".to_owned(),
            };
            let end = pid.map_or_else(
                || "stop it".to_owned(),
                |pid| format!("`kill {pid}` ends it"),
            );
            return format!(
                "the daemon ({who}) did not answer `{method}` within {limit:?}; `herd doctor` \
                 looks at it, and {end} so the next command starts another (jobs under herd-shim \
                 keep running)"
            );
        }
        // A daemon shutting down stops accepting before it answers `shutdown`.
        if deadline.is_none()
            && method != "shutdown"
            && let Some(socket) = &daemon.socket
            && checked.elapsed() >= ping_after
        {
            if answers(socket, ping_deadline).await {
                missed = 0;
            } else {
                match pid.and_then(|pid| Some((pid, state_of(pid)?))) {
                    Some((pid, state)) if is_stopped(state) => return stopped_message(pid),
                    // Busy (running) or in uninterruptible IO (an fsync on a
                    // slow disk): not hung, keep waiting.
                    Some((_, state)) if is_busy(state) => missed = 0,
                    _ => missed += 1,
                }
                if missed >= MISSES_FOR_HUNG {
                    return hung_message(daemon, method, started.elapsed(), ping_deadline);
                }
                if missed > 0 {
                    // Check again at once: the check itself waited a silence.
                    continue;
                }
            }
            checked = tokio::time::Instant::now();
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{Watched, deadline_for, deadline_of, is_stopped, state_of, watch, watch_with};

    #[test]
    fn simple_calls_have_a_deadline_and_long_ones_none() {
        for method in ["hello", "list", "poll", "lookup", "status", "log_chunk"] {
            assert_eq!(
                deadline_of(method),
                Some(super::SIMPLE_DEADLINE),
                "{method}"
            );
        }
        for method in [
            "wait",
            "kill",
            "spawn",
            "shutdown",
            "logs.follow",
            "events.follow",
        ] {
            assert_eq!(deadline_of(method), None, "{method}");
        }
        let near = serde_json::json!({"id": "proc_0123"});
        let far = serde_json::json!({"id": "build1:proc_0123"});
        assert!(deadline_for("poll", &far) > deadline_for("poll", &near));
        let hosts = serde_json::json!({"host": "build1"});
        assert!(deadline_for("list", &hosts) > Some(super::SIMPLE_DEADLINE));
        assert_eq!(deadline_for("wait", &far), None);
    }

    // A daemon that runs but does not answer is given up on at the
    // deadline, naming its pid, its state and what to do.
    #[tokio::test]
    async fn a_silent_daemon_is_given_up_on_at_the_deadline() {
        let me = std::process::id();
        let state = state_of(me).expect("this process's state");
        assert!(!is_stopped(state), "{state}");
        let daemon = Watched {
            pid: Some(me),
            socket: None,
        };
        let said = watch(&daemon, "list", Some(Duration::from_millis(300))).await;
        assert!(
            said.contains(&format!("the daemon (pid {me}, "))
                && said.contains("did not answer `list` within 300ms")
                && said.contains(&format!("`kill {me}`")),
            "{said}"
        );
        // No deadline and a daemon that runs: it keeps waiting.
        let waited =
            tokio::time::timeout(Duration::from_millis(600), watch(&daemon, "wait", None)).await;
        assert!(waited.is_err(), "{waited:?}");
    }

    /// A child process, killed and reaped when dropped.
    struct Child(std::process::Child);

    impl Child {
        fn new(script: &str) -> Child {
            let child = crate::auxiliary::command("sh")
                .args(["-c", script])
                .spawn()
                .expect("sh starts");
            Child(child)
        }

        fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Child {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }

    /// A socket that takes connections and answers nothing.
    fn silent_socket(dir: &tempfile::TempDir) -> (std::path::PathBuf, tokio::net::UnixListener) {
        let path = dir.path().join("silent.sock");
        let listener = tokio::net::UnixListener::bind(&path).expect("bind");
        (path, listener)
    }

    // A long call's daemon that takes connections and answers nothing
    // (a listener that never accepts) while sleeping fails the liveness check
    // (twice in a row), naming its pid; one that answers `hello` on the second
    // connection is waited on.
    #[tokio::test]
    async fn a_hung_daemon_fails_the_liveness_check_of_a_long_call() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let sleeper = Child::new("exec sleep 30");
        let pid = sleeper.pid();
        let timings = (Duration::from_millis(300), Duration::from_millis(300));

        let (silent, _listener) = silent_socket(&dir);
        let daemon = Watched {
            pid: Some(pid),
            socket: Some(silent),
        };
        let started = std::time::Instant::now();
        let said = tokio::time::timeout(
            Duration::from_secs(5),
            watch_with(&daemon, "wait", None, timings),
        )
        .await
        .expect("the hung daemon is found");
        assert!(
            said.contains(&format!("the daemon (pid {pid}, sleeping)"))
                && said.contains("is not answering")
                && said.contains("`wait`"),
            "{said}"
        );
        // Two missed checks of 300 ms each after a 300 ms silence.
        assert!(started.elapsed() >= Duration::from_millis(900), "{said}");

        let alive = dir.path().join("alive.sock");
        let listener = tokio::net::UnixListener::bind(&alive).expect("bind");
        let server = tokio::spawn(async move {
            use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let (read, mut write) = stream.into_split();
                let mut line = String::new();
                let _ = tokio::io::BufReader::new(read).read_line(&mut line).await;
                let _ = write
                    .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n")
                    .await;
            }
        });
        let daemon = Watched {
            pid: Some(pid),
            socket: Some(alive),
        };
        let waited = tokio::time::timeout(
            Duration::from_millis(1500),
            watch_with(&daemon, "wait", None, timings),
        )
        .await;
        assert!(waited.is_err(), "{waited:?}");
        server.abort();
    }

    // A daemon that misses the liveness check while running (busy;
    // `D`, uninterruptible IO, is treated alike) is not hung: the call keeps
    // waiting.
    #[tokio::test]
    async fn a_busy_daemon_is_waited_on() {
        let dir = tempfile::tempdir().expect("a temp dir");
        let busy = Child::new("while :; do :; done");
        let timings = (Duration::from_millis(200), Duration::from_millis(200));
        let (silent, _listener) = silent_socket(&dir);
        let daemon = Watched {
            pid: Some(busy.pid()),
            socket: Some(silent),
        };
        let waited = tokio::time::timeout(
            Duration::from_millis(2000),
            watch_with(&daemon, "wait", None, timings),
        )
        .await;
        assert!(waited.is_err(), "{waited:?}");
    }
}
