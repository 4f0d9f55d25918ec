//! Events produced elsewhere: a far host's completions, heartbeats and watch
//! wakes, published into a local owner's queue.
//!
//! The daemon's host link drains a far owner with a lease and hands each event
//! here under the far session's qualified id (`HOST:proc_…`) and the local owner
//! it belongs to. A completion is committed to the home's ledger first, keyed by
//! that id: a replay of one already committed (the link crashed between this
//! commit and the far acknowledgement) is dropped, and one committed but not yet
//! delivered survives a restart of this daemon like a local one. Other
//! events are not durable here, as local ones are not; the link keeps their keys.

use herd_hooks::Stored;
use serde::Deserialize;
use serde_json::Value;

use super::hooks_room::Hooks;
use crate::event::Event;
use crate::id::SessionId;
use crate::registry::Registry;

/// What [`Registry::publish_external`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum External {
    /// Queued for the owner.
    Queued,
    /// A completion the ledger already holds: queued before, dropped now.
    Duplicate,
    /// Not a per-session event herd knows (or not readable): dropped.
    Unknown,
    /// The ledger could not be written: not queued, so the caller must not
    /// acknowledge it upstream.
    NotCommitted,
}

/// The per-session events of the wire, as far as they are rebuilt here.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    Heartbeat {
        task_id: String,
        session_key: Option<String>,
        command: Stored,
        seq: u64,
        interval: u64,
        elapsed: u64,
        output: Stored,
        started_at: String,
    },
    WatchMatch {
        task_id: String,
        session_key: Option<String>,
        command: Stored,
        pattern: String,
        output: Stored,
        suppressed: u64,
        /// Absent from a far herd older than the field.
        #[serde(default)]
        matched_at: String,
    },
    WatchDisabled {
        task_id: String,
        session_key: Option<String>,
        command: Stored,
        suppressed: u64,
        message: String,
    },
}

impl Registry {
    /// Publishes `event` (an event's wire JSON, as a far daemon's drain answers
    /// it) for `owner` under session id `id` (a qualified one): the event's own
    /// session id and owner are replaced by them. See the module docs.
    pub fn publish_external(&self, id: &SessionId, owner: &str, event: &Value) -> External {
        let Some(event) = rebuild(id, owner, event, &self.inner.hooks) else {
            return External::Unknown;
        };
        if matches!(event, Event::Completion { .. }) {
            match self.inner.durable.commit_external(&event) {
                Some(true) => {}
                Some(false) => return External::Duplicate,
                None => return External::NotCommitted,
            }
        }
        self.inner.table.enqueue(owner, event.clone());
        self.inner.outbox.broadcast(event);
        External::Queued
    }
}

/// The event `value` as this home's, under `id` and `owner`, its command and output
/// redacted again through `hooks` (a far herd's rules may differ from ours).
fn rebuild(id: &SessionId, owner: &str, value: &Value, hooks: &Hooks) -> Option<Event> {
    let mut value = value.clone();
    let object = value.as_object_mut()?;
    object.insert("session_id".into(), Value::String(id.as_str().to_owned()));
    object.insert("owner_task_id".into(), Value::String(owner.to_owned()));
    if object.get("type").and_then(Value::as_str) == Some("completion") {
        return super::durable::event_from_ledger(&value, hooks);
    }
    let session_id = id.clone();
    let owner_task_id = owner.to_owned();
    Some(match serde_json::from_value::<Wire>(value).ok()? {
        Wire::Heartbeat {
            task_id,
            session_key,
            command,
            seq,
            interval,
            elapsed,
            output,
            started_at,
        } => {
            let command = hooks.recheck_command(command);
            let output = hooks.recheck_output(&command, output);
            Event::Heartbeat {
                session_id,
                task_id,
                owner_task_id,
                session_key,
                command,
                seq,
                interval,
                elapsed,
                output,
                started_at,
            }
        }
        Wire::WatchMatch {
            task_id,
            session_key,
            command,
            pattern,
            output,
            suppressed,
            matched_at,
        } => {
            let command = hooks.recheck_command(command);
            let output = hooks.recheck_output(&command, output);
            Event::WatchMatch {
                session_id,
                task_id,
                owner_task_id,
                session_key,
                command,
                pattern,
                output,
                suppressed,
                matched_at,
            }
        }
        Wire::WatchDisabled {
            task_id,
            session_key,
            command,
            suppressed,
            message,
        } => Event::WatchDisabled {
            session_id,
            task_id,
            owner_task_id,
            session_key,
            command: hooks.recheck_command(command),
            suppressed,
            message,
        },
    })
}

#[cfg(test)]
mod tests;
