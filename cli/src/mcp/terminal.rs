//! The `terminal` tool: validation, background starts, and foreground runs that
//! move to the background (with notify on) when they outlive their window or the
//! client cancels them (B24).

use super::{log_page, wait_for};
use herd_protocol::Method;
use herd_protocol::answers::{SpawnAnswer, WaitAnswer, WaitStatus};
use herd_protocol::errors::DispatchFailedData;
use herd_protocol::methods as m;
use herd_protocol::params::IdParams;
use herd_protocol::params::{Limits, SpawnParams};
use std::time::{Duration, Instant};

use rmcp::RoleServer;
use rmcp::model::{JsonObject, ProgressNotificationParam};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::args::{HEARTBEAT_MAX_SECONDS, TIME_LIMIT_MAX_SECONDS};
use super::results::{self, Common, TerminalResult};
use super::{
    Answer, FOREGROUND_DEFAULT_TIMEOUT, FOREGROUND_MAX_TIMEOUT, FOREGROUND_OUTPUT_CHARS, Server,
};
use crate::client::{CallError, read_part};
use crate::protocol;

/// How often a foreground call that asked for progress hears of it.
const PROGRESS_EVERY: Duration = Duration::from_secs(2);

/// Characters of the last output line a progress message shows.
const PROGRESS_LINE_CHARS: usize = 120;

/// A validated `terminal` call.
#[derive(Debug, Clone)]
pub(super) struct TerminalRequest {
    pub(super) command: String,
    pub(super) background: bool,
    pub(super) pty: bool,
    pub(super) notify: bool,
    /// Whether the call said `notify` (or a heartbeat) rather than taking the default.
    pub(super) notify_given: bool,
    pub(super) watch: Vec<String>,
    pub(super) heartbeat: Option<u64>,
    pub(super) persist: bool,
    pub(super) timeout: Option<u64>,
    pub(super) workdir: Option<String>,
    /// Seconds before the job's tree is killed as `time_limit`.
    pub(super) time_limit: Option<u64>,
    /// A host of `[hosts.NAME]` to run on (its session id is `NAME:proc_…`).
    pub(super) host: Option<String>,
    /// Kill the tree's leftovers once the command exits.
    pub(super) kill_leftovers: bool,
    /// Bounds on the tree (`memory`, `cpus`, `pids`).
    pub(super) limits: herd_core::Limits,
    /// Readiness by a regex over the output, and by a listening port (B45).
    pub(super) ready: Option<String>,
    pub(super) ready_port: Option<u16>,
    /// Its group and dependencies.
    pub(super) queue: herd_core::QueueRequest,
}

/// How a foreground wait stopped short of the exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stopped {
    TimedOut,
    Cancelled,
}

/// An answer for a call that failed before any job started.
fn refused(message: impl Into<String>) -> Answer {
    Answer::error(results::to_value(&TerminalResult::refused(message)))
}

