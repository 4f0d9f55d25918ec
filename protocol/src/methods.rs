//! Every method: its name, the capability that added it, its params and answer
//! types, and the notes it streams. [`Method`] ties them for a typed call
//! (`client.call::<Poll>(&IdParams::new(id))`); [`ALL`] lists them for the schema
//! and the method table.

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::answers::{self, Open};
use crate::events;
use crate::params::{self, NoParams};

/// A method of the daemon.
pub trait Method {
    /// Its name on the wire.
    const NAME: &'static str;
    /// Its params.
    type Params: Serialize + DeserializeOwned + JsonSchema;
    /// Its answer (the final one, for a streaming method).
    type Answer: Serialize + DeserializeOwned + JsonSchema;
}

/// Builds one type's schema (a `$ref` into the generator's definitions).
pub type SchemaOf = fn(&mut SchemaGenerator) -> Schema;

/// A method as the schema and the method table describe it.
#[derive(Debug, Clone, Copy)]
pub struct Info {
    /// Its name on the wire.
    pub name: &'static str,
    /// The capability that added it; `None` for protocol 1's.
    pub capability: Option<&'static str>,
    /// One line on what it does.
    pub summary: &'static str,
    /// The schema of its params.
    pub params: SchemaOf,
    /// The schema of its answer.
    pub answer: SchemaOf,
    /// The notes it streams before its answer: note method and payload schema.
    pub notes: &'static [(&'static str, SchemaOf)],
}

fn schema_of<T: JsonSchema>(generator: &mut SchemaGenerator) -> Schema {
    generator.subschema_for::<T>()
}

macro_rules! methods {
    ($($ty:ident $name:literal $cap:expr, $params:ty => $answer:ty, [$($note:literal: $note_ty:ty),*], $summary:literal;)*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $summary)]
            #[derive(Debug, Clone, Copy)]
            pub struct $ty;

            impl Method for $ty {
                const NAME: &'static str = $name;
                type Params = $params;
                type Answer = $answer;
            }
        )*

        /// Every method, in the order the method table lists them.
        pub const ALL: &[Info] = &[
            $(Info {
                name: $name,
                capability: $cap,
                summary: $summary,
                params: schema_of::<$params>,
                answer: schema_of::<$answer>,
                notes: &[$(($note, schema_of::<$note_ty>)),*],
            },)*
        ];
    };
}

use crate::capabilities as cap;

