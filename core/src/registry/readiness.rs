//! Readiness: a session's durable mark that it is ready (`herd run
//! --ready PATTERN`, `--ready-port N`), set once, and what a dependent or a
//! `wait --ready` reads.
//!
//! The mark is committed to the running store first (`RunningStore::record_ready`,
//! on the blocking pool, off every lock; when the session's running row is not
//! committed yet, after a checkpoint write that commits it), then set in the
//! session's state, then the `changes` watch is bumped, so whatever waits on
//! session changes (`wait --ready`, `--after-ready`, `herd top`) never acts on a
//! mark a daemon crash could lose. A finished session's receipt keeps it
//! (`ResultReceipt::ready_at`).
//!
//! What marks it: `--ready PATTERN`, a regex over each line of output as the
//! streams show it (private-key blocks masked, then redacted), run by an observer
//! beside the watch matcher in the session's reader or follower; restart separator
//! lines (`── herd: …`) never match. `--ready-port N`, a task that looks, off every
//! lock and on the blocking pool, for a socket listening on port N on a loopback or
//! wildcard address held by a process of the session's own tree (its cgroup, else
//! its shim's or its pid's descendants: `sys::sockets`), every 100 ms, backing off
//! to 1 s. Once marked, a `ready` event is broadcast, and queued for the owner
//! when the session notifies.

use std::sync::{Arc, Weak};
use std::time::{Duration, SystemTime};

use herd_hooks::{KeyLines, Route, Window};

use super::Inner;
use super::delivery::Notice;
use super::durable::{from_unix_seconds, unix_seconds};
use crate::config::SpawnRequest;
use crate::error::SpawnError;
use crate::id::SessionId;
use crate::reader::Observer;
use crate::session::Session;

/// What starts a line herd itself writes into a session's log (a restart's
/// separator): never matched by a readiness pattern.
pub(crate) const HERD_LINE_PREFIX: &str = "── herd: ";

/// The first and the longest pause between two looks for a ready port.
const PORT_LOOK_FIRST: Duration = Duration::from_millis(100);
const PORT_LOOK_MAX: Duration = Duration::from_secs(1);

/// The longest line a readiness pattern is matched against; a longer one is
/// matched in pieces of this size.
const READY_MAX_LINE_BYTES: usize = 64 * 1024;

/// Refuses a `ready` pattern that is empty, too long or does not compile, and a
/// `ready_port` of 0.
pub(super) fn check_request(req: &SpawnRequest) -> Result<(), SpawnError> {
    if let Some(pattern) = &req.ready {
        let n = pattern.chars().count();
        crate::config::limits::check("ready", n, &crate::config::limits::READY_PATTERN_CHARS)
            .map_err(|message| SpawnError::InvalidRequest {
                field: "ready",
                message: format!("the ready pattern's length in characters: {message}"),
            })?;
        regex::Regex::new(pattern).map_err(|error| SpawnError::InvalidRequest {
            field: "ready",
            message: format!(
                "the ready pattern is not a valid regular expression (Rust regex syntax): {error}"
            ),
        })?;
    }
    if let Some(port) = req.ready_port {
        crate::config::limits::check("ready_port", port, &crate::config::limits::READY_PORT)
            .map_err(|message| SpawnError::InvalidRequest {
                field: "ready_port",
                message: format!("{message}: a TCP port the job listens on"),
            })?;
    }
    Ok(())
}

/// Whether a session is ready, as a dependent or `wait --ready` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Readiness {
    /// It became ready at this time (it may have ended since).
    Ready(SystemTime),
    /// It runs and is not ready yet.
    NotYet,
    /// It ended without becoming ready.
    Ended,
}

