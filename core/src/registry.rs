//! The registry: the table of sessions and every operation on them.
//!
//! Locking: `Inner::tables` (running, finished, owners' queues) is taken before any
//! session lock and never while awaiting. The one choke point, [`Inner::finish`], moves
//! a session from running to finished, stamps it, releases its handles and publishes
//! its completion inside a single critical section of the table lock, so a waiter
//! always sees the session either running or with its completion published (B10).
//!
//! Every route by which output leaves (poll, log, log chunk, wait, kill, list preview,
//! completion; heartbeat and watch in `notify`, foreground in `foreground`) passes it
//! through `pipeline.apply` with the route and the session owner's identity (B8, B30,
//! B31), and every `command` field through `pipeline.redact_command`.
//!
//! Lock order: table lock → agents (`handoff`) → session state → notifier state
//! (`notify`) → session tail, written down and checked in debug builds in
//! `lock_order.rs`.

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use herd_hooks::{OutputContext, Route, Shown, Window};
use herd_persistence::Home;
use tokio::sync::{broadcast, watch};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::answers::{
    CompletionReason, KillAnswer, KillStatus, ListRow, LogAnswer, LogChunk, ModeName, PollAnswer,
    SessionStatus, SpawnInfo, StdinAnswer, StdinStatus, WaitAnswer, WaitStatus,
};
use crate::config::{
    KillSource, ListFilter, Mode, NotificationPolicy, RegistryConfig, SpawnRequest,
};
use crate::dispatch::Dispatch;
use crate::error::{Error, LookupError, SpawnError};
use crate::event::Event;
use crate::handoff::Agents;
use crate::id::{self, SessionId};
use crate::kill;
use crate::lock_order::{Level, Ordered};
use crate::notify::Notifier;
use crate::output::page::{self, TextPage};
use crate::output::{LogWriter, Tail};
use crate::reader::{self, Finish, Source, Waiter};
use crate::session::{ExitInfo, Finished, Scope, Session, State, Stdin};
use crate::spawn::{self, EnvPlan, Launch, PtyFailure};
use crate::text;

mod delivery;
mod durable;
mod external;
mod lifecycle;
pub use external::External;
mod logs;
pub use delivery::Drained;
pub use logs::{FollowRead, LogFollower};
mod restore;
mod supervised;

pub(crate) use durable::source_from_name;
pub use restore::RestoreReport;

/// How long a scoped worker may take to show up in its unit before it is no longer watched.
const SCOPE_ACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Characters in a poll preview (B39).
const POLL_PREVIEW_CHARS: usize = 1_000;
/// Characters in a list row preview (B39).
const LIST_PREVIEW_CHARS: usize = 200;
/// Characters of the command in a list row.
const LIST_COMMAND_CHARS: usize = 200;
/// Default lines of a log page.
const LOG_DEFAULT_LINES: usize = 200;
/// The most bytes of the log file one log page carries (B39); a longer line is cut.
const LOG_PAGE_MAX_BYTES: usize = 200_000;
/// Capacity of the broadcast channel behind `subscribe`.
const BROADCAST_CAPACITY: usize = 4096;
/// How long a stdin write may wait for the child to read.
const STDIN_WRITE_TIMEOUT: Duration = Duration::from_secs(10);

/// The registry of background sessions. Cheap to clone; every clone is the same
/// registry.
#[derive(Debug, Clone)]
pub struct Registry {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) home: Home,
    pub(crate) config: RegistryConfig,
    pub(crate) tables: Mutex<Tables>,
    pub(crate) events: broadcast::Sender<Event>,
    /// Bumped after every finish; waiters for pending completions watch it.
    pub(crate) finishes: watch::Sender<u64>,
    /// Bumped whenever a session starts, finishes, changes owner or is forgotten;
    /// `changes` hands out receivers (a live view redraws on it, `herd top`).
    pub(crate) changes: watch::Sender<u64>,
    pub(crate) runtime: tokio::runtime::Handle,
    /// Watch breaker and heartbeat schedule, served by one timer task (B20, B21).
    pub(crate) notifier: Notifier,
    /// Parent and child agents and their handoffs (B25, B26).
    pub(crate) agents: Mutex<Agents>,
    /// Checkpoint, ledger and receipts (B27, B29, B38).
    durable: durable::Durable,
    /// Fires when the host detaches: followers of supervised sessions stop, their
    /// shims and jobs run on.
    pub(crate) detach: CancellationToken,
    /// Forks the shims of sessions that are not wrapped by a dispatcher.
    pub(crate) launcher: Option<crate::shim::link::Launcher>,
    /// Set when shutdown or detach begins: spawns are refused from then on.
    pub(crate) closing: std::sync::atomic::AtomicBool,
}

#[derive(Debug, Default)]
pub(crate) struct Tables {
    pub(crate) running: HashMap<SessionId, Arc<Session>>,
    pub(crate) finished: HashMap<SessionId, Arc<Session>>,
    pub(crate) queues: HashMap<String, VecDeque<Event>>,
    /// The most events one queue holds.
    pub(crate) queue_cap: usize,
    /// What was folded out of each owner's full queue since its last drain.
    pub(crate) folded: HashMap<String, Folded>,
}

/// Counts of events folded out of one owner's queue.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Folded {
    heartbeats: u64,
    watch_events: u64,
    completions: u64,
}

impl Folded {
    /// The event the next drain starts with.
    pub(crate) fn event(self) -> Event {
        Event::QueueFolded {
            heartbeats: self.heartbeats,
            watch_events: self.watch_events,
            completions: self.completions,
            message: format!(
                "your notification queue was full, so older ones were folded: {} heartbeats, {} watch \
                 events and {} completions. Folded completions are not lost: list your finished \
                 processes to see them",
                self.heartbeats, self.watch_events, self.completions
            ),
        }
    }
}

impl Tables {
    pub(crate) fn get(&self, id: &SessionId) -> Option<&Arc<Session>> {
        self.running.get(id).or_else(|| self.finished.get(id))
    }

    /// Queues `event` for `owner`'s next drain. A full queue folds its oldest
    /// heartbeat, else its oldest watch event, else its oldest completion (which
    /// stays undelivered in the ledger), and counts it for the next drain.
    pub(crate) fn enqueue(&mut self, owner: &str, event: Event) {
        let queue = self.queues.entry(owner.to_owned()).or_default();
        queue.push_back(event);
        while queue.len() > self.queue_cap.max(1) {
            let first = |pred: fn(&Event) -> bool| queue.iter().position(pred);
            let pick = first(|e| matches!(e, Event::Heartbeat { .. }))
                .or_else(|| {
                    first(|e| matches!(e, Event::WatchMatch { .. } | Event::WatchDisabled { .. }))
                })
                .or_else(|| first(|e| matches!(e, Event::Completion { .. })));
            let Some(dropped) = pick.and_then(|at| queue.remove(at)) else {
                break;
            };
            let folded = self.folded.entry(owner.to_owned()).or_default();
            match dropped {
                Event::Heartbeat { .. } => folded.heartbeats += 1,
                Event::Completion { .. } => folded.completions += 1,
                _ => folded.watch_events += 1,
            }
        }
    }

    fn all(&self) -> impl Iterator<Item = &Arc<Session>> {
        self.running.values().chain(self.finished.values())
    }
}