impl Server {
    pub(super) async fn terminal(
        &self,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Answer {
        match terminal_request(args) {
            Err(message) => refused(message),
            Ok(req) => self.run_terminal(&req, context).await,
        }
    }

    /// Starts the job: the daemon's spawn answer, or the answer saying why not.
    pub(super) async fn start(
        &self,
        req: &TerminalRequest,
        notify: bool,
    ) -> Result<SpawnAnswer, Answer> {
        // Jobs run where the agent works: the server's cwd, or `workdir` relative to it.
        let base = std::env::current_dir().unwrap_or_else(|_| self.home.root().to_path_buf());
        let cwd = match &req.workdir {
            Some(dir) => base.join(dir),
            None => base,
        };
        let limits = &req.limits;
        let mut params = SpawnParams {
            command: req.command.clone(),
            owner: self.owner.as_str().to_owned(),
            cwd: Some(cwd),
            pty: req.pty,
            notify,
            watch: req.watch.clone(),
            heartbeat_seconds: req.heartbeat,
            persist_on_release: req.persist,
            completion_output_chars: (!req.background).then_some(FOREGROUND_OUTPUT_CHARS),
            time_limit_seconds: req.time_limit,
            host: req.host.clone(),
            kill_leftovers: req.kill_leftovers.then_some(true),
            limits: (!limits.is_empty()).then_some(Limits {
                memory_bytes: limits.memory_bytes,
                cpu_millis: limits.cpu_millis,
                pids: limits.pids,
            }),
            ready: req.ready.clone(),
            ready_port: req.ready_port,
            group: req.queue.group.clone(),
            after: req.queue.after.clone(),
            after_ready: req.queue.after_ready.clone(),
            ..SpawnParams::default()
        };
        let mut client = self.client().await.map_err(Answer::error)?;
        refuse_what_the_daemon_lacks(req, &client.hello)?;
        // Jobs run in the environment the agent host gave this server (B36).
        if client.hello.serves("spawn.caller_env") {
            params.caller_env = Some(herd_core::utf8_environment().into_iter().collect());
        }
        let params = herd_protocol::to_params(&params).unwrap_or_default();
        match client.call(m::Spawn::NAME, params).await {
            Ok(info) => crate::client::answer_of::<m::Spawn>(info)
                .map_err(|err| refused(format!("{err:#}"))),
            Err(CallError::Rpc(err)) => {
                let mut answer = TerminalResult::refused(err.message);
                // A null verdict or infrastructure is left out, as every null is.
                if err.code == protocol::GUARDED {
                    answer.verdict = err.data;
                } else if err.code == protocol::DISPATCH_FAILED {
                    answer.infrastructure = err.data.as_ref().and_then(dispatch_failed);
                }
                Err(Answer::error(results::to_value(&answer)))
            }
            Err(CallError::Io(err)) => Err(refused(err.to_string())),
        }
    }

    async fn run_terminal(
        &self,
        req: &TerminalRequest,
        context: &RequestContext<RoleServer>,
    ) -> Answer {
        let spawned = match self.start(req, req.notify).await {
            Ok(spawned) => spawned,
            Err(answer) => return answer,
        };
        if req.background {
            return Answer::ok(background_answer(req, &spawned));
        }
        let session_id = spawned.session_id;
        let timeout = req
            .timeout
            .unwrap_or(FOREGROUND_DEFAULT_TIMEOUT)
            .min(FOREGROUND_MAX_TIMEOUT);
        match self.wait_in_foreground(&session_id, timeout, context).await {
            Ok(exited) => exited,
            Err(stopped) => self.to_background(&session_id, timeout, stopped).await,
        }
    }

    /// Waits for the exit up to `timeout` seconds, telling the client of progress
    /// when it asked; the answer, or why the wait stopped short.
    async fn wait_in_foreground(
        &self,
        session_id: &str,
        timeout: u64,
        context: &RequestContext<RoleServer>,
    ) -> Result<Answer, Stopped> {
        let started = Instant::now();
        let deadline = started + Duration::from_secs(timeout);
        let progress = context.meta.get_progress_token();
        let mut client = match self.client().await {
            Ok(client) => client,
            Err(err) => return Ok(Answer::error(err)),
        };
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Stopped::TimedOut);
            }
            let slice = if progress.is_some() {
                left.min(PROGRESS_EVERY)
            } else {
                left
            };
            let params =
                herd_protocol::to_params(&wait_for(session_id, slice.as_secs_f64(), false))
                    .unwrap_or_default();
            let waited = tokio::select! {
                waited = client.call(m::Wait::NAME, params) => waited,
                () = context.ct.cancelled() => return Err(Stopped::Cancelled),
            };
            match waited.map(crate::client::answer_of::<m::Wait>) {
                Ok(Ok(waited)) if waited.status == WaitStatus::Exited => {
                    return Ok(self.exited(&waited).await);
                }
                Ok(Ok(_)) => {}
                Ok(Err(unread)) => return Ok(refused(format!("{unread:#}"))),
                Err(err) => return Ok(refused(err.into_anyhow().to_string())),
            }
            if let Some(token) = &progress {
                let message = self.progress_message(session_id, started).await;
                let note = ProgressNotificationParam::new(
                    token.clone(),
                    started.elapsed().as_secs_f64().floor(),
                )
                .with_total(timeout as f64)
                .with_message(message);
                if let Err(err) = context.peer.notify_progress(note).await {
                    tracing::debug!(error = %err, "progress not sent");
                }
            }
        }
    }

    /// "running for 6s; 12 lines of output; last: …" for a progress notification.
    async fn progress_message(&self, session_id: &str, started: Instant) -> String {
        let page = self.ask_for::<m::Log>(&log_page(session_id, None, 1)).await;
        let elapsed = started.elapsed().as_secs();
        let Ok(page) = page else {
            return format!("running for {elapsed}s");
        };
        let lines = page.total_lines;
        let last: String = page
            .output
            .trim_end()
            .chars()
            .take(PROGRESS_LINE_CHARS)
            .collect();
        if last.is_empty() {
            format!("running for {elapsed}s; {lines} lines of output")
        } else {
            format!("running for {elapsed}s; {lines} lines of output; last: {last}")
        }
    }

    /// The job outlived its foreground window or the client cancelled the call: it
    /// keeps running with notify on, or, if it finished meanwhile, the answer has
    /// its exit. Exactly one of the two (B24).
    async fn to_background(&self, session_id: &str, timeout: u64, stopped: Stopped) -> Answer {
        let adopted = self.ask_for::<m::Adopt>(&IdParams::new(session_id)).await;
        let is_error = adopted.is_err();
        let adoption = adopted.as_ref().map_or("", |a| a.adoption.as_str());
        if adoption == "finished" {
            return match self
                .ask_for::<m::Wait>(&wait_for(session_id, 1.0, false))
                .await
            {
                Ok(waited) => self.exited(&waited).await,
                Err(failed) => Answer::error(failed),
            };
        }
        // A poll that fails leaves the output out (the job runs on all the same).
        let preview = self
            .ask_for::<m::Poll>(&IdParams::new(session_id))
            .await
            .map_or(Value::Null, |polled| Value::from(polled.output_preview));
        let why = match stopped {
            Stopped::TimedOut => format!("The command was still running after {timeout}s"),
            Stopped::Cancelled => "The call was cancelled".to_owned(),
        };
        let then = match adoption {
            "notified" => {
                "you will be told once when it exits. Use process(action=\"poll\"|\"wait\"|\"kill\", session_id=...) to follow it; do other work meanwhile."
            }
            "child_not_notified" => {
                "as a child agent you will not be notified: wait on it, kill it, or hand it off."
            }
            _ if is_error => {
                "this daemon cannot turn notify on for it (it predates adopt), so poll or wait on it."
            }
            _ => "poll or wait on it.",
        };
        Answer::ok(results::to_value(&TerminalResult {
            output: preview,
            common: Common {
                status: Some("running".to_owned()),
                session_id: Some(session_id.to_owned()),
                note: Some(format!(
                    "{why}, so it was moved to the background (not killed) as {session_id}: {then}"
                )),
                ..Common::default()
            },
            notify_on_complete: Some(Value::Bool(adoption == "notified")),
            ..TerminalResult::default()
        }))
    }
}