methods! {
    Hello "hello" None, params::HelloParams => answers::HelloAnswer, [],
        "the handshake, first on every connection: the protocol version and capabilities.";
    Spawn "spawn" None, params::SpawnParams => answers::SpawnAnswer,
        ["spawned": answers::SpawnAnswer, "log": events::LogNote, "log.bytes": events::LogBytes],
        "start a job; with `follow`, a `spawned` note, its log and its result as `logs.follow` with `result` answers.";
    Restart "restart" Some(cap::RESTART), params::RestartParams => answers::SpawnAnswer, [],
        "stop a session and start its command again in its place.";
    List "list" None, params::ListParams => answers::ListAnswer, [],
        "sessions by owner, state, age and a newest-N limit.";
    Lookup "lookup" None, params::IdParams => answers::LookupAnswer, [],
        "a session's full id and owner from an id, a prefix or a name.";
    Poll "poll" None, params::IdParams => answers::PollAnswer, [],
        "a session's state and output preview.";
    Log "log" None, params::LogParams => answers::LogAnswer, [],
        "one page of a session's output, by lines.";
    LogChunk "log_chunk" None, params::FollowParams => answers::LogChunk, [],
        "a byte range of a session's log, as text (at most 1 MiB).";
    Wait "wait" None, params::WaitParams => answers::WaitAnswer, [],
        "until the session ends (or is ready), or the timeout; ends when its client leaves.";
    Kill "kill" None, params::IdParams => answers::KillAnswer, [],
        "kill a session's whole tree.";
    Write "write" None, params::StdinParams => answers::StdinAnswer, [],
        "write text to a session's standard input.";
    Submit "submit" None, params::StdinParams => answers::StdinAnswer, [],
        "write text and the Enter key.";
    Close "close" None, params::StdinParams => answers::StdinAnswer, [],
        "close a session's standard input.";
    Resize "resize" None, params::ResizeParams => answers::StdinAnswer, [],
        "a PTY session's window size.";
    Drain "drain" None, params::DrainParams => events::DrainAnswer, [],
        "take the owner's pending events (leased with `lease`).";
    DrainAck "drain.ack" Some(cap::DRAIN_LEASE), params::LeaseParams => answers::LeaseAckAnswer, [],
        "the leased events were handed on.";
    DrainRelease "drain.release" Some(cap::DRAIN_LEASE), params::LeaseParams => answers::ReleaseAnswer, [],
        "put a lease's events back.";
    EventsAck "events.ack" Some(cap::EVENTS_ACK), params::AckParams => answers::AckAnswer, [],
        "acknowledge events by `event_id`, on any connection.";
    Adopt "adopt" Some(cap::ADOPT), params::IdParams => answers::AdoptAnswer, [],
        "a foreground job moved to the background, notify on.";
    Clean "clean" Some(cap::CLEAN), params::CleanParams => answers::CleanAnswer, [],
        "forget finished sessions (logs and receipts too), by owner and age.";
    Handoff "handoff" None, params::HandoffParams => answers::HandoffAnswer, [],
        "hand a session from one owner to another.";
    Status "status" None, NoParams => answers::StatusAnswer, [],
        "the daemon's state: version, sessions, connections, restore, dispatch, log.";
    Scope "scope" None, NoParams => crate::daemon::ScopeAnswer, [],
        "restart-safe dispatch: whether spawns get their own systemd scope.";
    Plugins "plugins" Some(cap::PLUGINS), NoParams => crate::daemon::PluginsAnswer, [],
        "what the daemon's plugins loaded, with their counts.";
    Hosts "hosts" Some(cap::HOSTS), NoParams => crate::daemon::HostsAnswer, [],
        "the far hosts of config.toml and how their links stand.";
    Shutdown "shutdown" None, params::ShutdownParams => answers::ShutdownAnswer, [],
        "stop the daemon, killing its jobs or (`keep_jobs`) leaving them to the next.";
    EventsFollow "events.follow" None, params::EventsParams => Open,
        ["event": events::Event, "pending": events::Pending],
        "the owner's events as `event` notes (or `pending` counts with `peek`) until the client closes.";
    LogsFollow "logs.follow" None, params::FollowParams => answers::StreamEnd,
        ["log": events::LogNote, "log.bytes": events::LogBytes],
        "a session's log as `log` notes until it ends, then the end (with `result`, how it ended).";
    LogsDump "logs.dump" Some(cap::LOGS_DUMP), params::DumpParams => answers::StreamEnd,
        ["log": events::LogNote, "log.bytes": events::LogBytes],
        "a session's whole log from a byte as notes, then the end.";
    SessionsFollow "sessions.follow" Some(cap::SESSIONS_FOLLOW), NoParams => Open,
        ["sessions": events::SessionsChanged],
        "a `sessions` note whenever the home's sessions change, until the client closes.";
    GroupAdd "group.add" Some(cap::QUEUE), params::GroupParams => answers::GroupRow, [],
        "a job group with its limit of jobs at once.";
    GroupSet "group.set" Some(cap::QUEUE), params::GroupParams => answers::GroupRow, [],
        "change a group's limit.";
    GroupList "group.list" Some(cap::QUEUE), NoParams => answers::GroupList, [],
        "the groups, their limits and jobs.";
    GroupRm "group.rm" Some(cap::QUEUE), params::GroupParams => answers::GroupRemoved, [],
        "remove a group.";
    QueueLatency "queue.latency" Some(cap::QUEUE), NoParams => crate::daemon::QueueLatency, [],
        "the scheduling latency of queued jobs.";
}
