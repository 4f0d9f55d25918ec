//! Answers about a session only its result receipt knows: the live answers'
//! builder fed with the receipt's facts, each saying so in its note.

use herd_hooks::{Route, Window};
use herd_persistence::ResultReceipt;

use super::{PollExtra, Subject};
use crate::answers::{
    KillAnswer, KillStatus, ListRow, LogAnswer, LogChunk, ModeName, PollAnswer, SessionStatus,
    WaitAnswer, WaitStatus,
};
use crate::config::KillSource;
use crate::error::{Error, LookupError};
use crate::id::SessionId;
use crate::output::page::{self, TextPage};
use crate::registry::durable::{from_unix_seconds, reason_from_name};
use crate::registry::{
    Inner, LIST_COMMAND_CHARS, LIST_PREVIEW_CHARS, LOG_DEFAULT_LINES, POLL_PREVIEW_CHARS, logs,
};

/// The note of an answer served from a receipt.
const RECEIPT_NOTE: &str = "answered from the durable result receipt: the session finished and is no longer in memory (pruned, or herd restarted); output is the redacted tail kept with the receipt";

/// The note of a log page of a session only a receipt knows, paged from its log file.
const RECEIPT_LOG_NOTE: &str = "answered from the session's log file: the session finished and is no longer in memory (pruned, or herd restarted); its durable result receipt keeps the exit fields";