/// The answer to a background start: no exit fields, the job has not finished.
fn background_answer(req: &TerminalRequest, spawned: &SpawnAnswer) -> Value {
    let queued = spawned.queued;
    let answer = TerminalResult {
        output: Value::from(if queued {
            "Background process queued"
        } else {
            "Background process started"
        }),
        common: Common {
            status: Some(if queued { "queued" } else { "running" }.to_owned()),
            session_id: Some(spawned.session_id.clone()),
            pid: u64::try_from(spawned.pid).ok(),
            note: spawned.note.clone(),
            ..Common::default()
        },
        // The spawn answer's fields passed on when the daemon gave them.
        notify_on_complete: Some(Value::Bool(spawned.notify_on_complete)),
        watch_patterns: (!spawned.watch_patterns.is_empty())
            .then(|| Value::from(spawned.watch_patterns.clone())),
        heartbeat_seconds: spawned.heartbeat_seconds.map(Value::from),
        time_limit_seconds: spawned.time_limit_seconds.map(Value::from),
        pty_note: spawned.pty_note.clone().map(Value::from),
        // Which dispatch a job meant to outlive its agent got (B34).
        persist_on_release: req.persist.then_some(true),
        dispatch: Some(spawned.dispatch.as_str())
            .filter(|d| req.persist && !d.is_empty())
            .map(Value::from),
        hint: (!req.notify && req.watch.is_empty()).then(|| {
            "notify=false: nothing will tell you when this finishes; check it with process(action=\"poll\")".to_owned()
        }),
        ..TerminalResult::default()
    };
    results::to_value(&answer)
}

