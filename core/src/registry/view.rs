//! The one builder of answers: what a poll, a wait, a kill or a log page says about a
//! session, whether the session is live in memory or known only by its result
//! receipt. Both kinds are first seen as a [`Subject`] (who it is, how it ended so
//! far), and every answer and every piece of output is built from that, so a
//! receipt's answer is the live answer's shape with the receipt's facts.
//!
//! Owns nothing; holds no lock. Output leaves only through [`Inner::show_subject`],
//! which passes it through the output pipeline with the route and the owner's
//! identity.

use std::path::PathBuf;

use herd_hooks::{OutputContext, Route, Shown, Window};
use herd_persistence::ResultReceipt;

use super::Inner;
use super::durable::reason_from_name;
use crate::answers::{
    CompletionReason, KillAnswer, KillStatus, LogAnswer, PollAnswer, SessionStatus, WaitAnswer,
    WaitStatus,
};
use crate::config::KillSource;
use crate::id::SessionId;
use crate::output::page::TextPage;
use crate::session::{ExitInfo, Session, State};

/// The most bytes of the log file one log page carries; a longer line is cut.
pub(super) const LOG_PAGE_MAX_BYTES: usize = 200_000;

/// What an answer is about: a live session or a receipt, and how it ended so far.
#[derive(Debug)]
pub(super) struct Subject<'a> {
    pub(super) id: SessionId,
    /// The command as it ran (masked on the way out).
    command: &'a str,
    owner: String,
    /// The return code the output hooks see.
    return_code: Option<i32>,
    exit: Option<ExitInfo>,
    /// `None` while the session runs.
    reason: Option<CompletionReason>,
    source: Option<KillSource>,
    pub(super) log_path: PathBuf,
    time_limit_seconds: Option<u64>,
    /// Output bytes the log did not keep (a full disk, or its cap).
    bytes_not_kept: u64,
    /// When it became ready, if it did.
    ready_at: Option<std::time::SystemTime>,
}

