//! The query API: lookups, poll, log pages and chunks, wait, list and the counts a
//! front end asks for. Reads the table and the sessions; changes nothing but a
//! session's read mark. A session not in memory is answered from its receipt
//! (`view::receipt`); every answer is built by `view`.
//!
//! Never touches the table's fields (it asks `table`), never does file IO under the
//! table lock.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use herd_hooks::{Route, Shown, Window};
use tokio_util::sync::CancellationToken;

use super::queue::QueuedWait;
use super::table_room::Pool;
use super::view::{PollExtra, Subject};
use super::{
    Inner, LIST_COMMAND_CHARS, LIST_PREVIEW_CHARS, LOG_DEFAULT_LINES, LOG_PAGE_MAX_BYTES,
    LogFollower, POLL_PREVIEW_CHARS, Registry, logs,
};
use crate::answers::{
    ListRow, LogAnswer, LogChunk, PollAnswer, SessionStatus, WaitAnswer, WaitStatus,
};
use crate::config::ListFilter;
use crate::error::{Error, LookupError};
use crate::id::SessionId;
use crate::output::page::{self, TextPage};
use crate::session::Session;
use crate::text;

impl Registry {
    /// Resolves a full id or a unique prefix.
    ///
    /// # Errors
    /// [`LookupError::NotFound`], [`LookupError::Ambiguous`], [`LookupError::TooShort`].
    pub fn lookup(&self, id_or_prefix: &str) -> Result<SessionId, LookupError> {
        match self.inner.lookup_or_queued(id_or_prefix) {
            Ok(s) => Ok(s.id.clone()),
            Err(miss) => self
                .inner
                .durable
                .receipt_lookup(id_or_prefix, miss)
                .map(|(id, _)| id),
        }
    }

    /// Resolves a full id or a unique prefix and names the session's owner,
    /// for a front end that acts for one owner and must not reach another's.
    ///
    /// # Errors
    /// As [`Registry::lookup`].
    pub fn lookup_owned(&self, id_or_prefix: &str) -> Result<(SessionId, String), LookupError> {
        match self.inner.lookup_or_queued(id_or_prefix) {
            Ok(s) => Ok((s.id.clone(), s.state().owner_task_id.clone())),
            Err(miss) => self
                .inner
                .durable
                .receipt_lookup(id_or_prefix, miss)
                .map(|(id, r)| (id, r.owner_task_id)),
        }
    }

    /// Waits until the receipt of `id` (an id, prefix or name) is committed, when
    /// its session finished and the commit is on its way; at once otherwise. A front
    /// end sends a `poll` answer about a finished session after this, so an answer
    /// never precedes the commit of what it reports.
    pub async fn result_committed(&self, id: &str) {
        if let Ok(s) = self.inner.lookup_or_queued(id) {
            self.inner.durable.receipt_attempted(&s.id).await;
        }
    }

    /// Status, uptime, a 1,000-character preview and exit fields once exited.
    ///
    /// # Errors
    /// [`Error::Lookup`] when the id does not resolve.
    pub fn poll(&self, id: &str) -> Result<PollAnswer, Error> {
        let s = match self.inner.lookup_or_queued(id) {
            Ok(s) => s,
            Err(miss) => return self.inner.poll_from_receipt(id, miss),
        };
        let growing = s.status() == SessionStatus::Running;
        let (text, cut, key_open) = s.text();
        // The state lock is released before the hooks run.
        let subject = Subject::live(&s, &s.state());
        let preview = self.inner.tail_of(
            &subject,
            Route::Poll,
            &text,
            (cut, growing, key_open),
            POLL_PREVIEW_CHARS,
        );
        s.mark_read();
        let (bytes_not_kept, total_ingested) = {
            let tail = s.tail();
            (tail.bytes_not_kept(), tail.total_ingested())
        };
        let containment = s.state().containment;
        let leftovers = super::held::held_leftovers(&s);
        let queued = self.inner.queue.is_queued(&s.id);
        let extra = PollExtra {
            pid: s.pid,
            uptime_seconds: s.uptime_seconds(),
            bytes_not_kept,
            total_ingested,
            note: self.inner.durable.session_note(&s),
            replaces: s.origin.replaces.clone(),
            containment,
            usage: self
                .inner
                .tree_usage(&s, containment, !leftovers.is_empty(), Duration::ZERO),
            leftovers,
        };
        let mut answer = self.inner.poll_answer(subject, preview, extra);
        if queued {
            answer.status = SessionStatus::Queued;
        }
        Ok(answer)
    }

