//! What a registry is configured with and what a spawn asks for.
//!
//! `RegistryConfig` holds the per-home knobs (shell, buffer and log sizes, retention,
//! kill grace, wait cap, guard, output pipeline, notification policy). `SpawnRequest`
//! is one caller's request. Both are plain data: validation happens in the registry.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

/// The credential name patterns removed from every child's environment unless the
/// caller forwards the name. A `*` matches any run of characters, the empty run
/// included; matching ignores ASCII case, so `api_key` is removed like `API_KEY`.
///
/// The word rules are anchored on whole words at the end of the name, so a name
/// that merely contains a secret word keeps its place: `TOKENIZERS_PARALLELISM`,
/// `GITHUB_TOKEN_URL`, `SECRETS_DIR`, `PASSWORD_STORE_DIR` and
/// `AWS_SHARED_CREDENTIALS_FILE` all pass.
/// - A secret word is removed on its own and as the last word of a longer name
///   (`TOKEN`, `*_TOKEN`): `API_KEY`, `APIKEY`, `TOKEN`, `SECRET`, `SECRET_KEY`,
///   `ACCESS_KEY`, `PRIVATE_KEY`, `SIGNING_KEY`, `ENCRYPTION_KEY`, `MASTER_KEY`,
///   `PASSWORD`, `PASSWD`, `PASSPHRASE`, `CREDENTIAL`, `CREDENTIALS`.
/// - `PWD` and `PASS` count only as the last word of a longer name (`DB_PWD`,
///   `SMTP_PASS`): bare `PWD` is the shell's working directory, and neither it nor
///   `OLDPWD` (no `_` before `PWD`) is touched.
/// - Provider names whose value is itself a secret but that no word above ends:
///   `AWS_ACCESS_KEY_ID`, `GITHUB_PAT`, `SECRET_KEY_BASE`, `DOCKER_AUTH_CONFIG`,
///   `AZURE_STORAGE_CONNECTION_STRING`, `SLACK_WEBHOOK_URL`, `BW_SESSION`, and the
///   families `OP_SESSION_*`, `TF_TOKEN_*`, `NPM_CONFIG__AUTH*`, `OPENAI_*KEY*`,
///   `ANTHROPIC_*KEY*`, `OPENROUTER_*KEY*`, `GEMINI_*KEY*`.
///
/// Only names whose value is a secret are listed. A name that points at a credential
/// (`KUBECONFIG`, `SSH_AUTH_SOCK`, `AWS_PROFILE`, `*_FILE`) is not: the job runs as the
/// same user and can reach the file or the agent socket without the variable, so
/// removing it would break `kubectl`, `git` over ssh and the like without taking any
/// access away. `*_CREDENTIALS` is the exception by rule, not by judgement: some tools
/// put the credential itself there (Terraform's `GOOGLE_CREDENTIALS` holds the JSON
/// key), so `GOOGLE_APPLICATION_CREDENTIALS`, a path, goes with it.
///
/// A name that is not valid UTF-8 is always removed (see `spawn::child_env`).
pub const DEFAULT_ENV_DENY: &[&str] = &[
    // Secret words, bare and as the last word of a name.
    "API_KEY",
    "*_API_KEY",
    "APIKEY",
    "*_APIKEY",
    "TOKEN",
    "*_TOKEN",
    "SECRET",
    "*_SECRET",
    "SECRET_KEY",
    "*_SECRET_KEY",
    "ACCESS_KEY",
    "*_ACCESS_KEY",
    "PRIVATE_KEY",
    "*_PRIVATE_KEY",
    "SIGNING_KEY",
    "*_SIGNING_KEY",
    "ENCRYPTION_KEY",
    "*_ENCRYPTION_KEY",
    "MASTER_KEY",
    "*_MASTER_KEY",
    "PASSWORD",
    "*_PASSWORD",
    "PASSWD",
    "*_PASSWD",
    "PASSPHRASE",
    "*_PASSPHRASE",
    "CREDENTIAL",
    "*_CREDENTIAL",
    "CREDENTIALS",
    "*_CREDENTIALS",
    // Words that are ordinary on their own (`PWD` is the working directory).
    "*_PWD",
    "*_PASS",
    // Provider names no word above ends.
    "AWS_ACCESS_KEY_ID",
    "GITHUB_PAT",
    "SECRET_KEY_BASE",
    "DOCKER_AUTH_CONFIG",
    "AZURE_STORAGE_CONNECTION_STRING",
    "SLACK_WEBHOOK_URL",
    "BW_SESSION",
    "OP_SESSION_*",
    "TF_TOKEN_*",
    "NPM_CONFIG__AUTH*",
    "OPENAI_*KEY*",
    "ANTHROPIC_*KEY*",
    "OPENROUTER_*KEY*",
    "GEMINI_*KEY*",
];