impl Inner {
    /// Marks the running session `id` ready now, once: commits the mark, then sets
    /// it, then wakes the `changes` receivers. Returns the time it was marked, or
    /// `None` when it is not running or was marked already.
    pub(crate) async fn mark_ready(self: &Arc<Self>, id: &SessionId) -> Option<SystemTime> {
        let session = self.table.running_session(id)?;
        if session.state().ready_at.is_some() {
            return None;
        }
        let at = SystemTime::now();
        let secs = unix_seconds(at);
        let record = || {
            let store = Arc::clone(self.durable.checkpoint());
            let key = id.as_str().to_owned();
            tokio::task::spawn_blocking(move || store.record_ready(&key, secs))
        };
        let mut stored = record().await;
        if matches!(stored, Ok(Ok(false))) {
            // No row took the mark: the session's output is followed from its start,
            // so a pattern can match before its spawn committed the running row.
            // Every running row is written (this one with them), then the mark
            // again, before anyone is told it is ready.
            self.write_every_running_row().await;
            stored = record().await;
        }
        match stored {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => {
                tracing::warn!(session_id = %id, "readiness not stored: the session has no running row; a restart would forget it");
            }
            Ok(Err(error)) => {
                tracing::warn!(session_id = %id, %error, "readiness not stored; a restart would forget it");
            }
            Err(error) => tracing::warn!(session_id = %id, %error, "readiness not stored"),
        }
        {
            let mut st = session.state();
            if st.ready_at.is_some() || st.finished.is_some() {
                return None;
            }
            st.ready_at = Some(at);
        }
        tracing::info!(session_id = %id, "session ready");
        self.changed();
        Some(at)
    }

    /// Whether `id` (an id, prefix or name) is ready, from memory or its receipt;
    /// `None` when it is unknown. Reads the store on a miss: call it off the table
    /// lock.
    pub(crate) fn readiness(&self, id: &str) -> Option<Readiness> {
        match self.lookup(id) {
            Ok(s) => {
                let st = s.state();
                Some(match (st.ready_at, st.finished.is_some()) {
                    (Some(at), _) => Readiness::Ready(at),
                    (None, false) => Readiness::NotYet,
                    (None, true) => Readiness::Ended,
                })
            }
            Err(miss) => {
                let (_, r) = self.durable.receipt_lookup(id, miss).ok()?;
                Some(r.ready_at.map_or(Readiness::Ended, |at| {
                    Readiness::Ready(from_unix_seconds(at))
                }))
            }
        }
    }
}

impl Inner {
    /// Arms the readiness of `s` (not yet ready): a port watch, and a pattern
    /// observer run beside `observer` (the watch matcher). Returns what the
    /// reader or follower runs.
    pub(super) fn arm_readiness(
        self: &Arc<Self>,
        s: &Arc<Session>,
        observer: Option<Box<dyn Observer>>,
    ) -> Option<Box<dyn Observer>> {
        if s.state().ready_at.is_some() {
            return observer;
        }
        if let Some(port) = s.origin.ready_port {
            self.watch_port(s, port);
        }
        let Some(pattern) = s.origin.ready.as_deref() else {
            return observer;
        };
        let regex = match regex::Regex::new(pattern) {
            Ok(regex) => regex,
            Err(error) => {
                tracing::warn!(session_id = %s.id, %error, "ready pattern does not compile; readiness by pattern is off");
                return observer;
            }
        };
        let ready = Box::new(ReadyObserver {
            inner: Arc::downgrade(self),
            session: Arc::clone(s),
            regex,
            partial: Vec::new(),
            keys: KeyLines::new(),
            matched: false,
        });
        Some(match observer {
            Some(first) => Box::new(crate::reader::Both(first, ready)),
            None => ready,
        })
    }

    /// Marks `s` ready (by `by`, with `detail` as it leaves herd) and publishes its
    /// one `ready` event.
    async fn became_ready(self: &Arc<Self>, s: &Arc<Session>, by: &str, detail: &str) {
        let Some(at) = self.mark_ready(&s.id).await else {
            return;
        };
        let detail = self.show(s, Route::Watch, Window::all(detail));
        let command = self.shown_command(s);
        let notice = Notice::Ready {
            by: by.to_owned(),
            detail,
            ready_at: crate::text::rfc3339(at),
        };
        self.table.with_queues(|queues| {
            self.outbox.publish_notice(queues, s, command, notice);
        });
    }