/// `DISPATCH_FAILED`'s `infrastructure`, when its data reads as the protocol says.
fn dispatch_failed(data: &Value) -> Option<Value> {
    match read_part::<DispatchFailedData>(m::Spawn::NAME, "the error's data: ", data) {
        Ok(data) => Some(Value::Bool(data.infrastructure)),
        Err(err) => {
            tracing::debug!(error = %err, "a dispatch failure without its infrastructure flag");
            None
        }
    }
}

impl Server {
    /// [`exited_result`] with its output within the agent's budget.
    pub(super) async fn exited(&self, waited: &WaitAnswer) -> Answer {
        let mut result = exited_result(waited);
        if let Some(budgeted) = self.budget_output(waited).await {
            result.output = Value::from(budgeted.output);
            result.common.total_lines = Some(budgeted.total_lines);
            result.common.omitted_lines = budgeted.omitted_lines;
            result.common.output_cut = None;
        }
        let mut answer = Answer::ok(results::to_value(&result));
        // The answer carries the exit: its completion is not sent again as a notice.
        answer.answered = Some(waited.session_id.clone());
        answer
    }
}

/// The result for a job that exited while its caller waited.
fn exited_result(waited: &WaitAnswer) -> TerminalResult {
    let cut = waited.output_cut;
    let log_path = (cut && !waited.log_path.as_os_str().is_empty())
        .then(|| Value::from(waited.log_path.to_string_lossy().into_owned()));
    TerminalResult {
        output: Value::from(waited.output.as_str()),
        common: Common {
            status: Some("exited".to_owned()),
            session_id: Some(waited.session_id.clone()),
            // `null` when a signal ended it (left out of the result, as every null).
            exit_code: Some(Value::from(waited.exit_code)),
            signal: waited.signal.map(Value::from),
            completion_reason: waited.completion_reason.map(|r| Value::from(r.as_str())),
            output_cut: cut.then_some(true),
            log_path,
            ..Common::default()
        },
        ..TerminalResult::default()
    }
}

/// Validates `terminal` arguments, naming the argument that is wrong. `null` is "not given"
/// for every optional argument, as strict-mode clients send it.
pub(super) fn terminal_request(args: &JsonObject) -> Result<TerminalRequest, String> {
    let command = match args.get("command") {
        Some(Value::String(c)) if !c.trim().is_empty() => c.clone(),
        _ => return Err("command is required: the shell command line to run".to_owned()),
    };
    let flag = |key: &str| -> Result<bool, String> {
        match args.get(key) {
            None | Some(Value::Null) => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(other) => Err(format!("{key} must be true or false (got {other})")),
        }
    };
    let background = flag("background")?;
    let pty = flag("pty")?;
    let persist = flag("persist_on_release")?;
    let (notify_given, watch) = notify_arg(args)?;
    // A background job tells its agent when it ends unless told not to.
    let notify = notify_given.unwrap_or(background);
    let heartbeat = heartbeat_arg(args)?;
    let timeout = match args.get("timeout") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(t) if (1..=FOREGROUND_MAX_TIMEOUT).contains(&t) => Some(t),
            _ => {
                return Err(format!(
                    "timeout must be a whole number of seconds from 1 to {FOREGROUND_MAX_TIMEOUT} (got {v}); \
                     for longer jobs use background=true with notify=true"
                ));
            }
        },
    };
    let workdir = workdir_arg(args)?;
    let time_limit = match args.get("time_limit") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(t) if (1..=TIME_LIMIT_MAX_SECONDS).contains(&t) => Some(t),
            _ => {
                return Err(format!(
                    "time_limit must be a whole number of seconds from 1 to {TIME_LIMIT_MAX_SECONDS} (got {v}); \
                     null or leaving it out means no limit"
                ));
            }
        },
    };
    let host = host_arg(args)?;
    let kill_leftovers = match args.get("kill_leftovers") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(v) => return Err(format!("kill_leftovers must be true or false (got {v})")),
    };
    let limits = limits_arg(args)?;
    let (ready, ready_port) = ready_args(args)?;
    let queue = super::groups::queue_arg(args)?;
    if !background {
        if ready.is_some() || ready_port.is_some() {
            return Err("ready and ready_port need background=true".to_owned());
        }
        if queue.queues() {
            return Err("group, after and after_ready need background=true".to_owned());
        }
        if notify_given == Some(true) || !watch.is_empty() || heartbeat.is_some() {
            return Err("notify and heartbeat need background=true: a foreground command already returns its result".to_owned());
        }
        if pty {
            return Err("pty requires background=true (interactive programs run in the background; talk to them with process(action=\"submit\"))".to_owned());
        }
        if persist {
            return Err("persist_on_release requires background=true".to_owned());
        }
    }
    Ok(TerminalRequest {
        command,
        background,
        pty,
        // A heartbeat implies notification on completion.
        notify: notify || heartbeat.is_some(),
        notify_given: notify_given.is_some() || heartbeat.is_some(),
        watch,
        heartbeat,
        persist,
        timeout,
        workdir,
        time_limit,
        host,
        kill_leftovers,
        limits,
        ready,
        ready_port,
        queue,
    })
}