/// The range every number a client or a config gives must fall in; out of range is
/// refused with the field and its range, never clamped silently or left to panic.
pub mod limits {
    use std::ops::RangeInclusive;

    /// A spawn's heartbeat period and the heartbeat floor, in seconds (0 = off for a
    /// spawn): at most a day.
    pub const HEARTBEAT_SECONDS: RangeInclusive<u64> = 1..=86_400;
    /// A tree kill's SIGTERM-to-SIGKILL grace, in seconds.
    pub const KILL_GRACE_SECONDS: RangeInclusive<f64> = 0.0..=300.0;
    /// The longest single wait, in seconds.
    pub const WAIT_CAP_SECONDS: RangeInclusive<u64> = 1..=86_400;
    /// How long a finished session stays answerable from the store, in seconds: a
    /// second to ten years.
    pub const RESULT_TTL_SECONDS: RangeInclusive<u64> = 1..=10 * 365 * 86_400;
    /// Finished sessions kept in memory (deprecated as a setting: the store keeps
    /// them all, by `result_ttl` and `log_budget_bytes`).
    pub const FINISHED_CAP: RangeInclusive<usize> = 0..=100_000;
    /// One session log's size cap, in bytes (1 B to 1 TiB).
    pub const LOG_CAP_BYTES: RangeInclusive<u64> = 1..=1 << 40;
    /// All session logs of a home together (1 MiB to 1 PiB).
    pub const LOG_BUDGET_BYTES: RangeInclusive<u64> = 1 << 20..=1 << 50;
    /// Events one owner's queue holds.
    pub const QUEUE_CAP: RangeInclusive<usize> = 1..=1_000_000;
    /// Characters of output a completion carries.
    pub const COMPLETION_OUTPUT_CHARS: RangeInclusive<usize> = 0..=1_000_000;
    /// A spawn's time limit, in seconds: a second to ten years.
    pub const TIME_LIMIT_SECONDS: RangeInclusive<u64> = 1..=10 * 365 * 86_400;
    /// Characters of a `--ready` pattern.
    pub const READY_PATTERN_CHARS: RangeInclusive<usize> = 1..=1_000;
    /// A `--ready-port`.
    pub const READY_PORT: RangeInclusive<u16> = 1..=65_535;
    /// A restart policy's `--max-restarts`.
    pub const MAX_RESTARTS: RangeInclusive<u32> = 1..=10_000;
    /// A restart policy's `--restart-delay`, in milliseconds: 100 ms to 5 minutes.
    pub const RESTART_DELAY_MS: RangeInclusive<u64> = 100..=300_000;

    /// `Err` naming `field`, its range and `got` when `value` is outside `range`.
    ///
    /// # Errors
    /// The message for an out-of-range value.
    pub fn check<T: PartialOrd + std::fmt::Display>(
        field: &str,
        value: T,
        range: &RangeInclusive<T>,
    ) -> Result<(), String> {
        if range.contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "{field} must be from {} to {} (got {value})",
                range.start(),
                range.end()
            ))
        }
    }
}