impl<'a> Subject<'a> {
    /// A live session as `st` says now.
    pub(super) fn live(s: &'a Session, st: &State) -> Subject<'a> {
        let fin = st.finished.as_ref();
        let mut subject = Subject::live_as(s, &st.owner_task_id, fin.and_then(|f| f.exit));
        subject.reason = fin.map(|f| f.reason);
        subject.source = fin.and_then(|f| f.source);
        subject.ready_at = st.ready_at;
        subject
    }

    /// A live session for `owner` with `exit`, before its state records them (the
    /// completion route).
    pub(super) fn live_as(s: &'a Session, owner: &str, exit: Option<ExitInfo>) -> Subject<'a> {
        Subject {
            id: s.id.clone(),
            command: &s.command,
            owner: owner.to_owned(),
            return_code: exit.and_then(|e| e.code.or(e.signal.map(|sig| 128 + sig))),
            exit,
            reason: None,
            source: None,
            log_path: s.log_path.clone(),
            time_limit_seconds: s.time_limit.map(|t| t.limit.as_secs()),
            bytes_not_kept: s.tail().bytes_not_kept(),
            ready_at: None,
        }
    }

    /// A finished session only its receipt knows; its log is at `log_path`.
    pub(super) fn receipt(id: SessionId, r: &'a ResultReceipt, log_path: PathBuf) -> Subject<'a> {
        Subject {
            id,
            command: &r.command,
            owner: r.owner_task_id.clone(),
            return_code: r.exit_code,
            exit: r.exit_code.map(|code| ExitInfo {
                code: Some(code),
                signal: None,
            }),
            reason: Some(reason_from_name(&r.reason)),
            source: KillSource::from_name(&r.source),
            log_path,
            time_limit_seconds: None,
            bytes_not_kept: r.bytes_not_kept,
            ready_at: r.ready_at.map(super::durable::from_unix_seconds),
        }
    }

    /// Running until it has a completion reason.
    pub(super) fn status(&self) -> SessionStatus {
        if self.reason.is_some() {
            SessionStatus::Exited
        } else {
            SessionStatus::Running
        }
    }

    /// A kill answer; `source` stands in while the subject has none.
    pub(super) fn kill_answer(
        self,
        status: KillStatus,
        source: KillSource,
        output: Tail,
        survivors: Vec<i32>,
        process_running: bool,
        error: Option<String>,
    ) -> KillAnswer {
        KillAnswer {
            status,
            completion_reason: self.reason,
            termination_source: self.source.unwrap_or(source),
            exit_code: self.exit_code(),
            output: output.output,
            output_cut: output.cut,
            survivors,
            process_running,
            error,
            scope_stop_failed: None,
            session_id: self.id,
        }
    }

    fn exit_code(&self) -> Option<i32> {
        self.exit.and_then(|e| e.code)
    }

    fn signal(&self) -> Option<i32> {
        self.exit.and_then(|e| e.signal)
    }
}

/// A tail of output as it leaves, and whether anything before it is missing.
#[derive(Debug)]
pub(super) struct Tail {
    pub(super) output: Shown,
    pub(super) cut: bool,
}

/// The poll fields only a live session has.
#[derive(Debug, Default)]
pub(super) struct PollExtra {
    pub(super) pid: i32,
    pub(super) uptime_seconds: u64,
    pub(super) bytes_not_kept: u64,
    pub(super) total_ingested: u64,
    pub(super) note: Option<String>,
    pub(super) replaces: Option<SessionId>,
    pub(super) containment: crate::answers::Containment,
    pub(super) leftovers: Vec<herd_persistence::Leftover>,
    pub(super) usage: Option<crate::answers::TreeUsage>,
}

/// A sized output snapshot with the session's exit fields.
#[derive(Debug)]
pub(crate) struct Sized {
    pub(crate) output: Shown,
    pub(crate) cut: bool,
    pub(crate) exit: Option<ExitInfo>,
    pub(crate) reason: Option<CompletionReason>,
}

impl Inner {
    /// The session's command line as it may leave herd: secrets masked.
    pub(crate) fn shown_command(&self, s: &Session) -> Shown {
        self.hooks.show_command(&s.command)
    }

    /// A live session's `window` as it leaves by `route`. Its state is read first
    /// and released before the hooks run: a slow hook holds no lock.
    pub(crate) fn show(&self, s: &Session, route: Route, window: Window<'_>) -> Shown {
        let subject = Subject::live(s, &s.state());
        self.show_subject(&subject, route, window)
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
        self.show_subject(&Subject::live_as(s, owner, exit), route, window)
    }

    /// A live session as a subject, with the tail of its `completion_output_chars`
    /// as it leaves by `route`.
    pub(super) fn sized_subject<'a>(&self, s: &'a Session, route: Route) -> (Subject<'a>, Tail) {
        let growing = s.status() == SessionStatus::Running;
        let (text, cut, key_open) = s.text();
        // The state lock is released before the hooks run.
        let subject = Subject::live(s, &s.state());
        let tail = self.tail_of(
            &subject,
            route,
            &text,
            (cut, growing, key_open),
            s.completion_chars,
        );
        (subject, tail)
    }

    /// The one sizing helper: the tail of `completion_output_chars`, cut flag, exit
    /// fields.
    pub(crate) fn sized(&self, s: &Session, route: Route) -> Sized {
        let (subject, tail) = self.sized_subject(s, route);
        Sized {
            output: tail.output,
            cut: tail.cut,
            exit: subject.exit,
            reason: subject.reason,
        }
    }

    /// The one way output leaves herd: `window` through the hooks room as the
    /// subject owner's, redacted with its context. Called with no lock held: the
    /// hooks may be slow.
    pub(super) fn show_subject(
        &self,
        subject: &Subject<'_>,
        route: Route,
        window: Window<'_>,
    ) -> Shown {
        let ctx = OutputContext {
            route,
            command: subject.command,
            return_code: subject.return_code,
            owner_task_id: &subject.owner,
            session_id: subject.id.as_str(),
            backend: "local",
            partial: false,
        };
        self.hooks.show(&ctx, window)
    }

    /// The last `chars` characters of `text` (a tail that was `cut` already, still
    /// `growing` while the session runs, starting inside a private-key block when
    /// `key_open`) as they leave by `route`.
    pub(super) fn tail_of(
        &self,
        subject: &Subject<'_>,
        route: Route,
        text: &str,
        (cut, growing, key_open): (bool, bool, bool),
        chars: usize,
    ) -> Tail {
        let window = Window::last_chars(text, chars)
            .growing(growing)
            .after_open_key(key_open);
        let cut = cut || window.omits_start();
        Tail {
            output: self.show_subject(subject, route, window),
            cut,
        }
    }

    /// A poll answer.
    pub(super) fn poll_answer(
        &self,
        subject: Subject<'_>,
        preview: Tail,
        extra: PollExtra,
    ) -> PollAnswer {
        PollAnswer {
            command: self.hooks.show_command(subject.command),
            status: subject.status(),
            pid: extra.pid,
            uptime_seconds: extra.uptime_seconds,
            output_preview: preview.output,
            exit_code: subject.exit_code(),
            signal: subject.signal(),
            completion_reason: subject.reason,
            termination_source: subject.source,
            output_cut: preview.cut,
            log_path: subject.log_path,
            bytes_not_kept: extra.bytes_not_kept,
            total_ingested: extra.total_ingested,
            note: extra.note,
            time_limit_seconds: subject.time_limit_seconds,
            replaces: extra.replaces,
            containment: extra.containment,
            leftovers: extra.leftovers,
            usage: extra.usage,
            ready_at: subject.ready_at.map(crate::text::rfc3339),
            session_id: subject.id,
        }
    }

    /// A wait answer.
    pub(super) fn wait_answer(
        &self,
        subject: Subject<'_>,
        status: WaitStatus,
        output: Tail,
        process_running: bool,
        note: Option<String>,
    ) -> WaitAnswer {
        WaitAnswer {
            status,
            command: self.hooks.show_command(subject.command),
            exit_code: subject.exit_code(),
            signal: subject.signal(),
            completion_reason: subject.reason,
            termination_source: subject.source,
            output: output.output,
            output_cut: output.cut,
            process_running,
            log_path: subject.log_path,
            note,
            time_limit_seconds: subject.time_limit_seconds,
            bytes_not_kept: subject.bytes_not_kept,
            ready_at: subject.ready_at.map(crate::text::rfc3339),
            session_id: subject.id,
        }
    }

    /// A log page's output as it leaves, and the note of a line it cut.
    pub(super) fn log_page(
        &self,
        subject: &Subject<'_>,
        page: &TextPage,
    ) -> (Shown, Option<String>) {
        let output = self.show_subject(subject, Route::Log, page.window());
        page.marked(output, LOG_PAGE_MAX_BYTES)
    }

    /// A log answer of `page`, already shown as `output`.
    pub(super) fn log_answer_of(
        &self,
        subject: Subject<'_>,
        page: &TextPage,
        output: Shown,
        note: Option<String>,
    ) -> LogAnswer {
        LogAnswer {
            command: self.hooks.show_command(subject.command),
            status: subject.status(),
            output,
            total_lines: page.n_total_lines,
            offset: page.first_line_idx,
            showing: format!("{} lines", page.n_lines),
            log_path: subject.log_path,
            last_line_open: page.ends_unfinished(),
            note,
            session_id: subject.id,
        }
    }
}

mod par;
mod receipt;

pub(super) use par::par_map;
