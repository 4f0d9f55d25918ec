//! A queued job as the store keeps it: the spawn request (the command as given,
//! the caller's environment, the options), its group and its dependencies. The
//! store is `state.db` (0600); the environment must be kept for the job to start
//! after a restart exactly as it would have started at once.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{Mode, SpawnRequest};
use crate::id::SessionId;

/// The record of one queued job (JSON in the store's `queued.record`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct QueuedRecord {
    pub(super) version: u32,
    pub(super) group: String,
    #[serde(default)]
    pub(super) after: Vec<String>,
    #[serde(default)]
    pub(super) after_ready: Vec<String>,
    /// Unix seconds of the submission.
    pub(super) submitted_at: f64,
    /// Set just before the start: a restart that finds it set and the session
    /// neither running nor finished ends the job as lost instead of running it again.
    #[serde(default)]
    pub(super) starting: bool,
    pub(super) command: String,
    pub(super) cwd: PathBuf,
    #[serde(default)]
    pub(super) env: Vec<(String, String)>,
    #[serde(default)]
    pub(super) forward_env: Vec<String>,
    #[serde(default)]
    pub(super) caller_env: Option<Vec<(String, String)>>,
    /// `None`: pipes; `Some((rows, cols))`: a PTY.
    #[serde(default)]
    pub(super) pty: Option<(u16, u16)>,
    pub(super) task_id: String,
    #[serde(default)]
    pub(super) owner_task_id: Option<String>,
    #[serde(default)]
    pub(super) session_key: Option<String>,
    #[serde(default)]
    pub(super) notify: bool,
    #[serde(default)]
    pub(super) watch: Vec<String>,
    #[serde(default)]
    pub(super) heartbeat_seconds: Option<u64>,
    #[serde(default)]
    pub(super) persist_on_release: bool,
    #[serde(default)]
    pub(super) completion_output_chars: Option<usize>,
    #[serde(default)]
    pub(super) name: Option<String>,
    #[serde(default)]
    pub(super) time_limit_seconds: Option<u64>,
    #[serde(default)]
    pub(super) kill_leftovers: Option<bool>,
    #[serde(default)]
    pub(super) limits: crate::Limits,
    #[serde(default)]
    pub(super) ready: Option<String>,
    #[serde(default)]
    pub(super) ready_port: Option<u16>,
    /// The restart policy: (always, max_restarts, first delay in ms).
    #[serde(default)]
    pub(super) restart: Option<(bool, u32, u64)>,
}

/// The format version of [`QueuedRecord`].
pub(super) const RECORD_VERSION: u32 = 1;

impl QueuedRecord {
    /// The record of `req` (its working directory resolved to `cwd`).
    pub(super) fn of(
        req: &SpawnRequest,
        cwd: PathBuf,
        group: &str,
        after: &[SessionId],
        after_ready: &[SessionId],
    ) -> QueuedRecord {
        QueuedRecord {
            version: RECORD_VERSION,
            group: group.to_owned(),
            after: after.iter().map(|id| id.as_str().to_owned()).collect(),
            after_ready: after_ready
                .iter()
                .map(|id| id.as_str().to_owned())
                .collect(),
            submitted_at: super::super::durable::unix_seconds(std::time::SystemTime::now()),
            starting: false,
            command: req.command.clone(),
            cwd,
            env: req.env.clone(),
            forward_env: req.forward_env.clone(),
            caller_env: req.caller_env.clone(),
            pty: match req.mode {
                Mode::Pty { rows, cols } => Some((rows, cols)),
                Mode::Pipe => None,
            },
            task_id: req.task_id.clone(),
            owner_task_id: req.owner_task_id.clone(),
            session_key: req.session_key.clone(),
            notify: req.notify,
            watch: req.watch.clone(),
            heartbeat_seconds: req.heartbeat_seconds,
            persist_on_release: req.persist_on_release,
            completion_output_chars: req.completion_output_chars,
            name: req.name.clone(),
            time_limit_seconds: req.time_limit.map(|d| d.as_secs()),
            kill_leftovers: req.kill_leftovers,
            limits: req.limits,
            ready: req.ready.clone(),
            ready_port: req.ready_port,
            restart: req.restart.map(|r| {
                (
                    r.always,
                    r.max_restarts,
                    u64::try_from(r.delay.as_millis()).unwrap_or(u64::MAX),
                )
            }),
        }
    }

    /// The spawn request the job starts with.
    pub(super) fn request(&self) -> SpawnRequest {
        SpawnRequest {
            command: self.command.clone(),
            cwd: Some(self.cwd.clone()),
            env: self.env.clone(),
            forward_env: self.forward_env.clone(),
            caller_env: self.caller_env.clone(),
            mode: match self.pty {
                Some((rows, cols)) => Mode::Pty { rows, cols },
                None => Mode::Pipe,
            },
            task_id: self.task_id.clone(),
            owner_task_id: self.owner_task_id.clone(),
            session_key: self.session_key.clone(),
            notify: self.notify,
            watch: self.watch.clone(),
            heartbeat_seconds: self.heartbeat_seconds,
            persist_on_release: self.persist_on_release,
            completion_output_chars: self.completion_output_chars,
            name: self.name.clone(),
            time_limit: self.time_limit_seconds.map(Duration::from_secs),
            replaces: None,
            kill_leftovers: self.kill_leftovers,
            limits: self.limits,
            ready: self.ready.clone(),
            ready_port: self.ready_port,
            restart: self.restart.map(|(always, max_restarts, delay_ms)| {
                crate::config::RestartPolicy {
                    always,
                    max_restarts,
                    delay: Duration::from_millis(delay_ms),
                }
            }),
        }
    }

    /// Dependencies as ids (an unparsable one, which no release writes, is dropped).
    pub(super) fn dependencies(list: &[String]) -> Vec<SessionId> {
        list.iter().filter_map(|s| SessionId::parse(s)).collect()
    }
}