/// Registry-wide settings. `Default` gives the production values.
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// The shell argv the command line is appended to; default `["bash", "-c"]`.
    pub shell: Vec<String>,
    /// Exec a command line that is one simple command of plain words directly, as
    /// the shell would have, skipping the shell's start-up; default true. "Plain"
    /// means only letters, digits, blanks and `_ - . / : , + @ % =`, a first word
    /// that is no assignment, keyword or builtin, and a program found on `PATH`;
    /// anything else (quoting, expansion, redirection, pipelines) goes through `shell`.
    pub direct_exec: bool,
    /// Bytes of output tail kept in memory per session.
    pub buffer_bytes: usize,
    /// Bytes of output kept in a session's log file before it stops growing.
    pub log_cap_bytes: u64,
    /// The finished sessions of the home together (their logs and stored output
    /// tails): past it, the oldest finished sessions are evicted first, leaving a
    /// tombstone (running ones never); default 10 GiB.
    pub log_budget_bytes: u64,
    /// How long a finished session, its result and its log stay answerable (by id
    /// and name, across restarts) within `log_budget_bytes`; default 7 days.
    pub result_ttl: Duration,
    /// Default characters of output a completion and other sized routes carry.
    pub completion_output_chars: usize,
    /// How long a finished session stays in the in-memory cache; it stays
    /// answerable from the store for `result_ttl`.
    pub finished_ttl: Duration,
    /// How many finished sessions the in-memory cache holds at most; the store
    /// answers for the rest. Running ones are never refused.
    pub finished_cap: usize,
    /// Environment name patterns removed from children unless forwarded.
    pub env_deny: Vec<String>,
    /// SIGTERM-to-SIGKILL grace of a tree kill.
    pub kill_grace: Duration,
    /// Kill a session's leftovers when its main process is done (config
    /// `leftovers = "kill"`); by default they are kept, held by the session.
    pub kill_leftovers: bool,
    /// Limits every spawn gets where its request sets none (config `[limits]`).
    pub default_limits: crate::Limits,
    /// The longest single `wait`; longer requests are clamped with a note.
    pub wait_cap: Duration,
    /// How long the reader keeps draining a pipe that stays idle after the direct child
    /// exited before it publishes the completion.
    pub idle_drain: Duration,
    /// The self-kill guard: `Some(host)` judges every spawn; `None` turns it off.
    pub guard: Option<herd_guards::Host>,
    /// The output seam every route goes through.
    pub pipeline: Arc<herd_hooks::Pipeline>,
    /// The smallest heartbeat interval; 60 s in production.
    pub heartbeat_floor: Duration,
    /// Which process-driven wakes reach owners' queues.
    pub notifications: NotificationPolicy,
    /// The clock watch limits, the watch breaker and heartbeats are judged by;
    /// [`crate::SystemClock`] in production. Tests inject a clock they advance by
    /// hand to cross a 15 s spacing or a 30 s breaker trip without waiting; the one
    /// notification timer re-reads it at least once a second.
    pub clock: Arc<dyn crate::Clock>,
    /// Where running sessions are kept: `None`, the home's `state.db`; a host
    /// may give its own, e.g. [`herd_persistence::MemoryRunningStore`] (nothing
    /// survives the process then).
    pub running_store: Option<Arc<dyn herd_persistence::RunningStore>>,
    /// Where completions wait for their consumer: `None`, the home's
    /// `state.db` (in memory without the `sqlite` feature); a host may give its own,
    /// e.g. [`herd_persistence::MemoryLedger`].
    pub ledger: Option<Arc<dyn herd_persistence::CompletionLedger>>,
    /// Where results of finished sessions are kept: `None`, the home's
    /// `state.db` (in memory without the `sqlite` feature, removing logs as it
    /// evicts); a host may give its own, e.g. [`herd_persistence::MemoryResultStore`].
    pub result_store: Option<Arc<dyn herd_persistence::ResultStore>>,
    /// Where queued jobs and groups are kept: `None`, the home's
    /// `state.db` (in memory without the `sqlite` feature); a host may give its own,
    /// e.g. [`herd_persistence::MemoryQueueStore`].
    pub queue_store: Option<Arc<dyn herd_persistence::QueueStore>>,
    /// Test seam: when true every PTY open is treated as failed, so PTY spawns take the
    /// pipe fallback. Production code leaves it false.
    pub pty_unavailable: bool,
    /// Restart-safe dispatch: with `Some`, a `persist_on_release` spawn asks the
    /// dispatcher whether to run in a systemd scope of its own. `None` (the default)
    /// spawns every session directly.
    pub dispatcher: Option<Arc<crate::Dispatcher>>,
    /// The environment herd's own tools for a dispatch (`systemd-run`, `systemctl`)
    /// and the user bus are resolved in. `None` (the default) is this process's own
    /// environment, the daemon's, read at each dispatch; never the job's caller's,
    /// so a caller without `PATH` or `XDG_RUNTIME_DIR` cannot turn a scope into a
    /// direct subprocess. Tests and embedders may give one.
    pub tools_env: Option<std::collections::HashMap<String, String>>,
    /// A `persist_on_release` spawn that cannot get a scope fails with
    /// [`crate::DispatchError::ScopeUnavailable`] instead of degrading.
    pub require_restart_safe_scope: bool,
    /// The most events one owner's queue holds (see [`crate::Event::QueueFolded`]
    /// for what is folded when it is full); default 1,024.
    pub queue_cap: usize,
    /// The session supervisor program (the `herd-shim` binary). With `Some`, every
    /// session runs under a shim process of its own that outlives this registry: a
    /// crash or restart of the host leaves jobs running, and the next registry on
    /// the home re-attaches in [`crate::Registry::restore`]. `None` (the default, for
    /// embedders) runs sessions in-process; they end with the host.
    pub shim: Option<PathBuf>,
}