    /// A page of output lines over the whole output the session's log file holds: the
    /// last `limit` (default 200) lines, or `limit` lines from line `offset` (0 is the
    /// first line the session printed), with the log's total line count.
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
        let s = match self.inner.lookup_or_queued(id) {
            Ok(s) => s,
            Err(miss) => return self.inner.log_from_receipt(id, miss, offset, limit),
        };
        let limit = limit.unwrap_or(LOG_DEFAULT_LINES);
        let is_running = s.status() == SessionStatus::Running;
        let bytes_not_kept = s.tail().bytes_not_kept();
        let mut notes: Vec<String> = self.inner.durable.session_note(&s).into_iter().collect();
        let why_not_file = if bytes_not_kept > 0 {
            let held = std::fs::metadata(&s.log_path).map_or(0, |m| m.len());
            Some(page::cut_log(
                held,
                bytes_not_kept,
                self.inner.config.log_cap_bytes,
            ))
        } else {
            match TextPage::of_file(
                &s.log_path,
                offset,
                limit,
                LOG_PAGE_MAX_BYTES,
                is_running,
                &s.key_lookup(),
            ) {
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
        let (text, cut, key_open) = s.text();
        if let Some(why) = why_not_file {
            notes.push(page::fallback_note(
                &why,
                "the in-memory tail of the output",
                !cut,
            ));
        }
        let page = TextPage::of_text(&text, offset, limit).live(key_open, is_running);
        Ok(self.log_answer(&s, page, notes))
    }

    /// The log answer for `page` of a live session, through the hooks room.
    fn log_answer(&self, s: &Session, page: TextPage, mut notes: Vec<String>) -> LogAnswer {
        // The state lock is released before the hooks run.
        let subject = Subject::live(s, &s.state());
        let (output, cut_note) = self.inner.log_page(&subject, &page);
        s.mark_read();
        notes.extend(cut_note);
        let note = (!notes.is_empty()).then(|| notes.join("; "));
        self.inner.log_answer_of(subject, &page, output, note)
    }

    /// Up to `max_bytes` of the log file from byte `from_byte`, as text that never
    /// ends inside a character (for `logs --follow` and full dumps).
    ///
    /// A chunk ends at its last line end (a partial last line is handed out by a
    /// later call), and it is redacted with the log around it: a private-key
    /// block it starts inside is masked, a token on a line longer than the chunk is
    /// masked whole. Only a chunk with no line end at all, filling `max_bytes`, or the
    /// end of a finished session's log, ends elsewhere.
    ///
    /// # Errors
    /// [`Error::Lookup`], or [`Error::Io`] when the log cannot be read.
    pub fn log_chunk(&self, id: &str, from_byte: u64, max_bytes: usize) -> Result<LogChunk, Error> {
        let s = match self.inner.lookup_or_queued(id) {
            Ok(s) => s,
            Err(miss) => {
                return self
                    .inner
                    .log_chunk_from_receipt(id, miss, from_byte, max_bytes);
            }
        };
        let is_running = s.status() == SessionStatus::Running;
        let Some(read) = logs::read_chunk(
            &s.log_path,
            from_byte,
            max_bytes,
            is_running,
            &s.key_lookup(),
        )?
        else {
            // No log yet: it is empty, so its end is 0 wherever the read asked.
            return Ok(LogChunk {
                session_id: s.id.clone(),
                output: Shown::default(),
                next_byte: 0,
                is_running,
            });
        };
        let output = self.inner.show(&s, Route::Log, read.window());
        Ok(LogChunk {
            session_id: s.id.clone(),
            output,
            next_byte: read.next_byte,
            is_running,
        })
    }

    /// Where [`Registry::log_chunk`] from `from_byte` will end (its `next_byte`),
    /// found without redacting: only for a finished session still in the table
    /// (its log no longer grows), `None` otherwise. A dump of a long log starts
    /// the next chunk on another core with it; the caller still checks the chunk's
    /// own `next_byte`.
    ///
    /// # Errors
    /// [`Error::Io`] when the log cannot be read.
    pub fn log_chunk_end(
        &self,
        id: &str,
        from_byte: u64,
        max_bytes: usize,
    ) -> Result<Option<u64>, Error> {
        let Ok(s) = self.inner.lookup(id) else {
            return Ok(None);
        };
        if s.status() == SessionStatus::Running {
            return Ok(None);
        }
        logs::chunk_next_byte(&s.log_path, from_byte, max_bytes)
    }

    /// A follower of the session's log from `from_byte` (`logs --follow`): each
    /// read hands out the new lines, redacted as one stream with carried state
    /// (a private-key block is masked line by line as it arrives), and an idle
    /// stream releases its unfinished line unless it can still become a secret.
    ///
    /// # Errors
    /// [`Error::Lookup`], or [`Error::Io`] when the log cannot be read.
    pub fn log_follower(&self, id: &str, from_byte: u64) -> Result<LogFollower, Error> {
        let source = self.inner.log_source(id, self.inner.lookup_or_queued(id))?;
        // A follow that starts inside a key block learns so from the session's key
        // index (a lookup, however long the block), as the windowed routes do; the
        // log's look-back answers only what the index did not see.
        let known = |at: u64| source.key_known(at);
        LogFollower::open(
            Arc::clone(&self.inner),
            source.id.clone(),
            source.path.clone(),
            (&source.command, &source.owner),
            from_byte,
            &known,
        )
    }

    /// Waits for the session to finish, at most `timeout` (clamped to the wait cap,
    /// with a note), or until `interrupt` fires.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] for a zero timeout, [`Error::Lookup`].
    pub async fn wait(
        &self,
        id: &str,
        timeout: Duration,
        interrupt: Option<CancellationToken>,
    ) -> Result<WaitAnswer, Error> {
        self.wait_until(id, timeout, interrupt, false).await
    }

    /// Waits for the session to become ready or to finish, whichever comes
    /// first, as [`Registry::wait`] otherwise: the answer's status is `ready` (its
    /// `ready_at` set) or `exited` (`ready_at` says whether it was ever ready).
    ///
    /// # Errors
    /// As [`Registry::wait`].
    pub async fn wait_ready(
        &self,
        id: &str,
        timeout: Duration,
        interrupt: Option<CancellationToken>,
    ) -> Result<WaitAnswer, Error> {
        self.wait_until(id, timeout, interrupt, true).await
    }

    async fn wait_until(
        &self,
        id: &str,
        timeout: Duration,
        interrupt: Option<CancellationToken>,
        until_ready: bool,
    ) -> Result<WaitAnswer, Error> {
        if timeout.is_zero() {
            return Err(Error::InvalidArgument {
                message: "timeout must be positive (got 0s)".to_owned(),
            });
        }
        let limit = timeout.min(self.inner.config.wait_cap);
        let (s, waited) = match self.inner.wait_queued(id, limit, interrupt.clone()).await {
            QueuedWait::Answer(answer) => return answer,
            QueuedWait::Left(s, waited) => (s, waited),
            QueuedWait::NotQueued => match self.inner.lookup(id) {
                Ok(s) => (s, Duration::ZERO),
                Err(miss) => return self.inner.wait_from_receipt(id, miss),
            },
        };
        let timeout = timeout.saturating_sub(waited).max(Duration::from_millis(1));
        let cap = self
            .inner
            .config
            .wait_cap
            .saturating_sub(waited)
            .max(Duration::from_millis(1));
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
        let mut changes = self.inner.changes.subscribe();
        let ready = async {
            if !until_ready {
                return std::future::pending().await;
            }
            let _ = changes.wait_for(|_| s.state().ready_at.is_some()).await;
        };
        let interrupt = interrupt.unwrap_or_default();
        let outcome = tokio::select! {
            r = tokio::time::timeout(effective, done.wait_for(|d| *d)) => match r {
                Ok(_) => WaitStatus::Exited,
                Err(_) => WaitStatus::Timeout,
            },
            () = ready => WaitStatus::Ready,
            () = interrupt.cancelled() => WaitStatus::Interrupted,
        };
        let (finished, status) = settled(&s, until_ready, outcome);
        match status {
            WaitStatus::Exited | WaitStatus::Ready => {}
            WaitStatus::Timeout => {
                notes.push(format!(
                    "Wait window of {}s elapsed — the process is still running. This is not an error. Uptime: {}s.{}",
                    seconds_text(effective),
                    s.uptime_seconds(),
                    if s.is_notify() && self.inner.durable.emits_completion(&s) {
                        " notify_on_complete is set: you will be notified on exit — do more work instead of waiting again."
                    } else {
                        " Poll again later, or spawn with notify next time for automatic notification."
                    }
                ));
            }
            WaitStatus::Interrupted => {
                notes.push(if s.is_notify() && self.inner.durable.emits_completion(&s) {
                    "wait interrupted by a new message from the user; the process is still running and you will be notified on exit. Answer the user now.".to_owned()
                } else {
                    "wait interrupted by a new message from the user; the process is still running. Answer the user now.".to_owned()
                });
            }
        }
        if finished {
            // Answered only once the result is committed.
            self.inner.durable.receipt_attempted(&s.id).await;
        }
        notes.extend(self.inner.durable.session_note(&s));
        s.mark_read();
        let (subject, output) = self.inner.sized_subject(&s, Route::Wait);
        let note = (!notes.is_empty()).then(|| notes.join(". "));
        Ok(self
            .inner
            .wait_answer(subject, status, output, !finished, note))
    }

    /// One row per session matching `filter`, oldest first: running ones and,
    /// with `include_finished`, every finished one the store keeps.
    pub fn list(&self, filter: &ListFilter) -> Vec<ListRow> {
        self.list_since(filter, None).0
    }

    /// As [`Registry::list`], but of the finished sessions only those that finished
    /// at or after `since`; also returns how many finished before it (left out).
    /// Finished sessions come from the in-memory cache and from the store.
    pub fn list_since(
        &self,
        filter: &ListFilter,
        since: Option<SystemTime>,
    ) -> (Vec<ListRow>, usize) {
        self.list_rows(filter, since, true)
    }

    /// As [`Registry::list_since`]; without `usage` the rows leave out the trees'
    /// CPU and memory (`usage` is `None`, no cgroup file is read), for a caller
    /// that does not show them. A row's usage may be a sample up to
    /// `LIST_USAGE_MAX_AGE` (1 s) old.
    pub fn list_rows(
        &self,
        filter: &ListFilter,
        since: Option<SystemTime>,
        usage: bool,
    ) -> (Vec<ListRow>, usize) {
        let matches = |owner: &str, key: Option<&str>| {
            let by_owner = filter.owner.as_deref().map(|o| owner == o);
            let by_key = filter.session_key.as_deref().map(|k| key == Some(k));
            match (by_owner, by_key) {
                (None, None) => true,
                (a, b) => a.unwrap_or(false) || b.unwrap_or(false),
            }
        };
        let in_window = |s: &Session| match (since, s.state().finished.as_ref()) {
            (Some(since), Some(fin)) => fin.at >= since,
            _ => true,
        };
        let pool = if filter.include_finished {
            Pool::All
        } else {
            Pool::Running
        };
        let sessions: Vec<Arc<Session>> = self.inner.table.select(pool, |s| {
            let st = s.state();
            matches(&st.owner_task_id, st.session_key.as_deref())
        });
        // By the start instant: the RFC 3339 text has whole seconds only, and
        // sessions started in one second must still list in the order they started.
        let shown: Vec<&Arc<Session>> = sessions.iter().filter(|s| in_window(s)).collect();
        // Rows are built off the table's lock, on every core for a long list.
        let mut rows: Vec<(f64, SessionId, ListRow)> = super::view::par_map(&shown, |s| {
            let at = super::durable::unix_seconds(s.started_at);
            (at, s.id.clone(), self.inner.row(s, usage))
        });
        for q in self.inner.queue.placeholders() {
            let st = q.state();
            if !matches(&st.owner_task_id, st.session_key.as_deref()) {
                continue;
            }
            drop(st);
            let at = super::durable::unix_seconds(q.started_at);
            let mut row = self.inner.row(&q, usage);
            row.status = SessionStatus::Queued;
            rows.push((at, q.id.clone(), row));
        }
        let mut n_older = 0;
        if filter.include_finished {
            let known: std::collections::HashSet<SessionId> =
                sessions.iter().map(|s| s.id.clone()).collect();
            let (stored, older) = self.inner.stored_rows(filter, since, &known, matches);
            rows.extend(stored);
            n_older = older;
        }
        rows.sort_by(|a, b| a.0.total_cmp(&b.0).then_with(|| a.1.cmp(&b.1)));
        (rows.into_iter().map(|(_, _, row)| row).collect(), n_older)
    }

    /// Ids of running sessions owned by `owner` (a turn-boundary marker).
    pub fn snapshot_running_ids(&self, owner: &str) -> Vec<SessionId> {
        let mut ids: Vec<SessionId> = self
            .inner
            .table
            .select(Pool::Running, |s| s.state().owner_task_id == owner)
            .iter()
            .map(|s| s.id.clone())
            .collect();
        ids.sort();
        ids
    }

    /// Whether any session runs under container key `task_id`.
    pub fn has_active_processes(&self, task_id: &str) -> bool {
        self.inner
            .table
            .any_running(|s| s.state().task_id == task_id)
    }

    /// Waits until no notify session owned by `owner` is still pending, at most
    /// `timeout`. True when none is pending (a session leaves the running set in
    /// the same step that publishes its completion).
    pub async fn wait_for_pending_completions(&self, owner: &str, timeout: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut finishes = self.inner.finishes.subscribe();
        loop {
            let pending = self
                .inner
                .table
                .any_running(|s| s.is_notify() && s.state().owner_task_id == owner);
            if !pending {
                return true;
            }
            match tokio::time::timeout_at(deadline, finishes.changed()).await {
                Ok(Ok(())) => {}
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }
}

impl Inner {
    /// The rows of finished sessions only the store knows (not in `known`), and how
    /// many finished before `since`. The store is read outside the table lock.
    fn stored_rows(
        &self,
        filter: &ListFilter,
        since: Option<SystemTime>,
        known: &std::collections::HashSet<SessionId>,
        matches: impl Fn(&str, Option<&str>) -> bool,
    ) -> (Vec<(f64, SessionId, ListRow)>, usize) {
        // The store filters by owner; a session key (either may match) is filtered here.
        let owner = filter
            .owner
            .as_deref()
            .filter(|_| filter.session_key.is_none());
        let since = since.map(super::durable::unix_seconds);
        let listed = match self
            .durable
            .receipts()
            .list(owner, since, LIST_PREVIEW_CHARS * 4)
        {
            Ok(listed) => listed,
            Err(error) => {
                tracing::warn!(%error, "finished sessions not listed from the store");
                return (Vec::new(), 0);
            }
        };
        let rows = listed
            .receipts
            .iter()
            .filter(|r| {
                let key = (!r.session_key.is_empty()).then_some(r.session_key.as_str());
                matches(&r.owner_task_id, key)
            })
            .filter_map(|r| {
                let row = self.row_from_receipt(r)?;
                (!known.contains(&row.session_id))
                    .then(|| (r.started_at, row.session_id.clone(), row))
            })
            .collect();
        (rows, listed.n_older)
    }

    /// The head of `s`'s command as its list row shows it, redacted once per
    /// session (the spawn makes it; a restored session on its first listing).
    pub(super) fn command_head(&self, s: &Session) -> Shown {
        s.command_head
            .get_or_init(|| self.hooks.show_command_head(&s.command, LIST_COMMAND_CHARS))
            .clone()
    }

    /// The `list` row of `s`, its tree's usage only when `usage` asks.
    pub(super) fn row(&self, s: &Session, usage: bool) -> ListRow {
        let leftovers = super::held::held_leftovers(s);
        let containment = s.state().containment;
        // Files are read here, off the table's lock (the caller released it).
        let usage = if usage {
            self.tree_usage(
                s,
                containment,
                !leftovers.is_empty(),
                crate::sys::usage::LIST_USAGE_MAX_AGE,
            )
        } else {
            None
        };
        let growing = s.status() == SessionStatus::Running;
        let (text, key_open) = s.text_for_last(LIST_PREVIEW_CHARS);
        let preview = self.show(
            s,
            Route::ListPreview,
            Window::last_chars(&text, LIST_PREVIEW_CHARS)
                .growing(growing)
                .after_open_key(key_open),
        );
        let st = s.state();
        let fin = st.finished.as_ref();
        ListRow {
            name: s.name.clone(),
            session_id: s.id.clone(),
            command: self.command_head(s),
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
            containment: st.containment,
            usage,
            leftovers,
            ready_at: st.ready_at.map(text::rfc3339),
        }
    }
}

/// `180` for whole seconds, `0.3` otherwise (a test's sub-second cap still reads right).
fn seconds_text(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        d.as_secs().to_string()
    } else {
        format!("{:.1}", d.as_secs_f64())
    }
}

/// Whether the session finished, and the wait's status as its state now says:
/// ready (when waiting for readiness), exited, or what the wait itself saw.
fn settled(s: &Session, until_ready: bool, outcome: WaitStatus) -> (bool, WaitStatus) {
    let st = s.state();
    let finished = st.finished.is_some();
    let status = if until_ready && st.ready_at.is_some() {
        WaitStatus::Ready
    } else if finished {
        WaitStatus::Exited
    } else {
        outcome
    };
    (finished, status)
}