impl Inner {
    /// A poll answered from a receipt.
    pub(crate) fn poll_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
    ) -> Result<PollAnswer, Error> {
        let (session_id, r) = self.durable.receipt_lookup(id, miss)?;
        let log_path = self.home.session_log_path(session_id.as_str());
        let total_ingested = std::fs::metadata(&log_path)
            .map_or(0, |m| m.len())
            .saturating_add(r.bytes_not_kept);
        let subject = Subject::receipt(session_id, &r, log_path);
        let preview = self.tail_of(
            &subject,
            Route::Poll,
            &r.output,
            (r.output_cut, false, false),
            POLL_PREVIEW_CHARS,
        );
        let extra = PollExtra {
            uptime_seconds: (r.finished_at - r.started_at).max(0.0) as u64,
            total_ingested,
            bytes_not_kept: r.bytes_not_kept,
            note: Some(RECEIPT_NOTE.to_owned()),
            ..PollExtra::default()
        };
        Ok(self.poll_answer(subject, preview, extra))
    }

    /// A log page of a session only a receipt knows: paged from its log file like a
    /// live session's, or from the receipt's tail when the file cannot serve it.
    pub(crate) fn log_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> Result<LogAnswer, Error> {
        let (session_id, r) = self.durable.receipt_lookup(id, miss)?;
        let limit = limit.unwrap_or(LOG_DEFAULT_LINES);
        let log_path = self.home.session_log_path(session_id.as_str());
        let subject = Subject::receipt(session_id, &r, log_path);
        let why_not_file = if r.bytes_not_kept > 0 {
            let held = std::fs::metadata(&subject.log_path).map_or(0, |m| m.len());
            Some(page::cut_log(
                held,
                r.bytes_not_kept,
                self.config.log_cap_bytes,
            ))
        } else {
            let path = &subject.log_path;
            match TextPage::of_file(
                path,
                offset,
                limit,
                super::LOG_PAGE_MAX_BYTES,
                false,
                &|_| None,
            ) {
                Ok(Some(page)) => {
                    let (output, cut_note) = self.log_page(&subject, &page);
                    let note = std::iter::once(RECEIPT_LOG_NOTE.to_owned())
                        .chain(cut_note)
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Ok(self.log_answer_of(subject, &page, output, Some(note)));
                }
                // A session that printed nothing has no log; its receipt is empty too.
                Ok(None) if r.output.is_empty() => None,
                Ok(None) => Some(format!("the log file {} is missing", path.display())),
                Err(error) => {
                    tracing::warn!(session_id = %subject.id, path = %path.display(), %error, "session log unreadable; paging the receipt's tail");
                    Some(format!(
                        "the log file {} cannot be read ({error})",
                        path.display()
                    ))
                }
            }
        };
        let page = TextPage::of_text(&r.output, offset, limit);
        let note = match why_not_file {
            Some(why) => format!(
                "{RECEIPT_NOTE}; {}",
                page::fallback_note(&why, "the receipt's tail", !r.output_cut)
            ),
            None => RECEIPT_NOTE.to_owned(),
        };
        let (output, _) = self.log_page(&subject, &page);
        Ok(self.log_answer_of(subject, &page, output, Some(note)))
    }

    /// A log chunk of a session only a receipt knows: read from its log file.
    pub(crate) fn log_chunk_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
        from_byte: u64,
        max_bytes: usize,
    ) -> Result<LogChunk, Error> {
        let (session_id, r) = self.durable.receipt_lookup(id, miss)?;
        let path = self.home.session_log_path(session_id.as_str());
        let Some(read) = logs::read_chunk(&path, from_byte, max_bytes, false, &|_| None)? else {
            // A session that printed nothing never made a log file: its log is empty.
            if r.output.is_empty() && !r.output_cut {
                return Ok(LogChunk {
                    session_id,
                    output: herd_hooks::Shown::default(),
                    next_byte: 0,
                    is_running: false,
                });
            }
            return Err(Error::Io {
                path,
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            });
        };
        let subject = Subject::receipt(session_id, &r, path);
        Ok(LogChunk {
            output: self.show_subject(&subject, Route::Log, read.window()),
            next_byte: read.next_byte,
            is_running: false,
            session_id: subject.id,
        })
    }

    /// A wait answered from a receipt: the session finished long ago.
    pub(crate) fn wait_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
    ) -> Result<WaitAnswer, Error> {
        let (session_id, r) = self.durable.receipt_lookup(id, miss)?;
        let log_path = self.home.session_log_path(session_id.as_str());
        let subject = Subject::receipt(session_id, &r, log_path);
        let output = self.tail_of(
            &subject,
            Route::Wait,
            &r.output,
            (r.output_cut, false, false),
            self.config.completion_output_chars,
        );
        let note = Some(RECEIPT_NOTE.to_owned());
        Ok(self.wait_answer(subject, WaitStatus::Exited, output, false, note))
    }

    /// A kill of a session only a receipt knows: it already finished; nothing is
    /// signalled.
    pub(crate) fn kill_from_receipt(
        &self,
        id: &str,
        miss: LookupError,
        source: KillSource,
    ) -> Result<KillAnswer, Error> {
        let (session_id, r) = self.durable.receipt_lookup(id, miss)?;
        let log_path = self.home.session_log_path(session_id.as_str());
        let subject = Subject::receipt(session_id, &r, log_path);
        let output = self.tail_of(
            &subject,
            Route::Kill,
            &r.output,
            (r.output_cut, false, false),
            self.config.completion_output_chars,
        );
        Ok(subject.kill_answer(
            KillStatus::AlreadyExited,
            source,
            output,
            Vec::new(),
            false,
            None,
        ))
    }

    /// The `list` row of a session only the store knows: the live row's
    /// shape, its preview and command through the pipeline with its owner.
    pub(crate) fn row_from_receipt(&self, r: &ResultReceipt) -> Option<ListRow> {
        let id = SessionId::parse(&r.id)?;
        let log_path = self.home.session_log_path(&r.id);
        let subject = Subject::receipt(id.clone(), r, log_path);
        let preview = self.show_subject(
            &subject,
            Route::ListPreview,
            Window::last_chars(&r.output, LIST_PREVIEW_CHARS),
        );
        let started = from_unix_seconds(r.started_at);
        let ran = (r.finished_at - r.started_at).max(0.0) as u64;
        Some(ListRow {
            name: r.name.clone(),
            session_id: id,
            command: self.hooks.show_command_head(&r.command, LIST_COMMAND_CHARS),
            cwd: r.cwd.clone().unwrap_or_default(),
            pid: 0,
            mode: if r.pty { ModeName::Pty } else { ModeName::Pipe },
            owner_task_id: r.owner_task_id.clone(),
            task_id: r.task_id.clone(),
            session_key: (!r.session_key.is_empty()).then(|| r.session_key.clone()),
            started_at: crate::text::rfc3339(started),
            uptime_seconds: started.elapsed().map_or(0, |d| d.as_secs()),
            status: SessionStatus::Exited,
            output_preview: preview,
            exit_code: r.exit_code,
            signal: r.signal,
            duration_seconds: Some(ran),
            completion_reason: Some(reason_from_name(&r.reason)),
            termination_source: KillSource::from_name(&r.source),
            notify_on_complete: r.notify,
            persist_on_release: r.persist_on_release,
            time_limit_seconds: r.time_limit_seconds,
            replaces: r.replaces.as_deref().and_then(SessionId::parse),
            // The receipt does not record what held the tree, and a session whose
            // shim still holds leftovers is back in memory (`lingering`), not here.
            containment: crate::answers::Containment::default(),
            leftovers: Vec::new(),
            usage: None,
            ready_at: r.ready_at.map(from_unix_seconds).map(crate::text::rfc3339),
        })
    }
}