impl RegistryConfig {
    /// Checks every number against [`limits`].
    ///
    /// # Errors
    /// The first setting out of its range, named with the range.
    pub fn validate(&self) -> Result<(), String> {
        // Durations may be finer than the whole seconds a config file gives (tests
        // and embedders use milliseconds); only zero and the upper bounds are out.
        let day = Duration::from_secs(*limits::HEARTBEAT_SECONDS.end());
        let grace_max = Duration::from_secs_f64(*limits::KILL_GRACE_SECONDS.end());
        for (field, value, max) in [
            ("heartbeat_floor", self.heartbeat_floor, day),
            (
                "result_ttl",
                self.result_ttl,
                Duration::from_secs(*limits::RESULT_TTL_SECONDS.end()),
            ),
            (
                "wait_cap",
                self.wait_cap,
                Duration::from_secs(*limits::WAIT_CAP_SECONDS.end()),
            ),
        ] {
            if value.is_zero() || value > max {
                return Err(format!(
                    "{field} must be more than 0 s and at most {} s (got {} s)",
                    max.as_secs(),
                    value.as_secs_f64()
                ));
            }
        }
        if self.kill_grace > grace_max {
            return Err(format!(
                "kill_grace must be at most {} s (got {} s)",
                grace_max.as_secs(),
                self.kill_grace.as_secs_f64()
            ));
        }
        limits::check("finished_cap", self.finished_cap, &limits::FINISHED_CAP)?;
        limits::check("queue_cap", self.queue_cap, &limits::QUEUE_CAP)?;
        limits::check("log_cap_bytes", self.log_cap_bytes, &limits::LOG_CAP_BYTES)?;
        limits::check(
            "log_budget_bytes",
            self.log_budget_bytes,
            &limits::LOG_BUDGET_BYTES,
        )?;
        limits::check(
            "completion_output_chars",
            self.completion_output_chars,
            &limits::COMPLETION_OUTPUT_CHARS,
        )
    }
}

impl Default for RegistryConfig {
    fn default() -> RegistryConfig {
        RegistryConfig {
            shell: vec!["bash".to_owned(), "-c".to_owned()],
            direct_exec: true,
            buffer_bytes: 200_000,
            log_cap_bytes: 1 << 30,
            log_budget_bytes: herd_persistence::DEFAULT_LOG_BUDGET_BYTES,
            result_ttl: herd_persistence::RECEIPT_RETENTION,
            completion_output_chars: 2_000,
            finished_ttl: Duration::from_secs(30 * 60),
            finished_cap: 64,
            env_deny: DEFAULT_ENV_DENY.iter().map(|s| (*s).to_owned()).collect(),
            kill_grace: Duration::from_secs(2),
            kill_leftovers: false,
            default_limits: crate::Limits::default(),
            wait_cap: Duration::from_secs(180),
            idle_drain: Duration::from_secs(1),
            guard: None,
            pipeline: Arc::new(herd_hooks::Pipeline::redaction_only()),
            heartbeat_floor: Duration::from_secs(60),
            notifications: NotificationPolicy::All,
            clock: Arc::new(crate::SystemClock),
            running_store: None,
            ledger: None,
            result_store: None,
            queue_store: None,
            pty_unavailable: false,
            dispatcher: None,
            tools_env: None,
            require_restart_safe_scope: false,
            queue_cap: 1_024,
            shim: None,
        }
    }
}

