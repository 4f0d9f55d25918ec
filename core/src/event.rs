//! Events the registry publishes (completion, heartbeat, watch) and the text an agent
//! reads for them, one at a time or batched.
//!
//! [`render_events`] is the one place that turns events into agent text: a completion
//! names its status, exit code and signal name, the command, the sized output and, when
//! cut, where the rest is; a heartbeat its sequence, age and "next in"; a watch match
//! its pattern and suppressed count; watch-disabled and breaker events their message.
//! Completions drained together form one batch behind a header.

use herd_hooks::Shown;

use std::fmt::Write as _;
use std::path::PathBuf;

use serde::Serialize;

use crate::answers::CompletionReason;
use crate::{KillSource, SessionId};

/// One event, as published to `subscribe` and queued for owners.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[non_exhaustive]
pub enum Event {
    /// A session finished; exactly one per session.
    Completion {
        /// The session.
        session_id: SessionId,
        /// The container key.
        task_id: String,
        /// The owner the completion is delivered to.
        owner_task_id: String,
        /// The host's session key.
        session_key: Option<String>,
        /// The command line.
        command: Shown,
        /// The exit code, if it exited normally.
        exit_code: Option<i32>,
        /// The signal that ended it, if one did.
        signal: Option<i32>,
        /// Why it finished.
        completion_reason: CompletionReason,
        /// Who killed it, if herd did.
        termination_source: Option<KillSource>,
        /// Sized output, through the output pipeline.
        output: Shown,
        /// Output was cut; `log_path` has the rest.
        output_cut: bool,
        /// The complete log.
        log_path: PathBuf,
        /// RFC 3339 UTC.
        started_at: String,
        /// RFC 3339 UTC.
        finished_at: String,
        /// Why a child agent handed the session over.
        handoff_note: Option<String>,
        /// Pids of the session's process group still alive when the reader stopped
        /// (a descendant kept the output open after the direct child exited).
        #[serde(skip_serializing_if = "Vec::is_empty")]
        descendants_alive: Vec<i32>,
        /// Processes of its tree still alive when its main process was done, held by
        /// the session: `herd kill` ends them.
        #[serde(skip_serializing_if = "Vec::is_empty")]
        leftovers: Vec<herd_persistence::Leftover>,
        /// Output bytes the log did not keep (a full disk, or its cap): the output is
        /// incomplete. Absent when nothing was lost.
        #[serde(skip_serializing_if = "is_zero")]
        bytes_not_kept: u64,
        /// How many times the command ran under a restart policy; absent
        /// without one.
        #[serde(skip_serializing_if = "Option::is_none")]
        runs: Option<u32>,
    },
    /// Periodic output of a running session.
    Heartbeat {
        /// The session.
        session_id: SessionId,
        /// The container key.
        task_id: String,
        /// The owner.
        owner_task_id: String,
        /// The host's session key.
        session_key: Option<String>,
        /// The command line.
        command: Shown,
        /// Delivered beats so far, this one included.
        seq: u64,
        /// Seconds between beats.
        interval: u64,
        /// Seconds since the spawn.
        elapsed: u64,
        /// Output since the previous beat.
        output: Shown,
        /// RFC 3339 UTC.
        started_at: String,
    },
    /// A watch pattern matched.
    WatchMatch {
        /// The session.
        session_id: SessionId,
        /// The container key.
        task_id: String,
        /// The owner.
        owner_task_id: String,
        /// The host's session key.
        session_key: Option<String>,
        /// The command line.
        command: Shown,
        /// The pattern that matched.
        pattern: String,
        /// The matching lines.
        output: Shown,
        /// Matches suppressed by the rate limit since the last delivery.
        suppressed: u64,
        /// RFC 3339 UTC: when the match was delivered. Two identical matches of one
        /// session are told apart by it (a host link replaying a lease keys on it).
        matched_at: String,
    },
    /// Watching was turned off for a session.
    WatchDisabled {
        /// The session.
        session_id: SessionId,
        /// The container key.
        task_id: String,
        /// The owner.
        owner_task_id: String,
        /// The host's session key.
        session_key: Option<String>,
        /// The command line.
        command: Shown,
        /// Matches suppressed before disabling.
        suppressed: u64,
        /// Why.
        message: String,
    },
    /// A session became ready: once per session, by its `--ready` pattern
    /// or its `--ready-port` listener.
    Ready {
        /// The session.
        session_id: SessionId,
        /// The container key.
        task_id: String,
        /// The owner.
        owner_task_id: String,
        /// The host's session key.
        session_key: Option<String>,
        /// The command line.
        command: Shown,
        /// What made it ready: `pattern` or `port`.
        by: String,
        /// The line that matched (redacted), or `port N`.
        detail: Shown,
        /// RFC 3339 UTC.
        ready_at: String,
    },
    /// A session with a restart policy started its command again: one per
    /// restart.
    Retry {
        /// The session.
        session_id: SessionId,
        /// The container key.
        task_id: String,
        /// The owner.
        owner_task_id: String,
        /// The host's session key.
        session_key: Option<String>,
        /// The command line.
        command: Shown,
        /// The run that began (2 is the first restart).
        run: u32,
        /// The most runs the policy allows.
        max_runs: u32,
        /// How the previous run ended: `exit 1`, `signal 9`, `run's time limit`.
        previous: String,
    },
    /// The global watch breaker tripped.
    WatchOverflowTripped {
        /// The explanation.
        message: String,
    },
    /// The global watch breaker released.
    WatchOverflowReleased {
        /// Matches dropped while tripped.
        suppressed: u64,
        /// The explanation.
        message: String,
    },
    /// The owner's queue reached its cap and older events were folded out of it
    /// (heartbeats first, then watch events, then completions, which stay
    /// undelivered in the ledger); the first drain after says how many.
    QueueFolded {
        /// Heartbeats dropped.
        heartbeats: u64,
        /// Watch matches and notices dropped.
        watch_events: u64,
        /// Completions taken out of the queue (still in the ledger, and in `list`).
        completions: u64,
        /// The explanation.
        message: String,
    },
}

