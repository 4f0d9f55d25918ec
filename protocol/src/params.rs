//! The params of every method, as the daemon reads them.
//!
//! Each type is the daemon's own (it deserializes these, refusing an unknown field)
//! and the clients' (they serialize these). A field a later capability added is
//! optional, and a client leaves it out unless it is set, so an older daemon that
//! refuses unknown fields still takes every request that needs nothing new.

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

fn is_false(b: &bool) -> bool {
    !*b
}

/// `hello`: the handshake, the first request of every connection.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct HelloParams {
    /// The protocol version the client speaks (1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<u64>,
    /// The client's version, for the daemon's log.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
}

/// Params of a method that takes none (`status`, `scope`, `plugins`, `hosts`,
/// `group.list`, `queue.latency`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// One session by id, unique id prefix or name (`poll`, `lookup`, `kill`, `adopt`;
/// `NAME:proc_…` names a far host's job, capability `hosts`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdParams {
    /// The session.
    pub id: String,
}

impl IdParams {
    /// Params naming session `id`.
    pub fn new(id: impl Into<String>) -> IdParams {
        IdParams { id: id.into() }
    }
}

/// `spawn`'s `restart` policy (capability `spawn.restart`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartPolicy {
    /// `on-failure` or `always`.
    pub policy: String,
    /// The most runs after the first.
    pub max_restarts: u32,
    /// Milliseconds between the end of one run and the next.
    pub delay_ms: u64,
}

/// Memory, CPU and process limits of a job's tree (capability `spawn.limits`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Limits {
    /// Memory of the whole tree, in bytes (1 MiB to 1 PiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_bytes: Option<u64>,
    /// CPU time of the whole tree, in thousandths of a CPU (10 to 1,024,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_millis: Option<u64>,
    /// Processes and threads of the whole tree (1 to 4,194,304).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pids: Option<u64>,
}

impl Limits {
    /// Whether no limit is asked.
    pub fn is_empty(&self) -> bool {
        self.memory_bytes.is_none() && self.cpu_millis.is_none() && self.pids.is_none()
    }
}

/// `spawn`: start a job.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SpawnParams {
    /// The shell command line (run by `sh -c`).
    pub command: String,
    /// The owner: whose events the job's completion becomes.
    pub owner: String,
    /// The container key (defaults to the owner).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The working directory (defaults to the daemon's home directory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<PathBuf>,
    /// Variables set for the job, as `[NAME, VALUE]` pairs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<(String, String)>,
    /// Names of the caller's variables passed on.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub forward_env: Vec<String>,
    /// The caller's whole environment (capability `spawn.caller_env`); without it
    /// the job gets a minimal one, never the daemon's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_env: Option<BTreeMap<String, String>>,
    /// Run under a PTY.
    #[serde(default, skip_serializing_if = "is_false")]
    pub pty: bool,
    /// Publish a completion event to the owner.
    #[serde(default, skip_serializing_if = "is_false")]
    pub notify: bool,
    /// Regexes over the output that publish a `watch_match` event.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub watch: Vec<String>,
    /// Publish a `heartbeat` event this often.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heartbeat_seconds: Option<u64>,
    /// Lifecycle sweeps spare the job.
    #[serde(default, skip_serializing_if = "is_false")]
    pub persist_on_release: bool,
    /// How many characters of output a completion carries.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completion_output_chars: Option<usize>,
    /// A name the job can be found by.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Kill the tree after this many seconds (capability `spawn.time_limit`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub time_limit_seconds: Option<u64>,
    /// The same key again means the same spawn (capability `spawn.request_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_key: Option<String>,
    /// Kill the tree's leftovers once the main process is done (capability
    /// `spawn.kill_leftovers`); absent: the config's `leftovers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kill_leftovers: Option<bool>,
    /// Memory, CPU and process limits of the tree (capability `spawn.limits`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Limits>,
    /// Readiness by a regex over the redacted output (capability `spawn.ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<String>,
    /// Readiness by a listening port of the job's tree (capability `spawn.ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_port: Option<u16>,
    /// Run the command again when it ends (capability `spawn.restart`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart: Option<RestartPolicy>,
    /// The job group whose limit queues the job (capability `queue`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Ids or names that must end with exit 0 first (capability `queue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<String>,
    /// Ids or names that must be ready first (capability `queue`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after_ready: Vec<String>,
    /// Start the job on this far host of config.toml's `[hosts.NAME]` (capability
    /// `hosts`); the daemon takes it off before the spawn.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Answer with a `spawned` note, then follow the job's log to its result on the
    /// same request (capability `spawn.follow`); taken off before the spawn.
    #[serde(default, skip_serializing_if = "is_false")]
    pub follow: bool,
    /// With `follow`: output as `log.bytes` frames (capability `logs.raw`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw: bool,
    /// With `follow`: the job may queue, and the stream waits through the queue
    /// (capability `logs.follow.queued`). A daemon without the capability refuses
    /// the field, starting nothing, so a pipelined spawn can carry it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub follow_queued: bool,
    /// With `follow`: output as length-prefixed binary frames after an answer
    /// `{"frames": 1}`, as `logs.follow` sends them with `frames` (capability
    /// `spawn.frames`). A daemon without the capability refuses the field,
    /// starting nothing, so a pipelined spawn can carry it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub frames: bool,
}