/// Which process-driven wakes are queued for owners. Events still reach
/// [`crate::Registry::subscribe`] whatever the policy: the policy decides what wakes
/// an agent through [`crate::Registry::drain`], not what an observer may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotificationPolicy {
    /// Completions, heartbeats and watch matches.
    #[default]
    All,
    /// Completions only.
    Result,
    /// Completions of sessions that did not exit 0 only.
    Error,
    /// No process-driven wakes.
    Off,
}

/// How the child is attached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// stdout and stderr merged on one pipe; stdin is a pipe.
    #[default]
    Pipe,
    /// A pseudo-terminal of the given size.
    Pty {
        /// Rows of the terminal.
        rows: u16,
        /// Columns of the terminal.
        cols: u16,
    },
}

impl Mode {
    /// PTY mode at the default 30 x 120.
    pub fn pty() -> Mode {
        Mode::Pty {
            rows: 30,
            cols: 120,
        }
    }
}

/// One request to start a session.
#[derive(Debug, Clone, Default)]
pub struct SpawnRequest {
    /// The shell command line, kept verbatim in every answer.
    pub command: String,
    /// Working directory; default the registry process's own.
    pub cwd: Option<PathBuf>,
    /// Environment overrides, applied after sanitising.
    pub env: Vec<(String, String)>,
    /// Names exempt from the deny-list.
    pub forward_env: Vec<String>,
    /// The caller's environment, which the job's starts from: the deny-list is
    /// applied to it, then `env`, then herd's own entries. `None` starts from this
    /// process's own environment, for a host that runs jobs for itself; a daemon
    /// serving other processes always passes the caller's.
    pub caller_env: Option<Vec<(String, String)>>,
    /// Pipe (default) or PTY.
    pub mode: Mode,
    /// The container key the command runs under.
    pub task_id: String,
    /// The turn or agent that spawned it; defaults to `task_id`.
    pub owner_task_id: Option<String>,
    /// The host's session key, if any.
    pub session_key: Option<String>,
    /// Queue one completion for the owner at exit.
    pub notify: bool,
    /// Watch patterns.
    pub watch: Vec<String>,
    /// Heartbeat interval in seconds; 0 or `None` is off.
    pub heartbeat_seconds: Option<u64>,
    /// Survive lifecycle kill sweeps.
    pub persist_on_release: bool,
    /// Characters of output the completion carries; default from the config.
    pub completion_output_chars: Option<usize>,
    /// A name that finds the session wherever an id does: 1 to 64 letters, digits,
    /// `.`, `_` or `-`, not an id or something an id prefix could be (all hex, or
    /// starting with `proc_`), unique among the owner's running sessions.
    pub name: Option<String>,
    /// How long the job may run (1 s to 10 years, [`limits::TIME_LIMIT_SECONDS`]):
    /// then its tree is killed as [`KillSource::TimeLimit`], `persist_on_release` or
    /// not. The deadline is a wall-clock instant, checkpointed, and a supervised
    /// job's shim holds it too, so it is kept while no registry runs.
    pub time_limit: Option<std::time::Duration>,
    /// The session this one is started in place of (`Registry::restart` sets it);
    /// answers carry it as `replaces`.
    pub replaces: Option<crate::SessionId>,
    /// Kill what is left of the job's tree (processes that outlived its main
    /// process) once the main process is done, after the kill grace;
    /// `None` takes [`RegistryConfig::kill_leftovers`].
    pub kill_leftovers: Option<bool>,
    /// Memory, CPU and process limits of the whole tree, through the session's
    /// cgroup; refused where no cgroup can carry them.
    pub limits: crate::Limits,
    /// Readiness by output: a regex (at most [`limits::READY_PATTERN_CHARS`]
    /// characters) over the redacted output, line by line; the first matching line
    /// marks the session ready. A pattern that does not compile is refused.
    pub ready: Option<String>,
    /// Readiness by port: the session is ready once a socket of its own tree
    /// listens on this TCP port (1 to 65535) on 127.0.0.1, ::1 or a wildcard address.
    pub ready_port: Option<u16>,
    /// Run the job again when it ends; `time_limit` then applies to each run.
    /// Needs supervised sessions (`RegistryConfig::shim`).
    pub restart: Option<RestartPolicy>,
}

