//! The capability names a daemon announces in `hello`'s answer: what it serves
//! beyond protocol 1's methods. A client checks before using one and falls back
//! without it. [`ALL`] is what this version's daemon announces, in the order it
//! announces them.

/// `clean`: forget finished sessions.
pub const CLEAN: &str = "clean";
/// Leased drains: `drain` with `lease`, `drain.ack`, `drain.release`.
pub const DRAIN_LEASE: &str = "drain.lease";
/// `adopt`: a foreground job moved to the background.
pub const ADOPT: &str = "adopt";
/// `list`'s `state`, `since_seconds` and `limit`.
pub const LIST_FILTER: &str = "list.filter";
/// `list`'s `finished_since_seconds` and the answer's `older`.
pub const LIST_WINDOW: &str = "list.window";
/// `list`'s `usage` (`false` leaves the rows' CPU and memory out).
pub const LIST_USAGE: &str = "list.usage";
/// `spawn`'s `caller_env`.
pub const SPAWN_CALLER_ENV: &str = "spawn.caller_env";
/// `events.follow`'s `peek` (`pending` counts instead of events).
pub const EVENTS_PENDING: &str = "events.pending";
/// `logs.follow`'s `result`.
pub const LOGS_FOLLOW_RESULT: &str = "logs.follow.result";
/// `logs.dump`.
pub const LOGS_DUMP: &str = "logs.dump";
/// `sessions.follow`: a note whenever the home's sessions change.
pub const SESSIONS_FOLLOW: &str = "sessions.follow";
/// `spawn`'s `time_limit_seconds`.
pub const SPAWN_TIME_LIMIT: &str = "spawn.time_limit";
/// `restart`.
pub const RESTART: &str = "restart";
/// Other hosts' jobs by qualified id (`NAME:proc_…`), `spawn`'s `host`, `list`'s
/// `host` and `all_hosts`, the `hosts` method and `HOST_UNREACHABLE`.
pub const HOSTS: &str = "hosts";
/// `spawn`'s `request_key`: the same key again starts nothing and gets the first
/// answer.
pub const SPAWN_REQUEST_KEY: &str = "spawn.request_key";
/// `spawn`'s `kill_leftovers`.
pub const SPAWN_KILL_LEFTOVERS: &str = "spawn.kill_leftovers";
/// `spawn`'s `limits`.
pub const SPAWN_LIMITS: &str = "spawn.limits";
/// `events.ack`: acknowledging events by their `event_id`, on any connection.
pub const EVENTS_ACK: &str = "events.ack";
/// `logs.follow`'s `terminal`: the PTY's queries go to the following terminal.
pub const LOGS_FOLLOW_TERMINAL: &str = "logs.follow.terminal";
/// `raw` on `logs.dump`/`logs.follow`/`spawn`: output as `log.bytes` frames.
pub const LOGS_RAW: &str = "logs.raw";
/// `frames` on `logs.dump`/`logs.follow`: the output as length-prefixed binary
/// frames after the answer, read out on every core first.
pub const LOGS_FRAMES: &str = "logs.frames";
/// `spawn`'s `ready`/`ready_port`, `wait`'s `ready` and the `ready` event.
pub const SPAWN_READY: &str = "spawn.ready";
/// `spawn`'s `restart` policy and the `retry` event.
pub const SPAWN_RESTART: &str = "spawn.restart";
/// `plugins`: what the daemon's plugins loaded, with their counts.
pub const PLUGINS: &str = "plugins";
/// `spawn`'s `follow`: the answer as a `spawned` note, then the log stream and the
/// result on the same request.
pub const SPAWN_FOLLOW: &str = "spawn.follow";
/// Groups, queued jobs and dependencies: `spawn`'s `group`, `after`,
/// `after_ready`; `group.*`, `queue.latency`; status `queued`.
pub const QUEUE: &str = "queue";
/// A follow of a queued job (`logs.follow`, `spawn`'s `follow`) waits through the
/// queue, then follows its run or its end unrun; `spawn` takes `follow_queued`, so
/// a client may pipeline a queued `run --wait` and poll nothing.
pub const LOGS_FOLLOW_QUEUED: &str = "logs.follow.queued";
/// `spawn`'s `frames` with `follow`: the stream's output as binary frames, as
/// `logs.frames` sends it (read out on every core while it is behind); a daemon
/// without it refuses the field, starting nothing, so a pipelined spawn can carry
/// it.
pub const SPAWN_FRAMES: &str = "spawn.frames";

/// Every capability this version's daemon announces, in order.
pub const ALL: &[&str] = &[
    CLEAN,
    DRAIN_LEASE,
    ADOPT,
    LIST_FILTER,
    LIST_WINDOW,
    LIST_USAGE,
    SPAWN_CALLER_ENV,
    EVENTS_PENDING,
    LOGS_FOLLOW_RESULT,
    LOGS_DUMP,
    SESSIONS_FOLLOW,
    SPAWN_TIME_LIMIT,
    RESTART,
    HOSTS,
    SPAWN_REQUEST_KEY,
    SPAWN_KILL_LEFTOVERS,
    SPAWN_LIMITS,
    EVENTS_ACK,
    LOGS_FOLLOW_TERMINAL,
    LOGS_RAW,
    LOGS_FRAMES,
    SPAWN_READY,
    SPAWN_RESTART,
    PLUGINS,
    SPAWN_FOLLOW,
    QUEUE,
    LOGS_FOLLOW_QUEUED,
    SPAWN_FRAMES,
];