/// `restart` (capability `restart`): the session to start again, and the caller's
/// environment the new one runs in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RestartParams {
    /// The session.
    pub id: String,
    /// The caller's environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caller_env: Option<BTreeMap<String, String>>,
}

/// Which sessions a `list` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ListState {
    /// Running (and queued) sessions.
    Running,
    /// Finished sessions.
    Finished,
    /// Both.
    All,
}

/// `list`: sessions by owner, state, age and a newest-N limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only this owner's sessions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<String>,
    /// Finished sessions too (protocol 1; `state` wins).
    #[serde(default, skip_serializing_if = "is_false")]
    pub all: bool,
    /// `running`, `finished` or `all`; wins over `all` (capability `list.filter`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ListState>,
    /// Only sessions started in the last this many seconds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub since_seconds: Option<u64>,
    /// Only finished sessions that finished in the last this many seconds; the
    /// answer's `older` counts the ones left out (capability `list.window`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_since_seconds: Option<u64>,
    /// At most this many rows, the newest (1 to 10,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
    /// This far host's jobs of this home (capability `hosts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Every host's jobs, the local ones first (capability `hosts`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub all_hosts: bool,
    /// `false`: the rows leave out the trees' CPU and memory (`usage`), which
    /// costs two cgroup reads a row, for a caller that does not show them
    /// (capability `list.usage`; the default is `true`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<bool>,
}

impl ListParams {
    /// `owner`'s sessions (every owner's with `None`), running ones, nothing else asked.
    pub fn by_owner(owner: Option<String>) -> ListParams {
        ListParams {
            owner,
            ..ListParams::default()
        }
    }
}

/// `log`: one page of a session's output, by lines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LogParams {
    /// The session.
    pub id: String,
    /// The first line (0 is the first); negative counts are not taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset: Option<usize>,
    /// How many lines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

/// `log_chunk` and `logs.follow`: a session's log from a byte offset.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FollowParams {
    /// The session.
    pub id: String,
    /// The first byte of the log file to read (always sent, as protocol-1 clients
    /// do).
    #[serde(default)]
    pub from_byte: u64,
    /// `logs.follow`: end with the session's result, as `wait` answers it
    /// (capability `logs.follow.result`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub result: bool,
    /// `log_chunk`: at most this many bytes (and never more than 1 MiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_bytes: Option<usize>,
    /// A real terminal shows the stream (capability `logs.follow.terminal`): while
    /// it follows, the PTY's queries go to it.
    #[serde(default, skip_serializing_if = "is_false")]
    pub terminal: bool,
    /// Output as `log.bytes` frames (capability `logs.raw`); taken off first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw: bool,
    /// Output as length-prefixed binary frames after the answer (capability
    /// `logs.frames`); taken off first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub frames: bool,
}