impl Event {
    /// The owner whose queue the event belongs to; `None` for global events.
    pub fn owner_task_id(&self) -> Option<&str> {
        match self {
            Event::Completion { owner_task_id, .. }
            | Event::Heartbeat { owner_task_id, .. }
            | Event::WatchMatch { owner_task_id, .. }
            | Event::WatchDisabled { owner_task_id, .. }
            | Event::Ready { owner_task_id, .. }
            | Event::Retry { owner_task_id, .. } => Some(owner_task_id),
            Event::WatchOverflowTripped { .. }
            | Event::WatchOverflowReleased { .. }
            | Event::QueueFolded { .. } => None,
        }
    }

    /// The event's stable id: the same event delivered twice (a lease given back, a
    /// completion replayed from the ledger after a restart, a far host's event) carries
    /// the same id, and a consumer acknowledges by it (`events.ack`). A completion's is
    /// `completion:<session id>` (one per session; the ledger keys it by the session
    /// id); a heartbeat's names its beat and age, a watch event its time; the
    /// session-less notices (breaker, fold) are named by what they say.
    pub fn event_id(&self) -> String {
        match self {
            Event::Completion { session_id, .. } => format!("{COMPLETION_ID_PREFIX}{session_id}"),
            Event::Heartbeat {
                session_id,
                seq,
                elapsed,
                ..
            } => format!("heartbeat:{session_id}:{seq}:{elapsed}"),
            Event::WatchMatch {
                session_id,
                matched_at,
                suppressed,
                ..
            } => format!("watch_match:{session_id}:{matched_at}:{suppressed}"),
            Event::WatchDisabled { session_id, .. } => format!("watch_disabled:{session_id}"),
            Event::Ready { session_id, .. } => format!("ready:{session_id}"),
            Event::Retry {
                session_id, run, ..
            } => format!("retry:{session_id}:{run}"),
            Event::WatchOverflowTripped { message } => {
                format!("watch_overflow_tripped:{:016x}", content_hash(message))
            }
            Event::WatchOverflowReleased {
                suppressed,
                message,
            } => format!(
                "watch_overflow_released:{suppressed}:{:016x}",
                content_hash(message)
            ),
            Event::QueueFolded {
                heartbeats,
                watch_events,
                completions,
                ..
            } => format!("queue_folded:{heartbeats}:{watch_events}:{completions}"),
        }
    }