impl Registry {
    /// A registry whose every path derives from `home` (B4).
    ///
    /// Must be called inside a tokio runtime; creates nothing on disk until the first
    /// spawn, and nothing outside `home`. It does not read the checkpoint: a host that
    /// restarts calls [`Registry::restore`] right after `new` (B28).
    ///
    /// # Errors
    /// [`Error::NoRuntime`] outside a tokio runtime.
    pub fn new(home: Home, config: RegistryConfig) -> Result<Registry, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        config
            .validate()
            .map_err(|message| Error::InvalidArgument { message })?;
        let (events, _) = broadcast::channel(BROADCAST_CAPACITY);
        let notifier = Notifier::new(Arc::clone(&config.clock));
        let (finishes, _) = watch::channel(0);
        let (changes, _) = watch::channel(0);
        let launcher = config.shim.clone().map(crate::shim::link::Launcher::new);
        let queue_cap = config.queue_cap;
        Ok(Registry {
            inner: Arc::new(Inner {
                durable: durable::Durable::new(&home, config.log_budget_bytes),
                home,
                config,
                tables: Mutex::new(Tables {
                    queue_cap,
                    ..Tables::default()
                }),
                events,
                finishes,
                changes,
                runtime,
                notifier,
                agents: Mutex::new(Agents::default()),
                detach: CancellationToken::new(),
                launcher,
                closing: std::sync::atomic::AtomicBool::new(false),
            }),
        })
    }

    /// The home this registry works under.
    pub fn home(&self) -> &Home {
        &self.inner.home
    }

    /// The configuration this registry was built with.
    pub fn config(&self) -> &RegistryConfig {
        &self.inner.config
    }

    /// Starts a session.
    ///
    /// The guard (when configured) judges the command first; a refused command starts
    /// nothing. The child gets its own process group, the sanitised environment and
    /// the home's scratch dir as TMPDIR. A PTY that cannot be opened falls back to a
    /// pipe, said in `pty_note`; the command never runs twice.
    ///
    /// The answer comes once a checkpoint write covering the new session finished
    /// (B27; concurrent spawns share writes), so a session whose spawn was answered is
    /// restored after a crash of the host. A failed checkpoint write is logged and
    /// does not fail the spawn.
    ///
    /// # Errors
    /// [`SpawnError::Guarded`], [`SpawnError::InvalidRequest`] for an empty command,
    /// [`SpawnError::Prepare`] when the home's directories or the log cannot be
    /// created, [`SpawnError::Spawn`] when the OS refuses (nothing is left running),
    /// [`SpawnError::Dispatch`] when a `persist_on_release` session needs a restart-safe
    /// scope the host cannot give and the config requires one (B34).
    pub async fn spawn(&self, req: SpawnRequest) -> Result<SpawnInfo, SpawnError> {
        let info = self.inner.spawn(req).await?;
        self.inner.spawned(&info).await;
        Ok(info)
    }

    /// Resolves a full id or a unique prefix (B37).
    ///
    /// # Errors
    /// [`LookupError::NotFound`], [`LookupError::Ambiguous`], [`LookupError::TooShort`].
    pub fn lookup(&self, id_or_prefix: &str) -> Result<SessionId, LookupError> {
        match self.inner.lookup(id_or_prefix) {
            Ok(s) => Ok(s.id.clone()),
            Err(miss) => self
                .inner
                .receipt_lookup(id_or_prefix, miss)
                .map(|(id, _)| id),
        }
    }

    /// Resolves a full id or a unique prefix (B37) and names the session's owner
    /// (B31), for a front end that acts for one owner and must not reach another's.
    ///
    /// # Errors
    /// As [`Registry::lookup`].
    pub fn lookup_owned(&self, id_or_prefix: &str) -> Result<(SessionId, String), LookupError> {
        match self.inner.lookup(id_or_prefix) {
            Ok(s) => Ok((s.id.clone(), s.state().owner_task_id.clone())),
            Err(miss) => self
                .inner
                .receipt_lookup(id_or_prefix, miss)
                .map(|(id, r)| (id, r.owner_task_id)),
        }
    }

    /// Status, uptime, a 1,000-character preview and exit fields once exited (B39).
    ///
    /// # Errors
    /// [`Error::Lookup`] when the id does not resolve.
    pub fn poll(&self, id: &str) -> Result<PollAnswer, Error> {
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => return self.inner.poll_from_receipt(id, miss),
        };
        let growing = s.status() == SessionStatus::Running;
        let (text, cut) = s.text();
        let window = Window::last_chars(&text, POLL_PREVIEW_CHARS).growing(growing);
        let preview_cut = cut || window.omits_start();
        let st = s.state();
        let fin = st.finished.clone();
        let preview = self.inner.show(&s, &st, Route::Poll, window);
        drop(st);
        s.mark_read();
        let (bytes_not_kept, total_ingested) = {
            let tail = s.tail();
            (tail.bytes_not_kept(), tail.total_ingested())
        };
        Ok(PollAnswer {
            session_id: s.id.clone(),
            command: self.inner.shown_command(&s),
            status: if fin.is_some() {
                SessionStatus::Exited
            } else {
                SessionStatus::Running
            },
            pid: s.pid,
            uptime_seconds: s.uptime_seconds(),
            output_preview: preview,
            exit_code: fin.as_ref().and_then(|f| f.exit).and_then(|e| e.code),
            signal: fin.as_ref().and_then(|f| f.exit).and_then(|e| e.signal),
            completion_reason: fin.as_ref().map(|f| f.reason),
            termination_source: fin.as_ref().and_then(|f| f.source),
            output_cut: preview_cut,
            log_path: s.log_path.clone(),
            bytes_not_kept,
            total_ingested,
            note: self.inner.session_note(&s),
            time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
            replaces: s.origin.replaces.clone(),
        })
    }

    /// A page of output lines over the whole output the session's log file holds: the
    /// last `limit` (default 200) lines, or `limit` lines from line `offset` (0 is the
    /// first line the session printed), with the log's total line count (B39).
    ///
    /// A page is at most 200,000 bytes; a longer line is cut with a marker and a note.
    /// When the log file cannot serve the page (it is missing or unreadable, or it
    /// stopped at its cap or after a failed write), the page comes from the in-memory
    /// tail as before and the note says so.
    ///
    /// # Errors
    /// [`Error::Lookup`] when the id does not resolve.
    pub fn log(
        &self,
        id: &str,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> Result<LogAnswer, Error> {
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => return self.inner.log_from_receipt(id, miss, offset, limit),
        };
        let limit = limit.unwrap_or(LOG_DEFAULT_LINES);
        let is_running = s.status() == SessionStatus::Running;
        let bytes_not_kept = s.tail().bytes_not_kept();
        let mut notes: Vec<String> = self.inner.session_note(&s).into_iter().collect();
        let why_not_file = if bytes_not_kept > 0 {
            let held = std::fs::metadata(&s.log_path).map_or(0, |m| m.len());
            Some(format!(
                "the log file holds only the first {held} bytes of output ({}; {bytes_not_kept} later bytes were not kept)",
                if held >= self.inner.config.log_cap_bytes {
                    format!(
                        "it reached its cap of {} bytes",
                        self.inner.config.log_cap_bytes
                    )
                } else {
                    "a write to it failed".to_owned()
                }
            ))
        } else {
            match TextPage::of_file(&s.log_path, offset, limit, LOG_PAGE_MAX_BYTES, is_running) {
                Ok(Some(page)) => {
                    return Ok(self.log_answer(&s, page, notes));
                }
                // No file and nothing printed: the empty tail is the whole story.
                Ok(None) if s.tail().total_ingested() == 0 => None,
                Ok(None) => Some(format!("the log file {} is missing", s.log_path.display())),
                Err(error) => {
                    tracing::warn!(session_id = %s.id, path = %s.log_path.display(), %error, "session log unreadable; paging the in-memory tail");
                    Some(format!(
                        "the log file {} cannot be read ({error})",
                        s.log_path.display()
                    ))
                }
            }
        };
        let (text, cut) = s.text();
        if let Some(why) = why_not_file {
            notes.push(page::fallback_note(
                &why,
                "the in-memory tail of the output",
                !cut,
            ));
        }
        let page = TextPage::of_text(&text, offset, limit);
        Ok(self.log_answer(&s, page, notes))
    }

    /// The log answer for `page` of a live session, through the output pipeline.
    fn log_answer(&self, s: &Session, page: TextPage, mut notes: Vec<String>) -> LogAnswer {
        let st = s.state();
        let output = self.inner.show(s, &st, Route::Log, page.window());
        let status = if st.finished.is_some() {
            SessionStatus::Exited
        } else {
            SessionStatus::Running
        };
        drop(st);
        s.mark_read();
        let (output, cut_note) = page.marked(output, LOG_PAGE_MAX_BYTES);
        notes.extend(cut_note);
        LogAnswer {
            session_id: s.id.clone(),
            command: self.inner.shown_command(s),
            status,
            output,
            total_lines: page.n_total_lines,
            offset: page.first_line_idx,
            showing: format!("{} lines", page.n_lines),
            log_path: s.log_path.clone(),
            note: (!notes.is_empty()).then(|| notes.join("; ")),
        }
    }

    /// Up to `max_bytes` of the log file from byte `from_byte`, as text that never
    /// ends inside a character (for `logs --follow` and full dumps).
    ///
    /// A chunk ends at its last line end (a partial last line is handed out by a
    /// later call), and it is redacted with the log around it (B30): a private-key
    /// block it starts inside is masked, a token on a line longer than the chunk is
    /// masked whole. Only a chunk with no line end at all, filling `max_bytes`, or the
    /// end of a finished session's log, ends elsewhere.
    ///
    /// # Errors
    /// [`Error::Lookup`], or [`Error::Io`] when the log cannot be read.
    pub fn log_chunk(&self, id: &str, from_byte: u64, max_bytes: usize) -> Result<LogChunk, Error> {
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => {
                return self
                    .inner
                    .log_chunk_from_receipt(id, miss, from_byte, max_bytes);
            }
        };
        let is_running = s.status() == SessionStatus::Running;
        let Some(read) = logs::read_chunk(&s.log_path, from_byte, max_bytes, is_running)? else {
            return Ok(LogChunk {
                session_id: s.id.clone(),
                output: Shown::default(),
                next_byte: from_byte,
                is_running,
            });
        };
        let st = s.state();
        let output = self.inner.show(&s, &st, Route::Log, read.window());
        drop(st);
        Ok(LogChunk {
            session_id: s.id.clone(),
            output,
            next_byte: read.next_byte,
            is_running,
        })
    }

    /// A follower of the session's log from `from_byte` (`logs --follow`): each
    /// read hands out the new lines, redacted as one stream with carried state
    /// (a private-key block is masked line by line as it arrives), and an idle
    /// stream releases its unfinished line unless it can still become a secret.
    ///
    /// # Errors
    /// [`Error::Lookup`], or [`Error::Io`] when the log cannot be read.
    pub fn log_follower(&self, id: &str, from_byte: u64) -> Result<LogFollower, Error> {
        let (session_id, path, command, owner) = match self.inner.lookup(id) {
            Ok(s) => (
                s.id.clone(),
                s.log_path.clone(),
                s.command.clone(),
                s.state().owner_task_id.clone(),
            ),
            Err(miss) => {
                let (session_id, r) = self.inner.receipt_lookup(id, miss)?;
                let path = self.inner.home.session_log_path(session_id.as_str());
                (session_id, path, r.command, r.owner_task_id)
            }
        };
        LogFollower::open(
            Arc::clone(&self.inner),
            session_id,
            path,
            &command,
            &owner,
            from_byte,
        )
    }

    /// Waits for the session to finish, at most `timeout` (clamped to the wait cap,
    /// with a note), or until `interrupt` fires (B23).
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout, [`Error::Lookup`].
    pub async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        interrupt: Option<CancellationToken>,
    ) -> Result<WaitAnswer, Error> {
        if timeout.is_zero() {
            return Err(Error::InvalidArgument {
                message: "timeout must be positive (got 0s)".to_owned(),
            });
        }
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => return self.inner.wait_from_receipt(id, miss),
        };
        let cap = self.inner.config.wait_cap;
        let mut notes = Vec::new();
        let effective = if timeout > cap {
            notes.push(format!(
                "Requested wait of {}s was clamped to the configured limit of {}s",
                seconds_text(timeout),
                seconds_text(cap)
            ));
            cap
        } else {
            timeout
        };
        let mut done = s.done.subscribe();
        let interrupt = interrupt.unwrap_or_default();
        let outcome = tokio::select! {
            r = tokio::time::timeout(effective, done.wait_for(|d| *d)) => match r {
                Ok(_) => WaitStatus::Exited,
                Err(_) => WaitStatus::Timeout,
            },
            () = interrupt.cancelled() => WaitStatus::Interrupted,
        };
        let finished = s.state().finished.is_some();
        let status = if finished {
            WaitStatus::Exited
        } else {
            outcome
        };
        match status {
            WaitStatus::Exited => {}
            WaitStatus::Timeout => {
                notes.push(format!(
                    "Wait window of {}s elapsed — the process is still running. This is not an error. Uptime: {}s.{}",
                    seconds_text(effective),
                    s.uptime_seconds(),
                    if s.is_notify() && self.inner.emits_completion(&s) {
                        " notify_on_complete is set: you will be notified on exit — do more work instead of waiting again."
                    } else {
                        " Poll again later, or spawn with notify next time for automatic notification."
                    }
                ));
            }
            WaitStatus::Interrupted => {
                notes.push(if s.is_notify() && self.inner.emits_completion(&s) {
                    "wait interrupted by a new message from the user; the process is still running and you will be notified on exit. Answer the user now.".to_owned()
                } else {
                    "wait interrupted by a new message from the user; the process is still running. Answer the user now.".to_owned()
                });
            }
        }
        notes.extend(self.inner.session_note(&s));
        s.mark_read();
        let sized = self.inner.sized(&s, Route::Wait);
        Ok(WaitAnswer {
            session_id: s.id.clone(),
            status,
            command: self.inner.shown_command(&s),
            exit_code: sized.exit.and_then(|e| e.code),
            signal: sized.exit.and_then(|e| e.signal),
            completion_reason: sized.reason,
            termination_source: sized.source,
            output: sized.output,
            output_cut: sized.cut,
            log_path: s.log_path.clone(),
            process_running: !finished,
            note: (!notes.is_empty()).then(|| notes.join(". ")),
            time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
        })
    }

    /// Writes raw bytes to the session's stdin (pipe) or keyboard (PTY).
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn write(&self, id: &str, data: &[u8]) -> Result<StdinAnswer, Error> {
        let s = self.inner.lookup(id)?;
        Ok(write_input(&s, data).await)
    }

    /// Writes `text` followed by Enter (`\n` on a pipe, `\r` on a PTY).
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn submit(&self, id: &str, text: &str) -> Result<StdinAnswer, Error> {
        let s = self.inner.lookup(id)?;
        let enter = if s.mode == ModeName::Pty { "\r" } else { "\n" };
        Ok(write_input(&s, format!("{text}{enter}").as_bytes()).await)
    }

    /// Sends end-of-file: closes the stdin pipe, or sends EOT (Ctrl-D) on a PTY.
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn close_stdin(&self, id: &str) -> Result<StdinAnswer, Error> {
        let s = self.inner.lookup(id)?;
        let handle = {
            let mut st = s.state();
            if st.finished.is_some() {
                return Ok(already_exited());
            }
            match &st.stdin {
                Some(Stdin::Pipe(_)) => st.stdin.take(),
                Some(Stdin::Shim(_)) if s.mode == ModeName::Pipe => st.stdin.take(),
                other => other.clone(),
            }
        };
        Ok(match handle {
            Some(Stdin::Pipe(_)) => StdinAnswer {
                status: StdinStatus::Ok,
                bytes_written: None,
                message: Some("stdin closed".to_owned()),
            },
            Some(Stdin::Pty(master)) => {
                let mut answer = write_pty(&master, b"\x04").await;
                answer.message = Some("EOF sent".to_owned());
                answer
            }
            Some(Stdin::Shim(link)) => {
                let answer = link
                    .request(
                        |id| (crate::shim::wire::ToShim::Close { id }, Vec::new()),
                        STDIN_WRITE_TIMEOUT,
                    )
                    .await;
                match answer {
                    Ok(()) => StdinAnswer {
                        status: StdinStatus::Ok,
                        bytes_written: None,
                        message: Some(
                            if s.mode == ModeName::Pipe {
                                "stdin closed"
                            } else {
                                "EOF sent"
                            }
                            .to_owned(),
                        ),
                    },
                    Err(message) => stdin_error(&message),
                }
            }
            None => stdin_error("stdin is already closed"),
        })
    }

    /// Sets a PTY session's window size; the program gets SIGWINCH, and the terminal
    /// query responder answers size queries with the new size.
    ///
    /// # Errors
    /// [`Error::Lookup`]; [`Error::InvalidArgument`] for a size out of range (1 to
    /// 10,000 each) or a session without a terminal.
    pub async fn resize(&self, id: &str, rows: u16, cols: u16) -> Result<StdinAnswer, Error> {
        if !(1..=10_000).contains(&rows) || !(1..=10_000).contains(&cols) {
            return Err(Error::InvalidArgument {
                message: format!(
                    "a terminal size of {rows} rows x {cols} columns is out of range; each must be 1 to 10000"
                ),
            });
        }
        let s = self.inner.lookup(id)?;
        if s.mode != ModeName::Pty {
            return Err(Error::InvalidArgument {
                message: format!(
                    "session {} runs on pipes and has no terminal to resize; start it with a PTY",
                    s.id
                ),
            });
        }
        let handle = {
            let st = s.state();
            if st.finished.is_some() {
                return Ok(already_exited());
            }
            st.stdin.clone()
        };
        let result = match handle {
            Some(Stdin::Pty(master)) => master.get_ref().resize(rows, cols),
            Some(Stdin::Shim(link)) => {
                link.request(
                    |id| {
                        (
                            crate::shim::wire::ToShim::Resize { id, rows, cols },
                            Vec::new(),
                        )
                    },
                    STDIN_WRITE_TIMEOUT,
                )
                .await
            }
            Some(Stdin::Pipe(_)) | None => {
                Err("the session's terminal is no longer reachable".to_owned())
            }
        };
        Ok(match result {
            Ok(()) => StdinAnswer {
                status: StdinStatus::Ok,
                bytes_written: None,
                message: Some(format!("resized to {rows}x{cols}")),
            },
            Err(message) => stdin_error(&message),
        })
    }

    /// Kills the session's whole tree (B15-B17). `killed` only when the tree is gone;
    /// otherwise `kill_incomplete` with the survivors, and the session stays running.
    ///
    /// # Errors
    /// [`Error::Lookup`].
    pub async fn kill(&self, id: &str, source: KillSource) -> Result<KillAnswer, Error> {
        let s = match self.inner.lookup(id) {
            Ok(s) => s,
            Err(miss) => return self.inner.kill_from_receipt(id, miss, source),
        };
        Ok(self.inner.kill_session(&s, source).await)
    }

    /// Kills every running session owned by `owner` (every owner when `owner` is
    /// empty) except `exclude`. Lifecycle sources spare `persist_on_release` sessions
    /// (B17). Returns how many ended up killed or already exited.
    pub async fn kill_all(&self, owner: &str, exclude: &[SessionId], source: KillSource) -> usize {
        let targets: Vec<Arc<Session>> = {
            let tables = self.inner.lock();
            tables
                .running
                .values()
                .filter(|s| !exclude.contains(&s.id))
                .filter(|s| !(source.spares_persistent() && s.persist_on_release))
                .filter(|s| owner.is_empty() || s.state().owner_task_id == owner)
                .cloned()
                .collect()
        };
        let answers = self.inner.kill_sessions(&targets, source).await;
        answers
            .iter()
            .filter(|a| matches!(a.status, KillStatus::Killed | KillStatus::AlreadyExited))
            .count()
    }

    /// How many sessions run and how many finished ones are kept, cheaply (no
    /// rows, no output through the pipeline).
    pub fn counts(&self) -> (usize, usize) {
        let tables = self.inner.lock();
        (tables.running.len(), tables.finished.len())
    }

    /// One row per session matching `filter`, oldest first (B39).
    pub fn list(&self, filter: &ListFilter) -> Vec<ListRow> {
        let sessions: Vec<Arc<Session>> = {
            let tables = self.inner.lock();
            let pool: Box<dyn Iterator<Item = &Arc<Session>>> = if filter.include_finished {
                Box::new(tables.all())
            } else {
                Box::new(tables.running.values())
            };
            pool.filter(|s| {
                let st = s.state();
                let by_owner = filter.owner.as_deref().map(|o| st.owner_task_id == o);
                let by_key = filter
                    .session_key
                    .as_deref()
                    .map(|k| st.session_key.as_deref() == Some(k));
                match (by_owner, by_key) {
                    (None, None) => true,
                    (a, b) => a.unwrap_or(false) || b.unwrap_or(false),
                }
            })
            .cloned()
            .collect()
        };
        let mut sessions = sessions;
        // By the start instant: the RFC 3339 text has whole seconds only, and
        // sessions started in one second must still list in the order they started.
        sessions.sort_by_key(|s| (s.started_at, s.id.clone()));
        sessions.iter().map(|s| self.inner.row(s)).collect()
    }

    /// Ids of running sessions owned by `owner` (a turn-boundary marker; B2).
    pub fn snapshot_running_ids(&self, owner: &str) -> Vec<SessionId> {
        let tables = self.inner.lock();
        let mut ids: Vec<SessionId> = tables
            .running
            .values()
            .filter(|s| s.state().owner_task_id == owner)
            .map(|s| s.id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Whether any session runs under container key `task_id` (B2).
    pub fn has_active_processes(&self, task_id: &str) -> bool {
        self.inner
            .lock()
            .running
            .values()
            .any(|s| s.state().task_id == task_id)
    }

    /// Waits until no notify session owned by `owner` is still pending, at most
    /// `timeout`. True when none is pending (B10: a session leaves the running set in
    /// the same step that publishes its completion).
    pub async fn wait_for_pending_completions(&self, owner: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut finishes = self.inner.finishes.subscribe();
        loop {
            let pending = self
                .inner
                .lock()
                .running
                .values()
                .any(|s| s.is_notify() && s.state().owner_task_id == owner);
            if !pending {
                return true;
            }
            match tokio::time::timeout_at(deadline, finishes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }

    /// Every event as it is published, whatever the notification policy.
    ///
    /// The first `subscribe` or `drain` of a registry re-queues the completions earlier
    /// processes committed to the home's ledger but never delivered (B29); a receiver
    /// taken by that first call sees them.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        let rx = self.inner.events.subscribe();
        self.inner.replay_once();
        rx
    }

    /// A counter bumped whenever a session starts, finishes, changes owner or is
    /// forgotten: a view of the sessions waits on it (`changed()`) and lists again,
    /// instead of polling. It counts changes, it does not say which; bumps that
    /// come together are seen as one.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.inner.changes.subscribe()
    }

    /// Takes the events queued for `owner`; each is delivered once. Drained
    /// completions are marked delivered in the ledger, so they are not replayed after
    /// a restart (B29).
    pub fn drain(&self, owner: &str) -> Vec<Event> {
        self.take(owner).acknowledge()
    }

    /// Lets go of every session without stopping it: supervised sessions (those
    /// under a shim) keep running and the next registry on this home re-attaches them
    /// in [`Registry::restore`]; in-process sessions cannot outlive this process and
    /// are killed as [`KillSource::HostShutdown`]. The checkpoint is written durably
    /// before this returns. The registry answers nothing useful afterwards: call it
    /// last.
    pub async fn detach(&self) {
        self.inner
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let in_process: Vec<Arc<Session>> = self
            .inner
            .lock()
            .running
            .values()
            .filter(|s| s.shim.is_none())
            .cloned()
            .collect();
        let n_killed = self
            .inner
            .kill_sessions(&in_process, KillSource::HostShutdown)
            .await
            .len();
        self.inner.detach.cancel();
        if let Err(error) = self.inner.sync_durable().await {
            tracing::warn!(%error, "checkpoint not written at detach");
        }
        let n_detached = self.inner.lock().running.len();
        tracing::info!(
            n_detached,
            n_killed,
            "registry detached; supervised sessions run on"
        );
    }

    /// Kills everything, as [`KillSource::HostShutdown`] (persistent sessions too),
    /// then writes the checkpoint (empty unless a kill was incomplete, so a later
    /// restore has nothing to re-adopt) and waits for pending receipts.
    pub async fn shutdown(&self) {
        // No spawn starts from here on; one already past that check when the
        // first sweep took its snapshot is caught by the next.
        self.inner
            .closing
            .store(true, std::sync::atomic::Ordering::SeqCst);
        let mut n = self.kill_all("", &[], KillSource::HostShutdown).await;
        for _ in 0..3 {
            if self.inner.lock().running.is_empty() {
                break;
            }
            let more = self.kill_all("", &[], KillSource::HostShutdown).await;
            if more == 0 {
                break;
            }
            n += more;
        }
        if let Err(error) = self.inner.sync_durable().await {
            tracing::warn!(%error, "checkpoint not written at shutdown");
        }
        tracing::info!(n_killed = n, "registry shut down");
    }
}

/// A sized output snapshot with the session's exit fields.
#[derive(Debug)]
pub(crate) struct Sized {
    pub(crate) output: Shown,
    pub(crate) cut: bool,
    pub(crate) exit: Option<ExitInfo>,
    pub(crate) reason: Option<CompletionReason>,
    pub(crate) source: Option<KillSource>,
}

impl Inner {
    pub(crate) fn lock(&self) -> Ordered<'_, Tables> {
        Ordered::acquire(Level::Tables, &self.tables)
    }

    pub(crate) fn lookup(&self, id_or_prefix: &str) -> Result<Arc<Session>, LookupError> {
        let tables = self.lock();
        let wanted = id::normalise_prefix(id_or_prefix);
        if let Some(s) = tables.all().find(|s| s.id.as_str() == wanted) {
            return Ok(Arc::clone(s));
        }
        // A name: the running session that has it, else the newest finished one.
        if check_name(id_or_prefix).is_ok() {
            let named = |s: &&Arc<Session>| s.name.as_deref() == Some(id_or_prefix);
            let running: Vec<&Arc<Session>> = tables.running.values().filter(named).collect();
            match running.as_slice() {
                [one] => return Ok(Arc::clone(one)),
                [] => {
                    if let Some(s) = tables
                        .finished
                        .values()
                        .filter(named)
                        .max_by_key(|s| s.started_at)
                    {
                        return Ok(Arc::clone(s));
                    }
                }
                many => {
                    let mut matches: Vec<SessionId> = many.iter().map(|s| s.id.clone()).collect();
                    matches.sort();
                    return Err(LookupError::Ambiguous {
                        prefix: id_or_prefix.to_owned(),
                        matches,
                    });
                }
            }
            return Err(LookupError::NotFound {
                id: id_or_prefix.to_owned(),
            });
        }
        let suffix_len = wanted.len() - id::ID_PREFIX.len();
        if suffix_len < id::MIN_PREFIX_CHARS {
            return Err(LookupError::TooShort {
                prefix: id_or_prefix.to_owned(),
            });
        }
        let matches: Vec<Arc<Session>> = tables
            .all()
            .filter(|s| s.id.as_str().starts_with(&wanted))
            .cloned()
            .collect();
        drop(tables);
        match matches.as_slice() {
            // B37: the prefix must name one id across memory and the receipts.
            [one] => match self.other_receipts_with_prefix(&wanted, &one.id) {
                others if others.is_empty() => Ok(Arc::clone(one)),
                mut others => {
                    others.push(one.id.clone());
                    others.sort();
                    Err(LookupError::Ambiguous {
                        prefix: id_or_prefix.to_owned(),
                        matches: others,
                    })
                }
            },
            [] => Err(LookupError::NotFound {
                id: id_or_prefix.to_owned(),
            }),
            many => {
                let mut ids: Vec<SessionId> = many.iter().map(|s| s.id.clone()).collect();
                ids.sort();
                Err(LookupError::Ambiguous {
                    prefix: id_or_prefix.to_owned(),
                    matches: ids,
                })
            }
        }
    }

    /// The session's command line as it may leave herd: secrets masked (B30).
    pub(crate) fn shown_command(&self, s: &Session) -> Shown {
        self.config.pipeline.show_command(&s.command)
    }

    /// The one way a session's output leaves herd: `window` through the output
    /// pipeline as the session owner's, redacted with its context (B30, B31).
    pub(crate) fn show(&self, s: &Session, st: &State, route: Route, window: Window<'_>) -> Shown {
        let exit = st.finished.as_ref().and_then(|f| f.exit);
        self.show_as(s, &st.owner_task_id, exit, route, window)
    }

    /// [`Inner::show`] for a given owner and exit, as the completion route needs
    /// before the session's state records them.
    pub(crate) fn show_as(
        &self,
        s: &Session,
        owner: &str,
        exit: Option<ExitInfo>,
        route: Route,
        window: Window<'_>,
    ) -> Shown {
        let return_code = exit.and_then(|e| e.code.or(e.signal.map(|sig| 128 + sig)));
        let ctx = OutputContext {
            route,
            command: &s.command,
            return_code,
            owner_task_id: owner,
            session_id: s.id.as_str(),
            backend: "local",
        };
        self.config.pipeline.show(&ctx, window)
    }

    /// The one sizing helper: the tail of `completion_output_chars`, cut flag, exit
    /// fields (B8).
    pub(crate) fn sized(&self, s: &Session, route: Route) -> Sized {
        let growing = s.status() == SessionStatus::Running;
        let (text, cut) = s.text();
        let window = Window::last_chars(&text, s.completion_chars).growing(growing);
        let cut = cut || window.omits_start();
        let st = s.state();
        let output = self.show(s, &st, route, window);
        let fin = st.finished.as_ref();
        Sized {
            output,
            cut,
            exit: fin.and_then(|f| f.exit),
            reason: fin.map(|f| f.reason),
            source: fin.and_then(|f| f.source),
        }
    }

    fn row(&self, s: &Session) -> ListRow {
        let growing = s.status() == SessionStatus::Running;
        let (text, _) = s.text();
        let st = s.state();
        let preview = self.show(
            s,
            &st,
            Route::ListPreview,
            Window::last_chars(&text, LIST_PREVIEW_CHARS).growing(growing),
        );
        let fin = st.finished.as_ref();
        ListRow {
            name: s.name.clone(),
            session_id: s.id.clone(),
            command: self
                .config
                .pipeline
                .show_command_head(&s.command, LIST_COMMAND_CHARS),
            cwd: s.cwd.clone(),
            pid: s.pid,
            mode: s.mode,
            owner_task_id: st.owner_task_id.clone(),
            task_id: st.task_id.clone(),
            session_key: st.session_key.clone(),
            started_at: text::rfc3339(s.started_at),
            uptime_seconds: s.uptime_seconds(),
            status: if fin.is_some() {
                SessionStatus::Exited
            } else {
                SessionStatus::Running
            },
            output_preview: preview,
            exit_code: fin.and_then(|f| f.exit).and_then(|e| e.code),
            signal: fin.and_then(|f| f.exit).and_then(|e| e.signal),
            duration_seconds: fin
                .map(|f| f.at.duration_since(s.started_at).map_or(0, |d| d.as_secs())),
            completion_reason: fin.map(|f| f.reason),
            termination_source: fin.and_then(|f| f.source),
            notify_on_complete: s.is_notify(),
            persist_on_release: s.persist_on_release,
            time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
            replaces: s.origin.replaces.clone(),
        }
    }

    pub(crate) async fn spawn(
        self: &Arc<Self>,
        req: SpawnRequest,
    ) -> Result<SpawnInfo, SpawnError> {
        if self.closing.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(SpawnError::ShuttingDown);
        }
        if req.command.trim().is_empty() {
            return Err(SpawnError::InvalidRequest {
                field: "command",
                message: "the command is empty; pass a shell command line".to_owned(),
            });
        }
        if let Some(name) = &req.name {
            check_name(name)?;
            let owner = req.owner_task_id.as_deref().unwrap_or(&req.task_id);
            let taken = self
                .lock()
                .running
                .values()
                .find(|s| s.name.as_deref() == Some(name) && s.state().owner_task_id == owner)
                .map(|s| s.id.clone());
            if let Some(id) = taken {
                return Err(SpawnError::InvalidRequest {
                    field: "name",
                    message: format!(
                        "{name} is already the name of your running session {id}; pick another, or kill or restart that one"
                    ),
                });
            }
        }
        if let Some(n) = req.heartbeat_seconds.filter(|&n| n > 0) {
            crate::config::limits::check(
                "heartbeat_seconds",
                n,
                &crate::config::limits::HEARTBEAT_SECONDS,
            )
            .map_err(|message| SpawnError::InvalidRequest {
                field: "heartbeat_seconds",
                message: format!("{message}; 0 turns it off"),
            })?;
        }
        if let Some(n) = req.completion_output_chars {
            crate::config::limits::check(
                "completion_output_chars",
                n,
                &crate::config::limits::COMPLETION_OUTPUT_CHARS,
            )
            .map_err(|message| SpawnError::InvalidRequest {
                field: "completion_output_chars",
                message,
            })?;
        }
        let time_limit = match req.time_limit {
            Some(limit) => {
                let range = &crate::config::limits::TIME_LIMIT_SECONDS;
                if limit < Duration::from_secs(*range.start())
                    || limit > Duration::from_secs(*range.end())
                {
                    return Err(SpawnError::InvalidRequest {
                        field: "time_limit_seconds",
                        message: format!(
                            "the time limit must be from {} s to {} s (ten years); got {} s",
                            range.start(),
                            range.end(),
                            limit.as_secs_f64()
                        ),
                    });
                }
                Some(crate::session::TimeLimit {
                    limit,
                    deadline: SystemTime::now() + limit,
                })
            }
            None => None,
        };
        if self.config.shell.is_empty() {
            return Err(SpawnError::InvalidRequest {
                field: "shell",
                message: "the configured shell argv is empty; set it to e.g. [\"bash\", \"-c\"]"
                    .to_owned(),
            });
        }
        let cwd = match &req.cwd {
            Some(dir) => dir.clone(),
            None => std::env::current_dir().map_err(|source| SpawnError::Spawn {
                command: self
                    .config
                    .pipeline
                    .redact_command(&req.command)
                    .into_owned(),
                source,
            })?,
        };
        // Checked here, where the job starts, in every mode: a PTY spawn would
        // otherwise fall back to the home directory without a word.
        let cwd = std::path::absolute(&cwd).unwrap_or(cwd);
        match std::fs::metadata(&cwd) {
            Ok(meta) if meta.is_dir() => {}
            Ok(_) => {
                return Err(SpawnError::InvalidRequest {
                    field: "cwd",
                    message: format!("{} is not a directory", cwd.display()),
                });
            }
            Err(err) => {
                return Err(SpawnError::InvalidRequest {
                    field: "cwd",
                    message: format!(
                        "{} cannot be used as the working directory: {err}",
                        cwd.display()
                    ),
                });
            }
        }
        if let Some(host) = &self.config.guard {
            let verdict = spawn::judge(host, &req.command, &cwd)
                .await
                .map_err(|err| SpawnError::Spawn {
                    command: self
                        .config
                        .pipeline
                        .redact_command(&req.command)
                        .into_owned(),
                    source: std::io::Error::other(format!("the guard's worker failed: {err}")),
                })?;
            if let herd_guards::Verdict::Block(block) = verdict {
                tracing::info!(rule = %block.rule, "spawn refused by the self-kill guard");
                return Err(SpawnError::Guarded(block));
            }
        }
        let wakes = self.plan_notifications(&req);
        let notes = wakes.notes.clone();

        let id = self.fresh_id();
        let prepare = |path: PathBuf, e: Box<dyn std::error::Error + Send + Sync>| {
            SpawnError::Prepare { path, source: e }
        };
        // One stat each when the directories exist (the common case); they are
        // created on demand, under the home only, when they do not.
        let scratch = self.home.scratch_dir();
        let logs = self.home.session_logs_dir();
        for dir in [&scratch, &logs] {
            if !dir.is_dir() {
                self.home
                    .ensure_dir(dir)
                    .map_err(|e| prepare(dir.clone(), e.into()))?;
            }
        }
        let log_path = self.home.session_log_path(id.as_str());

        let want_pty = matches!(req.mode, Mode::Pty { .. });
        let plan = EnvPlan {
            deny: &self.config.env_deny,
            forward: &req.forward_env,
            overrides: &req.env,
            scratch: &scratch,
            session_id: id.as_str(),
            pty: want_pty,
        };
        let mut env = match &req.caller_env {
            Some(vars) => spawn::child_env(
                &plan,
                vars.iter()
                    .map(|(name, value)| (OsString::from(name), OsString::from(value))),
            ),
            None => spawn::child_env(&plan, std::env::vars_os()),
        };
        let direct = self
            .config
            .direct_exec
            .then(|| spawn::direct_argv(&self.config.shell, &req.command, &env, &cwd))
            .flatten();
        let argv = match direct {
            Some(argv) => {
                // What the shell would have set before exec-ing the command.
                if cwd.is_absolute() {
                    env.insert("PWD".into(), cwd.as_os_str().to_owned());
                } else {
                    env.remove(std::ffi::OsStr::new("PWD"));
                }
                argv
            }
            None => {
                let mut argv = self.config.shell.clone();
                argv.push(spawn::rewrite_compound_background(&req.command).into_owned());
                argv
            }
        };
        // A supervised session's shim is what a dispatcher wraps (B34): the shim and
        // its job then live in the scope together and outlive a service restart.
        let (argv, shim_argv, dispatch, scope) = match &self.config.shim {
            Some(program) => {
                let (wrapped, dispatch, scope) = self
                    .dispatch(crate::shim::link::shim_argv(program), &mut env, &req, &id)
                    .await?;
                // A shim in a scope of its own is started by the wrapper; any other
                // is forked by the launcher (`None`).
                let direct = matches!(dispatch, Dispatch::Scoped { .. }).then_some(wrapped);
                (argv, Some(direct), dispatch, scope)
            }
            None => {
                let (argv, dispatch, scope) = self.dispatch(argv, &mut env, &req, &id).await?;
                (argv, None, dispatch, scope)
            }
        };
        let launch = Launch {
            argv,
            env: &env,
            cwd: &cwd,
        };
        let shown_command = self.config.pipeline.show_command(&req.command);
        let spawn_err = |source| SpawnError::Spawn {
            command: shown_command.to_string(),
            source,
        };

        let mut pty_note = None;
        let started = match shim_argv {
            Some(shim_argv) => {
                let pty = match req.mode {
                    Mode::Pty { rows, cols } => Some((rows, cols)),
                    Mode::Pipe => None,
                };
                let attempt = if pty.is_some() && self.config.pty_unavailable {
                    Err(ShimStartError::PtyUnavailable(
                        "PTY support disabled by configuration".to_owned(),
                    ))
                } else {
                    self.start_shim(
                        &id,
                        shim_argv.as_deref(),
                        &launch,
                        pty,
                        &log_path,
                        time_limit,
                    )
                    .await
                };
                match attempt {
                    Ok(started) => started,
                    Err(ShimStartError::PtyUnavailable(error)) => {
                        let (note, env) = pipe_fallback(&error, &env, &req.env);
                        pty_note = Some(note);
                        let launch = Launch {
                            argv: launch.argv.clone(),
                            env: &env,
                            cwd: &cwd,
                        };
                        self.start_shim(
                            &id,
                            shim_argv.as_deref(),
                            &launch,
                            None,
                            &log_path,
                            time_limit,
                        )
                        .await
                        .map_err(|e| spawn_err(e.into_io()))?
                    }
                    Err(error) => return Err(spawn_err(error.into_io())),
                }
            }
            None => {
                let started = (|| -> Result<Started, SpawnError> {
                    Ok(match req.mode {
                        Mode::Pty { rows, cols } => {
                            match spawn::spawn_pty(&launch, rows, cols, self.config.pty_unavailable)
                            {
                                Ok(child) => Started::Pty(child, rows, cols),
                                Err(PtyFailure::Open(error)) => {
                                    let (note, env) = pipe_fallback(&error, &env, &req.env);
                                    pty_note = Some(note);
                                    let launch = Launch {
                                        argv: launch.argv.clone(),
                                        env: &env,
                                        cwd: &cwd,
                                    };
                                    Started::Pipe(spawn::spawn_pipe(&launch).map_err(spawn_err)?)
                                }
                                Err(PtyFailure::Spawn(error)) => {
                                    return Err(spawn_err(std::io::Error::other(error)));
                                }
                            }
                        }
                        Mode::Pipe => Started::Pipe(spawn::spawn_pipe(&launch).map_err(spawn_err)?),
                    })
                })();
                started?
            }
        };

        let (pid, start_time, mode, stdin, runner, shim_ref) = match started {
            Started::Pipe(child) => (
                child.pid,
                crate::sys::start_time(child.pid),
                ModeName::Pipe,
                Stdin::Pipe(Arc::new(child.stdin)),
                Runner::InProcess(
                    Source::Pipe {
                        rx: child.output,
                        raised: false,
                    },
                    Waiter::Tokio(child.child),
                ),
                None,
            ),
            Started::Pty(child, rows, cols) => {
                let master = Arc::new(child.master);
                let mut std_child = child.child;
                let handle = tokio::task::spawn_blocking(move || std_child.wait());
                (
                    child.pid,
                    crate::sys::start_time(child.pid),
                    ModeName::Pty,
                    Stdin::Pty(Arc::clone(&master)),
                    Runner::InProcess(
                        Source::Pty {
                            master,
                            scanner: herd_pty::Scanner::new(rows, cols),
                        },
                        Waiter::Blocking(handle),
                    ),
                    None,
                )
            }
            Started::Shim(started) => {
                let ShimStarted {
                    pid,
                    start_time,
                    pty,
                    shim,
                    attached,
                    dir,
                } = *started;
                (
                    pid,
                    start_time,
                    if pty { ModeName::Pty } else { ModeName::Pipe },
                    Stdin::Shim(Arc::clone(&attached.link)),
                    Runner::Shim {
                        attached,
                        dir,
                        shim_pid: shim.pid,
                    },
                    Some(shim),
                )
            }
        };
        let owner = req
            .owner_task_id
            .clone()
            .unwrap_or_else(|| req.task_id.clone());
        let (done, _) = watch::channel(false);
        let (kill_requested, _) = watch::channel(false);
        let session = Arc::new(Session {
            id: id.clone(),
            command: req.command.clone(),
            cwd,
            pid,
            pgid: pid,
            start_time,
            mode,
            started_at: SystemTime::now(),
            started: Instant::now(),
            log_path: log_path.clone(),
            notify: std::sync::atomic::AtomicBool::new(wakes.notify),
            read: std::sync::atomic::AtomicBool::new(false),
            persist_on_release: req.persist_on_release,
            scope,
            shim: shim_ref,
            completion_chars: req
                .completion_output_chars
                .unwrap_or(self.config.completion_output_chars),
            name: req.name.clone(),
            time_limit,
            origin: crate::session::Origin::of(&req),
            tail: Mutex::new(Tail::new(self.config.buffer_bytes)),
            state: Mutex::new(State {
                task_id: req.task_id.clone(),
                owner_task_id: owner,
                session_key: req.session_key.clone(),
                handoff_note: None,
                exit: None,
                finished: None,
                kill_source: None,
                stdin: Some(stdin),
            }),
            done,
            kill_requested,
        });
        {
            let mut tables = self.lock();
            self.prune(&mut tables);
            tables.running.insert(id.clone(), Arc::clone(&session));
        }
        self.changed();
        let observer = self.arm_notifications(&session, &wakes);
        self.arm_time_limit(&session);
        let span = tracing::info_span!("session", id = %id);
        let inner = Arc::clone(self);
        let task_session = Arc::clone(&session);
        match runner {
            Runner::InProcess(source, waiter) => {
                let log = LogWriter::new(log_path.clone(), self.config.log_cap_bytes);
                let idle_drain = self.config.idle_drain;
                drop(
                    self.runtime.spawn(
                        async move {
                            let finish = reader::run(
                                Arc::clone(&task_session),
                                source,
                                waiter,
                                log,
                                observer,
                                idle_drain,
                            )
                            .await;
                            inner.finish(&task_session, finish);
                        }
                        .instrument(span),
                    ),
                );
            }
            Runner::Shim {
                attached,
                dir,
                shim_pid,
            } => {
                let cursor = crate::shim::link::Cursor {
                    log_bytes: 0,
                    progress: crate::shim::wire::Progress::default(),
                };
                self.follow_shim(
                    task_session,
                    attached,
                    cursor,
                    observer,
                    dir,
                    shim_pid,
                    span,
                );
            }
        }
        self.watch_scope_ack(&session);
        tracing::info!(session_id = %id, pid, pgid = pid, mode = ?mode, dispatch = %dispatch.kind(), "session spawned");
        let mut notes = notes;
        notes.extend(dispatch.note());
        Ok(SpawnInfo {
            name: req.name.clone(),
            session_id: id,
            pid,
            command: shown_command,
            mode,
            notify_on_complete: wakes.notify,
            watch_patterns: wakes.watch,
            heartbeat_seconds: wakes.heartbeat.map(|d| d.as_secs()),
            persist_on_release: req.persist_on_release,
            pty_note,
            dispatch: dispatch.kind(),
            note: (!notes.is_empty()).then(|| notes.join("; ")),
            time_limit_seconds: time_limit.map(|t| t.limit.as_secs()),
            replaces: req.replaces.clone(),
        })
    }

    /// Watches a scoped worker enter its unit (B34). One that exits first goes to the
    /// dispatcher, which re-checks the user bus: a vanished bus is logged as an
    /// infrastructure failure (B35) and flips the cached verdict, so the next dispatch
    /// degrades (or fails typed) instead of feeding another job to a dead wrapper.
    fn watch_scope_ack(&self, session: &Arc<Session>) {
        let (Some(scope), Some(dispatcher)) =
            (session.scope.clone(), self.config.dispatcher.clone())
        else {
            return;
        };
        let s = Arc::clone(session);
        drop(self.runtime.spawn(async move {
            if crate::dispatch::wait_for_scope_ack(s.pid, &scope.unit, SCOPE_ACK_TIMEOUT).await
                != crate::dispatch::ScopeAck::Exited
            {
                return;
            }
            // The bus is re-checked now, while the cause is fresh; the exit status is
            // the reader's to collect and may not be known yet (it only colours the
            // message of a worker that failed with the bus still there).
            let exit_code = s.state().exit.and_then(|e| e.code);
            let error = dispatcher.on_early_exit(&scope.env, &scope.unit, exit_code);
            if error.is_infrastructure() {
                tracing::warn!(session_id = %s.id, infrastructure = true, %error, "scoped worker lost its user bus");
            } else {
                tracing::debug!(session_id = %s.id, %error, "scoped worker exited before it was seen in its scope");
            }
        }));
    }

    /// Restart-safe dispatch (B34): a `persist_on_release` session asks the configured
    /// dispatcher; a scoped one runs the wrapped argv with the bus environment added.
    /// Returns the argv to run, the decision and the scope to record.
    async fn dispatch(
        &self,
        argv: Vec<String>,
        env: &mut std::collections::BTreeMap<OsString, OsString>,
        req: &SpawnRequest,
        id: &SessionId,
    ) -> Result<(Vec<String>, Dispatch, Option<Scope>), SpawnError> {
        let Some(dispatcher) = self
            .config
            .dispatcher
            .as_ref()
            .filter(|_| req.persist_on_release)
        else {
            return Ok((argv, Dispatch::InProcess, None));
        };
        let spawn_env: HashMap<String, String> = env
            .iter()
            .filter_map(|(k, v)| Some((k.to_str()?.to_owned(), v.to_str()?.to_owned())))
            .collect();
        let decision = dispatcher
            .dispatch(
                &argv,
                &spawn_env,
                true,
                self.config.require_restart_safe_scope,
                id.as_str(),
            )
            .await?;
        match decision {
            Dispatch::Scoped {
                argv: wrapped,
                unit,
                env: bus,
            } => {
                let mut scope_env = spawn_env;
                for (k, v) in &bus {
                    env.insert(OsString::from(k), OsString::from(v));
                    scope_env.insert(k.clone(), v.clone());
                }
                let scope = Scope {
                    unit: unit.clone(),
                    env: scope_env,
                };
                Ok((
                    wrapped,
                    Dispatch::Scoped {
                        argv: Vec::new(),
                        unit,
                        env: bus,
                    },
                    Some(scope),
                ))
            }
            other => Ok((argv, other, None)),
        }
    }

    fn fresh_id(&self) -> SessionId {
        let tables = self.lock();
        loop {
            let id = SessionId::generate();
            if tables.get(&id).is_none() {
                return id;
            }
        }
    }

    /// The one choke point (B9): stamps, releases handles and publishes exactly one
    /// completion, all inside one critical section of the table lock (B10).
    fn finish(self: &Arc<Self>, s: &Arc<Session>, finish: Finish) {
        let Finish {
            exit,
            descendants_alive,
            killed_by,
        } = finish;
        if let Some(source) = killed_by {
            // The shim killed the job itself (its time limit); a kill the registry
            // began meanwhile keeps its own source.
            s.state().kill_source.get_or_insert(source);
        }
        let exit = match exit {
            Ok(info) => Some(info),
            Err(error) => {
                // B14: the status may be known already; only a truly unknown status
                // reads "lost".
                let known = s.state().exit;
                if known.is_none() {
                    tracing::warn!(%error, "exit status could not be collected");
                }
                known
            }
        };
        let (final_text, final_cut, _) = s.text_final();
        let now = SystemTime::now();
        // Everything slow or foreign happens before the table lock: the hooks on the
        // completion's output, and the ledger commit (an fsync). The event is drafted
        // from the session as it is now; under the lock it is built again (cheap),
        // and only if a kill, an adoption or a handoff changed it meanwhile is it
        // committed there, the rare slow path.
        let window = Window::last_chars(&final_text, s.completion_chars);
        let output_cut = final_cut || window.omits_start();
        let output = {
            let (owner, exit_known) = {
                let st = s.state();
                (st.owner_task_id.clone(), exit.or(st.exit))
            };
            // The hooks see the return code the completion will carry.
            self.show_as(s, &owner, exit_known, Route::Completion, window)
        };
        let command = self.shown_command(s);
        let outcome = |st: &State| match (st.kill_source, exit.or(st.exit)) {
            (Some(source), _) => (CompletionReason::Killed, Some(source)),
            (None, None) => (CompletionReason::Lost, None),
            (None, Some(e)) if e.signal.is_some() => (CompletionReason::Signaled, None),
            (None, Some(_)) => (CompletionReason::Exited, None),
        };
        let draft = |st: &State| {
            let (reason, source) = outcome(st);
            let exit = exit.or(st.exit);
            Event::Completion {
                session_id: s.id.clone(),
                task_id: st.task_id.clone(),
                owner_task_id: st.owner_task_id.clone(),
                session_key: st.session_key.clone(),
                command: command.clone(),
                exit_code: exit.and_then(|e| e.code),
                signal: exit.and_then(|e| e.signal),
                completion_reason: reason,
                termination_source: source,
                output: output.clone(),
                output_cut,
                log_path: s.log_path.clone(),
                started_at: text::rfc3339(s.started_at),
                finished_at: text::rfc3339(now),
                handoff_note: st.handoff_note.clone(),
                descendants_alive: descendants_alive.clone(),
            }
        };
        // A session restore re-adopted or closed has no collected exit status and
        // publishes nothing (B28).
        let emits = self.emits_completion(s);
        let queued = |event: &Event| emits && s.is_notify() && self.policy_allows(event);
        let early = draft(&s.state());
        // Committed before it is published (B29). A supervised session that a
        // restore finishes again (the previous daemon crashed after delivering it
        // but before its receipt was stored) is not queued a second time.
        let early_commit = queued(&early).then(|| self.commit_completion(&early));
        let mut tables = self.lock();
        if tables.running.remove(&s.id).is_none() {
            return;
        }
        self.notifier.forget(&s.id);
        let event = {
            let mut st = s.state();
            let event = draft(&st);
            let (reason, source) = outcome(&st);
            st.exit = exit.or(st.exit);
            st.finished = Some(Finished {
                at: now,
                reason,
                source,
                exit: st.exit,
            });
            st.stdin = None;
            event
        };
        tables.finished.insert(s.id.clone(), Arc::clone(s));
        if queued(&event) {
            let commit = match early_commit {
                Some(committed) if same_completion(&early, &event) => committed,
                Some(_) => {
                    tracing::debug!(session_id = %s.id, "the completion changed while it was drafted; replaced under the lock");
                    self.recommit_completion(&event)
                }
                None => {
                    tracing::debug!(session_id = %s.id, "the completion became queued while it was drafted; committed under the lock");
                    self.commit_completion(&event)
                }
            };
            if commit {
                tables.enqueue(event.owner_task_id().unwrap_or_default(), event.clone());
            }
        } else if early_commit == Some(true) {
            // Committed early but not queued after all (the policy or notify
            // changed): marked delivered, so a restart does not replay it to nobody.
            self.mark_delivered(std::slice::from_ref(&early));
        }
        if emits {
            let _ = self.events.send(event);
        }
        self.expect_receipt(&s.id);
        self.prune(&mut tables);
        drop(tables);
        // The receipt is queued before anyone can see the session done, so a
        // `sync_durable` (shutdown's included) after a `wait` always covers it.
        self.finished_durably(s);
        s.done.send_replace(true);
        self.finishes.send_modify(|n| *n += 1);
        self.changed();
        tracing::info!(session_id = %s.id, "session finished");
    }

    /// Tells the `changes` receivers that the sessions changed. Called after the
    /// table lock is released (a watch send takes the watch's own lock only).
    pub(crate) fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub(crate) fn policy_allows(&self, event: &Event) -> bool {
        match self.config.notifications {
            NotificationPolicy::All => true,
            NotificationPolicy::Result => matches!(event, Event::Completion { .. }),
            NotificationPolicy::Error => matches!(
                event,
                Event::Completion { exit_code, completion_reason, .. }
                    if !(*exit_code == Some(0) && *completion_reason == CompletionReason::Exited)
            ),
            NotificationPolicy::Off => false,
        }
    }

    /// B11: drops finished sessions past the TTL, then the oldest beyond the cap.
    fn prune(&self, tables: &mut Tables) {
        let now = SystemTime::now();
        let ttl = self.config.finished_ttl;
        let finished_at = |s: &Session| s.state().finished.as_ref().map_or(now, |f| f.at);
        // A session whose receipt is not written yet stays until it is, so its
        // result is always answerable from memory or from the receipt (B38).
        tables.finished.retain(|id, s| {
            now.duration_since(finished_at(s)).unwrap_or_default() <= ttl
                || self.receipt_pending(id)
        });
        let excess = tables
            .finished
            .len()
            .saturating_sub(self.config.finished_cap);
        if excess > 0 {
            let mut by_age: Vec<(SystemTime, SessionId)> = tables
                .finished
                .values()
                .filter(|s| !self.receipt_pending(&s.id))
                .map(|s| (finished_at(s), s.id.clone()))
                .collect();
            by_age.sort();
            for (_, id) in by_age.into_iter().take(excess) {
                if let Some(s) = tables.finished.remove(&id) {
                    s.tail().release();
                }
            }
        }
    }

    pub(crate) async fn kill_session(&self, s: &Arc<Session>, source: KillSource) -> KillAnswer {
        let Some(target) = begin_kill(s, source) else {
            return self.kill_answer(s, source, KillStatus::AlreadyExited, Vec::new(), None);
        };
        let outcome = kill::kill_tree(&target, self.config.kill_grace).await;
        self.conclude_kill(s, source, outcome).await
    }

    /// Kills several sessions with one sweep of the process table per step.
    async fn kill_sessions(
        &self,
        sessions: &[Arc<Session>],
        source: KillSource,
    ) -> Vec<KillAnswer> {
        let mut started = Vec::new();
        let mut answers = Vec::new();
        for s in sessions {
            match begin_kill(s, source) {
                Some(target) => started.push((Arc::clone(s), target)),
                None => answers.push(self.kill_answer(
                    s,
                    source,
                    KillStatus::AlreadyExited,
                    Vec::new(),
                    None,
                )),
            }
        }
        let targets: Vec<kill::KillTarget> = started.iter().map(|(_, t)| t.clone()).collect();
        let outcomes = kill::kill_trees(&targets, self.config.kill_grace).await;
        // Concluded together: each waits for its reader to finish the session, and
        // thousands of sessions (a shutdown) must not wait one after another.
        let concluded = futures::future::join_all(
            started
                .iter()
                .zip(outcomes)
                .map(|((s, _), outcome)| self.conclude_kill(s, source, outcome)),
        )
        .await;
        answers.extend(concluded);
        answers
    }

    /// Turns a kill outcome into the answer: `killed` once the reader has finished the
    /// session, `kill_incomplete` (session left running) when something survived.
    async fn conclude_kill(
        &self,
        s: &Arc<Session>,
        source: KillSource,
        outcome: kill::KillOutcome,
    ) -> KillAnswer {
        let answer = self.conclude_tree_kill(s, source, outcome).await;
        let (Some(scope), Some(dispatcher)) = (&s.scope, &self.config.dispatcher) else {
            return answer;
        };
        if answer.status == KillStatus::KillIncomplete {
            return answer;
        }
        match dispatcher.stop_scope(&scope.unit, &scope.env).await {
            Ok(()) => answer,
            Err(err) => {
                let detail = err.to_string();
                tracing::warn!(session_id = %s.id, unit = %scope.unit, error = %detail, "worker scope not stopped");
                KillAnswer {
                    status: KillStatus::KillIncomplete,
                    error: Some(format!(
                        "kill incomplete: the tree is gone but its scope was not stopped: {detail}"
                    )),
                    scope_stop_failed: Some(detail),
                    ..answer
                }
            }
        }
    }

    /// The tree kill's part of [`Inner::conclude_kill`].
    async fn conclude_tree_kill(
        &self,
        s: &Arc<Session>,
        source: KillSource,
        outcome: kill::KillOutcome,
    ) -> KillAnswer {
        if outcome.gone || outcome.identity_mismatch {
            // The reader finishes the session once the child is reaped; it drains only
            // what is already buffered because a kill was requested.
            let mut done = s.done.subscribe();
            let limit = self.config.idle_drain + Duration::from_secs(5);
            if tokio::time::timeout(limit, done.wait_for(|d| *d))
                .await
                .is_err()
            {
                tracing::error!(session_id = %s.id, "killed session did not finish in time");
            }
            let finished = s.state().finished.is_some();
            let status = if finished {
                KillStatus::Killed
            } else {
                KillStatus::KillIncomplete
            };
            return self.kill_answer(s, source, status, Vec::new(), None);
        }
        {
            let mut st = s.state();
            if st.finished.is_none() {
                st.kill_source = None;
            }
        }
        s.kill_requested.send_replace(false);
        let error = format!(
            "kill incomplete: {} process(es) still alive ({}); session running",
            outcome.survivors.len(),
            outcome
                .survivors
                .iter()
                .map(i32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        self.kill_answer(
            s,
            source,
            KillStatus::KillIncomplete,
            outcome.survivors,
            Some(error),
        )
    }

    fn kill_answer(
        &self,
        s: &Session,
        source: KillSource,
        status: KillStatus,
        survivors: Vec<i32>,
        error: Option<String>,
    ) -> KillAnswer {
        s.mark_read();
        let sized = self.sized(s, Route::Kill);
        let running = s.status() == SessionStatus::Running;
        KillAnswer {
            session_id: s.id.clone(),
            status,
            completion_reason: sized.reason,
            termination_source: sized.source.unwrap_or(source),
            exit_code: sized.exit.and_then(|e| e.code),
            output: sized.output,
            output_cut: sized.cut,
            survivors,
            process_running: running,
            error: if status == KillStatus::KillIncomplete && error.is_none() {
                Some(
                    "kill incomplete: the session did not finish after its tree was killed"
                        .to_owned(),
                )
            } else {
                error
            },
            scope_stop_failed: None,
        }
    }
}

/// Marks `s` as being killed by `source` and returns its target; `None` when it has
/// already finished.
fn begin_kill(s: &Session, source: KillSource) -> Option<kill::KillTarget> {
    {
        let mut st = s.state();
        if st.finished.is_some() {
            return None;
        }
        st.kill_source = Some(source);
    }
    s.kill_requested.send_replace(true);
    Some(kill::KillTarget {
        pid: s.pid,
        pgid: s.pgid,
        start_time: s.start_time,
        session_tag: s.id.as_str().to_owned(),
    })
}

/// What a spawn started.
enum Started {
    Pipe(spawn::PipeChild),
    Pty(spawn::PtyChild, u16, u16),
    Shim(Box<ShimStarted>),
}

/// A job started under its own shim, attached.
struct ShimStarted {
    pid: i32,
    start_time: Option<u64>,
    pty: bool,
    shim: herd_persistence::ShimRef,
    attached: crate::shim::link::Attached,
    dir: herd_persistence::ShimDir,
}

/// What runs a session's output and exit.
enum Runner {
    InProcess(Source, Waiter),
    Shim {
        attached: crate::shim::link::Attached,
        dir: herd_persistence::ShimDir,
        shim_pid: i32,
    },
}

/// Why a shim did not start a job.
#[derive(Debug)]
enum ShimStartError {
    /// No PTY could be opened; nothing ran.
    PtyUnavailable(String),
    /// Anything else.
    Io(std::io::Error),
}

impl ShimStartError {
    fn into_io(self) -> std::io::Error {
        match self {
            ShimStartError::PtyUnavailable(message) => std::io::Error::other(message),
            ShimStartError::Io(error) => error,
        }
    }
}

/// A PTY that could not be opened: the note the answer carries and the environment
/// of the pipe child that runs instead (without the PTY entries it behaves as it would
/// have without asking for a PTY).
fn pipe_fallback(
    error: &dyn std::fmt::Display,
    env: &std::collections::BTreeMap<OsString, OsString>,
    overrides: &[(String, String)],
) -> (String, std::collections::BTreeMap<OsString, OsString>) {
    tracing::warn!(%error, "no PTY available; running on pipes instead");
    (
        format!("a PTY could not be opened ({error}); the command runs on pipes instead"),
        without_pty_entries(env.clone(), overrides),
    )
}

/// The environment of a PTY request that fell back to pipes: the PTY-only defaults
/// go unless the caller set them.
fn without_pty_entries(
    mut env: std::collections::BTreeMap<OsString, OsString>,
    overrides: &[(String, String)],
) -> std::collections::BTreeMap<OsString, OsString> {
    for name in ["PAGER", "GIT_PAGER", "TERM"] {
        let set_by_caller = overrides.iter().any(|(k, _)| k == name);
        let inherited = std::env::var_os(name);
        if !set_by_caller {
            match inherited {
                Some(v) => {
                    env.insert(name.into(), v);
                }
                None => {
                    env.remove(&OsString::from(name));
                }
            }
        }
    }
    env
}

/// `180` for whole seconds, `0.3` otherwise (a test's sub-second cap still reads right).
fn seconds_text(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

fn already_exited() -> StdinAnswer {
    StdinAnswer {
        status: StdinStatus::AlreadyExited,
        bytes_written: None,
        message: Some("the process has already finished".to_owned()),
    }
}

fn stdin_error(message: &str) -> StdinAnswer {
    StdinAnswer {
        status: StdinStatus::Error,
        bytes_written: None,
        message: Some(message.to_owned()),
    }
}

async fn write_input(s: &Session, data: &[u8]) -> StdinAnswer {
    let handle = {
        let st = s.state();
        if st.finished.is_some() {
            return already_exited();
        }
        st.stdin.clone()
    };
    match handle {
        Some(Stdin::Pipe(tx)) => write_pipe(&tx, data).await,
        Some(Stdin::Pty(master)) => write_pty(&master, data).await,
        Some(Stdin::Shim(link)) => {
            let body = data.to_vec();
            let answer = link
                .request(
                    |id| {
                        (
                            crate::shim::wire::ToShim::Stdin {
                                id,
                                len: body.len(),
                            },
                            body,
                        )
                    },
                    STDIN_WRITE_TIMEOUT,
                )
                .await;
            match answer {
                Ok(()) => StdinAnswer {
                    status: StdinStatus::Ok,
                    bytes_written: Some(data.len()),
                    message: None,
                },
                Err(message) => stdin_error(&message),
            }
        }
        None => stdin_error("stdin is closed; the process can no longer read input"),
    }
}

async fn write_pipe(tx: &tokio::net::unix::pipe::Sender, data: &[u8]) -> StdinAnswer {
    let write = async {
        let mut rest = data;
        while !rest.is_empty() {
            tx.writable().await?;
            match tx.try_write(rest) {
                Ok(n) => rest = &rest[n..],
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    };
    finish_write(
        tokio::time::timeout(STDIN_WRITE_TIMEOUT, write).await,
        data.len(),
    )
}

async fn write_pty(master: &tokio::io::unix::AsyncFd<spawn::MasterFd>, data: &[u8]) -> StdinAnswer {
    let write = async {
        let mut rest = data;
        while !rest.is_empty() {
            let mut guard = master.writable().await?;
            match guard.try_io(|fd| {
                nix::unistd::write(std::os::fd::AsFd::as_fd(fd.get_ref()), rest)
                    .map_err(std::io::Error::from)
            }) {
                Ok(Ok(n)) => rest = &rest[n..],
                Ok(Err(e)) => return Err(e),
                Err(_would_block) => {}
            }
        }
        Ok(())
    };
    finish_write(
        tokio::time::timeout(STDIN_WRITE_TIMEOUT, write).await,
        data.len(),
    )
}

fn finish_write(
    result: Result<std::io::Result<()>, tokio::time::error::Elapsed>,
    n: usize,
) -> StdinAnswer {
    match result {
        Ok(Ok(())) => StdinAnswer {
            status: StdinStatus::Ok,
            bytes_written: Some(n),
            message: None,
        },
        Ok(Err(e)) => stdin_error(&format!("write to the process failed: {e}")),
        Err(_) => stdin_error("the process is not reading its input; nothing more was written"),
    }
}

/// Refuses a session name that could be read as an id or a prefix of one, or
/// that a person could not type (see [`SpawnRequest::name`]).
fn check_name(name: &str) -> Result<(), SpawnError> {
    let refuse = |why: &str| {
        Err(SpawnError::InvalidRequest {
            field: "name",
            message: format!("{name:?} {why}"),
        })
    };
    if name.is_empty() || name.chars().count() > 64 {
        return refuse("must be 1 to 64 characters");
    }
    if !name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
    {
        return refuse("may hold only letters, digits, `.`, `_` and `-` (no `:` or spaces)");
    }
    if name.starts_with(id::ID_PREFIX) || name.chars().all(|c| c.is_ascii_hexdigit()) {
        return refuse("looks like a session id or a prefix of one; give it a letter beyond a-f");
    }
    Ok(())
}

/// Whether two drafts of one completion would be recorded alike: the fields a
/// kill, an adoption or a handoff can change between the draft and the lock.
fn same_completion(a: &Event, b: &Event) -> bool {
    match (a, b) {
        (
            Event::Completion {
                owner_task_id: o1,
                completion_reason: r1,
                termination_source: s1,
                exit_code: e1,
                signal: g1,
                handoff_note: h1,
                ..
            },
            Event::Completion {
                owner_task_id: o2,
                completion_reason: r2,
                termination_source: s2,
                exit_code: e2,
                signal: g2,
                handoff_note: h2,
                ..
            },
        ) => o1 == o2 && r1 == r2 && s1 == s2 && e1 == e2 && g1 == g2 && h1 == h2,
        _ => false,
    }
}

#[cfg(test)]
mod tests;
