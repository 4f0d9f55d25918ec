//! One constructor for sessions rebuilt from what the store keeps rather than
//! spawned: a running session's row at restore (the `restore` module), and a finished
//! session whose supervisor lingers with its leftovers (the `lingering` module). The rules
//! they share live here once: the owner falls back to the task id, an empty session
//! key is none, the monotonic start is derived from the wall-clock one, and a
//! finished session is read and done from the start.

use crate::lock_order::Mutex;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Instant, SystemTime};

use tokio::sync::watch;

use super::durable::from_unix_seconds;
use crate::answers::{Containment, ModeName};
use crate::config::KillSource;
use crate::id::SessionId;
use crate::output::Tail;
use crate::session::{Finished, Origin, Scope, Session, State, TimeLimit};

/// What a rebuilt session is made of.
pub(super) struct Rebuilt {
    pub(super) id: SessionId,
    /// The command herd runs again on a restart (as given where the store kept it).
    pub(super) command: String,
    pub(super) cwd: PathBuf,
    pub(super) pid: i32,
    pub(super) pgid: i32,
    pub(super) start_time: Option<u64>,
    pub(super) mode: herd_persistence::Mode,
    /// Wall-clock spawn time, unix seconds.
    pub(super) started_at: f64,
    pub(super) task_id: String,
    /// Empty: the task id owns it.
    pub(super) owner_task_id: String,
    /// Empty: none.
    pub(super) session_key: String,
    pub(super) notify: bool,
    pub(super) log_path: PathBuf,
    pub(super) tail: Tail,
    pub(super) persist_on_release: bool,
    pub(super) scope: Option<Scope>,
    pub(super) shim: Option<herd_persistence::ShimRef>,
    pub(super) completion_chars: usize,
    pub(super) name: Option<String>,
    pub(super) time_limit: Option<TimeLimit>,
    pub(super) origin: Origin,
    /// How it ended, for a finished session.
    pub(super) finished: Option<Finished>,
    pub(super) kill_source: Option<KillSource>,
    pub(super) containment: Containment,
    pub(super) leftovers: Vec<herd_persistence::Leftover>,
    /// When it became ready, unix seconds, if it did.
    pub(super) ready_at: Option<f64>,
    /// Runs started under a restart policy; 0 without one.
    pub(super) runs: u32,
}

impl Rebuilt {
    /// The session record.
    pub(super) fn into_session(self) -> Arc<Session> {
        let started_at = from_unix_seconds(self.started_at);
        let age = SystemTime::now()
            .duration_since(started_at)
            .unwrap_or_default();
        let is_finished = self.finished.is_some();
        let (done, _) = watch::channel(is_finished);
        let (kill_requested, _) = watch::channel(false);
        let owner_task_id = if self.owner_task_id.is_empty() {
            self.task_id.clone()
        } else {
            self.owner_task_id
        };
        Arc::new(Session {
            id: self.id,
            command: self.command,
            cwd: self.cwd,
            pid: self.pid,
            pgid: self.pgid,
            start_time: self.start_time,
            mode: match self.mode {
                herd_persistence::Mode::Pipe => ModeName::Pipe,
                herd_persistence::Mode::Pty => ModeName::Pty,
            },
            started_at,
            started: Instant::now().checked_sub(age).unwrap_or_else(Instant::now),
            log_path: self.log_path,
            notify: self.notify.into(),
            read: AtomicBool::new(is_finished),
            persist_on_release: self.persist_on_release,
            scope: self.scope,
            shim: self.shim,
            completion_chars: self.completion_chars,
            name: self.name,
            time_limit: self.time_limit,
            origin: self.origin,
            tail: Mutex::new(self.tail),
            state: Mutex::new(State {
                task_id: self.task_id,
                owner_task_id,
                session_key: (!self.session_key.is_empty()).then_some(self.session_key),
                handoff_note: None,
                exit: self.finished.as_ref().and_then(|f| f.exit),
                finished: self.finished,
                kill_source: self.kill_source,
                stdin: None,
                containment: self.containment,
                leftovers: self.leftovers,
                ready_at: self.ready_at.map(from_unix_seconds),
                runs: self.runs,
                reaching: false,
            }),
            done,
            kill_requested,
            terminals: Mutex::new(0),
            usage: Default::default(),
            command_head: std::sync::OnceLock::new(),
        })
    }
}