impl FollowParams {
    /// Session `id` from byte `from_byte`, nothing else asked.
    pub fn new(id: impl Into<String>, from_byte: u64) -> FollowParams {
        FollowParams {
            id: id.into(),
            from_byte,
            result: false,
            max_bytes: None,
            terminal: false,
            raw: false,
            frames: false,
        }
    }
}

/// `logs.dump` (capability `logs.dump`): the whole log from a byte, then an end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DumpParams {
    /// The session.
    pub id: String,
    /// The first byte of the log file to send (always sent).
    #[serde(default)]
    pub from_byte: u64,
    /// Output as `log.bytes` frames (capability `logs.raw`); taken off first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub raw: bool,
    /// Output as length-prefixed binary frames after the answer (capability
    /// `logs.frames`); taken off first.
    #[serde(default, skip_serializing_if = "is_false")]
    pub frames: bool,
}

/// `wait`: until the session ends (or is ready), or the timeout.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WaitParams {
    /// The session.
    pub id: String,
    /// Seconds to wait at most (the daemon's `wait_cap_seconds` caps it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<f64>,
    /// Until ready rather than finished (capability `spawn.ready`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub ready: bool,
}

/// `write`, `submit` and `close`: the session's standard input.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StdinParams {
    /// The session.
    pub id: String,
    /// The text (`write` as is; `submit` adds the Enter key; `close` takes none).
    #[serde(default)]
    pub data: String,
}

/// `resize`: a PTY session's window.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ResizeParams {
    /// The session.
    pub id: String,
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
}

/// `handoff`: a session from one owner to another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HandoffParams {
    /// The session.
    pub id: String,
    /// The owner handing it on.
    pub from: String,
    /// The owner taking it over (required).
    #[serde(default)]
    pub to: Option<String>,
    /// Why, for the new owner.
    #[serde(default)]
    pub note: String,
}

/// `clean` (capability `clean`): forget finished sessions.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CleanParams {
    /// Only this owner's sessions; every owner's when absent.
    #[serde(default)]
    pub owner: Option<String>,
    /// Only sessions finished at least this long ago.
    #[serde(default)]
    pub older_than_seconds: Option<u64>,
}

/// `shutdown`: stop the daemon.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownParams {
    /// Leave supervised jobs running for the next daemon.
    #[serde(skip_serializing_if = "is_false")]
    pub keep_jobs: bool,
}

/// `drain`: take the owner's pending events.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DrainParams {
    /// Whose events.
    pub owner: String,
    /// Keep them until `drain.ack` (capability `drain.lease`); a lease dropped with
    /// its connection puts them back.
    #[serde(default, skip_serializing_if = "is_false")]
    pub lease: bool,
    /// Sessions whose completions the client already has in an answer (a wait
    /// that returned the exit): acknowledged and left out of this drain.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answered: Vec<String>,
}

/// `events.ack` (capability `events.ack`): events handed on, by `event_id`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AckParams {
    /// Whose events.
    pub owner: String,
    /// `event_id`s of events the client has handed on (at most 10,000, each 1 to
    /// 512 bytes).
    pub ids: Vec<String>,
}

/// `drain.ack` and `drain.release` (capability `drain.lease`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LeaseParams {
    /// The lease a leased `drain` answered.
    pub lease: u64,
}

/// `events.follow`: the owner's events as they come.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsParams {
    /// Whose events.
    pub owner: String,
    /// `pending` notes with counts instead of the events (capability
    /// `events.pending`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub peek: bool,
}

/// `group.add`, `group.set` (a name and a limit) and `group.rm` (a name)
/// (capability `queue`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct GroupParams {
    /// The group.
    pub name: String,
    /// How many of its jobs run at once (1 to 1024; `group.add`/`group.set`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parallel: Option<u64>,
}

impl From<IdParams> for StdinParams {
    /// `close`'s params: the session, no text.
    fn from(id: IdParams) -> StdinParams {
        StdinParams {
            id: id.id,
            data: String::new(),
        }
    }
}