/// `ready` (a regex, checked by the daemon) and `ready_port` (1 to 65535).
fn ready_args(args: &JsonObject) -> Result<(Option<String>, Option<u16>), String> {
    let ready = match args.get("ready") {
        None | Some(Value::Null) => None,
        Some(Value::String(pattern)) => Some(pattern.clone()),
        Some(v) => return Err(format!("ready must be a regex string (got {v})")),
    };
    let ready_port = match args.get("ready_port") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64().and_then(|n| u16::try_from(n).ok()) {
            Some(port) if port > 0 => Some(port),
            _ => {
                return Err(format!(
                    "ready_port must be a TCP port from 1 to 65535 (got {v})"
                ));
            }
        },
    };
    Ok((ready, ready_port))
}

/// `memory` ("2G", or a whole number of bytes), `cpus` and `pids`: bounds on the tree.
fn limits_arg(args: &JsonObject) -> Result<herd_core::Limits, String> {
    let memory_bytes = match args.get("memory") {
        None | Some(Value::Null) => None,
        Some(Value::String(text)) => {
            Some(crate::sizes::parse_memory(text).map_err(|e| format!("memory: {e}"))?)
        }
        Some(v) => match v.as_u64() {
            Some(n) => Some(
                crate::sizes::parse_memory(&n.to_string()).map_err(|e| format!("memory: {e}"))?,
            ),
            None => {
                return Err(format!(
                    "memory must be a size such as \"512M\" or \"2G\" (got {v})"
                ));
            }
        },
    };
    let cpu_millis = match args.get("cpus") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_f64() {
            Some(n) => {
                Some(crate::sizes::parse_cpus(&n.to_string()).map_err(|e| format!("cpus: {e}"))?)
            }
            None => {
                return Err(format!(
                    "cpus must be a number of CPUs from 0.01 to 1024, e.g. 1.5 (got {v})"
                ));
            }
        },
    };
    let pids = match args.get("pids") {
        None | Some(Value::Null) => None,
        Some(v) => match v.as_u64() {
            Some(n) if (1..=crate::sizes::PIDS_MAX).contains(&n) => Some(n),
            _ => {
                return Err(format!(
                    "pids must be a whole number from 1 to {} (got {v})",
                    crate::sizes::PIDS_MAX
                ));
            }
        },
    };
    Ok(herd_core::Limits {
        memory_bytes,
        cpu_millis,
        pids,
    })
}

/// `notify`: a flag, or a list of output patterns to watch for; `None` when not given.
fn notify_arg(args: &JsonObject) -> Result<(Option<bool>, Vec<String>), String> {
    Ok(match args.get("notify") {
        None | Some(Value::Null) => (None, Vec::new()),
        Some(Value::Bool(b)) => (Some(*b), Vec::new()),
        Some(Value::Array(items)) => {
            let mut patterns = Vec::new();
            for item in items {
                match item.as_str() {
                    Some(p) if !p.is_empty() => patterns.push(p.to_owned()),
                    _ => {
                        return Err(format!(
                            "notify patterns must be non-empty strings (got {item})"
                        ));
                    }
                }
            }
            // A list watches for its patterns; the exit still wakes once (B20).
            (Some(!patterns.is_empty()), patterns)
        }
        Some(other) => {
            return Err(format!(
                "notify must be true/false or a list of output patterns to watch for (got {other})"
            ));
        }
    })
}

