//! The events a daemon publishes to an owner: read by `drain` (in its `events`) and
//! streamed by `events.follow` (as `event` notes). Each carries `type` (its kind)
//! and `event_id` (what `events.ack` names it by).
//!
//! [`Event`] has no variant for a type it does not know: a client reads an event's
//! [`EventEnvelope`] first (what every event carries), then, when its type is one
//! of [`Event::TYPES`], the event itself. An event type a later daemon adds is so
//! still an event, shown by its envelope and acknowledged by its id: a protocol-1
//! client keeps working against newer daemons.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::answers::{CompletionReason, Leftover};

/// Who and what an event about one session is about.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct About {
    /// The session.
    pub session_id: String,
    /// The container key.
    pub task_id: String,
    /// The owner the event is delivered to.
    pub owner_task_id: String,
    /// The host's session key.
    #[serde(default)]
    pub session_key: Option<String>,
    /// The command line (secrets masked).
    pub command: String,
}

/// One event. The session's fields ([`About`]) are flattened into the event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Event {
    /// A session finished; exactly one per session.
    Completion {
        /// The session.
        #[serde(flatten)]
        about: About,
        /// The exit code, if it exited normally.
        #[serde(default)]
        exit_code: Option<i32>,
        /// The signal that ended it, if one did.
        #[serde(default)]
        signal: Option<i32>,
        /// Why it finished.
        completion_reason: CompletionReason,
        /// Who killed it, if herd did.
        #[serde(default)]
        termination_source: Option<String>,
        /// Sized output, through the output pipeline.
        output: String,
        /// Output was cut; `log_path` has the rest.
        output_cut: bool,
        /// The complete log.
        log_path: PathBuf,
        /// RFC 3339 UTC.
        started_at: String,
        /// RFC 3339 UTC.
        finished_at: String,
        /// Why a child agent handed the session over.
        #[serde(default)]
        handoff_note: Option<String>,
        /// Pids of the process group still alive when the reader stopped.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        descendants_alive: Vec<i32>,
        /// Processes of the tree that outlived its main process.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        leftovers: Vec<Leftover>,
        /// Output bytes the log did not keep.
        #[serde(default, skip_serializing_if = "is_zero")]
        bytes_not_kept: u64,
        /// How many runs a restarting job made (capability `spawn.restart`).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        runs: Option<u32>,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// A running session's periodic report.
    Heartbeat {
        /// The session.
        #[serde(flatten)]
        about: About,
        /// 1 for the first heartbeat.
        seq: u64,
        /// The interval in seconds.
        interval: u64,
        /// Seconds since the spawn.
        elapsed: u64,
        /// The latest output.
        output: String,
        /// RFC 3339 UTC.
        started_at: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// A watch pattern matched the output.
    WatchMatch {
        /// The session.
        #[serde(flatten)]
        about: About,
        /// The pattern.
        pattern: String,
        /// The matching output.
        output: String,
        /// Matches not reported since the last one.
        suppressed: u64,
        /// RFC 3339 UTC.
        matched_at: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// A session's watch was turned off (too many matches).
    WatchDisabled {
        /// The session.
        #[serde(flatten)]
        about: About,
        /// Matches not reported.
        suppressed: u64,
        /// Why.
        message: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// A session became ready (capability `spawn.ready`).
    Ready {
        /// The session.
        #[serde(flatten)]
        about: About,
        /// `pattern` or `port`.
        by: String,
        /// The matching line or the port.
        detail: String,
        /// RFC 3339 UTC.
        ready_at: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// A restarting job runs again (capability `spawn.restart`).
    Retry {
        /// The session.
        #[serde(flatten)]
        about: About,
        /// This run (2 for the first restart).
        run: u32,
        /// The most runs.
        max_runs: u32,
        /// How the previous run ended.
        previous: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// The home's watch matches overflowed: watch events are suppressed.
    WatchOverflowTripped {
        /// Why.
        message: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// Watch events flow again.
    WatchOverflowReleased {
        /// How many were suppressed.
        suppressed: u64,
        /// Detail.
        message: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
    /// The owner's queue was full: events were folded into this one.
    QueueFolded {
        /// Heartbeats folded.
        heartbeats: u64,
        /// Watch events folded.
        watch_events: u64,
        /// Completions folded (their results stay readable).
        completions: u64,
        /// Detail.
        message: String,
        /// What `events.ack` names it by.
        #[serde(default)]
        event_id: String,
    },
}

impl Event {
    /// The `type` of each event this crate reads as an [`Event`], as the wire
    /// spells it (a test checks it against the enum).
    pub const TYPES: &'static [&'static str] = &[
        "completion",
        "heartbeat",
        "watch_match",
        "watch_disabled",
        "ready",
        "retry",
        "watch_overflow_tripped",
        "watch_overflow_released",
        "queue_folded",
    ];

    /// Whether an event of type `kind` reads as an [`Event`].
    pub fn knows(kind: &str) -> bool {
        Event::TYPES.contains(&kind)
    }

    /// What `events.ack` names the event by.
    pub fn event_id(&self) -> &str {
        match self {
            Event::Completion { event_id, .. }
            | Event::Heartbeat { event_id, .. }
            | Event::WatchMatch { event_id, .. }
            | Event::WatchDisabled { event_id, .. }
            | Event::Ready { event_id, .. }
            | Event::Retry { event_id, .. }
            | Event::WatchOverflowTripped { event_id, .. }
            | Event::WatchOverflowReleased { event_id, .. }
            | Event::QueueFolded { event_id, .. } => event_id,
        }
    }

    /// The session the event is about, if any.
    pub fn about(&self) -> Option<&About> {
        match self {
            Event::Completion { about, .. }
            | Event::Heartbeat { about, .. }
            | Event::WatchMatch { about, .. }
            | Event::WatchDisabled { about, .. }
            | Event::Ready { about, .. }
            | Event::Retry { about, .. } => Some(about),
            Event::WatchOverflowTripped { .. }
            | Event::WatchOverflowReleased { .. }
            | Event::QueueFolded { .. } => None,
        }
    }
}

/// What every event carries, whatever its `type`: how a client reads an event
/// before it knows the type (the module's doc says why). The texts are those
/// protocol 1's events carry where they carry them; one of another type (a later
/// daemon's event) reads as none, so no event is unreadable for them.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct EventEnvelope {
    /// The event's type: one of [`Event::TYPES`], or a later daemon's.
    #[serde(rename = "type")]
    pub kind: String,
    /// What `events.ack` names it by (absent from daemons before `events.ack`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_id: Option<String>,
    /// The session it is about, for an event about one.
    #[serde(
        default,
        deserialize_with = "text_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub session_id: Option<String>,
    /// That session's command line (secrets masked).
    #[serde(
        default,
        deserialize_with = "text_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub command: Option<String>,
    /// The output it carries, if any.
    #[serde(
        default,
        deserialize_with = "text_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub output: Option<String>,
    /// What it says, if anything.
    #[serde(
        default,
        deserialize_with = "text_or_none",
        skip_serializing_if = "Option::is_none"
    )]
    pub message: Option<String>,
}

/// A text field of an [`EventEnvelope`]: a string, else none.
fn text_or_none<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(match serde_json::Value::deserialize(d)? {
        serde_json::Value::String(text) => Some(text),
        _ => None,
    })
}

/// `drain`'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "DrainAnswer")]
pub struct DrainAnswer<E = Event> {
    /// The events, oldest first (the daemon writes them from its registry's own
    /// event type, whose fields are [`Event`]'s).
    pub events: Vec<E>,
    /// The events as text for a model's context ("" when none).
    pub rendered: String,
    /// The lease to acknowledge them by (a leased drain with events).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<u64>,
}

/// The `pending` note of `events.follow` with `peek` (capability `events.pending`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Pending {
    /// Events waiting for the owner.
    pub count: u64,
}

/// The `sessions` note of `sessions.follow`: the home's sessions changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct SessionsChanged {
    /// Grows with every change.
    pub generation: u64,
}

/// A `log` note of `logs.follow`, `logs.dump` and `spawn` with `follow`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogNote {
    /// Output, through the output pipeline.
    pub output: String,
    /// The byte after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_byte: Option<u64>,
}

/// The params of a `log.bytes` frame's header (capability `logs.raw`): that many
/// bytes of output follow the header line, unescaped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct LogBytes {
    /// Bytes that follow.
    pub len: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

#[cfg(test)]
mod tests;
