//! Whether the daemon is there to answer: no call waits forever on a daemon that
//! was stopped (SIGSTOP, a debugger) or hangs.
//!
//! While a call waits for its answer, the daemon's process state is read from
//! `/proc/<pid>/stat` every [`WATCH_EVERY`]: a stopped daemon fails the call at
//! once, naming its pid and how to resume it. A simple call (a lookup, a list,
//! a poll; [`deadline_of`]) also has a deadline, [`SIMPLE_DEADLINE`]; calls that
//! legitimately take long (`wait`, `kill` with its grace, `spawn`, `shutdown`,
//! the streams, and the event drains and acknowledgements, which keep their own
//! limits) have none but are still watched for a stopped daemon.

use std::time::Duration;

use herd_persistence::Home;

/// How long a simple call may wait for its answer.
pub(crate) const SIMPLE_DEADLINE: Duration = Duration::from_secs(10);

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
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
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

/// Resolves, with what to say, when the daemon `pid` is seen stopped or, with
/// a `deadline`, once it has passed. Never resolves otherwise.
pub(crate) async fn watch(pid: Option<u32>, method: &str, deadline: Option<Duration>) -> String {
    let started = tokio::time::Instant::now();
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
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{deadline_for, deadline_of, is_stopped, state_of, watch};

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

    // Issue 29: a daemon that runs but does not answer is given up on at the
    // deadline, naming its pid, its state and what to do.
    #[tokio::test]
    async fn issue_29_a_silent_daemon_is_given_up_on_at_the_deadline() {
        let me = std::process::id();
        let state = state_of(me).expect("this process's state");
        assert!(!is_stopped(state), "{state}");
        let said = watch(Some(me), "list", Some(Duration::from_millis(300))).await;
        assert!(
            said.contains(&format!("the daemon (pid {me}, "))
                && said.contains("did not answer `list` within 300ms")
                && said.contains(&format!("`kill {me}`")),
            "{said}"
        );
        // No deadline and a daemon that runs: it keeps waiting.
        let waited =
            tokio::time::timeout(Duration::from_millis(600), watch(Some(me), "wait", None)).await;
        assert!(waited.is_err(), "{waited:?}");
    }
}