    /// Looks for a listener of `s`'s tree on `port` until one is found or the
    /// session ends.
    #[expect(
        clippy::disallowed_methods,
        reason = "the pause between two looks at the socket table; it synchronises nothing"
    )]
    fn watch_port(self: &Arc<Self>, s: &Arc<Session>, port: u16) {
        let weak = Arc::downgrade(self);
        let session = Arc::clone(s);
        let mut done = s.done.subscribe();
        let detach = self.detach.clone();
        drop(self.runtime.spawn(async move {
            let mut pause = PORT_LOOK_FIRST;
            loop {
                let Some(inner) = weak.upgrade() else { return };
                if *done.borrow() || session.state().ready_at.is_some() {
                    return;
                }
                let cgroup = inner.shims.session_cgroup(&session);
                let root = session.shim.map_or(session.pid, |shim| shim.pid);
                let found = tokio::task::spawn_blocking(move || {
                    let inodes = crate::sys::sockets::listening_inodes(port);
                    !inodes.is_empty()
                        && crate::sys::sockets::holds_any(
                            &crate::sys::sockets::tree_pids(root, cgroup.as_deref()),
                            &inodes,
                        )
                })
                .await
                .unwrap_or(false);
                if found {
                    inner
                        .became_ready(&session, "port", &format!("port {port}"))
                        .await;
                    return;
                }
                drop(inner);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    _ = done.changed() => return,
                    () = detach.cancelled() => return,
                }
                pause = (pause * 2).min(PORT_LOOK_MAX);
            }
        }));
    }
}

/// Matches a session's `--ready` pattern against its output, line by line, as the
/// streams show it.
struct ReadyObserver {
    inner: Weak<Inner>,
    session: Arc<Session>,
    regex: regex::Regex,
    partial: Vec<u8>,
    keys: KeyLines,
    matched: bool,
}

impl ReadyObserver {
    /// Matches one whole line; on the first match, marks the session ready.
    fn line(&mut self, bytes: &[u8]) {
        let bytes = bytes.strip_suffix(b"\r").unwrap_or(bytes);
        let text = crate::text::strip_ansi(&String::from_utf8_lossy(bytes));
        let Some(inner) = self.inner.upgrade() else {
            return;
        };
        let text = self.keys.line(&text).into_owned();
        if text.starts_with(HERD_LINE_PREFIX) {
            return;
        }
        let shown = inner
            .hooks
            .redact_line(&self.session.command, &text)
            .into_owned();
        if !self.regex.is_match(&shown) {
            return;
        }
        self.matched = true;
        let session = Arc::clone(&self.session);
        drop(inner.runtime.clone().spawn(async move {
            inner.became_ready(&session, "pattern", &shown).await;
        }));
    }
}

impl Observer for ReadyObserver {
    fn output(&mut self, bytes: &[u8]) {
        if self.matched {
            return;
        }
        self.partial.extend_from_slice(bytes);
        while let Some(end) = memchr::memchr(b'\n', &self.partial) {
            let line: Vec<u8> = self.partial.drain(..=end).collect();
            self.line(&line[..end]);
            if self.matched {
                self.partial.clear();
                return;
            }
        }
        if self.partial.len() > READY_MAX_LINE_BYTES {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
    }

    fn end(&mut self) {
        if !self.matched && !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            self.line(&line);
        }
    }
}

impl super::Registry {
    /// Marks the running session `id` ready now, once: the mark is
    /// committed to the store before it is set, so it survives a restart of the
    /// host, and it wakes [`super::Registry::changes`] receivers. Returns when it was
    /// marked, or `None` when the session is not running or was marked already.
    pub async fn mark_ready(&self, id: &SessionId) -> Option<SystemTime> {
        self.inner.mark_ready(id).await
    }

    /// Whether the session `id` (an id, unique prefix or name) is ready; `None` when
    /// no session answers to it. Reads the result store for a finished session
    /// memory no longer holds.
    pub fn readiness(&self, id: &str) -> Option<Readiness> {
        self.inner.readiness(id)
    }
}