/// A restart policy: when a run ends, run the command again, at most
/// `max_restarts` times, after `delay` doubled per earlier restart (at most 5
/// minutes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RestartPolicy {
    /// After every run (`always`), or only after one that did not exit 0
    /// (`on-failure`).
    pub always: bool,
    /// How many times it runs again at most ([`limits::MAX_RESTARTS`]).
    pub max_restarts: u32,
    /// The first back-off ([`limits::RESTART_DELAY_MS`]).
    pub delay: std::time::Duration,
}

impl RestartPolicy {
    /// The policy a record kept.
    pub(crate) fn from_record(r: herd_persistence::RestartRecord) -> RestartPolicy {
        RestartPolicy {
            always: r.always,
            max_restarts: r.max_restarts,
            delay: std::time::Duration::from_millis(r.delay_ms),
        }
    }

    /// The record of the policy.
    pub(crate) fn record(self) -> herd_persistence::RestartRecord {
        herd_persistence::RestartRecord {
            always: self.always,
            max_restarts: self.max_restarts,
            delay_ms: u64::try_from(self.delay.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

/// Who asked for a kill.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum KillSource {
    /// A kill of one session by id.
    ProcessKill,
    /// An operator's explicit stop.
    OperatorStop,
    /// A kill-all sweep on release.
    KillAll,
    /// The host's turn timed out.
    TurnTimeout,
    /// The agent closed.
    AgentClose,
    /// The host is shutting down.
    HostShutdown,
    /// The spawn's time limit ran out. An explicit source: it reaches
    /// `persist_on_release` sessions too.
    TimeLimit,
    /// The session was restarted: killed to be started again.
    Restarted,
}

impl KillSource {
    /// The snake_case name used on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            KillSource::ProcessKill => "process_kill",
            KillSource::OperatorStop => "operator_stop",
            KillSource::KillAll => "kill_all",
            KillSource::TurnTimeout => "turn_timeout",
            KillSource::AgentClose => "agent_close",
            KillSource::HostShutdown => "host_shutdown",
            KillSource::TimeLimit => "time_limit",
            KillSource::Restarted => "restarted",
        }
    }

    /// The source of a wire name; empty or unknown is `None`.
    pub(crate) fn from_name(name: &str) -> Option<KillSource> {
        [
            KillSource::ProcessKill,
            KillSource::OperatorStop,
            KillSource::KillAll,
            KillSource::TurnTimeout,
            KillSource::AgentClose,
            KillSource::HostShutdown,
            KillSource::TimeLimit,
            KillSource::Restarted,
        ]
        .into_iter()
        .find(|s| s.as_str() == name)
    }

    /// Lifecycle sweeps spare sessions spawned with `persist_on_release`.
    pub fn spares_persistent(self) -> bool {
        matches!(
            self,
            KillSource::KillAll | KillSource::TurnTimeout | KillSource::AgentClose
        )
    }
}

/// Which sessions [`crate::Registry::list`] returns. Empty filter fields match all.
#[derive(Debug, Clone, Default)]
pub struct ListFilter {
    /// Sessions owned by this `owner_task_id`.
    pub owner: Option<String>,
    /// Sessions with this session key (alternative to `owner`: either matches).
    pub session_key: Option<String>,
    /// Include finished sessions.
    pub include_finished: bool,
}