/// `heartbeat`: seconds between heartbeats; 0 or absent for none.
fn heartbeat_arg(args: &JsonObject) -> Result<Option<u64>, String> {
    Ok(match args.get("heartbeat") {
        None | Some(Value::Null) => None,
        Some(Value::Number(n)) if n.as_u64().is_some_and(|s| s <= HEARTBEAT_MAX_SECONDS) => {
            n.as_u64().filter(|&s| s > 0)
        }
        Some(_) => {
            return Err(format!(
                "heartbeat must be a whole number of seconds from 0 to {HEARTBEAT_MAX_SECONDS} \
                 (0 disables; positive values are clamped to min 60)."
            ));
        }
    })
}

/// `workdir`: a directory without shell metacharacters; `""` is "not given".
fn workdir_arg(args: &JsonObject) -> Result<Option<String>, String> {
    Ok(match args.get("workdir") {
        None | Some(Value::Null) => None,
        // A strict-mode client that means "no workdir" may send "".
        Some(Value::String(w)) if w.is_empty() => None,
        Some(Value::String(w)) => {
            if w.chars().any(|c| "`$;&|<>(){}\n\r*?!\"'\\".contains(c)) {
                return Err(format!(
                    "workdir contains characters that are not allowed: {w}"
                ));
            }
            Some(w.clone())
        }
        Some(other) => return Err(format!("workdir must be a string (got {other})")),
    })
}

/// `host`: the name of a `[hosts.NAME]` table, or absent for this machine.
fn host_arg(args: &JsonObject) -> Result<Option<String>, String> {
    Ok(match args.get("host") {
        None | Some(Value::Null) => None,
        Some(Value::String(h)) if h.is_empty() => None,
        Some(Value::String(h)) if crate::config::is_host_name(h) => Some(h.clone()),
        Some(other) => {
            return Err(format!(
                "host must be the name of a [hosts.NAME] table of herd's config.toml ([a-z0-9][a-z0-9_-]{{0,31}}; got {other})"
            ));
        }
    })
}

/// Refuses an option the running daemon does not serve (it would refuse or ignore
/// it), saying what to do.
fn refuse_what_the_daemon_lacks(
    req: &TerminalRequest,
    hello: &crate::client::Hello,
) -> Result<(), Answer> {
    // An older daemon would refuse `host`; say so instead.
    if req.host.is_some() && !hello.serves("hosts") {
        return Err(refused(format!(
            "host needs a newer herd daemon: the running one (herd {}) has no host links; \
             ask the user to run `herd shutdown --keep-jobs`, or call again without host",
            hello.daemon
        )));
    }
    // An older daemon would ignore the limit and let the job run on.
    if req.time_limit.is_some() && !hello.serves("spawn.time_limit") {
        return Err(refused(format!(
            "time_limit needs a newer herd daemon: the running one (herd {}) would ignore it; \
             ask the user to run `herd shutdown --keep-jobs`, or call again without time_limit",
            hello.daemon
        )));
    }
    if !req.limits.is_empty() && !hello.serves("spawn.limits") {
        return Err(refused(format!(
            "memory, cpus and pids need a newer herd daemon: the running one (herd {}) would ignore them; \
             ask the user to run `herd shutdown --keep-jobs`, or call again without them",
            hello.daemon
        )));
    }
    if (req.ready.is_some() || req.ready_port.is_some()) && !hello.serves("spawn.ready") {
        return Err(refused(format!(
            "ready and ready_port need a newer herd daemon (herd {} runs); ask the user to run `herd shutdown --keep-jobs`",
            hello.daemon
        )));
    }
    if req.queue.queues() && !hello.serves("queue") {
        return Err(refused(format!(
            "group, after and after_ready need a newer herd daemon: the running one (herd {}) has no queue; \
             ask the user to run `herd shutdown --keep-jobs`, or call again without them",
            hello.daemon
        )));
    }
    if req.kill_leftovers && !hello.serves("spawn.kill_leftovers") {
        return Err(refused(format!(
            "kill_leftovers needs a newer herd daemon: the running one (herd {}) would ignore it; \
             ask the user to run `herd shutdown --keep-jobs`, or call again without kill_leftovers",
            hello.daemon
        )));
    }
    Ok(())
}