    /// The event as the wire carries it: its fields, `type`, and `event_id`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut value = serde_json::to_value(self).unwrap_or(serde_json::Value::Null);
        if let Some(map) = value.as_object_mut() {
            map.insert(
                "event_id".to_owned(),
                serde_json::Value::String(self.event_id()),
            );
        }
        value
    }

    /// The session the event is about, if any.
    pub fn session_id(&self) -> Option<&SessionId> {
        match self {
            Event::Completion { session_id, .. }
            | Event::Heartbeat { session_id, .. }
            | Event::WatchMatch { session_id, .. }
            | Event::WatchDisabled { session_id, .. }
            | Event::Ready { session_id, .. }
            | Event::Retry { session_id, .. } => Some(session_id),
            Event::WatchOverflowTripped { .. }
            | Event::WatchOverflowReleased { .. }
            | Event::QueueFolded { .. } => None,
        }
    }
}

/// What starts a completion's [`Event::event_id`]; the rest is the ledger's
/// completion id (the session id).
pub const COMPLETION_ID_PREFIX: &str = "completion:";

/// The ledger's completion id an event id names; `None` for any other event's id.
pub fn completion_of(event_id: &str) -> Option<&str> {
    event_id.strip_prefix(COMPLETION_ID_PREFIX)
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A stable hash of a text (FNV-1a: the same in every build and process).
fn content_hash(text: &str) -> u64 {
    text.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Renders events as the text an agent reads. Consecutive completions form one batch;
/// a batch of two or more gets a header asking for one consolidated response.
pub fn render_events(events: &[Event]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut batch: Vec<String> = Vec::new();
    let flush = |batch: &mut Vec<String>, parts: &mut Vec<String>| {
        if batch.len() >= 2 {
            parts.push(format!(
                "[IMPORTANT: {} background processes completed. Treat these results as one batch and give one consolidated response; preserve failures and actionable results.]",
                batch.len()
            ));
        }
        parts.append(batch);
    };
    for event in events {
        if matches!(event, Event::Completion { .. }) {
            batch.push(render_one(event));
        } else {
            flush(&mut batch, &mut parts);
            parts.push(render_one(event));
        }
    }
    flush(&mut batch, &mut parts);
    parts.join("\n\n")
}

fn render_one(event: &Event) -> String {
    match event {
        Event::Completion {
            session_id,
            command,
            exit_code,
            signal,
            completion_reason,
            termination_source,
            output,
            output_cut,
            log_path,
            handoff_note,
            descendants_alive,
            leftovers,
            bytes_not_kept,
            runs,
            ..
        } => {
            let status =
                completion_status(*completion_reason, *termination_source, *signal, *exit_code);
            let mut code = exit_text(*exit_code, *signal);
            if let Some(n) = runs {
                code.push_str(&format!(
                    ", after {n} run{}",
                    if *n == 1 { "" } else { "s" }
                ));
            }
            let mut text =
                format!("[IMPORTANT: Background process {session_id} {status} ({code}).\n");
            if let Some(note) = handoff_note {
                let _ = writeln!(
                    text,
                    "Handed off to you by a subagent before it finished. Purpose: {note}"
                );
            }
            let _ = write!(text, "Command: {command}\nOutput:\n");
            if *output_cut {
                let _ = writeln!(
                    text,
                    "...(earlier output cut; the full output is in {})",
                    log_path.display()
                );
            }
            if *bytes_not_kept > 0 {
                let _ = writeln!(
                    text,
                    "...(output incomplete: {bytes_not_kept} bytes were not kept in {}; the disk was full or the log reached its cap)",
                    log_path.display()
                );
            }
            text.push_str(output);
            push_tree_notes(&mut text, session_id, descendants_alive, leftovers);
            text.push(']');
            text
        }
        Event::Heartbeat {
            session_id,
            command,
            seq,
            interval,
            elapsed,
            output,
            ..
        } => format!(
            "[Background process {session_id} heartbeat #{seq} — still running after {} (next in {interval}s when there is new output; you will also be told when it exits).\nCommand: {command}\nOutput since last heartbeat:\n{output}]",
            format_age(*elapsed)
        ),
        Event::WatchMatch {
            session_id,
            command,
            pattern,
            output,
            suppressed,
            ..
        } => {
            let mut text = format!(
                "[IMPORTANT: Background process {session_id} matched watch pattern \"{pattern}\".\nCommand: {command}\nMatched output:\n{output}"
            );
            if *suppressed > 0 {
                let _ = write!(
                    text,
                    "\n({suppressed} earlier matches were suppressed by rate limit)"
                );
            }
            text.push(']');
            text
        }
        Event::Ready { .. } | Event::Retry { .. } => render_lifecycle(event),
        Event::WatchDisabled { message, .. }
        | Event::WatchOverflowTripped { message }
        | Event::WatchOverflowReleased { message, .. }
        | Event::QueueFolded { message, .. } => format!("[IMPORTANT: {message}]"),
    }
}

/// A readiness or restart notice.
fn render_lifecycle(event: &Event) -> String {
    match event {
        Event::Ready {
            session_id,
            command,
            by,
            detail,
            ..
        } => format!(
            "[IMPORTANT: Background process {session_id} is ready ({by}: {detail}); it keeps running.\nCommand: {command}]"
        ),
        Event::Retry {
            session_id,
            command,
            run,
            max_runs,
            previous,
            ..
        } => format!(
            "[Background process {session_id} restarted: run {run} of at most {max_runs} (previous run: {previous}); you will be told when it ends.\nCommand: {command}]"
        ),
        _ => String::new(),
    }
}

/// What of a completed session's tree still runs: descendants that kept its output
/// open, and leftovers the session holds.
fn push_tree_notes(
    text: &mut String,
    session_id: &SessionId,
    descendants_alive: &[i32],
    leftovers: &[herd_persistence::Leftover],
) {
    if !descendants_alive.is_empty() {
        let _ = write!(
            text,
            "\n(descendants still running after the command exited: {descendants_alive:?})"
        );
    }
    if !leftovers.is_empty() {
        let _ = write!(
            text,
            "\n({} process(es) of its tree still running, held by the session; `herd kill {session_id}` ends them:",
            leftovers.len()
        );
        for l in leftovers {
            let _ = write!(text, "\n  {} {}", l.pid, l.command);
        }
        text.push(')');
    }
}

/// How a completed session ended, in words: `completed normally`, `terminated by herd`.
fn completion_status(
    completion_reason: CompletionReason,
    termination_source: Option<KillSource>,
    signal: Option<i32>,
    exit_code: Option<i32>,
) -> String {
    match completion_reason {
        CompletionReason::Killed => format!(
            "terminated by {}",
            termination_source.map_or("herd", KillSource::as_str)
        ),
        CompletionReason::Lost => {
            "marked lost because its exit status could not be collected".to_owned()
        }
        CompletionReason::FailedStart => "failed to start".to_owned(),
        CompletionReason::Signaled => format!(
            "was ended by {}",
            signal.map_or_else(|| "a signal".to_owned(), signal_name)
        ),
        CompletionReason::Exited if exit_code == Some(0) => "completed normally".to_owned(),
        CompletionReason::Exited => "exited".to_owned(),
    }
}

/// The exit status in words: `exit code 1`, `exit code 143, SIGTERM`, `signal 9, SIGKILL`.
fn exit_text(exit_code: Option<i32>, signal: Option<i32>) -> String {
    match (exit_code, signal) {
        (Some(c), _) if c == 143 || c == -15 || signal == Some(15) => {
            format!("exit code {c}, SIGTERM")
        }
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("signal {s}, {}", signal_name(s)),
        (None, None) => "exit status unknown".to_owned(),
    }
}

/// `SIGTERM` for 15; `signal 99` for a number that names no signal.
fn signal_name(signal: i32) -> String {
    nix::sys::signal::Signal::try_from(signal)
        .map_or_else(|_| format!("signal {signal}"), |s| s.as_str().to_owned())
}

/// `45s`, `18m`, `18m5s`, `2h`, `2h3m`.
fn format_age(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 && s % 60 == 0 => format!("{}m", s / 60),
        s if s < 3600 => format!("{}m{}s", s / 60, s % 60),
        s if (s % 3600) / 60 == 0 => format!("{}h", s / 3600),
        s => format!("{}h{}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests;
